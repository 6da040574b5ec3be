/* reader_counts.c - how many calls of one kind each rank made on the groups
 * of one description (every "dp" group of a mesh), to tell a rank that
 * skipped a call from the partner it left calling on alone.
 *
 * Ranks that run one program make the same number of each collective on
 * the groups of one mesh dimension. When the members of one such group
 * part in count (one left the group, the other waits in its next call),
 * the counts of the other groups say which member kept the program's
 * count: the one short of it skipped a call (an async all_reduce whose
 * branch it did not take), the one at it did not add any. */
#include "reader_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define COUNT_RANKS 4096

/* Each rank's count of op on the groups described as group_id is, into
 * n[rank] (-1: none); false when the trace cannot tell. */
static bool counts_by_rank(sqlite3 *db, int group_id, const char *op, int64_t *n, int cap) {
  sqlite3_stmt *st;
  if (sqlite3_prepare_v2(db, "SELECT o.rank, count(*) FROM operations o JOIN groups g"
                         " USING (group_id) WHERE o.op = ?2 AND dist_kin(g.description, g.members)"
                         " = (SELECT dist_kin(description, members) FROM groups WHERE group_id = ?1)"
                         " GROUP BY o.rank", -1, &st, NULL))
    return false;
  sqlite3_bind_int(st, 1, group_id);
  sqlite3_bind_text(st, 2, op, -1, SQLITE_STATIC);
  for (int i = 0; i < cap; i++)
    n[i] = -1;
  while (sqlite3_step(st) == SQLITE_ROW) {
    int r = sqlite3_column_int(st, 0);
    if (r >= 0 && r < cap)
      n[r] = sqlite3_column_int64(st, 1);
  }
  return sqlite3_finalize(st) == SQLITE_OK;
}

/* The count most ranks made, and how many made it. */
static int64_t most_common(const int64_t *n, int cap, int *how_many) {
  int64_t best = -1;
  int best_k = 0;
  for (int i = 0; i < cap; i++) {
    if (n[i] < 0)
      continue;
    int k = 0;
    for (int j = 0; j < cap; j++)
      k += n[j] == n[i];
    if (k > best_k)
      best = n[i], best_k = k;
  }
  *how_many = best_k;
  return best;
}

/* The members of group_id ("[2,3]") into m; their number. */
static int members_of(sqlite3 *db, int group_id, int *m, int cap) {
  sqlite3_stmt *st;
  int k = 0;
  if (sqlite3_prepare_v2(db, "SELECT members FROM groups WHERE group_id = ?1", -1, &st, NULL))
    return 0;
  sqlite3_bind_int(st, 1, group_id);
  if (sqlite3_step(st) == SQLITE_ROW) {
    const char *s = (const char *)sqlite3_column_text(st, 0);
    for (char *e; s && *s && k < cap;) {
      if (*s < '0' || *s > '9') {
        s++;
        continue;
      }
      m[k++] = (int)strtol(s, &e, 10);
      s = e;
    }
  }
  sqlite3_finalize(st);
  return k;
}

int dist_trace_short_member(dist_trace *t, int group_id, const char *op, int rank,
                            dist_trace_short *out) {
  sqlite3 *db = dist_trace_sqlite(t);
  if (!db || !op || !out)
    return DIST_E_INVAL;
  memset(out, 0, sizeof *out);
  out->rank = -1;
  int64_t *n = malloc(COUNT_RANKS * sizeof *n);
  int m[COUNT_RANKS / 4], k, at;
  if (!n)
    return DIST_E_NOMEM;
  if (!counts_by_rank(db, group_id, op, n, COUNT_RANKS) || rank < 0 || rank >= COUNT_RANKS) {
    free(n);
    return DIST_OK;
  }
  int64_t usual = most_common(n, COUNT_RANKS, &at);
  k = members_of(db, group_id, m, COUNT_RANKS / 4);
  int shorter = -1, found = 0;
  for (int i = 0; i < k; i++)
    if (m[i] >= 0 && m[i] < COUNT_RANKS && m[i] != rank && n[m[i]] >= 0 && n[m[i]] < usual)
      shorter = m[i], found++;
  /* Three ranks or more at the usual count, the given rank one of them,
   * and one member of its group alone short of it. */
  if (at >= 3 && n[rank] == usual && found == 1) {
    out->rank = shorter;
    out->count = n[shorter];
    out->usual = usual;
    out->ranks_at_usual = at;
  }
  free(n);
  return DIST_OK;
}
