/* mon_progress.c - each rank's progress record in the job's store.
 *
 * One key per rank, dist/mon/<job>/<init>/p/<R>, rewritten by the watchdog
 * at most once a second (and at once when a stall needs fresh figures):
 * the write time is the rank's heartbeat. The text format, and its parser,
 * are in mon_record.h; call sites are symbolised here, since an address
 * means nothing in another process. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>

#include <dist/internal/launch.h>
#include "mon_int.h"
#include "mon_threads.h"

#define REC_MAX (1 << 16)

void dist__mon_key(char *buf, size_t len, const char *kind, int rank) {
  snprintf(buf, len, "%s%s/%d", dist__mon.prefix, kind, rank);
}

/* The operation group g has in flight (the oldest), or NULL. */
static mon_op *in_flight(mon_group *g) {
  uint64_t done = atomic_load_explicit(&g->done, memory_order_acquire);
  uint64_t enq = atomic_load_explicit(&g->enq, memory_order_acquire);
  mon_op *op = &g->ring[(done + 1) % MON_RING];
  return enq > done && atomic_load_explicit(&op->seq, memory_order_acquire) == done + 1 ? op
                                                                                         : NULL;
}

/* Whether a synchronous call of this rank may be published as one: not
 * while a program thread runs besides the ones blocked in such calls
 * (mon_threads.c: it may yet call what the peers wait for). */
static bool sync_holds(void) {
  int blocked[64], n = 0, users[65], nu = 0;
  users[nu++] = dist__mon.main_tid;
  for (int i = 0; i < MON_MAX_GROUPS; i++) {
    mon_group *g = &dist__mon.groups[i];
    if (!atomic_load_explicit(&g->live, memory_order_acquire))
      continue;
    int tid = atomic_load_explicit(&g->tid, memory_order_relaxed);
    if (tid && nu < 65)
      users[nu++] = tid;
    mon_op *op = in_flight(g);
    if (op && n < 64 && atomic_load_explicit(&op->sync, memory_order_relaxed))
      blocked[n++] = tid;
  }
  return n > 0 && !dist__mon_other_thread_running(blocked, n, users, nu);
}

#define COUNTS_PUT 32 /* peers whose counts a line carries (MON_COUNTS_MAX) */

/* The global rank of g's member m, -1 when unknown (under peers_mu). */
static int global_of(const mon_group *g, int m) {
  return g->granks && m >= 0 && m < g->size ? g->granks[m] : -1;
}

/* The line's parts field (mon_record.h): the halves of the operation in
 * flight (op; NULL none), or a collective's root; "-" neither. */
static void put_parts(char *buf, size_t len, size_t *off, const mon_group *g, const mon_op *op) {
  int root = op ? atomic_load_explicit(&op->root, memory_order_relaxed) : -1;
  int k = op ? atomic_load_explicit(&op->n_parts, memory_order_relaxed) : 0;
  if (!k && root >= 0) {
    dist__appendf(buf, len, off, "\to%d", global_of(g, root));
    return;
  }
  if (!k) {
    dist__appendf(buf, len, off, "\t-");
    return;
  }
  for (int i = 0; i < k && i < MON_PARTS_MAX; i++) {
    mon_rec_part p = mon_part_unpack(atomic_load_explicit(&op->parts[i], memory_order_relaxed));
    dist__appendf(buf, len, off, "%s%c%d:%ut%d", i ? "," : "\t", p.send ? 's' : 'r',
                  global_of(g, p.peer), (unsigned)p.n,
                  atomic_load_explicit(&op->part_tags[i], memory_order_relaxed));
  }
  if (k > MON_PARTS_MAX)
    dist__appendf(buf, len, off, "+");
}

/* The line's parts and counts (mon_record.h): put_parts, and this rank's
 * sends and receives by peer so far. */
