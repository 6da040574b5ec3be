/* pg.h - process groups, collectives and work handles (torch.distributed).
 *
 * Conventions, as in torch:
 *  - group NULL means the default group (made by dist_init_process_group).
 *  - root/src/dst/peer arguments are GLOBAL ranks (ranks of the default
 *    group), or DIST_GROUP_RANK(r) for rank r of the call's group (see
 *    "group ranks" below); dist_recv reports the sender as a global rank.
 *  - the last argument, dist_work **work, chooses the mode: NULL runs the
 *    operation synchronously (it returns when done); non-NULL starts it and
 *    returns a handle to wait on (torch's async_op=True). An operation that
 *    fails its checks before it starts returns the error at once and leaves
 *    *work NULL.
 *  - a rank that is not a member of a group gets DIST_GROUP_NON_MEMBER from
 *    the call that creates it; collectives on it do nothing and return
 *    DIST_OK (torch warns and returns None), with an already completed work
 *    handle when one was asked for.
 *  - tensor buffers are borrowed until the operation completes; the arrays
 *    of tensor descriptors and split sizes are copied, so they may live on
 *    the caller's stack.
 *
 * Threads: one caller thread per group at a time (curl's handle rule).
 * dist_abort_group, dist_pg_errmsg and dist_work_* on a handle the calling
 * thread owns are the exceptions: abort and errmsg are safe from any thread.
 *
 * Errors: DIST_E_INVAL for bad arguments (wrong root, unknown rank, NULL
 * buffer, dtype/op mismatch, sizes that disagree with the group size), with
 * the detail in dist_pg_errmsg(group) (or dist_last_errmsg() when no group
 * exists). A failure in flight (peer lost, timeout, sizes that disagree
 * between ranks) fails the operation on every rank that takes part. */
#ifndef DIST_PG_H
#define DIST_PG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <dist/export.h>
#include <dist/store.h>
#include <dist/tensor.h>

DIST_EXTERN_C_BEGIN

typedef struct dist_pg dist_pg;
typedef struct dist_work dist_work;

/* What a rank outside a group receives in place of the group (torch's
 * GroupMember.NON_GROUP_MEMBER). Never dereference it. */
#define DIST_GROUP_NON_MEMBER ((dist_pg *)(intptr_t)-1)
/* dist_recv / dist_irecv from whichever rank sends first. */
#define DIST_ANY_SOURCE (-1)
/* Default group timeout: DIST_TIMEOUT seconds, or 600 s (torch's NCCL). */
#define DIST_DEFAULT_TIMEOUT_MS 600000

/* --- init and the default group ----------------------------------------- */

/* NCCL's communicator config (torch's ProcessGroupNCCL.Options), for
 * dist_init_opts.nccl_options and dist_group_opts.nccl_options. A zeroed
 * struct is NCCL's defaults: every field's 0 leaves NCCL's own value. The
 * three-way fields take DIST_OPT_ON or DIST_OPT_OFF. Values out of range
 * fail the group's creation with DIST_E_INVAL. */
#define DIST_OPT_DEFAULT 0
#define DIST_OPT_ON 1
#define DIST_OPT_OFF 2
/* cga_cluster_size: no cluster (NCCL's 0). */
#define DIST_NCCL_CGA_NONE (-1)
typedef struct dist_nccl_options {
  int blocking;             /* DIST_OPT_OFF: non-blocking communicator: init
                               and split return at once and the group polls
                               them, within its timeout */
  int cga_cluster_size;     /* 1..8, DIST_NCCL_CGA_NONE, 0 = NCCL's */
  int high_priority_stream; /* DIST_OPT_ON: the group's stream has the
                               device's greatest priority */
  int split_share;          /* DIST_OPT_ON: a group split from this one's
                               communicator shares its resources */
} dist_nccl_options;

