/* pg.c - process-group objects and the one place that calls a backend.
 *
 * A group is a backend table plus its private state, the group's identity
 * (name, id, ranks) and its error state. dist__pg_call is the path of every
 * operation: it numbers the call, tells the observers, runs the slot
 * synchronously (no allocation on that path) or through a work handle, and
 * records the outcome. dist_pg_forward is the same minus numbering and
 * events, for wrappers calling the group they wrap; the interposer hook
 * lets such a wrapper replace each new user group. The default group (the
 * one a NULL group argument means) is kept here; init sets it. */
#include <stdio.h>

#include "base/report.h"
#include "job/job.h"
#include "pg_int.h"

static dist_pg *default_pg;
static dist_group_wrapper_fn wrapper_fn;
static void *wrapper_arg;
static dist_group_precreate_fn precreate_fn;
static void *precreate_arg;
static pthread_mutex_t groups_lock = PTHREAD_MUTEX_INITIALIZER;
static dist_pg *live_groups; /* user groups, newest first */
/* Every group object alive (user, internal, wrapped), so a destroyed or
 * made-up handle is refused instead of dereferenced. */
static dist_pg *handles;
/* Removals so far: every call checks its handle (dist__pg_resolve), and the
 * lock and walk would cost each call two locked instructions, which wait
 * for the stores before them (a small broadcast's to the line its readers
 * poll). A thread keeps the few handles it found live at a count of
 * removals; while the count stands, they still are. */
static _Atomic uint64_t handles_removed;
#define LIVE_CACHE 4
static _Thread_local struct {
  const dist_pg *g[LIVE_CACHE];
  uint64_t removed[LIVE_CACHE];
  unsigned next;
} live_cache;

static void handle_add(dist_pg *g) {
  dist__pg_dead_forget(g); /* the address is live again */
  pthread_mutex_lock(&groups_lock);
  g->next_handle = handles;
  handles = g;
  pthread_mutex_unlock(&groups_lock);
}

/* Removes g; false when it was not a live handle (g is not dereferenced). */
static bool handle_remove(dist_pg *g) {
  bool found = false;
  pthread_mutex_lock(&groups_lock);
  for (dist_pg **p = &handles; *p; p = &(*p)->next_handle)
    if (*p == g) {
      *p = g->next_handle;
      found = true;
      atomic_fetch_add_explicit(&handles_removed, 1, memory_order_release);
      break;
    }
  pthread_mutex_unlock(&groups_lock);
  return found;
}

bool dist__pg_handle_live(const dist_pg *g) {
  uint64_t removed = atomic_load_explicit(&handles_removed, memory_order_acquire);
  for (unsigned i = 0; i < LIVE_CACHE; i++)
    if (live_cache.g[i] == g && g && live_cache.removed[i] == removed)
      return true;
  bool found = false;
  pthread_mutex_lock(&groups_lock);
  for (dist_pg *p = handles; p && !found; p = p->next_handle)
    found = p == g;
  pthread_mutex_unlock(&groups_lock);
  if (found) { /* live at that count: a removal since makes the next call look again */
    unsigned i = live_cache.next++ % LIVE_CACHE;
    live_cache.g[i] = g;
    live_cache.removed[i] = removed;
  }
  return found;
}

/* --- the default group ---------------------------------------------------- */

dist_pg *dist__pg_default(void) { return default_pg; }
void dist__pg_set_default(dist_pg *g) { default_pg = g; }

int dist__pg_stale(const char *fn, const dist_pg *g) {
  return dist__set_last_error(DIST_E_INVAL,
                              "%s: %p is not a live process group: it was destroyed already "
                              "(a handle dies with dist_destroy_process_group) or never created",
                              fn, (const void *)g);
}

dist_pg *dist__pg_resolve(dist_pg *g) {
  if (g && g != DIST_GROUP_NON_MEMBER && !dist__pg_handle_live(g)) {
    dist__pg_stale("libdist", g);
    return NULL;
  }
  if (g)
    return g;
  if (!default_pg)
    dist__set_last_error(DIST_E_INVAL,
                         "the default process group is not initialised "
                         "(call dist_init_process_group first)");
  return default_pg;
}

