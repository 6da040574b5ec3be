/* tcp_lazy.c - connections made when first needed (torch's
 * TORCH_GLOO_LAZY_INIT, on by default here; DIST_TCP_LAZY=0 makes the whole
 * mesh at creation, tcp_mesh.c).
 *
 * A full mesh costs every rank n-1 connections when a group is created,
 * about a million sockets job-wide at 1024 ranks, most of them never used:
 * a hierarchical group's collectives go over shared memory and the host
 * leaders, and a pipeline talks to its neighbours. Here a rank connects to
 * a peer when it first posts a send or a receive to it, or must tell it of
 * a failure; a collective therefore connects the pairs its schedule uses.
 *
 * Either side may need the connection first, and an eager send must
 * complete while its receiver is busy elsewhere, so every rank keeps its
 * listeners open for the group's life and a thread of its own answers them
 * (the token proof and the hello need the acceptor to speak). That thread
 * never takes the engine's lock: it decides under the links' own small
 * lock (z->mu, never held across I/O), parks the sockets it accepted, and
 * wakes the driver, which takes them in on its next sweep (or the
 * connector takes them in itself).
 *
 * Both ranks of a pair may connect at once: the lower rank's connection
 * wins. An acceptor that is itself connecting to the peer accepts the
 * peer's connection when the peer is the lower rank, and otherwise answers
 * with a refusal (a hello with no sockets); the refused connector then
 * waits for the winning connection, which its own acceptor takes. A peer
 * whose listener refuses the connection has left (it destroyed the group or
 * exited); one that does not answer within the group's timeout is named. */
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "net/auth.h"
#include "net/net.h"
#include "tcp_int.h"

#define ACCEPT_HANDSHAKE_MS 5000 /* longest one incoming handshake may take */
#define REFUSED 1                 /* dial: the peer takes its own connection */

enum { LINK_NONE, LINK_CONNECTING, LINK_ACCEPTING, LINK_PENDING, LINK_UP };

typedef struct tcp_link {
  int state;
  int n;                   /* sockets agreed with the peer (ACCEPTING, PENDING) */
  int got;                 /* of them accepted */
  int fds[TCP_LANES_MAX];
} tcp_link;

struct tcp_lazy {
  pthread_mutex_t mu;      /* guards links; never held across I/O */
  pthread_cond_t cv;       /* a link changed (CLOCK_MONOTONIC) */
  tcp_link *links;         /* g->size entries */
  _Atomic int pending;     /* links in LINK_PENDING */
  char **addrs;            /* every member's listeners, "a:p[,b:q]" */
  int lfds[TCP_LANES_MAX];
  int nl;
  int stopfd;              /* eventfd: the acceptor ends ... */
  bool stopping;           /* ... after the handshake in progress, unanswered */
  pthread_t thread;
  bool started;
};

bool dist__tcp_lazy_pending(const dist__tcp *t) {
  return t->lazy && atomic_load_explicit(&t->lazy->pending, memory_order_acquire) > 0;
}

/* --- taking a connection in (t->mu held) --------------------------------- */

/* "group g3: rank 2 connected to rank 5 (...) when first needed; 3 tcp
 * connections": logged at INFO and told to on_connect (the trace). */
static void say_connected(dist__tcp *t, int p, bool dialed) {
  char nb[160], line[384];
  snprintf(line, sizeof line, "group %s: rank %d %s %s when first needed; %d tcp "
           "connection(s) now", t->g->name, t->g->global_rank,
           dialed ? "connected to" : "accepted a connection from",
           dist__cpu_peer_name(t->g, p, nb, sizeof nb), dist__tcp_conns_locked(t));
  DIST_LOG(INFO, TCP, "%s", line);
  if (t->g->on_connect)
    t->g->on_connect(t->g->on_connect_arg, line);
}

/* fds[0..n) become peer p's sockets; closed on failure. */
static int install(dist__tcp *t, int p, const int *fds, int n, bool dialed,
                   dist__errbuf *err) {
  int rc = dist__tcp_lanes_alloc(t, p, n, err);
  for (int i = 0; i < n; i++) {
    if (rc != DIST_OK) {
      close(fds[i]);
      continue;
    }
    tcp_conn *c = dist__tcp_lane(t, p, i);
    c->fd = fds[i];
    rc = dist__tcp_conn_setup(t, c, err);
  }
  if (rc != DIST_OK)
    return rc; /* the sockets installed so far close with the engine */
  if (!t->closing) /* (at destroy only to say goodbye on) */
    say_connected(t, p, dialed);
  return DIST_OK;
}