static void put_p2p(char *buf, size_t len, size_t *off, mon_group *g, const mon_op *op) {
  pthread_mutex_lock(&dist__mon_peers_mu);
  put_parts(buf, len, off, g, op);
  if (!g->p2p_sent || atomic_load_explicit(&g->p2p_any, memory_order_relaxed)) {
    dist__appendf(buf, len, off, "\t?");
  } else {
    int n = 0;
    bool cut = false;
    for (int m = 0; m < g->size && !cut; m++) {
      uint32_t sent = atomic_load_explicit(&g->p2p_sent[m], memory_order_relaxed);
      uint32_t received = atomic_load_explicit(&g->p2p_received[m], memory_order_relaxed);
      if (!sent && !received)
        continue;
      cut = n == COUNTS_PUT;
      if (!cut)
        dist__appendf(buf, len, off, "%s%d:%u:%u", n++ ? "," : "\t", global_of(g, m),
                      (unsigned)sent, (unsigned)received);
    }
    dist__appendf(buf, len, off, "%s", cut ? "+" : n ? "" : "\t-");
  }
  pthread_mutex_unlock(&dist__mon_peers_mu);
}

static void put_group(char *buf, size_t len, size_t *off, mon_group *g, bool sync_ok) {
  uint64_t done = atomic_load_explicit(&g->done, memory_order_acquire);
  uint64_t enq = atomic_load_explicit(&g->enq, memory_order_acquire);
  uint64_t started = atomic_load_explicit(&g->started, memory_order_relaxed);
  int kind = -1, peer = MON_PEER_NONE, peer2 = MON_PEER_NONE, tag = 0, sync = 0;
  int before = -1, fresh = -1, novel = -1;
  uint64_t num = 0, coll = 0, pair = 0, colls_done = atomic_load_explicit(&g->colls_done, memory_order_acquire);
  uint64_t colls_enq = atomic_load_explicit(&g->colls_enq, memory_order_relaxed);
  int64_t since = 0;
  char site[MON_SITE_LEN] = "-", last_site[MON_SITE_LEN] = "-";
  const mon_op *p2p_op = NULL;
  if (enq > done) {
    mon_op *op = &g->ring[(done + 1) % MON_RING];
    if (atomic_load_explicit(&op->seq, memory_order_acquire) == done + 1) {
      p2p_op = op;
      kind = atomic_load_explicit(&op->kind, memory_order_relaxed);
      peer = atomic_load_explicit(&op->peer, memory_order_relaxed);
      peer2 = atomic_load_explicit(&op->peer2, memory_order_relaxed);
      coll = atomic_load_explicit(&op->coll, memory_order_relaxed);
      num = atomic_load_explicit(&op->num, memory_order_relaxed);
      tag = atomic_load_explicit(&op->tag, memory_order_relaxed);
      sync = sync_ok && atomic_load_explicit(&op->sync, memory_order_relaxed);
      pair = atomic_load_explicit(&op->pair, memory_order_relaxed);
      before = atomic_load_explicit(&op->peer_before, memory_order_relaxed);
      fresh = atomic_load_explicit(&op->fresh, memory_order_relaxed);
      novel = atomic_load_explicit(&op->novel, memory_order_relaxed);
      since = dist__mon_wall_ms(atomic_load_explicit(&op->t_enq_ns, memory_order_relaxed));
      dist__mon_symbolize(atomic_load_explicit(&op->caller, memory_order_relaxed), site,
                          sizeof site);
    }
  }
  int last_kind = done ? atomic_load_explicit(&g->last_kind, memory_order_relaxed) : -1;
  uint64_t last_num = atomic_load_explicit(&g->last_num, memory_order_relaxed);
  int64_t last_ms = 0, last_ns = 0;
  if (done) {
    last_ns = atomic_load_explicit(&g->last_done_ns, memory_order_relaxed);
    last_ms = dist__mon_wall_ms(last_ns);
    dist__mon_symbolize(atomic_load_explicit(&g->last_caller, memory_order_relaxed), last_site,
                        sizeof last_site);
  }
  char desc[sizeof g->desc];
  snprintf(desc, sizeof desc, "%s", g->desc[0] ? g->desc : g->name);
  for (char *p = desc; *p; p++)
    if (*p == '\t' || *p == '\n')
      *p = ' ';
  dist__appendf(buf, len, off,
                "g\t%d\t%d\t%llu\t%llu\t%llu\t%d\t%lld\t%d\t%lld\t%s\t%s\t%s\t%d\t%llu\t%llu\t%llu"
                "\t%llu\t%d\t%llu\t%llu\t%d\t%d\t%llu\t%lld\t%llu\t%d",
                g->gid, g->size, (unsigned long long)enq, (unsigned long long)started,
                (unsigned long long)done, kind, (long long)since, last_kind, (long long)last_ms,
                site, last_site, desc, peer, (unsigned long long)colls_enq,
                (unsigned long long)colls_done, (unsigned long long)coll,
                (unsigned long long)atomic_load_explicit(&g->last_seq, memory_order_relaxed), tag,
                (unsigned long long)num, (unsigned long long)last_num, sync, peer2,
                (unsigned long long)pair, (long long)last_ns,
                (unsigned long long)atomic_load_explicit(&g->creations, memory_order_relaxed),
                before);
  put_p2p(buf, len, off, g, p2p_op);
  dist__appendf(buf, len, off, "\t%d\t%d\n", fresh, novel);
}

