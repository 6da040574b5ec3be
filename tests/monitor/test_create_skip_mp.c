/* ctest: labels=multiproc,verdicts timeout=600 cost=55 */
/* test_create_skip_mp.c - a rank that skips a group creation every other
 * rank makes (build/bin/create_skip_testprog, prog_create_skip.c, 4 ranks
 * under distrun, rank 2 the one that skips): the ranks that are members of
 * the new group wait in the creation, rank 2 goes on to a collective the
 * creators never reach. The verdict names rank 2, the one that did not
 * make the call, not a creator blocked on it (mon_create.c): distrun's
 * report, its exit status and `distview diagnose --json` say so, whether
 * the skipped call is dist_split_group of the default group or of a
 * subgroup, or dist_new_group made by every rank or by its members alone
 * (and distview's own analysis agrees, from the monitor's diagnosis),
 * at DIST_DEBUG=DETAIL and OFF, also when the member left waiting in the
 * creation times out first. A rank that skips it and leaves is an
 * early exit naming it; a creation only one rank makes names that rank. A
 * rank that makes the call with a list that leaves itself out (it is no
 * member, and goes on) is a desync at that creation, at both levels. */
#include "../examples/mesh_verdict.h"

/* Runs mode at debug ("DIST_DEBUG=DETAIL"), DIST_TIMEOUT=6. */
static void run_mode(const char *debug, const char *mode, mesh_run *r) {
  const char *job[] = {dist_test_bin("create_skip_testprog"), mode, NULL};
  job_run_argv(debug, "DIST_TIMEOUT=6", NULL, "4", job, r);
}

/* A hang (exit 11) whose report says rank 2 skipped creating group gid
 * (members), made by call (scope text: " #1 on group 0") from site_fn,
 * that ranks made ("0-1,3") while rank 2 is blocked in its own
 * ALL_REDUCE #1 of group 0; distview's verdict names the same rank, group
 * and call site. */
static void expect_skip(const mesh_run *r, const char *members, const char *call,
                        const char *scope, const char *site_fn, const char *made,
                        const char *blocked_in) {
  mesh_expect_verdict(r, 11, "hang", 2);
  char want[512], site[128];
  snprintf(site, sizeof site, "%s (prog_create_skip.c:", site_fn);
  snprintf(want, sizeof want, "the waits end at rank 2, which did not create group ");
  cr_expect(mesh_says(r, want), "no line naming rank 2's skipped creation:\n%s", r->report);
  snprintf(want, sizeof want, "(%s) that rank ", members);
  cr_expect(mesh_says(r, want), "not the group's members %s:\n%s", members, r->report);
  snprintf(want, sizeof want, "(%s%s, called from %s", call, scope, site);
  cr_expect(mesh_says(r, want), "not the call %s%s from %s:\n%s", call, scope, site_fn,
            r->report);
  snprintf(want, sizeof want, "ranks %s made that call and rank 2 did not; it is blocked in %s",
           made, blocked_in);
  cr_expect(mesh_says(r, want), "not \"%s\":\n%s", want, r->report);
  cr_expect(mesh_says(r, "which rank 2 has not joined: it never made that call"),
            "the creator's line does not name rank 2:\n%s", r->report);
  snprintf(want, sizeof want, "\"site\":\"%s", site);
  cr_expect(strstr(r->json, want), "distview's verdict is not at %s: %s", site_fn, r->json);
  cr_expect(strstr(r->json, "\"op\":\"\""), "distview's verdict names an operation: %s",
            r->json);
  /* distview's own analysis takes the monitor's diagnosis: the rows show
   * no creation, so alone they would name the member blocked in it */
  cr_expect(strstr(r->json, "\"agrees\":true"), "distview's own analysis disagrees: %s",
            r->json);
}

