/* work.c - work handles: the asynchronous form of every operation.
 *
 * A work owns a deep copy of its descriptor (tensor descriptors, split
 * sizes, batch entries; the tensor data stays borrowed), so callers may pass
 * arrays on their stack. Two references keep it alive: the caller's handle
 * (dist_work_free) and the backend's (dropped when it completes the work),
 * so freeing a pending handle never pulls memory from under a backend.
 *
 * A work that completes on a device (dist_backend_work_set_device: a CUDA
 * operation) is waited for as torch's Work.wait(): once launched, the
 * waiter's current stream is made to wait for its end on the device and
 * the host goes on; dist_work_synchronize is the host-blocking form. */
#include <stdio.h>

#include "pg_int.h"

static size_t arena_size(const dist_coll *c) {
  return sizeof(dist_tensor) * (c->n_inputs + c->n_outputs) +
         sizeof(int64_t) * 2 * c->n_splits + sizeof(dist_coll_p2p) * c->n_p2p;
}

/* Copies the arrays of c into one block; w->coll points into it. */
static void clone_arrays(dist_work *w, const dist_coll *c, char *p) {
  w->coll = *c;
  if (c->n_inputs) {
    memcpy(p, c->inputs, sizeof(dist_tensor) * c->n_inputs);
    w->coll.inputs = (const dist_tensor *)p;
    p += sizeof(dist_tensor) * c->n_inputs;
  }
  if (c->n_outputs) {
    /* In-place kinds pass the same tensor as input and output. */
    if (c->outputs == c->inputs && c->n_outputs == c->n_inputs) {
      w->coll.outputs = w->coll.inputs;
    } else {
      memcpy(p, c->outputs, sizeof(dist_tensor) * c->n_outputs);
      w->coll.outputs = (const dist_tensor *)p;
      p += sizeof(dist_tensor) * c->n_outputs;
    }
  }
  if (c->n_splits) {
    int64_t *s = (int64_t *)p;
    w->coll.in_splits = c->in_splits ? memcpy(s, c->in_splits, sizeof(int64_t) * c->n_splits) : NULL;
    w->coll.out_splits =
        c->out_splits ? memcpy(s + c->n_splits, c->out_splits, sizeof(int64_t) * c->n_splits) : NULL;
    p += sizeof(int64_t) * 2 * c->n_splits;
  }
  if (c->n_p2p) {
    memcpy(p, c->p2p, sizeof(dist_coll_p2p) * c->n_p2p);
    w->coll.p2p = (const dist_coll_p2p *)p;
  }
}

static dist_work *work_alloc(dist_pg *g) {
  dist_work *w = dist__calloc(1, sizeof *w);
  if (!w)
    return NULL;
  w->pg = g;
  w->src_rank = -1;
  pthread_mutex_init(&w->mu, NULL);
  pthread_cond_init(&w->cv, NULL);
  atomic_init(&w->refs, 2);
  return w;
}

int dist__work_new(dist_pg *g, const dist_coll *c, dist_work **out) {
  dist_work *w = work_alloc(g);
  if (!w)
    return DIST_E_NOMEM;
  size_t n = arena_size(c);
  if (n) {
    w->arena = dist__malloc(n);
    if (!w->arena) {
      dist__work_unref(w);
      dist__work_unref(w);
      return DIST_E_NOMEM;
    }
  }
  clone_arrays(w, c, w->arena);
  *out = w;
  return DIST_OK;
}

int dist__work_new_done(dist_pg *g, int rc, dist_work **out) {
  dist_work *w = work_alloc(g);
  if (!w)
    return DIST_E_NOMEM;
  w->status = rc;
  atomic_store(&w->state, WORK_DONE);
  atomic_store(&w->released, true);
  dist__work_unref(w); /* no backend holds it */
  *out = w;
  return DIST_OK;
}

/* --- stale handles -------------------------------------------------------- */

/* A work whose last reference went keeps its shell, the struct alone (its
 * arrays, callbacks and device events are released at once), among the
 * last SHELLS_KEPT, so a call on a handle freed a moment ago finds it
 * marked and fails with DIST_E_INVAL instead of reading freed memory (a
 * wait after dist_work_free, a second free). A handle freed while its
 * operation runs stays a live work until the backend completes it: a wait
 * on it then waits, and callbacks and futures read its real outcome. An older handle is undefined,
 * as any freed pointer in C (pg.h). Lock-free: each slot is swapped once
 * per work, and the shell pushed out is freed by whoever pushed it. */