/* Whether any live group issued an operation after t_ns (one issued
 * before may end after: an async all_gather the refused call came after). */
static bool issued_after(int64_t t_ns) {
  for (int i = 0; i < MON_MAX_GROUPS; i++) {
    mon_group *g = &dist__mon.groups[i];
    if (!atomic_load_explicit(&g->live, memory_order_acquire))
      continue;
    uint64_t enq = atomic_load_explicit(&g->enq, memory_order_acquire);
    mon_op *last = &g->ring[enq % MON_RING];
    if (enq && atomic_load_explicit(&last->seq, memory_order_acquire) == enq &&
        atomic_load_explicit(&last->t_enq_ns, memory_order_relaxed) > t_ns)
      return true;
  }
  return false;
}

/* The "r" line: the last refused call, and whether it is the rank's
 * latest call (nothing issued after it: a rank that ends on the error is
 * named at that call; one that ignored it is named where it waits, and
 * the missed collective's report says why it is missing). */
static void put_refused(char *buf, size_t len, size_t *off) {
  pthread_mutex_lock(&dist__mon_refused_mu);
  mon_refused r = dist__mon.refused;
  pthread_mutex_unlock(&dist__mon_refused_mu);
  if (!r.on)
    return;
  char site[MON_SITE_LEN];
  dist__mon_symbolize(r.caller, site, sizeof site);
  for (char *p = r.msg; *p; p++)
    if (*p == '\t' || *p == '\n')
      *p = ' ';
  dist__appendf(buf, len, off, "r\t%d\t%d\t%llu\t%d\t%s\t%s\n", r.gid, r.kind,
                (unsigned long long)r.num, !issued_after(r.t_ns), site, r.msg[0] ? r.msg : "-");
}

/* When this rank destroyed user group g (its slot not yet taken by
 * another), else 0. */
static int64_t destroyed_at(mon_group *g) {
  int64_t ms = atomic_load_explicit(&g->destroyed_ms, memory_order_relaxed);
  return ms && !atomic_load_explicit(&g->live, memory_order_acquire) ? ms : 0;
}

/* The "d" line of a user group this rank destroyed: a member that waits in
 * it for this rank waits for a rank that went on without it; with the
 * collectives it had issued there and its last one, a member that waits
 * in a later collective knows it never will come (mon_diag_left.c). */