typedef struct dist_init_opts {
  const char *backend;     /* "cpu" ("gloo" is an alias), "nccl",
                              "mpi", or a device map such as
                              "cpu:cpu,cuda:nccl" or "cpu:gloo,cuda:nccl"
                              (names case-insensitive): each operation runs
                              on the backend of its tensors' device. NULL
                              follows the tensors as torch's default:
                              "cpu:cpu,cuda:nccl" where NCCL loads and a
                              CUDA device is visible (or device_id names
                              one), "cpu" otherwise */
  const char *init_method; /* "env://" (default), "tcp://host:port",
                              "file:///path"; ignored when store is set */
  dist_store *store;       /* explicit store (borrowed; must outlive the
                              default group) with rank and world_size */
  int rank;                /* used only with world_size > 0 */
  int world_size;          /* > 0: rank and world_size are given here;
                              0 or -1: both come from the init method's
                              query ("tcp://h:p?rank=1&world_size=2", any
                              method) or else RANK / WORLD_SIZE. Rank 0 is a
                              rank, so a zero-initialised struct means
                              "everything from the environment". */
  int64_t timeout_ms;      /* <= 0: DIST_TIMEOUT or DIST_DEFAULT_TIMEOUT_MS */
  const char *group_desc;  /* description of the default group */
  /* Appended fields (zero = unset). */
  dist_device device_id;   /* type DIST_DEVICE_CUDA: bind this rank to
                              cuda:index (cudaSetDevice) and create the
                              group's NCCL communicator during init rather
                              than at its first CUDA operation; groups
                              created later inherit the binding, and are
                              split from this one's communicator where they
                              can (README: "NCCL"). cpu: no binding. */
  const dist_nccl_options *nccl_options; /* NULL: NCCL's defaults; copied */
} dist_init_opts;

/* dist_init_opts with every field at its default. */
DIST_API dist_init_opts dist_init_opts_default(void);

/* Rendezvous and create the default group. opts NULL = all defaults.
 * Wrong or missing environment variables give DIST_E_INVAL with a message
 * naming the variable (dist_last_errmsg). */
DIST_API int dist_init_process_group(const dist_init_opts *opts);
/* Destroys one group, or with NULL every group and the default group (the
 * library can be initialised again afterwards). Pending operations fail with
 * DIST_E_ABORTED, here and on the group's other members (the job's cause
 * names this rank). The handle dies with the destroy: passing it again, here
 * or to any other call, gives DIST_E_INVAL and a message, never a crash
 * (unless a group created since happens to reuse its memory, as with any
 * freed pointer). DIST_E_DESYNC (the group is destroyed all the same) when
 * the destroy found that the ranks disagreed on an earlier call: the root
 * of a small broadcast or scatter over shared memory returns before it
 * compares the others' calls with its own, and a later operation, or else
 * the destroy (waiting at most 2 s for the others to reach the call),
 * compares them; the report is logged, posted as the job's cause and in
 * dist_last_errmsg(). */
DIST_API int dist_destroy_process_group(dist_pg *group);
DIST_API bool dist_is_initialized(void);
/* Rank of the calling process in group (-1 when not a member or not
 * initialised). */
DIST_API int dist_get_rank(dist_pg *group);
/* Size of group (-1 when not a member or not initialised). */
DIST_API int dist_get_world_size(dist_pg *group);
/* "cpu", "nccl", ... ; NULL for a non-member or before init. */
DIST_API const char *dist_get_backend(dist_pg *group);
DIST_API bool dist_is_cpu_available(void);
/* True when libdist was built with NCCL, NCCL and the CUDA runtime load,
 * and the runtime sees a device. When false, dist_last_errmsg() says which
 * of these is missing (it is also logged at INFO, subsystem NCCL). */
DIST_API bool dist_is_nccl_available(void);
DIST_API bool dist_is_mpi_available(void);
/* The job's id (DIST_JOB_ID, or the one rank 0 made); NULL before init. */
DIST_API const char *dist_get_job_id(void);
/* The store of the default group (borrowed), NULL before init. */
DIST_API dist_store *dist_get_default_store(void);

/* --- groups -------------------------------------------------------------- */

#define DIST_GROUP_INTERNAL 1u /* helper group: no id, no seq, no events */
#define DIST_GROUP_COLLECTIVES_ONLY 2u /* with INTERNAL: no point-to-point call
                                          will be made on it, so no connection
                                          that only those need is made */

