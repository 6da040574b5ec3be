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

/* Puts a record (head + optional shape or text slots) into the ring. */
static void put_rec(tr_ring *r, tr_head h, const tr_shape *sh, const char *text) {
  size_t tl = text ? strlen(text) + 1 : 0;
  unsigned ts = (unsigned)((tl + TR_TEXT_PER_SLOT - 1) / TR_TEXT_PER_SLOT);
  h.nslots = (uint8_t)(1 + (sh != NULL) + ts);
  h.flags |= sh ? TR_F_SHAPE : 0;
  uint64_t i = tr_ring_claim(r, h.nslots);
  tr_ring_put(r, i++, &h);
  if (sh)
    tr_ring_put(r, i++, sh);
  for (unsigned k = 0; k < ts; k++) {
    tr_text t = {0};
    size_t off = (size_t)k * TR_TEXT_PER_SLOT, n = tl - off;
    memcpy(t.text, text + off, n < TR_TEXT_PER_SLOT ? n : TR_TEXT_PER_SLOT);
    tr_ring_put(r, i++, &t);
  }
}

/* The rank layout's less common rows: an operation still running at a
 * commit is inserted, then updated to its end; a failure keeps status and
 * message; a point-to-point row keeps root and tag; timeout_ms comes from
 * the group; repeated shapes share one shapes row. */
Test(tracer_sink, running_failed_and_p2p_rows, .timeout = 20) {
  sqlite3 *db = fresh();
  tr_sink *s;
  tr_sink_opts o = {.rank = 3};
  cr_assert_eq(tr_sink_open(db, &o, &s), 0);
  tr_ring r;
  cr_assert_eq(tr_ring_init(&r, 256), DIST_OK);
  tr_head g = {.kind = DIST_EV_GROUP_CREATED, .group_id = 2, .t_ns = 10, .root = -1,
               .op = 0xff, .dtype = 0xff, .redop = 0xff};
  put_rec(&r, g, NULL, "pair\x1f" "a pair\x1f" "tcp\x1f[1,3]\x1f" "7000");
  tr_shape sh = {.numel_in = 6, .numel_out = 6, .n_inputs = 2, .n_outputs = 3,
                 .shape = {2, 3}};
  tr_head a = {.kind = DIST_EV_OP_ENQUEUED, .op = DIST_OP_ALL_REDUCE, .dtype = DIST_FLOAT64,
               .redop = 0, .ndim = 2, .flags = TR_F_ASYNC, .group_id = 2, .seq = 1,
               .t_ns = 100, .root = -1};
  put_rec(&r, a, &sh, NULL);
  a.kind = DIST_EV_OP_STARTED;
  a.flags = 0;
  a.t_ns = 120;
  put_rec(&r, a, NULL, NULL);
  uint64_t lost = 0, done = atomic_load(&r.head);
  tr_decode_range(s, get, &r, 0, done, &lost);
  cr_assert_eq(tr_sink_flush(s), 0); /* a commit while it runs */
  cr_assert_str_eq(tq_text(db, "SELECT state || ' ' || is_async || ' ' || n_inputs || ' ' ||"
                               " n_outputs || ' ' || coalesce(t_ended_ns, 'NULL') || ' ' ||"
                               " timeout_ms FROM operations"), "started 1 2 3 NULL 7000");
  a.kind = DIST_EV_OP_FAILED;
  a.status = DIST_E_TIMEOUT;
  a.t_ns = 900;
  put_rec(&r, a, NULL, "rank 1 never arrived");
  tr_head p = {.kind = DIST_EV_OP_ISSUED, .op = DIST_OP_SEND, .dtype = DIST_FLOAT64, .redop = 0xff,
               .ndim = 2, .group_id = 2, .seq = 2, .t_ns = 1000, .root = 1, .tag = 9};
  put_rec(&r, p, &sh, NULL);
  p.kind = DIST_EV_OP_COMPLETED;
  p.t_ns = 1100;
  put_rec(&r, p, NULL, NULL);
  tr_decode_range(s, get, &r, done, atomic_load(&r.head), &lost);
  cr_assert_eq(lost, 0);
  cr_assert_eq(tr_sink_flush(s), 0);
  cr_assert_eq(tq_int(db, "SELECT count(*) FROM operations"), 2);
  cr_assert_eq(tq_int(db, "SELECT status FROM operations WHERE seq=1"), DIST_E_TIMEOUT);
  cr_assert_str_eq(tq_text(db, "SELECT state || ' ' || message || ' ' || t_started_ns || ' ' ||"
                               " t_ended_ns || ' ' || redop || ' ' || bytes_in FROM operations"
                               " WHERE seq=1"), "failed rank 1 never arrived 120 900 SUM 48");
  cr_assert_str_eq(tq_text(db, "SELECT op || ' ' || state || ' ' || root || ' ' || tag || ' '"
                               " || shape || ' ' || coalesce(redop, 'NULL') FROM operations"
                               " WHERE seq=2"), "SEND completed 1 9 [2,3] NULL");
  cr_assert_eq(tq_int(db, "SELECT count(*) FROM shapes"), 1);
  tr_sink_close(s);
  tr_ring_fini(&r);
  sqlite3_close(db);
}
