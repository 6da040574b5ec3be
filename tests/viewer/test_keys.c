/* ctest: labels=unit timeout=60 */
/* test_keys.c - key sequences drive the viewer as documented (README,
 * help screen): moving in the matrix, switching panes, opening an
 * operation and going back, searching with / n N, filtering with f,
 * help and quit. Pure key handling (input.c) is checked on its own too. */
#include <criterion/criterion.h>

#include <sqlite3.h>

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

static void expect_has(const char *s) {
  if (!vw_app_screen_has(&app, s))
    vwt_dump(&app);
  cr_assert(vw_app_screen_has(&app, s), "screen lacks '%s'", s);
}

Test(viewer_keys, j_k_move_between_ranks_and_h_l_between_operations, .timeout = 20) {
  open_story(desync_story, "desync.db", 24, 80);
  expect_has(" rank 2 #13: failed");
  vw_app_keys(&app, "j");
  expect_has(" rank 3 #13: failed");
  expect_has(">        3       ############X");
  vw_app_keys(&app, "kk<Up>");
  expect_has(" rank 0 #13: failed");
  vw_app_keys(&app, "h");
  expect_has(" rank 0 #12: completed");
  /* the detail under the matrix follows the cursor */
  expect_has(" Detail: group 0 (default) #12 ALL_REDUCE across ranks (4 of 4 ranks entered it)");
  expect_has("fingerprint: every rank that entered it agrees");
  vw_app_keys(&app, "g");
  expect_has(" rank 0 #1: completed");
  vw_app_keys(&app, "G<Left><Right>");
  expect_has(" rank 0 #13: failed");
  vw_app_keys(&app, "<Down><Down><Down><Down><Down>");   // past the last rank: stays
  expect_has(" rank 3 #13: failed");
  vw_app_close(&app);
}

Test(viewer_keys, enter_opens_the_operation_and_esc_goes_back, .timeout = 20) {
  open_story(desync_story, "desync.db", 24, 80);
  vw_app_keys(&app, "<Enter>");
  cr_assert_eq(app.st.pane, VW_P_DETAIL, "detail focused");
  expect_has(" Detail: group 0 (default) #13 ALL_REDUCE");
  expect_has(">   2 failed     ALL_REDUCE     float32  *[4,512]");   // the matrix cursor's rank
  vw_app_keys(&app, "kk");
  expect_has(">   0 ");
  vw_app_keys(&app, "h");   // previous operation across ranks
  expect_has(" Detail: group 0 (default) #12 ALL_REDUCE");
  vw_app_keys(&app, "<Esc>");
  cr_assert_eq(app.st.pane, VW_P_MATRIX, "back to the matrix");
  expect_has(" rank 2 #13: failed");
  vw_app_close(&app);
}

Test(viewer_keys, tab_cycles_panes_and_digits_jump, .timeout = 20) {
  open_story(fx_story_hang, "hang.db", 24, 80);
  vw_app_keys(&app, "<Tab>");
  expect_has(" Timeline: ");
  vw_app_keys(&app, "<Tab>");
  expect_has(" Detail: group 0 (default) #21");
  vw_app_keys(&app, "<Tab>");
  expect_has(" Events: 2 ");
  vw_app_keys(&app, "<Tab>");
  cr_assert_eq(app.st.pane, VW_P_MATRIX, "wrapped to the matrix");
  vw_app_keys(&app, "<BTab>");
  cr_assert_eq(app.st.pane, VW_P_EVENTS, "shift-tab goes back");
  vw_app_keys(&app, "2");
  cr_assert_eq(app.st.pane, VW_P_TIMELINE, "2: timeline");
  vw_app_close(&app);
}

