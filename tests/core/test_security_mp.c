/* ctest: labels=multiproc timeout=180 */
/* Who gets into a job (issue 26, security): every listening socket of
 * every rank (the store rank 0 hosts, the data plane's listeners) requires
 * the job token; the proof is mutual and bound to the connection; a job
 * launched without DIST_TOKEN keeps its loopback store to its own user.
 * Two ranks run a real job over env:// (rank 0 hosts the store, the TCP
 * transport); a third process attacks between two all_reduces, and the
 * job must go on: the second all_reduce is right and both ranks exit 0.
 *
 *   - connect without the token, with a wrong one, and replay a recorded
 *     honest handshake on a fresh connection: refused on every listener
 *     (the store, and rank 0's data-plane listener while it forms a new
 *     group's mesh and waits for rank 1, which waits for the attacker);
 *   - as another local user, read the loopback store of a job launched
 *     without DIST_TOKEN: the client is refused, the local secret cannot
 *     be opened, and nothing is learnt. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <fcntl.h>
#include <stdarg.h>
#include <grp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "mp.h"
#include "net/auth.h"
#include "net/net.h"

#define JOB_TOKEN "security-test-job-token-5f1e"
#define NOBODY 65534

typedef struct sec_arg {
  uint16_t port;       /* MASTER_PORT */
  const char *token;   /* DIST_TOKEN for the job, or NULL */
  int ready[2];        /* ranks -> attacker: rank and pid, once the group is up */
  int go[2];           /* attacker -> ranks: one byte each when done */
  int verdict[2];      /* attacker -> harness: what it found, one line */
} sec_arg;

/* --- the job ------------------------------------------------------------------ */

static int job_rank(const dist_test_ctx *ctx, const sec_arg *a) {
  char b[32];
  setenv("MASTER_ADDR", "127.0.0.1", 1);
  snprintf(b, sizeof b, "%u", a->port);
  setenv("MASTER_PORT", b, 1);
  snprintf(b, sizeof b, "%d", ctx->rank);
  setenv("RANK", b, 1);
  setenv("WORLD_SIZE", "2", 1);
  setenv("DIST_TRANSPORT", "tcp", 1); /* data-plane listeners on every rank */
  setenv("DIST_TRACE", "0", 1);
  if (a->token)
    setenv("DIST_TOKEN", a->token, 1);
  else
    unsetenv("DIST_TOKEN");
  dist_init_opts o = dist_init_opts_default();
  o.timeout_ms = 60000;
  CHECK(ctx, dist_init_process_group(&o) == DIST_OK, "init: %s", dist_last_errmsg());
  CHECK(ctx, getenv("DIST_TOKEN") == NULL, "the token stays out of the environment");
  float x[4] = {1, 2, 3, (float)ctx->rank};
  dist_tensor t = dist_tensor_1d(x, DIST_FLOAT32, 4);
  CHECK(ctx, dist_all_reduce(&t, DIST_SUM, NULL, NULL) == DIST_OK, "%s",
        dist_errmsg(DIST_E_INVAL, NULL));
  int me[2] = {ctx->rank, getpid()};
  CHECK(ctx, write(a->ready[1], me, sizeof me) == sizeof me, "ready");
  /* A new group: rank 0's data-plane listener is open while it waits for
   * rank 1, which comes only once the attacker is done with it. */
  char c;
  if (ctx->rank == 1)
    CHECK(ctx, read(a->go[0], &c, 1) == 1, "the attacker finished");
  int members[2] = {0, 1};
  dist_pg *pair = NULL;
  dist_group_opts go = {0};
  go.use_local_synchronization = true; /* a mesh of its own, not a split of the default's */
  CHECK(ctx, dist_new_group(members, 2, &go, &pair) == DIST_OK, "new_group: %s",
        dist_last_errmsg());
  if (ctx->rank == 0)
    CHECK(ctx, read(a->go[0], &c, 1) == 1, "the attacker finished");
  float y[4] = {10, 20, 30, (float)ctx->rank};
  t = dist_tensor_1d(y, DIST_FLOAT32, 4);
  CHECK(ctx, dist_all_reduce(&t, DIST_SUM, pair, NULL) == DIST_OK, "the job goes on: %s",
        dist_pg_errmsg(pair));
  CHECK(ctx, y[0] == 20 && y[1] == 40 && y[2] == 60 && y[3] == 1, "%g %g %g %g", y[0], y[1],
        y[2], y[3]);
  dist_destroy_process_group(NULL);
  return 0;
}

