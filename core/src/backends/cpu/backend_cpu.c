/* backend_cpu.c - the "cpu" backend ("gloo" is its alias): the glue between
 * core's vtable and the two engines of cpu.h.
 *
 * DESIGN. Init publishes each member's identity (pid, host, host id = boot
 * id + network namespace) in the group store, builds the TCP mesh, and when
 * every member shares this host (and DIST_TRANSPORT allows) the shared
 * segment. Collectives run in issue order: a synchronous one runs on the
 * caller's thread when nothing is queued (the fast path: no allocation, no
 * lock, no thread hand-off); asynchronous ones queue for the progress
 * thread "dist-prog-<rank>", started on first use. Point-to-point requests
 * go straight to the TCP engine and progress independently of the queue;
 * the progress thread drives them while they are pending and completes
 * their work handles. Abort marks the group, wakes every waiter in both
 * engines and the progress thread, and fails what is queued. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend_cpu.h"
#include "pg/pg_int.h"
#include "cpu.h"
#include "hier.h"
#include "shm.h"
#include "tcp.h"

typedef struct p2p_work {
  dist_work *w;
  dist__tcp_req **reqs;
  int n;
  struct p2p_work *next;
  int64_t deadline_ms;      /* the group's timeout from the post */
} p2p_work;

typedef struct cpu_backend {
  dist__cpu_group g;
  dist_pg *self;
  dist__tcp *tcp;  /* NULL: a collectives-only group over shared memory */
  dist__shm *shm; /* NULL: collectives over TCP */
  bool colls_only; /* no point-to-point will run (dist_backend_init_args) */
  dist__hier *hier; /* a group over several hosts: shm inside, TCP between */

  pthread_mutex_t mu;
  pthread_cond_t cv;       /* queue changes, abort, stop */
  dist_work **q;           /* ring of queued collectives */
  size_t q_head, q_len, q_cap;
  _Atomic int undone;      /* queued + running collectives (g.colls_queued) not yet
                              completed: what a destroy fails */
  p2p_work *p2p;           /* pending async point-to-point works */
  bool thread_started;
  bool stop;
  pthread_t thread;
} cpu_backend;

/* --- identity ------------------------------------------------------------ */

/* Same host = same boot id and same network namespace (DESIGN.md), so ranks
 * in different namespaces talk over the network even on one machine.
 * DIST_HOST_ID (a testing aid) replaces both: ranks that name different
 * ids are on different hosts, so one machine can exercise the paths of
 * groups that span hosts (shared memory still works between ranks that
 * name the same id, as they really share the machine). */
static void host_id(char *out, size_t len) {
  const char *fake = dist__getenv("DIST_HOST_ID");
  if (fake && *fake) {
    snprintf(out, len, "test:%.80s", fake);
    return;
  }
  char boot[64] = "unknown";
  FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
  if (f) {
    if (!fgets(boot, sizeof boot, f))
      snprintf(boot, sizeof boot, "unknown");
    fclose(f);
  }
  boot[strcspn(boot, "\n")] = '\0';
  struct stat st;
  unsigned long long ns = stat("/proc/self/ns/net", &st) == 0 ? (unsigned long long)st.st_ino : 0;
  snprintf(out, len, "%s/%llu", boot, ns);
}

static int parse_transport(dist__cpu_transport *t, dist__errbuf *err) {
  const char *v = dist__getenv("DIST_TRANSPORT");
  *t = DIST_CPU_TRANSPORT_AUTO;
  if (!v || !strcasecmp(v, "auto"))
    return DIST_OK;
  if (!strcasecmp(v, "tcp"))
    *t = DIST_CPU_TRANSPORT_TCP;
  else if (!strcasecmp(v, "shm"))
    *t = DIST_CPU_TRANSPORT_SHM;
  else
    return dist__err_set(err, DIST_E_INVAL,
                         "DIST_TRANSPORT='%s' is not one of auto, tcp, shm", v);
  return DIST_OK;
}

