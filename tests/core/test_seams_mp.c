/* ctest: labels=multiproc timeout=240 */
/* The observer and the group interposer, seen from real multi-rank groups:
 * one enqueued/started/completed triple per user call with the whole
 * descriptor and per-group sequence numbers from 1 for an observer built
 * for ABI 1, one issued/completed pair per synchronous call for an ABI-2
 * one; a wrapper installed
 * through the interposer sees every group init, new_group, split_group,
 * new_subgroups and a mesh create, and every call on them; internal helper
 * groups emit nothing and take no id. */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mp.h"

/* --- a test observer ----------------------------------------------------- */

#define MAX_EV 256

typedef struct seen {
  dist_event_kind kind;
  int group_id;
  uint64_t seq;
  dist_op_kind op;
  int64_t numel;
  int root;
  const void *caller;
  int64_t t_ns;
  int peer;
  int status;
  uint64_t ord, pair_seq;  /* ABI 5 fields of the descriptor */
} seen;

static seen events[MAX_EV];
static int n_events;
static int n_inits, n_finis;

static int obs_init(void **ctx, const dist_pg_info *info) {
  *ctx = (void *)info;
  n_inits++;
  return DIST_OK;
}

static void obs_event(void *ctx, const dist_event *ev) {
  (void)ctx;
  if (n_events == MAX_EV)
    return;
  seen *s = &events[n_events++];
  s->kind = ev->kind;
  s->group_id = ev->group_id;
  s->seq = ev->seq;
  s->op = ev->coll ? ev->coll->kind : DIST_OP_COUNT_;
  s->numel = ev->coll && ev->coll->n_inputs ? dist_tensor_numel(&ev->coll->inputs[0]) : -1;
  s->root = ev->coll ? ev->coll->root : -1;
  s->caller = ev->caller;
  s->t_ns = ev->t_ns;
  s->peer = ev->peer;
  s->status = ev->status;
  s->ord = ev->coll ? ev->coll->ord : 0;
  s->pair_seq = ev->coll ? ev->coll->pair_seq : 0;
}

static void obs_fini(void *ctx) {
  (void)ctx;
  n_finis++;
}

/* Built for ABI 1: it must keep receiving enqueued + started. */
static const dist_observer test_observer = {
    .abi_version = 1,
    .name = "test",
    .event_mask = DIST_EV_ALL,
    .init = obs_init,
    .on_event = obs_event,
    .fini = obs_fini,
};

/* --- an ABI-2 observer: issued + completed per synchronous call ---------- */

static int lean_count[DIST_EV_COUNT_][4]; /* [kind][group id < 4] */
static int64_t lean_issued_ns;

static void lean_event(void *ctx, const dist_event *ev) {
  (void)ctx;
  if (ev->group_id >= 0 && ev->group_id < 4)
    lean_count[ev->kind][ev->group_id]++;
  if (ev->kind == DIST_EV_OP_ISSUED)
    lean_issued_ns = ev->t_ns;
}

static const dist_observer lean_observer = {
    .abi_version = DIST_OBSERVER_ABI_VERSION, .name = "lean", .event_mask = DIST_EV_ALL,
    .on_event = lean_event,
};

/* Events of kind k on group gid. */
static int count(dist_event_kind k, int gid) {
  int n = 0;
  for (int i = 0; i < n_events; i++)
    n += events[i].kind == k && events[i].group_id == gid;
  return n;
}

/* Each op event triple: enqueued, started, completed with the same seq.
 * Collectives and point-to-point calls are numbered apart (seq, from 1
 * each); ord counts both; a send or receive has its pair number. */
