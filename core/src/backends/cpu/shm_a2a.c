/* shm_a2a.c - all_to_all (tensor lists) and all_to_all_single (one tensor,
 * even or uneven splits of rows along dim 0) over shared memory.
 *
 * The first step publishes, next to the descriptor, how many elements this
 * rank sends to and expects from every rank (cnt[p]); after its wait every
 * rank checks the whole matrix (what i sends j equals what j expects from
 * i), so a disagreement fails every rank at that step, and every rank then
 * derives the same step count from the largest piece in the matrix.
 *
 * Each rank's slot is cut into N - 1 sub-slots, one per destination (in
 * order after itself); step i stages bytes [i q, (i + 1) q) of every
 * outgoing piece and reads the same range of every incoming one. Pieces
 * shorter than the largest simply stop contributing. A rank's piece for
 * itself is copied directly.
 *
 * An even all_to_all_single of a few bytes a peer skips the matrix: its
 * descriptor carries both element counts, which settles every piece size
 * (a2a_tiny). */
#include "shm_int.h"

typedef struct a2a {
  const dist_coll *c;
  size_t es, q;         /* element size; bytes per sub-slot of the slot */
  size_t qi;            /* bytes per sub-slot of the polled line */
  bool inl;             /* the agreed pieces fit in the polled lines */
  const int64_t *send;  /* elements this rank sends to each rank (cnt[p]) */
  const int64_t *recv;  /* elements it expects from each rank */
  int64_t *soff, *roff; /* single form: element offsets of each piece */
} a2a;

static const uint8_t *piece_in(const a2a *a, int j) {
  if (a->c->kind == DIST_OP_ALL_TO_ALL)
    return a->c->inputs[j].data;
  return (const uint8_t *)a->c->inputs[0].data + (size_t)a->soff[j] * a->es;
}

static uint8_t *piece_out(const a2a *a, int j) {
  if (a->c->kind == DIST_OP_ALL_TO_ALL)
    return a->c->outputs[j].data;
  return (uint8_t *)a->c->outputs[0].data + (size_t)a->roff[j] * a->es;
}

static int64_t row_elems(const dist_tensor *t) {
  int64_t r = 1;
  for (int d = 1; d < t->ndim; d++)
    r *= t->shape[d];
  return r;
}

/* Element counts (and offsets) of one side of all_to_all_single. */
static void split_side(int n, const dist_tensor *t, const int64_t *splits, int64_t *cnt,
                       int64_t *off) {
  int64_t row = row_elems(t), total = dist_tensor_numel(t), at = 0;
  for (int j = 0; j < n; j++) {
    cnt[j] = splits ? splits[j] * row : total / n;
    off[j] = at;
    at += cnt[j];
  }
}

/* Fills cnt[p] of this rank (and the offsets) for the operation. The
 * counts are built aside and copied only when they changed: peers keep
 * their cached copy of the lines across repeated calls. */
static void fill_counts(dist__shm *s, a2a *a, int p) {
  const dist_coll *c = a->c;
  int n = s->size;
  int64_t *cnt = s->scratch + 2 * n, *pub = s->peer[s->rank].cnt[p];
  if (c->kind == DIST_OP_ALL_TO_ALL) {
    for (int j = 0; j < n; j++) {
      cnt[j] = dist_tensor_numel(&c->inputs[j]);
      cnt[n + j] = dist_tensor_numel(&c->outputs[j]);
    }
  } else {
    split_side(n, &c->inputs[0], c->in_splits, cnt, a->soff);
    split_side(n, &c->outputs[0], c->out_splits, cnt + n, a->roff);
  }
  /* Compared with the private mirror, not the published copy: reading
   * lines the peers read costs transfers (see shm_publish). */
  int64_t *mirror = s->cnt_mirror + (size_t)p * 3 * (size_t)n;
  size_t bytes = 2 * (size_t)n * sizeof *cnt;
  if (memcmp(mirror, cnt, bytes) != 0) {
    memcpy(mirror, cnt, bytes);
    memcpy(pub, cnt, bytes);
  }
  a->send = mirror;
  a->recv = mirror + n;
  if (!s->cma)
    return;
  int64_t *addr = cnt + 2 * n; /* scratch has room for 3 x n after soff, roff */
  for (int j = 0; j < n; j++)
    addr[j] = (int64_t)(uintptr_t)piece_in(a, j);
  if (memcmp(mirror + 2 * n, addr, (size_t)n * sizeof *addr) != 0) {
    memcpy(mirror + 2 * n, addr, (size_t)n * sizeof *addr);
    memcpy(pub + 2 * n, addr, (size_t)n * sizeof *addr);
  }
}

