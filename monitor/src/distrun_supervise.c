/* distrun_supervise.c - what distrun adds to a rank's death as a
 * supervisor: the crashed rank's backtrace, and the bounded moment the
 * survivors get to report before they are ended.
 *
 * Crashes. A rank's monitor writes the backtrace of a fatal signal to
 * $TMPDIR/libdist-crash-<pid>.txt (mon_crash.c), symbolised. When a rank
 * dies of a signal distrun reads that file by the rank's pid, removes it,
 * posts it in the store (distrun/crash/<R>, so the survivors' diagnoses and
 * through them the trace carry it), shows it at once and again in the
 * summary at the end.
 *
 * Report window. On the first death the survivors have learnt of it within
 * milliseconds (their backends watch the peers, distrun posts the death),
 * and their monitors diagnose what they saw. distrun gives them
 * DRUN_REPORT_MS to do so and exit by themselves before it sends SIGTERM,
 * so their view is in the output and in the trace, not only distrun's
 * line. Ranks without the monitor (no record of it in the store) have
 * nothing to add and are ended at once. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "distrun.h"

#define CRASH_MAX 8192

static char *first_crash; /* the first crash's text, for the summary */
static int first_crash_rank = -1;

bool dist__run_is_crash(int wstatus) {
  if (!WIFSIGNALED(wstatus))
    return false;
  int s = WTERMSIG(wstatus);
  return s == SIGSEGV || s == SIGBUS || s == SIGFPE || s == SIGILL || s == SIGABRT;
}

static void crash_path(pid_t pid, char *path, size_t len) {
  const char *tmp = getenv("TMPDIR");
  snprintf(path, len, "%s/libdist-crash-%d.txt", tmp && *tmp ? tmp : "/tmp", (int)pid);
}

/* The crash file of pid, or NULL; removes it. */
static char *read_crash_file(pid_t pid) {
  char path[512];
  crash_path(pid, path, sizeof path);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return NULL;
  char *buf = dist__malloc(CRASH_MAX);
  ssize_t n = buf ? read(fd, buf, CRASH_MAX - 1) : -1;
  close(fd);
  unlink(path);
  if (n <= 0) {
    dist__free(buf);
    return NULL;
  }
  buf[n] = '\0';
  return buf;
}

void dist__run_crash_collect(drun_job *job, const drun_rank *r, int wstatus) {
  if (!dist__run_is_crash(wstatus)) {
    /* A rank killed while its handler was still writing (distrun's SIGKILL
     * after the grace period) leaves a partial file nobody will read. */
    char path[512];
    crash_path(r->pid, path, sizeof path);
    unlink(path);
    return;
  }
  char *text = read_crash_file(r->pid);
  if (!text)
    return;
  dist__run_say("rank %d (pid %d) crashed; its backtrace:\n%s", r->global, (int)r->pid, text);
  char key[64];
  snprintf(key, sizeof key, DIST_KEY_CRASH_FMT, r->global);
  if (job->store)
    dist_store_set(job->store, key, text, strlen(text));
  if (!first_crash) {
    first_crash = text;
    first_crash_rank = r->global;
  } else {
    dist__free(text);
  }
}

const char *dist__run_crash_first(int rank) {
  return first_crash && first_crash_rank == rank ? first_crash : NULL;
}

void dist__run_crash_free(void) {
  dist__free(first_crash);
  first_crash = NULL;
}

/* Whether the ranks run the monitor (it counts its inits in the store:
 * mon_observer.c), the part that reports what a survivor saw. */
static bool ranks_report(drun_job *job) {
  char key[160];
  snprintf(key, sizeof key, "dist/mon/%s/inits", job->job_id);
  const char *keys[] = {key};
  bool there = false;
  return job->store && dist_store_check(job->store, keys, 1, &there) == DIST_OK && there;
}

int64_t dist__run_report_deadline(drun_job *job, int running, int64_t now_ms) {
  if (running <= 0 || !ranks_report(job))
    return now_ms; /* nobody to wait for */
  dist__run_say("giving the %d other rank%s up to %.1f s to report what they saw", running,
                running == 1 ? "" : "s", (double)DRUN_REPORT_MS / 1000);
  return now_ms + DRUN_REPORT_MS;
}
