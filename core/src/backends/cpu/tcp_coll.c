/* tcp_coll.c - collectives over the TCP engine: dispatch, the step helpers
 * every algorithm uses, and the collectives that only move data.
 *
 * A collective is a sequence of steps; each step posts its receives, then
 * its sends, and waits for all of them. Messages are tagged with the
 * engine's own collective counter and the step, in the COLL context, so
 * a rank that runs ahead only leaves unexpected messages for the next
 * collective. Every message carries the operation's descriptor (kind,
 * dtype, reduce op, root, element counts, and the count the sender expects
 * back from the receiver in the same step) and the receiver checks it, so
 * ranks that disagree fail on both sides of every exchange. Transfers in
 * one direction only (broadcast, scatter, gather, reduce) ask for an
 * acknowledgement, so their senders fail too; the root of a direct
 * broadcast (n <= 4) returns once its messages are written and waits for
 * their acknowledgements at its next collective of another kind, or after
 * TCP_LATE_OPS broadcasts (settle_late): a receiver that disagreed then
 * fails that collective on the root, naming the earlier broadcast. Back
 * to back, a small broadcast so costs a one-way trip instead of a round
 * trip. A rank whose collective fails
 * sends an ERROR frame with its message to every other member, so nobody
 * waits for the timeout; an ERROR for a collective this rank has not
 * reached yet fails that collective as soon as it starts.
 *
 * Algorithms (n ranks; a pair connects when it first exchanges, so each
 * schedule holds the connections it uses: tcp_lazy.c):
 *   barrier         n <= 16: everyone to everyone; else dissemination
 *   broadcast       4 segments or more on n >= 3: a pipelined chain;
 *                   else n <= 4: root to everyone; else a binomial tree
 *   gather, scatter root to / from everyone
 *   all_gather      everyone to everyone, straight into the output slots
 *   all_to_all      everyone to everyone (splits checked on both sides)
 *   reductions      tcp_reduce.c */
#include <stdio.h>

#include "base/report.h"
#include "cpu.h"
#include "tcp_int.h"

#define SLOTS_ON_STACK 64

/* --- step helpers ------------------------------------------------------------ */

static int64_t tag_of(const tcp_cc *cc, int step) {
  return (int64_t)((cc->cseq << 16) | (uint64_t)(uint16_t)step);
}

/* Room for `more` requests in b; false when out of memory. */
static bool batch_reserve(tcp_batch *b, int more) {
  if (b->n + more <= b->cap)
    return true;
  int cap = b->cap ? b->cap * 2 : 16;
  cap = cap < b->n + more ? b->n + more : cap;
  dist__tcp_req **nr = dist__realloc(b->reqs, (size_t)cap * sizeof *nr);
  if (!nr)
    return false;
  b->reqs = nr;
  b->cap = cap;
  return true;
}

int dist__tcp_cc_post(tcp_cc *cc, tcp_batch *b, int step, bool is_send, int peer, void *buf,
                      int64_t count, int64_t peer_count, bool want_ack) {
  dist__tcp *t = cc->t;
  if (!batch_reserve(b, 1))
    return dist__err_set(cc->op->err, DIST_E_NOMEM, "out of memory");
  tcp_desc d = cc->base;
  d.count = count;
  d.peer_count = peer_count;
  pthread_mutex_lock(&t->mu);
  dist__tcp_req *r = dist__tcp_req_new(t, is_send, peer, DIST_TCP_CTX_COLL, tag_of(cc, step),
                                       buf, (size_t)count * cc->esize, &d);
  if (r) {
    r->want_ack = want_ack;
    r->lazy_ack = cc->lazy_ack;
    if (is_send)
      dist__tcp_start_send(t, r);
    else
      dist__tcp_start_recv(t, r);
    b->reqs[b->n++] = r;
  }
  pthread_mutex_unlock(&t->mu);
  return r ? DIST_OK : dist__err_set(cc->op->err, DIST_E_NOMEM, "out of memory");
}

int dist__tcp_cc_send(tcp_cc *cc, int peer, const void *buf, int64_t count,
                      int64_t peer_count, bool want_ack) {
  return dist__tcp_cc_post(cc, &cc->main, cc->step, true, peer, (void *)buf, count,
                           peer_count, want_ack);
}

int dist__tcp_cc_recv(tcp_cc *cc, int peer, void *buf, int64_t count, int64_t peer_count) {
  return dist__tcp_cc_post(cc, &cc->main, cc->step, false, peer, buf, count, peer_count,
                           false);
}

