/* mon_stats.c - at DIST_DEBUG=DETAIL, a statistics block per group every
 * DIST_STATS_EVERY operations (default 1000), and the straggler.
 *
 * The completion path writes one entry per operation into the block being
 * filled (kind, bytes, latency, arrival time) and, at the block's end,
 * hands it to the watchdog by flipping to the other block; nothing else
 * happens there. The watchdog computes the rank's own figures (count,
 * bytes, p50/p99 latency per kind) and publishes its arrival times in the
 * job's store (one write per block). Group rank 0 then reads every
 * member's arrivals and computes, per operation, the arrival skew (last
 * entry minus first, on the ranks' realtime clocks) and which rank was
 * last; a rank last in at least 3/4 of the block's operations, at least
 * 1 ms behind on average, is named as a straggler at WARNING. Each rank
 * emits its block as DIST_EV_STATS (rank 0's rows name the straggler), so
 * the trace's stats table holds it.
 *
 * Arrivals are matched by position in the block, which is the same
 * collective on every member as long as the group runs only collectives
 * (a point-to-point call numbers only its two ranks' operations, so the
 * skew of a group that mixes them is approximate). */
#include <stdio.h>
#include <stdlib.h>

#include "mon_int.h"

#define PENDING_MAX_MS 5000 /* rank 0 waits this long for the others' blocks */

typedef struct blk {
  _Atomic int count;
  int8_t *kind;
  int64_t *bytes, *lat, *arrive;
} blk;

struct mon_stats {
  int n;
  blk b[2];
  _Atomic int cur;
  _Atomic int ready;         /* index of a full block, or -1 */
  uint64_t block_no;
  uint64_t first_seq;
  /* group rank 0, waiting for the others' arrivals */
  bool pending;
  uint64_t pending_no;
  int64_t pending_since;
  int64_t *own;              /* n arrivals of this rank's pending block */
  dist_stats_row rows[DIST_OP_COUNT_];
  int n_rows;
  char range[64];
};

static bool blk_alloc(blk *b, int n) {
  b->kind = dist__calloc((size_t)n, 1);
  b->bytes = dist__calloc((size_t)n, sizeof(int64_t));
  b->lat = dist__calloc((size_t)n, sizeof(int64_t));
  b->arrive = dist__calloc((size_t)n, sizeof(int64_t));
  return b->kind && b->bytes && b->lat && b->arrive;
}

static void blk_free(blk *b) {
  dist__free(b->kind);
  dist__free(b->bytes);
  dist__free(b->lat);
  dist__free(b->arrive);
}

void dist__mon_stats_free(mon_group *g) {
  mon_stats *s = g->stats;
  if (!s)
    return;
  blk_free(&s->b[0]);
  blk_free(&s->b[1]);
  dist__free(s->own);
  dist__free(s);
  g->stats = NULL;
}

int dist__mon_stats_alloc(mon_group *g) {
  mon_stats *s = dist__calloc(1, sizeof *s);
  if (!s)
    return DIST_E_NOMEM;
  s->n = dist__mon.stats_every;
  atomic_init(&s->ready, -1);
  g->stats = s;
  s->own = dist__calloc((size_t)s->n, sizeof(int64_t));
  if (!s->own || !blk_alloc(&s->b[0], s->n) || !blk_alloc(&s->b[1], s->n)) {
    dist__mon_stats_free(g);
    return DIST_E_NOMEM;
  }
  return DIST_OK;
}

/* The completion path (one thread per group at a time: work completes in
 * issue order). */
void dist__mon_stats_op(mon_group *g, int kind, int64_t bytes, int64_t t_start_ns,
                        int64_t t_end_ns) {
  mon_stats *s = g->stats;
  if (!s)
    return;
  int c = atomic_load_explicit(&s->cur, memory_order_relaxed);
  blk *b = &s->b[c];
  int i = atomic_load_explicit(&b->count, memory_order_relaxed);
  if (i >= s->n)
    return; /* both blocks full: the watchdog is behind, this op is not counted */
  b->kind[i] = (int8_t)kind;
  b->bytes[i] = bytes;
  b->lat[i] = t_end_ns - t_start_ns;
  b->arrive[i] = t_start_ns + dist__mon.wall_off_ns;
  atomic_store_explicit(&b->count, i + 1, memory_order_release);
  if (i + 1 == s->n && atomic_load(&s->b[c ^ 1].count) == 0) {
    atomic_store(&s->ready, c);
    atomic_store(&s->cur, c ^ 1);
  }
}

