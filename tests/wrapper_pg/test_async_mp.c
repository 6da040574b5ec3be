/* ctest: labels=multiproc timeout=120 */
/* Asynchronous calls through a checking group: the check does not block
 * the call (two groups whose async operations the ranks start in opposite
 * orders complete, with the right values), operations on one group run in
 * issue order (a synchronous call after async ones waits for them), and a
 * rank that leaves (destroys its groups and exits) after fewer calls than
 * the others is named at once as a desync with its count and last call.
 * Real forked ranks at DETAIL. */
#include <criterion/criterion.h>

#include "wpg_test.h"

#define ME "test_async_mp.c"

/* Rank 0 starts group a's all_reduce then b's; rank 1 b's then a's. A
 * check that waited for the peer inside the call would deadlock here. */
static int crossed_rank(const dist_test_ctx *ctx) {
  CHECK_OK(ctx, wpg_test_init(ctx));
  dist_pg *a = NULL, *b = NULL;
  dist_group_opts oa = {.desc = "a"}, ob = {.desc = "b"};
  CHECK_OK(ctx, dist_new_group(NULL, 0, &oa, &a));
  CHECK_OK(ctx, dist_new_group(NULL, 0, &ob, &b));
  float va[4], vb[4];
  for (int i = 0; i < 4; i++)
    va[i] = (float)(ctx->rank + 1), vb[i] = (float)(10 * (ctx->rank + 1) + i);
  dist_tensor ta = dist_tensor_1d(va, DIST_FLOAT32, 4), tb = dist_tensor_1d(vb, DIST_FLOAT32, 4);
  dist_work *wa = NULL, *wb = NULL;
  if (ctx->rank == 0) {
    CHECK_OK(ctx, dist_all_reduce(&ta, DIST_SUM, a, &wa));
    CHECK_OK(ctx, dist_all_reduce(&tb, DIST_MAX, b, &wb));
  } else {
    CHECK_OK(ctx, dist_all_reduce(&tb, DIST_MAX, b, &wb));
    CHECK_OK(ctx, dist_all_reduce(&ta, DIST_SUM, a, &wa));
  }
  CHECK(ctx, wa && wb, "no work handle");
  CHECK_OK(ctx, dist_work_wait(wb, 30000));
  CHECK_OK(ctx, dist_work_wait(wa, 30000));
  for (int i = 0; i < 4; i++) {
    CHECK(ctx, va[i] == 3.0f, "a[%d] = %g, want 3", i, va[i]);
    CHECK(ctx, vb[i] == (float)(20 + i), "b[%d] = %g, want %d", i, vb[i], 20 + i);
  }
  dist_work_free(wa);
  dist_work_free(wb);

  /* Issue order on one group: broadcast from rank 1 (x = 1), all_reduce
   * (2), both async, then a synchronous all_reduce (4). Out of order the
   * result would be 2. */
  float x = (float)ctx->rank;
  dist_tensor tx = dist_tensor_1d(&x, DIST_FLOAT32, 1);
  dist_work *w1 = NULL, *w2 = NULL;
  CHECK_OK(ctx, dist_broadcast(&tx, 1, a, &w1));
  CHECK_OK(ctx, dist_all_reduce(&tx, DIST_SUM, a, &w2));
  CHECK_OK(ctx, dist_all_reduce(&tx, DIST_SUM, a, NULL));
  CHECK(ctx, x == 4.0f, "x = %g after broadcast, all_reduce (async) and all_reduce, want 4", x);
  CHECK(ctx, dist_work_is_completed(w1) && dist_work_is_completed(w2),
        "a sync call returned before the async ones before it completed");
  CHECK_OK(ctx, dist_work_status(w1));
  CHECK_OK(ctx, dist_work_status(w2));
  dist_work_free(w1);
  dist_work_free(w2);
  CHECK_OK(ctx, dist_destroy_process_group(b));
  CHECK_OK(ctx, dist_destroy_process_group(a));
  dist_test_finish();
  return 0;
}

