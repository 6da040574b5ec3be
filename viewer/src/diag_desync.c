/* diag_desync.c - the first collective whose fingerprint differs across
 * ranks.
 *
 * SQLite finds the candidates: GROUP BY (group_id, seq) streams through
 * op_by_coll, and HAVING keeps the collectives where a field takes more than
 * one value. The deep scan (diagnose) reads every collective; the quick one
 * (the TUI's first screen) reads only each group's last sequence numbers,
 * where a job that went wrong stopped. The candidate's rows are then
 * grouped by fingerprint in C: the largest agreeing set is taken as the
 * intent, the ranks outside it are the culprits, and the differing fields
 * are named. A field a row lacks (NULL: its first record was lost to a
 * ring overflow or a full disk) is unknown and agrees with any value. */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#ifdef VW_HAVE_READER
#include <dist/status.h>
#include <dist/trace_reader.h>
#endif

#include "diag_int.h"
#include "vw_sql.h"

bool vw_op_is_p2p(const char *op) {
  return !strcmp(op, "SEND") || !strcmp(op, "RECV") || !strcmp(op, "BATCH_P2P") ||
         !strcmp(op, "SEND_BYTES") || !strcmp(op, "RECV_BYTES");
}

/* Not ALL_GATHER nor ALL_TO_ALL_SINGLE: uneven ones are legal with sizes
 * that differ, and a row does not say which it was (the merge's
 * same_shape, tracer/src/summary.c). */
bool vw_op_same_shape(const char *op) {
  static const char *ops[] = {"ALL_REDUCE", "BROADCAST", "REDUCE", "ALL_GATHER_INTO_TENSOR",
                              "REDUCE_SCATTER_TENSOR", "BROADCAST_BYTES"};
  for (size_t i = 0; i < sizeof ops / sizeof *ops; i++)
    if (!strcmp(op, ops[i]))
      return true;
  return false;
}

int vw_fp_diff(const vw_op *a, const vw_op *b, char *buf, size_t len) {
  int n = 0;
  size_t off = 0;
  buf[0] = '\0';
#define FIELD(cond, name)                                                               \
  do {                                                                                  \
    if (cond) {                                                                         \
      off += (size_t)snprintf(buf + off, off < len ? len - off : 0, "%s%s", n ? "," : "", \
                              name);                                                    \
      n++;                                                                              \
    }                                                                                   \
  } while (0)
  /* "" is unknown, not a value: a row whose first record was lost (ring
   * overflow, a full disk) has op and root but no dtype, shape or redop. */
#define KNOWN_DIFF(x, y) ((x)[0] && (y)[0] && strcmp(x, y))
  FIELD(strcmp(a->op, b->op), "op");
  bool same_op = !strcmp(a->op, b->op);
  FIELD(same_op && KNOWN_DIFF(a->dtype, b->dtype), "dtype");
  bool shaped = same_op && vw_op_same_shape(a->op);
  FIELD(shaped && KNOWN_DIFF(a->shape, b->shape), "shape");
  FIELD(shaped && a->shape[0] && !strcmp(a->shape, b->shape) && a->numel_in != b->numel_in,
        "numel");
  FIELD(same_op && a->root != b->root, "root");
  FIELD(same_op && KNOWN_DIFF(a->redop, b->redop), "redop");
#undef KNOWN_DIFF
#undef FIELD
  if (off >= len && len)
    buf[len - 1] = '\0';
  return n;
}

int vw_fp_majority(const vw_op *ops, int n, const bool *suspect) {
  /* Rows in classes of agreeing fingerprints, each class named by its
   * first row: n times the classes, not n squared (a 1,024-rank detail
   * pane is drawn at every key). A row whose fields are unknown joins the
   * first class it agrees with. */
  if (n <= 1)
    return 0;
  int *rep = calloc((size_t)n, sizeof *rep), *size = calloc((size_t)n, sizeof *size),
      *sus = calloc((size_t)n, sizeof *sus), k = 0;
  if (!rep || !size || !sus) {
    free(rep), free(size), free(sus);
    return 0;
  }
  for (int i = 0; i < n; i++) {
    char f[64];
    int c = 0;
    while (c < k && vw_fp_diff(&ops[rep[c]], &ops[i], f, sizeof f) != 0)
      c++;
    if (c == k)
      rep[k++] = i;
    size[c]++;
    sus[c] += suspect && suspect[i];
  }
  /* the largest; ties: against the side with more suspect rows, then for
   * known fields, then the first */
  int best = 0;
  for (int c = 1; c < k; c++) {
    const vw_op *o = &ops[rep[c]], *b = &ops[rep[best]];
    bool known = o->dtype[0] || o->shape[0] || o->redop[0];
    bool best_known = b->dtype[0] || b->shape[0] || b->redop[0];
    if (size[c] > size[best] || (size[c] == size[best] && sus[c] < sus[best]) ||
        (size[c] == size[best] && sus[c] == sus[best] && known && !best_known))
      best = c;
  }
  int row = rep[best];
  free(rep), free(size), free(sus);
  return row;
}

