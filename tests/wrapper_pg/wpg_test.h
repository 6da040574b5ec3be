/* wpg_test.h - helpers for the checking layer's multi-process suites. */
#ifndef WPG_TEST_H
#define WPG_TEST_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mp.h"

/* Init the default group at DETAIL (every group comes back checked). */
static inline int wpg_test_init(const dist_test_ctx *ctx) {
  dist_set_debug_level(DIST_DEBUG_DETAIL);
  return dist_test_init_pg(ctx, NULL);
}

/* The line of msg that starts with prefix (copied into buf), or NULL. */
static inline const char *wpg_line(const char *msg, const char *prefix, char *buf, size_t len) {
  for (const char *p = msg; p && *p;) {
    const char *nl = strchr(p, '\n');
    size_t n = nl ? (size_t)(nl - p) : strlen(p);
    if (!strncmp(p, prefix, strlen(prefix))) {
      snprintf(buf, len, "%.*s", (int)n, p);
      return buf;
    }
    p = nl ? nl + 1 : NULL;
  }
  return NULL;
}

/* Every rank posts its report; rank 0 checks they are all the same text. */
static inline int wpg_same_everywhere(const dist_test_ctx *ctx, const char *report) {
  dist_store *st = dist_get_default_store();
  char k[64];
  snprintf(k, sizeof k, "test/report/%d", ctx->rank);
  if (dist_store_set(st, k, report, strlen(report)) != DIST_OK)
    return FAIL(ctx, "cannot post the report");
  if (ctx->rank != 0)
    return 0;
  for (int r = 1; r < ctx->world; r++) {
    snprintf(k, sizeof k, "test/report/%d", r);
    void *v = NULL;
    size_t n = 0;
    if (dist_store_get(st, k, &v, &n) != DIST_OK)
      return FAIL(ctx, "no report from rank %d", r);
    int same = n == strlen(report) && !memcmp(v, report, n);
    if (!same) {
      FAIL(ctx, "rank %d's report differs:\n%.*s\nrank 0's:\n%s", r, (int)n, (char *)v, report);
      dist_free(v);
      return 1;
    }
    dist_free(v);
  }
  return 0;
}

/* A store barrier for tests whose ranks fail on purpose (no group is
 * usable to leave together): every rank arrives; rank 0, which hosts the
 * store, leaves only once every rank has seen that all arrived. A rank that
 * plays absent calls it instead of the operation, so it stays alive until
 * the others have checked their reports. */
static inline int wpg_test_count(const dist_test_ctx *ctx, dist_store *st, const char *what,
                                 bool wait) {
  char cnt[64], all[64];
  snprintf(cnt, sizeof cnt, "test/%s/n", what);
  snprintf(all, sizeof all, "test/%s/all", what);
  int64_t n = 0;
  if (dist_store_add(st, cnt, 1, &n) != DIST_OK)
    return FAIL(ctx, "store add: %s", dist_store_errmsg(st));
  if (n == ctx->world && dist_store_set(st, all, "1", 1) != DIST_OK)
    return FAIL(ctx, "store set: %s", dist_store_errmsg(st));
  const char *keys[1] = {all};
  if (wait && dist_store_wait(st, keys, 1, 60000) != DIST_OK)
    return FAIL(ctx, "store wait for %s: %s", what, dist_store_errmsg(st));
  return 0;
}

static inline int wpg_test_leave(const dist_test_ctx *ctx) {
  dist_store *st = dist_get_default_store();
  if (wpg_test_count(ctx, st, "arrived", true))
    return 1;
  return wpg_test_count(ctx, st, "seen", ctx->rank == 0);
}

#endif
