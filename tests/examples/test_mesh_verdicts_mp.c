/* ctest: labels=multiproc,verdicts timeout=300 cost=75 */
/* One verdict on a realistic job (issue 20, acceptance 1): mesh_train on 8
 * ranks (dp x tp = 4 x 2, an async tp all_gather, pipeline send/recv, a
 * world broadcast) at DIST_DEBUG=DETAIL, one planted class at a time. For
 * each, distrun's exit status, its final report (rank, group by name,
 * operation, field, line) and `distview diagnose --json` (kind, exit code,
 * culprits) agree and are right. The hangs, repeated, are in
 * test_mesh_hangs_mp.c. */
#include "mesh_verdict.h"
#include "tmpdir.h"

/* The line of examples/mesh_train.c that holds marker. */
static int source_line(const char *marker) { return example_line("mesh_train.c", marker); }

/* The value of the verdict's "site" in distview's JSON (up to cap bytes). */
static void json_site(const char *json, char *out, size_t cap) {
  const char *at = strstr(json, "\"site\":\"");
  out[0] = '\0';
  if (!at)
    return;
  at += strlen("\"site\":\"");
  const char *end = strchr(at, '"');
  size_t n = end ? (size_t)(end - at) : strlen(at);
  snprintf(out, cap, "%.*s", (int)(n < cap ? n : cap - 1), at);
}

Test(examples_mesh, a_skipped_tp_all_reduce_is_that_call_against_the_async_all_gather,
     .timeout = 120) {
  static mesh_run r;
  mesh_run_bug("skip", 3, &r);
  mesh_expect_verdict(&r, 10, "desync", 3);
  cr_expect(mesh_says(&r, "desync in group 4 (tp, 2 ranks) at ALL_REDUCE #") &&
                mesh_says(&r, ": ranks disagree on the operation\n") &&
                mesh_says(&r, "  rank 3 (group rank 1): ALL_GATHER_INTO_TENSOR float32[64] "
                              "(async) (256 bytes)  <- operation differs") &&
                mesh_says(&r, "called from mesh_train.c:"),
            "%s", r.err);
  cr_expect(!mesh_says(&r, "checking layer") && !mesh_says(&r, "uint8"), "%s", r.report);
  /* The verdict names rank 3's own call: its operation with its line. */
  cr_expect(strstr(r.json, "\"group_name\":\"tp\"") &&
                strstr(r.json, "\"op\":\"ALL_GATHER_INTO_TENSOR\""),
            "%s", r.json);
}

/* The lower rank of a pair skips: a 1-1 tie that the skipper's repeated
 * call site breaks (the all_gather's site again, where its partner calls
 * the all_reduce), in distrun's verdict and in distview's own analysis;
 * rank 0 also hosts the job's store. */
Test(examples_mesh, the_skip_on_the_other_rank_of_the_pair_blames_that_rank, .timeout = 120) {
  static const int culprit[] = {2, 0};
  for (int i = 0; i < 2; i++) {
    static mesh_run r;
    mesh_run_bug("skip", culprit[i], &r);
    mesh_expect_verdict(&r, 10, "desync", culprit[i]);
    mesh_expect_agreement(&r);
  }
}

Test(examples_mesh, a_float64_dp_all_reduce_names_the_rank_the_field_and_the_line,
     .timeout = 120) {
  static mesh_run r;
  mesh_run_bug("dtype", 5, &r);
  mesh_expect_verdict(&r, 10, "desync", 5);
  cr_expect(mesh_says(&r, "desync in group 2 (dp, 4 ranks) at ALL_REDUCE #") &&
                mesh_says(&r, "ranks disagree on the dtype") &&
                mesh_says(&r, "  rank 5 (group rank 2): ") &&
                mesh_says(&r, "ALL_REDUCE float64[256] op=SUM (2048 bytes)  <- dtype differs"),
            "%s", r.err);
  cr_expect(strstr(r.json, "\"group_name\":\"dp\"") && strstr(r.json, "\"fields\":\"dtype\""),
            "%s", r.json);
}

