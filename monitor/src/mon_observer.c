/* mon_observer.c - the monitor as an observer: registration when the
 * library loads, and the per-group progress table fed by events.
 *
 * on_event is the only monitor code on an operation's path, so it stores a
 * few relaxed atomics into a fixed slot (the group id indexes the table)
 * and returns: no lock, no allocation, no system call. Rare events (a
 * group created or destroyed, a failure, a timeout) may take a lock and
 * wake the watchdog, which does everything else on its own thread.
 *
 * DIST_MONITOR=0 keeps the monitor out of the process entirely. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <dist/internal/pg.h>

#include "mon_int.h"

mon_state dist__mon = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER,
                       .create_mu = PTHREAD_MUTEX_INITIALIZER};
pthread_mutex_t dist__mon_diag_mu = PTHREAD_MUTEX_INITIALIZER;
pthread_mutex_t dist__mon_refused_mu = PTHREAD_MUTEX_INITIALIZER;
pthread_mutex_t dist__mon_peers_mu = PTHREAD_MUTEX_INITIALIZER;

/* initial-exec: libdist is loaded at start-up, and the default model would
 * make every operation call __tls_get_addr. */
static int my_tid(void) {
  static __thread int tid __attribute__((tls_model("initial-exec")));
  if (!tid)
    tid = (int)syscall(SYS_gettid);
  return tid;
}

/* The live slot of group gid, or NULL. A small id is its own slot; a
 * larger one (a group made with use_local_synchronization, whose id its
 * members derive, >= 2^30) is looked for above MON_DIRECT_IDS. */
static mon_group *slot_of(int gid) {
  if (gid < 0)
    return NULL;
  for (int i = gid < MON_DIRECT_IDS ? gid : MON_DIRECT_IDS; i < MON_MAX_GROUPS; i++) {
    mon_group *g = &dist__mon.groups[i];
    if (atomic_load_explicit(&g->live, memory_order_acquire) && g->gid == gid)
      return g;
    if (gid < MON_DIRECT_IDS)
      break;
  }
  return NULL;
}

/* The slot a group gid being created takes (mu held), or NULL when its id
 * is large and every slot above MON_DIRECT_IDS is taken. */
static mon_group *free_slot(int gid) {
  if (gid < 0)
    return NULL;
  if (gid < MON_DIRECT_IDS)
    return &dist__mon.groups[gid];
  for (int i = MON_DIRECT_IDS; i < MON_MAX_GROUPS; i++)
    if (!atomic_load_explicit(&dist__mon.groups[i].live, memory_order_acquire))
      return &dist__mon.groups[i];
  return NULL;
}

/* --- group life ----------------------------------------------------------- */

/* The record lists the rank's groups as they are now (called with mu
 * held, as the watchdog publishes). Without it a rank that stops (a
 * signal, a debugger) within a heartbeat of making or leaving a group
 * leaves a record from before: nobody could tell that the members of the
 * new group wait for it. */
static void publish_groups(void) {
  if (dist__mon.on && dist__mon.store)
    dist__mon_publish(dist__mon.store, "run", "");
}

/* Frees g's tables by peer (under mu, as a group's slot changes). */
static void free_peer_tables(mon_group *g) {
  pthread_mutex_lock(&dist__mon_peers_mu);
  dist__free(g->granks);
  g->granks = NULL;
  dist__free((void *)g->p2p_sent);
  dist__free((void *)g->p2p_received);
  g->p2p_sent = g->p2p_received = NULL;
  pthread_mutex_unlock(&dist__mon_peers_mu);
}

static void on_created(const dist_event *ev) {
  const dist_pg_info *in = ev->group;
  int *granks = dist__malloc(sizeof(int) * (size_t)in->size);
  if (!granks)
    return;
  memcpy(granks, in->global_ranks, sizeof(int) * (size_t)in->size);
  _Atomic uint32_t *sent = dist__calloc((size_t)in->size, sizeof *sent);
  _Atomic uint32_t *received = dist__calloc((size_t)in->size, sizeof *received);
  if (!sent || !received) { /* both or neither: the record's counts say "?" */
    dist__free((void *)sent);
    dist__free((void *)received);
    sent = received = NULL;
  }
  pthread_mutex_lock(&dist__mon.mu);
  mon_group *g = free_slot(ev->group_id);
  if (!g) {
    pthread_mutex_unlock(&dist__mon.mu);
    dist__free(granks);
    dist__free((void *)sent);
    dist__free((void *)received);
    DIST_LOG(INFO, MON, "group %d (%s) is beyond the %d groups the monitor follows",
             ev->group_id, in->name, MON_MAX_GROUPS);
    return;
  }
  dist__free(g->diag);
  dist__mon_stats_free(g);
  free_peer_tables(g);
  memset(g, 0, sizeof *g);
  g->gid = ev->group_id;
  g->pg = ev->pg;
  snprintf(g->name, sizeof g->name, "%s", in->name ? in->name : "");
  snprintf(g->desc, sizeof g->desc, "%s", in->desc ? in->desc : "");
  g->size = in->size;
  g->rank = in->rank;
  pthread_mutex_lock(&dist__mon_peers_mu);
  g->granks = granks;
  g->p2p_sent = sent;
  g->p2p_received = received;
  pthread_mutex_unlock(&dist__mon_peers_mu);
  g->timeout_ms = in->timeout_ms;
  atomic_store_explicit(&g->nm_seen, dist__pg_non_member_calls(NULL, NULL),
                        memory_order_relaxed); /* calls before it existed are not its */
  if (dist__mon.detail && dist__mon_stats_alloc(g) != DIST_OK)
    DIST_LOG(WARNING, MON, "no memory for group %d's statistics; it has none", g->gid);
  atomic_store_explicit(&g->live, 1, memory_order_release);
  atomic_store_explicit(&dist__mon.lib_ns, dist__now_ns(), memory_order_relaxed);
  publish_groups();
  pthread_mutex_unlock(&dist__mon.mu);
}

