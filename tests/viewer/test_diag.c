/* ctest: labels=unit timeout=60 */
/* test_diag.c - the diagnosis from the rows alone and from stored reports:
 * the desync's culprit and field, the hang's lagging rank with its last
 * completed op and the blocked ranks, the deadlock's cycle, a dead rank,
 * a stored report with nothing in the rows, point-to-point rows that
 * differ by design, a divergence deep in a long trace, and rows that lost
 * records in a job that finished (no finding, unless a real one). */
#include <criterion/criterion.h>

#include <sqlite3.h>

#include "vw_test.h"

static vw_model *open_path(const char *p) {
  vw_model *m;
  char err[512];
  cr_assert_eq(vw_model_open(p, &m, err, sizeof err), 0, "%s", err);
  return m;
}

static void diagnose(const char *p, bool deep, vw_diag *d) {
  vw_model *m = open_path(p);
  cr_assert_eq(vw_diagnose(m, deep, d), 0, "diagnose: %s", m->err);
  vw_model_close(m);
}

Test(viewer_diag, desync_names_the_minority_rank_and_the_field, .timeout = 10) {
  const char *p = vwt_path("desync.db");
  fx_story_desync(p, false);
  for (int deep = 0; deep < 2; deep++) {
    vw_diag d;
    diagnose(p, deep, &d);
    cr_assert_eq(d.kind, VW_DIAG_DESYNC, "desync");
    cr_assert_eq(d.exit_code, 10, "exit 10");
    cr_assert_eq(d.group_id, 0, "group");
    cr_assert_eq(d.seq, 13, "seq");
    cr_assert_str_eq(d.op, "ALL_REDUCE", "op");
    cr_assert_eq(d.rank, 2, "rank 2 diverged");
    cr_assert_eq(d.n_culprits, 1, "only rank 2");
    cr_assert_str_eq(d.field, "shape", "the field");
    cr_assert(!d.has_report, "no stored report");
    cr_assert(strstr(d.text, "rank 2: ALL_REDUCE float32 [4,512] SUM"), "%s", d.text);
    vw_diag_free(&d);
  }
}

Test(viewer_diag, desync_with_the_checking_layers_report_agrees_with_it, .timeout = 10) {
  const char *p = vwt_path("desync.db");
  fx_story_desync(p, true);
  vw_diag d;
  diagnose(p, true, &d);
  cr_assert(d.has_report, "report read");
  cr_assert_str_eq(d.report_kind, "desync_report", "kind");
  cr_assert_eq(d.report_group, d.group_id, "same group as the live report");
  cr_assert_eq(d.report_seq, d.seq, "same operation as the live report");
  cr_assert(strstr(d.report, "rank 2 differs in shape"), "verbatim: %s", d.report);
  vw_diag_free(&d);
}

Test(viewer_diag, hang_names_the_lagging_rank_and_its_last_op, .timeout = 10) {
  const char *p = vwt_path("hang.db");
  fx_story_hang(p);
  vw_diag d;
  diagnose(p, true, &d);
  cr_assert_eq(d.kind, VW_DIAG_HANG, "hang: %s", d.summary);
  cr_assert_eq(d.exit_code, 11, "exit 11");
  cr_assert_eq(d.rank, 1, "rank 1 is behind");
  cr_assert_eq(d.group_id, 0, "group");
  cr_assert_eq(d.seq, 21, "blocked in #21");
  cr_assert_str_eq(d.op, "ALL_REDUCE", "op");
  cr_assert_eq(d.last_done_seq, 20, "last completed");
  cr_assert_str_eq(d.last_done_op, "BROADCAST", "last completed op");
  cr_assert_eq(d.n_blocked, 3, "three blocked");
  cr_assert_eq(d.blocked[0] + d.blocked[1] + d.blocked[2], 0 + 2 + 3, "ranks 0, 2, 3");
  cr_assert(strstr(d.text, "its trace ends lost"), "%s", d.text);
  vw_diag_free(&d);
}

Test(viewer_diag, deadlock_reports_the_cycle, .timeout = 10) {
  const char *p = vwt_path("deadlock.db");
  fx_story_deadlock(p);
  vw_diag d;
  diagnose(p, true, &d);
  cr_assert_eq(d.kind, VW_DIAG_DEADLOCK, "deadlock: %s", d.summary);
  cr_assert_eq(d.exit_code, 11, "exit 11");
  cr_assert_eq(d.n_cycle, 2, "two ranks");
  cr_assert_eq(d.cycle[0], 0, "rank 0 first");
  cr_assert_eq(d.cycle_group[0], 1, "in group a");
  cr_assert_eq(d.cycle_seq[0], 5, "#5");
  cr_assert_eq(d.cycle[1], 1, "then rank 1");
  cr_assert_eq(d.cycle_group[1], 2, "in group b");
  vw_diag_free(&d);
}

