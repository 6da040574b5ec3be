/* spawn.c - torch.multiprocessing.spawn for libdist: fork N ranks of the
 * calling program, host their store as distrun does (a fresh token, a job
 * id, every rank a client: DIST_USE_AGENT_STORE=1), run a function in
 * each, and report the first rank that fails, naming it and how it ended
 * (exit code or signal), after ending the others.
 *
 * The ranks are forked before the store's server thread exists; each
 * waits on a pipe for the store's port, token and job id, so the parent
 * needs no port chosen in advance (no race for a free port). Waiting polls
 * waitpid every few milliseconds: a launcher's loop, not a rank's data
 * path. A rank dies with its parent (PR_SET_PDEATHSIG). */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "net/auth.h"
#include "base/dist_int.h"
#include "job/launch_env.h"
#include "job/rendezvous.h"
#include <dist/dist.h>

#define POLL_MS 5
#define GRACE_MS 3000 /* SIGTERM -> SIGKILL */

typedef struct launch_msg {
  uint16_t port;
  char token[DIST_TOKEN_MAX + 1];
  char job_id[DIST_JOB_ID_MAX + 1];
} launch_msg;

struct dist_spawn_ctx {
  int n;
  pid_t *pid;     /* 0 once reaped */
  int *wstatus;
  dist_store *store;
  bool failed;
  int failed_rank, exit_code, signal;
  char job_id[DIST_JOB_ID_MAX + 1];
};

static void set_env_int(const char *name, long v) {
  char b[24];
  snprintf(b, sizeof b, "%ld", v);
  setenv(name, b, 1);
}

static _Noreturn void run_rank(int rank, int n, int rfd, pid_t parent, dist_spawn_fn fn,
                               void *arg) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent)
    _exit(127);
  launch_msg m;
  ssize_t got;
  do
    got = read(rfd, &m, sizeof m);
  while (got < 0 && errno == EINTR);
  close(rfd);
  if (got != (ssize_t)sizeof m) /* the parent could not host the store */
    _exit(127);
  set_env_int(DIST_ENV_RANK, rank);
  set_env_int(DIST_ENV_WORLD_SIZE, n);
  set_env_int(DIST_ENV_LOCAL_RANK, rank);
  set_env_int(DIST_ENV_LOCAL_WORLD_SIZE, n);
  setenv(DIST_ENV_MASTER_ADDR, "127.0.0.1", 1);
  set_env_int(DIST_ENV_MASTER_PORT, m.port);
  setenv(DIST_ENV_USE_AGENT_STORE, "1", 1);
  setenv(DIST_ENV_JOB_ID, m.job_id, 1);
  setenv(DIST_ENV_TOKEN, m.token, 1);
  explicit_bzero(m.token, sizeof m.token);
  setenv(DIST_ENV_NODE_RANK, "0", 1);
  setenv(DIST_ENV_NNODES, "1", 1);
  setenv(DIST_ENV_LAUNCHER, "spawn", 1);
  set_env_int(DIST_ENV_LAUNCHER_PID, (long)parent);
  int rc = fn(rank, n, arg);
  fflush(NULL);
  _exit(rc == 0 ? 0 : rc > 0 && rc < 256 ? rc : 1); /* not exit(): no parent atexit */
}

