/* net.c - socket helpers: listen and connect over IPv4, IPv6 and names,
 * accept, whole reads and writes, each bounded by an absolute deadline.
 *
 * Every blocking step is a poll() against the deadline, never a bare
 * blocking syscall, so a silent peer cannot hang a caller. Sends use
 * MSG_NOSIGNAL so a closed peer is an error code, not a SIGPIPE. */
#include "net.h"

/* How often a connect that keeps failing says so at WARNING. */
#define CONNECT_PROGRESS_MS 30000

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

/* Longest pause between connect attempts. */
#define CONNECT_BACKOFF_MAX_MS 1000

int dist__net_set_nonblock(int fd, bool on) {
  int fl = fcntl(fd, F_GETFL);
  if (fl < 0)
    return DIST_E_SYS;
  fl = on ? fl | O_NONBLOCK : fl & ~O_NONBLOCK;
  return fcntl(fd, F_SETFL, fl) == 0 ? DIST_OK : DIST_E_SYS;
}

int dist__net_set_nodelay(int fd) {
  int one = 1;
  return setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) == 0 ? DIST_OK
                                                                         : DIST_E_SYS;
}

/* Strips the brackets of "[v6]" into out. */
static void unbracket(const char *host, char *out, size_t len) {
  size_t n = strlen(host);
  if (n >= 2 && host[0] == '[' && host[n - 1] == ']')
    snprintf(out, len, "%.*s", (int)(n - 2), host + 1);
  else
    snprintf(out, len, "%s", host);
}

bool dist__net_is_loopback(const char *host) {
  char h[DIST_NET_HOSTLEN];
  unbracket(host, h, sizeof h);
  struct in_addr a4;
  struct in6_addr a6;
  if (inet_pton(AF_INET, h, &a4) == 1)
    return (ntohl(a4.s_addr) >> 24) == 127;
  if (inet_pton(AF_INET6, h, &a6) == 1)
    return IN6_IS_ADDR_LOOPBACK(&a6);
  return strcmp(h, "localhost") == 0;
}

static void format_addr(const struct sockaddr *sa, char *out, size_t len) {
  char h[INET6_ADDRSTRLEN] = "?";
  unsigned port = 0;
  if (sa->sa_family == AF_INET) {
    const struct sockaddr_in *a = (const struct sockaddr_in *)sa;
    inet_ntop(AF_INET, &a->sin_addr, h, sizeof h);
    port = ntohs(a->sin_port);
    snprintf(out, len, "%s:%u", h, port);
  } else if (sa->sa_family == AF_INET6) {
    const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)sa;
    inet_ntop(AF_INET6, &a->sin6_addr, h, sizeof h);
    port = ntohs(a->sin6_port);
    snprintf(out, len, "[%s]:%u", h, port);
  } else {
    snprintf(out, len, "(family %d)", sa->sa_family);
  }
}

/* --- listen ---------------------------------------------------------------- */

static int bind_one(const struct addrinfo *ai, int backlog, int *fd) {
  int s = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
  if (s < 0)
    return errno;
  int one = 1, zero = 0;
  setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  /* "::" serves IPv4 too (dual stack) when we were asked for every address. */
  if (ai->ai_family == AF_INET6) {
    const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)ai->ai_addr;
    bool any = IN6_IS_ADDR_UNSPECIFIED(&a->sin6_addr);
    setsockopt(s, IPPROTO_IPV6, IPV6_V6ONLY, any ? &zero : &one, sizeof one);
  }
  if (bind(s, ai->ai_addr, ai->ai_addrlen) != 0 || listen(s, backlog) != 0) {
    int err = errno;
    close(s);
    return err;
  }
  *fd = s;
  return 0;
}

/* Binds the first address of host that works; returns 0 or an errno (or
 * -1 with *gai set when the name does not resolve). */
static int listen_host(const char *host, uint16_t port, int backlog, int *fd, int *gai) {
  char pbuf[8];
  snprintf(pbuf, sizeof pbuf, "%u", port);
  struct addrinfo hints = {0}, *res = NULL;
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  *gai = getaddrinfo(host, pbuf, &hints, &res);
  if (*gai != 0)
    return -1;
  int err = EADDRNOTAVAIL;
  for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
    err = bind_one(ai, backlog, fd);
    if (err == 0)
      break;
  }
  freeaddrinfo(res);
  return err;
}

