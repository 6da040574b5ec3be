/* hier.h - hierarchical collectives for a group that spans hosts: the
 * shared-memory engine inside each host, the TCP engine among the hosts'
 * leaders between them.
 *
 * DESIGN. A host is a host id (boot id + network namespace, or DIST_HOST_ID
 * when set: a testing aid that places ranks of one machine on fake hosts).
 * Hosts are numbered 0 .. h-1 in ascending order of their lowest group
 * rank; a host's local ranks are its members in ascending group rank, and
 * its leader is local rank 0 (its lowest group rank). Every member builds:
 *   - a local group of its host's members (shared memory; none when alone),
 *   - the leaders' group, of the h leaders, in host order (TCP; leaders only).
 * The group's own full TCP engine stays for point-to-point and for
 * all_to_all, which runs flat (hierarchy saves no bytes on a host's link
 * there).
 *
 * Schedules (every rank takes the same path, chosen by kind alone):
 *   all_reduce      local reduce to the leader, leaders' all_reduce, local
 *                   broadcast; AVG is SUM at both stages and one division
 *                   by the group size at the leader; PREMUL_SUM scales at
 *                   the local stage and sums between hosts
 *   reduce          the same on a scratch copy, then the root's host
 *                   broadcasts the leader's result locally; only the root
 *                   writes its tensor
 *   reduce_scatter  all_reduce of the concatenated inputs (scratch), each
 *                   rank keeps its block
 *   broadcast       root's host locally from the root, leaders from the
 *                   root's host, the other hosts locally from their leader
 *   all_gather      local gather to the leader, leaders' all_gather of
 *                   host blocks padded to the largest host, local broadcast
 *                   of the packed result, unpacked by every rank
 *   gather          local gathers to the leaders, leaders' gather of padded
 *                   host blocks to the root's host, a local broadcast of
 *                   the packed result there when the root does not lead
 *   scatter         the reverse: the root's pieces reach its leader (a
 *                   local broadcast when the root does not lead), leaders'
 *                   scatter of host blocks, local scatter
 *   barrier         local, leaders, local
 * Reduction order: within a host ascending local rank (the shm engine),
 * then the host partial results in ascending host order (the TCP engine's
 * rank order among leaders). A flat group combines all n ranks in ascending
 * group rank; the two agree exactly only for the exact operations (integer,
 * bool, MIN, MAX) or when ranks are placed host by host in rank order and
 * the arithmetic happens to be associative for the values.
 *
 * Failures: a failed stage marks the group broken with its message, and a
 * leader that fails aborts the leaders' engine so the other leaders fail at
 * once instead of at their timeout. */
#ifndef DIST_CPU_HIER_H
#define DIST_CPU_HIER_H

#include "cpu.h"

typedef struct dist__hier dist__hier;

/* Collective over the group store: every member of a group whose members
 * are on more than one host calls it at init, after the peers are known. */
int dist__hier_create(dist__cpu_group *g, dist_store *store, int64_t deadline_ms,
                      dist__hier **out, dist__errbuf *err);
void dist__hier_destroy(dist__hier *h);
/* Propagates g's abort into the sub-engines (any thread, never blocks). */
void dist__hier_abort(dist__hier *h, const char *reason);
/* true when the kind runs hierarchically (else on the flat TCP engine). */
bool dist__hier_handles(dist_op_kind kind);
/* Runs one collective (a kind dist__hier_handles accepts). */
int dist__hier_run(dist__hier *h, dist__cpu_op *op);
/* TCP connections this rank holds in the leaders' engine; number of hosts. */
int dist__hier_tcp_conns(const dist__hier *h);
int dist__hier_nhosts(const dist__hier *h);

#endif