Test(viewer_keys, events_enter_jumps_to_the_operation, .timeout = 20) {
  open_story(fx_story_hang, "hang.db", 24, 80);
  vw_app_keys(&app, "4");
  expect_has(">+3.0 ms");          // the first event (a log line) is selected
  vw_app_keys(&app, "<Enter>");
  expect_has("this event names no operation");
  vw_app_keys(&app, "j<Enter>");   // peer_lost names group 0 #21
  cr_assert_eq(app.st.pane, VW_P_DETAIL, "detail");
  expect_has(" Detail: group 0 (default) #21 ALL_REDUCE across ranks (3 of 4 ranks entered it)");
  expect_has(" never entered by rank 1");
  vw_app_keys(&app, "<Esc>");
  cr_assert_eq(app.st.pane, VW_P_EVENTS, "Esc returns to the events");
  vw_app_close(&app);
}

Test(viewer_keys, search_finds_ops_forward_and_backward, .timeout = 20) {
  open_story(fx_story_ok, "ok.db", 24, 80);
  vw_app_keys(&app, "g/BARRIER<Enter>");
  expect_has("'BARRIER': found #31");
  expect_has(" rank 0 #31: completed");
  vw_app_keys(&app, "n");
  expect_has("'BARRIER': no further match");
  vw_app_keys(&app, "/all_red<Enter>");   // LIKE is case-insensitive
  expect_has("no further match");
  vw_app_keys(&app, "N");
  expect_has("'all_red': found #30");
  vw_app_keys(&app, "N");
  expect_has("'all_red': found #29");
  vw_app_keys(&app, "/#7<Enter>");
  expect_has(" rank 0 #7: completed");
  vw_app_keys(&app, "/xyz<BS><BS><BS>ALL<Esc>");   // Esc cancels the prompt
  expect_has(" rank 0 #7: completed");
  cr_assert_str_eq(app.st.search, "#7", "the cancelled search is not kept");
  vw_app_close(&app);
}

Test(viewer_keys, search_in_events, .timeout = 20) {
  open_story(fx_story_hang, "hang.db", 24, 80);
  vw_app_keys(&app, "4/lost<Enter>");
  expect_has(">+60.0 ms   r0   peer_lost");
  vw_app_close(&app);
}

Test(viewer_keys, filter_by_rank_state_and_group, .timeout = 20) {
  open_story(fx_story_hang, "hang.db", 24, 80);
  vw_app_keys(&app, "frank=2<Enter>");
  expect_has(" filter: rank=2");
  expect_has(">        2       ####################>");
  cr_assert(!vw_app_screen_has(&app, "1 LAG"), "rank 1 filtered out");
  vw_app_keys(&app, "f<Enter>");
  expect_has("filter cleared");
  expect_has("1 LAG");
  /* state filter: completed cells hidden, the in-flight one kept */
  vw_app_keys(&app, "fstate=started<Enter>");
  expect_has(">        0                           >");
  expect_has("         1 LAG                       ?");
  vw_app_keys(&app, "fgroup=1<Enter>");
  expect_has(" Progress: group 1 'pairs', 2 ranks, #1..#5");
  vw_app_keys(&app, "fbogus<Enter>");
  expect_has("filter: 'bogus' is not key=value");
  vw_app_keys(&app, "fgroup=9<Enter>");
  expect_has("filter: no group 9 in this trace");
  vw_app_keys(&app, "[");
  expect_has(" Progress: group 0 'default'");
  vw_app_close(&app);
}

Test(viewer_keys, help_shows_the_key_table_and_q_quits, .timeout = 20) {
  open_story(fx_story_ok, "ok.db", 24, 80);
  vw_app_keys(&app, "?");
  expect_has("distview keys (any key closes)");
  expect_has("next / previous match");
  int f = vw_app_keys(&app, "q");   // closes the help, does not quit
  cr_assert_eq(f & VW_H_QUIT, 0, "q in help only closes it");
  cr_assert(!vw_app_screen_has(&app, "distview keys"), "help closed");
  f = vw_app_keys(&app, "jq");
  cr_assert(f & VW_H_QUIT, "q quits");
  vw_app_close(&app);
}

