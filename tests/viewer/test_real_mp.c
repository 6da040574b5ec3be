/* ctest: labels=multiproc timeout=180 */
/* test_real_mp.c - the viewer on a trace the real tracer wrote: four ranks
 * of prog_viewer under distrun, rank 1 stopping before ALL_REDUCE #6 (the
 * others time out in it); distrun merges the rank files into trace.db, and
 * `distview diagnose --json` must name rank 1, ALL_REDUCE #6 and its last
 * completed #5, as the live timeout message did; `distview render` marks
 * rank 1 in the matrix; the job directory opens directly too. This checks
 * the viewer against the writer's rows, not only against SQL fixtures. */
#include <criterion/criterion.h>

#include <sys/wait.h>

#include "proc.h"
#include "vw_test.h"

static dist_proc P; /* the last command run: its output */
static const char *const out = P.buf[0], *const err = P.buf[1];

/* Runs the command (argv as a NULL-terminated list) with env_add set in it. */
#define run(env_add, ...) \
  dist_proc_runl(&P, (const char *const *)(env_add), 150000, __VA_ARGS__)

Test(viewer_real, diagnose_on_the_tracers_trace_names_the_lagging_rank, .timeout = 180) {
  char trace_env[300], db[300];
  const char *dir = vwt_path("dist-trace");
  snprintf(trace_env, sizeof trace_env, "DIST_TRACE=%s", dir);
  snprintf(db, sizeof db, "%s", vwt_path("trace.db"));
  char *env[] = {trace_env, "DIST_TIMEOUT=3", "DIST_DEBUG=OFF", NULL};
  int rc = run(env, dist_test_bin("distrun"), "-n", "4", "--trace-out", db,
               dist_test_bin("viewer_prog"), "hang", NULL);
  cr_assert_neq(rc, 0, "the job fails (a timeout): %d", rc);
  cr_assert(strstr(err, "rank 1") && strstr(err, "ALL_REDUCE #6"),
            "the live message names rank 1 and ALL_REDUCE #6:\n%s", err);
  cr_assert(access(db, R_OK) == 0, "distrun merged %s\n%s", db, err);

  rc = run(NULL, dist_test_bin("distview"), "diagnose", "--json", db, NULL);
  cr_assert_eq(rc, 11, "a hang: %d\n%s%s", rc, out, err);
  cr_assert(strstr(out, "\"kind\":\"hang\",\"exit_code\":11,\"group\":0,\"seq\":6,"
                        "\"op\":\"ALL_REDUCE\",\"rank\":1,\"culprits\":[1]"), "%s", out);
  cr_assert(strstr(out, "\"blocked\":[0,2,3],\"last_completed\":{\"seq\":5,"
                        "\"op\":\"ALL_REDUCE\"}"), "%s", out);

  rc = run(NULL, dist_test_bin("distview"), "render", "--size", "100x30", db, NULL);
  cr_assert_eq(rc, 0, "render: %s", err);
  cr_assert(strstr(out, " distview  HANG (exit 11)"), "%s", out);
  cr_assert(strstr(out, ">        1 LAG   #####?"), "rank 1 marked at #6:\n%s", out);

  rc = run(NULL, dist_test_bin("distview"), "summary", "--json", db, NULL);
  cr_assert_eq(rc, 0, "summary: %s", err);
  cr_assert(strstr(out, "\"world_size\":4"), "%s", out);

  /* the job directory itself, merged on the fly by the reader library */
  char job[400] = "";
  rc = run(NULL, "/bin/sh", "-c", "ls -d \"$0\"/*/ | head -1", dir, NULL);
  snprintf(job, sizeof job, "%.*s", (int)strcspn(out, "\n"), out);
  cr_assert(job[0], "a job directory under %s", dir);
  rc = run(NULL, dist_test_bin("distview"), "diagnose", job, NULL);
  cr_assert_eq(rc, 11, "diagnose on the directory: %d\n%s%s", rc, out, err);
  cr_assert(strstr(out, "rank 1 is behind (last completed ALL_REDUCE #5)"), "%s", out);
}

