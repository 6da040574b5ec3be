/* mon_diag_words.c - the words a diagnosis (mon_diag.c) and the wait-for
 * cycles (mon_cycle.c) say about a rank: an operation's name and number,
 * its peer, durations, what a rank in no operation of a group does
 * (creating a group, busy outside the library), why a rank cannot be
 * heard from (exited, dead, stopped, silent), what it last completed, the
 * line for a member that has not entered a stalled operation, and the
 * ranks that wait for one. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mon_diag_int.h"

#define is_p2p dist__mon_is_p2p
#define at_blocked dist__mon_at_blocked
#define blocked_in dist__mon_blocked_in
#define waits_for dist__mon_waits_for
#define sec_word dist__mon_sec_word
#define outside_words dist__mon_outside_words
#define say_last dist__mon_say_last
typedef mon_at_op at_op;

const char *dist__mon_op_name(int kind) {
  return kind >= 0 && kind < DIST_OP_COUNT_ ? dist_op_name((dist_op_kind)kind) : "?";
}

const char *dist__mon_sec_word(int64_t ms, char *buf, size_t len) {
  snprintf(buf, len, "%.1f s", (double)ms / 1000);
  return buf;
}

int64_t dist__mon_lib_ms(const mon_rec *r) {
  int64_t t = r->lib_ms;
  for (int i = 0; i < r->n; i++)
    if (r->g[i].last_seq && r->g[i].last_ms > t)
      t = r->g[i].last_ms;
  return t ? t : r->hb_ms;
}

/* "blocked in the store's get of key 'k' (a key no rank has set) for
 * 10.0 s, called from main (x.c:15)": the store call of r's "w" line,
 * which returns as soon as its key is there. */
const char *dist__mon_store_words(const mon_rec *r, int64_t now_ms, char *buf, size_t len) {
  const mon_rec_store *w = &r->store;
  char s[32], thread[32] = "", keys[200];
  bool queue = !strcmp(w->call, "queue_pop"), many = w->n_keys > 1;
  if (many)
    snprintf(keys, sizeof keys, "keys '%s' and %d more (some of them no rank has set)", w->key,
             w->n_keys - 1);
  else
    snprintf(keys, sizeof keys, "%s '%s' (%s)", queue ? "queue" : "key", w->key,
             queue ? "a queue nothing was pushed to" : "a key no rank has set");
  if (w->tid > 0 && w->tid != (int)r->pid)
    snprintf(thread, sizeof thread, " (its thread %d)", w->tid);
  snprintf(buf, len, "blocked in the store's %s %s %s for %s%s, called from %s", w->call,
           !strcmp(w->call, "wait") ? "for" : queue ? "on" : "of", keys,
           sec_word(now_ms - w->since_ms, s, sizeof s), thread, w->site);
  return buf;
}

/* What rank who, in no operation of a group, does: creating a group in
 * dist_new_group or dist_split_group (its record's "c" line: blocked
 * there until the other members come; the members that skipped the call,
 * mon_create.c, named), blocked in a store call of the program's (its
 * "w" line), else busy outside the library since its last call into it
 * (idle_ms, or later: dist__mon_lib_ms). */
const char *dist__mon_outside_words(const mon_rec *recs, int who, int64_t idle_ms,
                                    int64_t now_ms, char *buf, size_t len) {
  const mon_rec *r = &recs[who];
  char s[32], late[320] = "the other members have not joined";
  if (r->creating.on) {
    int skip[MON_CULPRITS_MAX], n = dist__mon_create_skippers(recs, who, skip, MON_CULPRITS_MAX);
    char ranks[128];
    if (n == 1 && !dist__mon_create_lists(&r->creating, skip[0])) {
      snprintf(late, sizeof late, "the other members have not joined: the waits end at rank %d, "
               "%s", skip[0], dist__mon_create_local_odd(recs, skip[0])
                                  ? "which creates a group no other member creates"
                                  : "which made its group creations in another order");
    } else if (n) {
      dist__format_ranks(skip, (size_t)n, ranks, sizeof ranks);
      snprintf(late, sizeof late, "rank%s %s %s not joined: %s", n > 1 ? "s" : "", ranks,
               n > 1 ? "have" : "has",
               n == 1 && dist__mon_create_list_odd(recs, skip[0], &r->creating)
                   ? "it made that call with a list that leaves itself out"
               : n == 1 && dist__mon_create_local_odd(recs, skip[0])
                   ? "it creates a group no other member creates"
               : n == 1 && dist__mon_create_order_odd(recs, skip[0])
                   ? "it creates another group as that call"
                   : n > 1 ? "they never made that call" : "it never made that call");
    }
    snprintf(buf, len, "blocked in %s for %s, creating group %d (%d ranks), called "
             "from %s, which %s", r->creating.call[0] ? r->creating.call : "dist_new_group",
             sec_word(now_ms - r->creating.since_ms, s, sizeof s), r->creating.gid,
             r->creating.size, r->creating.site, late);
  } else if (r->store.on) {
    dist__mon_store_words(r, now_ms, buf, len);
  } else {
    int64_t lib = dist__mon_lib_ms(r);
    snprintf(buf, len, "busy outside the library for %s",
             sec_word(now_ms - (lib > idle_ms ? lib : idle_ms), s, sizeof s));
  }
  return buf;
}

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

void dist__mon_say_last(char *buf, size_t len, size_t *off, const mon_rec_group *rg) {
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
void dist__mon_say_absent(char *buf, size_t len, size_t *off, const mon_rec *recs, int who,
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
