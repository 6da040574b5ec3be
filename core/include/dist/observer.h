/* observer.h - the observer seam: tracer and monitor subscribe to events.
 *
 * The shape is NCCL's profiler plugin: a named table with an event mask and
 * init / on_event / fini. Observers are registered process-wide. init runs
 * once, when the default group is created, with that group's info (the
 * process's identity in the job); fini runs when the default group is
 * destroyed. Every event after that, for every user group, reaches
 * on_event.
 *
 * pg.c emits each event once per user call, for the outermost group (a
 * wrapped call is one event, not two). Internal helper groups emit nothing
 * and take no group id or sequence number.
 *
 * Threads: on_event runs on whichever thread the event happens on (the
 * caller's, a backend's progress thread, a watchdog), possibly concurrently.
 * It must not block and must never call back into a group (nng's rule);
 * copy what you need. Pointers in the event live only for the call.
 *
 * Versioning: fields are appended; DIST_OBSERVER_ABI_VERSION grows.
 *   1  first version.
 *   2  cheaper per operation. A synchronous call (and an asynchronous one
 *      whose backend does not report its start) emits DIST_EV_OP_ISSUED,
 *      enqueued and started in one event, instead of ENQUEUED then
 *      STARTED. An observer registered with abi_version 1, or whose
 *      event_mask lacks DIST_EV_OP_ISSUED, still receives the pair (same
 *      t_ns), so every ABI-1 observer keeps working unchanged. t_ns is
 *      dist_clock_ns(): CLOCK_MONOTONIC's epoch read from the invariant
 *      TSC when there is one (9 ns instead of 22 here). The default
 *      group's DIST_EV_GROUP_CREATED now reaches every observer (it used
 *      to be emitted before observers started).
 *   3  observers may act. dist_event.pg is the user group the event is on,
 *      for dist_abort_group and dist_observer_emit_report from an
 *      observer's own thread (never from on_event, which still must not
 *      block or call into a group); it is valid until that group's
 *      DIST_EV_GROUP_DESTROYED. dist_observer_set_message, called inside
 *      on_event for OP_FAILED / OP_TIMED_OUT, replaces the message the
 *      operation fails with (the monitor puts its diagnosis there).
 *      DIST_EV_STATS (appended to the map) carries per-group statistics:
 *      dist_event.stats / n_stats rows, message the printed block; parts
 *      emit it with dist_observer_emit_stats.
 *   4  DIST_EV_OP_GPU: an operation's GPU start and end.
 *   5  DIST_EV_STRAGGLER (appended to the map): a member of a group arrived
 *      last at its collectives clearly more often than chance (the
 *      monitor's verdict, made by the group's rank 0 at DETAIL). peer is
 *      the straggler's global rank, seq the last collective compared,
 *      message the printed warning; parts emit it with
 *      dist_observer_emit_straggler.
 *   6  seq counts a group's collectives and, apart, its point-to-point
 *      operations (dist_op_is_p2p; backend ABI 5), so one collective has
 *      one seq on every member. An operation's event carries coll->ord,
 *      the group's issue ordinal over both kinds (unique per group), for
 *      observers that key operations by one number, and coll->pair_seq,
 *      a send's or receive's number within its pair. No field of
 *      dist_event changed.
 *   7  DIST_EV_OP_REJECTED (appended to the map): a call refused before it
 *      started (a root or peer outside the group, a NULL tensor, sizes
 *      that disagree, a dtype the reduce op cannot take). It took no number:
 *      seq is the one it would have taken, coll the call as made without
 *      its buffers (kind, root, tag, flags, caller; no tensors, splits or
 *      p2p list: they may be what was wrong), status the code, message the
 *      reason. Nothing follows it; a rank that ends on the error is named
 *      at that call (the monitor). A call on the handle of a group this
 *      process destroyed is refused so too, on that group (its id and
 *      names; pg and group->global_ranks NULL: the group is gone), and one
 *      on a handle never created on no group (group_id -1).
 *   8  dist_observer_emit_group_stats: DIST_EV_STATS for the group a
 *      dist_pg_info describes, also inside its DIST_EV_GROUP_DESTROYED
 *      (pg NULL then): the statistics a group's end completes reach the
 *      observers (the trace's stats table) as its straggler verdict does.
 *      No field of dist_event changed. */
#ifndef DIST_OBSERVER_H
#define DIST_OBSERVER_H

#include <stdint.h>

#include <dist/backend.h>
#include <dist/export.h>

DIST_EXTERN_C_BEGIN

#define DIST_OBSERVER_ABI_VERSION 8

/* X(enum suffix, name) ; append only. */
#define DIST_EVENT_MAP(X)                 \
  X(GROUP_CREATED, "group_created")       \
  X(GROUP_DESTROYED, "group_destroyed")   \
  X(OP_ENQUEUED, "enqueued")              \
  X(OP_STARTED, "started")                \
  X(OP_COMPLETED, "completed")            \
  X(OP_FAILED, "failed")                  \
  X(OP_TIMED_OUT, "timed_out")            \
  X(PEER_LOST, "peer_lost")               \
  X(DESYNC_REPORT, "desync_report")       \
  X(STALL_REPORT, "stall_report")         \
  X(DIAGNOSIS, "diagnosis")               \
  X(LOG, "log")                           \
  X(OP_ISSUED, "issued")  /* ABI 2: enqueued and started at once */ \
  X(STATS, "stats")       /* ABI 3: statistics of a group */ \
  X(OP_GPU, "gpu")        /* ABI 4: an operation's GPU start and end */ \
  X(STRAGGLER, "straggler") /* ABI 5: a rank that arrives last */ \
  X(OP_REJECTED, "rejected") /* ABI 7: a call refused before it started */

