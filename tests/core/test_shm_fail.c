/* ctest: labels=multiproc timeout=300 */
/* The shared-memory engine when things go wrong: sizes, kinds, roots or
 * split matrices that disagree between ranks (every rank fails the same
 * operation with a message, and the group stays usable), a rank killed
 * mid-loop (peer lost, named, within the timeout), a rank that never
 * arrives (timeout naming it), an abort from another thread (a sleeping
 * waiter wakes at once), a fork after init, and no segment left behind in
 * /dev/shm. */
#include <criterion/criterion.h>

#include <dirent.h>
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>

#include "backends/cpu/shm_int.h" /* SHM_DEPTH */
#include "test_shm_util.h"

static void quiet_waits(void) {
  setenv("DIST_SHM_SPIN_US", "5", 1);
  setenv("DIST_SHM_YIELD_US", "50", 1);
}

static int all_reduce_n(shm_t *e, float *buf, int64_t n) {
  dist_tensor t = shm_t_tensor(buf, DIST_FLOAT32, n);
  dist_coll c = {.kind = DIST_OP_ALL_REDUCE, .inputs = &t, .n_inputs = 1, .outputs = &t,
                 .n_outputs = 1, .redop = DIST_SUM, .root = -1};
  return shm_t_run(e, &c);
}

/* An all_reduce every rank agrees on, checked: the group is usable. */
static int still_usable(const dist_test_ctx *ctx, shm_t *e) {
  float v[3] = {1, 2, (float)ctx->rank};
  int rc = all_reduce_n(e, v, 3);
  CHECK(ctx, rc == DIST_OK, "follow-up all_reduce: %s: %s", dist_status_name(rc), e->err.msg);
  float want = (float)(ctx->world * (ctx->world - 1) / 2);
  CHECK(ctx, v[0] == (float)ctx->world && v[2] == want, "follow-up all_reduce gave %g %g", v[0],
        v[2]);
  return 0;
}

static int expect_desync(const dist_test_ctx *ctx, shm_t *e, int rc, const char *const *needles) {
  CHECK(ctx, rc == DIST_E_DESYNC, "expected DIST_E_DESYNC, got %s: %s", dist_status_name(rc),
        e->err.msg);
  for (int i = 0; needles[i]; i++)
    CHECK(ctx, strstr(e->err.msg, needles[i]), "message lacks '%s': %s", needles[i], e->err.msg);
  return 0;
}

/* --- mismatches ----------------------------------------------------------- */

static int rank_count_mismatch(const dist_test_ctx *ctx) {
  shm_t e = {0};
  if (shm_t_open(ctx, &e, false))
    return 1;
  int64_t n = *(const int64_t *)ctx->arg, mine = ctx->rank == 1 ? n / 2 : n;
  float *buf = calloc((size_t)n, sizeof *buf);
  int rc = all_reduce_n(&e, buf, mine);
  char pid[32], a[96], b[96];
  snprintf(pid, sizeof pid, "pid %d", (int)e.g.peers[ctx->rank == 1 ? 0 : 1].pid);
  int64_t other = ctx->rank == 1 ? n : n / 2;
  /* Every rank names the same pair, rank 0 and rank 1 (status.h). */
  snprintf(a, sizeof a, "rank 0: ALL_REDUCE float32[%lld] op=SUM (%lld bytes)", (long long)n,
           (long long)n * 4);
  snprintf(b, sizeof b, "rank 1: ALL_REDUCE float32[%lld] op=SUM (%lld bytes)  <- count differs",
           (long long)(n / 2), (long long)(n / 2) * 4);
  (void)pid, (void)other; /* a disagreement names ranks only */
  const char *needles[] = {"ALL_REDUCE #1: ranks disagree on the count", a, b, NULL};
  int bad = expect_desync(ctx, &e, rc, needles);
  for (int64_t i = 0; i < n && !bad; i++)
    CHECK(ctx, buf[i] == 0.0f, "the failed all_reduce wrote into the buffer at %lld",
          (long long)i);
  if (!bad)
    bad = still_usable(ctx, &e);
  free(buf);
  shm_t_close(&e);
  return bad;
}

Test(core_shm_fail, all_reduce_counts_that_differ_fail_every_rank_and_the_group_stays_usable,
     .timeout = 60) {
  quiet_waits();
  int64_t n = 8;
  cr_assert_eq(dist_test_ranks(3, rank_count_mismatch, &n, 30), 0, "%s", dist_test_report());
  n = 3 << 20; /* many pipelined steps on every rank */
  cr_assert_eq(dist_test_ranks(2, rank_count_mismatch, &n, 30), 0, "%s", dist_test_report());
}

static int rank_kind_mismatch(const dist_test_ctx *ctx) {
  shm_t e = {0};
  if (shm_t_open(ctx, &e, false))
    return 1;
  int bad = still_usable(ctx, &e); /* #1 */
  float v[4] = {0};
  dist_tensor t = shm_t_tensor(v, DIST_FLOAT32, 4);
  dist_coll c = {.kind = ctx->rank == 1 ? DIST_OP_BROADCAST : DIST_OP_ALL_REDUCE, .inputs = &t,
                 .n_inputs = 1, .outputs = &t, .n_outputs = 1, .redop = DIST_SUM, .root = 0};
  int rc = shm_t_run(&e, &c); /* #2 */
  const char *other[] = {"ALL_REDUCE #2: ranks disagree on the operation",
                         "\n  rank 0: ALL_REDUCE float32", "\n  rank 1: BROADCAST float32", NULL};
  const char *one[] = {"BROADCAST #2: ranks disagree on the operation",
                       "\n  rank 0: ALL_REDUCE float32", "\n  rank 1: BROADCAST float32", NULL};
  if (!bad)
    bad = expect_desync(ctx, &e, rc, ctx->rank == 1 ? one : other);
  if (!bad) { /* a root that differs, on a broadcast that waits (several steps or
                * single-copy: a small one defers its check, see below) */
    float *big = calloc(1 << 16, sizeof *big);
    dist_tensor tb = shm_t_tensor(big, DIST_FLOAT32, 1 << 16);
    dist_coll cb = c;
    cb.kind = DIST_OP_BROADCAST;
    cb.inputs = cb.outputs = &tb;
    cb.root = ctx->rank == 2 ? 2 : 0;
    rc = shm_t_run(&e, &cb);
    free(big);
    const char *root[] = {"BROADCAST #3: ranks disagree on the root", " root 0 ", " root 2 ",
                          NULL};
    bad = expect_desync(ctx, &e, rc, root);
  }
  if (!bad) { /* a reduce op that differs */
    c.kind = DIST_OP_ALL_REDUCE;
    c.redop = ctx->rank == 0 ? DIST_MAX : DIST_SUM;
    rc = shm_t_run(&e, &c);
    const char *red[] = {"ALL_REDUCE #4: ranks disagree on the reduce op", "op=MAX", "op=SUM",
                         NULL};
    bad = expect_desync(ctx, &e, rc, red);
  }
  if (!bad) { /* a dtype that differs, same count */
    double d[4] = {0};
    dist_tensor td = shm_t_tensor(d, DIST_FLOAT64, 4);
    c.redop = DIST_SUM;
    if (ctx->rank == 2)
      c.inputs = c.outputs = &td;
    rc = shm_t_run(&e, &c);
    const char *dt[] = {"ALL_REDUCE #5", "float64", "float32", NULL};
    bad = expect_desync(ctx, &e, rc, dt);
  }
  if (!bad)
    bad = still_usable(ctx, &e);
  shm_t_close(&e);
  return bad;
}

