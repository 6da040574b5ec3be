/* store.h - key-value stores for rendezvous and coordination (torch's Store).
 *
 * Four kinds share one interface: hash (in-process, thread-safe), file
 * (fcntl-locked log file, usable between processes), TCP (one server, many
 * clients) and prefix (wraps any store, prepending "prefix/" to keys); and
 * stores users write themselves (dist_store_user_create, at the end).
 *
 * Semantics follow torch.distributed:
 *  - get and wait block until the key(s) exist or the store's timeout
 *    passes; then DIST_E_TIMEOUT, with a message naming the missing keys.
 *  - add creates the key at 0 then adds; the value reads back as a decimal
 *    string through get. add on a key written by set is DIST_E_INVAL.
 *  - compare_set(key, expected, desired): when the key is absent and
 *    expected is empty, or the current value equals expected, the key
 *    becomes desired and desired is returned; otherwise the current value is
 *    returned (expected when absent) and nothing changes.
 *  - queue_push appends to a FIFO under key; queue_pop takes the oldest
 *    entry, blocking up to the timeout (DIST_E_TIMEOUT when it stays empty;
 *    a non-blocking pop of an empty queue returns DIST_E_TIMEOUT at once).
 *
 * Ownership: values returned through void ** are heap memory the caller
 * releases with dist_free(). Keys are NUL-terminated strings; values are
 * byte buffers (they may contain NULs). A store handle is used by one
 * thread at a time; dist_store_clone gives another thread its own handle
 * (for TCP, its own connection). dist_store_errmsg is safe from any thread.
 *
 * Timeouts are in milliseconds; DIST_STORE_DEFAULT_TIMEOUT (-1) means the
 * store's own timeout (300 s unless set).
 *
 * On a TCP store, set does not wait for the server's reply (as torch's
 * TCPStore): a set that fails on the server reports its error from the
 * handle's next call that waits for a reply. Operations on one handle are
 * served in order, so a get after a set always sees it. */
#ifndef DIST_STORE_H
#define DIST_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <dist/export.h>

DIST_EXTERN_C_BEGIN

typedef struct dist_store dist_store;

#define DIST_STORE_DEFAULT_TIMEOUT (-1)
#define DIST_STORE_DEFAULT_TIMEOUT_MS 300000
/* Longest key and value the stores accept (frames are checked against
 * these before any allocation). */
#define DIST_STORE_MAX_KEY 4096
#define DIST_STORE_MAX_VALUE (64u << 20)

/* --- creation ------------------------------------------------------------ */

DIST_API int dist_store_hash_create(dist_store **out);

/* A store in a file shared by every process that opens the same path.
 * world_size > 0 lets the last process to destroy its handle remove the
 * file (torch's FileStore numWorkers); -1 keeps the file. */
DIST_API int dist_store_file_create(const char *path, int world_size,
                                    dist_store **out);

typedef struct dist_store_tcp_opts {
  const char *host;      /* server: address to bind (NULL = loopback unless
                            allow_remote, then all addresses); client: the
                            server's name or address (IPv4/IPv6) */
  uint16_t port;         /* server: 0 picks a free port (see _port below) */
  bool is_server;        /* true: this handle hosts the server and is also a
                            client of it */
  int world_size;        /* > 0: number of workers (server included) */
  bool wait_for_workers; /* server: create returns once world_size workers
                            have connected (or the timeout passes) */
  int64_t timeout_ms;    /* connect/create and default operation timeout;
                            <= 0 means DIST_STORE_DEFAULT_TIMEOUT_MS */
  const char *token;     /* the job token (DIST_TOKEN); NULL or "" = no
                            authentication, and a server then listens on
                            loopback only unless allow_remote */
  bool allow_remote;     /* DIST_ALLOW_NO_TOKEN=1: listen beyond loopback
                            even without a token */
  /* Fields appended after the first release (zero keeps the old meaning). */
  bool multi_tenant;     /* server: TCP stores of this process created with
                            multi_tenant and the same port share one server
                            (torch's multi_tenant): the first starts it, the
                            others connect to it, and it stops when the last
                            of them is destroyed. Port 0 starts a new server
                            that later stores can share by its port. A
                            second store whose token differs is DIST_E_INVAL. */
  int master_listen_fd;  /* server: > 0 serves on this socket, which the
                            caller has bound and set listening (torch's
                            master_listen_fd; fd 0 cannot be given). The
                            store serves on a duplicate: the caller keeps
                            fd and closes it when it likes. port must be 0
                            or the socket's port; a descriptor that is not
                            a listening TCP socket is DIST_E_INVAL. */
} dist_store_tcp_opts;

