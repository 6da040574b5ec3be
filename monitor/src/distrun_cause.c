/* distrun_cause.c - the cause a rank posted in the job's store, read when
 * the job fails.
 *
 * A rank that can explain a failure posts it with dist_post_cause under
 * DIST_KEY_CAUSE (dist/internal/launch.h: "<status> <rank> <diagnosis>\n<report>",
 * first cause wins, but a monitor's diagnosis replaces a plain cause of
 * the same status: distrun reads the key again before it prints). When a rank fails, distrun waits a bounded moment for that key
 * before it classifies the failure: the rank that meets a desync posts
 * before its call returns, so the key is normally there before its exit
 * is; a peer that stopped at the same moment may still be posting. The
 * posted status picks the exit status (DIST_E_DESYNC 10, DIST_E_TIMEOUT
 * 11; any other keeps the launcher's own classification) and the report is
 * printed once, as the last thing distrun writes. */
#include <stdio.h>
#include <string.h>

#include "distrun.h"
#include <dist/internal/launch.h> /* dist__cause_parse */

/* A cause value (dist/internal/launch.h) into q, which owns its text
 * after; frees val. False when it is malformed (said) or memory ran out. */
static bool parse_cause(void *val, size_t len, drun_posted *q) {
  const char *report;
  *q = (drun_posted){0};
  if (dist__cause_parse(val, len, &q->status, &q->rank, &report) != DIST_OK) {
    dist__run_say("ignoring a malformed cause in the job's store (%zu bytes)", len);
    dist_free(val);
    return false;
  }
  dist__cause_parse_info(val, len, &q->f);
  q->text = dist__strdup(report);
  dist_free(val);
  q->have = q->text != NULL;
  return q->have;
}

/* Reads the key (present) into p; false when it cannot be read. */
static bool read_cause(drun_job *job, drun_posted *p) {
  void *val = NULL;
  size_t len = 0;
  drun_posted q;
  if (dist_store_get(job->store, DIST_KEY_CAUSE, &val, &len) != DIST_OK ||
      !parse_cause(val, len, &q))
    return false;
  dist__free(p->text);
  *p = q;
  return true;
}

bool dist__run_cause_fetch(drun_job *job, int64_t wait_ms, drun_posted *p) {
  if (p->have || !job->store)
    return p->have;
  const char *key = DIST_KEY_CAUSE;
  if (dist_store_wait(job->store, &key, 1, wait_ms > 0 ? wait_ms : 1) != DIST_OK)
    return false; /* nothing posted (or the store is gone): distrun's own view stands */
  return read_cause(job, p);
}

/* Gets key when it is there now (a get waits for a missing key). */
static bool get_present(drun_job *job, const char *key, void **val, size_t *len) {
  bool present = false;
  return dist_store_check(job->store, &key, 1, &present) == DIST_OK && present &&
         dist_store_get(job->store, key, val, len) == DIST_OK;
}

/* The pairs the ranks of group gid reported (DIST_KEY_CAUSE_PAIRS_FMT),
 * parsed into pr (at most cap); their number. */
typedef struct pair_line {
  int reporter, marked, a, b;
  char op[32], field[32];
} pair_line;

static int read_pairs(drun_job *job, int gid, pair_line *pr, int cap) {
  char key[64];
  snprintf(key, sizeof key, DIST_KEY_CAUSE_PAIRS_FMT, gid);
  void *val = NULL;
  size_t len = 0;
  if (!get_present(job, key, &val, &len))
    return 0;
  int n = 0;
  for (const char *l = val, *end = (const char *)val + len; l < end && n < cap;) {
    const char *nl = memchr(l, '\n', (size_t)(end - l));
    if (!nl)
      break;
    pair_line x;
    if (sscanf(l, "%d %d %d %d %31s %31s", &x.reporter, &x.marked, &x.a, &x.b, x.op,
               x.field) == 6)
      pr[n++] = x;
    l = nl + 1;
  }
  dist_free(val);
  return n;
}

/* The one rank that every pair includes, or -1 (none, or both of them
 * when every report compares the same two ranks). */
static int in_every_pair(const pair_line *pr, int n) {
  int found = -1;
  for (int side = 0; side < 2; side++) {
    int r = side ? pr[0].b : pr[0].a, i = 1;
    while (i < n && (pr[i].a == r || pr[i].b == r))
      i++;
    if (i < n)
      continue;
    if (found >= 0)
      return -1;
    found = r;
  }
  return found;
}

