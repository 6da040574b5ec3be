/* ctest: labels=multiproc timeout=240 */
/* The TCP engine's point-to-point path between real forked ranks over
 * 127.0.0.1 (and ::1): tags, any source, unexpected messages, large
 * messages both ways at once, and size mismatches failing both sides. */
#include <criterion/criterion.h>

#include <pthread.h>
#include <stdlib.h>

#include "test_tcp_util.h"

static void run(int n, dist_test_rank_fn fn, int timeout_s) {
  int rc = dist_test_ranks(n, fn, NULL, timeout_s);
  cr_assert_eq(rc, 0, "%s", dist_test_report());
}

/* --- tags ------------------------------------------------------------------------ */

static int tags_rank(const dist_test_ctx *ctx) {
  tt_rank r;
  TT_OK(ctx, &r, tt_init(ctx, &r, 20000));
  enum { N = 8 };
  if (ctx->rank == 0) {
    /* Non-blocking sends of tags 0..N-1, two messages per tag. */
    int vals[2 * N];
    dist__tcp_req *q[2 * N];
    for (int i = 0; i < 2 * N; i++) {
      vals[i] = 1000 + i;
      TT_OK(ctx, &r, dist__tcp_isend(r.t, 1, DIST_TCP_CTX_P2P, i % N, &vals[i], sizeof(int),
                                     NULL, &q[i], &r.err));
    }
    TT_OK(ctx, &r, dist__tcp_wait(r.t, q, 2 * N, dist__now_ms() + 20000, &r.err));
    for (int i = 0; i < 2 * N; i++)
      dist__tcp_req_free(q[i]);
  } else {
    /* Receive tags in reverse order: each tag's two messages in send order. */
    /* TCP keeps order: whatever the timing, the messages of lower tags
     * reach this rank before the first receive (tag N-1) can match. */
    for (int tag = N - 1; tag >= 0; tag--)
      for (int k = 0; k < 2; k++) {
        int v = -1;
        TT_OK(ctx, &r, tt_recv(&r, 0, tag, &v, sizeof v, NULL, NULL));
        int want = 1000 + tag + k * N;
        CHECK(ctx, v == want, "tag %d message %d: got %d, want %d", tag, k, v, want);
      }
  }
  return tt_fini(&r);
}

Test(core_tcp_p2p, tags_match_out_of_order_and_in_send_order_per_tag, .timeout = 60) {
  run(2, tags_rank, 50);
}

/* --- any source ---------------------------------------------------------------- */

static int any_rank(const dist_test_ctx *ctx) {
  tt_rank r;
  TT_OK(ctx, &r, tt_init(ctx, &r, 20000));
  int n = ctx->world;
  if (ctx->rank == 0) {
    bool seen[TT_MAX] = {0};
    for (int i = 1; i < n; i++) {
      int v = -1, src = -1;
      TT_OK(ctx, &r, tt_recv(&r, -1, 7, &v, sizeof v, NULL, &src));
      CHECK(ctx, src >= 1 && src < n && !seen[src], "bad source %d", src);
      CHECK(ctx, v == src * 10, "from %d: got %d", src, v);
      seen[src] = true;
    }
  } else {
    int v = ctx->rank * 10;
    TT_OK(ctx, &r, tt_send(&r, 0, 7, &v, sizeof v, NULL));
  }
  return tt_fini(&r);
}

Test(core_tcp_p2p, any_source_receives_each_sender_once_and_names_it, .timeout = 60) {
  run(4, any_rank, 50);
}

/* --- large messages, both directions at once ------------------------------------- */

