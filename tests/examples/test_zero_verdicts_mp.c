/* ctest: labels=multiproc,verdicts timeout=300 cost=45 */
/* One verdict on a third realistic job: zero_train on 8 ranks (sharded
 * data parallel: async parameter all_gather and gradient reduce_scatter on
 * groups made by new_subgroups, async all_reduce on replicate groups, a
 * token ring of isend/irecv, a gather to rank 0, a blob all_gather, a
 * monitored barrier). The bug classes are the ones a planted job may
 * hold: a field of one call (count, reduce op, root), an extra call, a
 * tag or a size that never matches, an abort, an exit with an error, a
 * rank asleep, a rank that leaves before the last barrier. Each blames rank 6 in distrun's status,
 * its report and distview's --json alike. */
#include "mesh_verdict.h"

static void zero(const char *bug, mesh_run *r) {
  job_run("zero_train", "DIST_DEBUG=DETAIL", bug, 6, r);
}

/* The desync names the group by its description, the field and the line. */
static void expect_field(const mesh_run *r, const char *group, const char *op,
                         const char *field, const char *line) {
  char g[64], o[64], f[64];
  snprintf(g, sizeof g, "\"group_name\":\"%s\"", group);
  snprintf(o, sizeof o, "\"op\":\"%s\"", op);
  snprintf(f, sizeof f, "\"fields\":\"%s\"", field);
  cr_expect(strstr(r->json, g) && strstr(r->json, o) && strstr(r->json, f) &&
                strstr(r->json, line),
            "want %s %s %s %s: %s", group, op, field, line, r->json);
}

Test(examples_zero, a_count_changed_in_the_shard_reduce_scatter, .timeout = 120) {
  static mesh_run r;
  zero("count", &r);
  mesh_expect_verdict(&r, 10, "desync", 6);
  expect_field(&r, "shard", "REDUCE_SCATTER_TENSOR", "count", "zero_train.c:");
}

Test(examples_zero, max_instead_of_sum_in_an_async_all_reduce, .timeout = 120) {
  static mesh_run r;
  zero("redop", &r);
  mesh_expect_verdict(&r, 10, "desync", 6);
  expect_field(&r, "replicate", "ALL_REDUCE", "reduce op", "zero_train.c:");
}

/* At OFF nothing keeps call history but the shared-memory engine's last
 * descriptors: rank 2, the lower rank of its 2-rank replicate pair, changed
 * SUM to MAX since its last all_reduce there, rank 6 did not, so the tie
 * goes against rank 2 (it went to the lower rank's partner before). */
Test(examples_zero, max_instead_of_sum_at_OFF_names_the_rank_that_changed_it, .timeout = 120) {
  static mesh_run r;
  job_run("zero_train", "DIST_DEBUG=OFF", "redop", 2, &r);
  mesh_expect_verdict(&r, 10, "desync", 2);
  cr_expect(mesh_says(&r, "op=MAX (256 bytes)  <- reduce op differs"), "%s", r.err);
  cr_expect(strstr(r.json, "\"agrees\":true"), "distview's own analysis disagrees: %s", r.json);
}

/* The line of rank 6's destroy of its replicate group (leaverep). */
static int leaverep_line(void) {
  return example_line("zero_train.c", "planted(j, step, \"leaverep\")") + 1;
}

/* At OFF over shared memory nothing compares calls and nothing hears the
 * destroy: rank 6 destroys its replicate group and goes on to the gather,
 * while its partner waits in the group's next all_reduce. Its record's "d"
 * line says it left the group after fewer collectives: the collective
 * counts parted, a desync naming rank 6 at its destroy call, as over TCP,
 * not a hang (every other rank blocked). */
Test(examples_zero, a_rank_that_destroys_its_group_and_goes_on_at_OFF_is_named,
     .timeout = 120) {
  static mesh_run r;
  job_run("zero_train", "DIST_DEBUG=OFF", "leaverep", 6, &r);
  mesh_expect_verdict(&r, 10, "desync", 6);
  cr_expect(mesh_says(&r, "rank 6 left the group (destroyed it or exited) before this "
                          "collective") &&
                mesh_says(&r, ": left after ") && mesh_says(&r, "; it destroyed the group, "),
            "%s", r.err);
  char site[64];
  snprintf(site, sizeof site, "zero_train.c:%d)\"", leaverep_line());
  expect_field(&r, "replicate", "ALL_REDUCE", "collective count", site);
  mesh_expect_agreement(&r);
}

Test(examples_zero, a_gather_to_another_root, .timeout = 120) {
  static mesh_run r;
  zero("root", &r);
  mesh_expect_verdict(&r, 10, "desync", 6);
  expect_field(&r, "default", "GATHER", "root", "zero_train.c:");
}