/* The largest piece between two different ranks, in bytes: mine before
 * the first step, everyone's after it. */
static size_t max_piece(const dist__shm *s, const a2a *a, int p, bool all) {
  int64_t big = 0;
  for (int i = all ? 0 : s->rank; i < (all ? s->size : s->rank + 1); i++) {
    const int64_t *cnt = i == s->rank ? a->send : s->peer[i].cnt[p];
    for (int j = 0; j < s->size; j++)
      if (i != j && cnt[j] > big)
        big = cnt[j];
  }
  return (size_t)big * a->es;
}

/* Step count every rank agrees on: from the largest piece between two
 * different ranks in the (checked) matrix. */
static size_t agreed_steps(const dist__shm *s, a2a *a, int p) {
  size_t bytes = max_piece(s, a, p, true);
  a->inl = bytes <= a->qi;
  return bytes && !a->inl ? shm_ceil_div(bytes, a->q) : 1;
}

/* Stages bytes [off, off + q) of every outgoing piece. In the first step
 * a rank whose own pieces all fit also stages them in its polled line:
 * whether the readers look there depends on the largest piece of the
 * whole matrix, known only after the step. */
static void stage(dist__shm *s, const a2a *a, size_t off, uint64_t g) {
  int p = (int)(g & 1);
  bool also_inl = off == 0 && s->size > 1;
  for (int j = 0; j < s->size && also_inl; j++)
    also_inl = j == s->rank || (size_t)a->send[j] * a->es <= a->qi;
  for (int j = 0; j < s->size; j++) {
    size_t len = (size_t)a->send[j] * a->es;
    if (j == s->rank || off >= len)
      continue;
    size_t sub = (size_t)shm_sub(s->rank, j, s->size);
    const uint8_t *src = piece_in(a, j) + off;
    if (also_inl)
      shm_copy(s->peer[s->rank].hdr[SHM_L(g)]->inl + sub * a->qi, src, len);
    shm_copy(s->peer[s->rank].data[p] + sub * a->q, src, shm_min(a->q, len - off));
  }
}

static void unstage(dist__shm *s, const a2a *a, size_t off, uint64_t g) {
  int p = (int)(g & 1);
  for (int j = 0; j < s->size; j++) {
    size_t len = (size_t)a->recv[j] * a->es;
    if (j == s->rank || off >= len)
      continue;
    size_t sub = (size_t)shm_sub(j, s->rank, s->size);
    const uint8_t *src = a->inl ? s->peer[j].hdr[SHM_L(g)]->inl + sub * a->qi
                                : s->peer[j].data[p] + sub * a->q;
    shm_copy_out(s, piece_out(a, j) + off, src, shm_min(a->inl ? a->qi : a->q, len - off));
  }
}

/* This rank's piece for itself, copied alongside step i's chunk (while
 * the input is in cache); the last step copies whatever remains. */
static void own_part(dist__shm *s, const a2a *a, size_t off, bool last) {
  size_t len = (size_t)a->send[s->rank] * a->es;
  uint8_t *out = piece_out(a, s->rank);
  const uint8_t *in = piece_in(a, s->rank);
  if (off >= len)
    return;
  size_t n = last ? len - off : shm_min(a->q, len - off);
  shm_copy_own(s, out + off, in + off, n);
}

