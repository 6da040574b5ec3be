/* ctest: labels=multiproc timeout=120 */
/* Backends by name and torch's environment names, through the public
 * header: "GLOO" and "Cpu" pick the cpu backend and read back in the
 * registered spelling; dist_list_backends and
 * dist_get_default_backend_for_device answer as torch's Backend does
 * (cuda only where NCCL is available: tests/nccl checks both outcomes);
 * GLOO_SOCKET_IFNAME and TORCH_SHOW_CPP_STACKTRACES count where ours are
 * unset, and lose to ours when both are set. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "mp.h"

Test(core_api, list_backends_and_default_backend_for_device, .timeout = 30) {
  const char *names[8] = {0};
  size_t n = dist_list_backends(names, 8);
  cr_assert_gt(n, 1);
  cr_assert_str_eq(names[0], "cpu");
  cr_assert_str_eq(names[1], "gloo");
  cr_assert_eq(dist_list_backends(NULL, 0), n, "the count does not depend on cap");
  const char *b = NULL;
  cr_assert_eq(dist_get_default_backend_for_device("cpu", &b), DIST_OK);
  cr_assert_str_eq(b, "cpu");
  /* cuda: nccl where it is available, else NOTSUP saying why. */
  if (dist_is_nccl_available()) {
    cr_assert_eq(dist_get_default_backend_for_device("CUDA:1", &b), DIST_OK);
    cr_assert_str_eq(b, "nccl");
  } else {
    cr_assert_eq(dist_get_default_backend_for_device("CUDA:1", &b), DIST_E_NOTSUP);
    cr_assert(strstr(dist_last_errmsg(), "NCCL is not available: "), "%s", dist_last_errmsg());
  }
  cr_assert_eq(dist_get_default_backend_for_device("tpu", &b), DIST_E_INVAL);
  cr_assert(strstr(dist_last_errmsg(), "'tpu'"), "%s", dist_last_errmsg());
  cr_assert_eq(dist_get_default_backend_for_device("cudax", &b), DIST_E_INVAL);
  cr_assert_eq(dist_get_default_backend_for_device(NULL, &b), DIST_E_INVAL);
  cr_assert_eq(dist_get_default_backend_for_device("cpu", NULL), DIST_E_INVAL);
}

Test(core_api, torch_variable_names_count_only_where_ours_are_unset, .timeout = 30) {
  const char *which = NULL;
  unsetenv("DIST_SHOW_STACKTRACES");
  unsetenv("TORCH_SHOW_CPP_STACKTRACES");
  cr_assert_null(dist_getenv("DIST_SHOW_STACKTRACES", &which));
  setenv("TORCH_SHOW_CPP_STACKTRACES", "1", 1);
  cr_assert_str_eq(dist_getenv("DIST_SHOW_STACKTRACES", &which), "1");
  cr_assert_str_eq(which, "TORCH_SHOW_CPP_STACKTRACES");
  setenv("DIST_SHOW_STACKTRACES", "0", 1);
  cr_assert_str_eq(dist_getenv("DIST_SHOW_STACKTRACES", &which), "0");
  cr_assert_str_eq(which, "DIST_SHOW_STACKTRACES");
  setenv("DIST_SHOW_STACKTRACES", "", 1); /* empty is unset */
  cr_assert_str_eq(dist_getenv("DIST_SHOW_STACKTRACES", NULL), "1");
  unsetenv("DIST_SOCKET_IFNAME");
  setenv("GLOO_SOCKET_IFNAME", "lo", 1);
  cr_assert_str_eq(dist_getenv("DIST_SOCKET_IFNAME", &which), "lo");
  cr_assert_str_eq(which, "GLOO_SOCKET_IFNAME");
  setenv("TORCH_DISTRIBUTED_DEBUG", "DETAIL", 1);
  unsetenv("DIST_DEBUG");
  cr_assert_str_eq(dist_getenv("DIST_DEBUG", NULL), "DETAIL");
  setenv("GLOO_OTHER", "x", 1); /* only the listed pairs fall back */
  cr_assert_null(dist_getenv("DIST_OTHER", NULL));
  cr_assert_null(dist_getenv(NULL, &which));
}

