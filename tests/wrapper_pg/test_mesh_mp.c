/* ctest: labels=multiproc timeout=120 */
/* The groups a device mesh makes go through dist_new_group, so at DETAIL
 * the checking layer wraps them like any group: a count that differs
 * between the two ranks of one row of an explicit-layout mesh is caught
 * before it runs, on both ranks, with the report naming the dimension's
 * group ("tp") and both global ranks; the other row, which agrees, runs. */
#include <criterion/criterion.h>

#include "wpg_test.h"

static int mesh_rank(const dist_test_ctx *ctx) {
  CHECK_OK(ctx, wpg_test_init(ctx));
  const int layout[4] = {3, 1, 2, 0}; /* rows {3,1} and {2,0} */
  const int64_t shape[2] = {2, 2};
  const char *names[2] = {"dp", "tp"};
  dist_device_mesh *m;
  CHECK_OK(ctx, dist_device_mesh_create("cpu", layout, shape, 2, names, &m));
  dist_pg *tp;
  CHECK_OK(ctx, dist_mesh_get_group_by_name(m, "tp", &tp));
  int r = ctx->rank;
  bool row0 = r == 3 || r == 1;
  int32_t v[8] = {r, r, r, r, r, r, r, r};
  dist_tensor t = dist_tensor_1d(v, DIST_INT32, r == 1 ? 8 : 4);
  int rc = dist_all_reduce(&t, DIST_SUM, tp, NULL);
  const char *msg = dist_pg_errmsg(tp);
  if (row0) {
    CHECK(ctx, rc == DIST_E_DESYNC, "row {3,1}: %s, want DIST_E_DESYNC: %s",
          dist_status_name(rc), msg);
    CHECK(ctx, strstr(msg, "(tp, 2 ranks) at ALL_REDUCE #1: ranks disagree on the count\n"),
          "header: %s", msg);
    char line[256];
    CHECK(ctx, wpg_line(msg, "  rank 1 (group rank 0): ", line, sizeof line) &&
                   strstr(line, "int32[8]"),
          "rank 1's line in\n%s", msg);
    CHECK(ctx, wpg_line(msg, "  rank 3 (group rank 1): ", line, sizeof line) &&
                   strstr(line, "int32[4]") && strstr(line, "<- count differs"),
          "rank 3's line in\n%s", msg);
    CHECK(ctx, v[0] == r, "buffer touched on a refused call");
    t = dist_tensor_1d(v, DIST_INT32, 4); /* now they agree */
    CHECK_OK(ctx, dist_all_reduce(&t, DIST_SUM, tp, NULL));
    CHECK(ctx, v[0] == 4, "row {3,1} sum %d", v[0]);
  } else {
    CHECK_OK(ctx, rc);
    CHECK(ctx, v[0] == 2, "row {2,0} sum %d", v[0]);
  }
  dist_device_mesh_destroy(m);
  dist_test_finish();
  return 0;
}

Test(wrapper_pg_mesh, mesh_groups_are_checked_at_detail, .timeout = 100) {
  cr_assert_eq(dist_test_ranks(4, mesh_rank, NULL, 80), 0, "%s", dist_test_report());
}
