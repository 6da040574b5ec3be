/* ctest: labels=multiproc timeout=180 */
/* The device mesh in full (torch's DeviceMesh): an explicit layout whose
 * groups are the layout's rows and columns (not the row-major ones), a mesh
 * over groups that already exist (from_group, 1-D and 2-D), get_all_groups,
 * local ranks and groups by dimension name, the rank at a coordinate, the
 * default group made from the environment when none exists, and every bad
 * layout, shape and name refused with DIST_E_INVAL and a message. Real
 * forked ranks; collectives on the mesh's groups check their members. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "mp.h"

/* Sum of the global ranks over g must be want (g's members are right). */
static int sum_is(const dist_test_ctx *ctx, dist_pg *g, int want, const char *what) {
  int32_t v = ctx->rank;
  dist_tensor t = dist_tensor_1d(&v, DIST_INT32, 1);
  CHECK_OK(ctx, dist_all_reduce(&t, DIST_SUM, g, NULL));
  CHECK(ctx, v == want, "%s: sum of ranks %d, want %d", what, v, want);
  return 0;
}

static int ranks_are(const dist_test_ctx *ctx, dist_pg *g, int a, int b, const char *what) {
  int got[4];
  size_t n = 0;
  CHECK_OK(ctx, dist_get_process_group_ranks(g, got, 4, &n));
  CHECK(ctx, n == 2 && got[0] == a && got[1] == b, "%s: ranks %d %d (n %zu), want %d %d", what,
        got[0], got[1], n, a, b);
  return 0;
}

static int expect_inval(const dist_test_ctx *ctx, int rc, const char *has, const char *what) {
  CHECK(ctx, rc == DIST_E_INVAL, "%s: %s, want DIST_E_INVAL", what, dist_status_name(rc));
  CHECK(ctx, strstr(dist_last_errmsg(), has), "%s: message '%s' lacks '%s'", what,
        dist_last_errmsg(), has);
  return 0;
}

/* --- explicit layout ------------------------------------------------------- */

/* layout {3,1,2,0} in 2 x 2: row 0 = {3,1}, row 1 = {2,0}; columns {3,2},
 * {1,0}. Row-major would give rows {0,1},{2,3}: every sum below differs. */
