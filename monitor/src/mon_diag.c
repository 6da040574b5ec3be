/* mon_diag.c - the diagnosis of a stalled operation, from every rank's
 * progress record: who has not entered it and why (slow, blocked
 * elsewhere, exited, dead, not responding), what each last completed and
 * where; the wait-for cycles across groups are mon_cycle.c's. This file
 * holds the entry points (a stalled operation, a creation that timed out)
 * and the verdict they fill; the parts they call (mon_diag_int.h):
 *   mon_diag_words.c  the words reports use about a rank
 *   mon_diag_ends.c   where a rank's waits end, said and made the verdict
 *   mon_diag_pair.c   a send and a receive that should have matched
 *   mon_diag_held.c   a rank held in another group's operation, a root split
 *   mon_diag_left.c   a member that destroyed the group before the collective
 *   mon_diag_p2p.c    a stalled send or receive: what its peer is doing
 *
 * A rank R waits for rank Q when R's oldest operation in flight is
 * collective #s of group G and Q is a member of G (its record lists G)
 * that has not entered that collective: it has not reached #s, or its #s
 * is another operation (point-to-point and collectives share a group's
 * numbers, so ranks 0-1 in RECV #4 are not in the others' ALL_REDUCE #4);
 * or when R's oldest operation is a send or receive with Q that Q is not
 * in the other half of (a receive waits for a send). A cycle in that graph
 * is a deadlock; a rank that is merely idle (sleeping, computing) has no
 * outgoing edge, so an absence is never called a cycle. mon_waits.c finds
 * the edges, once per operation, so the walks (mon_cycle.c) stay linear in
 * the ranks. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mon_diag_int.h"

#define is_p2p dist__mon_is_p2p
#define is_in dist__mon_is_in
#define sec_word dist__mon_sec_word
#define outside_words dist__mon_outside_words
#define say_absent dist__mon_say_absent
#define say_end dist__mon_say_end
#define say_ends dist__mon_say_ends
#define say_roots dist__mon_say_roots
#define waits_end_at dist__mon_waits_end_at
#define diagnose_p2p dist__mon_diagnose_p2p
#define say_held dist__mon_say_held
#define say_root_split dist__mon_say_root_split
#define say_before dist__mon_say_before
typedef mon_at_op at_op;

/* A member that left cleanly before entering #seq (it destroyed its
 * process group, or distrun saw it exit with code 0) ran out of calls: the
 * ranks' calls differ in number (a skipped call, or an early exit). */
static bool ran_out(const mon_rec *r, int gid, at_op o) {
  if (!r->present || is_in(dist__mon_rec_group(r, gid), o))
    return false;
  if (r->died[0])
    return strcmp(r->died, "exited with code 0") == 0;
  return strcmp(r->state, "done") == 0;
}

/* Whether every member missing from #seq ran out of calls (named in who). */
static bool all_ran_out(const mon_group *g, at_op o, const mon_rec *recs, char *who,
                        size_t len) {
  int out[64], n = 0, missing = 0;
  for (int i = 0; i < g->size; i++) {
    int r = g->granks[i];
    if (r < 0 || r >= dist__mon.world || r == dist__mon.rank ||
        is_in(dist__mon_rec_group(&recs[r], g->gid), o))
      continue;
    missing++;
    if (ran_out(&recs[r], g->gid, o) && n < 64)
      out[n++] = r;
  }
  if (!missing || n != missing)
    return false;
  dist__format_ranks(out, (size_t)n, who, len);
  return true;
}

bool dist__mon_recs_fresh(const mon_group *g, const mon_rec *recs, int64_t since_ms) {
  int64_t now_ms = dist__mon_wall_ms(dist__now_ns());
  for (int i = 0; i < g->size; i++) {
    const mon_rec *r = &recs[g->granks[i]];
    char how[320];
    if (g->granks[i] != dist__mon.rank && r->present && r->hb_ms < since_ms &&
        !dist__mon_gone_how(r, now_ms, how, sizeof how))
      return false;
  }
  return true;
}

