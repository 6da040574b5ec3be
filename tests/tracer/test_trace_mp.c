/* ctest: labels=multiproc timeout=120 */
/* The tracer end to end with real ranks: a 4-rank job mixes sync and
 * async operations on two groups; the merged trace.db holds exactly one
 * row per operation per rank with the right fields, the groups, and the
 * clock offsets; a rank whose clock is skewed gets the skew back as its
 * offset and its rows line up with the others after the merge. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "mp.h"
#include "trace_util.h"
#include "tmpdir.h"
#include "tracer_int.h" /* dist__tracer_test_set_skew */

static char dir[256];

static void setup_dir(void) {
  snprintf(dir, sizeof dir, "/tmp/dist-tracetest-XXXXXX");
  cr_assert(dist_test_mkdtemp(dir));
}

static void trace_env(const char *job) {
  setenv("DIST_TRACE", dir, 1);
  setenv("DIST_JOB_ID", job, 1);
}

/* group 0: all_reduce (sync), broadcast from 2 (async), barrier,
 * all_gather; group 1 = {1,3}: all_reduce MAX (async), all_reduce (sync),
 * send 1 -> 3 tag 5. */
static int mixed_rank(const dist_test_ctx *ctx) {
  trace_env("mixedjob");
  CHECK_OK(ctx, dist_tracer_register());
  CHECK_OK(ctx, dist_test_init_pg(ctx, NULL));
  float v[16] = {0};
  dist_tensor t = dist_tensor_1d(v, DIST_FLOAT32, 16);
  CHECK_OK(ctx, dist_all_reduce(&t, DIST_SUM, NULL, NULL));
  dist_work *w;
  CHECK_OK(ctx, dist_broadcast(&t, 2, NULL, &w));
  CHECK_OK(ctx, dist_work_wait(w, -1));
  dist_work_free(w);
  CHECK_OK(ctx, dist_barrier(NULL, NULL));
  int odd[2] = {1, 3};
  dist_pg *g1;
  CHECK_OK(ctx, dist_new_group(odd, 2, NULL, &g1));
  if (ctx->rank % 2) {
    int32_t x[4] = {ctx->rank};
    dist_tensor tx = dist_tensor_1d(x, DIST_INT32, 4);
    CHECK_OK(ctx, dist_all_reduce(&tx, DIST_MAX, g1, &w));
    CHECK_OK(ctx, dist_work_wait(w, -1));
    dist_work_free(w);
    CHECK_OK(ctx, dist_all_reduce(&tx, DIST_SUM, g1, NULL));
    if (ctx->rank == 1)
      CHECK_OK(ctx, dist_send(&tx, 3, g1, 5));
    else
      CHECK_OK(ctx, dist_recv(&tx, 1, g1, 5, NULL));
  }
  float in[8] = {0}, out[32];
  dist_tensor ti = dist_tensor_1d(in, DIST_FLOAT32, 8);
  dist_tensor to = dist_tensor_1d(out, DIST_FLOAT32, 32);
  CHECK_OK(ctx, dist_all_gather_into_tensor(&to, &ti, NULL, NULL));
  dist_test_finish();
  return 0;
}

