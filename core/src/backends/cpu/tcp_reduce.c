/* tcp_reduce.c - the reducing collectives over TCP: all_reduce, reduce and
 * reduce_scatter.
 *
 * Every reduction combines the ranks' values in ascending group-rank order
 * through reduce.h, so all ranks, and the shared-memory engine, get bitwise
 * identical results. That rules out trees and recursive doubling (their
 * order depends on the rank) and leaves two schedules over the full mesh:
 *   direct  every rank sends its whole vector to every other rank and
 *           reduces all n vectors itself: one exchange, (n-1) x the data;
 *           for small vectors (DIST_TCP_DIRECT_BYTES of traffic per rank,
 *           default 256 KiB) and vectors shorter than the group;
 *   rs+ag   rank r receives block r from every rank and reduces those n
 *           blocks in rank order (direct reduce-scatter), then every rank
 *           sends its finished block to every other (all-gather): 2 (n-1)/n
 *           x the data each way, like a ring but in two steps instead of
 *           2 (n-1). all_reduce pipelines it over segments of n blocks of
 *           DIST_TCP_SEGMENT_BYTES (default 512 KiB, tcp_mesh.c), so
 *           reductions overlap the transfers.
 * reduce uses the same two schedules with the root as the only receiver
 * of the whole (or of the gathered blocks). Scratch memory is the
 * engine's, kept between calls, so large collectives do not pay for fresh
 * pages every time. */
#include <stdio.h>

#include "reduce/reduce.h"
#include "tcp_int.h"

#define SRCS_ON_STACK 64

/* The engine's scratch buffer of at least bytes (one collective at a
 * time uses it). */
static uint8_t *scratch(tcp_cc *cc, size_t bytes) {
  dist__tcp *t = cc->t;
  if (t->scratch_len < bytes || !t->scratch) {
    dist__free(t->scratch);
    t->scratch_len = 0;
    t->scratch = dist__malloc(bytes ? bytes : 1);
    if (!t->scratch) {
      dist__err_set(cc->op->err, DIST_E_NOMEM, "%s: out of memory for %zu bytes of scratch",
                    dist_op_name(cc->c->kind), bytes);
      return NULL;
    }
    t->scratch_len = bytes;
  }
  return t->scratch;
}

static bool overlaps(const void *a, const void *b, size_t n) {
  const uint8_t *x = a, *y = b;
  return n > 0 && x < y + n && y < x + n;
}

/* dst = srcs[0] op ... op srcs[nsrc-1] (count elements). reduce.h lets dst
 * be srcs[0] but no other source; when it is another one, the result goes
 * through srcs[0] (src0_scratch: it is ours to overwrite) or a temporary. */
static int reduce_into(tcp_cc *cc, void *dst, const void *const *srcs, int nsrc,
                       size_t count, bool src0_scratch) {
  size_t bytes = count * cc->esize;
  bool clash = false;
  for (int j = 1; j < nsrc; j++)
    clash |= overlaps(dst, srcs[j], bytes);
  void *out = dst, *tmp = NULL;
  if (clash) {
    out = src0_scratch ? (void *)srcs[0] : (tmp = dist__tcp_cc_alloc(cc, bytes));
    if (!out)
      return DIST_E_NOMEM;
  }
  const dist_coll *c = cc->c;
  int rc = dist__reduce_multi((dist_dtype)cc->base.dtype, c->redop, out, srcs, nsrc, count,
                              cc->t->g->size);
  if (rc != DIST_OK) {
    char lb[64];
    dist__err_set(cc->op->err, rc, "%s: %s", dist__cpu_op_label(c, lb, sizeof lb),
                  dist_last_errmsg());
  } else if (out != dst) {
    memcpy(dst, out, bytes);
  }
  dist__free(tmp);
  return rc;
}

/* A sources array of n entries (heap when large; free with srcs_free). */
static const void **srcs_get(tcp_cc *cc, const void **stack, int n) {
  if (n <= SRCS_ON_STACK)
    return stack;
  const void **s = dist__calloc((size_t)n, sizeof *s);
  if (!s)
    dist__err_set(cc->op->err, DIST_E_NOMEM, "out of memory");
  return s;
}

static void srcs_free(const void **s, const void **stack) {
  if (s != stack)
    dist__free((void *)s);
}

/* Slot of peer p (p != r) in a scratch area of (n-1) slots. */
static uint8_t *slot(uint8_t *base, int p, int r, size_t bytes) {
  return base + (size_t)(p < r ? p : p - 1) * bytes;
}

/* Every rank (to_root < 0) or the root receives every other rank's count
 * elements of buf into scratch slots and reduces them in rank order into
 * buf. */
