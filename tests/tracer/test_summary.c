/* ctest: labels=unit timeout=60 */
/* The merge's summaries (SCHEMA.md "Summaries", tracer/src/summary.c):
 * a merged file has them, with the values a hand count gives (the
 * collective whose fingerprint differs, the latency and arrival figures,
 * point-to-point rows kept out of both collective summaries), writing them
 * again gives the same rows, and `distview diagnose` and `stats` answer
 * the same from them as from every operation (the tables dropped in a
 * copy). Three rank files of the first layout, written by hand. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "proc.h"
#include "reader_int.h"
#include "trace_util.h"

static char dir[256], job[300], out[300];

static void exec(sqlite3 *db, const char *sql) {
  char err[256] = "";
  cr_assert_eq(tr_exec(db, sql, err, sizeof err), 0, "%s: %s", sql, err);
}

/* One operation row of rank. start/end < 0: NULL. dtype NULL: a row whose
 * first record was lost (no dtype, shape, reduce op or element count). */
static void op(sqlite3 *db, int rank, int seq, const char *name, const char *state,
               const char *dtype, int64_t enq, int64_t start, int64_t end, int root) {
  char sql[700], r[16] = "NULL", s[24], e[24], fp[64];
  if (root >= 0)
    snprintf(r, sizeof r, "%d", root);
  snprintf(s, sizeof s, "%lld", (long long)start);
  snprintf(e, sizeof e, "%lld", (long long)end);
  snprintf(fp, sizeof fp, dtype ? "'%s', '[4]', 1, 1, 4, 4" : "NULL, NULL, 1, 1, 0, 0",
           dtype);
  snprintf(sql, sizeof sql,
           "INSERT INTO operations VALUES (%d, 0, %d, '%s', 0, '%s', %s,"
           " 16, 16, %s, NULL, %s, NULL, %lld, %s, %s, %d, NULL, NULL, NULL)",
           rank, seq, name, state, fp, r, dtype ? "'SUM'" : "NULL", (long long)enq,
           start < 0 ? "NULL" : s, end < 0 ? "NULL" : e, strcmp(state, "failed") ? 0 : 4);
  exec(db, sql);
}

/* Ranks 0-2, group 0: all_reduces #1-#3, rank r starting r * 100 ns after
 * rank 0 and running 1000 + r ns; rank 0's #2 lost its first record (no
 * dtype, shape or reduce op: no desync); at #3 rank 2 passes int32 (one);
 * rank 1 fails #4 alone; rank 0 sends to rank 1 (point-to-point #1, 5 us). */
static void rank_file(int rank) {
  char path[400], sql[600];
  snprintf(path, sizeof path, "%s/rank-%d.db", job, rank);
  sqlite3 *db;
  cr_assert_eq(sqlite3_open(path, &db), SQLITE_OK);
  cr_assert_eq(tr_schema_create(db, false, NULL, 0), 0);
  snprintf(sql, sizeof sql,
           "INSERT INTO meta VALUES ('schema_version','%d'),('kind','rank'),"
           "('job_id','sumjob'),('rank','%d');"
           "INSERT INTO job VALUES ('sumjob', 3, 0, 0, NULL);"
           "INSERT INTO ranks VALUES (%d,'h',1,'cpu',NULL,0,100,0,NULL,0,'finished',0);"
           "INSERT INTO groups VALUES (0,'default',NULL,'cpu',3,'[0,1,2]',1000,0,NULL);",
           TR_SCHEMA_VERSION, rank, rank);
  exec(db, sql);
  for (int s = 1; s <= 3; s++) {
    int64_t t = s * 1000000LL + rank * 10;
    const char *dtype = s == 3 && rank == 2 ? "int32" : s == 2 && rank == 0 ? NULL : "float32";
    op(db, rank, s, "ALL_REDUCE", "completed", dtype, t,
       s * 1000000LL + 500 + rank * 100, s * 1000000LL + 500 + rank * 100 + 1000 + rank, -1);
  }
  if (rank == 1)
    op(db, 1, 4, "ALL_REDUCE", "failed", "float32", 4000000, -1, 4000100, -1);
  if (rank < 2)
    op(db, rank, 1, rank ? "RECV" : "SEND", "completed", "float32", 5000000 + rank,
       5000000 + rank * 3000, 5005000 + rank * 3000, 1 - rank);
  sqlite3_close(db);
}

static sqlite3 *merged;

