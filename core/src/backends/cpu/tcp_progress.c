/* tcp_progress.c - driving the TCP engine: sweeps over the connections,
 * waits, abort, lost peers and timeouts.
 *
 * DESIGN (threads). There is no engine thread. Whichever thread waits
 * drives progress: under t->mu it becomes the driver (t->driving) and
 * sweeps every connection, writing what is queued and reading what has
 * arrived, so the two directions of every connection keep moving (two
 * peers that both send large messages never block each other, unlike
 * Gloo's busy-poll mode). While nothing moves, the driver spins on
 * non-blocking reads for t->spin_ns (DIST_TCP_SPIN_US, default 50 us): a
 * reply that comes within that window costs a few microseconds instead of
 * a blocking wake-up (~30 us on a virtual machine). Then it blocks in
 * poll() on every socket plus an eventfd, with t->mu released and the
 * deadline as timeout. Other threads that wait meanwhile sleep on t->cv
 * and are woken when requests complete or the driver leaves; a thread that
 * queues a frame while the driver sits in poll(), and dist__tcp_abort,
 * write the eventfd. Every connection is read on every sweep, so a peer's
 * EOF, reset, ABORT or ERROR frame is seen by every rank that waits on
 * anything, not only by the ranks that were talking to it. */
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "tcp_int.h"

#define PENDING (-1)
#define POLL_SLICE_MS 100 /* re-check state set from outside (broken, abort) */

void dist__tcp_wake(dist__tcp *t) {
  uint64_t one = 1;
  ssize_t w = write(t->wakefd, &one, sizeof one);
  (void)w; /* a full counter already means "wake up" */
}

static void drain_wakefd(dist__tcp *t) {
  uint64_t v;
  ssize_t r = read(t->wakefd, &v, sizeof v);
  (void)r;
}

/* Fails the requests that need peer p (already marked gone), and a
 * receive from any source once p was the last member that could send it;
 * returns how many. */
static int fail_peer_reqs(dist__tcp *t, int p, int rc, const char *msg) {
  int failed = 0;
  bool none_left = dist__tcp_no_sender_left(t);
  for (dist__tcp_req *r = t->reqs; r; r = r->next) {
    if (r->state == RQ_DONE)
      continue;
    bool needs = r->peer == p || (!r->is_send && r->src == p &&
                                  (r->state == RQ_RECV_BODYWAIT ||
                                   r->state == RQ_RECV_READING)) ||
                 (none_left && !r->is_send && r->peer < 0 && r->state == RQ_RECV_POSTED);
    if (!needs)
      continue;
    char lb[64], m[DIST_ERRMSG_LEN];
    size_t off = 0;
    dist__appendf(m, sizeof m, &off, "%s: %s", dist__tcp_req_label(r, lb, sizeof lb), msg);
    dist__tcp_cancel(t, r, rc, m);
    failed++;
  }
  return failed;
}

/* One connection of a lost peer: no more traffic; the descriptor stays
 * open until destroy so a poll() in progress elsewhere never sees its
 * number reused. */
static void conn_gone(tcp_conn *c) {
  c->gone = true;
  if (c->fd >= 0)
    shutdown(c->fd, SHUT_RDWR);
  dist__tcp_free_queue(c);
  if (c->rumsg) {
    dist__free(c->rumsg->data);
    dist__free(c->rumsg);
    c->rumsg = NULL;
  }
  c->rreq = NULL;
  c->in_body = false;
}

/* This rank found member `gone` lost (t->mu held): the other members hear
 * it first from here (TCP_F_ERROR, root = gone), before this rank fails
 * and exits, so none of them takes this rank's end, which it may see
 * before gone's, for the cause (relayed_loss). */
static void tell_lost(dist__tcp *t, int gone, const char *msg) {
  tcp_hdr h;
  dist__tcp_hdr_init(&h, TCP_F_ERROR, DIST_TCP_CTX_COLL, 0);
  h.count = DIST_E_PEER_LOST;
  h.root = gone;
  /* (a member never connected to this rank cannot take its end for the
   * cause: it will not see it) */
  for (int p = 0; p < t->g->size; p++)
    if (p != t->g->rank && p != gone && !t->conns[p].gone && t->conns[p].fd >= 0) {
      dist__tcp_send_ctrl(t, &t->conns[p], &h, msg);
      dist__tcp_flush(t, &t->conns[p]);
    }
}

