/* cpu_common.c - helpers the CPU backend's engines share (cpu.h). */
#include <pthread.h>
#include <stdio.h>

#include "base/report.h"
#include "cpu.h"

const char *dist__cpu_peer_name(const dist__cpu_group *g, int r, char *buf, size_t len) {
  if (r < 0 || r >= g->size) {
    snprintf(buf, len, "group rank %d (not a member)", r);
    return buf;
  }
  const dist__cpu_peer *p = &g->peers[r];
  snprintf(buf, len, "rank %d (host %s, pid %d)", p->global_rank, p->host, (int)p->pid);
  return buf;
}

int dist__cpu_store_get_all(dist_store *st, const char *const *keys, size_t n,
                            int64_t timeout_ms, void **vals, size_t *lens, int *missing) {
  *missing = -1;
  int64_t saved = dist_store_get_timeout(st);
  dist_store_set_timeout(st, timeout_ms > 0 ? timeout_ms : 1);
  int rc = DIST_OK;
  if (dist_store_has_extended_api(st)) {
    rc = dist_store_multi_get(st, keys, n, vals, lens);
  } else {
    for (size_t i = 0; i < n && rc == DIST_OK; i++)
      rc = dist_store_get(st, keys[i], &vals[i], &lens[i]);
    for (size_t i = 0; rc != DIST_OK && i < n; i++) {
      dist_free(vals[i]);
      vals[i] = NULL;
    }
  }
  dist_store_set_timeout(st, saved);
  for (size_t i = 0; rc != DIST_OK && i < n; i++) {
    bool there = true;
    if (dist_store_check(st, &keys[i], 1, &there) == DIST_OK && !there) {
      *missing = (int)i;
      break;
    }
  }
  return rc;
}

int dist__cpu_mark_broken(dist__cpu_group *g, int rc, const char *msg) {
  int expected = DIST_OK;
  /* The message is written before the status is published, so a reader
   * that sees broken_rc also sees the whole message; writers that lose the
   * race leave the first one alone. */
  static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
  pthread_mutex_lock(&lock);
  if (atomic_load(&g->broken_rc) == DIST_OK) {
    snprintf(g->broken_msg, sizeof g->broken_msg, "%s", msg);
    atomic_compare_exchange_strong(&g->broken_rc, &expected, rc);
  }
  pthread_mutex_unlock(&lock);
  DIST_LOG(DEBUG, PG, "group %s broken: %s", g->name, msg);
  return rc;
}

void dist__cpu_peer_lost(dist__cpu_group *g, int r, const char *why) {
  if (r < 0 || r >= g->size || !g->peers || atomic_exchange(&g->peers[r].lost, true))
    return;
  if (g->on_peer_lost)
    g->on_peer_lost(g->on_peer_lost_arg, r, why);
}

int dist__cpu_check_state(dist__cpu_group *g, dist__errbuf *err) {
  if (__builtin_expect(atomic_load_explicit(&g->aborted, memory_order_acquire), 0))
    return dist__err_set(err, DIST_E_ABORTED, "group %s was aborted: %s", g->name,
                         g->abort_reason);
  int rc = atomic_load_explicit(&g->broken_rc, memory_order_acquire);
  if (__builtin_expect(rc != DIST_OK, 0))
    return dist__err_set(err, rc, "group %s is unusable after an earlier failure: %s",
                         g->name, g->broken_msg);
  return DIST_OK;
}

uint8_t dist__cpu_part_of(const dist_coll *c) {
  const dist_coll *call = dist_coll_list_call(c); /* a list entry's piece (ABI 9) */
  if (call)
    return (uint8_t)(call->kind + 1);
  return (c->flags & DIST_COLL_PIECE) && !dist_op_is_p2p(c->part_of) ? (uint8_t)(c->part_of + 1)
                                                                      : 0;
}

bool dist__cpu_part_listed(unsigned part_of) {
  return part_of && part_of <= DIST_OP_COUNT_ && dist__report_list_name((int)part_of - 1);
}

int dist__cpu_part_call(unsigned part_of, int kind) {
  return part_of && part_of <= DIST_OP_COUNT_ ? (int)part_of - 1 : kind;
}

const char *dist__cpu_op_label(const dist_coll *c, char *buf, size_t len) {
  snprintf(buf, len, "%s #%llu", dist_op_name((dist_op_kind)dist__cpu_part_call(
                                     dist__cpu_part_of(c), c->kind)),
           (unsigned long long)c->seq);
  return buf;
}
