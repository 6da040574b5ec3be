/* proc.h - programs a test runs as a user would (distrun, distview, an
 * example, ranks started by hand): stdout and stderr captured through
 * pipes and read while they run, a deadline after which the process and
 * its process group are killed, and the exit status as a shell reports it.
 * One copy for every suite that runs a command, so a fix to how output is
 * drained or a straggler is reaped lands everywhere at once. */
#ifndef DIST_TEST_PROC_H
#define DIST_TEST_PROC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define DIST_PROC_CAP (1 << 17)

/* How many times a test reruns the same job to show that its verdict does
 * not hang on timing: n in a plain build, once under a sanitizer. The runs
 * differ in timing only, which the plain stage samples n times; under a
 * sanitizer each costs 3-10 times the plain run's time for a slim chance
 * of another interleaving (the sanitizer stages run every suite once). */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define DIST_TEST_REPEAT(n) 1
#else
#define DIST_TEST_REPEAT(n) (n)
#endif

typedef struct dist_proc {
  pid_t pid;
  int fd[2];                /* stdout, stderr; -1 at EOF */
  char buf[2][DIST_PROC_CAP]; /* full: output after the first quarter is dropped */
  size_t len[2];
  int status;               /* exit code, 128 + signal; -1 while running */
  bool killed;              /* still running at its deadline: killed */
  int64_t exited_ms;        /* when it was reaped (dist_test_now_ms) */
} dist_proc;

#define DIST_PROC_OUT(p) ((p)->buf[0])
#define DIST_PROC_ERR(p) ((p)->buf[1])

/* Starts argv[0] (a path) in its own process group; env: "NAME=value"
 * strings set in the child only (NULL-terminated, may be NULL). */
void dist_proc_start(dist_proc *p, const char *const *argv, const char *const *env);
/* Reads what any of the n processes wrote within timeout_ms. */
void dist_proc_pump(dist_proc *ps, int n, int timeout_ms);
/* True once p has exited (its status set). */
bool dist_proc_reap(dist_proc *p);
/* Waits until every process whose bit is not in linger has exited (or the
 * deadline), kills the rest (killed, status 128 + SIGKILL) and drains the
 * pipes. */
void dist_proc_finish_all(dist_proc *ps, int n, unsigned linger, int timeout_ms);
/* One process: its status, or -1 when it had to be killed at the deadline. */
int dist_proc_finish(dist_proc *p, int timeout_ms);
/* Start and finish. */
int dist_proc_run(dist_proc *p, const char *const *argv, const char *const *env,
                  int timeout_ms);
/* The same with argv given as a NULL-terminated list after a0 (15 at most). */
int dist_proc_runl(dist_proc *p, const char *const *env, int timeout_ms, const char *a0, ...);
/* Pumps until stream (0 stdout, 1 stderr) holds n copies of needle. */
bool dist_proc_wait_for(dist_proc *p, int stream, const char *needle, int n, int timeout_ms);

/* The line number of the first line of $DIST_TEST_SRC/path that holds
 * marker (a comment on a call, so a test names a program's line without a
 * number that moves); -1 when the file cannot be read or holds none. */
int dist_test_source_line(const char *path, const char *marker);
/* $DIST_TEST_BIN/name (build/bin without it); four results live at once. */
const char *dist_test_bin(const char *name);
/* Unsets what a launcher or an earlier test may have left in this
 * process's environment (rank variables, the job's store and token, debug
 * and monitor settings), so a command sees only what the test gives it. */
void dist_test_clean_launch_env(void);
/* Occurrences of needle in hay. */
int dist_test_count(const char *hay, const char *needle);
int64_t dist_test_now_ms(void);
/* Waits until every thread of pid is in the stopped state ('T' in
 * /proc/<pid>/task/<tid>/stat): kill(SIGSTOP) returns before the target
 * has stopped, so a test that relies on a frozen process waits for this.
 * False when pid is gone or not stopped within timeout_ms. */
bool dist_test_wait_stopped(pid_t pid, int timeout_ms);
/* Waits until pid (any process, not only a child) has exited, its exit
 * event read from a pidfd; false when it still runs after timeout_ms. */
bool dist_test_wait_gone(pid_t pid, int timeout_ms);
/* Reaps child pid, waiting for its exit event (a pidfd polled, no
 * polling loop) up to timeout_ms; *status gets waitpid's status. False
 * when it has not exited by then (it is left running). */
bool dist_test_wait_exit(pid_t pid, int *status, int timeout_ms);

#endif