/* --- the interposer ------------------------------------------------------- */

void dist_set_group_wrapper(dist_group_wrapper_fn fn, void *arg) {
  wrapper_fn = fn;
  wrapper_arg = arg;
}

void dist_set_group_precreate_hook(dist_group_precreate_fn fn, void *arg) {
  precreate_fn = fn;
  precreate_arg = arg;
}

/* The hook sees the group its members are about to connect. */
static int precreate(const dist__pg_spec *s) {
  dist_pg_info planned = {
      .group_id = s->group_id, .name = s->name, .desc = s->desc ? s->desc : "",
      .backend = s->backend, .rank = s->rank, .size = s->size,
      .global_ranks = s->global_ranks, .global_rank = s->global_ranks[s->rank],
      .timeout_ms = s->timeout_ms, .internal = false,
  };
  dist__clear_last_error();
  int rc = precreate_fn(precreate_arg, &planned);
  if (rc != DIST_OK && !dist_last_errmsg()[0])
    dist__set_last_error(rc, "group %s: refused before connecting", s->name);
  return rc;
}


/* --- creation ------------------------------------------------------------ */

static int fill_identity(dist_pg *g, const dist__pg_spec *s) {
  g->global_ranks = dist__malloc(sizeof(int) * (size_t)s->size);
  if (!g->global_ranks)
    return dist__set_last_error(DIST_E_NOMEM, "out of memory creating group %s", s->name);
  memcpy(g->global_ranks, s->global_ranks, sizeof(int) * (size_t)s->size);
  snprintf(g->name, sizeof g->name, "%s", s->name);
  snprintf(g->desc, sizeof g->desc, "%s", s->desc ? s->desc : "");
  snprintf(g->backend, sizeof g->backend, "%s", s->backend);
  g->timeout_ms = s->timeout_ms;
  g->internal = s->flags & DIST_GROUP_INTERNAL;
  g->device_id = s->device_id;
  if (s->nccl_options)
    g->nccl_opts = *s->nccl_options;
  g->info = (dist_pg_info){
      .group_id = -1,
      .name = g->name,
      .desc = g->desc,
      .backend = g->backend,
      .rank = s->rank,
      .size = s->size,
      .global_ranks = g->global_ranks,
      .global_rank = s->global_ranks[s->rank],
      .timeout_ms = s->timeout_ms,
      .internal = g->internal,
  };
  return DIST_OK;
}

/* The group's keys live under its name and a hash of its members: ranks
 * that each created only the group they are in (a program that calls
 * new_group on the members alone) give different groups one name "g<id>",
 * and without the members in the prefix their engines would read each
 * other's addresses and cross-connect, returning wrong sums at
 * DIST_DEBUG=OFF (DETAIL refuses such groups at creation, wrapper_pg's
 * order.c). */
uint32_t dist__pg_hash_ranks(const int *r, int n) {
  uint32_t h = 2166136261u; /* FNV-1a */
  for (int i = 0; i < n; i++) {
    h ^= (uint32_t)r[i];
    h *= 16777619u;
  }
  return h;
}

static int make_store(dist_pg *g, dist_store *base) {
  uint32_t h = dist__pg_hash_ranks(g->global_ranks, g->info.size);
  char prefix[160];
  snprintf(prefix, sizeof prefix, "pg/%s.%08x", g->name, h);
  int rc = dist_store_prefix_create(prefix, base, DIST_STORE_BORROW, &g->store);
  if (rc != DIST_OK)
    return dist__set_last_error(rc, "group %s: cannot make its store: %s", g->name,
                                dist_last_errmsg());
  return DIST_OK;
}

