/* mon_cycle.c - the wait-for graph of a stalled job and its cycles (split
 * from mon_diag.c, which says what each rank in a stalled operation is
 * doing): the walk that finds every distinct cycle from the edges
 * mon_waits.c computes, the choice of the rank to name when cycles share
 * ranks (two calls of one rank, a stranded receiver, a hub), the text of
 * a cycle, and the proof that a deadlock is settled (every rank of a cycle
 * alive and stopped inside a synchronous call) that lets the early verdict
 * end a job before its timeout. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mon_diag_int.h"

#define is_p2p dist__mon_is_p2p
#define blocked_in dist__mon_blocked_in
#define odd_sender dist__mon_odd_sender
#define wrong_source dist__mon_wrong_source
#define stranded_receiver dist__mon_stranded_receiver
#define wrong_destination dist__mon_wrong_destination

/* --- the wait-for graph --------------------------------------------------- */

typedef struct cycle {
  int n, ranks[64];    /* in wait order, from the lowest rank */
  bool maybe;          /* through a rank in a batch: it may wait on another
                          part of it than the one the cycle goes through
                          (not when that part is one its peer never issued) */
} cycle;

typedef struct walk {
  const mon_rec *recs;
  int world;
  mon_waits *edges;
  int *color, *stack, depth;
  int *pos;            /* where a rank on the stack (color 1) sits in it */
  cycle *found;        /* distinct cycles (by their sorted ranks) */
  int n_found, cap;
} walk;

static bool same_ranks(const cycle *a, const int *sorted, int k) {
  if (a->n != k)
    return false;
  int tmp[64];
  memcpy(tmp, a->ranks, sizeof(int) * (size_t)k);
  qsort(tmp, (size_t)k, sizeof *tmp, dist__mon_cmp_int);
  return memcmp(tmp, sorted, sizeof(int) * (size_t)k) == 0;
}

static void keep_cycle(walk *w, int from) {
  int k = w->depth - from, sorted[64];
  if (k > 64 || w->n_found >= w->cap)
    return;
  memcpy(sorted, w->stack + from, sizeof(int) * (size_t)k);
  qsort(sorted, (size_t)k, sizeof *sorted, dist__mon_cmp_int);
  for (int i = 0; i < w->n_found; i++)
    if (same_ranks(&w->found[i], sorted, k))
      return;
  cycle *c = &w->found[w->n_found++];
  c->n = k;
  c->maybe = false;
  for (int i = 0; i < k; i++) /* a batch's wait on a half its peer never issued is sure */
    c->maybe |= !dist__mon_sure_wait(w->recs, w->stack[from + i],
                                     w->stack[from + (i + 1) % k]);
  int lo = 0; /* start the cycle at its lowest rank: one text for one cycle */
  for (int i = 1; i < k; i++)
    if (w->stack[from + i] < w->stack[from + lo])
      lo = i;
  for (int i = 0; i < k; i++)
    c->ranks[i] = w->stack[from + (lo + i) % k];
}

static void dfs(walk *w, int r) {
  w->color[r] = 1;
  w->pos[r] = w->depth;
  w->stack[w->depth++] = r;
  const int *to;
  for (int i = 0, m = dist__mon_waits_out(w->edges, r, &to); i < m; i++) {
    int q = to[i];
    if (q == r)
      continue;
    if (w->color[q] == 1)
      keep_cycle(w, w->pos[q]);
    else if (w->color[q] == 0)
      dfs(w, q);
  }
  w->depth--;
  w->color[r] = 2;
}

/* Every cycle of the wait-for graph (up to w->cap), from a walk started
 * at each rank in turn; false when memory ran out (nothing found). */
