/* rendezvous.c - how the ranks of a job find each other: parse the init
 * method and the environment, open the job's store (host it on rank 0, or
 * join distrun's), agree on the job id and the data-plane token, and wait
 * until every rank has joined.
 *
 * DESIGN. Everything goes through the store, so the same protocol runs over
 * a TCP store, a file store or a store the caller brings:
 *   1. every rank adds 1 to dist/rdzv/joined; the result v gives the
 *      generation g = (v - 1) / world_size, so a program that inits,
 *      destroys and inits again on one store never reads stale keys;
 *   2. every rank claims dist/rdzv/<g>/rank/<r> with compare_set, so two
 *      processes with the same RANK are told so instead of hanging, and
 *      counts itself in dist/rdzv/<g>/claimed (a timeout report's count);
 *   3. rank 0 publishes the job id (and the token it made when DIST_TOKEN
 *      is unset) under dist/rdzv/<g>/; the others read what they lack;
 *   4. every rank adds 1 to dist/rdzv/<g>/arrived; the one that makes it
 *      world_size sets dist/rdzv/<g>/complete to "1", which everybody waits
 *      for. On a timeout each rank checks the claims and names the missing
 *      ranks; rank 0 also posts that message as the verdict (compare_set:
 *      the first verdict stands), so the others fail with it at once rather
 *      than with a closed connection when rank 0's store goes away.
 * One deadline (opts->timeout_ms) bounds all of it: each store call gets
 * the time that is left. */
#include <arpa/inet.h>
#include <ctype.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "net/auth.h"
#include "net/net.h"
#include "rendezvous.h"
#include "store/store_int.h"

enum method { M_ENV, M_TCP, M_FILE, M_STORE };

/* How long a rank whose barrier timed out waits for rank 0's verdict. */
#define VERDICT_GRACE_MS 1000
/* While waiting for the others: how often a rank looks for another's
 * world-size error, and how often it says at WARNING who is missing. */
#define WAIT_SLICE_MS 500
#define PROGRESS_MS 30000
/* How long naming the missing ranks may take (a store round trip per rank). */
#define SCAN_MS 5000

/* What the init method and the environment say, before any store exists. */
typedef struct settings {
  enum method method;
  const char *method_name; /* for messages: "env://", "tcp://", ... */
  char host[DIST_NET_HOSTLEN];
  uint16_t port;
  const char *path;        /* file:// */
  bool agent_store;        /* DIST_USE_AGENT_STORE=1: nobody hosts */
  const char *token;       /* DIST_TOKEN or NULL */
  bool allow_remote;       /* DIST_ALLOW_NO_TOKEN=1 */
  int64_t timeout_ms, deadline_ms;
  char url[512];           /* the init method without its query */
  int url_rank;            /* ?rank=N, -1 when absent */
  int url_world;           /* ?world_size=N, -1 when absent */
} settings;

/* --- environment --------------------------------------------------------- */

/* An integer variable in [lo, hi]; what says what the variable is for. */
static int env_required(const settings *s, const char *name, const char *what,
                        int64_t lo, int64_t hi, int64_t *out) {
  const char *v = dist__getenv(name);
  if (!v)
    return dist__set_last_error(DIST_E_INVAL, "%s needs %s (%s), which is unset",
                                s->method_name, name, what);
  char *end;
  errno = 0;
  long long x = strtoll(v, &end, 10);
  if (errno || end == v || *end != '\0' || x < lo || x > hi)
    return dist__set_last_error(DIST_E_INVAL,
                                "%s='%s' is not valid: %s must be an integer in "
                                "[%" PRId64 ", %" PRId64 "] (%s)",
                                name, v, name, lo, hi, what);
  *out = x;
  return DIST_OK;
}

/* A host name, an IPv4 address or an IPv6 address (brackets allowed). */
static int parse_host(const char *var, const char *v, char *out, size_t len) {
  size_t n = strlen(v);
  if (n >= 2 && v[0] == '[' && v[n - 1] == ']') {
    v++;
    n -= 2;
  }
  if (n == 0 || n >= len)
    return dist__set_last_error(DIST_E_INVAL, "%s is empty or too long (%zu characters)",
                                var, n);
  memcpy(out, v, n);
  out[n] = '\0';
  unsigned char addr[16];
  if (inet_pton(AF_INET6, out, addr) == 1 || inet_pton(AF_INET, out, addr) == 1)
    return DIST_OK;
  for (size_t i = 0; i < n; i++) {
    char c = out[i];
    if (isalnum((unsigned char)c) || c == '-' || c == '.' || c == '_')
      continue;
    return dist__set_last_error(
        DIST_E_INVAL, "%s='%s' is not a host name or an IPv4/IPv6 address%s", var, v,
        c == ':' ? " (the port goes in MASTER_PORT, or use tcp://host:port)" : "");
  }
  return DIST_OK;
}

/* rank / world size: opts first, then the init method's query, then the
 * environment. opts.rank counts only with opts.world_size > 0: 0 is a
 * rank, so a zero-initialised dist_init_opts means "from the environment"
 * (pg.h). */
