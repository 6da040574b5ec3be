/* prog_viewer.c - a job with a planted bug for the viewer's end-to-end test
 * on a trace the real tracer wrote (test_real_mp.c): eight ALL_REDUCEs on
 * the default group, except that in mode "hang" rank 1 stops before the
 * sixth (it waits for a signal, as a rank stuck outside the library would),
 * so the others time out in ALL_REDUCE #6, and in mode "shape" rank 3
 * passes 2 elements instead of 4 to the sixth (a desync). Mode
 * "pipeline" is a healthy job mixing point-to-point and collectives: each
 * of 5 steps passes a tensor down the ranks (rank r receives from r-1 and
 * sends to r+1, so ranks make 1 or 2 point-to-point calls a step), then a
 * world BROADCAST and ALL_REDUCE; ranks 1 and 2 also all_reduce on their
 * own group. The same collective must have one number on every rank.
 * Mode "uneven" is a healthy job whose sizes differ by rank, as an expert
 * router's: rank r sends r + j + 1 rows to rank j in an all_to_all_single
 * and gathers r + 1 elements in an uneven all_gather.
 *
 *     distrun -n 4 prog_viewer hang|shape|pipeline|uneven */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <dist/dist.h>
#include <dist/tracer.h>

#define TRY(call)                                                                  \
  do {                                                                             \
    if ((call) != DIST_OK) {                                                       \
      fprintf(stderr, "rank %d: %s: %s\n", rank, #call, dist_last_errmsg());        \
      return 1;                                                                    \
    }                                                                              \
  } while (0)

static int pipeline(int rank, int world) {
  float data[4] = {1, 1, 1, 1};
  dist_tensor t = dist_tensor_1d(data, DIST_FLOAT32, 4);
  int mid[2] = {1, 2};
  dist_pg *g = NULL;
  TRY(dist_new_group(mid, 2, NULL, &g));
  for (int step = 0; step < 5; step++) {
    if (rank > 0)
      TRY(dist_recv(&t, rank - 1, NULL, 7, NULL));
    if (rank < world - 1)
      TRY(dist_send(&t, rank + 1, NULL, 7));
    TRY(dist_broadcast(&t, 0, NULL, NULL));
    if (g != DIST_GROUP_NON_MEMBER)
      TRY(dist_all_reduce(&t, DIST_SUM, g, NULL));
    TRY(dist_all_reduce(&t, DIST_SUM, NULL, NULL));
  }
  dist_destroy_process_group(NULL);
  return 0;
}

static int uneven(int rank, int world) {
  float in[64] = {0}, out[64] = {0}, mine[8] = {0}, all[8][8];
  int64_t send[8], recv[8];
  dist_tensor parts[8];
  int64_t n = 0;
  for (int j = 0; j < world && j < 8; j++) {
    send[j] = rank + j + 1;
    recv[j] = j + rank + 1;
    n += send[j];
    parts[j] = dist_tensor_1d(all[j], DIST_FLOAT32, j + 1);
  }
  dist_tensor ti = dist_tensor_1d(in, DIST_FLOAT32, n), to = dist_tensor_1d(out, DIST_FLOAT32, n);
  dist_tensor tm = dist_tensor_1d(mine, DIST_FLOAT32, rank + 1);
  for (int step = 0; step < 3; step++) {
    TRY(dist_all_to_all_single(&to, &ti, recv, send, NULL, NULL));
    TRY(dist_all_gather(parts, (size_t)world, &tm, NULL, NULL));
  }
  dist_destroy_process_group(NULL);
  return 0;
}

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "ok";
  if (dist_init_process_group(NULL) != DIST_OK) {
    fprintf(stderr, "init: %s\n", dist_last_errmsg());
    return 1;
  }
  int rank = dist_get_rank(NULL);
  if (!strcmp(mode, "pipeline"))
    return pipeline(rank, dist_get_world_size(NULL));
  if (!strcmp(mode, "uneven"))
    return uneven(rank, dist_get_world_size(NULL));
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