#define SHELLS_KEPT 64
static _Atomic(dist_work *) shells[SHELLS_KEPT];
static _Atomic unsigned shell_next;

static void keep_shell(dist_work *w) {
  unsigned i = atomic_fetch_add_explicit(&shell_next, 1, memory_order_relaxed);
  dist__free(atomic_exchange(&shells[i % SHELLS_KEPT], w));
}

bool dist__work_stale(dist_work *w, const char *fn) {
  /* Freed by the program and released to waiters (its callbacks have
   * run): stale at once, whether or not the backend has dropped its
   * reference yet (it may a moment after the release: a TCP progress
   * thread), so the outcome does not depend on that moment. */
  bool freed_done = atomic_load_explicit(&w->freed, memory_order_acquire) &&
                    atomic_load_explicit(&w->released, memory_order_acquire);
  if (!freed_done && !atomic_load_explicit(&w->dead, memory_order_acquire))
    return false;
  dist__set_last_error(DIST_E_INVAL, "%s: a stale handle (the work was freed with "
                       "dist_work_free)", fn);
  return true;
}

void dist__work_unref(dist_work *w) {
  if (atomic_fetch_sub(&w->refs, 1) != 1)
    return;
  pthread_mutex_destroy(&w->mu);
  pthread_cond_destroy(&w->cv);
  for (dist__work_cb *c = w->cbs, *next; c; c = next) {
    next = c->next;
    dist__free(c);
  }
  w->cbs = NULL;
  if (w->dev_ops && w->dev_ops->release)
    w->dev_ops->release(w->dev_ctx);
  w->dev_ops = NULL;
  dist__free(w->arena);
  w->arena = NULL;
  atomic_store_explicit(&w->dead, true, memory_order_release);
  keep_shell(w);
}

/* --- for backends -------------------------------------------------------- */

const dist_coll *dist_work_coll(const dist_work *w) { return &w->coll; }

void **dist_work_backend_slot(dist_work *w) { return &w->backend_slot; }

void dist_backend_work_set_device(dist_work *w, const dist_work_device_ops *ops, void *ctx) {
  if (!w || !ops || !ops->stream_wait)
    return;
  pthread_mutex_lock(&w->mu);
  w->dev_ctx = ctx;
  w->dev_ops = ops;
  pthread_cond_broadcast(&w->cv); /* a waiter held until the launch goes on */
  pthread_mutex_unlock(&w->mu);
}

void dist_backend_work_start(dist_work *w) {
  bool expected = false;
  if (!atomic_compare_exchange_strong(&w->started, &expected, true))
    return;
  if (!w->pg->internal && !w->quiet && dist__obs_on())
    dist__obs_emit(w->pg, DIST_EV_OP_STARTED, &w->coll, DIST_OK, -1, NULL);
}

