/* mon_watchdog.c - the watchdog thread: one per process, following every
 * in-flight operation of every group against its timeout.
 *
 * Each tick (an eighth of the stall threshold, 20-250 ms) it looks at the
 * oldest operation in flight of each group. Past the stall threshold
 * (DIST_STALL_S, default a quarter of the operation's timeout: the
 * group's, or the call's own for a monitored barrier) it publishes its
 * own progress, reads every rank's, and diagnoses the stall; it refreshes
 * that diagnosis every tick while the stall lasts (every 4 ms per rank of
 * the job when that is longer: read_every_ns), so the one a timed-out
 * operation fails with is at most that old. The lowest-numbered rank
 * blocked in the operation logs it as a stall report (WARNING) at once and
 * again every threshold interval. When the operation times out (the
 * backend's deadline; the watchdog never fails an operation itself) it logs
 * the diagnosis as an ERROR, emits it as DIST_EV_DIAGNOSIS, posts it as the
 * job's cause and (DIST_ABORT_ON_TIMEOUT) aborts the group. A lost peer
 * gets the same treatment with what is known of its end.
 *
 * Publication: one store write a second (the heartbeat), more only while a
 * stall is being diagnosed or a deadlock proved.
 *
 * Deadlocks end before the timeout (DIST_EARLY_VERDICT=1, the default). A
 * synchronous call blocked for a second (MON_PROBE_MS at least, the stall
 * threshold when that is shorter) is probed: the records are
 * read and the wait-for graph searched for a cycle through this rank whose
 * members are all alive, blocked in a synchronous call and have nothing
 * else in flight (dist__mon_deadlock_seen). Seen the same (ranks, and the
 * operation each is blocked in) in two snapshots between which every
 * member published again, the cycle cannot break: nothing a member has
 * pending can complete, and no member's thread can call anything else. The
 * operation then fails at once as its timeout would make it fail: the
 * hang diagnosis is logged, emitted, posted as the job's cause (distrun:
 * exit 11) and the group aborted with it. A rank computing outside the
 * library (or with another of its threads computing: mon_threads.c),
 * stopped, or with an asynchronous operation pending, is never part of a
 * proof: its waiters get the whole timeout. Probes that find no
 * cycle back off (MON_PROBE_MS doubling to MON_PROBE_MAX_MS), so a long
 * wait for a slow rank costs one read of the records every few seconds;
 * a cycle is closed by the last rank to block, whose own probe is fresh. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "mon_int.h"

static int64_t last_pub_ns;
/* Wakes the watchdog (kick, stop); never held while it works, so an event
 * that kicks it does not wait for a store round trip. */
static pthread_mutex_t wake_mu = PTHREAD_MUTEX_INITIALIZER;

void dist__mon_watchdog_kick(void) {
  mon_state *m = &dist__mon;
  pthread_mutex_lock(&wake_mu);
  atomic_store(&m->kick, 1);
  pthread_cond_signal(&m->cv);
  pthread_mutex_unlock(&wake_mu);
}

static void publish(int64_t now) {
  dist__mon_publish(dist__mon.store, "run", "");
  last_pub_ns = now;
}

/* A quarter of the operation's own timeout: a monitored barrier called
 * with 30 s on a group of 10 s stalls at 7.5 s, as a group of 30 s would. */
static int64_t stall_ms_of(const mon_group *g, uint64_t seq) {
  return dist__mon.stall_ms ? dist__mon.stall_ms : dist__mon_timeout_ms(g, seq) / 4;
}

/* Every rank's record (with stacks when asked for them), or NULL. */
static mon_rec *read_recs(void) {
  mon_rec *recs = dist__calloc((size_t)dist__mon.world, sizeof *recs);
  if (!recs)
    return NULL;
  if (dist__mon_read_all(dist__mon.store, recs) != DIST_OK) {
    DIST_LOG(DEBUG, MON, "reading progress failed: %s", dist_store_errmsg(dist__mon.store));
    dist__mon_recs_free(recs, dist__mon.world);
    dist__free(recs);
    return NULL;
  }
  return recs;
}