static int rank_and_world(const settings *s, const dist_init_opts *o, dist__rdzv *r) {
  int64_t v;
  bool given = o->world_size > 0;
  if (given) {
    r->world_size = o->world_size;
  } else if (s->url_world > 0) {
    r->world_size = s->url_world;
  } else {
    DIST_TRY(env_required(s, DIST_ENV_WORLD_SIZE, "the number of ranks", 1, INT32_MAX, &v));
    r->world_size = (int)v;
  }
  if (given && o->rank >= 0) {
    r->rank = o->rank;
  } else if (s->url_rank >= 0) {
    r->rank = s->url_rank;
  } else {
    DIST_TRY(env_required(s, DIST_ENV_RANK, "this process's rank, 0..WORLD_SIZE-1", 0,
                          INT32_MAX, &v));
    r->rank = (int)v;
  }
  if (r->rank >= r->world_size)
    return dist__set_last_error(DIST_E_INVAL,
                                "rank %d (RANK or opts.rank) is not below the world "
                                "size %d (WORLD_SIZE or opts.world_size)",
                                r->rank, r->world_size);
  return DIST_OK;
}

/* LOCAL_RANK / LOCAL_WORLD_SIZE, or one host when unset. */
static int local_ranks(const settings *s, dist__rdzv *r) {
  int64_t v;
  r->local_rank = r->rank;
  r->local_world_size = r->world_size;
  if (dist__getenv(DIST_ENV_LOCAL_WORLD_SIZE)) {
    DIST_TRY(env_required(s, DIST_ENV_LOCAL_WORLD_SIZE, "ranks on this host", 1,
                          r->world_size, &v));
    r->local_world_size = (int)v;
  }
  if (dist__getenv(DIST_ENV_LOCAL_RANK)) {
    DIST_TRY(env_required(s, DIST_ENV_LOCAL_RANK, "this process's rank on this host", 0,
                          r->local_world_size - 1, &v));
    r->local_rank = (int)v;
  } else if (r->local_rank >= r->local_world_size) {
    return dist__set_last_error(DIST_E_INVAL,
                                "LOCAL_WORLD_SIZE=%d is set but LOCAL_RANK is unset",
                                r->local_world_size);
  }
  return DIST_OK;
}

static int parse_env_method(settings *s) {
  const char *addr = dist__getenv(DIST_ENV_MASTER_ADDR);
  if (!addr)
    return dist__set_last_error(DIST_E_INVAL,
                                "env:// needs MASTER_ADDR (the host of the rank-0 "
                                "store), which is unset");
  DIST_TRY(parse_host(DIST_ENV_MASTER_ADDR, addr, s->host, sizeof s->host));
  int64_t port;
  DIST_TRY(env_required(s, DIST_ENV_MASTER_PORT, "the port of the rank-0 store", 1,
                        65535, &port));
  s->port = (uint16_t)port;
  return DIST_OK;
}

static int parse_tcp_method(settings *s, const char *rest) {
  char host[DIST_NET_HOSTLEN];
  uint16_t port = 0;
  if (dist__net_split_hostport(rest, host, sizeof host, &port) != DIST_OK || port == 0)
    return dist__set_last_error(DIST_E_INVAL,
                                "init_method 'tcp://%s' is malformed: expected "
                                "tcp://host:port or tcp://[v6addr]:port",
                                rest);
  DIST_TRY(parse_host("the tcp:// host", host, s->host, sizeof s->host));
  s->port = port;
  return DIST_OK;
}

/* "?rank=N&world_size=M" after any init method (torch's URLs); other keys
 * are refused so a typo is not silently ignored. */
static int parse_query(settings *s, const char *method, const char *q) {
  char buf[512];
  if (strlen(q) >= sizeof buf) /* cut short, rank=123 could read as rank=12 */
    return dist__set_last_error(DIST_E_INVAL, "init_method's query is too long (%zu "
                                "characters; at most %zu)", strlen(q), sizeof buf - 1);
  snprintf(buf, sizeof buf, "%s", q);
  for (char *save = NULL, *kv = strtok_r(buf, "&", &save); kv; kv = strtok_r(NULL, "&", &save)) {
    char *eq = strchr(kv, '=');
    char *end = NULL;
    long long x = eq ? strtoll(eq + 1, &end, 10) : -1;
    bool num = eq && end != eq + 1 && *end == '\0' && x >= 0 && x <= INT32_MAX;
    if (eq)
      *eq = '\0';
    if (num && !strcmp(kv, "rank"))
      s->url_rank = (int)x;
    else if (num && x > 0 && !strcmp(kv, "world_size"))
      s->url_world = (int)x;
    else
      return dist__set_last_error(DIST_E_INVAL,
                                  "init_method '%s': '%s%s%s' is not understood: the query "
                                  "may give rank=N (>= 0) and world_size=N (> 0)",
                                  method, kv, eq ? "=" : "", eq ? eq + 1 : "");
  }
  return DIST_OK;
}

