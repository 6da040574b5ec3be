/* test_tcp_util.h - helpers for the TCP engine's tests (test_tcp_*.c): a
 * dist__cpu_group built by hand in each forked rank, over the test's TCP
 * store, with the engine created on it; and dist_coll builders.
 *
 * Everything is static: each test file is its own executable. */
#ifndef DIST_TEST_TCP_UTIL_H
#define DIST_TEST_TCP_UTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/lsan_interface.h>
#endif

#include "backends/cpu/tcp.h"
#include "backends/cpu/tcp_int.h"
#include "mp.h"

#define TT_MAX 24

typedef struct tt_rank {
  dist__cpu_group g;
  int granks[TT_MAX];
  dist__cpu_peer peers[TT_MAX];
  dist_store *store;            /* the test's store (rank 0 hosts it) */
  dist_store *gstore;           /* the group's view of it (prefixed) */
  dist__tcp *t;
  dist__errbuf err;
} tt_rank;

/* The group (ranks 0 .. size-1 of the test) without its engine; publishes
 * this rank's pid so messages name real processes. */
static inline int tt_group(const dist_test_ctx *ctx, tt_rank *r, int size, const char *name,
                           const char *token, int64_t timeout_ms) {
  memset(r, 0, sizeof *r);
  int rc = dist_test_tcp_store(ctx, &r->store);
  if (rc != DIST_OK)
    return rc;
  rc = dist_store_prefix_create(name, r->store, DIST_STORE_BORROW, &r->gstore);
  if (rc != DIST_OK)
    return rc;
  dist__cpu_group *g = &r->g;
  g->rank = ctx->rank;
  g->size = size;
  g->global_rank = ctx->rank;
  g->global_ranks = r->granks;
  g->peers = r->peers;
  g->group_id = 0;
  g->timeout_ms = timeout_ms;
  snprintf(g->name, sizeof g->name, "%s", name);
  snprintf(g->token, sizeof g->token, "%s", token ? token : "");
  g->transport = DIST_CPU_TRANSPORT_TCP;
  if (ctx->rank >= size)
    return DIST_OK; /* a bystander (attacker) of the test */
  char key[32], val[32];
  snprintf(key, sizeof key, "pid/%d", ctx->rank);
  int n = snprintf(val, sizeof val, "%d", (int)getpid());
  rc = dist_store_set(r->gstore, key, val, (size_t)n);
  for (int i = 0; i < size && rc == DIST_OK; i++) {
    void *v = NULL;
    size_t len;
    snprintf(key, sizeof key, "pid/%d", i);
    rc = dist_store_get(r->gstore, key, &v, &len);
    r->granks[i] = i;
    r->peers[i].global_rank = i;
    r->peers[i].pid = v ? atoi(v) : 0;
    snprintf(r->peers[i].host, sizeof r->peers[i].host, "%s", "localhost");
    dist_free(v);
  }
  return rc;
}

static inline int tt_init_named(const dist_test_ctx *ctx, tt_rank *r, int size,
                                const char *name, const char *token, int64_t timeout_ms) {
  int rc = tt_group(ctx, r, size, name, token, timeout_ms);
  if (rc != DIST_OK)
    return rc;
  dist__err_clear(&r->err);
  rc = dist__tcp_create(&r->g, r->gstore, dist__now_ms() + timeout_ms, &r->t, &r->err);
  if (rc != DIST_OK)
    fprintf(stderr, "rank %d: dist__tcp_create: %s\n", ctx->rank, r->err.msg);
  return rc;
}

static inline int tt_init(const dist_test_ctx *ctx, tt_rank *r, int64_t timeout_ms) {
  return tt_init_named(ctx, r, ctx->world, "tcp-test", getenv("DIST_TOKEN"), timeout_ms);
}

/* Ranks end with _exit(), which skips LeakSanitizer: check explicitly.
 * Returns 1 when something leaked. */
