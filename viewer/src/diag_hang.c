/* diag_hang.c - hangs and deadlocks from the operation rows.
 *
 * A rank is blocked when its newest operation (among its last 64, read
 * through op_by_rank) never ended or timed out. A rank blocked in
 * (group, seq) waits for every member of the group whose highest seq there
 * is below seq (it never entered the call), and a point-to-point call waits
 * for its peer. Following those edges from a blocked rank either comes back
 * to a rank already on the path (a deadlock: the cycle is reported) or
 * stops at a rank that waits for nobody: the lagging rank, which is done,
 * dead, or busy outside the library. Blocked ranks whose groups all entered
 * the call are reported as stuck inside it. */
#include <stdlib.h>
#include <string.h>

#include "diag_int.h"
#include "vw_sql.h"

typedef struct rank_wait {
  int rank;
  bool blocked;
  vw_op op;          /* the call it is blocked in */
  int nwait;
  int *wait;         /* ranks it waits for (indexes into the rank table) */
} rank_wait;

typedef struct waits {
  int n;
  rank_wait *r;
  int *idx;          /* rank -> index in r, -1: none (ranks 0..nidx-1) */
  int nidx;
} waits;

/* A table, not a search: the graph of a 1,024-rank group asks a million
 * times. */
static int index_of(const waits *w, int rank) {
  if (w->idx && rank >= 0 && rank < w->nidx)
    return w->idx[rank];
  for (int i = 0; i < w->n; i++)
    if (w->r[i].rank == rank)
      return i;
  return -1;
}

static void add_rank(waits *w, int rank) {
  if (w->idx && rank >= 0 && rank < w->nidx)
    w->idx[rank] = w->n;
  w->r[w->n++].rank = rank;
}

/* Whether rank reached dist_finalize (ranks.end_state 'finished'): then
 * it is blocked in nothing, and a newest row that never ended lost its
 * end record (ring overflow, a full disk) rather than hung. A rank that
 * called exit() ('exited') may have given up on a call it was blocked in:
 * it stays a candidate. */
static bool finished(const vw_model *m, int rank) {
  int lo = 0, hi = m->job.nranks - 1; /* read ORDER BY rank (model_header.c) */
  while (lo <= hi) {
    int mid = lo + (hi - lo) / 2;
    if (m->job.ranks[mid].rank == rank)
      return !strcmp(m->job.ranks[mid].end_state, "finished");
    if (m->job.ranks[mid].rank < rank)
      lo = mid + 1;
    else
      hi = mid - 1;
  }
  return false;
}

/* Each rank's blocked call (vw_model_blocked_ops), into its entry. */
static int blocked_ops(vw_model *m, waits *w) {
  int *ranks = malloc(((size_t)w->n + 1) * sizeof *ranks);
  vw_op *ops = calloc((size_t)w->n + 1, sizeof *ops);
  bool *found = calloc((size_t)w->n + 1, sizeof *found);
  int rc = ranks && ops && found ? 0 : -1;
  for (int i = 0; rc == 0 && i < w->n; i++)
    ranks[i] = w->r[i].rank;
  if (rc == 0)
    rc = vw_model_blocked_ops(m, ranks, w->n, ops, found);
  for (int i = 0; rc == 0 && i < w->n; i++) {
    w->r[i].blocked = found[i] && (!strcmp(ops[i].state, "timed_out") ||
                                   !finished(m, w->r[i].rank));
    if (found[i])
      w->r[i].op = ops[i];
  }
  free(ranks);
  free(ops);
  free(found);
  return rc;
}

static void add_edge(rank_wait *a, int to) {
  for (int i = 0; i < a->nwait; i++)
    if (a->wait[i] == to)
      return;
  a->wait[a->nwait++] = to;
}

static void edges(vw_model *m, waits *w, rank_wait *a) {
  const vw_group *g = vw_model_group(m, a->op.group_id);
  if (vw_op_is_p2p(a->op.op)) {
    int to = index_of(w, a->op.root);
    if (to >= 0)
      add_edge(a, to);
    return;
  }
  for (int k = 0; g && k < g->size; k++) {
    int to = index_of(w, g->members[k]);
    if (to >= 0 && g->last_seq[k] < a->op.seq)
      add_edge(a, to);
  }
}

/* Every rank with a trace, and every group member without one (its rank
 * file is missing: it may well be the one the others wait for). */
