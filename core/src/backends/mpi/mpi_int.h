/* mpi_int.h - what the MPI backend's files share (core/src/backends/mpi/).
 *
 * DESIGN. The "mpi" backend runs host tensors over an MPI library (Open MPI
 * in CI), as torch's ProcessGroupMPI:
 *   - mpi_boot.c owns the process's MPI: MPI_Init_thread on first use
 *     (THREAD_MULTIPLE asked; with less, every MPI call is serialised by one
 *     process-wide lock), MPI_Finalize at exit, and the bootstrap that lets
 *     dist_init_process_group(backend "mpi") run under mpirun without
 *     MASTER_ADDR: rank and world size come from MPI_COMM_WORLD and rank 0
 *     hosts the job's TCP store, whose address it broadcasts over MPI.
 *   - backend_mpi.c is the vtable glue: one communicator per group
 *     (MPI_Comm_create_group over the group's global ranks, which are
 *     MPI_COMM_WORLD ranks), a queue of operations in issue order, and the
 *     progress path that tests their requests, enforces the group timeout
 *     and completes work handles.
 *   - mpi_ops.c maps each operation to its non-blocking MPI calls, in one or
 *     two phases (a phase is a set of requests; the next phase is posted when
 *     they are done).
 *   - mpi_reduce.c decides how a reduction runs. MPI's own reductions do
 *     not promise an order, so they are used only where the result cannot
 *     depend on it (integers; float SUM/PRODUCT over two ranks, which IEEE
 *     commutativity makes identical); every other reduction gathers the
 *     inputs with MPI and combines them in ascending rank order with core's
 *     kernels (reduce.h), so results are bitwise those of the cpu backend.
 *
 * Ordering. MPI requires collectives on a communicator to be posted in the
 * same order on every rank. The queue posts an operation only when the one
 * before it has posted its last phase, so every rank posts the same calls in
 * the same order whatever thread drives progress.
 *
 * Failures. MPI cannot cancel a collective: an operation that passes its
 * deadline fails with DIST_E_TIMEOUT, marks the group broken (later
 * operations fail at once with the first message) and its requests are left
 * to MPI (their scratch memory is kept). An abort fails everything queued
 * with DIST_E_ABORTED. An MPI error code becomes DIST_E_BACKEND with MPI's
 * error string; a receive that does not fit (MPI_ERR_TRUNCATE) or holds
 * fewer bytes than expected is DIST_E_DESYNC. Open MPI 4.1 has no fault
 * tolerance: when a peer dies, mpirun ends the job. */
#ifndef DIST_MPI_INT_H
#define DIST_MPI_INT_H

#include <mpi.h>
#include <pthread.h>
#include <stdatomic.h>

#include "base/dist_int.h"

/* --- the process's MPI (mpi_boot.c) -------------------------------------- */

/* Initialises MPI once (unless the program did); DIST_E_BACKEND with a
 * message when it cannot. */
int dist__mpi_ensure_init(dist__errbuf *err);
/* The lock every MPI call takes when MPI gave less than THREAD_MULTIPLE. */
void dist__mpi_lock(void);
void dist__mpi_unlock(void);
/* "MPI_ERR_TRUNCATE: message truncated" for an MPI error code. */
const char *dist__mpi_errstr(int code, char *buf, size_t len);
/* Whether this process was started by mpirun (Open MPI, MPICH or PMI
 * variables present). */
bool dist__mpi_launched(void);
/* Fills rank, world_size and store of o from MPI (rank 0 hosts a TCP store
 * and broadcasts its address and a fresh token). The store stays owned by
 * mpi_boot.c until dist__mpi_boot_release. */
int dist__mpi_bootstrap(dist_init_opts *o);
void dist__mpi_boot_release(void);
/* Records that a group was left with requests MPI still holds: at exit the
 * process calls MPI_Abort instead of MPI_Finalize (which would wait for
 * them forever). */
void dist__mpi_mark_stuck(void);

/* A synchronous operation inside a blocking MPI call, watched: MPI cannot
 * interrupt it, so when its deadline passes the watchdog thread prints the
 * report (the operation, its group and rank, the timeout) and ends the job
 * with MPI_Abort. Arming costs a lock, no allocation, no formatting. */
typedef struct dist__mpi_watch {
  int64_t deadline_ms;
  const dist_coll *c;
  const char *group;
  int rank, size;
  struct dist__mpi_watch *next;
} dist__mpi_watch;
void dist__mpi_watch_arm(dist__mpi_watch *w);
void dist__mpi_watch_disarm(dist__mpi_watch *w);
/* Whether synchronous collectives may use MPI's blocking calls:
 * DIST_MPI_SYNC=blocking (default) or nonblocking, and MPI gave
 * THREAD_MULTIPLE (a blocking call under the serialising lock could
 * starve another group's progress). */
bool dist__mpi_sync_blocking(void);

/* --- reductions (mpi_reduce.c) ------------------------------------------- */

/* The MPI datatype that carries dt's elements (half types as 16-bit
 * integers: MPI only moves them). */
MPI_Datatype dist__mpi_dtype(dist_dtype dt);
/* MPI's own op for (dt, op) over size ranks when its result equals the
 * rank-ordered one bit for bit; MPI_OP_NULL when the ordered path must run. */
MPI_Op dist__mpi_native_op(dist_dtype dt, dist_redop op, int size);

/* --- operations (mpi_ops.c) ---------------------------------------------- */

#define DIST_MPI_MAX_PHASE_REQS 4

/* One operation in the queue. */
typedef struct dist__mpi_op {
  const dist_coll *c;
  dist_work *w;            /* NULL: synchronous (the caller waits) */
  int phase;               /* 0: not posted; then 1, 2 */
  bool last_posted;        /* its last phase is posted */
  bool done;
  bool blocking;           /* post blocking calls (the synchronous fast path) */
  int rc;
  char msg[DIST_ERRMSG_LEN];
  int src;                 /* a receive's source (group rank), else -1 */
  int64_t deadline_ms;
  MPI_Request *reqs;       /* this phase's requests */
  int n_reqs;
  MPI_Request small[DIST_MPI_MAX_PHASE_REQS];
  void *tmp;               /* scratch (packed buffers, gathered inputs) */
  size_t tmp_len;
  int *counts;             /* scratch: 4 x size ints (v-collectives) */
  struct dist__mpi_op *next;
} dist__mpi_op;

/* What the operations need of their group. */
typedef struct dist__mpi_comm {
  MPI_Comm comm;
  int rank, size;
  const char *name;
} dist__mpi_comm;

/* Posts op's next phase (the first when op->phase is 0). Returns DIST_OK
 * or a failure with op->msg set. Sets op->last_posted on the last phase. */
int dist__mpi_op_post(const dist__mpi_comm *g, dist__mpi_op *op);
/* op's current phase has completed (statuses of its requests given):
 * unpacks or reduces, then posts the next phase or sets op->done. */
int dist__mpi_op_advance(const dist__mpi_comm *g, dist__mpi_op *op, MPI_Status *st);
/* Frees op's scratch (not op). */
void dist__mpi_op_release(dist__mpi_op *op);

#endif