static void put_destroyed(char *buf, size_t len, size_t *off, mon_group *g, int64_t ms) {
  char desc[sizeof g->desc];
  snprintf(desc, sizeof desc, "%s", g->desc[0] ? g->desc : g->name[0] ? g->name : "-");
  for (char *p = desc; *p; p++)
    if (*p == '\t' || *p == '\n')
      *p = ' ';
  uint64_t done = atomic_load_explicit(&g->done, memory_order_acquire);
  char last_site[MON_SITE_LEN] = "-", site[MON_SITE_LEN] = "-";
  if (done)
    dist__mon_symbolize(atomic_load_explicit(&g->last_caller, memory_order_relaxed), last_site,
                        sizeof last_site);
  uintptr_t caller = atomic_load_explicit(&g->destroy_caller, memory_order_relaxed);
  if (caller)
    dist__mon_symbolize(caller, site, sizeof site);
  dist__appendf(buf, len, off, "d\t%d\t%lld\t%s\t%llu\t%d\t%llu\t%s\t%s\n", g->gid,
                (long long)ms, desc,
                (unsigned long long)atomic_load_explicit(&g->colls_enq, memory_order_relaxed),
                done ? atomic_load_explicit(&g->last_kind, memory_order_relaxed) : -1,
                (unsigned long long)atomic_load_explicit(&g->last_num, memory_order_relaxed),
                last_site, site);
}

/* The "l" line: when the process's last call into the library returned,
 * as far as the monitor hears (mon_record.h): init, creations, groups
 * made or destroyed, a store call of the program's, and the issue of each
 * group's latest operation (an asynchronous call returns there). */
static void put_lib(char *buf, size_t len, size_t *off) {
  int64_t t = atomic_load_explicit(&dist__mon.lib_ns, memory_order_relaxed);
  int64_t st = dist__store_waits_last_end_ns();
  t = st > t ? st : t;
  for (int i = 0; i < MON_MAX_GROUPS; i++) {
    mon_group *g = &dist__mon.groups[i];
    if (!atomic_load_explicit(&g->live, memory_order_acquire))
      continue;
    uint64_t enq = atomic_load_explicit(&g->enq, memory_order_acquire);
    mon_op *last = &g->ring[enq % MON_RING];
    int64_t at = enq && atomic_load_explicit(&last->seq, memory_order_acquire) == enq
                     ? atomic_load_explicit(&last->t_enq_ns, memory_order_relaxed) : 0;
    t = at > t ? at : t;
  }
  if (t)
    dist__appendf(buf, len, off, "l\t%lld\n", (long long)dist__mon_wall_ms(t));
}

/* The "w" line: the oldest blocking store call the program is in
 * (dist/internal/store.h), with its caller symbolised. */
static void put_store_wait(char *buf, size_t len, size_t *off) {
  dist__store_wait w;
  if (dist__store_waits(&w, 1) < 1)
    return;
  char site[MON_SITE_LEN];
  dist__mon_symbolize((uintptr_t)w.caller, site, sizeof site);
  for (char *p = w.key; *p; p++)
    if (*p == '\t' || *p == '\n')
      *p = ' ';
  dist__appendf(buf, len, off, "w\t%d\t%lld\t%s\t%zu\t%lld\t%s\t%s\n", w.tid,
                (long long)dist__mon_wall_ms(w.since_ns), w.op, w.n_keys,
                (long long)w.timeout_ms, site, w.key);
}

/* The "m" line of group g: the last call on a group this rank is not a
 * member of, made just before its collective nm_num on g. */
static void put_non_member(char *buf, size_t len, size_t *off, mon_group *g) {
  uint64_t num = atomic_load_explicit(&g->nm_num, memory_order_acquire);
  if (!num)
    return;
  char site[MON_SITE_LEN];
  dist__mon_symbolize(atomic_load_explicit(&g->nm_caller, memory_order_relaxed), site,
                      sizeof site);
  dist__appendf(buf, len, off, "m\t%d\t%llu\t%d\t%s\n", g->gid, (unsigned long long)num,
                atomic_load_explicit(&g->nm_kind, memory_order_relaxed), site[0] ? site : "-");
}

