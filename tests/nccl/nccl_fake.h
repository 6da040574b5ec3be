/* nccl_fake.h - a fake NCCL and CUDA runtime for nccl_api.h's table: every
 * call is logged as a line ("AllReduce b0 b0 n=4 t=7 op=0"), buffers by
 * name, so tests compare what the backend asked for with what it should
 * have. Knobs: event_state (what EventQuery answers), async_state
 * (CommGetAsyncError), comm_ready_after (polls a non-blocking communicator
 * stays in progress), n_devices / count_error (GetDeviceCount); last_cfg
 * is the config the last init or split received. Streams and events:
 * with log_streams set, EventRecord and StreamWaitEvent are logged too
 * ("EventRecord e2 grp", "StreamWaitEvent grp e1"), events named by
 * creation order after mark_events() (e1, e2, ...) and streams by name
 * (legacy = NULL, user = USER_STREAM, grp and anchor = the first and
 * second stream made after reset_streams()); gpu_done_upto makes events
 * up to that number complete whatever event_state says (the GPU got that
 * far), and EventElapsedTime answers 1 ms per event between two. One copy per process
 * (forked ranks each have their own). Tensors carry host pointers: the
 * fake never touches them. */
#ifndef DIST_TEST_NCCL_FAKE_H
#define DIST_TEST_NCCL_FAKE_H

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "backends/nccl/nccl_api.h"

static char log_buf[16384];
static size_t log_len;
static cudaError_t event_state;      /* what EventQuery answers */
static ncclResult_t async_state;     /* what CommGetAsyncError answers */
static int n_event_queries;