/* Rank 3 sends int32 where rank 5 receives float32, the byte counts
 * equal: both steps before, the pair matched as float32, so the sender is
 * the side that changed. */
Test(examples_mesh, a_send_that_changed_its_dtype_names_the_sender, .timeout = 120) {
  static mesh_run r;
  mesh_run_bug("senddtype", 3, &r);
  mesh_expect_verdict(&r, 10, "desync", 3);
  cr_expect(mesh_says(&r, "ranks disagree on the dtype") &&
                mesh_says(&r, "int32[64] to rank 5 (256 bytes)  <- dtype differs"),
            "%s", r.err);
  /* whichever side reports it (the receiver, usually), the verdict's
   * operation is the culprit's send, at its line, not the receive */
  char site[96];
  snprintf(site, sizeof site, "\"site\":\"step_once (mesh_train.c:%d)\"",
           source_line("TRY(\"send\""));
  cr_expect(strstr(r.json, "\"op\":\"SEND\"") && strstr(r.json, site),
            "distview's verdict is not rank 3's send at %s: %s", site, r.json);
}

/* At OFF the shared-memory engine's own check: the rank outside the
 * majority is blamed, also when it is the lowest of its group (the
 * engine compares every rank with every other, not with group rank 0). */
Test(examples_mesh, at_OFF_a_float64_on_the_lowest_dp_rank_blames_that_rank, .timeout = 120) {
  static mesh_run r;
  mesh_run_at("DIST_DEBUG=OFF", "dtype", 1, &r);
  mesh_expect_verdict(&r, 10, "desync", 1);
  cr_expect(mesh_says(&r, "rank 1 (group rank 0): ALL_REDUCE float64[256] op=SUM (2048 bytes)"
                          "  <- dtype differs"),
            "%s", r.err);
  /* The engine records no call site; rank 1's monitor record does. */
  char want[64], site[256];
  snprintf(want, sizeof want, "(mesh_train.c:%d)", source_line("TRY(\"dp all_reduce\""));
  json_site(r.json, site, sizeof site);
  cr_expect(strstr(site, want), "not the dp all_reduce at %s (site '%s'): %s", want, site, r.json);
}

/* At OFF a pair's 1-1 tie where the lower rank skipped a call (or made
 * the async all_gather an all_reduce): the engine breaks it against the
 * side that repeated its own previous operation's kind while the partner
 * called another, as the checking layer does by call site; over TCP as
 * over shared memory (each TCP rank sees only its partner's descriptor,
 * and the later rank of the pair used to be blamed). */
Test(examples_mesh, at_OFF_a_call_skipped_on_the_lower_rank_of_a_pair_blames_that_rank,
     .timeout = 150) {
  static const char *const bug[] = {"skip", "async"};
  static const char *const transport[] = {NULL, "DIST_TRANSPORT=tcp"};
  for (int i = 0; i < 4; i++) {
    static mesh_run r;
    job_run_env("mesh_train", "DIST_DEBUG=OFF", transport[i / 2], bug[i % 2], 0, -1, &r);
    mesh_expect_verdict(&r, 10, "desync", 0);
    mesh_expect_agreement(&r);
    cr_expect(strstr(r.json, "\"group_name\":\"tp\""), "%s %s: %s", bug[i % 2],
              transport[i / 2] ? transport[i / 2] : "shm", r.json);
  }
}

/* At OFF over TCP a dtype changed on the lower rank of a dp pair: the
 * side whose all_reduce differs from the pair's last one is named, not
 * the later rank. */
Test(examples_mesh, at_OFF_over_tcp_a_dtype_changed_on_the_lower_rank_names_it,
     .timeout = 120) {
  static mesh_run r;
  job_run_env("mesh_train", "DIST_DEBUG=OFF", "DIST_TRANSPORT=tcp", "dtype", 0, -1, &r);
  mesh_expect_verdict(&r, 10, "desync", 0);
  cr_expect(mesh_says(&r, "ALL_REDUCE float64[256] op=SUM (2048 bytes)  <- dtype differs"),
            "%s", r.err);
}

