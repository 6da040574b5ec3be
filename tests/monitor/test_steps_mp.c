/* ctest: labels=multiproc,verdicts timeout=300 cost=30 */
/* test_steps_mp.c - a pipeline whose micro-batches travel with their own
 * tags (build/bin/steps_testprog, prog_steps.c, 4 ranks under distrun),
 * rank 1 planted in step 1. Its blocked call is on a path it never took:
 * it forwards micro-batch 1 with micro-batch 2's tag (a tag the pair used
 * at every step, so the tag alone is not new), or goes to its backward
 * after 2 micro-batches, not 3, where rank 2 still waits for the third.
 * Either way both ranks wait on each other from lines they always called;
 * the step that leads to rank 1's call is new to it, rank 2's is not
 * (mon_record.h's novel). The verdict names rank 1 alone, at DIST_DEBUG
 * DETAIL and OFF. So it does when rank 1 skips its async all_reduce on its
 * "dp" group at OFF: its partner's calls pair with its next ones until
 * the end, where rank 3 calls on alone, but the other dp group made as
 * many as rank 3 (distrun's trace reading, reader_counts.c). And so it
 * does when rank 1 reduce-scatters one layer of a loop over layers of
 * different sizes with another reduce op: the pair {1, 3} alone cannot
 * tell which of the two is wrong (each call differs from its last, and
 * the later rank was named), the other dp group made rank 3's call
 * (distrun_odd.c, reader_odd.c). A rank that skips a barrier made every
 * third step (build/bin/depart_testprog, prog_depart.c, 6 ranks as 3
 * two-stage pipelines) and waits in its next receive from a partner that
 * waits in the barrier: neither's step differs from its step before, but
 * the ranks that made the same calls as rank 3 went on to the barrier,
 * and those like rank 2 made its calls (reader_depart.c): rank 3 alone.
 * A rank that calls two overlapping groups in the other order for once
 * (build/bin/swap_testprog, prog_swap.c) waits in B from the line the
 * program calls A from: its partner in A, whose last call from that line
 * went to A, is not the one that called the wrong group; rank 2 is. A
 * ring whose rank 1 sends one round with another tag names rank 1. Two
 * pipelines (build/bin/twins_testprog, prog_twins.c) whose rank 5 sends
 * with another tag in the first step: the rank at its place in the other
 * pipeline went on otherwise, its partner's twin did not. */
#include "../examples/mesh_verdict.h"

static void run_mode(const char *debug, const char *mode, mesh_run *r) {
  const char *job[] = {dist_test_bin("steps_testprog"), mode, NULL};
  job_run_argv(debug, "DIST_TIMEOUT=6", NULL, "4", job, r);
}

static void expect_rank1(const mesh_run *r, const char *op) {
  mesh_expect_verdict(r, 11, "hang", 1);
  cr_expect(mesh_says(r, "its earlier steps never went from the call before it"),
            "the report does not say why rank 1:\n%s", r->report);
  char want[64];
  snprintf(want, sizeof want, "\"op\":\"%s\"", op);
  cr_expect(strstr(r->json, want), "distview's verdict is not rank 1's %s: %s", op, r->json);
}

Test(monitor_steps, a_micro_batch_sent_with_another_ones_tag_names_the_sender, .timeout = 150) {
  static mesh_run r;
  run_mode("DIST_DEBUG=DETAIL", "tag", &r);
  expect_rank1(&r, "SEND");
  cr_expect(mesh_says(&r, "it sends to rank 2 with tag 2)"), "%s", r.report);
}

Test(monitor_steps, a_skipped_micro_batch_names_the_stage_that_skipped_it_at_OFF,
     .timeout = 150) {
  static mesh_run r;
  run_mode("DIST_DEBUG=OFF", "skipmb", &r);
  expect_rank1(&r, "RECV");
  cr_expect(mesh_says(&r, "it receives from rank 2 with tag 12)"), "%s", r.report);
}

/* At DETAIL the checking layer says rank 1 left the group; distrun, whose
 * first failure is rank 3 calling on alone, names rank 1 by the counts. */