Test(core_shm_fail, a_different_kind_root_op_or_dtype_fails_every_rank_with_a_message,
     .timeout = 60) {
  quiet_waits();
  cr_assert_eq(dist_test_ranks(3, rank_kind_mismatch, NULL, 30), 0, "%s", dist_test_report());
}

/* Two ranks all_reduce in a loop; rank 0 then calls a barrier where rank 1
 * all_reduces once more (it skipped its last all_reduce). One against one,
 * no majority: rank 1 repeats what its loop did at every step (two
 * all_reduces in a row are its habit, no sign of a skip), rank 0 makes a
 * kind its history never made: rank 0 is the one marked, on both ranks,
 * though it is the lower. */
static int rank_loop_left(const dist_test_ctx *ctx) {
  shm_t e = {0};
  if (shm_t_open(ctx, &e, false))
    return 1;
  int bad = 0;
  for (int i = 0; i < 4 && !bad; i++) /* #1-#4 */
    bad = still_usable(ctx, &e);
  int rc;
  float v[3] = {0};
  if (ctx->rank == 0) {
    dist_coll b = {.kind = DIST_OP_BARRIER, .root = -1};
    rc = shm_t_run(&e, &b);
  } else {
    rc = all_reduce_n(&e, v, 3);
  }
  const char *want[] = {"#5: ranks disagree on the operation",
                        "\n  rank 0: BARRIER  <- operation differs",
                        "\n  rank 1: ALL_REDUCE float32[3] op=SUM (12 bytes)", NULL};
  if (!bad)
    bad = expect_desync(ctx, &e, rc, want);
  shm_t_close(&e);
  return bad;
}

Test(core_shm_fail, of_a_pair_the_rank_that_left_its_loop_is_marked_not_the_one_repeating_it,
     .timeout = 60) {
  quiet_waits();
  cr_assert_eq(dist_test_ranks(2, rank_loop_left, NULL, 30), 0, "%s", dist_test_report());
}

/* Rank 0 sends 2 rows to rank 1, which expects 3; every other pair agrees.
 * Every other size is 3 rows: rank 0's stands out, and it alone is marked. */
static int rank_split_mismatch(const dist_test_ctx *ctx) {
  shm_t e = {0};
  if (shm_t_open(ctx, &e, false))
    return 1;
  int N = ctx->world, me = ctx->rank;
  int64_t in_s[8], out_s[8], rin = 0, rout = 0;
  for (int j = 0; j < N; j++) {
    rin += in_s[j] = (me == 0 && j == 1) ? 2 : 3;
    rout += out_s[j] = 3;
  }
  float in[64] = {0}, out[64] = {0};
  dist_tensor ti = {.data = in, .dtype = DIST_FLOAT32, .ndim = 2, .shape = {rin, 3}};
  dist_tensor to = {.data = out, .dtype = DIST_FLOAT32, .ndim = 2, .shape = {rout, 3}};
  dist_coll c = {.kind = DIST_OP_ALL_TO_ALL_SINGLE, .inputs = &ti, .n_inputs = 1, .outputs = &to,
                 .n_outputs = 1, .in_splits = in_s, .out_splits = out_s, .n_splits = (size_t)N};
  int rc = shm_t_run(&e, &c);
  /* Every rank, the third one too, names the same pair in the same words. */
  const char *r1[] = {"ALL_TO_ALL_SINGLE #1: ranks disagree on the split size",
                      "\n  rank 0: ALL_TO_ALL_SINGLE float32[6] to rank 1 (24 bytes)  <- split "
                      "size differs",
                      "\n  rank 1: ALL_TO_ALL_SINGLE float32[9] from rank 0 (36 bytes)", NULL};
  const char *const *r0 = r1, *const *rx = r1;
  int bad = expect_desync(ctx, &e, rc, me == 1 ? r1 : me == 0 ? r0 : rx);
  if (!bad)
    CHECK(ctx, !strstr(e.err.msg, "(36 bytes)  <-"), "the receiver is marked too: %s", e.err.msg);
  for (int i = 0; i < 64 && !bad; i++)
    CHECK(ctx, out[i] == 0.0f, "the failed all_to_all wrote into the output");
  if (!bad)
    bad = still_usable(ctx, &e);
  shm_t_close(&e);
  return bad;
}

Test(core_shm_fail, all_to_all_single_split_sizes_that_disagree_fail_every_rank,
     .timeout = 60) {
  quiet_waits();
  cr_assert_eq(dist_test_ranks(3, rank_split_mismatch, NULL, 30), 0, "%s", dist_test_report());
}

/* Rank 0 splits its 2 N rows of re elements unevenly ({1, 3, 2, ...}),
 * the others pass no split sizes (2 rows each): every rank fails the same
 * way, names the pair whose sizes differ, as between uneven calls and as
 * the TCP engine does, and the group stays usable. The descriptors differ
 * in form (rank 0's carries no sizes, the others' carry their even ones),
 * which alone said only "rank 0: ALL_TO_ALL_SINGLE int32" against the
 * others' size. Rows of 1: the others run the one-step even path, which
 * publishes no counts (their row of the matrix follows from the
 * descriptor); rows of 100: every rank published its counts. */
