/* reader_pattern.c - whether a rank's latest calls repeat its earlier steps.
 *
 * A hang whose waits only go round (a receive waiting for a rank that
 * waits in a collective for the receiver) names both ranks: their states
 * alone cannot tell a send skipped by one from a receive added by the
 * other. Their histories can. A training loop repeats its calls step by
 * step, so the sequence of call sites a rank went through since its
 * previous call from its latest call's site is the one it went through
 * in an earlier step, unless this step is where the program went wrong:
 * the rank that skipped its send reaches its collective without the send
 * it made before it every time; the rank that added a receive calls from
 * a site it never called from. A loop may also vary by step (a broadcast
 * every other step): a call this step has that the step before had not,
 * and that completed (its peers made it too), is the program's, not a
 * deviation. distrun breaks such a tie with this. */
#include "reader_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PATTERN_OPS 4096 /* of the rank's latest operations: many steps */

/* The call sites (callsite_id, -1 unknown) of rank's latest operations,
 * newest first, into sites, and whether each completed into done; the
 * newest operation into cur. */
static int latest_sites(sqlite3 *db, int rank, int64_t *sites, bool *done, int *n,
                        dist_trace_op *cur) {
  sqlite3_stmt *st;
  *n = 0;
  if (sqlite3_prepare_v2(db, "SELECT coalesce(callsite_id, -1), group_id, seq, op, state,"
                             " t_enqueued_ns FROM operations WHERE rank = ?1 ORDER BY"
                             " t_enqueued_ns DESC LIMIT ?2", -1, &st, NULL))
    return DIST_E_INVAL;
  sqlite3_bind_int(st, 1, rank);
  sqlite3_bind_int(st, 2, PATTERN_OPS);
  while (*n < PATTERN_OPS && sqlite3_step(st) == SQLITE_ROW) {
    const char *state = (const char *)sqlite3_column_text(st, 4);
    if (*n == 0) {
      cur->rank = rank;
      cur->group_id = sqlite3_column_int(st, 1);
      cur->seq = sqlite3_column_int64(st, 2);
      snprintf(cur->op, sizeof cur->op, "%s", (const char *)sqlite3_column_text(st, 3));
      snprintf(cur->state, sizeof cur->state, "%s", state);
      cur->t_enqueued_ns = sqlite3_column_int64(st, 5);
    }
    done[*n] = state && !strcmp(state, "completed");
    sites[(*n)++] = sqlite3_column_int64(st, 0);
  }
  sqlite3_finalize(st);
  return DIST_OK;
}

/* The next call from sites[0]'s site at or after from (newest first); n
 * when none. */
static int next_from(const int64_t *sites, int n, int from) {
  while (from < n && sites[from] != sites[0])
    from++;
  return from;
}

/* Whether a step's sites a[0..na) and b[0..nb) are the same calls. */
static bool same_calls(const int64_t *a, int na, const int64_t *b, int nb) {
  return na == nb && !memcmp(a, b, sizeof *a * (size_t)na);
}

static bool holds(const int64_t *w, int n, int64_t site) {
  for (int i = 0; i < n; i++)
    if (w[i] == site)
      return true;
  return false;
}

/* Whether this step's calls cur[0..nc) are the step before's, prev[0..np),
 * once the calls this step added that completed are left out (a call its
 * peers made too: the loop's own variation, as a broadcast every other
 * step). */
static bool same_but_completed_additions(const int64_t *cur, const bool *done, int nc,
                                         const int64_t *prev, int np) {
  int k = 0;
  for (int i = 0; i < nc; i++) {
    if (done[i] && !holds(prev, np, cur[i]))
      continue;
    if (k >= np || cur[i] != prev[k++])
      return false;
  }
  return k == np;
}

/* 1, 0 or -1 (dist_trace_pattern.differs) for sites, newest first: this
 * step is sites[1..o1) (o1: the previous call from sites[0]'s site), a
 * step before it sites(oj..oj+1). */
static int differs(const int64_t *sites, const bool *done, int n) {
  if (n < 2 || sites[0] < 0)
    return -1;
  int o1 = next_from(sites, n, 1);
  if (o1 == n) /* a site it never called from, after calls from others */
    return 1;
  int o2 = next_from(sites, n, o1 + 1);
  if (o2 == n) /* one step behind it: nothing to compare that step with */
    return -1;
  const int64_t *cur = sites + 1, *prev = sites + o1 + 1;
  int nc = o1 - 1, np = o2 - o1 - 1;
  if (same_but_completed_additions(cur, done + 1, nc, prev, np))
    return 0;
  for (int a = o1, b = o2; b < n; a = b, b = next_from(sites, n, b + 1))
    if (same_calls(cur, nc, sites + a + 1, b - a - 1))
      return 0; /* as in an earlier step (a loop whose steps alternate) */
  /* steps of one length that differ where a site is unknown: cannot tell */
  return nc == np && (holds(cur, nc, -1) || holds(prev, np, -1)) ? -1 : 1;
}