static int parse_method(const dist_init_opts *o, settings *s) {
  const char *m = o->init_method && *o->init_method ? o->init_method : "env://";
  s->url_rank = s->url_world = -1;
  const char *q = strchr(m, '?');
  if (q && !o->store) {
    if ((size_t)(q - m) >= sizeof s->url)
      return dist__set_last_error(DIST_E_INVAL, "init_method is too long");
    DIST_TRY(parse_query(s, m, q + 1));
    snprintf(s->url, sizeof s->url, "%.*s", (int)(q - m), m);
    m = s->url;
  }
  if (o->store) {
    s->method = M_STORE;
    s->method_name = "an explicit store";
    if (o->rank < 0 || o->world_size <= 0)
      return dist__set_last_error(DIST_E_INVAL,
                                  "an explicit store needs opts.rank (>= 0) and "
                                  "opts.world_size (> 0); got %d and %d",
                                  o->rank, o->world_size);
    return DIST_OK;
  }
  if (strcmp(m, "env://") == 0) {
    s->method = M_ENV;
    s->method_name = "env://";
    return parse_env_method(s);
  }
  if (strncmp(m, "tcp://", 6) == 0) {
    s->method = M_TCP;
    s->method_name = "tcp://";
    return parse_tcp_method(s, m + 6);
  }
  if (strncmp(m, "file://", 7) == 0 && m[7]) {
    s->method = M_FILE;
    s->method_name = "file://";
    s->path = m + 7;
    return DIST_OK;
  }
  return dist__set_last_error(DIST_E_INVAL,
                              "init_method '%s' is not understood: expected env://, "
                              "tcp://host:port or file:///path",
                              m);
}

static int parse_settings(const dist_init_opts *o, settings *s, dist__rdzv *r) {
  s->timeout_ms = o->timeout_ms > 0 ? o->timeout_ms : dist__default_timeout_ms();
  s->deadline_ms = dist__deadline_ms(s->timeout_ms);
  DIST_TRY(parse_method(o, s));
  if (s->method == M_STORE) {
    r->rank = o->rank;
    r->world_size = o->world_size;
    if (r->rank >= r->world_size)
      return dist__set_last_error(DIST_E_INVAL, "opts.rank %d is not below opts.world_size %d",
                                  r->rank, r->world_size);
  } else {
    DIST_TRY(rank_and_world(s, o, r));
  }
  DIST_TRY(local_ranks(s, r));
  DIST_TRY(dist__env_token(&s->token));
  const char *j = dist__getenv(DIST_ENV_JOB_ID);
  if (j && !dist__rendezvous_job_id_ok(j))
    return dist__set_last_error(DIST_E_INVAL,
                                "DIST_JOB_ID='%s' is not a job id: 1 to %d characters "
                                "of A-Z a-z 0-9 . _ -",
                                j, DIST_JOB_ID_MAX);
  const char *a = dist__getenv(DIST_ENV_ALLOW_NO_TOKEN);
  s->allow_remote = a && strcmp(a, "0") != 0;
  const char *agent = dist__getenv(DIST_ENV_USE_AGENT_STORE);
  s->agent_store = agent && strcmp(agent, "0") != 0;
  return DIST_OK;
}

/* --- the store ----------------------------------------------------------- */

/* Re-raises the store's creation failure with what the user should check.
 * The loopback hint only where it can be the cause: a store reached at an
 * address other than loopback. */
static int store_failed(const settings *s, const dist__rdzv *r, int rc, bool server) {
  char why[DIST_ERRMSG_LEN];
  snprintf(why, sizeof why, "%s", dist_last_errmsg());
  if (server)
    return dist__set_last_error(rc, "rank 0 could not host the store on port %u (%s): %s",
                                (unsigned)s->port,
                                s->method == M_ENV ? "MASTER_PORT" : "tcp:// port", why);
  return dist__set_last_error(
      rc, "rank %d could not reach the store at %s:%u (%s%s): %s%s", r->rank, s->host,
      (unsigned)s->port, s->method == M_ENV ? "MASTER_ADDR:MASTER_PORT" : "tcp://",
      s->agent_store ? ", hosted by the launcher" : ", hosted by rank 0", why,
      !s->token && !s->agent_store && !s->allow_remote &&
              !dist__net_is_loopback(s->host)
          ? "; without DIST_TOKEN rank 0's store listens on loopback only "
            "(set DIST_TOKEN on every rank, or DIST_ALLOW_NO_TOKEN=1)"
          : "");
}

/* Where rank 0's server listens: every address when others may come from
 * elsewhere; else loopback, on MASTER_ADDR itself when it names a loopback
 * address (so MASTER_ADDR=::1 gets an IPv6 listener). */
static const char *server_host(const settings *s, bool remote) {
  return !remote && dist__net_is_loopback(s->host) ? s->host : NULL;
}

static int open_tcp_store(const settings *s, dist__rdzv *r) {
  dist_store_tcp_opts to = {0};
  to.is_server = r->rank == 0 && !s->agent_store;
  to.port = s->port;
  to.world_size = r->world_size;
  to.timeout_ms = dist__remaining_ms(s->deadline_ms);
  to.token = s->token;
  /* With a token the server may listen on every address (others prove the
   * token); without one only when the user opted out of the loopback rule. */
  to.allow_remote = s->token != NULL || s->allow_remote;
  to.host = to.is_server ? server_host(s, to.allow_remote) : s->host;
  if (to.timeout_ms <= 0)
    to.timeout_ms = 1;
  int rc = dist_store_tcp_create(&to, &r->store);
  if (rc != DIST_OK)
    return store_failed(s, r, rc, to.is_server);
  if (to.is_server && !s->token && !s->allow_remote)
    DIST_LOG(INFO, STORE,
             "rendezvous: no DIST_TOKEN, so rank 0's store listens on loopback only");
  return DIST_OK;
}