static int rank_uneven_against_none(const dist_test_ctx *ctx) {
  shm_t e = {0};
  if (shm_t_open(ctx, &e, false))
    return 1;
  int N = ctx->world, me = ctx->rank, re = *(const int *)ctx->arg;
  int64_t sp[8];
  for (int j = 0; j < N; j++)
    sp[j] = 2;
  sp[0] = 1, sp[1] = 3;
  int32_t *in = calloc((size_t)(2 * N * re), sizeof *in), *out = calloc((size_t)(2 * N * re), 4);
  dist_tensor ti = {.data = in, .dtype = DIST_INT32, .ndim = 2, .shape = {2 * N, re}};
  dist_tensor to = {.data = out, .dtype = DIST_INT32, .ndim = 2, .shape = {2 * N, re}};
  dist_coll c = {.kind = DIST_OP_ALL_TO_ALL_SINGLE, .inputs = &ti, .n_inputs = 1, .outputs = &to,
                 .n_outputs = 1};
  if (me == 0) {
    c.in_splits = c.out_splits = sp;
    c.n_splits = (size_t)N;
  }
  int rc = shm_t_run(&e, &c);
  char r0[128], r1[128];
  snprintf(r0, sizeof r0, "\n  rank 0: ALL_TO_ALL_SINGLE int32[%d] to rank 1 (%d bytes)  <- "
           "split size differs", 3 * re, 12 * re);
  snprintf(r1, sizeof r1, "\n  rank 1: ALL_TO_ALL_SINGLE int32[%d] from rank 0 (%d bytes)",
           2 * re, 8 * re);
  const char *needles[] = {"ALL_TO_ALL_SINGLE #1: ranks disagree on the split size", r0, r1,
                           NULL};
  int bad = expect_desync(ctx, &e, rc, needles);
  if (!bad)
    bad = still_usable(ctx, &e);
  free(in);
  free(out);
  shm_t_close(&e);
  return bad;
}

Test(core_shm_fail, uneven_split_sizes_against_none_name_the_pair_whose_sizes_differ,
     .timeout = 60) {
  quiet_waits();
  int re = 1;
  cr_assert_eq(dist_test_ranks(3, rank_uneven_against_none, &re, 30), 0, "rows of 1:\n%s",
               dist_test_report());
  re = 100;
  cr_assert_eq(dist_test_ranks(3, rank_uneven_against_none, &re, 30), 0, "rows of 100:\n%s",
               dist_test_report());
}

/* Rank 0 calls an uneven all_to_all_single of 6 int32, the others an
 * all_reduce of 6: rank 0's line shows its shape, though its descriptor
 * carries no size (the uneven form; it used to read "ALL_TO_ALL_SINGLE
 * int32" alone): from the counts it published with the step. */
static int rank_uneven_against_all_reduce(const dist_test_ctx *ctx) {
  shm_t e = {0};
  if (shm_t_open(ctx, &e, false))
    return 1;
  int N = ctx->world;
  int64_t sp[8] = {0};
  sp[0] = 6;
  int32_t in[8] = {0}, out[8] = {0};
  dist_tensor ti = shm_t_tensor(in, DIST_INT32, 6), to = shm_t_tensor(out, DIST_INT32, 6);
  dist_coll c = {.kind = DIST_OP_ALL_REDUCE, .inputs = &ti, .n_inputs = 1, .outputs = &ti,
                 .n_outputs = 1, .redop = DIST_SUM, .root = -1};
  if (ctx->rank == 0)
    c = (dist_coll){.kind = DIST_OP_ALL_TO_ALL_SINGLE, .inputs = &ti, .n_inputs = 1,
                    .outputs = &to, .n_outputs = 1, .in_splits = sp, .out_splits = sp,
                    .n_splits = (size_t)N};
  int rc = shm_t_run(&e, &c);
  const char *needles[] = {"ranks disagree on the operation",
                           "\n  rank 0: ALL_TO_ALL_SINGLE int32[6] (24 bytes)  <- operation "
                           "differs",
                           "\n  rank 1: ALL_REDUCE int32[6] op=SUM (24 bytes)", NULL};
  int bad = expect_desync(ctx, &e, rc, needles);
  if (!bad)
    bad = still_usable(ctx, &e);
  shm_t_close(&e);
  return bad;
}

Test(core_shm_fail, an_uneven_all_to_all_single_against_another_operation_shows_its_shape,
     .timeout = 60) {
  quiet_waits();
  cr_assert_eq(dist_test_ranks(3, rank_uneven_against_all_reduce, NULL, 30), 0, "%s",
               dist_test_report());
}

/* --- deferred checks (small broadcast and scatter) ------------------------ */

/* A rooted copy of n float32 per rank from root: a broadcast of out, or a
 * scatter of pieces of 8 from in (root only) into out. */
static int rooted_copy(shm_t *e, dist_op_kind kind, float *in, float *out, int64_t n, int root) {
  dist_tensor t = shm_t_tensor(out, DIST_FLOAT32, n), ins[8];
  dist_coll c = {.kind = kind, .inputs = &t, .n_inputs = 1, .outputs = &t, .n_outputs = 1,
                 .root = root};
  if (kind == DIST_OP_SCATTER) {
    for (int j = 0; j < e->g.size; j++)
      ins[j] = shm_t_tensor(in + 8 * j, DIST_FLOAT32, n);
    c.inputs = ins;
    c.n_inputs = e->g.rank == root ? (size_t)e->g.size : 0;
  }
  return shm_t_run(e, &c);
}

typedef struct late_case {
  dist_op_kind kind; /* BROADCAST or SCATTER (#2) */
  dist_op_kind next; /* what every rank calls next (#3) */
} late_case;

static int expect_prompt(const dist_test_ctx *ctx, int64_t t0) {
  int64_t took = dist__now_ms() - t0;
  CHECK(ctx, took < 2000, "the failure took %lld ms (deadline 20 s)", (long long)took);
  return 0;
}

/* The next call after a small broadcast or scatter the root returned
 * from without waiting: the root's next call of another kind settles it,
 * more small broadcasts run up to SHM_DEPTH - 1 steps ahead of their
 * readers first. Calls `next` until one fails; returns its status and
 * sets *num to its sequence number (the first is #first). */
static int call_until_failure(shm_t *e, dist_op_kind next, float *in, float *v, int first,
                              int *num) {
  int rc = DIST_OK;
  for (*num = first; *num < first + SHM_DEPTH; ++*num) {
    rc = next == DIST_OP_ALL_REDUCE ? all_reduce_n(e, v, 3) : rooted_copy(e, next, in, v, 8, 0);
    if (rc != DIST_OK || next == DIST_OP_ALL_REDUCE)
      break;
  }
  return rc;
}

/* Rank 1 expects 4 elements where root 0 sends 8: rank 1 fails #2 at once;
 * the root returned from #2 without waiting and a later call (#3, or
 * within SHM_DEPTH small broadcasts) fails naming rank 1 and both sizes;
 * the other ranks' same call fails with the root's message instead of
 * waiting; the group is unusable from then on. */
