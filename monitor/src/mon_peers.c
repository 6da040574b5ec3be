/* mon_peers.c - of a wait-for cycle through sends and receives, the end
 * that is the odd call: a receive from the wrong peer, a send to the wrong
 * peer, or the first receive of a new pair in a running pipeline. The
 * record's pair number (the how-manyth transfer between the two ranks)
 * tells the ends apart: a pipeline repeats its pairs, and the new one is
 * the odd call. mon_cycle.c asks these when it reports a cycle. */
#include "mon_int.h"

#define is_p2p dist__mon_is_p2p
#define blocked_in dist__mon_blocked_in
#define odd_sender dist__mon_odd_sender
#define wrong_source dist__mon_wrong_source
#define stranded_receiver dist__mon_stranded_receiver
#define first_with_peer dist__mon_first_with_peer

/* The first of its pair (its tag's), and no transfer with another tag
 * before it (a record without that says unknown: the pair alone then). */
bool dist__mon_first_with_peer(const mon_rec_group *b) {
  return b->pair == 1 && b->peer_before != 1;
}

/* Whether b's pair has carried transfers before (with its tag, or with
 * another: a pipeline that tags each step anew). */
static bool established(const mon_rec_group *b) {
  return b->pair > 1 || b->peer_before == 1;
}

/* Whether rank s, blocked in a send, sends to the wrong peer: its first
 * send to that rank (first_with_peer), which waits, with the same tag, to receive
 * from another peer it has received from before, or which waits to send
 * to another peer it has sent to before (a 1F1B stage waits for its
 * backward send before its next receive), or which receives nothing (it
 * waits in a collective). The pair numbers tell the two ends of a
 * misdirected message apart: a running pipeline repeats its pairs, and the
 * new one is the odd call. */
bool dist__mon_odd_sender(const mon_rec *recs, int world, int s) {
  const mon_rec_group *b = blocked_in(&recs[s]);
  if (!b || b->kind != DIST_OP_SEND || b->peer < 0 || b->peer >= world || !first_with_peer(b))
    return false;
  const mon_rec_group *rb = blocked_in(&recs[b->peer]);
  if (rb && !is_p2p(rb->kind))
    return true;
  if (rb && rb->kind == DIST_OP_SEND)
    return rb->peer != s && rb->gid == b->gid && established(rb);
  return rb && rb->kind == DIST_OP_RECV && rb->peer != s && rb->gid == b->gid &&
         rb->tag == b->tag && established(rb);
}

/* The rank blocked sending to r, with the tag r receives with, while r is
 * blocked receiving from a peer that does not send to it: r most likely
 * names the wrong source. A send with another tag is no sign (r's receive
 * would not take it from that rank either). -1 when r is not in that
 * state, or when that send is the odd call (odd_sender). */
int dist__mon_wrong_source(const mon_rec *recs, int world, int r) {
  const mon_rec_group *b = blocked_in(&recs[r]);
  if (!b || b->kind != DIST_OP_RECV || b->peer < 0 || b->peer >= world)
    return -1;
  const mon_rec_group *pb = blocked_in(&recs[b->peer]);
  if (pb && pb->kind == DIST_OP_SEND && pb->peer == r)
    return -1;
  for (int q = 0; q < world; q++) {
    const mon_rec_group *qb = q == r ? NULL : blocked_in(&recs[q]);
    if (qb && qb->kind == DIST_OP_SEND && qb->peer == r && qb->gid == b->gid &&
        qb->tag == b->tag)
      return odd_sender(recs, world, q) ? -1 : q; /* the sender is the odd one */
  }
  return -1;
}

/* Whether r is blocked receiving from a peer that is not sending to it:
 * blocked in anything but a send to r or a batch with r (its receive can
 * only wait; a rank that named the wrong source, or one behind it in a
 * pipeline). */
bool dist__mon_stranded_receiver(const mon_rec *recs, int world, int r) {
  const mon_rec_group *b = blocked_in(&recs[r]);
  if (!b || b->kind != DIST_OP_RECV || b->peer < 0 || b->peer >= world || b->peer == r)
    return false;
  const mon_rec_group *pb = blocked_in(&recs[b->peer]);
  if (!pb)
    return false;
  bool batch_with_r = pb->kind == DIST_OP_BATCH_P2P && (pb->peer == r || pb->peer2 == r ||
                                                        pb->peer == MON_PEER_MANY ||
                                                        pb->peer2 == MON_PEER_MANY);
  return !(pb->kind == DIST_OP_SEND && pb->peer == r) && !batch_with_r;
}