static int check_triples(const dist_test_ctx *ctx, int gid, int calls) {
  uint64_t expect[2] = {1, 1}, ord = 1;
  for (int i = 0; i < n_events; i++) {
    if (events[i].group_id != gid || events[i].kind != DIST_EV_OP_ENQUEUED)
      continue;
    bool p2p = dist_op_is_p2p(events[i].op);
    CHECK(ctx, events[i].seq == expect[p2p], "group %d: %s call %llu has seq %llu", gid,
          p2p ? "p2p" : "collective", (unsigned long long)expect[p2p],
          (unsigned long long)events[i].seq);
    CHECK(ctx, events[i].ord == ord, "group %d: call %llu has ord %llu", gid,
          (unsigned long long)ord, (unsigned long long)events[i].ord);
    CHECK(ctx, events[i].pair_seq == (p2p ? expect[1] : 0), "group %d: pair_seq %llu", gid,
          (unsigned long long)events[i].pair_seq);
    CHECK(ctx, events[i].caller != NULL, "no caller address");
    expect[p2p]++;
    ord++;
  }
  CHECK(ctx, count(DIST_EV_OP_ENQUEUED, gid) == calls, "group %d: %d enqueued, want %d", gid,
        count(DIST_EV_OP_ENQUEUED, gid), calls);
  CHECK(ctx, count(DIST_EV_OP_STARTED, gid) == calls, "group %d: %d started, want %d", gid,
        count(DIST_EV_OP_STARTED, gid), calls);
  CHECK(ctx, count(DIST_EV_OP_COMPLETED, gid) == calls, "group %d: %d completed, want %d", gid,
        count(DIST_EV_OP_COMPLETED, gid), calls);
  return 0;
}

static int observer_rank(const dist_test_ctx *ctx) {
  CHECK_OK(ctx, dist_observer_register(&test_observer));
  CHECK_OK(ctx, dist_observer_register(&lean_observer));
  CHECK_OK(ctx, dist_test_init_pg(ctx, NULL));
  CHECK(ctx, n_inits == 1, "observer init ran %d times", n_inits);
  /* The default group's creation reaches observers that start with it. */
  CHECK(ctx, count(DIST_EV_GROUP_CREATED, 0) == 1, "group 0 created seen %d times",
        count(DIST_EV_GROUP_CREATED, 0));
  CHECK(ctx, lean_count[DIST_EV_GROUP_CREATED][0] == 1, "lean: group 0 created %d times",
        lean_count[DIST_EV_GROUP_CREATED][0]);
  float v[16] = {0};
  dist_tensor t = dist_tensor_1d(v, DIST_FLOAT32, 16);
  CHECK_OK(ctx, dist_all_reduce(&t, DIST_SUM, NULL, NULL));          /* seq 1 */
  dist_work *w;
  CHECK_OK(ctx, dist_broadcast(&t, 1, NULL, &w));                    /* seq 2 */
  CHECK_OK(ctx, dist_work_wait(w, -1));
  dist_work_free(w);
  if (ctx->rank == 0)                                                /* p2p seq 1 */
    CHECK_OK(ctx, dist_send(&t, 1, NULL, 7));
  else
    CHECK_OK(ctx, dist_recv(&t, 0, NULL, 7, NULL));
  CHECK_OK(ctx, dist_barrier(NULL, NULL));                           /* seq 3 */
  /* A call that fails its local checks never starts: no operation events,
   * no seq, but one REJECTED (ABI 7) with the number it would have taken,
   * for a root outside the group (coll_api.c) and a NULL tensor (validate.c). */
  CHECK(ctx, dist_reduce(&t, 99, DIST_SUM, NULL, NULL) == DIST_E_INVAL, "bad root accepted");
  CHECK(ctx, dist_all_reduce(NULL, DIST_SUM, NULL, NULL) == DIST_E_INVAL, "NULL accepted");
  CHECK_OK(ctx, check_triples(ctx, 0, 4));
  int rej[2], n_rej = 0;
  for (int i = 0; i < n_events; i++)
    if (events[i].kind == DIST_EV_OP_REJECTED && n_rej < 2)
      rej[n_rej++] = i;
  CHECK(ctx, n_rej == 2 && count(DIST_EV_OP_REJECTED, 0) == 2, "%d rejected events, want 2",
        count(DIST_EV_OP_REJECTED, 0));
  for (int k = 0; k < n_rej; k++)
    CHECK(ctx, events[rej[k]].seq == 4 && events[rej[k]].status == DIST_E_INVAL &&
                   events[rej[k]].caller && events[rej[k]].ord == 0,
          "rejected %d: seq %llu status %d ord %llu", k, (unsigned long long)events[rej[k]].seq,
          events[rej[k]].status, (unsigned long long)events[rej[k]].ord);
  CHECK(ctx, n_rej == 2 && events[rej[0]].op == DIST_OP_REDUCE &&
                 events[rej[1]].op == DIST_OP_ALL_REDUCE, "rejected ops %d, %d",
        n_rej ? (int)events[rej[0]].op : -1, n_rej > 1 ? (int)events[rej[1]].op : -1);
  /* ABI 2: a synchronous call is one ISSUED (all_reduce, barrier, the
   * send); the broadcast and the receive (run as work), whose backend
   * reports their start, stay ENQUEUED then STARTED. */
  int(*lc)[4] = lean_count;
  int n_async = ctx->rank == 0 ? 1 : 2;
  CHECK(ctx, lc[DIST_EV_OP_ISSUED][0] == 4 - n_async && lc[DIST_EV_OP_ENQUEUED][0] == n_async &&
                 lc[DIST_EV_OP_STARTED][0] == n_async && lc[DIST_EV_OP_COMPLETED][0] == 4,
        "lean observer: issued %d enqueued %d started %d completed %d",
        lc[DIST_EV_OP_ISSUED][0], lc[DIST_EV_OP_ENQUEUED][0], lc[DIST_EV_OP_STARTED][0],
        lc[DIST_EV_OP_COMPLETED][0]);
  int64_t now = dist_clock_ns();
  CHECK(ctx, lean_issued_ns > 0 && lean_issued_ns <= now && now - lean_issued_ns < 60000000000,
        "issued at %lld, now %lld", (long long)lean_issued_ns, (long long)now);
  /* The broadcast's descriptor travelled whole: op, size, root. */
  int bc = -1;
  for (int i = 0; i < n_events; i++)
    if (events[i].kind == DIST_EV_OP_COMPLETED && events[i].seq == 2)
      bc = i;
  CHECK(ctx, bc >= 0 && events[bc].op == DIST_OP_BROADCAST && events[bc].numel == 16 &&
                 events[bc].root == 1, "broadcast descriptor lost");
  /* A new user group gets id 1 and its own sequence from 1. */
  dist_pg *sub;
  int both[2] = {0, 1};
  CHECK_OK(ctx, dist_new_group(both, 2, NULL, &sub));
  CHECK(ctx, count(DIST_EV_GROUP_CREATED, 1) == 1, "no group_created for group 1");
  CHECK_OK(ctx, dist_all_reduce(&t, DIST_MAX, sub, NULL));
  CHECK_OK(ctx, check_triples(ctx, 1, 1));
  /* An internal helper group: no id, no seq, no events. */
  int before = n_events;
  dist_group_opts io = {.flags = DIST_GROUP_INTERNAL};
  dist_pg *helper;
  CHECK_OK(ctx, dist_new_group(both, 2, &io, &helper));
  CHECK_OK(ctx, dist_all_reduce(&t, DIST_SUM, helper, NULL));
  CHECK(ctx, dist_pg_get_info(helper)->group_id == -1, "internal group has an id");
  CHECK(ctx, n_events == before, "internal group emitted %d events", n_events - before);
  CHECK_OK(ctx, dist_destroy_process_group(helper));
  /* Timestamps never go backwards, enqueued events included. */
  for (int i = 1; i < n_events; i++)
    CHECK(ctx, events[i].t_ns >= events[i - 1].t_ns, "time went backwards at event %d (%s)", i,
          dist_event_name(events[i].kind));
  dist_test_finish();
  CHECK(ctx, n_finis == 1, "observer fini ran %d times", n_finis);
  CHECK(ctx, count(DIST_EV_GROUP_DESTROYED, 1) == 1, "group 1 destroyed event missing");
  return 0;
}