static uint16_t local_port(int fd) {
  struct sockaddr_storage ss;
  socklen_t sl = sizeof ss;
  if (getsockname(fd, (struct sockaddr *)&ss, &sl) != 0)
    return 0;
  if (ss.ss_family == AF_INET)
    return ntohs(((struct sockaddr_in *)&ss)->sin_port);
  return ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
}

int dist__net_listen(const char *host, uint16_t port, bool loopback_only, int backlog,
                     int *fd, uint16_t *bound_port, dist__errbuf *e) {
  static const char *const loop_hosts[] = {"127.0.0.1", "::1"};
  static const char *const any_hosts[] = {"::", "0.0.0.0"};
  const char *const *cands = loopback_only ? loop_hosts : any_hosts;
  size_t ncand = 2;
  char h[DIST_NET_HOSTLEN];
  const char *one[1] = {h};
  if (host && *host) {
    unbracket(host, h, sizeof h);
    cands = one;
    ncand = 1;
  }
  int err = 0, gai = 0;
  *fd = -1;
  for (size_t i = 0; i < ncand && *fd < 0; i++)
    err = listen_host(cands[i], port, backlog > 0 ? backlog : 128, fd, &gai);
  if (*fd < 0) {
    const char *what = host && *host ? host : loopback_only ? "loopback" : "any address";
    if (err < 0)
      return dist__err_set(e, DIST_E_INVAL, "cannot listen on %s:%u: %s", what, port,
                           gai_strerror(gai));
    return dist__err_sys(e, err, "cannot listen on %s:%u", what, port);
  }
  if (bound_port)
    *bound_port = local_port(*fd);
  return DIST_OK;
}

/* --- connect --------------------------------------------------------------- */

/* Waits for fd to be ready for events; 0 on readiness, ETIMEDOUT at the
 * deadline, or an errno. */
static int wait_fd(int fd, short events, int64_t deadline_ms) {
  for (;;) {
    int64_t left = dist__remaining_ms(deadline_ms);
    struct pollfd p = {fd, events, 0};
    int n = poll(&p, 1, left > INT32_MAX ? INT32_MAX : (int)left);
    if (n > 0)
      return 0;
    if (n == 0) {
      if (dist__now_ms() >= deadline_ms)
        return ETIMEDOUT;
      continue;
    }
    if (errno != EINTR)
      return errno;
  }
}

/* One non-blocking connect to one address; 0 with *fd set, or an errno. */
static int connect_addr(const struct addrinfo *ai, int64_t deadline_ms, int *fd) {
  int s = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK,
                 ai->ai_protocol);
  if (s < 0)
    return errno;
  int err = 0;
  if (connect(s, ai->ai_addr, ai->ai_addrlen) != 0) {
    err = errno;
    if (err == EINPROGRESS) {
      err = wait_fd(s, POLLOUT, deadline_ms);
      socklen_t sl = sizeof err;
      if (err == 0 && getsockopt(s, SOL_SOCKET, SO_ERROR, &err, &sl) != 0)
        err = errno;
    }
  }
  if (err == 0 && (dist__net_set_nonblock(s, false) != DIST_OK ||
                   dist__net_set_nodelay(s) != DIST_OK))
    err = errno;
  if (err != 0) {
    close(s);
    return err;
  }
  *fd = s;
  return 0;
}

/* One round over every address of host; 0 on success, else fills why. */
static int connect_round(const char *host, uint16_t port, int64_t deadline_ms, int *fd,
                         char *why, size_t whylen) {
  char pbuf[8];
  snprintf(pbuf, sizeof pbuf, "%u", port);
  struct addrinfo hints = {0}, *res = NULL;
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  int gai = getaddrinfo(host, pbuf, &hints, &res);
  if (gai != 0) {
    snprintf(why, whylen, "cannot resolve '%s': %s", host,
             gai == EAI_SYSTEM ? strerror(errno) : gai_strerror(gai));
    return -1;
  }
  int err = ECONNREFUSED;
  for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
    err = connect_addr(ai, deadline_ms, fd);
    if (err == 0)
      break;
    char a[DIST_NET_HOSTLEN];
    format_addr(ai->ai_addr, a, sizeof a);
    snprintf(why, whylen, "%s: %s", a, strerror(err));
  }
  freeaddrinfo(res);
  return err;
}