Test(tracer, four_ranks_two_groups_one_row_per_operation_per_rank, .timeout = 100) {
  setup_dir();
  cr_assert_eq(dist_test_ranks(4, mixed_rank, NULL, 90), 0, "%s", dist_test_report());
  dist_trace_merge_report rep;
  sqlite3 *db = tq_merge(dir, "mixedjob", &rep);
  cr_assert(db);
  cr_assert_eq(rep.ranks_merged, 4, "merged %d ranks; skipped: %s", rep.ranks_merged,
               rep.skipped);
  cr_assert_eq(rep.files_skipped, 0, "%s", rep.skipped);
  /* 5 ops x 4 ranks on group 0 (the 5th: dist_test_finish's barrier), 3
   * ops x 2 ranks on group 1, nothing else */
  cr_assert_eq(tq_int(db, "SELECT count(*) FROM operations"), 26);
  cr_assert_eq(tq_int(db, "SELECT count(*) FROM operations WHERE group_id=0"), 20);
  cr_assert_eq(tq_int(db, "SELECT count(DISTINCT rank || '/' || seq) FROM operations"
                          " WHERE group_id=0 AND seq BETWEEN 1 AND 5"), 20);
  cr_assert_eq(tq_int(db, "SELECT count(*) FROM operations WHERE group_id=1 AND rank IN (1,3)"
                          " AND seq BETWEEN 1 AND 3"), 6);
  cr_assert_eq(tq_int(db, "SELECT count(*) FROM operations WHERE state != 'completed'"
                          " OR status != 0 OR t_ended_ns < t_started_ns"
                          " OR t_started_ns < t_enqueued_ns"), 0);
  /* fields */
  for (int r = 0; r < 4; r++) {
    cr_assert_str_eq(tq_text(db, "SELECT op || ' ' || is_async || ' ' || root || ' ' || dtype"
                                 " || ' ' || shape || ' ' || bytes_in FROM operations WHERE"
                                 " group_id=0 AND seq=2 AND rank=%d", r),
                     "BROADCAST 1 2 float32 [16] 64");
    cr_assert_str_eq(tq_text(db, "SELECT op || ' ' || is_async || ' ' || redop || ' ' ||"
                                 " numel_in FROM operations WHERE group_id=0 AND seq=1 AND"
                                 " rank=%d", r), "ALL_REDUCE 0 SUM 16");
    cr_assert_str_eq(tq_text(db, "SELECT op || ' ' || bytes_in || ' ' || bytes_out FROM"
                                 " operations WHERE group_id=0 AND seq=4 AND rank=%d", r),
                     "ALL_GATHER_INTO_TENSOR 32 128");
    cr_assert_str_eq(tq_text(db, "SELECT op FROM operations WHERE group_id=0 AND seq=3 AND"
                                 " rank=%d", r), "BARRIER");
  }
  cr_assert_str_eq(tq_text(db, "SELECT op || ' ' || is_async || ' ' || redop || ' ' || dtype"
                               " FROM operations WHERE group_id=1 AND seq=1 AND rank=3"),
                   "ALL_REDUCE 1 MAX int32");
  /* point to point is numbered apart from the collectives (p2p #1 after
   * collectives #1-#2), and within its pair (pair_seq) */
  cr_assert_str_eq(tq_text(db, "SELECT op || ' ' || root || ' ' || tag || ' ' || pair_seq"
                               " FROM operations WHERE group_id=1 AND p2p AND seq=1 AND rank=1"),
                   "SEND 3 5 1");
  cr_assert_str_eq(tq_text(db, "SELECT op || ' ' || root || ' ' || tag || ' ' || pair_seq"
                               " FROM operations WHERE group_id=1 AND p2p AND seq=1 AND rank=3"),
                   "RECV 1 5 1");
  cr_assert_eq(tq_int(db, "SELECT max(seq) FROM operations WHERE group_id=1 AND NOT p2p"), 2);
  cr_assert_eq(tq_int(db, "SELECT count(*) FROM operations WHERE NOT p2p AND pair_seq IS NOT"
                          " NULL"), 0);
  cr_assert_eq(tq_int(db, "SELECT count(*) FROM operations o JOIN callsites c ON"
                          " c.rank = o.rank AND c.callsite_id = o.callsite_id"
                          " WHERE c.module LIKE '%%tracer_test_trace_mp'"), 26);
  /* call sites outlive the process: module, build id (hex), offset */
  cr_assert_eq(tq_int(db, "SELECT count(*) FROM callsites WHERE length(build_id) >= 16 AND"
                          " build_id NOT GLOB '*[^0-9a-f]*' AND offset > 0"),
               tq_int(db, "SELECT count(*) FROM callsites"));
  /* groups, ranks, clock offsets */
  cr_assert_str_eq(tq_text(db, "SELECT members FROM groups WHERE group_id=0"), "[0,1,2,3]");
  cr_assert_str_eq(tq_text(db, "SELECT members || ' ' || backend FROM groups WHERE group_id=1"),
                   "[1,3] cpu");
  cr_assert_eq(tq_int(db, "SELECT count(*) FROM ranks WHERE end_state='finished'"), 4);
  cr_assert_eq(tq_int(db, "SELECT count(*) FROM ranks WHERE rank > 0 AND clock_rtt_ns > 0"
                          " AND abs(clock_offset_ns) < clock_rtt_ns + 1000000"), 3);
  cr_assert_eq(tq_int(db, "SELECT count(DISTINCT rank) FROM events WHERE kind='clock_offset'"),
               4);
  cr_assert_str_eq(tq_text(db, "SELECT value FROM meta WHERE key='kind'"), "merged");
  cr_assert_str_eq(tq_text(db, "SELECT job_id || ' ' || world_size FROM job"), "mixedjob 4");
  sqlite3_close(db);
  /* private: the job directory 0700, the rank files 0600 */
  char p[512];
  struct stat st;
  snprintf(p, sizeof p, "%s/mixedjob", dir);
  cr_assert_eq(stat(p, &st), 0);
  cr_assert_eq(st.st_mode & 0777, 0700, "directory mode %o", st.st_mode & 0777);
  for (int r = 0; r < 4; r++) {
    snprintf(p, sizeof p, "%s/mixedjob/rank-%d.db", dir, r);
    cr_assert_eq(stat(p, &st), 0);
    cr_assert_eq(st.st_mode & 0777, 0600, "%s mode %o", p, st.st_mode & 0777);
  }
}

