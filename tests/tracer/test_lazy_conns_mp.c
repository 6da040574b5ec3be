/* ctest: labels=multiproc timeout=120 */
/* Connections made when first needed are in the trace: 4 ranks over TCP
 * (DIST_TRANSPORT=tcp), a ring of one send and one receive each. The group
 * starts with no connection (its summary at creation says 0), and each
 * rank's first two connection records, one per end of every connection,
 * name exactly its two ring neighbours: the pairs the ring used, nothing
 * else, before the closing barrier (after the ranks met in the store)
 * connects what its schedule needs. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mp.h"
#include "tmpdir.h"
#include "trace_util.h"

#define RANKS 4

static char dir[256];

static int ring_rank(const dist_test_ctx *ctx) {
  setenv("DIST_TRACE", dir, 1);
  setenv("DIST_JOB_ID", "lazyjob", 1);
  setenv("DIST_TRANSPORT", "tcp", 1);
  unsetenv("DIST_TCP_LAZY"); /* the default: connect when first needed */
  CHECK_OK(ctx, dist_tracer_register());
  CHECK_OK(ctx, dist_test_init_pg(ctx, NULL));
  int next = (ctx->rank + 1) % RANKS, prev = (ctx->rank + RANKS - 1) % RANKS;
  int32_t out = ctx->rank, in = -1;
  dist_tensor o = dist_tensor_1d(&out, DIST_INT32, 1), i = dist_tensor_1d(&in, DIST_INT32, 1);
  if (ctx->rank % 2 == 0) { /* even ranks send first: no cycle of blocked sends */
    CHECK_OK(ctx, dist_send(&o, next, NULL, 0));
    CHECK_OK(ctx, dist_recv(&i, prev, NULL, 0, NULL));
  } else {
    CHECK_OK(ctx, dist_recv(&i, prev, NULL, 0, NULL));
    CHECK_OK(ctx, dist_send(&o, next, NULL, 0));
  }
  CHECK(ctx, in == prev, "received %d from rank %d", in, prev);
  /* Every rank's ring is recorded before any rank's closing barrier
   * connects the rest: the ranks meet in the store, not over TCP (a rank
   * whose ring ended first reached a peer still connecting its ring). */
  dist_store *s = dist_get_default_store();
  char key[32];
  snprintf(key, sizeof key, "ring/%d", ctx->rank);
  CHECK_OK(ctx, dist_store_set(s, key, "1", 1));
  const char *keys[RANKS] = {"ring/0", "ring/1", "ring/2", "ring/3"};
  CHECK_OK(ctx, dist_store_wait(s, keys, RANKS, 30000));
  dist_test_finish();
  return 0;
}

/* Whether line names global rank r as the other end ("rank 3 (host"). */
static bool names(const char *line, int r) {
  char want[32];
  snprintf(want, sizeof want, "rank %d (host", r);
  return strstr(line, want) != NULL;
}

Test(tracer_lazy_conns, connections_made_when_first_needed_are_recorded, .timeout = 100) {
  snprintf(dir, sizeof dir, "/tmp/dist-tracelazy-XXXXXX");
  cr_assert(dist_test_mkdtemp(dir));
  cr_assert_eq(dist_test_ranks(RANKS, ring_rank, NULL, 60), 0, "%s", dist_test_report());
  sqlite3 *db = tq_merge(dir, "lazyjob", NULL);
  cr_assert(db);
  for (int r = 0; r < RANKS; r++) {
    const char *summary = tq_text(db, "SELECT message FROM events WHERE rank = %d AND message"
                                      " LIKE 'connections:%%' LIMIT 1", r);
    cr_assert(!strncmp(summary, "connections: 0 tcp", 18), "rank %d at creation: '%s'", r,
              summary);
    int next = (r + 1) % RANKS, prev = (r + RANKS - 1) % RANKS;
    char first[2][512];
    for (int k = 0; k < 2; k++)
      snprintf(first[k], sizeof first[k], "%s",
               tq_text(db, "SELECT message FROM events WHERE rank = %d AND message LIKE"
                           " '%%when first needed%%' ORDER BY t_ns LIMIT 1 OFFSET %d", r, k));
    for (int k = 0; k < 2; k++)
      cr_assert(strstr(first[k], "connected to") || strstr(first[k], "accepted a connection"),
                "rank %d's connection record %d: '%s'", r, k, first[k]);
    bool ring = (names(first[0], next) && names(first[1], prev)) ||
                (names(first[0], prev) && names(first[1], next));
    cr_assert(ring, "rank %d's first connections are not its neighbours %d and %d:\n  %s\n  %s",
              r, prev, next, first[0], first[1]);
  }
  sqlite3_close(db);
}
