/* nccl_map.h - dist dtypes and reduce ops in NCCL's terms (nccl_map.c). */
#ifndef DIST_NCCL_MAP_H
#define DIST_NCCL_MAP_H

#include "nccl_api.h"

/* How a reduction runs: NCCL type, element count, and the op to make. */
typedef struct dist__nccl_redop {
  ncclDataType_t type;
  size_t count;
  dist_redop_kind kind; /* after the bool mapping */
  double scalar;        /* PREMUL_SUM */
} dist__nccl_redop;

/* The type and count that move tensor t's bytes. */
void dist__nccl_move_type(const dist_tensor *t, ncclDataType_t *type, size_t *count);
/* The type and count that reduce t with op; DIST_E_NOTSUP with a message for
 * pairs NCCL lacks. */
int dist__nccl_reduce_type(const dist_tensor *t, dist_redop op, dist__nccl_redop *out,
                           dist__errbuf *err);
/* NCCL's op for r; *created when it must be destroyed after the call
 * (PREMUL_SUM). */
int dist__nccl_make_op(const dist__nccl_api *api, ncclComm_t comm, const dist__nccl_redop *r,
                       ncclRedOp_t *op, bool *created, dist__errbuf *err);

/* What enqueueing needs of a group (backend_nccl.c fills it). */
typedef struct dist__nccl_ctx {
  const dist__nccl_api *api;
  ncclComm_t comm;
  cudaStream_t stream;
  int rank, size;
  void *barrier_buf; /* one float32 on the device */
  const char *name;
} dist__nccl_ctx;

/* Enqueues c's NCCL calls on the group's stream (nccl_ops.c): grouped calls
 * are bracketed by ncclGroupStart/End even when one of them fails. */
int dist__nccl_enqueue(const dist__nccl_ctx *x, const dist_coll *c, dist__errbuf *err);

#endif