int dist__net_connect(const char *host, uint16_t port, int64_t deadline_ms, int *fd,
                      dist__errbuf *e) {
  if (!host || !*host || !fd)
    return dist__err_set(e, DIST_E_INVAL, "connect: no host given");
  char h[DIST_NET_HOSTLEN];
  unbracket(host, h, sizeof h);
  char why[512] = "no attempt made";
  int64_t t0 = dist__now_ms(), backoff = 10, next_warn = t0 + CONNECT_PROGRESS_MS;
  int attempts = 0;
  *fd = -1;
  for (;;) {
    attempts++;
    if (connect_round(h, port, deadline_ms, fd, why, sizeof why) == 0)
      return DIST_OK;
    /* Refused, unreachable, unresolvable: the server may simply not be up
     * yet (torch retries the same way), so keep trying until the deadline,
     * saying so (at once at DEBUG, every 30 s at WARNING) rather than
     * waiting in silence. */
    int64_t left = dist__remaining_ms(deadline_ms);
    if (attempts == 1)
      DIST_LOG(DEBUG, CORE, "cannot connect to %s:%u yet (%s); retrying for %lld s", host, port,
               why, (long long)(left / 1000));
    if (dist__now_ms() >= next_warn && left > 0) {
      DIST_LOG(WARNING, CORE, "still cannot connect to %s:%u after %lld s (%d attempts; last "
               "error: %s); giving up in %lld s", host, port,
               (long long)((dist__now_ms() - t0) / 1000), attempts, why, (long long)(left / 1000));
      next_warn += CONNECT_PROGRESS_MS;
    }
    if (left == 0)
      return dist__err_set(e, DIST_E_TIMEOUT,
                           "could not connect to %s:%u within %lld ms (%d attempts; "
                           "last error: %s)",
                           host, port, (long long)(dist__now_ms() - t0), attempts, why);
    dist__sleep_ms(backoff < left ? backoff : left);
    backoff = backoff * 2 > CONNECT_BACKOFF_MAX_MS ? CONNECT_BACKOFF_MAX_MS : backoff * 2;
  }
}

int dist__net_connect_once(const char *host, uint16_t port, int64_t deadline_ms, int *fd,
                           dist__errbuf *e) {
  if (!host || !*host || !fd)
    return dist__err_set(e, DIST_E_INVAL, "connect: no host given");
  char h[DIST_NET_HOSTLEN], why[512] = "no attempt made";
  unbracket(host, h, sizeof h);
  *fd = -1;
  int err = connect_round(h, port, deadline_ms, fd, why, sizeof why);
  if (err == 0)
    return DIST_OK;
  return dist__err_set(e, err == ETIMEDOUT ? DIST_E_TIMEOUT : DIST_E_CLOSED, "%s", why);
}

int dist__net_accept(int lfd, int64_t deadline_ms, int *fd, dist__errbuf *e) {
  for (;;) {
    int err = wait_fd(lfd, POLLIN, deadline_ms);
    if (err == ETIMEDOUT)
      return dist__err_set(e, DIST_E_TIMEOUT, "no connection arrived before the deadline");
    if (err != 0)
      return dist__err_sys(e, err, "poll on listening socket");
    int s = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
    if (s >= 0) {
      dist__net_set_nonblock(s, false);
      dist__net_set_nodelay(s);
      *fd = s;
      return DIST_OK;
    }
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR &&
        errno != ECONNABORTED)
      return dist__err_sys(e, errno, "accept");
  }
}

/* --- whole reads and writes ------------------------------------------------ */

static int io_fail(dist__errbuf *e, int err, const char *what, size_t done, size_t len) {
  if (err == ETIMEDOUT)
    return dist__err_set(e, DIST_E_TIMEOUT, "%s timed out (%zu of %zu bytes)", what, done,
                         len);
  if (err == EPIPE || err == ECONNRESET || err == 0)
    return dist__err_set(e, DIST_E_CLOSED, "peer closed the connection during %s (%zu of "
                         "%zu bytes)", what, done, len);
  return dist__err_sys(e, err, "%s", what);
}

