/* tcp.h - the TCP engine: the group's mesh of connections, point-to-point
 * requests, and collectives over TCP.
 *
 * Mesh: at init every member listens on an ephemeral port (on the address
 * DIST_SOCKET_IFNAME names, else the one that reaches the store's host)
 * and publishes it in the group store; a pair connects when one of them
 * first needs the other (tcp_lazy.c), or, with DIST_TCP_LAZY=0, every
 * pair at init (the higher rank connects to the lower). Each connection proves the job token
 * (auth.h, role "data") and says which group and rank it is before use.
 * With DIST_SOCKETS_PER_PEER=N (1..16; default 1, or one per interface
 * DIST_SOCKET_IFNAME lists) a pair of ranks opens the smaller of their two
 * N: the first socket carries every frame, the others only stripes of the
 * bodies of large messages (tcp_int.h), so matching and order stay those
 * of one stream and small messages never wait behind a stripe on another
 * socket. With several interfaces listed there is a listener on each, and
 * socket i to a peer connects to its listener i mod n (Gloo's round-robin).
 *
 * Frames: a fixed header (magic, version, type, context, tag, sequence,
 * op kind, dtype, element count, payload length) checked before any
 * allocation; types DATA, ACK, NACK (size mismatch, with the receiver's
 * expected size), ERROR (a peer failed the operation: fail it here too) and
 * ABORT, plus RTS/CTS/BODY/CANCEL (the rendezvous of messages above the
 * eager limit, so a large message always lands straight in the user's
 * buffer) and BYE (a departure). tcp_frame.c has the details.
 *
 * Point to point: isend pushes the data eagerly (non-blocking sockets, what
 * does not fit is queued and pushed by progress) and completes when the
 * receiver acknowledges the match, so a sender learns of a size mismatch.
 * A blocking send therefore returns only once the receiver has matched it
 * (like NCCL, and MPI_Ssend): two ranks that both send to each other first
 * must use isend (or batch_isend_irecv), not send;
 * irecv matches (context, tag, source) against arrived messages (unexpected
 * ones are kept, bounded by their checked length) or waits. Any source is
 * peer -1. Progress is driven by whichever thread waits (the caller's or
 * the backend's progress thread), under the mesh's progress lock: it sends
 * and receives on every connection, so peers that both send large messages
 * never block each other (Gloo's busy-poll deadlock). A waiting thread
 * busy-polls briefly (small messages: a few microseconds per hop) before it
 * blocks in poll(). A connection that ends is a lost peer: every request
 * involving that peer fails with DIST_E_PEER_LOST naming it, and so does the
 * group (broken). A peer that destroys the group says so first (BYE): that
 * fails only what still needs it, and marks the group broken only when it
 * cut an exchange short. A process that exits with the group live says so
 * too (EXIT, from an atexit handler): its end is a lost peer at once where
 * something waits for it, and elsewhere only when an operation first needs
 * it (a rank that returned from main without destroying its groups is
 * done, not lost).
 *
 * Tunables (environment, read at create): DIST_TCP_SPIN_US (busy-poll
 * window of a waiter, default 50), DIST_TCP_EAGER_BYTES (largest message
 * sent without a rendezvous, default 65536), DIST_TCP_DIRECT_BYTES (an
 * all_reduce/reduce whose per-rank traffic (n-1) x size stays under this
 * exchanges whole vectors in one step, default 262144). */
#ifndef DIST_CPU_TCP_H
#define DIST_CPU_TCP_H

#include "cpu.h"

typedef struct dist__tcp dist__tcp;
typedef struct dist__tcp_req dist__tcp_req;

/* Matching contexts: user point-to-point, and the engine's collectives. */
#define DIST_TCP_CTX_P2P 1u
#define DIST_TCP_CTX_COLL 2u

/* Collective over the group store: every member calls it at init. */
int dist__tcp_create(dist__cpu_group *g, dist_store *store, int64_t deadline_ms,
                     dist__tcp **out, dist__errbuf *err);
void dist__tcp_destroy(dist__tcp *t);
/* Fails every pending request with DIST_E_ABORTED, tells the peers
 * (best effort) and wakes waiters. Any thread, never blocks. */
void dist__tcp_abort(dist__tcp *t, const char *reason);

/* Posts a send or receive of len bytes (peer: group rank; -1 = any source
 * for a receive). c describes the user operation for messages and for the
 * frame header (kind, dtype, count). The request is owned by the caller
 * until dist__tcp_req_free. Any thread. */
int dist__tcp_isend(dist__tcp *t, int peer, uint32_t ctx, int64_t tag, const void *buf,
                    size_t len, const dist_coll *c, dist__tcp_req **out,
                    dist__errbuf *err);
int dist__tcp_irecv(dist__tcp *t, int peer, uint32_t ctx, int64_t tag, void *buf,
                    size_t len, const dist_coll *c, dist__tcp_req **out,
                    dist__errbuf *err);
/* Waits for every request (driving progress) until the deadline, or until
 * one fails; the first failure's status and message win. On DIST_E_TIMEOUT
 * (a message naming the operation and the peers still awaited) the
 * requests stay pending: the caller may wait again, or free them (which
 * cancels them) and, when the operation's own deadline passed, mark the
 * group broken. */
int dist__tcp_wait(dist__tcp *t, dist__tcp_req *const *reqs, int n, int64_t deadline_ms,
                   dist__errbuf *err);
/* Non-blocking: drives progress once (unless another thread drives);
 * true when req is done. */
bool dist__tcp_test(dist__tcp *t, dist__tcp_req *req);
/* A done request's status, message, and for a receive its source rank. */
int dist__tcp_req_status(const dist__tcp_req *req, const char **msg, int *src_rank);
void dist__tcp_req_free(dist__tcp_req *req);
/* Drives progress for up to wait_ms (0: once, without blocking); for the
 * progress thread when requests are pending and nobody waits. */
int dist__tcp_progress(dist__tcp *t, int64_t wait_ms);
/* Runs one collective over TCP to completion (every kind but SEND, RECV
 * and BATCH_P2P) by op->deadline_ms, with its message in op->err. One
 * collective at a time per group, on any one thread at a time. Ranks that
 * disagree (kind, dtype, reduce op, root, sizes, splits) fail with
 * DIST_E_DESYNC on every rank; a timeout fails with DIST_E_TIMEOUT and
 * marks the group broken; every failure is reported to the other members
 * (ERROR frames) so none of them waits for its own timeout. */
int dist__tcp_run(dist__tcp *t, dist__cpu_op *op);
/* Sockets this rank holds open to its peers (every lane counted). Caller
 * thread; for logs and tests. */
int dist__tcp_conns(dist__tcp *t);

#endif
