/* ctest: labels=unit timeout=60 */
/* test_screens.c - the viewer's screens without a terminal: fixture traces
 * of a desync, a hang and a deadlock rendered at 80x24 and 200x60, and the
 * first screen must say what happened and who is to blame: the diagnosis
 * in the header, the culprit's matrix row marked at the operation, and the
 * fingerprint difference in the detail. */
#include <criterion/criterion.h>

#include "vw_test.h"

static vw_app app;

static void open_story(void (*story)(const char *), const char *name, int rows, int cols) {
  const char *p = vwt_path(name);
  story(p);
  char err[512];
  cr_assert_eq(vw_app_open(&app, p, rows, cols, err, sizeof err), 0, "open: %s", err);
  vw_app_render(&app);
}

static void desync_story(const char *p) { fx_story_desync(p, true); }

static void expect_line(const char *has, const char *exact) {
  char buf[512];
  const char *l = vwt_line_with(&app, has, buf, sizeof buf);
  if (!l)
    vwt_dump(&app);
  cr_assert_not_null(l, "no line with '%s'", has);
  if (exact)
    cr_assert_str_eq(l, exact, "line with '%s':\n'%s'", has, l);
}

static void expect_has(const char *s) {
  if (!vw_app_screen_has(&app, s))
    vwt_dump(&app);
  cr_assert(vw_app_screen_has(&app, s), "screen lacks '%s'", s);
}

Test(viewer_screens, desync_80x24_names_the_rank_marks_it_and_shows_the_shape_diff, .timeout = 20) {
  open_story(desync_story, "desync.db", 24, 80);
  expect_line(" distview  DESYNC",
              " distview  DESYNC (exit 10)  job job-desync | 4 ranks | 1 group | 14.0 ms");
  expect_line("desync in group 0",
              " desync in group 0 (default) at #13 ALL_REDUCE: rank 2 differs in shape");
  /* the matrix: rank 2 tagged and '!' at #13, the others failed there */
  expect_line("2 DIFF", ">        2 DIFF  ############!");
  expect_line("         0       ", "         0       ############X");
  expect_line("         3       ", "         3       ############X");
  expect_line(" rank 2 #13:", NULL);
  /* the detail under it: the field, both values, the flagged cell */
  expect_line("fingerprint DIFFERS",
              " fingerprint DIFFERS in shape: rank 2 has [4,512], ranks 0,1,3 have [4,1024]");
  expect_line("*[4,512]", NULL);
  cr_assert_eq(app.canvas.rows, 24, "rows");
  vw_app_close(&app);
}

Test(viewer_screens, desync_200x60_shows_all_panes_with_the_report_event, .timeout = 20) {
  open_story(desync_story, "desync.db", 60, 200);
  expect_has("DESYNC (exit 10)");
  expect_has("2 DIFF  ############!");
  expect_has("fingerprint DIFFERS in shape: rank 2 has [4,512], ranks 0,1,3 have [4,1024]");
  expect_has(" Timeline: ");
  expect_has(" Events: 2 ");
  /* the stored report is selected in the events list and shown in full */
  expect_line(">+13.3 ms", NULL);
  expect_has("desync_report");
  expect_has("rank 2:      ALL_REDUCE float32 [4,512] SUM");
  expect_has("(the job's own desync_report from rank 0 is in Events)");
  vw_app_close(&app);
}

Test(viewer_screens, hang_80x24_marks_the_lagging_rank_and_the_blocked_op, .timeout = 20) {
  open_story(fx_story_hang, "hang.db", 24, 80);
  expect_line(" distview  HANG (exit 11)  job job-hang", NULL);
  expect_has("hang in group 0 (default) at #21 ALL_REDUCE: rank 1 is behind");
  expect_line("1 LAG", ">        1 LAG   ####################?");
  expect_line("         0       ", "         0       ####################>");
  expect_line("         2       ", "         2       ####################>");
  expect_has(" rank 1 #21: never entered   (its last: #20, last completed: #20)");
  expect_has(" never entered by rank 1");
  vw_app_close(&app);
}

