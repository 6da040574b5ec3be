/* trace_util.c - helpers of the tracer's tests (trace_util.h). */
#include "trace_util.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

static sqlite3_stmt *run(sqlite3 *db, const char *fmt, va_list ap) {
  char *sql = sqlite3_vmprintf(fmt, ap);
  sqlite3_stmt *st = NULL;
  if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK)
    fprintf(stderr, "query '%s': %s\n", sql, sqlite3_errmsg(db));
  else if (sqlite3_step(st) != SQLITE_ROW) {
    sqlite3_finalize(st);
    st = NULL;
  }
  sqlite3_free(sql);
  return st;
}

int64_t tq_int(sqlite3 *db, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  sqlite3_stmt *st = run(db, fmt, ap);
  va_end(ap);
  int64_t v = INT64_MIN;
  if (st && sqlite3_column_type(st, 0) != SQLITE_NULL)
    v = sqlite3_column_int64(st, 0);
  sqlite3_finalize(st);
  return v;
}

const char *tq_text(sqlite3 *db, const char *fmt, ...) {
  static char buf[4096];
  va_list ap;
  va_start(ap, fmt);
  sqlite3_stmt *st = run(db, fmt, ap);
  va_end(ap);
  buf[0] = '\0';
  if (st && sqlite3_column_text(st, 0))
    snprintf(buf, sizeof buf, "%s", (const char *)sqlite3_column_text(st, 0));
  sqlite3_finalize(st);
  return buf;
}

sqlite3 *tq_merge(const char *dir, const char *job, dist_trace_merge_report *rep) {
  char jd[1024], out[1024], err[512];
  dist_trace_merge_report local;
  snprintf(jd, sizeof jd, "%s/%s", dir, job);
  snprintf(out, sizeof out, "%s/trace.db", dir);
  if (dist_trace_merge(jd, out, rep ? rep : &local, err, sizeof err) != DIST_OK) {
    fprintf(stderr, "merge of %s failed: %s\n", jd, err);
    return NULL;
  }
  sqlite3 *db;
  if (sqlite3_open_v2(out, &db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK) {
    fprintf(stderr, "open %s: %s\n", out, sqlite3_errmsg(db));
    sqlite3_close(db);
    return NULL;
  }
  return db;
}
