/* tracer_clock.c - each rank's clock offset against rank 0, through the
 * job's store, so merged timelines line up across hosts.
 *
 * DESIGN. Rank 0 runs a responder thread (`dist-clock-0`) on its own store
 * handle: it pops requests "R id" from the queue trace/clk/q and answers
 * each by setting trace/clk/a/R/id to its dist_clock_ns(). Rank R stamps t1,
 * pushes, waits for the answer t2, stamps t3: offset = t2 - (t1 + t3) / 2,
 * the error bounded by half the round trip. Of 5 samples it keeps the one
 * with the smallest round trip. Measured at init (caller thread, the
 * default store) and every DIST_TRACE_CLOCK_S by the writer thread (its
 * own handle); a failed measurement is logged at DEBUG and keeps the last
 * offset. Each measurement is a ring record (events kind clock_offset,
 * ranks.clock_offset_ns). */
#define _GNU_SOURCE
#include "tracer_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/dist_int.h"

#define CLK_QUEUE "trace/clk/q"
#define CLK_SAMPLES 5

static void *responder_main(void *arg) {
  tracer *t = arg;
  pthread_setname_np(pthread_self(), "dist-clock-0");
  while (!atomic_load(&t->resp_stop)) {
    void *val = NULL;
    size_t len = 0;
    int rc = dist_store_queue_pop(t->resp_store, CLK_QUEUE, true, &val, &len);
    int64_t now = dist_clock_ns() + tr_skew(t);
    if (rc == DIST_E_TIMEOUT)
      continue;
    if (rc != DIST_OK)
      break; /* the store is gone: the job is ending */
    int r = -1;
    unsigned id = 0;
    if (len == 4 && !memcmp(val, "stop", 4)) {
      dist_free(val);
      break;
    }
    if (sscanf(val, "%d %u", &r, &id) == 2 && r > 0) {
      char key[64], ans[32];
      snprintf(key, sizeof key, "trace/clk/a/%d/%u", r, id);
      int n = snprintf(ans, sizeof ans, "%lld", (long long)now);
      dist_store_set(t->resp_store, key, ans, (size_t)n);
    }
    dist_free(val);
  }
  return NULL;
}

/* One measurement on store s: the best of CLK_SAMPLES samples. */
static int measure(tracer *t, dist_store *s, int64_t *offset, int64_t *rtt) {
  *rtt = INT64_MAX;
  for (int k = 0; k < CLK_SAMPLES; k++) {
    unsigned id = t->clock_gen++;
    char req[48], key[64];
    int n = snprintf(req, sizeof req, "%d %u", t->rank, id);
    snprintf(key, sizeof key, "trace/clk/a/%d/%u", t->rank, id);
    int64_t t1 = dist_clock_ns() + tr_skew(t);
    if (dist_store_queue_push(s, CLK_QUEUE, req, (size_t)n) != DIST_OK)
      return DIST_E_STORE;
    void *val = NULL;
    size_t len = 0;
    if (dist_store_get(s, key, &val, &len) != DIST_OK)
      return DIST_E_STORE;
    int64_t t3 = dist_clock_ns() + tr_skew(t);
    int64_t t2 = strtoll(val, NULL, 10);
    dist_free(val);
    dist_store_delete_key(s, key, NULL);
    if (t3 - t1 < *rtt) {
      *rtt = t3 - t1;
      *offset = t2 - (t1 + (t3 - t1) / 2);
    }
  }
  return DIST_OK;
}

int tr_clock_start(tracer *t, dist_store *store) {
  t->next_clock_ns = dist_clock_ns() + t->clock_period_s * 1000000000;
  if (!store)
    return DIST_E_INVAL;
  if (t->rank == 0) {
    tr_record_clock(t, 0, 0);
    if (t->world < 2 || dist_store_clone(store, &t->resp_store) != DIST_OK)
      return DIST_OK;
    if (dist_store_clone(store, &t->wake_store) != DIST_OK) {
      dist_store_destroy(t->resp_store);
      t->resp_store = NULL;
      return DIST_OK;
    }
    dist_store_set_timeout(t->resp_store, 1000); /* how often it checks resp_stop */
    if (pthread_create(&t->responder, NULL, responder_main, t) == 0)
      t->responder_started = true;
    return DIST_OK;
  }
  int64_t offset = 0, rtt = -1;
  int64_t old = dist_store_get_timeout(store);
  dist_store_set_timeout(store, 5000);
  int rc = measure(t, store, &offset, &rtt);
  dist_store_set_timeout(store, old);
  if (rc != DIST_OK) {
    DIST_LOG(DEBUG, TRACER, "clock offset against rank 0 not measured: %s",
             dist_store_errmsg(store));
    return rc;
  }
  tr_record_clock(t, offset, rtt);
  if (t->clock_period_s > 0 && dist_store_clone(store, &t->clk_store) == DIST_OK)
    dist_store_set_timeout(t->clk_store, 2000);
  return DIST_OK;
}

void tr_clock_remeasure(tracer *t) {
  t->next_clock_ns = dist_clock_ns() + t->clock_period_s * 1000000000;
  int64_t offset, rtt;
  if (measure(t, t->clk_store, &offset, &rtt) == DIST_OK)
    tr_record_clock(t, offset, rtt);
  else
    DIST_LOG(DEBUG, TRACER, "clock re-measurement failed: %s", dist_store_errmsg(t->clk_store));
}

void tr_clock_stop(tracer *t) {
  if (t->responder_started) {
    atomic_store(&t->resp_stop, true);
    dist_store_queue_push(t->wake_store, CLK_QUEUE, "stop", 4);
    t->responder_started = false;
    pthread_join(t->responder, NULL); /* else within the handle's 1 s timeout */
  }
  dist_store_destroy(t->wake_store);
  t->wake_store = NULL;
  dist_store_destroy(t->resp_store);
  t->resp_store = NULL;
  dist_store_destroy(t->clk_store);
  t->clk_store = NULL;
}
