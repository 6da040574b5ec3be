/* model_header.c - the job header: the job row, ranks and groups, each
 * group's highest sequence number and the trace's time span.
 *
 * Everything here is a handful of indexed lookups, so the first screen of
 * a 10 M-row trace does not wait for a scan: groups present only in the
 * operations table (their members lost their files) are found by index
 * seeks on op_by_coll, and the span falls back to each rank's last rows
 * through op_by_rank when the job row lacks it (a rank file mid-run). */
#include <stdlib.h>
#include <string.h>

#include "vw.h"
#include "vw_sql.h"

static int read_job(vw_model *m) {
  sqlite3_stmt *st = vw_sql_prepare(
      m, "SELECT job_id, world_size, unix_minus_mono_ns, started_ns, ended_ns FROM job LIMIT 1");
  if (!st)
    return -1;
  int rc = vw_sql_step(m, st);
  if (rc == SQLITE_ROW) {
    vw_sql_text(st, 0, m->job.job_id, sizeof m->job.job_id);
    m->job.world_size = (int)vw_sql_i64(st, 1);
    m->job.unix_minus_mono_ns = vw_sql_i64(st, 2);
    m->job.t0 = vw_sql_i64(st, 3);
    m->job.t1 = vw_sql_i64(st, 4);
  } else {
    m->job.t0 = m->job.t1 = -1;
  }
  sqlite3_finalize(st);
  return rc < 0 ? -1 : 0;
}

static int read_ranks(vw_model *m) {
  int64_t n = vw_sql_scalar(m, "SELECT count(*) FROM ranks", 0, NULL);
  if (n < 0)
    return -1;
  if (n > VW_MAX_RANKS)
    n = VW_MAX_RANKS;
  m->job.ranks = calloc((size_t)n + 1, sizeof *m->job.ranks);
  sqlite3_stmt *st = vw_sql_prepare(
      m, "SELECT rank, host, pid, end_state, dropped_records FROM ranks ORDER BY rank");
  if (!st || !m->job.ranks) {
    sqlite3_finalize(st);
    return -1;
  }
  int rc;
  while ((rc = vw_sql_step(m, st)) == SQLITE_ROW && m->job.nranks < n) {
    vw_rank_info *r = &m->job.ranks[m->job.nranks++];
    r->rank = (int)vw_sql_i64(st, 0);
    vw_sql_text(st, 1, r->host, sizeof r->host);
    r->pid = (int)vw_sql_i64(st, 2);
    vw_sql_text(st, 3, r->end_state, sizeof r->end_state);
    r->dropped = vw_sql_i64(st, 4);
  }
  sqlite3_finalize(st);
  return rc < 0 ? -1 : 0;
}

/* "[0,2,3]" -> members; returns the count (at most cap). */
static int parse_members(const char *s, int *out, int cap) {
  int n = 0;
  while (s && *s && n < cap) {
    while (*s && (*s < '0' || *s > '9') && *s != '-')
      s++;
    if (!*s)
      break;
    char *end;
    long v = strtol(s, &end, 10);
    if (end == s)
      break;
    out[n++] = (int)v;
    s = end;
  }
  return n;
}

static vw_group *add_group(vw_job *j, int id) {
  vw_group *g = realloc(j->groups, (size_t)(j->ngroups + 1) * sizeof *g);
  if (!g)
    return NULL;
  j->groups = g;
  g = &j->groups[j->ngroups++];
  memset(g, 0, sizeof *g);
  g->id = id;
  g->max_seq = 0;
  return g;
}

static int read_groups(vw_model *m) {
  sqlite3_stmt *st = vw_sql_prepare(
      m, "SELECT group_id, name, backend, size, members, description FROM groups ORDER BY group_id");
  if (!st)
    return -1;
  int rc;
  while ((rc = vw_sql_step(m, st)) == SQLITE_ROW) {
    vw_group *g = add_group(&m->job, (int)vw_sql_i64(st, 0));
    if (!g)
      break;
    vw_sql_text(st, 1, g->name, sizeof g->name);
    vw_sql_text(st, 2, g->backend, sizeof g->backend);
    vw_sql_text(st, 5, g->desc, sizeof g->desc);
    g->size = (int)vw_sql_i64(st, 3);
    int cap = g->size > 0 && g->size <= VW_MAX_RANKS ? g->size : 0;
    g->members = calloc((size_t)cap + 1, sizeof(int));
    const char *js = (const char *)sqlite3_column_text(st, 4);
    g->size = g->members ? parse_members(js, g->members, cap) : 0;
  }
  sqlite3_finalize(st);
  return rc < 0 ? -1 : 0;
}

