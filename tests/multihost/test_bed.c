/* ctest: labels=multihost timeout=240 */
/* test_bed.c - the multi-host test bed itself (issue 23, acceptance 4):
 * hosts are network namespaces with their own addresses and host
 * identities, one distrun per host runs one job, and the bed leaves
 * nothing behind (no namespace, link, nftables table or process) after a
 * test that passes, one that fails an assertion and one that is killed.
 * The failing and killed tests are this executable run again with a
 * filter on a planted test (NETBED_PLANT), whose bed the outer test names
 * through NETBED_PREFIX. */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "netbed.h"

#define OUT(p) DIST_PROC_OUT(p)
#define ERR(p) DIST_PROC_ERR(p)

static netbed bed;
static netbed_job job;

static void need_bed(void) {
  char why[256];
  if (!netbed_supported(why, sizeof why))
    cr_skip_test("%s", why);
  dist_test_clean_launch_env();
}

static void fini(void) { netbed_down(&bed); }

/* A 2 x 2 job: both nodes end 0, every rank reports a host identity, and
 * the two hosts' identities differ while a host's ranks share one. */
Test(multihost_bed, two_hosts_run_one_job_with_distinct_host_identities, .timeout = 120,
     .fini = fini) {
  need_bed();
  cr_assert_eq(netbed_up(&bed, 2, 0), 0, "%s", bed.err);
  const char *prog[] = {dist_test_bin("multihost_rank"), "loop", "20", "1000", NULL};
  const char *env[] = {"DIST_TIMEOUT=60", "DIST_LOG_LEVEL=INFO", NULL};
  netbed_job_start(&job, &bed, 2, 2, env, prog);
  netbed_job_finish(&job, 90000);
  for (int k = 0; k < 2; k++)
    cr_assert_eq(job.node[k].status, 0, "%s", netbed_job_output(&job));
  for (int r = 0; r < 4; r++) {
    char want[64];
    snprintf(want, sizeof want, "[%d] passed rank=%d\n", r, r);
    cr_expect(strstr(OUT(&job.node[r / 2]), want), "no '%s':\n%s", want,
              netbed_job_output(&job));
  }
  /* The default group spans hosts: the CPU backend must not use shared
   * memory for it (DESIGN.md, host identity). */
  for (int k = 0; k < 2; k++)
    cr_expect(!strstr(ERR(&job.node[k]), "collectives over shared memory"),
              "a group spanning namespaces used shared memory:\n%s", netbed_job_output(&job));
  cr_expect(netbed_down(&bed) == 0, "left behind:\n%s", bed.err);
}

/* --- nothing left behind -------------------------------------------------- */

/* The planted tests: run only when the outer test asks (NETBED_PLANT). */
Test(multihost_bed, planted, .timeout = 120, .fini = fini) {
  const char *plant = getenv("NETBED_PLANT");
  if (!plant)
    cr_skip_test("run by nothing_is_left_after_*");
  cr_assert_eq(netbed_up(&bed, 2, 0), 0, "%s", bed.err);
  const char *prog[] = {dist_test_bin("multihost_rank"), "loop", "0", "1000", NULL};
  const char *env[] = {"DIST_TIMEOUT=60", NULL};
  netbed_job_start(&job, &bed, 2, 1, env, prog);
  cr_assert(netbed_find(&bed, 1, "multihost_rank", NULL, 30000) > 0, "no rank in host 1");
  netbed_sh(&bed, "partition", "1", NULL); /* an nftables table too */
  printf("planted bed %s running\n", bed.prefix);
  fflush(stdout);
  if (!strcmp(plant, "fail"))
    cr_assert_fail("planted failure with the bed up");
  for (;;)
    pause(); /* until the outer test kills us */
}

/* Processes whose command line names the bed (its guardian, `netbed.sh
 * exec`, distruns and ranks started through it). */
static int count_procs(const char *prefix) {
  char cmd[256];
  snprintf(cmd, sizeof cmd, "ps -eo args | grep -c '[%c]%s'", prefix[0], prefix + 1);
  FILE *f = popen(cmd, "r");
  int procs = -1;
  if (f && fscanf(f, "%d", &procs) != 1)
    procs = -1;
  if (f)
    pclose(f);
  return procs;
}

