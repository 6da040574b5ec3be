/* ctest: labels=unit timeout=120 */
/* CUDA stream semantics and GPU progress of the nccl backend, against the
 * fake NCCL and CUDA runtime (nccl_fake.h; no GPU): every collective
 * records an event on the caller's current stream, makes the group's stream
 * wait for it, records its start, launches, records its end, in that order;
 * the current stream is per thread (legacy default stream unless set);
 * dist_work_wait on a CUDA work makes the current stream wait for the end
 * event and returns while the GPU is still busy, dist_work_synchronize
 * blocks the host until the end event completes; dist_pg_gpu_progress
 * reports the watchdog's four states (enqueued on the host, launched but
 * not started, running, completed) from the events; and the GPU start and
 * end reach observers as DIST_EV_OP_GPU on the user's group. The fake's
 * GPU "reaches" event number N when the test sets gpu_done_upto = N. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <string.h>

#include "backends/nccl/nccl_api.h"
#include "pg/pg_int.h"

#include "nccl_fake.h"

static dist_store *store;
static dist_pg *pg;

/* Rank 0 of a 2-rank nccl group on the fake, streams named grp/anchor. */
static void make_group(int64_t timeout_ms) {
  event_state = cudaSuccess;
  async_state = ncclSuccess;
  gpu_done_upto = -1000000;
  reset_streams();
  dist__nccl_set_api(&fake);
  cr_assert_eq(dist_store_hash_create(&store), DIST_OK);
  static const int ranks[2] = {0, 1};
  dist_backend_init_args a = {.rank = 0, .size = 2, .global_ranks = ranks, .store = store,
                              .timeout_ms = timeout_ms, .group_name = "streams", .group_id = 3};
  cr_assert_eq(dist_pg_create(&dist__nccl_backend_ops, &a, &pg), DIST_OK, "%s",
               dist_last_errmsg());
  log_streams = true;
  clear_log();
  mark_events();
}

static void destroy_group(void) {
  log_streams = false;
  dist_destroy_process_group(pg);
  dist_store_destroy(store);
  dist__nccl_set_api(NULL);
  dist_cuda_set_current_stream(NULL);
}

static dist_tensor cuda(void *p, int64_t n) {
  dist_tensor t = dist_tensor_1d(p, DIST_FLOAT32, n);
  t.device.type = DIST_DEVICE_CUDA;
  return t;
}

/* The calls since the last check, compared, then a fresh log and event
 * numbering. */
#define EXPECT_LOG(want)                                                       \
  do {                                                                         \
    cr_assert_str_eq(log_buf, want);                                           \
    clear_log();                                                               \
    mark_events();                                                             \
  } while (0)

static void *other_threads_stream(void *arg) {
  *(void **)arg = dist_cuda_current_stream();
  return NULL;
}

Test(nccl_stream, a_collective_is_ordered_after_the_callers_current_stream, .timeout = 30) {
  make_group(5000);
  dist_tensor t = cuda(b0, 4);
  /* Default: the legacy default stream. */
  cr_assert_eq(dist_all_reduce(&t, DIST_SUM, pg, NULL), DIST_OK, "%s", dist_pg_errmsg(pg));
  EXPECT_LOG("EventRecord e1 legacy\nStreamWaitEvent grp e1\nEventRecord e2 grp\n"
             "AllReduce b0 b0 n=4 t=7 op=0\nEventRecord e3 grp\n");
  /* The stream this thread made current; grouped calls sit between start
   * and end as one operation. */
  cr_assert_eq(dist_cuda_set_current_stream(USER_STREAM), DIST_OK);
  cr_assert_eq(dist_cuda_current_stream(), USER_STREAM);
  dist_tensor outs[2] = {cuda(b1, 4), cuda(b2, 4)};
  cr_assert_eq(dist_all_gather(outs, 2, &t, pg, NULL), DIST_OK, "%s", dist_pg_errmsg(pg));
  EXPECT_LOG("EventRecord e1 user\nStreamWaitEvent grp e1\nEventRecord e2 grp\nGroupStart\n"
             "Broadcast b0 b1 n=4 t=7 root=0\nBroadcast b2 b2 n=4 t=7 root=1\nGroupEnd\n"
             "EventRecord e3 grp\n");
  /* Another thread's current stream is its own: still the default. */
  void *seen = USER_STREAM;
  pthread_t th;
  pthread_create(&th, NULL, other_threads_stream, &seen);
  pthread_join(th, NULL);
  cr_assert_null(seen);
  /* Back to the default. */
  dist_cuda_set_current_stream(NULL);
  cr_assert_eq(dist_barrier(pg, NULL), DIST_OK);
  EXPECT_LOG("EventRecord e1 legacy\nStreamWaitEvent grp e1\nEventRecord e2 grp\n"
             "AllReduce bar bar n=1 t=7 op=0\nEventRecord e3 grp\n");
  destroy_group();
}

