/* ctest: labels=multiproc timeout=300 */
/* Collectives that disagree between ranks are caught before they run, on
 * every rank, with one report: shapes, dtypes of equal size, operations,
 * reduce ops, roots, all_to_all_single splits, reduce_scatter counts, the
 * entry of an all_gather's or reduce_scatter's list of another size (and
 * of a pair, the rank whose call changed since its last from the site); the
 * buffers are untouched, the call sites are this file's lines, and the
 * group keeps working for calls that agree. Real forked ranks at DETAIL. */
#include <criterion/criterion.h>

#include <dist/observer.h>

#include "api/api.h" /* dist__cause_parse_info */
#include "wpg_test.h"

#define ME "test_desync_mp.c"

/* The report on every rank: DIST_E_DESYNC, the header, the marked line. */
static int expect_report(const dist_test_ctx *ctx, int rc, const char *header,
                         const char *marked_prefix, const char *marked_has, const char *marker) {
  const char *msg = dist_pg_errmsg(NULL);
  CHECK(ctx, rc == DIST_E_DESYNC, "rc %s, want DIST_E_DESYNC: %s", dist_status_name(rc), msg);
  CHECK(ctx, !strncmp(msg, header, strlen(header)), "header: want '%s' in\n%s", header, msg);
  char line[512];
  CHECK(ctx, wpg_line(msg, marked_prefix, line, sizeof line), "no line '%s' in\n%s",
        marked_prefix, msg);
  CHECK(ctx, strstr(line, marked_has) && strstr(line, marker), "line '%s' lacks '%s' / '%s'",
        line, marked_has, marker);
  return wpg_same_everywhere(ctx, msg);
}

/* --- shape --------------------------------------------------------------- */

static int shape_rank(const dist_test_ctx *ctx) {
  CHECK_OK(ctx, wpg_test_init(ctx));
  float v[8] = {1, 1, 1, 1, 1, 1, 1, 1};
  dist_tensor t = dist_tensor_1d(v, DIST_FLOAT32, ctx->rank == 1 ? 8 : 4);
  int line = __LINE__ + 1;
  int rc = dist_all_reduce(&t, DIST_SUM, NULL, NULL);
  if (expect_report(ctx, rc,
                    "desync in group 0 (default, 2 ranks) at ALL_REDUCE #1: ranks disagree on "
                    "the count\n",
                    "  rank 1: ", "ALL_REDUCE float32[8] op=SUM (32 bytes)", "<- count differs"))
    return 1;
  char site[128], buf[512];
  snprintf(site, sizeof site, "  called from " ME ":%d in shape_rank() (ranks 0-1)", line);
  CHECK(ctx, wpg_line(dist_pg_errmsg(NULL), "  rank 0: ", buf, sizeof buf) &&
                 !strcmp(buf, "  rank 0: ALL_REDUCE float32[4] op=SUM (16 bytes)"),
        "rank 0's line:\n%s", dist_pg_errmsg(NULL));
  CHECK(ctx, wpg_line(dist_pg_errmsg(NULL), site, buf, sizeof buf), "want '%s' in\n%s", site,
        dist_pg_errmsg(NULL));
  for (int i = 0; i < 8; i++)
    CHECK(ctx, v[i] == 1, "buffer touched: v[%d] = %g", i, v[i]);
  /* [4] vs [2,2]: same count, different shape. */
  dist_tensor u = dist_tensor_1d(v, DIST_FLOAT32, 4);
  if (ctx->rank == 1) {
    u.ndim = 2;
    u.shape[0] = u.shape[1] = 2;
  }
  rc = dist_all_reduce(&u, DIST_SUM, NULL, NULL);
  CHECK(ctx, rc == DIST_E_DESYNC && strstr(dist_pg_errmsg(NULL), "float32[2, 2]") &&
                 strstr(dist_pg_errmsg(NULL), "<- shape differs"),
        "[4] vs [2,2]: %s", dist_pg_errmsg(NULL));
  /* Calls that agree still run, and compute the right thing. */
  CHECK_OK(ctx, dist_all_reduce(&t, DIST_SUM, NULL, NULL) == DIST_E_DESYNC ? DIST_OK : 1);
  t = dist_tensor_1d(v, DIST_FLOAT32, 4);
  CHECK_OK(ctx, dist_all_reduce(&t, DIST_SUM, NULL, NULL));
  CHECK(ctx, v[0] == 2 && v[3] == 2, "sum after the desync: %g", v[0]);
  dist_test_finish();
  return 0;
}

Test(wrapper_pg_desync, shape_differs_on_both_ranks, .timeout = 60) {
  cr_assert_eq(dist_test_ranks(2, shape_rank, NULL, 50), 0, "%s", dist_test_report());
}

/* --- a pair's tie, broken by each rank's own last call from the site ------- */

/* A loop's all_reduce from one site agrees three times; in the fourth,
 * rank `arg` passes 5 floats. Of two ranks nothing else tells the odd one:
 * its call changed since its last from the same site, its partner's did
 * not. Rank 0 too, which the lowest-rank rule used to keep unmarked. */