static int rank_late_mismatch(const dist_test_ctx *ctx) {
  const late_case *l = ctx->arg;
  shm_t e = {0};
  if (shm_t_open(ctx, &e, false))
    return 1;
  int me = ctx->rank, bad = still_usable(ctx, &e); /* #1 */
  const char *op = dist_op_name(l->kind);
  float in[64], out[8] = {0};
  for (int i = 0; i < 64; i++)
    in[i] = (float)(i + 1);
  if (me == 0 && l->kind == DIST_OP_BROADCAST)
    memcpy(out, in, sizeof out);
  int rc = rooted_copy(&e, l->kind, in, out, me == 1 ? 4 : 8, 0); /* #2 */
  char pid0[32], pid1[32], a[256], b[256];
  snprintf(pid0, sizeof pid0, "pid %d", (int)e.g.peers[0].pid);
  snprintf(pid1, sizeof pid1, "pid %d", (int)e.g.peers[1].pid);
  if (!bad && me == 1) {
    snprintf(a, sizeof a, "%s #2: ranks disagree on the count", op);
    const char *n1[] = {a, "float32[8]", "float32[4]", NULL};
    bad = expect_desync(ctx, &e, rc, n1);
    for (int i = 0; i < 8 && !bad; i++)
      CHECK(ctx, out[i] == 0.0f, "the failed %s wrote into the output", op);
  } else if (!bad) {
    CHECK(ctx, rc == DIST_OK, "%s #2 on rank %d: %s: %s", op, me, dist_status_name(rc), e.err.msg);
    for (int i = 0; i < 8 && me > 1; i++)
      CHECK(ctx, out[i] == in[8 * me * (l->kind == DIST_OP_SCATTER) + i], "%s gave %g at %d", op,
            out[i], i);
  }
  float v[8] = {0};
  int64_t t0 = dist__now_ms();
  int num;
  rc = call_until_failure(&e, l->next, in, v, 3, &num);
  snprintf(a, sizeof a, "%s #2 (an earlier call): ", op);
  snprintf(b, sizeof b, "%s #%d not run: %s #2 (an earlier call): rank 1 (host ",
           dist_op_name(l->next), num, op);
  const char *n0[] = {b, pid1, "expected 4 elements (16 bytes) of float32, this rank sent 8 "
                      "elements (32 bytes) of float32", NULL};
  const char *nx[] = {"rank 0 (", pid0, a, "expected 4 elements", NULL};
  if (!bad)
    bad = expect_desync(ctx, &e, rc, me == 0 ? n0 : nx);
  if (!bad)
    bad = expect_prompt(ctx, t0);
  if (!bad) { /* the next: broken */
    rc = all_reduce_n(&e, v, 3);
    CHECK(ctx, rc == DIST_E_DESYNC && strstr(e.err.msg, "unusable"), "#4: %s: %s",
          dist_status_name(rc), e.err.msg);
  }
  shm_t_close(&e);
  return bad;
}

Test(core_shm_fail, a_small_broadcast_reader_that_disagrees_fails_and_the_roots_next_call_fails,
     .timeout = 60) {
  quiet_waits();
  late_case l = {DIST_OP_BROADCAST, DIST_OP_ALL_REDUCE};
  cr_assert_eq(dist_test_ranks(2, rank_late_mismatch, &l, 30), 0, "%s", dist_test_report());
  cr_assert_eq(dist_test_ranks(3, rank_late_mismatch, &l, 30), 0, "%s", dist_test_report());
  l.next = DIST_OP_BROADCAST; /* the root's next call defers its own wait too */
  cr_assert_eq(dist_test_ranks(3, rank_late_mismatch, &l, 30), 0, "%s", dist_test_report());
}

Test(core_shm_fail, a_small_scatter_reader_that_disagrees_fails_and_the_roots_next_call_fails,
     .timeout = 60) {
  quiet_waits();
  late_case l = {DIST_OP_SCATTER, DIST_OP_ALL_REDUCE}; /* 2 ranks: inline; 3: the readers' slots */
  cr_assert_eq(dist_test_ranks(2, rank_late_mismatch, &l, 30), 0, "%s", dist_test_report());
  cr_assert_eq(dist_test_ranks(3, rank_late_mismatch, &l, 30), 0, "%s", dist_test_report());
}

/* Ranks 0 and 2 both think they are the root of a small broadcast: both
 * return at once (rank 1 follows root 0 and gets its data), and both roots'
 * next call fails naming the other. */
static int rank_two_roots(const dist_test_ctx *ctx) {
  shm_t e = {0};
  if (shm_t_open(ctx, &e, false))
    return 1;
  int me = ctx->rank;
  float v[4] = {(float)me, 1, 2, 3};
  dist_tensor t = shm_t_tensor(v, DIST_FLOAT32, 4);
  dist_coll c = {.kind = DIST_OP_BROADCAST, .inputs = &t, .n_inputs = 1, .outputs = &t,
                 .n_outputs = 1, .root = me == 2 ? 2 : 0};
  int rc = shm_t_run(&e, &c); /* #1 */
  CHECK(ctx, rc == DIST_OK && v[0] == (float)c.root, "#1: %s: %s (v[0] = %g)",
        dist_status_name(rc), e.err.msg, v[0]);
  int64_t t0 = dist__now_ms();
  rc = all_reduce_n(&e, v, 4); /* #2 */
  const char *roots[] = {"ALL_REDUCE #2 not run: BROADCAST #1 (an earlier call): rank ",
                         "used root rank", "while this rank (root rank", NULL};
  const char *other[] = {"BROADCAST #1 (an earlier call)", "used root rank", NULL};
  int bad = expect_desync(ctx, &e, rc, me == 1 ? other : roots);
  if (!bad)
    bad = expect_prompt(ctx, t0);
  shm_t_close(&e);
  return bad;
}

Test(core_shm_fail, two_ranks_that_both_root_a_small_broadcast_fail_their_next_call,
     .timeout = 60) {
  quiet_waits();
  cr_assert_eq(dist_test_ranks(3, rank_two_roots, NULL, 30), 0, "%s", dist_test_report());
}

/* Two ranks broadcast from rank 0 three times, then rank 1 broadcasts as
 * its own root: each returns at once, and their next call finds it out.
 * One against one, no majority: rank 0's root is the one its broadcasts
 * always had, rank 1's is new to it, so rank 1 is the one marked (the
 * verdict's culprit), on both ranks. */
