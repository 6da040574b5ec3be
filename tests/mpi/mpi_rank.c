/* mpi_rank.c - one rank of the mpi backend's tests, started by mpirun
 * (tests/mpi/test_mpi.c starts mpirun). Plain C: prints what failed with
 * the rank and exits non-zero.
 *
 *   mpi_rank suite     the collective suite of the cpu backend
 *                      (coll_suite.h) on the default group and a subgroup;
 *                      DIST_TEST_SEED must be the same on every rank
 *   mpi_rank timeout   rank 1 skips an asynchronous all_reduce: rank 0's
 *                      work must fail with DIST_E_TIMEOUT naming it, then
 *                      its next call at once with the same message (the
 *                      group is broken); the job then ends through
 *                      MPI_Abort (mpi_int.h)
 *   mpi_rank timeout_sync  rank 1 skips a synchronous all_reduce, which
 *                      runs in MPI's blocking call: the watchdog reports it
 *                      and ends the job with MPI_Abort
 *   mpi_rank abort     rank 1 skips an asynchronous all_reduce; rank 0
 *                      aborts the group from another thread: the work fails
 *                      with DIST_E_ABORTED and the reason, later calls too
 *   mpi_rank desync    (run with DIST_DEBUG=DETAIL) rank 1 all_reduces 8
 *                      elements, the others 4: every rank fails with
 *                      DIST_E_DESYNC and prints the checking layer's report;
 *                      buffers untouched; a later call that agrees runs */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll_suite.h"

static int init(dist_test_ctx *ctx, int64_t timeout_ms) {
  dist_init_opts o = dist_init_opts_default();
  o.backend = "mpi";
  o.timeout_ms = timeout_ms;
  CHECK_OK(ctx, dist_init_process_group(&o));
  ctx->rank = dist_get_rank(NULL);
  ctx->world = dist_get_world_size(NULL);
  CHECK(ctx, !strcmp(dist_get_backend(NULL), "mpi"), "backend is %s", dist_get_backend(NULL));
  return 0;
}

static int suite(dist_test_ctx *ctx) {
  const char *s = getenv("DIST_TEST_SEED");
  CHECK(ctx, s, "DIST_TEST_SEED must be set (every rank needs the same seed)");
  if (init(ctx, 60000))
    return 1;
  if (coll_suite_run(ctx, strtoull(s, NULL, 0)))
    return 1;
  CHECK_OK(ctx, dist_destroy_process_group(NULL));
  if (ctx->rank == 0)
    printf("mpi suite passed on %d ranks\n", ctx->world);
  return 0;
}

static int timeout_case(dist_test_ctx *ctx, bool sync) {
  if (init(ctx, 1500))
    return 1;
  float v[4] = {1, 2, 3, 4};
  dist_tensor t = dist_tensor_1d(v, DIST_FLOAT32, 4);
  dist_store *st = dist_get_default_store();
  if (ctx->rank == 1) { /* wait until rank 0 has seen its timeout */
    void *val = NULL;
    size_t len = 0;
    dist_store_set_timeout(st, 60000);
    CHECK_OK(ctx, dist_store_get(st, "test/seen", &val, &len));
    dist_free(val);
    return 0;
  }
  if (sync) {
    dist_all_reduce(&t, DIST_SUM, NULL, NULL);
    return FAIL(ctx, "the watchdog did not end the job: %s", dist_pg_errmsg(NULL));
  }
  dist_work *w = NULL;
  CHECK_OK(ctx, dist_all_reduce(&t, DIST_SUM, NULL, &w));
  int rc = dist_work_wait(w, -1);
  char first[1024];
  snprintf(first, sizeof first, "%s", dist_work_errmsg(w));
  dist_work_free(w);
  CHECK(ctx, rc == DIST_E_TIMEOUT, "all_reduce gave %s: %s", dist_status_name(rc), first);
  CHECK(ctx, strstr(first, "ALL_REDUCE") && strstr(first, "timed out"), "message: %s", first);
  /* The next call fails at once with the first failure's cause (under
   * its own header). */
  rc = dist_broadcast(&t, 0, NULL, NULL);
  const char *cause = strstr(first, "ALL_REDUCE float32[4]");
  CHECK(ctx, rc == DIST_E_TIMEOUT && cause && strstr(dist_pg_errmsg(NULL), cause),
        "the next call gave %s: %s", dist_status_name(rc), dist_pg_errmsg(NULL));
  /* stderr, as the MPI_Abort note: mpirun keeps one stream's order */
  fprintf(stderr, "rank 0 saw: %s\n", first);
  CHECK_OK(ctx, dist_store_set(st, "test/seen", "1", 1));
  return 0;
}

