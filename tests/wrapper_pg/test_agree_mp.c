/* ctest: labels=multiproc timeout=120 */
/* At init the ranks compare what the checks need to agree on: a debug
 * level set on one rank only (by dist_set_debug_level, or DIST_DEBUG set
 * just before init), or a different default timeout, fails init on every
 * rank with DIST_E_DESYNC (nobody hangs) and one report naming who has
 * what. */
#include <criterion/criterion.h>

#include "wpg_test.h"

typedef struct agree_case {
  int odd_rank;
  bool detail;        /* odd rank at DETAIL, the others OFF */
  int64_t timeout_ms; /* odd rank's timeout (others 20000) */
  const char *odd_line, *others_line;
  bool via_env;       /* the level comes from DIST_DEBUG set just before init */
} agree_case;

static int agree_rank(const dist_test_ctx *ctx) {
  const agree_case *k = ctx->arg;
  bool odd = ctx->rank == k->odd_rank;
  if (k->via_env) /* after the library loaded: init reads it again */
    setenv("DIST_DEBUG", odd ? "DETAIL" : "OFF", 1);
  else
    dist_set_debug_level(odd && k->detail ? DIST_DEBUG_DETAIL : DIST_DEBUG_OFF);
  dist_store *st;
  CHECK_OK(ctx, dist_test_tcp_store(ctx, &st));
  dist_init_opts o = dist_init_opts_default();
  o.store = st;
  o.rank = ctx->rank;
  o.world_size = ctx->world;
  o.timeout_ms = odd && k->timeout_ms ? k->timeout_ms : 20000;
  int rc = dist_init_process_group(&o);
  char msg[4096];
  snprintf(msg, sizeof msg, "%s", dist_last_errmsg());
  CHECK(ctx, rc == DIST_E_DESYNC, "init: %s: %s", dist_status_name(rc), msg);
  char head[160], buf[512];
  snprintf(head, sizeof head, "configuration differs between the ranks of group 0 (%d ranks) "
           "at init", ctx->world);
  CHECK(ctx, strstr(msg, head), "no '%s' in\n%s", head, msg);
  const char *nl = strchr(msg, '\n');
  CHECK(ctx, nl && wpg_line(nl + 1, k->odd_line, buf, sizeof buf), "no '%s' in\n%s",
        k->odd_line, msg);
  CHECK(ctx, wpg_line(nl + 1, k->others_line, buf, sizeof buf), "no '%s' in\n%s",
        k->others_line, msg);
  /* Rank 0 hosts the store: it leaves last. */
  char key[32];
  snprintf(key, sizeof key, "test/ack/%d", ctx->rank);
  CHECK_OK(ctx, dist_store_set(st, key, "1", 1));
  for (int r = 0; ctx->rank == 0 && r < ctx->world; r++) {
    snprintf(key, sizeof key, "test/ack/%d", r);
    const char *keys[1] = {key};
    CHECK_OK(ctx, dist_store_wait(st, keys, 1, 30000));
  }
  dist_store_destroy(st);
  return 0;
}

Test(wrapper_pg_agree, a_debug_level_on_one_rank_only_fails_init_everywhere, .timeout = 60) {
  agree_case k = {1, true, 0,
                  "  rank 1:    libdist 0.1.0, debug DETAIL, timeout 20000 ms  <- debug level "
                  "differs",
                  "  ranks 0,2: libdist 0.1.0, debug OFF, timeout 20000 ms", false};
  cr_assert_eq(dist_test_ranks(3, agree_rank, &k, 50), 0, "%s", dist_test_report());
}

Test(wrapper_pg_agree, DIST_DEBUG_set_on_one_rank_just_before_init_fails_init_everywhere,
     .timeout = 60) {
  agree_case k = {2, true, 0,
                  "  rank 2:    libdist 0.1.0, debug DETAIL, timeout 20000 ms  <- debug level "
                  "differs",
                  "  ranks 0-1: libdist 0.1.0, debug OFF, timeout 20000 ms", true};
  cr_assert_eq(dist_test_ranks(3, agree_rank, &k, 50), 0, "%s", dist_test_report());
}

Test(wrapper_pg_agree, a_different_default_timeout_fails_init_everywhere, .timeout = 60) {
  agree_case k = {0, false, 9000,
                  "  rank 0:    libdist 0.1.0, debug OFF, timeout 9000 ms",
                  "  ranks 1-3: libdist 0.1.0, debug OFF, timeout 20000 ms", false};
  cr_assert_eq(dist_test_ranks(4, agree_rank, &k, 50), 0, "%s", dist_test_report());
}
