/* tcp_mesh.c - creating and destroying the TCP engine: the group's full
 * mesh of authenticated connections.
 *
 * Every member listens on an ephemeral port of the address other hosts
 * reach it by (DIST_SOCKET_IFNAME's, else the one routing to MASTER_ADDR,
 * else the hostname's; IPv4 or IPv6), publishes "addr:port" under
 * tcp/addr/<rank> in the group's store, connects to every lower rank and
 * accepts every higher one (rank r's connects only wait for lower ranks to
 * reach their accept loop, so the order cannot deadlock). Each connection
 * first proves the job token (auth.h, role "data"), then both ends
 * exchange a hello naming the group, its size and their rank; a connection
 * that fails either step is logged and dropped, and the listener keeps
 * waiting for the real members until the deadline. The listener is closed
 * once the mesh is complete, so nothing can connect later. */
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "auth.h"
#include "net.h"
#include "tcp_int.h"

#define HANDSHAKE_MS 10000 /* longest a single incoming handshake may take */

static void hello_fill(const dist__tcp *t, tcp_hello *h) {
  memset(h, 0, sizeof *h);
  h->magic = TCP_HELLO_MAGIC;
  h->version = TCP_VERSION;
  h->rank = t->g->rank;
  h->size = t->g->size;
  snprintf(h->name, sizeof h->name, "%s", t->g->name);
}

/* DIST_OK when h is a hello of this group from a rank in [lo, hi]. */
static int hello_check(const dist__tcp *t, const tcp_hello *h, int lo, int hi,
                       dist__errbuf *e) {
  if (h->magic != TCP_HELLO_MAGIC || h->version != TCP_VERSION)
    return dist__err_set(e, DIST_E_INVAL, "not a libdist data connection (hello magic "
                         "0x%08x, version %u)", h->magic, h->version);
  if (memchr(h->name, '\0', sizeof h->name) == NULL ||
      strcmp(h->name, t->g->name) != 0 || h->size != t->g->size)
    return dist__err_set(e, DIST_E_INVAL, "the peer belongs to another group ('%.*s' of "
                         "size %d, expected '%s' of size %d)", (int)sizeof h->name, h->name,
                         h->size, t->g->name, t->g->size);
  if (h->rank < lo || h->rank > hi || t->conns[h->rank].fd >= 0)
    return dist__err_set(e, DIST_E_INVAL, "the peer claims rank %d, which this rank does "
                         "not expect a connection from", h->rank);
  return DIST_OK;
}

/* A bad value is warned about once and its default used (dist__env_int
 * leaves the default in place). */
static int tunables(dist__tcp *t, dist__errbuf *err) {
  (void)err;
  int64_t spin_us, eager, direct, segment, chunk, unexp_n, unexp_mb;
  dist__env_int("DIST_TCP_SPIN_US", 0, 10000000, 50, &spin_us);
  dist__env_int("DIST_TCP_EAGER_BYTES", 0, TCP_EAGER_HARD_MAX, 65536, &eager);
  dist__env_int("DIST_TCP_DIRECT_BYTES", 0, INT64_MAX / 2, 256 << 10, &direct);
  dist__env_int("DIST_TCP_SEGMENT_BYTES", 1024, 1 << 30, 512 << 10, &segment);
  dist__env_int("DIST_TCP_IO_CHUNK", 4096, 1 << 30, 1 << 20, &chunk);
  /* point-to-point messages sent ahead of their receives */
  dist__env_int("DIST_TCP_UNEXPECTED_MAX", 1, 1 << 24, 4096, &unexp_n);
  dist__env_int("DIST_TCP_UNEXPECTED_MB", 1, 1 << 20, 64, &unexp_mb);
  t->io_chunk = (size_t)chunk;
  t->segment_bytes = (size_t)segment;
  t->spin_ns = spin_us * 1000;
  t->eager_max = (size_t)eager;
  t->direct_bytes = (size_t)direct;
  t->unexp_max_n = (size_t)unexp_n;
  t->unexp_max_bytes = (uint64_t)unexp_mb << 20;
  return DIST_OK;
}

/* --- address exchange ------------------------------------------------------- */

