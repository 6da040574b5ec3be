/* store_tcp_tenant.c - which server a TCP store hosts: its own, started on
 * host:port or on the caller's listening socket (master_listen_fd), or the
 * process's shared one for its port (multi_tenant, as torch's TCPStore
 * keeps one TCPServer per port for every multi-tenant store).
 *
 * Shared servers live in a registry keyed by port, each with a reference
 * count: the store that finds none starts one, the others connect to it,
 * and the last handle released stops it. The registry's lock is held while
 * a shared server starts, so two threads creating stores on one port
 * cannot both start one. A forked child inherits entries whose server
 * thread it does not have: as everywhere in libdist, fork before stores. */
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "net/net.h"
#include "store_int.h"
#include "store_tcp_proto.h"

typedef struct tenant {
  struct tenant *next;
  uint16_t port;
  char *token;
  stp_server *srv;
  int refs;
} tenant;

static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static tenant *registry;

static const char *tok(const dist_store_tcp_opts *o) { return o->token ? o->token : ""; }

/* Where this process's own client connects to a server bound to host. */
static void own_host(const char *host, char *out, size_t len) {
  if (!host || !*host || !strcmp(host, "0.0.0.0") || !strcmp(host, "::") ||
      !strcmp(host, "[::]"))
    host = "localhost";
  snprintf(out, len, "%s", host);
}

/* --- master_listen_fd ---------------------------------------------------------- */

/* The port and address of fd, which must be a listening TCP socket. */
static int inspect_fd(int fd, uint16_t *port, char *addr, size_t len) {
  struct stat st;
  int type = 0, acc = 0;
  socklen_t tl = sizeof type, al = sizeof acc;
  struct sockaddr_storage ss;
  socklen_t sl = sizeof ss;
  if (fstat(fd, &st) != 0)
    return dist__set_last_error(DIST_E_INVAL, "master_listen_fd %d: %s", fd, strerror(errno));
  if (!S_ISSOCK(st.st_mode) || getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &tl) != 0 ||
      type != SOCK_STREAM || getsockname(fd, (struct sockaddr *)&ss, &sl) != 0 ||
      (ss.ss_family != AF_INET && ss.ss_family != AF_INET6))
    return dist__set_last_error(DIST_E_INVAL, "master_listen_fd %d is not a TCP socket", fd);
  if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &acc, &al) != 0 || !acc)
    return dist__set_last_error(DIST_E_INVAL, "master_listen_fd %d is a TCP socket but not "
                                "listening (call bind and listen first)", fd);
  bool v4 = ss.ss_family == AF_INET;
  const struct sockaddr_in *a4 = (const void *)&ss;
  const struct sockaddr_in6 *a6 = (const void *)&ss;
  *port = ntohs(v4 ? a4->sin_port : a6->sin6_port);
  if (!inet_ntop(ss.ss_family, v4 ? (const void *)&a4->sin_addr : (const void *)&a6->sin6_addr,
                 addr, (socklen_t)len))
    return dist__set_last_error(DIST_E_INVAL, "master_listen_fd %d: unreadable address", fd);
  return DIST_OK;
}

/* Checks fd against o and fills so with a duplicate of it to serve on. */
static int take_fd(const dist_store_tcp_opts *o, stp_server_opts *so, char *own, size_t len) {
  char addr[INET6_ADDRSTRLEN];
  uint16_t port = 0;
  DIST_TRY(inspect_fd(o->master_listen_fd, &port, addr, sizeof addr));
  if (o->port && o->port != port)
    return dist__set_last_error(DIST_E_INVAL, "master_listen_fd %d listens on port %u but "
                                "the store was asked for port %u", o->master_listen_fd,
                                port, o->port);
  bool loopback = !strcmp(addr, "127.0.0.1") || !strcmp(addr, "::1");
  if (!*tok(o) && !o->allow_remote && !loopback)
    return dist__set_last_error(DIST_E_INVAL, "refusing to serve the store on %s (the "
                                "master_listen_fd) without a job token: set DIST_TOKEN, or "
                                "DIST_ALLOW_NO_TOKEN=1 for unauthenticated clients", addr);
  int dup = fcntl(o->master_listen_fd, F_DUPFD_CLOEXEC, 3);
  if (dup < 0)
    return dist__set_last_error(DIST_E_SYS, "duplicating master_listen_fd %d: %s",
                                o->master_listen_fd, strerror(errno));
  so->listen_fd = dup;
  so->port = port;
  own_host(addr, own, len);
  return DIST_OK;
}

