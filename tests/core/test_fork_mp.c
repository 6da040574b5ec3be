/* ctest: labels=multiproc timeout=120 */
/* Fork after init (DESIGN.md, Processes): while three threads log without
 * pause, the main thread of an initialised rank forks children that log a
 * line and exit. No child may hang on the log sink's lock (held by a thread
 * the child does not have), each child's line lands in its own
 * DIST_LOG_FILE (%p) and not in its parent's, and the parent's group works
 * afterwards. */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "mp.h"

#define FORKS 40
#define LOGGERS 3

static _Atomic bool stop;

static void *logger(void *arg) {
  (void)arg;
  while (!stop)
    dist_log(DIST_LOG_WARNING, DIST_SUBSYS_CORE, "parent thread busy logging");
  return NULL;
}

/* Whether file holds needle. */
static bool file_has(const char *path, const char *needle) {
  FILE *f = fopen(path, "r");
  if (!f)
    return false;
  char line[1024];
  bool found = false;
  while (!found && fgets(line, sizeof line, f))
    found = strstr(line, needle) != NULL;
  fclose(f);
  return found;
}

/* Waits up to 10 s for a child; kills it when it hangs. */
static int wait_child(pid_t pid) {
  for (int i = 0; i < 1000; i++) {
    int st;
    if (waitpid(pid, &st, WNOHANG) == pid)
      return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    usleep(10000);
  }
  kill(pid, SIGKILL);
  waitpid(pid, NULL, 0);
  return -1;
}

static int fork_rank(const dist_test_ctx *ctx) {
  char pattern[600];
  snprintf(pattern, sizeof pattern, "%s/log.%%p", ctx->tmpdir);
  setenv("DIST_LOG_FILE", pattern, 1);
  CHECK_OK(ctx, dist_set_debug_level_from_env());
  CHECK_OK(ctx, dist_test_init_pg(ctx, NULL));
  pthread_t th[LOGGERS];
  for (int i = 0; i < LOGGERS; i++)
    CHECK(ctx, pthread_create(&th[i], NULL, logger, NULL) == 0, "pthread_create");
  char parent_log[700];
  snprintf(parent_log, sizeof parent_log, "%s/log.%d", ctx->tmpdir, (int)getpid());
  int hung = 0, misplaced = 0;
  for (int i = 0; i < FORKS; i++) {
    pid_t p = fork();
    if (p == 0) {
      dist_log(DIST_LOG_WARNING, DIST_SUBSYS_CORE, "child %d of rank %d", i, ctx->rank);
      _exit(0);
    }
    CHECK(ctx, p > 0, "fork failed");
    int rc = wait_child(p);
    if (rc != 0) {
      hung++;
      continue;
    }
    char child_log[700], needle[64];
    snprintf(child_log, sizeof child_log, "%s/log.%d", ctx->tmpdir, (int)p);
    snprintf(needle, sizeof needle, "child %d of rank %d", i, ctx->rank);
    if (!file_has(child_log, needle))
      misplaced++;
  }
  stop = true;
  for (int i = 0; i < LOGGERS; i++)
    pthread_join(th[i], NULL);
  CHECK(ctx, hung == 0, "%d of %d children hung or failed", hung, FORKS);
  CHECK(ctx, misplaced == 0, "%d of %d children did not log to their own file", misplaced,
        FORKS);
  CHECK(ctx, file_has(parent_log, "parent thread busy logging"), "no parent log in %s",
        parent_log);
  CHECK(ctx, !file_has(parent_log, "child "), "a child's line is in the parent's log");
  int32_t v = 1;
  dist_tensor t = dist_tensor_1d(&v, DIST_INT32, 1);
  CHECK_OK(ctx, dist_all_reduce(&t, DIST_SUM, NULL, NULL));
  CHECK(ctx, v == ctx->world, "sum %d", v);
  dist_test_finish();
  return 0;
}

Test(core_fork, children_forked_under_logging_load_log_to_their_own_file_and_exit,
     .timeout = 90) {
  cr_assert_eq(dist_test_ranks(2, fork_rank, NULL, 70), 0, "%s", dist_test_report());
}