/* A TCP store client, or a server plus its own client when is_server.
 * A client retries connecting until timeout_ms passes. */
DIST_API int dist_store_tcp_create(const dist_store_tcp_opts *opts,
                                   dist_store **out);
/* The port a TCP store's server listens on (or its client connected to);
 * 0 for other kinds. */
DIST_API uint16_t dist_store_tcp_port(const dist_store *s);

/* The host a TCP store handle connected to (the server's own handle: the
 * address it serves on, "localhost" for every address); NULL for other
 * kinds. Borrowed, valid while s lives. */
DIST_API const char *dist_store_tcp_host(const dist_store *s);

/* Keys of out are "prefix/key" in inner. Takes ownership of inner unless
 * DIST_STORE_BORROW is given in flags. */
#define DIST_STORE_BORROW 1u
DIST_API int dist_store_prefix_create(const char *prefix, dist_store *inner,
                                      unsigned flags, dist_store **out);

/* A prefix store's underlying store and its prefix (borrowed, valid while s
 * lives); NULL for other kinds. */
DIST_API dist_store *dist_store_prefix_underlying(const dist_store *s);
DIST_API const char *dist_store_prefix_get_prefix(const dist_store *s);

/* The path a file store was created with; NULL for other kinds. */
DIST_API const char *dist_store_file_path(const dist_store *s);

/* "hash", "file", "tcp", "prefix", or a user store's kind; NULL for NULL. */
DIST_API const char *dist_store_kind(const dist_store *s);

/* Closes the handle (a TCP server stops when its owner's handle is
 * destroyed). Accepts NULL. */
DIST_API void dist_store_destroy(dist_store *s);

/* A new handle on the same store, for use from another thread. */
DIST_API int dist_store_clone(dist_store *s, dist_store **out);

/* --- operations ---------------------------------------------------------- */

DIST_API int dist_store_set(dist_store *s, const char *key, const void *val,
                            size_t len);
/* Waits up to the store timeout for key. *val is NUL-terminated for
 * convenience (the terminator is not counted in *len). */
DIST_API int dist_store_get(dist_store *s, const char *key, void **val,
                            size_t *len);
DIST_API int dist_store_add(dist_store *s, const char *key, int64_t delta,
                            int64_t *result);
/* Appends to the value (creating it when absent). */
DIST_API int dist_store_append(dist_store *s, const char *key, const void *val,
                               size_t len);
/* *all_present: whether every key exists now (never waits). */
DIST_API int dist_store_check(dist_store *s, const char *const *keys, size_t n,
                              bool *all_present);
DIST_API int dist_store_compare_set(dist_store *s, const char *key,
                                    const void *expected, size_t expected_len,
                                    const void *desired, size_t desired_len,
                                    void **result, size_t *result_len);
/* *deleted (may be NULL): whether the key existed. */
DIST_API int dist_store_delete_key(dist_store *s, const char *key, bool *deleted);
/* Waits for every key like get; vals[i]/lens[i] receive each value. On
 * failure no value is returned. */
DIST_API int dist_store_multi_get(dist_store *s, const char *const *keys,
                                  size_t n, void **vals, size_t *lens);
DIST_API int dist_store_multi_set(dist_store *s, const char *const *keys,
                                  const void *const *vals, const size_t *lens,
                                  size_t n);
DIST_API int dist_store_num_keys(dist_store *s, int64_t *n);
/* Waits until every key exists; timeout_ms DIST_STORE_DEFAULT_TIMEOUT uses
 * the store's timeout. */
DIST_API int dist_store_wait(dist_store *s, const char *const *keys, size_t n,
                             int64_t timeout_ms);
DIST_API int dist_store_queue_push(dist_store *s, const char *key,
                                   const void *val, size_t len);
DIST_API int dist_store_queue_pop(dist_store *s, const char *key, bool block,
                                  void **val, size_t *len);
DIST_API int dist_store_queue_len(dist_store *s, const char *key, int64_t *len);
DIST_API int dist_store_set_timeout(dist_store *s, int64_t timeout_ms);
DIST_API int64_t dist_store_get_timeout(const dist_store *s);

/* The message of the handle's last failure ("" when the last call
 * succeeded). Valid until the next call on the handle. */
DIST_API const char *dist_store_errmsg(const dist_store *s);

/* Frees memory libdist returned to the caller. Accepts NULL. */
DIST_API void dist_free(void *p);

