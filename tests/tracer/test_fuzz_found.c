/* ctest: labels=unit timeout=30 */
/* test_fuzz_found.c - what fuzz_trace (tests/fuzz, issue 26) found in the
 * reader library, kept in the normal suites:
 *   - a rank file whose clocks table holds offsets at the ends of 64 bits
 *     (a damaged file, or SQL from fuzz_trace's seeds) made the merge's
 *     clock segmentation subtract them in signed arithmetic (undefined
 *     behaviour; UBSan aborts);
 *   - building a rank file's operations view started from a NULL buffer
 *     plus zero (undefined behaviour clang's UBSan reports; gcc's does not
 *     check it, so here the view is only checked to come out whole). */
#include <criterion/criterion.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <dist/dist.h>

#include "reader_int.h"
#include "trace_util.h"
#include "tmpdir.h"

static void exec(sqlite3 *db, const char *sql) {
  char err[256] = "";
  cr_assert_eq(tr_exec(db, sql, err, sizeof err), 0, "%s: %s", sql, err);
}

/* A job directory (in a fresh directory, made into dir) of one rank file
 * holding the job's and the rank's rows plus `rows` (SQL); merged into
 * dir/trace.db, which must succeed with that one rank. */
static dist_trace_merge_report merge_one_rank(char *dir, const char *rows) {
  char job[300], path[400];
  cr_assert(dist_test_mkdtemp(dir));
  snprintf(job, sizeof job, "%s/fz", dir);
  cr_assert_eq(mkdir(job, 0700), 0);
  snprintf(path, sizeof path, "%s/rank-0.db", job);
  sqlite3 *db;
  cr_assert_eq(sqlite3_open(path, &db), SQLITE_OK);
  cr_assert_eq(tr_schema_create_rank(db, 0, NULL, 0), 0);
  exec(db, "INSERT INTO meta VALUES ('schema_version','" TR_SCHEMA_VERSION_STR "'),"
           "('kind','rank'),('job_id','fz'),('rank','0');"
           "INSERT INTO job VALUES ('fz', 1, 0, 0, NULL);"
           "INSERT INTO ranks VALUES (0,'h',1,'cpu',NULL,0,100,0,NULL,0,'finished',0);");
  exec(db, rows);
  sqlite3_close(db);
  dist_trace_merge_report rep;
  char out[400], err[512];
  snprintf(out, sizeof out, "%s/trace.db", dir);
  cr_assert_eq(dist_trace_merge(job, out, &rep, err, sizeof err), DIST_OK, "%s", err);
  cr_assert_eq(rep.ranks_merged, 1, "%s", rep.skipped);
  return rep;
}

Test(tracer_fuzz_found, clock_offsets_at_the_ends_of_64_bits_merge, .timeout = 20) {
  char dir[] = "/tmp/dist-fuzzfound-XXXXXX";
  dist_trace_merge_report rep = merge_one_rank(
      dir, "INSERT INTO ops (group_id, seq, code, numel_in, numel_out, t_enq, d_start, d_end)"
           " VALUES (0, 1, 3, 1, 1, 1000, 0, 10);"
           "INSERT INTO clocks VALUES (0, 1, 9223372036854775807, -1),"
           " (0, 2, -9223372036854775808, 0), (0, 3, 0, 9223372036854775807);");
  cr_assert_eq(rep.operations, 1);
}

Test(tracer_fuzz_found, a_rank_files_operations_view_comes_out_whole, .timeout = 10) {
  sqlite3 *db;
  cr_assert_eq(sqlite3_open(":memory:", &db), SQLITE_OK);
  cr_assert_eq(tr_schema_create_rank(db, 3, NULL, 0), 0);
  exec(db, "INSERT INTO ops (group_id, seq, code, numel_in, numel_out, t_enq, d_start, d_end)"
           " VALUES (0, 1, 3 | (2 << 8) | (2 << 16), 4, 4, 100, 5, 50)");
  cr_assert_str_eq(tq_text(db, "SELECT op || ' ' || state || ' ' || dtype || ' ' || rank FROM"
                               " operations"), "ALL_REDUCE completed float32 3");
  sqlite3_close(db);
}

/* fuzz_trace: a rank file with no operation made the merge's summaries
 * sort an empty vector through qsort(NULL, 0) (undefined; UBSan stops the
 * sanitizer stage's run of this test). It merges, with empty summaries. */
Test(tracer_fuzz_found, a_rank_file_without_operations_merges_with_empty_summaries,
     .timeout = 20) {
  char dir[] = "/tmp/dist-fuzzfound-XXXXXX", out[400];
  dist_trace_merge_report rep = merge_one_rank(dir, "");
  cr_assert_eq(rep.operations, 0);
  snprintf(out, sizeof out, "%s/trace.db", dir);
  sqlite3 *db;
  cr_assert_eq(sqlite3_open_v2(out, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
  cr_assert_eq(tq_int(db, "SELECT count(*) FROM stat_ranks"), 0);
  cr_assert_eq(tq_int(db, "SELECT count(*) FROM stat_latency"), 0);
  sqlite3_close(db);
}