/* Releases b's requests (cancelling those still pending); t->mu held. */
static void release_locked(tcp_cc *cc, tcp_batch *b) {
  for (int i = 0; i < b->n; i++)
    dist__tcp_req_release(cc->t, b->reqs[i]);
  b->n = 0;
}

static int wait_locked(tcp_cc *cc, tcp_batch *b) {
  if (b->n == 0)
    return DIST_OK;
  tcp_wait_ctx w = {cc->c, false};
  return dist__tcp_wait_locked(cc->t, b->reqs, b->n, cc->op->deadline_ms, cc->op->err, &w);
}

int dist__tcp_cc_wait(tcp_cc *cc) {
  dist__tcp *t = cc->t;
  pthread_mutex_lock(&t->mu);
  int rc = wait_locked(cc, &cc->main);
  if (rc == DIST_OK) {
    release_locked(cc, &cc->main);
    cc->step++;
  }
  pthread_mutex_unlock(&t->mu);
  return rc;
}

int dist__tcp_cc_wait_batch(tcp_cc *cc, tcp_batch *b) {
  pthread_mutex_lock(&cc->t->mu);
  int rc = wait_locked(cc, b);
  release_locked(cc, b);
  pthread_mutex_unlock(&cc->t->mu);
  return rc;
}

void dist__tcp_cc_drop_batch(tcp_cc *cc, tcp_batch *b) {
  pthread_mutex_lock(&cc->t->mu);
  release_locked(cc, b);
  pthread_mutex_unlock(&cc->t->mu);
  dist__free(b->reqs);
  b->reqs = NULL;
  b->cap = 0;
}

void *dist__tcp_cc_alloc(tcp_cc *cc, size_t bytes) {
  void *p = dist__malloc(bytes ? bytes : 1);
  if (!p)
    dist__err_set(cc->op->err, DIST_E_NOMEM, "%s: out of memory for %zu bytes of scratch",
                  dist_op_name(cc->c->kind), bytes);
  return p;
}

static int bad(tcp_cc *cc, const char *what) {
  return dist__err_set(cc->op->err, DIST_E_INVAL, "%s over TCP: %s",
                       dist_op_name(cc->c->kind), what);
}

static void copy_own(void *dst, const void *src, size_t bytes) {
  if (dst != src && bytes)
    memmove(dst, src, bytes);
}

/* --- the data-moving collectives ---------------------------------------------- */

static int barrier(tcp_cc *cc) {
  int n = cc->t->g->size, r = cc->t->g->rank;
  if (n <= 16) {
    for (int p = 0; p < n; p++)
      if (p != r)
        DIST_TRY(dist__tcp_cc_recv(cc, p, NULL, 0, 0));
    for (int p = 0; p < n; p++)
      if (p != r)
        DIST_TRY(dist__tcp_cc_send(cc, p, NULL, 0, 0, false));
    return dist__tcp_cc_wait(cc);
  }
  for (int k = 1; k < n; k <<= 1) { /* dissemination: log2(n) rounds */
    DIST_TRY(dist__tcp_cc_recv(cc, (r - k + n) % n, NULL, 0, -1));
    DIST_TRY(dist__tcp_cc_send(cc, (r + k) % n, NULL, 0, -1, false));
    DIST_TRY(dist__tcp_cc_wait(cc));
  }
  return DIST_OK;
}

/* The root of a direct broadcast: done once its messages are written;
 * the sends still waiting for their acknowledgements join t->late. */
static int defer_acks(tcp_cc *cc) {
  dist__tcp *t = cc->t;
  pthread_mutex_lock(&t->mu);
  tcp_wait_ctx w = {cc->c, true};
  int rc = dist__tcp_wait_locked(t, cc->main.reqs, cc->main.n, cc->op->deadline_ms,
                                 cc->op->err, &w);
  tcp_batch *late = &t->late;
  if (rc == DIST_OK && !batch_reserve(late, cc->main.n))
    rc = wait_locked(cc, &cc->main); /* no room to defer: wait now */
  for (int i = 0; rc == DIST_OK && i < cc->main.n; i++) {
    dist__tcp_req *r = cc->main.reqs[i];
    if (r->state == RQ_DONE)
      dist__tcp_req_release(t, r);
    else
      late->reqs[late->n++] = r;
  }
  if (rc == DIST_OK) {
    cc->main.n = 0;
    t->late_ops += late->n > 0;
    cc->step++;
  }
  pthread_mutex_unlock(&t->mu);
  return rc;
}

