/* proc.c - see proc.h. No Criterion call runs in a child (with
 * --full-stats the runner would count a stranger's asserts). */
#include "proc.h"

#include <criterion/criterion.h>

#include <dirent.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

int64_t dist_test_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The state letter of /proc/<pid>/task/<tid>/stat ('?' when unreadable):
 * the field after the command, which is in parentheses and may hold any
 * byte, so it is found from the last ')'. */
static char task_state(pid_t pid, const char *tid) {
  char path[320], buf[512];
  snprintf(path, sizeof path, "/proc/%d/task/%s/stat", (int)pid, tid);
  FILE *f = fopen(path, "r");
  if (!f)
    return '?';
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = '\0';
  char *rp = strrchr(buf, ')');
  return rp && rp[1] == ' ' && rp[2] ? rp[2] : '?';
}

static bool all_tasks_stopped(pid_t pid) {
  char dir[64];
  snprintf(dir, sizeof dir, "/proc/%d/task", (int)pid);
  DIR *d = opendir(dir);
  if (!d)
    return false;
  bool stopped = true;
  int tasks = 0;
  struct dirent *e;
  while (stopped && (e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.')
      continue;
    tasks++;
    char st = task_state(pid, e->d_name);
    stopped = st == 'T' || st == 't';
  }
  closedir(d);
  return stopped && tasks > 0;
}

bool dist_test_wait_stopped(pid_t pid, int timeout_ms) {
  int64_t deadline = dist_test_now_ms() + timeout_ms;
  while (!all_tasks_stopped(pid)) {
    if (dist_test_now_ms() >= deadline || kill(pid, 0) != 0)
      return false;
    poll(NULL, 0, 1); /* the interval of a poll of the kernel's state, not a guess */
  }
  return true;
}

int dist_test_source_line(const char *path, const char *marker) {
  char full[1024], line[512];
  snprintf(full, sizeof full, "%s/%s", getenv("DIST_TEST_SRC") ? getenv("DIST_TEST_SRC") : ".",
           path);
  FILE *f = fopen(full, "r");
  if (!f)
    return -1;
  int n = 0, found = 0;
  while (!found && fgets(line, sizeof line, f)) {
    n++;
    found = strstr(line, marker) != NULL;
  }
  fclose(f);
  return found ? n : -1;
}

const char *dist_test_bin(const char *name) {
  static char paths[4][1024];
  static int next;
  const char *dir = getenv("DIST_TEST_BIN");
  char *p = paths[next++ % 4];
  snprintf(p, sizeof paths[0], "%s/%s", dir ? dir : "build/bin", name);
  return p;
}

void dist_test_clean_launch_env(void) {
  static const char *const vars[] = {
      "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "MASTER_ADDR",
      "MASTER_PORT", "DIST_TOKEN", "DIST_JOB_ID", "DIST_USE_AGENT_STORE",
      "DIST_ALLOW_NO_TOKEN", "DIST_LAUNCHER", "DIST_DEBUG", "TORCH_DISTRIBUTED_DEBUG",
      "DIST_TRANSPORT", "DIST_STALL_S", "DIST_SHOW_STACKTRACES", "DIST_STATS_EVERY",
      "DIST_TIMEOUT", "DIST_MONITOR", "SLURM_JOB_ID", "SLURM_NNODES", "SLURM_NODEID",
      "SLURM_NTASKS_PER_NODE", "SLURM_JOB_NODELIST", "SLURM_STEP_NODELIST",
      "SLURM_NODELIST", "SLURM_NTASKS", "SLURM_STEP_ID", "SLURM_JOB_NUM_NODES",
      "SLURM_LAUNCH_NODE_IPADDR"};
  for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
    unsetenv(vars[i]);
}

int dist_test_count(const char *hay, const char *needle) {
  int n = 0;
  size_t step = strlen(needle) ? strlen(needle) : 1;
  for (const char *s = strstr(hay, needle); s; s = strstr(s + step, needle))
    n++;
  return n;
}

void dist_proc_start(dist_proc *p, const char *const *argv, const char *const *env) {
  int o[2], e[2];
  cr_assert(pipe(o) == 0 && pipe(e) == 0, "pipe");
  memset(p->len, 0, sizeof p->len);
  p->buf[0][0] = p->buf[1][0] = '\0';
  p->status = -1;
  p->killed = false;
  p->exited_ms = -1;
  fflush(NULL);
  p->pid = fork();
  if (p->pid == 0) {
    setpgid(0, 0); /* the deadline kills what it started too */
    dup2(o[1], 1);
    dup2(e[1], 2);
    close(o[0]);
    close(e[0]);
    for (size_t i = 0; env && env[i]; i++)
      putenv((char *)env[i]);
    execv(argv[0], (char *const *)argv);
    _exit(127);
  }
  cr_assert(p->pid > 0, "fork");
  setpgid(p->pid, p->pid); /* no race with a kill of the group */
  close(o[1]);
  close(e[1]);
  p->fd[0] = o[0];
  p->fd[1] = e[0];
}

/* A full buffer keeps its head and drops the oldest quarter after it, so
 * a flood of warnings (a sanitizer's reports) in the middle of a run
 * leaves the first lines and the final report both readable. */
static void make_room(dist_proc *p, int j) {
  static const char cut[] = "\n[... the test harness dropped output here ...]\n";
  size_t head = DIST_PROC_CAP / 4, drop = DIST_PROC_CAP / 4;
  char *b = p->buf[j];
  memcpy(b + head - (sizeof cut - 1), cut, sizeof cut - 1);
  memmove(b + head, b + head + drop, p->len[j] - head - drop);
  p->len[j] -= drop;
}

/* Reads one ready stream of p, closing it at EOF. */
static void read_stream(dist_proc *p, int j) {
  if (p->len[j] == DIST_PROC_CAP - 1)
    make_room(p, j);
  ssize_t r = read(p->fd[j], p->buf[j] + p->len[j], DIST_PROC_CAP - 1 - p->len[j]);
  if (r <= 0) {
    close(p->fd[j]);
    p->fd[j] = -1;
  } else {
    p->len[j] += (size_t)r;
  }
  p->buf[j][p->len[j]] = '\0';
}

void dist_proc_pump(dist_proc *ps, int n, int timeout_ms) {
  enum { MAXN = 16 };
  struct pollfd pf[2 * MAXN];
  n = n < MAXN ? n : MAXN;
  for (int i = 0; i < n; i++)
    for (int j = 0; j < 2; j++)
      pf[2 * i + j] = (struct pollfd){ps[i].fd[j], POLLIN, 0};
  if (poll(pf, (nfds_t)(2 * n), timeout_ms) <= 0)
    return;
  for (int k = 0; k < 2 * n; k++)
    if (pf[k].revents && ps[k / 2].fd[k % 2] >= 0)
      read_stream(&ps[k / 2], k % 2);
}

bool dist_proc_reap(dist_proc *p) {
  int st;
  if (p->status >= 0)
    return true;
  if (waitpid(p->pid, &st, WNOHANG) != p->pid)
    return false;
  p->status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  p->exited_ms = dist_test_now_ms();
  return true;
}

static bool any_open(const dist_proc *ps, int n) {
  for (int i = 0; i < n; i++)
    if (ps[i].fd[0] >= 0 || ps[i].fd[1] >= 0)
      return true;
  return false;
}

void dist_proc_finish_all(dist_proc *ps, int n, unsigned linger, int timeout_ms) {
  int64_t deadline = dist_test_now_ms() + timeout_ms;
  for (;;) {
    dist_proc_pump(ps, n, 20);
    bool all = true;
    for (int i = 0; i < n; i++)
      all &= dist_proc_reap(&ps[i]) || ((linger >> i) & 1);
    if (all || dist_test_now_ms() >= deadline)
      break;
  }
  for (int i = 0; i < n; i++)
    if (!dist_proc_reap(&ps[i])) {
      kill(-ps[i].pid, SIGKILL);
      kill(ps[i].pid, SIGKILL);
      kill(ps[i].pid, SIGCONT); /* a stopped one dies only once continued */
      int st;
      waitpid(ps[i].pid, &st, 0);
      ps[i].status = 128 + SIGKILL;
      ps[i].killed = true;
    }
  /* Pipes close when the last holder (a rank the process started) exits. */
  for (int64_t drain = dist_test_now_ms() + 5000;
       any_open(ps, n) && dist_test_now_ms() < drain;)
    dist_proc_pump(ps, n, 50);
}

int dist_proc_finish(dist_proc *p, int timeout_ms) {
  dist_proc_finish_all(p, 1, 0, timeout_ms);
  if (p->killed)
    cr_log_error("%s did not exit in %d ms; stdout:\n%s\nstderr:\n%s", "the command",
                 timeout_ms, p->buf[0], p->buf[1]);
  return p->killed ? -1 : p->status;
}

int dist_proc_run(dist_proc *p, const char *const *argv, const char *const *env,
                  int timeout_ms) {
  dist_proc_start(p, argv, env);
  return dist_proc_finish(p, timeout_ms);
}

int dist_proc_runl(dist_proc *p, const char *const *env, int timeout_ms, const char *a0, ...) {
  const char *argv[16];
  int n = 0;
  va_list ap;
  va_start(ap, a0);
  for (const char *a = a0; a && n < 15; a = va_arg(ap, const char *))
    argv[n++] = a;
  va_end(ap);
  argv[n] = NULL;
  return dist_proc_run(p, argv, env, timeout_ms);
}

bool dist_proc_wait_for(dist_proc *p, int stream, const char *needle, int n,
                        int timeout_ms) {
  int64_t deadline = dist_test_now_ms() + timeout_ms;
  while (dist_test_count(p->buf[stream], needle) < n) {
    if (dist_test_now_ms() >= deadline || !any_open(p, 1))
      return dist_test_count(p->buf[stream], needle) >= n;
    dist_proc_pump(p, 1, 50);
  }
  return true;
}

bool dist_test_wait_gone(pid_t pid, int timeout_ms) {
  int fd = (int)syscall(SYS_pidfd_open, pid, 0);
  if (fd < 0) /* no such process: already gone */
    return errno == ESRCH;
  struct pollfd pf = {.fd = fd, .events = POLLIN}; /* readable once it has exited */
  int64_t deadline = dist_test_now_ms() + timeout_ms;
  int r;
  do
    r = poll(&pf, 1, (int)(deadline > dist_test_now_ms() ? deadline - dist_test_now_ms() : 0));
  while (r < 0 && errno == EINTR);
  close(fd);
  return r > 0;
}

bool dist_test_wait_exit(pid_t pid, int *status, int timeout_ms) {
  if (!dist_test_wait_gone(pid, timeout_ms))
    return false;
  return waitpid(pid, status, 0) == pid;
}