static int open_store(const dist_init_opts *o, const settings *s, dist__rdzv *r) {
  int rc;
  switch (s->method) {
  case M_STORE:
    r->store = o->store;
    r->store_owned = false;
    return DIST_OK;
  case M_FILE:
    rc = dist__store_file_create_job(s->path, r->world_size, &r->store);
    if (rc != DIST_OK) {
      char why[DIST_ERRMSG_LEN];
      snprintf(why, sizeof why, "%s", dist_last_errmsg());
      return dist__set_last_error(rc, "file:// store at '%s': %s", s->path, why);
    }
    break;
  default:
    DIST_TRY(open_tcp_store(s, r));
  }
  r->store_owned = true;
  return DIST_OK;
}

/* --- the protocol over the store ------------------------------------------ */

typedef struct joiner {
  const settings *s;
  dist__rdzv *r;
  char prefix[64]; /* dist/rdzv/<g> */
} joiner;

/* Gives the next store call the time that is left. */
static int arm(joiner *j) {
  int64_t left = dist__remaining_ms(j->s->deadline_ms);
  if (left <= 0)
    return dist__set_last_error(DIST_E_TIMEOUT,
                                "rendezvous of rank %d timed out after %" PRId64 " ms",
                                j->r->rank, j->s->timeout_ms);
  return dist_store_set_timeout(j->r->store, left);
}

/* Re-raises a failed store call with the step it belongs to. */
static int op_failed(joiner *j, int rc, const char *step) {
  char why[DIST_ERRMSG_LEN];
  snprintf(why, sizeof why, "%s", dist_store_errmsg(j->r->store));
  return dist__set_last_error(rc, "rendezvous of rank %d (%s): %s: %s", j->r->rank,
                              j->s->method_name, step, why);
}

static void key_of(const joiner *j, const char *name, char *out, size_t len) {
  snprintf(out, len, "%s/%s", j->prefix, name);
}

/* "rank 2 (host h pid 7)" of this process, for the world-size record. */
static void whoami(const joiner *j, char *out, size_t len) {
  snprintf(out, len, "rank %d (host %s pid %d)", j->r->rank, dist__hostname(), (int)getpid());
}

/* Every rank compares its world size with the first rank's; one that
 * disagrees fails at once and posts why, so the others stop waiting too
 * (world_error). */
static int check_world(joiner *j) {
  char mine[DIST_NET_HOSTLEN + 64], me[DIST_NET_HOSTLEN + 48];
  whoami(j, me, sizeof me);
  snprintf(mine, sizeof mine, "%d %s", j->r->world_size, me);
  void *got = NULL;
  size_t n = 0;
  DIST_TRY(arm(j));
  int rc = dist_store_compare_set(j->r->store, DIST_KEY_RDZV_WORLD, "", 0, mine, strlen(mine),
                                  &got, &n);
  if (rc != DIST_OK)
    return op_failed(j, rc, "comparing world sizes");
  char first[DIST_NET_HOSTLEN + 64];
  snprintf(first, sizeof first, "%.*s", (int)n, (const char *)got);
  dist_free(got);
  char *rest = NULL;
  long theirs = strtol(first, &rest, 10);
  if (theirs == j->r->world_size)
    return DIST_OK;
  char msg[1024];
  snprintf(msg, sizeof msg, "ranks disagree on the world size: %s says %ld, %s says %d "
           "(WORLD_SIZE, opts.world_size or ?world_size=); every rank must give the same",
           rest && *rest == ' ' ? rest + 1 : first, theirs, me, j->r->world_size);
  void *old = NULL;
  size_t old_len = 0;
  if (dist_store_compare_set(j->r->store, DIST_KEY_RDZV_WORLD_ERROR, "", 0, msg, strlen(msg),
                             &old, &old_len) == DIST_OK)
    dist_free(old);
  if (j->r->rank == 0) { /* the others read the error from the store it may host */
    int64_t until = dist__now_ms() + 5 * VERDICT_GRACE_MS, seen = 0;
    dist_store_set_timeout(j->r->store, VERDICT_GRACE_MS);
    while (dist__now_ms() < until &&
           dist_store_add(j->r->store, DIST_KEY_RDZV_WORLD_ERROR "_seen", 0, &seen) == DIST_OK &&
           seen < j->r->world_size - 1)
      dist__sleep_ms(10); /* a failure path: polling is fine */
  }
  return dist__set_last_error(DIST_E_INVAL, "%s", msg);
}