int dist__net_writev_all(int fd, struct iovec *iov, int iovcnt, int64_t deadline_ms,
                         dist__errbuf *e) {
  size_t total = 0, done = 0;
  for (int i = 0; i < iovcnt; i++)
    total += iov[i].iov_len;
  while (iovcnt > 0) {
    struct msghdr m = {0};
    m.msg_iov = iov;
    m.msg_iovlen = (size_t)iovcnt;
    ssize_t n = sendmsg(fd, &m, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EINTR)
        continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK)
        return io_fail(e, errno, "write", done, total);
      int err = wait_fd(fd, POLLOUT, deadline_ms);
      if (err != 0)
        return io_fail(e, err, "write", done, total);
      continue;
    }
    done += (size_t)n;
    /* Drop the iovecs written in full; trim the first partial one. */
    while (iovcnt > 0 && (size_t)n >= iov->iov_len) {
      n -= (ssize_t)iov->iov_len;
      iov++;
      iovcnt--;
    }
    if (iovcnt > 0) {
      iov->iov_base = (char *)iov->iov_base + n;
      iov->iov_len -= (size_t)n;
    }
  }
  return DIST_OK;
}

int dist__net_write_all(int fd, const void *buf, size_t len, int64_t deadline_ms,
                        dist__errbuf *e) {
  struct iovec v = {(void *)buf, len};
  return dist__net_writev_all(fd, &v, 1, deadline_ms, e);
}

int dist__net_read_all(int fd, void *buf, size_t len, int64_t deadline_ms,
                       dist__errbuf *e) {
  size_t done = 0;
  while (done < len) {
    ssize_t n = recv(fd, (char *)buf + done, len - done, MSG_DONTWAIT);
    if (n > 0) {
      done += (size_t)n;
      continue;
    }
    if (n == 0)
      return io_fail(e, 0, "read", done, len);
    if (errno == EINTR)
      continue;
    if (errno == ENOTSOCK) { /* a pipe in a test: plain read after poll */
      int err = wait_fd(fd, POLLIN, deadline_ms);
      if (err != 0)
        return io_fail(e, err, "read", done, len);
      n = read(fd, (char *)buf + done, len - done);
      if (n <= 0)
        return io_fail(e, n == 0 ? 0 : errno, "read", done, len);
      done += (size_t)n;
      continue;
    }
    if (errno != EAGAIN && errno != EWOULDBLOCK)
      return io_fail(e, errno, "read", done, len);
    int err = wait_fd(fd, POLLIN, deadline_ms);
    if (err != 0)
      return io_fail(e, err, "read", done, len);
  }
  return DIST_OK;
}

/* --- addresses ------------------------------------------------------------- */

void dist__net_peer_name(int fd, char *out, size_t len) {
  struct sockaddr_storage ss;
  socklen_t sl = sizeof ss;
  if (getpeername(fd, (struct sockaddr *)&ss, &sl) != 0) {
    snprintf(out, len, "(unknown peer: %s)", strerror(errno));
    return;
  }
  format_addr((struct sockaddr *)&ss, out, len);
}

static int addr_text(const struct sockaddr *sa, char *out, size_t len) {
  const void *a = sa->sa_family == AF_INET
                      ? (const void *)&((const struct sockaddr_in *)sa)->sin_addr
                      : (const void *)&((const struct sockaddr_in6 *)sa)->sin6_addr;
  return inet_ntop(sa->sa_family, a, out, (socklen_t)len) ? DIST_OK : DIST_E_SYS;
}

/* The first IPv4 (else IPv6) address of interface name (l bytes). */
static bool if_addr(const struct ifaddrs *ifs, const char *name, size_t l, char *out,
                    size_t len) {
  for (int fam = 0; fam < 2; fam++)
    for (const struct ifaddrs *i = ifs; i; i = i->ifa_next)
      if (i->ifa_addr && i->ifa_addr->sa_family == (fam ? AF_INET6 : AF_INET) &&
          strlen(i->ifa_name) == l && strncmp(name, i->ifa_name, l) == 0 &&
          addr_text(i->ifa_addr, out, len) == DIST_OK)
        return true;
  return false;
}

/* The addresses of the comma-listed interfaces, in the list's order (a
 * name listed twice counts twice; names without an address are skipped). */
static int ifname_addrs(const char *var, const char *names, dist__net_addr *out, int max,
                        int *n, dist__errbuf *e) {
  struct ifaddrs *ifs;
  if (getifaddrs(&ifs) != 0)
    return dist__err_sys(e, errno, "getifaddrs");
  *n = 0;
  for (const char *p = names; *p && *n < max;) {
    size_t l = strcspn(p, ",");
    if (l > 0 && l < sizeof out[*n].ifname &&
        if_addr(ifs, p, l, out[*n].addr, sizeof out[*n].addr)) {
      memcpy(out[*n].ifname, p, l);
      out[*n].ifname[l] = '\0';
      (*n)++;
    }
    p += l + (p[l] == ',');
  }
  freeifaddrs(ifs);
  if (*n == 0)
    return dist__err_set(e, DIST_E_INVAL,
                         "%s='%s': no interface of that name has an address", var,
                         names);
  return DIST_OK;
}

