/* ctest: labels=multiproc timeout=120 */
/* Several callbacks per work, run in order; futures from works carrying
 * the work's status and message; then-chains; waiting with a timeout; a
 * future freed by its user still completing its chain. The pending cases
 * are made deterministic by a peer that sends only when told to. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "mp.h"

typedef struct trail {
  int order[8];
  int n;
  int32_t *data;
  int seen_at_cb; /* the received value as the callbacks saw it */
} trail;

static void note(trail *t, int id) {
  if (t->n < 8)
    t->order[t->n++] = id;
}
static void cb_set(dist_work *w, void *a) { (void)w; note(a, 0); }
static void cb_1(dist_work *w, void *a) {
  (void)w;
  trail *t = a;
  t->seen_at_cb = *t->data;
  note(t, 1);
}
static void cb_2(dist_work *w, void *a) { (void)w; note(a, 2); }
static void cb_3(dist_work *w, void *a) { (void)w; note(a, 3); }

static int doubled; /* what the then chain computed */
static int twice(dist_future *done, void *arg) {
  if (dist_future_status(done) != DIST_OK)
    return dist_future_status(done);
  doubled = 2 * *(int32_t *)arg;
  return DIST_OK;
}
static int refuse(dist_future *done, void *arg) {
  (void)done;
  (void)arg;
  return DIST_E_INVAL;
}
static int pass_on(dist_future *done, void *arg) {
  (void)arg;
  return dist_future_status(done);
}

/* Rank 0 posts an irecv that stays pending until it tells rank 1 to send. */
static int rank0(const dist_test_ctx *ctx) {
  int32_t v = 0, go = 1;
  dist_tensor tv = dist_tensor_1d(&v, DIST_INT32, 1), tg = dist_tensor_1d(&go, DIST_INT32, 1);
  dist_work *w;
  CHECK_OK(ctx, dist_irecv(&tv, 1, NULL, 2, &w));
  trail t = {.data = &v};
  CHECK_OK(ctx, dist_work_add_callback(w, cb_1, &t));
  CHECK_OK(ctx, dist_work_set_callback(w, cb_set, &t));
  CHECK_OK(ctx, dist_work_add_callback(w, cb_2, &t));
  dist_future *f, *g, *h;
  CHECK_OK(ctx, dist_work_get_future(w, &f));
  CHECK_OK(ctx, dist_work_add_callback(w, cb_3, &t));
  CHECK_OK(ctx, dist_future_then(f, twice, &v, &g));
  CHECK_OK(ctx, dist_future_then(g, refuse, NULL, &h));
  CHECK(ctx, !dist_future_is_done(f) && !dist_work_is_completed(w), "done before the send");
  CHECK(ctx, dist_future_wait(h, 0) == DIST_E_TIMEOUT, "a pending future did not time out");
  CHECK(ctx, dist_future_wait(f, 30) == DIST_E_TIMEOUT, "a pending future did not time out");
  dist_future_free(f); /* the chain goes on without the user's handle */
  CHECK_OK(ctx, dist_send(&tg, 1, NULL, 1));
  CHECK(ctx, dist_future_wait(h, 20000) == DIST_E_INVAL, "chain status %s",
        dist_status_name(dist_future_status(h)));
  CHECK(ctx, strstr(dist_future_errmsg(h), "then callback failed with"), "message: %s",
        dist_future_errmsg(h));
  CHECK(ctx, dist_future_status(g) == DIST_OK && doubled == 2 * 77, "doubled %d", doubled);
  CHECK_OK(ctx, dist_work_wait(w, 20000));
  CHECK(ctx, t.n == 4 && t.order[0] == 0 && t.order[1] == 1 && t.order[2] == 2 &&
                 t.order[3] == 3 && t.seen_at_cb == 77,
        "callbacks ran %d times, order %d %d %d %d, saw %d", t.n, t.order[0], t.order[1],
        t.order[2], t.order[3], t.seen_at_cb);
  /* Added after completion: runs at once. */
  CHECK_OK(ctx, dist_work_add_callback(w, cb_2, &t));
  CHECK(ctx, t.n == 5 && t.order[4] == 2, "late callback did not run");
  dist_future_free(g);
  dist_future_free(h);
  dist_work_free(w);
  /* A failed work: its future carries the status and message, and a chain
   * that passes the status on keeps the message. */
  int64_t big[4];
  dist_tensor tb = dist_tensor_1d(big, DIST_INT64, 4);
  CHECK_OK(ctx, dist_irecv(&tb, 1, NULL, 3, &w));
  CHECK_OK(ctx, dist_work_get_future(w, &f));
  CHECK_OK(ctx, dist_future_then(f, pass_on, NULL, &g));
  CHECK(ctx, dist_future_wait(g, 20000) == DIST_E_DESYNC, "failed work's chain: %s",
        dist_status_name(dist_future_status(g)));
  CHECK(ctx, dist_future_status(f) == DIST_E_DESYNC &&
                 !strcmp(dist_future_errmsg(f), dist_work_errmsg(w)) &&
                 !strcmp(dist_future_errmsg(g), dist_work_errmsg(w)) &&
                 strstr(dist_work_errmsg(w), "ranks disagree on the dtype"), /* int32 sent */
        "future message '%s', work's '%s'", dist_future_errmsg(g), dist_work_errmsg(w));
  dist_future_free(f);
  dist_future_free(g);
  dist_work_free(w);
  /* A handle freed while its receive waits: the work lives on until the
   * message comes, and its future carries the outcome (not the stale
   * handle's DIST_E_INVAL). */
  int32_t late = 0;
  dist_tensor tl = dist_tensor_1d(&late, DIST_INT32, 1);
  CHECK_OK(ctx, dist_irecv(&tl, 1, NULL, 4, &w));
  CHECK_OK(ctx, dist_work_get_future(w, &f));
  dist_work_free(w);
  CHECK_OK(ctx, dist_send(&tg, 1, NULL, 5));
  CHECK(ctx, dist_future_wait(f, 20000) == DIST_OK && late == 78, "a freed work's future: %s, "
        "value %d", dist_status_name(dist_future_status(f)), late);
  dist_future_free(f);
  return 0;
}

