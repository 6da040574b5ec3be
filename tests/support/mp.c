/* mp.c - fork N ranks, wait against a deadline, report every exit.
 *
 * The ranks share one process group and die with the harness
 * (PR_SET_PDEATHSIG), so a test killed from outside never leaves ranks
 * behind holding CTest's pipe. The harness's deadline is kept shorter than
 * the Criterion test's own timeout, so a hang is reported by the harness:
 * before ending the ranks still running it prints where each one is
 * (eu-stack from elfutils) and puts the main thread's frames in the report. */
#include "mp.h"
#include "tmpdir.h"

#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <sys/prctl.h>
#include <sys/socket.h>
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

static void child(const dist_test_opts *o, dist_test_ctx *ctx, pid_t harness,
                  pid_t pgid) {
  /* Die with the harness so a crashed or killed test never leaves ranks
   * behind; the check after prctl closes the race with a harness that died
   * before it. The harness's stack dumper (a sibling) may trace us. */
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != harness)
    _exit(125);
  setpgid(0, pgid ? pgid : getpid());
  prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY);
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

/* The enclosing Criterion test's timeout in seconds (0: none known). */
static double outer_timeout_s(void) {
#ifdef CRITLITE_CRITERION_H
  return critlite_current_timeout;
#else
  /* Criterion lays its extra data out packed in a section: read the field
   * by copying, not through a misaligned member access. */
  const struct criterion_test *t = criterion_current_test;
  double timeout = 0;
  if (t && t->data)
    memcpy(&timeout, (const char *)t->data + offsetof(struct criterion_test_extra_data, timeout),
           sizeof timeout);
  return timeout;
#endif
}

/* The harness's deadline: the caller's, but always short enough that the
 * harness (not Criterion's or CTest's kill) reports a hang, with time left
 * to take the stacks of every rank. */
static int64_t deadline_ms(int timeout_s) {
  int64_t ms = (int64_t)timeout_s * 1000;
  double outer = outer_timeout_s();
  if (outer > 0) {
    double margin = outer / 5 > 5 ? outer / 5 : 5;
    int64_t cap = (int64_t)((outer - margin) * 1000);
    if (cap < 1000)
      cap = (int64_t)(outer * 500);
    if (ms > cap)
      ms = cap;
  }
  return ms;
}

/* Appends the function names of frames "#N  0xADDR name ..." in line to
 * where, as "a <- b <- c". */
static void add_frame(const char *line, char *where, size_t cap) {
  char fn[160];
  if (sscanf(line, " #%*d %*s %159s", fn) != 1)
    return;
  size_t len = strlen(where);
  snprintf(where + len, cap - len, "%s%s", len ? " <- " : "", fn);
}

/* Prints the stacks of every thread of a stuck rank to stderr and keeps
 * its main thread's frames in where. eu-stack runs under timeout(1) so a
 * wedged tracer cannot eat the margin left before the test's own timeout
 * (at least 5 s; reap() dumps at most DUMP_MAX ranks). */
#define DUMP_MAX 8
static void dump_stack(int rank, pid_t pid, char *where, size_t cap) {
  char cmd[96];
  snprintf(cmd, sizeof cmd, "timeout 3 eu-stack -p %d 2>&1", (int)pid);
  where[0] = '\0';
  fflush(stderr);
  FILE *f = popen(cmd, "r");
  if (!f) {
    snprintf(where, cap, "(eu-stack: %s)", strerror(errno));
    return;
  }
  fprintf(stderr, "mp: rank %d (pid %d) still running at the deadline; its stacks:\n",
          rank, (int)pid);
  char line[512], main_tid[32];
  snprintf(main_tid, sizeof main_tid, "TID %d:", (int)pid);
  bool in_main = false;
  while (fgets(line, sizeof line, f)) {
    fputs(line, stderr);
    if (!strncmp(line, "TID ", 4))
      in_main = !strncmp(line, main_tid, strlen(main_tid));
    else if (in_main && line[0] == '#')
      add_frame(line, where, cap);
  }
  int st = pclose(f);
  if (!where[0])
    snprintf(where, cap, "(no stack: eu-stack exit %d; is elfutils installed?)",
             WIFEXITED(st) ? WEXITSTATUS(st) : -1);
}

/* Reaps children until all are done or the deadline passes. */
static int reap(pid_t *pids, pid_t pgid, int n, const dist_test_opts *o,
                dist_test_result *r, int64_t t0) {
  int left = n;
  bool killed = false;
  int64_t deadline = t0 + deadline_ms(o->timeout_s);
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
  int dumped = 0;
  for (int i = 0; i < n; i++)
    if (pids[i] > 0) {
      r->timed_out[i] = true;
      if (dumped++ < DUMP_MAX)
        dump_stack(i, pids[i], r->where[i], sizeof r->where[i]);
      else
        snprintf(r->where[i], sizeof r->where[i], "(not taken: %d ranks at most)", DUMP_MAX);
    }
  if (left > 0 && pgid > 0)
    killpg(pgid, SIGKILL); // the ranks and anything they started
  for (int i = 0; i < n; i++)
    if (pids[i] > 0) {
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
                     "rank %d: %s (exit %d, signal %d) after %lld ms%s%s\n", i,
                     r->timed_out[i] ? "still running at the deadline, killed" : "failed",
                     r->exit_code[i], r->signal[i], (long long)r->elapsed_ms[i],
                     r->timed_out[i] ? "; stack: " : "", r->timed_out[i] ? r->where[i] : "");
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
  char *dir = dist_test_mkdtemp(tmpl);
  if (!dir)
    return -1;
  int pp[2];
  if (pipe(pp) != 0)
    return -1;
  fflush(stdout);
  fflush(stderr);
  pid_t pids[DIST_TEST_MAX_RANKS] = {0};
  pid_t harness = getpid(), pgid = 0;
  int64_t t0 = now_ms();
  for (int i = 0; i < o->n; i++) {
    pid_t p = fork();
    if (p == 0) {
      dist_test_ctx ctx = {i, o->n, dir, {pp[0], pp[1]}, o->arg};
      child(o, &ctx, harness, pgid);
    }
    if (p < 0) {
      perror("fork");
      break;
    }
    /* Both sides set the group, so it holds whichever runs first. */
    setpgid(p, pgid ? pgid : p);
    if (!pgid)
      pgid = p;
    pids[i] = p;
  }
  close(pp[0]);
  close(pp[1]);
  reap(pids, pgid, o->n, o, r, t0);
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

uint16_t dist_test_refusing_port(int *held) {
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t al = sizeof a;
  *held = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  cr_assert_geq(*held, 0, "socket: %s", strerror(errno));
  cr_assert_eq(bind(*held, (struct sockaddr *)&a, sizeof a), 0, "bind: %s", strerror(errno));
  cr_assert_eq(getsockname(*held, (struct sockaddr *)&a, &al), 0);
  return ntohs(a.sin_port);
}
