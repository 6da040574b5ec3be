/* pg_seq.c - the numbers a user call takes on its group.
 *
 * A group numbers its collectives from 1 and, apart, its point-to-point
 * operations from 1 (dist_coll.seq; torch's Flight Recorder keeps
 * collective_seq_id and p2p_seq_id so), because ranks of a pipeline make
 * different point-to-point calls between the same collectives: one
 * counter for both would give one broadcast #14 on a rank and #21 on
 * another. dist_coll.ord counts both kinds (unique per group: the
 * monitor's and a backend's bookkeeping), and pair_seq numbers a send or
 * receive within its pair (peer, tag, direction), which is how the
 * transport matches them: the n-th send from A to B with tag T is the
 * n-th receive at B from A with tag T, so either side names the pair
 * without asking the other (the OTLP exporter's span ids). A receive from
 * any source and a batch have no pair number.
 *
 * Only the calling thread of a group numbers (backend.h's one-caller
 * rule), so the counters need no lock; g->seq stays atomic for readers on
 * other threads (pg_int.h). */
#include "pg_int.h"

typedef struct dist__pair {
  int peer;                     /* group rank; -1: empty slot */
  int tag;
  bool send;
  uint64_t n;                   /* last pair number used */
} dist__pair;

static size_t pair_hash(int peer, int tag, bool send, size_t cap) {
  uint64_t h = ((uint64_t)(uint32_t)peer << 33) ^ ((uint64_t)(uint32_t)tag << 1) ^ send;
  return (size_t)((h * 0x9E3779B97F4A7C15ull) >> 20) & (cap - 1);
}

static dist__pair *pair_slot(dist__pair *tab, size_t cap, int peer, int tag, bool send) {
  for (size_t i = pair_hash(peer, tag, send, cap);; i = (i + 1) & (cap - 1))
    if (tab[i].peer < 0 || (tab[i].peer == peer && tab[i].tag == tag && tab[i].send == send))
      return &tab[i];
}

/* Doubles g's pair table (half full at most); false when memory ran out. */
static bool pairs_grow(dist_pg *g) {
  size_t cap = g->cap_pairs ? g->cap_pairs * 2 : 16;
  dist__pair *tab = dist__malloc(cap * sizeof *tab);
  if (!tab)
    return false;
  for (size_t i = 0; i < cap; i++)
    tab[i].peer = -1;
  for (size_t i = 0; i < g->cap_pairs; i++)
    if (g->pairs[i].peer >= 0)
      *pair_slot(tab, cap, g->pairs[i].peer, g->pairs[i].tag, g->pairs[i].send) = g->pairs[i];
  dist__free(g->pairs);
  g->pairs = tab;
  g->cap_pairs = cap;
  return true;
}

/* The next pair number of (peer, tag, send) on g; 0 when memory ran out
 * (the operation runs, its pair is unnamed). */
static uint64_t next_pair(dist_pg *g, int peer, int tag, bool send) {
  if ((g->n_pairs + 1) * 2 > g->cap_pairs && !pairs_grow(g))
    return 0;
  dist__pair *p = pair_slot(g->pairs, g->cap_pairs, peer, tag, send);
  if (p->peer < 0) {
    *p = (dist__pair){.peer = peer, .tag = tag, .send = send, .n = 0};
    g->n_pairs++;
  }
  return ++p->n;
}

void dist__pg_number(dist_pg *g, dist_coll *c) {
  c->ord = dist__pg_next_seq(g);
  c->pair_seq = 0;
  if (!dist_op_is_p2p(c->kind)) {
    c->seq = ++g->coll_seq;
    return;
  }
  c->seq = ++g->p2p_seq;
  bool send = c->kind == DIST_OP_SEND || c->kind == DIST_OP_SEND_BYTES;
  if (c->kind != DIST_OP_BATCH_P2P && c->root >= 0)
    c->pair_seq = next_pair(g, c->root, c->tag, send);
}

void dist__pg_pairs_free(dist_pg *g) {
  dist__free(g->pairs);
  g->pairs = NULL;
  g->n_pairs = g->cap_pairs = 0;
}
