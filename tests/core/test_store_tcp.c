/* ctest: labels=unit,multiproc timeout=240 */
/* The TCP store: the whole operation set, workers, tokens, and a server that
 * survives killed clients, strangers and garbage while serving the others. */
#include <dirent.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "net/auth.h"
#include "mp.h"
#include "net/net.h"
#include "store_cases.h"
#include "store/store_tcp_proto.h"

#define TOKEN "0123456789abcdef-test-token"

static dist_store *make_server(const char *token, int world, bool wait) {
  dist_store_tcp_opts o = {0};
  o.host = "127.0.0.1";
  o.is_server = true;
  o.world_size = world;
  o.wait_for_workers = wait;
  o.timeout_ms = 10000;
  o.token = token;
  dist_store *s;
  OK(dist_store_tcp_create(&o, &s));
  cr_assert_neq(dist_store_tcp_port(s), 0, "port 0 picks a free port");
  return s;
}

static int make_client(uint16_t port, const char *token, int64_t timeout_ms,
                       dist_store **out) {
  dist_store_tcp_opts o = {0};
  o.host = "127.0.0.1";
  o.port = port;
  o.timeout_ms = timeout_ms;
  o.token = token;
  return dist_store_tcp_create(&o, out);
}

static dist_store *make(void) { return make_server(TOKEN, 1, false); }
static void unmake(void) {}

STORE_CASES(store_tcp, make, unmake)

/* --- log capture ------------------------------------------------------------ */

static pthread_mutex_t log_mu = PTHREAD_MUTEX_INITIALIZER;
static char log_buf[1 << 16];
static size_t log_len;

static void sink(void *arg, dist_log_level lvl, dist_subsys sub, const char *line) {
  (void)arg, (void)lvl, (void)sub;
  pthread_mutex_lock(&log_mu);
  size_t n = strlen(line);
  if (log_len + n + 2 < sizeof log_buf) {
    memcpy(log_buf + log_len, line, n);
    log_len += n;
    log_buf[log_len++] = '\n';
    log_buf[log_len] = '\0';
  }
  pthread_mutex_unlock(&log_mu);
}

static void capture_logs(void) {
  dist_log_set_level(DIST_LOG_INFO);
  dist_log_set_sink(sink, NULL);
}

/* Waits up to 5 s for text to show up in the captured log. */
static bool log_has(const char *text) {
  for (int i = 0; i < 500; i++) {
    pthread_mutex_lock(&log_mu);
    bool found = strstr(log_buf, text) != NULL;
    pthread_mutex_unlock(&log_mu);
    if (found)
      return true;
    usleep(10000);
  }
  return false;
}

static int log_count(const char *text) {
  pthread_mutex_lock(&log_mu);
  int n = 0;
  for (const char *p = log_buf; (p = strstr(p, text)); p++)
    n++;
  pthread_mutex_unlock(&log_mu);
  return n;
}

/* The server still answers a well-behaved client. */
static void still_serves(uint16_t port) {
  dist_store *c;
  OK(make_client(port, TOKEN, 5000, &c));
  OK(dist_store_set(c, "alive", "yes", 3));
  expect_value(c, "alive", "yes", 3);
  dist_store_destroy(c);
}

/* --- raw connections ----------------------------------------------------------- */

static int raw_connect(uint16_t port, const char *token) {
  int fd;
  dist__errbuf e;
  dist__err_clear(&e);
  cr_assert_eq(dist__net_connect("127.0.0.1", port, dist__deadline_ms(5000), &fd, &e),
               DIST_OK, "%s", e.msg);
  if (token)
    cr_assert_eq(dist__auth_connect(fd, token, "store", dist__deadline_ms(5000), &e),
                 DIST_OK, "%s", e.msg);
  return fd;
}

static void raw_send(int fd, const void *b, size_t n) {
  dist__errbuf e;
  dist__err_clear(&e);
  dist__net_write_all(fd, b, n, dist__deadline_ms(2000), &e); /* may fail: dropped */
}

