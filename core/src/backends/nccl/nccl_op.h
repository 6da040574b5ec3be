/* nccl_op.h - one CUDA operation's events, and the group's record of its
 * operations in flight (nccl_op.c).
 *
 * Each operation on the group's stream is bracketed as torch's
 * ProcessGroupNCCL does it:
 *   EventRecord(ready, caller's current stream)
 *   StreamWaitEvent(group stream, ready)   the input writes come first
 *   EventRecord(start, group stream)       the GPU reached the operation
 *   ...the NCCL calls...
 *   EventRecord(end, group stream)         the GPU finished it
 * start and end time the operation; their times are read against an
 * anchor, an event whose host time is known (recorded on an idle stream
 * and synchronized), so they land on dist_clock_ns()'s clock. */
#ifndef DIST_NCCL_OP_H
#define DIST_NCCL_OP_H

#include <pthread.h>
#include <stdatomic.h>

#include "nccl_map.h"

/* An event with a known host time; shared by the operations read against
 * it (refcounted: a newer one replaces it every DIST__NCCL_ANCHOR_S). */
typedef struct dist__nccl_anchor {
  _Atomic int refs;
  const dist__nccl_api *api;
  cudaEvent_t ev;
  int64_t ns;                   /* dist_clock_ns() when the GPU passed ev */
} dist__nccl_anchor;

#define DIST__NCCL_ANCHOR_S 10  /* float ms stay below 1 us of error */

typedef struct dist__nccl_op {
  _Atomic int refs;             /* the group's record + the work's, if any */
  const dist__nccl_api *api;
  cudaEvent_t ready, start, end;
  dist__nccl_anchor *anchor;
  uint64_t seq;
  int64_t launched_ns;
  dist_work *w;                 /* async: completed by the progress thread */
  int64_t deadline_ms;
  struct dist__nccl_op *next;   /* in flight, issue order */
  struct dist__nccl_op *next_async;
} dist__nccl_op;

/* A new anchor (idle stream s; blocks for one event, microseconds). */
int dist__nccl_anchor_new(const dist__nccl_api *api, cudaStream_t s, dist__nccl_anchor **out,
                          dist__errbuf *err);
void dist__nccl_anchor_unref(dist__nccl_anchor *a);

/* A new operation record with its three events (refs 1). */
int dist__nccl_op_new(const dist__nccl_api *api, dist__nccl_anchor *anchor, dist__nccl_op **out,
                      dist__errbuf *err);
void dist__nccl_op_unref(dist__nccl_op *op);
/* Records ready on caller, makes stream wait for it, records start. */
int dist__nccl_op_begin(dist__nccl_op *op, cudaStream_t caller, cudaStream_t stream,
                        dist__errbuf *err);
/* Records end on stream. */
int dist__nccl_op_end(dist__nccl_op *op, cudaStream_t stream, dist__errbuf *err);
/* The operation's GPU start and end (both 0 when unreadable); call once
 * end has completed. */
void dist__nccl_op_times(const dist__nccl_op *op, int64_t *start_ns, int64_t *end_ns);
/* dist_work_device_ops for an async operation's work (ctx: the op, which
 * takes one more reference for the work). */
extern const dist_work_device_ops dist__nccl_op_device;

/* What the group knows of its operations: those in flight (issue order)
 * and the last ones completed, for dist_pg_gpu_progress. */
#define DIST__NCCL_DONE_KEPT 64
typedef struct dist__nccl_track {
  pthread_mutex_t mu;
  dist__nccl_op *head, *tail;
  uint64_t last_launched;
  struct {
    uint64_t seq;
    int64_t launched_ns, start_ns, end_ns;
  } done[DIST__NCCL_DONE_KEPT];
} dist__nccl_track;

void dist__nccl_track_init(dist__nccl_track *t);
void dist__nccl_track_fini(dist__nccl_track *t);
/* Adds a launched op (the track holds the op's first reference). */
void dist__nccl_track_add(dist__nccl_track *t, dist__nccl_op *op);
/* Removes op once it ended (its GPU times, 0 when unknown, are kept for
 * queries) and drops the track's reference. */
void dist__nccl_track_done(dist__nccl_track *t, dist__nccl_op *op, int64_t start_ns,
                           int64_t end_ns);
/* The state of seq (dist_pg_gpu_progress); any thread, never blocks. */
int dist__nccl_track_query(dist__nccl_track *t, uint64_t seq, dist_gpu_progress *out);

#endif