/* Takes a parked link (z->mu held): its sockets into fds. */
static int take_parked(tcp_lazy *z, int p, int *fds) {
  tcp_link *l = &z->links[p];
  memcpy(fds, l->fds, sizeof l->fds);
  l->state = LINK_UP;
  atomic_fetch_sub_explicit(&z->pending, 1, memory_order_release);
  return l->n;
}

void dist__tcp_lazy_install(dist__tcp *t) {
  tcp_lazy *z = t->lazy;
  for (int p = 0; p < t->g->size; p++) {
    int fds[TCP_LANES_MAX], n = 0;
    pthread_mutex_lock(&z->mu);
    if (z->links[p].state == LINK_PENDING)
      n = take_parked(z, p, fds);
    pthread_mutex_unlock(&z->mu);
    dist__errbuf e;
    dist__err_clear(&e);
    if (n > 0 && install(t, p, fds, n, false, &e) != DIST_OK)
      dist__tcp_peer_gone(t, &t->conns[p], DIST_E_NOMEM, "group %s: %s", t->g->name, e.msg);
  }
}

/* --- connecting ----------------------------------------------------------- */

/* Whether h answers this rank's hello of socket `lane` to peer p. */
static bool answer_ok(const dist__tcp *t, const tcp_hello *h, int p, int lane) {
  return h->magic == TCP_HELLO_MAGIC && h->version == TCP_VERSION &&
         memchr(h->name, '\0', sizeof h->name) && !strcmp(h->name, t->g->name) &&
         h->size == t->g->size && h->rank == p && h->lane == lane && h->nsocks >= 0 &&
         h->nsocks <= t->nsocks;
}

/* One socket to p: connect, token, hellos. *agreed: the sockets p agreed
 * to (lane 0); REFUSED when p takes its own connection instead. */
static int dial(dist__tcp *t, int p, int lane, int64_t deadline, int *fd, int *agreed,
                dist__errbuf *e) {
  char host[DIST_NET_HOSTLEN];
  uint16_t port;
  *fd = -1;
  if (dist__tcp_pick_addr(t->lazy->addrs[p], lane, host, sizeof host, &port) != DIST_OK)
    return dist__err_set(e, DIST_E_INVAL, "a bad published address '%s'", t->lazy->addrs[p]);
  tcp_hello mine, theirs;
  dist__tcp_hello_fill(t, lane, lane ? *agreed : t->nsocks, &mine);
  int rc = dist__net_connect_once(host, port, deadline, fd, e);
  if (rc == DIST_OK)
    rc = dist__auth_connect(*fd, t->g->token, "data", deadline, e);
  if (rc == DIST_OK)
    rc = dist__net_write_all(*fd, &mine, sizeof mine, deadline, e);
  if (rc == DIST_OK)
    rc = dist__net_read_all(*fd, &theirs, sizeof theirs, deadline, e);
  if (rc == DIST_OK && !answer_ok(t, &theirs, p, lane))
    rc = dist__err_set(e, DIST_E_INVAL, "the answer is not of this group, rank and socket "
                       "('%.*s' of size %d, rank %d, socket %d of %d; asked rank %d socket %d)",
                       (int)sizeof theirs.name, theirs.name, theirs.size, theirs.rank,
                       theirs.lane, theirs.nsocks, p, lane);
  if (rc == DIST_OK && theirs.nsocks == 0)
    rc = REFUSED;
  if (rc != DIST_OK) {
    if (*fd >= 0)
      close(*fd);
    *fd = -1;
    return rc;
  }
  if (lane == 0)
    *agreed = theirs.nsocks;
  DIST_LOG(DEBUG, TCP, "group %s: rank %d: socket %d of %d to rank %d at %s:%u", t->g->name,
           t->g->rank, lane, *agreed, p, host, port);
  return DIST_OK;
}

