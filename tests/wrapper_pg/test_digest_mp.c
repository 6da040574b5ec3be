/* ctest: labels=multiproc timeout=300 */
/* The check's cost per rank does not grow with the group: the bytes a rank
 * receives for the check before each collective (counted by the checking
 * layer, dist__wpg_rx_bytes: the digest's reduction, and whole records
 * only on a disagreement) are the same at 16 and at 64 ranks, for
 * synchronous and asynchronous calls alike. Real forked ranks at DETAIL. */
#include <criterion/criterion.h>

#include <sys/mman.h>

#include "wpg_test.h"

uint64_t dist__wpg_rx_bytes(void);

#define CALLS 4

typedef struct counts {
  int64_t per_sync[DIST_TEST_MAX_RANKS];
  int64_t per_async[DIST_TEST_MAX_RANKS];
} counts;

static int count_rank(const dist_test_ctx *ctx) {
  counts *out = ctx->arg;
  CHECK_OK(ctx, wpg_test_init(ctx));
  float v[8] = {1, 1, 1, 1, 1, 1, 1, 1};
  dist_tensor t = dist_tensor_1d(v, DIST_FLOAT32, 8);
  CHECK_OK(ctx, dist_all_reduce(&t, DIST_SUM, NULL, NULL)); /* the helper is made */
  uint64_t b0 = dist__wpg_rx_bytes();
  for (int i = 0; i < CALLS; i++)
    CHECK_OK(ctx, dist_all_reduce(&t, DIST_MAX, NULL, NULL));
  uint64_t b1 = dist__wpg_rx_bytes();
  dist_work *w[CALLS] = {0};
  for (int i = 0; i < CALLS; i++)
    CHECK_OK(ctx, dist_all_reduce(&t, DIST_MAX, NULL, &w[i]));
  for (int i = 0; i < CALLS; i++) {
    CHECK_OK(ctx, dist_work_wait(w[i], 60000));
    dist_work_free(w[i]);
  }
  CHECK_OK(ctx, dist_barrier(NULL, NULL)); /* checked too: counted after it */
  uint64_t b2 = dist__wpg_rx_bytes();
  out->per_sync[ctx->rank] = (int64_t)(b1 - b0) / CALLS;
  out->per_async[ctx->rank] = (int64_t)(b2 - b1) / (CALLS + 1);
  dist_test_finish();
  return 0;
}

static counts *run_at(int n) {
  counts *c = mmap(NULL, sizeof *c, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  cr_assert(c != MAP_FAILED);
  memset(c, 0xff, sizeof *c);
  int rc = dist_test_ranks(n, count_rank, c, 240);
  cr_assert_eq(rc, 0, "%d ranks: %s", n, dist_test_report());
  return c;
}

/* Under a sanitizer 64 instrumented processes are too heavy for CI: the
 * same assertion from 4 to 16 ranks. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SMALL 4
#define BIG 16
#else
#define SMALL 16
#define BIG 64
#endif

Test(wrapper_pg_digest_mp, bytes_received_per_check_do_not_grow_from_16_to_64_ranks,
     .timeout = 300) {
  counts *small = run_at(SMALL), *big = run_at(BIG);
  int64_t want = small->per_sync[0];
  cr_assert(want > 0 && want <= 64, "a check receives a small fixed digest, not %lld bytes",
            (long long)want);
  for (int r = 0; r < SMALL; r++)
    cr_assert(small->per_sync[r] == want && small->per_async[r] == want,
              "%d ranks, rank %d: %lld bytes per sync check, %lld per async, want %lld", SMALL, r,
              (long long)small->per_sync[r], (long long)small->per_async[r], (long long)want);
  for (int r = 0; r < BIG; r++)
    cr_assert(big->per_sync[r] == want && big->per_async[r] == want,
              "%d ranks, rank %d: %lld bytes per sync check, %lld per async, want %lld (as at "
              "%d ranks)", BIG, r, (long long)big->per_sync[r], (long long)big->per_async[r],
              (long long)want, SMALL);
  munmap(small, sizeof *small);
  munmap(big, sizeof *big);
}

/* Every all_to_all exchanges whole records through the job's store (its
 * digest cannot compare uneven splits); the last member to read a round's
 * records deletes them. 60 of them, synchronous and asynchronous, leave the
 * store's key count where one left it (they used to add 4 keys each, kept
 * in distrun's store for the job's life: 2 MB a minute in the soak). */
static int a2a_rank(const dist_test_ctx *ctx) {
  CHECK_OK(ctx, wpg_test_init(ctx));
  float in[4], out[4];
  for (int k = 0; k < 4; k++)
    in[k] = (float)(ctx->rank * 10 + k);
  dist_tensor ti = dist_tensor_1d(in, DIST_FLOAT32, 4), to = dist_tensor_1d(out, DIST_FLOAT32, 4);
  CHECK_OK(ctx, dist_all_to_all_single(&to, &ti, NULL, NULL, NULL, NULL));
  CHECK_OK(ctx, dist_barrier(NULL, NULL));
  int64_t before = -1, after = -1;
  CHECK_OK(ctx, dist_store_num_keys(dist_get_default_store(), &before));
  for (int i = 0; i < 30; i++) {
    CHECK_OK(ctx, dist_all_to_all_single(&to, &ti, NULL, NULL, NULL, NULL));
    for (int k = 0; k < 4; k++) /* out[k] came from rank k: its element ctx->rank */
      CHECK(ctx, out[k] == (float)(k * 10 + ctx->rank), "step %d: out[%d] = %g", i, k, out[k]);
    dist_work *w = NULL;
    CHECK_OK(ctx, dist_all_to_all_single(&to, &ti, NULL, NULL, NULL, &w));
    CHECK_OK(ctx, dist_work_wait(w, 60000));
    dist_work_free(w);
  }
  CHECK_OK(ctx, dist_barrier(NULL, NULL)); /* every round read, so deleted */
  CHECK_OK(ctx, dist_store_num_keys(dist_get_default_store(), &after));
  CHECK(ctx, after - before <= 2, "60 all_to_alls: %lld keys in the store before, %lld after",
        (long long)before, (long long)after);
  dist_test_finish();
  return 0;
}

Test(wrapper_pg_digest_mp, all_to_all_records_do_not_stay_in_the_store, .timeout = 120) {
  cr_assert_eq(dist_test_ranks(4, a2a_rank, NULL, 100), 0, "%s", dist_test_report());
}