Test(nccl_stream, wait_makes_the_current_stream_wait_and_does_not_block_the_host,
     .timeout = 30) {
  make_group(60000);
  __atomic_store_n(&event_state, cudaErrorNotReady, __ATOMIC_SEQ_CST); /* the GPU is busy */
  dist_tensor t = cuda(b0, 4);
  dist_work *w = NULL;
  cr_assert_eq(dist_all_reduce(&t, DIST_SUM, pg, &w), DIST_OK);
  EXPECT_LOG("EventRecord e1 legacy\nStreamWaitEvent grp e1\nEventRecord e2 grp\n"
             "AllReduce b0 b0 n=4 t=7 op=0\nEventRecord e3 grp\n");
  /* e3 (the end) is now e-2 after the mark. */
  dist_cuda_set_current_stream(USER_STREAM);
  cr_assert_eq(dist_work_wait(w, -1), DIST_OK, "%s", dist_last_errmsg());
  cr_assert_str_eq(log_buf, "StreamWaitEvent user e0\n", "the end event, on the user's stream");
  cr_assert(!dist_work_is_completed(w), "wait returned while the GPU has not finished");
  /* The host-blocking form does block: it times out while the GPU is busy. */
  clear_log();
  cr_assert_eq(dist_work_synchronize(w, 100), DIST_E_TIMEOUT);
  cr_assert_str_eq(log_buf, "", "synchronize makes no stream wait");
  cr_assert(!dist_work_is_completed(w));
  /* The GPU finishes (every event so far): synchronize returns it. */
  __atomic_store_n(&gpu_done_upto, 0, __ATOMIC_SEQ_CST);
  cr_assert_eq(dist_work_synchronize(w, -1), DIST_OK, "%s", dist_work_errmsg(w));
  cr_assert(dist_work_is_completed(w) && dist_work_is_success(w));
  /* A completed work needs no stream wait. */
  clear_log();
  cr_assert_eq(dist_work_wait(w, -1), DIST_OK);
  cr_assert_str_eq(log_buf, "");
  dist_work_free(w);
  destroy_group();
  cr_assert_eq(__atomic_load_n(&n_events, __ATOMIC_SEQ_CST), 0, "events leaked");
}

Test(nccl_stream, a_failed_work_reports_its_error_from_wait, .timeout = 30) {
  make_group(200);
  __atomic_store_n(&event_state, cudaErrorNotReady, __ATOMIC_SEQ_CST);
  dist_tensor t = cuda(b0, 4);
  dist_work *w = NULL;
  cr_assert_eq(dist_all_reduce(&t, DIST_SUM, pg, &w), DIST_OK);
  /* The progress thread times it out; synchronize sees the failure, and a
   * wait afterwards reports it instead of a stream wait. */
  cr_assert_eq(dist_work_synchronize(w, -1), DIST_E_TIMEOUT);
  clear_log();
  cr_assert_eq(dist_work_wait(w, -1), DIST_E_TIMEOUT);
  cr_assert(strstr(dist_work_errmsg(w), "timed out after 200 ms"), "%s", dist_work_errmsg(w));
  cr_assert_null(strstr(log_buf, "StreamWaitEvent"), "%s", log_buf);
  dist_work_free(w);
  destroy_group();
}

