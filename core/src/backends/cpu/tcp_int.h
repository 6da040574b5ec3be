/* tcp_int.h - the TCP engine's internals, shared by its files:
 *   tcp_mesh.c      create/destroy: listen, address exchange, connect,
 *                   accept, the token proof and the hello
 *   tcp_frame.c     the wire: header checks, send queues, the receive state
 *                   machine that turns bytes into frames
 *   tcp_p2p.c       requests: matching, unexpected messages, ACK/NACK and
 *                   the rendezvous of large messages
 *   tcp_progress.c  driving progress: sweeps, spinning, poll(), waits,
 *                   abort, lost peers, timeouts
 *   tcp_coll.c      collectives: dispatch, descriptors, moving data
 *   tcp_reduce.c    the reducing collectives
 *
 * Locking: every field below is guarded by t->mu except the atomics and
 * what create sets before the engine is shared. t->mu is never held across
 * a blocking poll(). */
#ifndef DIST_CPU_TCP_INT_H
#define DIST_CPU_TCP_INT_H

#include <poll.h>
#include <pthread.h>
#include <stdarg.h>

#include "tcp.h"

#define TCP_MAGIC 0x31435444u       /* "DTC1" as a little-endian u32 */
#define TCP_HELLO_MAGIC 0x31484c44u /* "DLH1" */
#define TCP_VERSION 3u              /* 2: the hello names the sockets per peer; 3: EXIT */
#define TCP_NONE8 0xffu             /* dtype / redop not meaningful */

/* Frame types. */
enum {
  TCP_F_DATA = 1, /* an eager message: header + payload */
  TCP_F_RTS,      /* announces a large message (size), no payload */
  TCP_F_CTS,      /* the receiver matched msg_id: send its body */
  TCP_F_BODY,     /* the body of a large message (after CTS) */
  TCP_F_ACK,      /* the receiver matched msg_id and the sizes agree */
  TCP_F_NACK,     /* the receiver matched msg_id but expects size bytes */
  TCP_F_CANCEL,   /* the sender withdrew msg_id: no body will come */
  TCP_F_ERROR,    /* the sender failed collective #tag: payload = message,
                     count = its status; for DIST_E_PEER_LOST, root = the
                     group rank it found gone, so the others name that rank
                     and not the sender, which exits next (-1: none) */
  TCP_F_ABORT,    /* the sender aborted the group: payload = reason */
  TCP_F_BYE,      /* the sender is destroying the group */
  TCP_F_EXIT,     /* the sender's process is exiting with the group live (it
                     returned from main without destroying it): its
                     connections end next, and its end is a departure, not
                     a crash (tcp_progress.c dist__tcp_peer_ended) */
  TCP_F_END_
};

#define TCP_HF_WANT_ACK 1u /* DATA: answer with ACK or NACK */
#define TCP_HF_REFUSED 4u  /* NACK: the receiver holds its bound of unexpected
                              messages and dropped this one (count: how many it
                              holds, size: their bytes) */
#define TCP_HF_LAZY_ACK 2u /* DATA: the sender does not wait for the ACK, which may
                              wait in the queue for an idle moment (tcp_progress.c) */
/* Lazy ACKs a connection's queue may hold before it is flushed anyway. */
#define TCP_LAZY_MAX 32

/* The fixed frame header (88 bytes, host byte order: a peer of the other
 * endianness fails the magic check). */
typedef struct tcp_hdr {
  uint32_t magic;
  uint8_t type;
  uint8_t flags;
  uint16_t kind;       /* dist_op_kind of the sender's operation */
  uint32_t ctx;        /* DIST_TCP_CTX_* (matching context) */
  uint8_t dtype;       /* TCP_NONE8 when not meaningful */
  uint8_t redop;       /* TCP_NONE8 when not meaningful */
  uint8_t part_of;     /* collectives: tcp_desc.part_of */
  uint8_t pad0;
  int64_t tag;         /* p2p: the user's tag; collectives: (seq << 16) | step */
  uint64_t msg_id;     /* the sender's id of the message (per connection) */
  uint64_t op_seq;     /* the sender's user-visible sequence number */
  int64_t count;       /* elements of this message (sender's view) */
  int64_t peer_count;  /* collectives: elements the sender expects back, -1 none */
  int64_t total;       /* collectives: operation-level count, -1 none */
  uint64_t size;       /* message bytes (NACK: the receiver's expected bytes) */
  uint64_t len;        /* payload bytes that follow this header */
  int32_t root;        /* collectives: root group rank, -1 none */
  uint32_t pad1;
} tcp_hdr;
_Static_assert(sizeof(tcp_hdr) == 88, "tcp_hdr is a wire format");

