/* ctest: labels=multiproc timeout=120 */
/* all_gather with outputs of different sizes per rank, as torch allows:
 * rank r contributes r+... elements (rank 0 none at all), every rank ends
 * with every contribution, synchronously and with a work handle, on both
 * transports; this rank's own output must match its input; a rank whose
 * input is not the size the others expect fails them with DIST_E_DESYNC
 * naming it. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "mp.h"

#define W 3

static int64_t len_of(int r) { return r == 2 ? 1000 : r; } /* 0, 1, 1000 */

static int gather_once(const dist_test_ctx *ctx, bool async) {
  int me = ctx->rank;
  static int32_t bufs[W][1000];
  memset(bufs, 0xff, sizeof bufs);
  int32_t in[1000];
  for (int k = 0; k < len_of(me); k++)
    in[k] = 1000 * me + k;
  dist_tensor tin = dist_tensor_1d(in, DIST_INT32, len_of(me)), outs[W];
  for (int r = 0; r < W; r++)
    outs[r] = dist_tensor_1d(bufs[r], DIST_INT32, len_of(r));
  dist_work *w = NULL;
  CHECK_OK(ctx, dist_all_gather(outs, W, &tin, NULL, async ? &w : NULL));
  if (async) {
    CHECK_OK(ctx, dist_work_wait(w, 20000));
    dist_work_free(w);
  }
  for (int r = 0; r < W; r++)
    for (int k = 0; k < len_of(r); k++)
      CHECK(ctx, bufs[r][k] == 1000 * r + k, "output %d[%d] = %d", r, k, bufs[r][k]);
  return 0;
}

static int uneven_rank(const dist_test_ctx *ctx) {
  setenv("DIST_TRANSPORT", ctx->arg, 1);
  CHECK_OK(ctx, dist_test_init_pg(ctx, NULL));
  if (gather_once(ctx, false) || gather_once(ctx, true))
    return 1;
  /* Its own output must hold its input. */
  int32_t a[4] = {0}, b[4], c[4];
  dist_tensor in = dist_tensor_1d(a, DIST_INT32, 2);
  dist_tensor outs[W] = {dist_tensor_1d(b, DIST_INT32, 3), dist_tensor_1d(c, DIST_INT32, 3),
                         dist_tensor_1d(c, DIST_INT32, 3)};
  CHECK(ctx, dist_all_gather(outs, W, &in, NULL, NULL) == DIST_E_INVAL, "own size accepted");
  CHECK(ctx, strstr(dist_pg_errmsg(NULL), "this rank's own"), "message: %s",
        dist_pg_errmsg(NULL));
  /* The even case still works after it. */
  int32_t one = ctx->rank, all[W];
  dist_tensor t1 = dist_tensor_1d(&one, DIST_INT32, 1), eo[W];
  for (int r = 0; r < W; r++)
    eo[r] = dist_tensor_1d(&all[r], DIST_INT32, 1);
  CHECK_OK(ctx, dist_all_gather(eo, W, &t1, NULL, NULL));
  CHECK(ctx, all[0] == 0 && all[1] == 1 && all[2] == 2, "even all_gather");
  /* Rank 2 sends 2 elements where the others expect 1 from it. */
  int32_t mine[2] = {7, 7}, got[W][2];
  int64_t n2 = ctx->rank == 2 ? 2 : 1;
  dist_tensor tm = dist_tensor_1d(mine, DIST_INT32, ctx->rank == 0 ? 0 : ctx->rank == 1 ? 1 : 2);
  dist_tensor mo[W] = {dist_tensor_1d(got[0], DIST_INT32, 0),
                       dist_tensor_1d(got[1], DIST_INT32, 1),
                       dist_tensor_1d(got[2], DIST_INT32, n2)};
  int rc = dist_all_gather(mo, W, &tm, NULL, NULL);
  if (ctx->rank < 2) {
    CHECK(ctx, rc == DIST_E_DESYNC, "mismatch gave %s", dist_status_name(rc));
    CHECK(ctx, strstr(dist_pg_errmsg(NULL), "all_gather of uneven sizes, the part from group rank 2: ") &&
                   strstr(dist_pg_errmsg(NULL), "rank 2: ALL_GATHER (run as BROADCAST int32[2] root 2) (8 bytes)"), "message: %s", dist_pg_errmsg(NULL));
  }
  dist_destroy_process_group(NULL); /* the group is broken: no closing barrier */
  return 0;
}

Test(core_api, uneven_all_gather_shm, .timeout = 60) {
  cr_assert_eq(dist_test_ranks(W, uneven_rank, "auto", 50), 0, "%s", dist_test_report());
}

Test(core_api, uneven_all_gather_tcp, .timeout = 60) {
  cr_assert_eq(dist_test_ranks(W, uneven_rank, "tcp", 50), 0, "%s", dist_test_report());
}