static bool walk_all(walk *w, const mon_rec *recs, int world) {
  *w = (walk){.recs = recs, .world = world, .cap = 64};
  w->edges = dist__mon_waits_new(recs, world);
  w->color = dist__calloc((size_t)world + 1, sizeof(int));
  w->pos = dist__calloc((size_t)world + 1, sizeof(int));
  w->stack = dist__calloc((size_t)world + 1, sizeof(int));
  w->found = dist__calloc((size_t)w->cap, sizeof *w->found);
  if (!w->edges || !w->color || !w->pos || !w->stack || !w->found)
    return false;
  for (int r = 0; r < world; r++)
    if (w->color[r] == 0)
      dfs(w, r);
  /* A walk skips what an earlier one finished, and so misses cycles that
   * close through it (rank 3 waiting on 1 and on 7, both waiting on 3: one
   * of the two). Walking again from each rank of the cycles found, with
   * nothing finished, finds the cycles through it: the ranks every cycle
   * goes through are then those of all of them. Bounded: the ranks of the
   * first cycles only. */
  int again[16], n = 0;
  for (int i = 0; i < w->n_found && n < 16; i++)
    for (int j = 0; j < w->found[i].n && n < 16; j++) {
      bool seen = false;
      for (int k = 0; k < n && !seen; k++)
        seen = again[k] == w->found[i].ranks[j];
      if (!seen)
        again[n++] = w->found[i].ranks[j];
    }
  for (int i = 0; i < n; i++) {
    memset(w->color, 0, sizeof(int) * (size_t)world);
    dfs(w, again[i]);
  }
  return true;
}

static void walk_free(walk *w) {
  dist__mon_waits_free(w->edges);
  dist__free(w->color);
  dist__free(w->pos);
  dist__free(w->stack);
  dist__free(w->found);
}

static void say_cycle(const mon_rec *recs, const cycle *c, char *buf, size_t len, size_t *off) {
  bool across = false;
  for (int i = 1; i < c->n; i++)
    across |= blocked_in(&recs[c->ranks[i]])->gid != blocked_in(&recs[c->ranks[0]])->gid;
  dist__appendf(buf, len, off, "  deadlock: a wait-for cycle of %d ranks%s:\n", c->n,
                across ? " across groups" : "");
  for (int i = 0; i < c->n; i++) {
    int r = c->ranks[i], q = c->ranks[(i + 1) % c->n];
    const mon_rec_group *b = blocked_in(&recs[r]);
    char pw[48];
    dist__appendf(buf, len, off,
                  "    rank %d waits in group %d (%s) %s #%llu%s (called from %s) for rank %d\n",
                  r, b->gid, b->desc, dist__mon_op_name(b->kind), dist__mon_rec_num(b),
                  dist__mon_peer_words(b->kind, b->peer, pw, sizeof pw), b->site, q);
  }
}

/* Another group's synchronous operation rank r is blocked in besides its
 * oldest (blocked_in): a second thread of it stopped in a call (one from a
 * work's callback stops the progress of the group it completes); NULL when
 * none. */
static const mon_rec_group *second_sync(const mon_rec *r) {
  const mon_rec_group *b = blocked_in(r);
  for (int i = 0; b && b->sync && i < r->n; i++)
    if (&r->g[i] != b && r->g[i].gid != b->gid && r->g[i].enq > r->g[i].done &&
        r->g[i].kind >= 0 && r->g[i].sync)
      return &r->g[i];
  return NULL;
}

/* Of the ranks every cycle goes through (k of them in ranks), the one
 * alone blocked in two groups' synchronous operations at once
 * (second_sync): its second call holds the progress the others wait on.
 * Returns how many ranks are in ranks. */
static int prefer_two_calls(const mon_rec *recs, int *ranks, int k) {
  int found = -1;
  for (int i = 0; k > 1 && i < k; i++)
    if (second_sync(&recs[ranks[i]])) {
      if (found >= 0)
        return k;
      found = ranks[i];
    }
  if (found < 0)
    return k;
  ranks[0] = found;
  return 1;
}

/* Rank y waits in its send's or receive's half (part) that rank x never
 * issued, while x went on elsewhere: x left its half out of a batch, or
 * skipped the call. */
