/* tracer_live.c - live span export (DIST_OTLP_ENDPOINT): the rank's
 * operations go to an OTLP collector while the job runs.
 *
 * DESIGN. A thread `dist-otlp-<rank>` that never touches the hot path: it
 * reads what the writer committed to the rank file (its own read-only
 * connection), every DIST_OTLP_INTERVAL_MS (1000), the ended operations
 * after the last one it took, oldest first. The queue between the job and
 * the collector is bounded (DIST_OTLP_QUEUE operations, 4096): when more
 * are waiting, the oldest are skipped and counted as dropped (rowids are
 * dense, so that is arithmetic, not a scan). Each request waits at most
 * DIST_OTLP_TIMEOUT_MS (1000); a failed one drops its operations (counted,
 * warned once) and is not retried, and the exporter backs off: for 1 s,
 * doubling up to 30 s after each failure in a row, its cycles do nothing;
 * then the bound drops (counts) what waited beyond the queue, unread, and
 * it tries again with a small request (PROBE_OPS operations; the others
 * wait for the next cycle), as its first request is. So a slow or dead
 * collector costs drops and about one failed request per backoff, never a
 * stalled collective nor CPU taken from the ranks. At the end a request
 * in flight gets FINAL_MS more, then is cancelled (the rank never waits
 * out a long timeout), the last cycle waits at most FINAL_MS, and the
 * counts become an `otlp_export` event (status = operations dropped).
 * Every operation is counted once, sent or dropped. Parent spans (one per
 * collective, SCHEMA.md) are sent by the group's rank 0 with its own
 * times; point-to-point spans have none, and no link either (the SEND a
 * RECV took is known only once both ranks' files are merged). */
#define _GNU_SOURCE
#include "tracer_int.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/dist_int.h"
#include "otlp_int.h"

#define LEAD_CACHE 1024
#define BACKOFF_FIRST_MS 1000
#define BACKOFF_MAX_MS 30000
#define PROBE_OPS 16 /* after a failure, the next request is this small */
#define FINAL_MS 1000 /* the end of the job waits at most this for the last spans */

typedef struct live {
  tracer *t;
  char endpoint[1024];
  int64_t interval_ms, timeout_ms, queue;
  pthread_t thread;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  bool stop;
  _Atomic int64_t cancel_at; /* CLOCK_MONOTONIC ns: the request in flight
                                gives up then (tr_live_stop); 0 none */
  sqlite3 *db;
  int64_t last_rowid;
  uint64_t sent, spans, dropped; /* operations (spans: with the parents) */
  int64_t backoff_ms, retry_ns;  /* after a failure: drop until retry_ns */
  int8_t lead[LEAD_CACHE];       /* group id -> 1 leads, 0 not, -1 unknown */
  int64_t cpu_ns;                /* the thread's CPU time, at its end */
  bool warned;
  char host[256];
} live;

/* Whether this rank is rank 0 of group g (members' first entry); known
 * once the group's row is committed, then cached. */
static bool leads(live *l, int g) {
  if (g >= 0 && g < LEAD_CACHE && l->lead[g] >= 0)
    return l->lead[g] == 1;
  sqlite3_stmt *st;
  int yes = -1;
  if (sqlite3_prepare_v2(l->db, "SELECT members FROM groups WHERE group_id = ?", -1, &st,
                         NULL) == SQLITE_OK) {
    sqlite3_bind_int(st, 1, g);
    if (sqlite3_step(st) == SQLITE_ROW)
      yes = atoi((const char *)sqlite3_column_text(st, 0) + 1) == l->t->rank;
    sqlite3_finalize(st);
  }
  if (g >= 0 && g < LEAD_CACHE)
    l->lead[g] = (int8_t)yes;
  return yes == 1;
}

static int64_t max_rowid(live *l) {
  sqlite3_stmt *st;
  int64_t v = -1;
  if (sqlite3_prepare_v2(l->db, "SELECT coalesce(max(rowid), 0) FROM operations", -1, &st,
                         NULL) == SQLITE_OK) {
    if (sqlite3_step(st) == SQLITE_ROW)
      v = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
  }
  return v;
}

static int64_t umm_of(live *l) {
  sqlite3_stmt *st;
  int64_t v = 0;
  if (sqlite3_prepare_v2(l->db, "SELECT unix_minus_mono_ns FROM job", -1, &st, NULL) == 0) {
    if (sqlite3_step(st) == SQLITE_ROW)
      v = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
  }
  return v;
}

