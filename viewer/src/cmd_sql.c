/* cmd_sql.c - `distview sql [--json] TRACE "SELECT ..."`: one read-only
 * statement over the trace store (tracer/SCHEMA.md), printed as a header
 * and tab-separated rows, or as a JSON array of objects. The connection is
 * opened read-only with query_only set, and a statement that would write
 * is refused before it runs (exit 2), so a script cannot damage the trace. */
#include <sqlite3.h>
#include <stdio.h>
#include <string.h>

#include "vw.h"

static const char usage[] =
    "usage: distview sql [--json] TRACE \"SELECT ...\"\n"
    "Runs one read-only SQL statement over the trace (tables: tracer/SCHEMA.md).\n"
    "Output: a header line and tab-separated rows, or --json: an array of objects.\n";

static void value_json(sqlite3_stmt *st, int i, FILE *f) {
  switch (sqlite3_column_type(st, i)) {
  case SQLITE_NULL: fputs("null", f); break;
  case SQLITE_INTEGER: fprintf(f, "%lld", (long long)sqlite3_column_int64(st, i)); break;
  case SQLITE_FLOAT: fprintf(f, "%.17g", sqlite3_column_double(st, i)); break;
  case SQLITE_BLOB: fprintf(f, "\"<blob %d bytes>\"", sqlite3_column_bytes(st, i)); break;
  default: vw_json_str(f, (const char *)sqlite3_column_text(st, i));
  }
}

static void value_text(sqlite3_stmt *st, int i, FILE *f) {
  if (sqlite3_column_type(st, i) == SQLITE_BLOB) {
    fprintf(f, "<blob %d bytes>", sqlite3_column_bytes(st, i));
    return;
  }
  const unsigned char *t = sqlite3_column_text(st, i);
  /* tabs and newlines would break the row format */
  for (; t && *t; t++)
    fputc(*t == '\t' || *t == '\n' ? ' ' : *t, f);
}

static int run(sqlite3 *db, sqlite3_stmt *st, bool json, FILE *f) {
  int nc = sqlite3_column_count(st), rc, rows = 0;
  if (json)
    fputs("[", f);
  else
    for (int i = 0; i < nc; i++)
      fprintf(f, "%s%s", sqlite3_column_name(st, i), i + 1 < nc ? "\t" : "\n");
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    if (json)
      fputs(rows ? ",{" : "{", f);
    for (int i = 0; i < nc; i++) {
      if (json) {
        fputs(i ? "," : "", f);
        vw_json_str(f, sqlite3_column_name(st, i));
        fputc(':', f);
        value_json(st, i, f);
      } else {
        value_text(st, i, f);
        fputs(i + 1 < nc ? "\t" : "\n", f);
      }
    }
    if (json)
      fputs("}", f);
    rows++;
  }
  if (json)
    fputs("]\n", f);
  if (rc != SQLITE_DONE) {
    fprintf(stderr, "distview sql: %s\n", sqlite3_errmsg(db));
    return VW_EXIT_UNREADABLE;
  }
  return 0;
}

int vw_cmd_sql(int argc, char **argv) {
  bool json;
  int rc = 0;
  int i = vw_parse_common(argc, argv, usage, &json, 1, &rc);
  if (i < 0)
    return rc;
  vw_model *m;
  if ((rc = vw_open_or_report("distview sql", argv[i], &m)) != 0)
    return rc;
  const char *sql = argv[i + 1], *tail = NULL;
  sqlite3_stmt *st = NULL;
  if (sqlite3_prepare_v2(m->db, sql, -1, &st, &tail) != SQLITE_OK || !st) {
    fprintf(stderr, "distview sql: %s\n", st ? sqlite3_errmsg(m->db) :
            sqlite3_errcode(m->db) ? sqlite3_errmsg(m->db) : "empty statement");
    rc = VW_EXIT_USAGE;
  } else if (!sqlite3_stmt_readonly(st)) {
    fprintf(stderr, "distview sql: only read-only statements (SELECT, WITH, EXPLAIN); the trace "
                    "is never written\n");
    rc = VW_EXIT_USAGE;
  } else if (tail && tail[strspn(tail, " \t\r\n;")]) {
    fprintf(stderr, "distview sql: one statement at a time (found more after the first)\n");
    rc = VW_EXIT_USAGE;
  } else {
    rc = run(m->db, st, json, stdout);
  }
  sqlite3_finalize(st);
  vw_model_close(m);
  return rc;
}
