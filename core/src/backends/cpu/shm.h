/* shm.h - the shared-memory collective engine (groups on one host).
 *
 * One segment per group, created by group rank 0 (shm_open under a name it
 * publishes in the group store, unlinked once every member has mapped it,
 * so a crash leaves nothing behind in /dev/shm). Collectives move data
 * through per-rank slots with flags in shared memory: the caller's thread
 * spins on a flag for a short while, then yields, then sleeps on a futex
 * (an idle or waiting rank must not burn a core for minutes), checking the
 * deadline, the group's abort flag and the peers' pidfds as it waits.
 *
 * Every collective first publishes this rank's descriptor (kind, dtype,
 * counts, root, reduce op, sequence number) next to its arrival flag; every
 * rank compares the descriptors it waits on, so ranks that disagree fail
 * together with a message naming the differing rank and both sizes.
 * Exception: the root of a small broadcast or scatter returns without
 * waiting; a reader that disagrees fails at once, the root's next
 * operation fails naming it, and the group is then broken (shm_int.h); a
 * group destroyed before that next operation settles them at the destroy
 * (dist__shm_settle_final). */
#ifndef DIST_CPU_SHM_H
#define DIST_CPU_SHM_H

#include "cpu.h"

typedef struct dist__shm dist__shm;

/* Collective over the group store: every member calls it at init. store is
 * the group's private store (caller thread only). */
int dist__shm_create(dist__cpu_group *g, dist_store *store, int64_t deadline_ms,
                     dist__shm **out, dist__errbuf *err);
/* Unmaps and closes; no thread of the group may be inside the engine. */
void dist__shm_destroy(dist__shm *s);
/* Wakes every waiter so it notices g->aborted (any thread, never blocks). */
void dist__shm_wake_all(dist__shm *s);
/* Runs one collective to completion (every kind but SEND, RECV and
 * BATCH_P2P). One collective at a time per group. */
int dist__shm_run(dist__shm *s, dist__cpu_op *op);
/* Before the group is destroyed (no operation running): the descriptor
 * checks this rank still owes as the root of small broadcasts or
 * scatters, which no later operation will settle. Waits until
 * op->deadline_ms at most for the other ranks to reach those calls, and
 * gives up quietly when they do not (or left, or the group failed):
 * DIST_OK. DIST_E_DESYNC when they disagreed, with the report in
 * op->err, and the earlier call's kind and number in *kind and *seq
 * (op->c is not read). One compare when nothing is owed. */
int dist__shm_settle_final(dist__shm *s, dist__cpu_op *op, int *kind, uint64_t *seq);

#endif
