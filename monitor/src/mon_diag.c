/* mon_diag.c - the diagnosis of a stalled operation, from every rank's
 * progress record: who has not entered it and why (slow, blocked
 * elsewhere, exited, dead, not responding), what each last completed and
 * where; the wait-for cycles across groups are mon_cycle.c's.
 *
 * A rank R waits for rank Q when R's oldest operation in flight is
 * collective #s of group G and Q is a member of G (its record lists G)
 * that has not entered that collective: it has not reached #s, or its #s
 * is another operation (point-to-point and collectives share a group's
 * numbers, so ranks 0-1 in RECV #4 are not in the others' ALL_REDUCE #4);
 * or when R's oldest operation is a send or receive with Q that Q is not
 * in the other half of (a receive waits for a send). A cycle in that graph
 * is a deadlock; a rank that is merely idle (sleeping, computing) has no
 * outgoing edge, so an absence is never called a cycle. mon_waits.c finds
 * the edges, once per operation, so the walks (mon_cycle.c) stay linear in
 * the ranks. */
#include <stdio.h>
#include <stdlib.h>

#include "mon_diag_int.h"

const char *dist__mon_op_name(int kind) {
  return kind >= 0 && kind < DIST_OP_COUNT_ ? dist_op_name((dist_op_kind)kind) : "?";
}

static const char *sec_word(int64_t ms, char *buf, size_t len) {
  snprintf(buf, len, "%.1f s", (double)ms / 1000);
  return buf;
}

/* What rank who, in no operation of a group, does: creating a group in
 * dist_new_group or dist_split_group (its record's "c" line: blocked
 * there until the other members come; the members that skipped the call,
 * mon_create.c, named), else busy outside the library since idle_ms. */
static const char *outside_words(const mon_rec *recs, int who, int64_t idle_ms, int64_t now_ms,
                                 char *buf, size_t len) {
  const mon_rec *r = &recs[who];
  char s[32], late[320] = "the other members have not joined";
  if (r->creating.on) {
    int skip[MON_CULPRITS_MAX], n = dist__mon_create_skippers(recs, who, skip, MON_CULPRITS_MAX);
    char ranks[128];
    if (n) {
      dist__format_ranks(skip, (size_t)n, ranks, sizeof ranks);
      snprintf(late, sizeof late, "rank%s %s %s not joined: %s", n > 1 ? "s" : "", ranks,
               n > 1 ? "have" : "has",
               n == 1 && dist__mon_create_order_odd(recs, skip[0])
                   ? "it creates another group as that call"
                   : n > 1 ? "they never made that call" : "it never made that call");
    }
    snprintf(buf, len, "blocked in %s for %s, creating group %d (%d ranks), called "
             "from %s, which %s", r->creating.call[0] ? r->creating.call : "dist_new_group",
             sec_word(now_ms - r->creating.since_ms, s, sizeof s), r->creating.gid,
             r->creating.size, r->creating.site, late);
  } else {
    snprintf(buf, len, "busy outside the library for %s", sec_word(now_ms - idle_ms, s, sizeof s));
  }
  return buf;
}

#define is_p2p dist__mon_is_p2p
#define is_in dist__mon_is_in
#define at_blocked dist__mon_at_blocked
#define blocked_in dist__mon_blocked_in
#define halves dist__mon_halves
#define waits_for dist__mon_waits_for
typedef mon_at_op at_op;

/* Whether blocked records a and b (of one group) are in the same operation. */
static bool same_op(const mon_rec_group *a, const mon_rec_group *b) {
  at_op x = at_blocked(a), y = at_blocked(b);
  return x.kind == y.kind && (x.coll ? x.coll == y.coll : x.seq == y.seq);
}

/* The number (per kind) reports print for the operation a blocked record
 * is in, and for its last completed one (mon_record.h; an older record:
 * the ordinal). */
unsigned long long dist__mon_rec_num(const mon_rec_group *b) {
  return (unsigned long long)(b->has_num ? b->num : b->done + 1);
}
static unsigned long long rec_last(const mon_rec_group *b) {
  return (unsigned long long)(b->has_num ? b->last_num : b->last_seq);
}

/* " from rank Q" / " to rank Q" for a point-to-point operation. */
const char *dist__mon_peer_words(int kind, int peer, char *buf, size_t len) {
  if (peer >= 0 && (kind == DIST_OP_SEND || kind == DIST_OP_RECV))
    snprintf(buf, len, " %s rank %d", kind == DIST_OP_SEND ? "to" : "from", peer);
  else if (peer >= 0)
    snprintf(buf, len, " with rank %d", peer);
  else
    buf[0] = '\0';
  return buf;
}

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
static bool blame_first(const mon_rec *recs, int r, int q) {
  const mon_rec_group *a = blocked_in(&recs[r]), *b = blocked_in(&recs[q]);
  int changed = dist__mon_new_tag_side(recs, r, q);
  if (changed >= 0)
    return changed == r;
  if ((a->tag != 0) != (b->tag != 0))
    return a->tag != 0;
  return a->kind == DIST_OP_RECV;
}