Test(monitor_steps, a_skipped_async_all_reduce_names_the_rank_that_skipped_it_at_DETAIL,
     .timeout = 150) {
  static mesh_run r;
  run_mode("DIST_DEBUG=DETAIL", "dpskip", &r);
  mesh_expect_verdict(&r, 10, "desync", 1);
  cr_expect(mesh_says(&r, "rank 1 made 2 ALL_REDUCE calls on group ") &&
                mesh_says(&r, "rank 1 skipped one, and rank 3 called on without it"),
            "%s", r.report);
}

Test(monitor_steps, a_skipped_async_all_reduce_names_the_rank_that_skipped_it_at_OFF,
     .timeout = 150) {
  static mesh_run r;
  run_mode("DIST_DEBUG=OFF", "dpskip", &r);
  mesh_expect_verdict(&r, 10, "desync", 1);
  cr_expect(mesh_says(&r, "rank 1 made 2 ALL_REDUCE calls on group ") &&
                mesh_says(&r, "(dp) and rank 3 3, as 3 ranks made on the groups described as "
                              "dp: rank 1 skipped one, and rank 3 called on without it"),
            "%s", r.report);
}

/* moved: the finder marked rank 3 and distrun moved the mark (DETAIL: the
 * checking layer's rule of thumb); else the finder marked rank 1 itself
 * (OFF: MAX is a key of that kind rank 1's kept history never had). */
static void expect_layer_op(const mesh_run *r, bool moved, const char *kin) {
  mesh_expect_verdict(r, 10, "desync", 1);
  cr_expect(mesh_says(r, "  rank 1 (group rank 0): REDUCE_SCATTER_TENSOR float32[") &&
                mesh_says(r, " op=MAX (") && mesh_says(r, " bytes)  <- reduce op differs"),
            "%s", r->report);
  cr_expect(!mesh_says(r, "op=SUM (128 bytes)  <- ") && !mesh_says(r, "op=SUM (256 bytes)  <- "),
            "rank 3 marked:\n%s", r->report);
  char why[256];
  snprintf(why, sizeof why, "the 2 ranks of the other groups %s made rank 3's call at this "
           "collective, not rank 1's: rank 1 is the one that differs", kin);
  if (moved)
    cr_expect(mesh_says(r, why), "%s", r->report);
  cr_expect(strstr(r->json, "\"op\":\"REDUCE_SCATTER_TENSOR\""), "%s", r->json);
  cr_expect(strstr(r->json, "prog_steps.c:"), "not rank 1's line: %s", r->json);
  /* distview's own reading of the rows settles the pair's tie the same way */
  cr_expect(strstr(r->json, "\"agrees\":true"), "%s", r->json);
}

Test(monitor_steps, a_layer_reduced_with_another_op_names_the_rank_the_other_dp_group_disowns,
     .timeout = 150) {
  static mesh_run r;
  run_mode("DIST_DEBUG=DETAIL", "layers", &r);
  expect_layer_op(&r, true, "described as dp");
}

/* The same with groups made without a description: the groups of its
 * kind are those of its shape (2 ranks, 2 apart), not every group the
 * trace describes as '' (the world's pairs of any shape). */
Test(monitor_steps, a_layer_reduced_with_another_op_on_unnamed_groups_names_its_rank,
     .timeout = 150) {
  static mesh_run r;
  run_mode("DIST_DEBUG=DETAIL", "layersnd", &r);
  expect_layer_op(&r, true, "of its shape (as many ranks, as far apart)");
}

Test(monitor_steps, a_layer_reduced_with_another_op_names_its_rank_at_OFF, .timeout = 150) {
  static mesh_run r;
  run_mode("DIST_DEBUG=OFF", "layers", &r);
  expect_layer_op(&r, false, "described as dp");
}

static void expect_departed(const char *debug) {
  static mesh_run r;
  const char *job[] = {dist_test_bin("depart_testprog"), "skip", NULL};
  job_run_argv(debug, "DIST_TIMEOUT=6", NULL, "6", job, &r);
  mesh_expect_verdict(&r, 11, "hang", 3);
  cr_expect(mesh_says(&r, "of ranks 2 and 3, rank 3 went another way after the 13 calls it "
                          "made as 2 ranks did, which all went on alike (it is in RECV #9") &&
                mesh_says(&r, "while rank 2 made the calls the ranks like it made: rank 3 is "
                              "where it went wrong"),
            "%s", r.report);
  cr_expect(strstr(r.json, "\"op\":\"RECV\"") && strstr(r.json, "prog_depart.c:"), "%s",
            r.json);
}