/* DIST_SHOW_STACKTRACES: ask every member that has not entered #seq for
 * its stack (it answers from its own watchdog, see answer_stack_request). */
static void request_stacks(const mon_group *g, uint64_t seq, const mon_rec *recs) {
  for (int i = 0; i < g->size; i++) {
    int r = g->granks[i];
    const mon_rec_group *rg = dist__mon_rec_group(&recs[r], g->gid);
    if (r == dist__mon.rank || !rg || rg->enq >= seq)
      continue;
    char key[200];
    dist__mon_key(key, sizeof key, "sreq", r);
    dist_store_set(dist__mon.store, key, "1", 1);
  }
}

static void answer_stack_request(void) {
  mon_state *m = &dist__mon;
  char key[200];
  dist__mon_key(key, sizeof key, "sreq", m->rank);
  bool deleted = false;
  if (dist_store_delete_key(m->store, key, &deleted) != DIST_OK || !deleted)
    return;
  int tid = m->groups[0].live ? atomic_load(&m->groups[0].tid) : 0;
  char *buf = dist__malloc(4096);
  if (!buf)
    return;
  size_t n = dist__mon_stack_of(tid ? tid : m->main_tid, buf, 4096);
  dist__mon_key(key, sizeof key, "s", m->rank);
  dist_store_set(m->store, key, buf, n);
  dist__free(buf);
}

static void replace_diag(mon_group *g, char *diag, const mon_verdict *v) {
  pthread_mutex_lock(&dist__mon_diag_mu);
  char *old = g->diag;
  g->diag = diag;
  g->verdict = *v;
  pthread_mutex_unlock(&dist__mon_diag_mu);
  dist__free(old);
}

/* Posts diag as the job's cause with what it blames (distrun's verdict). */
static void post_diagnosis(int rc, const char *diag, const mon_verdict *v) {
  dist_cause_info in = dist_cause_info_none();
  in.culprits = v->culprits;
  in.n_culprits = (size_t)v->n;
  in.group_id = v->n ? v->gid : -1;
  in.group_name = v->n && v->gname[0] ? v->gname : NULL;
  in.op = v->n ? v->kind : -1;
  in.seq = v->n ? v->seq : 0;
  in.site = v->n && v->site[0] ? v->site : NULL;
  in.field = v->n && v->field[0] ? v->field : NULL;
  dist__cause_post_diagnosis(rc, &in, diag);
}

static void stall_report(mon_group *g, uint64_t seq, const char *diag, int n_cycles,
                         int64_t now) {
  DIST_LOG(WARNING, MON, "%s%s", diag,
           n_cycles ? "" : "\n  (it times out at its deadline unless it completes first)");
  if (g->pg)
    dist_observer_emit_report(g->pg, DIST_EV_STALL_REPORT, DIST_E_TIMEOUT, diag);
  g->reports++;
  g->next_report_ns = now + stall_ms_of(g, seq) * 1000000;
}

/* How often a stalled rank rereads every record: each tick, but no more
 * than once per 4 ms of records (a second at 256 ranks), so the store's
 * load while a whole job stalls grows with the ranks, not with their
 * square: at 256 ranks on 2 cores, rereading each tick left no time for
 * the ranks' own heartbeats. */
static int64_t read_every_ns(void) {
  int64_t ms = (int64_t)dist__mon.world * 4;
  return (ms > dist__mon.tick_ms ? ms : dist__mon.tick_ms) * 1000000LL;
}

static bool end_left(mon_group *g, uint64_t seq, mon_rec *recs);

