/* ctest: labels=multiproc timeout=300 */
/* The tutorial programs run under distrun as a user would run them, and
 * their output says what the tutorials say it should. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

typedef struct run {
  int status;        /* distrun's exit status */
  char out[65536];   /* stdout and stderr, rank-prefixed */
} run;

/* Runs "distrun -n N prog args" with a deadline; the output lands in r. */
static void run_example(int n, const char *prog, const char *args, run *r) {
  const char *bin = getenv("DIST_TEST_BIN");
  cr_assert(bin, "DIST_TEST_BIN is not set (run through ctest)");
  char cmd[1024];
  snprintf(cmd, sizeof cmd, "timeout 120 %s/distrun -n %d %s/%s %s 2>&1", bin, n, bin, prog,
           args ? args : "");
  FILE *p = popen(cmd, "r");
  cr_assert(p, "cannot run %s", cmd);
  size_t len = fread(r->out, 1, sizeof r->out - 1, p);
  r->out[len] = '\0';
  int st = pclose(p);
  r->status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  cr_log_info("%s\n%s", cmd, r->out);
}

static void expect_line(const run *r, const char *line) {
  cr_expect(strstr(r->out, line) != NULL, "missing line '%s' in:\n%s", line, r->out);
}

Test(examples, blocking_p2p_delivers_rank_0s_tensor_to_rank_1, .timeout = 150) {
  run r;
  run_example(2, "p2p_blocking", NULL, &r);
  cr_assert_eq(r.status, 0, "distrun exited %d:\n%s", r.status, r.out);
  expect_line(&r, "[0] Rank 0 has data 1.0");
  expect_line(&r, "[1] Rank 1 has data 1.0");
}

Test(examples, nonblocking_p2p_delivers_after_wait, .timeout = 150) {
  run r;
  run_example(2, "p2p_nonblocking", NULL, &r);
  cr_assert_eq(r.status, 0, "distrun exited %d:\n%s", r.status, r.out);
  expect_line(&r, "[0] Rank 0 started sending");
  expect_line(&r, "[1] Rank 1 started receiving");
  expect_line(&r, "[1] Rank 1 has data 1.0");
}

Test(examples, all_reduce_on_group_of_ranks_0_and_1_sums_only_them, .timeout = 150) {
  run r;
  run_example(4, "allreduce_group", NULL, &r);
  cr_assert_eq(r.status, 0, "distrun exited %d:\n%s", r.status, r.out);
  expect_line(&r, "[0] Rank 0 has data 2.0");
  expect_line(&r, "[1] Rank 1 has data 2.0");
  expect_line(&r, "[2] Rank 2 has data 1.0");
  expect_line(&r, "[3] Rank 3 has data 1.0");
}

Test(examples, ring_all_reduce_from_isend_recv_matches_all_reduce, .timeout = 150) {
  run r;
  run_example(3, "ring_allreduce", NULL, &r);
  cr_assert_eq(r.status, 0, "distrun exited %d:\n%s", r.status, r.out);
  for (int i = 0; i < 3; i++) {
    char line[96];
    snprintf(line, sizeof line, "[%d] Rank %d has data 6.0 (all_reduce says 6.0: same)", i, i);
    expect_line(&r, line);
  }
}

/* Every rank prints its loss per epoch; it must fall on every rank. */
Test(examples, sgd_loss_falls_on_every_rank, .timeout = 200) {
  run r;
  run_example(2, "sgd", "8", &r);
  cr_assert_eq(r.status, 0, "distrun exited %d:\n%s", r.status, r.out);
  for (int rank = 0; rank < 2; rank++) {
    double first = -1, last = -1;
    int epochs = 0;
    char pat[64];
    snprintf(pat, sizeof pat, "[%d] Rank %d, epoch ", rank, rank);
    for (const char *p = strstr(r.out, pat); p; p = strstr(p + 1, pat)) {
      int e;
      double loss;
      cr_assert_eq(sscanf(p + strlen(pat), "%d: loss %lf", &e, &loss), 2);
      if (epochs++ == 0)
        first = loss;
      last = loss;
    }
    cr_assert_eq(epochs, 8, "rank %d printed %d epochs", rank, epochs);
    cr_expect(last < first / 10, "rank %d: loss went from %g to %g", rank, first, last);
    char same[64];
    snprintf(same, sizeof same, "[%d] Rank %d: model matches rank 0's", rank, rank);
    expect_line(&r, same);
  }
}

/* The same body with the ranks forked by the program itself (dist_spawn),
 * no distrun: its output has no rank prefixes. */
Test(examples, all_reduce_on_group_launched_by_dist_spawn, .timeout = 150) {
  char cmd[1024];
  snprintf(cmd, sizeof cmd, "timeout 120 %s/allreduce_spawn 4 2>&1", getenv("DIST_TEST_BIN"));
  run r;
  FILE *p = popen(cmd, "r");
  cr_assert(p, "cannot run %s", cmd);
  size_t len = fread(r.out, 1, sizeof r.out - 1, p);
  r.out[len] = '\0';
  int st = pclose(p);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  cr_assert_eq(r.status, 0, "allreduce_spawn exited %d:\n%s", r.status, r.out);
  expect_line(&r, "Rank 0 has data 2.0\n");
  expect_line(&r, "Rank 1 has data 2.0\n");
  expect_line(&r, "Rank 2 has data 1.0\n");
  expect_line(&r, "Rank 3 has data 1.0\n");
}

Test(examples, every_example_answers_help, .timeout = 60) {
  const char *progs[] = {"p2p_blocking", "p2p_nonblocking", "allreduce_group", "allreduce_spawn",
                         "ring_allreduce", "sgd", "bench_collectives"};
  for (size_t i = 0; i < sizeof progs / sizeof progs[0]; i++) {
    char cmd[512];
    snprintf(cmd, sizeof cmd, "%s/%s --help", getenv("DIST_TEST_BIN"), progs[i]);
    FILE *p = popen(cmd, "r");
    char buf[4096];
    size_t n = fread(buf, 1, sizeof buf - 1, p);
    buf[n] = '\0';
    int st = pclose(p);
    cr_expect(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s exited %d", progs[i], st);
    cr_expect(strstr(buf, "usage") != NULL, "%s --help says: %s", progs[i], buf);
  }
}
