/* backend_mpi.c - the "mpi" backend: the vtable glue, the group's
 * communicator, the queue of operations and the progress path (see
 * mpi_int.h for the design).
 *
 * Every operation, synchronous or not, joins the group's queue in issue
 * order; whoever polls (the caller of a synchronous operation, or the
 * group's progress thread "dist-mpi-<rank>" while asynchronous work is
 * pending) posts what may be posted, tests the requests, advances phases,
 * enforces each operation's deadline and completes operations from the head
 * of the queue, so works complete in issue order. A synchronous operation
 * lives on its caller's stack: on the fast path (nothing queued) it costs no
 * allocation and no thread hand-off. */
#include <sched.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

#include "mpi_int.h"

typedef struct mpi_backend {
  dist__mpi_comm g;
  char name[128];
  dist_pg *self;
  int64_t timeout_ms;
  bool have_comm;

  pthread_mutex_t mu;
  pthread_cond_t cv;         /* queue changes, abort, stop */
  dist__mpi_op *head, *tail; /* the queue, issue order */
  bool thread_started, stop;
  pthread_t thread;
  bool left_requests;        /* an operation was given up with requests in MPI */

  _Atomic int aborted;
  char abort_reason[256];
  _Atomic int broken_rc;     /* first failure that left ranks out of step */
  char broken_msg[DIST_ERRMSG_LEN];
} mpi_backend;

/* --- init / fini --------------------------------------------------------- */

/* Nobody builds the communicator before every member is here: MPI's
 * creation has no timeout, the store has one and names who is missing. */
static int join_barrier(mpi_backend *b, dist_store *st, dist__errbuf *err) {
  int64_t n = 0;
  if (dist_store_add(st, "mpi/ready", 1, &n) != DIST_OK)
    return dist__err_set(err, DIST_E_STORE, "group %s: %s", b->name, dist_store_errmsg(st));
  if (n == b->g.size && dist_store_set(st, "mpi/all_ready", "1", 1) != DIST_OK)
    return dist__err_set(err, DIST_E_STORE, "group %s: %s", b->name, dist_store_errmsg(st));
  const char *keys[1] = {"mpi/all_ready"};
  if (dist_store_wait(st, keys, 1, b->timeout_ms) != DIST_OK)
    return dist__err_set(err, DIST_E_TIMEOUT,
                         "group %s: only %lld of %d members joined within %lld ms: %s", b->name,
                         (long long)n, b->g.size, (long long)b->timeout_ms,
                         dist_store_errmsg(st));
  return DIST_OK;
}

static int check_world(mpi_backend *b, const dist_backend_init_args *a, dist__errbuf *err) {
  int wr = 0, ws = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &wr);
  MPI_Comm_size(MPI_COMM_WORLD, &ws);
  if (wr != a->global_rank)
    return dist__err_set(err, DIST_E_INVAL,
                         "group %s: this process is rank %d of the job but rank %d of "
                         "MPI_COMM_WORLD (the mpi backend needs the job launched by mpirun)",
                         b->name, a->global_rank, wr);
  for (int i = 0; i < a->size; i++)
    if (a->global_ranks[i] < 0 || a->global_ranks[i] >= ws)
      return dist__err_set(err, DIST_E_INVAL, "group %s: rank %d is not in MPI_COMM_WORLD (%d ranks)",
                           b->name, a->global_ranks[i], ws);
  return DIST_OK;
}

/* The group's communicator over its global ranks (= MPI_COMM_WORLD ranks);
 * only members call MPI_Comm_create_group, so subgroups need nobody else. */
static int make_comm(mpi_backend *b, const dist_backend_init_args *a, dist__errbuf *err) {
  uint32_t h = 2166136261u;
  for (const char *p = b->name; *p; p++)
    h = (h ^ (uint8_t)*p) * 16777619u;
  MPI_Group world, sub;
  char s[256];
  dist__mpi_lock();
  MPI_Comm_group(MPI_COMM_WORLD, &world);
  int e = MPI_Group_incl(world, a->size, a->global_ranks, &sub);
  if (e == MPI_SUCCESS)
    e = MPI_Comm_create_group(MPI_COMM_WORLD, sub, (int)(h % 32768u), &b->g.comm);
  if (e == MPI_SUCCESS)
    MPI_Comm_set_errhandler(b->g.comm, MPI_ERRORS_RETURN);
  int r = -1;
  if (e == MPI_SUCCESS)
    MPI_Comm_rank(b->g.comm, &r);
  MPI_Group_free(&world);
  if (e == MPI_SUCCESS)
    MPI_Group_free(&sub);
  dist__mpi_unlock();
  if (e != MPI_SUCCESS)
    return dist__err_set(err, DIST_E_BACKEND, "group %s: cannot create its communicator: %s",
                         b->name, dist__mpi_errstr(e, s, sizeof s));
  b->have_comm = true;
  if (r != a->rank)
    return dist__err_set(err, DIST_E_INTERNAL, "group %s: MPI gave rank %d, expected %d",
                         b->name, r, a->rank);
  return DIST_OK;
}

