/* ctest: labels=oom timeout=300 */
/* Out-of-memory, SQLite's way: fail the Nth allocation for N = 1, 2, ...
 * until the call no longer reaches an Nth allocation, over init, group
 * creation and every collective kind. Each injected failure must give
 * DIST_E_NOMEM with a message, the next (clean) call must work, and under
 * AddressSanitizer nothing may leak (LeakSanitizer is asked at the end of
 * each rank, which leaves with _exit and so skips the usual exit check).
 * One rank: the fault is process-wide, and a second rank failing at a
 * different site would wait for its peer until the group's timeout. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/dist_int.h"
#include "mp.h"

int __lsan_do_recoverable_leak_check(void) __attribute__((weak));

typedef int (*op_fn)(void *arg);

/* Runs op with the Nth allocation failing, for every N it reaches. Returns
 * 0, or FAIL with the site number. *sites receives how many it found. */
static int sweep(const dist_test_ctx *ctx, const char *what, op_fn op, void *arg,
                 op_fn undo, int *sites) {
  for (long n = 1; n < 10000; n++) {
    dist__fault_fail_alloc_after(n);
    int rc = op(arg);
    bool fired = dist__fault_pending() == 0;
    dist__fault_fail_alloc_after(0);
    if (rc == DIST_OK && undo)
      CHECK_OK(ctx, undo(arg));
    if (!fired) {
      CHECK(ctx, rc == DIST_OK, "%s without a fault: %s: %s", what, dist_status_name(rc),
            dist_last_errmsg());
      *sites = (int)n - 1;
      return 0;
    }
    CHECK(ctx, rc == DIST_E_NOMEM, "%s with allocation %ld failing: %s (%s)", what, n,
          dist_status_name(rc), dist_last_errmsg());
    const char *msg = dist_is_initialized() ? dist_pg_errmsg(NULL) : dist_last_errmsg();
    if (!msg[0])
      msg = dist_last_errmsg();
    CHECK(ctx, msg[0], "%s with allocation %ld failing: NOMEM without a message", what, n);
  }
  return FAIL(ctx, "%s: more than 10000 allocations", what);
}

static int leak_check(const dist_test_ctx *ctx) {
  if (__lsan_do_recoverable_leak_check)
    CHECK(ctx, __lsan_do_recoverable_leak_check() == 0, "LeakSanitizer found leaks");
  return 0;
}

/* --- init ------------------------------------------------------------------ */

typedef struct init_try {
  dist_store *base;
  dist_store *store;
  int attempt;
} init_try;

static int do_init(void *arg) {
  init_try *t = arg;
  dist_init_opts o = dist_init_opts_default();
  o.store = t->store;
  o.rank = 0;
  o.world_size = 1;
  o.timeout_ms = 20000;
  return dist_init_process_group(&o);
}

static int undo_init(void *arg) {
  (void)arg;
  return dist_destroy_process_group(NULL);
}

/* A fresh store prefix per attempt, made with the fault off, so a failed
 * attempt's keys never meet the next one's. */
static int init_fresh(void *arg) {
  init_try *t = arg;
  char prefix[32];
  snprintf(prefix, sizeof prefix, "try%d", t->attempt++);
  dist__fault_fail_alloc_after(0);
  int rc = dist_store_prefix_create(prefix, t->base, DIST_STORE_BORROW, &t->store);
  if (rc != DIST_OK)
    return rc;
  return DIST_OK;
}

static int init_op(void *arg) {
  init_try *t = arg;
  long armed = dist__fault_pending();
  dist__fault_fail_alloc_after(0);
  int rc = init_fresh(t);
  dist__fault_fail_alloc_after(armed);
  if (rc == DIST_OK)
    rc = do_init(t);
  if (rc != DIST_OK) {
    long left = dist__fault_pending();
    dist__fault_fail_alloc_after(0);
    dist_store_destroy(t->store);
    dist__fault_fail_alloc_after(left);
  }
  return rc;
}

static int undo_init_store(void *arg) {
  init_try *t = arg;
  int rc = undo_init(arg);
  dist_store_destroy(t->store);
  return rc;
}