Test(viewer_diag, healthy_trace_finds_nothing, .timeout = 10) {
  const char *p = vwt_path("ok.db");
  fx_story_ok(p);
  vw_diag d;
  diagnose(p, true, &d);
  cr_assert_eq(d.kind, VW_DIAG_NONE, "%s", d.summary);
  cr_assert_eq(d.exit_code, 0, "exit 0");
  vw_diag_free(&d);
}

/* A job that finished with records lost (a full disk, a ring overflow):
 * rank 0's #9 lost its first record (no dtype, shape or reduce op) and its
 * #10 its last (it never ended in the file); rank 2's #10 passes int32
 * when `real` (a desync the lost fields must not hide). */
static void story_lost_records(const char *path, bool real) {
  sqlite3 *db = fx_create(path, "job-lost", 3, 1);
  const int three[] = {0, 1, 2};
  for (int r = 0; r < 3; r++)
    fx_rank(db, r, "finished");
  fx_group(db, 0, "default", three, 3);
  for (int s = 1; s <= 8; s++)
    fx_coll(db, 0, s, "ALL_REDUCE", three, 3);
  for (int s = 9; s <= 10; s++)
    for (int r = 0; r < 3; r++) {
      int64_t t = fx_t(s, r);
      fx_op o = {r, 0, s, "ALL_REDUCE", "completed", "float32", "[4,1024]", "SUM", NULL,
                 4096, 16384, -1, t, t + 1000, t + 500000, 0};
      if (r == 0 && s == 9)
        o.dtype = o.shape = o.redop = NULL, o.numel = o.bytes = 0;
      if (r == 0 && s == 10)
        o.state = "started", o.t_end = -1;
      if (r == 2 && s == 10 && real)
        o.dtype = "int32";
      fx_op_add(db, &o);
    }
  fx_finish(db, fx_t(0, 0), fx_t(12, 0));
}

Test(viewer_diag, rows_that_lost_records_in_a_finished_job_find_nothing, .timeout = 10) {
  const char *p = vwt_path("lost.db");
  story_lost_records(p, false);
  for (int deep = 0; deep < 2; deep++) {
    vw_diag d;
    diagnose(p, deep, &d);
    cr_assert_eq(d.kind, VW_DIAG_NONE, "%s: %s", deep ? "deep" : "quick", d.summary);
    vw_diag_free(&d);
  }
}

Test(viewer_diag, a_desync_beside_rows_that_lost_records_is_still_found, .timeout = 10) {
  const char *p = vwt_path("lostdesync.db");
  story_lost_records(p, true);
  for (int deep = 0; deep < 2; deep++) {
    vw_diag d;
    diagnose(p, deep, &d);
    cr_assert_eq(d.kind, VW_DIAG_DESYNC, "%s: %s", deep ? "deep" : "quick", d.summary);
    cr_assert_eq(d.seq, 10);
    cr_assert_eq(d.n_culprits, 1);
    cr_assert_eq(d.rank, 2, "%s", d.summary);
    cr_assert_str_eq(d.field, "dtype");
    vw_diag_free(&d);
  }
}

/* Two ranks that disagree have no majority: the one whose call changed
 * since its own last call from the same site is the culprit, rank 0 as
 * well as rank 1 (the lower rank used to be kept). */
Test(viewer_diag, of_a_pair_the_rank_whose_call_changed_is_the_culprit, .timeout = 10) {
  for (int odd = 0; odd < 2; odd++) {
    const char *p = vwt_path("pair.db");
    sqlite3 *db = fx_create(p, "job-pair", 2, 1);
    const int two[] = {0, 1};
    for (int r = 0; r < 2; r++)
      fx_rank(db, r, "finished");
    fx_group(db, 0, "tp", two, 2);
    for (int s = 1; s <= 3; s++)
      fx_coll(db, 0, s, "ALL_REDUCE", two, 2);
    for (int r = 0; r < 2; r++) {
      int64_t t = fx_t(4, r);
      fx_op o = {r, 0, 4, "ALL_REDUCE", "failed", "float32", r == odd ? "[4,512]" : "[4,1024]",
                 "SUM", NULL, r == odd ? 2048 : 4096, 16384, -1, t, t + 1000, t + 2000, 10};
      fx_op_add(db, &o);
    }
    cr_assert_eq(sqlite3_exec(db, "UPDATE operations SET callsite_id = 7", NULL, NULL, NULL),
                 SQLITE_OK); /* every call from one site: a loop */
    fx_finish(db, fx_t(0, 0), fx_t(5, 0));
    vw_diag d;
    diagnose(p, true, &d);
    cr_assert_eq(d.kind, VW_DIAG_DESYNC, "%s", d.summary);
    cr_assert_eq(d.seq, 4);
    cr_assert_eq(d.n_culprits, 1, "%s", d.summary);
    cr_assert_eq(d.rank, odd, "rank %d changed: %s", odd, d.summary);
    vw_diag_free(&d);
  }
}