static dist_gpu_progress progress(uint64_t seq) {
  dist_gpu_progress p;
  int rc = dist_pg_gpu_progress(pg, seq, &p);
  cr_assert_eq(rc, DIST_OK, "%s", dist_last_errmsg());
  return p;
}

Test(nccl_stream, the_watchdog_sees_enqueued_launched_running_and_completed, .timeout = 30) {
  make_group(60000);
  __atomic_store_n(&event_state, cudaErrorNotReady, __ATOMIC_SEQ_CST);
  /* Called, not launched yet (#1 has not reached the backend). */
  cr_assert_eq(progress(1).state, DIST_GPU_ENQUEUED);
  dist_tensor t = cuda(b0, 4);
  dist_work *w = NULL;
  int64_t before = dist_clock_ns();
  cr_assert_eq(dist_all_reduce(&t, DIST_SUM, pg, &w), DIST_OK); /* e1 ready, e2 start, e3 end */
  dist_gpu_progress p = progress(1);
  cr_assert_eq(p.state, DIST_GPU_LAUNCHED, "%s", dist_gpu_state_name(p.state));
  cr_assert_geq(p.launched_ns, before);
  cr_assert_eq(p.gpu_start_ns, 0);
  /* The caller's stream is past (e1) but the group's stream has not
   * reached the start: still launched. */
  __atomic_store_n(&gpu_done_upto, 1, __ATOMIC_SEQ_CST);
  cr_assert_eq(progress(1).state, DIST_GPU_LAUNCHED);
  __atomic_store_n(&gpu_done_upto, 2, __ATOMIC_SEQ_CST);
  p = progress(1);
  cr_assert_eq(p.state, DIST_GPU_RUNNING, "%s", dist_gpu_state_name(p.state));
  cr_assert_gt(p.gpu_start_ns, 0);
  cr_assert_eq(p.gpu_end_ns, 0);
  __atomic_store_n(&gpu_done_upto, 3, __ATOMIC_SEQ_CST);
  p = progress(1);
  cr_assert_eq(p.state, DIST_GPU_COMPLETED, "%s", dist_gpu_state_name(p.state));
  /* The fake's clock: 1 ms per event between start (e2) and end (e3). */
  cr_assert_eq(p.gpu_end_ns - p.gpu_start_ns, 1000000);
  cr_assert_eq(dist_work_synchronize(w, -1), DIST_OK);
  /* Completed and off the flight list: still known, with its times. */
  dist_gpu_progress q = progress(1);
  cr_assert_eq(q.state, DIST_GPU_COMPLETED);
  cr_assert_eq(q.gpu_start_ns, p.gpu_start_ns);
  cr_assert_eq(q.gpu_end_ns, p.gpu_end_ns);
  cr_assert_eq(progress(2).state, DIST_GPU_ENQUEUED);
  dist_work_free(w);
  destroy_group();
}

Test(nccl_stream, gpu_progress_refuses_groups_without_cuda, .timeout = 30) {
  dist_store *st;
  cr_assert_eq(dist_store_hash_create(&st), DIST_OK);
  dist_init_opts o = dist_init_opts_default();
  o.backend = "cpu";
  o.store = st;
  o.rank = 0;
  o.world_size = 1;
  cr_assert_eq(dist_init_process_group(&o), DIST_OK, "%s", dist_last_errmsg());
  dist_gpu_progress p;
  cr_assert_eq(dist_pg_gpu_progress(NULL, 1, &p), DIST_E_NOTSUP);
  cr_assert(strstr(dist_last_errmsg(), "runs no CUDA operations"), "%s", dist_last_errmsg());
  cr_assert_eq(dist_pg_gpu_progress(NULL, 0, &p), DIST_E_INVAL);
  dist_destroy_process_group(NULL);
  dist_store_destroy(st);
}

