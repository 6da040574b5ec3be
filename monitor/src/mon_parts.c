/* mon_parts.c - a point-to-point operation's halves (its record's parts)
 * against its peers' counts: which half of a batch still waits, and on
 * whom.
 *
 * A batch of sends and receives with several peers ends when every half
 * has met its match. Its record names each half with its number on the
 * pair ("my 2nd send to rank 2"), and every record counts the sends and
 * receives its rank issued to and from each peer. A half whose peer's
 * count does not reach its number is one that peer never issued: the
 * batch waits for that peer, surely. A half the peer did issue waits for
 * nothing the peer has yet to do; it may still be moving data, or be
 * stuck on a tag, which only a peer in the exchange at the same time can
 * be (mon_waits.c keeps that edge, as a maybe). Without these fields (an
 * older record, a receive from any source, too many peers) every question
 * here answers "unknown" and the callers keep the rule they had. */
#include "mon_int.h"

#define blocked_in dist__mon_blocked_in

/* How many sends to rank r (sends false: receives from it) rank q says it
 * issued in group gid; -1 unknown. */
static int64_t issued(const mon_rec *recs, int q, int gid, int r, bool sends) {
  const mon_rec_group *qg = dist__mon_rec_group(&recs[q], gid);
  if (!qg || !qg->p2p_known)
    return -1;
  if (!qg->p2p)
    return 0;
  if (!qg->p2p->counts_known)
    return -1;
  for (int i = 0; i < qg->p2p->n_counts; i++)
    if (qg->p2p->counts[i].peer == r)
      return sends ? qg->p2p->counts[i].sent : qg->p2p->counts[i].received;
  return qg->p2p->counts_cut ? -1 : 0;
}

bool dist__mon_parts_known(const mon_rec_group *b) {
  return b && dist__mon_is_p2p(b->kind) && b->p2p_known && b->p2p && b->p2p->n_parts &&
         !b->p2p->parts_cut;
}

bool dist__mon_has_part_with(const mon_rec_group *b, int q) {
  for (int i = 0; dist__mon_parts_known(b) && i < b->p2p->n_parts; i++)
    if (b->p2p->parts[i].peer == q)
      return true;
  return false;
}

const mon_rec_part *dist__mon_unissued(const mon_rec *recs, int r, const mon_rec_group *b,
                                       int q, bool *unknown) {
  for (int i = 0; dist__mon_parts_known(b) && i < b->p2p->n_parts; i++) {
    const mon_rec_part *p = &b->p2p->parts[i];
    if (p->peer != q)
      continue;
    int64_t n = issued(recs, q, b->gid, r, !p->send); /* my send meets its receive */
    if (n < 0)
      *unknown = true;
    else if (n < p->n)
      return p;
  }
  return NULL;
}

const mon_rec_part *dist__mon_part_with(const mon_rec_group *b, int q, bool send) {
  for (int i = 0; dist__mon_parts_known(b) && i < b->p2p->n_parts; i++)
    if (b->p2p->parts[i].peer == q && b->p2p->parts[i].send == send)
      return &b->p2p->parts[i];
  return NULL;
}

bool dist__mon_tags_differ(const mon_rec_group *a, int ra, const mon_rec_group *b, int rb,
                           const mon_rec_part **pa, const mon_rec_part **pb) {
  for (int dir = 0; dir < 2; dir++) {
    const mon_rec_part *x = dist__mon_part_with(a, rb, dir == 0);
    const mon_rec_part *y = dist__mon_part_with(b, ra, dir != 0);
    if (x && y && x->tagged && y->tagged && x->tag != y->tag) {
      *pa = x;
      *pb = y;
      return true;
    }
  }
  return false;
}

void dist__mon_say_parts(const mon_rec_group *b, char *buf, size_t len, size_t *off) {
  for (int i = 0; dist__mon_parts_known(b) && i < b->p2p->n_parts; i++) {
    const mon_rec_part *p = &b->p2p->parts[i];
    dist__appendf(buf, len, off, "%s%s rank %d", i ? (i + 1 == b->p2p->n_parts ? " and " : ", ")
                  : "", p->send ? "sends to" : "receives from", p->peer);
    if (p->tagged)
      dist__appendf(buf, len, off, " with tag %d", p->tag);
  }
}

