/* future.c - torch's Work.get_future and Future: several callbacks per
 * work, run in order; futures that carry a status and a message, complete
 * once, chain with then, and are waited on with a timeout.
 *
 * A future completes exactly once: from its work (dist_work_get_future),
 * from the function of dist_future_then, or by dist_future_set_result.
 * Its callbacks run in the order added, on the completing thread, before
 * waiters are released (the rule of dist_work_set_callback). A future is
 * reference counted: the user's handle, plus one for whatever will complete
 * it (a work's callback, a parent's then), so the user may free it at any
 * time. */
#include <errno.h>
#include <stdio.h>
#include <time.h>

#include "pg_int.h"

typedef struct fut_cb {
  dist_future_callback fn;
  void *arg;
  struct fut_cb *next;
} fut_cb;

struct dist_future {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  _Atomic int refs;
  bool done;     /* status and message are set */
  bool released; /* callbacks ran: waiters may return */
  int status;
  char errmsg[DIST_ERRMSG_LEN];
  fut_cb *cbs, **tail;
};

/* --- several callbacks per work ------------------------------------------ */

int dist_work_add_callback(dist_work *w, dist_work_callback cb, void *arg) {
  if (!w || !cb)
    return dist__set_last_error(DIST_E_INVAL, "dist_work_add_callback: NULL argument");
  if (dist__work_stale(w, "dist_work_add_callback"))
    return DIST_E_INVAL;
  dist__work_cb *node = dist__malloc(sizeof *node);
  if (!node)
    return dist__set_last_error(DIST_E_NOMEM, "dist_work_add_callback: out of memory");
  *node = (dist__work_cb){cb, arg, NULL};
  pthread_mutex_lock(&w->mu);
  bool done = atomic_load_explicit(&w->released, memory_order_acquire);
  if (!done) {
    if (w->cbs_tail)
      *w->cbs_tail = node;
    else
      w->cbs = node;
    w->cbs_tail = &node->next;
  }
  pthread_mutex_unlock(&w->mu);
  if (done) { /* as set_callback: at once, on the caller's thread */
    dist__free(node);
    cb(w, arg);
  }
  return DIST_OK;
}

/* --- futures ------------------------------------------------------------- */

static void unref(dist_future *f) {
  if (atomic_fetch_sub(&f->refs, 1) != 1)
    return;
  for (fut_cb *c = f->cbs, *next; c; c = next) {
    next = c->next;
    dist__free(c);
  }
  pthread_mutex_destroy(&f->mu);
  pthread_cond_destroy(&f->cv);
  dist__free(f);
}

static dist_future *alloc_future(int refs) {
  dist_future *f = dist__calloc(1, sizeof *f);
  if (!f)
    return NULL;
  pthread_mutex_init(&f->mu, NULL);
  pthread_cond_init(&f->cv, NULL);
  atomic_init(&f->refs, refs);
  f->tail = &f->cbs;
  return f;
}

/* Sets the outcome once and runs the callbacks; false if already done. */
static bool complete(dist_future *f, int status, const char *msg) {
  pthread_mutex_lock(&f->mu);
  if (f->done) {
    pthread_mutex_unlock(&f->mu);
    return false;
  }
  f->done = true;
  f->status = status;
  snprintf(f->errmsg, sizeof f->errmsg, "%s",
           status == DIST_OK ? "" : msg && *msg ? msg : dist_strerror(status));
  while (f->cbs) {
    fut_cb *c = f->cbs;
    f->cbs = c->next;
    if (!f->cbs)
      f->tail = &f->cbs;
    pthread_mutex_unlock(&f->mu);
    c->fn(f, c->arg);
    dist__free(c);
    pthread_mutex_lock(&f->mu);
  }
  f->released = true;
  pthread_cond_broadcast(&f->cv);
  pthread_mutex_unlock(&f->mu);
  return true;
}

int dist_future_new(dist_future **out) {
  if (!out)
    return dist__set_last_error(DIST_E_INVAL, "dist_future_new: NULL argument");
  *out = alloc_future(1);
  return *out ? DIST_OK : dist__set_last_error(DIST_E_NOMEM, "dist_future_new: out of memory");
}

int dist_future_set_result(dist_future *f, int status, const char *msg) {
  if (!f)
    return dist__set_last_error(DIST_E_INVAL, "dist_future_set_result: NULL future");
  if (!complete(f, status, msg))
    return dist__set_last_error(DIST_E_INVAL, "dist_future_set_result: the future has "
                                              "already completed");
  return DIST_OK;
}

static void from_work(dist_work *w, void *arg) {
  dist_future *f = arg;
  complete(f, dist_work_status(w), dist_work_errmsg(w));
  unref(f);
}

