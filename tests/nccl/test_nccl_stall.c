/* ctest: labels=unit timeout=120 */
/* The monitor's stall report names where a stalled CUDA operation is on the
 * GPU, over the fake NCCL (nccl_fake.h): one rank, the monitor linked in
 * (its constructor registers it), DIST_STALL_S short. An all_reduce whose
 * start event the fake GPU never reaches is "launched ... and has not
 * started on the GPU: the stream is busy with work queued before it"; once
 * the GPU reaches its start, the next report says it is running on the GPU.
 * The test waits for the report lines through a log sink and a condition
 * variable, never by sleeping. The four sentences are checked one by one
 * with dist__mon_gpu_say. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "mon_int.h"
#include "backends/nccl/nccl_api.h"
#include "pg/pg_int.h"

#include "nccl_fake.h"

static pthread_mutex_t seen_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t seen_cv = PTHREAD_COND_INITIALIZER;
static char seen[16384];

static void sink(void *arg, dist_log_level level, dist_subsys subsys, const char *line) {
  (void)arg;
  (void)level;
  (void)subsys;
  pthread_mutex_lock(&seen_mu);
  size_t n = strlen(seen);
  snprintf(seen + n, sizeof seen - n, "%s\n", line);
  pthread_cond_broadcast(&seen_cv);
  pthread_mutex_unlock(&seen_mu);
}

/* Waits (bounded by the test's timeout) for text among the log lines since
 * the last forget(). */
static void wait_for(const char *text) {
  pthread_mutex_lock(&seen_mu);
  while (!strstr(seen, text))
    pthread_cond_wait(&seen_cv, &seen_mu);
  pthread_mutex_unlock(&seen_mu);
}

static void forget(void) {
  pthread_mutex_lock(&seen_mu);
  seen[0] = '\0';
  pthread_mutex_unlock(&seen_mu);
}

Test(nccl_stall, the_stall_report_says_launched_but_not_started_then_running, .timeout = 60) {
  setenv("DIST_STALL_S", "0.3", 1);
  setenv("DIST_TRACE", "0", 1);
  dist_log_set_sink(sink, NULL);
  event_state = cudaSuccess;
  dist__nccl_set_api(&fake);
  dist_store *st;
  cr_assert_eq(dist_store_hash_create(&st), DIST_OK);
  dist_init_opts o = dist_init_opts_default();
  o.backend = "nccl";
  o.store = st;
  o.rank = 0;
  o.world_size = 1;
  cr_assert_eq(dist_init_process_group(&o), DIST_OK, "%s", dist_last_errmsg());
  dist_tensor t = dist_tensor_1d(b0, DIST_FLOAT32, 4);
  t.device.type = DIST_DEVICE_CUDA;
  cr_assert_eq(dist_all_reduce(&t, DIST_SUM, NULL, NULL), DIST_OK); /* makes the communicator */
  /* A kernel before it spins: the GPU reaches nothing of #2. */
  mark_events();
  __atomic_store_n(&event_state, cudaErrorNotReady, __ATOMIC_SEQ_CST);
  dist_work *w = NULL;
  cr_assert_eq(dist_all_reduce(&t, DIST_SUM, NULL, &w), DIST_OK); /* e1 ready, e2 start, e3 end */
  wait_for("rank 0's ALL_REDUCE #2 was launched ");
  wait_for("has not started on the GPU: the stream is busy with work queued before it");
  /* The kernel ends: the collective starts, and waits for peers. */
  forget();
  __atomic_store_n(&gpu_done_upto, 2, __ATOMIC_SEQ_CST);
  wait_for("rank 0's ALL_REDUCE #2 has been running on the GPU for ");
  __atomic_store_n(&gpu_done_upto, 3, __ATOMIC_SEQ_CST);
  cr_assert_eq(dist_work_synchronize(w, -1), DIST_OK, "%s", dist_work_errmsg(w));
  dist_work_free(w);
  dist_destroy_process_group(NULL);
  dist_log_set_sink(NULL, NULL);
  dist_store_destroy(st);
  dist__nccl_set_api(NULL);
}

Test(nccl_stall, each_gpu_state_has_its_sentence, .timeout = 10) {
  char buf[512];
  int64_t now = 20000000000;
  dist_gpu_progress p = {DIST_GPU_ENQUEUED, 0, 0, 0};
  dist__mon_gpu_say(buf, sizeof buf, 2, DIST_OP_ALL_REDUCE, 9, &p, now);
  cr_assert(strstr(buf, "rank 2's ALL_REDUCE #9 has not been launched on the GPU"), "%s", buf);
  p = (dist_gpu_progress){DIST_GPU_LAUNCHED, now - 12000000000, 0, 0};
  dist__mon_gpu_say(buf, sizeof buf, 2, DIST_OP_ALL_REDUCE, 9, &p, now);
  cr_assert(strstr(buf, "rank 2's ALL_REDUCE #9 was launched 12 s ago and has not started on "
                        "the GPU: the stream is busy with work queued before it"), "%s", buf);
  p = (dist_gpu_progress){DIST_GPU_RUNNING, now - 12000000000, now - 3000000000, 0};
  dist__mon_gpu_say(buf, sizeof buf, 2, DIST_OP_BROADCAST, 9, &p, now);
  cr_assert(strstr(buf, "rank 2's BROADCAST #9 has been running on the GPU for 3.0 s (launched "
                        "12 s ago): NCCL waits for its peers"), "%s", buf);
  p = (dist_gpu_progress){DIST_GPU_COMPLETED, now - 12000000000, now - 3000000000, now - 1};
  dist__mon_gpu_say(buf, sizeof buf, 2, DIST_OP_ALL_REDUCE, 9, &p, now);
  cr_assert(strstr(buf, "has completed on the GPU"), "%s", buf);
}
