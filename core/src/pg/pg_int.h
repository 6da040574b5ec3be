/* pg_int.h - the pg level: process groups and work handles inside core.
 *
 * pg.c is the only file that calls through a dist_backend_ops table; the
 * public collective functions (api/coll_api.c) build a dist_coll and hand
 * it to dist__pg_call, which validates it (validate.c). Observers hear of
 * each call once, for the outermost group (observer.c). The level knows
 * backends only through their tables (dist/backend.h): which backend a
 * name means is the backends level's (backends/backends.h). */
#ifndef DIST_PG_INT_H
#define DIST_PG_INT_H

#include <pthread.h>

#include <dist/internal/pg.h>

#include "base/dist_int.h"
#include "job/job.h"

struct dist_pg {
  const dist_backend_ops *ops;
  void *priv;                   /* ops->priv_size bytes */
  dist_pg_info info;            /* strings and ranks below */
  char name[128];
  char desc[128];
  char backend[64];             /* a name, or a device map (pg_mixed.c) */
  int *global_ranks;
  dist_device device_id;        /* the binding (cuda) or none (cpu) */
  dist_nccl_options nccl_opts;  /* zero: NCCL's defaults */
  int64_t timeout_ms;
  uint64_t seq;                 /* last issue ordinal used (dist_coll.ord,
                                   both kinds); written by the calling thread
                                   with dist__pg_next_seq, read by others
                                   (events on other threads) with
                                   dist__pg_seq */
  uint64_t coll_seq, p2p_seq;   /* last collective / point-to-point number
                                   (dist_coll.seq); the calling thread */
  struct dist__pair *pairs;     /* per (peer, tag, direction): last pair
                                   number (dist_coll.pair_seq); open
                                   addressing, n_pairs of cap_pairs used */
  size_t n_pairs, cap_pairs;
  bool internal;                /* helper group: no id, seq or events */
  bool wrapped;                 /* the inner group of a wrapper */
  bool registered;              /* in the list of live user groups */
  struct dist_pg *outer;        /* the wrapper around a wrapped group */
  struct dist_pg *inner;        /* the group a wrapper wraps */
  struct dist_pg *served;       /* a device map's inner group: the map
                                   group it runs operations for (events) */
  dist_store *store;            /* the group's private store (prefix) */
  uint64_t mb_prev_seq;         /* rank 0: the last monitored_barrier passed */
  dist__errbuf err;
  _Atomic int async_error;      /* sticky: abort, timeout, lost peer */
  /* The program destroys this group (dist__pg_destroy_one, and each of
   * dist__pg_destroy_all's and of a mesh's): the user operations its
   * destruction fails (still pending: never waited), the first one's kind
   * and number, for the job's cause. */
  _Atomic bool destroying;
  _Atomic int destroy_failed;
  int destroy_kind;
  uint64_t destroy_seq;
  const void *destroy_caller;   /* the program's destroy call (its return
                                   address: GROUP_DESTROYED's caller) */
  /* A failure the backend's fini found in an earlier call of the group
   * (dist__pg_fini_failure), which the destroy returns. */
  int fini_rc;
  struct dist_pg *next;         /* live user groups */
  struct dist_pg *next_handle;  /* every live group object (handle checks) */
};

typedef enum work_state {
  WORK_PENDING = 0,
  WORK_DONE = 1,
} work_state;

struct dist_work {
  dist_pg *pg;                  /* the group the user called (events) */
  dist_coll coll;               /* own copy; arrays live in arena */
  void *arena;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  _Atomic int state;            /* DONE: status and message readable */
  _Atomic bool released;        /* callbacks ran: waiters may return */
  int status;
  int src_rank;                 /* global rank of a recv's sender */
  char errmsg[DIST_ERRMSG_LEN];
  dist_work_callback cb;
  void *cb_arg;
  void *backend_slot;
  _Atomic int refs;             /* the user's handle + the backend's */
  _Atomic bool freed;           /* the user's handle was freed (a second
                                   free is ignored) */
  _Atomic bool dead;            /* the last reference went: only the shell
                                   is left. A call on a handle freed and
                                   released, or dead, is on a stale handle
                                   (work.c); a callback running at
                                   completion still reads a live work. */
  _Atomic bool started;
  bool quiet;                   /* a piece of a larger call: no events */
  struct dist__work_cb *cbs, **cbs_tail; /* dist_work_add_callback's, in order */
  /* ABI 4: a work that completes on a device (dist_backend_work_set_device);
   * set and read under mu. */
  const dist_work_device_ops *dev_ops;
  void *dev_ctx;
};

