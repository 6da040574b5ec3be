/* ctest: labels=unit timeout=60 */
/* Socket helpers: listening and connecting over IPv4, IPv6 and names,
 * deadlines on every blocking call, peer names and address parsing. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include "mp.h"
#include "net/net.h"

static dist__errbuf e;

static void listen_on(const char *host, bool loopback, int *fd, uint16_t *port) {
  dist__err_clear(&e);
  cr_assert_eq(dist__net_listen(host, 0, loopback, 16, fd, port, &e), DIST_OK, "%s", e.msg);
  cr_assert_neq(*port, 0, "port 0 picks a free port");
}

static void connect_and_talk(int lfd, const char *host, uint16_t port) {
  int c, a;
  dist__err_clear(&e);
  cr_assert_eq(dist__net_connect(host, port, dist__deadline_ms(3000), &c, &e), DIST_OK,
               "%s", e.msg);
  cr_assert_eq(dist__net_accept(lfd, dist__deadline_ms(3000), &a, &e), DIST_OK, "%s", e.msg);
  cr_assert_eq(dist__net_write_all(c, "hello", 5, dist__deadline_ms(1000), &e), DIST_OK);
  char b[5];
  cr_assert_eq(dist__net_read_all(a, b, 5, dist__deadline_ms(1000), &e), DIST_OK);
  cr_assert(memcmp(b, "hello", 5) == 0);
  close(a);
  close(c);
}

Test(net, loopback_listen_accepts_ipv4_and_names, .timeout = 10) {
  int fd;
  uint16_t port;
  listen_on(NULL, true, &fd, &port);
  connect_and_talk(fd, "127.0.0.1", port);
  connect_and_talk(fd, "localhost", port); /* ::1 refused first is fine */
  close(fd);
}

Test(net, ipv6_addresses_work_bare_and_bracketed, .timeout = 10) {
  int fd;
  uint16_t port;
  if (dist__net_listen("::1", 0, true, 4, &fd, &port, NULL) != DIST_OK)
    cr_skip_test("no IPv6 loopback on this machine");
  connect_and_talk(fd, "::1", port);
  connect_and_talk(fd, "[::1]", port);
  close(fd);
}

Test(net, every_address_listen_is_dual_stack, .timeout = 10) {
  int fd;
  uint16_t port;
  listen_on(NULL, false, &fd, &port);
  connect_and_talk(fd, "127.0.0.1", port);
  close(fd);
}

Test(net, connect_to_a_closed_port_times_out_with_the_last_error, .timeout = 10) {
  int held, fd;
  uint16_t port = dist_test_refusing_port(&held);
  dist__err_clear(&e);
  int64_t t0 = dist__now_ms();
  int rc = dist__net_connect("127.0.0.1", port, dist__deadline_ms(300), &fd, &e);
  cr_assert_eq(rc, DIST_E_TIMEOUT);
  cr_assert(dist__now_ms() - t0 >= 250, "it retried until the deadline");
  cr_assert(strstr(e.msg, "Connection refused"), "%s", e.msg);
  close(held);
}

Test(net, an_unknown_host_name_is_reported_at_the_deadline, .timeout = 10) {
  int fd;
  dist__err_clear(&e);
  int rc = dist__net_connect("no-such-host.invalid", 1, dist__deadline_ms(200), &fd, &e);
  cr_assert_eq(rc, DIST_E_TIMEOUT);
  cr_assert(strstr(e.msg, "no-such-host.invalid"), "%s", e.msg);
}

Test(net, reads_and_accepts_respect_their_deadlines, .timeout = 10) {
  int sv[2];
  cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  char b[4];
  dist__err_clear(&e);
  cr_assert_eq(dist__net_read_all(sv[0], b, 4, dist__deadline_ms(100), &e), DIST_E_TIMEOUT);
  cr_assert_eq(write(sv[1], "ab", 2), 2);
  close(sv[1]);
  dist__err_clear(&e);
  cr_assert_eq(dist__net_read_all(sv[0], b, 4, dist__deadline_ms(1000), &e), DIST_E_CLOSED);
  cr_assert(strstr(e.msg, "2 of 4"), "%s", e.msg);
  close(sv[0]);
  int fd, a;
  uint16_t port;
  listen_on("127.0.0.1", true, &fd, &port);
  dist__err_clear(&e);
  cr_assert_eq(dist__net_accept(fd, dist__deadline_ms(100), &a, &e), DIST_E_TIMEOUT);
  close(fd);
}