/* The oldest operation of g in flight for at least the stall threshold. */
static void check_stall(mon_group *g, int64_t now) {
  uint64_t done = atomic_load_explicit(&g->done, memory_order_acquire);
  uint64_t enq = atomic_load_explicit(&g->enq, memory_order_acquire);
  mon_op *op = &g->ring[(done + 1) % MON_RING];
  if (enq <= done || atomic_load_explicit(&op->seq, memory_order_acquire) != done + 1) {
    if (g->stall_seq && g->reports && atomic_load(&g->failed_seq) != g->stall_seq)
      DIST_LOG(WARNING, MON, "group %d: the stall at #%llu is over", g->gid,
               (unsigned long long)dist__mon_num(g, g->stall_seq));
    g->stall_seq = 0;
    return;
  }
  if (now - atomic_load(&op->t_enq_ns) < stall_ms_of(g, done + 1) * 1000000)
    return;
  if (g->stall_seq != done + 1) {
    g->stall_seq = done + 1;
    g->reports = 0;
    g->next_report_ns = now;
    g->next_read_ns = now;
    publish(now); /* the others must see this rank blocked */
  }
  if (dist__mon.stacks)
    answer_stack_request();
  if (now < g->next_read_ns)
    return;
  g->next_read_ns = now + read_every_ns();
  mon_rec *recs = read_recs();
  if (!recs)
    return;
  if (!dist__mon_recs_fresh(g, recs, dist__mon_wall_ms(atomic_load(&op->t_enq_ns)))) {
    dist__mon_recs_free(recs, dist__mon.world); /* a member's record predates this stall */
    dist__free(recs);
    return;
  }
  if (end_left(g, done + 1, recs)) { /* an async collective's (the probe takes sync ones) */
    dist__mon_recs_free(recs, dist__mon.world);
    dist__free(recs);
    return;
  }
  bool lowest = false;
  int cycles = 0;
  mon_verdict v;
  char *diag = dist__mon_diagnose(g, done + 1, recs, "stall", &lowest, &cycles, &v);
  if (diag)
    diag = dist__mon_gpu_note(g, done + 1, diag);
  if (dist__mon.stacks && g->reports == 0)
    request_stacks(g, done + 1, recs);
  if (diag && lowest && now >= g->next_report_ns)
    stall_report(g, done + 1, diag, cycles, now);
  if (diag)
    replace_diag(g, diag, &v);
  dist__mon_recs_free(recs, dist__mon.world);
  dist__free(recs);
}

/* The diagnosis made while the operation stalled, as a hang (a desync
 * when members left the group before it: mon_diag_left.c): the view
 * before the timeout is the telling one (after it, the others tear down). */
static char *cached_as_hang(mon_group *g, uint64_t seq, mon_verdict *v) {
  char *d = NULL;
  pthread_mutex_lock(&dist__mon_diag_mu);
  if (g->diag && g->stall_seq == seq && strncmp(g->diag, "stall ", 6) == 0) {
    size_t n = strlen(g->diag) + 8;
    d = dist__malloc(n);
    if (d)
      snprintf(d, n, "%s %s", g->verdict.desync ? "desync" : "hang", g->diag + 6);
    *v = g->verdict;
  }
  pthread_mutex_unlock(&dist__mon_diag_mu);
  return d;
}

/* What a failure's diagnosis is posted and emitted as: a desync (members
 * left the group before the collective), else the failure's own code. */
static int diag_rc(const mon_verdict *v, int rc) {
  return v->desync ? DIST_E_DESYNC : rc;
}

static dist_event_kind diag_event(const mon_verdict *v) {
  return v->desync ? DIST_EV_DESYNC_REPORT : DIST_EV_DIAGNOSIS;
}

/* A fresh diagnosis of g's operation seq after it failed. */
static char *diagnose_now(mon_group *g, uint64_t seq, const char *what, mon_verdict *v) {
  /* The others' records must postdate this operation's start (they
   * publish once a second; a dead one is recognised as such), and distrun
   * posts how a peer ended as it reaps it. */
  mon_op *op = &g->ring[seq % MON_RING];
  publish(dist__now_ns());
  int64_t since_ms = dist__mon_wall_ms(atomic_load(&op->t_enq_ns));
  int64_t until = dist__now_ms() + MON_PUBLISH_MS + 2 * dist__mon.tick_ms;
  mon_rec *recs = NULL;
  for (;;) {
    recs = read_recs();
    if (!recs || dist__now_ms() >= until ||
        (dist__mon_recs_fresh(g, recs, since_ms) && dist__mon_recs_settled(g, recs)))
      break;
    dist__mon_recs_free(recs, dist__mon.world);
    dist__free(recs);
    dist__sleep_ms(dist__mon.tick_ms);
  }
  if (!recs)
    return NULL;
  bool lowest;
  int cycles;
  char *diag = dist__mon_diagnose(g, seq, recs, what, &lowest, &cycles, v);
  dist__mon_recs_free(recs, dist__mon.world);
  dist__free(recs);
  return diag;
}

