/* ctest: labels=netfault timeout=400 */
/* test_faults.c - faults across real hosts (issue 26): a job of 2 hosts x
 * 2 ranks on the test bed (ranks 0-1 on host 0, which also holds the
 * job's store, ranks 2-3 on host 1), an all_reduce loop checked exactly,
 * and one fault injected once every rank has run its first all_reduce.
 * The expected outcome of each fault is the table in
 * tests/multihost/README.md: the job completes correctly (delay and
 * bandwidth, small loss), or fails on every node with the right status
 * and a verdict that names the cause within the job's timeout (a dead
 * rank, a stopped rank, a partition, a dead store host, a dead distrun);
 * and whatever happened, the trace.db of a node that survived merges and
 * opens (distview summary), and the bed leaves nothing behind. */
#include <criterion/criterion.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "netbed.h"

#define TIMEOUT_S 8 /* the job's DIST_TIMEOUT */
#define OUT(k) DIST_PROC_OUT(&job.node[k])
#define ERR(k) DIST_PROC_ERR(&job.node[k])

static netbed bed;
static netbed_job job;

static void fini(void) { netbed_down(&bed); }

static void bed_up(void) {
  char why[256];
  if (!netbed_supported(why, sizeof why))
    cr_skip_test("%s", why);
  dist_test_clean_launch_env();
  cr_assert_eq(netbed_up(&bed, 2, 0), 0, "%s", bed.err);
}

/* Starts `multihost_rank loop iters n` on 2 x 2; iters 0 runs until the
 * job is ended. Returns once every rank has finished its first all_reduce
 * (each prints "ready pid=P"). */
static void start_loop_timeout(const char *iters, const char *n, int timeout_s) {
  static char timeout[32];
  snprintf(timeout, sizeof timeout, "DIST_TIMEOUT=%d", timeout_s);
  const char *prog[] = {dist_test_bin("multihost_rank"), "loop", iters, n, NULL};
  const char *env[] = {timeout, NULL};
  netbed_job_start(&job, &bed, 2, 2, env, prog);
  for (int k = 0; k < 2; k++)
    cr_assert(dist_proc_wait_for(&job.node[k], 0, "ready pid=", 2, 60000),
              "the ranks did not start:\n%s", netbed_job_output(&job));
}

static void start_loop(const char *iters, const char *n) {
  start_loop_timeout(iters, n, TIMEOUT_S);
}

static pid_t rank_pid(int r) {
  char want[32];
  snprintf(want, sizeof want, "[%d] ready pid=", r);
  const char *p = strstr(OUT(r / 2), want);
  cr_assert(p, "no '%s'", want);
  return (pid_t)atoi(p + strlen(want));
}

/* Waits for both nodes; returns the seconds from now until the last ended. */
static double finish(void) {
  int64_t t0 = dist_test_now_ms();
  netbed_job_finish(&job, 120000);
  int64_t last = 0;
  for (int k = 0; k < 2; k++)
    if (job.node[k].exited_ms > last)
      last = job.node[k].exited_ms;
  return (double)(last - t0) / 1000;
}

/* trace.db of node k merges and opens: distview reads it, and it holds
 * ranks. Returns its verdict row "kind|status|culprits". */