/* DIST_E_INVAL with the message when some rank posted a world-size error. */
static int world_error(joiner *j) {
  const char *keys[1] = {DIST_KEY_RDZV_WORLD_ERROR};
  bool present = false;
  dist_store_set_timeout(j->r->store, WAIT_SLICE_MS);
  if (dist_store_check(j->r->store, keys, 1, &present) != DIST_OK || !present)
    return DIST_OK;
  void *v = NULL;
  size_t n = 0;
  if (dist_store_get(j->r->store, DIST_KEY_RDZV_WORLD_ERROR, &v, &n) != DIST_OK)
    return DIST_OK;
  int rc = dist__set_last_error(DIST_E_INVAL, "%.*s", (int)n, (const char *)v);
  dist_free(v);
  int64_t seen; /* rank 0 may leave now */
  dist_store_add(j->r->store, DIST_KEY_RDZV_WORLD_ERROR "_seen", 1, &seen);
  return rc;
}

static int join_generation(joiner *j) {
  int64_t v = 0;
  DIST_TRY(arm(j));
  int rc = dist_store_add(j->r->store, DIST_KEY_RDZV_JOINED, 1, &v);
  if (rc != DIST_OK)
    return op_failed(j, rc, "joining");
  j->r->generation = (int)((v - 1) / j->r->world_size);
  snprintf(j->prefix, sizeof j->prefix, "%s/%d", DIST_KEY_RDZV_PREFIX, j->r->generation);
  return DIST_OK;
}

/* Claims this rank's slot; a second process with the same rank is named. */
static int claim_rank(joiner *j) {
  char key[96], me[DIST_NET_HOSTLEN + 32];
  snprintf(key, sizeof key, "%s/rank/%d", j->prefix, j->r->rank);
  snprintf(me, sizeof me, "%s pid %d", dist__hostname(), (int)getpid());
  void *got = NULL;
  size_t got_len = 0;
  DIST_TRY(arm(j));
  int rc = dist_store_compare_set(j->r->store, key, "", 0, me, strlen(me), &got, &got_len);
  if (rc != DIST_OK)
    return op_failed(j, rc, "claiming the rank");
  bool mine = got_len == strlen(me) && memcmp(got, me, got_len) == 0;
  int64_t claimed;
  if (mine) { /* counted, so a timeout report knows how many joined (who_joined) */
    char ckey[96];
    key_of(j, "claimed", ckey, sizeof ckey);
    DIST_TRY_GOTO(arm(j), rc, out);
    if ((rc = dist_store_add(j->r->store, ckey, 1, &claimed)) != DIST_OK) {
      rc = op_failed(j, rc, "claiming the rank");
      goto out;
    }
  }
  if (!mine)
    rc = dist__set_last_error(DIST_E_INVAL,
                              "rank %d is taken twice: by %.*s and by this process (%s); "
                              "check RANK on every process",
                              j->r->rank, (int)got_len, (const char *)got, me);
out:
  dist_free(got);
  return rc;
}

/* Reads a string rank 0 published, into out (len bytes with the NUL). */
static int read_shared(joiner *j, const char *name, char *out, size_t len) {
  char key[96];
  key_of(j, name, key, sizeof key);
  void *v = NULL;
  size_t n = 0;
  int rc;
  /* In slices: a world-size error posted meanwhile ends the wait. */
  for (;;) {
    DIST_TRY(arm(j));
    int64_t left = dist__remaining_ms(j->s->deadline_ms);
    dist_store_set_timeout(j->r->store, left < WAIT_SLICE_MS ? left : WAIT_SLICE_MS);
    rc = dist_store_get(j->r->store, key, &v, &n);
    if (rc != DIST_E_TIMEOUT || left <= WAIT_SLICE_MS)
      break;
    DIST_TRY(world_error(j));
  }
  if (rc == DIST_E_TIMEOUT)
    return dist__set_last_error(rc,
                                "rendezvous of rank %d timed out after %" PRId64
                                " ms waiting for rank 0 to publish the %s",
                                j->r->rank, j->s->timeout_ms, name);
  if (rc != DIST_OK)
    return op_failed(j, rc, name);
  if (n == 0 || n >= len)
    rc = dist__set_last_error(DIST_E_STORE, "rank 0 published a %s of %zu bytes", name, n);
  else
    memcpy(out, v, n + 1); /* get NUL-terminates */
  dist_free(v);
  return rc;
}

/* --- the job token --------------------------------------------------------------- */

static pthread_mutex_t token_mu = PTHREAD_MUTEX_INITIALIZER;
static char token_copy[DIST_TOKEN_MAX + 1];
static bool token_known;

int dist__env_token(const char **out) {
  *out = NULL;
  pthread_mutex_lock(&token_mu);
  const char *v = getenv(DIST_ENV_TOKEN);
  int rc = DIST_OK;
  if (v && strlen(v) > DIST_TOKEN_MAX) {
    rc = dist__set_last_error(DIST_E_INVAL, "DIST_TOKEN is longer than %d characters",
                              DIST_TOKEN_MAX);
  } else if (v && *v) {
    snprintf(token_copy, sizeof token_copy, "%s", v);
    token_known = true;
    /* Programs this process starts later (system(), workers) need no
     * token: take it out of the environment they would inherit. */
    explicit_bzero((char *)v, strlen(v));
    unsetenv(DIST_ENV_TOKEN);
  } else if (v) {
    unsetenv(DIST_ENV_TOKEN);
  }
  if (rc == DIST_OK && token_known)
    *out = token_copy;
  pthread_mutex_unlock(&token_mu);
  return rc;
}

