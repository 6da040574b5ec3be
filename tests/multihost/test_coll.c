/* ctest: labels=multihost timeout=400 */
/* test_coll.c - the CPU collective suite across hosts (issue 23,
 * acceptance 1): tests/support/coll_suite.c (every op with every dtype,
 * every reduce op, sync and async, twelve async in flight, a subgroup of
 * every other rank) plus groups chosen by host (one per host, the hosts'
 * first ranks, one rank of the first and of the last host), on 2 hosts x
 * 2 ranks and 4 hosts x 2 ranks of the test bed. Every result is checked
 * against the reference, and every rank's digest of the outputs all
 * members must share is compared with every other member's ("digests
 * agree"): bitwise identical on every rank.
 *
 * To prove another CPU backend on the bed (hierarchical collectives, lazy
 * connections), rerun only this: ctest --test-dir build -C netbed -R
 * multihost_test_coll. DIST_TEST_SEED picks the seed (printed). */
#include <criterion/criterion.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mp.h"
#include "netbed.h"

static netbed bed;
static netbed_job job;

static void fini(void) { netbed_down(&bed); }

static void run_layout(int hosts, int per_host) {
  char why[256];
  if (!netbed_supported(why, sizeof why))
    cr_skip_test("%s", why);
  dist_test_clean_launch_env();
  uint64_t seed = dist_test_seed();
  char seed_s[32];
  snprintf(seed_s, sizeof seed_s, "%" PRIu64, seed);
  cr_assert_eq(netbed_up(&bed, hosts, 0), 0, "%s", bed.err);
  const char *prog[] = {dist_test_bin("multihost_rank"), "suite", seed_s, NULL};
  const char *env[] = {"DIST_TIMEOUT=120", "DIST_LOG_LEVEL=INFO", "DIST_TRACE=0", NULL};
  int64_t t0 = dist_test_now_ms();
  netbed_job_start(&job, &bed, hosts, per_host, env, prog);
  netbed_job_finish(&job, 330000);
  int world = hosts * per_host;
  for (int k = 0; k < hosts; k++)
    cr_assert_eq(job.node[k].status, 0, "%dx%d, seed %s:\n%s", hosts, per_host, seed_s,
                 netbed_job_output(&job));
  /* Every rank passed and compared its digests with every other member. */
  char want[96], host_of[8][160];
  for (int r = 0; r < world; r++) {
    const char *out = DIST_PROC_OUT(&job.node[r / per_host]);
    snprintf(want, sizeof want, "[%d] suite passed on rank %d of %d\n", r, r, world);
    cr_expect(strstr(out, want), "no '%s'", want);
    snprintf(want, sizeof want, "[%d] digests agree: ", r);
    cr_expect(strstr(out, want), "no '%s'", want);
    /* The host identity each rank saw: one per host, distinct. */
    snprintf(want, sizeof want, "[%d] rank %d host ", r, r);
    const char *h = strstr(out, want);
    cr_assert(h, "no '%s'", want);
    if (r % per_host == 0)
      sscanf(h + strlen(want), "%159s", host_of[r / per_host]);
    else
      cr_expect(!strncmp(h + strlen(want), host_of[r / per_host], strlen(host_of[r / per_host])),
                "rank %d is not on its host's identity %s", r, host_of[r / per_host]);
  }
  for (int a = 0; a < hosts; a++)
    for (int b = a + 1; b < hosts; b++)
      cr_expect(strcmp(host_of[a], host_of[b]), "hosts %d and %d share identity %s", a, b,
                host_of[a]);
  /* A host's own group (g2 .. g<hosts+1>, made after the suite's g1) runs
   * over shared memory; the default group spans hosts, so it never does. */
  for (int r = 0; r < world; r++) {
    const dist_proc *p = &job.node[r / per_host];
    char line[160];
    snprintf(line, sizeof line, "group g%d: rank %d of %d, collectives over shared memory",
             2 + r / per_host, r % per_host, per_host);
    cr_expect(strstr(DIST_PROC_OUT(p), line) || strstr(DIST_PROC_ERR(p), line),
              "rank %d: no '%s'", r, line);
    snprintf(line, sizeof line, "group 0: rank %d of %d, collectives over shared memory", r,
             world);
    cr_expect(!strstr(DIST_PROC_OUT(p), line) && !strstr(DIST_PROC_ERR(p), line),
              "the default group spans hosts but rank %d says '%s'", r, line);
  }
  printf("multihost suite %dx%d, seed %s: %.1f s\n", hosts, per_host, seed_s,
         (double)(dist_test_now_ms() - t0) / 1000);
  cr_expect(netbed_down(&bed) == 0, "left behind:\n%s", bed.err);
}

Test(multihost_coll, suite_on_2_hosts_x_2_ranks, .timeout = 380, .fini = fini) {
  run_layout(2, 2);
}

Test(multihost_coll, suite_on_4_hosts_x_2_ranks, .timeout = 380, .fini = fini) {
  run_layout(4, 2);
}
