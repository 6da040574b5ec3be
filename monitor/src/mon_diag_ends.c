/* mon_diag_ends.c - where a rank's waits end: the walk along the wait-for
 * edges (mon_waits.c) from a rank to the ranks in no operation (busy
 * outside the library, exited, dead; for a rank blocked creating a group,
 * the members that skipped that call), or to both halves of a send and
 * receive that never matched, or to a receive from any rank that no send
 * meets; with a gone rank among the ends, those whose records are older
 * than what the waiting rank saw of them, dropped; the operation that
 * names an end's absence for the verdict; and the lines that say each end,
 * with the ranks blocked on it, made the verdict's culprits (an unmatched
 * pair's rules are mon_diag_pair.c's). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mon_diag_int.h"

#define is_p2p dist__mon_is_p2p
#define blocked_in dist__mon_blocked_in
#define waits_for dist__mon_waits_for
#define outside_words dist__mon_outside_words
#define verdict_here dist__mon_verdict_here
#define blame_first dist__mon_blame_first
#define novel_side dist__mon_novel_side
#define pair_alone dist__mon_pair_alone
#define drop_culprit dist__mon_drop_culprit
#define say_unmatched dist__mon_say_unmatched
#define say_end dist__mon_say_end

/* When rank r last completed an operation in any group (else its first
 * heartbeat's time is unknown: its latest). */
static int64_t last_done_ms(const mon_rec *r) {
  int64_t t = 0;
  for (int i = 0; i < r->n; i++)
    if (r->g[i].last_seq && r->g[i].last_ms > t)
      t = r->g[i].last_ms;
  return t ? t : r->hb_ms;
}

/* A rank that exited (with a code, or through exit()) while blocked in an
 * operation most likely gave up on that operation: its end is a
 * consequence of the wait, so the waits go on through it. */
static bool ended_waiting(const mon_rec *r, const mon_rec_group *b) {
  return b && (strncmp(r->died, "exited with code", 16) == 0 || strcmp(r->state, "exit") == 0);
}

/* Whether b is a receive from any rank (DIST_ANY_SOURCE): it waits for no
 * rank in particular, so when no send meets it (unmatched_peer) and it
 * has no edge, the waits end at it. */
static bool recv_from_nobody(const mon_rec_group *b) {
  return b && b->kind == DIST_OP_RECV && b->peer == DIST_ANY_SOURCE;
}

/* Adds r to sinks[0..k) unless there; the new count. */
static int add_sink(int *sinks, int k, int cap, int r) {
  for (int i = 0; i < k; i++)
    if (sinks[i] == r)
      return k;
  if (k < cap)
    sinks[k++] = r;
  return k;
}

/* A rank alive and in no operation ends the waits, unless it is blocked
 * creating a group that members skipped (mon_create.c): then they do,
 * wherever they are. Adds them, or r, to sinks[0..k); the new count. */
static int add_end(const mon_rec *recs, int r, int *sinks, int k, int cap) {
  int skip[MON_CULPRITS_MAX];
  int n = recs[r].creating.on ? dist__mon_create_skippers(recs, r, skip, MON_CULPRITS_MAX) : 0;
  for (int i = 0; i < n; i++)
    k = add_sink(sinks, k, cap, skip[i]);
  return n ? k : add_sink(sinks, k, cap, r);
}

/* Whether rank q destroyed group gid and went on: its record says so and
 * lists the group no more. Whatever it waits in now, the waits in gid end
 * at it. */
static bool left_group(const mon_rec *q, int gid) {
  return dist__mon_rec_destroyed(q, gid) && !dist__mon_rec_group(q, gid);
}

/* The group rank r destroyed that a rank still waits in for it, or NULL. */
static const mon_rec_destroyed *destroyed_waited(const mon_rec *recs, int r) {
  for (int q = 0; q < dist__mon.world; q++) {
    const mon_rec_group *b = q == r ? NULL : blocked_in(&recs[q]);
    if (b && left_group(&recs[r], b->gid) && waits_for(recs, q, b, r))
      return dist__mon_rec_destroyed(&recs[r], b->gid);
  }
  return NULL;
}

#define MON_BETWEEN_CALLS_MS 1000 /* a record's interval: shorter is no time spent */

/* Whether rank r's record is older than what rank from saw of it: from
 * completed a collective of a group they share that r's record has not
 * issued yet (a collective ends only once every member entered it), or
 * r wrote it before from entered the operation it waits in, or between
 * two calls (it says nothing of what r did since). Its record, published
 * once a second, may still show r creating the groups a job just made. */
