/* ctest: labels=unit,multiproc timeout=120 */
/* The TCP store's server under connections that never finish the token
 * exchange (issue 26, defect 1): they get their own deadline, whatever the
 * job's timeout, and at most a few wait at once, so a flood of idle
 * connections neither exhausts the server's descriptors nor its log, and
 * well-behaved clients are still served. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include "mp.h"
#include "net/auth.h"
#include "net/net.h"
#include "store/store_tcp_proto.h"

#define TOKEN "limits-test-token-0123456789"

static pthread_mutex_t log_mu = PTHREAD_MUTEX_INITIALIZER;
static int drops_logged;

static void sink(void *arg, dist_log_level lvl, dist_subsys sub, const char *line) {
  (void)arg, (void)sub;
  pthread_mutex_lock(&log_mu);
  if (lvl <= DIST_LOG_WARNING && strstr(line, "dropping connection"))
    drops_logged++;
  pthread_mutex_unlock(&log_mu);
}

static int open_fds(void) {
  DIR *d = opendir("/proc/self/fd");
  cr_assert(d);
  int n = 0;
  for (struct dirent *de; (de = readdir(d));)
    n += de->d_name[0] != '.';
  closedir(d);
  return n - 1; /* the directory's own descriptor */
}

static dist_store *server(int64_t job_timeout_ms) {
  dist_store_tcp_opts o = {0};
  o.host = "127.0.0.1";
  o.is_server = true;
  o.world_size = 1;
  o.timeout_ms = job_timeout_ms;
  o.token = TOKEN;
  dist_store *s;
  cr_assert_eq(dist_store_tcp_create(&o, &s), DIST_OK, "%s", dist_last_errmsg());
  return s;
}

static void serves(uint16_t port) {
  dist_store_tcp_opts o = {0};
  o.host = "127.0.0.1";
  o.port = port;
  o.timeout_ms = 5000;
  o.token = TOKEN;
  dist_store *c;
  cr_assert_eq(dist_store_tcp_create(&o, &c), DIST_OK, "%s", dist_last_errmsg());
  cr_assert_eq(dist_store_set(c, "alive", "yes", 3), DIST_OK);
  void *v = NULL;
  size_t n = 0;
  cr_assert_eq(dist_store_get(c, "alive", &v, &n), DIST_OK);
  cr_assert(n == 3 && memcmp(v, "yes", 3) == 0);
  dist_free(v);
  dist_store_destroy(c);
}

/* The child: opens n connections to port, never answers the challenge,
 * says "1" on done_fd once all are open, holds them until its stdin (go_fd)
 * closes. No cr_assert here: the runner must not see a stranger. */
static void flood(int port_fd, int done_fd, int go_fd, int n) {
  uint16_t port;
  if (read(port_fd, &port, sizeof port) != sizeof port)
    _exit(2);
  int opened = 0;
  for (int i = 0; i < n; i++) {
    int fd;
    if (dist__net_connect("127.0.0.1", port, dist__deadline_ms(5000), &fd, NULL) == DIST_OK)
      opened++;
  }
  char c = opened == n ? '1' : '0';
  if (write(done_fd, &c, 1) != 1)
    _exit(3);
  if (read(go_fd, &c, 1) < 0) // EOF: the parent is done
    _exit(4);
  _exit(0);
}

