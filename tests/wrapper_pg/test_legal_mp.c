/* ctest: labels=multiproc timeout=120 */
/* No false reports: legal programs that other tools' debug modes have
 * wrongly flagged or hung on (legal.c) pass through checking groups with
 * the right values and without a word. Real forked ranks at DETAIL, one
 * test per pattern over two sampled world sizes (2 to 5): every rank must
 * return DIST_OK from every call, hold the reference's bits, have no
 * sticky error on the default group, and have logged nothing at WARNING or
 * ERROR (a log sink captures every line from before init to after the
 * group is gone). The last test runs every pattern in one job of
 * wpg_prog_legal under build/bin/distrun -n 4 at DETAIL: exit 0, no
 * desync, stall, hang or straggler line, and distview's diagnosis of the
 * job's trace.db is a success. */
#include <criterion/criterion.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "legal.h"
#include "proc.h"
#include "wpg_test.h"
#include "tmpdir.h"

/* --- the log sink: every line at WARNING or ERROR is a report ------------ */

static atomic_int reported;
static pthread_mutex_t sink_mu = PTHREAD_MUTEX_INITIALIZER;
static char first_report[2048];

static void sink(void *arg, dist_log_level level, dist_subsys subsys, const char *line) {
  (void)arg, (void)subsys;
  if (level > DIST_LOG_WARNING)
    return;
  if (atomic_fetch_add(&reported, 1) == 0) {
    pthread_mutex_lock(&sink_mu);
    snprintf(first_report, sizeof first_report, "%s", line);
    pthread_mutex_unlock(&sink_mu);
  }
}

static int clean(const dist_test_ctx *ctx, const char *when) {
  int n = atomic_load(&reported);
  pthread_mutex_lock(&sink_mu);
  int rc = n ? FAIL(ctx, "%d line(s) at WARNING or ERROR %s; the first:\n%s", n, when,
                    first_report) : 0;
  pthread_mutex_unlock(&sink_mu);
  return rc;
}

/* --- one pattern in forked ranks ----------------------------------------- */

/* Init again on the store of the first init, which outlives the groups
 * (as distrun's does): the second generation must not read the first's
 * keys. */
typedef struct again {
  const dist_test_ctx *ctx;
  dist_store *store;
} again;

static int reinit(void *arg) {
  const again *a = arg;
  dist_init_opts o = dist_init_opts_default();
  o.store = a->store;
  o.rank = a->ctx->rank;
  o.world_size = a->ctx->world;
  o.timeout_ms = 20000;
  return dist_init_process_group(&o);
}

static int legal_rank(const dist_test_ctx *ctx) {
  const legal_pattern *p = ctx->arg;
  setenv("DIST_LOG_LEVEL", "WARNING", 1); // whatever CI sets, warnings reach the sink
  dist_log_set_sink(sink, NULL);
  CHECK_OK(ctx, wpg_test_init(ctx));
  CHECK(ctx, dist_get_debug_level() == DIST_DEBUG_DETAIL, "not at DETAIL");
  CHECK(ctx, dist_log_get_level() >= DIST_LOG_WARNING, "warnings are filtered out");
  again a = {ctx, dist_get_default_store()};
  legal_env e = {ctx->rank, ctx->world, dist_test_seed(), reinit, &a};
  if (p->fn(&e))
    return FAIL(ctx, "%s failed (DIST_TEST_SEED=%llu)", p->name, (unsigned long long)e.seed);
  int err = dist_pg_async_error(NULL);
  CHECK(ctx, err == DIST_OK, "sticky error %s: %s", dist_status_name(err), dist_pg_errmsg(NULL));
  if (clean(ctx, p->name))
    return 1;
  dist_test_finish();
  return clean(ctx, "while leaving");
}

/* Runs pattern fn on each world size of sizes (0-terminated). */
static void run_sizes(const char *name, legal_fn fn, const int *sizes) {
  legal_pattern p = {name, fn};
  for (int i = 0; sizes[i]; i++)
    cr_assert_eq(dist_test_ranks(sizes[i], legal_rank, &p, 25), 0, "%s on %d ranks:\n%s", name,
                 sizes[i], dist_test_report());
}
#define SIZES(...) ((const int[]){__VA_ARGS__, 0})

