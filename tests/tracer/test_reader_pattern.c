/* ctest: labels=unit timeout=60 */
/* dist_trace_rank_pattern: whether a rank's latest calls repeat its own
 * earlier steps, on traces written with SQL (trace_fixture.h). The loop of
 * these ranks broadcasts every other step, as a training loop that
 * broadcasts its loss every N steps does: a step that has the broadcast
 * where the step before had none repeats the loop; a step that lacks a
 * receive every earlier step made does not. */
#include <criterion/criterion.h>

#include <stdio.h>
#include <string.h>

#include <dist/trace_reader.h>

#include "tmpdir.h"
#include "trace_fixture.h"

static char dir[128], path[192];

static void setup(void) {
  snprintf(dir, sizeof dir, "/tmp/dist-pattern-XXXXXX");
  cr_assert(dist_test_mkdtemp(dir));
  snprintf(path, sizeof path, "%s/trace.db", dir);
}

/* One rank's calls, oldest first: op names, the last one still open. Each
 * op name is one call site (its callsite_id below). */
static void calls(sqlite3 *db, int rank, const char *const *ops, int n) {
  for (int i = 0; i < n; i++) {
    bool open = i == n - 1;
    fx_op o = {.rank = rank, .group_id = 0, .seq = i + 1, .op = ops[i],
               .state = open ? "started" : "completed", .root = -1,
               .t_enq = fx_t(i + 1, rank), .t_start = fx_t(i + 1, rank),
               .t_end = open ? -1 : fx_t(i + 1, rank) + 500000};
    fx_op_add(db, &o);
  }
}

static int differs(int rank) {
  dist_trace *t = NULL;
  cr_assert_eq(dist_trace_open(path, &t, NULL, 0), DIST_OK);
  dist_trace_pattern p;
  cr_assert_eq(dist_trace_rank_pattern(t, rank, &p), DIST_OK);
  dist_trace_close(t);
  return p.differs;
}

#define N(a) (int)(sizeof a / sizeof a[0])

static void write_story(void) {
  sqlite3 *db = fx_create(path, "job-pattern", 3, 1);
  const int all[] = {0, 1, 2};
  fx_group(db, 0, "default", all, 3);
  /* Rank 0 sends every step; step 2 has the broadcast step 1 had not. */
  static const char *const sender[] = {"BROADCAST", "ALL_GATHER", "SEND", "ALL_REDUCE",
                                       "ALL_GATHER", "SEND", "ALL_REDUCE",
                                       "BROADCAST", "ALL_GATHER", "SEND"};
  /* Rank 1 receives every step but skips its receive in step 2. */
  static const char *const skipper[] = {"BROADCAST", "ALL_GATHER", "RECV", "ALL_REDUCE",
                                        "ALL_GATHER", "RECV", "ALL_REDUCE",
                                        "BROADCAST", "ALL_GATHER", "ALL_REDUCE"};
  /* Rank 2 in step 3, which has no broadcast where step 2 had one: as
   * step 1 was. */
  static const char *const later[] = {"BROADCAST", "ALL_GATHER", "SEND", "ALL_REDUCE",
                                      "ALL_GATHER", "SEND", "ALL_REDUCE",
                                      "BROADCAST", "ALL_GATHER", "SEND", "ALL_REDUCE",
                                      "ALL_GATHER", "SEND"};
  calls(db, 0, sender, N(sender));
  calls(db, 1, skipper, N(skipper));
  calls(db, 2, later, N(later));
  fx_op_end();
  char *err = NULL;
  int rc = sqlite3_exec(db, "UPDATE operations SET callsite_id = CASE op WHEN 'BROADCAST' THEN 1"
                            " WHEN 'ALL_GATHER' THEN 2 WHEN 'SEND' THEN 3 WHEN 'ALL_REDUCE' THEN 4"
                            " ELSE 5 END", NULL, NULL, &err);
  cr_assert_eq(rc, SQLITE_OK, "%s", err ? err : "");
  fx_finish(db, fx_t(0, 0), fx_t(20, 2));
}

Test(tracer_reader_pattern, a_call_added_this_step_that_completed_is_the_loops_own,
     .init = setup, .timeout = 30) {
  write_story();
  cr_expect_eq(differs(0), 0, "the sender repeats its loop (a broadcast every other step)");
}

Test(tracer_reader_pattern, a_receive_skipped_this_step_differs, .init = setup, .timeout = 30) {
  write_story();
  cr_expect_eq(differs(1), 1, "the rank that skipped its receive left its pattern");
}

Test(tracer_reader_pattern, a_step_like_one_two_steps_back_repeats, .init = setup,
     .timeout = 30) {
  write_story();
  cr_expect_eq(differs(2), 0, "a step without the broadcast is as the step before last");
}
