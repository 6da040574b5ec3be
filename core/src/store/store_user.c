/* store_user.c - stores written by the library's users (torch's Store
 * subclasses): a dist__store_ops kind whose every op calls the user's slot
 * from dist_store_user_ops, so rendezvous, groups and prefix stores use a
 * user store through the same handle as a built-in kind.
 *
 * The adapter adds what the user's slots may not: a message for every
 * failure (a slot that returned a code without calling dist_store_fail
 * gets one naming the kind and the slot), a status that is a real
 * DIST_E_* code, NUL-terminated values (the library's promise for values
 * it returns), DIST_E_NOTSUP for optional slots left NULL, and the sharing
 * of user data between clones (reference counted) when the user gives no
 * clone slot. */
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include "store_int.h"

typedef struct shared_user {
  void *data;
  const dist_store_user_ops *uops;
  atomic_int refs;
} shared_user;

static const dist__store_ops user_ops;

static shared_user *U(const dist_store *s) { return s->impl; }

static const char *kind_of(const dist_store_user_ops *u) { return u->kind ? u->kind : "user"; }

/* The slot's status with a message: codes outside the table become
 * DIST_E_STORE, so callers never see a status the library cannot name. */
static int done(dist_store *s, const char *slot, int rc) {
  if (rc == DIST_OK)
    return DIST_OK;
  const char *kind = kind_of(U(s)->uops);
  if (rc < 0 || rc >= DIST_STATUS_COUNT_)
    return dist__err_set(&s->err, DIST_E_STORE, "%s store: %s returned %d, not a DIST_E_* "
                         "code", kind, slot, rc);
  if (s->err.msg[0])
    return dist__set_last_error(rc, "%s", s->err.msg); /* the slot's own message */
  return dist__err_set(&s->err, rc, "%s store: %s failed (%s)", kind, slot,
                       dist_status_name(rc));
}

static int notsup(dist_store *s, const char *slot) {
  return dist__err_set(&s->err, DIST_E_NOTSUP, "%s store does not implement %s%s",
                       kind_of(U(s)->uops), slot,
                       strcmp(slot, "num_keys") ? " (no extended API)" : "");
}

/* The user's malloc'd value, copied with the NUL the library promises. */
static int take_value(dist_store *s, void **val, size_t *len) {
  void *user = *val;
  *val = NULL;
  int rc = dist__store_dup_value(&s->err, user ? user : "", user ? *len : 0, val);
  free(user);
  if (rc != DIST_OK)
    *len = 0;
  return rc;
}

