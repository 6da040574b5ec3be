/* store_hash.c - the in-process store (torch's HashStore): one key/value
 * engine behind a mutex, shared by a handle and its clones.
 *
 * A blocking call (get, multi_get, wait, blocking queue_pop) registers a
 * waiter with the engine and sleeps on its own condition variable; the
 * thread that sets the key (or pushes the item) signals exactly the waiters
 * it satisfies, under the mutex, so there is no thundering herd and no lost
 * wake-up. Deadlines use CLOCK_MONOTONIC. */
#include <pthread.h>

#include "store_int.h"
#include "store_kv.h"

typedef struct hash_shared {
  pthread_mutex_t mu;
  dist__kv *kv;
  _Atomic int refs;
} hash_shared;

typedef struct hwait {
  dist__kv_waiter w;
  pthread_cond_t cv;
  bool woken;
} hwait;

static const dist__store_ops hash_ops;

static hash_shared *H(dist_store *s) { return s->impl; }

static void hwait_wake(dist__kv_waiter *w) {
  hwait *hw = w->arg;
  hw->woken = true;
  pthread_cond_signal(&hw->cv);
}

static void hwait_init(hwait *hw) {
  memset(hw, 0, sizeof *hw);
  pthread_condattr_t a;
  pthread_condattr_init(&a);
  pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
  pthread_cond_init(&hw->cv, &a);
  pthread_condattr_destroy(&a);
  hw->w.wake = hwait_wake;
  hw->w.arg = hw;
}

/* Sleeps (mutex held) until hw is woken or the deadline passes. */
static void sleep_until(hash_shared *h, hwait *hw, int64_t deadline_ns) {
  struct timespec ts = {deadline_ns / 1000000000, deadline_ns % 1000000000};
  while (!hw->woken)
    if (pthread_cond_timedwait(&hw->cv, &h->mu, &ts) == ETIMEDOUT)
      break;
}

static int64_t deadline_ns(int64_t timeout_ms) {
  int64_t now = dist__now_ns();
  return timeout_ms > (INT64_MAX - now) / 2000000 ? INT64_MAX / 2 : now + timeout_ms * 1000000;
}

/* Waits (mutex held) until every key exists; DIST_E_TIMEOUT names the
 * missing ones. */
static int wait_locked(dist_store *s, const char *const *keys, size_t n, int64_t timeout_ms,
                       const char *what) {
  hash_shared *h = H(s);
  hwait hw;
  hwait_init(&hw);
  int64_t dl = deadline_ns(timeout_ms);
  int rc = DIST_OK;
  for (;;) {
    bool registered;
    rc = dist__kv_watch_keys(h->kv, &hw.w, keys, n, &registered, &s->err);
    if (rc != DIST_OK || !registered)
      break;
    hw.woken = false;
    sleep_until(h, &hw, dl);
    dist__kv_unwatch(h->kv, &hw.w);
    /* Woken means "all appeared at some point"; loop to re-check, since a
     * key may have been deleted again before we got the mutex back. */
    if (!hw.woken && dist__now_ns() >= dl) {
      bool *present = dist__calloc(n, sizeof *present); /* NULL: name them all */
      for (size_t i = 0; present && i < n; i++)
        present[i] = dist__kv_has(h->kv, keys[i]);
      rc = dist__store_timeout(&s->err, timeout_ms, what, keys, n, present);
      dist__free(present);
      break;
    }
  }
  dist__kv_unwatch(h->kv, &hw.w);
  pthread_cond_destroy(&hw.cv);
  return rc;
}

/* --- ops ------------------------------------------------------------------- */

static int h_set(dist_store *s, const char *key, const void *val, size_t len) {
  pthread_mutex_lock(&H(s)->mu);
  int rc = dist__kv_set(H(s)->kv, key, val, len, &s->err);
  pthread_mutex_unlock(&H(s)->mu);
  return rc;
}

static int h_multi_get(dist_store *s, const char *const *keys, size_t n,
                       int64_t timeout_ms, void **vals, size_t *lens) {
  hash_shared *h = H(s);
  pthread_mutex_lock(&h->mu);
  int rc = wait_locked(s, keys, n, timeout_ms, n == 1 ? "get" : "multi_get");
  for (size_t i = 0; i < n && rc == DIST_OK; i++) {
    const void *v;
    if (!dist__kv_get(h->kv, keys[i], &v, &lens[i]))
      rc = dist__err_set(&s->err, DIST_E_INTERNAL, "key '%s' vanished", keys[i]);
    else
      rc = dist__store_dup_value(&s->err, v, lens[i], &vals[i]);
  }
  pthread_mutex_unlock(&h->mu);
  if (rc != DIST_OK)
    for (size_t i = 0; i < n; i++) {
      dist__free(vals[i]);
      vals[i] = NULL;
    }
  return rc;
}

static int h_get(dist_store *s, const char *key, int64_t timeout_ms, void **val,
                 size_t *len) {
  return h_multi_get(s, &key, 1, timeout_ms, val, len);
}

static int h_add(dist_store *s, const char *key, int64_t delta, int64_t *result) {
  pthread_mutex_lock(&H(s)->mu);
  int rc = dist__kv_add(H(s)->kv, key, delta, result, &s->err);
  pthread_mutex_unlock(&H(s)->mu);
  return rc;
}

static int h_append(dist_store *s, const char *key, const void *val, size_t len) {
  pthread_mutex_lock(&H(s)->mu);
  int rc = dist__kv_append(H(s)->kv, key, val, len, &s->err);
  pthread_mutex_unlock(&H(s)->mu);
  return rc;
}