/* Member p is lost (t->mu held): the warning, the observers (through the
 * group's on_peer_lost: DIST_EV_PEER_LOST, which the monitor follows), the
 * first lost peer that later waits fail with, the other members
 * (tell_lost) and the group, broken. */
static void report_lost(dist__tcp *t, int p, int rc, const char *msg) {
  DIST_LOG(WARNING, TCP, "group %s: %s", t->g->name, msg);
  dist__cpu_peer_lost(t->g, p, msg);
  if (t->lost_rc == DIST_OK) {
    t->lost_peer = p;
    t->lost_rc = rc;
    snprintf(t->lost_msg, sizeof t->lost_msg, "%s", msg);
    if (rc == DIST_E_PEER_LOST) /* not "no memory for its message": it lives */
      tell_lost(t, p, msg);
  }
  dist__cpu_mark_broken(t->g, rc, msg);
}

void dist__tcp_peer_gone(dist__tcp *t, tcp_conn *c, int rc, const char *fmt, ...) {
  c = &t->conns[c->peer]; /* a peer is lost with all its sockets at once */
  if (c->gone)
    return;
  char msg[DIST_ERRMSG_LEN];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  for (int i = 0; i < c->nlanes; i++)
    dist__tcp_lane(t, c->peer, i)->gone = true;
  /* After a first loss, a member that ends next most likely failed of it:
   * what waited for it fails naming that first cause. */
  bool after = t->lost_rc != DIST_OK && t->lost_peer != c->peer;
  int failed = fail_peer_reqs(t, c->peer, after ? t->lost_rc : rc, after ? t->lost_msg : msg);
  for (int i = 0; i < c->nlanes; i++)
    conn_gone(dist__tcp_lane(t, c->peer, i));
  t->completed = true;
  if (t->closing)
    return;
  /* A clean departure only matters to what still needed the peer (later
   * requests to it fail at once); a crash, or a departure that cut an
   * exchange short, leaves the group out of step. */
  if (c->bye && failed == 0) {
    DIST_LOG(INFO, TCP, "group %s: %s", t->g->name, msg);
    return;
  }
  report_lost(t, c->peer, rc, msg);
}

/* Whether anything here needs member p (t->mu held): a request to or from
 * it, a receive from any source (p may be the sender it waits for), or a
 * collective running on this engine or queued on the group (a collective
 * needs every member). */
static bool needs_peer(const dist__tcp *t, int p) {
  if (t->coll_active || atomic_load_explicit(&t->g->colls_queued, memory_order_acquire) > 0)
    return true;
  for (const dist__tcp_req *r = t->reqs; r; r = r->next)
    if (r->state != RQ_DONE &&
        (r->peer == p || (r->peer < 0 && (r->state == RQ_RECV_POSTED || r->src == p))))
      return true;
  return false;
}

/* A rank that returns from main without destroying its groups is done, not
 * lost: its process says so (EXIT, from exit()) before the kernel closes
 * its sockets, and a member with no business with it notes the end
 * quietly. Its end without EXIT (a crash, a kill, _exit), or while this
 * rank waits on it or runs a collective of the group, stays a lost peer,
 * reported at once. */
void dist__tcp_peer_ended(dist__tcp *t, tcp_conn *c, const char *fmt, ...) {
  c = &t->conns[c->peer];
  if (c->gone)
    return;
  char msg[DIST_ERRMSG_LEN];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (!c->exiting || t->closing || needs_peer(t, c->peer)) {
    dist__tcp_peer_gone(t, c, DIST_E_PEER_LOST, "%s", msg);
    return;
  }
  DIST_LOG(DEBUG, TCP, "group %s: %s, after it said its process was exiting; nothing here "
           "waits for it (the first operation that needs it fails)", t->g->name, msg);
  c->departed = true;
  c->departed_msg = dist__strdup(msg);
  for (int i = 0; i < c->nlanes; i++) {
    dist__tcp_lane(t, c->peer, i)->gone = true;
    conn_gone(dist__tcp_lane(t, c->peer, i));
  }
  t->completed = true;
}

