/* ctest: labels=multiproc timeout=180 */
/* Device maps, device binding and split communicators over the fake NCCL
 * (nccl_fake.h), with real forked ranks and a real TCP store; the cpu side
 * of a map is the real cpu backend. Each rank installs the fake in its own
 * process and checks the NCCL calls it made:
 *   - "CPU:gloo,Cuda:NCCL" runs cpu tensors on the cpu backend (values
 *     checked) and cuda tensors on NCCL, whose communicator is made at the
 *     first CUDA operation; an operation that mixes devices, or whose device
 *     the map lacks, fails naming the device, and NCCL is never called;
 *   - at DIST_DEBUG=DETAIL a cuda all_reduce whose count differs between
 *     ranks is reported as on the cpu backend (same header, every rank)
 *     before NCCL is called;
 *   - bound to a device at init, the communicator is made during init; a
 *     new group (and split_group) splits it with ncclCommSplit (the colour a
 *     hash of the member list, the key the group rank, the group's NCCL
 *     options in the config) while the parent's other ranks split with no
 *     colour; a use_local_synchronization group, or one whose blocking mode
 *     differs from the parent's, is built from a unique id instead. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "mp.h"
#include "nccl_fake.h"

static dist_tensor cuda(void *p, dist_dtype dt, int64_t n) {
  dist_tensor t = dist_tensor_1d(p, dt, n);
  t.device.type = DIST_DEVICE_CUDA;
  return t;
}

/* The log since the last check, compared and cleared. */
#define EXPECT_LOG(ctx, want, ...)                                                   \
  do {                                                                               \
    char w_[1024];                                                                   \
    snprintf(w_, sizeof w_, want, ##__VA_ARGS__);                                    \
    CHECK((ctx), !strcmp(log_buf, w_), "NCCL calls:\n%s--- want:\n%s---", log_buf, w_); \
    clear_log();                                                                     \
  } while (0)

/* No NCCL call since the last check. */
#define EXPECT_NONE(ctx) \
  CHECK((ctx), !log_buf[0], "unexpected NCCL calls:\n%s", log_buf)

/* A store barrier: nobody leaves (rank 0 hosts the store) until everyone
 * has arrived and rank 0 knows every rank saw it. */
static int count(const dist_test_ctx *ctx, dist_store *st, const char *what, bool wait) {
  char cnt[64], all[64];
  snprintf(cnt, sizeof cnt, "test/%s/n", what);
  snprintf(all, sizeof all, "test/%s/all", what);
  int64_t n = 0;
  CHECK(ctx, dist_store_add(st, cnt, 1, &n) == DIST_OK, "store add");
  if (n == ctx->world)
    CHECK(ctx, dist_store_set(st, all, "1", 1) == DIST_OK, "store set");
  const char *keys[1] = {all};
  if (wait)
    CHECK(ctx, dist_store_wait(st, keys, 1, 60000) == DIST_OK, "store wait %s", what);
  return 0;
}

static int leave(const dist_test_ctx *ctx, dist_store *st) {
  if (count(ctx, st, "arrived", true) || count(ctx, st, "seen", ctx->rank == 0))
    return 1;
  dist_destroy_process_group(NULL);
  dist_store_destroy(st);
  return 0;
}

/* ncclCommSplit's colour for a member list (README: a hash of it). */
static int color_of(const int *ranks, int n) {
  uint32_t h = 2166136261u;
  for (int i = 0; i < n; i++) {
    h ^= (uint32_t)ranks[i];
    h *= 16777619u;
  }
  return (int)(h & 0x7fffffffu);
}

/* --- a map: each operation on its device's backend ----------------------- */

static int map_rank(const dist_test_ctx *ctx) {
  dist__nccl_set_api(&fake);
  CHECK_OK(ctx, dist_test_init_pg(ctx, "CPU:gloo,Cuda:NCCL"));
  CHECK(ctx, !strcmp(dist_get_backend(NULL), "cpu:gloo,cuda:nccl"), "backend %s",
        dist_get_backend(NULL));
  float v[4] = {1, 2, 3, (float)ctx->rank};
  dist_tensor h = dist_tensor_1d(v, DIST_FLOAT32, 4);
  CHECK_OK(ctx, dist_all_reduce(&h, DIST_SUM, NULL, NULL));
  CHECK(ctx, v[0] == 2 && v[2] == 6 && v[3] == 1, "cpu sum %g %g %g", v[0], v[2], v[3]);
  CHECK_OK(ctx, dist_barrier(NULL, NULL)); /* no tensors, no binding: cpu */
  CHECK_OK(ctx, dist_monitored_barrier(NULL, 10000, false));
  EXPECT_NONE(ctx); /* nothing cuda yet: no communicator */

  dist_tensor t = cuda(b0, DIST_FLOAT32, 4);
  CHECK_OK(ctx, dist_all_reduce(&t, DIST_SUM, NULL, NULL));
  EXPECT_LOG(ctx, "SetDevice 0\n%sCommInitRankConfig n=2 rank=%d\nAllReduce b0 b0 n=4 t=7 op=0\n",
             ctx->rank == 0 ? "GetUniqueId\n" : "", ctx->rank);
  dist_work *w = NULL;
  CHECK_OK(ctx, dist_broadcast(&t, 1, NULL, &w));
  CHECK_OK(ctx, dist_work_synchronize(w, 10000));
  dist_work_free(w);
  EXPECT_LOG(ctx, "Broadcast b0 b0 n=4 t=7 root=1\n");

  /* One operation, two devices: refused before any backend runs it. */
  dist_tensor outs[2] = {dist_tensor_1d(v, DIST_FLOAT32, 2), dist_tensor_1d(v + 2, DIST_FLOAT32, 2)};
  dist_tensor in = cuda(b1, DIST_FLOAT32, 2);
  int rc = dist_all_gather(outs, 2, &in, NULL, NULL);
  const char *msg = dist_pg_errmsg(NULL);
  CHECK(ctx, rc == DIST_E_INVAL && strstr(msg, "at ALL_GATHER (not started): ALL_GATHER mixes "
                                              "devices (inputs[0] on cuda:0, outputs[0] on cpu:0)"),
        "mixed devices: %s: %s", dist_status_name(rc), msg);
  EXPECT_NONE(ctx);

  /* A map without cuda: a cuda tensor fails naming the device. */
  dist_group_opts o = {.backend = "cpu:cpu"};
  dist_pg *g = NULL;
  CHECK_OK(ctx, dist_new_group(NULL, 0, &o, &g));
  rc = dist_all_reduce(&t, DIST_SUM, g, NULL);
  msg = dist_pg_errmsg(g);
  CHECK(ctx, rc == DIST_E_NOTSUP && strstr(msg, "maps no backend for cuda tensors") &&
                 strstr(msg, "'cpu:cpu'"), "cuda on cpu:cpu: %s: %s", dist_status_name(rc), msg);
  CHECK_OK(ctx, dist_all_reduce(&h, DIST_SUM, g, NULL)); /* its cpu side works */
  CHECK(ctx, v[0] == 4, "cpu sum on the new group %g", v[0]);
  EXPECT_NONE(ctx);
  /* A plain cpu group cannot reach cuda tensors at all. */
  o.backend = "gloo";
  dist_pg *c = NULL;
  CHECK_OK(ctx, dist_new_group(NULL, 0, &o, &c));
  CHECK(ctx, dist_all_reduce(&t, DIST_SUM, c, NULL) == DIST_E_INVAL, "cuda on gloo");
  EXPECT_NONE(ctx);
  /* A group given a device_id connects at once; the default group's
   * communicator exists (made lazily above), so it is split from it. Its
   * barrier runs on the bound device. */
  dist_group_opts bo = {.device_id = {DIST_DEVICE_CUDA, 0}};
  dist_pg *b = NULL;
  CHECK_OK(ctx, dist_new_group(NULL, 0, &bo, &b));
  int all[2] = {0, 1};
  EXPECT_LOG(ctx, "SetDevice 0\nCommSplit parent=0x1234 color=%d key=%d\n", color_of(all, 2),
             ctx->rank);
  CHECK_OK(ctx, dist_barrier(b, NULL));
  EXPECT_LOG(ctx, "AllReduce bar bar n=1 t=7 op=0\n");
  /* An abort of the map group reaches the inner NCCL group: pending work
   * fails with the reason and the communicator is aborted. */
  __atomic_store_n(&event_state, cudaErrorNotReady, __ATOMIC_SEQ_CST); /* the GPU never finishes */
  CHECK_OK(ctx, dist_all_reduce(&t, DIST_SUM, b, &w));
  CHECK_OK(ctx, dist_abort_group(b, "test stops it"));
  rc = dist_work_synchronize(w, 10000);
  CHECK(ctx, rc == DIST_E_ABORTED && strstr(dist_work_errmsg(w), "test stops it"), "%s: %s",
        dist_status_name(rc), dist_work_errmsg(w));
  dist_work_free(w);
  CHECK(ctx, dist_pg_async_error(b) == DIST_E_ABORTED, "async error %d", dist_pg_async_error(b));
  EXPECT_LOG(ctx, "AllReduce b0 b0 n=4 t=7 op=0\nCommAbort\n");
  __atomic_store_n(&event_state, cudaSuccess, __ATOMIC_SEQ_CST);
  dist_test_finish();
  return 0;
}

Test(nccl_map, a_map_runs_each_operation_on_its_devices_backend, .timeout = 60) {
  cr_assert_eq(dist_test_ranks(2, map_rank, NULL, 50), 0, "%s", dist_test_report());
}

/* --- DETAIL over NCCL ---------------------------------------------------- */

static int detail_rank(const dist_test_ctx *ctx) {
  dist__nccl_set_api(&fake);
  dist_set_debug_level(DIST_DEBUG_DETAIL);
  CHECK_OK(ctx, dist_test_init_pg(ctx, "cpu:cpu,cuda:nccl"));
  dist_tensor t = cuda(b0, DIST_FLOAT32, ctx->rank == 1 ? 8 : 4);
  int rc = dist_all_reduce(&t, DIST_SUM, NULL, NULL);
  const char *msg = dist_pg_errmsg(NULL);
  const char *head = "desync in group 0 (default, 2 ranks) at ALL_REDUCE #1: ranks disagree on "
                     "the count\n";
  CHECK(ctx, rc == DIST_E_DESYNC && !strncmp(msg, head, strlen(head)), "%s: %s",
        dist_status_name(rc), msg);
  CHECK(ctx, strstr(msg, "  rank 1: ALL_REDUCE float32[8] cuda:0 op=SUM (32 bytes)  <- count differs") &&
                 strstr(msg, "  rank 0: ALL_REDUCE float32[4] cuda:0 op=SUM (16 bytes)"),
        "the ranks' lines:\n%s", msg);
  EXPECT_NONE(ctx); /* reported before NCCL saw anything */
  /* A call that agrees runs on NCCL. */
  t = cuda(b0, DIST_FLOAT32, 4);
  CHECK_OK(ctx, dist_all_reduce(&t, DIST_SUM, NULL, NULL));
  EXPECT_LOG(ctx, "SetDevice 0\n%sCommInitRankConfig n=2 rank=%d\nAllReduce b0 b0 n=4 t=7 op=0\n",
             ctx->rank == 0 ? "GetUniqueId\n" : "", ctx->rank);
  /* A checked cpu group refuses cuda tensors as an unchecked one does
   * (the wrapper reaches both devices, the group it wraps only cpu). */
  dist_group_opts o = {.backend = "cpu"};
  dist_pg *g = NULL;
  CHECK_OK(ctx, dist_new_group(NULL, 0, &o, &g));
  rc = dist_all_reduce(&t, DIST_SUM, g, NULL);
  CHECK(ctx, rc == DIST_E_INVAL && strstr(dist_pg_errmsg(g), "backend cpu cannot reach cuda tensors"),
        "%s: %s", dist_status_name(rc), dist_pg_errmsg(g));
  dist_test_finish();
  return 0;
}

Test(nccl_map, a_cuda_desync_at_detail_is_reported_before_nccl_runs, .timeout = 60) {
  cr_assert_eq(dist_test_ranks(2, detail_rank, NULL, 50), 0, "%s", dist_test_report());
}

/* --- bound to a device: eager communicators, split ----------------------- */

static int init_bound(const dist_test_ctx *ctx, dist_store **st) {
  CHECK_OK(ctx, dist_test_tcp_store(ctx, st));
  dist_init_opts o = dist_init_opts_default();
  o.backend = "nccl";
  o.store = *st;
  o.rank = ctx->rank;
  o.world_size = ctx->world;
  o.timeout_ms = 20000;
  o.device_id = (dist_device){DIST_DEVICE_CUDA, 1};
  CHECK_OK(ctx, dist_init_process_group(&o));
  return 0;
}

static int bound_rank(const dist_test_ctx *ctx) {
  dist__nccl_set_api(&fake);
  n_devices = 2;
  dist_store *st = NULL;
  if (init_bound(ctx, &st))
    return 1;
  int me = ctx->rank;
  EXPECT_LOG(ctx, "SetDevice 1\n%sCommInitRankConfig n=3 rank=%d\n", me == 0 ? "GetUniqueId\n" : "",
             me);

  /* new_group of ranks 0 and 1: split; rank 2 splits with no colour. */
  dist_nccl_options no = {.split_share = DIST_OPT_ON, .cga_cluster_size = 3};
  dist_group_opts o = {.nccl_options = &no};
  int r01[2] = {0, 1};
  dist_pg *g = NULL;
  CHECK_OK(ctx, dist_new_group(r01, 2, &o, &g));
  if (me < 2) {
    EXPECT_LOG(ctx, "SetDevice 1\nCommSplit parent=0x1234 color=%d key=%d\n", color_of(r01, 2), me);
    CHECK(ctx, last_cfg.splitShare == 1 && last_cfg.cgaClusterSize == 3 &&
                   last_cfg.blocking == NCCL_CONFIG_UNDEF_INT,
          "config: splitShare %d cga %d blocking %d", last_cfg.splitShare, last_cfg.cgaClusterSize,
          last_cfg.blocking);
    CHECK(ctx, !strcmp(dist_get_backend(g), "nccl"), "backend %s", dist_get_backend(g));
    dist_tensor t = cuda(b2, DIST_FLOAT32, 4);
    CHECK_OK(ctx, dist_all_reduce(&t, DIST_MAX, g, NULL));
    EXPECT_LOG(ctx, "AllReduce b2 b2 n=4 t=7 op=2\n");
  } else {
    CHECK(ctx, g == DIST_GROUP_NON_MEMBER, "rank 2 is not a member");
    EXPECT_LOG(ctx, "CommSplit parent=0x1234 nocolor key=2\n");
  }

  /* Only its members create a local group: no split, a unique id. */
  int r12[2] = {1, 2};
  dist_group_opts lo = {.use_local_synchronization = true};
  dist_pg *l = NULL;
  if (me > 0) {
    CHECK_OK(ctx, dist_new_group(r12, 2, &lo, &l));
    EXPECT_LOG(ctx, "SetDevice 1\n%sCommInitRankConfig n=2 rank=%d\n",
               me == 1 ? "GetUniqueId\n" : "", me - 1);
  }

  /* A non-blocking group of a blocking parent: a unique id, polled ready. */
  dist_nccl_options nb = {.blocking = DIST_OPT_OFF};
  dist_group_opts bo = {.nccl_options = &nb};
  int r02[2] = {0, 2};
  dist_pg *n = NULL;
  comm_ready_after = 3;
  CHECK_OK(ctx, dist_new_group(r02, 2, &bo, &n));
  if (me != 1) {
    EXPECT_LOG(ctx, "SetDevice 1\n%sCommInitRankConfig n=2 rank=%d\n",
               me == 0 ? "GetUniqueId\n" : "", me / 2);
    CHECK(ctx, last_cfg.blocking == 0, "blocking %d", last_cfg.blocking);
    CHECK(ctx, comm_ready_after == 0, "the communicator was not polled until ready");
  } else {
    EXPECT_NONE(ctx); /* the members do not split: nothing to join */
  }
  comm_ready_after = 0;

  /* split_group of the default group: every rank splits, with its colour. */
  int s0[2] = {0, 1}, s1[1] = {2};
  const int *splits[2] = {s0, s1};
  size_t sizes[2] = {2, 1};
  dist_pg *sg = NULL;
  CHECK_OK(ctx, dist_split_group(NULL, splits, sizes, 2, NULL, &sg));
  EXPECT_LOG(ctx, "SetDevice 1\nCommSplit parent=0x1234 color=%d key=%d\n",
             me < 2 ? color_of(s0, 2) : color_of(s1, 1), me < 2 ? me : 0);
  return leave(ctx, st);
}

Test(nccl_map, a_bound_group_splits_its_communicator_for_new_groups, .timeout = 90) {
  cr_assert_eq(dist_test_ranks(3, bound_rank, NULL, 80), 0, "%s", dist_test_report());
}

/* --- the default backend follows the tensors (no backend named) ----------- */

/* arg: "visible" (the fake runtime sees one device), "none" (zero),
 * "bound" (one, and init names cuda:0 as device_id: bound at init), or
 * "bound-none" (device_id cuda:0 with none visible: the map is chosen, so
 * init fails naming the device, never a cpu group that refuses later). */
static int default_rank(const dist_test_ctx *ctx) {
  const char *how = ctx->arg;
  dist__nccl_set_api(&fake);
  n_devices = !strcmp(how, "visible") || !strcmp(how, "bound") ? 1 : 0;
  dist_store *st = NULL;
  CHECK_OK(ctx, dist_test_tcp_store(ctx, &st));
  dist_init_opts o = dist_init_opts_default();
  o.store = st; /* backend left NULL: the rule of torch's default */
  o.rank = ctx->rank;
  o.world_size = ctx->world;
  o.timeout_ms = 20000;
  if (!strncmp(how, "bound", 5))
    o.device_id = (dist_device){DIST_DEVICE_CUDA, 0};
  clear_log();
  int rc = dist_init_process_group(&o);
  if (!strcmp(how, "bound-none")) {
    CHECK(ctx, rc == DIST_E_NOTSUP && strstr(dist_last_errmsg(), "cuda: no CUDA device is "
                                             "visible (0 devices)"),
          "bound-none: %s: %s", dist_status_name(rc), dist_last_errmsg());
    dist_store_destroy(st);
    return 0;
  }
  CHECK(ctx, rc == DIST_OK, "%s: init: %s: %s", how, dist_status_name(rc), dist_last_errmsg());
  if (!strcmp(how, "bound")) /* bound at init: the communicator exists already */
    CHECK(ctx, strstr(log_buf, "SetDevice 0\n") && strstr(log_buf, "CommInitRankConfig n=2"),
          "bound: NCCL calls at init:\n%s", log_buf);
  bool map = strcmp(how, "none") != 0;
  CHECK(ctx, !strcmp(dist_get_backend(NULL), map ? "cpu:cpu,cuda:nccl" : "cpu"),
        "%s: default backend %s", how, dist_get_backend(NULL));
  float v[4] = {1, 2, 3, (float)ctx->rank};
  dist_tensor h = dist_tensor_1d(v, DIST_FLOAT32, 4);
  CHECK_OK(ctx, dist_all_reduce(&h, DIST_SUM, NULL, NULL)); /* cpu tensors: the cpu backend */
  CHECK(ctx, v[0] == 2 && v[3] == 1, "cpu sum %g %g", v[0], v[3]);
  dist_tensor t = cuda(b0, DIST_FLOAT32, 4);
  clear_log();
  rc = dist_all_reduce(&t, DIST_SUM, NULL, NULL);
  if (map) {
    CHECK(ctx, rc == DIST_OK, "%s: cuda all_reduce: %s: %s", how, dist_status_name(rc),
          dist_pg_errmsg(NULL));
    CHECK(ctx, strstr(log_buf, "AllReduce b0 b0 n=4 t=7 op=0\n") != NULL,
          "%s: NCCL calls:\n%s", how, log_buf);
  } else {
    CHECK(ctx, rc == DIST_E_INVAL && strstr(dist_pg_errmsg(NULL), "cannot reach cuda tensors"),
          "none: cuda all_reduce on the cpu default: %s: %s", dist_status_name(rc),
          dist_pg_errmsg(NULL));
    CHECK(ctx, !log_buf[0], "NCCL was called:\n%s", log_buf);
  }
  return leave(ctx, st);
}

Test(nccl_map, no_backend_named_with_a_visible_device_is_cpu_and_nccl, .timeout = 60) {
  cr_assert_eq(dist_test_ranks(2, default_rank, (void *)"visible", 50), 0, "%s", dist_test_report());
}

Test(nccl_map, no_backend_named_without_a_visible_device_is_cpu, .timeout = 60) {
  cr_assert_eq(dist_test_ranks(2, default_rank, (void *)"none", 50), 0, "%s", dist_test_report());
}

Test(nccl_map, no_backend_named_with_a_device_id_is_cpu_and_nccl, .timeout = 60) {
  cr_assert_eq(dist_test_ranks(2, default_rank, (void *)"bound", 50), 0, "%s", dist_test_report());
}

Test(nccl_map, no_backend_named_with_a_device_id_and_no_device_fails_naming_it, .timeout = 60) {
  cr_assert_eq(dist_test_ranks(1, default_rank, (void *)"bound-none", 50), 0, "%s",
               dist_test_report());
}
