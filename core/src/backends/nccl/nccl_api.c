/* nccl_api.c - loads libnccl and libcudart at run time into the call table
 * of nccl_api.h, and answers dist_is_nccl_available.
 *
 * The system's libraries come first (LD_LIBRARY_PATH, ld.so.conf), then the
 * toolkit's that the build found (DIST_NCCL_LIB_DIR), so a job on a cluster
 * uses the NCCL its admins installed. The libraries stay loaded for the
 * process's life. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>

#include "nccl_api.h"

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static dist__nccl_api real;
static bool loaded;
static char load_error[512];
static const dist__nccl_api *override;

static void *open_lib(const char *name) {
  void *h = dlopen(name, RTLD_NOW | RTLD_GLOBAL);
  if (!h) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", DIST_NCCL_LIB_DIR, name);
    h = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
  }
  if (!h)
    snprintf(load_error, sizeof load_error, "cannot load %s (nor from %s): %s", name,
             DIST_NCCL_LIB_DIR, dlerror());
  return h;
}

#define SYM(h, field, name)                                                    \
  do {                                                                         \
    *(void **)&real.field = dlsym((h), (name));                                \
    if (!real.field) {                                                         \
      snprintf(load_error, sizeof load_error, "%s has no symbol %s", #h, name); \
      return false;                                                            \
    }                                                                          \
  } while (0)

static bool load_nccl(void *nccl) {
  SYM(nccl, GetUniqueId, "ncclGetUniqueId");
  SYM(nccl, CommInitRankConfig, "ncclCommInitRankConfig");
  SYM(nccl, CommAbort, "ncclCommAbort");
  SYM(nccl, CommDestroy, "ncclCommDestroy");
  SYM(nccl, CommGetAsyncError, "ncclCommGetAsyncError");
  SYM(nccl, GetErrorString, "ncclGetErrorString");
  SYM(nccl, AllReduce, "ncclAllReduce");
  SYM(nccl, Broadcast, "ncclBroadcast");
  SYM(nccl, Reduce, "ncclReduce");
  SYM(nccl, AllGather, "ncclAllGather");
  SYM(nccl, ReduceScatter, "ncclReduceScatter");
  SYM(nccl, Send, "ncclSend");
  SYM(nccl, Recv, "ncclRecv");
  SYM(nccl, GroupStart, "ncclGroupStart");
  SYM(nccl, GroupEnd, "ncclGroupEnd");
  SYM(nccl, RedOpCreatePreMulSum, "ncclRedOpCreatePreMulSum");
  SYM(nccl, RedOpDestroy, "ncclRedOpDestroy");
  SYM(nccl, CommSplit, "ncclCommSplit");
  return true;
}

static bool load_cudart(void *cudart) {
  SYM(cudart, GetDeviceCount, "cudaGetDeviceCount");
  SYM(cudart, SetDevice, "cudaSetDevice");
  SYM(cudart, StreamCreateWithFlags, "cudaStreamCreateWithFlags");
  SYM(cudart, StreamDestroy, "cudaStreamDestroy");
  SYM(cudart, EventCreateWithFlags, "cudaEventCreateWithFlags");
  SYM(cudart, EventRecord, "cudaEventRecord");
  SYM(cudart, EventQuery, "cudaEventQuery");
  SYM(cudart, EventDestroy, "cudaEventDestroy");
  SYM(cudart, Malloc, "cudaMalloc");
  SYM(cudart, Free, "cudaFree");
  SYM(cudart, CudaErrorString, "cudaGetErrorString");
  SYM(cudart, DeviceGetStreamPriorityRange, "cudaDeviceGetStreamPriorityRange");
  SYM(cudart, StreamCreateWithPriority, "cudaStreamCreateWithPriority");
  SYM(cudart, StreamWaitEvent, "cudaStreamWaitEvent");
  SYM(cudart, EventSynchronize, "cudaEventSynchronize");
  SYM(cudart, EventElapsedTime, "cudaEventElapsedTime");
  return true;
}

static bool load_locked(void) {
  if (loaded)
    return true;
  if (load_error[0])
    return false; /* tried once: the answer does not change */
  void *cudart = open_lib("libcudart.so." DIST_CUDART_SOVERSION);
  if (!cudart)
    cudart = open_lib("libcudart.so");
  void *nccl = cudart ? open_lib("libnccl.so.2") : NULL;
  loaded = nccl && load_cudart(cudart) && load_nccl(nccl);
  return loaded;
}

const dist__nccl_api *dist__nccl_api_get(dist__errbuf *err) {
  pthread_mutex_lock(&lock);
  const dist__nccl_api *api = override ? override : load_locked() ? &real : NULL;
  if (!api && err)
    dist__err_set(err, DIST_E_NOTSUP, "NCCL is not available: %s", load_error);
  pthread_mutex_unlock(&lock);
  return api;
}

void dist__nccl_set_api(const dist__nccl_api *api) {
  pthread_mutex_lock(&lock);
  override = api;
  pthread_mutex_unlock(&lock);
}

/* True when NCCL and the CUDA runtime load and the runtime sees a device. */
bool dist__nccl_usable(char *why, size_t len) {
  dist__errbuf err;
  dist__err_clear(&err);
  const dist__nccl_api *api = dist__nccl_api_get(&err);
  if (!api) {
    snprintf(why, len, "%s", err.msg);
    return false;
  }
  int n = 0;
  cudaError_t e = api->GetDeviceCount(&n);
  if (e != cudaSuccess || n < 1) {
    snprintf(why, len, "no CUDA device is visible (%s)",
             e != cudaSuccess ? api->CudaErrorString(e) : "0 devices");
    return false;
  }
  snprintf(why, len, "%d CUDA device(s)", n);
  return true;
}
