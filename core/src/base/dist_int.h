/* dist_int.h - the base level's header, which every file of core includes
 * (nng's nng_impl.h).
 *
 * Everything core's .c files share and nothing users see: what the parts
 * above core share too (dist/internal/base.h: logging, the thread's error
 * message, allocation wrappers so fault tests can fail allocation N,
 * clocks, environment and string helpers), and what only core uses: the
 * error-propagation macros, error buffers, fault hooks and the log's
 * plumbing. Internal non-static symbols are named dist__<module>_<verb>. */
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
#include <dist/internal/base.h>

/* --- logging (the rest is dist/internal/base.h) --------------------------- */

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

/* The status a caller reports for a failed store call rc: out of memory
 * stays DIST_E_NOMEM (the caller may retry), anything else is the store's
 * failure, DIST_E_STORE. */
static inline int dist__store_status(int rc) {
  return rc == DIST_E_NOMEM ? DIST_E_NOMEM : DIST_E_STORE;
}

/* The status of the thread's message (dist_last_errmsg), for dist_errmsg. */
int dist__last_error_status(void);

/* Test hook: fail the n-th allocation from now (0 = never). */
void dist__fault_fail_alloc_after(long n);
/* The same for the calling thread's allocations only. */
void dist__fault_fail_thread_alloc_after(long n);
/* Test hook: allocations left before the armed failure (0: it fired, or
 * none is armed), so a sweep knows when N passed the last allocation. */
long dist__fault_pending(void);

#endif
