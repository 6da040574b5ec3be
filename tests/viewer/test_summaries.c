/* ctest: labels=unit timeout=120 */
/* test_summaries.c - `distview diagnose` and `stats` read the merge's
 * summaries (tracer/SCHEMA.md "Summaries") when a file has them and every
 * operation when it has not (an older file, schema version 1 as the
 * fixtures are): both must give the same answers. Each fixture story is
 * copied, the copy given the summaries by the merge's own code
 * (dist_trace_summarise), and every command's output and exit status
 * compared, text and --json. */
#include <criterion/criterion.h>

#include <sqlite3.h>

#include <dist/trace_reader.h>

#include "proc.h"
#include "vw_test.h"

static dist_proc R;

/* A story with a failed operation and nothing else wrong: the deep look
 * finds it among the failed rows (op_failed). */
static void story_failed(const char *path) {
  fx_story_ok(path);
  sqlite3 *db;
  cr_assert_eq(sqlite3_open(path, &db), SQLITE_OK);
  int64_t t = fx_t(32, 2);
  char sql[512];
  snprintf(sql, sizeof sql,
           "INSERT INTO operations VALUES (2, 0, 32, 'ALL_REDUCE', 0, 'failed', 'float32',"
           " '[4,1024]', 1, 1, 4096, 4096, 16384, 16384, NULL, NULL, 'SUM', 30000, %lld, %lld,"
           " %lld, 6, 'aborted by the user', NULL)", (long long)t, (long long)t + 1000,
           (long long)t + 2000);
  cr_assert_eq(sqlite3_exec(db, sql, NULL, NULL, NULL), SQLITE_OK, "%s", sqlite3_errmsg(db));
  sqlite3_close(db);
}

/* The story `which` at plain, and a copy with the summaries at fast. */
static void stories(const char *which, const char **plain, const char **fast) {
  char name[64];
  snprintf(name, sizeof name, "%s.db", which);
  *plain = vwt_path(name);
  if (!strcmp(which, "desync"))
    fx_story_desync(*plain, true);
  else if (!strcmp(which, "hang"))
    fx_story_hang(*plain);
  else if (!strcmp(which, "deadlock"))
    fx_story_deadlock(*plain);
  else if (!strcmp(which, "gpu"))
    fx_story_gpu(*plain);
  else if (!strcmp(which, "failed"))
    story_failed(*plain);
  else
    fx_story_ok(*plain);
  snprintf(name, sizeof name, "%s-summarised.db", which);
  *fast = vwt_path(name);
  char cmd[700], err[512] = "";
  snprintf(cmd, sizeof cmd, "cp '%s' '%s'", *plain, *fast);
  cr_assert_eq(system(cmd), 0, "%s", cmd);
  cr_assert_eq(dist_trace_summarise(*fast, err, sizeof err), DIST_OK, "%s", err);
}

static int run(const char *cmd, const char *json, const char *path, char *out, size_t len) {
  const char *bin = dist_test_bin("distview");
  if (json)
    dist_proc_runl(&R, NULL, 30000, bin, cmd, json, path, NULL);
  else
    dist_proc_runl(&R, NULL, 30000, bin, cmd, path, NULL);
  cr_assert(R.len[0] > 0, "%s %s: no output; stderr: %s", cmd, json ? json : "", R.buf[1]);
  snprintf(out, len, "%s", R.buf[0]);
  return R.status;
}

static void same_answers(const char *which) {
  const char *plain, *fast;
  stories(which, &plain, &fast);
  static const char *const cmds[][2] = {{"diagnose", NULL}, {"diagnose", "--json"},
                                         {"stats", NULL}, {"stats", "--json"}};
  static char a[DIST_PROC_CAP], b[DIST_PROC_CAP];
  for (size_t i = 0; i < sizeof cmds / sizeof *cmds; i++) {
    const char *j = cmds[i][1] ? cmds[i][1] : "";
    int sa = run(cmds[i][0], cmds[i][1], plain, a, sizeof a);
    int sb = run(cmds[i][0], cmds[i][1], fast, b, sizeof b);
    cr_assert_eq(sa, sb, "%s: %s %s exits %d from the rows, %d from the summaries", which,
                 cmds[i][0], j, sa, sb);
    cr_assert_str_eq(a, b, "%s: %s %s", which, cmds[i][0], j);
  }
}

Test(viewer_summaries, a_desync_reads_the_same_from_the_summaries, .timeout = 60) {
  same_answers("desync");
  static char out[DIST_PROC_CAP];
  const char *fast = vwt_path("desync-summarised.db");
  cr_assert_eq(run("diagnose", "--json", fast, out, sizeof out), 10);
  cr_assert(strstr(out, "\"kind\":\"desync\",\"exit_code\":10,\"group\":0,\"seq\":13,"),
            "%s", out);
}

Test(viewer_summaries, a_hang_reads_the_same_from_the_summaries, .timeout = 60) {
  same_answers("hang");
}

Test(viewer_summaries, a_deadlock_reads_the_same_from_the_summaries, .timeout = 60) {
  same_answers("deadlock");
}

Test(viewer_summaries, a_healthy_job_reads_the_same_from_the_summaries, .timeout = 60) {
  same_answers("ok");
  static char out[DIST_PROC_CAP];
  cr_assert_eq(run("stats", "--json", vwt_path("ok-summarised.db"), out, sizeof out), 0);
  /* 31 collectives of 4 ranks: rank r enqueues r * 10 us after rank 0 */
  cr_assert(strstr(out, "{\"rank\":3,\"collectives\":31,\"mean_ns\":30000,\"p50_ns\":30000,"),
            "%s", out);
}

Test(viewer_summaries, a_failed_operation_reads_the_same_from_the_summaries, .timeout = 60) {
  same_answers("failed");
  static char out[DIST_PROC_CAP];
  cr_assert_eq(run("diagnose", NULL, vwt_path("failed-summarised.db"), out, sizeof out), 12);
  cr_assert(strstr(out, "rank 2: ALL_REDUCE #32 in group 0 (default) failed (status 6)"),
            "%s", out);
}

Test(viewer_summaries, a_gpu_job_reads_the_same_from_the_summaries, .timeout = 60) {
  same_answers("gpu");
}