static int oom_init(const dist_test_ctx *ctx) {
  init_try t = {0};
  /* An in-process store: a TCP store's server thread would take the
   * injected failures meant for init. */
  CHECK_OK(ctx, dist_store_hash_create(&t.base));
  int sites = 0;
  if (sweep(ctx, "init_process_group", init_op, &t, undo_init_store, &sites))
    return 1;
  fprintf(stderr, "init_process_group: %d allocations, each failed once\n", sites);
  CHECK(ctx, sites > 0, "init allocated nothing");
  dist_store_destroy(t.base);
  return leak_check(ctx);
}

Test(core_oom, every_allocation_of_init_fails_cleanly, .timeout = 120) {
  cr_assert_eq(dist_test_ranks(1, oom_init, NULL, 100), 0, "%s", dist_test_report());
}

/* --- groups ---------------------------------------------------------------- */

/* A one-rank default group over an in-process store (no server thread to
 * take the failures meant for the caller). */
static dist_store *local_store;

static int init_local(void) {
  int rc = dist_store_hash_create(&local_store);
  if (rc != DIST_OK)
    return rc;
  dist_init_opts o = dist_init_opts_default();
  o.store = local_store;
  o.rank = 0;
  o.world_size = 1;
  o.timeout_ms = 20000;
  return dist_init_process_group(&o);
}

static void finish_local(void) {
  dist_destroy_process_group(NULL);
  dist_store_destroy(local_store);
  local_store = NULL;
}

static dist_pg *made;

static int new_group_op(void *arg) {
  (void)arg;
  int r = 0;
  return dist_new_group(&r, 1, NULL, &made);
}

static int split_op(void *arg) {
  (void)arg;
  static const int r0[] = {0};
  const int *const ranks[] = {r0};
  size_t sizes[] = {1};
  return dist_split_group(NULL, ranks, sizes, 1, NULL, &made);
}

static int subgroups_op(void *arg) {
  (void)arg;
  dist_pg **all = NULL;
  size_t n = 0;
  int rc = dist_new_subgroups(1, NULL, &made, &all, &n);
  dist_free(all);
  return rc;
}

static int undo_group(void *arg) {
  (void)arg;
  int rc = dist_destroy_process_group(made);
  made = NULL;
  return rc;
}

static int oom_groups(const dist_test_ctx *ctx) {
  CHECK_OK(ctx, init_local());
  struct { const char *name; op_fn fn; } ops[] = {
      {"new_group", new_group_op}, {"split_group", split_op}, {"new_subgroups", subgroups_op}};
  for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
    int sites = 0;
    if (sweep(ctx, ops[i].name, ops[i].fn, NULL, undo_group, &sites))
      return 1;
    fprintf(stderr, "%s: %d allocations, each failed once\n", ops[i].name, sites);
    CHECK(ctx, sites > 0, "%s allocated nothing", ops[i].name);
  }
  finish_local();
  return leak_check(ctx);
}

Test(core_oom, every_allocation_of_group_creation_fails_cleanly, .timeout = 120) {
  cr_assert_eq(dist_test_ranks(1, oom_groups, NULL, 100), 0, "%s", dist_test_report());
}

/* --- device meshes and user stores (issue 15) ---------------------------------- */

static dist_device_mesh *mesh;

static int mesh_create_op(void *arg) {
  (void)arg;
  static const int layout[] = {0};
  static const int64_t shape[] = {1, 1};
  static const char *const names[] = {"dp", "tp"};
  return dist_device_mesh_create("cpu", layout, shape, 2, names, &mesh);
}

static int mesh_from_group_op(void *arg) {
  (void)arg;
  dist_pg *def = NULL;
  return dist_device_mesh_from_group("cpu", &def, 1, NULL, NULL, NULL, &mesh);
}

static int undo_mesh(void *arg) {
  (void)arg;
  dist_device_mesh_destroy(mesh);
  mesh = NULL;
  return DIST_OK;
}