/* DIST_TRACE=0: the tracer is registered but nothing reaches the disk. */
static int off_rank(const dist_test_ctx *ctx) {
  CHECK(ctx, chdir(dir) == 0, "chdir");
  setenv("DIST_TRACE", "0", 1);
  CHECK_OK(ctx, dist_tracer_register());
  CHECK_OK(ctx, dist_test_init_pg(ctx, NULL));
  float v = 1;
  dist_tensor t = dist_tensor_1d(&v, DIST_FLOAT32, 1);
  CHECK_OK(ctx, dist_all_reduce(&t, DIST_SUM, NULL, NULL));
  CHECK(ctx, dist_tracer_path() == NULL, "recording into %s", dist_tracer_path());
  CHECK(ctx, dist_tracer_flush(100) == DIST_E_INVAL, "flush of a tracer that is off");
  dist_test_finish();
  return 0;
}

Test(tracer, dist_trace_0_writes_nothing, .timeout = 60) {
  setup_dir();
  cr_assert_eq(dist_test_ranks(2, off_rank, NULL, 50), 0, "%s", dist_test_report());
  char p[512];
  snprintf(p, sizeof p, "%s/dist-trace", dir);
  cr_assert_neq(access(p, F_OK), 0, "%s exists", p);
  snprintf(p, sizeof p, "%s/0", dir);
  cr_assert_neq(access(p, F_OK), 0, "%s exists", p);
}

/* Rank 1's clock runs 5 s ahead (test hook): its offset is -5 s, and after
 * the merge its all_reduce starts within a second of rank 0's. */
