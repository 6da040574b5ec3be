/* ctest: labels=multiproc,verdicts timeout=400 cost=70 */
/* test_distrun_departed.c - ranks that return from main without
 * destroying the default group while others still work
 * (build/bin/departed_testprog, prog_departed.c, under distrun). That is
 * legal, as in torch: a rank that finished is done, not lost. Its process
 * says so as it exits (the TCP engine's EXIT, tcp_mesh.c), so a rank with
 * nothing pending with it notes its end quietly; it is reported lost (the
 * warning, DIST_E_PEER_LOST naming it, the observers) only where an
 * operation waits for it, then or later (tcp_progress.c).
 *   - a ring exchange whose first send comes only after ranks 2 .. n-1
 *     have ended, at DETAIL over shared memory and at OFF over TCP with 8
 *     ranks, and a blocking receive while they end: exit 0, distview says
 *     success, and no rank prints a warning or "peer lost" (each printed
 *     "TCP WARN ... peer lost: rank 2 ... closed its connection" before;
 *     the blocking one even failed the job, as the warning's relay failed
 *     rank 0's send);
 *   - the same ring with every rank destroying its group: the same;
 *   - a send to a rank that returned from main fails, naming it, with the
 *     warning on the sender alone.
 * The order is made by the ranks' ends themselves (prog_departed.c waits
 * on pidfds), never by a sleep. A rank killed while others wait on anyone
 * is still lost at once (core_tcp_fail's bystander case). */
#include "../examples/mesh_verdict.h"

static void run_mode(const char *debug, const char *extra, const char *ranks, const char *mode,
                     const char *destroy, mesh_run *r) {
  const char *job[] = {dist_test_bin("departed_testprog"), mode, destroy, NULL};
  job_run_argv(debug, "DIST_TIMEOUT=10", extra, ranks, job, r);
}

/* Exit 0, distview agrees, and nothing on stderr warns. */
static void expect_clean(const mesh_run *r) {
  cr_expect_eq(r->status, 0, "distrun exited %d:\n%s", r->status, r->err);
  cr_expect_eq(r->diag_status, 0, "distview diagnose exited %d: %s", r->diag_status, r->json);
  cr_expect(!strstr(r->err, "WARN"), "a warning on a legal job:\n%s", r->err);
  cr_expect(!strstr(r->err, "peer lost"), "a lost peer on a legal job:\n%s", r->err);
  cr_expect(!strstr(r->err, "failed"), "a call failed:\n%s", r->err);
}

Test(monitor_distrun_departed, ranks_that_returned_from_main_are_no_lost_peers_to_the_ring,
     .timeout = 120) {
  static mesh_run r;
  run_mode("DIST_DEBUG=DETAIL", NULL, "4", "ring", NULL, &r);
  expect_clean(&r);
}

Test(monitor_distrun_departed, the_same_over_tcp_with_8_ranks_at_DIST_DEBUG_OFF,
     .timeout = 120) {
  static mesh_run r;
  run_mode("DIST_DEBUG=OFF", "DIST_TRANSPORT=tcp", "8", "ring", NULL, &r);
  expect_clean(&r);
}

Test(monitor_distrun_departed, a_blocking_receive_is_not_failed_by_ranks_that_ended_meanwhile,
     .timeout = 120) {
  static mesh_run r;
  run_mode("DIST_DEBUG=DETAIL", "DIST_TRANSPORT=tcp", "4", "blocking", NULL, &r);
  expect_clean(&r);
}

Test(monitor_distrun_departed, the_ring_with_every_group_destroyed_ends_clean_too,
     .timeout = 120) {
  static mesh_run r;
  run_mode("DIST_DEBUG=DETAIL", NULL, "4", "ring", "destroy", &r);
  expect_clean(&r);
}

/* Rank 2 ended while rank 1 waited on rank 0 (quietly), then rank 1 sends
 * to it: that send fails as a lost peer, with the message of rank 2's end,
 * and rank 1 warns then; ranks 0 and 3 never needed rank 2. */
Test(monitor_distrun_departed, a_send_to_a_rank_that_returned_from_main_fails_naming_it,
     .timeout = 120) {
  static mesh_run r;
  run_mode("DIST_DEBUG=DETAIL", NULL, "4", "late", NULL, &r);
  cr_expect_neq(r.status, 0, "distrun exited 0:\n%s", r.err);
  const char *line = strstr(r.err, "rank 1: send to rank 2 failed: ");
  cr_assert(line, "rank 1's send to rank 2 did not fail:\n%s", r.err);
  const char *eol = strchr(line, '\n');
  int len = eol ? (int)(eol - line) : (int)strlen(line);
  char said[1024];
  snprintf(said, sizeof said, "%.*s", len, line);
  cr_expect(strstr(said, "peer lost") && strstr(said, "rank 2 (host "),
            "not a lost peer naming rank 2: %s", said);
  cr_expect(strstr(r.err, "[1] TCP WARN group 0: peer lost: rank 2 (host "),
            "rank 1 did not warn of rank 2:\n%s", r.err);
  cr_expect(!strstr(r.err, "[0] TCP WARN") && !strstr(r.err, "[3] TCP WARN"),
            "a warning from a rank that never needed rank 2:\n%s", r.err);
}