Test(wrapper_pg_async, groups_started_in_opposite_orders_complete_in_issue_order,
     .timeout = 60) {
  cr_assert_eq(dist_test_ranks(2, crossed_rank, NULL, 50), 0, "%s", dist_test_report());
}

/* Rank 1 runs two all_reduces of three, destroys everything and exits 0:
 * the others, waiting in the third, fail at once (its process is gone)
 * with DIST_E_DESYNC naming it, its count and last call from the record it
 * left. The group's timeout is long: a report that came from it would
 * take a minute, past the bound the test waits. */
static int leave_rank(const dist_test_ctx *ctx) {
  setenv("DIST_TEST_TIMEOUT_MS", "60000", 1);
  if (ctx->arg) /* the transport, else the default (shared memory) */
    setenv("DIST_TRANSPORT", ctx->arg, 1);
  CHECK_OK(ctx, wpg_test_init(ctx));
  float v[4] = {1, 1, 1, 1};
  dist_tensor t = dist_tensor_1d(v, DIST_FLOAT32, 4);
  dist_store *st = dist_get_default_store();
  for (int i = 0; i < 2; i++)
    CHECK_OK(ctx, dist_all_reduce(&t, DIST_SUM, NULL, NULL));
  if (ctx->rank == 1) { /* counted in the others' leave, then gone */
    if (wpg_test_count(ctx, st, "arrived", false) || wpg_test_count(ctx, st, "seen", false))
      return 1;
    CHECK_OK(ctx, dist_destroy_process_group(NULL));
    return 0;
  }
  float before = v[0];
  int rc = dist_all_reduce(&t, DIST_SUM, NULL, NULL);
  const char *msg = dist_pg_errmsg(NULL);
  char buf[512];
  CHECK(ctx, rc == DIST_E_DESYNC, "rc %s: %s", dist_status_name(rc), msg);
  CHECK(ctx, !strncmp(msg, "desync in group 0 (default, 3 ranks) at ALL_REDUCE #3: rank 1 left "
                      "the group (destroyed it or exited) before this collective", 96),
        "header:\n%s", msg);
  CHECK(ctx, wpg_line(msg, "  rank 1 (host ", buf, sizeof buf) &&
                 strstr(buf, "left after 2 collectives; its last operation was ALL_REDUCE #2, "
                             "called from " ME ":") && strstr(buf, "<- collective count differs"),
        "rank 1's line:\n%s", msg);
  char mine[64];
  snprintf(mine, sizeof mine, "  rank %d: at ALL_REDUCE #3 (collective 3 of the group)",
           ctx->rank);
  CHECK(ctx, wpg_line(msg, mine, buf, sizeof buf), "this rank's line:\n%s", msg);
  CHECK(ctx, v[0] == before, "buffer touched");
  return wpg_test_leave(ctx);
}

Test(wrapper_pg_async, a_rank_that_leaves_early_is_named_with_its_count, .timeout = 50) {
  cr_assert_eq(dist_test_ranks(3, leave_rank, NULL, 40), 0, "%s", dist_test_report());
}

Test(wrapper_pg_async, a_rank_that_leaves_early_is_named_over_tcp, .timeout = 50) {
  cr_assert_eq(dist_test_ranks(3, leave_rank, "tcp", 40), 0, "%s", dist_test_report());
}

/* Async calls whose check fails: every work fails on wait, and the group
 * goes on for calls that agree (the counts rewind as after a sync check). */
