/* reader_awaited.c - of the collectives a rank's peers wait for it in,
 * the one it reached first.
 *
 * A rank that ended (killed, or exited early) while its peers still need
 * it leaves them waiting in one collective of each group it was in:
 * in group A for the async all_reduce it issued and never finished, in the
 * world group for the barrier it was to call after that. Its own trace may
 * stop earlier (SIGKILL: nothing is dumped). The collective to name is the
 * first of those in its program's order. Its own trace may hold the call
 * itself (issued, never completed): that one. Else it says what the rank
 * called next the last time it made its latest calls: the candidate
 * called from that line is the one. Else the order its peers issued them in: a
 * peer waiting in two of them issued the earlier first (one thread's
 * enqueue times grow), and candidates no peer shares are ordered by
 * their earliest enqueue. */
#include "reader_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define AWAITED_ROWS 4096 /* peers' rows in the candidates that are compared */

typedef struct awaited_row {
  int group, rank;
  int64_t seq, t_enq;
  char op[32];
  char site[96]; /* module+offset, else file:line */
} awaited_row;

#define SITE_OF(o)                                                                           \
  "(SELECT coalesce(c.module || '+' || c.offset, c.file || ':' || c.line) FROM callsites c"  \
  " WHERE c.rank = " o ".rank AND c.callsite_id = " o ".callsite_id)"

/* Each group of rank's: the collective after the last one that completed
 * with it (a completion that needs every member, or its own), when a peer
 * is in it and nobody completed it. */
#define AWAITED_SQL                                                                          \
  "WITH mine(g) AS (SELECT group_id FROM groups WHERE instr(',' || substr(members, 2,"       \
  " length(members) - 2) || ',', ',' || ?1 || ',') > 0),"                                    \
  " last(g, s) AS (SELECT m.g, coalesce((SELECT max(seq) FROM operations o WHERE"            \
  " o.group_id = m.g AND o.p2p = 0 AND o.state = 'completed' AND (o.rank = ?1 OR o.op NOT"   \
  " IN ('BROADCAST', 'BROADCAST_BYTES', 'SCATTER', 'REDUCE', 'GATHER'))), 0) FROM mine m)"   \
  " SELECT o.group_id, o.seq, o.op, o.rank, o.t_enqueued_ns, " SITE_OF("o") " FROM"         \
  " operations o JOIN last l"                                                                \
  " ON o.group_id = l.g AND o.seq = l.s + 1 WHERE o.p2p = 0 AND o.rank != ?1 AND"            \
  " o.state != 'completed' AND NOT EXISTS (SELECT 1 FROM operations x WHERE"                 \
  " x.group_id = o.group_id AND x.p2p = 0 AND x.seq = o.seq AND x.state = 'completed')"      \
  " ORDER BY o.group_id, o.seq, o.rank"

/* Whether candidate a (rows [a0, a1)) comes before b (rows [b0, b1)) in
 * the program's order. */
static bool before(const awaited_row *r, int a0, int a1, int b0, int b1) {
  int64_t min_a = INT64_MAX, min_b = INT64_MAX;
  for (int i = a0; i < a1; i++) {
    min_a = r[i].t_enq < min_a ? r[i].t_enq : min_a;
    for (int j = b0; j < b1; j++)
      if (r[j].rank == r[i].rank)
        return r[i].t_enq < r[j].t_enq; /* one peer issued both */
  }
  for (int j = b0; j < b1; j++)
    min_b = r[j].t_enq < min_b ? r[j].t_enq : min_b;
  return min_a < min_b;
}

#define HABIT_OPS 4096 /* of the rank's latest calls, looked at */
#define HABIT_CONTEXT 4  /* calls that must match: a bucket loop repeats one line */

/* What rank called next the last time its latest calls (up to
 * HABIT_CONTEXT, the longest that occurred before) were made in that
 * order: the site into out; false when its trace does not say. */
