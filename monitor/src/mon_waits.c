/* mon_waits.c - who waits for whom: the edges of the wait-for graph that
 * the diagnosis (mon_diag.c) walks, and an index of them.
 *
 * A rank R waits for rank Q when R's oldest operation in flight is
 * collective #s of group G and Q is a member of G (its record lists G, or
 * says it destroyed G, or this rank's table of G lists Q: it left G, or
 * its record is older than G) that has not entered that collective; or when R's oldest
 * operation is a send or receive with Q that Q is not in the other half of
 * (a batch: a half Q never issued, or one Q is exchanging with R now;
 * with an older record, the peer of its receives, or of its sends).
 *
 * The index exists for scale. Asking every pair (R, Q) is quadratic: 10^8
 * questions at 10,000 ranks, seconds of the watchdog's time. But a
 * collective's out-edges depend only on the operation (group, number,
 * kind), never on which member waits in it, and the ranks that can be
 * waited for are the group's members; so each operation's edges are found
 * once, among its group's members, and shared by every rank blocked in it.
 * A send or receive has at most one edge, to its peer; a batch one to
 * each peer its halves wait for (mon_parts.c), or, when its record does
 * not name them, two (the peer of its receives, and of its sends when
 * another). Edges come out in
 * ascending rank order, as a scan of every rank would give them, so walks
 * over the index find the same cycles in the same order. */
#include <stdlib.h>
#include <string.h>

#include "mon_int.h"

bool dist__mon_is_in(const mon_rec_group *rg, mon_at_op o) {
  if (!rg)
    return false;
  if (o.coll && rg->has_colls) {
    if (rg->colls_enq < o.coll)
      return false;
    return !(rg->coll == o.coll && rg->kind >= 0 && rg->kind != o.kind);
  }
  if (rg->enq < o.seq)
    return false;
  return !(rg->done + 1 == o.seq && rg->kind >= 0 && rg->kind != o.kind);
}

mon_at_op dist__mon_at_blocked(const mon_rec_group *b) {
  return (mon_at_op){b->done + 1, dist__mon_is_p2p(b->kind) ? 0 : b->coll, b->kind};
}

const mon_rec_group *dist__mon_blocked_in(const mon_rec *r) {
  const mon_rec_group *best = NULL;
  for (int i = 0; r->present && i < r->n; i++)
    if (r->g[i].enq > r->g[i].done && r->g[i].kind >= 0 &&
        (!best || r->g[i].since_ms < best->since_ms))
      best = &r->g[i];
  return best;
}

/* Whether a's peer is rank rb: its own, or any rank for a receive from
 * DIST_ANY_SOURCE (which names none). */
static bool peer_is(const mon_rec_group *a, int rb) {
  return a->peer == rb || (a->kind == DIST_OP_RECV && a->peer == DIST_ANY_SOURCE);
}

bool dist__mon_halves(const mon_rec_group *a, int ra, const mon_rec_group *b, int rb) {
  if (!a || !b || !((a->kind == DIST_OP_SEND && b->kind == DIST_OP_RECV) ||
                    (a->kind == DIST_OP_RECV && b->kind == DIST_OP_SEND)))
    return false;
  if (a->peer == rb && b->peer == ra)
    return true;
  return a->gid == b->gid && peer_is(a, rb) && peer_is(b, ra); /* from any rank: same group */
}

/* Whether rank q, whose record lists no group gid, is a member of it all
 * the same: one that has left it (destroyed its process group, exited or
 * died), or whose last record is older than the group (it stopped, or
 * hangs in a debugger, right after making it). Either way it is in no
 * operation of gid. Known when this rank is a member of gid too (its
 * table lists the members). */
static bool absent_member(int q, int gid) {
  for (int i = 0; i < MON_MAX_GROUPS; i++) {
    const mon_group *g = &dist__mon.groups[i];
    if (!atomic_load_explicit(&g->live, memory_order_acquire) || g->gid != gid)
      continue;
    for (int m = 0; m < g->size; m++)
      if (g->granks[m] == q)
        return true;
    return false;
  }
  return false;
}

bool dist__mon_waits_for(const mon_rec *recs, int r, const mon_rec_group *b, int q) {
  const mon_rec_group *qg = dist__mon_rec_group(&recs[q], b->gid);
  bool batch = b->kind == DIST_OP_BATCH_P2P;
  if (!qg) /* q lists no such group: a member absent from it is still waited for */
    return (absent_member(q, b->gid) || dist__mon_rec_destroyed(&recs[q], b->gid)) &&
           (!dist__mon_is_p2p(b->kind) || b->peer == q ||
            (batch && dist__mon_has_part_with(b, q)));
  int by_parts = batch ? dist__mon_parts_wait(recs, r, b, q) : -1;
  if (by_parts >= 0) /* the batch's halves tell (mon_parts.c) */
    return by_parts == 1;
  if (dist__mon_is_p2p(b->kind))
    return (b->peer == q || (b->kind == DIST_OP_BATCH_P2P && b->peer2 == q)) &&
           !dist__mon_halves(b, r, dist__mon_blocked_in(&recs[q]), q);
  return !dist__mon_is_in(qg, dist__mon_at_blocked(b));
}

