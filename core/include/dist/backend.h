/* backend.h - the backend vtable and the group interposer (two of core's
 * three seams; observer.h holds the third).
 *
 * A process group is a struct of function pointers with one uniform
 * signature per operation (nng's protocol ops, curl's filter chain):
 *
 *     int op(void *priv, const dist_coll *c, dist_work *w);
 *
 * Core allocates priv (ops->priv_size bytes, zeroed) and hands it to every
 * slot. Only core/src/pg/pg.c calls through the table.
 *
 * Sync and async. w == NULL: the slot runs the operation to completion and
 * returns its status (message through dist_backend_set_error). w != NULL:
 * the slot starts the operation and returns DIST_OK, or an error if it could
 * not start it (then w is discarded); it later calls dist_backend_work_done
 * exactly once, from any thread. Operations on one group must complete in
 * the order they were issued; different groups progress independently.
 *
 * Threads: slots are called from the group's caller thread (one at a time),
 * with no core lock held, and may block up to c->timeout_ms. abort may be
 * called from any thread, concurrently with a slot, and must not block.
 *
 * The descriptor. Ranks in a dist_coll are GROUP ranks (pg.c translated the
 * caller's global ranks). Which tensors each kind uses:
 *   SEND inputs[0]            RECV outputs[0] (root = DIST_ANY_SOURCE ok)
 *   BROADCAST, ALL_REDUCE, REDUCE: inputs[0] == outputs[0] (in place)
 *   ALL_GATHER inputs[0] -> outputs[0..size)
 *   ALL_GATHER_INTO_TENSOR inputs[0] -> outputs[0] (size x numel)
 *   GATHER inputs[0] -> outputs[0..size) on root (n_outputs 0 elsewhere)
 *   SCATTER inputs[0..size) on root -> outputs[0]
 *   REDUCE_SCATTER inputs[0..size) -> outputs[0]
 *   REDUCE_SCATTER_TENSOR inputs[0] (size x numel) -> outputs[0]
 *   ALL_TO_ALL inputs[0..size) -> outputs[0..size)
 *   ALL_TO_ALL_SINGLE inputs[0] -> outputs[0]; in_splits/out_splits rows
 *     along dim 0 (NULL = even), n_splits == size
 *   BARRIER no tensors; BATCH_P2P p2p[0..n_p2p)
 * Slots shared by two kinds: all_gather (ALL_GATHER, ALL_GATHER_INTO_TENSOR),
 * reduce_scatter (both forms), all_to_all (both forms). A NULL slot makes
 * the operation DIST_E_NOTSUP. The byte-blob operations and
 * monitored_barrier have no slot: pg.c builds them from broadcast,
 * all_gather, gather, scatter, send and recv, and the store.
 *
 * Versioning: slots are appended, never reordered; abi_version grows with
 * each append (SQLite's iVersion). Changes:
 *   1  first version.
 *   2  the interposer gains dist_set_group_precreate_hook: a hook that sees
 *      each new user group before its members connect (the checking layer
 *      compares the ranks' views of the group there, so groups created in
 *      a different order fail at once instead of timing out in the
 *      connect). The vtable is unchanged; backends built for 1 load.
 *   3  dist_backend_init_args gains device_id, nccl_options and parent
 *      (appended; core fills them, a backend built for 2 never reads them):
 *      the device the group is bound to (dist_init_opts.device_id), NCCL's
 *      config, and the group a new one derives from (for ncclCommSplit).
 *      A device map ("cpu:cpu,cuda:nccl") makes a group whose inner
 *      groups, one per device type, are built from these same args. The
 *      vtable is unchanged; backends built for 1 or 2 load.
 *   4  CUDA streams and GPU progress (dist/cuda.h). The vtable gains the
 *      gpu_progress slot (appended; core reads it only from tables whose
 *      abi_version is at least 4, so backends built for 1-3 load and
 *      answer DIST_E_NOTSUP). Backends gain dist_backend_work_set_device
 *      (a work that completes on a device: dist_work_wait makes the
 *      caller's stream wait instead of blocking the host) and
 *      dist_backend_gpu_times (emits DIST_EV_OP_GPU, observer ABI 4).
 *   5  Questions core used to answer by comparing a table with one of its
 *      own are slots now (appended; read only from tables whose
 *      abi_version is at least 5, so backends built for 1-4 load):
 *      transport (how the group moves data, for the INFO block of a new
 *      group) and device_group (the inner group a dispatching group runs
 *      a device's operations on, for groups split from it).
 *   6  two numbers per group (torch's Flight Recorder keeps collective_seq_id
 *      and p2p_seq_id apart): dist_coll.seq counts a group's collectives
 *      from 1 and, separately, its point-to-point operations
 *      (dist_op_is_p2p) from 1, so one collective has one number on every
 *      member whatever point-to-point calls ranks made between. dist_coll
 *      gains (appended; core fills them) ord, the group's issue ordinal
 *      over both kinds (what seq was before: unique per group, for a
 *      backend's or an observer's own bookkeeping; gpu_progress takes it),
 *      and pair_seq, the per-pair number of a send or receive. The vtable
 *      is unchanged; backends built for 1-5 load.
 *   7  connections (appended; read only from tables whose abi_version is
 *      at least 7): the connections a group holds, for the INFO log and the
 *      trace, instead of core recognising the cpu backend's table.
 *   8  dist_coll gains part_of and the DIST_COLL_PIECE flag (appended; core
 *      fills them): the operations a byte-blob collective runs as (a size
 *      exchange, then the data) name the user's call, so a checking layer
 *      compares and reports BROADCAST_BYTES, not its inner BROADCAST of an
 *      int64. Transports run the piece's own kind as before. And
 *      dist_backend_init_args gains colls_only (appended; core fills it):
 *      a group that runs collectives only (a checking layer's helper), for
 *      which the cpu backend makes no point-to-point connections when its
 *      members share a host. The vtable is unchanged; backends built for
 *      1-7 load.
 *   9  dist_coll gains parent (appended; core fills it): a piece that runs
 *      one entry of a list collective's lists (an all_gather whose outputs
 *      differ in size runs as one broadcast per entry, a reduce_scatter
 *      whose inputs do as one reduce per entry: api/uneven.c) points at
 *      the call the program made, whole lists and all, so a checking
 *      layer compares that call once, as it compares the same call run in
 *      one piece on a rank whose list is even, and a transport names the
 *      call and the entry, not a broadcast or a reduce, when ranks
 *      disagree. The vtable is unchanged; backends built for 1-8 load. */