Test(viewer_diag, a_crashed_rank_with_nothing_else_is_exit_12, .timeout = 10) {
  const char *p = vwt_path("died.db");
  sqlite3 *db = fx_create(p, "job-died", 2, 1);
  fx_rank(db, 0, "finished");
  fx_rank(db, 1, "crashed");
  int two[] = {0, 1};
  fx_group(db, 0, "default", two, 2);
  for (int s = 1; s <= 4; s++)
    fx_coll(db, 0, s, "ALL_REDUCE", two, 2);
  fx_finish(db, fx_t(0, 0), fx_t(5, 0));
  vw_diag d;
  diagnose(p, true, &d);
  cr_assert_eq(d.kind, VW_DIAG_DIED, "%s", d.summary);
  cr_assert_eq(d.exit_code, 12, "exit 12");
  cr_assert_eq(d.rank, 1, "rank 1");
  cr_assert(strstr(d.summary, "rank 1 crashed"), "%s", d.summary);
  vw_diag_free(&d);
}

Test(viewer_diag, a_stored_diagnosis_alone_is_used, .timeout = 10) {
  /* the monitor diagnosed a hang whose rows look complete (the ranks were
   * ended right after the report) */
  const char *p = vwt_path("reported.db");
  sqlite3 *db = fx_create(p, "job-rep", 2, 1);
  fx_rank(db, 0, "finished");
  fx_rank(db, 1, "finished");
  int two[] = {0, 1};
  fx_group(db, 0, "default", two, 2);
  for (int s = 1; s <= 3; s++)
    fx_coll(db, 0, s, "BARRIER", two, 2);
  fx_event(db, 0, 0, 3, "diagnosis", fx_t(4, 0), 3,
           "hang in group 0 (default) at BARRIER #3: waited 30.0 s of its 30.0 s timeout\n"
           "  rank 1 has not entered BARRIER #3");
  fx_finish(db, fx_t(0, 0), fx_t(5, 0));
  vw_diag d;
  diagnose(p, true, &d);
  cr_assert_eq(d.kind, VW_DIAG_HANG, "from the report: %s", d.summary);
  cr_assert_eq(d.exit_code, 11, "exit 11");
  cr_assert_eq(d.seq, 3, "its operation");
  cr_assert_str_eq(d.op, "BARRIER", "named from the rows");
  cr_assert(strstr(d.summary, "reported by rank 0"), "%s", d.summary);
  vw_diag_free(&d);
}

/* A proven deadlock across three groups (as the monitor words it): rank 3
 * "has not entered" the reporter's operation because it waits in another
 * group, but the waits go round through rank 0, whose calls are in
 * another order. The culprit is the monitor's conclusion, not the rank
 * that has not entered. */
static void stored_hang(const char *name, const char *report, vw_diag *d) {
  const char *p = vwt_path(name);
  sqlite3 *db = fx_create(p, "job-cycle", 4, 1);
  int four[] = {0, 1, 2, 3};
  for (int r = 0; r < 4; r++)
    fx_rank(db, r, "finished");
  fx_group(db, 0, "default", four, 4);
  for (int s = 1; s <= 2; s++)
    fx_coll(db, 0, s, "ALL_REDUCE", four, 4);
  fx_event(db, 0, 0, 3, "diagnosis", fx_t(4, 0), 3, report);
  fx_finish(db, fx_t(0, 0), fx_t(5, 0));
  diagnose(p, true, d);
}

Test(viewer_diag, a_stored_cycle_names_the_rank_the_monitor_concludes, .timeout = 10) {
  vw_diag d;
  stored_hang("cycle.db",
              "hang in group 0 (default) at ALL_REDUCE #3: waited 1.7 s of its 20.0 s timeout\n"
              "  rank 3 (host vm, pid 9) has not entered ALL_REDUCE #3: last completed "
              "ALL_REDUCE #2; it is blocked in group 4 (dp) ALL_REDUCE #3, for 1.7 s\n"
              "  rank 0 is blocked in ALL_REDUCE #3, called from ar (blocks8.c:40) (rank 0)\n"
              "  the wait-for cycle goes through rank 0, which is blocked in group 5 (cp) "
              "ALL_REDUCE #3, while others wait for it elsewhere: rank 1 waits for it\n"
              "  deadlock: a wait-for cycle of 3 ranks across groups:\n"
              "    rank 0 waits in group 5 (cp) ALL_REDUCE #3 for rank 3\n",
              &d);
  cr_assert_eq(d.kind, VW_DIAG_HANG, "%s", d.summary);
  cr_assert_eq(d.n_culprits, 1, "one culprit");
  cr_assert_eq(d.culprits[0], 0, "rank 0, where the cycle goes through");
  vw_diag_free(&d);
}

