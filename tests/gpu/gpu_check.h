/* gpu_check.h - what the device check's files share: buffers, the kernels
 * (gpu_kernels.cu), what the observer and the log saw, and the cases
 * (gpu_cases.c). */
#ifndef GPU_CHECK_H
#define GPU_CHECK_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <dist/dist.h>

/* Kernels (gpu_kernels.cu); CUDA error codes. */
int gpu_slow_fill(float *out, int n, float value, long long cycles, void *stream);
int gpu_wait_flag(int *flag_dev, void *stream);

/* A device buffer holding first, first + 1, ... (NULL when out of memory). */
float *dev_new(int n, float first);
bool dev_is(const float *d, int n, float first, float step, char *why, size_t len);
dist_tensor cuda_t(float *d, int64_t n);
int64_t now_ns(void);

#define GPU_SEEN 256
typedef struct gpu_seen {
  uint64_t last_seq;           /* the last operation issued on any group */
  int n_gpu;                   /* DIST_EV_OP_GPU events */
  int64_t issued_ns[GPU_SEEN], start_ns[GPU_SEEN], end_ns[GPU_SEEN]; /* by seq */
  bool stall_launched;         /* the monitor said "has not started on the GPU" */
} gpu_seen;
void seen_copy(gpu_seen *out);

bool case_collectives(char *why, size_t len);
bool case_mixed(char *why, size_t len);
bool case_stream_order(char *why, size_t len);
bool case_nonblocking(char *why, size_t len);
bool case_stuck_kernel(char *why, size_t len);
bool case_gpu_times(char *why, size_t len);

#endif
