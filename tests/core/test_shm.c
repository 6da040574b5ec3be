/* ctest: labels=multiproc timeout=600 */
/* The shared-memory collective engine (core/src/backends/cpu/shm*.c): every kind,
 * every dtype, 1 to 5 ranks (and a large group), sizes from 0 elements to
 * many pipelined chunks, checked against values computed on one rank in
 * ascending rank order (tests/support/ref.h), bit for bit. Real forked
 * ranks, a real file (or TCP) store and a real segment in /dev/shm. */
#include <criterion/criterion.h>

#include <sched.h>

#include "ref.h"
#include "test_shm_util.h"

typedef struct tcase {
  dist_op_kind kind;
  dist_dtype dt;
  dist_redop op;
  int64_t n;   /* elements per rank (per block, per piece) */
  int root;
  bool uneven; /* all_to_all: uneven pieces */
} tcase;

typedef struct plan {
  uint64_t seed;
  int ncases;
  tcase cases[1024];
  bool tcp;
} plan;

static uint64_t mix(uint64_t *x) {
  uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static void *xalloc(size_t n) { return calloc(1, n ? n : 1); }

static size_t esz(const tcase *t) { return dist_dtype_size(t->dt); }

static int compare(const dist_test_ctx *ctx, const tcase *t, const char *what, const void *got,
                   const void *want, size_t n) {
  char msg[512];
  if (dist_test_compare(t->dt, got, want, n, 0, msg, sizeof msg)) // NaN payloads too
    return FAIL(ctx, "%s %s n=%lld root=%d op=%s: %s: %s", dist_op_name(t->kind),
                dist_dtype_name(t->dt), (long long)t->n, t->root, dist_redop_name(t->op.kind),
                what, msg);
  return 0;
}

/* --- per kind -------------------------------------------------------------- */

static int run_or_fail(const dist_test_ctx *ctx, shm_t *e, dist_coll *c, const tcase *t) {
  int rc = shm_t_run(e, c);
  if (rc != DIST_OK)
    return FAIL(ctx, "%s %s n=%lld: %s: %s", dist_op_name(t->kind), dist_dtype_name(t->dt),
                (long long)t->n, dist_status_name(rc), e->err.msg);
  return 0;
}

static int case_reduce(const dist_test_ctx *ctx, shm_t *e, const plan *pl, const tcase *t) {
  size_t n = (size_t)t->n, es = esz(t);
  uint8_t *buf = xalloc(n * es), *want = xalloc(n * es);
  dist_test_fill(buf, t->dt, n, pl->seed, ctx->rank, 0, 0);
  dist_tensor x = shm_t_tensor(buf, t->dt, t->n);
  dist_coll c = {.kind = t->kind, .inputs = &x, .n_inputs = 1, .outputs = &x, .n_outputs = 1,
                 .redop = t->op, .root = t->root};
  int bad = run_or_fail(ctx, e, &c, t);
  if (!bad) {
    if (t->kind == DIST_OP_ALL_REDUCE || ctx->rank == t->root)
      dist_test_expected(t->dt, t->op, want, n, pl->seed, ctx->world, 0, 0, ctx->world);
    else
      dist_test_fill(want, t->dt, n, pl->seed, ctx->rank, 0, 0);
    bad = compare(ctx, t, "result", buf, want, n);
  }
  free(buf);
  free(want);
  return bad;
}

static int case_broadcast(const dist_test_ctx *ctx, shm_t *e, const plan *pl, const tcase *t) {
  size_t n = (size_t)t->n, es = esz(t);
  uint8_t *buf = xalloc(n * es), *want = xalloc(n * es);
  dist_test_fill(buf, t->dt, n, pl->seed, ctx->rank, 0, 0);
  dist_test_fill(want, t->dt, n, pl->seed, t->root, 0, 0);
  dist_tensor x = shm_t_tensor(buf, t->dt, t->n);
  dist_coll c = {.kind = t->kind, .inputs = &x, .n_inputs = 1, .outputs = &x, .n_outputs = 1,
                 .root = t->root};
  int bad = run_or_fail(ctx, e, &c, t);
  if (!bad)
    bad = compare(ctx, t, "result", buf, want, n);
  free(buf);
  free(want);
  return bad;
}

/* all_gather (both forms) and gather. */
static int case_gather(const dist_test_ctx *ctx, shm_t *e, const plan *pl, const tcase *t) {
  int N = ctx->world;
  size_t n = (size_t)t->n, es = esz(t);
  bool flat = t->kind == DIST_OP_ALL_GATHER_INTO_TENSOR;
  bool reads = t->kind != DIST_OP_GATHER || ctx->rank == t->root;
  uint8_t *in = xalloc(n * es), *out = xalloc(n * es * (size_t)N), *want = xalloc(n * es);
  dist_test_fill(in, t->dt, n, pl->seed, ctx->rank, 0, 0);
  dist_tensor x = shm_t_tensor(in, t->dt, t->n), outs[DIST_TEST_MAX_RANKS];
  for (int j = 0; j < N; j++)
    outs[j] = shm_t_tensor(out + (size_t)j * n * es, t->dt, t->n);
  if (flat)
    outs[0] = shm_t_tensor(out, t->dt, t->n * N);
  dist_coll c = {.kind = t->kind, .inputs = &x, .n_inputs = 1, .outputs = outs,
                 .n_outputs = flat ? 1 : reads ? (size_t)N : 0, .root = t->root};
  int bad = run_or_fail(ctx, e, &c, t);
  for (int j = 0; j < N && !bad && reads; j++) {
    dist_test_fill(want, t->dt, n, pl->seed, j, 0, 0);
    bad = compare(ctx, t, "piece", out + (size_t)j * n * es, want, n);
  }
  free(in);
  free(out);
  free(want);
  return bad;
}

static int case_scatter(const dist_test_ctx *ctx, shm_t *e, const plan *pl, const tcase *t) {
  int N = ctx->world;
  size_t n = (size_t)t->n, es = esz(t);
  bool root = ctx->rank == t->root;
  uint8_t *in = xalloc(n * es * (size_t)N), *out = xalloc(n * es), *want = xalloc(n * es);
  dist_test_fill(in, t->dt, n * (size_t)N, pl->seed, ctx->rank, 0, 0);
  dist_test_fill(want, t->dt, n, pl->seed, t->root, (size_t)ctx->rank * n, 0);
  dist_tensor ins[DIST_TEST_MAX_RANKS], y = shm_t_tensor(out, t->dt, t->n);
  for (int j = 0; j < N; j++)
    ins[j] = shm_t_tensor(in + (size_t)j * n * es, t->dt, t->n);
  dist_coll c = {.kind = t->kind, .inputs = ins, .n_inputs = root ? (size_t)N : 0,
                 .outputs = &y, .n_outputs = 1, .root = t->root};
  int bad = run_or_fail(ctx, e, &c, t);
  if (!bad)
    bad = compare(ctx, t, "result", out, want, n);
  free(in);
  free(out);
  free(want);
  return bad;
}

static int case_reduce_scatter(const dist_test_ctx *ctx, shm_t *e, const plan *pl,
                               const tcase *t) {
  int N = ctx->world;
  size_t n = (size_t)t->n, es = esz(t);
  bool flat = t->kind == DIST_OP_REDUCE_SCATTER_TENSOR;
  uint8_t *in = xalloc(n * es * (size_t)N), *out = xalloc(n * es), *want = xalloc(n * es);
  dist_test_fill(in, t->dt, n * (size_t)N, pl->seed, ctx->rank, 0, 0);
  dist_tensor ins[DIST_TEST_MAX_RANKS], y = shm_t_tensor(out, t->dt, t->n);
  for (int j = 0; j < N; j++)
    ins[j] = shm_t_tensor(in + (size_t)j * n * es, t->dt, t->n);
  if (flat)
    ins[0] = shm_t_tensor(in, t->dt, t->n * N);
  dist_coll c = {.kind = t->kind, .inputs = ins, .n_inputs = flat ? 1 : (size_t)N, .outputs = &y,
                 .n_outputs = 1, .redop = t->op};
  int bad = run_or_fail(ctx, e, &c, t);
  if (!bad) {
    dist_test_expected(t->dt, t->op, want, n, pl->seed, N, (size_t)ctx->rank * n, 0, N);
    bad = compare(ctx, t, "block", out, want, n);
  }
  free(in);
  free(out);
  free(want);
  return bad;
}

/* Rows (or elements) rank r sends to rank j. */
static int64_t a2a_count(const tcase *t, uint64_t seed, int r, int j) {
  if (!t->uneven)
    return t->n;
  return t->n * (int64_t)((r * 5 + j * 3 + (int)(seed % 7)) % 4) / 2;
}

/* all_to_all (lists of elements) and all_to_all_single (rows of 3). */
static int case_a2a(const dist_test_ctx *ctx, shm_t *e, const plan *pl, const tcase *t) {
  int N = ctx->world, me = ctx->rank;
  bool single = t->kind == DIST_OP_ALL_TO_ALL_SINGLE;
  int64_t R = single ? 3 : 1, sin = 0, sout = 0, in_splits[DIST_TEST_MAX_RANKS],
          out_splits[DIST_TEST_MAX_RANKS];
  size_t es = esz(t);
  for (int j = 0; j < N; j++) {
    sin += in_splits[j] = a2a_count(t, pl->seed, me, j);
    sout += out_splits[j] = a2a_count(t, pl->seed, j, me);
  }
  uint8_t *in = xalloc((size_t)(sin * R) * es), *out = xalloc((size_t)(sout * R) * es);
  uint8_t *want = xalloc((size_t)(sout * R) * es);
  dist_test_fill(in, t->dt, (size_t)(sin * R), pl->seed, me, 0, 0);
  dist_tensor ins[DIST_TEST_MAX_RANKS], outs[DIST_TEST_MAX_RANKS];
  int64_t at_in = 0, at_out = 0;
  for (int j = 0; j < N; j++) { /* list form: piece j of the flat buffers */
    ins[j] = shm_t_tensor(in + (size_t)(at_in * R) * es, t->dt, in_splits[j] * R);
    outs[j] = shm_t_tensor(out + (size_t)(at_out * R) * es, t->dt, out_splits[j] * R);
    at_in += in_splits[j];
    at_out += out_splits[j];
  }
  dist_coll c = {.kind = t->kind, .inputs = ins, .n_inputs = (size_t)N, .outputs = outs,
                 .n_outputs = (size_t)N};
  if (single) {
    ins[0] = (dist_tensor){.data = in, .dtype = t->dt, .ndim = 2, .shape = {sin, R}};
    outs[0] = (dist_tensor){.data = out, .dtype = t->dt, .ndim = 2, .shape = {sout, R}};
    c.n_inputs = c.n_outputs = 1;
    if (t->uneven) {
      c.in_splits = in_splits;
      c.out_splits = out_splits;
      c.n_splits = (size_t)N;
    }
  }
  int bad = run_or_fail(ctx, e, &c, t);
  at_out = 0;
  for (int j = 0; j < N && !bad; j++) { /* j's piece for me starts after its pieces for < me */
    int64_t off = 0;
    for (int k = 0; k < me; k++)
      off += a2a_count(t, pl->seed, j, k);
    size_t len = (size_t)(out_splits[j] * R);
    dist_test_fill(want, t->dt, len, pl->seed, j, (size_t)(off * R), 0);
    bad = compare(ctx, t, "piece", out + (size_t)(at_out * R) * es, want, len);
    at_out += out_splits[j];
  }
  free(in);
  free(out);
  free(want);
  return bad;
}

static int run_case(const dist_test_ctx *ctx, shm_t *e, const plan *pl, const tcase *t) {
  switch (t->kind) {
  case DIST_OP_ALL_REDUCE:
  case DIST_OP_REDUCE:
    return case_reduce(ctx, e, pl, t);
  case DIST_OP_BROADCAST:
    return case_broadcast(ctx, e, pl, t);
  case DIST_OP_ALL_GATHER:
  case DIST_OP_ALL_GATHER_INTO_TENSOR:
  case DIST_OP_GATHER:
    return case_gather(ctx, e, pl, t);
  case DIST_OP_SCATTER:
    return case_scatter(ctx, e, pl, t);
  case DIST_OP_REDUCE_SCATTER:
  case DIST_OP_REDUCE_SCATTER_TENSOR:
    return case_reduce_scatter(ctx, e, pl, t);
  case DIST_OP_ALL_TO_ALL:
  case DIST_OP_ALL_TO_ALL_SINGLE:
    return case_a2a(ctx, e, pl, t);
  case DIST_OP_BARRIER: {
    dist_coll c = {.kind = DIST_OP_BARRIER, .root = -1};
    return run_or_fail(ctx, e, &c, t);
  }
  default:
    return FAIL(ctx, "no such case %d", (int)t->kind);
  }
}

static int rank_cases(const dist_test_ctx *ctx) {
  const plan *pl = ctx->arg;
  shm_t e = {0};
  if (shm_t_open(ctx, &e, pl->tcp))
    return 1;
  int bad = 0;
  for (int i = 0; i < pl->ncases && !bad; i++)
    bad = run_case(ctx, &e, pl, &pl->cases[i]);
  shm_t_close(&e);
  return bad;
}

/* --- plans ---------------------------------------------------------------- */

static const dist_op_kind kinds[] = {
    DIST_OP_ALL_REDUCE, DIST_OP_BROADCAST,      DIST_OP_REDUCE,
    DIST_OP_ALL_GATHER, DIST_OP_ALL_GATHER_INTO_TENSOR, DIST_OP_GATHER,
    DIST_OP_SCATTER,    DIST_OP_REDUCE_SCATTER, DIST_OP_REDUCE_SCATTER_TENSOR,
    DIST_OP_ALL_TO_ALL, DIST_OP_ALL_TO_ALL_SINGLE, DIST_OP_BARRIER};
#define NKINDS (sizeof kinds / sizeof kinds[0])

static bool reduces(dist_op_kind k) {
  return k == DIST_OP_ALL_REDUCE || k == DIST_OP_REDUCE || k == DIST_OP_REDUCE_SCATTER ||
         k == DIST_OP_REDUCE_SCATTER_TENSOR;
}

/* A reduce op valid for dt, picked by r. */
static dist_redop pick_op(dist_dtype dt, uint64_t r) {
  for (int tries = 0; tries < 64; tries++, r = r * 6364136223846793005ull + 1) {
    dist_redop op = {(dist_redop_kind)(r % DIST_REDOP_COUNT_), 0.0};
    if (op.kind == DIST_REDOP_PREMUL_SUM)
      op.scalar = (r >> 20) % 2 ? 0.75 : -1.5;
    if (dist_redop_check(op, dt) == DIST_OK)
      return op;
  }
  return DIST_SUM;
}

static void add(plan *pl, dist_op_kind k, dist_dtype dt, int64_t n, int root, uint64_t r) {
  tcase *t = &pl->cases[pl->ncases++];
  t->kind = k;
  t->dt = dt;
  t->op = reduces(k) ? pick_op(dt, r) : DIST_SUM;
  t->n = n;
  t->root = root;
  t->uneven = r & 1;
}

/* Every kind with every dtype once, sizes and roots rotating. */
static void plan_every(plan *pl, int world) {
  static const int64_t sizes[] = {0, 1, 5, 37, 1000, 9000, 3};
  uint64_t r = pl->seed;
  int i = 0;
  for (size_t k = 0; k < NKINDS; k++)
    for (int dt = 0; dt < DIST_DTYPE_COUNT_; dt++, i++)
      add(pl, kinds[k], (dist_dtype)dt, sizes[i % 7], i % world, mix(&r));
}

/* A seeded random mix. */
static void plan_random(plan *pl, int world, int ncases, int64_t maxn) {
  uint64_t r = pl->seed * 31 + (uint64_t)world;
  for (int i = 0; i < ncases; i++) {
    uint64_t x = mix(&r);
    int64_t n = (int64_t)(mix(&r) % (uint64_t)(x % 3 == 0 ? maxn : 64));
    add(pl, kinds[x % NKINDS], (dist_dtype)((x >> 8) % DIST_DTYPE_COUNT_), n,
        (int)((x >> 16) % (uint64_t)world), mix(&r));
  }
}

static void run_plan(plan *pl, int world, int timeout_s) {
  int rc = dist_test_ranks(world, rank_cases, pl, timeout_s);
  cr_assert_eq(rc, 0, "%d ranks (DIST_TEST_SEED=%llu):\n%s", world,
               (unsigned long long)pl->seed, dist_test_report());
}

/* Small slots so modest sizes take many pipelined steps, and a small
 * one-step limit so the two-phase all_reduce runs too. */
static void small_geometry(void) {
  setenv("DIST_SHM_STREAM_KB", "32", 1); /* streaming copies from 32 KiB of output */
  setenv("DIST_SHM_SLOT_KB", "16", 1);
  setenv("DIST_SHM_SMALL_BYTES", "256", 1);
  setenv("DIST_SHM_SPIN_US", "5", 1); /* 5 ranks share 2 cores: sleep early */
  setenv("DIST_SHM_YIELD_US", "50", 1);
}

static plan *new_plan(void) {
  plan *pl = calloc(1, sizeof *pl);
  pl->seed = dist_test_seed();
  return pl;
}

/* --- tests ---------------------------------------------------------------- */

static void every_kind(int world) {
  small_geometry();
  plan *pl = new_plan();
  plan_every(pl, world);
  run_plan(pl, world, 240);
  free(pl);
}

Test(core_shm, every_kind_and_dtype_on_1_rank, .timeout = 120) { every_kind(1); }
Test(core_shm, every_kind_and_dtype_on_2_ranks, .timeout = 240) { every_kind(2); }
Test(core_shm, every_kind_and_dtype_on_3_ranks, .timeout = 240) { every_kind(3); }
Test(core_shm, every_kind_and_dtype_on_4_ranks, .timeout = 240) { every_kind(4); }
Test(core_shm, every_kind_and_dtype_on_5_ranks, .timeout = 240) { every_kind(5); }

Test(core_shm, random_mix_with_default_geometry_on_3_ranks, .timeout = 240) {
  setenv("DIST_SHM_SPIN_US", "5", 1);
  plan *pl = new_plan();
  plan_random(pl, 3, 120, 100000);
  run_plan(pl, 3, 240);
  free(pl);
}

Test(core_shm, random_mix_with_small_slots_on_2_to_5_ranks, .timeout = 300) {
  small_geometry();
  for (int world = 2; world <= 5; world++) {
    plan *pl = new_plan();
    plan_random(pl, world, 80, 20000);
    run_plan(pl, world, 240);
    free(pl);
  }
}

/* Chunks that do not divide anything evenly: 4 KiB minimum, 3 steps. */
Test(core_shm, random_mix_with_odd_pipelining_on_3_ranks, .timeout = 240) {
  unsetenv("DIST_SHM_SLOT_KB");
  setenv("DIST_SHM_SPIN_US", "5", 1);
  setenv("DIST_SHM_PIPE_MIN_KB", "4", 1);
  setenv("DIST_SHM_PIPE_STEPS", "3", 1);
  setenv("DIST_SHM_SMALL_BYTES", "64", 1);
  plan *pl = new_plan();
  plan_random(pl, 3, 100, 60000);
  run_plan(pl, 3, 240);
  free(pl);
}

/* Single-copy transfers (process_vm_readv) for every piece from 1 KiB,
 * mixed with staged ones below that. */
Test(core_shm, random_mix_with_single_copy_transfers_on_2_to_4_ranks, .timeout = 240) {
  setenv("DIST_SHM_SPIN_US", "5", 1);
  setenv("DIST_SHM_CMA_MIN_KB", "1", 1);
  setenv("DIST_SHM_CMA_MAX_KB", "100000", 1);
  for (int world = 2; world <= 4; world++) {
    plan *pl = new_plan();
    plan_random(pl, world, 80, 50000);
    run_plan(pl, world, 200);
    free(pl);
  }
}

/* Megabytes through the default slots: every large path pipelines, and
 * copies out with streaming stores (forced on from 64 KiB). Broadcasts go
 * single-copy up to DIST_SHM_BCAST_DIRECT_KB (4 MiB), so one of 5 MiB
 * drives the staged broadcast at default settings. */
Test(core_shm, large_messages_pipeline_through_many_steps, .timeout = 240) {
  unsetenv("DIST_SHM_SLOT_KB");
  unsetenv("DIST_SHM_SMALL_BYTES");
  setenv("DIST_SHM_SPIN_US", "5", 1);
  setenv("DIST_SHM_STREAM_KB", "64", 1);
  plan *pl = new_plan();
  const dist_op_kind big[] = {DIST_OP_ALL_REDUCE, DIST_OP_BROADCAST, DIST_OP_ALL_GATHER_INTO_TENSOR,
                              DIST_OP_REDUCE_SCATTER_TENSOR, DIST_OP_ALL_TO_ALL_SINGLE,
                              DIST_OP_REDUCE, DIST_OP_SCATTER, DIST_OP_GATHER};
  for (size_t k = 0; k < sizeof big / sizeof big[0]; k++)
    add(pl, big[k], k % 2 ? DIST_FLOAT32 : DIST_BFLOAT16, 700001, 1, k);
  add(pl, DIST_OP_BROADCAST, DIST_FLOAT32, (5 << 20) / 4 + 3, 1, 1);
  run_plan(pl, 2, 200);
  pl->ncases = 0;
  for (size_t k = 0; k < sizeof big / sizeof big[0]; k++)
    add(pl, big[k], DIST_FLOAT64, 300007, 2, k + 1);
  run_plan(pl, 3, 200);
  free(pl);
}

Test(core_shm, works_over_a_tcp_store, .timeout = 120) {
  small_geometry();
  plan *pl = new_plan();
  pl->tcp = true;
  plan_random(pl, 3, 30, 5000);
  run_plan(pl, 3, 100);
  free(pl);
}

/* --- deferred waits: back-to-back rooted copies ----------------------------- */

/* A seeded sequence, the same on every rank: mostly small broadcasts
 * (whose root returns without waiting, shm_copy.c) with rotating roots,
 * sizes and dtypes, small scatters, and now and then another collective.
 * Every call's values are new (the seed mixes in the call's index), so a
 * root that overwrote data a reader had not yet read would show. Ranks
 * pause at random points so that readers lag a root that runs ahead. */
typedef struct mix_plan {
  uint64_t seed;
  int calls;
} mix_plan;

static const int64_t mix_sizes[] = {0, 1, 3, 4, 8, 31, 32, 33, 100, 1000, 4096, 20000};

static int mix_one(const dist_test_ctx *ctx, shm_t *e, uint64_t seed, int i, uint64_t x) {
  tcase t = {0};
  static const dist_dtype dts[] = {DIST_UINT8, DIST_FLOAT32, DIST_INT64, DIST_BFLOAT16};
  t.dt = dts[(x >> 8) % 4];
  t.root = (int)((x >> 16) % (uint64_t)ctx->world);
  t.n = mix_sizes[(x >> 24) % (sizeof mix_sizes / sizeof mix_sizes[0])] / (int64_t)esz(&t);
  t.op = DIST_SUM;
  unsigned k = (unsigned)(x % 16);
  t.kind = k < 10 ? DIST_OP_BROADCAST : k < 12 ? DIST_OP_SCATTER : k < 14 ? DIST_OP_ALL_REDUCE
           : k < 15 ? DIST_OP_ALL_GATHER_INTO_TENSOR : DIST_OP_BARRIER;
  if (t.kind == DIST_OP_SCATTER || t.kind == DIST_OP_ALL_GATHER_INTO_TENSOR)
    t.n = t.n / 4 + 1;
  plan pl = {.seed = seed ^ ((uint64_t)i * 0x9e3779b97f4a7c15ull)};
  return run_case(ctx, e, &pl, &t);
}

static int rank_lazy_mix(const dist_test_ctx *ctx) {
  const mix_plan *mp = ctx->arg;
  shm_t e = {0};
  if (shm_t_open(ctx, &e, false))
    return 1;
  uint64_t r = mp->seed, skew = mp->seed ^ (0xabcdefull * (uint64_t)(ctx->rank + 1));
  int bad = 0;
  for (int i = 0; i < mp->calls && !bad; i++) {
    uint64_t x = mix(&r), y = mix(&skew);
    if (y % 64 == 0) /* this rank falls behind (or the root runs ahead) */
      usleep((useconds_t)(y >> 8) % 300);
    else if (y % 16 == 0)
      sched_yield();
    bad = mix_one(ctx, &e, mp->seed, i, x);
  }
  shm_t_close(&e);
  return bad;
}

static void lazy_mix(int world, int calls) {
  mix_plan mp = {dist_test_seed(), calls};
  int rc = dist_test_ranks(world, rank_lazy_mix, &mp, 200);
  cr_assert_eq(rc, 0, "%d ranks (DIST_TEST_SEED=%llu):\n%s", world, (unsigned long long)mp.seed,
               dist_test_report());
}

Test(core_shm, back_to_back_small_broadcasts_with_rotating_roots_keep_every_value,
     .timeout = 240) {
  setenv("DIST_SHM_SPIN_US", "5", 1);
  setenv("DIST_SHM_YIELD_US", "50", 1);
  for (int world = 2; world <= 4; world++)
    lazy_mix(world, 3000);
  small_geometry(); /* 16 KiB slots, no single-copy below 16 KiB anyway */
  setenv("DIST_SHM_CMA_MIN_KB", "0", 1);
  lazy_mix(3, 2000);
  unsetenv("DIST_SHM_CMA_MIN_KB");
}

/* Non-powers of two and a group far larger than the cores. */
Test(core_shm, a_large_group_of_17_ranks, .timeout = 300) {
  setenv("DIST_SHM_SPIN_US", "2", 1);
  setenv("DIST_SHM_YIELD_US", "20", 1);
  unsetenv("DIST_SHM_SLOT_KB");
  plan *pl = new_plan();
  const dist_op_kind k17[] = {DIST_OP_BARRIER, DIST_OP_ALL_REDUCE, DIST_OP_ALL_TO_ALL_SINGLE,
                              DIST_OP_REDUCE_SCATTER_TENSOR, DIST_OP_ALL_GATHER, DIST_OP_BROADCAST,
                              DIST_OP_ALL_REDUCE};
  for (size_t k = 0; k < sizeof k17 / sizeof k17[0]; k++)
    add(pl, k17[k], DIST_FLOAT32, k == 6 ? 70000 : 3, 16, k);
  run_plan(pl, 17, 280);
  free(pl);
}

Test(core_shm, a_group_of_64_ranks, .timeout = 300) {
  setenv("DIST_SHM_SPIN_US", "2", 1);
  setenv("DIST_SHM_YIELD_US", "20", 1);
  unsetenv("DIST_SHM_SLOT_KB");
  plan *pl = new_plan();
  const dist_op_kind k64[] = {DIST_OP_BARRIER, DIST_OP_ALL_REDUCE, DIST_OP_ALL_TO_ALL_SINGLE,
                              DIST_OP_REDUCE_SCATTER_TENSOR, DIST_OP_ALL_GATHER_INTO_TENSOR,
                              DIST_OP_SCATTER, DIST_OP_ALL_REDUCE};
  for (size_t k = 0; k < sizeof k64 / sizeof k64[0]; k++)
    add(pl, k64[k], DIST_BFLOAT16, k == 6 ? 12000 : 5, 63, k); /* 24 KB: two-phase path */
  run_plan(pl, 64, 280);
  free(pl);
}

/* Even all_to_all_single of a few bytes a peer runs in one step without
 * the count matrix (shm_a2a.c): every dtype at piece sizes up to the
 * polled line, alternating with matrix-checked calls (uneven, larger)
 * that reuse the same parities. */
Test(core_shm, tiny_even_all_to_all_single_alternates_with_the_matrix_path, .timeout = 240) {
  setenv("DIST_SHM_SPIN_US", "5", 1);
  setenv("DIST_SHM_YIELD_US", "50", 1);
  for (int world = 2; world <= 5; world++) {
    plan *pl = new_plan();
    uint64_t r = pl->seed;
    for (int i = 0; i < 60; i++) {
      dist_dtype dt = (dist_dtype)(i % DIST_DTYPE_COUNT_);
      add(pl, DIST_OP_ALL_TO_ALL_SINGLE, dt, i % 3, 0, 2 * (uint64_t)i); /* even */
      if (i % 4 == 3)
        add(pl, DIST_OP_ALL_TO_ALL_SINGLE, dt, 1 + (int64_t)(mix(&r) % 50), 0, mix(&r));
    }
    run_plan(pl, world, 200);
    free(pl);
  }
}

/* Driven below the API's checks: ranks whose even all_to_all_single
 * descriptors differ only in the output count all fail the call with
 * DIST_E_DESYNC naming it, and the next call runs. */
static int rank_tiny_out_mismatch(const dist_test_ctx *ctx) {
  shm_t e = {0};
  if (shm_t_open(ctx, &e, false))
    return 1;
  int N = ctx->world, me = ctx->rank, bad = 0;
  int32_t in[8], out[8];
  for (int j = 0; j < N; j++)
    in[j] = 100 * me + j;
  int64_t nout = me == 1 ? N + N : N; /* rank 1 expects twice as much */
  dist_tensor ti = shm_t_tensor(in, DIST_INT32, N), to = shm_t_tensor(out, DIST_INT32, nout);
  dist_coll c = {.kind = DIST_OP_ALL_TO_ALL_SINGLE, .inputs = &ti, .n_inputs = 1,
                 .outputs = &to, .n_outputs = 1};
  int rc = shm_t_run(&e, &c);
  CHECK(ctx, rc == DIST_E_DESYNC, "expected DIST_E_DESYNC, got %s: %s", dist_status_name(rc),
        e.err.msg);
  CHECK(ctx, strstr(e.err.msg, "ranks disagree on the split size") != NULL, "message: %s", e.err.msg);
  to = shm_t_tensor(out, DIST_INT32, N);
  rc = shm_t_run(&e, &c);
  CHECK(ctx, rc == DIST_OK, "second call: %s: %s", dist_status_name(rc), e.err.msg);
  for (int j = 0; j < N && !bad; j++)
    CHECK(ctx, out[j] == 100 * j + me, "out[%d] = %d", j, (int)out[j]);
  shm_t_close(&e);
  return bad;
}

Test(core_shm, tiny_even_all_to_all_output_counts_that_differ_fail_every_rank, .timeout = 60) {
  for (int world = 2; world <= 4; world++)
    cr_assert_eq(dist_test_ranks(world, rank_tiny_out_mismatch, NULL, 30), 0, "%d ranks:\n%s",
                 world, dist_test_report());
}

/* all_to_all_single where rank 0 spells out the even split ({k, k, ...})
 * and the others pass NULL (the same split, legal in torch): every rank
 * gets the right rows. The engine used to publish a different descriptor
 * for explicit splits (the matrix form) than for none (the even form) and
 * failed the call with "ranks disagree on the split size". Rows of 1 (a
 * few bytes a peer: the one-step path), 300 (staged) and 40000 elements
 * (large pieces: single copy where the kernel allows it). */
static int rank_even_splits_spelled_out(const dist_test_ctx *ctx) {
  shm_t e = {0};
  if (shm_t_open(ctx, &e, false))
    return 1;
  int N = ctx->world, me = ctx->rank, bad = 0;
  const int64_t row_elems[] = {1, 300, 40000};
  int64_t splits[DIST_TEST_MAX_RANKS];
  for (int j = 0; j < N; j++)
    splits[j] = 2;
  for (size_t i = 0; i < sizeof row_elems / sizeof row_elems[0] && !bad; i++) {
    int64_t re = row_elems[i], n = 2 * N * re;
    int32_t *in = malloc((size_t)n * sizeof *in), *out = calloc((size_t)n, sizeof *out);
    for (int64_t k = 0; k < n; k++)
      in[k] = me * 1000000 + (int32_t)k;
    dist_tensor ti = {.data = in, .dtype = DIST_INT32, .ndim = 2, .shape = {2 * N, re}};
    dist_tensor to = {.data = out, .dtype = DIST_INT32, .ndim = 2, .shape = {2 * N, re}};
    dist_coll c = {.kind = DIST_OP_ALL_TO_ALL_SINGLE, .inputs = &ti, .n_inputs = 1,
                   .outputs = &to, .n_outputs = 1};
    if (me == 0) {
      c.in_splits = c.out_splits = splits;
      c.n_splits = (size_t)N;
    }
    int rc = shm_t_run(&e, &c);
    CHECK(ctx, rc == DIST_OK, "rows of %lld: %s: %s", (long long)re, dist_status_name(rc),
          e.err.msg);
    /* Block j of the output is rank j's block me: its rows 2 me, 2 me + 1. */
    for (int64_t k = 0; k < n && !bad; k++) {
      int64_t j = k / (2 * re), at = k % (2 * re);
      CHECK(ctx, out[k] == (int32_t)(j * 1000000 + 2 * me * re + at),
            "rows of %lld: out[%lld] = %d", (long long)re, (long long)k, (int)out[k]);
    }
    free(in);
    free(out);
  }
  shm_t_close(&e);
  return bad;
}

Test(core_shm, even_split_sizes_spelled_out_on_one_rank_match_none_on_the_others,
     .timeout = 60) {
  setenv("DIST_SHM_SPIN_US", "5", 1);
  setenv("DIST_SHM_YIELD_US", "50", 1);
  for (int world = 2; world <= 4; world++)
    cr_assert_eq(dist_test_ranks(world, rank_even_splits_spelled_out, NULL, 30), 0,
                 "%d ranks:\n%s", world, dist_test_report());
}
