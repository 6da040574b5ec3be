/* verdict.c - the job's one verdict in trace.db (SCHEMA.md "verdict"):
 * written once by distrun after the merge, read by distview, which shows
 * it first and its own analysis of the rows after it.
 *
 * One row, replaced whole: the table is deleted and written in one
 * transaction, so a reader sees the old verdict or the new one, never a
 * mix. The culprits are stored as text ("3,5") so `sqlite3 trace.db
 * 'select * from verdict'` reads plainly. */
#include "reader_int.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const kinds[] = {"success", "desync", "hang",   "crash", "died",
                                    "early_exit", "interrupted", "launch", "other"};

static int fail(char *err, size_t len, int rc, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int fail(char *err, size_t len, int rc, const char *fmt, ...) {
  if (err && len) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, len, fmt, ap);
    va_end(ap);
  }
  return rc;
}

static bool known_kind(const char *k) {
  for (size_t i = 0; k && i < sizeof kinds / sizeof *kinds; i++)
    if (!strcmp(k, kinds[i]))
      return true;
  return false;
}

static void bind_text(sqlite3_stmt *st, int i, const char *s) {
  s ? sqlite3_bind_text(st, i, s, -1, SQLITE_TRANSIENT) : sqlite3_bind_null(st, i);
}

/* "3,5,7" from the culprits; "" for none. sqlite3_free it. */
static char *culprit_text(const dist_trace_verdict *v) {
  char *s = sqlite3_mprintf("%s", "");
  for (size_t i = 0; s && i < v->n_culprits; i++) {
    char *t = sqlite3_mprintf("%s%s%d", s, i ? "," : "", v->culprits[i]);
    sqlite3_free(s);
    s = t;
  }
  return s;
}

static int insert(sqlite3 *db, const dist_trace_verdict *v) {
  sqlite3_stmt *st;
  if (sqlite3_prepare_v2(db,
                         "INSERT INTO verdict (kind, exit_status, culprits, group_id, group_name,"
                         " op, seq, field, site, reported_by, dropped, text) VALUES (?1, ?2, ?3,"
                         " ?4, ?5, ?6, ?7, ?8, ?9, ?10, (SELECT coalesce(sum(dropped_records), 0)"
                         " FROM ranks), ?11)", -1, &st, NULL) != SQLITE_OK)
    return -1;
  char *culprits = culprit_text(v);
  bind_text(st, 1, v->kind);
  sqlite3_bind_int(st, 2, v->exit_status);
  bind_text(st, 3, culprits ? culprits : "");
  v->group_id >= 0 ? sqlite3_bind_int(st, 4, v->group_id) : sqlite3_bind_null(st, 4);
  bind_text(st, 5, v->group_name);
  bind_text(st, 6, v->op);
  v->seq > 0 ? sqlite3_bind_int64(st, 7, v->seq) : sqlite3_bind_null(st, 7);
  bind_text(st, 8, v->field);
  bind_text(st, 9, v->site);
  sqlite3_bind_int(st, 10, v->reported_by);
  bind_text(st, 11, v->text);
  int rc = culprits && sqlite3_step(st) == SQLITE_DONE ? 0 : -1;
  sqlite3_free(culprits);
  sqlite3_finalize(st);
  return rc;
}

int dist_trace_set_verdict(const char *db_path, const dist_trace_verdict *v, char *err,
                           size_t errlen) {
  if (!db_path || !v || !known_kind(v->kind) || (v->n_culprits && !v->culprits))
    return fail(err, errlen, DIST_E_INVAL, "dist_trace_set_verdict: %s",
                !db_path || !v ? "NULL argument"
                : v->n_culprits && !v->culprits ? "culprits NULL"
                                                : "unknown verdict kind");
  sqlite3 *db = NULL;
  if (sqlite3_open_v2(db_path, &db, SQLITE_OPEN_READWRITE, NULL) != SQLITE_OK) {
    int rc = fail(err, errlen, DIST_E_SYS, "%s: %s", db_path,
                  db ? sqlite3_errmsg(db) : "out of memory");
    sqlite3_close(db);
    return rc;
  }
  sqlite3_busy_timeout(db, 5000);
  char kind[32] = "", e[256] = "";
  int rc = DIST_OK;
  if (tr_meta_get(db, "kind", kind, sizeof kind) != 0 || strcmp(kind, "merged") != 0) {
    rc = fail(err, errlen, DIST_E_INVAL, "%s: not a merged trace (meta.kind '%s')", db_path,
              kind);
  } else if (tr_exec(db, "BEGIN IMMEDIATE", e, sizeof e) != 0 ||
             tr_schema_verdict(db, e, sizeof e) != 0 ||
             tr_exec(db, "DELETE FROM verdict", e, sizeof e) != 0 || insert(db, v) != 0 ||
             tr_exec(db, "COMMIT", e, sizeof e) != 0) {
    rc = fail(err, errlen, DIST_E_SYS, "%s: writing the verdict: %s", db_path,
              e[0] ? e : sqlite3_errmsg(db));
    tr_exec(db, "ROLLBACK", NULL, 0);
  }
  sqlite3_close(db);
  return rc;
}

