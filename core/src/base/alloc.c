/* alloc.c - allocation wrappers with a fault-injection hook.
 *
 * Every allocation in core goes through dist__malloc and friends so a test
 * can make the N-th one fail (SQLite's faultsim, curl's torture mode) and
 * check that each failure is reported as DIST_E_NOMEM, never a crash. */
#include <stdlib.h>

#include "dist_int.h"

static _Atomic long fail_countdown; /* 0: never fail */
/* The same, counting only the calling thread's allocations: multi-rank
 * sweeps fail the caller's allocations, not those of a store server or
 * progress thread that happens to run at that moment. */
static _Thread_local long thread_countdown;

void dist__fault_fail_alloc_after(long n) { atomic_store(&fail_countdown, n); }

void dist__fault_fail_thread_alloc_after(long n) { thread_countdown = n; }

long dist__fault_pending(void) { return atomic_load(&fail_countdown) + thread_countdown; }

static bool should_fail(void) {
  if (__builtin_expect(thread_countdown > 0, 0))
    return --thread_countdown == 0;
  long n = atomic_load_explicit(&fail_countdown, memory_order_relaxed);
  if (__builtin_expect(n == 0, 1))
    return false;
  /* Count down; the allocation that takes it to zero fails and every later
   * one succeeds again, so cleanup paths can run. */
  while (n > 0) {
    if (atomic_compare_exchange_weak(&fail_countdown, &n, n - 1))
      return n == 1;
  }
  return false;
}

void *dist__malloc(size_t n) { return should_fail() ? NULL : malloc(n ? n : 1); }

void *dist__calloc(size_t n, size_t size) {
  return should_fail() ? NULL : calloc(n ? n : 1, size ? size : 1);
}

void *dist__realloc(void *p, size_t n) {
  return should_fail() ? NULL : realloc(p, n ? n : 1);
}

void dist__free(void *p) { free(p); }

void dist_free(void *p) { free(p); }

char *dist__strndup(const char *s, size_t n) {
  size_t len = strnlen(s, n);
  char *d = dist__malloc(len + 1);
  if (d) {
    memcpy(d, s, len);
    d[len] = '\0';
  }
  return d;
}

char *dist__strdup(const char *s) { return dist__strndup(s, strlen(s)); }
