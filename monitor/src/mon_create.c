/* mon_create.c - a group creation one member skipped: who the ranks
 * blocked creating a group wait for.
 *
 * A rank in dist_new_group or dist_split_group waits until every member
 * of the new group makes the same call; its record's "c" line names the
 * group, its members, the scope every member of which makes the call (the
 * default group, or the split's parent) and the call's number k on that
 * scope, and every rank's line for the scope counts the creations it
 * called there (mon_record.h). A member that is not creating the group
 * while its count on the scope is below k never made that call: when at
 * least as many of the scope's ranks made it as did not, the member
 * skipped it (a rank that went on to a collective, or left), and it is
 * where the creator's wait ends, not the creator; when most did not, the
 * creator's call is the odd one (a creation only it makes) and it stays
 * the end of the waits. Without a scope (use_local_synchronization: only
 * the members call) the members creating the group are compared with
 * those that are not. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mon_diag_int.h"

/* Whether rank r is in the ranges "0-1,3" (a list cut short, ending in
 * "+", says nothing of the ranks cut off). */
static bool in_ranges(const char *list, int r) {
  for (const char *p = list; p && *p;) {
    char *e;
    long a = strtol(p, &e, 10), b = a;
    if (e == p)
      return false;
    if (*e == '-') {
      const char *q = e + 1;
      b = strtol(q, &e, 10);
      if (e == q)
        return false;
    }
    if (r >= a && r <= b)
      return true;
    p = *e == ',' ? e + 1 : "";
  }
  return false;
}

/* Whether rank m is creating the group rank c's record is creating: the
 * same id and members (ids count each rank's creations, so a rank that
 * creates its groups in another order gives another group the same id). */
static bool creating_same(const mon_rec *recs, int m, const mon_rec_create *cr) {
  const mon_rec_create *b = &recs[m].creating;
  return recs[m].present && b->on && b->gid == cr->gid &&
         (!b->members[0] || !cr->members[0] || !strcmp(b->members, cr->members));
}

/* How many creations rank m called on scope (its record's count), -1
 * unknown (no line for the scope, or an older record). */
static int64_t count_on(const mon_rec *r, int scope) {
  const mon_rec_group *g = scope >= 0 ? dist__mon_rec_group(r, scope) : NULL;
  return g ? g->creations : -1;
}

/* Whether most of those who should make cr's call did not (its creator's
 * call is the odd one): the scope's ranks whose count is below k against
 * those at k or past it; without a scope, the members not creating the
 * group against those creating it. */
static bool creator_is_odd(const mon_rec *recs, const mon_rec_create *cr) {
  int world = dist__mon.world, made = 0, not_made = 0;
  bool scoped = cr->scope >= 0 && cr->k > 0;
  for (int m = 0; m < world; m++) {
    if (!recs[m].present)
      continue;
    if (scoped) {
      int64_t n = count_on(&recs[m], cr->scope);
      if (n < 0 && !creating_same(recs, m, cr))
        continue;
      if (creating_same(recs, m, cr) || n >= (int64_t)cr->k)
        made++;
      else
        not_made++;
    } else if (in_ranges(cr->members, m)) {
      if (creating_same(recs, m, cr))
        made++;
      else
        not_made++;
    }
  }
  return not_made > made;
}

/* Whether rank m's creation is the odd one by its number on the scope:
 * more ranks make another creation as that number (other: those creating
 * another group as it now, and the members of m's group that went past
 * it, which made another group as it, or m's would be done), or make this
 * very one (the same members) as another number (moved), than make it as
 * m does (same, m included). Either way m created its groups in another
 * order: it waits in a creation the others made earlier or not yet. */
