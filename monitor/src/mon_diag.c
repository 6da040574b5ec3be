/* mon_diag.c - the diagnosis of a stalled operation, from every rank's
 * progress record: who has not entered it and why (slow, blocked
 * elsewhere, exited, dead, not responding), what each last completed and
 * where, and the wait-for cycles across groups.
 *
 * A rank R waits for rank Q when R's oldest operation in flight is #s of
 * group G and Q is a member of G (its record lists G) that has not entered
 * #s. A cycle in that graph is a deadlock; a rank that is merely idle
 * (sleeping, computing) has no outgoing edge, so an absence is never
 * called a cycle. */
#include <stdio.h>
#include <stdlib.h>

#include "mon_int.h"

static const char *op_name(int kind) {
  return kind >= 0 && kind < DIST_OP_COUNT_ ? dist_op_name((dist_op_kind)kind) : "?";
}

static const char *sec_word(int64_t ms, char *buf, size_t len) {
  snprintf(buf, len, "%.1f s", (double)ms / 1000);
  return buf;
}

/* The oldest operation rank r is blocked in, across its groups. */
static const mon_rec_group *blocked_in(const mon_rec *r) {
  const mon_rec_group *best = NULL;
  for (int i = 0; r->present && i < r->n; i++)
    if (r->g[i].enq > r->g[i].done && r->g[i].kind >= 0 &&
        (!best || r->g[i].since_ms < best->since_ms))
      best = &r->g[i];
  return best;
}

/* Why rank r cannot be heard from, or NULL when it is alive and
 * publishing. */
static const char *gone_how(const mon_rec *r, int64_t now_ms, char *buf, size_t len) {
  char s[32];
  if (!r->present) {
    snprintf(buf, len, "has published no progress%s%s", r->died[0] ? ": " : "", r->died);
    return buf;
  }
  if (r->died[0]) {
    snprintf(buf, len, "%s %s", strncmp(r->died, "exited", 6) == 0 ? "" : "died:", r->died);
    return buf[0] == ' ' ? buf + 1 : buf;
  }
  if (strcmp(r->state, "exit") == 0) {
    snprintf(buf, len, "exited (%s)", r->note);
    return buf;
  }
  if (strcmp(r->state, "done") == 0) {
    snprintf(buf, len, "has destroyed its process group");
    return buf;
  }
  if (r->proc_state == 'X' || r->proc_state == 'Z') {
    snprintf(buf, len, "is dead: its process is gone (last heartbeat %s ago)",
             sec_word(now_ms - r->hb_ms, s, sizeof s));
    return buf;
  }
  if (now_ms - r->hb_ms <= MON_HB_STALE_MS)
    return NULL;
  if (r->proc_state == 'T' || r->proc_state == 't')
    snprintf(buf, len, "is not responding: its process is stopped (SIGSTOP or a debugger), "
             "no heartbeat for %s", sec_word(now_ms - r->hb_ms, s, sizeof s));
  else
    snprintf(buf, len, "is not responding: no heartbeat for %s",
             sec_word(now_ms - r->hb_ms, s, sizeof s));
  return buf;
}

static void say_last(char *buf, size_t len, size_t *off, const mon_rec_group *rg) {
  if (!rg || rg->done == 0) {
    dist__appendf(buf, len, off, "it has completed no operation in this group");
    return;
  }
  dist__appendf(buf, len, off, "last completed %s #%llu, called from %s", op_name(rg->last_kind),
                (unsigned long long)rg->done, rg->last_site);
}

/* One line for a member that has not entered #seq. */
static void say_absent(char *buf, size_t len, size_t *off, const mon_rec *r, int gid,
                       uint64_t seq, int kind, int64_t now_ms) {
  const mon_rec_group *rg = dist__mon_rec_group(r, gid);
  char how[320], s[32];
  const char *gone = gone_how(r, now_ms, how, sizeof how);
  dist__appendf(buf, len, off, "  rank %d (host %s, pid %d) ", r->rank,
                r->present ? r->host : "?", r->present ? (int)r->pid : -1);
  if (gone)
    dist__appendf(buf, len, off, "%s; it has not entered %s #%llu; ", gone, op_name(kind),
                  (unsigned long long)seq);
  else
    dist__appendf(buf, len, off, "has not entered %s #%llu: ", op_name(kind),
                  (unsigned long long)seq);
  say_last(buf, len, off, rg);
  if (gone)
    dist__appendf(buf, len, off, " (as of its last heartbeat)");
  const mon_rec_group *b = gone ? NULL : blocked_in(r);
  if (b && b->gid != gid)
    dist__appendf(buf, len, off, "; it is blocked in group %d (%s) %s #%llu, called from %s, "
                  "for %s", b->gid, b->desc, op_name(b->kind), (unsigned long long)(b->done + 1), b->site,
                  sec_word(now_ms - b->since_ms, s, sizeof s));
  else if (!gone && rg && rg->done)
    dist__appendf(buf, len, off, "; busy outside the library for %s",
                  sec_word(now_ms - rg->last_ms, s, sizeof s));
  dist__appendf(buf, len, off, "\n");
  if (r->stack[0])
    dist__appendf(buf, len, off, "    its stack:\n%s", r->stack);
  if (r->crash[0])
    dist__appendf(buf, len, off, "    %s", r->crash);
}