/* A receive of at least this much left goes straight into the user's buffer
 * (below it, bytes go through the connection's staging buffer). */
#define TCP_DIRECT_MIN 4096u

/* After the token proof, the connector sends its hello and the acceptor
 * answers with its own. */
typedef struct tcp_hello {
  uint32_t magic;                /* TCP_HELLO_MAGIC */
  uint32_t version;              /* TCP_VERSION */
  int32_t rank;                  /* in the group */
  int32_t size;
  int32_t nsocks;                /* connector: the sockets per peer it wants;
                                    acceptor: the number agreed (the smaller) */
  int32_t lane;                  /* which of them this connection is (0: the first) */
  char name[128];                /* the group's name, NUL-terminated */
} tcp_hello;

/* Several sockets per peer (DIST_SOCKETS_PER_PEER, NCCL's NSOCKS_PERTHREAD):
 * lane 0 is the connection every frame but BODY uses, so matching and
 * order are those of one stream; the body of a rendezvous message (above
 * the eager limit) is cut into stripes, stripe i on lane i, each at least
 * TCP_STRIPE_MIN bytes, so small messages never leave lane 0. A BODY frame
 * says which part it is: count = its first byte, total = the stripes of the
 * message (both checked by the receiver against the split it computes). */
#define TCP_LANES_MAX 16
#define TCP_STRIPE_MIN (64u << 10)

/* Longest eager payload a peer may send (anything larger is a malformed
 * frame), and the longest ERROR/ABORT text. */
#define TCP_EAGER_HARD_MAX (4u << 20)
#define TCP_TEXT_MAX 4096u

/* What a message says about its operation, and what a receive expects. */
typedef struct tcp_desc {
  uint16_t kind;
  uint8_t dtype;
  uint8_t redop;
  int32_t root;
  uint64_t op_seq;
  int64_t count;
  int64_t peer_count;
  int64_t total;
  uint8_t part_of;     /* a piece: its call's kind + 1 (dist__cpu_part_of), else
                          0. A list entry's piece (root its entry) is
                          compared as that call; a blob's piece compares as
                          its own kind, the byte only names its call */
} tcp_desc;

enum tcp_rstate {
  RQ_SEND_QUEUED,   /* DATA/BODY queued or being written */
  RQ_SEND_ACKWAIT,  /* written; waiting for ACK or NACK */
  RQ_SEND_CTSWAIT,  /* RTS queued or written; waiting for CTS or NACK */
  RQ_RECV_POSTED,   /* waiting for a matching message */
  RQ_RECV_BODYWAIT, /* matched an RTS, CTS sent; waiting for the body */
  RQ_RECV_READING,  /* the payload streams into buf */
  RQ_DONE,
  RQ_SEND_SELF,     /* an isend to this rank waiting for its irecv (tcp_self.c) */
};

typedef struct tcp_item tcp_item;
typedef struct tcp_umsg tcp_umsg;
typedef struct tcp_lazy tcp_lazy;

struct dist__tcp_req {
  dist__tcp *t;
  dist__tcp_req *prev, *next;   /* t->reqs: every live request */
  dist__tcp_req *pprev, *pnext; /* t->posted: receives waiting for a match */
  bool is_send, want_ack, posted, coll, freed;
  bool lazy_ack;                /* a send: its ACK may come late (TCP_HF_LAZY_ACK) */
  int state;
  int peer;                     /* group rank; -1 any source */
  int src;                      /* the matched sender */
  uint32_t ctx;
  int64_t tag;
  uint8_t *buf;
  size_t len;
  tcp_desc d;
  uint64_t msg_id;
  tcp_item *item;               /* a send's frames while queued (chain: rnext) */
  int parts;                    /* a send: BODY stripes queued in all;
                                   a receive: stripes announced (0: none yet) */
  int parts_left;               /* a receive: stripes not yet in */
  bool body_due;                /* a receive that sent CTS: counted in its
                                   peer's conns[src].bodies until done */
  int rc;                       /* set once; final when state == RQ_DONE */
  char *msg;                    /* failure message (heap) */
  dist__tcp_req *snext;         /* t->self_sends, while state == RQ_SEND_SELF */
};