static void on_destroyed(const dist_event *ev) {
  pthread_mutex_lock(&dist__mon.mu);
  mon_group *g = slot_of(ev->group_id);
  if (!g) {
    pthread_mutex_unlock(&dist__mon.mu);
    return;
  }
  atomic_store(&g->live, 0);
  atomic_store_explicit(&dist__mon.lib_ns, dist__now_ns(), memory_order_relaxed);
  if (ev->group_id > 0) { /* a user group: its record says so ("d" line) */
    atomic_store(&g->destroy_caller, (uintptr_t)ev->caller);
    atomic_store(&g->destroyed_ms, dist__mon_wall_ms(dist__now_ns()));
  }
  publish_groups();
  g->pg = NULL;
  if (g->stats && dist__mon.on)
    dist__mon_stats_end(g, ev->group);
  free_peer_tables(g);
  pthread_mutex_lock(&dist__mon_diag_mu);
  dist__free(g->diag);
  g->diag = NULL;
  pthread_mutex_unlock(&dist__mon_diag_mu);
  dist__mon_stats_free(g);
  pthread_mutex_unlock(&dist__mon.mu);
}

/* --- operations (the hot path) ------------------------------------------- */

static int64_t coll_bytes(const dist_coll *c) {
  int64_t n = 0;
  for (size_t i = 0; i < c->n_inputs; i++)
    n += (int64_t)dist_tensor_nbytes(&c->inputs[i]);
  return n;
}

/* The global rank a point-to-point operation waits on (MON_PEER_*). */
static int global_peer(const mon_group *g, int peer) {
  return peer >= 0 && peer < g->size ? g->granks[peer] : peer == MON_PEER_MANY ? peer
                                                                              : MON_PEER_NONE;
}

/* The one peer of c's sends (is_send) or receives in a batch: NONE when
 * it has none, MANY when several. */
static int batch_peer(const dist_coll *c, bool is_send) {
  int peer = MON_PEER_NONE;
  for (size_t i = 0; i < c->n_p2p; i++)
    if (c->p2p[i].is_send == is_send && c->p2p[i].peer != peer)
      peer = peer == MON_PEER_NONE ? c->p2p[i].peer : MON_PEER_MANY;
  return peer;
}

/* A send's or receive's peer (*peer2 NONE). A batch (mon_record.h): the
 * one peer of its receives, which its end waits for, and in *peer2 the
 * one peer of its sends when another, which it may wait for too (a send
 * the peer has not taken yet); a batch of sends alone: their peer. */
static int p2p_peer(const mon_group *g, const dist_coll *c, int *peer2) {
  int peer = MON_PEER_NONE;
  *peer2 = MON_PEER_NONE;
  if (c->kind == DIST_OP_SEND || c->kind == DIST_OP_RECV) {
    peer = c->root;
  } else if (c->kind == DIST_OP_BATCH_P2P && c->n_p2p) {
    int from = batch_peer(c, false), to = batch_peer(c, true);
    peer = from != MON_PEER_NONE ? from : to;
    if (from != MON_PEER_NONE && to != from)
      *peer2 = global_peer(g, to);
  }
  return global_peer(g, peer);
}

/* Counts one half of c to or from group rank peer and returns its number
 * (this rank's n-th send to it, or receive from it); 0 when not counted
 * (any source, no memory). */
static uint32_t count_half(mon_group *g, int peer, bool send) {
  _Atomic uint32_t *count = send ? g->p2p_sent : g->p2p_received;
  if (peer < 0 || peer >= g->size || !count) {
    if (!send && peer == DIST_ANY_SOURCE)
      atomic_store_explicit(&g->p2p_any, 1, memory_order_relaxed);
    return 0;
  }
  return atomic_fetch_add_explicit(&count[peer], 1, memory_order_relaxed) + 1;
}

/* Adds half (peer, send, n, tag) to op's parts: one per direction and
 * peer, the latest number and tag kept. */
static void add_part(mon_op *op, int peer, bool send, uint32_t n, int tag) {
  int k = atomic_load_explicit(&op->n_parts, memory_order_relaxed);
  int at = k < MON_PARTS_MAX ? k : -1;
  for (int i = 0; i < k && i < MON_PARTS_MAX; i++) {
    mon_rec_part p = mon_part_unpack(atomic_load_explicit(&op->parts[i], memory_order_relaxed));
    if (p.peer == peer && p.send == send) {
      at = i;
      break;
    }
  }
  if (at >= 0) {
    atomic_store_explicit(&op->parts[at], mon_part_pack(peer, send, n), memory_order_relaxed);
    atomic_store_explicit(&op->part_tags[at], tag, memory_order_relaxed);
  }
  if (at == k || at < 0)
    atomic_store_explicit(&op->n_parts, k + 1 <= MON_PARTS_MAX ? k + 1 : MON_PARTS_MAX + 1,
                          memory_order_relaxed);
}

