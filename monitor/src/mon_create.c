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
 * those that are not.
 *
 * Every rank's record also lists the latest creations it called on each
 * scope, member or not, with the list it passed ("x" lines). A member
 * whose count reached k may have made call k with another list, one
 * without itself (an off-by-one that left it out: it got
 * DIST_GROUP_NON_MEMBER at once and went on): the ranks disagree on the
 * member list of call k, a desync, named at that member's call. The same
 * lines tell who made their creations in another order when the ranks
 * creating now are too few to say (two ranks creating one group under two
 * numbers): what the others made as that number. */
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

bool dist__mon_create_lists(const mon_rec_create *cr, int r) {
  return in_ranges(cr->members, r);
}

/* Whether rank m is creating the group rank c's record is creating: the
 * same id and members (ids count each rank's creations, so a rank that
 * creates its groups in another order gives another group the same id). */
static bool creating_same(const mon_rec *recs, int m, const mon_rec_create *cr) {
  const mon_rec_create *b = &recs[m].creating;
  return recs[m].present && b->on && b->gid == cr->gid &&
         (!b->members[0] || !cr->members[0] || !strcmp(b->members, cr->members));
}

/* Whether lists a and b (ranges; hashes of the whole lists, 0 unknown)
 * are one list; unknown ones are taken as one. */
static bool same_list(const char *ma, uint32_t ha, const char *mb, uint32_t hb) {
  if (ha && hb)
    return ha == hb;
  return !ma[0] || !mb[0] || !strcmp(ma, mb);
}

/* Rank r's call k on scope as its record lists it ("x" line), or NULL. */
static const mon_rec_made *made_at(const mon_rec *r, int scope, uint64_t k) {
  for (int i = 0; r->present && scope >= 0 && k && i < r->n_made; i++)
    if (r->made[i].scope == scope && r->made[i].k == k)
      return &r->made[i];
  return NULL;
}

/* Whether a rank other than m made x's list on x's scope under another
 * number than x's: m's calls are shifted against the others' (an order),
 * not a list of its own. */
static bool list_made_elsewhere(const mon_rec *recs, int m, const mon_rec_made *x) {
  for (int q = 0; q < dist__mon.world; q++) {
    const mon_rec *r = &recs[q];
    if (q == m || !r->present)
      continue;
    for (int i = 0; i < r->n_made; i++)
      if (r->made[i].scope == x->scope && r->made[i].k != x->k &&
          same_list(r->made[i].members, r->made[i].hash, x->members, x->hash))
        return true;
    const mon_rec_create *b = &r->creating;
    if (b->on && b->scope == x->scope && b->k && b->k != x->k &&
        same_list(b->members, b->hash, x->members, x->hash))
      return true;
  }
  return false;
}

static bool passed_at(const mon_rec *r, int scope, uint64_t k, const char **members,
                      uint32_t *hash, const char **site);

/* Whether x's list, as call x->k, is the odd one against cr's: fewer ranks
 * passed it as that call than cr's, and none of its members made it as a
 * member (else it is a group its members agree on, and cr's creator
 * is the one that made its creations in another order). */
static bool fewer_passed(const mon_rec *recs, const mon_rec_made *x, const mon_rec_create *cr) {
  int with_x = 0, with_cr = 0;
  for (int q = 0; q < dist__mon.world; q++) {
    const char *mq, *sq;
    uint32_t hq;
    if (!passed_at(&recs[q], x->scope, x->k, &mq, &hq, &sq))
      continue;
    if (same_list(mq, hq, x->members, x->hash)) {
      const mon_rec_made *y = made_at(&recs[q], x->scope, x->k);
      if ((y && y->member) || (recs[q].creating.on && recs[q].creating.k == x->k))
        return false;
      with_x++;
    } else if (same_list(mq, hq, cr->members, cr->hash)) {
      with_cr++;
    }
  }
  return with_cr >= with_x;
}

