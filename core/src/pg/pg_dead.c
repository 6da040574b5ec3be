/* pg_dead.c - calls on a dead handle: the user groups this process
 * destroyed, remembered by their handle (never dereferenced), so that an
 * operation called on one after its destroy is refused naming that group,
 * and heard by the observers as any refused call is (DIST_EV_OP_REJECTED):
 * on that group's id, with the number the call would have taken. The
 * monitor's record and the trace then name the call and its line, where
 * the bug is, not the last call that completed before it. A handle never
 * created (or forgotten here: DEAD_MAX destroys later) is refused the
 * same way, on no group (id -1). An address a later group reuses is live
 * again and forgotten here (dist__pg_dead_forget). */
#include <ctype.h>
#include <stdio.h>

#include "pg_int.h"

#define DEAD_MAX 64

typedef struct dead_group {
  const void *handle;           /* NULL: a free slot */
  dist_pg_info info;            /* strings below; global_ranks NULL */
  char name[128], desc[128], backend[64];
  uint64_t coll_seq, p2p_seq;   /* its last numbers (dist_coll.seq) */
} dead_group;

static pthread_mutex_t dead_mu = PTHREAD_MUTEX_INITIALIZER;
static dead_group dead[DEAD_MAX];
static unsigned dead_next; /* the oldest gives way */

void dist__pg_dead_note(const dist_pg *g) {
  pthread_mutex_lock(&dead_mu);
  dead_group *d = &dead[dead_next++ % DEAD_MAX];
  *d = (dead_group){.handle = g, .info = g->info, .coll_seq = g->coll_seq,
                    .p2p_seq = g->p2p_seq};
  snprintf(d->name, sizeof d->name, "%s", g->info.name ? g->info.name : "");
  snprintf(d->desc, sizeof d->desc, "%s", g->info.desc ? g->info.desc : "");
  snprintf(d->backend, sizeof d->backend, "%s", g->info.backend ? g->info.backend : "");
  d->info.name = d->name;
  d->info.desc = d->desc;
  d->info.backend = d->backend;
  d->info.global_ranks = NULL; /* freed with the group */
  pthread_mutex_unlock(&dead_mu);
}

void dist__pg_dead_forget(const dist_pg *g) {
  pthread_mutex_lock(&dead_mu);
  for (unsigned i = 0; i < DEAD_MAX; i++)
    if (dead[i].handle == g)
      dead[i].handle = NULL;
  pthread_mutex_unlock(&dead_mu);
}

/* The group g was, into *out; false when this process never destroyed a
 * group at that address (or forgot it). */
static bool dead_find(const void *g, dead_group *out) {
  bool found = false;
  pthread_mutex_lock(&dead_mu);
  for (unsigned i = 0; i < DEAD_MAX && !found; i++)
    if (g && dead[i].handle == g) {
      *out = dead[i];
      found = true;
    }
  pthread_mutex_unlock(&dead_mu);
  if (found) { /* the copy's strings are its own */
    out->info.name = out->name;
    out->info.desc = out->desc;
    out->info.backend = out->backend;
  }
  return found;
}

/* "all_reduce" for ALL_REDUCE: the public call's name, as messages say it. */
static const char *call_name(dist_op_kind k, char *buf, size_t len) {
  snprintf(buf, len, "%s", dist_op_name(k));
  for (char *p = buf; *p; p++)
    *p = (char)tolower((unsigned char)*p);
  return buf;
}

/* Refuses k on the dead handle g (DIST_E_INVAL, the thread's message) and
 * tells the observers. */
static void refuse(const dist_pg *g, dist_op_kind k, const void *caller) {
  dead_group d;
  char fn[32];
  call_name(k, fn, sizeof fn);
  bool known = dead_find(g, &d);
  if (known)
    dist__set_last_error(DIST_E_INVAL, "%s: group %d (%s) is not a live process group: it "
                         "was destroyed already (this rank called dist_destroy_process_group "
                         "on it; a handle dies with its group)", fn, d.info.group_id,
                         d.desc[0] ? d.desc : d.name);
  else
    dist__pg_stale(fn, g);
  const char *msg = dist_last_errmsg();
  DIST_LOG(ERROR, PG, "%s", msg); /* born here: no group holds it */
  dist_pg *dflt = dist__pg_default();
  if (!dist__obs_on() || !dflt)
    return;
  if (!known) /* on no group: its id is not known */
    d.info = (dist_pg_info){.group_id = -1, .name = "", .desc = "", .backend = "",
                            .rank = -1, .global_rank = dflt->info.global_rank};
  dist_coll bare;
  memset(&bare, 0, sizeof bare);
  bare.kind = k;
  bare.root = -1;
  bare.caller = caller;
  if (known) /* the number it would have taken (pg_seq.c: per kind) */
    bare.seq = (dist_op_is_p2p(k) ? d.p2p_seq : d.coll_seq) + 1;
  dist__obs_emit_gone(&d.info, DIST_EV_OP_REJECTED, &bare, DIST_E_INVAL, msg);
}

dist_pg *dist__pg_resolve_op(dist_pg *g, dist_op_kind k, const void *caller) {
  dist_pg *r = dist__pg_resolve(g);
  if (!r && g)
    refuse(g, k, caller);
  return r;
}