static int layout_rank(const dist_test_ctx *ctx) {
  CHECK_OK(ctx, dist_test_init_pg(ctx, NULL));
  const int layout[4] = {3, 1, 2, 0};
  const int64_t shape[2] = {2, 2};
  const char *names[2] = {"dp", "tp"};
  dist_device_mesh *m = NULL;
  CHECK_OK(ctx, dist_device_mesh_create("cpu", layout, shape, 2, names, &m));
  int r = ctx->rank, at = r == 3 ? 0 : r == 1 ? 1 : r == 2 ? 2 : 3;
  int coord[2], local;
  CHECK_OK(ctx, dist_mesh_get_coordinate(m, coord));
  CHECK(ctx, coord[0] == at / 2 && coord[1] == at % 2, "coordinate (%d,%d), want (%d,%d)",
        coord[0], coord[1], at / 2, at % 2);
  dist_pg *tp, *dp, *all[2] = {NULL, NULL};
  size_t n = 0;
  CHECK_OK(ctx, dist_mesh_get_group_by_name(m, "tp", &tp));
  CHECK_OK(ctx, dist_mesh_get_group_by_name(m, "dp", &dp));
  CHECK_OK(ctx, dist_mesh_get_all_groups(m, all, 2, &n));
  CHECK(ctx, n == 2 && all[0] == dp && all[1] == tp, "get_all_groups: n %zu", n);
  bool row0 = at < 2, col0 = at % 2 == 0;
  if (ranks_are(ctx, tp, row0 ? 1 : 0, row0 ? 3 : 2, "tp") ||
      ranks_are(ctx, dp, col0 ? 2 : 0, col0 ? 3 : 1, "dp") ||
      sum_is(ctx, tp, row0 ? 4 : 2, "tp") || sum_is(ctx, dp, col0 ? 5 : 1, "dp"))
    return 1;
  /* Local rank is the rank in the dimension's group (torch's): 3 sits at
   * column 0 of {3,1} but is group rank 1 of the group {1,3}. */
  CHECK_OK(ctx, dist_mesh_get_local_rank_by_name(m, "tp", &local));
  CHECK(ctx, local == dist_get_rank(tp) && local == (r == 3 || r == 2 ? 1 : 0),
        "local rank along tp %d", local);
  CHECK_OK(ctx, dist_mesh_get_local_rank_by_name(m, "dp", &local));
  CHECK(ctx, local == dist_get_rank(dp), "local rank along dp %d", local);
  int c[2] = {1, 0}, who = -1;
  CHECK_OK(ctx, dist_mesh_get_rank_at(m, c, &who));
  CHECK(ctx, who == 2 && dist_mesh_size(m, 1) == 2 && dist_mesh_ndim(m) == 2, "rank at (1,0) %d",
        who);
  CHECK(ctx, !strcmp(dist_mesh_get_dim_name(m, 0), "dp") && !strcmp(dist_mesh_get_dim_name(m, 1),
        "tp") && !dist_mesh_get_dim_name(m, 2) && dist_mesh_size(m, 2) == -1, "dim names");
  if (expect_inval(ctx, dist_mesh_get_local_rank_by_name(m, "pp", &local), "'pp'", "name pp") ||
      expect_inval(ctx, dist_mesh_get_group_by_name(m, "pp", &tp), "'pp'", "group pp") ||
      expect_inval(ctx, dist_mesh_get_local_rank_by_name(m, NULL, &local), "NULL", "NULL name"))
    return 1;
  c[0] = 2;
  if (expect_inval(ctx, dist_mesh_get_rank_at(m, c, &who), "outside", "coordinate 2"))
    return 1;
  dist_device_mesh_destroy(m);
  dist_test_finish();
  return 0;
}

Test(core_api, mesh_with_an_explicit_layout_groups_its_rows_and_columns, .timeout = 100) {
  cr_assert_eq(dist_test_ranks(4, layout_rank, NULL, 80), 0, "%s", dist_test_report());
}

/* --- bad input -------------------------------------------------------------- */

static int bad_rank(const dist_test_ctx *ctx) {
  CHECK_OK(ctx, dist_test_init_pg(ctx, NULL));
  const int64_t s22[2] = {2, 2}, s23[2] = {2, 3}, s0[2] = {4, 0};
  const int twice[4] = {0, 0, 1, 2}, outside[4] = {0, 1, 2, 7}, ok[6] = {0, 1, 2, 3, 4, 5};
  const char *dup[2] = {"dp", "dp"}, *hole[2] = {"dp", NULL};
  dist_device_mesh *m = (dist_device_mesh *)1;
  if (expect_inval(ctx, dist_device_mesh_create("cpu", twice, s22, 2, NULL, &m),
                   "names rank 0 twice", "duplicate rank") ||
      expect_inval(ctx, dist_device_mesh_create("cpu", outside, s22, 2, NULL, &m),
                   "rank 7, not a rank of the world", "rank 7") ||
      expect_inval(ctx, dist_device_mesh_create("cpu", ok, s23, 2, NULL, &m),
                   "the mesh holds 6 ranks but the world size is 4", "2 x 3") ||
      expect_inval(ctx, dist_init_device_mesh("cpu", s23, 2, NULL, &m),
                   "the mesh holds 6 ranks but the world size is 4", "init 2 x 3") ||
      expect_inval(ctx, dist_device_mesh_create("cpu", ok, s0, 2, NULL, &m),
                   "dimension 1 has size 0", "size 0") ||
      expect_inval(ctx, dist_device_mesh_create("cpu", ok, s22, 2, dup, &m),
                   "'dp' is given twice", "duplicate name") ||
      expect_inval(ctx, dist_device_mesh_create("cpu", ok, s22, 2, hole, &m),
                   "dimension 1 needs a name", "NULL name") ||
      expect_inval(ctx, dist_device_mesh_create("cpu", NULL, s22, 2, NULL, &m),
                   "layout is NULL", "NULL layout") ||
      expect_inval(ctx, dist_device_mesh_create("cpu", ok, s22, 2, NULL, NULL), "out is NULL",
                   "NULL out") ||
      expect_inval(ctx, dist_device_mesh_create("cpu", ok, NULL, 2, NULL, &m), "dimensions",
                   "NULL shape"))
    return 1;
  CHECK(ctx, m == NULL, "a refused mesh left *out set");
  /* The world still works, and a good mesh can follow. */
  CHECK_OK(ctx, dist_device_mesh_create("cpu", ok, s22, 2, NULL, &m));
  dist_pg *g;
  CHECK_OK(ctx, dist_mesh_get_group(m, 1, &g));
  if (sum_is(ctx, g, ctx->rank < 2 ? 1 : 5, "row"))
    return 1;
  dist_device_mesh_destroy(m);
  dist_test_finish();
  return 0;
}

