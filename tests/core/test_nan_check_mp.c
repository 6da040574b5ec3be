/* ctest: labels=multiproc timeout=120 */
/* DIST_NAN_CHECK=1 with real ranks: a NaN or Inf in one rank's input of a
 * collective fails that call on that rank with DIST_E_INVAL before it runs
 * (no sequence number taken, the buffer untouched, the others unaffected),
 * naming the rank, the operation with its sequence number and the first
 * bad index; every floating dtype is checked, integers and a broadcast's
 * receive buffers are not; unset, NaN flows through as before. */
#include <criterion/criterion.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <dist/backend.h>

#include "job/launch_env.h"
#include "mp.h"
#include "pg/pg_int.h" /* dist__cause_parse */

#define N 600 /* more than one scan block */

typedef struct bad {
  dist_dtype dt;
  int64_t index;  /* element */
  bool nan;       /* else Inf */
} bad;

static const bad cases[] = {
    {DIST_FLOAT16, 0, true},    {DIST_FLOAT16, 599, false}, {DIST_BFLOAT16, 300, true},
    {DIST_BFLOAT16, 17, false}, {DIST_FLOAT32, 3, true},    {DIST_FLOAT32, 511, false},
    {DIST_FLOAT64, 256, true},  {DIST_FLOAT64, 1, false},   {DIST_COMPLEX64, 42, true},
    {DIST_COMPLEX128, 599, false},
};

/* Writes NaN or Inf into element i of buf (complex: its imaginary half). */
static void plant(void *buf, const bad *b) {
  int64_t i = b->index;
  switch (b->dt) {
  case DIST_FLOAT16: ((uint16_t *)buf)[i] = b->nan ? 0x7e00 : 0xfc00; break;
  case DIST_BFLOAT16: ((uint16_t *)buf)[i] = b->nan ? 0x7fc0 : 0x7f80; break;
  case DIST_FLOAT32: ((float *)buf)[i] = b->nan ? NAN : INFINITY; break;
  case DIST_FLOAT64: ((double *)buf)[i] = b->nan ? NAN : -INFINITY; break;
  case DIST_COMPLEX64: ((float *)buf)[2 * i + 1] = b->nan ? NAN : INFINITY; break;
  case DIST_COMPLEX128: ((double *)buf)[2 * i + 1] = b->nan ? NAN : INFINITY; break;
  default: break;
  }
}

static int good_all_reduce(const dist_test_ctx *ctx, int64_t want_seq_note) {
  float x[N];
  for (int i = 0; i < N; i++)
    x[i] = 1;
  dist_tensor t = dist_tensor_1d(x, DIST_FLOAT32, N);
  CHECK_OK(ctx, dist_all_reduce(&t, DIST_SUM, NULL, NULL));
  for (int i = 0; i < N; i++)
    CHECK(ctx, x[i] == (float)ctx->world, "step %lld: x[%d] = %g", (long long)want_seq_note, i,
          (double)x[i]);
  return 0;
}

static int bad_input_rank(const dist_test_ctx *ctx) {
  CHECK_OK(ctx, dist_test_init_pg(ctx, NULL));
  CHECK(ctx, good_all_reduce(ctx, 1) == 0, "first all_reduce");
  uint64_t seq = 2;
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++, seq++) {
    const bad *b = &cases[k];
    if (ctx->rank == 1) {
      static uint8_t buf[N * 16], copy[N * 16];
      memset(buf, 0, sizeof buf);
      plant(buf, b);
      memcpy(copy, buf, sizeof buf);
      dist_tensor t = dist_tensor_1d(buf, b->dt, N);
      int rc = dist_all_reduce(&t, DIST_SUM, NULL, NULL);
      CHECK(ctx, rc == DIST_E_INVAL, "%s: rc %s", dist_dtype_name(b->dt), dist_status_name(rc));
      char want[160];
      snprintf(want, sizeof want, "rank 1 (host ");
      const char *m = dist_pg_errmsg(NULL);
      CHECK(ctx, strstr(m, want), "%s", m);
      snprintf(want, sizeof want, "ALL_REDUCE #%llu of group 0 (default): input 0 %s[%d] holds "
               "%s at index %lld;", (unsigned long long)seq, dist_dtype_name(b->dt), N,
               b->nan ? "NaN" : "Inf", (long long)b->index);
      CHECK(ctx, strstr(m, want), "want '%s' in '%s'", want, m);
      CHECK(ctx, memcmp(buf, copy, sizeof buf) == 0, "the buffer was touched");
    }
    /* The failed call took no sequence number: the next one is #seq on
     * every rank, and runs. */
    CHECK(ctx, good_all_reduce(ctx, (int64_t)seq) == 0, "after case %zu", k);
  }
  if (ctx->rank == 1) {
    void *v = NULL;
    size_t n = 0;
    CHECK_OK(ctx, dist_store_get(dist_get_default_store(), DIST_KEY_CAUSE, &v, &n));
    /* The first refusal is the job's cause, naming the rank, its group and
     * operation for the verdict (launch_env.h: status, rank, fields). */
    int st = 0, by = -1;
    const char *rep = NULL;
    dist__cause_fields f;
    CHECK(ctx, dist__cause_parse(v, n, &st, &by, &rep) == DIST_OK, "cause: %s", (char *)v);
    dist__cause_parse_info(v, n, &f);
    CHECK(ctx, st == DIST_E_INVAL && by == 1 &&
                   strncmp(rep, "NaN check (DIST_NAN_CHECK=1): rank 1 ", 37) == 0,
          "cause: %s", (char *)v);
    CHECK(ctx, f.n_culprits == 1 && f.culprits[0] == 1 && f.group_id == 0 &&
                   !strcmp(f.op, "ALL_REDUCE") && f.seq == 2 && !strcmp(f.field, "NaN"),
          "cause's fields: %s", (char *)v);
    dist_free(v);
  }
  dist_test_finish();
  return 0;
}