static int changed_rank(const dist_test_ctx *ctx) {
  CHECK_OK(ctx, wpg_test_init(ctx));
  int odd = *(const int *)ctx->arg, rc = DIST_OK;
  float v[8] = {0};
  for (int i = 0; i < 4 && rc == DIST_OK; i++) {
    dist_tensor t = dist_tensor_1d(v, DIST_FLOAT32, i == 3 && ctx->rank == odd ? 5 : 4);
    rc = dist_all_reduce(&t, DIST_SUM, NULL, NULL);
  }
  char marked[32];
  snprintf(marked, sizeof marked, "  rank %d: ", odd);
  if (expect_report(ctx, rc,
                    "desync in group 0 (default, 2 ranks) at ALL_REDUCE #4: ranks disagree on "
                    "the count\n",
                    marked, "ALL_REDUCE float32[5] op=SUM (20 bytes)", "<- count differs"))
    return 1;
  char other[32], line[512];
  snprintf(other, sizeof other, "  rank %d: ", 1 - odd);
  CHECK(ctx, wpg_line(dist_pg_errmsg(NULL), other, line, sizeof line) && !strstr(line, "<-"),
        "rank %d's line is marked too:\n%s", 1 - odd, dist_pg_errmsg(NULL));
  dist_test_finish();
  return 0;
}

Test(wrapper_pg_desync, of_a_pair_the_rank_whose_call_changed_is_marked, .timeout = 90) {
  for (int odd = 0; odd < 2; odd++)
    cr_assert_eq(dist_test_ranks(2, changed_rank, &odd, 50), 0, "odd rank %d: %s", odd,
                 dist_test_report());
}

/* A loop of one all_reduce per step, from one line; in step 2 rank `arg`
 * takes another branch, which reduces with MAX. Its partner's call repeats
 * the site of the last agreed call, as a rank that skipped the call
 * between would in a loop whose calls alternate; but a branch never taken
 * is the stronger sign: the rank on it is marked, rank 0 as well as 1. */
static int branch_rank(const dist_test_ctx *ctx) {
  CHECK_OK(ctx, wpg_test_init(ctx));
  int odd = *(const int *)ctx->arg, rc = DIST_OK;
  float v[4] = {0};
  dist_tensor t = dist_tensor_1d(v, DIST_FLOAT32, 4);
  volatile int steps = 3; /* a loop the compiler cannot unroll: one site per call */
  for (int step = 0; step < steps && rc == DIST_OK; step++) {
    if (step == 2 && ctx->rank == odd)
      rc = dist_all_reduce(&t, DIST_MAX, NULL, NULL);
    else
      rc = dist_all_reduce(&t, DIST_SUM, NULL, NULL);
  }
  char marked[32];
  snprintf(marked, sizeof marked, "  rank %d: ", odd);
  if (expect_report(ctx, rc,
                    "desync in group 0 (default, 2 ranks) at ALL_REDUCE #3: ranks disagree on "
                    "the reduce op\n",
                    marked, "ALL_REDUCE float32[4] op=MAX (16 bytes)", "<- reduce op differs"))
    return 1;
  dist_test_finish();
  return 0;
}

Test(wrapper_pg_desync, of_a_pair_in_a_loop_of_one_call_the_rank_on_a_new_branch_is_marked,
     .timeout = 90) {
  for (int odd = 0; odd < 2; odd++)
    cr_assert_eq(dist_test_ranks(2, branch_rank, &odd, 50), 0, "odd rank %d: %s", odd,
                 dist_test_report());
}

/* --- dtypes of equal size, asynchronously: no work handle ---------------- */

/* The report reaches the observers once, as DIST_EV_DESYNC_REPORT. */
static int n_reports;
static char last_report[4096];

static int obs_init(void **ctx, const dist_pg_info *i) {
  (void)i;
  *ctx = NULL;
  return DIST_OK;
}

static void obs_event(void *ctx, const dist_event *ev) {
  (void)ctx;
  if (ev->kind != DIST_EV_DESYNC_REPORT || !ev->message)
    return;
  n_reports++;
  snprintf(last_report, sizeof last_report, "%s", ev->message);
}

static const dist_observer report_observer = {
    .abi_version = DIST_OBSERVER_ABI_VERSION, .name = "reports",
    .event_mask = DIST_EV_BIT(DIST_EV_DESYNC_REPORT), .init = obs_init, .on_event = obs_event,
};