bool dist__mon_recs_settled(const mon_group *g, const mon_rec *recs) {
  const char *l = getenv("DIST_LAUNCHER");
  if (!l || strcmp(l, "distrun") != 0)
    return true;
  for (int i = 0; i < g->size; i++) {
    const mon_rec *r = &recs[g->granks[i]];
    if (g->granks[i] == dist__mon.rank || r->died[0] || !r->present)
      continue;
    /* A fresh record's process reads 'R' while it is a zombie (the read
     * asks only whether the pid exists): a rank killed a moment ago, which
     * distrun has not reaped, would be judged alive. Asked in full here,
     * on the failure path only. */
    char st = r->proc_state == 'R' ? dist__mon_proc_state(r) : r->proc_state;
    if (st == 'X' || st == 'Z' || strcmp(r->state, "exit") == 0)
      return false;
  }
  return true;
}

/* The verdict names ranks[0..n) at this rank's own operation (num of
 * kind in group g, called from site). */
void dist__mon_verdict_here(mon_verdict *v, const mon_group *g, int kind, uint64_t num,
                            const char *site, const int *ranks, int n) {
  v->n = n;
  memcpy(v->culprits, ranks, sizeof(int) * (size_t)n);
  v->gid = g->gid;
  snprintf(v->gname, sizeof v->gname, "%s", g->desc[0] ? g->desc : g->name);
  v->kind = kind;
  v->seq = num;
  snprintf(v->site, sizeof v->site, "%s", site);
}

/* The verdict names the operation b (of a waiter, or the culprit's own)
 * and the culprit's call site. */
void dist__mon_verdict_at(mon_verdict *v, const mon_rec_group *b, const char *site) {
  if (!b)
    return;
  v->gid = b->gid;
  snprintf(v->gname, sizeof v->gname, "%s", b->desc);
  v->kind = b->kind;
  v->seq = dist__mon_rec_num(b);
  snprintf(v->site, sizeof v->site, "%s", site ? site : "");
}

char *dist__mon_diagnose_creation(const mon_rec *recs, mon_verdict *v) {
  int me = dist__mon.rank, skip[MON_CULPRITS_MAX];
  int n = dist__mon_create_skippers(recs, me, skip, MON_CULPRITS_MAX);
  if (!n && (dist__mon_create_order_odd(recs, me) || dist__mon_create_local_odd(recs, me)))
    skip[n++] = me; /* this rank made its creations in another order: it says so itself, in
                       case the rank waiting for it is gone before it can */
  const size_t len = 16384;
  char *buf = n ? dist__malloc(len) : NULL;
  if (!buf)
    return NULL;
  size_t off = 0;
  const mon_rec_create *cr = &recs[me].creating;
  int64_t now_ms = dist__mon_wall_ms(dist__now_ns());
  char s[32], ow[512];
  dist__appendf(buf, len, &off, "hang creating group %d (%d ranks) in %s: waited %s, its "
                "timeout\n", cr->gid, cr->size, cr->call[0] ? cr->call : "dist_new_group",
                sec_word(now_ms - cr->since_ms, s, sizeof s));
  dist__appendf(buf, len, &off, "  rank %d is %s\n", me,
                outside_words(recs, me, 0, now_ms, ow, sizeof ow));
  for (int i = 0; i < n; i++) {
    char how[320];
    say_end(recs, skip[i], dist__mon_gone_how(&recs[skip[i]], now_ms, how, sizeof how), now_ms,
            buf, len, &off);
  }
  /* the group and its creator's call, no operation (as say_roots does);
   * of a rank that created its groups in another order, its own */
  if (n == 1 && (dist__mon_create_order_odd(recs, skip[0]) ||
                 dist__mon_create_local_odd(recs, skip[0])))
    cr = &recs[skip[0]].creating;
  *v = (mon_verdict){.gid = cr->gid, .kind = -1, .n = n};
  memcpy(v->culprits, skip, sizeof(int) * (size_t)v->n);
  snprintf(v->gname, sizeof v->gname, "g%d", cr->gid);
  snprintf(v->site, sizeof v->site, "%s", cr->site);
  if (off && buf[off - 1] == '\n')
    buf[--off] = '\0';
  return buf;
}

