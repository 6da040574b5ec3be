/* ctest: labels=multiproc timeout=300 */
/* Groups, work handles, abort, monitored_barrier and the byte-blob
 * collectives, on real forked ranks: what a torch.distributed user relies
 * on beyond the collectives themselves. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "mp.h"

static int64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int sum_on(const dist_test_ctx *ctx, dist_pg *g, int32_t mine, int32_t want) {
  int32_t v = mine;
  dist_tensor t = dist_tensor_1d(&v, DIST_INT32, 1);
  CHECK_OK(ctx, dist_all_reduce(&t, DIST_SUM, g, NULL));
  CHECK(ctx, v == want, "sum %d, want %d", v, want);
  return 0;
}

/* --- groups -------------------------------------------------------------- */

static int groups_rank(const dist_test_ctx *ctx) {
  CHECK_OK(ctx, dist_test_init_pg(ctx, NULL));
  int r = ctx->rank; /* world 4 */
  /* Any subset, given in any order: group ranks follow global order. */
  int odd[2] = {3, 1};
  dist_pg *g;
  dist_group_opts o = {.timeout_ms = 5000, .desc = "odd ranks"};
  CHECK_OK(ctx, dist_new_group(odd, 2, &o, &g));
  if (r % 2 == 0) {
    CHECK(ctx, g == DIST_GROUP_NON_MEMBER, "rank %d got a group it is not in", r);
    CHECK(ctx, dist_get_rank(g) == -1 && dist_get_world_size(g) == -1, "non-member rank");
    int32_t v = 5;
    dist_tensor t = dist_tensor_1d(&v, DIST_INT32, 1);
    CHECK_OK(ctx, dist_all_reduce(&t, DIST_SUM, g, NULL)); /* does nothing */
    dist_work *w = NULL;
    CHECK_OK(ctx, dist_all_reduce(&t, DIST_SUM, g, &w));
    CHECK(ctx, w && dist_work_is_completed(w) && v == 5, "non-member work");
    dist_work_free(w);
    int gr;
    CHECK(ctx, dist_get_group_rank(g, 1, &gr) == DIST_E_INVAL, "translation on non-member");
  } else {
    CHECK(ctx, dist_get_rank(g) == r / 2 && dist_get_world_size(g) == 2, "rank in group");
    int gr = -1, gl = -1;
    CHECK_OK(ctx, dist_get_group_rank(g, 3, &gr));
    CHECK_OK(ctx, dist_get_global_rank(g, 0, &gl));
    CHECK(ctx, gr == 1 && gl == 1, "translations %d %d", gr, gl);
    CHECK(ctx, dist_get_group_rank(g, 2, &gr) == DIST_E_INVAL, "rank 2 is not in it");
    int ranks[4];
    size_t n = 0;
    CHECK_OK(ctx, dist_get_process_group_ranks(g, ranks, 4, &n));
    CHECK(ctx, n == 2 && ranks[0] == 1 && ranks[1] == 3, "ranks of group");
    CHECK(ctx, !strcmp(dist_get_backend(g), "cpu"), "backend %s", dist_get_backend(g));
    if (sum_on(ctx, g, r, 1 + 3))
      return 1;
    CHECK_OK(ctx, dist_destroy_process_group(g)); /* one group only */
  }
  /* Local synchronisation: only the members call. */
  if (r >= 2) {
    int hi[2] = {2, 3};
    dist_group_opts lo = {.use_local_synchronization = true};
    CHECK_OK(ctx, dist_new_group(hi, 2, &lo, &g));
    if (sum_on(ctx, g, r, 5))
      return 1;
  }
  /* split_group: parent ranks {0,3} and {1,2}. */
  const int a[] = {0, 3}, b[] = {1, 2};
  const int *splits[] = {a, b};
  size_t sizes[] = {2, 2};
  dist_pg *half;
  CHECK_OK(ctx, dist_split_group(NULL, splits, sizes, 2, NULL, &half));
  if (sum_on(ctx, half, r, r == 0 || r == 3 ? 3 : 3))
    return 1;
  /* Subgroups: equal chunks, and by enumeration. */
  dist_pg *cur, **all;
  size_t n_all;
  CHECK_OK(ctx, dist_new_subgroups(2, NULL, &cur, &all, &n_all));
  CHECK(ctx, n_all == 2 && cur == all[r / 2], "subgroups");
  dist_free(all);
  if (sum_on(ctx, cur, 1, 2))
    return 1;
  const int e0[] = {0, 1, 2}, e1[] = {3};
  const int *en[] = {e0, e1};
  size_t en_sizes[] = {3, 1};
  CHECK_OK(ctx, dist_new_subgroups_by_enumeration(en, en_sizes, 2, NULL, &cur, NULL, NULL));
  if (sum_on(ctx, cur, 1, r < 3 ? 3 : 1))
    return 1;
  /* The device mesh: 2 x 2, named dimensions. */
  int64_t shape[2] = {2, 2};
  const char *names[2] = {"dp", "tp"};
  dist_device_mesh *m;
  CHECK_OK(ctx, dist_init_device_mesh("cpu", shape, 2, names, &m));
  int coord[2], local;
  CHECK_OK(ctx, dist_mesh_get_coordinate(m, coord));
  CHECK(ctx, coord[0] == r / 2 && coord[1] == r % 2, "coordinate (%d,%d)", coord[0], coord[1]);
  CHECK_OK(ctx, dist_mesh_get_local_rank(m, 1, &local));
  CHECK(ctx, local == r % 2, "local rank along tp");
  dist_pg *tp, *dp;
  CHECK_OK(ctx, dist_mesh_get_group_by_name(m, "tp", &tp));
  CHECK_OK(ctx, dist_mesh_get_group(m, 0, &dp));
  if (sum_on(ctx, tp, r, r / 2 * 4 + 1) || sum_on(ctx, dp, r, 2 + 2 * (r % 2)))
    return 1;
  CHECK(ctx, dist_mesh_get_group_by_name(m, "pp", &tp) == DIST_E_INVAL, "unknown dim name");
  dist_device_mesh_destroy(m);
  /* Destroy all, then init again in the same process. */
  dist_test_finish();
  CHECK(ctx, !dist_is_initialized(), "still initialised after destroy");
  return 0;
}

