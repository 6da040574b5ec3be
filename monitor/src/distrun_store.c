/* distrun_store.c - the job's store as distrun sees it: node 0's distrun
 * hosts it (so it outlives every rank), other nodes' distrun join it; the
 * job id and the token are settled here; deaths are posted here for the
 * ranks and for the other nodes.
 *
 * DESIGN (several nodes). Each node has an event queue in the store,
 * distrun/node/<K>/events (dist/internal/launch.h). A watcher thread per distrun pops
 * its own queue (blocking, with a bounded timeout, in a loop) and hands each
 * event to the event loop as a line on a pipe, so the loop keeps one poll()
 * and never waits on the network itself. A node whose rank dies pushes
 * "died <message>" to every other node; a node that is stopped by a signal
 * pushes "stop <reason>"; a node whose ranks have all ended pushes
 * "done <node> <status>" to node 0, which keeps the store up until every
 * node has said so. "quit" on its own queue stops a watcher. */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <dist/internal/launch.h> /* dist__auth_make_token */
#include "distrun.h"

#define POST_TIMEOUT_MS 10000  /* distrun's own store calls after setup */
#define WATCH_POP_MS 10000     /* one blocking pop of the watcher */

static _Atomic bool watch_stop;

void dist__run_say(const char *fmt, ...) {
  char line[2048];
  int n = snprintf(line, sizeof line, "distrun: ");
  va_list ap;
  va_start(ap, fmt);
  int m = vsnprintf(line + n, sizeof line - (size_t)n - 1, fmt, ap);
  va_end(ap);
  size_t len = (size_t)n + (m > 0 ? (size_t)m : 0);
  if (len > sizeof line - 2)
    len = sizeof line - 2;
  line[len++] = '\n';
  ssize_t w = write(STDERR_FILENO, line, len);
  (void)w;
}

static int launch_fail(const char *what, const char *why) {
  dist__run_say("%s: %s", what, why);
  return DRUN_EXIT_LAUNCH;
}

/* The token the store and the ranks use (see dist/internal/launch.h). */
static int choose_token(const drun_cfg *c, drun_job *job) {
  const char *env = dist__getenv(DIST_ENV_TOKEN);
  const char *allow = dist__getenv(DIST_ENV_ALLOW_NO_TOKEN);
  if (env) {
    if (strlen(env) > DIST_TOKEN_MAX) {
      dist__run_say("DIST_TOKEN is longer than %d characters", DIST_TOKEN_MAX);
      return DRUN_EXIT_USAGE;
    }
    snprintf(job->token, sizeof job->token, "%s", env);
    return 0;
  }
  if (c->nnodes == 1)
    return dist__auth_make_token(job->token, sizeof job->token) == DIST_OK
               ? 0
               : launch_fail("cannot make the job token", dist_last_errmsg());
  if (allow && strcmp(allow, "0") != 0)
    return 0; /* no token: the ranks' rendezvous makes the data-plane one */
  dist__run_say("a job of %d nodes needs the same DIST_TOKEN exported on every node "
                "(for example: export DIST_TOKEN=$(openssl rand -hex 32)), or "
                "DIST_ALLOW_NO_TOKEN=1 to run the store without one",
                c->nnodes);
  return DRUN_EXIT_USAGE;
}

/* Claims this node's index in the job, so two distruns with one
 * --node-rank are told so. */
static int claim_node(const drun_cfg *c, drun_job *job) {
  char key[64], me[DRUN_HOSTLEN + 32];
  snprintf(key, sizeof key, DIST_KEY_NODE_CLAIM_FMT, c->node_rank);
  snprintf(me, sizeof me, "%s pid %d", dist__hostname(), (int)getpid());
  void *got = NULL;
  size_t n = 0;
  if (dist_store_compare_set(job->store, key, "", 0, me, strlen(me), &got, &n) != DIST_OK)
    return launch_fail("cannot register with the job's store",
                       dist_store_errmsg(job->store));
  int rc = 0;
  if (n != strlen(me) || memcmp(got, me, n) != 0) {
    dist__run_say("--node-rank %d is already taken by %.*s", c->node_rank, (int)n,
                  (const char *)got);
    rc = DRUN_EXIT_LAUNCH;
  }
  dist_free(got);
  return rc;
}