static void text_of(sqlite3 *db, const char *sql, int rank, int64_t id, char *out, size_t len,
                    bool site) {
  sqlite3_stmt *st;
  out[0] = '\0';
  if (sqlite3_prepare_v2(db, sql, -1, &st, NULL))
    return;
  sqlite3_bind_int(st, 1, rank);
  sqlite3_bind_int64(st, 2, id);
  if (sqlite3_step(st) == SQLITE_ROW) {
    const char *a = (const char *)sqlite3_column_text(st, 0);
    const char *file = site ? (const char *)sqlite3_column_text(st, 1) : NULL;
    const char *base = file && strrchr(file, '/') ? strrchr(file, '/') + 1 : file;
    if (site && a && base)
      snprintf(out, len, "%s (%s:%d)", a, base, sqlite3_column_int(st, 2));
    else if (a)
      snprintf(out, len, "%s", a);
  }
  sqlite3_finalize(st);
}

/* Rank's call site id as "function (file:line)" into out ("" unknown). */
static void site_text(sqlite3 *db, int rank, int64_t id, char *out, size_t len) {
  text_of(db, "SELECT function, file, line FROM callsites WHERE rank = ?1 AND"
              " callsite_id = ?2 AND function IS NOT NULL AND file IS NOT NULL",
          rank, id, out, len, true);
}

/* The rank's oldest operation that did not complete (the one it is in, as
 * the monitor says: a synchronous call waits behind an async one issued
 * before it), over cur, and its call site into *site; false when none. */
static bool oldest_open(sqlite3 *db, int rank, dist_trace_op *cur, int64_t *site) {
  sqlite3_stmt *st;
  bool found = false;
  if (sqlite3_prepare_v2(db, "SELECT coalesce(callsite_id, -1), group_id, seq, op, state,"
                             " t_enqueued_ns FROM operations WHERE rank = ?1 AND state !="
                             " 'completed' ORDER BY t_enqueued_ns LIMIT 1", -1, &st, NULL))
    return false;
  sqlite3_bind_int(st, 1, rank);
  if (sqlite3_step(st) == SQLITE_ROW) {
    found = true;
    *site = sqlite3_column_int64(st, 0);
    cur->group_id = sqlite3_column_int(st, 1);
    cur->seq = sqlite3_column_int64(st, 2);
    snprintf(cur->op, sizeof cur->op, "%s", (const char *)sqlite3_column_text(st, 3));
    snprintf(cur->state, sizeof cur->state, "%s", (const char *)sqlite3_column_text(st, 4));
    cur->t_enqueued_ns = sqlite3_column_int64(st, 5);
  }
  sqlite3_finalize(st);
  return found;
}

int dist_trace_rank_pattern(dist_trace *t, int rank, dist_trace_pattern *out) {
  sqlite3 *db = dist_trace_sqlite(t);
  if (!db || !out)
    return DIST_E_INVAL;
  memset(out, 0, sizeof *out);
  out->differs = -1;
  int64_t *sites = malloc(PATTERN_OPS * sizeof *sites);
  bool *done = malloc(PATTERN_OPS * sizeof *done);
  if (!sites || !done) {
    free(sites);
    free(done);
    return DIST_E_NOMEM;
  }
  int n = 0;
  int rc = latest_sites(db, rank, sites, done, &n, &out->cur);
  if (rc == DIST_OK && n > 0) {
    out->differs = differs(sites, done, n);
    int64_t site = sites[0];
    oldest_open(db, rank, &out->cur, &site);
    if (site >= 0)
      site_text(db, rank, site, out->site, sizeof out->site);
    text_of(db, "SELECT coalesce(nullif(description, ''), name) FROM groups WHERE ?1 >= 0"
                " AND group_id = ?2", rank,
            out->cur.group_id, out->group_name, sizeof out->group_name, false);
  }
  free(sites);
  free(done);
  return rc;
}

/* --- where its peers last saw it (dist_trace_peers_view) ----------------- */

/* The groups rank is a member of ("[0,1,2]"), the collectives whose
 * completion by a peer needs it (not a root's push: a broadcast's,
 * scatter's, reduce's or gather's non-root completes without it). */
