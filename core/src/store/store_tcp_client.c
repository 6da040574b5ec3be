/* store_tcp_client.c - the TCP store's client handle, and dist_store_tcp_create
 * (which, for is_server, also starts the server and connects to it).
 *
 * Each handle owns one connection and talks to the server synchronously:
 * one request, then its reply (matched by sequence number). set is sent
 * without waiting for a reply, as torch does; the server answers it only on
 * failure, and that failure is reported by the handle's next call that
 * reads a reply. After sending, the client polls the socket without
 * sleeping for a short while (DIST_STORE_SPIN_US) before it blocks, since a
 * reply usually arrives within that time and a blocking wake-up costs more.
 *
 * Deadlines: I/O is bounded by the handle's timeout; a blocking request
 * (get, wait, queue_pop) carries its timeout to the server, which answers
 * by then, and the client gives up a grace period later on its own. A
 * connection that failed (server gone, reply overdue, malformed reply) is
 * closed and every later call fails with DIST_E_CLOSED naming the first
 * failure, never a hang. */
#include <arpa/inet.h>
#include <inttypes.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <sys/socket.h>
#include <unistd.h>

#include "net/auth.h"
#include "net/net.h"
#include "store_int.h"
#include "store_tcp_proto.h"

#define REPLY_GRACE_MS 2000
#define IN_FIRST 4096

typedef struct tcp_client {
  int fd;
  char host[DIST_NET_HOSTLEN];
  uint16_t port;
  char *token;
  stp_server *server; /* owned when this handle hosts the server */
  bool shared;        /* server is a multi-tenant one (a reference) */
  uint32_t seq;
  stp_buf out;
  uint8_t *in;
  size_t inoff, inlen, incap;
  int broken; /* status of the failure that closed the connection */
  char broken_msg[512];
  int pending; /* a failed NOREPLY request, reported by the next call */
  char pending_msg[1024];
  int64_t spin_ns; /* the window (DIST_STORE_SPIN_US) */
  unsigned spin_misses, spin_probe;
} tcp_client;

static const dist__store_ops tcp_ops;

static tcp_client *T(dist_store *s) { return s->impl; }

/* --- the connection ------------------------------------------------------------ */