/* Why rank r cannot be heard from, or NULL when it is alive and
 * publishing. */
const char *dist__mon_gone_how(const mon_rec *r, int64_t now_ms, char *buf, size_t len) {
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
  /* A live process on this host (running, sleeping, in a system call)
   * whose monitor thread is late is slow, not gone: with more ranks than
   * cores its writer can miss MON_HB_STALE_MS. Its last record stands
   * until MON_HB_LIVE_STALE_MS. */
  bool live = r->proc_state == 'R' || r->proc_state == 'S' || r->proc_state == 'D';
  if (now_ms - r->hb_ms <= (live ? MON_HB_LIVE_STALE_MS : MON_HB_STALE_MS))
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
  if (!rg || rg->last_seq == 0) {
    dist__appendf(buf, len, off, "its last record shows no completed operation in this group");
    return;
  }
  dist__appendf(buf, len, off, "last completed %s #%llu, called from %s", dist__mon_op_name(rg->last_kind),
                rec_last(rg), rg->last_site);
}

/* Whether a collective of kind needs every member to complete anywhere:
 * not a rooted one (a broadcast's reader, a gather's sender completes with
 * the root alone). */
static bool needs_everyone(int kind) {
  switch (kind) {
  case DIST_OP_BROADCAST: case DIST_OP_REDUCE: case DIST_OP_GATHER: case DIST_OP_SCATTER:
  case DIST_OP_BROADCAST_BYTES: case DIST_OP_GATHER_BYTES: case DIST_OP_SCATTER_BYTES:
    return false;
  default:
    return !is_p2p(kind);
  }
}

/* One line for a member that has not entered #seq. g: this rank's own view
 * of the group, fresher than a dead rank's last heartbeat. */
static void say_absent(char *buf, size_t len, size_t *off, const mon_rec *recs, int who,
                       const mon_group *g, uint64_t seq, int kind, int64_t now_ms) {
  const mon_rec *r = &recs[who];
  int gid = g->gid;
  const mon_rec_group *rg = dist__mon_rec_group(r, gid);
  char how[320], s[32];
  const char *gone = dist__mon_gone_how(r, now_ms, how, sizeof how);
  dist__appendf(buf, len, off, "  rank %d (host %s, pid %d) ", r->rank,
                r->present ? r->host : "?", r->present ? (int)r->pid : -1);
  unsigned long long num = (unsigned long long)dist__mon_num(g, seq);
  if (gone)
    dist__appendf(buf, len, off, "%s; it has not entered %s #%llu; ", gone, dist__mon_op_name(kind), num);
  else
    dist__appendf(buf, len, off, "has not entered %s #%llu: ", dist__mon_op_name(kind), num);
  /* A rank that died within a second of its last publication looks as if
   * it had done nothing; but every member enters a collective this rank
   * completed that needs every member (not a rooted one, which a reader
   * or sender completes without the others, nor one that ended in a
   * failure: the dead rank's loss failed it). */
  uint64_t my_done = seq - 1; /* this rank ended every operation before #seq */
  const mon_op *prev = &g->ring[my_done % MON_RING];
  int my_kind = my_done && atomic_load(&prev->seq) == my_done && !atomic_load(&prev->failed)
                    ? atomic_load(&prev->kind) : -1;
  if (my_kind >= 0 && !needs_everyone(my_kind))
    my_kind = -1;
  if (gone && (!rg || rg->done < my_done) && my_kind >= 0 && !is_p2p(my_kind)) {
    dist__appendf(buf, len, off, "it took part in %s #%llu at least (this rank completed it)",
                  dist__mon_op_name(my_kind), (unsigned long long)dist__mon_num(g, my_done));
  } else {
    say_last(buf, len, off, rg);
    if (gone)
      dist__appendf(buf, len, off, " (as of its last heartbeat)");
  }
  const mon_rec_group *b = gone ? NULL : blocked_in(r);
  char pw[48], ow[512];
  if (b && b->gid != gid)
    dist__appendf(buf, len, off, "; it is blocked in group %d (%s) %s #%llu%s, called from %s, "
                  "for %s", b->gid, b->desc, dist__mon_op_name(b->kind), dist__mon_rec_num(b),
                  dist__mon_peer_words(b->kind, b->peer, pw, sizeof pw), b->site,
                  sec_word(now_ms - b->since_ms, s, sizeof s));
  else if (b && b->kind != kind)
    dist__appendf(buf, len, off, "; it is blocked in %s #%llu%s of this group instead, called "
                  "from %s, for %s", dist__mon_op_name(b->kind), dist__mon_rec_num(b),
                  dist__mon_peer_words(b->kind, b->peer, pw, sizeof pw), b->site,
                  sec_word(now_ms - b->since_ms, s, sizeof s));
  else if (!gone && rg && (rg->last_seq || r->creating.on))
    dist__appendf(buf, len, off, "; %s",
                  outside_words(recs, who, rg->last_ms, now_ms, ow, sizeof ow));
  if (r->refused.on && r->refused.gid == gid && r->refused.kind == kind && r->refused.num == num)
    dist__appendf(buf, len, off, "; its call was refused, called from %s: %s", r->refused.site,
                  r->refused.msg);
  dist__appendf(buf, len, off, "\n");
  if (r->stack[0])
    dist__appendf(buf, len, off, "    its stack:\n%s", r->stack);
  if (r->crash[0])
    dist__appendf(buf, len, off, "    %s", r->crash);
}