/* One callback added by dist_work_add_callback (future.c). */
typedef struct dist__work_cb {
  dist_work_callback fn;
  void *arg;
  struct dist__work_cb *next;
} dist__work_cb;

/* --- groups (pg.c) ------------------------------------------------------ */

/* The next sequence number of g: a plain load and an atomic store (no
 * locked instruction on the operation's path), so an event emitted on
 * another thread (a log line, a report) may read g->seq with dist__pg_seq
 * without a data race. */
static inline uint64_t dist__pg_next_seq(dist_pg *g) {
  uint64_t s = __atomic_load_n(&g->seq, __ATOMIC_RELAXED) + 1;
  __atomic_store_n(&g->seq, s, __ATOMIC_RELAXED);
  return s;
}
static inline uint64_t dist__pg_seq(const dist_pg *g) {
  return __atomic_load_n(&g->seq, __ATOMIC_RELAXED);
}
/* Numbers a user call c on g (user groups; the calling thread): ord, its
 * per-kind seq and, for a send or receive with a known peer, pair_seq
 * (backend.h, ABI 5). */
void dist__pg_number(dist_pg *g, dist_coll *c);
void dist__pg_pairs_free(dist_pg *g);

typedef struct dist__pg_spec {
  const char *backend;          /* the name the group shows (canonical:
                                   dist__backend_pg_new resolves it) */
  const dist_backend_ops *ops;  /* dist__pg_new: the table that runs it */
  void *arg;                    /* dist__pg_new: its init args' arg */
  const int *global_ranks;
  int size;
  int rank;                     /* this process's rank in the group */
  const char *name;             /* unique in the job */
  const char *desc;
  int64_t timeout_ms;
  unsigned flags;               /* DIST_GROUP_INTERNAL */
  int group_id;                 /* user groups: the id (groups.c counts) */
  dist_store *base_store;       /* the job store; the group prefixes it */
  dist_device device_id;        /* cuda: bound (dist_init_opts.device_id) */
  const dist_nccl_options *nccl_options;
  dist_pg *parent;              /* init args' parent (backend.h) */
} dist__pg_spec;

/* Creates (and for user groups: numbers, offers to the interposer,
 * announces) a group of spec->ops. Every member calls it. A name is
 * resolved into a table by backends/backends.h's dist__backend_pg_new. */
int dist__pg_new(const dist__pg_spec *spec, dist_pg **out);
/* Builds the group object and runs ops->init (a collective among the
 * members): no id, interposer or events (dist__pg_new, dist_pg_create). */
int dist__pg_build(const dist_backend_ops *ops, const dist__pg_spec *s, void *arg,
                   dist_store *borrowed, dist_pg **out);
/* Destroys one group (the wrapper chain included). Returns DIST_OK, or
 * the failure its backend's fini found in an earlier call (reported and
 * posted then: dist__pg_fini_failure); the group is gone either way. */
int dist__pg_free(dist_pg *g);
/* dist__pg_free for the program's destroy of a user group (one, all of
 * them, a mesh's): when that fails operations still pending on it (their
 * peers' fail too), this rank is the job's cause
 * (dist__cause_post_destroyed), unless a group had failed before (an
 * abort, a timeout, a lost peer): its pending operations follow from
 * that failure. caller: the program's call (its return address), which
 * the group's DIST_EV_GROUP_DESTROYED carries. */
int dist__pg_destroy_one(dist_pg *g, const void *caller);
/* From a backend's fini (the destroying thread): a failure of the earlier
 * call c (kind and seq) that only the destroy could find, message msg (a
 * small broadcast's root compares its readers' calls after it returned,
 * and no later call did). Reported as a failed call is (header, logged at
 * ERROR, the thread's message) and, for a desync, posted as the job's
 * cause; the destroy returns rc. */
void dist__pg_fini_failure(dist_pg *g, const dist_coll *c, int rc, const char *msg);
/* A user call built from other operations (byte blobs, monitored
 * barrier): begin numbers it and announces it, sub runs one piece on g's
 * slots (checked, but with the caller's sequence number and no events),
 * end records the outcome. */
void dist__pg_begin(dist_pg *g, dist_coll *c);
int dist__pg_sub(dist_pg *g, dist_coll *piece);
/* As dist__pg_sub for a RECV, reporting the sender's group rank. */
int dist__pg_sub_recv(dist_pg *g, dist_coll *piece, int *src_group_rank);
int dist__pg_end(dist_pg *g, const dist_coll *c, int rc);
/* The store of g (a wrapper uses its inner group's). */
dist_store *dist__pg_store(dist_pg *g);
/* Puts the report header of status.h on msg (a failure of c on g) and logs
 * the report once at ERROR; nothing for internal groups or a message that
 * already has a header. Any thread (reads only g's immutable identity). */