static bool same_site(const vw_site_story *a, const vw_site_story *b) {
  return a->offset == b->offset && !strcmp(a->module, b->module);
}

/* Which rows look like the side that strayed, to break a tie as the
 * checking layer does (wrapper_pg/src/exchange.c, suspect()): a call that
 * differs from its rank's last call from the same site (the argument a
 * planted bug changed), a call site no rank used in the group's recent
 * collectives (the branch a planted bug took), or the site of the rank's
 * own previous collective there again while another row called from
 * elsewhere (it skipped the call between). A malloc'd array, NULL when no
 * row's story could be read. */
static bool *suspect_rows(vw_model *m, const vw_op *ops, int n) {
  bool *sus = calloc((size_t)n + 1, sizeof *sus);
  vw_site_story *st = calloc((size_t)n + 1, sizeof *st);
  bool any = false, failed = !sus || !st;
  for (int i = 0; !failed && i < n; i++) {
    vw_op prev;
    bool found;
    char f[64];
    failed = vw_model_prev_at_site(m, &ops[i], &prev, &found) != 0 ||
             vw_model_site_story(m, &ops[i], &st[i]) != 0;
    sus[i] = !failed && ((found && !strcmp(prev.op, ops[i].op) &&
                          vw_fp_diff(&prev, &ops[i], f, sizeof f)) ||
                         (st[i].known && !st[i].seen));
    any |= found || st[i].known;
  }
  for (int i = 0; !failed && i < n; i++)
    for (int j = 0; j < n && st[i].repeats && !sus[i]; j++)
      sus[i] = j != i && st[j].known && !same_site(&st[i], &st[j]);
  free(st);
  if (failed || !any) {
    free(sus);
    return NULL;
  }
  return sus;
}

#define SHAPED_OPS                                                                    \
  "('ALL_REDUCE','BROADCAST','REDUCE','ALL_GATHER_INTO_TENSOR',"                      \
  "'REDUCE_SCATTER_TENSOR','BROADCAST_BYTES')"
/* Collectives of the rows WHERE (a filter) selects whose fingerprint fields
 * take more than one value, the earliest first. */
#define CANDIDATES(WHERE)                                                               \
  "SELECT group_id, seq FROM operations WHERE op NOT IN ('SEND','RECV','BATCH_P2P',"    \
  "'SEND_BYTES','RECV_BYTES') " WHERE " GROUP BY group_id, seq HAVING "                 \
  "count(DISTINCT op) > 1 OR count(DISTINCT dtype) > 1 OR "                             \
  "count(DISTINCT coalesce(root, -1)) > 1 OR count(DISTINCT redop) > 1 OR "               \
  "count(DISTINCT CASE WHEN op IN " SHAPED_OPS " THEN shape || '/' || "                 \
  "numel_in END) > 1 ORDER BY min(t_enqueued_ns), group_id, seq LIMIT 1"
#define WITH_TIME(Q)                                                                    \
  "SELECT group_id, seq, (SELECT min(t_enqueued_ns) FROM operations o WHERE "           \
  "o.group_id = c.group_id AND o.seq = c.seq) FROM (" Q ") c"

#define EVERY WITH_TIME(CANDIDATES(""))
/* An equality on group_id, so that op_by_coll bounds the seq range too. */
#define TAIL WITH_TIME(CANDIDATES("AND group_id = ?1 AND seq BETWEEN ?2 AND ?3"))

/* st: EVERY (the deep scan), or TAIL over group's seqs lo..hi (one
 * statement for every group: a 1,024-rank job has hundreds). */