static void *aborter(void *arg) {
  dist_abort_group(arg, "the test aborts it");
  return NULL;
}

static int abort_case(dist_test_ctx *ctx) {
  if (init(ctx, 60000))
    return 1;
  dist_store *st = dist_get_default_store();
  if (ctx->rank == 1) {
    void *val = NULL;
    size_t len = 0;
    dist_store_set_timeout(st, 60000);
    CHECK_OK(ctx, dist_store_get(st, "test/seen", &val, &len));
    dist_free(val);
    return 0;
  }
  float v[4] = {1, 2, 3, 4};
  dist_tensor t = dist_tensor_1d(v, DIST_FLOAT32, 4);
  dist_work *w = NULL;
  CHECK_OK(ctx, dist_all_reduce(&t, DIST_SUM, NULL, &w));
  pthread_t th;
  CHECK(ctx, pthread_create(&th, NULL, aborter, NULL) == 0, "pthread_create");
  int rc = dist_work_wait(w, 30000);
  pthread_join(th, NULL);
  CHECK(ctx, rc == DIST_E_ABORTED && strstr(dist_work_errmsg(w), "the test aborts it"),
        "work: %s: %s", dist_status_name(rc), dist_work_errmsg(w));
  dist_work_free(w);
  rc = dist_all_reduce(&t, DIST_SUM, NULL, NULL);
  CHECK(ctx, rc == DIST_E_ABORTED, "after the abort: %s", dist_status_name(rc));
  fprintf(stderr, "rank 0 aborted: %s\n", dist_pg_errmsg(NULL));
  CHECK_OK(ctx, dist_store_set(st, "test/seen", "1", 1));
  return 0;
}

static int desync_case(dist_test_ctx *ctx) {
  if (init(ctx, 60000))
    return 1;
  float v[8] = {1, 1, 1, 1, 1, 1, 1, 1};
  dist_tensor t = dist_tensor_1d(v, DIST_FLOAT32, ctx->rank == 1 ? 8 : 4);
  int rc = dist_all_reduce(&t, DIST_SUM, NULL, NULL);
  CHECK(ctx, rc == DIST_E_DESYNC, "all_reduce gave %s: %s", dist_status_name(rc),
        dist_pg_errmsg(NULL));
  for (int i = 0; i < 8; i++)
    CHECK(ctx, v[i] == 1, "buffer touched: v[%d] = %g", i, v[i]);
  /* Each line tagged with the rank: mpirun interleaves the ranks' lines. */
  char rep[4096];
  snprintf(rep, sizeof rep, "%s", dist_pg_errmsg(NULL));
  for (char *s = NULL, *l = strtok_r(rep, "\n", &s); l; l = strtok_r(NULL, "\n", &s))
    printf("R%d| %s\n", ctx->rank, l);
  fflush(stdout);
  t = dist_tensor_1d(v, DIST_FLOAT32, 4);
  CHECK_OK(ctx, dist_all_reduce(&t, DIST_SUM, NULL, NULL));
  CHECK(ctx, v[0] == ctx->world, "sum after the desync: %g", v[0]);
  CHECK_OK(ctx, dist_destroy_process_group(NULL));
  return 0;
}

int main(int argc, char **argv) {
  dist_test_ctx ctx = {0};
  const char *mode = argc > 1 ? argv[1] : "suite";
  int rc;
  if (!strcmp(mode, "suite"))
    rc = suite(&ctx);
  else if (!strcmp(mode, "abort"))
    rc = abort_case(&ctx);
  else if (!strcmp(mode, "desync"))
    rc = desync_case(&ctx);
  else if (!strcmp(mode, "timeout") || !strcmp(mode, "timeout_sync"))
    rc = timeout_case(&ctx, !strcmp(mode, "timeout_sync"));
  else
    rc = FAIL(&ctx, "unknown mode '%s' (suite, timeout, timeout_sync, abort, desync)", mode);
  fflush(stdout);
  return rc;
}
