/* gpu_check.c - the device check of issue 27: libdist's nccl backend on a
 * real NVIDIA GPU, one rank (NCCL refuses two ranks on one device, so
 * multi-rank NCCL stays on the fake table). tests/gpu/run.sh runs it; it
 * prints one line per case, "PASS <case>" or "FAIL <case>: <why>", and
 * exits 1 if any case failed, 0 when all passed, 0 with "SKIP: <why>" when
 * no GPU is visible. Cases:
 *   collectives    every collective on CUDA tensors, values checked
 *   mixed          "cpu:cpu,cuda:nccl": cpu and cuda tensors on one group
 *   stream_order   a kernel on the current stream writes the input just
 *                  before the call; the result must see its writes
 *   nonblocking    dist_work_wait returns while a kernel before the
 *                  collective still runs; synchronize then completes it
 *   stuck_kernel   a kernel spins on a flag, so the next collective is
 *                  launched but never starts: dist_pg_gpu_progress says
 *                  LAUNCHED and the monitor's stall report names that
 *                  state; then the flag is released and it completes
 *   gpu_times      DIST_EV_OP_GPU times are sane (start after the kernel
 *                  it waited for, end after start) and the tracer writes
 *                  rows of kind 'gpu' (run.sh reads the rank file) */
#define _GNU_SOURCE
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <dist/dist.h>
#include <dist/tracer.h>

#include "gpu_check.h"

static int failures;

static void result(const char *name, bool ok, const char *why) {
  if (ok)
    printf("PASS %s\n", name);
  else
    printf("FAIL %s: %s\n", name, why);
  fflush(stdout);
  failures += !ok;
}

/* --- device buffers ------------------------------------------------------ */

float *dev_new(int n, float first) {
  float *d = NULL, *h = malloc(sizeof(float) * (size_t)n);
  if (cudaMalloc((void **)&d, sizeof(float) * (size_t)n) != cudaSuccess || !h) {
    free(h);
    return NULL;
  }
  for (int i = 0; i < n; i++)
    h[i] = first + (float)i;
  cudaMemcpy(d, h, sizeof(float) * (size_t)n, cudaMemcpyHostToDevice);
  free(h);
  return d;
}

/* Whether d[i] == first + i * step for all i (copied back after a device
 * synchronize: the check reads finished results). */
bool dev_is(const float *d, int n, float first, float step, char *why, size_t len) {
  float *h = malloc(sizeof(float) * (size_t)n);
  cudaDeviceSynchronize();
  cudaMemcpy(h, d, sizeof(float) * (size_t)n, cudaMemcpyDeviceToHost);
  for (int i = 0; i < n; i++)
    if (h[i] != first + step * (float)i) {
      snprintf(why, len, "element %d is %g, want %g", i, h[i], first + step * (float)i);
      free(h);
      return false;
    }
  free(h);
  return true;
}

dist_tensor cuda_t(float *d, int64_t n) {
  dist_tensor t = dist_tensor_1d(d, DIST_FLOAT32, n);
  t.device.type = DIST_DEVICE_CUDA;
  return t;
}

int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* --- what observers and the log saw --------------------------------------- */

gpu_seen seen;
static pthread_mutex_t seen_mu = PTHREAD_MUTEX_INITIALIZER;

static int obs_init(void **ctx, const dist_pg_info *g) {
  (void)g;
  *ctx = NULL;
  return 0;
}
static void obs_event(void *ctx, const dist_event *ev) {
  (void)ctx;
  pthread_mutex_lock(&seen_mu);
  if (ev->kind == DIST_EV_OP_ISSUED || ev->kind == DIST_EV_OP_ENQUEUED) {
    seen.last_seq = ev->seq;
    seen.issued_ns[ev->seq % GPU_SEEN] = ev->t_ns;
  } else if (ev->kind == DIST_EV_OP_GPU) {
    seen.n_gpu++;
    seen.start_ns[ev->seq % GPU_SEEN] = ev->gpu_start_ns;
    seen.end_ns[ev->seq % GPU_SEEN] = ev->gpu_end_ns;
  }
  pthread_mutex_unlock(&seen_mu);
}
static void obs_fini(void *ctx) { (void)ctx; }
static const dist_observer observer = {
    DIST_OBSERVER_ABI_VERSION, "gpu-check",
    DIST_EV_BIT(DIST_EV_OP_ISSUED) | DIST_EV_BIT(DIST_EV_OP_ENQUEUED) | DIST_EV_BIT(DIST_EV_OP_GPU),
    obs_init, obs_event, obs_fini};

