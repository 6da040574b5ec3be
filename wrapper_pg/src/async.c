/* async.c - the check of an asynchronous operation.
 *
 * DESIGN. A synchronous exchange inside an async call would make the call
 * block until every member has issued the same operation: two groups whose
 * async operations the ranks start in opposite orders (legal: the works
 * complete independently) would then wait for each other. So the async call
 * only posts its record (the same fingerprint a synchronous check sends) as
 * an async all_gather on the helper and returns at once; the
 * group's checking thread, started at the first async call, takes the
 * posted checks in issue order, waits for each exchange, compares, and
 * either hands the operation to the inner group (which completes the work)
 * or completes the work itself with the report (DIST_E_DESYNC, no buffer
 * touched) or the absent ranks (DIST_E_TIMEOUT / DIST_E_PEER_LOST).
 *
 * Ordering: helper operations complete in issue order, and the thread is the
 * only caller of the inner group while checks are pending; a synchronous
 * call (or point-to-point) on the group first waits until every pending
 * check has been handed on (wpg_drain), so it never overtakes them, and the
 * inner backend runs its own queue in order. The issuing side counts the
 * operation and rolls the history at issue (the next record needs them).
 * A disagreement's details meet in the job's store, not on the helper (it
 * may already carry later records): exchange.c. DIST_SHOW_STACKTRACES has
 * no stack to show for an async call (the checking thread's says nothing). */
#include <stdlib.h>
#include <string.h>

#include "wpg_int.h"

typedef struct wpg_pending {
  struct wpg_pending *next;
  dist_work *wk;        /* the outer work: completed by us or the inner group */
  dist_work *hw;        /* the helper's all_gather */
  uint64_t count;       /* the collective count the exchange is for */
  uint64_t hist0;       /* the history before it */
  wpg_fp me;            /* this rank's record */
  int64_t digest[WPG_DIGEST_N]; /* reduced in place by the helper */
} wpg_pending;

/* The same digest as a synchronous check's (digest.c), so that a rank in a
 * synchronous call and one in an asynchronous call meet in one exchange
 * and the disagreement is theirs, not the helper's sizes. */
static int settle(wpg *w, wpg_pending *e, const dist_coll *c, int rc) {
  if (rc != DIST_OK)
    return wpg_absent(w, c, e->count, rc, dist_work_errmsg(e->hw));
  wpg_rx_add(sizeof e->digest);
  return wpg_decide(w, c, &e->me, e->digest, false);
}

/* One posted check, on the checking thread. */
static void finish(wpg *w, wpg_pending *e) {
  const dist_coll *c = dist_work_coll(e->wk);
  /* The helper's operation ends within its own timeout; this bound only
   * guards against a backend that never completes it. */
  int rc = dist_work_wait(e->hw, 2 * w->info->timeout_ms + 10000);
  if (rc == DIST_OK || dist_work_is_completed(e->hw))
    rc = dist_work_status(e->hw);
  char *msg = malloc(WPG_MSG_LEN);
  if (!msg) {
    dist_backend_work_done(e->wk, DIST_E_NOMEM, -1, "out of memory checking an async call");
    return;
  }
  wpg_capture(msg, WPG_MSG_LEN);
  rc = settle(w, e, c, rc);
  wpg_capture(NULL, 0);
  if (rc != DIST_OK && !atomic_load(&w->rewind)) { /* the first failure since */
    w->rewind_count = e->count - 1;
    w->rewind_hist = e->hist0;
    atomic_store_explicit(&w->rewind, true, memory_order_release);
  }
  pthread_mutex_lock(&w->qlock);
  bool closing = w->closing; /* after this, fini's abort reaches the inner group */
  pthread_mutex_unlock(&w->qlock);
  if (rc == DIST_OK && closing) {
    /* The exchange may have completed (a peer was in it) before the
     * destroy: handed on, the work could complete here while the peer,
     * gone on to its next collective, finds the helper aborted, and the
     * job's cause would not name this rank's destroy (core counts the
     * works a destroy fails). */
    dist_backend_work_done(e->wk, DIST_E_ABORTED, -1,
                           "the group was destroyed with operations pending");
  } else if (rc != DIST_OK) {
    dist_backend_work_done(e->wk, rc, -1, msg);
  } else {
    rc = dist_pg_forward(w->inner, c, e->wk);
    if (rc != DIST_OK) /* the inner group did not take it: the work is ours */
      dist_backend_work_done(e->wk, rc, -1, dist_pg_errmsg(w->inner));
  }
  free(msg);
}