/* One outgoing frame. */
struct tcp_item {
  tcp_item *next;
  tcp_hdr h;
  const uint8_t *payload;
  size_t plen;
  size_t off;                   /* bytes of h + payload written */
  dist__tcp_req *req;           /* the send it carries (NULL: control) */
  struct tcp_conn *conn;        /* the connection whose queue holds it */
  tcp_item *rnext;              /* req's next frame still queued (stripes) */
  void *owned;                  /* payload owned by the item */
  bool lazy;                    /* a lazy ACK: it can wait for an idle sweep */
};

/* A message that arrived before its receive was posted. */
struct tcp_umsg {
  tcp_umsg *next;
  int src;
  tcp_hdr h;                    /* DATA (payload in data) or RTS */
  uint8_t *data;
};

typedef struct tcp_conn {
  int fd;                       /* -1 once closed */
  int peer;
  int lane;                     /* 0: the peer's main connection */
  int nlanes;                   /* main connection: connections to the peer */
  struct tcp_conn *lanes;       /* main connection: lanes 1 .. nlanes-1 */
  int bodies;                   /* main connection: receives from this peer
                                   waiting for a body; the further sockets
                                   are read only while any does (or after a
                                   BYE), so idle ones cost no syscalls */
  bool gone;                    /* lost, left or aborted: no more traffic */
  bool bye;                     /* the peer said it leaves (lane 0) ... */
  char *bye_text;               /* ... and why (heap, may be NULL) */
  bool eof;                     /* this socket reached its end after a BYE */
  bool exiting;                 /* the peer said its process exits (EXIT, lane 0) */
  /* Its connection then ended while nothing here needed it: gone, but
   * reported lost only when an operation needs it (dist__tcp_need_departed),
   * with this message (heap; NULL when out of memory). */
  bool departed;
  char *departed_msg;
  tcp_item *sq, *sq_last;       /* outgoing frames in order */
  uint64_t next_msg_id;
  /* The signature (size, and at DETAIL dtype and shape) of the last send
   * to and receive from this peer that matched (0: none yet), and how many
   * in a row matched with it: when a later pair differs after a steady
   * run, or after the pair's only exchange so far, the side that changed
   * is the one the report marks (p2p_report); a stream that alternates
   * tells nothing. n: how many matched in all. */
  uint64_t p2p_sent, p2p_recvd;
  uint32_t p2p_sent_run, p2p_recvd_run, p2p_sent_n, p2p_recvd_n;
  /* receive side */
  uint8_t *rbuf;
  size_t rpos, rend;
  bool in_body;
  tcp_hdr rh;                   /* the frame being received */
  uint8_t *rdst;                /* where the payload goes; NULL: discarded */
  size_t rleft;
  dist__tcp_req *rreq;          /* the receive being filled */
  tcp_umsg *rumsg;              /* the unexpected message being filled */
  char *rtext;                  /* ERROR/ABORT text being read */
} tcp_conn;

/* Requests waited on together. */
typedef struct tcp_batch {
  dist__tcp_req **reqs;
  int n, cap;
} tcp_batch;

/* Small broadcasts a root may leave unacknowledged before it waits for
 * their acknowledgements (tcp_coll.c). */
#define TCP_LATE_OPS 8
/* Broadcasts go root to everyone up to this many ranks (then a tree)... */
#define TCP_BCAST_DIRECT_RANKS 4
/* ... unless the vector holds this many segments (DIST_TCP_SEGMENT_BYTES)
 * and there are three ranks or more: then a pipelined chain (tcp_coll.c). */
#define TCP_BCAST_CHAIN_SEGMENTS 4

#define TCP_RBUF 65536
/* A read into the staging buffer asks for at most this much: enough for
 * many small frames at once, little enough that the bulk of a larger
 * payload is read straight into its destination, not copied twice. */
#define TCP_RFILL 8192