Test(core_groups, new_split_subgroups_mesh_and_translations, .timeout = 120) {
  cr_assert_eq(dist_test_ranks(4, groups_rank, NULL, 100), 0, "%s", dist_test_report());
}

/* Each rank creates only the group it is in ({0,1} on ranks 0-1, {2,3} on
 * ranks 2-3): both are "group 1" (torch requires every rank to call
 * new_group). At DIST_DEBUG=OFF nothing checks that, but the two groups
 * must not share their keys and cross-connect: each pair sums its own. */
static int own_group_rank(const dist_test_ctx *ctx) {
  CHECK_OK(ctx, dist_test_init_pg(ctx, NULL));
  int pair[2] = {ctx->rank / 2 * 2, ctx->rank / 2 * 2 + 1};
  dist_pg *g = NULL;
  CHECK_OK(ctx, dist_new_group(pair, 2, NULL, &g));
  for (int i = 0; i < 20; i++)
    if (sum_on(ctx, g, ctx->rank + 1, 2 * pair[0] + 3))
      return 1;
  CHECK_OK(ctx, dist_barrier(NULL, NULL)); /* rank 0 hosts the store: nobody leaves early */
  return 0;
}

Test(core_groups, groups_each_created_by_their_members_alone_do_not_cross, .timeout = 60) {
  const char *level = getenv("DIST_DEBUG");
  if (level && !strcmp(level, "DETAIL")) /* this suite's "no false report" run */
    cr_skip_test("not a legal program: DETAIL refuses it at creation (wrapper_pg_order)");
  cr_assert_eq(dist_test_ranks(4, own_group_rank, NULL, 50), 0, "%s", dist_test_report());
}

