/* mon_stats.c - at DIST_DEBUG=DETAIL, a statistics block per group every
 * DIST_STATS_EVERY operations (default 1000), and the straggler: a member
 * that arrives last at the group's collectives clearly more often than
 * chance, named with its mean lateness.
 *
 * DESIGN. The completion path (one thread per group at a time: work
 * completes in issue order) pushes one entry per operation (sequence
 * number, collective ordinal, kind, bytes, latency, arrival time) into a
 * single-producer queue and returns (a queue half full wakes the
 * watchdog); a full queue counts the entry as not seen. Everything else runs on the watchdog thread, under mon.mu.
 *
 * The watchdog files each entry by its sequence number into the chunk
 * that holds it: chunk k is the operations #kN+1..#(k+1)N. When an entry
 * beyond the chunk comes, the chunk is done: the rank emits its own
 * figures (count, bytes, p50/p99 per kind) and publishes the chunk's
 * arrivals in the job's store, one (arrival, ordinal) pair per sequence
 * number (0: not seen). The group's rank 0 reads chunk k of every member
 * and compares, per sequence number, only the collectives every member
 * saw with the same ordinal (a point-to-point call numbers only its two
 * ranks' operations, so one sequence number may name different calls on
 * different ranks; then nothing is said about it). For each it notes the
 * rank that arrived last, how long after the first and how long after the
 * second latest (its gap). Nothing is ever compared by position, so a
 * rank that missed entries does not shift the others.
 *
 * The verdict: rank j is the straggler when
 *  - it was last in at least MIN_LAST of the compared collectives, more
 *    often than chance (1/size) with p < 1e-5 (the Chernoff bound of the
 *    binomial tail);
 *  - on average at least LATE_NS after the first, and at least LATE_NS
 *    late in most of them (a rank that is systematically last by
 *    microseconds, or a few scheduling hiccups, name nobody);
 *  - and its lateness stands apart (distinct()): its median gap behind
 *    the second latest is at least twice the others' median gap when they
 *    are last (when they were last MIN_LAST times or more; else, with no
 *    such reference, its gap is at least half its lateness in most of
 *    them: it arrives late alone, not as the tail of a spread).
 * The last condition is what tells a straggler from an oversubscribed
 * machine: 12 ranks on 2 cores arrive over a spread of a millisecond or
 * more, and the scheduler's order makes the high ranks last two or three
 * times more often than chance (rank 11 in 18% of 3000 balanced
 * all_reduces over TCP, where chance is 8%), 1.3 ms after the first, so
 * the frequency and the lateness alone name it; but whoever is last then
 * trails the second latest by a tenth of a millisecond, rank 11 no more
 * than the others. A rank that sleeps 50 ms per step trails by 50 ms, and
 * the others, when they are last at all, by the spread's tenth. Medians,
 * not means: one swapped-out moment in thousands of collectives shifts a
 * mean by milliseconds, a median not at all. Ranks that each sleep at
 * random are last about as often as chance, and the one the scheduler
 * favours on top of it has the smaller median gap, not the larger.
 *
 * It is judged per chunk (the stats rows' straggler_rank, at INFO), every
 * DIST_STRAGGLER_S seconds over the collectives since the last judgement
 * (a WARNING in long jobs), and over the group's whole life when it ends
 * (destroyed, or the job's end): then every member publishes what it has
 * not published, and rank 0 waits a bounded moment for them. A named straggler is a WARNING and a
 * DIST_EV_STRAGGLER event (an events row of kind 'straggler'). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "mon_int.h"

#define PENDING_MAX_MS 5000 /* rank 0 waits this long for a chunk of the others */
#define END_WAIT_MS 3000    /* ... and this long for their last chunks at the end */
#define MAX_HELD 64         /* rank 0's own blocks waiting for the others' */
#define MIN_LAST 10         /* a straggler was last at least this often */
#define LOG_ALPHA 11.5129   /* -ln(1e-5): the significance of "more than chance" */
#define LATE_NS 1000000LL   /* and at least 1 ms late */
#define GAP_RATIO_BINS 3    /* distinct: a median gap 3 bins (twice) the others' */

typedef struct entry {
  uint64_t seq, ord;         /* ord: collective ordinal (1, 2, ...); 0 point-to-point */
  int64_t arrive, lat, bytes;
  int kind;
} entry;

