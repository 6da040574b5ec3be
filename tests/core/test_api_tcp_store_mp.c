/* ctest: labels=multiproc timeout=180 */
/* The TCP store's torch options and the stores' getters, through the
 * public header only: multi_tenant (two servers asked for one port in one
 * process share it; the server lives until the last of them is destroyed;
 * without the option the second fails), master_listen_fd (the server
 * serves on a socket the test bound and set listening, here for three real
 * forked ranks that rendezvous and all_reduce over it; descriptors that are
 * not listening TCP sockets are refused), and the getters (TCP host and
 * port, file store path, a prefix store's underlying store and prefix,
 * kinds), NULL for the wrong kind. */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "mp.h"
#include "tmpdir.h"

static dist_store_tcp_opts server_opts(uint16_t port, bool multi_tenant) {
  dist_store_tcp_opts o = {0};
  o.host = "127.0.0.1";
  o.port = port;
  o.is_server = true;
  o.timeout_ms = 10000;
  o.multi_tenant = multi_tenant;
  return o;
}

static int client(uint16_t port, int64_t timeout_ms, dist_store **out) {
  dist_store_tcp_opts o = {0};
  o.host = "127.0.0.1";
  o.port = port;
  o.timeout_ms = timeout_ms;
  return dist_store_tcp_create(&o, out);
}

static void expect_value(dist_store *s, const char *key, const char *want) {
  void *v = NULL;
  size_t n = 0;
  int rc = dist_store_get(s, key, &v, &n);
  cr_expect_eq(rc, DIST_OK, "get %s: %s", key, dist_store_errmsg(s));
  cr_expect(rc != DIST_OK || (n == strlen(want) && !strcmp(v, want)), "get %s: '%s'", key,
            rc == DIST_OK ? (char *)v : "");
  dist_free(v);
}

/* --- multi_tenant ---------------------------------------------------------- */

Test(core_api, tcp_multi_tenant_stores_share_one_server_port, .timeout = 60) {
  dist_store_tcp_opts o = server_opts(0, true);
  dist_store *a, *b, *c, *d;
  cr_assert_eq(dist_store_tcp_create(&o, &a), DIST_OK, "%s", dist_last_errmsg());
  uint16_t port = dist_store_tcp_port(a);
  cr_assert_neq(port, 0);
  /* Without multi_tenant the port is taken. */
  o = server_opts(port, false);
  int rc = dist_store_tcp_create(&o, &c);
  cr_expect_neq(rc, DIST_OK, "a second plain server on port %u", port);
  cr_expect(strstr(dist_last_errmsg(), "in use"), "message: %s", dist_last_errmsg());
  /* With it, the second store shares the first's server. */
  o = server_opts(port, true);
  cr_assert_eq(dist_store_tcp_create(&o, &b), DIST_OK, "%s", dist_last_errmsg());
  cr_expect_eq(dist_store_tcp_port(b), port);
  cr_assert_eq(dist_store_set(a, "from_a", "1", 1), DIST_OK);
  cr_assert_eq(dist_store_set(b, "from_b", "2", 1), DIST_OK);
  expect_value(b, "from_a", "1");
  expect_value(a, "from_b", "2");
  /* Another token cannot share it. */
  o.token = "another-token";
  rc = dist_store_tcp_create(&o, &c);
  cr_expect_eq(rc, DIST_E_INVAL, "%s", dist_status_name(rc));
  cr_expect(strstr(dist_last_errmsg(), "serves another job token"), "%s", dist_last_errmsg());
  /* The first creator leaves; the server stays for the second. */
  dist_store_destroy(a);
  cr_assert_eq(dist_store_set(b, "after_a", "3", 1), DIST_OK);
  expect_value(b, "after_a", "3");
  cr_assert_eq(client(port, 5000, &d), DIST_OK, "%s", dist_last_errmsg());
  expect_value(d, "from_a", "1");
  dist_store_destroy(d);
  /* The last one stops it: nothing answers on the port any more. */
  dist_store_destroy(b);
  d = NULL;
  rc = client(port, 300, &d);
  cr_expect_neq(rc, DIST_OK, "a client connected after the last tenant left");
  dist_store_destroy(d);
}

