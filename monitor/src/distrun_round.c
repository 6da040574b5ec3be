/* distrun_round.c - the rounds of a job of several nodes that restarts
 * (--max-restarts) or is elastic (--nnodes MIN:MAX, c10d): each attempt is
 * a round on node 0's store, which node 0 hosts anew on the same port for
 * every attempt, so every key of a round is fresh.
 *
 * DESIGN. Node 0 publishes the job's run id and the attempt number with
 * the job id (distrun_store.c); a joining node takes them, and a node that
 * finds an older attempt than the one it wants (node 0 still closing the
 * last round) or whose connection is cut tries again until the join
 * timeout. In an elastic job each joining node takes a ticket
 * (distrun/node/next: 1, 2, ... in arrival order) and sets
 * distrun/round/joined/<ticket>; node 0 waits up to the join timeout for
 * MIN - 1 of them, then up to --rdzv-conf last_call_timeout more for
 * others, up to MAX - 1, and closes the round with distrun/round/nnodes =
 * N. Tickets below N are the admitted nodes' node ranks, so ranks follow
 * arrival order and nothing else; a node with a later ticket waits for the
 * next round. When an attempt ends, node 0 (who has heard every node's end,
 * or declared it gone: distrun_alive.c) decides for everyone, "restart" or
 * "end <status>" (distrun/decision), as torchrun's agents follow their
 * rendezvous: a restart when a rank failed (a death, a desync, a hang, a
 * node that left) and restarts are left. Every other node, admitted or
 * waiting, reads the decision and acknowledges it; node 0 closes the store
 * only after every acknowledgement (bounded), so no node is cut off in the
 * middle of its attempt. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "distrun.h"

#define KEY_NNODES "distrun/round/nnodes"
#define KEY_JOINED_FMT "distrun/round/joined/%d"
#define KEY_DECISION "distrun/decision"
#define KEY_ACK_FMT "distrun/decision/ack/%d"
#define ACK_WAIT_MS 10000       /* node 0: every node's acknowledgement */
#define DECISION_POLL_MS 10000  /* one wait for the decision */

bool dist__run_rounds(const drun_cfg *c) {
  return c->nnodes_max > 1 && (c->max_restarts > 0 || c->nnodes_min < c->nnodes_max);
}

static bool elastic(const drun_cfg *c) { return c->nnodes_min < c->nnodes_max; }

static int fail_store(drun_job *job, const char *what) {
  dist__run_say("%s: %s", what, dist_store_errmsg(job->store));
  return DRUN_EXIT_LAUNCH;
}

static bool joined(drun_job *job, int ticket, int64_t wait_ms) {
  char key[64];
  snprintf(key, sizeof key, KEY_JOINED_FMT, ticket);
  const char *k = key;
  return dist_store_wait(job->store, &k, 1, wait_ms) == DIST_OK;
}

/* Node 0 of an elastic job: MIN nodes within the join timeout, then up to
 * MAX within the last call; c->nnodes becomes the round's count. */
int dist__run_round_host(drun_cfg *c, drun_job *job) {
  if (!elastic(c))
    return 0;
  int64_t start = dist__now_ms();
  dist__run_say("attempt %d: waiting for at least %d node%s (--nnodes %d:%d), then up to %.1f s "
                "(last_call_timeout) for more", job->attempt, c->nnodes_min,
                c->nnodes_min == 1 ? "" : "s", c->nnodes_min, c->nnodes_max,
                (double)c->last_call_ms / 1000);
  for (int t = 1; t < c->nnodes_min; t++)
    if (!joined(job, t, c->join_timeout_ms - (dist__now_ms() - start))) {
      dist__run_say("only %d of at least %d nodes joined within %.1f s (--join-timeout)", t,
                    c->nnodes_min, (double)c->join_timeout_ms / 1000);
      return DRUN_EXIT_LAUNCH;
    }
  int n = c->nnodes_min;
  int64_t last = dist__now_ms() + c->last_call_ms;
  while (n < c->nnodes_max && joined(job, n, last - dist__now_ms() > 0 ? last - dist__now_ms() : 1))
    n++;
  char v[16];
  snprintf(v, sizeof v, "%d", n);
  if (dist_store_set(job->store, KEY_NNODES, v, strlen(v)) != DIST_OK)
    return fail_store(job, "cannot close the round");
  dist__run_say("attempt %d: a round of %d node%s (--nnodes %d:%d)", job->attempt, n,
                n == 1 ? "" : "s", c->nnodes_min, c->nnodes_max);
  c->nnodes = n;
  return 0;
}

/* Reads the decision (waiting for it) and acknowledges it under ticket;
 * true for "restart". *status: the job's status with "end". False with
 * *status -1 when the store is gone. */
