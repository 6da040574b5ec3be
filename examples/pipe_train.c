/* pipe_train.c - a 1F1B pipeline (torch's PipelineSchedule1F1B) over a
 * dp x pp mesh on 8 ranks, with one planted bug at a time (built as
 * build/bin/pipe_train).
 *
 *     DIST_DEBUG=DETAIL distrun -n 8 build/bin/pipe_train --bug wrongpeer
 *
 * Ranks 0-3 and 4-7 are two pipelines of 4 stages ("pp" groups, made with
 * dist_split_group); the ranks of one stage, {s, s + 4}, form a "dp" group.
 * Each step runs 4 micro-batches: warm-up forwards, then a steady phase
 * that sends each forward while it receives a backward (and the reverse),
 * as isend/irecv pairs or, every other micro-batch, one batch_isend_irecv;
 * then the cool-down backwards and an all_reduce of the gradients on the
 * dp group. Forwards travel with tag 1, backwards with tag 2. Values are
 * checked, so a run without a bug says "ok".
 *
 * Bugs (on rank --rank, default 5, in step --step, default 1):
 *   recvcount  receives its steady-phase forward into 8 elements, not 16
 *   wrongpeer  sends its steady-phase forward two stages on, not one
 *   exitcool   returns 0 in the cool-down, before its last backward
 * --steps N runs N steps (default 3). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <dist/dist.h>

#define STAGES 4
#define MICRO 4
#define WIDTH 16
#define TAG_FWD 1
#define TAG_BWD 2

typedef struct job {
  int rank, stage, pipe; /* pipe: which of the two pipelines (rank / 4) */
  dist_pg *g_pp, *g_dp;
  const char *bug;
  int culprit, bug_step, steps;
} job;

static bool planted(const job *j, int step, const char *bug) {
  return j->rank == j->culprit && step == j->bug_step && !strcmp(j->bug, bug);
}

#define TRY(what, call)                                                    \
  do {                                                                     \
    int rc_ = (call);                                                      \
    if (rc_ != DIST_OK) {                                                  \
      fprintf(stderr, "%s failed: %s\n", (what), dist_errmsg(rc_, NULL)); \
      exit(1);                                                             \
    }                                                                      \
  } while (0)

/* The global rank of stage s of this rank's pipeline. */
static int stage_rank(const job *j, int s) { return j->pipe * STAGES + s; }

/* One transfer, waited for: a plain isend/irecv, or a batch of one. */
static void one(const job *j, bool send, float *buf, int peer, int tag, bool batch) {
  dist_tensor t = dist_tensor_1d(buf, DIST_FLOAT32, WIDTH);
  dist_work *w = NULL;
  if (batch) {
    dist_p2p_op op = {send, &t, peer, tag, j->g_pp};
    TRY("batch", dist_batch_isend_irecv(&op, 1, &w));
  } else if (send) {
    TRY("isend", dist_isend(&t, peer, j->g_pp, tag, &w));
  } else {
    TRY("irecv", dist_irecv(&t, peer, j->g_pp, tag, &w));
  }
  TRY("wait", dist_work_wait(w, -1));
  dist_work_free(w);
}

/* A send and a receive at once (torch's send_forward_recv_backward and
 * send_backward_recv_forward): a batch of two for odd micro-batches, an
 * isend and an irecv waited in that order for even ones. */
static void exchange(const job *j, int step, int mb, float *sb, int to, int stag, float *rb,
                     int from, int rtag) {
  dist_tensor ts = dist_tensor_1d(sb, DIST_FLOAT32, WIDTH);
  dist_tensor tr = dist_tensor_1d(rb, DIST_FLOAT32, WIDTH);
  if (rtag == TAG_FWD && planted(j, step, "recvcount"))
    tr = dist_tensor_1d(rb, DIST_FLOAT32, WIDTH / 2);
  if (stag == TAG_FWD && planted(j, step, "wrongpeer"))
    to = stage_rank(j, (j->stage + 2) % STAGES);
  if (mb & 1) {
    dist_p2p_op ops[2] = {{true, &ts, to, stag, j->g_pp}, {false, &tr, from, rtag, j->g_pp}};
    dist_work *w = NULL;
    TRY("batch", dist_batch_isend_irecv(ops, 2, &w)); /* the batched exchange */
    TRY("batch wait", dist_work_wait(w, -1));
    dist_work_free(w);
    return;
  }
  dist_work *ws = NULL, *wr = NULL;
  TRY("isend", dist_isend(&ts, to, j->g_pp, stag, &ws));
  TRY("irecv", dist_irecv(&tr, from, j->g_pp, rtag, &wr));
  TRY("isend wait", dist_work_wait(ws, -1)); /* the exchange's send */
  TRY("irecv wait", dist_work_wait(wr, -1)); /* the exchange's receive */
  dist_work_free(ws);
  dist_work_free(wr);
}

/* A stage's work: every element grows by one (forward and backward alike),
 * so what arrives at stage s of micro-batch m in step t is known. */
static void compute(float *v) {
  for (int i = 0; i < WIDTH; i++)
    v[i] += 1.0f;
}

static void check(const job *j, int step, const char *what, float got, float want) {
  if (got != want && !planted(j, step, j->bug)) {
    fprintf(stderr, "rank %d step %d: %s: got %g, want %g\n", j->rank, step, what, got, want);
    exit(3);
  }
}