/* A send and a receive that never match: both ranks, as the monitor says
 * ("the waits end at ranks 4 and 0"); and a tie the trace broke. */
Test(viewer_diag, a_stored_pair_and_a_tie_break_name_their_ranks, .timeout = 10) {
  vw_diag d;
  stored_hang("pair.db",
              "hang in group 0 (default) at RECV #5: waited 6.0 s of its 6.0 s timeout\n"
              "  the waits end at ranks 3 and 1: rank 3 is blocked in RECV #5 from rank 1 "
              "with tag 5, and rank 1 in SEND #5 to rank 3 with tag 0; the two never matched\n",
              &d);
  cr_assert_eq(d.n_culprits, 2, "both ranks: %d, %s", d.n_culprits, d.summary);
  cr_assert(d.culprits[0] == 3 && d.culprits[1] == 1, "ranks 3 and 1");
  vw_diag_free(&d);
  stored_hang("tie.db",
              "hang in group 0 (default) at SEND #5: waited 1.4 s of its 20.0 s timeout\n"
              "  the wait-for cycle goes through rank 0, which is blocked in SEND #5\n"
              "  the wait-for cycle goes through rank 2, which is blocked in SEND #5\n"
              "  of ranks 0 and 2, rank 2 called otherwise this step than the step before "
              "(...): rank 2 is where it went wrong\n",
              &d);
  cr_assert_eq(d.n_culprits, 1, "the tie broken");
  cr_assert_eq(d.culprits[0], 2, "rank 2");
  vw_diag_free(&d);
}

/* A hang's diagnosis, then what follows from it: the ranks that failed of
 * the timeout exit, so a partner's next collective reports "rank 2 left
 * the group" (a desync report), and the ranks distrun then ends are lost
 * peers to the last one's monitor (a later diagnosis). The hang is the
 * stored report used, not the desync nor the lost peer. */
Test(viewer_diag, what_follows_a_hangs_diagnosis_is_not_the_report_used, .timeout = 10) {
  const char *p = vwt_path("after-hang.db");
  sqlite3 *db = fx_create(p, "job-after", 3, 1);
  int three[] = {0, 1, 2};
  for (int r = 0; r < 3; r++)
    fx_rank(db, r, "finished");
  fx_group(db, 0, "default", three, 3);
  for (int s = 1; s <= 3; s++)
    fx_coll(db, 0, s, "BARRIER", three, 3);
  fx_event(db, 0, 0, 4, "diagnosis", fx_t(4, 0), 3,
           "hang in group 0 (default) at BARRIER #4: waited 30.0 s of its 30.0 s timeout\n"
           "  rank 1 has not entered BARRIER #4");
  fx_event(db, 0, 0, 5, "desync_report", fx_t(5, 0), 4,
           "desync in group 0 (default, 3 ranks) at ALL_REDUCE #5: rank 2 left the group "
           "(destroyed it or exited) before this collective; the collective counts differ\n"
           "  rank 2 (host h, pid 3): left after 4 collectives  <- collective count differs");
  fx_event(db, 2, 0, 5, "diagnosis", fx_t(6, 0), 5,
           "lost peer in group 0 (default) at ALL_REDUCE #5: waited 2.0 s of its 30.0 s timeout\n"
           "  rank 0 (host h, pid 1) has not entered ALL_REDUCE #5");
  fx_finish(db, fx_t(0, 0), fx_t(7, 0));
  vw_diag d;
  diagnose(p, true, &d);
  cr_assert_eq(d.kind, VW_DIAG_HANG, "the hang: %s", d.summary);
  cr_assert_eq(d.seq, 4, "its operation");
  cr_assert_eq(d.n_culprits, 1, "one culprit");
  cr_assert_eq(d.culprits[0], 1, "rank 1, which has not entered it");
  cr_assert(strstr(d.summary, "reported by rank 0"), "%s", d.summary);
  vw_diag_free(&d);
}

/* Rank 3 destroyed the replicate group {1,3} with its all_reduce #3
 * pending; rank 1 failed there and exited, and rank 0 then reported, in
 * the default group, the desync of "rank `leaver` left the group". When
 * the leaver is rank 1 (the destroy's fallout) the earlier destroy is the
 * cause: rank 3's death of the group, as distrun says. When the report
 * names the destroyer itself, its leaving is the desync distrun names. */
