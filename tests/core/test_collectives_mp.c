/* ctest: labels=multiproc timeout=600 cost=45 */
/* Every operation, dtype and reduce op of the public API on real forked
 * ranks, sampled as STYLE.md's Tests section says: every operation with
 * every dtype once, every reduce op once per dtype, world sizes 1 to 5 and 8
 * (more ranks than this machine's 2 cores), a
 * seeded random mix of sizes, roots, synchronous and asynchronous calls, on
 * the default group and on a subgroup, over shared memory and over forced
 * TCP. Each result is compared bit for bit with values computed on one rank
 * in ascending rank order (so every rank holds identical bits). The seed is
 * printed; DIST_TEST_SEED=<n> replays a run. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>

#include "coll_suite.h"

typedef struct plan {
  const char *transport; /* DIST_TRANSPORT for the ranks */
  uint64_t seed;
} plan;

static int rank_main(const dist_test_ctx *ctx) {
  const plan *p = ctx->arg;
  setenv("DIST_TRANSPORT", p->transport, 1);
  CHECK_OK(ctx, dist_test_init_pg(ctx, NULL));
  if (coll_suite_run(ctx, p->seed))
    return 1;
  dist_test_finish();
  return 0;
}

static void run(int world, const char *transport) {
  plan p = {transport, dist_test_seed()};
  cr_log_info("world %d over %s, DIST_TEST_SEED=%llu", world, transport,
              (unsigned long long)p.seed);
  int rc = dist_test_ranks(world, rank_main, &p, 500);
  cr_assert_eq(rc, 0, "world %d over %s (DIST_TEST_SEED=%llu):\n%s", world, transport,
               (unsigned long long)p.seed, dist_test_report());
}

Test(core_collectives, every_op_and_dtype_on_1_rank_shm, .timeout = 300) { run(1, "auto"); }
Test(core_collectives, every_op_and_dtype_on_2_ranks_shm, .timeout = 300) { run(2, "auto"); }
Test(core_collectives, every_op_and_dtype_on_3_ranks_shm, .timeout = 300) { run(3, "auto"); }
Test(core_collectives, every_op_and_dtype_on_4_ranks_shm, .timeout = 300) { run(4, "auto"); }
Test(core_collectives, every_op_and_dtype_on_5_ranks_shm, .timeout = 300) { run(5, "auto"); }
/* More ranks than this machine's cores: the engines wait by yielding (cpu_fit.c) */
Test(core_collectives, every_op_and_dtype_on_8_ranks_shm, .timeout = 300) { run(8, "auto"); }
Test(core_collectives, every_op_and_dtype_on_1_rank_tcp, .timeout = 300) { run(1, "tcp"); }
Test(core_collectives, every_op_and_dtype_on_2_ranks_tcp, .timeout = 300) { run(2, "tcp"); }
Test(core_collectives, every_op_and_dtype_on_3_ranks_tcp, .timeout = 300) { run(3, "tcp"); }
Test(core_collectives, every_op_and_dtype_on_4_ranks_tcp, .timeout = 300) { run(4, "tcp"); }
Test(core_collectives, every_op_and_dtype_on_5_ranks_tcp, .timeout = 300) { run(5, "tcp"); }
Test(core_collectives, every_op_and_dtype_on_8_ranks_tcp, .timeout = 300) { run(8, "tcp"); }
