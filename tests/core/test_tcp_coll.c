/* ctest: labels=multiproc,san_address timeout=600 */
/* Every collective of the TCP engine with 1 to 5 real forked ranks over
 * 127.0.0.1, against values computed on one rank in ascending rank order
 * (tests/support/ref.h), compared bit for bit, and against the
 * shared-memory engine on the same group. Sizes cover the small
 * (direct, eager) and large (reduce-scatter + all-gather, rendezvous)
 * paths and blocks that do not divide evenly. The seed is printed; set
 * DIST_TEST_SEED to replay. */
#include <criterion/criterion.h>

#include <stdlib.h>

#include "backends/cpu/shm.h"
#include "ref.h"
#include "test_tcp_util.h"

static const int64_t counts[] = {1, 7, 100003};
#define NCOUNTS 3

static void run_sizes(dist_test_rank_fn fn) {
  static uint64_t seed;
  seed = dist_test_seed();
  for (int n = 1; n <= 5; n++) {
    int rc = dist_test_ranks(n, fn, &seed, 120);
    cr_assert_eq(rc, 0, "%d ranks (seed %llu): %s", n, (unsigned long long)seed,
                 dist_test_report());
  }
}

static int same(const dist_test_ctx *ctx, const char *what, dist_dtype dt, const void *got,
                const void *want, size_t n) {
  char msg[512];
  if (dist_test_compare(dt, got, want, n, 0, msg, sizeof msg) != 0)
    return FAIL(ctx, "%s %s: %s", what, dist_dtype_name(dt), msg);
  return 0;
}

static uint64_t seed_of(const dist_test_ctx *ctx) { return *(const uint64_t *)ctx->arg; }

static void *xmalloc(size_t n) {
  void *p = malloc(n ? n : 1);
  if (!p)
    abort();
  return p;
}

/* --- all_reduce ------------------------------------------------------------------ */

static dist_coll all_reduce_desc(dist_tensor *t, dist_redop op, uint64_t seq) {
  dist_coll c = tt_coll(DIST_OP_ALL_REDUCE, seq);
  c.inputs = c.outputs = t;
  c.n_inputs = c.n_outputs = 1;
  c.redop = op;
  return c;
}

static const dist_redop all_ops[] = {
    {DIST_REDOP_SUM, 0},  {DIST_REDOP_PRODUCT, 0}, {DIST_REDOP_MIN, 0},
    {DIST_REDOP_MAX, 0},  {DIST_REDOP_BAND, 0},    {DIST_REDOP_BOR, 0},
    {DIST_REDOP_BXOR, 0}, {DIST_REDOP_AVG, 0},     {DIST_REDOP_PREMUL_SUM, 0.375}};
#define NOPS 9

static int all_reduce_rank(const dist_test_ctx *ctx) {
  tt_rank r;
  TT_OK(ctx, &r, tt_init(ctx, &r, 30000));
  uint64_t seed = seed_of(ctx);
  int n = ctx->world, k = 0;
  for (int dt = 0; dt < DIST_DTYPE_COUNT_; dt++)
    for (int o = 0; o < NOPS; o++) {
      dist_redop op = all_ops[o];
      if (dist_redop_check(op, (dist_dtype)dt) != DIST_OK)
        continue;
      int64_t count = counts[(dt + o + (int)(seed % 3)) % NCOUNTS];
      size_t es = dist_dtype_size((dist_dtype)dt), bytes = (size_t)count * es;
      void *buf = xmalloc(bytes), *want = xmalloc(bytes);
      uint64_t s = seed + (uint64_t)k++;
      dist_test_fill(buf, (dist_dtype)dt, (size_t)count, s, ctx->rank, 0, 0);
      dist_test_expected((dist_dtype)dt, op, want, (size_t)count, s, n, 0, 0, n);
      dist_tensor t = dist_tensor_1d(buf, (dist_dtype)dt, count);
      dist_coll c = tt_coll(DIST_OP_ALL_REDUCE, (uint64_t)k);
      c.inputs = c.outputs = &t;
      c.n_inputs = c.n_outputs = 1;
      c.redop = op;
      TT_OK(ctx, &r, tt_run(&r, &c));
      char what[96];
      snprintf(what, sizeof what, "all_reduce %s x%lld", dist_redop_name(op.kind),
               (long long)count);
      if (same(ctx, what, (dist_dtype)dt, buf, want, (size_t)count))
        return 1;
      free(buf);
      free(want);
    }
  return tt_fini(&r);
}

