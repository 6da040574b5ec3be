/* model_page.c - the pages the screens show, fetched with bounded queries.
 *
 * Every query here reads at most what one screen needs (a window of the
 * progress matrix, one collective across ranks, one rank's operations in a
 * time window, one page of events) through the merged file's indexes
 * (op_by_coll, op_by_rank, ev_by_rank), so memory and time stay flat
 * whatever the size of the trace. A rank file has no indexes; it holds one
 * rank, so the same queries scan one rank's rows. */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "vw.h"
#include "vw_sql.h"

int vw_state_code(const char *s) {
  if (!strcmp(s, "completed"))
    return VW_ST_DONE;
  if (!strcmp(s, "failed"))
    return VW_ST_FAIL;
  if (!strcmp(s, "timed_out"))
    return VW_ST_TIMEOUT;
  if (!strcmp(s, "enqueued") || !strcmp(s, "started"))
    return VW_ST_RUN;
  return VW_ST_NONE;
}

static bool filter_match(const vw_filter *f, const char *op, const char *state) {
  if (!f)
    return true;
  if (f->op[0] && strncasecmp(op, f->op, strlen(f->op)) != 0)
    return false;
  if (f->state[0] && strncasecmp(state, f->state, strlen(f->state)) != 0)
    return false;
  return true;
}

/* Row lookup for the matrix: (rank, row) pairs sorted by rank, so that a
 * page of a 1,024-rank group places each SQL row in log time (a scan of
 * the rows per SQL row was 10^8 steps for one screen). */
typedef struct rank_row {
  int rank, row;
} rank_row;

static int cmp_rank_row(const void *a, const void *b) {
  const rank_row *x = a, *y = b;
  return (x->rank > y->rank) - (x->rank < y->rank);
}

static int row_of(const rank_row *idx, int n, int rank) {
  rank_row key = {rank, 0};
  const rank_row *hit = bsearch(&key, idx, (size_t)n, sizeof *idx, cmp_rank_row);
  return hit ? hit->row : -1;
}

static int page_alloc(vw_matrix_page *out, const int *ranks, int nrank, int nseq) {
  out->cells = calloc((size_t)nrank * (size_t)nseq + 1, 1);
  out->ranks = calloc((size_t)nrank + 1, sizeof *out->ranks);
  out->last_seq = calloc((size_t)nrank + 1, sizeof *out->last_seq);
  out->last_done = calloc((size_t)nrank + 1, sizeof *out->last_done);
  if (!out->cells || !out->ranks || !out->last_seq || !out->last_done)
    return -1;
  memcpy(out->ranks, ranks, (size_t)nrank * sizeof *ranks);
  return 0;
}

/* Each row's last and last completed seq, from the group's header. */
static void page_last(const vw_group *g, const rank_row *idx, int n, vw_matrix_page *out) {
  for (int k = 0; g && k < g->size; k++) {
    int r = row_of(idx, n, g->members[k]);
    if (r >= 0) {
      out->last_seq[r] = g->last_seq[k];
      out->last_done[r] = g->last_done[k];
    }
  }
}

/* The window's cells: every collective row of the group in [seq0, seq0 +
 * nseq), through op_by_coll; rows of ranks not asked for are skipped. */
static int page_cells(vw_model *m, const rank_row *idx, int n, const vw_filter *f,
                      vw_matrix_page *out) {
  /* Collectives only: point-to-point operations are numbered apart (a
   * column is one collective on every rank; they are in the timeline). */
  sqlite3_stmt *st = vw_sql_prepare(m, "SELECT rank, seq, state, op FROM operations "
                                       "WHERE group_id = ? AND p2p = 0 AND seq >= ? AND seq < ?");
  if (!st)
    return -1;
  sqlite3_bind_int(st, 1, out->group_id);
  sqlite3_bind_int64(st, 2, out->seq0);
  sqlite3_bind_int64(st, 3, out->seq0 + out->nseq);
  int rc;
  while ((rc = vw_sql_step(m, st)) == SQLITE_ROW) {
    int r = row_of(idx, n, sqlite3_column_int(st, 0));
    int64_t col = sqlite3_column_int64(st, 1) - out->seq0;
    if (r < 0 || col < 0 || col >= out->nseq)
      continue;
    char state[16], op[32];
    vw_sql_text(st, 2, state, sizeof state);
    vw_sql_text(st, 3, op, sizeof op);
    out->cells[r * out->nseq + col] =
        (uint8_t)(filter_match(f, op, state) ? vw_state_code(state) : VW_ST_MASKED);
  }
  sqlite3_finalize(st);
  return rc < 0 ? -1 : 0;
}

