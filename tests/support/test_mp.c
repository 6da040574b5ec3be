/* test_mp.c - the multi-process harness tells the truth about hangs: a
 * stuck rank is reported with the call it is in before the test's own
 * timeout, and ranks never outlive the harness. */
/* ctest: labels=multiproc timeout=120 */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "mp.h"
#include "proc.h"

void stuck_in_here(void);
__attribute__((noinline)) void stuck_in_here(void) {
  for (;;)
    pause();
}

/* Rank 0 hosts the store and parks in stuck_in_here; rank 1 waits in a
 * dist_recv that nothing matches (the group's timeout is far away). */
static int hang(const dist_test_ctx *ctx) {
  setenv("DIST_TEST_TIMEOUT_MS", "600000", 1);
  CHECK_OK(ctx, dist_test_init_pg(ctx, NULL));
  if (ctx->rank == 0)
    stuck_in_here();
  float buf[2];
  dist_tensor t = dist_tensor_1d(buf, DIST_FLOAT32, 2);
  CHECK_OK(ctx, dist_recv(&t, 0, NULL, 0, NULL));
  return 0;
}

/* The caller asks for 600 s; the test's 12 s timeout forces the harness to
 * give up first (at 7 s) and still name where each rank is. */
Test(support_mp, stuck_ranks_are_reported_with_their_stacks_before_the_test_timeout,
     .timeout = 12) {
  dist_test_opts o = {.n = 2, .fn = hang, .timeout_s = 600, .kill_rank = -1};
  dist_test_result r;
  cr_assert_eq(dist_test_run(&o, &r), 2, "%s", r.report);
  cr_assert(r.timed_out[0] && r.timed_out[1], "%s", r.report);
  cr_assert(strstr(r.where[0], "stuck_in_here"), "rank 0 at: %s", r.where[0]);
  cr_assert(strstr(r.where[1], "dist_recv"), "rank 1 at: %s", r.where[1]);
  cr_assert(strstr(r.report, "rank 1: still running at the deadline, killed") &&
                strstr(r.report, "dist_recv"), "%s", r.report);
}

static int park(const dist_test_ctx *ctx) {
  int fd = *(int *)ctx->arg;
  pid_t me = getpid();
  if (write(fd, &me, sizeof me) != sizeof me)
    return 1;
  for (;;)
    pause();
}

/* Waits up to 20 s for pid (an orphan reparented to us) to end. */
static int reap_within(pid_t pid, int *status) {
  for (int i = 0; i < 2000; i++) {
    pid_t p = waitpid(pid, status, WNOHANG);
    if (p == pid)
      return 0;
    usleep(10000);
  }
  return -1;
}

Test(support_mp, ranks_die_with_the_harness_and_share_a_process_group, .timeout = 60) {
  cr_assert_eq(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
  int pp[2];
  cr_assert_eq(pipe(pp), 0);
  pid_t harness = fork();
  if (harness == 0) {
    dist_test_opts o = {.n = 2, .fn = park, .arg = &pp[1], .timeout_s = 30, .kill_rank = -1};
    _exit(dist_test_run(&o, NULL));
  }
  pid_t ranks[2];
  for (int i = 0; i < 2; i++)
    cr_assert_eq(read(pp[0], &ranks[i], sizeof ranks[i]), (ssize_t)sizeof ranks[i]);
  pid_t g0 = getpgid(ranks[0]);
  cr_assert(g0 > 0 && g0 == getpgid(ranks[1]) && g0 != getpgid(0),
            "ranks in groups %d and %d, the test in %d", (int)g0,
            (int)getpgid(ranks[1]), (int)getpgid(0));
  kill(harness, SIGKILL);
  int st;
  cr_assert_eq(waitpid(harness, &st, 0), harness);
  for (int i = 0; i < 2; i++) {
    cr_assert_eq(reap_within(ranks[i], &st), 0, "rank %d outlived its harness", i);
    cr_assert(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
  }
}

/* A command that floods stderr past the capture's size (a sanitizer's
 * reports in a long run) still shows its first lines and its last, the
 * final report a test reads, with the cut marked between them, and it
 * runs to its end (a full buffer must not close the pipe on it). */
Test(support_proc, a_flood_of_output_keeps_its_first_and_last_lines, .timeout = 60) {
  static dist_proc p;
  int st = dist_proc_runl(&p, NULL, 30000, "/bin/sh", "-c",
                          "echo FIRST >&2; yes 'a warning line' | head -c 1000000 >&2; "
                          "echo LAST >&2",
                          NULL);
  cr_assert_eq(st, 0, "the command exited %d", st);
  const char *e = DIST_PROC_ERR(&p);
  cr_assert(strncmp(e, "FIRST\n", 6) == 0, "the first line is lost: %.40s", e);
  size_t n = strlen(e);
  cr_assert(n > 5 && strcmp(e + n - 5, "LAST\n") == 0, "the last line is lost: %s",
            e + (n > 40 ? n - 40 : 0));
  cr_assert(strstr(e, "[... the test harness dropped output here ...]"), "the cut is not marked");
}