static void setup(void) {
  snprintf(dir, sizeof dir, "/tmp/dist-tracesum-XXXXXX");
  cr_assert(mkdtemp(dir));
  snprintf(job, sizeof job, "%s/sumjob", dir);
  snprintf(out, sizeof out, "%s/trace.db", dir);
  cr_assert_eq(mkdir(job, 0700), 0);
  for (int r = 0; r < 3; r++)
    rank_file(r);
  dist_trace_merge_report rep;
  merged = tq_merge(dir, "sumjob", &rep);
  cr_assert(merged);
  cr_assert_eq(rep.files_skipped, 0, "%s", rep.skipped);
}

static void teardown(void) {
  sqlite3_close(merged);
  char cmd[600];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  cr_expect_eq(system(cmd), 0);
}

TestSuite(tracer_summary, .init = setup, .fini = teardown);

Test(tracer_summary, names_the_collective_whose_fingerprint_differs_only, .timeout = 30) {
  cr_assert_eq(tq_int(merged, "SELECT count(*) FROM coll_mismatch"), 1);
  cr_assert_eq(tq_int(merged, "SELECT seq FROM coll_mismatch WHERE group_id = 0"), 3);
  cr_assert_eq(tq_int(merged, "SELECT t_first_ns FROM coll_mismatch"), 3000000,
               "the earliest enqueue of #3");
}

Test(tracer_summary, latency_per_group_and_op_in_scan_order, .timeout = 30) {
  cr_assert_str_eq(tq_text(merged, "SELECT group_concat(op, ',') FROM (SELECT op FROM "
                                   "stat_latency ORDER BY ord)"),
                   "ALL_REDUCE,SEND,RECV", "collectives first, then point-to-point by rank");
  /* 9 durations of 1000..1002 ns: one bucket, whose mean is 1001 */
  cr_assert_eq(tq_int(merged, "SELECT n FROM stat_latency WHERE op = 'ALL_REDUCE'"), 9);
  cr_assert_eq(tq_int(merged, "SELECT p50_ns FROM stat_latency WHERE op = 'ALL_REDUCE'"), 1001);
  cr_assert_eq(tq_int(merged, "SELECT p99_ns FROM stat_latency WHERE op = 'ALL_REDUCE'"), 1001);
  cr_assert_eq(tq_int(merged, "SELECT max_ns FROM stat_latency WHERE op = 'ALL_REDUCE'"), 1002);
  cr_assert_eq(tq_int(merged, "SELECT max_ns FROM stat_latency WHERE op = 'RECV'"), 5000);
}

Test(tracer_summary, arrival_figures_per_rank_leave_point_to_point_out, .timeout = 30) {
  cr_assert_eq(tq_int(merged, "SELECT count(*) FROM stat_ranks"), 3);
  for (int r = 0; r < 3; r++) {
    cr_assert_eq(tq_int(merged, "SELECT collectives FROM stat_ranks WHERE rank = %d", r), 3,
                 "rank %d: #1-#3 (the failed #4 never started, the send is no collective)", r);
    cr_assert_eq(tq_int(merged, "SELECT sum_ns FROM stat_ranks WHERE rank = %d", r), 300 * r);
    cr_assert_eq(tq_int(merged, "SELECT p50_ns FROM stat_ranks WHERE rank = %d", r), 100 * r);
    cr_assert_eq(tq_int(merged, "SELECT last_arrivals FROM stat_ranks WHERE rank = %d", r),
                 r == 2 ? 3 : 0);
  }
}

Test(tracer_summary, failed_operations_have_their_index, .timeout = 30) {
  cr_assert_eq(tq_int(merged, "SELECT count(*) FROM sqlite_master WHERE type = 'index' AND "
                              "name = 'op_failed'"), 1);
  cr_assert_eq(tq_int(merged, "SELECT rank FROM operations INDEXED BY op_failed WHERE "
                              "state = 'failed' ORDER BY t_enqueued_ns LIMIT 1"), 1);
}

/* The totals the summary's pass counts are the ones SQL counts: per op,
 * rows, completed, failed, timed out, in flight and bytes in. */