Test(monitor_create_skip, split_of_the_default_group_names_the_rank_that_skipped_it,
     .timeout = 150) {
  static mesh_run r;
  run_mode("DIST_DEBUG=DETAIL", "split", &r);
  expect_skip(&r, "2 ranks: 2-3", "dist_split_group", " #1 on group 0", "split_world", "0-1,3",
              "group 0 (default) ALL_REDUCE #1");
}

Test(monitor_create_skip, split_skipped_names_the_rank_at_DIST_DEBUG_OFF_too, .timeout = 150) {
  static mesh_run r;
  run_mode("DIST_DEBUG=OFF", "split", &r);
  expect_skip(&r, "2 ranks: 2-3", "dist_split_group", " #1 on group 0", "split_world", "0-1,3",
              "group 0 (default) ALL_REDUCE #1");
}

/* The member left waiting in the creation times out first (its new
 * groups' timeout is 3 s, the others' all_reduce 6 s) and exits on the
 * error: its own monitor names rank 2 before it goes (read later, the
 * others' would find it gone and end the waits at it). */
Test(monitor_create_skip, a_creator_that_times_out_first_names_the_rank_that_skipped_it,
     .timeout = 150) {
  static mesh_run r;
  run_mode("DIST_DEBUG=DETAIL", "splitfirst", &r);
  expect_skip(&r, "2 ranks: 2-3", "dist_split_group", " #1 on group 0", "split_first", "0-1,3",
              "group 0 (default) ALL_REDUCE #1");
  cr_expect(mesh_says(&r, "hang reported by rank 3"), "not rank 3's own report:\n%s", r.report);
}

Test(monitor_create_skip, new_group_every_rank_makes_names_the_member_that_skipped_it,
     .timeout = 150) {
  static mesh_run r;
  run_mode("DIST_DEBUG=DETAIL", "new", &r);
  expect_skip(&r, "3 ranks: 1-3", "dist_new_group", " #1 on group 0", "new_world", "0-1,3",
              "group 0 (default) ALL_REDUCE #1");
}

Test(monitor_create_skip, new_group_of_its_members_alone_names_the_member_that_skipped_it,
     .timeout = 150) {
  static mesh_run r;
  run_mode("DIST_DEBUG=OFF", "local", &r);
  /* only the members call: no scope, the members compared */
  expect_skip(&r, "3 ranks: 1-3", "dist_new_group", "", "new_local", "1,3",
              "group 0 (default) ALL_REDUCE #1");
}

Test(monitor_create_skip, split_of_a_subgroup_names_the_rank_in_the_subgroups_collective,
     .timeout = 150) {
  static mesh_run r;
  run_mode("DIST_DEBUG=DETAIL", "subsplit", &r);
  expect_skip(&r, "2 ranks: 1-2", "dist_split_group", " #1 on group 1", "split_sub", "1,3",
              "group 1 (g1) ALL_REDUCE #1");
}

Test(monitor_create_skip, a_rank_that_skips_the_split_and_leaves_is_an_early_exit,
     .timeout = 150) {
  static mesh_run r;
  run_mode("DIST_DEBUG=DETAIL", "exit", &r);
  mesh_expect_verdict(&r, 12, "early_exit", 2);
  mesh_expect_agreement(&r);
  cr_expect(mesh_says(&r, "rank 2 (pid "), "distrun does not name rank 2:\n%s", r.report);
  cr_expect(mesh_says(&r, "ended first, with exit code 0, while other ranks still needed it"),
            "not an early exit:\n%s", r.report);
}

Test(monitor_create_skip, a_creation_only_one_rank_makes_names_that_rank, .timeout = 150) {
  static mesh_run r;
  run_mode("DIST_DEBUG=DETAIL", "extra", &r);
  /* most of the ranks never made the call: the creator's is the odd one */
  mesh_expect_verdict(&r, 11, "hang", 3);
  cr_expect(mesh_says(&r, "the waits end at rank 3, which is in no operation of a group: it is "
                          "blocked in dist_new_group"),
            "not rank 3 blocked creating the group:\n%s", r.report);
  cr_expect(!mesh_says(&r, "did not create group"), "a rank blamed for not making rank 3's "
            "call:\n%s", r.report);
  cr_expect(strstr(r.json, "\"site\":\"new_pair (prog_create_skip.c:"),
            "distview's verdict is not at new_pair: %s", r.json);
}