/* An operation of g timed out or lost a peer: say why, once. */
static void on_failure(mon_group *g, bool timeout) {
  uint64_t seq = atomic_load(&g->failed_seq);
  mon_op *op = &g->ring[seq % MON_RING];
  if (!seq || atomic_load(&op->seq) != seq)
    return;
  mon_verdict v = {.gid = -1, .kind = -1};
  char *diag = timeout ? cached_as_hang(g, seq, &v) : NULL;
  if (!diag)
    diag = diagnose_now(g, seq, timeout ? "hang" : "lost peer", &v);
  if (!diag)
    return;
  int rc = diag_rc(&v, timeout ? DIST_E_TIMEOUT : DIST_E_PEER_LOST);
  DIST_LOG(ERROR, MON, "%s", diag);
  if (g->pg)
    dist_observer_emit_report(g->pg, diag_event(&v), rc, diag);
  /* distrun: exit 11 for a hang, the report last; it replaces the checking
   * layer's "did not arrive" for the same timeout, which knows less. */
  post_diagnosis(rc, diag, &v);
  if (timeout && dist__mon.abort_on_timeout && g->pg)
    dist__abort_group(g->pg, "the group timed out (DIST_ABORT_ON_TIMEOUT=1)");
  replace_diag(g, diag, &v);
}

/* --- the deadlock probe -------------------------------------------------- */

/* Whether b (a later snapshot) shows the cycle a showed, every member
 * having published since. */
static bool same_cycle_later(const mon_cycle_seen *a, const mon_cycle_seen *b) {
  if (!a->n || a->n != b->n || a->ops != b->ops)
    return false;
  for (int i = 0; i < a->n; i++)
    if (a->ranks[i] != b->ranks[i] || b->hb_ms[i] <= a->hb_ms[i])
      return false;
  return true;
}

/* Operation seq of g fails now, as at its timeout, with diag (taken) and
 * what it blames: a proven deadlock's hang, or the desync of members that
 * left the group before this collective. */
static void end_now(mon_group *g, uint64_t seq, char *diag, const mon_verdict *v) {
  int rc = diag_rc(v, DIST_E_TIMEOUT);
  DIST_LOG(ERROR, MON, "%s", diag);
  if (g->pg)
    dist_observer_emit_report(g->pg, diag_event(v), rc, diag);
  post_diagnosis(rc, diag, v);
  atomic_store(&g->failed_seq, seq);
  replace_diag(g, diag, v);
  if (g->pg) {
    char why[DIST_ERRMSG_LEN];
    snprintf(why, sizeof why, "%s (DIST_EARLY_VERDICT=0 waits for the timeout instead): %s",
             !v->desync ? "a proven deadlock" : v->n > 1 ? "members left the group"
                                                          : "a member left the group", diag);
    dist__abort_group(g->pg, why);
  }
  g->probe_seen.n = 0;
}

