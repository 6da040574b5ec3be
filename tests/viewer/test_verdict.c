/* ctest: labels=unit timeout=120 */
/* test_verdict.c - distview follows the job's verdict. A fixture trace
 * with a verdict row (written by the reader library's
 * dist_trace_set_verdict, as distrun writes it) must make `distview
 * diagnose` (text and --json), `distview summary` and the TUI's headline
 * say that verdict, with its exit status, culprits, group by id and name,
 * operation, field and call site; distview's own analysis follows, saying
 * whether it agrees. Without a verdict (an older trace, a job run without
 * distrun) the rows' analysis stands: a killed rank is a death (exit 12),
 * not a hang; a crash outranks the "left the group" reports it caused,
 * and so does a lost rank that the rank which left had failed on;
 * and groups are named as users named them ("dp"), not "g1". */
#include <criterion/criterion.h>

#include <dist/trace_reader.h>

#include "proc.h"
#include "vw_test.h"

static dist_proc R; /* the last run: R.status, R.buf[0] (stdout), R.buf[1] (stderr) */

#define distview(...) dist_proc_runl(&R, NULL, 60000, dist_test_bin("distview"), __VA_ARGS__)

static void set_verdict(const char *path, const dist_trace_verdict *v) {
  char err[256] = "";
  cr_assert_eq(dist_trace_set_verdict(path, v, err, sizeof err), DIST_OK, "%s", err);
}

static void sql(const char *path, const char *q) {
  sqlite3 *db;
  cr_assert_eq(sqlite3_open(path, &db), SQLITE_OK);
  char *e = NULL;
  cr_assert_eq(sqlite3_exec(db, q, NULL, NULL, &e), SQLITE_OK, "%s: %s", q, e);
  sqlite3_close(db);
}

#define HAS(s) cr_assert(strstr(R.buf[0], s), "lacks '%s':\n%s", s, R.buf[0])

Test(viewer_verdict, a_desync_verdict_leads_and_the_rows_agree, .timeout = 60) {
  const char *p = vwt_path("v-desync.db");
  fx_story_desync(p, true);
  int culprits[] = {2};
  set_verdict(p, &(dist_trace_verdict){
      .kind = "desync", .exit_status = 10, .culprits = culprits, .n_culprits = 1,
      .group_id = 0, .group_name = "default", .op = "ALL_REDUCE", .seq = 13, .field = "shape",
      .site = "train.c:42 in step()", .reported_by = 0,
      .text = "desync in group 0 (default, 4 ranks) at ALL_REDUCE #13: ranks disagree on the "
              "shape\n  rank 2: ALL_REDUCE float32[4,512]  <- shape differs"});
  distview("diagnose", "--json", p, NULL);
  cr_assert_eq(R.status, 10, "the verdict's exit status: %s", R.buf[1]);
  HAS("{\"kind\":\"desync\",\"exit_code\":10,\"group\":0,\"seq\":13,\"op\":\"ALL_REDUCE\","
      "\"rank\":2,\"culprits\":[2]");
  HAS("\"fields\":\"shape\",\"group_name\":\"default\",\"site\":\"train.c:42 in step()\","
      "\"source\":\"distrun\",\"reported_by\":0,\"dropped\":0,\"own\":{\"kind\":\"desync\","
      "\"exit_code\":10,\"culprits\":[2],\"agrees\":true");
  distview("diagnose", p, NULL);
  cr_assert_eq(R.status, 10);
  HAS("desync (exit 10): rank 2 in group 0 (default) at ALL_REDUCE #13: shape differs, "
      "called from train.c:42 in step()\n"
      "desync in group 0 (default, 4 ranks) at ALL_REDUCE #13: ranks disagree on the shape\n");
  HAS("distview's own analysis agrees: desync in group 0 (default) at #13 ALL_REDUCE: rank 2 "
      "differs in shape");
}