typedef struct pair {        /* published per sequence number */
  int64_t arrive;            /* realtime ns; 0: not seen */
  uint64_t ord;
} pair;

typedef struct tally {       /* who arrived last, over some collectives */
  mon_lasts l;               /* per group rank; l.n: collectives compared */
  uint64_t first_seq, last_seq;
  int64_t skew_sum, skew_max;
} tally;

typedef struct held {        /* rank 0: its own block, until the chunk is reduced */
  uint64_t chunk;
  dist_stats_row rows[DIST_OP_COUNT_];
  int n_rows;
} held;

struct mon_stats {
  int n;                     /* DIST_STATS_EVERY: sequence numbers per chunk */
  int size;
  /* the queue (producer: the completion path; consumer: the watchdog) */
  entry *q;
  uint64_t qmask;
  _Atomic uint64_t head, tail;
  _Atomic uint64_t unseen;   /* entries the full queue refused */
  uint64_t coll_no;          /* producer only */
  /* the watchdog's chunk */
  uint64_t chunk;            /* index of the chunk being filled */
  int filled;
  pair *pairs;
  int8_t *kind;
  int64_t *lat, *bytes;
  uint64_t published;        /* chunks published so far (0..chunk) */
  /* group rank 0 */
  uint64_t reduce_next;
  int64_t waiting_since;     /* ns; 0: not waiting */
  held held[MAX_HELD];
  int n_held;
  tally chunk_t, window, total;
  int64_t window_t0;
  const dist_pg_info *end_info; /* while the group ends: its events go out by it */
};

/* --- tallies and the verdict --------------------------------------------- */

bool dist__mon_lasts_alloc(mon_lasts *t, int size) {
  t->last = dist__calloc((size_t)size, sizeof(int64_t));
  t->late_ns = dist__calloc((size_t)size, sizeof(int64_t));
  t->material = dist__calloc((size_t)size, sizeof(int64_t));
  t->alone = dist__calloc((size_t)size, sizeof(int64_t));
  t->gap = dist__calloc((size_t)size, sizeof *t->gap);
  return t->last && t->late_ns && t->material && t->alone && t->gap;
}

void dist__mon_lasts_free(mon_lasts *t) {
  dist__free(t->last);
  dist__free(t->late_ns);
  dist__free(t->material);
  dist__free(t->alone);
  dist__free(t->gap);
}

void dist__mon_lasts_reset(mon_lasts *t, int size) {
  t->n = 0;
  memset(t->last, 0, sizeof(int64_t) * (size_t)size);
  memset(t->late_ns, 0, sizeof(int64_t) * (size_t)size);
  memset(t->material, 0, sizeof(int64_t) * (size_t)size);
  memset(t->alone, 0, sizeof(int64_t) * (size_t)size);
  memset(t->gap, 0, sizeof *t->gap * (size_t)size);
}

/* A gap's bin: 0 below 8 us, then a third of an octave each (bin b from
 * 2^((b + 38) / 3) ns), the last open-ended (from 13.6 s): fine enough to
 * tell "twice" apart, and a fixed size whatever the number of collectives. */
static int gap_bin(int64_t ns) {
  if (ns < 8192)
    return 0;
  int b = (int)(3 * log2((double)ns)) - 38;
  return b < MON_GAP_BINS - 1 ? b : MON_GAP_BINS - 1;
}

void dist__mon_lasts_add(mon_lasts *t, int last, int64_t skew, int64_t gap) {
  t->n++;
  t->last[last]++;
  t->late_ns[last] += skew;
  t->material[last] += skew >= LATE_NS;
  t->alone[last] += gap * 2 >= skew;
  t->gap[last][gap_bin(gap)]++;
}

static bool tally_alloc(tally *t, int size) { return dist__mon_lasts_alloc(&t->l, size); }

static void tally_free(tally *t) { dist__mon_lasts_free(&t->l); }

static void tally_reset(tally *t, int size) {
  dist__mon_lasts_reset(&t->l, size);
  t->first_seq = t->last_seq = 0;
  t->skew_sum = t->skew_max = 0;
}

