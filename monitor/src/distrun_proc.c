/* distrun_proc.c - starting ranks and talking to them with signals.
 *
 * Each rank is forked and exec'd with its environment built beforehand, so
 * the child runs only async-signal-safe calls (distrun has threads: the
 * store server's, the watcher's). The child leads its own process group, so
 * a forwarded signal reaches whatever the rank started, and a terminal's
 * Ctrl-C reaches distrun once instead of every process at the same time;
 * its stdin is /dev/null for the same reason (a background group must not
 * read the terminal). PR_SET_PDEATHSIG takes a rank down with distrun even
 * when distrun is SIGKILLed. An exec failure travels back through a
 * close-on-exec pipe: EOF means the program runs. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "distrun.h"

/* How long distrun waits to hear whether a rank's exec succeeded: the
 * child reports at once, unless the machine is thrashing. */
#define DRUN_EXEC_VERDICT_MS 30000

extern char **environ;

/* --- finding the program ------------------------------------------------- */

static int check_exec(const char *path) {
  struct stat st;
  if (stat(path, &st) != 0)
    return errno;
  if (S_ISDIR(st.st_mode))
    return EISDIR;
  return access(path, X_OK) == 0 ? 0 : errno;
}

int dist__run_resolve(const char *prog, char *path, size_t len) {
  if (!*prog)
    return ENOENT;
  if (strchr(prog, '/')) {
    if ((size_t)snprintf(path, len, "%s", prog) >= len)
      return ENAMETOOLONG;
    return check_exec(path);
  }
  const char *p = getenv("PATH");
  if (!p || !*p)
    p = "/usr/local/bin:/usr/bin:/bin";
  int first_err = ENOENT;
  while (*p) {
    const char *colon = strchr(p, ':');
    size_t dl = colon ? (size_t)(colon - p) : strlen(p);
    /* An empty PATH entry means the current directory. */
    int n = dl ? snprintf(path, len, "%.*s/%s", (int)dl, p, prog)
               : snprintf(path, len, "./%s", prog);
    if (n > 0 && (size_t)n < len) {
      int e = check_exec(path);
      if (e == 0)
        return 0;
      if (e != ENOENT && e != ENOTDIR)
        first_err = e; /* found, but not runnable: say so */
    }
    p += dl + (colon ? 1 : 0);
  }
  return first_err;
}

/* --- environment --------------------------------------------------------- */

/* Variables distrun sets; any inherited value is dropped. */
static const char *const owned_vars[] = {
    DIST_ENV_RANK,        DIST_ENV_WORLD_SIZE,       DIST_ENV_LOCAL_RANK,
    DIST_ENV_LOCAL_WORLD_SIZE, DIST_ENV_MASTER_ADDR, DIST_ENV_MASTER_PORT,
    DIST_ENV_USE_AGENT_STORE,  DIST_ENV_JOB_ID,      DIST_ENV_TOKEN,
    DIST_ENV_NODE_RANK,   DIST_ENV_NNODES,           DIST_ENV_LAUNCHER,
    DIST_ENV_LAUNCHER_PID,
    /* torchrun's names for the same things (README, "distrun and torchrun") */
    "GROUP_RANK", "ROLE_NAME", "ROLE_RANK", "ROLE_WORLD_SIZE", "TORCHELASTIC_RESTART_COUNT",
    "TORCHELASTIC_MAX_RESTARTS", "TORCHELASTIC_RUN_ID", "TORCHELASTIC_USE_AGENT_STORE",
    "DIST_RESTART_COUNT",
};
#define N_OWNED (sizeof owned_vars / sizeof owned_vars[0])

typedef struct env_buf {
  char **envp;
  char *own[N_OWNED];
  size_t n_own;
} env_buf;

static bool is_owned(const char *entry) {
  for (size_t i = 0; i < N_OWNED; i++) {
    size_t n = strlen(owned_vars[i]);
    if (strncmp(entry, owned_vars[i], n) == 0 && entry[n] == '=')
      return true;
  }
  return false;
}

