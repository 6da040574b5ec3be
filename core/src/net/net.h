/* net.h - socket helpers shared by the TCP store, the CPU backend's TCP
 * transport and distrun: listen/connect (IPv4, IPv6, names), deadlines,
 * whole reads and writes. Every blocking helper takes an absolute deadline
 * (dist__deadline_ms) and fails with DIST_E_TIMEOUT when it passes. Errors
 * are written to e (may be NULL) and returned. Sockets are CLOEXEC. */
#ifndef DIST_NET_H
#define DIST_NET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "base/dist_int.h"

#define DIST_NET_HOSTLEN 256

/* A listening TCP socket on host:port (host NULL: every address when
 * !loopback_only, else 127.0.0.1 and ::1 as available; port 0 picks a free
 * port, returned in *bound_port). */
int dist__net_listen(const char *host, uint16_t port, bool loopback_only, int backlog,
                     int *fd, uint16_t *bound_port, dist__errbuf *e);
/* Whether host ("[v6]" accepted) is a loopback address or "localhost". */
bool dist__net_is_loopback(const char *host);
/* Connects to host:port (a name, IPv4 or IPv6 address, "[v6]" accepted),
 * retrying refused/unreachable attempts with backoff until the deadline.
 * The socket is blocking with TCP_NODELAY set. */
int dist__net_connect(const char *host, uint16_t port, int64_t deadline_ms, int *fd,
                      dist__errbuf *e);
/* One attempt, no retry: for a peer known to be listening, whose refusal
 * means it is gone (DIST_E_CLOSED; DIST_E_TIMEOUT at the deadline). */
int dist__net_connect_once(const char *host, uint16_t port, int64_t deadline_ms, int *fd,
                           dist__errbuf *e);
/* Accepts one connection, waiting up to the deadline. */
int dist__net_accept(int lfd, int64_t deadline_ms, int *fd, dist__errbuf *e);
int dist__net_set_nonblock(int fd, bool on);
int dist__net_set_nodelay(int fd);
/* Writes/reads exactly len bytes, polling on EAGAIN, until the deadline.
 * A peer that closes mid-read is DIST_E_CLOSED. */
int dist__net_write_all(int fd, const void *buf, size_t len, int64_t deadline_ms,
                        dist__errbuf *e);
int dist__net_writev_all(int fd, struct iovec *iov, int iovcnt, int64_t deadline_ms,
                         dist__errbuf *e);
int dist__net_read_all(int fd, void *buf, size_t len, int64_t deadline_ms,
                       dist__errbuf *e);
/* One local address to listen on, and the interface it belongs to ("" when
 * the route chose it). */
typedef struct dist__net_addr {
  char addr[DIST_NET_HOSTLEN];
  char ifname[32];
} dist__net_addr;
/* Every address other hosts may use to reach this one: with
 * DIST_SOCKET_IFNAME (or GLOO_SOCKET_IFNAME), one per listed interface that
 * has an address, in the list's order (up to max; "lo,lo" gives two: Gloo's
 * rule, connections use them round-robin); else the one that routes to
 * peer_host (NULL: the hostname's). *n >= 1 on success. */
int dist__net_local_addrs(const char *peer_host, dist__net_addr *out, int max, int *n,
                          dist__errbuf *e);
/* The address other hosts should use to reach this one: the first address
 * of DIST_SOCKET_IFNAME (comma list of interface names) when set, else the
 * address of the interface that routes to host (NULL: the hostname's). */
int dist__net_local_addr_for(const char *peer_host, char *out, size_t len,
                             dist__errbuf *e);
/* "host:port" of the socket's peer (for messages). */
void dist__net_peer_name(int fd, char *out, size_t len);
/* Splits "host:port" / "[v6]:port"; DIST_E_INVAL on a malformed string. */
int dist__net_split_hostport(const char *s, char *host, size_t hostlen, uint16_t *port);

#endif
