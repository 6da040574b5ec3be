/* store_tcp_proto.c - encoding and checked decoding of the TCP store's
 * frames (layout in store_tcp_proto.h). Every length read off the wire is
 * checked against what remains of the body and against the store's limits
 * before it is used, so a malformed frame is an error, never an overrun. */
#include "store_tcp_proto.h"

#include <pthread.h>
#include <sys/resource.h>
#include <stdio.h>
#include <stdlib.h>

static const char *const op_names[STP_OP_END_] = {
    [STP_SET] = "SET",           [STP_GET] = "GET",
    [STP_ADD] = "ADD",           [STP_APPEND] = "APPEND",
    [STP_CHECK] = "CHECK",       [STP_COMPARE_SET] = "COMPARE_SET",
    [STP_DELETE] = "DELETE",     [STP_MULTI_GET] = "MULTI_GET",
    [STP_MULTI_SET] = "MULTI_SET", [STP_NUM_KEYS] = "NUM_KEYS",
    [STP_WAIT] = "WAIT",         [STP_QUEUE_PUSH] = "QUEUE_PUSH",
    [STP_QUEUE_POP] = "QUEUE_POP", [STP_QUEUE_LEN] = "QUEUE_LEN",
    [STP_JOIN] = "JOIN",         [STP_WAIT_WORKERS] = "WAIT_WORKERS",
    [STP_PING] = "PING",
};

const char *dist__stp_op_name(unsigned op) {
  static _Thread_local char buf[16];
  unsigned o = op & ~STP_REPLY;
  if (o > 0 && o < STP_OP_END_)
    return op_names[o];
  snprintf(buf, sizeof buf, "op %u", op);
  return buf;
}

static void put32(uint8_t *p, uint32_t v) {
  p[0] = (uint8_t)v;
  p[1] = (uint8_t)(v >> 8);
  p[2] = (uint8_t)(v >> 16);
  p[3] = (uint8_t)(v >> 24);
}

