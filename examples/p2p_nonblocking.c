/* p2p_nonblocking.c - non-blocking point-to-point (torch tutorial): isend
 * and irecv return work handles at once; the data may be read or written
 * only after wait.
 *
 *     build/bin/distrun -n 2 build/bin/p2p_nonblocking */
#include "example_util.h"

int main(int argc, char **argv) {
  example_init(argc, argv, "Non-blocking isend/irecv between ranks 0 and 1.", 2);
  int rank = dist_get_rank(NULL);
  float data = 0;
  dist_tensor t = dist_tensor_1d(&data, DIST_FLOAT32, 1);
  dist_work *req = NULL;
  if (rank == 0) {
    data = 1;
    TRY(dist_isend(&t, 1, NULL, 0, &req));
    printf("Rank 0 started sending\n");
  } else if (rank == 1) {
    TRY(dist_irecv(&t, 0, NULL, 0, &req));
    printf("Rank 1 started receiving\n");
  }
  if (req) {
    TRY(dist_work_wait(req, -1));
    dist_work_free(req);
  }
  printf("Rank %d has data %.1f\n", rank, (double)data);
  TRY(dist_destroy_process_group(NULL));
  return 0;
}