static int rank_self_root(const dist_test_ctx *ctx) {
  shm_t e = {0};
  if (shm_t_open(ctx, &e, false))
    return 1;
  int me = ctx->rank, rc = DIST_OK;
  float v[4] = {0};
  dist_tensor t = shm_t_tensor(v, DIST_FLOAT32, 4);
  dist_coll c = {.kind = DIST_OP_BROADCAST, .inputs = &t, .n_inputs = 1, .outputs = &t,
                 .n_outputs = 1, .root = 0};
  for (int i = 0; i < 3 && rc == DIST_OK; i++) /* #1-#3 */
    rc = shm_t_run(&e, &c);
  CHECK(ctx, rc == DIST_OK, "#1-#3: %s: %s", dist_status_name(rc), e.err.msg);
  c.root = me == 1 ? 1 : 0;
  rc = shm_t_run(&e, &c); /* #4: both return at once */
  CHECK(ctx, rc == DIST_OK, "#4: %s: %s", dist_status_name(rc), e.err.msg);
  rc = all_reduce_n(&e, v, 4); /* #5 */
  const char *want[] = {"BROADCAST #4 (an earlier call)",
                        "\n  rank 1: BROADCAST float32[4] root 1 (16 bytes)  <- root differs",
                        NULL};
  int bad = expect_desync(ctx, &e, rc, want);
  shm_t_close(&e);
  return bad;
}

Test(core_shm_fail, of_two_roots_of_a_small_broadcast_the_one_new_to_its_root_is_marked,
     .timeout = 60) {
  quiet_waits();
  cr_assert_eq(dist_test_ranks(2, rank_self_root, NULL, 30), 0, "%s", dist_test_report());
}

typedef struct gone_reader {
  int world;
  dist_op_kind next; /* the root's next call */
} gone_reader;

/* The last rank SIGKILLs itself instead of calling broadcast #21: the root
 * has returned from it, and its next call (of another kind; or within
 * SHM_DEPTH small broadcasts) reports the lost rank. */
static int rank_reader_dies(const dist_test_ctx *ctx) {
  const gone_reader *d = ctx->arg;
  shm_t e = {0};
  e.timeout_ms = 10000;
  if (shm_t_open(ctx, &e, false))
    return 1;
  int victim = ctx->world - 1, bad = 0;
  for (int i = 0; i < 20 && !bad; i++)
    bad = still_usable(ctx, &e);
  if (bad)
    return 1;
  if (ctx->rank == victim)
    raise(SIGKILL);
  float v[4] = {(float)ctx->rank, 5, 6, 7};
  dist_tensor t = shm_t_tensor(v, DIST_FLOAT32, 4);
  dist_coll c = {.kind = DIST_OP_BROADCAST, .inputs = &t, .n_inputs = 1, .outputs = &t,
                 .n_outputs = 1, .root = 0};
  int rc = shm_t_run(&e, &c); /* #21: the root does not wait, nor does rank 1 */
  CHECK(ctx, rc == DIST_OK && v[0] == 0.0f, "#21: %s: %s", dist_status_name(rc), e.err.msg);
  int64_t t0 = dist__now_ms();
  for (int i = 0; i < SHM_DEPTH && rc == DIST_OK; i++) { /* #22 ... */
    rc = d->next == DIST_OP_BROADCAST ? shm_t_run(&e, &c) : all_reduce_n(&e, v, 4);
    CHECK(ctx, rc != DIST_OK || d->next == DIST_OP_BROADCAST, "#22: the all_reduce returned");
  }
  char pid[32];
  snprintf(pid, sizeof pid, "pid %d", (int)e.g.peers[victim].pid);
  CHECK(ctx, rc == DIST_E_PEER_LOST, "#22: expected DIST_E_PEER_LOST, got %s: %s",
        dist_status_name(rc), e.err.msg);
  char who[32];
  snprintf(who, sizeof who, "rank %d (", victim);
  CHECK(ctx, strstr(e.err.msg, who) && strstr(e.err.msg, pid), "#22 does not name %s%s: %s", who,
        pid, e.err.msg);
  CHECK(ctx, ctx->rank != 0 || strstr(e.err.msg, "BROADCAST #21 (an earlier call"),
        "#22 does not name the broadcast the lost rank never reached: %s", e.err.msg);
  CHECK(ctx, dist__now_ms() - t0 < 3000, "noticed the death after %lld ms",
        (long long)(dist__now_ms() - t0));
  rc = all_reduce_n(&e, v, 4);
  CHECK(ctx, rc == DIST_E_PEER_LOST && strstr(e.err.msg, "unusable"), "#23: %s: %s",
        dist_status_name(rc), e.err.msg);
  shm_t_close(&e);
  return 0;
}

static void reader_dies(int world, dist_op_kind next) {
  gone_reader d = {world, next};
  dist_test_opts o = {world, rank_reader_dies, &d, 40, world - 1, 1000000}; /* it kills itself */
  dist_test_result r;
  cr_assert_eq(dist_test_run(&o, &r), 0, "%s", r.report);
  cr_assert_eq(r.signal[world - 1], SIGKILL, "%s", r.report);
}

Test(core_shm_fail, a_reader_lost_after_the_root_returned_is_reported_by_the_roots_next_call,
     .timeout = 90) {
  quiet_waits();
  reader_dies(2, DIST_OP_ALL_REDUCE);
  reader_dies(3, DIST_OP_BROADCAST);
}

/* Readiness between ranks of these tests (their store is a file, so the
 * harness's port pipe is free): a rank that must stay out of the way until
 * the others have checked what they wanted blocks on the pipe; each of the
 * others writes one byte when done. No sleep decides anything. */
static void release(const dist_test_ctx *ctx) {
  ssize_t w = write(ctx->port_pipe[1], "r", 1);
  (void)w;
}

static void wait_released(const dist_test_ctx *ctx, int n) {
  char b;
  for (int i = 0; i < n; i++)
    if (read(ctx->port_pipe[0], &b, 1) != 1)
      return;
}

/* Rank 1 never calls broadcast #1: the root returns from it while rank 1
 * is blocked on the pipe (so without waiting for it), and its next call
 * times out naming rank 1 and the broadcast it missed. */
