/* nccl_op.c - the events around each CUDA operation (stream ordering after
 * the caller's stream, GPU start and end) and the group's record of its
 * operations, which the watchdog queries (nccl_op.h).
 *
 * An operation record is shared by the group (until the operation ends)
 * and, for an asynchronous call, by its work (until the user frees it:
 * dist_work_wait may make a stream wait on the end event at any time
 * before that). The last reference destroys the events, so neither side
 * needs the other alive; the CUDA table lives for the process. */
#include <stdio.h>

#include "nccl_op.h"

static int cuda_failed(const dist__nccl_api *api, const char *call, cudaError_t e,
                       dist__errbuf *err) {
  return dist__err_set(err, DIST_E_BACKEND, "%s: %s", call, api->CudaErrorString(e));
}

/* --- anchors ------------------------------------------------------------- */

int dist__nccl_anchor_new(const dist__nccl_api *api, cudaStream_t s, dist__nccl_anchor **out,
                          dist__errbuf *err) {
  dist__nccl_anchor *a = dist__calloc(1, sizeof *a);
  if (!a)
    return dist__err_set(err, DIST_E_NOMEM, "out of memory");
  a->api = api;
  atomic_init(&a->refs, 1);
  cudaError_t e = api->EventCreateWithFlags(&a->ev, cudaEventDefault);
  if (e != cudaSuccess) {
    dist__free(a);
    return cuda_failed(api, "cudaEventCreate", e, err);
  }
  /* The GPU passes an event on an idle stream between these two reads:
   * the midpoint is within a few microseconds of it. */
  int64_t t0 = dist_clock_ns();
  e = api->EventRecord(a->ev, s);
  if (e == cudaSuccess)
    e = api->EventSynchronize(a->ev);
  int64_t t1 = dist_clock_ns();
  if (e != cudaSuccess) {
    api->EventDestroy(a->ev);
    dist__free(a);
    return cuda_failed(api, "anchoring the GPU clock", e, err);
  }
  a->ns = t0 + (t1 - t0) / 2;
  *out = a;
  return DIST_OK;
}

void dist__nccl_anchor_unref(dist__nccl_anchor *a) {
  if (!a || atomic_fetch_sub(&a->refs, 1) != 1)
    return;
  a->api->EventDestroy(a->ev);
  dist__free(a);
}

/* --- one operation --------------------------------------------------------- */

int dist__nccl_op_new(const dist__nccl_api *api, dist__nccl_anchor *anchor, dist__nccl_op **out,
                      dist__errbuf *err) {
  dist__nccl_op *op = dist__calloc(1, sizeof *op);
  if (!op)
    return dist__err_set(err, DIST_E_NOMEM, "out of memory");
  op->api = api;
  atomic_init(&op->refs, 1);
  /* ready only orders streams; start and end are timed. */
  cudaError_t e = api->EventCreateWithFlags(&op->ready, cudaEventDisableTiming);
  if (e == cudaSuccess && (e = api->EventCreateWithFlags(&op->start, cudaEventDefault)) != cudaSuccess)
    api->EventDestroy(op->ready);
  if (e == cudaSuccess && (e = api->EventCreateWithFlags(&op->end, cudaEventDefault)) != cudaSuccess) {
    api->EventDestroy(op->start);
    api->EventDestroy(op->ready);
  }
  if (e != cudaSuccess) {
    dist__free(op);
    return cuda_failed(api, "cudaEventCreate", e, err);
  }
  if (anchor) {
    atomic_fetch_add(&anchor->refs, 1);
    op->anchor = anchor;
  }
  *out = op;
  return DIST_OK;
}

void dist__nccl_op_unref(dist__nccl_op *op) {
  if (!op || atomic_fetch_sub(&op->refs, 1) != 1)
    return;
  op->api->EventDestroy(op->ready);
  op->api->EventDestroy(op->start);
  op->api->EventDestroy(op->end);
  dist__nccl_anchor_unref(op->anchor);
  dist__free(op);
}

int dist__nccl_op_begin(dist__nccl_op *op, cudaStream_t caller, cudaStream_t stream,
                        dist__errbuf *err) {
  const dist__nccl_api *api = op->api;
  cudaError_t e = api->EventRecord(op->ready, caller);
  if (e != cudaSuccess)
    return cuda_failed(api, "cudaEventRecord on the current stream", e, err);
  if ((e = api->StreamWaitEvent(stream, op->ready, 0)) != cudaSuccess)
    return cuda_failed(api, "cudaStreamWaitEvent", e, err);
  if ((e = api->EventRecord(op->start, stream)) != cudaSuccess)
    return cuda_failed(api, "cudaEventRecord", e, err);
  return DIST_OK;
}

int dist__nccl_op_end(dist__nccl_op *op, cudaStream_t stream, dist__errbuf *err) {
  cudaError_t e = op->api->EventRecord(op->end, stream);
  return e == cudaSuccess ? DIST_OK : cuda_failed(op->api, "cudaEventRecord", e, err);
}

