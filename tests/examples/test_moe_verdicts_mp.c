/* ctest: labels=multiproc,verdicts timeout=300 cost=40 */
/* One verdict on a second realistic job (issue 20): moe_train on 8 ranks
 * (expert groups of 4 with an uneven all_to_all, batched pipeline p2p,
 * async gradient buckets on 2-rank data-parallel groups, a blob broadcast),
 * the failures a survivor's view used to outrank: a SIGKILL, a NaN the
 * check refuses, groups created in another order, a receive-receive
 * deadlock, uneven splits. distrun's status and distview's --json agree,
 * and blame rank 5 (both ends of the deadlock, which both receive first). */
#include "mesh_verdict.h"

static void moe(const char *debug, const char *bug, mesh_run *r) {
  job_run("moe_train", debug, bug, 5, r);
}

Test(examples_moe, a_killed_rank_is_the_verdict_not_its_survivors_views, .timeout = 120) {
  static mesh_run r;
  moe("DIST_DEBUG=DETAIL", "kill", &r);
  mesh_expect_verdict(&r, 12, "died", 5);
  cr_expect(mesh_says(&r, "rank 5 (pid ") && mesh_says(&r, "killed by signal 9 (SIGKILL)"), "%s",
            r.err);
}

/* Stopped (SIGSTOP) in step 0, right after it made its groups: its record
 * must already list them, or nobody could tell that the expert group's
 * all_to_all waits for it (its last heartbeat was older than the group). */
Test(examples_moe, a_rank_stopped_just_after_making_its_groups_is_the_hangs_culprit,
     .timeout = 120) {
  static mesh_run r;
  job_run_step("moe_train", "DIST_DEBUG=DETAIL", "stop", 5, 0, &r);
  mesh_expect_verdict(&r, 11, "hang", 5);
  cr_expect(mesh_says(&r, "rank 5, which is not responding: its process is stopped"), "%s",
            r.err);
  cr_expect(strstr(r.json, "\"op\":\"ALL_TO_ALL_SINGLE\""), "%s", r.json);
}

Test(examples_moe, a_nan_refused_names_the_rank_group_and_operation, .timeout = 120) {
  static mesh_run r;
  moe("DIST_DEBUG=DETAIL", "nan", &r);
  mesh_expect_verdict(&r, 12, "died", 5);
  cr_expect(mesh_says(&r, "NaN check (DIST_NAN_CHECK=1): rank 5 ") &&
                mesh_says(&r, "of group 4 (dp): input 0 float32[128] holds NaN at index 7"),
            "%s", r.err);
  cr_expect(strstr(r.json, "\"group_name\":\"dp\"") && strstr(r.json, "\"op\":\"ALL_REDUCE\""),
            "%s", r.json);
}

Test(examples_moe, groups_created_in_another_order_blame_the_rank_that_did, .timeout = 120) {
  static mesh_run r;
  moe("DIST_DEBUG=DETAIL", "order", &r);
  mesh_expect_verdict(&r, 10, "desync", 5);
  cr_expect(mesh_says(&r, "at creation: ranks disagree on the member list") &&
                mesh_says(&r, "rank 5:") && mesh_says(&r, "<- member list differs"),
            "%s", r.err);
  cr_expect(strstr(r.json, "\"agrees\":true"), "distview's own analysis disagrees: %s", r.json);
}

/* Whether the report marks rank's line ("  rank R: ...  <- F differs"). */
static bool marks_rank(const mesh_run *r, int rank, const char *field) {
  char head[32], mark[64];
  snprintf(head, sizeof head, "\n  rank %d:", rank);
  snprintf(mark, sizeof mark, "<- %s differs", field);
  for (const char *p = r->report ? strstr(r->report, head) : NULL; p; p = strstr(p + 1, head)) {
    const char *end = strchr(p + 1, '\n');
    const char *m = strstr(p, mark);
    if (m && (!end || m < end))
      return true;
  }
  return false;
}

/* Rank 3 swaps the order: its group 1 is {0,4}, where every other rank
 * passes the ep group {0,1,2,3}; it posts that view as no member of it,
 * and ranks 0-2 wait there for it. Its group 4 is {3,7}, rank 5's {1,5},
 * and rank 1, which would make rank 5's the majority, is blocked in group
 * 1, which rank 3 never joins: that tie is broken by rank 7, which wrote
 * {3,7} as its group 6 (order.c). Whichever of the two is seen first,
 * rank 3 is named, not rank 5. */
Test(examples_moe, groups_created_in_another_order_break_a_tie_by_the_other_ids,
     .timeout = 120) {
  static mesh_run r;
  job_run("moe_train", "DIST_DEBUG=DETAIL", "order", 3, &r);
  mesh_expect_verdict(&r, 10, "desync", 3);
  cr_expect(marks_rank(&r, 3, "member list") &&
                (mesh_says(&r, "group 1 \"dp\" of ranks 0,4  <- member list differs") ||
                 mesh_says(&r, "group 4 \"dp\" of ranks 3,7  <- member list differs")),
            "%s", r.err);
  cr_expect(strstr(r.json, "\"agrees\":true"), "distview's own analysis disagrees: %s", r.json);
}