static void tally_add(tally *t, uint64_t seq, int last, int64_t skew, int64_t gap) {
  if (!t->l.n)
    t->first_seq = seq;
  t->last_seq = seq;
  dist__mon_lasts_add(&t->l, last, skew, gap);
  t->skew_sum += skew;
  t->skew_max = skew > t->skew_max ? skew : t->skew_max;
}

/* -ln P(X >= k) bounded below by n * KL(k/n || p), X ~ Binomial(n, p). */
static double surprise(int64_t k, int64_t n, double p) {
  double q = (double)k / (double)n;
  if (q <= p)
    return 0;
  double a = q * log(q / p);
  double b = q < 1 ? (1 - q) * log((1 - q) / (1 - p)) : 0;
  return (double)n * (a + b);
}

/* The bin of the median of a histogram of c gaps. */
static int median_bin(const int64_t *h, int64_t c) {
  int64_t sum = 0;
  for (int b = 0; b < MON_GAP_BINS; b++)
    if ((sum += h[b]) * 2 >= c)
      return b;
  return MON_GAP_BINS - 1;
}

/* Whether j's lateness stands apart from the others' (the header says why). */
static bool distinct(const mon_lasts *t, int size, int j) {
  int64_t others = t->n - t->last[j];
  if (others < MIN_LAST) /* no reference: it must be late alone */
    return t->alone[j] * 2 > t->last[j];
  int64_t h[MON_GAP_BINS] = {0};
  for (int i = 0; i < size; i++)
    for (int b = 0; i != j && b < MON_GAP_BINS; b++)
      h[b] += t->gap[i][b];
  return median_bin(t->gap[j], t->last[j]) >= median_bin(h, others) + GAP_RATIO_BINS;
}

int dist__mon_stats_judge(const mon_lasts *t, int size) {
  int who = -1;
  for (int j = 0; size > 1 && j < size; j++) {
    int64_t k = t->last[j];
    if (k < MIN_LAST || t->late_ns[j] / k < LATE_NS || t->material[j] * 2 <= k ||
        surprise(k, t->n, 1.0 / size) < LOG_ALPHA || !distinct(t, size, j))
      continue;
    if (who < 0 || k > t->last[who])
      who = j;
  }
  return who;
}

static int judge(const tally *t, int size) { return dist__mon_stats_judge(&t->l, size); }

static const char *gname(const mon_group *g) { return g->desc[0] ? g->desc : g->name; }

/* The warning and the event; info NULL: the group is gone, no event. */
static void name_straggler(const mon_group *g, const tally *t, int j, const char *when,
                           const dist_pg_info *info) {
  char msg[512];
  snprintf(msg, sizeof msg, "straggler in group %d (%s, %d ranks): rank %d arrived last in "
           "%lld of %lld collectives, on average %.1f ms after the first%s", g->gid, gname(g),
           g->size, g->granks[j], (long long)t->l.last[j], (long long)t->l.n,
           (double)t->l.late_ns[j] / (double)t->l.last[j] / 1e6, when);
  DIST_LOG(WARNING, MON, "%s", msg);
  dist_observer_emit_straggler(info, t->last_seq, g->granks[j], msg);
}

/* --- life ------------------------------------------------------------------ */

void dist__mon_stats_free(mon_group *g) {
  mon_stats *s = g->stats;
  if (!s)
    return;
  dist__free(s->q);
  dist__free(s->pairs);
  dist__free(s->kind);
  dist__free(s->lat);
  dist__free(s->bytes);
  tally_free(&s->chunk_t);
  tally_free(&s->window);
  tally_free(&s->total);
  dist__free(s);
  g->stats = NULL;
}

int dist__mon_stats_alloc(mon_group *g) {
  mon_stats *s = dist__calloc(1, sizeof *s);
  if (!s)
    return DIST_E_NOMEM;
  g->stats = s;
  s->n = dist__mon.stats_every;
  s->size = g->size;
  uint64_t cap = 4096;
  while (cap < 2 * (uint64_t)s->n && cap < 65536)
    cap *= 2;
  s->qmask = cap - 1;
  s->q = dist__calloc(cap, sizeof *s->q);
  s->pairs = dist__calloc((size_t)s->n, sizeof *s->pairs);
  s->kind = dist__malloc((size_t)s->n);
  s->lat = dist__calloc((size_t)s->n, sizeof(int64_t));
  s->bytes = dist__calloc((size_t)s->n, sizeof(int64_t));
  bool ok = s->q && s->pairs && s->kind && s->lat && s->bytes;
  if (ok && g->rank == 0)
    ok = tally_alloc(&s->chunk_t, g->size) && tally_alloc(&s->window, g->size) &&
         tally_alloc(&s->total, g->size);
  if (!ok) {
    dist__mon_stats_free(g);
    return DIST_E_NOMEM;
  }
  memset(s->kind, -1, (size_t)s->n);
  s->window_t0 = dist__now_ns();
  return DIST_OK;
}