/* Whether rank q is in a point-to-point operation of gid with r now. */
static bool exchanging_with(const mon_rec *recs, int q, int gid, int r) {
  const mon_rec_group *qb = blocked_in(&recs[q]);
  if (!qb || !dist__mon_is_p2p(qb->kind) || qb->gid != gid)
    return false;
  if (dist__mon_parts_known(qb))
    return dist__mon_has_part_with(qb, r);
  return qb->peer == r || qb->peer2 == r || qb->peer == MON_PEER_MANY ||
         qb->peer2 == MON_PEER_MANY || (qb->kind == DIST_OP_RECV && qb->peer == DIST_ANY_SOURCE);
}

int dist__mon_parts_wait(const mon_rec *recs, int r, const mon_rec_group *b, int q) {
  if (!dist__mon_parts_known(b) || !dist__mon_has_part_with(b, q))
    return -1;
  bool unknown = false;
  if (dist__mon_unissued(recs, r, b, q, &unknown))
    return 1;
  if (unknown)
    return -1;
  return exchanging_with(recs, q, b->gid, r) ? 1 : 0;
}

bool dist__mon_sure_wait(const mon_rec *recs, int r, int q) {
  const mon_rec_group *b = blocked_in(&recs[r]);
  if (!b || b->kind != DIST_OP_BATCH_P2P)
    return true;
  bool unknown = false;
  return dist__mon_unissued(recs, r, b, q, &unknown) != NULL;
}

int dist__mon_sends_astray(const mon_rec *recs, int world, int r) {
  const mon_rec_group *b = blocked_in(&recs[r]);
  if (!b || b->kind != DIST_OP_BATCH_P2P) /* a send alone: mon_peers.c's odd_sender */
    return -1;
  for (int i = 0; dist__mon_parts_known(b) && i < b->p2p->n_parts; i++) {
    const mon_rec_part *p = &b->p2p->parts[i];
    int q = p->peer;
    if (!p->send || q < 0 || q >= world || q == r)
      continue;
    bool receives_from_q = false;
    for (int j = 0; j < b->p2p->n_parts; j++)
      receives_from_q |= !b->p2p->parts[j].send && b->p2p->parts[j].peer == q;
    /* Never exchanged: q neither took from r nor sent to it, ever. */
    if (!receives_from_q && issued(recs, q, b->gid, r, false) == 0 &&
        issued(recs, q, b->gid, r, true) == 0)
      return q;
  }
  return -1;
}

int dist__mon_left_out(const mon_rec *recs, int world, int x, bool elsewhere,
                       const mon_rec_part **part) {
  for (int y = 0; y < world; y++) {
    const mon_rec_group *b = y == x ? NULL : blocked_in(&recs[y]);
    if (b && b->kind != DIST_OP_BATCH_P2P) /* a send or receive alone: mon_peers.c */
      continue;
    bool unknown = false;
    const mon_rec_part *p = b ? dist__mon_unissued(recs, y, b, x, &unknown) : NULL;
    if (p && !(elsewhere && exchanging_with(recs, x, b->gid, y))) {
      *part = p;
      return y;
    }
  }
  return -1;
}

/* Keeps in ranks (k of them) those for which is(r) holds, when some do;
 * returns how many are left. */
static int keep_if(const mon_rec *recs, int world, int *ranks, int k, bool astray) {
  int m = 0;
  const mon_rec_part *p;
  for (int i = 0; i < k; i++)
    if (astray ? dist__mon_sends_astray(recs, world, ranks[i]) >= 0
               : dist__mon_left_out(recs, world, ranks[i], true, &p) >= 0)
      ranks[m++] = ranks[i];
  return m ? m : k;
}

int dist__mon_prefer_unissued(const mon_rec *recs, int world, int *ranks, int k) {
  int m = keep_if(recs, world, ranks, k, true);
  return m < k ? m : keep_if(recs, world, ranks, k, false);
}
