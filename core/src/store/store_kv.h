/* store_kv.h - the in-memory key/value engine behind the hash store, the TCP
 * server and the file store's replica.
 *
 * Three namespaces: values (blobs written by set/append/compare_set, and
 * counters created by add, which read back as decimal text), queues (FIFOs
 * of blobs; a queue's key never collides with a value's and is not counted
 * by num_keys, as in torch), and waiters. A waiter registers on keys that
 * are missing, or on a queue; the engine calls its wake function once when
 * every key it waited for has appeared, or when an item was pushed onto its
 * queue (one waiter per item, oldest first).
 *
 * Not thread-safe: the owner serialises calls (the hash store's mutex, the
 * server's single thread). wake is called from inside the mutating call and
 * must not call back into the engine; the owner re-checks afterwards (keys
 * may have been deleted again, another popper may have won the item). */
#ifndef DIST_STORE_KV_H
#define DIST_STORE_KV_H

#include "base/dist_int.h"

typedef struct dist__kv dist__kv;
typedef struct dist__kv_waiter dist__kv_waiter;
struct kv_wnode;

struct dist__kv_waiter {
  void (*wake)(dist__kv_waiter *w); /* set by the owner */
  void *arg;                        /* the owner's */
  /* private to the engine */
  size_t missing;
  struct kv_wnode *nodes;
  size_t nnodes;
  dist__kv_waiter *wake_next;
};

int dist__kv_create(dist__kv **out);
void dist__kv_destroy(dist__kv *kv);

/* Lookups. Returned pointers are borrowed until the next mutation; values
 * are followed by a NUL. */
bool dist__kv_get(dist__kv *kv, const char *key, const void **val, size_t *len);
bool dist__kv_has(dist__kv *kv, const char *key);
int64_t dist__kv_num_keys(dist__kv *kv);
int64_t dist__kv_queue_len(dist__kv *kv, const char *key);

/* Mutations: DIST_OK, DIST_E_NOMEM, or DIST_E_INVAL (add on a set value,
 * append on a counter, counter overflow), with the message in e. */
int dist__kv_set(dist__kv *kv, const char *key, const void *val, size_t len,
                 dist__errbuf *e);
int dist__kv_add(dist__kv *kv, const char *key, int64_t delta, int64_t *result,
                 dist__errbuf *e);
int dist__kv_append(dist__kv *kv, const char *key, const void *val, size_t len,
                    dist__errbuf *e);
/* torch's rules (store.h); *res borrowed as for get. */
int dist__kv_compare_set(dist__kv *kv, const char *key, const void *exp, size_t elen,
                         const void *des, size_t dlen, const void **res, size_t *rlen,
                         dist__errbuf *e);
bool dist__kv_delete(dist__kv *kv, const char *key);
int dist__kv_queue_push(dist__kv *kv, const char *key, const void *val, size_t len,
                        dist__errbuf *e);
/* Takes the oldest item; *val is the caller's (dist__free), NUL-terminated.
 * false when the queue is empty. */
bool dist__kv_queue_pop(dist__kv *kv, const char *key, void **val, size_t *len);

/* Registers w on those of keys that are missing. *registered false: every
 * key is present and nothing was registered. */
int dist__kv_watch_keys(dist__kv *kv, dist__kv_waiter *w, const char *const *keys,
                        size_t n, bool *registered, dist__errbuf *e);
/* Registers w for the next item pushed onto the queue key. */
int dist__kv_watch_queue(dist__kv *kv, dist__kv_waiter *w, const char *key,
                         dist__errbuf *e);
/* Removes whatever w still has registered and frees its bookkeeping. Safe
 * on a waiter that was never registered (zeroed) or already woken. */
void dist__kv_unwatch(dist__kv *kv, dist__kv_waiter *w);

#endif
