/* ctest: labels=unit timeout=30 */
/* test_fold.c - the matrix's rows (fold.c) on hand-made pages: alike
 * neighbours fold into one row, a rank whose cells differ or which the
 * diagnosis tags keeps a row of its own, a row differs when it is tagged or
 * unlike the group's majority, and the jumps find exactly those rows. The
 * screens built on it are in test_screens.c and test_keys.c. */
#include <criterion/criterion.h>

#include "vw_test.h"

enum { NR = 6, NS = 3 };

static const uint8_t D = VW_ST_DONE, R = VW_ST_RUN, N = VW_ST_NONE;

/* Ranks 10..15 at three columns: 12 is behind (never entered the last),
 * the others are alike. */
static uint8_t cells[NR * NS] = {D, D, R, D, D, R, D, D, N, D, D, R, D, D, R, D, D, R};
static int ranks[NR] = {10, 11, 12, 13, 14, 15};

static vw_matrix_page page(void) {
  return (vw_matrix_page){.group_id = 0, .seq0 = 1, .nseq = NS, .nrank = NR, .ranks = ranks,
                          .cells = cells};
}

static void expect_row(const vw_mx_row *r, int first, int n, bool differs) {
  cr_assert_eq(r->first, first, "first %d, want %d", r->first, first);
  cr_assert_eq(r->n, n, "row from %d: %d ranks, want %d", first, r->n, n);
  cr_assert_eq(r->differs, differs, "row from %d: differs %d", first, r->differs);
}

Test(viewer_fold, alike_neighbours_fold_and_the_odd_rank_stands_alone, .timeout = 10) {
  vw_model m = {0};
  vw_diag d = {.group_id = -1, .rank = -1};
  vw_matrix_page p = page();
  vw_mx_row rows[NR];
  int n = vw_fold_rows(&m, &d, &p, true, rows);
  cr_assert_eq(n, 3, "rows: %d", n);
  expect_row(&rows[0], 0, 2, false);
  expect_row(&rows[1], 2, 1, true);
  expect_row(&rows[2], 3, 3, false);
  n = vw_fold_rows(&m, &d, &p, false, rows);
  cr_assert_eq(n, NR, "unfolded: one row per rank");
  for (int i = 0; i < NR; i++)
    expect_row(&rows[i], i, 1, i == 2);
}

Test(viewer_fold, a_tagged_rank_keeps_its_row_among_alike_ones, .timeout = 10) {
  vw_model m = {0};
  vw_diag d = {.kind = VW_DIAG_HANG, .group_id = 0, .rank = 14, .n_culprits = 1,
               .culprits = {14}};
  vw_matrix_page p = page();
  vw_mx_row rows[NR];
  int n = vw_fold_rows(&m, &d, &p, true, rows);
  cr_assert_eq(n, 5, "rows: %d", n);
  expect_row(&rows[0], 0, 2, false);
  expect_row(&rows[1], 2, 1, true);
  expect_row(&rows[2], 3, 1, false);
  expect_row(&rows[3], 4, 1, true);   // rank 14: LAG, though its cells are the majority's
  expect_row(&rows[4], 5, 1, false);
  cr_assert_str_eq(vw_rank_tag(&m, &d, 0, 14), "LAG");
  cr_assert_str_eq(vw_rank_tag(&m, &d, 1, 14), "", "the culprit of another group");
}

Test(viewer_fold, jumps_find_the_rows_that_differ_and_stop_at_the_ends, .timeout = 10) {
  vw_model m = {0};
  vw_diag d = {.kind = VW_DIAG_HANG, .group_id = 0, .rank = 14, .n_culprits = 1,
               .culprits = {14}};
  vw_matrix_page p = page();
  vw_mx_row rows[NR];
  int n = vw_fold_rows(&m, &d, &p, true, rows);
  cr_assert_eq(vw_fold_next_diff(rows, n, 0, 1), 1);
  cr_assert_eq(vw_fold_next_diff(rows, n, 1, 1), 3);
  cr_assert_eq(vw_fold_next_diff(rows, n, 3, 1), -1, "nothing after the last");
  cr_assert_eq(vw_fold_next_diff(rows, n, 4, -1), 3);
  cr_assert_eq(vw_fold_next_diff(rows, n, 1, -1), -1, "nothing before the first");
  /* the row holding a rank, as the cursor follows it across a fold */
  cr_assert_eq(vw_fold_find(rows, n, 1), 0);
  cr_assert_eq(vw_fold_find(rows, n, 4), 3);
  cr_assert_eq(vw_fold_find(rows, n, 99), n - 1, "past the end: the last row");
}