int dist__pg_build(const dist_backend_ops *ops, const dist__pg_spec *s, void *arg,
                   dist_store *borrowed, dist_pg **out) {
  dist_pg *g = dist__calloc(1, sizeof *g);
  if (!g)
    return dist__set_last_error(DIST_E_NOMEM, "out of memory creating group %s", s->name);
  g->ops = ops;
  int rc;
  DIST_TRY_GOTO(fill_identity(g, s), rc, fail);
  if (s->base_store)
    DIST_TRY_GOTO(make_store(g, s->base_store), rc, fail);
  g->priv = dist__calloc(1, ops->priv_size ? ops->priv_size : 1);
  if (!g->priv) {
    rc = dist__set_last_error(DIST_E_NOMEM, "out of memory creating group %s", s->name);
    goto fail;
  }
  dist_backend_init_args a = {
      .rank = s->rank, .size = s->size, .global_ranks = g->global_ranks,
      .global_rank = g->info.global_rank, .store = g->store ? g->store : borrowed,
      .timeout_ms = s->timeout_ms,
      .group_name = g->name, .group_id = g->internal ? -1 : s->group_id,
      .job_token = dist__job_token(),
      .internal = g->internal, .arg = arg,
      .device_id = g->device_id, .nccl_options = &g->nccl_opts, .parent = s->parent,
      .colls_only = g->internal && (s->flags & DIST_GROUP_COLLECTIVES_ONLY),
  };
  rc = ops->init(g->priv, &a, g);
  if (rc != DIST_OK) {
    dist__set_last_error(rc, "%s", g->err.msg[0] ? g->err.msg : dist_last_errmsg());
    dist__free(g->priv);
    g->priv = NULL;
    goto fail;
  }
  handle_add(g);
  *out = g;
  return DIST_OK;
fail:
  dist_store_destroy(g->store);
  dist__free(g->global_ranks);
  dist__free(g);
  return rc;
}

static void link_group(dist_pg *g) {
  pthread_mutex_lock(&groups_lock);
  g->next = live_groups;
  live_groups = g;
  g->registered = true;
  pthread_mutex_unlock(&groups_lock);
}

static void unlink_group(dist_pg *g) {
  pthread_mutex_lock(&groups_lock);
  for (dist_pg **p = &live_groups; *p; p = &(*p)->next)
    if (*p == g) {
      *p = g->next;
      break;
    }
  g->registered = false;
  pthread_mutex_unlock(&groups_lock);
}

/* A user group gets the next id, may be wrapped, and is announced. */
static int publish_user_group(dist_pg *inner, int group_id, dist_pg **out) {
  inner->info.group_id = group_id;
  dist_pg *g = inner;
  if (wrapper_fn) {
    dist_pg *outer = NULL;
    dist__clear_last_error();
    int rc = wrapper_fn(wrapper_arg, inner, &outer);
    if (rc != DIST_OK) {
      /* The wrapper's message names the group itself when it has one. */
      if (!dist_last_errmsg()[0])
        dist__set_last_error(rc, "wrapping group %s failed", inner->name);
      dist__pg_free(inner);
      return rc;
    }
    if (outer && outer != inner) {
      inner->wrapped = true;
      inner->outer = outer;
      outer->inner = inner;
      outer->info.group_id = inner->info.group_id;
      /* dist_pg_create knows no description: the user's group keeps its own. */
      snprintf(outer->desc, sizeof outer->desc, "%s", inner->desc);
      g = outer;
    }
  }
  link_group(g);
  dist__pg_log_created(g);
  if (dist__obs_on()) {
    dist__obs_emit(g, DIST_EV_GROUP_CREATED, NULL, DIST_OK, -1, NULL);
    char conn[192];
    if (g->info.group_id >= 0 && dist__pg_conn_summary(g, conn, sizeof conn))
      dist__obs_emit(g, DIST_EV_LOG, NULL, DIST_OK, -1, conn);
  }
  *out = g;
  return DIST_OK;
}

