/* store_prefix.c - a store that prepends "prefix/" to every key of an inner
 * store (torch's PrefixStore). Groups use it to keep their keys apart.
 *
 * The inner store's ops are called directly with this handle's timeout, so
 * a prefix store's set_timeout governs its own calls only. As in torch,
 * num_keys is the inner store's count (not only this prefix's keys). A
 * failure's message is copied from the inner handle to this one. */
#include <stdio.h>

#include "store_int.h"

typedef struct prefix_store {
  char *prefix;
  size_t plen;
  dist_store *inner;
  bool owned;
} prefix_store;

static const dist__store_ops prefix_ops;

static prefix_store *P(dist_store *s) { return s->impl; }

/* Calls the inner op, then carries its message over on failure. */
#define INNER(s, call)                                                    \
  ({                                                                      \
    dist_store *in_ = P(s)->inner;                                        \
    dist__err_clear(&in_->err);                                           \
    int rc_ = in_->ops->call;                                             \
    if (rc_ != DIST_OK)                                                   \
      dist__err_set(&(s)->err, rc_, "%s", in_->err.msg);                  \
    rc_;                                                                  \
  })

/* "prefix/key" into a fresh string. */
static int pkey(dist_store *s, const char *key, char **out) {
  prefix_store *p = P(s);
  size_t kl = strlen(key);
  if (p->plen + 1 + kl > DIST_STORE_MAX_KEY)
    return dist__err_set(&s->err, DIST_E_INVAL, "prefixed key '%.64s/%.64s' (%zu bytes) is "
                         "longer than %d bytes", p->prefix, key, p->plen + 1 + kl,
                         DIST_STORE_MAX_KEY);
  char *k = dist__malloc(p->plen + kl + 2);
  if (!k)
    return dist__err_set(&s->err, DIST_E_NOMEM, "out of memory building a key");
  memcpy(k, p->prefix, p->plen);
  k[p->plen] = '/';
  memcpy(k + p->plen + 1, key, kl + 1);
  *out = k;
  return DIST_OK;
}

static void free_keys(char **ks, size_t n) {
  for (size_t i = 0; ks && i < n; i++)
    dist__free(ks[i]);
  dist__free(ks);
}

static int pkeys(dist_store *s, const char *const *keys, size_t n, char ***out) {
  char **ks = dist__calloc(n, sizeof *ks);
  if (!ks)
    return dist__err_set(&s->err, DIST_E_NOMEM, "out of memory building keys");
  for (size_t i = 0; i < n; i++) {
    int rc = pkey(s, keys[i], &ks[i]);
    if (rc != DIST_OK) {
      free_keys(ks, n);
      return rc;
    }
  }
  *out = ks;
  return DIST_OK;
}

static int x_set(dist_store *s, const char *key, const void *val, size_t len) {
  char *k;
  DIST_TRY(pkey(s, key, &k));
  int rc = INNER(s, set(in_, k, val, len));
  dist__free(k);
  return rc;
}

static int x_get(dist_store *s, const char *key, int64_t t, void **val, size_t *len) {
  char *k;
  DIST_TRY(pkey(s, key, &k));
  int rc = INNER(s, get(in_, k, t, val, len));
  dist__free(k);
  return rc;
}

static int x_add(dist_store *s, const char *key, int64_t delta, int64_t *result) {
  char *k;
  DIST_TRY(pkey(s, key, &k));
  int rc = INNER(s, add(in_, k, delta, result));
  dist__free(k);
  return rc;
}

static int x_append(dist_store *s, const char *key, const void *val, size_t len) {
  char *k;
  DIST_TRY(pkey(s, key, &k));
  int rc = INNER(s, append(in_, k, val, len));
  dist__free(k);
  return rc;
}

static int x_check(dist_store *s, const char *const *keys, size_t n, bool *all) {
  char **ks;
  DIST_TRY(pkeys(s, keys, n, &ks));
  int rc = INNER(s, check(in_, (const char *const *)ks, n, all));
  free_keys(ks, n);
  return rc;
}

static int x_compare_set(dist_store *s, const char *key, const void *exp, size_t elen,
                         const void *des, size_t dlen, void **res, size_t *rlen) {
  char *k;
  DIST_TRY(pkey(s, key, &k));
  int rc = INNER(s, compare_set(in_, k, exp, elen, des, dlen, res, rlen));
  dist__free(k);
  return rc;
}

static int x_delete_key(dist_store *s, const char *key, bool *deleted) {
  char *k;
  DIST_TRY(pkey(s, key, &k));
  int rc = INNER(s, delete_key(in_, k, deleted));
  dist__free(k);
  return rc;
}

static int x_multi_get(dist_store *s, const char *const *keys, size_t n, int64_t t,
                       void **vals, size_t *lens) {
  char **ks;
  DIST_TRY(pkeys(s, keys, n, &ks));
  int rc = INNER(s, multi_get(in_, (const char *const *)ks, n, t, vals, lens));
  free_keys(ks, n);
  return rc;
}