/* --- the attacker ------------------------------------------------------------- */

/* The TCP ports pid listens on (its sockets in LISTEN state). */
static int listening_ports(pid_t pid, uint16_t *ports, int max) {
  char path[64], link[64];
  unsigned long inodes[256];
  int ni = 0, n = 0;
  snprintf(path, sizeof path, "/proc/%d/fd", (int)pid);
  DIR *d = opendir(path);
  if (!d)
    return 0;
  for (struct dirent *de; (de = readdir(d)) && ni < 256;) {
    char fp[600];
    snprintf(fp, sizeof fp, "%s/%s", path, de->d_name);
    ssize_t l = readlink(fp, link, sizeof link - 1);
    if (l > 0) {
      link[l] = '\0';
      if (sscanf(link, "socket:[%lu]", &inodes[ni]) == 1)
        ni++;
    }
  }
  closedir(d);
  const char *tables[] = {"tcp", "tcp6"};
  for (int t = 0; t < 2; t++) {
    snprintf(path, sizeof path, "/proc/%d/net/%s", (int)pid, tables[t]);
    FILE *f = fopen(path, "r");
    char line[512];
    while (f && fgets(line, sizeof line, f)) {
      unsigned port, st;
      unsigned long ino;
      char local[80];
      if (sscanf(line, " %*d: %79[0-9A-Fa-f]:%x %*s %x %*s %*s %*s %*s %*s %lu", local, &port,
                 &st, &ino) != 4 || st != 0x0A)
        continue;
      for (int i = 0; i < ni && n < max; i++)
        if (inodes[i] == ino)
          ports[n++] = (uint16_t)port;
    }
    if (f)
      fclose(f);
  }
  return n;
}

static int raw(uint16_t port) {
  int fd = -1;
  if (dist__net_connect("127.0.0.1", port, dist__deadline_ms(5000), &fd, NULL) != DIST_OK)
    return -1;
  return fd;
}

/* True when the acceptor refuses (a refusal result, or it closes). */
static bool refused_after(int fd) {
  uint8_t res[DIST_AUTH_RESULT_LEN];
  int rc = dist__net_read_all(fd, res, sizeof res, dist__deadline_ms(5000), NULL);
  close(fd);
  return rc == DIST_E_CLOSED || rc == DIST_E_SYS || (rc == DIST_OK && res[6] == 0);
}

/* An answer to challenge ch with token (NULL: "I have none"). */
static void answer(const uint8_t *ch, const char *token, const char *role,
                   uint8_t ans[DIST_AUTH_ANSWER_LEN]) {
  memset(ans, 0, DIST_AUTH_ANSWER_LEN);
  memcpy(ans, "DAUT", 4);
  ans[4] = 2, ans[5] = 2, ans[6] = token ? 1 : 0;
  dist__auth_random(ans + 8, DIST_AUTH_NONCE_LEN);
  if (token)
    dist__auth_mac(token, DIST_AUTH_CONNECTOR, role, ch + 8, ans + 8, ans + 40);
}

/* One attempt on port: the challenge must require a token; then the
 * answer made by make() must be refused. Returns a failure or NULL. */
static const char *attempt(uint16_t port, const char *token, const char *role,
                           const uint8_t *replay) {
  int fd = raw(port);
  if (fd < 0)
    return "cannot connect";
  uint8_t ch[DIST_AUTH_CHALLENGE_LEN], ans[DIST_AUTH_ANSWER_LEN];
  if (dist__net_read_all(fd, ch, sizeof ch, dist__deadline_ms(5000), NULL) != DIST_OK ||
      memcmp(ch, "DAUT", 4) != 0) {
    close(fd);
    return "no challenge";
  }
  if (!(ch[6] & 1)) {
    close(fd);
    return "a listener that requires no token";
  }
  if (replay)
    memcpy(ans, replay, sizeof ans);
  else
    answer(ch, token, role, ans);
  dist__net_write_all(fd, ans, sizeof ans, dist__deadline_ms(5000), NULL);
  return refused_after(fd) ? NULL : "let in";
}

