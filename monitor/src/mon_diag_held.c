/* mon_diag_held.c - where the waits stop with no end (every member has
 * entered the operation and it does not complete): a rank held in another
 * group's operation (a synchronous call from a work's completion callback,
 * or from another thread, holds the first group's progress), members that
 * name different roots of a rooted collective, and members blocked in
 * another group's operation issued before this one. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mon_diag_int.h"

#define blocked_in dist__mon_blocked_in
#define waits_for dist__mon_waits_for
#define sec_word dist__mon_sec_word

/* A rank's waits follow its oldest operation (blocked_in). A thread of the
 * rank may meanwhile be stopped in a synchronous call of another group: a
 * collective called from a work's completion callback runs on the thread
 * that completes the first group's operations, so the rank's later
 * operation of that group, which every member has entered, cannot end
 * there, and the waits stop at it with no edge. The operation rank r is
 * held in: another group's synchronous one in flight that some rank has
 * not entered (waits_for), its ranks into who (up to cap, *n_who); NULL
 * when none. */
static const mon_rec_group *held_elsewhere(const mon_rec *recs, int r, int *who, int cap,
                                           int *n_who) {
  const mon_rec *rec = &recs[r];
  const mon_rec_group *b = blocked_in(rec);
  char how[320];
  *n_who = 0;
  if (!b || dist__mon_gone_how(rec, dist__mon_wall_ms(dist__now_ns()), how, sizeof how))
    return NULL;
  for (int i = 0; i < rec->n; i++) {
    const mon_rec_group *o = &rec->g[i];
    if (o == b || o->gid == b->gid || o->enq <= o->done || o->kind < 0 || !o->sync)
      continue;
    for (int q = 0; q < dist__mon.world; q++)
      if (q != r && waits_for(recs, r, o, q) && *n_who < cap)
        who[(*n_who)++] = q;
    if (*n_who)
      return o;
  }
  return NULL;
}

/* Where the waits from ranks start[0..n) stop without an end: ranks alive
 * and blocked in an operation that waits for nobody (every member has
 * entered it). Of them, the lowest held in another group's operation
 * (held_elsewhere) is where the waits end: said, with the ranks blocked on
 * it, and made the verdict's culprit at that operation. False when none. */
bool dist__mon_say_held(const mon_rec *recs, const int *start, int n, mon_verdict *v, char *buf,
                        size_t len, size_t *off) {
  int world = dist__mon.world, h = 0, k = 0;
  int *queue = dist__calloc((size_t)world + 1, sizeof(int));
  bool *seen = dist__calloc((size_t)world + 1, sizeof(bool));
  mon_waits *wi = dist__mon_waits_new(recs, world);
  int64_t now_ms = dist__mon_wall_ms(dist__now_ns());
  int held = -1, who[8], n_who = 0;
  const mon_rec_group *o = NULL;
  for (int i = 0; queue && seen && wi && i < n; i++)
    if (start[i] >= 0 && start[i] < world && !seen[start[i]]) {
      seen[start[i]] = true;
      queue[k++] = start[i];
    }
  for (; h < k; h++) {
    int r = queue[h];
    char how[320];
    if (dist__mon_gone_how(&recs[r], now_ms, how, sizeof how) || !blocked_in(&recs[r]))
      continue;
    const int *to;
    int m = dist__mon_waits_out(wi, r, &to);
    if (!m && dist__mon_unmatched_peer(recs, r) < 0) {
      int w[8], nw = 0;
      const mon_rec_group *x = held_elsewhere(recs, r, w, 8, &nw);
      if (x && (held < 0 || r < held)) {
        held = r;
        o = x;
        n_who = nw;
        memcpy(who, w, sizeof(int) * (size_t)nw);
      }
    }
    for (int i = 0; i < m; i++)
      if (!seen[to[i]]) {
        seen[to[i]] = true;
        queue[k++] = to[i];
      }
  }
  dist__free(queue);
  dist__free(seen);
  dist__mon_waits_free(wi);
  if (held < 0)
    return false;
  const mon_rec_group *b = blocked_in(&recs[held]);
  char ranks[256], pw[48], s[32];
  dist__format_ranks(who, (size_t)n_who, ranks, sizeof ranks);
  dist__appendf(buf, len, off, "  the waits end at rank %d: it is in group %d (%s) %s #%llu, "
                "called from %s, which every member has entered, but cannot end it while "
                "it is blocked in group %d (%s) %s #%llu%s, called from %s, for %s, which "
                "rank%s %s %s not entered (a call that blocks from a work's callback, or "
                "from another thread, holds the first group's progress)", held, b->gid,
                b->desc, dist__mon_op_name(b->kind), dist__mon_rec_num(b), b->site, o->gid, o->desc,
                dist__mon_op_name(o->kind), dist__mon_rec_num(o), dist__mon_peer_words(o->kind, o->peer, pw, sizeof pw),
                o->site, sec_word(now_ms - o->since_ms, s, sizeof s), n_who > 1 ? "s" : "",
                ranks, n_who > 1 ? "have" : "has");
  dist__mon_say_waiters(recs, held, buf, len, off);
  if (v) {
    v->n = 1;
    v->culprits[0] = held;
    dist__mon_verdict_at(v, o, o->site);
  }
  return true;
}