static int cmp_int(const void *a, const void *b) {
  return *(const int *)a - *(const int *)b;
}

bool dist__mon_recs_fresh(const mon_group *g, const mon_rec *recs, int64_t since_ms) {
  int64_t now_ms = dist__mon_wall_ms(dist__now_ns());
  for (int i = 0; i < g->size; i++) {
    const mon_rec *r = &recs[g->granks[i]];
    char how[320];
    if (g->granks[i] != dist__mon.rank && r->present && r->hb_ms < since_ms &&
        !gone_how(r, now_ms, how, sizeof how))
      return false;
  }
  return true;
}

bool dist__mon_recs_settled(const mon_group *g, const mon_rec *recs) {
  const char *l = getenv("DIST_LAUNCHER");
  if (!l || strcmp(l, "distrun") != 0)
    return true;
  int64_t now_ms = dist__mon_wall_ms(dist__now_ns());
  for (int i = 0; i < g->size; i++) {
    const mon_rec *r = &recs[g->granks[i]];
    char how[320];
    if (g->granks[i] != dist__mon.rank && !r->died[0] && gone_how(r, now_ms, how, sizeof how) &&
        (r->proc_state == 'X' || r->proc_state == 'Z' || strcmp(r->state, "exit") == 0))
      return false;
  }
  return true;
}

char *dist__mon_diagnose(const mon_group *g, uint64_t seq, mon_rec *recs, const char *what,
                         bool *lowest, int *n_cycles) {
  const size_t len = 16384;
  char *buf = dist__malloc(len);
  if (!buf)
    return NULL;
  size_t off = 0;
  int64_t now_ms = dist__mon_wall_ms(dist__now_ns());
  const mon_op *op = &g->ring[seq % MON_RING];
  int kind = atomic_load(&op->kind);
  char site[MON_SITE_LEN], s[32];
  dist__mon_symbolize(atomic_load(&op->caller), site, sizeof site);
  int64_t waited = now_ms - dist__mon_wall_ms(atomic_load(&op->t_enq_ns));
  dist__appendf(buf, len, &off, "%s in group %d (%s) at %s #%llu: waited %s of its %s timeout\n",
                what, g->gid, g->desc[0] ? g->desc : g->name,
                op_name(kind), (unsigned long long)seq, sec_word(waited, s, sizeof s),
                sec_word(g->timeout_ms, s + 16, 16));
  int *in = dist__malloc(sizeof(int) * (size_t)g->size), n_in = 0;
  int absent = 0;
  for (int i = 0; in && i < g->size; i++) {
    int r = g->granks[i];
    if (r < 0 || r >= dist__mon.world)
      continue;
    const mon_rec_group *rg = dist__mon_rec_group(&recs[r], g->gid);
    char how[320];
    const char *gone = gone_how(&recs[r], now_ms, how, sizeof how);
    if (r == dist__mon.rank || (rg && rg->enq >= seq && !gone)) {
      in[n_in++] = r;
      continue;
    }
    if (rg && rg->enq >= seq) { /* it was in the operation, then ended */
      dist__appendf(buf, len, &off, "  rank %d (host %s, pid %d) entered %s #%llu, then %s\n",
                    r, recs[r].host, (int)recs[r].pid, op_name(kind), (unsigned long long)seq,
                    gone);
      continue;
    }
    absent++;
    say_absent(buf, len, &off, &recs[r], g->gid, seq, kind, now_ms);
  }
  if (in && n_in) {
    qsort(in, (size_t)n_in, sizeof *in, cmp_int);
    char ranks[256];
    dist__format_ranks(in, (size_t)n_in, ranks, sizeof ranks);
    dist__mon_symbolize(atomic_load(&op->caller), site, sizeof site);
    bool lost = strcmp(what, "lost peer") == 0;
    dist__appendf(buf, len, &off, "  rank%s %s %s %s %s #%llu, called from %s (rank %d)\n",
                  n_in > 1 ? "s" : "", ranks, lost ? (n_in > 1 ? "had" : "has") : n_in > 1 ? "are" : "is",
                  lost ? "entered" : "blocked in", op_name(kind),
                  (unsigned long long)seq, site, dist__mon.rank);
    *lowest = in[0] == dist__mon.rank;
  } else {
    *lowest = true;
  }
  if (!absent)
    dist__appendf(buf, len, &off, "  every member has entered it: one of them stopped inside "
                  "the operation, or the transport is stuck\n");
  *n_cycles = dist__mon_cycles(recs, dist__mon.world, buf, len, &off);
  dist__free(in);
  if (off && buf[off - 1] == '\n')
    buf[--off] = '\0';
  return buf;
}