bool dist__env_token_known(void) {
  pthread_mutex_lock(&token_mu);
  bool k = token_known;
  pthread_mutex_unlock(&token_mu);
  return k;
}

static int publish(joiner *j, const char *name, const char *val) {
  char key[96];
  key_of(j, name, key, sizeof key);
  DIST_TRY(arm(j));
  int rc = dist_store_set(j->r->store, key, val, strlen(val));
  return rc == DIST_OK ? DIST_OK : op_failed(j, rc, name);
}

/* Job id and token: from the environment, or made by rank 0 and shared. */
static int share_identity(joiner *j) {
  dist__rdzv *r = j->r;
  const char *env_job = dist__getenv(DIST_ENV_JOB_ID);
  if (r->rank == 0) {
    if (env_job)
      snprintf(r->job_id, sizeof r->job_id, "%s", env_job);
    else
      DIST_TRY(dist__rendezvous_make_job_id(r->job_id, sizeof r->job_id));
    DIST_TRY(publish(j, "job_id", r->job_id));
    if (j->s->token) {
      snprintf(r->token, sizeof r->token, "%s", j->s->token);
    } else {
      DIST_TRY(dist__auth_make_token(r->token, sizeof r->token));
      DIST_TRY(publish(j, "token", r->token));
    }
    return DIST_OK;
  }
  if (env_job)
    snprintf(r->job_id, sizeof r->job_id, "%s", env_job);
  else
    DIST_TRY(read_shared(j, "job_id", r->job_id, sizeof r->job_id));
  if (j->s->token)
    snprintf(r->token, sizeof r->token, "%s", j->s->token);
  else
    DIST_TRY(read_shared(j, "token", r->token, sizeof r->token));
  return DIST_OK;
}

/* Which ranks never claimed their slot: "1 of 3 ranks joined; missing:
 * 1-2" in out; *joined: how many did (-1: unknown). The count is the
 * claims counter (exact, one round trip); the names come from a scan of
 * the claims bounded to SCAN_MS, which stops early once the count says the
 * rest are all missing (or all present). A scan cut short says so and
 * never counts what it did not see (2,000,000 ranks over a network). */
static void who_joined(joiner *j, char *out, size_t len, int *joined) {
  int w = j->r->world_size;
  int *missing = dist__calloc((size_t)w, sizeof *missing);
  size_t n = 0;
  int64_t deadline = dist__now_ms() + SCAN_MS; /* the check itself is bounded */
  dist_store_set_timeout(j->r->store, SCAN_MS);
  char ckey[96];
  key_of(j, "claimed", ckey, sizeof ckey);
  int64_t k = -1;
  if (dist_store_add(j->r->store, ckey, 0, &k) != DIST_OK || k < 0 || k > w)
    k = -1;
  int rc = DIST_OK, i = 0, present = 0;
  for (; missing && rc == DIST_OK && i < w && dist__now_ms() < deadline; i++) {
    if (k >= 0 && (present >= k || (int64_t)n >= w - k))
      break; /* the count settles the rest */
    char key[96];
    snprintf(key, sizeof key, "%s/rank/%d", j->prefix, i);
    const char *keys[1] = {key};
    bool there = true;
    rc = dist_store_check(j->r->store, keys, 1, &there);
    if (rc == DIST_OK && !there)
      missing[n++] = i;
    present += rc == DIST_OK && there;
  }
  if (missing && rc == DIST_OK && k >= 0 && i < w && present >= k)
    for (; i < w; i++)
      missing[n++] = i; /* every claim is accounted for: the rest never came */
  else if (missing && rc == DIST_OK && k >= 0 && i < w && (int64_t)n >= w - k)
    i = w; /* every absence is accounted for: the rest came */
  char list[512] = "none found";
  if (rc != DIST_OK || !missing)
    snprintf(list, sizeof list, "unknown (%s)",
             missing ? dist_store_errmsg(j->r->store) : "out of memory");
  else if (n)
    dist__format_ranks(missing, n, list, sizeof list);
  dist__free(missing);
  *joined = rc == DIST_OK && missing && (k >= 0 || i == w) ? (k >= 0 ? (int)k : w - (int)n)
                                                           : -1;
  size_t off = 0;
  out[0] = '\0';
  if (k >= 0 || (rc == DIST_OK && i == w))
    dist__appendf(out, len, &off, "%d of %d ranks joined; missing: %s",
                  k >= 0 ? (int)k : w - (int)n, w, list);
  else
    dist__appendf(out, len, &off, "%d of the %d ranks checked of %d joined; missing: %s",
                  present, i, w, list);
  if (rc == DIST_OK && missing && i < w)
    dist__appendf(out, len, &off, "%s%" PRId64 " more among ranks %d-%d (not checked "
                  "within %d s)", n ? " and " : "; ", k >= 0 ? (w - k) - (int64_t)n : w - i,
                  i, w - 1, SCAN_MS / 1000);
}