static int both_ways_rank(const dist_test_ctx *ctx) {
  tt_rank r;
  TT_OK(ctx, &r, tt_init(ctx, &r, 30000));
  int peer = 1 - ctx->rank;
  /* Rendezvous-sized and eager-sized messages, each way at the same time:
   * neither side reads before it has posted all of its sends. */
  size_t sizes[] = {48u << 20, 60000, 1u << 20};
  for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++) {
    size_t len = sizes[s], n = len / sizeof(uint32_t);
    uint32_t *out = malloc(len), *in = malloc(len);
    CHECK(ctx, out && in, "malloc");
    for (size_t i = 0; i < n; i++)
      out[i] = (uint32_t)(i * 2654435761u) ^ (uint32_t)ctx->rank;
    memset(in, 0, len);
    dist__tcp_req *q[2];
    TT_OK(ctx, &r, dist__tcp_isend(r.t, peer, DIST_TCP_CTX_P2P, 3, out, len, NULL, &q[0],
                                   &r.err));
    TT_OK(ctx, &r, dist__tcp_irecv(r.t, peer, DIST_TCP_CTX_P2P, 3, in, len, NULL, &q[1],
                                   &r.err));
    TT_OK(ctx, &r, dist__tcp_wait(r.t, q, 2, dist__now_ms() + 30000, &r.err));
    dist__tcp_req_free(q[0]);
    dist__tcp_req_free(q[1]);
    for (size_t i = 0; i < n; i++)
      CHECK(ctx, in[i] == ((uint32_t)(i * 2654435761u) ^ (uint32_t)peer),
            "%zu bytes: word %zu differs", len, i);
    free(out);
    free(in);
  }
  return tt_fini(&r);
}

Test(core_tcp_p2p, large_messages_both_directions_at_once_do_not_deadlock, .timeout = 90) {
  run(2, both_ways_rank, 80);
}

/* --- many unexpected messages ------------------------------------------------------ */

static int flood_rank(const dist_test_ctx *ctx) {
  tt_rank r;
  TT_OK(ctx, &r, tt_init(ctx, &r, 20000));
  enum { N = 300 };
  static char bufs[N][5000];
  if (ctx->rank == 0) {
    dist__tcp_req *q[N];
    for (int i = 0; i < N; i++) {
      memset(bufs[i], i & 0xff, sizeof bufs[i]);
      TT_OK(ctx, &r, dist__tcp_isend(r.t, 1, DIST_TCP_CTX_P2P, i, bufs[i], sizeof bufs[i],
                                     NULL, &q[i], &r.err));
    }
    TT_OK(ctx, &r, dist__tcp_wait(r.t, q, N, dist__now_ms() + 20000, &r.err));
    for (int i = 0; i < N; i++)
      dist__tcp_req_free(q[i]);
  } else {
    /* Receiving the last first: the 299 before it arrive unexpected. */
    for (int i = N - 1; i >= 0; i--) {
      TT_OK(ctx, &r, tt_recv(&r, 0, i, bufs[i], sizeof bufs[i], NULL, NULL));
      for (size_t k = 0; k < sizeof bufs[i]; k++)
        CHECK(ctx, (unsigned char)bufs[i][k] == (i & 0xff), "message %d byte %zu", i, k);
    }
  }
  return tt_fini(&r);
}

Test(core_tcp_p2p, unexpected_messages_are_kept_until_received, .timeout = 60) {
  run(2, flood_rank, 50);
}

/* --- size mismatches ----------------------------------------------------------------- */

static bool has(const char *msg, const char *what) { return strstr(msg, what) != NULL; }

/* Rank 0 sends `sent` floats, rank 1 receives `want` floats: both fail with
 * a message naming the peer, both operations with their sequence numbers,
 * and both sizes; the connection stays usable afterwards. */