static int rank_reader_late(const dist_test_ctx *ctx) {
  shm_t e = {0};
  if (shm_t_open(ctx, &e, false))
    return 1;
  if (ctx->rank == 1) {
    wait_released(ctx, 1);
    shm_t_close(&e);
    return 0;
  }
  float v[2] = {1, 2};
  dist_tensor t = shm_t_tensor(v, DIST_FLOAT32, 2);
  dist_coll c = {.kind = DIST_OP_BROADCAST, .inputs = &t, .n_inputs = 1, .outputs = &t,
                 .n_outputs = 1, .root = 0};
  int rc = shm_t_run(&e, &c);
  CHECK(ctx, rc == DIST_OK, "#1: %s: %s", dist_status_name(rc), e.err.msg);
  dist_coll b = {.kind = DIST_OP_BARRIER, .root = -1};
  int64_t t0 = dist__now_ms();
  rc = shm_t_run_for(&e, &b, 400);
  int64_t took = dist__now_ms() - t0;
  CHECK(ctx, rc == DIST_E_TIMEOUT, "expected DIST_E_TIMEOUT, got %s: %s", dist_status_name(rc),
        e.err.msg);
  CHECK(ctx, strstr(e.err.msg, "BARRIER #2 timed out") && strstr(e.err.msg, "rank 1 (") &&
                 strstr(e.err.msg, "has not arrived at BROADCAST #1 (an earlier call"),
        "message: %s", e.err.msg);
  CHECK(ctx, took >= 350 && took < 10000, "timed out after %lld ms (deadline 400)",
        (long long)took);
  release(ctx);
  shm_t_close(&e);
  return 0;
}

Test(core_shm_fail, a_reader_that_never_arrives_times_out_the_roots_next_call, .timeout = 60) {
  quiet_waits();
  cr_assert_eq(dist_test_ranks(2, rank_reader_late, NULL, 30), 0, "%s", dist_test_report());
}

/* --- lost peers, timeouts, aborts ------------------------------------------ */

typedef struct death {
  int64_t n;        /* elements per operation */
  int self_kill_at; /* iteration at which rank 2 SIGKILLs itself, -1: none */
  bool gather;      /* all_gather (single-copy sizes) instead of all_reduce */
  bool bcast;       /* broadcasts from rotating roots instead */
} death;

static int death_op(shm_t *e, const death *d, float *buf, float *out) {
  if (d->bcast) { /* small: the root does not wait, the readers wait for it alone */
    dist_tensor t = shm_t_tensor(buf, DIST_FLOAT32, d->n);
    dist_coll c = {.kind = DIST_OP_BROADCAST, .inputs = &t, .n_inputs = 1, .outputs = &t,
                   .n_outputs = 1, .root = (int)(e->seq % 3)};
    return shm_t_run(e, &c);
  }
  if (!d->gather)
    return all_reduce_n(e, buf, d->n);
  dist_tensor ti = shm_t_tensor(buf, DIST_FLOAT32, d->n);
  dist_tensor to = shm_t_tensor(out, DIST_FLOAT32, d->n * 3);
  dist_coll c = {.kind = DIST_OP_ALL_GATHER_INTO_TENSOR, .inputs = &ti, .n_inputs = 1,
                 .outputs = &to, .n_outputs = 1, .root = -1};
  return shm_t_run(e, &c);
}

static int rank_death(const dist_test_ctx *ctx) {
  const death *d = ctx->arg;
  shm_t e = {0};
  e.timeout_ms = 10000;
  if (shm_t_open(ctx, &e, false))
    return 1;
  float *buf = calloc((size_t)d->n, sizeof *buf), *out = calloc((size_t)d->n * 3, sizeof *out);
  pid_t victim = e.g.peers[2].pid;
  int64_t last_ok = dist__now_ms();
  for (int it = 0; it < 1000000; it++) {
    if (ctx->rank == 2 && it == d->self_kill_at)
      raise(SIGKILL);
    int rc = death_op(&e, d, buf, out);
    if (rc == DIST_OK) {
      last_ok = dist__now_ms();
      continue;
    }
    int64_t late = dist__now_ms() - last_ok;
    char pid[32];
    snprintf(pid, sizeof pid, "pid %d", (int)victim);
    CHECK(ctx, rc == DIST_E_PEER_LOST, "expected DIST_E_PEER_LOST, got %s: %s",
          dist_status_name(rc), e.err.msg);
    CHECK(ctx, strstr(e.err.msg, "rank 2 (") && strstr(e.err.msg, pid),
          "message does not name rank 2 (%s): %s", pid, e.err.msg);
    CHECK(ctx, late < 3000, "noticed the death %lld ms after the last success", (long long)late);
    rc = death_op(&e, d, buf, out); /* broken from now on, at once */
    CHECK(ctx, rc == DIST_E_PEER_LOST && strstr(e.err.msg, "unusable"),
          "after the loss: %s: %s", dist_status_name(rc), e.err.msg);
    free(buf);
    free(out);
    shm_t_close(&e);
    return 0;
  }
  return FAIL(ctx, "the loop ended without noticing the death");
}

Test(core_shm_fail, a_rank_that_kills_itself_mid_loop_is_named_as_lost, .timeout = 60) {
  quiet_waits();
  death d = {16, 50, false, false};
  dist_test_opts o = {3, rank_death, &d, 40, 2, 1000000};
  dist_test_result r;
  cr_assert_eq(dist_test_run(&o, &r), 0, "%s", r.report);
  cr_assert_eq(r.signal[2], SIGKILL);
}

Test(core_shm_fail, a_rank_that_kills_itself_in_a_broadcast_loop_is_named_as_lost,
     .timeout = 60) {
  quiet_waits();
  death d = {4, 50, false, true};
  dist_test_opts o = {3, rank_death, &d, 40, 2, 1000000};
  dist_test_result r;
  cr_assert_eq(dist_test_run(&o, &r), 0, "%s", r.report);
  cr_assert_eq(r.signal[2], SIGKILL);
  d.self_kill_at = 51; /* dies right after its own turn as the root */
  cr_assert_eq(dist_test_run(&o, &r), 0, "%s", r.report);
  cr_assert_eq(r.signal[2], SIGKILL);
}

Test(core_shm_fail, a_rank_killed_during_large_transfers_is_named_as_lost, .timeout = 60) {
  quiet_waits();
  death d = {1 << 20, -1, false, false};
  dist_test_opts o = {3, rank_death, &d, 40, 2, 1500};
  dist_test_result r;
  cr_assert_eq(dist_test_run(&o, &r), 0, "%s", r.report);
  cr_assert_eq(r.signal[2], SIGKILL);
}

Test(core_shm_fail, a_rank_killed_during_single_copy_transfers_is_named_as_lost,
     .timeout = 60) {
  quiet_waits();
  death d = {64 << 10, -1, true, false}; /* 256 KiB pieces: read from the peer's memory */
  dist_test_opts o = {3, rank_death, &d, 40, 2, 1500};
  dist_test_result r;
  cr_assert_eq(dist_test_run(&o, &r), 0, "%s", r.report);
  cr_assert_eq(r.signal[2], SIGKILL);
}

