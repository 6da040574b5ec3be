/* store_tcp_proto.h - the TCP store's framed wire protocol, and the server's
 * internal interface.
 *
 * After the token exchange of auth.h (role "store"), both directions carry
 * frames: a 16-byte header, then len bytes of body.
 *
 *   magic u32 "DSTP" | version u8 | op u8 | flags u8 | status u8 |
 *   seq u32 | len u32                                   (little-endian)
 *
 * Requests carry an op below; a reply carries op | STP_REPLY, the request's
 * seq and a status (DIST_OK or a DIST_E_* code, then the body is a message
 * string). Body fields: u32, i64, and byte strings (u32 length, the bytes,
 * then a NUL that is not counted, so keys are usable in place; a key holds
 * no NUL and is at most DIST_STORE_MAX_KEY bytes, a value at most
 * DIST_STORE_MAX_VALUE). The header is checked (magic, version, op, len <=
 * STP_MAX_BODY) before anything is allocated for the body.
 *
 *   op            request body                        reply body
 *   SET           key val              (NOREPLY ok)   -
 *   GET           timeout key                         val
 *   ADD           key i64                             i64
 *   APPEND        key val                             -
 *   CHECK         n key*                              u32 (1: all present)
 *   COMPARE_SET   key expected desired                val
 *   DELETE        key                                 u32 (1: existed)
 *   MULTI_GET     timeout n key*                      val*
 *   MULTI_SET     n (key val)*                        -
 *   NUM_KEYS      -                                   i64
 *   WAIT          timeout n key*                      -
 *   QUEUE_PUSH    key val                             -
 *   QUEUE_POP     timeout(-1: don't block) key        val
 *   QUEUE_LEN     key                                 i64
 *   JOIN          -   (a worker arrived)              i64 workers so far
 *   WAIT_WORKERS  timeout n(u32)                      i64 workers
 *   PING          -                                   -
 * timeout is an i64 in ms; the server parks a blocking request until it can
 * answer or the timeout passes (DIST_E_TIMEOUT naming the missing keys).
 * With STP_F_NOREPLY the server answers only a failure, which the client
 * reports on its next call. */
#ifndef DIST_STORE_TCP_PROTO_H
#define DIST_STORE_TCP_PROTO_H

#include <dist/store.h>

#include "base/dist_int.h"

#define STP_MAGIC 0x50545344u /* "DSTP" on the wire */
#define STP_VERSION 1
#define STP_HDR 16
#define STP_MAX_BODY (DIST_STORE_MAX_VALUE + (1u << 20))
#define STP_F_NOREPLY 1u
#define STP_REPLY 0x80u

enum stp_op {
  STP_SET = 1,
  STP_GET,
  STP_ADD,
  STP_APPEND,
  STP_CHECK,
  STP_COMPARE_SET,
  STP_DELETE,
  STP_MULTI_GET,
  STP_MULTI_SET,
  STP_NUM_KEYS,
  STP_WAIT,
  STP_QUEUE_PUSH,
  STP_QUEUE_POP,
  STP_QUEUE_LEN,
  STP_JOIN,
  STP_WAIT_WORKERS,
  STP_PING,
  STP_OP_END_
};

typedef struct stp_hdr {
  uint8_t op, flags, status;
  uint32_t seq, len;
} stp_hdr;

/* "GET", "SET", ... ("op 42" for unknown ones, in a static buffer). */
const char *dist__stp_op_name(unsigned op);

void dist__stp_hdr_encode(uint8_t out[STP_HDR], const stp_hdr *h);
/* DIST_OK, or DIST_E_INVAL with the reason in why: bad magic, version,
 * op (a reply when want_reply, a request otherwise) or length. */
int dist__stp_hdr_decode(const uint8_t in[STP_HDR], bool want_reply, stp_hdr *h,
                         char *why, size_t whylen);

/* A growable byte buffer for building frames. An allocation failure sets
 * oom and later puts do nothing, so a builder is checked once at the end. */
typedef struct stp_buf {
  uint8_t *p;
  size_t len, cap;
  bool oom;
} stp_buf;

void dist__stp_buf_free(stp_buf *b);
bool dist__stp_reserve(stp_buf *b, size_t extra);
/* Starts a frame; returns its offset for dist__stp_end. */
size_t dist__stp_begin(stp_buf *b, unsigned op, unsigned flags, unsigned status,
                       uint32_t seq);