static int publish_self(dist__cpu_group *g, dist_store *st, dist__errbuf *err) {
  dist__cpu_peer *me = &g->peers[g->rank];
  me->global_rank = g->global_rank;
  me->pid = getpid();
  snprintf(me->host, sizeof me->host, "%s", dist__hostname());
  host_id(me->host_id, sizeof me->host_id);
  char key[64], val[256];
  snprintf(key, sizeof key, "cpu/peer/%d", g->rank);
  int n = snprintf(val, sizeof val, "%d %d %s %s", me->global_rank, (int)me->pid, me->host_id,
                   me->host);
  int rc = dist_store_set(st, key, val, (size_t)n);
  if (rc != DIST_OK)
    return dist__err_set(err, dist__store_status(rc), "group %s: cannot publish rank %d: %s",
                         g->name, g->rank, dist_store_errmsg(st));
  return DIST_OK;
}

/* Rank r's identity from the value it published (NUL-terminated by the
 * store's get). */
static int parse_peer(dist__cpu_group *g, int r, const char *v, dist__errbuf *err) {
  dist__cpu_peer *p = &g->peers[r];
  int pid = 0, off = 0;
  int ok = v && sscanf(v, "%d %d %95s %n", &p->global_rank, &pid, p->host_id, &off) >= 3;
  if (ok)
    snprintf(p->host, sizeof p->host, "%s", v + off);
  p->pid = pid;
  if (!ok || p->global_rank != g->global_ranks[r])
    return dist__err_set(err, DIST_E_INTERNAL, "group %s: malformed identity of rank %d",
                         g->name, r);
  return DIST_OK;
}

/* Every other member's identity, in one store round trip. */
static int read_peers(dist__cpu_group *g, dist_store *st, dist__errbuf *err) {
  size_t n = (size_t)g->size;
  char (*keys)[32] = dist__calloc(n, sizeof *keys);
  const char **kp = dist__calloc(n, sizeof *kp);
  void **vals = dist__calloc(n, sizeof *vals);
  size_t *lens = dist__calloc(n, sizeof *lens);
  int *who = dist__calloc(n, sizeof *who), m = 0, missing = -1;
  int rc = keys && kp && vals && lens && who ? DIST_OK
                                             : dist__err_set(err, DIST_E_NOMEM, "out of memory");
  for (int r = 0; rc == DIST_OK && r < g->size; r++)
    if (r != g->rank) {
      snprintf(keys[m], sizeof keys[m], "cpu/peer/%d", r);
      kp[m] = keys[m];
      who[m++] = r;
    }
  if (rc == DIST_OK &&
      dist__cpu_store_get_all(st, kp, (size_t)m, g->timeout_ms, vals, lens, &missing) != DIST_OK) {
    int r = who[missing >= 0 ? missing : 0]; /* unknown (the store is gone): the first */
    const char *why = dist_store_errmsg(st);
    rc = dist__err_set(err, DIST_E_TIMEOUT, "group %s: rank %d (global %d) did not join within "
                       "%lld ms%s%s (a rank that created its groups in another order, or this "
                       "one with other members, waits in another group: DIST_DEBUG=DETAIL "
                       "compares them at creation)", g->name, r, g->global_ranks[r],
                       (long long)g->timeout_ms, why && *why ? ": " : "", why ? why : "");
  }
  for (int i = 0; i < m && vals; i++) {
    if (rc == DIST_OK)
      rc = parse_peer(g, who[i], vals[i], err);
    dist_free(vals[i]);
  }
  dist__free(keys), dist__free(kp), dist__free(vals), dist__free(lens), dist__free(who);
  return rc;
}

static int exchange_peers(dist__cpu_group *g, dist_store *st, dist__errbuf *err) {
  g->peers = dist__calloc((size_t)g->size, sizeof *g->peers);
  if (!g->peers)
    return dist__err_set(err, DIST_E_NOMEM, "out of memory");
  DIST_TRY(publish_self(g, st, err));
  DIST_TRY(read_peers(g, st, err));
  g->same_host = true;
  for (int r = 0; r < g->size; r++)
    g->same_host &= !strcmp(g->peers[r].host_id, g->peers[g->rank].host_id);
  return DIST_OK;
}

