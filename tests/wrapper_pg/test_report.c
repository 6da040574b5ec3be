/* ctest: labels=unit timeout=30 */
/* The checking layer's pieces without processes: report lines (ranks
 * grouped by value, ranges compressed, the minority marked, group ranks
 * beside global ones, one called-from line) and fingerprints (which field
 * differs first; all_to_all sizes that cancel out over the group). */
#include <criterion/criterion.h>
#include <string.h>

#include "wpg_int.h"

static const char *field(void *arg, int cls, int major) {
  (void)arg;
  (void)major;
  return cls == 1 ? "shape" : "dtype";
}

static const char *rows_text(const wpg_row *rows, int n) {
  static char buf[4096];
  size_t off = 0;
  buf[0] = '\0';
  wpg_report_rows(buf, sizeof buf, &off, rows, n, field, NULL);
  return buf;
}

Test(wrapper_pg_report, ranks_group_by_value_with_ranges_and_the_minority_marked, .timeout = 10) {
  wpg_row r[6];
  for (int i = 0; i < 6; i++) {
    bool odd = i == 1 || i == 4;
    r[i] = (wpg_row){.global = i, .grank = i, .cls = odd ? 1 : 0, .text = odd ? "B" : "A",
                     .site = "x.c:3 in f()"};
  }
  cr_assert_str_eq(rows_text(r, 6), "  ranks 0,2-3,5: A\n"
                                    "  ranks 1,4:     B  <- shape differs\n"
                                    "  called from x.c:3 in f() (ranks 0-5)\n");
}

Test(wrapper_pg_report, a_tie_keeps_the_lowest_ranks_value_unmarked, .timeout = 10) {
  wpg_row r[4];
  for (int i = 0; i < 4; i++)
    r[i] = (wpg_row){.global = i, .grank = i, .cls = i < 2 ? 0 : 2, .text = i < 2 ? "A" : "C",
                     .site = i == 3 ? "y.c:9 in g()" : "x.c:3 in f()"};
  cr_assert_str_eq(rows_text(r, 4), "  ranks 0-1: A\n"
                                    "  ranks 2-3: C  <- dtype differs\n"
                                    "  called from x.c:3 in f() (ranks 0-2), y.c:9 in g() (rank 3)\n");
}

Test(wrapper_pg_report, group_ranks_stand_beside_global_ones, .timeout = 10) {
  wpg_row r[3] = {
      {.global = 4, .grank = 0, .cls = 0, .text = "A"},
      {.global = 5, .grank = 1, .cls = 0, .text = "A"},
      {.global = 7, .grank = 2, .cls = 1, .text = "B"},
  };
  cr_assert_str_eq(rows_text(r, 3), "  ranks 4-5 (group ranks 0-1): A\n"
                                    "  rank 7 (group rank 2):       B  <- shape differs\n");
}

/* --- fingerprints -------------------------------------------------------- */

static const int members[3] = {0, 1, 2};
static const dist_pg_info info3 = {.group_id = 0, .name = "0", .desc = "default", .size = 3,
                                   .global_ranks = members};

static wpg_fp fp_of(int rank, const dist_coll *c) {
  wpg w = {.info = &info3, .size = 3, .rank = rank};
  wpg_fp fp;
  wpg_fp_make(&w, c, &fp);
  return fp;
}

Test(wrapper_pg_report, the_first_differing_field_is_named, .timeout = 10) {
  float a[4];
  dist_tensor t4 = dist_tensor_1d(a, DIST_FLOAT32, 4), t2x2 = t4, i4 = t4, t3 = t4;
  t2x2.ndim = 2;
  t2x2.shape[0] = t2x2.shape[1] = 2;
  i4.dtype = DIST_INT32;
  t3.shape[0] = 3;
  dist_coll c = {.kind = DIST_OP_ALL_REDUCE, .inputs = &t4, .n_inputs = 1, .outputs = &t4,
                 .n_outputs = 1, .redop = DIST_SUM, .root = -1};
  wpg_fp base = fp_of(0, &c);
  cr_assert_eq(wpg_fp_diff(&base, &base), WPG_F_NONE);
  c.inputs = c.outputs = &t2x2;
  wpg_fp x = fp_of(1, &c);
  cr_assert_eq(wpg_fp_diff(&x, &base), WPG_F_SHAPE);
  c.inputs = c.outputs = &t3;
  x = fp_of(1, &c);
  cr_assert_eq(wpg_fp_diff(&x, &base), WPG_F_COUNT);
  c.inputs = c.outputs = &i4;
  x = fp_of(1, &c);
  cr_assert_eq(wpg_fp_diff(&x, &base), WPG_F_DTYPE);
  c.inputs = c.outputs = &t4;
  c.redop = DIST_MAX;
  x = fp_of(1, &c);
  cr_assert_eq(wpg_fp_diff(&x, &base), WPG_F_REDOP);
  c.kind = DIST_OP_BROADCAST;
  x = fp_of(1, &c);
  cr_assert_eq(wpg_fp_diff(&x, &base), WPG_F_OP);
  /* The call site travels but is never compared. */
  x = base;
  x.caller_off = 0x1234;
  cr_assert_eq(wpg_fp_diff(&x, &base), WPG_F_NONE);
}

/* Rank r sends send[r][j] rows to rank j; rank j expects recv[j][r]. */
static bool splits_agree(const int64_t send[3][3], const int64_t recv[3][3]) {
  int32_t in[16], out[16];
  wpg_fp all[3];
  for (int r = 0; r < 3; r++) {
    int64_t ni = send[r][0] + send[r][1] + send[r][2], no = recv[r][0] + recv[r][1] + recv[r][2];
    dist_tensor ti = dist_tensor_1d(in, DIST_INT32, ni), to = dist_tensor_1d(out, DIST_INT32, no);
    dist_coll c = {.kind = DIST_OP_ALL_TO_ALL_SINGLE, .inputs = &ti, .n_inputs = 1,
                   .outputs = &to, .n_outputs = 1, .in_splits = send[r], .out_splits = recv[r],
                   .n_splits = 3, .root = -1};
    all[r] = fp_of(r, &c);
  }
  return wpg_fp_agree(all, 3);
}

Test(wrapper_pg_report, uneven_all_to_all_sizes_agree_only_when_they_pair_up, .timeout = 10) {
  const int64_t send[3][3] = {{1, 2, 0}, {3, 0, 1}, {2, 2, 2}};
  const int64_t ok[3][3] = {{1, 3, 2}, {2, 0, 2}, {0, 1, 2}}; /* recv[j][r] = send[r][j] */
  cr_assert(splits_agree(send, ok));
  int64_t bad[3][3];
  memcpy(bad, ok, sizeof bad);
  bad[2][1] = 2; /* rank 2 expects 2 rows from rank 1, which sends 1 */
  cr_assert(!splits_agree(send, bad));
}
