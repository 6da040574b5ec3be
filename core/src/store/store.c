/* store.c - the public dist_store_* API: argument checks, the per-handle
 * message, default timeouts, and dispatch to a kind's ops (store_int.h).
 *
 * Each call clears the handle's message first, so dist_store_errmsg tells
 * about the last call only (curl's rule), and every failure the kinds report
 * lands there through dist__err_set (which also sets the thread's message).
 * The blocking calls (get, wait, multi_get, a blocking queue_pop) are
 * bracketed for store_waits.c, which keeps the program's own while they
 * wait. */
#include <inttypes.h>
#include <stdio.h>

#include "store_int.h"

int dist__store_new(const dist__store_ops *ops, void *impl, dist_store **out) {
  dist_store *s = dist__calloc(1, sizeof *s);
  if (!s)
    return dist__set_last_error(DIST_E_NOMEM, "out of memory creating a %s store",
                                ops->kind);
  s->ops = ops;
  s->impl = impl;
  s->timeout_ms = DIST_STORE_DEFAULT_TIMEOUT_MS;
  *out = s;
  return DIST_OK;
}

int dist__store_dup_value(dist__errbuf *e, const void *val, size_t len, void **out) {
  char *p = dist__malloc(len + 1);
  if (!p)
    return dist__err_set(e, DIST_E_NOMEM, "out of memory for a value of %zu bytes", len);
  if (len)
    memcpy(p, val, len);
  p[len] = '\0';
  *out = p;
  return DIST_OK;
}

char *dist__store_key_list(char *buf, size_t len, const char *const *keys, size_t n,
                           const bool *present) {
  size_t off = 0, shown = 0, missing = 0;
  buf[0] = '\0';
  for (size_t i = 0; i < n; i++) {
    if (present && present[i])
      continue;
    missing++;
    /* Keep room for the tail so a long list still says how many it hid. */
    if (shown < 16 && off + strlen(keys[i]) + 32 < len) {
      dist__appendf(buf, len, &off, "%s'%s'", shown ? ", " : "", keys[i]);
      shown++;
    }
  }
  if (missing > shown)
    dist__appendf(buf, len, &off, " (and %zu more)", missing - shown);
  return buf;
}

int dist__store_timeout(dist__errbuf *e, int64_t timeout_ms, const char *what,
                        const char *const *keys, size_t n, const bool *present) {
  char list[1024];
  size_t missing = 0;
  for (size_t i = 0; i < n; i++)
    missing += !(present && present[i]);
  dist__store_key_list(list, sizeof list, keys, n, present);
  return dist__err_set(e, DIST_E_TIMEOUT, "%s timed out after %" PRId64 " ms waiting for "
                       "%s %s", what, timeout_ms, missing == 1 ? "key" : "keys", list);
}

/* The public function's return address: a blocking call the program made
 * is kept for the monitor while it waits (store_waits.c). */
#define CALLER __builtin_return_address(0)

/* --- argument checks ------------------------------------------------------- */

#define CHECK_STORE(s)                                                          \
  do {                                                                          \
    if (!(s))                                                                   \
      return dist__set_last_error(DIST_E_INVAL, "%s: store is NULL", __func__); \
    dist__err_clear(&(s)->err);                                                 \
  } while (0)

static int bad(dist_store *s, const char *fn, const char *what) {
  return dist__err_set(&s->err, DIST_E_INVAL, "%s: %s", fn, what);
}

static int check_key(dist_store *s, const char *fn, const char *key) {
  if (!key)
    return bad(s, fn, "key is NULL");
  size_t kl = strnlen(key, DIST_STORE_MAX_KEY + 1);
  if (kl > DIST_STORE_MAX_KEY)
    return dist__err_set(&s->err, DIST_E_INVAL, "%s: key longer than %d bytes", fn,
                         DIST_STORE_MAX_KEY);
  return DIST_OK;
}

static int check_val(dist_store *s, const char *fn, const void *val, size_t len) {
  if (!val && len)
    return bad(s, fn, "value is NULL with a non-zero length");
  if (len > DIST_STORE_MAX_VALUE)
    return dist__err_set(&s->err, DIST_E_INVAL, "%s: value of %zu bytes exceeds the "
                         "limit of %u", fn, len, DIST_STORE_MAX_VALUE);
  return DIST_OK;
}

static int check_keys(dist_store *s, const char *fn, const char *const *keys, size_t n) {
  if (n && !keys)
    return bad(s, fn, "keys is NULL");
  for (size_t i = 0; i < n; i++)
    DIST_TRY(check_key(s, fn, keys[i]));
  return DIST_OK;
}