static int direct(tcp_cc *cc, uint8_t *buf, int64_t count, int to_root) {
  int n = cc->t->g->size, r = cc->t->g->rank;
  size_t bytes = (size_t)count * cc->esize;
  bool all = to_root < 0, recv_here = all || r == to_root;
  int64_t back = all ? count : -1;
  uint8_t *tmp = recv_here ? scratch(cc, (size_t)(n - 1) * bytes) : NULL;
  if (recv_here && !tmp)
    return DIST_E_NOMEM;
  for (int p = 0; p < n && recv_here; p++)
    if (p != r)
      DIST_TRY(dist__tcp_cc_recv(cc, p, slot(tmp, p, r, bytes), count, back));
  for (int p = 0; p < n; p++)
    if (p != r && (all || p == to_root))
      DIST_TRY(dist__tcp_cc_send(cc, p, buf, count, back, !all));
  DIST_TRY(dist__tcp_cc_wait(cc));
  if (!recv_here)
    return DIST_OK;
  const void *stack[SRCS_ON_STACK];
  const void **srcs = srcs_get(cc, stack, n);
  if (!srcs)
    return DIST_E_NOMEM;
  for (int p = 0; p < n; p++)
    srcs[p] = p == r ? buf : slot(tmp, p, r, bytes);
  int rc = reduce_into(cc, buf, srcs, n, (size_t)count, r != 0);
  srcs_free(srcs, stack);
  return rc;
}

/* Direct reduce-scatter of buf's n blocks: block r, reduced in rank order,
 * lands in out (may be block r of buf itself). */
static int scatter_reduce(tcp_cc *cc, const uint8_t *buf, int64_t count, uint8_t *out,
                          uint8_t *tmp) {
  int n = cc->t->g->size, r = cc->t->g->rank;
  size_t es = cc->esize;
  int64_t roff, rlen;
  dist__tcp_block(count, n, r, &roff, &rlen);
  size_t sbytes = (size_t)rlen * es;
  for (int p = 0; p < n; p++) {
    int64_t off, len;
    dist__tcp_block(count, n, p, &off, &len);
    if (p != r)
      DIST_TRY(dist__tcp_cc_recv(cc, p, slot(tmp, p, r, sbytes), rlen, len));
  }
  for (int p = 0; p < n; p++) {
    int64_t off, len;
    dist__tcp_block(count, n, p, &off, &len);
    if (p != r)
      DIST_TRY(dist__tcp_cc_send(cc, p, buf + (size_t)off * es, len, rlen, false));
  }
  DIST_TRY(dist__tcp_cc_wait(cc));
  const void *stack[SRCS_ON_STACK];
  const void **srcs = srcs_get(cc, stack, n);
  if (!srcs)
    return DIST_E_NOMEM;
  for (int p = 0; p < n; p++)
    srcs[p] = p == r ? buf + (size_t)roff * es : slot(tmp, p, r, sbytes);
  int rc = reduce_into(cc, out, srcs, n, (size_t)rlen, r != 0);
  srcs_free(srcs, stack);
  return rc;
}

static bool use_direct(tcp_cc *cc, int64_t count) {
  int n = cc->t->g->size;
  size_t traffic = (size_t)count * cc->esize * (size_t)(n - 1);
  return count < n || traffic <= cc->t->direct_bytes;
}

/* --- pipelined reduce-scatter + all-gather ----------------------------------------- */

/* The vector is cut into segments of n blocks of about seg_bytes each;
 * segment k's reduce-scatter (step 2k) and all-gather (step 2k+1) are
 * separate messages, so while segment k is reduced the blocks of segment
 * k+1 are in flight, and the all-gather of k leaves as soon as it is
 * reduced. The landing slots are double buffered. */
typedef struct ar_pipe {
  tcp_cc *cc;
  uint8_t *buf;
  int64_t count, seg;           /* elements */
  int nseg;
  uint8_t *tmp[2];              /* (n-1) slots of slot_bytes each */
  size_t slot_bytes;
  tcp_batch rs[2], ag;
} ar_pipe;

/* Block p of segment k: offset (in elements, from buf) and length. */
static void seg_block(const ar_pipe *a, int k, int p, int64_t *off, int64_t *len) {
  int64_t s0 = (int64_t)k * a->seg, sl = a->count - s0 < a->seg ? a->count - s0 : a->seg;
  dist__tcp_block(sl, a->cc->t->g->size, p, off, len);
  *off += s0;
}