Test(tracer_summary, op_totals_are_what_sql_counts, .timeout = 30) {
  const char *cols = "op || ':' || n || ':' || completed || ':' || failed || ':' || "
                     "timed_out || ':' || in_flight || ':' || bytes_in";
  char stored[512];
  snprintf(stored, sizeof stored, "%s",
           tq_text(merged, "SELECT group_concat(x, ';') FROM (SELECT %s AS x FROM op_totals "
                           "ORDER BY op)", cols));
  cr_assert_str_eq(stored, "ALL_REDUCE:10:9:1:0:0:160;RECV:1:1:0:0:0:16;SEND:1:1:0:0:0:16");
  cr_assert_str_eq(tq_text(merged, "SELECT group_concat(x, ';') FROM (SELECT %s AS x FROM "
                                   "(SELECT op, count(*) AS n, sum(state = 'completed') AS "
                                   "completed, sum(state = 'failed') AS failed, "
                                   "sum(state = 'timed_out') AS timed_out, sum(state IN "
                                   "('enqueued', 'started')) AS in_flight, sum(bytes_in) AS "
                                   "bytes_in FROM operations GROUP BY op) ORDER BY op)", cols),
                   stored);
}

Test(tracer_summary, writing_them_again_gives_the_same_rows, .timeout = 30) {
  const char *q = "SELECT group_concat(x, ';') FROM (SELECT rank || ':' || collectives || ':' || "
                  "sum_ns || ':' || p50_ns || ':' || p90_ns || ':' || p99_ns || ':' || max_ns "
                  "|| ':' || last_arrivals AS x FROM stat_ranks ORDER BY rank)";
  char before[512];
  snprintf(before, sizeof before, "%s", tq_text(merged, "%s", q));
  sqlite3_close(merged);
  char err[256] = "";
  cr_assert_eq(dist_trace_summarise(out, err, sizeof err), DIST_OK, "%s", err);
  cr_assert_eq(sqlite3_open(out, &merged), SQLITE_OK);
  cr_assert_str_eq(tq_text(merged, "%s", q), before);
  cr_assert_eq(tq_int(merged, "SELECT count(*) FROM coll_mismatch"), 1);
}

static dist_proc P;

/* distview's stdout and exit status for args on path. */
static void run(const char *cmd, const char *json, const char *path, char *buf, size_t len,
                int *status) {
  if (json)
    dist_proc_runl(&P, NULL, 30000, dist_test_bin("distview"), cmd, json, path, NULL);
  else
    dist_proc_runl(&P, NULL, 30000, dist_test_bin("distview"), cmd, path, NULL);
  snprintf(buf, len, "%s", P.buf[0]);
  *status = P.status;
}

Test(tracer_summary, distview_answers_the_same_without_them, .timeout = 60) {
  char slow[400], cmd[1000];
  snprintf(slow, sizeof slow, "%s/slow.db", dir);
  snprintf(cmd, sizeof cmd, "cp '%s' '%s'", out, slow);
  cr_assert_eq(system(cmd), 0, "%s", cmd);
  sqlite3 *db;
  cr_assert_eq(sqlite3_open(slow, &db), SQLITE_OK);
  exec(db, "DROP TABLE coll_mismatch; DROP TABLE stat_latency; DROP TABLE stat_ranks;"
           "DROP INDEX op_failed");
  sqlite3_close(db);
  static const char *const cmds[][2] = {{"diagnose", NULL}, {"diagnose", "--json"},
                                         {"stats", NULL}, {"stats", "--json"}};
  static char a[DIST_PROC_CAP], b[DIST_PROC_CAP];
  for (size_t i = 0; i < sizeof cmds / sizeof *cmds; i++) {
    int sa, sb;
    run(cmds[i][0], cmds[i][1], out, a, sizeof a, &sa);
    run(cmds[i][0], cmds[i][1], slow, b, sizeof b, &sb);
    cr_assert_eq(sa, sb, "%s %s: exit %d with the summaries, %d without", cmds[i][0],
                 cmds[i][1] ? cmds[i][1] : "", sa, sb);
    cr_assert_str_eq(a, b, "%s %s", cmds[i][0], cmds[i][1] ? cmds[i][1] : "");
  }
  run("diagnose", "--json", out, a, sizeof a, &(int){0});
  cr_assert(strstr(a, "\"kind\":\"desync\",\"exit_code\":10,\"group\":0,\"seq\":3"), "%s", a);
  run("stats", "--json", out, a, sizeof a, &(int){0});
  cr_assert(strstr(a, "{\"rank\":2,\"collectives\":3,\"mean_ns\":200,\"p50_ns\":200,"
                      "\"p99_ns\":200,\"max_ns\":200,\"last_arrivals\":3}"), "%s", a);
}
