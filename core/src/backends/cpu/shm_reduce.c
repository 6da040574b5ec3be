/* shm_reduce.c - the reducing collectives of the shared-memory engine:
 * all_reduce, reduce, reduce_scatter (both forms).
 *
 * Every element is reduced by one dist__reduce_multi call over all N
 * ranks' values in ascending rank order, so each rank's result is bitwise
 * the same and equal to the TCP engine's.
 *
 * all_reduce / reduce, small (up to the segment's small_allreduce bytes):
 * one step. Every rank copies its vector into its slot, posts, waits for
 * all, and reduces the whole vector from all N slots itself (only the root
 * does for reduce). One flag round trip; no second barrier.
 *
 * all_reduce / reduce, large: reduce-scatter then all-gather, pipelined
 * over chunks of slot bytes, one barrier per chunk plus one:
 *   step i, write: copy chunk i into this rank's slot, except this rank's
 *     own block of it (nobody else reads that part from here);
 *   step i, read:  reduce block r of chunk i from the N slots (this rank's
 *     own values straight from the user buffer) into red[p], copying each
 *     16 KiB of it out while it is in L1; copy the other ranks' reduced
 *     blocks of chunk i - 1 (their red[p ^ 1]) out.
 * Per rank, for 2 ranks, reads and writes outside L1 add up to 4x the
 * vector's bytes (the copy-in/copy-out bound of shared/peers' limits
 * moves 6x, the zero-copy bound 2.5x), most of it in cache: a chunk is a
 * slot (512 KiB for 2 ranks), and both parities of it stay in L2.
 *
 * reduce_scatter: each step stages this rank's next piece of every other
 * rank's block in sub-slots of its slot; each rank then reduces its own
 * block from the N - 1 sub-slots addressed to it plus its own input. */
#include <stdio.h>

#include "reduce/reduce.h"
#include "shm_int.h"

static shm_key red_key(const dist_coll *c, dist_dtype dt, int64_t count, bool rooted) {
  shm_key k = {0};
  k.kind = (uint8_t)c->kind;
  k.dtype = (uint8_t)dt;
  k.redop = (uint8_t)c->redop.kind;
  k.root = rooted ? c->root : 0;
  k.count = count;
  if (c->redop.kind == DIST_REDOP_PREMUL_SUM)
    shm_copy(&k.scalar_bits, &c->redop.scalar, sizeof k.scalar_bits);
  return k;
}

/* A kernel failure (deterministic: every rank fails alike). When mid is
 * set the ranks may be out of step, so the group is broken. */
static int kernel_failed(dist__shm *s, dist__cpu_op *op, int rc, bool mid) {
  char label[96];
  dist__cpu_op_label(op->c, label, sizeof label);
  if (mid)
    return dist__shm_fail(s, op, rc, "%s: reduction failed: %s", label, dist_last_errmsg());
  return dist__err_set(op->err, rc, "%s: reduction failed: %s", label, dist_last_errmsg());
}

/* One step: every rank stages its whole vector; out (when non-NULL)
 * receives the reduction of all N. */
static int reduce_small(dist__shm *s, dist__cpu_op *op, const shm_key *k, const void *in,
                        void *out, size_t n, size_t es) {
  uint64_t g = s->op_base;
  size_t nb = n * es;
  uint8_t mine[SHM_INLINE]; /* own contribution, kept off the polled line */
  shm_copy(shm_buf(s, s->rank, g, nb), in, nb);
  if (nb <= SHM_INLINE)
    shm_copy(mine, in, nb);
  shm_publish(s, op, g, k);
  int rc = shm_step(s, op, g, true);
  s->step = g + 1;
  if (rc != DIST_OK || !out)
    return rc;
  for (int j = 0; j < s->size; j++)
    s->srcs[j] = j == s->rank && nb <= SHM_INLINE ? mine : shm_buf(s, j, g, nb);
  rc = dist__reduce_multi((dist_dtype)k->dtype, op->c->redop, out, s->srcs, s->size, n, s->size);
  return rc == DIST_OK ? DIST_OK : kernel_failed(s, op, rc, false);
}

/* Chunk i of a large reduction: elements [base, base + len) and this
 * geometry's block bounds. */
typedef struct chunk {
  size_t base, len, bl; /* bl: block length, 64-byte aligned */
} chunk;

/* Elements per chunk of a large reduction of n elements. */
static size_t chunk_elems(const dist__shm *s, size_t n, size_t es) {
  return shm_chunk(s, n * es, s->slot) / es;
}

static chunk chunk_at(const dist__shm *s, size_t n, size_t es, size_t i) {
  size_t per = chunk_elems(s, n, es), al = 64 / es;
  chunk c = {i * per, shm_min(per, n - i * per), 0};
  c.bl = shm_ceil_div(shm_ceil_div(c.len, (size_t)s->size), al) * al;
  return c;
}

