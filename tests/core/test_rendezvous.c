/* ctest: labels=unit,multiproc timeout=180 */
/* test_rendezvous.c - core/src/job/rendezvous.c: env://, tcp://, file:// and
 * explicit stores with real forked ranks; messages that name the variable
 * at fault; the token and job id made by rank 0 and shared. */
#include <criterion/criterion.h>
#include <signal.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "mp.h"
#include "job/rendezvous.h"
#include "tmpdir.h"

static const char *const rdzv_vars[] = {
    "MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE", "LOCAL_RANK",
    "LOCAL_WORLD_SIZE", "DIST_TOKEN", "DIST_JOB_ID", "DIST_ALLOW_NO_TOKEN",
    "DIST_USE_AGENT_STORE",
};

static void clear_env(void) {
  for (size_t i = 0; i < sizeof rdzv_vars / sizeof rdzv_vars[0]; i++)
    unsetenv(rdzv_vars[i]);
}

/* A port that was free a moment ago on addr (127.0.0.1 or ::1). */
static uint16_t free_port(const char *addr) {
  struct sockaddr_storage ss = {0};
  socklen_t len;
  int fam = strchr(addr, ':') ? AF_INET6 : AF_INET;
  if (fam == AF_INET6) {
    struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
    a->sin6_family = AF_INET6;
    inet_pton(AF_INET6, addr, &a->sin6_addr);
    len = sizeof *a;
  } else {
    struct sockaddr_in *a = (struct sockaddr_in *)&ss;
    a->sin_family = AF_INET;
    inet_pton(AF_INET, addr, &a->sin_addr);
    len = sizeof *a;
  }
  int fd = socket(fam, SOCK_STREAM, 0);
  if (fd < 0 || bind(fd, (struct sockaddr *)&ss, len) != 0 ||
      getsockname(fd, (struct sockaddr *)&ss, &len) != 0)
    return 0;
  close(fd);
  return ntohs(fam == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                               : ((struct sockaddr_in *)&ss)->sin_port);
}

static int rdzv_expect_inval(dist_init_opts *o, const char *needle) {
  dist__rdzv r;
  int rc = dist__rendezvous(o, &r);
  cr_expect_eq(rc, DIST_E_INVAL, "%s: rc %s (%s)", needle, dist_status_name(rc),
               dist_last_errmsg());
  cr_expect(strstr(dist_last_errmsg(), needle), "message '%s' does not name %s",
            dist_last_errmsg(), needle);
  if (rc == DIST_OK)
    dist__rendezvous_release(&r);
  return rc;
}

static void set_good_env(void) {
  clear_env();
  setenv("MASTER_ADDR", "127.0.0.1", 1);
  setenv("MASTER_PORT", "29999", 1);
  setenv("RANK", "1", 1);
  setenv("WORLD_SIZE", "2", 1);
}

Test(core_rendezvous, env_names_each_missing_variable, .timeout = 10) {
  dist_init_opts o = {.rank = -1, .world_size = -1, .timeout_ms = 1000};
  const char *vars[] = {"MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE"};
  for (size_t i = 0; i < 4; i++) {
    set_good_env();
    unsetenv(vars[i]);
    rdzv_expect_inval(&o, vars[i]);
    cr_expect(strstr(dist_last_errmsg(), "unset"), "%s", dist_last_errmsg());
  }
  set_good_env();
  unsetenv("MASTER_PORT");
  rdzv_expect_inval(&o, "env:// needs MASTER_PORT (the port of the rank-0 store), which "
                        "is unset");
}

