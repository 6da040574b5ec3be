/* prog_desync.c - the rank program of test_distrun_mp.c, at DETAIL under
 * distrun. argv[1]: "shape" (rank 1 all_reduces 8 floats, the others 4),
 * "absent" (rank 1 never calls the all_reduce; it waits to be ended). */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <dist/dist.h>

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "shape";
  if (dist_init_process_group(NULL) != DIST_OK) {
    fprintf(stderr, "init: %s\n", dist_last_errmsg());
    return 1;
  }
  int rank = dist_get_rank(NULL);
  float v[8] = {0};
  dist_tensor t = dist_tensor_1d(v, DIST_FLOAT32, rank == 1 && !strcmp(mode, "shape") ? 8 : 4);
  if (rank == 1 && !strcmp(mode, "absent")) {
    pause(); /* alive, never calling: distrun ends it */
    return 0;
  }
  int rc = dist_all_reduce(&t, DIST_SUM, NULL, NULL); /* the call site the report names */
  if (rc != DIST_OK)
    return 3;
  dist_destroy_process_group(NULL);
  return 0;
}