const mon_rec_made *dist__mon_create_list_odd(const mon_rec *recs, int m,
                                              const mon_rec_create *cr) {
  if (!cr->on || cr->scope < 0 || !cr->k || !in_ranges(cr->members, m) || !recs[m].present)
    return NULL;
  const mon_rec_made *x = made_at(&recs[m], cr->scope, cr->k);
  if (!x || x->member || same_list(x->members, x->hash, cr->members, cr->hash) ||
      list_made_elsewhere(recs, m, x) || !fewer_passed(recs, x, cr))
    return NULL;
  return x;
}

/* How many creations rank m called on scope (its record's count), -1
 * unknown (no line for the scope, or an older record). */
static int64_t count_on(const mon_rec *r, int scope) {
  const mon_rec_group *g = scope >= 0 ? dist__mon_rec_group(r, scope) : NULL;
  return g ? g->creations : -1;
}

/* How many ranks are creating the group rank r is creating, r included. */
static int creators_of(const mon_rec *recs, int r) {
  int n = 0;
  for (int q = 0; q < dist__mon.world; q++)
    n += creating_same(recs, q, &recs[r].creating);
  return n;
}

/* How many other ranks are blocked creating a group that lists rank q
 * while q is not creating it: the ranks waiting for q. */
static int waiting_for(const mon_rec *recs, int q) {
  int n = 0;
  for (int p = 0; p < dist__mon.world; p++)
    n += p != q && recs[p].present && recs[p].creating.on &&
         in_ranges(recs[p].creating.members, q) && !creating_same(recs, q, &recs[p].creating);
  return n;
}

