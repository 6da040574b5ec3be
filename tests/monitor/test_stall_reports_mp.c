/* ctest: labels=multiproc timeout=120 */
/* test_stall_reports_mp.c - the monitor's live stall reports on legal
 * waits (monitor_testprog under distrun): they are measured against the
 * operation's own timeout, and a collective every member has entered is
 * not said to have stopped while its data may still be moving. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proc.h"

static int run_prog(dist_proc *p, const char *n, const char *const *args, const char *const *env) {
  const char *argv[16] = {dist_test_bin("distrun"), "-n", n, "--grace-period", "1",
                          dist_test_bin("monitor_testprog")};
  int k = 6;
  for (int i = 0; args[i] && k < 15; i++)
    argv[k++] = args[i];
  dist_proc_start(p, argv, env);
  dist_proc_finish_all(p, 1, 0, 90000);
  return p->status;
}

/* The group's timeout is 4 s (a stall report from 1 s on); the monitored
 * barrier's own is 12 s, and rank 1 comes 5 s late: a legal wait, reported
 * from 3 s on against 12 s, never as 4.x s "of its 4.0 s timeout". */
Test(stall_reports, a_monitored_barrier_is_measured_against_its_own_timeout, .timeout = 100) {
  dist_test_clean_launch_env();
  static dist_proc p;
  const char *env[] = {"DIST_TIMEOUT=4", "DIST_TRACE=0", NULL};
  int st = run_prog(&p, "3", (const char *[]){"mbarrier", "1", "5000", "12000", NULL}, env);
  const char *e = DIST_PROC_ERR(&p);
  cr_assert_eq(st, 0, "%s\n%s", DIST_PROC_OUT(&p), e);
  const char *w = strstr(e, "MON WARN stall in group 0 (default) at MONITORED_BARRIER #1: waited ");
  cr_assert(w, "the wait is reported:\n%s", e);
  double waited = 0;
  cr_assert_eq(sscanf(strstr(w, "waited ") + 7, "%lf s of its 12.0 s timeout", &waited), 1,
               "%s", w);
  cr_assert(strstr(w, " s of its 12.0 s timeout"), "%s", w);
  cr_assert(waited >= 2.9, "not before a quarter of the call's timeout: %s", w);
  cr_assert(!strstr(e, "of its 4.0 s timeout"), "the group's timeout is not the call's:\n%s", e);
}

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define BIG_MIB "32"
#else
#define BIG_MIB "128"
#endif

/* All_reduces of 128 MiB per rank over TCP, 4 ranks (a few tenths of a
 * second each here), with the stall threshold at 20 ms, until a rank's
 * monitor reports one: every member has entered it and the data is
 * moving, which the report cannot tell from a stop, so it claims none. */
Test(stall_reports, a_large_collective_in_progress_is_not_said_to_have_stopped, .timeout = 100) {
  dist_test_clean_launch_env();
  static dist_proc p;
  const char *env[] = {"DIST_TRANSPORT=tcp", "DIST_STALL_S=0.02", "DIST_TRACE=0", NULL};
  int st = run_prog(&p, "4", (const char *[]){"big", BIG_MIB, NULL}, env);
  const char *e = DIST_PROC_ERR(&p);
  cr_assert_eq(st, 0, "%s\n%s", DIST_PROC_OUT(&p), e);
  const char *w = strstr(e, "every member has entered it");
  cr_assert(w, "an all_reduce outlasts 20 ms:\n%s\n%s", DIST_PROC_OUT(&p), e);
  cr_assert(strstr(w, "every member has entered it and it has not completed: its data may still "
                      "be moving (a large or slow transfer), or one of them stopped inside it"),
            "%s", w);
  cr_assert(!strstr(e, "every member has entered it: one of them stopped inside the operation"),
            "%s", e);
}