/* --- the index -------------------------------------------------------------- */

typedef struct pair {
  int gid, rank;
} pair;

typedef struct edges {
  int *to, n;
  bool done;           /* found */
} edges;

struct mon_waits {
  const mon_rec *recs;
  int world;
  const mon_rec_group **blocked; /* per rank, dist__mon_blocked_in */
  int (*peer)[MON_PARTS_MAX]; /* per rank: its edges when blocked in a send, receive or batch */
  int *op;             /* per rank: its collective's slot in ops, -1 none */
  edges *ops;          /* per rank (used at the first rank of each collective) */
  pair *members;       /* (gid, rank) ascending: who can be waited for in gid */
  int n_members;
};

static int cmp_pair(const void *a, const void *b) {
  const pair *x = a, *y = b;
  if (x->gid != y->gid)
    return x->gid < y->gid ? -1 : 1;
  return x->rank - y->rank;
}

typedef struct pairs {
  pair *p;
  size_t n, cap;
  bool oom;
} pairs;

static void push(pairs *ps, int gid, int rank) {
  if (ps->n == ps->cap && !ps->oom) {
    size_t cap = ps->cap ? ps->cap * 2 : 64;
    pair *p = dist__realloc(ps->p, cap * sizeof *p);
    ps->oom = !p;
    ps->p = p ? p : ps->p;
    ps->cap = p ? cap : ps->cap;
  }
  if (!ps->oom)
    ps->p[ps->n++] = (pair){gid, rank};
}

/* Every (gid, rank) a record lists, and the members of this rank's own
 * groups (they may have left: their records list the group no more). */
static bool list_members(mon_waits *w) {
  pairs ps = {0};
  for (int r = 0; r < w->world; r++) {
    for (int i = 0; w->recs[r].present && i < w->recs[r].n; i++)
      push(&ps, w->recs[r].g[i].gid, r);
    for (int i = 0; w->recs[r].present && i < w->recs[r].n_destroyed; i++)
      push(&ps, w->recs[r].destroyed[i].gid, r); /* a member that left it */
  }
  for (int i = 0; i < MON_MAX_GROUPS; i++) {
    const mon_group *g = &dist__mon.groups[i];
    if (!atomic_load_explicit(&g->live, memory_order_acquire) || !g->granks)
      continue;
    for (int m = 0; m < g->size; m++)
      if (g->granks[m] >= 0 && g->granks[m] < w->world)
        push(&ps, g->gid, g->granks[m]);
  }
  if (ps.oom) {
    dist__free(ps.p);
    return false;
  }
  if (ps.n)
    qsort(ps.p, ps.n, sizeof *ps.p, cmp_pair);
  size_t u = 0; /* one entry per member: a record may list a group twice */
  for (size_t i = 0; i < ps.n; i++)
    if (!u || cmp_pair(&ps.p[u - 1], &ps.p[i]))
      ps.p[u++] = ps.p[i];
  w->members = ps.p;
  w->n_members = (int)u;
  return true;
}

/* Whether blocked records a and b wait in the same collective: the same
 * out-edges (dist__mon_waits_for reads only these of b). */
static bool same_coll(const mon_rec_group *a, const mon_rec_group *b) {
  return a->gid == b->gid && a->kind == b->kind && a->done == b->done && a->coll == b->coll;
}

static const mon_waits *sort_w; /* qsort has no context argument */

static int cmp_by_coll(const void *a, const void *b) {
  const mon_rec_group *x = sort_w->blocked[*(const int *)a];
  const mon_rec_group *y = sort_w->blocked[*(const int *)b];
  if (x->gid != y->gid)
    return x->gid < y->gid ? -1 : 1;
  if (x->kind != y->kind)
    return x->kind - y->kind;
  if (x->done != y->done)
    return x->done < y->done ? -1 : 1;
  if (x->coll != y->coll)
    return x->coll < y->coll ? -1 : 1;
  return *(const int *)a - *(const int *)b;
}

/* Groups the ranks blocked in a collective by the collective: op[r] is the
 * lowest rank blocked in the same one, whose ops slot holds the edges. */