struct dist__tcp {
  dist__cpu_group *g;
  pthread_mutex_t mu;
  pthread_cond_t cv;            /* non-driving waiters (CLOCK_MONOTONIC) */
  int wakefd;                   /* eventfd: wakes a driver blocked in poll */
  tcp_conn *conns;              /* g->size entries; conns[g->rank] unused */
  dist__tcp_req *reqs;          /* live requests */
  dist__tcp_req *posted, *posted_last;
  dist__tcp_req *self_sends;    /* isends to this rank not yet received (FIFO) */
  tcp_umsg *unexp, *unexp_last;
  size_t unexp_n;               /* messages in the unexpected list ... */
  uint64_t unexp_bytes;         /* ... and their payload bytes */
  size_t unexp_max_n;           /* DIST_TCP_UNEXPECTED_MAX */
  uint64_t unexp_max_bytes;     /* DIST_TCP_UNEXPECTED_MB */
  bool driving, in_poll;
  int nwaiters;
  bool completed;               /* a request completed since the last broadcast */
  /* abort */
  _Atomic int aborted, abort_claimed;
  bool abort_handled;
  char abort_reason[256];
  /* collectives */
  uint64_t coll_seq;            /* number of the running / last collective */
  uint64_t failed_seq;          /* the last collective that failed here */
  bool coll_active;
  tcp_desc bcast;               /* the last broadcast this rank was root of: */
  size_t bcast_bytes;           /* its bytes and collective number, to refuse */
  uint64_t bcast_seq;           /* a rival root's messages (clash) */
  tcp_desc run;                 /* the running collective's descriptor and */
  size_t run_bytes;             /* bytes, from the moment it counts as running */
  uint64_t run_seq;             /* (its collective number: 0 none), to refuse */
                                /* a message of it that disagrees (clash) */
  tcp_desc done;                /* the last collective that completed here, its */
  size_t done_bytes;            /* bytes and number (0 none): a message of it that */
  uint64_t done_seq;            /* comes after it ended disagrees (clash) */
  tcp_batch late;               /* sends of small broadcasts, written, acks not yet waited for */
  int late_ops;                 /* ... of this many broadcasts */
  /* The collectives that completed here, to tell the side of a pair that
   * disagrees which changed (tcp_p2p.c coll_odd): the last one, and the
   * last of each kind (bit k of hist_kinds: hist_kind[k] holds one). */
  tcp_desc hist_last, hist_kind[DIST_OP_COUNT_];
  uint32_t hist_kinds;
  bool hist_any;
  bool lazy_held;               /* a lazy ACK was queued since the last wait ended */
  uint64_t err_seq;             /* an ERROR frame from a peer ... */
  int err_rc;                   /* ... its status (DIST_OK: none) ... */
  char err_msg[DIST_ERRMSG_LEN];/* ... and message */
  unsigned peer_aborts;         /* ABORT frames read: peers that aborted the group */
  /* the first lost peer */
  int lost_peer;                /* its group rank, -1 none */
  int lost_rc;
  char lost_msg[DIST_ERRMSG_LEN];
  /* tunables */
  size_t eager_max;             /* DIST_TCP_EAGER_BYTES */
  int64_t spin_ns;              /* DIST_TCP_SPIN_US */
  size_t direct_bytes;          /* DIST_TCP_DIRECT_BYTES (tcp_reduce.c) */
  size_t segment_bytes;         /* DIST_TCP_SEGMENT_BYTES (tcp_reduce.c) */
  /* Bytes one flush or read moves on one connection before the sweep
   * moves on, so both directions of an exchange keep moving
   * (DIST_TCP_IO_CHUNK). */
  size_t io_chunk;
  /* collective scratch, kept between calls (one collective at a time) */
  uint8_t *scratch;
  size_t scratch_len;
  struct pollfd *pfds;          /* poll scratch, one per connection + 1 */
  int nsocks;                   /* DIST_SOCKETS_PER_PEER (wanted; per peer:
                                   conns[p].nlanes, the smaller of both wishes) */
  bool closing;                 /* destroy is running, or the process exits:
                                   departures are quiet */
  pid_t pid;                    /* the process that made it (exit_all) */
  dist__tcp *next_live;         /* the process's live engines (tcp_mesh.c) */
  bool want_lazy;               /* DIST_TCP_LAZY (default 1): connect when needed */
  tcp_lazy *lazy;               /* NULL: the mesh was made whole at creation */
};

/* Lane i of peer p's connections (0: conns[p] itself). */
static inline tcp_conn *dist__tcp_lane(dist__tcp *t, int p, int i) {
  return i == 0 ? &t->conns[p] : &t->conns[p].lanes[i - 1];
}