/* After a timeout in the barrier: the message in out (who_joined). */
static void name_missing(joiner *j, char *out, size_t len, int *joined) {
  char who[700];
  who_joined(j, who, sizeof who, joined);
  snprintf(out, len, "rendezvous of rank %d timed out after %" PRId64 " ms: %s (%s)",
           j->r->rank, j->s->timeout_ms, who, j->s->method_name);
}

/* While waiting: who has joined and who is missing, at DEBUG the first
 * time and at WARNING every PROGRESS_MS, so a rank that never starts is
 * not 600 s of silence. */
static void progress(joiner *j, int64_t t0, int64_t *next_warn, bool first) {
  bool warn = dist__now_ms() >= *next_warn;
  if (!warn && !(first && dist__log_on(DIST_LOG_DEBUG, DIST_SUBSYS_STORE)))
    return;
  char who[700];
  int joined;
  who_joined(j, who, sizeof who, &joined);
  if (warn) {
    DIST_LOG(WARNING, STORE, "rendezvous: rank %d has waited %" PRId64 " s for the others: "
             "%s (%s; giving up in %" PRId64 " s)", j->r->rank, (dist__now_ms() - t0) / 1000,
             who, j->s->method_name, dist__remaining_ms(j->s->deadline_ms) / 1000);
    *next_warn += PROGRESS_MS;
  } else {
    DIST_LOG(DEBUG, STORE, "rendezvous: rank %d waits for the others: %s (%s)", j->r->rank,
             who, j->s->method_name);
  }
  dist_store_set_timeout(j->r->store, WAIT_SLICE_MS);
}

/* Sets the barrier's verdict unless one is there; *won: ours stands. The
 * verdict is "1" (everybody arrived) or rank 0's timeout message. */
static int verdict(joiner *j, const char *key, const char *mine, bool *won) {
  void *got = NULL;
  size_t n = 0;
  int rc = dist_store_compare_set(j->r->store, key, "", 0, mine, strlen(mine), &got, &n);
  if (rc != DIST_OK)
    return op_failed(j, rc, "settling the rendezvous");
  *won = n == strlen(mine) && memcmp(got, mine, n) == 0;
  dist_free(got);
  return DIST_OK;
}

/* The verdict of the barrier, waiting up to timeout_ms: DIST_OK for "1",
 * DIST_E_TIMEOUT with rank 0's message, or the store's error (a timeout of
 * the wait itself leaves *posted false). */
static int read_verdict(joiner *j, const char *key, int64_t timeout_ms, bool *posted) {
  void *v = NULL;
  size_t len = 0;
  dist_store_set_timeout(j->r->store, timeout_ms > 0 ? timeout_ms : 1);
  int rc = dist_store_get(j->r->store, key, &v, &len);
  *posted = rc == DIST_OK;
  if (rc == DIST_OK && (len != 1 || memcmp(v, "1", 1) != 0)) {
    char seen[96];
    int64_t n;
    key_of(j, "verdict_seen", seen, sizeof seen);
    dist_store_add(j->r->store, seen, 1, &n); /* rank 0 may go now (linger) */
    rc = dist__set_last_error(DIST_E_TIMEOUT, "rank 0 gave up: %s", (const char *)v);
  }
  dist_free(v);
  return rc;
}

/* Rank 0, after posting its timeout verdict: a store it hosts must outlive
 * the others' reading of it, or their reply dies with this process and
 * they fail with a closed connection instead of its message. Waits until
 * the `others` ranks that joined said they read it, at most
 * VERDICT_GRACE_MS (a failure path: polling is fine). */
static void linger(joiner *j, int others) {
  char seen[96];
  key_of(j, "verdict_seen", seen, sizeof seen);
  int64_t until = dist__now_ms() + VERDICT_GRACE_MS, n = 0;
  dist_store_set_timeout(j->r->store, VERDICT_GRACE_MS);
  while (others > 0 && dist__now_ms() < until &&
         dist_store_add(j->r->store, seen, 0, &n) == DIST_OK && n < others)
    dist__sleep_ms(2);
}

/* A timeout while waiting for the others. Rank 0 posts what it found as the
 * verdict, so every waiting rank fails with the same message at once (and
 * before a store rank 0 hosts goes away); if the last rank arrived in the
 * meantime, the rendezvous succeeds after all. The other ranks first give
 * rank 0's verdict a moment, as their deadlines end at about the same time. */
static int barrier_timed_out(joiner *j, const char *key) {
  if (j->r->rank != 0) {
    bool posted;
    int rc = read_verdict(j, key, VERDICT_GRACE_MS, &posted);
    if (posted)
      return rc;
  }
  char msg[1024];
  int joined;
  name_missing(j, msg, sizeof msg, &joined);
  bool won = true;
  if (j->r->rank == 0)
    DIST_TRY(verdict(j, key, msg, &won));
  if (j->r->rank == 0 && !won)
    return DIST_OK; /* the verdict is "1": everybody arrived just in time */
  if (j->r->rank == 0)
    linger(j, joined > 0 ? joined - 1 : 0);
  return dist__set_last_error(DIST_E_TIMEOUT, "%s", msg);
}

