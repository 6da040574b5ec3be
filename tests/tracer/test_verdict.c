/* ctest: labels=unit timeout=30 */
/* The verdict row (SCHEMA.md "verdict"): what distrun writes after the
 * merge is what a reader gets back, field for field, through the public
 * reader; a second verdict replaces the first; dropped is the ranks'
 * dropped records summed; a trace.db merged before the table existed
 * reads as "no verdict" and takes one; bad input is refused with a
 * message. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "reader_int.h"
#include "trace_util.h"
#include "tmpdir.h"

static char path[256];

/* A merged trace.db with ranks 0-3 (rank 2 lost 7 records, rank 3 5);
 * without_table: as written before the verdict table existed. */
static void merged_file(bool without_table) {
  char dir[] = "/tmp/dist-verdict-XXXXXX";
  cr_assert(dist_test_mkdtemp(dir));
  snprintf(path, sizeof path, "%s/trace.db", dir);
  sqlite3 *db;
  cr_assert_eq(sqlite3_open(path, &db), SQLITE_OK);
  char e[256] = "";
  cr_assert_eq(tr_schema_create(db, true, e, sizeof e), 0, "%s", e);
  if (without_table)
    cr_assert_eq(tr_exec(db, "DROP TABLE verdict", e, sizeof e), 0, "%s", e);
  cr_assert_eq(tr_exec(db, "INSERT INTO meta VALUES ('schema_version','1'),('kind','merged'),"
                           "('job_id','vj');"
                           "INSERT INTO ranks SELECT value, 'h', 100 + value, 'cpu', NULL, 0,"
                           " 0, 0, NULL, 0, 'finished', CASE value WHEN 2 THEN 7 WHEN 3 THEN 5"
                           " ELSE 0 END FROM json_each('[0,1,2,3]');", e, sizeof e), 0, "%s", e);
  sqlite3_close(db);
}

static dist_trace_verdict_row read_back(void) {
  dist_trace *t;
  char err[256] = "";
  cr_assert_eq(dist_trace_open(path, &t, err, sizeof err), DIST_OK, "%s", err);
  dist_trace_verdict_row r;
  cr_assert_eq(dist_trace_read_verdict(dist_trace_sqlite(t), &r, err, sizeof err), DIST_OK,
               "%s", err);
  dist_trace_close(t);
  return r;
}

