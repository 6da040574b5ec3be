/* store_tcp_server.c - the TCP store's server: one event-loop thread.
 *
 * DESIGN. One thread ("dist-store") runs epoll over the listening socket,
 * an eventfd (stop) and every connection; sockets are non-blocking and each
 * connection is a small state machine: AUTH (the challenge of auth.h is
 * sent, the answer awaited until auth_timeout) then READY (frames of
 * store_tcp_proto.h). The handshake has its own deadline (a few seconds,
 * whatever the job's timeout) and at most max_auth connections wait in it
 * at once: past that, the oldest is dropped, so connections that never
 * answer cannot pile up until the process runs out of descriptors. Drops
 * of silent handshakes are logged a few at a time and then counted. A connection that fails the token exchange, sends a
 * malformed, unknown or oversized frame, or dies mid-frame is logged at
 * WARNING with its address and the reason, and closed; the others never
 * notice. Frame headers are checked before the body is buffered, and the
 * input buffer grows only as bytes actually arrive.
 *
 * Blocking requests (GET, MULTI_GET, WAIT, QUEUE_POP, WAIT_WORKERS) that
 * cannot be answered at once are parked: a store_kv waiter watches the
 * missing keys, and the request is answered when they appear or with
 * DIST_E_TIMEOUT (naming the missing keys) at its deadline. While a request
 * of a connection is parked, its later frames wait (replies stay in order)
 * and only hang-ups are watched on the socket.
 *
 * Latency: a blocking wake-up costs tens of microseconds on virtual
 * machines, so after any activity the loop polls epoll without sleeping
 * for a bounded time (DIST_STORE_SERVER_SPIN_US) before it blocks again.
 *
 * Connections closed inside a handler are only marked dead and freed at
 * the end of the loop iteration, so no handler up the stack touches freed
 * memory. */
#include <inttypes.h>
#include <pthread.h>
#include <openssl/crypto.h>
#include <sched.h>
#include <stdio.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "net/auth.h"
#include "net/net.h"
#include "store_int.h"
#include "store_kv.h"
#include "store_tcp_proto.h"

#define IN_FIRST (16u << 10)
#define BUF_KEEP (1u << 20) /* buffers above this shrink once drained */
#define OUT_HIGH (8u << 20) /* stop reading from a peer that does not read */
#define MAX_EVENTS 64
#define ACCEPT_PAUSE_MS 100
#define DROP_WARN_WINDOW_MS 10000 /* at most DROP_WARN_MAX warnings per window */
#define DROP_WARN_MAX 3

enum { C_AUTH, C_READY };

typedef struct parked parked;

typedef struct conn {
  struct conn *prev, *next, *dead_next;
  int fd;
  int state;
  bool dead;
  uint32_t events; /* epoll interest now registered */
  char peer[80];
  uint8_t nonce[DIST_AUTH_NONCE_LEN];
  int64_t auth_deadline_ms;
  uint8_t *in;
  size_t inlen, incap;
  stp_buf out;
  size_t outoff;
  parked *park;
} conn;

struct parked {
  parked *prev, *next, *ready_next;
  bool on_ready;
  stp_server *srv;
  conn *c;
  stp_hdr h;
  int64_t timeout_ms, deadline_ms;
  uint8_t *body;      /* copy of the request body; keys point into it */
  const char **keys;
  size_t n;
  uint32_t workers;   /* WAIT_WORKERS target */
  dist__kv_waiter w;
};

struct stp_server {
  int lfd, ep, wakefd;
  uint16_t port;
  char *token;
  char secret_path[600]; /* the local secret's file, "" when none */
  int64_t auth_timeout_ms, spin_ns;
  pthread_t thr;
  _Atomic bool stop;
  dist__kv *kv;
  conn *conns, *dead;
  size_t nauth; /* connections still in C_AUTH */
  size_t max_auth; /* at most this many in C_AUTH (the oldest is dropped) */
  int64_t drop_window_ms; /* rate limit of handshake-drop warnings */
  unsigned drop_warned, drop_quiet;
  parked *parked, *ready, *ready_tail;
  int64_t joins;
  int64_t accept_paused_until;
  uint64_t requests[STP_OP_END_]; /* by operation (the loop's own): said at stop */
};

static void process_input(stp_server *srv, conn *c);

/* --- connections --------------------------------------------------------------- */

static void set_interest(stp_server *srv, conn *c) {
  if (c->dead)
    return;
  size_t pending = c->out.len - c->outoff;
  uint32_t want = EPOLLRDHUP | (pending ? EPOLLOUT : 0);
  if (!c->park && pending < OUT_HIGH)
    want |= EPOLLIN;
  if (want == c->events)
    return;
  struct epoll_event ev = {.events = want, .data.ptr = c};
  if (epoll_ctl(srv->ep, EPOLL_CTL_MOD, c->fd, &ev) == 0)
    c->events = want;
}

static void unpark(stp_server *srv, parked *p) {
  if (!p)
    return;
  dist__kv_unwatch(srv->kv, &p->w);
  if (p->on_ready) { /* rare: dropped between its wake-up and its answer */
    parked *prev = NULL;
    for (parked *q = srv->ready; q; prev = q, q = q->ready_next)
      if (q == p) {
        if (prev)
          prev->ready_next = q->ready_next;
        else
          srv->ready = q->ready_next;
        if (srv->ready_tail == p)
          srv->ready_tail = prev;
        break;
      }
  }
  if (p->prev)
    p->prev->next = p->next;
  else
    srv->parked = p->next;
  if (p->next)
    p->next->prev = p->prev;
  p->c->park = NULL;
  dist__free(p->keys);
  dist__free(p->body);
  dist__free(p);
}