#ifndef DIST_BACKEND_H
#define DIST_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <dist/cuda.h>
#include <dist/export.h>
#include <dist/pg.h>
#include <dist/store.h>
#include <dist/tensor.h>

DIST_EXTERN_C_BEGIN

#define DIST_BACKEND_ABI_VERSION 9

/* X(enum suffix, name) ; append only. */
#define DIST_OP_MAP(X)                                      \
  X(SEND, "SEND")                                           \
  X(RECV, "RECV")                                           \
  X(BROADCAST, "BROADCAST")                                 \
  X(ALL_REDUCE, "ALL_REDUCE")                               \
  X(REDUCE, "REDUCE")                                       \
  X(ALL_GATHER, "ALL_GATHER")                               \
  X(ALL_GATHER_INTO_TENSOR, "ALL_GATHER_INTO_TENSOR")       \
  X(GATHER, "GATHER")                                       \
  X(SCATTER, "SCATTER")                                     \
  X(REDUCE_SCATTER, "REDUCE_SCATTER")                       \
  X(REDUCE_SCATTER_TENSOR, "REDUCE_SCATTER_TENSOR")         \
  X(ALL_TO_ALL, "ALL_TO_ALL")                               \
  X(ALL_TO_ALL_SINGLE, "ALL_TO_ALL_SINGLE")                 \
  X(BARRIER, "BARRIER")                                     \
  X(BATCH_P2P, "BATCH_P2P")                                 \
  X(MONITORED_BARRIER, "MONITORED_BARRIER")                 \
  X(BROADCAST_BYTES, "BROADCAST_BYTES")                     \
  X(ALL_GATHER_BYTES, "ALL_GATHER_BYTES")                   \
  X(GATHER_BYTES, "GATHER_BYTES")                           \
  X(SCATTER_BYTES, "SCATTER_BYTES")                         \
  X(SEND_BYTES, "SEND_BYTES")                               \
  X(RECV_BYTES, "RECV_BYTES")

