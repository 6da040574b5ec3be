/* summary.c - what the merge precomputes so that `distview diagnose` and
 * `distview stats` read a few rows instead of every operation (SCHEMA.md,
 * "Summaries"): the collectives whose fingerprints differ (coll_mismatch),
 * latency histograms per group and op (stat_latency), arrival lateness per
 * rank (stat_ranks), and an index of the failed operations.
 *
 * DESIGN. Both passes read operations in storage order. Reading it in
 * collective order (op_by_coll, what the viewer's scans do) costs a b-tree
 * descent per row: about 13 s of CPU for 10 M rows here, against about
 * 2 s for a pass in storage order. So the per-collective state lives in a
 * hash table (summary_map.c; memory grows with the collectives, not the
 * rows: up to 180 bytes each, about 270 MiB peak for gen_trace's 10 M rows of
 * 764,000 collectives):
 *   pass 1: per collective (group, seq) of the rows that are not
 *     point-to-point: whether the fingerprint (op, dtype, root, redop, and
 *     shape with element count for the ops whose shapes must agree) takes
 *     more than one value (a NULL field, lost with the row's first record,
 *     agrees with any), the earliest enqueue, the earliest and latest
 *     start and the lowest rank at the latest; per (group, op) the
 *     completed operations' durations, bucketed;
 *   pass 2: per rank, how long after its collective's earliest start each
 *     row started (collectives with two or more starts), bucketed.
 * The buckets are the viewer's histogram's (viewer/src/hist.c, bucket():
 * change both together): values under 128 ns alone, then 64 per power of
 * two; summary_write.c turns them into the figures `distview stats`
 * prints, as the viewer would. */
#include "reader_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "summary_map.h"

static int bucket(int64_t v) {
  if (v < 128)
    return (int)v;
  int e = 63 - __builtin_clzll((unsigned long long)v);
  return 128 + (e - 7) * 64 + (int)((v >> (e - 6)) & 63);
}

static int add_value(sm_bucket *b, int64_t v) {
  if (!b)
    return -1;
  b->n++;
  b->total += v;
  b->sum += (double)v;
  b->min = v < b->min ? v : b->min;
  b->max = v > b->max ? v : b->max;
  return 0;
}

static bool is_p2p(const char *op) {
  return !strcmp(op, "SEND") || !strcmp(op, "RECV") || !strcmp(op, "SEND_BYTES") ||
         !strcmp(op, "RECV_BYTES") || !strcmp(op, "BATCH_P2P");
}

/* Ops whose input shape and element count all ranks must pass alike (the
 * viewer's vw_op_same_shape). Not ALL_GATHER nor ALL_TO_ALL_SINGLE: an
 * uneven all_gather (each rank its own size) and an all_to_all_single with
 * uneven splits (an expert router's) are legal with sizes that differ, and
 * a row does not say which it was; the checking layer compares those. */
static bool same_shape(const char *op) {
  static const char *ops[] = {"ALL_REDUCE", "BROADCAST", "REDUCE", "ALL_GATHER_INTO_TENSOR",
                              "REDUCE_SCATTER_TENSOR", "BROADCAST_BYTES"};
  for (size_t i = 0; i < sizeof ops / sizeof *ops; i++)
    if (!strcmp(op, ops[i]))
      return true;
  return false;
}

static const char *text(sqlite3_stmt *st, int i) {
  const unsigned char *s = sqlite3_column_text(st, i);
  return s ? (const char *)s : "";
}

static int64_t i64(sqlite3_stmt *st, int i) {
  return sqlite3_column_type(st, i) == SQLITE_NULL ? -1 : sqlite3_column_int64(st, i);
}

#define ROW_SQL                                                                            \
  "SELECT rank, group_id, seq, op, state, dtype, shape, numel_in, root, redop,"           \
  " t_enqueued_ns, t_started_ns, t_ended_ns, bytes_in FROM main.operations"

#define UNKNOWN (-2) /* a NULL field: the row's first record was lost */

/* Column i interned, or UNKNOWN when NULL. */
static int32_t field(summary *s, sqlite3_stmt *st, int i) {
  return sqlite3_column_type(st, i) == SQLITE_NULL ? UNKNOWN : sm_intern(&s->str, text(st, i));
}

/* The row's fingerprint: op, dtype, redop and (shaped ops) shape
 * interned (or UNKNOWN), root, element count; -1 out of memory. */