Test(viewer_keys, timeline_zoom_and_pan, .timeout = 20) {
  open_story(fx_story_hang, "hang.db", 24, 80);
  vw_app_keys(&app, "2");
  int64_t span = app.st.t_span;
  vw_app_keys(&app, "+");
  cr_assert_eq(app.st.t_span, span / 2, "zoom in halves the window");
  vw_app_keys(&app, "--");
  cr_assert_eq(app.st.t_span, span, "zoom out is clamped at the whole job");
  vw_app_keys(&app, "g");
  cr_assert_eq(app.st.t_cursor, app.m->job.t0, "g: the start");
  vw_app_keys(&app, "l");
  cr_assert_gt(app.st.t_cursor, app.m->job.t0, "l moves later");
  vw_app_keys(&app, "k<Enter>");   // rank 0 at the start: an ALL_GATHER of group 1
  vw_app_close(&app);
}

/* --- the matrix at 1,024 ranks: z folds, { } jump -------------------------------------- */

static void lag_1024_story(const char *p) { fx_story_lag(p, 1024, 700, 5); }

/* The line that follows the one containing `after`, or "" (the matrix's
 * rows are consecutive lines under its axis). */
static const char *line_after(const char *after, char *buf, size_t len) {
  char tmp[512];
  for (int y = 0; y + 1 < app.canvas.rows; y++)
    if (strstr(vw_app_line(&app, y, tmp, sizeof tmp), after))
      return vw_app_line(&app, y + 1, buf, len);
  buf[0] = '\0';
  return buf;
}

Test(viewer_keys, z_unfolds_the_folded_ranks_and_folds_them_again, .timeout = 30) {
  open_story(lag_1024_story, "lag1024.db", 24, 80);
  expect_has("     0-699 x700  ####>");
  vw_app_keys(&app, "k");   // onto the folded row: its words say how many ranks it stands for
  expect_has(">    0-699 x700  ####>");
  expect_has(" 700 ranks 0-699 #5: in flight   (rank 0's last: #5, last completed: #4)");
  vw_app_keys(&app, "z");   // one row per rank, the cursor on the first of them
  expect_has("one row per rank (z folds alike ranks)");
  cr_assert(!vw_app_screen_has(&app, "x700"), "unfolded");
  cr_assert(!vw_app_screen_has(&app, "(z: unfold)"), "the title says folded no more");
  char buf[512];
  cr_assert_str_eq(line_after("  rank  seq:", buf, sizeof buf), ">        0       ####>");
  cr_assert_str_eq(line_after(">        0 ", buf, sizeof buf), "         1       ####>");
  cr_assert_str_eq(line_after("         1 ", buf, sizeof buf), "         2       ####>");
  expect_has(" rank 0 #5: in flight   (its last: #5, last completed: #4)");
  vw_app_keys(&app, "jj");   // rank rows move one rank at a time now
  expect_has(" rank 2 #5: in flight");
  vw_app_keys(&app, "z");   // folded again, the cursor on the row holding rank 2
  expect_has(">    0-699 x700  ####>");
  expect_has("      700 LAG   ####?");
  vw_app_close(&app);
}

Test(viewer_keys, braces_jump_to_the_rank_that_differs, .timeout = 30) {
  open_story(lag_1024_story, "lag1024.db", 24, 80);
  vw_app_keys(&app, "k}");   // from the folded row 0-699 to rank 700
  expect_has(">      700 LAG   ####?");
  expect_has(" rank 700 #5: never entered");
  vw_app_keys(&app, "}");   // 701-1023 are alike and like the majority
  expect_has("no rank further down differs from the others at #1..#5");
  expect_has(">      700 LAG   ####?");
  vw_app_keys(&app, "j{");
  expect_has(">      700 LAG   ####?");
  /* unfolded, the jump crosses 700 rows and scrolls the matrix to rank 700 */
  vw_app_keys(&app, "kzg");
  expect_has(">        0       ####");
  vw_app_keys(&app, "}");
  char buf[512];
  expect_has(">      700 LAG   #");
  cr_assert_str_eq(line_after("      699       ", buf, sizeof buf), ">      700 LAG   ####?");
  cr_assert(!vw_app_screen_has(&app, "        0       #"), "scrolled past rank 0");
  vw_app_keys(&app, "{");
  expect_has("no rank further up differs from the others at #1..#5");
  vw_app_close(&app);
}