/* Whether lane c is read in a sweep (lane 0 always). */
static inline bool dist__tcp_lane_live(const dist__tcp *t, const tcp_conn *c) {
  const tcp_conn *m = &t->conns[c->peer];
  return c->lane == 0 || m->bodies > 0 || m->bye || c->in_body || c->rend > c->rpos;
}

/* Whether every other member of a group of two or more is gone: a receive
 * from any source could then never match (tcp_progress.c, tcp_p2p.c). */
static inline bool dist__tcp_no_sender_left(const dist__tcp *t) {
  for (int p = 0; p < t->g->size; p++)
    if (p != t->g->rank && !t->conns[p].gone)
      return false;
  return t->g->size > 1;
}

/* How many stripes a body of len bytes takes towards peer p. */
static inline int dist__tcp_stripes(const dist__tcp *t, int p, size_t len) {
  size_t n = len / TCP_STRIPE_MIN;
  int lanes = t->conns[p].nlanes > 0 ? t->conns[p].nlanes : 1;
  return n < 1 ? 1 : n > (size_t)lanes ? lanes : (int)n;
}

/* --- tcp_mesh.c ---------------------------------------------------------- */

void dist__tcp_hello_fill(const dist__tcp *t, int lane, int nsocks, tcp_hello *h);
/* Lanes 1 .. n-1 of peer p (lane 0 is conns[p] itself); sets nlanes. */
int dist__tcp_lanes_alloc(dist__tcp *t, int p, int n, dist__errbuf *err);
/* A connected socket made ready for the sweeps: non-blocking, no Nagle,
 * its staging buffer. */
int dist__tcp_conn_setup(dist__tcp *t, tcp_conn *c, dist__errbuf *err);
/* dist__tcp_conns with t->mu held. */
int dist__tcp_conns_locked(const dist__tcp *t);
/* Entry lane modulo their number of a published "addr:port,addr:port" list. */
int dist__tcp_pick_addr(const char *list, int lane, char *host, size_t hostlen,
                        uint16_t *port);

/* --- tcp_lazy.c: connections made when needed ----------------------------- */

/* Takes over the listeners (closed on failure too), reads every member's
 * addresses and starts the thread that answers their connections. */
int dist__tcp_lazy_start(dist__tcp *t, dist_store *store, const int *lfds, int nl,
                         int64_t deadline_ms, dist__errbuf *err);
/* Stops that thread and closes the listeners: no connection comes in
 * after (what was accepted can still be taken in, to say goodbye on). */
void dist__tcp_lazy_stop(dist__tcp *t);
/* Stops it if still running, closes what was accepted and not taken in,
 * and frees what connecting needed. */
void dist__tcp_lazy_free(dist__tcp *t);
/* With t->mu held: connects to peer p unless it is connected (or lazy
 * connections are off, or p is gone); an error when p cannot be reached
 * (its listener refused: it left or exited) or did not answer in time. */
int dist__tcp_connect_peer(dist__tcp *t, int p, int64_t timeout_ms, dist__errbuf *err);
/* With t->mu held, before request r to its peer is started: connects when
 * needed (a receive from any source: to every member); false when that
 * failed and r was failed with the reason. A peer whose listener refused
 * has left, as if it had said BYE. */
bool dist__tcp_reach_for(dist__tcp *t, dist__tcp_req *r);
/* With t->mu held: takes in the connections peers made to this rank. */
void dist__tcp_lazy_install(dist__tcp *t);
/* Whether connections the peers made wait to be taken in (cheap: one
 * atomic load, every sweep). */
bool dist__tcp_lazy_pending(const dist__tcp *t);

/* --- tcp_frame.c --------------------------------------------------------- */

void dist__tcp_hdr_init(tcp_hdr *h, int type, uint32_t ctx, int64_t tag);
/* Appends a frame to c's queue (payload borrowed unless owned). */
void dist__tcp_enqueue(dist__tcp *t, tcp_conn *c, tcp_item *it);
/* A control frame (ACK, NACK, CTS, CANCEL, ERROR, ABORT, BYE) with optional
 * text payload; false when out of memory (the frame is then not sent). */
