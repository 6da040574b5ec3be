/* reader_depart.c - whether a rank's calls departed from those of the
 * ranks that made the same calls before.
 *
 * Ranks that run one program in one role (a pipeline stage, the members
 * of one kind of group) make the same calls in the same order. When a
 * wait-for cycle names two ranks, one of them left that order: it skipped
 * a call (a send its partner waits for, a barrier the others wait in) or
 * added one. The other is only behind or stuck: its calls so far are what
 * the ranks most like it made. A rank's call sites (the same program, so
 * one site is one line on every rank), in the order it issued them, are
 * compared with every other rank's: the ranks sharing its longest common
 * start are its peers; if its calls are a start of theirs it did not
 * depart; if they all went on alike where it went another way, it did.
 * A loop that varies by step (a barrier every third step) varies alike on
 * the peers, so it is not a departure. distrun breaks a hang's tie with
 * this when the step comparison (reader_pattern.c) cannot. */
#include "reader_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DEPART_RANKS 1024    /* jobs larger than this are not compared */
#define DEPART_OPS 65536     /* nor ranks with more calls than this */
#define DEPART_TOTAL (4 << 20) /* nor traces of more operations (16 MiB of sites) */
#define DEPART_GROUP 1024    /* members of a group read for its role's ranks */

typedef struct seq {
  int32_t *site;             /* interned call sites, in issue order */
  int n, cap;
  bool whole;                /* every call of the rank is here */
} seq;

/* Every rank's call sites in issue order, interned across ranks (one
 * number per module and offset, else file and line), into s[0..world). */
static bool load(sqlite3 *db, seq *s, int world) {
  sqlite3_stmt *st;
  if (sqlite3_prepare_v2(db, "SELECT rank, dense_rank() OVER (ORDER BY key) FROM (SELECT"
                             " o.rank, o.t_enqueued_ns AS t, coalesce(c.module || '+' ||"
                             " c.offset, c.file || ':' || c.line, 'unknown') AS key FROM"
                             " operations o LEFT JOIN callsites c ON c.rank = o.rank AND"
                             " c.callsite_id = o.callsite_id) ORDER BY rank, t", -1, &st, NULL))
    return false;
  for (int r = 0; r < world; r++)
    s[r].whole = true;
  while (sqlite3_step(st) == SQLITE_ROW) {
    int r = sqlite3_column_int(st, 0);
    if (r < 0 || r >= world)
      continue;
    seq *q = &s[r];
    if (q->n == DEPART_OPS) {
      q->whole = false;
      continue;
    }
    if (q->n == q->cap) {
      int cap = q->cap ? q->cap * 2 : 256;
      int32_t *ns = realloc(q->site, sizeof *ns * (size_t)cap);
      if (!ns)
        break;
      q->site = ns;
      q->cap = cap;
    }
    q->site[q->n++] = sqlite3_column_int(st, 1);
  }
  return sqlite3_finalize(st) == SQLITE_OK;
}

static int common_start(const seq *a, const seq *b) {
  int k = 0;
  while (k < a->n && k < b->n && a->site[k] == b->site[k])
    k++;
  return k;
}

/* "[4,5,6,7]" into out (at most max); how many, -1 when malformed or
 * longer. */
static int parse_members(const char *s, int *out, int max) {
  if (!s || *s++ != '[')
    return -1;
  int n = 0;
  while (*s && *s != ']') {
    char *end;
    long v = strtol(s, &end, 10);
    if (end == s || n == max)
      return -1;
    out[n++] = (int)v;
    s = *end == ',' ? end + 1 : end;
  }
  return *s == ']' ? n : -1;
}

/* The ranks of r's role, into twin (a world-sized flag array): the
 * members at r's place in the other groups of the kind of the group of
 * r's latest operation (stage 1 of the other pipelines' groups: the same
 * description, else the same shape, reader_kin.c); false when no such
 * group is in the trace. */