static int dtype_rank(const dist_test_ctx *ctx) {
  CHECK_OK(ctx, dist_observer_register(&report_observer));
  CHECK_OK(ctx, wpg_test_init(ctx));
  int32_t v[4] = {7, 7, 7, 7};
  dist_tensor t = dist_tensor_1d(v, ctx->rank == 2 ? DIST_INT32 : DIST_FLOAT32, 4);
  dist_work *w = NULL;
  /* The check of an async call runs asynchronously (wrapper_pg.h): the call
   * returns a work at once and the report arrives on its wait. */
  CHECK_OK(ctx, dist_all_reduce(&t, DIST_SUM, NULL, &w));
  CHECK(ctx, w != NULL, "an async call returned no work");
  int rc = dist_work_wait(w, 30000);
  CHECK(ctx, rc == DIST_E_DESYNC && dist_work_status(w) == DIST_E_DESYNC,
        "wait %s, status %s: %s", dist_status_name(rc), dist_status_name(dist_work_status(w)),
        dist_work_errmsg(w));
  const char *msg = dist_work_errmsg(w);
  const char *header = "desync in group 0 (default, 3 ranks) at ALL_REDUCE #1: ranks disagree "
                       "on the dtype\n";
  char buf[512];
  CHECK(ctx, !strncmp(msg, header, strlen(header)), "header:\n%s", msg);
  CHECK(ctx, wpg_line(msg, "  rank 2: ", buf, sizeof buf) &&
                 strstr(buf, "ALL_REDUCE int32[4] op=SUM") && strstr(buf, "<- dtype differs"),
        "minority line:\n%s", msg);
  CHECK(ctx, wpg_line(msg, "  ranks 0-1: ", buf, sizeof buf) && strstr(buf, "float32[4]"),
        "majority line:\n%s", msg);
  CHECK(ctx, strstr(msg, "called from") && strstr(msg, ME ":"), "call sites:\n%s", msg);
  CHECK(ctx, v[0] == 7 && v[3] == 7, "buffer touched");
  CHECK(ctx, n_reports == 1 && !strcmp(last_report, msg), "%d DESYNC_REPORT events; last:\n%s",
        n_reports, last_report);
  if (wpg_same_everywhere(ctx, msg))
    return 1;
  dist_work_free(w);
  /* The group goes on: a call that agrees, sync after async. */
  dist_tensor f = dist_tensor_1d(v, DIST_INT32, 4);
  CHECK_OK(ctx, dist_all_reduce(&f, DIST_SUM, NULL, NULL));
  CHECK(ctx, v[0] == 21, "v[0] = %d after the agreed all_reduce", v[0]);
  dist_test_finish();
  return 0;
}

Test(wrapper_pg_desync, dtype_differs_async_call_fails_on_wait, .timeout = 60) {
  cr_assert_eq(dist_test_ranks(3, dtype_rank, NULL, 50), 0, "%s", dist_test_report());
}

/* --- operations ---------------------------------------------------------- */

static int op_rank(const dist_test_ctx *ctx) {
  CHECK_OK(ctx, wpg_test_init(ctx));
  float v[4] = {0};
  dist_tensor t = dist_tensor_1d(v, DIST_FLOAT32, 4);
  int rc = ctx->rank == 1 ? dist_broadcast(&t, 0, NULL, NULL)
                          : dist_all_reduce(&t, DIST_SUM, NULL, NULL);
  if (expect_report(ctx, rc,
                    "desync in group 0 (default, 3 ranks) at ALL_REDUCE #1: ranks disagree on "
                    "the operation\n",
                    "  rank 1: ", "BROADCAST float32[4] root 0 (16 bytes)",
                    "<- operation differs"))
    return 1;
  dist_test_finish();
  return 0;
}

Test(wrapper_pg_desync, operation_differs, .timeout = 60) {
  cr_assert_eq(dist_test_ranks(3, op_rank, NULL, 50), 0, "%s", dist_test_report());
}

/* --- reduce ops ---------------------------------------------------------- */

static int redop_rank(const dist_test_ctx *ctx) {
  CHECK_OK(ctx, wpg_test_init(ctx));
  float v[4] = {0};
  dist_tensor t = dist_tensor_1d(v, DIST_FLOAT32, 4);
  CHECK_OK(ctx, dist_all_reduce(&t, DIST_SUM, NULL, NULL)); /* #1 agrees */
  int rc = dist_all_reduce(&t, ctx->rank == 3 ? DIST_MAX : DIST_SUM, NULL, NULL);
  if (expect_report(ctx, rc,
                    "desync in group 0 (default, 4 ranks) at ALL_REDUCE #2: ranks disagree on "
                    "the reduce op\n",
                    "  rank 3: ", "op=MAX", "<- reduce op differs"))
    return 1;
  char buf[512];
  CHECK(ctx, wpg_line(dist_pg_errmsg(NULL), "  ranks 0-2: ", buf, sizeof buf) &&
                 strstr(buf, "op=SUM") && !strstr(buf, "<-"),
        "majority line:\n%s", dist_pg_errmsg(NULL));
  dist_test_finish();
  return 0;
}

Test(wrapper_pg_desync, reduce_op_differs_in_the_minority, .timeout = 60) {
  cr_assert_eq(dist_test_ranks(4, redop_rank, NULL, 50), 0, "%s", dist_test_report());
}

/* PREMUL_SUM everywhere, rank 2 scaling by 0.5 where the others scale by
 * 1: the same kind of op with another scalar is a reduce op that differs,
 * caught before the operation runs (the backend caught it only at OFF, or
 * on an async call's work, with no culprit posted). */