/* Closes the connection for good; every later call reports why. */
static int fail_conn(dist_store *s, int rc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int fail_conn(dist_store *s, int rc, const char *fmt, ...) {
  tcp_client *c = T(s);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(c->broken_msg, sizeof c->broken_msg, fmt, ap);
  va_end(ap);
  if (c->fd >= 0)
    close(c->fd);
  c->fd = -1;
  c->broken = rc;
  return dist__err_set(&s->err, rc, "%s", c->broken_msg);
}

static int usable(dist_store *s) {
  tcp_client *c = T(s);
  if (c->fd >= 0)
    return DIST_OK;
  return dist__err_set(&s->err, DIST_E_CLOSED, "connection to the store server %s:%u was "
                       "lost earlier: %s", c->host, c->port, c->broken_msg);
}

static int send_out(dist_store *s, int64_t deadline_ms) {
  tcp_client *c = T(s);
  dist__errbuf e;
  dist__err_clear(&e);
  int rc = dist__net_write_all(c->fd, c->out.p, c->out.len, deadline_ms, &e);
  c->out.len = 0;
  if (rc != DIST_OK)
    return fail_conn(s, rc == DIST_E_TIMEOUT ? rc : DIST_E_CLOSED,
                     "sending to the store server %s:%u: %s", c->host, c->port, e.msg);
  return DIST_OK;
}

/* Busy-polling pays only when the reply comes within the window: with more
 * runnable processes than cores the spinner steals the server's CPU and the
 * reply comes later. So after SPIN_MISSES replies in a row missed the window
 * the client stops spinning, probing once every SPIN_PROBE calls; a hit
 * restores it. (A lone miss is usually preemption noise.) */
#define SPIN_MISSES 4
#define SPIN_PROBE 64
#define SPIN_CROWDED_NS 20000

static int64_t spin_window(tcp_client *c) {
  if (c->spin_misses < SPIN_MISSES || (++c->spin_probe % SPIN_PROBE) == 0)
    return c->spin_ns;
  return 0;
}

static void spin_result(tcp_client *c, int64_t window, bool hit) {
  if (window == 0)
    return;
  c->spin_misses = hit ? 0 : c->spin_misses + 1;
}

/* One recv into the buffer: busy-polls first, then sleeps in poll(). */
static int recv_some(dist_store *s, int64_t deadline_ms, bool *spun) {
  tcp_client *c = T(s);
  int64_t window = *spun ? 0 : spin_window(c);
  int64_t spin_end = window ? dist__now_ns() + window : 0;
  bool crowded = false;
  for (;;) {
    ssize_t n = recv(c->fd, c->in + c->inlen, c->incap - c->inlen, MSG_DONTWAIT);
    if (n > 0) {
      c->inlen += (size_t)n;
      if (!*spun)
        spin_result(c, window, !crowded);
      *spun = true; /* later reads of this reply do not spin again */
      return DIST_OK;
    }
    if (n == 0)
      return fail_conn(s, DIST_E_CLOSED, "the store server %s:%u closed the connection "
                       "(did it exit?)", c->host, c->port);
    if (errno == EINTR)
      continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK)
      return fail_conn(s, DIST_E_CLOSED, "receiving from the store server %s:%u: %s",
                       c->host, c->port, strerror(errno));
    if (spin_end && dist__now_ns() < spin_end) {
      /* If the server shares this core, let it run: spinning past it would
       * delay the very reply we wait for by the whole window. A yield that
       * ran someone else for a while means the cores are oversubscribed,
       * where spinning only adds to the queue: count it as a miss. */
      int64_t t = dist__now_ns();
      sched_yield();
      if (dist__now_ns() - t > SPIN_CROWDED_NS)
        crowded = true;
      continue;
    }
    if (!*spun)
      spin_result(c, window, false);
    *spun = true;
    int64_t left = dist__remaining_ms(deadline_ms);
    struct pollfd p = {c->fd, POLLIN, 0};
    int r = poll(&p, 1, left > INT32_MAX ? INT32_MAX : (int)left);
    if (r == 0 && dist__now_ms() >= deadline_ms)
      return fail_conn(s, DIST_E_TIMEOUT, "no reply from the store server %s:%u before the "
                       "deadline", c->host, c->port);
  }
}

/* Makes need bytes available at c->in + c->inoff. */
static int fill(dist_store *s, size_t need, int64_t deadline_ms, bool *spun) {
  tcp_client *c = T(s);
  if (c->inlen - c->inoff >= need)
    return DIST_OK;
  if (c->inoff) {
    memmove(c->in, c->in + c->inoff, c->inlen - c->inoff);
    c->inlen -= c->inoff;
    c->inoff = 0;
  }
  if (c->incap < need) {
    size_t cap = c->incap ? c->incap : IN_FIRST;
    while (cap < need)
      cap *= 2;
    uint8_t *p = dist__realloc(c->in, cap);
    if (!p)
      return fail_conn(s, DIST_E_NOMEM, "out of memory for a %zu-byte reply", need);
    c->in = p;
    c->incap = cap;
  }
  while (c->inlen < need)
    DIST_TRY(recv_some(s, deadline_ms, spun));
  return DIST_OK;
}

/* Reads the next reply frame; *body stays valid until the next read. */
static int read_frame(dist_store *s, int64_t deadline_ms, stp_hdr *h, const uint8_t **body) {
  tcp_client *c = T(s);
  bool spun = false;
  DIST_TRY(fill(s, STP_HDR, deadline_ms, &spun));
  char why[160];
  if (dist__stp_hdr_decode(c->in + c->inoff, true, h, why, sizeof why) != DIST_OK)
    return fail_conn(s, DIST_E_STORE, "malformed reply from the store server %s:%u: %s",
                     c->host, c->port, why);
  DIST_TRY(fill(s, STP_HDR + (size_t)h->len, deadline_ms, &spun));
  *body = c->in + c->inoff + STP_HDR;
  c->inoff += STP_HDR + h->len;
  return DIST_OK;
}

/* The message of an error reply. */
static void error_text(const stp_hdr *h, const uint8_t *body, char *out, size_t len) {
  stp_rd r = {body, h->len, 0, NULL};
  const uint8_t *m;
  size_t n;
  if (dist__stp_get_bytes(&r, DIST_STORE_MAX_VALUE, &m, &n))
    snprintf(out, len, "%.*s", (int)n, (const char *)m);
  else
    snprintf(out, len, "store server reported %s", dist_status_name(h->status));
}

