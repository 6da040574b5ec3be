/* logcap.c - log lines captured for a test (logcap.h). Any thread may log:
 * the buffer is behind a mutex, and text past 64 KiB is dropped. */
#include "logcap.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static char buf[1 << 16];
static size_t len;

static void sink(void *arg, dist_log_level lvl, dist_subsys sub, const char *line) {
  (void)arg, (void)lvl, (void)sub;
  pthread_mutex_lock(&mu);
  len += (size_t)snprintf(buf + len, sizeof buf - len, "%s\n", line);
  if (len >= sizeof buf)
    len = sizeof buf - 1;
  pthread_mutex_unlock(&mu);
}

void dist_test_log_capture(dist_log_level level) {
  dist_log_set_sink(sink, NULL);
  dist_log_set_level(level);
}

const char *dist_test_log_text(void) {
  static char copy[sizeof buf];
  pthread_mutex_lock(&mu);
  memcpy(copy, buf, len + 1);
  pthread_mutex_unlock(&mu);
  return copy;
}

void dist_test_log_release(void) { dist_log_set_sink(NULL, NULL); }