bool dist__tcp_send_ctrl(dist__tcp *t, tcp_conn *c, const tcp_hdr *h, const char *text);
/* The same for an ACK its sender does not wait for (TCP_HF_LAZY_ACK). */
bool dist__tcp_send_lazy_ack(dist__tcp *t, tcp_conn *c, const tcp_hdr *h);
/* A collective has started (t->run set): messages of it that arrived
 * first and contradict this rank's call (from a rank that believes another
 * is the root, or calls another operation) are refused now, as on arrival
 * (t->mu held). */
void dist__tcp_clash_queued(dist__tcp *t);
/* Whether a sweep writes c's queue now: anything but lazy ACKs is queued,
 * or the connection is idle (nothing was read), or TCP_LAZY_MAX wait. */
bool dist__tcp_flush_due(const tcp_conn *c, bool idle);
/* Writes what the socket takes; true when anything moved. */
bool dist__tcp_flush(dist__tcp *t, tcp_conn *c);
/* Reads and dispatches what is available; true when anything moved. */
bool dist__tcp_read(dist__tcp *t, tcp_conn *c);
/* Stops the payload being read into req's buffer (the rest is discarded). */
void dist__tcp_unhook_reader(dist__tcp *t, dist__tcp_req *req);
/* Removes a send's frame from its queue if nothing of it was written, or
 * gives the frame its own copy of the unwritten payload; false when the
 * copy failed (the connection is then unusable). */
/* tcp_self.c: point to point to this rank itself (torch allows isend and
 * irecv to self). Under t->mu. */
void dist__tcp_self_post(dist__tcp *t, dist__tcp_req *r);
void dist__tcp_self_unqueue(dist__tcp *t, dist__tcp_req *r);
bool dist__tcp_detach_item(dist__tcp *t, dist__tcp_req *req);
void dist__tcp_free_queue(tcp_conn *c);
/* The next len bytes of payload on c go to dst (NULL: discarded). */
static inline void dist__tcp_expect_body(tcp_conn *c, void *dst, size_t len) {
  c->in_body = true;
  c->rdst = (uint8_t *)dst;
  c->rleft = len;
}

/* --- tcp_p2p.c ----------------------------------------------------------- */

/* A new request, linked into t->reqs. NULL when out of memory. */
dist__tcp_req *dist__tcp_req_new(dist__tcp *t, bool is_send, int peer, uint32_t ctx,
                                 int64_t tag, void *buf, size_t len, const tcp_desc *d);
