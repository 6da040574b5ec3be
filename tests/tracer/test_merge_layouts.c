/* ctest: labels=unit timeout=30 */
/* The merge over rank files of both layouts and clock histories, written
 * by hand: a rank file of the first layout (an operations table, no clocks
 * table) merges next to one of the narrow layout (ops behind the view),
 * each with its own offset; a clock history whose offsets differ by less
 * than the round trips is one segment (the sample with the smallest round
 * trip applies to every time), one that jumps is two. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <dist/dist.h>

#include "reader_int.h"
#include "trace_util.h"
#include "tmpdir.h"

static char dir[256], job[300];

static void setup(void) {
  snprintf(dir, sizeof dir, "/tmp/dist-tracelayout-XXXXXX");
  cr_assert(dist_test_mkdtemp(dir));
  snprintf(job, sizeof job, "%s/layoutjob", dir);
  cr_assert_eq(mkdir(job, 0700), 0);
}

static void exec(sqlite3 *db, const char *sql) {
  char err[256] = "";
  cr_assert_eq(tr_exec(db, sql, err, sizeof err), 0, "%s: %s", sql, err);
}

/* A rank file: narrow (the writer's layout) or the first layout, with
 * ranks.clock_offset_ns = offset. */
static sqlite3 *rank_file(int rank, bool narrow, int64_t offset) {
  char path[400], sql[512];
  snprintf(path, sizeof path, "%s/rank-%d.db", job, rank);
  sqlite3 *db;
  cr_assert_eq(sqlite3_open(path, &db), SQLITE_OK);
  if (narrow) {
    cr_assert_eq(tr_schema_create_rank(db, rank, NULL, 0), 0);
  } else {
    cr_assert_eq(tr_schema_create(db, false, NULL, 0), 0);
    exec(db, "DROP TABLE clocks");
  }
  snprintf(sql, sizeof sql,
           "INSERT INTO meta VALUES ('schema_version','%d'),('kind','rank'),"
           "('job_id','layoutjob'),('rank','%d');"
           "INSERT OR IGNORE INTO job VALUES ('layoutjob', 2, 0, 0, NULL);"
           "INSERT INTO ranks VALUES (%d,'h',1,'cpu',NULL,%lld,100,0,NULL,0,'finished',0);",
           TR_SCHEMA_VERSION, rank, rank, (long long)offset);
  exec(db, sql);
  return db;
}

/* One completed float32[4] all_reduce, seq, enqueued at t, 50 ns long. */
static void put_op(sqlite3 *db, bool narrow, int rank, int seq, int64_t t) {
  char sql[512];
  if (narrow)
    snprintf(sql, sizeof sql,
             "INSERT INTO ops (group_id, seq, code, numel_in, numel_out, t_enq, d_start, d_end)"
             " VALUES (0, %d, %lld, 4, 4, %lld, 0, 50)", seq,
             (long long)(DIST_OP_ALL_REDUCE | 2 << 8 | DIST_FLOAT32 << 16 | 1ll << 32 |
                         1ll << 48),
             (long long)t);
  else
    snprintf(sql, sizeof sql,
             "INSERT INTO operations VALUES (%d, 0, %d, 'ALL_REDUCE', 0, 'completed',"
             " 'float32', '[4]', 1, 1, 4, 4, 16, 16, NULL, NULL, 'SUM', NULL, %lld, %lld,"
             " %lld, 0, NULL, NULL, NULL)", rank, seq, (long long)t, (long long)t,
             (long long)t + 50);
  exec(db, sql);
}

static sqlite3 *merged(void) {
  dist_trace_merge_report rep;
  sqlite3 *db = tq_merge(dir, "layoutjob", &rep);
  cr_assert(db);
  cr_assert_eq(rep.files_skipped, 0, "%s", rep.skipped);
  return db;
}

Test(tracer_layouts, a_rank_file_of_the_first_layout_merges_with_a_narrow_one, .timeout = 20) {
  setup();
  sqlite3 *a = rank_file(0, true, 0), *b = rank_file(1, false, 1000);
  exec(a, "INSERT INTO clocks VALUES (0, 10, 0, 0)");
  put_op(a, true, 0, 1, 100000);
  put_op(b, false, 1, 1, 200000);
  sqlite3_close(a);
  sqlite3_close(b);
  sqlite3 *db = merged();
  cr_assert_str_eq(tq_text(db, "SELECT group_concat(rank || ':' || op || ':' || state || ':' ||"
                               " dtype || ':' || bytes_in || ':' || redop || ':' ||"
                               " t_enqueued_ns || ':' || t_ended_ns, ' ') FROM"
                               " (SELECT * FROM operations ORDER BY rank)"),
                   "0:ALL_REDUCE:completed:float32:16:SUM:100000:100050 "
                   "1:ALL_REDUCE:completed:float32:16:SUM:201000:201050");
  cr_assert_eq(tq_int(db, "SELECT count(*) FROM clocks"), 1);
  sqlite3_close(db);
}