/* A user store whose slots reach a hash store (user data). */
static dist_store *hash_of(dist_store *s) { return dist_store_user_data(s); }
static int h_set(dist_store *s, const char *k, const void *v, size_t n) {
  return dist_store_set(hash_of(s), k, v, n);
}
static int h_get(dist_store *s, const char *k, int64_t t, void **v, size_t *n) {
  (void)t;
  return dist_store_get(hash_of(s), k, v, n);
}
static int h_add(dist_store *s, const char *k, int64_t d, int64_t *r) {
  return dist_store_add(hash_of(s), k, d, r);
}
static int h_cas(dist_store *s, const char *k, const void *e, size_t el, const void *d,
                 size_t dl, void **r, size_t *rl) {
  return dist_store_compare_set(hash_of(s), k, e, el, d, dl, r, rl);
}
static int h_wait(dist_store *s, const char *const *k, size_t n, int64_t t) {
  return dist_store_wait(hash_of(s), k, n, t);
}
static int h_check(dist_store *s, const char *const *k, size_t n, bool *a) {
  return dist_store_check(hash_of(s), k, n, a);
}
static int h_del(dist_store *s, const char *k, bool *d) {
  return dist_store_delete_key(hash_of(s), k, d);
}
static void h_destroy(void *u) { dist_store_destroy(u); }
static const dist_store_user_ops hash_user_ops = {
    .kind = "hashuser", .set = h_set, .get = h_get, .add = h_add, .compare_set = h_cas,
    .wait = h_wait, .check = h_check, .delete_key = h_del, .destroy = h_destroy};

static int user_store_op(void *arg) {
  (void)arg;
  dist_store *h = NULL, *u = NULL, *p = NULL, *c = NULL;
  void *v = NULL;
  int rc = dist_store_hash_create(&h);
  if (rc == DIST_OK)
    rc = dist_store_user_create(&hash_user_ops, h, &u); /* takes h, even on failure */
  if (rc == DIST_OK)
    rc = dist_store_prefix_create("p", u, DIST_STORE_BORROW, &p);
  if (rc == DIST_OK)
    rc = dist_store_set(p, "k", "value", 5);
  if (rc == DIST_OK)
    rc = dist_store_get(p, "k", &v, NULL);
  if (rc == DIST_OK)
    rc = dist_store_clone(u, &c);
  dist_free(v);
  dist_store_destroy(c);
  dist_store_destroy(p);
  dist_store_destroy(u);
  return rc;
}

static int oom_mesh_stores(const dist_test_ctx *ctx) {
  CHECK_OK(ctx, init_local());
  struct { const char *name; op_fn fn, undo; } ops[] = {
      {"device_mesh_create", mesh_create_op, undo_mesh},
      {"device_mesh_from_group", mesh_from_group_op, undo_mesh},
      {"user store", user_store_op, NULL}};
  for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
    int sites = 0;
    if (sweep(ctx, ops[i].name, ops[i].fn, NULL, ops[i].undo, &sites))
      return 1;
    fprintf(stderr, "%s: %d allocations, each failed once\n", ops[i].name, sites);
    CHECK(ctx, sites > 0, "%s allocated nothing", ops[i].name);
  }
  finish_local();
  return leak_check(ctx);
}

Test(core_oom, every_allocation_of_meshes_and_user_stores_fails_cleanly, .timeout = 120) {
  cr_assert_eq(dist_test_ranks(1, oom_mesh_stores, NULL, 100), 0, "%s", dist_test_report());
}

/* --- collectives ----------------------------------------------------------- */

static float a[8], b[8];
static dist_tensor ta, tb;

static void reset(void) {
  for (int i = 0; i < 8; i++) {
    a[i] = (float)i + 1;
    b[i] = 0;
  }
  ta = dist_tensor_1d(a, DIST_FLOAT32, 8);
  tb = dist_tensor_1d(b, DIST_FLOAT32, 8);
}

/* Each collective kind once on ta/tb (fresh values every call). */
#define ONE_CALL(name, call) \
  static int name(void *x) { \
    (void)x;                 \
    reset();                 \
    return (call);           \
  }
ONE_CALL(c_all_reduce, dist_all_reduce(&ta, DIST_SUM, NULL, NULL))
ONE_CALL(c_broadcast, dist_broadcast(&ta, 0, NULL, NULL))
ONE_CALL(c_reduce, dist_reduce(&ta, 0, DIST_MAX, NULL, NULL))
ONE_CALL(c_all_gather, dist_all_gather(&tb, 1, &ta, NULL, NULL))
ONE_CALL(c_all_gather_t, dist_all_gather_into_tensor(&tb, &ta, NULL, NULL))
ONE_CALL(c_gather, dist_gather(&ta, &tb, 1, 0, NULL, NULL))
ONE_CALL(c_scatter, dist_scatter(&tb, &ta, 1, 0, NULL, NULL))
ONE_CALL(c_reduce_scatter, dist_reduce_scatter(&tb, &ta, 1, DIST_SUM, NULL, NULL))
ONE_CALL(c_reduce_scatter_t, dist_reduce_scatter_tensor(&tb, &ta, DIST_SUM, NULL, NULL))
ONE_CALL(c_all_to_all, dist_all_to_all(&tb, 1, &ta, 1, NULL, NULL))
ONE_CALL(c_all_to_all_single, dist_all_to_all_single(&tb, &ta, NULL, NULL, NULL, NULL))