/* Hosts the store and tells the ranks where it is. */
static int host(dist_spawn_ctx *c, int wfd) {
  launch_msg m;
  memset(&m, 0, sizeof m);
  int rc = dist__auth_make_token(m.token, sizeof m.token);
  if (rc == DIST_OK)
    rc = dist__rendezvous_make_job_id(m.job_id, sizeof m.job_id);
  dist_store_tcp_opts o = {0};
  o.is_server = true;
  o.host = "127.0.0.1";
  o.token = m.token;
  o.timeout_ms = dist__default_timeout_ms();
  if (rc == DIST_OK)
    rc = dist_store_tcp_create(&o, &c->store);
  if (rc != DIST_OK)
    return dist__set_last_error(rc, "spawn: cannot host the ranks' store: %s",
                                dist_last_errmsg());
  m.port = dist_store_tcp_port(c->store);
  snprintf(c->job_id, sizeof c->job_id, "%s", m.job_id);
  for (int i = 0; i < c->n; i++)
    if (write(wfd, &m, sizeof m) != (ssize_t)sizeof m) {
      rc = dist__set_last_error(DIST_E_SYS, "spawn: cannot reach the ranks: %s",
                                strerror(errno));
      break;
    }
  explicit_bzero(m.token, sizeof m.token);
  return rc;
}

/* Reaps what has ended; true when rank i ended badly (and records it). */
static bool reap(dist_spawn_ctx *c, int i) {
  if (!c->pid[i])
    return false;
  int st;
  pid_t r = waitpid(c->pid[i], &st, WNOHANG);
  if (r != c->pid[i])
    return false;
  c->pid[i] = 0;
  c->wstatus[i] = st;
  bool bad = !WIFEXITED(st) || WEXITSTATUS(st) != 0;
  if (bad && !c->failed) {
    c->failed = true;
    c->failed_rank = i;
    c->exit_code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    c->signal = WIFSIGNALED(st) ? WTERMSIG(st) : 0;
  }
  return bad;
}

static int running(const dist_spawn_ctx *c) {
  int k = 0;
  for (int i = 0; i < c->n; i++)
    k += c->pid[i] != 0;
  return k;
}

/* SIGTERM, then SIGKILL after the grace period; reaps every rank. */
static void end_all(dist_spawn_ctx *c) {
  for (int i = 0; i < c->n; i++)
    if (c->pid[i])
      kill(c->pid[i], SIGTERM);
  int64_t deadline = dist__now_ms() + GRACE_MS;
  while (running(c) && dist__now_ms() < deadline) {
    for (int i = 0; i < c->n; i++)
      reap(c, i);
    if (running(c))
      dist__sleep_ms(POLL_MS);
  }
  for (int i = 0; i < c->n; i++)
    if (c->pid[i]) {
      kill(c->pid[i], SIGKILL);
      waitpid(c->pid[i], &c->wstatus[i], 0);
      c->pid[i] = 0;
    }
}

static int failure(const dist_spawn_ctx *c) {
  char how[128];
  if (c->signal)
    snprintf(how, sizeof how, "was killed by signal %d (SIG%s)", c->signal,
             sigabbrev_np(c->signal) ? sigabbrev_np(c->signal) : "?");
  else if (c->exit_code == 127)
    snprintf(how, sizeof how, "exited with code 127 (it could not start, or its fn "
             "returned 127)");
  else
    snprintf(how, sizeof how, "exited with code %d", c->exit_code);
  return dist__set_last_error(DIST_E_PEER_LOST, "spawn: rank %d %s; the other ranks were "
                              "ended", c->failed_rank, how);
}

int dist_spawn_join(dist_spawn_ctx *c, int64_t timeout_ms) {
  if (!c)
    return dist__set_last_error(DIST_E_INVAL, "dist_spawn_join: NULL handle");
  int64_t deadline = timeout_ms < 0 ? INT64_MAX : dist__now_ms() + timeout_ms;
  for (;;) {
    bool bad = false;
    for (int i = 0; i < c->n; i++)
      bad |= reap(c, i);
    if (bad || (c->failed && running(c))) {
      end_all(c);
      return failure(c);
    }
    if (!running(c))
      return c->failed ? failure(c) : DIST_OK;
    if (dist__now_ms() >= deadline)
      return dist__set_last_error(DIST_E_TIMEOUT, "spawn: %d of %d ranks still running after "
                                  "%lld ms", running(c), c->n, (long long)timeout_ms);
    dist__sleep_ms(POLL_MS);
  }
}