static bool group_colls(mon_waits *w) {
  int *by = dist__malloc(sizeof(int) * ((size_t)w->world + 1)), n = 0;
  if (!by)
    return false;
  for (int r = 0; r < w->world; r++) {
    const mon_rec_group *b = w->blocked[r];
    w->op[r] = -1;
    if (b && !dist__mon_is_p2p(b->kind))
      by[n++] = r;
  }
  sort_w = w;
  qsort(by, (size_t)n, sizeof *by, cmp_by_coll);
  for (int i = 0; i < n; i++)
    w->op[by[i]] = i && same_coll(w->blocked[by[i - 1]], w->blocked[by[i]]) ? w->op[by[i - 1]]
                                                                            : by[i];
  dist__free(by);
  return true;
}

/* The edges of the collective rank r waits in: its group's members that
 * dist__mon_waits_for names, r included when named (callers skip it). */
static edges *coll_edges(mon_waits *w, int r) {
  edges *e = &w->ops[w->op[r]];
  if (e->done)
    return e;
  const mon_rec_group *b = w->blocked[r];
  int lo = 0, hi = w->n_members;
  while (lo < hi) { /* the first member of b's group */
    int mid = lo + (hi - lo) / 2;
    if (w->members[mid].gid < b->gid)
      lo = mid + 1;
    else
      hi = mid;
  }
  int end = lo;
  while (end < w->n_members && w->members[end].gid == b->gid)
    end++;
  e->to = dist__malloc(sizeof(int) * (size_t)(end - lo + 1));
  if (!e->to)
    return NULL;
  for (int i = lo; i < end; i++)
    if (dist__mon_waits_for(w->recs, r, b, w->members[i].rank))
      e->to[e->n++] = w->members[i].rank;
  e->done = true;
  return e;
}

mon_waits *dist__mon_waits_new(const mon_rec *recs, int world) {
  mon_waits *w = dist__calloc(1, sizeof *w);
  if (!w)
    return NULL;
  w->recs = recs;
  w->world = world;
  size_t n = world > 0 ? (size_t)world : 1;
  w->blocked = dist__calloc(n, sizeof *w->blocked);
  w->peer = dist__calloc(n, sizeof *w->peer);
  w->op = dist__calloc(n, sizeof *w->op);
  w->ops = dist__calloc(n, sizeof *w->ops);
  if (!w->blocked || !w->peer || !w->op || !w->ops)
    goto fail;
  for (int r = 0; r < world; r++)
    w->blocked[r] = dist__mon_blocked_in(&recs[r]);
  if (!list_members(w) || !group_colls(w))
    goto fail;
  /* Every collective's edges now, so a walk never meets a failed
   * allocation half way (it would see a smaller graph). */
  for (int r = 0; r < world; r++)
    if (w->op[r] == r && !coll_edges(w, r))
      goto fail;
  return w;
fail:
  dist__mon_waits_free(w);
  return NULL;
}

int dist__mon_waits_out(mon_waits *w, int r, const int **to) {
  *to = NULL;
  const mon_rec_group *b = r >= 0 && r < w->world ? w->blocked[r] : NULL;
  if (!b)
    return 0;
  if (dist__mon_is_p2p(b->kind)) { /* its peer(s): a batch's halves, or peer and peer2 */
    int n = 0, m = 0, qs[MON_PARTS_MAX];
    if (b->kind == DIST_OP_BATCH_P2P && dist__mon_parts_known(b)) {
      for (int i = 0; i < b->p2p->n_parts; i++)
        qs[m++] = b->p2p->parts[i].peer; /* a peer twice (send and receive): deduped below */
    } else {
      qs[m++] = b->peer;
      qs[m++] = b->kind == DIST_OP_BATCH_P2P ? b->peer2 : MON_PEER_NONE;
    }
    for (int i = 1; i < m; i++) /* ascending, as every edge list (a few: insertion) */
      for (int j = i; j > 0 && qs[j - 1] > qs[j]; j--) {
        int t = qs[j];
        qs[j] = qs[j - 1];
        qs[j - 1] = t;
      }
    for (int i = 0; i < m; i++) {
      int q = qs[i];
      if (q >= 0 && q < w->world && q != r && (!n || w->peer[r][n - 1] != q) &&
          dist__mon_waits_for(w->recs, r, b, q))
        w->peer[r][n++] = q;
    }
    *to = n ? w->peer[r] : NULL;
    return n;
  }
  const edges *e = &w->ops[w->op[r]];
  *to = e->to;
  return e->n;
}

const mon_rec_group *dist__mon_waits_blocked(const mon_waits *w, int r) {
  return w->blocked[r];
}

void dist__mon_waits_free(mon_waits *w) {
  if (!w)
    return;
  for (int r = 0; w->ops && r < w->world; r++)
    dist__free(w->ops[r].to);
  dist__free(w->ops);
  dist__free(w->op);
  dist__free(w->peer);
  dist__free(w->blocked);
  dist__free(w->members);
  dist__free(w);
}