#define SEEN_MINE                                                                            \
  "WITH mine(g) AS (SELECT group_id FROM groups WHERE instr(',' || substr(members, 2,"       \
  " length(members) - 2) || ',', ',' || ?1 || ',') > 0) "
#define SEEN_NEEDS_ALL "op NOT IN ('BROADCAST', 'BROADCAST_BYTES', 'SCATTER', 'REDUCE', 'GATHER')"

/* Whether a peer completed something with rank that its own trace does
 * not show completed (a receive from it: not when it batches its sends,
 * which its trace records as BATCH_P2P, not as sends). */
static bool peers_ahead(sqlite3 *db, int rank) {
  sqlite3_stmt *st;
  bool ahead = false;
  if (sqlite3_prepare_v2(
          db, SEEN_MINE "SELECT 1 FROM operations o WHERE o.rank != ?1 AND o.state = 'completed'"
          " AND ((o.p2p = 0 AND o." SEEN_NEEDS_ALL " AND o.group_id IN (SELECT g FROM mine) AND"
          " NOT EXISTS (SELECT 1 FROM operations m WHERE m.group_id = o.group_id AND m.p2p = 0"
          " AND m.seq = o.seq AND m.rank = ?1 AND m.state = 'completed')) OR (o.group_id = 0 AND"
          " o.op = 'RECV' AND o.root = ?1 AND o.pair_seq IS NOT NULL AND NOT EXISTS (SELECT 1 FROM"
          " operations b WHERE b.rank = ?1 AND b.op = 'BATCH_P2P') AND NOT EXISTS (SELECT 1"
          " FROM operations m WHERE m.rank = ?1 AND m.group_id = 0 AND m.op = 'SEND' AND"
          " m.root = o.rank AND m.pair_seq = o.pair_seq AND m.state = 'completed'))) LIMIT 1",
          -1, &st, NULL))
    return false;
  sqlite3_bind_int(st, 1, rank);
  ahead = sqlite3_step(st) == SQLITE_ROW;
  sqlite3_finalize(st);
  return ahead;
}

/* The call site of (group, seq): rank's own, else the lowest peer's. */
static void seen_site(sqlite3 *db, int rank, int group, int64_t seq, char *out, size_t len) {
  sqlite3_stmt *st;
  out[0] = '\0';
  if (sqlite3_prepare_v2(db, "SELECT c.function, c.file, c.line FROM operations o JOIN callsites"
                             " c ON c.rank = o.rank AND c.callsite_id = o.callsite_id WHERE"
                             " o.group_id = ?2 AND o.p2p = 0 AND o.seq = ?3 AND c.function IS"
                             " NOT NULL AND c.file IS NOT NULL ORDER BY o.rank != ?1, o.rank"
                             " LIMIT 1", -1, &st, NULL))
    return;
  sqlite3_bind_int(st, 1, rank);
  sqlite3_bind_int(st, 2, group);
  sqlite3_bind_int64(st, 3, seq);
  if (sqlite3_step(st) == SQLITE_ROW) {
    const char *fn = (const char *)sqlite3_column_text(st, 0);
    const char *file = (const char *)sqlite3_column_text(st, 1);
    const char *base = strrchr(file, '/') ? strrchr(file, '/') + 1 : file;
    snprintf(out, len, "%s (%s:%d)", fn, base, sqlite3_column_int(st, 2));
  }
  sqlite3_finalize(st);
}