/* --- work handles, independent groups ------------------------------------ */

static void on_done(dist_work *w, void *arg) {
  (void)w;
  (*(int *)arg)++;
}

static int work_rank(const dist_test_ctx *ctx) {
  CHECK_OK(ctx, dist_test_init_pg(ctx, NULL));
  int r = ctx->rank;
  float v[256];
  dist_tensor t = dist_tensor_1d(v, DIST_FLOAT32, 256);
  /* A pending recv: wait(0) polls, a short wait times out, the op goes on. */
  dist_work *w;
  if (r == 1) {
    CHECK_OK(ctx, dist_irecv(&t, DIST_ANY_SOURCE, NULL, 9, &w));
    CHECK(ctx, !dist_work_is_completed(w), "recv completed before any send");
    CHECK(ctx, dist_work_wait(w, 0) == DIST_E_TIMEOUT, "poll of a pending work");
    CHECK(ctx, dist_work_wait(w, 50) == DIST_E_TIMEOUT, "short wait of a pending work");
    int calls = 0;
    CHECK_OK(ctx, dist_work_set_callback(w, on_done, &calls));
    CHECK_OK(ctx, dist_barrier(NULL, NULL)); /* now rank 0 sends */
    CHECK_OK(ctx, dist_work_wait(w, -1));
    int src = -1;
    CHECK_OK(ctx, dist_work_source_rank(w, &src));
    CHECK(ctx, src == 0 && calls == 1 && dist_work_is_success(w), "src %d calls %d", src, calls);
    int late = 0;
    CHECK_OK(ctx, dist_work_set_callback(w, on_done, &late)); /* runs at once */
    CHECK(ctx, late == 1, "callback on a completed work");
    dist_work_free(w);
  } else {
    CHECK_OK(ctx, dist_barrier(NULL, NULL));
    CHECK_OK(ctx, dist_send(&t, 1, NULL, 9));
  }
  /* Two groups progress independently: each rank starts them in opposite
   * orders and waits for the second first. */
  int both[2] = {0, 1};
  dist_pg *ga, *gb;
  CHECK_OK(ctx, dist_new_group(both, 2, NULL, &ga));
  CHECK_OK(ctx, dist_new_group(both, 2, NULL, &gb));
  dist_tensor ta = t, tb = dist_tensor_1d(v + 128, DIST_FLOAT32, 128);
  ta.shape[0] = 128;
  dist_work *wa, *wb;
  if (r == 0) {
    CHECK_OK(ctx, dist_all_reduce(&ta, DIST_SUM, ga, &wa));
    CHECK_OK(ctx, dist_all_reduce(&tb, DIST_SUM, gb, &wb));
  } else {
    CHECK_OK(ctx, dist_all_reduce(&tb, DIST_SUM, gb, &wb));
    CHECK_OK(ctx, dist_all_reduce(&ta, DIST_SUM, ga, &wa));
  }
  CHECK_OK(ctx, dist_work_wait(wb, 10000));
  CHECK_OK(ctx, dist_work_wait(wa, 10000));
  dist_work_free(wa);
  dist_work_free(wb);
  dist_test_finish();
  return 0;
}

Test(core_groups, work_handles_wait_poll_callback_and_groups_are_independent, .timeout = 60) {
  cr_assert_eq(dist_test_ranks(2, work_rank, NULL, 50), 0, "%s", dist_test_report());
}

/* --- a receive from any source when every sender left --------------------- */

/* Ranks 1 and 2 destroy the group while rank 0 waits for a message from
 * any of them: once the last has left, nobody could send it, so the
 * receive fails naming the departure instead of waiting for its timeout. */