Test(viewer_keys, enter_on_a_folded_row_opens_the_detail_on_its_first_rank, .timeout = 30) {
  open_story(lag_1024_story, "lag1024.db", 24, 80);
  vw_app_keys(&app, "k}j");   // the folded row 701-1023
  expect_has("> 701-1023 x323  ####>");
  vw_app_keys(&app, "<Enter>");
  cr_assert_eq(app.st.pane, VW_P_DETAIL, "detail focused");
  expect_has("> 701 ");
  vw_app_close(&app);
}

/* 40 ranks, nothing diagnosed (no tag), but rank 9 never entered #3,
 * which the 39 others completed: its row differs from the majority's. */
static void odd_rank_story(const char *path) {
  sqlite3 *db = fx_create(path, "job-odd", 40, 1);
  int all[40], most[39];
  for (int r = 0, n = 0; r < 40; r++) {
    all[r] = r;
    fx_rank(db, r, "finished");
    if (r != 9)
      most[n++] = r;
  }
  fx_group(db, 0, "default", all, 40);
  fx_coll(db, 0, 1, "ALL_REDUCE", all, 40);
  fx_coll(db, 0, 2, "ALL_REDUCE", all, 40);
  fx_coll(db, 0, 3, "ALL_REDUCE", most, 39);
  fx_finish(db, fx_t(0, 0), fx_t(10, 0));
}

Test(viewer_keys, an_untagged_rank_unlike_the_majority_is_a_jump_target, .timeout = 30) {
  open_story(odd_rank_story, "odd.db", 24, 80);
  expect_has(">      0-8 x9    ###");
  expect_has("         9       ##.");
  expect_has("     10-39 x30   ###");
  vw_app_keys(&app, "}");
  expect_has(">        9       ##.");
  /* the cursor keeps its rank while another pane hides the matrix */
  vw_app_keys(&app, "<Tab><BTab>");
  expect_has(">        9       ##.");
  expect_has(" rank 9 #3: never entered");
  vw_app_keys(&app, "}");
  expect_has("no rank further down differs from the others at #1..#3");
  vw_app_close(&app);
}

/* A group that fits is not folded unless z asks; the help lists the keys. */
Test(viewer_keys, z_folds_a_small_group_on_request_and_help_lists_the_keys, .timeout = 20) {
  open_story(fx_story_ok, "ok.db", 24, 80);
  expect_has("         3       ###");
  vw_app_keys(&app, "z");
  expect_has("alike ranks folded into one row (z: one row per rank)");
  expect_has(">      0-3 x4    ###############################");
  expect_has(" 4 ranks 0-3 #31: completed");
  vw_app_keys(&app, "}");
  expect_has("no rank further down differs");
  vw_app_keys(&app, "?");
  expect_has("z           matrix: fold alike ranks into one row / one row per rank");
  expect_has("{ }         matrix: previous / next rank that differs");
  vw_app_close(&app);
}

/* --- input.c alone ------------------------------------------------------------------ */