static void say_left_out(const mon_rec *recs, int x, int y, const mon_rec_part *part,
                         char *buf, size_t len, size_t *off) {
  const mon_rec_group *yb = blocked_in(&recs[y]);
  const mon_rec_group *xg = dist__mon_rec_group(&recs[x], yb->gid);
  uint32_t had = 0;
  for (int i = 0; xg && xg->p2p && i < xg->p2p->n_counts; i++)
    if (xg->p2p->counts[i].peer == y)
      had = part->send ? xg->p2p->counts[i].received : xg->p2p->counts[i].sent;
  const char *mine = part->send ? "send" : "receive", *its = part->send ? "receive" : "send";
  dist__appendf(buf, len, off, ": rank %d waits in group %d (%s) %s #%llu, called from %s, "
                "for the %s that matches its %s #%u %s rank %d, and rank %d issued only %u "
                "%s%s %s rank %d there before it went on (did it leave the %s out of its "
                "batch, or skip the call?)", y, yb->gid, yb->desc, dist__mon_op_name(yb->kind),
                dist__mon_rec_num(yb), yb->site, its, mine, (unsigned)part->n,
                part->send ? "to" : "from", x, x, (unsigned)had, its, had == 1 ? "" : "s",
                part->send ? "from" : "to", y, its);
}

/* Rank r, named because it waits in a call it never made from that line
 * on that group before, while the rank it waits for calls as at its
 * earlier steps (dist__mon_prefer_fresh). */
static void say_fresh(const mon_rec *recs, int r, char *buf, size_t len, size_t *off) {
  const mon_rec_group *b = blocked_in(&recs[r]);
  int q = b->peer;
  const mon_rec_group *qb = q >= 0 && q < dist__mon.world ? blocked_in(&recs[q]) : NULL;
  dist__appendf(buf, len, off, ": it never called from there on group %d before", b->gid);
  if (qb)
    dist__appendf(buf, len, off, ", while rank %d waits in group %d (%s) %s #%llu, called from "
                  "%s as at its earlier steps", q, qb->gid, qb->desc,
                  dist__mon_op_name(qb->kind), dist__mon_rec_num(qb), qb->site);
  dist__appendf(buf, len, off, " (did it take a branch its earlier steps did not: %s where "
                "they %s?)", b->kind == DIST_OP_SEND ? "sending first" :
                b->kind == DIST_OP_RECV ? "receiving first" : "a call out of its usual order",
                b->kind == DIST_OP_SEND ? "received first" :
                b->kind == DIST_OP_RECV ? "sent first" : "made another");
}

/* The peer of batch b (rank r's) whose half facing b's has another tag
 * (-1: none known). */
static int tag_peer(const mon_rec *recs, int r, const mon_rec_group *b) {
  const mon_rec_part *pa, *pb;
  for (int i = 0; b->kind == DIST_OP_BATCH_P2P && dist__mon_parts_known(b) &&
                  i < b->p2p->n_parts; i++) {
    int q = b->p2p->parts[i].peer;
    const mon_rec_group *qb = q >= 0 && q < dist__mon.world ? blocked_in(&recs[q]) : NULL;
    if (qb && qb->gid == b->gid && dist__mon_tags_differ(b, r, qb, q, &pa, &pb))
      return q;
  }
  return -1;
}

/* Rank r, named because its blocked send or receive is a step it never
 * took from the call before it, while the rank it waits for is where its
 * earlier steps went (dist__mon_prefer_novel). */
void dist__mon_say_novel(const mon_rec *recs, int r, char *buf, size_t len, size_t *off) {
  const mon_rec_group *b = blocked_in(&recs[r]);
  int q = dist__mon_unmatched_peer(recs, r);
  q = q >= 0 ? q : tag_peer(recs, r, b);
  q = q >= 0 ? q : b->peer;
  const mon_rec_group *qb = q >= 0 && q < dist__mon.world ? blocked_in(&recs[q]) : NULL;
  dist__appendf(buf, len, off, ": its earlier steps never went from the call before it");
  if (b->last_kind >= 0)
    dist__appendf(buf, len, off, " (%s #%llu, called from %s)", dist__mon_op_name(b->last_kind),
                  (unsigned long long)b->last_num, b->last_site);
  dist__appendf(buf, len, off, " to this one");
  if (qb && qb->novel == 0)
    dist__appendf(buf, len, off, ", while rank %d waits in group %d (%s) %s #%llu with tag %d, "
                  "called from %s, as at its earlier steps", q, qb->gid, qb->desc,
                  dist__mon_op_name(qb->kind), dist__mon_rec_num(qb), qb->tag, qb->site);
  if (b->kind == DIST_OP_BATCH_P2P && dist__mon_parts_known(b)) {
    dist__appendf(buf, len, off, " (did it skip a call, or change its tag or peer? its batch ");
    dist__mon_say_parts(b, buf, len, off);
    dist__appendf(buf, len, off, ")");
    return;
  }
  dist__appendf(buf, len, off, " (did it skip a call, or change its tag or peer? it %s rank %d "
                "with tag %d)", b->kind == DIST_OP_SEND ? "sends to" : "receives from", b->peer,
                b->tag);
}