static inline int tt_leaks(void) {
#if defined(__SANITIZE_ADDRESS__)
  return __lsan_do_recoverable_leak_check() ? 1 : 0;
#else
  return 0;
#endif
}

/* Waits until every rank has counted itself in on key name (a store
 * barrier; the last to arrive sets name-all). */
static inline void tt_store_barrier(tt_rank *r, const char *name) {
  char all[48];
  int64_t n = 0;
  snprintf(all, sizeof all, "%s-all", name);
  dist_store_add(r->gstore, name, 1, &n);
  if (n == r->g.size)
    dist_store_set(r->gstore, all, "1", 1);
  const char *keys[1] = {all};
  dist_store_wait(r->gstore, keys, 1, 30000);
}

/* Everyone arrives before anyone destroys (so a late peer never sees a
 * departure in the middle of its last operation), and rank 0, which hosts
 * the store, closes it only once every other rank has counted itself out:
 * the last one's set needs no reply, every earlier reply is already in its
 * receiver's socket. Returns 1 when, under AddressSanitizer, something
 * leaked. */
static inline int tt_fini(tt_rank *r) {
  bool many = r->t && r->g.size > 1;
  if (many)
    tt_store_barrier(r, "fini");
  dist__tcp_destroy(r->t);
  r->t = NULL;
  if (many && r->g.rank != 0) {
    int64_t n = 0;
    dist_store_add(r->gstore, "out", 1, &n);
    if (n == r->g.size - 1)
      dist_store_set(r->gstore, "out-all", "1", 1);
  } else if (many) {
    const char *keys[1] = {"out-all"};
    dist_store_wait(r->gstore, keys, 1, 30000);
  }
  dist_store_destroy(r->gstore);
  dist_store_destroy(r->store);
  return tt_leaks();
}

/* Runs collective c on the engine with the group's timeout. */
static inline int tt_run(tt_rank *r, const dist_coll *c) {
  dist__err_clear(&r->err);
  dist__cpu_op op = {c, dist__now_ms() + r->g.timeout_ms, &r->err, -1};
  return dist__tcp_run(r->t, &op);
}

static inline dist_coll tt_coll(dist_op_kind kind, uint64_t seq) {
  dist_coll c;
  memset(&c, 0, sizeof c);
  c.kind = kind;
  c.root = -1;
  c.seq = seq;
  c.timeout_ms = 20000;
  return c;
}

/* Blocking send / receive through the p2p requests. */
static inline int tt_send(tt_rank *r, int peer, int tag, const void *buf, size_t len,
                          const dist_coll *c) {
  dist__tcp_req *q = NULL;
  dist__err_clear(&r->err);
  int rc = dist__tcp_isend(r->t, peer, DIST_TCP_CTX_P2P, tag, buf, len, c, &q, &r->err);
  if (rc == DIST_OK)
    rc = dist__tcp_wait(r->t, &q, 1, dist__now_ms() + r->g.timeout_ms, &r->err);
  dist__tcp_req_free(q);
  return rc;
}

static inline int tt_recv(tt_rank *r, int peer, int tag, void *buf, size_t len,
                          const dist_coll *c, int *src) {
  dist__tcp_req *q = NULL;
  dist__err_clear(&r->err);
  int rc = dist__tcp_irecv(r->t, peer, DIST_TCP_CTX_P2P, tag, buf, len, c, &q, &r->err);
  if (rc == DIST_OK)
    rc = dist__tcp_wait(r->t, &q, 1, dist__now_ms() + r->g.timeout_ms, &r->err);
  if (src && q)
    dist__tcp_req_status(q, NULL, src);
  dist__tcp_req_free(q);
  return rc;
}

#define TT_OK(ctx, r, call)                                                          \
  do {                                                                               \
    int tt_rc_ = (call);                                                             \
    if (tt_rc_ != DIST_OK)                                                           \
      return FAIL((ctx), "%s -> %s: %s", #call, dist_status_name(tt_rc_), (r)->err.msg); \
  } while (0)

#endif
