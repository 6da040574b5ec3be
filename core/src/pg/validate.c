/* validate.c - the local checks every operation passes before a backend
 * sees it: tensors well formed, list lengths and sizes that agree with the
 * group size, roots and peers in the group, dtype/reduce-op combinations,
 * split sizes that add up, devices the backend can reach. Agreement BETWEEN
 * ranks is the backends' (and the checking layer's) job. */
#include <inttypes.h>
#include <stdio.h>

#include "pg_int.h"

#define FAIL(g, ...) dist__err_set(&(g)->err, DIST_E_INVAL, __VA_ARGS__)

/* The function's name ("all_to_all_single") in buf: built only when a
 * message needs it, in the caller's buffer (FN), so the checks that pass
 * cost nothing for it and threads do not share it. */
static const char *fn_name(dist_op_kind k, char *buf, size_t len) {
  const char *n = dist_op_name(k);
  size_t i = 0;
  for (; n[i] && i + 1 < len; i++)
    buf[i] = (char)(n[i] >= 'A' && n[i] <= 'Z' ? n[i] - 'A' + 'a' : n[i]);
  buf[i] = '\0';
  return buf;
}
#define FN(c) fn_name((c)->kind, (char[48]){0}, 48)

static int check_tensor(dist_pg *g, const dist_coll *c, const dist_tensor *t,
                        const char *what) {
  if (!t)
    return FAIL(g, "%s: %s is NULL", FN(c), what);
  if ((unsigned)t->dtype >= DIST_DTYPE_COUNT_)
    return FAIL(g, "%s: %s has an unknown dtype (%d)", FN(c), what, (int)t->dtype);
  if (t->ndim < 0 || t->ndim > DIST_MAX_DIMS)
    return FAIL(g, "%s: %s has %d dimensions (0 to %d allowed)", FN(c), what, t->ndim,
                DIST_MAX_DIMS);
  for (int i = 0; i < t->ndim; i++)
    if (t->shape[i] < 0)
      return FAIL(g, "%s: %s has a negative size in dimension %d", FN(c), what, i);
  if (dist_tensor_numel(t) < 0)
    return FAIL(g, "%s: %s's element count or byte size overflows int64 (shape %s)", FN(c),
                what, dist_tensor_describe(t, (char[160]){0}, 160));
  if (!t->data && dist_tensor_numel(t) > 0)
    return FAIL(g, "%s: %s has a NULL data pointer", FN(c), what);
  bool cuda = t->device.type == DIST_DEVICE_CUDA;
  if (t->device.type != DIST_DEVICE_CPU && !cuda)
    return FAIL(g, "%s: %s has an unknown device type %d", FN(c), what, (int)t->device.type);
  const dist_pg *real = g; /* a wrapper reaches what the group it wraps reaches */
  while (real->inner)
    real = real->inner;
  if ((cuda && !(real->ops->caps & DIST_CAP_CUDA)) || (!cuda && !(real->ops->caps & DIST_CAP_CPU)))
    return dist__err_set(&g->err, DIST_E_INVAL, "%s: backend %s cannot reach %s tensors", FN(c),
                         real->backend, cuda ? "cuda" : "cpu");
  return DIST_OK;
}

static int check_list(dist_pg *g, const dist_coll *c, const dist_tensor *list, size_t n,
                      const char *what, const dist_tensor *like) {
  if ((int)n != g->info.size)
    return FAIL(g, "%s: expected %d %s (the group size), got %zu", FN(c), g->info.size, what, n);
  if (!list)
    return FAIL(g, "%s: %s is NULL", FN(c), what);
  for (size_t i = 0; i < n; i++) {
    char name[64];
    snprintf(name, sizeof name, "%s[%zu]", what, i);
    DIST_TRY(check_tensor(g, c, &list[i], name));
    if (list[i].dtype != like->dtype)
      return FAIL(g, "%s: %s is %s but the other tensor is %s", FN(c), name,
                  dist_dtype_name(list[i].dtype), dist_dtype_name(like->dtype));
    if (dist_tensor_numel(&list[i]) != dist_tensor_numel(like))
      return FAIL(g, "%s: %s has %" PRId64 " elements, expected %" PRId64, FN(c), name,
                  dist_tensor_numel(&list[i]), dist_tensor_numel(like));
  }
  return DIST_OK;
}

static int check_root(dist_pg *g, const dist_coll *c, bool any_ok) {
  if (any_ok && c->root == DIST_ANY_SOURCE)
    return DIST_OK;
  if (c->root < 0 || c->root >= g->info.size)
    return FAIL(g, "%s: rank is not in group %s", FN(c), g->name);
  /* isend/irecv to self are allowed (torch does); a blocking one would
   * wait for itself forever. */
  if ((c->kind == DIST_OP_SEND || c->kind == DIST_OP_RECV) && c->root == g->info.rank &&
      !(c->flags & DIST_COLL_ASYNC))
    return FAIL(g, "%s: the peer is this rank itself (isend and irecv may address it)", FN(c));
  return DIST_OK;
}