static int build(vw_model *m, waits *w) {
  int cap = m->job.nranks;
  for (int g = 0; g < m->job.ngroups; g++)
    cap += m->job.groups[g].size;
  w->r = calloc((size_t)cap + 1, sizeof *w->r);
  if (!w->r)
    return -1;
  int top = -1;
  for (int i = 0; i < m->job.nranks; i++)
    top = m->job.ranks[i].rank > top ? m->job.ranks[i].rank : top;
  for (int g = 0; g < m->job.ngroups; g++)
    for (int k = 0; k < m->job.groups[g].size; k++)
      top = m->job.groups[g].members[k] > top ? m->job.groups[g].members[k] : top;
  if (top >= 0 && top < (1 << 24) && (w->idx = malloc(sizeof(int) * (size_t)(top + 1)))) {
    w->nidx = top + 1;
    for (int i = 0; i < w->nidx; i++)
      w->idx[i] = -1;
  }
  w->n = 0;
  for (int i = 0; i < m->job.nranks; i++)
    if (index_of(w, m->job.ranks[i].rank) < 0)
      add_rank(w, m->job.ranks[i].rank);
  for (int g = 0; g < m->job.ngroups; g++)
    for (int k = 0; k < m->job.groups[g].size; k++)
      if (index_of(w, m->job.groups[g].members[k]) < 0)
        add_rank(w, m->job.groups[g].members[k]);
  for (int i = 0; i < w->n; i++)
    if (!(w->r[i].wait = calloc((size_t)w->n + 1, sizeof(int))))
      return -1;
  if (blocked_ops(m, w) != 0)
    return -1;
  for (int i = 0; i < w->n; i++)
    if (w->r[i].blocked)
      edges(m, w, &w->r[i]);
  return 0;
}

static void free_waits(waits *w) {
  for (int i = 0; w->r && i < w->n; i++)
    free(w->r[i].wait);
  free(w->r);
  free(w->idx);
}

/* Depth-first search for a cycle from i; path holds the ranks on the way. */
static int cycle_from(const waits *w, int i, int *color, int *path, int depth, int *start) {
  color[i] = 1;
  path[depth] = i;
  for (int k = 0; k < w->r[i].nwait; k++) {
    int j = w->r[i].wait[k];
    if (color[j] == 1) {
      for (*start = 0; path[*start] != j; (*start)++)
        ;
      return depth + 1;
    }
    if (color[j] == 0) {
      int len = cycle_from(w, j, color, path, depth + 1, start);
      if (len)
        return len;
    }
  }
  color[i] = 2;
  return 0;
}

static void report_deadlock(vw_model *m, const waits *w, const int *path, int start, int len,
                            vw_diag *d) {
  d->kind = VW_DIAG_DEADLOCK;
  size_t off = 0;   // the summary goes first, once the cycle is known
  for (int i = start; i < len && d->n_cycle < VW_DIAG_LIST; i++) {
    const rank_wait *a = &w->r[path[i]];
    const rank_wait *b = &w->r[path[i + 1 < len ? i + 1 : start]];
    d->cycle[d->n_cycle] = a->rank;
    d->cycle_group[d->n_cycle] = a->op.group_id;
    d->cycle_seq[d->n_cycle++] = a->op.seq;
    char from[120] = "", gl[96];
    if (a->op.callsite[0])
      snprintf(from, sizeof from, " (called from %.100s)", a->op.callsite);
    off += (size_t)snprintf(d->text + off, off < sizeof d->text ? sizeof d->text - off : 0,
                            "  rank %d waits in %s %s #%lld%s for rank %d\n", a->rank,
                            vw_group_label(m, a->op.group_id, gl, sizeof gl), a->op.op,
                            (long long)a->op.seq, from, b->rank);
    d->blocked[d->n_blocked++] = a->rank;
  }
  const rank_wait *a = &w->r[path[start]];
  d->rank = a->rank;
  d->t_ns = a->op.t_enq;
  d->group_id = a->op.group_id;
  d->seq = a->op.seq;
  snprintf(d->op, sizeof d->op, "%s", a->op.op);
  char cr[128], lines[sizeof d->text];
  vw_fmt_ranks(d->cycle, d->n_cycle, cr, sizeof cr);
  snprintf(d->summary, sizeof d->summary,
           "deadlock: ranks %s wait for each other in a cycle across groups", cr);
  snprintf(lines, sizeof lines, "%s", d->text);
  size_t sl = strlen(d->summary);
  memcpy(d->text, d->summary, sl);
  d->text[sl] = '\n';
  snprintf(d->text + sl + 1, sizeof d->text - sl - 1, "%.3700s", lines);
}

/* The earliest blocked call that waits for somebody, followed to the end of
 * its chain. */
