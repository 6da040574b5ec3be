/* ctest: labels=multiproc timeout=120 */
/* Groups created in a different order, or with different members or
 * timeouts, on different ranks are caught at the creation (before the
 * members connect), naming the ranks and both groups, instead of timing
 * out. */
#include <criterion/criterion.h>

#include "wpg_test.h"

/* Rank 0 hosts the store: everyone says it is done, rank 0 leaves last. */
static int done(const dist_test_ctx *ctx) {
  dist_store *st = dist_get_default_store();
  char k[32];
  snprintf(k, sizeof k, "test/done/%d", ctx->rank);
  CHECK_OK(ctx, dist_store_set(st, k, "1", 1));
  for (int r = 0; ctx->rank == 0 && r < ctx->world; r++) {
    snprintf(k, sizeof k, "test/done/%d", r);
    const char *keys[1] = {k};
    CHECK_OK(ctx, dist_store_wait(st, keys, 1, 30000));
  }
  return 0;
}

/* Rank 0 creates "a" then "b", rank 1 "b" then "a" (same members). */
static int crossed_rank(const dist_test_ctx *ctx) {
  CHECK_OK(ctx, wpg_test_init(ctx));
  const char *first = ctx->rank == 0 ? "a" : "b";
  dist_group_opts o = {.desc = first};
  dist_pg *g = NULL;
  int rc = dist_new_group(NULL, 0, &o, &g);
  const char *msg = dist_last_errmsg();
  CHECK(ctx, rc == DIST_E_DESYNC, "new_group: %s: %s", dist_status_name(rc), msg);
  char head[128], buf[256];
  snprintf(head, sizeof head, "desync in group 1 (%s, 2 ranks) at creation: ranks disagree on "
           "the description", first);
  CHECK(ctx, !strncmp(msg, head, strlen(head)), "header: want '%s' in\n%s", head, msg);
  CHECK(ctx, wpg_line(msg, "  rank 0: group 1 \"a\" of ranks 0,1", buf, sizeof buf) &&
                 !strstr(buf, "<-"), "rank 0's view:\n%s", msg);
  CHECK(ctx, wpg_line(msg, "  rank 1: group 1 \"b\" of ranks 0,1  <- description differs", buf,
                      sizeof buf), "rank 1's view:\n%s", msg);
  return done(ctx);
}

Test(wrapper_pg_order, groups_created_in_a_different_order_fail_at_creation, .timeout = 60) {
  cr_assert_eq(dist_test_ranks(2, crossed_rank, NULL, 50), 0, "%s", dist_test_report());
}

/* Rank `arg` gives the group a 2 s timeout, its partner none (the job's
 * default): caught at the creation, the rank that set another timeout
 * than the default marked, rank 0 as well as 1. */
static int timeout_rank(const dist_test_ctx *ctx) {
  CHECK_OK(ctx, wpg_test_init(ctx));
  int odd = *(const int *)ctx->arg;
  dist_group_opts o = {.desc = "pair", .timeout_ms = ctx->rank == odd ? 2000 : 0};
  dist_pg *g = NULL;
  int rc = dist_new_group(NULL, 0, &o, &g);
  const char *msg = dist_last_errmsg();
  CHECK(ctx, rc == DIST_E_DESYNC, "new_group: %s: %s", dist_status_name(rc), msg);
  CHECK(ctx, strstr(msg, "desync in group 1 (pair, 2 ranks) at creation: ranks disagree on the "
                         "timeout (each member must pass the same timeout, or none"),
        "header:\n%s", msg);
  char want[128], buf[256];
  snprintf(want, sizeof want, "  rank %d: group 1 \"pair\" of ranks 0,1, timeout 2000 ms  <- "
           "timeout differs", odd);
  CHECK(ctx, wpg_line(msg, want, buf, sizeof buf), "want '%s' in\n%s", want, msg);
  snprintf(want, sizeof want, "  rank %d: group 1 \"pair\" of ranks 0,1, timeout ", 1 - odd);
  CHECK(ctx, wpg_line(msg, want, buf, sizeof buf) && !strstr(buf, "<-"), "rank %d's view:\n%s",
        1 - odd, msg);
  return done(ctx);
}

Test(wrapper_pg_order, a_group_timeout_one_member_sets_alone_fails_at_creation, .timeout = 60) {
  for (int odd = 0; odd < 2; odd++)
    cr_assert_eq(dist_test_ranks(2, timeout_rank, &odd, 50), 0, "odd rank %d: %s", odd,
                 dist_test_report());
}

/* Ranks 0 and 2 create {0,1} then {1,2}; rank 1 creates {1,2} first: for
 * group 1 rank 0 expects ranks 0,1 and rank 1 ranks 1,2. Rank 2, outside
 * {0,1}, posts its view of group 1 too: two ranks against one. */