int dist__pg_new(const dist__pg_spec *s, dist_pg **out) {
  if (precreate_fn && !(s->flags & DIST_GROUP_INTERNAL))
    DIST_TRY(precreate(s));
  dist_pg *g;
  DIST_TRY(dist__pg_build(s->ops, s, s->arg, NULL, &g));
  if (g->internal) {
    *out = g;
    return DIST_OK;
  }
  return publish_user_group(g, s->group_id, out);
}

/* --- destruction --------------------------------------------------------- */

int dist__pg_free(dist_pg *g) {
  if (!g || g == DIST_GROUP_NON_MEMBER || !handle_remove(g))
    return DIST_OK;
  if (g->registered) {
    unlink_group(g);
    dist__pg_dead_note(g); /* a call on its handle after this names it */
    if (dist__obs_on())
      dist__obs_emit(g, DIST_EV_GROUP_DESTROYED, NULL, DIST_OK, -1, NULL);
  }
  if (g->ops->fini) /* fails whatever is still pending (backend.h) */
    g->ops->fini(g->priv);
  int failed = atomic_load(&g->destroy_failed);
  if (failed && atomic_load(&g->destroying))
    dist__cause_post_destroyed(g, failed, g->destroy_kind, g->destroy_seq);
  int rc = g->fini_rc;
  dist_store_destroy(g->store);
  dist__free(g->priv);
  dist__free(g->global_ranks);
  dist__pg_pairs_free(g);
  dist__free(g);
  return rc;
}

/* Whether a live user group has failed (an abort, a timeout, a lost
 * peer): a program that destroys its groups then is tearing down after
 * that failure, which their pending operations follow from. */
static bool any_failed(void) {
  bool failed = false;
  pthread_mutex_lock(&groups_lock);
  for (dist_pg *g = live_groups; g && !failed; g = g->next)
    failed = atomic_load(&g->async_error) != DIST_OK;
  pthread_mutex_unlock(&groups_lock);
  return failed;
}

static int destroy(dist_pg *g, bool failed, const void *caller) {
  if (g && g != DIST_GROUP_NON_MEMBER && !g->internal) {
    g->destroy_caller = caller;
    if (!failed)
      atomic_store(&g->destroying, true);
  }
  return dist__pg_free(g);
}

int dist__pg_destroy_one(dist_pg *g, const void *caller) {
  return destroy(g, any_failed(), caller);
}

int dist__pg_destroy_all(const void *caller) {
  int first = DIST_OK;
  bool failed = any_failed(); /* before this destroy fails anything */
  for (;;) {
    pthread_mutex_lock(&groups_lock);
    dist_pg *g = live_groups;
    pthread_mutex_unlock(&groups_lock);
    if (!g)
      break;
    int rc = destroy(g, failed, caller);
    first = first != DIST_OK ? first : rc;
  }
  return first;
}

/* --- calls --------------------------------------------------------------- */

static dist_backend_op_fn slot_for(const dist_backend_ops *o, dist_op_kind k) {
  switch (k) {
  case DIST_OP_SEND: return o->send;
  case DIST_OP_RECV: return o->recv;
  case DIST_OP_BATCH_P2P: return o->batch_p2p;
  case DIST_OP_BROADCAST: return o->broadcast;
  case DIST_OP_ALL_REDUCE: return o->all_reduce;
  case DIST_OP_REDUCE: return o->reduce;
  case DIST_OP_ALL_GATHER:
  case DIST_OP_ALL_GATHER_INTO_TENSOR: return o->all_gather;
  case DIST_OP_GATHER: return o->gather;
  case DIST_OP_SCATTER: return o->scatter;
  case DIST_OP_REDUCE_SCATTER:
  case DIST_OP_REDUCE_SCATTER_TENSOR: return o->reduce_scatter;
  case DIST_OP_ALL_TO_ALL:
  case DIST_OP_ALL_TO_ALL_SINGLE: return o->all_to_all;
  case DIST_OP_BARRIER: return o->barrier;
  default: return NULL;
  }
}