/* The completion path: one store into the queue. */
void dist__mon_stats_op(mon_group *g, uint64_t seq, int kind, int64_t bytes, int64_t t_start_ns,
                        int64_t t_end_ns) {
  mon_stats *s = g->stats;
  if (!s || !seq)
    return;
  uint64_t ord = dist__mon_is_p2p(kind) ? 0 : ++s->coll_no;
  uint64_t h = atomic_load_explicit(&s->head, memory_order_relaxed);
  uint64_t used = h - atomic_load_explicit(&s->tail, memory_order_acquire);
  if (used > s->qmask) {
    atomic_fetch_add_explicit(&s->unseen, 1, memory_order_relaxed);
    return; /* the watchdog is behind: this one is not compared (nothing shifts) */
  }
  if (used == (s->qmask + 1) / 2)
    dist__mon_watchdog_kick(); /* half full: once per half queue, not per operation */
  s->q[h & s->qmask] = (entry){.seq = seq, .ord = ord, .arrive = t_start_ns + dist__mon.wall_off_ns,
                               .lat = t_end_ns - t_start_ns, .bytes = bytes, .kind = kind};
  atomic_store_explicit(&s->head, h + 1, memory_order_release);
}

/* --- the watchdog's side ---------------------------------------------------- */

static int cmp_i64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return x < y ? -1 : x > y;
}

/* Per kind over the chunk: count, bytes, p50 and p99 of this rank's latencies. */
static int own_rows(const mon_stats *s, dist_stats_row *rows) {
  int n_rows = 0;
  int64_t *lat = dist__malloc(sizeof(int64_t) * (size_t)s->n);
  for (int k = 0; lat && k < DIST_OP_COUNT_; k++) {
    dist_stats_row r = {.op = k, .straggler_rank = -1};
    int m = 0;
    for (int i = 0; i < s->n; i++)
      if (s->kind[i] == k) {
        lat[m++] = s->lat[i];
        r.bytes += (uint64_t)s->bytes[i];
      }
    if (!m)
      continue;
    qsort(lat, (size_t)m, sizeof *lat, cmp_i64);
    r.count = (uint64_t)m;
    r.p50_ns = lat[(m - 1) / 2];
    r.p99_ns = lat[(m * 99 + 99) / 100 - 1];
    rows[n_rows++] = r;
  }
  dist__free(lat);
  return n_rows;
}

static void emit(mon_group *g, uint64_t chunk, const dist_stats_row *rows, int n_rows,
                 const char *extra) {
  char buf[4096];
  size_t off = 0;
  uint64_t n = (uint64_t)g->stats->n;
  dist__appendf(buf, sizeof buf, &off, "stats of group %d (%s), operations #%llu-#%llu, rank %d:",
                g->gid, gname(g), (unsigned long long)(chunk * n + 1),
                (unsigned long long)(chunk * n + n), dist__mon.rank);
  for (int i = 0; i < n_rows; i++) {
    const dist_stats_row *r = &rows[i];
    dist__appendf(buf, sizeof buf, &off, "\n  %-16s %6llu ops %12llu B  p50 %.3f ms  p99 %.3f ms",
                  dist_op_name((dist_op_kind)r->op), (unsigned long long)r->count,
                  (unsigned long long)r->bytes, (double)r->p50_ns / 1e6, (double)r->p99_ns / 1e6);
  }
  if (extra)
    dist__appendf(buf, sizeof buf, &off, "\n%s", extra);
  DIST_LOG(INFO, MON, "%s", buf);
  if (g->pg)
    dist_observer_emit_stats(g->pg, rows, (size_t)n_rows, buf);
  else if (g->stats->end_info) /* the chunks only the group's end completed */
    dist_observer_emit_group_stats(g->stats->end_info, atomic_load(&g->enq), rows,
                                   (size_t)n_rows, buf);
}