int vw_model_matrix(vw_model *m, int group_id, const int *ranks, int nrank, int64_t seq0,
                    int nseq, const vw_filter *f, vw_matrix_page *out) {
  memset(out, 0, sizeof *out);
  if (nrank > VW_MAX_RANKS)
    nrank = VW_MAX_RANKS;
  if (nrank < 0 || nseq < 0)
    return -1;
  out->group_id = group_id;
  out->seq0 = seq0;
  out->nseq = nseq;
  out->nrank = nrank;
  rank_row *idx = calloc((size_t)nrank + 1, sizeof *idx);
  if (!idx || page_alloc(out, ranks, nrank, nseq) != 0) {
    free(idx);
    vw_matrix_page_free(out);
    snprintf(m->err, sizeof m->err, "out of memory for the matrix");
    return -1;
  }
  for (int r = 0; r < nrank; r++)
    idx[r] = (rank_row){ranks[r], r};
  qsort(idx, (size_t)nrank, sizeof *idx, cmp_rank_row);
  page_last(vw_model_group(m, group_id), idx, nrank, out);
  int rc = nseq == 0 || nrank == 0 ? 0 : page_cells(m, idx, nrank, f, out);
  free(idx);
  return rc;
}

void vw_matrix_page_free(vw_matrix_page *p) {
  if (p) {
    free(p->cells);
    free(p->ranks);
    free(p->last_seq);
    free(p->last_done);
    p->cells = NULL;
    p->ranks = NULL;
    p->last_seq = p->last_done = NULL;
  }
}

#define OP_COLS                                                                            \
  "o.rank, o.group_id, o.seq, o.op, o.state, o.dtype, o.shape, o.redop, o.numel_in, "     \
  "o.numel_out, o.bytes_in, o.bytes_out, o.n_inputs, o.n_outputs, o.root, o.tag, "       \
  "o.is_async, o.t_enqueued_ns, o.t_started_ns, o.t_ended_ns, o.status, o.message, "     \
  "c.function, c.module, c.offset "
#define OP_FROM                                                                            \
  "FROM operations o LEFT JOIN callsites c ON c.rank = o.rank AND c.callsite_id = o.callsite_id "

static void read_op(sqlite3_stmt *st, vw_op *o) {
  memset(o, 0, sizeof *o);
  o->rank = (int)vw_sql_i64(st, 0);
  o->group_id = (int)vw_sql_i64(st, 1);
  o->seq = vw_sql_i64(st, 2);
  vw_sql_text(st, 3, o->op, sizeof o->op);
  vw_sql_text(st, 4, o->state, sizeof o->state);
  vw_sql_text(st, 5, o->dtype, sizeof o->dtype);
  vw_sql_text(st, 6, o->shape, sizeof o->shape);
  vw_sql_text(st, 7, o->redop, sizeof o->redop);
  o->numel_in = vw_sql_i64(st, 8);
  o->numel_out = vw_sql_i64(st, 9);
  o->bytes_in = vw_sql_i64(st, 10);
  o->bytes_out = vw_sql_i64(st, 11);
  o->n_inputs = (int)vw_sql_i64(st, 12);
  o->n_outputs = (int)vw_sql_i64(st, 13);
  o->root = (int)vw_sql_i64(st, 14);
  o->tag = (int)vw_sql_i64(st, 15);
  o->is_async = (int)vw_sql_i64(st, 16);
  o->t_enq = vw_sql_i64(st, 17);
  o->t_start = vw_sql_i64(st, 18);
  o->t_end = vw_sql_i64(st, 19);
  o->status = (int)vw_sql_i64(st, 20);
  o->gpu_start = o->gpu_ns = -1;
  vw_sql_text(st, 21, o->message, sizeof o->message);
  char fn[64], mod[128];
  vw_sql_text(st, 22, fn, sizeof fn);
  vw_sql_text(st, 23, mod, sizeof mod);
  int64_t off = vw_sql_i64(st, 24);
  const char *base = strrchr(mod, '/') ? strrchr(mod, '/') + 1 : mod;
  if (fn[0])
    snprintf(o->callsite, sizeof o->callsite, "%s", fn);
  else if (mod[0])
    snprintf(o->callsite, sizeof o->callsite, "%.60s+0x%llx", base, (unsigned long long)off);
}

