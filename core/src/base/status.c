/* status.c - status names, descriptions and the per-thread error message. */
#include <stdio.h>
#include <stdlib.h>

#include "dist_int.h"

static _Thread_local char last_errmsg[DIST_ERRMSG_LEN];
static _Thread_local int last_rc; /* the status last_errmsg was written for */

const char *dist_status_name(int code) {
  switch (code) {
#define NAME_(name, num, desc) \
  case num:                    \
    return "DIST_" #name;
    DIST_STATUS_MAP(NAME_)
#undef NAME_
  }
  return "DIST_E_UNKNOWN";
}

const char *dist_strerror(int code) {
  switch (code) {
#define DESC_(name, num, desc) \
  case num:                    \
    return desc;
    DIST_STATUS_MAP(DESC_)
#undef DESC_
  }
  return "unknown status";
}

const char *dist_last_errmsg(void) { return last_errmsg; }

const char *dist_errmsg(int rc, dist_pg *group) {
  if (rc == DIST_OK)
    return "";
  if (last_rc == rc && last_errmsg[0])
    return last_errmsg;
  const char *m = dist_pg_errmsg(group);
  if (m && m[0])
    return m;
  return dist_strerror(rc);
}

void dist__clear_last_error(void) {
  last_errmsg[0] = '\0';
  last_rc = DIST_OK;
}

int dist__set_last_errorv(int rc, const char *fmt, va_list ap) {
  char tmp[DIST_ERRMSG_LEN];
  /* Formatted aside first: an argument may point into last_errmsg itself
   * ("%s", dist_last_errmsg()). */
  vsnprintf(tmp, sizeof tmp, fmt, ap);
  memcpy(last_errmsg, tmp, sizeof tmp);
  last_rc = rc;
  return rc;
}

int dist__set_last_error(int rc, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  dist__set_last_errorv(rc, fmt, ap);
  va_end(ap);
  return rc;
}

int dist__err_setv(dist__errbuf *e, int rc, const char *fmt, va_list ap) {
  va_list ap2;
  va_copy(ap2, ap);
  if (e && e->msg[0] == '\0')
    vsnprintf(e->msg, sizeof e->msg, fmt, ap);
  /* The thread's message mirrors the object's so callers that only kept a
   * status (or lost the object) can still say why. */
  dist__set_last_errorv(rc, fmt, ap2);
  va_end(ap2);
  return rc;
}

int dist__err_set(dist__errbuf *e, int rc, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  dist__err_setv(e, rc, fmt, ap);
  va_end(ap);
  return rc;
}

int dist__err_sys(dist__errbuf *e, int err, const char *fmt, ...) {
  char head[DIST_ERRMSG_LEN - 128];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(head, sizeof head, fmt, ap);
  va_end(ap);
  if (e && e->msg[0] == '\0')
    e->sys_errno = err;
  return dist__err_set(e, DIST_E_SYS, "%s: %s", head, strerror(err));
}

_Noreturn void dist__assert_fail(const char *cond, const char *file, int line) {
  fprintf(stderr, "libdist: internal assertion failed: %s (%s:%d)\n", cond, file,
          line);
  abort();
}