void dist__work_complete(dist_work *w, int rc, int src_global, const char *msg) {
  dist_pg *g = w->pg;
  if (rc != DIST_OK) {
    snprintf(w->errmsg, sizeof w->errmsg, "%s",
             msg && *msg ? msg : dist_strerror(rc));
    if (!w->quiet)
      dist__pg_report(g, rc, &w->coll, w->errmsg, sizeof w->errmsg);
    if (rc == DIST_E_ABORTED || rc == DIST_E_TIMEOUT || rc == DIST_E_PEER_LOST) {
      int expected = DIST_OK;
      atomic_compare_exchange_strong(&g->async_error, &expected, rc);
    }
    /* Failed by the program's destroy of its group (fini, on this thread):
     * counted for the cause dist__pg_free posts. */
    if (rc == DIST_E_ABORTED && !w->quiet && atomic_load(&g->destroying) &&
        atomic_fetch_add(&g->destroy_failed, 1) == 0) {
      g->destroy_kind = (int)w->coll.kind;
      g->destroy_seq = w->coll.seq;
    }
    /* A wrapper's work (g->inner) fails here only with what its inner group
     * found, so the post is once per work either way. */
    if (!w->quiet)
      dist__cause_post_failure(g, &w->coll, rc, w->errmsg);
  }
  w->status = rc;
  w->src_rank = src_global;
  if (!g->internal && !w->quiet && dist__obs_on()) {
    dist_backend_work_start(w);
    dist__obs_emit(g,
                   rc == DIST_OK ? DIST_EV_OP_COMPLETED
                   : rc == DIST_E_TIMEOUT ? DIST_EV_OP_TIMED_OUT
                                          : DIST_EV_OP_FAILED,
                   &w->coll, rc, -1, rc ? w->errmsg : NULL);
  }
  /* The outcome is readable (dist_work_status) before callbacks run, and
   * waiters are released only after them, so whoever returns from
   * dist_work_wait sees their effects. A callback set meanwhile is picked
   * up by the next round; once released, set_callback runs it itself. */
  atomic_store_explicit(&w->state, WORK_DONE, memory_order_release);
  pthread_mutex_lock(&w->mu);
  while (w->cb || w->cbs) {
    dist_work_callback cb = w->cb;
    void *arg = w->cb_arg;
    dist__work_cb *node = NULL;
    if (cb) {
      w->cb = NULL;
    } else { /* the added ones, oldest first */
      node = w->cbs;
      w->cbs = node->next;
      if (!w->cbs)
        w->cbs_tail = NULL;
      cb = node->fn;
      arg = node->arg;
    }
    pthread_mutex_unlock(&w->mu);
    cb(w, arg);
    dist__free(node);
    pthread_mutex_lock(&w->mu);
  }
  atomic_store_explicit(&w->released, true, memory_order_release);
  pthread_cond_broadcast(&w->cv);
  pthread_mutex_unlock(&w->mu);
}

void dist_backend_work_done(dist_work *w, int rc, int src_group_rank, const char *msg) {
  if (!w)
    return;
  dist_pg *g = w->pg;
  int src = src_group_rank >= 0 && src_group_rank < g->info.size
                ? g->global_ranks[src_group_rank]
                : -1;
  dist__work_complete(w, rc, src, msg);
  dist__work_unref(w);
}

/* --- for users ----------------------------------------------------------- */

static bool is_done(dist_work *w) {
  return atomic_load_explicit(&w->state, memory_order_acquire) == WORK_DONE;
}

static bool is_released(dist_work *w) {
  return atomic_load_explicit(&w->released, memory_order_acquire);
}

static void deadline_of(int64_t timeout_ms, struct timespec *until) {
  clock_gettime(CLOCK_REALTIME, until);
  int64_t ms = timeout_ms > 0 ? timeout_ms : INT32_MAX;
  until->tv_sec += ms / 1000;
  until->tv_nsec += (ms % 1000) * 1000000;
  if (until->tv_nsec >= 1000000000) {
    until->tv_sec++;
    until->tv_nsec -= 1000000000;
  }
}

/* The outcome of a released work, its failure kept on the group too. */
static int outcome(dist_work *w) {
  if (w->status != DIST_OK) {
    /* The group keeps it too (dist_pg_errmsg): the waiter is the group's
     * caller thread, the one writer of its message. */
    dist_pg *keep = !w->quiet && w->pg && w->pg != DIST_GROUP_NON_MEMBER ? w->pg : NULL;
    if (keep)
      dist__err_clear(&keep->err);
    dist__err_set(keep ? &keep->err : NULL, w->status, "%s", w->errmsg);
  }
  return w->status;
}

static _Atomic(dist__work_wait_hook) wait_hook;

void dist__set_work_wait_hook(dist__work_wait_hook fn) { atomic_store(&wait_hook, fn); }

/* Tells the hook this thread starts or stops waiting for w. */
static void tell_waiting(dist_work *w, bool entering) {
  dist__work_wait_hook fn = atomic_load_explicit(&wait_hook, memory_order_acquire);
  if (fn && !w->quiet && w->pg && w->pg != DIST_GROUP_NON_MEMBER)
    fn(w->pg, &w->coll, entering);
}

/* Blocks until w is released, or (on_device) until it is launched on a
 * device, then makes the current stream wait for it there. */