static void destroyed_then_left(int leaver, vw_diag *d) {
  const char *p = vwt_path("destroyed.db");
  sqlite3 *db = fx_create(p, "job-destroy", 4, 1);
  int four[] = {0, 1, 2, 3}, pair[] = {1, 3};
  for (int r = 0; r < 4; r++)
    fx_rank(db, r, r == 1 ? "exited" : "ended"); /* distrun ended the others */
  fx_group(db, 0, "default", four, 4);
  fx_group(db, 5, "replicate", pair, 2);
  for (int s = 1; s <= 4; s++)
    fx_coll(db, 0, s, "ALL_GATHER", four, 4);
  for (int s = 1; s <= 2; s++)
    fx_coll(db, 5, s, "ALL_REDUCE", pair, 2);
  int64_t t = fx_t(3, 3);
  fx_op o = {3, 5, 3, "ALL_REDUCE", "failed", "float32", "[64]", "SUM",
             "the group was destroyed with operations pending", 64, 256, -1, t, t + 1000,
             t + 2000, 7};
  fx_op_add(db, &o);
  o.rank = 1; /* its partner's all_reduce fails with the destroyer's reason */
  o.message = "group r.0 was aborted: the group was destroyed with operations pending";
  o.t_end += 500;
  fx_op_add(db, &o);
  char msg[512];
  snprintf(msg, sizeof msg,
           "desync in group 0 (default, 4 ranks) at ALL_GATHER #5: rank %d left the group "
           "(destroyed it or exited) before this collective; the collective counts differ\n"
           "  rank 0: at ALL_GATHER #5 (collective 5 of the group), called from a.c:9 in main()\n"
           "  rank %d (host h, pid 2): left after 4 collectives  <- collective count differs",
           leaver, leaver);
  fx_event(db, 0, 0, 5, "desync_report", fx_t(6, 0), 4, msg);
  fx_finish(db, fx_t(0, 0), fx_t(7, 0));
  diagnose(p, true, d);
}

Test(viewer_diag, ranks_that_left_after_a_destroy_with_operations_pending_are_its_fallout,
     .timeout = 10) {
  vw_diag d;
  destroyed_then_left(1, &d);
  cr_assert_eq(d.kind, VW_DIAG_DIED, "the destroy: %s", d.summary);
  cr_assert_eq(d.n_culprits, 1, "%s", d.summary);
  cr_assert_eq(d.culprits[0], 3, "rank 3, the destroyer: %s", d.summary);
  cr_assert_eq(d.group_id, 5, "in the replicate group: %s", d.summary);
  vw_diag_free(&d);
  destroyed_then_left(3, &d);
  cr_assert_eq(d.kind, VW_DIAG_DESYNC, "the destroyer left: %s", d.summary);
  cr_assert_eq(d.culprits[0], 3, "%s", d.summary);
  vw_diag_free(&d);
}

/* Rank 2 ended on its own (exit code 0, its trace 'finished') while the
 * others waited: ranks 0 and 1 in an all_reduce, rank 3 creating a group
 * rank 2 never joined. The hang's report finds it gone, in either of the
 * monitor's words (a member that "has not entered", or where the waits
 * end): rank 2's early end is the cause, as distrun says. */
static void hang_after_an_exit(const char *gone_line, vw_diag *d) {
  const char *p = vwt_path("gone.db");
  sqlite3 *db = fx_create(p, "job-gone", 4, 1);
  int four[] = {0, 1, 2, 3};
  for (int r = 0; r < 4; r++)
    fx_rank(db, r, r == 2 ? "finished" : "ended");
  fx_group(db, 0, "default", four, 4);
  for (int r = 0; r < 2; r++) {
    int64_t t = fx_t(1, r);
    fx_op o = {r, 0, 1, "ALL_REDUCE", "started", "float32", "[4]", "SUM", NULL, 4, 16, -1, t,
               t + 1000, -1, 0};
    fx_op_add(db, &o);
  }
  char msg[512];
  snprintf(msg, sizeof msg, "hang in group 0 (default) at ALL_REDUCE #1: waited 6.0 s of its "
           "6.0 s timeout\n%s", gone_line);
  fx_event(db, 3, 0, 1, "diagnosis", fx_t(9, 3), 3, msg);
  fx_finish(db, fx_t(0, 0), fx_t(10, 0));
  diagnose(p, true, d);
}

