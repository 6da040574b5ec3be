/* tcp_frame.c - the TCP engine's wire: frame checks, send queues and the
 * receive state machine.
 *
 * DESIGN (the protocol). Every frame is a fixed 88-byte header (tcp_int.h)
 * followed by len payload bytes. A header is checked in full before
 * anything is allocated or written for it: magic, type, context, and a
 * length bounded by its type (eager data by TCP_EAGER_HARD_MAX, text by
 * TCP_TEXT_MAX, control frames carry none, a body must be exactly the
 * size its receive agreed to). A frame that fails the check drops the
 * connection (logged; the peer counts as lost).
 *
 * Messages up to the eager limit travel as one DATA frame. Larger ones use
 * a rendezvous: RTS announces the size, the receiver answers CTS once a
 * receive of that size matched (or NACK when the sizes differ), and only
 * then does the BODY stream, straight into the user's buffer on both
 * sides, so a large unexpected message never costs an allocation and a
 * copy. A DATA frame flagged WANT_ACK is answered by ACK after the match
 * (NACK on a size mismatch); CTS doubles as the acknowledgement of a large
 * message. CANCEL withdraws an announced message whose send failed. ERROR
 * carries a collective failure to the other members, ABORT an abort, BYE
 * a departure (with the failure that caused it, if any, so the peers
 * report the root cause rather than the departure), EXIT the end of a
 * process that exits with the group live (its sockets close next: a
 * finished rank, not a crashed one, tcp_progress.c).
 *
 * Sending: each connection has a queue of frames written with sendmsg
 * (header and payload in one iovec list, several frames per call) on a
 * non-blocking socket; whatever the socket does not take stays queued for
 * the next sweep. Receiving: bytes land in a 64 KiB staging buffer from
 * which headers and small payloads are parsed; a large remainder of a
 * payload is read straight into its destination.
 *
 * Several sockets per peer: every frame but BODY travels on socket 0 (the
 * peer's tcp_conn); a body answering CTS is cut into stripes, stripe i a
 * BODY frame on socket i saying its first byte (count) and the number of
 * stripes (total), which the receiver checks against the split it
 * computes before it reads a byte into the buffer. A request is done when
 * all its stripes are written (send) or read (receive). Any other frame
 * on a further socket is malformed. A peer lost on one socket is lost on
 * all; a BYE on socket 0 counts once the other sockets have reached their
 * end, since what the peer wrote on them before leaving may still come. */
#include <stdio.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "tcp_int.h"

#define TCP_IOV_MAX 64

void dist__tcp_hdr_init(tcp_hdr *h, int type, uint32_t ctx, int64_t tag) {
  memset(h, 0, sizeof *h);
  h->magic = TCP_MAGIC;
  h->type = (uint8_t)type;
  h->ctx = ctx;
  h->tag = tag;
  h->dtype = TCP_NONE8;
  h->redop = TCP_NONE8;
  h->root = -1;
  h->peer_count = -1;
  h->total = -1;
}

void dist__tcp_enqueue(dist__tcp *t, tcp_conn *c, tcp_item *it) {
  it->next = NULL;
  it->off = 0;
  it->conn = c;
  if (c->sq_last)
    c->sq_last->next = it;
  else
    c->sq = it;
  c->sq_last = it;
  /* A driver blocked in poll() does not watch this socket for writing. */
  if (t->in_poll)
    dist__tcp_wake(t);
}

static bool ctrl(dist__tcp *t, tcp_conn *c, const tcp_hdr *h, const char *text, bool lazy) {
  if (c->gone)
    return true;
  size_t tl = text ? strnlen(text, TCP_TEXT_MAX) : 0;
  tcp_item *it = dist__calloc(1, sizeof *it + tl);
  if (!it)
    return false;
  it->h = *h;
  it->h.len = tl;
  it->h.size = h->type == TCP_F_NACK ? h->size : tl;
  it->lazy = lazy;
  if (tl) {
    memcpy(it + 1, text, tl);
    it->payload = (const uint8_t *)(it + 1);
    it->plen = tl;
  }
  dist__tcp_enqueue(t, c, it);
  return true;
}

