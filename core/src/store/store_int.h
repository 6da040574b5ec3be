/* store_int.h - the store handle and the ops table every store kind fills.
 *
 * store.c owns the public dist_store_* functions: it validates arguments,
 * clears the handle's message, resolves DIST_STORE_DEFAULT_TIMEOUT into the
 * handle's timeout, and calls the kind's op. Ops therefore receive checked
 * arguments (keys non-NULL and at most DIST_STORE_MAX_KEY bytes, values at
 * most DIST_STORE_MAX_VALUE, n > 0 for the multi-key ops, timeouts >= 0 in
 * ms) and write their failure into s->err with dist__err_set. Values they
 * return are dist__malloc'd with a NUL after the last byte.
 *
 * Every op runs on the caller's thread and may block only up to the
 * timeout it is given (get, multi_get, wait, blocking queue_pop) or the
 * handle's timeout (everything else, for I/O). */
#ifndef DIST_STORE_INT_H
#define DIST_STORE_INT_H

#include <dist/store.h>

#include "base/dist_int.h"

typedef struct dist__store_ops {
  const char *kind; /* "hash", "file", "tcp", "prefix" */
  int (*set)(dist_store *s, const char *key, const void *val, size_t len);
  int (*get)(dist_store *s, const char *key, int64_t timeout_ms, void **val,
             size_t *len);
  int (*add)(dist_store *s, const char *key, int64_t delta, int64_t *result);
  int (*append)(dist_store *s, const char *key, const void *val, size_t len);
  int (*check)(dist_store *s, const char *const *keys, size_t n, bool *all);
  int (*compare_set)(dist_store *s, const char *key, const void *exp, size_t elen,
                     const void *des, size_t dlen, void **res, size_t *rlen);
  int (*delete_key)(dist_store *s, const char *key, bool *deleted);
  /* On failure every vals[i] is NULL. */
  int (*multi_get)(dist_store *s, const char *const *keys, size_t n,
                   int64_t timeout_ms, void **vals, size_t *lens);
  int (*multi_set)(dist_store *s, const char *const *keys, const void *const *vals,
                   const size_t *lens, size_t n);
  int (*num_keys)(dist_store *s, int64_t *n);
  int (*wait)(dist_store *s, const char *const *keys, size_t n, int64_t timeout_ms);
  int (*queue_push)(dist_store *s, const char *key, const void *val, size_t len);
  /* timeout_ms is ignored when !block. */
  int (*queue_pop)(dist_store *s, const char *key, bool block, int64_t timeout_ms,
                   void **val, size_t *len);
  int (*queue_len)(dist_store *s, const char *key, int64_t *len);
  int (*clone)(dist_store *s, dist_store **out);
  /* Releases impl (the handle itself is freed by store.c). */
  void (*destroy)(dist_store *s);
  uint16_t (*port)(const dist_store *s); /* NULL: 0 */
  /* Whether the extended ops work (dist_store_has_extended_api); NULL:
   * true, as for every built-in kind. */
  bool (*extended)(const dist_store *s);
} dist__store_ops;

struct dist_store {
  const dist__store_ops *ops;
  void *impl;
  int64_t timeout_ms;
  dist__errbuf err;
};

/* A handle of a kind around impl, with the default timeout. */
int dist__store_new(const dist__store_ops *ops, void *impl, dist_store **out);

/* A new handle on s's store whose connecting and I/O are bounded by
 * timeout_ms, whatever s's own timeout (for a post that must not block its
 * caller for long). Reads only what never changes in s, so any thread may
 * call it while another uses s. */
int dist__store_clone_within(dist_store *s, int64_t timeout_ms, dist_store **out);

/* A copy of len bytes plus a NUL terminator (DIST_E_NOMEM into e). */
int dist__store_dup_value(dist__errbuf *e, const void *val, size_t len, void **out);

/* DIST_E_TIMEOUT with "timed out after T ms waiting for key(s) a, b" naming
 * the keys whose present[i] is false (all keys when present is NULL). */
int dist__store_timeout(dist__errbuf *e, int64_t timeout_ms, const char *what,
                        const char *const *keys, size_t n, const bool *present);

/* Brackets a blocking call of the public API (store.c) that may be the
 * program's own (store_waits.c, dist/internal/store.h): begin keeps it
 * when caller, the public function's return address, lies outside core's
 * object, and returns its slot (-1: not kept); end forgets that slot. */
int dist__store_wait_begin(const char *op, const char *const *keys, size_t n,
                           int64_t timeout_ms, const void *caller);
void dist__store_wait_end(int slot);

/* Lists the missing keys ("a, b, c (and 7 more)") into buf. */
char *dist__store_key_list(char *buf, size_t len, const char *const *keys, size_t n,
                           const bool *present);

/* dist_store_file_create for a job's rendezvous: a file left by an earlier
 * job whose processes have all exited is emptied first (store_file.c). */
int dist__store_file_create_job(const char *path, int world_size, dist_store **out);

/* User stores (store_user.c): whether s is one, and its kind's name. */
bool dist__store_is_user(const dist_store *s);
const char *dist__store_user_kind(const dist_store *s);

#endif
