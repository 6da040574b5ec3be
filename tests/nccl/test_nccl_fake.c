/* ctest: labels=unit timeout=120 */
/* The nccl backend against a fake NCCL (nccl_api.h's table replaced): no
 * GPU is needed. Rank 0 of a 2-rank group (the fake needs nobody else)
 * checks, call by call, that every operation becomes the NCCL calls it
 * should (grouped sends and receives, broadcasts, reductions, the barrier as
 * a one-element all_reduce), that every dtype and reduce op maps to NCCL's
 * type and op or is refused with DIST_E_NOTSUP and a message, that
 * PREMUL_SUM creates and destroys its op with the scalar in the dtype, and
 * the failure paths: a timeout aborts the communicator and breaks the
 * group, an asynchronous NCCL error does the same, an abort fails pending
 * work. Then NCCL's config from dist_nccl_options (and refusals of bad
 * values), device_id binding, a non-blocking communicator polled until
 * ready or aborted at the timeout, dist_is_nccl_available and the cuda
 * default backend with and without a device, and device maps that cannot
 * work. Tensors carry host pointers: the fake never touches them. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "backends/nccl/nccl_api.h"
#include "pg/pg_int.h"

#include "nccl_fake.h"

/* --- the group ----------------------------------------------------------- */

static dist_store *store;
static dist_pg *pg;

/* Rank 0 of a 2-rank nccl group with device and options (NULL: none);
 * returns init's status (pg set on success). */
static int try_group(int64_t timeout_ms, dist_device dev, const dist_nccl_options *o) {
  event_state = cudaSuccess;
  async_state = ncclSuccess;
  n_devices = 1;
  count_error = cudaSuccess;
  comm_ready_after = 0;
  clear_log();
  dist__nccl_set_api(&fake);
  cr_assert_eq(dist_store_hash_create(&store), DIST_OK);
  static const int ranks[2] = {0, 1};
  dist_backend_init_args a = {.rank = 0, .size = 2, .global_ranks = ranks, .global_rank = 0,
                              .store = store, .timeout_ms = timeout_ms,
                              .group_name = "fake", .group_id = 7,
                              .device_id = dev, .nccl_options = o};
  pg = NULL;
  return dist_pg_create(&dist__nccl_backend_ops, &a, &pg);
}

static void make_group(int64_t timeout_ms) {
  cr_assert_eq(try_group(timeout_ms, (dist_device){DIST_DEVICE_CPU, 0}, NULL), DIST_OK, "%s",
               dist_last_errmsg());
}

static void destroy_group(void) {
  dist_destroy_process_group(pg);
  dist_store_destroy(store);
  dist__nccl_set_api(NULL);
}

static dist_tensor cuda(void *p, dist_dtype dt, int64_t n) {
  dist_tensor t = dist_tensor_1d(p, dt, n);
  t.device.type = DIST_DEVICE_CUDA;
  return t;
}