/* Counts c's halves on g and keeps them as op's parts (mon_record.h): what
 * lets a peer's record tell a half it never issued from one it took, and
 * a send's or receive's peer-before (its count with that peer). A
 * collective with a root keeps its root (a part of its own kind), so
 * members that all entered one broadcast with different roots are told
 * apart. */
static void note_parts(mon_group *g, mon_op *op, const dist_coll *c) {
  atomic_store_explicit(&op->n_parts, 0, memory_order_relaxed);
  atomic_store_explicit(&op->root, -1, memory_order_relaxed);
  atomic_store_explicit(&op->peer_before, -1, memory_order_relaxed);
  if (!c)
    return;
  if (!dist__mon_is_p2p((int)c->kind) && c->root >= 0 && c->root < g->size)
    atomic_store_explicit(&op->root, c->root, memory_order_relaxed);
  if (c->kind == DIST_OP_SEND || c->kind == DIST_OP_RECV) {
    bool send = c->kind == DIST_OP_SEND;
    uint32_t n = count_half(g, c->root, send);
    if (n) { /* its n-th with that peer: it had one before, with any tag, when n > 1 */
      add_part(op, c->root, send, n, c->tag);
      atomic_store_explicit(&op->peer_before, n > 1, memory_order_relaxed);
    }
  } else if (c->kind == DIST_OP_BATCH_P2P) {
    for (size_t i = 0; i < c->n_p2p; i++) {
      uint32_t n = count_half(g, c->p2p[i].peer, c->p2p[i].is_send);
      if (n)
        add_part(op, c->p2p[i].peer, c->p2p[i].is_send, n, c->p2p[i].tag);
    }
  }
}

/* Whether this is g's first operation issued from call site caller (1)
 * or not (0); -1 when that cannot be told (no caller, or the set is
 * full). A rank that deadlocks at a site it never called from before took
 * a branch its earlier steps did not, while its partner in the cycle
 * calls as it always did (mon_order.c dist__mon_prefer_fresh). */
static int note_site(mon_group *g, uintptr_t caller) {
  if (!caller)
    return -1;
  uint64_t h = (((uint64_t)caller >> 2) * 0x9E3779B97F4A7C15ull) >> 40; /* the high bits */
  for (unsigned i = 0; i < MON_SITES; i++) {
    _Atomic uintptr_t *slot = &g->sites[(h + i) & (MON_SITES - 1)];
    uintptr_t was = atomic_load_explicit(slot, memory_order_relaxed);
    if (was == caller)
      return 0;
    if (was == 0) {
      if (atomic_compare_exchange_strong_explicit(slot, &was, caller, memory_order_relaxed,
                                                  memory_order_relaxed))
        return 1;
      if (was == caller) /* another thread of this rank, from the same site */
        return 0;
    }
  }
  return -1;
}

/* Adds h (never 0) to an open-addressed set of MON_TRANS hashes: 1 when it
 * was there, 0 when added, -1 when the set is full. */
static int set_note(_Atomic uint64_t *set, uint64_t h) {
  uint64_t at = (h * 0x9E3779B97F4A7C15ull) >> 56; /* the high bits: a raw signature's
                                                      low ones repeat */
  for (unsigned i = 0; i < MON_TRANS; i++) {
    _Atomic uint64_t *slot = &set[(at + i) & (MON_TRANS - 1)];
    uint64_t was = atomic_load_explicit(slot, memory_order_relaxed);
    if (was == h)
      return 1;
    if (was == 0 && (atomic_compare_exchange_strong_explicit(slot, &was, h, memory_order_relaxed,
                                                             memory_order_relaxed) ||
                     was == h))
      return was == h;
  }
  return -1;
}

static uint64_t mix64(uint64_t h, uint64_t v) {
  h ^= v + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2);
  return h * 0xFF51AFD7ED558CCDull;
}

/* A send's or receive's signature: where it was called, what, to or from
 * whom, with which tag (never 0). A batch's mixes in every half (peer,
 * direction, tag) in the order given: a ring step that sends one
 * micro-batch with another tag is a step its rank never took, although
 * its call site and first peer are the usual ones. */
static uint64_t p2p_sig(const dist_event *ev, int peer) {
  const dist_coll *c = ev->coll;
  uint64_t h = mix64((uint64_t)(uintptr_t)ev->caller, (uint64_t)c->kind);
  h = mix64(mix64(h, (uint64_t)(uint32_t)peer), (uint64_t)(uint32_t)c->tag);
  for (size_t i = 0; c->kind == DIST_OP_BATCH_P2P && i < c->n_p2p; i++) {
    const dist_coll_p2p *p = &c->p2p[i];
    h = mix64(h, ((uint64_t)(uint32_t)p->peer << 1 | p->is_send) ^ (uint64_t)p->tag << 33);
  }
  return h | 1;
}

/* Any other operation's: its call site and kind as they are, which tells
 * it apart as well (an odd word: never a mixed one of p2p_sig but by
 * chance) without mixing on every collective's path. */