static bool seen_past_record(const mon_rec *recs, int from, int r) {
  const mon_rec *mine = &recs[from];
  const mon_rec_group *waits = blocked_in(mine);
  if (waits && recs[r].present && recs[r].hb_ms < waits->since_ms)
    return true;
  /* between two calls when it wrote (it had completed one just before):
   * where it went next, the record does not say */
  if (!blocked_in(&recs[r]) && recs[r].present &&
      recs[r].hb_ms - last_done_ms(&recs[r]) < MON_BETWEEN_CALLS_MS)
    return true;
  for (int i = 0; i < mine->n; i++) {
    const mon_rec_group *a = &mine->g[i];
    const mon_rec_group *b = dist__mon_rec_group(&recs[r], a->gid);
    if (b && a->has_colls && b->has_colls && a->colls_done > b->colls_enq)
      return true;
  }
  return false;
}

/* With a gone rank among the ends, the ends whose records are older than
 * what rank from saw of them are dropped: they were past the state their
 * record shows (a job under a second old when a rank died). */
static int drop_stale_ends(const mon_rec *recs, int from, int *sinks, int k) {
  char how[320];
  int64_t now_ms = dist__mon_wall_ms(dist__now_ns());
  bool any_gone = false;
  for (int i = 0; i < k; i++)
    any_gone |= dist__mon_gone_how(&recs[sinks[i]], now_ms, how, sizeof how) != NULL;
  if (!any_gone)
    return k;
  int m = 0;
  for (int i = 0; i < k; i++)
    if (dist__mon_gone_how(&recs[sinks[i]], now_ms, how, sizeof how) ||
        !seen_past_record(recs, from, sinks[i]))
      sinks[m++] = sinks[i];
  return m;
}

/* Where the waits that start at rank `from` end: the ranks reached through
 * wait-for edges that are in no operation (busy outside the library,
 * exited, dead), ascending, into sinks; returns how many. A rank blocked in
 * an operation is never one: it waits for somebody. */
static int sinks_from(const mon_rec *recs, int from, int *sinks, int cap) {
  int world = dist__mon.world, n = 0, k = 0, kf = 0;
  int *queue = dist__calloc((size_t)world, sizeof(int));
  int *fallback = dist__calloc((size_t)world, sizeof(int));
  bool *seen = dist__calloc((size_t)world, sizeof(bool));
  mon_waits *wi = dist__mon_waits_new(recs, world);
  int64_t now_ms = dist__mon_wall_ms(dist__now_ns());
  if (queue && fallback && seen && wi && from >= 0 && from < world) {
    queue[n++] = from;
    seen[from] = true;
  }
  for (int h = 0; h < n; h++) {
    int r = queue[h];
    char how[320];
    bool gone = dist__mon_gone_how(&recs[r], now_ms, how, sizeof how) != NULL;
    const mon_rec_group *b = blocked_in(&recs[r]);
    int pair = gone ? -1 : dist__mon_unmatched_peer(recs, r);
    if (pair >= 0) { /* both halves are where the waits end */
      for (int x = 0; x < 2; x++) {
        int y = x ? pair : r;
        bool have = false;
        for (int i = 0; i < k; i++)
          have |= sinks[i] == y;
        if (!have && k < cap)
          sinks[k++] = y;
      }
      continue;
    }
    if (gone && ended_waiting(&recs[r], b) && r != from)
      fallback[kf++] = r; /* the end of the waits only if nothing lies beyond */
    else if (gone || !b) {
      if (r != from)
        k = gone ? add_sink(sinks, k, cap, r) : add_end(recs, r, sinks, k, cap);
      continue;
    }
    const int *to;
    int m = dist__mon_waits_out(wi, r, &to);
    if (!m && recv_from_nobody(b)) { /* a receive from any rank that no rank's send meets */
      if (k < cap)
        sinks[k++] = r;
      continue;
    }
    for (int i = 0; i < m; i++) {
      if (to[i] != r && left_group(&recs[to[i]], b->gid)) {
        k = add_sink(sinks, k, cap, to[i]); /* it went on without the group */
        seen[to[i]] = true;
      } else if (!seen[to[i]] && to[i] != r) {
        seen[to[i]] = true;
        queue[n++] = to[i];
      }
    }
  }
  for (int i = 0; !k && i < kf && i < cap; i++)
    sinks[k++] = fallback[i];
  k = drop_stale_ends(recs, from, sinks, k);
  dist__free(queue);
  dist__free(fallback);
  dist__free(seen);
  dist__mon_waits_free(wi);
  qsort(sinks, (size_t)k, sizeof *sinks, dist__mon_cmp_int);
  return k;
}

/* Where the waits through rank q end: q itself when it is in no
 * operation or gone, else where its own waits end (sinks_from); how many
 * ranks, into out. */