/* Closes c now and frees it at the end of the loop iteration. */
static void drop(stp_server *srv, conn *c, bool warn, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void drop(stp_server *srv, conn *c, bool warn, const char *fmt, ...) {
  if (c->dead)
    return;
  char why[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(why, sizeof why, fmt, ap);
  va_end(ap);
  /* A client that misbehaves is a warning; one that went away (a rank that
   * exited or was killed: its launcher reports that) is only information. */
  if (warn)
    DIST_LOG(WARNING, STORE, "store server: dropping connection from %s: %s", c->peer, why);
  else
    DIST_LOG(INFO, STORE, "store server: %s: %s", c->peer, why);
  unpark(srv, c->park);
  if (c->state == C_AUTH)
    srv->nauth--;
  epoll_ctl(srv->ep, EPOLL_CTL_DEL, c->fd, NULL);
  close(c->fd);
  c->fd = -1;
  c->dead = true;
  if (c->prev)
    c->prev->next = c->next;
  else
    srv->conns = c->next;
  if (c->next)
    c->next->prev = c->prev;
  c->dead_next = srv->dead;
  srv->dead = c;
}

static void free_dead(stp_server *srv) {
  while (srv->dead) {
    conn *c = srv->dead;
    srv->dead = c->dead_next;
    dist__free(c->in);
    dist__stp_buf_free(&c->out);
    dist__free(c);
  }
}

/* Sends what is pending; keeps the rest for EPOLLOUT. */
static void flush(stp_server *srv, conn *c) {
  if (c->dead)
    return;
  if (c->out.oom) {
    drop(srv, c, true, "out of memory building a reply");
    return;
  }
  while (c->outoff < c->out.len) {
    ssize_t n = send(c->fd, c->out.p + c->outoff, c->out.len - c->outoff,
                     MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      c->outoff += (size_t)n;
      continue;
    }
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
      break;
    /* A reader that went away (EPIPE, ECONNRESET: a rank that exited as
     * its job ended) is information, as a hang-up is (on_event). */
    bool gone = n < 0 && (errno == EPIPE || errno == ECONNRESET);
    drop(srv, c, (c->park || c->inlen) && !gone, "send failed: %s",
         n < 0 ? strerror(errno) : "closed");
    return;
  }
  if (c->outoff == c->out.len) {
    c->out.len = c->outoff = 0;
    if (c->out.cap > BUF_KEEP)
      dist__stp_buf_free(&c->out);
  }
  bool was_blocked = !(c->events & EPOLLIN);
  set_interest(srv, c);
  /* Reading resumed after back-pressure: frames may already be buffered. */
  if (was_blocked && (c->events & EPOLLIN) && c->inlen)
    process_input(srv, c);
}

/* Drops a connection that did not finish the handshake: a warning for the
 * first few in a window of DROP_WARN_WINDOW_MS, then a count, so a flood of
 * idle connections cannot flood the log too. */
static void drop_handshake(stp_server *srv, conn *c, const char *why) {
  int64_t now = dist__now_ms();
  if (now >= srv->drop_window_ms) {
    if (srv->drop_quiet)
      DIST_LOG(WARNING, STORE, "store server: dropped %u more connections that did not "
               "complete the token exchange", srv->drop_quiet);
    srv->drop_window_ms = now + DROP_WARN_WINDOW_MS;
    srv->drop_warned = srv->drop_quiet = 0;
  }
  bool warn = srv->drop_warned < DROP_WARN_MAX;
  if (warn)
    srv->drop_warned++;
  else
    srv->drop_quiet++;
  drop(srv, c, warn, "%s%s", why, warn && srv->drop_warned == DROP_WARN_MAX
                                      ? " (further drops in the next 10 s are counted)" : "");
}

/* At the cap of pending handshakes: the oldest one makes room. */
static void make_auth_room(stp_server *srv) {
  if (srv->nauth < srv->max_auth)
    return;
  conn *oldest = NULL;
  for (conn *c = srv->conns; c; c = c->next)
    if (c->state == C_AUTH && (!oldest || c->auth_deadline_ms <= oldest->auth_deadline_ms))
      oldest = c;
  if (oldest) {
    char why[160];
    snprintf(why, sizeof why, "%zu connections were waiting in the token exchange, the "
             "most allowed; dropping the oldest", srv->nauth);
    drop_handshake(srv, oldest, why);
  }
}

static void new_conn(stp_server *srv, int fd) {
  make_auth_room(srv);
  conn *c = dist__calloc(1, sizeof *c);
  uint8_t msg[DIST_AUTH_CHALLENGE_LEN];
  if (!c || dist__auth_challenge(srv->token, c->nonce, msg) != DIST_OK) {
    DIST_LOG(WARNING, STORE, "store server: refusing a connection: out of memory or "
             "no randomness");
    dist__free(c);
    close(fd);
    return;
  }
  c->fd = fd;
  dist__net_set_nodelay(fd);
  dist__net_peer_name(fd, c->peer, sizeof c->peer);
  c->auth_deadline_ms = dist__now_ms() + srv->auth_timeout_ms;
  c->next = srv->conns;
  if (srv->conns)
    srv->conns->prev = c;
  srv->conns = c;
  srv->nauth++;
  c->events = EPOLLIN | EPOLLRDHUP;
  struct epoll_event ev = {.events = c->events, .data.ptr = c};
  if (epoll_ctl(srv->ep, EPOLL_CTL_ADD, fd, &ev) != 0) {
    drop(srv, c, true, "epoll_ctl: %s", strerror(errno));
    return;
  }
  size_t off = c->out.len;
  if (dist__stp_reserve(&c->out, sizeof msg)) {
    memcpy(c->out.p + off, msg, sizeof msg);
    c->out.len += sizeof msg;
  }
  flush(srv, c);
}

static void accept_all(stp_server *srv) {
  for (;;) {
    int fd = accept4(srv->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd >= 0) {
      new_conn(srv, fd);
      continue;
    }
    if (errno == EINTR || errno == ECONNABORTED || errno == EPROTO)
      continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK)
      return;
    /* Out of descriptors or memory: the listening socket stays readable, so
     * stop watching it for a while instead of spinning on it. */
    DIST_LOG(WARNING, STORE, "store server: accept failed (%s); pausing accepts for %d ms",
             strerror(errno), ACCEPT_PAUSE_MS);
    epoll_ctl(srv->ep, EPOLL_CTL_DEL, srv->lfd, NULL);
    srv->accept_paused_until = dist__now_ms() + ACCEPT_PAUSE_MS;
    return;
  }
}

/* --- replies ------------------------------------------------------------------- */

static size_t rbegin(conn *c, const stp_hdr *h, int status) {
  return dist__stp_begin(&c->out, h->op | STP_REPLY, 0, (unsigned)status, h->seq);
}

static void reply_status(conn *c, const stp_hdr *h, int status, const char *msg) {
  size_t off = rbegin(c, h, status);
  if (status != DIST_OK)
    dist__stp_put_str(&c->out, msg);
  dist__stp_end(&c->out, off);
}

static void reply_i64(conn *c, const stp_hdr *h, int64_t v) {
  size_t off = rbegin(c, h, DIST_OK);
  dist__stp_put_i64(&c->out, v);
  dist__stp_end(&c->out, off);
}

/* --- parking ------------------------------------------------------------------- */

/* Called by the engine from inside a mutation: only queue the request. */
static void on_wake(dist__kv_waiter *w) {
  parked *p = w->arg;
  stp_server *srv = p->srv;
  if (p->on_ready)
    return;
  p->on_ready = true;
  p->ready_next = NULL;
  if (srv->ready_tail)
    srv->ready_tail->ready_next = p;
  else
    srv->ready = p;
  srv->ready_tail = p;
}

/* Reads n and n keys; keys point into the body. */
static bool get_keys(stp_rd *r, const char ***keys, size_t *n, bool *oom) {
  uint32_t cnt;
  if (!dist__stp_get_u32(r, &cnt))
    return false;
  /* Each key takes at least 5 bytes (length and NUL): check before the
   * array is allocated, so a lying count cannot make us allocate. */
  if (cnt == 0 || cnt > (r->len - r->off) / 5) {
    r->err = cnt ? "key count larger than the body can hold" : "zero keys";
    return false;
  }
  const char **k = dist__calloc(cnt, sizeof *k);
  if (!k) {
    *oom = true;
    return false;
  }
  for (uint32_t i = 0; i < cnt; i++)
    if (!dist__stp_get_key(r, &k[i])) {
      dist__free(k);
      return false;
    }
  *keys = k;
  *n = cnt;
  return true;
}

/* The blocking request's key list, re-read from a body (ours to keep). */
static bool parse_blocking(const stp_hdr *h, const uint8_t *body, int64_t *timeout,
                           const char ***keys, size_t *n, uint32_t *workers, const char **err,
                           bool *oom) {
  stp_rd r = {body, h->len, 0, NULL};
  *keys = NULL;
  *n = 0;
  bool ok = dist__stp_get_i64(&r, timeout);
  if (h->op == STP_WAIT_WORKERS) {
    ok = ok && dist__stp_get_u32(&r, workers);
  } else if (h->op == STP_GET || h->op == STP_QUEUE_POP) {
    const char *k;
    ok = ok && dist__stp_get_key(&r, &k);
    if (ok && !(*keys = dist__malloc(sizeof **keys)))
      *oom = true;
    if (ok && *keys) {
      (*keys)[0] = k;
      *n = 1;
    }
    ok = ok && *keys;
  } else {
    ok = ok && get_keys(&r, keys, n, oom);
  }
  if (ok && *timeout < 0 && !(h->op == STP_QUEUE_POP && *timeout == -1))
    r.err = "negative timeout";
  ok = ok && !r.err && dist__stp_done(&r);
  if (!ok) {
    dist__free(*keys);
    *keys = NULL;
  }
  *err = r.err;
  return ok;
}

/* Answers a blocking request if it can be answered now. */
static bool try_answer(stp_server *srv, conn *c, const stp_hdr *h, const char **keys,
                       size_t n, int64_t timeout, uint32_t workers) {
  switch (h->op) {
  case STP_WAIT_WORKERS:
    if (srv->joins < workers)
      return false;
    reply_i64(c, h, srv->joins);
    return true;
  case STP_QUEUE_POP: {
    void *v;
    size_t l;
    if (!dist__kv_queue_pop(srv->kv, keys[0], &v, &l)) {
      if (timeout != -1)
        return false;
      char msg[DIST_STORE_MAX_KEY + 64];
      snprintf(msg, sizeof msg, "queue '%s' is empty", keys[0]);
      reply_status(c, h, DIST_E_TIMEOUT, msg);
      return true;
    }
    size_t off = rbegin(c, h, DIST_OK);
    dist__stp_put_bytes(&c->out, v, l);
    dist__stp_end(&c->out, off);
    dist__free(v);
    return true;
  }
  default:
    for (size_t i = 0; i < n; i++)
      if (!dist__kv_has(srv->kv, keys[i]))
        return false;
    size_t off = rbegin(c, h, DIST_OK);
    for (size_t i = 0; h->op != STP_WAIT && i < n; i++) {
      const void *v;
      size_t l;
      dist__kv_get(srv->kv, keys[i], &v, &l);
      dist__stp_put_bytes(&c->out, v, l);
    }
    dist__stp_end(&c->out, off);
    if (c->out.len - off > STP_MAX_BODY + STP_HDR) { /* too big for one frame */
      c->out.len = off;
      reply_status(c, h, DIST_E_INVAL, "multi_get reply exceeds the frame limit");
    }
    return true;
  }
}

/* Registers p's waiter; false when the request became answerable. */
static bool watch(stp_server *srv, parked *p, dist__errbuf *e, int *rc) {
  *rc = DIST_OK;
  p->w.wake = on_wake;
  p->w.arg = p;
  if (p->h.op == STP_WAIT_WORKERS)
    return true; /* JOIN wakes these itself (check_workers) */
  if (p->h.op == STP_QUEUE_POP) {
    *rc = dist__kv_watch_queue(srv->kv, &p->w, p->keys[0], e);
    return *rc == DIST_OK;
  }
  bool registered = false;
  *rc = dist__kv_watch_keys(srv->kv, &p->w, p->keys, p->n, &registered, e);
  return *rc == DIST_OK && registered;
}

static void park(stp_server *srv, conn *c, const stp_hdr *h, const uint8_t *body) {
  parked *p = dist__calloc(1, sizeof *p);
  uint8_t *copy = p ? dist__malloc(h->len ? h->len : 1) : NULL;
  const char *err = NULL;
  bool oom = !copy;
  if (copy) {
    memcpy(copy, body, h->len);
    oom = !parse_blocking(h, copy, &p->timeout_ms, &p->keys, &p->n, &p->workers, &err, &oom);
  }
  if (oom) {
    dist__free(p);
    dist__free(copy);
    reply_status(c, h, DIST_E_NOMEM, "store server out of memory");
    return;
  }
  p->body = copy;
  p->srv = srv;
  p->c = c;
  p->h = *h;
  int64_t t = p->timeout_ms > INT64_MAX / 4 ? INT64_MAX / 4 : p->timeout_ms;
  p->deadline_ms = dist__now_ms() + t;
  p->next = srv->parked;
  if (srv->parked)
    srv->parked->prev = p;
  srv->parked = p;
  c->park = p;
  dist__errbuf e;
  dist__err_clear(&e);
  int rc;
  if (!watch(srv, p, &e, &rc)) {
    if (rc != DIST_OK)
      reply_status(c, h, rc, e.msg);
    else
      try_answer(srv, c, h, p->keys, p->n, p->timeout_ms, p->workers);
    unpark(srv, p);
  }
  set_interest(srv, c);
}

/* Answers a request that was woken, or watches again (a racing delete or
 * pop took what it waited for). */
static void retry_parked(stp_server *srv, parked *p) {
  conn *c = p->c;
  p->on_ready = false;
  dist__kv_unwatch(srv->kv, &p->w);
  if (try_answer(srv, c, &p->h, p->keys, p->n, p->timeout_ms, p->workers)) {
    unpark(srv, p);
    flush(srv, c);
    set_interest(srv, c);
    process_input(srv, c);
    return;
  }
  dist__errbuf e;
  dist__err_clear(&e);
  int rc;
  if (!watch(srv, p, &e, &rc) && rc != DIST_OK) {
    reply_status(c, &p->h, rc, e.msg);
    unpark(srv, p);
    flush(srv, c);
    process_input(srv, c);
  }
}

static void process_ready(stp_server *srv) {
  while (srv->ready) {
    parked *p = srv->ready;
    srv->ready = p->ready_next;
    if (!srv->ready)
      srv->ready_tail = NULL;
    retry_parked(srv, p);
  }
}

static void timeout_reply(stp_server *srv, parked *p) {
  conn *c = p->c;
  dist__errbuf e;
  dist__err_clear(&e);
  if (p->h.op == STP_WAIT_WORKERS) {
    dist__err_set(&e, DIST_E_TIMEOUT, "only %" PRId64 " of %u workers connected to the "
                  "store within %" PRId64 " ms", srv->joins, p->workers, p->timeout_ms);
  } else {
    bool *present = dist__calloc(p->n, sizeof *present);
    for (size_t i = 0; present && p->h.op != STP_QUEUE_POP && i < p->n; i++)
      present[i] = dist__kv_has(srv->kv, p->keys[i]);
    const char *what = p->h.op == STP_GET ? "get" : p->h.op == STP_MULTI_GET ? "multi_get"
                       : p->h.op == STP_WAIT ? "wait" : "queue_pop";
    dist__store_timeout(&e, p->timeout_ms, what, p->keys, p->n, present);
    dist__free(present);
  }
  reply_status(c, &p->h, DIST_E_TIMEOUT, e.msg);
  unpark(srv, p);
  flush(srv, c);
  process_input(srv, c);
}

/* Answers parked requests past their deadline; drops silent handshakes. */
static void expire(stp_server *srv) {
  int64_t now = dist__now_ms();
  for (parked *p = srv->parked, *nx; p; p = nx) {
    nx = p->next;
    if (p->deadline_ms <= now) {
      timeout_reply(srv, p);
      nx = srv->parked; /* the list may have changed under us: rescan */
      now = dist__now_ms();
    }
  }
  char why[96];
  snprintf(why, sizeof why, "did not complete the token exchange within %" PRId64 " ms",
           srv->auth_timeout_ms);
  for (conn *c = srv->conns; c && srv->nauth; c = c->next)
    if (c->state == C_AUTH && c->auth_deadline_ms <= now)
      drop_handshake(srv, c, why);
  if (srv->accept_paused_until && now >= srv->accept_paused_until) {
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &srv->lfd};
    epoll_ctl(srv->ep, EPOLL_CTL_ADD, srv->lfd, &ev);
    srv->accept_paused_until = 0;
  }
}

