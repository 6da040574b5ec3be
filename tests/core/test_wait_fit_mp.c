/* ctest: labels=multiproc timeout=120 */
/* How the CPU engines wait (cpu_fit.c), chosen from the CPUs the ranks may
 * run on: real ranks whose affinity (sched_setaffinity, inherited over
 * fork) gives them fewer CPUs than there are ranks yield and sleep without
 * spinning; ranks with a CPU each spin first. The choice is read from the
 * INFO line each rank logs (captured with dist_log_set_sink), and the
 * collectives run in either state give the reference results, over shared
 * memory and over TCP. */
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