static int post_rs(ar_pipe *a, int k) {
  tcp_cc *cc = a->cc;
  int n = cc->t->g->size, r = cc->t->g->rank;
  tcp_batch *b = &a->rs[k % 2];
  int64_t roff, rlen, off, len;
  seg_block(a, k, r, &roff, &rlen);
  for (int p = 0; p < n; p++) {
    seg_block(a, k, p, &off, &len);
    if (p != r)
      DIST_TRY(dist__tcp_cc_post(cc, b, 2 * k, false, p, slot(a->tmp[k % 2], p, r,
                                                               a->slot_bytes), rlen, len, false));
  }
  for (int p = 0; p < n; p++) {
    seg_block(a, k, p, &off, &len);
    if (p != r)
      DIST_TRY(dist__tcp_cc_post(cc, b, 2 * k, true, p, a->buf + (size_t)off * cc->esize, len,
                                 rlen, false));
  }
  return DIST_OK;
}

static int reduce_seg(ar_pipe *a, int k) {
  tcp_cc *cc = a->cc;
  int n = cc->t->g->size, r = cc->t->g->rank;
  int64_t roff, rlen;
  seg_block(a, k, r, &roff, &rlen);
  uint8_t *mine = a->buf + (size_t)roff * cc->esize;
  const void *stack[SRCS_ON_STACK];
  const void **srcs = srcs_get(cc, stack, n);
  if (!srcs)
    return DIST_E_NOMEM;
  for (int p = 0; p < n; p++)
    srcs[p] = p == r ? mine : slot(a->tmp[k % 2], p, r, a->slot_bytes);
  int rc = reduce_into(cc, mine, srcs, n, (size_t)rlen, r != 0);
  srcs_free(srcs, stack);
  return rc;
}

static int post_ag(ar_pipe *a, int k) {
  tcp_cc *cc = a->cc;
  int n = cc->t->g->size, r = cc->t->g->rank;
  int64_t roff, rlen, off, len;
  seg_block(a, k, r, &roff, &rlen);
  for (int p = 0; p < n; p++) {
    seg_block(a, k, p, &off, &len);
    if (p != r)
      DIST_TRY(dist__tcp_cc_post(cc, &a->ag, 2 * k + 1, false, p,
                                 a->buf + (size_t)off * cc->esize, len, rlen, false));
  }
  for (int p = 0; p < n; p++) {
    seg_block(a, k, p, &off, &len);
    if (p != r)
      DIST_TRY(dist__tcp_cc_post(cc, &a->ag, 2 * k + 1, true, p,
                                 a->buf + (size_t)roff * cc->esize, rlen, len, false));
  }
  return DIST_OK;
}

static int pipelined(tcp_cc *cc, uint8_t *buf, int64_t count) {
  int n = cc->t->g->size;
  ar_pipe a = {0};
  a.cc = cc;
  a.buf = buf;
  a.count = count;
  int64_t blk = (int64_t)(cc->t->segment_bytes / cc->esize);
  a.seg = (blk > 0 ? blk : 1) * n;
  if ((count + a.seg - 1) / a.seg > 16384) /* steps are 16-bit tags */
    a.seg = (count + 16383) / 16384;
  a.nseg = (int)((count + a.seg - 1) / a.seg);
  a.slot_bytes = (size_t)(a.seg / n + 1) * cc->esize;
  uint8_t *tmp = scratch(cc, 2 * (size_t)(n - 1) * a.slot_bytes);
  if (!tmp)
    return DIST_E_NOMEM;
  a.tmp[0] = tmp;
  a.tmp[1] = tmp + (size_t)(n - 1) * a.slot_bytes;
  int rc = post_rs(&a, 0);
  for (int k = 0; k < a.nseg && rc == DIST_OK; k++) {
    if (k + 1 < a.nseg)
      rc = post_rs(&a, k + 1);
    if (rc == DIST_OK)
      rc = dist__tcp_cc_wait_batch(cc, &a.rs[k % 2]);
    if (rc == DIST_OK)
      rc = reduce_seg(&a, k);
    if (rc == DIST_OK)
      rc = post_ag(&a, k);
  }
  if (rc == DIST_OK)
    rc = dist__tcp_cc_wait_batch(cc, &a.ag);
  dist__tcp_cc_drop_batch(cc, &a.rs[0]);
  dist__tcp_cc_drop_batch(cc, &a.rs[1]);
  dist__tcp_cc_drop_batch(cc, &a.ag);
  return rc;
}

