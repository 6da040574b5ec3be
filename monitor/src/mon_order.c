/* mon_order.c - of the ranks every deadlock cycle goes through, the ones
 * whose calls are in another order than everybody else's.
 *
 * A rank that swaps two collectives of different groups (the world's
 * broadcast before its tensor-parallel all_reduce) closes a cycle with
 * the partner that kept the order: each waits in the collective the other
 * has not reached. Both are in the cycle, and the cycle alone cannot say
 * which of them swapped. The other ranks can: a rank that issued the
 * partner's collective and not yet the swapped one, or that waits inside
 * the swapped one with the partner's behind it, ran the two in the
 * partner's order. When such witnesses exist and none ran them the other
 * way, the rank whose order nobody shares is named alone.
 *
 * Collectives of different groups are compared through the part a group
 * plays: the same group, or on a rank outside it a group of the same
 * description and size (each rank's "tp" group of a device mesh is a
 * group of its own, issued at the same point of the same program).
 * Point-to-point operations carry no collective ordinal and take no part.
 *
 * When nothing else tells the ranks of a cycle apart (two ranks that both
 * send first, or both receive first), their own pasts can: the one that
 * waits in a call it never made from that line on that group before took
 * a branch its earlier steps did not, while its partner calls as it always
 * did (dist__mon_prefer_fresh). */
#include <string.h>

#include "mon_int.h"

/* The group of rank w's record that plays the part of g (a group of
 * another rank's record) in w's program: g itself, else the one group of
 * the same description and size. NULL when there is none, or several. */
static const mon_rec_group *same_part(const mon_rec *w, const mon_rec_group *g) {
  const mon_rec_group *same = dist__mon_rec_group(w, g->gid), *found = NULL;
  if (same || !g->desc[0])
    return same;
  for (int i = 0; w->present && i < w->n; i++)
    if (w->g[i].size == g->size && !strcmp(w->g[i].desc, g->desc)) {
      if (found)
        return NULL;
      found = &w->g[i];
    }
  return found;
}

/* Whether rank w's record shows collective #ca of a's part issued before
 * #cb of b's: it issued the first and not the second, or its thread waits
 * inside the second (everything it issued came before). */
static bool issued_before(const mon_rec *w, const mon_rec_group *a, uint64_t ca,
                          const mon_rec_group *b, uint64_t cb) {
  const mon_rec_group *wa = same_part(w, a), *wb = same_part(w, b);
  if (!wa || !wb || wa == wb || !wa->has_colls || !wb->has_colls || wa->colls_enq < ca)
    return false;
  if (wb->colls_enq < cb)
    return true;
  return dist__mon_blocked_in(w) == wb && wb->coll == cb && wb->sync;
}

/* The collective rank r waits in, with its ordinal; NULL for none or a
 * point-to-point operation. */
static const mon_rec_group *coll_of(const mon_rec *recs, int r, uint64_t *c) {
  const mon_rec_group *b = dist__mon_blocked_in(&recs[r]);
  if (!b || dist__mon_is_p2p(b->kind) || !b->has_colls || !b->coll)
    return NULL;
  *c = b->coll;
  return b;
}

/* Whether rank r's order of its collective and q's is one no witness
 * shares while some witness ran them in q's order. */
static bool out_of_order(const mon_rec *recs, int world, int r, int q) {
  uint64_t cr = 0, cq = 0; /* (set when coll_of finds one; -O3 cannot tell) */
  const mon_rec_group *br = coll_of(recs, r, &cr), *bq = coll_of(recs, q, &cq);
  if (!br || !bq || !issued_before(&recs[r], br, cr, bq, cq) ||
      !issued_before(&recs[q], bq, cq, br, cr))
    return false; /* not two collectives each issued before the other's */
  int theirs = 0;
  for (int w = 0; w < world; w++) {
    if (w == r || w == q || !recs[w].present)
      continue;
    if (issued_before(&recs[w], br, cr, bq, cq))
      return false; /* r's order has a witness too */
    theirs += issued_before(&recs[w], bq, cq, br, cr);
  }
  return theirs > 0;
}

int dist__mon_prefer_out_of_order(const mon_rec *recs, int world, int *ranks, int k) {
  int out[MON_CULPRITS_MAX], m = 0;
  for (int i = 0; i < k && m < MON_CULPRITS_MAX; i++) {
    bool odd = false;
    for (int j = 0; j < k && !odd; j++)
      odd = j != i && out_of_order(recs, world, ranks[i], ranks[j]);
    if (odd)
      out[m++] = ranks[i];
  }
  if (!m || m == k)
    return k;
  memcpy(ranks, out, sizeof(int) * (size_t)m);
  return m;
}

/* --- a collective called on the wrong group --------------------------------- */