void dist__pg_report(dist_pg *g, int rc, const dist_coll *c, char *msg, size_t len);
/* Whether g is a group object that exists (any kind); never dereferences g. */
bool dist__pg_handle_live(const dist_pg *g);
/* Whether g is a live user group. */
bool dist__pg_is_live(const dist_pg *g);
/* Runs c on g: local checks (validate.c), sequence number, events, sync or
 * async. */
int dist__pg_call(dist_pg *g, dist_coll *c, dist_work **out);
/* Refuses c on g before it starts (rc, g's message set): logged as a
 * failure, and observers hear DIST_EV_OP_REJECTED with the number it would
 * have taken; it takes none (c->seq 0). Returns rc. */
int dist__pg_reject(dist_pg *g, dist_coll *c, int rc);
/* The default group is dist__pg_default (dist/internal/pg.h); init sets
 * it. dist__pg_resolve: the group a NULL argument means. */
void dist__pg_set_default(dist_pg *g);
/* DIST_E_INVAL with "fn: <g> is not a live process group ..." */
int dist__pg_stale(const char *fn, const dist_pg *g);
/* g itself, or the default group for NULL; NULL with a message when not
 * initialised. Non-members pass through unchanged. */
dist_pg *dist__pg_resolve(dist_pg *g);
/* Dead handles (pg_dead.c): pg.c notes each user group it destroys (its
 * handle, never dereferenced after) and forgets an address a new group
 * takes. dist__pg_resolve_op is dist__pg_resolve for a public operation
 * of kind k called from caller: a handle that is not live is refused
 * (NULL, DIST_E_INVAL with the thread's message naming the group this
 * rank destroyed) and observers hear DIST_EV_OP_REJECTED on that group
 * (id -1 when it is not known), with the number the call would have
 * taken, so the verdict names this call and its line. */
void dist__pg_dead_note(const dist_pg *g);
void dist__pg_dead_forget(const dist_pg *g);
dist_pg *dist__pg_resolve_op(dist_pg *g, dist_op_kind k, const void *caller);
/* Translations; -1 when not a member. */
int dist__pg_group_rank_of(const dist_pg *g, int global_rank);
/* Every live user group, for destroy-all (pg.c keeps the list), each as
 * dist__pg_destroy_one destroys it; the first failure of dist__pg_free. */
int dist__pg_destroy_all(const void *caller);
/* User group ids: every rank takes one per group created in the job, in
 * the same order, members or not (groups.c; init resets the count). */
int dist__pg_take_ids(int n);
void dist__pg_reset_ids(void);
int dist__pg_local_count(uint32_t h, int *k);
/* The GPU progress of g's operation seq (dist_pg_gpu_progress without the
 * argument checks): through wrappers to the slot that answers. */
int dist__pg_gpu_progress(dist_pg *g, uint64_t seq, dist_gpu_progress *out);

/* The group that runs g's operations on device type t: g itself (through
 * wrappers) when its backend reaches t, the inner group a dispatching
 * group's device_group slot names (once made), else NULL. */
dist_pg *dist__pg_device_group(dist_pg *g, dist_device_type t);
/* The one device type of c's tensors in *dev (-1: no tensors);
 * DIST_E_INVAL with a message on g when they are on two (validate.c). */
int dist__coll_device(dist_pg *g, const dist_coll *c, int *dev);

/* --- a group's failures as the job's cause (pg_cause.c) ---------------- */

/* Posts a failure of a call on g (c may be NULL) as the job's cause when
 * it is one (DIST_E_DESYNC); msg is the call's message. Once per failing
 * call: pg.c and work.c call it where a failure is recorded. */
void dist__cause_post_failure(dist_pg *g, const dist_coll *c, int rc, const char *msg);
/* FNV-1a over a member list: the names of local groups (api/groups.c) and
 * the members' part of every group's store prefix (pg.c). */
uint32_t dist__pg_hash_ranks(const int *r, int n);
/* The program aborted group g (why: what its peers read): the job's cause,
 * DIST_E_ABORTED, naming this rank. */
void dist__cause_post_abort(dist_pg *g, const char *why);
/* The program destroyed group g with n of its operations pending (the
 * first: kind, seq), which fails them here and on its peers: the job's
 * cause, DIST_E_ABORTED, naming this rank, the group and that operation
 * (field "destroyed"). */
