/* tracer_live.c - live span export (DIST_OTLP_ENDPOINT): the rank's
 * operations go to an OTLP collector while the job runs.
 *
 * DESIGN. A thread `dist-otlp-<rank>` that never touches the hot path: it
 * reads what the writer committed to the rank file (its own read-only
 * connection), every DIST_OTLP_INTERVAL_MS (1000), the ended operations
 * after the last one it took, oldest first. The queue between the job and
 * the collector is bounded (DIST_OTLP_QUEUE spans, 4096): when more are
 * waiting, the oldest are skipped and counted as dropped. Each request
 * waits at most DIST_OTLP_TIMEOUT_MS (1000); a failed one drops its spans
 * (counted, warned once) and is not retried, so a slow or dead collector
 * costs drops, never a stalled collective. Parent spans (one per
 * collective, SCHEMA.md) are sent by the group's rank 0 with its own
 * times. At the end the counts become an `otlp_export` event. */
#define _GNU_SOURCE
#include "tracer_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "dist_int.h"
#include "otlp_int.h"

typedef struct live {
  tracer *t;
  char endpoint[1024];
  int64_t interval_ms, timeout_ms, queue;
  pthread_t thread;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  bool stop;
  sqlite3 *db;
  int64_t last_rowid;
  uint64_t sent, dropped;
  bool warned;
  char host[256];
} live;

/* Whether this rank is rank 0 of group g (members' first entry). */
static bool leads(live *l, int g) {
  sqlite3_stmt *st;
  bool yes = false;
  if (sqlite3_prepare_v2(l->db, "SELECT members FROM groups WHERE group_id = ?", -1, &st,
                         NULL) == SQLITE_OK) {
    sqlite3_bind_int(st, 1, g);
    if (sqlite3_step(st) == SQLITE_ROW)
      yes = atoi((const char *)sqlite3_column_text(st, 0) + 1) == l->t->rank;
    sqlite3_finalize(st);
  }
  return yes;
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

/* One cycle: what was committed since the last, within the bound. */
static void cycle(live *l) {
  if (!l->db && sqlite3_open_v2(l->t->path, &l->db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK) {
    sqlite3_close(l->db);
    l->db = NULL;
    return;
  }
  sqlite3_stmt *st;
  int64_t waiting = 0;
  if (sqlite3_prepare_v2(l->db, "SELECT count(*) FROM operations WHERE rowid > ?", -1, &st,
                         NULL) != SQLITE_OK)
    return;
  sqlite3_bind_int64(st, 1, l->last_rowid);
  if (sqlite3_step(st) == SQLITE_ROW)
    waiting = sqlite3_column_int64(st, 0);
  sqlite3_finalize(st);
  if (waiting > l->queue) { /* the bound: the oldest are skipped */
    int64_t skip = waiting - l->queue;
    l->dropped += (uint64_t)skip;
    char sql[160];
    snprintf(sql, sizeof sql, "SELECT rowid FROM operations WHERE rowid > %lld ORDER BY rowid"
                              " LIMIT 1 OFFSET %lld", (long long)l->last_rowid,
             (long long)(skip - 1));
    if (sqlite3_prepare_v2(l->db, sql, -1, &st, NULL) == SQLITE_OK) {
      if (sqlite3_step(st) == SQLITE_ROW)
        l->last_rowid = sqlite3_column_int64(st, 0);
      sqlite3_finalize(st);
    }
  }
  if (sqlite3_prepare_v2(l->db,
                         "SELECT rowid, group_id, seq, op, dtype, state, bytes_in,"
                         " coalesce(t_started_ns, t_enqueued_ns), t_ended_ns, status, message"
                         " FROM operations WHERE rowid > ? ORDER BY rowid LIMIT ?", -1, &st,
                         NULL) != SQLITE_OK)
    return;
  sqlite3_bind_int64(st, 1, l->last_rowid);
  sqlite3_bind_int64(st, 2, l->queue);
  int64_t umm = umm_of(l);
  jout j = {0};
  jo_puts(&j, "{\"resourceSpans\":[");
  tr_otlp_resource_open(&j, l->t->job_id, l->host, l->t->rank);
  int n = 0;
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
    if (leads(l, o.group)) { /* the collective's parent, with this rank's times */
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
  if (n > 0 && !j.oom) {
    char err[512];
    if (tr_otlp_post(l->endpoint, j.buf, j.len, l->timeout_ms, err, sizeof err) == DIST_OK) {
      l->sent += (uint64_t)n;
    } else {
      l->dropped += (uint64_t)n;
      if (!l->warned)
        DIST_LOG(WARNING, TRACER, "live OTLP export: %s; spans are dropped (counted) while it"
                                  " fails", err);
      l->warned = true;
    }
  }
  free(j.buf);
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
    pthread_mutex_unlock(&l->mu);
    cycle(l);
    pthread_mutex_lock(&l->mu);
  }
  pthread_mutex_unlock(&l->mu);
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
void tr_live_stop(void *arg, char *summary, size_t len) {
  live *l = arg;
  if (!l)
    return;
  pthread_mutex_lock(&l->mu);
  l->stop = true;
  pthread_cond_signal(&l->cv);
  pthread_mutex_unlock(&l->mu);
  pthread_join(l->thread, NULL);
  cycle(l);
  snprintf(summary, len, "live OTLP export to %s: %llu spans sent, %llu dropped", l->endpoint,
           (unsigned long long)l->sent, (unsigned long long)l->dropped);
  sqlite3_close(l->db);
  pthread_mutex_destroy(&l->mu);
  pthread_cond_destroy(&l->cv);
  free(l);
}
