/* cpu.h - what the CPU backend's parts share: the group's identity and
 * peers, the abort/broken state, and the per-operation context.
 *
 * DESIGN. The backend (backend_cpu.c) owns one dist__cpu_group per process
 * group and two engines under it:
 *   - tcp (tcp_*.c): a mesh of authenticated TCP connections between the
 *     members, always present, each connection made when first needed. It carries point-to-point traffic (tags, any
 *     source, acknowledgements so a sender learns of a size mismatch),
 *     control frames (errors, aborts), notices a dead peer by EOF, and runs
 *     every collective when the group spans hosts or DIST_TRANSPORT=tcp.
 *   - shm (shm_*.c): a shared segment per group whose members all share one
 *     host (same boot id and network namespace). It runs the collectives on
 *     the fast path: flags in shared memory, spinning briefly and then
 *     sleeping on a futex, peer death seen through pidfds.
 * Collectives on a group run one at a time in issue order (on the caller's
 * thread when nothing is queued, else on the backend's progress thread);
 * point-to-point requests progress independently, as in torch's gloo.
 *
 * Guarantees every engine keeps:
 *   - reductions combine elements in ascending group-rank order (see
 *     reduce.h), so every rank, and both engines, give bitwise identical
 *     results;
 *   - every wait ends by op->deadline_ms, by an abort (DIST_E_ABORTED) or by a
 *     lost peer (DIST_E_PEER_LOST naming the rank, host and pid);
 *   - sizes that disagree between ranks fail the operation on the receiving
 *     rank and on the sending rank with DIST_E_DESYNC and a message naming
 *     the peer (global rank), the operation and its sequence number, and
 *     both sizes; data is never truncated or padded silently (the root of
 *     a small shared-memory broadcast or scatter does not wait: its next
 *     operation fails instead, naming the earlier one; see shm_int.h);
 *   - after a failure that leaves ranks out of step (timeout, lost peer, a
 *     mismatch detected mid-transfer) the engine marks the group broken:
 *     every later operation fails at once with the first failure's message. */
#ifndef DIST_CPU_H
#define DIST_CPU_H

#include <stdatomic.h>
#include <sys/types.h>

#include "base/dist_int.h"

#define DIST_CPU_HOSTLEN 64
#define DIST_CPU_HOSTID_LEN 96

/* One member of the group, as every member published it at init. */
typedef struct dist__cpu_peer {
  int global_rank;
  pid_t pid;
  char host[DIST_CPU_HOSTLEN];       /* hostname, for messages */
  char host_id[DIST_CPU_HOSTID_LEN]; /* boot id + network namespace inode */
  _Atomic bool lost;                 /* reported gone (once) */
} dist__cpu_peer;

typedef enum dist__cpu_transport {
  DIST_CPU_TRANSPORT_AUTO = 0, /* shm when every member shares the host */
  DIST_CPU_TRANSPORT_TCP,      /* DIST_TRANSPORT=tcp: no shared memory */
  DIST_CPU_TRANSPORT_SHM,      /* DIST_TRANSPORT=shm: fail if not possible */
} dist__cpu_transport;

/* The group as the engines see it. Immutable after init except the atomics. */
typedef struct dist__cpu_group {
  int rank, size;
  int global_rank;
  int *global_ranks;            /* size entries */
  dist__cpu_peer *peers;        /* size entries, index = group rank */
  bool same_host;               /* every member shares this host_id */
  int group_id;                 /* -1 internal */
  int64_t timeout_ms;
  char name[128];               /* unique in the job, same on all members */
  char job_id[64];
  char token[129];              /* data-plane token ("" = none) */
  dist__cpu_transport transport;

  /* Abort: set once from any thread; every wait loop polls it. */
  _Atomic int aborted;
  char abort_reason[256];
  /* Broken: the first failure that leaves ranks out of step. Set with
   * dist__cpu_mark_broken; later operations fail with broken_rc. */
  _Atomic int broken_rc;
  char broken_msg[DIST_ERRMSG_LEN];
  /* Asynchronous collectives queued or running on the progress thread
   * (backend_cpu.c). The TCP engine reads it: a member whose process exits
   * while one is queued is lost at once, as when one runs. */
  _Atomic int colls_queued;

  /* Told once per peer found gone (the backend turns it into the
   * observers' DIST_EV_PEER_LOST). Any thread; must not block. */
  void (*on_peer_lost)(void *arg, int group_rank, const char *why);
  void *on_peer_lost_arg;
  /* Told of each connection made when first needed (the TCP engine's lazy
   * connections): a line for the trace. Any thread; must not block. NULL:
   * nobody listens. */
  void (*on_connect)(void *arg, const char *line);
  void *on_connect_arg;
} dist__cpu_group;