static int members_rank(const dist_test_ctx *ctx) {
  CHECK_OK(ctx, wpg_test_init(ctx));
  int a[2] = {0, 1}, b[2] = {1, 2};
  dist_pg *g = NULL;
  char buf[256];
  if (ctx->rank == 2) { /* not in its group 1: it waits for nobody there */
    int rc = dist_new_group(a, 2, NULL, &g);
    if (rc == DIST_E_DESYNC) { /* rank 1's view was there before its own */
      CHECK(ctx, wpg_line(dist_last_errmsg(), "  rank 1:    group 1 \"\" of ranks 1,2  <- "
                          "member list differs", buf, sizeof buf), "rank 1's view:\n%s",
            dist_last_errmsg());
      return done(ctx);
    }
    CHECK(ctx, rc == DIST_OK && g == DIST_GROUP_NON_MEMBER, "rank 2 in {0,1}: %s: %s",
          dist_status_name(rc), dist_last_errmsg());
    /* Its group 2 is {1,2}, which rank 1 (failed at group 1) never makes:
     * named at the group's timeout, before any connect. */
    dist_group_opts o = {.timeout_ms = 1500};
    rc = dist_new_group(b, 2, &o, &g);
    CHECK(ctx, rc == DIST_E_TIMEOUT && !strcmp(dist_last_errmsg(), "timeout in group 2 (g2, 2 "
                                               "ranks) at creation: rank 1 did not create it "
                                               "within 1500 ms"),
          "new_group: %s: %s", dist_status_name(rc), dist_last_errmsg());
    return done(ctx);
  }
  int rc = dist_new_group(ctx->rank == 0 ? a : b, 2, NULL, &g);
  const char *msg = dist_last_errmsg();
  CHECK(ctx, rc == DIST_E_DESYNC, "new_group: %s: %s", dist_status_name(rc), msg);
  CHECK(ctx, strstr(msg, "at creation: ranks disagree on the member list"), "header:\n%s", msg);
  CHECK(ctx, wpg_line(msg, "  ranks 0,2: group 1 \"\" of ranks 0,1", buf, sizeof buf),
        "ranks 0 and 2's view:\n%s", msg);
  CHECK(ctx, wpg_line(msg, "  rank 1:    group 1 \"\" of ranks 1,2  <- member list differs", buf,
                      sizeof buf), "rank 1's view:\n%s", msg);
  /* each rank's own line: ranks 0 and 1 at the one below, rank 2 at its first call */
  CHECK(ctx, wpg_line(msg, "  called from test_order_mp.c:", buf, sizeof buf) &&
                 strstr(buf, " in members_rank() (ranks 0-1)") &&
                 strstr(buf, " in members_rank() (rank 2)"),
        "the call sites:\n%s", msg);
  return done(ctx);
}

Test(wrapper_pg_order, groups_with_different_members_fail_at_creation, .timeout = 60) {
  cr_assert_eq(dist_test_ranks(3, members_rank, NULL, 50), 0, "%s", dist_test_report());
}

/* Rank 0 creates {2,3} then {0,1}; ranks 1-3 create {0,1} then {2,3}. Rank
 * 0 is not in its first group, so the ids cross: its {0,1} is group 2,
 * where ranks 2 and 3 put {2,3}. Rank 0 posts its view of group 1 as no
 * member of it, so rank 1, waiting there for it, names rank 0 at once (its
 * list leaves out rank 0, where the other three hold it); rank 0 sees that
 * itself when the others' views came first, else at group 2. Ranks 2 and 3
 * may see rank 0's view of group 1, or have agreed on group 2 before rank
 * 0 posted (then they go on, and the job fails on rank 0's report), or one
 * of them saw rank 0's view and the other's connect times out waiting for
 * it. */