static int sum_is(const dist_test_ctx *ctx, dist_pg *g, int want) {
  int32_t v = ctx->rank + 1;
  dist_tensor t = dist_tensor_1d(&v, DIST_INT32, 1);
  CHECK_OK(ctx, dist_all_reduce(&t, DIST_SUM, g, NULL));
  CHECK(ctx, v == want, "sum %d, want %d", v, want);
  return 0;
}

static int names_rank(const dist_test_ctx *ctx) {
  CHECK_OK(ctx, dist_test_init_pg(ctx, "GLOO"));
  CHECK(ctx, !strcmp(dist_get_backend(NULL), "gloo"), "backend %s", dist_get_backend(NULL));
  if (sum_is(ctx, NULL, 3))
    return 1;
  dist_group_opts o = {.backend = "Cpu"};
  dist_pg *g;
  CHECK_OK(ctx, dist_new_group(NULL, 0, &o, &g));
  CHECK(ctx, !strcmp(dist_get_backend(g), "cpu"), "group backend %s", dist_get_backend(g));
  if (sum_is(ctx, g, 3))
    return 1;
  o.backend = "NoSuchBackend";
  CHECK(ctx, dist_new_group(NULL, 0, &o, &g) == DIST_E_NOTSUP, "unknown backend accepted");
  CHECK(ctx, strstr(dist_last_errmsg(), "NoSuchBackend"), "message: %s", dist_last_errmsg());
  dist_test_finish();
  return 0;
}

Test(core_api, backend_names_are_case_insensitive, .timeout = 60) {
  cr_assert_eq(dist_test_ranks(2, names_rank, NULL, 50), 0, "%s", dist_test_report());
}

/* Over TCP (no shared memory), the data plane binds the interface named
 * by GLOO_SOCKET_IFNAME when DIST_SOCKET_IFNAME is unset: "lo" works, a
 * name no interface has fails the group, naming the variable. */
static int ifname_rank(const dist_test_ctx *ctx) {
  const char *ifname = ctx->arg;
  setenv("DIST_TRANSPORT", "tcp", 1);
  unsetenv("DIST_SOCKET_IFNAME");
  setenv("GLOO_SOCKET_IFNAME", ifname, 1);
  int rc = dist_test_init_pg(ctx, NULL);
  if (!strcmp(ifname, "lo")) {
    CHECK_OK(ctx, rc);
    if (sum_is(ctx, NULL, 3))
      return 1;
    dist_test_finish();
    return 0;
  }
  /* Every rank fails. Rank 0 (it hosts the store, so it fails before it
   * hears from anyone) names the variable; rank 1 names it too, or rank 0
   * when rank 0's exit reached it first. */
  const char *msg = rc == DIST_OK ? "" : dist_last_errmsg();
  if (rc == DIST_OK) { /* the engine may connect at the first collective */
    int32_t v = 1;
    dist_tensor t = dist_tensor_1d(&v, DIST_INT32, 1);
    rc = dist_all_reduce(&t, DIST_SUM, NULL, NULL);
    msg = dist_pg_errmsg(NULL);
  }
  CHECK(ctx, rc != DIST_OK, "a group over interface %s worked", ifname);
  bool named = strstr(msg, "GLOO_SOCKET_IFNAME='nosuchif9': no interface") != NULL;
  CHECK(ctx, named || (ctx->rank == 1 && strstr(msg, "rank 0")), "message: %s", msg);
  return 0;
}

Test(core_api, gloo_socket_ifname_names_the_interface_when_ours_is_unset, .timeout = 60) {
  cr_assert_eq(dist_test_ranks(2, ifname_rank, "lo", 50), 0, "%s", dist_test_report());
  cr_assert_eq(dist_test_ranks(2, ifname_rank, "nosuchif9", 50), 0, "%s", dist_test_report());
}