bool dist__tcp_need_departed(dist__tcp *t, int p, char *msg, size_t len) {
  bool any = false;
  int lo = p < 0 ? 0 : p, hi = p < 0 ? t->g->size : p + 1;
  for (int q = lo; q < hi; q++) {
    tcp_conn *c = &t->conns[q];
    if (q == t->g->rank || !c->departed)
      continue;
    c->departed = false; /* reported once; the group is broken from here */
    char nb[160], m[DIST_ERRMSG_LEN];
    if (c->departed_msg)
      snprintf(m, sizeof m, "%s", c->departed_msg);
    else /* no memory kept the text of its end */
      snprintf(m, sizeof m, "peer lost: %s closed its connection (the process exited)",
               dist__cpu_peer_name(t->g, q, nb, sizeof nb));
    if (!any && msg && len)
      snprintf(msg, len, "%s", m);
    any = true;
    report_lost(t, q, DIST_E_PEER_LOST, m);
  }
  return any;
}

/* A member that lost rank `gone` says so (tell_lost; text is what it saw)
 * before it fails and exits: gone becomes this rank's first lost peer too
 * (unless it already had one), so what fails here names it, whichever
 * connection this rank sees end first; the sender's own end, next, is a
 * consequence. */
static void relayed_loss(dist__tcp *t, int gone, const char *text, const char *sender) {
  char msg[DIST_ERRMSG_LEN];
  snprintf(msg, sizeof msg, "%s\n  seen by %s", text, sender);
  dist__cpu_peer_lost(t->g, gone, msg);
  if (t->lost_rc == DIST_OK) {
    t->lost_peer = gone;
    t->lost_rc = DIST_E_PEER_LOST;
    snprintf(t->lost_msg, sizeof t->lost_msg, "%s", msg);
  }
  dist__cpu_mark_broken(t->g, DIST_E_PEER_LOST, msg);
}

void dist__tcp_on_error(dist__tcp *t, tcp_conn *c, const char *text) {
  uint64_t seq = (uint64_t)c->rh.tag;
  int rc = (int)c->rh.count;
  if (rc <= DIST_OK || rc >= DIST_STATUS_COUNT_)
    rc = DIST_E_BACKEND;
  char nb[160];
  dist__cpu_peer_name(t->g, c->peer, nb, sizeof nb);
  t->completed = true;
  int gone = (int)c->rh.root;
  if (rc == DIST_E_PEER_LOST && gone >= 0 && gone < t->g->size && gone != t->g->rank &&
      gone != c->peer) {
    relayed_loss(t, gone, text, nb);
    return;
  }
  if (seq == t->failed_seq && seq != 0)
    return; /* it failed here too: the ranks agree */
  if (seq < t->coll_seq || (seq == t->coll_seq && !t->coll_active)) {
    /* A collective this rank already finished: the ranks are out of step. */
    char m[DIST_ERRMSG_LEN];
    snprintf(m, sizeof m, "%s reported a failure of a collective this rank completed: %s",
             nb, text);
    dist__cpu_mark_broken(t->g, rc, m);
    return;
  }
  if (t->err_rc != DIST_OK && t->err_seq <= seq && t->err_seq >= t->coll_seq)
    return; /* an earlier report for this or an earlier pending collective */
  t->err_rc = rc;
  t->err_seq = seq;
  /* The origin is named once (status.h): a disagreement reads the same on
   * every rank; anything else gets one "seen by" line, which a report
   * relayed twice already has. */
  const char *body = strstr(text, ": "); /* after "<OP> #<seq>" */
  if (body && !strncmp(body + 2, "ranks disagree on ", 18))
    snprintf(t->err_msg, sizeof t->err_msg, "%s", body + 2);
  else if (strstr(text, "\n  seen by "))
    snprintf(t->err_msg, sizeof t->err_msg, "%s", text);
  else
    snprintf(t->err_msg, sizeof t->err_msg, "%s\n  seen by %s", text, nb);
}

