/* cpu_fit.c - whether each rank on this host has a CPU of its own, which
 * decides how the CPU engines wait for their peers.
 *
 * Spinning is the fastest wait when the peer runs on another core: it
 * posts within a microsecond, and a blocking wake-up costs ~30 us. When
 * the ranks outnumber the CPUs they may run on, the peer being waited for
 * is often descheduled behind the spinner, so every microsecond spun is
 * taken from the rank that would end the wait: there the engines yield
 * and then sleep at once. This is the usual state of a workstation
 * reproducing a 16-rank hang, of CI, and of a container with a CPU quota.
 *
 * The CPUs allowed are the fewest of: the affinity mask
 * (sched_getaffinity: taskset, numactl, a batch system's binding) and the
 * cgroup v2 quota (cpu.max of this cgroup and every ancestor, rounded up).
 * The ranks on the host are the job's LOCAL_WORLD_SIZE when set (every
 * rank competes, whatever group is waiting), else the group's size. The
 * choice is logged once per process at INFO; DIST_SHM_SPIN_US and
 * DIST_TCP_SPIN_US, when set, override it. */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backends/cpu/cpu.h"

/* The quota of one cgroup directory in CPUs (rounded up), or 0: none. */
static int quota_of(const char *dir) {
  char path[600], line[128];
  snprintf(path, sizeof path, "/sys/fs/cgroup%s/cpu.max", dir);
  FILE *f = fopen(path, "re");
  if (!f)
    return 0;
  long long quota = 0, period = 0;
  int n = fgets(line, sizeof line, f) ? sscanf(line, "%lld %lld", &quota, &period) : 0;
  fclose(f);
  if (n != 2 || quota <= 0 || period <= 0) /* "max 100000": no quota */
    return 0;
  return (int)((quota + period - 1) / period);
}

/* The tightest cgroup v2 quota on the path from this cgroup to the root,
 * or 0 when none (or cgroup v1, or no /sys/fs/cgroup). */
static int cgroup_cpus(void) {
  FILE *f = fopen("/proc/self/cgroup", "re");
  if (!f)
    return 0;
  char line[512], dir[512] = "";
  while (fgets(line, sizeof line, f))
    if (!strncmp(line, "0::", 3)) { /* the v2 hierarchy */
      snprintf(dir, sizeof dir, "%s", line + 3);
      dir[strcspn(dir, "\n")] = '\0';
    }
  fclose(f);
  int best = 0;
  for (;;) {
    int q = quota_of(strcmp(dir, "/") ? dir : "");
    if (q > 0 && (best == 0 || q < best))
      best = q;
    char *slash = strrchr(dir, '/');
    if (!slash || slash == dir)
      break;
    *slash = '\0';
  }
  return best;
}

int dist__cpu_allowed(void) {
  cpu_set_t set;
  int cpus = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 0;
  if (cpus <= 0) {
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    cpus = online > 0 ? (int)online : 1;
  }
  int quota = cgroup_cpus();
  return quota > 0 && quota < cpus ? quota : cpus;
}

bool dist__cpu_fits(int group_size) {
  int procs = group_size;
  int64_t local;
  if (dist__getenv("LOCAL_WORLD_SIZE") &&
      dist__env_int("LOCAL_WORLD_SIZE", 1, 1 << 24, group_size, &local) == DIST_OK &&
      local > procs)
    procs = (int)local;
  int cpus = dist__cpu_allowed();
  bool fits = procs <= cpus;
  static _Atomic bool said;
  if (!atomic_exchange(&said, true))
    DIST_LOG(INFO, SHM,
             "waiting: %d ranks on this host, %d CPU%s allowed (affinity, cgroup quota): %s "
             "(DIST_SHM_SPIN_US and DIST_TCP_SPIN_US override)",
             procs, cpus, cpus == 1 ? "" : "s",
             fits ? "spinning before sleeping" : "yielding and sleeping, no spinning");
  return fits;
}
