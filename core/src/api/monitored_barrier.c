/* monitored_barrier.c - a host-side barrier over the group's store, at every
 * debug level and on every backend (it never touches the data plane).
 *
 * Rank 0 of the group waits for every other rank's arrival key until the
 * timeout, then publishes the verdict; the others publish their arrival and
 * wait for the verdict. Absent ranks are named: the first one, or all of
 * them with wait_all_ranks. A rank that never hears back from rank 0 says
 * so. Keys carry the call's sequence number so consecutive barriers never
 * see each other's keys. Rank 0 deletes the keys once they are read: the
 * arrivals as it collects them, a verdict at the next barrier that every
 * rank reached (each has read it by then), so a job of any number of
 * barriers keeps the store's key count flat. */
#include <inttypes.h>
#include <stdio.h>

#include "api.h"

/* How long a member waits past the barrier's timeout for rank 0's verdict:
 * rank 0 answers at the timeout, plus its own trip to the store. */
#define DIST_MB_VERDICT_GRACE_MS 2000

static void key(char *buf, size_t len, uint64_t seq, const char *what, int rank) {
  if (rank >= 0)
    snprintf(buf, len, "mb/%" PRIu64 "/%s/%d", seq, what, rank);
  else
    snprintf(buf, len, "mb/%" PRIu64 "/%s", seq, what);
}

/* Rank 0: collects arrivals; fills absent[] (global ranks). */
static int collect(dist_pg *g, dist_store *st, uint64_t seq, int64_t deadline, bool all,
                   int *absent, int *n_absent) {
  *n_absent = 0;
  for (int r = 1; r < g->info.size; r++) {
    char k[96];
    key(k, sizeof k, seq, "in", r);
    const char *keys[1] = {k};
    int64_t left = *n_absent && all ? 0 : dist__remaining_ms(deadline);
    int rc = dist_store_wait(st, keys, 1, left > 0 ? left : 1);
    if (rc == DIST_E_TIMEOUT) {
      absent[(*n_absent)++] = g->global_ranks[r];
      if (!all)
        break;
    } else if (rc != DIST_OK) {
      return dist__err_set(&g->err, dist__store_status(rc), "monitored_barrier: store failed: %s",
                           dist_store_errmsg(st));
    } else {
      rc = dist_store_delete_key(st, k, NULL);
      if (rc != DIST_OK)
        return dist__err_set(&g->err, dist__store_status(rc),
                             "monitored_barrier: store failed: %s", dist_store_errmsg(st));
    }
  }
  return DIST_OK;
}

/* Every rank reached barrier seq, so every rank has read the verdict of
 * the one before: it goes. */
static int drop_prev_verdict(dist_pg *g, dist_store *st, uint64_t seq) {
  if (g->mb_prev_seq) {
    char k[96];
    key(k, sizeof k, g->mb_prev_seq, "verdict", -1);
    int rc = dist_store_delete_key(st, k, NULL);
    if (rc != DIST_OK)
      return dist__err_set(&g->err, dist__store_status(rc), "monitored_barrier: store failed: %s",
                           dist_store_errmsg(st));
  }
  g->mb_prev_seq = seq;
  return DIST_OK;
}