static int fingerprint(summary *s, sqlite3_stmt *st, const char *op, int32_t fp[5],
                       int64_t *numel) {
  bool shaped = same_shape(op);
  fp[0] = sm_intern(&s->str, op);
  fp[1] = field(s, st, 5);
  fp[2] = field(s, st, 9);
  fp[3] = shaped ? field(s, st, 6) : -1;
  fp[4] = (int32_t)i64(st, 8);
  *numel = shaped ? sqlite3_column_int64(st, 7) : 0;
  return fp[0] < 0 || fp[1] == -1 || fp[2] == -1 || (shaped && fp[3] == -1) ? -1 : 0;
}

/* Whether v differs from the collective's value *have: an UNKNOWN agrees
 * with any, and the first known value seen becomes the collective's. */
static bool known_differs(int32_t *have, int32_t v) {
  if (*have == UNKNOWN)
    *have = v;
  return v != UNKNOWN && *have != v;
}

static int add_coll(summary *s, sqlite3_stmt *st, int rank, int group, int64_t seq,
                    const char *op) {
  int32_t fp[5];
  int64_t numel;
  int fresh;
  sm_coll *c = sm_coll_get(&s->colls, group, seq, &fresh);
  if (!c || fingerprint(s, st, op, fp, &numel) != 0)
    return -1;
  int64_t t_enq = sqlite3_column_int64(st, 10), t0 = i64(st, 11);
  if (fresh) {
    c->op = fp[0], c->dtype = fp[1], c->redop = fp[2], c->shape = fp[3], c->root = fp[4];
    c->numel = numel;
    c->t_first = t_enq;
  } else {
    bool differs = c->op != fp[0] || c->root != fp[4];
    differs |= known_differs(&c->dtype, fp[1]);
    differs |= known_differs(&c->redop, fp[2]);
    if (fp[3] != UNKNOWN && c->shape == UNKNOWN) /* the element count comes with the shape */
      c->shape = fp[3], c->numel = numel;
    else if (fp[3] != UNKNOWN)
      differs |= c->shape != fp[3] || c->numel != numel;
    c->differs |= differs;
    c->t_first = t_enq < c->t_first ? t_enq : c->t_first;
  }
  if (t0 < 0)
    return 0;
  if (c->n == 0 || t0 < c->lo)
    c->lo = t0;
  if (c->n == 0 || t0 > c->hi || (t0 == c->hi && rank < c->hi_rank))
    c->hi = t0, c->hi_rank = rank;   // the viewer's "last": the lowest rank at the latest
  c->n++;
  return 0;
}

/* A completed operation's duration; the first such row of (group, op) in
 * (p2p, seq, rank) order sets the order the viewer lists them in. */
static int add_latency(summary *s, sqlite3_stmt *st, int rank, int group, int64_t seq,
                       const char *op, bool p2p) {
  int64_t t0 = i64(st, 11), t1 = i64(st, 12);
  if (strcmp(text(st, 4), "completed") || t0 < 0 || t1 < t0)
    return 0;
  int32_t id = sm_intern(&s->str, op);
  sm_bucket *f = id < 0 ? NULL : sm_bucket_get(&s->first, group, id, 0);
  if (!f)
    return -1;
  if (!f->n || p2p < f->aux || (p2p == f->aux && (seq < f->min ||
                                                  (seq == f->min && rank < f->max))))
    f->n = 1, f->aux = p2p, f->min = seq, f->max = rank;
  return add_value(sm_bucket_get(&s->lat, group, id, bucket(t1 - t0)), t1 - t0);
}

/* The row counted in its op's totals (op_totals); -1 when the ops
 * outnumber SM_MAX_OPS. */
static int add_total(summary *s, sqlite3_stmt *st, int32_t op) {
  sm_total *t = NULL;
  for (int i = 0; i < s->n_totals && !t; i++)
    t = s->totals[i].op == op ? &s->totals[i] : NULL;
  if (!t && (op < 0 || s->n_totals == SM_MAX_OPS))
    return -1;
  if (!t) {
    t = &s->totals[s->n_totals++];
    *t = (sm_total){.op = op};
  }
  const char *state = text(st, 4);
  t->n++;
  t->completed += !strcmp(state, "completed");
  t->failed += !strcmp(state, "failed");
  t->timed_out += !strcmp(state, "timed_out");
  t->in_flight += !strcmp(state, "enqueued") || !strcmp(state, "started");
  t->bytes_in += sqlite3_column_int64(st, 13);
  return 0;
}