static int check_redop(dist_pg *g, const dist_coll *c, dist_dtype dt) {
  if (dist_redop_check(c->redop, dt) != DIST_OK)
    return FAIL(g, "%s: %s", FN(c), dist_last_errmsg());
  return DIST_OK;
}

static int same_dtype(dist_pg *g, const dist_coll *c, const dist_tensor *a,
                      const dist_tensor *b) {
  if (a->dtype != b->dtype)
    return FAIL(g, "%s: input is %s but output is %s", FN(c),
                dist_dtype_name(a->dtype), dist_dtype_name(b->dtype));
  return DIST_OK;
}

/* big is the tensor named big_name ("input", "output") that holds group
 * size times small's elements. */
static int check_scaled(dist_pg *g, const dist_coll *c, const dist_tensor *big,
                        const char *big_name, const dist_tensor *small) {
  DIST_TRY(same_dtype(g, c, c->inputs, c->outputs));
  int64_t want;
  if (__builtin_mul_overflow(dist_tensor_numel(small), (int64_t)g->info.size, &want))
    return FAIL(g, "%s: the small tensor times the group size %d overflows int64", FN(c),
                g->info.size);
  if (dist_tensor_numel(big) != want)
    return FAIL(g, "%s: the %s has %" PRId64 " elements, expected %" PRId64
                   " (group size %d x the %s's %" PRId64 ")",
                FN(c), big_name, dist_tensor_numel(big), want, g->info.size,
                big == c->inputs ? "output" : "input", dist_tensor_numel(small));
  return DIST_OK;
}

static int64_t row_size(const dist_tensor *t) {
  return t->shape[0] ? dist_tensor_numel(t) / t->shape[0] : 1;
}

static int check_splits(dist_pg *g, const dist_coll *c, const int64_t *s, const dist_tensor *t,
                        const char *what) {
  if (!s) {
    if (t->shape[0] % g->info.size)
      return FAIL(g, "%s: %s has %" PRId64 " rows, not a multiple of the group size %d", FN(c),
                  what, t->shape[0], g->info.size);
    return DIST_OK;
  }
  if ((int)c->n_splits != g->info.size)
    return FAIL(g, "%s: %zu %s split sizes for a group of %d", FN(c), c->n_splits, what,
                g->info.size);
  int64_t sum = 0;
  for (size_t i = 0; i < c->n_splits; i++) {
    if (s[i] < 0)
      return FAIL(g, "%s: %s split %zu is negative (%" PRId64 ")", FN(c), what, i, s[i]);
    if (__builtin_add_overflow(sum, s[i], &sum))
      return FAIL(g, "%s: %s split sizes overflow int64", FN(c), what);
  }
  if (sum != t->shape[0])
    return FAIL(g, "%s: %s split sizes add up to %" PRId64 " rows but the tensor has %" PRId64,
                FN(c), what, sum, t->shape[0]);
  return DIST_OK;
}

static int check_a2a_single(dist_pg *g, const dist_coll *c) {
  const dist_tensor *in = &c->inputs[0], *out = &c->outputs[0];
  DIST_TRY(same_dtype(g, c, in, out));
  if (in->ndim < 1 || out->ndim < 1)
    return FAIL(g, "all_to_all_single: tensors need at least one dimension");
  if (row_size(in) != row_size(out))
    return FAIL(g, "all_to_all_single: input rows have %" PRId64 " elements, output rows %" PRId64,
                row_size(in), row_size(out));
  DIST_TRY(check_splits(g, c, c->in_splits, in, "input"));
  DIST_TRY(check_splits(g, c, c->out_splits, out, "output"));
  if (!c->in_splits && !c->out_splits && dist_tensor_numel(in) != dist_tensor_numel(out))
    return FAIL(g, "all_to_all_single: input and output sizes differ");
  return DIST_OK;
}

static int check_batch(dist_pg *g, const dist_coll *c) {
  if (!c->n_p2p || !c->p2p)
    return FAIL(g, "batch_isend_irecv: no operations");
  for (size_t i = 0; i < c->n_p2p; i++) {
    const dist_coll_p2p *p = &c->p2p[i];
    DIST_TRY(check_tensor(g, c, &p->tensor, p->is_send ? "send tensor" : "recv tensor"));
    if (p->peer < 0 || p->peer >= g->info.size)
      return FAIL(g, "batch_isend_irecv: op %zu names a peer outside group %s", i, g->name);
  }
  return DIST_OK;
}

