/* fuzz_init_env.c - libFuzzer target: what a process reads before any
 * group exists. The input is lines NAME=VALUE: the environment variables
 * below are set from it (the others unset), "init=" is the init method
 * (tcp://, file://, env://, with a ?rank=&world_size= query), "opts=R,W" the
 * rank and world size given in dist_init_opts, "backend=" a backend spec
 * ("cpu:cpu,cuda:nccl"), "cause=" a cause value as another rank posts it
 * in the job's store (launch_env.h; '\x01' in it stands for a newline).
 * Then every parser of them runs: the logging variables, DIST_TIMEOUT,
 * integer tunables, the rendezvous' settings (dist__rendezvous_check: no
 * store is opened), host:port, job ids, interface names, backend maps,
 * causes. A parser may refuse with DIST_E_* and a message; nothing may
 * crash, hang or leak, and a refusal must leave a message. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <dist/dist.h>

#include "base/dist_int.h"
#include "backends/backends.h"
#include "net/net.h"
#include "pg/pg_int.h"
#include "job/rendezvous.h"

static const char *const env_names[] = {
    "MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE",
    "DIST_TOKEN", "DIST_JOB_ID", "DIST_ALLOW_NO_TOKEN", "DIST_USE_AGENT_STORE", "DIST_DEBUG",
    "TORCH_DISTRIBUTED_DEBUG", "DIST_LOG_LEVEL", "TORCH_CPP_LOG_LEVEL", "DIST_LOG_SUBSYS",
    "DIST_TIMEOUT", "DIST_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME", "DIST_TCP_SPIN_US",
    "DIST_SOCKETS_PER_PEER", "DIST_STORE_SPIN_US", "DIST_TRANSPORT",
};
#define N_ENV (sizeof env_names / sizeof *env_names)
static char env_buf[N_ENV][8192];

static void quiet(void *arg, dist_log_level level, dist_subsys subsys, const char *line) {
  (void)arg;
  (void)level;
  (void)subsys;
  (void)line;
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  dist_log_set_sink(quiet, NULL); // the lines are still formatted: that is fuzzed too
  return 0;
}

/* A refusal must say why. */
static void must_explain(int rc, const char *what) {
  if (rc != DIST_OK && !dist_last_errmsg()[0]) {
    fprintf(stderr, "%s failed with %s and no message\n", what, dist_status_name(rc));
    abort();
  }
}

static void parse_opts(const char *v, dist_init_opts *o) {
  char *end;
  long r = strtol(v, &end, 10), w = *end == ',' ? strtol(end + 1, NULL, 10) : 0;
  o->rank = (int)(r < -2 ? -2 : r > 1 << 20 ? 1 << 20 : r);
  o->world_size = (int)(w < -2 ? -2 : w > 1 << 20 ? 1 << 20 : w);
}

static void run_parsers(const char *init, const dist_init_opts *given, const char *backend,
                        char *cause) {
  dist_set_debug_level_from_env();
  (void)dist__default_timeout_ms();
  int64_t v;
  (void)dist__env_int("DIST_TCP_SPIN_US", 0, 10000000, 50, &v);
  (void)dist__env_int("DIST_SOCKETS_PER_PEER", 1, 16, 1, &v);

  dist_init_opts o = *given;
  o.init_method = init;
  o.timeout_ms = 1000;
  dist__rdzv r;
  dist__clear_last_error();
  int rc = dist__rendezvous_check(&o, &r);
  must_explain(rc, "dist__rendezvous_check");
  if (rc == DIST_OK && (r.rank < 0 || r.rank >= r.world_size || r.local_rank < 0 ||
                        r.local_rank >= r.local_world_size)) {
    fprintf(stderr, "accepted rank %d of %d, local %d of %d\n", r.rank, r.world_size,
            r.local_rank, r.local_world_size);
    abort();
  }

  const char *addr = getenv("MASTER_ADDR");
  char host[DIST_NET_HOSTLEN];
  uint16_t port;
  if (addr) {
    dist__clear_last_error();
    must_explain(dist__net_split_hostport(addr, host, sizeof host, &port), "split_hostport");
    (void)dist__net_is_loopback(addr);
  }
  if (init && !strncmp(init, "tcp://", 6))
    (void)dist__net_split_hostport(init + 6, host, sizeof host, &port);
  const char *job = getenv("DIST_JOB_ID");
  if (job)
    (void)dist__rendezvous_job_id_ok(job);
  /* interface names only: a host name would be resolved (DNS) */
  if (getenv("DIST_SOCKET_IFNAME") || getenv("GLOO_SOCKET_IFNAME")) {
    dist__net_addr a[16];
    int n = 0;
    dist__errbuf e;
    dist__err_clear(&e);
    (void)dist__net_local_addrs(NULL, a, 16, &n, &e);
  }
  if (backend) {
    dist__backend_map m;
    dist__clear_last_error();
    must_explain(dist__backend_map_parse(backend, &m), "backend_map_parse");
  }
  if (cause) {
    for (char *p = cause; *p; p++)
      if (*p == '\x01')
        *p = '\n';
    int status, rank;
    const char *report;
    size_t len = strlen(cause);
    (void)dist__cause_parse(cause, len, &status, &rank, &report);
    dist__cause_fields f;
    dist__cause_parse_info(cause, len, &f);
    if (f.n_culprits < 0 || f.n_culprits > DIST_CAUSE_CULPRITS_MAX)
      abort();
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *text = malloc(size + 1);
  if (!text)
    return 0;
  memcpy(text, data, size);
  text[size] = '\0';
  for (size_t i = 0; i < N_ENV; i++)
    unsetenv(env_names[i]);
  const char *init = NULL, *backend = NULL;
  char *cause = NULL;
  dist_init_opts given = {.rank = -1, .world_size = -1};
  for (char *save = NULL, *line = strtok_r(text, "\n", &save); line;
       line = strtok_r(NULL, "\n", &save)) {
    char *eq = strchr(line, '=');
    if (!eq)
      continue;
    *eq = '\0';
    const char *v = eq + 1;
    if (!strcmp(line, "init"))
      init = v;
    else if (!strcmp(line, "opts"))
      parse_opts(v, &given);
    else if (!strcmp(line, "backend"))
      backend = v;
    else if (!strcmp(line, "cause"))
      cause = eq + 1;
    else
      for (size_t i = 0; i < N_ENV; i++)
        if (!strcmp(line, env_names[i])) {
          /* putenv of buffers of our own: setenv never frees what it
           * made, and a million inputs would grow the process by GBs */
          snprintf(env_buf[i], sizeof env_buf[i], "%s=%s", env_names[i], v);
          putenv(env_buf[i]);
        }
  }
  run_parsers(init, &given, backend, cause);
  for (size_t i = 0; i < N_ENV; i++)
    unsetenv(env_names[i]);
  free(text);
  return 0;
}