static void report_hang(vw_model *m, const waits *w, vw_diag *d) {
  int first = -1;
  for (int i = 0; i < w->n; i++)
    if (w->r[i].blocked && w->r[i].nwait &&
        (first < 0 || w->r[i].op.t_enq < w->r[first].op.t_enq))
      first = i;
  if (first < 0)
    return;
  int cur = first, prev = first;
  for (int hops = 0; w->r[cur].blocked && w->r[cur].nwait && hops < w->n; hops++) {
    prev = cur;
    cur = w->r[cur].wait[0];
  }
  const vw_op *blk = &w->r[prev].op;   // the call the culprit never entered
  d->kind = VW_DIAG_HANG;
  d->t_ns = blk->t_enq;
  d->group_id = blk->group_id;
  d->seq = blk->seq;
  snprintf(d->op, sizeof d->op, "%s", blk->op);
  d->rank = w->r[cur].rank;
  for (int k = 0; k < w->r[prev].nwait && d->n_culprits < VW_DIAG_LIST; k++)
    d->culprits[d->n_culprits++] = w->r[w->r[prev].wait[k]].rank;
  for (int i = 0; i < w->n && d->n_blocked < VW_DIAG_LIST; i++)
    if (w->r[i].blocked && w->r[i].op.group_id == blk->group_id && w->r[i].op.seq == blk->seq)
      d->blocked[d->n_blocked++] = w->r[i].rank;
  vw_op last;
  bool found = false;
  vw_model_last_op(m, d->rank, blk->group_id, true, &last, &found);
  d->last_done_seq = found ? last.seq : 0;
  snprintf(d->last_done_op, sizeof d->last_done_op, "%s", found ? last.op : "");
  const vw_rank_info *ri = vw_model_rank(m, d->rank);
  char br[128], why[160] = "", gl[96], gl2[96];
  vw_fmt_ranks(d->blocked, d->n_blocked, br, sizeof br);
  if (w->r[cur].blocked)
    snprintf(why, sizeof why, "; it is blocked in %s %s #%lld",
             vw_group_label(m, w->r[cur].op.group_id, gl2, sizeof gl2), w->r[cur].op.op,
             (long long)w->r[cur].op.seq);
  else if (ri && strcmp(ri->end_state, "running"))
    snprintf(why, sizeof why, "; its trace ends %s", ri->end_state);
  else if (!ri)
    snprintf(why, sizeof why, "; its rank file is missing from this trace");
  char last_s[80];
  if (found)
    snprintf(last_s, sizeof last_s, "last completed %s #%lld", last.op, (long long)last.seq);
  else
    snprintf(last_s, sizeof last_s, "it has completed no operation in this group");
  snprintf(d->summary, sizeof d->summary,
           "hang in %s at #%lld %s: rank %d is behind (%s); rank%s %s blocked in it",
           vw_group_label(m, d->group_id, gl, sizeof gl), (long long)d->seq, d->op, d->rank, last_s, d->n_blocked > 1 ? "s" : "",
           br);
  snprintf(d->text, sizeof d->text,
           "%s\n  rank %d (host %s, pid %d) has not entered %s #%lld: %s%s\n"
           "  rank%s %s %s blocked in %s #%lld%s%s\n",
           d->summary, d->rank, ri ? ri->host : "?", ri ? ri->pid : -1, d->op,
           (long long)d->seq, last_s, why, d->n_blocked > 1 ? "s" : "", br,
           d->n_blocked > 1 ? "are" : "is", d->op, (long long)d->seq,
           blk->callsite[0] ? ", called from " : "", blk->callsite);
}

/* Blocked ranks whose group entered the call: stuck inside it. */
static void report_stuck(vw_model *m, const waits *w, vw_diag *d) {
  for (int i = 0; i < w->n; i++) {
    if (!w->r[i].blocked)
      continue;
    const vw_op *o = &w->r[i].op;
    d->kind = VW_DIAG_STUCK;
    d->group_id = o->group_id;
    d->seq = o->seq;
    snprintf(d->op, sizeof d->op, "%s", o->op);
    for (int k = 0; k < w->n && d->n_blocked < VW_DIAG_LIST; k++)
      if (w->r[k].blocked && w->r[k].op.group_id == o->group_id && w->r[k].op.seq == o->seq)
        d->blocked[d->n_blocked++] = w->r[k].rank;
    char br[128], gl[96];
    vw_fmt_ranks(d->blocked, d->n_blocked, br, sizeof br);
    snprintf(d->summary, sizeof d->summary,
             "stuck in %s at #%lld %s: rank%s %s never left it, and every member "
             "entered it", vw_group_label(m, o->group_id, gl, sizeof gl), (long long)o->seq, o->op, d->n_blocked > 1 ? "s" : "", br);
    snprintf(d->text, sizeof d->text, "%s\n  one of them stopped inside the operation, or the "
             "transport is stuck\n", d->summary);
    return;
  }
}

int vw_diag_hang(vw_model *m, vw_diag *d) {
  waits w = {0};
  if (build(m, &w) != 0) {
    free_waits(&w);
    return -1;
  }
  int *color = calloc((size_t)w.n + 1, sizeof(int));
  int *path = calloc((size_t)w.n + 1, sizeof(int));
  int start = 0, len = 0;
  for (int i = 0; color && path && i < w.n && !len; i++)
    if (w.r[i].blocked && !color[i])
      len = cycle_from(&w, i, color, path, 0, &start);
  if (len)
    report_deadlock(m, &w, path, start, len, d);
  else
    report_hang(m, &w, d);
  if (d->kind == VW_DIAG_NONE)
    report_stuck(m, &w, d);
  free(color);
  free(path);
  free_waits(&w);
  return 0;
}