Test(viewer_diag, a_hang_whose_report_finds_a_rank_gone_is_that_ranks_early_end,
     .timeout = 10) {
  static const char *const said[] = {
      "  rank 2 (host h, pid 3) exited with code 0; it has not entered ALL_REDUCE #1",
      "  rank 3 is blocked in dist_split_group for 6.0 s, creating group 2 (2 ranks)\n"
      "  the waits end at rank 2, which exited with code 0: ranks 0-1 wait for it in group 0 "
      "(default) ALL_REDUCE #1"};
  for (size_t i = 0; i < 2; i++) {
    vw_diag d;
    hang_after_an_exit(said[i], &d);
    cr_assert_eq(d.kind, VW_DIAG_DIED, "form %zu: %s", i, d.summary);
    cr_assert_eq(d.n_culprits, 1, "form %zu: %s", i, d.summary);
    cr_assert_eq(d.culprits[0], 2, "form %zu: rank 2 ended: %s", i, d.summary);
    cr_assert_str_eq(d.report_kind, "ended", "form %zu", i);
    vw_diag_free(&d);
  }
}

/* Rank 0 destroyed the replicate group {0,2} and went on; rank 2's next
 * all_reduce there reported that rank 0 left (a desync), and rank 2
 * exited. A later lost-peer diagnosis in the default group lists rank 0
 * as a member that "has not entered" and rank 2 as one that "exited with
 * code 1": that exit is rank 2's, not rank 0's (it once read as rank 0's
 * death: a pattern over the whole report matched across the two members'
 * lines). Rank 0's gather then failed on rank 2's exit and rank 0 exited
 * too, as a still later diagnosis says: fallout, not why it left. The
 * desync naming rank 0 stays the finding. */
Test(viewer_diag, another_members_exit_in_a_later_report_is_not_the_leavers,
     .timeout = 10) {
  const char *p = vwt_path("left-other-exit.db");
  sqlite3 *db = fx_create(p, "job-left", 4, 1);
  int four[] = {0, 1, 2, 3}, pair[] = {0, 2};
  for (int r = 0; r < 4; r++)
    fx_rank(db, r, r == 0 || r == 2 ? "exited" : "ended");
  fx_group(db, 0, "default", four, 4);
  fx_group(db, 3, "replicate", pair, 2);
  for (int s = 1; s <= 3; s++)
    fx_coll(db, 3, s, "ALL_REDUCE", pair, 2);
  fx_event(db, 2, 3, 4, "desync_report", fx_t(4, 2), 4,
           "desync in group 3 (replicate, 2 ranks) at ALL_REDUCE #4: rank 0 left the group "
           "(destroyed it or exited) before this collective; the collective counts differ\n"
           "  rank 2 (group rank 1): at ALL_REDUCE #4 (collective 4 of the group)\n"
           "  rank 0 (host h, pid 1), group rank 0: left the group (it said goodbye)  <- "
           "collective count differs");
  int64_t t = fx_t(5, 0); /* rank 0's gather fails on rank 2's exit */
  fx_op o = {0, 0, 7, "GATHER", "failed", "float32", "[4]", NULL,
             "peer lost: rank 2 (host h, pid 3) closed its connection", 4, 16, 0, t, t + 100,
             t + 2000, 5};
  fx_op_add(db, &o);
  fx_event(db, 1, 0, 8, "diagnosis", fx_t(6, 1), 5,
           "lost peer in group 0 (default) at ALL_GATHER #8: waited 0.2 s of its 6.0 s timeout\n"
           "  rank 0 (host h, pid 1) has not entered ALL_GATHER #8: last completed GATHER #6\n"
           "  rank 2 (host h, pid 3) exited with code 1; it has not entered ALL_GATHER #8\n"
           "  the waits end at rank 2, which exited with code 1");
  fx_event(db, 3, 0, 8, "diagnosis", fx_t(6, 3), 5, /* later still: rank 0 exited too */
           "lost peer in group 0 (default) at ALL_GATHER #8: waited 0.4 s of its 6.0 s timeout\n"
           "  rank 0 (host h, pid 1) exited with code 1; it has not entered ALL_GATHER #8");
  fx_finish(db, fx_t(0, 0), fx_t(7, 0));
  vw_diag d;
  diagnose(p, true, &d);
  cr_assert_eq(d.kind, VW_DIAG_DESYNC, "rank 0 left: %s", d.summary);
  cr_assert_eq(d.n_culprits, 1, "%s", d.summary);
  cr_assert_eq(d.culprits[0], 0, "rank 0, the leaver: %s", d.summary);
  cr_assert_eq(d.group_id, 3, "in the replicate group: %s", d.summary);
  vw_diag_free(&d);
}

/* A rank arrived late at a barrier, within the timeout: the monitor
 * logged a stall report naming it, and every rank then ran to its end.
 * That is no hang; the same report in a job whose rank 1 never finished
 * is the one used. */
