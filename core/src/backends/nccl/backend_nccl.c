/* backend_nccl.c - the "nccl" backend for CUDA tensors: the vtable glue,
 * the group's communicator and stream, and the progress path.
 *
 * DESIGN. One communicator per group, created at init (pg_mixed.c makes
 * the group at the first CUDA operation, or at once when the group is
 * bound to a device). It is split from the parent group's communicator
 * (ncclCommSplit) when the parent's exists and is healthy, every rank of
 * the parent takes part (the parent's other ranks split with no colour,
 * groups.c) and both run in the same blocking mode; else rank 0 makes a
 * unique id and shares it through the group's store. The device is the
 * bound one (device_id), else LOCAL_RANK modulo the visible devices
 * (torch's default). NCCL's config (dist_nccl_options) goes into
 * ncclCommInitRankConfig / ncclCommSplit; a non-blocking communicator is
 * polled until ready within the group's timeout. One stream per
 * group; every operation is enqueued on it (nccl_ops.c) between events
 * (nccl_op.c): the group's stream first waits for the caller's current
 * stream (dist/cuda.h), then start and end events bracket the NCCL calls,
 * so operations complete in issue order and the watchdog can tell
 * launched from running from completed (gpu_progress).
 * A synchronous call waits for its end event on the caller's thread; an
 * asynchronous one is completed by the group's progress thread
 * "dist-nccl-<rank>", and its work carries the end event so that
 * dist_work_wait makes the waiter's stream wait instead of blocking.
 * Both wait through one function that polls the event,
 * ncclCommGetAsyncError and the abort flag, and enforces the group timeout:
 * on a timeout or an asynchronous error the communicator is aborted
 * (ncclCommAbort), the operation fails (DIST_E_TIMEOUT / DIST_E_BACKEND)
 * and the group is broken: later operations fail at once with the first
 * message, through the same statuses and observer events as the cpu
 * backend. Every NCCL and CUDA call goes through nccl_api.h's table. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "nccl_op.h"
#include "pg/pg_int.h" /* the parent group's engines, for ncclCommSplit */

typedef struct nccl_backend {
  dist__nccl_ctx x;
  char name[128];
  dist_pg *self;
  int device;
  dist_device bound;
  dist_nccl_options opts;
  bool split; /* the communicator came from ncclCommSplit */
  int64_t timeout_ms;
  bool have_comm, have_stream, have_anchor_stream;
  cudaStream_t anchor_stream;  /* idle: anchors the GPU clock (nccl_op.h) */
  dist__nccl_anchor *anchor;   /* replaced on the caller thread only */
  dist__nccl_track track;      /* operations in flight, for gpu_progress */
  _Atomic bool comm_aborted; /* set by a waiter (any thread), read by split_parent */

  pthread_mutex_t mu;
  pthread_mutex_t wait_mu;   /* one waiter polls the communicator at a time */
  pthread_cond_t cv;
  dist__nccl_op *head, *tail;  /* async operations, by next_async */
  bool thread_started, stop;
  pthread_t thread;

  _Atomic int aborted;
  char abort_reason[256];
  _Atomic int broken_rc;
  char broken_msg[DIST_ERRMSG_LEN];
} nccl_backend;

/* --- init / fini --------------------------------------------------------- */

static int pick_device(nccl_backend *b, dist__errbuf *err) {
  int n = 0;
  cudaError_t e = b->x.api->GetDeviceCount(&n);
  if (e != cudaSuccess || n < 1)
    return dist__err_set(err, DIST_E_NOTSUP, "group %s: no CUDA device is visible (%s)", b->name,
                         e != cudaSuccess ? b->x.api->CudaErrorString(e) : "0 devices");
  if (b->bound.type == DIST_DEVICE_CUDA) {
    if (b->bound.index >= n)
      return dist__err_set(err, DIST_E_INVAL, "group %s: device_id cuda:%d, but %d CUDA "
                           "device(s) are visible", b->name, b->bound.index, n);
    b->device = b->bound.index;
  } else {
    const char *lr = dist__getenv("LOCAL_RANK");
    b->device = (lr ? atoi(lr) : b->x.rank) % n;
  }
  e = b->x.api->SetDevice(b->device);
  if (e != cudaSuccess)
    return dist__err_set(err, DIST_E_BACKEND, "cudaSetDevice(%d): %s", b->device,
                         b->x.api->CudaErrorString(e));
  return DIST_OK;
}