static int pass1(sqlite3 *db, summary *s) {
  sqlite3_stmt *st;
  if (sqlite3_prepare_v2(db, ROW_SQL, -1, &st, NULL) != SQLITE_OK)
    return -1;
  int rc, bad = 0;
  while (!bad && (rc = sqlite3_step(st)) == SQLITE_ROW) {
    int rank = sqlite3_column_int(st, 0), group = sqlite3_column_int(st, 1);
    int64_t seq = sqlite3_column_int64(st, 2);
    const char *op = text(st, 3);   // valid until the next step
    bool p2p = is_p2p(op);
    bad = add_total(s, st, sm_intern(&s->str, op)) != 0 ||
          add_latency(s, st, rank, group, seq, op, p2p) != 0 ||
          (!p2p && add_coll(s, st, rank, group, seq, op) != 0);
  }
  sqlite3_finalize(st);
  return bad || rc != SQLITE_DONE ? -1 : 0;
}

/* Each start's lateness behind its collective's earliest. */
static int pass2(sqlite3 *db, summary *s) {
  sqlite3_stmt *st;
  if (sqlite3_prepare_v2(db, "SELECT rank, group_id, seq, op, t_started_ns FROM main.operations",
                         -1, &st, NULL) != SQLITE_OK)
    return -1;
  int rc, bad = 0;
  while (!bad && (rc = sqlite3_step(st)) == SQLITE_ROW) {
    int64_t t0 = i64(st, 4);
    if (t0 < 0 || is_p2p(text(st, 3)))
      continue;
    int rank = sqlite3_column_int(st, 0);
    const sm_coll *c = sm_coll_find(&s->colls, sqlite3_column_int(st, 1),
                                    sqlite3_column_int64(st, 2));
    if (!c || c->n < 2)
      continue;
    sm_bucket *r = sm_bucket_get(&s->ranks, rank, 0, 0);
    if (r)
      r->aux += rank == c->hi_rank && c->hi > c->lo;
    bad = add_value(r, t0 - c->lo) != 0 ||
          add_value(sm_bucket_get(&s->skew, rank, bucket(t0 - c->lo), 0), t0 - c->lo) != 0;
  }
  sqlite3_finalize(st);
  return bad || rc != SQLITE_DONE ? -1 : 0;
}

static void free_summary(summary *s) {
  sm_colls_free(&s->colls);
  sm_buckets_free(&s->lat);
  sm_buckets_free(&s->first);
  sm_buckets_free(&s->skew);
  sm_buckets_free(&s->ranks);
  sm_strings_free(&s->str);
}

int tr_summary_build(sqlite3 *db, char *err, size_t errlen) {
  summary s = {0};
  int rc = tr_exec(db, "SAVEPOINT summary", err, errlen);
  if (rc == 0 && (pass1(db, &s) != 0 || pass2(db, &s) != 0 || tr_summary_write(db, &s) != 0)) {
    snprintf(err ? err : (char[1]){0}, err ? errlen : 1, "summaries: %s",
             sqlite3_errcode(db) ? sqlite3_errmsg(db) : "out of memory");
    rc = -1;
  }
  free_summary(&s);
  if (rc != 0) {   // no summary at all: readers take the slow path
    tr_exec(db, "ROLLBACK TO summary", NULL, 0);
    tr_exec(db, "RELEASE summary", NULL, 0);
    return -1;
  }
  return tr_exec(db, "RELEASE summary", err, errlen);
}

int dist_trace_summarise(const char *path, char *err, size_t errlen) {
  sqlite3 *db = NULL;
  if (!path) {
    snprintf(err ? err : (char[1]){0}, err ? errlen : 1, "dist_trace_summarise: no path");
    return DIST_E_INVAL;
  }
  if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE, NULL) != SQLITE_OK) {
    snprintf(err ? err : (char[1]){0}, err ? errlen : 1, "%s: %s", path, sqlite3_errmsg(db));
    sqlite3_close(db);
    return DIST_E_SYS;
  }
  char kind[32] = "";
  int rc = DIST_OK;
  if (tr_meta_get(db, "kind", kind, sizeof kind) != 0 || strcmp(kind, "merged")) {
    snprintf(err ? err : (char[1]){0}, err ? errlen : 1, "%s: not a merged trace file", path);
    rc = DIST_E_INVAL;
  } else if (tr_exec(db, "BEGIN", err, errlen) != 0 || tr_summary_build(db, err, errlen) != 0 ||
             tr_exec(db, "COMMIT", err, errlen) != 0) {
    rc = DIST_E_SYS;
  }
  sqlite3_close(db);   // an open transaction rolls back
  return rc;
}