/* Whether s supports the extended operations (torch's has_extended_api):
 * append, multi_get, multi_set, queue_push, queue_pop and queue_len. Every
 * built-in kind does; a prefix store answers for its underlying store; a
 * user store does when it fills every one of those slots. On a store that
 * does not, those calls return DIST_E_NOTSUP with a message. */
DIST_API bool dist_store_has_extended_api(const dist_store *s);

/* --- user-written stores (torch's Store subclasses) ---------------------- */

/* The slots of a store the caller implements. dist_store_user_create makes
 * a dist_store of them that the library uses like any built-in kind: the
 * store of dist_init_process_group (rendezvous), the groups' prefix
 * stores, dist_store_prefix_create over it.
 *
 * Each slot receives `self`, the handle being called (its user data:
 * dist_store_user_data(self)), with arguments the library has already
 * checked as for the public call (keys non-NULL and at most
 * DIST_STORE_MAX_KEY bytes, values at most DIST_STORE_MAX_VALUE, n > 0,
 * timeouts resolved to milliseconds >= 0). It returns DIST_OK or a DIST_E_*
 * code, with a message set through dist_store_fail (a code without one
 * gets a message naming the store kind and the slot). Values it returns
 * (get, compare_set, multi_get, queue_pop) are malloc'd by the slot and
 * taken over by the library. A slot must not call dist_store_* on self.
 * Semantics are those of the public calls above (get and wait block up to
 * timeout_ms, then DIST_E_TIMEOUT; see compare_set's rule).
 *
 * Required: set, get, add, compare_set, wait, check, delete_key (what
 * rendezvous and the groups use). Optional, NULL answering DIST_E_NOTSUP:
 * num_keys, and the extended slots (see dist_store_has_extended_api).
 *
 * Several processes: a store passed to dist_init_process_group by every
 * rank must reach the same data from every process (a server, a shared
 * directory); an in-memory store serves one process only. */
typedef struct dist_store_user_ops {
  const char *kind; /* name in messages and dist_store_kind (NULL: "user") */
  int (*set)(dist_store *self, const char *key, const void *val, size_t len);
  int (*get)(dist_store *self, const char *key, int64_t timeout_ms, void **val,
             size_t *len);
  int (*add)(dist_store *self, const char *key, int64_t delta, int64_t *result);
  int (*compare_set)(dist_store *self, const char *key, const void *expected,
                     size_t expected_len, const void *desired, size_t desired_len,
                     void **result, size_t *result_len);
  int (*wait)(dist_store *self, const char *const *keys, size_t n, int64_t timeout_ms);
  int (*check)(dist_store *self, const char *const *keys, size_t n, bool *all_present);
  int (*delete_key)(dist_store *self, const char *key, bool *deleted);
  int (*num_keys)(dist_store *self, int64_t *n);
  /* the extended API */
  int (*append)(dist_store *self, const char *key, const void *val, size_t len);
  int (*multi_get)(dist_store *self, const char *const *keys, size_t n,
                   int64_t timeout_ms, void **vals, size_t *lens);
  int (*multi_set)(dist_store *self, const char *const *keys, const void *const *vals,
                   const size_t *lens, size_t n);
  int (*queue_push)(dist_store *self, const char *key, const void *val, size_t len);
  int (*queue_pop)(dist_store *self, const char *key, bool block, int64_t timeout_ms,
                   void **val, size_t *len);
  int (*queue_len)(dist_store *self, const char *key, int64_t *len);
  /* lifecycle: clone gives a new handle its own user data (*user_out); when
   * NULL, clones share self's user data (so the slots must then be safe
   * from several threads at once). destroy (may be NULL) releases user
   * data once no handle uses it. */
  int (*clone)(dist_store *self, void **user_out);
  void (*destroy)(void *user);
} dist_store_user_ops;

/* A store over the caller's slots (ops borrowed: it must outlive every
 * handle, e.g. a static const; user is released by ops->destroy when the
 * last handle sharing it is destroyed, also when this call fails).
 * DIST_E_INVAL when a required slot is NULL, naming it. */
DIST_API int dist_store_user_create(const dist_store_user_ops *ops, void *user,
                                    dist_store **out);
/* The user data of a user store's handle (NULL for other kinds). */
DIST_API void *dist_store_user_data(const dist_store *self);
/* For a slot: records the message of its failure on self and returns code
 * (DIST_E_INTERNAL when code is DIST_OK or unknown). */
DIST_API int dist_store_fail(dist_store *self, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

DIST_EXTERN_C_END

#endif
