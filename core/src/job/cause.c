/* cause.c - the job's cause key: why a job failed, posted by the rank
 * that knows, read by the launcher.
 *
 * A rank that meets a failure it can explain (a desync found by a
 * backend's own size checks or by the checking layer, a hang diagnosis by
 * the monitor) posts a report to the job's store under DIST_KEY_CAUSE
 * (dist/internal/launch.h) with compare_set, so the first cause in the job stays
 * (unless a diagnosis supersedes it: dist/internal/launch.h).
 * distrun waits a bounded moment for that key when a rank fails, classifies
 * the job's end by the posted status (exit 10 for DIST_E_DESYNC, 11 for
 * DIST_E_TIMEOUT) and prints the report once, last.
 *
 * Posting never blocks the caller for long: it goes through a fresh handle
 * on the job's store (store handles are one thread's each, and the caller
 * may be a backend's progress thread or the monitor's watchdog) whose
 * connection and I/O are bounded by DIST_CAUSE_TIMEOUT_MS, whatever the
 * store's own timeout. A failure to post is logged at WARNING and is never
 * the caller's error: the report is still in the failing call's message.
 * A group's failure becomes a cause in pg/pg_cause.c, which knows groups;
 * this file knows only the job. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "base/report.h"
#include "job.h"
#include "store/store_int.h"

/* This process's rank in the job (the default group's global rank; while
 * init builds that group, the rank the rendezvous gave); the log's rank
 * (-1) when not joined, though then no store takes a cause. */
static int own_rank(void) {
  int r = dist__job_rank();
  return r >= 0 ? r : dist__log_rank();
}

/* Whether the cause value cur may give way to a new one of status: a
 * diagnosis replaces a cause of its status posted without one; a cause
 * with a fields line replaces one of its status that has none (the same
 * report relayed by core from a failed work, say), and one that names its
 * culprits replaces one whose fields name none (the wrong root of a
 * broadcast, found late by the root itself from one reader's failure,
 * while the readers' own reports mark the odd rank). */
static bool superseded(const void *cur, size_t cur_len, int status, bool diagnosis,
                       bool fields, bool named) {
  char head[64];
  size_t n = cur_len < sizeof head - 1 ? cur_len : sizeof head - 1;
  memcpy(head, cur, n);
  head[n] = '\0';
  int st, rank, diag = 0;
  if (sscanf(head, "%d %d %d", &st, &rank, &diag) < 2 || st != status || diag != 0)
    return false;
  const char *nl = memchr(cur, '\n', cur_len);
  bool cur_fields = nl && (size_t)(nl + 1 - (const char *)cur) < cur_len && nl[1] == '@';
  bool cur_named = false;
  if (cur_fields) {
    const char *line = nl + 1, *end = memchr(line, '\n', cur_len - (size_t)(line - (const char *)cur));
    size_t ll = end ? (size_t)(end - line) : cur_len - (size_t)(line - (const char *)cur);
    cur_named = memmem(line, ll, "\tculprits=", 10) != NULL;
  }
  return diagnosis || (fields && !cur_fields) || (named && cur_fields && !cur_named);
}

/* A pair's view of a desync (dist/internal/launch.h): the reporter's
 * cause value under its rank, its pair on the group's tally. */
typedef struct pair_view {
  int group_id, a, b, marked, op;
  const char *field;
} pair_view;

static void keep_pair(dist_store *h, const pair_view *pv, const char *val, size_t len) {
  char key[64], line[160], field[32];
  snprintf(field, sizeof field, "%s", pv->field);
  for (char *c = field; *c; c++) /* one word ("reduce_op") */
    *c = *c == ' ' ? '_' : *c;
  snprintf(key, sizeof key, DIST_KEY_CAUSE_BY_FMT, own_rank());
  int rc = dist_store_set(h, key, val, len);
  snprintf(key, sizeof key, DIST_KEY_CAUSE_PAIRS_FMT, pv->group_id);
  int n = snprintf(line, sizeof line, "%d %d %d %d %s %s\n", own_rank(), pv->marked, pv->a,
                   pv->b, dist_op_name((dist_op_kind)pv->op), field);
  if (rc == DIST_OK)
    rc = dist_store_append(h, key, line, (size_t)n);
  if (rc != DIST_OK)
    DIST_LOG(WARNING, CORE, "cannot keep this rank's view of the desync: %s",
             dist_store_errmsg(h));
}

/* First cause wins; a diagnosis replaces a plain cause of its status, and
 * a cause that names culprits one that does not (superseded). A pair's
 * view is kept as well (pv, or NULL). */