/* Runs a prepared operations query into ops (up to cap). */
static int read_ops(vw_model *m, sqlite3_stmt *st, vw_op *ops, int cap, int *n) {
  int rc;
  while ((rc = vw_sql_step(m, st)) == SQLITE_ROW && *n < cap)
    read_op(st, &ops[(*n)++]);
  sqlite3_finalize(st);
  return rc < 0 ? -1 : 0;
}

/* Each rank's 'gpu' event of its operation. events has no index by
 * (group, seq): the search walks ev_by_rank from just before the enqueue
 * to just after the end (the GPU ran it in between; the slack covers the
 * two clocks' rounding), so it reads that window of one rank, never the
 * whole table. A trace without gpu rows skips it (m->has_gpu). */
#define GPU_SLACK_NS 10000000LL

static int gpu_times(vw_model *m, vw_op *ops, int n) {
  if (!m->has_gpu || n == 0)
    return 0;
  sqlite3_stmt *st = vw_sql_prepare(
      m, "SELECT t_ns, " VW_SQL_GPU_NS " FROM events WHERE rank = ?1 AND t_ns >= ?2 AND "
         "t_ns <= ?3 AND kind = 'gpu' AND group_id = ?4 AND seq = ?5 AND message LIKE "
         "'gpu_ns=%' ORDER BY t_ns LIMIT 1");
  if (!st)
    return -1;
  int rc = 0;
  for (int i = 0; i < n && rc >= 0; i++) {
    vw_op *o = &ops[i];
    int64_t end = o->t_end >= 0 ? o->t_end : m->job.t1;
    sqlite3_reset(st);
    sqlite3_bind_int(st, 1, o->rank);
    sqlite3_bind_int64(st, 2, o->t_enq - GPU_SLACK_NS);
    sqlite3_bind_int64(st, 3, (end > o->t_enq ? end : o->t_enq) + GPU_SLACK_NS);
    sqlite3_bind_int(st, 4, o->group_id);
    sqlite3_bind_int64(st, 5, o->seq);
    if ((rc = vw_sql_step(m, st)) == SQLITE_ROW) {
      o->gpu_start = vw_sql_i64(st, 0);
      o->gpu_ns = vw_sql_i64(st, 1);
    }
  }
  sqlite3_finalize(st);
  return rc < 0 ? -1 : 0;
}

int vw_model_collective(vw_model *m, int group_id, int64_t seq, vw_op *ops, int cap, int *n) {
  *n = 0;
  sqlite3_stmt *st = vw_sql_prepare(m, "SELECT " OP_COLS OP_FROM
                                       "WHERE o.group_id = ? AND NOT o.p2p AND o.seq = ? "
                                       "ORDER BY o.rank");
  if (!st)
    return -1;
  sqlite3_bind_int(st, 1, group_id);
  sqlite3_bind_int64(st, 2, seq);
  if (read_ops(m, st, ops, cap, n) != 0)
    return -1;
  return gpu_times(m, ops, *n);
}

int vw_model_prev_at_site(vw_model *m, const vw_op *o, vw_op *prev, bool *found) {
  *found = false;
  sqlite3_stmt *st = vw_sql_prepare(
      m, "SELECT " OP_COLS OP_FROM "WHERE o.group_id = ?2 AND NOT o.p2p AND o.seq < ?3 AND"
         " o.rank = ?1 AND o.callsite_id = (SELECT callsite_id FROM operations WHERE"
         " group_id = ?2 AND NOT p2p AND seq = ?3 AND rank = ?1) ORDER BY o.seq DESC LIMIT 1");
  if (!st)
    return -1;
  sqlite3_bind_int(st, 1, o->rank);
  sqlite3_bind_int(st, 2, o->group_id);
  sqlite3_bind_int64(st, 3, o->seq);
  int n = 0;
  if (read_ops(m, st, prev, 1, &n) != 0)
    return -1;
  *found = n == 1;
  return 0;
}