/* Groups the operations name but the groups table lacks, by index seeks. */
static int find_more_groups(vw_model *m) {
  int64_t id = -1;
  for (int guard = 0; guard < 100000; guard++) {
    int64_t a[1] = {id};
    id = vw_sql_scalar(m, "SELECT min(group_id) FROM operations WHERE group_id > ?", 1, a);
    if (id < 0)
      return m->err[0] ? -1 : 0;
    if (vw_model_group_index(m, (int)id) >= 0)
      continue;
    vw_group *g = add_group(&m->job, (int)id);
    if (!g)
      return -1;
    snprintf(g->name, sizeof g->name, "group %d (no record)", (int)id);
    /* Members unknown: every rank that ran something in it. */
    g->members = calloc((size_t)m->job.nranks + 1, sizeof(int));
    for (int i = 0; g->members && i < m->job.nranks; i++) {
      int64_t b[2] = {id, m->job.ranks[i].rank};
      if (vw_sql_scalar(m, "SELECT 1 FROM operations WHERE group_id = ? AND rank = ? LIMIT 1",
                        2, b) == 1)
        g->members[g->size++] = m->job.ranks[i].rank;
    }
  }
  return 0;
}

/* Each group's highest collective seq, and each member's last and last
 * completed one (op_by_coll read backwards from the top: a lagging rank is
 * near it). Point-to-point operations are numbered apart and left out: the
 * matrix's columns are collectives.
 * One range scan over the group's last SEQ_WINDOW operations answers for
 * every member found there; only the others (lagging further) get their
 * own seek, so a 1,024-rank group costs one scan, not 2,048 seeks that
 * each walk down through the other ranks' rows. */
#define SEQ_WINDOW 64
static int member_index(const vw_group *g, int rank) {
  for (int k = 0; k < g->size; k++)
    if (g->members[k] == rank)
      return k;
  return -1;
}

/* The statements of group_seqs, prepared once for every group (a
 * 1,024-rank job has hundreds of groups; preparing costs more than the
 * reads through op_by_coll). */
typedef struct seq_sql {
  sqlite3_stmt *max, *window, *last, *done;
} seq_sql;

static int64_t scalar(vw_model *m, sqlite3_stmt *st, int64_t a, int64_t b) {
  sqlite3_reset(st);
  sqlite3_bind_int64(st, 1, a);
  sqlite3_bind_int64(st, 2, b);
  return vw_sql_step(m, st) == SQLITE_ROW ? vw_sql_i64(st, 0) : -1;
}

/* Every member found in the group's last SEQ_WINDOW collectives. */
static void seq_window(vw_model *m, const seq_sql *q, vw_group *g, bool *seen, bool *seen_done) {
  sqlite3_stmt *st = q->window;
  sqlite3_reset(st);
  sqlite3_bind_int(st, 1, g->id);
  sqlite3_bind_int64(st, 2, g->max_seq - SEQ_WINDOW);
  while (vw_sql_step(m, st) == SQLITE_ROW) {
    int k = member_index(g, sqlite3_column_int(st, 0));
    if (k < 0)
      continue;
    g->last_seq[k] = sqlite3_column_int64(st, 1);
    seen[k] = true;
    if (sqlite3_column_type(st, 2) != SQLITE_NULL) {
      g->last_done[k] = sqlite3_column_int64(st, 2);
      seen_done[k] = true;
    }
  }
}

static void group_seq(vw_model *m, const seq_sql *q, vw_group *g) {
  int64_t v = scalar(m, q->max, g->id, 0);
  g->max_seq = v < 0 ? 0 : v;
  g->last_seq = calloc((size_t)g->size + 1, sizeof *g->last_seq);
  g->last_done = calloc((size_t)g->size + 1, sizeof *g->last_done);
  bool *seen = calloc((size_t)g->size + 1, sizeof *seen);
  bool *seen_done = calloc((size_t)g->size + 1, sizeof *seen_done);
  if (seen && seen_done && g->last_seq && g->last_done)
    seq_window(m, q, g, seen, seen_done);
  for (int k = 0; g->last_seq && g->last_done && k < g->size; k++) {
    if (!seen || !seen[k]) {
      v = scalar(m, q->last, g->id, g->members[k]);
      g->last_seq[k] = v < 0 ? 0 : v;
    }
    if (!seen_done || !seen_done[k]) {
      v = scalar(m, q->done, g->id, g->members[k]);
      g->last_done[k] = v < 0 ? 0 : v;
    }
  }
  free(seen);
  free(seen_done);
}