/* Rank 0 makes the unique id; the others read it from the group store. */
static int share_id(nccl_backend *b, dist_store *st, ncclUniqueId *id, dist__errbuf *err) {
  if (b->x.rank == 0) {
    ncclResult_t e = b->x.api->GetUniqueId(id);
    if (e != ncclSuccess)
      return dist__err_set(err, DIST_E_BACKEND, "ncclGetUniqueId: %s",
                           b->x.api->GetErrorString(e));
    if (dist_store_set(st, "nccl/uid", id, sizeof *id) != DIST_OK)
      return dist__err_set(err, DIST_E_STORE, "group %s: %s", b->name, dist_store_errmsg(st));
    return DIST_OK;
  }
  void *v = NULL;
  size_t len = 0;
  int64_t saved = dist_store_get_timeout(st);
  dist_store_set_timeout(st, b->timeout_ms);
  int rc = dist_store_get(st, "nccl/uid", &v, &len);
  dist_store_set_timeout(st, saved);
  if (rc != DIST_OK)
    return dist__err_set(err, DIST_E_TIMEOUT, "group %s: rank 0 published no NCCL id within %lld ms: %s",
                         b->name, (long long)b->timeout_ms, dist_store_errmsg(st));
  if (len != sizeof *id) {
    dist_free(v);
    return dist__err_set(err, DIST_E_INTERNAL, "group %s: malformed NCCL id (%zu bytes)", b->name,
                         len);
  }
  memcpy(id, v, sizeof *id);
  dist_free(v);
  return DIST_OK;
}

static int broken(nccl_backend *b, int rc, const char *msg);

/* --- config, split, readiness --------------------------------------------- */

static int check_opts(const char *name, const dist_nccl_options *o, dist__errbuf *err) {
  const int tri[3] = {o->blocking, o->high_priority_stream, o->split_share};
  for (int i = 0; i < 3; i++)
    if (tri[i] < DIST_OPT_DEFAULT || tri[i] > DIST_OPT_OFF)
      return dist__err_set(err, DIST_E_INVAL, "group %s: NCCL option %s = %d (DIST_OPT_DEFAULT, "
                           "DIST_OPT_ON or DIST_OPT_OFF)", name,
                           i == 0 ? "blocking" : i == 1 ? "high_priority_stream" : "split_share",
                           tri[i]);
  if (o->cga_cluster_size != DIST_NCCL_CGA_NONE &&
      (o->cga_cluster_size < 0 || o->cga_cluster_size > 8))
    return dist__err_set(err, DIST_E_INVAL, "group %s: NCCL cga_cluster_size = %d (1..8, "
                         "DIST_NCCL_CGA_NONE, or 0 for NCCL's)", name, o->cga_cluster_size);
  return DIST_OK;
}

/* NCCL's config for o: unset fields stay NCCL_CONFIG_UNDEF_INT. */
static ncclConfig_t make_config(const dist_nccl_options *o) {
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  if (o->blocking)
    cfg.blocking = o->blocking == DIST_OPT_ON;
  if (o->cga_cluster_size)
    cfg.cgaClusterSize = o->cga_cluster_size == DIST_NCCL_CGA_NONE ? 0 : o->cga_cluster_size;
  if (o->split_share)
    cfg.splitShare = o->split_share == DIST_OPT_ON;
  return cfg;
}

static bool nonblocking(const dist_nccl_options *o) { return o->blocking == DIST_OPT_OFF; }

/* The parent's backend when a group may split its communicator: it exists,
 * is healthy, and runs in the child's blocking mode. The members and the
 * parent's other ranks decide alike (both see the same parent). */