/* Rank 2 creates {1,3} (it is no member: it passes at once) before
 * {0,1,2}, the others the other way round: ranks 0 and 1 wait in their
 * first creation for rank 2, which waits in its second for them, with the
 * same members. No rank skipped a call: rank 2 made them in another
 * order, and the report says which number each side gave the group. */
Test(monitor_create_skip, groups_created_in_another_order_name_that_rank, .timeout = 150) {
  static mesh_run r;
  run_mode("DIST_DEBUG=OFF", "order", &r);
  mesh_expect_verdict(&r, 11, "hang", 2);
  cr_expect(mesh_says(&r, "the waits end at rank 2, which made its group creations in another "
                          "order: its dist_new_group #2 on group 0 creates group ") &&
                mesh_says(&r, "(3 ranks: 0-2), called from new_three (prog_create_skip.c:") &&
                mesh_says(&r, "where rank 0 creates that group (the same members) as its #1"),
            "not rank 2's order:\n%s", r.report);
  cr_expect(!mesh_says(&r, "did not create group"), "a rank blamed for a skipped call:\n%s",
            r.report);
}

/* Rank 2 makes a group of ranks 1-3 before its 2 x 2 device mesh, the
 * others after it: rank 0 waits in the mesh's first group {0, 2} for rank
 * 2, which waits in its first creation; ranks 1 and 3, members of rank 2's
 * group, went past that number (they made the mesh's groups), so rank 2's
 * creation is the odd one. The report names it at its own line, and the
 * mesh's groups at the program's mesh call, not at the library's (mesh.c). */
Test(monitor_create_skip, a_device_mesh_created_out_of_order_names_that_rank_at_the_mesh_call,
     .timeout = 150) {
  static mesh_run r;
  run_mode("DIST_DEBUG=OFF", "meshorder", &r);
  mesh_expect_verdict(&r, 11, "hang", 2);
  cr_expect(mesh_says(&r, "called from mesh_2x2 (prog_create_skip.c:") &&
                mesh_says(&r, "the waits end at rank 2, which made its group creations in "
                              "another order: its dist_new_group #1 on group 0 creates group "),
            "not rank 2's order at the program's lines:\n%s", r.report);
  cr_expect(!mesh_says(&r, "mesh.c:"), "a line of the library's:\n%s", r.report);
}

/* Rank 2 passes {1,3} where every other rank passes {2,3}: a list without
 * itself, so it is no member and goes on to the all_reduce while rank 3
 * waits for it in the creation. Its call was the job's creation #2 all
 * the same, with another member list: a desync at that creation (exit
 * 10), named at rank 2's own call, not a hang at rank 3, which waits in
 * it, nor at the all_reduce the others wait in. */
static void expect_left_itself_out(const mesh_run *r) {
  mesh_expect_verdict(r, 10, "desync", 2);
  cr_expect(mesh_says(r, "desync in group 2 ") && mesh_says(r, "at creation"),
            "not a desync at group 2's creation:\n%s", r->report);
  cr_expect(mesh_says(r, "rank 2 passed ranks 1,3, a list without itself"),
            "not rank 2's list:\n%s", r->report);
  cr_expect(strstr(r->json, "\"group\":2,") && strstr(r->json, "\"op\":\"\""),
            "distview's verdict is not group 2's creation: %s", r->json);
  cr_expect(strstr(r->json, "\"site\":\"") && strstr(r->json, "new_pairs") &&
                strstr(r->json, "prog_create_skip.c:"),
            "distview's verdict is not at rank 2's call in new_pairs: %s", r->json);
  mesh_expect_agreement(r);
}

