/* ctest: labels=multiproc timeout=60 */
/* Ring overflow, driven deterministically: a 64-slot ring and a writer
 * that does not drain until the end (DIST_TRACE_COMMIT_MS=600000), so
 * most of 200 operations are overwritten. The newest records win (the
 * last operation is there, complete), the loss is counted and recorded as
 * an event, and every operation missing from the table lies in a recorded
 * drops range. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>

#include "mp.h"
#include "trace_util.h"
#include "tmpdir.h"

#define N_OPS 200

static char dir[256];

static int busy_rank(const dist_test_ctx *ctx) {
  setenv("DIST_TRACE", dir, 1);
  setenv("DIST_JOB_ID", "overflowjob", 1);
  setenv("DIST_TRACE_BUFFER", "64", 1);
  setenv("DIST_TRACE_COMMIT_MS", "600000", 1);
  CHECK_OK(ctx, dist_tracer_register());
  CHECK_OK(ctx, dist_test_init_pg(ctx, NULL));
  float v = 1;
  dist_tensor t = dist_tensor_1d(&v, DIST_FLOAT32, 1);
  for (int i = 0; i < N_OPS; i++)
    CHECK_OK(ctx, dist_all_reduce(&t, DIST_SUM, NULL, NULL));
  CHECK_OK(ctx, dist_destroy_process_group(NULL)); /* no barrier: seq N_OPS is last */
  return 0;
}

Test(tracer_overflow, newest_records_win_and_the_loss_is_recorded, .timeout = 50) {
  snprintf(dir, sizeof dir, "/tmp/dist-traceovf-XXXXXX");
  cr_assert(dist_test_mkdtemp(dir));
  cr_assert_eq(dist_test_ranks(2, busy_rank, NULL, 40), 0, "%s", dist_test_report());
  sqlite3 *db = tq_merge(dir, "overflowjob", NULL);
  cr_assert(db);
  for (int r = 0; r < 2; r++) {
    int64_t have = tq_int(db, "SELECT count(*) FROM operations WHERE rank=%d", r);
    cr_assert(have > 0 && have < N_OPS, "rank %d: %lld rows", r, (long long)have);
    cr_assert_str_eq(tq_text(db, "SELECT state FROM operations WHERE rank=%d AND group_id=0"
                                 " AND seq=%d", r, N_OPS), "completed");
    cr_assert(tq_int(db, "SELECT dropped_records FROM ranks WHERE rank=%d", r) > 0);
    cr_assert(tq_int(db, "SELECT count(*) FROM events WHERE rank=%d AND"
                         " kind='ring_overflow' AND status > 0", r) >= 1);
    cr_assert(tq_int(db, "SELECT count(*) FROM drops WHERE rank=%d AND group_id=0", r) >= 1);
    /* every operation missing from the table is inside a drops range */
    for (int s = 1; s <= N_OPS; s++)
      if (tq_int(db, "SELECT count(*) FROM operations WHERE rank=%d AND group_id=0 AND"
                     " seq=%d", r, s) == 0)
        cr_assert(tq_int(db, "SELECT count(*) FROM drops WHERE rank=%d AND group_id=0 AND"
                             " NOT p2p AND %d BETWEEN seq_first AND seq_last", r, s) >= 1,
                  "rank %d: seq %d is neither recorded nor in a drops range", r, s);
  }
  sqlite3_close(db);
}