static nccl_backend *split_parent(dist_pg *parent_cuda, const dist_nccl_options *child) {
  if (!parent_cuda || parent_cuda->ops != &dist__nccl_backend_ops)
    return NULL;
  nccl_backend *p = parent_cuda->priv;
  if (!p->have_comm || atomic_load(&p->comm_aborted) || atomic_load(&p->aborted) ||
      atomic_load(&p->broken_rc))
    return NULL;
  return nonblocking(&p->opts) == nonblocking(child) ? p : NULL;
}

/* A non-blocking communicator is ready when its state leaves
 * ncclInProgress: polled until the timeout, then aborted. */
static int wait_ready(const dist__nccl_api *api, ncclComm_t comm, const char *name,
                      const char *what, int64_t timeout_ms, dist__errbuf *err) {
  int64_t deadline = dist__deadline_ms(timeout_ms);
  for (unsigned spin = 0;; spin++) {
    ncclResult_t st = ncclInProgress;
    ncclResult_t e = api->CommGetAsyncError(comm, &st);
    if (e == ncclSuccess && st == ncclSuccess)
      return DIST_OK;
    if (e != ncclSuccess || st != ncclInProgress) {
      api->CommAbort(comm);
      return dist__err_set(err, DIST_E_BACKEND, "group %s: %s failed: %s", name, what,
                           api->GetErrorString(e != ncclSuccess ? e : st));
    }
    if (dist__now_ms() > deadline) {
      api->CommAbort(comm);
      return dist__err_set(err, DIST_E_TIMEOUT, "group %s: %s was not ready within %lld ms; "
                           "the communicator was aborted", name, what, (long long)timeout_ms);
    }
    if (spin > 100)
      nanosleep(&(struct timespec){0, 100000}, NULL);
  }
}

/* ncclCommSplit's colour: the same on every member (a hash of the member
 * list, as torch's), never NCCL_SPLIT_NOCOLOR. */
static int split_color(const int *global_ranks, int n) {
  uint32_t h = 2166136261u;
  for (int i = 0; i < n; i++) {
    h ^= (uint32_t)global_ranks[i];
    h *= 16777619u;
  }
  return (int)(h & 0x7fffffffu);
}

static int make_comm(nccl_backend *b, const dist_backend_init_args *a, dist__errbuf *err) {
  const dist__nccl_api *api = b->x.api;
  ncclConfig_t cfg = make_config(&b->opts);
  nccl_backend *p = a->parent ? split_parent(dist__pg_device_group(a->parent, DIST_DEVICE_CUDA),
                                             &b->opts) : NULL;
  ncclResult_t e;
  const char *what;
  if (p) {
    what = "ncclCommSplit";
    e = api->CommSplit(p->x.comm, split_color(a->global_ranks, a->size), b->x.rank, &b->x.comm,
                       &cfg);
    b->split = true;
  } else {
    ncclUniqueId id;
    DIST_TRY(share_id(b, a->store, &id, err));
    what = "ncclCommInitRankConfig";
    e = api->CommInitRankConfig(&b->x.comm, b->x.size, id, b->x.rank, &cfg);
  }
  if (e != ncclSuccess && !(e == ncclInProgress && nonblocking(&b->opts)))
    return dist__err_set(err, DIST_E_BACKEND, "group %s: %s: %s", b->name, what,
                         api->GetErrorString(e));
  if (nonblocking(&b->opts))
    DIST_TRY(wait_ready(api, b->x.comm, b->name, what, b->timeout_ms, err));
  b->have_comm = true;
  return DIST_OK;
}