static uint64_t plain_sig(const dist_event *ev) {
  uint64_t kind = ev->coll ? (uint64_t)ev->coll->kind : 0xff;
  return (((uint64_t)(uintptr_t)ev->caller << 8) ^ kind) | 1;
}

/* Whether a send or receive (signature sig) is a step this rank never
 * took on the group: from the call before it (the group's last_sig) to
 * it, although a send or receive followed that call before (1); 0 when
 * it took that step before; -1 unknown (no call before, one nothing
 * followed yet, or the sets are full). A pipeline stage that skipped a
 * microbatch, or sends one with another tag, comes to its blocked call
 * from a call its earlier steps went on from otherwise, while its partner
 * is where it always was (mon_order.c dist__mon_prefer_novel). */
static int note_step(mon_group *g, uint64_t sig) {
  uint64_t prev = atomic_exchange_explicit(&g->last_sig, sig, memory_order_relaxed);
  if (!prev)
    return -1;
  int from = set_note(g->step_from, prev);
  int step = set_note(g->steps, mix64(prev, sig) | 1);
  if (from < 0 || step < 0 || from == 0)
    return -1;
  return step == 0;
}

/* Whether c runs on CUDA tensors (a call has tensors on one device). */
static int on_cuda(const dist_coll *c) {
  const dist_tensor *t = c->n_inputs ? &c->inputs[0] : c->n_outputs ? &c->outputs[0]
                         : c->n_p2p ? &c->p2p[0].tensor : NULL;
  return t && t->device.type == DIST_DEVICE_CUDA;
}

/* The ring's key of ev's operation: its issue ordinal (mon_int.h). */
static uint64_t ev_ord(const dist_event *ev) {
  return ev->coll && ev->coll->ord ? ev->coll->ord : ev->seq;
}

/* g->done = max(g->done, to); ends run on several threads (a backend's
 * progress thread, the caller's), hence the loop. */
static void raise_done(mon_group *g, uint64_t to) {
  uint64_t d = atomic_load_explicit(&g->done, memory_order_relaxed);
  while (d < to && !atomic_compare_exchange_weak_explicit(&g->done, &d, to,
                                                          memory_order_release,
                                                          memory_order_relaxed))
    ;
}

/* Operation seq ended: the watermark moves over every ended operation
 * that follows it without a gap, so an operation still in flight (an isend
 * whose later irecv completed first) stays the one the group waits in. */
static void end_op(mon_group *g, mon_op *op, uint64_t seq) {
  if (!seq)
    return; /* a call that never started has no number */
  if (atomic_load_explicit(&op->seq, memory_order_acquire) == seq)
    atomic_store_explicit(&op->ended, 1, memory_order_release);
  else if (seq > atomic_load_explicit(&g->done, memory_order_relaxed) + MON_RING)
    raise_done(g, seq); /* no longer in the ring: it cannot be followed */
  uint64_t d = atomic_load_explicit(&g->done, memory_order_acquire);
  for (;;) {
    mon_op *next = &g->ring[(d + 1) % MON_RING];
    if (atomic_load_explicit(&next->seq, memory_order_acquire) != d + 1 ||
        !atomic_load_explicit(&next->ended, memory_order_acquire))
      return;
    if (atomic_compare_exchange_weak_explicit(&g->done, &d, d + 1, memory_order_release,
                                              memory_order_acquire))
      d++;
  }
}

/* A call on a group this rank is not a member of since its last operation
 * on g (one relaxed load when none): noted with the collective it came
 * just before (mon_int.h nm_*). */
static void note_non_member(mon_group *g, const dist_event *ev) {
  if (dist__pg_non_member_calls(NULL, NULL) == atomic_load_explicit(&g->nm_seen,
                                                                      memory_order_relaxed))
    return;
  dist_op_kind k = DIST_OP_BARRIER;
  const void *caller = NULL;
  atomic_store_explicit(&g->nm_seen, dist__pg_non_member_calls(&k, &caller),
                        memory_order_relaxed);
  if (!ev->coll || dist__mon_is_p2p((int)ev->coll->kind))
    return;
  atomic_store_explicit(&g->nm_kind, (int)k, memory_order_relaxed);
  atomic_store_explicit(&g->nm_caller, (uintptr_t)caller, memory_order_relaxed);
  atomic_store_explicit(&g->nm_num, ev->seq, memory_order_release);
}

