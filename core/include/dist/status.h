/* status.h - status codes and error messages.
 *
 * Every libdist call returns an int: DIST_OK (0) or one of the codes below.
 * The codes are numbered in this order and never renumbered; new ones are
 * appended (curl's rule). The detailed message lives on the object that
 * failed (dist_store_errmsg, dist_pg_errmsg, dist_work_errmsg); failures that
 * happen before an object exists leave it in a per-thread buffer read with
 * dist_last_errmsg(). */
#ifndef DIST_STATUS_H
#define DIST_STATUS_H

#include <dist/export.h>

DIST_EXTERN_C_BEGIN

/* X(name, number, short description) */
#define DIST_STATUS_MAP(X)                                              \
  X(OK, 0, "success")                                                   \
  X(E_INVAL, 1, "invalid argument")                                     \
  X(E_NOMEM, 2, "out of memory")                                        \
  X(E_TIMEOUT, 3, "timed out")                                          \
  X(E_DESYNC, 4, "ranks are out of sync")                               \
  X(E_PEER_LOST, 5, "peer lost")                                        \
  X(E_CLOSED, 6, "closed")                                              \
  X(E_ABORTED, 7, "aborted")                                            \
  X(E_NOTSUP, 8, "not supported")                                       \
  X(E_STORE, 9, "store error")                                          \
  X(E_BACKEND, 10, "backend error")                                     \
  X(E_SYS, 11, "system error")                                          \
  X(E_INTERNAL, 12, "internal error")

typedef enum dist_status {
#define DIST_STATUS_ENUM_(name, num, desc) DIST_##name = num,
  DIST_STATUS_MAP(DIST_STATUS_ENUM_)
#undef DIST_STATUS_ENUM_
  DIST_STATUS_COUNT_
} dist_status;

/* The short name of a code ("DIST_E_TIMEOUT"); "DIST_E_UNKNOWN" otherwise. */
DIST_API const char *dist_status_name(int code);
/* A short human description of a code ("timed out"). Never NULL. */
DIST_API const char *dist_strerror(int code);
/* The calling thread's last message for failures that happened before an
 * object existed (init, create functions). Valid until the thread's next
 * libdist call that fails the same way. Never NULL (empty when none). */
DIST_API const char *dist_last_errmsg(void);

DIST_EXTERN_C_END

#endif