/* One integer from the trace (the test's own read-only connection). */
static int64_t db_int(sqlite3 *db, const char *sql) {
  sqlite3_stmt *st;
  cr_assert_eq(sqlite3_prepare_v2(db, sql, -1, &st, NULL), SQLITE_OK, "%s: %s", sql,
               sqlite3_errmsg(db));
  cr_assert_eq(sqlite3_step(st), SQLITE_ROW, "%s", sql);
  int64_t v = sqlite3_column_int64(st, 0);
  sqlite3_finalize(st);
  return v;
}

static const char *db_text(sqlite3 *db, const char *sql, char *buf, size_t len) {
  sqlite3_stmt *st;
  cr_assert_eq(sqlite3_prepare_v2(db, sql, -1, &st, NULL), SQLITE_OK, "%s: %s", sql,
               sqlite3_errmsg(db));
  cr_assert_eq(sqlite3_step(st), SQLITE_ROW, "%s", sql);
  snprintf(buf, len, "%s", (const char *)sqlite3_column_text(st, 0));
  sqlite3_finalize(st);
  return buf;
}

/* A pipeline (ranks make 1 or 2 point-to-point calls a step) with world
 * collectives between: collectives and point-to-point operations are
 * numbered apart, so a collective has one seq on every rank, each send
 * pairs with the receive of the same pair number, and every column of
 * distview's matrix holds one operation on every rank. */