/* A row's call site as ranks share it: the module (its build id when
 * known) and the offset in it; callsite_id numbers are each rank's own. */
#define SITE_JOIN "JOIN callsites c ON c.rank = o.rank AND c.callsite_id = o.callsite_id "
#define SITE_KEY "coalesce(c.build_id, c.module)"

int vw_model_site_story(vw_model *m, const vw_op *o, vw_site_story *out) {
  memset(out, 0, sizeof *out);
  sqlite3_stmt *st = vw_sql_prepare(
      m, "WITH me AS (SELECT " SITE_KEY " AS mod, c.offset AS off FROM operations o " SITE_JOIN
         "WHERE o.group_id = ?2 AND NOT o.p2p AND o.seq = ?3 AND o.rank = ?1 AND c.offset IS "
         "NOT NULL LIMIT 1) SELECT mod, off, EXISTS (SELECT 1 FROM operations o " SITE_JOIN
         "WHERE o.group_id = ?2 AND NOT o.p2p AND o.seq BETWEEN ?3 - 64 AND ?3 - 1 AND "
         SITE_KEY " = me.mod AND c.offset = me.off), coalesce((SELECT " SITE_KEY " = me.mod "
         "AND c.offset = me.off FROM operations o " SITE_JOIN "WHERE o.group_id = ?2 AND NOT "
         "o.p2p AND o.rank = ?1 AND o.seq < ?3 ORDER BY o.seq DESC LIMIT 1), 0) FROM me");
  if (!st)
    return -1;
  sqlite3_bind_int(st, 1, o->rank);
  sqlite3_bind_int(st, 2, o->group_id);
  sqlite3_bind_int64(st, 3, o->seq);
  int rc = vw_sql_step(m, st);
  if (rc == SQLITE_ROW) {
    out->known = true;
    vw_sql_text(st, 0, out->module, sizeof out->module);
    out->offset = vw_sql_i64(st, 1);
    out->seen = vw_sql_i64(st, 2) != 0;
    out->repeats = vw_sql_i64(st, 3) != 0;
  }
  sqlite3_finalize(st);
  return rc < 0 ? -1 : 0;
}

int vw_model_p2p_pair(vw_model *m, int rank, int group_id, int64_t seq, vw_op *ops, int cap,
                      int *n) {
  *n = 0;
  sqlite3_stmt *st = vw_sql_prepare(
      m, "WITH me AS (SELECT * FROM operations WHERE rank = ?1 AND group_id = ?2 AND p2p AND"
         " seq = ?3) SELECT " OP_COLS OP_FROM "WHERE o.group_id = ?2 AND o.p2p AND"
         " ((o.rank = ?1 AND o.seq = ?3) OR EXISTS (SELECT 1 FROM me WHERE me.pair_seq ="
         " o.pair_seq AND me.root = o.rank AND o.root = me.rank AND me.tag = o.tag AND"
         " (me.op IN ('SEND','SEND_BYTES')) != (o.op IN ('SEND','SEND_BYTES')))) ORDER BY o.rank");
  if (!st)
    return -1;
  sqlite3_bind_int(st, 1, rank);
  sqlite3_bind_int(st, 2, group_id);
  sqlite3_bind_int64(st, 3, seq);
  return read_ops(m, st, ops, cap, n);
}

#define TL_COLS "rank, group_id, seq, op, state, t_enqueued_ns, t_started_ns, t_ended_ns "

/* The timeline needs only these: no call-site join, no text fields. */
static int read_light(vw_model *m, sqlite3_stmt *st, vw_op *ops, int cap, int *n) {
  int rc;
  while ((rc = vw_sql_step(m, st)) == SQLITE_ROW && *n < cap) {
    vw_op *o = &ops[*n];
    o->rank = sqlite3_column_int(st, 0);
    o->group_id = sqlite3_column_int(st, 1);
    o->seq = sqlite3_column_int64(st, 2);
    vw_sql_text(st, 3, o->op, sizeof o->op);
    vw_sql_text(st, 4, o->state, sizeof o->state);
    o->t_enq = vw_sql_i64(st, 5);
    o->t_start = vw_sql_i64(st, 6);
    o->t_end = vw_sql_i64(st, 7);
    /* a long call seen from several columns of a sampled window: once */
    if (*n == 0 || o->seq != ops[*n - 1].seq || o->group_id != ops[*n - 1].group_id)
      (*n)++;
  }
  sqlite3_finalize(st);
  return rc < 0 ? -1 : 0;
}