/* At OFF over TCP, rank 0 gathers to another root: its data comes to a
 * rank that receives nothing, and the ranks that take rank 0 for the root
 * send to a rank that receives nothing either. The message no receive
 * takes is compared with the running gather: a desync of the root naming
 * rank 0 (the side whose root changed since the group's last gather), not
 * a hang at the timeout that names nobody. */
Test(examples_zero, a_gather_to_another_root_at_OFF_over_tcp_is_a_desync_of_that_rank,
     .timeout = 120) {
  static mesh_run r;
  job_run_env("zero_train", "DIST_DEBUG=OFF", "DIST_TRANSPORT=tcp", "root", 0, -1, &r);
  mesh_expect_verdict(&r, 10, "desync", 0);
  cr_expect(strstr(r.json, "\"op\":\"GATHER\"") && strstr(r.json, "\"fields\":\"root\""),
            "%s", r.json);
  cr_expect(mesh_says(&r, "ranks disagree on the root") && mesh_says(&r, "<- root differs"),
            "%s", r.err);
}

/* At OFF over TCP, rank 0's extra barrier meets its shard partners'
 * reduce_scatter, pairwise: the side whose operation the group never
 * completed before is named (the later rank of the pair used to be). */
Test(examples_zero, an_extra_barrier_at_OFF_over_tcp_names_the_rank_that_called_it,
     .timeout = 120) {
  static mesh_run r;
  job_run_env("zero_train", "DIST_DEBUG=OFF", "DIST_TRANSPORT=tcp", "extra", 0, -1, &r);
  mesh_expect_verdict(&r, 10, "desync", 0);
  cr_expect(strstr(r.json, "\"group_name\":\"shard\"") && strstr(r.json, "\"op\":\"BARRIER\""),
            "%s", r.json);
}

Test(examples_zero, an_extra_barrier_is_the_operation_that_differs, .timeout = 120) {
  static mesh_run r;
  zero("extra", &r);
  mesh_expect_verdict(&r, 10, "desync", 6);
  cr_expect(strstr(r.json, "\"fields\":\"operation\"") && strstr(r.json, "\"group_name\":\"shard\""),
            "%s", r.json);
  cr_expect(mesh_says(&r, "BARRIER"), "%s", r.err);
}

/* Rank 5's isend stays pending while its later irecv completes: it is in
 * that send (not "busy outside the library"), and the pair is reported
 * with both tags; the verdict names rank 6 alone, the side that set a tag
 * where its peer kept the default. */
Test(examples_zero, a_receive_with_another_tag_names_the_side_that_set_it, .timeout = 120) {
  static mesh_run r;
  zero("tag", &r);
  cr_expect_eq(r.status, 11, "%s", r.err);
  cr_expect_eq(r.diag_status, 11, "%s", r.json);
  cr_expect(strstr(r.json, "\"kind\":\"hang\"") && strstr(r.json, "\"culprits\":[6]") &&
                strstr(r.json, "\"op\":\"RECV\""),
            "%s", r.json);
  cr_expect(mesh_says(&r, "RECV #6 from rank 5 with tag 1") &&
                mesh_says(&r, "SEND #5 to rank 6 with tag 0") &&
                mesh_says(&r, "their tags differ"),
            "%s", r.report ? r.report : r.err);
  cr_expect(!mesh_says(&r, "busy outside the library"), "%s", r.report ? r.report : r.err);
}

Test(examples_zero, an_abort_is_a_crash, .timeout = 120) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  /* As the mesh crash case: under the sanitizers the rank's fatal signal is
   * theirs to report (here the crash handler itself faults under ASan's
   * instrumentation, so the rank dies of SIGSEGV, not SIGABRT). */
  cr_skip_test("a fatal signal under a sanitizer is the sanitizer's to report");
#endif
  static mesh_run r;
  zero("abort", &r);
  mesh_expect_verdict(&r, 12, "crash", 6);
  cr_expect(mesh_says(&r, "killed by signal 6 (SIGABRT)"), "%s", r.err);
}

/* Its exit outranks the "left the group" desyncs the others then report. */
Test(examples_zero, an_exit_with_an_error_outranks_the_desync_it_caused, .timeout = 120) {
  static mesh_run r;
  zero("exit1", &r);
  mesh_expect_verdict(&r, 12, "died", 6);
  cr_expect(mesh_says(&r, "rank 6 (pid ") && mesh_says(&r, "exited with code 1"), "%s", r.err);
  /* distview's own analysis reads rank 6's end from its trace, not the
   * desync its peers reported */
  cr_expect(strstr(r.json, "\"agrees\":true"), "distview's own analysis disagrees: %s", r.json);
}

/* It destroyed its group and returned 0; the others wait in the barrier
 * for it: the hang's waits end at it, and its early end is the verdict. */
