/* dist_int.h - core's internal umbrella header (nng's nng_impl.h).
 *
 * Everything core's .c files share and nothing users see: the logging and
 * error-propagation macros, allocation wrappers (so fault tests can fail
 * allocation N), clocks, and small string helpers. Internal non-static
 * symbols are named dist__<module>_<verb>. */
#ifndef DIST_INT_H
#define DIST_INT_H

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

/* Set by observer.c while observers listen: at DIST_DEBUG=DETAIL every
 * written line also goes to them as DIST_EV_LOG. */
extern void (*_Atomic dist__log_hook)(dist_log_level lvl, const char *line);

/* Reads the environment once (first use); idempotent. */
void dist__log_init_once(void);
/* The rank log lines show (set by init once the rendezvous named it; -1
 * before). */
int dist__log_rank(void);
/* Init reads DIST_DEBUG / TORCH_DISTRIBUTED_DEBUG again, as torch does when
 * init_process_group runs, so a program that sets it before init (on one
 * rank, say) gets that level; a level set with dist_set_debug_level wins. */
void dist__log_reread_debug_level(void);

/* The monitor's diagnosis of a failure as the job's cause (cause.c): as
 * dist_post_cause, but it replaces a cause of the same status that was
 * posted without a diagnosis (launch_env.h, DIST_KEY_CAUSE). */
int dist__cause_post_diagnosis(int status, const dist_cause_info *info, const char *report);
/* The fields line of a cause value (launch_env.h), or f with nothing set
 * (group_id -1) when the value has none. */
#define DIST_CAUSE_CULPRITS_MAX 64
typedef struct dist__cause_fields {
  int culprits[DIST_CAUSE_CULPRITS_MAX];
  int n_culprits;
  int group_id;
  uint64_t seq;
  char group_name[96], op[32], field[32], site[192];
} dist__cause_fields;
void dist__cause_parse_info(const char *val, size_t len, dist__cause_fields *f);

/* --- errors -------------------------------------------------------------- */

/* Each hop of a failing call logs "-> rc file:line" at DEBUG (NCCL's
 * checks.h), so the log carries a backtrace. */
#define DIST_TRY(call)                                                        \
  do {                                                                        \
    int dist_try_rc_ = (call);                                                \
    if (dist_try_rc_ != DIST_OK) {                                            \
      DIST_LOG(DEBUG, CORE, "-> %s %s:%d", dist_status_name(dist_try_rc_),    \
               __FILE__, __LINE__);                                           \
      return dist_try_rc_;                                                    \
    }                                                                         \
  } while (0)

#define DIST_TRY_GOTO(call, rc, label)                                        \
  do {                                                                        \
    (rc) = (call);                                                            \
    if ((rc) != DIST_OK) {                                                    \
      DIST_LOG(DEBUG, CORE, "-> %s %s:%d", dist_status_name(rc), __FILE__,    \
               __LINE__);                                                     \
      goto label;                                                             \
    }                                                                         \
  } while (0)

/* Invariants only; input, I/O and OOM return codes. */
#define DIST_ASSERT(cond)                                                     \
  do {                                                                        \
    if (__builtin_expect(!(cond), 0))                                         \
      dist__assert_fail(#cond, __FILE__, __LINE__);                           \
  } while (0)
_Noreturn void dist__assert_fail(const char *cond, const char *file, int line);

/* Sets the calling thread's message (dist_last_errmsg); returns rc. */
int dist__set_last_error(int rc, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
int dist__set_last_errorv(int rc, const char *fmt, va_list ap);
void dist__clear_last_error(void);

/* An error buffer kept on an object: the first failure of a call wins; the
 * next call clears it (curl's Curl_failf). */
typedef struct dist__errbuf {
  char msg[DIST_ERRMSG_LEN];
  int sys_errno; /* errno copied at the failure, 0 if none */
} dist__errbuf;

static inline void dist__err_clear(dist__errbuf *e) {
  e->msg[0] = '\0';
  e->sys_errno = 0;
}
/* Sets the message if the buffer is empty; also sets the thread's message.
 * Returns rc. */
int dist__err_set(dist__errbuf *e, int rc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
int dist__err_setv(dist__errbuf *e, int rc, const char *fmt, va_list ap);
/* As dist__err_set, appending ": strerror(err)" and recording err. */
int dist__err_sys(dist__errbuf *e, int err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* --- memory -------------------------------------------------------------- */

/* All of core allocates through these, so dist_set_allocator() lets fault
 * tests fail allocations (SQLite's faultsim). */
void *dist__malloc(size_t n);
void *dist__calloc(size_t n, size_t size);
void *dist__realloc(void *p, size_t n);
void dist__free(void *p);
char *dist__strdup(const char *s);
char *dist__strndup(const char *s, size_t n);

/* The status a caller reports for a failed store call rc: out of memory
 * stays DIST_E_NOMEM (the caller may retry), anything else is the store's
 * failure, DIST_E_STORE. */
static inline int dist__store_status(int rc) {
  return rc == DIST_E_NOMEM ? DIST_E_NOMEM : DIST_E_STORE;
}

/* Test hook: fail the n-th allocation from now (0 = never). */
void dist__fault_fail_alloc_after(long n);
/* The same for the calling thread's allocations only. */
void dist__fault_fail_thread_alloc_after(long n);
/* Test hook: allocations left before the armed failure (0: it fired, or
 * none is armed), so a sweep knows when N passed the last allocation. */
long dist__fault_pending(void);

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