/* A rank every cycle goes through: the one whose calls are out of order
 * (a call swapped across groups, a receive from the wrong peer), with the
 * ranks blocked on it. */
static void say_hub(const mon_rec *recs, int r, int n_cycles, bool fresh, bool novel,
                    char *buf, size_t len, size_t *off) {
  const mon_rec_group *b = blocked_in(&recs[r]);
  char pw[48];
  int world = dist__mon.world, sender = wrong_source(recs, world, r);
  int waiter = wrong_destination(recs, world, r);
  bool misdirected = odd_sender(recs, world, r);
  bool stranded = sender < 0 && waiter < 0 && !misdirected && stranded_receiver(recs, world, r);
  int astray = dist__mon_sends_astray(recs, world, r);
  const mon_rec_part *part = NULL, *wp = NULL;
  const mon_rec_group *wanted = NULL;
  int left_for = astray < 0 ? dist__mon_left_out(recs, world, r, true, &part) : -1;
  const mon_rec_group *o;
  const mon_rec_group *wrong = dist__mon_wrong_group(recs, world, r, &wanted);
  dist__appendf(buf, len, off, "  %s rank %d, which is blocked in group %d (%s) %s #%llu%s, "
                "called from %s", waiter >= 0 || stranded || misdirected || astray >= 0 ||
                left_for >= 0 || wrong ? "the waits start at"
                : n_cycles > 1 ? "every wait-for cycle goes through"
                : "the wait-for cycle goes through", r, b->gid, b->desc, dist__mon_op_name(b->kind),
                dist__mon_rec_num(b), dist__mon_peer_words(b->kind, b->peer, pw, sizeof pw), b->site);
  int astray_waiter = astray >= 0 ? dist__mon_left_out(recs, world, r, false, &wp) : -1;
  if (fresh)
    say_fresh(recs, r, buf, len, off);
  else if (novel)
    dist__mon_say_novel(recs, r, buf, len, off);
  else if (astray >= 0 && astray_waiter >= 0 && !wp->send)
    dist__appendf(buf, len, off, ": it sends to rank %d, which does not take from it, while "
                  "rank %d waits to receive from it (does it send to the wrong peer?)", astray,
                  astray_waiter);
  else if (astray >= 0)
    dist__appendf(buf, len, off, ": it sends to rank %d, which never sent to it nor received "
                  "from it in group %d (does it send to the wrong peer?)", astray, b->gid);
  else if (waiter >= 0)
    dist__appendf(buf, len, off, ": it sends to rank %d, which does not take from it, while "
                  "rank %d waits to receive from it (does it send to the wrong peer?)",
                  b->peer2, waiter);
  else if (misdirected && is_p2p(blocked_in(&recs[b->peer])->kind))
    dist__appendf(buf, len, off, ": it sends to rank %d for the first time, which %s rank %d "
                  "as before (does it send to the wrong peer?)", b->peer,
                  blocked_in(&recs[b->peer])->kind == DIST_OP_SEND ? "sends to" : "receives from",
                  blocked_in(&recs[b->peer])->peer);
  else if (misdirected)
    dist__appendf(buf, len, off, ": it sends to rank %d for the first time, which receives "
                  "nothing: it waits in %s (does it send to the wrong peer?)", b->peer,
                  dist__mon_op_name(blocked_in(&recs[b->peer])->kind));
  else if (stranded)
    dist__appendf(buf, len, off, ": rank %d is elsewhere, not sending to it%s (does it receive "
                  "from the wrong peer?)", b->peer,
                  dist__mon_first_with_peer(b) ? ", and it never received from that rank before"
                                               : "");
  else if (sender >= 0)
    dist__appendf(buf, len, off, ": rank %d does not send to it while rank %d does (does it "
                  "receive from the wrong peer?)", b->peer, sender);
  else if (left_for >= 0)
    say_left_out(recs, r, left_for, part, buf, len, off);
  else if ((o = wrong) != NULL && o == b && !strcmp(o->site, wanted->site))
    dist__appendf(buf, len, off, ": the others wait for it in group %d (%s) %s #%llu, called "
                  "from %s, while its call from there went to group %d (%s) %s #%llu, where it "
                  "waits (did it call it on the wrong group?)", wanted->gid, wanted->desc,
                  dist__mon_op_name(wanted->kind), dist__mon_rec_num(wanted), wanted->site,
                  o->gid, o->desc, dist__mon_op_name(o->kind), dist__mon_rec_num(o));
  else if ((o = wrong) != NULL)
    dist__appendf(buf, len, off, ": the others wait for it in group %d (%s) %s #%llu, called "
                  "from %s, while its last call from there went to group %d (%s) %s #%llu "
                  "(did it call it on the wrong group?)", wanted->gid, wanted->desc,
                  dist__mon_op_name(wanted->kind), dist__mon_rec_num(wanted), wanted->site,
                  o->gid, o->desc, dist__mon_op_name(o->last_kind),
                  (unsigned long long)o->last_num);
  else if ((o = second_sync(&recs[r])) != NULL)
    dist__appendf(buf, len, off, ", while it is also blocked in group %d (%s) %s #%llu, called "
                  "from %s: two calls at once (a call that blocks from a work's callback, or "
                  "from another thread, holds the other group's progress)", o->gid, o->desc,
                  dist__mon_op_name(o->kind), dist__mon_rec_num(o), o->site);
  else
    dist__appendf(buf, len, off, ", while others wait for it elsewhere (its calls are in "
                  "another order than theirs)");
  dist__mon_say_waiters(recs, r, buf, len, off);
}

