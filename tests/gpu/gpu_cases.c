/* gpu_cases.c - the cases of the device check (gpu_check.c says what each
 * proves). One rank: every collective's result is its input (or a known
 * scaling of it, PREMUL_SUM), which still proves NCCL ran on the device
 * buffers. Each case returns true or false with why filled. */
#define _GNU_SOURCE
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "gpu_check.h"

#define N 1024
#define CYCLES_PER_MS 2000000LL /* at most ~2 GHz: N ms of cycles last >= N ms */

#define TRY(call, what)                                                                  \
  do {                                                                                   \
    int rc_ = (call);                                                                    \
    if (rc_ != DIST_OK) {                                                                \
      snprintf(why, len, "%s: %s: %s", what, dist_status_name(rc_), dist_pg_errmsg(NULL)); \
      return false;                                                                      \
    }                                                                                    \
  } while (0)

#define EXPECT(d, first, step, what)                                                     \
  do {                                                                                   \
    char w_[200];                                                                        \
    if (!dev_is((d), N, (first), (step), w_, sizeof w_)) {                               \
      snprintf(why, len, "%s: %s", what, w_);                                            \
      return false;                                                                      \
    }                                                                                    \
  } while (0)

/* d[i] = first + i again. */
static void dev_fill(float *d, int n, float first) {
  float h[N];
  for (int i = 0; i < n && i < N; i++)
    h[i] = first + (float)i;
  cudaMemcpy(d, h, sizeof(float) * (size_t)n, cudaMemcpyHostToDevice);
}

static bool reductions(float *a, char *why, size_t len) {
  dist_tensor t = cuda_t(a, N);
  TRY(dist_all_reduce(&t, DIST_SUM, NULL, NULL), "all_reduce SUM");
  EXPECT(a, 1, 1, "all_reduce SUM");
  dist_redop x3 = {DIST_REDOP_PREMUL_SUM, 3.0};
  TRY(dist_all_reduce(&t, x3, NULL, NULL), "all_reduce PREMUL_SUM(3)");
  EXPECT(a, 3, 3, "all_reduce PREMUL_SUM(3)");
  dev_fill(a, N, 1);
  TRY(dist_reduce(&t, 0, DIST_MAX, NULL, NULL), "reduce MAX");
  EXPECT(a, 1, 1, "reduce MAX");
  TRY(dist_broadcast(&t, 0, NULL, NULL), "broadcast");
  EXPECT(a, 1, 1, "broadcast");
  TRY(dist_barrier(NULL, NULL), "barrier");
  return true;
}

static bool movers(float *a, float *b, char *why, size_t len) {
  dist_tensor in = cuda_t(a, N), out = cuda_t(b, N);
  TRY(dist_all_gather_into_tensor(&out, &in, NULL, NULL), "all_gather_into_tensor");
  EXPECT(b, 1, 1, "all_gather_into_tensor");
  cudaMemset(b, 0, sizeof(float) * N);
  TRY(dist_all_gather(&out, 1, &in, NULL, NULL), "all_gather");
  EXPECT(b, 1, 1, "all_gather");
  cudaMemset(b, 0, sizeof(float) * N);
  TRY(dist_reduce_scatter_tensor(&out, &in, DIST_SUM, NULL, NULL), "reduce_scatter_tensor");
  EXPECT(b, 1, 1, "reduce_scatter_tensor");
  cudaMemset(b, 0, sizeof(float) * N);
  TRY(dist_reduce_scatter(&out, &in, 1, DIST_SUM, NULL, NULL), "reduce_scatter");
  EXPECT(b, 1, 1, "reduce_scatter");
  cudaMemset(b, 0, sizeof(float) * N);
  TRY(dist_gather(&in, &out, 1, 0, NULL, NULL), "gather");
  EXPECT(b, 1, 1, "gather");
  cudaMemset(b, 0, sizeof(float) * N);
  TRY(dist_scatter(&out, &in, 1, 0, NULL, NULL), "scatter");
  EXPECT(b, 1, 1, "scatter");
  cudaMemset(b, 0, sizeof(float) * N);
  TRY(dist_all_to_all(&out, 1, &in, 1, NULL, NULL), "all_to_all");
  EXPECT(b, 1, 1, "all_to_all");
  cudaMemset(b, 0, sizeof(float) * N);
  TRY(dist_all_to_all_single(&out, &in, NULL, NULL, NULL, NULL), "all_to_all_single");
  EXPECT(b, 1, 1, "all_to_all_single");
  cudaMemset(b, 0, sizeof(float) * N);
  dist_p2p_op ops[2] = {{true, &in, 0, 0, NULL}, {false, &out, 0, 0, NULL}};
  dist_work *w = NULL;
  TRY(dist_batch_isend_irecv(ops, 2, &w), "batch_isend_irecv to self");
  TRY(dist_work_synchronize(w, 60000), "batch_isend_irecv to self");
  dist_work_free(w);
  EXPECT(b, 1, 1, "batch_isend_irecv to self");
  return true;
}

