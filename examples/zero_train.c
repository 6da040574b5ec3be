/* zero_train.c - a sharded data-parallel step (ZeRO-3 / FSDP style) on 8
 * ranks with one planted bug at a time (built as build/bin/zero_train).
 *
 *     DIST_DEBUG=DETAIL distrun -n 8 build/bin/zero_train --bug redop
 *
 * Parameters are sharded over "shard" groups of 4 ranks (made with
 * dist_new_subgroups) and replicated across the two shard groups (the
 * "replicate" groups {r, r + 4}). Each step: an async all_gather of the
 * parameters (waited before use), a reduce_scatter of the gradients on the
 * shard group, an async all_reduce of the gradient shard on the replicate
 * group, a gather of each rank's loss to rank 0 and an all_gather of a
 * status blob on the world; a monitored barrier ends the run. Values are
 * checked, so a run without a bug says "ok".
 *
 * Bugs (on rank --rank, default 6, in step --step, default 2):
 *   count     passes one element too few to the shard reduce_scatter
 *   redop     uses MAX instead of SUM in the replicate all_reduce
 *   root      gathers the loss to rank 1 instead of rank 0
 *   extra     calls an extra barrier on its shard group
 *   tag       receives the ring token with tag 1 where the sender uses 0
 *   abort     calls abort() before the reduce_scatter
 *   exit1     exits with status 1 before the reduce_scatter
 *   monbar    skips the final monitored barrier
 *   size      receives the ring token into a buffer of 2 elements
 *   sleep     sleeps for a minute before the reduce_scatter
 *   othershard gathers its parameters on the other shard group (from
 *             new_subgroups' list), of which it is not a member: the call
 *             does nothing (as in torch) and it goes on to the reduce_scatter
 *   droprep   destroys its replicate group instead of waiting for its async
 *             all_reduce, and skips the replicate all_reduce from then on
 *   leaverep  waits for its replicate all_reduce, then destroys the group and
 *             skips the replicate all_reduce from then on
 *   pcount    passes one element too few to its async parameter all_gather;
 *             in this mode every rank prefetches (issues a second async
 *             all_gather, of the next layer, before it waits for the first)
 *   quit      ends its loop a step early (the last step, whatever --step
 *             says), skips the monitored barrier, destroys and returns 0
 * --steps N runs N steps (default 4). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <dist/dist.h>

#define SHARD 64 /* parameters per rank */