/* A proven deadlock: operation seq of g fails now, as at its timeout. */
static void end_deadlock(mon_group *g, uint64_t seq, mon_rec *recs, int64_t now) {
  bool lowest = false;
  int cycles = 0;
  mon_verdict v;
  char *stall = dist__mon_diagnose(g, seq, recs, "stall", &lowest, &cycles, &v);
  if (!stall)
    return;
  /* The stall report comes first, as when the stall threshold passes
   * before the timeout: the same text, then the hang. A cycle through a
   * member that left the group is that member's desync. */
  if (lowest && !v.desync && !(g->stall_seq == seq && g->reports))
    stall_report(g, seq, stall, cycles, now);
  g->stall_seq = seq;
  replace_diag(g, stall, &v);
  mon_verdict hv = {.gid = -1, .kind = -1};
  char *diag = cached_as_hang(g, seq, &hv);
  if (diag)
    end_now(g, seq, diag, &hv);
}

/* Members that left g before its collective seq (mon_diag_left.c) never
 * enter it: the lowest rank in it fails it now with their desync, as the
 * TCP engine does when it hears them leave. Whether it did. */
static bool end_left(mon_group *g, uint64_t seq, mon_rec *recs) {
  mon_op *op = &g->ring[seq % MON_RING];
  mon_at_op me = {seq, atomic_load(&op->coll), atomic_load(&op->kind)};
  int left[MON_CULPRITS_MAX];
  if (!dist__mon.early || !g->pg || !me.coll || atomic_load(&g->failed_seq) == seq ||
      !dist__mon_leavers(g, me, recs, left, MON_CULPRITS_MAX))
    return false;
  bool lowest = false;
  int cycles = 0;
  mon_verdict v;
  char *diag = dist__mon_diagnose(g, seq, recs, "desync", &lowest, &cycles, &v);
  if (!diag || !v.desync || !lowest) {
    dist__free(diag);
    return false;
  }
  g->stall_seq = seq;
  end_now(g, seq, diag, &v);
  return true;
}

static void probe(mon_group *g, int64_t now) {
  mon_state *m = &dist__mon;
  uint64_t done = atomic_load_explicit(&g->done, memory_order_acquire);
  uint64_t enq = atomic_load_explicit(&g->enq, memory_order_acquire);
  mon_op *op = &g->ring[(done + 1) % MON_RING];
  if (!m->early || !g->pg || enq <= done ||
      atomic_load_explicit(&op->seq, memory_order_acquire) != done + 1 ||
      !atomic_load(&op->sync) || atomic_load(&g->failed_seq) == done + 1)
    return;
  /* Not before the stall threshold when that is short (a 4 s timeout
   * reports its stall at 1 s, before the end), nor later than 1 s. */
  int64_t stall_ms = stall_ms_of(g, done + 1);
  int64_t after = stall_ms < 1000 ? stall_ms : 1000;
  after = after > MON_PROBE_MS ? after : MON_PROBE_MS;
  int64_t t_enq = atomic_load(&op->t_enq_ns);
  if (now - t_enq < after * 1000000LL)
    return;
  if (g->probe_seq != done + 1) { /* a new operation: probe it now */
    g->probe_seq = done + 1;
    g->probe_misses = 0;
    g->probe_seen.n = 0;
    g->probe_next_ns = now;
    publish(now); /* the others must see this rank blocked */
  }
  if (now < g->probe_next_ns)
    return;
  mon_rec *recs = read_recs();
  if (!recs)
    return;
  mon_cycle_seen seen;
  if (end_left(g, done + 1, recs)) {
    /* ended: members left the group before it */
  } else if (!dist__mon_deadlock_seen(recs, m->world, m->rank, &seen)) {
    g->probe_seen.n = 0;
    int64_t wait = (int64_t)MON_PROBE_MS << (g->probe_misses < 5 ? g->probe_misses : 5);
    g->probe_misses++;
    g->probe_next_ns = now + (wait < MON_PROBE_MAX_MS ? wait : MON_PROBE_MAX_MS) * 1000000LL;
  } else if (same_cycle_later(&g->probe_seen, &seen) && seen.ranks[0] == m->rank) {
    /* The cycle's lowest rank ends it (the others' calls fail through the
     * abort), so its report is the one the job reads, as at a timeout. */
    end_deadlock(g, done + 1, recs, now);
  } else {
    /* The first sight of it: the second snapshot needs every member's
     * next record, which they publish sooner while they see it too. */
    g->probe_seen = seen;
    publish(now);
    g->probe_next_ns = now + (int64_t)m->tick_ms * 1000000LL;
  }
  dist__mon_recs_free(recs, m->world);
  dist__free(recs);
}

