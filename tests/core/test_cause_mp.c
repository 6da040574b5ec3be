/* ctest: labels=multiproc timeout=120 */
/* dist_post_cause never blocks its caller for long: with the job's store
 * frozen (the rank hosting it stopped with SIGSTOP, so connections are
 * accepted by the kernel and never answered) and a store timeout of 60 s,
 * a post returns DIST_OK within its own bound of about 2 s, and posts
 * nothing. */
#include <criterion/criterion.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <dist/backend.h>

#include "job/launch_env.h"
#include "mp.h"
#include "proc.h"

static int64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int frozen_store_rank(const dist_test_ctx *ctx) {
  CHECK_OK(ctx, dist_test_init_pg(ctx, NULL));
  dist_store *s = dist_get_default_store();
  CHECK_OK(ctx, dist_store_set_timeout(s, 60000));
  char pid[32];
  void *v = NULL;
  size_t n = 0;
  if (ctx->rank == 0) {
    snprintf(pid, sizeof pid, "%d", (int)getpid());
    CHECK_OK(ctx, dist_store_set(s, "test/pid0", pid, strlen(pid)));
    CHECK_OK(ctx, dist_store_get(s, "test/done", &v, &n)); /* stopped meanwhile */
    dist_free(v);
  } else {
    CHECK_OK(ctx, dist_store_get(s, "test/pid0", &v, &n));
    pid_t host = (pid_t)atoi(v);
    dist_free(v);
    CHECK(ctx, kill(host, SIGSTOP) == 0, "SIGSTOP");
    /* kill() returns before the host has stopped: under load its store
     * thread could still answer the post below. */
    CHECK(ctx, dist_test_wait_stopped(host, 20000), "rank 0 (pid %d) did not stop", (int)host);
    int64_t t0 = now_ms();
    int rc = dist_post_cause(DIST_E_TIMEOUT, "posted while the store is frozen");
    int64_t took = now_ms() - t0;
    kill(host, SIGCONT);
    CHECK(ctx, rc == DIST_OK, "rc %s", dist_status_name(rc));
    CHECK(ctx, took < 20000, "the post blocked %lld ms (store timeout 60 s)", (long long)took);
    fprintf(stderr, "rank 1: the post gave up after %lld ms\n", (long long)took);
    const char *key = DIST_KEY_CAUSE;
    bool present = true;
    CHECK_OK(ctx, dist_store_check(s, &key, 1, &present));
    CHECK(ctx, !present, "a cause was posted through a frozen store");
    CHECK_OK(ctx, dist_store_set(s, "test/done", "1", 1));
  }
  dist_test_finish();
  return 0;
}

Test(core_cause_mp, a_post_to_a_frozen_store_returns_within_its_bound, .timeout = 90) {
  cr_assert_eq(dist_test_ranks(2, frozen_store_rank, NULL, 80), 0, "%s", dist_test_report());
}