Test(viewer_input, unknown_key_says_so_and_prompt_edits, .timeout = 10) {
  vw_state st = {.rows = 24, .cols = 80, .t_span = 1000000};
  cr_assert_eq(vw_handle_key(&st, 'Z'), VW_H_REDRAW, "redraw");
  cr_assert(strstr(st.msg, "'Z' does nothing"), "message: %s", st.msg);
  vw_handle_key(&st, '/');
  cr_assert_eq(st.mode, VW_M_SEARCH, "search prompt");
  vw_handle_key(&st, 'a');
  vw_handle_key(&st, 'b');
  vw_handle_key(&st, VW_K_BKSP);
  cr_assert_str_eq(st.prompt, "a", "prompt");
  int f = vw_handle_key(&st, VW_K_ENTER);
  cr_assert(f & VW_H_RELOAD, "search needs the model");
  cr_assert_eq(st.req, VW_REQ_SEARCH, "request");
  cr_assert_str_eq(st.search, "a", "search text");
}

Test(viewer_input, parse_filter, .timeout = 10) {
  vw_filter f;
  char why[128];
  cr_assert_eq(vw_parse_filter("group=1 rank=3 op=all state=failed", &f, why, sizeof why), 0,
               "%s", why);
  cr_assert_eq(f.group, 1, "group");
  cr_assert_eq(f.rank, 3, "rank");
  cr_assert_str_eq(f.op, "all", "op");
  cr_assert_str_eq(f.state, "failed", "state");
  cr_assert_eq(vw_parse_filter("", &f, why, sizeof why), 0, "empty clears");
  cr_assert_eq(f.rank, -1, "cleared");
  cr_assert_eq(vw_parse_filter("rank=x", &f, why, sizeof why), -1, "not a number");
  cr_assert_eq(vw_parse_filter("rank=-1", &f, why, sizeof why), -1, "negative");
  cr_assert_eq(vw_parse_filter("color=red", &f, why, sizeof why), -1, "unknown key");
  cr_assert(strstr(why, "unknown key 'color'"), "%s", why);
}

Test(viewer_input, every_documented_binding_has_a_handler, .timeout = 10) {
  int n;
  const vw_binding *b = vw_bindings(&n);
  int documented = 0;
  for (int i = 0; i < n; i++) {
    cr_assert_not_null(b[i].fn, "binding %d", i);
    documented += b[i].keys != NULL;
  }
  cr_assert_gt(documented, 15, "help lists the keys");
}

Test(viewer_keys, follow_tick_rereads_a_growing_trace, .timeout = 20) {
  /* --follow: each tick re-reads the file; rows the job commits meanwhile
   * show up (here: the lagging rank arrives and everybody completes #21) */
  const char *p = vwt_path("growing.db");
  fx_story_hang(p);
  char err[512];
  cr_assert_eq(vw_app_open(&app, p, 24, 80, err, sizeof err), 0, "%s", err);
  vw_app_render(&app);
  expect_has("HANG (exit 11)");
  sqlite3 *db;
  cr_assert_eq(sqlite3_open(p, &db), SQLITE_OK, "writer");
  cr_assert_eq(sqlite3_exec(db, "UPDATE operations SET state = 'completed', t_ended_ns = "
                                "t_started_ns + 1000 WHERE seq = 21;"
                                "INSERT INTO operations SELECT 1, group_id, seq, op, is_async, "
                                "state, dtype, shape, n_inputs, n_outputs, numel_in, numel_out, "
                                "bytes_in, bytes_out, root, tag, redop, timeout_ms, t_enqueued_ns, "
                                "t_started_ns, t_ended_ns, status, message, callsite_id FROM "
                                "operations WHERE rank = 0 AND group_id = 0 AND seq = 21;"
                                "UPDATE ranks SET end_state = 'finished'",
                            NULL, NULL, NULL), SQLITE_OK, "%s", sqlite3_errmsg(db));
  sqlite3_close(db);
  vw_app_keys(&app, "j");   // no tick: still the old screen
  expect_has("HANG (exit 11)");
  int f = vw_app_key(&app, VW_K_TICK);
  cr_assert(f & VW_H_RELOAD, "a tick reloads");
  vw_app_render(&app);
  expect_has(" distview  OK  job job-hang");
  expect_has("         1       #####################");
  vw_app_close(&app);
}