Test(viewer_verdict, a_hang_verdict_with_other_culprits_says_what_the_rows_add, .timeout = 60) {
  /* the rows see rank 1 behind in group 0; distrun's verdict, from every
   * rank's evidence, blames rank 3 in the tp group */
  const char *p = vwt_path("v-hang.db");
  fx_story_hang(p);
  sql(p, "UPDATE groups SET description = 'tp' WHERE group_id = 1");
  int culprits[] = {3};
  set_verdict(p, &(dist_trace_verdict){
      .kind = "hang", .exit_status = 11, .culprits = culprits, .n_culprits = 1,
      .group_id = 1, .op = "ALL_GATHER", .seq = 6, .reported_by = 0,
      .text = "hang in group 1 (tp, 2 ranks) at ALL_GATHER #6"});
  distview("diagnose", "--json", p, NULL);
  cr_assert_eq(R.status, 11, "%s", R.buf[1]);
  HAS("{\"kind\":\"hang\",\"exit_code\":11,\"group\":1,\"seq\":6,\"op\":\"ALL_GATHER\","
      "\"rank\":3,\"culprits\":[3],\"blocked\":[]");
  HAS("\"group_name\":\"tp\",\"site\":\"\",\"source\":\"distrun\"");
  HAS("\"own\":{\"kind\":\"hang\",\"exit_code\":11,\"culprits\":[1],\"agrees\":false");
  distview("diagnose", p, NULL);
  HAS("hang (exit 11): rank 3 in group 1 (tp) at ALL_GATHER #6\n");
  HAS("distview's own analysis also finds: hang in group 0 (default) at #21 ALL_REDUCE: rank 1 "
      "is behind");
  distview("summary", p, NULL);
  cr_assert_eq(R.status, 0, "summary exits 0 whatever the outcome");
  HAS("outcome: hang (exit 11): rank 3 in group 1 (tp) at ALL_GATHER #6\n"
      "  distview's own analysis also finds: hang in group 0 (default)");
  HAS("  group 1   tp ");
  distview("summary", "--json", p, NULL);
  HAS("\"outcome\":{\"kind\":\"hang\",\"exit_code\":11,\"summary\":\"hang (exit 11): rank 3");
  HAS("\"source\":\"distrun\",\"group\":1,\"group_name\":\"tp\",\"culprits\":[3]");
}

/* 3 ranks in group 0: #1..#4 completed; ranks 0 and 2 blocked in #5, rank
 * 1 killed (lost) before it; rank 0's monitor diagnosed a lost peer. */
static const char *killed_story(void) {
  const char *p = vwt_path("killed.db");
  sqlite3 *db = fx_create(p, "job-killed", 3, 1);
  int three[] = {0, 1, 2};
  for (int r = 0; r < 3; r++)
    fx_rank(db, r, r == 1 ? "lost" : "finished");
  fx_group(db, 0, "default", three, 3);
  for (int s = 1; s <= 4; s++)
    fx_coll(db, 0, s, "ALL_REDUCE", three, 3);
  for (int r = 0; r < 3; r += 2) {
    int64_t t = fx_t(5, r);
    fx_op o = {r, 0, 5, "ALL_REDUCE", "failed", "float32", "[4,1024]", "SUM", "peer lost",
               4096, 16384, -1, t, t + 1000, t + 90000, 5};
    fx_op_add(db, &o);
  }
  fx_event(db, 0, 0, 5, "diagnosis", fx_t(6, 0), 5,
           "peer lost in group 0 (default, 3 ranks) at ALL_REDUCE #5\n"
           "  rank 1 (host node0, pid 4001) was killed by signal 9 (SIGKILL)\n"
           "  ranks 0,2 had entered ALL_REDUCE #5");
  fx_finish(db, fx_t(0, 0), fx_t(7, 0));
  return p;
}

Test(viewer_verdict, a_killed_rank_is_exit_12_with_or_without_a_verdict, .timeout = 60) {
  const char *p = killed_story();
  distview("diagnose", "--json", p, NULL);
  cr_assert_eq(R.status, 12, "a lost peer is a death, as distrun says, not a hang: %s",
               R.buf[0]);
  HAS("{\"kind\":\"died\",\"exit_code\":12,");
  HAS("\"culprits\":[1]");
  HAS("\"source\":\"distview\"");
  int culprits[] = {1};
  set_verdict(p, &(dist_trace_verdict){
      .kind = "died", .exit_status = 12, .culprits = culprits, .n_culprits = 1, .group_id = 0,
      .op = "ALL_REDUCE", .seq = 5, .reported_by = -1,
      .text = "rank 1 (pid 4001) was killed by signal 9 (SIGKILL)"});
  distview("diagnose", "--json", p, NULL);
  cr_assert_eq(R.status, 12);
  HAS("{\"kind\":\"died\",\"exit_code\":12,\"group\":0,\"seq\":5,\"op\":\"ALL_REDUCE\","
      "\"rank\":1,\"culprits\":[1]");
  HAS("\"source\":\"distrun\",\"reported_by\":-1");
  HAS("\"agrees\":true");
}