Test(core_seams, observer_sees_one_triple_per_user_call, .timeout = 60) {
  cr_assert_eq(dist_test_ranks(2, observer_rank, NULL, 50), 0, "%s", dist_test_report());
}

/* At DIST_DEBUG=DETAIL every log line also reaches the observers. */
static char last_log[512];
static void log_event(void *ctx, const dist_event *ev) {
  obs_event(ctx, ev);
  if (ev->kind == DIST_EV_LOG && ev->message)
    snprintf(last_log, sizeof last_log, "%s", ev->message);
}

static const dist_observer log_observer = {
    .abi_version = DIST_OBSERVER_ABI_VERSION, .name = "log", .event_mask = DIST_EV_ALL,
    .init = obs_init, .on_event = log_event, .fini = obs_fini,
};

static int detail_log_rank(const dist_test_ctx *ctx) {
  setenv("DIST_DEBUG", "DETAIL", 1);
  setenv("DIST_LOG_LEVEL", "INFO", 1);
  dist_set_debug_level_from_env();
  CHECK_OK(ctx, dist_observer_register(&log_observer));
  CHECK_OK(ctx, dist_test_init_pg(ctx, NULL));
  dist_log(DIST_LOG_INFO, DIST_SUBSYS_PG, "a line for the trace %d", ctx->rank);
  char want[64];
  snprintf(want, sizeof want, "a line for the trace %d", ctx->rank);
  CHECK(ctx, strstr(last_log, want), "last LOG event: '%s'", last_log);
  int n = count(DIST_EV_LOG, 0);
  setenv("DIST_DEBUG", "INFO", 1);
  dist_set_debug_level_from_env();
  dist_log(DIST_LOG_INFO, DIST_SUBSYS_PG, "not at DETAIL");
  CHECK(ctx, count(DIST_EV_LOG, 0) == n, "a LOG event below DETAIL");
  dist_test_finish();
  return 0;
}