typedef struct dist_group_opts {
  int64_t timeout_ms;             /* <= 0: the default group's timeout */
  const char *backend;            /* NULL: the default group's backend */
  bool use_local_synchronization; /* only members call new_group */
  const char *desc;               /* description shown in reports */
  unsigned flags;                 /* DIST_GROUP_INTERNAL */
  /* Appended fields (zero = unset). */
  dist_device device_id;          /* cuda: bind and create the communicator
                                     at once; cpu: the default group's binding */
  const dist_nccl_options *nccl_options; /* NULL: the default group's */
} dist_group_opts;

/* A group of the given global ranks (NULL/0 = every rank; group ranks
 * follow ascending global rank, as torch sorts them). Every rank of the
 * default group calls it, in the same order, so every rank numbers the
 * group alike; with use_local_synchronization only members call, and the
 * group's id is derived from its members (an id >= 2^30). Non-members
 * receive DIST_GROUP_NON_MEMBER. opts may be NULL. */
DIST_API int dist_new_group(const int *ranks, size_t n, const dist_group_opts *opts,
                            dist_pg **out);
/* Splits parent (NULL = default) into disjoint groups; split i holds the
 * parent group ranks split_ranks[i][0 .. split_sizes[i]). Every member of
 * parent calls it; a rank in no split receives DIST_GROUP_NON_MEMBER. */
DIST_API int dist_split_group(dist_pg *parent, const int *const *split_ranks,
                              const size_t *split_sizes, size_t n_splits,
                              const dist_group_opts *opts, dist_pg **out);
/* Consecutive groups of group_size ranks (0 = LOCAL_WORLD_SIZE, else the
 * world). *cur: this rank's group; *all (optional): every subgroup, an
 * array released with dist_free (the groups themselves with
 * dist_destroy_process_group). */
DIST_API int dist_new_subgroups(int group_size, const dist_group_opts *opts,
                                dist_pg **cur, dist_pg ***all, size_t *n_all);
/* Subgroups from an explicit enumeration of global rank lists. */
DIST_API int dist_new_subgroups_by_enumeration(const int *const *ranks,
                                               const size_t *sizes, size_t n,
                                               const dist_group_opts *opts,
                                               dist_pg **cur, dist_pg ***all,
                                               size_t *n_all);
/* Translations between global ranks and ranks in group. DIST_E_INVAL when
 * the rank is not in the group. */
DIST_API int dist_get_group_rank(dist_pg *group, int global_rank, int *group_rank);
DIST_API int dist_get_global_rank(dist_pg *group, int group_rank, int *global_rank);
/* Copies up to cap global ranks of group into ranks; *n receives the size. */
DIST_API int dist_get_process_group_ranks(dist_pg *group, int *ranks, size_t cap,
                                          size_t *n);
/* Fails every pending and later operation on group with DIST_E_ABORTED,
 * here and on its peers, whose messages name this rank, the group and
 * reason. It is also the job's cause (under distrun: exit 12 naming this
 * rank, whichever rank then exits first), posted to the job's store before
 * the peers are told (at most 2 s when the store does not answer). Safe
 * from any thread, including a signal-free watchdog thread. */
DIST_API int dist_abort_group(dist_pg *group, const char *reason);
/* The message of the group's last failure ("" after a successful call).
 * Safe from any thread; valid until the next call on the group. */
DIST_API const char *dist_pg_errmsg(dist_pg *group);
/* Sticky error after an abort, a timeout or a lost peer (DIST_OK if none). */
DIST_API int dist_pg_async_error(dist_pg *group);

/* --- device mesh --------------------------------------------------------- */

typedef struct dist_device_mesh dist_device_mesh;

/* A mesh over every rank laid out row-major in shape[0..ndim) (their product
 * is the world size); dim_names may be NULL. Every rank calls it. When no
 * default group exists it is made first, as torch's init_device_mesh does:
 * dist_init_process_group from the environment (env://) with the backend
 * for device_type (dist_get_default_backend_for_device; NULL = "cpu"); it
 * stays after the mesh is destroyed (dist_destroy_process_group(NULL)).
 * Every dimension's groups are made with dist_new_group (described by the
 * dimension's name, or "mesh"), so they are wrapped like any group. */