static void story_stall(const char *p, const char *end1) {
  sqlite3 *db = fx_create(p, "job-stall", 2, 1);
  fx_rank(db, 0, "finished");
  fx_rank(db, 1, end1);
  int two[] = {0, 1};
  fx_group(db, 0, "default", two, 2);
  for (int s = 1; s <= 3; s++)
    fx_coll(db, 0, s, "BARRIER", two, 2);
  fx_event(db, 0, 0, 2, "stall_report", fx_t(2, 0), 0,
           "stall in group 0 (default) at BARRIER #2: waited 5.0 s of its 20.0 s timeout\n"
           "  rank 1 has not entered BARRIER #2");
  fx_finish(db, fx_t(0, 0), fx_t(4, 0));
}

Test(viewer_diag, a_stall_report_in_a_job_that_finished_is_no_hang, .timeout = 10) {
  const char *p = vwt_path("stall-ok.db");
  story_stall(p, "finished");
  vw_diag d;
  diagnose(p, true, &d);
  cr_assert_eq(d.kind, VW_DIAG_NONE, "a slow rank that caught up: %s", d.summary);
  cr_assert_eq(d.exit_code, 0, "exit 0");
  vw_diag_free(&d);
  p = vwt_path("stall-lost.db");
  story_stall(p, "lost");
  diagnose(p, true, &d);
  cr_assert(d.has_report, "the stall report is read when a rank did not finish");
  cr_assert_str_eq(d.report_kind, "stall_report", "%s", d.summary);
  vw_diag_free(&d);
}

Test(viewer_diag, a_stored_diagnosis_names_its_operation_by_its_own_number, .timeout = 10) {
  /* the monitor's report carries no operation, so its event's seq is the
   * group's issue ordinal (5: three barriers and two receives); the
   * header names RECV #2 (point-to-point calls are numbered apart) */
  const char *p = vwt_path("reported-p2p.db");
  sqlite3 *db = fx_create(p, "job-rep-p2p", 2, 1);
  fx_rank(db, 0, "finished");
  fx_rank(db, 1, "finished");
  int two[] = {0, 1};
  fx_group(db, 0, "default", two, 2);
  for (int s = 1; s <= 3; s++)
    fx_coll(db, 0, s, "BARRIER", two, 2);
  fx_event(db, 1, 0, 5, "diagnosis", fx_t(4, 0), 3,
           "hang in group 0 (default) at RECV #2: waited 30.0 s of its 30.0 s timeout\n"
           "  rank 1 is blocked in RECV #2 from rank 0, called from main\n"
           "  rank 0 (host h, pid 1) has not called the matching send");
  fx_finish(db, fx_t(0, 0), fx_t(5, 0));
  vw_diag d;
  diagnose(p, true, &d);
  cr_assert_eq(d.kind, VW_DIAG_HANG, "from the report: %s", d.summary);
  cr_assert_eq(d.seq, 2, "the header's number, not the event's ordinal: %lld",
               (long long)d.seq);
  cr_assert_str_eq(d.op, "RECV", "the header's operation (BARRIER #2 is another)");
  vw_diag_free(&d);
}

Test(viewer_diag, point_to_point_rows_differ_without_a_desync, .timeout = 10) {
  const char *p = vwt_path("p2p.db");
  sqlite3 *db = fx_create(p, "job-p2p", 2, 1);
  fx_rank(db, 0, "finished");
  fx_rank(db, 1, "finished");
  int two[] = {0, 1};
  fx_group(db, 0, "default", two, 2);
  int64_t t = fx_t(1, 0);
  fx_op s = {0, 0, 1, "SEND", "completed", "float32", "[8]", NULL, NULL, 8, 32, 1, t, t, t + 9, 0};
  fx_op r = {1, 0, 1, "RECV", "completed", "int32", "[8]", NULL, NULL, 8, 32, 0, t, t, t + 9, 0};
  fx_op_add(db, &s);
  fx_op_add(db, &r);
  fx_finish(db, fx_t(0, 0), fx_t(2, 0));
  vw_diag d;
  diagnose(p, true, &d);
  cr_assert_eq(d.kind, VW_DIAG_NONE, "%s", d.summary);
  vw_diag_free(&d);
}

