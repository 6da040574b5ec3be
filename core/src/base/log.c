/* log.c - leveled, per-subsystem logging with a replaceable sink, and the
 * debug levels (DIST_DEBUG / TORCH_DISTRIBUTED_DEBUG).
 *
 * The effective level follows torch's matrix: DIST_LOG_LEVEL (or
 * TORCH_CPP_LOG_LEVEL) ERROR/WARNING/INFO, and at INFO the debug level moves
 * it to DEBUG (DIST_DEBUG=INFO) or TRACE (DIST_DEBUG=DETAIL). A line costs
 * one relaxed load and a branch when filtered out (dist__log_on in
 * dist_int.h); formatting happens only for lines that will be written.
 *
 * Lines: "host:pid:tid [rank] SUBSYS LEVEL message", written with one
 * write(2) each so lines of concurrent threads and processes never mix.
 *
 * Fork (DESIGN.md, Processes): the sink's lock is taken around fork, so a
 * child never inherits it held by a thread that does not exist there, and a
 * child reopens a DIST_LOG_FILE whose name holds its pid (%p) instead of
 * writing into its parent's. */
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "dist_int.h"

_Atomic int dist__log_level = DIST_LOG_WARNING;
_Atomic uint32_t dist__log_subsys_mask = UINT32_MAX;

static _Atomic int debug_level = DIST_DEBUG_OFF;
/* dist_set_debug_level was called: init no longer re-reads the variable. */
static _Atomic bool debug_level_explicit;
static _Atomic int base_level = DIST_LOG_WARNING; /* from DIST_LOG_LEVEL */
static _Atomic int log_rank = -1;

static pthread_mutex_t sink_lock = PTHREAD_MUTEX_INITIALIZER;
static dist_log_sink_fn sink_fn;
static void *sink_arg;
static int log_fd = -1; /* DIST_LOG_FILE, opened on first line */
static char log_file_pattern[512];

static pthread_once_t env_once = PTHREAD_ONCE_INIT;
void (*_Atomic dist__log_hook)(dist_log_level lvl, const char *line);

static const char *const level_names[] = {"ERROR", "WARN", "INFO", "DEBUG", "TRACE"};

static const char *subsys_name(dist_subsys s) {
  switch (s) {
#define SUB_(name, bit) \
  case DIST_SUBSYS_##name: \
    return #name;
    DIST_SUBSYS_MAP(SUB_)
#undef SUB_
  default:
    return "?";
  }
}

/* torch's matrix: only INFO is refined by the debug level. */
static void recompute_level(void) {
  int base = atomic_load(&base_level);
  int lvl = base;
  if (base == DIST_LOG_INFO) {
    int dbg = atomic_load(&debug_level);
    lvl = dbg == DIST_DEBUG_DETAIL ? DIST_LOG_TRACE
          : dbg == DIST_DEBUG_INFO ? DIST_LOG_DEBUG
                                   : DIST_LOG_INFO;
  }
  atomic_store(&dist__log_level, lvl);
}

/* Reads ours, or torch's when ours is unset. */
static const char *env_pair(const char *ours, const char *torch, const char **which) {
  const char *v = dist__getenv(ours);
  *which = ours;
  if (!v) {
    v = dist__getenv(torch);
    *which = torch;
  }
  return v;
}

static int parse_log_level(void) {
  const char *var;
  const char *v = env_pair("DIST_LOG_LEVEL", "TORCH_CPP_LOG_LEVEL", &var);
  int lvl = DIST_LOG_WARNING;
  if (!v) {
    atomic_store(&base_level, lvl);
    return DIST_OK;
  }
  if (!strcasecmp(v, "ERROR") || !strcasecmp(v, "FATAL"))
    lvl = DIST_LOG_ERROR;
  else if (!strcasecmp(v, "WARNING") || !strcasecmp(v, "WARN"))
    lvl = DIST_LOG_WARNING;
  else if (!strcasecmp(v, "INFO"))
    lvl = DIST_LOG_INFO;
  else {
    atomic_store(&base_level, DIST_LOG_WARNING);
    dist__env_warn(var, v, "ERROR, WARNING, INFO", "WARNING");
    return dist__set_last_error(DIST_E_INVAL, "%s='%s' is not one of ERROR, WARNING, INFO",
                                var, v);
  }
  atomic_store(&base_level, lvl);
  return DIST_OK;
}

