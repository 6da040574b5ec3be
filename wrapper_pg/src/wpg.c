/* wpg.c - the checking process group: a filter over core's backend vtable
 * (curl's connection filters, c10d's ProcessGroupWrapper).
 *
 * Two interposer hooks. Before a new user group connects, the precreate
 * hook (order.c) compares the members' views of it. Once it exists, the
 * wrapper hook runs the init-time agreement on the default group (agree.c,
 * at every level) and, at DIST_DEBUG=DETAIL, returns a checking group whose
 * slots check each collective (exchange.c) and then forward it unchanged to
 * the inner group. The vtable is copied per inner backend name, so
 * dist_get_backend still says "cpu".
 *
 * A user group's helper is made while the group is created (a collective
 * among its members, like the group itself). The default group's is made
 * at its first collective, since the default group does not exist yet
 * while its hook runs, or earlier when another group of every rank is
 * created: so every rank makes its helpers over one member list in one
 * order, and their names agree. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "wpg_int.h"

static wpg *default_wpg; /* the wrapped default group, for its helper */

/* --- slots --------------------------------------------------------------- */

static int forward(wpg *w, const dist_coll *c, dist_work *wk) {
  int rc = dist_pg_forward(w->inner, c, wk);
  if (__builtin_expect(rc != DIST_OK, 0))
    dist_backend_set_error(w->self, rc, "%s", dist_pg_errmsg(w->inner));
  return rc;
}

/* A synchronous check on the caller's thread, once the async ones before
 * it are handed on (one atomic load when there are none). */
static int check_sync(wpg *w, const dist_coll *c) {
  if (__builtin_expect(atomic_load_explicit(&w->pending, memory_order_acquire) != 0, 0))
    wpg_drain(w);
  if (__builtin_expect(atomic_load_explicit(&w->rewind, memory_order_relaxed), 0))
    wpg_rewind(w);
  return wpg_check_coll(w, c);
}

/* A list entry's piece (api/uneven.c: one broadcast or reduce per entry of
 * a list whose entries differ in size) is checked as the call it is part
 * of, once, at its first piece, so that it meets the same call run in one
 * piece by a rank whose list is even: ranks whose lists agree agree, and
 * a report names the call and the entry that differs, never a broadcast.
 * The call's later pieces go through unchecked. */
static int list_piece(wpg *w, const dist_coll *c, const dist_coll *call, dist_work *wk) {
  if (call->ord != w->list_ord) {
    int rc = check_sync(w, call); // pieces run synchronously (uneven.c)
    if (rc != DIST_OK)
      return rc;
    w->list_ord = call->ord;
  }
  return forward(w, c, wk);
}

/* An async call's check runs on the group's checking thread (async.c); a
 * synchronous one on the caller's. */
static int coll(void *priv, const dist_coll *c, dist_work *wk) {
  wpg *w = priv;
  const dist_coll *call = dist_coll_list_call(c);
  if (__builtin_expect(call != NULL, 0))
    return list_piece(w, c, call, wk);
  if (wk && w->size > 1)
    return wpg_check_async(w, c, wk);
  int rc = check_sync(w, c);
  return rc != DIST_OK ? rc : forward(w, c, wk);
}

/* Point-to-point passes through to the inner group, where the messages
 * match: at DETAIL the CPU backend's matched-send check compares dtype and
 * shape as well as size and fails both sides before the data reaches the
 * receive's buffer (a check here would have to block a receive until its
 * sender's record came, and at this seam a receive cannot be told from an
 * irecv, so a ring of irecvs would wait for each other). Point-to-point
 * calls take no collective count and stay out of the history hash. */
static int p2p(void *priv, const dist_coll *c, dist_work *wk) {
  wpg *w = priv;
  if (__builtin_expect(atomic_load_explicit(&w->pending, memory_order_acquire) != 0, 0))
    wpg_drain(w); /* after the collectives issued before it */
  return forward(w, c, wk);
}