int dist__nccl_nonmember_split(dist_pg *parent_cuda, const dist_nccl_options *child) {
  dist_nccl_options none = {0};
  nccl_backend *p = split_parent(parent_cuda, child ? child : &none);
  if (!p)
    return DIST_OK; /* the members build from a unique id: nothing to join */
  ncclConfig_t cfg = make_config(child ? child : &none);
  ncclComm_t nc = NULL;
  ncclResult_t e = p->x.api->CommSplit(p->x.comm, NCCL_SPLIT_NOCOLOR, p->x.rank, &nc, &cfg);
  if (e != ncclSuccess && !(e == ncclInProgress && nonblocking(&p->opts)))
    return dist__set_last_error(DIST_E_BACKEND, "group %s: ncclCommSplit (not a member): %s",
                                p->name, p->x.api->GetErrorString(e));
  dist__errbuf err;
  dist__err_clear(&err);
  int rc = nonblocking(&p->opts) ? wait_ready(p->x.api, p->x.comm, p->name,
                                              "ncclCommSplit (not a member)", p->timeout_ms, &err)
                                 : DIST_OK;
  if (rc != DIST_OK) {
    atomic_store(&p->comm_aborted, true); /* wait_ready aborted it */
    broken(p, rc, err.msg);
    return dist__set_last_error(rc, "%s", err.msg);
  }
  return DIST_OK;
}

static int make_stream(nccl_backend *b, dist__errbuf *err) {
  const dist__nccl_api *api = b->x.api;
  cudaError_t ce;
  if (b->opts.high_priority_stream == DIST_OPT_ON) {
    int least = 0, greatest = 0;
    ce = api->DeviceGetStreamPriorityRange(&least, &greatest);
    if (ce == cudaSuccess)
      ce = api->StreamCreateWithPriority(&b->x.stream, cudaStreamNonBlocking, greatest);
  } else {
    ce = api->StreamCreateWithFlags(&b->x.stream, cudaStreamNonBlocking);
  }
  if (ce == cudaSuccess) {
    b->have_stream = true;
    ce = api->Malloc(&b->x.barrier_buf, sizeof(float));
  }
  if (ce == cudaSuccess && (ce = api->StreamCreateWithFlags(&b->anchor_stream,
                                                             cudaStreamNonBlocking)) == cudaSuccess)
    b->have_anchor_stream = true;
  if (ce != cudaSuccess)
    return dist__err_set(err, DIST_E_BACKEND, "group %s: CUDA: %s", b->name,
                         api->CudaErrorString(ce));
  return dist__nccl_anchor_new(api, b->anchor_stream, &b->anchor, err);
}

static int open_comm(nccl_backend *b, const dist_backend_init_args *a, dist__errbuf *err) {
  DIST_TRY(check_opts(b->name, &b->opts, err));
  DIST_TRY(pick_device(b, err));
  DIST_TRY(make_comm(b, a, err));
  return make_stream(b, err);
}

static void release(nccl_backend *b) {
  const dist__nccl_api *api = b->x.api;
  if (b->have_comm)
    atomic_load(&b->comm_aborted) ? (void)0 : (void)api->CommDestroy(b->x.comm);
  if (b->x.barrier_buf)
    api->Free(b->x.barrier_buf);
  if (b->have_stream)
    api->StreamDestroy(b->x.stream);
  if (b->have_anchor_stream)
    api->StreamDestroy(b->anchor_stream);
  dist__nccl_anchor_unref(b->anchor);
  b->anchor = NULL;
  b->have_comm = b->have_stream = b->have_anchor_stream = false;
  b->x.barrier_buf = NULL;
}

static int nccl_init(void *priv, const dist_backend_init_args *a, dist_pg *self) {
  nccl_backend *b = priv;
  b->self = self;
  snprintf(b->name, sizeof b->name, "%s", a->group_name ? a->group_name : "?");
  b->x.name = b->name;
  b->x.rank = a->rank;
  b->x.size = a->size;
  b->timeout_ms = a->timeout_ms;
  b->bound = a->device_id;
  if (a->nccl_options)
    b->opts = *a->nccl_options;
  pthread_mutex_init(&b->mu, NULL);
  pthread_mutex_init(&b->wait_mu, NULL);
  pthread_cond_init(&b->cv, NULL);
  dist__nccl_track_init(&b->track);
  dist__errbuf err;
  dist__err_clear(&err);
  b->x.api = dist__nccl_api_get(&err);
  int rc = b->x.api ? DIST_OK : DIST_E_NOTSUP;
  if (rc == DIST_OK && !a->store)
    rc = dist__err_set(&err, DIST_E_INVAL, "the nccl backend needs a group store");
  if (rc == DIST_OK)
    rc = open_comm(b, a, &err);
  if (rc != DIST_OK) {
    if (b->x.api)
      release(b);
    dist__nccl_track_fini(&b->track);
    pthread_cond_destroy(&b->cv);
    pthread_mutex_destroy(&b->wait_mu);
    pthread_mutex_destroy(&b->mu);
    return dist_backend_set_error(self, rc, "%s", err.msg);
  }
  DIST_LOG(INFO, NCCL, "group %s: rank %d of %d on cuda:%d, communicator %s", b->name,
           b->x.rank, b->x.size, b->device, b->split ? "split from the parent's" : "from a unique id");
  return DIST_OK;
}