typedef struct batch {
  float act[MICRO][WIDTH], grad[MICRO][WIDTH];
} batch;

static void steady(const job *j, int step, batch *b, int *fwd, int *bwd) {
  bool first = j->stage == 0, last = j->stage == STAGES - 1;
  int next = stage_rank(j, j->stage + 1), prev = stage_rank(j, j->stage - 1);
  if (*fwd < MICRO && !first)
    one(j, false, b->act[*fwd], prev, TAG_FWD, false);
  while (*fwd < MICRO) {
    compute(b->act[*fwd]);
    if (last)
      memcpy(b->grad[*bwd], b->act[*fwd], sizeof b->grad[*bwd]); /* the loss's gradient */
    else
      exchange(j, step, *fwd, b->act[*fwd], next, TAG_FWD, b->grad[*bwd], next, TAG_BWD);
    (*fwd)++;
    compute(b->grad[*bwd]);
    if (!first && *fwd < MICRO)
      exchange(j, step, *fwd, b->grad[*bwd], prev, TAG_BWD, b->act[*fwd], prev, TAG_FWD);
    else if (!first)
      one(j, true, b->grad[*bwd], prev, TAG_BWD, false);
    (*bwd)++;
  }
}

/* One training step; returns false when the planted exit says so. */
static bool train_step(const job *j, int step) {
  static batch b;
  bool first = j->stage == 0, last = j->stage == STAGES - 1;
  int next = stage_rank(j, j->stage + 1), prev = stage_rank(j, j->stage - 1);
  for (int m = 0; m < MICRO; m++)
    for (int i = 0; i < WIDTH; i++)
      b.act[m][i] = first ? (float)(step + m) : 0.0f;
  int warm = STAGES - j->stage - 1, fwd = 0, bwd = 0;
  for (; fwd < warm && fwd < MICRO; fwd++) {
    if (!first)
      one(j, false, b.act[fwd], prev, TAG_FWD, fwd & 1);
    compute(b.act[fwd]);
    if (!last)
      one(j, true, b.act[fwd], next, TAG_FWD, fwd & 1);
  }
  steady(j, step, &b, &fwd, &bwd);
  for (; bwd < MICRO; bwd++) {
    if (bwd == MICRO - 1 && planted(j, step, "exitcool"))
      return false;
    if (!last)
      one(j, false, b.grad[bwd], next, TAG_BWD, bwd & 1); /* the cool-down receive */
    compute(b.grad[bwd]);
    if (!first)
      one(j, true, b.grad[bwd], prev, TAG_BWD, bwd & 1);
  }
  /* micro-batch m: STAGES forwards, then 2 * STAGES - stage - 1 more on the
   * way back to this stage */
  for (int m = 0; m < MICRO; m++)
    check(j, step, "gradient", b.grad[m][0], (float)(step + m + 2 * STAGES - j->stage));
  float sum[WIDTH];
  memcpy(sum, b.grad[0], sizeof sum);
  dist_tensor t = dist_tensor_1d(sum, DIST_FLOAT32, WIDTH);
  TRY("dp all_reduce", dist_all_reduce(&t, DIST_SUM, j->g_dp, NULL));
  check(j, step, "dp sum", sum[0], 2.0f * (float)(step + 2 * STAGES - j->stage));
  return true;
}

static void make_groups(job *j) {
  int a[STAGES] = {0, 1, 2, 3}, b[STAGES] = {4, 5, 6, 7};
  const int *pipes[2] = {a, b};
  size_t sizes[2] = {STAGES, STAGES};
  dist_group_opts opp = {.desc = "pp"}, odp = {.desc = "dp"};
  TRY("split pp", dist_split_group(NULL, pipes, sizes, 2, &opp, &j->g_pp));
  for (int s = 0; s < STAGES; s++) { /* every rank makes every dp group */
    int members[2] = {s, s + STAGES};
    dist_pg *g = NULL;
    TRY("new dp", dist_new_group(members, 2, &odp, &g));
    if (g != DIST_GROUP_NON_MEMBER)
      j->g_dp = g;
  }
}

int main(int argc, char **argv) {
  job j = {.bug = "none", .culprit = 5, .bug_step = 1, .steps = 3};
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--bug"))
      j.bug = argv[i + 1];
    else if (!strcmp(argv[i], "--rank"))
      j.culprit = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--step"))
      j.bug_step = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--steps"))
      j.steps = atoi(argv[i + 1]);
  }
  TRY("init", dist_init_process_group(NULL));
  j.rank = dist_get_rank(NULL);
  if (dist_get_world_size(NULL) != 2 * STAGES) {
    fprintf(stderr, "pipe_train runs on %d ranks\n", 2 * STAGES);
    return 2;
  }
  j.stage = j.rank % STAGES;
  j.pipe = j.rank / STAGES;
  make_groups(&j);
  for (int s = 0; s < j.steps; s++)
    if (!train_step(&j, s))
      return 0; /* the planted early return: its groups still live */
  if (j.rank == 0)
    printf("pipe_train: %d steps ok\n", j.steps);
  dist_destroy_process_group(NULL);
  return 0;
}
