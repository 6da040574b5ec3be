/* util.c - small helpers shared by core: environment, sleeping, strings. */
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dist_int.h"

const char *dist__getenv(const char *name) {
  const char *v = getenv(name);
  return v && *v ? v : NULL;
}

/* The variables warned about so far in this process. */
#define WARNED_MAX 64
static const char *warned[WARNED_MAX];
static int n_warned;
static pthread_mutex_t warned_lock = PTHREAD_MUTEX_INITIALIZER;

void dist__env_warn(const char *name, const char *value, const char *accepted,
                    const char *used) {
  bool first = true;
  pthread_mutex_lock(&warned_lock);
  for (int i = 0; i < n_warned && first; i++)
    first = strcmp(warned[i], name) != 0;
  if (first && n_warned < WARNED_MAX)
    warned[n_warned++] = name; /* names are string literals or env names */
  pthread_mutex_unlock(&warned_lock);
  if (first)
    dist__log_write(DIST_LOG_WARNING, DIST_SUBSYS_CORE,
                    "%s='%s' is not valid: accepted: %s; using %s", name, value, accepted,
                    used);
}

/* Ours first; torch's (or Gloo's) name only when ours is unset, the rule
 * TORCH_DISTRIBUTED_DEBUG has always followed, so a launcher that sets
 * ours wins over a torch habit left in the environment. */
static const struct {
  const char *ours, *theirs;
} aliases[] = {
    {"DIST_DEBUG", "TORCH_DISTRIBUTED_DEBUG"},
    {"DIST_LOG_LEVEL", "TORCH_CPP_LOG_LEVEL"},
    {"DIST_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME"},
    {"DIST_SHOW_STACKTRACES", "TORCH_SHOW_CPP_STACKTRACES"},
};

const char *dist_getenv(const char *name, const char **which) {
  if (which)
    *which = name;
  if (!name)
    return NULL;
  const char *v = dist__getenv(name);
  for (size_t i = 0; !v && i < sizeof aliases / sizeof aliases[0]; i++)
    if (!strcmp(name, aliases[i].ours)) {
      v = dist__getenv(aliases[i].theirs);
      if (v && which)
        *which = aliases[i].theirs;
    }
  return v;
}

int dist__env_int(const char *name, int64_t lo, int64_t hi, int64_t dflt,
                  int64_t *out) {
  const char *v = dist_getenv(name, &name); /* torch's name when ours is unset */
  *out = dflt;
  if (!v)
    return DIST_OK;
  char *end;
  errno = 0;
  long long x = strtoll(v, &end, 10);
  if (errno || end == v || *end != '\0' || x < lo || x > hi) {
    char acc[96], used[32];
    snprintf(acc, sizeof acc, "an integer in [%" PRId64 ", %" PRId64 "]", lo, hi);
    snprintf(used, sizeof used, "%" PRId64, dflt);
    dist__env_warn(name, v, acc, used);
    return dist__set_last_error(DIST_E_INVAL, "%s='%s' is not %s", name, v, acc);
  }
  *out = x;
  return DIST_OK;
}

/* "1.5" (seconds), "30s", "2m", "1h", "500ms" -> milliseconds; -1 if not. */
static int64_t parse_duration_ms(const char *v) {
  char *end;
  errno = 0;
  double x = strtod(v, &end);
  if (errno || end == v || !(x > 0) || x > 1e9)
    return -1;
  double scale = !strcmp(end, "") || !strcmp(end, "s") ? 1000
                 : !strcmp(end, "ms")                  ? 1
                 : !strcmp(end, "m")                   ? 60000
                 : !strcmp(end, "h")                   ? 3600000
                                                       : -1;
  if (scale < 0 || x * scale < 1)
    return -1;
  return (int64_t)(x * scale);
}

int64_t dist__default_timeout_ms(void) {
  const char *v = dist__getenv("DIST_TIMEOUT");
  if (!v)
    return DIST_DEFAULT_TIMEOUT_MS;
  int64_t ms = parse_duration_ms(v);
  if (ms < 0) {
    char used[32];
    snprintf(used, sizeof used, "%d s", DIST_DEFAULT_TIMEOUT_MS / 1000);
    dist__env_warn("DIST_TIMEOUT", v, "seconds, as 600 or 1.5, or with a unit: 30s, 2m, "
                   "1h, 500ms", used);
    return DIST_DEFAULT_TIMEOUT_MS;
  }
  return ms;
}

void dist__sleep_ms(int64_t ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

char *dist__appendf(char *buf, size_t len, size_t *off, const char *fmt, ...) {
  if (*off >= len)
    return buf;
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(buf + *off, len - *off, fmt, ap);
  va_end(ap);
  if (n > 0)
    *off = *off + (size_t)n < len ? *off + (size_t)n : len - 1;
  return buf;
}

char *dist__format_ranks(const int *ranks, size_t n, char *buf, size_t len) {
  size_t off = 0;
  buf[0] = '\0';
  for (size_t i = 0; i < n;) {
    size_t j = i;
    while (j + 1 < n && ranks[j + 1] == ranks[j] + 1)
      j++;
    const char *sep = i ? "," : "";
    if (j == i)
      dist__appendf(buf, len, &off, "%s%d", sep, ranks[i]);
    else
      dist__appendf(buf, len, &off, "%s%d-%d", sep, ranks[i], ranks[j]);
    i = j + 1;
  }
  return buf;
}

static char host_name[256];
static pthread_once_t host_once = PTHREAD_ONCE_INIT;

static void fill_host_name(void) {
  if (gethostname(host_name, sizeof host_name - 1) != 0)
    strcpy(host_name, "localhost");
}

const char *dist__hostname(void) {
  pthread_once(&host_once, fill_host_name);
  return host_name;
}