/* Large vectors: a pipelined chain from the root (root, root + 1, ...),
 * one segment (DIST_TCP_SEGMENT_BYTES) at a time, the receive of the next
 * posted before this one is forwarded, so every link carries the vector
 * once. The direct and the binomial schedules send it n-1 and log2(n)
 * times out of the root's link: between 4 hosts of 10 Gbit/s the root
 * host's queue overflowed and a 16 MiB broadcast waited for TCP's
 * retransmissions (bench/COST_MODEL_HOSTS.md). */
static int bcast_chain(tcp_cc *cc, uint8_t *buf, int64_t count) {
  int n = cc->t->g->size, r = cc->t->g->rank, root = cc->c->root;
  int vr = (r - root + n) % n, prev = (r + n - 1) % n, next = (r + 1) % n;
  int64_t seg = (int64_t)(cc->t->segment_bytes / cc->esize);
  seg = seg > 0 ? seg : 1;
  if ((count + seg - 1) / seg > 16384) /* steps are 16-bit tags */
    seg = (count + 16383) / 16384;
  int nseg = (int)((count + seg - 1) / seg);
  tcp_batch in[2] = {{0}, {0}}, out = {0};
#define SEG(k) buf + (size_t)((int64_t)(k) * seg) * cc->esize, \
               (count - (int64_t)(k) * seg < seg ? count - (int64_t)(k) * seg : seg)
  int rc = vr > 0 ? dist__tcp_cc_post(cc, &in[0], 0, false, prev, SEG(0), -1, false) : DIST_OK;
  for (int k = 0; k < nseg && rc == DIST_OK; k++) {
    if (vr > 0 && k + 1 < nseg)
      rc = dist__tcp_cc_post(cc, &in[(k + 1) % 2], k + 1, false, prev, SEG(k + 1), -1, false);
    if (rc == DIST_OK && vr > 0)
      rc = dist__tcp_cc_wait_batch(cc, &in[k % 2]);
    if (rc == DIST_OK && vr < n - 1)
      rc = dist__tcp_cc_post(cc, &out, k, true, next, SEG(k), -1, true);
  }
#undef SEG
  if (rc == DIST_OK)
    rc = dist__tcp_cc_wait_batch(cc, &out);
  dist__tcp_cc_drop_batch(cc, &in[0]);
  dist__tcp_cc_drop_batch(cc, &in[1]);
  dist__tcp_cc_drop_batch(cc, &out);
  return rc;
}

static int broadcast(tcp_cc *cc) {
  const dist_coll *c = cc->c;
  if (c->n_inputs < 1)
    return bad(cc, "no tensor");
  int n = cc->t->g->size, r = cc->t->g->rank, root = c->root;
  void *buf = c->inputs[0].data;
  int64_t count = dist_tensor_numel(&c->inputs[0]);
  if (n >= 3 && (uint64_t)count * cc->esize >= TCP_BCAST_CHAIN_SEGMENTS * cc->t->segment_bytes)
    return bcast_chain(cc, buf, count);
  if (n <= TCP_BCAST_DIRECT_RANKS) {
    cc->lazy_ack = r == root; /* it defers them (defer_acks) */
    for (int p = 0; r == root && p < n; p++)
      if (p != root)
        DIST_TRY(dist__tcp_cc_send(cc, p, buf, count, -1, true));
    if (r != root)
      DIST_TRY(dist__tcp_cc_recv(cc, root, buf, count, -1));
    return r == root ? defer_acks(cc) : dist__tcp_cc_wait(cc);
  }
  /* Binomial tree: receive from the parent, then send to the children.
   * Leaves wait once and inner ranks twice, so the whole tree uses one
   * step number (tag). */
  int vr = (r - root + n) % n, mask = 1, step = cc->step;
  for (; mask < n; mask <<= 1)
    if (vr & mask) {
      DIST_TRY(dist__tcp_cc_recv(cc, (r - mask + n) % n, buf, count, -1));
      DIST_TRY(dist__tcp_cc_wait(cc));
      cc->step = step;
      break;
    }
  for (mask >>= 1; mask > 0; mask >>= 1)
    if (vr + mask < n)
      DIST_TRY(dist__tcp_cc_send(cc, (r + mask) % n, buf, count, -1, true));
  return dist__tcp_cc_wait(cc);
}

static int gather(tcp_cc *cc) {
  const dist_coll *c = cc->c;
  int n = cc->t->g->size, r = cc->t->g->rank, root = c->root;
  if (c->n_inputs < 1 || (r == root && c->n_outputs < (size_t)n))
    return bad(cc, "missing tensors");
  int64_t count = dist_tensor_numel(&c->inputs[0]);
  if (r != root) {
    DIST_TRY(dist__tcp_cc_send(cc, root, c->inputs[0].data, count, -1, true));
    return dist__tcp_cc_wait(cc);
  }
  for (int p = 0; p < n; p++)
    if (dist_tensor_numel(&c->outputs[p]) != count)
      return bad(cc, "an output tensor differs in size from the input");
  for (int p = 0; p < n; p++)
    if (p != r)
      DIST_TRY(dist__tcp_cc_recv(cc, p, c->outputs[p].data, count, -1));
  copy_own(c->outputs[r].data, c->inputs[0].data, (size_t)count * cc->esize);
  return dist__tcp_cc_wait(cc);
}