/* At OFF the engine finds a barrier where the partner calls its
 * all_reduce, and either side may report it: the verdict is rank 3's own
 * call, the BARRIER at its line, not the partner's ALL_REDUCE. */
Test(examples_mesh, at_OFF_an_extra_barrier_is_named_at_its_own_line, .timeout = 120) {
  static mesh_run r;
  mesh_run_at("DIST_DEBUG=OFF", "barrier", 3, &r);
  mesh_expect_verdict(&r, 10, "desync", 3);
  char site[96];
  snprintf(site, sizeof site, "\"site\":\"step_once (mesh_train.c:%d)\"",
           source_line("TRY(\"tp barrier\""));
  cr_expect(strstr(r.json, "\"op\":\"BARRIER\"") && strstr(r.json, site),
            "distview's verdict is not rank 3's barrier at %s: %s", site, r.json);
}

Test(examples_mesh, a_sync_call_against_the_partners_async_one_is_a_desync, .timeout = 120) {
  static mesh_run r;
  mesh_run_bug("async", 3, &r);
  mesh_expect_verdict(&r, 10, "desync", 3);
  cr_expect(mesh_says(&r, "ranks disagree on the operation") &&
                mesh_says(&r, "ALL_GATHER_INTO_TENSOR float32[64] (async)") &&
                mesh_says(&r, "rank 3 (group rank 1): ALL_REDUCE float32[64] op=SUM"),
            "%s", r.err);
}

Test(examples_mesh, a_crash_names_the_rank_the_signal_and_the_faulting_line, .timeout = 120) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  cr_skip_test("the sanitizer catches the NULL store itself (its report is the backtrace)");
#endif
  static mesh_run r;
  mesh_run_bug("crash", 3, &r);
  mesh_expect_verdict(&r, 12, "crash", 3);
  char frame[96];
  snprintf(frame, sizeof frame, "#0 step_once (mesh_train.c:%d)",
           source_line("the planted crash"));
  cr_expect(mesh_says(&r, "rank 3 (pid ") &&
                mesh_says(&r, "failed first: killed by signal 11 (SIGSEGV)") &&
                mesh_says(&r, "; the report follows\nlibdist: rank 3 (pid ") &&
                mesh_says(&r, frame),
            "no '%s' in the verdict:\n%s", frame, r.err);
  cr_expect(!strstr(r.report, "_start ("), "frames below main:\n%s", r.report);
}

/* SIGKILL (the OOM killer) right after the rank issued its async tp
 * all_gather: no handler runs, so its trace ends at its writer's last
 * commit, here (DIST_TRACE_COMMIT_MS) the one before its first operation,
 * as a writer that lags a step behind leaves it. The verdict names where
 * its peers saw it last: the all_gather of its tp partner, at its line,
 * not an operation of an earlier step (or none). */
Test(examples_mesh, a_killed_rank_is_named_where_its_peers_saw_it_last, .timeout = 120) {
  static mesh_run r;
  job_run_env("mesh_train", "DIST_DEBUG=DETAIL", "DIST_TRACE_COMMIT_MS=600000", "kill", 3, -1,
              &r);
  mesh_expect_verdict(&r, 12, "died", 3);
  char site[96], said[160];
  snprintf(site, sizeof site, "\"site\":\"step_once (mesh_train.c:%d)\"",
           source_line("the planted kill") - 2);
  /* "they wait for it in" it, or "it took part in" it when the partner's
   * all_gather got its part before the kill */
  snprintf(said, sizeof said, " in group 4 (tp) ALL_GATHER_INTO_TENSOR #6, called from "
           "step_once (mesh_train.c:%d)", source_line("the planted kill") - 2);
  cr_expect(mesh_says(&r, "rank 3 (pid ") && mesh_says(&r, "killed by signal 9 (SIGKILL)") &&
                strstr(r.report, said),
            "no '%s' in the verdict:\n%s", said, r.err);
  cr_expect(strstr(r.json, "\"group_name\":\"tp\"") &&
                strstr(r.json, "\"op\":\"ALL_GATHER_INTO_TENSOR\"") &&
                strstr(r.json, "\"seq\":6") && strstr(r.json, site),
            "distview's verdict is not rank 3's tp all_gather at %s: %s", site, r.json);
}