int vw_model_rank_ops(vw_model *m, int rank, int64_t t0, int64_t t1, int width, vw_op *ops,
                      int cap, int *n) {
  *n = 0;
  /* The few operations enqueued before the window may still overlap it (a
   * hang's blocked call runs to the end of the trace). */
  sqlite3_stmt *st = vw_sql_prepare(
      m, "SELECT * FROM (SELECT " TL_COLS "FROM operations WHERE rank = ?1 AND "
         "t_enqueued_ns < ?2 ORDER BY t_enqueued_ns DESC LIMIT 4) ORDER BY 6");
  if (!st)
    return -1;
  sqlite3_bind_int(st, 1, rank);
  sqlite3_bind_int64(st, 2, t0);
  if (read_light(m, st, ops, cap, n) != 0)
    return -1;
  int keep = 0;
  for (int i = 0; i < *n; i++)
    if (ops[i].t_end < 0 || ops[i].t_end >= t0)
      ops[keep++] = ops[i];
  *n = keep;
  int before = keep, room = cap - keep;
  if (width < 1)
    width = 1;
  st = vw_sql_prepare(m, "SELECT " TL_COLS "FROM operations WHERE rank = ?1 AND "
                         "t_enqueued_ns >= ?2 AND t_enqueued_ns < ?3 ORDER BY t_enqueued_ns "
                         "LIMIT ?4");
  if (!st)
    return -1;
  sqlite3_bind_int(st, 1, rank);
  sqlite3_bind_int64(st, 2, t0);
  sqlite3_bind_int64(st, 3, t1);
  sqlite3_bind_int(st, 4, room < 2 * width ? room : 2 * width);
  if (read_light(m, st, ops, cap, n) != 0)
    return -1;
  if (*n - before < 2 * width || width > room)
    return 0;
  /* Denser than the screen: one seek per column (the first call starting
   * in it) instead of reading every row of the window. */
  *n = before;
  st = vw_sql_prepare(
      m, "WITH RECURSIVE c(k) AS (SELECT 0 UNION ALL SELECT k + 1 FROM c WHERE k + 1 < ?4) "
         "SELECT " TL_COLS "FROM c JOIN operations ON operations.rowid = (SELECT rowid FROM "
         "operations WHERE rank = ?1 AND t_enqueued_ns >= ?2 + k * ?5 AND t_enqueued_ns < ?3 "
         "ORDER BY t_enqueued_ns LIMIT 1) ORDER BY k");
  if (!st)
    return -1;
  sqlite3_bind_int(st, 1, rank);
  sqlite3_bind_int64(st, 2, t0);
  sqlite3_bind_int64(st, 3, t1);
  sqlite3_bind_int(st, 4, width);
  sqlite3_bind_int64(st, 5, (t1 - t0) / width > 0 ? (t1 - t0) / width : 1);
  return read_light(m, st, ops, cap, n);
}

int vw_model_last_op(vw_model *m, int rank, int group_id, bool completed_only, vw_op *op,
                     bool *found) {
  *found = false;
  sqlite3_stmt *st = vw_sql_prepare(
      /* by time: collectives and point-to-point operations number apart */
      m, completed_only ? "SELECT " OP_COLS OP_FROM "WHERE o.group_id = ? AND o.rank = ? AND "
                          "o.state = 'completed' ORDER BY o.t_enqueued_ns DESC LIMIT 1"
                        : "SELECT " OP_COLS OP_FROM "WHERE o.group_id = ? AND o.rank = ? "
                          "ORDER BY o.t_enqueued_ns DESC LIMIT 1");
  if (!st)
    return -1;
  sqlite3_bind_int(st, 1, group_id);
  sqlite3_bind_int(st, 2, rank);
  int n = 0;
  int rc = read_ops(m, st, op, 1, &n);
  *found = n == 1;
  return rc;
}

