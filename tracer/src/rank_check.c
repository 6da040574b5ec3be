/* rank_check.c - the merge's checks of its rank files, made ahead of the
 * copy on a second thread.
 *
 * Before a rank file is copied it is checked (SQLite's quick_check, the
 * meta table's schema version, kind and rank). quick_check reads the whole
 * file: 3-5 ms for 10,000 operations here, seconds for a thousand ranks,
 * all on the copy's critical path. So a thread checks the files in the
 * merge's order while the merge copies the earlier ones, at most
 * CHECK_AHEAD files ahead (their results wait in a ring of slots), and
 * leaves them in the page cache for the copy. Whether a file belongs to
 * the job is the merge's question (the job is the first good file's): the
 * check only reports the file's job id. */
#define _GNU_SOURCE
#include "reader_int.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK_AHEAD 16

typedef struct check_slot {
  tr_check_result res;
} check_slot;

struct tr_checker {
  const char *dir;
  const int *ranks;
  int n, busy_ms;
  pthread_t thread;
  bool started;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int done;  /* files checked: 0..done-1 */
  int taken; /* files the merge took the result of */
  bool stop;
  check_slot slot[CHECK_AHEAD];
};

int tr_check_rank_file(const char *path, int rank, int busy_ms, tr_check_result *res) {
  memset(res, 0, sizeof *res);
  sqlite3 *db = NULL;
  res->rc = -1;
  char e[1024];
  int orc = tr_open_ro(path, &db, &res->immutable, e, sizeof e);
  if (orc != DIST_OK) {
    /* e says "path: why"; the report names the path already */
    size_t pl = strlen(path);
    const char *w = strncmp(e, path, pl) ? e : e + pl + 2;
    snprintf(res->why, sizeof res->why,
             orc == DIST_E_INVAL ? "not a trace database (%s)" : "cannot open: %s", w);
    res->rc = orc == DIST_E_INVAL ? -1 : TR_CHECK_CANNOT_OPEN;
    goto out;
  }
  /* Another merge of the same directory (each node of a job merges a
   * shared trace directory at its end) may hold the file for a moment
   * while it opens a WAL file: wait for it rather than skip the rank. */
  sqlite3_busy_timeout(db, busy_ms);
  sqlite3_stmt *st;
  if (sqlite3_prepare_v2(db, "PRAGMA quick_check", -1, &st, NULL) != SQLITE_OK) {
    snprintf(res->why, sizeof res->why, "not a trace database (%s)", sqlite3_errmsg(db));
    goto out;
  }
  int s = sqlite3_step(st);
  const char *ok = s == SQLITE_ROW ? (const char *)sqlite3_column_text(st, 0) : NULL;
  if (!ok || strcmp(ok, "ok") != 0) {
    snprintf(res->why, sizeof res->why, "corrupt or truncated (%s)", ok ? ok : sqlite3_errmsg(db));
    sqlite3_finalize(st);
    goto out;
  }
  sqlite3_finalize(st);
  char v[128], kind[32] = "", r[32] = "";
  if (tr_meta_get(db, "schema_version", v, sizeof v) != 0) {
    snprintf(res->why, sizeof res->why, "not a libdist trace file (no meta.schema_version)");
    goto out;
  }
  if (atoi(v) != TR_SCHEMA_VERSION) {
    snprintf(res->why, sizeof res->why, "schema version %s, this reader knows %d", v,
             TR_SCHEMA_VERSION);
    goto out;
  }
  tr_meta_get(db, "kind", kind, sizeof kind);
  tr_meta_get(db, "rank", r, sizeof r);
  if (strcmp(kind, "rank") != 0 || atoi(r) != rank) {
    snprintf(res->why, sizeof res->why, "not the rank file of rank %d (kind '%s', rank '%s')",
             rank, kind, r);
    goto out;
  }
  if (tr_meta_get(db, "job_id", res->job, sizeof res->job) != 0)
    res->job[0] = '\0';
  res->rc = 0;
out:
  sqlite3_close(db);
  return res->rc;
}

static void *check_main(void *arg) {
  tr_checker *c = arg;
  for (int i = 0; i < c->n; i++) {
    pthread_mutex_lock(&c->mu);
    while (!c->stop && i - c->taken >= CHECK_AHEAD)
      pthread_cond_wait(&c->cv, &c->mu);
    bool stop = c->stop;
    pthread_mutex_unlock(&c->mu);
    if (stop)
      break;
    check_slot *s = &c->slot[i % CHECK_AHEAD]; /* free: the merge took i - CHECK_AHEAD */
    char path[1200];
    snprintf(path, sizeof path, "%s/rank-%d.db", c->dir, c->ranks[i]);
    tr_check_rank_file(path, c->ranks[i], c->busy_ms, &s->res);
    pthread_mutex_lock(&c->mu);
    c->done = i + 1;
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
  }
  return NULL;
}

tr_checker *tr_checker_start(const char *dir, const int *ranks, int n, int busy_ms) {
  tr_checker *c = calloc(1, sizeof *c);
  if (!c)
    return NULL;
  c->dir = dir;
  c->ranks = ranks;
  c->n = n;
  c->busy_ms = busy_ms;
  pthread_mutex_init(&c->mu, NULL);
  pthread_cond_init(&c->cv, NULL);
  /* without a thread the merge checks each file itself (tr_checker_take) */
  c->started = pthread_create(&c->thread, NULL, check_main, c) == 0;
  return c;
}

void tr_checker_take(tr_checker *c, int i, tr_check_result *res) {
  if (!c->started) {
    char path[1200];
    snprintf(path, sizeof path, "%s/rank-%d.db", c->dir, c->ranks[i]);
    tr_check_rank_file(path, c->ranks[i], c->busy_ms, res);
    return;
  }
  pthread_mutex_lock(&c->mu);
  while (c->done <= i)
    pthread_cond_wait(&c->cv, &c->mu);
  *res = c->slot[i % CHECK_AHEAD].res;
  c->taken = i + 1;
  pthread_cond_broadcast(&c->cv);
  pthread_mutex_unlock(&c->mu);
}

void tr_checker_stop(tr_checker *c) {
  if (!c)
    return;
  if (c->started) {
    pthread_mutex_lock(&c->mu);
    c->stop = true;
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
    pthread_join(c->thread, NULL);
  }
  pthread_mutex_destroy(&c->mu);
  pthread_cond_destroy(&c->cv);
  free(c);
}