static int barrier(joiner *j) {
  char arrived[96], complete[96];
  key_of(j, "arrived", arrived, sizeof arrived);
  key_of(j, "complete", complete, sizeof complete);
  int64_t n = 0;
  DIST_TRY(arm(j));
  int rc = dist_store_add(j->r->store, arrived, 1, &n);
  if (rc != DIST_OK)
    return op_failed(j, rc, "arriving");
  bool won;
  if (n == j->r->world_size) {
    DIST_TRY(arm(j));
    DIST_TRY(verdict(j, complete, "1", &won));
  }
  /* In slices: between them, another rank's world-size error ends the
   * wait, and who is missing is said (progress). */
  bool posted = false;
  int64_t t0 = dist__now_ms(), next_warn = t0 + PROGRESS_MS;
  for (bool first = true;; first = false) {
    DIST_TRY(arm(j));
    int64_t left = dist__remaining_ms(j->s->deadline_ms);
    rc = read_verdict(j, complete, left < WAIT_SLICE_MS ? left : WAIT_SLICE_MS, &posted);
    if (posted || rc != DIST_E_TIMEOUT || left <= WAIT_SLICE_MS)
      break;
    DIST_TRY(world_error(j));
    progress(j, t0, &next_warn, first);
  }
  if (rc == DIST_E_TIMEOUT && !posted)
    return barrier_timed_out(j, complete);
  if (rc != DIST_OK && !posted)
    return op_failed(j, rc, "waiting for every rank");
  return rc;
}

static int run_protocol(const settings *s, dist__rdzv *r) {
  joiner j = {s, r, ""};
  DIST_TRY(check_world(&j));
  DIST_TRY(join_generation(&j));
  DIST_TRY(claim_rank(&j));
  DIST_TRY(share_identity(&j));
  return barrier(&j);
}

/* --- public (internal) API ------------------------------------------------ */

int dist__rendezvous_check(const dist_init_opts *opts, dist__rdzv *out) {
  if (!out)
    return dist__set_last_error(DIST_E_INVAL, "dist__rendezvous_check: out is NULL");
  memset(out, 0, sizeof *out);
  const dist_init_opts dflt = {.rank = -1, .world_size = -1};
  settings s = {0};
  return parse_settings(opts ? opts : &dflt, &s, out);
}

int dist__rendezvous(const dist_init_opts *opts, dist__rdzv *out) {
  if (!out)
    return dist__set_last_error(DIST_E_INVAL, "dist__rendezvous: out is NULL");
  memset(out, 0, sizeof *out);
  /* pg.c's defaults, spelled out so the rendezvous stands alone in tests. */
  const dist_init_opts dflt = {.rank = -1, .world_size = -1};
  const dist_init_opts *o = opts ? opts : &dflt;
  settings s = {0};
  DIST_TRY(parse_settings(o, &s, out));
  DIST_TRY(open_store(o, &s, out));
  int64_t saved = dist_store_get_timeout(out->store);
  int rc = run_protocol(&s, out);
  if (rc != DIST_OK) {
    DIST_LOG(ERROR, STORE, "%s", dist_last_errmsg());
    if (!out->store_owned)
      dist_store_set_timeout(out->store, saved);
    dist__rendezvous_release(out);
    return rc;
  }
  dist_store_set_timeout(out->store, out->store_owned ? s.timeout_ms : saved);
  DIST_LOG(INFO, STORE, "rendezvous: rank %d of %d (local %d of %d) via %s, job %s, gen %d",
           out->rank, out->world_size, out->local_rank, out->local_world_size,
           s.agent_store ? "the launcher's store" : s.method_name, out->job_id,
           out->generation);
  return DIST_OK;
}

void dist__rendezvous_release(dist__rdzv *r) {
  if (!r)
    return;
  if (r->store_owned)
    dist_store_destroy(r->store);
  /* The token is a secret: do not leave it in freed or reused memory. */
  explicit_bzero(r->token, sizeof r->token);
  r->store = NULL;
  r->store_owned = false;
}

int dist__rendezvous_make_job_id(char *out, size_t len) {
  uint8_t rnd[4];
  DIST_TRY(dist__auth_random(rnd, sizeof rnd));
  time_t now = time(NULL);
  struct tm tm;
  gmtime_r(&now, &tm);
  char stamp[32];
  strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &tm);
  int n = snprintf(out, len, "%s-%02x%02x%02x%02x", stamp, rnd[0], rnd[1], rnd[2], rnd[3]);
  if (n < 0 || (size_t)n >= len)
    return dist__set_last_error(DIST_E_INVAL, "job id buffer of %zu bytes is too small", len);
  return DIST_OK;
}

bool dist__rendezvous_job_id_ok(const char *s) {
  size_t n = strlen(s);
  if (n == 0 || n > DIST_JOB_ID_MAX)
    return false;
  for (size_t i = 0; i < n; i++)
    if (!isalnum((unsigned char)s[i]) && s[i] != '.' && s[i] != '_' && s[i] != '-')
      return false;
  return true;
}