Test(viewer_diag, deep_scan_finds_an_early_divergence_the_quick_one_skips, .timeout = 20) {
  /* rank 3 passed a different root at #5 of 200 and the job went on (no
   * checking layer): only the deep scan reads that far back */
  const char *p = vwt_path("early.db");
  sqlite3 *db = fx_create(p, "job-early", 4, 1);
  int four[] = {0, 1, 2, 3};
  for (int r = 0; r < 4; r++)
    fx_rank(db, r, "finished");
  fx_group(db, 0, "default", four, 4);
  for (int s = 1; s <= 200; s++) {
    if (s != 5) {
      fx_coll(db, 0, s, "ALL_REDUCE", four, 4);
      continue;
    }
    for (int r = 0; r < 4; r++) {
      int64_t t = fx_t(s, r);
      fx_op o = {r, 0, s, "BROADCAST", "completed", "float32", "[4,1024]", NULL, NULL, 4096,
                 16384, r == 3 ? 1 : 0, t, t + 1000, t + 5000, 0};
      fx_op_add(db, &o);
    }
  }
  fx_finish(db, fx_t(0, 0), fx_t(201, 0));
  vw_diag d;
  diagnose(p, false, &d);
  cr_assert_eq(d.kind, VW_DIAG_NONE, "quick: only the tail");
  vw_diag_free(&d);
  diagnose(p, true, &d);
  cr_assert_eq(d.kind, VW_DIAG_DESYNC, "deep: %s", d.summary);
  cr_assert_eq(d.seq, 5, "#5");
  cr_assert_eq(d.rank, 3, "rank 3");
  cr_assert_str_eq(d.field, "root", "root differs");
  vw_diag_free(&d);
}

Test(viewer_diag, a_member_without_a_rank_file_is_the_one_waited_for, .timeout = 10) {
  /* rank 1's file never made it into the merge: no ranks row, no rows */
  const char *p = vwt_path("missing.db");
  fx_story_hang(p);
  sqlite3 *db;
  cr_assert_eq(sqlite3_open(p, &db), SQLITE_OK, "open");
  cr_assert_eq(sqlite3_exec(db, "DELETE FROM operations WHERE rank = 1; DELETE FROM ranks "
                                "WHERE rank = 1", NULL, NULL, NULL), SQLITE_OK, "delete");
  sqlite3_close(db);
  vw_diag d;
  diagnose(p, true, &d);
  cr_assert_eq(d.kind, VW_DIAG_HANG, "%s", d.summary);
  cr_assert_eq(d.rank, 1, "the member with no trace");
  cr_assert_eq(d.seq, 21, "#21");
  cr_assert(strstr(d.text, "its rank file is missing from this trace"), "%s", d.text);
  vw_diag_free(&d);
}

Test(viewer_diag, a_stored_desync_report_beats_rows_cut_short, .timeout = 10) {
  /* the ranks were killed right after the report: rank 2's last rows and
   * everybody's #13 never reached the disk, so the rows alone look like a
   * hang at #12 */
  const char *p = vwt_path("cut.db");
  fx_story_desync(p, true);
  sqlite3 *db;
  cr_assert_eq(sqlite3_open(p, &db), SQLITE_OK, "open");
  cr_assert_eq(sqlite3_exec(db, "DELETE FROM operations WHERE seq = 13 OR (rank = 2 AND seq > 3);"
                                "UPDATE operations SET state = 'started', t_ended_ns = NULL "
                                "WHERE seq = 12 AND rank != 2;"
                                "UPDATE ranks SET end_state = 'lost'", NULL, NULL, NULL), SQLITE_OK,
               "cut");
  sqlite3_close(db);
  vw_diag d;
  diagnose(p, true, &d);
  cr_assert_eq(d.kind, VW_DIAG_DESYNC, "the report wins: %s", d.summary);
  cr_assert_eq(d.exit_code, 10, "exit 10");
  cr_assert_eq(d.seq, 13, "the report's operation");
  cr_assert_eq(d.rank, 2, "the report's culprit (the '<-' line)");
  cr_assert(strstr(d.text, "the rows alone, which may have lost their last records, say: hang"),
            "%s", d.text);
  vw_diag_free(&d);
}

/* issue 26, defect 8: a file damaged after its stored report (a query of
 * the rows fails once the report was read) left the report allocated,
 * which LeakSanitizer saw from distview diagnose on byte-flipped files.
 * A failed diagnosis now leaves nothing to free. */
Test(viewer_diag, a_query_failing_after_the_stored_report_leaves_nothing_to_free,
     .timeout = 10) {
  const char *p = vwt_path("desync-damaged.db");
  fx_story_desync(p, true);
  sqlite3 *db;
  cr_assert_eq(sqlite3_open(p, &db), SQLITE_OK);
  /* the header's queries never read redop; the desync scan does */
  cr_assert_eq(sqlite3_exec(db, "ALTER TABLE operations DROP COLUMN redop", NULL, NULL, NULL),
               SQLITE_OK, "%s", sqlite3_errmsg(db));
  sqlite3_close(db);
  vw_model *m = open_path(p);
  for (int deep = 0; deep < 2; deep++) {
    vw_diag d;
    cr_assert_eq(vw_diagnose(m, deep, &d), -1, "the desync scan cannot run without redop");
    cr_assert(strstr(m->err, "redop"), "the reason names the column: %s", m->err);
    cr_assert_null(d.report, "the stored report (read first) was freed on the failure");
  }
  vw_model_close(m);
}