static void trace_opens(int k, char *verdict, size_t len) {
  static dist_proc p;
  int st = dist_proc_runl(&p, NULL, 60000, dist_test_bin("distview"), "summary", job.trace[k],
                          NULL);
  cr_expect_eq(st, 0, "distview summary %s: %s%s", job.trace[k], DIST_PROC_OUT(&p),
               DIST_PROC_ERR(&p));
  sqlite3 *h = NULL;
  sqlite3_stmt *s = NULL;
  snprintf(verdict, len, "(none)");
  if (sqlite3_open_v2(job.trace[k], &h, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK &&
      sqlite3_prepare_v2(h, "SELECT kind || '|' || exit_status || '|' || culprits || '|' || text "
                         "FROM verdict",
                         -1, &s, NULL) == SQLITE_OK &&
      sqlite3_step(s) == SQLITE_ROW)
    snprintf(verdict, len, "%s", (const char *)sqlite3_column_text(s, 0));
  sqlite3_finalize(s);
  sqlite3_close(h);
}

static void all_passed(void) {
  for (int k = 0; k < 2; k++)
    cr_assert_eq(job.node[k].status, 0, "node %d:\n%s", k, netbed_job_output(&job));
  for (int r = 0; r < 4; r++) {
    char want[32];
    snprintf(want, sizeof want, "[%d] passed rank=%d\n", r, r);
    cr_expect(strstr(OUT(r / 2), want), "no '%s'", want);
  }
  char v[4096];
  trace_opens(0, v, sizeof v);
  cr_expect_str_eq(v, "success|0||success");
}

/* A count from `netbed.sh stats` of host 1: the number after key. */
static long long stat_of(const char *key) {
  static dist_proc p;
  const char *argv[] = {"/bin/bash", netbed_script(), "stats", bed.prefix, "1", NULL};
  dist_proc_run(&p, argv, NULL, 30000);
  long long total = 0;
  for (const char *s = DIST_PROC_OUT(&p); (s = strstr(s, key)); s += strlen(key))
    total += atoll(s + strlen(key));
  return total;
}

/* --- faults the job survives ---------------------------------------------- */

Test(netfault, delay_and_bandwidth_the_job_completes, .timeout = 150, .fini = fini) {
  bed_up();
  /* 40 Mbit/s with a 64 KiB queue both ways on host 1: a 256 KiB
   * all_reduce waits in the queue (tbf turns rate into delay). */
  cr_assert_eq(netbed_sh(&bed, "shape", "1", "40mbit", "16kb", "64kb", NULL), 0, "%s", bed.err);
  start_loop("15", "65536");
  double s = finish();
  all_passed();
  long long over = stat_of("overlimits ");
  cr_expect_gt(over, 0, "tbf never held a packet back");
  printf("shaped to 40 Mbit/s: 15 all_reduces of 256 KiB in %.1f s, %lld overlimits\n", s, over);
}

Test(netfault, small_loss_the_job_completes, .timeout = 150, .fini = fini) {
  bed_up();
  cr_assert_eq(netbed_sh(&bed, "loss", "1", "3", NULL), 0, "%s", bed.err);
  start_loop("40", "16384");
  double s = finish();
  all_passed();
  long long dropped = stat_of("counter packets ");
  cr_expect_gt(dropped, 0, "nftables dropped nothing");
  printf("3%% loss on host 1: 40 all_reduces of 64 KiB in %.1f s, %lld packets dropped\n", s,
         dropped);
}

Test(netfault, reordering_and_duplication_the_job_completes, .timeout = 150, .fini = fini) {
  bed_up();
  /* 20% of host 1's packets wait in a 100 Mbit/s class while the rest
   * pass them; 5% are sent twice. */
  cr_assert_eq(netbed_sh(&bed, "reorder", "1", "20", NULL), 0, "%s", bed.err);
  cr_assert_eq(netbed_sh(&bed, "dup", "1", "5", NULL), 0, "%s", bed.err);
  start_loop("60", "65536");
  double s = finish();
  all_passed();
  long long marked = stat_of("counter packets ");
  cr_expect_gt(marked, 0, "nftables neither delayed nor duplicated a packet");
  printf("reordered 20%% and duplicated 5%% on host 1: 60 all_reduces of 256 KiB in %.1f s\n",
         s);
}

Test(netfault, a_stall_shorter_than_the_timeout_the_job_completes, .timeout = 150,
     .fini = fini) {
  bed_up();
  /* 2 s of stall against a 20 s timeout: TCP's retransmission backoff
   * (0.2 s doubling) stretches a stall to the next retransmission, up to
   * twice its length, so "shorter than the timeout" needs room. */
  start_loop_timeout("3000", "16384", 20);
  cr_assert_eq(netbed_sh(&bed, "partition", "1", NULL), 0, "%s", bed.err);
  /* The stall's length is the fault itself, not a wait for something to
   * happen. */
  struct timespec ts = {2, 0};
  nanosleep(&ts, NULL);
  long long dropped = stat_of("counter packets ");
  cr_assert_eq(netbed_sh(&bed, "heal", "1", NULL), 0, "%s", bed.err);
  finish();
  all_passed();
  cr_expect_gt(dropped, 0, "the stall dropped nothing: the loop ended before it");
}

/* --- faults that end the job ----------------------------------------------- */

Test(netfault, a_dead_rank_on_another_host_is_named_on_every_node, .timeout = 150,
     .fini = fini) {
  bed_up();
  start_loop("0", "1024");
  kill(rank_pid(3), SIGKILL);
  double s = finish();
  for (int k = 0; k < 2; k++)
    cr_expect_eq(job.node[k].status, 12, "node %d:\n%s", k, netbed_job_output(&job));
  cr_expect(strstr(ERR(0), "rank 3 died: killed by signal 9 (SIGKILL) (on another node)"),
            "%s", ERR(0));
  cr_expect(strstr(ERR(1), "rank 3 (pid ") && strstr(ERR(1), "killed by signal 9"), "%s",
            ERR(1));
  cr_expect_lt(s, TIMEOUT_S, "the death took %.1f s to end the job", s);
  char v[4096];
  trace_opens(0, v, sizeof v);
  cr_expect(!strncmp(v, "died|12|3|", 10), "%s", v); /* as on one host: SIGKILL is no crash */
  /* A restart: the same bed runs the next job to the end. */
  start_loop("5", "1024");
  finish();
  all_passed();
}

Test(netfault, a_stopped_rank_is_named_as_stopped, .timeout = 150, .fini = fini) {
  bed_up();
  start_loop("0", "1024");
  pid_t p3 = rank_pid(3);
  kill(p3, SIGSTOP);
  cr_assert(dist_test_wait_stopped(p3, 10000), "rank 3 did not stop");
  double s = finish();
  for (int k = 0; k < 2; k++)
    cr_expect_eq(job.node[k].status, 11, "node %d:\n%s", k, netbed_job_output(&job));
  /* Node 0 cannot look at another host's processes: no heartbeat. Rank 2,
   * on rank 3's host, sees the stopped process. */
  char want[128];
  snprintf(want, sizeof want, "rank 3 (host %s-h1, pid %d) is not responding: ", bed.prefix,
           (int)p3);
  cr_expect(strstr(ERR(0), want), "no '%s' in node 0's report:\n%s", want, ERR(0));
  snprintf(want, sizeof want, "rank 3 (host %s-h1, pid %d) is not responding: its process is "
           "stopped", bed.prefix, (int)p3);
  cr_expect(strstr(ERR(1), want), "no '%s' on node 1:\n%s", want, ERR(1));
  cr_expect_lt(s, 3 * TIMEOUT_S, "%.1f s", s);
  char v[4096];
  trace_opens(0, v, sizeof v);
  cr_expect(!strncmp(v, "hang|11|", 8) && strstr(v, "rank 3 (host "), "%s", v);
}

Test(netfault, a_partition_is_named_on_both_sides, .timeout = 150, .fini = fini) {
  bed_up();
  start_loop("0", "1024");
  cr_assert_eq(netbed_sh(&bed, "partition", "1", NULL), 0, "%s", bed.err);
  double s = finish();
  /* Node 0 (the store's side): its ranks time out, the hang names the
   * ranks beyond the partition as not responding. */
  cr_expect_eq(job.node[0].status, 11, "%s", netbed_job_output(&job));
  for (int r = 2; r < 4; r++) {
    char want[96];
    snprintf(want, sizeof want, "rank %d (host %s-h1, pid %d) is not responding", r, bed.prefix,
             (int)rank_pid(r));
    cr_expect(strstr(ERR(0), want), "no '%s':\n%s", want, ERR(0));
  }
  /* Node 1 (cut off): it lost node 0's store. */
  cr_expect_eq(job.node[1].status, 1, "%s", netbed_job_output(&job));
  cr_expect(strstr(ERR(1), "exit status 1 (other failure): lost node 0's store (10.213.0.1:29500)"),
            "%s", ERR(1));
  cr_expect_lt(s, 4 * TIMEOUT_S, "%.1f s", s);
  char v[4096];
  trace_opens(0, v, sizeof v);
  cr_expect(!strncmp(v, "hang|11|", 8) && strstr(v, "rank 2 (host ") && strstr(v, "rank 3 (host "),
            "%s", v);
  trace_opens(1, v, sizeof v);
  cr_expect(!strncmp(v, "other|1||", 9) && strstr(v, "lost node 0's store"), "%s", v);
}

Test(netfault, a_dead_store_host_ends_the_other_node, .timeout = 150, .fini = fini) {
  bed_up();
  start_loop("0", "1024");
  pid_t d0 = netbed_find(&bed, 0, "distrun", "--node-rank 0", 5000);
  cr_assert(d0 > 0, "no distrun in host 0");
  kill(d0, SIGKILL);
  double s = finish();
  cr_expect_eq(job.node[1].status, 1, "%s", netbed_job_output(&job));
  cr_expect(strstr(ERR(1), "exit status 1 (other failure): lost node 0's store"), "%s", ERR(1));
  cr_expect_lt(s, TIMEOUT_S, "%.1f s", s);
  /* Node 0's ranks do not outlive their distrun. */
  cr_expect_eq(netbed_find(&bed, 0, "multihost_rank", NULL, 0), -1, "a rank of host 0 lives on");
  char v[4096];
  trace_opens(1, v, sizeof v);
  cr_expect(!strncmp(v, "other|1||", 9) && strstr(v, "lost node 0's store"), "%s", v);
}

Test(netfault, a_dead_distrun_on_another_node_ends_the_job, .timeout = 150, .fini = fini) {
  bed_up();
  start_loop("0", "1024");
  pid_t d1 = netbed_find(&bed, 1, "distrun", "--node-rank 1", 5000);
  cr_assert(d1 > 0, "no distrun in host 1");
  kill(d1, SIGKILL);
  double s = finish();
  /* Its ranks die with it; node 0's ranks lose their peers and the job
   * ends as a rank failure (which rank it blames: README, known gaps).
   * Node 0 gives a node that never reports its end the grace period (5 s)
   * and 10 s more before it stops the store. */
  cr_expect_eq(job.node[0].status, 12, "%s", netbed_job_output(&job));
  cr_expect_lt(s, TIMEOUT_S + 5 + 10 + 5, "%.1f s", s);
  cr_expect_eq(netbed_find(&bed, 1, "multihost_rank", NULL, 0), -1, "a rank of host 1 lives on");
  char v[4096];
  trace_opens(0, v, sizeof v);
  cr_expect(!strncmp(v, "died|12|", 8) || !strncmp(v, "crash|12|", 9), "%s", v);
}
