/* mon_diag_p2p.c - the diagnosis of a stalled send or receive: it waits
 * on one rank, its peer, and the report says what that rank is doing (gone,
 * in the other half with another tag, stuck on this rank in the same kind
 * of call, blocked elsewhere, or not yet at the matching call). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mon_diag_int.h"

#define is_p2p dist__mon_is_p2p
#define blocked_in dist__mon_blocked_in
#define halves dist__mon_halves
#define sec_word dist__mon_sec_word
#define outside_words dist__mon_outside_words
#define say_last dist__mon_say_last

/* A send or receive waits on one rank, its peer: what that rank is doing.
 * *lowest: whether this rank writes the report (of two ranks stuck on each
 * other, the lower). */
void dist__mon_diagnose_p2p(const mon_group *g, uint64_t seq, int kind, int peer,
                            const char *site, const mon_rec *recs, char *buf, size_t len,
                            size_t *off, bool *lowest) {
  int64_t now_ms = dist__mon_wall_ms(dist__now_ns());
  char pw[48], how[320], s[32], ow[512];
  int me = dist__mon.rank;
  dist__appendf(buf, len, off, "  rank %d is blocked in %s #%llu%s, called from %s\n", me,
                dist__mon_op_name(kind), (unsigned long long)dist__mon_num(g, seq),
                dist__mon_peer_words(kind, peer, pw, sizeof pw), site);
  *lowest = true;
  if (peer < 0 || peer >= dist__mon.world)
    return;
  const mon_rec *q = &recs[peer];
  const char *gone = dist__mon_gone_how(q, now_ms, how, sizeof how);
  const mon_rec_group *b = gone ? NULL : blocked_in(q);
  const mon_rec_group *mine = dist__mon_rec_group(&recs[me], g->gid);
  const mon_rec_part *pm, *pq;
  dist__appendf(buf, len, off, "  rank %d (host %s, pid %d) ", peer, q->present ? q->host : "?",
                q->present ? (int)q->pid : -1);
  if (gone) {
    dist__appendf(buf, len, off, "%s; ", gone);
    say_last(buf, len, off, dist__mon_rec_group(q, g->gid));
    dist__appendf(buf, len, off, " (as of its last heartbeat)\n");
  } else if (b && is_p2p(b->kind) && mine && halves(b, peer, mine, me)) {
    dist__appendf(buf, len, off, "is in %s #%llu%s with tag %d, called from %s: the two "
                  "should match, ", dist__mon_op_name(b->kind), dist__mon_rec_num(b),
                  dist__mon_peer_words(b->kind, b->peer, pw, sizeof pw), b->tag, b->site);
    int my_tag = atomic_load(&g->ring[seq % MON_RING].tag);
    if (my_tag != b->tag)
      dist__appendf(buf, len, off, "but this one has tag %d: their tags differ\n", my_tag);
    else
      dist__appendf(buf, len, off, "and their tags agree (%d)\n", my_tag);
  } else if (b && b->peer == me && b->kind == kind && kind == DIST_OP_BATCH_P2P && mine &&
             dist__mon_tags_differ(mine, me, b, peer, &pm, &pq)) {
    dist__appendf(buf, len, off, "is blocked in %s #%llu%s too, called from %s: this rank %s "
                  "rank %d with tag %d where rank %d %s rank %d with tag %d: their tags differ\n",
                  dist__mon_op_name(b->kind), dist__mon_rec_num(b),
                  dist__mon_peer_words(b->kind, b->peer, pw, sizeof pw), b->site,
                  pm->send ? "sends to" : "receives from", peer, pm->tag, peer,
                  pq->send ? "sends to" : "receives from", me, pq->tag);
    *lowest = me < peer;
  } else if (b && b->peer == me && b->kind == kind) {
    dist__appendf(buf, len, off, "is blocked in %s #%llu%s too, called from %s: each %s the "
                  "other\n", dist__mon_op_name(b->kind), dist__mon_rec_num(b),
                  dist__mon_peer_words(b->kind, b->peer, pw, sizeof pw), b->site,
                  kind == DIST_OP_RECV ? "waits to receive before it sends to"
                                       : "waits to send before it receives from");
    *lowest = me < peer;
  } else if (b) {
    dist__appendf(buf, len, off, "is blocked in group %d (%s) %s #%llu%s, called from %s, for "
                  "%s\n", b->gid, b->desc, dist__mon_op_name(b->kind), dist__mon_rec_num(b),
                  dist__mon_peer_words(b->kind, b->peer, pw, sizeof pw), b->site,
                  sec_word(now_ms - b->since_ms, s, sizeof s));
  } else {
    const mon_rec_group *qg = dist__mon_rec_group(q, g->gid);
    dist__appendf(buf, len, off, "has not called the matching %s: ",
                  kind == DIST_OP_RECV ? "send" : kind == DIST_OP_SEND ? "receive" : "operation");
    if (!qg && q->n == 0) /* caught between its groups' destruction and its exit */
      dist__appendf(buf, len, off, "its record lists no group any more (it is destroying them)");
    else
      say_last(buf, len, off, qg);
    if (qg && (qg->last_seq || q->creating.on))
      dist__appendf(buf, len, off, "; %s",
                    outside_words(recs, peer, qg->last_ms, now_ms, ow, sizeof ow));
    dist__appendf(buf, len, off, "\n");
  }
  if (q->stack[0])
    dist__appendf(buf, len, off, "    its stack:\n%s", q->stack);
  if (q->crash[0])
    dist__appendf(buf, len, off, "    %s", q->crash);
}