static int mpi_init(void *priv, const dist_backend_init_args *a, dist_pg *self) {
  mpi_backend *b = priv;
  b->self = self;
  snprintf(b->name, sizeof b->name, "%s", a->group_name ? a->group_name : "?");
  b->g.name = b->name;
  b->g.rank = a->rank;
  b->g.size = a->size;
  b->timeout_ms = a->timeout_ms;
  pthread_mutex_init(&b->mu, NULL);
  pthread_cond_init(&b->cv, NULL);
  dist__errbuf err;
  dist__err_clear(&err);
  int rc = dist__mpi_ensure_init(&err);
  if (rc == DIST_OK && !a->store)
    rc = dist__err_set(&err, DIST_E_INVAL, "the mpi backend needs a group store");
  if (rc == DIST_OK)
    rc = check_world(b, a, &err);
  if (rc == DIST_OK)
    rc = join_barrier(b, a->store, &err);
  if (rc == DIST_OK)
    rc = make_comm(b, a, &err);
  if (rc != DIST_OK) {
    if (b->have_comm)
      MPI_Comm_free(&b->g.comm);
    pthread_cond_destroy(&b->cv);
    pthread_mutex_destroy(&b->mu);
    return dist_backend_set_error(self, rc, "%s", err.msg);
  }
  DIST_LOG(INFO, MPI, "group %s: rank %d of %d over MPI", b->name, b->g.rank, b->g.size);
  return DIST_OK;
}

static void mpi_abort(void *priv, const char *reason) {
  mpi_backend *b = priv;
  static pthread_mutex_t reason_lock = PTHREAD_MUTEX_INITIALIZER;
  pthread_mutex_lock(&reason_lock);
  if (!atomic_load(&b->aborted)) {
    snprintf(b->abort_reason, sizeof b->abort_reason, "%s", reason ? reason : "aborted");
    atomic_store(&b->aborted, 1);
  }
  pthread_mutex_unlock(&reason_lock);
  pthread_mutex_lock(&b->mu);
  pthread_cond_broadcast(&b->cv);
  pthread_mutex_unlock(&b->mu);
}

static int mpi_async_error(void *priv) {
  mpi_backend *b = priv;
  if (atomic_load(&b->aborted))
    return DIST_E_ABORTED;
  return atomic_load(&b->broken_rc);
}

/* --- the progress path --------------------------------------------------- */

static void mark_broken(mpi_backend *b, int rc, const char *msg) {
  int zero = 0;
  if (atomic_load(&b->broken_rc) == 0) {
    snprintf(b->broken_msg, sizeof b->broken_msg, "%s", msg);
    atomic_compare_exchange_strong(&b->broken_rc, &zero, rc);
  }
}

/* Fails op; when MPI still holds some of its requests, their buffers stay
 * allocated (MPI may write them later) and the process ends with MPI_Abort
 * instead of MPI_Finalize. Caller holds b->mu. */
static void give_up(mpi_backend *b, dist__mpi_op *op, int rc, const char *msg) {
  if (op->phase > 0 && !op->done) {
    op->tmp = NULL; /* left to MPI on purpose */
    op->counts = NULL;
    b->left_requests = true;
    dist__mpi_mark_stuck();
  }
  op->rc = rc;
  if (msg != op->msg)
    snprintf(op->msg, sizeof op->msg, "%s", msg);
  op->done = true;
}

