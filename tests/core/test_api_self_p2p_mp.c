/* ctest: labels=multiproc timeout=120 */
/* isend and irecv to the calling rank itself, as torch allows: the data
 * arrives, either order of posting works, messages of one tag arrive in the
 * order sent, a size mismatch fails both sides, the batch accepts ops to
 * self, and a blocking send or recv to self is refused (it would wait for
 * itself), and a wait on a freed work (a stale handle) fails with
 * DIST_E_INVAL. On both transports, with traffic to a real peer in between. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "mp.h"

static int wait_free(const dist_test_ctx *ctx, dist_work *w, int want) {
  int rc = dist_work_wait(w, 20000);
  CHECK(ctx, rc == want, "work: %s, want %s: %s", dist_status_name(rc), dist_status_name(want),
        dist_work_errmsg(w));
  dist_work_free(w);
  return 0;
}

static int self_rank(const dist_test_ctx *ctx) {
  setenv("DIST_TRANSPORT", ctx->arg, 1);
  CHECK_OK(ctx, dist_test_init_pg(ctx, NULL));
  int me = ctx->rank;
  /* Send first, then receive. */
  int64_t out[4] = {me, 11, 12, 13}, in[4] = {0};
  dist_tensor to = dist_tensor_1d(out, DIST_INT64, 4), ti = dist_tensor_1d(in, DIST_INT64, 4);
  dist_work *ws = NULL, *wr = NULL;
  CHECK_OK(ctx, dist_isend(&to, me, NULL, 3, &ws));
  CHECK(ctx, !dist_work_is_completed(ws), "an isend to self completed before its irecv");
  CHECK_OK(ctx, dist_irecv(&ti, me, NULL, 3, &wr));
  if (wait_free(ctx, ws, DIST_OK) || wait_free(ctx, wr, DIST_OK))
    return 1;
  CHECK(ctx, in[0] == me && in[3] == 13, "self message %lld %lld", (long long)in[0],
        (long long)in[3]);
  /* Receive first (named by group rank), two sends of one tag in order;
   * a message from the other rank on the same tag does not satisfy it. */
  int32_t a = 100 + me, b = 200 + me, ra = 0, rb = 0, peer_in = 0, peer_out = 300 + me;
  dist_tensor ta = dist_tensor_1d(&a, DIST_INT32, 1), tb = dist_tensor_1d(&b, DIST_INT32, 1);
  dist_tensor tra = dist_tensor_1d(&ra, DIST_INT32, 1), trb = dist_tensor_1d(&rb, DIST_INT32, 1);
  dist_tensor tpi = dist_tensor_1d(&peer_in, DIST_INT32, 1);
  dist_tensor tpo = dist_tensor_1d(&peer_out, DIST_INT32, 1);
  dist_work *w1, *w2, *w3, *w4, *wpo, *wpi;
  CHECK_OK(ctx, dist_irecv(&tra, DIST_GROUP_RANK(me), NULL, 5, &w1));
  CHECK_OK(ctx, dist_irecv(&trb, me, NULL, 5, &w2));
  CHECK_OK(ctx, dist_isend(&tpo, 1 - me, NULL, 5, &wpo));
  CHECK_OK(ctx, dist_irecv(&tpi, 1 - me, NULL, 5, &wpi));
  if (wait_free(ctx, wpo, DIST_OK) || wait_free(ctx, wpi, DIST_OK))
    return 1;
  CHECK(ctx, peer_in == 301 - me && !dist_work_is_completed(w1), "peer message %d", peer_in);
  CHECK_OK(ctx, dist_isend(&ta, me, NULL, 5, &w3));
  CHECK_OK(ctx, dist_isend(&tb, me, NULL, 5, &w4));
  int src = -1;
  CHECK_OK(ctx, dist_work_wait(w1, 20000));
  CHECK_OK(ctx, dist_work_source_rank(w1, &src));
  dist_work_free(w1);
  if (wait_free(ctx, w2, DIST_OK) || wait_free(ctx, w3, DIST_OK) || wait_free(ctx, w4, DIST_OK))
    return 1;
  CHECK(ctx, ra == 100 + me && rb == 200 + me && src == me, "order: %d %d from %d", ra, rb, src);
  /* Sizes that disagree fail both. */
  int64_t big[8] = {0};
  dist_tensor tbig = dist_tensor_1d(big, DIST_INT64, 8);
  CHECK_OK(ctx, dist_isend(&to, me, NULL, 6, &ws));
  CHECK_OK(ctx, dist_irecv(&tbig, me, NULL, 6, &wr));
  if (wait_free(ctx, ws, DIST_E_DESYNC))
    return 1;
  CHECK(ctx, dist_work_wait(wr, 20000) == DIST_E_DESYNC &&
                 strstr(dist_work_errmsg(wr), "isend to self of 32 bytes matched irecv from "
                                                  "self of 64 bytes"),
        "mismatch message: %s", dist_work_errmsg(wr));
  dist_work_free(wr);
  /* The batch: a ring step and a message to self, synchronously. */
  int32_t so = 7 + me, si = 0, po = 50 + me, pi = 0;
  dist_tensor tso = dist_tensor_1d(&so, DIST_INT32, 1), tsi = dist_tensor_1d(&si, DIST_INT32, 1);
  dist_tensor tpo2 = dist_tensor_1d(&po, DIST_INT32, 1), tpi2 = dist_tensor_1d(&pi, DIST_INT32, 1);
  dist_p2p_op ops[4] = {{true, &tso, me, 9, NULL},
                        {true, &tpo2, 1 - me, 9, NULL},
                        {false, &tpi2, 1 - me, 9, NULL},
                        {false, &tsi, me, 9, NULL}};
  CHECK_OK(ctx, dist_batch_isend_irecv(ops, 4, NULL));
  CHECK(ctx, si == 7 + me && pi == 51 - me, "batch: self %d peer %d", si, pi);
  /* Blocking calls to self are refused at once. */
  CHECK(ctx, dist_send(&to, me, NULL, 1) == DIST_E_INVAL, "blocking send to self accepted");
  CHECK(ctx, strstr(dist_pg_errmsg(NULL), "the peer is this rank itself"), "send message: %s",
        dist_pg_errmsg(NULL));
  CHECK(ctx, dist_recv(&ti, me, NULL, 1, NULL) == DIST_E_INVAL, "blocking recv from self");
  /* A stale handle: a wait on a freed work, waited once already, fails with
   * DIST_E_INVAL naming the free, and a second free is ignored (no crash). */
  dist_work *wp = NULL, *wq = NULL;
  CHECK_OK(ctx, dist_isend(&tpo2, 1 - me, NULL, 12, &wp));
  CHECK_OK(ctx, dist_irecv(&tpi2, 1 - me, NULL, 12, &wq));
  CHECK_OK(ctx, dist_work_wait(wp, 20000));
  CHECK_OK(ctx, dist_work_wait(wp, 20000));
  CHECK_OK(ctx, dist_work_wait(wq, 20000));
  dist_work_free(wp);
  dist_work_free(wq);
  CHECK(ctx, dist_work_wait(wp, 20000) == DIST_E_INVAL, "wait on a freed work accepted");
  CHECK(ctx, strstr(dist_last_errmsg(), "stale handle"), "stale wait message: %s",
        dist_last_errmsg());
  dist_work_free(wq);
  CHECK(ctx, dist_work_synchronize(wq, 0) == DIST_E_INVAL, "synchronize on a freed work");
  CHECK(ctx, dist_work_status(wq) == DIST_E_INVAL && dist_work_is_completed(wq) &&
                 !dist_work_is_success(wq),
        "a freed work's status reads as an operation");
  CHECK(ctx, dist_work_get_future(wq, &(dist_future *){NULL}) == DIST_E_INVAL,
        "a future of a freed work");
  dist_test_finish();
  return 0;
}

Test(core_api, isend_irecv_to_self_shm, .timeout = 60) {
  cr_assert_eq(dist_test_ranks(2, self_rank, "auto", 50), 0, "%s", dist_test_report());
}

Test(core_api, isend_irecv_to_self_tcp, .timeout = 60) {
  cr_assert_eq(dist_test_ranks(2, self_rank, "tcp", 50), 0, "%s", dist_test_report());
}
