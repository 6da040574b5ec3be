/* distrun_limits.c - whether this node can hold the ranks -n asks for.
 *
 * `distrun -n 100000` used to fork until fork failed, then print thousands
 * of "Broken pipe" warnings. Before starting any rank distrun now compares
 * what the ranks will need with what the machine and its limits allow, and
 * refuses with one sentence naming the limit:
 *   processes    each rank is a process with a few threads (TASKS_PER_RANK
 *                tasks): against RLIMIT_NPROC (ulimit -u; the kernel does
 *                not hold root to it), the kernel's pid_max and threads-max
 *                less the tasks that exist, and a cgroup's pids.max;
 *   memory       each rank needs at least MIB_PER_RANK resident: against
 *                MemAvailable and a cgroup's memory.max;
 *   descriptors  distrun holds per rank two pipes, its log files and the
 *                rank's store connections (fds_per_rank): against
 *                RLIMIT_NOFILE (ulimit -n), whose soft limit distrun first
 *                raises to the hard one when that is what it takes.
 * The per-rank figures are lower bounds, so a job that fits is never
 * refused; one that passes may still hit a limit later, and then fails the
 * way any rank that cannot start does. */
#include <dirent.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "distrun.h"

#define TASKS_PER_RANK 4   /* main thread, store client, watchdog, tracer */
#define MIB_PER_RANK 4     /* libc, libdist, SQLite and stacks, resident */
#define FD_MARGIN 32       /* distrun's own: store server, signalfd, merge */

/* The first integer in a file, or -1 ("max" and unreadable files too). */
static int64_t file_int(const char *path) {
  FILE *f = fopen(path, "re");
  if (!f)
    return -1;
  long long v = -1;
  if (fscanf(f, "%lld", &v) != 1)
    v = -1;
  fclose(f);
  return v;
}

/* Tasks (threads) on the system now: /proc/loadavg's "running/total". */
static int64_t tasks_now(void) {
  FILE *f = fopen("/proc/loadavg", "re");
  if (!f)
    return -1;
  long long total = -1;
  if (fscanf(f, "%*s %*s %*s %*d/%lld", &total) != 1)
    total = -1;
  fclose(f);
  return total;
}

/* Tasks that belong to this user (what RLIMIT_NPROC counts). */
static int64_t user_tasks(void) {
  DIR *d = opendir("/proc");
  if (!d)
    return -1;
  int64_t n = 0;
  uid_t me = getuid();
  for (struct dirent *de; (de = readdir(d));) {
    if (de->d_name[0] < '0' || de->d_name[0] > '9')
      continue;
    char path[300], line[256];
    snprintf(path, sizeof path, "/proc/%s/status", de->d_name);
    FILE *f = fopen(path, "re");
    if (!f)
      continue;
    long uid = -1, threads = 0;
    while (fgets(line, sizeof line, f)) {
      if (!strncmp(line, "Uid:", 4))
        uid = strtol(line + 4, NULL, 10);
      else if (!strncmp(line, "Threads:", 8))
        threads = strtol(line + 8, NULL, 10);
    }
    fclose(f);
    if (uid == (long)me)
      n += threads;
  }
  closedir(d);
  return n;
}

static int64_t mem_available_mib(void) {
  FILE *f = fopen("/proc/meminfo", "re");
  if (!f)
    return -1;
  char line[256];
  long long kib = -1;
  while (fgets(line, sizeof line, f))
    if (sscanf(line, "MemAvailable: %lld kB", &kib) == 1)
      break;
  fclose(f);
  return kib < 0 ? -1 : kib / 1024;
}

static int open_fds(void) {
  DIR *d = opendir("/proc/self/fd");
  if (!d)
    return -1;
  int n = 0;
  for (struct dirent *de; (de = readdir(d));)
    n += de->d_name[0] != '.';
  closedir(d);
  return n - 1;
}

/* How many ranks fit under one limit; *room < want means refuse. */
typedef struct check {
  int64_t want;
  char *why;
  size_t len;
} check;