static int h_check(dist_store *s, const char *const *keys, size_t n, bool *all) {
  pthread_mutex_lock(&H(s)->mu);
  for (size_t i = 0; i < n && *all; i++)
    *all = dist__kv_has(H(s)->kv, keys[i]);
  pthread_mutex_unlock(&H(s)->mu);
  return DIST_OK;
}

static int h_compare_set(dist_store *s, const char *key, const void *exp, size_t elen,
                         const void *des, size_t dlen, void **res, size_t *rlen) {
  pthread_mutex_lock(&H(s)->mu);
  const void *r;
  int rc = dist__kv_compare_set(H(s)->kv, key, exp, elen, des, dlen, &r, rlen, &s->err);
  if (rc == DIST_OK)
    rc = dist__store_dup_value(&s->err, r, *rlen, res);
  pthread_mutex_unlock(&H(s)->mu);
  return rc;
}

static int h_delete_key(dist_store *s, const char *key, bool *deleted) {
  pthread_mutex_lock(&H(s)->mu);
  *deleted = dist__kv_delete(H(s)->kv, key);
  pthread_mutex_unlock(&H(s)->mu);
  return DIST_OK;
}

static int h_multi_set(dist_store *s, const char *const *keys, const void *const *vals,
                       const size_t *lens, size_t n) {
  int rc = DIST_OK;
  pthread_mutex_lock(&H(s)->mu);
  for (size_t i = 0; i < n && rc == DIST_OK; i++)
    rc = dist__kv_set(H(s)->kv, keys[i], vals[i], lens[i], &s->err);
  pthread_mutex_unlock(&H(s)->mu);
  return rc;
}

static int h_num_keys(dist_store *s, int64_t *n) {
  pthread_mutex_lock(&H(s)->mu);
  *n = dist__kv_num_keys(H(s)->kv);
  pthread_mutex_unlock(&H(s)->mu);
  return DIST_OK;
}

static int h_wait(dist_store *s, const char *const *keys, size_t n, int64_t timeout_ms) {
  pthread_mutex_lock(&H(s)->mu);
  int rc = wait_locked(s, keys, n, timeout_ms, "wait");
  pthread_mutex_unlock(&H(s)->mu);
  return rc;
}

static int h_queue_push(dist_store *s, const char *key, const void *val, size_t len) {
  pthread_mutex_lock(&H(s)->mu);
  int rc = dist__kv_queue_push(H(s)->kv, key, val, len, &s->err);
  pthread_mutex_unlock(&H(s)->mu);
  return rc;
}

static int h_queue_pop(dist_store *s, const char *key, bool block, int64_t timeout_ms,
                       void **val, size_t *len) {
  hash_shared *h = H(s);
  hwait hw;
  hwait_init(&hw);
  int64_t dl = deadline_ns(block ? timeout_ms : 0);
  int rc = DIST_OK;
  pthread_mutex_lock(&h->mu);
  while (!dist__kv_queue_pop(h->kv, key, val, len)) {
    if (!block || dist__now_ns() >= dl) {
      rc = block ? dist__store_timeout(&s->err, timeout_ms, "queue_pop", &key, 1, NULL)
                 : dist__err_set(&s->err, DIST_E_TIMEOUT, "queue '%s' is empty", key);
      break;
    }
    rc = dist__kv_watch_queue(h->kv, &hw.w, key, &s->err);
    if (rc != DIST_OK)
      break;
    hw.woken = false;
    sleep_until(h, &hw, dl);
    dist__kv_unwatch(h->kv, &hw.w);
  }
  pthread_mutex_unlock(&h->mu);
  pthread_cond_destroy(&hw.cv);
  return rc;
}

static int h_queue_len(dist_store *s, const char *key, int64_t *len) {
  pthread_mutex_lock(&H(s)->mu);
  *len = dist__kv_queue_len(H(s)->kv, key);
  pthread_mutex_unlock(&H(s)->mu);
  return DIST_OK;
}

static int h_clone(dist_store *s, dist_store **out) {
  DIST_TRY(dist__store_new(&hash_ops, s->impl, out));
  atomic_fetch_add(&H(s)->refs, 1);
  return DIST_OK;
}

static void h_destroy(dist_store *s) {
  hash_shared *h = H(s);
  if (atomic_fetch_sub(&h->refs, 1) != 1)
    return;
  dist__kv_destroy(h->kv);
  pthread_mutex_destroy(&h->mu);
  dist__free(h);
}

static const dist__store_ops hash_ops = {
    .kind = "hash",
    .set = h_set,
    .get = h_get,
    .add = h_add,
    .append = h_append,
    .check = h_check,
    .compare_set = h_compare_set,
    .delete_key = h_delete_key,
    .multi_get = h_multi_get,
    .multi_set = h_multi_set,
    .num_keys = h_num_keys,
    .wait = h_wait,
    .queue_push = h_queue_push,
    .queue_pop = h_queue_pop,
    .queue_len = h_queue_len,
    .clone = h_clone,
    .destroy = h_destroy,
};

int dist_store_hash_create(dist_store **out) {
  if (!out)
    return dist__set_last_error(DIST_E_INVAL, "dist_store_hash_create: out is NULL");
  *out = NULL;
  hash_shared *h = dist__calloc(1, sizeof *h);
  if (!h)
    return dist__set_last_error(DIST_E_NOMEM, "out of memory creating a hash store");
  int rc = dist__kv_create(&h->kv);
  if (rc == DIST_OK)
    rc = dist__store_new(&hash_ops, h, out);
  if (rc != DIST_OK) {
    dist__kv_destroy(h->kv);
    dist__free(h);
    return rc;
  }
  pthread_mutex_init(&h->mu, NULL);
  atomic_init(&h->refs, 1);
  return DIST_OK;
}
