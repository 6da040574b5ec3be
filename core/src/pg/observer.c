/* observer.c - the observer seam: registration and event delivery.
 *
 * With no observer registered an event costs one relaxed load
 * (dist__obs_on), and the caller skips even building it. Registration is
 * rare and not concurrent with events (observer.h says so), so delivery
 * reads the table without a lock. An observer that cannot take
 * DIST_EV_OP_ISSUED (ABI 1, or not in its mask) receives it split into
 * ENQUEUED and STARTED (observer.h, ABI 2). */
#include <stdio.h>

#include "pg_int.h"

typedef struct obs_slot {
  const dist_observer *obs;
  void *ctx;
  bool inited;
  bool split_issued; /* deliver OP_ISSUED as ENQUEUED + STARTED */
} obs_slot;

_Atomic int dist__obs_active;
static obs_slot slots[DIST_MAX_OBSERVERS];
static int n_slots;
static dist_pg *default_group; /* set while the default group lives */

static void deliver(const obs_slot *s, dist_event *ev);

/* The default group was announced before any observer ran: each observer
 * hears of it right after its init. */
static void announce_default(obs_slot *s) {
  dist_pg *g = default_group;
  dist_event ev = {
      .kind = DIST_EV_GROUP_CREATED, .group_id = g->info.group_id,
      .rank = g->info.global_rank, .group_rank = g->info.rank, .seq = dist__pg_seq(g),
      .t_ns = dist_clock_ns(), .group = &g->info, .peer = -1, .pg = g,
  };
  deliver(s, &ev);
  char conn[192];
  if (dist__pg_conn_summary(g, conn, sizeof conn)) { /* the trace records it */
    ev.kind = DIST_EV_LOG;
    ev.message = conn;
    deliver(s, &ev);
  }
}

static void obs_init_one(obs_slot *s) {
  int rc = s->obs->init ? s->obs->init(&s->ctx, &default_group->info) : DIST_OK;
  if (rc != DIST_OK) {
    DIST_LOG(WARNING, CORE, "observer %s failed to start (%s); it is disabled",
             s->obs->name ? s->obs->name : "?", dist_status_name(rc));
    return;
  }
  s->inited = true;
  announce_default(s);
}

/* Log lines at DETAIL reach the observers through the default group. */
static void log_to_observers(dist_log_level lvl, const char *line) {
  (void)lvl;
  dist_pg *g = default_group;
  if (g)
    dist__obs_emit(g, DIST_EV_LOG, NULL, DIST_OK, -1, line);
}

static void recount(void) {
  int live = 0;
  for (int i = 0; i < n_slots; i++)
    live += slots[i].inited;
  atomic_store(&dist__obs_active, live);
  atomic_store(&dist__log_hook, live && default_group ? log_to_observers : NULL);
}

int dist_observer_register(const dist_observer *obs) {
  if (!obs || !obs->on_event)
    return dist__set_last_error(DIST_E_INVAL, "an observer needs on_event");
  if (obs->abi_version == 0 || obs->abi_version > DIST_OBSERVER_ABI_VERSION)
    return dist__set_last_error(DIST_E_INVAL,
                                "observer %s was built for ABI %u; this library has %u",
                                obs->name ? obs->name : "?", obs->abi_version,
                                DIST_OBSERVER_ABI_VERSION);
  for (int i = 0; i < n_slots; i++)
    if (slots[i].obs == obs)
      return dist__set_last_error(DIST_E_INVAL, "observer %s is already registered",
                                  obs->name ? obs->name : "?");
  if (n_slots == DIST_MAX_OBSERVERS)
    return dist__set_last_error(DIST_E_INVAL, "at most %d observers", DIST_MAX_OBSERVERS);
  slots[n_slots] = (obs_slot){
      .obs = obs,
      .split_issued = obs->abi_version < 2 ||
                      !(obs->event_mask & DIST_EV_BIT(DIST_EV_OP_ISSUED)),
  };
  if (default_group)
    obs_init_one(&slots[n_slots]);
  n_slots++;
  recount();
  return DIST_OK;
}

int dist_observer_unregister(const dist_observer *obs) {
  for (int i = 0; i < n_slots; i++) {
    if (slots[i].obs != obs)
      continue;
    if (slots[i].inited && obs->fini)
      obs->fini(slots[i].ctx);
    slots[i] = slots[--n_slots];
    recount();
    return DIST_OK;
  }
  return dist__set_last_error(DIST_E_INVAL, "observer is not registered");
}

void dist__obs_start(dist_pg *g) {
  dist__clock_calibrate();
  default_group = g;
  for (int i = 0; i < n_slots; i++)
    if (!slots[i].inited)
      obs_init_one(&slots[i]);
  recount();
}

void dist__obs_stop(void) {
  for (int i = 0; i < n_slots; i++) {
    if (slots[i].inited && slots[i].obs->fini)
      slots[i].obs->fini(slots[i].ctx);
    slots[i].inited = false;
    slots[i].ctx = NULL;
  }
  default_group = NULL;
  recount();
}

void dist__obs_emit(dist_pg *g, dist_event_kind kind, const dist_coll *c, int status,
                    int peer, const char *msg) {
  dist_event ev = {
      .kind = kind,
      .group_id = g->info.group_id,
      .rank = g->info.global_rank,
      .group_rank = g->info.rank,
      .seq = c ? c->seq : dist__pg_seq(g),
      .t_ns = dist_clock_ns(),
      .coll = c,
      .group = &g->info,
      .status = status,
      .peer = peer,
      .message = msg,
      .caller = c ? c->caller : kind == DIST_EV_GROUP_DESTROYED ? g->destroy_caller : NULL,
      .pg = g,
      /* Every emitter of a failure passes the failing object's own
       * message buffer (DIST_ERRMSG_LEN bytes): the group's or the
       * work's. */
      .op_msg_ = (kind == DIST_EV_OP_FAILED || kind == DIST_EV_OP_TIMED_OUT) && msg
                     ? (char *)msg
                     : NULL,
  };
  for (int i = 0; i < n_slots; i++)
    if (slots[i].inited)
      deliver(&slots[i], &ev);
}

