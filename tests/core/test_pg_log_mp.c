/* ctest: labels=multiproc timeout=120 */
/* What the log says by debug level (pg_log.c), captured with
 * dist_log_set_sink on real ranks: at INFO one configuration block per
 * group created (backend, transport, ranks, timeout, debug level, the DIST_
 * variables with the token hidden) and no per-operation lines; at DETAIL
 * also one TRACE line per operation, in order with its sequence number; at
 * OFF neither, even with DIST_LOG_LEVEL=INFO. */
#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "logcap.h"
#include "mp.h"

static int count(const char *hay, const char *needle) {
  int n = 0;
  for (const char *p = strstr(hay, needle); p; p = strstr(p + 1, needle))
    n++;
  return n;
}

typedef struct log_arg {
  dist_debug_level level;
  const char *transport;
} log_arg;

/* Creates the default group and one sub-group, runs three operations, and
 * returns the captured log (before teardown). */
static int run_ops(const dist_test_ctx *ctx) {
  const log_arg *a = ctx->arg;
  dist_test_log_capture(DIST_LOG_INFO);
  dist_set_debug_level(a->level);
  CHECK_OK(ctx, dist_test_init_pg(ctx, NULL));
  int both[2] = {0, 1};
  dist_group_opts go = {.desc = "pair", .timeout_ms = 7500};
  dist_pg *pair;
  CHECK_OK(ctx, dist_new_group(both, 2, &go, &pair));
  float x[4] = {1, 2, 3, 4};
  dist_tensor t = dist_tensor_1d(x, DIST_FLOAT32, 4);
  CHECK_OK(ctx, dist_all_reduce(&t, DIST_SUM, NULL, NULL));
  CHECK_OK(ctx, dist_broadcast(&t, 1, NULL, NULL));
  CHECK_OK(ctx, dist_all_reduce(&t, DIST_MAX, pair, NULL));
  return 0;
}

static int check_block(const dist_test_ctx *ctx, const char *log) {
  const log_arg *a = ctx->arg;
  const char *lvl = a->level == DIST_DEBUG_DETAIL ? "DETAIL" : "INFO";
  char want[256];
  int groups = ctx->rank == 2 ? 1 : 2; /* rank 2 is not in the pair */
  CHECK(ctx, count(log, "initialized with:") == groups, "blocks:\n%s", log);
  CHECK(ctx, strstr(log, "group 0 (default) initialized with:\n  backend: cpu, transport: "),
        "%s", log);
  snprintf(want, sizeof want, "  backend: cpu, transport: %s, checking layer: off\n",
           !strcmp(a->transport, "tcp") ? "tcp" : "shm");
  CHECK(ctx, count(log, want) == groups, "want '%s' %d times in:\n%s", want, groups, log);
  snprintf(want, sizeof want, "  ranks: 3 (global 0-2), this rank: %d (global %d)\n", ctx->rank,
           ctx->rank);
  CHECK(ctx, strstr(log, want), "want '%s' in:\n%s", want, log);
  snprintf(want, sizeof want, "  timeout: 20.000 s, debug level: %s, NaN check: off\n", lvl);
  CHECK(ctx, strstr(log, want), "want '%s' in:\n%s", want, log);
  CHECK(ctx, strstr(log, "group 1 (pair) initialized with:") || ctx->rank == 2,
        "no block for the pair:\n%s", log);
  CHECK(ctx, strstr(log, "  timeout: 7.500 s,") || ctx->rank == 2, "%s", log);
  CHECK(ctx, strstr(log, "DIST_TEST_LOG_MARK=hello"), "%s", log);
  CHECK(ctx, strstr(log, "DIST_TOKEN=(set, not shown)") && !strstr(log, "s3cr3t-t0ken"), "%s",
        log);
  return 0;
}

static int check_ops(const dist_test_ctx *ctx, const char *log) {
  const log_arg *a = ctx->arg;
  int n = count(log, " COLL TRACE ");
  if (a->level != DIST_DEBUG_DETAIL) {
    CHECK(ctx, n == 0, "operation lines below DETAIL:\n%s", log);
    return 0;
  }
  const char *l1 = strstr(log, "COLL TRACE group 0 (default) #1: ALL_REDUCE float32[4] op=SUM");
  const char *l2 = strstr(log, "COLL TRACE group 0 (default) #2: BROADCAST float32[4]");
  const char *l3 = strstr(log, "COLL TRACE group 1 (pair) #1: ALL_REDUCE float32[4] op=MAX");
  CHECK(ctx, l1 && l2 && l1 < l2, "%s", log);
  CHECK(ctx, ctx->rank == 2 ? n == 2 && !l3 : n == 3 && l3 && l2 < l3, "%d lines:\n%s", n, log);
  return 0;
}

static int log_rank(const dist_test_ctx *ctx) {
  const log_arg *a = ctx->arg;
  int rc = run_ops(ctx);
  if (rc)
    return rc;
  const char *log = dist_test_log_text();
  if (a->level == DIST_DEBUG_OFF) {
    CHECK(ctx, !strstr(log, "initialized with:") && !strstr(log, " COLL TRACE "), "%s", log);
  } else {
    CHECK(ctx, check_block(ctx, log) == 0, "block");
    CHECK(ctx, check_ops(ctx, log) == 0, "operations");
  }
  dist_test_log_release();
  dist_test_finish();
  return 0;
}

static void run_level(dist_debug_level level, const char *transport) {
  setenv("DIST_TEST_LOG_MARK", "hello", 1);
  setenv("DIST_TOKEN", "s3cr3t-t0ken", 1);
  setenv("DIST_TRANSPORT", transport, 1);
  log_arg a = {level, transport};
  cr_assert_eq(dist_test_ranks(3, log_rank, &a, 80), 0, "%s", dist_test_report());
}

Test(core_pg_log, info_logs_one_block_per_group_and_no_operations, .timeout = 90) {
  run_level(DIST_DEBUG_INFO, "auto");
}

Test(core_pg_log, detail_adds_one_trace_line_per_operation_tcp, .timeout = 90) {
  run_level(DIST_DEBUG_DETAIL, "tcp");
}

Test(core_pg_log, off_logs_neither_even_at_log_level_info, .timeout = 90) {
  run_level(DIST_DEBUG_OFF, "auto");
}