/* Of the ranks every cycle goes through (k of them in ranks), when none
 * is a stranded receiver but a rank of the cycles is, or else sends to the
 * wrong peer (wrong_destination), those instead: a cycle
 * through batches may close through a part already done (the record
 * cannot say which), while a receive from a peer that is elsewhere can
 * only wait. Returns how many ranks are in ranks. */
static int prefer_stranded(const mon_rec *recs, int world, const cycle *cs, int n, int *ranks,
                           int k) {
  for (int i = 0; i < k; i++)
    if (stranded_receiver(recs, world, ranks[i]))
      return k;
  int m = 0;
  for (int pass = 0; pass < 2 && !m; pass++) /* a plain receive is sure; a batch's part is not */
    for (int i = 0; i < n; i++)
      for (int j = 0; j < cs[i].n && m < MON_CULPRITS_MAX; j++) {
        int r = cs[i].ranks[j];
        bool have = false;
        for (int x = 0; x < m && !have; x++)
          have = ranks[x] == r;
        if (!have && (pass ? wrong_destination(recs, world, r) >= 0
                           : stranded_receiver(recs, world, r)))
          ranks[m++] = r;
      }
  if (!m)
    return k;
  qsort(ranks, (size_t)m, sizeof *ranks, dist__mon_cmp_int);
  return m;
}

/* Cycles of sure waits first, then by length. */
static int by_length(const void *a, const void *b) {
  const cycle *x = a, *y = b;
  if (x->maybe != y->maybe)
    return x->maybe - y->maybe;
  if (x->n != y->n)
    return x->n - y->n;
  return x->ranks[0] - y->ranks[0];
}

/* The ranks every cycle passes through, ascending, into out; how many. */
static int common_ranks(const cycle *cs, int n, int world, int *out) {
  int k = 0;
  for (int r = 0; r < world && k < MON_CULPRITS_MAX; r++) {
    bool all = true;
    for (int i = 0; all && i < n; i++) {
      bool in = false;
      for (int j = 0; j < cs[i].n && !in; j++)
        in = cs[i].ranks[j] == r;
      all = in;
    }
    if (all)
      out[k++] = r;
  }
  return k;
}