static void chunk_key(char *key, size_t len, const mon_group *g, uint64_t chunk, int rank) {
  char kind[64];
  snprintf(kind, sizeof kind, "st/%d/%llu", g->gid, (unsigned long long)chunk);
  dist__mon_key(key, len, kind, rank);
}

static void end_key(char *key, size_t len, const mon_group *g, int rank) {
  char kind[64];
  snprintf(kind, sizeof kind, "st/%d/end", g->gid);
  dist__mon_key(key, len, kind, rank);
}

/* The chunk being filled is done: own figures out (rank 0 holds them for
 * the reduction), arrivals published, the arrays cleared for the next. */
static void close_chunk(mon_group *g, mon_stats *s) {
  if (s->filled) {
    dist_stats_row rows[DIST_OP_COUNT_];
    int n_rows = own_rows(s, rows);
    if (g->rank != 0) {
      emit(g, s->chunk, rows, n_rows, NULL);
    } else {
      if (s->n_held == MAX_HELD) { /* the others are far behind: out without the straggler */
        emit(g, s->held[0].chunk, s->held[0].rows, s->held[0].n_rows, NULL);
        memmove(&s->held[0], &s->held[1], sizeof(held) * (size_t)(--s->n_held));
      }
      held *h = &s->held[s->n_held++];
      h->chunk = s->chunk;
      h->n_rows = n_rows;
      memcpy(h->rows, rows, sizeof rows);
    }
  }
  char key[200];
  chunk_key(key, sizeof key, g, s->chunk, dist__mon.rank);
  /* An empty chunk is an empty value: rank 0 then compares nothing there. */
  dist_store_set(dist__mon.store, key, s->pairs, s->filled ? sizeof(pair) * (size_t)s->n : 0);
  memset(s->pairs, 0, sizeof(pair) * (size_t)s->n);
  memset(s->kind, -1, (size_t)s->n);
  s->filled = 0;
  s->chunk++;
  s->published = s->chunk;
}

static void drain(mon_group *g, mon_stats *s) {
  uint64_t t = atomic_load_explicit(&s->tail, memory_order_relaxed);
  uint64_t h = atomic_load_explicit(&s->head, memory_order_acquire);
  for (; t < h; t++) {
    entry e = s->q[t & s->qmask];
    atomic_store_explicit(&s->tail, t + 1, memory_order_release);
    uint64_t c = (e.seq - 1) / (uint64_t)s->n;
    if (c < s->chunk)
      continue; /* completed after its chunk closed (cannot happen in issue order) */
    while (s->chunk < c)
      close_chunk(g, s);
    int i = (int)((e.seq - 1) % (uint64_t)s->n);
    s->pairs[i] = (pair){.arrive = e.ord ? e.arrive : 0, .ord = e.ord};
    s->kind[i] = (int8_t)e.kind;
    s->lat[i] = e.lat;
    s->bytes[i] = e.bytes;
    s->filled++;
  }
}

/* Who arrived last at entry i of the members' pairs, skew after the first
 * and gap after the second latest; false when not every member saw that
 * collective (or they all arrived at once). */
static bool last_of(pair **vals, int size, int i, int *hi, int64_t *skew, int64_t *gap) {
  int64_t first = 0, second = INT64_MIN;
  *hi = -1;
  for (int j = 0; j < size; j++) {
    const pair *p = vals[j] ? &vals[j][i] : NULL;
    if (!p || !p->arrive || !p->ord || p->ord != vals[0][i].ord)
      return false;
    if (*hi < 0 || p->arrive < first)
      first = p->arrive;
    if (*hi < 0 || p->arrive > vals[*hi][i].arrive) {
      if (*hi >= 0)
        second = vals[*hi][i].arrive;
      *hi = j;
    } else if (p->arrive > second) {
      second = p->arrive;
    }
  }
  *skew = vals[*hi][i].arrive - first;
  if (*skew <= 0) /* all at once (or a group of one: no second latest) */
    return false;
  *gap = vals[*hi][i].arrive - second;
  return true;
}