/* A member that left cleanly before entering #seq (it destroyed its
 * process group, or distrun saw it exit with code 0) ran out of calls: the
 * ranks' calls differ in number (a skipped call, or an early exit). */
static bool ran_out(const mon_rec *r, int gid, at_op o) {
  if (!r->present || is_in(dist__mon_rec_group(r, gid), o))
    return false;
  if (r->died[0])
    return strcmp(r->died, "exited with code 0") == 0;
  return strcmp(r->state, "done") == 0;
}

/* Whether every member missing from #seq ran out of calls (named in who). */
static bool all_ran_out(const mon_group *g, at_op o, const mon_rec *recs, char *who,
                        size_t len) {
  int out[64], n = 0, missing = 0;
  for (int i = 0; i < g->size; i++) {
    int r = g->granks[i];
    if (r < 0 || r >= dist__mon.world || r == dist__mon.rank ||
        is_in(dist__mon_rec_group(&recs[r], g->gid), o))
      continue;
    missing++;
    if (ran_out(&recs[r], g->gid, o) && n < 64)
      out[n++] = r;
  }
  if (!missing || n != missing)
    return false;
  dist__format_ranks(out, (size_t)n, who, len);
  return true;
}

bool dist__mon_recs_fresh(const mon_group *g, const mon_rec *recs, int64_t since_ms) {
  int64_t now_ms = dist__mon_wall_ms(dist__now_ns());
  for (int i = 0; i < g->size; i++) {
    const mon_rec *r = &recs[g->granks[i]];
    char how[320];
    if (g->granks[i] != dist__mon.rank && r->present && r->hb_ms < since_ms &&
        !dist__mon_gone_how(r, now_ms, how, sizeof how))
      return false;
  }
  return true;
}

bool dist__mon_recs_settled(const mon_group *g, const mon_rec *recs) {
  const char *l = getenv("DIST_LAUNCHER");
  if (!l || strcmp(l, "distrun") != 0)
    return true;
  for (int i = 0; i < g->size; i++) {
    const mon_rec *r = &recs[g->granks[i]];
    if (g->granks[i] == dist__mon.rank || r->died[0] || !r->present)
      continue;
    /* A fresh record's process reads 'R' while it is a zombie (the read
     * asks only whether the pid exists): a rank killed a moment ago, which
     * distrun has not reaped, would be judged alive. Asked in full here,
     * on the failure path only. */
    char st = r->proc_state == 'R' ? dist__mon_proc_state(r) : r->proc_state;
    if (st == 'X' || st == 'Z' || strcmp(r->state, "exit") == 0)
      return false;
  }
  return true;
}

/* When rank r last completed an operation in any group (else its first
 * heartbeat's time is unknown: its latest). */
static int64_t last_done_ms(const mon_rec *r) {
  int64_t t = 0;
  for (int i = 0; i < r->n; i++)
    if (r->g[i].last_seq && r->g[i].last_ms > t)
      t = r->g[i].last_ms;
  return t ? t : r->hb_ms;
}

/* ": ranks 0-1 wait for it in group 1 (g1) BARRIER #1; rank 3 in ..."; one
 * clause per operation the waiters are blocked in. */
void dist__mon_say_waiters(const mon_rec *recs, int r, char *buf, size_t len, size_t *off) {
  int world = dist__mon.world;
  bool *said = dist__calloc((size_t)world, sizeof *said);
  /* One clause per operation, however many wait in it (at scale, ranks
   * 2-1022, not sixteen clauses of 64 that push the cycle out of the
   * report). */
  int *waiters = dist__malloc(sizeof(int) * (size_t)world);
  int clauses = 0;
  for (int q = 0; said && waiters && q < world; q++) {
    const mon_rec_group *b = blocked_in(&recs[q]);
    if (said[q] || q == r || !b || !waits_for(recs, q, b, r))
      continue;
    int k = 0;
    for (int x = q; x < world; x++) {
      const mon_rec_group *bx = blocked_in(&recs[x]);
      if (!said[x] && x != r && bx && bx->gid == b->gid && same_op(bx, b) &&
          waits_for(recs, x, bx, r)) {
        said[x] = true;
        waiters[k++] = x;
      }
    }
    char ranks[512], pw[48];
    dist__format_ranks(waiters, (size_t)k, ranks, sizeof ranks);
    dist__appendf(buf, len, off, "%s rank%s %s %s in group %d (%s) %s #%llu%s",
                  clauses++ ? ";" : ":", k > 1 ? "s" : "", ranks,
                  k > 1 ? "wait for it" : "waits for it", b->gid, b->desc, dist__mon_op_name(b->kind),
                  dist__mon_rec_num(b), dist__mon_peer_words(b->kind, b->peer, pw, sizeof pw));
  }
  dist__appendf(buf, len, off, "\n");
  dist__free(waiters);
  dist__free(said);
}