Test(store_tcp_limits, idle_connections_never_exhaust_the_servers_descriptors, .timeout = 60) {
  int pp[2], dp[2], gp[2];
  cr_assert(pipe(pp) == 0 && pipe(dp) == 0 && pipe(gp) == 0);
  pid_t pid = fork(); /* before any thread of ours */
  if (pid == 0) { /* no cr_assert in here: --full-stats would report it from a stranger */
    signal(SIGPIPE, SIG_IGN); /* Criterion's handler must not speak for a stranger */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    close(gp[1]);
    flood(pp[0], dp[1], gp[0], 200);
  }
  cr_assert_geq(pid, 0);
  close(gp[0]);
  /* As in the report: `ulimit -n 128`, here 64, and a job timeout of 600 s. */
  struct rlimit rl = {64, 64};
  cr_assert_eq(setrlimit(RLIMIT_NOFILE, &rl), 0);
  dist_log_set_sink(sink, NULL);
  dist_store *s = server(600000);
  uint16_t port = dist_store_tcp_port(s);
  cr_assert_eq(write(pp[1], &port, sizeof port), (ssize_t)sizeof port);
  char ok = 0;
  cr_assert_eq(read(dp[0], &ok, 1), 1);
  cr_assert_eq(ok, '1', "the kernel accepted every connection of the flood");
  /* Every one of the 200 reached the server (the flood's connects
   * completed); a well-behaved client queued behind them is served, and
   * at no point did the server hold more than its cap of handshakes. */
  serves(port);
  int fds = open_fds();
  cr_assert_leq(fds, 40, "the server holds %d descriptors with 200 idle connections "
                "against it (cap %zu handshakes)", fds, dist__stp_default_max_auth());
  pthread_mutex_lock(&log_mu);
  int logged = drops_logged;
  pthread_mutex_unlock(&log_mu);
  cr_assert_geq(logged, 1, "the first drops are said");
  cr_assert_leq(logged, 5, "%d warnings for 200 idle connections: drops are counted, not "
                "each logged", logged);
  close(gp[1]);
  int st;
  cr_assert_eq(waitpid(pid, &st, 0), pid);
  cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "flood child status %d", st);
  serves(port);
  dist_store_destroy(s);
}

/* True when the server closes fd within max_ms (reads until EOF). */
static bool closed_within(int fd, int64_t max_ms) {
  int64_t dl = dist__deadline_ms(max_ms);
  uint8_t b[64];
  while (dist__now_ms() < dl) {
    dist__errbuf e;
    dist__err_clear(&e);
    int rc = dist__net_read_all(fd, b, 1, dl, &e);
    if (rc == DIST_E_CLOSED || rc == DIST_E_SYS)
      return true;
    if (rc == DIST_E_TIMEOUT)
      return false;
  }
  return false;
}

Test(store_tcp_limits, a_silent_handshake_ends_at_its_own_deadline_not_the_jobs,
     .timeout = 30) {
  setenv("DIST_STORE_HANDSHAKE_MS", "500", 1);
  cr_assert_eq(dist__stp_handshake_ms(), 500);
  dist_store *s = server(600000); /* the job's timeout: 10 minutes */
  int fd;
  cr_assert_eq(dist__net_connect("127.0.0.1", dist_store_tcp_port(s), dist__deadline_ms(5000),
                                 &fd, NULL), DIST_OK);
  int64_t t0 = dist__now_ms();
  /* Read the challenge, then say nothing. */
  uint8_t ch[DIST_AUTH_CHALLENGE_LEN];
  cr_assert_eq(dist__net_read_all(fd, ch, sizeof ch, dist__deadline_ms(5000), NULL), DIST_OK);
  cr_assert(closed_within(fd, 15000), "a connection that never answers is closed");
  int64_t took = dist__now_ms() - t0;
  cr_assert_geq(took, 400, "closed after %lld ms, before its deadline", (long long)took);
  cr_assert_lt(took, 15000);
  close(fd);
  serves(dist_store_tcp_port(s));
  dist_store_destroy(s);
}

Test(store_tcp_limits, the_cap_of_pending_handshakes_follows_the_descriptor_limit,
     .timeout = 10) {
  struct rlimit rl = {128, 128};
  cr_assert_eq(setrlimit(RLIMIT_NOFILE, &rl), 0);
  cr_assert_eq(dist__stp_default_max_auth(), 16);
  rl.rlim_cur = rl.rlim_max = 32;
  cr_assert_eq(setrlimit(RLIMIT_NOFILE, &rl), 0);
  cr_assert_eq(dist__stp_default_max_auth(), 8, "never below 8");
}