typedef enum dist_event_kind {
#define DIST_EVENT_ENUM_(e, name) DIST_EV_##e,
  DIST_EVENT_MAP(DIST_EVENT_ENUM_)
#undef DIST_EVENT_ENUM_
  DIST_EV_COUNT_
} dist_event_kind;

#define DIST_EV_BIT(kind) (1u << (kind))
#define DIST_EV_ALL ((1u << DIST_EV_COUNT_) - 1u)

DIST_API const char *dist_event_name(dist_event_kind kind);

/* One row of a DIST_EV_STATS block: one operation kind of one group over
 * the window since the previous block (tracer/SCHEMA.md, table stats). */
typedef struct dist_stats_row {
  int op;                      /* dist_op_kind */
  uint64_t count;
  uint64_t bytes;
  int64_t p50_ns, p99_ns;      /* latency, start to completion, this rank */
  int straggler_rank;          /* global rank most often last; -1: none */
  int64_t lateness_ns;         /* its mean lateness behind the first */
} dist_stats_row;

typedef struct dist_event {
  dist_event_kind kind;
  int group_id;                /* user group id (0 = default) */
  int rank;                    /* global rank of this process */
  int group_rank;
  uint64_t seq;                /* the group's sequence number (ops): per
                                  kind since ABI 6 (coll->ord: both) */
  int64_t t_ns;                /* dist_clock_ns() (CLOCK_MONOTONIC epoch) */
  const dist_coll *coll;       /* ops: the whole descriptor; else NULL */
  const dist_pg_info *group;   /* the group (always set) */
  int status;                  /* FAILED / TIMED_OUT / PEER_LOST / REJECTED: the code */
  int peer;                    /* PEER_LOST: global rank; else -1 */
  const char *message;         /* reports, failures, log lines; else NULL */
  const void *caller;          /* ops: return address of the public call;
                                  GROUP_DESTROYED: of the program's destroy
                                  call (NULL when the library ends it) */
  /* ABI 3 */
  dist_pg *pg;                 /* the user group (see the ABI 3 note) */
  const dist_stats_row *stats; /* STATS: n_stats rows; else NULL */
  size_t n_stats;
  char *op_msg_;               /* private: dist_observer_set_message */
  /* ABI 4 */
  int64_t gpu_start_ns;        /* OP_GPU: on dist_clock_ns()'s clock */
  int64_t gpu_end_ns;
} dist_event;

typedef struct dist_observer {
  unsigned abi_version;        /* DIST_OBSERVER_ABI_VERSION */
  const char *name;
  uint32_t event_mask;         /* DIST_EV_BIT(...) of the events wanted */
  /* Once per process, at default-group creation. A non-zero return
   * unregisters the observer (logged), it never fails the init. */
  int (*init)(void **ctx, const dist_pg_info *default_group);
  void (*on_event)(void *ctx, const dist_event *ev);
  void (*fini)(void *ctx);
} dist_observer;

/* The clock of t_ns: CLOCK_MONOTONIC nanoseconds, read from a calibrated
 * invariant TSC where the CPU has one (else clock_gettime). Any thread. */
DIST_API int64_t dist_clock_ns(void);

/* Registers obs (which must stay valid until unregistered). At most
 * DIST_MAX_OBSERVERS. When the default group already exists, init runs at
 * once. */
#define DIST_MAX_OBSERVERS 8
DIST_API int dist_observer_register(const dist_observer *obs);
/* Calls fini (if init ran) and removes obs. Not concurrently with events
 * of the same observer: call it while no operation is in flight. */
DIST_API int dist_observer_unregister(const dist_observer *obs);

/* Emits a report event (DESYNC_REPORT, STALL_REPORT, DIAGNOSIS) on a user
 * group, for parts such as the checking layer and the monitor. */
DIST_API void dist_observer_emit_report(dist_pg *group, dist_event_kind kind,
                                        int status, const char *message);

/* ABI 3. Inside on_event of an OP_FAILED or OP_TIMED_OUT event: the
 * operation fails with message instead (truncated to the library's message
 * size); later observers and the caller see it. DIST_E_INVAL for any other
 * event. */
DIST_API int dist_observer_set_message(const dist_event *ev, const char *message);

/* ABI 3. Emits DIST_EV_STATS on a user group: n rows (copied by observers
 * that keep them) and the printed block. */
DIST_API void dist_observer_emit_stats(dist_pg *group, const dist_stats_row *rows, size_t n,
                                       const char *message);

/* ABI 8. dist_observer_emit_stats for the group that group describes
 * (dist_pg_info of a live group, or the dist_event.group of its
 * GROUP_DESTROYED event, inside that event's on_event); seq is the
 * group's last operation number, dist_event.pg NULL. Any thread. */
DIST_API void dist_observer_emit_group_stats(const dist_pg_info *group, uint64_t seq,
                                             const dist_stats_row *rows, size_t n,
                                             const char *message);

/* ABI 5. Emits DIST_EV_STRAGGLER for the group that group describes
 * (dist_pg_get_info of a live group, or the dist_event.group of its
 * GROUP_DESTROYED event, inside that event's on_event: a group's last
 * verdict is made as it ends). straggler_rank is a global rank, seq the
 * last collective compared, message the printed warning. Any thread. */
DIST_API void dist_observer_emit_straggler(const dist_pg_info *group, uint64_t seq,
                                           int straggler_rank, const char *message);

DIST_EXTERN_C_END

#endif