void dist__tcp_handle_abort(dist__tcp *t) {
  if (!atomic_load_explicit(&t->aborted, memory_order_acquire) || t->abort_handled)
    return;
  t->abort_handled = true;
  tcp_hdr h;
  dist__tcp_hdr_init(&h, TCP_F_ABORT, 0, 0);
  size_t rl = strnlen(t->abort_reason, sizeof t->abort_reason);
  h.len = h.size = rl;
  for (int p = 0; p < t->g->size; p++) {
    tcp_conn *c = &t->conns[p];
    if (p == t->g->rank || c->gone)
      continue;
    /* Tell the peer unless a half-written frame makes the stream unusable;
     * best effort, never blocking. */
    if (!(c->sq && c->sq->off > 0)) {
      struct iovec iov[2] = {{&h, sizeof h}, {t->abort_reason, rl}};
      struct msghdr m = {.msg_iov = iov, .msg_iovlen = 2};
      ssize_t w = sendmsg(c->fd, &m, MSG_NOSIGNAL | MSG_DONTWAIT);
      (void)w;
    }
    for (int i = 0; i < c->nlanes; i++) {
      tcp_conn *l = dist__tcp_lane(t, p, i);
      l->gone = true;
      shutdown(l->fd, SHUT_WR);
    }
  }
  char m[DIST_ERRMSG_LEN];
  for (dist__tcp_req *r = t->reqs; r; r = r->next) {
    char lb[64];
    snprintf(m, sizeof m, "%s: group %s was aborted: %s",
             dist__tcp_req_label(r, lb, sizeof lb), t->g->name, t->abort_reason);
    dist__tcp_cancel(t, r, DIST_E_ABORTED, m);
  }
  for (int p = 0; p < t->g->size; p++)
    for (int i = 0; p != t->g->rank && i < t->conns[p].nlanes; i++)
      dist__tcp_free_queue(dist__tcp_lane(t, p, i));
  t->completed = true;
}

void dist__tcp_abort(dist__tcp *t, const char *reason) {
  if (!t)
    return;
  int expected = 0;
  if (!atomic_compare_exchange_strong(&t->abort_claimed, &expected, 1))
    return;
  snprintf(t->abort_reason, sizeof t->abort_reason, "%s", reason ? reason : "aborted");
  atomic_store_explicit(&t->aborted, 1, memory_order_release);
  dist__tcp_wake(t);
  /* Never block: when the lock is busy its holder handles the abort on its
   * next round (every loop checks the flag). */
  if (pthread_mutex_trylock(&t->mu) == 0) {
    dist__tcp_handle_abort(t);
    pthread_cond_broadcast(&t->cv);
    pthread_mutex_unlock(&t->mu);
  }
}

static bool sweep_conn(dist__tcp *t, tcp_conn *c) {
  bool moved = false;
  if (dist__tcp_flush_due(c, false))
    moved |= dist__tcp_flush(t, c);
  bool got = dist__tcp_lane_live(t, c) && dist__tcp_read(t, c);
  moved |= got;
  /* ACK/CTS the reads queued; lazy ACKs once the connection is idle */
  if (!c->gone && dist__tcp_flush_due(c, !got))
    moved |= dist__tcp_flush(t, c);
  return moved;
}

/* Lane 0 of a peer first: it says BYE before the peer closes the others. */
bool dist__tcp_sweep(dist__tcp *t) {
  bool moved = false;
  if (dist__tcp_lazy_pending(t)) /* peers that connected since */
    dist__tcp_lazy_install(t);
  for (int p = 0; p < t->g->size; p++)
    for (int i = 0; p != t->g->rank && i < t->conns[p].nlanes; i++) {
      tcp_conn *c = dist__tcp_lane(t, p, i);
      if (c->fd >= 0 && !c->gone && !c->eof)
        moved |= sweep_conn(t, c);
    }
  dist__tcp_handle_abort(t);
  return moved;
}

/* Blocks in poll() on every connection and the eventfd, t->mu released. */
static void block_poll(dist__tcp *t, int64_t deadline_ms) {
  int n = 0;
  t->pfds[n++] = (struct pollfd){t->wakefd, POLLIN, 0};
  for (int p = 0; p < t->g->size; p++)
    for (int i = 0; p != t->g->rank && i < t->conns[p].nlanes; i++) {
      tcp_conn *c = dist__tcp_lane(t, p, i);
      short ev = (short)((dist__tcp_lane_live(t, c) ? POLLIN : 0) | (c->sq ? POLLOUT : 0));
      if (c->fd >= 0 && !c->gone && !c->eof && ev)
        t->pfds[n++] = (struct pollfd){c->fd, ev, 0};
    }
  int64_t left = dist__remaining_ms(deadline_ms);
  int ms = left > POLL_SLICE_MS ? POLL_SLICE_MS : (int)left;
  t->in_poll = true;
  pthread_mutex_unlock(&t->mu);
  int k = poll(t->pfds, (nfds_t)n, ms);
  pthread_mutex_lock(&t->mu);
  t->in_poll = false;
  if (k > 0 && (t->pfds[0].revents & POLLIN))
    drain_wakefd(t);
}

/* Wakes the threads sleeping on t->cv when there is news for them. */
static void notify(dist__tcp *t, bool leaving) {
  if (t->nwaiters > 0 && (t->completed || leaving))
    pthread_cond_broadcast(&t->cv);
  t->completed = false;
}

