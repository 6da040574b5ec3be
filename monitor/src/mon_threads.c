/* mon_threads.c - does this process have a thread computing outside the
 * library?
 *
 * The deadlock proof (mon_watchdog.c) takes a rank whose thread is blocked
 * in a synchronous call as unable to call anything else. That holds for a
 * program with one thread. A program whose threads each drive their own
 * group (a communication thread beside the training loop) may have one
 * thread blocked in group A while another computes and will call what
 * the peers wait for in group B: a wait-for cycle the records show, that
 * breaks. The record writer (mon_progress.c) therefore publishes no
 * synchronous call while such a thread runs, and the rank is never part
 * of a proof; its waiters get the timeout. So it is while a thread that
 * called the library before (the one that initialised it, or one that
 * issued a group's operations) sleeps (nanosleep, clock_nanosleep:
 * usleep, a data loader's back-off): it wakes by itself and may call what
 * the peers wait for. Other sleepers (a sanitizer's or a runtime's
 * background thread, waking now and then for itself) are not counted. A
 * thread blocked otherwise (a logger on a condition variable, a read) is
 * not seen: its state is S, as the library's idle threads' are, and it
 * may never wake. The library's threads are told by name: core's, the
 * tracer's, the monitor's and the checking layer's are "dist-...". */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "mon_threads.h"

/* The start of /proc/self/task/<tid>/<what> into buf (NUL-terminated);
 * false when it cannot be read. */
static bool read_task(int tid, const char *what, char *buf, size_t len) {
  char path[64];
  snprintf(path, sizeof path, "/proc/self/task/%d/%s", tid, what);
  FILE *f = fopen(path, "r");
  if (!f)
    return false;
  size_t n = fread(buf, 1, len - 1, f);
  fclose(f);
  buf[n] = '\0';
  return n > 0;
}

/* Whether thread tid is in a sleep it wakes from by itself (its
 * syscall file: the number first, "running" when it is in none). */
static bool sleeping(int tid) {
  char sc[128];
  if (!read_task(tid, "syscall", sc, sizeof sc))
    return false;
  long nr = strtol(sc, NULL, 10);
#ifdef SYS_nanosleep
  if (nr == SYS_nanosleep)
    return true;
#endif
  return nr == SYS_clock_nanosleep;
}

/* Thread tid is a program's thread in state R, or asleep (sleeping) when
 * it is a user of the library (user). */
static bool program_thread_running(int tid, bool user) {
  char comm[32], stat[512];
  if (!read_task(tid, "comm", comm, sizeof comm) || !strncmp(comm, "dist-", 5))
    return false;
  if (!read_task(tid, "stat", stat, sizeof stat))
    return false;
  const char *p = strrchr(stat, ')'); /* the name may hold spaces */
  if (!p || p[1] != ' ')
    return false;
  return p[2] == 'R' || (user && p[2] == 'S' && sleeping(tid));
}

static bool skipped(int tid, const int *skip, int n) {
  for (int i = 0; i < n; i++)
    if (skip[i] == tid)
      return true;
  return false;
}

bool dist__mon_other_thread_running(const int *skip, int n, const int *users, int nu) {
  DIR *d = opendir("/proc/self/task");
  if (!d)
    return false;
  int self = (int)syscall(SYS_gettid);
  bool running = false;
  for (struct dirent *e; !running && (e = readdir(d));) {
    int tid = atoi(e->d_name);
    if (tid > 0 && tid != self && !skipped(tid, skip, n))
      running = program_thread_running(tid, skipped(tid, users, nu));
  }
  closedir(d);
  return running;
}