DIST_API int dist_init_device_mesh(const char *device_type, const int64_t *shape,
                                   size_t ndim, const char *const *dim_names,
                                   dist_device_mesh **out);
/* The same with an explicit layout (torch's DeviceMesh(device_type, mesh)):
 * layout[i] is the global rank at the coordinate whose row-major index is
 * i, and must be a permutation of the world's ranks. Errors (DIST_E_INVAL,
 * with a message): a layout with a rank twice or outside the world, or of
 * another size than the shape's product; a dimension of size <= 0; more
 * than 8 dimensions; a dim name NULL, empty, 32 characters or longer, or
 * given twice. */
DIST_API int dist_device_mesh_create(const char *device_type, const int *layout,
                                     const int64_t *shape, size_t ndim,
                                     const char *const *dim_names,
                                     dist_device_mesh **out);
/* A mesh over groups that exist (torch's DeviceMesh.from_group), borrowed:
 * they must outlive the mesh, which does not destroy them. One group (NULL
 * = the default group) with layout and shape NULL: a 1-D mesh over its
 * ranks in group-rank order. Otherwise groups[d] is this rank's group along
 * dimension d, and layout/shape (ngroups dimensions; distinct global ranks,
 * a subset of the world is allowed, this rank among them) say where each
 * rank sits: each group must hold exactly the ranks of its line through this
 * rank, else DIST_E_INVAL. Only this rank's groups are needed, so only the
 * members of each group take part (no collective call). */
DIST_API int dist_device_mesh_from_group(const char *device_type, dist_pg *const *groups,
                                         size_t ngroups, const int *layout,
                                         const int64_t *shape,
                                         const char *const *dim_names,
                                         dist_device_mesh **out);
/* Destroys the groups the mesh made (not those given to from_group).
 * Accepts NULL. */
DIST_API void dist_device_mesh_destroy(dist_device_mesh *mesh);
DIST_API int dist_mesh_ndim(const dist_device_mesh *mesh);
/* Size of dimension dim (-1 when out of range). */
DIST_API int64_t dist_mesh_size(const dist_device_mesh *mesh, int dim);
/* The name of dimension dim (torch's mesh_dim_names[dim]), borrowed; NULL
 * when the mesh has no names or dim is out of range. */
DIST_API const char *dist_mesh_get_dim_name(const dist_device_mesh *mesh, int dim);
/* The group of ranks that share every coordinate but dim (borrowed; owned
 * by the mesh). By name: DIST_E_INVAL for a name the mesh does not have. */
DIST_API int dist_mesh_get_group(dist_device_mesh *mesh, int dim, dist_pg **out);
DIST_API int dist_mesh_get_group_by_name(dist_device_mesh *mesh, const char *name,
                                         dist_pg **out);
/* torch's get_all_groups: this rank's group of every dimension, in
 * dimension order, up to cap into groups; *n receives ndim. */
DIST_API int dist_mesh_get_all_groups(dist_device_mesh *mesh, dist_pg **groups, size_t cap,
                                      size_t *n);
/* This rank's coordinate (ndim entries). */
DIST_API int dist_mesh_get_coordinate(const dist_device_mesh *mesh, int *coord);
/* This rank's rank in get_group(dim), as torch's get_local_rank. Groups
 * number their ranks by ascending global rank, so with a layout that is not
 * ascending along dim it can differ from the coordinate. */
DIST_API int dist_mesh_get_local_rank(const dist_device_mesh *mesh, int dim, int *out);
DIST_API int dist_mesh_get_local_rank_by_name(const dist_device_mesh *mesh,
                                              const char *name, int *out);
/* The global rank at coord (ndim entries). */
DIST_API int dist_mesh_get_rank_at(const dist_device_mesh *mesh, const int *coord,
                                   int *rank);

/* --- point to point ------------------------------------------------------ */

/* A send completes when the receiver has matched it with a receive of the
 * same size (as NCCL's send and MPI_Ssend), so a size mismatch fails both
 * sides with DIST_E_DESYNC. Two ranks that both send to each other before
 * receiving must use dist_isend or dist_batch_isend_irecv. Tags match
 * exactly; a receive from DIST_ANY_SOURCE takes the first matching send. */