/* --- init / fini --------------------------------------------------------- */

static int fill_group(cpu_backend *b, const dist_backend_init_args *a, dist__errbuf *err) {
  dist__cpu_group *g = &b->g;
  g->rank = a->rank;
  g->size = a->size;
  g->global_rank = a->global_rank;
  g->group_id = a->group_id;
  g->timeout_ms = a->timeout_ms;
  snprintf(g->name, sizeof g->name, "%s", a->group_name ? a->group_name : "?");
  const char *job = dist_get_job_id();
  snprintf(g->job_id, sizeof g->job_id, "%s", job ? job : "");
  snprintf(g->token, sizeof g->token, "%s", a->job_token ? a->job_token : "");
  g->global_ranks = dist__malloc(sizeof(int) * (size_t)a->size);
  if (!g->global_ranks)
    return dist__err_set(err, DIST_E_NOMEM, "out of memory");
  memcpy(g->global_ranks, a->global_ranks, sizeof(int) * (size_t)a->size);
  return parse_transport(&g->transport, err);
}

/* Nobody leaves init before every member has finished it (torch ends
 * init_process_group with a store-based barrier): a rank that races ahead
 * and exits would otherwise look like a lost peer to one still connecting. */
static int init_barrier(dist__cpu_group *g, dist_store *st, int64_t deadline,
                        dist__errbuf *err) {
  int64_t n = 0;
  int rc = dist_store_add(st, "cpu/ready", 1, &n);
  if (rc == DIST_OK && n == g->size)
    rc = dist_store_set(st, "cpu/all_ready", "1", 1);
  if (rc != DIST_OK)
    return dist__err_set(err, dist__store_status(rc), "group %s: %s", g->name,
                         dist_store_errmsg(st));
  const char *keys[1] = {"cpu/all_ready"};
  rc = dist_store_wait(st, keys, 1, dist__remaining_ms(deadline) + 1);
  if (rc != DIST_OK)
    return dist__err_set(err, rc == DIST_E_TIMEOUT ? DIST_E_TIMEOUT : dist__store_status(rc),
                         "group %s: not every member finished joining within %lld ms: %s",
                         g->name, (long long)g->timeout_ms, dist_store_errmsg(st));
  return DIST_OK;
}

/* DIST_HIER=0 keeps groups that span hosts flat over TCP (the way before
 * hierarchical collectives; for comparisons). */
static bool hier_wanted(void) {
  int64_t v;
  dist__env_int("DIST_HIER", 0, 1, 1, &v);
  return v != 0;
}

static void log_connections(const cpu_backend *b) {
  const dist__cpu_group *g = &b->g;
  int mesh = dist__tcp_conns(b->tcp), leaders = b->hier ? dist__hier_tcp_conns(b->hier) : 0;
  DIST_LOG(INFO, PG, "group %s: rank %d of %d, collectives over %s; %d tcp connections "
           "(%d point-to-point, %d between host leaders)", g->name, g->rank, g->size,
           b->shm ? "shared memory" : b->hier ? "both engines, hierarchically" : "tcp",
           mesh + leaders, mesh, leaders);
}

/* The engines: shared memory for a group on one host (unless told TCP),
 * the TCP mesh for point-to-point (and collectives without shared memory),
 * and the two in hierarchy for a group over several hosts. A group that
 * runs collectives only over shared memory (a checking layer's helper)
 * makes no TCP mesh: n-1 connections per rank for nothing, which at 256
 * ranks on one host is 32,640 handshakes for each such group. Every
 * member reaches the same verdict about shared memory, so all of them
 * make the mesh or none. */