static void timed_out(mpi_backend *b, dist__mpi_op *op) {
  char d[160], m[DIST_ERRMSG_LEN];
  snprintf(m, sizeof m,
           "%s #%llu on group %s (rank %d of %d) timed out after %lld ms: not every member "
           "took part (MPI cannot cancel it, so the group is broken)",
           dist_coll_describe(op->c, d, sizeof d), (unsigned long long)op->c->seq, b->name,
           b->g.rank, b->g.size, (long long)op->c->timeout_ms);
  mark_broken(b, DIST_E_TIMEOUT, m);
  give_up(b, op, DIST_E_TIMEOUT, m);
}

/* Requests that ended in an error: a receive too small for what came is a
 * desync; anything else is MPI's error. */
static void failed_requests(mpi_backend *b, dist__mpi_op *op, int e, MPI_Status *st) {
  char s[256], d[160], m[DIST_ERRMSG_LEN];
  int rc = DIST_E_BACKEND;
  if (e == MPI_ERR_IN_STATUS)
    for (int i = 0; i < op->n_reqs; i++)
      if (st[i].MPI_ERROR != MPI_SUCCESS && st[i].MPI_ERROR != MPI_ERR_PENDING) {
        e = st[i].MPI_ERROR;
        break;
      }
  int cls = 0;
  MPI_Error_class(e, &cls);
  if (cls == MPI_ERR_TRUNCATE)
    rc = DIST_E_DESYNC;
  snprintf(m, sizeof m, "%s #%llu on group %s: %s%s", dist_coll_describe(op->c, d, sizeof d),
           (unsigned long long)op->c->seq, b->name, dist__mpi_errstr(e, s, sizeof s),
           rc == DIST_E_DESYNC ? " (a peer sent more than this rank expects)" : "");
  mark_broken(b, rc, m);
  give_up(b, op, rc, m);
}

/* Tests op's requests and advances it. Returns whether anything moved. */
static bool step(mpi_backend *b, dist__mpi_op *op) {
  MPI_Status small[DIST_MPI_MAX_PHASE_REQS];
  MPI_Status *st = op->n_reqs <= DIST_MPI_MAX_PHASE_REQS
                       ? small
                       : dist__malloc(sizeof(MPI_Status) * (size_t)op->n_reqs);
  if (!st) {
    give_up(b, op, DIST_E_NOMEM, "out of memory testing MPI requests");
    return true;
  }
  int flag = 0;
  dist__mpi_lock();
  int e = MPI_Testall(op->n_reqs, op->reqs, &flag, st);
  int rc = DIST_OK;
  if (e == MPI_SUCCESS && flag)
    rc = dist__mpi_op_advance(&b->g, op, st);
  dist__mpi_unlock();
  if (e != MPI_SUCCESS)
    failed_requests(b, op, e, st);
  else if (rc != DIST_OK)
    give_up(b, op, rc, op->msg);
  if (st != small)
    dist__free(st);
  return e != MPI_SUCCESS || flag;
}

static void post(mpi_backend *b, dist__mpi_op *op) {
  if (atomic_load(&b->broken_rc)) {
    give_up(b, op, atomic_load(&b->broken_rc), b->broken_msg);
    return;
  }
  op->deadline_ms = dist__deadline_ms(op->c->timeout_ms);
  dist__mpi_lock();
  int rc = dist__mpi_op_post(&b->g, op);
  dist__mpi_unlock();
  if (rc != DIST_OK) {
    /* Nothing of it reached MPI unless it was a batch: the others will
     * wait for it, so the group cannot go on. */
    mark_broken(b, rc, op->msg);
    op->phase = 0;
    give_up(b, op, rc, op->msg);
  }
}

/* One pass over the queue; completed operations at its head are moved to
 * *done (async) or marked finished (sync). Caller holds b->mu. */
static bool poll_locked(mpi_backend *b, dist__mpi_op **done) {
  bool moved = false, prev_ready = true;
  bool aborted = atomic_load(&b->aborted);
  int64_t now = 0;
  for (dist__mpi_op *op = b->head; op; op = op->next) {
    if (op->done) {
      prev_ready = true;
      continue;
    }
    if (aborted) {
      give_up(b, op, DIST_E_ABORTED, b->abort_reason);
      moved = true;
      continue;
    }
    if (op->phase == 0) {
      if (!prev_ready)
        break;
      post(b, op);
      moved = true;
    }
    if (!op->done)
      moved |= step(b, op);
    if (!op->done && op->c->timeout_ms >= 0) {
      now = now ? now : dist__now_ms();
      if (now > op->deadline_ms) {
        timed_out(b, op);
        moved = true;
      }
    }
    prev_ready = op->done || op->last_posted;
  }
  while (b->head && b->head->done) {
    dist__mpi_op *op = b->head;
    b->head = op->next;
    if (!b->head)
      b->tail = NULL;
    op->next = NULL;
    if (op->w) {
      op->next = *done;
      *done = op; /* reversed; finish() restores issue order */
    } else {
      op->phase = -1; /* finished: its caller may return */
    }
    moved = true;
  }
  return moved;
}