typedef struct job {
  int rank, world;
  dist_pg *g_shard, *g_rep;
  dist_pg *g_other_shard; /* the shard group it is not in (DIST_GROUP_NON_MEMBER) */
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

static void check(const job *j, int step, const char *what, double got, double want) {
  if (got != want && !planted(j, step, j->bug)) {
    fprintf(stderr, "rank %d step %d: %s: got %g, want %g\n", j->rank, step, what, got, want);
    exit(3);
  }
}

static void make_groups(job *j) {
  dist_group_opts os = {.desc = "shard"}, orp = {.desc = "replicate"};
  dist_pg **shards = NULL;
  size_t n_shards = 0;
  TRY("new_subgroups", dist_new_subgroups(4, &os, &j->g_shard, &shards, &n_shards));
  j->g_other_shard = shards[(j->rank / 4 + 1) % n_shards];
  dist_free(shards);
  dist_pg *rep[4];
  for (int i = 0; i < 4; i++) {
    int r[2] = {i, i + 4};
    TRY("new_group replicate", dist_new_group(r, 2, &orp, &rep[i]));
  }
  j->g_rep = rep[j->rank % 4];
}

/* Each rank's parameter shard holds its rank; the gathered whole holds
 * every shard's rank in shard-group order. */
static void gather_params(const job *j, int step, float *shard, float *full) {
  for (int i = 0; i < SHARD; i++)
    shard[i] = (float)(j->rank % 4);
  int64_t n = planted(j, step, "pcount") ? SHARD - 1 : SHARD;
  dist_tensor in = dist_tensor_1d(shard, DIST_FLOAT32, n);
  dist_tensor out = dist_tensor_1d(full, DIST_FLOAT32, 4 * n);
  dist_work *w = NULL;
  dist_pg *g = planted(j, step, "othershard") ? j->g_other_shard : j->g_shard;
  TRY("all_gather params", dist_all_gather_into_tensor(&out, &in, g, &w));
  static float next_shard[SHARD], next_full[4 * SHARD];
  dist_tensor nin = dist_tensor_1d(next_shard, DIST_FLOAT32, SHARD);
  dist_tensor nout = dist_tensor_1d(next_full, DIST_FLOAT32, 4 * SHARD);
  dist_work *wn = NULL;
  if (!strcmp(j->bug, "pcount")) /* the next layer's, two in flight */
    TRY("prefetch next layer", dist_all_gather_into_tensor(&nout, &nin, g, &wn));
  TRY("wait params", dist_work_wait(w, -1));
  dist_work_free(w);
  if (wn) {
    TRY("wait next layer", dist_work_wait(wn, -1));
    dist_work_free(wn);
  }
  check(j, step, "params", full[3 * SHARD], 3);
}

/* Set once the rank destroyed its replicate group (--bug droprep). */
static bool rep_dropped;

static void reduce_grads(const job *j, int step, float *full, float *grad) {
  if (planted(j, step, "abort"))
    abort();
  if (planted(j, step, "exit1"))
    exit(1);
  if (planted(j, step, "sleep"))
    sleep(60);
  if (planted(j, step, "extra"))
    TRY("extra barrier", dist_barrier(j->g_shard, NULL));
  for (int i = 0; i < 4 * SHARD; i++)
    full[i] = 1.0f;
  int64_t n = planted(j, step, "count") ? SHARD - 1 : SHARD;
  dist_tensor in = dist_tensor_1d(full, DIST_FLOAT32, 4 * n);
  dist_tensor out = dist_tensor_1d(grad, DIST_FLOAT32, n);
  TRY("reduce_scatter grads", dist_reduce_scatter_tensor(&out, &in, DIST_SUM, j->g_shard, NULL));
  check(j, step, "grads", grad[0], 4);
  if (rep_dropped)
    return;
  dist_tensor g = dist_tensor_1d(grad, DIST_FLOAT32, SHARD);
  dist_work *w = NULL;
  dist_redop op = planted(j, step, "redop") ? DIST_MAX : DIST_SUM;
  TRY("all_reduce replicate", dist_all_reduce(&g, op, j->g_rep, &w));
  if (planted(j, step, "droprep")) { /* "the replicas are in sync now": freed early */
    TRY("destroy replicate", dist_destroy_process_group(j->g_rep));
    dist_work_free(w);
    rep_dropped = true;
    return;
  }
  TRY("wait replicate", dist_work_wait(w, -1));
  dist_work_free(w);
  if (planted(j, step, "leaverep")) { /* "the replicas are in sync now" */
    TRY("destroy replicate", dist_destroy_process_group(j->g_rep));
    rep_dropped = true;
  }
  check(j, step, "replicated grads", grad[0], 8);
}

/* A token passes around the shard group: rank i sends to i + 1. */
static void ring_token(const job *j, int step) {
  int me = j->rank % 4, base = j->rank / 4 * 4;
  int next = base + (me + 1) % 4, prev = base + (me + 3) % 4;
  int token = j->rank, got[2] = {-1, -1};
  dist_tensor s = dist_tensor_1d(&token, DIST_INT32, 1);
  dist_tensor r = dist_tensor_1d(got, DIST_INT32, planted(j, step, "size") ? 2 : 1);
  dist_work *ws = NULL, *wr = NULL;
  int tag = planted(j, step, "tag") ? 1 : 0;
  TRY("isend token", dist_isend(&s, next, NULL, 0, &ws));
  TRY("irecv token", dist_irecv(&r, prev, NULL, tag, &wr));
  TRY("wait token recv", dist_work_wait(wr, -1));
  TRY("wait token send", dist_work_wait(ws, -1));
  dist_work_free(ws);
  dist_work_free(wr);
  check(j, step, "token", got[0], prev);
}

static void report_loss(const job *j, int step) {
  float loss = (float)(j->rank + step), all[64];
  int dst = planted(j, step, "root") ? 1 : 0;
  dist_tensor in = dist_tensor_1d(&loss, DIST_FLOAT32, 1);
  dist_tensor list[64];
  for (int i = 0; i < j->world; i++)
    list[i] = dist_tensor_1d(&all[i], DIST_FLOAT32, 1);
  bool root = j->rank == dst;
  TRY("gather loss", dist_gather(&in, root ? list : NULL, root ? (size_t)j->world : 0, dst,
                                 NULL, NULL));
  if (j->rank == 0)
    check(j, step, "loss of the last rank", all[j->world - 1], j->world - 1 + step);
  char status[32];
  int len = snprintf(status, sizeof status, "rank %d step %d", j->rank, step);
  dist_bytes mine = {status, (size_t)len + 1}, every[64];
  TRY("all_gather status", dist_all_gather_bytes(&mine, every, NULL));
  check(j, step, "status blob", (double)strncmp(every[j->world - 1].data, "rank ", 5), 0);
  for (int i = 0; i < j->world; i++)
    dist_free(every[i].data);
}

static int parse(job *j, int argc, char **argv) {
  for (int i = 1; i < argc; i++) {
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(argv[i], "--bug") && v)
      j->bug = argv[++i];
    else if (!strcmp(argv[i], "--rank") && v)
      j->culprit = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--step") && v)
      j->bug_step = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--steps") && v)
      j->steps = atoi(argv[++i]);
    else {
      printf("usage: distrun -n 8 %s [--bug NAME] [--rank R] [--step S] [--steps N]\n"
             "bugs: count redop root extra tag abort exit1 monbar size sleep othershard droprep "
             "leaverep pcount quit "
             "(none: healthy)\n",
             argv[0]);
      return strcmp(argv[i], "--help") ? 2 : 0;
    }
  }
  return -1;
}

int main(int argc, char **argv) {
  job j = {.bug = "none", .culprit = 6, .bug_step = 2, .steps = 4};
  int rc = parse(&j, argc, argv);
  if (rc >= 0)
    return rc;
  TRY("init", dist_init_process_group(NULL));
  j.rank = dist_get_rank(NULL);
  j.world = dist_get_world_size(NULL);
  if (j.world != 8) {
    fprintf(stderr, "zero_train runs on 8 ranks\n");
    return 2;
  }
  make_groups(&j);
  float shard[SHARD], full[4 * SHARD], grad[SHARD];
  bool quits = j.rank == j.culprit && !strcmp(j.bug, "quit");
  for (int s = 0; s < j.steps; s++) {
    if (quits && s == j.steps - 1)
      break; /* "its last step is not needed" */
    gather_params(&j, s, shard, full);
    reduce_grads(&j, s, full, grad);
    ring_token(&j, s);
    report_loss(&j, s);
  }
  if (!(j.rank == j.culprit && !strcmp(j.bug, "monbar")) && !quits)
    TRY("monitored_barrier", dist_monitored_barrier(NULL, 5000, true));
  TRY("destroy", dist_destroy_process_group(NULL));
  if (j.rank == 0)
    printf("ok\n");
  return 0;
}