static void sink(void *arg, dist_log_level level, dist_subsys subsys, const char *line) {
  (void)arg;
  (void)level;
  (void)subsys;
  fprintf(stderr, "%s\n", line);
  pthread_mutex_lock(&seen_mu);
  if (strstr(line, "has not started on the GPU"))
    seen.stall_launched = true;
  pthread_mutex_unlock(&seen_mu);
}

void seen_copy(gpu_seen *out) {
  pthread_mutex_lock(&seen_mu);
  *out = seen;
  pthread_mutex_unlock(&seen_mu);
}

/* --- main ------------------------------------------------------------------ */

static int usage(FILE *f, int rc) {
  fprintf(f, "usage: gpu_check [--help]\n"
             "Runs libdist's nccl backend on the first visible GPU with one rank and prints\n"
             "PASS/FAIL per case (collectives, mixed, stream_order, nonblocking,\n"
             "stuck_kernel, gpu_times). Exit 0: all passed, or SKIP (no GPU visible);\n"
             "1: a case failed; 2: usage. Sets DIST_STALL_S=1 and DIST_TIMEOUT=120\n"
             "unless set. tests/gpu/run.sh is the way to run it.\n");
  return rc;
}

static int init_group(void) {
  dist_store *st = NULL;
  if (dist_store_hash_create(&st) != DIST_OK)
    return 1;
  dist_init_opts o = dist_init_opts_default();
  o.backend = "cpu:cpu,cuda:nccl";
  o.store = st;
  o.rank = 0;
  o.world_size = 1;
  o.device_id = (dist_device){DIST_DEVICE_CUDA, 0};
  if (dist_init_process_group(&o) != DIST_OK) {
    printf("FAIL init: %s\n", dist_last_errmsg());
    return 1;
  }
  return 0;
}

int main(int argc, char **argv) {
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h"))
      return usage(stdout, 0);
    fprintf(stderr, "gpu_check: unknown argument '%s'\n", argv[i]);
    return usage(stderr, 2);
  }
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess || n < 1) {
    printf("SKIP: no CUDA device is visible (%s)\n",
           e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
    return 0;
  }
  if (!dist_is_nccl_available()) {
    printf("FAIL nccl_available: %s\n", dist_last_errmsg());
    return 1;
  }
  setenv("DIST_STALL_S", getenv("DIST_STALL_S") ? getenv("DIST_STALL_S") : "1", 1);
  setenv("DIST_TIMEOUT", getenv("DIST_TIMEOUT") ? getenv("DIST_TIMEOUT") : "120", 1);
  cudaSetDevice(0);
  dist_log_set_sink(sink, NULL);
  dist_observer_register(&observer);
  if (init_group())
    return 1;
  char why[512];
  why[0] = '\0';
  result("collectives", case_collectives(why, sizeof why), why);
  result("mixed", case_mixed(why, sizeof why), why);
  result("stream_order", case_stream_order(why, sizeof why), why);
  result("nonblocking", case_nonblocking(why, sizeof why), why);
  result("stuck_kernel", case_stuck_kernel(why, sizeof why), why);
  result("gpu_times", case_gpu_times(why, sizeof why), why);
  const char *path = dist_tracer_path();
  if (path) {
    dist_tracer_flush(10000);
    printf("TRACE %s\n", path);
  }
  dist_destroy_process_group(NULL);
  printf("%s: %d case(s) failed\n", failures ? "FAIL" : "PASS", failures);
  return failures ? 1 : 0;
}