static int mismatch(const dist_test_ctx *ctx, size_t sent, size_t want) {
  tt_rank r;
  TT_OK(ctx, &r, tt_init(ctx, &r, 10000));
  float buf[1 << 15] = {0};
  char a[32], b[32];
  snprintf(a, sizeof a, "%zu bytes", sent * 4);
  snprintf(b, sizeof b, "%zu bytes", want * 4);
  if (ctx->rank == 0) {
    dist_tensor tsr = dist_tensor_1d(buf, DIST_FLOAT32, (int64_t)sent);
    dist_coll c = tt_coll(DIST_OP_SEND, 5);
    c.inputs = &tsr;
    c.n_inputs = 1;
    c.root = 1;
    int rc = tt_send(&r, 1, 0, buf, sent * 4, &c);
    CHECK(ctx, rc == DIST_E_DESYNC, "send: %s: %s", dist_status_name(rc), r.err.msg);
    CHECK(ctx, has(r.err.msg, "SEND #5") && has(r.err.msg, "RECV #9") &&
                   has(r.err.msg, "rank 1") && has(r.err.msg, a) && has(r.err.msg, b),
          "sender's message lacks a detail: %s", r.err.msg);
    fprintf(stderr, "sender: %s\n", r.err.msg);
  } else {
    dist_tensor tsr = dist_tensor_1d(buf, DIST_FLOAT32, (int64_t)want);
    dist_coll c = tt_coll(DIST_OP_RECV, 9);
    c.outputs = &tsr;
    c.n_outputs = 1;
    c.root = 0;
    int rc = tt_recv(&r, 0, 0, buf, want * 4, &c, NULL);
    CHECK(ctx, rc == DIST_E_DESYNC, "recv: %s: %s", dist_status_name(rc), r.err.msg);
    CHECK(ctx, has(r.err.msg, "RECV #9") && has(r.err.msg, "SEND #5") &&
                   has(r.err.msg, "rank 0") && has(r.err.msg, a) && has(r.err.msg, b),
          "receiver's message lacks a detail: %s", r.err.msg);
    fprintf(stderr, "receiver: %s\n", r.err.msg);
  }
  /* The pair still works. */
  int v = 42;
  if (ctx->rank == 0)
    TT_OK(ctx, &r, tt_send(&r, 1, 1, &v, sizeof v, NULL));
  else
    TT_OK(ctx, &r, tt_recv(&r, 0, 1, &v, sizeof v, NULL, NULL));
  CHECK(ctx, v == 42, "after the mismatch: got %d", v);
  return tt_fini(&r);
}

static int send8_recv4(const dist_test_ctx *ctx) { return mismatch(ctx, 8, 4); }
static int send4_recv8(const dist_test_ctx *ctx) { return mismatch(ctx, 4, 8); }
static int big_mismatch(const dist_test_ctx *ctx) { return mismatch(ctx, 30000, 20000); }

Test(core_tcp_p2p, send_of_8_to_recv_of_4_fails_both_with_sizes, .timeout = 60) {
  run(2, send8_recv4, 50);
}

Test(core_tcp_p2p, send_of_4_to_recv_of_8_fails_both_with_sizes, .timeout = 60) {
  run(2, send4_recv8, 50);
}

Test(core_tcp_p2p, large_message_size_mismatch_fails_both, .timeout = 60) {
  run(2, big_mismatch, 50);
}

/* --- IPv6 ------------------------------------------------------------------------------ */

static int v6_rank(const dist_test_ctx *ctx) {
  setenv("MASTER_ADDR", "::1", 1);
  tt_rank r;
  TT_OK(ctx, &r, tt_init(ctx, &r, 20000));
  int v = ctx->rank == 0 ? 77 : 0;
  if (ctx->rank == 0)
    TT_OK(ctx, &r, tt_send(&r, 1, 0, &v, sizeof v, NULL));
  else
    TT_OK(ctx, &r, tt_recv(&r, 0, 0, &v, sizeof v, NULL, NULL));
  CHECK(ctx, v == 77, "got %d", v);
  return tt_fini(&r);
}

Test(core_tcp_p2p, the_mesh_works_over_ipv6, .timeout = 60) { run(2, v6_rank, 50); }

/* --- several threads on one engine ------------------------------------------------- */

