/* tcp_p2p.c - the TCP engine's requests: posting sends and receives,
 * matching, unexpected messages, acknowledgements and the rendezvous of
 * large messages (the protocol is described in tcp_frame.c).
 *
 * Matching follows MPI: a message matches the first posted receive with
 * its context and tag whose source is the sender or any; a receive takes
 * the first matching unexpected message in arrival order, so messages
 * between two ranks with the same tag are received in the order sent.
 * Sizes must agree exactly: a receive that matches a message of another
 * size fails here with a message naming the sender, both operations and
 * both sizes, and answers NACK so the sender fails too. Collective
 * messages carry their descriptor (kind, dtype, reduce op, root, counts),
 * checked the same way.
 *
 * A request is done only when the engine no longer touches its buffer: a
 * send whose payload is still being written when a NACK arrives stays
 * pending until the write ends; a cancelled send whose frame was half
 * written hands the rest to a private copy (tcp_frame.c). */
#include <stdio.h>

#include "tcp_int.h"
#include "base/report.h"

/* --- requests -------------------------------------------------------------- */

dist__tcp_req *dist__tcp_req_new(dist__tcp *t, bool is_send, int peer, uint32_t ctx,
                                 int64_t tag, void *buf, size_t len, const tcp_desc *d) {
  dist__tcp_req *r = dist__calloc(1, sizeof *r);
  if (!r)
    return NULL;
  r->t = t;
  r->is_send = is_send;
  r->peer = peer;
  r->src = is_send ? t->g->rank : -1;
  r->ctx = ctx;
  r->tag = tag;
  r->buf = buf;
  r->len = len;
  r->d = *d;
  r->coll = ctx == DIST_TCP_CTX_COLL;
  r->next = t->reqs;
  if (t->reqs)
    t->reqs->prev = r;
  t->reqs = r;
  return r;
}

/* The part of d's part_of that is compared: a list entry's piece's call
 * (a peer's comes off the wire: one out of range is no call), 0 for a
 * blob's piece, which runs and compares as its own kind, or a call of its
 * own. */
static unsigned listed(const tcp_desc *d) {
  return dist__cpu_part_listed(d->part_of) ? d->part_of : 0;
}

/* The kind a descriptor is compared as: a list entry's piece, its call's. */
static int call_kind(const tcp_desc *d) {
  return listed(d) ? (int)d->part_of - 1 : d->kind;
}

const char *dist__tcp_req_label(const dist__tcp_req *r, char *buf, size_t len) {
  /* a piece (a list entry's, a blob's size exchange) is the user's call to the user */
  dist_op_kind k = (dist_op_kind)dist__cpu_part_call(r->d.part_of, r->d.kind);
  if (r->d.op_seq)
    snprintf(buf, len, "%s #%llu", dist_op_name(k), (unsigned long long)r->d.op_seq);
  else
    snprintf(buf, len, "%s", dist_op_name(k));
  return buf;
}

static void unpost(dist__tcp *t, dist__tcp_req *r) {
  if (!r->posted)
    return;
  if (r->pprev)
    r->pprev->pnext = r->pnext;
  else
    t->posted = r->pnext;
  if (r->pnext)
    r->pnext->pprev = r->pprev;
  else
    t->posted_last = r->pprev;
  r->pprev = r->pnext = NULL;
  r->posted = false;
}

/* Records a failure without completing (first one wins). */
static void set_failv(dist__tcp_req *r, int rc, const char *fmt, va_list ap) {
  if (r->rc != DIST_OK || rc == DIST_OK)
    return;
  r->rc = rc;
  char m[DIST_ERRMSG_LEN];
  vsnprintf(m, sizeof m, fmt, ap);
  r->msg = dist__strdup(m);
}