/* Reads the cause value a reporter kept (DIST_KEY_CAUSE_BY_FMT) into q. */
static bool read_kept(drun_job *job, int reporter, drun_posted *q) {
  char key[64];
  snprintf(key, sizeof key, DIST_KEY_CAUSE_BY_FMT, reporter);
  void *val = NULL;
  size_t len = 0;
  *q = (drun_posted){0};
  return get_present(job, key, &val, &len) && parse_cause(val, len, q);
}

/* No kept report of the posted one's collective marks odd: when the posted
 * one compares odd with the rank it marks, its mark moves to odd. */
static void mark_odd(drun_posted *p, int odd, int n) {
  int marked, other;
  if (p->f.n_culprits != 1 || !p->text ||
      !dist__run_compared_pair(p->text, &marked, &other) || other != odd ||
      marked != p->f.culprits[0])
    return;
  size_t cap = strlen(p->text) + 256;
  char *t = dist__malloc(cap);
  if (!t)
    return;
  t[0] = '\0';
  dist__run_move_mark(p->text, marked, odd, t, cap);
  dist__free(p->text);
  p->text = t;
  p->f.culprits[0] = odd;
  p->f.site[0] = '\0'; /* the marked rank's line, not odd's (the trace may tell) */
  p->pairs = n;
}

/* A posted desync that one pair of ranks saw (the TCP engine compares a
 * rank with each peer it exchanges with) marks one of the two by a rule of
 * thumb when neither's history tells, and which pair posts first is a
 * race. The ranks' other pair reports of that group settle it: the rank
 * that every pair includes is the odd one (dist/internal/launch.h,
 * DIST_KEY_CAUSE_PAIRS_FMT); the verdict takes the report of a pair that
 * marks it. */
static void settle_by_pairs(drun_job *job, drun_posted *p) {
  enum { PAIRS_MAX = 256 };
  if (p->status != DIST_E_DESYNC || p->f.group_id < 0)
    return;
  pair_line pr[PAIRS_MAX];
  char field[32];
  snprintf(field, sizeof field, "%s", p->f.field);
  for (char *c = field; *c; c++) /* as the ranks wrote it (cause.c keep_pair) */
    *c = *c == ' ' ? '_' : *c;
  int got = read_pairs(job, p->f.group_id, pr, PAIRS_MAX), n = 0, mine = -1;
  for (int i = 0; i < got; i++) /* the posted one's like: a later failure of another kind
                                   (a member that left) is not evidence about it */
    if (!strcmp(pr[i].op, p->f.op) && !strcmp(pr[i].field, field))
      pr[n++] = pr[i];
  for (int i = 0; i < n; i++)
    mine = pr[i].reporter == p->rank ? i : mine;
  int odd = n >= 2 && mine >= 0 ? in_every_pair(pr, n) : -1;
  if (odd < 0 || (p->f.n_culprits == 1 && p->f.culprits[0] == odd))
    return;
  for (int i = 0; i < n; i++) {
    drun_posted q;
    if (pr[i].marked != odd || !read_kept(job, pr[i].reporter, &q))
      continue;
    /* A reporter keeps its latest report: a later collective's (an async
     * one queued behind the first that failed) names the rank at the
     * wrong collective. */
    if (q.status == p->status && q.f.group_id == p->f.group_id && q.f.n_culprits == 1 &&
        q.f.seq == p->f.seq) {
      dist__run_cause_free(p);
      *p = q;
      p->pairs = n;
      return;
    }
    dist__run_cause_free(&q);
  }
  mark_odd(p, odd, n);
}

void dist__run_cause_refresh(drun_job *job, drun_posted *p) {
  if (!p->have || !job->store)
    return;
  drun_posted q = {0};
  if (!read_cause(job, &q))
    return;
  if (q.status == p->status && strcmp(q.text, p->text) != 0) { /* a diagnosis came */
    dist__run_cause_free(p);
    *p = q;
  } else {
    dist__run_cause_free(&q);
  }
  settle_by_pairs(job, p);
}

int dist__run_cause_exit(const drun_posted *p, int fallback) {
  if (!p->have)
    return fallback;
  switch (p->status) {
  case DIST_E_DESYNC: return DRUN_EXIT_DESYNC;
  case DIST_E_TIMEOUT: return DRUN_EXIT_HANG;
  default: return fallback;
  }
}

void dist__run_cause_free(drun_posted *p) {
  dist__free(p->text);
  *p = (drun_posted){0};
}