/* --- requests ------------------------------------------------------------------ */

static size_t req_begin(tcp_client *c, unsigned op, unsigned flags) {
  c->out.len = 0;
  return dist__stp_begin(&c->out, op, flags, 0, ++c->seq);
}

/* Sends the request started at off without waiting (NOREPLY). */
static int post(dist_store *s, size_t off) {
  tcp_client *c = T(s);
  dist__stp_end(&c->out, off);
  if (c->out.oom) {
    dist__stp_buf_free(&c->out);
    return dist__err_set(&s->err, DIST_E_NOMEM, "out of memory building a request");
  }
  DIST_TRY(usable(s));
  return send_out(s, dist__deadline_ms(s->timeout_ms));
}

/* Sends the request started at off and reads its reply into *rd. wait_ms
 * >= 0 marks a request the server may park that long. */
static int rpc(dist_store *s, size_t off, int64_t wait_ms, stp_rd *rd) {
  tcp_client *c = T(s);
  uint8_t op = c->out.p ? c->out.p[off + 5] : 0;
  DIST_TRY(post(s, off));
  int64_t dl = wait_ms >= 0 ? dist__deadline_ms(wait_ms + REPLY_GRACE_MS)
                            : dist__deadline_ms(s->timeout_ms);
  for (;;) {
    stp_hdr h;
    const uint8_t *body = NULL;
    DIST_TRY(read_frame(s, dl, &h, &body));
    if (h.seq != c->seq) {
      /* A failed fire-and-forget request: remember the first one. */
      if (h.status != DIST_OK && !c->pending) {
        c->pending = h.status;
        error_text(&h, body, c->pending_msg, sizeof c->pending_msg);
      }
      continue;
    }
    if ((h.op & ~STP_REPLY) != op)
      return fail_conn(s, DIST_E_STORE, "store server %s:%u answered %s to a %s request",
                       c->host, c->port, dist__stp_op_name(h.op), dist__stp_op_name(op));
    if (c->pending) {
      int rc = c->pending;
      c->pending = 0;
      return dist__err_set(&s->err, rc, "an earlier set failed: %s", c->pending_msg);
    }
    if (h.status != DIST_OK) {
      char msg[DIST_ERRMSG_LEN];
      error_text(&h, body, msg, sizeof msg);
      return dist__err_set(&s->err, h.status, "%s", msg);
    }
    *rd = (stp_rd){body, h.len, 0, NULL};
    return DIST_OK;
  }
}

/* A reply body that does not parse: the stream cannot be trusted. */
static int bad_reply(dist_store *s, const stp_rd *rd) {
  return fail_conn(s, DIST_E_STORE, "malformed reply from the store server %s:%u: %s",
                   T(s)->host, T(s)->port, rd->err ? rd->err : "trailing bytes");
}

static int reply_i64(dist_store *s, size_t off, int64_t *v) {
  stp_rd rd;
  DIST_TRY(rpc(s, off, -1, &rd));
  if (!dist__stp_get_i64(&rd, v) || !dist__stp_done(&rd))
    return bad_reply(s, &rd);
  return DIST_OK;
}

static int reply_u32(dist_store *s, size_t off, uint32_t *v) {
  stp_rd rd;
  DIST_TRY(rpc(s, off, -1, &rd));
  if (!dist__stp_get_u32(&rd, v) || !dist__stp_done(&rd))
    return bad_reply(s, &rd);
  return DIST_OK;
}

static int reply_value(dist_store *s, size_t off, int64_t wait_ms, void **val, size_t *len) {
  stp_rd rd;
  DIST_TRY(rpc(s, off, wait_ms, &rd));
  const uint8_t *v;
  if (!dist__stp_get_bytes(&rd, DIST_STORE_MAX_VALUE, &v, len) || !dist__stp_done(&rd))
    return bad_reply(s, &rd);
  return dist__store_dup_value(&s->err, v, *len, val);
}

static void put_keys(stp_buf *b, const char *const *keys, size_t n) {
  dist__stp_put_u32(b, (uint32_t)n);
  for (size_t i = 0; i < n; i++)
    dist__stp_put_str(b, keys[i]);
}