static int c_all_reduce_async(void *x) {
  (void)x;
  reset();
  dist_work *w = NULL;
  int rc = dist_all_reduce(&ta, DIST_SUM, NULL, &w);
  if (rc == DIST_OK) {
    rc = dist_work_wait(w, -1);
    dist_work_free(w);
  }
  return rc;
}
static int c_barrier(void *x) {
  (void)x;
  return dist_barrier(NULL, NULL);
}
static int c_monitored_barrier(void *x) {
  (void)x;
  return dist_monitored_barrier(NULL, 5000, true);
}
static int c_broadcast_bytes(void *x) {
  (void)x;
  dist_bytes o = {"hello", 5};
  return dist_broadcast_bytes(&o, 0, NULL);
}
static int free_blobs(dist_bytes *o, int rc) {
  if (rc == DIST_OK)
    dist_free(o[0].data);
  return rc;
}
static int c_all_gather_bytes(void *x) {
  (void)x;
  dist_bytes in = {"hello", 5}, out[1];
  return free_blobs(out, dist_all_gather_bytes(&in, out, NULL));
}
static int c_gather_bytes(void *x) {
  (void)x;
  dist_bytes in = {"hello", 5}, out[1];
  return free_blobs(out, dist_gather_bytes(&in, out, 0, NULL));
}
static int c_scatter_bytes(void *x) {
  (void)x;
  dist_bytes in[1] = {{"hello", 5}}, out[1];
  return free_blobs(out, dist_scatter_bytes(out, in, 0, NULL));
}

static float g2[16];
static int c_all_gather2(void *x) {
  (void)x;
  reset();
  dist_tensor out[2] = {dist_tensor_1d(g2, DIST_FLOAT32, 8),
                        dist_tensor_1d(g2 + 8, DIST_FLOAT32, 8)};
  return dist_all_gather(out, 2, &ta, NULL, NULL);
}
static int c_all_gather_bytes2(void *x) {
  (void)x;
  dist_bytes in = {"hello", 5}, out[2];
  int rc = dist_all_gather_bytes(&in, out, NULL);
  if (rc == DIST_OK) {
    dist_free(out[0].data);
    dist_free(out[1].data);
  }
  return rc;
}

static int oom_collectives(const dist_test_ctx *ctx) {
  CHECK_OK(ctx, init_local());
  struct { const char *name; op_fn fn; } ops[] = {
      {"all_reduce", c_all_reduce}, {"all_reduce (async)", c_all_reduce_async},
      {"broadcast", c_broadcast}, {"reduce", c_reduce}, {"all_gather", c_all_gather},
      {"all_gather_into_tensor", c_all_gather_t}, {"gather", c_gather},
      {"scatter", c_scatter}, {"reduce_scatter", c_reduce_scatter},
      {"reduce_scatter_tensor", c_reduce_scatter_t}, {"all_to_all", c_all_to_all},
      {"all_to_all_single", c_all_to_all_single}, {"barrier", c_barrier},
      {"monitored_barrier", c_monitored_barrier}, {"broadcast_bytes", c_broadcast_bytes},
      {"all_gather_bytes", c_all_gather_bytes}, {"gather_bytes", c_gather_bytes},
      {"scatter_bytes", c_scatter_bytes}};
  for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
    int sites = 0;
    if (sweep(ctx, ops[i].name, ops[i].fn, NULL, NULL, &sites))
      return 1;
    fprintf(stderr, "%s: %d allocations, each failed once\n", ops[i].name, sites);
  }
  /* The last clean all_reduce left the right values. */
  CHECK_OK(ctx, c_all_reduce(NULL));
  CHECK(ctx, a[7] == 8.0f, "all_reduce gave %g", (double)a[7]);
  finish_local();
  return leak_check(ctx);
}

