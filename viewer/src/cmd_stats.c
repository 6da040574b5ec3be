/* cmd_stats.c - `distview stats [--json] TRACE`: latency percentiles per
 * group and op (completed operations, start to end), and per-rank arrival
 * skew: for every collective seen on two or more ranks, how long after the
 * earliest rank each rank started, and how often it was the last to arrive
 * (the straggler). A merged file carries these histograms (the merge's
 * summaries, SCHEMA.md "Summaries"): a few rows per group, op and rank.
 * Without them, one pass over the operations in (group, seq, rank) order
 * (op_by_coll), with histograms instead of sorted arrays, so memory does
 * not grow with the trace; both give the same figures. */
#include <stdlib.h>
#include <string.h>

#include "diag_int.h"
#include "vw_sql.h"

static const char usage[] =
    "usage: distview stats [--json] TRACE\n"
    "Latency percentiles per group and op, and per-rank arrival skew.\n";

/* What is printed of a histogram: count, p50, p90, p99, max. */
typedef struct figs {
  int64_t n, q[3], max;
} figs;

typedef struct op_stat {
  int group;
  char op[28];
  vw_hist h;     /* the scan's; empty when read from the summaries */
  figs f;
} op_stat;

typedef struct rank_stat {
  int rank;
  int64_t last, sum;
  vw_hist h;
  figs f;
} rank_stat;

typedef struct stats {
  op_stat *ops;
  int nops;
  rank_stat *ranks;
  int nranks;
} stats;

/* A new entry at the end, with a histogram when hist. */
static op_stat *op_add(stats *s, int group, const char *op, bool hist) {
  op_stat *n = realloc(s->ops, (size_t)(s->nops + 1) * sizeof *n);
  if (!n)
    return NULL;
  s->ops = n;
  op_stat *o = &s->ops[s->nops];
  memset(o, 0, sizeof *o);
  o->group = group;
  snprintf(o->op, sizeof o->op, "%s", op);
  if (hist && vw_hist_init(&o->h) != 0)
    return NULL;
  s->nops++;
  return o;
}

static op_stat *op_slot(stats *s, int group, const char *op) {
  for (int i = 0; i < s->nops; i++)
    if (s->ops[i].group == group && !strcmp(s->ops[i].op, op))
      return &s->ops[i];
  return op_add(s, group, op, true);
}

static rank_stat *rank_add(stats *s, int rank, bool hist) {
  rank_stat *n = realloc(s->ranks, (size_t)(s->nranks + 1) * sizeof *n);
  if (!n)
    return NULL;
  s->ranks = n;
  rank_stat *r = &s->ranks[s->nranks];
  memset(r, 0, sizeof *r);
  r->rank = rank;
  if (hist && vw_hist_init(&r->h) != 0)
    return NULL;
  s->nranks++;
  return r;
}

static rank_stat *rank_slot(stats *s, int rank) {
  for (int i = 0; i < s->nranks; i++)
    if (s->ranks[i].rank == rank)
      return &s->ranks[i];
  return rank_add(s, rank, true);
}

typedef struct arrival {
  int rank;
  int64_t start;
} arrival;

/* One collective's arrivals: each rank's lateness behind the first. */
static void skew(stats *s, const arrival *a, int n) {
  if (n < 2)
    return;
  int64_t lo = a[0].start, hi = a[0].start;
  int last = a[0].rank;
  for (int i = 1; i < n; i++) {
    if (a[i].start < lo)
      lo = a[i].start;
    if (a[i].start > hi)
      hi = a[i].start, last = a[i].rank;
  }
  for (int i = 0; i < n; i++) {
    rank_stat *r = rank_slot(s, a[i].rank);
    if (!r)
      return;
    vw_hist_add(&r->h, a[i].start - lo);
    r->sum += a[i].start - lo;
    r->last += a[i].rank == last && hi > lo;
  }
}