/* The last stage sends past the world's end (a bound check forgotten):
 * the library refuses the send before it starts, the rank exits on the
 * error. The verdict names that send, its line and the reason, not the
 * receive it completed before (a refused call has no operation to show). */
Test(examples_mesh, a_refused_call_the_rank_exited_on_is_named_with_its_reason,
     .timeout = 120) {
  static mesh_run r;
  mesh_run_bug("pastend", 7, &r);
  mesh_expect_verdict(&r, 12, "died", 7);
  char said[160], site[96];
  snprintf(said, sizeof said, "; its last call was refused: group 0 (default) SEND #4, called "
           "from step_once (mesh_train.c:%d): ", source_line("TRY(\"send\""));
  snprintf(site, sizeof site, "\"site\":\"step_once (mesh_train.c:%d)\"",
           source_line("TRY(\"send\""));
  cr_expect(strstr(r.report, said) && mesh_says(&r, "SEND: peer rank 9 is not in group 0"),
            "no '%s' and reason in the verdict:\n%s", said, r.err);
  cr_expect(strstr(r.json, "\"op\":\"SEND\"") && strstr(r.json, "\"group\":0,") &&
                strstr(r.json, "\"seq\":4") && strstr(r.json, site),
            "distview's verdict is not rank 7's refused send at %s: %s", site, r.json);
}

/* The rank's dp all_reduce is refused (a NULL tensor), its return code
 * unchecked: it goes on while its dp partners wait for it there. The
 * verdict names the refused call, where the bug is, not the broadcast the
 * rank waits in after it. */
Test(examples_mesh, an_unchecked_refused_call_is_named_where_the_others_wait, .timeout = 120) {
  static mesh_run r;
  mesh_run_bug("unchecked", 3, &r);
  mesh_expect_verdict(&r, 11, "hang", 3);
  int line = source_line("the unchecked call");
  char said[160], site[96];
  snprintf(said, sizeof said, "; its call was refused, called from step_once (mesh_train.c:%d): ",
           line);
  snprintf(site, sizeof site, "\"site\":\"step_once (mesh_train.c:%d)\"", line);
  cr_expect(mesh_says(&r, "  rank 3 (host ") && mesh_says(&r, said) &&
                mesh_says(&r, "all_reduce: tensor is NULL"),
            "no '%s' in the report:\n%s", said, r.err);
  cr_expect(strstr(r.json, "\"group_name\":\"dp\"") && strstr(r.json, "\"op\":\"ALL_REDUCE\"") &&
                strstr(r.json, "\"seq\":3") && strstr(r.json, site),
            "distview's verdict is not rank 3's refused dp all_reduce at %s: %s", site, r.json);
}

Test(examples_mesh, an_early_exit_names_the_rank_that_left_and_its_last_operation,
     .timeout = 120) {
  static mesh_run r;
  mesh_run_bug("exit0", 3, &r);
  /* Its own end outranks the checking layer's "left the group" desync it
   * caused, whichever distrun hears first: exit 12, its exit code, and the
   * others' report of its last operation. */
  mesh_expect_verdict(&r, 12, "early_exit", 3);
  cr_expect(mesh_says(&r, "rank 3 (pid ") &&
                mesh_says(&r, "ended first, with exit code 0, while other ranks still needed it"),
            "%s", r.err);
  /* Its last operation: in distrun's line (its monitor's last record), or
   * in the others' report when that was the job's first cause. */
  cr_expect(mesh_says(&r, "as of its last record it had last completed group ") ||
                mesh_says(&r, "its last operation was "),
            "%s", r.err);
}