static int host_store(drun_cfg *c, drun_job *job) {
  dist_store_tcp_opts o = {0};
  bool one = c->nnodes == 1;
  o.is_server = true;
  o.host = one ? "127.0.0.1" : NULL;
  o.allow_remote = !one;
  o.port = c->master_port;
  o.timeout_ms = c->join_timeout_ms;
  o.token = job->token[0] ? job->token : NULL;
  if (dist_store_tcp_create(&o, &job->store) != DIST_OK) {
    char what[96];
    snprintf(what, sizeof what, "cannot start the job's store on port %u",
             (unsigned)c->master_port);
    return launch_fail(what, dist_last_errmsg());
  }
  job->store_port = dist_store_tcp_port(job->store);
  job->hosted = true;
  /* --local-addr: the address the other nodes' ranks reach this node by */
  snprintf(job->store_addr, sizeof job->store_addr, "%s",
           one ? "127.0.0.1" : c->local_addr ? c->local_addr : c->master_addr);
  if (c->job_id[0])
    snprintf(job->job_id, sizeof job->job_id, "%s", c->job_id);
  else if (dist__rendezvous_make_job_id(job->job_id, sizeof job->job_id) != DIST_OK)
    return launch_fail("cannot make a job id", dist_last_errmsg());
  if (one)
    return 0;
  char nproc[16], attempt[16];
  snprintf(nproc, sizeof nproc, "%d", c->nproc);
  snprintf(attempt, sizeof attempt, "%d", job->attempt);
  /* One write: a joiner that reads the job id reads the round with it. */
  const char *keys[] = {DIST_KEY_JOB_ID, DIST_KEY_NPROC, DRUN_KEY_RUN, DRUN_KEY_ATTEMPT};
  const void *vals[] = {job->job_id, nproc, job->run_id, attempt};
  size_t lens[] = {strlen(job->job_id), strlen(nproc), strlen(job->run_id), strlen(attempt)};
  if (dist_store_multi_set(job->store, keys, vals, lens, dist__run_rounds(c) ? 4 : 2) != DIST_OK)
    return launch_fail("cannot publish the job id", dist_store_errmsg(job->store));
  int rc = claim_node(c, job);
  return rc ? rc : dist__run_round_host(c, job);
}

/* c10d without --node-rank: this node's index in arrival order (the host
 * is 0, so the first to join is 1). */
static int arrival_rank(drun_cfg *c, drun_job *job) {
  int64_t v = 0;
  if (dist_store_add(job->store, DIST_KEY_NODE_NEXT, 1, &v) != DIST_OK)
    return launch_fail("cannot take a node rank in the job's store",
                       dist_store_errmsg(job->store));
  if (v >= c->nnodes) {
    dist__run_say("the job at %s:%u has its %d nodes (--nnodes) already; this node arrived "
                  "as number %lld", c->master_addr, (unsigned)c->master_port, c->nnodes,
                  (long long)v + 1);
    return DRUN_EXIT_LAUNCH;
  }
  c->node_rank = (int)v;
  DIST_LOG(INFO, RUN, "c10d rendezvous: node rank %d (in the order nodes joined)", c->node_rank);
  return 0;
}

#define JOIN_RETRY_MS 50    /* between tries while node 0 changes rounds */
#define JOIN_REFUSALS 5     /* handshakes cut in a row before a refusal is believed */
#define JOIN_AGAIN (-2)     /* join_once: try again (a round change under way) */

/* The job's keys node 0 published (with rounds, its run id and attempt):
 * the job id into job, the attempt into *attempt. */