void dist_spawn_free(dist_spawn_ctx *c) {
  if (!c)
    return;
  if (running(c))
    end_all(c);
  dist_store_destroy(c->store);
  free(c->pid);
  free(c->wstatus);
  free(c);
}

static dist_spawn_ctx *ctx_new(int n) {
  dist_spawn_ctx *c = calloc(1, sizeof *c);
  if (!c)
    return NULL;
  c->n = n;
  c->pid = calloc((size_t)n, sizeof *c->pid);
  c->wstatus = calloc((size_t)n, sizeof *c->wstatus);
  if (!c->pid || !c->wstatus) {
    dist_spawn_free(c);
    return NULL;
  }
  return c;
}

int dist_spawn(dist_spawn_fn fn, void *arg, int nprocs, bool join, dist_spawn_ctx **out) {
  if (out)
    *out = NULL;
  if (!fn || nprocs < 1 || nprocs > 4096 || (!join && !out))
    return dist__set_last_error(DIST_E_INVAL, "dist_spawn: needs fn, 1 <= nprocs <= 4096 "
                                              "(got %d) and, without join, a handle", nprocs);
  dist_spawn_ctx *c = ctx_new(nprocs);
  int p[2];
  if (!c || pipe2(p, O_CLOEXEC) != 0) {
    dist_spawn_free(c);
    return dist__set_last_error(c ? DIST_E_SYS : DIST_E_NOMEM, "dist_spawn: %s",
                                c ? strerror(errno) : "out of memory");
  }
  fflush(NULL); /* buffered output must not be written once per rank */
  pid_t parent = getpid();
  int rc = DIST_OK;
  for (int i = 0; i < nprocs && rc == DIST_OK; i++) {
    pid_t pid = fork();
    if (pid == 0) {
      close(p[1]);
      run_rank(i, nprocs, p[0], parent, fn, arg);
    }
    if (pid < 0)
      rc = dist__set_last_error(DIST_E_SYS, "dist_spawn: fork of rank %d: %s", i,
                                strerror(errno));
    else
      c->pid[i] = pid;
  }
  close(p[0]);
  if (rc == DIST_OK)
    rc = host(c, p[1]);
  close(p[1]); /* ranks still waiting read EOF and exit */
  if (rc != DIST_OK) {
    char msg[DIST_ERRMSG_LEN];
    snprintf(msg, sizeof msg, "%s", dist_last_errmsg());
    dist_spawn_free(c);
    return dist__set_last_error(rc, "%s", msg);
  }
  if (!join) {
    *out = c;
    return DIST_OK;
  }
  rc = dist_spawn_join(c, -1);
  if (out)
    *out = c; /* the caller reads the failure, then frees */
  else
    dist_spawn_free(c);
  return rc;
}

int dist_spawn_failure(const dist_spawn_ctx *c, int *rank, int *exit_code, int *signal) {
  if (!c)
    return dist__set_last_error(DIST_E_INVAL, "dist_spawn_failure: NULL handle");
  if (!c->failed)
    return dist__set_last_error(DIST_E_INVAL, "dist_spawn_failure: no rank has failed");
  if (rank)
    *rank = c->failed_rank;
  if (exit_code)
    *exit_code = c->exit_code;
  if (signal)
    *signal = c->signal;
  return DIST_OK;
}

int dist_spawn_pid(const dist_spawn_ctx *c, int rank) {
  return c && rank >= 0 && rank < c->n ? (int)c->pid[rank] : -1;
}

const char *dist_spawn_job_id(const dist_spawn_ctx *c) { return c ? c->job_id : NULL; }

const char *dist_launcher(void) {
  const char *l = dist__getenv(DIST_ENV_LAUNCHER);
  return l && (!strcmp(l, "distrun") || !strcmp(l, "spawn")) ? l : NULL;
}

bool dist_is_launched(void) { return dist_launcher() != NULL; }