/* This rank's record as the diagnosis reads it: in the operation it
 * diagnoses. Its own wait may have timed out a moment before (then the
 * record shows it in no operation, and waits that go through it would end
 * at it, "busy outside the library", instead of going on to the peer it
 * waited for). Left as it is when it shows the rank in an operation. */
static void hold_self(const mon_group *g, uint64_t seq, mon_rec *recs) {
  mon_rec *me = &recs[dist__mon.rank];
  mon_rec_group *rg = (mon_rec_group *)dist__mon_rec_group(me, g->gid);
  if (!rg || dist__mon_blocked_in(me))
    return;
  const mon_op *op = &g->ring[seq % MON_RING];
  rg->kind = atomic_load(&op->kind);
  rg->enq = rg->done + 1;
  rg->since_ms = dist__mon_wall_ms(atomic_load(&op->t_enq_ns));
  rg->peer = atomic_load(&op->peer);
  rg->peer2 = atomic_load(&op->peer2);
  rg->tag = atomic_load(&op->tag);
  rg->pair = atomic_load(&op->pair);
  rg->peer_before = atomic_load(&op->peer_before);
  rg->coll = atomic_load(&op->coll);
  rg->sync = atomic_load(&op->sync) != 0;
  rg->num = dist__mon_num(g, seq);
  rg->has_num = true;
  dist__mon_symbolize(atomic_load(&op->caller), rg->site, sizeof rg->site);
}

/* The verdict names the operation the culprit's peers wait for it in;
 * when its first culprit is in no operation but blocked in a store call
 * of the program's (its record's "w" line), the line named is that
 * call's, where the rank is, and the field says so. */
static void place_in_store(const mon_rec *recs, mon_verdict *v) {
  if (!v->n || v->kind < 0)
    return;
  const mon_rec *r = &recs[v->culprits[0]];
  if (!r->store.on || r->creating.on || dist__mon_blocked_in(r))
    return;
  snprintf(v->site, sizeof v->site, "%s", r->store.site);
  snprintf(v->field, sizeof v->field, "store wait");
}