static int scatter(tcp_cc *cc) {
  const dist_coll *c = cc->c;
  int n = cc->t->g->size, r = cc->t->g->rank, root = c->root;
  if (c->n_outputs < 1 || (r == root && c->n_inputs < (size_t)n))
    return bad(cc, "missing tensors");
  int64_t count = dist_tensor_numel(&c->outputs[0]);
  if (r != root) {
    DIST_TRY(dist__tcp_cc_recv(cc, root, c->outputs[0].data, count, -1));
    return dist__tcp_cc_wait(cc);
  }
  for (int p = 0; p < n; p++)
    if (dist_tensor_numel(&c->inputs[p]) != count)
      return bad(cc, "an input tensor differs in size from the output");
  for (int p = 0; p < n; p++)
    if (p != r)
      DIST_TRY(dist__tcp_cc_send(cc, p, c->inputs[p].data, count, -1, true));
  copy_own(c->outputs[0].data, c->inputs[r].data, (size_t)count * cc->esize);
  return dist__tcp_cc_wait(cc);
}

static int all_gather(tcp_cc *cc) {
  const dist_coll *c = cc->c;
  int n = cc->t->g->size, r = cc->t->g->rank;
  bool flat = c->kind == DIST_OP_ALL_GATHER_INTO_TENSOR;
  if (c->n_inputs < 1 || c->n_outputs < (flat ? 1u : (size_t)n))
    return bad(cc, "missing tensors");
  int64_t count = dist_tensor_numel(&c->inputs[0]);
  size_t bytes = (size_t)count * cc->esize;
  uint8_t *slot[SLOTS_ON_STACK];
  uint8_t **slots = n <= SLOTS_ON_STACK ? slot : dist__calloc((size_t)n, sizeof *slots);
  if (!slots)
    return dist__err_set(cc->op->err, DIST_E_NOMEM, "out of memory");
  int rc = DIST_OK;
  for (int p = 0; p < n && rc == DIST_OK; p++) {
    slots[p] = flat ? (uint8_t *)c->outputs[0].data + (size_t)p * bytes
                    : (uint8_t *)c->outputs[p].data;
    int64_t have = flat ? dist_tensor_numel(&c->outputs[0]) : dist_tensor_numel(&c->outputs[p]);
    if (flat ? have != count * n : have != count)
      rc = bad(cc, "the output does not hold group-size copies of the input");
  }
  for (int p = 0; p < n && rc == DIST_OK; p++)
    if (p != r)
      rc = dist__tcp_cc_recv(cc, p, slots[p], count, count);
  for (int p = 0; p < n && rc == DIST_OK; p++)
    if (p != r)
      rc = dist__tcp_cc_send(cc, p, c->inputs[0].data, count, count, false);
  if (rc == DIST_OK) {
    copy_own(slots[r], c->inputs[0].data, bytes);
    rc = dist__tcp_cc_wait(cc);
  }
  if (slots != slot)
    dist__free(slots);
  return rc;
}

/* Rows along dim 0 and elements per row of a tensor. */
static void rows_of(const dist_tensor *t, int64_t *rows, int64_t *row_elems) {
  int64_t numel = dist_tensor_numel(t);
  *rows = t->ndim >= 1 ? t->shape[0] : 1;
  *row_elems = *rows > 0 ? numel / *rows : 0;
}

/* Element offsets and counts of an all_to_all_single side. */
static int a2a_layout(tcp_cc *cc, const dist_tensor *t, const int64_t *splits,
                      int64_t *off, int64_t *cnt) {
  int n = cc->t->g->size;
  int64_t rows, re, at = 0;
  rows_of(t, &rows, &re);
  if (!splits && rows % n != 0)
    return bad(cc, "dim 0 is not divisible by the group size (give split sizes)");
  for (int p = 0; p < n; p++) {
    int64_t k = splits ? splits[p] : rows / n;
    if (k < 0)
      return bad(cc, "a negative split size");
    off[p] = at * re;
    cnt[p] = k * re;
    at += k;
  }
  return at == rows ? DIST_OK : bad(cc, "split sizes do not add up to dim 0");
}