int dist_trace_peers_view(dist_trace *t, int rank, dist_trace_seen *out) {
  sqlite3 *db = dist_trace_sqlite(t);
  if (!db || !out)
    return DIST_E_INVAL;
  memset(out, 0, sizeof *out);
  if (!peers_ahead(db, rank))
    return DIST_OK;
  /* The latest collective of its groups that completed with it, by its
   * first completion (the merge put the ranks on one clock): the first
   * rank done with a collective is done soon after its last member came,
   * in the order the rank made its calls; the last rank done may be any
   * rank held up (descheduled, a slow link) long after, and would order a
   * collective of an earlier step after the rank's later ones. */
  sqlite3_stmt *st;
  if (sqlite3_prepare_v2(db, SEEN_MINE "SELECT group_id, seq, op, min(t_ended_ns) AS t FROM"
                             " operations WHERE p2p = 0 AND state = 'completed' AND group_id IN"
                             " (SELECT g FROM mine) AND (rank = ?1 OR " SEEN_NEEDS_ALL ")"
                             " GROUP BY group_id, seq ORDER BY t DESC, group_id LIMIT 1", -1,
                         &st, NULL))
    return DIST_E_INVAL;
  sqlite3_bind_int(st, 1, rank);
  if (sqlite3_step(st) == SQLITE_ROW) {
    out->ahead = 1;
    out->op.rank = rank;
    out->op.group_id = sqlite3_column_int(st, 0);
    out->op.seq = sqlite3_column_int64(st, 1);
    snprintf(out->op.op, sizeof out->op.op, "%s", (const char *)sqlite3_column_text(st, 2));
    snprintf(out->op.state, sizeof out->op.state, "completed");
    out->op.t_ended_ns = sqlite3_column_int64(st, 3);
    out->op.t_enqueued_ns = out->op.t_started_ns = -1;
  }
  sqlite3_finalize(st);
  if (!out->ahead)
    return DIST_OK;
  /* Where its peers wait for it: the first such collective it reached, in
   * any of its groups (reader_awaited.c); else where it last took part. */
  tr_first_awaited(db, rank, &out->op);
  seen_site(db, rank, out->op.group_id, out->op.seq, out->site, sizeof out->site);
  text_of(db, "SELECT coalesce(nullif(description, ''), name) FROM groups WHERE ?1 >= 0"
              " AND group_id = ?2", rank, out->op.group_id, out->group_name,
          sizeof out->group_name, false);
  return DIST_OK;
}

int dist_trace_awaited(dist_trace *t, int rank, dist_trace_seen *out) {
  sqlite3 *db = dist_trace_sqlite(t);
  if (!db || !out)
    return DIST_E_INVAL;
  memset(out, 0, sizeof *out);
  if (!tr_first_awaited(db, rank, &out->op))
    return DIST_OK;
  out->ahead = 1;
  seen_site(db, rank, out->op.group_id, out->op.seq, out->site, sizeof out->site);
  text_of(db, "SELECT coalesce(nullif(description, ''), name) FROM groups WHERE ?1 >= 0"
              " AND group_id = ?2", rank, out->op.group_id, out->group_name,
          sizeof out->group_name, false);
  return DIST_OK;
}

int dist_trace_op_site(dist_trace *t, int rank, int group_id, int64_t seq, const char *op,
                       char *site, size_t len) {
  sqlite3 *db = dist_trace_sqlite(t);
  if (!db || !op || !site || !len)
    return DIST_E_INVAL;
  site[0] = '\0';
  sqlite3_stmt *st;
  if (sqlite3_prepare_v2(db, "SELECT callsite_id FROM operations WHERE rank = ?1 AND"
                             " group_id = ?2 AND seq = ?3 AND op = ?4 AND callsite_id IS NOT"
                             " NULL LIMIT 1", -1, &st, NULL))
    return DIST_OK;
  sqlite3_bind_int(st, 1, rank);
  sqlite3_bind_int(st, 2, group_id);
  sqlite3_bind_int64(st, 3, seq);
  sqlite3_bind_text(st, 4, op, -1, SQLITE_STATIC);
  int64_t id = sqlite3_step(st) == SQLITE_ROW ? sqlite3_column_int64(st, 0) : -1;
  sqlite3_finalize(st);
  if (id >= 0)
    site_text(db, rank, id, site, len);
  return DIST_OK;
}

int dist_trace_collective_of(dist_trace *t, int rank, int group_id, int64_t seq, char *op,
                             size_t op_len, char *site, size_t site_len) {
  sqlite3 *db = dist_trace_sqlite(t);
  if (!db || !op || !op_len || !site || !site_len)
    return DIST_E_INVAL;
  op[0] = site[0] = '\0';
  sqlite3_stmt *st;
  if (sqlite3_prepare_v2(db, "SELECT op, coalesce(callsite_id, -1) FROM operations WHERE"
                             " rank = ?1 AND group_id = ?2 AND seq = ?3 AND p2p = 0 LIMIT 1",
                         -1, &st, NULL))
    return DIST_OK;
  sqlite3_bind_int(st, 1, rank);
  sqlite3_bind_int(st, 2, group_id);
  sqlite3_bind_int64(st, 3, seq);
  int64_t id = -1;
  if (sqlite3_step(st) == SQLITE_ROW) {
    snprintf(op, op_len, "%s", (const char *)sqlite3_column_text(st, 0));
    id = sqlite3_column_int64(st, 1);
  }
  sqlite3_finalize(st);
  if (id >= 0)
    site_text(db, rank, id, site, site_len);
  return DIST_OK;
}
