/* ring_allreduce.c - the ring all-reduce of the torch tutorial, built from
 * isend and recv: in world-1 steps each rank sends its accumulator to the
 * right while it receives the left neighbour's, and adds it. Then it checks
 * the result against the library's own all_reduce.
 *
 *     build/bin/distrun -n 4 build/bin/ring_allreduce */
#include "example_util.h"

#define N 8

static void ring_allreduce(float *send, float *out, int rank, int world) {
  float recv_buf[N], acc[N];
  memcpy(acc, send, sizeof acc);
  memcpy(out, send, sizeof acc);
  int left = (rank - 1 + world) % world, right = (rank + 1) % world;
  dist_tensor ta = dist_tensor_1d(acc, DIST_FLOAT32, N);
  dist_tensor tr = dist_tensor_1d(recv_buf, DIST_FLOAT32, N);
  for (int step = 0; step < world - 1; step++) {
    dist_work *req;
    TRY(dist_isend(&ta, right, NULL, step, &req));
    TRY(dist_recv(&tr, left, NULL, step, NULL));
    TRY(dist_work_wait(req, -1)); /* acc may change only once it is sent */
    dist_work_free(req);
    memcpy(acc, recv_buf, sizeof acc);
    for (int i = 0; i < N; i++)
      out[i] += recv_buf[i];
  }
}

int main(int argc, char **argv) {
  example_init(argc, argv, "A ring all-reduce built from isend/recv.", 1);
  int rank = dist_get_rank(NULL), world = dist_get_world_size(NULL);
  float send[N], out[N], check[N];
  for (int i = 0; i < N; i++)
    send[i] = check[i] = (float)(rank + 1);
  ring_allreduce(send, out, rank, world);
  dist_tensor tc = dist_tensor_1d(check, DIST_FLOAT32, N);
  TRY(dist_all_reduce(&tc, DIST_SUM, NULL, NULL));
  int same = !memcmp(out, check, sizeof out);
  printf("Rank %d has data %.1f (all_reduce says %.1f: %s)\n", rank, (double)out[0],
         (double)check[0], same ? "same" : "DIFFERENT");
  TRY(dist_destroy_process_group(NULL));
  return same ? 0 : 1;
}