/* The "x" lines: the latest creations this rank called on a scope. */
static void put_made(char *buf, size_t len, size_t *off) {
  mon_state *m = &dist__mon;
  struct mon_made made[MON_MADE_MAX];
  pthread_mutex_lock(&m->create_mu);
  uint64_t n = m->n_made, first = n > MON_MADE_MAX ? n - MON_MADE_MAX : 0;
  for (uint64_t i = first; i < n; i++)
    made[i - first] = m->made[i % MON_MADE_MAX];
  pthread_mutex_unlock(&m->create_mu);
  for (uint64_t i = 0; i < n - first; i++) {
    const struct mon_made *x = &made[i];
    char site[MON_SITE_LEN];
    dist__mon_symbolize(x->caller, site, sizeof site);
    dist__appendf(buf, len, off, "x\t%d\t%llu\t%d\t%x\t%s\t%s\n", x->scope,
                  (unsigned long long)x->k, x->member, (unsigned)x->hash, site,
                  x->members[0] ? x->members : "-");
  }
}

int dist__mon_publish(dist_store *s, const char *state, const char *note) {
  mon_state *m = &dist__mon;
  char *buf = dist__malloc(REC_MAX);
  if (!buf)
    return DIST_E_NOMEM;
  size_t off = 0;
  dist__appendf(buf, REC_MAX, &off, "v1\t%d\t%d\t%s\t%lld\t%s\t%s\n", m->rank, (int)m->pid,
                m->host, (long long)dist__mon_wall_ms(dist__now_ns()), state,
                note && *note ? note : "-");
  bool sync_ok = sync_holds();
  for (int i = 0; i < MON_MAX_GROUPS; i++)
    if (atomic_load_explicit(&m->groups[i].live, memory_order_acquire))
      put_group(buf, REC_MAX, &off, &m->groups[i], sync_ok);
  if (atomic_load_explicit(&m->creating, memory_order_acquire) > 0) {
    char site[MON_SITE_LEN];
    dist__mon_symbolize(atomic_load_explicit(&m->create_caller, memory_order_relaxed), site,
                        sizeof site);
    char call[sizeof m->create_call], members[MON_MEMBERS_LEN];
    pthread_mutex_lock(&m->create_mu);
    snprintf(call, sizeof call, "%.*s", (int)sizeof call - 1,
             m->create_call[0] ? m->create_call : "-");
    snprintf(members, sizeof members, "%.*s", (int)sizeof members - 1,
             m->create_members[0] ? m->create_members : "-");
    pthread_mutex_unlock(&m->create_mu);
    dist__appendf(buf, REC_MAX, &off, "c\t%d\t%d\t%lld\t%s\t%s\t%d\t%llu\t%s\t%x\n",
                  atomic_load_explicit(&m->create_gid, memory_order_relaxed),
                  atomic_load_explicit(&m->create_size, memory_order_relaxed),
                  (long long)atomic_load_explicit(&m->create_since_ms, memory_order_relaxed),
                  site, call, atomic_load_explicit(&m->create_scope, memory_order_relaxed),
                  (unsigned long long)atomic_load_explicit(&m->create_k, memory_order_relaxed),
                  members, (unsigned)atomic_load_explicit(&m->create_hash, memory_order_relaxed));
  }
  put_made(buf, REC_MAX, &off);
  /* the MON_DESTROYED_MAX latest (a job that makes and destroys a group
   * per step would otherwise carry hundreds in every record) */
  for (int k = 0, prev_i = -1; k < MON_DESTROYED_MAX; k++) {
    int best = -1;
    int64_t best_ms = 0, prev_ms = prev_i >= 0 ? destroyed_at(&m->groups[prev_i]) : INT64_MAX;
    for (int i = 0; i < MON_MAX_GROUPS; i++) {
      int64_t ms = destroyed_at(&m->groups[i]);
      bool before = ms < prev_ms || (ms == prev_ms && i > prev_i); /* after prev in the order */
      if (ms && before && (best < 0 || ms > best_ms || (ms == best_ms && i < best))) {
        best = i;
        best_ms = ms;
      }
    }
    if (best < 0)
      break;
    put_destroyed(buf, REC_MAX, &off, &m->groups[best], best_ms);
    prev_i = best;
  }
  for (int i = 0; i < MON_MAX_GROUPS; i++)
    if (atomic_load_explicit(&m->groups[i].live, memory_order_acquire))
      put_non_member(buf, REC_MAX, &off, &m->groups[i]);
  put_refused(buf, REC_MAX, &off);
  put_lib(buf, REC_MAX, &off);
  put_store_wait(buf, REC_MAX, &off);
  char key[200];
  dist__mon_key(key, sizeof key, "p", m->rank);
  int rc = dist_store_set(s, key, buf, off);
  dist__free(buf);
  atomic_fetch_add_explicit(&m->writes, 1, memory_order_relaxed);
  return rc;
}