static int64_t since_anchor(const dist__nccl_op *op, cudaEvent_t ev) {
  float ms = 0;
  if (op->api->EventElapsedTime(&ms, op->anchor->ev, ev) != cudaSuccess)
    return 0;
  return op->anchor->ns + (int64_t)((double)ms * 1e6);
}

void dist__nccl_op_times(const dist__nccl_op *op, int64_t *start_ns, int64_t *end_ns) {
  *start_ns = *end_ns = 0;
  if (!op->anchor)
    return;
  int64_t s = since_anchor(op, op->start), e = since_anchor(op, op->end);
  if (s && e && e >= s) {
    *start_ns = s;
    *end_ns = e;
  }
}

static int stream_wait(void *ctx, void *stream) {
  dist__nccl_op *op = ctx;
  cudaError_t e = op->api->StreamWaitEvent((cudaStream_t)stream, op->end, 0);
  if (e != cudaSuccess)
    return dist__set_last_error(DIST_E_BACKEND, "cudaStreamWaitEvent on the current stream: %s",
                                op->api->CudaErrorString(e));
  return DIST_OK;
}

static void release(void *ctx) { dist__nccl_op_unref(ctx); }

const dist_work_device_ops dist__nccl_op_device = {.stream_wait = stream_wait,
                                                   .release = release};

/* --- the group's record ------------------------------------------------------ */

void dist__nccl_track_init(dist__nccl_track *t) {
  memset(t, 0, sizeof *t);
  pthread_mutex_init(&t->mu, NULL);
}

void dist__nccl_track_fini(dist__nccl_track *t) {
  for (dist__nccl_op *op = t->head, *next; op; op = next) {
    next = op->next;
    dist__nccl_op_unref(op);
  }
  t->head = t->tail = NULL;
  pthread_mutex_destroy(&t->mu);
}

void dist__nccl_track_add(dist__nccl_track *t, dist__nccl_op *op) {
  pthread_mutex_lock(&t->mu);
  op->next = NULL;
  if (t->tail)
    t->tail->next = op;
  else
    t->head = op;
  t->tail = op;
  if (op->seq > t->last_launched)
    t->last_launched = op->seq;
  pthread_mutex_unlock(&t->mu);
}

void dist__nccl_track_done(dist__nccl_track *t, dist__nccl_op *op, int64_t s, int64_t e) {
  pthread_mutex_lock(&t->mu);
  dist__nccl_op **pp = &t->head, *prev = NULL;
  while (*pp && *pp != op) {
    prev = *pp;
    pp = &(*pp)->next;
  }
  if (*pp) {
    *pp = op->next;
    if (t->tail == op)
      t->tail = prev;
  }
  if (op->seq) {
    size_t i = op->seq % DIST__NCCL_DONE_KEPT;
    t->done[i].seq = op->seq;
    t->done[i].launched_ns = op->launched_ns;
    t->done[i].start_ns = s;
    t->done[i].end_ns = e;
  }
  pthread_mutex_unlock(&t->mu);
  dist__nccl_op_unref(op);
}

/* An operation in flight: where its events say the GPU is. */
static void op_state(const dist__nccl_op *op, dist_gpu_progress *out) {
  out->launched_ns = op->launched_ns;
  if (op->api->EventQuery(op->end) == cudaSuccess) {
    out->state = DIST_GPU_COMPLETED;
    dist__nccl_op_times(op, &out->gpu_start_ns, &out->gpu_end_ns);
  } else if (op->api->EventQuery(op->start) == cudaSuccess) {
    out->state = DIST_GPU_RUNNING;
    out->gpu_start_ns = op->anchor ? since_anchor(op, op->start) : 0;
  } else {
    out->state = DIST_GPU_LAUNCHED;
  }
}

int dist__nccl_track_query(dist__nccl_track *t, uint64_t seq, dist_gpu_progress *out) {
  memset(out, 0, sizeof *out);
  pthread_mutex_lock(&t->mu);
  const dist__nccl_op *op = t->head;
  while (op && op->seq != seq)
    op = op->next;
  size_t i = seq % DIST__NCCL_DONE_KEPT;
  if (op) {
    op_state(op, out);
  } else if (t->done[i].seq == seq) {
    out->state = DIST_GPU_COMPLETED;
    out->launched_ns = t->done[i].launched_ns;
    out->gpu_start_ns = t->done[i].start_ns;
    out->gpu_end_ns = t->done[i].end_ns;
  } else {
    /* Not launched yet, or completed long ago. */
    out->state = seq > t->last_launched ? DIST_GPU_ENQUEUED : DIST_GPU_COMPLETED;
  }
  pthread_mutex_unlock(&t->mu);
  return DIST_OK;
}