static void on_enqueued(mon_group *g, const dist_event *ev) {
  uint64_t seq = ev_ord(ev);
  mon_op *op = &g->ring[seq % MON_RING];
  atomic_store_explicit(&op->seq, 0, memory_order_relaxed);
  atomic_store_explicit(&op->kind, ev->coll ? (int)ev->coll->kind : -1, memory_order_relaxed);
  atomic_store_explicit(&op->caller, (uintptr_t)ev->caller, memory_order_relaxed);
  atomic_store_explicit(&op->t_enq_ns, ev->t_ns, memory_order_relaxed);
  atomic_store_explicit(&op->t_start_ns, 0, memory_order_relaxed);
  atomic_store_explicit(&op->timeout_ms, ev->coll ? ev->coll->timeout_ms : 0,
                        memory_order_relaxed);
  int peer2 = MON_PEER_NONE;
  atomic_store_explicit(&op->peer, ev->coll ? p2p_peer(g, ev->coll, &peer2) : MON_PEER_NONE,
                        memory_order_relaxed);
  atomic_store_explicit(&op->peer2, peer2, memory_order_relaxed);
  atomic_store_explicit(&op->cuda, ev->coll ? on_cuda(ev->coll) : 0, memory_order_relaxed);
  atomic_store_explicit(&op->tag, ev->coll ? ev->coll->tag : 0, memory_order_relaxed);
  atomic_store_explicit(&op->pair, ev->coll ? ev->coll->pair_seq : 0, memory_order_relaxed);
  note_parts(g, op, ev->coll);
  note_non_member(g, ev);
  atomic_store_explicit(&op->fresh, note_site(g, (uintptr_t)ev->caller), memory_order_relaxed);
  if (ev->coll && dist__mon_is_p2p((int)ev->coll->kind)) {
    uint64_t sig = p2p_sig(ev, atomic_load_explicit(&op->peer, memory_order_relaxed));
    atomic_store_explicit(&op->novel, note_step(g, sig), memory_order_relaxed);
  } else {
    atomic_store_explicit(&op->novel, -1, memory_order_relaxed);
    atomic_store_explicit(&g->last_sig, plain_sig(ev), memory_order_relaxed);
  }
  atomic_store_explicit(&op->ended, 0, memory_order_relaxed);
  atomic_store_explicit(&op->failed, 0, memory_order_relaxed);
  atomic_store_explicit(&op->sync,
                        ev->coll && (!(ev->coll->flags & DIST_COLL_ASYNC) ||
                                     (ev->coll->flags & DIST_COLL_WAITED)),
                        memory_order_relaxed);
  uint64_t ord = 0;
  if (ev->coll && !dist__mon_is_p2p((int)ev->coll->kind)) {
    ord = atomic_load_explicit(&g->colls_enq, memory_order_relaxed) + 1;
    atomic_store_explicit(&g->colls_enq, ord, memory_order_relaxed);
  }
  atomic_store_explicit(&op->coll, ord, memory_order_relaxed);
  atomic_store_explicit(&op->num, ev->seq, memory_order_relaxed);
  if (dist__mon.detail && ev->coll)
    atomic_store_explicit(&op->bytes, coll_bytes(ev->coll), memory_order_relaxed);
  atomic_store_explicit(&op->seq, seq, memory_order_release);
  atomic_store_explicit(&g->tid, my_tid(), memory_order_relaxed);
  atomic_store_explicit(&g->enq, seq, memory_order_release);
  /* More operations in flight than the ring holds: the oldest is no
   * longer followed, so the watermark moves past it (its end goes unseen). */
  if (seq > MON_RING)
    raise_done(g, seq - MON_RING);
}

static void on_started(mon_group *g, const dist_event *ev) {
  uint64_t seq = ev_ord(ev);
  mon_op *op = &g->ring[seq % MON_RING];
  atomic_store_explicit(&op->t_start_ns, ev->t_ns, memory_order_relaxed);
  atomic_store_explicit(&g->started, seq, memory_order_relaxed);
}

/* A timed-out operation fails with the diagnosis the watchdog has made of
 * the stall (when it made one before the timeout). */
static void set_timeout_message(mon_group *g, const dist_event *ev) {
  pthread_mutex_lock(&dist__mon_diag_mu);
  const char *d = g->diag;
  if (d && strncmp(d, "stall ", 6) == 0) { /* a hang now, or members' desync */
    char msg[DIST_ERRMSG_LEN];
    snprintf(msg, sizeof msg, "%s %s", g->verdict.desync ? "desync" : "hang", d + 6);
    dist_observer_set_message(ev, msg);
  } else if (d) {
    dist_observer_set_message(ev, d);
  }
  pthread_mutex_unlock(&dist__mon_diag_mu);
}

static void on_ended(mon_group *g, const dist_event *ev) {
  uint64_t seq = ev_ord(ev);
  mon_op *op = &g->ring[seq % MON_RING];
  if (atomic_load_explicit(&op->seq, memory_order_acquire) == seq && dist__mon.detail &&
      ev->kind == DIST_EV_OP_COMPLETED) {
    int64_t t0 = atomic_load_explicit(&op->t_start_ns, memory_order_relaxed);
    dist__mon_stats_op(g, seq, ev->coll ? (int)ev->coll->kind : -1,
                       atomic_load_explicit(&op->bytes, memory_order_relaxed),
                       t0 ? t0 : atomic_load_explicit(&op->t_enq_ns, memory_order_relaxed),
                       ev->t_ns);
  }
  atomic_store_explicit(&g->last_kind, ev->coll ? (int)ev->coll->kind : -1,
                        memory_order_relaxed);
  atomic_store_explicit(&g->last_caller, (uintptr_t)ev->caller, memory_order_relaxed);
  atomic_store_explicit(&g->last_num, ev->seq, memory_order_relaxed);
  atomic_store_explicit(&g->last_done_ns, ev->t_ns, memory_order_relaxed);
  uint64_t ord = atomic_load_explicit(&op->seq, memory_order_acquire) == seq
                     ? atomic_load_explicit(&op->coll, memory_order_relaxed) : 0;
  if (ord > atomic_load_explicit(&g->colls_done, memory_order_relaxed))
    atomic_store_explicit(&g->colls_done, ord, memory_order_release);
  atomic_store_explicit(&g->last_seq, seq, memory_order_relaxed);
  if (__builtin_expect(ev->kind != DIST_EV_OP_COMPLETED, 0) &&
      atomic_load_explicit(&op->seq, memory_order_acquire) == seq)
    atomic_store_explicit(&op->failed, 1, memory_order_relaxed); /* before end_op publishes it */
  end_op(g, op, seq);
  if (__builtin_expect(ev->kind == DIST_EV_OP_COMPLETED, 1))
    return;
  if (ev->kind == DIST_EV_OP_TIMED_OUT) {
    set_timeout_message(g, ev);
    atomic_store(&g->failed_seq, seq);
    atomic_store(&g->timed_out, 1);
    dist__mon_watchdog_kick();
  } else if (ev->status == DIST_E_PEER_LOST) {
    atomic_store(&g->failed_seq, seq);
    atomic_store(&g->failed_rc, ev->status);
    dist__mon_watchdog_kick();
  }
}