int dist__mon_cycles(const mon_rec *recs, int world, char *buf, size_t len, size_t *off,
                     mon_verdict *v) {
  walk w;
  walk_all(&w, recs, world);
  if (w.n_found) {
    /* The shortest cycle first, in full; the others mostly follow from it
     * (ranks that wait on a rank of the cycle, closing longer loops). */
    qsort(w.found, (size_t)w.n_found, sizeof *w.found, by_length);
    int sure = 0; /* the cycles of sure waits (sorted first) name the ranks, when any */
    while (sure < w.n_found && !w.found[sure].maybe)
      sure++;
    int common[MON_CULPRITS_MAX];
    int k = common_ranks(w.found, sure ? sure : w.n_found, world, common);
    /* No rank in every cycle (a ring's longer loops pass beside the short
     * one): the shortest cycle's ranks are the candidates, and are named
     * all together as before unless a rule below tells one apart. */
    int first_n = k ? 0 : w.found[0].n < MON_CULPRITS_MAX ? w.found[0].n : MON_CULPRITS_MAX;
    for (int i = 0; i < first_n; i++)
      common[k++] = w.found[0].ranks[i];
    k = dist__mon_prefer_odd_p2p(recs, world, common, k);
    /* A batch's half its peer never issued: the rank that sent astray, or
     * that left its half out and went on; the cycle only closes through it. */
    int by_halves = dist__mon_prefer_unissued(recs, world, common, k);
    bool halves = by_halves < k;
    k = by_halves;
    if (sure && !halves) /* a call made on another group than the others made it on */
      k = dist__mon_prefer_wrong_group(recs, world, common, k);
    if (sure && !halves) /* a call swapped across groups: the side whose order nobody shares */
      k = dist__mon_prefer_out_of_order(recs, world, common, k);
    if (sure && !halves) /* a rank in two calls at once: the second holds the first's progress */
      k = prefer_two_calls(recs, common, k);
    if (!sure && !halves) /* only cycles through batches: the surer ends of their waits */
      k = prefer_stranded(recs, world, w.found, w.n_found, common, k);
    int before_fresh = k; /* still alike: the one that left its own habits */
    k = dist__mon_prefer_fresh(recs, common, k);
    bool by_fresh = k < before_fresh, by_novel = false;
    if (!by_fresh) { /* or its own path: a step it never took */
      int before_novel = k;
      k = dist__mon_prefer_novel(recs, common, k);
      by_novel = k < before_novel;
    }
    if (first_n && k == first_n)
      k = 0; /* nothing told the shortest cycle's ranks apart */
    for (int i = 0; i < k && i < 4; i++)
      say_hub(recs, common[i], first_n ? 1 : w.n_found, by_fresh, by_novel, buf, len, off);
    say_cycle(recs, &w.found[0], buf, len, off);
    if (w.n_found > 1)
      dist__appendf(buf, len, off, "  (and %d longer wait-for cycle%s through the same ranks)\n",
                    w.n_found - 1, w.n_found > 2 ? "s" : "");
    if (v && !v->n) { /* the ranks every cycle goes through, else the first cycle's */
      const cycle *c = &w.found[0];
      v->n = k ? k : c->n;
      for (int i = 0; i < v->n; i++)
        v->culprits[i] = k ? common[i] : c->ranks[i];
      qsort(v->culprits, (size_t)v->n, sizeof(int), dist__mon_cmp_int);
      const mon_rec_group *b = blocked_in(&recs[v->culprits[0]]);
      dist__mon_verdict_at(v, b, b->site);
    }
  }
  int found = w.n_found;
  walk_free(&w);
  return found;
}

/* --- a proven deadlock ----------------------------------------------------- */

/* Whether rank r's record shows it alive and stopped for good inside the
 * library: heard from lately, blocked in a synchronous call (its thread
 * cannot call anything else), and no other operation in flight in any
 * group (no pending send or receive that could still meet a peer). */
static bool stuck_inside(const mon_rec *r, int64_t now_ms) {
  char how[320];
  if (!r->present || strcmp(r->state, "run") != 0 || dist__mon_gone_how(r, now_ms, how, sizeof how) ||
      r->proc_state == 'T' || r->proc_state == 't')
    return false;
  const mon_rec_group *b = blocked_in(r);
  if (!b || !b->sync)
    return false;
  uint64_t in_flight = 0;
  for (int i = 0; i < r->n; i++)
    in_flight += r->g[i].enq > r->g[i].done ? r->g[i].enq - r->g[i].done : 0;
  return in_flight == 1;
}

/* Whether peer q of a batch cannot end its part: stuck inside the library
 * itself, in the cycle or waiting for one of its ranks. */