Test(core_tcp_coll, all_reduce_every_dtype_and_op_on_1_to_5_ranks, .timeout = 600) {
  run_sizes(all_reduce_rank);
}

/* --- reduce ---------------------------------------------------------------------------- */

static int reduce_rank(const dist_test_ctx *ctx) {
  tt_rank r;
  TT_OK(ctx, &r, tt_init(ctx, &r, 30000));
  uint64_t seed = seed_of(ctx);
  int n = ctx->world;
  const dist_dtype dts[] = {DIST_FLOAT32, DIST_BFLOAT16, DIST_INT64, DIST_FLOAT64};
  const dist_redop ops[] = {DIST_SUM, DIST_MAX, DIST_PRODUCT, DIST_AVG};
  for (int k = 0; k < 8; k++) {
    dist_dtype dt = dts[k % 4];
    dist_redop op = ops[k % 4];
    if (dist_redop_check(op, dt) != DIST_OK)
      op = DIST_SUM;
    int64_t count = counts[(k + seed) % NCOUNTS];
    int root = (k + (int)seed) % n;
    size_t bytes = (size_t)count * dist_dtype_size(dt);
    void *buf = xmalloc(bytes), *want = xmalloc(bytes);
    dist_test_fill(buf, dt, (size_t)count, seed + (uint64_t)k, ctx->rank, 0, 0);
    if (ctx->rank == root)
      dist_test_expected(dt, op, want, (size_t)count, seed + (uint64_t)k, n, 0, 0, n);
    else
      memcpy(want, buf, bytes); /* other ranks' buffers stay as they were */
    dist_tensor t = dist_tensor_1d(buf, dt, count);
    dist_coll c = tt_coll(DIST_OP_REDUCE, (uint64_t)k + 1);
    c.inputs = c.outputs = &t;
    c.n_inputs = c.n_outputs = 1;
    c.redop = op;
    c.root = root;
    TT_OK(ctx, &r, tt_run(&r, &c));
    if (same(ctx, "reduce", dt, buf, want, (size_t)count))
      return 1;
    free(buf);
    free(want);
  }
  return tt_fini(&r);
}

Test(core_tcp_coll, reduce_to_every_root_on_1_to_5_ranks, .timeout = 600) {
  run_sizes(reduce_rank);
}

/* --- reduce_scatter ------------------------------------------------------------------ */

static int reduce_scatter_rank(const dist_test_ctx *ctx) {
  tt_rank r;
  TT_OK(ctx, &r, tt_init(ctx, &r, 30000));
  uint64_t seed = seed_of(ctx);
  int n = ctx->world;
  const dist_dtype dts[] = {DIST_FLOAT32, DIST_FLOAT16, DIST_INT32, DIST_COMPLEX64};
  for (int k = 0; k < 8; k++) {
    dist_dtype dt = dts[k % 4];
    dist_redop op = k % 2 ? DIST_SUM : dist_premul_sum(1.5);
    if (dist_redop_check(op, dt) != DIST_OK)
      op = DIST_SUM;
    int64_t m = counts[(k + seed) % NCOUNTS] / (k % 3 == 2 ? 7 : 1) + 1;
    size_t es = dist_dtype_size(dt), bytes = (size_t)m * es;
    uint8_t *in = xmalloc(bytes * (size_t)n), *out = xmalloc(bytes), *want = xmalloc(bytes);
    uint64_t s = seed + (uint64_t)k;
    dist_test_fill(in, dt, (size_t)(m * n), s, ctx->rank, 0, 0);
    dist_test_expected(dt, op, want, (size_t)m, s, n, (size_t)(m * ctx->rank), 0, n);
    bool flat = k % 2 == 0;
    dist_tensor tin[TT_MAX], tout = dist_tensor_1d(out, dt, m);
    if (flat)
      tin[0] = dist_tensor_1d(in, dt, m * n);
    for (int p = 0; !flat && p < n; p++)
      tin[p] = dist_tensor_1d(in + (size_t)p * bytes, dt, m);
    dist_coll c = tt_coll(flat ? DIST_OP_REDUCE_SCATTER_TENSOR : DIST_OP_REDUCE_SCATTER,
                          (uint64_t)k + 1);
    c.inputs = tin;
    c.n_inputs = flat ? 1 : (size_t)n;
    c.outputs = &tout;
    c.n_outputs = 1;
    c.redop = op;
    TT_OK(ctx, &r, tt_run(&r, &c));
    if (same(ctx, flat ? "reduce_scatter_tensor" : "reduce_scatter", dt, out, want, (size_t)m))
      return 1;
    free(in);
    free(out);
    free(want);
  }
  return tt_fini(&r);
}