bool dist__tcp_send_ctrl(dist__tcp *t, tcp_conn *c, const tcp_hdr *h, const char *text) {
  return ctrl(t, c, h, text, false);
}

bool dist__tcp_send_lazy_ack(dist__tcp *t, tcp_conn *c, const tcp_hdr *h) {
  t->lazy_held = true;
  return ctrl(t, c, h, NULL, true);
}

bool dist__tcp_flush_due(const tcp_conn *c, bool idle) {
  int lazy = 0;
  for (const tcp_item *it = c->sq; it; it = it->next) {
    if (!it->lazy)
      return true;
    lazy++;
  }
  return lazy > 0 && (idle || lazy >= TCP_LAZY_MAX);
}

static void item_free(tcp_item *it) {
  dist__free(it->owned);
  dist__free(it);
}

/* Takes it out of its request's chain of queued frames. */
static void req_drop(tcp_item *it) {
  dist__tcp_req *r = it->req;
  if (!r)
    return;
  tcp_item **pp = &r->item;
  while (*pp && *pp != it)
    pp = &(*pp)->rnext;
  if (*pp)
    *pp = it->rnext;
  it->req = NULL;
  it->rnext = NULL;
}

void dist__tcp_free_queue(tcp_conn *c) {
  while (c->sq) {
    tcp_item *it = c->sq;
    c->sq = it->next;
    req_drop(it);
    item_free(it);
  }
  c->sq_last = NULL;
}

/* Pops the head frame, written in full, and tells its request once every
 * frame of it (every stripe of a body) is written. */
static void head_written(dist__tcp *t, tcp_conn *c) {
  tcp_item *it = c->sq;
  c->sq = it->next;
  if (!c->sq)
    c->sq_last = NULL;
  dist__tcp_req *r = it->req;
  int type = it->h.type;
  req_drop(it);
  if (r && !r->item)
    dist__tcp_on_sent(t, r, type);
  item_free(it);
}

/* The iovec list of the queue's first frames, at most max bytes; returns
 * its length. */
static int gather_iov(tcp_conn *c, struct iovec *iov, size_t max) {
  int n = 0;
  const size_t hl = sizeof(tcp_hdr);
  for (tcp_item *it = c->sq; it && n < TCP_IOV_MAX - 1 && max > 0; it = it->next) {
    const uint8_t *p[2];
    size_t l[2];
    int k = 0;
    if (it->off < hl) {
      p[k] = (uint8_t *)&it->h + it->off;
      l[k++] = hl - it->off;
      p[k] = it->payload;
      l[k++] = it->plen;
    } else {
      p[k] = it->payload + (it->off - hl);
      l[k++] = it->plen - (it->off - hl);
    }
    for (int j = 0; j < k && max > 0; j++) {
      size_t take = l[j] < max ? l[j] : max;
      if (take)
        iov[n++] = (struct iovec){(void *)p[j], take};
      max -= take;
    }
  }
  return n;
}

bool dist__tcp_flush(dist__tcp *t, tcp_conn *c) {
  bool moved = false;
  size_t budget = t->io_chunk;
  while (c->sq && !c->gone && budget > 0) {
    struct iovec iov[TCP_IOV_MAX];
    struct msghdr m = {0};
    m.msg_iov = iov;
    m.msg_iovlen = (size_t)gather_iov(c, iov, budget);
    ssize_t w = sendmsg(c->fd, &m, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w < 0) {
      if (errno == EINTR)
        continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) {
        char nb[160];
        dist__tcp_peer_ended(t, c, "peer lost: %s: writing to it failed: %s",
                             dist__cpu_peer_name(t->g, c->peer, nb, sizeof nb),
                             strerror(errno));
      }
      break;
    }
    moved = true;
    budget -= (size_t)w < budget ? (size_t)w : budget;
    size_t left = (size_t)w;
    while (left > 0 && c->sq) {
      tcp_item *it = c->sq;
      size_t rest = sizeof it->h + it->plen - it->off;
      if (left < rest) {
        it->off += left;
        break;
      }
      left -= rest;
      it->off += rest;
      head_written(t, c);
    }
  }
  return moved;
}