Test(tracer_verdict, a_written_verdict_reads_back_field_for_field, .timeout = 10) {
  merged_file(false);
  int culprits[] = {5, 3};
  dist_trace_verdict v = {
      .kind = "desync", .exit_status = 10, .culprits = culprits, .n_culprits = 2,
      .group_id = 2, .group_name = "dp", .op = "ALL_REDUCE", .seq = 14, .field = "dtype",
      .site = "train.c:42 in step()", .reported_by = 1,
      .text = "desync in group 2 (dp, 4 ranks) at ALL_REDUCE #14: ranks disagree on the dtype"};
  char err[256] = "";
  cr_assert_eq(dist_trace_set_verdict(path, &v, err, sizeof err), DIST_OK, "%s", err);
  dist_trace_verdict_row r = read_back();
  cr_assert_eq(r.present, 1);
  cr_assert_str_eq(r.kind, "desync");
  cr_assert_eq(r.exit_status, 10);
  cr_assert_eq(r.n_culprits, 2);
  cr_assert_eq(r.culprits[0], 5);
  cr_assert_eq(r.culprits[1], 3);
  cr_assert_eq(r.group_id, 2);
  cr_assert_str_eq(r.group_name, "dp");
  cr_assert_str_eq(r.op, "ALL_REDUCE");
  cr_assert_eq(r.seq, 14);
  cr_assert_str_eq(r.field, "dtype");
  cr_assert_str_eq(r.site, "train.c:42 in step()");
  cr_assert_eq(r.reported_by, 1);
  cr_assert_eq(r.dropped, 12, "ranks 2 and 3 lost 7 + 5 records");
  cr_assert_str_eq(r.text, v.text);
  dist_trace_verdict_row_free(&r);
  /* plain SQL answers too */
  sqlite3 *db;
  cr_assert_eq(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
  cr_assert_str_eq(tq_text(db, "SELECT kind || ' ' || exit_status || ' [' || culprits || '] ' ||"
                               " group_name || ' ' || seq FROM verdict"),
                   "desync 10 [5,3] dp 14");
  sqlite3_close(db);
}

Test(tracer_verdict, a_second_verdict_replaces_the_first, .timeout = 10) {
  merged_file(false);
  dist_trace_verdict a = {.kind = "hang", .exit_status = 11, .group_id = -1, .reported_by = -1};
  dist_trace_verdict b = {.kind = "interrupted", .exit_status = 130, .group_id = -1,
                          .reported_by = -1, .text = "distrun: interrupted (SIGINT)"};
  cr_assert_eq(dist_trace_set_verdict(path, &a, NULL, 0), DIST_OK);
  cr_assert_eq(dist_trace_set_verdict(path, &b, NULL, 0), DIST_OK);
  dist_trace_verdict_row r = read_back();
  cr_assert_str_eq(r.kind, "interrupted");
  cr_assert_eq(r.exit_status, 130);
  cr_assert_eq(r.n_culprits, 0);
  cr_assert_eq(r.group_id, -1, "no group: NULL reads -1");
  cr_assert_eq(r.seq, 0, "no seq: NULL reads 0");
  cr_assert_str_eq(r.op, "");
  cr_assert_eq(r.reported_by, -1);
  dist_trace_verdict_row_free(&r);
  sqlite3 *db;
  cr_assert_eq(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
  cr_assert_eq(tq_int(db, "SELECT count(*) FROM verdict"), 1, "one row");
  sqlite3_close(db);
}

Test(tracer_verdict, an_older_trace_without_the_table_reads_no_verdict_and_takes_one,
     .timeout = 10) {
  merged_file(true);
  dist_trace_verdict_row r = read_back();
  cr_assert_eq(r.present, 0, "no table: no verdict, and no error");
  dist_trace_verdict_row_free(&r);
  int culprits[] = {2};
  dist_trace_verdict v = {.kind = "crash", .exit_status = 12, .culprits = culprits,
                          .n_culprits = 1, .group_id = -1, .reported_by = 2};
  char err[256] = "";
  cr_assert_eq(dist_trace_set_verdict(path, &v, err, sizeof err), DIST_OK, "%s", err);
  r = read_back();
  cr_assert_eq(r.present, 1);
  cr_assert_str_eq(r.kind, "crash");
  cr_assert_eq(r.culprits[0], 2);
  dist_trace_verdict_row_free(&r);
}

Test(tracer_verdict, a_merge_without_distrun_has_the_table_and_no_row, .timeout = 10) {
  char dir[] = "/tmp/dist-verdict-XXXXXX";
  cr_assert(dist_test_mkdtemp(dir));
  snprintf(path, sizeof path, "%s/trace.db", dir);
  char err[256] = "";
  cr_assert_eq(dist_trace_merge(dir, path, NULL, err, sizeof err), DIST_OK, "%s", err);
  dist_trace_verdict_row r = read_back();
  cr_assert_eq(r.present, 0);
  dist_trace_verdict_row_free(&r);
}

Test(tracer_verdict, bad_input_is_refused_with_a_message, .timeout = 10) {
  merged_file(false);
  char err[256] = "";
  dist_trace_verdict v = {.kind = "exploded", .exit_status = 1, .group_id = -1};
  cr_assert_eq(dist_trace_set_verdict(path, &v, err, sizeof err), DIST_E_INVAL);
  cr_assert(strstr(err, "unknown verdict kind"), "%s", err);
  v.kind = "other";
  cr_assert_eq(dist_trace_set_verdict("/nonexistent/trace.db", &v, err, sizeof err), DIST_E_SYS);
  cr_assert(strstr(err, "/nonexistent/trace.db"), "%s", err);
  /* a rank file is not where a verdict goes */
  sqlite3 *db;
  cr_assert_eq(sqlite3_open(path, &db), SQLITE_OK);
  cr_assert_eq(tr_exec(db, "UPDATE meta SET value = 'rank' WHERE key = 'kind'", NULL, 0), 0);
  sqlite3_close(db);
  cr_assert_eq(dist_trace_set_verdict(path, &v, err, sizeof err), DIST_E_INVAL);
  cr_assert(strstr(err, "not a merged trace"), "%s", err);
}