/* Rank 0: compare a chunk across the members (vals[j]: member j's pairs,
 * NULL when absent or empty) into the tallies. */
static void compare(mon_group *g, mon_stats *s, pair **vals) {
  tally_reset(&s->chunk_t, g->size);
  for (int i = 0; i < s->n; i++) {
    int hi;
    int64_t skew, gap;
    if (!last_of(vals, g->size, i, &hi, &skew, &gap))
      continue;
    uint64_t seq = vals[0][i].ord; /* the collective's number (its seq) */
    tally_add(&s->chunk_t, seq, hi, skew, gap);
    tally_add(&s->window, seq, hi, skew, gap);
    tally_add(&s->total, seq, hi, skew, gap);
  }
}

/* Rank 0: chunk c is reduced (every member's part, or what came in time):
 * its own block goes out with the chunk's straggler. */
static void reduce(mon_group *g, mon_stats *s, uint64_t c) {
  pair **vals = dist__calloc((size_t)g->size, sizeof *vals);
  for (int j = 0; vals && j < g->size; j++) {
    char key[200];
    chunk_key(key, sizeof key, g, c, g->granks[j]);
    const char *keys[] = {key};
    bool there = false;
    void *v = NULL;
    size_t len = 0;
    if (dist_store_check(dist__mon.store, keys, 1, &there) == DIST_OK && there &&
        dist_store_get(dist__mon.store, key, &v, &len) == DIST_OK &&
        len == sizeof(pair) * (size_t)s->n)
      vals[j] = v;
    else
      dist_free(v);
    if (there)
      dist_store_delete_key(dist__mon.store, key, NULL);
  }
  if (vals && vals[0])
    compare(g, s, vals);
  else
    tally_reset(&s->chunk_t, g->size);
  for (int j = 0; vals && j < g->size; j++)
    dist_free(vals[j]);
  dist__free(vals);
  while (s->n_held && s->held[0].chunk < c) /* never (chunks are reduced in order) */
    memmove(&s->held[0], &s->held[1], sizeof(held) * (size_t)(--s->n_held));
  held *h = s->n_held && s->held[0].chunk == c ? &s->held[0] : NULL;
  if (!h)
    return;
  const tally *t = &s->chunk_t;
  char extra[256] = "";
  if (t->l.n) {
    int most = 0;
    for (int j = 1; j < g->size; j++)
      most = t->l.last[j] > t->l.last[most] ? j : most;
    snprintf(extra, sizeof extra, "  arrival skew: mean %.3f ms, max %.3f ms; last to arrive "
             "most often: rank %d (%lld of %lld)", (double)t->skew_sum / (double)t->l.n / 1e6,
             (double)t->skew_max / 1e6, g->granks[most], (long long)t->l.last[most],
             (long long)t->l.n);
  }
  int j = judge(t, g->size);
  for (int i = 0; j >= 0 && i < h->n_rows; i++) {
    h->rows[i].straggler_rank = g->granks[j];
    h->rows[i].lateness_ns = t->l.late_ns[j] / t->l.last[j];
  }
  emit(g, c, h->rows, h->n_rows, extra[0] ? extra : NULL);
  memmove(&s->held[0], &s->held[1], sizeof(held) * (size_t)(--s->n_held));
}

static bool chunk_ready(const mon_group *g, uint64_t c) {
  for (int j = 0; j < g->size; j++) {
    char key[200];
    chunk_key(key, sizeof key, g, c, g->granks[j]);
    const char *keys[] = {key};
    bool there = false;
    if (dist_store_check(dist__mon.store, keys, 1, &there) != DIST_OK || !there)
      return false;
  }
  return true;
}

/* Rank 0: reduces the chunks every member has published, in order; one
 * that waits too long (or too many held blocks) is reduced as it is. */
static void reduce_ready(mon_group *g, mon_stats *s, bool force) {
  while (s->reduce_next < s->published) {
    uint64_t c = s->reduce_next;
    if (!force && !chunk_ready(g, c)) {
      int64_t now = dist__now_ns();
      if (!s->waiting_since)
        s->waiting_since = now;
      if (now - s->waiting_since < PENDING_MAX_MS * 1000000LL)
        return;
    }
    s->waiting_since = 0;
    reduce(g, s, c);
    s->reduce_next++;
  }
}

