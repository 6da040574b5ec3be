/* prog_depart.c - the rank program of test_steps_mp.c's barrier cases
 * (built as build/bin/depart_testprog): 6 ranks as 3 pipelines of 2
 * stages (rank 2p sends to rank 2p + 1). Each step forwards 2
 * micro-batches (tags 0 and 1), then all_reduces on the default group, and
 * every third step ends with a barrier there. With "skip", rank 3 skips
 * the barrier of step 3 and goes on to step 4's receive from rank 2, which
 * waits in the barrier with every other rank: the two wait for each other
 * from lines they called before, and rank 3's steps went from its
 * all_reduce to its receive at steps 1 and 2, so neither's step is new.
 * Only the ranks like each one tell them apart: ranks 1 and 5 went on to
 * the barrier where rank 3 went to its receive, ranks 0 and 4 made rank
 * 2's calls. With "none" the job succeeds. Every mode ends by itself
 * within 60 s (alarm). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <dist/dist.h>

#define N 16

static int me;

static void ok(const char *what, int rc) {
  if (rc != DIST_OK) {
    fprintf(stderr, "rank %d: %s: %s\n", me, what, dist_errmsg(rc, NULL));
    exit(1);
  }
}

static void forward(void) {
  float act[N] = {0};
  dist_tensor t = dist_tensor_1d(act, DIST_FLOAT32, N);
  for (int m = 0; m < 2; m++) {
    if (me % 2 == 0)
      ok("send", dist_send(&t, me + 1, NULL, m));
    else
      ok("recv", dist_recv(&t, me - 1, NULL, m, NULL));
  }
}

int main(int argc, char **argv) {
  alarm(60);
  const char *bug = argc > 1 ? argv[1] : "none";
  if (strcmp(bug, "skip") && strcmp(bug, "none")) {
    fprintf(stderr, "usage: %s skip | none\n", argv[0]);
    return 2;
  }
  ok("init", dist_init_process_group(NULL));
  me = dist_get_rank(NULL);
  if (dist_get_world_size(NULL) != 6) {
    fprintf(stderr, "run it with 6 ranks\n");
    return 2;
  }
  for (int step = 0; step < 6; step++) {
    forward();
    float loss = 1;
    dist_tensor t = dist_tensor_1d(&loss, DIST_FLOAT32, 1);
    ok("all_reduce", dist_all_reduce(&t, DIST_SUM, NULL, NULL));
    bool skip = !strcmp(bug, "skip") && me == 3 && step == 3;
    if (step % 3 == 0 && !skip)
      ok("barrier", dist_barrier(NULL, NULL));
  }
  dist_destroy_process_group(NULL);
  return 0;
}