/* Single-copy sizes that disagree: caught before anything is read. */
static int rank_gather_mismatch(const dist_test_ctx *ctx) {
  shm_t e = {0};
  if (shm_t_open(ctx, &e, false))
    return 1;
  int64_t n = ctx->rank == 0 ? 32768 : 65536;
  float *in = calloc(65536, sizeof *in), *out = calloc(65536 * 3, sizeof *out);
  dist_tensor ti = shm_t_tensor(in, DIST_FLOAT32, n), to = shm_t_tensor(out, DIST_FLOAT32, n * 3);
  dist_coll c = {.kind = DIST_OP_ALL_GATHER_INTO_TENSOR, .inputs = &ti, .n_inputs = 1,
                 .outputs = &to, .n_outputs = 1};
  int rc = shm_t_run(&e, &c);
  const char *r0[] = {"ALL_GATHER_INTO_TENSOR #1: ranks disagree on the count",
                      "rank 0: ALL_GATHER_INTO_TENSOR float32[32768] (131072 bytes)",
                      "rank 1: ALL_GATHER_INTO_TENSOR float32[65536] (262144 bytes)", NULL};
  const char *const *rx = r0;
  int bad = expect_desync(ctx, &e, rc, ctx->rank == 0 ? r0 : rx);
  if (!bad)
    bad = still_usable(ctx, &e);
  free(in);
  free(out);
  shm_t_close(&e);
  return bad;
}

Test(core_shm_fail, single_copy_sizes_that_differ_fail_every_rank, .timeout = 60) {
  quiet_waits();
  cr_assert_eq(dist_test_ranks(3, rank_gather_mismatch, NULL, 30), 0, "%s", dist_test_report());
}

/* Rank 2 never calls; the others time out naming it. */
static int rank_timeout(const dist_test_ctx *ctx) {
  shm_t e = {0};
  if (shm_t_open(ctx, &e, false))
    return 1;
  if (ctx->rank == 2) {
    wait_released(ctx, 2); /* until ranks 0 and 1 have timed out */
    shm_t_close(&e);
    return 0;
  }
  float v[2] = {0};
  dist_tensor t = shm_t_tensor(v, DIST_FLOAT32, 2);
  dist_coll c = {.kind = DIST_OP_ALL_REDUCE, .inputs = &t, .n_inputs = 1, .outputs = &t,
                 .n_outputs = 1, .redop = DIST_SUM};
  int64_t t0 = dist__now_ms();
  int rc = shm_t_run_for(&e, &c, 400);
  int64_t took = dist__now_ms() - t0;
  CHECK(ctx, rc == DIST_E_TIMEOUT, "expected DIST_E_TIMEOUT, got %s: %s", dist_status_name(rc),
        e.err.msg);
  CHECK(ctx, strstr(e.err.msg, "rank 2 (") && strstr(e.err.msg, "has not arrived") &&
                 strstr(e.err.msg, "ALL_REDUCE #1"),
        "message: %s", e.err.msg);
  CHECK(ctx, took >= 350 && took < 10000, "timed out after %lld ms (deadline 400)",
        (long long)took);
  rc = shm_t_run(&e, &c);
  CHECK(ctx, rc == DIST_E_TIMEOUT, "after a timeout the group is broken: %s", dist_status_name(rc));
  release(ctx);
  shm_t_close(&e);
  return 0;
}

Test(core_shm_fail, a_rank_that_never_arrives_is_named_in_the_timeout, .timeout = 60) {
  quiet_waits();
  cr_assert_eq(dist_test_ranks(3, rank_timeout, NULL, 30), 0, "%s", dist_test_report());
}

/* Rank 1 is stopped (SIGSTOP by a helper) while both loop over large
 * all_reduces: rank 0 times out naming it, whether it stopped between
 * operations or in the middle of one. */
static int rank_stopped(const dist_test_ctx *ctx) {
  shm_t e = {0};
  if (shm_t_open(ctx, &e, false))
    return 1;
  if (ctx->rank == 1 && fork() == 0) { /* the helper: stop the parent, later end it */
    usleep(300 * 1000); /* a few operations in: where it stops is meant to vary */
    kill(getppid(), SIGSTOP);
    wait_released(ctx, 1); /* rank 0 has timed out on it */
    kill(getppid(), SIGKILL);
    _exit(0);
  }
  size_t n = 1 << 20;
  float *buf = calloc(n, sizeof *buf);
  for (;;) {
    dist_tensor t = shm_t_tensor(buf, DIST_FLOAT32, (int64_t)n);
    dist_coll c = {.kind = DIST_OP_ALL_REDUCE, .inputs = &t, .n_inputs = 1, .outputs = &t,
                   .n_outputs = 1, .redop = DIST_SUM};
    int rc = shm_t_run_for(&e, &c, 500);
    if (rc == DIST_OK)
      continue;
    CHECK(ctx, rc == DIST_E_TIMEOUT, "expected DIST_E_TIMEOUT, got %s: %s", dist_status_name(rc),
          e.err.msg);
    CHECK(ctx, strstr(e.err.msg, "rank 1 (") &&
                   (strstr(e.err.msg, "has not arrived") || strstr(e.err.msg, "stopped before step")),
          "message: %s", e.err.msg);
    release(ctx);
    free(buf);
    shm_t_close(&e);
    return 0;
  }
}

Test(core_shm_fail, a_rank_stopped_mid_operation_is_named_in_the_timeout, .timeout = 60) {
  quiet_waits();
  dist_test_opts o = {2, rank_stopped, NULL, 30, 1, 1000000}; /* rank 1 ends by SIGKILL */
  dist_test_result r;
  cr_assert_eq(dist_test_run(&o, &r), 0, "%s", r.report);
}

typedef struct aborter {
  shm_t *e;
  int delay_ms;
} aborter;

static void *abort_later(void *arg) {
  aborter *a = arg;
  usleep((useconds_t)a->delay_ms * 1000);
  snprintf(a->e->g.abort_reason, sizeof a->e->g.abort_reason, "test abort");
  atomic_store(&a->e->g.aborted, 1);
  dist__shm_wake_all(a->e->shm);
  return NULL;
}

/* Rank 0 waits (asleep on the futex by then) for rank 1, which does not
 * come; another thread of rank 0 aborts after 300 ms. Rank 1, once rank 0
 * has aborted (it says so on the pipe), waits in a collective rank 0 will
 * never join: rank 0's published abort ends it. Both end well before
 * their 10 s timeouts. (A rank that is merely late is not failed by a
 * peer's abort unless it has to wait for that peer.) */