Test(core_rendezvous, env_names_each_malformed_variable, .timeout = 10) {
  dist_init_opts o = {.rank = -1, .world_size = -1, .timeout_ms = 1000};
  struct {
    const char *var, *val, *needle;
  } cases[] = {
      {"MASTER_PORT", "http", "MASTER_PORT='http'"},
      {"MASTER_PORT", "70000", "MASTER_PORT='70000'"},
      {"MASTER_PORT", "0", "MASTER_PORT='0'"},
      {"RANK", "-1", "RANK='-1'"},
      {"RANK", "one", "RANK='one'"},
      {"RANK", "2", "RANK"},            /* not below WORLD_SIZE=2 */
      {"WORLD_SIZE", "0", "WORLD_SIZE='0'"},
      {"WORLD_SIZE", "2x", "WORLD_SIZE='2x'"},
      {"MASTER_ADDR", "host:29500", "MASTER_ADDR='host:29500'"},
      {"MASTER_ADDR", "bad host", "MASTER_ADDR='bad host'"},
      {"LOCAL_RANK", "x", "LOCAL_RANK='x'"},
      {"LOCAL_WORLD_SIZE", "5", "LOCAL_WORLD_SIZE='5'"},
      {"DIST_JOB_ID", "has/slash", "DIST_JOB_ID='has/slash'"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    set_good_env();
    setenv(cases[i].var, cases[i].val, 1);
    rdzv_expect_inval(&o, cases[i].needle);
  }
}

Test(core_rendezvous, bad_init_methods_and_opts_are_invalid, .timeout = 10) {
  clear_env();
  dist_init_opts o = {.rank = 0, .world_size = 1, .timeout_ms = 1000};
  o.init_method = "udp://x:1";
  rdzv_expect_inval(&o, "udp://x:1");
  o.init_method = "tcp://nohostport";
  rdzv_expect_inval(&o, "tcp://nohostport");
  o.init_method = "tcp://[::1]:99999";
  rdzv_expect_inval(&o, "tcp://");
  o.init_method = "tcp://127.0.0.1:5000";
  o.rank = -1;
  rdzv_expect_inval(&o, "RANK");
  dist_store *hs = NULL;
  cr_assert_eq(dist_store_hash_create(&hs), DIST_OK);
  dist_init_opts e = {.store = hs, .rank = -1, .world_size = 2, .timeout_ms = 1000};
  rdzv_expect_inval(&e, "opts.rank");
  e.rank = 2;
  rdzv_expect_inval(&e, "opts.rank 2");
  cr_expect_eq(dist__rendezvous(&e, NULL), DIST_E_INVAL);
  dist_store_destroy(hs);
}

/* --- forked ranks --------------------------------------------------------- */

typedef struct rdzv_arg {
  const char *addr;      /* env://: MASTER_ADDR */
  uint16_t port;
  const char *method;    /* NULL: env:// through the environment */
  const char *token;     /* DIST_TOKEN for every rank, or NULL */
  const char *job_id;    /* DIST_JOB_ID, or NULL */
  bool file_in_tmpdir;   /* file://<tmpdir>/store */
  int world_override;    /* > 0: ranks believe the world is this big */
  int dup_rank;          /* >= 0: the last forked rank claims this rank */
  int64_t timeout_ms;
  bool zero_opts;        /* a zero-initialised dist_init_opts (no -1s) */
  bool rank_in_url;      /* no RANK / WORLD_SIZE: "?rank=R&world_size=N" */
  int last_world;        /* > 0: the last forked rank believes in this world */
  bool debug_log;        /* debug level, lines captured (progress lines) */
} rdzv_arg;

/* Lines logged while debug_log is on (the rank's own process). */
static char logged[8192];
static void capture(void *arg, dist_log_level lvl, dist_subsys sub, const char *line) {
  (void)arg, (void)lvl, (void)sub;
  size_t n = strlen(logged);
  snprintf(logged + n, sizeof logged - n, "%s\n", line);
}

/* Every rank publishes its job id and token and checks the others hold the
 * same; then a store barrier keeps the host (rank 0) up until all checked. */
static int check_same(const dist_test_ctx *ctx, dist__rdzv *r) {
  char key[64], mine[256];
  snprintf(mine, sizeof mine, "%s|%s", r->job_id, r->token);
  snprintf(key, sizeof key, "test/id/%d", r->rank);
  CHECK_OK(ctx, dist_store_set(r->store, key, mine, strlen(mine)));
  for (int i = 0; i < r->world_size; i++) {
    void *v = NULL;
    size_t n = 0;
    snprintf(key, sizeof key, "test/id/%d", i);
    CHECK_OK(ctx, dist_store_get(r->store, key, &v, &n));
    bool same = n == strlen(mine) && memcmp(v, mine, n) == 0;
    dist_free(v);
    CHECK(ctx, same, "rank %d holds a different job id or token", i);
  }
  int64_t done = 0;
  CHECK_OK(ctx, dist_store_add(r->store, "test/done", 1, &done));
  if (done == r->world_size)
    CHECK_OK(ctx, dist_store_set(r->store, "test/all_done", "1", 1));
  const char *keys[] = {"test/all_done"};
  CHECK_OK(ctx, dist_store_wait(r->store, keys, 1, 10000));
  /* Rank 0 hosts the store: it leaves only after the others are done
   * with it, or a pending reply of theirs dies with the server. */
  if (r->rank != 0) {
    CHECK_OK(ctx, dist_store_add(r->store, "test/left", 1, &done));
    if (done == r->world_size - 1)
      CHECK_OK(ctx, dist_store_set(r->store, "test/all_left", "1", 1));
  } else if (r->world_size > 1) {
    const char *left[] = {"test/all_left"};
    CHECK_OK(ctx, dist_store_wait(r->store, left, 1, 10000));
  }
  return 0;
}

static bool is_hex(const char *s, size_t n) {
  if (strlen(s) != n)
    return false;
  for (size_t i = 0; i < n; i++)
    if (!strchr("0123456789abcdef", s[i]))
      return false;
  return true;
}

static void rank_env(const dist_test_ctx *ctx, const rdzv_arg *a, int *rank) {
  char v[32];
  clear_env();
  *rank = ctx->rank;
  if (a->dup_rank >= 0 && ctx->rank == ctx->world - 1)
    *rank = a->dup_rank;
  snprintf(v, sizeof v, "%d", *rank);
  if (!a->rank_in_url)
    setenv("RANK", v, 1);
  int world = a->world_override > 0 ? a->world_override : ctx->world;
  if (a->last_world > 0 && ctx->rank == ctx->world - 1)
    world = a->last_world;
  snprintf(v, sizeof v, "%d", world);
  if (!a->rank_in_url)
    setenv("WORLD_SIZE", v, 1);
  if (a->addr)
    setenv("MASTER_ADDR", a->addr, 1);
  snprintf(v, sizeof v, "%u", (unsigned)a->port);
  setenv("MASTER_PORT", v, 1);
  if (a->token)
    setenv("DIST_TOKEN", a->token, 1);
  if (a->job_id)
    setenv("DIST_JOB_ID", a->job_id, 1);
}

/* Exit codes the parent reads: 0 ok, 20 + status on a rendezvous failure. */
static int rdzv_rank(const dist_test_ctx *ctx) {
  const rdzv_arg *a = ctx->arg;
  int rank;
  rank_env(ctx, a, &rank);
  char method[600];
  dist_init_opts o = {.rank = -1, .world_size = -1, .timeout_ms = a->timeout_ms};
  if (a->zero_opts)
    o = (dist_init_opts){.timeout_ms = a->timeout_ms}; /* rank 0, world 0: unset */
  if (a->file_in_tmpdir) {
    snprintf(method, sizeof method, "file://%s/store", ctx->tmpdir);
    o.init_method = method;
  } else {
    o.init_method = a->method;
  }
  if (a->rank_in_url) {
    char base[512];
    snprintf(base, sizeof base, "%.500s", o.init_method);
    snprintf(method, sizeof method, "%s?rank=%d&world_size=%d", base, rank, ctx->world);
    o.init_method = method;
  }
  if (a->debug_log) {
    dist_log_set_level(DIST_LOG_DEBUG);
    dist_log_set_sink(capture, NULL);
  }
  dist__rdzv r;
  int rc = dist__rendezvous(&o, &r);
  if (a->debug_log)
    dist_log_set_sink(NULL, NULL);
  if (rc != DIST_OK) {
    fprintf(stderr, "[rank %d] rendezvous: %s: %s\n", rank, dist_status_name(rc),
            dist_last_errmsg());
    if (rc == DIST_E_INVAL && strstr(dist_last_errmsg(), "taken twice"))
      return 40;
    if (rc == DIST_E_TIMEOUT && strstr(dist_last_errmsg(), "missing: 2"))
      return 41;
    if (rc == DIST_E_INVAL && strstr(dist_last_errmsg(), "ranks disagree on the world size") &&
        strstr(dist_last_errmsg(), "says 2") && strstr(dist_last_errmsg(), "says 3"))
      return 42;
    if (rc == DIST_E_TIMEOUT && a->debug_log &&
        strstr(logged, "waits for the others: 1 of 2 ranks joined; missing: 1 (env://)"))
      return 43;
    return 20 + rc;
  }
  CHECK(ctx, r.rank == rank && r.world_size == ctx->world, "rank %d world %d", r.rank,
        r.world_size);
  CHECK(ctx, r.local_rank == r.rank && r.local_world_size == r.world_size,
        "local %d of %d", r.local_rank, r.local_world_size);
  if (a->token)
    CHECK(ctx, strcmp(r.token, a->token) == 0, "token is not DIST_TOKEN");
  else
    CHECK(ctx, is_hex(r.token, 64), "made token '%s' is not 64 hex", r.token);
  if (a->job_id)
    CHECK(ctx, strcmp(r.job_id, a->job_id) == 0, "job id %s", r.job_id);
  else
    CHECK(ctx, dist__rendezvous_job_id_ok(r.job_id) && strlen(r.job_id) == 24,
          "made job id '%s'", r.job_id);
  rc = check_same(ctx, &r);
  dist__rendezvous_release(&r);
  return rc;
}

static void run_ranks(int n, rdzv_arg *a) {
  if (!a->timeout_ms)
    a->timeout_ms = 15000;
  int bad = dist_test_ranks(n, rdzv_rank, a, 30);
  cr_assert_eq(bad, 0, "%s", dist_test_report());
}

Test(core_rendezvous, env_over_ipv4_with_a_made_token, .timeout = 40) {
  rdzv_arg a = {.addr = "127.0.0.1", .port = free_port("127.0.0.1"), .dup_rank = -1};
  run_ranks(4, &a);
}

Test(core_rendezvous, env_over_ipv6_loopback, .timeout = 40) {
  rdzv_arg a = {.addr = "::1", .port = free_port("::1"), .dup_rank = -1};
  cr_assert_neq(a.port, 0, "no IPv6 loopback here");
  run_ranks(3, &a);
}

Test(core_rendezvous, env_with_a_host_name_token_and_job_id, .timeout = 40) {
  rdzv_arg a = {.addr = "localhost", .port = free_port("127.0.0.1"), .dup_rank = -1,
                .token = "s3cret-token-for-the-test", .job_id = "job-42.a_b"};
  run_ranks(3, &a);
}

Test(core_rendezvous, tcp_init_method, .timeout = 40) {
  char m[64];
  snprintf(m, sizeof m, "tcp://127.0.0.1:%u", (unsigned)free_port("127.0.0.1"));
  rdzv_arg a = {.method = m, .dup_rank = -1};
  run_ranks(3, &a);
}

Test(core_rendezvous, tcp_init_method_bracketed_ipv6, .timeout = 40) {
  char m[64];
  snprintf(m, sizeof m, "tcp://[::1]:%u", (unsigned)free_port("::1"));
  rdzv_arg a = {.method = m, .dup_rank = -1};
  run_ranks(2, &a);
}

Test(core_rendezvous, file_init_method, .timeout = 40) {
  rdzv_arg a = {.file_in_tmpdir = true, .dup_rank = -1};
  run_ranks(4, &a);
}

/* A zero-initialised dist_init_opts means "everything from the
 * environment": RANK=1 is not overridden by the struct's rank 0 (issue #9,
 * defect 2: it silently became rank 0, then "Address already in use"). */
Test(core_rendezvous, a_zero_initialised_opts_takes_rank_from_the_environment, .timeout = 40) {
  char m[64];
  snprintf(m, sizeof m, "tcp://127.0.0.1:%u", (unsigned)free_port("127.0.0.1"));
  rdzv_arg a = {.method = m, .dup_rank = -1, .zero_opts = true};
  run_ranks(3, &a);
}

/* Every init URL may carry the rank and world size, as torch's do (defect
 * 8: tcp://...?rank=0&world_size=2 was refused). */
Test(core_rendezvous, tcp_init_method_with_rank_and_world_size_in_the_url, .timeout = 40) {
  char m[64];
  snprintf(m, sizeof m, "tcp://127.0.0.1:%u", (unsigned)free_port("127.0.0.1"));
  rdzv_arg a = {.method = m, .dup_rank = -1, .rank_in_url = true};
  run_ranks(2, &a);
}

Test(core_rendezvous, file_init_method_with_rank_and_world_size_in_the_url, .timeout = 40) {
  rdzv_arg a = {.file_in_tmpdir = true, .dup_rank = -1, .rank_in_url = true, .zero_opts = true};
  run_ranks(3, &a);
}

Test(core_rendezvous, an_unknown_url_query_key_is_refused, .timeout = 10) {
  clear_env();
  dist_init_opts o = {.init_method = "tcp://127.0.0.1:1?rnak=0&world_size=2"};
  dist__rdzv r;
  cr_assert_eq(dist__rendezvous(&o, &r), DIST_E_INVAL);
  cr_assert(strstr(dist_last_errmsg(), "'rnak=0' is not understood"), "%s", dist_last_errmsg());
}

Test(core_rendezvous, a_missing_rank_is_named_on_timeout, .timeout = 40) {
  /* Ranks 0 and 1 of a world of 3: rank 2 never comes. */
  rdzv_arg a = {.addr = "127.0.0.1", .port = free_port("127.0.0.1"), .world_override = 3,
                .dup_rank = -1, .timeout_ms = 1500};
  dist_test_opts o = {.n = 2, .fn = rdzv_rank, .arg = &a, .timeout_s = 20, .kill_rank = -1};
  dist_test_result res;
  dist_test_run(&o, &res);
  for (int i = 0; i < 2; i++)
    cr_expect_eq(res.exit_code[i], 41, "rank %d exited %d (41: timeout naming rank 2)", i,
                 res.exit_code[i]);
}

/* Ranks that disagree on the world size fail at once, every one of them,
 * naming who said what (defect 4: they waited the whole timeout, then
 * said "2 of 2 ranks joined; missing: none found"). */
Test(core_rendezvous, ranks_that_disagree_on_the_world_size_fail_at_once, .timeout = 60) {
  rdzv_arg a = {.addr = "127.0.0.1", .port = free_port("127.0.0.1"), .last_world = 3,
                .dup_rank = -1, .timeout_ms = 30000};
  dist_test_opts o = {.n = 2, .fn = rdzv_rank, .arg = &a, .timeout_s = 50, .kill_rank = -1};
  dist_test_result res;
  dist_test_run(&o, &res);
  for (int i = 0; i < 2; i++) {
    cr_expect_eq(res.exit_code[i], 42, "rank %d exited %d (42: world sizes named)", i,
                 res.exit_code[i]);
    /* Far below the 30 s timeout: nobody waited for it. */
    cr_expect_lt(res.elapsed_ms[i], 20000, "rank %d took %lld ms", i,
                 (long long)res.elapsed_ms[i]);
  }
}

/* While it waits, a rank says who has joined and who is missing (at once
 * at DEBUG; every 30 s at WARNING), so a rank that never starts is not
 * minutes of silence (defect 5). */
Test(core_rendezvous, a_waiting_rank_says_who_is_missing, .timeout = 40) {
  rdzv_arg a = {.addr = "127.0.0.1", .port = free_port("127.0.0.1"), .world_override = 2,
                .dup_rank = -1, .timeout_ms = 2000, .debug_log = true};
  dist_test_opts o = {.n = 1, .fn = rdzv_rank, .arg = &a, .timeout_s = 20, .kill_rank = -1};
  dist_test_result res;
  dist_test_run(&o, &res);
  cr_expect_eq(res.exit_code[0], 43, "rank 0 exited %d (43: progress line logged)",
               res.exit_code[0]);
}

/* A file:// store left by a job whose processes all died (here rank 0 of 2,
 * killed while it waited for rank 1) does not break the next job at the
 * same path (defect 6: "rank 0 is taken twice" by the dead process). */
Test(core_rendezvous, a_stale_file_store_from_a_dead_job_is_started_afresh, .timeout = 60) {
  char d[] = "/tmp/dist-stale-XXXXXX", m[128];
  cr_assert(dist_test_mkdtemp(d));
  snprintf(m, sizeof m, "file://%s/store", d);
  rdzv_arg dead = {.method = m, .world_override = 2, .dup_rank = -1, .timeout_ms = 20000};
  dist_test_opts o = {.n = 1, .fn = rdzv_rank, .arg = &dead, .timeout_s = 20, .kill_rank = 0,
                      .kill_after_ms = 500};
  dist_test_result res;
  dist_test_run(&o, &res);
  cr_assert_eq(res.signal[0], SIGKILL, "the first job's rank was not killed");
  char store[160];
  snprintf(store, sizeof store, "%s/store", d);
  cr_assert(access(store, F_OK) == 0, "the dead job left no file");
  rdzv_arg next = {.method = m, .dup_rank = -1};
  run_ranks(2, &next);
  char rm[200];
  snprintf(rm, sizeof rm, "rm -rf '%s'", d);
  cr_expect_eq(system(rm), 0);
}

Test(core_rendezvous, a_rank_taken_twice_is_named, .timeout = 40) {
  /* Three processes claim ranks 0, 1 and 1 of a world of 3. */
  rdzv_arg a = {.addr = "127.0.0.1", .port = free_port("127.0.0.1"), .dup_rank = 1,
                .timeout_ms = 3000};
  dist_test_opts o = {.n = 3, .fn = rdzv_rank, .arg = &a, .timeout_s = 20, .kill_rank = -1};
  dist_test_result res;
  dist_test_run(&o, &res);
  int taken = (res.exit_code[1] == 40) + (res.exit_code[2] == 40);
  cr_expect_eq(taken, 1, "exits %d %d %d: one of the two rank-1 processes must be told",
               res.exit_code[0], res.exit_code[1], res.exit_code[2]);
}

static int explicit_rank(const dist_test_ctx *ctx) {
  dist_store *s = NULL;
  CHECK_OK(ctx, dist_test_tcp_store(ctx, &s));
  clear_env();
  for (int gen = 0; gen < 2; gen++) { /* init, release, init again */
    dist_init_opts o = {.store = s, .rank = ctx->rank, .world_size = ctx->world,
                        .timeout_ms = 10000};
    dist__rdzv r;
    CHECK_OK(ctx, dist__rendezvous(&o, &r));
    CHECK(ctx, r.generation == gen && !r.store_owned && r.store == s, "gen %d",
          r.generation);
    char key[32];
    snprintf(key, sizeof key, "test/gen/%d", gen);
    int64_t n = 0;
    CHECK_OK(ctx, dist_store_add(s, key, 1, &n));
    dist__rendezvous_release(&r);
  }
  CHECK(ctx, dist_store_get_timeout(s) == 30000, "the borrowed store's timeout changed");
  const char *keys[] = {"test/gen/1"};
  CHECK_OK(ctx, dist_store_wait(s, keys, 1, 5000));
  /* Done with the store: only now counted out, so the host, which leaves
   * last, never closes its server under a member's wait (CI saw rank 2's
   * wait reset when it counted out before waiting). */
  int64_t n = 0;
  CHECK_OK(ctx, dist_store_add(s, "test/end", 1, &n));
  if (ctx->rank == 0) /* the host leaves last */
    while (n < ctx->world && dist_store_add(s, "test/end", 0, &n) == DIST_OK)
      usleep(2000);
  dist_store_destroy(s);
  return 0;
}

Test(core_rendezvous, explicit_store_twice_in_a_row, .timeout = 40) {
  cr_assert_eq(dist_test_ranks(3, explicit_rank, NULL, 30), 0, "%s", dist_test_report());
}

Test(core_rendezvous, unreachable_store_says_what_to_check, .timeout = 20) {
  set_good_env(); /* rank 1 of 2; nobody listens on the port */
  char port[16];
  snprintf(port, sizeof port, "%u", (unsigned)free_port("127.0.0.1"));
  setenv("MASTER_PORT", port, 1);
  dist_init_opts o = {.rank = -1, .world_size = -1, .timeout_ms = 800};
  dist__rdzv r;
  int64_t t0 = dist__now_ms();
  int rc = dist__rendezvous(&o, &r);
  int64_t took = dist__now_ms() - t0;
  cr_expect_neq(rc, DIST_OK);
  cr_expect(took < 5000, "took %lld ms for a timeout of 800", (long long)took);
  const char *m = dist_last_errmsg();
  cr_expect(strstr(m, "could not reach the store at 127.0.0.1:") &&
                strstr(m, "MASTER_ADDR:MASTER_PORT"),
            "%s", m);
  /* Loopback reaches a loopback-only store: the token hint cannot be the
   * cause here, so it is not given (issue #9, defect 5). */
  cr_expect(!strstr(m, "DIST_TOKEN"), "%s", m);
}

Test(core_rendezvous, an_unreachable_remote_store_mentions_the_token_rule, .timeout = 20) {
  set_good_env();
  setenv("MASTER_ADDR", "192.0.2.1", 1); /* TEST-NET-1: nobody answers */
  dist_init_opts o = {.rank = -1, .world_size = -1, .timeout_ms = 800};
  dist__rdzv r;
  cr_expect_neq(dist__rendezvous(&o, &r), DIST_OK);
  const char *m = dist_last_errmsg();
  cr_expect(strstr(m, "could not reach the store at 192.0.2.1:") && strstr(m, "DIST_TOKEN"),
            "%s", m);
}

Test(core_rendezvous, job_ids, .timeout = 5) {
  char id[DIST_JOB_ID_MAX + 1];
  cr_assert_eq(dist__rendezvous_make_job_id(id, sizeof id), DIST_OK);
  cr_expect(dist__rendezvous_job_id_ok(id), "%s", id);
  cr_expect(!dist__rendezvous_job_id_ok(""));
  cr_expect(!dist__rendezvous_job_id_ok("a b"));
  char longid[80];
  memset(longid, 'a', sizeof longid - 1);
  longid[sizeof longid - 1] = '\0';
  cr_expect(!dist__rendezvous_job_id_ok(longid));
  cr_expect_eq(dist__rendezvous_make_job_id(id, 8), DIST_E_INVAL);
}