static int post(dist_store *job, int status, bool diagnosis, bool fields, bool named,
                const pair_view *pv, const char *val, size_t len) {
  dist_store *h;
  int rc = dist__store_clone_within(job, DIST_CAUSE_TIMEOUT_MS, &h);
  if (rc != DIST_OK)
    return rc;
  void *cur = NULL;
  size_t cur_len = 0;
  rc = dist_store_compare_set(h, DIST_KEY_CAUSE, "", 0, val, len, &cur, &cur_len);
  bool kept = rc == DIST_OK && cur_len == len && memcmp(cur, val, len) == 0;
  if (rc == DIST_OK && !kept && superseded(cur, cur_len, status, diagnosis, fields, named)) {
    void *now = NULL;
    size_t now_len = 0;
    rc = dist_store_compare_set(h, DIST_KEY_CAUSE, cur, cur_len, val, len, &now, &now_len);
    kept = rc == DIST_OK && now_len == len && memcmp(now, val, len) == 0;
    dist_free(now);
  }
  if (rc != DIST_OK)
    DIST_LOG(WARNING, CORE, "cannot post the job's cause: %s", dist_store_errmsg(h));
  else if (!kept)
    DIST_LOG(DEBUG, CORE, "the job's cause was posted already; this one is not kept");
  if (rc == DIST_OK && pv)
    keep_pair(h, pv, val, len);
  dist_free(cur);
  dist_store_destroy(h);
  return rc;
}

/* Copies src into the fields line, tabs and newlines as spaces. */
static void put_clean(char *buf, size_t len, size_t *off, const char *name, const char *src) {
  if (!src || !*src)
    return;
  dist__appendf(buf, len, off, "\t%s=", name);
  for (const char *p = src; *p && *off + 1 < len; p++)
    buf[(*off)++] = *p == '\t' || *p == '\n' ? ' ' : *p;
  buf[*off] = '\0';
}

/* "@\tculprits=...\t...\n" (dist/internal/launch.h), or "" without info. */
static void fields_line(const dist_cause_info *in, char *buf, size_t len) {
  size_t off = 0;
  buf[0] = '\0';
  if (!in)
    return;
  dist__appendf(buf, len, &off, "@");
  if (in->n_culprits && in->culprits) {
    dist__appendf(buf, len, &off, "\tculprits=");
    for (size_t i = 0; i < in->n_culprits && i < DIST_CAUSE_CULPRITS_MAX; i++)
      dist__appendf(buf, len, &off, "%s%d", i ? "," : "", in->culprits[i]);
  }
  if (in->group_id >= 0)
    dist__appendf(buf, len, &off, "\tgroup=%d", in->group_id);
  put_clean(buf, len, &off, "gname", in->group_name);
  if (in->op >= 0 && in->op < DIST_OP_COUNT_)
    dist__appendf(buf, len, &off, "\top=%s", dist_op_name((dist_op_kind)in->op));
  if (in->seq)
    dist__appendf(buf, len, &off, "\tseq=%" PRIu64, in->seq);
  put_clean(buf, len, &off, "field", in->field);
  put_clean(buf, len, &off, "site", in->site);
  dist__appendf(buf, len, &off, "\n");
}

/* Whether the report compares two ranks alone, one line each ("  rank 2:
 * ..." and "  rank 4 (group rank 3): ..."): one pair's view, which the
 * job's other reports of the same desync may complete
 * (dist/internal/launch.h, DIST_KEY_CAUSE_PAIRS_FMT). */
static bool pair_sides(const char *rep, int *a, int *b) {
  int n = 0, r;
  for (const char *l = rep; *l;) {
    const char *end = strchr(l, '\n');
    size_t ll = end ? (size_t)(end - l) : strlen(l);
    if (!strncmp(l, "  ranks ", 8))
      return false; /* a line for several ranks: a view of the whole group */
    if (sscanf(l, "  rank %d", &r) == 1 && memchr(l, ':', ll)) {
      if (n == 2)
        return false;
      *(n++ ? b : a) = r;
    }
    l += ll + (end != NULL);
  }
  return n == 2 && *a != *b;
}

static int post_cause(int status, bool diagnosis, const dist_cause_info *info,
                      const pair_view *pv, const char *report) {
  if (status <= DIST_OK || status > DIST_E_INTERNAL || !report)
    return dist__set_last_error(DIST_E_INVAL,
                                "dist_post_cause: status %d is not a DIST_E_* code%s", status,
                                report ? "" : " or the report is NULL");
  dist_store *job = dist_get_default_store();
  if (!job)
    return DIST_OK; /* no job store (not initialised): nobody to tell */
  size_t rlen = strlen(report);
  if (rlen > DIST_CAUSE_REPORT_MAX)
    rlen = DIST_CAUSE_REPORT_MAX; /* the head of a report carries its point */
  char fields[1024];
  fields_line(info, fields, sizeof fields);
  size_t head = 64 + strlen(fields);
  char *val = dist__malloc(rlen + head);
  if (!val)
    return dist__set_last_error(DIST_E_NOMEM, "out of memory posting the job's cause");
  int n = snprintf(val, head, "%d %d %d\n%s", status, own_rank(), diagnosis ? 1 : 0, fields);
  memcpy(val + n, report, rlen);
  int rc = post(job, status, diagnosis, fields[0] != '\0',
                info && info->n_culprits && info->culprits, pv, val, (size_t)n + rlen);
  dist__free(val);
  if (rc != DIST_OK)
    DIST_LOG(DEBUG, CORE, "-> %s posting the cause (not the caller's error)",
             dist_status_name(rc));
  return DIST_OK;
}