/* --- reading -------------------------------------------------------------- */

char dist__mon_proc_state(const mon_rec *r) {
  if (strcmp(r->host, dist__mon.host) != 0 || r->pid <= 0)
    return 0;
  char path[64], buf[512];
  snprintf(path, sizeof path, "/proc/%d/stat", (int)r->pid);
  FILE *f = fopen(path, "r");
  if (!f)
    return 'X';
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = '\0';
  const char *p = strrchr(buf, ')'); /* the name may hold spaces */
  return p && p[1] == ' ' ? p[2] : 0;
}

/* Same host, a fresh record: only whether the process is still there
 * ('X' gone, 'R' there; 0 when unknown). A stopped process publishes no
 * fresh record, so its full state matters only once the record is stale;
 * reading /proc/<pid>/stat for every fresh record of 256 ranks every second
 * cost more than the diagnosis. A zombie counts as there: distrun reaps
 * its ranks and posts how they ended. */
static char proc_exists(const mon_rec *r) {
  if (strcmp(r->host, dist__mon.host) != 0 || r->pid <= 0)
    return 0;
  return kill((pid_t)r->pid, 0) == 0 || errno == EPERM ? 'R' : 'X';
}

/* key into out when it exists (never waits). */
static void read_if_there(dist_store *s, const char *key, char *out, size_t len) {
  const char *keys[] = {key};
  bool there = false;
  if (dist_store_check(s, keys, 1, &there) != DIST_OK || !there)
    return;
  void *v = NULL;
  size_t n = 0;
  if (dist_store_get(s, key, &v, &n) == DIST_OK)
    snprintf(out, len, "%s", (char *)v);
  dist_free(v);
}

/* distrun's line for a rank that ended (distrun/exit/<R>) and the
 * backtrace of its crash (distrun/crash/<R>). */
static void read_exit(dist_store *s, mon_rec *r, int rank) {
  char key[64];
  snprintf(key, sizeof key, DIST_KEY_EXIT_FMT, rank);
  read_if_there(s, key, r->died, sizeof r->died);
  snprintf(key, sizeof key, DIST_KEY_CRASH_FMT, rank);
  if (r->died[0])
    read_if_there(s, key, r->crash, sizeof r->crash);
}

#define READ_BATCH 64 /* records per multi_get: 64 x 64 KiB stays under a frame */
#define KEY_LEN 200

/* The records of ranks [lo, lo + n) in two store round trips (check, then
 * multi_get), which is how they are once every rank has published: a stall
 * at 256 ranks has every watchdog reading every record each tick, and one
 * round trip per record overloaded the store until the ranks' own
 * heartbeats timed out. False when some are missing or the store has no
 * multi_get; the caller then reads them one by one. */