Test(core_seams, log_lines_reach_observers_at_detail, .timeout = 30) {
  cr_assert_eq(dist_test_ranks(2, detail_log_rank, NULL, 25), 0, "%s", dist_test_report());
}

/* A peer that dies: one PEER_LOST event naming it, and the operation's
 * FAILED event, over shared memory and over TCP. */
static int peer_lost_rank(const dist_test_ctx *ctx) {
  setenv("DIST_TRANSPORT", ctx->arg, 1);
  CHECK_OK(ctx, dist_observer_register(&test_observer));
  CHECK_OK(ctx, dist_test_init_pg(ctx, NULL));
  float v[4] = {0};
  dist_tensor t = dist_tensor_1d(v, DIST_FLOAT32, 4);
  CHECK_OK(ctx, dist_all_reduce(&t, DIST_SUM, NULL, NULL));
  if (ctx->rank == 2)
    raise(SIGKILL);
  int rc = dist_all_reduce(&t, DIST_SUM, NULL, NULL);
  CHECK(ctx, rc == DIST_E_PEER_LOST, "no peer lost: %s", dist_errmsg(rc, NULL));
  CHECK(ctx, strstr(dist_errmsg(rc, NULL), "rank 2 (host"), "the report names rank 2: %s",
        dist_errmsg(rc, NULL));
  /* One names rank 2. Rank 1 (or 0) exits after its failure, and the
   * other may hear of that too: a second, true, PEER_LOST. */
  int n_lost = 0, of_2 = 0;
  for (int i = 0; i < n_events; i++)
    if (events[i].kind == DIST_EV_PEER_LOST)
      n_lost++, of_2 += events[i].peer == 2;
  CHECK(ctx, of_2 == 1, "PEER_LOST events: %d, naming rank 2: %d", n_lost, of_2);
  CHECK(ctx, count(DIST_EV_OP_FAILED, 0) == 1, "one failed operation");
  return 0; /* the job is broken: no finish barrier */
}

static void run_peer_lost(const char *transport) {
  dist_test_result res;
  dist_test_opts o = {3, peer_lost_rank, (void *)transport, 50, -1, 0};
  dist_test_run(&o, &res);
  cr_assert_eq(res.signal[2], SIGKILL, "%s", res.report);
  cr_assert(res.exit_code[0] == 0 && res.exit_code[1] == 0, "%s", res.report);
}

Test(core_seams, observer_hears_of_a_lost_peer_shm, .timeout = 60) { run_peer_lost("auto"); }
Test(core_seams, observer_hears_of_a_lost_peer_tcp, .timeout = 60) { run_peer_lost("tcp"); }

/* --- a test wrapper through the interposer ------------------------------ */

typedef struct wrap_priv {
  dist_pg *inner;
} wrap_priv;

static int wrapped_groups;
static int wrapped_calls[DIST_OP_COUNT_];

static int wrap_init(void *priv, const dist_backend_init_args *a, dist_pg *self) {
  (void)self;
  ((wrap_priv *)priv)->inner = a->arg;
  return DIST_OK;
}

static void wrap_fini(void *priv) { dist_destroy_process_group(((wrap_priv *)priv)->inner); }

static void wrap_abort(void *priv, const char *why) {
  dist_abort_group(((wrap_priv *)priv)->inner, why);
}

static int wrap_forward(void *priv, const dist_coll *c, dist_work *w) {
  wrapped_calls[c->kind]++;
  return dist_pg_forward(((wrap_priv *)priv)->inner, c, w);
}