/* A call refused before it started: kept for the record (mon_progress.c),
 * so a rank that exits on the error is named at that call, and a rank
 * that ignored it, where others wait for it, is said to have had it
 * refused. Rare: a lock. */
static void on_rejected(const dist_event *ev) {
  mon_refused r = {.on = true, .gid = ev->group_id, .kind = ev->coll ? (int)ev->coll->kind : -1,
                   .num = ev->seq, .caller = (uintptr_t)ev->caller, .t_ns = ev->t_ns};
  snprintf(r.msg, sizeof r.msg, "%s", ev->message ? ev->message : "");
  pthread_mutex_lock(&dist__mon_refused_mu);
  dist__mon.refused = r;
  pthread_mutex_unlock(&dist__mon_refused_mu);
}

static void on_event(void *ctx, const dist_event *ev) {
  (void)ctx;
  mon_group *g;
  switch (ev->kind) {
  case DIST_EV_OP_ENQUEUED:
    if ((g = slot_of(ev->group_id)))
      on_enqueued(g, ev);
    return;
  case DIST_EV_OP_STARTED:
    if ((g = slot_of(ev->group_id)))
      on_started(g, ev);
    return;
  case DIST_EV_OP_ISSUED:
    if ((g = slot_of(ev->group_id))) {
      on_enqueued(g, ev);
      on_started(g, ev);
    }
    return;
  case DIST_EV_OP_COMPLETED:
  case DIST_EV_OP_FAILED:
  case DIST_EV_OP_TIMED_OUT:
    if ((g = slot_of(ev->group_id)))
      on_ended(g, ev);
    return;
  case DIST_EV_PEER_LOST:
    if ((g = slot_of(ev->group_id))) {
      atomic_store(&g->failed_rc, DIST_E_PEER_LOST);
      dist__mon_watchdog_kick();
    }
    return;
  case DIST_EV_GROUP_CREATED: on_created(ev); return;
  case DIST_EV_GROUP_DESTROYED: on_destroyed(ev); return;
  case DIST_EV_OP_REJECTED: on_rejected(ev); return;
  default: return;
  }
}

/* --- life of the monitor -------------------------------------------------- */

/* DIST_STALL_S: seconds, fractions accepted ("0.5"). */
static int64_t stall_from_env(void) {
  const char *v = dist__getenv("DIST_STALL_S");
  if (!v)
    return 0;
  char *end;
  double s = strtod(v, &end);
  if (*end || !(s > 0) || s > 1e6) {
    DIST_LOG(WARNING, MON, "DIST_STALL_S=%s is not a number of seconds > 0; using a quarter "
             "of each group's timeout", v);
    return 0;
  }
  return (int64_t)(s * 1000);
}

static void read_config(const dist_pg_info *dg) {
  mon_state *m = &dist__mon;
  m->stall_ms = stall_from_env();
  int64_t v = 1;
  if (dist__env_int("DIST_ABORT_ON_TIMEOUT", 0, 1, 1, &v) != DIST_OK)
    DIST_LOG(WARNING, MON, "%s; using 1", dist_last_errmsg());
  m->abort_on_timeout = v != 0;
  v = 0;
  if (dist__env_int("DIST_SHOW_STACKTRACES", 0, 1, 0, &v) != DIST_OK)
    DIST_LOG(WARNING, MON, "%s; using 0", dist_last_errmsg());
  m->stacks = v != 0;
  v = 1000;
  if (dist__env_int("DIST_STATS_EVERY", 1, 1 << 24, 1000, &v) != DIST_OK)
    DIST_LOG(WARNING, MON, "%s; using 1000", dist_last_errmsg());
  m->stats_every = (int)v;
  v = 60;
  if (dist__env_int("DIST_STRAGGLER_S", 0, 1 << 24, 60, &v) != DIST_OK)
    DIST_LOG(WARNING, MON, "%s; using 60", dist_last_errmsg());
  m->straggler_s = v;
  v = 1;
  if (dist__env_int("DIST_EARLY_VERDICT", 0, 1, 1, &v) != DIST_OK)
    DIST_LOG(WARNING, MON, "%s; using 1", dist_last_errmsg());
  m->early = v != 0;
  m->detail = dist_get_debug_level() >= DIST_DEBUG_DETAIL;
  int64_t stall = m->stall_ms ? m->stall_ms : dg->timeout_ms / 4;
  m->tick_ms = stall / 8 < 20 ? 20 : stall / 8 > 250 ? 250 : stall / 8;
}