static void finish(dist__mpi_op *done) {
  dist__mpi_op *rev = NULL;
  while (done) {
    dist__mpi_op *next = done->next;
    done->next = rev;
    rev = done;
    done = next;
  }
  while (rev) {
    dist__mpi_op *next = rev->next;
    dist_work *w = rev->w;
    int rc = rev->rc, src = rev->src;
    char msg[DIST_ERRMSG_LEN];
    snprintf(msg, sizeof msg, "%s", rc ? rev->msg : "");
    dist__mpi_op_release(rev);
    dist__free(rev);
    dist_backend_work_done(w, rc, src, msg);
    rev = next;
  }
}

/* Waiting politely: busy at first (latency), then yielding, then short
 * sleeps, so oversubscribed ranks (4 on 2 cores in CI) still progress. */
static void backoff(int idle) {
  if (idle < 200)
    return;
  if (idle < 20000) {
    sched_yield();
    return;
  }
  struct timespec ts = {0, 50000};
  nanosleep(&ts, NULL);
}

static void *progress_main(void *arg) {
  mpi_backend *b = arg;
  int idle = 0;
  pthread_mutex_lock(&b->mu);
  for (;;) {
    bool work = false;
    for (dist__mpi_op *op = b->head; op && !work; op = op->next)
      work = op->w != NULL;
    if (!work) {
      if (b->stop)
        break;
      pthread_cond_wait(&b->cv, &b->mu);
      idle = 0;
      continue;
    }
    dist__mpi_op *done = NULL;
    bool moved = poll_locked(b, &done);
    pthread_mutex_unlock(&b->mu);
    finish(done);
    idle = moved ? 0 : idle + 1;
    backoff(idle);
    pthread_mutex_lock(&b->mu);
  }
  pthread_mutex_unlock(&b->mu);
  return NULL;
}

/* --- submission ---------------------------------------------------------- */

static void enqueue_locked(mpi_backend *b, dist__mpi_op *op) {
  if (b->tail)
    b->tail->next = op;
  else
    b->head = op;
  b->tail = op;
}

static int submit_async(mpi_backend *b, dist_work *w) {
  dist__mpi_op *op = dist__calloc(1, sizeof *op);
  if (!op)
    return dist_backend_set_error(b->self, DIST_E_NOMEM, "out of memory queueing work");
  op->c = dist_work_coll(w);
  op->w = w;
  op->src = -1;
  pthread_mutex_lock(&b->mu);
  if (!b->thread_started) {
    int e = pthread_create(&b->thread, NULL, progress_main, b);
    if (e) {
      pthread_mutex_unlock(&b->mu);
      dist__free(op);
      return dist_backend_set_error(b->self, DIST_E_SYS, "cannot start the progress thread: %s",
                                    strerror(e));
    }
    char name[16];
    snprintf(name, sizeof name, "dist-mpi-%d", b->g.rank);
    pthread_setname_np(b->thread, name);
    b->thread_started = true;
  }
  enqueue_locked(b, op);
  dist__mpi_op *done = NULL;
  poll_locked(b, &done); /* posts it now when it may go */
  pthread_cond_broadcast(&b->cv);
  pthread_mutex_unlock(&b->mu);
  finish(done);
  return DIST_OK;
}

static int run_sync(mpi_backend *b, const dist_coll *c) {
  dist__mpi_op op;
  memset(&op, 0, sizeof op);
  op.c = c;
  op.src = -1;
  int idle = 0;
  pthread_mutex_lock(&b->mu);
  enqueue_locked(b, &op);
  for (;;) {
    dist__mpi_op *done = NULL;
    bool moved = poll_locked(b, &done);
    bool finished = op.phase == -1;
    pthread_mutex_unlock(&b->mu);
    finish(done);
    if (finished)
      break;
    idle = moved ? 0 : idle + 1;
    backoff(idle);
    pthread_mutex_lock(&b->mu);
  }
  int rc = op.rc;
  if (rc != DIST_OK)
    dist_backend_set_error(b->self, rc, "%s", op.msg);
  dist__mpi_op_release(&op);
  return rc;
}