static int add_var(env_buf *e, size_t *n, const char *name, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int add_var(env_buf *e, size_t *n, const char *name, const char *fmt, ...) {
  char val[DRUN_HOSTLEN + DIST_TOKEN_MAX];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(val, sizeof val, fmt, ap);
  va_end(ap);
  size_t len = strlen(name) + strlen(val) + 2;
  char *s = dist__malloc(len);
  if (!s)
    return -1;
  snprintf(s, len, "%s=%s", name, val);
  e->own[e->n_own++] = s;
  e->envp[(*n)++] = s;
  return 0;
}

static void free_env(env_buf *e) {
  for (size_t i = 0; i < e->n_own; i++) {
    if (strncmp(e->own[i], DIST_ENV_TOKEN "=", strlen(DIST_ENV_TOKEN) + 1) == 0)
      explicit_bzero(e->own[i], strlen(e->own[i]));
    dist__free(e->own[i]);
  }
  dist__free(e->envp);
}

static int build_env(const drun_cfg *c, const drun_job *job, const drun_rank *r,
                     env_buf *e) {
  size_t total = 0, n = 0;
  while (environ[total])
    total++;
  memset(e, 0, sizeof *e);
  e->envp = dist__calloc(total + N_OWNED + 1, sizeof *e->envp);
  if (!e->envp)
    return -1;
  for (size_t i = 0; i < total; i++)
    if (!is_owned(environ[i]))
      e->envp[n++] = environ[i];
  int world = c->nproc * c->nnodes, bad = 0;
  bad |= add_var(e, &n, DIST_ENV_RANK, "%d", r->global);
  bad |= add_var(e, &n, DIST_ENV_WORLD_SIZE, "%d", world);
  bad |= add_var(e, &n, DIST_ENV_LOCAL_RANK, "%d", r->local);
  bad |= add_var(e, &n, DIST_ENV_LOCAL_WORLD_SIZE, "%d", c->nproc);
  bad |= add_var(e, &n, DIST_ENV_MASTER_ADDR, "%s", job->store_addr);
  bad |= add_var(e, &n, DIST_ENV_MASTER_PORT, "%u", (unsigned)job->store_port);
  bad |= add_var(e, &n, DIST_ENV_USE_AGENT_STORE, "1");
  bad |= add_var(e, &n, DIST_ENV_JOB_ID, "%s", job->job_id);
  bad |= add_var(e, &n, DIST_ENV_NODE_RANK, "%d", c->node_rank);
  bad |= add_var(e, &n, DIST_ENV_NNODES, "%d", c->nnodes);
  bad |= add_var(e, &n, DIST_ENV_LAUNCHER, "distrun");
  bad |= add_var(e, &n, DIST_ENV_LAUNCHER_PID, "%d", (int)getpid());
  bad |= add_var(e, &n, "GROUP_RANK", "%d", c->node_rank);
  bad |= add_var(e, &n, "ROLE_NAME", "%s", c->role ? c->role : "default");
  bad |= add_var(e, &n, "ROLE_RANK", "%d", r->global); /* one role: the job's ranks */
  bad |= add_var(e, &n, "ROLE_WORLD_SIZE", "%d", world);
  bad |= add_var(e, &n, "DIST_RESTART_COUNT", "%d", job->attempt);
  bad |= add_var(e, &n, "TORCHELASTIC_RESTART_COUNT", "%d", job->attempt);
  bad |= add_var(e, &n, "TORCHELASTIC_MAX_RESTARTS", "%d", c->max_restarts);
  bad |= add_var(e, &n, "TORCHELASTIC_RUN_ID", "%s", job->run_id[0] ? job->run_id : job->job_id);
  bad |= add_var(e, &n, "TORCHELASTIC_USE_AGENT_STORE", "True");
  if (job->token[0])
    bad |= add_var(e, &n, DIST_ENV_TOKEN, "%s", job->token);
  e->envp[n] = NULL;
  if (bad) {
    free_env(e);
    return -1;
  }
  return 0;
}

/* --- fork and exec ------------------------------------------------------- */

typedef struct child_fds {
  int out_w, err_w, exec_w, devnull;
} child_fds;

/* Runs in the forked child: async-signal-safe calls only. */
static _Noreturn void run_child(const char *path, char *const *argv, char **envp,
                                const child_fds *f, pid_t parent) {
  setpgid(0, 0);
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) /* distrun died before the line above */
    _exit(127);
  /* Dispositions set to ignore and the blocked mask survive exec. */
  struct sigaction dfl;
  memset(&dfl, 0, sizeof dfl);
  dfl.sa_handler = SIG_DFL;
  const int sigs[] = {SIGPIPE, SIGINT, SIGTERM, SIGHUP, SIGCHLD, SIGQUIT, SIGUSR1};
  for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
    sigaction(sigs[i], &dfl, NULL);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, NULL);
  if (dup2(f->devnull, 0) < 0 || dup2(f->out_w, 1) < 0 || dup2(f->err_w, 2) < 0)
    goto fail;
  execve(path, argv, envp);
fail:;
  int e = errno;
  ssize_t w = write(f->exec_w, &e, sizeof e);
  (void)w;
  _exit(127);
}

/* Waits (bounded) for the exec verdict: 0, or the child's errno. */
static int exec_verdict(int fd) {
  struct pollfd p = {fd, POLLIN, 0};
  int64_t deadline = dist__now_ms() + DRUN_EXEC_VERDICT_MS;
  for (;;) {
    int left = (int)dist__remaining_ms(deadline);
    int n = poll(&p, 1, left);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return ETIMEDOUT;
    int e = 0;
    ssize_t r = read(fd, &e, sizeof e);
    if (r < 0 && errno == EINTR)
      continue;
    return r == (ssize_t)sizeof e ? e : 0;
  }
}