Test(wrapper_pg_legal, uneven_all_gather_reduce_scatter_and_all_to_all_pass_clean,
     .timeout = 60) {
  run_sizes("uneven sizes", legal_uneven, SIZES(2, 5));
}

Test(wrapper_pg_legal, barrier_and_monitored_barrier_on_every_rank_pass_clean, .timeout = 60) {
  run_sizes("barriers", legal_barriers, SIZES(3, 5));
}

Test(wrapper_pg_legal, batched_point_to_point_passes_clean, .timeout = 60) {
  run_sizes("batched p2p", legal_batch_p2p, SIZES(2, 4));
}

Test(wrapper_pg_legal, async_calls_on_two_groups_in_different_orders_pass_clean,
     .timeout = 60) {
  run_sizes("async on two groups", legal_async_two_groups, SIZES(3, 4));
}

Test(wrapper_pg_legal, ranks_outside_a_group_calling_nothing_pass_clean, .timeout = 60) {
  run_sizes("outsiders", legal_outsiders, SIZES(3, 5));
}

Test(wrapper_pg_legal, split_groups_and_new_subgroups_pass_clean, .timeout = 60) {
  run_sizes("split and subgroups", legal_split_subgroups, SIZES(4, 5));
}

Test(wrapper_pg_legal, object_collectives_pass_clean, .timeout = 60) {
  run_sizes("object collectives", legal_objects, SIZES(2, 3));
}

Test(wrapper_pg_legal, a_group_created_and_destroyed_in_a_loop_passes_clean, .timeout = 60) {
  run_sizes("group loop", legal_group_loop, SIZES(2, 3));
}

Test(wrapper_pg_legal, init_destroy_and_init_again_passes_clean, .timeout = 60) {
  run_sizes("init again", legal_reinit, SIZES(2, 4));
}

/* --- every pattern in one job under distrun ------------------------------ */

static dist_proc P; /* the last command: P.buf[0] stdout, P.buf[1] stderr */

/* Runs "cd dir && exec argv..." (NULL-terminated after dir). */
#define in_dir(env, dir, ...)                                                          \
  dist_proc_runl(&P, (const char *const *)(env), 90000, "/bin/sh", "-c",               \
                 "cd \"$0\" && exec \"$@\"", (dir), __VA_ARGS__)

Test(wrapper_pg_legal, every_pattern_in_one_job_under_distrun_is_a_success, .timeout = 120) {
  dist_test_clean_launch_env();
  unsetenv("DIST_TRACE"); // the job's trace lands in dir, where trace.db is merged
  unsetenv("DIST_LOG_FILE");
  char tmpl[] = "/tmp/dist-legal-XXXXXX";
  const char *dir = dist_test_mkdtemp(tmpl);
  cr_assert(dir, "mkdtemp");
  const char *env[] = {"DIST_DEBUG=DETAIL", "DIST_LOG_LEVEL=WARNING", NULL};
  int st = in_dir(env, dir, dist_test_bin("distrun"), "-n", "4",
                  dist_test_bin("wpg_prog_legal"), NULL);
  const char *err = DIST_PROC_ERR(&P);
  cr_assert_eq(st, 0, "distrun exit %d\nstdout:\n%s\nstderr:\n%s", st, DIST_PROC_OUT(&P), err);
  const char *words[] = {"desync", "stall", "hang", "straggler"};
  for (size_t i = 0; i < sizeof words / sizeof words[0]; i++)
    cr_assert(!strcasestr(err, words[i]), "a line says '%s':\n%s", words[i], err);
  cr_assert(strstr(DIST_PROC_OUT(&P), "legal: 9 of 9 patterns passed on 4 ranks"),
            "stdout:\n%s", DIST_PROC_OUT(&P));

  st = in_dir(NULL, dir, dist_test_bin("distview"), "diagnose", "--json", "trace.db", NULL);
  const char *out = DIST_PROC_OUT(&P);
  cr_assert_eq(st, 0, "distview diagnose exit %d\n%s%s", st, out, DIST_PROC_ERR(&P));
  cr_assert(strstr(out, "\"kind\":\"success\",\"exit_code\":0"), "diagnosis:\n%s", out);
  char cmd[128]; // on a failure the directory stays, with the trace to read
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  cr_assert_eq(system(cmd), 0, "rm %s", dir);
}
