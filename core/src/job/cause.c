/* cause.c - the job's cause key: why a job failed, posted by the rank
 * that knows, read by the launcher.
 *
 * A rank that meets a failure it can explain (a desync found by a
 * backend's own size checks or by the checking layer, a hang diagnosis by
 * the monitor) posts a report to the job's store under DIST_KEY_CAUSE
 * (launch_env.h) with compare_set, so the first cause in the job stays
 * (unless a diagnosis supersedes it: launch_env.h).
 * distrun waits a bounded moment for that key when a rank fails, classifies
 * the job's end by the posted status (exit 10 for DIST_E_DESYNC, 11 for
 * DIST_E_TIMEOUT) and prints the report once, last.
 *
 * Posting never blocks the caller for long: it goes through a fresh handle
 * on the job's store (store handles are one thread's each, and the caller
 * may be a backend's progress thread or the monitor's watchdog) whose
 * connection and I/O are bounded by DIST_CAUSE_TIMEOUT_MS, whatever the
 * store's own timeout. A failure to post is logged at WARNING and is never
 * the caller's error: the report is still in the failing call's message. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "launch_env.h"
#include "pg/pg_int.h"
#include "base/report.h"
#include "store/store_int.h"

#define DIST_CAUSE_TIMEOUT_MS 2000

/* The default group's global rank; while init builds it (a check that
 * fails there), the rank the rendezvous gave; -1 before. */
static int own_rank(void) {
  dist_pg *g = dist__pg_default();
  return g && g != DIST_GROUP_NON_MEMBER ? g->info.global_rank : dist__log_rank();
}

/* Whether the cause value cur may give way to a new one of status: a
 * diagnosis replaces a cause of its status posted without one; a cause
 * that names its culprits (a fields line) replaces one of its status that
 * does not (the same report relayed by core from a failed work, say). */
static bool superseded(const void *cur, size_t cur_len, int status, bool diagnosis,
                       bool fields) {
  char head[64];
  size_t n = cur_len < sizeof head - 1 ? cur_len : sizeof head - 1;
  memcpy(head, cur, n);
  head[n] = '\0';
  int st, rank, diag = 0;
  if (sscanf(head, "%d %d %d", &st, &rank, &diag) < 2 || st != status || diag != 0)
    return false;
  const char *nl = memchr(cur, '\n', cur_len);
  bool cur_fields = nl && (size_t)(nl + 1 - (const char *)cur) < cur_len && nl[1] == '@';
  return diagnosis || (fields && !cur_fields);
}