void dist__mon_stats_tick(mon_group *g) {
  mon_stats *s = g->stats;
  if (!s || !dist__mon.store)
    return;
  drain(g, s);
  if (g->rank != 0)
    return;
  reduce_ready(g, s, false);
  int64_t now = dist__now_ns();
  if (dist__mon.straggler_s > 0 && now - s->window_t0 >= dist__mon.straggler_s * 1000000000LL) {
    int j = judge(&s->window, g->size);
    if (j >= 0) {
      char when[96];
      snprintf(when, sizeof when, " (collectives #%llu-#%llu)",
               (unsigned long long)s->window.first_seq, (unsigned long long)s->window.last_seq);
      name_straggler(g, &s->window, j, when, g->pg ? dist_pg_get_info(g->pg) : NULL);
    }
    tally_reset(&s->window, g->size);
    s->window_t0 = now;
  }
}

/* The group ends: every member publishes the rest and says how many chunks
 * it has; rank 0 waits for them (END_WAIT_MS at most), reduces all and
 * judges the group's whole life. */
static void stats_end(mon_group *g, mon_stats *s, const dist_pg_info *info) {
  drain(g, s);
  if (s->filled)
    close_chunk(g, s);
  char key[200];
  int64_t chunks = (int64_t)s->published;
  if (atomic_load(&s->unseen))
    DIST_LOG(INFO, MON, "group %d: %llu operations were not in the statistics (the watchdog "
             "was behind)", g->gid, (unsigned long long)atomic_load(&s->unseen));
  if (g->rank != 0) {
    end_key(key, sizeof key, g, dist__mon.rank);
    dist_store_set(dist__mon.store, key, &chunks, sizeof chunks);
    return;
  }
  char (*keys)[200] = dist__calloc((size_t)g->size, sizeof *keys);
  const char **kp = dist__calloc((size_t)g->size, sizeof *kp);
  int nk = 0;
  for (int j = 1; keys && kp && j < g->size; j++) {
    end_key(keys[nk], sizeof keys[nk], g, g->granks[j]);
    kp[nk] = keys[nk];
    nk++;
  }
  /* One wait per process, not per group: a rank that leaves while its
   * peers still run (they never end their groups) would otherwise linger
   * END_WAIT_MS for each of its groups, its peers stuck waiting for it. */
  int64_t wait_ms = dist__mon.stats_end_late ? 0 : END_WAIT_MS;
  if (nk && dist_store_wait(dist__mon.store, kp, (size_t)nk, wait_ms + 1) != DIST_OK) {
    dist__mon.stats_end_late = true;
    DIST_LOG(INFO, MON, "group %d: not every member's last statistics came in %lld ms; the "
             "straggler is judged on what did", g->gid, (long long)wait_ms);
  }
  uint64_t last = s->published;
  for (int i = 0; i < nk; i++) {
    void *v = NULL;
    size_t len = 0;
    const char *one[] = {kp[i]};
    bool there = false;
    if (dist_store_check(dist__mon.store, one, 1, &there) == DIST_OK && there &&
        dist_store_get(dist__mon.store, kp[i], &v, &len) == DIST_OK && len == sizeof(int64_t)) {
      int64_t c;
      memcpy(&c, v, sizeof c);
      last = (uint64_t)c > last ? (uint64_t)c : last;
    }
    dist_free(v);
    if (there)
      dist_store_delete_key(dist__mon.store, kp[i], NULL);
  }
  dist__free(keys);
  dist__free(kp);
  s->published = last;
  reduce_ready(g, s, true);
  int j = judge(&s->total, g->size);
  if (j >= 0)
    name_straggler(g, &s->total, j, "", info);
  else if (s->total.l.n)
    DIST_LOG(INFO, MON, "group %d (%s): no straggler in %lld collectives compared", g->gid,
             gname(g), (long long)s->total.l.n);
}

void dist__mon_stats_end(mon_group *g, const dist_pg_info *info) {
  mon_stats *s = g->stats;
  if (!s || !dist__mon.store)
    return;
  s->end_info = info; /* g->pg is gone: the last blocks go out by the group's info */
  stats_end(g, s, info);
  s->end_info = NULL;
}
