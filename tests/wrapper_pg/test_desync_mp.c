/* ctest: labels=multiproc timeout=300 */
/* Collectives that disagree between ranks are caught before they run, on
 * every rank, with one report: shapes, dtypes of equal size, operations,
 * reduce ops, roots, all_to_all_single splits, reduce_scatter counts; the
 * buffers are untouched, the call sites are this file's lines, and the
 * group keeps working for calls that agree. Real forked ranks at DETAIL. */
#include <criterion/criterion.h>

#include "wpg_test.h"

#define ME "test_desync_mp.c"

/* The report on every rank: DIST_E_DESYNC, the header, the marked line. */
static int expect_report(const dist_test_ctx *ctx, int rc, const char *header,
                         const char *marked_prefix, const char *marked_has, const char *marker) {
  const char *msg = dist_pg_errmsg(NULL);
  CHECK(ctx, rc == DIST_E_DESYNC, "rc %s, want DIST_E_DESYNC: %s", dist_status_name(rc), msg);
  CHECK(ctx, !strncmp(msg, header, strlen(header)), "header: want '%s' in\n%s", header, msg);
  char line[512];
  CHECK(ctx, wpg_line(msg, marked_prefix, line, sizeof line), "no line '%s' in\n%s",
        marked_prefix, msg);
  CHECK(ctx, strstr(line, marked_has) && strstr(line, marker), "line '%s' lacks '%s' / '%s'",
        line, marked_has, marker);
  return wpg_same_everywhere(ctx, msg);
}

/* --- shape --------------------------------------------------------------- */

static int shape_rank(const dist_test_ctx *ctx) {
  CHECK_OK(ctx, wpg_test_init(ctx));
  float v[8] = {1, 1, 1, 1, 1, 1, 1, 1};
  dist_tensor t = dist_tensor_1d(v, DIST_FLOAT32, ctx->rank == 1 ? 8 : 4);
  int line = __LINE__ + 1;
  int rc = dist_all_reduce(&t, DIST_SUM, NULL, NULL);
  if (expect_report(ctx, rc, "desync in group 0 (default, 2 ranks) at ALL_REDUCE #1:\n",
                    "  rank 1: ", "ALL_REDUCE float32[8] op=SUM", "<- shape differs"))
    return 1;
  char site[128], buf[512];
  snprintf(site, sizeof site, ME ":%d in shape_rank()", line);
  CHECK(ctx, wpg_line(dist_pg_errmsg(NULL), "  rank 0: ", buf, sizeof buf) &&
                 strstr(buf, "ALL_REDUCE float32[4] op=SUM") && strstr(buf, site) &&
                 !strstr(buf, "<-"),
        "rank 0's line wants '%s', unmarked:\n%s", site, dist_pg_errmsg(NULL));
  for (int i = 0; i < 8; i++)
    CHECK(ctx, v[i] == 1, "buffer touched: v[%d] = %g", i, v[i]);
  /* [4] vs [2,2]: same count, different shape. */
  dist_tensor u = dist_tensor_1d(v, DIST_FLOAT32, 4);
  if (ctx->rank == 1) {
    u.ndim = 2;
    u.shape[0] = u.shape[1] = 2;
  }
  rc = dist_all_reduce(&u, DIST_SUM, NULL, NULL);
  CHECK(ctx, rc == DIST_E_DESYNC && strstr(dist_pg_errmsg(NULL), "float32[2, 2]") &&
                 strstr(dist_pg_errmsg(NULL), "<- shape differs"),
        "[4] vs [2,2]: %s", dist_pg_errmsg(NULL));
  /* Calls that agree still run, and compute the right thing. */
  CHECK_OK(ctx, dist_all_reduce(&t, DIST_SUM, NULL, NULL) == DIST_E_DESYNC ? DIST_OK : 1);
  t = dist_tensor_1d(v, DIST_FLOAT32, 4);
  CHECK_OK(ctx, dist_all_reduce(&t, DIST_SUM, NULL, NULL));
  CHECK(ctx, v[0] == 2 && v[3] == 2, "sum after the desync: %g", v[0]);
  dist_test_finish();
  return 0;
}

Test(wrapper_pg_desync, shape_differs_on_both_ranks, .timeout = 60) {
  cr_assert_eq(dist_test_ranks(2, shape_rank, NULL, 50), 0, "%s", dist_test_report());
}