Test(viewer_verdict, an_interrupted_job_is_said_as_interrupted_with_distruns_status,
     .timeout = 60) {
  /* distrun got SIGTERM: the ranks it ended left rows that look like a hang */
  const char *p = vwt_path("v-int.db");
  fx_story_hang(p);
  set_verdict(p, &(dist_trace_verdict){.kind = "interrupted", .exit_status = 143,
                                       .group_id = -1, .reported_by = -1,
                                       .text = "distrun: interrupted by SIGTERM; ended the job"});
  distview("diagnose", "--json", p, NULL);
  cr_assert_eq(R.status, 143, "distrun's status: %s", R.buf[1]);
  HAS("{\"kind\":\"interrupted\",\"exit_code\":143,\"group\":-1,\"seq\":0,\"op\":\"\","
      "\"rank\":-1,\"culprits\":[]");
  HAS("\"own\":{\"kind\":\"hang\",\"exit_code\":11,\"culprits\":[1],\"agrees\":false");
  /* the TUI's header: the verdict first */
  vw_app app;
  char err[512];
  cr_assert_eq(vw_app_open(&app, p, 24, 80, err, sizeof err), 0, "%s", err);
  vw_app_render(&app);
  char line[256];
  vw_app_line(&app, 0, line, sizeof line);
  cr_assert(strstr(line, " distview  INTERRUPTED (exit 143)  job job-hang"), "%s", line);
  vw_app_line(&app, 1, line, sizeof line);
  cr_assert_str_eq(line, " interrupted (exit 143)");
  vw_app_close(&app);
}

Test(viewer_verdict, the_tui_headline_names_a_crash_and_its_group_by_name, .timeout = 60) {
  const char *p = vwt_path("v-crash.db");
  fx_story_hang(p);
  sql(p, "UPDATE groups SET description = 'dp' WHERE group_id = 0");
  int culprits[] = {1};
  set_verdict(p, &(dist_trace_verdict){
      .kind = "crash", .exit_status = 12, .culprits = culprits, .n_culprits = 1, .group_id = 0,
      .op = "BROADCAST", .seq = 20, .site = "train.c:61 in step()", .reported_by = 1,
      .text = "rank 1 crashed: SIGSEGV"});
  vw_app app;
  char err[512], line[256];
  cr_assert_eq(vw_app_open(&app, p, 24, 80, err, sizeof err), 0, "%s", err);
  vw_app_render(&app);
  vw_app_line(&app, 0, line, sizeof line);
  cr_assert(strstr(line, " distview  CRASH (exit 12)"), "%s", line);
  vw_app_line(&app, 1, line, sizeof line);
  cr_assert_str_eq(line, " crash (exit 12): rank 1 in group 0 (dp) at BROADCAST #20, called from");
  cr_assert(vw_app_screen_has(&app, "group 0 'dp' [ ]"), "the tab line names the group");
  vw_app_close(&app);
}

/* 2 ranks: #1..#4 completed; rank 1 died of signal sig at #5 (its ring was
 * imported: end_state 'crashed'); rank 0's checking layer then reported
 * that rank 1 "left the group". */
static const char *crash_left_story(int sig) {
  const char *p = vwt_path(sig == 11 ? "crash-left.db" : "term-left.db");
  sqlite3 *db = fx_create(p, "job-crash", 2, 1);
  int two[] = {0, 1};
  fx_rank(db, 0, "finished");
  fx_rank(db, 1, "crashed");
  fx_group(db, 0, "default", two, 2);
  for (int s = 1; s <= 4; s++)
    fx_coll(db, 0, s, "ALL_REDUCE", two, 2);
  fx_event(db, 1, -1, -1, "crash", fx_t(5, 1), sig, sig == 11 ? "rank 1: SIGSEGV in step "
           "(train.c:61)" : "killed by signal 15 (Terminated)");
  fx_event(db, 0, 0, 5, "desync_report", fx_t(6, 0), 4,
           "desync in group 0 (default, 2 ranks) at ALL_REDUCE #5: rank 1 left the group "
           "(destroyed it or exited) before this collective; the collective counts differ\n"
           "  rank 0: at ALL_REDUCE #5 (collective 5 of the group), called from train.c:40\n"
           "  rank 1 (host node0, pid 4001): left after 4 collectives  <- collective count "
           "differs");
  fx_finish(db, fx_t(0, 0), fx_t(7, 0));
  return p;
}

Test(viewer_verdict, without_a_verdict_a_crash_outranks_the_left_the_group_reports,
     .timeout = 60) {
  const char *p = crash_left_story(11);
  distview("diagnose", "--json", p, NULL);
  cr_assert_eq(R.status, 12, "the crash, not a desync: %s", R.buf[0]);
  HAS("{\"kind\":\"died\",\"exit_code\":12,");
  HAS("\"rank\":1,\"culprits\":[1]");
  distview("diagnose", p, NULL);
  HAS("rank 1 crashed (host node0, pid 4001); what the others then reported follows from it\n"
      "rank 1: SIGSEGV in step (train.c:61)\n");
}

