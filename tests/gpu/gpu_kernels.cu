// gpu_kernels.cu - the kernels the device check (gpu_check.c) launches,
// behind plain C functions so the check itself stays C. Built with nvcc
// for sm_90 (H100, H200) plus PTX for newer GPUs.
#include <cuda_runtime_api.h>

// Spins for about `ns` nanoseconds of GPU time, then writes value into
// out[0..n): the input a collective must not read before the kernel ends.
__global__ void slow_fill(float *out, int n, float value, long long ns) {
  long long t0 = clock64();
  // clock64 counts SM cycles; ~1.5-2 GHz, so ns cycles are >= ns/2 ns.
  while (clock64() - t0 < ns) {
  }
  for (int i = threadIdx.x; i < n; i += blockDim.x)
    out[i] = value;
}

// Spins until *flag (mapped host memory) becomes non-zero.
__global__ void wait_flag(volatile int *flag) {
  while (*flag == 0) {
  }
}

extern "C" int gpu_slow_fill(float *out, int n, float value, long long cycles, void *stream) {
  slow_fill<<<1, 256, 0, (cudaStream_t)stream>>>(out, n, value, cycles);
  return (int)cudaGetLastError();
}

extern "C" int gpu_wait_flag(int *flag_dev, void *stream) {
  wait_flag<<<1, 1, 0, (cudaStream_t)stream>>>(flag_dev);
  return (int)cudaGetLastError();
}