/* Runs the planted test in a child; how: "fail" or "kill". */
static void run_planted(const char *how) {
  static dist_proc p;
  char prefix[32], pv[48], hv[32];
  snprintf(prefix, sizeof prefix, "dtb%dx%c", (int)getpid(), how[0]);
  snprintf(pv, sizeof pv, "NETBED_PREFIX=%s", prefix);
  snprintf(hv, sizeof hv, "NETBED_PLANT=%s", how);
  char self[512];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  cr_assert(n > 0);
  self[n] = '\0';
  const char *argv[] = {self, "--filter", "multihost_bed/planted", "--jobs", "1", NULL};
  const char *env[] = {pv, hv, NULL};
  unsetenv("BXFI_MAP"); /* else the child takes itself for our Criterion worker */
  dist_proc_start(&p, argv, env);
  cr_assert(dist_proc_wait_for(&p, 0, "planted bed", 1, 60000), "the planted test did not "
            "start:\n%s\n%s", OUT(&p), ERR(&p));
  char left[4096];
  cr_assert(netbed_left(prefix, left, sizeof left)[0], "the planted bed is not there");
  if (!strcmp(how, "kill"))
    kill(-p.pid, SIGKILL); /* as ctest does at a timeout */
  int st = dist_proc_finish(&p, 60000);
  cr_expect_neq(st, 0, "the planted test passed:\n%s\n%s", OUT(&p), ERR(&p));
  /* The guardian removes the bed once the test's process is gone. */
  int64_t deadline = dist_test_now_ms() + 30000;
  int procs = -1;
  while ((netbed_left(prefix, left, sizeof left)[0] || (procs = count_procs(prefix)) != 0) &&
         dist_test_now_ms() < deadline)
    usleep(50000); /* polling the bed's state against a deadline */
  procs = count_procs(prefix);
  cr_expect(!left[0], "left behind by a test that %s:\n%s",
            !strcmp(how, "kill") ? "was killed" : "failed", left);
  cr_expect_eq(procs, 0, "processes naming %s are left", prefix);
}

Test(multihost_bed, nothing_is_left_after_a_failing_test, .timeout = 150) {
  need_bed();
  run_planted("fail");
}

Test(multihost_bed, nothing_is_left_after_a_killed_test, .timeout = 150) {
  need_bed();
  run_planted("kill");
}

/* A bed whose owner died without its guardian (both SIGKILLed) is swept
 * by the next bed; beds of live owners are not. */
Test(multihost_bed, stale_beds_are_swept_and_live_ones_kept, .timeout = 60) {
  need_bed();
  pid_t dead = fork();
  if (dead == 0)
    _exit(0);
  waitpid(dead, NULL, 0);
  char stale[32], live[32];
  snprintf(stale, sizeof stale, "dtb%d", (int)dead);
  snprintf(live, sizeof live, "dtb%dxl", (int)getpid());
  static dist_proc p;
  const char *up1[] = {"/bin/bash", netbed_script(), "up", stale, "1", NULL};
  const char *up2[] = {"/bin/bash", netbed_script(), "up", live, "1", NULL};
  cr_assert_eq(dist_proc_run(&p, up1, NULL, 30000), 0, "%s", ERR(&p));
  cr_assert_eq(dist_proc_run(&p, up2, NULL, 30000), 0, "%s", ERR(&p));
  char left[4096];
  cr_expect(!netbed_left(stale, left, sizeof left)[0], "stale bed kept:\n%s", left);
  cr_expect(netbed_left(live, left, sizeof left)[0], "a live owner's bed was swept");
  const char *down[] = {"/bin/bash", netbed_script(), "down", live, NULL};
  cr_expect_eq(dist_proc_run(&p, down, NULL, 30000), 0, "%s", ERR(&p));
  cr_expect(!netbed_left(live, left, sizeof left)[0], "%s", left);
}