/* The server of the next test: on its port first an acceptor that sends a
 * challenge, reads the answer and closes without a verdict (a server whose
 * handshake deadline passed while the client was starved of CPU), then,
 * when serve is set, the real store on the same port. */
typedef struct {
  int lfd;
  uint16_t port;
  bool serve;
  dist_store *store;
  int rc;
} gave_up;

static void *give_up_then_serve(void *arg) {
  gave_up *g = arg;
  int fd;
  uint8_t nonce[DIST_AUTH_NONCE_LEN], ch[DIST_AUTH_CHALLENGE_LEN], ans[DIST_AUTH_ANSWER_LEN];
  g->rc = dist__net_accept(g->lfd, dist__deadline_ms(5000), &fd, NULL);
  if (g->rc != DIST_OK)
    return NULL;
  g->rc = dist__auth_challenge(TOKEN, nonce, ch);
  if (g->rc == DIST_OK)
    g->rc = dist__net_write_all(fd, ch, sizeof ch, dist__deadline_ms(5000), NULL);
  if (g->rc == DIST_OK)
    g->rc = dist__net_read_all(fd, ans, sizeof ans, dist__deadline_ms(5000), NULL);
  close(fd);
  close(g->lfd);
  dist_store_tcp_opts o = {0};
  o.host = "127.0.0.1";
  o.port = g->port;
  o.is_server = true;
  o.timeout_ms = 10000;
  o.token = TOKEN;
  if (g->rc == DIST_OK && g->serve)
    g->rc = dist_store_tcp_create(&o, &g->store);
  return NULL;
}

static void start_giving_up(gave_up *g, bool serve, pthread_t *t) {
  *g = (gave_up){.serve = serve};
  cr_assert_eq(dist__net_listen("127.0.0.1", 0, true, 4, &g->lfd, &g->port, NULL), DIST_OK);
  cr_assert_eq(pthread_create(t, NULL, give_up_then_serve, g), 0);
}

Test(store_tcp_limits, a_handshake_the_server_gave_up_on_is_tried_again_not_called_a_wrong_token,
     .timeout = 30) {
  /* The bare exchange says what happened, and that it is not a refusal. */
  gave_up g;
  pthread_t t;
  start_giving_up(&g, false, &t);
  int fd;
  cr_assert_eq(dist__net_connect("127.0.0.1", g.port, dist__deadline_ms(5000), &fd, NULL),
               DIST_OK);
  dist__errbuf e;
  dist__err_clear(&e);
  cr_assert_eq(dist__auth_connect(fd, TOKEN, "store", dist__deadline_ms(5000), &e),
               DIST_E_CLOSED, "%s", e.msg);
  cr_assert(strstr(e.msg, "before its verdict") && strstr(e.msg, "DIST_STORE_HANDSHAKE_MS") &&
            !strstr(e.msg, "wrong"), "%s", e.msg);
  pthread_join(t, NULL);
  cr_assert_eq(g.rc, DIST_OK);
  close(fd);
  /* A client meets the same acceptor, then the store behind it: it connects
   * again and is served within its own timeout. */
  start_giving_up(&g, true, &t);
  dist_store_tcp_opts o = {0};
  o.host = "127.0.0.1";
  o.port = g.port;
  o.timeout_ms = 10000;
  o.token = TOKEN;
  dist_store *c;
  int rc = dist_store_tcp_create(&o, &c);
  pthread_join(t, NULL);
  cr_assert_eq(g.rc, DIST_OK, "the acceptor then the store on port %u", g.port);
  cr_assert_eq(rc, DIST_OK, "%s", dist_last_errmsg());
  cr_assert_eq(dist_store_set(c, "after", "a retry", 7), DIST_OK);
  dist_store_destroy(c);
  dist_store_destroy(g.store);
}