static void logf_(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER; /* the progress thread logs too */
static void logf_(const char *fmt, ...) {
  pthread_mutex_lock(&log_lock);
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(log_buf + log_len, sizeof log_buf - log_len, fmt, ap);
  va_end(ap);
  if (n > 0 && log_len + (size_t)n < sizeof log_buf)
    log_len += (size_t)n;
  pthread_mutex_unlock(&log_lock);
}

static inline void clear_log(void) {
  pthread_mutex_lock(&log_lock);
  log_len = 0;
  log_buf[0] = '\0';
  pthread_mutex_unlock(&log_lock);
}

static float b0[64], b1[64], b2[64], b3[64]; /* "device" buffers */
static float dev_scratch[4];

/* Buffers by name in the log, so expectations read like the calls. */
static const char *nm(const void *p) {
  if (p == NULL) return "null";
  if (p == b0) return "b0";
  if (p == b1) return "b1";
  if (p == b2) return "b2";
  if (p == b3) return "b3";
  if (p == dev_scratch) return "bar";
  if ((const char *)p > (const char *)b0 && (const char *)p < (const char *)(b0 + 64)) return "b0+";
  if ((const char *)p > (const char *)b1 && (const char *)p < (const char *)(b1 + 64)) return "b1+";
  return "?";
}

static ncclResult_t f_uid(ncclUniqueId *id) {
  memset(id, 'u', sizeof *id);
  logf_("GetUniqueId\n");
  return ncclSuccess;
}
/* What the last init or split received (NCCL_CONFIG_UNDEF_INT: unset). */
static ncclConfig_t last_cfg;
static int comm_ready_after; /* CommGetAsyncError answers ncclInProgress this many times */
static ncclResult_t f_init(ncclComm_t *c, int n, ncclUniqueId id, int r, ncclConfig_t *cfg) {
  (void)id;
  last_cfg = *cfg;
  *c = (ncclComm_t)(uintptr_t)0x1234;
  logf_("CommInitRankConfig n=%d rank=%d\n", n, r);
  return cfg->blocking == 0 ? ncclInProgress : ncclSuccess;
}
static ncclResult_t f_split(ncclComm_t c, int color, int key, ncclComm_t *nc, ncclConfig_t *cfg) {
  last_cfg = *cfg;
  *nc = color == NCCL_SPLIT_NOCOLOR ? NULL : (ncclComm_t)((uintptr_t)c + 0x10);
  if (color == NCCL_SPLIT_NOCOLOR)
    logf_("CommSplit parent=%#lx nocolor key=%d\n", (unsigned long)(uintptr_t)c, key);
  else
    logf_("CommSplit parent=%#lx color=%d key=%d\n", (unsigned long)(uintptr_t)c, color, key);
  return cfg->blocking == 0 ? ncclInProgress : ncclSuccess;
}
static ncclResult_t f_abort(ncclComm_t c) { (void)c; logf_("CommAbort\n"); return ncclSuccess; }
static ncclResult_t f_destroy(ncclComm_t c) { (void)c; logf_("CommDestroy\n"); return ncclSuccess; }
static ncclResult_t f_async(ncclComm_t c, ncclResult_t *e) {
  (void)c;
  *e = __atomic_load_n(&async_state, __ATOMIC_SEQ_CST);
  if (*e == ncclSuccess && comm_ready_after != 0) {
    if (comm_ready_after > 0)
      comm_ready_after--;
    *e = ncclInProgress; /* a non-blocking communicator still connecting (< 0: forever) */
  }
  return ncclSuccess;
}
static const char *f_nccl_str(ncclResult_t r) { return r == ncclSystemError ? "fake system error" : "fake"; }
static ncclResult_t f_allreduce(const void *s, void *r, size_t n, ncclDataType_t t, ncclRedOp_t op,
                                ncclComm_t c, cudaStream_t st) {
  (void)c; (void)st;
  logf_("AllReduce %s %s n=%zu t=%d op=%d\n", nm(s), nm(r), n, (int)t, (int)op);
  return ncclSuccess;
}
static ncclResult_t f_bcast(const void *s, void *r, size_t n, ncclDataType_t t, int root,
                            ncclComm_t c, cudaStream_t st) {
  (void)c; (void)st;
  logf_("Broadcast %s %s n=%zu t=%d root=%d\n", nm(s), nm(r), n, (int)t, root);
  return ncclSuccess;
}
static ncclResult_t f_reduce(const void *s, void *r, size_t n, ncclDataType_t t, ncclRedOp_t op,
                             int root, ncclComm_t c, cudaStream_t st) {
  (void)c; (void)st;
  logf_("Reduce %s %s n=%zu t=%d op=%d root=%d\n", nm(s), nm(r), n, (int)t, (int)op, root);
  return ncclSuccess;
}
static ncclResult_t f_allgather(const void *s, void *r, size_t n, ncclDataType_t t, ncclComm_t c,
                                cudaStream_t st) {
  (void)c; (void)st;
  logf_("AllGather %s %s n=%zu t=%d\n", nm(s), nm(r), n, (int)t);
  return ncclSuccess;
}
static ncclResult_t f_rs(const void *s, void *r, size_t n, ncclDataType_t t, ncclRedOp_t op,
                         ncclComm_t c, cudaStream_t st) {
  (void)c; (void)st;
  logf_("ReduceScatter %s %s n=%zu t=%d op=%d\n", nm(s), nm(r), n, (int)t, (int)op);
  return ncclSuccess;
}
static ncclResult_t f_send(const void *s, size_t n, ncclDataType_t t, int peer, ncclComm_t c,
                           cudaStream_t st) {
  (void)c; (void)st;
  logf_("Send %s n=%zu t=%d peer=%d\n", nm(s), n, (int)t, peer);
  return ncclSuccess;
}
static ncclResult_t f_recv(void *r, size_t n, ncclDataType_t t, int peer, ncclComm_t c,
                           cudaStream_t st) {
  (void)c; (void)st;
  logf_("Recv %s n=%zu t=%d peer=%d\n", nm(r), n, (int)t, peer);
  return ncclSuccess;
}
static ncclResult_t f_gstart(void) { logf_("GroupStart\n"); return ncclSuccess; }
static ncclResult_t f_gend(void) { logf_("GroupEnd\n"); return ncclSuccess; }
static ncclResult_t f_premul(ncclRedOp_t *op, void *scalar, ncclDataType_t t,
                             ncclScalarResidence_t res, ncclComm_t c) {
  (void)c;
  double v = t == ncclFloat64 ? *(double *)scalar
             : t == ncclFloat32 ? *(float *)scalar
                                : (double)(*(uint16_t *)scalar); /* half bits */
  logf_("RedOpCreatePreMulSum t=%d res=%d scalar=%g\n", (int)t, (int)res, v);
  *op = (ncclRedOp_t)ncclNumOps; /* the first user op */
  return ncclSuccess;
}
static ncclResult_t f_opdestroy(ncclRedOp_t op, ncclComm_t c) {
  (void)c;
  logf_("RedOpDestroy op=%d\n", (int)op);
  return ncclSuccess;
}
static int n_devices = 1;                /* what GetDeviceCount answers */
static cudaError_t count_error = cudaSuccess;
static cudaError_t f_count(int *n) { *n = n_devices; return count_error; }
static cudaError_t f_setdev(int d) { logf_("SetDevice %d\n", d); return cudaSuccess; }
static int stream_serial;         /* streams made since reset_streams() */
static bool log_streams;          /* log EventRecord / StreamWaitEvent */
#define USER_STREAM ((cudaStream_t)(uintptr_t)0x77)
static inline void reset_streams(void) { stream_serial = 0; }
static cudaStream_t new_stream(void) { return (cudaStream_t)(uintptr_t)(0x10 + ++stream_serial); }
static const char *snm(cudaStream_t s) {
  if (s == NULL) return "legacy";
  if (s == USER_STREAM) return "user";
  if (s == (cudaStream_t)(uintptr_t)0x11) return "grp";
  if (s == (cudaStream_t)(uintptr_t)0x12) return "anchor";
  return "s?";
}
static cudaError_t f_screate(cudaStream_t *s, unsigned f) { (void)f; *s = new_stream(); return cudaSuccess; }
static cudaError_t f_sdestroy(cudaStream_t s) { (void)s; return cudaSuccess; }
static int n_events; /* events alive (atomic: the progress thread destroys them) */
static int ev_serial, ev_base;    /* events made; the number mark_events() saw */
static int gpu_done_upto = -1000000; /* events numbered up to this are complete */
/* ev_base is read by the backend's progress thread (event queries): atomic. */
static inline void mark_events(void) {
  __atomic_store_n(&ev_base, __atomic_load_n(&ev_serial, __ATOMIC_SEQ_CST), __ATOMIC_SEQ_CST);
}
static int ev_no(cudaEvent_t e) {
  return (int)((uintptr_t)e - 0x1000) - __atomic_load_n(&ev_base, __ATOMIC_SEQ_CST);
}
static cudaError_t f_ecreate(cudaEvent_t *e, unsigned f) {
  (void)f;
  __atomic_add_fetch(&n_events, 1, __ATOMIC_SEQ_CST);
  *e = (cudaEvent_t)(uintptr_t)(0x1000 + __atomic_add_fetch(&ev_serial, 1, __ATOMIC_SEQ_CST));
  return cudaSuccess;
}
static cudaError_t f_erecord(cudaEvent_t e, cudaStream_t s) {
  if (log_streams)
    logf_("EventRecord e%d %s\n", ev_no(e), snm(s));
  return cudaSuccess;
}
static cudaError_t f_swait(cudaStream_t s, cudaEvent_t e, unsigned f) {
  (void)f;
  if (log_streams)
    logf_("StreamWaitEvent %s e%d\n", snm(s), ev_no(e));
  return cudaSuccess;
}
static cudaError_t f_esync(cudaEvent_t e) { (void)e; return cudaSuccess; }
static cudaError_t f_elapsed(float *ms, cudaEvent_t a, cudaEvent_t b) {
  *ms = (float)(ev_no(b) - ev_no(a));
  return cudaSuccess;
}
static cudaError_t f_equery(cudaEvent_t e) {
  __atomic_add_fetch(&n_event_queries, 1, __ATOMIC_SEQ_CST);
  if (ev_no(e) <= __atomic_load_n(&gpu_done_upto, __ATOMIC_SEQ_CST))
    return cudaSuccess;
  return __atomic_load_n(&event_state, __ATOMIC_SEQ_CST);
}
static cudaError_t f_edestroy(cudaEvent_t e) { (void)e; __atomic_sub_fetch(&n_events, 1, __ATOMIC_SEQ_CST); return cudaSuccess; }
static cudaError_t f_malloc(void **p, size_t n) { (void)n; *p = dev_scratch; return cudaSuccess; }
static cudaError_t f_free(void *p) { (void)p; return cudaSuccess; }
static const char *f_cuda_str(cudaError_t e) { return e == cudaErrorNoDevice ? "fake: no CUDA-capable device" : "fake cuda error"; }
static cudaError_t f_prange(int *least, int *greatest) { *least = 0; *greatest = -5; return cudaSuccess; }
static cudaError_t f_screate_prio(cudaStream_t *s, unsigned f, int prio) {
  logf_("StreamCreateWithPriority flags=%u priority=%d\n", f, prio);
  *s = new_stream();
  return cudaSuccess;
}

static const dist__nccl_api fake = {
    .GetUniqueId = f_uid, .CommInitRankConfig = f_init, .CommAbort = f_abort,
    .CommDestroy = f_destroy, .CommGetAsyncError = f_async, .GetErrorString = f_nccl_str,
    .AllReduce = f_allreduce, .Broadcast = f_bcast, .Reduce = f_reduce,
    .AllGather = f_allgather, .ReduceScatter = f_rs, .Send = f_send, .Recv = f_recv,
    .GroupStart = f_gstart, .GroupEnd = f_gend, .RedOpCreatePreMulSum = f_premul,
    .RedOpDestroy = f_opdestroy, .GetDeviceCount = f_count, .SetDevice = f_setdev,
    .StreamCreateWithFlags = f_screate, .StreamDestroy = f_sdestroy,
    .EventCreateWithFlags = f_ecreate, .EventRecord = f_erecord, .EventQuery = f_equery,
    .EventDestroy = f_edestroy, .Malloc = f_malloc, .Free = f_free,
    .CudaErrorString = f_cuda_str, .CommSplit = f_split,
    .DeviceGetStreamPriorityRange = f_prange, .StreamCreateWithPriority = f_screate_prio,
    .StreamWaitEvent = f_swait, .EventSynchronize = f_esync, .EventElapsedTime = f_elapsed,
};

#endif
