/* ctest: labels=multiproc,san_address timeout=300 cost=20 */
/* Nothing grows without bound: monitored_barrier leaves the store's key
 * count flat however many barriers run, and point-to-point messages sent
 * ahead of their receives over TCP stop at a documented bound
 * (DIST_TCP_UNEXPECTED_MAX / _MB), past which the sender's operation fails
 * with DIST_E_BACKEND and says why, and the group goes on working. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mp.h"

static int keys_now(const dist_test_ctx *ctx, int64_t *n) {
  CHECK_OK(ctx, dist_barrier(NULL, NULL)); /* both ranks are done with the last one */
  CHECK_OK(ctx, dist_store_num_keys(dist_get_default_store(), n));
  return 0;
}

static int many_barriers(const dist_test_ctx *ctx) {
  int total = *(const int *)ctx->arg;
  CHECK_OK(ctx, dist_test_init_pg(ctx, NULL));
  for (int i = 0; i < 10; i++)
    CHECK_OK(ctx, dist_monitored_barrier(NULL, 10000, false));
  int64_t before = 0, after = 0;
  if (keys_now(ctx, &before))
    return 1;
  for (int i = 10; i < total; i++)
    if (dist_monitored_barrier(NULL, 10000, false) != DIST_OK)
      return FAIL(ctx, "barrier %d: %s", i, dist_pg_errmsg(NULL));
  if (keys_now(ctx, &after))
    return 1;
  /* Flat: never more (setup keys the library drops lazily may go). */
  CHECK(ctx, after <= before, "the store held %lld keys after 10 barriers and %lld after %d",
        (long long)before, (long long)after, total);
  dist_test_finish();
  return 0;
}

Test(core_bounds, monitored_barriers_keep_the_store_key_count_flat, .timeout = 240) {
  int n = 100000;
  cr_assert_eq(dist_test_ranks(2, many_barriers, &n, 200), 0, "%s", dist_test_report());
}

#define BOUND 8
#define SENT 20

static int ahead(const dist_test_ctx *ctx) {
  CHECK_OK(ctx, dist_test_init_pg(ctx, NULL));
  int32_t v[SENT], go = 1;
  dist_tensor tgo = dist_tensor_1d(&go, DIST_INT32, 1);
  if (ctx->rank == 0) {
    dist_work *w[SENT];
    for (int i = 0; i < SENT; i++) {
      v[i] = 100 + i;
      dist_tensor t = dist_tensor_1d(&v[i], DIST_INT32, 1);
      CHECK_OK(ctx, dist_isend(&t, 1, NULL, i, &w[i]));
    }
    /* Past the bound: refused, with the reason, long before any receive. */
    for (int i = BOUND; i < SENT; i++) {
      int rc = dist_work_wait(w[i], 20000);
      CHECK(ctx, rc == DIST_E_BACKEND, "send %d: %s (%s)", i, dist_status_name(rc),
            dist_work_errmsg(w[i]));
      CHECK(ctx, strstr(dist_work_errmsg(w[i]), "refused") &&
                 strstr(dist_work_errmsg(w[i]), "DIST_TCP_UNEXPECTED_MAX"),
            "send %d: %s", i, dist_work_errmsg(w[i]));
      dist_work_free(w[i]);
    }
    CHECK_OK(ctx, dist_send(&tgo, 1, NULL, 1000));
    for (int i = 0; i < BOUND; i++) {
      CHECK_OK(ctx, dist_work_wait(w[i], 20000));
      dist_work_free(w[i]);
    }
  } else {
    /* Waiting for tag 1000 drives progress, so the messages sent ahead
     * arrive and queue (a rank that waits for nothing reads nothing). */
    CHECK_OK(ctx, dist_recv(&tgo, 0, NULL, 1000, NULL));
    for (int i = 0; i < BOUND; i++) {
      int32_t got = -1;
      dist_tensor t = dist_tensor_1d(&got, DIST_INT32, 1);
      CHECK_OK(ctx, dist_recv(&t, 0, NULL, i, NULL));
      CHECK(ctx, got == 100 + i, "message %d carried %d", i, got);
    }
  }
  /* The group goes on: a message each way and a collective. */
  int32_t x = 7 + ctx->rank;
  dist_tensor t = dist_tensor_1d(&x, DIST_INT32, 1);
  if (ctx->rank == 0)
    CHECK_OK(ctx, dist_send(&t, 1, NULL, 99));
  else
    CHECK_OK(ctx, dist_recv(&t, 0, NULL, 99, NULL));
  CHECK(ctx, x == 7, "got %d", x);
  CHECK_OK(ctx, dist_all_reduce(&t, DIST_SUM, NULL, NULL));
  CHECK(ctx, x == 14, "sum %d", x);
  dist_test_finish();
  return 0;
}

Test(core_bounds, tcp_messages_sent_ahead_past_the_bound_fail_the_sender_with_a_reason,
     .timeout = 60) {
  setenv("DIST_TRANSPORT", "tcp", 1);
  setenv("DIST_TCP_UNEXPECTED_MAX", "8", 1);
  cr_assert_eq(dist_test_ranks(2, ahead, NULL, 45), 0, "%s", dist_test_report());
}
