/* ctest: labels=mpi timeout=600 */
/* The mpi backend under mpirun: the cpu backend's collective suite
 * (coll_suite.h: every op, dtype and reduce op, sync and async, a subgroup)
 * on 2 and 4 ranks, values checked bit for bit against the single-rank
 * references; and a rank that skips an all_reduce: asynchronous, the other
 * rank's work fails with DIST_E_TIMEOUT before the job ends; synchronous
 * (MPI's blocking call), the watchdog reports it and aborts the job. Ranks are mpi_rank processes; as
 * root mpirun needs OMPI_ALLOW_RUN_AS_ROOT(_CONFIRM), set here. The seed is
 * printed; DIST_TEST_SEED=<n> replays a run. */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "mp.h"

extern char **environ;

typedef struct run_out {
  int status;      /* waitpid status; -1 when killed at the deadline */
  char text[65536];
} run_out;

/* mpirun -np n mpi_rank mode, output (both streams) into out->text. */
static void mpirun(int n, const char *mode, int deadline_s, run_out *out) {
  char rank_bin[1024], np[16], path[] = "/tmp/dist-mpi-test-XXXXXX";
  const char *bin = getenv("DIST_TEST_BIN");
  cr_assert(bin, "DIST_TEST_BIN is unset (run through ctest)");
  snprintf(rank_bin, sizeof rank_bin, "%s/mpi_rank", bin);
  snprintf(np, sizeof np, "%d", n);
  int fd = mkstemp(path);
  cr_assert(fd >= 0);
  unlink(path);
  setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
  setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
  char *argv[] = {DIST_MPIEXEC, "--oversubscribe", "-np", np, rank_bin, (char *)mode, NULL};
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, fd, 1);
  posix_spawn_file_actions_adddup2(&fa, fd, 2);
  posix_spawnattr_t at;
  posix_spawnattr_init(&at);
  posix_spawnattr_setflags(&at, POSIX_SPAWN_SETPGROUP); /* killable as a group */
  pid_t pid;
  int e = posix_spawn(&pid, DIST_MPIEXEC, &fa, &at, argv, environ);
  cr_assert_eq(e, 0, "cannot start %s: %s", DIST_MPIEXEC, strerror(e));
  out->status = -1;
  for (int i = 0; i < deadline_s * 10; i++) {
    int st;
    if (waitpid(pid, &st, WNOHANG) == pid) {
      out->status = st;
      break;
    }
    struct timespec ts = {0, 100000000};
    nanosleep(&ts, NULL);
  }
  if (out->status == -1) {
    kill(-pid, SIGKILL);
    waitpid(pid, NULL, 0);
  }
  ssize_t len = pread(fd, out->text, sizeof out->text - 1, 0);
  out->text[len > 0 ? len : 0] = '\0';
  close(fd);
}

static void suite(int n) {
  char seed[32];
  snprintf(seed, sizeof seed, "%llu", (unsigned long long)dist_test_seed());
  setenv("DIST_TEST_SEED", seed, 1);
  static run_out out;
  mpirun(n, "suite", 500, &out);
  cr_assert(out.status != -1, "%d ranks (DIST_TEST_SEED=%s): still running at the deadline:\n%s",
            n, seed, out.text);
  cr_assert(WIFEXITED(out.status) && WEXITSTATUS(out.status) == 0,
            "%d ranks (DIST_TEST_SEED=%s): mpirun status %d:\n%s", n, seed, out.status, out.text);
  char want[64];
  snprintf(want, sizeof want, "mpi suite passed on %d ranks", n);
  cr_assert(strstr(out.text, want), "no '%s' in:\n%s", want, out.text);
}

Test(mpi, collective_suite_on_2_ranks, .timeout = 550) { suite(2); }
Test(mpi, collective_suite_on_4_ranks, .timeout = 550) { suite(4); }
/* Synchronous collectives through the non-blocking path as well (by
 * default they use MPI's blocking calls, see backend_mpi.c). */
Test(mpi, collective_suite_on_4_ranks_nonblocking, .timeout = 550) {
  setenv("DIST_MPI_SYNC", "nonblocking", 1);
  suite(4);
  unsetenv("DIST_MPI_SYNC");
}