/* The group of id gid while it lives, or NULL. */
static mon_group *live_group(int gid) {
  for (int i = 0; i < MON_MAX_GROUPS; i++)
    if (atomic_load_explicit(&dist__mon.groups[i].live, memory_order_acquire) &&
        dist__mon.groups[i].gid == gid)
      return &dist__mon.groups[i];
  return NULL;
}

/* The desync of this rank's creation in flight (a member left itself out
 * of the list it passed as that call), said once per creation: logged, in
 * the trace of the scope's group, and posted as the job's cause, which
 * the timeouts that follow do not replace. True when said (now or
 * before). */
static bool creation_desync(const mon_rec *recs) {
  mon_state *m = &dist__mon;
  const mon_rec_create *cr = &recs[m->rank].creating;
  if (!cr->on || !cr->k)
    return false;
  if (cr->gid == m->create_said_gid && cr->k == m->create_said_k)
    return true;
  mon_verdict v;
  char *diag = dist__mon_diagnose_creation_desync(recs, &v);
  if (!diag)
    return false;
  m->create_said_gid = cr->gid;
  m->create_said_k = cr->k;
  DIST_LOG(ERROR, MON, "%s", diag);
  int scope = atomic_load(&m->create_scope);
  mon_group *g = live_group(scope >= 0 ? scope : 0);
  if (g && g->pg)
    dist_observer_emit_report(g->pg, DIST_EV_DESYNC_REPORT, DIST_E_DESYNC, diag);
  dist_cause_info in = dist_cause_info_none();
  in.culprits = v.culprits;
  in.n_culprits = (size_t)v.n;
  in.group_id = v.gid;
  in.group_name = v.gname;
  in.field = "member list";
  in.site = v.site[0] ? v.site : NULL;
  dist__cause_post_diagnosis(DIST_E_DESYNC, &in, diag);
  dist__free(diag);
  return true;
}

/* This rank has waited in a creation past the stall threshold (a quarter
 * of the default group's timeout): the members that made that call are
 * in the records by now, and one whose list left itself out is a desync
 * to say at once. Read at most as often as a stall reads (once said, not
 * again for that creation). */
static void check_creation(int64_t now) {
  mon_state *m = &dist__mon;
  if (atomic_load_explicit(&m->creating, memory_order_acquire) <= 0)
    return;
  int gid = atomic_load(&m->create_gid);
  uint64_t k = atomic_load(&m->create_k);
  mon_group *def = live_group(0);
  int64_t stall = m->stall_ms ? m->stall_ms : def ? stall_ms_of(def, 0) : 2500;
  int64_t waited = dist__mon_wall_ms(now) - atomic_load(&m->create_since_ms);
  if (!k || (gid == m->create_said_gid && k == m->create_said_k) || waited < stall ||
      m->create_next_read_ns > now)
    return;
  m->create_next_read_ns = now + read_every_ns();
  mon_rec *recs = read_recs();
  if (!recs)
    return;
  if (recs[m->rank].creating.k == k)
    creation_desync(recs);
  dist__mon_recs_free(recs, m->world);
  dist__free(recs);
}

/* This rank's creation of a group timed out (mon_observer.c). It is the
 * first rank to time out (the ranks that skipped the call went on, to wait
 * elsewhere, later), and a program exits on the error, after which the
 * others' monitors would find it gone and end the waits there. So it says
 * who skipped the call, as a hang's diagnosis and the job's cause, then
 * counts the thread out of its creation (the record showed it till now). */