static int make_pipes(int outp[2], int errp[2], int execp[2]) {
  outp[0] = outp[1] = errp[0] = errp[1] = execp[0] = execp[1] = -1;
  if (pipe2(outp, O_CLOEXEC) || pipe2(errp, O_CLOEXEC) || pipe2(execp, O_CLOEXEC))
    return errno;
  return 0;
}

static void close_fds(int *fds, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (fds[i] >= 0)
      close(fds[i]);
}

/* The program's argv; with --local-rank-arg a copy with "--local-rank=N"
 * after the program's name (torch.distributed.launch's place for it), the
 * string in the same allocation. NULL when out of memory. */
static char **rank_argv(const drun_cfg *c, const drun_rank *r) {
  if (!c->local_rank_arg)
    return (char **)c->prog_argv;
  size_t n = 0;
  while (c->prog_argv[n])
    n++;
  char **v = malloc((n + 2) * sizeof *v + 32);
  if (!v)
    return NULL;
  char *arg = (char *)(v + n + 2);
  snprintf(arg, 32, "--local-rank=%d", r->local);
  v[0] = c->prog_argv[0];
  v[1] = arg;
  for (size_t i = 1; i <= n; i++) /* the rest and the NULL */
    v[i + 1] = c->prog_argv[i];
  return v;
}

int dist__run_spawn(const drun_cfg *c, const drun_job *job, const char *path,
                    drun_rank *r, char *why, size_t why_len) {
  int p[6];
  int e = make_pipes(p, p + 2, p + 4);
  int devnull = e ? -1 : open("/dev/null", O_RDONLY | O_CLOEXEC);
  env_buf env;
  if (e || devnull < 0 || build_env(c, job, r, &env) != 0) {
    snprintf(why, why_len, "could not prepare rank %d: %s", r->global,
             strerror(e ? e : errno ? errno : ENOMEM));
    close_fds(p, 6);
    if (devnull >= 0)
      close(devnull);
    return DRUN_EXIT_LAUNCH;
  }
  child_fds f = {p[1], p[3], p[5], devnull};
  char **argv = rank_argv(c, r); /* before fork: the child may not allocate */
  pid_t parent = getpid();
  pid_t pid = argv ? fork() : (errno = ENOMEM, -1);
  if (pid == 0)
    run_child(path, argv, env.envp, &f, parent);
  e = errno;
  if (argv != (char **)c->prog_argv)
    free(argv);
  free_env(&env);
  close(devnull);
  close_fds((int[]){p[1], p[3], p[5]}, 3);
  if (pid < 0) {
    snprintf(why, why_len, "could not fork rank %d: %s", r->global, strerror(e));
    close_fds((int[]){p[0], p[2], p[4]}, 3);
    return DRUN_EXIT_LAUNCH;
  }
  setpgid(pid, pid); /* both sides set it, so no signal can miss the group */
  r->pid = pid;
  r->running = true;
  r->out.fd = p[0];
  r->err.fd = p[2];
  fcntl(p[0], F_SETFL, O_NONBLOCK);
  fcntl(p[2], F_SETFL, O_NONBLOCK);
  e = exec_verdict(p[4]);
  close(p[4]);
  if (e) {
    r->failed_to_start = true; /* its exit 127 is not a death */
    snprintf(why, why_len, "could not start rank %d: %s: %s", r->global, path, strerror(e));
    return DRUN_EXIT_LAUNCH;
  }
  return 0;
}

/* --- signals ------------------------------------------------------------- */

void dist__run_signal(drun_rank *r, int sig) {
  if (!r->running)
    return;
  r->signalled_by_us = true;
  if (kill(-r->pid, sig) != 0)
    kill(r->pid, sig);
}

void dist__run_describe_status(int st, char *out, size_t len) {
  if (WIFEXITED(st)) {
    snprintf(out, len, "exited with code %d", WEXITSTATUS(st));
  } else if (WIFSIGNALED(st)) {
    int sig = WTERMSIG(st);
    const char *abbrev = sigabbrev_np(sig);
    snprintf(out, len, "killed by signal %d (SIG%s)%s", sig, abbrev ? abbrev : "?",
             WCOREDUMP(st) ? ", core dumped" : "");
  } else {
    snprintf(out, len, "ended with wait status 0x%x", (unsigned)st);
  }
}

static void loop_signals(sigset_t *set) {
  sigemptyset(set);
  sigaddset(set, SIGCHLD);
  sigaddset(set, SIGINT);
  sigaddset(set, SIGTERM);
  sigaddset(set, SIGHUP);
  sigaddset(set, SIGUSR1); /* the status table (distrun_status.c) */
}

int dist__run_signals_block(void) {
  sigset_t set;
  loop_signals(&set);
  /* Before any thread starts, so every thread inherits the mask and the
   * signals reach the signalfd only. */
  signal(SIGPIPE, SIG_IGN);
  return pthread_sigmask(SIG_BLOCK, &set, NULL);
}

int dist__run_signalfd(void) {
  sigset_t set;
  loop_signals(&set);
  return signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
}