static int async_shape_rank(const dist_test_ctx *ctx) {
  CHECK_OK(ctx, wpg_test_init(ctx));
  float v[8] = {5, 5, 5, 5, 5, 5, 5, 5};
  dist_tensor t = dist_tensor_1d(v, DIST_FLOAT32, 4), t2 = t;
  t2.ndim = 2;
  t2.shape[0] = t2.shape[1] = 2;
  dist_work *w = NULL;
  /* [4] against [2,2] on rank 1: same count, the shape differs */
  CHECK_OK(ctx, dist_all_reduce(ctx->rank == 1 ? &t2 : &t, DIST_SUM, NULL, &w));
  int rc = dist_work_wait(w, 30000);
  const char *msg = dist_work_errmsg(w);
  char buf[512];
  CHECK(ctx, rc == DIST_E_DESYNC, "wait %s: %s", dist_status_name(rc), msg);
  CHECK(ctx, strstr(msg, "ranks disagree on the shape\n") &&
                 wpg_line(msg, "  rank 1: ", buf, sizeof buf) &&
                 strstr(buf, "float32[2, 2]") && strstr(buf, "<- shape differs"),
        "report:\n%s", msg);
  CHECK(ctx, wpg_line(msg, "  ranks 0,2: ", buf, sizeof buf) && strstr(buf, "float32[4]"),
        "majority line:\n%s", msg);
  for (int i = 0; i < 8; i++)
    CHECK(ctx, v[i] == 5, "buffer touched: v[%d] = %g", i, v[i]);
  dist_work_free(w);
  dist_tensor t4 = dist_tensor_1d(v, DIST_FLOAT32, 4);
  CHECK_OK(ctx, dist_all_reduce(&t4, DIST_SUM, NULL, &w));
  CHECK_OK(ctx, dist_work_wait(w, 30000));
  CHECK(ctx, v[0] == 15 && v[3] == 15 && v[4] == 5, "v = %g..%g,%g after the agreed call", v[0],
        v[3], v[4]);
  dist_work_free(w);
  dist_test_finish();
  return 0;
}

Test(wrapper_pg_async, a_shape_that_differs_fails_the_work_and_touches_nothing, .timeout = 60) {
  cr_assert_eq(dist_test_ranks(3, async_shape_rank, NULL, 50), 0, "%s", dist_test_report());
}

/* A synchronous call on one rank against an asynchronous one on the other
 * (rank 0 all_reduces, rank 1 all_gathers with a work it then waits on):
 * both checks meet in one exchange and the report names the users' two
 * operations and their lines, never the checking layer's own exchange. */
static int sync_async_rank(const dist_test_ctx *ctx) {
  CHECK_OK(ctx, wpg_test_init(ctx));
  float v[4] = {1, 2, 3, 4}, out[8] = {0};
  dist_tensor t = dist_tensor_1d(v, DIST_FLOAT32, 4), o = dist_tensor_1d(out, DIST_FLOAT32, 8);
  const char *msg;
  int rc;
  dist_work *w = NULL;
  if (ctx->rank == 0) {
    rc = dist_all_reduce(&t, DIST_SUM, NULL, NULL);
    msg = dist_errmsg(rc, NULL);
  } else {
    CHECK_OK(ctx, dist_all_gather_into_tensor(&o, &t, NULL, &w));
    rc = dist_work_wait(w, 30000);
    msg = dist_work_errmsg(w);
  }
  char buf[512];
  CHECK(ctx, rc == DIST_E_DESYNC, "%s: %s", dist_status_name(rc), msg);
  CHECK(ctx, strstr(msg, "desync in group 0 (default, 2 ranks) at ALL_REDUCE #1: ranks disagree "
                         "on the operation\n"), "header:\n%s", msg);
  CHECK(ctx, wpg_line(msg, "  rank 0: ", buf, sizeof buf) && strstr(buf, "ALL_REDUCE float32[4]"),
        "rank 0's line:\n%s", msg);
  CHECK(ctx, wpg_line(msg, "  rank 1: ", buf, sizeof buf) &&
                 strstr(buf, "ALL_GATHER_INTO_TENSOR float32[4] (async)") &&
                 strstr(buf, "<- operation differs"),
        "rank 1's line:\n%s", msg);
  CHECK(ctx, wpg_line(msg, "  called from ", buf, sizeof buf) && strstr(buf, ME ":"),
        "no call sites:\n%s", msg);
  CHECK(ctx, !strstr(msg, "checking layer") && !strstr(msg, "uint8"),
        "the report names the layer's own exchange:\n%s", msg);
  dist_work_free(w);
  dist_test_finish();
  return 0;
}

Test(wrapper_pg_async, a_sync_call_against_an_async_one_names_both_operations, .timeout = 60) {
  cr_assert_eq(dist_test_ranks(2, sync_async_rank, NULL, 50), 0, "%s", dist_test_report());
}