/* An honest handshake on port with the job's token, recorded: its answer. */
static bool record(uint16_t port, const char *role, uint8_t ans[DIST_AUTH_ANSWER_LEN]) {
  int fd = raw(port);
  uint8_t ch[DIST_AUTH_CHALLENGE_LEN], res[DIST_AUTH_RESULT_LEN];
  bool ok = fd >= 0 &&
            dist__net_read_all(fd, ch, sizeof ch, dist__deadline_ms(5000), NULL) == DIST_OK;
  if (ok) {
    answer(ch, JOB_TOKEN, role, ans);
    ok = dist__net_write_all(fd, ans, DIST_AUTH_ANSWER_LEN, dist__deadline_ms(5000), NULL) ==
             DIST_OK &&
         dist__net_read_all(fd, res, sizeof res, dist__deadline_ms(5000), NULL) == DIST_OK &&
         res[6] == 1 &&
         dist__auth_verify(JOB_TOKEN, DIST_AUTH_ACCEPTOR, role, ch + 8, ans + 8, res + 8);
  }
  if (fd >= 0)
    close(fd);
  return ok;
}

static void say(const sec_arg *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(const sec_arg *a, const char *fmt, ...) {
  char line[600];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(line, sizeof line - 1, fmt, ap);
  va_end(ap);
  n = n < 0 ? 0 : n > (int)sizeof line - 2 ? (int)sizeof line - 2 : n;
  line[n++] = '\n';
  if (write(a->verdict[1], line, (size_t)n) < 0)
    _exit(3);
}

/* Rank 0's listeners once a data-plane one shows up (it forms the new
 * group's mesh and waits for rank 1), at most 30 s. */
static int listeners_of_rank0(const sec_arg *a, pid_t pid, uint16_t *ports, int max) {
  (void)a;
  return listening_ports(pid, ports, max);
}

/* With DIST_TOKEN: every listener refuses no token, a wrong token and a
 * replayed handshake, and accepts the real thing. */
static int attack_listeners(const sec_arg *a, const pid_t pids[2]) {
  int total = 0, failures = 0, data = 0;
  for (int r = 0; r < 1; r++) {
    uint16_t ports[32];
    int n = listeners_of_rank0(a, pids[0], ports, 32);
    for (int i = 0; i < n; i++) {
      const char *role = ports[i] == a->port ? "store" : "data";
      data += role[0] == 'd';
      uint8_t rec[DIST_AUTH_ANSWER_LEN];
      const char *why;
      total++;
      if ((why = attempt(ports[i], NULL, role, NULL)))
        say(a, "FAIL rank %d port %u (%s) without a token: %s", r, ports[i], role, why), failures++;
      if ((why = attempt(ports[i], "a-wrong-token", role, NULL)))
        say(a, "FAIL rank %d port %u (%s) wrong token: %s", r, ports[i], role, why), failures++;
      if (!record(ports[i], role, rec))
        say(a, "FAIL rank %d port %u (%s): the job's token was not accepted", r, ports[i],
            role), failures++;
      else if ((why = attempt(ports[i], NULL, role, rec)))
        say(a, "FAIL rank %d port %u (%s) replayed handshake: %s", r, ports[i], role, why),
            failures++;
    }
  }
  say(a, "listeners %d data %d failures %d", total, data, failures);
  return 0;
}

/* Without DIST_TOKEN: the store listens on loopback and requires its local
 * secret; another local user gets nothing. */
static int attack_as_another_user(const sec_arg *a) {
  char path[600];
  if (dist__auth_local_secret_path(a->port, false, path, sizeof path, NULL) != DIST_OK) {
    say(a, "FAIL no local secret directory");
    return 0;
  }
  struct stat st, dst;
  char dir[600];
  snprintf(dir, sizeof dir, "%s", path);
  *strrchr(dir, '/') = '\0';
  if (stat(path, &st) != 0 || stat(dir, &dst) != 0) {
    say(a, "FAIL no local secret at %s", path);
    return 0;
  }
  say(a, "secret mode %03o dir mode %03o", (unsigned)(st.st_mode & 0777),
      (unsigned)(dst.st_mode & 0777));
  /* The same user without the secret: the raw exchange is refused. */
  const char *why = attempt(a->port, NULL, "store", NULL);
  say(a, "same user without the secret: %s", why ? why : "refused");
  /* Another user. */
  if (setgroups(0, NULL) != 0 || setgid(NOBODY) != 0 || setuid(NOBODY) != 0) {
    say(a, "FAIL cannot become nobody: %s", strerror(errno));
    return 0;
  }
  int fd = open(path, O_RDONLY);
  say(a, "nobody opens the secret: %s", fd < 0 ? strerror(errno) : "opened");
  dist_store_tcp_opts o = {0};
  o.host = "127.0.0.1";
  o.port = a->port;
  o.timeout_ms = 5000;
  dist_store *s = NULL;
  int rc = dist_store_tcp_create(&o, &s);
  say(a, "nobody's store client: %s: %s", dist_status_name(rc),
      rc ? dist_last_errmsg() : "connected");
  if (s) {
    void *v = NULL;
    size_t len = 0;
    const char *k = "dist/rdzv/0/token";
    say(a, "nobody reads the data-plane token: %s", dist_store_get(s, k, &v, &len) == DIST_OK
                                                        ? "read it" : "refused");
    dist_free(v);
    dist_store_destroy(s);
  }
  return 0;
}

static int attacker(const dist_test_ctx *ctx, const sec_arg *a) {
  (void)ctx;
  signal(SIGPIPE, SIG_IGN); /* refused connections */
  pid_t pids[2];
  for (int i = 0; i < 2; i++) {
    int who[2];
    if (read(a->ready[0], who, sizeof who) != sizeof who || who[0] < 0 || who[0] > 1)
      return 2;
    pids[who[0]] = who[1];
  }
  if (a->token)
    attack_listeners(a, pids);
  else
    attack_as_another_user(a);
  close(a->verdict[1]);
  if (write(a->go[1], "gg", 2) != 2)
    return 4;
  return 0;
}

static int sec_rank(const dist_test_ctx *ctx) {
  const sec_arg *a = ctx->arg;
  return ctx->rank < 2 ? job_rank(ctx, a) : attacker(ctx, a);
}

/* --- the harness -------------------------------------------------------------- */

static uint16_t free_port(void) {
  int fd;
  uint16_t port = 0;
  cr_assert_eq(dist__net_listen("127.0.0.1", 0, true, 1, &fd, &port, NULL), DIST_OK);
  close(fd);
  return port;
}

static void run_job(sec_arg *a, char *found, size_t len) {
  cr_assert(pipe(a->ready) == 0 && pipe(a->go) == 0 && pipe(a->verdict) == 0);
  a->port = free_port();
  dist_test_opts o = {.n = 3, .fn = sec_rank, .arg = a, .timeout_s = 120, .kill_rank = -1};
  dist_test_result res;
  /* The verdict pipe holds a few lines: far below its 64 KiB. */
  int rc = dist_test_run(&o, &res);
  close(a->verdict[1]);
  ssize_t n = read(a->verdict[0], found, len - 1);
  found[n > 0 ? n : 0] = '\0';
  cr_assert_eq(rc, 0, "%s\nthe attacker found:\n%s", res.report, found);
}

Test(security, every_listener_refuses_no_token_a_wrong_one_and_a_replay, .timeout = 170) {
  sec_arg a = {.token = JOB_TOKEN};
  char found[8192];
  run_job(&a, found, sizeof found);
  cr_assert_null(strstr(found, "FAIL"), "%s", found);
  int listeners = 0, data = 0, failures = -1;
  const char *l = strstr(found, "listeners ");
  cr_assert(l && sscanf(l, "listeners %d data %d failures %d", &listeners, &data, &failures) == 3,
            "%s", found);
  /* The store, and any data-plane listener open meanwhile (the data
   * plane's own refusals, replay included, are in test_tcp_fail.c's
   * stranger: its listeners are open only while a mesh forms). */
  cr_assert_geq(listeners, 1, "%s", found);
  cr_assert_eq(listeners, data + 1, "%s", found);
  cr_assert_eq(failures, 0, "%s", found);
}

Test(security, another_local_user_learns_nothing_from_a_job_without_DIST_TOKEN,
     .timeout = 170) {
  if (geteuid() != 0)
    cr_skip_test("needs root to play another local user");
  sec_arg a = {.token = NULL};
  char found[8192];
  run_job(&a, found, sizeof found);
  cr_assert_null(strstr(found, "FAIL"), "%s", found);
  cr_assert(strstr(found, "secret mode 600 dir mode 700"), "%s", found);
  cr_assert(strstr(found, "same user without the secret: refused"), "%s", found);
  cr_assert(strstr(found, "nobody opens the secret: Permission denied"), "%s", found);
  cr_assert(strstr(found, "nobody's store client: DIST_E_INVAL: "), "%s", found);
  cr_assert(strstr(found, "requires a job token"), "%s", found);
  cr_assert_null(strstr(found, "read it"), "%s", found);
  /* The secret goes with the store. */
  char path[600];
  cr_assert_eq(dist__auth_local_secret_path(a.port, false, path, sizeof path, NULL), DIST_OK);
  cr_assert_neq(access(path, F_OK), 0, "%s outlived the job", path);
}