/* DIST_STORE_DEFAULT_TIMEOUT becomes the handle's timeout. */
static int resolve_timeout(dist_store *s, const char *fn, int64_t t, int64_t *out) {
  if (t == DIST_STORE_DEFAULT_TIMEOUT)
    t = s->timeout_ms;
  if (t < 0)
    return bad(s, fn, "timeout must be >= 0 ms or DIST_STORE_DEFAULT_TIMEOUT");
  *out = t;
  return DIST_OK;
}

/* --- lifecycle --------------------------------------------------------------- */

void dist_store_destroy(dist_store *s) {
  if (!s)
    return;
  s->ops->destroy(s);
  dist__free(s);
}

int dist_store_clone(dist_store *s, dist_store **out) {
  if (!s)
    return dist__set_last_error(DIST_E_INVAL, "%s: store is NULL", __func__);
  if (!out)
    return bad(s, __func__, "out is NULL");
  *out = NULL;
  /* Threads clone one handle to get handles of their own, several at once
   * (the checking layer's threads clone the default store): a clone that
   * succeeds only reads s, through a private view (clone_within); a
   * failure's message is s's too, as for every other call. */
  int rc = dist__store_clone_within(s, s->timeout_ms, out);
  if (rc != DIST_OK)
    dist__err_set(&s->err, rc, "%s", dist_last_errmsg());
  return rc;
}

int dist__store_clone_within(dist_store *s, int64_t timeout_ms, dist_store **out) {
  /* The kinds' clone ops read the handle's timeout for the new connection
   * and write a failure into its message: give them a private view of s
   * (its immutable ops and impl) so neither races with s's own thread. */
  dist_store view = {.ops = s->ops, .impl = s->impl, .timeout_ms = timeout_ms};
  int rc = s->ops->clone(&view, out);
  if (rc != DIST_OK)
    return dist__set_last_error(rc, "%s", view.err.msg);
  (*out)->timeout_ms = timeout_ms;
  return DIST_OK;
}

uint16_t dist_store_tcp_port(const dist_store *s) {
  return s && s->ops->port ? s->ops->port(s) : 0;
}

bool dist_store_has_extended_api(const dist_store *s) {
  return s && (!s->ops->extended || s->ops->extended(s));
}

const char *dist_store_kind(const dist_store *s) {
  if (!s)
    return NULL;
  return dist__store_is_user(s) ? dist__store_user_kind(s) : s->ops->kind;
}

int dist_store_set_timeout(dist_store *s, int64_t timeout_ms) {
  CHECK_STORE(s);
  if (timeout_ms == DIST_STORE_DEFAULT_TIMEOUT)
    timeout_ms = DIST_STORE_DEFAULT_TIMEOUT_MS;
  if (timeout_ms <= 0)
    return bad(s, __func__, "timeout must be > 0 ms (or DIST_STORE_DEFAULT_TIMEOUT)");
  s->timeout_ms = timeout_ms;
  return DIST_OK;
}

int64_t dist_store_get_timeout(const dist_store *s) { return s ? s->timeout_ms : -1; }

const char *dist_store_errmsg(const dist_store *s) {
  return s ? s->err.msg : "store is NULL";
}

/* --- operations -------------------------------------------------------------- */

int dist_store_set(dist_store *s, const char *key, const void *val, size_t len) {
  CHECK_STORE(s);
  DIST_TRY(check_key(s, __func__, key));
  DIST_TRY(check_val(s, __func__, val, len));
  return s->ops->set(s, key, val, len);
}

int dist_store_get(dist_store *s, const char *key, void **val, size_t *len) {
  CHECK_STORE(s);
  DIST_TRY(check_key(s, __func__, key));
  if (!val)
    return bad(s, __func__, "val is NULL");
  *val = NULL;
  size_t l = 0;
  int slot = dist__store_wait_begin("get", &key, 1, s->timeout_ms, CALLER);
  int rc = s->ops->get(s, key, s->timeout_ms, val, &l);
  dist__store_wait_end(slot);
  if (len)
    *len = rc == DIST_OK ? l : 0;
  return rc;
}

int dist_store_add(dist_store *s, const char *key, int64_t delta, int64_t *result) {
  CHECK_STORE(s);
  DIST_TRY(check_key(s, __func__, key));
  int64_t r = 0;
  int rc = s->ops->add(s, key, delta, &r);
  if (result && rc == DIST_OK)
    *result = r;
  return rc;
}

int dist_store_append(dist_store *s, const char *key, const void *val, size_t len) {
  CHECK_STORE(s);
  DIST_TRY(check_key(s, __func__, key));
  DIST_TRY(check_val(s, __func__, val, len));
  return s->ops->append(s, key, val, len);
}