static bool read_decision(drun_job *job, int ticket, int *status) {
  const char *k = KEY_DECISION;
  *status = -1;
  /* A waiting node may wait a whole attempt: bounded waits, for as long
   * as node 0's store is there (its end is the end of the job). */
  for (;;) {
    int rc = dist_store_wait(job->store, &k, 1, DECISION_POLL_MS);
    if (rc == DIST_OK)
      break;
    if (rc != DIST_E_TIMEOUT)
      return false;
  }
  void *v = NULL;
  size_t n = 0;
  if (dist_store_get(job->store, KEY_DECISION, &v, &n) != DIST_OK)
    return false;
  char d[32];
  snprintf(d, sizeof d, "%.*s", (int)(n < 31 ? n : 31), (const char *)v);
  dist_free(v);
  char ack[64];
  snprintf(ack, sizeof ack, KEY_ACK_FMT, ticket);
  dist_store_set(job->store, ack, "1", 1);
  if (!strcmp(d, "restart"))
    return true; /* the next round's store is found by the attempt number */
  sscanf(d, "end %d", status);
  return false;
}

/* An elastic joiner: its ticket; admitted (node rank = ticket) when it is
 * below the round's count, else it waits for the next round: returns
 * DRUN_WAIT_ROUND when node 0 decided to restart, or an exit status. */
int dist__run_round_join(drun_cfg *c, drun_job *job) {
  if (!elastic(c))
    return 0;
  int64_t t = 0;
  char key[64];
  if (dist_store_add(job->store, DIST_KEY_NODE_NEXT, 1, &t) != DIST_OK)
    return fail_store(job, "cannot join the round");
  snprintf(key, sizeof key, KEY_JOINED_FMT, (int)t);
  void *v = NULL;
  size_t n = 0;
  dist_store_set_timeout(job->store, c->join_timeout_ms + c->last_call_ms);
  if (dist_store_set(job->store, key, "1", 1) != DIST_OK ||
      dist_store_get(job->store, KEY_NNODES, &v, &n) != DIST_OK)
    return fail_store(job, "the round did not close");
  char nn[16];
  snprintf(nn, sizeof nn, "%.*s", (int)(n < 15 ? n : 15), (const char *)v);
  dist_free(v);
  int count = atoi(nn);
  if (t < count) {
    c->node_rank = (int)t;
    c->nnodes = count;
    return 0;
  }
  dist__run_say("attempt %d started with %d node%s before this one arrived (number %lld): "
                "waiting for the next round", job->attempt, count, count == 1 ? "" : "s",
                (long long)t + 1);
  int status;
  if (read_decision(job, (int)t, &status))
    return DRUN_WAIT_ROUND;
  if (status < 0) {
    dist__run_say("lost node 0's store while waiting for the next round");
    return DRUN_EXIT_OTHER;
  }
  dist__run_say("the job ended with status %d before a new round admitted this node", status);
  return DRUN_EXIT_LAUNCH;
}

/* Node 0: how many other nodes must read the decision: tickets 1..N of an
 * elastic job (every node that joined, admitted or waiting; the counter
 * holds the last ticket taken), else node ranks 1..nnodes-1. */
static int readers(const drun_cfg *c, drun_job *job) {
  int64_t last = c->nnodes - 1;
  if (elastic(c) && dist_store_add(job->store, DIST_KEY_NODE_NEXT, 0, &last) != DIST_OK)
    last = c->nnodes - 1;
  return (int)last;
}

/* Node 0: waits, bounded, until every reader but the nodes that left has
 * acknowledged the decision; only then may the store close. */
static void wait_acks(const drun_cfg *c, drun_job *job) {
  int n = readers(c, job), k = 0;
  char(*keys)[48] = n > 0 ? dist__calloc((size_t)n, sizeof *keys) : NULL;
  const char **kp = n > 0 ? dist__calloc((size_t)n, sizeof *kp) : NULL;
  for (int t = 1; keys && kp && t <= n; t++) {
    if (t < 64 && (job->lost_nodes >> t & 1))
      continue; /* gone: it will never read it */
    snprintf(keys[k], sizeof keys[k], KEY_ACK_FMT, t);
    kp[k] = keys[k];
    k++;
  }
  if (k > 0 && dist_store_wait(job->store, kp, (size_t)k, ACK_WAIT_MS) != DIST_OK)
    dist__run_say("not every node read how attempt %d ended within %d s; closing its store",
                  job->attempt, ACK_WAIT_MS / 1000);
  dist__free(keys);
  dist__free(kp);
}

bool dist__run_round_decide(const drun_cfg *c, drun_job *job, int status, bool restart) {
  if (!dist__run_rounds(c) || !job->store)
    return restart;
  if (c->node_rank != 0) {
    int st;
    return read_decision(job, c->node_rank, &st); /* admitted: its ticket */
  }
  char d[32];
  snprintf(d, sizeof d, restart ? "restart" : "end %d", status);
  if (dist_store_set(job->store, KEY_DECISION, d, strlen(d)) != DIST_OK) {
    fail_store(job, "cannot post the decision");
    return restart;
  }
  wait_acks(c, job);
  return restart;
}