int vw_model_op(vw_model *m, int rank, int group_id, bool p2p, int64_t seq, vw_op *op,
                bool *found) {
  *found = false;
  sqlite3_stmt *st = vw_sql_prepare(m, "SELECT " OP_COLS OP_FROM "WHERE o.group_id = ? AND "
                                       "o.seq = ? AND o.rank = ? AND o.p2p = ?");
  if (!st)
    return -1;
  sqlite3_bind_int(st, 1, group_id);
  sqlite3_bind_int64(st, 2, seq);
  sqlite3_bind_int(st, 3, rank);
  sqlite3_bind_int(st, 4, p2p);
  int n = 0;
  int rc = read_ops(m, st, op, 1, &n);
  *found = n == 1;
  return rc;
}

int vw_model_blocked_ops(vw_model *m, const int *ranks, int n, vw_op *ops, bool *found) {
  sqlite3_stmt *st = vw_sql_prepare(
      m, "SELECT " OP_COLS "FROM (SELECT * FROM operations WHERE rank = ?1 ORDER BY "
         "t_enqueued_ns DESC LIMIT 64) o LEFT JOIN callsites c ON c.rank = o.rank AND "
         "c.callsite_id = o.callsite_id WHERE o.state IN ('enqueued', 'started', 'timed_out') "
         "ORDER BY o.t_enqueued_ns DESC LIMIT 1");
  if (!st)
    return -1;
  int rc = SQLITE_DONE;
  for (int i = 0; i < n && rc >= 0; i++) {
    sqlite3_reset(st);
    sqlite3_bind_int(st, 1, ranks[i]);
    rc = vw_sql_step(m, st);
    found[i] = rc == SQLITE_ROW;
    if (found[i])
      read_op(st, &ops[i]);
  }
  sqlite3_finalize(st);
  return rc < 0 ? -1 : 0;
}

void vw_op_fingerprint(const vw_op *o, char *buf, size_t len) {
  snprintf(buf, len, "%s %s %s%s%s", o->op, o->dtype[0] ? o->dtype : "-",
           o->shape[0] ? o->shape : "[]", o->redop[0] ? " " : "", o->redop);
}

/* --- events ---------------------------------------------------------------- */

#define EV_FILTER "(?1 < 0 OR rank = ?1) AND (?2 < 0 OR group_id = ?2)"

/* An events row (rowid, rank, group_id, seq, kind, t_ns, status, peer,
 * message, in that order) into e; e->message is malloc'd. */
static void read_event(sqlite3_stmt *st, vw_event *e) {
  e->id = vw_sql_i64(st, 0);
  e->rank = (int)vw_sql_i64(st, 1);
  e->group_id = (int)vw_sql_i64(st, 2);
  e->seq = vw_sql_i64(st, 3);
  vw_sql_text(st, 4, e->kind, sizeof e->kind);
  e->t_ns = vw_sql_i64(st, 5);
  e->status = (int)vw_sql_i64(st, 6);
  e->peer = (int)vw_sql_i64(st, 7);
  const unsigned char *msg = sqlite3_column_text(st, 8);
  e->message = msg ? strdup((const char *)msg) : NULL;
}

int vw_model_events(vw_model *m, const vw_filter *f, int64_t first, vw_event *ev, int cap,
                    int *n, int64_t *total) {
  *n = 0;
  int fr = f ? f->rank : -1, fg = f ? f->group : -1;
  sqlite3_stmt *st = vw_sql_prepare(m, "SELECT count(*) FROM events WHERE " EV_FILTER);
  if (!st)
    return -1;
  sqlite3_bind_int(st, 1, fr);
  sqlite3_bind_int(st, 2, fg);
  *total = vw_sql_step(m, st) == SQLITE_ROW ? sqlite3_column_int64(st, 0) : 0;
  sqlite3_finalize(st);
  st = vw_sql_prepare(m, "SELECT rowid, rank, group_id, seq, kind, t_ns, status, peer, message "
                         "FROM events WHERE " EV_FILTER " ORDER BY t_ns, rowid LIMIT ?3 OFFSET ?4");
  if (!st)
    return -1;
  sqlite3_bind_int(st, 1, fr);
  sqlite3_bind_int(st, 2, fg);
  sqlite3_bind_int(st, 3, cap);
  sqlite3_bind_int64(st, 4, first < 0 ? 0 : first);
  int rc;
  while ((rc = vw_sql_step(m, st)) == SQLITE_ROW && *n < cap)
    read_event(st, &ev[(*n)++]);
  sqlite3_finalize(st);
  return rc < 0 ? -1 : 0;
}