/* Every socket to p; REFUSED, DIST_OK with fds[0..*n), or an error. */
static int dial_all(dist__tcp *t, int p, int64_t deadline, int *fds, int *n, dist__errbuf *e) {
  int rc = dial(t, p, 0, deadline, &fds[0], n, e);
  for (int i = 1; rc == DIST_OK && i < *n; i++) {
    rc = dial(t, p, i, deadline, &fds[i], n, e);
    if (rc == REFUSED) /* the first socket was agreed: the others must be too */
      rc = dist__err_set(e, DIST_E_BACKEND, "the peer refused socket %d of %d", i, *n);
    for (int j = 0; rc != DIST_OK && j < i; j++)
      close(fds[j]);
  }
  return rc;
}

/* Waits (z->mu held) for the connection p makes to this rank to be parked. */
static int wait_parked(dist__tcp *t, int p, int64_t deadline, dist__errbuf *e) {
  tcp_lazy *z = t->lazy;
  tcp_link *l = &z->links[p];
  struct timespec ts = {deadline / 1000, (long)(deadline % 1000) * 1000000L};
  while (l->state == LINK_CONNECTING || l->state == LINK_ACCEPTING)
    if (pthread_cond_timedwait(&z->cv, &z->mu, &ts) == ETIMEDOUT)
      return dist__err_set(e, DIST_E_TIMEOUT, "its own connection to this rank did not "
                           "come in time");
  return DIST_OK;
}

/* Under z->mu: dials p unless its connection is already on its way
 * (*dialed: fds are this rank's own connection, not p's). */
static int connect_locked(dist__tcp *t, int p, int64_t deadline, int *fds, int *n,
                          bool *dialed, dist__errbuf *e) {
  tcp_lazy *z = t->lazy;
  tcp_link *l = &z->links[p];
  *n = 0;
  *dialed = false;
  if (l->state == LINK_NONE) {
    l->state = LINK_CONNECTING;
    pthread_mutex_unlock(&z->mu);
    int rc = dial_all(t, p, deadline, fds, n, e);
    pthread_mutex_lock(&z->mu);
    if (rc == DIST_OK) {
      l->state = LINK_UP;
      *dialed = true;
      return DIST_OK;
    }
    *n = 0;
    if (rc != REFUSED && l->state == LINK_CONNECTING) {
      l->state = LINK_NONE; /* nothing of p's arrived meanwhile */
      return rc;
    }
  }
  int rc = wait_parked(t, p, deadline, e);
  if (rc == DIST_OK && l->state == LINK_PENDING)
    *n = take_parked(z, p, fds);
  return rc;
}

int dist__tcp_connect_peer(dist__tcp *t, int p, int64_t timeout_ms, dist__errbuf *err) {
  tcp_conn *c = &t->conns[p];
  if (!t->lazy || p == t->g->rank || c->fd >= 0 || c->gone)
    return DIST_OK;
  tcp_lazy *z = t->lazy;
  int64_t deadline = dist__deadline_ms(timeout_ms);
  int fds[TCP_LANES_MAX], n = 0;
  dist__errbuf e;
  dist__err_clear(&e);
  bool dialed;
  pthread_mutex_lock(&z->mu);
  int rc = connect_locked(t, p, deadline, fds, &n, &dialed, &e);
  pthread_mutex_unlock(&z->mu);
  if (rc == DIST_OK && n > 0)
    rc = install(t, p, fds, n, dialed, &e);
  if (c->fd >= 0)
    return DIST_OK;
  if (rc == DIST_OK) /* its connection failed its answer and was dropped */
    rc = dist__err_set(&e, DIST_E_BACKEND, "its connection to this rank was dropped");
  char nb[160];
  dist__cpu_peer_name(t->g, p, nb, sizeof nb);
  if (rc == DIST_E_CLOSED) /* its listener is closed: it left or exited */
    return dist__err_set(err, DIST_E_PEER_LOST, "group %s: %s has left the group or exited "
                         "(connecting to it when first needed: %s)", t->g->name, nb, e.msg);
  return dist__err_set(err, rc, "group %s: connecting to %s when first needed: %s",
                       t->g->name, nb, e.msg);
}

/* Connects to p; a peer whose listener refused has left, which reads as a
 * departure (BYE): what needs it fails, the group breaks only when that cut
 * an exchange short (tcp_progress.c). */
static int reach(dist__tcp *t, int p, int64_t timeout_ms, dist__errbuf *e) {
  int rc = dist__tcp_connect_peer(t, p, timeout_ms, e);
  if (rc == DIST_E_PEER_LOST) {
    t->conns[p].bye = true;
    dist__tcp_peer_gone(t, &t->conns[p], rc, "%s", e->msg);
  }
  return rc;
}