void dist__pg_report(dist_pg *g, int rc, const dist_coll *c, char *msg, size_t len) {
  if (g->internal || dist__report_has_head(msg))
    return; /* a helper's failure is relayed by its user; a headed one was logged */
  dist__report_group rg = {g->info.group_id, g->name, g->desc, g->info.size};
  dist__report_head(msg, len, rc, &rg, c->kind, c->seq, msg[0] ? msg : dist_strerror(rc));
  /* A failure that only repeats an earlier one was logged then. */
  if (strstr(msg, "unusable after an earlier failure"))
    DIST_LOG(DEBUG, PG, "%s", msg);
  else
    DIST_LOG(ERROR, PG, "%s", msg);
}

/* The report on g's message (header, log once), mirrored to the thread. */
static void report(dist_pg *g, int rc, const dist_coll *c) {
  dist__pg_report(g, rc, c, g->err.msg, sizeof g->err.msg);
  dist__set_last_error(rc, "%s", g->err.msg);
}

/* Records a failed call on g. A desync becomes the job's cause (cause.c)
 * here, at every debug level; a wrapper's own failures are its to post and
 * what it forwarded was posted by the inner group, so once per call. */
static void note_failure(dist_pg *g, const dist_coll *c, int rc) {
  if (rc == DIST_E_ABORTED || rc == DIST_E_TIMEOUT || rc == DIST_E_PEER_LOST) {
    int expected = DIST_OK;
    atomic_compare_exchange_strong(&g->async_error, &expected, rc);
  }
  report(g, rc, c);
  if (rc == DIST_E_DESYNC && !g->inner)
    dist__cause_post_failure(g, c, rc, g->err.msg);
}

void dist__pg_fini_failure(dist_pg *g, const dist_coll *c, int rc, const char *msg) {
  dist__err_set(&g->err, rc, "%s", msg);
  note_failure(g, c, rc);
  if (g->fini_rc == DIST_OK)
    g->fini_rc = rc;
}

static dist_event_kind end_event(int rc) {
  return rc == DIST_OK ? DIST_EV_OP_COMPLETED
         : rc == DIST_E_TIMEOUT ? DIST_EV_OP_TIMED_OUT
                                : DIST_EV_OP_FAILED;
}

static int call_sync(dist_pg *g, dist_backend_op_fn fn, dist_coll *c) {
  bool obs = !g->internal && dist__obs_on();
  if (obs)
    dist__obs_emit(g, DIST_EV_OP_ISSUED, c, DIST_OK, -1, NULL);
  int rc = fn(g->priv, c, NULL);
  if (__builtin_expect(rc != DIST_OK, 0))
    note_failure(g, c, rc);
  if (obs)
    dist__obs_emit(g, end_event(rc), c, rc, -1, rc ? g->err.msg : NULL);
  return rc;
}

static int call_async(dist_pg *g, dist_backend_op_fn fn, dist_coll *c, dist_work **out) {
  dist_work *w;
  int rc = dist__work_new(g, c, &w);
  if (rc != DIST_OK)
    return dist__err_set(&g->err, rc, "out of memory starting %s", dist_op_name(c->kind));
  bool obs = !g->internal && dist__obs_on();
  if (obs) {
    if (g->ops->caps & DIST_CAP_REPORTS_START) {
      dist__obs_emit(g, DIST_EV_OP_ENQUEUED, &w->coll, DIST_OK, -1, NULL);
    } else {
      atomic_store(&w->started, true); /* its start is announced here */
      dist__obs_emit(g, DIST_EV_OP_ISSUED, &w->coll, DIST_OK, -1, NULL);
    }
  }
  rc = fn(g->priv, &w->coll, w);
  if (rc != DIST_OK) {
    note_failure(g, &w->coll, rc);
    if (obs)
      dist__obs_emit(g, end_event(rc), &w->coll, rc, -1, g->err.msg);
    dist__work_unref(w); /* the backend's reference: it never took the work */
    dist__work_unref(w);
    return rc;
  }
  *out = w;
  return DIST_OK;
}