static int x_multi_set(dist_store *s, const char *const *keys, const void *const *vals,
                       const size_t *lens, size_t n) {
  char **ks;
  DIST_TRY(pkeys(s, keys, n, &ks));
  int rc = INNER(s, multi_set(in_, (const char *const *)ks, vals, lens, n));
  free_keys(ks, n);
  return rc;
}

static int x_num_keys(dist_store *s, int64_t *n) { return INNER(s, num_keys(in_, n)); }

static int x_wait(dist_store *s, const char *const *keys, size_t n, int64_t t) {
  char **ks;
  DIST_TRY(pkeys(s, keys, n, &ks));
  int rc = INNER(s, wait(in_, (const char *const *)ks, n, t));
  free_keys(ks, n);
  return rc;
}

static int x_queue_push(dist_store *s, const char *key, const void *val, size_t len) {
  char *k;
  DIST_TRY(pkey(s, key, &k));
  int rc = INNER(s, queue_push(in_, k, val, len));
  dist__free(k);
  return rc;
}

static int x_queue_pop(dist_store *s, const char *key, bool block, int64_t t, void **val,
                       size_t *len) {
  char *k;
  DIST_TRY(pkey(s, key, &k));
  int rc = INNER(s, queue_pop(in_, k, block, t, val, len));
  dist__free(k);
  return rc;
}

static int x_queue_len(dist_store *s, const char *key, int64_t *len) {
  char *k;
  DIST_TRY(pkey(s, key, &k));
  int rc = INNER(s, queue_len(in_, k, len));
  dist__free(k);
  return rc;
}

static int wrap(const char *prefix, dist_store *inner, bool owned, dist_store **out,
                dist__errbuf *e) {
  prefix_store *p = dist__calloc(1, sizeof *p);
  char *pre = dist__strdup(prefix);
  if (!p || !pre || dist__store_new(&prefix_ops, p, out) != DIST_OK) {
    dist__free(p);
    dist__free(pre);
    return dist__err_set(e, DIST_E_NOMEM, "out of memory creating a prefix store");
  }
  p->prefix = pre;
  p->plen = strlen(pre);
  p->inner = inner;
  p->owned = owned;
  (*out)->timeout_ms = inner->timeout_ms;
  return DIST_OK;
}

static int x_clone(dist_store *s, dist_store **out) {
  dist_store *ic;
  int rc = INNER(s, clone(in_, &ic));
  if (rc != DIST_OK)
    return rc;
  ic->timeout_ms = P(s)->inner->timeout_ms;
  rc = wrap(P(s)->prefix, ic, true, out, &s->err);
  if (rc != DIST_OK)
    dist_store_destroy(ic);
  return rc;
}

static void x_destroy(dist_store *s) {
  prefix_store *p = P(s);
  if (p->owned)
    dist_store_destroy(p->inner);
  dist__free(p->prefix);
  dist__free(p);
}

static uint16_t x_port(const dist_store *s) {
  return dist_store_tcp_port(((const prefix_store *)s->impl)->inner);
}

static bool x_extended(const dist_store *s) {
  return dist_store_has_extended_api(((const prefix_store *)s->impl)->inner);
}

static const dist__store_ops prefix_ops = {
    .kind = "prefix",
    .set = x_set,
    .get = x_get,
    .add = x_add,
    .append = x_append,
    .check = x_check,
    .compare_set = x_compare_set,
    .delete_key = x_delete_key,
    .multi_get = x_multi_get,
    .multi_set = x_multi_set,
    .num_keys = x_num_keys,
    .wait = x_wait,
    .queue_push = x_queue_push,
    .queue_pop = x_queue_pop,
    .queue_len = x_queue_len,
    .clone = x_clone,
    .destroy = x_destroy,
    .port = x_port,
    .extended = x_extended,
};

dist_store *dist_store_prefix_underlying(const dist_store *s) {
  return s && s->ops == &prefix_ops ? ((const prefix_store *)s->impl)->inner : NULL;
}

const char *dist_store_prefix_get_prefix(const dist_store *s) {
  return s && s->ops == &prefix_ops ? ((const prefix_store *)s->impl)->prefix : NULL;
}

int dist_store_prefix_create(const char *prefix, dist_store *inner, unsigned flags,
                             dist_store **out) {
  if (!out)
    return dist__set_last_error(DIST_E_INVAL, "dist_store_prefix_create: out is NULL");
  *out = NULL;
  if (!prefix || !inner)
    return dist__set_last_error(DIST_E_INVAL, "dist_store_prefix_create: %s is NULL",
                                prefix ? "inner" : "prefix");
  if (strlen(prefix) >= DIST_STORE_MAX_KEY)
    return dist__set_last_error(DIST_E_INVAL, "prefix longer than %d bytes",
                                DIST_STORE_MAX_KEY - 1);
  return wrap(prefix, inner, !(flags & DIST_STORE_BORROW), out, NULL);
}