static int publish(dist__tcp *t, dist_store *store, int *lfd, dist__errbuf *err) {
  char addr[DIST_NET_HOSTLEN];
  DIST_TRY(dist__net_local_addr_for(dist__getenv("MASTER_ADDR"), addr, sizeof addr, err));
  uint16_t port = 0;
  DIST_TRY(dist__net_listen(addr, 0, false, t->g->size + 16, lfd, &port, err));
  char key[64], val[DIST_NET_HOSTLEN + 16];
  snprintf(key, sizeof key, "tcp/addr/%d", t->g->rank);
  int n = strchr(addr, ':') ? snprintf(val, sizeof val, "[%s]:%u", addr, port)
                            : snprintf(val, sizeof val, "%s:%u", addr, port);
  int rc = dist_store_set(store, key, val, (size_t)n);
  if (rc != DIST_OK)
    return dist__err_set(err, rc, "group %s: publishing this rank's address: %s",
                         t->g->name, dist_store_errmsg(store));
  DIST_LOG(DEBUG, TCP, "group %s: rank %d listens on %s", t->g->name, t->g->rank, val);
  return DIST_OK;
}

static int lookup(dist__tcp *t, dist_store *store, int peer, int64_t deadline_ms,
                  char *host, size_t hostlen, uint16_t *port, dist__errbuf *err) {
  char key[64];
  snprintf(key, sizeof key, "tcp/addr/%d", peer);
  const char *keys[1] = {key};
  void *val = NULL;
  size_t len = 0;
  int rc = dist_store_wait(store, keys, 1, dist__remaining_ms(deadline_ms) + 1);
  if (rc == DIST_OK)
    rc = dist_store_get(store, key, &val, &len);
  if (rc != DIST_OK)
    return dist__err_set(err, rc, "group %s: waiting for rank %d's address in the store: %s",
                         t->g->name, t->g->global_ranks[peer], dist_store_errmsg(store));
  rc = dist__net_split_hostport((const char *)val, host, hostlen, port);
  dist_free(val);
  if (rc != DIST_OK)
    return dist__err_set(err, rc, "group %s: rank %d published a bad address: %s",
                         t->g->name, t->g->global_ranks[peer], dist_last_errmsg());
  return DIST_OK;
}

/* --- connecting ------------------------------------------------------------------ */

static int connect_to(dist__tcp *t, dist_store *store, int peer, int64_t deadline_ms,
                      dist__errbuf *err) {
  char host[DIST_NET_HOSTLEN], nb[160];
  uint16_t port;
  DIST_TRY(lookup(t, store, peer, deadline_ms, host, sizeof host, &port, err));
  dist__cpu_peer_name(t->g, peer, nb, sizeof nb);
  int fd = -1;
  dist__errbuf e;
  dist__err_clear(&e);
  tcp_hello mine, theirs;
  hello_fill(t, &mine);
  int rc = dist__net_connect(host, port, deadline_ms, &fd, &e);
  if (rc == DIST_OK)
    rc = dist__auth_connect(fd, t->g->token, "data", deadline_ms, &e);
  if (rc == DIST_OK)
    rc = dist__net_write_all(fd, &mine, sizeof mine, deadline_ms, &e);
  if (rc == DIST_OK)
    rc = dist__net_read_all(fd, &theirs, sizeof theirs, deadline_ms, &e);
  if (rc == DIST_OK)
    rc = hello_check(t, &theirs, peer, peer, &e);
  if (rc != DIST_OK) {
    if (fd >= 0)
      close(fd);
    return dist__err_set(err, rc, "group %s: connecting to %s at %s:%u: %s", t->g->name, nb,
                         host, port, e.msg);
  }
  t->conns[peer].fd = fd;
  return DIST_OK;
}

/* Accepts one connection and runs its handshake. DIST_OK when a member
 * joined; DIST_E_AGAIN-like PENDING (1) when a stray connection was
 * dropped; an error when the deadline passed. */
