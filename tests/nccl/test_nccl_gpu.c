/* ctest: labels=gpu timeout=120 */
/* The nccl backend on a real GPU: one rank all_reduces a CUDA buffer with
 * the real NCCL. This program links the real CUDA runtime and NCCL (so CI
 * proves the backend's libraries link); without a visible device every test
 * is skipped, saying why. It has never run on a GPU in this project. */
#include <criterion/criterion.h>
#include <cuda_runtime_api.h>
#include <stdio.h>

#include <dist/dist.h>
#include "pg/pg_int.h"

static void need_gpu(void) {
  char why[512];
  if (!dist__nccl_usable(why, sizeof why))
    cr_skip_test("no GPU here: %s", why);
}

Test(nccl_gpu, is_nccl_available_agrees_with_the_runtime, .timeout = 30) {
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  bool device = e == cudaSuccess && n > 0;
  cr_assert_eq(dist_is_nccl_available(), device, "cudaGetDeviceCount: %s, %d devices",
               cudaGetErrorString(e), n);
  need_gpu();
}

Test(nccl_gpu, all_reduce_on_one_rank, .timeout = 60) {
  need_gpu();
  dist_store *st;
  cr_assert_eq(dist_store_hash_create(&st), DIST_OK);
  dist_init_opts o = dist_init_opts_default();
  o.backend = "nccl";
  o.store = st;
  o.rank = 0;
  o.world_size = 1;
  cr_assert_eq(dist_init_process_group(&o), DIST_OK, "%s", dist_last_errmsg());
  float host[4] = {1, 2, 3, 4}, *dev = NULL;
  cr_assert_eq(cudaMalloc((void **)&dev, sizeof host), cudaSuccess);
  cudaMemcpy(dev, host, sizeof host, cudaMemcpyHostToDevice);
  dist_tensor t = dist_tensor_1d(dev, DIST_FLOAT32, 4);
  t.device.type = DIST_DEVICE_CUDA;
  cr_assert_eq(dist_all_reduce(&t, DIST_SUM, NULL, NULL), DIST_OK, "%s", dist_pg_errmsg(NULL));
  float back[4];
  cudaMemcpy(back, dev, sizeof back, cudaMemcpyDeviceToHost);
  for (int i = 0; i < 4; i++)
    cr_assert_eq(back[i], host[i]);
  cudaFree(dev);
  dist_destroy_process_group(NULL);
  dist_store_destroy(st);
}