bool dist__tcp_reach_for(dist__tcp *t, dist__tcp_req *r) {
  if (!t->lazy)
    return true;
  if (r->peer < 0) { /* any source: every member may send it, and its end must be seen */
    dist__errbuf e;
    dist__err_clear(&e);
    int rc = DIST_OK;
    for (int p = 0; p < t->g->size && (rc == DIST_OK || rc == DIST_E_PEER_LOST); p++)
      if (p != t->g->rank && t->conns[p].fd < 0 && !t->conns[p].gone) {
        dist__err_clear(&e);
        rc = reach(t, p, t->g->timeout_ms, &e);
      }
    char lb[64];
    if (rc == DIST_E_PEER_LOST && !dist__tcp_no_sender_left(t))
      rc = DIST_OK; /* the others can still send it */
    if (rc != DIST_OK) /* a member that does not answer, or the last one left */
      dist__tcp_complete(t, r, rc, "%s from any rank: %s", dist__tcp_req_label(r, lb, sizeof lb),
                         e.msg);
    return r->state != RQ_DONE;
  }
  int p = r->peer;
  if (p == t->g->rank || t->conns[p].fd >= 0 || t->conns[p].gone)
    return true;
  dist__errbuf e;
  dist__err_clear(&e);
  int rc = reach(t, p, t->g->timeout_ms, &e);
  if (rc == DIST_OK)
    return true;
  char lb[64];
  if (r->state != RQ_DONE) /* (a lost peer failed it already) */
    dist__tcp_complete(t, r, rc, "%s: %s", dist__tcp_req_label(r, lb, sizeof lb), e.msg);
  return false;
}

/* --- answering ------------------------------------------------------------ */

/* The acceptor's verdict on hello h (z->mu held): the sockets agreed, or 0
 * to refuse. Reserves fd's place when accepted; parked() counts it once
 * the answer is written, so that nobody writes frames on it before the
 * answer (the connector reads the answer first). */
static int decide(dist__tcp *t, const tcp_hello *h, int fd) {
  tcp_lazy *z = t->lazy;
  tcp_link *l = &z->links[h->rank];
  if (h->lane > 0) { /* a further socket of a connection being accepted */
    if (l->state != LINK_ACCEPTING || h->lane >= l->n || l->fds[h->lane] >= 0)
      return 0;
    l->fds[h->lane] = fd;
  } else {
    bool take = l->state == LINK_NONE || (l->state == LINK_CONNECTING && h->rank < t->g->rank);
    if (!take)
      return 0;
    l->n = h->nsocks < t->nsocks ? h->nsocks : t->nsocks;
    l->got = 0;
    for (int i = 0; i < TCP_LANES_MAX; i++)
      l->fds[i] = -1;
    l->fds[0] = fd;
    l->state = LINK_ACCEPTING;
  }
  return l->n;
}

/* One more socket of peer r's connection answered (z->mu held): all of
 * them in, the connection waits to be taken in. */
static void parked(tcp_lazy *z, int r) {
  tcp_link *l = &z->links[r];
  if (++l->got == l->n) {
    l->state = LINK_PENDING;
    atomic_fetch_add_explicit(&z->pending, 1, memory_order_release);
  }
  pthread_cond_broadcast(&z->cv);
}

/* Undoes decide for a socket whose answer could not be written. */
static void undo(dist__tcp *t, const tcp_hello *h) {
  tcp_lazy *z = t->lazy;
  tcp_link *l = &z->links[h->rank];
  for (int i = 0; i < TCP_LANES_MAX; i++)
    if (l->fds[i] >= 0)
      close(l->fds[i]);
  l->state = LINK_NONE;
  pthread_cond_broadcast(&z->cv);
}

static bool hello_ok(const dist__tcp *t, const tcp_hello *h) {
  return h->magic == TCP_HELLO_MAGIC && h->version == TCP_VERSION &&
         memchr(h->name, '\0', sizeof h->name) && !strcmp(h->name, t->g->name) &&
         h->size == t->g->size && h->rank >= 0 && h->rank < t->g->size &&
         h->rank != t->g->rank && h->nsocks >= 1 && h->nsocks <= TCP_LANES_MAX &&
         h->lane >= 0 && h->lane < TCP_LANES_MAX;
}