static int accept_one(dist__tcp *t, int lfd, int64_t deadline_ms, dist__errbuf *err) {
  int fd = -1;
  int rc = dist__net_accept(lfd, deadline_ms, &fd, err);
  if (rc != DIST_OK)
    return rc;
  int64_t hs = dist__now_ms() + HANDSHAKE_MS;
  if (hs > deadline_ms)
    hs = deadline_ms;
  dist__errbuf e;
  dist__err_clear(&e);
  tcp_hello theirs, mine;
  hello_fill(t, &mine);
  rc = dist__auth_accept(fd, t->g->token, "data", hs, &e);
  if (rc == DIST_OK)
    rc = dist__net_read_all(fd, &theirs, sizeof theirs, hs, &e);
  if (rc == DIST_OK)
    rc = hello_check(t, &theirs, t->g->rank + 1, t->g->size - 1, &e);
  if (rc == DIST_OK)
    rc = dist__net_write_all(fd, &mine, sizeof mine, hs, &e);
  if (rc != DIST_OK) {
    char pn[DIST_NET_HOSTLEN];
    dist__net_peer_name(fd, pn, sizeof pn);
    DIST_LOG(WARNING, TCP, "group %s: rank %d dropped a data connection from %s: %s",
             t->g->name, t->g->global_rank, pn, e.msg);
    close(fd);
    return 1;
  }
  t->conns[theirs.rank].fd = fd;
  return DIST_OK;
}

static int accept_all(dist__tcp *t, int lfd, int64_t deadline_ms, dist__errbuf *err) {
  int want = t->g->size - 1 - t->g->rank;
  while (want > 0) {
    dist__errbuf e;
    dist__err_clear(&e);
    int rc = accept_one(t, lfd, deadline_ms, &e);
    if (rc == DIST_OK) {
      want--;
      continue;
    }
    if (rc == 1)
      continue;
    int missing[64];
    int nm = 0;
    for (int p = t->g->rank + 1; p < t->g->size && nm < 64; p++)
      if (t->conns[p].fd < 0)
        missing[nm++] = t->g->global_ranks[p];
    char list[512];
    return dist__err_set(err, rc, "group %s: rank %d waited in vain for connections from "
                         "rank(s) %s: %s", t->g->name, t->g->global_rank,
                         dist__format_ranks(missing, (size_t)nm, list, sizeof list), e.msg);
  }
  return DIST_OK;
}

/* Non-blocking sockets, no Nagle, staging buffers. Socket buffer sizes are
 * left to the kernel's autotuning: setting SO_SNDBUF would pin it, and a
 * small pinned buffer is Gloo's 40 ms delayed-ACK trap. */
static int setup_conns(dist__tcp *t, dist__errbuf *err) {
  for (int p = 0; p < t->g->size; p++) {
    tcp_conn *c = &t->conns[p];
    if (p == t->g->rank)
      continue;
    if (dist__net_set_nonblock(c->fd, true) != DIST_OK || dist__net_set_nodelay(c->fd) != DIST_OK)
      return dist__err_sys(err, errno, "group %s: socket options", t->g->name);
    c->rbuf = dist__malloc(TCP_RBUF);
    if (!c->rbuf)
      return dist__err_set(err, DIST_E_NOMEM, "group %s: out of memory", t->g->name);
  }
  return DIST_OK;
}

static int mesh(dist__tcp *t, dist_store *store, int64_t deadline_ms, dist__errbuf *err) {
  int lfd = -1;
  int rc = publish(t, store, &lfd, err);
  for (int p = 0; rc == DIST_OK && p < t->g->rank; p++)
    rc = connect_to(t, store, p, deadline_ms, err);
  if (rc == DIST_OK)
    rc = accept_all(t, lfd, deadline_ms, err);
  if (lfd >= 0)
    close(lfd);
  if (rc == DIST_OK)
    rc = setup_conns(t, err);
  return rc;
}

static int engine_new(dist__cpu_group *g, dist__tcp **out, dist__errbuf *err) {
  dist__tcp *t = dist__calloc(1, sizeof *t);
  if (!t)
    return dist__err_set(err, DIST_E_NOMEM, "group %s: out of memory", g->name);
  t->g = g;
  t->wakefd = -1;
  *out = t;
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&t->cv, &ca);
  pthread_condattr_destroy(&ca);
  pthread_mutex_init(&t->mu, NULL);
  t->conns = dist__calloc((size_t)g->size, sizeof *t->conns);
  t->pfds = dist__calloc((size_t)g->size + 1, sizeof *t->pfds);
  if (!t->conns || !t->pfds)
    return dist__err_set(err, DIST_E_NOMEM, "group %s: out of memory", g->name);
  for (int p = 0; p < g->size; p++) {
    t->conns[p].fd = -1;
    t->conns[p].peer = p;
  }
  t->wakefd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (t->wakefd < 0)
    return dist__err_sys(err, errno, "group %s: eventfd", g->name);
  return tunables(t, err);
}