static int read_job_keys(const drun_cfg *c, drun_job *job, const char *what, int *attempt) {
  const char *keys[] = {DIST_KEY_JOB_ID, DIST_KEY_NPROC, DRUN_KEY_RUN, DRUN_KEY_ATTEMPT};
  void *vals[4] = {NULL, NULL, NULL, NULL};
  size_t lens[4] = {0, 0, 0, 0}, n = dist__run_rounds(c) ? 4 : 2;
  if (dist_store_multi_get(job->store, keys, n, vals, lens) != DIST_OK)
    return JOIN_AGAIN; /* the store closed under us: a round's end */
  int rc = 0;
  *attempt = n == 4 ? atoi(vals[3]) : job->attempt;
  if (lens[0] == 0 || lens[0] > DIST_JOB_ID_MAX) {
    rc = launch_fail(what, "node 0 published no usable job id");
  } else if (atoi(vals[1]) != c->nproc) {
    dist__run_say("this node starts %d ranks but node 0 starts %s; every node needs the "
                  "same --nproc-per-node",
                  c->nproc, (const char *)vals[1]);
    rc = DRUN_EXIT_LAUNCH;
  } else {
    snprintf(job->job_id, sizeof job->job_id, "%s", (const char *)vals[0]);
    if (n == 4)
      snprintf(job->run_id, sizeof job->run_id, "%.*s", (int)lens[2], (const char *)vals[2]);
  }
  for (size_t i = 0; i < n; i++)
    dist_free(vals[i]);
  return rc;
}

/* One try at joining node 0's store: 0, an exit status, or JOIN_AGAIN when
 * the connection was cut or the store is a round older than job->attempt
 * (node 0 keeps a round's store until every node has read how it ended, so
 * a node fast to come back may find it still there). */
static int join_once(drun_cfg *c, drun_job *job, int64_t deadline, int *cut) {
  dist_store_tcp_opts o = {0};
  o.host = c->master_addr;
  o.port = c->master_port;
  o.timeout_ms = deadline - dist__now_ms() > 1 ? deadline - dist__now_ms() : 1;
  o.token = job->token[0] ? job->token : NULL;
  char what[DRUN_HOSTLEN + 64];
  snprintf(what, sizeof what, "cannot reach node 0's store at %s:%u", c->master_addr,
           (unsigned)c->master_port);
  if (dist_store_tcp_create(&o, &job->store) != DIST_OK) {
    /* A store that closes mid-handshake reads as a refusal: believed
     * only when it repeats (or without rounds, where no store closes). */
    if (dist__run_rounds(c) && ++*cut < JOIN_REFUSALS && dist__now_ms() < deadline)
      return JOIN_AGAIN;
    return launch_fail(what, dist_last_errmsg());
  }
  *cut = 0;
  int attempt;
  int rc = read_job_keys(c, job, what, &attempt);
  if (rc == 0 && attempt < job->attempt) {
    DIST_LOG(INFO, RUN, "node 0's store still holds attempt %d; waiting for attempt %d",
             attempt, job->attempt);
    rc = JOIN_AGAIN;
  } else if (rc == 0) {
    job->attempt = attempt; /* a later one when this node arrives late */
  }
  return rc;
}

/* Node K > 0: joins node 0's store (the round of job->attempt or a later
 * one) and takes its job id, then its place in the round. */
static int join_store(drun_cfg *c, drun_job *job) {
  int64_t deadline = dist__now_ms() + c->join_timeout_ms;
  int cut = 0, rc;
  while ((rc = join_once(c, job, deadline, &cut)) == JOIN_AGAIN) {
    dist_store_destroy(job->store);
    job->store = NULL;
    if (dist__now_ms() >= deadline) {
      dist__run_say("node 0's store at %s:%u did not open attempt %d within %.1f s "
                    "(--join-timeout)", c->master_addr, (unsigned)c->master_port,
                    job->attempt, (double)c->join_timeout_ms / 1000);
      return DRUN_EXIT_LAUNCH;
    }
    dist__sleep_ms(JOIN_RETRY_MS);
  }
  snprintf(job->store_addr, sizeof job->store_addr, "%s", c->master_addr);
  job->store_port = c->master_port;
  if (rc == 0 && c->nnodes_min < c->nnodes_max)
    rc = dist__run_round_join(c, job); /* elastic: a ticket, admitted or not */
  else if (rc == 0 && c->node_rank_auto)
    rc = arrival_rank(c, job);
  return rc ? rc : claim_node(c, job);
}

/* Whether host names an address of this machine: a socket binds to it. */
static bool address_is_local(const char *host) {
  struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_ADDRCONFIG}, *res = NULL;
  if (getaddrinfo(host, NULL, &hints, &res) != 0)
    return false;
  bool local = false;
  for (struct addrinfo *a = res; a && !local; a = a->ai_next) {
    int fd = socket(a->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
      continue;
    local = bind(fd, a->ai_addr, a->ai_addrlen) == 0; /* port 0 in the result */
    close(fd);
  }
  freeaddrinfo(res);
  return local;
}