static void nccl_abort(void *priv, const char *reason) {
  nccl_backend *b = priv;
  static pthread_mutex_t reason_lock = PTHREAD_MUTEX_INITIALIZER;
  pthread_mutex_lock(&reason_lock);
  if (!atomic_load(&b->aborted)) {
    snprintf(b->abort_reason, sizeof b->abort_reason, "%s", reason ? reason : "aborted");
    atomic_store(&b->aborted, 1);
  }
  pthread_mutex_unlock(&reason_lock);
  pthread_mutex_lock(&b->mu);
  pthread_cond_broadcast(&b->cv);
  pthread_mutex_unlock(&b->mu);
}

static int nccl_async_error(void *priv) {
  nccl_backend *b = priv;
  if (atomic_load(&b->aborted))
    return DIST_E_ABORTED;
  return atomic_load(&b->broken_rc);
}

/* --- waiting ------------------------------------------------------------- */

static int broken(nccl_backend *b, int rc, const char *msg) {
  int zero = 0;
  if (atomic_load(&b->broken_rc) == 0) {
    snprintf(b->broken_msg, sizeof b->broken_msg, "%s", msg);
    atomic_compare_exchange_strong(&b->broken_rc, &zero, rc);
  }
  return rc;
}

/* Aborts the communicator once (waiters hold wait_mu). */
static void abort_comm(nccl_backend *b) {
  if (b->have_comm && !atomic_load(&b->comm_aborted)) {
    b->x.api->CommAbort(b->x.comm);
    atomic_store(&b->comm_aborted, true);
  }
}

/* Waits for ev until deadline: DIST_OK, or the failure with msg set. */
static int wait_event(nccl_backend *b, const dist_coll *c, cudaEvent_t ev, int64_t deadline,
                      char *msg, size_t len) {
  const dist__nccl_api *api = b->x.api;
  char d[160];
  int rc = DIST_OK;
  pthread_mutex_lock(&b->wait_mu);
  for (unsigned spin = 0;; spin++) {
    if (atomic_load(&b->broken_rc)) {
      rc = atomic_load(&b->broken_rc);
      snprintf(msg, len, "%s", b->broken_msg);
      break;
    }
    if (atomic_load(&b->aborted)) {
      abort_comm(b);
      rc = DIST_E_ABORTED;
      snprintf(msg, len, "group %s was aborted: %s", b->name, b->abort_reason);
      break;
    }
    cudaError_t q = api->EventQuery(ev);
    if (q == cudaSuccess)
      break;
    if (q != cudaErrorNotReady) {
      snprintf(msg, len, "%s #%llu on group %s: CUDA: %s", dist_coll_describe(c, d, sizeof d),
               (unsigned long long)c->seq, b->name, api->CudaErrorString(q));
      abort_comm(b);
      rc = broken(b, DIST_E_BACKEND, msg);
      break;
    }
    ncclResult_t ae = ncclSuccess;
    api->CommGetAsyncError(b->x.comm, &ae);
    if (ae != ncclSuccess && ae != ncclInProgress) {
      snprintf(msg, len, "%s #%llu on group %s: NCCL reported an asynchronous error: %s",
               dist_coll_describe(c, d, sizeof d), (unsigned long long)c->seq, b->name,
               api->GetErrorString(ae));
      abort_comm(b);
      rc = broken(b, DIST_E_BACKEND, msg);
      break;
    }
    if (dist__now_ms() > deadline) {
      snprintf(msg, len, "%s #%llu on group %s (rank %d of %d) timed out after %lld ms; the "
                         "NCCL communicator was aborted",
               dist_coll_describe(c, d, sizeof d), (unsigned long long)c->seq, b->name,
               b->x.rank, b->x.size, (long long)c->timeout_ms);
      abort_comm(b);
      rc = broken(b, DIST_E_TIMEOUT, msg);
      break;
    }
    if (spin > 100) {
      struct timespec ts = {0, 100000};
      nanosleep(&ts, NULL);
    }
  }
  pthread_mutex_unlock(&b->wait_mu);
  return rc;
}

