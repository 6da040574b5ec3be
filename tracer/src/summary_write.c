/* summary_write.c - the summary tables of a merged file (SCHEMA.md,
 * "Summaries"), from what summary.c's passes gathered: every collective
 * whose fingerprint differs, the figures `distview stats` prints, so
 * that it reads one row per group and op and one per rank, and the totals
 * per op `distview summary` prints (op_totals). The figures
 * are computed as the viewer computes them from its histogram (hist.c,
 * vw_hist_quantile: the mean of the bucket holding the q-th value, at
 * most the greatest value), so both paths print the same numbers; the
 * viewer's tests compare them on traces with and without the tables. */
#include "reader_int.h"

#include <stdlib.h>

#include "summary_map.h"

static const char tables_sql[] =
    "DROP TABLE IF EXISTS coll_mismatch; DROP TABLE IF EXISTS stat_latency;"
    "DROP TABLE IF EXISTS stat_ranks; DROP INDEX IF EXISTS op_failed;"
    "CREATE INDEX op_failed ON operations(t_enqueued_ns, rank, group_id, seq)"
    " WHERE state = 'failed';"
    "CREATE TABLE coll_mismatch (group_id INTEGER NOT NULL, seq INTEGER NOT NULL,"
    " t_first_ns INTEGER NOT NULL);"
    "CREATE TABLE stat_latency (ord INTEGER PRIMARY KEY, group_id INTEGER NOT NULL,"
    " op TEXT NOT NULL, n INTEGER NOT NULL, p50_ns INTEGER NOT NULL, p90_ns INTEGER NOT NULL,"
    " p99_ns INTEGER NOT NULL, max_ns INTEGER NOT NULL);"
    "CREATE TABLE stat_ranks (rank INTEGER PRIMARY KEY, collectives INTEGER NOT NULL,"
    " sum_ns INTEGER NOT NULL, p50_ns INTEGER NOT NULL, p90_ns INTEGER NOT NULL,"
    " p99_ns INTEGER NOT NULL, max_ns INTEGER NOT NULL, last_arrivals INTEGER NOT NULL);";

static int step(sqlite3_stmt *st) {
  int rc = sqlite3_step(st) == SQLITE_DONE ? 0 : -1;
  sqlite3_reset(st);
  return rc;
}

static int write_mismatch(sqlite3 *db, const summary *s) {
  sqlite3_stmt *st;
  if (sqlite3_prepare_v2(db, "INSERT INTO coll_mismatch VALUES (?, ?, ?)", -1, &st, NULL))
    return -1;
  int rc = 0;
  for (size_t i = 0; i < s->colls.cap && rc == 0; i++) {
    const sm_coll *c = &s->colls.slot[i];
    if (!c->used || !c->differs)
      continue;
    sqlite3_bind_int(st, 1, c->group);
    sqlite3_bind_int64(st, 2, c->seq);
    sqlite3_bind_int64(st, 3, c->t_first);
    rc = step(st);
  }
  sqlite3_finalize(st);
  return rc;
}

static int cmp_key(const void *a, const void *b) {
  const int64_t *x = ((const sm_bucket *)a)->k, *y = ((const sm_bucket *)b)->k;
  for (int i = 0; i < 3; i++)
    if (x[i] != y[i])
      return x[i] < y[i] ? -1 : 1;
  return 0;
}

/* What `distview stats` prints of one histogram. */
typedef struct figs {
  int64_t n, max, total, q[3];   /* q: p50, p90, p99 */
} figs;

static int64_t quantile(const sm_bucket *b, size_t nb, const figs *f, double q) {
  int64_t want = (int64_t)(q * (double)f->n + 0.999999), seen = 0;
  if (want < 1)
    want = 1;
  for (size_t i = 0; i < nb; i++) {
    seen += b[i].n;
    if (seen >= want) {
      int64_t v = (int64_t)(b[i].sum / (double)b[i].n + 0.5);
      return v > f->max ? f->max : v;
    }
  }
  return f->max;
}

static void figures(const sm_bucket *b, size_t nb, figs *f) {
  f->n = f->max = f->total = 0;
  for (size_t i = 0; i < nb; i++) {
    f->n += b[i].n;
    f->total += b[i].total;
    f->max = b[i].max > f->max ? b[i].max : f->max;
  }
  f->q[0] = quantile(b, nb, f, .5);
  f->q[1] = quantile(b, nb, f, .9);
  f->q[2] = quantile(b, nb, f, .99);
}

/* The run of entries from i with the same first `width` keys. */
static size_t run(const sm_buckets *t, size_t i, int width) {
  size_t j = i + 1;
  while (j < t->n && t->b[j].k[0] == t->b[i].k[0] && (width < 2 || t->b[j].k[1] == t->b[i].k[1]))
    j++;
  return j - i;
}

static void bind_figs(sqlite3_stmt *st, int col, const figs *f) {
  for (int i = 0; i < 3; i++)
    sqlite3_bind_int64(st, col + i, f->q[i]);
  sqlite3_bind_int64(st, col + 3, f->max);
}