static void *run(void *arg) {
  wpg *w = arg;
  char name[16]; /* a library thread: the monitor's deadlock proof tells them by name */
  snprintf(name, sizeof name, "dist-wpg-%d", w->info->group_id);
  pthread_setname_np(pthread_self(), name);
  pthread_mutex_lock(&w->qlock);
  for (;;) {
    while (!w->head && !w->stop)
      pthread_cond_wait(&w->qcv, &w->qlock);
    wpg_pending *e = w->head;
    if (!e)
      break; /* stopping, nothing left */
    pthread_mutex_unlock(&w->qlock);
    finish(w, e);
    dist_work_free(e->hw);
    pthread_mutex_lock(&w->qlock);
    w->head = e->next;
    if (!w->head)
      w->tail = NULL;
    free(e);
    atomic_fetch_sub(&w->pending, 1);
    pthread_cond_broadcast(&w->qcv);
  }
  pthread_mutex_unlock(&w->qlock);
  return NULL;
}

static int start_thread(wpg *w) {
  if (w->have_thread)
    return DIST_OK;
  int e = pthread_create(&w->thread, NULL, run, w);
  if (e)
    return wpg_set_error(w, DIST_E_NOMEM, "group %d: cannot start the checking layer's "
                         "thread: %s", w->info->group_id, strerror(e));
  w->have_thread = true;
  return DIST_OK;
}

int wpg_check_async(wpg *w, const dist_coll *c, dist_work *wk) {
  char why[512];
  int rc = wpg_helper_ensure(w, why, sizeof why);
  if (rc != DIST_OK) /* a member never came to make it: fails at once */
    return wpg_absent(w, c, w->coll_count + 1, rc, why);
  if ((rc = start_thread(w)) != DIST_OK)
    return rc;
  wpg_pending *e = calloc(1, sizeof *e);
  if (!e)
    return wpg_set_error(w, DIST_E_NOMEM, "out of memory checking an async call");
  e->wk = wk;
  wpg_rewind(w);
  e->count = w->coll_count + 1;
  e->hist0 = w->hist;
  wpg_fp_make(w, c, &e->me);
  wpg_site_locate(&w->sites, c->caller, &e->me.caller_off, &e->me.module);
  wpg_fp_site_history(w, &e->me);
  wpg_fp_non_member(w, &e->me);
  wpg_digest_make(&e->me, e->digest);
  dist_tensor t = dist_tensor_1d(e->digest, DIST_INT64, WPG_DIGEST_N);
  rc = dist_all_reduce(&t, DIST_MIN, w->helper, &e->hw);
  if (rc != DIST_OK) {
    free(e);
    return wpg_set_error(w, rc, "group %d: posting the check of %s #%llu: %s",
                         w->info->group_id, dist_op_name(wpg_kind(c)),
                         (unsigned long long)c->seq, dist_pg_errmsg(w->helper));
  }
  w->coll_count++; /* counted at issue: the next record follows this one */
  w->hist = wpg_roll(w->hist, wpg_fp_hash(&e->me));
  pthread_mutex_lock(&w->qlock);
  if (w->tail)
    w->tail->next = e;
  else
    w->head = e;
  w->tail = e;
  atomic_fetch_add(&w->pending, 1);
  pthread_cond_broadcast(&w->qcv);
  pthread_mutex_unlock(&w->qlock);
  return DIST_OK;
}

void wpg_rewind(wpg *w) {
  if (!atomic_load_explicit(&w->rewind, memory_order_acquire))
    return;
  w->coll_count = w->rewind_count;
  w->hist = w->rewind_hist;
  atomic_store_explicit(&w->rewind, false, memory_order_release);
}

void wpg_drain(wpg *w) {
  pthread_mutex_lock(&w->qlock);
  while (atomic_load(&w->pending) > 0)
    pthread_cond_wait(&w->qcv, &w->qlock);
  pthread_mutex_unlock(&w->qlock);
}

uint64_t wpg_async_close(wpg *w) {
  if (!w->q_init)
    return 0;
  pthread_mutex_lock(&w->qlock);
  w->closing = true;
  uint64_t first = w->head ? w->head->count : 0;
  pthread_mutex_unlock(&w->qlock);
  return first;
}

void wpg_async_stop(wpg *w) {
  if (!w->have_thread)
    return;
  pthread_mutex_lock(&w->qlock);
  w->stop = true;
  pthread_cond_broadcast(&w->qcv);
  pthread_mutex_unlock(&w->qlock);
  pthread_join(w->thread, NULL);
  w->have_thread = false;
}
