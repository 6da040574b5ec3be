/* reader.c - opening a trace store and the query helpers
 * (trace_reader.h). A job directory is merged into a temporary file first,
 * deleted when the handle closes. */
#define _GNU_SOURCE
#include "reader_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct dist_trace {
  sqlite3 *db;
  char tmp[64]; /* a merged temporary file to delete, or "" */
};

static int fail(char *err, size_t len, int rc, const char *what, const char *path) {
  if (err && len)
    snprintf(err, len, "%s: %s", path, what);
  return rc;
}

static int open_db(const char *path, sqlite3 **db, char *err, size_t len) {
  if (sqlite3_open_v2(path, db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK) {
    int rc = fail(err, len, DIST_E_INVAL, sqlite3_errmsg(*db), path);
    sqlite3_close(*db);
    return rc;
  }
  char v[32];
  if (tr_meta_get(*db, "schema_version", v, sizeof v) != 0) {
    sqlite3_close(*db);
    return fail(err, len, DIST_E_INVAL, "not a libdist trace (no meta.schema_version)", path);
  }
  if (atoi(v) < 2 && tr_exec(*db, TR_COMPAT_V1, NULL, 0) != 0) {
    sqlite3_close(*db);
    return fail(err, len, DIST_E_INVAL, "cannot read schema version 1", path);
  }
  if (atoi(v) > TR_SCHEMA_VERSION) {
    sqlite3_close(*db);
    char m[96];
    snprintf(m, sizeof m, "schema version %s is newer than this reader's %d", v,
             TR_SCHEMA_VERSION);
    return fail(err, len, DIST_E_INVAL, m, path);
  }
  return DIST_OK;
}

int dist_trace_open(const char *path, dist_trace **out, char *err, size_t len) {
  if (!path || !out)
    return fail(err, len, DIST_E_INVAL, "dist_trace_open: NULL argument", "?");
  struct stat st;
  if (stat(path, &st) != 0)
    return fail(err, len, DIST_E_SYS, "no such file or directory", path);
  dist_trace *t = calloc(1, sizeof *t);
  if (!t)
    return fail(err, len, DIST_E_NOMEM, "out of memory", path);
  const char *db_path = path;
  if (S_ISDIR(st.st_mode)) {
    snprintf(t->tmp, sizeof t->tmp, "/tmp/dist-trace-XXXXXX");
    int fd = mkstemp(t->tmp);
    if (fd < 0) {
      free(t);
      return fail(err, len, DIST_E_SYS, "cannot create a temporary file", "/tmp");
    }
    close(fd);
    dist_trace_merge_report rep;
    int rc = dist_trace_merge(path, t->tmp, &rep, err, len);
    if (rc != DIST_OK) {
      unlink(t->tmp);
      free(t);
      return rc;
    }
    db_path = t->tmp;
  }
  int rc = open_db(db_path, &t->db, err, len);
  if (rc != DIST_OK) {
    if (t->tmp[0])
      unlink(t->tmp);
    free(t);
    return rc;
  }
  *out = t;
  return DIST_OK;
}

void dist_trace_close(dist_trace *t) {
  if (!t)
    return;
  sqlite3_close(t->db);
  if (t->tmp[0])
    unlink(t->tmp);
  free(t);
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
                                " AND NOT p2p AND seq = ? ORDER BY rank", -1, &st, NULL))
    return DIST_E_INVAL;
  sqlite3_bind_int(st, 1, group_id);
  sqlite3_bind_int64(st, 2, seq);
  return fetch_ops(st, ops, n, count);
}