static int premul_rank(const dist_test_ctx *ctx) {
  CHECK_OK(ctx, wpg_test_init(ctx));
  float v[4] = {0};
  dist_tensor t = dist_tensor_1d(v, DIST_FLOAT32, 4);
  int rc = dist_all_reduce(&t, dist_premul_sum(ctx->rank == 2 ? 0.5 : 1.0), NULL, NULL);
  if (expect_report(ctx, rc,
                    "desync in group 0 (default, 3 ranks) at ALL_REDUCE #1: ranks disagree on "
                    "the reduce op\n",
                    "  rank 2: ", "op=PREMUL_SUM(0.5)", "<- reduce op differs"))
    return 1;
  char buf[512]; /* the checking layer's report: the majority on one line, with the line */
  CHECK(ctx, wpg_line(dist_pg_errmsg(NULL), "  ranks 0-1: ", buf, sizeof buf) &&
                 strstr(buf, "op=PREMUL_SUM(1)") && strstr(dist_pg_errmsg(NULL), "called from "),
        "majority line:\n%s", dist_pg_errmsg(NULL));
  dist_test_finish();
  return 0;
}

Test(wrapper_pg_desync, a_premul_sum_scalar_that_differs_is_a_reduce_op_that_differs,
     .timeout = 60) {
  cr_assert_eq(dist_test_ranks(3, premul_rank, NULL, 50), 0, "%s", dist_test_report());
}

/* --- roots, on a subgroup (global ranks with group ranks beside) --------- */

static int root_rank(const dist_test_ctx *ctx) {
  CHECK_OK(ctx, wpg_test_init(ctx));
  int members[3] = {1, 2, 3};
  dist_pg *g;
  CHECK_OK(ctx, dist_new_group(members, 3, NULL, &g));
  if (ctx->rank == 0) { /* not a member: waits for the others */
    dist_test_finish();
    return 0;
  }
  {
    float v[2] = {0};
    dist_tensor t = dist_tensor_1d(v, DIST_FLOAT32, 2);
    int rc = dist_broadcast(&t, ctx->rank == 3 ? 2 : 1, g, NULL);
    const char *msg = dist_pg_errmsg(g);
    char buf[512];
    CHECK(ctx, rc == DIST_E_DESYNC, "rc %s: %s", dist_status_name(rc), msg);
    const char *head = "desync in group 1 (g1, 3 ranks) at BROADCAST #1: ranks disagree on the "
                       "root\n";
    CHECK(ctx, !strncmp(msg, head, strlen(head)), "header:\n%s", msg);
    CHECK(ctx, wpg_line(msg, "  ranks 1-2 (group ranks 0-1): ", buf, sizeof buf) &&
                   strstr(buf, "BROADCAST float32[2] root 1 (8 bytes)") && !strstr(buf, "<-"),
          "majority line:\n%s", msg);
    CHECK(ctx, wpg_line(msg, "  rank 3 (group rank 2):       ", buf, sizeof buf) &&
                   strstr(buf, "root 2") && strstr(buf, "<- root differs"),
          "minority line:\n%s", msg);
    CHECK_OK(ctx, dist_barrier(g, NULL)); /* the group still works */
  }
  dist_test_finish();
  return 0;
}

Test(wrapper_pg_desync, broadcast_root_differs_in_a_subgroup, .timeout = 60) {
  cr_assert_eq(dist_test_ranks(4, root_rank, NULL, 50), 0, "%s", dist_test_report());
}

/* --- byte-blob collectives ----------------------------------------------- */

/* broadcast_bytes runs as a size exchange then the data: the report names
 * the user's call, with what it ran as, never only the inner broadcast of
 * an int64; and a blob call against another blob call is "operation". */
static int blob_rank(const dist_test_ctx *ctx) {
  CHECK_OK(ctx, wpg_test_init(ctx));
  char text[] = "config";
  dist_bytes b = {ctx->rank == 0 || ctx->rank == 2 ? text : NULL,
                  ctx->rank == 0 || ctx->rank == 2 ? sizeof text : 0};
  int rc = dist_broadcast_bytes(&b, ctx->rank == 2 ? 2 : 0, NULL);
  const char *msg = dist_pg_errmsg(NULL);
  char buf[512];
  CHECK(ctx, rc == DIST_E_DESYNC, "rc %s: %s", dist_status_name(rc), msg);
  const char *head = "desync in group 0 (default, 3 ranks) at BROADCAST_BYTES #1: ranks "
                     "disagree on the root\n";
  CHECK(ctx, !strncmp(msg, head, strlen(head)), "header:\n%s", msg);
  CHECK(ctx, wpg_line(msg, "  rank 2: ", buf, sizeof buf) &&
                 strstr(buf, "BROADCAST_BYTES (run as BROADCAST int64[1] root 2)") &&
                 strstr(buf, "<- root differs"),
        "minority line:\n%s", msg);
  dist_bytes every[3] = {{0}};
  dist_bytes mine = {text, sizeof text};
  rc = ctx->rank == 1 ? dist_all_gather_bytes(&mine, every, NULL)
                      : dist_broadcast_bytes(&b, 0, NULL);
  msg = dist_pg_errmsg(NULL);
  CHECK(ctx, rc == DIST_E_DESYNC && strstr(msg, "ranks disagree on the operation\n"), "rc %s: %s",
        dist_status_name(rc), msg);
  CHECK(ctx, wpg_line(msg, "  rank 1: ", buf, sizeof buf) &&
                 strstr(buf, "ALL_GATHER_BYTES (run as ALL_GATHER_INTO_TENSOR int64[") &&
                 strstr(buf, "<- operation differs"),
        "minority line:\n%s", msg);
  dist_test_finish();
  return 0;
}