/* Records of one init are apart from an earlier init's on the same store:
 * every rank adds 1 to a counter once per init, in step (the rendezvous
 * orders inits), so (value - 1) / world numbers this init. */
static int make_prefix(dist_store *s, const dist_pg_info *dg) {
  const char *job = dist_get_job_id();
  char key[160];
  snprintf(key, sizeof key, "dist/mon/%s/inits", job ? job : "job");
  int64_t n;
  int rc = dist_store_add(s, key, 1, &n);
  if (rc != DIST_OK)
    return rc;
  snprintf(dist__mon.prefix, sizeof dist__mon.prefix, "dist/mon/%s/%lld/", job ? job : "job",
           (long long)((n - 1) / dg->size));
  return DIST_OK;
}

static bool registered_atexit;

/* A rank that calls exit() while its default group lives tells the others
 * (they would otherwise wait for it until the timeout). */
static void at_exit(void) {
  mon_state *m = &dist__mon;
  if (!m->on || !m->store || getpid() != m->pid)
    return; /* a child forked after init owns neither the rank nor its connection */
  dist__mon_watchdog_stop();
  dist__mon_publish(m->store, "exit", "called exit() with its process group live");
}

/* A thread blocks in dist_work_wait for c (entering), or stopped: while it
 * waits, the asynchronous operation counts as a synchronous call (sync in
 * the record), so a deadlock through it can be proven (mon_cycle.c). */
static void on_work_wait(dist_pg *pg, const dist_coll *c, bool entering) {
  const dist_pg_info *in = dist_pg_get_info(pg);
  mon_group *g = in ? slot_of(in->group_id) : NULL;
  if (!g || !c->ord)
    return;
  mon_op *op = &g->ring[c->ord % MON_RING];
  if (atomic_load_explicit(&op->seq, memory_order_acquire) == c->ord)
    atomic_store_explicit(&op->sync, entering || (c->flags & DIST_COLL_WAITED) != 0,
                          memory_order_relaxed);
}

/* A hash of a whole member list (ascending global ranks), never 0. */
static uint32_t list_hash(const int *ranks, int n) {
  uint32_t h = 2166136261u; /* FNV-1a over the ranks */
  for (int i = 0; i < n; i++)
    for (int b = 0; b < 32; b += 8)
      h = (h ^ (((uint32_t)ranks[i] >> b) & 0xffu)) * 16777619u;
  return h ? h : 1;
}

/* The list as ranges in buf (len bytes), "+" at the end when cut. */
static void members_cut(const int *ranks, int n, char *buf, size_t len) {
  dist__format_ranks(ranks, (size_t)(n > 0 ? n : 0), buf, len);
  if (strlen(buf) + 1 >= len) /* cut: say so */
    snprintf(buf + len - 2, 2, "+");
}

/* Keeps creation c, call k on its scope, among the latest (an "x" line):
 * the list this rank passed, member or not. */
static void note_made(mon_state *m, const dist__group_create *c, uint64_t k, uint32_t h) {
  pthread_mutex_lock(&m->create_mu);
  struct mon_made *x = &m->made[m->n_made++ % MON_MADE_MAX];
  x->scope = c->scope_gid;
  x->k = k;
  x->member = c->member;
  x->hash = h;
  x->caller = (uintptr_t)c->caller;
  members_cut(c->ranks, c->size, x->members, sizeof x->members);
  pthread_mutex_unlock(&m->create_mu);
}

/* A thread starts or stops creating a user group (core's hook): while it
 * waits for the other members, the record says so (mon_progress.c). The
 * last creation started is the one said when threads overlap. Every call
 * on a scope counts there, members of the new group or not, so a member
 * that skipped a creation shows a count behind the creator's number. */
static void on_group_create(const dist__group_create *c, bool entering) {
  mon_state *m = &dist__mon;
  if (!entering) {
    atomic_store_explicit(&m->lib_ns, dist__now_ns(), memory_order_relaxed);
    if (c->member && c->status == DIST_E_TIMEOUT) {
      /* said by the watchdog, which counts it out after: before the
       * program can exit on the error (at_exit stops the watchdog after
       * its last sweep), while the record still shows the creation */
      atomic_fetch_add_explicit(&m->create_timed_out, 1, memory_order_release);
      dist__mon_watchdog_kick();
    } else if (c->member) {
      atomic_fetch_sub_explicit(&m->creating, 1, memory_order_release);
    }
    return;
  }
  mon_group *sg = c->scope_gid >= 0 ? slot_of(c->scope_gid) : NULL;
  uint64_t k = sg ? atomic_fetch_add_explicit(&sg->creations, 1, memory_order_relaxed) + 1 : 0;
  uint32_t h = list_hash(c->ranks, c->size);
  if (sg)
    note_made(m, c, k, h);
  if (!c->member)
    return;
  char members[MON_MEMBERS_LEN];
  members_cut(c->ranks, c->size, members, sizeof members);
  atomic_store_explicit(&m->create_hash, h, memory_order_relaxed);
  pthread_mutex_lock(&m->create_mu);
  snprintf(m->create_call, sizeof m->create_call, "%s", c->call ? c->call : "");
  snprintf(m->create_members, sizeof m->create_members, "%s", members);
  pthread_mutex_unlock(&m->create_mu);
  atomic_store_explicit(&m->create_gid, c->group_id, memory_order_relaxed);
  atomic_store_explicit(&m->create_size, c->size, memory_order_relaxed);
  atomic_store_explicit(&m->create_scope, sg ? c->scope_gid : -1, memory_order_relaxed);
  atomic_store_explicit(&m->create_k, k, memory_order_relaxed);
  atomic_store_explicit(&m->create_since_ms, dist__mon_wall_ms(dist__now_ns()),
                        memory_order_relaxed);
  atomic_store_explicit(&m->create_caller, (uintptr_t)c->caller, memory_order_relaxed);
  atomic_fetch_add_explicit(&m->creating, 1, memory_order_release);
}