static bool twins_of(sqlite3 *db, int r, bool *twin, int world) {
  sqlite3_stmt *st;
  if (sqlite3_prepare_v2(
          db, "WITH mine AS (SELECT g.group_id, dist_kin(g.description, g.members) AS kin,"
          " g.members FROM operations o JOIN groups g ON g.group_id = o.group_id WHERE"
          " o.rank = ?1 AND g.group_id != 0 ORDER BY o.t_enqueued_ns DESC LIMIT 1)"
          " SELECT g.members, m.members FROM groups g, mine m WHERE"
          " dist_kin(g.description, g.members) = m.kin AND g.group_id != m.group_id", -1, &st,
          NULL))
    return false;
  sqlite3_bind_int(st, 1, r);
  bool any = false;
  memset(twin, 0, sizeof *twin * (size_t)world);
  while (sqlite3_step(st) == SQLITE_ROW) {
    int other[DEPART_GROUP], own[DEPART_GROUP];
    int n = parse_members((const char *)sqlite3_column_text(st, 0), other, DEPART_GROUP);
    int m = parse_members((const char *)sqlite3_column_text(st, 1), own, DEPART_GROUP);
    for (int i = 0; n == m && i < m; i++)
      if (own[i] == r && other[i] >= 0 && other[i] < world)
        any = twin[other[i]] = true;
  }
  sqlite3_finalize(st);
  return any;
}

/* Rank r against the ranks sharing its longest common start (peers),
 * of its role's ranks when twin is given (NULL: any rank): 0 when its
 * calls are a start of a peer's (or all of them), 1 when every peer that
 * went on went on alike at that point and r another way (a peer whose
 * calls end there is stuck, maybe behind r: no sign), -1 else. */
static int departs(const seq *s, int world, int r, const bool *twin, int *peers, int *at) {
  int best = -1;
  for (int w = 0; w < world; w++)
    if (w != r && s[w].n && (!twin || twin[w])) {
      int k = common_start(&s[r], &s[w]);
      best = k > best ? k : best;
    }
  *peers = 0;
  *at = best;
  if (best < 0 || !s[r].whole)
    return -1;
  if (best == s[r].n)
    return 0; /* nothing of its own past what a peer made too */
  int next = -1;
  for (int w = 0; w < world; w++) {
    if (w == r || !s[w].n || (twin && !twin[w]) || common_start(&s[r], &s[w]) != best)
      continue;
    if (best == s[w].n)
      continue; /* a peer that stopped there (stuck behind it) shows no way on */
    if (next >= 0 && s[w].site[best] != next)
      return -1; /* the peers differ among themselves */
    next = s[w].site[best];
    ++*peers;
  }
  return *peers >= 1 ? 1 : -1; /* one peer (a pipeline's twin stage): the caller weighs it */
}

int dist_trace_ranks_depart(dist_trace *t, const int *ranks, size_t n,
                            dist_trace_depart *out) {
  sqlite3 *db = dist_trace_sqlite(t);
  if (!db || !out || (n && !ranks))
    return DIST_E_INVAL;
  for (size_t i = 0; i < n; i++)
    out[i] = (dist_trace_depart){.departs = -1};
  sqlite3_stmt *st;
  int world = 0;
  int64_t total = 0;
  if (sqlite3_prepare_v2(db, "SELECT max(rank) + 1, count(*) FROM operations", -1, &st, NULL))
    return DIST_OK;
  if (sqlite3_step(st) == SQLITE_ROW) {
    world = sqlite3_column_int(st, 0);
    total = sqlite3_column_int64(st, 1);
  }
  sqlite3_finalize(st);
  if (!n || world > DEPART_RANKS || total > DEPART_TOTAL)
    return DIST_OK;
  seq *s = calloc((size_t)world, sizeof *s);
  if (!s)
    return DIST_E_NOMEM;
  bool *twin = calloc((size_t)world, sizeof *twin);
  if (twin && load(db, s, world)) /* once, for every rank asked about */
    for (size_t i = 0; i < n; i++)
      if (ranks[i] >= 0 && ranks[i] < world && s[ranks[i]].n)
        out[i].departs = departs(s, world, ranks[i],
                                 twins_of(db, ranks[i], twin, world) ? twin : NULL,
                                 &out[i].peers, &out[i].at);
  for (int r = 0; r < world; r++)
    free(s[r].site);
  free(s);
  free(twin);
  return DIST_OK;
}
