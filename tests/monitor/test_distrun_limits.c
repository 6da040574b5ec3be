/* ctest: labels=multiproc timeout=120 */
/* distrun -n beyond what this node can hold (issue 26, defect 3): refused
 * before any rank starts, with one sentence naming the limit (processes,
 * memory, descriptors), exit status 13; no fork storm, no "Broken pipe".
 * The limits are set in the child that runs distrun (the shell's ulimit is
 * setrlimit), as a user would meet them. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "proc.h"
#include "tmpdir.h"

static char dir[64];
static char marker[128];

static void setup(void) {
  dist_test_clean_launch_env();
  snprintf(dir, sizeof dir, "/tmp/dist-limits-XXXXXX");
  cr_assert_not_null(dist_test_mkdtemp(dir));
  chmod(dir, 0777); /* the unprivileged case writes its marker here too */
  snprintf(marker, sizeof marker, "%s/started", dir);
}

static void teardown(void) {
  unlink(marker);
  rmdir(dir);
}

/* Runs `sh -c script` with distrun's path in $DISTRUN and the marker's in
 * $MARK; the rank program would create the marker. */
static int run(dist_proc *p, const char *script, int timeout_ms) {
  const char *env[] = {NULL, NULL, "DIST_TRACE=0", NULL};
  char d[1200], m[200];
  snprintf(d, sizeof d, "DISTRUN=%s", dist_test_bin("distrun"));
  snprintf(m, sizeof m, "MARK=%s", marker);
  env[0] = d;
  env[1] = m;
  return dist_proc_runl(p, env, timeout_ms, "/bin/bash", "-c", script, NULL);
}

static void refused(dist_proc *p, int st, int n, const char *limit) {
  char head[64];
  snprintf(head, sizeof head, "cannot start %d ranks: ", n);
  cr_assert_eq(st, 13, "exit %d, stderr:\n%s", st, DIST_PROC_ERR(p));
  cr_assert(strstr(DIST_PROC_ERR(p), head), "%s", DIST_PROC_ERR(p));
  cr_assert(strstr(DIST_PROC_ERR(p), limit), "names '%s':\n%s", limit, DIST_PROC_ERR(p));
  cr_assert(strstr(DIST_PROC_ERR(p), "ask for fewer with -n or raise the limit"), "%s",
            DIST_PROC_ERR(p));
  cr_assert_eq(dist_test_count(DIST_PROC_ERR(p), "Broken pipe"), 0, "%s", DIST_PROC_ERR(p));
  cr_assert_neq(access(marker, F_OK), 0, "no rank was started");
}

TestSuite(monitor_distrun_limits, .init = setup, .fini = teardown);

/* The report's reproduction: a fork storm before, a refusal now. 100,000
 * ranks are more than the pid space of a default kernel (pid_max 32768 or
 * 4 million with 4 tasks per rank) or than its memory at 4 MiB each. */
Test(monitor_distrun_limits, a_hundred_thousand_ranks_are_refused_naming_the_limit,
     .timeout = 60) {
  static dist_proc p;
  int64_t t0 = dist_test_now_ms();
  int st = run(&p, "exec \"$DISTRUN\" -n 100000 /usr/bin/touch \"$MARK\"", 50000);
  const char *e = DIST_PROC_ERR(&p);
  cr_assert(strstr(e, "processes: ") || strstr(e, "memory: "), "%s", e);
  refused(&p, st, 100000, "");
  cr_assert_lt(dist_test_now_ms() - t0, 30000, "refused at once");
}

Test(monitor_distrun_limits, descriptors_under_ulimit_n_are_named, .timeout = 60) {
  static dist_proc p;
  int st = run(&p, "ulimit -n 64 && exec \"$DISTRUN\" -n 40 /usr/bin/touch \"$MARK\"", 50000);
  refused(&p, st, 40, "descriptors: RLIMIT_NOFILE (ulimit -n) is 64 (hard 64)");
  /* A count that fits under the same limit runs. */
  static dist_proc q;
  st = run(&q, "ulimit -n 64 && exec \"$DISTRUN\" -n 2 /usr/bin/touch \"$MARK\"", 50000);
  cr_assert_eq(st, 0, "exit %d:\n%s", st, DIST_PROC_ERR(&q));
  cr_assert_eq(access(marker, F_OK), 0, "the ranks ran");
}

/* A soft limit below what the ranks need is raised to the hard one. */
Test(monitor_distrun_limits, a_low_soft_descriptor_limit_is_raised_to_the_hard_one,
     .timeout = 60) {
  static dist_proc p;
  int st = run(&p, "ulimit -Sn 64 && ulimit -Hn 4096 && exec \"$DISTRUN\" -n 40 "
               "/usr/bin/touch \"$MARK\"", 50000);
  cr_assert_eq(st, 0, "exit %d:\n%s", st, DIST_PROC_ERR(&p));
}

/* RLIMIT_NPROC binds only unprivileged users (the kernel exempts root), so
 * distrun runs as nobody here when the test runs as root. */
Test(monitor_distrun_limits, processes_under_ulimit_u_are_named, .timeout = 60) {
  if (geteuid() != 0)
    cr_skip_test("needs root to run distrun as another user with a fresh task count");
  static dist_proc p;
  int st = run(&p, "exec /usr/bin/setpriv --reuid=65534 --regid=65534 --clear-groups "
               "/bin/bash -c 'ulimit -u 24 && exec \"$DISTRUN\" -n 50 /usr/bin/touch \"$MARK\"'",
               50000);
  refused(&p, st, 50, "processes: RLIMIT_NPROC (ulimit -u) is 24 tasks for this user");
}