/* First cause wins; a diagnosis replaces a plain cause of its status. */
static int post(dist_store *job, int status, bool diagnosis, bool fields, const char *val,
                size_t len) {
  dist_store *h;
  int rc = dist__store_clone_within(job, DIST_CAUSE_TIMEOUT_MS, &h);
  if (rc != DIST_OK)
    return rc;
  void *cur = NULL;
  size_t cur_len = 0;
  rc = dist_store_compare_set(h, DIST_KEY_CAUSE, "", 0, val, len, &cur, &cur_len);
  bool kept = rc == DIST_OK && cur_len == len && memcmp(cur, val, len) == 0;
  if (rc == DIST_OK && !kept && superseded(cur, cur_len, status, diagnosis, fields)) {
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

/* "@\tculprits=...\t...\n" (launch_env.h), or "" without info. */
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

static int post_cause(int status, bool diagnosis, const dist_cause_info *info,
                      const char *report) {
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
  int rc = post(job, status, diagnosis, fields[0] != '\0', val, (size_t)n + rlen);
  dist__free(val);
  if (rc != DIST_OK)
    DIST_LOG(DEBUG, CORE, "-> %s posting the cause (not the caller's error)",
             dist_status_name(rc));
  return DIST_OK;
}

int dist_post_cause(int status, const char *report) {
  return post_cause(status, false, NULL, report);
}

dist_cause_info dist_cause_info_none(void) {
  return (dist_cause_info){.group_id = -1, .op = -1};
}

int dist_post_cause_info(int status, const dist_cause_info *info, const char *report) {
  return post_cause(status, false, info, report);
}

int dist__cause_post_diagnosis(int status, const dist_cause_info *info, const char *report) {
  return post_cause(status, true, info, report);
}

/* The ranks a report in the house format marks ("  rank 3 (group rank 1):
 * ...  <- dtype differs", status.h) and the field of its header ("ranks
 * disagree on the dtype"): what the report blames, for the verdict. */
static size_t marked_ranks(const char *rep, int *out, size_t cap, char *field, size_t flen) {
  size_t n = 0;
  field[0] = '\0';
  const char *f = strstr(rep, "ranks disagree on the ");
  if (f) {
    f += strlen("ranks disagree on the ");
    size_t k = strcspn(f, "\n");
    snprintf(field, flen, "%.*s", (int)(k < flen ? k : flen - 1), f);
  }
  for (const char *l = rep; *l && n < cap;) {
    const char *end = strchr(l, '\n');
    size_t ll = end ? (size_t)(end - l) : strlen(l);
    int r;
    if (sscanf(l, "  rank %d", &r) == 1 && memmem(l, ll, "  <- ", 5))
      out[n++] = r;
    l += ll + (end != NULL);
  }
  return n;
}

void dist__cause_post_failure(dist_pg *g, const dist_coll *c, int rc, const char *msg) {
  if (rc != DIST_E_DESYNC || !dist_get_default_store())
    return;
  const dist_pg_info *in = &g->info;
  size_t cap = DIST_ERRMSG_LEN + 512;
  char *rep = dist__malloc(cap);
  if (!rep)
    return;
  size_t off = 0;
  if (msg && dist__report_has_head(msg)) {
    dist__appendf(rep, cap, &off, "%s", msg); /* pg.c headed it: the report as logged */
  } else {
    dist__report_group rg = {in->group_id, in->name, in->desc, in->size};
    dist__report_head(rep, cap, rc, &rg, c ? c->kind : DIST_OP_BARRIER, c ? c->seq : 0,
                      msg && *msg ? msg : dist_strerror(rc));
    off = strlen(rep);
  }
  /* distrun prints it away from the rank's own output: name the origin
   * once, as status.h's "seen by" line does for relayed reports. */
  dist__appendf(rep, cap, &off, "\n  reported by rank %d (host %s, pid %d)", in->global_rank,
                dist__hostname(), (int)getpid());
  int culprits[DIST_CAUSE_CULPRITS_MAX];
  char field[32];
  int n = marked_ranks(rep, culprits, DIST_CAUSE_CULPRITS_MAX, field, sizeof field);
  if (g->inner && n == 0) {
    /* A wrapper's failure: the checking layer posts its own report with
     * what it blames, which replaces this plain relay (cause.c's rule), so
     * the job's cause does not depend on which rank posted first. What its
     * inner group found and marked (a send and receive whose sizes differ,
     * which the layer forwards unchecked) is posted with its culprits. */
    dist_post_cause(rc, rep);
    dist__free(rep);
    return;
  }
  dist_cause_info ci = dist_cause_info_none();
  ci.culprits = culprits;
  ci.n_culprits = n;
  ci.group_id = in->group_id;
  ci.group_name = in->desc && in->desc[0] ? in->desc : in->name;
  ci.op = c ? (int)c->kind : -1;
  ci.seq = c ? c->seq : 0;
  ci.field = field[0] ? field : NULL;
  dist_post_cause_info(rc, &ci, rep);
  dist__free(rep);
}

/* --- the first rank to leave --------------------------------------------- */

static pid_t exit_watch_pid; /* the process that registered the handler */

/* Runs in exit() (and on return from main) while the default group lives:
 * before the kernel closes this process's connections, so before any peer
 * can notice it left, it claims DIST_KEY_FIRST_EXIT (launch_env.h). */
static void post_first_exit(void) {
  dist_store *job = dist_get_default_store();
  dist_pg *g = dist__pg_default();
  if (getpid() != exit_watch_pid || !job || !g || g == DIST_GROUP_NON_MEMBER)
    return; /* a forked child, or the group was destroyed: a clean end */
  dist_store *h;
  if (dist__store_clone_within(job, DIST_CAUSE_TIMEOUT_MS, &h) != DIST_OK)
    return;
  char me[16];
  int n = snprintf(me, sizeof me, "%d", g->info.global_rank);
  void *cur = NULL;
  size_t cur_len = 0;
  dist_store_compare_set(h, DIST_KEY_FIRST_EXIT, "", 0, me, (size_t)n, &cur, &cur_len);
  dist_free(cur);
  dist_store_destroy(h);
}

void dist__cause_watch_exit(void) {
  static bool registered;
  exit_watch_pid = getpid();
  if (!registered)
    registered = atexit(post_first_exit) == 0;
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