/* A rank aborts its dp group (dist_abort_group): every dp member's next
 * call fails and they give up, their tp partners then lose them. The rank
 * that aborted is the one named, with its reason, whichever rank exits
 * first; at DIST_DEBUG=OFF too (no checking layer between). */
static void expect_abort_named(const mesh_run *r) {
  mesh_expect_verdict(r, 12, "died", 5);
  cr_expect(mesh_says(r, "rank 5 aborted group 2 (dp) with dist_abort_group; rank ") &&
                mesh_says(r, "aborted in group 2 (dp, 4 ranks): rank 5 called dist_abort_group "
                             "on group 2 (dp): out of memory in the optimizer step"),
            "%s", r->err);
  cr_expect(strstr(r->json, "\"group_name\":\"dp\""), "%s", r->json);
  /* distview's own analysis reads the abort on the members' failed rows,
   * not the "left the group" desync their exits then caused */
  cr_expect(strstr(r->json, "\"agrees\":true"), "distview's own analysis disagrees: %s",
            r->json);
}

Test(examples_mesh, a_group_aborted_by_one_rank_names_that_rank_and_its_reason,
     .timeout = 120) {
  for (int i = 0; i < DIST_TEST_REPEAT(2); i++) {
    static mesh_run r;
    mesh_run_bug("abort", 5, &r);
    expect_abort_named(&r);
  }
  static mesh_run off;
  mesh_run_at("DIST_DEBUG=OFF", "abort", 5, &off);
  expect_abort_named(&off);
}

/* A rank whose loop ends a step before the others' destroys its groups
 * and returns 0 while they still need it. Over TCP its peers hear it
 * leave at once and report "rank 0 left the group" while it still ends
 * its groups (rank 0 of each waits for the members' last statistics): it
 * is the early exit all the same, as over shared memory. */
Test(examples_mesh, a_rank_that_ends_its_loop_early_is_the_early_exit_over_either_transport,
     .timeout = 180) {
  for (int i = 0; i < 2 * DIST_TEST_REPEAT(2); i++) {
    static mesh_run r;
    job_run_env("mesh_train", "DIST_DEBUG=DETAIL", i % 2 ? "DIST_TRANSPORT=tcp" : NULL, "leave",
                0, -1, &r);
    mesh_expect_verdict(&r, 12, "early_exit", 0);
    cr_expect(mesh_says(&r, "rank 0 (pid ") && mesh_says(&r, "ended first, "), "run %d: %s",
              i + 1, r.err);
  }
}

/* The opposite of an early exit: every other rank ran the program to its
 * end and exited 0, and rank 3 calls one more all_reduce. The ranks that
 * ended are not early: seven outvote one. */
Test(examples_mesh, a_rank_that_calls_on_after_the_others_finished_is_the_culprit,
     .timeout = 120) {
  static mesh_run r;
  mesh_run_bug("extra", 3, &r);
  mesh_expect_verdict(&r, 10, "desync", 3);
  cr_expect(mesh_says(&r, "rank 3 (pid ") &&
                mesh_says(&r, "called on alone: every other rank had ended with exit code 0"),
            "%s", r.err);
  char want[64], site[256];
  snprintf(want, sizeof want, "(mesh_train.c:%d)", source_line("\"extra all_reduce\""));
  json_site(r.json, site, sizeof site);
  cr_expect(strstr(r.json, "\"op\":\"ALL_REDUCE\"") && strstr(site, want),
            "the extra call and its line %s (site '%s'): %s", want, site, r.json);
  /* the trace shows every other rank finished: distview says so too */
  cr_expect(strstr(r.json, "\"agrees\":true"), "distview's own analysis disagrees: %s", r.json);
}

/* Rank 3 computes for ever before its tp all_reduce: the verdict names
 * that all_reduce (where its partner waits) with its line, not the line of
 * rank 3's last tp call, the async all_gather of the step before; and its
 * site is where rank 3 is, in its loop (distrun captured its stack). */