/* The root member r's record gives the collective of group gid (kind) it
 * is in, -1 unknown (mon_record.h: a collective's root in its parts). */
static int root_of(const mon_rec *r, int gid, int kind) {
  const mon_rec_group *rg = dist__mon_rec_group(r, gid);
  return rg && rg->kind == kind && rg->enq > rg->done && rg->p2p ? rg->p2p->root : -1;
}

/* Every member entered a broadcast (a reduce, a scatter...) and none can
 * go on: when their records name different roots, the ranks that name
 * another root than most do are the verdict (the readers all wait for a
 * root that waits to read). False when the roots agree, are unknown, or
 * split evenly. */
bool dist__mon_say_root_split(const mon_rec *recs, int gid, int kind, unsigned long long num,
                              const int *in, int n, mon_verdict *v, char *buf, size_t len,
                              size_t *off) {
  int roots[8], votes[8] = {0}, m = 0;
  for (int i = 0; i < n; i++) {
    int r = root_of(&recs[in[i]], gid, kind), j = 0;
    while (r >= 0 && j < m && roots[j] != r)
      j++;
    if (r >= 0 && j == m && m < 8)
      roots[m++] = r;
    if (r >= 0 && j < m)
      votes[j]++;
  }
  int best = 0, ties = 0;
  for (int j = 1; j < m; j++)
    best = votes[j] > votes[best] ? j : best;
  for (int j = 0; j < m; j++)
    ties += votes[j] == votes[best];
  if (m < 2 || ties > 1)
    return false;
  int odd[MON_CULPRITS_MAX], k = 0, usual[MON_CULPRITS_MAX], u = 0;
  for (int i = 0; i < n; i++) {
    int r = root_of(&recs[in[i]], gid, kind);
    if (r >= 0 && r != roots[best] && k < MON_CULPRITS_MAX)
      odd[k++] = in[i];
    else if (r == roots[best] && u < MON_CULPRITS_MAX)
      usual[u++] = in[i];
  }
  char a[256], b[256];
  dist__format_ranks(usual, (size_t)u, a, sizeof a);
  dist__format_ranks(odd, (size_t)k, b, sizeof b);
  dist__appendf(buf, len, off, "  ranks disagree on the root of %s #%llu: rank%s %s wait%s "
                "with root %d, rank%s %s with another  <- root differs\n",
                dist__mon_op_name(kind), num, u > 1 ? "s" : "", a, u > 1 ? "" : "s",
                roots[best], k > 1 ? "s" : "", b);
  for (int i = 0; i < k; i++) {
    int r = root_of(&recs[odd[i]], gid, kind);
    dist__appendf(buf, len, off, "    rank %d waits in it with root %d\n", odd[i], r);
  }
  if (!v->n) {
    v->n = k;
    memcpy(v->culprits, odd, sizeof(int) * (size_t)k);
    const mon_rec_group *rg = dist__mon_rec_group(&recs[odd[0]], gid);
    dist__mon_verdict_at(v, rg, rg->site);
  }
  return true;
}

/* Of members in[0..n) that entered this group's operation, those blocked
 * meanwhile in another group's operation issued before it (a call from a
 * work's callback that ran first): one line each, the waits go on through
 * it (the cycles below). False when none. */
bool dist__mon_say_before(const mon_rec *recs, const mon_group *g, const int *in, int n,
                          char *buf, size_t len, size_t *off) {
  int said = 0; /* the first 4 */
  char pw[48];
  for (int i = 0; i < n && said < 4; i++) {
    const mon_rec_group *b = in[i] >= 0 && in[i] < dist__mon.world ? blocked_in(&recs[in[i]])
                                                                     : NULL;
    if (!b || b->gid == g->gid)
      continue;
    dist__appendf(buf, len, off, "  rank %d has entered it, but is blocked in group %d (%s) %s "
                  "#%llu%s, called from %s, issued before it\n", in[i], b->gid, b->desc,
                  dist__mon_op_name(b->kind), dist__mon_rec_num(b), dist__mon_peer_words(b->kind, b->peer, pw, sizeof pw),
                  b->site);
    said++;
  }
  return said > 0;
}