int dist_post_cause(int status, const char *report) {
  return post_cause(status, false, NULL, NULL, report);
}

dist_cause_info dist_cause_info_none(void) {
  return (dist_cause_info){.group_id = -1, .op = -1};
}

int dist_post_cause_info(int status, const dist_cause_info *info, const char *report) {
  pair_view pv;
  /* A collective's (a send and a receive are a pair anyway), and what its
   * report compares, so distrun compares it with its like alone. */
  bool pair = status == DIST_E_DESYNC && info && info->group_id >= 0 && info->op >= 0 &&
              info->op < DIST_OP_COUNT_ && !dist_op_is_p2p((dist_op_kind)info->op) &&
              info->field && info->field[0] && report &&
              pair_sides(report, &pv.a, &pv.b);
  if (pair) {
    pv.group_id = info->group_id;
    pv.marked = info->n_culprits == 1 && info->culprits ? info->culprits[0] : -1;
    pv.op = info->op;
    pv.field = info->field;
  }
  return post_cause(status, false, info, pair ? &pv : NULL, report);
}

int dist__cause_post_diagnosis(int status, const dist_cause_info *info, const char *report) {
  return post_cause(status, true, info, NULL, report);
}

int dist__cause_parse(const char *val, size_t len, int *status, int *rank,
                      const char **report) {
  const char *nl = val ? memchr(val, '\n', len) : NULL;
  if (!nl || sscanf(val, "%d %d", status, rank) != 2 || *status <= DIST_OK ||
      *status > DIST_E_INTERNAL)
    return DIST_E_INVAL;
  *report = nl + 1;
  size_t rest = len - (size_t)(*report - val);
  const char *nl2 = rest && **report == '@' ? memchr(*report, '\n', rest) : NULL;
  if (nl2) /* the fields line */
    *report = nl2 + 1;
  return DIST_OK;
}

static void copy_cut(char *dst, size_t cap, const char *src) {
  size_t n = strlen(src);
  n = n < cap ? n : cap - 1;
  memcpy(dst, src, n);
  dst[n] = '\0';
}

/* One "name=value" of the fields line into f. */
static void take_field(dist__cause_fields *f, const char *name, size_t nlen, const char *v,
                       size_t vlen) {
#define IS(s) (nlen == sizeof(s) - 1 && !memcmp(name, s, nlen))
  char tmp[256];
  snprintf(tmp, sizeof tmp, "%.*s", (int)(vlen < sizeof tmp ? vlen : sizeof tmp - 1), v);
  if (IS("culprits")) {
    for (char *p = tmp, *e; *p && f->n_culprits < DIST_CAUSE_CULPRITS_MAX; p = *e ? e + 1 : e) {
      long r = strtol(p, &e, 10);
      if (e == p)
        break;
      f->culprits[f->n_culprits++] = (int)r;
    }
  } else if (IS("group")) {
    f->group_id = atoi(tmp);
  } else if (IS("gname")) {
    copy_cut(f->group_name, sizeof f->group_name, tmp);
  } else if (IS("op")) {
    copy_cut(f->op, sizeof f->op, tmp);
  } else if (IS("seq")) {
    f->seq = strtoull(tmp, NULL, 10);
  } else if (IS("field")) {
    copy_cut(f->field, sizeof f->field, tmp);
  } else if (IS("site")) {
    copy_cut(f->site, sizeof f->site, tmp);
  }
#undef IS
}

void dist__cause_parse_info(const char *val, size_t len, dist__cause_fields *f) {
  memset(f, 0, sizeof *f);
  f->group_id = -1;
  const char *nl = val ? memchr(val, '\n', len) : NULL;
  if (!nl || (size_t)(nl + 1 - val) >= len || nl[1] != '@')
    return;
  const char *p = nl + 2, *end = memchr(p, '\n', len - (size_t)(p - val));
  if (!end)
    return;
  while (p < end) {
    if (*p == '\t')
      p++;
    const char *tab = memchr(p, '\t', (size_t)(end - p));
    const char *stop = tab ? tab : end, *eq = memchr(p, '=', (size_t)(stop - p));
    if (eq)
      take_field(f, p, (size_t)(eq - p), eq + 1, (size_t)(stop - eq - 1));
    p = stop;
  }
}