/* After the first step: every rank pulls its pieces from the peers'
 * inputs, then a second step keeps those alive until all are done. */
static int a2a_direct(dist__shm *s, dist__cpu_op *op, const a2a *a, uint64_t g0) {
  int p = (int)(g0 & 1);
  s->step = g0 + 1;
  for (int j = 0; j < s->size; j++) {
    size_t len = (size_t)a->recv[j] * a->es;
    if (j != s->rank && len)
      DIST_TRY(dist__shm_cma_read(s, op, j, piece_out(a, j), shm_addrs(s, j, p)[s->rank], len));
  }
  shm_copy_own(s, piece_out(a, s->rank), piece_in(a, s->rank), (size_t)a->send[s->rank] * a->es);
  int rc = shm_step(s, op, g0 + 1, false);
  s->step = g0 + 2;
  return rc;
}

/* The staged path after the first step: the rest of the pieces in
 * sub-slot chunks. */
static int a2a_staged(dist__shm *s, dist__cpu_op *op, a2a *a, uint64_t g0) {
  int p0 = (int)(g0 & 1);
  size_t steps = agreed_steps(s, a, p0);
  int64_t in_total = 0;
  for (int j = 0; j < s->size; j++)
    in_total += a->recv[j];
  shm_stream_begin(s, (size_t)in_total * a->es);
  unstage(s, a, 0, g0);
  own_part(s, a, 0, steps == 1);
  for (size_t i = 1; i < steps; i++) {
    uint64_t g = g0 + i;
    stage(s, a, i * a->q, g);
    int rc = shm_step(s, op, g, false);
    if (rc != DIST_OK)
      return rc;
    unstage(s, a, i * a->q, g);
    own_part(s, a, i * a->q, i + 1 == steps);
  }
  s->step = g0 + steps;
  return DIST_OK;
}

/* Whether one side of all_to_all_single splits its rows evenly: no split
 * sizes (rows / N each, which validation checked divides), or explicit
 * ones that all equal rows / N. */
static bool side_even(int n, const dist_tensor *t, const int64_t *splits) {
  int64_t rows = t->ndim >= 1 ? t->shape[0] : 1;
  if (!splits)
    return true;
  if (rows % n != 0)
    return false;
  for (int j = 0; j < n; j++)
    if (splits[j] != rows / n)
      return false;
  return true;
}

/* The even form of all_to_all_single. Explicit split sizes that equal the
 * even split are the same call as none (torch, and the TCP engine and the
 * checking layer, which compare rows per pair): a rank that spells them
 * out must publish the same key and take the same path as one that passes
 * NULL, or the ranks of a legal program disagree on the key. Equal input
 * and output sizes too, as validation demands of the NULL form: the even
 * path's key stands for every piece size only then. */
static bool even_single(const dist__shm *s, const dist_coll *c) {
  if (c->kind != DIST_OP_ALL_TO_ALL_SINGLE)
    return false;
  if (!c->in_splits && !c->out_splits)
    return true;
  return dist_tensor_numel(&c->inputs[0]) == dist_tensor_numel(&c->outputs[0]) &&
         side_even(s->size, &c->inputs[0], c->in_splits) &&
         side_even(s->size, &c->outputs[0], c->out_splits);
}

/* Even all_to_all_single whose pieces all fit in the polled line (a few
 * bytes a peer): one step, no count matrix. The key carries the input and
 * output element counts, so ranks whose keys agree send and expect the
 * same piece size everywhere and the matrix check has nothing to find;
 * every input to the choice is in the key, so ranks that take this path
 * and ranks that do not always differ there and fail the first check
 * together. */