static int lonely_rank(const dist_test_ctx *ctx) {
  setenv("DIST_TEST_TIMEOUT_MS", "40000", 1);
  CHECK_OK(ctx, dist_test_init_pg(ctx, NULL));
  float v[4] = {0};
  dist_tensor t = dist_tensor_1d(v, DIST_FLOAT32, 4);
  if (ctx->rank == 0) {
    int64_t t0 = now_ms();
    int rc = dist_recv(&t, DIST_ANY_SOURCE, NULL, 3, NULL);
    int64_t took = now_ms() - t0;
    CHECK(ctx, rc == DIST_E_PEER_LOST, "got %s: %s", dist_status_name(rc), dist_last_errmsg());
    CHECK(ctx, strstr(dist_last_errmsg(), "left the group"), "message: %s", dist_last_errmsg());
    CHECK(ctx, took < 30000, "the receive waited %lld ms", (long long)took);
  } else {
    dist_destroy_process_group(NULL);
  }
  dist_test_finish();
  return 0;
}

Test(core_groups, a_receive_from_any_source_fails_when_every_sender_left, .timeout = 60) {
  cr_assert_eq(dist_test_ranks(3, lonely_rank, NULL, 50), 0, "%s", dist_test_report());
}

/* --- abort from another thread ------------------------------------------- */

static void *aborter(void *arg) {
  usleep(300 * 1000);
  dist_abort_group(arg, "aborted by the test's watchdog thread");
  return NULL;
}

static int abort_rank(const dist_test_ctx *ctx) {
  setenv("DIST_TRANSPORT", ctx->arg, 1);
  CHECK_OK(ctx, dist_test_init_pg(ctx, NULL));
  float v[64] = {0};
  dist_tensor t = dist_tensor_1d(v, DIST_FLOAT32, 64);
  int both[2] = {0, 1};
  dist_pg *g;
  CHECK_OK(ctx, dist_new_group(both, 2, NULL, &g));
  if (ctx->rank == 0) {
    /* Rank 1 never joins this all_reduce; a watchdog thread aborts. */
    pthread_t th;
    pthread_create(&th, NULL, aborter, g);
    int64_t t0 = now_ms();
    int rc = dist_all_reduce(&t, DIST_SUM, g, NULL);
    int64_t took = now_ms() - t0;
    pthread_join(th, NULL);
    CHECK(ctx, rc == DIST_E_ABORTED, "got %s", dist_status_name(rc));
    CHECK(ctx, took < 5000, "abort took %lld ms", (long long)took);
    CHECK(ctx, strstr(dist_pg_errmsg(g), "watchdog"), "message: %s", dist_pg_errmsg(g));
    CHECK(ctx, dist_all_reduce(&t, DIST_SUM, g, NULL) == DIST_E_ABORTED, "later op");
    CHECK(ctx, dist_pg_async_error(g) == DIST_E_ABORTED, "sticky error");
  }
  CHECK_OK(ctx, dist_barrier(NULL, NULL)); /* the default group is untouched */
  dist_test_finish();
  return 0;
}

Test(core_groups, abort_from_another_thread_wakes_a_waiter_shm, .timeout = 60) {
  cr_assert_eq(dist_test_ranks(2, abort_rank, "auto", 50), 0, "%s", dist_test_report());
}
Test(core_groups, abort_from_another_thread_wakes_a_waiter_tcp, .timeout = 60) {
  cr_assert_eq(dist_test_ranks(2, abort_rank, "tcp", 50), 0, "%s", dist_test_report());
}

/* --- a waiting rank sleeps ------------------------------------------------ */

/* A rank blocked in a collective for two seconds while its peer is busy
 * elsewhere must stop spinning and sleep: its CPU time stays small. */