/* Rank 0's report, at 7 s, that rank 1 left group g ("tp") before its
 * first all_gather there. */
static void left_report(sqlite3 *db, int g) {
  char msg[512];
  snprintf(msg, sizeof msg,
           "desync in group %d (tp, 2 ranks) at ALL_GATHER #1: rank 1 left the group "
           "(destroyed it or exited) before this collective; the collective counts differ\n"
           "  rank 0: at ALL_GATHER #1 (collective 1 of the group), called from mesh.c:90\n"
           "  rank 1 (host node0, pid 4001): left after 0 collectives  <- collective count "
           "differs", g);
  fx_event(db, 0, g, 1, "desync_report", fx_t(7, 0), 4, msg);
}

/* 3 ranks; group 0 is all of them, group 1 ranks 0 and 1. #1..#4 of
 * group 0 completed; rank 2 entered #5 and was killed there (lost: no
 * end, no dump) when killed, else it finished #5; rank 1's #5 failed on
 * the lost peer and it exited with an error; rank 0, in group 1's #1,
 * then reported that rank 1 "left the group". */
static const char *lost_left_story(bool killed) {
  const char *p = vwt_path(killed ? "lost-left.db" : "exit-left.db");
  sqlite3 *db = fx_create(p, "job-lost", 3, 1);
  int three[] = {0, 1, 2}, two[] = {0, 1};
  fx_rank(db, 0, "exited");
  fx_rank(db, 1, "exited");
  fx_rank(db, 2, killed ? "lost" : "finished");
  fx_group(db, 0, "default", three, 3);
  fx_group(db, 1, "tp", two, 2);
  for (int s = 1; s <= 4; s++)
    fx_coll(db, 0, s, "ALL_REDUCE", three, 3);
  int64_t t2 = fx_t(5, 2), t1 = fx_t(5, 1);
  fx_op lost = {2, 0, 5, "ALL_REDUCE", killed ? "started" : "completed", "float32", "[4]",
                "SUM", NULL, 4, 16, -1, t2, t2 + 1000, killed ? -1 : t2 + 90000, 0};
  fx_op_add(db, &lost);
  fx_op failed = {1, 0, 5, "ALL_REDUCE", "failed", "float32", "[4]", "SUM", "peer lost",
                  4, 16, -1, t1, t1 + 1000, t1 + 90000, 5};
  fx_op_add(db, &failed);
  left_report(db, 1);
  fx_finish(db, fx_t(0, 0), fx_t(8, 0));
  return p;
}

Test(viewer_verdict, without_a_verdict_a_lost_rank_outranks_a_rank_that_left_after_it,
     .timeout = 60) {
  const char *p = lost_left_story(true);
  distview("diagnose", "--json", p, NULL);
  cr_assert_eq(R.status, 12, "the lost rank, not the one that left after it: %s", R.buf[0]);
  HAS("{\"kind\":\"died\",\"exit_code\":12,");
  HAS("\"rank\":2,\"culprits\":[2]");
  distview("diagnose", p, NULL);
  HAS("rank 2 was lost (");
  /* with nobody lost, the rank that left is the culprit */
  p = lost_left_story(false);
  distview("diagnose", "--json", p, NULL);
  cr_assert_eq(R.status, 10, "the stored desync report: %s", R.buf[0]);
  HAS("\"rank\":1,\"culprits\":[1]");
}

/* Three ranks; rank 1 leaves: it ends on its own (mode 'e': exit, its
 * trace ends 'exited' with nothing of its failed), or because rank 2
 * aborted group 1, which failed rank 1's and rank 2's #1 there with rank
 * 2's reason (mode 'a'). Rank 0 then reports that rank 1 "left" group 2. */