static bool tiny_even(const dist__shm *s, const shm_key *k, size_t *piece) {
  if (k->kind != DIST_OP_ALL_TO_ALL_SINGLE || s->size < 2)
    return false;
  uint64_t in = (uint64_t)k->count, n = (uint64_t)s->size, per = in / n;
  *piece = (size_t)per * dist_dtype_size((dist_dtype)k->dtype);
  /* Not empty: an uneven call of empty pieces publishes the same key (0, 0) */
  return in != 0 && in == k->scalar_bits && per * n == in &&
         *piece * (size_t)(n - 1) <= SHM_INLINE;
}

static int a2a_tiny(dist__shm *s, dist__cpu_op *op, const shm_key *k, size_t piece) {
  const dist_coll *c = op->c;
  int n = s->size, me = s->rank;
  const uint8_t *in = c->inputs[0].data;
  uint8_t *out = c->outputs[0].data;
  uint64_t g = shm_begin(s);
  uint8_t *line = s->peer[me].hdr[SHM_L(g)]->inl;
  for (int j = 0; j < n; j++)
    if (j != me)
      shm_copy(line + (size_t)shm_sub(me, j, n) * piece, in + (size_t)j * piece, piece);
  shm_publish(s, op, g, k);
  int rc = shm_step(s, op, g, true);
  s->step = g + 1;
  if (rc != DIST_OK)
    return rc;
  for (int j = 0; j < n; j++)
    if (j != me)
      shm_copy(out + (size_t)j * piece,
               s->peer[j].hdr[SHM_L(g)]->inl + (size_t)shm_sub(j, me, n) * piece, piece);
  shm_copy_own(s, out + (size_t)me * piece, in + (size_t)me * piece, piece);
  return DIST_OK;
}

int dist__shm_all_to_all(dist__shm *s, dist__cpu_op *op) {
  const dist_coll *c = op->c;
  dist_dtype dt = c->kind == DIST_OP_ALL_TO_ALL ? c->outputs[0].dtype : c->inputs[0].dtype;
  size_t es = dist_dtype_size(dt), tiny;
  shm_key k = {0};
  k.kind = (uint8_t)c->kind;
  k.dtype = (uint8_t)dt;
  /* Even all_to_all_single: every piece has numel / N elements and the
   * key (input and output counts) makes every rank agree on that, so the
   * chunking and the single-copy choice follow from it; otherwise the
   * piece sizes are known only after the first step. */
  bool even = even_single(s, c);
  if (even) {
    k.count = dist_tensor_numel(&c->inputs[0]);
    k.scalar_bits = (uint64_t)dist_tensor_numel(&c->outputs[0]);
    if (tiny_even(s, &k, &tiny))
      return a2a_tiny(s, op, &k, tiny);
  }
  a2a a = {c, es, 0, 0, false, NULL, NULL, s->scratch, s->scratch + s->size};
  size_t others = (size_t)(s->size > 1 ? s->size - 1 : 1), cap = s->slot / others / 64 * 64;
  a.qi = SHM_INLINE / others;
  size_t piece = even ? (size_t)k.count / (size_t)s->size * a.es : 0;
  a.q = even ? shm_chunk(s, piece, cap) / 64 * 64 : cap;
  uint64_t g0 = shm_begin(s);
  int p0 = (int)(g0 & 1);
  fill_counts(s, &a, p0);
  /* Single copy when the largest piece is big enough. Before the first
   * step a rank knows only its own pieces: one that has a big piece knows
   * the whole operation goes direct and stages nothing; the others stage
   * their first chunk in case it does not. */
  if (!(even ? shm_direct(s, piece) : s->cma && max_piece(s, &a, p0, false) >= s->cma_min))
    stage(s, &a, 0, g0);
  shm_publish(s, op, g0, &k);
  int rc = shm_step(s, op, g0, true);
  if (rc == DIST_OK)
    rc = dist__shm_check_counts(s, op, g0);
  if (rc != DIST_OK) {
    s->step = g0 + 1;
    return rc;
  }
  if (even ? shm_direct(s, piece) : s->cma && max_piece(s, &a, p0, true) >= s->cma_min)
    return a2a_direct(s, op, &a, g0);
  return a2a_staged(s, op, &a, g0);
}
