/* ctest: labels=multiproc timeout=180 */
/* test_monitor_threads_mp.c - the early verdict and programs whose threads
 * each drive their own group (prog_threads.c). A thread blocked in a
 * synchronous call proves nothing while another thread of its process is
 * computing, or asleep (usleep) once it called the library before: that
 * thread may yet call what the peers wait for (mon_threads.c), so a
 * healthy program ends 0 where the two ranks' records alone show a
 * wait-for cycle. A process whose other thread idles (blocked, not
 * running) is still proven deadlocked well before its timeout, and so is
 * one whose only sleeper is a thread that never called the library (a
 * sanitizer's background thread). */
#include <criterion/criterion.h>

#include <stdio.h>
#include <string.h>
#include <time.h>

#include "proc.h"

static double seconds(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* distrun -n 2 prog_threads mode at DETAIL with a timeout of timeout_s;
 * its exit status, its stderr into *err and its duration into *took. */
static int run_threads(const char *mode, const char *timeout_s, char **err, double *took) {
  static dist_proc p;
  dist_test_clean_launch_env();
  char to[32];
  snprintf(to, sizeof to, "DIST_TIMEOUT=%s", timeout_s);
  const char *env[] = {"DIST_DEBUG=DETAIL", "DIST_TRACE=0", to, NULL};
  const char *argv[] = {dist_test_bin("distrun"), "-n", "2", dist_test_bin("monitor_threadsprog"),
                        mode, NULL};
  double t0 = seconds();
  int st = dist_proc_run(&p, argv, env, 150000);
  *took = seconds() - t0;
  *err = DIST_PROC_ERR(&p);
  return st;
}

Test(monitor_threads, a_thread_computing_beside_a_blocked_one_is_no_deadlock, .timeout = 90) {
  char *err;
  double took;
  int st = run_threads("crossed", "30", &err, &took);
  cr_expect_eq(st, 0, "exit %d after %.1f s:\n%s", st, took, err);
  cr_expect(!strstr(err, "deadlock"), "%s", err);
}

Test(monitor_threads, a_thread_asleep_beside_a_blocked_one_is_no_deadlock, .timeout = 90) {
  char *err;
  double took;
  int st = run_threads("asleep", "30", &err, &took);
  cr_expect_eq(st, 0, "exit %d after %.1f s:\n%s", st, took, err);
  cr_expect(!strstr(err, "deadlock"), "%s", err);
}

Test(monitor_threads, an_idle_second_thread_does_not_keep_a_deadlock_from_its_proof, .timeout = 150) {
  char *err;
  double took;
  int st = run_threads("stuck", "120", &err, &took);
  cr_expect_eq(st, 11, "exit %d after %.1f s:\n%s", st, took, err);
  cr_expect(strstr(err, "deadlock"), "%s", err);
  cr_expect_lt(took, 60.0, "the verdict took %.1f s of a 120 s timeout:\n%s", took, err);
}