char *dist__mon_diagnose(const mon_group *g, uint64_t seq, mon_rec *recs, const char *what,
                         bool *lowest, int *n_cycles, mon_verdict *v) {
  *v = (mon_verdict){.gid = -1, .kind = -1};
  const size_t len = 16384;
  char *buf = dist__malloc(len);
  if (!buf)
    return NULL;
  size_t off = 0;
  int64_t now_ms = dist__mon_wall_ms(dist__now_ns());
  const mon_op *op = &g->ring[seq % MON_RING];
  int kind = atomic_load(&op->kind);
  at_op me = {seq, atomic_load(&op->coll), kind};
  if (!strcmp(what, "hang") || !strcmp(what, "desync")) /* its wait may have timed out */
    hold_self(g, seq, recs);
  unsigned long long num = (unsigned long long)dist__mon_num(g, seq); /* what it prints */
  char site[MON_SITE_LEN], s[32];
  dist__mon_symbolize(atomic_load(&op->caller), site, sizeof site);
  int64_t waited = now_ms - dist__mon_wall_ms(atomic_load(&op->t_enq_ns));
  /* A member that ran out of calls is named so in the header; the status
   * stays a lost peer (distrun: 12, "a rank ended while others needed it"). */
  char who[256];
  bool out = !is_p2p(kind) && strcmp(what, "stall") &&
             all_ran_out(g, me, recs, who, sizeof who);
  /* Members that destroyed the group and went on: a desync, however long
   * the others wait (mon_diag_left.c); not when a peer was lost. So are
   * those of another group's collective where this rank's waits end. */
  int left[MON_CULPRITS_MAX];
  const char *said = strcmp(what, "stall") ? "desync" : "stall";
  bool may_leave = !out && strcmp(what, "lost peer");
  int n_left = is_p2p(kind) || !may_leave
                   ? 0 : dist__mon_leavers(g, me, recs, left, MON_CULPRITS_MAX);
  const mon_rec_group *there = NULL;
  if (!n_left && may_leave &&
      (n_left = dist__mon_left_ends(recs, &there, left, MON_CULPRITS_MAX)) > 0) {
    dist__mon_say_left_elsewhere(recs, said, there, left, n_left, v, buf, len, &off);
    /* the stall is said by the ranks blocked in that collective */
    *lowest = strcmp(what, "stall") != 0;
    *n_cycles = 0;
    if (off && buf[off - 1] == '\n')
      buf[--off] = '\0';
    return buf;
  }
  if (n_left) {
    mon_left_at at = {g->gid, g->desc[0] ? g->desc : g->name, g->size, kind, num};
    dist__mon_say_left_head(said, &at, left, n_left, buf, len, &off);
  } else {
    dist__appendf(buf, len, &off, "%s in group %d (%s) at %s #%llu: ", what, g->gid,
                  g->desc[0] ? g->desc : g->name, dist__mon_op_name(kind), num);
    if (out)
      dist__appendf(buf, len, &off, "rank%s %s ran out of calls: left the group cleanly "
                    "before it, while the others called it (the ranks' calls differ in "
                    "number)\n", strchr(who, ',') || strchr(who, '-') ? "s" : "", who);
    else
      dist__appendf(buf, len, &off, "waited %s of its %s timeout\n",
                    sec_word(waited, s, sizeof s),
                    sec_word(dist__mon_timeout_ms(g, seq), s + 16, 16));
  }
  if (is_p2p(kind)) {
    int peer = atomic_load(&op->peer);
    diagnose_p2p(g, seq, kind, peer, site, recs, buf, len, &off, lowest);
    say_roots(recs, v, buf, len, &off);
    *n_cycles = dist__mon_cycles(recs, dist__mon.world, buf, len, &off, v);
    int ends[MON_CULPRITS_MAX], k = 0;
    if (!v->n && peer >= 0 && peer < dist__mon.world && peer != dist__mon.rank &&
        (k = waits_end_at(recs, peer, ends, MON_CULPRITS_MAX)) > 0)
      /* no waits followed from this rank's own record (its operation timed
       * out): they go through its peer, to where the peer's end */
      say_ends(recs, v, g, kind, num, site, ends, k, buf, len, &off);
    int from[2] = {dist__mon.rank, peer};
    if (!v->n) /* the waits stop at a rank held in another group's operation */
      say_held(recs, from, 2, v, buf, len, &off);
    place_in_store(recs, v);
    if (off && buf[off - 1] == '\n')
      buf[--off] = '\0';
    return buf;
  }
  int *in = dist__malloc(sizeof(int) * (size_t)g->size), n_in = 0;
  int absent = 0, missing[MON_CULPRITS_MAX];
  for (int i = 0; in && i < g->size; i++) {
    int r = g->granks[i];
    if (r < 0 || r >= dist__mon.world)
      continue;
    const mon_rec_group *rg = dist__mon_rec_group(&recs[r], g->gid);
    char how[320];
    const char *gone = dist__mon_gone_how(&recs[r], now_ms, how, sizeof how);
    if (r == dist__mon.rank || (is_in(rg, me) && !gone)) {
      in[n_in++] = r;
      continue;
    }
    if (is_in(rg, me)) { /* it was in the operation, then ended */
      dist__appendf(buf, len, &off, "  rank %d (host %s, pid %d) entered %s #%llu, then %s\n",
                    r, recs[r].host, (int)recs[r].pid, dist__mon_op_name(kind), num, gone);
      continue;
    }
    if (absent++ < MON_CULPRITS_MAX)
      missing[absent - 1] = r;
    if (n_left && dist__mon_left_before(recs, r, g->gid, me, now_ms))
      dist__mon_say_left(recs, r, g->gid, now_ms, buf, len, &off);
    else
      say_absent(buf, len, &off, recs, r, g, seq, kind, now_ms);
  }
  if (in && n_in) {
    qsort(in, (size_t)n_in, sizeof *in, dist__mon_cmp_int);
    char ranks[256];
    dist__format_ranks(in, (size_t)n_in, ranks, sizeof ranks);
    dist__mon_symbolize(atomic_load(&op->caller), site, sizeof site);
    bool lost = strcmp(what, "lost peer") == 0;
    dist__appendf(buf, len, &off, "  rank%s %s %s %s %s #%llu, called from %s (rank %d)\n",
                  n_in > 1 ? "s" : "", ranks, lost ? (n_in > 1 ? "had" : "has") : n_in > 1 ? "are" : "is",
                  lost ? "entered" : "blocked in", dist__mon_op_name(kind),
                  num, site, dist__mon.rank);
    *lowest = in[0] == dist__mon.rank;
  } else {
    *lowest = true;
  }
  if (n_left) { /* the leavers are the verdict: no waits to follow, no cycle */
    mon_left_at at = {g->gid, g->desc[0] ? g->desc : g->name, g->size, kind, num};
    dist__mon_verdict_left(v, recs, &at, left, n_left);
    *n_cycles = 0;
    goto finish;
  }
  if (!absent && !(in && say_held(recs, in, n_in, v, buf, len, &off)) &&
      !(in && say_root_split(recs, g->gid, kind, num, in, n_in, v, buf, len, &off)) &&
      !(in && say_before(recs, g, in, n_in, buf, len, &off)))
    /* Nothing here tells a transfer still moving (a large all_to_all over
     * TCP takes seconds) from one that stopped: the records say who
     * entered, not how many bytes moved. So no stop is claimed. */
    dist__appendf(buf, len, &off, "  every member has entered it and it has not completed: its "
                  "data may still be moving (a large or slow transfer), or one of them stopped "
                  "inside it, or the transport is stuck\n");
  else if (absent)
    say_roots(recs, v, buf, len, &off);
  *n_cycles = dist__mon_cycles(recs, dist__mon.world, buf, len, &off, v);
  if (!v->n && absent) {
    /* This rank's own record may no longer show it in the operation (it
     * timed out: a monitored barrier's own timeout), so no waits were
     * followed from it: they go through the members that have not
     * entered (the first 8), to where those end. */
    int ends[MON_CULPRITS_MAX], n_ends = 0;
    for (int i = 0; i < absent && i < 8; i++) {
      int e[MON_CULPRITS_MAX];
      for (int j = 0, k = waits_end_at(recs, missing[i], e, MON_CULPRITS_MAX); j < k; j++) {
        bool have = false;
        for (int x = 0; x < n_ends && !have; x++)
          have = ends[x] == e[j];
        if (!have && n_ends < MON_CULPRITS_MAX)
          ends[n_ends++] = e[j];
      }
    }
    qsort(ends, (size_t)n_ends, sizeof *ends, dist__mon_cmp_int);
    if (n_ends)
      say_ends(recs, v, g, kind, num, site, ends, n_ends, buf, len, &off);
  }
  if (!v->n && absent) { /* the waits stop at a rank held in another group's operation */
    int from[MON_CULPRITS_MAX + 1], n_from = 0;
    from[n_from++] = dist__mon.rank;
    for (int i = 0; i < absent && i < MON_CULPRITS_MAX; i++)
      from[n_from++] = missing[i];
    say_held(recs, from, n_from, v, buf, len, &off);
  }
  place_in_store(recs, v);
finish:
  dist__free(in);
  if (off && buf[off - 1] == '\n')
    buf[--off] = '\0';
  return buf;
}