int dist__pg_reject(dist_pg *g, dist_coll *c, int rc) {
  c->seq = 0; /* a call that never started takes no sequence number */
  report(g, rc, c);
  if (!g->internal && dist__obs_on()) {
    /* What was refused may be malformed (a NULL tensor list): observers
     * see the call without its buffers, and the number it would have
     * taken (pg_seq.c: per kind). */
    dist_coll bare = *c;
    bare.inputs = bare.outputs = NULL;
    bare.n_inputs = bare.n_outputs = bare.n_splits = bare.n_p2p = 0;
    bare.in_splits = bare.out_splits = NULL;
    bare.p2p = NULL;
    bare.seq = (dist_op_is_p2p(c->kind) ? g->p2p_seq : g->coll_seq) + 1;
    dist__obs_emit(g, DIST_EV_OP_REJECTED, &bare, rc, -1, g->err.msg);
  }
  return rc;
}

int dist__pg_call(dist_pg *g, dist_coll *c, dist_work **out) {
  dist__err_clear(&g->err);
  int rc = dist__validate(g, c);
  if (__builtin_expect(rc != DIST_OK, 0))
    return dist__pg_reject(g, c, rc);
  if (__builtin_expect(atomic_load_explicit(&dist__nan_check_on, memory_order_relaxed), 0) &&
      !g->internal && (rc = dist__nan_check_coll(g, c)) != DIST_OK) {
    c->seq = 0; /* nor does one whose input holds NaN or Inf (logged and posted there) */
    dist__set_last_error(rc, "%s", g->err.msg);
    return rc;
  }
  if (!g->internal)
    dist__pg_number(g, c);
  c->timeout_ms = g->timeout_ms;
  if (__builtin_expect(dist__log_on(DIST_LOG_TRACE, DIST_SUBSYS_COLL), 0) && !g->internal)
    dist__pg_log_op(g, c); /* DETAIL: one line per operation */
  dist_backend_op_fn fn = slot_for(g->ops, c->kind);
  if (!fn) {
    dist__err_set(&g->err, DIST_E_NOTSUP, "backend %s does not support %s", g->backend,
                  dist_op_name(c->kind));
    report(g, DIST_E_NOTSUP, c);
    return DIST_E_NOTSUP;
  }
  return out ? call_async(g, fn, c, out) : call_sync(g, fn, c);
}

void dist__pg_begin(dist_pg *g, dist_coll *c) {
  dist__err_clear(&g->err);
  if (!g->internal)
    dist__pg_number(g, c);
  else
    c->seq = c->ord = c->pair_seq = 0;
  if (c->timeout_ms <= 0) /* a call with its own (monitored_barrier) keeps it */
    c->timeout_ms = g->timeout_ms;
  if (__builtin_expect(dist__log_on(DIST_LOG_TRACE, DIST_SUBSYS_COLL), 0) && !g->internal)
    dist__pg_log_op(g, c);
  if (!g->internal && dist__obs_on())
    dist__obs_emit(g, DIST_EV_OP_ISSUED, c, DIST_OK, -1, NULL);
}

int dist__pg_sub(dist_pg *g, dist_coll *piece) {
  int rc = dist__validate(g, piece);
  if (rc != DIST_OK)
    return rc;
  dist_backend_op_fn fn = slot_for(g->ops, piece->kind);
  if (!fn)
    return dist__err_set(&g->err, DIST_E_NOTSUP, "backend %s does not support %s",
                         g->backend, dist_op_name(piece->kind));
  piece->timeout_ms = g->timeout_ms;
  return fn(g->priv, piece, NULL);
}