/* The token proof and the hellos of one incoming connection; the sockets
 * agreed (fd parked), 0 when refused, or -1 when it failed (e says why). */
static int handshake(dist__tcp *t, int fd, dist__errbuf *e) {
  tcp_lazy *z = t->lazy;
  int64_t hs = dist__now_ms() + ACCEPT_HANDSHAKE_MS;
  tcp_hello theirs, mine;
  int rc = dist__auth_accept(fd, t->g->token, "data", hs, e);
  if (rc == DIST_OK)
    rc = dist__net_read_all(fd, &theirs, sizeof theirs, hs, e);
  if (rc == DIST_OK && !hello_ok(t, &theirs))
    rc = dist__err_set(e, DIST_E_INVAL, "not a member of this group (its hello names "
                       "'%.*s' of size %d, rank %d)", (int)sizeof theirs.name, theirs.name,
                       theirs.size, theirs.rank);
  if (rc != DIST_OK)
    return -1;
  /* A rank destroying the group answers no more: an accepted connection
   * is taken in and told goodbye, one not answered reads as its end. */
  pthread_mutex_lock(&z->mu);
  bool stopping = z->stopping;
  int n = stopping ? 0 : decide(t, &theirs, fd);
  pthread_mutex_unlock(&z->mu);
  if (stopping) /* closed unanswered: the connector reads that this rank left */
    return 0;
  dist__tcp_hello_fill(t, theirs.lane, n, &mine);
  rc = dist__net_write_all(fd, &mine, sizeof mine, hs, e);
  if (n > 0) {
    pthread_mutex_lock(&z->mu);
    if (rc == DIST_OK)
      parked(z, theirs.rank);
    else
      undo(t, &theirs); /* closes the sockets accepted of it, fd among them */
    pthread_mutex_unlock(&z->mu);
  }
  return rc == DIST_OK ? n : n > 0 ? -2 : -1;
}

static void answer_one(dist__tcp *t, int fd) {
  char pn[DIST_NET_HOSTLEN];
  dist__net_peer_name(fd, pn, sizeof pn);
  dist__errbuf e;
  dist__err_clear(&e);
  int n = handshake(t, fd, &e);
  if (n > 0) {
    dist__tcp_wake(t); /* a driver in poll() takes it in */
    return;
  }
  if (n < 0)
    DIST_LOG(WARNING, TCP, "group %s: rank %d dropped a data connection from %s: %s",
             t->g->name, t->g->global_rank, pn, e.msg);
  if (n != -2)
    close(fd); /* refused (the peer takes this rank's connection) or failed */
}

static void *acceptor_main(void *arg) {
  dist__tcp *t = arg;
  tcp_lazy *z = t->lazy;
  struct pollfd pf[TCP_LANES_MAX + 1];
  for (;;) {
    pf[0] = (struct pollfd){z->stopfd, POLLIN, 0};
    for (int i = 0; i < z->nl; i++)
      pf[i + 1] = (struct pollfd){z->lfds[i], POLLIN, 0};
    int k = poll(pf, (nfds_t)z->nl + 1, -1);
    if (k < 0 && errno != EINTR) {
      DIST_LOG(ERROR, TCP, "group %s: the data listeners failed (%s); no more connections "
               "are answered", t->g->name, strerror(errno));
      return NULL;
    }
    if (k > 0 && pf[0].revents)
      return NULL;
    for (int i = 0; k > 0 && i < z->nl; i++) {
      if (!pf[i + 1].revents)
        continue;
      int fd = accept4(z->lfds[i], NULL, NULL, SOCK_CLOEXEC);
      if (fd >= 0)
        answer_one(t, fd);
    }
  }
}

/* --- start and stop ------------------------------------------------------- */