static int scan(vw_model *m, stats *s) {
  sqlite3_stmt *st = vw_sql_prepare(
      m, "SELECT group_id, seq, rank, op, state, t_started_ns, t_ended_ns FROM operations "
         "ORDER BY group_id, p2p, seq, rank");   // rank: a tie's last arrival is the lowest
  if (!st)
    return -1;
  arrival *a = malloc(VW_MAX_RANKS * sizeof *a);
  int na = 0, rc, g_cur = -1;
  int64_t s_cur = -1;
  while (a && (rc = vw_sql_step(m, st)) == SQLITE_ROW) {
    int g = sqlite3_column_int(st, 0);
    int64_t seq = sqlite3_column_int64(st, 1);
    char op[28], state[16];
    vw_sql_text(st, 3, op, sizeof op);
    vw_sql_text(st, 4, state, sizeof state);
    int64_t t0 = vw_sql_i64(st, 5), t1 = vw_sql_i64(st, 6);
    if (g != g_cur || seq != s_cur) {
      skew(s, a, na);
      na = 0;
      g_cur = g;
      s_cur = seq;
    }
    if (!strcmp(state, "completed") && t0 >= 0 && t1 >= t0) {
      op_stat *o = op_slot(s, g, op);
      if (o)
        vw_hist_add(&o->h, t1 - t0);
    }
    if (t0 >= 0 && !vw_op_is_p2p(op) && na < VW_MAX_RANKS)
      a[na++] = (arrival){sqlite3_column_int(st, 2), t0};
  }
  if (a)
    skew(s, a, na);
  free(a);
  sqlite3_finalize(st);
  return !a || rc < 0 ? -1 : 0;
}

static void figs_of(const vw_hist *h, figs *f) {
  f->n = h->n;
  f->q[0] = vw_hist_quantile(h, .5);
  f->q[1] = vw_hist_quantile(h, .9);
  f->q[2] = vw_hist_quantile(h, .99);
  f->max = h->max;
}

static void figs_read(sqlite3_stmt *st, int col, figs *f) {
  f->n = vw_sql_i64(st, col);
  for (int i = 0; i < 3; i++)
    f->q[i] = vw_sql_i64(st, col + 1 + i);
  f->max = vw_sql_i64(st, col + 4);
}

/* The merge's figures (SCHEMA.md "Summaries"), computed as figs_of
 * computes them from the scan's histograms: one row per group and op, in
 * the order the scan meets them, and one per rank. */
static int read_ops(vw_model *m, stats *s) {
  sqlite3_stmt *st = vw_sql_prepare(m, "SELECT group_id, op, n, p50_ns, p90_ns, p99_ns, max_ns "
                                       "FROM stat_latency ORDER BY ord");
  int rc = st ? SQLITE_DONE : -1;
  while (st && (rc = vw_sql_step(m, st)) == SQLITE_ROW) {
    char op[28];
    vw_sql_text(st, 1, op, sizeof op);
    op_stat *o = op_add(s, sqlite3_column_int(st, 0), op, false);
    if (!o)
      break;
    figs_read(st, 2, &o->f);
  }
  sqlite3_finalize(st);
  return rc == SQLITE_DONE ? 0 : -1;
}

static int read_ranks(vw_model *m, stats *s) {
  sqlite3_stmt *st = vw_sql_prepare(m, "SELECT rank, sum_ns, last_arrivals, collectives, p50_ns, "
                                       "p90_ns, p99_ns, max_ns FROM stat_ranks ORDER BY rank");
  int rc = st ? SQLITE_DONE : -1;
  while (st && (rc = vw_sql_step(m, st)) == SQLITE_ROW) {
    rank_stat *r = rank_add(s, sqlite3_column_int(st, 0), false);
    if (!r)
      break;
    r->sum = vw_sql_i64(st, 1);
    r->last = vw_sql_i64(st, 2);
    figs_read(st, 3, &r->f);
  }
  sqlite3_finalize(st);
  return rc == SQLITE_DONE ? 0 : -1;
}

static int load(vw_model *m, stats *s) {
  if (m->summarised)
    return read_ops(m, s) == 0 && read_ranks(m, s) == 0 ? 0 : -1;
  if (scan(m, s) != 0)
    return -1;
  for (int i = 0; i < s->nops; i++)
    figs_of(&s->ops[i].h, &s->ops[i].f);
  for (int i = 0; i < s->nranks; i++)
    figs_of(&s->ranks[i].h, &s->ranks[i].f);
  return 0;
}