Test(core_api, mesh_refuses_bad_layouts_shapes_and_names, .timeout = 100) {
  cr_assert_eq(dist_test_ranks(4, bad_rank, NULL, 80), 0, "%s", dist_test_report());
}

/* --- from_group ------------------------------------------------------------- */

static int from_group_rank(const dist_test_ctx *ctx) {
  CHECK_OK(ctx, dist_test_init_pg(ctx, NULL));
  int r = ctx->rank;
  /* The caller's own groups: rows {0,1},{2,3} and columns {0,2},{1,3}. */
  const int rows[2][2] = {{0, 1}, {2, 3}}, cols[2][2] = {{0, 2}, {1, 3}};
  dist_pg *row = NULL, *col = NULL, *g;
  for (int i = 0; i < 2; i++) {
    CHECK_OK(ctx, dist_new_group(rows[i], 2, NULL, &g));
    if (g != DIST_GROUP_NON_MEMBER)
      row = g;
    CHECK_OK(ctx, dist_new_group(cols[i], 2, NULL, &g));
    if (g != DIST_GROUP_NON_MEMBER)
      col = g;
  }
  const int layout[4] = {0, 1, 2, 3};
  const int64_t shape[2] = {2, 2};
  const char *names[2] = {"dp", "tp"};
  dist_pg *mine[2] = {col, row}, *got[2];
  dist_device_mesh *m;
  CHECK_OK(ctx, dist_device_mesh_from_group("cpu", mine, 2, layout, shape, names, &m));
  size_t n;
  CHECK_OK(ctx, dist_mesh_get_all_groups(m, got, 2, &n));
  CHECK(ctx, n == 2 && got[0] == col && got[1] == row, "from_group keeps the given groups");
  int coord[2], local;
  CHECK_OK(ctx, dist_mesh_get_coordinate(m, coord));
  CHECK(ctx, coord[0] == r / 2 && coord[1] == r % 2, "coordinate (%d,%d)", coord[0], coord[1]);
  CHECK_OK(ctx, dist_mesh_get_local_rank_by_name(m, "tp", &local));
  CHECK(ctx, local == r % 2, "local rank along tp %d", local);
  dist_device_mesh_destroy(m);
  /* Borrowed: the groups outlive the mesh. */
  if (sum_is(ctx, row, r < 2 ? 1 : 5, "row after destroy") ||
      sum_is(ctx, col, r % 2 ? 4 : 2, "column after destroy"))
    return 1;
  /* Groups in the wrong dimensions do not match the layout's lines. */
  dist_pg *swapped[2] = {row, col};
  m = NULL;
  if (expect_inval(ctx, dist_device_mesh_from_group("cpu", swapped, 2, layout, shape, NULL, &m),
                   "lacks rank", "swapped groups") ||
      expect_inval(ctx, dist_device_mesh_from_group("cpu", mine, 2, NULL, NULL, NULL, &m),
                   "needs its layout and shape", "2 groups, no layout"))
    return 1;
  /* 1-D over one group: its ranks in group-rank order; NULL = default. */
  CHECK_OK(ctx, dist_device_mesh_from_group("cpu", &col, 1, NULL, NULL, NULL, &m));
  CHECK(ctx, dist_mesh_ndim(m) == 1 && dist_mesh_size(m, 0) == 2 && !dist_mesh_get_dim_name(m, 0),
        "1-D over a column, unnamed");
  CHECK_OK(ctx, dist_mesh_get_coordinate(m, coord));
  CHECK(ctx, coord[0] == r / 2, "1-D coordinate %d", coord[0]);
  int c0 = 1, who = -1;
  CHECK_OK(ctx, dist_mesh_get_rank_at(m, &c0, &who));
  CHECK(ctx, who == (r % 2) + 2, "rank at 1 of my column: %d", who);
  dist_device_mesh_destroy(m);
  dist_pg *def = NULL;
  CHECK_OK(ctx, dist_device_mesh_from_group("cpu", &def, 1, NULL, NULL, NULL, &m));
  CHECK(ctx, dist_mesh_size(m, 0) == 4, "1-D over the default group");
  CHECK_OK(ctx, dist_mesh_get_group(m, 0, &g));
  if (sum_is(ctx, g, 6, "default via mesh"))
    return 1;
  dist_device_mesh_destroy(m);
  dist_pg *outsider = DIST_GROUP_NON_MEMBER;
  if (expect_inval(ctx, dist_device_mesh_from_group("cpu", &outsider, 1, NULL, NULL, NULL, &m),
                   "not a live group", "non-member"))
    return 1;
  dist_test_finish();
  return 0;
}