/* True when the server closed fd (reads until EOF, up to 5 s). */
static bool closed_by_server(int fd) {
  char b[4096];
  int64_t dl = dist__deadline_ms(5000);
  while (dist__now_ms() < dl) {
    dist__errbuf e;
    dist__err_clear(&e);
    int rc = dist__net_read_all(fd, b, 1, dist__deadline_ms(200), &e);
    if (rc == DIST_E_CLOSED || rc == DIST_E_SYS)
      return true;
  }
  return false;
}

/* --- workers, ports, connecting ------------------------------------------------ */

Test(store_tcp, wait_for_workers_times_out_naming_how_many_arrived, .timeout = 20) {
  dist_store_tcp_opts o = {0};
  o.is_server = true;
  o.world_size = 3;
  o.wait_for_workers = true;
  o.timeout_ms = 300;
  dist_store *s = NULL;
  int rc = dist_store_tcp_create(&o, &s);
  cr_assert_eq(rc, DIST_E_TIMEOUT, "%s", dist_status_name(rc));
  cr_assert_null(s);
  cr_assert(strstr(dist_last_errmsg(), "only 1 of 3 workers"), "%s", dist_last_errmsg());
}

static uint16_t free_port(void) {
  int fd;
  uint16_t port;
  cr_assert_eq(dist__net_listen("127.0.0.1", 0, true, 1, &fd, &port, NULL), DIST_OK);
  close(fd);
  return port;
}

/* The port is known before the server exists (as with MASTER_PORT), since
 * the server's create returns only once every worker has joined. */
static int workers(const dist_test_ctx *ctx) {
  dist_store_tcp_opts o = {0};
  o.host = "127.0.0.1";
  o.port = *(uint16_t *)ctx->arg;
  o.world_size = ctx->world;
  o.wait_for_workers = true;
  o.timeout_ms = 20000;
  dist_store *s;
  if (ctx->rank == 0) {
    o.is_server = true;
    CHECK_OK(ctx, dist_store_tcp_create(&o, &s));
    CHECK(ctx, dist_store_tcp_port(s) == o.port, "port %u", dist_store_tcp_port(s));
    /* create returned: every worker has joined */
    CHECK_OK(ctx, dist_store_set(s, "go", "1", 1));
    const char *k = "bye";
    CHECK_OK(ctx, dist_store_wait(s, &k, 1, 20000));
  } else {
    usleep((useconds_t)ctx->rank * 100000); /* arrive one by one */
    CHECK_OK(ctx, dist_store_tcp_create(&o, &s));
    void *v;
    CHECK_OK(ctx, dist_store_get(s, "go", &v, NULL));
    dist_free(v);
    int64_t n;
    CHECK_OK(ctx, dist_store_add(s, "left", 1, &n));
    if (n == ctx->world - 1) /* lands before the close that follows */
      CHECK_OK(ctx, dist_store_set(s, "bye", "1", 1));
  }
  dist_store_destroy(s);
  return 0;
}

Test(store_tcp, server_create_returns_once_world_size_workers_joined, .timeout = 40) {
  uint16_t port = free_port();
  cr_assert_eq(dist_test_ranks(4, workers, &port, 30), 0, "%s", dist_test_report());
}

Test(store_tcp, client_connect_retries_until_the_server_is_up, .timeout = 30) {
  uint16_t port = free_port();
  pid_t pid = fork();
  if (pid == 0) {
    usleep(400000);
    dist_store_tcp_opts o = {0};
    o.host = "127.0.0.1";
    o.port = port;
    o.is_server = true;
    o.timeout_ms = 10000;
    o.token = TOKEN;
    dist_store *s;
    if (dist_store_tcp_create(&o, &s) != DIST_OK)
      _exit(1);
    const char *k = "done";
    int rc = dist_store_wait(s, &k, 1, 10000);
    dist_store_destroy(s);
    _exit(rc == DIST_OK ? 0 : 2);
  }
  dist_store *c;
  OK(make_client(port, TOKEN, 10000, &c));
  int64_t n;
  OK(dist_store_num_keys(c, &n));
  OK(dist_store_set(c, "done", "1", 1));
  dist_store_destroy(c);
  int st;
  waitpid(pid, &st, 0);
  cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "server child status %d", st);
}