DIST_API int dist_send(const dist_tensor *t, int dst, dist_pg *group, int tag);
/* *src_out (may be NULL): the global rank that sent. */
DIST_API int dist_recv(dist_tensor *t, int src, dist_pg *group, int tag, int *src_out);
DIST_API int dist_isend(const dist_tensor *t, int dst, dist_pg *group, int tag,
                        dist_work **work);
DIST_API int dist_irecv(dist_tensor *t, int src, dist_pg *group, int tag,
                        dist_work **work);

typedef struct dist_p2p_op {
  bool is_send;      /* true: isend, false: irecv */
  dist_tensor *tensor;
  int peer;          /* global rank */
  int tag;
  dist_pg *group;    /* NULL = default; every op of a batch shares it */
} dist_p2p_op;
/* Starts every op of the batch at once, so they cannot deadlock on each
 * other; one work handle covers the batch (torch returns one per op). */
DIST_API int dist_batch_isend_irecv(const dist_p2p_op *ops, size_t n,
                                    dist_work **work);

/* --- collectives --------------------------------------------------------- */

/* Like MPI_Bcast, the source may return before the others have received
 * (a small broadcast on the cpu backend returns once its data is out). A
 * rank that disagrees about the size, dtype or source fails its own call
 * at once with DIST_E_DESYNC; the source hears of it at its next
 * collective of another kind, or within 8 broadcasts, which then fails
 * with DIST_E_DESYNC naming the earlier broadcast and that rank. */
DIST_API int dist_broadcast(dist_tensor *t, int src, dist_pg *group, dist_work **work);
DIST_API int dist_all_reduce(dist_tensor *t, dist_redop op, dist_pg *group,
                             dist_work **work);
DIST_API int dist_reduce(dist_tensor *t, int dst, dist_redop op, dist_pg *group,
                         dist_work **work);
/* outputs: n == group size tensors shaped like input; or, as torch allows,
 * of different sizes per rank (outputs[i] sized like rank i's input, this
 * rank's own like its input): then it runs as one broadcast per rank,
 * synchronously (a work handle comes back completed), and a rank whose
 * input is not the size the others expect fails them with DIST_E_DESYNC. */
DIST_API int dist_all_gather(dist_tensor *outputs, size_t n, const dist_tensor *input,
                             dist_pg *group, dist_work **work);
/* output holds group size times input's elements, rank order. */
DIST_API int dist_all_gather_into_tensor(dist_tensor *output, const dist_tensor *input,
                                         dist_pg *group, dist_work **work);
/* gather_list: group size tensors on dst (NULL, 0 elsewhere). */
DIST_API int dist_gather(const dist_tensor *input, dist_tensor *gather_list, size_t n,
                         int dst, dist_pg *group, dist_work **work);
/* scatter_list: group size tensors on src (NULL, 0 elsewhere). */
DIST_API int dist_scatter(dist_tensor *output, const dist_tensor *scatter_list,
                          size_t n, int src, dist_pg *group, dist_work **work);
/* inputs: group size tensors shaped like output; or, as torch allows (its
 * reduce_scatter_v), of different sizes per rank (inputs[i] sized like
 * rank i's output, this rank's own like its output): then it runs as one
 * reduce to each rank, synchronously (a work handle comes back completed),
 * cpu tensors only. */
DIST_API int dist_reduce_scatter(dist_tensor *output, const dist_tensor *inputs,
                                 size_t n, dist_redop op, dist_pg *group,
                                 dist_work **work);
/* input holds group size times output's elements. */
DIST_API int dist_reduce_scatter_tensor(dist_tensor *output, const dist_tensor *input,
                                        dist_redop op, dist_pg *group,
                                        dist_work **work);
/* outputs[i] receives inputs[rank] of rank i; n_* == group size. */
DIST_API int dist_all_to_all(dist_tensor *outputs, size_t n_out,
                             const dist_tensor *inputs, size_t n_in,
                             dist_pg *group, dist_work **work);
/* Splits count rows along dim 0 (NULL = even split); each array has group
 * size entries. */
DIST_API int dist_all_to_all_single(dist_tensor *output, const dist_tensor *input,
                                    const int64_t *output_splits,
                                    const int64_t *input_splits, dist_pg *group,
                                    dist_work **work);