static size_t blk_lo(const chunk *c, int j) { return shm_min((size_t)j * c->bl, c->len); }
static size_t blk_hi(const chunk *c, int j) { return shm_min(((size_t)j + 1) * c->bl, c->len); }

/* Write phase: chunk i into this rank's slot, minus its own block. */
static void stage_chunk(dist__shm *s, const uint8_t *buf, const chunk *c, size_t es, int p) {
  uint8_t *dst = s->peer[s->rank].data[p];
  size_t lo = blk_lo(c, s->rank), hi = blk_hi(c, s->rank);
  shm_copy(dst, buf + c->base * es, lo * es);
  shm_copy(dst + hi * es, buf + (c->base + hi) * es, (c->len - hi) * es);
}

/* Bytes of the own reduced block written to red and copied out at once,
 * while they are still in L1: the copy-out costs no second pass over
 * memory (16 MiB, 2 ranks: 1,210 -> 1,015 us, paired rounds). */
#define FUSE_BYTES (16 * 1024)

/* Read phase, first half: this rank's block of chunk i into red[p] (for
 * the others) and, when out is set, into its own buffer, a piece at a
 * time. An empty block still calls the kernel once, as every rank does. */
static int reduce_block(dist__shm *s, const dist__cpu_op *op, uint8_t *buf, const chunk *c,
                        size_t es, int p, dist_dtype dt, bool out) {
  size_t lo = blk_lo(c, s->rank), hi = blk_hi(c, s->rank);
  size_t step = out ? FUSE_BYTES / es : hi - lo, a = lo;
  uint8_t *red = s->peer[s->rank].red[p];
  do {
    size_t len = shm_min(step, hi - a);
    for (int j = 0; j < s->size; j++)
      s->srcs[j] = j == s->rank ? buf + (c->base + a) * es : s->peer[j].data[p] + a * es;
    int rc = dist__reduce_multi(dt, op->c->redop, red + (a - lo) * es, s->srcs, s->size, len,
                                s->size);
    if (rc != DIST_OK)
      return rc;
    if (out)
      shm_copy_out(s, buf + (c->base + a) * es, red + (a - lo) * es, len * es);
    a += len;
  } while (a < hi);
  return DIST_OK;
}

/* Read phase, second half: the other ranks' reduced blocks of a chunk out. */
static void gather_blocks(dist__shm *s, uint8_t *buf, const chunk *c, size_t es, int p) {
  for (int j = 0; j < s->size; j++) {
    if (j == s->rank)
      continue;
    size_t lo = blk_lo(c, j), hi = blk_hi(c, j);
    shm_copy_out(s, buf + (c->base + lo) * es, s->peer[j].red[p], (hi - lo) * es);
  }
}

static int reduce_large(dist__shm *s, dist__cpu_op *op, const shm_key *k, uint8_t *buf, size_t n,
                        size_t es, bool out) {
  uint64_t g0 = s->op_base;
  size_t nchunks = shm_ceil_div(n, chunk_elems(s, n, es));
  shm_stream_begin(s, out ? n * es : 0);
  for (size_t i = 0; i <= nchunks; i++) {
    uint64_t g = g0 + i;
    int p = (int)(g & 1);
    chunk cur = i < nchunks ? chunk_at(s, n, es, i) : (chunk){0, 0, 0};
    if (i < nchunks)
      stage_chunk(s, buf, &cur, es, p);
    if (i == 0)
      shm_publish(s, op, g, k);
    int rc = shm_step(s, op, g, i == 0);
    if (rc != DIST_OK) {
      if (i == 0)
        s->step = g0 + 1; /* a mismatch: every rank stops here, in step */
      return rc;
    }
    if (i < nchunks && (rc = reduce_block(s, op, buf, &cur, es, p, (dist_dtype)k->dtype, out)))
      return kernel_failed(s, op, rc, true);
    if (i > 0 && out) {
      chunk prev = chunk_at(s, n, es, i - 1);
      gather_blocks(s, buf, &prev, es, p ^ 1);
    }
  }
  s->step = g0 + nchunks + 1;
  return DIST_OK;
}

int dist__shm_all_reduce(dist__shm *s, dist__cpu_op *op) {
  const dist_tensor *t = &op->c->inputs[0];
  size_t es = dist_dtype_size(t->dtype), n = (size_t)dist_tensor_numel(t);
  shm_key k = red_key(op->c, t->dtype, (int64_t)n, false);
  shm_begin(s);
  if (n * es <= s->small_ar)
    return reduce_small(s, op, &k, t->data, t->data, n, es);
  return reduce_large(s, op, &k, t->data, n, es, true);
}

