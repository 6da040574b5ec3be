/* prog_twins.c - the rank program of test_steps_mp.c's twin-pipeline case
 * (built as build/bin/twins_testprog): 8 ranks as 2 pipelines of 4
 * stages (ranks 0-3 and 4-7, each pipeline a group described "pp", made
 * by dist_split_group). Each step forwards 3 micro-batches (stage s
 * receives micro-batch m from stage s - 1 with tag m and sends it on to
 * stage s + 1), then all_reduces on the default group. With "tag", stage
 * 1 of pipeline 1 (rank 5) sends micro-batch 1 of the first step with
 * tag 2 from its own line (a branch of the program): rank 5 waits for
 * rank 6 to take it, rank 6 for micro-batch 1 from rank 5, in the job's
 * first step, where no rank has a habit yet and both tags are new on the
 * pair. Rank 5's twin in the other pipeline (rank 1, stage 1 of the
 * other "pp" group) went on from the same calls to its usual send; rank
 * 6 made the calls its twin made. With "none" the job succeeds. Every
 * mode ends by itself within 60 s (alarm). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <dist/dist.h>

#define MB 3
#define N 32768 /* past the TCP eager limit: a send completes when it is taken */

static int me;

static void ok(const char *what, int rc) {
  if (rc != DIST_OK) {
    fprintf(stderr, "rank %d: %s: %s\n", me, what, dist_errmsg(rc, NULL));
    exit(1);
  }
}

int main(int argc, char **argv) {
  alarm(60);
  const char *bug = argc > 1 ? argv[1] : "none";
  if (strcmp(bug, "tag") && strcmp(bug, "none")) {
    fprintf(stderr, "usage: %s tag | none\n", argv[0]);
    return 2;
  }
  ok("init", dist_init_process_group(NULL));
  me = dist_get_rank(NULL);
  static const int first[4] = {0, 1, 2, 3}, second[4] = {4, 5, 6, 7};
  const int *pipes[2] = {first, second};
  size_t sizes[2] = {4, 4};
  dist_pg *pp = NULL;
  ok("split pp", dist_split_group(NULL, pipes, sizes, 2, &(dist_group_opts){.desc = "pp"}, &pp));
  int stage = me % 4, base = me - stage;
  static float act[N];
  dist_tensor t = dist_tensor_1d(act, DIST_FLOAT32, N);
  for (int step = 0; step < 3; step++) {
    for (int m = 0; m < MB; m++) {
      if (stage > 0)
        ok("recv", dist_recv(&t, base + stage - 1, pp, m, NULL));
      if (stage < 3 && !strcmp(bug, "tag") && me == 5 && step == 0 && m == 1)
        ok("send", dist_send(&t, base + stage + 1, pp, m + 1)); /* the planted bug */
      else if (stage < 3)
        ok("send", dist_send(&t, base + stage + 1, pp, m));
    }
    float loss = 1;
    dist_tensor l = dist_tensor_1d(&loss, DIST_FLOAT32, 1);
    ok("all_reduce", dist_all_reduce(&l, DIST_SUM, NULL, NULL));
  }
  dist_destroy_process_group(NULL);
  return 0;
}