bool dist__mon_create_order_odd(const mon_rec *recs, int m) {
  const mon_rec_create *a = &recs[m].creating;
  if (!recs[m].present || !a->on || a->scope < 0 || !a->k || !a->members[0])
    return false;
  int same = 1, other = 0, moved = 0; /* m's side counts m */
  for (int q = 0; q < dist__mon.world; q++) {
    const mon_rec_create *b = &recs[q].creating;
    if (q == m || !recs[q].present)
      continue;
    bool at_k = b->on && b->scope == a->scope && b->k == a->k;
    if (!at_k && in_ranges(a->members, q) && count_on(&recs[q], a->scope) >= (int64_t)a->k) {
      other++; /* a member past that number made it another group: had it made m's, m's
                  creation would be done */
      continue;
    }
    if (!b->on || b->scope != a->scope || !b->k)
      continue;
    if (b->k == a->k)
      *(strcmp(b->members, a->members) ? &other : &same) += 1;
    else if (!strcmp(b->members, a->members))
      moved++;
  }
  return other > same || moved > same;
}

/* The first rank (not m) creating m's group's members on m's scope under
 * another number than m's; -1 none. */
static int moved_creator(const mon_rec *recs, int m) {
  const mon_rec_create *a = &recs[m].creating;
  for (int q = 0; q < dist__mon.world; q++) {
    const mon_rec_create *b = &recs[q].creating;
    if (q != m && recs[q].present && b->on && b->scope == a->scope && b->k && b->k != a->k &&
        !strcmp(b->members, a->members))
      return q;
  }
  return -1;
}

/* Whether member m of the group cr creates is itself blocked creating
 * another group, on the same scope, at an earlier number: it is behind
 * (waiting for that creation), not one that skipped cr's call. */
static bool creating_earlier(const mon_rec *recs, int m, const mon_rec_create *cr) {
  const mon_rec_create *b = &recs[m].creating;
  return recs[m].present && b->on && cr->scope >= 0 && b->scope == cr->scope && b->k &&
         b->k < cr->k;
}

static int skippers(const mon_rec *recs, int c, int *out, int cap, int depth) {
  const mon_rec_create *cr = &recs[c].creating;
  char how[320];
  int64_t now_ms = dist__mon_wall_ms(dist__now_ns());
  if (!recs[c].present || !cr->on || !cr->members[0] ||
      dist__mon_gone_how(&recs[c], now_ms, how, sizeof how) || creator_is_odd(recs, cr))
    return 0;
  int n = 0;
  bool scoped = cr->scope >= 0 && cr->k > 0;
  for (int m = 0; m < dist__mon.world && n < cap; m++) {
    if (m == c || !in_ranges(cr->members, m) || !recs[m].present || creating_same(recs, m, cr))
      continue;
    if (scoped && dist__mon_create_order_odd(recs, m)) {
      out[n++] = m; /* it made its creations in another order */
      continue;
    }
    if (scoped && creating_earlier(recs, m, cr)) { /* follow it, to where its wait ends */
      int next[MON_CULPRITS_MAX];
      int k = depth < 4 ? skippers(recs, m, next, MON_CULPRITS_MAX, depth + 1) : 0;
      for (int i = 0; i < k && n < cap; i++) { /* once each */
        bool have = false;
        for (int j = 0; j < n && !have; j++)
          have = out[j] == next[i];
        if (!have)
          out[n++] = next[i];
      }
      continue;
    }
    int64_t made = scoped ? count_on(&recs[m], cr->scope) : -1;
    if (made < 0 || made < (int64_t)cr->k)
      out[n++] = m; /* it has not made the call the creator waits in */
  }
  qsort(out, (size_t)n, sizeof *out, dist__mon_cmp_int);
  return n;
}

int dist__mon_create_skippers(const mon_rec *recs, int c, int *out, int cap) {
  return skippers(recs, c, out, cap, 0);
}

int dist__mon_skipped_for(const mon_rec *recs, int r) {
  int out[MON_CULPRITS_MAX];
  for (int c = 0; c < dist__mon.world; c++) {
    if (c == r || !recs[c].creating.on)
      continue;
    int n = dist__mon_create_skippers(recs, c, out, MON_CULPRITS_MAX);
    for (int i = 0; i < n; i++)
      if (out[i] == r)
        return c;
  }
  return -1;
}

/* "did not create group 4 (2 ranks: 2-3) that rank 3 is creating
 * (dist_split_group #3 on group 0, called from main (x.c:56)): ranks 0-1,3
 * made that call; it is blocked in group 0 (default) ALL_REDUCE #1, called
 * from ar (x.c:28), for 19.8 s". */
