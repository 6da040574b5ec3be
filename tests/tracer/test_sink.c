/* ctest: labels=unit timeout=30 */
/* The record sink on its own (what the writer thread and the ring import
 * share): records of one operation become one row whatever slots they
 * span, a statistics row lands in stats, and records decoded from a ring
 * whose slots were overwritten are counted, not misread. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <dist/dist.h>

#include "reader_int.h"
#include "ring.h"
#include "trace_util.h"

static int get(void *arg, uint64_t idx, void *slot) {
  return tr_ring_get(arg, idx, slot) == 1 ? 1 : -1;
}

static sqlite3 *fresh(void) {
  sqlite3 *db;
  cr_assert_eq(sqlite3_open(":memory:", &db), SQLITE_OK);
  cr_assert_eq(tr_schema_create_rank(db, 3, NULL, 0), 0);
  return db;
}

Test(tracer_sink, records_become_rows, .timeout = 20) {
  sqlite3 *db = fresh();
  tr_sink *s;
  tr_sink_opts o = {.rank = 3};
  cr_assert_eq(tr_sink_open(db, &o, &s), 0);
  tr_ring r;
  cr_assert_eq(tr_ring_init(&r, 64), DIST_OK);
  /* an all_reduce: issued (head + shape), completed */
  tr_head h = {.kind = DIST_EV_OP_ISSUED, .op = DIST_OP_ALL_REDUCE, .dtype = DIST_INT64,
               .redop = 3, .nslots = 2, .ndim = 2, .flags = TR_F_SHAPE, .group_id = 1,
               .seq = 7, .t_ns = 1000, .root = -1};
  tr_shape sh = {.numel_in = 12, .numel_out = 12, .n_inputs = 1, .n_outputs = 1,
                 .shape = {3, 4}};
  uint64_t i = tr_ring_claim(&r, 2);
  tr_ring_put(&r, i, &h);
  tr_ring_put(&r, i + 1, &sh);
  tr_head e = h;
  e.kind = DIST_EV_OP_COMPLETED;
  e.nslots = 1;
  e.flags = 0;
  e.t_ns = 1500;
  tr_ring_put(&r, tr_ring_claim(&r, 1), &e);
  /* a statistics row */
  tr_head st = {.kind = TR_KIND_STATS, .op = DIST_OP_BROADCAST, .nslots = 2,
                .flags = TR_F_SHAPE, .group_id = 0, .seq = 1000, .t_ns = 2000, .root = 2,
                .caller = 4096, .aux = 800};
  tr_stats x = {.p99_ns = 9000, .lateness_ns = 1234};
  i = tr_ring_claim(&r, 2);
  tr_ring_put(&r, i, &st);
  tr_ring_put(&r, i + 1, &x);
  uint64_t lost = 0;
  cr_assert_eq(tr_decode_range(s, get, &r, 0, atomic_load(&r.head), &lost), 3);
  cr_assert_eq(lost, 0);
  cr_assert_eq(tr_sink_flush(s), 0);
  cr_assert_str_eq(tq_text(db, "SELECT rank || ' ' || group_id || ' ' || seq || ' ' || op ||"
                               " ' ' || state || ' ' || dtype || ' ' || shape || ' ' ||"
                               " bytes_in || ' ' || redop || ' ' || t_enqueued_ns || ' ' ||"
                               " t_started_ns || ' ' || t_ended_ns FROM operations"),
                   "3 1 7 ALL_REDUCE completed int64 [3,4] 96 MAX 1000 1000 1500");
  cr_assert_eq(tq_int(db, "SELECT count(*) FROM operations"), 1);
  cr_assert_str_eq(tq_text(db, "SELECT op || ' ' || count || ' ' || bytes || ' ' || p50_ns ||"
                               " ' ' || p99_ns || ' ' || straggler_rank || ' ' || lateness_ns"
                               " FROM stats WHERE rank=3 AND group_id=0"),
                   "BROADCAST 1000 4096 800 9000 2 1234");
  /* overwrite slots 0..63 with 64 newer ones: reading index 0 again is lost */
  for (int k = 0; k < 64; k++)
    tr_ring_put(&r, tr_ring_claim(&r, 1), &e);
  lost = 0;
  tr_decode_range(s, get, &r, 0, 3, &lost);
  cr_assert_eq(lost, 3, "overwritten slots read as records: %llu lost", (unsigned long long)lost);
  tr_sink_close(s);
  tr_ring_fini(&r);
  sqlite3_close(db);
}
