/* ctest: labels=multiproc timeout=300 */
/* Members that never reach a collective are named, with host, pid and
 * their last operation on the group, and nobody waits past the group's
 * timeout: a rank that stops calling, a sub-group barrier one member never
 * enters, a rank that skips a call (caught at the next call that differs),
 * a rank that exits. The group timeout is 4 s here. */
#include <criterion/criterion.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include "wpg_test.h"

#define ME "test_absent_mp.c"

static int init_short(const dist_test_ctx *ctx) {
  setenv("DIST_TEST_TIMEOUT_MS", "4000", 1);
  return wpg_test_init(ctx);
}

static int pid_of(const dist_test_ctx *ctx, int rank) {
  char k[32];
  snprintf(k, sizeof k, "test/pid/%d", rank);
  if (ctx->rank == rank) {
    char v[16];
    snprintf(v, sizeof v, "%d", (int)getpid());
    dist_store_set(dist_get_default_store(), k, v, strlen(v));
    return getpid();
  }
  void *v = NULL;
  size_t n;
  if (dist_store_get(dist_get_default_store(), k, &v, &n) != DIST_OK)
    return -1;
  int pid = atoi(v);
  dist_free(v);
  return pid;
}

/* --- a rank that stops calling ------------------------------------------- */

static int stop_rank(const dist_test_ctx *ctx) {
  CHECK_OK(ctx, init_short(ctx));
  int pid2 = pid_of(ctx, 2);
  float v[4] = {0};
  dist_tensor t = dist_tensor_1d(v, DIST_FLOAT32, 4);
  int line = __LINE__ + 1;
  CHECK_OK(ctx, dist_all_reduce(&t, DIST_SUM, NULL, NULL));
  if (ctx->rank == 2) /* absent: alive, not calling */
    return wpg_test_leave(ctx);
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  int rc = dist_all_reduce(&t, DIST_SUM, NULL, NULL);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  long took = (t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000;
  /* The check ends within the group's timeout (4 s); generous margin. */
  CHECK(ctx, took < 4000 + 5000, "the check took %ld ms", took);
  const char *msg = dist_pg_errmsg(NULL);
  char host[64], want[512];
  gethostname(host, sizeof host);
  snprintf(want, sizeof want, "timeout in group 0 (default, 3 ranks) at ALL_REDUCE #2: rank 2 "
           "did not arrive within 4 s\n  rank 2 (host %s, pid %d): its last operation was "
           "ALL_REDUCE #1, called from " ME ":%d in stop_rank()", host, pid2, line);
  CHECK(ctx, rc == DIST_E_TIMEOUT, "rc %s: %s", dist_status_name(rc), msg);
  CHECK(ctx, !strcmp(msg, want), "report:\n%s\nwant:\n%s", msg, want);
  return wpg_test_leave(ctx);
}

Test(wrapper_pg_absent, a_rank_that_stops_calling_is_named, .timeout = 60) {
  cr_assert_eq(dist_test_ranks(3, stop_rank, NULL, 50), 0, "%s", dist_test_report());
}

/* --- a sub-group barrier one member never enters ------------------------- */

static int barrier_rank(const dist_test_ctx *ctx) {
  CHECK_OK(ctx, init_short(ctx));
  int members[3] = {1, 2, 3};
  dist_pg *g;
  CHECK_OK(ctx, dist_new_group(members, 3, NULL, &g));
  if (ctx->rank == 0 || ctx->rank == 3) /* not a member; absent */
    return wpg_test_leave(ctx);
  int rc = dist_barrier(g, NULL);
  const char *msg = dist_pg_errmsg(g);
  CHECK(ctx, rc == DIST_E_TIMEOUT, "rc %s: %s", dist_status_name(rc), msg);
  CHECK(ctx, !strncmp(msg, "timeout in group 1 (g1, 3 ranks) at BARRIER #1: rank 3 did not "
                          "arrive within 4 s\n  rank 3 (group rank 2, host ", 92) &&
                 strstr(msg, "): it has run no collective on this group"),
        "report:\n%s", msg);
  return wpg_test_leave(ctx);
}

Test(wrapper_pg_absent, a_subgroup_barrier_one_member_never_enters, .timeout = 60) {
  cr_assert_eq(dist_test_ranks(4, barrier_rank, NULL, 50), 0, "%s", dist_test_report());
}

/* --- a skipped call ------------------------------------------------------ */

/* Rank 1 skips the second all_reduce: its next call (a broadcast) meets
 * the others' all_reduce #2. */
static int skip_rank(const dist_test_ctx *ctx) {
  CHECK_OK(ctx, init_short(ctx));
  float v[4] = {0};
  dist_tensor t = dist_tensor_1d(v, DIST_FLOAT32, 4);
  CHECK_OK(ctx, dist_all_reduce(&t, DIST_SUM, NULL, NULL));
  int rc = ctx->rank == 1 ? dist_broadcast(&t, 0, NULL, NULL)
                          : dist_all_reduce(&t, DIST_SUM, NULL, NULL);
  const char *msg = dist_pg_errmsg(NULL);
  char buf[512];
  CHECK(ctx, rc == DIST_E_DESYNC, "rc %s: %s", dist_status_name(rc), msg);
  CHECK(ctx, strstr(msg, "at ALL_REDUCE #2:") && wpg_line(msg, "  rank 1: ", buf, sizeof buf) &&
                 strstr(buf, "BROADCAST") && strstr(buf, "<- operation differs"),
        "report:\n%s", msg);
  dist_test_finish();
  return 0;
}

Test(wrapper_pg_absent, a_skipped_call_is_caught_at_the_next_call, .timeout = 60) {
  cr_assert_eq(dist_test_ranks(3, skip_rank, NULL, 50), 0, "%s", dist_test_report());
}

/* Rank 1 skips the last of three alike calls and destroys the group: the
 * counts part, and the others (at the group's timeout: a destroyed group
 * sends nothing) name it as a desync with its count and last call, from
 * the record it left in the store. */
static int skip_last_rank(const dist_test_ctx *ctx) {
  CHECK_OK(ctx, init_short(ctx));
  float v[4] = {0};
  dist_tensor t = dist_tensor_1d(v, DIST_FLOAT32, 4);
  dist_pg *g;
  CHECK_OK(ctx, dist_new_group(NULL, 0, NULL, &g));
  for (int i = 0; i < (ctx->rank == 1 ? 2 : 3); i++) {
    int rc = dist_all_reduce(&t, DIST_SUM, g, NULL);
    if (i < 2)
      CHECK_OK(ctx, rc);
    else
      CHECK(ctx, rc == DIST_E_DESYNC &&
                     strstr(dist_pg_errmsg(g), "desync in group 1 (g1, 3 ranks) at ALL_REDUCE "
                                               "#3: rank 1 left the group") &&
                     strstr(dist_pg_errmsg(g), "\n  rank 1 (host ") &&
                     strstr(dist_pg_errmsg(g), "left after 2 collectives; its last operation "
                                               "was ALL_REDUCE #2, called from " ME ":") &&
                     strstr(dist_pg_errmsg(g), "(collective 3 of the group)"),
            "rc %s: %s", dist_status_name(rc), dist_pg_errmsg(g));
  }
  if (ctx->rank == 1)
    CHECK_OK(ctx, dist_destroy_process_group(g));
  return wpg_test_leave(ctx);
}

Test(wrapper_pg_absent, a_rank_that_runs_out_of_calls_is_named, .timeout = 60) {
  cr_assert_eq(dist_test_ranks(3, skip_last_rank, NULL, 50), 0, "%s", dist_test_report());
}

/* --- a rank that exits ---------------------------------------------------- */

static int exit_rank(const dist_test_ctx *ctx) {
  CHECK_OK(ctx, init_short(ctx));
  float v[4] = {0};
  dist_tensor t = dist_tensor_1d(v, DIST_FLOAT32, 4);
  CHECK_OK(ctx, dist_all_reduce(&t, DIST_SUM, NULL, NULL));
  if (ctx->rank == 2)
    raise(SIGKILL);
  int rc = dist_all_reduce(&t, DIST_SUM, NULL, NULL);
  const char *msg = dist_pg_errmsg(NULL);
  CHECK(ctx, (rc == DIST_E_PEER_LOST || rc == DIST_E_TIMEOUT) &&
                 strstr(msg, " in group 0 (default, 3 ranks) at ALL_REDUCE #2: rank 2 ") &&
                 strstr(msg, "\n  rank 2 (host ") &&
                 strstr(msg, "its last operation was ALL_REDUCE #1"),
        "rc %s: %s", dist_status_name(rc), msg);
  /* The job is broken: rank 0 (the store's host) leaves after rank 1. */
  dist_store *st = dist_get_default_store();
  const char *keys[1] = {"test/rank1"};
  if (ctx->rank == 1)
    CHECK_OK(ctx, dist_store_set(st, keys[0], "1", 1));
  else
    CHECK_OK(ctx, dist_store_wait(st, keys, 1, 30000));
  return 0;
}

Test(wrapper_pg_absent, a_rank_that_dies_is_named, .timeout = 60) {
  dist_test_result res;
  dist_test_opts o = {3, exit_rank, NULL, 50, -1, 0};
  dist_test_run(&o, &res);
  cr_assert_eq(res.signal[2], SIGKILL, "%s", res.report);
  cr_assert(res.exit_code[0] == 0 && res.exit_code[1] == 0, "%s", res.report);
}

/* --- absent here because waiting elsewhere ------------------------------- */

/* Rank 3 skips the barrier of group {1,2,3} and goes on to an all_reduce
 * of the default group with rank 0: ranks 1 and 2 are absent from that
 * all_reduce, and rank 0's report says where they are waiting. */
static int elsewhere_rank(const dist_test_ctx *ctx) {
  CHECK_OK(ctx, init_short(ctx));
  float v[4] = {0};
  dist_tensor t = dist_tensor_1d(v, DIST_FLOAT32, 4);
  CHECK_OK(ctx, dist_all_reduce(&t, DIST_SUM, NULL, NULL));
  int members[3] = {1, 2, 3};
  dist_pg *g;
  CHECK_OK(ctx, dist_new_group(members, 3, NULL, &g));
  int rc = ctx->rank == 1 || ctx->rank == 2 ? dist_barrier(g, NULL)
                                            : dist_all_reduce(&t, DIST_SUM, NULL, NULL);
  CHECK(ctx, rc == DIST_E_TIMEOUT, "rc %s: %s", dist_status_name(rc), dist_pg_errmsg(g));
  if (ctx->rank == 0) {
    const char *msg = dist_pg_errmsg(NULL);
    char buf[512];
    CHECK(ctx, strstr(msg, "at ALL_REDUCE #2: ranks 1,2 did not arrive within 4 s\n") &&
                   wpg_line(msg, "  rank 1 (host ", buf, sizeof buf) &&
                   strstr(buf, "): waiting in BARRIER #1 of group 1 (g1, 3 ranks); its last "
                               "operation was ALL_REDUCE #1, called from " ME ":"),
          "report:\n%s", msg);
  }
  return wpg_test_leave(ctx);
}

Test(wrapper_pg_absent, ranks_waiting_in_another_group_are_shown_there, .timeout = 60) {
  cr_assert_eq(dist_test_ranks(4, elsewhere_rank, NULL, 50), 0, "%s", dist_test_report());
}