Test(viewer_real, a_collective_has_one_seq_on_every_rank_of_a_pipeline, .timeout = 180) {
  char trace_env[300], db_path[300];
  snprintf(trace_env, sizeof trace_env, "DIST_TRACE=%s", vwt_path("dist-trace"));
  snprintf(db_path, sizeof db_path, "%s", vwt_path("trace.db"));
  char *env[] = {trace_env, "DIST_TIMEOUT=20", "DIST_DEBUG=DETAIL", NULL};
  int rc = run(env, dist_test_bin("distrun"), "-n", "4", "--trace-out", db_path,
               dist_test_bin("viewer_prog"), "pipeline", NULL);
  cr_assert_eq(rc, 0, "the pipeline runs clean at DETAIL: %d\n%s", rc, err);
  sqlite3 *db;
  cr_assert_eq(sqlite3_open_v2(db_path, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
  char b[256];
  /* each collective (group, seq) is one op on every member */
  cr_assert_eq(db_int(db, "SELECT count(*) FROM (SELECT 1 FROM operations o WHERE NOT p2p"
                          " GROUP BY group_id, seq HAVING count(DISTINCT op) != 1 OR count(*) !="
                          " (SELECT size FROM groups g WHERE g.group_id = o.group_id))"), 0);
  /* the world broadcasts are #1, #3, ... #9 on every rank, although rank 0
   * made 5 point-to-point calls before the last and ranks 1-2 made 10 */
  for (int r = 0; r < 4; r++) {
    char q[256];
    snprintf(q, sizeof q, "SELECT group_concat(seq, ',') FROM (SELECT seq FROM operations"
                          " WHERE rank = %d AND group_id = 0 AND op = 'BROADCAST' ORDER BY seq)", r);
    cr_assert_str_eq(db_text(db, q, b, sizeof b), "1,3,5,7,9", "rank %d", r);
  }
  cr_assert_eq(db_int(db, "SELECT count(DISTINCT rank || '/' || seq) FROM operations WHERE"
                          " group_id = 0 AND p2p AND rank IN (1, 2)"), 20);
  cr_assert_eq(db_int(db, "SELECT max(seq) FROM operations WHERE group_id = 0 AND p2p AND"
                          " rank = 0"), 5);
  /* the n-th send from A to B is the n-th receive at B from A */
  cr_assert_eq(db_int(db, "SELECT count(*) FROM operations WHERE op = 'SEND'"), 15);
  cr_assert_eq(db_int(db, "SELECT count(*) FROM operations s JOIN operations r ON"
                          " s.op = 'SEND' AND r.op = 'RECV' AND r.group_id = s.group_id AND"
                          " r.root = s.rank AND s.root = r.rank AND r.tag = s.tag AND"
                          " r.pair_seq = s.pair_seq"), 15);
  cr_assert_str_eq(db_text(db, "SELECT group_concat(pair_seq, ',') FROM (SELECT pair_seq FROM"
                               " operations WHERE rank = 1 AND op = 'RECV' ORDER BY seq)",
                           b, sizeof b), "1,2,3,4,5");
  sqlite3_close(db);

  /* distview's matrix, through the model the TUI draws from */
  vw_model *m = NULL;
  char e[512] = "";
  cr_assert_eq(vw_model_open(db_path, &m, e, sizeof e), 0, "%s", e);
  const vw_group *g0 = vw_model_group(m, 0);
  cr_assert_not_null(g0);
  cr_assert_eq(g0->max_seq, 10, "10 collectives on the default group, %lld",
               (long long)g0->max_seq);
  int ranks[4] = {0, 1, 2, 3};
  vw_matrix_page page;
  cr_assert_eq(vw_model_matrix(m, 0, ranks, 4, 1, 10, NULL, &page), 0);
  for (int r = 0; r < 4; r++)
    for (int c = 0; c < 10; c++)
      cr_assert_eq(page.cells[r * 10 + c], VW_ST_DONE, "rank %d #%d", r, c + 1);
  vw_matrix_page_free(&page);
  for (int64_t s = 1; s <= 10; s++) {
    vw_op ops[8];
    int n = 0;
    cr_assert_eq(vw_model_collective(m, 0, s, ops, 8, &n), 0);
    cr_assert_eq(n, 4, "column #%lld holds every rank: %d", (long long)s, n);
    for (int i = 1; i < n; i++)
      cr_assert_str_eq(ops[i].op, ops[0].op, "column #%lld: rank %d", (long long)s, ops[i].rank);
    cr_assert_str_eq(ops[0].op, s % 2 ? "BROADCAST" : "ALL_REDUCE", "#%lld", (long long)s);
  }
  /* a point-to-point operation opens with the other half of its pair:
   * rank 2's #3 is the RECV of step 2 (its p2p are RECV, SEND, RECV, ...),
   * which took rank 1's second SEND, its #4 */
  vw_op ops[4];
  int n = 0;
  cr_assert_eq(vw_model_p2p_pair(m, 2, 0, 3, ops, 4, &n), 0);
  cr_assert_eq(n, 2, "the receive and its send: %d", n);
  cr_assert(ops[0].rank == 1 && !strcmp(ops[0].op, "SEND") && ops[0].seq == 4,
            "rank %d %s #%lld", ops[0].rank, ops[0].op, (long long)ops[0].seq);
  cr_assert(ops[1].rank == 2 && !strcmp(ops[1].op, "RECV") && ops[1].seq == 3,
            "rank %d %s #%lld", ops[1].rank, ops[1].op, (long long)ops[1].seq);
  vw_model_close(m);
}

/* A healthy job whose sizes differ by rank (an all_to_all_single with
 * uneven splits, an uneven all_gather) is no desync in the rows either:
 * the merge's summary holds no mismatch and distview's own analysis,
 * printed after the success, finds nothing (it named the ranks whose sizes
 * were not the majority's before). */
Test(viewer_real, uneven_sizes_by_rank_are_no_desync, .timeout = 180) {
  char trace_env[300], db_path[300];
  snprintf(trace_env, sizeof trace_env, "DIST_TRACE=%s", vwt_path("dist-trace"));
  snprintf(db_path, sizeof db_path, "%s", vwt_path("trace.db"));
  char *env[] = {trace_env, "DIST_TIMEOUT=20", "DIST_DEBUG=DETAIL", NULL};
  int rc = run(env, dist_test_bin("distrun"), "-n", "4", "--trace-out", db_path,
               dist_test_bin("viewer_prog"), "uneven", NULL);
  cr_assert_eq(rc, 0, "the uneven job runs clean at DETAIL: %d\n%s", rc, err);
  sqlite3 *db;
  cr_assert_eq(sqlite3_open_v2(db_path, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
  cr_assert_eq(db_int(db, "SELECT count(*) FROM operations WHERE op = 'ALL_TO_ALL_SINGLE'"), 12);
  cr_assert_eq(db_int(db, "SELECT count(*) FROM coll_mismatch"), 0);
  sqlite3_close(db);
  rc = run(NULL, dist_test_bin("distview"), "diagnose", "--json", db_path, NULL);
  cr_assert_eq(rc, 0, "success: %d\n%s%s", rc, out, err);
  cr_assert(strstr(out, "\"kind\":\"success\""), "%s", out);
  cr_assert(strstr(out, "\"own\":{\"kind\":\"none\""), "distview's own analysis: %s", out);
}