/* The verdict names ranks[0..n) at this rank's own operation (num of
 * kind in group g, called from site). */
static void verdict_here(mon_verdict *v, const mon_group *g, int kind, uint64_t num,
                         const char *site, const int *ranks, int n) {
  v->n = n;
  memcpy(v->culprits, ranks, sizeof(int) * (size_t)n);
  v->gid = g->gid;
  snprintf(v->gname, sizeof v->gname, "%s", g->desc[0] ? g->desc : g->name);
  v->kind = kind;
  v->seq = num;
  snprintf(v->site, sizeof v->site, "%s", site);
}

/* The verdict names the operation b (of a waiter, or the culprit's own)
 * and the culprit's call site. */
void dist__mon_verdict_at(mon_verdict *v, const mon_rec_group *b, const char *site) {
  if (!b)
    return;
  v->gid = b->gid;
  snprintf(v->gname, sizeof v->gname, "%s", b->desc);
  v->kind = b->kind;
  v->seq = dist__mon_rec_num(b);
  snprintf(v->site, sizeof v->site, "%s", site ? site : "");
}

/* Where the waits that start at rank `from` end: the ranks reached through
 * wait-for edges that are in no operation (busy outside the library,
 * exited, dead), ascending, into sinks; returns how many. A rank blocked in
 * an operation is never one: it waits for somebody. */
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
static int waits_end_at(const mon_rec *recs, int q, int *out, int cap) {
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

/* The rank of an unmatched pair (r, q) whose blocked call is a step it
 * never took (mon_record.h's novel) while its partner's is one it took
 * before, or -1. */
static int novel_side(const mon_rec *recs, int r, int q) {
  const mon_rec_group *a = blocked_in(&recs[r]), *b = blocked_in(&recs[q]);
  if (!a || !b || a->novel < 0 || b->novel < 0 || a->novel == b->novel)
    return -1;
  return a->novel ? r : q;
}

/* The one rank of an unmatched pair (r, q) to blame alone, or -1: a tag
 * new on its pair, else a step never taken, else a tag set where the
 * partner's is the default. */
static int pair_alone(const mon_rec *recs, int r, int q) {
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

static void drop_culprit(mon_verdict *v, int r) {
  int n = 0;
  for (int i = 0; i < v->n; i++)
    if (v->culprits[i] != r)
      v->culprits[n++] = v->culprits[i];
  v->n = n;
}

/* "the waits end at rank 6, which is blocked in RECV #10 from rank 5 with
 * tag 1, while rank 5 is blocked in SEND #9 to rank 6 with tag 0: ...". */
static void say_unmatched(const mon_rec *recs, int r, int q, char *buf, size_t len, size_t *off) {
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

/* "the waits end at rank r, which ..." (gone: how it went, else in no
 * operation), with the ranks blocked on it. */
static void say_end(const mon_rec *recs, int r, const char *gone, int64_t now_ms, char *buf,
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
                  outside_words(recs, r, last_done_ms(&recs[r]), now_ms, ow, sizeof ow));
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
  else
    dist__appendf(buf, len, off, "is in no operation (%s)",
                  outside_words(recs, r, last_done_ms(&recs[r]), now_ms, ow, sizeof ow));
  dist__mon_say_waiters(recs, r, buf, len, off);
}

char *dist__mon_diagnose_creation(const mon_rec *recs, mon_verdict *v) {
  int me = dist__mon.rank, skip[MON_CULPRITS_MAX];
  int n = dist__mon_create_skippers(recs, me, skip, MON_CULPRITS_MAX);
  const size_t len = 16384;
  char *buf = n ? dist__malloc(len) : NULL;
  if (!buf)
    return NULL;
  size_t off = 0;
  const mon_rec_create *cr = &recs[me].creating;
  int64_t now_ms = dist__mon_wall_ms(dist__now_ns());
  char s[32], ow[512];
  dist__appendf(buf, len, &off, "hang creating group %d (%d ranks) in %s: waited %s, its "
                "timeout\n", cr->gid, cr->size, cr->call[0] ? cr->call : "dist_new_group",
                sec_word(now_ms - cr->since_ms, s, sizeof s));
  dist__appendf(buf, len, &off, "  rank %d is %s\n", me,
                outside_words(recs, me, 0, now_ms, ow, sizeof ow));
  for (int i = 0; i < n; i++) {
    char how[320];
    say_end(recs, skip[i], dist__mon_gone_how(&recs[skip[i]], now_ms, how, sizeof how), now_ms,
            buf, len, &off);
  }
  /* the group and its creator's call, no operation (as say_roots does);
   * of a rank that created its groups in another order, its own */
  if (n == 1 && dist__mon_create_order_odd(recs, skip[0]))
    cr = &recs[skip[0]].creating;
  *v = (mon_verdict){.gid = cr->gid, .kind = -1, .n = n};
  memcpy(v->culprits, skip, sizeof(int) * (size_t)v->n);
  snprintf(v->gname, sizeof v->gname, "g%d", cr->gid);
  snprintf(v->site, sizeof v->site, "%s", cr->site);
  if (off && buf[off - 1] == '\n')
    buf[--off] = '\0';
  return buf;
}

/* The ranks[0..n) where the waits end, said and made the verdict's
 * culprits at this rank's own operation. */
static void say_ends(const mon_rec *recs, mon_verdict *v, const mon_group *g, int kind,
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
static void say_roots(const mon_rec *recs, mon_verdict *v, char *buf, size_t len, size_t *off) {
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

/* --- a rank held in another group's operation ------------------------------ */

/* A rank's waits follow its oldest operation (blocked_in). A thread of the
 * rank may meanwhile be stopped in a synchronous call of another group: a
 * collective called from a work's completion callback runs on the thread
 * that completes the first group's operations, so the rank's later
 * operation of that group, which every member has entered, cannot end
 * there, and the waits stop at it with no edge. The operation rank r is
 * held in: another group's synchronous one in flight that some rank has
 * not entered (waits_for), its ranks into who (up to cap, *n_who); NULL
 * when none. */
static const mon_rec_group *held_elsewhere(const mon_rec *recs, int r, int *who, int cap,
                                           int *n_who) {
  const mon_rec *rec = &recs[r];
  const mon_rec_group *b = blocked_in(rec);
  char how[320];
  *n_who = 0;
  if (!b || dist__mon_gone_how(rec, dist__mon_wall_ms(dist__now_ns()), how, sizeof how))
    return NULL;
  for (int i = 0; i < rec->n; i++) {
    const mon_rec_group *o = &rec->g[i];
    if (o == b || o->gid == b->gid || o->enq <= o->done || o->kind < 0 || !o->sync)
      continue;
    for (int q = 0; q < dist__mon.world; q++)
      if (q != r && waits_for(recs, r, o, q) && *n_who < cap)
        who[(*n_who)++] = q;
    if (*n_who)
      return o;
  }
  return NULL;
}

/* Where the waits from ranks start[0..n) stop without an end: ranks alive
 * and blocked in an operation that waits for nobody (every member has
 * entered it). Of them, the lowest held in another group's operation
 * (held_elsewhere) is where the waits end: said, with the ranks blocked on
 * it, and made the verdict's culprit at that operation. False when none. */
static bool say_held(const mon_rec *recs, const int *start, int n, mon_verdict *v, char *buf,
                     size_t len, size_t *off) {
  int world = dist__mon.world, h = 0, k = 0;
  int *queue = dist__calloc((size_t)world + 1, sizeof(int));
  bool *seen = dist__calloc((size_t)world + 1, sizeof(bool));
  mon_waits *wi = dist__mon_waits_new(recs, world);
  int64_t now_ms = dist__mon_wall_ms(dist__now_ns());
  int held = -1, who[8], n_who = 0;
  const mon_rec_group *o = NULL;
  for (int i = 0; queue && seen && wi && i < n; i++)
    if (start[i] >= 0 && start[i] < world && !seen[start[i]]) {
      seen[start[i]] = true;
      queue[k++] = start[i];
    }
  for (; h < k; h++) {
    int r = queue[h];
    char how[320];
    if (dist__mon_gone_how(&recs[r], now_ms, how, sizeof how) || !blocked_in(&recs[r]))
      continue;
    const int *to;
    int m = dist__mon_waits_out(wi, r, &to);
    if (!m && dist__mon_unmatched_peer(recs, r) < 0) {
      int w[8], nw = 0;
      const mon_rec_group *x = held_elsewhere(recs, r, w, 8, &nw);
      if (x && (held < 0 || r < held)) {
        held = r;
        o = x;
        n_who = nw;
        memcpy(who, w, sizeof(int) * (size_t)nw);
      }
    }
    for (int i = 0; i < m; i++)
      if (!seen[to[i]]) {
        seen[to[i]] = true;
        queue[k++] = to[i];
      }
  }
  dist__free(queue);
  dist__free(seen);
  dist__mon_waits_free(wi);
  if (held < 0)
    return false;
  const mon_rec_group *b = blocked_in(&recs[held]);
  char ranks[256], pw[48], s[32];
  dist__format_ranks(who, (size_t)n_who, ranks, sizeof ranks);
  dist__appendf(buf, len, off, "  the waits end at rank %d: it is in group %d (%s) %s #%llu, "
                "called from %s, which every member has entered, but cannot end it while "
                "it is blocked in group %d (%s) %s #%llu%s, called from %s, for %s, which "
                "rank%s %s %s not entered (a call that blocks from a work's callback, or "
                "from another thread, holds the first group's progress)", held, b->gid,
                b->desc, dist__mon_op_name(b->kind), dist__mon_rec_num(b), b->site, o->gid, o->desc,
                dist__mon_op_name(o->kind), dist__mon_rec_num(o), dist__mon_peer_words(o->kind, o->peer, pw, sizeof pw),
                o->site, sec_word(now_ms - o->since_ms, s, sizeof s), n_who > 1 ? "s" : "",
                ranks, n_who > 1 ? "have" : "has");
  dist__mon_say_waiters(recs, held, buf, len, off);
  if (v) {
    v->n = 1;
    v->culprits[0] = held;
    dist__mon_verdict_at(v, o, o->site);
  }
  return true;
}

/* Of members in[0..n) that entered this group's operation, those blocked
 * meanwhile in another group's operation issued before it (a call from a
 * work's callback that ran first): one line each, the waits go on through
 * it (the cycles below). False when none. */
/* The root member r's record gives the collective of group gid (kind) it
 * is in, -1 unknown (mon_record.h: a collective's root in its parts). */
static int root_of(const mon_rec *r, int gid, int kind) {
  const mon_rec_group *rg = dist__mon_rec_group(r, gid);
  return rg && rg->kind == kind && rg->enq > rg->done && rg->p2p ? rg->p2p->root : -1;
}

/* Every member entered a broadcast (a reduce, a scatter...) and none can
 * go on: when their records name different roots, the ranks that name
 * another root than most do are the verdict (the readers all wait for a
 * root that waits to read). False when the roots agree, are unknown, or
 * split evenly. */
static bool say_root_split(const mon_rec *recs, int gid, int kind, unsigned long long num,
                           const int *in, int n, mon_verdict *v, char *buf, size_t len,
                           size_t *off) {
  int roots[8], votes[8] = {0}, m = 0;
  for (int i = 0; i < n; i++) {
    int r = root_of(&recs[in[i]], gid, kind), j = 0;
    while (r >= 0 && j < m && roots[j] != r)
      j++;
    if (r >= 0 && j == m && m < 8)
      roots[m++] = r;
    if (r >= 0 && j < m)
      votes[j]++;
  }
  int best = 0, ties = 0;
  for (int j = 1; j < m; j++)
    best = votes[j] > votes[best] ? j : best;
  for (int j = 0; j < m; j++)
    ties += votes[j] == votes[best];
  if (m < 2 || ties > 1)
    return false;
  int odd[MON_CULPRITS_MAX], k = 0, usual[MON_CULPRITS_MAX], u = 0;
  for (int i = 0; i < n; i++) {
    int r = root_of(&recs[in[i]], gid, kind);
    if (r >= 0 && r != roots[best] && k < MON_CULPRITS_MAX)
      odd[k++] = in[i];
    else if (r == roots[best] && u < MON_CULPRITS_MAX)
      usual[u++] = in[i];
  }
  char a[256], b[256];
  dist__format_ranks(usual, (size_t)u, a, sizeof a);
  dist__format_ranks(odd, (size_t)k, b, sizeof b);
  dist__appendf(buf, len, off, "  ranks disagree on the root of %s #%llu: rank%s %s wait%s "
                "with root %d, rank%s %s with another  <- root differs\n",
                dist__mon_op_name(kind), num, u > 1 ? "s" : "", a, u > 1 ? "" : "s",
                roots[best], k > 1 ? "s" : "", b);
  for (int i = 0; i < k; i++) {
    int r = root_of(&recs[odd[i]], gid, kind);
    dist__appendf(buf, len, off, "    rank %d waits in it with root %d\n", odd[i], r);
  }
  if (!v->n) {
    v->n = k;
    memcpy(v->culprits, odd, sizeof(int) * (size_t)k);
    const mon_rec_group *rg = dist__mon_rec_group(&recs[odd[0]], gid);
    dist__mon_verdict_at(v, rg, rg->site);
  }
  return true;
}

static bool say_before(const mon_rec *recs, const mon_group *g, const int *in, int n, char *buf,
                       size_t len, size_t *off) {
  int said = 0; /* the first 4 */
  char pw[48];
  for (int i = 0; i < n && said < 4; i++) {
    const mon_rec_group *b = in[i] >= 0 && in[i] < dist__mon.world ? blocked_in(&recs[in[i]])
                                                                     : NULL;
    if (!b || b->gid == g->gid)
      continue;
    dist__appendf(buf, len, off, "  rank %d has entered it, but is blocked in group %d (%s) %s "
                  "#%llu%s, called from %s, issued before it\n", in[i], b->gid, b->desc,
                  dist__mon_op_name(b->kind), dist__mon_rec_num(b), dist__mon_peer_words(b->kind, b->peer, pw, sizeof pw),
                  b->site);
    said++;
  }
  return said > 0;
}

/* A send or receive waits on one rank, its peer: what that rank is doing.
 * *lowest: whether this rank writes the report (of two ranks stuck on each
 * other, the lower). */
static void diagnose_p2p(const mon_group *g, uint64_t seq, int kind, int peer, const char *site,
                         const mon_rec *recs, char *buf, size_t len, size_t *off,
                         bool *lowest) {
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

/* This rank's record as the diagnosis reads it: in the operation it
 * diagnoses. Its own wait may have timed out a moment before (then the
 * record shows it in no operation, and waits that go through it would end
 * at it, "busy outside the library", instead of going on to the peer it
 * waited for). Left as it is when it shows the rank in an operation. */
static void hold_self(const mon_group *g, uint64_t seq, mon_rec *recs) {
  mon_rec *me = &recs[dist__mon.rank];
  mon_rec_group *rg = (mon_rec_group *)dist__mon_rec_group(me, g->gid);
  if (!rg || dist__mon_blocked_in(me))
    return;
  const mon_op *op = &g->ring[seq % MON_RING];
  rg->kind = atomic_load(&op->kind);
  rg->enq = rg->done + 1;
  rg->since_ms = dist__mon_wall_ms(atomic_load(&op->t_enq_ns));
  rg->peer = atomic_load(&op->peer);
  rg->peer2 = atomic_load(&op->peer2);
  rg->tag = atomic_load(&op->tag);
  rg->pair = atomic_load(&op->pair);
  rg->peer_before = atomic_load(&op->peer_before);
  rg->coll = atomic_load(&op->coll);
  rg->sync = atomic_load(&op->sync) != 0;
  rg->num = dist__mon_num(g, seq);
  rg->has_num = true;
  dist__mon_symbolize(atomic_load(&op->caller), rg->site, sizeof rg->site);
}

char *dist__mon_diagnose(const mon_group *g, uint64_t seq, mon_rec *recs, const char *what,
                         bool *lowest, int *n_cycles, mon_verdict *v) {
  *v = (mon_verdict){.gid = -1, .kind = -1};
  const size_t len = 16384;
  char *buf = dist__malloc(len);
  if (!buf)
    return NULL;
  size_t off = 0;
  int64_t now_ms = dist__mon_wall_ms(dist__now_ns());
  const mon_op *op = &g->ring[seq % MON_RING];
  int kind = atomic_load(&op->kind);
  at_op me = {seq, atomic_load(&op->coll), kind};
  if (!strcmp(what, "hang")) /* its wait may have timed out a moment ago */
    hold_self(g, seq, recs);
  unsigned long long num = (unsigned long long)dist__mon_num(g, seq); /* what it prints */
  char site[MON_SITE_LEN], s[32];
  dist__mon_symbolize(atomic_load(&op->caller), site, sizeof site);
  int64_t waited = now_ms - dist__mon_wall_ms(atomic_load(&op->t_enq_ns));
  /* A member that ran out of calls is named so in the header; the status
   * stays a lost peer (distrun: 12, "a rank ended while others needed it"). */
  char who[256];
  bool out = !is_p2p(kind) && strcmp(what, "stall") &&
             all_ran_out(g, me, recs, who, sizeof who);
  dist__appendf(buf, len, &off, "%s in group %d (%s) at %s #%llu: ", what, g->gid,
                g->desc[0] ? g->desc : g->name, dist__mon_op_name(kind), num);
  if (out)
    dist__appendf(buf, len, &off, "rank%s %s ran out of calls: left the group cleanly before "
                  "it, while the others called it (the ranks' calls differ in number)\n",
                  strchr(who, ',') || strchr(who, '-') ? "s" : "", who);
  else
    dist__appendf(buf, len, &off, "waited %s of its %s timeout\n", sec_word(waited, s, sizeof s),
                  sec_word(dist__mon_timeout_ms(g, seq), s + 16, 16));
  if (is_p2p(kind)) {
    int peer = atomic_load(&op->peer);
    diagnose_p2p(g, seq, kind, peer, site, recs, buf, len, &off, lowest);
    say_roots(recs, v, buf, len, &off);
    *n_cycles = dist__mon_cycles(recs, dist__mon.world, buf, len, &off, v);
    int ends[MON_CULPRITS_MAX], k = 0;
    if (!v->n && peer >= 0 && peer < dist__mon.world && peer != dist__mon.rank &&
        (k = waits_end_at(recs, peer, ends, MON_CULPRITS_MAX)) > 0)
      /* no waits followed from this rank's own record (its operation timed
       * out): they go through its peer, to where the peer's end */
      say_ends(recs, v, g, kind, num, site, ends, k, buf, len, &off);
    int from[2] = {dist__mon.rank, peer};
    if (!v->n) /* the waits stop at a rank held in another group's operation */
      say_held(recs, from, 2, v, buf, len, &off);
    if (off && buf[off - 1] == '\n')
      buf[--off] = '\0';
    return buf;
  }
  int *in = dist__malloc(sizeof(int) * (size_t)g->size), n_in = 0;
  int absent = 0, missing[MON_CULPRITS_MAX];
  for (int i = 0; in && i < g->size; i++) {
    int r = g->granks[i];
    if (r < 0 || r >= dist__mon.world)
      continue;
    const mon_rec_group *rg = dist__mon_rec_group(&recs[r], g->gid);
    char how[320];
    const char *gone = dist__mon_gone_how(&recs[r], now_ms, how, sizeof how);
    if (r == dist__mon.rank || (is_in(rg, me) && !gone)) {
      in[n_in++] = r;
      continue;
    }
    if (is_in(rg, me)) { /* it was in the operation, then ended */
      dist__appendf(buf, len, &off, "  rank %d (host %s, pid %d) entered %s #%llu, then %s\n",
                    r, recs[r].host, (int)recs[r].pid, dist__mon_op_name(kind), num, gone);
      continue;
    }
    if (absent++ < MON_CULPRITS_MAX)
      missing[absent - 1] = r;
    say_absent(buf, len, &off, recs, r, g, seq, kind, now_ms);
  }
  if (in && n_in) {
    qsort(in, (size_t)n_in, sizeof *in, dist__mon_cmp_int);
    char ranks[256];
    dist__format_ranks(in, (size_t)n_in, ranks, sizeof ranks);
    dist__mon_symbolize(atomic_load(&op->caller), site, sizeof site);
    bool lost = strcmp(what, "lost peer") == 0;
    dist__appendf(buf, len, &off, "  rank%s %s %s %s %s #%llu, called from %s (rank %d)\n",
                  n_in > 1 ? "s" : "", ranks, lost ? (n_in > 1 ? "had" : "has") : n_in > 1 ? "are" : "is",
                  lost ? "entered" : "blocked in", dist__mon_op_name(kind),
                  num, site, dist__mon.rank);
    *lowest = in[0] == dist__mon.rank;
  } else {
    *lowest = true;
  }
  if (!absent && !(in && say_held(recs, in, n_in, v, buf, len, &off)) &&
      !(in && say_root_split(recs, g->gid, kind, num, in, n_in, v, buf, len, &off)) &&
      !(in && say_before(recs, g, in, n_in, buf, len, &off)))
    /* Nothing here tells a transfer still moving (a large all_to_all over
     * TCP takes seconds) from one that stopped: the records say who
     * entered, not how many bytes moved. So no stop is claimed. */
    dist__appendf(buf, len, &off, "  every member has entered it and it has not completed: its "
                  "data may still be moving (a large or slow transfer), or one of them stopped "
                  "inside it, or the transport is stuck\n");
  else if (absent)
    say_roots(recs, v, buf, len, &off);
  *n_cycles = dist__mon_cycles(recs, dist__mon.world, buf, len, &off, v);
  if (!v->n && absent) {
    /* This rank's own record may no longer show it in the operation (it
     * timed out: a monitored barrier's own timeout), so no waits were
     * followed from it: they go through the members that have not
     * entered (the first 8), to where those end. */
    int ends[MON_CULPRITS_MAX], n_ends = 0;
    for (int i = 0; i < absent && i < 8; i++) {
      int e[MON_CULPRITS_MAX];
      for (int j = 0, k = waits_end_at(recs, missing[i], e, MON_CULPRITS_MAX); j < k; j++) {
        bool have = false;
        for (int x = 0; x < n_ends && !have; x++)
          have = ends[x] == e[j];
        if (!have && n_ends < MON_CULPRITS_MAX)
          ends[n_ends++] = e[j];
      }
    }
    qsort(ends, (size_t)n_ends, sizeof *ends, dist__mon_cmp_int);
    if (n_ends)
      say_ends(recs, v, g, kind, num, site, ends, n_ends, buf, len, &off);
  }
  if (!v->n && absent) { /* the waits stop at a rank held in another group's operation */
    int from[MON_CULPRITS_MAX + 1], n_from = 0;
    from[n_from++] = dist__mon.rank;
    for (int i = 0; i < absent && i < MON_CULPRITS_MAX; i++)
      from[n_from++] = missing[i];
    say_held(recs, from, n_from, v, buf, len, &off);
  }
  dist__free(in);
  if (off && buf[off - 1] == '\n')
    buf[--off] = '\0';
  return buf;
}