/* Starts a send / a receive (t->mu held). */
void dist__tcp_start_send(dist__tcp *t, dist__tcp_req *r);
void dist__tcp_start_recv(dist__tcp *t, dist__tcp_req *r);
/* Completes r with rc and a message (first failure kept). */
void dist__tcp_complete(dist__tcp *t, dist__tcp_req *r, int rc, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Fails r if it is still pending; what it holds of the wire is released
 * (a half-written frame keeps a private copy). */
void dist__tcp_cancel(dist__tcp *t, dist__tcp_req *r, int rc, const char *msg);
/* Frees a request (t->mu held); a pending one is cancelled first. */
void dist__tcp_req_release(dist__tcp *t, dist__tcp_req *r);
/* Frame handlers (t->mu held). A DATA header decides where its payload
 * goes; body_done runs when the payload is in. */
void dist__tcp_on_data(dist__tcp *t, tcp_conn *c);
void dist__tcp_on_payload_done(dist__tcp *t, tcp_conn *c);
void dist__tcp_on_rts(dist__tcp *t, tcp_conn *c);
void dist__tcp_on_cts(dist__tcp *t, tcp_conn *c);
/* Returns false when the body frame is malformed (its length differs). */
bool dist__tcp_on_body(dist__tcp *t, tcp_conn *c);
void dist__tcp_on_ack(dist__tcp *t, tcp_conn *c, bool nack);
void dist__tcp_on_cancel(dist__tcp *t, tcp_conn *c);
/* r's frame of the given type has been written in full. */
void dist__tcp_on_sent(dist__tcp *t, dist__tcp_req *r, int type);
/* "SEND #3" for a request's operation. */
const char *dist__tcp_req_label(const dist__tcp_req *r, char *buf, size_t len);

/* --- tcp_progress.c ------------------------------------------------------ */

/* Marks peer c gone (EOF, reset, malformed frame, abort, bye): fails every
 * request involving it, and unless it left cleanly, records the lost peer
 * and marks the group broken. */
void dist__tcp_peer_gone(dist__tcp *t, tcp_conn *c, int rc, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Peer c's connection ended (EOF, a read or write error; fmt says which).
 * A peer that said it exits (EXIT) while nothing here needs it departed:
 * gone, logged at DEBUG, reported by the first operation that needs it;
 * anything else is dist__tcp_peer_gone with DIST_E_PEER_LOST. */
void dist__tcp_peer_ended(dist__tcp *t, tcp_conn *c, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* An operation needs peer p (-1: every member, as a collective does)
 * that departed (t->mu held): reports each such peer lost now, as
 * dist__tcp_peer_gone would have at its end, and copies the first one's
 * message into msg (may be NULL). False when none had departed. */
bool dist__tcp_need_departed(dist__tcp *t, int p, char *msg, size_t len);
/* An ERROR frame for collective seq arrived from peer c with text. */
void dist__tcp_on_error(dist__tcp *t, tcp_conn *c, const char *text);
/* Wakes a driver blocked in poll() (a frame was queued by another thread). */
void dist__tcp_wake(dist__tcp *t);
/* Abort handling with t->mu held: fails everything once, tells peers. */
void dist__tcp_handle_abort(dist__tcp *t);

typedef struct tcp_wait_ctx {
  const dist_coll *coll;        /* non-NULL for a collective's wait */
  bool written;                 /* a send counts once written (its ack may come later) */
} tcp_wait_ctx;
/* Waits (t->mu held) until every request is done, one failed, the
 * deadline passes, the engine is aborted or a peer is lost. */
int dist__tcp_wait_locked(dist__tcp *t, dist__tcp_req *const *reqs, int n,
                          int64_t deadline_ms, dist__errbuf *err, const tcp_wait_ctx *w);
/* One non-blocking round over every connection (t->mu held). */
bool dist__tcp_sweep(dist__tcp *t);

/* --- tcp_coll.c / tcp_reduce.c ------------------------------------------- */

/* A running collective: the requests of its current step. */
typedef struct tcp_cc {
  dist__tcp *t;
  dist__cpu_op *op;
  const dist_coll *c;
  uint64_t cseq;
  int step;
  tcp_desc base;                /* kind, dtype, redop, root, total */
  size_t esize;                 /* element size */
  tcp_batch main;               /* the current step's requests */
  bool lazy_ack;                /* sends posted now may have their ACKs late */
} tcp_cc;

/* Posts a collective message of count elements to / from peer.
 * peer_count: elements of the mirrored transfer in the same step (-1 when
 * the peer sends nothing back), checked by the receiver. want_ack: the
 * receiver confirms the match (one-directional transfers). */
int dist__tcp_cc_send(tcp_cc *cc, int peer, const void *buf, int64_t count,
                      int64_t peer_count, bool want_ack);
int dist__tcp_cc_recv(tcp_cc *cc, int peer, void *buf, int64_t count, int64_t peer_count);
/* Waits for the step's requests, frees them and moves to the next step. */
int dist__tcp_cc_wait(tcp_cc *cc);
/* The same for algorithms that keep several batches in flight: a message
 * of step `step` (its tag) added to b; waiting for b frees its requests
 * (also on failure, so the caller only returns the status). */
int dist__tcp_cc_post(tcp_cc *cc, tcp_batch *b, int step, bool is_send, int peer, void *buf,
                      int64_t count, int64_t peer_count, bool want_ack);
int dist__tcp_cc_wait_batch(tcp_cc *cc, tcp_batch *b);
/* Releases (cancelling) b's requests and its array. */
void dist__tcp_cc_drop_batch(tcp_cc *cc, tcp_batch *b);
/* A heap buffer for the collective (freed by the caller with dist__free);
 * NULL with DIST_E_NOMEM in op->err. */
void *dist__tcp_cc_alloc(tcp_cc *cc, size_t bytes);

int dist__tcp_all_reduce(tcp_cc *cc);
int dist__tcp_reduce(tcp_cc *cc);
int dist__tcp_reduce_scatter(tcp_cc *cc);

/* Block b of n blocks of count elements: first element and length. */
static inline void dist__tcp_block(int64_t count, int n, int b, int64_t *off, int64_t *len) {
  int64_t q = count / n, rem = count % n;
  *off = q * b + (b < rem ? b : rem);
  *len = q + (b < rem ? 1 : 0);
}

#endif