/* (group, op) in the viewer's order: by group, then its first completed
 * row's (p2p, seq, rank), which first's entries hold as (aux, min, max). */
static int cmp_first(const void *a, const void *b) {
  const sm_bucket *x = a, *y = b;
  int64_t kx[4] = {x->k[0], x->aux, x->min, x->max}, ky[4] = {y->k[0], y->aux, y->min, y->max};
  for (int i = 0; i < 4; i++)
    if (kx[i] != ky[i])
      return kx[i] < ky[i] ? -1 : 1;
  return 0;
}

/* One row per (group, op), numbered in the viewer's order. The k-th run
 * of latency buckets in (group, op) order is first's k-th entry in that
 * order: each (group, op) has both or neither. */
/* qsort, which must not be handed the NULL array of an empty vector. */
static void sort(void *b, size_t n, size_t size, int (*cmp)(const void *, const void *)) {
  if (n > 1)
    qsort(b, n, size, cmp);
}

static int write_latency(sqlite3 *db, summary *s) {
  sqlite3_stmt *st;
  if (sqlite3_prepare_v2(db, "INSERT INTO stat_latency VALUES (?, ?, ?, ?, ?, ?, ?, ?)", -1,
                         &st, NULL))
    return -1;
  sort(s->first.b, s->first.n, sizeof *s->first.b, cmp_first);
  for (size_t o = 0; o < s->first.n; o++)
    s->first.b[o].total = (int64_t)o;   // its place in the list
  sort(s->first.b, s->first.n, sizeof *s->first.b, cmp_key);
  sort(s->lat.b, s->lat.n, sizeof *s->lat.b, cmp_key);     // by (group, op, bucket)
  int rc = 0;
  for (size_t i = 0, o = 0; i < s->lat.n && o < s->first.n && rc == 0; o++) {
    const sm_bucket *f = &s->first.b[o];
    size_t n = run(&s->lat, i, 2);
    figs g;
    figures(&s->lat.b[i], n, &g);
    sqlite3_bind_int64(st, 1, f->total);
    sqlite3_bind_int64(st, 2, f->k[0]);
    sqlite3_bind_text(st, 3, s->str.s[f->k[1]], -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 4, g.n);
    bind_figs(st, 5, &g);
    rc = step(st);
    i += n;
  }
  sqlite3_finalize(st);
  return rc;
}

static int write_ranks(sqlite3 *db, summary *s) {
  sqlite3_stmt *st;
  if (sqlite3_prepare_v2(db, "INSERT INTO stat_ranks VALUES (?, ?, ?, ?, ?, ?, ?, ?)", -1, &st,
                         NULL))
    return -1;
  sort(s->skew.b, s->skew.n, sizeof *s->skew.b, cmp_key);   // by (rank, bucket)
  int rc = 0;
  for (size_t i = 0; i < s->skew.n && rc == 0;) {
    size_t n = run(&s->skew, i, 1);
    figs g;
    figures(&s->skew.b[i], n, &g);
    int64_t rank = s->skew.b[i].k[0];
    sm_bucket *r = sm_bucket_get(&s->ranks, rank, 0, 0);   // present: pass 2 made both
    sqlite3_bind_int64(st, 1, rank);
    sqlite3_bind_int64(st, 2, g.n);
    sqlite3_bind_int64(st, 3, g.total);
    bind_figs(st, 4, &g);
    sqlite3_bind_int64(st, 8, r ? r->aux : 0);
    rc = step(st);
    i += n;
  }
  sqlite3_finalize(st);
  return rc;
}

/* op_totals, as OP_TOTALS_SELECT (schema.c) would write it. */
static int write_totals(sqlite3 *db, const summary *s) {
  sqlite3_stmt *st;
  if (tr_exec(db, "DROP TABLE IF EXISTS op_totals; CREATE TABLE op_totals (op TEXT, n INT,"
              " completed INT, failed INT, timed_out INT, in_flight INT, bytes_in INT);",
              NULL, 0) != 0 ||
      sqlite3_prepare_v2(db, "INSERT INTO op_totals VALUES (?, ?, ?, ?, ?, ?, ?)", -1, &st,
                         NULL) != SQLITE_OK)
    return -1;
  int rc = 0;
  for (int i = 0; i < s->n_totals && rc == 0; i++) {
    const sm_total *t = &s->totals[i];
    int64_t v[6] = {t->n, t->completed, t->failed, t->timed_out, t->in_flight, t->bytes_in};
    sqlite3_bind_text(st, 1, s->str.s[t->op], -1, SQLITE_STATIC);
    for (int k = 0; k < 6; k++)
      sqlite3_bind_int64(st, 2 + k, v[k]);
    rc = step(st);
  }
  sqlite3_finalize(st);
  return rc;
}

int tr_summary_write(sqlite3 *db, summary *s) {
  if (tr_exec(db, tables_sql, NULL, 0) != 0 || write_mismatch(db, s) != 0 ||
      write_totals(db, s) != 0)
    return -1;
  return write_latency(db, s) == 0 && write_ranks(db, s) == 0 ? 0 : -1;
}