Test(examples_zero, a_rank_that_skips_the_monitored_barrier_and_ends, .timeout = 120) {
  static mesh_run r;
  zero("monbar", &r);
  mesh_expect_verdict(&r, 12, "early_exit", 6);
  cr_expect(mesh_says(&r, "ended first, with exit code 0, while other ranks still needed it") &&
                mesh_says(&r, "the waits end at rank 6, which exited with code 0"),
            "%s", r.err);
  /* the rows show a hang at the barrier; the monitors saw rank 6 exit 0:
   * distview's own analysis says an early end too */
  cr_expect(strstr(r.json, "\"agrees\":true"), "distview's own analysis disagrees: %s", r.json);
}

/* The receive's buffer is larger than the send: the transport finds it
 * under the checking layer, and its marked report is the cause. */
Test(examples_zero, a_receive_of_another_size_is_a_desync_of_the_pair, .timeout = 120) {
  static mesh_run r;
  zero("size", &r);
  mesh_expect_verdict(&r, 10, "desync", 6);
  cr_expect(strstr(r.json, "\"fields\":\"size\""), "%s", r.json);
  cr_expect(mesh_says(&r, "rank 6: RECV #6 int32[2] from rank 5 (8 bytes)  <- size differs"),
            "%s", r.err);
}

/* Asleep outside the library: the hang's waits end at it. */
Test(examples_zero, a_rank_asleep_outside_the_library_is_the_hang, .timeout = 120) {
  static mesh_run r;
  zero("sleep", &r);
  mesh_expect_verdict(&r, 11, "hang", 6);
  cr_expect(mesh_says(&r, "the waits end at rank 6, which is in no operation (busy outside "
                          "the library"),
            "%s", r.err);
}

/* The line of examples/zero_train.c that holds marker. */
static int zero_line(const char *marker) { return example_line("zero_train.c", marker); }

/* Rank 6 gathers its parameters on the other shard group: a non-member's
 * call does nothing (as in torch), so it reaches the reduce_scatter where
 * its shard partners all_gather. The verdict names the call that went to
 * the wrong group, its operation and its line, not the reduce_scatter
 * after it (which is right). */
Test(examples_zero, an_all_gather_on_a_group_it_is_not_in_is_named_at_that_call,
     .timeout = 120) {
  static mesh_run r;
  zero("othershard", &r);
  mesh_expect_verdict(&r, 10, "desync", 6);
  char site[96], said[160];
  snprintf(site, sizeof site, "\"site\":\"zero_train.c:%d in ",
           zero_line("TRY(\"all_gather params\""));
  expect_field(&r, "shard", "ALL_GATHER_INTO_TENSOR", "operation", site);
  snprintf(said, sizeof said, "  rank 6 called ALL_GATHER_INTO_TENSOR on a group it is not a "
                              "member of just before (it did nothing, as in torch), called from "
                              "zero_train.c:%d in ", zero_line("TRY(\"all_gather params\""));
  cr_expect(mesh_says(&r, "desync in group 2 (shard, 4 ranks) at ALL_GATHER_INTO_TENSOR #") &&
                mesh_says(&r, said),
            "%s", r.err);
}

/* Rank 6 destroys its replicate group right after starting its async
 * all_reduce, never waiting for it: the destroy fails that operation on
 * rank 6 and on rank 2, which exits with an error. Rank 6's destroy is the
 * cause (as a dist_abort_group would be), not rank 2's exit. When rank 2
 * was already in the all_reduce, it can complete before the destroy (a
 * loaded machine): then rank 6 merely left the group, and rank 2 waits for
 * it at the next one: the collective counts parted, a desync that names
 * rank 6 in the replicate group. */
Test(examples_zero, a_group_destroyed_with_its_all_reduce_pending_blames_the_destroyer,
     .timeout = 120) {
  for (int i = 0; i < DIST_TEST_REPEAT(2); i++) {
    static mesh_run r;
    zero("droprep", &r);
    if (r.status == 10) {
      mesh_expect_verdict(&r, 10, "desync", 6);
      cr_expect(strstr(r.err, "in group 5 (replicate, 2 ranks) at ALL_REDUCE #4: rank 6 left the "
                              "group") && mesh_says(&r, "  rank 6 (host "),
                "run %d: %s", i + 1, r.err);
      continue;
    }
    mesh_expect_verdict(&r, 12, "died", 6);
    mesh_expect_agreement(&r);
    cr_expect(mesh_says(&r, "rank 6 destroyed group 5 (replicate) with operations pending") &&
                  mesh_says(&r, "rank 6 destroyed group 5 (replicate) with ALL_REDUCE #3 pending "
                                "(never waited)"),
              "run %d: %s", i + 1, r.err);
    cr_expect(strstr(r.json, "\"group_name\":\"replicate\"") &&
                  strstr(r.json, "\"op\":\"ALL_REDUCE\"") && strstr(r.json, "\"seq\":3"),
              "run %d: %s", i + 1, r.json);
  }
}