DIST_API int dist_barrier(dist_pg *group, dist_work **work);
/* A host-side barrier over the store, at every debug level and on every
 * backend: rank 0 collects arrivals within timeout_ms (<= 0: the group's
 * timeout) and releases the others. On a timeout it fails with
 * DIST_E_TIMEOUT naming the first absent rank, or every absent rank when
 * wait_all_ranks; the other ranks fail too, saying rank 0 found absent
 * ranks. Synchronous only. */
DIST_API int dist_monitored_barrier(dist_pg *group, int64_t timeout_ms,
                                    bool wait_all_ranks);

/* --- byte blobs (torch's object collectives) ----------------------------- */

typedef struct dist_bytes {
  void *data;
  size_t len;
} dist_bytes;

/* Buffers libdist fills are heap memory released with dist_free (each
 * element's data). Synchronous only: a size exchange, then the data. */
/* src: *obj is read; others: *obj receives a copy. */
DIST_API int dist_broadcast_bytes(dist_bytes *obj, int src, dist_pg *group);
/* out: group size entries, out[i] from rank i (out[rank] is a copy too). */
DIST_API int dist_all_gather_bytes(const dist_bytes *in, dist_bytes *out,
                                   dist_pg *group);
/* out: group size entries on dst, NULL elsewhere. */
DIST_API int dist_gather_bytes(const dist_bytes *in, dist_bytes *out, int dst,
                               dist_pg *group);
/* in: group size entries on src, NULL elsewhere. */
DIST_API int dist_scatter_bytes(dist_bytes *out, const dist_bytes *in, int src,
                                dist_pg *group);
DIST_API int dist_send_bytes(const dist_bytes *in, int dst, dist_pg *group);
DIST_API int dist_recv_bytes(dist_bytes *out, int src, dist_pg *group, int *src_out);

/* --- work handles -------------------------------------------------------- */

/* Waits for completion: timeout_ms < 0 waits as long as the operation may
 * take (it fails by itself when it passes the group's timeout), 0 polls.
 * Returns the operation's status, or DIST_E_TIMEOUT when this wait ran out
 * first (the operation keeps running; wait again or free the handle).
 * A work on CUDA tensors is different (torch's Work.wait()): once launched,
 * the calling thread's current stream is made to wait for it and the call
 * returns DIST_OK at once; dist_work_synchronize (dist/cuda.h) blocks the
 * host. */
DIST_API int dist_work_wait(dist_work *work, int64_t timeout_ms);
DIST_API bool dist_work_is_completed(dist_work *work);
/* Completed without error. */
DIST_API bool dist_work_is_success(dist_work *work);
/* Status of a completed work (DIST_OK while pending). */
DIST_API int dist_work_status(dist_work *work);
/* Message of a failed work ("" otherwise). */
DIST_API const char *dist_work_errmsg(dist_work *work);
/* The global rank a completed recv received from. */
DIST_API int dist_work_source_rank(dist_work *work, int *rank);
/* cb runs once when the work completes, on the thread that completes it,
 * before waiters are released (so after dist_work_wait returns, its effects
 * are visible); at once, on the caller's thread, if the work has already
 * completed. It must not block or call into the work's group. One callback
 * per work: a second call replaces a pending one. */
typedef void (*dist_work_callback)(dist_work *work, void *arg);
DIST_API int dist_work_set_callback(dist_work *work, dist_work_callback cb, void *arg);
/* Releases the handle; a pending operation still runs to completion (its
 * callbacks and futures still see its outcome). Accepts NULL. A call on a
 * handle freed a moment ago whose operation has ended (the last 64 works
 * released in the process) fails with DIST_E_INVAL naming the stale
 * handle (dist_work_is_completed: true, dist_work_status: DIST_E_INVAL),
 * and a second free is ignored with a warning; an older freed handle is
 * undefined, as any freed pointer. */
DIST_API void dist_work_free(dist_work *work);

/* --- group ranks (torch 2.6's group_dst, group_src, group_peer) ---------- */