/* Milliseconds epoll may sleep: until the next deadline, or forever. */
static int next_timeout(stp_server *srv) {
  int64_t next = INT64_MAX;
  for (parked *p = srv->parked; p; p = p->next)
    next = p->deadline_ms < next ? p->deadline_ms : next;
  for (conn *c = srv->conns; c && srv->nauth; c = c->next)
    if (c->state == C_AUTH && c->auth_deadline_ms < next)
      next = c->auth_deadline_ms;
  if (srv->accept_paused_until && srv->accept_paused_until < next)
    next = srv->accept_paused_until;
  if (next == INT64_MAX)
    return -1;
  int64_t left = next - dist__now_ms() + 1;
  return left < 0 ? 0 : left > INT32_MAX ? INT32_MAX : (int)left;
}

/* --- requests ------------------------------------------------------------------ */

/* Wakes WAIT_WORKERS requests whose count was reached. */
static void check_workers(stp_server *srv) {
  for (parked *p = srv->parked; p; p = p->next)
    if (p->h.op == STP_WAIT_WORKERS && srv->joins >= p->workers)
      on_wake(&p->w);
}

/* Applies MULTI_SET after a first pass checked the whole frame. */
static int multi_set(stp_server *srv, const stp_hdr *h, const uint8_t *body, dist__errbuf *e,
                     const char **err) {
  for (int pass = 0; pass < 2; pass++) {
    stp_rd r = {body, h->len, 0, NULL};
    uint32_t n;
    if (!dist__stp_get_u32(&r, &n) || n == 0 || n > h->len / 10) {
      *err = r.err ? r.err : "bad key count";
      return DIST_E_INVAL;
    }
    for (uint32_t i = 0; i < n; i++) {
      const char *k;
      const uint8_t *v;
      size_t l;
      if (!dist__stp_get_key(&r, &k) || !dist__stp_get_bytes(&r, DIST_STORE_MAX_VALUE, &v, &l))
        break;
      if (pass == 1)
        DIST_TRY(dist__kv_set(srv->kv, k, v, l, e));
    }
    if (!dist__stp_done(&r)) {
      *err = r.err;
      return DIST_E_INVAL;
    }
  }
  return DIST_OK;
}