/* After a request: on failure, drop and back off (module comment). */
static void sent_or_failed(live *l, int rc, const char *err, int n_ops, int n_spans) {
  if (rc == DIST_OK) {
    l->sent += (uint64_t)n_ops;
    l->spans += (uint64_t)n_spans;
    l->backoff_ms = 0;
    return;
  }
  l->dropped += (uint64_t)n_ops;
  l->backoff_ms = l->backoff_ms ? l->backoff_ms * 2 : BACKOFF_FIRST_MS;
  l->backoff_ms = l->backoff_ms > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : l->backoff_ms;
  l->retry_ns = dist_clock_ns() + l->backoff_ms * 1000000;
  if (l->backoff_ms == BACKOFF_FIRST_MS) { /* the first failure in a row: in the file now */
    char msg[700];
    snprintf(msg, sizeof msg, "live OTLP export: %s; operations are dropped (counted) while it"
                              " fails", err);
    tr_record_note(l->t, TR_KIND_OTLP_FAILED, (int32_t)l->dropped, msg);
    if (!l->warned)
      DIST_LOG(WARNING, TRACER, "%s", msg);
    l->warned = true;
  }
}

/* One cycle: what was committed since the last, within the bound; the
 * last one (at the end, on the rank's thread) sends a full batch, waits at
 * most FINAL_MS, and counts what it leaves as dropped. */
static void cycle(live *l, bool last) {
  if (!l->db && sqlite3_open_v2(l->t->path, &l->db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK) {
    sqlite3_close(l->db);
    l->db = NULL;
    return;
  }
  bool backing_off = l->retry_ns && dist_clock_ns() < l->retry_ns;
  if (backing_off && !last)
    return; /* nothing read: the bound below counts what waits when it ends */
  int64_t top = max_rowid(l);
  if (top <= l->last_rowid)
    return;
  if (backing_off) { /* the end: what waits is dropped, unread */
    l->dropped += (uint64_t)(top - l->last_rowid);
    l->last_rowid = top;
    return;
  }
  if (top - l->last_rowid > l->queue) { /* the bound: the oldest are skipped */
    l->dropped += (uint64_t)(top - l->last_rowid - l->queue);
    l->last_rowid = top - l->queue;
  }
  sqlite3_stmt *st;
  if (sqlite3_prepare_v2(l->db,
                         "SELECT rowid, group_id, seq, op, dtype, state, bytes_in,"
                         " coalesce(t_started_ns, t_enqueued_ns), t_ended_ns, status, message"
                         " FROM operations WHERE rowid > ? ORDER BY rowid LIMIT ?", -1, &st,
                         NULL) != SQLITE_OK)
    return;
  sqlite3_bind_int64(st, 1, l->last_rowid);
  /* the first request, or the last one failed: a small one finds out
   * whether the collector is there */
  bool probe = !last && (!l->sent || l->backoff_ms) && l->queue > PROBE_OPS;
  sqlite3_bind_int64(st, 2, probe ? PROBE_OPS : l->queue);
  int64_t umm = umm_of(l);
  jout j = {0};
  jo_puts(&j, "{\"resourceSpans\":[");
  tr_otlp_resource_open(&j, l->t->job_id, l->host, l->t->rank);
  int n = 0, ops = 0;
  while (sqlite3_step(st) == SQLITE_ROW) {
    if (sqlite3_column_type(st, 8) == SQLITE_NULL)
      break; /* still running: next cycle, in order */
    int64_t start = sqlite3_column_int64(st, 7), end = sqlite3_column_int64(st, 8);
    tr_otlp_op o = {
        .rank = l->t->rank, .group = sqlite3_column_int(st, 1),
        .seq = sqlite3_column_int64(st, 2), .op = (const char *)sqlite3_column_text(st, 3),
        .dtype = (const char *)sqlite3_column_text(st, 4),
        .state = (const char *)sqlite3_column_text(st, 5), .bytes = sqlite3_column_int64(st, 6),
        .start_unix_ns = start + umm, .end_unix_ns = (end > start ? end : start) + umm,
        .failed = sqlite3_column_int(st, 9) != 0,
        .message = (const char *)sqlite3_column_text(st, 10),
    };
    tr_otlp_span(&j, n == 0, l->t->job_id, &o);
    n++;
    ops++;
    /* the collective's parent, with this rank's times (p2p: none) */
    if (!tr_otlp_is_p2p(o.op) && leads(l, o.group)) {
      o.rank = -1;
      o.n_ranks = 0;
      tr_otlp_span(&j, false, l->t->job_id, &o);
      n++;
    }
    l->last_rowid = sqlite3_column_int64(st, 0);
  }
  sqlite3_finalize(st);
  tr_otlp_resource_close(&j);
  jo_puts(&j, "]}");
  if (ops > 0) {
    char err[512] = "out of memory";
    int rc = j.oom ? DIST_E_NOMEM
                   : tr_otlp_post(l->endpoint, j.buf, j.len,
                                  last && l->timeout_ms > FINAL_MS ? FINAL_MS : l->timeout_ms,
                                  &l->cancel_at, err, sizeof err);
    sent_or_failed(l, rc, err, ops, n);
  }
  free(j.buf);
  if (last && top > l->last_rowid) { /* never to be sent (still running): counted */
    l->dropped += (uint64_t)(top - l->last_rowid);
    l->last_rowid = top;
  }
}

static void *live_main(void *arg) {
  live *l = arg;
  char name[16];
  snprintf(name, sizeof name, "dist-otlp-%d", l->t->rank);
  pthread_setname_np(pthread_self(), name);
  pthread_mutex_lock(&l->mu);
  while (!l->stop) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_nsec += (long)(l->interval_ms % 1000) * 1000000;
    ts.tv_sec += l->interval_ms / 1000 + ts.tv_nsec / 1000000000;
    ts.tv_nsec %= 1000000000;
    pthread_cond_timedwait(&l->cv, &l->mu, &ts);
    if (l->stop)
      break; /* the last cycle is tr_live_stop's */
    pthread_mutex_unlock(&l->mu);
    cycle(l, false);
    pthread_mutex_lock(&l->mu);
  }
  pthread_mutex_unlock(&l->mu);
  struct timespec cpu; /* what it took from the job, in the summary */
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &cpu);
  l->cpu_ns = (int64_t)cpu.tv_sec * 1000000000 + cpu.tv_nsec;
  return NULL;
}