Test(store_tcp, connect_to_nobody_times_out_naming_the_address, .timeout = 20) {
  dist_store *c = NULL;
  int held;
  int rc = make_client(dist_test_refusing_port(&held), TOKEN, 300, &c);
  cr_assert_eq(rc, DIST_E_TIMEOUT, "%s", dist_status_name(rc));
  cr_assert(strstr(dist_last_errmsg(), "127.0.0.1"), "%s", dist_last_errmsg());
  close(held);
}

Test(store_tcp, server_death_fails_clients_with_DIST_E_CLOSED_not_a_hang, .timeout = 30) {
  int pp[2];
  cr_assert_eq(pipe(pp), 0);
  pid_t pid = fork();
  if (pid == 0) {
    dist_store_tcp_opts o = {0};
    o.is_server = true;
    o.timeout_ms = 10000;
    dist_store *s;
    if (dist_store_tcp_create(&o, &s) != DIST_OK)
      _exit(1);
    uint16_t port = dist_store_tcp_port(s);
    if (write(pp[1], &port, 2) != 2)
      _exit(1);
    pause();
    _exit(0);
  }
  uint16_t port;
  cr_assert_eq(read(pp[0], &port, 2), 2);
  dist_store_tcp_opts o = {0};
  o.host = "localhost";
  o.port = port;
  o.timeout_ms = 10000;
  dist_store *c;
  OK(dist_store_tcp_create(&o, &c));
  OK(dist_store_set(c, "k", "v", 1));
  kill(pid, SIGKILL);
  waitpid(pid, NULL, 0);
  void *v;
  int rc = dist_store_get(c, "never", &v, NULL); /* would block on a live server */
  cr_assert_eq(rc, DIST_E_CLOSED, "%s: %s", dist_status_name(rc), dist_store_errmsg(c));
  rc = dist_store_add(c, "x", 1, NULL);
  cr_assert_eq(rc, DIST_E_CLOSED);
  cr_assert(strstr(dist_store_errmsg(c), "lost earlier"), "%s", dist_store_errmsg(c));
  dist_store_destroy(c);
}

/* --- tokens --------------------------------------------------------------------- */

Test(store_tcp, clients_without_the_token_are_refused_logged_and_the_rest_served,
     .timeout = 30) {
  capture_logs();
  dist_store *s = make();
  uint16_t port = dist_store_tcp_port(s);
  dist_store *c = NULL;
  int rc = make_client(port, "the-wrong-token", 3000, &c);
  cr_assert_eq(rc, DIST_E_INVAL, "%s", dist_status_name(rc));
  cr_assert(strstr(dist_last_errmsg(), "wrong job token"), "%s", dist_last_errmsg());
  cr_assert(log_has("wrong token"), "%s", log_buf);
  cr_assert(log_has("dropping connection from 127.0.0.1:"), "%s", log_buf);
  rc = make_client(port, NULL, 3000, &c);
  cr_assert_eq(rc, DIST_E_INVAL);
  cr_assert(strstr(dist_last_errmsg(), "requires a job token"), "%s", dist_last_errmsg());
  cr_assert(log_has("peer has no job token"), "%s", log_buf);
  still_serves(port);
  dist_store_destroy(s);
}

/* A store killed without its cleanup leaves its local secret behind; a later
 * store with a token on the same port does not use that file, and a client
 * without a token that answers with it is told what happened. */