/* Handlers of the requests that never block. Each returns false for a
 * malformed frame (the reason is left in r->err), true once it answered. */
typedef bool (*simple_fn)(stp_server *srv, conn *c, const stp_hdr *h, stp_rd *r);

static bool out_of_memory(conn *c, const stp_hdr *h) {
  reply_status(c, h, DIST_E_NOMEM, "store server out of memory");
  return true;
}

/* SET, APPEND and QUEUE_PUSH: key and value in, nothing out. */
static bool op_write(stp_server *srv, conn *c, const stp_hdr *h, stp_rd *r) {
  const char *k;
  const uint8_t *v;
  size_t l;
  if (!dist__stp_get_key(r, &k) || !dist__stp_get_bytes(r, DIST_STORE_MAX_VALUE, &v, &l) ||
      !dist__stp_done(r))
    return false;
  dist__errbuf e;
  dist__err_clear(&e);
  int rc = h->op == STP_SET      ? dist__kv_set(srv->kv, k, v, l, &e)
           : h->op == STP_APPEND ? dist__kv_append(srv->kv, k, v, l, &e)
                                 : dist__kv_queue_push(srv->kv, k, v, l, &e);
  /* A fire-and-forget request is answered only when it failed. */
  if (rc != DIST_OK || !(h->flags & STP_F_NOREPLY))
    reply_status(c, h, rc, e.msg);
  return true;
}