static int rank_abort(const dist_test_ctx *ctx) {
  shm_t e = {0};
  if (shm_t_open(ctx, &e, false))
    return 1;
  float v[2] = {0};
  dist_tensor t = shm_t_tensor(v, DIST_FLOAT32, 2);
  dist_coll c = {.kind = DIST_OP_ALL_REDUCE, .inputs = &t, .n_inputs = 1, .outputs = &t,
                 .n_outputs = 1, .redop = DIST_SUM};
  int64_t t0 = dist__now_ms();
  if (ctx->rank == 0) {
    aborter a = {&e, 300};
    pthread_t th;
    pthread_create(&th, NULL, abort_later, &a);
    int rc = shm_t_run_for(&e, &c, 10000);
    int64_t took = dist__now_ms() - t0;
    pthread_join(th, NULL);
    CHECK(ctx, rc == DIST_E_ABORTED && strstr(e.err.msg, "test abort"), "got %s: %s",
          dist_status_name(rc), e.err.msg);
    release(ctx);
    CHECK(ctx, took < 5000, "the abort took %lld ms to wake the waiter (timeout 10 s)",
          (long long)took - 300);
  } else {
    wait_released(ctx, 1); /* after rank 0's abort */
    /* Rank 0 posted its part of #1 before it was aborted, so #1 may still
     * complete here; #2 cannot. */
    int rc = shm_t_run_for(&e, &c, 10000);
    t0 = dist__now_ms();
    if (rc == DIST_OK)
      rc = shm_t_run_for(&e, &c, 10000);
    int64_t took = dist__now_ms() - t0;
    CHECK(ctx, rc == DIST_E_ABORTED && strstr(e.err.msg, "rank 0 (") &&
                   strstr(e.err.msg, "test abort"),
          "got %s: %s", dist_status_name(rc), e.err.msg);
    CHECK(ctx, took < 5000, "noticed the peer's abort after %lld ms (timeout 10 s)",
          (long long)took);
  }
  shm_t_close(&e);
  return 0;
}

Test(core_shm_fail, an_abort_from_another_thread_wakes_a_sleeping_waiter_at_once, .timeout = 60) {
  quiet_waits();
  cr_assert_eq(dist_test_ranks(2, rank_abort, NULL, 30), 0, "%s", dist_test_report());
}

/* --- lifetime ------------------------------------------------------------- */

/* Entries of /dev/shm made for this test process's job. */
static int leftover_segments(void) {
  char prefix[64];
  snprintf(prefix, sizeof prefix, "dist.test%d.", (int)getppid());
  DIR *d = opendir("/dev/shm");
  int n = 0;
  for (struct dirent *de; d && (de = readdir(d));)
    n += strncmp(de->d_name, prefix, strlen(prefix)) == 0;
  if (d)
    closedir(d);
  return n;
}

static int rank_fork(const dist_test_ctx *ctx) {
  shm_t e = {0};
  if (shm_t_open(ctx, &e, false))
    return 1;
  CHECK(ctx, leftover_segments() == 0, "the segment is still in /dev/shm after create");
  int bad = still_usable(ctx, &e);
  pid_t kid = fork(); /* a worker: never touches the engine, but uses the library */
  if (kid == 0) {
    /* It logs, uses a store of its own and leaves through exit(), so the
     * library's exit-time code runs in a copy of the parent's state: none
     * of it may reach the parent's segment or threads. */
    dist_log(DIST_LOG_WARNING, DIST_SUBSYS_CORE, "forked worker of rank %d", ctx->rank);
    dist_store *s = NULL;
    int64_t v = 0;
    int ok = dist_store_hash_create(&s) == DIST_OK && dist_store_add(s, "k", 5, &v) == DIST_OK &&
             v == 5;
    dist_store_destroy(s);
    exit(ok ? 0 : 3);
  }
  for (int i = 0; i < 50 && !bad; i++)
    bad = still_usable(ctx, &e);
  int st;
  waitpid(kid, &st, 0);
  CHECK(ctx, WIFEXITED(st) && WEXITSTATUS(st) == 0, "the forked worker failed (status %d)", st);
  for (int i = 0; i < 50 && !bad; i++)
    bad = still_usable(ctx, &e);
  shm_t_close(&e);
  return bad;
}

Test(core_shm_fail, survives_a_fork_after_init_and_leaves_nothing_in_dev_shm, .timeout = 60) {
  quiet_waits();
  cr_assert_eq(dist_test_ranks(3, rank_fork, NULL, 30), 0, "%s", dist_test_report());
}

/* A rank that cannot map the segment fails create on every rank. */
static int rank_bad_name(const dist_test_ctx *ctx) {
  shm_t e = {0};
  if (dist_test_file_store(ctx, &e.store) != DIST_OK || shm_t_group(ctx, &e) != DIST_OK)
    return FAIL(ctx, "setup");
  dist__err_clear(&e.err);
  dist__shm *s = NULL;
  if (ctx->rank == 0) { /* rank 0 pretends: fails both rounds with a reason */
    const char *keys[] = {"shm/name0", "shm/ok0/0", "shm/name1", "shm/ok1/0"};
    const char *vals[] = {"!rank 0 test failure", "rank 0 test failure",
                          "!rank 0 test failure", "rank 0 test failure"};
    for (int i = 0; i < 4; i++)
      dist_store_set(e.store, keys[i], vals[i], strlen(vals[i]));
  }
  if (ctx->rank != 0) {
    int rc = dist__shm_create(&e.g, e.store, dist__now_ms() + 5000, &s, &e.err);
    CHECK(ctx, rc != DIST_OK && strstr(e.err.msg, "rank 0 test failure"), "create: %s: %s",
          dist_status_name(rc), e.err.msg);
    CHECK(ctx, s == NULL, "no engine on failure");
  }
  dist_store_destroy(e.store);
  free(e.g.peers);
  free(e.g.global_ranks);
  return 0;
}

Test(core_shm_fail, a_segment_rank_0_could_not_make_fails_create_with_its_reason, .timeout = 60) {
  cr_assert_eq(dist_test_ranks(3, rank_bad_name, NULL, 30), 0, "%s", dist_test_report());
}

/* Without memfd segments every rank agrees on the named fallback, which
 * leaves nothing in /dev/shm once created. */
Test(core_shm_fail, the_named_segment_fallback_works_and_is_unlinked, .timeout = 60) {
  quiet_waits();
  setenv("DIST_SHM_MEMFD", "0", 1);
  cr_assert_eq(dist_test_ranks(3, rank_fork, NULL, 30), 0, "%s", dist_test_report());
}