/* Unlinks it from c's queue (it must not be the partly written head). */
static void unlink_item(tcp_conn *c, tcp_item *it) {
  tcp_item **pp = &c->sq, *prev = NULL;
  while (*pp && *pp != it) {
    prev = *pp;
    pp = &(*pp)->next;
  }
  if (!*pp)
    return;
  *pp = it->next;
  if (c->sq_last == it)
    c->sq_last = prev;
}

/* Detaches one frame of a send being withdrawn (see detach_item). */
static bool detach_one(dist__tcp *t, tcp_item *it) {
  tcp_conn *c = it->conn;
  req_drop(it);
  if (it->off == 0 || c->gone) {
    unlink_item(c, it);
    item_free(it);
    return true;
  }
  /* Half written: the peer expects the rest of this frame, and the user's
   * buffer is about to be released, so the frame keeps its own copy. */
  const size_t hl = sizeof it->h;
  size_t done = it->off > hl ? it->off - hl : 0;
  size_t rest = it->plen - done;
  if (rest == 0)
    return true;
  void *copy = dist__malloc(rest);
  if (!copy) {
    char nb[160];
    dist__tcp_peer_gone(t, c, DIST_E_NOMEM,
                        "connection to %s dropped: no memory to finish a frame",
                        dist__cpu_peer_name(t->g, c->peer, nb, sizeof nb));
    return false;
  }
  memcpy(copy, it->payload + done, rest);
  it->owned = copy;
  it->payload = copy;
  it->plen = rest;
  if (it->off > hl)
    it->off = hl;
  return true;
}

bool dist__tcp_detach_item(dist__tcp *t, dist__tcp_req *r) {
  bool ok = true;
  while (r->item) /* a body has a frame per stripe, on as many lanes */
    ok &= detach_one(t, r->item);
  return ok;
}

void dist__tcp_unhook_reader(dist__tcp *t, dist__tcp_req *r) {
  if (r->src < 0 || r->src >= t->g->size || r->src == t->g->rank)
    return;
  for (int i = 0; i < t->conns[r->src].nlanes; i++) {
    tcp_conn *c = dist__tcp_lane(t, r->src, i);
    if (c->rreq == r) {
      c->rreq = NULL;
      c->rdst = NULL; /* the rest of the payload is read and dropped */
    }
  }
}

/* --- receiving ------------------------------------------------------------- */

/* True when h may be acted on; otherwise why says what is wrong. */
static bool hdr_ok(const tcp_hdr *h, char *why, size_t wl) {
  if (h->magic != TCP_MAGIC) {
    snprintf(why, wl, "bad magic 0x%08x", h->magic);
    return false;
  }
  bool msg = h->type == TCP_F_DATA || h->type == TCP_F_RTS;
  if (msg && h->ctx != DIST_TCP_CTX_P2P && h->ctx != DIST_TCP_CTX_COLL) {
    snprintf(why, wl, "unknown context %u", h->ctx);
    return false;
  }
  switch (h->type) {
  case TCP_F_DATA:
    if (h->len != h->size || h->len > TCP_EAGER_HARD_MAX) {
      snprintf(why, wl, "eager message of %llu bytes (payload %llu, limit %u)",
               (unsigned long long)h->size, (unsigned long long)h->len,
               TCP_EAGER_HARD_MAX);
      return false;
    }
    return true;
  case TCP_F_BODY:
    return true; /* checked against its receive in dist__tcp_on_body */
  case TCP_F_ERROR:
  case TCP_F_ABORT:
  case TCP_F_BYE:
    if (h->len > TCP_TEXT_MAX) {
      snprintf(why, wl, "text of %llu bytes (limit %u)", (unsigned long long)h->len,
               TCP_TEXT_MAX);
      return false;
    }
    return true;
  default:
    if (h->type < TCP_F_DATA || h->type >= TCP_F_END_) {
      snprintf(why, wl, "unknown frame type %u", h->type);
      return false;
    }
    if (h->len != 0) {
      snprintf(why, wl, "control frame %u with a %llu-byte payload", h->type,
               (unsigned long long)h->len);
      return false;
    }
    return true;
  }
}