/* --- the watchdog's side ---------------------------------------------------- */

static int cmp_i64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return x < y ? -1 : x > y;
}

/* Per kind: count, bytes, p50 and p99 of this rank's latencies. */
static void own_rows(mon_stats *s, const blk *b) {
  s->n_rows = 0;
  int64_t *lat = dist__malloc(sizeof(int64_t) * (size_t)s->n);
  for (int k = 0; lat && k < DIST_OP_COUNT_; k++) {
    dist_stats_row r = {.op = k, .straggler_rank = -1};
    int m = 0;
    for (int i = 0; i < s->n; i++)
      if (b->kind[i] == k) {
        lat[m++] = b->lat[i];
        r.bytes += (uint64_t)b->bytes[i];
      }
    if (!m)
      continue;
    qsort(lat, (size_t)m, sizeof *lat, cmp_i64);
    r.count = (uint64_t)m;
    r.p50_ns = lat[(m - 1) / 2];
    r.p99_ns = lat[(m * 99 + 99) / 100 - 1];
    s->rows[s->n_rows++] = r;
  }
  dist__free(lat);
}

static void print_block(const mon_group *g, const mon_stats *s, char *buf, size_t len,
                        size_t *off) {
  dist__appendf(buf, len, off, "stats of group %d (%s), operations %s, rank %d:", g->gid,
                g->desc[0] ? g->desc : g->name, s->range, dist__mon.rank);
  for (int i = 0; i < s->n_rows; i++) {
    const dist_stats_row *r = &s->rows[i];
    dist__appendf(buf, len, off, "\n  %-16s %6llu ops %12llu B  p50 %.3f ms  p99 %.3f ms",
                  dist_op_name((dist_op_kind)r->op), (unsigned long long)r->count,
                  (unsigned long long)r->bytes, (double)r->p50_ns / 1e6, (double)r->p99_ns / 1e6);
  }
}

static void emit(mon_group *g, mon_stats *s, const char *extra) {
  char buf[4096];
  size_t off = 0;
  print_block(g, s, buf, sizeof buf, &off);
  if (extra)
    dist__appendf(buf, sizeof buf, &off, "\n%s", extra);
  DIST_LOG(INFO, MON, "%s", buf);
  if (g->pg)
    dist_observer_emit_stats(g->pg, s->rows, (size_t)s->n_rows, buf);
}

static void arrivals_key(char *key, size_t len, const mon_group *g, uint64_t no, int rank) {
  char kind[64];
  snprintf(kind, sizeof kind, "st/%d/%llu", g->gid, (unsigned long long)no);
  dist__mon_key(key, len, kind, rank);
}