static int candidate(vw_model *m, sqlite3_stmt *st, int group, int64_t lo, int64_t hi, int *g,
                     int64_t *s, int64_t *t) {
  sqlite3_reset(st);
  if (group >= 0) {
    sqlite3_bind_int(st, 1, group);
    sqlite3_bind_int64(st, 2, lo);
    sqlite3_bind_int64(st, 3, hi);
  }
  int rc = vw_sql_step(m, st);
  if (rc == SQLITE_ROW) {
    *g = sqlite3_column_int(st, 0);
    *s = sqlite3_column_int64(st, 1);
    *t = sqlite3_column_int64(st, 2);
  }
  return rc < 0 ? -1 : rc == SQLITE_ROW;
}

/* The deep scan's answer from the merge's summary (coll_mismatch holds
 * every candidate with its earliest enqueue): a few rows, not every one. */
static int summarised(vw_model *m, int *g, int64_t *s) {
  sqlite3_stmt *st = vw_sql_prepare(m, "SELECT group_id, seq FROM coll_mismatch ORDER BY "
                                       "t_first_ns, group_id, seq LIMIT 1");
  if (!st)
    return -1;
  int rc = vw_sql_step(m, st);
  if (rc == SQLITE_ROW) {
    *g = sqlite3_column_int(st, 0);
    *s = sqlite3_column_int64(st, 1);
  }
  sqlite3_finalize(st);
  return rc < 0 ? -1 : rc == SQLITE_ROW;
}

/* The earliest candidate: over everything (deep) or each group's tail. */
static int find(vw_model *m, bool deep, int *g, int64_t *s) {
  if (deep && m->summarised)
    return summarised(m, g, s);
  sqlite3_stmt *st = vw_sql_prepare(m, deep ? EVERY : TAIL);
  if (!st)
    return -1;
  int found = deep ? candidate(m, st, -1, 0, 0, g, s, &(int64_t){0}) : 0;
  int64_t best_t = INT64_MAX;
  for (int i = 0; !deep && found >= 0 && i < m->job.ngroups; i++) {
    const vw_group *gr = &m->job.groups[i];
    int64_t lo = gr->max_seq;
    for (int k = 0; k < gr->size; k++)
      if (gr->last_seq[k] < lo)
        lo = gr->last_seq[k];
    lo = lo > 2 ? lo - 2 : 1;
    if (gr->max_seq - lo > 64)
      lo = gr->max_seq - 64;
    int cg;
    int64_t cs, ct;
    int rc = candidate(m, st, gr->id, lo, gr->max_seq, &cg, &cs, &ct);
    if (rc < 0)
      found = -1;
    else if (rc && ct < best_t) {
      best_t = ct;
      *g = cg;
      *s = cs;
      found = 1;
    }
  }
  sqlite3_finalize(st);
  return found;
}

static const char *root_text(const vw_op *o, char *buf, size_t len) {
  if (o->root >= 0)
    snprintf(buf, len, " root=%d", o->root);
  else
    buf[0] = '\0';
  return buf;
}

/* A pair that disagrees (two rows, a tie): the row whose call is the one
 * every rank of the other groups of the same kind made there (the other
 * "tp" pairs of a mesh), as distrun's verdict decides it
 * (dist_trace_odd_member); NULL when that cannot tell. */
static const vw_op *pair_usual(vw_model *m, const vw_op *ops, int n, const vw_diag *d) {
  if (n != 2)
    return NULL;
  const vw_op *usual = NULL;
#ifdef VW_HAVE_READER
  dist_trace *t = m->trace;
  if (!t && dist_trace_open(m->path, &t, NULL, 0) != DIST_OK)
    return NULL;
  dist_trace_odd odd;
  if (dist_trace_odd_member(t, d->group_id, d->seq, ops[0].rank, ops[1].rank, &odd) == DIST_OK &&
      odd.rank >= 0)
    usual = &ops[odd.rank == ops[0].rank ? 1 : 0];
  if (t != m->trace)
    dist_trace_close(t);
#else
  (void)m, (void)ops, (void)d;
#endif
  return usual;
}

/* Groups the rows by fingerprint; the largest set (ties: the call the
 * other groups of the kind made, else the side with fewer suspect rows,
 * else the one holding the lowest rank) is the majority. Fills culprits
 * and the field list. */