static bool read_batch(dist_store *s, int lo, int n, mon_rec *recs) {
  char *kbuf = dist__malloc((size_t)n * KEY_LEN);
  if (!kbuf)
    return false;
  const char *keys[READ_BATCH];
  void *vals[READ_BATCH] = {0};
  size_t lens[READ_BATCH];
  for (int i = 0; i < n; i++) {
    dist__mon_key(kbuf + (size_t)i * KEY_LEN, KEY_LEN, "p", lo + i);
    keys[i] = kbuf + (size_t)i * KEY_LEN;
  }
  bool there = false;
  bool ok = dist_store_check(s, keys, (size_t)n, &there) == DIST_OK && there &&
            dist_store_multi_get(s, keys, (size_t)n, vals, lens) == DIST_OK;
  for (int i = 0; ok && i < n; i++)
    if (vals[i])
      dist__mon_rec_parse((char *)vals[i], &recs[lo + i]);
  for (int i = 0; i < n; i++)
    dist_free(vals[i]);
  dist__free(kbuf);
  return ok;
}

/* Rank r's record alone (it may not exist yet). */
static int read_one(dist_store *s, int r, mon_rec *rec) {
  char key[KEY_LEN];
  dist__mon_key(key, sizeof key, "p", r);
  const char *keys[] = {key};
  bool there = false;
  int rc = dist_store_check(s, keys, 1, &there);
  if (rc != DIST_OK)
    return rc;
  void *v = NULL;
  size_t n = 0;
  if (there && dist_store_get(s, key, &v, &n) == DIST_OK && v)
    dist__mon_rec_parse((char *)v, rec);
  dist_free(v);
  return DIST_OK;
}

/* What else a record needs: the stack, the process state, the exit line. */
static void read_extras(dist_store *s, mon_rec *rec, int r) {
  char key[KEY_LEN];
  if (dist__mon.stacks) {
    dist__mon_key(key, sizeof key, "s", r);
    read_if_there(s, key, rec->stack, sizeof rec->stack);
  }
  if (r == dist__mon.rank)
    return;
  int64_t age = dist__mon_wall_ms(dist__now_ns()) - rec->hb_ms;
  if (rec->present)
    rec->proc_state = age > MON_HB_STALE_MS ? dist__mon_proc_state(rec) : proc_exists(rec);
  if (!rec->present || age > MON_HB_STALE_MS || strcmp(rec->state, "run") != 0 ||
      rec->proc_state == 'X' || rec->proc_state == 'Z')
    read_exit(s, rec, r);
}

int dist__mon_read_all(dist_store *s, mon_rec *recs) {
  int world = dist__mon.world;
  bool batched = dist_store_has_extended_api(s);
  for (int lo = 0; lo < world; lo += READ_BATCH) {
    int n = world - lo < READ_BATCH ? world - lo : READ_BATCH;
    for (int r = lo; r < lo + n; r++) {
      memset(&recs[r], 0, sizeof recs[r]);
      recs[r].rank = r;
    }
    if (batched && read_batch(s, lo, n, recs))
      continue;
    for (int r = lo; r < lo + n; r++) {
      int rc = read_one(s, r, &recs[r]);
      if (rc != DIST_OK)
        return rc;
    }
  }
  for (int r = 0; r < world; r++)
    read_extras(s, &recs[r], r);
  return DIST_OK;
}

void dist__mon_recs_free(mon_rec *recs, int n) {
  for (int i = 0; i < n; i++)
    dist__mon_rec_free(&recs[i]);
}

const mon_rec_destroyed *dist__mon_rec_destroyed(const mon_rec *r, int gid) {
  for (int i = 0; r->present && i < r->n_destroyed; i++)
    if (r->destroyed[i].gid == gid)
      return &r->destroyed[i];
  return NULL;
}

const mon_rec_group *dist__mon_rec_group(const mon_rec *r, int gid) {
  if (!r->present)
    return NULL;
  for (int i = 0; i < r->n; i++)
    if (r->g[i].gid == gid)
      return &r->g[i];
  return NULL;
}
