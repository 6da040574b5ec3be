/* moe_train.c - a mixture-of-experts step on 8 ranks with one planted bug
 * at a time (built as build/bin/moe_train).
 *
 *     DIST_DEBUG=DETAIL distrun -n 8 build/bin/moe_train --bug kill
 *
 * Expert groups of 4 ranks ({0-3}, {4-7}) route tokens with an uneven
 * all_to_all_single; pipeline stages (rank r and r + 4) exchange
 * activations with batched isend/irecv; gradients are all_reduced in two
 * async buckets on the data-parallel groups ({r, r + 4}); the config is a
 * byte-blob broadcast from rank 0 each step. Values are checked.
 *
 * Bugs (on rank --rank, default 5, in step --step, default 2):
 *   kill      the rank is killed (SIGKILL) before its all_to_all
 *   stop      it stops (SIGSTOP) before its all_to_all, as under a debugger
 *   nan       a NaN in its first gradient bucket (DIST_NAN_CHECK=1 is set)
 *   order     it creates its data-parallel group before its expert group
 *   recvrecv  it receives from its stage partner before it sends (plain
 *             recv/send instead of the batch), and so does the partner
 *   exit0     it returns 0 from main before the step
 *   exit3     it exits with status 3 before the step
 *   splits    it sends one token too many to the first expert rank
 *   batchpeer it sends its batched activations to the next rank's stage
 *             partner (r + 5) instead of its own (r + 4)
 *   batchomit it leaves its receive out of the batch (sends alone), so its
 *             partner's send is never taken */
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <dist/dist.h>

#define TOK 8     /* tokens per rank per expert, on average */
#define GRAD 128