Test(store_tcp, a_stale_local_secret_of_the_port_is_named_when_refused, .timeout = 30) {
  dist_store *s = make();
  uint16_t port = dist_store_tcp_port(s);
  char tok[DIST_AUTH_TOKEN_MAX + 1], path[600];
  dist__errbuf e;
  dist__err_clear(&e);
  cr_assert_eq(dist__auth_local_secret_make(port, tok, sizeof tok, path, sizeof path, &e),
               DIST_OK, "%s", e.msg);
  dist_store *c = NULL;
  int rc = make_client(port, NULL, 3000, &c);
  unlink(path);
  cr_assert_eq(rc, DIST_E_INVAL, "%s", dist_status_name(rc));
  cr_assert(strstr(dist_last_errmsg(), "requires a job token") &&
            strstr(dist_last_errmsg(), "left by an earlier store"), "%s", dist_last_errmsg());
  still_serves(port);
  dist_store_destroy(s);
}

/* A store that binds a port with a token removes a dead store's secret for
 * that port: a client without a token then answers with none and is told the
 * store requires one (the file made it answer with a wrong one, and CI runs
 * reuse ports among hundreds of SIGKILLed stores). */
Test(store_tcp, a_dead_stores_secret_is_removed_by_the_next_store_on_its_port, .timeout = 30) {
  capture_logs();
  dist_store *first = make();
  uint16_t port = dist_store_tcp_port(first);
  dist_store_destroy(first); /* the port is free again; its secret is made as a dead one's */
  char tok[DIST_AUTH_TOKEN_MAX + 1], path[600];
  dist__errbuf e;
  dist__err_clear(&e);
  cr_assert_eq(dist__auth_local_secret_make(port, tok, sizeof tok, path, sizeof path, &e),
               DIST_OK, "%s", e.msg);
  dist_store_tcp_opts o = {0};
  o.host = "127.0.0.1";
  o.port = port;
  o.is_server = true;
  o.world_size = 1;
  o.timeout_ms = 10000;
  o.token = TOKEN;
  dist_store *s;
  OK(dist_store_tcp_create(&o, &s));
  struct stat st;
  cr_assert_neq(stat(path, &st), 0, "%s is still there", path);
  dist_store *c = NULL;
  cr_assert_eq(make_client(port, NULL, 3000, &c), DIST_E_INVAL);
  cr_assert(strstr(dist_last_errmsg(), "requires a job token (DIST_TOKEN unset here)"), "%s",
            dist_last_errmsg());
  cr_assert(log_has("peer has no job token"), "%s", log_buf);
  dist_store_destroy(s);
}

Test(store_tcp, a_client_with_a_token_refuses_a_server_without_one, .timeout = 20) {
  /* Without a token a loopback server requires its local secret; only
   * DIST_ALLOW_NO_TOKEN=1 makes one that requires nothing. */
  dist_store_tcp_opts o = {0};
  o.host = "127.0.0.1";
  o.is_server = true;
  o.world_size = 1;
  o.timeout_ms = 10000;
  o.allow_remote = true;
  dist_store *s;
  OK(dist_store_tcp_create(&o, &s));
  dist_store *c = NULL;
  int rc = make_client(dist_store_tcp_port(s), TOKEN, 3000, &c);
  cr_assert_eq(rc, DIST_E_INVAL);
  cr_assert(strstr(dist_last_errmsg(), "without a job token"), "%s", dist_last_errmsg());
  dist_store_destroy(s);
}

/* A loopback server started without a token keeps a local secret that this
 * user's clients find by themselves (auth.h); it goes with the server. */