Test(monitor_create_skip, a_rank_that_leaves_itself_out_of_its_list_is_a_desync_at_the_creation,
     .timeout = 150) {
  static mesh_run r;
  run_mode("DIST_DEBUG=DETAIL", "stride", &r);
  expect_left_itself_out(&r);
}

Test(monitor_create_skip, a_rank_that_leaves_itself_out_is_a_desync_at_DIST_DEBUG_OFF_too,
     .timeout = 150) {
  static mesh_run r;
  run_mode("DIST_DEBUG=OFF", "stride", &r);
  expect_left_itself_out(&r);
}

/* Rank 2 skips {0,1}, a group it is not in, so its {2,3} is its call #1
 * where rank 3's is #2: the two wait for each other in one group under two
 * numbers, a tie the ranks creating now cannot break. What the others
 * passed as #1 ({0,1}, in their records' lists) can: rank 2 made its
 * creations in another order, and skipped that call. Ranks 2 and 3 time
 * out in their creations first and exit: the one that says it must name
 * rank 2 before they go, not a rank "which exited". */
Test(monitor_create_skip, a_rank_that_skips_a_group_it_is_not_in_names_that_rank_at_OFF,
     .timeout = 150) {
  static mesh_run r;
  run_mode("DIST_DEBUG=OFF", "skipother", &r);
  mesh_expect_verdict(&r, 11, "hang", 2);
  cr_expect(mesh_says(&r, "the waits end at rank 2, which made its group creations in another "
                          "order: its dist_new_group #1 on group 0 creates group 1 (2 ranks: "
                          "2-3), called from new_pairs_then_all (prog_create_skip.c:"),
            "not rank 2's order at its line:\n%s", r.report);
  cr_expect(mesh_says(&r, "ranks 0-1,3 passed ranks 0-1 as their #1, a call rank 2 has not made "
                          "(it skipped it"), "not the call rank 2 skipped:\n%s", r.report);
  cr_expect(!mesh_says(&r, "which exited"), "a rank that exited is named:\n%s", r.report);
  cr_expect(strstr(r.json, "\"site\":\"new_pairs_then_all (prog_create_skip.c:"),
            "distview's verdict is not at new_pairs_then_all: %s", r.json);
}

/* With use_local_synchronization rank 2 passes {1,2} for its pair {2,3}:
 * it waits there for rank 1, which waits in {1,3} for rank 3, which waits
 * in {2,3} for rank 2; rank 0 waits in {0,2} for rank 2. Every rank is
 * blocked in a creation, so the waits go round: they end at rank 2, whose
 * group no other rank creates while ranks 0 and 3 wait for it in theirs,
 * named at its own creation and line (not rank 1, the member it waits
 * for, nor "in no operation"). */
Test(monitor_create_skip, a_local_group_with_a_list_of_its_own_names_that_rank, .timeout = 150) {
  static mesh_run r;
  run_mode("DIST_DEBUG=DETAIL", "localshift", &r);
  mesh_expect_verdict(&r, 11, "hang", 2);
  cr_expect(mesh_says(&r, "the waits end at rank 2, which is blocked in dist_new_group for ") &&
                mesh_says(&r, "(2 ranks: 1-2), called from new_local_pairs (prog_create_skip.c:") &&
                mesh_says(&r, "which no other member creates") &&
                mesh_says(&r, "ranks 0,3 wait for it in groups that list it"),
            "not rank 2's own creation:\n%s", r.report);
  cr_expect(!mesh_says(&r, "in no operation"), "a rank in no operation:\n%s", r.report);
  cr_expect(strstr(r.json, "\"site\":\"new_local_pairs (prog_create_skip.c:"),
            "distview's verdict is not at new_local_pairs: %s", r.json);
  mesh_expect_agreement(&r);
}
