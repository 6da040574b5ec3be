/* distrun_alive.c - the keep-alive between the nodes of a job: how node 0
 * learns that a node left when nothing else would tell it (its distrun
 * killed by SIGKILL, its machine gone: no "done", no "died", and ranks of
 * other nodes that are not talking to it never notice).
 *
 * DESIGN. The beats travel on node 0's event queue (distrun_store.c), so
 * node 0 hears them through the watcher thread it already has and pays
 * nothing to listen; any event from a node counts as a sign of life. A
 * node beats from its event loop's timer, never from a thread of its own,
 * so a node whose loop is stuck stops beating too. The loss of node 0 needs
 * no beat: the other nodes' connections to its store close, and their
 * watchers say "lost". */
#include <stdio.h>

#include "distrun.h"

int dist__run_alive_init(drun_alive *a, const drun_cfg *c) {
  *a = (drun_alive){.nnodes = c->nnodes, .next_beat = -1};
  a->limit_ms = c->keep_alive_ms * (c->keep_alive_max > 0 ? c->keep_alive_max : 1);
  if (c->nnodes == 1)
    return 0;
  int64_t now = dist__now_ms();
  if (c->node_rank != 0) {
    a->next_beat = now; /* at once: node 0 hears the node is up */
    return 0;
  }
  a->heard = dist__calloc((size_t)c->nnodes, sizeof *a->heard);
  a->ended = dist__calloc((size_t)c->nnodes, sizeof *a->ended);
  if (!a->heard || !a->ended) {
    dist__run_alive_free(a);
    dist__run_say("out of memory for the keep-alive of %d nodes", c->nnodes);
    return DRUN_EXIT_LAUNCH;
  }
  for (int k = 0; k < c->nnodes; k++)
    a->heard[k] = now; /* admitted just now: the round was their last word */
  a->ended[0] = true;
  return 0;
}

void dist__run_alive_free(drun_alive *a) {
  dist__free(a->heard);
  dist__free(a->ended);
  a->heard = NULL;
  a->ended = NULL;
}

bool dist__run_alive_heard(drun_alive *a, int node, bool ended) {
  if (!a->heard || node <= 0 || node >= a->nnodes)
    return ended;
  a->heard[node] = dist__now_ms();
  bool now_ended = ended && !a->ended[node];
  a->ended[node] = a->ended[node] || ended;
  return now_ended;
}

/* Node 0: the first node silent past the limit, or -1; *next: when the
 * next one would be. */
static int silent_node(const drun_alive *a, int64_t now, int64_t *next) {
  for (int k = 1; k < a->nnodes; k++) {
    if (a->ended[k])
      continue;
    int64_t due = a->heard[k] + a->limit_ms;
    if (now >= due)
      return k;
    if (*next < 0 || due < *next)
      *next = due;
  }
  return -1;
}

int64_t dist__run_alive_tick(drun_alive *a, const drun_cfg *c, drun_job *job, int64_t now,
                             int *gone) {
  *gone = -1;
  if (a->nnodes == 1 || !job->watching || a->limit_ms <= 0)
    return -1;
  if (c->node_rank != 0) {
    if (now >= a->next_beat) {
      dist__run_store_post_beat(c, job);
      a->next_beat = dist__now_ms() + c->keep_alive_ms;
    }
    return a->next_beat;
  }
  int64_t next = -1;
  *gone = silent_node(a, now, &next);
  if (*gone > 0) {
    a->ended[*gone] = true;
    if (*gone < 64)
      job->lost_nodes |= UINT64_C(1) << *gone;
    next = now; /* look again at once: another may be silent too */
  }
  return next;
}
