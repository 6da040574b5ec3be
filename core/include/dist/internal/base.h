/* dist/internal/base.h - core's base level as the bundled parts may use it
 * (not installed): logging, the thread's error message, allocation through
 * core's allocator, clocks, environment and string helpers.
 *
 * Part of core's part interface (dist/internal/: base.h, launch.h, pg.h, store.h):
 * wrapper_pg, tracer, monitor and bench/ include these headers, never one
 * of core/src (tools/check_layers.sh checks). Core's own files get this
 * through base/dist_int.h, which adds what only core uses (DIST_TRY,
 * error buffers, fault injection). Internal non-static symbols are named
 * dist__<module>_<verb>. */
#ifndef DIST_INTERNAL_BASE_H
#define DIST_INTERNAL_BASE_H

#include <errno.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include <dist/dist.h>

#define DIST_ERRMSG_LEN 2048

/* --- logging ------------------------------------------------------------- */

/* The effective level; checked before any formatting so a disabled line
 * costs one load and one branch. */
extern _Atomic int dist__log_level;
extern _Atomic uint32_t dist__log_subsys_mask;

static inline bool dist__log_on(dist_log_level lvl, dist_subsys sub) {
  return (int)lvl <= atomic_load_explicit(&dist__log_level, memory_order_relaxed) &&
         (atomic_load_explicit(&dist__log_subsys_mask, memory_order_relaxed) >> sub) & 1u;
}

void dist__log_write(dist_log_level lvl, dist_subsys sub, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#define DIST_LOG(lvl, sub, ...)                                           \
  do {                                                                    \
    if (dist__log_on(DIST_LOG_##lvl, DIST_SUBSYS_##sub))                  \
      dist__log_write(DIST_LOG_##lvl, DIST_SUBSYS_##sub, __VA_ARGS__);    \
  } while (0)

/* Sets the calling thread's message (dist_last_errmsg); returns rc. */
int dist__set_last_error(int rc, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
int dist__set_last_errorv(int rc, const char *fmt, va_list ap);
void dist__clear_last_error(void);


/* --- memory -------------------------------------------------------------- */

/* All of core allocates through these, so dist_set_allocator() lets fault
 * tests fail allocations (SQLite's faultsim). */
void *dist__malloc(size_t n);
void *dist__calloc(size_t n, size_t size);
void *dist__realloc(void *p, size_t n);
void dist__free(void *p);
char *dist__strdup(const char *s);
char *dist__strndup(const char *s, size_t n);

/* --- clocks -------------------------------------------------------------- */

static inline int64_t dist__now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}
static inline int64_t dist__now_ms(void) { return dist__now_ns() / 1000000; }
/* First slope of dist_clock_ns (clock.c, the observers' TSC clock); waits
 * up to 5 ms, once per process. */
void dist__clock_calibrate(void);
/* Milliseconds left until deadline_ms (never negative). */
static inline int64_t dist__remaining_ms(int64_t deadline_ms) {
  int64_t left = deadline_ms - dist__now_ms();
  return left > 0 ? left : 0;
}
/* A deadline timeout_ms from now; timeout_ms < 0 means "effectively never". */
static inline int64_t dist__deadline_ms(int64_t timeout_ms) {
  return timeout_ms < 0 ? INT64_MAX / 2 : dist__now_ms() + timeout_ms;
}
/* Sleeps about ms milliseconds (EINTR-safe). */
void dist__sleep_ms(int64_t ms);

/* --- environment --------------------------------------------------------- */

/* getenv that treats "" as unset. */
const char *dist__getenv(const char *name);
/* Parses an integer environment variable (or its torch counterpart when
 * it is unset, as dist_getenv reads it); when it is set but not an
 * integer in [lo, hi]: *out = dflt, one warning per process naming the
 * variable, the value, what is accepted and what is used
 * (dist__env_warn), and DIST_E_INVAL with the message. */
int dist__env_int(const char *name, int64_t lo, int64_t hi, int64_t dflt,
                  int64_t *out);
/* The default group timeout: DIST_TIMEOUT (seconds: "600", "1.5", "30s",
 * "2m", "500ms", "1h") or DIST_DEFAULT_TIMEOUT_MS. */
int64_t dist__default_timeout_ms(void);
/* "NAME='value' is not valid: accepted: <accepted>; using <used>" at
 * WARNING, once per variable per process (whatever the log filters: a
 * bad setting must be seen). Any thread. */
void dist__env_warn(const char *name, const char *value, const char *accepted,
                    const char *used);

/* --- strings ------------------------------------------------------------- */

/* snprintf that appends at *off and never overflows; returns buf. */
char *dist__appendf(char *buf, size_t len, size_t *off, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* "0,2-3,5" for a sorted list of ints. */
char *dist__format_ranks(const int *ranks, size_t n, char *buf, size_t len);
/* host name of this machine (cached). */
const char *dist__hostname(void);

#endif