/* This rank's block to itself is `in` elements in its input splits and
 * `out` in its output splits. No peer can see that (the block never
 * travels), and the fault is this rank's alone: a desync whose report
 * marks it, as the shared-memory engine's size check does, so the job's
 * cause names it. (An invalid argument named nobody: every member failed
 * with this rank's words, and the rank that exited first was blamed.) */
static int own_block_differs(tcp_cc *cc, int64_t in, int64_t out) {
  const dist__cpu_group *g = cc->t->g;
  int me = g->peers[g->rank].global_rank;
  dist__rval v = {.kind = cc->c->kind, .dtype = cc->c->inputs[0].dtype, .count = in,
                  .redop = -1, .root = -1, .dir = "to", .peer = me};
  dist__rside sent = {.global_rank = me, .group_rank = g->rank, .self = true};
  dist__rside kept = sent;
  dist__report_value(&v, sent.value, sizeof sent.value);
  v.count = out;
  v.dir = "from";
  dist__report_value(&v, kept.value, sizeof kept.value);
  char m[DIST_ERRMSG_LEN], lb[64];
  size_t off = 0;
  m[0] = '\0';
  dist__appendf(m, sizeof m, &off, "%s: ", dist__cpu_op_label(cc->c, lb, sizeof lb));
  dist__report_disagree_odd(m, sizeof m, &off, "split size", &sent, &kept);
  dist__appendf(m, sizeof m, &off, "\n  rank %d's split sizes disagree with themselves: its "
                "block to itself is %lld elements in its input and %lld in its output", me,
                (long long)in, (long long)out);
  return dist__err_set(cc->op->err, DIST_E_DESYNC, "%s", m);
}

static int all_to_all(tcp_cc *cc) {
  const dist_coll *c = cc->c;
  int n = cc->t->g->size, r = cc->t->g->rank;
  bool single = c->kind == DIST_OP_ALL_TO_ALL_SINGLE;
  size_t want = single ? 1u : (size_t)n;
  if (c->n_inputs < want || c->n_outputs < want ||
      (single && (c->in_splits || c->out_splits) && c->n_splits != (size_t)n))
    return bad(cc, "missing tensors or split sizes");
  int64_t *lay = dist__calloc((size_t)n * 4, sizeof *lay);
  if (!lay)
    return dist__err_set(cc->op->err, DIST_E_NOMEM, "out of memory");
  int64_t *ioff = lay, *icnt = lay + n, *ooff = lay + 2 * n, *ocnt = lay + 3 * n;
  int rc = DIST_OK;
  if (single) {
    rc = a2a_layout(cc, &c->inputs[0], c->in_splits, ioff, icnt);
    if (rc == DIST_OK)
      rc = a2a_layout(cc, &c->outputs[0], c->out_splits, ooff, ocnt);
  } else {
    for (int p = 0; p < n; p++) {
      icnt[p] = dist_tensor_numel(&c->inputs[p]);
      ocnt[p] = dist_tensor_numel(&c->outputs[p]);
    }
  }
  if (rc == DIST_OK && icnt[r] != ocnt[r])
    rc = own_block_differs(cc, icnt[r], ocnt[r]);
#define IN_AT(p) (single ? (uint8_t *)c->inputs[0].data + (size_t)ioff[p] * cc->esize \
                         : (uint8_t *)c->inputs[p].data)
#define OUT_AT(p) (single ? (uint8_t *)c->outputs[0].data + (size_t)ooff[p] * cc->esize \
                          : (uint8_t *)c->outputs[p].data)
  for (int p = 0; p < n && rc == DIST_OK; p++)
    if (p != r)
      rc = dist__tcp_cc_recv(cc, p, OUT_AT(p), ocnt[p], icnt[p]);
  for (int p = 0; p < n && rc == DIST_OK; p++)
    if (p != r)
      rc = dist__tcp_cc_send(cc, p, IN_AT(p), icnt[p], ocnt[p], false);
  if (rc == DIST_OK) {
    copy_own(OUT_AT(r), IN_AT(r), (size_t)icnt[r] * cc->esize);
    rc = dist__tcp_cc_wait(cc);
  }
#undef IN_AT
#undef OUT_AT
  dist__free(lay);
  return rc;
}

/* --- dispatch ------------------------------------------------------------------- */

static bool has_redop(dist_op_kind k) {
  return k == DIST_OP_ALL_REDUCE || k == DIST_OP_REDUCE || k == DIST_OP_REDUCE_SCATTER ||
         k == DIST_OP_REDUCE_SCATTER_TENSOR;
}

static bool has_root(dist_op_kind k) {
  return k == DIST_OP_BROADCAST || k == DIST_OP_REDUCE || k == DIST_OP_GATHER ||
         k == DIST_OP_SCATTER;
}