Test(store_tcp, a_loopback_server_without_a_token_requires_its_local_secret, .timeout = 20) {
  dist_store *s = make_server(NULL, 1, false);
  uint16_t port = dist_store_tcp_port(s);
  char path[600], tok[300];
  OK(dist__auth_local_secret_path(port, false, path, sizeof path, NULL));
  struct stat st;
  cr_assert_eq(stat(path, &st), 0, "%s", path);
  cr_assert_eq(st.st_mode & 0777, 0600);
  OK(dist__auth_local_secret_read(port, tok, sizeof tok, NULL));
  cr_assert_eq(strlen(tok), 64);
  dist_store *c = NULL;
  OK(make_client(port, NULL, 3000, &c)); /* finds the secret */
  OK(dist_store_set(c, "k", "v", 1));
  dist_store_destroy(c);
  int fd = raw_connect(port, NULL); /* the raw exchange without it is refused */
  uint8_t ch[DIST_AUTH_CHALLENGE_LEN], ans[DIST_AUTH_ANSWER_LEN] = {'D', 'A', 'U', 'T', 2, 2};
  cr_assert_eq(dist__net_read_all(fd, ch, sizeof ch, dist__deadline_ms(5000), NULL), DIST_OK);
  cr_assert_eq(ch[6] & 1, 1, "a token is required");
  raw_send(fd, ans, sizeof ans);
  cr_assert(closed_by_server(fd));
  close(fd);
  dist_store_destroy(s);
  cr_assert_neq(access(path, F_OK), 0, "the secret went with the server");
}

Test(store_tcp, without_a_token_the_server_refuses_a_non_loopback_address,
     .timeout = 20) {
  dist_store_tcp_opts o = {0};
  o.is_server = true;
  o.host = "0.0.0.0";
  o.timeout_ms = 1000;
  dist_store *s = NULL;
  cr_assert_eq(dist_store_tcp_create(&o, &s), DIST_E_INVAL);
  cr_assert(strstr(dist_last_errmsg(), "DIST_TOKEN"), "%s", dist_last_errmsg());
  o.allow_remote = true; /* DIST_ALLOW_NO_TOKEN=1 */
  OK(dist_store_tcp_create(&o, &s));
  dist_store_destroy(s);
}

Test(store_tcp, a_silent_connection_is_dropped_after_the_auth_timeout, .timeout = 20) {
  capture_logs();
  stp_server *srv;
  stp_server_opts so = {"127.0.0.1", 0, true, TOKEN, 200, 0, 0, false};
  cr_assert_eq(dist__stp_server_start(&so, &srv, NULL), DIST_OK);
  int fd = raw_connect(dist__stp_server_port(srv), NULL);
  cr_assert(closed_by_server(fd));
  cr_assert(log_has("did not complete the token exchange"), "%s", log_buf);
  close(fd);
  dist__stp_server_stop(srv);
}

/* --- killed clients ------------------------------------------------------------- */

/* Forks a child that runs fn(port) once the parent has started a server. */
static pid_t spawn(void (*fn)(uint16_t port), int *port_fd, int *ready_fd) {
  int pp[2], rp[2];
  cr_assert_eq(pipe(pp), 0);
  cr_assert_eq(pipe(rp), 0);
  pid_t pid = fork();
  if (pid == 0) {
    uint16_t port;
    if (read(pp[0], &port, 2) != 2)
      _exit(1);
    *ready_fd = rp[1];
    fn(port);
    _exit(0);
  }
  *port_fd = pp[1];
  *ready_fd = rp[0];
  return pid;
}

static int child_ready_fd;

/* In a forked child: no cr_assert (the runner would see a stranger). */
static void half_frame_then_hang(uint16_t port) {
  int fd;
  if (dist__net_connect("127.0.0.1", port, dist__deadline_ms(5000), &fd, NULL) != DIST_OK ||
      dist__auth_connect(fd, TOKEN, "store", dist__deadline_ms(5000), NULL) != DIST_OK)
    _exit(1);
  uint8_t h[STP_HDR];
  stp_hdr hdr = {STP_SET, 0, 0, 1, 1u << 20};
  dist__stp_hdr_encode(h, &hdr);
  raw_send(fd, h, sizeof h);
  static uint8_t part[1000];
  raw_send(fd, part, sizeof part);
  if (write(child_ready_fd, "r", 1) != 1)
    _exit(1);
  pause();
}

