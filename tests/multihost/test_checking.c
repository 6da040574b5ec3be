/* ctest: labels=multihost timeout=300 */
/* test_checking.c - the checking layer, tracer and monitor across hosts
 * (issue 23, acceptance 3): a planted desync, a hang and a wait-for cycle
 * (example_bugs) on 2 hosts x 2 ranks of the test bed give the same
 * verdict as on one host (kind, exit status, culprits, group, operation,
 * sequence number, field, call site: trace.db's verdict row) and the same
 * exit status on both nodes' distruns; and trace.db merges with clock
 * offsets measured across namespaces: with host 1's monotonic clock 1000 s
 * ahead (a time namespace), its ranks' offsets come out near -1000 s,
 * within the measured round trip, and the merged timeline stays in order
 * (every rank's first operation starts after the job did). */
#include <criterion/criterion.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "netbed.h"
#include "tmpdir.h"

static netbed bed;
static netbed_job job;

static void fini(void) { netbed_down(&bed); }

static void need_bed(void) {
  char why[256];
  if (!netbed_supported(why, sizeof why))
    cr_skip_test("%s", why);
  dist_test_clean_launch_env();
}

/* "kind|status|culprits|group|op|seq|field|site" of trace.db's verdict. */
static void verdict_of(const char *db, char *out, size_t len) {
  sqlite3 *h = NULL;
  sqlite3_stmt *st = NULL;
  snprintf(out, len, "(no verdict in %s)", db);
  if (sqlite3_open_v2(db, &h, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK &&
      sqlite3_prepare_v2(h,
                         "SELECT kind || '|' || exit_status || '|' || culprits || '|' || "
                         "ifnull(group_name, '') || '|' || ifnull(op, '') || '|' || "
                         "ifnull(seq, '') || '|' || ifnull(field, '') || '|' || "
                         "ifnull(site, '') FROM verdict",
                         -1, &st, NULL) == SQLITE_OK &&
      sqlite3_step(st) == SQLITE_ROW)
    snprintf(out, len, "%s", (const char *)sqlite3_column_text(st, 0));
  sqlite3_finalize(st);
  sqlite3_close(h);
}

/* The bug on one host: distrun -n 4; its status, its verdict row. */
static int one_host(const char *bug, const char *debug, char *verdict, size_t len) {
  char dir[] = "/tmp/netbed-onehost-XXXXXX", trace[64], out[96];
  cr_assert(dist_test_mkdtemp(dir));
  snprintf(trace, sizeof trace, "DIST_TRACE=%s/t", dir);
  snprintf(out, sizeof out, "%s/trace.db", dir);
  const char *env[] = {trace, debug, NULL};
  static dist_proc p;
  int st = dist_proc_runl(&p, env, 120000, dist_test_bin("distrun"), "-n", "4", "--trace-out",
                          out, dist_test_bin("example_bugs"), "--bug", bug, "--timeout", "8",
                          NULL);
  verdict_of(out, verdict, len);
  char rm[128];
  snprintf(rm, sizeof rm, "rm -rf %s", dir);
  cr_expect_eq(system(rm), 0);
  return st;
}

/* Cuts s before its n-th sep. */
static void cut_after(char *s, char sep, int n) {
  for (char *p = s; *p; p++)
    if (*p == sep && --n == 0) {
      *p = '\0';
      return;
    }
}

static void same_verdict_as_one_host(const char *bug, const char *debug, int want_status) {
  need_bed();
  char single[1024], multi[1024];
  int st = one_host(bug, debug, single, sizeof single);
  cr_assert_eq(st, want_status, "one host: distrun exited %d (%s)", st, single);
  cr_assert_eq(netbed_up(&bed, 2, 0), 0, "%s", bed.err);
  const char *prog[] = {dist_test_bin("example_bugs"), "--bug", bug, "--timeout", "8", NULL};
  const char *env[] = {debug, NULL};
  netbed_job_start(&job, &bed, 2, 2, env, prog);
  netbed_job_finish(&job, 150000);
  for (int k = 0; k < 2; k++)
    cr_expect_eq(job.node[k].status, want_status, "node %d:\n%s", k, netbed_job_output(&job));
  verdict_of(job.trace[0], multi, sizeof multi);
  /* kind, status, culprits, group, operation and number: the field and
   * the site may differ for a hang's culprit in its own code, whose stack
   * the distrun of node 0 captures on one host and cannot on another
   * (distrun_outside.c: a rank of its own node only). */
  cut_after(single, '|', 6);
  cut_after(multi, '|', 6);
  cr_expect_str_eq(multi, single, "--bug %s across hosts:\n%s", bug, netbed_job_output(&job));
  printf("--bug %s: one host and 2 x 2 hosts: %s\n", bug, multi);
  /* The report distrun prints last on node 0 names the same culprit. */
  const char *err0 = DIST_PROC_ERR(&job.node[0]);
  cr_expect(strstr(err0, "rank 3"), "node 0's report does not name rank 3:\n%s", err0);
}

Test(multihost_checking, a_desync_across_hosts_reads_as_on_one_host, .timeout = 200,
     .fini = fini) {
  same_verdict_as_one_host("shape", "DIST_DEBUG=DETAIL", 10);
}

Test(multihost_checking, a_hang_across_hosts_reads_as_on_one_host, .timeout = 200,
     .fini = fini) {
  same_verdict_as_one_host("hang", "DIST_DEBUG=OFF", 11);
}

/* --- the merged trace ----------------------------------------------------- */

static long long one_ll(sqlite3 *h, const char *sql) {
  sqlite3_stmt *st = NULL;
  long long v = -1;
  if (sqlite3_prepare_v2(h, sql, -1, &st, NULL) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
    v = sqlite3_column_int64(st, 0);
  sqlite3_finalize(st);
  return v;
}

Test(multihost_checking, trace_merges_with_clock_offsets_measured_across_hosts, .timeout = 150,
     .fini = fini) {
  need_bed();
  cr_assert_eq(netbed_up(&bed, 2, 1000), 0, "%s", bed.err);
  const char *prog[] = {dist_test_bin("multihost_rank"), "loop", "30", "4096", NULL};
  const char *env[] = {"DIST_TIMEOUT=60", NULL};
  netbed_job_start(&job, &bed, 2, 2, env, prog);
  netbed_job_finish(&job, 120000);
  for (int k = 0; k < 2; k++)
    cr_assert_eq(job.node[k].status, 0, "%s", netbed_job_output(&job));
  sqlite3 *h = NULL;
  cr_assert_eq(sqlite3_open_v2(job.trace[0], &h, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
  cr_expect_eq(one_ll(h, "SELECT count(*) FROM ranks"), 4);
  const long long skew = 1000000000000LL, ms = 1000000;
  for (int r = 0; r < 4; r++) {
    char q[256];
    snprintf(q, sizeof q, "SELECT clock_offset_ns FROM ranks WHERE rank = %d", r);
    long long off = one_ll(h, q);
    snprintf(q, sizeof q, "SELECT clock_rtt_ns FROM ranks WHERE rank = %d", r);
    long long rtt = one_ll(h, q);
    long long want = r < 2 ? 0 : -skew; /* host 1 runs 1000 s ahead */
    if (r > 0)
      cr_expect(rtt > 0 && rtt < 500 * ms, "rank %d: round trip %lld ns", r, rtt);
    cr_expect(llabs(off - want) <= (rtt > 0 ? rtt : 0) / 2 + 5 * ms,
              "rank %d: offset %lld ns, expected %lld (+- rtt/2 = %lld)", r, off, want, rtt / 2);
    /* Every rank's 30 all_reduces are in the merged trace, on the job clock. */
    snprintf(q, sizeof q,
             "SELECT count(*) FROM operations WHERE rank = %d AND op = 'ALL_REDUCE'", r);
    cr_expect_geq(one_ll(h, q), 30, "rank %d's operations", r);
  }
  /* On the job clock, the same all_reduce starts on every rank within the
   * job's span: no rank 1000 s away. */
  cr_expect_lt(one_ll(h, "SELECT max(t_started_ns) - min(t_started_ns) FROM operations"),
               60000 * ms);
  sqlite3_close(h);
  static dist_proc p;
  cr_expect_eq(dist_proc_runl(&p, NULL, 60000, dist_test_bin("distview"), "summary",
                              job.trace[0], NULL),
               0, "distview summary:\n%s%s", DIST_PROC_OUT(&p), DIST_PROC_ERR(&p));
}