/* Every rank argument above (dst, src, peer, root, dist_p2p_op.peer, and
 * the byte-blob calls' ranks) takes a global rank, or DIST_GROUP_RANK(r)
 * for rank r within the group the call names, as torch's group_dst=r:
 *   dist_send(&t, DIST_GROUP_RANK(1), g, 0)  sends to group rank 1 of g.
 * A group rank outside the group fails with DIST_E_INVAL. What comes back
 * (dist_recv's *src_out, dist_work_source_rank) stays a global rank;
 * dist_get_group_rank translates it. The encoding (a base of 2^30 above
 * any global rank) keeps every global rank, DIST_ANY_SOURCE and a wrong
 * negative rank meaning what they meant. */
#define DIST_GROUP_RANK_BASE 0x40000000
#define DIST_GROUP_RANK(r) (DIST_GROUP_RANK_BASE + (r))

/* --- point to point with this rank itself -------------------------------- */

/* dist_isend, dist_irecv and the ops of dist_batch_isend_irecv may name the
 * calling rank itself, as torch allows: the message is copied in-process
 * with the usual rules (the send completes when the receive matched it,
 * sizes must agree or both fail with DIST_E_DESYNC, one tag's messages
 * arrive in order). A receive from DIST_ANY_SOURCE takes messages from
 * other ranks only. Blocking dist_send and dist_recv to self fail with
 * DIST_E_INVAL: they would wait for themselves. */

/* --- backends by name, and torch's environment names --------------------- */

/* Backend names are case-insensitive ("GLOO", "Gloo" and "gloo" are the
 * cpu backend's alias; dist_get_backend gives the registered, lower-case
 * spelling). dist_list_backends copies up to cap registered names (borrowed,
 * valid for the process's life; out may be NULL with cap 0) and returns how
 * many there are: "cpu", "gloo", then those registered by
 * dist_register_backend or a DIST_BACKEND_PLUGINS plugin already loaded. */
DIST_API size_t dist_list_backends(const char **out, size_t cap);
/* torch's get_default_backend_for_device: "cpu" (or "cpu:N") gives "cpu";
 * "cuda" (or "cuda:N") gives "nccl" when dist_is_nccl_available(), else
 * DIST_E_NOTSUP with the reason in dist_last_errmsg(); any other device is
 * DIST_E_INVAL. Case-insensitive. */
DIST_API int dist_get_default_backend_for_device(const char *device, const char **out);
/* The value of one of libdist's variables as the library reads it: name's
 * value, or when name is unset (or empty) its torch/Gloo counterpart's:
 * DIST_DEBUG <- TORCH_DISTRIBUTED_DEBUG, DIST_LOG_LEVEL <- TORCH_CPP_LOG_LEVEL,
 * DIST_SOCKET_IFNAME <- GLOO_SOCKET_IFNAME, DIST_SHOW_STACKTRACES <-
 * TORCH_SHOW_CPP_STACKTRACES. NULL when both are unset. *which (may be
 * NULL) receives the variable read, for messages. Every part reads these
 * through it. */
DIST_API const char *dist_getenv(const char *name, const char **which);

/* --- several callbacks per work, and futures (torch's Work.get_future) --- */

/* Adds cb to the work's callbacks: they run in the order added, after the
 * one dist_work_set_callback set, under its rules (on the completing thread
 * before waiters are released; at once, on the caller's thread, when the
 * work has completed; must not block or call into the work's group). */
DIST_API int dist_work_add_callback(dist_work *work, dist_work_callback cb, void *arg);

/* A future: completes once, with a status (DIST_OK or a DIST_E_* code) and,
 * on failure, a message. Callbacks run in the order added, on the thread
 * that completes it, before its waiters are released; at once on the
 * caller's thread when it has completed. Handles are independent: free
 * each with dist_future_free, at any time (a future still pending
 * completes anyway and its callbacks still run). */
typedef struct dist_future dist_future;
typedef void (*dist_future_callback)(dist_future *f, void *arg);
/* then's function: returns the status of the chained future. */
typedef int (*dist_future_fn)(dist_future *done, void *arg);

/* A future that completes with the work's status and message (torch's
 * get_future; its status is get_future_result's answer). */