Test(core_oom, every_allocation_of_each_collective_fails_cleanly, .timeout = 120) {
  cr_assert_eq(dist_test_ranks(1, oom_collectives, NULL, 100), 0, "%s", dist_test_report());
}

/* --- collectives on two ranks ------------------------------------------------ */

/* Over shared memory. Over TCP a failure on one rank after its peer has
 * sent leaves the group with a sticky error (as NCCL's communicators), so
 * "the next call works" cannot hold there; TCP's allocation sites are
 * covered where they fail alone: init and group creation above. */
/* Both ranks arm the same N before the same call, so a symmetric operation
 * fails at the same site on both (or succeeds on both). Only the calling
 * thread's allocations fail: one that a progress thread makes for a
 * message the peer already sent cannot fail "cleanly" for both ranks. After
 * each try the ranks compare outcomes over the test store. */
static int two_rank_sweep(const dist_test_ctx *ctx, const char *what, op_fn op, int *sites) {
  dist_store *st = dist_get_default_store();
  for (long n = 1; n < 10000; n++) {
    dist__fault_fail_thread_alloc_after(n);
    int rc = op(NULL);
    bool fired = dist__fault_pending() == 0;
    dist__fault_fail_thread_alloc_after(0);
    char key[96], val[32];
    snprintf(key, sizeof key, "oom/%s/%ld/%d", what, n, ctx->rank);
    snprintf(val, sizeof val, "%d %d", rc, fired);
    CHECK_OK(ctx, dist_store_set(st, key, val, strlen(val)));
    snprintf(key, sizeof key, "oom/%s/%ld/%d", what, n, 1 - ctx->rank);
    void *peer = NULL;
    size_t len = 0;
    CHECK_OK(ctx, dist_store_get(st, key, &peer, &len));
    int prc = -1, pfired = -1;
    sscanf(peer, "%d %d", &prc, &pfired);
    dist_free(peer);
    CHECK(ctx, rc == prc, "%s with allocation %ld failing: %s here, %s on the peer (%s)", what,
          n, dist_status_name(rc), dist_status_name(prc), dist_pg_errmsg(NULL));
    if (!fired && !pfired) {
      CHECK(ctx, rc == DIST_OK, "%s: %s", what, dist_pg_errmsg(NULL));
      *sites = (int)n - 1;
      return 0;
    }
    CHECK(ctx, rc == DIST_E_NOMEM && dist_pg_errmsg(NULL)[0],
          "%s with allocation %ld failing: %s (%s)", what, n, dist_status_name(rc),
          dist_pg_errmsg(NULL));
  }
  return FAIL(ctx, "%s: more than 10000 allocations", what);
}

static int c_all_reduce_big(void *x) {
  (void)x;
  static float big[1 << 18];
  dist_tensor t = dist_tensor_1d(big, DIST_FLOAT32, 1 << 18);
  return dist_all_reduce(&t, DIST_SUM, NULL, NULL);
}

static int oom_two_ranks(const dist_test_ctx *ctx) {
  CHECK_OK(ctx, dist_test_init_pg(ctx, NULL));
  struct { const char *name; op_fn fn; } ops[] = {
      {"all_reduce", c_all_reduce}, {"all_reduce (async)", c_all_reduce_async},
      {"all_reduce (1 MiB)", c_all_reduce_big}, {"all_gather", c_all_gather2},
      {"all_to_all_single", c_all_to_all_single}, {"barrier", c_barrier},
      {"all_gather_bytes", c_all_gather_bytes2}};
  for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
    int sites = 0;
    if (two_rank_sweep(ctx, ops[i].name, ops[i].fn, &sites))
      return 1;
    if (ctx->rank == 0)
      fprintf(stderr, "%s on 2 ranks (%s): %d allocations, each failed once\n", ops[i].name,
              getenv("DIST_TRANSPORT"), sites);
  }
  dist_test_finish();
  return leak_check(ctx);
}

Test(core_oom, every_allocation_of_symmetric_collectives_fails_cleanly_on_two_ranks_shm,
     .timeout = 120) {
  setenv("DIST_TRANSPORT", "shm", 1);
  cr_assert_eq(dist_test_ranks(2, oom_two_ranks, NULL, 100), 0, "%s", dist_test_report());
}