static bool op_add(stp_server *srv, conn *c, const stp_hdr *h, stp_rd *r) {
  const char *k;
  int64_t x;
  if (!dist__stp_get_key(r, &k) || !dist__stp_get_i64(r, &x) || !dist__stp_done(r))
    return false;
  dist__errbuf e;
  dist__err_clear(&e);
  int rc = dist__kv_add(srv->kv, k, x, &x, &e);
  if (rc == DIST_OK)
    reply_i64(c, h, x);
  else
    reply_status(c, h, rc, e.msg);
  return true;
}

static bool op_check(stp_server *srv, conn *c, const stp_hdr *h, stp_rd *r) {
  const char **keys;
  size_t n, i = 0;
  bool oom = false;
  if (!get_keys(r, &keys, &n, &oom))
    return oom ? out_of_memory(c, h) : false;
  if (!dist__stp_done(r)) {
    dist__free(keys);
    return false;
  }
  while (i < n && dist__kv_has(srv->kv, keys[i]))
    i++;
  dist__free(keys);
  size_t off = rbegin(c, h, DIST_OK);
  dist__stp_put_u32(&c->out, i == n);
  dist__stp_end(&c->out, off);
  return true;
}

static bool op_compare_set(stp_server *srv, conn *c, const stp_hdr *h, stp_rd *r) {
  const char *k;
  const uint8_t *exp, *des;
  const void *res;
  size_t el, dl, rl;
  if (!dist__stp_get_key(r, &k) || !dist__stp_get_bytes(r, DIST_STORE_MAX_VALUE, &exp, &el) ||
      !dist__stp_get_bytes(r, DIST_STORE_MAX_VALUE, &des, &dl) || !dist__stp_done(r))
    return false;
  dist__errbuf e;
  dist__err_clear(&e);
  int rc = dist__kv_compare_set(srv->kv, k, exp, el, des, dl, &res, &rl, &e);
  if (rc != DIST_OK) {
    reply_status(c, h, rc, e.msg);
    return true;
  }
  size_t off = rbegin(c, h, DIST_OK);
  dist__stp_put_bytes(&c->out, res, rl);
  dist__stp_end(&c->out, off);
  return true;
}