/* A rank that runs a collective on the wrong group (its mesh's data-parallel
 * group where the program calls the tensor-parallel one) has that group's
 * partner match the call silently, and leaves the members of the right
 * group waiting for a call it made elsewhere. The records show it: the
 * others wait in collective #c of group G, called from site S (a call
 * they made from there before), which x has not issued, while x's last
 * call in another group G2, or the one it waits in there, came from S,
 * the same operation. (A helper that calls one collective for every group
 * shares one site: x then skipped its call on G, and is the culprit still.) */
const mon_rec_group *dist__mon_wrong_group(const mon_rec *recs, int world, int x,
                                           const mon_rec_group **wanted) {
  const mon_rec *rx = &recs[x];
  const mon_rec_group *xb = dist__mon_blocked_in(rx);
  for (int y = 0; y < world; y++) {
    const mon_rec_group *yb = y == x ? NULL : dist__mon_blocked_in(&recs[y]);
    /* y's call is the group's habit at that site: not its first from there
     * on that group (a rank that swapped two groups' calls waits at the
     * other group's site, which says nothing of the others) */
    if (!yb || dist__mon_is_p2p(yb->kind) || !yb->has_colls || !yb->coll ||
        !strcmp(yb->site, "-") || yb->fresh == 1)
      continue;
    const mon_rec_group *xg = dist__mon_rec_group(rx, yb->gid);
    if (!xg || !xg->has_colls || xg->colls_enq >= yb->coll)
      continue; /* not a member, or it issued that collective */
    for (int i = 0; rx->present && i < rx->n; i++) {
      const mon_rec_group *o = &rx->g[i];
      if (o->gid == yb->gid)
        continue;
      bool last = o->last_kind == yb->kind && !strcmp(o->last_site, yb->site);
      bool now = o == xb && o->kind == yb->kind && !strcmp(o->site, yb->site);
      if (last || now) { /* x's call from there went to o, completed or waiting */
        *wanted = yb;
        return o;
      }
    }
  }
  return NULL;
}

int dist__mon_prefer_wrong_group(const mon_rec *recs, int world, int *ranks, int k) {
  int out[MON_CULPRITS_MAX], m = 0;
  const mon_rec_group *wanted;
  for (int i = 0; i < k && m < MON_CULPRITS_MAX; i++)
    if (dist__mon_wrong_group(recs, world, ranks[i], &wanted))
      out[m++] = ranks[i];
  if (!m || m == k)
    return k;
  memcpy(ranks, out, sizeof(int) * (size_t)m);
  return m;
}

/* Whether rank x waits in a call it never made from that site on that
 * group before (fresh), 1, 0, or -1 when its record cannot tell. */
int dist__mon_fresh_call(const mon_rec *recs, int x) {
  const mon_rec_group *b = dist__mon_blocked_in(&recs[x]);
  return b ? b->fresh : -1;
}

int dist__mon_prefer_novel(const mon_rec *recs, int *ranks, int k) {
  int out[MON_CULPRITS_MAX], m = 0;
  const mon_rec_group *b0 = k ? dist__mon_blocked_in(&recs[ranks[0]]) : NULL;
  if (!b0)
    return k;
  for (int i = 0; i < k && m < MON_CULPRITS_MAX; i++) {
    const mon_rec_group *b = dist__mon_blocked_in(&recs[ranks[i]]);
    if (!b || !dist__mon_is_p2p(b->kind) || b->gid != b0->gid || b->novel < 0)
      return k;
    if (b->novel == 1)
      out[m++] = ranks[i];
  }
  if (!m || m == k)
    return k;
  memcpy(ranks, out, sizeof(int) * (size_t)m);
  return m;
}

int dist__mon_prefer_fresh(const mon_rec *recs, int *ranks, int k) {
  int out[MON_CULPRITS_MAX], m = 0;
  const mon_rec_group *b0 = k ? dist__mon_blocked_in(&recs[ranks[0]]) : NULL;
  if (!b0 || !dist__mon_is_p2p(b0->kind))
    return k;
  for (int i = 0; i < k && m < MON_CULPRITS_MAX; i++) {
    /* Only a symmetric wait: every one in the same kind of point-to-point
     * call on the same group (a rank in a call new to it, among ranks in
     * other calls, may just have reached a new phase of the program). */
    const mon_rec_group *b = dist__mon_blocked_in(&recs[ranks[i]]);
    if (!b || b->kind != b0->kind || b->gid != b0->gid)
      return k;
    int f = dist__mon_fresh_call(recs, ranks[i]);
    if (f < 0)
      return k; /* one that cannot tell might be the fresh one too */
    if (f == 1)
      out[m++] = ranks[i];
  }
  if (!m || m == k)
    return k;
  memcpy(ranks, out, sizeof(int) * (size_t)m);
  return m;
}