/* --- the wait-for graph --------------------------------------------------- */

/* Whether rank q is a member of gid (its record lists it) not yet in #seq. */
static bool waits_for(const mon_rec *recs, int q, int gid, uint64_t seq) {
  const mon_rec_group *qg = dist__mon_rec_group(&recs[q], gid);
  return qg && qg->enq < seq;
}

typedef struct walk {
  const mon_rec *recs;
  int world;
  int *color, *stack, depth;
  char *seen;          /* signatures of the cycles reported */
  size_t seen_len;
  char *buf;
  size_t len, *off;
  int found;
} walk;

static void report_cycle(walk *w, int from) {
  /* The cycle is stack[from..depth); its signature is its sorted ranks. */
  int k = w->depth - from, sorted[64];
  if (k > 64)
    return;
  memcpy(sorted, w->stack + from, sizeof(int) * (size_t)k);
  qsort(sorted, (size_t)k, sizeof *sorted, cmp_int);
  char sig[512];
  dist__format_ranks(sorted, (size_t)k, sig, sizeof sig);
  size_t sl = strlen(sig);
  for (size_t p = 0; p < w->seen_len;) {
    if (strcmp(w->seen + p, sig) == 0)
      return;
    p += strlen(w->seen + p) + 1;
  }
  if (w->seen_len + sl + 1 < 4096) {
    memcpy(w->seen + w->seen_len, sig, sl + 1);
    w->seen_len += sl + 1;
  }
  w->found++;
  dist__appendf(w->buf, w->len, w->off, "  deadlock: a wait-for cycle of %d ranks across "
                "groups:\n", k);
  for (int i = from; i < w->depth; i++) {
    int r = w->stack[i], q = w->stack[i + 1 < w->depth ? i + 1 : from];
    const mon_rec_group *b = blocked_in(&w->recs[r]);
    dist__appendf(w->buf, w->len, w->off,
                  "    rank %d waits in group %d (%s) %s #%llu (called from %s) for rank %d\n", r,
                  b->gid, b->desc, op_name(b->kind), (unsigned long long)(b->done + 1), b->site, q);
  }
}

static void dfs(walk *w, int r) {
  w->color[r] = 1;
  w->stack[w->depth++] = r;
  const mon_rec_group *b = blocked_in(&w->recs[r]);
  for (int q = 0; b && q < w->world; q++) {
    if (q == r || !waits_for(w->recs, q, b->gid, b->done + 1))
      continue;
    if (w->color[q] == 1) {
      for (int i = 0; i < w->depth; i++)
        if (w->stack[i] == q)
          report_cycle(w, i);
    } else if (w->color[q] == 0) {
      dfs(w, q);
    }
  }
  w->depth--;
  w->color[r] = 2;
}

int dist__mon_cycles(const mon_rec *recs, int world, char *buf, size_t len, size_t *off) {
  walk w = {.recs = recs, .world = world, .buf = buf, .len = len, .off = off};
  w.color = dist__calloc((size_t)world, sizeof(int));
  w.stack = dist__calloc((size_t)world + 1, sizeof(int));
  w.seen = dist__malloc(4096);
  if (w.color && w.stack && w.seen)
    for (int r = 0; r < world; r++)
      if (w.color[r] == 0)
        dfs(&w, r);
  dist__free(w.color);
  dist__free(w.stack);
  dist__free(w.seen);
  return w.found;
}