Test(core_tcp_coll, reduce_scatter_both_forms_on_1_to_5_ranks, .timeout = 600) {
  run_sizes(reduce_scatter_rank);
}

/* --- broadcast --------------------------------------------------------------------------- */

static int broadcast_rank(const dist_test_ctx *ctx) {
  tt_rank r;
  TT_OK(ctx, &r, tt_init(ctx, &r, 30000));
  uint64_t seed = seed_of(ctx);
  int n = ctx->world;
  for (int k = 0; k < 2 * n + 3; k++) {
    dist_dtype dt = (dist_dtype)(k % DIST_DTYPE_COUNT_);
    int64_t count = counts[(k + seed) % NCOUNTS];
    int root = k % n;
    size_t bytes = (size_t)count * dist_dtype_size(dt);
    void *buf = xmalloc(bytes), *want = xmalloc(bytes);
    dist_test_fill(want, dt, (size_t)count, seed + (uint64_t)k, root, 0, 0);
    if (ctx->rank == root)
      memcpy(buf, want, bytes);
    else
      memset(buf, 0xa5, bytes);
    dist_tensor t = dist_tensor_1d(buf, dt, count);
    dist_coll c = tt_coll(DIST_OP_BROADCAST, (uint64_t)k + 1);
    c.inputs = c.outputs = &t;
    c.n_inputs = c.n_outputs = 1;
    c.root = root;
    TT_OK(ctx, &r, tt_run(&r, &c));
    if (same(ctx, "broadcast", dt, buf, want, (size_t)count))
      return 1;
    free(buf);
    free(want);
  }
  return tt_fini(&r);
}

Test(core_tcp_coll, broadcast_from_every_root_on_1_to_5_ranks, .timeout = 600) {
  run_sizes(broadcast_rank);
}

/* With 4 KiB segments, 100003 elements of any dtype are 25 segments or
 * more: from 3 ranks on they go down the pipelined chain (the uneven last
 * segment, every root, every dtype). */
static int chain_broadcast_rank(const dist_test_ctx *ctx) {
  setenv("DIST_TCP_SEGMENT_BYTES", "4096", 1);
  return broadcast_rank(ctx);
}

Test(core_tcp_coll, broadcast_down_a_pipelined_chain_on_1_to_5_ranks, .timeout = 600) {
  run_sizes(chain_broadcast_rank);
}

/* --- all_gather, gather, scatter ------------------------------------------------------- */