int dist__mon_waits_end_at(const mon_rec *recs, int q, int *out, int cap) {
  char how[320];
  int64_t now_ms = dist__mon_wall_ms(dist__now_ns());
  if (dist__mon_gone_how(&recs[q], now_ms, how, sizeof how)) {
    out[0] = q;
    return 1;
  }
  if (!blocked_in(&recs[q]))
    return add_end(recs, q, out, 0, cap);
  return sinks_from(recs, q, out, cap);
}

/* When rank r last completed an operation of group gid, on its own clock
 * (0: never, or a record without the time). */
static int64_t last_done_in(const mon_rec *r, int gid) {
  const mon_rec_group *rg = dist__mon_rec_group(r, gid);
  return rg && rg->last_seq ? rg->last_ns : 0;
}

/* Whether waiting operation a names r's absence better than b: a
 * collective before a send or receive (r is missing from a group's call),
 * then the smaller group (the most specific), then the group r used
 * longest ago (its own program order: a training step that calls each
 * group in turn comes back first to the one it left first, as a rank that
 * stopped before its tp all_reduce last completed a tp one before its last
 * dp one; when the others reached the two calls is a race), then the lower
 * group id; every rank reading the same records picks the same one. */
static bool better_wait(const mon_rec *r, const mon_rec_group *a, const mon_rec_group *b) {
  if (!b)
    return true;
  if (is_p2p(a->kind) != is_p2p(b->kind))
    return !is_p2p(a->kind);
  if (a->size != b->size)
    return a->size < b->size;
  int64_t ta = last_done_in(r, a->gid), tb = last_done_in(r, b->gid);
  if (a->gid != b->gid && ta != tb)
    return ta < tb;
  return a->gid < b->gid;
}

/* The operation that names rank r's absence for the verdict (better_wait)
 * among those of the ranks blocked on it. */
static const mon_rec_group *first_wait_for(const mon_rec *recs, int r) {
  const mon_rec_group *best = NULL;
  for (int q = 0; q < dist__mon.world; q++) {
    const mon_rec_group *b = q == r ? NULL : blocked_in(&recs[q]);
    if (b && waits_for(recs, q, b, r) && better_wait(&recs[r], b, best))
      best = b;
  }
  return best;
}

/* "the waits end at rank r, which ..." (gone: how it went, else in no
 * operation), with the ranks blocked on it. */
void dist__mon_say_end(const mon_rec *recs, int r, const char *gone, int64_t now_ms, char *buf,
                       size_t len, size_t *off) {
  char ow[512];
  const mon_rec_group *any = blocked_in(&recs[r]);
  int creator = gone ? -1 : dist__mon_skipped_for(recs, r);
  const mon_rec_destroyed *left = gone ? NULL : destroyed_waited(recs, r);
  char pw[48];
  dist__appendf(buf, len, off, "  the waits end at rank %d, which ", r);
  if (gone)
    dist__appendf(buf, len, off, "%s", gone);
  else if (left && any)
    dist__appendf(buf, len, off, "destroyed group %d (%s) and went on without it: it is "
                  "blocked in group %d (%s) %s #%llu%s, called from %s", left->gid, left->desc,
                  any->gid, any->desc, dist__mon_op_name(any->kind), dist__mon_rec_num(any),
                  dist__mon_peer_words(any->kind, any->peer, pw, sizeof pw), any->site);
  else if (left)
    dist__appendf(buf, len, off, "destroyed group %d (%s) and went on without it (%s)",
                  left->gid, left->desc,
                  outside_words(recs, r, 0, now_ms, ow, sizeof ow));
  else if (creator >= 0)
    dist__mon_say_skipped(recs, r, creator, now_ms, buf, len, off);
  else if (recs[r].creating.on)
    dist__appendf(buf, len, off, "is in no operation of a group: it is %s",
                  outside_words(recs, r, 0, now_ms, ow, sizeof ow));
  else if (recs[r].n == 0)
    dist__appendf(buf, len, off, "is destroying its process groups (its record lists none)");
  else if (recv_from_nobody(any))
    dist__appendf(buf, len, off, "is blocked in RECV #%llu from any rank with tag %d, called "
                  "from %s, and no rank sends to it", dist__mon_rec_num(any), any->tag, any->site);
  else if (!any && recs[r].store.on) /* in no operation: in a store call of the program's */
    dist__appendf(buf, len, off, "is in no operation: it is %s",
                  dist__mon_store_words(&recs[r], now_ms, ow, sizeof ow));
  else
    dist__appendf(buf, len, off, "is in no operation (%s)",
                  outside_words(recs, r, 0, now_ms, ow, sizeof ow));
  dist__mon_say_waiters(recs, r, buf, len, off);
}

/* The ranks[0..n) where the waits end, said and made the verdict's
 * culprits at this rank's own operation. */
