/* ctest: labels=multiproc timeout=120 */
/* all_gather with outputs of different sizes per rank, as torch allows:
 * rank r contributes r+... elements (rank 0 none at all), every rank ends
 * with every contribution, synchronously and with a work handle, on both
 * transports; this rank's own output must match its input; a rank whose
 * input is not the size the others expect fails them with DIST_E_DESYNC
 * naming it and the entry. A rank whose list entry differs from the
 * others' even lists (it runs the call as broadcasts, they as one
 * all_gather; reduce_scatter alike) is a desync at the call that marks it,
 * with the list as the field, never BROADCAST nor a dtype. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h" /* dist__cause_parse_info */
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
    CHECK(ctx, strstr(dist_pg_errmsg(NULL), ": ranks disagree on the size of output "
                                            "tensors[2]\n") &&
                   strstr(dist_pg_errmsg(NULL), "  rank 2: ALL_GATHER, output tensors[2] int32[2] "
                                                "(8 bytes)  <- size of output tensors[2] differs"),
          "message: %s", dist_pg_errmsg(NULL));
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

/* Every rank passes 4 entries of 8 elements but rank `odd`, whose entry
 * (odd + 1) % 4 has 4 (its own is right): it alone runs the pieces. At
 * DIST_DEBUG=OFF the engine's report marks it at the program's call, the
 * field the list's sizes, and the job's cause says so too. */
typedef struct list_arg {
  const char *transport;
  bool rs;
  int odd;
} list_arg;

/* Rank 0 hosts the store: it leaves once every rank is done with it. */
static int leave_together(const dist_test_ctx *ctx) {
  dist_store *st = dist_get_default_store();
  int64_t n = 0;
  CHECK_OK(ctx, dist_store_add(st, "test/done", 1, &n));
  if (n == ctx->world)
    CHECK_OK(ctx, dist_store_set(st, "test/all", "1", 1));
  const char *keys[1] = {"test/all"};
  if (ctx->rank == 0)
    CHECK_OK(ctx, dist_store_wait(st, keys, 1, 30000));
  return 0;
}

static int one_entry_rank(const dist_test_ctx *ctx) {
  const list_arg *a = ctx->arg;
  setenv("DIST_TRANSPORT", a->transport, 1);
  CHECK_OK(ctx, dist_test_init_pg(ctx, NULL));
  float one[8] = {0}, list[4][8] = {{0}};
  dist_tensor t = dist_tensor_1d(one, DIST_FLOAT32, 8), l[4];
  for (int i = 0; i < 4; i++)
    l[i] = dist_tensor_1d(list[i], DIST_FLOAT32,
                          ctx->rank == a->odd && i == (a->odd + 1) % 4 ? 4 : 8);
  int rc = a->rs ? dist_reduce_scatter(&t, l, 4, DIST_SUM, NULL, NULL)
                 : dist_all_gather(l, 4, &t, NULL, NULL);
  const char *msg = dist_pg_errmsg(NULL), *op = a->rs ? "REDUCE_SCATTER" : "ALL_GATHER";
  const char *side = a->rs ? "input" : "output";
  char head[128], want[128], mark[192];
  /* (over TCP the odd rank, whose piece was out early, may get the
   * report as the reason its group is now unusable, after the header) */
  snprintf(head, sizeof head, "desync in group 0 (default, 4 ranks) at %s #1: ", op);
  snprintf(want, sizeof want, "ranks disagree on the size of an %s tensor\n", side);
  snprintf(mark, sizeof mark, "  rank %d: %s float32%s, %s tensors of different sizes  <- size "
           "of an %s tensor differs", a->odd, op, a->rs ? " op=SUM" : "", side, side);
  CHECK(ctx, rc == DIST_E_DESYNC, "%s gave %s: %s", op, dist_status_name(rc), msg);
  CHECK(ctx, !strncmp(msg, head, strlen(head)) && strstr(msg, want) && strstr(msg, mark) &&
                 !strstr(msg, "BROADCAST") && !strstr(msg, "REDUCE ") && !strstr(msg, "dtype"),
        "message:\n%s\nwant:\n%s%s%s", msg, head, want, mark);
  if (ctx->rank == 0) { /* the cause is posted before any rank returns */
    void *v = NULL;
    size_t n = 0;
    CHECK_OK(ctx, dist_store_get(dist_get_default_store(), DIST_KEY_CAUSE, &v, &n));
    dist__cause_fields f;
    dist__cause_parse_info(v, n, &f);
    char field[64];
    snprintf(field, sizeof field, "size of an %s tensor", side);
    CHECK(ctx, f.n_culprits == 1 && f.culprits[0] == a->odd && !strcmp(f.op, op) &&
                   f.seq == 1 && !strcmp(f.field, field),
          "the cause names rank %d at %s #1, %s: %.*s", a->odd, op, field, (int)n, (char *)v);
    dist_free(v);
  }
  if (leave_together(ctx))
    return 1;
  dist_destroy_process_group(NULL);
  return 0;
}

Test(core_api, one_all_gather_entry_of_another_size_marks_its_rank_shm, .timeout = 60) {
  list_arg a = {"auto", false, 3};
  cr_assert_eq(dist_test_ranks(4, one_entry_rank, &a, 50), 0, "%s", dist_test_report());
}

Test(core_api, one_reduce_scatter_entry_of_another_size_marks_its_rank_shm, .timeout = 60) {
  list_arg a = {"auto", true, 1};
  cr_assert_eq(dist_test_ranks(4, one_entry_rank, &a, 50), 0, "%s", dist_test_report());
}

Test(core_api, one_all_gather_entry_of_another_size_marks_its_rank_tcp, .timeout = 60) {
  list_arg a = {"tcp", false, 0};
  cr_assert_eq(dist_test_ranks(4, one_entry_rank, &a, 50), 0, "%s", dist_test_report());
}

Test(core_api, one_reduce_scatter_entry_of_another_size_marks_its_rank_tcp, .timeout = 60) {
  list_arg a = {"tcp", true, 2};
  cr_assert_eq(dist_test_ranks(4, one_entry_rank, &a, 50), 0, "%s", dist_test_report());
}