static int gathers_rank(const dist_test_ctx *ctx) {
  tt_rank r;
  TT_OK(ctx, &r, tt_init(ctx, &r, 30000));
  uint64_t seed = seed_of(ctx);
  int n = ctx->world;
  for (int k = 0; k < 12; k++) {
    dist_dtype dt = (dist_dtype)((k * 5) % DIST_DTYPE_COUNT_);
    int64_t count = counts[(k + seed) % NCOUNTS] / (n > 3 ? 3 : 1) + 1;
    size_t bytes = (size_t)count * dist_dtype_size(dt);
    uint64_t s = seed + (uint64_t)k;
    int root = (k / 4) % n;
    dist_op_kind kinds[4] = {DIST_OP_ALL_GATHER, DIST_OP_ALL_GATHER_INTO_TENSOR,
                             DIST_OP_GATHER, DIST_OP_SCATTER};
    dist_op_kind kind = kinds[k % 4];
    uint8_t *one = xmalloc(bytes), *many = xmalloc(bytes * (size_t)n),
            *want = xmalloc(bytes * (size_t)n);
    dist_tensor t1 = dist_tensor_1d(one, dt, count), tn[TT_MAX];
    for (int p = 0; p < n; p++) {
      tn[p] = dist_tensor_1d(many + (size_t)p * bytes, dt, count);
      dist_test_fill(want + (size_t)p * bytes, dt, (size_t)count, s, p, 0, 0);
    }
    dist_tensor flat = dist_tensor_1d(many, dt, count * n);
    dist_coll c = tt_coll(kind, (uint64_t)k + 1);
    memset(many, 0x5a, bytes * (size_t)n);
    if (kind == DIST_OP_SCATTER) {
      c.root = root;
      if (ctx->rank == root)
        memcpy(many, want, bytes * (size_t)n);
      c.inputs = tn;
      c.n_inputs = ctx->rank == root ? (size_t)n : 0;
      c.outputs = &t1;
      c.n_outputs = 1;
    } else {
      dist_test_fill(one, dt, (size_t)count, s, ctx->rank, 0, 0);
      c.inputs = &t1;
      c.n_inputs = 1;
      c.outputs = kind == DIST_OP_ALL_GATHER_INTO_TENSOR ? &flat : tn;
      c.n_outputs = kind == DIST_OP_ALL_GATHER_INTO_TENSOR ? 1 : (size_t)n;
      if (kind == DIST_OP_GATHER) {
        c.root = root;
        c.n_outputs = ctx->rank == root ? (size_t)n : 0;
      }
    }
    TT_OK(ctx, &r, tt_run(&r, &c));
    int bad = 0;
    if (kind == DIST_OP_SCATTER)
      bad = same(ctx, "scatter", dt, one, want + (size_t)ctx->rank * bytes, (size_t)count);
    else if (kind != DIST_OP_GATHER || ctx->rank == root)
      bad = same(ctx, dist_op_name(kind), dt, many, want, (size_t)(count * n));
    if (bad)
      return 1;
    free(one);
    free(many);
    free(want);
  }
  return tt_fini(&r);
}

Test(core_tcp_coll, all_gather_gather_and_scatter_on_1_to_5_ranks, .timeout = 600) {
  run_sizes(gathers_rank);
}

/* --- all_to_all ------------------------------------------------------------------------- */

/* Rows rank a sends to rank b in round k (uneven, sometimes zero). */
static int64_t rows_ab(int a, int b, int k) { return (a * 7 + b * 3 + k) % 5; }

#define ROW 3
#define STRIDE 100000 /* element offset per destination in the fill */

