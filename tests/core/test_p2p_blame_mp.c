/* ctest: labels=multiproc timeout=120 */
/* A send and its receive whose sizes differ: the report marks the side
 * that changed since the pair's steady run of matches, or since its only
 * match (a loop whose second step has the bug), so the job's verdict
 * names the rank with the bug, not the one that noticed; and both sides
 * when neither is known (their first exchange, or a stream whose sizes
 * alternate). Both ranks' reports say the same. Each case runs on its own
 * group of ranks 0 and 1: three exchanges of 8 floats match (one in
 * C_SECOND), then the next differs. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mp.h"

enum { C_SENDER, C_RECEIVER, C_FIRST, C_ALTERNATE, C_SECOND, N_CASES };
static const char *const case_name[N_CASES] = {"sender", "receiver", "first", "alternate",
                                               "second"};

/* The lines each case's report must hold, and must not. */
static const char *const want[N_CASES][2] = {
    {"\n  rank 0: SEND #4 float32[4] to rank 1 (16 bytes)  <- size differs\n",
     "\n  rank 1: RECV #4 float32[8] from rank 0 (32 bytes)"},
    {"\n  rank 0: SEND #4 float32[8] to rank 1 (32 bytes)",
     "\n  rank 1: RECV #4 float32[4] from rank 0 (16 bytes)  <- size differs"},
    {"\n  rank 0: SEND #1 float32[4] to rank 1 (16 bytes)  <- size differs\n",
     "\n  rank 1: RECV #1 float32[8] from rank 0 (32 bytes)  <- size differs"},
    {"\n  rank 0: SEND #4 float32[4] to rank 1 (16 bytes)  <- size differs\n",
     "\n  rank 1: RECV #4 float32[8] from rank 0 (32 bytes)  <- size differs"},
    {"\n  rank 0: SEND #2 float32[4] to rank 1 (16 bytes)  <- size differs\n",
     "\n  rank 1: RECV #2 float32[8] from rank 0 (32 bytes)"},
};
/* The line of the one-sided cases that must stay unmarked. */
static const char *const unmarked[N_CASES] = {
    "\n  rank 1: RECV #4 float32[8] from rank 0 (32 bytes)",
    "\n  rank 0: SEND #4 float32[8] to rank 1 (32 bytes)", NULL, NULL,
    "\n  rank 1: RECV #2 float32[8] from rank 0 (32 bytes)"};

/* Whether msg holds line as a whole line (nothing after it but its end). */
static bool has_line(const char *msg, const char *line) {
  const char *p = strstr(msg, line);
  return p && (p[strlen(line)] == '\n' || p[strlen(line)] == '\0');
}

/* Case k on g: matched exchanges first (none in C_FIRST, one in C_SECOND;
 * 8, 4 and 8 floats in C_ALTERNATE, a stream that tells nothing), then
 * the odd one. */
static int run_case(int k, int rank, dist_pg *g) {
  float f[8] = {0};
  dist_tensor t8 = dist_tensor_1d(f, DIST_FLOAT32, 8), t4 = dist_tensor_1d(f, DIST_FLOAT32, 4);
  for (int i = 0; k != C_FIRST && i < (k == C_SECOND ? 1 : 3); i++) {
    dist_tensor *t = k == C_ALTERNATE && i == 1 ? &t4 : &t8;
    int rc = rank == 0 ? dist_send(t, 1, g, 0) : dist_recv(t, 0, g, 0, NULL);
    if (rc != DIST_OK)
      return rc;
  }
  bool small = (k == C_RECEIVER) == (rank == 1); /* C_SECOND: the sender, as C_SENDER */
  dist_tensor *t = small ? &t4 : &t8;
  return rank == 0 ? dist_send(t, 1, g, 0) : dist_recv(t, 0, g, 0, NULL);
}

static int blame_rank(const dist_test_ctx *ctx) {
  setenv("DIST_TRANSPORT", ctx->arg, 1);
  setenv("DIST_TEST_TIMEOUT_MS", "20000", 1);
  CHECK_OK(ctx, dist_test_init_pg(ctx, NULL));
  int members[2] = {0, 1};
  for (int k = 0; k < N_CASES; k++) {
    dist_group_opts o = {.desc = case_name[k]};
    dist_pg *g;
    CHECK_OK(ctx, dist_new_group(members, 2, &o, &g));
    int rc = run_case(k, ctx->rank, g);
    const char *msg = dist_errmsg(rc, g);
    CHECK(ctx, rc == DIST_E_DESYNC, "%s: %s: %s", case_name[k], dist_status_name(rc), msg);
    for (int i = 0; i < 2; i++)
      CHECK(ctx, strstr(msg, want[k][i]), "%s, rank %d: no '%s' in:\n%s", case_name[k],
            ctx->rank, want[k][i], msg);
    CHECK(ctx, !unmarked[k] || has_line(msg, unmarked[k]), "%s, rank %d: '%s' is marked:\n%s",
          case_name[k], ctx->rank, unmarked[k], msg);
    dist_destroy_process_group(g);
  }
  dist_test_finish();
  return 0;
}

Test(core_p2p_blame, the_side_that_changed_is_marked_over_tcp, .timeout = 100) {
  cr_assert_eq(dist_test_ranks(2, blame_rank, (void *)"tcp", 60), 0, "%s", dist_test_report());
}

Test(core_p2p_blame, the_side_that_changed_is_marked_over_shm, .timeout = 100) {
  cr_assert_eq(dist_test_ranks(2, blame_rank, (void *)"shm", 60), 0, "%s", dist_test_report());
}
