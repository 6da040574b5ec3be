/* prog_steps.c - the rank program of test_steps_mp.c (built as
 * build/bin/steps_testprog): a pipeline of 4 stages (ranks 0-3) whose
 * micro-batches travel with their own tags, as a pipeline that tags each
 * micro-batch does. Each step forwards 3 micro-batches (stage s > 0
 * receives micro-batch m from stage s - 1 with tag m, stage s < 3 sends it
 * on, isend then wait), sends the backwards (tag 10 + m) the other way,
 * then all_reduces asynchronously on its "dp" group ({0, 2} or {1, 3},
 * waited at the step's end) and on the default group. The first argument
 * plants one bug on rank 1 in step 1:
 *   tag     it forwards micro-batch 1 with tag 2 (a tag the pair uses:
 *           micro-batch 2's)
 *   skipmb  it forwards 2 micro-batches, not 3, then waits for its first
 *           backward
 *   dpskip  no pipeline; it skips its dp all_reduce: its partner's calls
 *           pair with its next ones, and at the end rank 3 calls on alone
 *   layers  no pipeline; each step gathers and reduce-scatters 3 layers of
 *           different sizes on its dp group (one call site each, so every
 *           call differs from the one before it, as a model's layers
 *           make them), and rank 1 reduce-scatters layer 1 with MAX, not
 *           SUM: the pair {1, 3} disagrees, and the rule of thumb of the
 *           rank that finds it (the call that changed, else the later
 *           rank) cannot tell which; the other dp group can
 *   layersnd as layers, the dp groups made without a description (the
 *           trace tells groups of one kind by their shape then)
 *   ringtag no pipeline; each step passes a block around the ring of the
 *           4 ranks 4 times (ring attention: one dist_batch_isend_irecv
 *           per round, to the next rank and from the previous, tag 0),
 *           and rank 1 sends round 0 of step 2 with tag 1: rank 2 never
 *           takes it
 *   none    no bug
 * Every mode ends by itself within 60 s (alarm). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <dist/dist.h>

#define MB 3
#define N 64
/* A micro-batch's activations: past the TCP engine's eager limit (64 KiB),
 * as a model's are, so a send completes when its receive takes it (a
 * message written ahead would let the sender go on to its next one). */
#define ACT 32768

static int me;

static void ok(const char *what, int rc) {
  if (rc != DIST_OK) {
    fprintf(stderr, "rank %d: %s: %s\n", me, what, dist_errmsg(rc, NULL));
    exit(1);
  }
}

static void forward(int step, bool tag_bug, bool skip) {
  static float act[MB][ACT];
  dist_work *sends[MB] = {0};
  int n = skip ? MB - 1 : MB;
  for (int m = 0; m < n; m++) {
    dist_tensor t = dist_tensor_1d(act[m], DIST_FLOAT32, ACT);
    if (me > 0) {
      dist_work *w = NULL;
      ok("forward irecv", dist_irecv(&t, me - 1, NULL, m, &w));
      ok("forward wait", dist_work_wait(w, -1));
      dist_work_free(w);
    }
    if (me < 3)
      ok("forward isend", dist_isend(&t, me + 1, NULL, tag_bug && m == 1 ? 2 : m, &sends[m]));
  }
  for (int m = 0; m < MB; m++)
    if (sends[m]) {
      ok("forward send wait", dist_work_wait(sends[m], -1));
      dist_work_free(sends[m]);
    }
  (void)step;
}

static void backward(void) {
  float g[N] = {0};
  dist_tensor t = dist_tensor_1d(g, DIST_FLOAT32, N);
  for (int m = MB - 1; m >= 0; m--) {
    if (me < 3)
      ok("backward recv", dist_recv(&t, me + 1, NULL, 10 + m, NULL));
    if (me > 0)
      ok("backward send", dist_send(&t, me - 1, NULL, 10 + m));
  }
}

/* Ring attention's exchange: 4 rounds, each sending the block held to the
 * next rank and receiving the previous rank's; with tag_bug, round 0 sends
 * with tag 1. */