static void set_fail(dist__tcp_req *r, int rc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void set_fail(dist__tcp_req *r, int rc, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  set_failv(r, rc, fmt, ap);
  va_end(ap);
}

/* r sent CTS to src (due) or no longer waits for that body (!due). */
static void body_due(dist__tcp *t, dist__tcp_req *r, bool due) {
  if (r->body_due == due || r->src < 0 || r->src >= t->g->size)
    return;
  r->body_due = due;
  t->conns[r->src].bodies += due ? 1 : -1;
}

static void finish(dist__tcp *t, dist__tcp_req *r) {
  body_due(t, r, false);
  unpost(t, r);
  if (r->state == RQ_SEND_SELF)
    dist__tcp_self_unqueue(t, r);
  r->state = RQ_DONE;
  t->completed = true;
}

void dist__tcp_complete(dist__tcp *t, dist__tcp_req *r, int rc, const char *fmt, ...) {
  if (r->state == RQ_DONE)
    return;
  va_list ap;
  va_start(ap, fmt);
  set_failv(r, rc, fmt, ap);
  va_end(ap);
  finish(t, r);
}

void dist__tcp_cancel(dist__tcp *t, dist__tcp_req *r, int rc, const char *msg) {
  if (r->state == RQ_DONE)
    return;
  if (r->is_send) {
    /* An announced large message: tell the receiver no body will come. */
    bool announced = r->state == RQ_SEND_CTSWAIT && (!r->item || r->item->off > 0);
    dist__tcp_detach_item(t, r);
    if (announced) {
      tcp_hdr h;
      dist__tcp_hdr_init(&h, TCP_F_CANCEL, r->ctx, r->tag);
      h.msg_id = r->msg_id;
      dist__tcp_send_ctrl(t, &t->conns[r->peer], &h, NULL);
      dist__tcp_flush(t, &t->conns[r->peer]);
    }
  } else if (r->state == RQ_RECV_READING) {
    dist__tcp_unhook_reader(t, r);
  }
  dist__tcp_complete(t, r, rc, "%s", msg);
}

/* Whether cancelling r leaves a message half exchanged: data of a send
 * that already left (the peer may still match it), or a receive whose
 * message was being consumed (its sender waits for the acknowledgement). */
static bool leaves_out_of_step(const dist__tcp_req *r) {
  if (r->is_send) {
    if (r->state == RQ_SEND_ACKWAIT)
      return true;
    if (r->state != RQ_SEND_QUEUED)
      return false;
    int queued = 0; /* a body's stripes: some written, or one begun */
    for (const tcp_item *it = r->item; it; it = it->rnext, queued++)
      if (it->off > 0)
        return true;
    return !r->item || (r->parts > 0 && queued < r->parts);
  }
  return r->state == RQ_RECV_READING || r->state == RQ_RECV_BODYWAIT;
}

void dist__tcp_req_release(dist__tcp *t, dist__tcp_req *r) {
  if (r->state != RQ_DONE) {
    char lb[64], nb[160], m[400];
    snprintf(m, sizeof m, "%s %s %s was abandoned before it completed",
             dist__tcp_req_label(r, lb, sizeof lb), r->is_send ? "to" : "from",
             dist__cpu_peer_name(t->g, r->is_send ? r->peer : r->src, nb, sizeof nb));
    /* A collective marks the group itself when it fails. */
    if (!r->coll && leaves_out_of_step(r) && !t->closing) {
      size_t off = strlen(m);
      dist__appendf(m, sizeof m, &off, " with its message half exchanged");
      dist__cpu_mark_broken(t->g, DIST_E_TIMEOUT, m);
    }
    dist__tcp_cancel(t, r, DIST_E_ABORTED, m);
  }
  if (r->prev)
    r->prev->next = r->next;
  else
    t->reqs = r->next;
  if (r->next)
    r->next->prev = r->prev;
  dist__free(r->msg);
  dist__free(r);
}

/* --- descriptors and size checks ------------------------------------------- */

/* At DIST_DEBUG=DETAIL a point-to-point message also carries its tensor's
 * shape (a hash, in the peer_count field point-to-point leaves unused), so
 * a send and a receive of the same size but another dtype or shape fail
 * both sides too (the checking layer's pairwise check, done where the
 * messages match: before any data reaches the receive's buffer). */
static int64_t shape_hash(const dist_tensor *t) {
  uint64_t h = 1469598103934665603ull;
  h = (h ^ (uint64_t)t->ndim) * 1099511628211ull;
  for (int d = 0; d < t->ndim; d++)
    h = (h ^ (uint64_t)t->shape[d]) * 1099511628211ull;
  return (int64_t)(h >> 2); /* >= 0: -1 means none */
}

/* What differs between a point-to-point message and the receive that
 * matched it ("size", "dtype", "shape"), NULL when they fit. Sizes that
 * differ with dtypes that differ are a dtype that differs (float64 sent
 * where float32 is received): the size only follows from it. */
static const char *p2p_diff(const tcp_desc *a, uint64_t a_len, const tcp_desc *b,
                            uint64_t b_len) {
  bool dtypes = a->dtype != TCP_NONE8 && b->dtype != TCP_NONE8 && a->dtype != b->dtype;
  if (a_len != b_len)
    return dtypes ? "dtype" : "size";
  if (a->peer_count < 0 || b->peer_count < 0)
    return NULL; /* below DETAIL the bytes are what must agree */
  if (a->dtype != TCP_NONE8 && b->dtype != TCP_NONE8 && a->dtype != b->dtype)
    return "dtype";
  return a->peer_count != b->peer_count ? "shape" : NULL;
}

static tcp_desc hdr_desc(const tcp_hdr *h) {
  tcp_desc d = {h->kind, h->dtype, h->redop, h->root, h->op_seq, h->count, h->peer_count,
                h->total, h->part_of};
  return d;
}

/* The field in which a collective's two descriptors first differ, in the
 * order every engine names them (report.h); NULL when they agree. mine is
 * this rank's (len bytes); theirs the peer's message, or with nack the
 * peer's receive that refused this rank's message. Of one list
 * collective, a list entry's piece against the call's one-piece form
 * differs in the sizes of the list (the piece's rank passed entries of
 * different sizes), two pieces in the size of their entry: buf (f_len
 * bytes) holds that field. */
static const char *coll_field(const tcp_desc *mine, size_t len, const tcp_desc *theirs,
                              uint64_t their_size, bool nack, char *buf, size_t f_len) {
  bool a2a = mine->kind == DIST_OP_ALL_TO_ALL || mine->kind == DIST_OP_ALL_TO_ALL_SINGLE;
  if (call_kind(theirs) != call_kind(mine))
    return "operation";
  if (theirs->dtype != mine->dtype)
    return "dtype";
  if (theirs->redop != mine->redop)
    return "reduce op";
  if (listed(theirs) != listed(mine) || theirs->kind != mine->kind)
    return dist__report_list_field(call_kind(mine), -1, buf, f_len);
  if (theirs->root != mine->root)
    return "root";
  if (listed(mine) && (theirs->total != mine->total || theirs->count != mine->count ||
                        their_size != len))
    return dist__report_list_field(call_kind(mine), mine->root, buf, f_len);
  if (theirs->total != mine->total)
    return "count";
  if (theirs->count != mine->count || their_size != len)
    return a2a ? "split size" : "count";
  if (!nack && theirs->peer_count >= 0 && mine->peer_count >= 0 &&
      theirs->peer_count != mine->peer_count)
    return "split size";
  return NULL;
}

/* A report line for group rank r's descriptor d. Without an operation-level
 * count (the all_to_all kinds) or when a transfer's size differs, the line
 * is the transfer: count elements "to" / "from" group rank other. A list
 * entry's piece reads as its call (as shm.c's key_side): against another
 * piece (list_other), with its entry and size; else as a list whose
 * entries differ in size. A blob's piece reads as its call run as the
 * piece ("BROADCAST_BYTES (run as BROADCAST int64[1] root 3)"). */
static void coll_side(const dist__tcp *t, int r, const tcp_desc *d, uint64_t my_seq,
                      bool transfer, int64_t count, const char *dir, int other,
                      bool list_other, dist__rside *out) {
  const dist__cpu_group *g = t->g;
  bool list = listed(d) != 0;
  if (list) { /* the entry's size, never a transfer's */
    transfer = false;
    count = d->total;
  }
  dist__rval v = {.kind = call_kind(d), .seq = d->op_seq != my_seq ? d->op_seq : 0,
                  .list = list, .entry = list && list_other ? d->root : -1,
                  .dtype = d->dtype == TCP_NONE8 ? -1 : d->dtype,
                  .count = transfer ? count : d->total,
                  .redop = d->redop == TCP_NONE8 ? -1 : d->redop,
                  .root = d->root >= 0 && d->root < g->size ? g->peers[d->root].global_rank : -1,
                  .dir = transfer ? dir : NULL,
                  .peer = other >= 0 && other < g->size ? g->peers[other].global_rank : -1,
                  .part = !list && d->part_of <= DIST_OP_COUNT_ ? d->part_of : 0};
  out->global_rank = g->peers[r].global_rank;
  out->group_rank = r;
  out->self = r == g->rank;
  dist__report_value(&v, out->value, sizeof out->value);
}

/* Whether d is the call that h recorded: what every message of a
 * collective carries alike (its kind, dtype, reduce op, root and count). */
static bool same_call(const tcp_desc *h, const tcp_desc *d) {
  return h->kind == d->kind && h->dtype == d->dtype && h->redop == d->redop &&
         h->root == d->root && h->total == d->total && listed(h) == listed(d);
}

/* Whether a collective of this kind ever completed here (hist_kind holds one). */
static bool ever_called(const dist__tcp *t, unsigned kind) {
  return kind < DIST_OP_COUNT_ && (t->hist_kinds >> kind & 1);
}

/* Which side of a collective disagreement is the odd one, from this rank's
 * history of the group's completed collectives (the same on the peer's
 * side: a collective completes only where its members called it alike):
 * 1 this rank, 0 the peer, -1 not known. As the shared-memory engine
 * breaks a pair's tie (shm.c majority_rank): the side whose call differs
 * from the last of its kind while the other's matches it (MAX where the
 * last all_reduce was SUM), or that repeated the last call's kind where
 * the other called another (it skipped the call between); first, as the
 * checking layer reads a call site new to the group, the side whose kind
 * the group never completed while the other's it did (an extra barrier
 * where the others reduce-scatter, as they always have). Without it the
 * later rank of the pair was blamed, the wrong one when the bug is the
 * lower rank's. */
static int coll_odd(const dist__tcp *t, const tcp_desc *mine, const tcp_desc *theirs) {
  bool me, they;
  if (listed(mine) != listed(theirs) && call_kind(mine) == call_kind(theirs))
    return listed(mine) != 0; /* one list call in two forms: the side whose entries
                                 differ in size, as one wrong entry makes them */
  if (mine->kind == theirs->kind) {
    if (!ever_called(t, mine->kind))
      return -1;
    me = !same_call(&t->hist_kind[mine->kind], mine);
    they = !same_call(&t->hist_kind[mine->kind], theirs);
  } else {
    if (!t->hist_any)
      return -1;
    me = !ever_called(t, mine->kind);
    they = !ever_called(t, theirs->kind);
    if (me == they) {
      me = t->hist_last.kind == mine->kind;
      they = t->hist_last.kind == theirs->kind;
    }
  }
  return me == they ? -1 : me;
}

/* The report body of a collective disagreement with peer p (report.h). */
static void coll_report(dist__tcp *t, dist__tcp_req *r, int p, const tcp_desc *theirs,
                        uint64_t their_size, bool nack) {
  char fb[64];
  const char *field = coll_field(&r->d, r->len, theirs, their_size, nack, fb, sizeof fb);
  int me = t->g->rank;
  uint64_t seq = r->d.op_seq;
  bool transfer = r->d.total < 0 || !strcmp(field, "split size");
  bool lm = listed(&r->d) != 0, lt = listed(theirs) != 0; // list entries' pieces
  dist__rside a, b;
  if (transfer && !nack && !strcmp(field, "split size") && theirs->count == r->d.count) {
    /* What this rank sends back differs from what the peer expects. */
    coll_side(t, me, &r->d, seq, true, r->d.peer_count, "to", p, lt, &a);
    coll_side(t, p, theirs, seq, true, theirs->peer_count, "from", me, lm, &b);
  } else if (nack) { /* this rank's message was refused */
    coll_side(t, me, &r->d, seq, transfer, r->d.count, "to", p, lt, &a);
    coll_side(t, p, theirs, seq, transfer, theirs->count, "from", me, lm, &b);
  } else {
    coll_side(t, p, theirs, seq, transfer, theirs->count, "to", me, lm, &a);
    coll_side(t, me, &r->d, seq, transfer, r->d.count, "from", p, lt, &b);
  }
  char m[DIST_ERRMSG_LEN], lb[64];
  size_t off = 0;
  m[0] = '\0';
  dist__appendf(m, sizeof m, &off, "%s: ", dist__tcp_req_label(r, lb, sizeof lb));
  const dist__rside *mine = a.self ? &a : &b, *peer = a.self ? &b : &a;
  int odd = coll_odd(t, &r->d, theirs);
  if (odd < 0 && !strcmp(field, "split size")) /* one pair's view: which side is not known */
    dist__report_disagree_both(m, sizeof m, &off, field, &a, &b);
  else if (odd < 0)
    dist__report_disagree(m, sizeof m, &off, field, &a, &b);
  else
    dist__report_disagree_odd(m, sizeof m, &off, field, odd ? peer : mine, odd ? mine : peer);
  set_fail(r, DIST_E_DESYNC, "%s", m);
}

/* A matched transfer's signature: its size, and at DETAIL its dtype and
 * shape (what p2p_diff compares), so a pair that keeps its size but
 * changes its dtype still has a history to tell the changed side by. */
static uint64_t p2p_sig(uint64_t bytes, const tcp_desc *d) {
  uint64_t h = 1469598103934665603ull;
  h = (h ^ bytes) * 1099511628211ull;
  h = (h ^ (uint64_t)d->dtype) * 1099511628211ull;
  return (h ^ (uint64_t)d->peer_count) * 1099511628211ull;
}

/* Which side of a send and receive that differ (signatures ss and rs)
 * changed since the pair's steady run of matches (two or more in a row
 * with one signature), or since its only match so far (a loop's first
 * step, then a bug in its second): 1 the sender, 0 the receiver, -1 not
 * known (no such run, or both changed). Both ranks hold the same history,
 * so both say the same. */
static int p2p_changed(const dist__tcp *t, int p, bool i_send, uint64_t ss, uint64_t rs) {
  const tcp_conn *c = &t->conns[p];
  uint64_t last = i_send ? c->p2p_sent : c->p2p_recvd;
  uint32_t run = i_send ? c->p2p_sent_run : c->p2p_recvd_run;
  uint32_t n = i_send ? c->p2p_sent_n : c->p2p_recvd_n;
  if (run < (n == 1 ? 1u : 2u) || ss == rs)
    return -1;
  return last == rs ? 1 : last == ss ? 0 : -1;
}

/* A send or receive between this rank and peer p matched (signature sig). */
static void p2p_matched(uint64_t *last, uint32_t *run, uint32_t *n, uint64_t sig) {
  *run = *last == sig && *run < UINT32_MAX ? *run + 1 : 1;
  *n += *n < UINT32_MAX;
  *last = sig;
}

/* The report body of a send and a receive whose sizes differ. */
static void p2p_report(dist__tcp *t, dist__tcp_req *r, int p, const tcp_desc *theirs,
                       uint64_t their_size, bool i_send, const char *field) {
  int me = t->g->rank;
  dist__rside a, b;
  const tcp_desc *sd = i_send ? &r->d : theirs, *rd = i_send ? theirs : &r->d;
  int sr = i_send ? me : p, rr = i_send ? p : me;
  uint64_t sb = i_send ? r->len : their_size, rb = i_send ? their_size : r->len;
  const dist__cpu_group *g = t->g;
  dist__rval vs = {.kind = sd->kind, .seq = sd->op_seq, .dtype = sd->dtype == TCP_NONE8 ? -1 : sd->dtype,
                   .count = sd->count, .redop = -1, .root = -1, .dir = "to",
                   .peer = g->peers[rr].global_rank};
  dist__rval vr = {.kind = rd->kind, .seq = rd->op_seq, .dtype = rd->dtype == TCP_NONE8 ? -1 : rd->dtype,
                   .count = rd->count, .redop = -1, .root = -1, .dir = "from",
                   .peer = g->peers[sr].global_rank};
  if (vs.dtype < 0 || vs.count < 0)
    vs.dtype = -1, vs.count = (int64_t)sb; /* bytes blobs: counted in bytes */
  if (vr.dtype < 0 || vr.count < 0)
    vr.dtype = -1, vr.count = (int64_t)rb;
  a = (dist__rside){g->peers[sr].global_rank, sr, sr == me, ""};
  b = (dist__rside){g->peers[rr].global_rank, rr, rr == me, ""};
  dist__report_value(&vs, a.value, sizeof a.value);
  dist__report_value(&vr, b.value, sizeof b.value);
  char m[DIST_ERRMSG_LEN], lb[64];
  size_t off = 0;
  m[0] = '\0';
  dist__appendf(m, sizeof m, &off, "%s: ", dist__tcp_req_label(r, lb, sizeof lb));
  int changed = p2p_changed(t, p, i_send, p2p_sig(sb, sd), p2p_sig(rb, rd));
  if (changed >= 0) /* it is the odd one: the other side matched this size before */
    dist__report_disagree_odd(m, sizeof m, &off, field ? field : "size", changed ? &b : &a,
                              changed ? &a : &b);
  else
    dist__report_disagree_both(m, sizeof m, &off, field ? field : "size", &a, &b);
  set_fail(r, DIST_E_DESYNC, "%s", m);
}

/* DIST_OK when message h from src fits receive r, else the failure is
 * recorded on r (not completed). */
static int check_match(dist__tcp *t, dist__tcp_req *r, int src, const tcp_hdr *h) {
  tcp_desc hd = hdr_desc(h);
  if (r->coll) {
    char fb[64];
    if (!coll_field(&r->d, r->len, &hd, h->size, false, fb, sizeof fb))
      return DIST_OK;
    coll_report(t, r, src, &hd, h->size, false);
    return DIST_E_DESYNC;
  }
  const char *why = p2p_diff(&r->d, r->len, &hd, h->size);
  if (!why) {
    if (src != t->g->rank)
      p2p_matched(&t->conns[src].p2p_recvd, &t->conns[src].p2p_recvd_run,
                  &t->conns[src].p2p_recvd_n, p2p_sig(r->len, &r->d));
    return DIST_OK;
  }
  p2p_report(t, r, src, &hd, h->size, false, why);
  return DIST_E_DESYNC;
}

static void answer(dist__tcp *t, tcp_conn *c, int type, const dist__tcp_req *r,
                   const tcp_hdr *m) {
  tcp_hdr h;
  dist__tcp_hdr_init(&h, type, m->ctx, m->tag);
  h.msg_id = m->msg_id;
  h.kind = r->d.kind;
  h.op_seq = r->d.op_seq;
  h.dtype = r->d.dtype;
  h.count = r->d.count;
  if (!r->coll)
    h.peer_count = r->d.peer_count; /* the shape at DETAIL (p2p_diff) */
  h.size = r->len;
  if (type == TCP_F_NACK) { /* the sender reports what this receive expected */
    h.redop = r->d.redop;
    h.part_of = r->d.part_of;
    h.root = r->d.root;
    h.total = r->d.total;
    h.peer_count = r->d.peer_count;
  }
  if (type == TCP_F_ACK && (m->flags & TCP_HF_LAZY_ACK))
    dist__tcp_send_lazy_ack(t, c, &h);
  else
    dist__tcp_send_ctrl(t, c, &h, NULL);
}

/* --- posting ----------------------------------------------------------------- */

/* Fails r, to or from a peer whose connection is closed. This group's own
 * abort closes every connection (dist__tcp_handle_abort); a collective
 * already under way that posts after it fails as aborted, not as a lost
 * peer: the abort is the cause, and the status is what a destroy with
 * operations pending counts (pg.h). A peer that exited with nothing here
 * waiting for it (departed) is lost now, with the message of its end. */
static void fail_closed(dist__tcp *t, dist__tcp_req *r, const char *dir) {
  char lb[64], nb[160], m[DIST_ERRMSG_LEN];
  dist__tcp_req_label(r, lb, sizeof lb);
  if (atomic_load(&t->aborted))
    dist__tcp_complete(t, r, DIST_E_ABORTED, "%s: group %s was aborted: %s", lb, t->g->name,
                       t->abort_reason);
  else if (dist__tcp_need_departed(t, r->peer >= 0 ? r->peer : r->src, m, sizeof m))
    dist__tcp_complete(t, r, DIST_E_PEER_LOST, "%s: %s", lb, m);
  else if (r->peer < 0 && r->src < 0)
    dist__tcp_complete(t, r, DIST_E_PEER_LOST, "%s from any rank: peer lost (every other "
                       "member's connection is closed)", lb);
  else
    dist__tcp_complete(t, r, DIST_E_PEER_LOST, "%s %s %s: peer lost (the connection is closed)",
                       lb, dir, dist__cpu_peer_name(t->g, r->peer >= 0 ? r->peer : r->src, nb,
                                                    sizeof nb));
}

void dist__tcp_start_send(dist__tcp *t, dist__tcp_req *r) {
  if (!dist__tcp_reach_for(t, r))
    return;
  tcp_conn *c = &t->conns[r->peer];
  char lb[64];
  if (c->gone) {
    fail_closed(t, r, "to");
    return;
  }
  tcp_item *it = dist__calloc(1, sizeof *it);
  if (!it) {
    dist__tcp_complete(t, r, DIST_E_NOMEM, "%s: out of memory",
                       dist__tcp_req_label(r, lb, sizeof lb));
    return;
  }
  bool eager = r->len <= t->eager_max;
  r->msg_id = ++c->next_msg_id;
  tcp_hdr *h = &it->h;
  dist__tcp_hdr_init(h, eager ? TCP_F_DATA : TCP_F_RTS, r->ctx, r->tag);
  h->flags = (uint8_t)((r->want_ack ? TCP_HF_WANT_ACK : 0) |
                       (r->want_ack && r->lazy_ack ? TCP_HF_LAZY_ACK : 0));
  h->kind = r->d.kind;
  h->dtype = r->d.dtype;
  h->redop = r->d.redop;
  h->part_of = r->d.part_of;
  h->root = r->d.root;
  h->op_seq = r->d.op_seq;
  h->count = r->d.count;
  h->peer_count = r->d.peer_count;
  h->total = r->d.total;
  h->msg_id = r->msg_id;
  h->size = r->len;
  if (eager) {
    h->len = r->len;
    it->payload = r->buf;
    it->plen = r->len;
  }
  r->state = eager ? RQ_SEND_QUEUED : RQ_SEND_CTSWAIT;
  it->req = r;
  r->item = it;
  dist__tcp_enqueue(t, c, it);
  dist__tcp_flush(t, c); /* small messages leave now, without a sweep */
}

/* Receive r takes message m (DATA with its payload in data, or RTS) from c. */
static void take_unexpected(dist__tcp *t, tcp_conn *c, dist__tcp_req *r, const tcp_hdr *m,
                            const uint8_t *data) {
  unpost(t, r);
  r->src = c->peer;
  r->msg_id = m->msg_id;
  bool ok = check_match(t, r, c->peer, m) == DIST_OK;
  if (m->type == TCP_F_RTS) {
    answer(t, c, ok ? TCP_F_CTS : TCP_F_NACK, r, m);
    if (ok) {
      r->state = RQ_RECV_BODYWAIT;
      body_due(t, r, true);
    }
    else
      finish(t, r);
    return;
  }
  if (m->flags & TCP_HF_WANT_ACK)
    answer(t, c, ok ? TCP_F_ACK : TCP_F_NACK, r, m);
  if (ok && r->len)
    memcpy(r->buf, data, r->len);
  finish(t, r);
}

static bool umsg_matches(const tcp_umsg *u, const dist__tcp_req *r) {
  return u->h.ctx == r->ctx && u->h.tag == r->tag && (r->peer < 0 || r->peer == u->src);
}

/* Posts r first in line (front) or last. */
static void post_recv(dist__tcp *t, dist__tcp_req *r, bool front) {
  r->state = RQ_RECV_POSTED;
  r->posted = true;
  if (front) {
    r->pprev = NULL;
    r->pnext = t->posted;
    if (t->posted)
      t->posted->pprev = r;
    else
      t->posted_last = r;
    t->posted = r;
    return;
  }
  r->pprev = t->posted_last;
  r->pnext = NULL;
  if (t->posted_last)
    t->posted_last->pnext = r;
  else
    t->posted = r;
  t->posted_last = r;
}

/* The one place messages leave the unexpected list (prev: u's predecessor). */
static void unlink_unexpected(dist__tcp *t, tcp_umsg *prev, tcp_umsg *u) {
  if (prev)
    prev->next = u->next;
  else
    t->unexp = u->next;
  if (t->unexp_last == u)
    t->unexp_last = prev;
  t->unexp_n--;
  t->unexp_bytes -= u->h.len;
}

static void start_recv(dist__tcp *t, dist__tcp_req *r, bool front) {
  tcp_umsg *prev = NULL;
  for (tcp_umsg *u = t->unexp; u; prev = u, u = u->next) {
    if (!umsg_matches(u, r))
      continue;
    unlink_unexpected(t, prev, u);
    tcp_conn *c = &t->conns[u->src];
    take_unexpected(t, c, r, &u->h, u->data);
    dist__free(u->data);
    dist__free(u);
    if (r->state != RQ_DONE && c->gone) { /* an announced body that will never come */
      fail_closed(t, r, "from");
      return;
    }
    /* The ACK or CTS leaves now: the caller may not drive progress again
     * before its peer needs it. */
    dist__tcp_flush(t, c);
    return;
  }
  if (r->peer >= 0 ? t->conns[r->peer].gone : dist__tcp_no_sender_left(t)) {
    fail_closed(t, r, "from");
    return;
  }
  post_recv(t, r, front);
}

void dist__tcp_start_recv(dist__tcp *t, dist__tcp_req *r) {
  if (dist__tcp_reach_for(t, r)) /* a peer's end is then seen as its EOF */
    start_recv(t, r, false);
}

/* --- frame handlers ---------------------------------------------------------- */

static dist__tcp_req *match_posted(dist__tcp *t, int src, const tcp_hdr *h) {
  for (dist__tcp_req *r = t->posted; r; r = r->pnext)
    if (r->ctx == h->ctx && r->tag == h->tag && (r->peer < 0 || r->peer == src))
      return r;
  return NULL;
}

static dist__tcp_req *find_by_id(dist__tcp *t, bool is_send, int peer, uint64_t id, int state) {
  for (dist__tcp_req *r = t->reqs; r; r = r->next)
    if (r->is_send == is_send && r->msg_id == id && r->state != RQ_DONE &&
        (is_send ? r->peer : r->src) == peer && (state < 0 || r->state == state))
      return r;
  return NULL;
}

static void out_of_memory(dist__tcp *t, tcp_conn *c, uint64_t bytes) {
  char nb[160];
  dist__tcp_peer_gone(t, c, DIST_E_NOMEM, "no memory to buffer a %llu-byte message from %s",
                      (unsigned long long)bytes,
                      dist__cpu_peer_name(t->g, c->peer, nb, sizeof nb));
}

/* Point-to-point messages sent ahead of their receives wait in a bounded
 * list: past DIST_TCP_UNEXPECTED_MAX messages or DIST_TCP_UNEXPECTED_MB of
 * payload, a new one is dropped and its sender's operation fails (every
 * point-to-point send waits for its ACK). Collective messages are bounded
 * by the collectives' own protocol (a rank runs a few steps ahead at most)
 * and are never refused. */
static bool refused(dist__tcp *t, tcp_conn *c, const tcp_hdr *h) {
  if (h->ctx != DIST_TCP_CTX_P2P || !(h->flags & TCP_HF_WANT_ACK))
    return false;
  if (t->unexp_n < t->unexp_max_n && t->unexp_bytes + h->len <= t->unexp_max_bytes)
    return false;
  char nb[160];
  DIST_LOG(INFO, TCP, "group %s: refusing a %llu-byte message from %s: %zu unexpected "
           "messages (%llu bytes) wait for receives already", t->g->name,
           (unsigned long long)h->len, dist__cpu_peer_name(t->g, c->peer, nb, sizeof nb),
           t->unexp_n, (unsigned long long)t->unexp_bytes);
  tcp_hdr a;
  dist__tcp_hdr_init(&a, TCP_F_NACK, h->ctx, h->tag);
  a.msg_id = h->msg_id;
  a.flags = TCP_HF_REFUSED;
  a.kind = h->kind;
  a.count = (int64_t)t->unexp_n;
  a.size = t->unexp_bytes;
  dist__tcp_send_ctrl(t, c, &a, NULL);
  return true;
}

/* The descriptor (and bytes) of this rank's call that the collective
 * message h contradicts, NULL for none: a broadcast message for the
 * running or last broadcast this rank is the root of, from a sender that
 * believes another rank is the root (two ranks that both believe they are
 * would otherwise each wait for a receiver that never comes); or any
 * message of the running collective that no receive took, whose kind,
 * dtype, reduce op, root or count differ from this rank's (a gather to
 * another root: the sender's data comes to a rank that receives nothing,
 * and both sides would wait out the timeout); or a message of the
 * collective that last completed here, which took no message from that
 * sender in that way (a reduce to another root: this rank went on, the
 * sender and the true root would wait out the timeout). t->mu held. */
static const tcp_desc *clashes_with(const dist__tcp *t, const tcp_hdr *h, size_t *bytes) {
  if (h->ctx != DIST_TCP_CTX_COLL)
    return NULL;
  uint64_t seq = (uint64_t)h->tag >> 16;
  if (t->bcast_seq != 0 && seq == t->bcast_seq && h->kind == DIST_OP_BROADCAST &&
      h->root != t->bcast.root) {
    *bytes = t->bcast_bytes;
    return &t->bcast;
  }
  tcp_desc hd = hdr_desc(h);
  if (t->coll_active && t->run_seq != 0 && seq == t->run_seq && t->coll_seq == t->run_seq &&
      !same_call(&t->run, &hd)) {
    *bytes = t->run_bytes;
    return &t->run;
  }
  if (t->done_seq != 0 && seq == t->done_seq && !(t->coll_active && t->coll_seq == seq) &&
      !same_call(&t->done, &hd)) {
    *bytes = t->done_bytes;
    return &t->done;
  }
  return NULL;
}

/* A collective message that contradicts this rank's call (clashes_with):
 * fails this rank's collective with the report when it is the running one,
 * and refuses the message so its sender fails with the same one (a small
 * broadcast's root has returned: its next collective fails, naming it).
 * t->mu held. */
static bool clash(dist__tcp *t, tcp_conn *c, const tcp_hdr *h) {
  size_t bytes = 0;
  const tcp_desc *mine = clashes_with(t, h, &bytes);
  if (!mine)
    return false;
  uint64_t seq = (uint64_t)h->tag >> 16;
  dist__tcp_req me = {.d = *mine, .len = bytes, .coll = true};
  tcp_desc hd = hdr_desc(h);
  coll_report(t, &me, c->peer, &hd, (uint64_t)(h->total > 0 ? h->total : 0) *
                  dist_dtype_size((dist_dtype)h->dtype), false);
  if (t->coll_active && t->coll_seq == seq && t->err_rc == DIST_OK && me.msg) {
    /* As a peer's report: the running collective fails with it. */
    const char *body = strstr(me.msg, ": ");
    snprintf(t->err_msg, sizeof t->err_msg, "%s", body ? body + 2 : me.msg);
    t->err_rc = DIST_E_DESYNC;
    t->err_seq = t->coll_seq;
    t->completed = true;
  }
  dist__free(me.msg);
  if (h->flags & TCP_HF_WANT_ACK || h->type == TCP_F_RTS)
    answer(t, c, TCP_F_NACK, &me, h);
  return true;
}

void dist__tcp_clash_queued(dist__tcp *t) {
  tcp_umsg *prev = NULL;
  for (tcp_umsg *u = t->unexp; u;) {
    tcp_umsg *next = u->next;
    if (clash(t, &t->conns[u->src], &u->h)) {
      unlink_unexpected(t, prev, u);
      dist__free(u->data);
      dist__free(u);
    } else {
      prev = u;
    }
    u = next;
  }
}

void dist__tcp_on_data(dist__tcp *t, tcp_conn *c) {
  const tcp_hdr *h = &c->rh;
  dist__tcp_req *r = match_posted(t, c->peer, h);
  if (r) {
    unpost(t, r);
    r->src = c->peer;
    r->msg_id = h->msg_id;
    if (check_match(t, r, c->peer, h) != DIST_OK) {
      if (h->flags & TCP_HF_WANT_ACK)
        answer(t, c, TCP_F_NACK, r, h);
      finish(t, r);
      dist__tcp_expect_body(c, NULL, h->len);
      return;
    }
    r->state = RQ_RECV_READING;
    c->rreq = r;
    dist__tcp_expect_body(c, r->buf, h->len);
    return;
  }
  /* Unexpected: its length passed the eager bound in the header check. */
  if (clash(t, c, h) || refused(t, c, h)) {
    dist__tcp_expect_body(c, NULL, h->len);
    return;
  }
  tcp_umsg *u = dist__calloc(1, sizeof *u);
  if (u && h->len && !(u->data = dist__malloc(h->len))) {
    dist__free(u);
    u = NULL;
  }
  if (!u) {
    out_of_memory(t, c, h->len);
    return;
  }
  u->src = c->peer;
  u->h = *h;
  c->rumsg = u;
  dist__tcp_expect_body(c, u->data, h->len);
}

static void append_unexpected(dist__tcp *t, tcp_umsg *u) {
  t->unexp_n++;
  t->unexp_bytes += u->h.len;
  u->next = NULL;
  if (t->unexp_last)
    t->unexp_last->next = u;
  else
    t->unexp = u;
  t->unexp_last = u;
}

void dist__tcp_on_payload_done(dist__tcp *t, tcp_conn *c) {
  if (c->rreq) {
    dist__tcp_req *r = c->rreq;
    c->rreq = NULL;
    if (c->rh.type == TCP_F_BODY && --r->parts_left > 0)
      return; /* other stripes are still on their way */
    if (c->rh.type == TCP_F_DATA && (c->rh.flags & TCP_HF_WANT_ACK))
      answer(t, c, TCP_F_ACK, r, &c->rh);
    finish(t, r);
  } else if (c->rumsg) {
    tcp_umsg *u = c->rumsg;
    c->rumsg = NULL;
    /* A receive may have been posted while the payload was arriving. */
    dist__tcp_req *r = match_posted(t, c->peer, &u->h);
    if (!r) {
      append_unexpected(t, u);
      return;
    }
    take_unexpected(t, c, r, &u->h, u->data);
    dist__free(u->data);
    dist__free(u);
  }
}

void dist__tcp_on_rts(dist__tcp *t, tcp_conn *c) {
  dist__tcp_req *r = match_posted(t, c->peer, &c->rh);
  if (r) {
    take_unexpected(t, c, r, &c->rh, NULL);
    return;
  }
  if (clash(t, c, &c->rh) || refused(t, c, &c->rh))
    return;
  tcp_umsg *u = dist__calloc(1, sizeof *u);
  if (!u) {
    out_of_memory(t, c, 0);
    return;
  }
  u->src = c->peer;
  u->h = c->rh;
  append_unexpected(t, u);
}

/* The frames of r's body, one stripe per lane (tcp_int.h); NULL when out
 * of memory (nothing allocated then). */
static tcp_item *body_items(dist__tcp_req *r, int n) {
  tcp_item *head = NULL;
  for (int i = n - 1; i >= 0; i--) {
    tcp_item *it = dist__calloc(1, sizeof *it);
    if (!it) {
      while (head) {
        tcp_item *next = head->rnext;
        dist__free(head);
        head = next;
      }
      return NULL;
    }
    int64_t off, len;
    dist__tcp_block((int64_t)r->len, n, i, &off, &len);
    dist__tcp_hdr_init(&it->h, TCP_F_BODY, r->ctx, r->tag);
    it->h.msg_id = r->msg_id;
    it->h.size = r->len;
    it->h.len = (uint64_t)len;
    it->h.count = off;
    it->h.total = n;
    it->payload = r->buf + off;
    it->plen = (size_t)len;
    it->req = r;
    it->rnext = head;
    head = it;
  }
  return head;
}

void dist__tcp_on_cts(dist__tcp *t, tcp_conn *c) {
  dist__tcp_req *r = find_by_id(t, true, c->peer, c->rh.msg_id, RQ_SEND_CTSWAIT);
  if (r && !r->coll) /* the receiver matched it */
    p2p_matched(&t->conns[c->peer].p2p_sent, &t->conns[c->peer].p2p_sent_run,
                &t->conns[c->peer].p2p_sent_n, p2p_sig(r->len, &r->d));
  int n = r ? dist__tcp_stripes(t, c->peer, r->len) : 0;
  tcp_item *items = r ? body_items(r, n) : NULL;
  if (!items) {
    if (r) {
      char lb[64];
      dist__tcp_complete(t, r, DIST_E_NOMEM, "%s: out of memory",
                         dist__tcp_req_label(r, lb, sizeof lb));
    }
    tcp_hdr h; /* withdrawn (or no memory): no body will come */
    dist__tcp_hdr_init(&h, TCP_F_CANCEL, c->rh.ctx, c->rh.tag);
    h.msg_id = c->rh.msg_id;
    dist__tcp_send_ctrl(t, c, &h, NULL);
    return;
  }
  r->item = items;
  r->parts = n;
  r->state = RQ_SEND_QUEUED;
  int i = 0;
  for (tcp_item *it = items, *next; it; it = next, i++) {
    next = it->rnext; /* enqueue may write the frame, and unchain it */
    dist__tcp_enqueue(t, dist__tcp_lane(t, c->peer, i), it);
  }
}

/* The stripe a BODY frame on lane c says it is, checked against the split
 * of r's body this rank computes; false when it does not fit. */
static bool stripe_ok(dist__tcp *t, tcp_conn *c, dist__tcp_req *r) {
  const tcp_hdr *h = &c->rh;
  if (h->size != r->len || h->total < 1 || h->total > t->conns[c->peer].nlanes ||
      c->lane >= h->total || (r->parts && h->total != r->parts))
    return false;
  int64_t off, len;
  dist__tcp_block((int64_t)r->len, (int)h->total, c->lane, &off, &len);
  return h->count == off && h->len == (uint64_t)len;
}

bool dist__tcp_on_body(dist__tcp *t, tcp_conn *c) {
  dist__tcp_req *r = find_by_id(t, false, c->peer, c->rh.msg_id, RQ_RECV_BODYWAIT);
  if (!r)
    r = find_by_id(t, false, c->peer, c->rh.msg_id, RQ_RECV_READING);
  if (!r) {
    dist__tcp_expect_body(c, NULL, c->rh.len); /* its receive was cancelled */
    return true;
  }
  if (!stripe_ok(t, c, r))
    return false;
  if (!r->parts) {
    r->parts = (int)c->rh.total;
    r->parts_left = r->parts;
  }
  r->state = RQ_RECV_READING;
  c->rreq = r;
  dist__tcp_expect_body(c, r->buf + c->rh.count, c->rh.len);
  return true;
}

/* The receiver dropped send r: it holds its bound of unexpected messages
 * (refused() on its side). */
static void on_refused(dist__tcp *t, tcp_conn *c, dist__tcp_req *r) {
  char lb[64], nb[160];
  set_fail(r, DIST_E_BACKEND,
           "%s to %s: refused: the receiver already holds %lld messages (%llu bytes) sent "
           "ahead of its receives, its bound (DIST_TCP_UNEXPECTED_MAX, DIST_TCP_UNEXPECTED_MB)",
           dist__tcp_req_label(r, lb, sizeof lb),
           dist__cpu_peer_name(t->g, c->peer, nb, sizeof nb), (long long)c->rh.count,
           (unsigned long long)c->rh.size);
  if (!r->item)
    finish(t, r);
}

void dist__tcp_on_sent(dist__tcp *t, dist__tcp_req *r, int type) {
  if (type == TCP_F_RTS)
    return; /* now waiting for CTS */
  if (type == TCP_F_DATA && r->want_ack && r->rc == DIST_OK) {
    r->state = RQ_SEND_ACKWAIT;
    return;
  }
  finish(t, r); /* BODY (CTS was the acknowledgement), or a NACK came early */
}

void dist__tcp_on_ack(dist__tcp *t, tcp_conn *c, bool nack) {
  const tcp_hdr *h = &c->rh;
  dist__tcp_req *r = find_by_id(t, true, c->peer, h->msg_id, -1);
  if (!r)
    return; /* a send that was released meanwhile */
  if (nack && (h->flags & TCP_HF_REFUSED)) {
    on_refused(t, c, r);
    return;
  }
  if (!nack) {
    if (!r->coll)
      p2p_matched(&c->p2p_sent, &c->p2p_sent_run, &c->p2p_sent_n, p2p_sig(r->len, &r->d));
    if (r->item)
      r->want_ack = false; /* acknowledged already: done once written */
    else
      finish(t, r);
    return;
  }
  tcp_desc hd = hdr_desc(h);
  char fb[64];
  if (r->coll && coll_field(&r->d, r->len, &hd, h->size, true, fb, sizeof fb))
    coll_report(t, r, c->peer, &hd, h->size, true);
  else
    p2p_report(t, r, c->peer, &hd, h->size, true, p2p_diff(&r->d, r->len, &hd, h->size));
  /* The peer drops the payload it gets; the buffer is ours until written. */
  if (!r->item)
    finish(t, r);
}

void dist__tcp_on_cancel(dist__tcp *t, tcp_conn *c) {
  uint64_t id = c->rh.msg_id;
  dist__tcp_req *r = find_by_id(t, false, c->peer, id, RQ_RECV_BODYWAIT);
  if (r) {
    /* As MPI's cancel: a withdrawn message is never received. The receive
     * goes back first in line (it had matched first) for the next one. */
    body_due(t, r, false);
    r->msg_id = 0;
    r->src = -1;
    start_recv(t, r, true);
    return;
  }
  tcp_umsg *prev = NULL;
  for (tcp_umsg *u = t->unexp; u; prev = u, u = u->next) {
    if (u->src != c->peer || u->h.msg_id != id || u->h.type != TCP_F_RTS)
      continue;
    unlink_unexpected(t, prev, u);
    dist__free(u);
    return;
  }
}

/* --- the public calls ---------------------------------------------------- */

/* The tensor of c that buf belongs to, for dtype and element counts. */
static const dist_tensor *p2p_tensor(const dist_coll *c, bool is_send, const void *buf) {
  if (!c)
    return NULL;
  if (c->kind == DIST_OP_SEND && c->n_inputs > 0)
    return &c->inputs[0];
  if (c->kind == DIST_OP_RECV && c->n_outputs > 0)
    return &c->outputs[0];
  for (size_t i = 0; c->kind == DIST_OP_BATCH_P2P && i < c->n_p2p; i++)
    if (c->p2p[i].is_send == is_send && c->p2p[i].tensor.data == buf)
      return &c->p2p[i].tensor;
  return NULL;
}

static tcp_desc p2p_desc(const dist_coll *c, bool is_send, const void *buf, size_t len) {
  tcp_desc d = {0};
  d.kind = (uint16_t)(c ? c->kind : is_send ? DIST_OP_SEND : DIST_OP_RECV);
  d.op_seq = c ? c->seq : 0;
  d.dtype = d.redop = TCP_NONE8;
  d.root = -1;
  d.count = d.peer_count = d.total = -1;
  const dist_tensor *tt = p2p_tensor(c, is_send, buf);
  if (tt && dist_tensor_nbytes(tt) == len && dist_dtype_size(tt->dtype) > 0) {
    d.dtype = (uint8_t)tt->dtype;
    d.count = dist_tensor_numel(tt);
    if (dist_get_debug_level() == DIST_DEBUG_DETAIL)
      d.peer_count = shape_hash(tt);
  }
  return d;
}

static int post(dist__tcp *t, bool is_send, int peer, uint32_t ctx, int64_t tag, void *buf,
                size_t len, const dist_coll *c, dist__tcp_req **out, dist__errbuf *err) {
  const char *what = is_send ? "isend" : "irecv";
  if (!t || !out)
    return dist__err_set(err, DIST_E_INVAL, "tcp %s: NULL engine or result", what);
  *out = NULL;
  bool self_ok = ctx == DIST_TCP_CTX_P2P; /* collectives never address themselves */
  if (peer < (is_send ? 0 : -1) || peer >= t->g->size || (peer == t->g->rank && !self_ok))
    return dist__err_set(err, DIST_E_INVAL, "tcp %s: peer %d is not another member of "
                         "group %s (size %d, this rank %d)", what, peer, t->g->name,
                         t->g->size, t->g->rank);
  if (!buf && len > 0)
    return dist__err_set(err, DIST_E_INVAL, "tcp %s: NULL buffer of %zu bytes", what, len);
  tcp_desc d = p2p_desc(c, is_send, buf, len);
  pthread_mutex_lock(&t->mu);
  dist__tcp_handle_abort(t);
  int rc = atomic_load(&t->aborted)
               ? dist__err_set(err, DIST_E_ABORTED, "group %s was aborted: %s", t->g->name,
                               t->abort_reason)
               : dist__cpu_check_state(t->g, err);
  dist__tcp_req *r = NULL;
  if (rc == DIST_OK) {
    r = dist__tcp_req_new(t, is_send, peer, ctx, tag, buf, len, &d);
    if (!r)
      rc = dist__err_set(err, DIST_E_NOMEM, "tcp %s: out of memory", what);
  }
  if (r) {
    r->want_ack = true; /* a send completes when the receiver matched it */
    if (peer == t->g->rank)
      dist__tcp_self_post(t, r);
    else if (is_send)
      dist__tcp_start_send(t, r);
    else
      dist__tcp_start_recv(t, r);
  }
  pthread_mutex_unlock(&t->mu);
  *out = r;
  return rc;
}

int dist__tcp_isend(dist__tcp *t, int peer, uint32_t ctx, int64_t tag, const void *buf,
                    size_t len, const dist_coll *c, dist__tcp_req **out, dist__errbuf *err) {
  return post(t, true, peer, ctx, tag, (void *)buf, len, c, out, err);
}

int dist__tcp_irecv(dist__tcp *t, int peer, uint32_t ctx, int64_t tag, void *buf,
                    size_t len, const dist_coll *c, dist__tcp_req **out, dist__errbuf *err) {
  return post(t, false, peer, ctx, tag, buf, len, c, out, err);
}

int dist__tcp_req_status(const dist__tcp_req *r, const char **msg, int *src_rank) {
  if (!r)
    return DIST_E_INVAL;
  dist__tcp *t = r->t;
  pthread_mutex_lock(&t->mu);
  int rc = r->state == RQ_DONE ? r->rc : DIST_E_INVAL;
  if (msg)
    *msg = r->state != RQ_DONE ? "request still pending" : r->msg ? r->msg : "";
  if (src_rank)
    *src_rank = r->src;
  pthread_mutex_unlock(&t->mu);
  return rc;
}

void dist__tcp_req_free(dist__tcp_req *r) {
  if (!r)
    return;
  dist__tcp *t = r->t;
  pthread_mutex_lock(&t->mu);
  dist__tcp_req_release(t, r);
  pthread_mutex_unlock(&t->mu);
}