static int start_engines(cpu_backend *b, dist_store *st, dist__errbuf *err) {
  dist__cpu_group *g = &b->g;
  int64_t deadline = dist__deadline_ms(g->timeout_ms);
  if (g->transport == DIST_CPU_TRANSPORT_SHM && !g->same_host)
    return dist__err_set(err, DIST_E_INVAL,
                         "DIST_TRANSPORT=shm, but group %s spans hosts (or network namespaces)",
                         g->name);
  if (g->same_host && g->transport == DIST_CPU_TRANSPORT_SHM)
    DIST_TRY(dist__shm_create(g, st, deadline, &b->shm, err));
  int shm_rc = DIST_OK;
  if (g->same_host && g->transport == DIST_CPU_TRANSPORT_AUTO &&
      (shm_rc = dist__shm_create(g, st, deadline, &b->shm, err)) != DIST_OK) {
    /* Out of memory in this process is not a verdict about shared memory:
     * init fails rather than silently running slower. */
    if (shm_rc == DIST_E_NOMEM)
      return shm_rc;
    /* Every member reaches the same verdict at creation (shm.h), so all of
     * them fall back together. */
    DIST_LOG(WARNING, SHM, "group %s: no shared memory (%s); collectives go over TCP",
             g->name, err->msg);
    dist__err_clear(err);
    b->shm = NULL;
  }
  if (!(b->colls_only && b->shm))
    DIST_TRY(dist__tcp_create(g, st, deadline, &b->tcp, err));
  if (!g->same_host && g->transport == DIST_CPU_TRANSPORT_AUTO && hier_wanted())
    DIST_TRY(dist__hier_create(g, st, deadline, &b->hier, err));
  DIST_TRY(init_barrier(g, st, deadline, err));
  log_connections(b);
  return DIST_OK;
}

static void release(cpu_backend *b) {
  dist__hier_destroy(b->hier);
  b->hier = NULL;
  dist__shm_destroy(b->shm);
  dist__tcp_destroy(b->tcp);
  b->shm = NULL;
  b->tcp = NULL;
  dist__free(b->q);
  dist__free(b->g.peers);
  dist__free(b->g.global_ranks);
}

/* Engines report a lost peer once; observers hear of it as an event. */
/* A connection made when first needed: recorded in the trace. */
static void report_connect(void *arg, const char *line) {
  dist__pg_note(((cpu_backend *)arg)->self, line);
}

static void report_peer_lost(void *arg, int group_rank, const char *why) {
  dist_backend_peer_lost(((cpu_backend *)arg)->self, group_rank, why);
}

static int cpu_init(void *priv, const dist_backend_init_args *a, dist_pg *self) {
  cpu_backend *b = priv;
  b->self = self;
  b->colls_only = a->colls_only;
  b->g.on_peer_lost = report_peer_lost;
  b->g.on_peer_lost_arg = b;
  b->g.on_connect = report_connect;
  b->g.on_connect_arg = b;
  pthread_mutex_init(&b->mu, NULL);
  pthread_cond_init(&b->cv, NULL);
  dist__errbuf err;
  dist__err_clear(&err);
  int rc = fill_group(b, a, &err);
  if (rc == DIST_OK && !a->store)
    rc = dist__err_set(&err, DIST_E_INVAL, "the cpu backend needs a group store");
  if (rc == DIST_OK)
    rc = exchange_peers(&b->g, a->store, &err);
  if (rc == DIST_OK)
    rc = start_engines(b, a->store, &err);
  if (rc != DIST_OK) {
    release(b);
    return dist_backend_set_error(self, rc, "%s", err.msg);
  }
  return DIST_OK;
}

static void cpu_abort(void *priv, const char *reason) {
  cpu_backend *b = priv;
  /* The reason is written before the flag is published, so a waiter that
   * sees the flag reads a whole reason; only the first abort writes it. */
  static pthread_mutex_t reason_lock = PTHREAD_MUTEX_INITIALIZER;
  pthread_mutex_lock(&reason_lock);
  if (!atomic_load(&b->g.aborted)) {
    snprintf(b->g.abort_reason, sizeof b->g.abort_reason, "%s", reason ? reason : "aborted");
    atomic_store(&b->g.aborted, 1);
  }
  pthread_mutex_unlock(&reason_lock);
  if (b->tcp)
    dist__tcp_abort(b->tcp, b->g.abort_reason);
  if (b->shm)
    dist__shm_wake_all(b->shm);
  if (b->hier)
    dist__hier_abort(b->hier, b->g.abort_reason);
  pthread_mutex_lock(&b->mu);
  pthread_cond_broadcast(&b->cv);
  pthread_mutex_unlock(&b->mu);
}