static int mon_init(void **ctx, const dist_pg_info *dg) {
  mon_state *m = &dist__mon;
  *ctx = m;
  dist_store *js = dist_get_default_store();
  if (!js)
    return DIST_E_INVAL;
  read_config(dg);
  struct timespec rt, mt;
  clock_gettime(CLOCK_REALTIME, &rt);
  clock_gettime(CLOCK_MONOTONIC, &mt);
  m->wall_off_ns = ((int64_t)rt.tv_sec - mt.tv_sec) * 1000000000LL + (rt.tv_nsec - mt.tv_nsec);
  m->rank = dg->global_rank;
  m->t_init_ns = dist__now_ns();
  atomic_store(&m->lib_ns, m->t_init_ns); /* init returns next */
  atomic_store(&m->writes, 0);
  m->world = dg->size;
  m->pid = getpid();
  m->main_tid = my_tid();
  m->stats_end_late = false;
  pthread_mutex_lock(&m->create_mu);
  m->n_made = 0; /* an earlier init's creations are not this one's */
  m->create_said_k = 0;
  m->create_next_read_ns = 0;
  pthread_mutex_unlock(&m->create_mu);
  snprintf(m->host, sizeof m->host, "%s", dist__hostname());
  m->stop = false;
  /* A group destroyed before a re-init is no group of this init, whose
   * ids start again: its "d" line would say a member left a new one. */
  for (int i = 0; i < MON_MAX_GROUPS; i++)
    if (!atomic_load(&m->groups[i].live))
      atomic_store(&m->groups[i].destroyed_ms, 0);
  int rc = dist_store_clone(js, &m->store);
  if (rc == DIST_OK)
    rc = make_prefix(m->store, dg);
  if (rc == DIST_OK) {
    dist_store_set_timeout(m->store, 2000);
    m->on = true;
    rc = dist__mon_publish(m->store, "run", "");
  }
  if (rc == DIST_OK)
    rc = dist__mon_watchdog_start();
  if (rc != DIST_OK) {
    m->on = false;
    dist_store_destroy(m->store);
    m->store = NULL;
    return rc;
  }
  dist__mon_stack_init();
  dist__set_work_wait_hook(on_work_wait);
  dist__set_group_create_hook(on_group_create);
  if (!registered_atexit)
    registered_atexit = atexit(at_exit) == 0;
  return DIST_OK;
}

static void mon_fini(void *ctx) {
  mon_state *m = ctx;
  dist__set_work_wait_hook(NULL);
  dist__set_group_create_hook(NULL);
  dist__mon_watchdog_stop();
  if (m->store)
    dist__mon_publish(m->store, "done", "");
  double secs = (double)(dist__now_ns() - m->t_init_ns) / 1e9;
  DIST_LOG(INFO, MON, "monitor: %ld progress writes to the store in %.1f s (%.2f a second)",
           atomic_load(&m->writes), secs, secs > 0 ? (double)atomic_load(&m->writes) / secs : 0);
  m->on = false;
  for (int i = 0; i < MON_MAX_GROUPS; i++)
    if (atomic_load(&m->groups[i].live)) {
      dist_event ev = {.kind = DIST_EV_GROUP_DESTROYED, .group_id = m->groups[i].gid};
      on_destroyed(&ev);
    }
  dist_store_destroy(m->store);
  m->store = NULL;
}

static const dist_observer mon_observer = {
    .abi_version = DIST_OBSERVER_ABI_VERSION,
    .name = "monitor",
    .event_mask = DIST_EV_BIT(DIST_EV_GROUP_CREATED) | DIST_EV_BIT(DIST_EV_GROUP_DESTROYED) |
                  DIST_EV_BIT(DIST_EV_OP_ENQUEUED) | DIST_EV_BIT(DIST_EV_OP_STARTED) |
                  DIST_EV_BIT(DIST_EV_OP_ISSUED) |
                  DIST_EV_BIT(DIST_EV_OP_COMPLETED) | DIST_EV_BIT(DIST_EV_OP_FAILED) |
                  DIST_EV_BIT(DIST_EV_OP_TIMED_OUT) | DIST_EV_BIT(DIST_EV_PEER_LOST) |
                  DIST_EV_BIT(DIST_EV_OP_REJECTED),
    .init = mon_init,
    .on_event = on_event,
    .fini = mon_fini,
};

__attribute__((constructor)) static void mon_register(void) {
  const char *v = getenv("DIST_MONITOR");
  if (v && strcmp(v, "0") == 0)
    return;
  dist__mon_crash_install();
  if (dist_observer_register(&mon_observer) != DIST_OK)
    fprintf(stderr, "libdist: the monitor could not register: %s\n", dist_last_errmsg());
}