typedef enum dist_op_kind {
#define DIST_OP_ENUM_(e, name) DIST_OP_##e,
  DIST_OP_MAP(DIST_OP_ENUM_)
#undef DIST_OP_ENUM_
  DIST_OP_COUNT_
} dist_op_kind;

DIST_API const char *dist_op_name(dist_op_kind kind);

/* One send or receive of a batch (peer is a group rank). */
typedef struct dist_coll_p2p {
  bool is_send;
  dist_tensor tensor;
  int peer;
  int tag;
} dist_coll_p2p;

#define DIST_COLL_ASYNC 1u    /* the caller asked for a work handle */
#define DIST_COLL_WAITED 2u   /* with ASYNC: the public call waits for that work itself
                                 (dist_recv), so its thread is inside the library until
                                 the operation ends, as in a synchronous call */
#define DIST_COLL_PIECE 4u    /* ABI 8: one piece of a public call that runs as several
                                 operations (the byte-blob collectives' size exchange
                                 and data); dist_coll.part_of names that call */

/* The operation descriptor (Gloo's options struct): everything a backend, a
 * wrapper or a tracer needs to know about one call. */
typedef struct dist_coll {
  dist_op_kind kind;
  uint32_t flags;
  const dist_tensor *inputs;
  size_t n_inputs;
  const dist_tensor *outputs;
  size_t n_outputs;
  dist_redop redop;
  int root;                  /* group rank: root, src, dst or peer; -1 none */
  int tag;
  const int64_t *in_splits;  /* ALL_TO_ALL_SINGLE */
  const int64_t *out_splits;
  size_t n_splits;
  const dist_coll_p2p *p2p;  /* BATCH_P2P */
  size_t n_p2p;
  uint64_t seq;              /* per group and kind from 1: collectives and
                                point-to-point operations (dist_op_is_p2p)
                                count apart (ABI 5); 0 on internal groups */
  int64_t timeout_ms;        /* the group's timeout; a monitored barrier's
                                event carries the call's own */
  const void *caller;        /* return address of the public call */
  /* ABI 5. */
  uint64_t ord;              /* the group's issue ordinal over both kinds
                                from 1 (unique per group); 0 internal */
  uint64_t pair_seq;         /* SEND, RECV, SEND_BYTES, RECV_BYTES with a
                                known peer: from 1, the n-th from this rank
                                to the peer (a send) or at this rank from
                                it (a receive) in the group, tags apart, so
                                the n-th send from A to B with tag T is the
                                n-th receive at B from A with tag T (the
                                transport matches them so); 0 otherwise
                                (a batch, a receive from any source) */
  /* ABI 8. */
  dist_op_kind part_of;      /* with DIST_COLL_PIECE: the user's call this
                                operation is a piece of (BROADCAST_BYTES for
                                its size exchange, a BROADCAST), which a
                                checking layer compares and reports; the
                                piece's own kind is what a transport runs */
  /* ABI 9. */
  const struct dist_coll *parent; /* with DIST_COLL_PIECE, where the piece runs
                                one entry of a list collective's lists: the
                                call as the program made it (its whole
                                lists; root is the entry's index, the group
                                rank it comes from or goes to); NULL for the
                                pieces that stand alone (a blob's). Valid
                                while the piece runs */
} dist_coll;

/* Whether kind is point-to-point (SEND, RECV, SEND_BYTES, RECV_BYTES,
 * BATCH_P2P): numbered apart from the collectives (dist_coll.seq). */
static inline bool dist_op_is_p2p(dist_op_kind kind) {
  return kind == DIST_OP_SEND || kind == DIST_OP_RECV || kind == DIST_OP_SEND_BYTES ||
         kind == DIST_OP_RECV_BYTES || kind == DIST_OP_BATCH_P2P;
}

/* The list collective whose entry c->root piece c runs (ABI 9: an uneven
 * all_gather's broadcast, an uneven reduce_scatter's reduce), NULL when c
 * is not such a piece. */
static inline const struct dist_coll *dist_coll_list_call(const struct dist_coll *c) {
  return (c->flags & DIST_COLL_PIECE) ? c->parent : NULL;
}

/* Formats a one-line description ("ALL_REDUCE float32[1024] op=SUM") into
 * buf; returns buf. */
DIST_API char *dist_coll_describe(const dist_coll *c, char *buf, size_t len);