/* Runs an operation from a clean log and compares the calls. */
#define EXPECT_CALLS(call, want)                                                  \
  do {                                                                            \
    clear_log();                                                                  \
    int rc_ = (call);                                                             \
    cr_assert_eq(rc_, DIST_OK, "%s: %s: %s", #call, dist_status_name(rc_),        \
                 dist_pg_errmsg(pg));                                             \
    cr_assert_str_eq(log_buf, want, "%s", #call);                                 \
  } while (0)

TestSuite(nccl_fake, .init = NULL, .fini = NULL);

Test(nccl_fake, init_shares_the_id_through_the_store_and_builds_one_communicator, .timeout = 30) {
  make_group(5000);
  cr_assert_str_eq(log_buf, "SetDevice 0\nGetUniqueId\nCommInitRankConfig n=2 rank=0\n");
  /* rank 1 of the same group reads the id rank 0 published */
  void *v = NULL;
  size_t len = 0;
  cr_assert_eq(dist_store_get(store, "nccl/uid", &v, &len), DIST_OK);
  cr_assert_eq(len, sizeof(ncclUniqueId));
  cr_assert_eq(((char *)v)[0], 'u');
  dist_free(v);
  clear_log();
  destroy_group();
  cr_assert_str_eq(log_buf, "CommDestroy\n");
}

Test(nccl_fake, every_operation_maps_to_its_nccl_calls, .timeout = 30) {
  make_group(5000);
  dist_tensor t0 = cuda(b0, DIST_FLOAT32, 4), t1 = cuda(b1, DIST_FLOAT32, 4);
  dist_tensor t2 = cuda(b2, DIST_FLOAT32, 4), t3 = cuda(b3, DIST_FLOAT32, 4);
  dist_tensor pair[2] = {t1, t2}, pair_in[2] = {t2, t3};
  dist_tensor big = cuda(b1, DIST_FLOAT32, 8);
  EXPECT_CALLS(dist_all_reduce(&t0, DIST_SUM, pg, NULL), "AllReduce b0 b0 n=4 t=7 op=0\n");
  EXPECT_CALLS(dist_broadcast(&t0, 1, pg, NULL), "Broadcast b0 b0 n=4 t=7 root=1\n");
  EXPECT_CALLS(dist_reduce(&t0, 1, DIST_MAX, pg, NULL), "Reduce b0 b0 n=4 t=7 op=2 root=1\n");
  EXPECT_CALLS(dist_all_gather_into_tensor(&big, &t0, pg, NULL), "AllGather b0 b1 n=4 t=7\n");
  EXPECT_CALLS(dist_reduce_scatter_tensor(&t0, &big, DIST_SUM, pg, NULL),
               "ReduceScatter b1 b0 n=4 t=7 op=0\n");
  EXPECT_CALLS(dist_all_gather(pair, 2, &t0, pg, NULL),
               "GroupStart\nBroadcast b0 b1 n=4 t=7 root=0\nBroadcast b2 b2 n=4 t=7 root=1\n"
               "GroupEnd\n");
  EXPECT_CALLS(dist_reduce_scatter(&t0, pair_in, 2, DIST_MIN, pg, NULL),
               "GroupStart\nReduce b2 b0 n=4 t=7 op=3 root=0\nReduce b3 b0 n=4 t=7 op=3 root=1\n"
               "GroupEnd\n");
  EXPECT_CALLS(dist_gather(&t0, pair, 2, 0, pg, NULL),
               "GroupStart\nRecv b1 n=4 t=7 peer=0\nRecv b2 n=4 t=7 peer=1\nSend b0 n=4 t=7 peer=0\n"
               "GroupEnd\n");
  EXPECT_CALLS(dist_gather(&t0, NULL, 0, 1, pg, NULL), "GroupStart\nSend b0 n=4 t=7 peer=1\nGroupEnd\n");
  EXPECT_CALLS(dist_scatter(&t0, pair_in, 2, 0, pg, NULL),
               "GroupStart\nSend b2 n=4 t=7 peer=0\nSend b3 n=4 t=7 peer=1\nRecv b0 n=4 t=7 peer=0\n"
               "GroupEnd\n");
  EXPECT_CALLS(dist_all_to_all(pair, 2, pair_in, 2, pg, NULL),
               "GroupStart\nSend b2 n=4 t=7 peer=0\nRecv b1 n=4 t=7 peer=0\nSend b3 n=4 t=7 peer=1\n"
               "Recv b2 n=4 t=7 peer=1\nGroupEnd\n");
  dist_tensor a2a_in = cuda(b0, DIST_FLOAT32, 6), a2a_out = cuda(b1, DIST_FLOAT32, 6);
  int64_t in_s[2] = {1, 5}, out_s[2] = {4, 2};
  EXPECT_CALLS(dist_all_to_all_single(&a2a_out, &a2a_in, out_s, in_s, pg, NULL),
               "GroupStart\nSend b0 n=4 t=1 peer=0\nRecv b1 n=16 t=1 peer=0\n"
               "Send b0+ n=20 t=1 peer=1\nRecv b1+ n=8 t=1 peer=1\nGroupEnd\n");
  EXPECT_CALLS(dist_barrier(pg, NULL), "AllReduce bar bar n=1 t=7 op=0\n");
  EXPECT_CALLS(dist_send(&t0, 1, pg, 0), "Send b0 n=4 t=7 peer=1\n");
  EXPECT_CALLS(dist_recv(&t0, 1, pg, 0, NULL), "Recv b0 n=4 t=7 peer=1\n");
  dist_p2p_op ops[2] = {{true, &t0, 1, 0, pg}, {false, &t1, 1, 0, pg}};
  dist_work *w = NULL;
  EXPECT_CALLS(dist_batch_isend_irecv(ops, 2, &w),
               "GroupStart\nSend b0 n=4 t=7 peer=1\nRecv b1 n=4 t=7 peer=1\nGroupEnd\n");
  cr_assert_eq(dist_work_synchronize(w, 5000), DIST_OK, "%s", dist_work_errmsg(w));
  dist_work_free(w);
  cr_assert_eq(dist_recv(&t0, DIST_ANY_SOURCE, pg, 0, NULL), DIST_E_NOTSUP);
  cr_assert(strstr(dist_pg_errmsg(pg), "any source"), "%s", dist_pg_errmsg(pg));
  destroy_group();
}

/* What NCCL should be asked for: an independent table of NCCL's enums. */
static int want_type(dist_dtype dt) {
  switch (dt) {
  case DIST_FLOAT16: return 6;
  case DIST_BFLOAT16: return 9;
  case DIST_FLOAT32: case DIST_COMPLEX64: return 7;
  case DIST_FLOAT64: case DIST_COMPLEX128: return 8;
  case DIST_INT8: return 0;
  case DIST_UINT8: case DIST_BOOL: return 1;
  case DIST_INT32: return 2;
  case DIST_INT64: return 4;
  default: return -1; /* int16: none */
  }
}

static int want_op(dist_dtype dt, dist_redop_kind k) {
  bool bitwise = k == DIST_REDOP_BAND || k == DIST_REDOP_BOR || k == DIST_REDOP_BXOR;
  bool cplx = dt == DIST_COMPLEX64 || dt == DIST_COMPLEX128;
  if (dt == DIST_BOOL) {
    if (k == DIST_REDOP_SUM || k == DIST_REDOP_MAX || k == DIST_REDOP_BOR) return 2;
    if (k == DIST_REDOP_PRODUCT || k == DIST_REDOP_MIN || k == DIST_REDOP_BAND) return 3;
    return -1;
  }
  if (bitwise || want_type(dt) < 0)
    return -1;
  if (cplx && k != DIST_REDOP_SUM && k != DIST_REDOP_AVG && k != DIST_REDOP_PREMUL_SUM)
    return -1;
  switch (k) {
  case DIST_REDOP_SUM: return 0;
  case DIST_REDOP_PRODUCT: return 1;
  case DIST_REDOP_MAX: return 2;
  case DIST_REDOP_MIN: return 3;
  case DIST_REDOP_AVG: return 4;
  default: return (int)ncclNumOps; /* PREMUL_SUM: the op it created */
  }
}

Test(nccl_fake, every_dtype_and_reduce_op_maps_or_is_refused, .timeout = 60) {
  make_group(5000);
  int mapped = 0, refused = 0;
  for (int d = 0; d < DIST_DTYPE_COUNT_; d++)
    for (int k = 0; k < DIST_REDOP_COUNT_; k++) {
      dist_redop op = {(dist_redop_kind)k, 0.5};
      if (dist_redop_check(op, (dist_dtype)d) != DIST_OK)
        continue;
      dist_tensor t = cuda(b0, (dist_dtype)d, 3);
      clear_log();
      int rc = dist_all_reduce(&t, op, pg, NULL);
      int wop = want_op((dist_dtype)d, (dist_redop_kind)k);
      const char *dn = dist_dtype_name((dist_dtype)d), *on = dist_redop_name((dist_redop_kind)k);
      if (wop < 0) {
        cr_assert_eq(rc, DIST_E_NOTSUP, "%s %s: %s", dn, on, dist_status_name(rc));
        cr_assert(strstr(dist_pg_errmsg(pg), "NCCL cannot reduce") && strstr(dist_pg_errmsg(pg), dn),
                  "%s %s: %s", dn, on, dist_pg_errmsg(pg));
        cr_assert_str_eq(log_buf, "", "%s %s reached NCCL", dn, on);
        refused++;
        continue;
      }
      cr_assert_eq(rc, DIST_OK, "%s %s: %s", dn, on, dist_pg_errmsg(pg));
      bool cplx = d == DIST_COMPLEX64 || d == DIST_COMPLEX128;
      char want[512];
      int off = 0;
      if (k == DIST_REDOP_PREMUL_SUM) {
        double s = d == DIST_FLOAT16 ? 0x3800 : d == DIST_BFLOAT16 ? 0x3f00 : 0.5;
        off = snprintf(want, sizeof want, "RedOpCreatePreMulSum t=%d res=1 scalar=%g\n",
                       want_type((dist_dtype)d), s);
      }
      off += snprintf(want + off, sizeof want - (size_t)off, "AllReduce b0 b0 n=%d t=%d op=%d\n",
                      cplx ? 6 : 3, want_type((dist_dtype)d), wop);
      if (k == DIST_REDOP_PREMUL_SUM)
        snprintf(want + off, sizeof want - (size_t)off, "RedOpDestroy op=%d\n", (int)ncclNumOps);
      cr_assert_str_eq(log_buf, want, "%s %s", dn, on);
      mapped++;
    }
  cr_assert_gt(mapped, 40);
  cr_assert_gt(refused, 10);
  destroy_group();
}

Test(nccl_fake, a_timeout_aborts_the_communicator_and_breaks_the_group, .timeout = 30) {
  make_group(300);
  event_state = cudaErrorNotReady; /* the GPU never finishes */
  dist_tensor t = cuda(b0, DIST_FLOAT32, 4);
  clear_log();
  int rc = dist_all_reduce(&t, DIST_SUM, pg, NULL);
  cr_assert_eq(rc, DIST_E_TIMEOUT, "%s", dist_status_name(rc));
  char first[1024];
  snprintf(first, sizeof first, "%s", dist_pg_errmsg(pg));
  cr_assert(strstr(first, "ALL_REDUCE") && strstr(first, "timed out after 300 ms"), "%s", first);
  cr_assert_str_eq(log_buf, "AllReduce b0 b0 n=4 t=7 op=0\nCommAbort\n");
  clear_log();
  rc = dist_broadcast(&t, 0, pg, NULL); /* fails at once, NCCL untouched */
  cr_assert_eq(rc, DIST_E_TIMEOUT);
  /* with the first failure's cause, under the broadcast's own header */
  const char *cause = strstr(first, "ALL_REDUCE float32[4]");
  cr_assert(cause && strstr(dist_pg_errmsg(pg), cause), "%s", dist_pg_errmsg(pg));
  cr_assert_str_eq(log_buf, "");
  clear_log();
  destroy_group();
  cr_assert_str_eq(log_buf, "", "an aborted communicator is not destroyed again");
}

Test(nccl_fake, an_asynchronous_nccl_error_fails_the_work_and_aborts, .timeout = 30) {
  make_group(60000);
  event_state = cudaErrorNotReady;
  async_state = ncclSystemError;
  dist_tensor t = cuda(b0, DIST_FLOAT32, 4);
  dist_work *w = NULL;
  clear_log();
  cr_assert_eq(dist_all_reduce(&t, DIST_SUM, pg, &w), DIST_OK);
  cr_assert_eq(dist_work_synchronize(w, 10000), DIST_E_BACKEND);
  cr_assert(strstr(dist_work_errmsg(w), "asynchronous error: fake system error"), "%s",
            dist_work_errmsg(w));
  cr_assert_str_eq(log_buf, "AllReduce b0 b0 n=4 t=7 op=0\nCommAbort\n");
  dist_work_free(w);
  destroy_group();
}

Test(nccl_fake, async_works_complete_in_order_and_abort_fails_pending_ones, .timeout = 30) {
  make_group(60000);
  dist_tensor t = cuda(b0, DIST_FLOAT32, 4);
  dist_work *w[3];
  for (int i = 0; i < 3; i++)
    cr_assert_eq(dist_all_reduce(&t, DIST_SUM, pg, &w[i]), DIST_OK);
  for (int i = 0; i < 3; i++) {
    cr_assert_eq(dist_work_synchronize(w[i], 10000), DIST_OK, "%s", dist_work_errmsg(w[i]));
    dist_work_free(w[i]);
  }
  __atomic_store_n(&event_state, cudaErrorNotReady, __ATOMIC_SEQ_CST);
  dist_work *p = NULL;
  cr_assert_eq(dist_all_reduce(&t, DIST_SUM, pg, &p), DIST_OK);
  while (__atomic_load_n(&n_event_queries, __ATOMIC_SEQ_CST) == 0)
    ; /* the progress thread is polling it */
  clear_log();
  cr_assert_eq(dist_abort_group(pg, "test says stop"), DIST_OK);
  cr_assert_eq(dist_work_synchronize(p, 10000), DIST_E_ABORTED);
  cr_assert(strstr(dist_work_errmsg(p), "test says stop"), "%s", dist_work_errmsg(p));
  cr_assert_str_eq(log_buf, "CommAbort\n");
  dist_work_free(p);
  destroy_group();
  cr_assert_eq(__atomic_load_n(&n_events, __ATOMIC_SEQ_CST), 0, "events leaked");
}

Test(nccl_fake, host_tensors_are_refused, .timeout = 30) {
  make_group(5000);
  dist_tensor t = dist_tensor_1d(b0, DIST_FLOAT32, 4);
  clear_log();
  cr_assert_eq(dist_all_reduce(&t, DIST_SUM, pg, NULL), DIST_E_INVAL);
  cr_assert_str_eq(log_buf, "");
  destroy_group();
}

/* --- options, binding, readiness ------------------------------------------ */

static void end_failed_group(void) {
  cr_assert_null(pg);
  dist_store_destroy(store);
  dist__nccl_set_api(NULL);
}

Test(nccl_fake, nccl_options_reach_the_communicator_config, .timeout = 30) {
  make_group(5000); /* none: every field NCCL's */
  cr_assert_eq(last_cfg.blocking, NCCL_CONFIG_UNDEF_INT);
  cr_assert_eq(last_cfg.cgaClusterSize, NCCL_CONFIG_UNDEF_INT);
  cr_assert_eq(last_cfg.splitShare, NCCL_CONFIG_UNDEF_INT);
  cr_assert_eq(last_cfg.minCTAs, NCCL_CONFIG_UNDEF_INT);
  destroy_group();
  dist_nccl_options o = {.blocking = DIST_OPT_ON, .cga_cluster_size = 2,
                         .high_priority_stream = DIST_OPT_ON, .split_share = DIST_OPT_OFF};
  cr_assert_eq(try_group(5000, (dist_device){DIST_DEVICE_CPU, 0}, &o), DIST_OK, "%s",
               dist_last_errmsg());
  cr_assert_eq(last_cfg.blocking, 1);
  cr_assert_eq(last_cfg.cgaClusterSize, 2);
  cr_assert_eq(last_cfg.splitShare, 0);
  /* the stream takes the device's greatest priority (the fake's -5) */
  cr_assert_str_eq(log_buf, "SetDevice 0\nGetUniqueId\nCommInitRankConfig n=2 rank=0\n"
                            "StreamCreateWithPriority flags=1 priority=-5\n");
  destroy_group();
  o = (dist_nccl_options){.cga_cluster_size = DIST_NCCL_CGA_NONE, .split_share = DIST_OPT_ON};
  cr_assert_eq(try_group(5000, (dist_device){DIST_DEVICE_CPU, 0}, &o), DIST_OK);
  cr_assert_eq(last_cfg.cgaClusterSize, 0, "no cluster is NCCL's 0");
  cr_assert_eq(last_cfg.splitShare, 1);
  destroy_group();
}

Test(nccl_fake, bad_nccl_options_fail_before_nccl_is_called, .timeout = 30) {
  dist_nccl_options bad[3] = {{.cga_cluster_size = 9}, {.blocking = 3}, {.split_share = -1}};
  const char *says[3] = {"cga_cluster_size = 9", "blocking = 3", "split_share = -1"};
  for (int i = 0; i < 3; i++) {
    cr_assert_eq(try_group(5000, (dist_device){DIST_DEVICE_CPU, 0}, &bad[i]), DIST_E_INVAL);
    cr_assert(strstr(dist_last_errmsg(), says[i]), "%s", dist_last_errmsg());
    cr_assert_str_eq(log_buf, "");
    end_failed_group();
  }
}

Test(nccl_fake, device_id_binds_the_rank_to_that_device, .timeout = 30) {
  n_devices = 4;
  cr_assert_eq(try_group(5000, (dist_device){DIST_DEVICE_CUDA, 3}, NULL), DIST_E_INVAL);
  cr_assert(strstr(dist_last_errmsg(), "device_id cuda:3, but 1 CUDA device(s) are visible"),
            "%s", dist_last_errmsg());
  end_failed_group();
  dist__nccl_set_api(&fake);
  cr_assert_eq(dist_store_hash_create(&store), DIST_OK);
  static const int ranks[2] = {0, 1};
  n_devices = 4;
  clear_log();
  dist_backend_init_args a = {.rank = 0, .size = 2, .global_ranks = ranks, .store = store,
                              .timeout_ms = 5000, .group_name = "bound",
                              .device_id = {DIST_DEVICE_CUDA, 3}};
  cr_assert_eq(dist_pg_create(&dist__nccl_backend_ops, &a, &pg), DIST_OK, "%s",
               dist_last_errmsg());
  cr_assert_str_eq(log_buf, "SetDevice 3\nGetUniqueId\nCommInitRankConfig n=2 rank=0\n");
  destroy_group();
}

Test(nccl_fake, a_non_blocking_communicator_is_polled_until_ready_or_the_timeout, .timeout = 30) {
  dist_nccl_options o = {.blocking = DIST_OPT_OFF};
  /* init answers ncclInProgress (the fake, for blocking 0), ready at once */
  cr_assert_eq(try_group(5000, (dist_device){DIST_DEVICE_CPU, 0}, &o), DIST_OK);
  cr_assert_eq(last_cfg.blocking, 0);
  destroy_group();
  /* ready after 5 polls */
  event_state = cudaSuccess;
  async_state = ncclSuccess;
  clear_log();
  dist__nccl_set_api(&fake);
  cr_assert_eq(dist_store_hash_create(&store), DIST_OK);
  static const int ranks[2] = {0, 1};
  dist_backend_init_args a = {.rank = 0, .size = 2, .global_ranks = ranks, .store = store,
                              .timeout_ms = 5000, .group_name = "nb", .nccl_options = &o};
  comm_ready_after = 5;
  cr_assert_eq(dist_pg_create(&dist__nccl_backend_ops, &a, &pg), DIST_OK, "%s",
               dist_last_errmsg());
  cr_assert_eq(comm_ready_after, 0, "init returned before the communicator was ready");
  destroy_group();
  /* never ready: the group's timeout, then the communicator is aborted */
  dist__nccl_set_api(&fake);
  cr_assert_eq(dist_store_hash_create(&store), DIST_OK);
  clear_log();
  a.store = store;
  a.timeout_ms = 200;
  comm_ready_after = -1;
  pg = NULL;
  cr_assert_eq(dist_pg_create(&dist__nccl_backend_ops, &a, &pg), DIST_E_TIMEOUT);
  cr_assert(strstr(dist_last_errmsg(), "ncclCommInitRankConfig was not ready within 200 ms"),
            "%s", dist_last_errmsg());
  cr_assert_str_eq(log_buf, "SetDevice 0\nGetUniqueId\nCommInitRankConfig n=2 rank=0\nCommAbort\n");
  comm_ready_after = 0;
  end_failed_group();
}

/* --- availability ---------------------------------------------------------- */

Test(nccl_fake, is_nccl_available_and_the_cuda_default_backend_tell_the_truth, .timeout = 30) {
  dist__nccl_set_api(&fake);
  const char *b = NULL;
  n_devices = 2;
  count_error = cudaSuccess;
  cr_assert(dist_is_nccl_available());
  cr_assert_eq(dist_get_default_backend_for_device("cuda:1", &b), DIST_OK);
  cr_assert_str_eq(b, "nccl");
  n_devices = 0; /* the libraries load, no device */
  cr_assert(!dist_is_nccl_available());
  cr_assert(strstr(dist_last_errmsg(), "NCCL is not available: no CUDA device is visible "
                                       "(0 devices)"), "%s", dist_last_errmsg());
  b = NULL;
  cr_assert_eq(dist_get_default_backend_for_device("cuda", &b), DIST_E_NOTSUP);
  cr_assert_null(b);
  cr_assert(strstr(dist_last_errmsg(), "no backend for cuda here: NCCL is not available: no CUDA "
                                       "device is visible"), "%s", dist_last_errmsg());
  count_error = cudaErrorNoDevice; /* what a machine without a driver answers */
  cr_assert(!dist_is_nccl_available());
  cr_assert(strstr(dist_last_errmsg(), "fake: no CUDA-capable device"), "%s", dist_last_errmsg());
  cr_assert_eq(dist_get_default_backend_for_device("cpu", &b), DIST_OK, "cpu needs no GPU");
  cr_assert_str_eq(b, "cpu");
  count_error = cudaSuccess;
  n_devices = 1;
  dist__nccl_set_api(NULL);
  /* The real libraries: this project's machines have no GPU, so false with
   * a reason (the gpu suite checks agreement with the runtime itself). */
  if (!dist_is_nccl_available())
    cr_assert(strstr(dist_last_errmsg(), "NCCL is not available: "), "%s", dist_last_errmsg());
}

/* --- device maps: malformed specs ----------------------------------------- */

Test(nccl_fake, device_maps_that_cannot_work_fail_init_with_a_message, .timeout = 30) {
  struct { const char *spec; int rc; const char *says; } cases[] = {
      {"cuda:gloo", DIST_E_NOTSUP, "gloo cannot reach cuda tensors"},
      {"cpu:nccl", DIST_E_NOTSUP, "nccl cannot reach cpu tensors"},
      {"tpu:cpu", DIST_E_INVAL, "unknown device 'tpu'"},
      {"cpu:cpu,CPU:gloo", DIST_E_INVAL, "device cpu is mapped twice"},
      {"cpu:cpu,cuda:", DIST_E_INVAL, "'cuda:' is not device:backend"},
      {"cpu:cpu,cuda:nope", DIST_E_NOTSUP, "'nope' is not available in this build"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    dist_init_opts o = dist_init_opts_default();
    o.backend = cases[i].spec;
    o.init_method = "tcp://127.0.0.1:1?rank=0&world_size=1"; /* never reached */
    cr_assert_eq(dist_init_process_group(&o), cases[i].rc, "%s: %s", cases[i].spec,
                 dist_last_errmsg());
    cr_assert(strstr(dist_last_errmsg(), cases[i].says), "%s: %s", cases[i].spec,
              dist_last_errmsg());
  }
}


/* The real libraries on a machine without a GPU (this project's): a map's
 * cpu side works, its first cuda operation fails with NCCL's reason. */
Test(nccl_fake, without_a_gpu_a_map_runs_cpu_and_refuses_cuda_saying_why, .timeout = 30) {
  dist__nccl_set_api(NULL);
  if (dist_is_nccl_available())
    cr_skip_test("a GPU is visible here: this test is about machines without one");
  char why[512]; /* what is missing: the libraries, or a device */
  const char *pre = "NCCL is not available: ", *m = strstr(dist_last_errmsg(), pre);
  cr_assert(m, "%s", dist_last_errmsg());
  snprintf(why, sizeof why, "%s", m + strlen(pre));
  dist_store *st;
  cr_assert_eq(dist_store_hash_create(&st), DIST_OK);
  dist_init_opts o = dist_init_opts_default();
  o.backend = "cpu:cpu,cuda:nccl";
  o.store = st;
  o.rank = 0;
  o.world_size = 1;
  cr_assert_eq(dist_init_process_group(&o), DIST_OK, "%s", dist_last_errmsg());
  float v[2] = {1, 2};
  dist_tensor h = dist_tensor_1d(v, DIST_FLOAT32, 2);
  cr_assert_eq(dist_all_reduce(&h, DIST_SUM, NULL, NULL), DIST_OK, "%s", dist_pg_errmsg(NULL));
  cr_assert(v[0] == 1 && v[1] == 2);
  dist_tensor t = cuda(b0, DIST_FLOAT32, 2);
  cr_assert_eq(dist_all_reduce(&t, DIST_SUM, NULL, NULL), DIST_E_NOTSUP);
  cr_assert(strstr(dist_pg_errmsg(NULL), why), "%s\nwant: %s", dist_pg_errmsg(NULL), why);
  cr_assert_eq(dist_all_reduce(&h, DIST_SUM, NULL, NULL), DIST_OK, "still usable on cpu");
  dist_destroy_process_group(NULL);
  dist_store_destroy(st);
}