static int idle_rank(const dist_test_ctx *ctx) {
  setenv("DIST_TRANSPORT", ctx->arg, 1);
  CHECK_OK(ctx, dist_test_init_pg(ctx, NULL));
  float v[16] = {0};
  dist_tensor t = dist_tensor_1d(v, DIST_FLOAT32, 16);
  CHECK_OK(ctx, dist_all_reduce(&t, DIST_SUM, NULL, NULL));
  if (ctx->rank == 1)
    usleep(2000 * 1000);
  struct timespec c0, c1;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c0);
  int64_t t0 = now_ms();
  CHECK_OK(ctx, dist_all_reduce(&t, DIST_SUM, NULL, NULL));
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c1);
  double cpu = (double)(c1.tv_sec - c0.tv_sec) + (double)(c1.tv_nsec - c0.tv_nsec) * 1e-9;
  int64_t waited = now_ms() - t0;
  if (ctx->rank == 0) {
    fprintf(stderr, "[rank 0] waited %lld ms using %.3f s of CPU\n", (long long)waited, cpu);
    CHECK(ctx, waited > 1500, "did not wait (%lld ms)", (long long)waited);
    CHECK(ctx, cpu < 0.25 * (double)waited / 1000, "burned %.3f s of CPU in %lld ms", cpu,
          (long long)waited);
  }
  dist_test_finish();
  return 0;
}

Test(core_groups, a_waiting_rank_sleeps_instead_of_spinning_shm, .timeout = 60) {
  cr_assert_eq(dist_test_ranks(2, idle_rank, "auto", 50), 0, "%s", dist_test_report());
}
Test(core_groups, a_waiting_rank_sleeps_instead_of_spinning_tcp, .timeout = 60) {
  cr_assert_eq(dist_test_ranks(2, idle_rank, "tcp", 50), 0, "%s", dist_test_report());
}

/* --- dist_breakpoint -------------------------------------------------------- */

static void *debugger(void *arg) {
  (void)arg;
  usleep(400 * 1000); /* what a person in gdb does: set var ... = 0 */
  atomic_store(&dist_breakpoint_wait, 0);
  return NULL;
}

static int breakpoint_rank(const dist_test_ctx *ctx) {
  CHECK_OK(ctx, dist_test_init_pg(ctx, NULL));
  pthread_t th;
  if (ctx->rank == 1)
    pthread_create(&th, NULL, debugger, NULL);
  int64_t t0 = now_ms();
  CHECK_OK(ctx, dist_breakpoint(1));
  int64_t waited = now_ms() - t0;
  if (ctx->rank == 1)
    pthread_join(th, NULL);
  CHECK(ctx, waited >= 300, "rank %d went on after %lld ms", ctx->rank, (long long)waited);
  CHECK(ctx, dist_breakpoint(7) == DIST_E_INVAL, "breakpoint on a rank outside the job");
  dist_test_finish();
  return 0;
}

Test(core_groups, breakpoint_holds_every_rank_until_the_debugger_continues, .timeout = 30) {
  cr_assert_eq(dist_test_ranks(3, breakpoint_rank, NULL, 25), 0, "%s", dist_test_report());
}

/* --- monitored_barrier ---------------------------------------------------- */

static int mb_rank(const dist_test_ctx *ctx) {
  bool all = ctx->arg != NULL;
  CHECK_OK(ctx, dist_test_init_pg(ctx, NULL));
  CHECK_OK(ctx, dist_monitored_barrier(NULL, 5000, all));
  dist_store *store = dist_get_default_store();
  int r = ctx->rank, absent = all ? 2 : 1;
  if (r == 2 || (all && r == 3)) {
    /* Absent from the next barrier until every present rank has timed out. */
    const char *k = "mb-timed-out-all";
    CHECK_OK(ctx, dist_store_wait(store, &k, 1, 30000));
  } else {
    int rc = dist_monitored_barrier(NULL, 500, all);
    const char *msg = dist_pg_errmsg(NULL);
    CHECK(ctx, rc == DIST_E_TIMEOUT, "got %s", dist_status_name(rc));
    if (r == 0)
      CHECK(ctx, strstr(msg, all ? "Ranks 2-3 failed to pass" : "Rank 2 failed to pass"),
            "rank 0's message: %s", msg);
    else
      CHECK(ctx, strstr(msg, "rank 0 found absent ranks") && strstr(msg, "2"),
            "message: %s", msg);
    int64_t n = 0;
    CHECK_OK(ctx, dist_store_add(store, "mb-timed-out", 1, &n));
    if (n == ctx->world - absent)
      CHECK_OK(ctx, dist_store_set(store, "mb-timed-out-all", "1", 1));
  }
  dist_test_finish();
  return 0;
}