/* What a backend's init receives. */
typedef struct dist_backend_init_args {
  int rank;                  /* rank in the group */
  int size;                  /* group size */
  const int *global_ranks;   /* size entries: group rank -> global rank */
  int global_rank;           /* this process's global rank */
  dist_store *store;         /* store private to this group (keys are
                                prefixed); borrowed for the group's life,
                                from the caller thread only */
  int64_t timeout_ms;
  const char *group_name;    /* unique per job; same on every member */
  int group_id;              /* user-visible id, -1 for internal groups */
  const char *job_token;     /* the job's data-plane token ("" = none) */
  bool internal;             /* a helper group (DIST_GROUP_INTERNAL) */
  void *arg;                 /* backend-specific (a wrapper's inner group) */
  /* ABI 3. */
  dist_device device_id;     /* DIST_DEVICE_CUDA: bind to it and connect at
                                once; else unbound (connect lazily) */
  const dist_nccl_options *nccl_options; /* NULL: NCCL's defaults */
  dist_pg *parent;           /* the group this one derives from when every
                                rank of parent takes part in its creation
                                (new_group, split_group); else NULL */
  /* ABI 8. */
  bool colls_only;           /* the group runs no point-to-point operation
                                (DIST_GROUP_COLLECTIVES_ONLY: a checking
                                layer's helper), so a backend may skip the
                                connections only point-to-point needs */
} dist_backend_init_args;

/* Capability bits. */
#define DIST_CAP_CPU 1u          /* tensors in host memory */
#define DIST_CAP_CUDA 2u         /* tensors in CUDA memory */
#define DIST_CAP_REPORTS_START 4u /* calls dist_backend_work_start itself */

typedef int (*dist_backend_op_fn)(void *priv, const dist_coll *c, dist_work *w);

typedef struct dist_backend_ops {
  unsigned abi_version;      /* DIST_BACKEND_ABI_VERSION it was built with */
  const char *name;          /* "cpu", ... */
  uint32_t caps;
  size_t priv_size;          /* bytes core allocates for the backend */

  /* Connects the group's members; blocks up to args->timeout_ms (a
   * collective over the store: every member calls it). self is the group
   * being built, for dist_backend_set_error. */
  int (*init)(void *priv, const dist_backend_init_args *args, dist_pg *self);
  /* Releases everything; joins the backend's threads. Work still pending
   * fails with DIST_E_ABORTED; with nothing pending, peers notice nothing
   * (a rank that destroys a finished group does not abort the others).
   * Caller thread. */
  void (*fini)(void *priv);
  /* Fails pending and later operations with DIST_E_ABORTED. Any thread;
   * must not block. */
  void (*abort)(void *priv, const char *reason);

  dist_backend_op_fn send;
  dist_backend_op_fn recv;
  dist_backend_op_fn batch_p2p;
  dist_backend_op_fn broadcast;
  dist_backend_op_fn all_reduce;
  dist_backend_op_fn reduce;
  dist_backend_op_fn all_gather;
  dist_backend_op_fn gather;
  dist_backend_op_fn scatter;
  dist_backend_op_fn reduce_scatter;
  dist_backend_op_fn all_to_all;
  dist_backend_op_fn barrier;

  /* Sticky error of the backend (DIST_OK if none). Any thread. */
  int (*async_error)(void *priv);

  /* ABI 4. Where the group's operation seq (the user group's issue
   * ordinal, dist_coll.ord since ABI 5) is on the GPU (dist/cuda.h); DIST_E_NOTSUP when this backend
   * does not know it. Any thread (the monitor's watchdog), concurrently
   * with the slots; must not block (event queries only). NULL: DIST_E_NOTSUP
   * (a wrapper without it is passed through to its inner group). */
  int (*gpu_progress)(void *priv, uint64_t seq, dist_gpu_progress *out);

  /* ABI 5. How the group moves data ("shm", "tcp"), shown in the INFO
   * block of a new group; NULL (or a NULL answer): "n/a". Any thread;
   * must not block. */
  const char *(*transport)(void *priv);
  /* ABI 5. A group that runs each device's operations on an inner group
   * (a device map): that group for device type t, or NULL while it is not
   * made. NULL slot: the group runs its operations itself, and is its own
   * group for each device its caps name. Any thread; must not block. */
  dist_pg *(*device_group)(void *priv, dist_device_type t);

  /* ABI 7. The connections the group holds, as one line for the INFO log
   * and the trace ("connections: 4 tcp (point-to-point 3, between host
   * leaders 1); hosts 2; transport hier"); false (or a NULL slot): none to
   * tell. Any thread; must not block. */
  bool (*connections)(void *priv, char *buf, size_t len);
} dist_backend_ops;

