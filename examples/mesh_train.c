/* mesh_train.c - a training step as people write it on a 2-D mesh, with one
 * planted bug at a time (built as build/bin/mesh_train).
 *
 *     DIST_DEBUG=DETAIL distrun -n 8 build/bin/mesh_train --bug skip
 *
 * 8 ranks (or any multiple of 4) on a mesh "dp" x "tp" = world/2 x 2. Each
 * step: a tp all_reduce of the activations, an async tp all_gather waited
 * at the end of the step, pipeline send/recv between stages (rank r sends
 * to r + 2 when there is one, receives from r - 2), a dp all_reduce of the
 * gradients and a world broadcast of the loss. Values are checked after
 * every step, so a run without a bug says "ok".
 *
 * Bugs (planted on rank --rank, default 3, in step --step, default 2):
 *   skip       the rank skips the tp all_reduce
 *   dtype      the rank passes float64 to the dp all_reduce
 *   spin       the rank computes for ever before the tp all_reduce
 *   swap       the rank calls the world broadcast before its tp all_reduce
 *   crash      the rank dereferences NULL before the tp all_reduce
 *   wrongpeer  the rank receives from the wrong stage (r - 4, or r + 2)
 *   async      the rank runs the tp all_gather synchronously as an all_reduce
 *              while its partner's is async (a sync-against-async mismatch)
 *   exit0      the rank returns from main with status 0 before the step
 *   leave      the rank stops its loop before the step, destroys its groups, returns 0
 *   straggle   the rank arrives 30 ms late at every world broadcast
 *   late       the rank computes for ever before the world broadcast
 *   barrier    the rank calls a tp barrier before the world broadcast (its partner does not)
 *   extra      the rank calls one more world all_reduce after the last
 *              step, when the others have finished
 *   sendtag    the rank sends its activations with tag 5 (the receive takes 0)
 *   wrongdest  the rank sends its activations to r + 4 instead of r + 2
 *   senddtype  the rank sends its activations as int32 (same byte count)
 *   abort      the rank aborts its dp group (dist_abort_group) after the dp all_reduce
 *   newgroup   the rank creates a world group (dist_new_group) nobody else creates
 *   nosend     the rank skips its send to the next stage (which waits to receive)
 *   recvtwice  the rank receives twice from the previous stage (which has
 *              gone on to the dp all_reduce)
 *   recvskip   the rank skips its receive from the previous stage (which
 *              waits to send)
 *   kill       the rank is killed (SIGKILL: the OOM killer) with its async
 *              tp all_gather in flight
 *   pastend    the rank, a last stage (--rank 6 or 7), sends to r + 2 past the
 *              world's end (a bound check forgotten): the call is refused
 *              and the rank exits on the error
 *   unchecked  the rank's dp all_reduce gets a NULL tensor and its return
 *              code goes unchecked: the call is refused and the rank goes on
 * --steps N runs N steps (default 5). --step-tags tags each step's
 * pipeline messages with the step's number (as a pipeline tags its
 * micro-batches), where they take tag 0 by default. */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <dist/dist.h>

#define ACT 64   /* activations per rank */
#define GRAD 256 /* gradients per rank */

typedef struct job {
  int rank, world, dp, tp;  /* dp, tp: this rank's coordinate */
  dist_pg *g_dp, *g_tp;
  const char *bug;
  int culprit, bug_step, steps;
  bool step_tags;           /* --step-tags */
} job;

static bool planted(const job *j, int step, const char *bug) {
  return j->rank == j->culprit && step == j->bug_step && !strcmp(j->bug, bug);
}

static void fail(const char *what, int rc) {
  fprintf(stderr, "%s failed: %s\n", what, dist_errmsg(rc, NULL));
  exit(1);
}

#define TRY(what, call)        \
  do {                         \
    int rc_ = (call);          \
    if (rc_ != DIST_OK)        \
      fail((what), rc_);       \
  } while (0)

/* A compute loop the optimiser cannot drop. */
static void spin_forever(void) {
  volatile uint64_t x = 1;
  for (;;)
    x = x * 6364136223846793005ULL + 1;
}