int dist__tcp_create(dist__cpu_group *g, dist_store *store, int64_t deadline_ms,
                     dist__tcp **out, dist__errbuf *err) {
  if (!g || !out || (g->size > 1 && !store) || g->size < 1 || g->rank < 0 ||
      g->rank >= g->size)
    return dist__err_set(err, DIST_E_INVAL, "tcp engine: bad arguments");
  *out = NULL;
  dist__tcp *t = NULL;
  int rc = engine_new(g, &t, err);
  if (rc == DIST_OK && g->size > 1)
    rc = mesh(t, store, deadline_ms, err);
  if (rc != DIST_OK) {
    DIST_LOG(ERROR, TCP, "%s", err ? err->msg : "tcp engine creation failed");
    dist__tcp_destroy(t);
    return rc;
  }
  *out = t;
  return DIST_OK;
}

/* --- destroy ------------------------------------------------------------------- */

/* Says goodbye to every peer and lets the queues drain for a moment, so a
 * peer sees a clean departure rather than a crash. */
static void goodbye(dist__tcp *t) {
  tcp_hdr h;
  dist__tcp_hdr_init(&h, TCP_F_BYE, 0, 0);
  const char *why = t->lost_rc != DIST_OK ? t->lost_msg
                    : atomic_load(&t->g->broken_rc) != DIST_OK ? t->g->broken_msg
                                                               : NULL;
  for (int p = 0; p < t->g->size; p++)
    if (p != t->g->rank && t->conns[p].fd >= 0 && !t->conns[p].gone)
      dist__tcp_send_ctrl(t, &t->conns[p], &h, why);
  int64_t deadline = dist__now_ms() + 200;
  for (;;) {
    int n = 0;
    for (int p = 0; p < t->g->size; p++) {
      tcp_conn *c = &t->conns[p];
      if (p == t->g->rank || c->gone || !c->sq)
        continue;
      dist__tcp_flush(t, c);
      if (c->sq && !c->gone)
        t->pfds[n++] = (struct pollfd){c->fd, POLLOUT, 0};
    }
    int64_t left = dist__remaining_ms(deadline);
    if (n == 0 || left == 0)
      break;
    poll(t->pfds, (nfds_t)n, (int)left);
  }
}

static void conn_free(tcp_conn *c) {
  dist__tcp_free_queue(c);
  if (c->fd >= 0) {
    /* Read what is left so close() sends FIN, not RST. */
    if (c->rbuf)
      while (recv(c->fd, c->rbuf, TCP_RBUF, MSG_DONTWAIT) > 0) {
      }
    close(c->fd);
  }
  if (c->rumsg)
    dist__free(c->rumsg->data);
  dist__free(c->rumsg);
  dist__free(c->rtext);
  dist__free(c->rbuf);
}

void dist__tcp_destroy(dist__tcp *t) {
  if (!t)
    return;
  if (t->conns) {
    pthread_mutex_lock(&t->mu);
    t->closing = true;
    if (!atomic_load(&t->aborted))
      goodbye(t);
    while (t->reqs) /* requests the caller did not free */
      dist__tcp_req_release(t, t->reqs);
    for (int p = 0; p < t->g->size; p++)
      if (p != t->g->rank)
        conn_free(&t->conns[p]);
    while (t->unexp) {
      tcp_umsg *u = t->unexp;
      t->unexp = u->next;
      dist__free(u->data);
      dist__free(u);
    }
    pthread_mutex_unlock(&t->mu);
  }
  if (t->wakefd >= 0)
    close(t->wakefd);
  pthread_mutex_destroy(&t->mu);
  pthread_cond_destroy(&t->cv);
  dist__free(t->conns);
  dist__free(t->pfds);
  dist__free(t->scratch);
  dist__free(t->late.reqs);
  dist__free(t);
}