Test(tracer_layouts, clock_noise_is_one_segment_and_a_jump_two, .timeout = 20) {
  setup();
  /* rank 0: offsets 5000, 5100 (best round trip), 4900, all within the
   * round trips (400): one segment, 5100 everywhere */
  sqlite3 *a = rank_file(0, true, 4900);
  exec(a, "INSERT INTO clocks VALUES (0, 1000, 5000, 400), (0, 2000, 5100, 300),"
          " (0, 3000, 4900, 400)");
  put_op(a, true, 0, 1, 500);
  put_op(a, true, 0, 2, 2500);
  put_op(a, true, 0, 3, 9000);
  /* rank 1: 0, then a jump to -1000000 at 5000: two segments */
  sqlite3 *b = rank_file(1, true, -1000000);
  exec(b, "INSERT INTO clocks VALUES (1, 1000, 0, 400), (1, 5000, -1000000, 400)");
  put_op(b, true, 1, 1, 500);
  put_op(b, true, 1, 2, 4999);
  put_op(b, true, 1, 3, 5000);
  sqlite3_close(a);
  sqlite3_close(b);
  sqlite3 *db = merged();
  cr_assert_str_eq(tq_text(db, "SELECT group_concat(t_enqueued_ns || '/' || t_ended_ns, ' ')"
                               " FROM (SELECT * FROM operations WHERE rank=0 ORDER BY seq)"),
                   "5600/5650 7600/7650 14100/14150");
  cr_assert_str_eq(tq_text(db, "SELECT group_concat(t_enqueued_ns || '/' || t_ended_ns, ' ')"
                               " FROM (SELECT * FROM operations WHERE rank=1 ORDER BY seq)"),
                   "500/550 4999/5049 -995000/-994950");
  /* the history on the job clock */
  cr_assert_str_eq(tq_text(db, "SELECT group_concat(t_ns || '@' || offset_ns, ' ') FROM"
                               " (SELECT * FROM clocks WHERE rank=1 ORDER BY t_ns)"),
                   "-995000@-1000000 1000@0");
  sqlite3_close(db);
}

/* A trace.db of schema version 1 (seqs counted both kinds together, no p2p
 * or pair_seq column) still reads: the reader adds the columns through a
 * temp view, so the Chrome export pairs its send and receive (by order)
 * and a collective is found by its seq. */
Test(tracer_layouts, a_version_1_trace_still_reads, .timeout = 20) {
  setup();
  char path[400], out[400], err[256] = "";
  snprintf(path, sizeof path, "%s/v1.db", dir);
  snprintf(out, sizeof out, "%s/v1.json", dir);
  sqlite3 *db;
  cr_assert_eq(sqlite3_open(path, &db), SQLITE_OK);
  cr_assert_eq(tr_schema_create(db, false, NULL, 0), 0);
  exec(db, "DROP TABLE operations;"
           "CREATE TABLE operations (rank INTEGER NOT NULL, group_id INTEGER NOT NULL,"
           " seq INTEGER NOT NULL, op TEXT NOT NULL, is_async INTEGER NOT NULL,"
           " state TEXT NOT NULL, dtype TEXT, shape TEXT, n_inputs INTEGER NOT NULL,"
           " n_outputs INTEGER NOT NULL, numel_in INTEGER NOT NULL, numel_out INTEGER NOT NULL,"
           " bytes_in INTEGER NOT NULL, bytes_out INTEGER NOT NULL, root INTEGER, tag INTEGER,"
           " redop TEXT, timeout_ms INTEGER, t_enqueued_ns INTEGER NOT NULL,"
           " t_started_ns INTEGER, t_ended_ns INTEGER, status INTEGER NOT NULL DEFAULT 0,"
           " message TEXT, callsite_id INTEGER);"
           "INSERT INTO meta VALUES ('schema_version','1'),('kind','merged'),"
           "('job_id','v1job');"
           "INSERT INTO job VALUES ('v1job', 2, 0, 0, 2000);"
           "INSERT INTO ranks VALUES (0,'h',1,'cpu',NULL,0,0,0,NULL,0,'finished',0),"
           " (1,'h',2,'cpu',NULL,0,0,0,NULL,0,'finished',0);"
           "INSERT INTO operations VALUES"
           " (0, 0, 1, 'SEND', 0, 'completed', 'float32', '[4]', 1, 0, 4, 0, 16, 0, 1, 0,"
           "  NULL, NULL, 100, 100, 200, 0, NULL, NULL),"
           " (1, 0, 1, 'RECV', 0, 'completed', 'float32', '[4]', 0, 1, 0, 4, 0, 16, 0, 0,"
           "  NULL, NULL, 110, 110, 210, 0, NULL, NULL),"
           " (0, 0, 2, 'ALL_REDUCE', 0, 'completed', 'float32', '[4]', 1, 1, 4, 4, 16, 16,"
           "  NULL, NULL, 'SUM', NULL, 300, 300, 400, 0, NULL, NULL),"
           " (1, 0, 2, 'ALL_REDUCE', 0, 'completed', 'float32', '[4]', 1, 1, 4, 4, 16, 16,"
           "  NULL, NULL, 'SUM', NULL, 310, 310, 400, 0, NULL, NULL);");
  sqlite3_close(db);
  dist_trace *t;
  cr_assert_eq(dist_trace_open(path, &t, err, sizeof err), DIST_OK, "%s", err);
  dist_trace_op ops[4];
  size_t n = 0;
  cr_assert_eq(dist_trace_collective(t, 0, 2, ops, 4, &n), DIST_OK);
  cr_assert_eq(n, 2, "the all_reduce on both ranks");
  cr_assert_eq(dist_trace_collective(t, 0, 1, ops, 4, &n), DIST_OK);
  cr_assert_eq(n, 0, "#1 is point to point, no collective");
  cr_assert_eq(dist_trace_export_chrome(t, out, err, sizeof err), DIST_OK, "%s", err);
  dist_trace_close(t);
  FILE *f = fopen(out, "r");
  cr_assert_not_null(f);
  char buf[8192];
  size_t len = fread(buf, 1, sizeof buf - 1, f);
  buf[len] = '\0';
  fclose(f);
  cr_assert(strstr(buf, "\"name\":\"SEND #1 -> RECV #1\""), "the send's flow: %s", buf);
}