int dist__pg_sub_recv(dist_pg *g, dist_coll *piece, int *src_group_rank) {
  int rc = dist__validate(g, piece);
  if (rc != DIST_OK)
    return rc;
  if (!g->ops->recv)
    return dist__err_set(&g->err, DIST_E_NOTSUP, "backend %s does not support RECV", g->backend);
  piece->timeout_ms = g->timeout_ms;
  dist_work *w;
  if (dist__work_new(g, piece, &w) != DIST_OK)
    return dist__err_set(&g->err, DIST_E_NOMEM, "out of memory");
  w->quiet = true;
  rc = g->ops->recv(g->priv, &w->coll, w);
  if (rc != DIST_OK) {
    dist__work_unref(w);
    dist__work_unref(w);
    return rc;
  }
  rc = dist_work_synchronize(w, -1);
  if (rc != DIST_OK)
    dist__err_set(&g->err, rc, "%s", w->errmsg);
  else
    *src_group_rank = dist__pg_group_rank_of(g, w->src_rank);
  dist__work_unref(w);
  return rc;
}

int dist__pg_end(dist_pg *g, const dist_coll *c, int rc) {
  if (rc != DIST_OK)
    note_failure(g, c, rc);
  if (!g->internal && dist__obs_on())
    dist__obs_emit(g, end_event(rc), c, rc, -1, rc ? g->err.msg : NULL);
  return rc;
}

dist_store *dist__pg_store(dist_pg *g) {
  while (g && !g->store && g->inner)
    g = g->inner;
  return g ? g->store : NULL;
}

bool dist__pg_is_live(const dist_pg *g) {
  bool live = false;
  pthread_mutex_lock(&groups_lock);
  for (dist_pg *p = live_groups; p && !live; p = p->next)
    live = p == g;
  pthread_mutex_unlock(&groups_lock);
  return live;
}

/* A wrapper without the slot passes the question to the group it wraps;
 * tables older than ABI 4 have no slot at all (reading past them would
 * read beyond a smaller struct). */
int dist__pg_gpu_progress(dist_pg *g, uint64_t seq, dist_gpu_progress *out) {
  for (; g; g = g->inner) {
    const dist_backend_ops *o = g->ops;
    if (o->abi_version >= 4 && o->gpu_progress)
      return o->gpu_progress(g->priv, seq, out);
  }
  return DIST_E_NOTSUP;
}

dist_pg *dist__pg_device_group(dist_pg *g, dist_device_type t) {
  while (g && g != DIST_GROUP_NON_MEMBER && g->inner)
    g = g->inner;
  if (!g || g == DIST_GROUP_NON_MEMBER || (unsigned)t > DIST_DEVICE_CUDA)
    return NULL;
  const dist_backend_ops *o = g->ops;
  if (o->abi_version >= 5 && o->device_group)
    return o->device_group(g->priv, t);
  return o->caps & (t == DIST_DEVICE_CUDA ? DIST_CAP_CUDA : DIST_CAP_CPU) ? g : NULL;
}

const char *dist__pg_transport(const dist_pg *g) {
  g = g ? g : default_pg;
  if (!g || g == DIST_GROUP_NON_MEMBER)
    return NULL;
  while (g->inner)
    g = g->inner;
  const dist_backend_ops *o = g->ops;
  return o->abi_version >= 5 && o->transport ? o->transport(g->priv) : NULL;
}

int dist_pg_forward(dist_pg *g, const dist_coll *c, dist_work *w) {
  if (!g || g == DIST_GROUP_NON_MEMBER || !c)
    return dist__set_last_error(DIST_E_INVAL, "dist_pg_forward: invalid arguments");
  dist__err_clear(&g->err);
  dist_backend_op_fn fn = slot_for(g->ops, c->kind);
  if (!fn)
    return dist__err_set(&g->err, DIST_E_NOTSUP, "backend %s does not support %s",
                         g->backend, dist_op_name(c->kind));
  int rc = fn(g->priv, c, w);
  if (rc != DIST_OK)
    note_failure(g, c, rc);
  return rc;
}

/* --- errors, info, abort ------------------------------------------------- */

int dist_backend_set_error(dist_pg *self, int rc, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  if (self && self != DIST_GROUP_NON_MEMBER)
    dist__err_setv(&self->err, rc, fmt, ap);
  else
    dist__set_last_errorv(rc, fmt, ap);
  va_end(ap);
  return rc;
}