static void group_seqs(vw_model *m) {
  seq_sql q = {
      vw_sql_prepare(m, "SELECT max(seq) FROM operations WHERE group_id = ?1 AND p2p = 0"),
      vw_sql_prepare(m, "SELECT rank, max(seq), max(CASE WHEN state = 'completed' THEN seq END) "
                        "FROM operations WHERE group_id = ?1 AND p2p = 0 AND seq > ?2 GROUP BY "
                        "rank"),
      vw_sql_prepare(m, "SELECT seq FROM operations WHERE group_id = ?1 AND p2p = 0 AND "
                        "rank = ?2 ORDER BY seq DESC LIMIT 1"),
      vw_sql_prepare(m, "SELECT seq FROM operations WHERE group_id = ?1 AND p2p = 0 AND "
                        "rank = ?2 AND state = 'completed' ORDER BY seq DESC LIMIT 1")};
  for (int i = 0; q.max && q.window && q.last && q.done && i < m->job.ngroups; i++)
    group_seq(m, &q, &m->job.groups[i]);
  sqlite3_finalize(q.max);
  sqlite3_finalize(q.window);
  sqlite3_finalize(q.last);
  sqlite3_finalize(q.done);
}

/* The span when the job row does not have it: each rank's first and last
 * rows through op_by_rank, and the events. */
static void span(vw_model *m) {
  vw_job *j = &m->job;
  for (int i = 0; i < j->nranks; i++) {
    int64_t a[1] = {j->ranks[i].rank};
    int64_t lo = vw_sql_scalar(m, "SELECT min(t_enqueued_ns) FROM operations WHERE rank = ?", 1, a);
    int64_t hi = vw_sql_scalar(
        m, "SELECT max(coalesce(t_ended_ns, t_started_ns, t_enqueued_ns)) FROM "
           "(SELECT * FROM operations WHERE rank = ? ORDER BY t_enqueued_ns DESC LIMIT 256)", 1, a);
    if (lo >= 0 && (j->t0 < 0 || lo < j->t0))
      j->t0 = lo;
    if (hi > j->t1)
      j->t1 = hi;
  }
  int64_t e = vw_sql_scalar(m, "SELECT max(t_ns) FROM events", 0, NULL);
  if (e > j->t1)
    j->t1 = e;
  if (j->t0 < 0)
    j->t0 = vw_sql_scalar(m, "SELECT min(t_ns) FROM events", 0, NULL);
  if (j->t1 < j->t0)
    j->t1 = j->t0;
}

const char *vw_group_name(const vw_model *m, int group_id) {
  const vw_group *g = vw_model_group(m, group_id);
  if (!g)
    return "";
  return g->desc[0] ? g->desc : g->name;
}

const char *vw_group_label(const vw_model *m, int group_id, char *buf, size_t len) {
  const char *n = vw_group_name(m, group_id);
  if (!n[0])
    snprintf(buf, len, "group %d", group_id);
  else if (!strncmp(n, "group ", 6)) /* the trace lacks it: "group N (no record)" */
    snprintf(buf, len, "%s", n);
  else
    snprintf(buf, len, "group %d (%s)", group_id, n);
  return buf;
}

void vw_job_free(vw_job *j) {
  for (int i = 0; i < j->ngroups; i++) {
    free(j->groups[i].members);
    free(j->groups[i].last_seq);
    free(j->groups[i].last_done);
  }
  free(j->groups);
  free(j->ranks);
  j->groups = NULL;
  j->ranks = NULL;
  j->ngroups = j->nranks = 0;
}

int vw_model_reload(vw_model *m) {
  char kind[16], writer[64], skipped[1024];
  memcpy(kind, m->job.kind, sizeof kind);
  memcpy(writer, m->job.writer, sizeof writer);
  memcpy(skipped, m->job.skipped, sizeof skipped);
  vw_job_free(&m->job);
  memset(&m->job, 0, sizeof m->job);
  memcpy(m->job.kind, kind, sizeof kind);
  memcpy(m->job.writer, writer, sizeof writer);
  memcpy(m->job.skipped, skipped, sizeof skipped);
  m->err[0] = '\0';
  m->indexed = vw_sql_scalar(m, "SELECT 1 FROM sqlite_master WHERE type = 'index' AND "
                                "name = 'op_by_coll'", 0, NULL) == 1;
  if (read_job(m) || read_ranks(m) || read_groups(m) || find_more_groups(m))
    return -1;
  group_seqs(m);
  if (m->job.t0 < 0 || m->job.t1 < 0)
    span(m);
  if (m->job.world_size <= 0)
    m->job.world_size = m->job.nranks;
  m->job.n_events = vw_sql_scalar(m, "SELECT count(*) FROM events", 0, NULL);
  /* all or none: the merge writes them in one transaction */
  m->summarised = vw_sql_scalar(m, "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND "
                                   "name IN ('coll_mismatch', 'stat_latency', 'stat_ranks')", 0,
                                NULL) == 3;
  m->has_gpu =
      vw_sql_scalar(m, "SELECT 1 FROM events WHERE kind = 'gpu' LIMIT 1", 0, NULL) == 1;
  return m->err[0] ? -1 : 0;
}