static const char *left_story(char mode) {
  const char *p = vwt_path(mode == 'a' ? "abort-left.db" : "end-left.db");
  sqlite3 *db = fx_create(p, "job-left", 3, 1);
  int three[] = {0, 1, 2}, g1[] = {1, 2}, g2[] = {0, 1};
  for (int r = 0; r < 3; r++)
    fx_rank(db, r, "exited");
  fx_group(db, 0, "default", three, 3);
  fx_group(db, 1, "dp", g1, 2);
  fx_group(db, 2, "tp", g2, 2);
  for (int s = 1; s <= 3; s++)
    fx_coll(db, 0, s, "ALL_REDUCE", three, 3);
  for (int r = 1; mode == 'a' && r <= 2; r++) {
    int64_t t = fx_t(5, r);
    fx_op f = {r, 1, 1, "ALL_REDUCE", "failed", "float32", "[4]", "SUM",
               "aborted in group 1 (dp, 2 ranks) at ALL_REDUCE #1: rank 2 called "
               "dist_abort_group on group 1 (dp): out of memory",
               4, 16, -1, t, t + 1000, t + 9000, 7};
    fx_op_add(db, &f);
  }
  left_report(db, 2);
  fx_finish(db, fx_t(0, 0), fx_t(8, 0));
  return p;
}

Test(viewer_verdict, without_a_verdict_a_rank_that_left_by_its_own_end_is_a_death,
     .timeout = 60) {
  distview("diagnose", "--json", left_story('e'), NULL);
  cr_assert_eq(R.status, 12, "rank 1's end, not the desync it caused: %s", R.buf[0]);
  HAS("{\"kind\":\"died\",\"exit_code\":12,");
  HAS("\"rank\":1,\"culprits\":[1]");
  HAS("rank 1 ended (its trace ends 'exited') while its peers still needed it");
}

Test(viewer_verdict, without_a_verdict_a_group_abort_outranks_the_desync_after_it,
     .timeout = 60) {
  distview("diagnose", "--json", left_story('a'), NULL);
  cr_assert_eq(R.status, 12, "rank 2's abort, not rank 1 that left after it: %s", R.buf[0]);
  HAS("{\"kind\":\"died\",\"exit_code\":12,");
  HAS("\"rank\":2,\"culprits\":[2]");
  HAS("aborted: aborted in group 1 (dp, 2 ranks) at ALL_REDUCE #1");
}

Test(viewer_verdict, a_rank_ended_by_sigterm_is_not_a_crash, .timeout = 60) {
  /* distrun (or the user) ended rank 1: its ring was dumped, so the trace
   * marks it 'crashed', but SIGTERM explains nothing; the report stands */
  const char *p = crash_left_story(15);
  distview("diagnose", "--json", p, NULL);
  cr_assert_eq(R.status, 10, "the stored desync report, not a crash: %s", R.buf[0]);
  HAS("{\"kind\":\"desync\",\"exit_code\":10,");
  HAS("\"rank\":1,\"culprits\":[1]");
}

Test(viewer_verdict, an_older_trace_keeps_distviews_own_analysis_and_names_groups,
     .timeout = 60) {
  /* the fixture's schema predates the verdict table */
  const char *p = vwt_path("old.db");
  fx_story_desync(p, false);
  sql(p, "UPDATE groups SET description = 'dp' WHERE group_id = 0");
  distview("diagnose", "--json", p, NULL);
  cr_assert_eq(R.status, 10, "%s", R.buf[1]);
  HAS("{\"kind\":\"desync\",\"exit_code\":10,\"group\":0,\"seq\":13,\"op\":\"ALL_REDUCE\","
      "\"rank\":2,\"culprits\":[2]");
  HAS("\"group_name\":\"dp\",\"site\":\"\",\"source\":\"distview\",\"summary\":\"desync in "
      "group 0 (dp) at #13 ALL_REDUCE");
  cr_assert_null(strstr(R.buf[0], "\"own\""), "no verdict, no comparison");
  distview("summary", p, NULL);
  HAS("  group 0   dp                   cpu");
  HAS("outcome: desync in group 0 (dp) at #13 ALL_REDUCE: rank 2 differs in shape\n");
}

Test(viewer_verdict, a_desync_reports_culprits_are_every_differs_line, .timeout = 60) {
  /* the rows were cut before #13; the report marks ranks 1 and 2 */
  const char *p = vwt_path("two.db");
  fx_story_desync(p, false);
  sql(p, "DELETE FROM operations WHERE seq = 13;"
         "INSERT INTO events VALUES (0, 0, 13, 'desync_report', 1013000000, 4, NULL,"
         " 'desync in group 0 (default, 4 ranks) at ALL_REDUCE #13: ranks disagree on the count"
         "\n  ranks 0,3: ALL_REDUCE float32[4096]"
         "\n  rank 1 (group rank 1): ALL_REDUCE float32[2048]  <- count differs"
         "\n  rank 2 (group rank 2): ALL_REDUCE float32[1024]  <- count differs')");
  distview("diagnose", "--json", p, NULL);
  cr_assert_eq(R.status, 10, "%s", R.buf[1]);
  HAS("\"rank\":1,\"culprits\":[1,2]");
}