/* Rank 6 waits for its replicate all_reduce, then destroys the group and
 * skips it from then on; over TCP rank 2 hears it left at once: a desync
 * (the collective counts part) naming rank 6, at the all_reduce it never
 * called, and at its own call that left the group, the destroy (its
 * record's "d" line), not at the line where rank 2 waits. */
Test(examples_zero, a_rank_that_left_a_group_is_named_at_its_destroy_call, .timeout = 120) {
  static mesh_run r;
  job_run_env("zero_train", "DIST_DEBUG=DETAIL", "DIST_TRANSPORT=tcp", "leaverep", 6, -1, &r);
  mesh_expect_verdict(&r, 10, "desync", 6);
  char site[96];
  snprintf(site, sizeof site, "zero_train.c:%d)\"", leaverep_line());
  expect_field(&r, "replicate", "ALL_REDUCE", "collective count", site);
  cr_expect(strstr(r.err, "; rank 6 destroyed group 5 (replicate), called from "), "%s", r.err);
  cr_expect(mesh_says(&r, "rank 6 left the group (destroyed it or exited) before this "
                          "collective"),
            "%s", r.err);
}

/* The same at OFF over TCP, on the lower rank of the pair: nothing
 * compares calls, but rank 4's engine hears rank 0's goodbye (a clean
 * departure, no failure of its own) while its all_reduce still needs
 * rank 0: the collective counts parted, a desync naming rank 0 (it once
 * named rank 4, whose exit on the lost peer came first), and distview's
 * own analysis agrees (rank 4's exit in a later report is not rank 0's). */
Test(examples_zero, a_rank_that_left_a_group_at_OFF_over_tcp_is_named_not_its_partner,
     .timeout = 120) {
  static mesh_run r;
  job_run_env("zero_train", "DIST_DEBUG=OFF", "DIST_TRANSPORT=tcp", "leaverep", 0, -1, &r);
  mesh_expect_verdict(&r, 10, "desync", 0);
  expect_field(&r, "replicate", "ALL_REDUCE", "collective count", "\"culprits\":[0]");
  cr_expect(mesh_says(&r, "rank 0 left the group (destroyed it or exited) before this "
                          "collective"),
            "%s", r.err);
  mesh_expect_agreement(&r);
}

/* Rank 6 ends its loop a step early, skips the monitored barrier and
 * returns 0. Its last operation, from the merged trace (it left before
 * its monitor published it), is named with its call site, in distrun's
 * line (as rank 6's: it follows the clause of the peer that failed next)
 * and in distview's fields, not with an empty site. */
Test(examples_zero, a_rank_that_ends_its_loop_early_is_named_with_its_last_call_site,
     .timeout = 120) {
  static mesh_run r;
  zero("quit", &r);
  mesh_expect_verdict(&r, 12, "early_exit", 6);
  char site[96];
  snprintf(site, sizeof site, "zero_train.c:%d)\"", zero_line("TRY(\"all_gather status\""));
  cr_expect(strstr(r.json, "\"op\":\"ALL_GATHER_BYTES\"") && strstr(r.json, "\"seq\":6") &&
                strstr(r.json, site),
            "want rank 6's last call, ALL_GATHER_BYTES #6 at %s: %s", site, r.json);
  cr_expect(mesh_says(&r, "ended first, with exit code 0, while other ranks still needed it") &&
                (mesh_says(&r, "rank 6's last operation in the trace: group 0 (default) "
                               "ALL_GATHER_BYTES #6 (completed), called from ") ||
                 mesh_says(&r, "as of its last record it had last completed group 0")),
            "%s", r.err);
  cr_expect(strstr(r.json, "\"agrees\":true"), "distview's own analysis disagrees: %s", r.json);
}

/* At OFF the transport finds rank 6's short parameter all_gather while a
 * second one (the next layer's prefetch) is in flight: its monitor's record
 * is at that later one, so the line comes from the merged trace (the
 * operation rank 6 is in), not "". */
Test(examples_zero, a_count_changed_in_a_prefetched_all_gather_at_OFF_has_its_line,
     .timeout = 120) {
  static mesh_run r;
  job_run("zero_train", "DIST_DEBUG=OFF", "pcount", 6, &r);
  mesh_expect_verdict(&r, 10, "desync", 6);
  char site[96];
  snprintf(site, sizeof site, "zero_train.c:%d)\"",
           zero_line("TRY(\"all_gather params\""));
  cr_expect(strstr(r.json, "\"op\":\"ALL_GATHER_INTO_TENSOR\"") &&
                strstr(r.json, "\"group_name\":\"shard\"") && strstr(r.json, site),
            "want %s: %s", site, r.json);
}