Test(core_api, mesh_from_existing_groups_borrows_them, .timeout = 100) {
  cr_assert_eq(dist_test_ranks(4, from_group_rank, NULL, 80), 0, "%s", dist_test_report());
}

/* --- the default group made from the environment ---------------------------- */

static int auto_init(int rank, int world, void *arg) {
  (void)arg;
  if (dist_is_initialized())
    return 10;
  const int64_t shape[2] = {2, world / 2};
  const char *names[2] = {"dp", "tp"};
  dist_device_mesh *m;
  if (dist_init_device_mesh("cpu", shape, 2, names, &m) != DIST_OK)
    return 11;
  if (!dist_is_initialized() || dist_get_rank(NULL) != rank ||
      dist_get_world_size(NULL) != world || strcmp(dist_get_backend(NULL), "cpu"))
    return 12;
  dist_pg *tp;
  if (dist_mesh_get_group_by_name(m, "tp", &tp) != DIST_OK)
    return 13;
  int32_t v = rank;
  dist_tensor t = dist_tensor_1d(&v, DIST_INT32, 1);
  int row = rank / 2;
  if (dist_all_reduce(&t, DIST_SUM, tp, NULL) != DIST_OK || v != 4 * row + 1)
    return 14;
  dist_device_mesh_destroy(m);
  /* The default group stays for the caller to destroy. */
  if (!dist_is_initialized() || dist_barrier(NULL, NULL) != DIST_OK)
    return 15;
  dist_destroy_process_group(NULL);
  return 0;
}

Test(core_api, mesh_makes_the_default_group_from_the_environment, .timeout = 100) {
  dist_spawn_ctx *ctx = NULL;
  int rc = dist_spawn(auto_init, NULL, 4, true, &ctx);
  int rank = -1, code = 0, sig = 0;
  if (rc != DIST_OK)
    dist_spawn_failure(ctx, &rank, &code, &sig);
  cr_assert_eq(rc, DIST_OK, "%s: rank %d exit %d signal %d: %s", dist_status_name(rc), rank,
               code, sig, dist_last_errmsg());
  dist_spawn_free(ctx);
}
