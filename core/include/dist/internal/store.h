/* dist/internal/store.h - what the bundled parts may ask of core's stores
 * beyond the public header (not installed): the store calls the program
 * itself is blocked in.
 *
 * Part of core's part interface (dist/internal/: base.h, launch.h, pg.h,
 * store.h): the parts above core include these, never a header of
 * core/src (tools/check_layers.sh checks).
 *
 * Why: a rank blocked in dist_store_get on a key nobody sets, while its
 * peers wait for it in a collective, is in no operation of a group, and
 * without this the monitor can only call it "busy outside the library".
 * Core keeps the program's blocking store calls in a small table
 * (store/store_waits.c) that the monitor reads when it publishes its
 * record (monitor/src/mon_record.h, the "w" line), so the diagnosis can
 * name the call, its key and its line. Core includes nothing of the
 * monitor: it only keeps the state, as it keeps a refused call's. */
#ifndef DIST_INTERNAL_STORE_H
#define DIST_INTERNAL_STORE_H

#include <stddef.h>
#include <stdint.h>

#define DIST_STORE_WAIT_KEY_LEN 128

/* One blocking store call in progress. */
typedef struct dist__store_wait {
  int tid;                   /* the waiting thread (gettid) */
  const char *op;            /* "get", "wait", "multi_get", "queue_pop" (static) */
  char key[DIST_STORE_WAIT_KEY_LEN]; /* the first key waited for (cut to fit) */
  size_t n_keys;             /* keys it waits for, 1 or more */
  int64_t since_ns;          /* dist__now_ns() when the call began */
  int64_t timeout_ms;        /* its own timeout */
  const void *caller;        /* its return address in the program */
} dist__store_wait;

/* The blocking store calls (dist_store_get, dist_store_wait,
 * dist_store_multi_get, a blocking dist_store_queue_pop) that the program
 * made itself and that have not returned: up to cap of them into out,
 * oldest first; returns how many. A call is the program's when its caller
 * lies outside the object core is linked into (the library's own calls,
 * which the library makes from libdist.so, are not kept; a program linked
 * with the static core has none kept). At most DIST_STORE_WAITS_MAX are
 * followed at once; one more is not kept. Any thread; takes a mutex. */
#define DIST_STORE_WAITS_MAX 16
int dist__store_waits(dist__store_wait *out, int cap);

/* When the last of those calls returned (dist__now_ns()), 0 before any:
 * the rank's last call into the library as far as its stores tell. */
int64_t dist__store_waits_last_end_ns(void);

#endif