/* The synchronous fast path: MPI's blocking call on the caller's thread,
 * under the watchdog (mpi_int.h). Open MPI's blocking collectives run its
 * tuned algorithms; the non-blocking ones (libnbc) cost 20-100% more here
 * from 64 KiB on (bench_mpi against shared/peers/mpi). */
static int run_blocking(mpi_backend *b, const dist_coll *c) {
  dist__mpi_op op;
  memset(&op, 0, sizeof op);
  op.c = c;
  op.src = -1;
  op.blocking = true;
  dist__mpi_watch wd = {dist__deadline_ms(c->timeout_ms), c, b->name, b->g.rank, b->g.size, NULL};
  MPI_Status st[DIST_MPI_MAX_PHASE_REQS];
  dist__mpi_watch_arm(&wd);
  int rc = dist__mpi_op_post(&b->g, &op);
  while (rc == DIST_OK && !op.done)
    rc = dist__mpi_op_advance(&b->g, &op, st);
  dist__mpi_watch_disarm(&wd);
  if (rc != DIST_OK) {
    /* An MPI error inside a collective leaves the ranks out of step. */
    mark_broken(b, rc, op.msg);
    dist_backend_set_error(b->self, rc, "%s", op.msg);
  }
  dist__mpi_op_release(&op);
  return rc;
}

static bool may_block(mpi_backend *b, const dist_coll *c) {
  if (c->kind == DIST_OP_SEND || c->kind == DIST_OP_RECV || c->kind == DIST_OP_BATCH_P2P ||
      !dist__mpi_sync_blocking())
    return false;
  pthread_mutex_lock(&b->mu);
  bool idle = b->head == NULL; /* nothing queued may be overtaken */
  pthread_mutex_unlock(&b->mu);
  return idle;
}

static int mpi_op(void *priv, const dist_coll *c, dist_work *w) {
  mpi_backend *b = priv;
  if (atomic_load(&b->aborted))
    return dist_backend_set_error(b->self, DIST_E_ABORTED, "group %s was aborted: %s", b->name,
                                  b->abort_reason);
  if (atomic_load(&b->broken_rc))
    return dist_backend_set_error(b->self, atomic_load(&b->broken_rc), "%s", b->broken_msg);
  if (w)
    return submit_async(b, w);
  return may_block(b, c) ? run_blocking(b, c) : run_sync(b, c);
}

static void mpi_fini(void *priv) {
  mpi_backend *b = priv;
  pthread_mutex_lock(&b->mu);
  bool pending = b->head != NULL;
  pthread_mutex_unlock(&b->mu);
  if (pending)
    mpi_abort(b, "the group was destroyed with operations pending");
  pthread_mutex_lock(&b->mu);
  dist__mpi_op *done = NULL;
  poll_locked(b, &done); /* an abort fails everything at once */
  b->stop = true;
  pthread_cond_broadcast(&b->cv);
  bool join = b->thread_started;
  pthread_mutex_unlock(&b->mu);
  finish(done);
  if (join)
    pthread_join(b->thread, NULL);
  /* A communicator with requests MPI still holds is left alone. */
  if (b->have_comm && !b->left_requests) {
    dist__mpi_lock();
    MPI_Comm_free(&b->g.comm);
    dist__mpi_unlock();
  }
  pthread_cond_destroy(&b->cv);
  pthread_mutex_destroy(&b->mu);
}

const dist_backend_ops dist__mpi_backend_ops = {
    .abi_version = DIST_BACKEND_ABI_VERSION,
    .name = "mpi",
    .caps = DIST_CAP_CPU,
    .priv_size = sizeof(mpi_backend),
    .init = mpi_init,
    .fini = mpi_fini,
    .abort = mpi_abort,
    .send = mpi_op,
    .recv = mpi_op,
    .batch_p2p = mpi_op,
    .broadcast = mpi_op,
    .all_reduce = mpi_op,
    .reduce = mpi_op,
    .all_gather = mpi_op,
    .gather = mpi_op,
    .scatter = mpi_op,
    .reduce_scatter = mpi_op,
    .all_to_all = mpi_op,
    .barrier = mpi_op,
    .async_error = mpi_async_error,
};