/* --- GPU times to observers, through a device map ------------------------ */

static struct {
  int n;
  int group_id;
  uint64_t seq;
  int op;
  int64_t start, end;
} gpu_seen;

static int obs_init(void **ctx, const dist_pg_info *g) {
  (void)g;
  *ctx = NULL;
  return 0;
}
static void obs_event(void *ctx, const dist_event *ev) {
  (void)ctx;
  if (ev->kind != DIST_EV_OP_GPU)
    return;
  gpu_seen.n++;
  gpu_seen.group_id = ev->group_id;
  gpu_seen.seq = ev->seq;
  gpu_seen.op = ev->coll ? (int)ev->coll->kind : -1;
  gpu_seen.start = ev->gpu_start_ns;
  gpu_seen.end = ev->gpu_end_ns;
}
static void obs_fini(void *ctx) { (void)ctx; }
static const dist_observer gpu_obs = {DIST_OBSERVER_ABI_VERSION, "gpu-test",
                                      DIST_EV_BIT(DIST_EV_OP_GPU), obs_init, obs_event, obs_fini};

Test(nccl_stream, gpu_times_reach_observers_on_the_users_group, .timeout = 30) {
  event_state = cudaSuccess;
  async_state = ncclSuccess;
  dist__nccl_set_api(&fake);
  cr_assert_eq(dist_observer_register(&gpu_obs), DIST_OK);
  dist_store *st;
  cr_assert_eq(dist_store_hash_create(&st), DIST_OK);
  dist_init_opts o = dist_init_opts_default();
  o.backend = "cpu:cpu,cuda:nccl";
  o.store = st;
  o.rank = 0;
  o.world_size = 1;
  cr_assert_eq(dist_init_process_group(&o), DIST_OK, "%s", dist_last_errmsg());
  dist_gpu_progress p;
  cr_assert_eq(dist_pg_gpu_progress(NULL, 1, &p), DIST_OK, "%s", dist_last_errmsg());
  cr_assert_eq(p.state, DIST_GPU_ENQUEUED, "no communicator yet: nothing launched");
  float h[2] = {1, 2};
  dist_tensor ht = dist_tensor_1d(h, DIST_FLOAT32, 2);
  cr_assert_eq(dist_all_reduce(&ht, DIST_SUM, NULL, NULL), DIST_OK); /* #1 on cpu */
  cr_assert_eq(gpu_seen.n, 0, "a cpu operation has no GPU times");
  dist_tensor t = cuda(b0, 4);
  dist_work *w = NULL;
  cr_assert_eq(dist_all_reduce(&t, DIST_SUM, NULL, &w), DIST_OK, "%s", dist_pg_errmsg(NULL));
  cr_assert_eq(dist_work_synchronize(w, -1), DIST_OK, "%s", dist_work_errmsg(w));
  dist_work_free(w);
  cr_assert_eq(gpu_seen.n, 1);
  cr_assert_eq(gpu_seen.group_id, 0);
  cr_assert_eq(gpu_seen.seq, 2);
  cr_assert_eq(gpu_seen.op, DIST_OP_ALL_REDUCE);
  cr_assert_eq(gpu_seen.end - gpu_seen.start, 1000000);
  cr_assert_eq(dist_pg_gpu_progress(NULL, 2, &p), DIST_OK);
  cr_assert_eq(p.state, DIST_GPU_COMPLETED);
  cr_assert_eq(p.gpu_start_ns, gpu_seen.start);
  /* A synchronous call reports its times before it returns. */
  cr_assert_eq(dist_broadcast(&t, 0, NULL, NULL), DIST_OK);
  cr_assert_eq(gpu_seen.n, 2);
  cr_assert_eq(gpu_seen.seq, 3);
  dist_destroy_process_group(NULL);
  dist_observer_unregister(&gpu_obs);
  dist_store_destroy(st);
  dist__nccl_set_api(NULL);
}
