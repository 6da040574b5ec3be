/* tracer.c - the tracer as an observer: reads its environment at init,
 * opens the rank file, starts the writer and the clock offsets, installs
 * the crash handlers; on_event appends to the ring (tracer_record.c).
 *
 * Ends of a rank and what its trace keeps: fini (the default group
 * destroyed) drains the ring and marks it 'finished'; exit() with the group
 * live (a program that exits after a failure, the common case) drains it
 * from an atexit handler and marks it 'exited'; a fatal signal, distrun's
 * SIGTERM included, dumps the ring raw (tracer_crash.c). The atexit
 * handler is registered when the tracer is, before the process group
 * exists, so it runs after the monitor's (registered at init), whose
 * watchdog makes its last report (the diagnosis) as it stops. */
#define _GNU_SOURCE
#include "tracer_int.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <dist/internal/base.h>

static tracer *_Atomic current; /* the recording tracer, for flush/path */
/* Serialises the writer's end between fini and the atexit flush (exit()
 * on one thread while another destroys the group). */
static pthread_mutex_t end_mu = PTHREAD_MUTEX_INITIALIZER;

/* A positive integer from the environment, or def with one warning. */
static int64_t env_int(const char *name, int64_t def, int64_t min, int64_t max) {
  const char *v = getenv(name);
  if (!v || !*v)
    return def;
  char *end;
  long long x = strtoll(v, &end, 10);
  if (*end || x < min || x > max) {
    DIST_LOG(WARNING, TRACER, "%s=%s is not an integer in [%lld, %lld]; using %lld", name, v,
             (long long)min, (long long)max, (long long)def);
    return def;
  }
  return x;
}

static void tracer_free(tracer *t) {
  if (!t)
    return;
  tr_ring_fini(&t->ring);
  free(t);
}

static int tr_init(void **ctx, const dist_pg_info *def) {
  *ctx = NULL;
  const char *dir = getenv("DIST_TRACE");
  if (dir && !strcmp(dir, "0"))
    return DIST_OK; /* on_event sees ctx NULL: nothing recorded */
  const char *job = dist_get_job_id();
  tracer *t = calloc(1, sizeof *t);
  if (!t)
    return DIST_E_NOMEM;
  t->rank = def->global_rank;
  t->pid = getpid();
  t->world = def->size;
  atomic_init(&t->skew_ns, env_int("DIST_TRACE_TEST_SKEW_NS", 0, -(1ll << 50), 1ll << 50));
  t->commit_ms = env_int("DIST_TRACE_COMMIT_MS", 10, 1, 3600000);
  t->clock_period_s = env_int("DIST_TRACE_CLOCK_S", 60, 0, 86400);
  int64_t slots = env_int("DIST_TRACE_BUFFER", 65536, 64, 1ll << 26);
  snprintf(t->job_id, sizeof t->job_id, "%s", job ? job : "nojob");
  /* "1" means on, in the default place (distrun_trace.c reads it alike):
   * a user who turns the recorder on that way wants no directory "1". */
  bool dflt = !dir || !*dir || !strcmp(dir, "1");
  snprintf(t->dir, sizeof t->dir, "%s/%s", dflt ? "dist-trace" : dir, t->job_id);
  snprintf(t->path, sizeof t->path, "%s/rank-%d.db", t->dir, t->rank);
  snprintf(t->ring_path, sizeof t->ring_path, "%s/rank-%d.ring", t->dir, t->rank);
  snprintf(t->maps_path, sizeof t->maps_path, "%s/rank-%d.maps", t->dir, t->rank);
  if (tr_ring_init(&t->ring, (uint64_t)slots) != DIST_OK) {
    free(t);
    return DIST_E_NOMEM;
  }
  int rc = tr_writer_open(t, def);
  if (rc != DIST_OK) {
    tracer_free(t);
    return DIST_OK; /* logged; the job runs untraced */
  }
  tr_clock_start(t, dist_get_default_store());
  tr_crash_install(t);
  if (tr_writer_start(t) != DIST_OK) {
    tr_crash_remove();
    tr_writer_stop(t, "finished");
    tr_clock_stop(t);
    tracer_free(t);
    return DIST_E_SYS;
  }
  t->live = tr_live_start(t, env_int("DIST_OTLP_INTERVAL_MS", 1000, 10, 3600000),
                          env_int("DIST_OTLP_TIMEOUT_MS", 1000, 10, 600000),
                          env_int("DIST_OTLP_QUEUE", 4096, 1, 1 << 24));
  atomic_store(&current, t);
  DIST_LOG(DEBUG, TRACER, "tracing into %s (%lld ring slots)", t->path, (long long)slots);
  *ctx = t;
  return DIST_OK;
}

static void tr_on_event(void *ctx, const dist_event *ev) {
  if (__builtin_expect(ctx != NULL, 1))
    tr_record_event(ctx, ev);
}

static void tr_fini(void *ctx) {
  tracer *t = ctx;
  if (!t)
    return;
  atomic_store(&current, NULL);
  pthread_mutex_lock(&end_mu);
  tr_writer_stop(t, "finished"); /* first: its thread re-measures the clock offset */
  pthread_mutex_unlock(&end_mu);
  tr_clock_stop(t);
  tr_crash_remove();
  tracer_free(t);
}

static const dist_observer tracer_observer = {
    .abi_version = DIST_OBSERVER_ABI_VERSION,
    .name = "tracer",
    .event_mask = DIST_EV_ALL,
    .init = tr_init,
    .on_event = tr_on_event,
    .fini = tr_fini,
};

/* exit() with the default group live: what the ring holds goes to the file
 * (the last operations and reports of a rank that exits after a failure).
 * The writer is stopped, not freed: other threads may still record into
 * the ring until the process ends, and a later fini finds the file closed. */
static void at_exit_flush(void) {
  tracer *t = atomic_load(&current);
  if (!t || t->pid != getpid())
    return; /* not recording, or a forked child: the rank's file is its parent's */
  pthread_mutex_lock(&end_mu);
  tr_writer_stop(t, "exited");
  pthread_mutex_unlock(&end_mu);
}

static void register_at_exit(void) {
  if (atexit(at_exit_flush) != 0)
    DIST_LOG(WARNING, TRACER, "atexit failed: a rank that calls exit() may lose its last rows");
}

int dist_tracer_register(void) {
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, register_at_exit);
  return dist_observer_register(&tracer_observer);
}
int dist_tracer_unregister(void) { return dist_observer_unregister(&tracer_observer); }

int dist__tracer_flush_wait(tracer *t, int64_t timeout_ms);

int dist_tracer_flush(int64_t timeout_ms) {
  tracer *t = atomic_load(&current);
  if (!t)
    return dist__set_last_error(DIST_E_INVAL, "the tracer is not recording");
  return dist__tracer_flush_wait(t, timeout_ms);
}

int dist__tracer_test_set_skew(int64_t ns) {
  tracer *t = atomic_load(&current);
  if (!t)
    return DIST_E_INVAL;
  atomic_store_explicit(&t->skew_ns, ns, memory_order_relaxed);
  return DIST_OK;
}

const char *dist_tracer_path(void) {
  tracer *t = atomic_load(&current);
  return t ? t->path : NULL;
}
