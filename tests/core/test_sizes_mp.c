/* ctest: labels=multiproc timeout=120 */
/* Sizes from a caller's shape or a peer's announcement that overflow or go
 * negative fail with DIST_E_INVAL and a message, on one rank and on two,
 * over shared memory; nothing runs on a wrapped-around count. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mp.h"

/* 2^32 x 2^32 wraps to 0 elements; 3037000500^2 wraps negative. */
static dist_tensor shaped(void *data, int64_t a, int64_t b) {
  dist_tensor t = dist_tensor_1d(data, DIST_FLOAT32, a);
  t.ndim = 2;
  t.shape[1] = b;
  return t;
}

static int expect_inval(const dist_test_ctx *ctx, int rc, const char *want) {
  CHECK(ctx, rc == DIST_E_INVAL, "got %s (%s), expected DIST_E_INVAL", dist_status_name(rc),
        dist_pg_errmsg(NULL));
  CHECK(ctx, strstr(dist_pg_errmsg(NULL), want), "message '%s' lacks '%s'",
        dist_pg_errmsg(NULL), want);
  return 0;
}

static int overflowing_shapes(const dist_test_ctx *ctx) {
  CHECK_OK(ctx, dist_test_init_pg(ctx, NULL));
  float buf[4] = {1, 2, 3, 4};
  dist_tensor zero = shaped(buf, INT64_C(1) << 32, INT64_C(1) << 32);
  dist_tensor neg = shaped(buf, 3037000500, 3037000500);
  CHECK(ctx, dist_tensor_numel(&zero) == -1 && dist_tensor_numel(&neg) == -1,
        "numel %lld and %lld", (long long)dist_tensor_numel(&zero),
        (long long)dist_tensor_numel(&neg));
  if (expect_inval(ctx, dist_all_reduce(&zero, DIST_SUM, NULL, NULL), "overflows int64") ||
      expect_inval(ctx, dist_broadcast(&neg, 0, NULL, NULL), "overflows int64"))
    return 1;
  /* 2^61 floats fit in int64 as a count but not as bytes. */
  dist_tensor bytes = shaped(buf, INT64_C(1) << 31, INT64_C(1) << 30);
  if (expect_inval(ctx, dist_all_reduce(&bytes, DIST_SUM, NULL, NULL), "byte size"))
    return 1;
  dist_tensor out = shaped(buf, INT64_C(1) << 62, 1);
  dist_tensor in = shaped(buf, INT64_C(1) << 62, 1);
  if (expect_inval(ctx, dist_all_gather_into_tensor(&out, &in, NULL, NULL), "overflows"))
    return 1;
  /* The group still works afterwards. */
  dist_tensor ok = dist_tensor_1d(buf, DIST_FLOAT32, 4);
  CHECK_OK(ctx, dist_all_reduce(&ok, DIST_SUM, NULL, NULL));
  CHECK(ctx, buf[3] == 4.0f * (float)ctx->world, "sum %g", (double)buf[3]);
  dist_test_finish();
  return 0;
}

Test(core_sizes, overflowing_shapes_fail_with_DIST_E_INVAL_on_one_rank, .timeout = 60) {
  cr_assert_eq(dist_test_ranks(1, overflowing_shapes, NULL, 40), 0, "%s", dist_test_report());
}

Test(core_sizes, overflowing_shapes_fail_with_DIST_E_INVAL_on_two_ranks, .timeout = 60) {
  cr_assert_eq(dist_test_ranks(2, overflowing_shapes, NULL, 40), 0, "%s", dist_test_report());
}

/* Rank 0 announces a negative blob length (a plain int64 broadcast where
 * rank 1 runs broadcast_bytes, as a corrupt or malicious peer would). */
static int negative_blob(const dist_test_ctx *ctx) {
  CHECK_OK(ctx, dist_test_init_pg(ctx, NULL));
  if (ctx->rank == 0) {
    int64_t len = -5;
    dist_tensor t = dist_tensor_1d(&len, DIST_INT64, 1);
    CHECK_OK(ctx, dist_broadcast(&t, 0, NULL, NULL));
    int64_t lens[2] = {-7, 0};
    dist_tensor in = dist_tensor_1d(&lens[0], DIST_INT64, 1);
    dist_tensor all = dist_tensor_1d(lens, DIST_INT64, 2);
    CHECK_OK(ctx, dist_all_gather_into_tensor(&all, &in, NULL, NULL));
  } else {
    dist_bytes b = {NULL, 0};
    if (expect_inval(ctx, dist_broadcast_bytes(&b, 0, NULL), "-5 bytes"))
      return 1;
    CHECK(ctx, b.data == NULL, "a buffer was handed out");
    dist_bytes mine = {"xy", 2}, out[2];
    if (expect_inval(ctx, dist_all_gather_bytes(&mine, out, NULL), "rank 0 announced a blob of -7"))
      return 1;
  }
  dist_test_finish();
  return 0;
}

Test(core_sizes, a_negative_blob_length_from_a_peer_fails_with_DIST_E_INVAL, .timeout = 60) {
  cr_assert_eq(dist_test_ranks(2, negative_blob, NULL, 40), 0, "%s", dist_test_report());
}