static bool next_site(sqlite3 *db, int rank, char *out, size_t len) {
  sqlite3_stmt *st;
  if (sqlite3_prepare_v2(db, "SELECT " SITE_OF("o") " FROM operations o WHERE o.rank = ?1"
                             " ORDER BY o.t_enqueued_ns DESC LIMIT 4096", -1, &st, NULL))
    return false;
  sqlite3_bind_int(st, 1, rank);
  char (*site)[96] = malloc(HABIT_OPS * sizeof *site); /* newest first */
  int n = 0;
  while (site && n < HABIT_OPS && sqlite3_step(st) == SQLITE_ROW) {
    const char *s = (const char *)sqlite3_column_text(st, 0);
    snprintf(site[n++], sizeof site[0], "%s", s ? s : "?");
  }
  sqlite3_finalize(st);
  bool found = false;
  for (int ctx = HABIT_CONTEXT; site && !found && ctx >= 1; ctx--)
    for (int j = 1; !found && j + ctx <= n; j++) {
      int k = 0; /* "?": a call whose site its trace lacks matches nothing */
      while (k < ctx && strcmp(site[k], "?") && !strcmp(site[j + k], site[k]))
        k++;
      if (k == ctx && strcmp(site[j - 1], "?")) { /* the same calls before: site[j - 1]
                                                     came after them */
        snprintf(out, len, "%s", site[j - 1]);
        found = true;
      }
    }
  free(site);
  return found;
}

/* The first row of the candidate the rank's own trace shows it in (issued,
 * not completed), its earliest such; -1 when its trace holds none. */
static int own_pick(sqlite3 *db, int rank, const awaited_row *r, int n) {
  sqlite3_stmt *st;
  if (sqlite3_prepare_v2(db, "SELECT group_id, seq FROM operations WHERE rank = ?1 AND p2p = 0"
                             " AND state != 'completed' ORDER BY t_enqueued_ns", -1, &st, NULL))
    return -1;
  sqlite3_bind_int(st, 1, rank);
  int pick = -1;
  while (pick < 0 && sqlite3_step(st) == SQLITE_ROW) {
    int g = sqlite3_column_int(st, 0);
    int64_t seq = sqlite3_column_int64(st, 1);
    for (int i = 0; i < n && pick < 0; i++)
      if (r[i].group == g && r[i].seq == seq)
        pick = i;
  }
  sqlite3_finalize(st);
  return pick;
}

/* The first row of the one candidate called from site (a peer's row),
 * -1 when none or several are. */
static int habit_pick(const awaited_row *r, int n, const char *site) {
  int pick = -1;
  for (int i = 0; i < n; i++) {
    if (strcmp(r[i].site, site))
      continue;
    if (pick >= 0 && (r[pick].group != r[i].group || r[pick].seq != r[i].seq))
      return -1;
    if (pick < 0)
      pick = i;
  }
  return pick;
}

int tr_first_awaited(sqlite3 *db, int rank, dist_trace_op *out) {
  awaited_row *rows = malloc(AWAITED_ROWS * sizeof *rows);
  sqlite3_stmt *st;
  if (!rows || sqlite3_prepare_v2(db, AWAITED_SQL, -1, &st, NULL) != SQLITE_OK) {
    free(rows);
    return 0;
  }
  sqlite3_bind_int(st, 1, rank);
  int n = 0;
  while (n < AWAITED_ROWS && sqlite3_step(st) == SQLITE_ROW) {
    awaited_row *w = &rows[n++];
    w->group = sqlite3_column_int(st, 0);
    w->seq = sqlite3_column_int64(st, 1);
    snprintf(w->op, sizeof w->op, "%s", (const char *)sqlite3_column_text(st, 2));
    w->rank = sqlite3_column_int(st, 3);
    w->t_enq = sqlite3_column_int64(st, 4);
    const char *site = (const char *)sqlite3_column_text(st, 5);
    snprintf(w->site, sizeof w->site, "%s", site ? site : "");
  }
  sqlite3_finalize(st);
  char next[96];
  int by_habit = own_pick(db, rank, rows, n);
  if (by_habit < 0 && next_site(db, rank, next, sizeof next))
    by_habit = habit_pick(rows, n, next);
  int best0 = by_habit, best1 = -1;
  for (int i = 0; by_habit < 0 && i < n;) { /* candidates are runs of one (group, seq) */
    int j = i;
    while (j < n && rows[j].group == rows[i].group && rows[j].seq == rows[i].seq)
      j++;
    if (best0 < 0 || before(rows, i, j, best0, best1))
      best0 = i, best1 = j;
    i = j;
  }
  if (best0 < 0) {
    free(rows);
    return 0;
  }
  memset(out, 0, sizeof *out);
  out->rank = rank;
  out->group_id = rows[best0].group;
  out->seq = rows[best0].seq;
  snprintf(out->op, sizeof out->op, "%s", rows[best0].op);
  snprintf(out->state, sizeof out->state, "waited");
  out->t_enqueued_ns = out->t_started_ns = out->t_ended_ns = -1;
  free(rows);
  return 1;
}