DIST_API int dist_work_get_future(dist_work *work, dist_future **out);
/* A future the caller completes with dist_future_set_result. */
DIST_API int dist_future_new(dist_future **out);
/* Completes f; DIST_E_INVAL when it has completed already. msg may be NULL. */
DIST_API int dist_future_set_result(dist_future *f, int status, const char *msg);
DIST_API int dist_future_add_callback(dist_future *f, dist_future_callback cb, void *arg);
/* *out completes when fn, run as f's callback once f completes (whatever
 * its status; fn reads it with dist_future_status), returns: with fn's
 * return value as its status, and f's message when that status is OK or
 * f's own, else a message naming the status fn returned. */
DIST_API int dist_future_then(dist_future *f, dist_future_fn fn, void *arg, dist_future **out);
/* Waits until f completed and its callbacks ran: timeout_ms < 0 without a
 * limit, 0 polls. Returns f's status, or DIST_E_TIMEOUT when this wait ran
 * out first (f goes on; wait again). */
DIST_API int dist_future_wait(dist_future *f, int64_t timeout_ms);
DIST_API bool dist_future_is_done(dist_future *f);
/* Status of a completed future (DIST_OK while pending). */
DIST_API int dist_future_status(dist_future *f);
/* Message of a failed future ("" otherwise); valid while f is held. */
DIST_API const char *dist_future_errmsg(dist_future *f);
/* Releases the handle. Accepts NULL. */
DIST_API void dist_future_free(dist_future *f);

/* --- spawn (torch.multiprocessing.spawn) --------------------------------- */

/* What each spawned rank runs; its return value becomes the rank's exit
 * code (0 success; values outside 1..255 become 1). */
typedef int (*dist_spawn_fn)(int rank, int world_size, void *arg);
typedef struct dist_spawn_ctx dist_spawn_ctx;

/* Forks nprocs ranks of the calling program on this host, hosts their
 * store as distrun does (127.0.0.1, a fresh DIST_TOKEN, a DIST_JOB_ID, every
 * rank a client), and runs fn(rank, nprocs, arg) in each with RANK,
 * WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT,
 * DIST_USE_AGENT_STORE=1 and DIST_LAUNCHER=spawn set, so
 * dist_init_process_group(NULL) joins them. Call it before starting
 * threads (it forks). join: waits for every rank (dist_spawn_join(-1)) and
 * returns the outcome; *ctx (may be NULL) then receives the handle to read
 * the failure from. !join: returns at once with the handle in *ctx. */
DIST_API int dist_spawn(dist_spawn_fn fn, void *arg, int nprocs, bool join,
                        dist_spawn_ctx **ctx);
/* Waits for the ranks: DIST_OK when every rank exited 0. When one fails
 * (non-zero exit or a signal), ends the others (SIGTERM, SIGKILL after 3 s)
 * and returns DIST_E_PEER_LOST, the message naming the first failed rank
 * and how it ended. DIST_E_TIMEOUT when timeout_ms (< 0: none) runs out
 * first; the ranks go on (join again or free). */
DIST_API int dist_spawn_join(dist_spawn_ctx *ctx, int64_t timeout_ms);
/* The first failed rank, its exit code (-1 when killed) and the signal
 * that killed it (0 when it exited); DIST_E_INVAL when none failed. */
DIST_API int dist_spawn_failure(const dist_spawn_ctx *ctx, int *rank, int *exit_code,
                                int *signal);
/* A rank's pid while it runs (0 once reaped, -1 for a bad rank). */
DIST_API int dist_spawn_pid(const dist_spawn_ctx *ctx, int rank);
DIST_API const char *dist_spawn_job_id(const dist_spawn_ctx *ctx);
/* Ends ranks still running (SIGTERM, then SIGKILL), stops the store and
 * releases the handle. Accepts NULL. */
DIST_API void dist_spawn_free(dist_spawn_ctx *ctx);
/* torch's is_torchelastic_launched: whether this process was started by
 * distrun or dist_spawn (DIST_LAUNCHER), and which ("distrun", "spawn",
 * NULL otherwise). */
DIST_API bool dist_is_launched(void);
DIST_API const char *dist_launcher(void);

DIST_EXTERN_C_END

#endif