void dist__mon_say_ends(const mon_rec *recs, mon_verdict *v, const mon_group *g, int kind,
                        uint64_t num, const char *site, const int *ranks, int n, char *buf,
                        size_t len, size_t *off) {
  int64_t now_ms = dist__mon_wall_ms(dist__now_ns());
  for (int i = 0; i < n; i++) {
    char how[320];
    say_end(recs, ranks[i], dist__mon_gone_how(&recs[ranks[i]], now_ms, how, sizeof how), now_ms, buf,
            len, off);
  }
  verdict_here(v, g, kind, num, site, ranks, n);
}

/* Where this rank's waits end (the culprits, whatever group or kind of
 * operation leads there): one line each, with the ranks blocked on it; and
 * the verdict's culprits. Nothing when the waits only go round (a cycle,
 * reported below). */
void dist__mon_say_roots(const mon_rec *recs, mon_verdict *v, char *buf, size_t len,
                         size_t *off) {
  int sinks[MON_CULPRITS_MAX];
  int k = sinks_from(recs, dist__mon.rank, sinks, MON_CULPRITS_MAX);
  int64_t now_ms = dist__mon_wall_ms(dist__now_ns());
  for (int h = 0; h < k; h++) {
    int r = sinks[h];
    char how[320];
    const char *gone = dist__mon_gone_how(&recs[r], now_ms, how, sizeof how);
    int q = gone ? -1 : dist__mon_unmatched_peer(recs, r);
    if (q >= 0) { /* one line for the pair, at its first rank */
      bool said = false;
      for (int i = 0; i < h; i++)
        said |= sinks[i] == q;
      if (!said) {
        say_unmatched(recs, r, q, buf, len, off);
        int novel = novel_side(recs, r, q);
        if (novel >= 0 && dist__mon_new_tag_side(recs, r, q) < 0) {
          dist__appendf(buf, len, off, "; rank %d", novel);
          dist__mon_say_novel(recs, novel, buf, len, off);
        }
        dist__mon_say_waiters(recs, r, buf, len, off);
      }
      continue;
    }
    say_end(recs, r, gone, now_ms, buf, len, off);
  }
  if (!k || !v)
    return;
  v->n = k;
  memcpy(v->culprits, sinks, sizeof(int) * (size_t)k);
  int q = dist__mon_unmatched_peer(recs, sinks[0]);
  if (q >= 0) { /* an unmatched pair: its first rank, at its own operation */
    for (int i = 0; i < k; i++)
      if (v->culprits[i] == q && blame_first(recs, q, sinks[0])) {
        v->culprits[i] = sinks[0];
        v->culprits[0] = q;
      }
    int alone = pair_alone(recs, sinks[0], q);
    if (alone >= 0) {
      drop_culprit(v, alone == q ? sinks[0] : q);
      drop_culprit(v, alone);
      if (v->n == MON_CULPRITS_MAX)
        v->n--;
      memmove(v->culprits + 1, v->culprits, sizeof(int) * (size_t)v->n);
      v->culprits[0] = alone;
      v->n++;
    }
    const mon_rec_group *own = blocked_in(&recs[v->culprits[0]]);
    dist__mon_verdict_at(v, own, own->site);
    return;
  }
  char how[320];
  const mon_rec_group *any = blocked_in(&recs[sinks[0]]);
  if (recv_from_nobody(any) && !dist__mon_gone_how(&recs[sinks[0]], now_ms, how, sizeof how)) {
    dist__mon_verdict_at(v, any, any->site); /* its own receive */
    return;
  }
  const mon_rec_create *cr = &recs[sinks[0]].creating;
  int creator = dist__mon_gone_how(&recs[sinks[0]], now_ms, how, sizeof how)
                    ? -1 : dist__mon_skipped_for(recs, sinks[0]);
  if (creator >= 0 && !dist__mon_create_order_odd(recs, sinks[0]))
    cr = &recs[creator].creating; /* it skipped a creation: that group and its creator's call */
  /* Blocked creating a group: the group and its call, no operation. Not
   * when its record is stale (a process stopped just after a creation). */
  if (cr->on && (creator >= 0 || !dist__mon_gone_how(&recs[sinks[0]], now_ms, how, sizeof how))) {
    v->gid = cr->gid;
    snprintf(v->gname, sizeof v->gname, "g%d", cr->gid);
    v->kind = -1;
    v->seq = 0;
    snprintf(v->site, sizeof v->site, "%s", cr->site);
    return;
  }
  /* The operation the culprit never entered, at its own call site (where
   * its waiters call it): the culprit's last call of that group is another
   * operation, whose line would not be the one named. */
  const mon_rec_group *b = first_wait_for(recs, sinks[0]);
  const mon_rec_group *rg = b ? dist__mon_rec_group(&recs[sinks[0]], b->gid) : NULL;
  dist__mon_verdict_at(v, b, b && b->site[0] ? b->site : rg && rg->last_seq ? rg->last_site : NULL);
}