/* Sends a whole GET of a key nobody sets, then waits to be killed. The
 * request is in the server's socket before "ready" is written (loopback
 * delivers at send), so the kill always finds it parked. */
static void blocked_in_get(uint16_t port) {
  int fd;
  if (dist__net_connect("127.0.0.1", port, dist__deadline_ms(5000), &fd, NULL) != DIST_OK ||
      dist__auth_connect(fd, TOKEN, "store", dist__deadline_ms(5000), NULL) != DIST_OK)
    _exit(1);
  stp_buf b = {0};
  size_t off = dist__stp_begin(&b, STP_GET, 0, 0, 1);
  dist__stp_put_i64(&b, 30000);
  dist__stp_put_str(&b, "never_set");
  dist__stp_end(&b, off);
  raw_send(fd, b.p, b.len);
  if (write(child_ready_fd, "r", 1) != 1)
    _exit(1);
  pause();
}

static void kill_child_then_check(void (*fn)(uint16_t), const char *logged) {
  capture_logs();
  int port_fd;
  pid_t pid = spawn(fn, &port_fd, &child_ready_fd);
  dist_store *s = make(); /* after the fork: no library thread in the child */
  uint16_t port = dist_store_tcp_port(s);
  cr_assert_eq(write(port_fd, &port, 2), 2);
  char r;
  cr_assert_eq(read(child_ready_fd, &r, 1), 1); /* its bytes are in the server's socket */
  kill(pid, SIGKILL);
  waitpid(pid, NULL, 0);
  cr_assert(log_has(logged), "expected '%s' in: %s", logged, log_buf);
  still_serves(port);
  int64_t n;
  OK(dist_store_num_keys(s, &n));
  dist_store_destroy(s);
}

Test(store_tcp, a_client_killed_mid_frame_is_dropped_and_the_server_keeps_serving,
     .timeout = 30) {
  kill_child_then_check(half_frame_then_hang, "in the middle of a frame");
}

Test(store_tcp, a_client_killed_while_parked_in_get_is_dropped_and_others_served,
     .timeout = 30) {
  kill_child_then_check(blocked_in_get, "while its GET request was pending");
}

/* --- malformed frames ------------------------------------------------------------ */