static uint32_t get32(const uint8_t *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

void dist__stp_hdr_encode(uint8_t out[STP_HDR], const stp_hdr *h) {
  put32(out, STP_MAGIC);
  out[4] = STP_VERSION;
  out[5] = h->op;
  out[6] = h->flags;
  out[7] = h->status;
  put32(out + 8, h->seq);
  put32(out + 12, h->len);
}

int dist__stp_hdr_decode(const uint8_t in[STP_HDR], bool want_reply, stp_hdr *h, char *why,
                         size_t whylen) {
  if (get32(in) != STP_MAGIC) {
    snprintf(why, whylen, "bad frame magic 0x%08x", get32(in));
    return DIST_E_INVAL;
  }
  if (in[4] != STP_VERSION) {
    snprintf(why, whylen, "protocol version %u, this side speaks %u", in[4], STP_VERSION);
    return DIST_E_INVAL;
  }
  h->op = in[5];
  h->flags = in[6];
  h->status = in[7];
  h->seq = get32(in + 8);
  h->len = get32(in + 12);
  unsigned op = h->op & ~STP_REPLY;
  if (op == 0 || op >= STP_OP_END_ || !(h->op & STP_REPLY) != !want_reply) {
    snprintf(why, whylen, "unknown %s %s", want_reply ? "reply" : "request",
             dist__stp_op_name(h->op));
    return DIST_E_INVAL;
  }
  if (h->len > STP_MAX_BODY) {
    snprintf(why, whylen, "%s frame of %u bytes exceeds the limit of %u",
             dist__stp_op_name(h->op), h->len, STP_MAX_BODY);
    return DIST_E_INVAL;
  }
  return DIST_OK;
}

/* --- building ---------------------------------------------------------------- */

void dist__stp_buf_free(stp_buf *b) {
  dist__free(b->p);
  memset(b, 0, sizeof *b);
}

bool dist__stp_reserve(stp_buf *b, size_t extra) {
  if (b->oom)
    return false;
  if (b->len + extra <= b->cap)
    return true;
  size_t cap = b->cap ? b->cap : 256;
  while (cap < b->len + extra)
    cap *= 2;
  uint8_t *p = dist__realloc(b->p, cap);
  if (!p) {
    b->oom = true;
    return false;
  }
  b->p = p;
  b->cap = cap;
  return true;
}

size_t dist__stp_begin(stp_buf *b, unsigned op, unsigned flags, unsigned status,
                       uint32_t seq) {
  size_t off = b->len;
  if (!dist__stp_reserve(b, STP_HDR))
    return off;
  stp_hdr h = {(uint8_t)op, (uint8_t)flags, (uint8_t)status, seq, 0};
  dist__stp_hdr_encode(b->p + off, &h);
  b->len += STP_HDR;
  return off;
}

void dist__stp_end(stp_buf *b, size_t off) {
  if (!b->oom)
    put32(b->p + off + 12, (uint32_t)(b->len - off - STP_HDR));
}

void dist__stp_put_u32(stp_buf *b, uint32_t v) {
  if (dist__stp_reserve(b, 4)) {
    put32(b->p + b->len, v);
    b->len += 4;
  }
}

void dist__stp_put_i64(stp_buf *b, int64_t v) {
  dist__stp_put_u32(b, (uint32_t)(uint64_t)v);
  dist__stp_put_u32(b, (uint32_t)((uint64_t)v >> 32));
}

void dist__stp_put_bytes(stp_buf *b, const void *p, size_t n) {
  if (!dist__stp_reserve(b, 4 + n + 1))
    return;
  put32(b->p + b->len, (uint32_t)n);
  if (n)
    memcpy(b->p + b->len + 4, p, n);
  b->p[b->len + 4 + n] = '\0';
  b->len += 4 + n + 1;
}

/* --- reading ----------------------------------------------------------------- */

static bool fail(stp_rd *r, const char *why) {
  if (!r->err)
    r->err = why;
  return false;
}

bool dist__stp_get_u32(stp_rd *r, uint32_t *v) {
  if (r->err)
    return false;
  if (r->len - r->off < 4)
    return fail(r, "body ends inside a field");
  *v = get32(r->p + r->off);
  r->off += 4;
  return true;
}

bool dist__stp_get_i64(stp_rd *r, int64_t *v) {
  uint32_t lo, hi;
  if (!dist__stp_get_u32(r, &lo) || !dist__stp_get_u32(r, &hi))
    return false;
  *v = (int64_t)((uint64_t)hi << 32 | lo);
  return true;
}

bool dist__stp_get_bytes(stp_rd *r, size_t max, const uint8_t **p, size_t *n) {
  uint32_t l;
  if (!dist__stp_get_u32(r, &l))
    return false;
  if (l > max)
    return fail(r, max == DIST_STORE_MAX_KEY ? "key longer than DIST_STORE_MAX_KEY"
                                             : "value longer than DIST_STORE_MAX_VALUE");
  if (r->len - r->off < (size_t)l + 1)
    return fail(r, "string runs past the end of the body");
  if (r->p[r->off + l] != '\0')
    return fail(r, "string is not NUL-terminated");
  *p = r->p + r->off;
  *n = l;
  r->off += (size_t)l + 1;
  return true;
}

bool dist__stp_get_key(stp_rd *r, const char **key) {
  const uint8_t *p;
  size_t n;
  if (!dist__stp_get_bytes(r, DIST_STORE_MAX_KEY, &p, &n))
    return false;
  if (memchr(p, 0, n))
    return fail(r, "key contains a NUL byte");
  *key = (const char *)p;
  return true;
}

bool dist__stp_done(stp_rd *r) {
  if (r->err)
    return false;
  return r->off == r->len ? true : fail(r, "trailing bytes after the last field");
}

#define AUTH_CAP_MIN 8
#define AUTH_CAP_MAX 256

/* --- tunables ---------------------------------------------------------------- */

static int64_t client_spin = -1, server_spin = -1, handshake_ms = -1;
static pthread_once_t spin_once = PTHREAD_ONCE_INIT;

static void read_spin(void) {
  if (dist__env_int("DIST_STORE_SPIN_US", 0, 1000000, 50, &client_spin) != DIST_OK)
    client_spin = 50;
  if (dist__env_int("DIST_STORE_SERVER_SPIN_US", 0, 1000000, 50, &server_spin) != DIST_OK)
    server_spin = 50;
  if (dist__env_int("DIST_STORE_HANDSHAKE_MS", 100, 3600000, DIST_STORE_AUTH_TIMEOUT_MS,
                    &handshake_ms) != DIST_OK)
    handshake_ms = DIST_STORE_AUTH_TIMEOUT_MS;
}

int64_t dist__stp_handshake_ms(void) {
  pthread_once(&spin_once, read_spin);
  return handshake_ms;
}

size_t dist__stp_default_max_auth(void) {
  struct rlimit rl;
  rlim_t n = getrlimit(RLIMIT_NOFILE, &rl) == 0 ? rl.rlim_cur : 1024;
  if (n == RLIM_INFINITY || n / 8 > AUTH_CAP_MAX)
    return AUTH_CAP_MAX;
  return n / 8 < AUTH_CAP_MIN ? AUTH_CAP_MIN : (size_t)(n / 8);
}

int64_t dist__stp_client_spin_us(void) {
  pthread_once(&spin_once, read_spin);
  return client_spin;
}

int64_t dist__stp_server_spin_us(void) {
  pthread_once(&spin_once, read_spin);
  return server_spin;
}
