/* ctest: labels=multiproc timeout=120 */
/* How the CPU engines wait (cpu_fit.c), chosen from the CPUs the ranks may
 * run on: real ranks whose affinity (sched_setaffinity, inherited over
 * fork) gives them fewer CPUs than there are ranks yield and sleep without
 * spinning; ranks with a CPU each spin first. The choice is read from the
 * INFO line each rank logs (captured with dist_log_set_sink), and the
 * collectives run in either state give the reference results, over shared
 * memory and over TCP. Ranks with a CPU each that find themselves on one
 * (the kernel put them there) move apart: the DEBUG line shm_wait.c logs
 * when one moves off its peer's CPU. */
#include <criterion/criterion.h>

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "logcap.h"
#include "mp.h"

typedef struct fit_arg {
  int cpus;         /* CPUs the ranks are pinned to */
  const char *want; /* in the INFO line */
} fit_arg;

/* 300 all_reduces and barriers, each result checked: sum over ranks of
 * (rank + 1) * (i + 1) is (i + 1) * n (n + 1) / 2, exact in float32. */
static int run(const dist_test_ctx *ctx) {
  const fit_arg *a = ctx->arg;
  dist_test_log_capture(DIST_LOG_INFO);
  CHECK_OK(ctx, dist_test_init_pg(ctx, NULL));
  for (int i = 0; i < 300; i++) {
    float x[4];
    for (int k = 0; k < 4; k++)
      x[k] = (float)((ctx->rank + 1) * (i + 1));
    dist_tensor t = dist_tensor_1d(x, DIST_FLOAT32, 4);
    CHECK_OK(ctx, dist_all_reduce(&t, DIST_SUM, NULL, NULL));
    float want = (float)((i + 1) * ctx->world * (ctx->world + 1) / 2);
    for (int k = 0; k < 4; k++)
      CHECK(ctx, x[k] == want, "step %d: %g, want %g", i, x[k], want);
    CHECK_OK(ctx, dist_barrier(NULL, NULL));
  }
  char line[1024] = "";
  const char *l = strstr(dist_test_log_text(), "waiting: ");
  if (l)
    snprintf(line, sizeof line, "%.*s", (int)strcspn(l, "\n"), l);
  char head[128];
  snprintf(head, sizeof head, "waiting: %d ranks on this host, %d CPU%s allowed", ctx->world,
           a->cpus, a->cpus == 1 ? "" : "s");
  CHECK(ctx, strstr(line, head) && strstr(line, a->want), "want '%s' ... '%s', got '%s'", head,
        a->want, line);
  dist_test_log_release();
  dist_test_finish();
  return 0;
}

/* Pins this process (and so the ranks it forks) to its first `cpus`
 * allowed CPUs; restores the mask after the ranks ran. */
static void ranks_on_cpus(int ranks, int cpus, const char *want) {
  cpu_set_t all, some;
  cr_assert_eq(sched_getaffinity(0, sizeof all, &all), 0);
  if (CPU_COUNT(&all) < cpus)
    cr_skip_test("needs %d CPUs, this process may use %d", cpus, CPU_COUNT(&all));
  CPU_ZERO(&some);
  for (int c = 0, k = 0; c < CPU_SETSIZE && k < cpus; c++)
    if (CPU_ISSET(c, &all))
      CPU_SET(c, &some), k++;
  cr_assert_eq(sched_setaffinity(0, sizeof some, &some), 0);
  fit_arg a = {cpus, want};
  int rc = dist_test_ranks(ranks, run, &a, 90);
  sched_setaffinity(0, sizeof all, &all);
  cr_assert_eq(rc, 0, "%s", dist_test_report());
}

Test(wait_fit, four_ranks_on_one_cpu_yield_instead_of_spinning, .timeout = 110) {
  ranks_on_cpus(4, 1, "yielding and sleeping, no spinning");
}

Test(wait_fit, four_ranks_on_one_cpu_over_tcp_yield_too, .timeout = 110) {
  cr_assert_eq(setenv("DIST_TRANSPORT", "tcp", 1), 0);
  ranks_on_cpus(4, 1, "yielding and sleeping, no spinning");
}

Test(wait_fit, two_ranks_with_a_cpu_each_spin, .timeout = 110) {
  ranks_on_cpus(2, 2, "spinning before sleeping");
}

/* Sets this thread's affinity to the first CPU of `all`, or to `all`. */
static void pin_first(const cpu_set_t *all, bool first) {
  cpu_set_t one;
  CPU_ZERO(&one);
  for (int c = 0; c < CPU_SETSIZE; c++)
    if (CPU_ISSET(c, all)) {
      CPU_SET(c, &one);
      break;
    }
  sched_setaffinity(0, sizeof one, first ? &one : all);
}

/* Both ranks on one CPU (pinned there through a barrier, then allowed both
 * again: the kernel leaves a running task where it is), then barriers and
 * all_reduces: one rank finds the other on its CPU and moves. A round in
 * which the kernel separated them first proves nothing, so up to 5. */
static int put_together(const dist_test_ctx *ctx) {
  dist_test_log_capture(DIST_LOG_DEBUG);
  CHECK_OK(ctx, dist_test_init_pg(ctx, NULL));
  cpu_set_t all;
  CHECK(ctx, sched_getaffinity(0, sizeof all, &all) == 0, "sched_getaffinity");
  bool moved = false;
  for (int round = 0; round < 5 && !moved; round++) {
    pin_first(&all, true);
    CHECK_OK(ctx, dist_barrier(NULL, NULL));
    pin_first(&all, false);
    for (int i = 0; i < 200; i++) {
      float x = (float)(ctx->rank + 1);
      dist_tensor t = dist_tensor_1d(&x, DIST_FLOAT32, 1);
      CHECK_OK(ctx, dist_all_reduce(&t, DIST_SUM, NULL, NULL));
      CHECK(ctx, x == 3.0f, "round %d step %d: %g, want 3", round, i, x);
      CHECK_OK(ctx, dist_barrier(NULL, NULL));
    }
    /* Every rank learns whether either moved, so all leave together. */
    float any = strstr(dist_test_log_text(), "moved off CPU") ? 1.0f : 0.0f;
    dist_tensor ta = dist_tensor_1d(&any, DIST_FLOAT32, 1);
    CHECK_OK(ctx, dist_all_reduce(&ta, DIST_MAX, NULL, NULL));
    moved = any > 0;
  }
  CHECK(ctx, moved, "neither rank moved off the other's CPU in 5 rounds");
  dist_test_log_release();
  dist_test_finish();
  return 0;
}

Test(wait_fit, two_ranks_put_on_one_cpu_move_apart, .timeout = 110) {
  cpu_set_t all;
  cr_assert_eq(sched_getaffinity(0, sizeof all, &all), 0);
  if (CPU_COUNT(&all) < 2)
    cr_skip_test("needs 2 CPUs (two ranks then fit), this process may use %d",
                 CPU_COUNT(&all));
  cr_assert_eq(dist_test_ranks(2, put_together, NULL, 90), 0, "%s", dist_test_report());
}