static int all_to_all_rank(const dist_test_ctx *ctx) {
  tt_rank r;
  TT_OK(ctx, &r, tt_init(ctx, &r, 30000));
  uint64_t seed = seed_of(ctx);
  int n = ctx->world, me = ctx->rank;
  for (int k = 0; k < 6; k++) {
    dist_dtype dt = (dist_dtype)((k * 3 + 1) % DIST_DTYPE_COUNT_);
    size_t es = dist_dtype_size(dt);
    uint64_t s = seed + (uint64_t)k;
    bool single = k % 3 != 0, even = k % 3 == 1;
    int64_t big = k == 4 ? 20000 : 0; /* rendezvous-sized rows now and then */
    int64_t in_s[TT_MAX], out_s[TT_MAX], in_tot = 0, out_tot = 0;
    for (int p = 0; p < n; p++) {
      in_s[p] = even ? 2 + big : rows_ab(me, p, k) + big;
      out_s[p] = even ? 2 + big : rows_ab(p, me, k) + big;
      in_tot += in_s[p];
      out_tot += out_s[p];
    }
    uint8_t *in = xmalloc((size_t)(in_tot * ROW) * es), *out = xmalloc((size_t)(out_tot * ROW) * es),
            *want = xmalloc((size_t)(out_tot * ROW) * es);
    dist_tensor tin[TT_MAX], tout[TT_MAX];
    size_t io = 0, oo = 0;
    for (int p = 0; p < n; p++) {
      dist_test_fill(in + io, dt, (size_t)(in_s[p] * ROW), s, me, (size_t)p * STRIDE, 0);
      dist_test_fill(want + oo, dt, (size_t)(out_s[p] * ROW), s, p, (size_t)me * STRIDE, 0);
      tin[p] = dist_tensor_1d(in + io, dt, in_s[p] * ROW);
      tout[p] = dist_tensor_1d(out + oo, dt, out_s[p] * ROW);
      io += (size_t)(in_s[p] * ROW) * es;
      oo += (size_t)(out_s[p] * ROW) * es;
    }
    memset(out, 0x77, oo);
    dist_coll c = tt_coll(single ? DIST_OP_ALL_TO_ALL_SINGLE : DIST_OP_ALL_TO_ALL,
                          (uint64_t)k + 1);
    dist_tensor sin = {0}, sout = {0};
    if (single) {
      sin = dist_tensor_1d(in, dt, in_tot);
      sin.ndim = 2;
      sin.shape[1] = ROW;
      sout = dist_tensor_1d(out, dt, out_tot);
      sout.ndim = 2;
      sout.shape[1] = ROW;
      c.inputs = &sin;
      c.outputs = &sout;
      c.n_inputs = c.n_outputs = 1;
      if (!even) {
        c.in_splits = in_s;
        c.out_splits = out_s;
        c.n_splits = (size_t)n;
      }
    } else {
      c.inputs = tin;
      c.outputs = tout;
      c.n_inputs = c.n_outputs = (size_t)n;
    }
    TT_OK(ctx, &r, tt_run(&r, &c));
    if (same(ctx, dist_op_name(c.kind), dt, out, want, (size_t)(out_tot * ROW)))
      return 1;
    free(in);
    free(out);
    free(want);
  }
  return tt_fini(&r);
}

Test(core_tcp_coll, all_to_all_even_and_uneven_on_1_to_5_ranks, .timeout = 600) {
  run_sizes(all_to_all_rank);
}

/* --- barrier ------------------------------------------------------------------------------ */

/* The late rank posts "arrived" in the store just before it enters the
 * barrier, so a barrier that returned on another rank before the late one
 * arrived shows as a missing key, whatever the machine's speed. (Its sleep
 * only makes the others likely to wait; nothing depends on its length.) */
static int arrived_before(const dist_test_ctx *ctx, tt_rank *r, int k, int late) {
  char key[32];
  snprintf(key, sizeof key, "arrived/%d", k);
  if (ctx->rank == late)
    return dist_store_set(r->store, key, "1", 1) == DIST_OK ? 0 : FAIL(ctx, "store set");
  return 0;
}

static int check_arrived(const dist_test_ctx *ctx, tt_rank *r, int k, int late) {
  char key[32];
  snprintf(key, sizeof key, "arrived/%d", k);
  const char *keys[1] = {key};
  bool there = false;
  CHECK(ctx, dist_store_check(r->store, keys, 1, &there) == DIST_OK, "store check");
  CHECK(ctx, there, "barrier %d returned on rank %d before rank %d arrived", k, ctx->rank, late);
  return 0;
}

static int barrier_rank(const dist_test_ctx *ctx) {
  tt_rank r;
  TT_OK(ctx, &r, tt_init(ctx, &r, 30000));
  int n = ctx->world;
  for (int k = 0; k < 3; k++) {
    int late = k % n;
    if (ctx->rank == late)
      usleep(100 * 1000);
    if (arrived_before(ctx, &r, k, late))
      return 1;
    dist_coll c = tt_coll(DIST_OP_BARRIER, (uint64_t)k + 1);
    TT_OK(ctx, &r, tt_run(&r, &c));
    if (check_arrived(ctx, &r, k, late))
      return 1;
  }
  return tt_fini(&r);
}