/* The descriptor every message of the collective carries. */
static int set_base(tcp_cc *cc) {
  const dist_coll *c = cc->c;
  const dist_tensor *t0 = c->n_inputs ? &c->inputs[0] : c->n_outputs ? &c->outputs[0] : NULL;
  tcp_desc *d = &cc->base;
  d->kind = (uint16_t)c->kind;
  d->part_of = dist__cpu_part_of(c);
  d->op_seq = c->seq;
  d->dtype = TCP_NONE8;
  d->redop = has_redop(c->kind) ? (uint8_t)c->redop.kind : TCP_NONE8;
  d->root = has_root(c->kind) ? c->root : -1;
  d->count = d->peer_count = d->total = -1;
  cc->esize = 1;
  if (c->kind == DIST_OP_BARRIER)
    return DIST_OK;
  if (!t0 || dist_dtype_size(t0->dtype) == 0)
    return bad(cc, "no tensor or an unknown dtype");
  d->dtype = (uint8_t)t0->dtype;
  cc->esize = dist_dtype_size(t0->dtype);
  if (has_root(c->kind) && (c->root < 0 || c->root >= cc->t->g->size))
    return bad(cc, "root outside the group");
  switch (c->kind) {
  case DIST_OP_BROADCAST:
  case DIST_OP_ALL_REDUCE:
  case DIST_OP_REDUCE:
  case DIST_OP_GATHER:
  case DIST_OP_ALL_GATHER:
  case DIST_OP_ALL_GATHER_INTO_TENSOR:
    d->total = c->n_inputs ? dist_tensor_numel(&c->inputs[0]) : -1;
    break;
  case DIST_OP_SCATTER:
  case DIST_OP_REDUCE_SCATTER:
  case DIST_OP_REDUCE_SCATTER_TENSOR:
    d->total = c->n_outputs ? dist_tensor_numel(&c->outputs[0]) : -1;
    break;
  default: break;
  }
  return DIST_OK;
}

static int run_kind(tcp_cc *cc) {
  switch (cc->c->kind) {
  case DIST_OP_BARRIER: return barrier(cc);
  case DIST_OP_BROADCAST: return broadcast(cc);
  case DIST_OP_ALL_REDUCE: return dist__tcp_all_reduce(cc);
  case DIST_OP_REDUCE: return dist__tcp_reduce(cc);
  case DIST_OP_ALL_GATHER:
  case DIST_OP_ALL_GATHER_INTO_TENSOR: return all_gather(cc);
  case DIST_OP_GATHER: return gather(cc);
  case DIST_OP_SCATTER: return scatter(cc);
  case DIST_OP_REDUCE_SCATTER:
  case DIST_OP_REDUCE_SCATTER_TENSOR: return dist__tcp_reduce_scatter(cc);
  case DIST_OP_ALL_TO_ALL:
  case DIST_OP_ALL_TO_ALL_SINGLE: return all_to_all(cc);
  default:
    return dist__err_set(cc->op->err, DIST_E_NOTSUP, "%s is not a collective of the TCP "
                         "engine", dist_op_name(cc->c->kind));
  }
}

/* How long fail_coll waits for a member it was not connected to (one
 * stopped or overloaded is left to its own timeout). */
#define TELL_CONNECT_MS 5000

/* After a failure (t->mu held): cancel what is in flight and tell the other
 * members, unless they told us or cannot hear it (a lost member was told
 * of when it was found gone: dist__tcp_peer_gone). */
static void fail_coll(tcp_cc *cc, int rc) {
  dist__tcp *t = cc->t;
  release_locked(cc, &cc->main);
  bool reported = t->err_rc != DIST_OK && t->err_seq == cc->cseq;
  if (reported || rc == DIST_E_ABORTED || rc == DIST_E_PEER_LOST)
    return;
  tcp_hdr h;
  dist__tcp_hdr_init(&h, TCP_F_ERROR, DIST_TCP_CTX_COLL, (int64_t)cc->cseq);
  h.kind = (uint16_t)cc->c->kind;
  h.op_seq = cc->c->seq;
  h.count = rc;
  for (int p = 0; p < t->g->size; p++) {
    /* Members this collective's schedule never connected to are told too
     * (connected now, briefly: one that does not answer is left out). */
    dist__errbuf e;
    dist__err_clear(&e);
    if (p != t->g->rank && !t->conns[p].gone &&
        dist__tcp_connect_peer(t, p, TELL_CONNECT_MS, &e) == DIST_OK && t->conns[p].fd >= 0) {
      dist__tcp_send_ctrl(t, &t->conns[p], &h, cc->op->err->msg);
      dist__tcp_flush(t, &t->conns[p]);
    }
  }
  /* A timeout leaves messages of this collective in flight. */
  if (rc == DIST_E_TIMEOUT)
    dist__cpu_mark_broken(t->g, rc, cc->op->err->msg);
}