Test(wrapper_pg_desync, a_blob_collective_is_reported_as_the_users_call, .timeout = 60) {
  cr_assert_eq(dist_test_ranks(3, blob_rank, NULL, 50), 0, "%s", dist_test_report());
}

/* --- a list entry of another size ----------------------------------------- */

/* The list forms whose entries may differ in size (api/uneven.c), with one
 * rank whose entry differs from the others': rank 1 runs the call as one
 * broadcast (or reduce) per entry where the others run it in one piece, or
 * every rank runs the pieces. The report names the call, rank 1 and the
 * entry, on every rank and in the job's cause; never a dtype, nor the
 * BROADCAST or REDUCE the call runs as. arg:
 *   "all_gather"      rank 1's outputs[2] has 5 elements, 4 elsewhere
 *   "reduce_scatter"  rank 1's inputs[2] has 5 elements, 4 elsewhere
 *   "uneven"          all_gather of sizes 1, 2, 3 from ranks 0-2 (legal),
 *                     rank 1's outputs[0] has 2 elements */
typedef struct list_case {
  const char *mode, *header, *odd_line, *usual_prefix, *usual_line, *op, *field;
} list_case;

static const list_case list_cases[] = {
    {"all_gather",
     "desync in group 0 (default, 3 ranks) at ALL_GATHER #1: ranks disagree on the size of "
     "output tensors[2]\n",
     "  rank 1:    ALL_GATHER float32[4] x3, output tensors[2] float32[5] (16 bytes)  <- size of "
     "output tensors[2] differs",
     "  ranks 0,2: ", "  ranks 0,2: ALL_GATHER float32[4] x3, output tensors[2] float32[4] "
     "(16 bytes)", "ALL_GATHER", "size of output tensors[2]"},
    {"reduce_scatter",
     "desync in group 0 (default, 3 ranks) at REDUCE_SCATTER #1: ranks disagree on the size of "
     "input tensors[2]\n",
     "  rank 1:    REDUCE_SCATTER float32[4] x3 op=SUM, input tensors[2] float32[5] (16 bytes)  "
     "<- size of input tensors[2] differs",
     "  ranks 0,2: ", "  ranks 0,2: REDUCE_SCATTER float32[4] x3 op=SUM, input tensors[2] "
     "float32[4] (16 bytes)", "REDUCE_SCATTER", "size of input tensors[2]"},
    {"uneven",
     "desync in group 0 (default, 3 ranks) at ALL_GATHER #1: ranks disagree on the size of "
     "output tensors[0]\n",
     "  rank 1: ALL_GATHER float32[2] x3, output tensors[0] float32[2] (8 bytes)  <- size of "
     "output tensors[0] differs",
     "  rank 2: ", "  rank 2: ALL_GATHER float32[3] x3, output tensors[0] float32[1] (12 bytes)",
     "ALL_GATHER", "size of output tensors[0]"},
};

static const list_case *list_case_of(const char *mode) {
  for (size_t i = 0; i < sizeof list_cases / sizeof list_cases[0]; i++)
    if (!strcmp(list_cases[i].mode, mode))
      return &list_cases[i];
  return NULL;
}

static int list_entry_rank(const dist_test_ctx *ctx) {
  const list_case *lc = list_case_of(ctx->arg);
  CHECK(ctx, lc != NULL, "no case %s", (const char *)ctx->arg);
  CHECK_OK(ctx, wpg_test_init(ctx));
  bool uneven = !strcmp(lc->mode, "uneven"), rs = !strcmp(lc->mode, "reduce_scatter");
  int me = ctx->rank, odd = uneven ? 0 : 2;
  float one[4] = {1, 2, 3, 4}, list[3][5] = {{0}};
  dist_tensor t = dist_tensor_1d(one, DIST_FLOAT32, uneven ? me + 1 : 4), l[3];
  for (int i = 0; i < 3; i++)
    l[i] = dist_tensor_1d(list[i], DIST_FLOAT32,
                          me == 1 && i == odd ? (uneven ? 2 : 5) : uneven ? i + 1 : 4);
  int line, rc;
  if (rs) {
    line = __LINE__ + 1;
    rc = dist_reduce_scatter(&t, l, 3, DIST_SUM, NULL, NULL);
  } else {
    line = __LINE__ + 1;
    rc = dist_all_gather(l, 3, &t, NULL, NULL);
  }
  const char *msg = dist_pg_errmsg(NULL);
  char buf[512], site[160];
  CHECK(ctx, rc == DIST_E_DESYNC, "rc %s: %s", dist_status_name(rc), msg);
  CHECK(ctx, !strncmp(msg, lc->header, strlen(lc->header)), "header:\n%s\nwant:\n%s", msg,
        lc->header);
  CHECK(ctx, wpg_line(msg, "  rank 1: ", buf, sizeof buf) && !strcmp(buf, lc->odd_line),
        "rank 1's line:\n%s\nwant:\n%s", msg, lc->odd_line);
  CHECK(ctx, wpg_line(msg, lc->usual_prefix, buf, sizeof buf) && !strcmp(buf, lc->usual_line),
        "the others' line:\n%s\nwant:\n%s", msg, lc->usual_line);
  snprintf(site, sizeof site, "  called from " ME ":%d in list_entry_rank() (ranks 0-2)", line);
  CHECK(ctx, wpg_line(msg, site, buf, sizeof buf), "want '%s' in\n%s", site, msg);
  CHECK(ctx, !strstr(msg, "BROADCAST") && !strstr(msg, "REDUCE ") && !strstr(msg, "dtype"),
        "the pieces' operation, or a dtype, in\n%s", msg);
  if (wpg_same_everywhere(ctx, msg))
    return 1;
  if (me == 0) { /* the store's host: the others may have left */
    void *v = NULL;
    size_t n = 0;
    CHECK_OK(ctx, dist_store_get(dist_get_default_store(), DIST_KEY_CAUSE, &v, &n));
    dist__cause_fields f;
    dist__cause_parse_info(v, n, &f);
    CHECK(ctx, f.n_culprits == 1 && f.culprits[0] == 1 && !strcmp(f.op, lc->op) &&
                   f.seq == 1 && !strcmp(f.field, lc->field),
          "the cause names rank 1 at %s #1, %s: %.*s", lc->op, lc->field, (int)n, (char *)v);
    dist_free(v);
  }
  /* The calls agree again: the group goes on (the inner group never ran it). */
  dist_tensor ok[3];
  for (int i = 0; i < 3; i++)
    ok[i] = dist_tensor_1d(list[i], DIST_FLOAT32, uneven ? i + 1 : 4);
  CHECK_OK(ctx, rs ? dist_reduce_scatter(&t, ok, 3, DIST_SUM, NULL, NULL)
                   : dist_all_gather(ok, 3, &t, NULL, NULL));
  dist_test_finish();
  return 0;
}