static int parse_debug_level(void) {
  const char *var;
  const char *v = env_pair("DIST_DEBUG", "TORCH_DISTRIBUTED_DEBUG", &var);
  int dbg = DIST_DEBUG_OFF;
  int rc = DIST_OK;
  if (v) {
    if (!strcasecmp(v, "OFF"))
      dbg = DIST_DEBUG_OFF;
    else if (!strcasecmp(v, "INFO"))
      dbg = DIST_DEBUG_INFO;
    else if (!strcasecmp(v, "DETAIL"))
      dbg = DIST_DEBUG_DETAIL;
    else
      rc = DIST_E_INVAL;
  }
  atomic_store(&debug_level, dbg);
  recompute_level();
  if (rc != DIST_OK) {
    dist__env_warn(var, v, "OFF, INFO, DETAIL", "OFF");
    dist__set_last_error(rc, "%s='%s' is not one of OFF, INFO, DETAIL", var, v);
  }
  return rc;
}

/* "STORE,PG" shows only those; "^TCP,SHM" shows all but those. */
static int parse_subsys(void) {
  const char *v = dist__getenv("DIST_LOG_SUBSYS");
  if (!v || !strcasecmp(v, "ALL")) {
    atomic_store(&dist__log_subsys_mask, UINT32_MAX);
    return DIST_OK;
  }
  bool exclude = v[0] == '^';
  uint32_t mask = 0;
  char buf[256];
  snprintf(buf, sizeof buf, "%s", v + exclude);
  int rc = DIST_OK;
  for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok;
       tok = strtok_r(NULL, ",", &save)) {
    bool found = false;
    for (int s = 0; s < DIST_SUBSYS_COUNT_; s++)
      if (!strcasecmp(tok, subsys_name((dist_subsys)s))) {
        mask |= 1u << s;
        found = true;
      }
    if (!found) {
      dist__env_warn("DIST_LOG_SUBSYS", v, "a comma list of CORE STORE PG COLL TCP SHM NCCL "
                     "WPG TRACER MON MPI RUN, or ^ and such a list to hide them",
                     "the known names");
      rc = DIST_E_INVAL;
    }
  }
  atomic_store(&dist__log_subsys_mask, exclude ? ~mask : mask);
  return rc;
}

static int read_env(void) {
  const char *f = dist__getenv("DIST_LOG_FILE");
  pthread_mutex_lock(&sink_lock);
  snprintf(log_file_pattern, sizeof log_file_pattern, "%s", f ? f : "");
  if (log_fd >= 0) {
    close(log_fd);
    log_fd = -1;
  }
  pthread_mutex_unlock(&sink_lock);
  int rc = parse_subsys();
  int rc2 = parse_log_level();
  int rc3 = parse_debug_level();
  return rc2 != DIST_OK ? rc2 : rc3 != DIST_OK ? rc3 : rc;
}

static void env_once_fn(void) { (void)read_env(); }

void dist__log_init_once(void) { pthread_once(&env_once, env_once_fn); }

static void fork_prepare(void) { pthread_mutex_lock(&sink_lock); }

static void fork_parent(void) { pthread_mutex_unlock(&sink_lock); }

static void fork_child(void) {
  if (log_fd >= 0 && strstr(log_file_pattern, "%p")) {
    close(log_fd);
    log_fd = -1; /* reopened under the child's pid at its first line */
  }
  pthread_mutex_unlock(&sink_lock);
}

/* The library reads the environment when it is loaded, so the very first
 * line (even from a store created before init) is filtered right. */
__attribute__((constructor)) static void log_ctor(void) {
  dist__log_init_once();
  pthread_atfork(fork_prepare, fork_parent, fork_child);
}

int dist_set_debug_level_from_env(void) {
  dist__log_init_once();
  return read_env();
}

void dist__log_reread_debug_level(void) {
  dist__log_init_once();
  if (!atomic_load(&debug_level_explicit))
    (void)parse_debug_level();
}

void dist_set_debug_level(dist_debug_level level) {
  atomic_store(&debug_level_explicit, true);
  if (level < DIST_DEBUG_OFF || level > DIST_DEBUG_DETAIL)
    level = DIST_DEBUG_OFF;
  atomic_store(&debug_level, level);
  recompute_level();
}

dist_debug_level dist_get_debug_level(void) {
  return (dist_debug_level)atomic_load(&debug_level);
}

dist_log_level dist_log_get_level(void) { return (dist_log_level)atomic_load(&dist__log_level); }

void dist_log_set_level(dist_log_level level) {
  atomic_store(&base_level, level);
  atomic_store(&dist__log_level, level);
}

void dist_log_set_subsys_mask(uint32_t mask) { atomic_store(&dist__log_subsys_mask, mask); }