Test(viewer_screens, hang_200x60_timeline_and_events, .timeout = 20) {
  open_story(fx_story_hang, "hang.db", 60, 200);
  expect_has("rank 1 (host node0, pid 4001) has not entered ALL_REDUCE #21: last completed "
             "BROADCAST #20; its trace ends lost");
  expect_has(">        1 LAG   ####################?");
  expect_has("peer_lost");
  /* rank 1's timeline stops where it stopped; the others run to the end */
  char r1[512], r0[512];
  cr_assert_not_null(vwt_line_with(&app, ">    1  GGG", r1, sizeof r1), "rank 1 timeline");
  cr_assert_not_null(vwt_line_with(&app, "     0  GGG", r0, sizeof r0), "rank 0 timeline");
  int n1 = 0, n0 = 0;   // busy columns of the timeline (left of the right-hand panes)
  for (int x = VW_TL_LABEL; x < 100; x++) {
    n1 += r1[x] != ' ';
    n0 += r0[x] != ' ';
  }
  cr_assert_lt(n1, n0 / 2, "rank 1 stops early (%d of %d columns)", n1, n0);
  cr_assert_gt(n0, (100 - VW_TL_LABEL) * 9 / 10, "rank 0 is busy to the end (blocked in #21)");
  cr_assert_eq(r0[99], 'A', "rank 0 is still in ALL_REDUCE #21 at the end");
  vw_app_close(&app);
}

Test(viewer_screens, deadlock_80x24_names_the_cycle, .timeout = 20) {
  open_story(fx_story_deadlock, "deadlock.db", 24, 80);
  expect_has("DEADLOCK (exit 11)");
  expect_line(" deadlock:", " deadlock: ranks 0,1 wait for each other in a cycle across groups");
  expect_line("rank 0 waits", "   rank 0 waits in group 1 (a) ALL_REDUCE #5 for rank 1");
  expect_line("0 CYC", ">        0 CYC   ####>");
  expect_line("1 CYC", "         1 CYC   ####.");
  vw_app_close(&app);
}

Test(viewer_screens, deadlock_200x60_shows_both_waits, .timeout = 20) {
  open_story(fx_story_deadlock, "deadlock.db", 60, 200);
  expect_has("rank 0 waits in group 1 (a) ALL_REDUCE #5 for rank 1");
  expect_has("rank 1 waits in group 2 (b) BROADCAST #5 for rank 0");
  expect_has(" never entered by rank 1");
  vw_app_close(&app);
}

Test(viewer_screens, healthy_trace_says_ok, .timeout = 20) {
  open_story(fx_story_ok, "ok.db", 24, 80);
  expect_line(" distview  OK  job job-ok", NULL);
  expect_has("no desync, hang or failure in this trace");
  expect_has("fingerprint: every rank that entered it agrees");
  vw_app_close(&app);
}

Test(viewer_screens, resize_switches_between_one_pane_and_all_four, .timeout = 20) {
  open_story(fx_story_hang, "hang.db", 24, 80);
  cr_assert(!vw_app_screen_has(&app, " Events: "), "80x24 shows no events pane");
  cr_assert_eq(vw_app_resize(&app, 60, 200), 0, "resize");
  vw_app_render(&app);
  expect_has(" Events: ");
  expect_has(" Timeline: ");
  cr_assert_eq(vw_app_resize(&app, 10, 30), 0, "tiny");
  vw_app_render(&app);   // must not crash or write outside the canvas
  expect_has("HANG");
  vw_app_close(&app);
}

/* The detail of a CUDA collective: each rank's GPU start after its enqueue
 * and its time on the GPU, as extra columns, and the selected rank's in
 * words on the bottom line (which fits 80 columns, where the columns past
 * the duration are cut like the arrival and call site always were); an
 * operation without gpu events keeps the columns it always had. */
#define OLD_HEAD "  rank state      op             dtype    shape        root redop duration   " \
                 "arrival    st   callsite"

Test(viewer_screens, gpu_detail_shows_each_ranks_gpu_start_and_time, .timeout = 20) {
  open_story(fx_story_gpu, "gpu.db", 24, 120);
  /* #6 BARRIER ran on no GPU: the detail is the one every trace had */
  expect_line(" Detail: ", NULL);
  expect_line("  rank state", OLD_HEAD);
  expect_line(">   0 completed  BARRIER", ">   0 completed  BARRIER        -        -            -1"
              "   -     499.0 us   0 ns       0    -");
  cr_assert(!vw_app_screen_has(&app, "GPU"), "no GPU words for #6");
  vw_app_keys(&app, "h");   // #5 BROADCAST
  expect_line("  rank state", "  rank state      op             dtype    shape        root redop "
              "duration   gpu start  gpu time   arrival    st   calls");
  expect_line(">   0 completed  BROADCAST", ">   0 completed  BROADCAST      float32  [4,1024]"
              "     0    -     499.0 us   20.0 us    250.0 us   0 ns       0    -");
  expect_line("    1 completed  BROADCAST", "    1 completed  BROADCAST      float32  [4,1024]"
              "     0    -     499.0 us   25.0 us    260.0 us   10.0 us    0    -");
  expect_line(" rank 0 GPU:", " rank 0 GPU: started 20.0 us after enqueue, ran 250.0 us (call: "
              "499.0 us)");
  vw_app_keys(&app, "h");   // #4: rank 1's gpu event is missing
  expect_line("    1 completed  ALL_REDUCE", "    1 completed  ALL_REDUCE     float32  [4,1024]"
              "     -1   SUM   499.0 us   -          -          10.0 us    0    -");
  vw_app_close(&app);
}

