/* ctest: labels=multiproc timeout=300 */
/* example_bugs' monitor bugs as a user runs them under distrun: hang (exit
 * 11, the stall report and the diagnosis name the culprit), kill (exit 12,
 * the survivors say it died), deadlock (exit 11, the cycle edge by edge),
 * straggler (exit 0, the DETAIL statistics name it). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

typedef struct run {
  int status;
  char out[1 << 17]; /* stdout and stderr */
} run;

/* distrun -n 3 example_bugs --bug NAME --timeout 4, with env before it. */
static void run_bug(const char *env, const char *name, run *r) {
  const char *bin = getenv("DIST_TEST_BIN");
  cr_assert(bin, "DIST_TEST_BIN is not set (run through ctest)");
  char cmd[2048];
  snprintf(cmd, sizeof cmd,
           "env -u DIST_DEBUG -u TORCH_DISTRIBUTED_DEBUG DIST_TRACE=0 %s timeout 120 "
           "%s/distrun -n 3 --grace-period 1 %s/example_bugs --bug %s --timeout 4 2>&1",
           env, bin, bin, name);
  FILE *f = popen(cmd, "r");
  cr_assert(f, "cannot run %s", cmd);
  size_t len = fread(r->out, 1, sizeof r->out - 1, f);
  r->out[len] = '\0';
  int st = pclose(f);
  r->status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  cr_log_info("%s\n%s", cmd, r->out);
}

Test(examples_bugs_monitor, hang_exits_11_naming_the_sleeping_rank, .timeout = 120) {
  static run r;
  run_bug("", "hang", &r);
  cr_assert_eq(r.status, 11, "%s", r.out);
  const char *stall = strstr(r.out, "MON WARN stall in group 0 (default) at ALL_REDUCE #4");
  cr_assert(stall && strstr(stall, "rank 2 (host "), "%s", r.out);
  const char *last = strstr(r.out, "distrun: exit status 11 (hang)");
  cr_assert(last && strstr(last, "\nhang in group 0 (default) at ALL_REDUCE #4"), "%s", r.out);
  cr_assert(strstr(last, "rank 2 (host ") &&
            strstr(last, "has not entered ALL_REDUCE #4: last completed ALL_REDUCE #3"), "%s", last);
}

Test(examples_bugs_monitor, kill_exits_12_and_the_survivors_say_it_died, .timeout = 120) {
  static run r;
  run_bug("", "kill", &r);
  cr_assert_eq(r.status, 12, "%s", r.out);
  cr_assert(strstr(r.out, "rank 2 (pid ") && strstr(r.out, "killed by signal 9 (SIGKILL)"), "%s",
            r.out);
  cr_assert(strstr(r.out, "lost peer in group 0 (default) at ALL_REDUCE #4"), "%s", r.out);
}

Test(examples_bugs_monitor, deadlock_exits_11_with_the_cycle, .timeout = 120) {
  static run r;
  run_bug("", "deadlock", &r);
  cr_assert_eq(r.status, 11, "%s", r.out);
  const char *last = strstr(r.out, "distrun: exit status 11 (hang)");
  cr_assert(last, "%s", r.out);
  const char *cyc = strstr(last, "deadlock: a wait-for cycle of 2 ranks across groups:");
  cr_assert(cyc && strstr(cyc, "waits in group 2 (second) ALL_REDUCE #1") &&
            strstr(cyc, "waits in group 1 (first) ALL_REDUCE #1"), "%s", last);
}

Test(examples_bugs_monitor, straggler_is_named_and_the_job_succeeds, .timeout = 120) {
  static run r;
  run_bug("", "straggler", &r);
  cr_assert_eq(r.status, 0, "%s", r.out);
  cr_assert(strstr(r.out, "MON WARN straggler in group 0 (default, 3 ranks): rank 2 arrived "
                         "last in "), "%s", r.out);
  cr_assert(!strstr(r.out, "straggler in group 0 (default, 3 ranks): rank 0") &&
            !strstr(r.out, "straggler in group 0 (default, 3 ranks): rank 1"), "%s", r.out);
}