static int skew_rank(const dist_test_ctx *ctx) {
  trace_env("skewjob");
  if (ctx->rank == 1)
    setenv("DIST_TRACE_TEST_SKEW_NS", "5000000000", 1);
  CHECK_OK(ctx, dist_tracer_register());
  CHECK_OK(ctx, dist_test_init_pg(ctx, NULL));
  float v[4] = {0};
  dist_tensor t = dist_tensor_1d(v, DIST_FLOAT32, 4);
  CHECK_OK(ctx, dist_all_reduce(&t, DIST_SUM, NULL, NULL));
  /* dist_tracer_flush: what was recorded is committed when it returns */
  CHECK_OK(ctx, dist_tracer_flush(20000));
  sqlite3 *db;
  CHECK(ctx, sqlite3_open_v2(dist_tracer_path(), &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK,
        "open %s", dist_tracer_path());
  int64_t n = tq_int(db, "SELECT count(*) FROM operations WHERE seq=1 AND state='completed'");
  sqlite3_close(db);
  CHECK(ctx, n == 1, "after flush the file has %lld rows of seq 1", (long long)n);
  dist_test_finish();
  return 0;
}

Test(tracer, a_skewed_clock_is_measured_and_corrected, .timeout = 60) {
  setup_dir();
  cr_assert_eq(dist_test_ranks(2, skew_rank, NULL, 50), 0, "%s", dist_test_report());
  sqlite3 *db = tq_merge(dir, "skewjob", NULL);
  cr_assert(db);
  int64_t off = tq_int(db, "SELECT clock_offset_ns FROM ranks WHERE rank=1");
  int64_t rtt = tq_int(db, "SELECT clock_rtt_ns FROM ranks WHERE rank=1");
  cr_assert(off > -5000000000ll - rtt - 1000000 && off < -5000000000ll + rtt + 1000000,
            "offset %lld, round trip %lld", (long long)off, (long long)rtt);
  int64_t d = tq_int(db, "SELECT abs(a.t_started_ns - b.t_started_ns) FROM operations a,"
                         " operations b WHERE a.rank=0 AND b.rank=1 AND a.group_id=0 AND"
                         " b.group_id=0 AND a.seq=1 AND b.seq=1");
  cr_assert(d >= 0 && d < 1000000000, "merged starts differ by %lld ns", (long long)d);
  sqlite3_close(db);
}

/* Rank 1's clock jumps 5 s ahead mid-job (test hook) with re-measurement
 * every second: the rank file's clock history (clocks, events) follows
 * the jump, ranks has the latest offset, and the merge applies each
 * measurement to the times it covers, so both all_reduces, one before
 * and one after the jump, line up across ranks (with the latest offset
 * applied to all, the first would be 5 s off). */
static int jump_rank(const dist_test_ctx *ctx) {
  trace_env("jumpjob");
  setenv("DIST_TRACE_CLOCK_S", "1", 1);
  CHECK_OK(ctx, dist_tracer_register());
  CHECK_OK(ctx, dist_test_init_pg(ctx, NULL));
  float v[4] = {0};
  dist_tensor t = dist_tensor_1d(v, DIST_FLOAT32, 4);
  CHECK_OK(ctx, dist_all_reduce(&t, DIST_SUM, NULL, NULL));
  if (ctx->rank == 1) {
    CHECK_OK(ctx, dist__tracer_test_set_skew(5000000000ll));
    /* wait (file content, generous bound) for a re-measurement that saw it */
    sqlite3 *db;
    CHECK(ctx, sqlite3_open_v2(dist_tracer_path(), &db, SQLITE_OPEN_READONLY, NULL) ==
                   SQLITE_OK, "open %s", dist_tracer_path());
    int64_t seen = 0;
    for (int i = 0; i < 3000 && seen < 1; i++) {
      seen = tq_int(db, "SELECT count(*) FROM clocks WHERE offset_ns < -4000000000");
      if (seen < 1)
        nanosleep(&(struct timespec){0, 10000000}, NULL);
    }
    sqlite3_close(db);
    CHECK(ctx, seen >= 1, "no re-measurement found the jump within 30 s");
  }
  CHECK_OK(ctx, dist_all_reduce(&t, DIST_SUM, NULL, NULL));
  dist_test_finish();
  return 0;
}

Test(tracer, a_clock_that_jumps_is_re_measured_and_merged_piecewise, .timeout = 90) {
  setup_dir();
  cr_assert_eq(dist_test_ranks(2, jump_rank, NULL, 80), 0, "%s", dist_test_report());
  sqlite3 *db = tq_merge(dir, "jumpjob", NULL);
  cr_assert(db);
  /* the history: ~0 at init, ~-5 s after the jump; ranks has the latest */
  int64_t first = tq_int(db, "SELECT offset_ns FROM clocks WHERE rank=1 ORDER BY t_ns LIMIT 1");
  int64_t last = tq_int(db, "SELECT offset_ns FROM clocks WHERE rank=1 ORDER BY t_ns DESC"
                            " LIMIT 1");
  int64_t latest = tq_int(db, "SELECT clock_offset_ns FROM ranks WHERE rank=1");
  cr_assert(first > -1000000000 && first < 1000000000, "first offset %lld", (long long)first);
  cr_assert(last > -6000000000 && last < -4000000000, "last offset %lld", (long long)last);
  cr_assert_eq(latest, last);
  cr_assert(tq_int(db, "SELECT count(*) FROM events WHERE rank=1 AND kind='clock_offset'") >=
            2);
  /* clocks.t_ns is on the job clock: each measurement at its rank-0 time */
  cr_assert(tq_int(db, "SELECT count(*) FROM clocks WHERE rank=1 AND t_ns NOT BETWEEN"
                       " (SELECT started_ns FROM job) - 1000000000 AND"
                       " (SELECT ended_ns FROM job) + 1000000000") == 0);
  for (int seq = 1; seq <= 2; seq++) {
    /* ends: rank 0 waits in the second one while rank 1 waits for the clock */
    int64_t d = tq_int(db, "SELECT abs(a.t_ended_ns - b.t_ended_ns) FROM operations a,"
                           " operations b WHERE a.rank=0 AND b.rank=1 AND a.group_id=0 AND"
                           " b.group_id=0 AND a.seq=%d AND b.seq=%d", seq, seq);
    cr_assert(d >= 0 && d < 1000000000, "all_reduce %d: merged ends differ by %lld ns", seq,
              (long long)d);
  }
  sqlite3_close(db);
}