/* --- ops ----------------------------------------------------------------------- */

static int t_set(dist_store *s, const char *key, const void *val, size_t len) {
  size_t off = req_begin(T(s), STP_SET, STP_F_NOREPLY);
  dist__stp_put_str(&T(s)->out, key);
  dist__stp_put_bytes(&T(s)->out, val, len);
  return post(s, off);
}

static int t_get(dist_store *s, const char *key, int64_t timeout_ms, void **val,
                 size_t *len) {
  size_t off = req_begin(T(s), STP_GET, 0);
  dist__stp_put_i64(&T(s)->out, timeout_ms);
  dist__stp_put_str(&T(s)->out, key);
  return reply_value(s, off, timeout_ms, val, len);
}

static int t_add(dist_store *s, const char *key, int64_t delta, int64_t *result) {
  size_t off = req_begin(T(s), STP_ADD, 0);
  dist__stp_put_str(&T(s)->out, key);
  dist__stp_put_i64(&T(s)->out, delta);
  return reply_i64(s, off, result);
}

static int t_push_like(dist_store *s, unsigned op, const char *key, const void *val,
                       size_t len) {
  size_t off = req_begin(T(s), op, 0);
  dist__stp_put_str(&T(s)->out, key);
  dist__stp_put_bytes(&T(s)->out, val, len);
  stp_rd rd;
  DIST_TRY(rpc(s, off, -1, &rd));
  return dist__stp_done(&rd) ? DIST_OK : bad_reply(s, &rd);
}

static int t_append(dist_store *s, const char *key, const void *val, size_t len) {
  return t_push_like(s, STP_APPEND, key, val, len);
}

static int t_queue_push(dist_store *s, const char *key, const void *val, size_t len) {
  return t_push_like(s, STP_QUEUE_PUSH, key, val, len);
}

static int t_check(dist_store *s, const char *const *keys, size_t n, bool *all) {
  size_t off = req_begin(T(s), STP_CHECK, 0);
  put_keys(&T(s)->out, keys, n);
  uint32_t v;
  DIST_TRY(reply_u32(s, off, &v));
  *all = v != 0;
  return DIST_OK;
}

static int t_compare_set(dist_store *s, const char *key, const void *exp, size_t elen,
                         const void *des, size_t dlen, void **res, size_t *rlen) {
  size_t off = req_begin(T(s), STP_COMPARE_SET, 0);
  dist__stp_put_str(&T(s)->out, key);
  dist__stp_put_bytes(&T(s)->out, exp, elen);
  dist__stp_put_bytes(&T(s)->out, des, dlen);
  return reply_value(s, off, -1, res, rlen);
}

static int t_delete_key(dist_store *s, const char *key, bool *deleted) {
  size_t off = req_begin(T(s), STP_DELETE, 0);
  dist__stp_put_str(&T(s)->out, key);
  uint32_t v;
  DIST_TRY(reply_u32(s, off, &v));
  *deleted = v != 0;
  return DIST_OK;
}

static int t_multi_get(dist_store *s, const char *const *keys, size_t n, int64_t timeout_ms,
                       void **vals, size_t *lens) {
  size_t off = req_begin(T(s), STP_MULTI_GET, 0);
  dist__stp_put_i64(&T(s)->out, timeout_ms);
  put_keys(&T(s)->out, keys, n);
  stp_rd rd;
  DIST_TRY(rpc(s, off, timeout_ms, &rd));
  int rc = DIST_OK;
  for (size_t i = 0; i < n && rc == DIST_OK; i++) {
    const uint8_t *v;
    if (!dist__stp_get_bytes(&rd, DIST_STORE_MAX_VALUE, &v, &lens[i]))
      rc = bad_reply(s, &rd);
    else
      rc = dist__store_dup_value(&s->err, v, lens[i], &vals[i]);
  }
  if (rc == DIST_OK && !dist__stp_done(&rd))
    rc = bad_reply(s, &rd);
  if (rc != DIST_OK)
    for (size_t i = 0; i < n; i++) {
      dist__free(vals[i]);
      vals[i] = NULL;
    }
  return rc;
}

