/* tensor.c - dtype and reduce-op metadata, tensor descriptions. */
#include <inttypes.h>
#include <stdio.h>

#include "dist_int.h"

enum dtype_class { CLASS_FLOAT, CLASS_INT, CLASS_BOOL, CLASS_COMPLEX };

static const struct {
  const char *name;
  size_t size;
  enum dtype_class cls;
} dtypes[] = {
#define DT_(e, name, size, cls) {name, size, CLASS_##cls},
    DIST_DTYPE_MAP(DT_)
#undef DT_
};

static bool dtype_ok(dist_dtype d) { return (unsigned)d < DIST_DTYPE_COUNT_; }

size_t dist_dtype_size(dist_dtype d) { return dtype_ok(d) ? dtypes[d].size : 0; }

const char *dist_dtype_name(dist_dtype d) { return dtype_ok(d) ? dtypes[d].name : "unknown"; }

/* A shape is multiplied with overflow checks: {2^32, 2^32} must not read as
 * 0 elements, nor {3037000500, 3037000500} as a negative count. */
int64_t dist_tensor_numel(const dist_tensor *t) {
  if (!t || t->ndim < 0 || t->ndim > DIST_MAX_DIMS)
    return 0;
  int64_t n = 1, bytes;
  for (int i = 0; i < t->ndim; i++) {
    if (t->shape[i] < 0)
      return -1;
    if (__builtin_mul_overflow(n, t->shape[i], &n))
      return -1;
  }
  int64_t esize = dtype_ok(t->dtype) ? (int64_t)dtypes[t->dtype].size : 1;
  if (__builtin_mul_overflow(n, esize, &bytes))
    return -1;
  return n;
}

size_t dist_tensor_nbytes(const dist_tensor *t) {
  int64_t n = dist_tensor_numel(t);
  return n > 0 ? (size_t)n * dist_dtype_size(t->dtype) : 0;
}

char *dist_tensor_describe(const dist_tensor *t, char *buf, size_t len) {
  size_t off = 0;
  buf[0] = '\0';
  if (!t)
    return dist__appendf(buf, len, &off, "(null)");
  dist__appendf(buf, len, &off, "%s[", dist_dtype_name(t->dtype));
  for (int i = 0; i < t->ndim && i < DIST_MAX_DIMS; i++)
    dist__appendf(buf, len, &off, "%s%" PRId64, i ? ", " : "", t->shape[i]);
  dist__appendf(buf, len, &off, "]");
  if (t->device.type == DIST_DEVICE_CUDA)
    dist__appendf(buf, len, &off, " cuda:%d", t->device.index);
  return buf;
}

const char *dist_redop_name(dist_redop_kind k) {
  static const char *const names[] = {"SUM", "PRODUCT", "MIN", "MAX", "BAND",
                                      "BOR", "BXOR", "AVG", "PREMUL_SUM"};
  return (unsigned)k < DIST_REDOP_COUNT_ ? names[k] : "UNKNOWN";
}

int dist_redop_check(dist_redop op, dist_dtype d) {
  if (!dtype_ok(d))
    return dist__set_last_error(DIST_E_INVAL, "unknown dtype %d", (int)d);
  if ((unsigned)op.kind >= DIST_REDOP_COUNT_)
    return dist__set_last_error(DIST_E_INVAL, "unknown reduce op %d", (int)op.kind);
  enum dtype_class c = dtypes[d].cls;
  const char *why = NULL;
  switch (op.kind) {
  case DIST_REDOP_BAND:
  case DIST_REDOP_BOR:
  case DIST_REDOP_BXOR:
    if (c != CLASS_INT && c != CLASS_BOOL)
      why = "bitwise ops need an integer or bool dtype";
    break;
  case DIST_REDOP_MIN:
  case DIST_REDOP_MAX:
    if (c == CLASS_COMPLEX)
      why = "complex numbers have no order";
    break;
  case DIST_REDOP_AVG:
  case DIST_REDOP_PREMUL_SUM:
    if (c != CLASS_FLOAT && c != CLASS_COMPLEX)
      why = "it needs a floating or complex dtype";
    break;
  default:
    break;
  }
  if (why)
    return dist__set_last_error(DIST_E_INVAL, "reduce op %s is not defined for %s: %s",
                                dist_redop_name(op.kind), dist_dtype_name(d), why);
  return DIST_OK;
}

const char *dist_op_name(dist_op_kind k) {
  static const char *const names[] = {
#define OP_(e, name) name,
      DIST_OP_MAP(OP_)
#undef OP_
  };
  return (unsigned)k < DIST_OP_COUNT_ ? names[k] : "UNKNOWN";
}

const char *dist_event_name(dist_event_kind k) {
  static const char *const names[] = {
#define EV_(e, name) name,
      DIST_EVENT_MAP(EV_)
#undef EV_
  };
  return (unsigned)k < DIST_EV_COUNT_ ? names[k] : "unknown";
}

static bool has_redop(dist_op_kind k) {
  return k == DIST_OP_ALL_REDUCE || k == DIST_OP_REDUCE || k == DIST_OP_REDUCE_SCATTER ||
         k == DIST_OP_REDUCE_SCATTER_TENSOR;
}

static bool has_root(dist_op_kind k) {
  return k == DIST_OP_SEND || k == DIST_OP_RECV || k == DIST_OP_BROADCAST ||
         k == DIST_OP_REDUCE || k == DIST_OP_GATHER || k == DIST_OP_SCATTER ||
         k == DIST_OP_BROADCAST_BYTES || k == DIST_OP_GATHER_BYTES ||
         k == DIST_OP_SCATTER_BYTES || k == DIST_OP_SEND_BYTES || k == DIST_OP_RECV_BYTES;
}

char *dist_coll_describe(const dist_coll *c, char *buf, size_t len) {
  size_t off = 0;
  char t[128];
  buf[0] = '\0';
  dist__appendf(buf, len, &off, "%s", dist_op_name(c->kind));
  const dist_tensor *first = c->n_inputs ? &c->inputs[0] : c->n_outputs ? &c->outputs[0] : NULL;
  if (first)
    dist__appendf(buf, len, &off, " %s", dist_tensor_describe(first, t, sizeof t));
  if (c->n_inputs > 1 || c->n_outputs > 1)
    dist__appendf(buf, len, &off, " x%zu", c->n_inputs > c->n_outputs ? c->n_inputs : c->n_outputs);
  if (has_redop(c->kind) && c->redop.kind == DIST_REDOP_PREMUL_SUM)
    dist__appendf(buf, len, &off, " op=PREMUL_SUM(%g)", c->redop.scalar);
  else if (has_redop(c->kind))
    dist__appendf(buf, len, &off, " op=%s", dist_redop_name(c->redop.kind));
  if (has_root(c->kind))
    dist__appendf(buf, len, &off, " %s=%d",
                  c->kind == DIST_OP_SEND || c->kind == DIST_OP_RECV ? "peer" : "root", c->root);
  if (c->n_splits && (c->in_splits || c->out_splits))
    dist__appendf(buf, len, &off, " uneven");
  if (c->kind == DIST_OP_BATCH_P2P)
    dist__appendf(buf, len, &off, " n=%zu", c->n_p2p);
  return buf;
}
