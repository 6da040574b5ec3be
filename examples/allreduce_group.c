/* allreduce_group.c - all_reduce on a group of ranks 0 and 1 (torch
 * tutorial "Collective Communication"): every rank calls new_group; ranks 0
 * and 1 sum a tensor of ones and print 2, the others keep their 1.
 *
 *     build/bin/distrun -n 4 build/bin/allreduce_group */
#include "example_util.h"

int main(int argc, char **argv) {
  example_init(argc, argv, "all_reduce over a new group of ranks 0 and 1.", 2);
  int rank = dist_get_rank(NULL);
  int members[2] = {0, 1};
  dist_pg *group;
  TRY(dist_new_group(members, 2, NULL, &group));
  float data = 1;
  dist_tensor t = dist_tensor_1d(&data, DIST_FLOAT32, 1);
  if (group != DIST_GROUP_NON_MEMBER)
    TRY(dist_all_reduce(&t, DIST_SUM, group, NULL));
  printf("Rank %d has data %.1f\n", rank, (double)data);
  TRY(dist_destroy_process_group(NULL));
  return 0;
}