Test(mpi, missing_rank_fails_async_work_with_a_timeout_before_the_job_ends, .timeout = 120) {
  static run_out out;
  mpirun(2, "timeout", 100, &out);
  cr_assert(out.status != -1, "still running at the deadline:\n%s", out.text);
  const char *saw = strstr(out.text, "rank 0 saw: ");
  cr_assert(saw, "rank 0 did not report the timeout:\n%s", out.text);
  cr_assert(strstr(saw, "ALL_REDUCE float32[4] op=SUM #1 on group 0 (rank 0 of 2) timed out "
                        "after 1500 ms"), "%s", out.text);
  /* The requests MPI still holds end the job through MPI_Abort, after the
   * report. */
  cr_assert(!(WIFEXITED(out.status) && WEXITSTATUS(out.status) == 0),
            "mpirun exited 0, expected the job to be aborted:\n%s", out.text);
  const char *abort_note = strstr(out.text, "ending the job with MPI_Abort");
  cr_assert(abort_note && abort_note > saw, "%s", out.text);
}

Test(mpi, missing_rank_in_a_blocking_call_is_reported_by_the_watchdog, .timeout = 120) {
  static run_out out;
  mpirun(2, "timeout_sync", 100, &out);
  cr_assert(out.status != -1, "still running at the deadline:\n%s", out.text);
  const char *rep = strstr(out.text, "libdist: ALL_REDUCE float32[4] op=SUM");
  cr_assert(rep, "no watchdog report:\n%s", out.text);
  cr_assert(strstr(rep, "on group 0 (rank 0 of 2) timed out after 1500 ms"), "%s", out.text);
  cr_assert(strstr(rep, "the job ends with MPI_Abort"), "%s", out.text);
  cr_assert(!strstr(out.text, "the watchdog did not end the job"), "%s", out.text);
  cr_assert(!(WIFEXITED(out.status) && WEXITSTATUS(out.status) == 0), "%s", out.text);
}

Test(mpi, abort_from_another_thread_fails_pending_work, .timeout = 120) {
  static run_out out;
  mpirun(2, "abort", 100, &out);
  cr_assert(out.status != -1, "still running at the deadline:\n%s", out.text);
  cr_assert(strstr(out.text, "rank 0 aborted: ") && strstr(out.text, "the test aborts it"), "%s",
            out.text);
  /* MPI still holds the aborted all_reduce: the job ends with MPI_Abort. */
  cr_assert(strstr(out.text, "ending the job with MPI_Abort"), "%s", out.text);
}

/* At DIST_DEBUG=DETAIL the checking layer wraps the mpi backend's groups as
 * the cpu backend's (its exchange rides a helper cpu group): a count that
 * differs fails every rank with the same report, and the suite raises no
 * false report. */
Test(mpi, desync_at_detail_is_reported_on_every_rank, .timeout = 120) {
  static run_out out;
  setenv("DIST_DEBUG", "DETAIL", 1);
  mpirun(2, "desync", 100, &out);
  unsetenv("DIST_DEBUG");
  cr_assert(out.status != -1 && WIFEXITED(out.status) && WEXITSTATUS(out.status) == 0,
            "mpirun status %d:\n%s", out.status, out.text);
  for (int r = 0; r < 2; r++) {
    /* rank r's report: its lines tagged "R<r>| " */
    char tag[16], rep[4096] = "";
    snprintf(tag, sizeof tag, "R%d| ", r);
    size_t off = 0;
    for (const char *l = strstr(out.text, tag); l; l = strstr(l + 1, tag)) {
      if (l != out.text && l[-1] != '\n')
        continue;
      const char *end = strchr(l, '\n');
      size_t n = end ? (size_t)(end - l) - strlen(tag) : strlen(l + strlen(tag));
      off += (size_t)snprintf(rep + off, sizeof rep - off, "%.*s\n", (int)n, l + strlen(tag));
    }
    const char *want =
        "desync in group 0 (default, 2 ranks) at ALL_REDUCE #1: ranks disagree on the count\n"
        "  rank 0: ALL_REDUCE float32[4] op=SUM (16 bytes)\n"
        "  rank 1: ALL_REDUCE float32[8] op=SUM (32 bytes)  <- count differs\n"
        "  called from mpi_rank.c:";
    cr_assert(!strncmp(rep, want, strlen(want)), "rank %d's report:\n%s\nin:\n%s", r, rep,
              out.text);
  }
}

Test(mpi, collective_suite_on_2_ranks_at_detail, .timeout = 550) {
  setenv("DIST_DEBUG", "DETAIL", 1);
  suite(2);
  unsetenv("DIST_DEBUG");
}
