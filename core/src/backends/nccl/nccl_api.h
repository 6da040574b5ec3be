/* nccl_api.h - the NCCL and CUDA runtime calls the nccl backend makes, as a
 * table of function pointers (core/src/backends/nccl/).
 *
 * DESIGN. Every call into NCCL or CUDA goes through dist__nccl_api, so:
 *   - the libraries are loaded at run time (dlopen of libnccl.so.2 and
 *     libcudart.so, the system's first, then the toolkit's found at build
 *     time): a program linked with libdist starts on machines without CUDA,
 *     and dist_is_nccl_available() answers truthfully (both load and the
 *     runtime sees a device);
 *   - tests swap the table for a fake (dist__nccl_set_api) and check the
 *     mapping of every operation, dtype and reduce op, the grouping of calls,
 *     and the timeout and abort paths without a GPU.
 * Only the CUDA runtime API is used (no driver API). */
#ifndef DIST_NCCL_API_H
#define DIST_NCCL_API_H

#include <cuda_runtime_api.h>
#include <nccl.h>

#include "base/dist_int.h"

typedef struct dist__nccl_api {
  /* NCCL */
  ncclResult_t (*GetUniqueId)(ncclUniqueId *id);
  ncclResult_t (*CommInitRankConfig)(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank,
                                     ncclConfig_t *config);
  ncclResult_t (*CommAbort)(ncclComm_t comm);
  ncclResult_t (*CommDestroy)(ncclComm_t comm);
  ncclResult_t (*CommGetAsyncError)(ncclComm_t comm, ncclResult_t *err);
  const char *(*GetErrorString)(ncclResult_t r);
  ncclResult_t (*AllReduce)(const void *s, void *r, size_t n, ncclDataType_t t, ncclRedOp_t op,
                            ncclComm_t comm, cudaStream_t st);
  ncclResult_t (*Broadcast)(const void *s, void *r, size_t n, ncclDataType_t t, int root,
                            ncclComm_t comm, cudaStream_t st);
  ncclResult_t (*Reduce)(const void *s, void *r, size_t n, ncclDataType_t t, ncclRedOp_t op,
                         int root, ncclComm_t comm, cudaStream_t st);
  ncclResult_t (*AllGather)(const void *s, void *r, size_t n, ncclDataType_t t, ncclComm_t comm,
                            cudaStream_t st);
  ncclResult_t (*ReduceScatter)(const void *s, void *r, size_t n, ncclDataType_t t,
                                ncclRedOp_t op, ncclComm_t comm, cudaStream_t st);
  ncclResult_t (*Send)(const void *s, size_t n, ncclDataType_t t, int peer, ncclComm_t comm,
                       cudaStream_t st);
  ncclResult_t (*Recv)(void *r, size_t n, ncclDataType_t t, int peer, ncclComm_t comm,
                       cudaStream_t st);
  ncclResult_t (*GroupStart)(void);
  ncclResult_t (*GroupEnd)(void);
  ncclResult_t (*RedOpCreatePreMulSum)(ncclRedOp_t *op, void *scalar, ncclDataType_t t,
                                       ncclScalarResidence_t res, ncclComm_t comm);
  ncclResult_t (*RedOpDestroy)(ncclRedOp_t op, ncclComm_t comm);
  /* CUDA runtime */
  cudaError_t (*GetDeviceCount)(int *n);
  cudaError_t (*SetDevice)(int dev);
  cudaError_t (*StreamCreateWithFlags)(cudaStream_t *s, unsigned flags);
  cudaError_t (*StreamDestroy)(cudaStream_t s);
  cudaError_t (*EventCreateWithFlags)(cudaEvent_t *e, unsigned flags);
  cudaError_t (*EventRecord)(cudaEvent_t e, cudaStream_t s);
  cudaError_t (*EventQuery)(cudaEvent_t e);
  cudaError_t (*EventDestroy)(cudaEvent_t e);
  cudaError_t (*Malloc)(void **p, size_t n);
  cudaError_t (*Free)(void *p);
  const char *(*CudaErrorString)(cudaError_t e);
  /* Appended: communicators split from a parent, high-priority streams. */
  ncclResult_t (*CommSplit)(ncclComm_t comm, int color, int key, ncclComm_t *newcomm,
                            ncclConfig_t *config);
  cudaError_t (*DeviceGetStreamPriorityRange)(int *least, int *greatest);
  cudaError_t (*StreamCreateWithPriority)(cudaStream_t *s, unsigned flags, int priority);
  /* Appended: stream ordering and GPU times (nccl_op.c). */
  cudaError_t (*StreamWaitEvent)(cudaStream_t s, cudaEvent_t e, unsigned flags);
  cudaError_t (*EventSynchronize)(cudaEvent_t e);
  cudaError_t (*EventElapsedTime)(float *ms, cudaEvent_t start, cudaEvent_t end);
} dist__nccl_api;

/* The table in use: loads the libraries the first time. NULL with a message
 * in err when they do not load. */
const dist__nccl_api *dist__nccl_api_get(dist__errbuf *err);
/* Replaces the table (tests; NULL returns to the real libraries). */
void dist__nccl_set_api(const dist__nccl_api *api);

/* The nccl backend's vtable (backend_nccl.c). */
extern const dist_backend_ops dist__nccl_backend_ops;
bool dist__nccl_usable(char *why, size_t len);

#endif
