/* mpi_ops.c - each operation of the vtable as non-blocking MPI calls.
 *
 * An operation runs in phases; a phase posts requests, and when they are
 * all complete dist__mpi_op_advance unpacks, reduces, or posts the next
 * phase. Counts are elements of the tensor's dtype (dist__mpi_dtype), so a
 * call moves up to INT_MAX elements; more is DIST_E_NOTSUP.
 *
 *   SEND / RECV / BATCH_P2P  MPI_Issend / MPI_Irecv (a send completes when
 *                            matched, as dist_send promises)
 *   BROADCAST                MPI_Ibcast
 *   ALL_REDUCE               MPI_Iallreduce when MPI's own op is exact
 *                            (mpi_reduce.c); else MPI_Ialltoallv of chunks,
 *                            the rank-ordered reduction of this rank's chunk,
 *                            MPI_Iallgatherv of the chunks
 *   REDUCE                   MPI_Ireduce; else MPI_Igather and the ordered
 *                            reduction on the root
 *   REDUCE_SCATTER(_TENSOR)  MPI_Ireduce_scatter_block; else MPI_Ialltoall
 *                            and the ordered reduction
 *   ALL_GATHER(_INTO_TENSOR) MPI_Iallgather     GATHER   MPI_Igather
 *   SCATTER                  MPI_Iscatter       BARRIER  MPI_Ibarrier
 *   ALL_TO_ALL(_SINGLE)      MPI_Ialltoallv
 * Tensor lists are packed into (or unpacked from) one scratch buffer. */
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>

#include "reduce/reduce.h"
#include "mpi_int.h"

typedef struct ctx {
  const dist__mpi_comm *g;
  dist__mpi_op *op;
  const dist_coll *c;
  MPI_Datatype type;
  size_t esz;
} ctx;