static void tp_all_reduce(const job *j, int step, float *act) {
  if (planted(j, step, "skip"))
    return;
  if (planted(j, step, "spin"))
    spin_forever();
  if (planted(j, step, "crash")) {
    volatile int *null = NULL;
    *null = 1; /* the planted crash */
  }
  if (planted(j, step, "swap")) { /* the world broadcast comes first */
    float loss = 0;
    dist_tensor t = dist_tensor_1d(&loss, DIST_FLOAT32, 1);
    TRY("broadcast", dist_broadcast(&t, 0, NULL, NULL));
  }
  dist_tensor t = dist_tensor_1d(act, DIST_FLOAT32, ACT);
  TRY("tp all_reduce", dist_all_reduce(&t, DIST_SUM, j->g_tp, NULL));
}

/* Rank r sends its activations to r + 2 and receives from r - 2: stages
 * of the pipeline along dp. */
static void pipeline(const job *j, int step, float *act, float *from_prev) {
  dist_tensor out = dist_tensor_1d(act, DIST_FLOAT32, ACT);
  dist_tensor in = dist_tensor_1d(from_prev, DIST_FLOAT32, ACT);
  int prev = j->rank - 2, next = j->rank + 2;
  if (planted(j, step, "wrongpeer"))
    prev = prev >= 2 ? prev - 2 : next;
  int tag = j->step_tags ? step : 0;
  if ((prev >= 0 || planted(j, step, "wrongpeer")) && !planted(j, step, "recvskip"))
    TRY("recv", dist_recv(&in, prev, NULL, tag, NULL));
  if (prev >= 0 && planted(j, step, "recvtwice"))
    TRY("recv", dist_recv(&in, prev, NULL, tag, NULL)); /* a loop bound off by one */
  if ((next >= j->world && !planted(j, step, "pastend")) || planted(j, step, "nosend"))
    return;
  int32_t as_int[ACT] = {0};
  if (planted(j, step, "senddtype"))
    out = dist_tensor_1d(as_int, DIST_INT32, ACT);
  if (planted(j, step, "sendtag"))
    tag = 5;
  if (planted(j, step, "wrongdest"))
    next = (j->rank + 4) % j->world;
  TRY("send", dist_send(&out, next, NULL, tag));
}

/* Values are checked, except on the rank that planted a bug in this step
 * (it goes on as a buggy program would, for the others to notice). */
static const job *cur_job;
static int cur_step;

static void check(const char *what, double got, double want) {
  if (got != want && !planted(cur_job, cur_step, cur_job->bug)) {
    fprintf(stderr, "%s: got %g, want %g\n", what, got, want);
    exit(3);
  }
}

static void step_once(const job *j, int step) {
  float act[ACT], prev[ACT], grad[GRAD], gathered[2 * ACT], loss;
  cur_job = j;
  cur_step = step;
  for (int i = 0; i < ACT; i++)
    act[i] = (float)(j->rank + step);
  tp_all_reduce(j, step, act);
  /* tp partners are ranks 2k and 2k+1: their sum. */
  check("tp all_reduce", act[0], (double)(2 * (j->rank / 2 * 2) + 1 + 2 * step));
  dist_work *w = NULL;
  dist_tensor gin = dist_tensor_1d(act, DIST_FLOAT32, ACT);
  dist_tensor gout = dist_tensor_1d(gathered, DIST_FLOAT32, 2 * ACT);
  if (planted(j, step, "async"))
    TRY("tp all_reduce (sync)", dist_all_reduce(&gin, DIST_SUM, j->g_tp, NULL));
  else
    TRY("tp all_gather (async)", dist_all_gather_into_tensor(&gout, &gin, j->g_tp, &w));
  if (planted(j, step, "kill"))
    raise(SIGKILL); /* the planted kill */
  pipeline(j, step, act, prev);
  for (int i = 0; i < GRAD; i++)
    grad[i] = (float)j->tp;
  if (planted(j, step, "dtype")) {
    double g64[GRAD] = {0};
    dist_tensor t = dist_tensor_1d(g64, DIST_FLOAT64, GRAD);
    TRY("dp all_reduce", dist_all_reduce(&t, DIST_SUM, j->g_dp, NULL));
  } else if (planted(j, step, "unchecked")) {
    (void)dist_all_reduce(NULL, DIST_SUM, j->g_dp, NULL); /* the unchecked call */
  } else {
    dist_tensor t = dist_tensor_1d(grad, DIST_FLOAT32, GRAD);
    TRY("dp all_reduce", dist_all_reduce(&t, DIST_SUM, j->g_dp, NULL));
    check("dp all_reduce", grad[0], (double)(j->tp * (j->world / 2)));
  }
  if (planted(j, step, "abort")) /* its next dp call, and its dp partners', fail */
    TRY("dp abort", dist_abort_group(j->g_dp, "out of memory in the optimizer step"));
  if (planted(j, step, "late"))
    spin_forever();
  if (!strcmp(j->bug, "straggle") && j->rank == j->culprit)
    nanosleep(&(struct timespec){0, 30 * 1000 * 1000}, NULL); /* planted lateness */
  if (planted(j, step, "barrier"))
    TRY("tp barrier", dist_barrier(j->g_tp, NULL));
  dist_pg *extra = NULL;
  if (planted(j, step, "newgroup")) /* every rank must create it: this one waits there */
    TRY("new_group", dist_new_group(NULL, 0, &(dist_group_opts){.timeout_ms = 600000}, &extra));
  loss = j->rank == 0 ? (float)step : -1.0f;
  dist_tensor l = dist_tensor_1d(&loss, DIST_FLOAT32, 1);
  TRY("world broadcast", dist_broadcast(&l, 0, NULL, NULL));
  check("broadcast", loss, step);
  if (w) {
    TRY("wait all_gather", dist_work_wait(w, -1));
    dist_work_free(w);
  }
}