static void print(const stats *s, bool json, FILE *f) {
  char b[5][32];
  fputs(json ? "{\"ops\":[" : "latency per operation (completed, start to end):\n"
                              "  group op                         count        p50        p90"
                              "        p99        max\n", f);
  for (int i = 0; i < s->nops; i++) {
    const op_stat *o = &s->ops[i];
    const int64_t *q = o->f.q;
    if (json) {
      fprintf(f, "%s{\"group\":%d,\"op\":", i ? "," : "", o->group);
      vw_json_str(f, o->op);
      fprintf(f, ",\"count\":%lld,\"p50_ns\":%lld,\"p90_ns\":%lld,\"p99_ns\":%lld,\"max_ns\":%lld}",
              (long long)o->f.n, (long long)q[0], (long long)q[1], (long long)q[2],
              (long long)o->f.max);
    } else {
      fprintf(f, "  %-5d %-24s %8lld %10s %10s %10s %10s\n", o->group, o->op, (long long)o->f.n,
              vw_fmt_dur(q[0], b[0], 32), vw_fmt_dur(q[1], b[1], 32), vw_fmt_dur(q[2], b[2], 32),
              vw_fmt_dur(o->f.max, b[3], 32));
    }
  }
  fputs(json ? "],\"ranks\":[" : "\narrival skew per rank (start after the earliest rank, per "
                                 "collective):\n  rank  collectives       mean        p50        "
                                 "p99        max  last to arrive\n", f);
  for (int i = 0; i < s->nranks; i++) {
    const rank_stat *r = &s->ranks[i];
    int64_t mean = r->f.n ? r->sum / r->f.n : 0;
    int64_t p50 = r->f.q[0], p99 = r->f.q[2];
    if (json)
      fprintf(f, "%s{\"rank\":%d,\"collectives\":%lld,\"mean_ns\":%lld,\"p50_ns\":%lld,"
              "\"p99_ns\":%lld,\"max_ns\":%lld,\"last_arrivals\":%lld}", i ? "," : "", r->rank,
              (long long)r->f.n, (long long)mean, (long long)p50, (long long)p99,
              (long long)r->f.max, (long long)r->last);
    else
      fprintf(f, "  %-5d %11lld %10s %10s %10s %10s  %lld\n", r->rank, (long long)r->f.n,
              vw_fmt_dur(mean, b[0], 32), vw_fmt_dur(p50, b[1], 32), vw_fmt_dur(p99, b[2], 32),
              vw_fmt_dur(r->f.max, b[3], 32), (long long)r->last);
  }
  fputs(json ? "]}\n" : "", f);
}

static int cmp_rank(const void *a, const void *b) {
  return ((const rank_stat *)a)->rank - ((const rank_stat *)b)->rank;
}

int vw_cmd_stats(int argc, char **argv) {
  bool json;
  int rc = 0;
  int i = vw_parse_common(argc, argv, usage, &json, 0, &rc);
  if (i < 0)
    return rc;
  vw_model *m;
  if ((rc = vw_open_or_report("distview stats", argv[i], &m)) != 0)
    return rc;
  stats s = {0};
  if (load(m, &s) != 0) {
    fprintf(stderr, "distview stats: %s\n", m->err[0] ? m->err : "out of memory");
    rc = VW_EXIT_UNREADABLE;
  } else {
    if (s.nranks) // a trace without collectives has none (and qsort no NULL)
      qsort(s.ranks, (size_t)s.nranks, sizeof *s.ranks, cmp_rank);
    print(&s, json, stdout);
  }
  for (int k = 0; k < s.nops; k++)
    vw_hist_free(&s.ops[k].h);
  for (int k = 0; k < s.nranks; k++)
    vw_hist_free(&s.ranks[k].h);
  free(s.ops);
  free(s.ranks);
  vw_model_close(m);
  return rc;
}