bool case_collectives(char *why, size_t len) {
  float *a = dev_new(N, 1), *b = dev_new(N, 0);
  bool ok = a && b && reductions(a, why, len) && movers(a, b, why, len);
  if (!a || !b)
    snprintf(why, len, "cudaMalloc failed");
  cudaFree(a);
  cudaFree(b);
  return ok;
}

bool case_mixed(char *why, size_t len) {
  float h[4] = {1, 2, 3, 4};
  dist_tensor ht = dist_tensor_1d(h, DIST_FLOAT32, 4);
  dist_redop x2 = {DIST_REDOP_PREMUL_SUM, 2.0};
  TRY(dist_all_reduce(&ht, x2, NULL, NULL), "cpu all_reduce");
  if (h[0] != 2 || h[3] != 8) {
    snprintf(why, len, "cpu all_reduce gave %g..%g, want 2..8", h[0], h[3]);
    return false;
  }
  float *d = dev_new(N, 1);
  dist_tensor dt = cuda_t(d, N);
  TRY(dist_all_reduce(&dt, x2, NULL, NULL), "cuda all_reduce");
  EXPECT(d, 2, 2, "cuda all_reduce");
  const char *be = dist_get_backend(NULL);
  cudaFree(d);
  if (!be || !strstr(be, "cuda:nccl")) {
    snprintf(why, len, "backend is '%s'", be ? be : "?");
    return false;
  }
  return true;
}

bool case_stream_order(char *why, size_t len) {
  cudaStream_t s;
  cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  float *d = dev_new(N, 0);
  cudaMemset(d, 0, sizeof(float) * N);
  cudaDeviceSynchronize();
  dist_cuda_set_current_stream(s);
  /* 100 ms of spinning, then 5s: read early, NCCL would see zeros. */
  gpu_slow_fill(d, N, 5.0f, 100 * CYCLES_PER_MS, s);
  dist_tensor t = cuda_t(d, N);
  dist_redop x2 = {DIST_REDOP_PREMUL_SUM, 2.0};
  dist_work *w = NULL;
  TRY(dist_all_reduce(&t, x2, NULL, &w), "all_reduce");
  TRY(dist_work_wait(w, -1), "wait");
  float h[N];
  cudaMemcpyAsync(h, d, sizeof h, cudaMemcpyDeviceToHost, s); /* after the wait: ordered */
  cudaStreamSynchronize(s);
  dist_work_synchronize(w, -1);
  dist_work_free(w);
  dist_cuda_set_current_stream(NULL);
  cudaFree(d);
  cudaStreamDestroy(s);
  for (int i = 0; i < N; i++)
    if (h[i] != 10.0f) {
      snprintf(why, len, "element %d is %g, want 10 (the kernel's 5 doubled): the collective "
               "did not wait for the current stream", i, h[i]);
      return false;
    }
  return true;
}

bool case_nonblocking(char *why, size_t len) {
  cudaStream_t s;
  cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  float *d = dev_new(N, 0);
  cudaDeviceSynchronize();
  dist_cuda_set_current_stream(s);
  gpu_slow_fill(d, N, 1.0f, 500 * CYCLES_PER_MS, s); /* the GPU is busy >= 0.5 s */
  dist_tensor t = cuda_t(d, N);
  dist_work *w = NULL;
  TRY(dist_all_reduce(&t, DIST_SUM, NULL, &w), "all_reduce");
  int64_t t0 = now_ns();
  TRY(dist_work_wait(w, -1), "wait");
  int64_t waited = now_ns() - t0;
  bool done = dist_work_is_completed(w);
  int rc = dist_work_synchronize(w, 60000);
  bool done_after = dist_work_is_completed(w);
  dist_work_free(w);
  dist_cuda_set_current_stream(NULL);
  cudaStreamSynchronize(s);
  cudaStreamDestroy(s);
  bool ok = !done && waited < 100000000 && rc == DIST_OK && done_after;
  if (!ok)
    snprintf(why, len, "wait took %.1f ms (want < 100 while the kernel runs), completed after "
             "wait: %d (want 0), synchronize: %s, completed after it: %d",
             (double)waited / 1e6, done, dist_status_name(rc), done_after);
  if (ok) {
    char w_[200];
    ok = dev_is(d, N, 1, 0, w_, sizeof w_);
    if (!ok)
      snprintf(why, len, "result: %s", w_);
  }
  cudaFree(d);
  return ok;
}