static bool op_delete(stp_server *srv, conn *c, const stp_hdr *h, stp_rd *r) {
  const char *k;
  if (!dist__stp_get_key(r, &k) || !dist__stp_done(r))
    return false;
  size_t off = rbegin(c, h, DIST_OK);
  dist__stp_put_u32(&c->out, dist__kv_delete(srv->kv, k));
  dist__stp_end(&c->out, off);
  return true;
}

static bool op_multi_set(stp_server *srv, conn *c, const stp_hdr *h, stp_rd *r) {
  dist__errbuf e;
  dist__err_clear(&e);
  const char *err = NULL;
  int rc = multi_set(srv, h, r->p, &e, &err);
  if (rc == DIST_E_INVAL && err) {
    r->err = err;
    return false;
  }
  reply_status(c, h, rc, e.msg);
  return true;
}

/* NUM_KEYS, JOIN and PING: no body. */
static bool op_no_body(stp_server *srv, conn *c, const stp_hdr *h, stp_rd *r) {
  if (!dist__stp_done(r))
    return false;
  if (h->op == STP_PING) {
    reply_status(c, h, DIST_OK, "");
  } else if (h->op == STP_NUM_KEYS) {
    reply_i64(c, h, dist__kv_num_keys(srv->kv));
  } else {
    reply_i64(c, h, ++srv->joins);
    check_workers(srv);
  }
  return true;
}

static bool op_queue_len(stp_server *srv, conn *c, const stp_hdr *h, stp_rd *r) {
  const char *k;
  if (!dist__stp_get_key(r, &k) || !dist__stp_done(r))
    return false;
  reply_i64(c, h, dist__kv_queue_len(srv->kv, k));
  return true;
}

static const simple_fn simple_ops[STP_OP_END_] = {
    [STP_SET] = op_write,         [STP_APPEND] = op_write,
    [STP_QUEUE_PUSH] = op_write,  [STP_ADD] = op_add,
    [STP_CHECK] = op_check,       [STP_COMPARE_SET] = op_compare_set,
    [STP_DELETE] = op_delete,     [STP_MULTI_SET] = op_multi_set,
    [STP_NUM_KEYS] = op_no_body,  [STP_JOIN] = op_no_body,
    [STP_PING] = op_no_body,      [STP_QUEUE_LEN] = op_queue_len,
};

/* One request frame of a READY connection; may drop c or park it. */
static void handle_frame(stp_server *srv, conn *c, const stp_hdr *h, const uint8_t *body) {
  const char *err = NULL;
  srv->requests[h->op]++; /* the header check bounded h->op */
  switch (h->op) {
  case STP_GET:
  case STP_MULTI_GET:
  case STP_WAIT:
  case STP_QUEUE_POP:
  case STP_WAIT_WORKERS: {
    int64_t timeout;
    const char **keys;
    size_t n;
    uint32_t workers = 0;
    bool oom = false;
    if (!parse_blocking(h, body, &timeout, &keys, &n, &workers, &err, &oom)) {
      if (oom)
        reply_status(c, h, DIST_E_NOMEM, "store server out of memory");
      break;
    }
    bool done = try_answer(srv, c, h, keys, n, timeout, workers);
    dist__free(keys);
    if (!done)
      park(srv, c, h, body);
    return;
  }
  default: {
    stp_rd r = {body, h->len, 0, NULL};
    simple_fn fn = simple_ops[h->op]; /* the header check bounded h->op */
    if (fn && fn(srv, c, h, &r))
      return;
    err = r.err ? r.err : "unexpected request";
  }
  }
  if (err)
    drop(srv, c, true, "malformed %s frame: %s", dist__stp_op_name(h->op), err);
}

static void auth_step(stp_server *srv, conn *c, const uint8_t *msg) {
  dist__errbuf e;
  dist__err_clear(&e);
  uint8_t res[DIST_AUTH_RESULT_LEN];
  int rc = dist__auth_check_answer(srv->token, c->nonce, "store", msg, res, &e);
  size_t off = c->out.len;
  if (dist__stp_reserve(&c->out, sizeof res)) {
    memcpy(c->out.p + off, res, sizeof res);
    c->out.len += sizeof res;
  }
  flush(srv, c); /* the verdict goes out before a refused peer is closed */
  if (rc != DIST_OK) {
    drop_handshake(srv, c, e.msg);
    return;
  }
  c->state = C_READY;
  srv->nauth--;
}

