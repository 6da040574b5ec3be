/* sql.c - the SQLite helpers of vw_sql.h. */
#include <stdio.h>
#include <string.h>

#include "vw_sql.h"

void vw_sql_text(sqlite3_stmt *st, int i, char *out, size_t len) {
  const unsigned char *t = sqlite3_column_text(st, i);
  if (len == 0)
    return;
  snprintf(out, len, "%s", t ? (const char *)t : "");
}

int64_t vw_sql_i64(sqlite3_stmt *st, int i) {
  if (sqlite3_column_type(st, i) == SQLITE_NULL)
    return -1;
  return sqlite3_column_int64(st, i);
}

sqlite3_stmt *vw_sql_prepare(vw_model *m, const char *sql) {
  sqlite3_stmt *st = NULL;
  if (sqlite3_prepare_v2(m->db, sql, -1, &st, NULL) != SQLITE_OK) {
    snprintf(m->err, sizeof m->err, "%.200s: %.300s", m->path, sqlite3_errmsg(m->db));
    sqlite3_finalize(st);
    return NULL;
  }
  return st;
}

int vw_sql_step(vw_model *m, sqlite3_stmt *st) {
  int rc = sqlite3_step(st);
  if (rc == SQLITE_ROW || rc == SQLITE_DONE)
    return rc;
  int code = sqlite3_errcode(m->db);
  snprintf(m->err, sizeof m->err, "%.200s: %s%.250s", m->path,
           code == SQLITE_CORRUPT || code == SQLITE_NOTADB ? "corrupt or truncated trace store: "
                                                           : "",
           sqlite3_errmsg(m->db));
  return -1;
}

int64_t vw_sql_scalar(vw_model *m, const char *sql, int nargs, const int64_t *args) {
  sqlite3_stmt *st = vw_sql_prepare(m, sql);
  if (!st)
    return -1;
  for (int i = 0; i < nargs; i++)
    sqlite3_bind_int64(st, i + 1, args[i]);
  int64_t v = vw_sql_step(m, st) == SQLITE_ROW ? vw_sql_i64(st, 0) : -1;
  sqlite3_finalize(st);
  return v;
}
