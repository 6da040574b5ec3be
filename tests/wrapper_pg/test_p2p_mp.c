/* ctest: labels=multiproc timeout=120 */
/* Point-to-point at DETAIL: a send and the receive it matches are compared
 * (size, dtype, shape) where the messages match, before any data reaches
 * the receive's buffer, and a mismatch fails both sides with
 * DIST_E_DESYNC; below DETAIL only the sizes must agree, as before. */
#include <criterion/criterion.h>

#include "wpg_test.h"

typedef struct p2p_case {
  bool detail;
  dist_dtype recv_dtype;
  int recv_ndim;         /* 1: [4]; 2: [2,2] */
  const char *why;       /* NULL: the transfer succeeds */
} p2p_case;

static int p2p_rank(const dist_test_ctx *ctx) {
  const p2p_case *k = ctx->arg;
  dist_set_debug_level(k->detail ? DIST_DEBUG_DETAIL : DIST_DEBUG_OFF);
  CHECK_OK(ctx, dist_test_init_pg(ctx, NULL));
  int32_t buf[4] = {7, 7, 7, 7};
  dist_tensor t = dist_tensor_1d(buf, DIST_FLOAT32, 4);
  if (ctx->rank == 1) {
    t.dtype = k->recv_dtype;
    if (k->recv_ndim == 2) {
      t.ndim = 2;
      t.shape[0] = t.shape[1] = 2;
    }
  }
  int rc = ctx->rank == 0 ? dist_send(&t, 1, NULL, 5) : dist_recv(&t, 0, NULL, 5, NULL);
  const char *msg = dist_pg_errmsg(NULL);
  if (!k->why) {
    CHECK(ctx, rc == DIST_OK, "%s: %s", dist_status_name(rc), msg);
  } else {
    char want[64];
    snprintf(want, sizeof want, ": %s mismatch: this %s", k->why,
             ctx->rank == 0 ? "send" : "receive");
    CHECK(ctx, rc == DIST_E_DESYNC && strstr(msg, want), "%s: %s (want '%s')",
          dist_status_name(rc), msg, want);
    if (ctx->rank == 1)
      CHECK(ctx, buf[0] == 7 && buf[3] == 7, "the receive's buffer was written");
  }
  dist_test_finish();
  return 0;
}

Test(wrapper_pg_p2p, a_dtype_of_equal_size_fails_both_sides_at_detail, .timeout = 60) {
  p2p_case k = {true, DIST_INT32, 1, "dtype"};
  cr_assert_eq(dist_test_ranks(2, p2p_rank, &k, 50), 0, "%s", dist_test_report());
}

Test(wrapper_pg_p2p, a_shape_of_equal_count_fails_both_sides_at_detail, .timeout = 60) {
  p2p_case k = {true, DIST_FLOAT32, 2, "shape"};
  cr_assert_eq(dist_test_ranks(2, p2p_rank, &k, 50), 0, "%s", dist_test_report());
}

Test(wrapper_pg_p2p, matching_calls_pass_at_detail, .timeout = 60) {
  p2p_case k = {true, DIST_FLOAT32, 1, NULL};
  cr_assert_eq(dist_test_ranks(2, p2p_rank, &k, 50), 0, "%s", dist_test_report());
}

Test(wrapper_pg_p2p, below_detail_only_the_sizes_must_agree, .timeout = 60) {
  p2p_case k = {false, DIST_INT32, 2, NULL};
  cr_assert_eq(dist_test_ranks(2, p2p_rank, &k, 50), 0, "%s", dist_test_report());
}
