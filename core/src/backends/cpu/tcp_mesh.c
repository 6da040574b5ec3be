/* tcp_mesh.c - creating and destroying the TCP engine: the group's mesh
 * of authenticated connections, made whole here with DIST_TCP_LAZY=0 (by
 * default each pair connects when first needed: tcp_lazy.c, which shares
 * the hello and the socket setup below).
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
 * once the mesh is complete, so nothing can connect later.
 *
 * Several sockets per peer (DIST_SOCKETS_PER_PEER): the first connection's
 * hello carries the number the connector wants and the acceptor answers
 * the smaller of both wishes; the connector then opens the others (each
 * hello naming its socket), so the acceptor knows how many more to wait
 * for. One listener per address (dist__net_local_addrs: one per interface
 * DIST_SOCKET_IFNAME lists); socket i connects to listener i mod n, whose
 * addresses are published as a list under tcp/addrs/<rank>. */
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "net/auth.h"
#include "net/net.h"
#include "tcp_int.h"

#define HANDSHAKE_MS 10000 /* longest a single incoming handshake may take */

void dist__tcp_hello_fill(const dist__tcp *t, int lane, int nsocks, tcp_hello *h) {
  memset(h, 0, sizeof *h);
  h->magic = TCP_HELLO_MAGIC;
  h->version = TCP_VERSION;
  h->rank = t->g->rank;
  h->size = t->g->size;
  h->nsocks = nsocks;
  h->lane = lane;
  snprintf(h->name, sizeof h->name, "%s", t->g->name);
}

/* DIST_OK when h is a hello of this group from a rank in [lo, hi] for a
 * connection this rank still expects: the first one to that rank, or a
 * further socket (lane) of those agreed with it. */
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
  const tcp_conn *c = h->rank >= lo && h->rank <= hi ? &t->conns[h->rank] : NULL;
  bool fresh = c && h->lane == 0 && c->fd < 0 && h->nsocks >= 1 &&
               h->nsocks <= TCP_LANES_MAX;
  bool lane = c && h->lane > 0 && c->fd >= 0 && h->lane < c->nlanes &&
              c->lanes[h->lane - 1].fd < 0;
  if (!fresh && !lane)
    return dist__err_set(e, DIST_E_INVAL, "the peer claims rank %d (socket %d of %d), "
                         "which this rank does not expect a connection from", h->rank,
                         h->lane, h->nsocks);
  return DIST_OK;
}

int dist__tcp_lanes_alloc(dist__tcp *t, int p, int n, dist__errbuf *err) {
  tcp_conn *c = &t->conns[p];
  if (n > 1 && !(c->lanes = dist__calloc((size_t)n - 1, sizeof *c->lanes)))
    return dist__err_set(err, DIST_E_NOMEM, "group %s: out of memory", t->g->name);
  for (int i = 1; i < n; i++) {
    c->lanes[i - 1].fd = -1;
    c->lanes[i - 1].peer = p;
    c->lanes[i - 1].lane = i;
  }
  c->nlanes = n;
  return DIST_OK;
}

/* A bad value is warned about once and its default used (dist__env_int
 * leaves the default in place). */
