/* monitored_barrier.c - a host-side barrier over the group's store, at every
 * debug level and on every backend (it never touches the data plane).
 *
 * Rank 0 of the group waits for every other rank's arrival key until the
 * timeout, then publishes the verdict; the others publish their arrival and
 * wait for the verdict. Absent ranks are named: the first one, or all of
 * them with wait_all_ranks. A rank that never hears back from rank 0 says
 * so. Keys carry the call's sequence number so consecutive barriers never
 * see each other's keys. */
#include <inttypes.h>
#include <stdio.h>

#include "pg_int.h"

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
      return dist__err_set(&g->err, DIST_E_STORE, "monitored_barrier: store failed: %s",
                           dist_store_errmsg(st));
    }
  }
  return DIST_OK;
}

static int run_root(dist_pg *g, dist_store *st, uint64_t seq, int64_t timeout, bool all) {
  int *absent = dist__malloc(sizeof(int) * (size_t)g->info.size);
  if (!absent)
    return dist__err_set(&g->err, DIST_E_NOMEM, "out of memory");
  int n = 0;
  int rc = collect(g, st, seq, dist__deadline_ms(timeout), all, absent, &n);
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
  if (dist_store_set(st, k, verdict, strlen(verdict)) != DIST_OK && rc == DIST_OK)
    rc = dist__err_set(&g->err, DIST_E_STORE, "monitored_barrier: cannot release the others: %s",
                       dist_store_errmsg(st));
  dist__free(absent);
  return rc;
}

static int run_member(dist_pg *g, dist_store *st, uint64_t seq, int64_t timeout) {
  char k[96];
  key(k, sizeof k, seq, "in", g->info.rank);
  if (dist_store_set(st, k, "1", 1) != DIST_OK)
    return dist__err_set(&g->err, DIST_E_STORE, "monitored_barrier: store failed: %s",
                         dist_store_errmsg(st));
  key(k, sizeof k, seq, "verdict", -1);
  const char *keys[1] = {k};
  /* Rank 0 answers by the timeout; a little grace covers its store trip. */
  int rc = dist_store_wait(st, keys, 1, timeout + 2000);
  if (rc == DIST_E_TIMEOUT)
    return dist__err_set(&g->err, DIST_E_TIMEOUT,
                         "monitored_barrier in group %s (#%" PRIu64 "): rank %d (rank 0 of "
                         "the group) did not answer within %" PRId64 " ms",
                         g->name, seq, g->global_ranks[0], timeout);
  void *v = NULL;
  size_t len = 0;
  if (rc != DIST_OK || dist_store_get(st, k, &v, &len) != DIST_OK)
    return dist__err_set(&g->err, DIST_E_STORE, "monitored_barrier: store failed: %s",
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
  dist_pg *g = dist__pg_resolve(group);
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
  dist__pg_begin(g, &c);
  int64_t timeout = timeout_ms > 0 ? timeout_ms : g->timeout_ms;
  /* Internal groups number no operations, so their seq field is free to
   * count barriers and keep consecutive barriers' keys apart. */
  uint64_t seq = c.seq ? c.seq : ++g->seq;
  int rc = g->info.rank == 0 ? run_root(g, st, seq, timeout, wait_all_ranks)
                             : run_member(g, st, seq, timeout);
  return dist__pg_end(g, &c, rc);
}