Test(net, writes_to_a_closed_peer_fail_with_DIST_E_CLOSED, .timeout = 10) {
  int sv[2];
  cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  close(sv[1]);
  static char big[1 << 16];
  dist__err_clear(&e);
  cr_assert_eq(dist__net_write_all(sv[0], big, sizeof big, dist__deadline_ms(1000), &e),
               DIST_E_CLOSED, "%s", e.msg);
  close(sv[0]);
}

Test(net, writev_sends_every_piece_in_order, .timeout = 10) {
  int sv[2];
  cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  struct iovec v[3] = {{"ab", 2}, {"", 0}, {"cde", 3}};
  cr_assert_eq(dist__net_writev_all(sv[0], v, 3, dist__deadline_ms(1000), &e), DIST_OK);
  char b[5];
  cr_assert_eq(dist__net_read_all(sv[1], b, 5, dist__deadline_ms(1000), &e), DIST_OK);
  cr_assert(memcmp(b, "abcde", 5) == 0);
  close(sv[0]);
  close(sv[1]);
}

Test(net, peer_name_is_host_colon_port, .timeout = 10) {
  int fd, c, a;
  uint16_t port;
  listen_on("127.0.0.1", true, &fd, &port);
  cr_assert_eq(dist__net_connect("127.0.0.1", port, dist__deadline_ms(1000), &c, &e), 0);
  cr_assert_eq(dist__net_accept(fd, dist__deadline_ms(1000), &a, &e), DIST_OK);
  char name[64], want[64];
  dist__net_peer_name(c, name, sizeof name);
  snprintf(want, sizeof want, "127.0.0.1:%u", port);
  cr_assert_str_eq(name, want);
  close(a);
  close(c);
  close(fd);
}

Test(net, host_port_strings_are_split_or_rejected, .timeout = 10) {
  char h[64];
  uint16_t p;
  cr_assert_eq(dist__net_split_hostport("node1:29500", h, sizeof h, &p), DIST_OK);
  cr_assert(strcmp(h, "node1") == 0 && p == 29500);
  cr_assert_eq(dist__net_split_hostport("[fe80::1]:80", h, sizeof h, &p), DIST_OK);
  cr_assert(strcmp(h, "fe80::1") == 0 && p == 80);
  const char *bad[] = {"node1", "node1:", ":80", "a:b:80", "node:99999", "node:-1",
                       "[::1]80", "node:80x"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    cr_assert_eq(dist__net_split_hostport(bad[i], h, sizeof h, &p), DIST_E_INVAL, "%s",
                 bad[i]);
}

Test(net, local_address_follows_DIST_SOCKET_IFNAME_or_the_route, .timeout = 10) {
  char a[64];
  dist__err_clear(&e);
  cr_assert_eq(dist__net_local_addr_for("127.0.0.1", a, sizeof a, &e), DIST_OK, "%s", e.msg);
  cr_assert_str_eq(a, "127.0.0.1");
  setenv("DIST_SOCKET_IFNAME", "nope0,lo", 1);
  cr_assert_eq(dist__net_local_addr_for(NULL, a, sizeof a, &e), DIST_OK, "%s", e.msg);
  cr_assert_str_eq(a, "127.0.0.1");
  setenv("DIST_SOCKET_IFNAME", "nope0", 1);
  dist__err_clear(&e);
  cr_assert_eq(dist__net_local_addr_for(NULL, a, sizeof a, &e), DIST_E_INVAL);
  cr_assert(strstr(e.msg, "nope0"), "%s", e.msg);
  unsetenv("DIST_SOCKET_IFNAME");
}

/* One loopback test for the store client and the rendezvous (there were
 * two, one without brackets). */
Test(net, loopback_hosts_are_recognised_bare_and_bracketed, .timeout = 10) {
  const char *yes[] = {"127.0.0.1", "127.4.5.6", "::1", "[::1]", "localhost"};
  const char *no[] = {"10.0.0.1", "0.0.0.0", "::", "[2001:db8::1]", "example.org", ""};
  for (size_t i = 0; i < sizeof yes / sizeof yes[0]; i++)
    cr_assert(dist__net_is_loopback(yes[i]), "%s", yes[i]);
  for (size_t i = 0; i < sizeof no / sizeof no[0]; i++)
    cr_assert(!dist__net_is_loopback(no[i]), "%s", no[i]);
}