static void malformed(dist__tcp *t, tcp_conn *c, const char *why) {
  char nb[160];
  dist__cpu_peer_name(t->g, c->peer, nb, sizeof nb);
  DIST_LOG(ERROR, TCP, "group %s: dropping the connection to %s: malformed frame (%s)",
           t->g->name, nb, why);
  dist__tcp_peer_gone(t, c, DIST_E_PEER_LOST,
                      "peer lost: the connection to %s was dropped after a malformed "
                      "frame (%s)", nb, why);
}

static void on_text_frame(tcp_conn *c) {
  if (c->rh.len == 0) {
    c->rtext = dist__strdup("");
  } else {
    c->rtext = dist__malloc(c->rh.len + 1);
  }
  if (!c->rtext) {
    dist__tcp_expect_body(c, NULL, c->rh.len); /* read and drop; say why */
    return;
  }
  c->rtext[c->rh.len] = '\0';
  dist__tcp_expect_body(c, c->rtext, c->rh.len);
}

static void on_header(dist__tcp *t, tcp_conn *c) {
  char why[160];
  if (!hdr_ok(&c->rh, why, sizeof why)) {
    malformed(t, c, why);
    return;
  }
  c->rreq = NULL;
  c->rumsg = NULL;
  if (c->lane > 0 && c->rh.type != TCP_F_BODY) {
    snprintf(why, sizeof why, "frame type %u on socket %d of the peer's, which carries "
             "only message bodies", c->rh.type, c->lane);
    malformed(t, c, why);
    return;
  }
  switch (c->rh.type) {
  case TCP_F_DATA: dist__tcp_on_data(t, c); break;
  case TCP_F_RTS: dist__tcp_on_rts(t, c); break;
  case TCP_F_CTS: dist__tcp_on_cts(t, c); break;
  case TCP_F_BODY:
    if (!dist__tcp_on_body(t, c))
      malformed(t, c, "body of a size no receive agreed to");
    break;
  case TCP_F_ACK: dist__tcp_on_ack(t, c, false); break;
  case TCP_F_NACK: dist__tcp_on_ack(t, c, true); break;
  case TCP_F_CANCEL: dist__tcp_on_cancel(t, c); break;
  case TCP_F_EXIT: c->exiting = true; break; /* its end, next, decides */
  case TCP_F_ERROR:
  case TCP_F_ABORT:
  case TCP_F_BYE: on_text_frame(c); break;
  default: break;
  }
}

/* A peer that left said BYE on lane 0; what it wrote on its other lanes
 * before it closed them may still be arriving (TCP orders each socket,
 * not the lanes between them), so it counts as gone once every other lane
 * reached its end. */
static void bye_done(dist__tcp *t, tcp_conn *m) {
  for (int i = 1; i < m->nlanes; i++)
    if (!m->lanes[i - 1].eof)
      return;
  char nb[160];
  const char *why = m->bye_text ? m->bye_text : "";
  dist__tcp_peer_gone(t, m, DIST_E_PEER_LOST, "peer lost: %s left the group (it "
                      "destroyed it)%s%s", dist__cpu_peer_name(t->g, m->peer, nb, sizeof nb),
                      *why ? " after a failure: " : "", why);
}

static void payload_done(dist__tcp *t, tcp_conn *c) {
  c->in_body = false;
  char nb[160];
  switch (c->rh.type) {
  case TCP_F_DATA:
  case TCP_F_BODY: dist__tcp_on_payload_done(t, c); break;
  case TCP_F_ERROR:
    dist__tcp_on_error(t, c, c->rtext ? c->rtext : "(no memory for the message)");
    break;
  case TCP_F_ABORT:
    t->peer_aborts++;
    dist__tcp_peer_gone(t, c, DIST_E_PEER_LOST, "peer lost: %s aborted the group: %s",
                        dist__cpu_peer_name(t->g, c->peer, nb, sizeof nb),
                        c->rtext ? c->rtext : "?");
    break;
  case TCP_F_BYE: /* the text, if any, is the failure that made it leave */
    c->bye = true;
    c->bye_text = c->rtext;
    c->rtext = NULL;
    bye_done(t, c);
    break;
  default: break;
  }
  dist__free(c->rtext);
  c->rtext = NULL;
}

