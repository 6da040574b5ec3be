/* prog_misuse.c - the rank program test_distrun_misuse.c runs under
 * distrun (build/bin/misuse_testprog, the bundled libdist: the monitor and
 * the tracer come in as they do for users). Each mode plants one misuse
 * of the API on rank R; a rank whose call fails prints "rank K: msg" on
 * stderr and exits 1. The lines the verdicts must name carry a marker
 * comment ("the planted ...") that the suite looks up.
 *   destroyed R   2 ranks share g = {0, 1}; after one all_reduce on it,
 *                 rank R destroys g and calls all_reduce on the dead
 *                 handle (refused); the other waits in its second
 *   nonmember R   4 ranks, a = {0, 1} and b = {2, 3}: each pair
 *                 all_reduces on its group, then broadcasts on it; rank R
 *                 (of a) passes b (a no-op, as in torch), so its
 *                 broadcast meets its partner's all_reduce
 *   bytesrc R     4 ranks broadcast_bytes a config from rank 0, rank R
 *                 naming itself as the src; then an all_reduce
 * Every mode ends by itself within 60 s (alarm). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <dist/dist.h>

static int fail(int rc) {
  fprintf(stderr, "rank %d: %s\n", dist_get_rank(NULL), dist_errmsg(rc, NULL));
  return 1;
}

static int mode_destroyed(int rank, int culprit) {
  int members[2] = {0, 1};
  dist_pg *g;
  int rc = dist_new_group(members, 2, NULL, &g);
  float x = 1;
  dist_tensor t = dist_tensor_1d(&x, DIST_FLOAT32, 1);
  for (int step = 0; rc == DIST_OK && step < 3; step++) {
    if (rank == culprit && step == 1) {
      dist_destroy_process_group(g);
      rc = dist_all_reduce(&t, DIST_SUM, g, NULL); /* the planted call on a dead handle */
    } else {
      rc = dist_all_reduce(&t, DIST_SUM, g, NULL);
    }
  }
  return rc;
}

static int mode_nonmember(int rank, int culprit) {
  int ra[2] = {0, 1}, rb[2] = {2, 3};
  dist_pg *a, *b;
  int rc = dist_new_group(ra, 2, NULL, &a);
  if (rc == DIST_OK)
    rc = dist_new_group(rb, 2, NULL, &b);
  if (rc != DIST_OK)
    return rc;
  dist_pg *mine = rank < 2 ? a : b, *g = rank == culprit ? b : mine;
  float x[4] = {1, 2, 3, 4};
  dist_tensor t = dist_tensor_1d(x, DIST_FLOAT32, 4);
  rc = dist_all_reduce(&t, DIST_SUM, g, NULL); /* the planted wrong group */
  if (rc == DIST_OK)
    rc = dist_broadcast(&t, rank < 2 ? 0 : 2, mine, NULL);
  return rc;
}

static int mode_bytesrc(int rank, int culprit) {
  char cfg[] = "lr=0.1 batch=32";
  int src = rank == culprit ? culprit : 0;
  dist_bytes b = {NULL, 0};
  if (rank == src)
    b = (dist_bytes){cfg, sizeof cfg};
  int rc = dist_broadcast_bytes(&b, src, NULL); /* the planted src */
  if (rank != src && rc == DIST_OK)
    dist_free(b.data);
  float x = 1;
  dist_tensor t = dist_tensor_1d(&x, DIST_FLOAT32, 1);
  if (rc == DIST_OK)
    rc = dist_all_reduce(&t, DIST_SUM, NULL, NULL);
  return rc;
}

int main(int argc, char **argv) {
  alarm(60);
  const char *m = argc > 1 ? argv[1] : "";
  int culprit = argc > 2 ? atoi(argv[2]) : 1;
  if (strcmp(m, "destroyed") && strcmp(m, "nonmember") && strcmp(m, "bytesrc")) {
    fprintf(stderr, "usage: %s destroyed R | nonmember R | bytesrc R\n", argv[0]);
    return 2;
  }
  int rc = dist_init_process_group(NULL);
  if (rc != DIST_OK) {
    fprintf(stderr, "init: %s\n", dist_last_errmsg());
    return 1;
  }
  int rank = dist_get_rank(NULL);
  rc = !strcmp(m, "destroyed") ? mode_destroyed(rank, culprit)
       : !strcmp(m, "nonmember") ? mode_nonmember(rank, culprit)
                                 : mode_bytesrc(rank, culprit);
  if (rc != DIST_OK)
    return fail(rc);
  dist_destroy_process_group(NULL);
  return 0;
}