static int fail(dist__mpi_op *op, int rc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int fail(dist__mpi_op *op, int rc, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(op->msg, sizeof op->msg, fmt, ap);
  va_end(ap);
  op->rc = rc;
  return rc;
}

static int mpi_failed(ctx *x, int e, const char *call) {
  char s[256], d[160];
  return fail(x->op, DIST_E_BACKEND, "%s on group %s: %s failed: %s",
              dist_coll_describe(x->c, d, sizeof d), x->g->name, call,
              dist__mpi_errstr(e, s, sizeof s));
}

/* n elements as an MPI count. */
static int count_of(ctx *x, int64_t n, int *out) {
  if (n < 0 || n > INT_MAX)
    return fail(x->op, DIST_E_NOTSUP,
                "group %s: %lld elements in one MPI call (the mpi backend moves at most %d)",
                x->g->name, (long long)n, INT_MAX);
  *out = (int)n;
  return DIST_OK;
}

static int64_t numel(const dist_tensor *t) { return dist_tensor_numel(t); }

static void *scratch(ctx *x, size_t len) {
  dist__mpi_op *op = x->op;
  dist__free(op->tmp);
  op->tmp = dist__malloc(len ? len : 1);
  op->tmp_len = len;
  if (!op->tmp)
    fail(op, DIST_E_NOMEM, "group %s: out of memory (%zu bytes of scratch)", x->g->name, len);
  return op->tmp;
}

static int *counts(ctx *x) {
  if (!x->op->counts)
    x->op->counts = dist__calloc((size_t)x->g->size * 4, sizeof(int));
  if (!x->op->counts)
    fail(x->op, DIST_E_NOMEM, "group %s: out of memory", x->g->name);
  return x->op->counts;
}

/* Requests for k calls of this phase. */
static MPI_Request *reqs(ctx *x, int k) {
  dist__mpi_op *op = x->op;
  if (op->reqs && op->reqs != op->small)
    dist__free(op->reqs);
  op->reqs = k <= DIST_MPI_MAX_PHASE_REQS ? op->small : dist__malloc(sizeof(MPI_Request) * (size_t)k);
  op->n_reqs = k;
  if (!op->reqs) {
    op->n_reqs = 0;
    fail(op, DIST_E_NOMEM, "group %s: out of memory", x->g->name);
  }
  for (int i = 0; op->reqs && i < k; i++)
    op->reqs[i] = MPI_REQUEST_NULL;
  return op->reqs;
}

#define CALL(x, name, ...)                       \
  do {                                           \
    int e_ = name(__VA_ARGS__);                  \
    if (e_ != MPI_SUCCESS)                       \
      return mpi_failed((x), e_, #name);         \
  } while (0)

/* A collective call: blocking when op->blocking (the synchronous fast
 * path, see backend_mpi.c; its requests stay MPI_REQUEST_NULL), else the
 * non-blocking form with request r. */
#define COLL(x, r, bname, nbname, ...)                                      \
  do {                                                                      \
    int e_ = (x)->op->blocking ? bname(__VA_ARGS__) : nbname(__VA_ARGS__, r); \
    if (e_ != MPI_SUCCESS)                                                  \
      return mpi_failed((x), e_, (x)->op->blocking ? #bname : #nbname);     \
  } while (0)

/* --- point to point ------------------------------------------------------ */

static int check_tag(ctx *x, int tag) {
  static int tag_ub;
  if (!tag_ub) {
    int *v = NULL, flag = 0;
    MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &v, &flag);
    tag_ub = flag && v ? *v : 32767;
  }
  if (tag < 0 || tag > tag_ub)
    return fail(x->op, DIST_E_NOTSUP, "group %s: tag %d is outside MPI's range [0, %d]",
                x->g->name, tag, tag_ub);
  return DIST_OK;
}

static int post_p2p_one(ctx *x, bool send, const dist_tensor *t, int peer, int tag,
                        MPI_Request *r) {
  int n = 0;
  DIST_TRY(count_of(x, numel(t), &n));
  DIST_TRY(check_tag(x, tag));
  MPI_Datatype ty = dist__mpi_dtype(t->dtype);
  if (send)
    CALL(x, MPI_Issend, t->data, n, ty, peer, tag, x->g->comm, r);
  else
    CALL(x, MPI_Irecv, t->data, n, ty, peer == DIST_ANY_SOURCE ? MPI_ANY_SOURCE : peer, tag,
         x->g->comm, r);
  return DIST_OK;
}

static int post_p2p(ctx *x) {
  const dist_coll *c = x->c;
  if (c->kind == DIST_OP_SEND || c->kind == DIST_OP_RECV) {
    MPI_Request *r = reqs(x, 1);
    if (!r)
      return x->op->rc;
    bool send = c->kind == DIST_OP_SEND;
    return post_p2p_one(x, send, send ? &c->inputs[0] : &c->outputs[0], c->root, c->tag, r);
  }
  MPI_Request *r = reqs(x, (int)c->n_p2p);
  if (!r)
    return x->op->rc;
  for (size_t i = 0; i < c->n_p2p; i++)
    DIST_TRY(post_p2p_one(x, c->p2p[i].is_send, &c->p2p[i].tensor, c->p2p[i].peer,
                          c->p2p[i].tag, &r[i]));
  return DIST_OK;
}

/* A receive that held fewer elements than its tensor: the sender sent less. */
static int check_recvs(ctx *x, MPI_Status *st) {
  const dist_coll *c = x->c;
  for (int i = 0; i < x->op->n_reqs; i++) {
    const dist_tensor *t = c->kind == DIST_OP_RECV ? &c->outputs[0]
                           : c->kind == DIST_OP_BATCH_P2P && !c->p2p[i].is_send
                               ? &c->p2p[i].tensor
                               : NULL;
    if (!t)
      continue;
    int got = 0;
    MPI_Get_count(&st[i], dist__mpi_dtype(t->dtype), &got);
    if (c->kind == DIST_OP_RECV)
      x->op->src = st[i].MPI_SOURCE;
    if (got != numel(t)) {
      char d[160];
      return fail(x->op, DIST_E_DESYNC,
                  "%s on group %s: rank %d sent %d elements, this receive expects %lld",
                  dist_coll_describe(c, d, sizeof d), x->g->name, st[i].MPI_SOURCE, got,
                  (long long)numel(t));
    }
  }
  return DIST_OK;
}

/* --- reductions ---------------------------------------------------------- */

/* Chunk k of n elements split over size ranks: [off, off + len). */
static void chunk(int64_t n, int size, int k, int64_t *off, int64_t *len) {
  int64_t base = n / size, extra = n % size;
  *off = k * base + (k < extra ? k : extra);
  *len = base + (k < extra ? 1 : 0);
}

static int reduce_rows(ctx *x, void *dst, const void *rows, int64_t n) {
  const void **v = dist__malloc(sizeof(void *) * (size_t)x->g->size);
  if (!v)
    return fail(x->op, DIST_E_NOMEM, "group %s: out of memory", x->g->name);
  for (int k = 0; k < x->g->size; k++)
    v[k] = (const char *)rows + (size_t)k * (size_t)n * x->esz;
  int rc = dist__reduce_multi(x->c->inputs[0].dtype, x->c->redop, dst, v, x->g->size, (size_t)n,
                              x->g->size);
  dist__free(v);
  if (rc != DIST_OK)
    return fail(x->op, rc, "group %s: %s", x->g->name, dist_last_errmsg());
  return DIST_OK;
}

static int post_all_reduce(ctx *x) {
  const dist_coll *c = x->c;
  void *buf = c->outputs[0].data;
  int n = 0, size = x->g->size;
  DIST_TRY(count_of(x, numel(&c->outputs[0]), &n));
  MPI_Op mop = dist__mpi_native_op(c->outputs[0].dtype, c->redop, size);
  MPI_Request *r = reqs(x, 1);
  if (!r)
    return x->op->rc;
  if (mop != MPI_OP_NULL) {
    x->op->last_posted = true;
    COLL(x, r, MPI_Allreduce, MPI_Iallreduce, MPI_IN_PLACE, buf, n, x->type, mop, x->g->comm);
    return DIST_OK;
  }
  int *cnt = counts(x);
  int64_t off, len, my_off, my_len;
  chunk(n, size, x->g->rank, &my_off, &my_len);
  if (!cnt || !scratch(x, (size_t)my_len * (size_t)size * x->esz))
    return x->op->rc;
  for (int k = 0; k < size; k++) {
    chunk(n, size, k, &off, &len);
    cnt[k] = (int)len;                       /* send counts */
    cnt[size + k] = (int)off;                /* send displacements */
    cnt[2 * size + k] = (int)my_len;         /* receive counts */
    cnt[3 * size + k] = (int)(k * my_len);   /* receive displacements */
  }
  COLL(x, r, MPI_Alltoallv, MPI_Ialltoallv, buf, cnt, cnt + size, x->type, x->op->tmp, cnt + 2 * size,
       cnt + 3 * size, x->type, x->g->comm);
  return DIST_OK;
}

static int advance_all_reduce(ctx *x) {
  const dist_coll *c = x->c;
  char *buf = c->outputs[0].data;
  int size = x->g->size;
  int64_t my_off, my_len;
  chunk(numel(&c->outputs[0]), size, x->g->rank, &my_off, &my_len);
  DIST_TRY(reduce_rows(x, buf + (size_t)my_off * x->esz, x->op->tmp, my_len));
  int *cnt = x->op->counts;
  MPI_Request *r = reqs(x, 1);
  if (!r)
    return x->op->rc;
  x->op->last_posted = true;
  /* receive counts/displacements of the gather are the chunks: the send
   * counts and displacements of phase 1 */
  COLL(x, r, MPI_Allgatherv, MPI_Iallgatherv, MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buf, cnt, cnt + size, x->type,
       x->g->comm);
  return DIST_OK;
}

static int post_reduce(ctx *x) {
  const dist_coll *c = x->c;
  void *buf = c->outputs[0].data;
  int n = 0, size = x->g->size;
  bool root = x->g->rank == c->root;
  DIST_TRY(count_of(x, numel(&c->outputs[0]), &n));
  MPI_Op mop = dist__mpi_native_op(c->outputs[0].dtype, c->redop, size);
  MPI_Request *r = reqs(x, 1);
  if (!r)
    return x->op->rc;
  x->op->last_posted = true;
  if (mop != MPI_OP_NULL) {
    COLL(x, r, MPI_Reduce, MPI_Ireduce, root ? MPI_IN_PLACE : buf, buf, n, x->type, mop, c->root,
         x->g->comm);
    return DIST_OK;
  }
  if (root && !scratch(x, (size_t)n * (size_t)size * x->esz))
    return x->op->rc;
  COLL(x, r, MPI_Gather, MPI_Igather, buf, n, x->type, root ? x->op->tmp : NULL, n, x->type,
       c->root, x->g->comm);
  return DIST_OK;
}

/* REDUCE_SCATTER: this rank's send buffer of size x n elements (the list
 * form is packed first). */
static const void *rs_input(ctx *x, int64_t n, size_t extra) {
  const dist_coll *c = x->c;
  size_t blk = (size_t)n * x->esz;
  if (c->kind == DIST_OP_REDUCE_SCATTER_TENSOR) {
    if (extra && !scratch(x, extra))
      return NULL;
    return c->inputs[0].data;
  }
  char *p = scratch(x, blk * (size_t)x->g->size + extra);
  if (!p)
    return NULL;
  for (int k = 0; k < x->g->size; k++)
    memcpy(p + (size_t)k * blk, c->inputs[k].data, blk);
  return p;
}

static int post_reduce_scatter(ctx *x) {
  const dist_coll *c = x->c;
  int n = 0, size = x->g->size;
  DIST_TRY(count_of(x, numel(&c->outputs[0]), &n));
  MPI_Op mop = dist__mpi_native_op(c->outputs[0].dtype, c->redop, size);
  size_t rows = mop == MPI_OP_NULL ? (size_t)n * (size_t)size * x->esz : 0;
  const void *in = rs_input(x, n, rows);
  MPI_Request *r = in ? reqs(x, 1) : NULL;
  if (!r)
    return x->op->rc;
  x->op->last_posted = true;
  if (mop != MPI_OP_NULL) {
    COLL(x, r, MPI_Reduce_scatter_block, MPI_Ireduce_scatter_block, in, c->outputs[0].data, n, x->type, mop, x->g->comm);
    return DIST_OK;
  }
  char *dst = (char *)x->op->tmp + x->op->tmp_len - rows;
  COLL(x, r, MPI_Alltoall, MPI_Ialltoall, in, n, x->type, dst, n, x->type, x->g->comm);
  return DIST_OK;
}

/* --- data movement ------------------------------------------------------- */

static int post_gathers(ctx *x) {
  const dist_coll *c = x->c;
  int n = 0, size = x->g->size;
  DIST_TRY(count_of(x, numel(&c->inputs[0]), &n));
  MPI_Request *r = reqs(x, 1);
  if (!r)
    return x->op->rc;
  x->op->last_posted = true;
  size_t all = (size_t)n * (size_t)size * x->esz;
  switch (c->kind) {
  case DIST_OP_ALL_GATHER_INTO_TENSOR:
    COLL(x, r, MPI_Allgather, MPI_Iallgather, c->inputs[0].data, n, x->type, c->outputs[0].data, n, x->type,
         x->g->comm);
    return DIST_OK;
  case DIST_OP_ALL_GATHER:
    if (!scratch(x, all))
      return x->op->rc;
    COLL(x, r, MPI_Allgather, MPI_Iallgather, c->inputs[0].data, n, x->type, x->op->tmp, n,
         x->type, x->g->comm);
    return DIST_OK;
  default: { /* GATHER */
    bool root = x->g->rank == c->root;
    if (root && !scratch(x, all))
      return x->op->rc;
    COLL(x, r, MPI_Gather, MPI_Igather, c->inputs[0].data, n, x->type,
         root ? x->op->tmp : NULL, n, x->type, c->root, x->g->comm);
    return DIST_OK;
  }
  }
}

static int post_scatter(ctx *x) {
  const dist_coll *c = x->c;
  int n = 0, size = x->g->size;
  bool root = x->g->rank == c->root;
  DIST_TRY(count_of(x, numel(&c->outputs[0]), &n));
  size_t blk = (size_t)n * x->esz;
  if (root) {
    char *p = scratch(x, blk * (size_t)size);
    if (!p)
      return x->op->rc;
    for (int k = 0; k < size; k++)
      memcpy(p + (size_t)k * blk, c->inputs[k].data, blk);
  }
  MPI_Request *r = reqs(x, 1);
  if (!r)
    return x->op->rc;
  x->op->last_posted = true;
  COLL(x, r, MPI_Scatter, MPI_Iscatter, root ? x->op->tmp : NULL, n, x->type, c->outputs[0].data, n, x->type,
       c->root, x->g->comm);
  return DIST_OK;
}

/* Counts and displacements (elements) of one side of an all_to_all. */
static int a2a_side(ctx *x, const dist_tensor *t, size_t nt, const int64_t *splits, int *cnt,
                    int *dsp) {
  int size = x->g->size;
  int64_t total = 0;
  for (int k = 0; k < size; k++) {
    int64_t e;
    if (nt > 1) {
      e = numel(&t[k]);
    } else {
      int64_t rows = t->ndim ? t->shape[0] : 1;
      int64_t row = rows ? numel(t) / rows : 0;
      e = (splits ? splits[k] : rows / size) * row;
    }
    if (total + e > INT_MAX || e > INT_MAX)
      return count_of(x, total + e, &cnt[k]);
    cnt[k] = (int)e;
    dsp[k] = (int)total;
    total += e;
  }
  return DIST_OK;
}

static int post_all_to_all(ctx *x) {
  const dist_coll *c = x->c;
  int size = x->g->size;
  bool list = c->kind == DIST_OP_ALL_TO_ALL;
  int *cnt = counts(x);
  if (!cnt)
    return x->op->rc;
  DIST_TRY(a2a_side(x, c->inputs, c->n_inputs, c->in_splits, cnt, cnt + size));
  DIST_TRY(a2a_side(x, c->outputs, c->n_outputs, c->out_splits, cnt + 2 * size, cnt + 3 * size));
  const void *in = c->inputs[0].data;
  void *out = c->outputs[0].data;
  if (list) {
    size_t ib = ((size_t)cnt[2 * size - 1] + (size_t)cnt[size - 1]) * x->esz;
    size_t ob = ((size_t)cnt[4 * size - 1] + (size_t)cnt[3 * size - 1]) * x->esz;
    char *p = scratch(x, ib + ob);
    if (!p)
      return x->op->rc;
    for (int k = 0; k < size; k++)
      memcpy(p + (size_t)cnt[size + k] * x->esz, c->inputs[k].data, (size_t)cnt[k] * x->esz);
    in = p;
    out = p + ib;
  }
  MPI_Request *r = reqs(x, 1);
  if (!r)
    return x->op->rc;
  x->op->last_posted = true;
  COLL(x, r, MPI_Alltoallv, MPI_Ialltoallv, in, cnt, cnt + size, x->type, out, cnt + 2 * size, cnt + 3 * size,
       x->type, x->g->comm);
  return DIST_OK;
}

/* Copies block k of the scratch (n elements each from off) to outputs[k]. */
static void unpack(ctx *x, const char *from, const int *dsp, int64_t n) {
  const dist_coll *c = x->c;
  for (size_t k = 0; k < c->n_outputs; k++) {
    size_t off = dsp ? (size_t)dsp[k] : k * (size_t)n;
    int64_t e = dsp ? numel(&c->outputs[k]) : n;
    memcpy(c->outputs[k].data, from + off * x->esz, (size_t)e * x->esz);
  }
}

/* --- dispatch ------------------------------------------------------------ */

static void ctx_of(ctx *x, const dist__mpi_comm *g, dist__mpi_op *op) {
  x->g = g;
  x->op = op;
  x->c = op->c;
  const dist_tensor *t = op->c->n_inputs ? &op->c->inputs[0]
                         : op->c->n_outputs ? &op->c->outputs[0]
                         : op->c->n_p2p ? &op->c->p2p[0].tensor
                                        : NULL;
  x->type = t ? dist__mpi_dtype(t->dtype) : MPI_BYTE;
  x->esz = t ? dist_dtype_size(t->dtype) : 1;
}

int dist__mpi_op_post(const dist__mpi_comm *g, dist__mpi_op *op) {
  ctx x;
  ctx_of(&x, g, op);
  op->phase = 1;
  switch (op->c->kind) {
  case DIST_OP_SEND:
  case DIST_OP_RECV:
  case DIST_OP_BATCH_P2P:
    op->last_posted = true;
    return post_p2p(&x);
  case DIST_OP_BROADCAST: {
    int n = 0;
    DIST_TRY(count_of(&x, numel(&op->c->outputs[0]), &n));
    MPI_Request *r = reqs(&x, 1);
    if (!r)
      return op->rc;
    op->last_posted = true;
    COLL(&x, r, MPI_Bcast, MPI_Ibcast, op->c->outputs[0].data, n, x.type, op->c->root, g->comm);
    return DIST_OK;
  }
  case DIST_OP_ALL_REDUCE: return post_all_reduce(&x);
  case DIST_OP_REDUCE: return post_reduce(&x);
  case DIST_OP_REDUCE_SCATTER:
  case DIST_OP_REDUCE_SCATTER_TENSOR: return post_reduce_scatter(&x);
  case DIST_OP_ALL_GATHER:
  case DIST_OP_ALL_GATHER_INTO_TENSOR:
  case DIST_OP_GATHER: return post_gathers(&x);
  case DIST_OP_SCATTER: return post_scatter(&x);
  case DIST_OP_ALL_TO_ALL:
  case DIST_OP_ALL_TO_ALL_SINGLE: return post_all_to_all(&x);
  case DIST_OP_BARRIER: {
    MPI_Request *r = reqs(&x, 1);
    if (!r)
      return op->rc;
    op->last_posted = true;
    COLL(&x, r, MPI_Barrier, MPI_Ibarrier, g->comm);
    return DIST_OK;
  }
  default:
    return fail(op, DIST_E_NOTSUP, "group %s: the mpi backend has no %s", g->name,
                dist_op_name(op->c->kind));
  }
}

int dist__mpi_op_advance(const dist__mpi_comm *g, dist__mpi_op *op, MPI_Status *st) {
  ctx x;
  ctx_of(&x, g, op);
  const dist_coll *c = op->c;
  int rc = DIST_OK;
  if (op->phase == 1 && c->kind == DIST_OP_ALL_REDUCE && !op->last_posted) {
    op->phase = 2;
    return advance_all_reduce(&x);
  }
  switch (c->kind) {
  case DIST_OP_RECV:
  case DIST_OP_BATCH_P2P:
    rc = check_recvs(&x, st);
    break;
  case DIST_OP_REDUCE:
    if (g->rank == c->root && op->tmp)
      rc = reduce_rows(&x, c->outputs[0].data, op->tmp, numel(&c->outputs[0]));
    break;
  case DIST_OP_REDUCE_SCATTER:
  case DIST_OP_REDUCE_SCATTER_TENSOR:
    if (dist__mpi_native_op(c->outputs[0].dtype, c->redop, g->size) == MPI_OP_NULL) {
      size_t rows = (size_t)numel(&c->outputs[0]) * (size_t)g->size * x.esz;
      rc = reduce_rows(&x, c->outputs[0].data, (char *)op->tmp + op->tmp_len - rows,
                       numel(&c->outputs[0]));
    }
    break;
  case DIST_OP_ALL_GATHER:
    unpack(&x, op->tmp, NULL, numel(&c->inputs[0]));
    break;
  case DIST_OP_GATHER:
    if (g->rank == c->root)
      unpack(&x, op->tmp, NULL, numel(&c->inputs[0]));
    break;
  case DIST_OP_ALL_TO_ALL: {
    size_t ib = ((size_t)op->counts[2 * g->size - 1] + (size_t)op->counts[g->size - 1]) * x.esz;
    unpack(&x, (char *)op->tmp + ib, op->counts + 3 * g->size, 0);
    break;
  }
  default:
    break;
  }
  op->done = true;
  return rc;
}

void dist__mpi_op_release(dist__mpi_op *op) {
  if (op->reqs && op->reqs != op->small)
    dist__free(op->reqs);
  op->reqs = NULL;
  dist__free(op->tmp);
  dist__free(op->counts);
  op->tmp = NULL;
  op->counts = NULL;
}
