/* mp.c - fork N ranks, wait against a deadline, report every exit. */
#include "mp.h"

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static char last_report[8192];
static dist_store *test_store;

static int64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

const char *dist_test_report(void) { return last_report; }

static void rm_tree(const char *dir) {
  char cmd[600];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd) != 0)
    fprintf(stderr, "mp: could not remove %s\n", dir);
}

static void child(const dist_test_opts *o, dist_test_ctx *ctx) {
  /* Die with the parent so a crashed test never leaves ranks behind. */
  signal(SIGPIPE, SIG_IGN);
  int rc = o->fn(ctx);
  fflush(stdout);
  fflush(stderr);
  _exit(rc & 0xff);
}

static void record(dist_test_result *r, int i, int status, int64_t t0) {
  r->elapsed_ms[i] = now_ms() - t0;
  if (WIFEXITED(status)) {
    r->exit_code[i] = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    r->exit_code[i] = -1;
    r->signal[i] = WTERMSIG(status);
  }
}

/* Reaps children until all are done or the deadline passes. */
static int reap(pid_t *pids, int n, const dist_test_opts *o, dist_test_result *r,
                int64_t t0) {
  int left = n;
  bool killed = false;
  int64_t deadline = t0 + (int64_t)o->timeout_s * 1000;
  while (left > 0) {
    if (o->kill_rank >= 0 && !killed && now_ms() - t0 >= o->kill_after_ms) {
      kill(pids[o->kill_rank], SIGKILL);
      killed = true;
    }
    int status;
    pid_t p = waitpid(-1, &status, WNOHANG);
    if (p > 0) {
      for (int i = 0; i < n; i++)
        if (pids[i] == p) {
          record(r, i, status, t0);
          pids[i] = 0;
          left--;
        }
      continue;
    }
    if (now_ms() >= deadline)
      break;
    usleep(2000);
  }
  for (int i = 0; i < n; i++)
    if (pids[i] > 0) {
      r->timed_out[i] = true;
      kill(pids[i], SIGKILL);
      int status;
      waitpid(pids[i], &status, 0);
      record(r, i, status, t0);
    }
  return left;
}

static int summarize(const dist_test_opts *o, dist_test_result *r) {
  size_t off = 0;
  int bad = 0;
  r->report[0] = '\0';
  for (int i = 0; i < r->n; i++) {
    bool ok = r->exit_code[i] == 0 && !r->timed_out[i];
    if (i == o->kill_rank)
      continue; /* the test judges the killed rank itself */
    if (ok)
      continue;
    bad++;
    int w = snprintf(r->report + off, sizeof r->report - off,
                     "rank %d: %s (exit %d, signal %d) after %lld ms\n", i,
                     r->timed_out[i] ? "still running at the deadline, killed" : "failed",
                     r->exit_code[i], r->signal[i], (long long)r->elapsed_ms[i]);
    if (w > 0 && off + (size_t)w < sizeof r->report)
      off += (size_t)w;
  }
  snprintf(last_report, sizeof last_report, "%s", r->report);
  return bad;
}

int dist_test_run(const dist_test_opts *o, dist_test_result *res) {
  dist_test_result local;
  dist_test_result *r = res ? res : &local;
  memset(r, 0, sizeof *r);
  r->n = o->n;
  if (o->n <= 0 || o->n > DIST_TEST_MAX_RANKS)
    return -1;
  char tmpl[] = "/tmp/dist-test-XXXXXX";
  char *dir = mkdtemp(tmpl);
  if (!dir)
    return -1;
  int pp[2];
  if (pipe(pp) != 0)
    return -1;
  fflush(stdout);
  fflush(stderr);
  pid_t pids[DIST_TEST_MAX_RANKS] = {0};
  int64_t t0 = now_ms();
  for (int i = 0; i < o->n; i++) {
    pid_t p = fork();
    if (p == 0) {
      dist_test_ctx ctx = {i, o->n, dir, {pp[0], pp[1]}, o->arg};
      child(o, &ctx);
    }
    if (p < 0) {
      perror("fork");
      break;
    }
    pids[i] = p;
  }
  close(pp[0]);
  close(pp[1]);
  reap(pids, o->n, o, r, t0);
  rm_tree(dir);
  return summarize(o, r);
}

int dist_test_ranks(int n, dist_test_rank_fn fn, void *arg, int timeout_s) {
  dist_test_opts o = {n, fn, arg, timeout_s, -1, 0};
  return dist_test_run(&o, NULL);
}

int dist_test_tcp_store(const dist_test_ctx *ctx, dist_store **out) {
  dist_store_tcp_opts so = {0};
  so.host = "127.0.0.1";
  so.world_size = ctx->world;
  so.timeout_ms = 30000;
  so.token = getenv("DIST_TOKEN");
  if (ctx->rank == 0) {
    so.is_server = true;
    int rc = dist_store_tcp_create(&so, out);
    if (rc != DIST_OK)
      return rc;
    uint16_t port = dist_store_tcp_port(*out);
    for (int i = 1; i < ctx->world; i++)
      if (write(ctx->port_pipe[1], &port, sizeof port) != sizeof port)
        return DIST_E_SYS;
    return DIST_OK;
  }
  uint16_t port;
  if (read(ctx->port_pipe[0], &port, sizeof port) != sizeof port)
    return DIST_E_SYS;
  so.port = port;
  return dist_store_tcp_create(&so, out);
}

int dist_test_file_store(const dist_test_ctx *ctx, dist_store **out) {
  char path[512];
  snprintf(path, sizeof path, "%s/filestore", ctx->tmpdir);
  return dist_store_file_create(path, ctx->world, out);
}

int dist_test_init_pg(const dist_test_ctx *ctx, const char *backend) {
  int rc = dist_test_tcp_store(ctx, &test_store);
  if (rc != DIST_OK)
    return rc;
  dist_init_opts o = dist_init_opts_default();
  o.backend = backend;
  o.store = test_store;
  o.rank = ctx->rank;
  o.world_size = ctx->world;
  const char *t = getenv("DIST_TEST_TIMEOUT_MS");
  o.timeout_ms = t ? atoll(t) : 20000;
  return dist_init_process_group(&o);
}

void dist_test_finish(void) {
  /* Rank 0 hosts the store: nobody leaves while others may still use it
   * (a broken group fails this at once, which is fine). */
  if (dist_is_initialized())
    dist_barrier(NULL, NULL);
  dist_destroy_process_group(NULL);
  dist_store_destroy(test_store);
  test_store = NULL;
}

uint64_t dist_test_seed(void) {
  static uint64_t seed;
  static bool printed;
  if (!seed) {
    const char *s = getenv("DIST_TEST_SEED");
    seed = s ? strtoull(s, NULL, 0) : (uint64_t)time(NULL);
    if (!seed)
      seed = 1;
  }
  if (!printed) {
    fprintf(stderr, "test seed: DIST_TEST_SEED=%llu\n", (unsigned long long)seed);
    printed = true;
  }
  return seed;
}

int dist_test_fail(const dist_test_ctx *ctx, const char *file, int line,
                   const char *fmt, ...) {
  char msg[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  fprintf(stderr, "[rank %d] %s:%d: %s\n", ctx ? ctx->rank : -1, file, line, msg);
  return 1;
}