static void cv_wait(dist__tcp *t, int64_t deadline_ms) {
  int64_t until = dist__now_ms() + POLL_SLICE_MS;
  if (until > deadline_ms)
    until = deadline_ms;
  struct timespec ts = {until / 1000, (long)(until % 1000) * 1000000L};
  t->nwaiters++;
  pthread_cond_timedwait(&t->cv, &t->mu, &ts);
  t->nwaiters--;
}

/* --- waiting ------------------------------------------------------------------ */

/* DIST_OK when every request is done, PENDING, or the failure. */
static int wait_check(dist__tcp *t, dist__tcp_req *const *reqs, int n, dist__errbuf *err,
                      const tcp_wait_ctx *w) {
  dist__tcp_handle_abort(t);
  char lb[64]; /* formatted only on failure: this runs on every spin */
#define LABEL()                                                                       \
  (w && w->coll ? dist__cpu_op_label(w->coll, lb, sizeof lb)                         \
                : dist__tcp_req_label(reqs[0], lb, sizeof lb))
  /* A peer's report fails the collective even when this rank's own part
   * is complete: every rank that takes part fails. */
  if (w && w->coll && t->err_rc != DIST_OK && t->err_seq == t->coll_seq)
    return dist__err_set(err, t->err_rc, "%s: %s", LABEL(), t->err_msg);
  bool all = true;
  for (int i = 0; i < n; i++) {
    const dist__tcp_req *r = reqs[i];
    if (r->state == RQ_SEND_ACKWAIT && w && w->written)
      continue;
    if (r->state != RQ_DONE)
      all = false;
    else if (r->rc != DIST_OK)
      return dist__err_set(err, r->rc, "%s", r->msg ? r->msg : "request failed");
  }
  if (all)
    return DIST_OK;
  if (t->lost_rc != DIST_OK)
    return dist__err_set(err, t->lost_rc, "%s: %s", LABEL(), t->lost_msg);
#undef LABEL
  int rc = dist__cpu_check_state(t->g, err);
  return rc == DIST_OK ? PENDING : rc;
}

static int timed_out(dist__tcp *t, dist__tcp_req *const *reqs, int n, dist__errbuf *err,
                     const tcp_wait_ctx *w) {
  char lb[64], peers[1024];
  size_t off = 0;
  peers[0] = '\0';
  for (int i = 0; i < n; i++) {
    const dist__tcp_req *r = reqs[i];
    if (r->state == RQ_DONE)
      continue;
    int p = r->peer >= 0 ? r->peer : r->src;
    bool dup = false; /* name each peer once */
    for (int j = 0; j < i && !dup; j++)
      dup = reqs[j]->state != RQ_DONE &&
            (reqs[j]->peer >= 0 ? reqs[j]->peer : reqs[j]->src) == p;
    if (dup)
      continue;
    char nb[160];
    const char *what = r->is_send ? (r->state == RQ_SEND_QUEUED ? "still sending"
                                                                : "not yet received")
                                  : (r->state == RQ_RECV_POSTED ? "nothing arrived"
                                                                : "message incomplete");
    dist__appendf(peers, sizeof peers, &off, "%s%s (%s)", off ? ", " : "",
                  p >= 0 ? dist__cpu_peer_name(t->g, p, nb, sizeof nb) : "any rank", what);
  }
  const char *label = w && w->coll ? dist__cpu_op_label(w->coll, lb, sizeof lb)
                                   : dist__tcp_req_label(reqs[0], lb, sizeof lb);
  long long tmo = w && w->coll ? (long long)w->coll->timeout_ms : -1;
  if (tmo >= 0)
    return dist__err_set(err, DIST_E_TIMEOUT, "%s timed out after %lld ms in group %s "
                         "waiting for %s", label, tmo, t->g->name, peers);
  return dist__err_set(err, DIST_E_TIMEOUT, "%s timed out in group %s waiting for %s", label,
                       t->g->name, peers);
}

/* When a wait ends, the lazy ACKs its sweeps queued go out (what the
 * sockets take now). A sweep that read the message that ends the wait is
 * not idle, so it leaves its ACK queued; a rank that then works on another
 * engine (a hierarchical group's other stage, another group) would hold
 * it until it came back here, while the root of that broadcast waits for
 * it before its next collective of another kind: the two waited for each
 * other until the timeout (core_hier's 4 x 2 suite, once in a while: its
 * all_to_all runs on the group's own mesh, its scatter on the leaders'
 * engine). The same after a progress round or a test. */