static bool peer_stuck(const mon_rec *recs, int world, const cycle *c, int q, int64_t now_ms) {
  if (q < 0 || q >= world || !stuck_inside(&recs[q], now_ms))
    return false;
  const mon_rec_group *qb = blocked_in(&recs[q]);
  for (int j = 0; j < c->n; j++)
    if (c->ranks[j] == q || dist__mon_waits_for(recs, q, qb, c->ranks[j]))
      return true;
  return false;
}

/* Whether rank r of cycle c, when blocked in a batch, cannot finish it. A
 * batch ends when its receives and its sends do. A half that a peer stuck
 * with the cycle never issued cannot end (mon_parts.c). Without such a
 * half, the cycle may go through a part that is done, so every peer of it
 * must be stuck with the cycle (a slow stage that has not sent yet, or not
 * taken a large send, ends the wait when it comes). */
static bool batch_stuck(const mon_rec *recs, int world, const cycle *c, int r,
                        int64_t now_ms) {
  const mon_rec_group *b = blocked_in(&recs[r]);
  if (b->kind != DIST_OP_BATCH_P2P)
    return true;
  for (int i = 0; dist__mon_parts_known(b) && i < b->p2p->n_parts; i++) {
    int q = b->p2p->parts[i].peer; /* a half q never issued, q stuck: it never will */
    bool unknown = false;
    if (dist__mon_unissued(recs, r, b, q, &unknown) && peer_stuck(recs, world, c, q, now_ms))
      return true;
  }
  if (b->peer2 == MON_PEER_MANY || b->peer == MON_PEER_MANY)
    return false;
  return peer_stuck(recs, world, c, b->peer, now_ms) &&
         (b->peer2 == MON_PEER_NONE || peer_stuck(recs, world, c, b->peer2, now_ms));
}

static uint64_t mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
  return h;
}

bool dist__mon_deadlock_seen(const mon_rec *recs, int world, int me, mon_cycle_seen *seen) {
  seen->n = 0;
  if (me < 0 || me >= world)
    return false;
  /* Liveness as of the snapshot, not of the end of a long search. */
  int64_t now_ms = dist__mon_wall_ms(dist__now_ns());
  walk w;
  walk_all(&w, recs, world);
  const cycle *best = NULL;
  for (int i = 0; i < w.n_found; i++) {
    const cycle *c = &w.found[i];
    bool mine = false, stuck = c->n <= MON_CYCLE_MAX;
    for (int j = 0; j < c->n && stuck; j++) {
      mine |= c->ranks[j] == me;
      stuck = stuck_inside(&recs[c->ranks[j]], now_ms) &&
              batch_stuck(recs, world, c, c->ranks[j], now_ms);
    }
    if (mine && stuck && (!best || c->n < best->n))
      best = c;
  }
  /* Without a cycle, an unmatched pair is as final: a send and the
   * receive meant for it that cannot take it (their tags differ), each
   * rank stopped inside its half with nothing else in flight. */
  int pair[2] = {me, dist__mon_unmatched_peer(recs, me)};
  bool stuck_pair = !best && pair[1] >= 0 && stuck_inside(&recs[me], now_ms) &&
                    stuck_inside(&recs[pair[1]], now_ms);
  if (best || stuck_pair) {
    seen->n = best ? best->n : 2;
    memcpy(seen->ranks, best ? best->ranks : pair, sizeof(int) * (size_t)seen->n);
    qsort(seen->ranks, (size_t)seen->n, sizeof(int), dist__mon_cmp_int);
    uint64_t h = 1469598103934665603ULL;
    for (int j = 0; j < seen->n; j++) {
      const mon_rec *r = &recs[seen->ranks[j]];
      const mon_rec_group *b = blocked_in(r);
      seen->hb_ms[j] = r->hb_ms;
      h = mix(h, (uint64_t)seen->ranks[j]);
      h = mix(h, (uint64_t)b->gid);
      h = mix(h, b->done + 1);
      h = mix(h, (uint64_t)b->kind);
      h = mix(h, (uint64_t)b->since_ms);
      h = mix(h, (uint64_t)(int64_t)r->pid);
    }
    seen->ops = h;
  }
  walk_free(&w);
  return seen->n > 0;
}