void vw_events_free(vw_event *ev, int n) {
  for (int i = 0; i < n; i++) {
    free(ev[i].message);
    ev[i].message = NULL;
  }
}

int vw_model_event_of(vw_model *m, const char *kind, bool earliest, int skip_status,
                      vw_event *ev, bool *found) {
  *found = false;
  memset(ev, 0, sizeof *ev);
  sqlite3_stmt *st = vw_sql_prepare(
      m, earliest ? "SELECT rowid, rank, group_id, seq, kind, t_ns, status, peer, message FROM "
                    "events WHERE kind = ?1 AND (?2 IS NULL OR status IS NOT ?2) ORDER BY t_ns "
                    "LIMIT 1"
                  : "SELECT rowid, rank, group_id, seq, kind, t_ns, status, peer, message FROM "
                    "events WHERE kind = ?1 AND (?2 IS NULL OR status IS NOT ?2) ORDER BY t_ns "
                    "DESC LIMIT 1");
  if (!st)
    return -1;
  sqlite3_bind_text(st, 1, kind, -1, SQLITE_STATIC);
  if (skip_status >= 0)
    sqlite3_bind_int(st, 2, skip_status);
  int rc = vw_sql_step(m, st);
  if (rc == SQLITE_ROW) {
    *found = true;
    read_event(st, ev);
  }
  sqlite3_finalize(st);
  return rc < 0 ? -1 : 0;
}

/* Whether msg has a line "  rank R (host ..." (a member's line of a
 * monitor's report) that says `said` before it ends. */
static bool rank_line_says(const char *msg, int rank, const char *said) {
  char head[48];
  snprintf(head, sizeof head, "rank %d (host ", rank);
  for (const char *l = msg ? strstr(msg, head) : NULL; l; l = strstr(l + 1, head)) {
    if (l != msg && l[-1] != ' ')
      continue; /* "rank 10" when looking for "rank 0" */
    const char *end = strchr(l, '\n'), *at = strstr(l, said);
    if (at && (!end || at < end))
      return true;
  }
  return false;
}

int vw_model_event_rank_says(vw_model *m, const char *kind, int rank, const char *said,
                             vw_event *ev, bool *found) {
  *found = false;
  memset(ev, 0, sizeof *ev);
  char like[160];
  snprintf(like, sizeof like, "%%rank %d (host %%%s%%", rank, said);
  sqlite3_stmt *st = vw_sql_prepare(
      m, "SELECT rowid, rank, group_id, seq, kind, t_ns, status, peer, message FROM events "
         "WHERE kind = ?1 AND message LIKE ?2 ORDER BY t_ns");
  if (!st)
    return -1;
  sqlite3_bind_text(st, 1, kind, -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 2, like, -1, SQLITE_STATIC);
  int rc;
  while ((rc = vw_sql_step(m, st)) == SQLITE_ROW) {
    if (!rank_line_says((const char *)sqlite3_column_text(st, 8), rank, said))
      continue; /* the pattern spanned two members' lines */
    *found = true;
    read_event(st, ev);
    break;
  }
  sqlite3_finalize(st);
  return rc < 0 ? -1 : 0;
}