/* Writes the body length into the frame started at off. */
void dist__stp_end(stp_buf *b, size_t off);
void dist__stp_put_u32(stp_buf *b, uint32_t v);
void dist__stp_put_i64(stp_buf *b, int64_t v);
void dist__stp_put_bytes(stp_buf *b, const void *p, size_t n);
static inline void dist__stp_put_str(stp_buf *b, const char *s) {
  dist__stp_put_bytes(b, s, strlen(s));
}

/* A bounds-checked reader over one body. The first failure leaves its
 * reason in err and makes every later get fail. */
typedef struct stp_rd {
  const uint8_t *p;
  size_t len, off;
  const char *err;
} stp_rd;

bool dist__stp_get_u32(stp_rd *r, uint32_t *v);
bool dist__stp_get_i64(stp_rd *r, int64_t *v);
/* A byte string of at most max bytes; *p points into the body and p[n] is
 * the NUL the sender added. */
bool dist__stp_get_bytes(stp_rd *r, size_t max, const uint8_t **p, size_t *n);
/* A key: at most DIST_STORE_MAX_KEY bytes and no NUL inside. */
bool dist__stp_get_key(stp_rd *r, const char **key);
/* true when the whole body was consumed (else err = "trailing bytes"). */
bool dist__stp_done(stp_rd *r);

/* --- the server (store_tcp_server.c) ------------------------------------- */

typedef struct stp_server stp_server;

/* The time a new connection gets to prove the job's token, whatever the
 * store's own timeout (DIST_STORE_HANDSHAKE_MS, default
 * DIST_STORE_AUTH_TIMEOUT_MS): the exchange is two short messages, so
 * this only bounds how long a connection that never answers holds a
 * descriptor. */
#define DIST_STORE_AUTH_TIMEOUT_MS 10000
int64_t dist__stp_handshake_ms(void);
/* How many connections may wait in the token exchange at once by default:
 * an eighth of the descriptor limit (RLIMIT_NOFILE), between 8 and 256. */
size_t dist__stp_default_max_auth(void);

typedef struct stp_server_opts {
  const char *host;        /* NULL: loopback, or every address when !loopback_only */
  uint16_t port;           /* 0: a free port */
  bool loopback_only;
  const char *token;       /* "" or NULL: no authentication */
  int64_t auth_timeout_ms; /* a connection must prove the token by then
                              (<= 0: dist__stp_handshake_ms()) */
  int listen_fd;           /* > 0: serve on this listening socket (the
                              server owns it from then on, on success or
                              failure); host, port, loopback_only unused */
  size_t max_auth;         /* connections waiting in the token exchange at
                              once (0: dist__stp_default_max_auth()) */
  bool local_secret;       /* no token given: make one and keep it in the
                              local secret file for this port (auth.h), so
                              only this user's processes on this host get
                              in */
} stp_server_opts;

/* Listens and starts the event-loop thread ("dist-store"). */
int dist__stp_server_start(const stp_server_opts *o, stp_server **out, dist__errbuf *e);
uint16_t dist__stp_server_port(const stp_server *srv);
/* Stops the loop, joins its thread, closes every connection. NULL ok. */
void dist__stp_server_stop(stp_server *srv);

/* The server of a TCP store being created with o (store_tcp_tenant.c):
 * started on o's host:port or its master_listen_fd, or, for multi_tenant,
 * the process's server on that port with one more reference. *shared tells
 * dist__stp_release how to let it go; own_host receives where this
 * process's own client connects. Errors go to the thread's message. */
int dist__stp_acquire(const dist_store_tcp_opts *o, int64_t timeout_ms, stp_server **srv,
                      bool *shared, char *own_host, size_t hostlen);
/* Stops srv, or drops a reference to a shared one (the last stops it). */
void dist__stp_release(stp_server *srv, bool shared);

/* Busy-poll budgets in microseconds (DIST_STORE_SPIN_US for the client's
 * wait for a reply, DIST_STORE_SERVER_SPIN_US for the server loop after
 * activity); read once. */
int64_t dist__stp_client_spin_us(void);
int64_t dist__stp_server_spin_us(void);

#endif
