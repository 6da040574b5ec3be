/* tracer_int.h - internals of the runtime tracer (the observer, its ring,
 * writer thread, clock offsets and crash handlers). */
#ifndef DIST_TRACER_INT_H
#define DIST_TRACER_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include <dist/dist.h>
#include <dist/observer.h>
#include <dist/tracer.h>

#include "reader_int.h"
#include "ring.h"

typedef struct tracer {
  tr_ring ring;
  int rank;
  int world;
  pid_t pid;                /* the process that owns the rank (not a forked child) */
  _Atomic int64_t skew_ns;  /* test hook: DIST_TRACE_TEST_SKEW_NS, and
                               dist__tracer_test_set_skew mid-job */
  char dir[768];            /* $DIST_TRACE/<job id> */
  char path[1024];          /* rank-<R>.db */
  char ring_path[1024];     /* rank-<R>.ring (crash dump) */
  char maps_path[1024];     /* rank-<R>.maps (its /proc/self/maps, with the dump) */
  char job_id[64];
  int64_t commit_ms;
  int64_t clock_period_s;
  /* writer thread */
  sqlite3 *db;
  tr_sink *sink;
  pthread_t writer;
  bool writer_started;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  bool stop;
  uint64_t tail;            /* writer-only: next ring index to read */
  /* writes that fail (a full disk): writer-only */
  char reserve_path[1024];  /* rank-<R>.reserve: space kept to record the failure */
  uint64_t write_lost;      /* records drained but not written */
  bool write_failing;       /* the last commit failed */
  int64_t retry_ns;         /* ... the next is tried then */
  bool lost_unnoted;        /* write_lost is not in the file yet */
  char end_state[16];       /* set at stop: the last cycles commit it with their rows */
  char write_err[256];      /* the first failure */
  _Atomic uint64_t committed; /* ring index committed up to */
  /* clock offsets */
  dist_store *clk_store;    /* the writer's clone (re-measurement) */
  dist_store *resp_store;   /* rank 0's responder clone */
  dist_store *wake_store;   /* rank 0: wakes the responder at the end */
  pthread_t responder;
  bool responder_started;
  _Atomic bool resp_stop;
  int64_t next_clock_ns;
  uint32_t clock_gen;
  void *live;               /* tracer_live.c, or NULL */
} tracer;

/* This rank's clock is dist_clock_ns() + tr_skew(t): 0 but in tests. */
static inline int64_t tr_skew(tracer *t) {
  return atomic_load_explicit(&t->skew_ns, memory_order_relaxed);
}

/* Test hook: from now on the recording tracer's clock runs ns ahead of
 * the host's (a clock that jumps, as if adjusted); the next periodic
 * re-measurement (DIST_TRACE_CLOCK_S) finds the new offset. DIST_E_INVAL
 * when the tracer is not recording. */
int dist__tracer_test_set_skew(int64_t ns);

/* tracer_record.c: events -> ring records (the hot path). */
void tr_record_event(tracer *t, const dist_event *ev);
void tr_record_clock(tracer *t, int64_t offset_ns, int64_t rtt_ns);
/* An events row of a tracer kind (TR_KIND_*) with a message, through the
 * ring like any record (any thread). */
void tr_record_note(tracer *t, unsigned kind, int32_t status, const char *text);

/* tracer_write.c: the writer thread and the rank file. */
int tr_writer_open(tracer *t, const dist_pg_info *def);
int tr_writer_start(tracer *t);
/* Drains everything, marks the rank's end_state ('finished' at fini,
 * 'exited' at exit() with the group live), closes the file. */
void tr_writer_stop(tracer *t, const char *end_state);

/* tracer_clock.c: offsets against rank 0 through the job's store. */
int tr_clock_start(tracer *t, dist_store *store);
void tr_clock_remeasure(tracer *t); /* writer thread */
void tr_clock_stop(tracer *t);

/* tracer_live.c: live OTLP export (DIST_OTLP_ENDPOINT); NULL when off. */
void *tr_live_start(tracer *t, int64_t interval_ms, int64_t timeout_ms, int64_t queue);
/* Joins it (cancelling a request in flight), exports what is left, says
 * what it sent and dropped; returns the operations dropped. */
uint64_t tr_live_stop(void *live, char *summary, size_t len);

/* tracer_crash.c: raw ring dump at a fatal signal, then the old handler. */
void tr_crash_install(tracer *t);
void tr_crash_remove(void);

#endif
