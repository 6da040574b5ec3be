/* mon_diag_left.c - a member that destroyed a group and went on, while the
 * others call the group's next collective: the collective counts parted.
 * That is a desync (distrun: exit 10), in the words the TCP engine
 * (tcp_coll.c left_before) and the checking layer (wrapper_pg/src/absent.c
 * report_left) use when they hear a member leave, not a hang: whatever
 * the member does now (blocked in another group's operation, busy outside
 * the library), it never comes back to the group.
 *
 * The shared-memory engine hears nothing of a destroy, and the checking
 * layer only at the group's timeout, so the members blocked in the
 * collective learn it from the leaver's record: its "d" line
 * (mon_record.h) says it destroyed the group, after how many collectives,
 * its last operation there and where the program destroyed it. One record
 * proves it (a destroy is never undone, and a group id is never reused),
 * so the watchdog fails the operation at once (mon_watchdog.c). A member
 * that destroyed the group with this collective pending (issued, never
 * waited) did not leave before it: its destroy is the cause
 * (core/src/pg/pg_cause.c). A rank blocked elsewhere whose waits end at
 * such a member (the member itself, in its next group's barrier, when its
 * own wait times out first) reports the same desync. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mon_diag_int.h"

bool dist__mon_left_before(const mon_rec *recs, int r, int gid, mon_at_op o, int64_t now_ms) {
  const mon_rec *q = &recs[r];
  const mon_rec_destroyed *d = dist__mon_rec_destroyed(q, gid);
  char how[320];
  if (!d || !o.coll || dist__mon_rec_group(q, gid) ||
      dist__mon_gone_how(q, now_ms, how, sizeof how))
    return false; /* a rank that ended is an early end's to name (distrun's rule 1) */
  return !d->has_counts || d->colls < o.coll;
}

int dist__mon_leavers(const mon_group *g, mon_at_op o, const mon_rec *recs, int *out, int cap) {
  int64_t now_ms = dist__mon_wall_ms(dist__now_ns());
  int n = 0;
  for (int i = 0; i < g->size && n < cap; i++) {
    int r = g->granks[i];
    if (r < 0 || r >= dist__mon.world || r == dist__mon.rank ||
        dist__mon_is_in(dist__mon_rec_group(&recs[r], g->gid), o))
      continue;
    if (dist__mon_left_before(recs, r, g->gid, o, now_ms))
      out[n++] = r;
  }
  qsort(out, (size_t)n, sizeof *out, dist__mon_cmp_int);
  return n;
}

void dist__mon_say_left_head(const char *what, const mon_left_at *at, const int *left, int n,
                             char *buf, size_t len, size_t *off) {
  char list[256];
  size_t lo = 0;
  list[0] = '\0';
  for (int i = 0; i < n; i++)
    dist__appendf(list, sizeof list, &lo, "%s%d", i ? "," : "", left[i]);
  dist__appendf(buf, len, off, "%s in group %d (%s, %d ranks) at %s #%llu: %s %s left the group "
                "(destroyed it or exited) before this collective; the collective counts "
                "differ\n", what, at->gid, at->desc, at->size, dist__mon_op_name(at->kind),
                at->num, n > 1 ? "ranks" : "rank", list);
}

void dist__mon_say_left(const mon_rec *recs, int r, int gid, int64_t now_ms, char *buf,
                        size_t len, size_t *off) {
  const mon_rec *q = &recs[r];
  const mon_rec_destroyed *d = dist__mon_rec_destroyed(q, gid);
  if (!d)
    return;
  dist__appendf(buf, len, off, "  rank %d (host %s, pid %d): left", r, q->host, (int)q->pid);
  if (d->has_counts)
    dist__appendf(buf, len, off, " after %llu collective%s", (unsigned long long)d->colls,
                  d->colls == 1 ? "" : "s");
  if (d->has_counts && d->last_kind >= 0)
    dist__appendf(buf, len, off, "; its last operation was %s #%llu, called from %s",
                  dist__mon_op_name(d->last_kind), (unsigned long long)d->last_num,
                  d->last_site[0] ? d->last_site : "?");
  dist__appendf(buf, len, off, "; it destroyed the group%s%s%s and went on: it is ",
                d->site[0] ? ", called from " : "", d->site, d->site[0] ? "," : "");
  const mon_rec_group *b = dist__mon_blocked_in(q);
  char pw[48], ow[512], s[32];
  if (b)
    dist__appendf(buf, len, off, "blocked in group %d (%s) %s #%llu%s, called from %s, for %s",
                  b->gid, b->desc, dist__mon_op_name(b->kind), dist__mon_rec_num(b),
                  dist__mon_peer_words(b->kind, b->peer, pw, sizeof pw), b->site,
                  dist__mon_sec_word(now_ms - b->since_ms, s, sizeof s));
  else
    dist__appendf(buf, len, off, "%s", dist__mon_outside_words(recs, r, d->ms, now_ms, ow,
                                                                sizeof ow));
  dist__appendf(buf, len, off, "  <- collective count differs\n");
}