static int tunables(dist__tcp *t, dist__errbuf *err) {
  (void)err;
  int64_t spin_us, eager, direct, segment, chunk, unexp_n, unexp_mb;
  /* spin only when each rank on this host has a CPU (cpu_fit.c) */
  int local = 0;
  for (int p = 0; p < t->g->size; p++)
    local += !strcmp(t->g->peers[p].host_id, t->g->peers[t->g->rank].host_id);
  dist__env_int("DIST_TCP_SPIN_US", 0, 10000000, dist__cpu_fits(local) ? 50 : 0, &spin_us);
  dist__env_int("DIST_TCP_EAGER_BYTES", 0, TCP_EAGER_HARD_MAX, 65536, &eager);
  dist__env_int("DIST_TCP_DIRECT_BYTES", 0, INT64_MAX / 2, 256 << 10, &direct);
  dist__env_int("DIST_TCP_SEGMENT_BYTES", 1024, 1 << 30, 512 << 10, &segment);
  dist__env_int("DIST_TCP_IO_CHUNK", 4096, 1 << 30, 1 << 20, &chunk);
  /* point-to-point messages sent ahead of their receives */
  dist__env_int("DIST_TCP_UNEXPECTED_MAX", 1, 1 << 24, 4096, &unexp_n);
  dist__env_int("DIST_TCP_UNEXPECTED_MB", 1, 1 << 20, 64, &unexp_mb);
  int64_t lazy;
  dist__env_int("DIST_TCP_LAZY", 0, 1, 1, &lazy); /* tcp_lazy.c */
  t->want_lazy = lazy != 0;
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

/* The listeners of this rank: one per address (dist__net_local_addrs: one,
 * or one per interface DIST_SOCKET_IFNAME lists); lane i of a peer connects
 * to listener i modulo their number, so connections take the interfaces in
 * turn (Gloo's rule). */
typedef struct tcp_listen {
  int fds[TCP_LANES_MAX];
  int n;
} tcp_listen;

/* DIST_SOCKETS_PER_PEER, by default 1 or the number of interfaces listed. */
static void sockets_per_peer(dist__tcp *t, int naddr) {
  int64_t n;
  dist__env_int("DIST_SOCKETS_PER_PEER", 1, TCP_LANES_MAX, naddr, &n);
  t->nsocks = (int)n;
}

static int publish(dist__tcp *t, dist_store *store, tcp_listen *L, dist__errbuf *err) {
  dist__net_addr a[TCP_LANES_MAX];
  for (int i = 0; i < TCP_LANES_MAX; i++)
    L->fds[i] = -1;
  DIST_TRY(dist__net_local_addrs(dist__getenv("MASTER_ADDR"), a, TCP_LANES_MAX, &L->n, err));
  sockets_per_peer(t, L->n);
  char key[64], first[DIST_NET_HOSTLEN + 16], list[TCP_LANES_MAX * (DIST_NET_HOSTLEN + 8)],
      shown[sizeof list + 512];
  size_t off = 0, soff = 0;
  list[0] = shown[0] = '\0';
  for (int i = 0; i < L->n; i++) {
    uint16_t port = 0;
    DIST_TRY(dist__net_listen(a[i].addr, 0, false, t->g->size * TCP_LANES_MAX + 16,
                              &L->fds[i], &port, err));
    const char *fmt = strchr(a[i].addr, ':') ? "[%s]:%u" : "%s:%u";
    char one[DIST_NET_HOSTLEN + 16];
    snprintf(one, sizeof one, fmt, a[i].addr, port);
    if (i == 0)
      snprintf(first, sizeof first, "%s", one);
    dist__appendf(list, sizeof list, &off, "%s%s", i ? "," : "", one);
    dist__appendf(shown, sizeof shown, &soff, "%s%s%s%s%s", i ? ", " : "", one,
                  *a[i].ifname ? " (" : "", a[i].ifname, *a[i].ifname ? ")" : "");
  }
  /* The list first: a peer that sees tcp/addr/<rank> finds it. */
  snprintf(key, sizeof key, "tcp/addrs/%d", t->g->rank);
  int rc = dist_store_set(store, key, list, strlen(list));
  snprintf(key, sizeof key, "tcp/addr/%d", t->g->rank);
  if (rc == DIST_OK)
    rc = dist_store_set(store, key, first, strlen(first));
  if (rc != DIST_OK)
    return dist__err_set(err, rc, "group %s: publishing this rank's address: %s",
                         t->g->name, dist_store_errmsg(store));
  if (t->nsocks > 1 || L->n > 1)
    DIST_LOG(INFO, TCP, "group %s: rank %d listens on %s; %d socket(s) per peer",
             t->g->name, t->g->rank, shown, t->nsocks);
  else
    DIST_LOG(DEBUG, TCP, "group %s: rank %d listens on %s", t->g->name, t->g->rank, shown);
  return DIST_OK;
}

/* The lane-0 addresses of ranks [0, n) (the ones this rank connects to),
 * in one wait and one read of the store instead of two round trips each:
 * at 256 ranks those were 76,000 of the job's 87,558 store requests.
 * NULL (each looked up alone) when the store cannot read them at once. */
static void **prefetch_addrs(dist_store *store, int n, int64_t deadline_ms, size_t **lens) {
  char (*k)[32] = dist__calloc((size_t)n, sizeof *k);
  const char **keys = dist__calloc((size_t)n, sizeof *keys);
  void **vals = dist__calloc((size_t)n, sizeof *vals);
  *lens = dist__calloc((size_t)n, sizeof **lens);
  bool ok = k && keys && vals && *lens;
  for (int p = 0; ok && p < n; p++) {
    snprintf(k[p], sizeof k[p], "tcp/addr/%d", p);
    keys[p] = k[p];
  }
  ok = ok && dist_store_wait(store, keys, (size_t)n, dist__remaining_ms(deadline_ms) + 1) ==
                 DIST_OK &&
       dist_store_multi_get(store, keys, (size_t)n, vals, *lens) == DIST_OK;
  for (int p = 0; ok && p < n; p++)
    ok = vals[p] != NULL;
  if (!ok && vals)
    for (int p = 0; p < n; p++)
      dist_free(vals[p]);
  dist__free(k);
  dist__free(keys);
  if (!ok) {
    dist__free(vals);
    dist__free(*lens);
    *lens = NULL;
    return NULL;
  }
  return vals;
}

int dist__tcp_pick_addr(const char *list, int lane, char *host, size_t hostlen,
                        uint16_t *port) {
  int n = 1;
  for (const char *q = list; (q = strchr(q, ',')); q++)
    n++;
  const char *pick = list;
  for (int i = 0; i < lane % n; i++)
    pick = strchr(pick, ',') + 1;
  char one[DIST_NET_HOSTLEN + 16];
  snprintf(one, sizeof one, "%.*s", (int)strcspn(pick, ","), pick);
  return dist__net_split_hostport(one, host, hostlen, port);
}

/* The address lane `lane` of peer connects to: the first published one for
 * lane 0 (from `cached` when prefetched), else entry lane modulo their
 * number. */
static int lookup(dist__tcp *t, dist_store *store, int peer, int lane, int64_t deadline_ms,
                  const void *cached, size_t cached_len, char *host, size_t hostlen,
                  uint16_t *port, dist__errbuf *err) {
  char key[64];
  snprintf(key, sizeof key, lane ? "tcp/addrs/%d" : "tcp/addr/%d", peer);
  const char *keys[1] = {key};
  void *val = NULL;
  size_t len = 0;
  int rc = DIST_OK;
  if (!lane && cached) { /* a copy, NUL-terminated as the store's: parsed in place */
    val = dist__malloc(cached_len + 1);
    if (!val)
      return dist__err_set(err, DIST_E_NOMEM, "group %s: out of memory", t->g->name);
    memcpy(val, cached, cached_len);
    ((char *)val)[cached_len] = '\0';
    len = cached_len;
  } else {
    rc = dist_store_wait(store, keys, 1, dist__remaining_ms(deadline_ms) + 1);
    if (rc == DIST_OK)
      rc = dist_store_get(store, key, &val, &len);
  }
  if (rc != DIST_OK)
    return dist__err_set(err, rc, "group %s: waiting for rank %d's address in the store: %s",
                         t->g->name, t->g->global_ranks[peer], dist_store_errmsg(store));
  rc = dist__tcp_pick_addr((const char *)val, lane, host, hostlen, port);
  dist_free(val);
  if (rc != DIST_OK)
    return dist__err_set(err, rc, "group %s: rank %d published a bad address: %s",
                         t->g->name, t->g->global_ranks[peer], dist_last_errmsg());
  return DIST_OK;
}

/* --- connecting ------------------------------------------------------------------ */

/* Opens lane `lane` to peer: connect, token, hellos. Lane 0 agrees on the
 * number of sockets (the peer answers the smaller of both wishes). */
static int open_lane(dist__tcp *t, dist_store *store, int peer, int lane,
                     int64_t deadline_ms, const void *cached, size_t cached_len,
                     dist__errbuf *err) {
  char host[DIST_NET_HOSTLEN], nb[160];
  uint16_t port;
  DIST_TRY(lookup(t, store, peer, lane, deadline_ms, cached, cached_len, host, sizeof host,
                  &port, err));
  dist__cpu_peer_name(t->g, peer, nb, sizeof nb);
  int fd = -1;
  dist__errbuf e;
  dist__err_clear(&e);
  tcp_hello mine, theirs;
  dist__tcp_hello_fill(t, lane, t->nsocks, &mine);
  int rc = dist__net_connect(host, port, deadline_ms, &fd, &e);
  if (rc == DIST_OK)
    rc = dist__auth_connect(fd, t->g->token, "data", deadline_ms, &e);
  if (rc == DIST_OK)
    rc = dist__net_write_all(fd, &mine, sizeof mine, deadline_ms, &e);
  if (rc == DIST_OK)
    rc = dist__net_read_all(fd, &theirs, sizeof theirs, deadline_ms, &e);
  if (rc == DIST_OK)
    rc = hello_check(t, &theirs, peer, peer, &e);
  if (rc == DIST_OK && (theirs.lane != lane || theirs.nsocks > t->nsocks))
    rc = dist__err_set(&e, DIST_E_INVAL, "the peer answered for socket %d of %d (asked "
                       "for socket %d of %d)", theirs.lane, theirs.nsocks, lane, t->nsocks);
  if (rc == DIST_OK && lane == 0)
    rc = dist__tcp_lanes_alloc(t, peer, theirs.nsocks, &e);
  if (rc != DIST_OK) {
    if (fd >= 0)
      close(fd);
    return dist__err_set(err, rc, "group %s: connecting to %s at %s:%u: %s", t->g->name, nb,
                         host, port, e.msg);
  }
  dist__tcp_lane(t, peer, lane)->fd = fd;
  DIST_LOG(DEBUG, TCP, "group %s: rank %d: socket %d of %d to rank %d at %s:%u",
           t->g->name, t->g->rank, lane, t->conns[peer].nlanes, peer, host, port);
  return DIST_OK;
}

static int connect_to(dist__tcp *t, dist_store *store, int peer, int64_t deadline_ms,
                      const void *cached, size_t cached_len, dist__errbuf *err) {
  DIST_TRY(open_lane(t, store, peer, 0, deadline_ms, cached, cached_len, err));
  for (int i = 1; i < t->conns[peer].nlanes; i++)
    DIST_TRY(open_lane(t, store, peer, i, deadline_ms, NULL, 0, err));
  return DIST_OK;
}

/* Waits for a connection on any listener. */
static int accept_any(const tcp_listen *L, int64_t deadline_ms, int *fd, dist__errbuf *err) {
  for (;;) {
    struct pollfd p[TCP_LANES_MAX];
    for (int i = 0; i < L->n; i++)
      p[i] = (struct pollfd){L->fds[i], POLLIN, 0};
    int64_t left = dist__remaining_ms(deadline_ms);
    int k = poll(p, (nfds_t)L->n, left > 1000 ? 1000 : (int)left);
    if (k < 0 && errno != EINTR)
      return dist__err_sys(err, errno, "poll on the data listeners");
    for (int i = 0; k > 0 && i < L->n; i++)
      if (p[i].revents)
        return dist__net_accept(L->fds[i], deadline_ms, fd, err);
    if (left == 0)
      return dist__err_set(err, DIST_E_TIMEOUT, "no connection came before the deadline");
  }
}

/* Accepts one connection and runs its handshake. DIST_OK when a member's
 * connection joined (*more: further sockets it will open); 1 when a stray
 * connection was dropped; an error when the deadline passed. */
static int accept_one(dist__tcp *t, const tcp_listen *L, int64_t deadline_ms, int *more,
                      dist__errbuf *err) {
  int fd = -1;
  *more = 0;
  int rc = accept_any(L, deadline_ms, &fd, err);
  if (rc != DIST_OK)
    return rc;
  int64_t hs = dist__now_ms() + HANDSHAKE_MS;
  if (hs > deadline_ms)
    hs = deadline_ms;
  dist__errbuf e;
  dist__err_clear(&e);
  tcp_hello theirs, mine;
  rc = dist__auth_accept(fd, t->g->token, "data", hs, &e);
  if (rc == DIST_OK)
    rc = dist__net_read_all(fd, &theirs, sizeof theirs, hs, &e);
  if (rc == DIST_OK)
    rc = hello_check(t, &theirs, t->g->rank + 1, t->g->size - 1, &e);
  int n = 0;
  if (rc == DIST_OK) {
    n = theirs.lane ? t->conns[theirs.rank].nlanes
                    : theirs.nsocks < t->nsocks ? theirs.nsocks : t->nsocks;
    dist__tcp_hello_fill(t, theirs.lane, n, &mine);
    rc = dist__net_write_all(fd, &mine, sizeof mine, hs, &e);
  }
  if (rc == DIST_OK && theirs.lane == 0)
    rc = dist__tcp_lanes_alloc(t, theirs.rank, n, &e);
  if (rc != DIST_OK) {
    char pn[DIST_NET_HOSTLEN];
    dist__net_peer_name(fd, pn, sizeof pn);
    DIST_LOG(WARNING, TCP, "group %s: rank %d dropped a data connection from %s: %s",
             t->g->name, t->g->global_rank, pn, e.msg);
    close(fd);
    return 1;
  }
  dist__tcp_lane(t, theirs.rank, theirs.lane)->fd = fd;
  *more = theirs.lane == 0 ? n - 1 : 0;
  return DIST_OK;
}

static int accept_all(dist__tcp *t, const tcp_listen *L, int64_t deadline_ms,
                      dist__errbuf *err) {
  int want = t->g->size - 1 - t->g->rank;
  while (want > 0) {
    dist__errbuf e;
    dist__err_clear(&e);
    int more = 0;
    int rc = accept_one(t, L, deadline_ms, &more, &e);
    if (rc == DIST_OK) {
      want += more - 1;
      continue;
    }
    if (rc == 1)
      continue;
    int missing[64];
    int nm = 0;
    for (int p = t->g->rank + 1; p < t->g->size && nm < 64; p++) {
      bool all = t->conns[p].fd >= 0;
      for (int i = 1; all && i < t->conns[p].nlanes; i++)
        all = t->conns[p].lanes[i - 1].fd >= 0;
      if (!all)
        missing[nm++] = t->g->global_ranks[p];
    }
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
int dist__tcp_conn_setup(dist__tcp *t, tcp_conn *c, dist__errbuf *err) {
  if (dist__net_set_nonblock(c->fd, true) != DIST_OK || dist__net_set_nodelay(c->fd) != DIST_OK)
    return dist__err_sys(err, errno, "group %s: socket options", t->g->name);
  c->rbuf = dist__malloc(TCP_RBUF);
  if (!c->rbuf)
    return dist__err_set(err, DIST_E_NOMEM, "group %s: out of memory", t->g->name);
  return DIST_OK;
}

static int setup_conns(dist__tcp *t, dist__errbuf *err) {
  size_t nfds = 1;
  for (int p = 0; p < t->g->size; p++)
    for (int i = 0; p != t->g->rank && i < t->conns[p].nlanes; i++, nfds++)
      DIST_TRY(dist__tcp_conn_setup(t, dist__tcp_lane(t, p, i), err));
  dist__free(t->pfds); /* one entry per connection, and the eventfd */
  t->pfds = dist__calloc(nfds, sizeof *t->pfds);
  if (!t->pfds)
    return dist__err_set(err, DIST_E_NOMEM, "group %s: out of memory", t->g->name);
  return DIST_OK;
}

static int mesh(dist__tcp *t, dist_store *store, int64_t deadline_ms, dist__errbuf *err) {
  tcp_listen L = {.n = 0};
  int rc = publish(t, store, &L, err);
  if (rc == DIST_OK && t->want_lazy) /* the listeners stay open: tcp_lazy.c */
    return dist__tcp_lazy_start(t, store, L.fds, L.n, deadline_ms, err);
  size_t *lens = NULL;
  void **addrs = rc == DIST_OK && t->g->rank > 0
                     ? prefetch_addrs(store, t->g->rank, deadline_ms, &lens) : NULL;
  for (int p = 0; rc == DIST_OK && p < t->g->rank; p++)
    rc = connect_to(t, store, p, deadline_ms, addrs ? addrs[p] : NULL, addrs ? lens[p] : 0,
                    err);
  for (int p = 0; addrs && p < t->g->rank; p++)
    dist_free(addrs[p]);
  dist__free(addrs);
  dist__free(lens);
  if (rc == DIST_OK)
    rc = accept_all(t, &L, deadline_ms, err);
  for (int i = 0; i < L.n; i++)
    if (L.fds[i] >= 0)
      close(L.fds[i]);
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
  t->lost_peer = -1;
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
    t->conns[p].nlanes = 1; /* until the mesh agrees on more */
  }
  t->wakefd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (t->wakefd < 0)
    return dist__err_sys(err, errno, "group %s: eventfd", g->name);
  return tunables(t, err);
}

/* --- a process that exits with the engine live ------------------------------------- */

/* The engines of this process, so that exit() with groups live (a program
 * that returns from main without destroying them, as torch allows) says
 * EXIT to every peer before the kernel closes the sockets: the peers then
 * tell a finished rank from a crashed one (tcp_progress.c). */
static dist__tcp *live;
static pthread_mutex_t live_mu = PTHREAD_MUTEX_INITIALIZER;

/* How long exit waits for a lock another thread holds (never across a
 * blocking call in this library: only a thread stopped in a fork child
 * could hold it for good). */
#define EXIT_LOCK_MS 200

static bool lock_within(pthread_mutex_t *mu) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  ts.tv_nsec += EXIT_LOCK_MS * 1000000L;
  ts.tv_sec += ts.tv_nsec / 1000000000L;
  ts.tv_nsec %= 1000000000L;
  return pthread_mutex_timedlock(mu, &ts) == 0;
}

/* Best effort and never blocking: a frame the socket does not take now is
 * dropped with the process, and that peer sees a plain end (a lost peer,
 * as before). The engine counts as closing from here on: peers that end
 * meanwhile are not warned about by a process that is leaving itself. */
static void say_exiting(dist__tcp *t) {
  if (t->closing || atomic_load(&t->aborted))
    return;
  t->closing = true;
  if (dist__tcp_lazy_pending(t)) /* peers that connected since hear it too */
    dist__tcp_lazy_install(t);
  tcp_hdr h;
  dist__tcp_hdr_init(&h, TCP_F_EXIT, 0, 0);
  for (int p = 0; p < t->g->size; p++)
    if (p != t->g->rank && t->conns[p].fd >= 0 && !t->conns[p].gone) {
      dist__tcp_send_ctrl(t, &t->conns[p], &h, NULL);
      dist__tcp_flush(t, &t->conns[p]);
    }
}

static void exit_all(void) {
  if (!lock_within(&live_mu))
    return;
  for (dist__tcp *t = live; t; t = t->next_live)
    if (t->pid == getpid() && lock_within(&t->mu)) { /* not a fork child's copy */
      say_exiting(t);
      pthread_mutex_unlock(&t->mu);
    }
  pthread_mutex_unlock(&live_mu);
}

static void link_live(dist__tcp *t) {
  static bool registered;
  t->pid = getpid();
  pthread_mutex_lock(&live_mu);
  t->next_live = live;
  live = t;
  if (!registered)
    registered = atexit(exit_all) == 0;
  pthread_mutex_unlock(&live_mu);
}

static void unlink_live(dist__tcp *t) {
  pthread_mutex_lock(&live_mu);
  for (dist__tcp **p = &live; *p; p = &(*p)->next_live)
    if (*p == t) {
      *p = t->next_live;
      break;
    }
  pthread_mutex_unlock(&live_mu);
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
  if (g->size > 1)
    link_live(t);
  *out = t;
  return DIST_OK;
}

int dist__tcp_conns_locked(const dist__tcp *t) {
  int n = 0;
  for (int p = 0; p < t->g->size; p++) {
    const tcp_conn *c = &t->conns[p];
    n += p != t->g->rank && c->fd >= 0;
    for (int i = 1; p != t->g->rank && i < c->nlanes; i++)
      n += c->lanes[i - 1].fd >= 0;
  }
  return n;
}

/* Under the lock: connections are taken in by whichever thread drives. */
int dist__tcp_conns(dist__tcp *t) {
  if (!t)
    return 0;
  pthread_mutex_lock(&t->mu);
  int n = dist__tcp_conns_locked(t);
  pthread_mutex_unlock(&t->mu);
  return n;
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
    for (int p = 0; p < t->g->size; p++)
      for (int i = 0; p != t->g->rank && i < t->conns[p].nlanes; i++) {
        tcp_conn *c = dist__tcp_lane(t, p, i); /* a half-written stripe too */
        if (c->gone || !c->sq)
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

/* Lane 0 first, so its FIN follows the BYE before the others close. */
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
  dist__free(c->bye_text);
  dist__free(c->departed_msg);
  dist__free(c->rbuf);
  for (int i = 1; c->lanes && i < c->nlanes; i++)
    conn_free(&c->lanes[i - 1]);
  dist__free(c->lanes);
}

void dist__tcp_destroy(dist__tcp *t) {
  if (!t)
    return;
  unlink_live(t);
  dist__tcp_lazy_stop(t); /* no connection comes in from here on */
  if (t->conns) {
    pthread_mutex_lock(&t->mu);
    t->closing = true;
    if (dist__tcp_lazy_pending(t)) /* peers that connected hear the goodbye too */
      dist__tcp_lazy_install(t);
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
  dist__tcp_lazy_free(t);
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