static bool too_many(check *k, int64_t per_rank, int64_t avail, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static bool too_many(check *k, int64_t per_rank, int64_t avail, const char *fmt, ...) {
  if (avail < 0 || k->want * per_rank <= avail)
    return false;
  char limit[300];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(limit, sizeof limit, fmt, ap);
  va_end(ap);
  snprintf(k->why, k->len, "this node has room for %" PRId64 " ranks, not %" PRId64 ": %s; "
           "ask for fewer with -n or raise the limit", avail / per_rank, k->want, limit);
  return true;
}

static bool processes(check *k) {
  struct rlimit rl;
  int64_t tasks = tasks_now();
  if (geteuid() != 0 && getrlimit(RLIMIT_NPROC, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) {
    int64_t mine = user_tasks();
    if (mine >= 0 && too_many(k, TASKS_PER_RANK, (int64_t)rl.rlim_cur - mine,
                              "processes: RLIMIT_NPROC (ulimit -u) is %" PRId64 " tasks for "
                              "this user, %" PRId64 " in use, and each rank needs %d",
                              (int64_t)rl.rlim_cur, mine, TASKS_PER_RANK))
      return true;
  }
  int64_t pid_max = file_int("/proc/sys/kernel/pid_max");
  if (tasks >= 0 && pid_max > 0 &&
      too_many(k, 1, pid_max - tasks, "processes: the kernel's pid_max is %" PRId64 " and "
               "%" PRId64 " tasks exist (/proc/sys/kernel/pid_max)", pid_max, tasks))
    return true;
  int64_t tmax = file_int("/proc/sys/kernel/threads-max");
  if (tasks >= 0 && tmax > 0 &&
      too_many(k, TASKS_PER_RANK, tmax - tasks, "processes: the kernel's threads-max is "
               "%" PRId64 " and %" PRId64 " tasks exist, each rank needs %d "
               "(/proc/sys/kernel/threads-max)", tmax, tasks, TASKS_PER_RANK))
    return true;
  int64_t pmax = file_int("/sys/fs/cgroup/pids.max"), pcur = file_int("/sys/fs/cgroup/pids.current");
  return pmax > 0 && pcur >= 0 &&
         too_many(k, TASKS_PER_RANK, pmax - pcur, "processes: the cgroup's pids.max is "
                  "%" PRId64 ", %" PRId64 " in use, each rank needs %d", pmax, pcur,
                  TASKS_PER_RANK);
}

static bool memory(check *k) {
  int64_t avail = mem_available_mib();
  if (avail >= 0 && too_many(k, MIB_PER_RANK, avail, "memory: %" PRId64 " MiB available "
                             "(MemAvailable) and each rank needs at least %d MiB", avail,
                             MIB_PER_RANK))
    return true;
  int64_t max = file_int("/sys/fs/cgroup/memory.max"), cur = file_int("/sys/fs/cgroup/memory.current");
  return max > 0 && cur >= 0 &&
         too_many(k, MIB_PER_RANK, (max - cur) >> 20, "memory: the cgroup's memory.max "
                  "leaves %" PRId64 " MiB and each rank needs at least %d MiB",
                  (max - cur) >> 20, MIB_PER_RANK);
}

static bool descriptors(check *k, const drun_cfg *c) {
  struct rlimit rl;
  int open_now = open_fds();
  if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || open_now < 0)
    return false;
  /* Two pipes per rank (stdout, stderr), its log files, and the store
   * connections of its client and its monitor on distrun's store. */
  int64_t per_rank = 2 + (c->log_dir ? 2 : 0) + 2;
  int64_t need = k->want * per_rank + open_now + FD_MARGIN;
  if (rl.rlim_cur != RLIM_INFINITY && (int64_t)rl.rlim_cur < need && rl.rlim_max > rl.rlim_cur) {
    struct rlimit up = rl;
    up.rlim_cur = rl.rlim_max == RLIM_INFINITY || (int64_t)rl.rlim_max > need ? (rlim_t)need
                                                                               : rl.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &up) == 0)
      rl = up;
  }
  if (rl.rlim_cur == RLIM_INFINITY)
    return false;
  return too_many(k, per_rank, (int64_t)rl.rlim_cur - open_now - FD_MARGIN,
                  "descriptors: RLIMIT_NOFILE (ulimit -n) is %" PRId64 " (hard %" PRId64 "), "
                  "distrun has %d open and holds %" PRId64 " per rank", (int64_t)rl.rlim_cur,
                  rl.rlim_max == RLIM_INFINITY ? (int64_t)-1 : (int64_t)rl.rlim_max, open_now,
                  per_rank);
}

int dist__run_check_capacity(const drun_cfg *c, char *why, size_t len) {
  check k = {c->nproc, why, len};
  if (processes(&k) || memory(&k) || descriptors(&k, c))
    return DRUN_EXIT_LAUNCH;
  return 0;
}