static void usage(const char *prog) {
  printf("usage: distrun -n 8 %s [--bug NAME] [--rank R] [--step S] [--steps N] "
         "[--step-tags]\n"
         "bugs: skip dtype spin swap crash wrongpeer async exit0 leave straggle late barrier extra "
         "sendtag wrongdest senddtype abort newgroup nosend recvtwice recvskip kill pastend "
         "unchecked (none: healthy)\n",
         prog);
}

int main(int argc, char **argv) {
  job j = {.bug = "none", .culprit = 3, .bug_step = 2, .steps = 5};
  for (int i = 1; i < argc; i++) {
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      usage(argv[0]);
      return 0;
    } else if (!strcmp(argv[i], "--bug") && v) {
      j.bug = argv[++i];
    } else if (!strcmp(argv[i], "--rank") && v) {
      j.culprit = atoi(argv[++i]);
    } else if (!strcmp(argv[i], "--step") && v) {
      j.bug_step = atoi(argv[++i]);
    } else if (!strcmp(argv[i], "--steps") && v) {
      j.steps = atoi(argv[++i]);
    } else if (!strcmp(argv[i], "--step-tags")) {
      j.step_tags = true;
    } else {
      usage(argv[0]);
      return 2;
    }
  }
  const char *names[2] = {"dp", "tp"};
  TRY("init", dist_init_process_group(NULL));
  j.rank = dist_get_rank(NULL);
  j.world = dist_get_world_size(NULL);
  if (j.world % 4) {
    fprintf(stderr, "mesh_train needs a multiple of 4 ranks\n");
    return 2;
  }
  /* static: a rank that returns early (--bug exit0) leaves it reachable,
   * as a training script's module-level mesh would be. */
  static dist_device_mesh *mesh;
  int64_t dims[2] = {j.world / 2, 2};
  TRY("mesh", dist_init_device_mesh("cpu", dims, 2, names, &mesh));
  TRY("dp group", dist_mesh_get_group_by_name(mesh, "dp", &j.g_dp));
  TRY("tp group", dist_mesh_get_group_by_name(mesh, "tp", &j.g_tp));
  int coord[2];
  TRY("coordinate", dist_mesh_get_coordinate(mesh, coord));
  j.dp = coord[0];
  j.tp = coord[1];
  for (int s = 0; s < j.steps; s++) {
    if (s == j.bug_step && j.rank == j.culprit && !strcmp(j.bug, "exit0"))
      return 0; /* leaves while the others still need it */
    if (s == j.bug_step && j.rank == j.culprit && !strcmp(j.bug, "leave"))
      break; /* a loop bound off by the others': it ends as a finished rank does */
    step_once(&j, s);
  }
  if (j.rank == j.culprit && !strcmp(j.bug, "extra")) { /* one call more than the others */
    float x = 1;
    dist_tensor t = dist_tensor_1d(&x, DIST_FLOAT32, 1);
    TRY("extra all_reduce", dist_all_reduce(&t, DIST_SUM, NULL, NULL));
  }
  if (j.rank == 0)
    printf("mesh_train: %d steps on %d ranks: ok\n", j.steps, j.world);
  dist_device_mesh_destroy(mesh);
  dist_destroy_process_group(NULL);
  return 0;
}
