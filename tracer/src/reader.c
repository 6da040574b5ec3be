/* reader.c - opening a trace store and the query helpers
 * (trace_reader.h). A job directory is merged into a temporary file first
 * ($TMPDIR, else /tmp), deleted when the handle closes or, through
 * dist_trace_remove_temps, when a signal ends the program. Whatever is
 * opened must be a trace store this reader reads (tr_check_store), so
 * every user of the library refuses what the viewer refuses. */
#define _GNU_SOURCE
#include "reader_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct dist_trace {
  sqlite3 *db;
  char tmp[4200]; /* a merged temporary file to delete, or "" */
  int tmp_slot;   /* its slot for dist_trace_remove_temps, or -1 */
};

static int fail(char *err, size_t len, int rc, const char *what, const char *path) {
  if (err && len)
    snprintf(err, len, "%s: %s", path, what);
  return rc;
}

static int open_db(const char *path, sqlite3 **db, char *err, size_t len) {
  char local[8];
  if (!err || !len) {
    err = local;
    len = sizeof local;
  }
  int rc = tr_open_ro(path, db, NULL, err, len);
  if (rc == DIST_OK && (rc = tr_check_store(*db, path, err, len)) != DIST_OK) {
    sqlite3_close(*db);
    *db = NULL;
    return rc;
  }
  char v[32];
  /* A version 1 store: a temporary view gives it version 2's columns. */
  if (rc == DIST_OK && tr_meta_get(*db, "schema_version", v, sizeof v) == 0 && atoi(v) < 2 &&
      tr_exec(*db, TR_COMPAT_V1, NULL, 0) != 0) {
    sqlite3_close(*db);
    *db = NULL;
    return fail(err, len, DIST_E_INVAL, "cannot read schema version 1", path);
  }
  return rc;
}

/* A job directory's merge into a fresh file of $TMPDIR, armed for
 * dist_trace_remove_temps until the handle closes. */
static int merge_dir(dist_trace *t, const char *path, char *err, size_t len) {
  if (tr_temp_create("dist-trace", t->tmp, sizeof t->tmp, &t->tmp_slot) != 0) {
    int e = errno;
    t->tmp[0] = '\0';
    if (e == ENOSPC || e == EDQUOT)
      return fail(err, len, DIST_E_SYS, "no space left for a merged copy of a job directory; "
                  "free some or point TMPDIR elsewhere", tr_tmpdir());
    return fail(err, len, DIST_E_SYS, strerror(e), tr_tmpdir());
  }
  dist_trace_merge_report rep;
  return dist_trace_merge(path, t->tmp, &rep, err, len);
}

/* A job directory none of whose files gave a rank. */
static int no_ranks(sqlite3 *db, const char *path, char *err, size_t len) {
  sqlite3_stmt *st;
  int64_t n = 0;
  if (sqlite3_prepare_v2(db, "SELECT count(*) FROM ranks", -1, &st, NULL) == SQLITE_OK) {
    if (sqlite3_step(st) == SQLITE_ROW)
      n = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
  }
  if (n > 0)
    return DIST_OK;
  char skipped[1024];
  if (tr_meta_get(db, "skipped_files", skipped, sizeof skipped) != 0)
    skipped[0] = '\0';
  for (char *nl; (nl = strchr(skipped, '\n'));)
    *nl = nl[1] ? ';' : '\0'; // one line
  char m[1200];
  snprintf(m, sizeof m, "no rank file could be read%s%s", skipped[0] ? ": " : " (no rank-*.db in it)",
           skipped);
  return fail(err, len, DIST_E_INVAL, m, path);
}

static void release(dist_trace *t) {
  sqlite3_close(t->db);
  if (t->tmp[0])
    unlink(t->tmp);
  tr_temp_release(t->tmp_slot);
  free(t);
}

int dist_trace_open(const char *path, dist_trace **out, char *err, size_t len) {
  if (!path || !out)
    return fail(err, len, DIST_E_INVAL, "dist_trace_open: NULL argument", "?");
  struct stat st;
  if (stat(path, &st) != 0)
    return fail(err, len, DIST_E_SYS, strerror(errno), path);
  dist_trace *t = calloc(1, sizeof *t);
  if (!t)
    return fail(err, len, DIST_E_NOMEM, "out of memory", path);
  t->tmp_slot = -1;
  bool dir = S_ISDIR(st.st_mode);
  int rc = dir ? merge_dir(t, path, err, len) : DIST_OK;
  if (rc == DIST_OK)
    rc = open_db(dir ? t->tmp : path, &t->db, err, len);
  if (rc == DIST_OK && dir)
    rc = no_ranks(t->db, path, err, len);
  if (rc != DIST_OK) {
    release(t);
    return rc;
  }
  *out = t;
  return DIST_OK;
}

void dist_trace_close(dist_trace *t) {
  if (t)
    release(t);
}

void *dist_trace_sqlite(dist_trace *t) { return t ? t->db : NULL; }

static int64_t col_or(sqlite3_stmt *st, int i) {
  return sqlite3_column_type(st, i) == SQLITE_NULL ? -1 : sqlite3_column_int64(st, i);
}

static int fetch_ops(sqlite3_stmt *st, dist_trace_op *ops, size_t n, size_t *count) {
  size_t k = 0;
  int s;
  while (k < n && (s = sqlite3_step(st)) == SQLITE_ROW) {
    dist_trace_op *o = &ops[k++];
    memset(o, 0, sizeof *o);
    o->rank = sqlite3_column_int(st, 0);
    o->group_id = sqlite3_column_int(st, 1);
    o->seq = sqlite3_column_int64(st, 2);
    snprintf(o->op, sizeof o->op, "%s", (const char *)sqlite3_column_text(st, 3));
    snprintf(o->state, sizeof o->state, "%s", (const char *)sqlite3_column_text(st, 4));
    o->bytes_in = sqlite3_column_int64(st, 5);
    o->t_enqueued_ns = col_or(st, 6);
    o->t_started_ns = col_or(st, 7);
    o->t_ended_ns = col_or(st, 8);
    o->status = sqlite3_column_int(st, 9);
  }
  sqlite3_finalize(st);
  *count = k;
  return DIST_OK;
}

#define OP_COLS "rank, group_id, seq, op, state, bytes_in, t_enqueued_ns, t_started_ns," \
                " t_ended_ns, status"

int dist_trace_last_ops(dist_trace *t, int rank, dist_trace_op *ops, size_t n, size_t *count) {
  sqlite3_stmt *st;
  if (!t || !ops || !count)
    return DIST_E_INVAL;
  if (sqlite3_prepare_v2(t->db, "SELECT " OP_COLS " FROM operations WHERE rank = ?"
                                " ORDER BY t_enqueued_ns DESC LIMIT ?", -1, &st, NULL))
    return DIST_E_INVAL;
  sqlite3_bind_int(st, 1, rank);
  sqlite3_bind_int64(st, 2, (int64_t)n);
  return fetch_ops(st, ops, n, count);
}

int dist_trace_collective(dist_trace *t, int group_id, int64_t seq, dist_trace_op *ops,
                          size_t n, size_t *count) {
  sqlite3_stmt *st;
  if (!t || !ops || !count)
    return DIST_E_INVAL;
  if (sqlite3_prepare_v2(t->db, "SELECT " OP_COLS " FROM operations WHERE group_id = ?"
                                " AND p2p = 0 AND seq = ? ORDER BY rank", -1, &st, NULL))
    return DIST_E_INVAL;
  sqlite3_bind_int(st, 1, group_id);
  sqlite3_bind_int64(st, 2, seq);
  return fetch_ops(st, ops, n, count);
}