void dist_backend_peer_lost(dist_pg *self, int peer, const char *why) {
  if (!self || self == DIST_GROUP_NON_MEMBER)
    return;
  int expected = DIST_OK;
  atomic_compare_exchange_strong(&self->async_error, &expected, DIST_E_PEER_LOST);
  int global = peer >= 0 && peer < self->info.size ? self->global_ranks[peer] : -1;
  DIST_LOG(DEBUG, PG, "group %s: peer rank %d lost: %s", self->name, global,
           why ? why : ""); /* the engine that noticed has warned already */
  dist_pg *user = self->wrapped ? self->outer : self;
  if (user && !user->internal && dist__obs_on())
    dist__obs_emit(user, DIST_EV_PEER_LOST, NULL, DIST_E_PEER_LOST, global, why);
}

void dist__pg_note(dist_pg *self, const char *line) {
  if (!self || self == DIST_GROUP_NON_MEMBER || !dist__obs_on())
    return;
  dist_pg *user = self->wrapped ? self->outer : self;
  if (user && !user->internal && user->info.group_id >= 0)
    dist__obs_emit(user, DIST_EV_LOG, NULL, DIST_OK, -1, line);
}

const char *dist_errmsg(int rc, dist_pg *group) {
  if (rc == DIST_OK)
    return "";
  if (dist__last_error_status() == rc && dist_last_errmsg()[0])
    return dist_last_errmsg();
  const char *m = dist_pg_errmsg(group);
  if (m && m[0])
    return m;
  return dist_strerror(rc);
}

const char *dist_pg_errmsg(dist_pg *g) {
  g = g ? g : dist__pg_default(); /* no resolve: it would overwrite the message */
  if (!g || g == DIST_GROUP_NON_MEMBER || !dist__pg_handle_live(g))
    return dist_last_errmsg();
  return g->err.msg;
}

int dist_pg_async_error(dist_pg *g) {
  g = dist__pg_resolve(g);
  if (!g || g == DIST_GROUP_NON_MEMBER)
    return DIST_OK;
  int rc = atomic_load(&g->async_error);
  if (rc == DIST_OK && g->ops->async_error)
    rc = g->ops->async_error(g->priv);
  return rc;
}

const dist_pg_info *dist_pg_get_info(dist_pg *g) {
  g = dist__pg_resolve(g);
  return g && g != DIST_GROUP_NON_MEMBER ? &g->info : NULL;
}

int dist__abort_group(dist_pg *g, const char *reason) {
  g = dist__pg_resolve(g);
  if (!g)
    return DIST_E_INVAL;
  if (g == DIST_GROUP_NON_MEMBER)
    return DIST_OK;
  int expected = DIST_OK;
  atomic_compare_exchange_strong(&g->async_error, &expected, DIST_E_ABORTED);
  if (g->ops->abort)
    g->ops->abort(g->priv, reason ? reason : "dist_abort_group");
  return DIST_OK;
}

/* The program's own abort: the reason the peers read names this rank and
 * the group (they may meet it in a checking layer's helper, whose name
 * says nothing), and it is posted as the job's cause before any peer can
 * fail of it, so the verdict names this rank, not the first of the ranks
 * that then give up (pg_cause.c). */
int dist_abort_group(dist_pg *g, const char *reason) {
  dist_pg *r = dist__pg_resolve(g);
  if (!r || r == DIST_GROUP_NON_MEMBER || r->internal)
    return dist__abort_group(g, reason);
  char why[DIST_ERRMSG_LEN];
  snprintf(why, sizeof why, "rank %d called dist_abort_group on group %d (%s): %s",
           r->info.global_rank, r->info.group_id,
           r->info.desc && r->info.desc[0] ? r->info.desc : r->info.name,
           reason ? reason : "no reason given");
  dist__cause_post_abort(r, why);
  return dist__abort_group(g, why);
}

int dist__pg_group_rank_of(const dist_pg *g, int global_rank) {
  for (int i = 0; i < g->info.size; i++)
    if (g->global_ranks[i] == global_rank)
      return i;
  return -1;
}