Test(core_nan_check, a_nan_or_inf_input_fails_that_rank_before_the_call_runs, .timeout = 90) {
  setenv("DIST_NAN_CHECK", "1", 1);
  cr_assert_eq(dist_test_ranks(3, bad_input_rank, NULL, 80), 0, "%s", dist_test_report());
}

/* Integers with a float's NaN bits, and a broadcast receiver's buffer full
 * of NaN, are not inputs to check; the root's NaN is. */
static int not_checked_rank(const dist_test_ctx *ctx) {
  CHECK_OK(ctx, dist_test_init_pg(ctx, NULL));
  int32_t ints[N];
  for (int i = 0; i < N; i++)
    ints[i] = 0x7fc00000;
  dist_tensor ti = dist_tensor_1d(ints, DIST_INT32, N);
  CHECK_OK(ctx, dist_all_reduce(&ti, DIST_BOR, NULL, NULL));
  float f[N];
  for (int i = 0; i < N; i++)
    f[i] = ctx->rank == 0 ? 2.0f : NAN;
  dist_tensor tf = dist_tensor_1d(f, DIST_FLOAT32, N);
  CHECK_OK(ctx, dist_broadcast(&tf, 0, NULL, NULL));
  CHECK(ctx, f[N - 1] == 2.0f, "broadcast gave %g", (double)f[N - 1]);
  if (ctx->rank == 0) {
    f[7] = NAN;
    int rc = dist_broadcast(&tf, 0, NULL, NULL);
    CHECK(ctx, rc == DIST_E_INVAL, "root's NaN: %s", dist_status_name(rc));
    CHECK(ctx, strstr(dist_pg_errmsg(NULL), "BROADCAST #3 of group 0 (default): input 0 "
                                            "float32[600] holds NaN at index 7"),
          "%s", dist_pg_errmsg(NULL));
  }
  CHECK_OK(ctx, dist_barrier(NULL, NULL));
  dist_test_finish();
  return 0;
}

Test(core_nan_check, integers_and_broadcast_receivers_are_not_checked, .timeout = 90) {
  setenv("DIST_NAN_CHECK", "1", 1);
  cr_assert_eq(dist_test_ranks(2, not_checked_rank, NULL, 80), 0, "%s", dist_test_report());
}

static int unset_rank(const dist_test_ctx *ctx) {
  CHECK_OK(ctx, dist_test_init_pg(ctx, NULL));
  float f[N] = {0};
  f[5] = ctx->rank == 1 ? NAN : 1.0f;
  dist_tensor t = dist_tensor_1d(f, DIST_FLOAT32, N);
  CHECK_OK(ctx, dist_all_reduce(&t, DIST_SUM, NULL, NULL));
  CHECK(ctx, isnan(f[5]) && f[4] == 0.0f, "f[5] = %g", (double)f[5]);
  dist_test_finish();
  return 0;
}

Test(core_nan_check, unset_or_0_lets_nan_through, .timeout = 90) {
  unsetenv("DIST_NAN_CHECK");
  cr_assert_eq(dist_test_ranks(2, unset_rank, NULL, 80), 0, "%s", dist_test_report());
  setenv("DIST_NAN_CHECK", "0", 1);
  cr_assert_eq(dist_test_ranks(2, unset_rank, NULL, 80), 0, "%s", dist_test_report());
}