/* Every member's listener list, in one wait and one read of the store. */
static int read_addrs(dist__tcp *t, dist_store *store, int64_t deadline, dist__errbuf *err) {
  int n = t->g->size;
  char(*k)[32] = dist__calloc((size_t)n, sizeof *k);
  const char **keys = dist__calloc((size_t)n, sizeof *keys);
  size_t *lens = dist__calloc((size_t)n, sizeof *lens);
  void **vals = dist__calloc((size_t)n, sizeof *vals);
  t->lazy->addrs = (char **)vals;
  int rc = k && keys && lens && vals ? DIST_OK : DIST_E_NOMEM, missing = -1;
  for (int p = 0; rc == DIST_OK && p < n; p++) {
    snprintf(k[p], sizeof k[p], "tcp/addrs/%d", p);
    keys[p] = k[p];
  }
  if (rc == DIST_OK)
    rc = dist__cpu_store_get_all(store, keys, (size_t)n, dist__remaining_ms(deadline) + 1, vals,
                                 lens, &missing);
  if (rc != DIST_OK && missing >= 0)
    dist__err_set(err, rc, "group %s: rank %d's address never came to the store: %s",
                  t->g->name, t->g->global_ranks[missing], dist_store_errmsg(store));
  else if (rc != DIST_OK)
    dist__err_set(err, rc, "group %s: reading the members' addresses: %s", t->g->name,
                  rc == DIST_E_NOMEM ? "out of memory" : dist_store_errmsg(store));
  dist__free(k);
  dist__free(keys);
  dist__free(lens);
  return rc;
}

int dist__tcp_lazy_start(dist__tcp *t, dist_store *store, const int *lfds, int nl,
                         int64_t deadline_ms, dist__errbuf *err) {
  tcp_lazy *z = dist__calloc(1, sizeof *z);
  if (!z) {
    for (int i = 0; i < nl; i++)
      close(lfds[i]);
    return dist__err_set(err, DIST_E_NOMEM, "group %s: out of memory", t->g->name);
  }
  t->lazy = z;
  memcpy(z->lfds, lfds, (size_t)nl * sizeof *lfds);
  z->nl = nl;
  z->stopfd = eventfd(0, EFD_CLOEXEC);
  pthread_mutex_init(&z->mu, NULL);
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&z->cv, &ca);
  pthread_condattr_destroy(&ca);
  z->links = dist__calloc((size_t)t->g->size, sizeof *z->links);
  /* poll() scratch for every socket the peers may agree to */
  dist__free(t->pfds);
  t->pfds = dist__calloc((size_t)t->g->size * (size_t)t->nsocks + 1, sizeof *t->pfds);
  if (!z->links || !t->pfds || z->stopfd < 0)
    return dist__err_set(err, DIST_E_NOMEM, "group %s: out of memory", t->g->name);
  /* Answering first: a peer may connect as soon as it has read the
   * addresses, before this rank has. */
  int e = pthread_create(&z->thread, NULL, acceptor_main, t);
  if (e != 0)
    return dist__err_sys(err, e, "group %s: starting the thread that answers connections",
                         t->g->name);
  z->started = true;
  /* "dist-": the monitor tells the library's threads from the program's
   * by name (monitor/src/mon_threads.c) */
  pthread_setname_np(z->thread, "dist-accept");
  DIST_TRY(read_addrs(t, store, deadline_ms, err));
  DIST_LOG(DEBUG, TCP, "group %s: rank %d connects to its peers when first needed",
           t->g->name, t->g->rank);
  return DIST_OK;
}

void dist__tcp_lazy_stop(dist__tcp *t) {
  tcp_lazy *z = t->lazy;
  if (!z)
    return;
  if (z->started) {
    z->started = false;
    uint64_t one = 1;
    ssize_t w = write(z->stopfd, &one, sizeof one);
    (void)w;
    pthread_mutex_lock(&z->mu);
    z->stopping = true;
    pthread_mutex_unlock(&z->mu);
    pthread_join(z->thread, NULL);
  }
  for (int i = 0; i < z->nl; i++)
    close(z->lfds[i]);
  z->nl = 0;
}

void dist__tcp_lazy_free(dist__tcp *t) {
  tcp_lazy *z = t->lazy;
  if (!z)
    return;
  dist__tcp_lazy_stop(t);
  for (int p = 0; z->links && p < t->g->size; p++) {
    tcp_link *l = &z->links[p];
    for (int i = 0; (l->state == LINK_ACCEPTING || l->state == LINK_PENDING) && i < l->n; i++)
      if (l->fds[i] >= 0)
        close(l->fds[i]);
  }
  for (int p = 0; z->addrs && p < t->g->size; p++)
    dist_free(z->addrs[p]);
  dist__free(z->addrs);
  dist__free(z->links);
  if (z->stopfd >= 0)
    close(z->stopfd);
  pthread_mutex_destroy(&z->mu);
  pthread_cond_destroy(&z->cv);
  dist__free(z);
  t->lazy = NULL;
}