/* Handles every complete frame buffered for c (in order; stops at a park). */
static void process_input(stp_server *srv, conn *c) {
  size_t off = 0;
  while (!c->dead && !c->park) {
    size_t avail = c->inlen - off;
    if (c->state == C_AUTH) {
      if (avail < DIST_AUTH_ANSWER_LEN)
        break;
      auth_step(srv, c, c->in + off);
      off += DIST_AUTH_ANSWER_LEN;
      continue;
    }
    if (avail < STP_HDR)
      break;
    stp_hdr h;
    char why[160];
    if (dist__stp_hdr_decode(c->in + off, false, &h, why, sizeof why) != DIST_OK) {
      drop(srv, c, true, "%s", why);
      return;
    }
    if (avail < STP_HDR + (size_t)h.len)
      break;
    handle_frame(srv, c, &h, c->in + off + STP_HDR);
    off += STP_HDR + h.len;
  }
  if (c->dead)
    return;
  if (off) {
    memmove(c->in, c->in + off, c->inlen - off);
    c->inlen -= off;
  }
  if (c->incap > BUF_KEEP && c->inlen < IN_FIRST) { /* give back a big frame's buffer */
    uint8_t *p = dist__realloc(c->in, IN_FIRST);
    if (p) {
      c->in = p;
      c->incap = IN_FIRST;
    }
  }
  if (c->out.len > c->outoff)
    flush(srv, c);
  else
    set_interest(srv, c);
}

/* Bytes the frame at the head of the buffer needs in all. */
static size_t frame_need(const conn *c) {
  if (c->state == C_AUTH)
    return DIST_AUTH_ANSWER_LEN;
  if (c->inlen < STP_HDR)
    return STP_HDR;
  stp_hdr h;
  char why[160];
  if (dist__stp_hdr_decode(c->in, false, &h, why, sizeof why) != DIST_OK)
    return STP_HDR; /* process_input drops it */
  return STP_HDR + (size_t)h.len;
}

static void on_readable(stp_server *srv, conn *c) {
  if (c->inlen == c->incap) {
    /* Full: grow towards what the current frame needs, at most doubling,
     * so memory follows the bytes that actually arrived. */
    size_t need = frame_need(c), cap = c->incap ? c->incap * 2 : IN_FIRST;
    if (cap > need && need > c->incap)
      cap = need;
    uint8_t *p = dist__realloc(c->in, cap);
    if (!p) {
      drop(srv, c, true, "out of memory buffering a %zu-byte frame", need);
      return;
    }
    c->in = p;
    c->incap = cap;
  }
  ssize_t n = recv(c->fd, c->in + c->inlen, c->incap - c->inlen, 0);
  if (n == 0 && c->state == C_AUTH) {
    drop_handshake(srv, c, "peer closed the connection during the token exchange");
    return;
  }
  if (n == 0) {
    bool mid = c->inlen > 0 || c->state == C_AUTH;
    drop(srv, c, mid, mid ? "peer closed the connection %s" : "peer disconnected%s",
         mid ? (c->state == C_AUTH ? "during the token exchange" : "in the middle of a frame")
             : "");
    return;
  }
  if (n < 0) {
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
      drop(srv, c, errno != ECONNRESET, "receive failed: %s", strerror(errno));
    return;
  }
  c->inlen += (size_t)n;
  process_input(srv, c);
}

static void on_event(stp_server *srv, conn *c, uint32_t ev) {
  if (ev & EPOLLERR) {
    int err = 0;
    socklen_t sl = sizeof err;
    getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &sl);
    drop(srv, c, err != ECONNRESET, "socket error: %s", strerror(err));
    return;
  }
  if (ev & EPOLLOUT)
    flush(srv, c);
  if (!c->dead && (ev & EPOLLIN))
    on_readable(srv, c);
  /* A hang-up while a request is parked: the reader is gone (SIGKILL). */
  else if (!c->dead && (ev & (EPOLLRDHUP | EPOLLHUP)))
    drop(srv, c, false, "peer hung up while its %s request was pending",
         c->park ? dist__stp_op_name(c->park->h.op) : "last");
}

/* --- the loop ------------------------------------------------------------------ */

static void *loop(void *arg) {
  stp_server *srv = arg;
  pthread_setname_np(pthread_self(), "dist-store");
  struct epoll_event evs[MAX_EVENTS];
  int64_t spin_until = 0;
  while (!atomic_load_explicit(&srv->stop, memory_order_acquire)) {
    int timeout = dist__now_ns() < spin_until ? 0 : next_timeout(srv);
    int n = epoll_wait(srv->ep, evs, MAX_EVENTS, timeout);
    if (n == 0 && timeout == 0)
      sched_yield(); /* spinning: let a client on this core run */
    if (n < 0 && errno != EINTR) {
      DIST_LOG(ERROR, STORE, "store server: epoll_wait: %s", strerror(errno));
      dist__sleep_ms(10);
    }
    for (int i = 0; i < n; i++) {
      void *p = evs[i].data.ptr;
      if (p == &srv->lfd) {
        accept_all(srv);
      } else if (p == &srv->wakefd) {
        uint64_t v;
        if (read(srv->wakefd, &v, sizeof v) < 0) {
        }
      } else {
        on_event(srv, p, evs[i].events);
      }
      process_ready(srv);
    }
    if (srv->parked || srv->nauth || srv->accept_paused_until)
      expire(srv);
    free_dead(srv);
    if (n > 0)
      spin_until = dist__now_ns() + srv->spin_ns;
  }
  while (srv->conns)
    drop(srv, srv->conns, false, "server stopping");
  free_dead(srv);
  return NULL;
}