Test(examples_mesh, a_rank_computing_for_ever_is_named_at_the_call_it_never_made,
     .timeout = 120) {
  static mesh_run r;
  mesh_run_bug("spin", 3, &r);
  mesh_expect_verdict(&r, 11, "hang", 3);
  char want[64], site[256];
  snprintf(want, sizeof want, "(mesh_train.c:%d)",
           source_line("TRY(\"tp all_reduce\", dist_all_reduce(&t, DIST_SUM, j->g_tp"));
  cr_expect(strstr(r.json, "\"group_name\":\"tp\"") && strstr(r.json, "\"op\":\"ALL_REDUCE\""),
            "not tp's ALL_REDUCE: %s", r.json);
  cr_expect(mesh_says(&r, want) && mesh_says(&r, "; its peers wait for it in group 4 (tp) "
                                                 "ALL_REDUCE #"),
            "the awaited call's line %s is not said:\n%s", want, r.report);
  json_site(r.json, site, sizeof site);
  int loop = source_line("static void spin_forever(void) {");
  const char *at = strstr(site, "(mesh_train.c:");
  int line = at ? atoi(at + strlen("(mesh_train.c:")) : 0;
  cr_expect(line > loop && line <= loop + 3 && strstr(r.json, "\"where\":\"own code\""),
            "the site '%s' is not in spin_forever's loop (line %d): %s", site, loop, r.json);
}

Test(examples_mesh, a_healthy_run_is_a_success_in_distrun_and_distview, .timeout = 120) {
  static mesh_run r;
  mesh_run_bug("none", 3, &r);
  cr_expect_eq(r.status, 0, "%s", r.err);
  cr_expect_eq(r.diag_status, 0, "%s", r.json);
  cr_expect(strstr(r.json, "\"kind\":\"success\""), "%s", r.json);
}

/* distrun interrupted (SIGTERM, as a batch system ends a job): the verdict
 * is "interrupted" in distrun and in distview alike, not a crash. */
Test(examples_mesh, a_job_ended_by_sigterm_is_interrupted_in_distrun_and_distview,
     .timeout = 120) {
  static dist_proc job, diag;
  dist_test_clean_launch_env();
  char dir[] = "/tmp/dist-mesh-XXXXXX", trace[96], db[96];
  cr_assert(dist_test_mkdtemp(dir));
  snprintf(trace, sizeof trace, "DIST_TRACE=%s/ranks", dir);
  snprintf(db, sizeof db, "%s/trace.db", dir);
  /* rank 3 computes for ever; the stall report says the job is under way */
  const char *env[] = {"DIST_TIMEOUT=60", "DIST_STALL_S=0.5", trace, NULL};
  const char *argv[] = {dist_test_bin("distrun"), "-n", "8", "--trace-out", db,
                        dist_test_bin("mesh_train"), "--bug", "spin", NULL};
  dist_proc_start(&job, argv, env);
  cr_assert(dist_proc_wait_for(&job, 1, "MON WARN stall in group", 1, 60000), "%s",
            DIST_PROC_ERR(&job));
  cr_assert_eq(kill(job.pid, SIGTERM), 0);
  int st = dist_proc_finish(&job, 60000);
  cr_expect_eq(st, 1, "distrun exited %d:\n%s", st, DIST_PROC_ERR(&job));
  cr_expect(strstr(DIST_PROC_ERR(&job), "exit status 1 (other failure): interrupted by SIGTERM"),
            "%s", DIST_PROC_ERR(&job));
  int dst = dist_proc_runl(&diag, NULL, 60000, dist_test_bin("distview"), "diagnose", "--json",
                           db, NULL);
  cr_expect_eq(dst, st, "distview diagnose exited %d: %s", dst, DIST_PROC_OUT(&diag));
  cr_expect(strstr(DIST_PROC_OUT(&diag), "\"kind\":\"interrupted\""), "%s",
            DIST_PROC_OUT(&diag));
  char rm[160];
  snprintf(rm, sizeof rm, "rm -rf %s", dir);
  cr_assert_eq(system(rm), 0);
}