static int async_error(void *priv) {
  return dist_pg_async_error(((wpg *)priv)->inner);
}

/* --- lifetime ------------------------------------------------------------ */

/* Live checking groups, so that a rank that exits without destroying them
 * still leaves its record for the others (atexit). */
static wpg *live;
static pthread_mutex_t live_lock = PTHREAD_MUTEX_INITIALIZER;

static void link_live(wpg *w) {
  pthread_mutex_lock(&live_lock);
  w->next_live = live;
  live = w;
  pthread_mutex_unlock(&live_lock);
}

static void unlink_live(wpg *w) {
  pthread_mutex_lock(&live_lock);
  for (wpg **p = &live; *p; p = &(*p)->next_live)
    if (*p == w) {
      *p = w->next_live;
      break;
    }
  pthread_mutex_unlock(&live_lock);
}

static void leave_all(void) {
  pthread_mutex_lock(&live_lock);
  for (wpg *w = live; w; w = w->next_live)
    if (!atomic_load(&w->pending)) /* a check in flight owns the records */
      wpg_leave(w, true);
  pthread_mutex_unlock(&live_lock);
}

static void release(wpg *w) {
  if (w->q_init) {
    pthread_mutex_destroy(&w->qlock);
    pthread_cond_destroy(&w->qcv);
    w->q_init = false;
  }
  free(w->all);
  free(w->prev);
  free(w->ident);
  w->all = w->prev = NULL;
}

static int init(void *priv, const dist_backend_init_args *a, dist_pg *self) {
  wpg *w = priv;
  w->self = self;
  w->inner = a->arg;
  w->info = dist_pg_get_info(w->inner);
  w->size = w->info->size;
  w->rank = w->info->rank;
  w->nm_seen = dist__pg_non_member_calls(NULL, NULL); /* calls before it existed are not its */
  size_t n = (size_t)w->size;
  w->all = calloc(n, sizeof *w->all);
  w->prev = calloc(n, sizeof *w->prev);
  w->ident = calloc(n, sizeof *w->ident);
  if (w->all && w->prev && w->ident) {
    pthread_mutex_init(&w->qlock, NULL);
    pthread_cond_init(&w->qcv, NULL);
    w->q_init = true;
  }
  if (!w->all || !w->prev || !w->ident) {
    release(w);
    return dist_backend_set_error(self, DIST_E_NOMEM, "out of memory wrapping group %d",
                                  w->info->group_id);
  }
  if (w->info->group_id == 0) {
    default_wpg = w;
    link_live(w);
    return DIST_OK;
  }
  int rc = DIST_OK;
  char why[512] = "";
  if (w->size == 1)
    return DIST_OK; /* no helper: a group of one has nothing to compare */
  if (default_wpg && w->size == default_wpg->size) /* same member list: same order */
    rc = wpg_helper_ensure(default_wpg, why, sizeof why);
  if (rc == DIST_OK)
    rc = wpg_helper_ensure(w, why, sizeof why);
  if (rc == DIST_OK)
    link_live(w);
  if (rc != DIST_OK) {
    dist_backend_set_error(self, rc, "%s", why);
    if (w->helper)
      dist_destroy_process_group(w->helper);
    w->helper = NULL;
    release(w);
  }
  return rc;
}