static int rank1(const dist_test_ctx *ctx) {
  int32_t v = 77, go = 0;
  dist_tensor tv = dist_tensor_1d(&v, DIST_INT32, 1), tg = dist_tensor_1d(&go, DIST_INT32, 1);
  CHECK_OK(ctx, dist_recv(&tg, 0, NULL, 1, NULL));
  CHECK_OK(ctx, dist_send(&tv, 0, NULL, 2));
  int32_t small[2] = {0};
  dist_tensor ts = dist_tensor_1d(small, DIST_INT32, 2);
  CHECK(ctx, dist_send(&ts, 0, NULL, 3) == DIST_E_DESYNC, "mismatched send succeeded");
  int32_t late = 78;
  dist_tensor tl = dist_tensor_1d(&late, DIST_INT32, 1);
  CHECK_OK(ctx, dist_recv(&tg, 0, NULL, 5, NULL)); /* rank 0 freed its handle */
  CHECK_OK(ctx, dist_send(&tl, 0, NULL, 4));
  return 0;
}

static int futures_rank(const dist_test_ctx *ctx) {
  setenv("DIST_TRANSPORT", ctx->arg, 1);
  CHECK_OK(ctx, dist_test_init_pg(ctx, NULL));
  if ((ctx->rank == 0 ? rank0 : rank1)(ctx))
    return 1;
  dist_test_finish();
  return 0;
}

Test(core_api, work_callbacks_in_order_and_future_chains, .timeout = 60) {
  cr_assert_eq(dist_test_ranks(2, futures_rank, "auto", 50), 0, "%s", dist_test_report());
}

/* --- futures the caller completes ---------------------------------------- */

static void *complete_later(void *arg) {
  dist_future *ready = ((dist_future **)arg)[0], *f = ((dist_future **)arg)[1];
  dist_future_wait(ready, -1); /* the main thread says when */
  dist_future_set_result(f, DIST_E_ABORTED, "the step was aborted");
  return NULL;
}

static int n_calls;
static void count_cb(dist_future *f, void *arg) {
  (void)f;
  (void)arg;
  n_calls++;
}

Test(core_api, a_future_completes_once_and_is_waited_on_with_a_timeout, .timeout = 30) {
  dist_future *ready, *f, *g;
  cr_assert_eq(dist_future_new(&ready), DIST_OK);
  cr_assert_eq(dist_future_new(&f), DIST_OK);
  cr_assert_eq(dist_future_add_callback(f, count_cb, NULL), DIST_OK);
  cr_assert_eq(dist_future_then(f, pass_on, NULL, &g), DIST_OK);
  cr_assert_eq(dist_future_wait(f, 20), DIST_E_TIMEOUT);
  cr_assert_eq(dist_future_status(f), DIST_OK, "pending reads OK");
  cr_assert(!(dist_future_is_done(g)));
  dist_future *args[2] = {ready, f};
  pthread_t th;
  cr_assert_eq(pthread_create(&th, NULL, complete_later, args), 0);
  cr_assert_eq(dist_future_set_result(ready, DIST_OK, NULL), DIST_OK);
  cr_assert_eq(dist_future_wait(g, 10000), DIST_E_ABORTED, "the chain's status");
  cr_assert_str_eq(dist_future_errmsg(g), "the step was aborted");
  pthread_join(th, NULL);
  cr_assert_eq(n_calls, 1);
  cr_assert_eq(dist_future_set_result(f, DIST_OK, NULL), DIST_E_INVAL, "completed twice");
  cr_assert(strstr(dist_last_errmsg(), "already completed"));
  cr_assert_eq(dist_future_status(f), DIST_E_ABORTED, "the first result stays");
  cr_assert_eq(dist_future_add_callback(f, count_cb, NULL), DIST_OK);
  cr_assert_eq(n_calls, 2, "a callback added after completion runs at once");
  cr_assert_eq(dist_future_wait(NULL, 0), DIST_E_INVAL);
  cr_assert_eq(dist_future_then(f, NULL, NULL, &g), DIST_E_INVAL);
  cr_assert_eq(dist_work_get_future(NULL, &g), DIST_E_INVAL);
  dist_future_free(ready);
  dist_future_free(f);
  dist_future_free(g);
}