/* deadline_ms of an operation whose engine starts its clock at the first
 * wait that does not end at once (c->timeout_ms from then): a collective
 * whose peers are in step never reads the clock (the shm engine). */
#define DIST_CPU_DEADLINE_LAZY INT64_MIN

/* One operation in flight. */
typedef struct dist__cpu_op {
  const dist_coll *c;
  int64_t deadline_ms;          /* absolute, dist__now_ms() clock, or
                                   DIST_CPU_DEADLINE_LAZY */
  dist__errbuf *err;            /* the operation's message */
  int src_rank;                 /* out: a recv's sender (group rank) */
} dist__cpu_op;

/* "rank 3 (host h, pid 1234)" for group rank r (the global rank shown). */
const char *dist__cpu_peer_name(const dist__cpu_group *g, int group_rank, char *buf,
                                size_t len);
/* keys[0..n) into vals/lens (dist_free each), every key waited for up to
 * timeout_ms: one round trip (a multi_get) where the store has one, else
 * one get per key. Joining a group reads every member's key, so per-key
 * round trips cost n per rank and n^2 at the store, which at 256 ranks on
 * 2 cores took minutes. On failure no value is returned and *missing is
 * the first key not there yet (-1: another failure). */
int dist__cpu_store_get_all(dist_store *st, const char *const *keys, size_t n,
                            int64_t timeout_ms, void **vals, size_t *lens, int *missing);
/* Records the group's first out-of-step failure (later ones are ignored)
 * and returns rc. Any thread. */
int dist__cpu_mark_broken(dist__cpu_group *g, int rc, const char *msg);
/* An engine found peer r gone (exited, crashed, connection lost): tells
 * on_peer_lost the first time for that peer. Any thread. */
void dist__cpu_peer_lost(dist__cpu_group *g, int r, const char *why);
/* DIST_OK, or the abort / broken status with its message written to err.
 * Engines call it before starting an operation and inside wait loops. */
int dist__cpu_check_state(dist__cpu_group *g, dist__errbuf *err);
/* "ALL_REDUCE #7" (the user-visible sequence number) for messages; a piece
 * (DIST_COLL_PIECE) is labelled as the user's call it belongs to
 * ("ALL_GATHER #7" for a list entry's broadcast, "BROADCAST_BYTES #7" for a
 * blob's size exchange). */
const char *dist__cpu_op_label(const dist_coll *c, char *buf, size_t len);

/* The user's call an operation is a piece of, as the one byte each engine
 * carries beside its own kind (shm_key.part_of, the TCP header's part_of):
 * that call's kind + 1, 0 for an operation that is the call itself. Both
 * kinds of piece (DIST_COLL_PIECE) carry it: a list entry's broadcast or
 * reduce (dist_coll_list_call: an uneven all_gather or reduce_scatter,
 * api/uneven.c) and a blob's size exchange or data (dist_coll.part_of:
 * BROADCAST_BYTES); a point-to-point blob's pieces carry none. */
uint8_t dist__cpu_part_of(const dist_coll *c);
/* Whether the engines compare an operation whose byte is part_of as that
 * call, not as its own kind: a list entry's piece, since one rank runs a
 * list call in pieces where another, whose list is even, runs it whole.
 * A blob's pieces run and compare as their own kind on every rank
 * (backend.h), so a raw int64 broadcast meets a broadcast_bytes size
 * exchange (test_sizes_mp's corrupt peer); their byte only names the call
 * in labels and reports. A peer's byte comes off the wire: one out of
 * range is no call. */
bool dist__cpu_part_listed(unsigned part_of);
/* The call an operation of kind with byte part_of is to the user (labels,
 * reports): the piece's call, else kind. */
int dist__cpu_part_call(unsigned part_of, int kind);

/* The CPUs this process may run on: the affinity mask, lowered to a
 * cgroup v2 quota (cpu_fit.c). */
int dist__cpu_allowed(void);
/* True when every rank on this host (LOCAL_WORLD_SIZE, or group_size) has
 * an allowed CPU: the engines then spin before sleeping; otherwise they
 * yield and sleep at once. Logged once per process at INFO. */
bool dist__cpu_fits(int group_size);

#endif