Test(wrapper_pg_desync, an_all_gather_list_entry_of_another_size_is_named, .timeout = 60) {
  cr_assert_eq(dist_test_ranks(3, list_entry_rank, "all_gather", 50), 0, "%s",
               dist_test_report());
}

Test(wrapper_pg_desync, a_reduce_scatter_list_entry_of_another_size_is_named, .timeout = 60) {
  cr_assert_eq(dist_test_ranks(3, list_entry_rank, "reduce_scatter", 50), 0, "%s",
               dist_test_report());
}

Test(wrapper_pg_desync, an_entry_of_another_size_among_uneven_sizes_is_named, .timeout = 60) {
  cr_assert_eq(dist_test_ranks(3, list_entry_rank, "uneven", 50), 0, "%s", dist_test_report());
}

/* --- all_to_all_single splits ------------------------------------------- */

static int splits_rank(const dist_test_ctx *ctx) {
  CHECK_OK(ctx, wpg_test_init(ctx));
  int32_t in[3] = {1, 2, 3}, out[3] = {-1, -1, -1};
  dist_tensor ti = dist_tensor_1d(in, DIST_INT32, 3), to = dist_tensor_1d(out, DIST_INT32, 3);
  int64_t even[3] = {1, 1, 1}, odd[3] = {2, 0, 1};
  int rc = dist_all_to_all_single(&to, &ti, even, ctx->rank == 2 ? odd : even, NULL, NULL);
  const char *msg = dist_pg_errmsg(NULL);
  CHECK(ctx, rc == DIST_E_DESYNC, "rc %s: %s", dist_status_name(rc), msg);
  CHECK(ctx, strstr(msg, "at ALL_TO_ALL_SINGLE #1: ranks disagree on the split size\n"),
        "header:\n%s", msg);
  CHECK(ctx, strstr(msg, "  rank 2 sends 2 rows to rank 0, which expects 1  <- split size "
                         "differs\n") &&
                 strstr(msg, "  rank 2 sends 0 rows to rank 1, which expects 1  <- split "
                             "size differs"),
        "split lines:\n%s", msg);
  CHECK(ctx, out[0] == -1 && out[2] == -1, "output touched");
  if (wpg_same_everywhere(ctx, msg))
    return 1;
  dist_test_finish();
  return 0;
}

Test(wrapper_pg_desync, all_to_all_single_splits_differ, .timeout = 60) {
  cr_assert_eq(dist_test_ranks(3, splits_rank, NULL, 50), 0, "%s", dist_test_report());
}

/* Rank 2 sends 2 rows to rank 0, which expects 1 as from everyone; every
 * other size is 1. Of the one pair that disagrees, the sender's size is
 * the odd one: the job's cause names rank 2 alone, not rank 0. */