Test(core_tcp_coll, barrier_waits_for_the_last_rank_on_1_to_5_ranks, .timeout = 300) {
  run_sizes(barrier_rank);
}

static int big_barrier_rank(const dist_test_ctx *ctx) {
  tt_rank r;
  TT_OK(ctx, &r, tt_init(ctx, &r, 30000));
  int late = ctx->world - 1;
  for (int k = 0; k < 3; k++) {
    if (ctx->rank == late)
      usleep(100 * 1000);
    if (arrived_before(ctx, &r, k, late))
      return 1;
    dist_coll c = tt_coll(DIST_OP_BARRIER, (uint64_t)k + 1);
    TT_OK(ctx, &r, tt_run(&r, &c));
    if (check_arrived(ctx, &r, k, late))
      return 1;
  }
  return tt_fini(&r);
}

Test(core_tcp_coll, dissemination_barrier_on_17_ranks, .timeout = 120) {
  int rc = dist_test_ranks(17, big_barrier_rank, NULL, 100);
  cr_assert_eq(rc, 0, "%s", dist_test_report());
}

/* --- the same bits as the shared-memory engine -------------------------------------- */


static int engines_rank(const dist_test_ctx *ctx) {
  tt_rank r;
  TT_OK(ctx, &r, tt_init(ctx, &r, 30000));
  r.g.same_host = true;
  dist__shm *shm = NULL;
  TT_OK(ctx, &r, dist__shm_create(&r.g, r.gstore, dist__now_ms() + 30000, &shm, &r.err));
  uint64_t seed = seed_of(ctx);
  const dist_dtype dts[] = {DIST_FLOAT32, DIST_FLOAT16, DIST_BFLOAT16, DIST_FLOAT64,
                            DIST_COMPLEX64};
  const dist_redop ops[] = {DIST_SUM, DIST_AVG, dist_premul_sum(0.3), DIST_PRODUCT, DIST_MAX};
  const int64_t sizes[] = {5, 3000, 300001};
  int k = 0;
  for (int d = 0; d < 5; d++)
    for (int o = 0; o < 5; o++)
      for (int z = 0; z < 3; z++, k++) {
        dist_dtype dt = dts[d];
        dist_redop op = ops[o];
        if (dist_redop_check(op, dt) != DIST_OK || (z == 2 && (d + o) % 2))
          continue;
        int64_t count = sizes[z];
        size_t bytes = (size_t)count * dist_dtype_size(dt);
        void *a = xmalloc(bytes), *b = xmalloc(bytes);
        dist_test_fill(a, dt, (size_t)count, seed + (uint64_t)k, ctx->rank, 0, 0);
        memcpy(b, a, bytes);
        dist_tensor ta = dist_tensor_1d(a, dt, count), tb = dist_tensor_1d(b, dt, count);
        dist_coll c = all_reduce_desc(&ta, op, (uint64_t)k + 1);
        TT_OK(ctx, &r, tt_run(&r, &c));
        c = all_reduce_desc(&tb, op, (uint64_t)k + 1);
        dist__cpu_op sop = {&c, dist__now_ms() + 30000, &r.err, -1};
        dist__err_clear(&r.err);
        TT_OK(ctx, &r, dist__shm_run(shm, &sop));
        char what[96];
        snprintf(what, sizeof what, "tcp vs shm all_reduce %s x%lld", dist_redop_name(op.kind),
                 (long long)count);
        if (same(ctx, what, dt, a, b, (size_t)count))
          return 1;
        free(a);
        free(b);
      }
  dist__shm_destroy(shm);
  return tt_fini(&r);
}

Test(core_tcp_coll, all_reduce_gives_the_shared_memory_engines_bits_on_2_to_4_ranks,
     .timeout = 300) {
  static uint64_t seed;
  seed = dist_test_seed();
  for (int n = 2; n <= 4; n++) {
    int rc = dist_test_ranks(n, engines_rank, &seed, 120);
    cr_assert_eq(rc, 0, "%d ranks (seed %llu): %s", n, (unsigned long long)seed,
                 dist_test_report());
  }
}
