/* nan_check.c - DIST_NAN_CHECK=1: floating-point inputs of collectives
 * (and of sends) are checked for NaN and Inf before they run, at every
 * debug level, as torch's TORCH_NCCL_NAN_CHECK does.
 *
 * A bad input fails the call before it starts (no sequence number is
 * taken, no buffer is touched) with DIST_E_INVAL, since the input is what
 * is wrong (torch raises an error there too), and a message naming the
 * rank, the operation with the sequence number it would have had, the
 * tensor and the first bad index. The message is logged at ERROR and
 * posted as the job's cause, so distrun prints it last. Off (the default),
 * the cost is the one branch in pg.c on a flag read at init.
 *
 * The scan looks at exponent bits only: an element is NaN or Inf when its
 * exponent is all ones, in every IEEE format we carry (float16, bfloat16,
 * float32, float64, and both halves of complex64/complex128). It runs in
 * blocks that the compiler vectorises, and locates the first bad element
 * only within a block that has one. Tensors not in host memory are not
 * read (a CUDA check belongs to its backend). */
#include <inttypes.h>
#include <stdio.h>
#include <unistd.h>

#include "pg_int.h"

_Atomic bool dist__nan_check_on;

void dist__nan_check_init(void) {
  const char *v = dist__getenv("DIST_NAN_CHECK");
  bool on = false;
  if (v && (!strcmp(v, "1") || !strcmp(v, "0")))
    on = v[0] == '1';
  else if (v)
    DIST_LOG(WARNING, CORE, "DIST_NAN_CHECK='%s' is not 0 or 1; using 0 (no NaN check)", v);
  atomic_store_explicit(&dist__nan_check_on, on, memory_order_relaxed);
}

#define BLOCK 256

/* Index of the first element of n whose bits & mask == mask, or -1. */
#define SCAN(T)                                                            \
  static int64_t scan_##T(const T *p, int64_t n, T mask) {                 \
    for (int64_t b = 0; b < n; b += BLOCK) {                               \
      int64_t e = n - b < BLOCK ? n - b : BLOCK;                           \
      int bad = 0;                                                         \
      for (int64_t i = 0; i < e; i++)                                      \
        bad |= (p[b + i] & mask) == mask;                                  \
      if (!bad)                                                            \
        continue;                                                          \
      for (int64_t i = 0; i < e; i++)                                      \
        if ((p[b + i] & mask) == mask)                                     \
          return b + i;                                                    \
    }                                                                      \
    return -1;                                                             \
  }
SCAN(uint16_t)
SCAN(uint32_t)
SCAN(uint64_t)

/* The first bad element of t (complex: the element holding a bad half),
 * or -1; *nan tells NaN (a mantissa bit set) from Inf. */
static int64_t first_bad(const dist_tensor *t, bool *nan) {
  int64_t n = dist_tensor_numel(t), i = -1;
  const void *d = t->data;
  switch (t->dtype) {
  case DIST_FLOAT16:
    i = scan_uint16_t(d, n, 0x7c00);
    *nan = i >= 0 && (((const uint16_t *)d)[i] & 0x03ff);
    return i;
  case DIST_BFLOAT16:
    i = scan_uint16_t(d, n, 0x7f80);
    *nan = i >= 0 && (((const uint16_t *)d)[i] & 0x007f);
    return i;
  case DIST_FLOAT32:
  case DIST_COMPLEX64:
    i = scan_uint32_t(d, t->dtype == DIST_COMPLEX64 ? 2 * n : n, 0x7f800000u);
    *nan = i >= 0 && (((const uint32_t *)d)[i] & 0x007fffffu);
    return i < 0 || t->dtype == DIST_FLOAT32 ? i : i / 2;
  case DIST_FLOAT64:
  case DIST_COMPLEX128:
    i = scan_uint64_t(d, t->dtype == DIST_COMPLEX128 ? 2 * n : n, 0x7ff0000000000000ull);
    *nan = i >= 0 && (((const uint64_t *)d)[i] & 0x000fffffffffffffull);
    return i < 0 || t->dtype == DIST_FLOAT64 ? i : i / 2;
  default:
    return -1;
  }
}

static int report(dist_pg *g, const dist_coll *c, const char *which, size_t k,
                  const dist_tensor *t, int64_t at, bool nan) {
  char desc[64], shape[96];
  size_t off = 0;
  for (int d = 0; d < t->ndim; d++)
    dist__appendf(shape, sizeof shape, &off, "%s%" PRId64, d ? "," : "", t->shape[d]);
  if (off == 0)
    shape[0] = '\0';
  snprintf(desc, sizeof desc, "%s %zu", which, k);
  char gname[200];
  if (g->info.group_id >= 0)
    snprintf(gname, sizeof gname, "group %d (%s)", g->info.group_id, g->desc[0] ? g->desc : g->name);
  else
    snprintf(gname, sizeof gname, "group %s", g->name);
  dist__err_set(&g->err, DIST_E_INVAL,
                "NaN check (DIST_NAN_CHECK=1): rank %d (host %s, pid %d): %s #%" PRIu64
                " of %s: %s %s[%s] holds %s at index %" PRId64 "; the operation did not run",
                g->info.global_rank, dist__hostname(), (int)getpid(), dist_op_name(c->kind),
                g->seq + 1, gname, desc, dist_dtype_name(t->dtype), shape,
                nan ? "NaN" : "Inf", at);
  DIST_LOG(ERROR, PG, "%s", g->err.msg);
  int me = g->info.global_rank;
  dist_cause_info ci = dist_cause_info_none();
  ci.culprits = &me;
  ci.n_culprits = 1;
  ci.group_id = g->info.group_id;
  ci.group_name = g->desc[0] ? g->desc : g->name;
  ci.op = (int)c->kind;
  ci.seq = g->seq + 1;
  ci.field = nan ? "NaN" : "Inf";
  dist_post_cause_info(DIST_E_INVAL, &ci, g->err.msg);
  return DIST_E_INVAL;
}

static int check_one(dist_pg *g, const dist_coll *c, const char *which, size_t k,
                     const dist_tensor *t) {
  if (t->device.type != DIST_DEVICE_CPU || !t->data)
    return DIST_OK;
  bool nan = false;
  int64_t at = first_bad(t, &nan);
  return at < 0 ? DIST_OK : report(g, c, which, k, t, at, nan);
}

int dist__nan_check_coll(dist_pg *g, const dist_coll *c) {
  switch (c->kind) {
  case DIST_OP_RECV:
  case DIST_OP_BARRIER:
    return DIST_OK;
  case DIST_OP_BROADCAST:
    if (c->root != g->info.rank)
      return DIST_OK; /* a receiver's buffer is an output */
    break;
  case DIST_OP_BATCH_P2P:
    for (size_t i = 0; i < c->n_p2p; i++)
      if (c->p2p[i].is_send)
        DIST_TRY(check_one(g, c, "send", i, &c->p2p[i].tensor));
    return DIST_OK;
  default:
    break;
  }
  for (size_t i = 0; i < c->n_inputs; i++)
    DIST_TRY(check_one(g, c, "input", i, &c->inputs[i]));
  return DIST_OK;
}