/* --- for backend implementations ---------------------------------------- */

/* Registers a backend under name (used by dist_init_process_group and
 * dist_new_group). ops must stay valid for the process's life. Shared
 * objects named in DIST_BACKEND_PLUGINS are loaded at init and their
 * `int dist_backend_plugin_init(void)` is called to register themselves. */
DIST_API int dist_register_backend(const char *name, const dist_backend_ops *ops);

/* Records the message of a failing synchronous slot on its group (first
 * failure of a call wins). Returns rc. */
DIST_API int dist_backend_set_error(dist_pg *self, int rc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Reports that a peer (group rank) is gone; emits DIST_EV_PEER_LOST. */
DIST_API void dist_backend_peer_lost(dist_pg *self, int peer, const char *why);

/* The work's own copy of the descriptor (stable until completion). */
DIST_API const dist_coll *dist_work_coll(const dist_work *w);
/* A pointer-sized slot for the backend's own use. */
DIST_API void **dist_work_backend_slot(dist_work *w);
/* Marks an async work as started (emits DIST_EV_OP_STARTED); backends
 * without DIST_CAP_REPORTS_START get it emitted at submission. */
DIST_API void dist_backend_work_start(dist_work *w);
/* Completes an async work with rc and, when rc != DIST_OK, a message.
 * src_group_rank: the sender for a recv (else -1). Once per work; any
 * thread. */
DIST_API void dist_backend_work_done(dist_work *w, int rc, int src_group_rank,
                                     const char *msg);

/* ABI 4. A work that completes on a device: ops->stream_wait(ctx, stream)
 * makes stream (the waiter's current stream, dist/cuda.h) wait for the
 * work's end on the device, without blocking the host; dist_work_wait calls
 * it on the waiting thread instead of blocking, from the moment this is
 * set. ops->release(ctx), when not NULL, runs once when the work is freed
 * (any thread; the group may be gone by then, so ctx must stand alone).
 * Call it at most once per work, before dist_backend_work_done. */
typedef struct dist_work_device_ops {
  int (*stream_wait)(void *ctx, void *stream);
  void (*release)(void *ctx);
} dist_work_device_ops;
DIST_API void dist_backend_work_set_device(dist_work *w, const dist_work_device_ops *ops,
                                           void *ctx);
/* ABI 4. Emits DIST_EV_OP_GPU for c (an operation of self, which may be the
 * inner group of a device map or a wrapper: the event is on the user group
 * it serves, once) with its GPU start and end on dist_clock_ns()'s clock.
 * Any thread (a progress thread); never blocks. */
DIST_API void dist_backend_gpu_times(dist_pg *self, const dist_coll *c, int64_t start_ns,
                                     int64_t end_ns);

/* --- for parts (checking layer, monitor, tracer) ------------------------ */

/* Posts why the job fails to the job's store (the default group's store),
 * for the launcher: distrun waits a bounded moment for it when a rank
 * fails, exits 10 for DIST_E_DESYNC and 11 for DIST_E_TIMEOUT (other codes
 * keep its usual classification) and prints report once, last. The first
 * cause posted in the job wins (compare_set under the key "dist/cause";
 * core/include/dist/internal/launch.h documents the value: status, the posting global
 * rank, the report). Core posts DIST_E_DESYNC from the backends' own size
 * checks itself, once per failing call and at every debug level, and
 * DIST_E_INVAL for an input DIST_NAN_CHECK=1 refuses; the
 * checking layer posts its desync reports and the monitor its hang
 * diagnoses (DIST_E_TIMEOUT) through this call.
 *
 * status: a DIST_E_* code (else DIST_E_INVAL); report: NUL-terminated text,
 * copied (at most 16 KiB are kept). Returns DIST_OK also when there is no
 * job store (before init or after destroy: nothing is posted) and when the
 * store cannot be reached (logged at WARNING): a report that cannot be
 * posted is never the caller's error. Any thread; blocks at most about
 * 2 s (its own connection to the store, bounded whatever the store's
 * timeout), typically one round trip. */
DIST_API int dist_post_cause(int status, const char *report);

/* What a cause names, for the launcher's verdict (distrun stores it in
 * trace.db's verdict row and distview shows it): every field is optional.
 * Strings are copied; tabs and newlines in them become spaces. */
typedef struct dist_cause_info {
  const int *culprits;    /* global ranks the report blames (not the ranks
                             merely blocked by them) */
  size_t n_culprits;
  int group_id;           /* user-visible group id, -1 none */
  const char *group_name; /* its description ("tp", "default"), NULL none */
  int op;                 /* dist_op_kind of the operation, -1 none */
  uint64_t seq;           /* its sequence number in the group, 0 none */
  const char *field;      /* what differs ("dtype", "operation"), NULL */
  const char *site;       /* the culprit's call site, "train.c:88 in step()" (of a
                             rank that left: the call it never made) */
} dist_cause_info;

/* An info with nothing set (group_id and op -1). */
DIST_API dist_cause_info dist_cause_info_none(void);
/* dist_post_cause with what the report names in a form a program reads;
 * info may be NULL (then it is dist_post_cause). Added in libdist 0.9:
 * the cause key's value gains a line of fields (dist/internal/launch.h), which
 * readers of the older form skip. A collective's DIST_E_DESYNC (info names
 * its group, op and field) whose report compares two ranks alone, one line each ("  rank 2: ..." and "  rank 4: ...",
 * status.h), is one pair's view: it is also kept beside the others of its
 * group, so the launcher can name the rank that every reported pair
 * includes, whichever pair posted first (dist/internal/launch.h). */
DIST_API int dist_post_cause_info(int status, const dist_cause_info *info, const char *report);

/* --- the group interposer (for wrappers such as the checking layer) ----- */

/* Creates a group from a backend table, for wrappers and tests; args as a
 * backend's init receives them (store borrowed). The new group takes the
 * user-visible identity in args (group_id). */
DIST_API int dist_pg_create(const dist_backend_ops *ops,
                            const dist_backend_init_args *args, dist_pg **out);
/* Runs c on group g's own slots without assigning a sequence number or
 * emitting events (a wrapper forwarding to its inner group). w, when
 * non-NULL, is the outer group's work: its completion is reported on the
 * outer group. A failure's message stays on g (dist_pg_errmsg); the wrapper
 * relays it with dist_backend_set_error. */
DIST_API int dist_pg_forward(dist_pg *g, const dist_coll *c, dist_work *w);
/* The info of a group (stable for its life). */
typedef struct dist_pg_info {
  int group_id;              /* -1 for internal groups */
  const char *name;          /* unique per job */
  const char *desc;
  const char *backend;
  int rank;                  /* in the group */
  int size;
  const int *global_ranks;
  int global_rank;
  int64_t timeout_ms;
  bool internal;
} dist_pg_info;
DIST_API const dist_pg_info *dist_pg_get_info(dist_pg *g);

/* fn may replace each new user group with a wrapping one (the checking
 * layer registers here; at DIST_DEBUG=DETAIL every group init, new_group,
 * split_group, new_subgroups or a mesh creates comes back wrapped). It
 * receives the freshly created inner group; on success *out is the group
 * handed to the user, which owns inner from then on (destroying out
 * destroys inner through the wrapper's fini). Returning an error fails the
 * creation. Internal groups are never offered. NULL removes the hook. */
typedef int (*dist_group_wrapper_fn)(void *arg, dist_pg *inner, dist_pg **out);
DIST_API void dist_set_group_wrapper(dist_group_wrapper_fn fn, void *arg);

/* fn sees each new user group (init's default group, new_group,
 * split_group, new_subgroups, a mesh) on each member before the members
 * connect: planned holds the identity the group will have (id, name,
 * description, members, this rank); its pointers live for the call. A
 * non-zero return fails the creation with that status (message through
 * dist_backend_set_error(NULL, ...)). Caller thread; it may use the job's
 * store (dist_get_default_store) but no group. Internal groups are never
 * offered. NULL removes the hook. (ABI 2.) */
typedef int (*dist_group_precreate_fn)(void *arg, const dist_pg_info *planned);
DIST_API void dist_set_group_precreate_hook(dist_group_precreate_fn fn, void *arg);

DIST_EXTERN_C_END

#endif
