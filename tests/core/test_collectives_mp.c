/* ctest: labels=multiproc timeout=600 */
/* Every operation, dtype and reduce op of the public API on real forked
 * ranks, sampled as STYLE.md's Tests section says: every operation with
 * every dtype once, every reduce op once per dtype, world sizes 1 to 5, a
 * seeded random mix of sizes, roots, synchronous and asynchronous calls, on
 * the default group and on a subgroup, over shared memory and over forced
 * TCP. Each result is compared bit for bit with values computed on one rank
 * in ascending rank order (so every rank holds identical bits). The seed is
 * printed; DIST_TEST_SEED=<n> replays a run. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>

#include "coll_check.h"
#include "mp.h"

static const dist_op_kind ops[] = {
    DIST_OP_ALL_REDUCE, DIST_OP_REDUCE, DIST_OP_BROADCAST, DIST_OP_ALL_GATHER,
    DIST_OP_ALL_GATHER_INTO_TENSOR, DIST_OP_GATHER, DIST_OP_SCATTER, DIST_OP_REDUCE_SCATTER,
    DIST_OP_REDUCE_SCATTER_TENSOR, DIST_OP_ALL_TO_ALL, DIST_OP_ALL_TO_ALL_SINGLE,
    DIST_OP_BARRIER, DIST_OP_SEND, DIST_OP_BATCH_P2P,
};
#define N_OPS (int)(sizeof ops / sizeof ops[0])

typedef struct plan {
  const char *transport; /* DIST_TRANSPORT for the ranks */
  uint64_t seed;
} plan;

static uint64_t rng(uint64_t *s) {
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return *s;
}

static bool has_redop(dist_op_kind k) {
  return k == DIST_OP_ALL_REDUCE || k == DIST_OP_REDUCE || k == DIST_OP_REDUCE_SCATTER ||
         k == DIST_OP_REDUCE_SCATTER_TENSOR;
}

/* The i-th reduce op valid for dt (cycling). */
static dist_redop redop_for(dist_dtype dt, unsigned i) {
  dist_redop valid[DIST_REDOP_COUNT_];
  int n = 0;
  for (int k = 0; k < DIST_REDOP_COUNT_; k++) {
    dist_redop op = {(dist_redop_kind)k, 0.75};
    if (dist_redop_check(op, dt) == DIST_OK)
      valid[n++] = op;
  }
  return valid[i % (unsigned)n];
}

/* Mostly small, sometimes empty, sometimes large enough for chunking. */
static int64_t size_for(uint64_t *s) {
  uint64_t r = rng(s) % 100;
  if (r < 5)
    return 0;
  if (r < 85)
    return (int64_t)(rng(s) % 300) + 1;
  if (r < 97)
    return (int64_t)(rng(s) % 20000) + 1000;
  return (int64_t)(rng(s) % 400000) + 200000;
}

static coll_case make_case(dist_op_kind op, dist_dtype dt, unsigned redop_i, int size,
                           uint64_t *s) {
  coll_case c = {0};
  c.op = op;
  c.dtype = dt;
  c.redop = has_redop(op) ? redop_for(dt, redop_i) : DIST_SUM;
  c.n = size_for(s);
  c.root = (int)(rng(s) % (uint64_t)size);
  c.uneven = op == DIST_OP_ALL_TO_ALL_SINGLE && (rng(s) & 1);
  c.seed = rng(s) % 100000;
  return c;
}

static int run_case(const dist_test_ctx *ctx, dist_pg *g, const coll_case *c) {
  char msg[1024];
  if (coll_check(g, c, msg, sizeof msg))
    return FAIL(ctx, "%s", msg);
  return 0;
}

/* Every op with every dtype, and every reduce op of every dtype on
 * all_reduce; sync or async by coin. */
static int sweep(const dist_test_ctx *ctx, dist_pg *g, uint64_t *s) {
  int size = dist_get_world_size(g);
  for (int d = 0; d < DIST_DTYPE_COUNT_; d++)
    for (int o = 0; o < N_OPS; o++) {
      coll_case c = make_case(ops[o], (dist_dtype)d, (unsigned)(o + d), size, s);
      c.async = rng(s) & 1;
      if (run_case(ctx, g, &c))
        return 1;
    }
  for (int d = 0; d < DIST_DTYPE_COUNT_; d++)
    for (unsigned k = 0; k < DIST_REDOP_COUNT_; k++) {
      coll_case c = make_case(DIST_OP_ALL_REDUCE, (dist_dtype)d, k, size, s);
      if (run_case(ctx, g, &c))
        return 1;
    }
  return 0;
}