Test(monitor_steps, a_skipped_barrier_of_every_third_step_names_the_rank_that_skipped_it,
     .timeout = 150) {
  expect_departed("DIST_DEBUG=OFF");
}

Test(monitor_steps, a_skipped_barrier_is_named_at_DETAIL_too, .timeout = 150) {
  expect_departed("DIST_DEBUG=DETAIL");
}

static void expect_swapped(const char *debug) {
  static mesh_run r;
  const char *job[] = {dist_test_bin("swap_testprog"), "swap", NULL};
  job_run_argv(debug, "DIST_TIMEOUT=6", NULL, "4", job, &r);
  mesh_expect_verdict(&r, 11, "hang", 2);
  cr_expect(mesh_says(&r, "the waits start at rank 2, which is blocked in group ") &&
                mesh_says(&r, "(B) ALL_REDUCE #3, called from main (prog_swap.c:") &&
                mesh_says(&r, "while its call from there went to group ") &&
                mesh_says(&r, "where it waits (did it call it on the wrong group?)"),
            "%s", r.report);
}

Test(monitor_steps, a_rank_that_swaps_two_groups_calls_is_named_not_its_partner_at_OFF,
     .timeout = 150) {
  expect_swapped("DIST_DEBUG=OFF");
}

Test(monitor_steps, a_rank_that_swaps_two_groups_calls_is_named_at_DETAIL, .timeout = 150) {
  expect_swapped("DIST_DEBUG=DETAIL");
}

/* Ring attention: rank 1 sends one round of its ring with tag 1. Its
 * batch is a step it never took (a batch's step counts each half's tag),
 * rank 2's receive is where it always was; the ring's longer loops pass
 * beside the 2-rank cycle, which names rank 1 alone. */
Test(monitor_steps, a_ring_round_sent_with_another_tag_names_the_sender_not_its_receiver,
     .timeout = 150) {
  static mesh_run r;
  run_mode("DIST_DEBUG=DETAIL", "ringtag", &r);
  expect_rank1(&r, "BATCH_P2P");
  cr_expect(mesh_says(&r, "its batch sends to rank 2 with tag 1 and receives from rank 0 "
                          "with tag 0)"),
            "%s", r.report);
}

/* Two pipelines of 4 stages; in the first step rank 5 (stage 1) sends a
 * micro-batch with the next one's tag, from a line of its own: ranks 5
 * and 6 wait on each other, both tags new on the pair, and no rank has
 * steps to compare yet. Each one's twin (the rank at its place in the
 * other "pp" group) tells: rank 1 went on to its usual send where rank 5
 * went to its own, while rank 6 made its twin's calls. */
Test(monitor_steps, a_tag_changed_in_the_first_step_names_the_sender_by_its_twin,
     .timeout = 150) {
  static mesh_run r;
  const char *job[] = {dist_test_bin("twins_testprog"), "tag", NULL};
  job_run_argv("DIST_DEBUG=DETAIL", "DIST_TIMEOUT=6", NULL, "8", job, &r);
  mesh_expect_verdict(&r, 11, "hang", 5);
  cr_expect(mesh_says(&r, "rank 5 went another way after the ") &&
                mesh_says(&r, " calls it made as 1 other rank did, which went on otherwise (it "
                              "is in SEND #"),
            "%s", r.report);
  cr_expect(strstr(r.json, "\"op\":\"SEND\"") && strstr(r.json, "prog_twins.c:"), "%s",
            r.json);
}

Test(monitor_steps, the_pipeline_without_a_bug_succeeds, .timeout = 150) {
  static mesh_run r;
  run_mode("DIST_DEBUG=DETAIL", "none", &r);
  cr_assert_eq(r.status, 0, "%s", r.err);
  cr_expect(strstr(r.json, "\"kind\":\"success\""), "%s", r.json);
}