int dist_trace_set_attempt(const char *db_path, const char *run_id, int attempt,
                           int max_restarts, char *err, size_t errlen) {
  if (!db_path || !run_id || attempt < 0 || max_restarts < 0)
    return fail(err, errlen, DIST_E_INVAL, "dist_trace_set_attempt: %s",
                !db_path || !run_id ? "NULL argument" : "negative attempt or restarts");
  sqlite3 *db = NULL;
  if (sqlite3_open_v2(db_path, &db, SQLITE_OPEN_READWRITE, NULL) != SQLITE_OK) {
    int rc = fail(err, errlen, DIST_E_SYS, "%s: %s", db_path,
                  db ? sqlite3_errmsg(db) : "out of memory");
    sqlite3_close(db);
    return rc;
  }
  sqlite3_busy_timeout(db, 5000);
  char kind[32] = "", a[16], m[16];
  snprintf(a, sizeof a, "%d", attempt);
  snprintf(m, sizeof m, "%d", max_restarts);
  int rc = DIST_OK;
  if (tr_meta_get(db, "kind", kind, sizeof kind) != 0 || strcmp(kind, "merged") != 0)
    rc = fail(err, errlen, DIST_E_INVAL, "%s: not a merged trace (meta.kind '%s')", db_path,
              kind);
  else if (tr_meta_set(db, "run_id", run_id) != 0 || tr_meta_set(db, "attempt", a) != 0 ||
           tr_meta_set(db, "max_restarts", m) != 0)
    rc = fail(err, errlen, DIST_E_SYS, "%s: writing the attempt: %s", db_path,
              sqlite3_errmsg(db));
  sqlite3_close(db);
  return rc;
}

/* --- reading ---------------------------------------------------------------- */

static void col_text(sqlite3_stmt *st, int i, char *out, size_t len) {
  const char *s = (const char *)sqlite3_column_text(st, i);
  snprintf(out, len, "%s", s ? s : "");
}

static void parse_culprits(const char *s, dist_trace_verdict_row *r) {
  while (s && *s && r->n_culprits < DIST_TRACE_VERDICT_CULPRITS) {
    char *end;
    long v = strtol(s, &end, 10);
    if (end == s)
      break;
    r->culprits[r->n_culprits++] = (int)v;
    s = *end == ',' ? end + 1 : end;
  }
}

static int fill(sqlite3_stmt *st, dist_trace_verdict_row *r) {
  r->present = 1;
  col_text(st, 0, r->kind, sizeof r->kind);
  r->exit_status = sqlite3_column_int(st, 1);
  parse_culprits((const char *)sqlite3_column_text(st, 2), r);
  r->group_id = sqlite3_column_type(st, 3) == SQLITE_NULL ? -1 : sqlite3_column_int(st, 3);
  col_text(st, 4, r->group_name, sizeof r->group_name);
  col_text(st, 5, r->op, sizeof r->op);
  r->seq = sqlite3_column_int64(st, 6); /* NULL reads 0: none */
  col_text(st, 7, r->field, sizeof r->field);
  col_text(st, 8, r->site, sizeof r->site);
  r->reported_by = sqlite3_column_int(st, 9);
  r->dropped = sqlite3_column_int64(st, 10);
  const char *t = (const char *)sqlite3_column_text(st, 11);
  r->text = strdup(t ? t : "");
  return r->text ? DIST_OK : DIST_E_NOMEM;
}

int dist_trace_read_verdict(void *handle, dist_trace_verdict_row *out, char *err,
                            size_t errlen) {
  sqlite3 *db = handle;
  if (!db || !out)
    return fail(err, errlen, DIST_E_INVAL, "dist_trace_read_verdict: NULL argument");
  memset(out, 0, sizeof *out);
  out->group_id = out->reported_by = -1;
  sqlite3_stmt *st;
  /* no table: a file merged before verdicts existed, or a rank file */
  if (sqlite3_prepare_v2(db, "SELECT 1 FROM sqlite_master WHERE type = 'table' AND"
                             " name = 'verdict'", -1, &st, NULL) != SQLITE_OK)
    return fail(err, errlen, DIST_E_INVAL, "reading the verdict: %s", sqlite3_errmsg(db));
  bool table = sqlite3_step(st) == SQLITE_ROW;
  sqlite3_finalize(st);
  if (!table)
    return DIST_OK;
  if (sqlite3_prepare_v2(db, "SELECT kind, exit_status, culprits, group_id, group_name, op, seq,"
                             " field, site, reported_by, dropped, text FROM verdict"
                             " ORDER BY rowid DESC LIMIT 1", -1, &st, NULL) != SQLITE_OK)
    return fail(err, errlen, DIST_E_INVAL, "reading the verdict: %s", sqlite3_errmsg(db));
  int s = sqlite3_step(st), rc = DIST_OK;
  if (s == SQLITE_ROW)
    rc = fill(st, out);
  else if (s != SQLITE_DONE)
    rc = fail(err, errlen, DIST_E_INVAL, "reading the verdict: %s", sqlite3_errmsg(db));
  sqlite3_finalize(st);
  if (rc == DIST_E_NOMEM)
    fail(err, errlen, rc, "out of memory");
  return rc;
}

void dist_trace_verdict_row_free(dist_trace_verdict_row *row) {
  if (row) {
    free(row->text);
    row->text = NULL;
  }
}