static int one_odd_split_rank(const dist_test_ctx *ctx) {
  CHECK_OK(ctx, wpg_test_init(ctx));
  int32_t in[4] = {1, 2, 3, 4}, out[3] = {-1, -1, -1};
  bool odd = ctx->rank == 2;
  dist_tensor ti = dist_tensor_1d(in, DIST_INT32, odd ? 4 : 3);
  dist_tensor to = dist_tensor_1d(out, DIST_INT32, 3);
  int64_t even[3] = {1, 1, 1}, more[3] = {2, 1, 1};
  int rc = dist_all_to_all_single(&to, &ti, even, odd ? more : even, NULL, NULL);
  const char *msg = dist_pg_errmsg(NULL);
  CHECK(ctx, rc == DIST_E_DESYNC, "rc %s: %s", dist_status_name(rc), msg);
  CHECK(ctx, strstr(msg, "  rank 2 sends 2 rows to rank 0, which expects 1  <- split size "
                         "differs"),
        "split lines:\n%s", msg);
  if (ctx->rank == 0) { /* the store's host: the others may have left */
    void *v = NULL;
    size_t n = 0;
    CHECK_OK(ctx, dist_store_get(dist_get_default_store(), DIST_KEY_CAUSE, &v, &n));
    dist__cause_fields f;
    dist__cause_parse_info(v, n, &f);
    CHECK(ctx, f.n_culprits == 1 && f.culprits[0] == 2 && !strcmp(f.field, "split size"),
          "the cause names rank 2 alone: %.*s", (int)n, (char *)v);
    dist_free(v);
  }
  dist_test_finish();
  return 0;
}

Test(wrapper_pg_desync, one_odd_split_blames_the_side_whose_size_stands_out, .timeout = 60) {
  cr_assert_eq(dist_test_ranks(3, one_odd_split_rank, NULL, 50), 0, "%s", dist_test_report());
}

/* Uneven splits, as an expert router's: rank g sends g + j + 1 rows to
 * rank j. Rank 1 moves a row from rank 2's share to rank 0's (the same
 * total): it disagrees with rank 0 and with rank 2, each of them only
 * with it, while among uneven sizes no size stands out. The cause names
 * rank 1 alone. */
static int uneven_split_rank(const dist_test_ctx *ctx) {
  CHECK_OK(ctx, wpg_test_init(ctx));
  int g = ctx->rank;
  int32_t in[12] = {0}, out[12] = {0};
  int64_t send[3], recv[3];
  for (int j = 0; j < 3; j++)
    send[j] = recv[j] = g + j + 1;
  if (g == 1)
    send[0]++, send[2]--;
  dist_tensor ti = dist_tensor_1d(in, DIST_INT32, 3 * g + 6);
  dist_tensor to = dist_tensor_1d(out, DIST_INT32, 3 * g + 6);
  int rc = dist_all_to_all_single(&to, &ti, recv, send, NULL, NULL);
  const char *msg = dist_pg_errmsg(NULL);
  CHECK(ctx, rc == DIST_E_DESYNC, "rc %s: %s", dist_status_name(rc), msg);
  CHECK(ctx, strstr(msg, "  rank 1 sends 3 rows to rank 0, which expects 2  <- split size "
                         "differs") &&
                 strstr(msg, "  rank 1 sends 3 rows to rank 2, which expects 4  <- split "
                             "size differs"),
        "split lines:\n%s", msg);
  if (ctx->rank == 0) { /* the store's host: the others may have left */
    void *v = NULL;
    size_t n = 0;
    CHECK_OK(ctx, dist_store_get(dist_get_default_store(), DIST_KEY_CAUSE, &v, &n));
    dist__cause_fields f;
    dist__cause_parse_info(v, n, &f);
    CHECK(ctx, f.n_culprits == 1 && f.culprits[0] == 1 && !strcmp(f.field, "split size"),
          "the cause names rank 1 alone: %.*s", (int)n, (char *)v);
    dist_free(v);
  }
  dist_test_finish();
  return 0;
}

Test(wrapper_pg_desync, uneven_splits_blame_the_rank_in_every_pair_that_disagrees,
     .timeout = 60) {
  cr_assert_eq(dist_test_ranks(3, uneven_split_rank, NULL, 50), 0, "%s", dist_test_report());
}

/* --- reduce_scatter counts ----------------------------------------------- */

static int rs_rank(const dist_test_ctx *ctx) {
  CHECK_OK(ctx, wpg_test_init(ctx));
  float in[6] = {1, 1, 1, 1, 1, 1}, out[3] = {0};
  int n = ctx->rank == 1 ? 3 : 2;
  dist_tensor ti = dist_tensor_1d(in, DIST_FLOAT32, 2 * n), to = dist_tensor_1d(out, DIST_FLOAT32, n);
  int rc = dist_reduce_scatter_tensor(&to, &ti, DIST_SUM, NULL, NULL);
  if (expect_report(ctx, rc,
                    "desync in group 0 (default, 2 ranks) at REDUCE_SCATTER_TENSOR #1: ranks "
                    "disagree on the count\n",
                    "  rank 1: ", "float32[6]", "<- count differs"))
    return 1;
  CHECK(ctx, out[0] == 0, "output touched");
  dist_test_finish();
  return 0;
}

Test(wrapper_pg_desync, reduce_scatter_counts_differ, .timeout = 60) {
  cr_assert_eq(dist_test_ranks(2, rs_rank, NULL, 50), 0, "%s", dist_test_report());
}

/* --- DIST_SHOW_STACKTRACES=1: each rank's stack under its line ----------- */

static int __attribute__((noinline)) stack_inner(const dist_test_ctx *ctx, dist_tensor *t) {
  volatile int rc = dist_all_reduce(t, ctx->rank == 0 ? DIST_MIN : DIST_SUM, NULL, NULL);
  return rc; /* not a tail call: this frame stays on the stack */
}