Test(core_groups, monitored_barrier_names_the_first_absent_rank, .timeout = 60) {
  cr_assert_eq(dist_test_ranks(4, mb_rank, NULL, 50), 0, "%s", dist_test_report());
}
Test(core_groups, monitored_barrier_names_every_absent_rank, .timeout = 60) {
  cr_assert_eq(dist_test_ranks(4, mb_rank, "all", 50), 0, "%s", dist_test_report());
}

/* --- byte blobs ----------------------------------------------------------- */

static void blob_of(int r, char *buf, size_t len) {
  snprintf(buf, len, "rank %d says %.*s", r, r * 7, "hellohellohellohellohellohellohello");
}

static int blob_rank(const dist_test_ctx *ctx) {
  CHECK_OK(ctx, dist_test_init_pg(ctx, NULL));
  int r = ctx->rank, n = ctx->world;
  char mine[128], want[128];
  blob_of(r, mine, sizeof mine);
  dist_bytes in = {mine, strlen(mine)};
  dist_bytes b = r == 1 ? in : (dist_bytes){NULL, 0};
  CHECK_OK(ctx, dist_broadcast_bytes(&b, 1, NULL));
  blob_of(1, want, sizeof want);
  CHECK(ctx, b.len == strlen(want) && !memcmp(b.data, want, b.len), "broadcast_bytes");
  if (r != 1)
    dist_free(b.data);
  dist_bytes out[8];
  CHECK_OK(ctx, dist_all_gather_bytes(&in, out, NULL));
  for (int i = 0; i < n; i++) {
    blob_of(i, want, sizeof want);
    CHECK(ctx, out[i].len == strlen(want) && !strcmp(out[i].data, want), "all_gather %d", i);
    dist_free(out[i].data);
  }
  CHECK_OK(ctx, dist_gather_bytes(&in, r == 2 ? out : NULL, 2, NULL));
  for (int i = 0; r == 2 && i < n; i++) {
    blob_of(i, want, sizeof want);
    CHECK(ctx, !strcmp(out[i].data, want), "gather %d", i);
    dist_free(out[i].data);
  }
  dist_bytes parts[8], got;
  char bufs[8][128];
  for (int i = 0; i < n; i++) {
    blob_of(i + 10, bufs[i], sizeof bufs[i]);
    parts[i] = (dist_bytes){bufs[i], strlen(bufs[i])};
  }
  CHECK_OK(ctx, dist_scatter_bytes(&got, r == 0 ? parts : NULL, 0, NULL));
  blob_of(r + 10, want, sizeof want);
  CHECK(ctx, got.len == strlen(want) && !strcmp(got.data, want), "scatter: %s", (char *)got.data);
  dist_free(got.data);
  if (r == 0) {
    CHECK_OK(ctx, dist_send_bytes(&in, 1, NULL));
  } else if (r == 1) {
    int src = -1;
    CHECK_OK(ctx, dist_recv_bytes(&got, DIST_ANY_SOURCE, NULL, &src));
    blob_of(0, want, sizeof want);
    CHECK(ctx, src == 0 && !strcmp(got.data, want), "recv_bytes from %d", src);
    dist_free(got.data);
  }
  dist_test_finish();
  return 0;
}

Test(core_groups, byte_blob_collectives_carry_variable_lengths, .timeout = 60) {
  cr_assert_eq(dist_test_ranks(3, blob_rank, NULL, 50), 0, "%s", dist_test_report());
}