static int wait_work(dist_work *w, int64_t timeout_ms, bool on_device) {
  if (!w)
    return dist__set_last_error(DIST_E_INVAL, "dist_work_wait: NULL work");
  if (dist__work_stale(w, on_device ? "dist_work_wait" : "dist_work_synchronize"))
    return DIST_E_INVAL;
  if (is_released(w))
    return outcome(w);
  struct timespec until;
  deadline_of(timeout_ms, &until);
  const dist_work_device_ops *dev = NULL;
  bool told = timeout_ms != 0;
  if (told)
    tell_waiting(w, true);
  pthread_mutex_lock(&w->mu);
  int err = 0;
  while (!is_released(w) && !(on_device && w->dev_ops) && err != ETIMEDOUT && timeout_ms != 0)
    err = pthread_cond_timedwait(&w->cv, &w->mu, &until);
  dev = on_device && !is_released(w) ? w->dev_ops : NULL;
  pthread_mutex_unlock(&w->mu);
  if (told)
    tell_waiting(w, false);
  if (dev) {
    int rc = dev->stream_wait(w->dev_ctx, dist_cuda_current_stream());
    return rc == DIST_OK ? DIST_OK : dist__set_last_error(rc, "%s #%llu: %s",
                                                          dist_op_name(w->coll.kind),
                                                          (unsigned long long)w->coll.seq,
                                                          dist_last_errmsg());
  }
  if (is_released(w))
    return outcome(w);
  if (timeout_ms == 0)
    return dist__set_last_error(DIST_E_TIMEOUT, "%s #%llu is still running",
                                dist_op_name(w->coll.kind), (unsigned long long)w->coll.seq);
  return dist__set_last_error(DIST_E_TIMEOUT, "waiting for %s #%llu timed out after %lld ms",
                              dist_op_name(w->coll.kind), (unsigned long long)w->coll.seq,
                              (long long)timeout_ms);
}

int dist_work_wait(dist_work *w, int64_t timeout_ms) { return wait_work(w, timeout_ms, true); }

int dist_work_synchronize(dist_work *w, int64_t timeout_ms) {
  return wait_work(w, timeout_ms, false);
}

/* A stale handle reads as a work that completed with DIST_E_INVAL. */
bool dist_work_is_completed(dist_work *w) {
  return w && (dist__work_stale(w, "dist_work_is_completed") || is_done(w));
}

bool dist_work_is_success(dist_work *w) {
  return w && !dist__work_stale(w, "dist_work_is_success") && is_done(w) && w->status == DIST_OK;
}

int dist_work_status(dist_work *w) {
  if (w && dist__work_stale(w, "dist_work_status"))
    return DIST_E_INVAL;
  return w && is_done(w) ? w->status : DIST_OK;
}

const char *dist_work_errmsg(dist_work *w) {
  if (w && dist__work_stale(w, "dist_work_errmsg"))
    return "a stale handle (the work was freed with dist_work_free)";
  return w && is_done(w) ? w->errmsg : "";
}

int dist_work_source_rank(dist_work *w, int *rank) {
  if (!w || !rank)
    return dist__set_last_error(DIST_E_INVAL, "dist_work_source_rank: NULL argument");
  if (dist__work_stale(w, "dist_work_source_rank"))
    return DIST_E_INVAL;
  if (!is_done(w))
    return dist__set_last_error(DIST_E_INVAL, "the work has not completed yet");
  if (w->coll.kind != DIST_OP_RECV || w->src_rank < 0)
    return dist__set_last_error(DIST_E_INVAL, "%s has no source rank",
                                dist_op_name(w->coll.kind));
  *rank = w->src_rank;
  return DIST_OK;
}

int dist_work_set_callback(dist_work *w, dist_work_callback cb, void *arg) {
  if (!w || !cb)
    return dist__set_last_error(DIST_E_INVAL, "dist_work_set_callback: NULL argument");
  if (dist__work_stale(w, "dist_work_set_callback"))
    return DIST_E_INVAL;
  pthread_mutex_lock(&w->mu);
  bool done = is_released(w);
  if (!done) {
    w->cb = cb;
    w->cb_arg = arg;
  }
  pthread_mutex_unlock(&w->mu);
  if (done)
    cb(w, arg);
  return DIST_OK;
}

void dist_work_free(dist_work *w) {
  bool was = false;
  if (!w)
    return;
  if (!atomic_compare_exchange_strong(&w->freed, &was, true)) {
    DIST_LOG(WARNING, CORE, "dist_work_free: the work was freed already (a stale handle): "
             "ignored");
    return;
  }
  dist__work_unref(w);
}