/* --- master_listen_fd -------------------------------------------------------- */

/* A TCP socket on 127.0.0.1 with a free port; listening when listen_too. */
static int bound_socket(bool listen_too, uint16_t *port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  cr_assert(fd >= 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  cr_assert_eq(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
  if (listen_too)
    cr_assert_eq(listen(fd, 64), 0);
  socklen_t l = sizeof a;
  cr_assert_eq(getsockname(fd, (struct sockaddr *)&a, &l), 0);
  *port = ntohs(a.sin_port);
  return fd;
}

static void expect_refused(int fd, uint16_t port, const char *has) {
  dist_store_tcp_opts o = server_opts(port, false);
  o.master_listen_fd = fd;
  dist_store *s = (dist_store *)1;
  int rc = dist_store_tcp_create(&o, &s);
  cr_expect_eq(rc, DIST_E_INVAL, "fd %d: %s", fd, dist_status_name(rc));
  cr_expect(strstr(dist_last_errmsg(), has), "fd %d: '%s' lacks '%s'", fd, dist_last_errmsg(),
            has);
  cr_expect((s) == NULL);
}

Test(core_api, tcp_store_serves_on_the_callers_listening_socket, .timeout = 60) {
  uint16_t port;
  int fd = bound_socket(true, &port);
  dist_store_tcp_opts o = server_opts(0, false);
  o.master_listen_fd = fd;
  dist_store *srv, *cl;
  cr_assert_eq(dist_store_tcp_create(&o, &srv), DIST_OK, "%s", dist_last_errmsg());
  cr_expect_eq(dist_store_tcp_port(srv), port);
  close(fd); /* the caller's copy; the server keeps its own */
  cr_assert_eq(client(port, 5000, &cl), DIST_OK, "%s", dist_last_errmsg());
  cr_assert_eq(dist_store_set(cl, "k", "v", 1), DIST_OK);
  expect_value(srv, "k", "v");
  dist_store_destroy(cl);
  dist_store_destroy(srv);

  /* Refused: another port, a socket not listening, not a socket, a UDP
   * socket, a closed descriptor, a negative one, a client with one. */
  fd = bound_socket(true, &port);
  expect_refused(fd, (uint16_t)(port + 1), "but the store was asked for port");
  close(fd);
  fd = bound_socket(false, &port);
  expect_refused(fd, 0, "not listening");
  close(fd);
  int p[2];
  cr_assert_eq(pipe(p), 0);
  expect_refused(p[0], 0, "is not a TCP socket");
  close(p[0]);
  close(p[1]);
  fd = socket(AF_INET, SOCK_DGRAM, 0);
  expect_refused(fd, 0, "is not a TCP socket");
  close(fd);
  expect_refused(1000, 0, "master_listen_fd 1000");
  expect_refused(-2, 0, "not a descriptor");
  dist_store_tcp_opts c = {0};
  c.host = "127.0.0.1";
  c.port = 1;
  c.master_listen_fd = 5;
  cr_expect_eq(dist_store_tcp_create(&c, &cl), DIST_E_INVAL);
  cr_expect(strstr(dist_last_errmsg(), "only a server listens"), "%s", dist_last_errmsg());
}

/* Rank 0 serves the job's store on the socket the harness bound before
 * forking; the others connect to its port. */
typedef struct listen_arg {
  int fd;
  uint16_t port;
} listen_arg;

static int listen_rank(const dist_test_ctx *ctx) {
  const listen_arg *a = ctx->arg;
  dist_store_tcp_opts o = {0};
  o.host = "127.0.0.1";
  o.timeout_ms = 20000;
  o.world_size = ctx->world;
  if (ctx->rank == 0) {
    o.is_server = true;
    o.master_listen_fd = a->fd;
  } else {
    o.port = a->port;
  }
  dist_store *st;
  CHECK_OK(ctx, dist_store_tcp_create(&o, &st));
  close(a->fd);
  CHECK(ctx, dist_store_tcp_port(st) == a->port, "port %u", dist_store_tcp_port(st));
  dist_init_opts io = dist_init_opts_default();
  io.store = st;
  io.rank = ctx->rank;
  io.world_size = ctx->world;
  io.timeout_ms = 20000;
  CHECK_OK(ctx, dist_init_process_group(&io));
  int32_t v = 10 + ctx->rank;
  dist_tensor t = dist_tensor_1d(&v, DIST_INT32, 1);
  CHECK_OK(ctx, dist_all_reduce(&t, DIST_SUM, NULL, NULL));
  CHECK(ctx, v == 33, "all_reduce gave %d", v);
  CHECK_OK(ctx, dist_barrier(NULL, NULL));
  dist_destroy_process_group(NULL);
  dist_store_destroy(st);
  return 0;
}

Test(core_api, tcp_store_on_a_prebound_socket_hosts_a_job, .timeout = 100) {
  listen_arg a;
  a.fd = bound_socket(true, &a.port);
  int rc = dist_test_ranks(3, listen_rank, &a, 80);
  close(a.fd);
  cr_assert_eq(rc, 0, "%s", dist_test_report());
}

/* --- getters ----------------------------------------------------------------- */

Test(core_api, store_getters_name_host_port_path_and_prefix, .timeout = 30) {
  dist_store_tcp_opts o = server_opts(0, false);
  dist_store *srv, *cl, *h, *f, *p, *pp;
  cr_assert_eq(dist_store_tcp_create(&o, &srv), DIST_OK, "%s", dist_last_errmsg());
  uint16_t port = dist_store_tcp_port(srv);
  cr_assert_eq(client(port, 5000, &cl), DIST_OK);
  cr_expect_str_eq(dist_store_tcp_host(srv), "127.0.0.1");
  cr_expect_str_eq(dist_store_tcp_host(cl), "127.0.0.1");
  cr_expect_eq(dist_store_tcp_port(cl), port);
  cr_expect_str_eq(dist_store_kind(cl), "tcp");
  o.host = NULL; /* loopback: its own client connects to "localhost" */
  dist_store *any;
  cr_assert_eq(dist_store_tcp_create(&o, &any), DIST_OK, "%s", dist_last_errmsg());
  cr_expect_str_eq(dist_store_tcp_host(any), "localhost");
  dist_store_destroy(any);

  char tmpl[] = "/tmp/dist_getters_XXXXXX";
  cr_assert_not_null(dist_test_mkdtemp(tmpl));
  char path[128];
  snprintf(path, sizeof path, "%s/store", tmpl);
  cr_assert_eq(dist_store_file_create(path, 1, &f), DIST_OK, "%s", dist_last_errmsg());
  cr_expect_str_eq(dist_store_file_path(f), path);
  cr_expect_str_eq(dist_store_kind(f), "file");
  cr_assert_eq(dist_store_hash_create(&h), DIST_OK);
  cr_expect_str_eq(dist_store_kind(h), "hash");
  cr_assert_eq(dist_store_prefix_create("job/7", cl, DIST_STORE_BORROW, &p), DIST_OK);
  cr_assert_eq(dist_store_prefix_create("inner", p, DIST_STORE_BORROW, &pp), DIST_OK);
  cr_expect_eq(dist_store_prefix_underlying(p), cl);
  cr_expect_eq(dist_store_prefix_underlying(pp), p);
  cr_expect_str_eq(dist_store_prefix_get_prefix(p), "job/7");
  cr_expect_str_eq(dist_store_kind(pp), "prefix");
  cr_expect(dist_store_has_extended_api(pp) && dist_store_has_extended_api(h) &&
            dist_store_has_extended_api(f) && dist_store_has_extended_api(cl));
  /* The wrong kind, or NULL, answers NULL. */
  cr_expect((dist_store_tcp_host(f)) == NULL);
  cr_expect((dist_store_tcp_host(NULL)) == NULL);
  cr_expect((dist_store_file_path(cl)) == NULL);
  cr_expect((dist_store_file_path(NULL)) == NULL);
  cr_expect((dist_store_prefix_underlying(h)) == NULL);
  cr_expect((dist_store_prefix_get_prefix(NULL)) == NULL);
  cr_expect((dist_store_user_data(h)) == NULL);
  dist_store_destroy(pp);
  dist_store_destroy(p);
  dist_store_destroy(h);
  dist_store_destroy(f);
  dist_store_destroy(cl);
  dist_store_destroy(srv);
  rmdir(tmpl);
}