void *tr_live_start(tracer *t, int64_t interval_ms, int64_t timeout_ms, int64_t queue) {
  const char *ep = getenv("DIST_OTLP_ENDPOINT");
  if (!ep || !*ep)
    return NULL;
  live *l = calloc(1, sizeof *l);
  if (!l)
    return NULL;
  l->t = t;
  snprintf(l->endpoint, sizeof l->endpoint, "%s", ep);
  l->interval_ms = interval_ms;
  l->timeout_ms = timeout_ms;
  l->queue = queue;
  memset(l->lead, -1, sizeof l->lead);
  gethostname(l->host, sizeof l->host - 1);
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&l->cv, &ca);
  pthread_condattr_destroy(&ca);
  pthread_mutex_init(&l->mu, NULL);
  if (pthread_create(&l->thread, NULL, live_main, l) != 0) {
    free(l);
    return NULL;
  }
  return l;
}

/* After the writer's last commit: one more cycle, then the counts. */
uint64_t tr_live_stop(void *arg, char *summary, size_t len) {
  live *l = arg;
  if (!l)
    return 0;
  pthread_mutex_lock(&l->mu);
  l->stop = true;
  pthread_cond_signal(&l->cv);
  pthread_mutex_unlock(&l->mu);
  /* a request in flight has FINAL_MS more, then fails (counted) */
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  atomic_store(&l->cancel_at, (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec +
                                  (int64_t)FINAL_MS * 1000000);
  pthread_join(l->thread, NULL);
  atomic_store(&l->cancel_at, 0);
  cycle(l, true); /* the last operations; dropped unread when backing off */
  snprintf(summary, len, "live OTLP export to %s: %llu operations sent (%llu spans), %llu"
                         " dropped; its thread used %.1f ms of CPU", l->endpoint,
           (unsigned long long)l->sent, (unsigned long long)l->spans,
           (unsigned long long)l->dropped, (double)l->cpu_ns / 1e6);
  uint64_t dropped = l->dropped;
  sqlite3_close(l->db);
  pthread_mutex_destroy(&l->mu);
  pthread_cond_destroy(&l->cv);
  free(l);
  return dropped;
}