Test(viewer_screens, gpu_detail_at_80x24_names_the_selected_ranks_gpu_times, .timeout = 20) {
  open_story(fx_story_gpu, "gpu.db", 24, 80);
  vw_app_keys(&app, "hh<Enter>j");   // #4 across ranks, rank 1 selected: no GPU event
  expect_line(" Detail: group 0 (default) #4 ALL_REDUCE", NULL);
  cr_assert(!vw_app_screen_has(&app, "GPU:"), "rank 1 has no GPU times for #4");
  vw_app_keys(&app, "lk");           // #5, rank 0
  expect_line(" rank 0 GPU:", " rank 0 GPU: started 20.0 us after enqueue, ran 250.0 us (call: "
              "499.0 us)");
  vw_app_keys(&app, "j");
  expect_line(" rank 1 GPU:", " rank 1 GPU: started 25.0 us after enqueue, ran 260.0 us (call: "
              "499.0 us)");
  vw_app_close(&app);
}

/* 1,024 ranks, rank 700 never entered #5 where the 1,023 others wait: the
 * first screen folds the alike ranks into one row on each side of rank
 * 700, which is on a row of its own with its tag, so nobody scrolls
 * through 700 rows to find it. */
static void lag_1024_story(const char *p) { fx_story_lag(p, 1024, 700, 5); }

Test(viewer_screens, lag_1024_80x24_folds_alike_ranks_around_the_lagging_one, .timeout = 30) {
  open_story(lag_1024_story, "lag1024.db", 24, 80);
  expect_has("hang in group 0 (default) at #5 ALL_REDUCE: rank 700 is behind");
  expect_line(" Progress:", " Progress: group 0 'default', 1024 ranks in 3 rows (z: unfold), "
              "#1..#5   # done");
  char a[512], b[512], c[512], w[512];
  int y = 0;
  while (y < app.canvas.rows && !strstr(vw_app_line(&app, y, a, sizeof a), "  rank  seq:"))
    y++;
  cr_assert_lt(y + 4, app.canvas.rows, "no matrix axis");
  /* the three rows right under the axis, then the cursor's cell in words */
  cr_assert_str_eq(vw_app_line(&app, y + 1, a, sizeof a), "     0-699 x700  ####>");
  cr_assert_str_eq(vw_app_line(&app, y + 2, b, sizeof b), ">      700 LAG   ####?");
  cr_assert_str_eq(vw_app_line(&app, y + 3, c, sizeof c), "  701-1023 x323  ####>");
  cr_assert_str_eq(vw_app_line(&app, y + 4, w, sizeof w),
                   " rank 700 #5: never entered   (its last: #4, last completed: #4)   Enter: "
                   "across");
  /* the detail of #5 still fits under the folded matrix, counting every
   * rank (it stopped at 256 and named 256.. as never entering) */
  expect_has(" Detail: group 0 (default) #5 ALL_REDUCE across ranks (1023 of 1024 ranks "
             "entere"); /* the 80th column */
  expect_has(" never entered by rank 700");
  cr_assert(!vw_app_screen_has(&app, "256,"), "no rank past 256 is said to be missing");
  vw_app_close(&app);
}

Test(viewer_screens, lag_1024_200x60_folds_too, .timeout = 30) {
  open_story(lag_1024_story, "lag1024.db", 60, 200);
  expect_has("     0-699 x700  ####>");
  expect_has(">      700 LAG   ####?");
  expect_has("  701-1023 x323  ####>");
  vw_app_close(&app);
}

/* Four ranks fit on the screen: one row each, as before, no fold. */
Test(viewer_screens, small_group_is_not_folded, .timeout = 20) {
  open_story(fx_story_ok, "ok.db", 24, 80);
  expect_line(" Progress:", NULL);
  cr_assert(!vw_app_screen_has(&app, "(z: unfold)"), "not folded");
  expect_line(">        0       ", ">        0       ###############################");
  expect_line("         3       ", "         3       ###############################");
  vw_app_close(&app);
}