/* Whether something listens on port already (another distrun hosts). */
static bool port_taken(uint16_t port) {
  int fd = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return false;
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  struct sockaddr_in6 sa = {.sin6_family = AF_INET6, .sin6_port = htons(port),
                            .sin6_addr = IN6ADDR_ANY_INIT};
  bool taken = bind(fd, (struct sockaddr *)&sa, sizeof sa) != 0 && errno == EADDRINUSE;
  close(fd);
  return taken;
}

/* c10d without --node-rank: host when the endpoint is this machine and its
 * port is free (as torchrun's c10d backend: the first agent on the
 * endpoint's machine hosts), else join. */
static int place_node(drun_cfg *c, drun_job *job) {
  if (!c->never_host && address_is_local(c->master_addr) && !port_taken(c->master_port)) {
    c->node_rank = 0;
    int rc = host_store(c, job);
    if (rc == 0 || job->store || !port_taken(c->master_port))
      return rc; /* hosting, or a failure after the store started */
    DIST_LOG(INFO, RUN, "c10d rendezvous: port %u was taken first; joining it",
             (unsigned)c->master_port);
  }
  return join_store(c, job);
}

int dist__run_store_setup(drun_cfg *c, drun_job *job) {
  char run[sizeof job->run_id];
  int attempt = job->attempt; /* the caller's: which attempt of which job */
  memcpy(run, job->run_id, sizeof run);
  memset(job, 0, sizeof *job);
  job->notify_rd = job->notify_wr = -1;
  memcpy(job->run_id, run, sizeof run);
  job->attempt = attempt;
  int rc = choose_token(c, job);
  if (rc)
    return rc;
  rc = c->node_rank_auto ? place_node(c, job)
       : c->node_rank == 0 ? host_store(c, job) : join_store(c, job);
  if (rc == 0)
    dist_store_set_timeout(job->store, POST_TIMEOUT_MS);
  return rc;
}

/* --- posting ------------------------------------------------------------- */

static void post_failed(drun_job *job, const char *what) {
  dist__run_say("could not post %s to the job's store: %s", what,
                dist_store_errmsg(job->store));
}

static void push_event(drun_job *job, int node, const char *ev) {
  char key[64];
  snprintf(key, sizeof key, DIST_KEY_NODE_EVENTS_FMT, node);
  if (dist_store_queue_push(job->store, key, ev, strlen(ev)) != DIST_OK)
    post_failed(job, "an event for another node");
}

int dist__run_store_post_death(const drun_cfg *c, drun_job *job, int rank, const char *cause) {
  if (!job->store)
    return DIST_OK;
  char msg[600], ev[640];
  snprintf(msg, sizeof msg, "rank %d died: %s", rank, cause);
  void *got = NULL;
  size_t n = 0;
  int rc = dist_store_compare_set(job->store, DIST_KEY_RANK_DIED, "", 0, msg, strlen(msg), &got,
                                  &n);
  if (rc != DIST_OK)
    post_failed(job, "the death of a rank");
  dist_free(got);
  snprintf(ev, sizeof ev, "%s\n", msg);
  if (dist_store_append(job->store, DIST_KEY_DEATHS, ev, strlen(ev)) != DIST_OK)
    post_failed(job, "the death of a rank");
  snprintf(ev, sizeof ev, "died %s", msg);
  for (int k = 0; k < c->nnodes; k++)
    if (k != c->node_rank)
      push_event(job, k, ev);
  return rc;
}

void dist__run_store_post_stop(const drun_cfg *c, drun_job *job, const char *reason) {
  char ev[256];
  snprintf(ev, sizeof ev, "stop node %d: %s", c->node_rank, reason);
  for (int k = 0; job->store && k < c->nnodes; k++)
    if (k != c->node_rank)
      push_event(job, k, ev);
}

void dist__run_store_post_exit(drun_job *job, int rank, const char *how) {
  char key[64];
  snprintf(key, sizeof key, DIST_KEY_EXIT_FMT, rank);
  if (job->store && dist_store_set(job->store, key, how, strlen(how)) != DIST_OK)
    post_failed(job, "how a rank ended");
}