/* Before a collective (t->mu held): the acknowledgements the root of
 * earlier broadcasts did not wait for (defer_acks), unless this is one
 * more such broadcast and fewer than TCP_LATE_OPS are outstanding. */
static int settle_late(tcp_cc *cc) {
  dist__tcp *t = cc->t;
  tcp_batch *late = &t->late;
  if (late->n == 0 ||
      (cc->c->kind == DIST_OP_BROADCAST && t->g->size <= TCP_BCAST_DIRECT_RANKS &&
       t->late_ops < TCP_LATE_OPS))
    return DIST_OK;
  dist__errbuf err;
  dist__err_clear(&err);
  tcp_wait_ctx w = {NULL, false}; /* messages name the earlier broadcast */
  int rc = dist__tcp_wait_locked(t, late->reqs, late->n, cc->op->deadline_ms, &err, &w);
  for (int i = 0; i < late->n; i++)
    dist__tcp_req_release(t, late->reqs[i]);
  late->n = 0;
  t->late_ops = 0;
  if (rc == DIST_OK)
    return DIST_OK;
  char lb[64];
  return dist__err_set(cc->op->err, rc, "%s not run: an earlier broadcast, which this rank "
                       "returned from once its messages were written, failed: %s",
                       dist__cpu_op_label(cc->c, lb, sizeof lb), err.msg);
}

/* Starts collective number t->coll_seq + 1 (t->mu held). */
static int begin(dist__tcp *t, tcp_cc *cc) {
  dist__tcp_handle_abort(t);
  if (atomic_load(&t->aborted))
    return dist__err_set(cc->op->err, DIST_E_ABORTED, "group %s was aborted: %s", t->g->name,
                         t->abort_reason);
  char lb[64];
  dist__tcp_need_departed(t, -1, NULL, 0); /* a collective needs every member */
  if (t->lost_rc != DIST_OK)
    return dist__err_set(cc->op->err, t->lost_rc, "%s: %s",
                         dist__cpu_op_label(cc->c, lb, sizeof lb), t->lost_msg);
  DIST_TRY(dist__cpu_check_state(t->g, cc->op->err));
  cc->cseq = ++t->coll_seq;
  t->coll_active = true;
  if (t->err_rc != DIST_OK && t->err_seq == cc->cseq) {
    return dist__err_set(cc->op->err, t->err_rc, "%s: %s",
                         dist__cpu_op_label(cc->c, lb, sizeof lb), t->err_msg);
  }
  return DIST_OK;
}

/* A collective that failed because members left the group cleanly (a BYE
 * with no failure of their own: they destroyed the group, or their
 * process ended, after fewer collectives than this rank called) and no
 * member was lost otherwise: the collective counts parted. A desync in
 * the checking layer's words (wrapper_pg/src/absent.c report_left), so
 * the verdict blames the ranks that left, not the one that called on;
 * distrun and distview read it as the consequence of an early exit when
 * the leaver's process ended. rc unchanged otherwise. t->mu held. */
static int left_before(tcp_cc *cc, int rc) {
  dist__tcp *t = cc->t;
  char list[256], lines[1024], nb[160], lb[64];
  size_t lo = 0, li = 0;
  int n = 0;
  for (int p = 0; p < t->g->size; p++) {
    const tcp_conn *m = &t->conns[p];
    if (p == t->g->rank || !m->gone)
      continue;
    if (!m->bye || (m->bye_text && *m->bye_text))
      return rc; /* a loss, or a departure after a failure: its own story */
    dist__appendf(list, sizeof list, &lo, "%s%d", n++ ? "," : "", t->g->peers[p].global_rank);
    dist__appendf(lines, sizeof lines, &li, "\n  %s, group rank %d: left the group (it said "
                  "goodbye)  <- collective count differs",
                  dist__cpu_peer_name(t->g, p, nb, sizeof nb), p);
  }
  if (n == 0)
    return rc;
  dist__err_clear(cc->op->err); /* the lost request's "peer lost" gives way */
  return dist__err_set(cc->op->err, DIST_E_DESYNC, "%s %s left the group (destroyed it or "
                       "exited) before this collective; the collective counts differ\n  rank %d "
                       "(group rank %d): at %s (collective %llu of the group)%s",
                       n > 1 ? "ranks" : "rank", list, t->g->peers[t->g->rank].global_rank,
                       t->g->rank, dist__cpu_op_label(cc->c, lb, sizeof lb),
                       (unsigned long long)cc->cseq, lines);
}