static void explain(vw_model *m, vw_op *ops, int n, vw_diag *d) {
  const vw_op *maj = &ops[vw_fp_majority(ops, n, NULL)];
  int agree = 0;
  char f0[64];
  for (int i = 0; i < n; i++)
    agree += vw_fp_diff(maj, &ops[i], f0, sizeof f0) == 0;
  const vw_op *usual = 2 * agree <= n ? pair_usual(m, ops, n, d) : NULL;
  bool *suspect = 2 * agree <= n && !usual ? suspect_rows(m, ops, n) : NULL; /* a tie */
  if (usual)
    maj = usual;
  else if (suspect)
    maj = &ops[vw_fp_majority(ops, n, suspect)];
  free(suspect);
  int majr[VW_DIAG_LIST], nmaj = 0;
  size_t off = 0;
  char fields[64] = "";
  for (int i = 0; i < n; i++) {
    char f[64];
    if (vw_fp_diff(maj, &ops[i], f, sizeof f) == 0) {
      if (nmaj < VW_DIAG_LIST)
        majr[nmaj++] = ops[i].rank;
      continue;
    }
    if (d->n_culprits < VW_DIAG_LIST)
      d->culprits[d->n_culprits++] = ops[i].rank;
    if (!fields[0])
      snprintf(fields, sizeof fields, "%s", f);
  }
  snprintf(d->field, sizeof d->field, "%s", fields);
  d->rank = d->n_culprits ? d->culprits[0] : -1;
  snprintf(d->op, sizeof d->op, "%s", maj->op);
  char cr[128], mr[128], fp[128], gl[96];
  vw_fmt_ranks(d->culprits, d->n_culprits, cr, sizeof cr);
  vw_fmt_ranks(majr, nmaj, mr, sizeof mr);
  snprintf(d->summary, sizeof d->summary,
           "desync in %s at #%lld %s: rank%s %s differ%s in %s",
           vw_group_label(m, d->group_id, gl, sizeof gl), (long long)d->seq, maj->op, d->n_culprits > 1 ? "s" : "", cr,
           d->n_culprits > 1 ? "" : "s", fields);
  off = (size_t)snprintf(d->text, sizeof d->text, "%s\n", d->summary);
  /* the culprits first: a short header shows them before the majority */
  for (int i = 0; i < n && off < sizeof d->text; i++) {
    char f[64];
    if (vw_fp_diff(maj, &ops[i], f, sizeof f) == 0)
      continue;
    vw_op_fingerprint(&ops[i], fp, sizeof fp);
    off += (size_t)snprintf(d->text + off, sizeof d->text - off,
                            "  rank %d: %s%s  <- differs in %s\n", ops[i].rank, fp,
                            root_text(&ops[i], (char[24]){0}, 24), f);
  }
  vw_op_fingerprint(maj, fp, sizeof fp);
  if (off < sizeof d->text)
    snprintf(d->text + off, sizeof d->text - off, "  rank%s %s: %s%s\n", nmaj > 1 ? "s" : "",
             mr, fp, root_text(maj, (char[24]){0}, 24));
}

int vw_diag_desync(vw_model *m, bool deep, vw_diag *d) {
  int g;
  int64_t s;
  int rc = find(m, deep, &g, &s);
  if (rc <= 0)
    return rc;
  vw_op *ops = calloc(VW_MAX_RANKS, sizeof *ops);
  int n = 0;
  if (!ops || vw_model_collective(m, g, s, ops, VW_MAX_RANKS, &n) != 0) {
    free(ops);
    return -1;
  }
  d->kind = VW_DIAG_DESYNC;
  d->group_id = g;
  d->seq = s;
  explain(m, ops, n, d);
  if (d->n_culprits == 0) { /* only unknown fields differed (a file merged before they were) */
    d->kind = VW_DIAG_NONE;
    d->group_id = d->rank = -1;
    d->seq = 0;
    d->op[0] = d->field[0] = d->summary[0] = d->text[0] = '\0';
    free(ops);
    return 0;
  }
  for (int i = 0; i < n; i++)   // when it happened: a crash after it does not explain it
    if (d->t_ns < 0 || ops[i].t_enq < d->t_ns)
      d->t_ns = ops[i].t_enq;
  for (int i = 0; i < n && d->n_blocked < VW_DIAG_LIST; i++)
    if (vw_state_code(ops[i].state) == VW_ST_RUN || vw_state_code(ops[i].state) == VW_ST_TIMEOUT)
      d->blocked[d->n_blocked++] = ops[i].rank;
  free(ops);
  return 0;
}
