/* allreduce_spawn.c - the tutorial's own launcher (torch tutorial "Writing
 * Distributed Applications": init_process run in a Process per rank, or
 * torch.multiprocessing.spawn) with the "Collective Communication" body:
 * no distrun; the program forks its ranks with dist_spawn, each joins the
 * group through the store the parent hosts, ranks 0 and 1 sum a tensor of
 * ones over a new group and print 2, the others keep their 1. The parent
 * reports the first rank that failed, if any.
 *
 *     build/bin/allreduce_spawn [N]        (N ranks, default 4) */
#include "example_util.h"

/* The tutorial's run(rank, size), after its init_process. */
static int run(int rank, int size, void *arg) {
  (void)arg;
  (void)size;
  TRY(dist_init_process_group(NULL)); /* env:// as dist_spawn set it */
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

int main(int argc, char **argv) {
  if (argc > 1 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
    printf("all_reduce over a new group of ranks 0 and 1, ranks started by dist_spawn.\n\n"
           "usage: %s [N]   (N >= 2 ranks, default 4; no launcher needed)\n", argv[0]);
    return 0;
  }
  int n = argc > 1 ? atoi(argv[1]) : 4;
  if (n < 2 || n > 64) {
    fprintf(stderr, "%s: N must be 2..64\n", argv[0]);
    return 2;
  }
  dist_spawn_ctx *ctx = NULL;
  int rc = dist_spawn(run, NULL, n, true, &ctx);
  if (rc != DIST_OK)
    fprintf(stderr, "%s: %s\n", dist_status_name(rc), dist_last_errmsg());
  dist_spawn_free(ctx);
  return rc == DIST_OK ? 0 : 1;
}
