/* coll_suite.c - the collective suite every backend runs (see
 * coll_suite.h): moved here from tests/core/test_collectives_mp.c so the
 * cpu backend's forked ranks and the mpi backend's mpirun ranks run the
 * very same cases. */
#include "coll_suite.h"

#include <stdio.h>

static const dist_op_kind ops[] = {
    DIST_OP_ALL_REDUCE, DIST_OP_REDUCE, DIST_OP_BROADCAST, DIST_OP_ALL_GATHER,
    DIST_OP_ALL_GATHER_INTO_TENSOR, DIST_OP_GATHER, DIST_OP_SCATTER, DIST_OP_REDUCE_SCATTER,
    DIST_OP_REDUCE_SCATTER_TENSOR, DIST_OP_ALL_TO_ALL, DIST_OP_ALL_TO_ALL_SINGLE,
    DIST_OP_BARRIER, DIST_OP_SEND, DIST_OP_BATCH_P2P,
};
#define N_OPS (int)(sizeof ops / sizeof ops[0])

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

/* The large cases' elements: 200,000 to 600,000; under a sanitizer, which
 * slows every copy and reduction 5-15 times, 100,000 to 140,000, still
 * many slots and chunks of every engine (100 KB at one byte each). */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define LARGE_MIN 100000
#define LARGE_SPAN 40000
#else
#define LARGE_MIN 200000
#define LARGE_SPAN 400000
#endif

/* Mostly small, sometimes empty, sometimes large enough for chunking. */
static int64_t size_for(uint64_t *s) {
  uint64_t r = rng(s) % 100;
  if (r < 5)
    return 0;
  if (r < 85)
    return (int64_t)(rng(s) % 300) + 1;
  if (r < 97)
    return (int64_t)(rng(s) % 20000) + 1000;
  return (int64_t)(rng(s) % LARGE_SPAN) + LARGE_MIN;
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

int coll_suite_run(const dist_test_ctx *ctx, uint64_t seed) {
  uint64_t s = seed * 2654435761u + (uint64_t)ctx->world;
  if (sweep(ctx, NULL, &s) || async_mix(ctx, NULL, &s))
    return 1;
  if (ctx->world >= 3 && subgroup(ctx, &s))
    return 1;
  return 0;
}
