/* p2p_blocking.c - blocking point-to-point (torch tutorial "Point-to-Point
 * Communication"): rank 0 sends a tensor holding 1 to rank 1, which prints
 * what it received. dist_send returns once rank 1 has matched it.
 *
 *     build/bin/distrun -n 2 build/bin/p2p_blocking */
#include "example_util.h"

int main(int argc, char **argv) {
  example_init(argc, argv, "Blocking send/recv between ranks 0 and 1.", 2);
  int rank = dist_get_rank(NULL);
  float data = 0;
  dist_tensor t = dist_tensor_1d(&data, DIST_FLOAT32, 1);
  if (rank == 0) {
    data = 1;
    TRY(dist_send(&t, 1, NULL, 0));
  } else if (rank == 1) {
    int src = -1;
    TRY(dist_recv(&t, 0, NULL, 0, &src));
  }
  printf("Rank %d has data %.1f\n", rank, (double)data);
  TRY(dist_destroy_process_group(NULL));
  return 0;
}