static void on_creation_timeout(void) {
  mon_state *m = &dist__mon;
  int n_out = atomic_exchange(&m->create_timed_out, 0);
  if (!n_out)
    return;
  publish(dist__now_ns());
  int64_t until = dist__now_ms() + MON_PUBLISH_MS + 2 * m->tick_ms;
  mon_verdict v;
  char *diag = NULL;
  for (;;) { /* the skippers' counts are a record old at most */
    mon_rec *recs = read_recs();
    if (!recs)
      break;
    bool desync = creation_desync(recs); /* said by now, unless the timeout came first */
    diag = desync ? NULL : dist__mon_diagnose_creation(recs, &v);
    dist__mon_recs_free(recs, m->world);
    dist__free(recs);
    if (desync || diag || dist__now_ms() >= until)
      break;
    dist__sleep_ms(m->tick_ms);
  }
  if (diag) {
    DIST_LOG(ERROR, MON, "%s", diag);
    int scope = atomic_load(&m->create_scope);
    mon_group *g = live_group(scope >= 0 ? scope : 0);
    if (g && g->pg)
      dist_observer_emit_report(g->pg, DIST_EV_DIAGNOSIS, DIST_E_TIMEOUT, diag);
    post_diagnosis(DIST_E_TIMEOUT, diag, &v);
    dist__free(diag);
  }
  atomic_fetch_sub_explicit(&m->creating, n_out, memory_order_release);
}

static void sweep(int64_t now) {
  mon_state *m = &dist__mon;
  on_creation_timeout();
  check_creation(now);
  for (int i = 0; i < MON_MAX_GROUPS; i++) {
    mon_group *g = &m->groups[i];
    if (!atomic_load_explicit(&g->live, memory_order_acquire))
      continue;
    if (atomic_exchange(&g->timed_out, 0)) {
      atomic_store(&g->failed_rc, 0);
      on_failure(g, true);
    } else if (atomic_exchange(&g->failed_rc, 0) == DIST_E_PEER_LOST) {
      on_failure(g, false);
    }
    check_stall(g, now);
    probe(g, now);
    if (m->detail)
      dist__mon_stats_tick(g);
  }
}

static void *loop(void *arg) {
  (void)arg;
  mon_state *m = &dist__mon;
  char name[16]; /* a library thread: mon_threads.c tells them by name */
  snprintf(name, sizeof name, "dist-mon-%d", m->rank);
  pthread_setname_np(pthread_self(), name);
  for (bool stopping = false; !stopping;) {
    pthread_mutex_lock(&wake_mu);
    if (!m->stop && !atomic_load(&m->kick)) {
      struct timespec until;
      clock_gettime(CLOCK_REALTIME, &until);
      until.tv_nsec += m->tick_ms * 1000000;
      until.tv_sec += until.tv_nsec / 1000000000;
      until.tv_nsec %= 1000000000;
      pthread_cond_timedwait(&m->cv, &wake_mu, &until);
    }
    atomic_store(&m->kick, 0);
    stopping = m->stop; /* one last sweep: a failure that came with the stop */
    pthread_mutex_unlock(&wake_mu);
    pthread_mutex_lock(&m->mu);
    int64_t now = dist__now_ns();
    sweep(now);
    if (!stopping && now - last_pub_ns >= MON_PUBLISH_MS * 1000000LL)
      publish(now);
    else if (!stopping && m->stacks)
      answer_stack_request();
    pthread_mutex_unlock(&m->mu);
  }
  return NULL;
}

int dist__mon_watchdog_start(void) {
  mon_state *m = &dist__mon;
  last_pub_ns = dist__now_ns();
  m->stop = false;
  int e = pthread_create(&m->thread, NULL, loop, NULL);
  if (e)
    return dist__set_last_error(DIST_E_SYS, "cannot start the watchdog: %s", strerror(e));
  m->thread_started = true;
  return DIST_OK;
}

void dist__mon_watchdog_stop(void) {
  mon_state *m = &dist__mon;
  if (!m->thread_started || getpid() != m->pid)
    return;
  pthread_mutex_lock(&wake_mu);
  m->stop = true;
  pthread_cond_signal(&m->cv);
  pthread_mutex_unlock(&wake_mu);
  pthread_join(m->thread, NULL);
  m->thread_started = false;
}