typedef struct mt_ctx {
  tt_rank *r;
  _Atomic int done;
  int coll_rc;
  char coll_msg[512];
} mt_ctx;

/* Collectives on their own thread, as the backend runs async ones. */
static void *coll_thread(void *arg) {
  mt_ctx *m = arg;
  dist__errbuf err;
  int n = m->r->g.size;
  for (int i = 0; i < 200 && m->coll_rc == DIST_OK; i++) {
    float v[1000];
    for (int k = 0; k < 1000; k++)
      v[k] = (float)(m->r->g.rank + 1);
    dist_tensor t = dist_tensor_1d(v, DIST_FLOAT32, i % 3 ? 1000 : 7);
    dist_coll c = tt_coll(DIST_OP_ALL_REDUCE, (uint64_t)i + 1);
    c.inputs = c.outputs = &t;
    c.n_inputs = c.n_outputs = 1;
    c.redop = DIST_SUM;
    dist__err_clear(&err);
    dist__cpu_op op = {&c, dist__now_ms() + 20000, &err, -1};
    m->coll_rc = dist__tcp_run(m->r->t, &op);
    if (m->coll_rc == DIST_OK && v[0] != (float)(n * (n + 1) / 2)) {
      m->coll_rc = DIST_E_INTERNAL;
      snprintf(err.msg, sizeof err.msg, "all_reduce %d: got %g", i, v[0]);
    }
    if (m->coll_rc != DIST_OK)
      snprintf(m->coll_msg, sizeof m->coll_msg, "%s", err.msg);
  }
  return NULL;
}

/* The backend's progress thread: drives whenever nobody else does. */
static void *progress_thread(void *arg) {
  mt_ctx *m = arg;
  while (!m->done)
    dist__tcp_progress(m->r->t, 1);
  return NULL;
}

static int threads_rank(const dist_test_ctx *ctx) {
  tt_rank r;
  TT_OK(ctx, &r, tt_init(ctx, &r, 20000));
  mt_ctx m = {&r, 0, DIST_OK, ""};
  pthread_t tc, tp;
  pthread_create(&tc, NULL, coll_thread, &m);
  pthread_create(&tp, NULL, progress_thread, &m);
  int peer = 1 - ctx->rank;
  for (int i = 0; i < 300; i++) {
    int v = i, w = -1;
    dist__tcp_req *q[2];
    TT_OK(ctx, &r, dist__tcp_irecv(r.t, peer, DIST_TCP_CTX_P2P, 5, &w, sizeof w, NULL, &q[0],
                                   &r.err));
    TT_OK(ctx, &r, dist__tcp_isend(r.t, peer, DIST_TCP_CTX_P2P, 5, &v, sizeof v, NULL, &q[1],
                                   &r.err));
    if (i % 2) { /* sometimes test until done instead of waiting */
      while (!dist__tcp_test(r.t, q[0]) || !dist__tcp_test(r.t, q[1])) {
      }
    }
    TT_OK(ctx, &r, dist__tcp_wait(r.t, q, 2, dist__now_ms() + 20000, &r.err));
    dist__tcp_req_free(q[0]);
    dist__tcp_req_free(q[1]);
    CHECK(ctx, w == i, "exchange %d: got %d", i, w);
  }
  pthread_join(tc, NULL);
  m.done = 1;
  pthread_join(tp, NULL);
  CHECK(ctx, m.coll_rc == DIST_OK, "collective thread: %s: %s", dist_status_name(m.coll_rc),
        m.coll_msg);
  return tt_fini(&r);
}

Test(core_tcp_p2p, threads_share_one_engine_p2p_collectives_and_progress, .timeout = 90) {
  run(2, threads_rank, 80);
}

/* --- DIST_SOCKET_IFNAME ------------------------------------------------------------------ */