int vw_model_failed_like(vw_model *m, int status, const char *pattern, const char *kind,
                         vw_event *ev, bool *found) {
  *found = false;
  memset(ev, 0, sizeof *ev);
  sqlite3_stmt *st = vw_sql_prepare(
      m, "SELECT rank, group_id, seq, t_ended_ns, status, message FROM operations WHERE state = "
         "'failed' AND status = ?1 AND (?2 IS NULL OR message LIKE ?2) AND t_ended_ns IS NOT "
         "NULL ORDER BY t_ended_ns LIMIT 1");
  if (!st)
    return -1;
  sqlite3_bind_int(st, 1, status);
  if (pattern)
    sqlite3_bind_text(st, 2, pattern, -1, SQLITE_STATIC);
  int rc = vw_sql_step(m, st);
  if (rc == SQLITE_ROW) {
    *found = true;
    ev->id = -1;
    ev->rank = (int)vw_sql_i64(st, 0);
    ev->group_id = (int)vw_sql_i64(st, 1);
    ev->seq = vw_sql_i64(st, 2);
    snprintf(ev->kind, sizeof ev->kind, "%s", kind);
    ev->t_ns = vw_sql_i64(st, 3);
    ev->status = (int)vw_sql_i64(st, 4);
    ev->peer = -1;
    const unsigned char *msg = sqlite3_column_text(st, 5);
    ev->message = msg ? strdup((const char *)msg) : NULL;
  }
  sqlite3_finalize(st);
  return rc < 0 ? -1 : 0;
}

/* --- search ------------------------------------------------------------------ */

int vw_model_search_op(vw_model *m, int group_id, int64_t seq, int dir, const char *text,
                       int64_t *found_seq) {
  *found_seq = -1;
  if (text[0] == '#') {
    char *end;
    long long v = strtoll(text + 1, &end, 10);
    if (end != text + 1 && !*end) {
      *found_seq = v;
      return 0;
    }
  }
  char like[160];
  snprintf(like, sizeof like, "%%%s%%", text);
  sqlite3_stmt *st = vw_sql_prepare(
      m, dir >= 0 ? "SELECT seq FROM operations WHERE group_id = ?1 AND p2p = 0 AND seq > ?2 AND "
                    "(op LIKE ?3 OR state LIKE ?3 OR dtype LIKE ?3 OR shape LIKE ?3 OR "
                    "message LIKE ?3) ORDER BY seq LIMIT 1"
                  : "SELECT seq FROM operations WHERE group_id = ?1 AND p2p = 0 AND seq < ?2 AND "
                    "(op LIKE ?3 OR state LIKE ?3 OR dtype LIKE ?3 OR shape LIKE ?3 OR "
                    "message LIKE ?3) ORDER BY seq DESC LIMIT 1");
  if (!st)
    return -1;
  sqlite3_bind_int(st, 1, group_id);
  sqlite3_bind_int64(st, 2, seq);
  sqlite3_bind_text(st, 3, like, -1, SQLITE_TRANSIENT);
  int rc = vw_sql_step(m, st);
  if (rc == SQLITE_ROW)
    *found_seq = sqlite3_column_int64(st, 0);
  sqlite3_finalize(st);
  return rc < 0 ? -1 : 0;
}

int vw_model_search_event(vw_model *m, const vw_filter *f, int64_t from, int dir,
                          const char *text, int64_t *found) {
  *found = -1;
  char like[160];
  snprintf(like, sizeof like, "%%%s%%", text);
  sqlite3_stmt *st = vw_sql_prepare(
      m, dir >= 0
             ? "SELECT n FROM (SELECT row_number() OVER (ORDER BY t_ns, rowid) - 1 AS n, kind, "
               "message FROM events WHERE " EV_FILTER ") WHERE n > ?3 AND (kind LIKE ?4 OR "
               "message LIKE ?4) ORDER BY n LIMIT 1"
             : "SELECT n FROM (SELECT row_number() OVER (ORDER BY t_ns, rowid) - 1 AS n, kind, "
               "message FROM events WHERE " EV_FILTER ") WHERE n < ?3 AND (kind LIKE ?4 OR "
               "message LIKE ?4) ORDER BY n DESC LIMIT 1");
  if (!st)
    return -1;
  sqlite3_bind_int(st, 1, f ? f->rank : -1);
  sqlite3_bind_int(st, 2, f ? f->group : -1);
  sqlite3_bind_int64(st, 3, from);
  sqlite3_bind_text(st, 4, like, -1, SQLITE_TRANSIENT);
  int rc = vw_sql_step(m, st);
  if (rc == SQLITE_ROW)
    *found = sqlite3_column_int64(st, 0);
  sqlite3_finalize(st);
  return rc < 0 ? -1 : 0;
}