static int t_multi_set(dist_store *s, const char *const *keys, const void *const *vals,
                       const size_t *lens, size_t n) {
  size_t off = req_begin(T(s), STP_MULTI_SET, 0);
  dist__stp_put_u32(&T(s)->out, (uint32_t)n);
  for (size_t i = 0; i < n; i++) {
    dist__stp_put_str(&T(s)->out, keys[i]);
    dist__stp_put_bytes(&T(s)->out, vals[i], lens[i]);
  }
  if (T(s)->out.len - off - STP_HDR > STP_MAX_BODY) {
    T(s)->out.len = 0;
    return dist__err_set(&s->err, DIST_E_INVAL, "multi_set of %zu keys exceeds the frame "
                         "limit of %u bytes; split it", n, STP_MAX_BODY);
  }
  stp_rd rd;
  DIST_TRY(rpc(s, off, -1, &rd));
  return dist__stp_done(&rd) ? DIST_OK : bad_reply(s, &rd);
}

static int t_num_keys(dist_store *s, int64_t *n) {
  return reply_i64(s, req_begin(T(s), STP_NUM_KEYS, 0), n);
}

static int t_wait(dist_store *s, const char *const *keys, size_t n, int64_t timeout_ms) {
  size_t off = req_begin(T(s), STP_WAIT, 0);
  dist__stp_put_i64(&T(s)->out, timeout_ms);
  put_keys(&T(s)->out, keys, n);
  stp_rd rd;
  DIST_TRY(rpc(s, off, timeout_ms, &rd));
  return dist__stp_done(&rd) ? DIST_OK : bad_reply(s, &rd);
}

static int t_queue_pop(dist_store *s, const char *key, bool block, int64_t timeout_ms,
                       void **val, size_t *len) {
  size_t off = req_begin(T(s), STP_QUEUE_POP, 0);
  dist__stp_put_i64(&T(s)->out, block ? timeout_ms : -1);
  dist__stp_put_str(&T(s)->out, key);
  return reply_value(s, off, block ? timeout_ms : -1, val, len);
}

static int t_queue_len(dist_store *s, const char *key, int64_t *len) {
  size_t off = req_begin(T(s), STP_QUEUE_LEN, 0);
  dist__stp_put_str(&T(s)->out, key);
  return reply_i64(s, off, len);
}

/* --- lifecycle ----------------------------------------------------------------- */

static void free_client(tcp_client *c) {
  if (c->fd >= 0)
    close(c->fd);
  dist__stp_release(c->server, c->shared);
  dist__stp_buf_free(&c->out);
  dist__free(c->in);
  dist__free(c->token);
  dist__free(c);
}

static void t_destroy(dist_store *s) { free_client(T(s)); }

static uint16_t t_port(const dist_store *s) { return ((const tcp_client *)s->impl)->port; }

const char *dist_store_tcp_host(const dist_store *s) {
  return s && s->ops == &tcp_ops ? ((const tcp_client *)s->impl)->host : NULL;
}

/* Connects and answers the server's challenge. A server that closed
 * before its verdict stopped waiting for the answer (its handshake deadline
 * passed while this process or the server was starved of CPU, or it shed
 * the oldest pending handshake): a fresh connection is tried, with the
 * backoff of a refused connect, until the deadline. */
static int connect_and_prove(tcp_client *c, int64_t dl, dist__errbuf *e) {
  for (int64_t backoff = 10;; backoff = backoff * 2 > 1000 ? 1000 : backoff * 2) {
    DIST_TRY(dist__net_connect(c->host, c->port, dl, &c->fd, e));
    int rc = dist__auth_connect(c->fd, c->token, "store", dl, e);
    int64_t left = dist__remaining_ms(dl);
    if (rc != DIST_E_CLOSED || left == 0)
      return rc;
    DIST_LOG(DEBUG, STORE, "%s:%u: %s; connecting again", c->host, c->port, e->msg);
    close(c->fd);
    c->fd = -1;
    dist__sleep_ms(backoff < left ? backoff : left);
  }
}

