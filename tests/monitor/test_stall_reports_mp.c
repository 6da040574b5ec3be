/* ctest: labels=multiproc timeout=120 */
/* test_stall_reports_mp.c - the monitor's live stall reports on legal
 * waits (monitor_testprog under distrun): they are measured against the
 * operation's own timeout. */
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
