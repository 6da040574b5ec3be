/* store.h - key-value stores for rendezvous and coordination (torch's Store).
 *
 * Four kinds share one interface: hash (in-process, thread-safe), file
 * (fcntl-locked log file, usable between processes), TCP (one server, many
 * clients) and prefix (wraps any store, prepending "prefix/" to keys).
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
} dist_store_tcp_opts;

/* A TCP store client, or a server plus its own client when is_server.
 * A client retries connecting until timeout_ms passes. */
DIST_API int dist_store_tcp_create(const dist_store_tcp_opts *opts,
                                   dist_store **out);
/* The port a TCP store's server listens on (or its client connected to);
 * 0 for other kinds. */
DIST_API uint16_t dist_store_tcp_port(const dist_store *s);

/* Keys of out are "prefix/key" in inner. Takes ownership of inner unless
 * DIST_STORE_BORROW is given in flags. */
#define DIST_STORE_BORROW 1u
DIST_API int dist_store_prefix_create(const char *prefix, dist_store *inner,
                                      unsigned flags, dist_store **out);

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

DIST_EXTERN_C_END

#endif
