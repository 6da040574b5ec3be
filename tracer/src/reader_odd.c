/* reader_odd.c - which of two members of a group made a call unlike the
 * one the groups of its description made at the same collective.
 *
 * A desync between the two members of a group (a "dp" pair of a mesh)
 * names one by a rule of thumb where it is found (the call that changed
 * from the rank's last one, else the later rank): the pair alone cannot
 * tell which of two calls the program meant, and a loop over layers of
 * different sizes changes every call, so the rule can name the innocent
 * one. Ranks that run one program make the same call at the same
 * collective number on every group of one mesh dimension, so the other
 * groups can tell: the member whose call is the one they all made is
 * innocent, the other is the culprit. */
#include "reader_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SIG_LEN 160

/* The group rank of global rank g in a members list "[1,5]", -1 if absent;
 * *size the list's length. */
static int group_rank_in(const char *members, int g, int *size) {
  int k = 0, at = -1;
  for (const char *s = members; s && *s;) {
    if (*s < '0' || *s > '9') {
      s++;
      continue;
    }
    char *e;
    if ((int)strtol(s, &e, 10) == g)
      at = k;
    k++;
    s = e;
  }
  *size = k;
  return at;
}

/* A call as every group of the description makes it: the operation, its
 * dtype, element counts, reduce op and root as a group rank. */
static void sig_of(sqlite3_stmt *st, char *sig) {
  int size;
  int root = sqlite3_column_type(st, 7) == SQLITE_NULL
                 ? -1
                 : group_rank_in((const char *)sqlite3_column_text(st, 8),
                                 sqlite3_column_int(st, 7), &size);
  snprintf(sig, SIG_LEN, "%s|%s|%lld|%lld|%s|%d", sqlite3_column_text(st, 2),
           sqlite3_column_text(st, 3), (long long)sqlite3_column_int64(st, 4),
           (long long)sqlite3_column_int64(st, 5), sqlite3_column_text(st, 6), root);
}

int dist_trace_odd_member(dist_trace *t, int group_id, int64_t seq, int a, int b,
                          dist_trace_odd *out) {
  sqlite3 *db = dist_trace_sqlite(t);
  if (!db || !out || a == b)
    return DIST_E_INVAL;
  memset(out, 0, sizeof *out);
  out->rank = -1;
  sqlite3_stmt *st;
  if (sqlite3_prepare_v2(db, "SELECT o.rank, o.group_id, o.op, coalesce(o.dtype, ''),"
                         " o.numel_in, o.numel_out, coalesce(o.redop, ''), o.root, g.members"
                         " FROM operations o JOIN groups g USING (group_id)"
                         " WHERE o.seq = ?2 AND o.p2p = 0 AND dist_kin(g.description, g.members) ="
                         " (SELECT dist_kin(description, members) FROM groups WHERE group_id = ?1)",
                         -1, &st, NULL))
    return DIST_OK; /* a trace without the columns cannot tell */
  sqlite3_bind_int(st, 1, group_id);
  sqlite3_bind_int64(st, 2, seq);
  char sa[SIG_LEN] = "", sb[SIG_LEN] = "", usual[SIG_LEN] = "", sig[SIG_LEN];
  char op_a[32] = "", op_b[32] = "";
  bool mixed = false;
  int others = 0;
  while (sqlite3_step(st) == SQLITE_ROW) {
    int r = sqlite3_column_int(st, 0), g = sqlite3_column_int(st, 1);
    sig_of(st, sig);
    if (g == group_id && (r == a || r == b)) {
      memcpy(r == a ? sa : sb, sig, SIG_LEN);
      snprintf(r == a ? op_a : op_b, sizeof op_a, "%s", sqlite3_column_text(st, 2));
      continue;
    }
    if (g == group_id)
      continue; /* a third member: the pair's report compares two */
    if (others++ == 0)
      memcpy(usual, sig, SIG_LEN);
    else if (strcmp(usual, sig))
      mixed = true; /* the other groups disagree among themselves */
  }
  sqlite3_finalize(st);
  /* Two ranks or more of other groups, all alike, and one member alone
   * making their call. */
  if (others < 2 || mixed || !sa[0] || !sb[0])
    return DIST_OK;
  bool a_usual = !strcmp(sa, usual), b_usual = !strcmp(sb, usual);
  if (a_usual != b_usual) {
    out->rank = a_usual ? b : a;
    out->ranks_alike = others;
    snprintf(out->op, sizeof out->op, "%s", a_usual ? op_b : op_a);
  }
  return DIST_OK;
}