/* "made its creations in another order: its dist_new_group #2 on group 0
 * creates group 2 (2 ranks: 1,5), called from ..., where ranks 4,6-7
 * create group 3 (4 ranks: 4-7) as their #2". */
static void say_order(const mon_rec *recs, int r, char *buf, size_t len, size_t *off) {
  const mon_rec_create *a = &recs[r].creating, *b = NULL;
  int world = dist__mon.world, n = 0;
  int *others = dist__malloc(sizeof(int) * (size_t)(world ? world : 1));
  for (int q = 0; others && q < world; q++) {
    const mon_rec_create *o = &recs[q].creating;
    if (q != r && recs[q].present && o->on && o->scope == a->scope && o->k == a->k &&
        strcmp(o->members, a->members)) {
      others[n++] = q;
      b = b ? b : o;
    }
  }
  char ranks[256] = "";
  if (others)
    dist__format_ranks(others, (size_t)n, ranks, sizeof ranks);
  dist__free(others);
  dist__appendf(buf, len, off, "made its group creations in another order: its %s #%llu on group "
                "%d creates group %d (%d ranks: %s), called from %s", a->call[0] ? a->call :
                "dist_new_group", (unsigned long long)a->k, a->scope, a->gid, a->size, a->members,
                a->site);
  int q = moved_creator(recs, r); /* the same group under another number says most */
  if (q >= 0)
    dist__appendf(buf, len, off, ", where rank %d creates that group (the same members) as its "
                  "#%llu (every rank must create its groups in one order)", q,
                  (unsigned long long)recs[q].creating.k);
  else if (b)
    dist__appendf(buf, len, off, ", where rank%s %s create%s a group of ranks %s as their #%llu "
                  "(every rank must create its groups in one order)",
                  n > 1 ? "s" : "", ranks, n > 1 ? "" : "s", b->members,
                  (unsigned long long)b->k);
}

void dist__mon_say_skipped(const mon_rec *recs, int r, int c, int64_t now_ms, char *buf,
                           size_t len, size_t *off) {
  if (dist__mon_create_order_odd(recs, r)) {
    say_order(recs, r, buf, len, off);
    return;
  }
  const mon_rec_create *cr = &recs[c].creating;
  int world = dist__mon.world, n = 0;
  int *made = dist__malloc(sizeof(int) * (size_t)(world ? world : 1));
  for (int m = 0; made && m < world; m++) {
    int64_t k = count_on(&recs[m], cr->scope);
    if (recs[m].present && (creating_same(recs, m, cr) ||
                            (cr->scope >= 0 && cr->k > 0 && k >= (int64_t)cr->k)))
      made[n++] = m;
  }
  char ranks[512] = "", scope[64] = "";
  if (made)
    dist__format_ranks(made, (size_t)n, ranks, sizeof ranks);
  dist__free(made);
  if (cr->scope >= 0 && cr->k > 0)
    snprintf(scope, sizeof scope, " #%llu on group %d", (unsigned long long)cr->k, cr->scope);
  dist__appendf(buf, len, off, "did not create group %d (%d ranks: %s) that rank %d is "
                "creating (%s%s, called from %s)", cr->gid, cr->size, cr->members, c,
                cr->call[0] ? cr->call : "dist_new_group", scope, cr->site);
  if (ranks[0])
    dist__appendf(buf, len, off, ": rank%s %s made that call and rank %d did not",
                  strchr(ranks, ',') || strchr(ranks, '-') ? "s" : "", ranks, r);
  const mon_rec_group *b = dist__mon_blocked_in(&recs[r]);
  char pw[48];
  if (b)
    dist__appendf(buf, len, off, "; it is blocked in group %d (%s) %s #%llu%s, called from %s, "
                  "for %.1f s", b->gid, b->desc, dist__mon_op_name(b->kind), dist__mon_rec_num(b),
                  dist__mon_peer_words(b->kind, b->peer, pw, sizeof pw), b->site,
                  (double)(now_ms - b->since_ms) / 1000);
  else
    dist__appendf(buf, len, off, "; it is in no operation");
}