/* Whether blocked record pb of rank p takes a message from r now: a
 * receive from r, or a batch whose receives come from r. */
static bool takes_from(const mon_rec_group *pb, int r) {
  return pb && pb->peer == r && (pb->kind == DIST_OP_RECV || pb->kind == DIST_OP_BATCH_P2P);
}

/* The rank waiting to receive from r while r, blocked in a batch, sends
 * to a peer that does not take from it (peer2): r most likely sends to the
 * wrong peer. -1 when r is not in that state. */
int dist__mon_wrong_destination(const mon_rec *recs, int world, int r) {
  const mon_rec_group *b = blocked_in(&recs[r]);
  if (!b || b->kind != DIST_OP_BATCH_P2P || b->peer2 < 0 || b->peer2 >= world)
    return -1;
  if (takes_from(blocked_in(&recs[b->peer2]), r))
    return -1;
  for (int z = 0; z < world; z++)
    if (z != r && z != b->peer2 && takes_from(blocked_in(&recs[z]), r))
      return z;
  return -1;
}

/* Of the ranks every cycle goes through, those receiving from the wrong
 * peer when there are any (the other end of a receive-receive cycle only
 * waits for them): kept in place, returns how many. */
static int prefer_wrong_source(const mon_rec *recs, int world, int *ranks, int k) {
  int m = 0;
  for (int i = 0; i < k; i++)
    if (wrong_source(recs, world, ranks[i]) >= 0)
      ranks[m++] = ranks[i];
  return m ? m : k;
}

/* Of the ranks every cycle goes through, those sending to the wrong peer
 * (odd_sender) when there are any. Kept in place; returns how many. */
static int prefer_odd_sender(const mon_rec *recs, int world, int *ranks, int k) {
  int m = 0;
  for (int i = 0; i < k; i++)
    if (odd_sender(recs, world, ranks[i]))
      ranks[m++] = ranks[i];
  return m ? m : k;
}

/* Of the ranks every cycle goes through, when they are all receivers from
 * peers elsewhere (a cycle of receives, no sender to tell the wrong source
 * by), those receiving from that peer for the first time while the others
 * receive from theirs as they did before (a new pair in a running job is
 * the odd call: the first stage that receives at all). Kept in place;
 * returns how many. */
static int prefer_new_pair(const mon_rec *recs, int world, int *ranks, int k) {
  int m = 0;
  for (int i = 0; i < k; i++) {
    const mon_rec_group *b = blocked_in(&recs[ranks[i]]);
    if (!stranded_receiver(recs, world, ranks[i]) || !b->pair)
      return k; /* unknown, or not a cycle of receives */
    m += first_with_peer(b);
  }
  if (!m || m == k)
    return k;
  int n = 0;
  for (int i = 0; i < k; i++)
    if (first_with_peer(blocked_in(&recs[ranks[i]])))
      ranks[n++] = ranks[i];
  return n;
}

/* Of a send and a receive stuck on each other with tags that differ, the
 * side whose transfer is the first of its pair (its pair number is 1: no
 * send or receive between the two with that tag before) while the other
 * side's pair has matched before: a pipeline repeats its pairs, so the new
 * tag is the one the program changed. A receive from DIST_ANY_SOURCE has
 * no pair number: against a send whose pair matched before it counts as
 * new (the receives that took those sends used the send's tag). -1 when
 * the numbers do not tell (both new, both old, or unknown). */
static bool new_on_pair(const mon_rec_group *a, const mon_rec_group *other) {
  bool any = a->kind == DIST_OP_RECV && a->peer == DIST_ANY_SOURCE;
  return (a->pair == 1 || (any && !a->pair)) && other->pair > 1;
}

int dist__mon_new_tag_side(const mon_rec *recs, int r, int q) {
  const mon_rec_group *a = blocked_in(&recs[r]), *b = blocked_in(&recs[q]);
  if (!a || !b || !is_p2p(a->kind) || !is_p2p(b->kind))
    return -1;
  if (new_on_pair(a, b))
    return r;
  if (new_on_pair(b, a))
    return q;
  return -1;
}

int dist__mon_prefer_odd_p2p(const mon_rec *recs, int world, int *ranks, int k) {
  k = prefer_wrong_source(recs, world, ranks, k);
  k = prefer_odd_sender(recs, world, ranks, k);
  return prefer_new_pair(recs, world, ranks, k);
}
