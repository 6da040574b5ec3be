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

const char *dist__tcp_req_label(const dist__tcp_req *r, char *buf, size_t len) {
  if (r->d.op_seq)
    snprintf(buf, len, "%s #%llu", dist_op_name((dist_op_kind)r->d.kind),
             (unsigned long long)r->d.op_seq);
  else
    snprintf(buf, len, "%s", dist_op_name((dist_op_kind)r->d.kind));
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

static void finish(dist__tcp *t, dist__tcp_req *r) {
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
  if (r->is_send)
    return r->state == RQ_SEND_ACKWAIT || (r->state == RQ_SEND_QUEUED &&
                                           (!r->item || r->item->off > 0));
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

/* "ALL_REDUCE float32[8] op=SUM of 8 (32 bytes)" for messages. */
static char *fmt_desc(const tcp_desc *d, uint64_t bytes, char *buf, size_t len) {
  size_t off = 0;
  buf[0] = '\0';
  dist__appendf(buf, len, &off, "%s", dist_op_name((dist_op_kind)d->kind));
  if (d->dtype != TCP_NONE8)
    dist__appendf(buf, len, &off, " %s[%lld]", dist_dtype_name((dist_dtype)d->dtype),
                  (long long)d->count);
  if (d->redop != TCP_NONE8)
    dist__appendf(buf, len, &off, " op=%s", dist_redop_name((dist_redop_kind)d->redop));
  if (d->root >= 0)
    dist__appendf(buf, len, &off, " root=%d", d->root);
  if (d->total >= 0)
    dist__appendf(buf, len, &off, " of %lld", (long long)d->total);
  dist__appendf(buf, len, &off, " (%llu bytes)", (unsigned long long)bytes);
  return buf;
}

static tcp_desc hdr_desc(const tcp_hdr *h) {
  tcp_desc d = {h->kind, h->dtype, h->redop, h->root, h->op_seq, h->count, h->peer_count,
                h->total};
  return d;
}

/* What differs between a collective message and what the receive expects
 * (NULL when they agree). */
static const char *coll_diff(const dist__tcp_req *r, const tcp_hdr *h) {
  if (h->kind != r->d.kind)
    return "the operations differ";
  if (h->dtype != r->d.dtype)
    return "the dtypes differ";
  if (h->redop != r->d.redop)
    return "the reduce ops differ";
  if (h->root != r->d.root)
    return "the roots differ";
  if (h->total != r->d.total)
    return "the operation sizes differ";
  if (h->count != r->d.count || h->size != r->len)
    return "the message sizes differ";
  if (h->peer_count >= 0 && r->d.peer_count >= 0 && h->peer_count != r->d.peer_count)
    return "the sizes expected in return differ";
  return NULL;
}

/* DIST_OK when message h from src fits receive r, else the failure is
 * recorded on r (not completed). */
static int check_match(dist__tcp *t, dist__tcp_req *r, int src, const tcp_hdr *h) {
  char nb[160], lb[64], mine[200], theirs[200];
  dist__cpu_peer_name(t->g, src, nb, sizeof nb);
  dist__tcp_req_label(r, lb, sizeof lb);
  tcp_desc hd = hdr_desc(h);
  if (r->coll) {
    const char *why = coll_diff(r, h);
    if (!why)
      return DIST_OK;
    char extra[160] = "";
    if (h->peer_count >= 0 && r->d.peer_count >= 0 && h->peer_count != r->d.peer_count)
      snprintf(extra, sizeof extra, " (it expects %lld elements back, this rank sends %lld)",
               (long long)h->peer_count, (long long)r->d.peer_count);
    set_fail(r, DIST_E_DESYNC,
             "%s: %s disagrees: it sent %s, this rank expects %s from it: %s%s", lb, nb,
             fmt_desc(&hd, h->size, theirs, sizeof theirs),
             fmt_desc(&r->d, r->len, mine, sizeof mine), why, extra);
    return DIST_E_DESYNC;
  }
  if (h->size == r->len)
    return DIST_OK;
  char plb[64];
  dist__tcp_req_label(&(dist__tcp_req){.d = hd}, plb, sizeof plb);
  set_fail(r, DIST_E_DESYNC,
           "%s from %s: size mismatch: this receive expects %s but the peer's %s sent %s",
           lb, nb, fmt_desc(&r->d, r->len, mine, sizeof mine), plb,
           fmt_desc(&hd, h->size, theirs, sizeof theirs));
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
  h.size = r->len;
  if (type == TCP_F_ACK && (m->flags & TCP_HF_LAZY_ACK))
    dist__tcp_send_lazy_ack(t, c, &h);
  else
    dist__tcp_send_ctrl(t, c, &h, NULL);
}

/* --- posting ----------------------------------------------------------------- */

void dist__tcp_start_send(dist__tcp *t, dist__tcp_req *r) {
  tcp_conn *c = &t->conns[r->peer];
  char lb[64], nb[160];
  if (c->gone) {
    dist__tcp_complete(t, r, DIST_E_PEER_LOST, "%s to %s: peer lost (the connection is "
                       "closed)", dist__tcp_req_label(r, lb, sizeof lb),
                       dist__cpu_peer_name(t->g, r->peer, nb, sizeof nb));
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
    if (ok)
      r->state = RQ_RECV_BODYWAIT;
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
  char lb[64], nb[160];
  tcp_umsg *prev = NULL;
  for (tcp_umsg *u = t->unexp; u; prev = u, u = u->next) {
    if (!umsg_matches(u, r))
      continue;
    unlink_unexpected(t, prev, u);
    tcp_conn *c = &t->conns[u->src];
    take_unexpected(t, c, r, &u->h, u->data);
    dist__free(u->data);
    dist__free(u);
    /* The ACK or CTS leaves now: the caller may not drive progress again
     * before its peer needs it. */
    dist__tcp_flush(t, c);
    return;
  }
  if (r->peer >= 0 && t->conns[r->peer].gone) {
    dist__tcp_complete(t, r, DIST_E_PEER_LOST, "%s from %s: peer lost (the connection is "
                       "closed)", dist__tcp_req_label(r, lb, sizeof lb),
                       dist__cpu_peer_name(t->g, r->peer, nb, sizeof nb));
    return;
  }
  post_recv(t, r, front);
}

void dist__tcp_start_recv(dist__tcp *t, dist__tcp_req *r) { start_recv(t, r, false); }

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
  if (refused(t, c, h)) {
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
  if (refused(t, c, &c->rh))
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

void dist__tcp_on_cts(dist__tcp *t, tcp_conn *c) {
  dist__tcp_req *r = find_by_id(t, true, c->peer, c->rh.msg_id, RQ_SEND_CTSWAIT);
  tcp_item *it = r ? dist__calloc(1, sizeof *it) : NULL;
  if (!it) {
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
  dist__tcp_hdr_init(&it->h, TCP_F_BODY, r->ctx, r->tag);
  it->h.msg_id = r->msg_id;
  it->h.size = r->len;
  it->h.len = r->len;
  it->payload = r->buf;
  it->plen = r->len;
  it->req = r;
  r->item = it;
  r->state = RQ_SEND_QUEUED;
  dist__tcp_enqueue(t, c, it);
}

bool dist__tcp_on_body(dist__tcp *t, tcp_conn *c) {
  dist__tcp_req *r = find_by_id(t, false, c->peer, c->rh.msg_id, RQ_RECV_BODYWAIT);
  if (!r) {
    dist__tcp_expect_body(c, NULL, c->rh.len); /* its receive was cancelled */
    return true;
  }
  if (c->rh.len != r->len)
    return false;
  r->state = RQ_RECV_READING;
  c->rreq = r;
  dist__tcp_expect_body(c, r->buf, r->len);
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
    if (r->item)
      r->want_ack = false; /* acknowledged already: done once written */
    else
      finish(t, r);
    return;
  }
  char lb[64], plb[64], nb[160], mine[200], theirs[200];
  tcp_desc hd = hdr_desc(h);
  hd.redop = TCP_NONE8;
  set_fail(r, DIST_E_DESYNC,
           "%s to %s: size mismatch: this send has %s but the peer's %s expects %s",
           dist__tcp_req_label(r, lb, sizeof lb),
           dist__cpu_peer_name(t->g, c->peer, nb, sizeof nb),
           fmt_desc(&r->d, r->len, mine, sizeof mine),
           dist__tcp_req_label(&(dist__tcp_req){.d = hd}, plb, sizeof plb),
           fmt_desc(&hd, h->size, theirs, sizeof theirs));
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