static int stack_rank(const dist_test_ctx *ctx) {
  /* ctx->arg: torch's name, read only while ours is unset */
  const char *var = ctx->arg ? ctx->arg : "DIST_SHOW_STACKTRACES";
  if (ctx->arg)
    unsetenv("DIST_SHOW_STACKTRACES");
  setenv(var, "1", 1);
  CHECK_OK(ctx, wpg_test_init(ctx));
  float v[4] = {0};
  dist_tensor t = dist_tensor_1d(v, DIST_FLOAT32, 4);
  int rc = stack_inner(ctx, &t);
  const char *msg = dist_pg_errmsg(NULL);
  CHECK(ctx, rc == DIST_E_DESYNC, "rc %s: %s", dist_status_name(rc), msg);
  /* Under each rank's line, its stack from the call down: the frame that
   * made the call, then its caller. */
  const char *r1 = strstr(msg, "\n  rank 1: ");
  CHECK(ctx, r1, "no rank 1 line:\n%s", msg);
  const char *f0 = strstr(r1, "\n      #0 " ME ":"), *f1 = strstr(r1, "\n      #1 " ME ":");
  CHECK(ctx, f0 && f1 && strstr(f0, "in stack_inner()") && strstr(f1, "in stack_rank()"),
        "stack frames:\n%s", msg);
  CHECK(ctx, strstr(msg, "\n  rank 0: ") && strstr(strstr(msg, "\n  rank 0: "), "#0 " ME ":"),
        "rank 0's stack:\n%s", msg);
  dist_test_finish();
  return 0;
}

Test(wrapper_pg_desync, show_stacktraces_adds_each_ranks_stack, .timeout = 60) {
  cr_assert_eq(dist_test_ranks(2, stack_rank, NULL, 50), 0, "%s", dist_test_report());
}

Test(wrapper_pg_desync, torch_show_cpp_stacktraces_does_the_same_when_ours_is_unset,
     .timeout = 60) {
  cr_assert_eq(dist_test_ranks(2, stack_rank, "TORCH_SHOW_CPP_STACKTRACES", 50), 0, "%s",
               dist_test_report());
}

/* DIST_SHOW_STACKTRACES=0 wins over torch's name: no stack. */
static int stack_off_rank(const dist_test_ctx *ctx) {
  setenv("DIST_SHOW_STACKTRACES", "0", 1);
  setenv("TORCH_SHOW_CPP_STACKTRACES", "1", 1);
  CHECK_OK(ctx, wpg_test_init(ctx));
  float v[4] = {0};
  dist_tensor t = dist_tensor_1d(v, DIST_FLOAT32, 4);
  int rc = stack_inner(ctx, &t);
  const char *msg = dist_pg_errmsg(NULL);
  CHECK(ctx, rc == DIST_E_DESYNC, "rc %s: %s", dist_status_name(rc), msg);
  CHECK(ctx, strstr(msg, "\n  rank 1: ") && !strstr(msg, "#0 "), "a stack:\n%s", msg);
  dist_test_finish();
  return 0;
}

Test(wrapper_pg_desync, dist_show_stacktraces_0_wins_over_torchs_name, .timeout = 60) {
  cr_assert_eq(dist_test_ranks(2, stack_off_rank, NULL, 50), 0, "%s", dist_test_report());
}

/* --- five ranks over TCP: two in the minority, ranges compressed --------- */

static int five_rank(const dist_test_ctx *ctx) {
  setenv("DIST_TRANSPORT", "tcp", 1); /* the helper group runs over TCP too */
  CHECK_OK(ctx, wpg_test_init(ctx));
  double v[3] = {1, 2, 3};
  dist_tensor t = dist_tensor_1d(v, DIST_FLOAT64, 3);
  CHECK_OK(ctx, dist_all_reduce(&t, DIST_SUM, NULL, NULL));
  CHECK(ctx, v[0] == 5 && v[2] == 15, "sum over TCP: %g %g", v[0], v[2]);
  bool odd = ctx->rank == 1 || ctx->rank == 3;
  int rc = dist_reduce(&t, odd ? 4 : 2, DIST_SUM, NULL, NULL);
  if (expect_report(ctx, rc,
                    "desync in group 0 (default, 5 ranks) at REDUCE #2: ranks disagree on the "
                    "root\n",
                    "  ranks 1,3:   ", "REDUCE float64[3] op=SUM root 4 (24 bytes)",
                    "<- root differs"))
    return 1;
  char buf[512];
  CHECK(ctx, wpg_line(dist_pg_errmsg(NULL), "  ranks 0,2,4: ", buf, sizeof buf) &&
                 strstr(buf, "root 2") && !strstr(buf, "<-"), "majority:\n%s", dist_pg_errmsg(NULL));
  CHECK(ctx, v[0] == 5, "buffer touched");
  dist_test_finish();
  return 0;
}

Test(wrapper_pg_desync, five_ranks_over_tcp_two_in_the_minority, .timeout = 90) {
  cr_assert_eq(dist_test_ranks(5, five_rank, NULL, 80), 0, "%s", dist_test_report());
}
