/* prog_viewer.c - a job with a planted bug for the viewer's end-to-end test
 * on a trace the real tracer wrote (test_real_mp.c): eight ALL_REDUCEs on
 * the default group, except that in mode "hang" rank 1 stops before the
 * sixth (it waits for a signal, as a rank stuck outside the library would),
 * so the others time out in ALL_REDUCE #6, and in mode "shape" rank 3
 * passes 2 elements instead of 4 to the sixth (a desync).
 *
 *     distrun -n 4 prog_viewer hang|shape */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <dist/dist.h>
#include <dist/tracer.h>

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "ok";
  if (dist_init_process_group(NULL) != DIST_OK) {
    fprintf(stderr, "init: %s\n", dist_last_errmsg());
    return 1;
  }
  int rank = dist_get_rank(NULL);
  float data[4] = {1, 1, 1, 1};
  for (int i = 0; i < 8; i++) {
    if (!strcmp(mode, "hang") && i == 5 && rank == 1)
      pause();   // the planted bug: never enters ALL_REDUCE #6
    int64_t n = !strcmp(mode, "shape") && i == 5 && rank == 3 ? 2 : 4;
    dist_tensor t = dist_tensor_1d(data, DIST_FLOAT32, n);
    int rc = dist_all_reduce(&t, DIST_SUM, NULL, NULL);
    if (rc != DIST_OK) {
      fprintf(stderr, "rank %d: ALL_REDUCE #%d: %s\n", rank, i + 1, dist_status_name(rc));
      /* commit the trace before exiting: distrun ends the other ranks as
       * soon as one exits, and the viewer is tested on what reached disk */
      dist_tracer_flush(2000);
      return 1;
    }
  }
  dist_destroy_process_group(NULL);
  return 0;
}