static void ring(bool tag_bug) {
  static float blocks[2][N];
  for (int round = 0; round < 4; round++) {
    dist_tensor out = dist_tensor_1d(blocks[round % 2], DIST_FLOAT32, N);
    dist_tensor in = dist_tensor_1d(blocks[1 - round % 2], DIST_FLOAT32, N);
    dist_p2p_op ops[2] = {
        {.is_send = true, .tensor = &out, .peer = (me + 1) % 4, .tag = tag_bug && !round},
        {.is_send = false, .tensor = &in, .peer = (me + 3) % 4, .tag = 0},
    };
    dist_work *w = NULL;
    ok("ring batch", dist_batch_isend_irecv(ops, 2, &w));
    ok("ring wait", dist_work_wait(w, -1));
    dist_work_free(w);
  }
}

/* Per layer l (of 3, sizes 3N/4, N/2, N/4 per rank): a dp all_gather of
 * the parameters and a dp reduce_scatter of the gradients; with max_bug,
 * layer 1's reduce_scatter reduces with MAX. */
static void layers(dist_pg *dp, bool max_bug) {
  static float shard[N], full[2 * N], grad[2 * N], part[N];
  for (int l = 0; l < 3; l++) {
    int64_t n = (int64_t)N * (3 - l) / 4;
    dist_tensor in = dist_tensor_1d(shard, DIST_FLOAT32, n);
    dist_tensor out = dist_tensor_1d(full, DIST_FLOAT32, 2 * n);
    ok("dp all_gather", dist_all_gather_into_tensor(&out, &in, dp, NULL));
    dist_tensor g = dist_tensor_1d(grad, DIST_FLOAT32, 2 * n);
    dist_tensor p = dist_tensor_1d(part, DIST_FLOAT32, n);
    ok("dp reduce_scatter",
       dist_reduce_scatter_tensor(&p, &g, max_bug && l == 1 ? DIST_MAX : DIST_SUM, dp, NULL));
  }
}

int main(int argc, char **argv) {
  alarm(60);
  const char *bug = argc > 1 ? argv[1] : "none";
  if (strcmp(bug, "tag") && strcmp(bug, "skipmb") && strcmp(bug, "dpskip") &&
      strcmp(bug, "layers") && strcmp(bug, "layersnd") && strcmp(bug, "ringtag") &&
      strcmp(bug, "none")) {
    fprintf(stderr, "usage: %s tag | skipmb | dpskip | layers | layersnd | ringtag | none\n",
            argv[0]);
    return 2;
  }
  ok("init", dist_init_process_group(NULL));
  me = dist_get_rank(NULL);
  dist_pg *dp = NULL;
  dist_group_opts o = {.desc = "dp"};
  for (int first = 0; first < 2; first++) { /* every rank makes both */
    int members[2] = {first, first + 2};
    dist_pg *g = NULL;
    ok("new dp", dist_new_group(members, 2, strcmp(bug, "layersnd") ? &o : NULL, &g));
    if (g != DIST_GROUP_NON_MEMBER)
      dp = g;
  }
  for (int step = 0; step < 3; step++) {
    bool planted = me == 1 && step == 1;
    if (!strcmp(bug, "layers") || !strcmp(bug, "layersnd")) {
      layers(dp, planted);
      continue;
    }
    if (!strcmp(bug, "ringtag")) {
      ring(me == 1 && step == 2); /* once its steps have a habit */
    } else if (strcmp(bug, "dpskip")) { /* without the pipeline, whose waits would close a cycle */
      forward(step, planted && !strcmp(bug, "tag"), planted && !strcmp(bug, "skipmb"));
      backward();
    }
    float grad[N] = {0}, loss = 1;
    dist_tensor gt = dist_tensor_1d(grad, DIST_FLOAT32, N);
    dist_work *w = NULL;
    if (!(planted && !strcmp(bug, "dpskip")))
      ok("dp all_reduce", dist_all_reduce(&gt, DIST_SUM, dp, &w));
    dist_tensor t = dist_tensor_1d(&loss, DIST_FLOAT32, 1);
    ok("all_reduce", dist_all_reduce(&t, DIST_SUM, NULL, NULL));
    if (w) {
      ok("dp wait", dist_work_wait(w, -1));
      dist_work_free(w);
    }
  }
  dist_destroy_process_group(NULL);
  return 0;
}