static void fini(void *priv) {
  wpg *w = priv;
  if (default_wpg == w)
    default_wpg = NULL;
  unlink_live(w);
  /* A check that failed before the destroy did not count (rewound); the
   * ones the destroy fails did: the program issued those calls, and a
   * peer that comes to one is told this rank destroyed the group with it
   * pending, not that this rank left before it. */
  bool failed_before = atomic_load_explicit(&w->rewind, memory_order_acquire);
  uint64_t issued = w->coll_count;
  /* before the abort: a check not handed on fails here */
  uint64_t pending_from = wpg_async_close(w);
  if (atomic_load(&w->pending) && w->helper) /* checks still waiting end now */
    dist__abort_group(w->helper, "the group was destroyed with operations pending");
  wpg_async_stop(w);
  wpg_rewind(w);
  if (!failed_before) {
    w->coll_count = issued;
    w->pending_from = pending_from;
  }
  wpg_leave(w, false); /* before the helper goes: a peer still waiting names us */
  if (w->helper)
    dist_destroy_process_group(w->helper);
  dist_destroy_process_group(w->inner);
  release(w);
}

static void abort_(void *priv, const char *why) {
  wpg *w = priv;
  dist_pg *h = __atomic_load_n(&w->helper, __ATOMIC_ACQUIRE);
  if (h)
    dist__abort_group(h, why);
  dist__abort_group(w->inner, why);
}

static const dist_backend_ops wpg_ops = {
    .abi_version = DIST_BACKEND_ABI_VERSION,
    .name = "wpg",
    .caps = DIST_CAP_CPU | DIST_CAP_CUDA,
    .priv_size = sizeof(wpg),
    .init = init,
    .fini = fini,
    .abort = abort_,
    .send = p2p,
    .recv = p2p,
    .batch_p2p = p2p,
    .broadcast = coll,
    .all_reduce = coll,
    .reduce = coll,
    .all_gather = coll,
    .gather = coll,
    .scatter = coll,
    .reduce_scatter = coll,
    .all_to_all = coll,
    .barrier = coll,
    .async_error = async_error,
};

/* One copy of the table per inner backend, named after it. */
#define MAX_TABLES 8
static dist_backend_ops tables[MAX_TABLES];
static char table_names[MAX_TABLES][64]; /* a name or a device map */
static pthread_mutex_t tables_lock = PTHREAD_MUTEX_INITIALIZER;

static const dist_backend_ops *table_for(const char *backend) {
  const dist_backend_ops *t = &wpg_ops;
  pthread_mutex_lock(&tables_lock);
  for (int i = 0; i < MAX_TABLES; i++) {
    if (!table_names[i][0]) {
      snprintf(table_names[i], sizeof table_names[i], "%s", backend);
      tables[i] = wpg_ops;
      tables[i].name = table_names[i];
    }
    if (!strcmp(table_names[i], backend)) {
      t = &tables[i];
      break;
    }
  }
  pthread_mutex_unlock(&tables_lock);
  return t;
}

/* --- the interposer hook -------------------------------------------------- */

static int wrap(dist_pg *inner, dist_pg **out) {
  const dist_pg_info *i = dist_pg_get_info(inner);
  dist_backend_init_args a = {
      .rank = i->rank, .size = i->size, .global_ranks = i->global_ranks,
      .global_rank = i->global_rank, .timeout_ms = i->timeout_ms, .group_name = i->name,
      .group_id = i->group_id, .arg = inner,
  };
  return dist_pg_create(table_for(i->backend), &a, out);
}

static int hook(void *arg, dist_pg *inner, dist_pg **out) {
  (void)arg;
  const dist_pg_info *i = dist_pg_get_info(inner);
  *out = inner;
  if (i->group_id == 0) {
    int rc = wpg_agree_init(i);
    if (rc != DIST_OK)
      return rc;
  }
  if (dist_get_debug_level() < DIST_DEBUG_DETAIL)
    return DIST_OK; /* OFF and INFO: nothing wrapped, nothing paid */
  return wrap(inner, out);
}

void dist_wpg_install(void) {
  dist_set_group_wrapper(hook, NULL);
  dist_set_group_precreate_hook(wpg_order_check, NULL);
  dist__set_group_outside_check(wpg_order_outside);
}

/* The bundled library registers the layer when it loads. */
__attribute__((constructor)) static void wpg_load(void) {
  dist_wpg_install();
  atexit(leave_all);
}