static int run_root(dist_pg *g, dist_store *st, uint64_t seq, int64_t timeout, bool all) {
  int *absent = dist__malloc(sizeof(int) * (size_t)g->info.size);
  if (!absent)
    return dist__err_set(&g->err, DIST_E_NOMEM, "out of memory");
  int n = 0;
  int rc = collect(g, st, seq, dist__deadline_ms(timeout), all, absent, &n);
  if (rc == DIST_OK && n == 0)
    rc = drop_prev_verdict(g, st, seq);
  char verdict[DIST_ERRMSG_LEN] = "ok";
  if (rc == DIST_OK && n) {
    char list[512];
    dist__format_ranks(absent, (size_t)n, list, sizeof list);
    snprintf(verdict, sizeof verdict, "%s %s failed to pass monitored_barrier in group %s "
             "(#%" PRIu64 ") within %" PRId64 " ms",
             n > 1 ? "Ranks" : "Rank", list, g->name, seq, timeout);
    rc = dist__err_set(&g->err, DIST_E_TIMEOUT, "%s", verdict);
    DIST_LOG(DEBUG, PG, "%s", verdict); // pg.c logs the report
  }
  char k[96];
  key(k, sizeof k, seq, "verdict", -1);
  int src = dist_store_set(st, k, verdict, strlen(verdict));
  if (src != DIST_OK && rc == DIST_OK)
    rc = dist__err_set(&g->err, dist__store_status(src),
                       "monitored_barrier: cannot release the others: %s", dist_store_errmsg(st));
  dist__free(absent);
  return rc;
}

static int run_member(dist_pg *g, dist_store *st, uint64_t seq, int64_t timeout) {
  char k[96];
  key(k, sizeof k, seq, "in", g->info.rank);
  int rc = dist_store_set(st, k, "1", 1);
  if (rc != DIST_OK)
    return dist__err_set(&g->err, dist__store_status(rc), "monitored_barrier: store failed: %s",
                         dist_store_errmsg(st));
  key(k, sizeof k, seq, "verdict", -1);
  const char *keys[1] = {k};
  /* Rank 0 answers by the timeout; a little grace covers its store trip. */
  rc = dist_store_wait(st, keys, 1, timeout + DIST_MB_VERDICT_GRACE_MS);
  if (rc == DIST_E_TIMEOUT)
    return dist__err_set(&g->err, DIST_E_TIMEOUT,
                         "monitored_barrier in group %s (#%" PRIu64 "): rank %d (rank 0 of "
                         "the group) did not answer within %" PRId64 " ms",
                         g->name, seq, g->global_ranks[0], timeout);
  void *v = NULL;
  size_t len = 0;
  if (rc == DIST_OK)
    rc = dist_store_get(st, k, &v, &len);
  if (rc != DIST_OK)
    return dist__err_set(&g->err, dist__store_status(rc), "monitored_barrier: store failed: %s",
                         dist_store_errmsg(st));
  if (len == 2 && !memcmp(v, "ok", 2)) {
    dist_free(v);
    return DIST_OK;
  }
  rc = dist__err_set(&g->err, DIST_E_TIMEOUT, "monitored_barrier: rank 0 found absent ranks: %s",
                     (char *)v);
  dist_free(v);
  return rc;
}

int dist_monitored_barrier(dist_pg *group, int64_t timeout_ms, bool wait_all_ranks) {
  dist_pg *g = dist__pg_resolve_op(group, DIST_OP_MONITORED_BARRIER,
                                   __builtin_return_address(0));
  if (!g)
    return DIST_E_INVAL;
  if (g == DIST_GROUP_NON_MEMBER)
    return DIST_OK;
  dist_store *st = dist__pg_store(g);
  if (!st)
    return dist__err_set(&g->err, DIST_E_NOTSUP, "monitored_barrier: group %s has no store",
                         g->name);
  dist_coll c;
  memset(&c, 0, sizeof c);
  c.kind = DIST_OP_MONITORED_BARRIER;
  c.root = 0;
  c.caller = __builtin_return_address(0);
  int64_t timeout = timeout_ms > 0 ? timeout_ms : g->timeout_ms;
  c.timeout_ms = timeout; /* the observers (the monitor's stall reports) measure against it */
  dist__pg_begin(g, &c);
  /* Internal groups number no operations, so their seq field is free to
   * count barriers and keep consecutive barriers' keys apart. */
  uint64_t seq = c.seq ? c.seq : dist__pg_next_seq(g);
  int rc = g->info.rank == 0 ? run_root(g, st, seq, timeout, wait_all_ranks)
                             : run_member(g, st, seq, timeout);
  return dist__pg_end(g, &c, rc);
}