int dist__shm_reduce(dist__shm *s, dist__cpu_op *op) {
  const dist_tensor *t = &op->c->inputs[0];
  size_t es = dist_dtype_size(t->dtype), n = (size_t)dist_tensor_numel(t);
  shm_key k = red_key(op->c, t->dtype, (int64_t)n, true);
  bool root = op->c->root == s->rank;
  shm_begin(s);
  if (n * es <= s->small_ar)
    return reduce_small(s, op, &k, t->data, root ? t->data : NULL, n, es);
  return reduce_large(s, op, &k, t->data, n, es, root);
}

/* --- reduce_scatter -------------------------------------------------------- */

typedef struct rs_args {
  const uint8_t *in;    /* tensor form: the input (list form: NULL) */
  const dist_tensor *list;
  uint8_t *out;
  size_t m, es, q;      /* elements per block, element size, elements per sub-slot */
  bool inl;             /* the whole exchange fits in the polled lines */
} rs_args;

/* Sub-slot of rank k addressed to rank j at step g. */
static uint8_t *rs_slot(const dist__shm *s, const rs_args *a, int k, int j, uint64_t g) {
  uint8_t *base = a->inl ? s->peer[k].hdr[SHM_L(g)]->inl : s->peer[k].data[g & 1];
  return base + (size_t)shm_sub(k, j, s->size) * a->q * a->es;
}

static const uint8_t *rs_in(const rs_args *a, int j) {
  return a->list ? (const uint8_t *)a->list[j].data : a->in + (size_t)j * a->m * a->es;
}

static bool overlaps(const void *a, const void *b, size_t len) {
  uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;
  return len && x < y + len && y < x + len;
}

/* Read phase of step i: this rank's block, elements [off, off + len). */
static int rs_reduce(dist__shm *s, dist__cpu_op *op, const rs_args *a, size_t off, size_t len,
                     uint64_t g) {
  size_t es = a->es;
  int p = (int)(g & 1);
  for (int k = 0; k < s->size; k++)
    s->srcs[k] = k == s->rank ? rs_in(a, k) + off * es : rs_slot(s, a, k, s->rank, g);
  uint8_t *dst = a->out + off * es;
  const void *own = s->srcs[s->rank];
  /* The output may alias this rank's own input block (torch allows it);
   * the kernel accepts that only as source 0, so stage it otherwise. */
  if (overlaps(dst, own, len * es) && !(s->rank == 0 && (const void *)dst == own)) {
    shm_copy(s->peer[s->rank].red[p], own, len * es);
    s->srcs[s->rank] = s->peer[s->rank].red[p];
  }
  return dist__reduce_multi((dist_dtype)op->c->outputs[0].dtype, op->c->redop, dst, s->srcs,
                            s->size, len, s->size);
}

int dist__shm_reduce_scatter(dist__shm *s, dist__cpu_op *op) {
  const dist_coll *c = op->c;
  const dist_tensor *o = &c->outputs[0];
  rs_args a = {NULL, NULL, o->data, (size_t)dist_tensor_numel(o), dist_dtype_size(o->dtype), 0,
               false};
  if (c->kind == DIST_OP_REDUCE_SCATTER)
    a.list = c->inputs;
  else
    a.in = c->inputs[0].data;
  size_t al = 64 / a.es, others = (size_t)(s->size > 1 ? s->size - 1 : 1);
  a.inl = others * a.m * a.es <= SHM_INLINE;
  a.q = a.inl ? a.m : shm_chunk(s, a.m * a.es, s->slot / others) / a.es / al * al;
  shm_key k = red_key(c, o->dtype, (int64_t)a.m, false);
  uint64_t g0 = shm_begin(s);
  size_t steps = a.m && !a.inl ? shm_ceil_div(a.m, a.q) : 1;
  for (size_t i = 0; i < steps; i++) {
    uint64_t g = g0 + i;
    size_t off = i * a.q, len = a.m ? shm_min(a.q, a.m - off) : 0;
    for (int j = 0; j < s->size; j++)
      if (j != s->rank)
        shm_copy(rs_slot(s, &a, s->rank, j, g), rs_in(&a, j) + off * a.es, len * a.es);
    if (i == 0)
      shm_publish(s, op, g, &k);
    int rc = shm_step(s, op, g, i == 0);
    if (rc != DIST_OK) {
      if (i == 0)
        s->step = g0 + 1;
      return rc;
    }
    if ((rc = rs_reduce(s, op, &a, off, len, g)) != DIST_OK) {
      s->step = g0 + 1; /* in step when this was the only step */
      return kernel_failed(s, op, rc, steps > 1);
    }
  }
  s->step = g0 + steps;
  return DIST_OK;
}