/* How long a destroy waits for the other ranks to reach the small
 * broadcasts this rank was the root of (dist__shm_settle_final): they are
 * usually there already; one that is not is not waited for longer. */
#define SETTLE_AT_DESTROY_MS 2000

/* The checks a small broadcast's or scatter's root owes (it returned
 * before its readers compared their calls with its own): a later
 * operation settles them, and without one only the destroy can. A rank
 * that named itself the root where the others named another was never
 * reported when the broadcast was the group's last. Not for a helper
 * group: its failures are its user's to tell. */
static void settle_at_destroy(cpu_backend *b) {
  if (!b->shm || b->self->internal)
    return;
  int64_t wait = b->g.timeout_ms >= 0 && b->g.timeout_ms < SETTLE_AT_DESTROY_MS
                     ? b->g.timeout_ms : SETTLE_AT_DESTROY_MS;
  dist__errbuf err;
  dist__err_clear(&err);
  dist_coll c = {.kind = DIST_OP_BROADCAST, .root = -1};
  dist__cpu_op op = {&c, dist__now_ms() + wait, &err, -1};
  int kind = DIST_OP_BROADCAST;
  uint64_t seq = 0;
  int rc = dist__shm_settle_final(b->shm, &op, &kind, &seq);
  if (rc == DIST_OK)
    return;
  c.kind = (dist_op_kind)kind;
  c.seq = seq;
  dist__pg_fini_failure(b->self, &c, rc, err.msg);
}

static void cpu_fini(void *priv) {
  cpu_backend *b = priv;
  /* Work still pending fails now rather than at its timeout; a group with
   * nothing in flight goes quietly (its peers are told nothing). Pending
   * includes the collective the progress thread already took off the
   * queue (undone counts it until it completes): the join below would
   * otherwise wait for it to finish, or to time out, and the program's
   * never-waited operation would succeed or fail by chance. */
  pthread_mutex_lock(&b->mu);
  bool pending = atomic_load(&b->undone) != 0 || b->p2p;
  pthread_mutex_unlock(&b->mu);
  if (pending)
    cpu_abort(b, "the group was destroyed with operations pending");
  else
    settle_at_destroy(b);
  pthread_mutex_lock(&b->mu);
  b->stop = true;
  pthread_cond_broadcast(&b->cv);
  bool joined = b->thread_started;
  pthread_mutex_unlock(&b->mu);
  if (joined)
    pthread_join(b->thread, NULL);
  release(b);
  pthread_cond_destroy(&b->cv);
  pthread_mutex_destroy(&b->mu);
}

static int cpu_async_error(void *priv) {
  cpu_backend *b = priv;
  if (atomic_load(&b->g.aborted))
    return DIST_E_ABORTED;
  return atomic_load(&b->g.broken_rc);
}

/* --- collectives --------------------------------------------------------- */

static int run_coll(cpu_backend *b, const dist_coll *c, dist__errbuf *err) {
  int rc = dist__cpu_check_state(&b->g, err);
  if (__builtin_expect(rc != DIST_OK, 0))
    return rc;
  if (b->shm) { /* the shm engine reads the clock only when it has to wait */
    dist__cpu_op op = {c, DIST_CPU_DEADLINE_LAZY, err, -1};
    return dist__shm_run(b->shm, &op);
  }
  dist__cpu_op op = {c, dist__now_ms() + c->timeout_ms, err, -1};
  if (b->hier && dist__hier_handles(c->kind))
    return dist__hier_run(b->hier, &op);
  return dist__tcp_run(b->tcp, &op);
}

static void *progress_main(void *arg);

static int start_thread(cpu_backend *b) {
  if (b->thread_started)
    return DIST_OK;
  int e = pthread_create(&b->thread, NULL, progress_main, b);
  if (e)
    return dist_backend_set_error(b->self, DIST_E_SYS, "cannot start the progress thread: %s",
                                  strerror(e));
  char name[16];
  snprintf(name, sizeof name, "dist-prog-%d", b->g.global_rank);
  pthread_setname_np(b->thread, name);
  b->thread_started = true;
  return DIST_OK;
}