static const dist_backend_ops wrap_ops = {
    .abi_version = DIST_BACKEND_ABI_VERSION, .name = "testwrap", .caps = DIST_CAP_CPU,
    .priv_size = sizeof(wrap_priv), .init = wrap_init, .fini = wrap_fini, .abort = wrap_abort,
    .send = wrap_forward, .recv = wrap_forward, .batch_p2p = wrap_forward,
    .broadcast = wrap_forward, .all_reduce = wrap_forward, .reduce = wrap_forward,
    .all_gather = wrap_forward, .gather = wrap_forward, .scatter = wrap_forward,
    .reduce_scatter = wrap_forward, .all_to_all = wrap_forward, .barrier = wrap_forward,
};

static int wrap_group(void *arg, dist_pg *inner, dist_pg **out) {
  (void)arg;
  const dist_pg_info *i = dist_pg_get_info(inner);
  dist_backend_init_args a = {
      .rank = i->rank, .size = i->size, .global_ranks = i->global_ranks,
      .global_rank = i->global_rank, .timeout_ms = i->timeout_ms, .group_name = i->name,
      .group_id = i->group_id, .arg = inner,
  };
  wrapped_groups++;
  return dist_pg_create(&wrap_ops, &a, out);
}

static int wrapper_rank(const dist_test_ctx *ctx) {
  dist_set_group_wrapper(wrap_group, NULL);
  CHECK_OK(ctx, dist_observer_register(&test_observer));
  CHECK_OK(ctx, dist_test_init_pg(ctx, NULL));                 /* group 0 */
  int r = ctx->rank;
  int32_t v = r + 1;
  dist_tensor t = dist_tensor_1d(&v, DIST_INT32, 1);
  CHECK_OK(ctx, dist_all_reduce(&t, DIST_SUM, NULL, NULL));
  CHECK(ctx, v == 1 + 2 + 3 + 4, "sum through the wrapper: %d", v);
  dist_pg *g01;
  int pair[2] = {0, 1};
  CHECK_OK(ctx, dist_new_group(pair, 2, NULL, &g01));           /* group 1 */
  const int s0[] = {0, 2}, s1[] = {1, 3};
  const int *splits[] = {s0, s1};
  size_t sizes[] = {2, 2};
  dist_pg *half;
  CHECK_OK(ctx, dist_split_group(NULL, splits, sizes, 2, NULL, &half)); /* groups 2, 3 */
  dist_pg *sub;
  CHECK_OK(ctx, dist_new_subgroups(2, NULL, &sub, NULL, NULL)); /* groups 4, 5 */
  int64_t shape[2] = {2, 2};
  dist_device_mesh *mesh;
  CHECK_OK(ctx, dist_init_device_mesh("cpu", shape, 2, NULL, &mesh)); /* 6..9 */
  /* Members wrapped: default, (g01 if member), one split, one subgroup, two
   * mesh lines. */
  int want = 1 + (r < 2) + 1 + 1 + 2;
  CHECK(ctx, wrapped_groups == want, "wrapper saw %d groups, want %d", wrapped_groups, want);
  v = 1;
  CHECK_OK(ctx, dist_all_reduce(&t, DIST_SUM, half, NULL));
  CHECK(ctx, v == 2, "split all_reduce: %d", v);
  CHECK_OK(ctx, dist_barrier(sub, NULL));
  dist_pg *row;
  CHECK_OK(ctx, dist_mesh_get_group(mesh, 1, &row));
  CHECK_OK(ctx, dist_broadcast(&t, r / 2 * 2, row, NULL));
  CHECK(ctx, wrapped_calls[DIST_OP_ALL_REDUCE] == 2 && wrapped_calls[DIST_OP_BARRIER] == 1 &&
                 wrapped_calls[DIST_OP_BROADCAST] == 1,
        "wrapper saw all_reduce %d, barrier %d, broadcast %d", wrapped_calls[DIST_OP_ALL_REDUCE],
        wrapped_calls[DIST_OP_BARRIER], wrapped_calls[DIST_OP_BROADCAST]);
  /* A wrapped call is one event, on the user's group: 1 all_reduce on 0. */
  CHECK_OK(ctx, check_triples(ctx, 0, 1));
  CHECK(ctx, dist_pg_get_info(half)->group_id == 2 + r % 2, "split group id %d",
        dist_pg_get_info(half)->group_id);
  dist_device_mesh_destroy(mesh);
  dist_test_finish();
  return 0;
}

Test(core_seams, wrapper_sees_every_group_and_every_call, .timeout = 90) {
  cr_assert_eq(dist_test_ranks(4, wrapper_rank, NULL, 80), 0, "%s", dist_test_report());
}