void dist__cause_post_destroyed(dist_pg *g, int n, int kind, uint64_t seq);
/* Claims DIST_KEY_FIRST_EXIT for this rank unless another rank did
 * (exit handler, and the destruction of the default group). */
void dist__cause_claim_first_exit(void);
/* Registers (once per process) the exit handler that claims
 * DIST_KEY_FIRST_EXIT when this rank exits with its default group live;
 * init calls it. */
void dist__cause_watch_exit(void);

/* --- DIST_NAN_CHECK (nan_check.c) -------------------------------------- */

/* Whether DIST_NAN_CHECK=1 was set at init (read by dist__pg_call: one
 * relaxed load and one branch when off). */
extern _Atomic bool dist__nan_check_on;
/* Reads DIST_NAN_CHECK (0 or 1; anything else warns and means 0). */
void dist__nan_check_init(void);
/* DIST_E_INVAL with a message on g (rank, operation and the sequence
 * number it would take, tensor, first bad index) when a floating-point
 * input of c holds NaN or Inf; the message is logged and posted as the
 * job's cause. */
int dist__nan_check_coll(dist_pg *g, const dist_coll *c);

/* --- logs by debug level (pg_log.c) ------------------------------------ */

/* At DIST_DEBUG=INFO and above: the INFO block with g's configuration. */
void dist__pg_log_created(const dist_pg *g);
/* "connections: 22 tcp (point-to-point 15, between host leaders 7); hosts
 * 8; transport hier" for a cpu group (or a group wrapped around one);
 * false for other backends. Recorded in the trace as a 'log' event at the
 * group's creation (pg.c, observer.c). */
bool dist__pg_conn_summary(const dist_pg *g, char *buf, size_t len);
/* A line about backend group self for the trace (a 'log' event of the
 * user's group it runs, as the connection summary is): the cpu backend's
 * connections made when first needed. Any thread; nothing when no
 * observer listens or the group is internal. */
void dist__pg_note(dist_pg *self, const char *line);
/* The TRACE line of one operation; call only when TRACE is on for COLL. */
void dist__pg_log_op(const dist_pg *g, const dist_coll *c);

/* --- work (work.c) ------------------------------------------------------ */

/* A work holding a deep copy of c (tensor and split arrays; data is
 * borrowed). refs = 2: the caller's handle and the backend's. */
int dist__work_new(dist_pg *g, const dist_coll *c, dist_work **out);
/* Drops one reference; the last releases the work's resources and keeps
 * its shell among the last few freed (work.c), marked freed. */
void dist__work_unref(dist_work *w);
/* Whether w is a stale handle: freed by the program (dist_work_free) and
 * released by the backend too; then the last error is DIST_E_INVAL naming
 * fn, the call made on it. */
bool dist__work_stale(dist_work *w, const char *fn);
/* Completes w (state, message, events, callback, condvar). */
void dist__work_complete(dist_work *w, int rc, int src_global, const char *msg);
/* A work that is already complete with rc (non-member groups). */
int dist__work_new_done(dist_pg *g, int rc, dist_work **out);

/* --- observers (observer.c) --------------------------------------------- */

extern _Atomic int dist__obs_active;  /* number of live observers */
/* DIST_EV_OP_GPU for c on user group g (cuda.c's dist_backend_gpu_times). */
void dist__obs_emit_gpu(dist_pg *g, const dist_coll *c, int64_t start_ns, int64_t end_ns);
/* An event about a group that is gone (pg_dead.c: a call on a destroyed
 * group's handle): info describes it (global_ranks NULL), pg is NULL. */
void dist__obs_emit_gone(const dist_pg_info *info, dist_event_kind kind, const dist_coll *c,
                         int status, const char *msg);
void dist__obs_emit(dist_pg *g, dist_event_kind kind, const dist_coll *c, int status,
                    int peer, const char *msg);
static inline bool dist__obs_on(void) {
  return atomic_load_explicit(&dist__obs_active, memory_order_relaxed) != 0;
}
/* init / fini of every observer around the default group's life. */
void dist__obs_start(dist_pg *default_group);
void dist__obs_stop(void);

/* --- validation (validate.c) -------------------------------------------- */

/* Local checks of c against g (counts, shapes, dtypes, roots, reduce op,
 * device); DIST_E_INVAL with a message on g. */
int dist__validate(dist_pg *g, const dist_coll *c);

#endif