/* --- starting ---------------------------------------------------------------------- */

static int start(const dist_store_tcp_opts *o, int64_t timeout_ms, stp_server **srv,
                 char *own, size_t len) {
  bool has_token = *tok(o);
  if (!has_token && !o->allow_remote && o->host && *o->host && !dist__net_is_loopback(o->host))
    return dist__set_last_error(DIST_E_INVAL, "refusing to serve the store on %s without a "
                                "job token: set DIST_TOKEN, or DIST_ALLOW_NO_TOKEN=1 to "
                                "accept unauthenticated clients from the network", o->host);
  (void)timeout_ms; /* the handshake's deadline is its own (dist__stp_handshake_ms) */
  bool local = !has_token && !o->allow_remote;
  stp_server_opts so = {o->host, o->port, local, o->token, 0, 0, 0, local};
  own_host(o->host, own, len);
  if (o->master_listen_fd > 0)
    DIST_TRY(take_fd(o, &so, own, len));
  return dist__stp_server_start(&so, srv, NULL);
}

static tenant *find_port(uint16_t port) {
  for (tenant *t = registry; t && port; t = t->next)
    if (t->port == port)
      return t;
  return NULL;
}

/* Under reg_lock: one more reference to the port's server, or a new one. */
static int share(const dist_store_tcp_opts *o, int64_t timeout_ms, stp_server **srv,
                 char *own, size_t len) {
  tenant *t = find_port(o->port);
  if (t) {
    if (strcmp(t->token, tok(o)))
      return dist__set_last_error(DIST_E_INVAL, "multi_tenant: this process's store server "
                                  "on port %u serves another job token", o->port);
    if (o->master_listen_fd > 0)
      return dist__set_last_error(DIST_E_INVAL, "multi_tenant: this process already serves "
                                  "a store on port %u; give no master_listen_fd to share "
                                  "it", o->port);
    own_host(o->host, own, len);
    t->refs++;
    *srv = t->srv;
    return DIST_OK;
  }
  t = dist__calloc(1, sizeof *t);
  if (!t || !(t->token = dist__strdup(tok(o)))) {
    dist__free(t);
    return dist__set_last_error(DIST_E_NOMEM, "out of memory registering a store server");
  }
  int rc = start(o, timeout_ms, &t->srv, own, len);
  if (rc != DIST_OK) {
    dist__free(t->token);
    dist__free(t);
    return rc;
  }
  t->port = dist__stp_server_port(t->srv);
  t->refs = 1;
  t->next = registry;
  registry = t;
  *srv = t->srv;
  return DIST_OK;
}

int dist__stp_acquire(const dist_store_tcp_opts *o, int64_t timeout_ms, stp_server **srv,
                      bool *shared, char *own, size_t len) {
  *shared = o->multi_tenant;
  if (!o->multi_tenant)
    return start(o, timeout_ms, srv, own, len);
  pthread_mutex_lock(&reg_lock);
  int rc = share(o, timeout_ms, srv, own, len);
  pthread_mutex_unlock(&reg_lock);
  return rc;
}

void dist__stp_release(stp_server *srv, bool shared) {
  if (!srv)
    return;
  if (!shared) {
    dist__stp_server_stop(srv);
    return;
  }
  pthread_mutex_lock(&reg_lock);
  tenant **pp = &registry;
  while (*pp && (*pp)->srv != srv)
    pp = &(*pp)->next;
  tenant *t = *pp;
  DIST_ASSERT(t);
  bool last = t && --t->refs == 0;
  if (last)
    *pp = t->next;
  pthread_mutex_unlock(&reg_lock);
  if (!last)
    return;
  dist__stp_server_stop(srv);
  dist__free(t->token);
  dist__free(t);
}