#define CALL(s, slot, ...) done((s), #slot, U(s)->uops->slot((s), __VA_ARGS__))
#define CALL_OPT(s, slot, ...) \
  (U(s)->uops->slot ? CALL(s, slot, __VA_ARGS__) : notsup((s), #slot))

static int u_set(dist_store *s, const char *key, const void *val, size_t len) {
  return CALL(s, set, key, val, len);
}

static int u_get(dist_store *s, const char *key, int64_t t, void **val, size_t *len) {
  DIST_TRY(CALL(s, get, key, t, val, len));
  return take_value(s, val, len);
}

static int u_add(dist_store *s, const char *key, int64_t delta, int64_t *result) {
  return CALL(s, add, key, delta, result);
}

static int u_append(dist_store *s, const char *key, const void *val, size_t len) {
  return CALL_OPT(s, append, key, val, len);
}

static int u_check(dist_store *s, const char *const *keys, size_t n, bool *all) {
  return CALL(s, check, keys, n, all);
}

static int u_compare_set(dist_store *s, const char *key, const void *exp, size_t elen,
                         const void *des, size_t dlen, void **res, size_t *rlen) {
  DIST_TRY(CALL(s, compare_set, key, exp, elen, des, dlen, res, rlen));
  return take_value(s, res, rlen);
}

static int u_delete_key(dist_store *s, const char *key, bool *deleted) {
  return CALL(s, delete_key, key, deleted);
}

static void free_values(void **vals, size_t *lens, size_t n) {
  for (size_t i = 0; i < n; i++) {
    dist__free(vals[i]);
    vals[i] = NULL;
    lens[i] = 0;
  }
}

static int u_multi_get(dist_store *s, const char *const *keys, size_t n, int64_t t,
                       void **vals, size_t *lens) {
  int rc = CALL_OPT(s, multi_get, keys, n, t, vals, lens);
  if (rc != DIST_OK) {
    for (size_t i = 0; i < n; i++)
      free(vals[i]); /* the slot's own, whatever it left */
    for (size_t i = 0; i < n; i++)
      vals[i] = NULL;
    return rc;
  }
  for (size_t i = 0; i < n && rc == DIST_OK; i++)
    rc = take_value(s, &vals[i], &lens[i]);
  if (rc != DIST_OK)
    free_values(vals, lens, n); /* copies made so far and the slot's rest */
  return rc;
}

static int u_multi_set(dist_store *s, const char *const *keys, const void *const *vals,
                       const size_t *lens, size_t n) {
  return CALL_OPT(s, multi_set, keys, vals, lens, n);
}

static int u_num_keys(dist_store *s, int64_t *n) { return CALL_OPT(s, num_keys, n); }

static int u_wait(dist_store *s, const char *const *keys, size_t n, int64_t t) {
  return CALL(s, wait, keys, n, t);
}

static int u_queue_push(dist_store *s, const char *key, const void *val, size_t len) {
  return CALL_OPT(s, queue_push, key, val, len);
}

static int u_queue_pop(dist_store *s, const char *key, bool block, int64_t t, void **val,
                       size_t *len) {
  DIST_TRY(CALL_OPT(s, queue_pop, key, block, t, val, len));
  return take_value(s, val, len);
}

static int u_queue_len(dist_store *s, const char *key, int64_t *len) {
  return CALL_OPT(s, queue_len, key, len);
}

static void release(const dist_store_user_ops *u, void *data) {
  if (u->destroy)
    u->destroy(data);
}

static void unref(shared_user *su) {
  if (atomic_fetch_sub(&su->refs, 1) != 1)
    return;
  release(su->uops, su->data);
  dist__free(su);
}

static void u_destroy(dist_store *s) { unref(U(s)); }

static int wrap(const dist_store_user_ops *u, void *data, dist_store **out, dist__errbuf *e) {
  shared_user *su = dist__calloc(1, sizeof *su);
  if (!su || dist__store_new(&user_ops, su, out) != DIST_OK) {
    dist__free(su);
    release(u, data);
    return dist__err_set(e, DIST_E_NOMEM, "out of memory creating a %s store", kind_of(u));
  }
  su->data = data;
  su->uops = u;
  atomic_init(&su->refs, 1);
  return DIST_OK;
}

static int u_clone(dist_store *s, dist_store **out) {
  shared_user *su = U(s);
  if (!su->uops->clone) {
    atomic_fetch_add(&su->refs, 1);
    int rc = dist__store_new(&user_ops, su, out);
    if (rc != DIST_OK)
      unref(su);
    return rc == DIST_OK ? rc : dist__err_set(&s->err, rc, "out of memory cloning a store");
  }
  void *data = NULL;
  DIST_TRY(CALL(s, clone, &data));
  return wrap(su->uops, data, out, &s->err);
}

static bool u_extended(const dist_store *s) {
  const dist_store_user_ops *u = U(s)->uops;
  return u->append && u->multi_get && u->multi_set && u->queue_push && u->queue_pop &&
         u->queue_len;
}

static const dist__store_ops user_ops = {
    .kind = "user",
    .set = u_set,
    .get = u_get,
    .add = u_add,
    .append = u_append,
    .check = u_check,
    .compare_set = u_compare_set,
    .delete_key = u_delete_key,
    .multi_get = u_multi_get,
    .multi_set = u_multi_set,
    .num_keys = u_num_keys,
    .wait = u_wait,
    .queue_push = u_queue_push,
    .queue_pop = u_queue_pop,
    .queue_len = u_queue_len,
    .clone = u_clone,
    .destroy = u_destroy,
    .extended = u_extended,
};

/* The first required slot left NULL, or NULL when all are there. */
static const char *missing_slot(const dist_store_user_ops *u) {
  if (!u->set)
    return "set";
  if (!u->get)
    return "get";
  if (!u->add)
    return "add";
  if (!u->compare_set)
    return "compare_set";
  if (!u->wait)
    return "wait";
  if (!u->check)
    return "check";
  return u->delete_key ? NULL : "delete_key";
}

int dist_store_user_create(const dist_store_user_ops *ops, void *user, dist_store **out) {
  if (out)
    *out = NULL;
  if (!ops || !out) {
    if (ops)
      release(ops, user);
    return dist__set_last_error(DIST_E_INVAL, "dist_store_user_create: %s is NULL",
                                ops ? "out" : "ops");
  }
  const char *miss = missing_slot(ops);
  if (miss) {
    release(ops, user);
    return dist__set_last_error(DIST_E_INVAL, "dist_store_user_create: the %s store leaves "
                                "the required slot %s NULL", kind_of(ops), miss);
  }
  return wrap(ops, user, out, NULL);
}

bool dist__store_is_user(const dist_store *s) { return s && s->ops == &user_ops; }

const char *dist__store_user_kind(const dist_store *s) { return kind_of(U(s)->uops); }

void *dist_store_user_data(const dist_store *self) {
  return dist__store_is_user(self) ? U(self)->data : NULL;
}

int dist_store_fail(dist_store *self, int code, const char *fmt, ...) {
  if (code <= DIST_OK || code >= DIST_STATUS_COUNT_)
    code = DIST_E_INTERNAL;
  if (!self)
    return dist__set_last_error(code, "dist_store_fail: store is NULL");
  if (!fmt)
    return dist__err_set(&self->err, code, "%s store failed (%s)",
                         dist_store_kind(self), dist_status_name(code));
  va_list ap;
  va_start(ap, fmt);
  int rc = dist__err_setv(&self->err, code, fmt, ap);
  va_end(ap);
  return rc;
}