typedef struct job {
  int rank, world;
  dist_pg *g_ep, *g_dp;
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

static void make_groups(job *j) {
  int ep[4], dp[2];
  int base = j->rank / 4 * 4;
  for (int i = 0; i < 4; i++)
    ep[i] = base + i;
  dp[0] = j->rank % 4;
  dp[1] = dp[0] + 4;
  dist_group_opts oe = {.desc = "ep"}, od = {.desc = "dp"};
  /* Every rank creates every group, in one order (torch's rule). */
  dist_pg *eps[2], *dps[4];
  bool swap = !strcmp(j->bug, "order") && j->rank == j->culprit;
  for (int pass = 0; pass < 2; pass++) {
    bool do_ep = (pass == 0) != swap;
    if (do_ep) {
      for (int e = 0; e < 2; e++) {
        int r[4] = {4 * e, 4 * e + 1, 4 * e + 2, 4 * e + 3};
        TRY("new_group ep", dist_new_group(r, 4, &oe, &eps[e]));
      }
    } else {
      for (int d = 0; d < 4; d++) {
        int r[2] = {d, d + 4};
        TRY("new_group dp", dist_new_group(r, 2, &od, &dps[d]));
      }
    }
  }
  j->g_ep = eps[base / 4];
  j->g_dp = dps[dp[0]];
  (void)ep;
}

static void route(const job *j, int step) {
  int64_t in_split[4], out_split[4];
  float in[64], out[64];
  for (int i = 0; i < 4; i++)
    in_split[i] = out_split[i] = TOK;
  if (planted(j, step, "splits"))
    in_split[0] = TOK + 1, in_split[1] = TOK - 1;
  for (int i = 0; i < 64; i++)
    in[i] = (float)j->rank;
  if (planted(j, step, "kill"))
    raise(SIGKILL);
  if (planted(j, step, "stop"))
    raise(SIGSTOP);
  dist_tensor ti = dist_tensor_1d(in, DIST_FLOAT32, 4 * TOK);
  dist_tensor to = dist_tensor_1d(out, DIST_FLOAT32, 4 * TOK);
  TRY("ep all_to_all", dist_all_to_all_single(&to, &ti, out_split, in_split, j->g_ep, NULL));
}

static void pipeline(const job *j, int step) {
  float mine[16], theirs[16];
  for (int i = 0; i < 16; i++)
    mine[i] = (float)j->rank;
  int peer = (j->rank + 4) % 8;
  dist_tensor ts = dist_tensor_1d(mine, DIST_FLOAT32, 16);
  dist_tensor tr = dist_tensor_1d(theirs, DIST_FLOAT32, 16);
  bool rr = !strcmp(j->bug, "recvrecv") && step == j->bug_step &&
            (j->rank == j->culprit || j->rank == (j->culprit + 4) % 8);
  if (rr) { /* receive first, on both sides: each waits for the other */
    TRY("recv", dist_recv(&tr, peer, NULL, 1, NULL));
    TRY("send", dist_send(&ts, peer, NULL, 1));
  } else {
    int to = planted(j, step, "batchpeer") ? (j->rank + 5) % 8 : peer;
    bool omit = planted(j, step, "batchomit");
    dist_p2p_op ops[2] = {{.is_send = true, .tensor = &ts, .peer = to, .tag = 1},
                          {.is_send = false, .tensor = &tr, .peer = peer, .tag = 1}};
    dist_work *w;
    TRY("batch_isend_irecv", dist_batch_isend_irecv(ops, omit ? 1 : 2, &w));
    TRY("wait", dist_work_wait(w, -1));
    dist_work_free(w);
    if (omit)
      return; /* nothing received to check */
  }
  if (theirs[0] != (float)peer) {
    fprintf(stderr, "pipeline: got %g from rank %d\n", theirs[0], peer);
    exit(3);
  }
}

static void grads(const job *j, int step) {
  float b0[GRAD], b1[GRAD];
  for (int i = 0; i < GRAD; i++)
    b0[i] = b1[i] = 1.0f;
  if (planted(j, step, "nan"))
    b0[7] = NAN;
  dist_tensor t0 = dist_tensor_1d(b0, DIST_FLOAT32, GRAD);
  dist_tensor t1 = dist_tensor_1d(b1, DIST_FLOAT32, GRAD);
  dist_work *w0, *w1;
  TRY("dp all_reduce bucket 0", dist_all_reduce(&t0, DIST_SUM, j->g_dp, &w0));
  TRY("dp all_reduce bucket 1", dist_all_reduce(&t1, DIST_SUM, j->g_dp, &w1));
  TRY("wait bucket 0", dist_work_wait(w0, -1));
  TRY("wait bucket 1", dist_work_wait(w1, -1));
  dist_work_free(w0);
  dist_work_free(w1);
}

static void config(const job *j, int step) {
  char text[64];
  int n = snprintf(text, sizeof text, "lr=0.1 step=%d", step);
  dist_bytes b = {.data = j->rank == 0 ? text : NULL, .len = j->rank == 0 ? (size_t)n + 1 : 0};
  TRY("config broadcast", dist_broadcast_bytes(&b, 0, NULL));
  if (strncmp((const char *)b.data, "lr=0.1", 6) != 0) {
    fprintf(stderr, "config: %s\n", (const char *)b.data);
    exit(3);
  }
  if (j->rank != 0)
    dist_free(b.data);
}

int main(int argc, char **argv) {
  job j = {.bug = "none", .culprit = 5, .bug_step = 2, .steps = 4};
  for (int i = 1; i < argc; i++) {
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(argv[i], "--help")) {
      printf("usage: distrun -n 8 %s [--bug NAME] [--rank R] [--step S]\n"
             "bugs: kill stop nan order recvrecv exit0 exit3 splits batchpeer batchomit\n", argv[0]);
      return 0;
    } else if (!strcmp(argv[i], "--bug") && v) {
      j.bug = argv[++i];
    } else if (!strcmp(argv[i], "--rank") && v) {
      j.culprit = atoi(argv[++i]);
    } else if (!strcmp(argv[i], "--step") && v) {
      j.bug_step = atoi(argv[++i]);
    } else {
      fprintf(stderr, "moe_train: bad argument %s\n", argv[i]);
      return 2;
    }
  }
  if (!strcmp(j.bug, "nan"))
    setenv("DIST_NAN_CHECK", "1", 0);
  TRY("init", dist_init_process_group(NULL));
  j.rank = dist_get_rank(NULL);
  j.world = dist_get_world_size(NULL);
  if (j.world != 8) {
    fprintf(stderr, "moe_train needs 8 ranks\n");
    return 2;
  }
  make_groups(&j);
  for (int s = 0; s < j.steps; s++) {
    if (s == j.bug_step && j.rank == j.culprit && !strcmp(j.bug, "exit0"))
      return 0;
    if (s == j.bug_step && j.rank == j.culprit && !strcmp(j.bug, "exit3"))
      exit(3);
    route(&j, s);
    pipeline(&j, s);
    grads(&j, s);
    config(&j, s);
  }
  if (j.rank == 0)
    printf("moe_train: %d steps: ok\n", j.steps);
  dist_destroy_process_group(NULL);
  return 0;
}
