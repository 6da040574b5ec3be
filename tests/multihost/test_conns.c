/* ctest: labels=multihost timeout=300 */
/* test_conns.c - connections per rank on 8 hosts x 2 ranks of the bed
 * (issue 23, acceptance 2), read from the merged trace as a user would:
 * every group starts with none (its summary at creation: "connections: 0
 * tcp"), connections are made when first needed and each end records one
 * ("... when first needed"), so after one all_reduce and a ring of
 * point-to-point messages each rank holds exactly its two ring neighbours
 * in the group's point-to-point mesh, and only a host's leader holds
 * connections between hosts (at most the other 7 leaders), not n-1 = 15. */
#include <criterion/criterion.h>
#include <sqlite3.h>
#include <stdio.h>
#include <string.h>

#include "netbed.h"
#include "tmpdir.h"

#define HOSTS 8
#define PER_HOST 2
#define WORLD (HOSTS * PER_HOST)

static netbed bed;
static netbed_job job;

static void fini(void) { netbed_down(&bed); }

static long long count(sqlite3 *h, const char *sql) {
  sqlite3_stmt *st = NULL;
  long long v = -1;
  if (sqlite3_prepare_v2(h, sql, -1, &st, NULL) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
    v = sqlite3_column_int64(st, 0);
  sqlite3_finalize(st);
  return v;
}

Test(multihost_conns, each_rank_connects_to_its_schedule_and_partners_only, .timeout = 280,
     .fini = fini) {
  char why[256];
  if (!netbed_supported(why, sizeof why))
    cr_skip_test("%s", why);
  dist_test_clean_launch_env();
  cr_assert_eq(netbed_up(&bed, HOSTS, 0), 0, "%s", bed.err);
  const char *prog[] = {dist_test_bin("multihost_rank"), "ring", NULL};
  const char *env[] = {"DIST_TIMEOUT=120", NULL};
  netbed_job_start(&job, &bed, HOSTS, PER_HOST, env, prog);
  netbed_job_finish(&job, 240000);
  for (int k = 0; k < HOSTS; k++)
    cr_assert_eq(job.node[k].status, 0, "node %d:\n%s", k, netbed_job_output(&job));
  sqlite3 *h = NULL;
  cr_assert_eq(sqlite3_open_v2(job.trace[0], &h, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
  char q[512];
  for (int r = 0; r < WORLD; r++) {
    snprintf(q, sizeof q, "SELECT count(*) FROM events WHERE rank = %d AND message LIKE "
             "'connections: 0 tcp (point-to-point 0, between host leaders 0)%%'", r);
    cr_expect_eq(count(h, q), 1, "rank %d: no summary of 0 connections at creation", r);
    /* the point-to-point mesh: its two ring neighbours, one record each */
    snprintf(q, sizeof q, "SELECT count(*) FROM events WHERE rank = %d AND message LIKE "
             "'%%when first needed%%' AND message NOT LIKE '%%/leaders: %%'", r);
    cr_expect_eq(count(h, q), 2, "rank %d: point-to-point connections", r);
    int next = (r + 1) % WORLD, prev = (r + WORLD - 1) % WORLD;
    snprintf(q, sizeof q, "SELECT count(*) FROM events WHERE rank = %d AND message LIKE "
             "'%%when first needed%%' AND message NOT LIKE '%%/leaders: %%' AND (message LIKE"
             " '%% rank %d (host%%' OR message LIKE '%% rank %d (host%%')", r, next, prev);
    cr_expect_eq(count(h, q), 2, "rank %d: its connections are not to ranks %d and %d", r,
                 prev, next);
    /* between hosts: leaders only (the first rank of each node), no more
     * than the other leaders */
    snprintf(q, sizeof q, "SELECT count(*) FROM events WHERE rank = %d AND message LIKE "
             "'%%/leaders: %%when first needed%%'", r);
    long long leaders = count(h, q);
    if (r % PER_HOST == 0)
      cr_expect(leaders >= 1 && leaders <= HOSTS - 1, "leader %d: %lld connections between "
                "hosts", r, leaders);
    else
      cr_expect_eq(leaders, 0, "rank %d is no leader: %lld connections between hosts", r,
                   leaders);
  }
  sqlite3_close(h);
}
