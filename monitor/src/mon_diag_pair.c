/* mon_diag_pair.c - a send and a receive that should have matched and did
 * not (each blocked in the other half: their tags differ, they are in
 * different groups, or the receive never takes the send): which rank is
 * its peer, which of the two to name first, which one to blame alone (a
 * tag new on the pair, a step never taken before, a tag set where the
 * partner's is the default), and the line that says the pair. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mon_diag_int.h"

#define is_p2p dist__mon_is_p2p
#define blocked_in dist__mon_blocked_in
#define halves dist__mon_halves
#define novel_side dist__mon_novel_side

/* The peer of a rank blocked in a send or receive whose peer is blocked in
 * the other half (a send to it, a receive from it): a transfer that should
 * have matched and did not (their tags differ, or one side's receive never
 * sees the other's message), so neither waits for anything that could
 * still come; -1 otherwise. */
int dist__mon_unmatched_peer(const mon_rec *recs, int r) {
  const mon_rec_group *b = blocked_in(&recs[r]);
  if (b && b->kind == DIST_OP_RECV && b->peer == DIST_ANY_SOURCE) {
    /* a receive from any rank: a send to r it does not take (a tag) */
    for (int q = 0; q < dist__mon.world; q++) {
      const mon_rec_group *qb = q == r ? NULL : blocked_in(&recs[q]);
      if (qb && qb->gid == b->gid && halves(b, r, qb, q))
        return q;
    }
    return -1;
  }
  if (!b || !is_p2p(b->kind) || b->peer < 0 || b->peer >= dist__mon.world || b->peer == r)
    return -1;
  /* The two may be in different groups: a send on one group never meets
   * a receive on another, as final as tags that differ. */
  const mon_rec_group *qb = blocked_in(&recs[b->peer]);
  return qb && halves(b, r, qb, b->peer) ? b->peer : -1;
}

/* Of an unmatched pair, the rank to name first: the one whose tag is new
 * on its pair while the other's matched before (dist__mon_new_tag_side),
 * else the one whose tag is not the default 0 while the other's is (a tag
 * the program changed), else the receiver (a receive says what it
 * expects). */
bool dist__mon_blame_first(const mon_rec *recs, int r, int q) {
  const mon_rec_group *a = blocked_in(&recs[r]), *b = blocked_in(&recs[q]);
  int changed = dist__mon_new_tag_side(recs, r, q);
  if (changed >= 0)
    return changed == r;
  if ((a->tag != 0) != (b->tag != 0))
    return a->tag != 0;
  return a->kind == DIST_OP_RECV;
}

/* The rank of an unmatched pair (r, q) whose blocked call is a step it
 * never took (mon_record.h's novel) while its partner's is one it took
 * before, or -1. */
int dist__mon_novel_side(const mon_rec *recs, int r, int q) {
  const mon_rec_group *a = blocked_in(&recs[r]), *b = blocked_in(&recs[q]);
  if (!a || !b || a->novel < 0 || b->novel < 0 || a->novel == b->novel)
    return -1;
  return a->novel ? r : q;
}

/* The one rank of an unmatched pair (r, q) to blame alone, or -1: a tag
 * new on its pair, else a step never taken, else a tag set where the
 * partner's is the default. */
int dist__mon_pair_alone(const mon_rec *recs, int r, int q) {
  const mon_rec_group *a = blocked_in(&recs[r]), *b = blocked_in(&recs[q]);
  if (!a || !b)
    return -1;
  int changed = dist__mon_new_tag_side(recs, r, q);
  if (changed >= 0)
    return changed;
  int novel = novel_side(recs, r, q);
  if (novel >= 0)
    return novel;
  return a->tag != 0 && b->tag == 0 ? r : b->tag != 0 && a->tag == 0 ? q : -1;
}

void dist__mon_drop_culprit(mon_verdict *v, int r) {
  int n = 0;
  for (int i = 0; i < v->n; i++)
    if (v->culprits[i] != r)
      v->culprits[n++] = v->culprits[i];
  v->n = n;
}

/* "the waits end at rank 6, which is blocked in RECV #10 from rank 5 with
 * tag 1, while rank 5 is blocked in SEND #9 to rank 6 with tag 0: ...". */
void dist__mon_say_unmatched(const mon_rec *recs, int r, int q, char *buf, size_t len,
                             size_t *off) {
  const mon_rec_group *a = blocked_in(&recs[r]), *b = blocked_in(&recs[q]);
  char pa[48], pb[48];
  dist__appendf(buf, len, off, "  the waits end at ranks %d and %d: rank %d is blocked in %s "
                "#%llu%s with tag %d, called from %s, and rank %d in %s #%llu%s with tag %d, "
                "called from %s; the two never matched (%s)", r, q, r, dist__mon_op_name(a->kind),
                dist__mon_rec_num(a), dist__mon_peer_words(a->kind, a->peer, pa, sizeof pa),
                a->tag, a->site, q, dist__mon_op_name(b->kind), dist__mon_rec_num(b),
                dist__mon_peer_words(b->kind, b->peer, pb, sizeof pb), b->tag, b->site,
                a->gid != b->gid   ? "they are in different groups"
                : a->tag != b->tag ? "their tags differ"
                                   : "the receive does not take the send");
}