/* The address of the interface that routes to peer_host (NULL: the
 * hostname's own address). */
static int route_addr(const char *peer_host, char *out, size_t len, dist__errbuf *e) {
  char h[DIST_NET_HOSTLEN];
  unbracket(peer_host ? peer_host : dist__hostname(), h, sizeof h);
  struct addrinfo hints = {0}, *res = NULL;
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_DGRAM;
  int gai = getaddrinfo(h, "9", &hints, &res);
  if (gai != 0)
    return dist__err_set(e, DIST_E_INVAL, "cannot resolve '%s': %s", h, gai_strerror(gai));
  int rc = DIST_E_SYS;
  if (!peer_host) { /* the hostname's own address */
    rc = addr_text(res->ai_addr, out, len);
  } else {
    /* A connected UDP socket sends nothing but makes the kernel pick the
     * route, and so the local address, towards the peer. */
    for (struct addrinfo *ai = res; ai && rc != DIST_OK; ai = ai->ai_next) {
      int s = socket(ai->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
      struct sockaddr_storage ss;
      socklen_t sl = sizeof ss;
      if (s >= 0 && connect(s, ai->ai_addr, ai->ai_addrlen) == 0 &&
          getsockname(s, (struct sockaddr *)&ss, &sl) == 0)
        rc = addr_text((struct sockaddr *)&ss, out, len);
      if (s >= 0)
        close(s);
    }
  }
  freeaddrinfo(res);
  if (rc != DIST_OK)
    return dist__err_set(e, DIST_E_SYS, "no local address routes to '%s'", h);
  return DIST_OK;
}

int dist__net_local_addrs(const char *peer_host, dist__net_addr *out, int max, int *n,
                          dist__errbuf *e) {
  const char *var;
  const char *ifn = dist_getenv("DIST_SOCKET_IFNAME", &var); /* or GLOO_SOCKET_IFNAME */
  if (ifn)
    return ifname_addrs(var, ifn, out, max, n, e);
  *n = 0;
  out[0].ifname[0] = '\0';
  DIST_TRY(route_addr(peer_host, out[0].addr, sizeof out[0].addr, e));
  *n = 1;
  return DIST_OK;
}

int dist__net_local_addr_for(const char *peer_host, char *out, size_t len,
                             dist__errbuf *e) {
  dist__net_addr a[1];
  int n = 0;
  DIST_TRY(dist__net_local_addrs(peer_host, a, 1, &n, e));
  snprintf(out, len, "%s", a[0].addr);
  return DIST_OK;
}

int dist__net_split_hostport(const char *s, char *host, size_t hostlen, uint16_t *port) {
  if (!s || !host || !port)
    return dist__set_last_error(DIST_E_INVAL, "host:port: missing argument");
  const char *colon;
  const char *hs = s;
  size_t hl;
  if (s[0] == '[') {
    const char *rb = strchr(s, ']');
    if (!rb || rb[1] != ':')
      return dist__set_last_error(DIST_E_INVAL, "'%s' is not [v6-address]:port", s);
    hs = s + 1;
    hl = (size_t)(rb - hs);
    colon = rb + 1;
  } else {
    colon = strrchr(s, ':');
    if (!colon || strchr(s, ':') != colon)
      return dist__set_last_error(DIST_E_INVAL,
                                  "'%s' is not host:port (write IPv6 as [addr]:port)", s);
    hl = (size_t)(colon - s);
  }
  char *end;
  errno = 0;
  unsigned long p = strtoul(colon + 1, &end, 10);
  if (hl == 0 || hl >= hostlen || colon[1] == '\0' || *end != '\0' || errno || p > 65535 ||
      colon[1] == '-' || colon[1] == '+')
    return dist__set_last_error(DIST_E_INVAL, "'%s' is not host:port", s);
  memcpy(host, hs, hl);
  host[hl] = '\0';
  *port = (uint16_t)p;
  return DIST_OK;
}
