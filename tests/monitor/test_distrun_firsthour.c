/* ctest: labels=multiproc timeout=200 */
/* distrun as a newcomer meets it (issue #9, defect 9):
 *  - a rank that returns 0 while the others still need it is named as the
 *    one that ended first (exit 12), not the survivor it took down;
 *  - --tee without --log-dir is refused as a usage error (exit 2);
 *  - the summary of a failed job points at the --log-dir files.
 * The ranks are distrun_testprog (prog_distrun.c). */
#include <criterion/criterion.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tmpdir.h"

static const char *bin(const char *name) {
  static char paths[4][1024];
  static int next;
  const char *dir = getenv("DIST_TEST_BIN");
  char *p = paths[next++ % 4];
  snprintf(p, 1024, "%s/%s", dir ? dir : "build/bin", name);
  return p;
}

/* Runs a shell command line with distrun's variables cleared; returns its
 * exit status, its stdout and stderr merged in out. */
static int run(char *out, size_t cap, const char *fmt, ...) {
  char cmd[2048], full[2300];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(cmd, sizeof cmd, fmt, ap);
  va_end(ap);
  snprintf(full, sizeof full, "env -u RANK -u WORLD_SIZE -u MASTER_ADDR -u MASTER_PORT "
           "-u DIST_TOKEN -u DIST_JOB_ID -u SLURM_JOB_ID %s 2>&1", cmd);
  FILE *p = popen(full, "r");
  cr_assert(p);
  size_t n = fread(out, 1, cap - 1, p);
  out[n] = '\0';
  int st = pclose(p);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

Test(monitor_distrun_firsthour, a_rank_that_ends_early_is_named_not_the_survivor, .timeout = 90) {
  static char out[1 << 16];
  int st = run(out, sizeof out, "'%s' -n 2 --grace-period 5 '%s' leave 1", bin("distrun"),
               bin("distrun_testprog"));
  cr_expect_eq(st, 12, "exit %d:\n%s", st, out);
  cr_expect(strstr(out, "rank 1 (pid ") &&
                strstr(out, "ended first, with exit code 0, while other ranks still needed it; "
                            "then rank 0 (pid "),
            "the summary does not name rank 1 as the one that left:\n%s", out);
  cr_expect(!strstr(out, "rank 0 (pid") || !strstr(out, "failed first"),
            "the survivor is blamed:\n%s", out);
  /* What the survivor saw names the rank that left. */
  cr_expect(strstr(out, "peer lost in group 0 (default, 2 ranks) at ALL_REDUCE #"), "%s", out);
}

/* The same, when the leaver's exit is reported long after the survivor's
 * (its teardown lingers after its connections closed): distrun waits for
 * the rank that called exit() first, whatever order the exits come in.
 * The leaver closes every descriptor at exit to close its connections, so
 * they must exist by then: the whole mesh at creation (DIST_TCP_LAZY=0;
 * made when first needed, the survivor would connect while the leaver's
 * answering thread still runs on the descriptors being closed). */
static void leaver_reported_late(int code, const char *how) {
  static char out[1 << 16];
  int st = run(out, sizeof out, "DIST_TRANSPORT=tcp DIST_TCP_LAZY=0 '%s' -n 2 --grace-period 5 "
               "'%s' leave-linger 1 %d", bin("distrun"), bin("distrun_testprog"), code);
  cr_expect_eq(st, 12, "exit %d:\n%s", st, out);
  char want[160];
  snprintf(want, sizeof want, "ended first, %s, while other ranks still needed it; then rank 0 "
           "(pid ", how);
  cr_expect(strstr(out, "rank 1 (pid ") && strstr(out, want), "rank 1 is not named first:\n%s",
            out);
  cr_expect(!strstr(out, "rank 0 (pid") || !strstr(out, "failed first"),
            "the survivor is blamed:\n%s", out);
}

Test(monitor_distrun_firsthour, a_leaver_whose_exit_is_reported_late_is_still_named_first,
     .timeout = 90) {
  leaver_reported_late(0, "with exit code 0");
}

Test(monitor_distrun_firsthour, a_leaver_with_an_error_reported_late_fails_first, .timeout = 90) {
  static char out[1 << 16];
  int st = run(out, sizeof out, "DIST_TRANSPORT=tcp DIST_TCP_LAZY=0 '%s' -n 2 --grace-period 5 "
               "'%s' leave-linger 1 3", bin("distrun"), bin("distrun_testprog"));
  cr_expect_eq(st, 12, "exit %d:\n%s", st, out);
  cr_expect(strstr(out, "exit status 12 (a rank died): rank 1 (pid ") &&
                strstr(out, "failed first: exited with code 3"),
            "rank 1 is not named first:\n%s", out);
}

Test(monitor_distrun_firsthour, tee_without_log_dir_is_a_usage_error, .timeout = 30) {
  char out[4096];
  int st = run(out, sizeof out, "'%s' -n 1 --tee '%s' lines", bin("distrun"),
               bin("distrun_testprog"));
  cr_expect_eq(st, 2, "exit %d:\n%s", st, out);
  cr_expect(strstr(out, "--tee") && strstr(out, "--log-dir"), "%s", out);
  cr_expect(!strstr(out, "out line"), "the program ran anyway:\n%s", out);
}

Test(monitor_distrun_firsthour, a_failed_jobs_summary_points_at_the_log_files, .timeout = 60) {
  char dir[] = "/tmp/distrun-fh-XXXXXX";
  cr_assert(dist_test_mkdtemp(dir));
  static char out[1 << 16];
  int st = run(out, sizeof out, "'%s' -n 2 --grace-period 2 --log-dir '%s/logs' '%s' exit 1 3",
               bin("distrun"), dir, bin("distrun_testprog"));
  cr_expect_eq(st, 12, "exit %d:\n%s", st, out);
  char want[256];
  snprintf(want, sizeof want, "(each rank's output: %s/logs/rank-<R>.out and .err)", dir);
  cr_expect(strstr(out, want), "the summary lacks '%s':\n%s", want, out);
  char rm[300];
  snprintf(rm, sizeof rm, "rm -rf '%s'", dir);
  cr_expect_eq(system(rm), 0);
}
