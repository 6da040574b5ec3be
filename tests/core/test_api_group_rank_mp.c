/* ctest: labels=multiproc timeout=120 */
/* Group ranks as arguments (torch 2.6's group_dst/group_src/group_peer):
 * every rooted or point-to-point call given DIST_GROUP_RANK(r) talks to rank
 * r of the group, not to global rank r. The group is global {1,2,3}, so
 * group rank r is global r+1 and a call that took r as a global rank would
 * pick the wrong peer (or root) and fail the value checks. */
#include <criterion/criterion.h>
#include <string.h>

#include "mp.h"

#define G(r) DIST_GROUP_RANK(r)

static int p2p_in_group(const dist_test_ctx *ctx, dist_pg *g, int gr) {
  int32_t v = gr == 0 ? 100 : -1;
  dist_tensor t = dist_tensor_1d(&v, DIST_INT32, 1);
  if (gr == 0)
    CHECK_OK(ctx, dist_send(&t, G(2), g, 7));
  if (gr == 2) {
    int src = -1;
    CHECK_OK(ctx, dist_recv(&t, G(0), g, 7, &src));
    CHECK(ctx, v == 100 && src == 1, "recv from group rank 0: %d from global %d", v, src);
  }
  /* isend / irecv: group rank 2 to group rank 1. */
  int32_t u = gr == 2 ? 200 : -1;
  dist_tensor tu = dist_tensor_1d(&u, DIST_INT32, 1);
  dist_work *w = NULL;
  if (gr == 2)
    CHECK_OK(ctx, dist_isend(&tu, G(1), g, 8, &w));
  if (gr == 1)
    CHECK_OK(ctx, dist_irecv(&tu, G(2), g, 8, &w));
  if (w) {
    CHECK_OK(ctx, dist_work_wait(w, -1));
    int src = -1;
    if (gr == 1) {
      CHECK_OK(ctx, dist_work_source_rank(w, &src));
      CHECK(ctx, u == 200 && src == 3, "irecv: %d from global %d", u, src);
    }
    dist_work_free(w);
  }
  /* A ring in the batch: send to group rank gr+1, receive from gr-1. */
  int32_t out = 1000 + gr, in = -1;
  dist_tensor to = dist_tensor_1d(&out, DIST_INT32, 1), ti = dist_tensor_1d(&in, DIST_INT32, 1);
  dist_p2p_op ops[2] = {{true, &to, G((gr + 1) % 3), 9, g}, {false, &ti, G((gr + 2) % 3), 9, g}};
  CHECK_OK(ctx, dist_batch_isend_irecv(ops, 2, NULL));
  CHECK(ctx, in == 1000 + (gr + 2) % 3, "ring got %d", in);
  return 0;
}

static int rooted_in_group(const dist_test_ctx *ctx, dist_pg *g, int gr) {
  int32_t v = gr == 1 ? 42 : 0;
  dist_tensor t = dist_tensor_1d(&v, DIST_INT32, 1);
  CHECK_OK(ctx, dist_broadcast(&t, G(1), g, NULL));
  CHECK(ctx, v == 42, "broadcast from group rank 1 gave %d", v);
  v = gr + 1; /* the global rank */
  CHECK_OK(ctx, dist_reduce(&t, G(2), DIST_SUM, g, NULL));
  if (gr == 2)
    CHECK(ctx, v == 6, "reduce to group rank 2 gave %d", v);
  int32_t mine = 10 * (gr + 1), got[3] = {0};
  dist_tensor in = dist_tensor_1d(&mine, DIST_INT32, 1);
  dist_tensor list[3];
  for (int i = 0; i < 3; i++)
    list[i] = dist_tensor_1d(&got[i], DIST_INT32, 1);
  dist_work *w = NULL;
  CHECK_OK(ctx, dist_gather(&in, gr == 0 ? list : NULL, gr == 0 ? 3 : 0, G(0), g, &w));
  CHECK_OK(ctx, dist_work_wait(w, -1));
  dist_work_free(w);
  if (gr == 0)
    CHECK(ctx, got[0] == 10 && got[1] == 20 && got[2] == 30, "gather %d %d %d", got[0],
          got[1], got[2]);
  int32_t parts[3] = {5, 6, 7}, part = -1;
  dist_tensor pl[3], po = dist_tensor_1d(&part, DIST_INT32, 1);
  for (int i = 0; i < 3; i++)
    pl[i] = dist_tensor_1d(&parts[i], DIST_INT32, 1);
  CHECK_OK(ctx, dist_scatter(&po, gr == 1 ? pl : NULL, gr == 1 ? 3 : 0, G(1), g, NULL));
  CHECK(ctx, part == 5 + gr, "scatter from group rank 1 gave %d", part);
  dist_bytes b = {gr == 2 ? "hello" : NULL, gr == 2 ? 6 : 0};
  CHECK_OK(ctx, dist_broadcast_bytes(&b, G(2), g));
  CHECK(ctx, b.len == 6 && !strcmp(b.data, "hello"), "broadcast_bytes from group rank 2");
  if (gr != 2)
    dist_free(b.data);
  return 0;
}

static int group_rank_args(const dist_test_ctx *ctx) {
  CHECK_OK(ctx, dist_test_init_pg(ctx, NULL));
  const int members[3] = {3, 1, 2};
  dist_pg *g;
  CHECK_OK(ctx, dist_new_group(members, 3, NULL, &g));
  if (ctx->rank > 0) {
    int gr = dist_get_rank(g);
    CHECK(ctx, gr == ctx->rank - 1, "group rank %d", gr);
    if (p2p_in_group(ctx, g, gr) || rooted_in_group(ctx, g, gr))
      return 1;
    /* A group rank past the group's end is refused, naming it. */
    int32_t v = 0;
    dist_tensor t = dist_tensor_1d(&v, DIST_INT32, 1);
    CHECK(ctx, dist_broadcast(&t, G(3), g, NULL) == DIST_E_INVAL, "group rank 3 accepted");
    CHECK(ctx, strstr(dist_pg_errmsg(g), "group rank 3"), "message: %s", dist_pg_errmsg(g));
    dist_work *w = NULL;
    CHECK(ctx, dist_isend(&t, G(5), g, 0, &w) == DIST_E_INVAL && !w, "group rank 5 accepted");
    CHECK(ctx, dist_reduce(&t, -3, DIST_SUM, g, NULL) == DIST_E_INVAL, "rank -3 accepted");
    CHECK(ctx, dist_broadcast(&t, G(-1), g, NULL) == DIST_E_INVAL, "group rank -1 accepted");
  }
  /* On the default group a group rank is the global rank. */
  int32_t v = ctx->rank == 3 ? 9 : 0;
  dist_tensor t = dist_tensor_1d(&v, DIST_INT32, 1);
  CHECK_OK(ctx, dist_broadcast(&t, G(3), NULL, NULL));
  CHECK(ctx, v == 9, "broadcast from default group rank 3 gave %d", v);
  dist_test_finish();
  return 0;
}

Test(core_api, group_rank_arguments_address_ranks_within_the_group, .timeout = 100) {
  cr_assert_eq(dist_test_ranks(4, group_rank_args, NULL, 80), 0, "%s", dist_test_report());
}
