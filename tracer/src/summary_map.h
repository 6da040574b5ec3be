/* summary_map.h - the insides of the merge's summaries (summary.c,
 * summary_write.c): hash tables with open addressing over integer keys,
 * a string interner, and what the passes gather. Each table
 * grows by doubling; a failed allocation leaves it as it was and returns
 * NULL (or -1), so the caller can give up on the summaries and the merge
 * still succeeds. */
#ifndef DIST_TRACE_SUMMARY_MAP_H
#define DIST_TRACE_SUMMARY_MAP_H

#include <stddef.h>
#include <stdint.h>

#include <sqlite3.h>

/* A collective (group, seq) of the non-point-to-point rows: its first
 * row's fingerprint and whether another row's differs, its earliest
 * enqueue, and its starts (earliest, latest and the lowest rank at the
 * latest, how many). */
typedef struct sm_coll {
  int64_t seq;
  int32_t group;
  int32_t used;
  int32_t op, dtype, redop, shape; /* interned; shape -1: not a shaped op */
  int32_t root;                    /* -1: NULL */
  int64_t numel;                   /* with shape: the element count */
  int32_t differs;
  int32_t n;                       /* rows with a start */
  int32_t hi_rank;
  int64_t t_first, lo, hi;
} sm_coll;

typedef struct sm_colls {
  sm_coll *slot;
  size_t cap, n;
} sm_colls;

/* The collective's slot, made (zeroed, used = 1, new = 1) when absent. */
sm_coll *sm_coll_get(sm_colls *t, int32_t group, int64_t seq, int *is_new);
/* The slot, or NULL when absent. */
const sm_coll *sm_coll_find(const sm_colls *t, int32_t group, int64_t seq);
void sm_colls_free(sm_colls *t);

/* Bucket totals keyed by three integers: (group, op, bucket) for latency,
 * (rank, bucket, 0) for arrival lateness. */
typedef struct sm_bucket {
  int64_t k[3];
  int64_t n, min, max;
  int64_t total;  /* the exact sum */
  int64_t aux;    /* the caller's */
  double sum;     /* as the viewer's histogram adds them: exact below 2^53 */
} sm_bucket;

typedef struct sm_buckets {
  int32_t *slot;   /* index into b + 1; 0 empty */
  size_t cap;
  sm_bucket *b;
  size_t n, bcap;
  size_t last;     /* the entry found last: rows of one rank come together */
} sm_buckets;

/* The entry of key (a, b, c), made (zeroed, min INT64_MAX) when absent. */
sm_bucket *sm_bucket_get(sm_buckets *t, int64_t a, int64_t b, int64_t c);
void sm_buckets_free(sm_buckets *t);

/* Strings to small ids, in order of first sight from 0. */
typedef struct sm_strings {
  char **s;
  int32_t *slot;   /* id + 1; 0 empty */
  size_t cap, n, scap;
} sm_strings;

int32_t sm_intern(sm_strings *t, const char *s);
void sm_strings_free(sm_strings *t);

/* What the passes over operations gathered (summary.c). */
/* One op's totals (op_totals: what `distview summary` lists). */
typedef struct sm_total {
  int32_t op;   /* interned name */
  int64_t n, completed, failed, timed_out, in_flight, bytes_in;
} sm_total;

#define SM_MAX_OPS 64   /* distinct op names; more leave op_totals to SQL */

typedef struct summary {
  sm_total totals[SM_MAX_OPS];
  int n_totals;
  sm_colls colls;
  sm_buckets lat;     /* (group, op id, bucket) */
  sm_buckets first;   /* (group, op id, 0): aux = p2p, min = seq, max = rank of the first row */
  sm_buckets skew;    /* (rank, bucket, 0) */
  sm_buckets ranks;   /* (rank, 0, 0): every lateness; aux = times it arrived last */
  sm_strings str;
} summary;

/* summary_write.c: the tables (dropped first when there), from s; its
 * bucket arrays are sorted in place (their hash slots are stale after). */
int tr_summary_write(sqlite3 *db, summary *s);

#endif