int dist__stp_server_start(const stp_server_opts *o, stp_server **out, dist__errbuf *e) {
  stp_server *srv = dist__calloc(1, sizeof *srv);
  if (!srv) {
    if (o->listen_fd > 0)
      close(o->listen_fd);
    return dist__err_set(e, DIST_E_NOMEM, "out of memory starting the store server");
  }
  srv->lfd = srv->ep = srv->wakefd = -1;
  srv->auth_timeout_ms = o->auth_timeout_ms > 0 ? o->auth_timeout_ms
                                               : dist__stp_handshake_ms();
  srv->max_auth = o->max_auth > 0 ? o->max_auth : dist__stp_default_max_auth();
  srv->spin_ns = dist__stp_server_spin_us() * 1000;
  srv->token = dist__strdup(o->token ? o->token : "");
  if (o->listen_fd > 0) {
    srv->lfd = o->listen_fd; /* ours now, closed on failure too */
    srv->port = o->port;
  }
  int rc = srv->token ? dist__kv_create(&srv->kv) : DIST_E_NOMEM;
  if (rc != DIST_OK) {
    dist__err_set(e, DIST_E_NOMEM, "out of memory starting the store server");
    goto fail;
  }
  if (o->listen_fd <= 0)
    DIST_TRY_GOTO(dist__net_listen(o->host, o->port, o->loopback_only, 1024, &srv->lfd,
                                   &srv->port, e), rc, fail);
  if (*srv->token) /* the port is ours: a secret file for it is a dead store's */
    dist__auth_local_secret_forget(srv->port);
  if (o->local_secret && !*srv->token) {
    /* Before the loop answers anybody: a challenge implies the file is there. */
    char tok[DIST_AUTH_TOKEN_MAX + 1];
    DIST_TRY_GOTO(dist__auth_local_secret_make(srv->port, tok, sizeof tok, srv->secret_path,
                                               sizeof srv->secret_path, e), rc, fail);
    dist__free(srv->token);
    srv->token = dist__strdup(tok);
    OPENSSL_cleanse(tok, sizeof tok);
    if (!srv->token) {
      rc = dist__err_set(e, DIST_E_NOMEM, "out of memory starting the store server");
      goto fail;
    }
  }
  dist__net_set_nonblock(srv->lfd, true);
  srv->ep = epoll_create1(EPOLL_CLOEXEC);
  srv->wakefd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  struct epoll_event l = {.events = EPOLLIN, .data.ptr = &srv->lfd};
  struct epoll_event w = {.events = EPOLLIN, .data.ptr = &srv->wakefd};
  if (srv->ep < 0 || srv->wakefd < 0 || epoll_ctl(srv->ep, EPOLL_CTL_ADD, srv->lfd, &l) ||
      epoll_ctl(srv->ep, EPOLL_CTL_ADD, srv->wakefd, &w)) {
    rc = dist__err_sys(e, errno, "setting up the store server's event loop");
    goto fail;
  }
  rc = pthread_create(&srv->thr, NULL, loop, srv);
  if (rc != 0) {
    rc = dist__err_sys(e, rc, "starting the store server thread");
    goto fail;
  }
  DIST_LOG(INFO, STORE, "store server listening on %s:%u%s", o->listen_fd > 0
           ? "the caller's socket" : o->host ? o->host
           : o->loopback_only ? "loopback" : "every address", srv->port,
           o->token && *o->token ? " (token required)"
           : srv->secret_path[0] ? " (local secret required)" : " (no token)");
  *out = srv;
  return DIST_OK;
fail:
  if (srv->secret_path[0])
    unlink(srv->secret_path);
  if (srv->lfd >= 0)
    close(srv->lfd);
  if (srv->ep >= 0)
    close(srv->ep);
  if (srv->wakefd >= 0)
    close(srv->wakefd);
  dist__kv_destroy(srv->kv);
  dist__free(srv->token);
  dist__free(srv);
  return rc;
}

uint16_t dist__stp_server_port(const stp_server *srv) { return srv ? srv->port : 0; }

/* What the job asked of its store, and the keys it left (INFO): the
 * store's cost at scale (issue 23), measured by bench/store_scale.sh. */
static void say_requests(stp_server *srv) {
  char buf[1024];
  size_t off = 0;
  uint64_t total = 0;
  buf[0] = '\0';
  for (int op = 0; op < STP_OP_END_; op++)
    if (srv->requests[op]) {
      total += srv->requests[op];
      dist__appendf(buf, sizeof buf, &off, "%s%s %llu", off ? ", " : "",
                    dist__stp_op_name((uint8_t)op), (unsigned long long)srv->requests[op]);
    }
  DIST_LOG(INFO, STORE, "store server: %llu requests (%s), %lld keys left",
           (unsigned long long)total, off ? buf : "none", (long long)dist__kv_num_keys(srv->kv));
}

void dist__stp_server_stop(stp_server *srv) {
  if (!srv)
    return;
  atomic_store_explicit(&srv->stop, true, memory_order_release);
  uint64_t one = 1;
  if (write(srv->wakefd, &one, sizeof one) < 0)
    DIST_LOG(ERROR, STORE, "store server: cannot wake the loop: %s", strerror(errno));
  pthread_join(srv->thr, NULL);
  say_requests(srv);
  if (srv->secret_path[0]) /* while the port is still ours: no successor's file */
    unlink(srv->secret_path);
  close(srv->lfd);
  close(srv->ep);
  close(srv->wakefd);
  dist__kv_destroy(srv->kv);
  dist__free(srv->token);
  dist__free(srv);
}