/* Polls (the watchdog's view) until state or the deadline. */
static bool reaches(uint64_t seq, dist_gpu_state want, int64_t ms) {
  int64_t until = now_ns() + ms * 1000000;
  dist_gpu_progress p;
  do {
    if (dist_pg_gpu_progress(NULL, seq, &p) == DIST_OK && p.state == want)
      return true;
    nanosleep(&(struct timespec){0, 10000000}, NULL);
  } while (now_ns() < until);
  return false;
}

bool case_stuck_kernel(char *why, size_t len) {
  int *flag = NULL, *dflag = NULL;
  if (cudaHostAlloc((void **)&flag, sizeof *flag, cudaHostAllocMapped) != cudaSuccess ||
      cudaHostGetDevicePointer((void **)&dflag, flag, 0) != cudaSuccess) {
    snprintf(why, len, "mapped host memory: %s", cudaGetErrorString(cudaGetLastError()));
    return false;
  }
  __atomic_store_n(flag, 0, __ATOMIC_SEQ_CST);
  float *d = dev_new(N, 1);
  cudaDeviceSynchronize();
  gpu_wait_flag(dflag, NULL); /* on the current (legacy default) stream */
  dist_tensor t = cuda_t(d, N);
  dist_work *w = NULL;
  TRY(dist_all_reduce(&t, DIST_SUM, NULL, &w), "all_reduce");
  gpu_seen s;
  seen_copy(&s);
  uint64_t seq = s.last_seq;
  bool launched = reaches(seq, DIST_GPU_LAUNCHED, 2000);
  bool still = launched && !reaches(seq, DIST_GPU_RUNNING, 500); /* and stays so */
  bool reported = false;
  for (int64_t until = now_ns() + 15000000000LL; !reported && now_ns() < until;) {
    seen_copy(&s);
    reported = s.stall_launched;
    nanosleep(&(struct timespec){0, 50000000}, NULL);
  }
  __atomic_store_n(flag, 1, __ATOMIC_SEQ_CST); /* the kernel ends */
  int rc = dist_work_synchronize(w, 60000);
  bool completed = reaches(seq, DIST_GPU_COMPLETED, 1000);
  dist_work_free(w);
  cudaDeviceSynchronize();
  cudaFreeHost(flag);
  bool ok = launched && still && reported && rc == DIST_OK && completed;
  if (!ok)
    snprintf(why, len, "#%llu: LAUNCHED seen %d, stayed not started %d, stall report named it "
             "%d, completed after release: %s / %d", (unsigned long long)seq, launched, still,
             reported, dist_status_name(rc), completed);
  if (ok) {
    char w_[200];
    ok = dev_is(d, N, 1, 1, w_, sizeof w_);
    if (!ok)
      snprintf(why, len, "result: %s", w_);
  }
  cudaFree(d);
  return ok;
}

bool case_gpu_times(char *why, size_t len) {
  /* A 50 ms kernel, then a collective: it starts on the GPU >= 50 ms after
   * it was issued, and its times are on the host's clock. */
  float *d = dev_new(N, 0);
  cudaDeviceSynchronize();
  gpu_slow_fill(d, N, 1.0f, 50 * CYCLES_PER_MS, NULL);
  dist_tensor t = cuda_t(d, N);
  TRY(dist_all_reduce(&t, DIST_SUM, NULL, NULL), "all_reduce");
  int64_t returned = dist_clock_ns();
  cudaFree(d);
  gpu_seen s;
  seen_copy(&s);
  uint64_t q = s.last_seq % GPU_SEEN;
  int64_t issued = s.issued_ns[q], start = s.start_ns[q], end = s.end_ns[q];
  bool ok = s.n_gpu > 10 && start - issued >= 40000000 && end > start &&
            end <= returned + 1000000;
  if (!ok)
    snprintf(why, len, "%d GPU events; last: start %+.3f ms, end %+.3f ms after issue, "
             "returned %+.3f ms (want start >= 40 ms, end after start, before return)",
             s.n_gpu, (double)(start - issued) / 1e6, (double)(end - issued) / 1e6,
             (double)(returned - issued) / 1e6);
  return ok;
}
