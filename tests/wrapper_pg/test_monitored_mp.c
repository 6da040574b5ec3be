/* ctest: labels=multiproc timeout=120 */
/* monitored_barrier through a checking group behaves as on a bare one: with
 * ranks 1 and 3 of 4 absent, wait_all_ranks names both, without it the
 * first; torch's documented example (rank 1 never calls it) names rank 1
 * within the timeout. The absent ranks stay alive (they wait for a store
 * key), so their absence is not a lost peer. */
#include <criterion/criterion.h>
#include <time.h>

#include "wpg_test.h"

static int64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static bool absent_rank(int r, int world) {
  return world == 4 ? (r == 1 || r == 3) : r == 1;
}

/* Absent ranks wait until rank 0 has checked, then say they heard (so do
 * the others once they have their verdict). */
static int wait_out(const dist_test_ctx *ctx) {
  dist_store *st = dist_get_default_store();
  const char *done[1] = {"test/done"};
  CHECK_OK(ctx, dist_store_wait(st, done, 1, 30000));
  char k[32];
  snprintf(k, sizeof k, "test/ack/%d", ctx->rank);
  CHECK_OK(ctx, dist_store_set(st, k, "1", 1));
  return 0;
}

static int release_all(const dist_test_ctx *ctx) {
  dist_store *st = dist_get_default_store();
  CHECK_OK(ctx, dist_store_set(st, "test/done", "1", 1));
  for (int r = 0; r < ctx->world; r++) {
    char k[32];
    snprintf(k, sizeof k, "test/ack/%d", r);
    const char *keys[1] = {k};
    if (r != 0) /* every rank has read what it needs from rank 0's store */
      CHECK_OK(ctx, dist_store_wait(st, keys, 1, 30000));
  }
  return 0;
}

typedef struct mb_case {
  bool wait_all;
  const char *named; /* what rank 0 reports */
} mb_case;

static int mb_rank(const dist_test_ctx *ctx) {
  const mb_case *k = ctx->arg;
  CHECK_OK(ctx, wpg_test_init(ctx));
  float v[2] = {0};
  dist_tensor t = dist_tensor_1d(v, DIST_FLOAT32, 2);
  CHECK_OK(ctx, dist_all_reduce(&t, DIST_SUM, NULL, NULL)); /* checked as usual */
  if (absent_rank(ctx->rank, ctx->world))
    return wait_out(ctx);
  int64_t t0 = now_ms();
  int rc = dist_monitored_barrier(NULL, 1000, k->wait_all);
  int64_t took = now_ms() - t0;
  const char *msg = dist_pg_errmsg(NULL);
  CHECK(ctx, rc == DIST_E_TIMEOUT, "got %s: %s", dist_status_name(rc), msg);
  CHECK(ctx, took < 1000 + 4000, "monitored_barrier took %lld ms", (long long)took);
  if (ctx->rank == 0) {
    CHECK(ctx, strstr(msg, k->named), "rank 0's message lacks '%s': %s", k->named, msg);
    return release_all(ctx);
  }
  CHECK(ctx, strstr(msg, "rank 0 found absent ranks") && strstr(msg, k->named),
        "message: %s", msg);
  char ack[32];
  snprintf(ack, sizeof ack, "test/ack/%d", ctx->rank);
  CHECK_OK(ctx, dist_store_set(dist_get_default_store(), ack, "1", 1));
  return 0;
}

Test(wrapper_pg_monitored, wait_all_ranks_names_both_absent_ranks, .timeout = 60) {
  mb_case k = {true, "Ranks 1,3 failed to pass monitored_barrier"};
  cr_assert_eq(dist_test_ranks(4, mb_rank, &k, 50), 0, "%s", dist_test_report());
}

Test(wrapper_pg_monitored, without_wait_all_ranks_names_the_first, .timeout = 60) {
  mb_case k = {false, "Rank 1 failed to pass monitored_barrier"};
  cr_assert_eq(dist_test_ranks(4, mb_rank, &k, 50), 0, "%s", dist_test_report());
}

/* torch's example: every rank but 1 calls monitored_barrier. */
Test(wrapper_pg_monitored, torch_example_rank_1_never_calls_it, .timeout = 60) {
  mb_case k = {false, "Rank 1 failed to pass monitored_barrier"};
  cr_assert_eq(dist_test_ranks(3, mb_rank, &k, 50), 0, "%s", dist_test_report());
}