/* Rank 0: skew and the last rank of each operation, from every member. */
static void reduce(mon_group *g, mon_stats *s) {
  int n = s->n, size = g->size;
  int64_t **arr = dist__calloc((size_t)size, sizeof *arr);
  int *last = dist__calloc((size_t)size, sizeof(int));
  int64_t *late = dist__calloc((size_t)size, sizeof(int64_t));
  for (int j = 0; arr && j < size; j++) {
    if (j == g->rank) {
      arr[j] = s->own;
      continue;
    }
    char key[200];
    arrivals_key(key, sizeof key, g, s->pending_no, g->granks[j]);
    void *v = NULL;
    size_t len = 0;
    const char *keys[] = {key};
    bool there = false;
    if (dist_store_check(dist__mon.store, keys, 1, &there) == DIST_OK && there &&
        dist_store_get(dist__mon.store, key, &v, &len) == DIST_OK && len == sizeof(int64_t) * (size_t)n)
      arr[j] = v;
    else
      dist_free(v);
    dist_store_delete_key(dist__mon.store, key, NULL);
  }
  int64_t skew_sum = 0, skew_max = 0;
  int counted = 0;
  for (int i = 0; arr && last && late && i < n; i++) {
    int lo = -1, hi = -1;
    for (int j = 0; j < size; j++) {
      if (!arr[j])
        continue;
      if (lo < 0 || arr[j][i] < arr[lo][i])
        lo = j;
      if (hi < 0 || arr[j][i] > arr[hi][i])
        hi = j;
    }
    if (lo < 0 || lo == hi)
      continue;
    int64_t skew = arr[hi][i] - arr[lo][i];
    skew_sum += skew;
    skew_max = skew > skew_max ? skew : skew_max;
    last[hi]++;
    late[hi] += skew;
    counted++;
  }
  char extra[512] = "";
  int strag = -1;
  for (int j = 0; counted && j < size; j++)
    if (last[j] * 4 >= counted * 3 && late[j] / last[j] >= 1000000)
      strag = j;
  if (counted) {
    int most = 0;
    for (int j = 1; j < size; j++)
      most = last[j] > last[most] ? j : most;
    snprintf(extra, sizeof extra, "  arrival skew: mean %.3f ms, max %.3f ms; last to arrive "
             "most often: rank %d (%d of %d)", (double)skew_sum / counted / 1e6,
             (double)skew_max / 1e6, g->granks[most], last[most], counted);
  }
  if (strag >= 0) {
    int64_t mean = late[strag] / last[strag];
    DIST_LOG(WARNING, MON, "straggler in group %d (%s): rank %d arrived last in %d of %d "
             "operations (%s), on average %.3f ms after the first", g->gid,
             g->desc[0] ? g->desc : g->name, g->granks[strag], last[strag], counted, s->range,
             (double)mean / 1e6);
    for (int i = 0; i < s->n_rows; i++) {
      s->rows[i].straggler_rank = g->granks[strag];
      s->rows[i].lateness_ns = mean;
    }
  }
  emit(g, s, extra[0] ? extra : NULL);
  for (int j = 0; arr && j < size; j++)
    if (arr[j] && arr[j] != s->own)
      dist_free(arr[j]);
  dist__free(arr);
  dist__free(last);
  dist__free(late);
}

static bool all_arrived(const mon_group *g, const mon_stats *s) {
  for (int j = 0; j < g->size; j++) {
    if (j == g->rank)
      continue;
    char key[200];
    arrivals_key(key, sizeof key, g, s->pending_no, g->granks[j]);
    const char *keys[] = {key};
    bool there = false;
    if (dist_store_check(dist__mon.store, keys, 1, &there) != DIST_OK || !there)
      return false;
  }
  return true;
}

/* A full block: own figures, arrivals published; rank 0 waits for the
 * others' (a new block while one is pending replaces it). */
static void take_block(mon_group *g, mon_stats *s, blk *b) {
  own_rows(s, b);
  uint64_t no = s->block_no++;
  snprintf(s->range, sizeof s->range, "#%llu-#%llu", (unsigned long long)(s->first_seq + 1),
           (unsigned long long)(s->first_seq + (uint64_t)s->n));
  s->first_seq += (uint64_t)s->n;
  if (g->rank == 0) {
    memcpy(s->own, b->arrive, sizeof(int64_t) * (size_t)s->n);
    s->pending = true;
    s->pending_no = no;
    s->pending_since = dist__now_ns();
  } else {
    char key[200];
    arrivals_key(key, sizeof key, g, no, dist__mon.rank);
    dist_store_set(dist__mon.store, key, b->arrive, sizeof(int64_t) * (size_t)s->n);
    emit(g, s, NULL);
  }
}

void dist__mon_stats_tick(mon_group *g) {
  mon_stats *s = g->stats;
  if (!s)
    return;
  int r = atomic_load(&s->ready);
  if (r >= 0) {
    blk *b = &s->b[r];
    take_block(g, s, b);
    atomic_store(&s->ready, -1);
    atomic_store_explicit(&b->count, 0, memory_order_release);
    /* The producer filled the other block meanwhile and could not flip. */
    int c = atomic_load(&s->cur);
    if (atomic_load(&s->b[c].count) == s->n) {
      atomic_store(&s->ready, c);
      atomic_store(&s->cur, c ^ 1);
    }
  }
  if (s->pending && (all_arrived(g, s) ||
                     dist__now_ns() - s->pending_since > PENDING_MAX_MS * 1000000LL)) {
    s->pending = false;
    reduce(g, s);
  }
}