static int enqueue(cpu_backend *b, dist_work *w) {
  pthread_mutex_lock(&b->mu);
  int rc = start_thread(b);
  if (rc == DIST_OK && b->q_len == b->q_cap) {
    size_t cap = b->q_cap ? b->q_cap * 2 : 16;
    dist_work **q = dist__malloc(sizeof *q * cap);
    if (!q) {
      rc = dist_backend_set_error(b->self, DIST_E_NOMEM, "out of memory queueing work");
    } else {
      for (size_t i = 0; i < b->q_len; i++)
        q[i] = b->q[(b->q_head + i) % b->q_cap];
      dist__free(b->q);
      b->q = q;
      b->q_head = 0;
      b->q_cap = cap;
    }
  }
  if (rc == DIST_OK) {
    b->q[(b->q_head + b->q_len++) % b->q_cap] = w;
    atomic_fetch_add(&b->g.colls_queued, 1);
    atomic_fetch_add(&b->undone, 1);
    pthread_cond_broadcast(&b->cv);
  }
  pthread_mutex_unlock(&b->mu);
  return rc;
}

/* A synchronous collective behind queued ones waits its turn, so the group
 * still completes in issue order. */
static void wait_queue_empty(cpu_backend *b) {
  pthread_mutex_lock(&b->mu);
  while (atomic_load(&b->g.colls_queued) != 0)
    pthread_cond_wait(&b->cv, &b->mu);
  pthread_mutex_unlock(&b->mu);
}

static int cpu_coll(void *priv, const dist_coll *c, dist_work *w) {
  cpu_backend *b = priv;
  if (w)
    return enqueue(b, w);
  if (__builtin_expect(atomic_load_explicit(&b->g.colls_queued, memory_order_acquire) != 0, 0))
    wait_queue_empty(b);
  dist__errbuf err;
  err.msg[0] = '\0';
  int rc = run_coll(b, c, &err);
  if (__builtin_expect(rc != DIST_OK, 0))
    dist_backend_set_error(b->self, rc, "%s", err.msg);
  return rc;
}

/* --- point to point ------------------------------------------------------ */

static void free_reqs(dist__tcp_req **reqs, int n) {
  for (int i = 0; i < n; i++)
    dist__tcp_req_free(reqs[i]);
  dist__free(reqs);
}

static int post_one(cpu_backend *b, const dist_coll *c, bool send, const dist_tensor *t, int peer,
                    int tag, dist__tcp_req **req, dist__errbuf *err) {
  size_t len = dist_tensor_nbytes(t);
  return send ? dist__tcp_isend(b->tcp, peer, DIST_TCP_CTX_P2P, tag, t->data, len, c, req, err)
              : dist__tcp_irecv(b->tcp, peer, DIST_TCP_CTX_P2P, tag, t->data, len, c, req, err);
}

/* Posts the requests of a SEND, RECV or BATCH_P2P. */
static int post(cpu_backend *b, const dist_coll *c, dist__tcp_req ***out, int *n,
                dist__errbuf *err) {
  if (!b->tcp)
    return dist__err_set(err, DIST_E_NOTSUP, "group %s runs collectives only (made with "
                         "DIST_GROUP_COLLECTIVES_ONLY): no point-to-point", b->g.name);
  int k = c->kind == DIST_OP_BATCH_P2P ? (int)c->n_p2p : 1;
  dist__tcp_req **reqs = dist__calloc((size_t)k, sizeof *reqs);
  if (!reqs)
    return dist__err_set(err, DIST_E_NOMEM, "out of memory");
  int rc = dist__cpu_check_state(&b->g, err);
  for (int i = 0; i < k && rc == DIST_OK; i++) {
    if (c->kind == DIST_OP_BATCH_P2P)
      rc = post_one(b, c, c->p2p[i].is_send, &c->p2p[i].tensor, c->p2p[i].peer, c->p2p[i].tag,
                    &reqs[i], err);
    else if (c->kind == DIST_OP_SEND)
      rc = post_one(b, c, true, &c->inputs[0], c->root, c->tag, &reqs[i], err);
    else
      rc = post_one(b, c, false, &c->outputs[0], c->root, c->tag, &reqs[i], err);
  }
  if (rc != DIST_OK) {
    free_reqs(reqs, k);
    return rc;
  }
  *out = reqs;
  *n = k;
  return DIST_OK;
}