/* --- submission ---------------------------------------------------------- */

/* A fresh anchor every DIST__NCCL_ANCHOR_S, so GPU times read as float
 * milliseconds since it stay precise; a failure keeps the old one. */
static void refresh_anchor(nccl_backend *b) {
  if (dist_clock_ns() - b->anchor->ns < DIST__NCCL_ANCHOR_S * 1000000000LL)
    return;
  dist__nccl_anchor *a = NULL;
  dist__errbuf err;
  dist__err_clear(&err);
  if (dist__nccl_anchor_new(b->x.api, b->anchor_stream, &a, &err) != DIST_OK) {
    DIST_LOG(DEBUG, NCCL, "group %s: %s", b->name, err.msg);
    return;
  }
  dist__nccl_anchor_unref(b->anchor);
  b->anchor = a;
}

/* Enqueues c after the caller's current stream, between its start and end
 * events, and records it as in flight. */
static int launch(nccl_backend *b, const dist_coll *c, dist__nccl_op **out, dist__errbuf *err) {
  if (atomic_load(&b->aborted))
    return dist__err_set(err, DIST_E_ABORTED, "group %s was aborted: %s", b->name,
                         b->abort_reason);
  if (atomic_load(&b->broken_rc))
    return dist__err_set(err, atomic_load(&b->broken_rc), "%s", b->broken_msg);
  refresh_anchor(b);
  dist__nccl_op *op;
  DIST_TRY(dist__nccl_op_new(b->x.api, b->anchor, &op, err));
  op->seq = c->seq;
  int rc = dist__nccl_op_begin(op, (cudaStream_t)dist_cuda_current_stream(), b->x.stream, err);
  if (rc == DIST_OK)
    rc = dist__nccl_enqueue(&b->x, c, err);
  if (rc == DIST_OK)
    rc = dist__nccl_op_end(op, b->x.stream, err);
  if (rc != DIST_OK) {
    dist__nccl_op_unref(op);
    return rc;
  }
  op->launched_ns = dist_clock_ns();
  dist__nccl_track_add(&b->track, op);
  *out = op;
  return DIST_OK;
}

/* op ended (or failed): its GPU times to the observers, then off the
 * record. c: the operation (the caller's, or the work's copy). */
static void ended(nccl_backend *b, dist__nccl_op *op, const dist_coll *c, int rc) {
  int64_t s = 0, e = 0;
  if (rc == DIST_OK)
    dist__nccl_op_times(op, &s, &e);
  if (s && e)
    dist_backend_gpu_times(b->self, c, s, e);
  dist__nccl_track_done(&b->track, op, s, e);
}

static void *progress_main(void *arg);

static int start_thread_locked(nccl_backend *b) {
  if (b->thread_started)
    return DIST_OK;
  int e = pthread_create(&b->thread, NULL, progress_main, b);
  if (e)
    return dist_backend_set_error(b->self, DIST_E_SYS, "cannot start the progress thread: %s",
                                  strerror(e));
  char name[16];
  snprintf(name, sizeof name, "dist-nccl-%d", b->x.rank);
  pthread_setname_np(b->thread, name);
  b->thread_started = true;
  return DIST_OK;
}

