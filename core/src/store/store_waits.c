/* store_waits.c - the blocking store calls the program itself is in
 * (dist/internal/store.h): store.c brackets its blocking calls with
 * dist__store_wait_begin and _end, and the monitor reads the table when it
 * publishes its record, so a rank that waits for a key nobody sets is
 * named in that call, not as "busy outside the library".
 *
 * Only the program's own calls are kept: the library waits in its stores
 * all the time (rendezvous, group creation, the checking layer's
 * exchanges, the monitor's reads), and those calls come from inside the
 * object core is linked into. A call whose return address dladdr places
 * in another object (the program, a library of the program's) is the
 * program's. The check costs a dladdr per blocking call, which is small
 * beside any store's round trip. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <dist/internal/store.h>

#include "store_int.h"

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static dist__store_wait table[DIST_STORE_WAITS_MAX];
static bool used[DIST_STORE_WAITS_MAX];
static _Atomic int64_t last_end_ns;
static const char marker; /* an address inside core's object */

/* Whether a call returning to caller was made by the program. */
static bool from_program(const void *caller) {
  static void *_Atomic own;
  Dl_info me, it;
  void *base = atomic_load_explicit(&own, memory_order_relaxed);
  if (!base && dladdr(&marker, &me))
    atomic_store_explicit(&own, base = me.dli_fbase, memory_order_relaxed);
  if (!caller || !base)
    return false;
  return !dladdr(caller, &it) || it.dli_fbase != base; /* unknown code: not ours */
}

int dist__store_wait_begin(const char *op, const char *const *keys, size_t n,
                           int64_t timeout_ms, const void *caller) {
  if (!n || !from_program(caller))
    return -1;
  int slot = -1;
  pthread_mutex_lock(&mu);
  for (int i = 0; i < DIST_STORE_WAITS_MAX && slot < 0; i++)
    if (!used[i])
      slot = i;
  if (slot >= 0) {
    dist__store_wait *w = &table[slot];
    used[slot] = true;
    *w = (dist__store_wait){.tid = (int)syscall(SYS_gettid), .op = op, .n_keys = n,
                            .since_ns = dist__now_ns(), .timeout_ms = timeout_ms,
                            .caller = caller};
    snprintf(w->key, sizeof w->key, "%s", keys[0]);
  }
  pthread_mutex_unlock(&mu);
  return slot;
}

void dist__store_wait_end(int slot) {
  if (slot < 0)
    return;
  pthread_mutex_lock(&mu);
  used[slot] = false;
  pthread_mutex_unlock(&mu);
  atomic_store_explicit(&last_end_ns, dist__now_ns(), memory_order_relaxed);
}

int dist__store_waits(dist__store_wait *out, int cap) {
  int k = 0;
  pthread_mutex_lock(&mu);
  for (int i = 0; i < DIST_STORE_WAITS_MAX; i++) {
    if (!used[i])
      continue;
    /* insertion by age: a handful at most */
    int j = k < cap ? k++ : cap;
    for (; j > 0 && out[j - 1].since_ns > table[i].since_ns; j--)
      if (j < cap)
        out[j] = out[j - 1];
    if (j < cap)
      out[j] = table[i];
  }
  pthread_mutex_unlock(&mu);
  return k;
}

int64_t dist__store_waits_last_end_ns(void) {
  return atomic_load_explicit(&last_end_ns, memory_order_relaxed);
}