int dist_store_check(dist_store *s, const char *const *keys, size_t n,
                     bool *all_present) {
  CHECK_STORE(s);
  DIST_TRY(check_keys(s, __func__, keys, n));
  if (!all_present)
    return bad(s, __func__, "all_present is NULL");
  *all_present = true;
  return n ? s->ops->check(s, keys, n, all_present) : DIST_OK;
}

int dist_store_compare_set(dist_store *s, const char *key, const void *expected,
                           size_t expected_len, const void *desired, size_t desired_len,
                           void **result, size_t *result_len) {
  CHECK_STORE(s);
  DIST_TRY(check_key(s, __func__, key));
  DIST_TRY(check_val(s, __func__, expected, expected_len));
  DIST_TRY(check_val(s, __func__, desired, desired_len));
  if (!result)
    return bad(s, __func__, "result is NULL");
  *result = NULL;
  size_t l = 0;
  int rc = s->ops->compare_set(s, key, expected, expected_len, desired, desired_len,
                               result, &l);
  if (result_len)
    *result_len = rc == DIST_OK ? l : 0;
  return rc;
}

int dist_store_delete_key(dist_store *s, const char *key, bool *deleted) {
  CHECK_STORE(s);
  DIST_TRY(check_key(s, __func__, key));
  bool d = false;
  int rc = s->ops->delete_key(s, key, &d);
  if (deleted)
    *deleted = rc == DIST_OK && d;
  return rc;
}

int dist_store_multi_get(dist_store *s, const char *const *keys, size_t n, void **vals,
                         size_t *lens) {
  CHECK_STORE(s);
  DIST_TRY(check_keys(s, __func__, keys, n));
  if (n && (!vals || !lens))
    return bad(s, __func__, "vals or lens is NULL");
  for (size_t i = 0; i < n; i++) {
    vals[i] = NULL;
    lens[i] = 0;
  }
  if (!n)
    return DIST_OK;
  int slot = dist__store_wait_begin("multi_get", keys, n, s->timeout_ms, CALLER);
  int rc = s->ops->multi_get(s, keys, n, s->timeout_ms, vals, lens);
  dist__store_wait_end(slot);
  return rc;
}

int dist_store_multi_set(dist_store *s, const char *const *keys, const void *const *vals,
                         const size_t *lens, size_t n) {
  CHECK_STORE(s);
  DIST_TRY(check_keys(s, __func__, keys, n));
  if (n && (!vals || !lens))
    return bad(s, __func__, "vals or lens is NULL");
  for (size_t i = 0; i < n; i++)
    DIST_TRY(check_val(s, __func__, vals[i], lens[i]));
  return n ? s->ops->multi_set(s, keys, vals, lens, n) : DIST_OK;
}

int dist_store_num_keys(dist_store *s, int64_t *n) {
  CHECK_STORE(s);
  if (!n)
    return bad(s, __func__, "n is NULL");
  return s->ops->num_keys(s, n);
}

int dist_store_wait(dist_store *s, const char *const *keys, size_t n, int64_t timeout_ms) {
  CHECK_STORE(s);
  DIST_TRY(check_keys(s, __func__, keys, n));
  int64_t t = 0;
  DIST_TRY(resolve_timeout(s, __func__, timeout_ms, &t));
  if (!n)
    return DIST_OK;
  int slot = dist__store_wait_begin("wait", keys, n, t, CALLER);
  int rc = s->ops->wait(s, keys, n, t);
  dist__store_wait_end(slot);
  return rc;
}

int dist_store_queue_push(dist_store *s, const char *key, const void *val, size_t len) {
  CHECK_STORE(s);
  DIST_TRY(check_key(s, __func__, key));
  DIST_TRY(check_val(s, __func__, val, len));
  return s->ops->queue_push(s, key, val, len);
}

int dist_store_queue_pop(dist_store *s, const char *key, bool block, void **val,
                         size_t *len) {
  CHECK_STORE(s);
  DIST_TRY(check_key(s, __func__, key));
  if (!val)
    return bad(s, __func__, "val is NULL");
  *val = NULL;
  size_t l = 0;
  int slot = block ? dist__store_wait_begin("queue_pop", &key, 1, s->timeout_ms, CALLER) : -1;
  int rc = s->ops->queue_pop(s, key, block, s->timeout_ms, val, &l);
  dist__store_wait_end(slot);
  if (len)
    *len = rc == DIST_OK ? l : 0;
  return rc;
}

int dist_store_queue_len(dist_store *s, const char *key, int64_t *len) {
  CHECK_STORE(s);
  DIST_TRY(check_key(s, __func__, key));
  if (!len)
    return bad(s, __func__, "len is NULL");
  return s->ops->queue_len(s, key, len);
}
