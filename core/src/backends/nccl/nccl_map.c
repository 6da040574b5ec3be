/* nccl_map.c - dtypes and reduce ops as NCCL sees them.
 *
 * Data movement carries any dtype: NCCL's own type when it has one, complex
 * as pairs of its real type, the rest (int16, bool) as bytes. Reductions
 * need NCCL's type and op:
 *   SUM PRODUCT MIN MAX  ncclSum ncclProd ncclMin ncclMax
 *   AVG                  ncclAvg
 *   PREMUL_SUM(s)        ncclRedOpCreatePreMulSum with s in the dtype
 *                        (host immediate), destroyed after the call
 *   complex              SUM, AVG, PREMUL_SUM over the real pairs
 *   bool                 SUM/MAX/BOR as ncclMax, PRODUCT/MIN/BAND as ncclMin
 *                        over uint8 (inputs are 0 or 1)
 * and NCCL has no int16 reduction, no bitwise op and no complex product:
 * those pairs are DIST_E_NOTSUP with a message. */
#include <stdio.h>

#include "reduce/reduce.h"
#include "nccl_map.h"

static bool own_type(dist_dtype dt, ncclDataType_t *t) {
  switch (dt) {
  case DIST_FLOAT16: *t = ncclFloat16; return true;
  case DIST_BFLOAT16: *t = ncclBfloat16; return true;
  case DIST_FLOAT32: *t = ncclFloat32; return true;
  case DIST_FLOAT64: *t = ncclFloat64; return true;
  case DIST_INT8: *t = ncclInt8; return true;
  case DIST_UINT8: *t = ncclUint8; return true;
  case DIST_INT32: *t = ncclInt32; return true;
  case DIST_INT64: *t = ncclInt64; return true;
  default: return false;
  }
}

void dist__nccl_move_type(const dist_tensor *t, ncclDataType_t *type, size_t *count) {
  size_t n = (size_t)dist_tensor_numel(t);
  if (own_type(t->dtype, type)) {
    *count = n;
  } else if (t->dtype == DIST_COMPLEX64 || t->dtype == DIST_COMPLEX128) {
    *type = t->dtype == DIST_COMPLEX64 ? ncclFloat32 : ncclFloat64;
    *count = 2 * n;
  } else {
    *type = ncclUint8;
    *count = dist_tensor_nbytes(t);
  }
}

static int notsup(dist__errbuf *err, dist_dtype dt, dist_redop op, const char *why) {
  return dist__err_set(err, DIST_E_NOTSUP, "NCCL cannot reduce %s with %s: %s",
                       dist_dtype_name(dt), dist_redop_name(op.kind), why);
}

int dist__nccl_reduce_type(const dist_tensor *t, dist_redop op, dist__nccl_redop *out,
                           dist__errbuf *err) {
  dist_dtype dt = t->dtype;
  size_t n = (size_t)dist_tensor_numel(t);
  out->count = n;
  out->kind = op.kind;
  out->scalar = op.scalar;
  switch (op.kind) {
  case DIST_REDOP_BAND:
  case DIST_REDOP_BOR:
  case DIST_REDOP_BXOR:
    if (dt != DIST_BOOL || op.kind == DIST_REDOP_BXOR)
      return notsup(err, dt, op, "NCCL has no bitwise reductions");
    break;
  default:
    break;
  }
  if (dt == DIST_BOOL) {
    out->type = ncclUint8;
    bool any = op.kind == DIST_REDOP_SUM || op.kind == DIST_REDOP_MAX || op.kind == DIST_REDOP_BOR;
    bool all = op.kind == DIST_REDOP_PRODUCT || op.kind == DIST_REDOP_MIN ||
               op.kind == DIST_REDOP_BAND;
    if (!any && !all)
      return notsup(err, dt, op, "no NCCL op gives it");
    out->kind = any ? DIST_REDOP_MAX : DIST_REDOP_MIN;
    return DIST_OK;
  }
  if (dt == DIST_COMPLEX64 || dt == DIST_COMPLEX128) {
    if (op.kind != DIST_REDOP_SUM && op.kind != DIST_REDOP_AVG && op.kind != DIST_REDOP_PREMUL_SUM)
      return notsup(err, dt, op, "NCCL reduces complex numbers as pairs of reals, which only "
                                 "SUM, AVG and PREMUL_SUM allow");
    out->type = dt == DIST_COMPLEX64 ? ncclFloat32 : ncclFloat64;
    out->count = 2 * n;
    return DIST_OK;
  }
  if (!own_type(dt, &out->type))
    return notsup(err, dt, op, "NCCL has no such type");
  return DIST_OK;
}

int dist__nccl_make_op(const dist__nccl_api *api, ncclComm_t comm, const dist__nccl_redop *r,
                       ncclRedOp_t *op, bool *created, dist__errbuf *err) {
  *created = false;
  switch (r->kind) {
  case DIST_REDOP_SUM: *op = ncclSum; return DIST_OK;
  case DIST_REDOP_PRODUCT: *op = ncclProd; return DIST_OK;
  case DIST_REDOP_MIN: *op = ncclMin; return DIST_OK;
  case DIST_REDOP_MAX: *op = ncclMax; return DIST_OK;
  case DIST_REDOP_AVG: *op = ncclAvg; return DIST_OK;
  case DIST_REDOP_PREMUL_SUM: break;
  default:
    return dist__err_set(err, DIST_E_NOTSUP, "NCCL has no %s", dist_redop_name(r->kind));
  }
  union {
    uint16_t h;
    float f;
    double d;
  } s;
  float f = (float)r->scalar;
  if (r->type == ncclFloat16)
    dist__f32_to_f16(&s.h, &f, 1);
  else if (r->type == ncclBfloat16)
    dist__f32_to_bf16(&s.h, &f, 1);
  else if (r->type == ncclFloat32)
    s.f = f;
  else
    s.d = r->scalar;
  ncclResult_t e = api->RedOpCreatePreMulSum(op, &s, r->type, ncclScalarHostImmediate, comm);
  if (e != ncclSuccess)
    return dist__err_set(err, DIST_E_BACKEND, "ncclRedOpCreatePreMulSum: %s",
                         api->GetErrorString(e));
  *created = true;
  return DIST_OK;
}