/* The same at DIST_DEBUG=OFF, where nothing compares the creations: a
 * hang in them, whose waits end at rank 5 (its #2 on the default group
 * is another group than ranks 4, 6 and 7 create as theirs), not at a
 * rank blocked in an earlier creation waiting for it (rank 4). */
Test(examples_moe, groups_created_in_another_order_at_OFF_blame_the_rank_that_did,
     .timeout = 120) {
  static mesh_run r;
  moe("DIST_DEBUG=OFF", "order", &r);
  mesh_expect_verdict(&r, 11, "hang", 5);
  cr_expect(mesh_says(&r, "the waits end at rank 5, which made its group creations in another "
                          "order: its dist_new_group #2 on group 0 creates group 2 (2 ranks: "
                          "1,5)"),
            "%s", r.err);
  cr_expect(strstr(r.json, "\"site\":\"main (moe_train.c:") && strstr(r.json, "\"op\":\"\""),
            "distview's verdict is not rank 5's creation: %s", r.json);
}

Test(examples_moe, uneven_splits_at_OFF_blame_the_sender, .timeout = 120) {
  static mesh_run r;
  moe("DIST_DEBUG=OFF", "splits", &r);
  mesh_expect_verdict(&r, 10, "desync", 5);
}

/* The checking layer sees rank 5 send 9 rows to its expert group's first
 * rank, which expects 8: of that pair, the sender's size is the odd one
 * (every other size is 8), so rank 5 alone is named, not the receiver. */
Test(examples_moe, uneven_splits_at_DETAIL_blame_the_sender_alone, .timeout = 120) {
  static mesh_run r;
  moe("DIST_DEBUG=DETAIL", "splits", &r);
  mesh_expect_verdict(&r, 10, "desync", 5);
  cr_expect(mesh_says(&r, "ranks disagree on the split size") &&
                mesh_says(&r, "  rank 5 sends 9 rows to rank 4, which expects 8  <- split size "
                              "differs"),
            "%s", r.err);
}

/* Rank 5 sends its batched activations to rank 2 (r + 5), which does not
 * take them, while its partner rank 1 waits to receive from it: a deadlock
 * through dist_batch_isend_irecv, proven before the 6 s timeout, that
 * names rank 5 alone (its receive from rank 1 is done: the record cannot
 * say so, and the cycle through it is not the cause). */
Test(examples_moe, a_batch_sent_to_the_wrong_peer_is_proven_and_named, .timeout = 120) {
  static mesh_run r;
  moe("DIST_DEBUG=DETAIL", "batchpeer", &r);
  mesh_expect_verdict(&r, 11, "hang", 5);
  cr_expect(mesh_says(&r, "it sends to rank 2, which does not take from it, while rank 1 "
                          "waits to receive from it (does it send to the wrong peer?)"),
            "%s", r.err);
  cr_expect(!mesh_says(&r, "waited 6.0 s of its 6.0 s timeout"), "not proven: %s", r.report);
}

/* Rank 5 leaves its receive out of its batch: the batch of sends alone
 * ends (rank 1 takes the send) and rank 5 goes on to its gradients, while
 * rank 1's send to it is never taken. Rank 1's record says the send is its
 * 3rd to rank 5, rank 5's that it issued 2 receives from rank 1: rank 5 is
 * named, not rank 1 (blocked in the batch) nor the ranks in the dp
 * all_reduce waiting for it. */
Test(examples_moe, a_receive_left_out_of_a_batch_names_the_rank_that_left_it_out,
     .timeout = 120) {
  static mesh_run r;
  moe("DIST_DEBUG=OFF", "batchomit", &r);
  mesh_expect_verdict(&r, 11, "hang", 5);
  cr_expect(mesh_says(&r, "rank 1 waits in group 0 (default) BATCH_P2P #3") &&
                mesh_says(&r, "for the receive that matches its send #3 to rank 5, and rank 5 "
                              "issued only 2 receives from rank 1 there before it went on (did "
                              "it leave the receive out of its batch, or skip the call?)"),
            "%s", r.err);
}

Test(examples_moe, a_receive_receive_deadlock_names_both_ends, .timeout = 120) {
  static mesh_run r;
  moe("DIST_DEBUG=DETAIL", "recvrecv", &r);
  cr_expect_eq(r.status, 11, "%s", r.err);
  cr_expect_eq(r.diag_status, 11, "%s", r.json);
  cr_expect(strstr(r.json, "\"kind\":\"hang\"") && strstr(r.json, "\"culprits\":[1,5]"), "%s",
            r.json);
}