static int nccl_op(void *priv, const dist_coll *c, dist_work *w) {
  nccl_backend *b = priv;
  dist__errbuf err;
  dist__err_clear(&err);
  dist__nccl_op *op = NULL;
  int rc = launch(b, c, &op, &err);
  if (rc != DIST_OK)
    return dist_backend_set_error(b->self, rc, "%s", err.msg);
  int64_t deadline = dist__deadline_ms(c->timeout_ms);
  if (!w) {
    char msg[DIST_ERRMSG_LEN];
    rc = wait_event(b, c, op->end, deadline, msg, sizeof msg);
    ended(b, op, c, rc);
    return rc ? dist_backend_set_error(b->self, rc, "%s", msg) : DIST_OK;
  }
  op->w = w;
  op->deadline_ms = deadline;
  atomic_fetch_add(&op->refs, 1); /* the work's, until the user frees it */
  dist_backend_work_set_device(w, &dist__nccl_op_device, op);
  pthread_mutex_lock(&b->mu);
  rc = start_thread_locked(b);
  if (rc == DIST_OK) {
    op->next_async = NULL;
    if (b->tail)
      b->tail->next_async = op;
    else
      b->head = op;
    b->tail = op;
    pthread_cond_broadcast(&b->cv);
  }
  pthread_mutex_unlock(&b->mu);
  if (rc != DIST_OK) /* the work is discarded with its reference */
    dist__nccl_track_done(&b->track, op, 0, 0);
  return rc;
}

/* Completes asynchronous works in issue order (the stream's order). */
static void *progress_main(void *arg) {
  nccl_backend *b = arg;
  pthread_mutex_lock(&b->mu);
  for (;;) {
    if (!b->head) {
      if (b->stop)
        break;
      pthread_cond_wait(&b->cv, &b->mu);
      continue;
    }
    dist__nccl_op *op = b->head;
    pthread_mutex_unlock(&b->mu);
    char msg[DIST_ERRMSG_LEN];
    msg[0] = '\0';
    dist_work *w = op->w;
    int rc = wait_event(b, dist_work_coll(w), op->end, op->deadline_ms, msg, sizeof msg);
    pthread_mutex_lock(&b->mu);
    b->head = op->next_async;
    if (!b->head)
      b->tail = NULL;
    pthread_mutex_unlock(&b->mu);
    ended(b, op, dist_work_coll(w), rc);
    dist_backend_work_done(w, rc, -1, msg);
    pthread_mutex_lock(&b->mu);
  }
  pthread_mutex_unlock(&b->mu);
  return NULL;
}

static int nccl_gpu_progress(void *priv, uint64_t seq, dist_gpu_progress *out) {
  nccl_backend *b = priv;
  return dist__nccl_track_query(&b->track, seq, out);
}

static void nccl_fini(void *priv) {
  nccl_backend *b = priv;
  pthread_mutex_lock(&b->mu);
  bool pending_work = b->head != NULL;
  pthread_mutex_unlock(&b->mu);
  if (pending_work)
    nccl_abort(b, "the group was destroyed with operations pending");
  pthread_mutex_lock(&b->mu);
  b->stop = true;
  pthread_cond_broadcast(&b->cv);
  bool join = b->thread_started;
  pthread_mutex_unlock(&b->mu);
  if (join)
    pthread_join(b->thread, NULL);
  dist__nccl_track_fini(&b->track);
  release(b);
  pthread_cond_destroy(&b->cv);
  pthread_mutex_destroy(&b->wait_mu);
  pthread_mutex_destroy(&b->mu);
}

const dist_backend_ops dist__nccl_backend_ops = {
    .abi_version = DIST_BACKEND_ABI_VERSION,
    .name = "nccl",
    .caps = DIST_CAP_CUDA,
    .priv_size = sizeof(nccl_backend),
    .init = nccl_init,
    .fini = nccl_fini,
    .abort = nccl_abort,
    .send = nccl_op,
    .recv = nccl_op,
    .batch_p2p = nccl_op,
    .broadcast = nccl_op,
    .all_reduce = nccl_op,
    .reduce = nccl_op,
    .all_gather = nccl_op,
    .gather = nccl_op,
    .scatter = nccl_op,
    .reduce_scatter = nccl_op,
    .all_to_all = nccl_op,
    .barrier = nccl_op,
    .async_error = nccl_async_error,
    .gpu_progress = nccl_gpu_progress,
};