static int crossed_ids_rank(const dist_test_ctx *ctx) {
  CHECK_OK(ctx, wpg_test_init(ctx));
  int a[2] = {0, 1}, b[2] = {2, 3};
  dist_pg *g1 = NULL, *g2 = NULL;
  dist_group_opts o = {.timeout_ms = ctx->rank == 0 ? 20000 : 1500};
  char buf[256];
  if (ctx->rank == 0) {
    int rc = dist_new_group(b, 2, &o, &g1);
    const char *msg = dist_last_errmsg();
    if (rc == DIST_E_DESYNC) { /* the others' views of group 1 came first */
      CHECK(ctx, wpg_line(msg, "  rank 0:    group 1 \"\" of ranks 2,3  <- member list "
                          "differs", buf, sizeof buf), "rank 0's view:\n%s", msg);
      return done(ctx);
    }
    CHECK_OK(ctx, rc);
    rc = dist_new_group(a, 2, &o, &g2);
    msg = dist_last_errmsg();
    CHECK(ctx, rc == DIST_E_DESYNC, "new_group: %s: %s", dist_status_name(rc), msg);
    CHECK(ctx, strstr(msg, "desync in group 2 (g2, 2 ranks) at creation: ranks disagree on the "
                      "member list"), "header:\n%s", msg);
    CHECK(ctx, strstr(msg, "\n  rank 0:") && strstr(msg, "group 2 \"\" of ranks 0,1"),
          "rank 0's view:\n%s", msg);
    /* Rank 0 reports at the first conflicting view: rank 2's, rank 3's or both. */
    CHECK(ctx, strstr(msg, ": group 2 \"\" of ranks 2,3"), "ranks 2-3's view:\n%s", msg);
    CHECK(ctx, wpg_line(msg, "  rank 2:", buf, sizeof buf) ||
                   wpg_line(msg, "  rank 3:", buf, sizeof buf) ||
                   wpg_line(msg, "  ranks 2-3:", buf, sizeof buf),
          "names rank 2 or 3:\n%s", msg);
  } else if (ctx->rank == 1) {
    int rc = dist_new_group(a, 2, &o, &g1);
    const char *msg = dist_last_errmsg();
    CHECK(ctx, rc == DIST_E_DESYNC, "new_group: %s: %s", dist_status_name(rc), msg);
    CHECK(ctx, wpg_line(msg, "  ranks 1-3: group 1 \"\" of ranks 0,1", buf, sizeof buf) &&
                   wpg_line(msg, "  rank 0:    group 1 \"\" of ranks 2,3  <- member list "
                            "differs", buf, sizeof buf),
          "views of group 1:\n%s", msg);
    /* Which of the two rank 0's list reads as depends on whether ranks 2-3
     * had posted their views of group 2 (the same list) when this report
     * was written: both name rank 0's list. */
    CHECK(ctx, strstr(msg, "\n  rank 0 passed ranks 2,3, a list without itself, so it is no "
                           "member of the group this call creates") ||
                   strstr(msg, "\n  rank 0 passed ranks 2,3 as group 1, a group the other ranks "
                               "create as group 2: it made its creations in another order"),
          "rank 0's list:\n%s", msg);
  } else {
    int rc = dist_new_group(a, 2, &o, &g1);
    if (rc == DIST_E_DESYNC) /* rank 0's view of group 1 came first */
      return done(ctx);
    CHECK_OK(ctx, rc);
    rc = dist_new_group(b, 2, &o, &g2);
    /* Agreed (then, if the other one saw rank 0's view, its connect times
     * out), or saw the conflict itself. */
    CHECK(ctx, rc == DIST_OK || rc == DIST_E_TIMEOUT ||
                   (rc == DIST_E_DESYNC && strstr(dist_last_errmsg(), "at creation")),
          "new_group: %s: %s", dist_status_name(rc), dist_last_errmsg());
  }
  return done(ctx);
}

Test(wrapper_pg_order, a_rank_outside_its_first_group_that_created_it_out_of_order_is_caught,
     .timeout = 60) {
  cr_assert_eq(dist_test_ranks(4, crossed_ids_rank, NULL, 50), 0, "%s", dist_test_report());
}

/* The mistake torch's documentation warns of: each rank creates only the
 * group it is in ({0,1} on ranks 0-1, {2,3} on ranks 2-3), so group 1 is
 * {0,1} on two ranks and {2,3} on two others. No rank is more wrong than
 * another: the report says what happened and names every rank (at
 * DIST_DEBUG=OFF the same program runs right: core_groups). */
static int own_group_rank(const dist_test_ctx *ctx) {
  CHECK_OK(ctx, wpg_test_init(ctx));
  dist_store *st = dist_get_default_store();
  int pair[2] = {ctx->rank / 2 * 2, ctx->rank / 2 * 2 + 1};
  dist_pg *g = NULL;
  dist_group_opts o = {.timeout_ms = 1500};
  int rc = dist_new_group(pair, 2, &o, &g);
  const char *msg = dist_last_errmsg();
  /* A pair whose two views agreed before the other pair posted goes on to
   * connect: both connect (DIST_OK) or, when the partner saw the other
   * pair's view meanwhile, the connect times out. The pair that posts last
   * sees every view, so some rank is always told: rank 0 counts them. */
  bool agreed = rc == DIST_OK || (rc == DIST_E_TIMEOUT && strstr(msg, "did not join within 1500 ms"));
  if (!agreed) {
    CHECK(ctx, rc == DIST_E_DESYNC, "new_group: %s: %s", dist_status_name(rc), msg);
    CHECK(ctx, strstr(msg, "at creation: ranks disagree on the member list"), "header:\n%s", msg);
    CHECK(ctx, strstr(msg, "\n  each rank created only the group it is in: every rank must call "
                           "dist_new_group for every group, members or not, in the same order"),
          "the explanation:\n%s", msg);
    int64_t told = 0;
    CHECK_OK(ctx, dist_store_add(st, "test/told", 1, &told));
  }
  CHECK_OK(ctx, done(ctx));
  if (ctx->rank == 0) {
    int64_t told = 0;
    CHECK_OK(ctx, dist_store_add(st, "test/told", 0, &told));
    CHECK(ctx, told >= 1, "no rank was told (%lld)", (long long)told);
  }
  return 0;
}

Test(wrapper_pg_order, ranks_that_each_created_only_their_own_group_are_told_so,
     .timeout = 60) {
  cr_assert_eq(dist_test_ranks(4, own_group_rank, NULL, 50), 0, "%s", dist_test_report());
}