void dist__mon_verdict_left(mon_verdict *v, const mon_rec *recs, const mon_left_at *at,
                            const int *left, int n) {
  const mon_rec_destroyed *d = dist__mon_rec_destroyed(&recs[left[0]], at->gid);
  /* the first leaver's own call: its destroy, else its last one there */
  const char *site = !d ? "" : d->site[0] ? d->site : d->last_site;
  v->n = n;
  memcpy(v->culprits, left, sizeof(int) * (size_t)n);
  v->gid = at->gid;
  snprintf(v->gname, sizeof v->gname, "%s", at->desc);
  v->kind = at->kind;
  v->seq = at->num;
  snprintf(v->site, sizeof v->site, "%s", site);
  snprintf(v->field, sizeof v->field, "collective count");
  v->desync = true;
}

int dist__mon_left_ends(const mon_rec *recs, const mon_rec_group **b, int *left, int cap) {
  int ends[MON_CULPRITS_MAX], world = dist__mon.world;
  bool any = false; /* most jobs destroy no group while they run: no walk then */
  for (int r = 0; r < world && !any; r++)
    any = recs[r].present && recs[r].n_destroyed > 0;
  int n = any ? dist__mon_waits_end_at(recs, dist__mon.rank, ends, MON_CULPRITS_MAX) : 0;
  int64_t now_ms = dist__mon_wall_ms(dist__now_ns());
  for (int i = 0; i < n; i++)
    for (int q = 0; q < world; q++) {
      const mon_rec_group *w = q == ends[i] ? NULL : dist__mon_blocked_in(&recs[q]);
      mon_at_op o = w ? dist__mon_at_blocked(w) : (mon_at_op){0};
      if (!w || dist__mon_is_p2p(w->kind) || !w->has_colls ||
          !dist__mon_left_before(recs, ends[i], w->gid, o, now_ms))
        continue;
      int k = 0; /* every member that left before it */
      for (int r = 0; r < world && k < cap; r++)
        if (r != q && !dist__mon_is_in(dist__mon_rec_group(&recs[r], w->gid), o) &&
            dist__mon_left_before(recs, r, w->gid, o, now_ms))
          left[k++] = r;
      *b = w;
      return k;
    }
  return 0;
}

void dist__mon_say_left_elsewhere(const mon_rec *recs, const char *what, const mon_rec_group *b,
                                  const int *left, int n, mon_verdict *v, char *buf, size_t len,
                                  size_t *off) {
  mon_at_op o = dist__mon_at_blocked(b);
  mon_left_at at = {b->gid, b->desc, b->size, b->kind, dist__mon_rec_num(b)};
  int64_t now_ms = dist__mon_wall_ms(dist__now_ns());
  dist__mon_say_left_head(what, &at, left, n, buf, len, off);
  for (int i = 0; i < n; i++)
    dist__mon_say_left(recs, left[i], b->gid, now_ms, buf, len, off);
  int world = dist__mon.world, k = 0;
  int *in = dist__malloc(sizeof(int) * (size_t)world);
  for (int q = 0; in && q < world; q++) {
    const mon_rec_group *w = dist__mon_blocked_in(&recs[q]);
    mon_at_op x = w ? dist__mon_at_blocked(w) : (mon_at_op){0};
    if (w && w->gid == b->gid && x.kind == o.kind && x.coll == o.coll)
      in[k++] = q;
  }
  if (k) {
    char ranks[256];
    dist__format_ranks(in, (size_t)k, ranks, sizeof ranks);
    dist__appendf(buf, len, off, "  rank%s %s %s blocked in %s #%llu, called from %s\n",
                  k > 1 ? "s" : "", ranks, k > 1 ? "are" : "is", dist__mon_op_name(b->kind),
                  at.num, b->site);
  }
  dist__free(in);
  /* where this rank's own wait led it there */
  const mon_rec_group *mine = dist__mon_blocked_in(&recs[dist__mon.rank]);
  char pw[48];
  if (mine && mine != b)
    dist__appendf(buf, len, off, "  rank %d waits for them in group %d (%s) %s #%llu%s, called "
                  "from %s\n", dist__mon.rank, mine->gid, mine->desc,
                  dist__mon_op_name(mine->kind), dist__mon_rec_num(mine),
                  dist__mon_peer_words(mine->kind, mine->peer, pw, sizeof pw), mine->site);
  dist__mon_verdict_left(v, recs, &at, left, n);
}