void dist_log_set_rank(int rank) { atomic_store(&log_rank, rank); }

int dist__log_rank(void) { return atomic_load(&log_rank); }

void dist_log_set_sink(dist_log_sink_fn fn, void *arg) {
  pthread_mutex_lock(&sink_lock);
  sink_fn = fn;
  sink_arg = arg;
  pthread_mutex_unlock(&sink_lock);
}

/* Expands %h (host), %p (pid) and %r (rank, from init or RANK). */
static void expand_pattern(const char *pat, char *out, size_t len) {
  size_t off = 0;
  out[0] = '\0';
  for (const char *p = pat; *p && off + 1 < len; p++) {
    if (p[0] == '%' && p[1]) {
      p++;
      int r = atomic_load(&log_rank);
      const char *env_rank = dist__getenv("RANK");
      if (*p == 'h')
        dist__appendf(out, len, &off, "%s", dist__hostname());
      else if (*p == 'p')
        dist__appendf(out, len, &off, "%d", (int)getpid());
      else if (*p == 'r' && r >= 0)
        dist__appendf(out, len, &off, "%d", r);
      else if (*p == 'r')
        dist__appendf(out, len, &off, "%s", env_rank ? env_rank : "x");
      else
        dist__appendf(out, len, &off, "%%%c", *p);
    } else {
      out[off++] = *p;
      out[off] = '\0';
    }
  }
}

/* DIST_LOG_FILE that cannot be opened (a missing directory): said once on
 * stderr, where the lines then go (sink_lock held: written directly). */
static void warn_log_file(const char *path, int err) {
  static bool warned;
  if (warned)
    return;
  warned = true;
  char m[1400];
  int n = snprintf(m, sizeof m, "%s:%d:%ld [-] CORE WARN DIST_LOG_FILE='%s': cannot open '%s' "
                   "(%s); logging to stderr\n", dist__hostname(), (int)getpid(),
                   (long)syscall(SYS_gettid), log_file_pattern, path, strerror(err));
  if (n > 0) {
    ssize_t w = write(STDERR_FILENO, m, (size_t)n < sizeof m ? (size_t)n : sizeof m - 1);
    (void)w;
  }
}

/* Called with sink_lock held. */
static void write_default(const char *line, size_t n) {
  int fd = STDERR_FILENO;
  if (log_file_pattern[0]) {
    if (log_fd < 0) {
      char path[1024];
      expand_pattern(log_file_pattern, path, sizeof path);
      log_fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
      if (log_fd < 0)
        warn_log_file(path, errno);
    }
    if (log_fd >= 0)
      fd = log_fd;
  }
  ssize_t w = write(fd, line, n);
  (void)w; /* nowhere left to report a failed log write */
}

void dist__log_write(dist_log_level lvl, dist_subsys sub, const char *fmt, ...) {
  char line[DIST_ERRMSG_LEN + 256];
  int r = atomic_load(&log_rank);
  char rank[16];
  if (r >= 0)
    snprintf(rank, sizeof rank, "%d", r);
  else
    snprintf(rank, sizeof rank, "-");
  int head = snprintf(line, sizeof line, "%s:%d:%ld [%s] %s %s ", dist__hostname(),
                      (int)getpid(), (long)syscall(SYS_gettid), rank, subsys_name(sub),
                      level_names[lvl]);
  size_t off = head > 0 ? (size_t)head : 0;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line + off, sizeof line - off - 1, fmt, ap);
  va_end(ap);
  size_t n = strlen(line);
  pthread_mutex_lock(&sink_lock);
  if (sink_fn) {
    sink_fn(sink_arg, lvl, sub, line);
  } else {
    line[n] = '\n';
    write_default(line, n + 1);
  }
  pthread_mutex_unlock(&sink_lock);
  /* Outside the lock, and never from inside an observer that logs. */
  static _Thread_local bool in_hook;
  void (*hook)(dist_log_level, const char *) = atomic_load(&dist__log_hook);
  if (hook && !in_hook && atomic_load(&debug_level) == DIST_DEBUG_DETAIL) {
    in_hook = true;
    line[n] = '\0';
    hook(lvl, line);
    in_hook = false;
  }
}

void dist_log(dist_log_level level, dist_subsys subsys, const char *fmt, ...) {
  if (level < DIST_LOG_ERROR || level > DIST_LOG_TRACE || subsys >= DIST_SUBSYS_COUNT_)
    return;
  if (!dist__log_on(level, subsys))
    return;
  char msg[DIST_ERRMSG_LEN];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  dist__log_write(level, subsys, "%s", msg);
}