void dist__obs_emit_gone(const dist_pg_info *info, dist_event_kind kind, const dist_coll *c,
                         int status, const char *msg) {
  dist_event ev = {
      .kind = kind, .group_id = info->group_id, .rank = info->global_rank,
      .group_rank = info->rank, .seq = c ? c->seq : 0, .t_ns = dist_clock_ns(), .coll = c,
      .group = info, .status = status, .peer = -1, .message = msg,
      .caller = c ? c->caller : NULL, .pg = NULL, /* the group is gone */
  };
  for (int i = 0; i < n_slots; i++)
    if (slots[i].inited)
      deliver(&slots[i], &ev);
}

void dist__obs_emit_gpu(dist_pg *g, const dist_coll *c, int64_t start_ns, int64_t end_ns) {
  dist_event ev = {
      .kind = DIST_EV_OP_GPU, .group_id = g->info.group_id, .rank = g->info.global_rank,
      .group_rank = g->info.rank, .seq = c->seq, .t_ns = dist_clock_ns(), .coll = c,
      .group = &g->info, .peer = -1, .caller = c->caller, .pg = g,
      .gpu_start_ns = start_ns, .gpu_end_ns = end_ns,
  };
  for (int i = 0; i < n_slots; i++)
    if (slots[i].inited)
      deliver(&slots[i], &ev);
}

static void deliver(const obs_slot *s, dist_event *ev) {
  uint32_t mask = s->obs->event_mask;
  if (ev->kind == DIST_EV_OP_ISSUED && s->split_issued) {
    ev->kind = DIST_EV_OP_ENQUEUED;
    if (mask & DIST_EV_BIT(DIST_EV_OP_ENQUEUED))
      s->obs->on_event(s->ctx, ev);
    ev->kind = DIST_EV_OP_STARTED;
    if (mask & DIST_EV_BIT(DIST_EV_OP_STARTED))
      s->obs->on_event(s->ctx, ev);
    ev->kind = DIST_EV_OP_ISSUED; /* the next observer may take it whole */
    return;
  }
  if (mask & DIST_EV_BIT(ev->kind))
    s->obs->on_event(s->ctx, ev);
}

void dist_observer_emit_report(dist_pg *g, dist_event_kind kind, int status,
                               const char *message) {
  g = dist__pg_resolve(g);
  if (!g || g == DIST_GROUP_NON_MEMBER || g->internal || !dist__obs_on())
    return;
  if (kind != DIST_EV_DESYNC_REPORT && kind != DIST_EV_STALL_REPORT &&
      kind != DIST_EV_DIAGNOSIS && kind != DIST_EV_LOG)
    return;
  dist__obs_emit(g, kind, NULL, status, -1, message);
}

int dist_observer_set_message(const dist_event *ev, const char *message) {
  if (!ev || !ev->op_msg_ || !message)
    return dist__set_last_error(DIST_E_INVAL, "dist_observer_set_message: only inside "
                                "on_event of a failed or timed-out operation");
  if (message != ev->op_msg_)
    snprintf(ev->op_msg_, DIST_ERRMSG_LEN, "%s", message);
  return DIST_OK;
}

/* DIST_EV_STATS for the group info describes (pg: its handle, NULL when
 * the group is ending), to every observer. */
static void emit_stats(const dist_pg_info *info, dist_pg *pg, uint64_t seq,
                       const dist_stats_row *rows, size_t n, const char *message) {
  dist_event ev = {
      .kind = DIST_EV_STATS, .group_id = info->group_id, .rank = info->global_rank,
      .group_rank = info->rank, .seq = seq, .t_ns = dist_clock_ns(), .group = info,
      .peer = -1, .message = message, .pg = pg, .stats = rows, .n_stats = n,
  };
  for (int i = 0; i < n_slots; i++)
    if (slots[i].inited)
      deliver(&slots[i], &ev);
}

void dist_observer_emit_stats(dist_pg *g, const dist_stats_row *rows, size_t n,
                              const char *message) {
  g = dist__pg_resolve(g);
  if (!g || g == DIST_GROUP_NON_MEMBER || g->internal || !dist__obs_on() || (n && !rows))
    return;
  emit_stats(&g->info, g, dist__pg_seq(g), rows, n, message);
}

void dist_observer_emit_group_stats(const dist_pg_info *group, uint64_t seq,
                                    const dist_stats_row *rows, size_t n, const char *message) {
  if (!group || group->internal || group->group_id < 0 || !dist__obs_on() || (n && !rows))
    return;
  emit_stats(group, NULL, seq, rows, n, message);
}

void dist_observer_emit_straggler(const dist_pg_info *group, uint64_t seq, int straggler_rank,
                                  const char *message) {
  if (!group || group->internal || group->group_id < 0 || !dist__obs_on())
    return;
  dist_event ev = {
      .kind = DIST_EV_STRAGGLER, .group_id = group->group_id, .rank = group->global_rank,
      .group_rank = group->rank, .seq = seq, .t_ns = dist_clock_ns(), .group = group,
      .peer = straggler_rank, .message = message,
  };
  for (int i = 0; i < n_slots; i++)
    if (slots[i].inited)
      deliver(&slots[i], &ev);
}