/* A collective whose messages all came while a peer's ABORT was read
 * (t->mu held): the peer aborted the group with its side of this
 * collective pending (a destroy with operations pending, dist_abort_group)
 * after its data had left, and the abort fails every pending operation on
 * the peers too (pg.h). It fails here as the collectives after it do
 * (begin), rather than succeed or fail by which frame came first. */
static int aborted_meanwhile(tcp_cc *cc) {
  dist__tcp *t = cc->t;
  char lb[64];
  return dist__err_set(cc->op->err, t->lost_rc != DIST_OK ? t->lost_rc : DIST_E_PEER_LOST,
                       "%s: %s", dist__cpu_op_label(cc->c, lb, sizeof lb),
                       t->lost_msg[0] ? t->lost_msg : "a peer aborted the group");
}

/* Whether a peer's collective data came before this rank's collective
 * began (held in t->unexp, t->mu held). */
static bool coll_data_early(const dist__tcp *t) {
  for (const tcp_umsg *u = t->unexp; u; u = u->next)
    if (u->h.ctx == DIST_TCP_CTX_COLL)
      return true;
  return false;
}

/* A collective that completed here (t->mu held): the group's history that
 * a later disagreement is read against (tcp_p2p.c coll_odd). */
static void remember(dist__tcp *t, const tcp_desc *d) {
  t->hist_last = *d;
  t->hist_any = true;
  if (d->kind < DIST_OP_COUNT_) {
    t->hist_kind[d->kind] = *d;
    t->hist_kinds |= 1u << d->kind;
  }
}

int dist__tcp_run(dist__tcp *t, dist__cpu_op *op) {
  if (!t || !op || !op->c || !op->err)
    return DIST_E_INVAL;
  tcp_cc cc = {0};
  cc.t = t;
  cc.op = op;
  cc.c = op->c;
  /* The descriptor first (no engine state), so the frame handlers know the
   * running collective's from the moment it counts as running. */
  int base_rc = set_base(&cc);
  pthread_mutex_lock(&t->mu);
  /* Data that came before this collective began may be all it needs from
   * its peers: it would complete without reading its sockets again, past
   * what came behind that data (a peer's ABORT of the collective it sent
   * it for, read only at the next wait). Read that first (rare: a peer
   * ran ahead), so begin sees the group as it is. */
  if (__builtin_expect(t->unexp != NULL, 0) && coll_data_early(t))
    dist__tcp_sweep(t);
  int rc = begin(t, &cc);
  unsigned aborts = t->peer_aborts;
  if (rc == DIST_OK)
    rc = settle_late(&cc);
  if (rc == DIST_OK && base_rc == DIST_OK) {
    size_t bytes = cc.base.total > 0 ? (size_t)cc.base.total * cc.esize : 0;
    t->run = cc.base;
    t->run_bytes = bytes;
    t->run_seq = cc.cseq;
    if (cc.base.kind == DIST_OP_BROADCAST && cc.base.root == t->g->rank) {
      t->bcast = cc.base;
      t->bcast_bytes = bytes;
      t->bcast_seq = cc.cseq;
    }
    if (__builtin_expect(t->unexp != NULL, 0))
      dist__tcp_clash_queued(t);
  }
  pthread_mutex_unlock(&t->mu);
  if (rc == DIST_OK)
    rc = base_rc;
  if (rc == DIST_OK)
    rc = run_kind(&cc);
  pthread_mutex_lock(&t->mu);
  if (rc == DIST_OK && t->peer_aborts != aborts)
    rc = aborted_meanwhile(&cc);
  if (rc == DIST_E_PEER_LOST && t->g->group_id >= 0) /* an internal group's is its owner's */
    rc = left_before(&cc, rc);
  if (rc != DIST_OK && cc.cseq == t->coll_seq && t->coll_active) {
    t->failed_seq = cc.cseq;
    fail_coll(&cc, rc);
  }
  else
    release_locked(&cc, &cc.main);
  if (rc == DIST_OK) {
    remember(t, &cc.base);
    t->done = cc.base;
    t->done_bytes = t->run_bytes;
    t->done_seq = cc.cseq;
  }
  t->coll_active = false;
  if (t->err_rc != DIST_OK && t->err_seq <= t->coll_seq)
    t->err_rc = DIST_OK; /* consumed */
  pthread_mutex_unlock(&t->mu);
  dist__free(cc.main.reqs);
  return rc;
}