/* Several asynchronous operations in flight at once, waited in order. */
static int async_mix(const dist_test_ctx *ctx, dist_pg *g, uint64_t *s) {
  coll_case cases[12];
  int size = dist_get_world_size(g);
  for (int i = 0; i < 12; i++) {
    dist_op_kind op = ops[rng(s) % (N_OPS - 2)]; /* collectives only */
    cases[i] = make_case(op, (dist_dtype)(rng(s) % DIST_DTYPE_COUNT_), (unsigned)i, size, s);
    cases[i].async = true;
  }
  char msg[1024];
  if (coll_check_many_async(g, cases, 12, msg, sizeof msg))
    return FAIL(ctx, "async mix: %s", msg);
  return 0;
}

/* A subgroup of every other rank from the top (so group ranks differ from
 * global ranks), with a random sample of cases. */
static int subgroup(const dist_test_ctx *ctx, uint64_t *s) {
  int members[8], n = 0;
  for (int r = ctx->world - 1; r >= 0; r -= 2)
    members[n++] = r;
  dist_pg *g;
  CHECK_OK(ctx, dist_new_group(members, (size_t)n, NULL, &g));
  for (int i = 0; i < 30; i++) {
    coll_case c = make_case(ops[rng(s) % N_OPS], (dist_dtype)(rng(s) % DIST_DTYPE_COUNT_),
                            (unsigned)i, n, s);
    c.async = rng(s) & 1;
    if (g != DIST_GROUP_NON_MEMBER && run_case(ctx, g, &c))
      return 1;
  }
  return dist_destroy_process_group(g);
}

static int rank_main(const dist_test_ctx *ctx) {
  const plan *p = ctx->arg;
  setenv("DIST_TRANSPORT", p->transport, 1);
  CHECK_OK(ctx, dist_test_init_pg(ctx, NULL));
  uint64_t s = p->seed * 2654435761u + (uint64_t)ctx->world;
  if (sweep(ctx, NULL, &s) || async_mix(ctx, NULL, &s))
    return 1;
  if (ctx->world >= 3 && subgroup(ctx, &s))
    return 1;
  dist_test_finish();
  return 0;
}

static void run(int world, const char *transport) {
  plan p = {transport, dist_test_seed()};
  cr_log_info("world %d over %s, DIST_TEST_SEED=%llu", world, transport,
              (unsigned long long)p.seed);
  int rc = dist_test_ranks(world, rank_main, &p, 500);
  cr_assert_eq(rc, 0, "world %d over %s (DIST_TEST_SEED=%llu):\n%s", world, transport,
               (unsigned long long)p.seed, dist_test_report());
}

Test(core_collectives, every_op_and_dtype_on_1_rank_shm, .timeout = 300) { run(1, "auto"); }
Test(core_collectives, every_op_and_dtype_on_2_ranks_shm, .timeout = 300) { run(2, "auto"); }
Test(core_collectives, every_op_and_dtype_on_3_ranks_shm, .timeout = 300) { run(3, "auto"); }
Test(core_collectives, every_op_and_dtype_on_4_ranks_shm, .timeout = 300) { run(4, "auto"); }
Test(core_collectives, every_op_and_dtype_on_5_ranks_shm, .timeout = 300) { run(5, "auto"); }
Test(core_collectives, every_op_and_dtype_on_1_rank_tcp, .timeout = 300) { run(1, "tcp"); }
Test(core_collectives, every_op_and_dtype_on_2_ranks_tcp, .timeout = 300) { run(2, "tcp"); }
Test(core_collectives, every_op_and_dtype_on_3_ranks_tcp, .timeout = 300) { run(3, "tcp"); }
Test(core_collectives, every_op_and_dtype_on_4_ranks_tcp, .timeout = 300) { run(4, "tcp"); }
Test(core_collectives, every_op_and_dtype_on_5_ranks_tcp, .timeout = 300) { run(5, "tcp"); }