bool dist__mon_create_local_odd(const mon_rec *recs, int r) {
  const mon_rec_create *a = &recs[r].creating;
  if (!recs[r].present || !a->on || a->scope >= 0 || !a->members[0] || creators_of(recs, r) > 1)
    return false;
  int wanted = waiting_for(recs, r), members = 0;
  for (int m = 0; m < dist__mon.world; m++) {
    if (m == r || !in_ranges(a->members, m))
      continue;
    /* each member it waits for is blocked creating another group, which
     * fewer ranks wait for it in than wait for r */
    if (!recs[m].present || !recs[m].creating.on || waiting_for(recs, m) >= wanted)
      return false;
    members++;
  }
  return members > 0;
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
    const mon_rec_made *x = at_k ? NULL : made_at(&recs[q], a->scope, a->k);
    if (x) { /* what it passed as that number, member or not */
      *(same_list(x->members, x->hash, a->members, a->hash) ? &same : &other) += 1;
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
      dist__mon_gone_how(&recs[c], now_ms, how, sizeof how) || creator_is_odd(recs, cr) ||
      dist__mon_create_local_odd(recs, c))
    return 0;
  int n = 0;
  bool scoped = cr->scope >= 0 && cr->k > 0;
  for (int m = 0; m < dist__mon.world && n < cap; m++) {
    if (m == c || !in_ranges(cr->members, m) || !recs[m].present || creating_same(recs, m, cr))
      continue;
    if (scoped && dist__mon_create_list_odd(recs, m, cr)) {
      out[n++] = m; /* it made that call with a list that left itself out */
      continue;
    }
    if (scoped && dist__mon_create_order_odd(recs, m)) {
      out[n++] = m; /* it made its creations in another order */
      continue;
    }
    if (!scoped && dist__mon_create_local_odd(recs, m)) {
      out[n++] = m; /* it creates a group no other member of it creates */
      continue;
    }
    /* blocked creating an earlier call, or (only the members calling)
     * another group: followed, to where its wait ends */
    int next[MON_CULPRITS_MAX];
    int k = (scoped && creating_earlier(recs, m, cr)) || (!scoped && recs[m].creating.on)
                ? (depth < 4 ? skippers(recs, m, next, MON_CULPRITS_MAX, depth + 1) : 0)
                : -1;
    int kept = 0; /* a wait that comes back to c ends at m, not at c */
    for (int i = 0; i < k; i++)
      if (next[i] != c)
        next[kept++] = next[i];
    k = k > 0 && !kept && !scoped ? 0 : k > 0 ? kept : k;
    if (k > 0 || (k == 0 && scoped)) {
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

/* "; ranks 0-2,4-7 passed ranks 0-1 as their #1, a call rank 3 has not
 * made (it skipped it, or makes it later)" (or "which rank 3 made as its
 * #3"), from what the others' records say they passed as r's number (the
 * most common list). */
static void say_skipped_list(const mon_rec *recs, int r, char *buf, size_t len, size_t *off) {
  const mon_rec_create *a = &recs[r].creating;
  int world = dist__mon.world, best = -1, best_n = 0;
  int *who = dist__malloc(sizeof(int) * (size_t)(world ? world : 1));
  const char *mb = "";
  uint32_t hb = 0;
  for (int q = 0; who && q < world; q++) {
    const char *mq, *sq;
    uint32_t hq;
    if (q == r || !passed_at(&recs[q], a->scope, a->k, &mq, &hq, &sq) ||
        same_list(mq, hq, a->members, a->hash) || !mq[0])
      continue;
    int n = 0;
    for (int p = 0; p < world; p++) {
      const char *mp, *sp;
      uint32_t hp;
      n += p != r && passed_at(&recs[p], a->scope, a->k, &mp, &hp, &sp) &&
           same_list(mp, hp, mq, hq);
    }
    if (n > best_n)
      best = q, best_n = n, mb = mq, hb = hq;
  }
  if (best < 0) {
    dist__free(who);
    return;
  }
  int n = 0;
  for (int p = 0; p < world; p++) {
    const char *mp, *sp;
    uint32_t hp;
    if (p != r && passed_at(&recs[p], a->scope, a->k, &mp, &hp, &sp) && same_list(mp, hp, mb, hb))
      who[n++] = p;
  }
  char ranks[256];
  dist__format_ranks(who, (size_t)n, ranks, sizeof ranks);
  dist__free(who);
  const mon_rec_made *mine = NULL;
  for (int i = 0; i < recs[r].n_made && !mine; i++)
    if (recs[r].made[i].scope == a->scope && same_list(recs[r].made[i].members,
                                                        recs[r].made[i].hash, mb, hb))
      mine = &recs[r].made[i];
  dist__appendf(buf, len, off, "; rank%s %s passed ranks %s as %s #%llu", n > 1 ? "s" : "",
                ranks, mb, n > 1 ? "their" : "its", (unsigned long long)a->k);
  if (mine)
    dist__appendf(buf, len, off, ", which rank %d made as its #%llu", r,
                  (unsigned long long)mine->k);
  else if (recs[r].n_made && recs[r].made[0].k <= 1)
    dist__appendf(buf, len, off, ", a call rank %d has not made (it skipped it, or makes it "
                  "later)", r);
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
                  "#%llu, called from %s (every rank must create its groups in one order)", q,
                  (unsigned long long)recs[q].creating.k, recs[q].creating.site);
  else if (b)
    dist__appendf(buf, len, off, ", where rank%s %s create%s a group of ranks %s as their #%llu, "
                  "called from %s (every rank must create its groups in one order)",
                  n > 1 ? "s" : "", ranks, n > 1 ? "" : "s", b->members,
                  (unsigned long long)b->k, b->site);
  say_skipped_list(recs, r, buf, len, off);
}

/* "left itself out of the list it passed as its dist_new_group #2 on group
 * 0 (ranks 1,3), called from ..., where rank 3 passed ranks 2-3 (group 2)
 * and waits for it". */
static void say_left_out(const mon_rec *recs, int r, int c, const mon_rec_made *x, char *buf,
                         size_t len, size_t *off) {
  const mon_rec_create *cr = &recs[c].creating;
  dist__appendf(buf, len, off, "left itself out of the list it passed as its %s #%llu on group "
                "%d (ranks %s), called from %s, so it is no member of that group "
                "(DIST_GROUP_NON_MEMBER) and went on, where rank %d passed ranks %s for group %d "
                "and waits for it", cr->call[0] ? cr->call : "dist_new_group",
                (unsigned long long)x->k, x->scope, x->members, x->site, c, cr->members,
                cr->gid);
  (void)r;
}

/* "is blocked in dist_new_group for 9.8 s, creating group G (2 ranks: 1,3),
 * called from ..., which no other member creates: rank 1 creates group H
 * (4 ranks: 1,3,5,7) with ranks 5,7". */
static void say_local(const mon_rec *recs, int r, int64_t now_ms, char *buf, size_t len,
                      size_t *off) {
  const mon_rec_create *a = &recs[r].creating;
  char s[32];
  dist__appendf(buf, len, off, "is blocked in %s for %s, creating group %d (%d ranks: %s), "
                "called from %s, which no other member creates", a->call[0] ? a->call :
                "dist_new_group", dist__mon_sec_word(now_ms - a->since_ms, s, sizeof s), a->gid,
                a->size, a->members, a->site);
  int world = dist__mon.world, said = 0;
  int *with = dist__malloc(sizeof(int) * (size_t)(world ? world : 1));
  for (int m = 0; with && m < world; m++) {
    const mon_rec_create *b = &recs[m].creating;
    if (m == r || !in_ranges(a->members, m) || !recs[m].present || !b->on)
      continue;
    int n = 0;
    for (int q = 0; q < world; q++)
      if (q != m && creating_same(recs, q, b))
        with[n++] = q;
    char ranks[256] = "";
    dist__format_ranks(with, (size_t)n, ranks, sizeof ranks);
    dist__appendf(buf, len, off, "%s rank %d creates group %d (%d ranks: %s)%s%s%s",
                  said++ ? "," : ":", m, b->gid, b->size, b->members, n ? " with rank" : "",
                  n > 1 ? "s " : n ? " " : "", ranks);
  }
  int n = 0; /* the ranks waiting for it */
  for (int p = 0; with && p < world; p++)
    if (p != r && recs[p].present && recs[p].creating.on &&
        in_ranges(recs[p].creating.members, r) && !creating_same(recs, r, &recs[p].creating))
      with[n++] = p;
  char ranks[256] = "";
  if (with)
    dist__format_ranks(with, (size_t)n, ranks, sizeof ranks);
  dist__free(with);
  if (n)
    dist__appendf(buf, len, off, "; rank%s %s wait%s for it in groups that list it",
                  n > 1 ? "s" : "", ranks, n > 1 ? "" : "s");
  dist__appendf(buf, len, off, " (with use_local_synchronization each member passes the "
                "group's one list)");
}

void dist__mon_say_skipped(const mon_rec *recs, int r, int c, int64_t now_ms, char *buf,
                           size_t len, size_t *off) {
  if (dist__mon_create_local_odd(recs, r)) {
    say_local(recs, r, now_ms, buf, len, off);
    return;
  }
  const mon_rec_made *x = dist__mon_create_list_odd(recs, r, &recs[c].creating);
  if (x) {
    say_left_out(recs, r, c, x, buf, len, off);
    return;
  }
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

/* --- a member that left itself out: the desync report -------------------- */

/* What rank q passed as call k on scope: its creation in flight, or an
 * "x" line; false when its record does not say. */
static bool passed_at(const mon_rec *r, int scope, uint64_t k, const char **members,
                      uint32_t *hash, const char **site) {
  const mon_rec_create *b = &r->creating;
  if (r->present && b->on && b->scope == scope && b->k == k) {
    *members = b->members, *hash = b->hash, *site = b->site;
    return true;
  }
  const mon_rec_made *x = made_at(r, scope, k);
  if (x)
    *members = x->members, *hash = x->hash, *site = x->site;
  return x != NULL;
}

/* One line per list the ranks passed as call k (the odd ones marked, as
 * the checking layer's report does), then where each called from. */
static void say_lists(const mon_rec *recs, const mon_rec_create *cr, const int *odd, int n_odd,
                      char *buf, size_t len, size_t *off) {
  int world = dist__mon.world;
  int *cls = dist__malloc(sizeof(int) * (size_t)(world ? world : 1));
  int *who = dist__malloc(sizeof(int) * (size_t)(world ? world : 1));
  for (int q = 0; cls && who && q < world; q++) {
    const char *mq, *sq;
    uint32_t hq;
    cls[q] = passed_at(&recs[q], cr->scope, cr->k, &mq, &hq, &sq) ? q : -1;
    for (int p = 0; p < q && cls[q] == q; p++) {
      const char *mp, *sp;
      uint32_t hp;
      if (cls[p] == p && passed_at(&recs[p], cr->scope, cr->k, &mp, &hp, &sp) &&
          same_list(mp, hp, mq, hq))
        cls[q] = p;
    }
  }
  for (int q = 0; cls && who && q < world; q++) {
    if (cls[q] != q)
      continue;
    int n = 0;
    bool marked = false;
    for (int p = q; p < world; p++)
      if (cls[p] == q) {
        who[n++] = p;
        for (int i = 0; i < n_odd; i++)
          marked |= odd[i] == p;
      }
    const char *m, *s;
    uint32_t h;
    passed_at(&recs[q], cr->scope, cr->k, &m, &h, &s);
    char ranks[256];
    dist__format_ranks(who, (size_t)n, ranks, sizeof ranks);
    dist__appendf(buf, len, off, "  rank%s %s: ranks %s, called from %s%s\n", n > 1 ? "s" : "",
                  ranks, m, s, marked ? "  <- member list differs" : "");
  }
  dist__free(cls);
  dist__free(who);
}

char *dist__mon_diagnose_creation_desync(const mon_rec *recs, mon_verdict *v) {
  int me = dist__mon.rank, odd[MON_CULPRITS_MAX], n = 0;
  const mon_rec_create *cr = &recs[me].creating;
  const mon_rec_made *first = NULL;
  for (int m = 0; m < dist__mon.world && n < MON_CULPRITS_MAX; m++) {
    const mon_rec_made *x = m == me ? NULL : dist__mon_create_list_odd(recs, m, cr);
    if (x) {
      odd[n++] = m;
      first = first ? first : x;
    }
  }
  const size_t len = 16384;
  char *buf = n ? dist__malloc(len) : NULL;
  if (!buf)
    return NULL;
  size_t off = 0;
  char who[256], s[32];
  dist__format_ranks(odd, (size_t)n, who, sizeof who);
  int64_t now_ms = dist__mon_wall_ms(dist__now_ns());
  const char *call = cr->call[0] ? cr->call : "dist_new_group";
  dist__appendf(buf, len, &off, "desync in group %d (%d ranks) at creation: ranks disagree on "
                "the member list of their %s #%llu on group %d (rank%s %s left %s out of the "
                "list %s passed)\n", cr->gid, cr->size, call, (unsigned long long)cr->k,
                cr->scope, n > 1 ? "s" : "", who, n > 1 ? "themselves" : "itself",
                n > 1 ? "they" : "it");
  say_lists(recs, cr, odd, n, buf, len, &off);
  for (int i = 0; i < n; i++) {
    const mon_rec_made *x = made_at(&recs[odd[i]], cr->scope, cr->k);
    dist__appendf(buf, len, &off, "  rank %d passed ranks %s, a list without itself, so it is "
                  "no member of the group that call creates (DIST_GROUP_NON_MEMBER) and went "
                  "on; rank %d passed ranks %s with it and waits for it in %s for %s\n",
                  odd[i], x->members, me, cr->members, call,
                  dist__mon_sec_word(now_ms - cr->since_ms, s, sizeof s));
    const mon_rec_group *b = dist__mon_blocked_in(&recs[odd[i]]);
    char pw[48];
    if (b)
      dist__appendf(buf, len, &off, "  rank %d is blocked in group %d (%s) %s #%llu%s, called "
                    "from %s, for %s\n", odd[i], b->gid, b->desc, dist__mon_op_name(b->kind),
                    (unsigned long long)dist__mon_rec_num(b),
                    dist__mon_peer_words(b->kind, b->peer, pw, sizeof pw), b->site,
                    dist__mon_sec_word(now_ms - b->since_ms, s, sizeof s));
  }
  *v = (mon_verdict){.gid = cr->gid, .kind = -1, .n = n};
  memcpy(v->culprits, odd, sizeof(int) * (size_t)n);
  snprintf(v->gname, sizeof v->gname, "g%d", cr->gid);
  snprintf(v->site, sizeof v->site, "%s", first->site);
  if (off && buf[off - 1] == '\n')
    buf[--off] = '\0';
  return buf;
}