static void flush_held_acks(dist__tcp *t) {
  if (!t->lazy_held)
    return;
  t->lazy_held = false;
  for (int p = 0; p < t->g->size; p++) {
    tcp_conn *c = &t->conns[p]; /* lane 0 carries every control frame */
    if (p != t->g->rank && c->fd >= 0 && c->sq && !c->gone && !c->eof)
      dist__tcp_flush(t, c);
  }
}

int dist__tcp_wait_locked(dist__tcp *t, dist__tcp_req *const *reqs, int n,
                          int64_t deadline_ms, dist__errbuf *err, const tcp_wait_ctx *w) {
  int64_t spin_until = dist__now_ns() + t->spin_ns;
  bool driving = false;
  int rc;
  for (;;) {
    rc = wait_check(t, reqs, n, err, w);
    if (rc != PENDING)
      break;
    if (dist__now_ms() >= deadline_ms) {
      rc = timed_out(t, reqs, n, err, w);
      break;
    }
    if (!driving && t->driving) {
      if (t->in_poll)
        dist__tcp_wake(t); /* a background driver yields to a waiter */
      cv_wait(t, deadline_ms);
      continue;
    }
    driving = t->driving = true;
    if (dist__tcp_sweep(t)) {
      spin_until = dist__now_ns() + t->spin_ns;
    } else if (dist__now_ns() >= spin_until) {
      block_poll(t, deadline_ms);
    } else {
      /* Spinning: give the core away if anyone else wants it (a thread
       * waiting for the lock, or, with more ranks than cores, the very
       * peer this rank waits for); costs a syscall when nobody does. */
      pthread_mutex_unlock(&t->mu);
      sched_yield();
      pthread_mutex_lock(&t->mu);
    }
    notify(t, false);
  }
  flush_held_acks(t);
  if (driving)
    t->driving = false;
  notify(t, driving);
  return rc;
}

int dist__tcp_wait(dist__tcp *t, dist__tcp_req *const *reqs, int n, int64_t deadline_ms,
                   dist__errbuf *err) {
  if (!t || n < 0 || (n > 0 && !reqs))
    return dist__err_set(err, DIST_E_INVAL, "tcp wait: bad arguments");
  for (int i = 0; i < n; i++)
    if (!reqs[i])
      return dist__err_set(err, DIST_E_INVAL, "tcp wait: request %d is NULL", i);
  if (n == 0)
    return DIST_OK;
  pthread_mutex_lock(&t->mu);
  int rc = dist__tcp_wait_locked(t, reqs, n, deadline_ms, err, NULL);
  pthread_mutex_unlock(&t->mu);
  return rc;
}

bool dist__tcp_test(dist__tcp *t, dist__tcp_req *req) {
  if (!t || !req)
    return false;
  pthread_mutex_lock(&t->mu);
  if (req->state != RQ_DONE && !t->driving) {
    t->driving = true;
    dist__tcp_sweep(t);
    flush_held_acks(t);
    t->driving = false;
    notify(t, true);
  }
  dist__tcp_handle_abort(t);
  bool done = req->state == RQ_DONE;
  pthread_mutex_unlock(&t->mu);
  return done;
}

int dist__tcp_progress(dist__tcp *t, int64_t wait_ms) {
  if (!t)
    return DIST_E_INVAL;
  pthread_mutex_lock(&t->mu);
  if (t->driving) {
    /* Someone else drives: sleep until news (or wait_ms), so a progress
     * thread that loops on this call does not spin next to the driver. */
    if (wait_ms > 0)
      cv_wait(t, dist__now_ms() + wait_ms);
    pthread_mutex_unlock(&t->mu);
    return atomic_load(&t->aborted) ? DIST_E_ABORTED : DIST_OK;
  }
  t->driving = true;
  bool moved = dist__tcp_sweep(t);
  if (!moved && wait_ms > 0 && t->nwaiters == 0) {
    block_poll(t, dist__now_ms() + wait_ms);
    dist__tcp_sweep(t);
  }
  flush_held_acks(t);
  t->driving = false;
  notify(t, true);
  int rc = atomic_load(&t->aborted) ? DIST_E_ABORTED : DIST_OK;
  pthread_mutex_unlock(&t->mu);
  return rc;
}