static int check_rooted_list(dist_pg *g, const dist_coll *c) {
  bool gather = c->kind == DIST_OP_GATHER;
  const dist_tensor *list = gather ? c->outputs : c->inputs;
  size_t n = gather ? c->n_outputs : c->n_inputs;
  const dist_tensor *one = gather ? c->inputs : c->outputs;
  const char *what = gather ? "gather_list" : "scatter_list";
  DIST_TRY(check_tensor(g, c, one, gather ? "input" : "output"));
  DIST_TRY(check_root(g, c, false));
  if (c->root == g->info.rank)
    return check_list(g, c, list, n, what, one);
  if (n)
    return FAIL(g, "%s: %s must be empty on ranks other than the %s", FN(c), what,
                gather ? "destination" : "source");
  return DIST_OK;
}

static int validate_kind(dist_pg *g, const dist_coll *c) {
  switch (c->kind) {
  case DIST_OP_SEND:
  case DIST_OP_RECV:
    DIST_TRY(check_tensor(g, c, c->kind == DIST_OP_SEND ? c->inputs : c->outputs, "tensor"));
    return check_root(g, c, c->kind == DIST_OP_RECV);
  case DIST_OP_BROADCAST:
    DIST_TRY(check_tensor(g, c, c->inputs, "tensor"));
    return check_root(g, c, false);
  case DIST_OP_ALL_REDUCE:
  case DIST_OP_REDUCE:
    DIST_TRY(check_tensor(g, c, c->inputs, "tensor"));
    DIST_TRY(check_redop(g, c, c->inputs[0].dtype));
    return c->kind == DIST_OP_REDUCE ? check_root(g, c, false) : DIST_OK;
  case DIST_OP_ALL_GATHER:
    DIST_TRY(check_tensor(g, c, c->inputs, "input"));
    return check_list(g, c, c->outputs, c->n_outputs, "output tensors", c->inputs);
  case DIST_OP_ALL_GATHER_INTO_TENSOR:
    DIST_TRY(check_tensor(g, c, c->inputs, "input"));
    DIST_TRY(check_tensor(g, c, c->outputs, "output"));
    return check_scaled(g, c, c->outputs, "output", c->inputs);
  case DIST_OP_GATHER:
  case DIST_OP_SCATTER:
    return check_rooted_list(g, c);
  case DIST_OP_REDUCE_SCATTER:
    DIST_TRY(check_tensor(g, c, c->outputs, "output"));
    DIST_TRY(check_redop(g, c, c->outputs[0].dtype));
    return check_list(g, c, c->inputs, c->n_inputs, "input tensors", c->outputs);
  case DIST_OP_REDUCE_SCATTER_TENSOR:
    DIST_TRY(check_tensor(g, c, c->inputs, "input"));
    DIST_TRY(check_tensor(g, c, c->outputs, "output"));
    DIST_TRY(check_redop(g, c, c->outputs[0].dtype));
    return check_scaled(g, c, c->inputs, "input", c->outputs);
  case DIST_OP_ALL_TO_ALL:
    if ((int)c->n_inputs != g->info.size || (int)c->n_outputs != g->info.size)
      return FAIL(g, "all_to_all: expected %d input and output tensors (the group size), "
                     "got %zu and %zu", g->info.size, c->n_inputs, c->n_outputs);
    for (size_t i = 0; i < c->n_inputs; i++) {
      DIST_TRY(check_tensor(g, c, &c->inputs[i], "input tensor"));
      DIST_TRY(check_tensor(g, c, &c->outputs[i], "output tensor"));
      DIST_TRY(same_dtype(g, c, &c->inputs[i], &c->outputs[0]));
      DIST_TRY(same_dtype(g, c, &c->inputs[0], &c->outputs[i]));
    }
    return DIST_OK;
  case DIST_OP_ALL_TO_ALL_SINGLE:
    DIST_TRY(check_tensor(g, c, c->inputs, "input"));
    DIST_TRY(check_tensor(g, c, c->outputs, "output"));
    return check_a2a_single(g, c);
  case DIST_OP_BARRIER:
    return DIST_OK;
  case DIST_OP_BATCH_P2P:
    return check_batch(g, c);
  default:
    return FAIL(g, "unknown operation %d", (int)c->kind);
  }
}

int dist__validate(dist_pg *g, const dist_coll *c) {
  DIST_TRY(validate_kind(g, c));
  /* A group that reaches both devices (a device map, or a wrapper over
   * one) runs each operation on one device's backend. */
  int dev;
  const dist_pg *real = g;
  while (real->inner)
    real = real->inner;
  if ((real->ops->caps & (DIST_CAP_CPU | DIST_CAP_CUDA)) == (DIST_CAP_CPU | DIST_CAP_CUDA))
    return dist__coll_device(g, c, &dev);
  return DIST_OK;
}