/* The first failure's status and message, and a receive's source. */
static int reqs_outcome(dist__tcp_req **reqs, int n, int *src, const char **msg) {
  int rc = DIST_OK;
  *src = -1;
  *msg = NULL;
  for (int i = 0; i < n; i++) {
    const char *m = NULL;
    int s = -1;
    int r = dist__tcp_req_status(reqs[i], &m, &s);
    if (s >= 0)
      *src = s;
    if (r != DIST_OK && rc == DIST_OK) {
      rc = r;
      *msg = m;
    }
  }
  return rc;
}

static int cpu_p2p(void *priv, const dist_coll *c, dist_work *w) {
  cpu_backend *b = priv;
  dist__errbuf err;
  err.msg[0] = '\0';
  dist__tcp_req **reqs = NULL;
  int n = 0;
  int rc = post(b, c, &reqs, &n, &err);
  if (rc != DIST_OK)
    return dist_backend_set_error(b->self, rc, "%s", err.msg);
  if (!w) {
    rc = dist__tcp_wait(b->tcp, reqs, n, dist__now_ms() + c->timeout_ms, &err);
    free_reqs(reqs, n);
    return rc ? dist_backend_set_error(b->self, rc, "%s", err.msg) : DIST_OK;
  }
  p2p_work *p = dist__malloc(sizeof *p);
  if (!p) {
    free_reqs(reqs, n);
    return dist_backend_set_error(b->self, DIST_E_NOMEM, "out of memory");
  }
  *p = (p2p_work){w, reqs, n, NULL, dist__now_ms() + c->timeout_ms};
  dist_backend_work_start(w);
  pthread_mutex_lock(&b->mu);
  rc = start_thread(b);
  if (rc == DIST_OK) {
    p->next = b->p2p;
    b->p2p = p;
    pthread_cond_broadcast(&b->cv);
  }
  pthread_mutex_unlock(&b->mu);
  if (rc != DIST_OK) {
    free_reqs(reqs, n);
    dist__free(p);
  }
  return rc;
}

/* --- the progress thread ------------------------------------------------- */

static void finish_p2p(p2p_work *p, int rc, const char *msg, int src) {
  dist_work *w = p->w;
  char copy[DIST_ERRMSG_LEN];
  snprintf(copy, sizeof copy, "%s", msg ? msg : "");
  free_reqs(p->reqs, p->n); /* a request still pending is cancelled */
  dist__free(p);
  dist_backend_work_done(w, rc, src, copy);
}

/* Completes every pending point-to-point work whose requests are done,
 * and fails with DIST_E_TIMEOUT (naming the peers still awaited) every one
 * past the group's timeout, as a synchronous call would: a receive whose
 * send never comes must not wait forever. Called without b->mu; takes it
 * to edit the list. */
static void sweep_p2p(cpu_backend *b) {
  pthread_mutex_lock(&b->mu);
  p2p_work *done = NULL, *late = NULL;
  int64_t now = dist__now_ms();
  for (p2p_work **pp = &b->p2p; *pp;) {
    p2p_work *p = *pp;
    bool all = true;
    for (int i = 0; i < p->n && all; i++)
      all = dist__tcp_test(b->tcp, p->reqs[i]);
    if (all || now >= p->deadline_ms) {
      *pp = p->next;
      p->next = all ? done : late;
      *(all ? &done : &late) = p;
    } else {
      pp = &p->next;
    }
  }
  pthread_mutex_unlock(&b->mu);
  for (p2p_work *next; done; done = next) {
    next = done->next;
    int src;
    const char *msg;
    int rc = reqs_outcome(done->reqs, done->n, &src, &msg);
    finish_p2p(done, rc, msg, src);
  }
  for (p2p_work *next; late; late = next) {
    next = late->next;
    dist__errbuf err;
    err.msg[0] = '\0';
    int rc = dist__tcp_wait(b->tcp, late->reqs, late->n, now, &err); /* says who is awaited */
    int src;
    const char *msg;
    if (rc == DIST_OK) /* completed at the last moment */
      rc = reqs_outcome(late->reqs, late->n, &src, &msg);
    else
      src = -1, msg = err.msg;
    finish_p2p(late, rc, msg, src);
  }
}