int dist__tcp_all_reduce(tcp_cc *cc) {
  const dist_coll *c = cc->c;
  if (c->n_inputs < 1)
    return dist__err_set(cc->op->err, DIST_E_INVAL, "ALL_REDUCE over TCP: no tensor");
  int n = cc->t->g->size;
  uint8_t *buf = c->inputs[0].data;
  int64_t count = dist_tensor_numel(&c->inputs[0]);
  if (n == 1) {
    const void *s[1] = {buf};
    return reduce_into(cc, buf, s, 1, (size_t)count, false);
  }
  if (use_direct(cc, count))
    return direct(cc, buf, count, -1);
  return pipelined(cc, buf, count);
}

int dist__tcp_reduce(tcp_cc *cc) {
  const dist_coll *c = cc->c;
  if (c->n_inputs < 1)
    return dist__err_set(cc->op->err, DIST_E_INVAL, "REDUCE over TCP: no tensor");
  int n = cc->t->g->size, r = cc->t->g->rank, root = c->root;
  uint8_t *buf = c->inputs[0].data;
  int64_t count = dist_tensor_numel(&c->inputs[0]);
  if (n == 1) {
    const void *s[1] = {buf};
    return reduce_into(cc, buf, s, 1, (size_t)count, false);
  }
  if (use_direct(cc, count))
    return direct(cc, buf, count, root);
  /* Reduce-scatter, then the blocks go to the root; other ranks keep their
   * buffers untouched (their block is reduced into scratch). */
  size_t es = cc->esize;
  size_t blk = (size_t)(count / n + 1) * es;
  int64_t roff, rlen;
  dist__tcp_block(count, n, r, &roff, &rlen);
  uint8_t *tmp = scratch(cc, (size_t)n * blk);
  if (!tmp)
    return DIST_E_NOMEM;
  uint8_t *mine = r == root ? buf + (size_t)roff * es : tmp + (size_t)(n - 1) * blk;
  DIST_TRY(scatter_reduce(cc, buf, count, mine, tmp));
  if (r != root) {
    DIST_TRY(dist__tcp_cc_send(cc, root, mine, rlen, -1, true));
    return dist__tcp_cc_wait(cc);
  }
  for (int p = 0; p < n; p++) {
    int64_t off, len;
    dist__tcp_block(count, n, p, &off, &len);
    if (p != r)
      DIST_TRY(dist__tcp_cc_recv(cc, p, buf + (size_t)off * es, len, -1));
  }
  return dist__tcp_cc_wait(cc);
}

int dist__tcp_reduce_scatter(tcp_cc *cc) {
  const dist_coll *c = cc->c;
  int n = cc->t->g->size, r = cc->t->g->rank;
  bool flat = c->kind == DIST_OP_REDUCE_SCATTER_TENSOR;
  if (c->n_outputs < 1 || c->n_inputs < (flat ? 1u : (size_t)n))
    return dist__err_set(cc->op->err, DIST_E_INVAL, "%s over TCP: missing tensors",
                         dist_op_name(c->kind));
  int64_t m = dist_tensor_numel(&c->outputs[0]);
  size_t bytes = (size_t)m * cc->esize;
  for (int p = 0; p < (flat ? 1 : n); p++)
    if (dist_tensor_numel(&c->inputs[p]) != (flat ? m * n : m))
      return dist__err_set(cc->op->err, DIST_E_INVAL, "%s over TCP: the input does not "
                           "hold group-size blocks of the output's size",
                           dist_op_name(c->kind));
#define IN_AT(p) (flat ? (const uint8_t *)c->inputs[0].data + (size_t)(p) * bytes \
                       : (const uint8_t *)c->inputs[p].data)
  uint8_t *out = c->outputs[0].data;
  uint8_t *tmp = n > 1 ? scratch(cc, (size_t)(n - 1) * bytes) : NULL;
  if (n > 1 && !tmp)
    return DIST_E_NOMEM;
  for (int p = 0; p < n; p++)
    if (p != r)
      DIST_TRY(dist__tcp_cc_recv(cc, p, slot(tmp, p, r, bytes), m, m));
  for (int p = 0; p < n; p++)
    if (p != r)
      DIST_TRY(dist__tcp_cc_send(cc, p, IN_AT(p), m, m, false));
  DIST_TRY(dist__tcp_cc_wait(cc));
  const void *stack[SRCS_ON_STACK];
  const void **srcs = srcs_get(cc, stack, n);
  if (!srcs)
    return DIST_E_NOMEM;
  for (int p = 0; p < n; p++)
    srcs[p] = p == r ? IN_AT(p) : slot(tmp, p, r, bytes);
#undef IN_AT
  int rc = reduce_into(cc, out, srcs, n, (size_t)m, r != 0);
  srcs_free(srcs, stack);
  return rc;
}