/* EOF or a read error on c. */
static void read_failed(dist__tcp *t, tcp_conn *c, ssize_t k) {
  char nb[160];
  tcp_conn *m = &t->conns[c->peer];
  if (c->lane > 0 && !m->bye && !m->gone)
    dist__tcp_read(t, m); /* a departure says so on lane 0 first: read it */
  if (m->gone)
    return;
  if (m->bye) { /* the end of a lane of a peer that said BYE */
    c->eof = true;
    if (c->lane > 0)
      bye_done(t, m);
    return;
  }
  dist__cpu_peer_name(t->g, c->peer, nb, sizeof nb);
  if (k == 0)
    dist__tcp_peer_ended(t, c, "peer lost: %s closed its connection (the process exited or "
                         "crashed)", nb);
  else
    dist__tcp_peer_ended(t, c, "peer lost: reading from %s failed: %s", nb, strerror(errno));
}

/* Moves staged bytes into the payload; true when the payload is complete. */
static bool drain_staged(tcp_conn *c) {
  size_t avail = c->rend - c->rpos;
  size_t k = avail < c->rleft ? avail : c->rleft;
  if (k) {
    if (c->rdst) {
      memcpy(c->rdst, c->rbuf + c->rpos, k);
      c->rdst += k;
    }
    c->rpos += k;
    c->rleft -= k;
  }
  return c->rleft == 0;
}

/* Where the next recv on c goes: straight into the payload's destination
 * (NULL dst with *trunc: dropped in the kernel), or the staging buffer. */
static uint8_t *recv_target(tcp_conn *c, size_t budget, size_t *room, bool *trunc) {
  *trunc = false;
  if (c->in_body && c->rleft >= TCP_DIRECT_MIN) {
    *room = c->rleft < budget ? c->rleft : budget;
    *trunc = c->rdst == NULL; /* TCP's MSG_TRUNC discards without a copy */
    return c->rdst;
  }
  /* Less than a header is staged (or nothing): keep it at the front. */
  size_t keep = c->rend - c->rpos;
  if (c->rpos > 0)
    memmove(c->rbuf, c->rbuf + c->rpos, keep);
  c->rpos = 0;
  c->rend = keep;
  *room = TCP_RFILL;
  return c->rbuf + keep;
}

/* One recv on c; > 0 bytes moved, 0 nothing available, < 0 the connection
 * failed (handled). */
static ssize_t recv_once(dist__tcp *t, tcp_conn *c, size_t budget) {
  size_t room;
  bool trunc;
  uint8_t *dst = recv_target(c, budget, &room, &trunc);
  bool direct = c->in_body && c->rleft >= TCP_DIRECT_MIN; /* as recv_target chose */
  ssize_t k;
  do
    k = recv(c->fd, dst, room, MSG_DONTWAIT | (trunc ? MSG_TRUNC : 0));
  while (k < 0 && errno == EINTR);
  if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
    return 0;
  if (k <= 0) {
    read_failed(t, c, k);
    return -1;
  }
  if (!direct) {
    c->rend += (size_t)k;
    return k;
  }
  if (c->rdst)
    c->rdst += k;
  c->rleft -= (size_t)k;
  if (c->rleft == 0)
    payload_done(t, c);
  return k;
}

bool dist__tcp_read(dist__tcp *t, tcp_conn *c) {
  bool moved = false;
  size_t budget = t->io_chunk;
  while (!c->gone && budget > 0) {
    if (c->in_body) {
      if (drain_staged(c)) {
        payload_done(t, c);
        continue;
      }
    } else if (c->rend - c->rpos >= sizeof(tcp_hdr)) {
      memcpy(&c->rh, c->rbuf + c->rpos, sizeof c->rh);
      c->rpos += sizeof c->rh;
      on_header(t, c);
      continue;
    }
    ssize_t k = recv_once(t, c, budget);
    if (k < 0)
      return true;
    if (k == 0)
      break;
    moved = true;
    budget = (size_t)k < budget ? budget - (size_t)k : 0;
  }
  return moved;
}