void dist__run_store_post_beat(const drun_cfg *c, drun_job *job) {
  char ev[32];
  snprintf(ev, sizeof ev, "beat %d", c->node_rank);
  if (job->store && c->node_rank != 0)
    push_event(job, 0, ev);
}

void dist__run_store_post_left(const drun_cfg *c, drun_job *job, int node, const char *why) {
  char ev[640];
  snprintf(ev, sizeof ev, "left %d %s", node, why);
  for (int k = 1; job->store && k < c->nnodes; k++)
    if (k != node && !(k < 64 && (job->lost_nodes >> k & 1)))
      push_event(job, k, ev);
}

void dist__run_store_post_done(const drun_cfg *c, drun_job *job, int status) {
  char ev[64];
  snprintf(ev, sizeof ev, "done %d %d", c->node_rank, status);
  if (job->store && c->node_rank != 0)
    push_event(job, 0, ev);
}

/* --- the watcher thread (several nodes) ----------------------------------- */

typedef struct watch_arg {
  drun_job *job;
  char key[64];
} watch_arg;

static watch_arg the_watch;

static void notify(int fd, const char *ev, size_t n) {
  char line[1024];
  if (n > sizeof line - 1)
    n = sizeof line - 1;
  memcpy(line, ev, n);
  line[n] = '\n'; /* one write of at most PIPE_BUF bytes: never split */
  ssize_t w = write(fd, line, n + 1);
  (void)w;
}

static void *watch_main(void *arg) {
  watch_arg *w = arg;
  while (!atomic_load(&watch_stop)) {
    void *v = NULL;
    size_t n = 0;
    int rc = dist_store_queue_pop(w->job->watch_store, w->key, true, &v, &n);
    if (rc == DIST_E_TIMEOUT)
      continue;
    if (rc != DIST_OK) {
      char ev[600];
      int len = snprintf(ev, sizeof ev, "lost %s", dist_store_errmsg(w->job->watch_store));
      notify(w->job->notify_wr, ev, (size_t)len < sizeof ev ? (size_t)len : sizeof ev - 1);
      break;
    }
    bool quit = n == 4 && memcmp(v, "quit", 4) == 0;
    if (!quit)
      notify(w->job->notify_wr, v, n);
    dist_free(v);
    if (quit)
      break;
  }
  return NULL;
}

int dist__run_watch_start(const drun_cfg *c, drun_job *job) {
  if (c->nnodes == 1)
    return 0;
  int p[2];
  if (pipe2(p, O_CLOEXEC) != 0)
    return launch_fail("cannot make the watcher's pipe", strerror(errno));
  fcntl(p[0], F_SETFL, O_NONBLOCK);
  job->notify_rd = p[0];
  job->notify_wr = p[1];
  atomic_store(&watch_stop, false); /* a later attempt's watcher (--max-restarts) */
  if (dist_store_clone(job->store, &job->watch_store) != DIST_OK)
    return launch_fail("cannot open a second store connection", dist_store_errmsg(job->store));
  dist_store_set_timeout(job->watch_store, WATCH_POP_MS);
  the_watch.job = job;
  snprintf(the_watch.key, sizeof the_watch.key, DIST_KEY_NODE_EVENTS_FMT, c->node_rank);
  int prc = pthread_create(&job->watcher, NULL, watch_main, &the_watch);
  if (prc != 0) /* pthread functions return the error; errno is not set */
    return launch_fail("cannot start the watcher thread", strerror(prc));
  job->watching = true;
  return 0;
}

void dist__run_store_close(const drun_cfg *c, drun_job *job) {
  if (job->watching) {
    atomic_store(&watch_stop, true);
    push_event(job, c->node_rank, "quit");
    pthread_join(job->watcher, NULL);
    job->watching = false;
  }
  dist_store_destroy(job->watch_store);
  job->watch_store = NULL;
  if (job->notify_rd >= 0)
    close(job->notify_rd);
  if (job->notify_wr >= 0)
    close(job->notify_wr);
  job->notify_rd = job->notify_wr = -1;
  dist_store_destroy(job->store);
  job->store = NULL;
  explicit_bzero(job->token, sizeof job->token);
}
