/* test_shm_util.h - what the shared-memory engine's tests share: a
 * hand-built dist__cpu_group over a file or TCP store (the backend builds
 * it in production), the engine around it, and running one operation.
 * Plain C for forked ranks (no Criterion here). */
#ifndef DIST_TEST_SHM_UTIL_H
#define DIST_TEST_SHM_UTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backends/cpu/shm.h"
#include "mp.h"

typedef struct shm_t {
  dist_store *store;
  dist__cpu_group g;
  dist__shm *shm;
  uint64_t seq;
  int64_t timeout_ms;
  dist__errbuf err;
} shm_t;

/* Fills e->g from the store: every rank publishes its pid. */
static inline int shm_t_group(const dist_test_ctx *ctx, shm_t *e) {
  dist__cpu_group *g = &e->g;
  g->rank = g->global_rank = ctx->rank;
  g->size = ctx->world;
  g->peers = calloc((size_t)ctx->world, sizeof *g->peers);
  g->global_ranks = calloc((size_t)ctx->world, sizeof(int));
  g->same_host = true;
  g->timeout_ms = e->timeout_ms;
  snprintf(g->name, sizeof g->name, "test-group");
  snprintf(g->job_id, sizeof g->job_id, "test%d", (int)getppid());
  char key[32], host[DIST_CPU_HOSTLEN];
  gethostname(host, sizeof host);
  host[sizeof host - 1] = '\0';
  int pid = (int)getpid();
  snprintf(key, sizeof key, "pid/%d", ctx->rank);
  int rc = dist_store_set(e->store, key, &pid, sizeof pid);
  for (int r = 0; r < ctx->world && rc == DIST_OK; r++) {
    void *v = NULL;
    size_t len = 0;
    snprintf(key, sizeof key, "pid/%d", r);
    rc = dist_store_get(e->store, key, &v, &len);
    if (rc == DIST_OK && len == sizeof(int))
      memcpy(&g->peers[r].pid, v, sizeof(int));
    dist_free(v);
    g->peers[r].global_rank = g->global_ranks[r] = r;
    snprintf(g->peers[r].host, sizeof g->peers[r].host, "%s", host);
    snprintf(g->peers[r].host_id, sizeof g->peers[r].host_id, "test-host");
  }
  return rc;
}

/* Store (file, or TCP when tcp is set), group and engine. e starts
 * zeroed (timeout_ms may be preset). */
static inline int shm_t_open(const dist_test_ctx *ctx, shm_t *e, bool tcp) {
  if (!e->timeout_ms)
    e->timeout_ms = 20000;
  int rc = tcp ? dist_test_tcp_store(ctx, &e->store) : dist_test_file_store(ctx, &e->store);
  if (rc != DIST_OK)
    return FAIL(ctx, "store: %s", dist_last_errmsg());
  if ((rc = shm_t_group(ctx, e)) != DIST_OK)
    return FAIL(ctx, "pid exchange: %s", dist_store_errmsg(e->store));
  dist__err_clear(&e->err);
  rc = dist__shm_create(&e->g, e->store, dist__now_ms() + 20000, &e->shm, &e->err);
  if (rc != DIST_OK)
    return FAIL(ctx, "dist__shm_create -> %s: %s", dist_status_name(rc), e->err.msg);
  return 0;
}

static inline void shm_t_close(shm_t *e) {
  dist__shm_destroy(e->shm);
  dist_store_destroy(e->store);
  free(e->g.peers);
  free(e->g.global_ranks);
}

/* Runs c (its seq is the next user sequence number) with a deadline
 * timeout_ms from now; the message stays in e->err. */
static inline int shm_t_run_for(shm_t *e, dist_coll *c, int64_t timeout_ms) {
  dist__err_clear(&e->err);
  c->seq = ++e->seq;
  c->timeout_ms = timeout_ms;
  dist__cpu_op op = {c, dist__now_ms() + timeout_ms, &e->err, -1};
  return dist__shm_run(e->shm, &op);
}

static inline int shm_t_run(shm_t *e, dist_coll *c) { return shm_t_run_for(e, c, 20000); }

/* A 1-d CPU tensor. */
static inline dist_tensor shm_t_tensor(void *data, dist_dtype dt, int64_t n) {
  return dist_tensor_1d(data, dt, n);
}

#endif