static void run_queued(cpu_backend *b, dist_work *w) {
  dist_backend_work_start(w);
  dist__errbuf err;
  err.msg[0] = '\0';
  int rc = run_coll(b, dist_work_coll(w), &err);
  /* Before the waiter is released: a destroy it makes next must not take
   * this completed work for a pending one (cpu_fini). */
  atomic_fetch_sub(&b->undone, 1);
  dist_backend_work_done(w, rc, -1, err.msg);
}

static void *progress_main(void *arg) {
  cpu_backend *b = arg;
  pthread_mutex_lock(&b->mu);
  for (;;) {
    if (b->q_len) {
      dist_work *w = b->q[b->q_head];
      b->q_head = (b->q_head + 1) % b->q_cap;
      b->q_len--;
      pthread_mutex_unlock(&b->mu);
      run_queued(b, w);
      pthread_mutex_lock(&b->mu);
      atomic_fetch_sub(&b->g.colls_queued, 1);
      pthread_cond_broadcast(&b->cv);
      continue;
    }
    if (b->p2p) {
      pthread_mutex_unlock(&b->mu);
      dist__tcp_progress(b->tcp, 5);
      sweep_p2p(b);
      pthread_mutex_lock(&b->mu);
      continue;
    }
    if (b->stop)
      break;
    pthread_cond_wait(&b->cv, &b->mu);
  }
  pthread_mutex_unlock(&b->mu);
  return NULL;
}

/* "shm", "hier" or "tcp": the engine that runs the group's collectives. */
static const char *cpu_transport(void *priv) {
  const cpu_backend *b = priv;
  return b->shm ? "shm" : b->hier ? "hier" : "tcp";
}

void dist__cpu_backend_conns(const void *priv, int *p2p, int *leaders, int *hosts) {
  const cpu_backend *b = priv;
  *p2p = dist__tcp_conns(b->tcp);
  *leaders = b->hier ? dist__hier_tcp_conns(b->hier) : 0;
  *hosts = b->hier ? dist__hier_nhosts(b->hier) : 1;
}

/* The connections slot (ABI 7): what dist__cpu_backend_conns counts. */
static bool cpu_connections(void *priv, char *buf, size_t len) {
  int p2p, leaders, hosts;
  dist__cpu_backend_conns(priv, &p2p, &leaders, &hosts);
  snprintf(buf, len, "connections: %d tcp (point-to-point %d, between host leaders %d); "
           "hosts %d; transport %s", p2p + leaders, p2p, leaders, hosts, cpu_transport(priv));
  return true;
}

const dist_backend_ops dist__cpu_backend_ops = {
    .abi_version = DIST_BACKEND_ABI_VERSION,
    .name = "cpu",
    .caps = DIST_CAP_CPU | DIST_CAP_REPORTS_START,
    .priv_size = sizeof(cpu_backend),
    .init = cpu_init,
    .fini = cpu_fini,
    .abort = cpu_abort,
    .send = cpu_p2p,
    .recv = cpu_p2p,
    .batch_p2p = cpu_p2p,
    .broadcast = cpu_coll,
    .all_reduce = cpu_coll,
    .reduce = cpu_coll,
    .all_gather = cpu_coll,
    .gather = cpu_coll,
    .scatter = cpu_coll,
    .reduce_scatter = cpu_coll,
    .all_to_all = cpu_coll,
    .barrier = cpu_coll,
    .async_error = cpu_async_error,
    .transport = cpu_transport,
    .connections = cpu_connections,
};