static int ifname_rank(const dist_test_ctx *ctx) {
  setenv("DIST_SOCKET_IFNAME", "lo", 1);
  tt_rank r;
  TT_OK(ctx, &r, tt_init(ctx, &r, 20000));
  const char *key = "tcp/addr/0";
  void *val = NULL;
  size_t len;
  TT_OK(ctx, &r, dist_store_get(r.gstore, key, &val, &len));
  CHECK(ctx, strncmp(val, "127.0.0.1:", 10) == 0, "rank 0 published %s, not lo's address",
        (char *)val);
  dist_free(val);
  int v = 9;
  if (ctx->rank == 0)
    TT_OK(ctx, &r, tt_send(&r, 1, 0, &v, sizeof v, NULL));
  else
    TT_OK(ctx, &r, tt_recv(&r, 0, 0, &v, sizeof v, NULL, NULL));
  return tt_fini(&r);
}

Test(core_tcp_p2p, dist_socket_ifname_picks_the_interface_address, .timeout = 60) {
  run(2, ifname_rank, 50);
}

static int bad_ifname_rank(const dist_test_ctx *ctx) {
  setenv("DIST_SOCKET_IFNAME", "no-such-if0", 1);
  tt_rank r;
  int rc = tt_group(ctx, &r, 1, "tcp-test", "", 5000);
  if (rc == DIST_OK) {
    r.g.size = 2; /* pretend a peer, so the mesh is built */
    rc = dist__tcp_create(&r.g, r.gstore, dist__now_ms() + 2000, &r.t, &r.err);
  }
  CHECK(ctx, rc == DIST_E_INVAL && strstr(r.err.msg, "DIST_SOCKET_IFNAME"),
        "%s: %s", dist_status_name(rc), r.err.msg);
  dist_store_destroy(r.gstore);
  dist_store_destroy(r.store);
  return tt_leaks();
}

Test(core_tcp_p2p, an_unknown_dist_socket_ifname_is_named_in_the_error, .timeout = 30) {
  run(1, bad_ifname_rank, 20);
}

/* --- timeouts leave requests pending; freeing cancels -------------------------------- */

static int p2p_timeout_rank(const dist_test_ctx *ctx) {
  tt_rank r;
  TT_OK(ctx, &r, tt_init(ctx, &r, 20000));
  static uint8_t big[1 << 20];
  if (ctx->rank == 0) {
    /* A large send nobody receives yet: announced, then withdrawn. */
    dist__tcp_req *q;
    memset(big, 1, sizeof big);
    TT_OK(ctx, &r, dist__tcp_isend(r.t, 1, DIST_TCP_CTX_P2P, 4, big, sizeof big, NULL, &q,
                                   &r.err));
    int rc = dist__tcp_wait(r.t, &q, 1, dist__now_ms() + 300, &r.err);
    CHECK(ctx, rc == DIST_E_TIMEOUT && strstr(r.err.msg, "rank 1"), "%s: %s",
          dist_status_name(rc), r.err.msg);
    CHECK(ctx, !dist__tcp_test(r.t, q), "a timed-out wait completed the request");
    dist__tcp_req_free(q); /* cancels: the receiver must never see it */
    int64_t n;
    dist_store_add(r.gstore, "withdrawn", 1, &n);
    /* A fresh message on the same tag is the one received. */
    memset(big, 2, sizeof big);
    TT_OK(ctx, &r, tt_send(&r, 1, 4, big, sizeof big, NULL));
  } else {
    const char *key = "withdrawn";
    TT_OK(ctx, &r, dist_store_wait(r.gstore, &key, 1, 20000));
    TT_OK(ctx, &r, tt_recv(&r, 0, 4, big, sizeof big, NULL, NULL));
    CHECK(ctx, big[0] == 2 && big[sizeof big - 1] == 2, "received the withdrawn message");
  }
  return tt_fini(&r);
}

Test(core_tcp_p2p, a_timed_out_wait_leaves_the_request_and_freeing_withdraws_it,
     .timeout = 60) {
  run(2, p2p_timeout_rank, 50);
}