int dist_work_get_future(dist_work *w, dist_future **out) {
  if (!w || !out)
    return dist__set_last_error(DIST_E_INVAL, "dist_work_get_future: NULL argument");
  if (dist__work_stale(w, "dist_work_get_future"))
    return DIST_E_INVAL;
  dist_future *f = alloc_future(2); /* the user's, and the work callback's */
  if (!f)
    return dist__set_last_error(DIST_E_NOMEM, "dist_work_get_future: out of memory");
  int rc = dist_work_add_callback(w, from_work, f);
  if (rc != DIST_OK) {
    unref(f);
    unref(f);
    return rc;
  }
  *out = f;
  return DIST_OK;
}

int dist_future_add_callback(dist_future *f, dist_future_callback cb, void *arg) {
  if (!f || !cb)
    return dist__set_last_error(DIST_E_INVAL, "dist_future_add_callback: NULL argument");
  fut_cb *c = dist__malloc(sizeof *c);
  if (!c)
    return dist__set_last_error(DIST_E_NOMEM, "dist_future_add_callback: out of memory");
  *c = (fut_cb){cb, arg, NULL};
  pthread_mutex_lock(&f->mu);
  bool done = f->released;
  if (!done) {
    *f->tail = c;
    f->tail = &c->next;
  }
  pthread_mutex_unlock(&f->mu);
  if (done) {
    dist__free(c);
    cb(f, arg);
  }
  return DIST_OK;
}

typedef struct then_arg {
  dist_future_fn fn;
  void *arg;
  dist_future *child;
} then_arg;

static void run_then(dist_future *parent, void *p) {
  then_arg *t = p;
  int rc = t->fn(parent, t->arg);
  char msg[DIST_ERRMSG_LEN];
  if (rc == DIST_OK || rc == parent->status)
    snprintf(msg, sizeof msg, "%s", parent->errmsg);
  else
    snprintf(msg, sizeof msg, "the then callback failed with %s", dist_status_name(rc));
  complete(t->child, rc, msg);
  unref(t->child);
  dist__free(t);
}

int dist_future_then(dist_future *f, dist_future_fn fn, void *arg, dist_future **out) {
  if (!f || !fn || !out)
    return dist__set_last_error(DIST_E_INVAL, "dist_future_then: NULL argument");
  then_arg *t = dist__malloc(sizeof *t);
  dist_future *child = alloc_future(2); /* the user's, and the parent's then */
  if (!t || !child) {
    dist__free(t);
    if (child)
      unref(child), unref(child);
    return dist__set_last_error(DIST_E_NOMEM, "dist_future_then: out of memory");
  }
  *t = (then_arg){fn, arg, child};
  *out = child;
  int rc = dist_future_add_callback(f, run_then, t);
  if (rc != DIST_OK) {
    dist__free(t);
    unref(child);
    unref(child);
    *out = NULL;
  }
  return rc;
}

int dist_future_wait(dist_future *f, int64_t timeout_ms) {
  if (!f)
    return dist__set_last_error(DIST_E_INVAL, "dist_future_wait: NULL future");
  struct timespec until;
  clock_gettime(CLOCK_REALTIME, &until);
  int64_t ms = timeout_ms >= 0 ? timeout_ms : INT32_MAX;
  until.tv_sec += ms / 1000;
  until.tv_nsec += (ms % 1000) * 1000000;
  if (until.tv_nsec >= 1000000000) {
    until.tv_sec++;
    until.tv_nsec -= 1000000000;
  }
  pthread_mutex_lock(&f->mu);
  int err = 0;
  while (!f->released && err != ETIMEDOUT && timeout_ms != 0)
    err = pthread_cond_timedwait(&f->cv, &f->mu, &until);
  bool released = f->released;
  int status = f->status;
  pthread_mutex_unlock(&f->mu);
  if (!released)
    return dist__set_last_error(DIST_E_TIMEOUT, "waiting for a future timed out after %lld ms",
                                (long long)timeout_ms);
  if (status != DIST_OK)
    dist__set_last_error(status, "%s", f->errmsg);
  return status;
}

bool dist_future_is_done(dist_future *f) {
  if (!f)
    return false;
  pthread_mutex_lock(&f->mu);
  bool done = f->done;
  pthread_mutex_unlock(&f->mu);
  return done;
}

int dist_future_status(dist_future *f) {
  if (!f)
    return DIST_E_INVAL;
  pthread_mutex_lock(&f->mu);
  int rc = f->done ? f->status : DIST_OK;
  pthread_mutex_unlock(&f->mu);
  return rc;
}

const char *dist_future_errmsg(dist_future *f) {
  if (!f)
    return "";
  pthread_mutex_lock(&f->mu);
  const char *m = f->done ? f->errmsg : "";
  pthread_mutex_unlock(&f->mu);
  return m;
}

void dist_future_free(dist_future *f) {
  if (f)
    unref(f);
}