Test(store_tcp, oversized_and_malformed_frames_are_refused_before_allocation,
     .timeout = 30) {
  capture_logs();
  dist_store *s = make();
  uint16_t port = dist_store_tcp_port(s);
  uint8_t h[STP_HDR];
  struct {
    stp_hdr hdr;
    const char *logged;
  } cases[] = {
      {{STP_SET, 0, 0, 1, STP_MAX_BODY + 1}, "exceeds the limit"},
      {{STP_OP_END_, 0, 0, 1, 0}, "unknown request"},
      {{STP_GET | STP_REPLY, 0, 0, 1, 0}, "unknown request"},
      {{STP_ADD, 0, 0, 1, 0}, "malformed ADD frame"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    int fd = raw_connect(port, TOKEN);
    dist__stp_hdr_encode(h, &cases[i].hdr);
    raw_send(fd, h, sizeof h);
    cr_assert(closed_by_server(fd), "case %zu", i);
    close(fd);
    cr_assert(log_has(cases[i].logged), "case %zu: %s", i, log_buf);
  }
  /* A key that claims more than DIST_STORE_MAX_KEY bytes. */
  stp_buf b = {0};
  size_t off = dist__stp_begin(&b, STP_DELETE, 0, 0, 1);
  dist__stp_put_u32(&b, DIST_STORE_MAX_KEY + 1);
  dist__stp_end(&b, off);
  int fd = raw_connect(port, TOKEN);
  raw_send(fd, b.p, b.len);
  cr_assert(closed_by_server(fd));
  close(fd);
  dist__stp_buf_free(&b);
  cr_assert(log_has("key longer than DIST_STORE_MAX_KEY"), "%s", log_buf);
  /* A version this server does not speak. */
  stp_hdr hv = {STP_PING, 0, 0, 1, 0};
  dist__stp_hdr_encode(h, &hv);
  h[4] = STP_VERSION + 1;
  fd = raw_connect(port, TOKEN);
  raw_send(fd, h, sizeof h);
  cr_assert(closed_by_server(fd));
  close(fd);
  cr_assert(log_has("protocol version"), "%s", log_buf);
  still_serves(port);
  dist_store_destroy(s);
}

static uint64_t rng;
static uint32_t rnd(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return (uint32_t)(rng >> 11);
}

/* A frame that is valid, then mutated: flipped bytes, cut short, or with a
 * lying length. */
static size_t garbage_frame(uint8_t *out, size_t cap) {
  stp_buf b = {0};
  unsigned op = 1 + rnd() % (STP_OP_END_ - 1);
  size_t off = dist__stp_begin(&b, op, rnd() % 2, 0, rnd());
  for (unsigned i = 0, n = rnd() % 6; i < n; i++) {
    switch (rnd() % 4) {
    case 0: dist__stp_put_u32(&b, rnd() % 4 ? rnd() % 8 : rnd()); break;
    case 1: dist__stp_put_i64(&b, (int64_t)rnd() % 50); break;
    case 2: dist__stp_put_str(&b, "key"); break;
    default: dist__stp_put_bytes(&b, "value\0x", rnd() % 8); break;
    }
  }
  dist__stp_end(&b, off);
  size_t n = b.len < cap ? b.len : cap;
  memcpy(out, b.p, n);
  dist__stp_buf_free(&b);
  for (unsigned i = 0, flips = rnd() % 4; i < flips && n; i++)
    out[rnd() % n] ^= (uint8_t)(1u << (rnd() % 8));
  if (rnd() % 4 == 0)
    n = rnd() % (n + 1);
  return n;
}

Test(store_tcp, random_garbage_never_hurts_the_server, .timeout = 120) {
  capture_logs();
  rng = dist_test_seed(); /* printed: DIST_TEST_SEED=... reproduces */
  dist_store *s = make();
  uint16_t port = dist_store_tcp_port(s);
  uint8_t buf[4096];
  for (int round = 0; round < 300; round++) {
    int mode = round % 3;
    int fd = raw_connect(port, mode == 0 ? NULL : TOKEN);
    size_t n;
    if (mode == 2) {
      n = garbage_frame(buf, sizeof buf);
    } else { /* pure noise, before or after the token exchange */
      n = 1 + rnd() % sizeof buf;
      for (size_t i = 0; i < n; i++)
        buf[i] = (uint8_t)rnd();
    }
    raw_send(fd, buf, n);
    if (rnd() % 2)
      shutdown(fd, SHUT_WR);
    close(fd);
    if (round % 50 == 49)
      still_serves(port);
  }
  still_serves(port);
  cr_assert(log_count("dropping connection") > 100, "garbage was logged and dropped");
  dist_store_destroy(s);
}

/* --- many processes ----------------------------------------------------------- */

static int hammer(const dist_test_ctx *ctx) {
  dist_store *s;
  CHECK_OK(ctx, dist_test_tcp_store(ctx, &s));
  if (ctx->rank > 0) {
    char key[32], val[32];
    for (int i = 0; i < 300; i++) {
      snprintf(key, sizeof key, "r%d_%d", ctx->rank, i);
      snprintf(val, sizeof val, "v%d", i);
      CHECK_OK(ctx, dist_store_set(s, key, val, strlen(val)));
      CHECK_OK(ctx, dist_store_add(s, "total", 1, NULL));
      CHECK_OK(ctx, dist_store_queue_push(s, "jobs", key, strlen(key)));
      /* read a key of the next rank: waits when that rank is behind */
      snprintf(key, sizeof key, "r%d_%d", ctx->rank % (ctx->world - 1) + 1, i);
      void *v;
      CHECK_OK(ctx, dist_store_get(s, key, &v, NULL));
      CHECK(ctx, strcmp(v, val) == 0, "%s = %s, want %s", key, (char *)v, val);
      dist_free(v);
    }
    int64_t n;
    CHECK_OK(ctx, dist_store_add(s, "finished", 1, &n));
    if (n == ctx->world - 1)
      CHECK_OK(ctx, dist_store_set(s, "all_finished", "1", 1));
  } else {
    const char *k = "all_finished";
    CHECK_OK(ctx, dist_store_wait(s, &k, 1, 60000));
    void *v;
    CHECK_OK(ctx, dist_store_get(s, "total", &v, NULL));
    CHECK(ctx, atoi(v) == 300 * (ctx->world - 1), "total %s", (char *)v);
    dist_free(v);
    int64_t q;
    CHECK_OK(ctx, dist_store_queue_len(s, "jobs", &q));
    CHECK(ctx, q == 300 * (ctx->world - 1), "queue holds %lld", (long long)q);
  }
  dist_store_destroy(s);
  return 0;
}

Test(store_tcp, sixteen_client_processes_hammer_one_server, .timeout = 120) {
  cr_assert_eq(dist_test_ranks(17, hammer, NULL, 100), 0, "%s", dist_test_report());
}

/* --- resources ------------------------------------------------------------------ */

/* The library's threads in this process: they are named "dist-..."
 * (counting all threads would count a sanitizer's own helper thread). */
static int thread_count(void) {
  DIR *d = opendir("/proc/self/task");
  int n = 0;
  for (struct dirent *e; d && (e = readdir(d));) {
    if (e->d_name[0] == '.')
      continue;
    char path[300], comm[64] = "";
    snprintf(path, sizeof path, "/proc/self/task/%s/comm", e->d_name);
    FILE *f = fopen(path, "r");
    if (f) {
      if (!fgets(comm, sizeof comm, f))
        comm[0] = '\0';
      fclose(f);
    }
    n += strncmp(comm, "dist-", 5) == 0;
  }
  if (d)
    closedir(d);
  return n;
}

Test(store_tcp, destroy_stops_and_joins_the_server_thread, .timeout = 20) {
  int before = thread_count();
  dist_store *s = make();
  cr_assert_eq(thread_count(), before + 1, "one loop thread, not one per client");
  dist_store *c[4];
  for (int i = 0; i < 4; i++)
    OK(dist_store_clone(s, &c[i]));
  cr_assert_eq(thread_count(), before + 1);
  for (int i = 0; i < 4; i++)
    dist_store_destroy(c[i]);
  dist_store_destroy(s);
  cr_assert_eq(thread_count(), before, "no library thread after destroy");
}

Test(store_tcp, large_values_round_trip, .timeout = 60) {
  dist_store *s = make();
  size_t n = 16u << 20;
  char *big = malloc(n);
  for (size_t i = 0; i < n; i++)
    big[i] = (char)(i * 7);
  OK(dist_store_set(s, "big", big, n));
  dist_store *c;
  OK(dist_store_clone(s, &c));
  expect_value(c, "big", big, n);
  dist_store_destroy(c);
  free(big);
  dist_store_destroy(s);
}

Test(store_tcp, a_server_on_ipv6_loopback_serves_clients, .timeout = 20) {
  int fd;
  uint16_t port;
  if (dist__net_listen("::1", 0, true, 1, &fd, &port, NULL) != DIST_OK)
    cr_skip_test("no IPv6 loopback here");
  close(fd);
  dist_store_tcp_opts o = {0};
  o.host = "::1";
  o.is_server = true;
  o.timeout_ms = 5000;
  dist_store *s, *c;
  OK(dist_store_tcp_create(&o, &s));
  o.is_server = false;
  o.host = "[::1]";
  o.port = dist_store_tcp_port(s);
  OK(dist_store_tcp_create(&o, &c));
  OK(dist_store_set(c, "six", "6", 1));
  expect_value(s, "six", "6", 1);
  dist_store_destroy(c);
  dist_store_destroy(s);
}