/* A connected, authenticated handle (no JOIN). */
static int open_client(const char *host, uint16_t port, const char *token,
                       int64_t timeout_ms, dist_store **out, dist__errbuf *e) {
  tcp_client *c = dist__calloc(1, sizeof *c);
  if (!c || !(c->token = dist__strdup(token ? token : ""))) {
    dist__free(c);
    return dist__err_set(e, DIST_E_NOMEM, "out of memory creating a TCP store client");
  }
  c->fd = -1;
  snprintf(c->host, sizeof c->host, "%s", host);
  c->port = port;
  c->spin_ns = dist__stp_client_spin_us() * 1000;
  int rc = connect_and_prove(c, dist__deadline_ms(timeout_ms), e);
  if (rc == DIST_OK)
    rc = dist__store_new(&tcp_ops, c, out);
  if (rc != DIST_OK) {
    free_client(c);
    return rc;
  }
  (*out)->timeout_ms = timeout_ms;
  return DIST_OK;
}

static int t_clone(dist_store *s, dist_store **out) {
  tcp_client *c = T(s);
  return open_client(c->host, c->port, c->token, s->timeout_ms, out, &s->err);
}

static const dist__store_ops tcp_ops = {
    .kind = "tcp",
    .set = t_set,
    .get = t_get,
    .add = t_add,
    .append = t_append,
    .check = t_check,
    .compare_set = t_compare_set,
    .delete_key = t_delete_key,
    .multi_get = t_multi_get,
    .multi_set = t_multi_set,
    .num_keys = t_num_keys,
    .wait = t_wait,
    .queue_push = t_queue_push,
    .queue_pop = t_queue_pop,
    .queue_len = t_queue_len,
    .clone = t_clone,
    .destroy = t_destroy,
    .port = t_port,
};

/* --- creation ------------------------------------------------------------------ */

/* Registers this handle as a worker; the server waits for all of them. */
static int join(dist_store *s, const dist_store_tcp_opts *o) {
  int64_t n;
  DIST_TRY(reply_i64(s, req_begin(T(s), STP_JOIN, 0), &n));
  if (!o->is_server || !o->wait_for_workers || o->world_size <= 0)
    return DIST_OK;
  size_t off = req_begin(T(s), STP_WAIT_WORKERS, 0);
  dist__stp_put_i64(&T(s)->out, s->timeout_ms);
  dist__stp_put_u32(&T(s)->out, (uint32_t)o->world_size);
  stp_rd rd;
  return rpc(s, off, s->timeout_ms, &rd);
}

int dist_store_tcp_create(const dist_store_tcp_opts *o, dist_store **out) {
  if (!out || !o)
    return dist__set_last_error(DIST_E_INVAL, "dist_store_tcp_create: %s is NULL",
                                out ? "opts" : "out");
  *out = NULL;
  if (!o->is_server && (!o->host || !*o->host || o->port == 0))
    return dist__set_last_error(DIST_E_INVAL, "a TCP store client needs the server's host "
                                "and port (got %s:%u)", o->host ? o->host : "(null)",
                                o->port);
  int64_t timeout = o->timeout_ms > 0 ? o->timeout_ms : DIST_STORE_DEFAULT_TIMEOUT_MS;
  if (o->master_listen_fd < 0 || (o->master_listen_fd > 0 && !o->is_server))
    return dist__set_last_error(DIST_E_INVAL, "master_listen_fd %d: %s", o->master_listen_fd,
                                o->master_listen_fd < 0 ? "not a descriptor (0 means none)"
                                                        : "only a server listens");
  stp_server *srv = NULL;
  bool shared = false;
  uint16_t port = o->port;
  char host[DIST_NET_HOSTLEN];
  snprintf(host, sizeof host, "%s", o->host ? o->host : "");
  if (o->is_server) {
    DIST_TRY(dist__stp_acquire(o, timeout, &srv, &shared, host, sizeof host));
    port = dist__stp_server_port(srv);
  }
  dist__errbuf e;
  dist__err_clear(&e);
  int rc = open_client(host, port, o->token, timeout, out, &e);
  if (rc != DIST_OK) {
    dist__stp_release(srv, shared);
    return dist__set_last_error(rc, "%s", e.msg);
  }
  T(*out)->server = srv;
  T(*out)->shared = shared;
  rc = join(*out, o);
  if (rc != DIST_OK) {
    dist__set_last_error(rc, "%s", (*out)->err.msg);
    dist_store_destroy(*out);
    *out = NULL;
  }
  return rc;
}
