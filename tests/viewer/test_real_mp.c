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
  cr_assert(strstr(out, ">    1 LAG  #####?"), "rank 1 marked at #6:\n%s", out);

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
