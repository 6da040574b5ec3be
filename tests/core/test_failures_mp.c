/* ctest: labels=multiproc timeout=300 */
/* What users see when things go wrong, on real forked ranks:
 *  - bad arguments (wrong root, unknown rank, NULL buffer, dtype/op that make
 *    no sense) fail at once with DIST_E_INVAL and a message, and an async
 *    call that fails its checks returns no work handle;
 *  - sizes that disagree between ranks (send 8 / recv 4 and the reverse,
 *    all_to_all_single splits, all_reduce counts) fail on the receiving AND
 *    the sending rank with a message naming the peer's global rank, the
 *    operation, its sequence number and both sizes; nobody crashes;
 *  - a rank killed with SIGKILL in the middle of an all_reduce loop makes
 *    every other rank fail with DIST_E_PEER_LOST naming it, within the
 *    timeout, over shared memory and over TCP;
 *  - a receive whose send never comes fails at the group's timeout;
 *  - a group destroyed with an async operation never waited fails that
 *    operation on its rank and on the peer, every time, and the job's
 *    cause names the destroyer;
 *  - a group's last small broadcast, where a rank named itself the root,
 *    fails the destroy on the roots with a desync naming that rank, over
 *    shared memory (whose roots return before comparing), within a bound,
 *    and a legal last broadcast costs its destroy nothing. */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <dist/internal/launch.h> /* DIST_KEY_CAUSE */
#include "mp.h"

static int64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

#define EXPECT_INVAL(ctx, call, needle)                                                   \
  do {                                                                                    \
    int rc_ = (call);                                                                     \
    CHECK(ctx, rc_ == DIST_E_INVAL, "%s returned %s, want DIST_E_INVAL", #call,           \
          dist_status_name(rc_));                                                         \
    CHECK(ctx, strstr(dist_pg_errmsg(NULL), needle), "%s: message '%s' lacks '%s'", #call, \
          dist_pg_errmsg(NULL), needle);                                                  \
  } while (0)

static int bad_args_rank(const dist_test_ctx *ctx) {
  CHECK_OK(ctx, dist_test_init_pg(ctx, NULL));
  float v[8] = {0};
  dist_tensor t = dist_tensor_1d(v, DIST_FLOAT32, 8);
  EXPECT_INVAL(ctx, dist_broadcast(&t, 7, NULL, NULL), "rank 7 is not in group");
  EXPECT_INVAL(ctx, dist_reduce(&t, -3, DIST_SUM, NULL, NULL), "rank -3");
  dist_tensor null_buf = dist_tensor_1d(NULL, DIST_FLOAT32, 8);
  EXPECT_INVAL(ctx, dist_all_reduce(&null_buf, DIST_SUM, NULL, NULL), "NULL data pointer");
  EXPECT_INVAL(ctx, dist_all_reduce(NULL, DIST_SUM, NULL, NULL), "is NULL");
  EXPECT_INVAL(ctx, dist_all_reduce(&t, DIST_BXOR, NULL, NULL), "BXOR is not defined for float32");
  int32_t iv[4] = {0};
  dist_tensor ti = dist_tensor_1d(iv, DIST_INT32, 4);
  EXPECT_INVAL(ctx, dist_all_reduce(&ti, DIST_AVG, NULL, NULL), "AVG is not defined for int32");
  dist_tensor outs[3] = {t, t, t};
  EXPECT_INVAL(ctx, dist_all_gather(outs, 3, &t, NULL, NULL), "expected 2");
  dist_work *w = (dist_work *)0x1;
  CHECK(ctx, dist_all_reduce(&t, DIST_BXOR, NULL, &w) == DIST_E_INVAL && w == NULL,
        "async call that failed its checks left a work handle");
  int bad[2] = {0, 5};
  dist_pg *g;
  CHECK(ctx, dist_new_group(bad, 2, NULL, &g) == DIST_E_INVAL, "new_group with rank 5");
  CHECK(ctx, strstr(dist_last_errmsg(), "rank 5"), "message: %s", dist_last_errmsg());
  /* The group still works after all of that. */
  CHECK_OK(ctx, dist_all_reduce(&t, DIST_SUM, NULL, NULL));
  dist_test_finish();
  return 0;
}

Test(core_failures, bad_arguments_fail_with_inval_and_a_message, .timeout = 60) {
  cr_assert_eq(dist_test_ranks(2, bad_args_rank, NULL, 50), 0, "%s", dist_test_report());
}

/* --- sizes that disagree between ranks ----------------------------------- */

typedef enum { SEND8_RECV4, SEND4_RECV8, A2A_SPLITS, ALLREDUCE_COUNTS } mismatch;

typedef struct mm_arg {
  mismatch kind;
  const char *transport;
} mm_arg;

/* Runs the mismatching call; returns its status. */
static int mismatching_call(const dist_test_ctx *ctx, mismatch kind, float *buf) {
  int r = ctx->rank;
  dist_tensor t8 = dist_tensor_1d(buf, DIST_FLOAT32, 8), t4 = dist_tensor_1d(buf, DIST_FLOAT32, 4);
  switch (kind) {
  case SEND8_RECV4:
    return r == 0 ? dist_send(&t8, 1, NULL, 3) : dist_recv(&t4, 0, NULL, 3, NULL);
  case SEND4_RECV8:
    return r == 0 ? dist_send(&t4, 1, NULL, 3) : dist_recv(&t8, 0, NULL, 3, NULL);
  case A2A_SPLITS: {
    /* Rank 0 sends 3 rows to rank 1, but rank 1 expects 1 row from 0. */
    int64_t in0[2] = {1, 3}, out0[2] = {1, 1};
    int64_t in1[2] = {1, 1}, out1[2] = {1, 1};
    dist_tensor in = {.data = buf, .dtype = DIST_FLOAT32, .ndim = 2, .shape = {r ? 2 : 4, 2}};
    dist_tensor out = {.data = buf + 16, .dtype = DIST_FLOAT32, .ndim = 2, .shape = {2, 2}};
    return dist_all_to_all_single(&out, &in, r ? out1 : out0, r ? in1 : in0, NULL, NULL);
  }
  case ALLREDUCE_COUNTS:
    return dist_all_reduce(r == 0 ? &t8 : &t4, DIST_SUM, NULL, NULL);
  }
  return DIST_E_INTERNAL;
}

/* Whether msg gives a size of n float32 elements: "4N bytes", "N element",
 * "[N]" or "sends N". */
static bool has_size(const char *msg, int n) {
  char f[4][32];
  snprintf(f[0], sizeof f[0], "%d bytes", 4 * n);
  snprintf(f[1], sizeof f[1], "%d element", n);
  snprintf(f[2], sizeof f[2], "[%d]", n);
  snprintf(f[3], sizeof f[3], "sends %d", n);
  for (int i = 0; i < 4; i++)
    if (strstr(msg, f[i]))
      return true;
  return false;
}

static int mismatch_rank(const dist_test_ctx *ctx) {
  const mm_arg *a = ctx->arg;
  setenv("DIST_TRANSPORT", a->transport, 1);
  setenv("DIST_TEST_TIMEOUT_MS", "15000", 1);
  CHECK_OK(ctx, dist_test_init_pg(ctx, NULL));
  float *buf = calloc(64, sizeof(float));
  /* Distinct data per rank, so a receive that wrote anything shows. */
  for (int i = 0; i < 64; i++)
    buf[i] = ctx->rank ? 1000 + (float)i : -1 - (float)i;
  int64_t t0 = now_ms();
  int rc = mismatching_call(ctx, a->kind, buf);
  const char *msg = dist_pg_errmsg(NULL);
  fprintf(stderr, "[rank %d] %s: %s\n", ctx->rank, dist_status_name(rc), msg);
  CHECK(ctx, rc == DIST_E_DESYNC, "rank %d: got %s, want DIST_E_DESYNC", ctx->rank,
        dist_status_name(rc));
  CHECK(ctx, rc != DIST_E_TIMEOUT && now_ms() - t0 < 10000,
        "the mismatch ended in a timeout (%s) instead of an error", dist_status_name(rc));
  char peer[32];
  snprintf(peer, sizeof peer, "rank %d", 1 - ctx->rank);
  CHECK(ctx, strstr(msg, peer), "the message does not name the peer (%s): %s", peer, msg);
  CHECK(ctx, strstr(msg, "#1"), "the message does not give the sequence number: %s", msg);
  /* The operation, and both sides' sizes (in bytes or in elements). */
  static const char *const op[] = {"SEND", "SEND", "ALL_TO_ALL_SINGLE", "ALL_REDUCE"};
  static const int big[] = {8, 8, 6, 8}, small[] = {4, 4, 2, 4}; /* float32 elements */
  CHECK(ctx, strstr(msg, op[a->kind]), "the message does not name %s: %s", op[a->kind], msg);
  CHECK(ctx, has_size(msg, big[a->kind]) && has_size(msg, small[a->kind]),
        "the message does not give both sizes (%d and %d elements): %s", big[a->kind],
        small[a->kind], msg);
  /* The receiver must not have been handed truncated or foreign data. */
  if (a->kind == SEND8_RECV4 || a->kind == SEND4_RECV8)
    for (int i = 0; i < 8 && ctx->rank == 1; i++)
      CHECK(ctx, buf[i] == 1000 + (float)i, "the receive buffer was written (buf[%d] = %g)", i,
            (double)buf[i]);
  free(buf);
  dist_test_finish();
  return 0;
}

static void run_mismatch(mismatch kind, const char *transport) {
  mm_arg a = {kind, transport};
  cr_assert_eq(dist_test_ranks(2, mismatch_rank, &a, 60), 0, "%s", dist_test_report());
}

Test(core_failures, send8_recv4_fails_both_ranks_tcp, .timeout = 90) {
  run_mismatch(SEND8_RECV4, "tcp");
}
Test(core_failures, send4_recv8_fails_both_ranks_shm_host, .timeout = 90) {
  run_mismatch(SEND4_RECV8, "auto");
}
Test(core_failures, all_to_all_single_splits_that_disagree_fail_shm, .timeout = 90) {
  run_mismatch(A2A_SPLITS, "auto");
}
Test(core_failures, all_to_all_single_splits_that_disagree_fail_tcp, .timeout = 90) {
  run_mismatch(A2A_SPLITS, "tcp");
}
Test(core_failures, all_reduce_counts_that_differ_fail_shm, .timeout = 90) {
  run_mismatch(ALLREDUCE_COUNTS, "auto");
}
Test(core_failures, all_reduce_counts_that_differ_fail_tcp, .timeout = 90) {
  run_mismatch(ALLREDUCE_COUNTS, "tcp");
}

/* --- all_to_all_single whose splits disagree on one rank alone ----------- */

/* Rank 1 sends itself 2 rows but expects 1 from itself; what it exchanges
 * with rank 0 (1 row each way) agrees. Only rank 1 can see it, and the
 * fault is its own: a desync that marks rank 1 (so the job's cause names
 * it), on rank 1, and a failure naming rank 1 on rank 0, not a timeout. */
static int own_block_rank(const dist_test_ctx *ctx) {
  setenv("DIST_TRANSPORT", (const char *)ctx->arg, 1);
  setenv("DIST_TEST_TIMEOUT_MS", "15000", 1);
  CHECK_OK(ctx, dist_test_init_pg(ctx, NULL));
  float buf[32] = {0};
  int r = ctx->rank;
  int64_t in[2] = {1, r ? 2 : 1}, out[2] = {1, 1};
  dist_tensor ti = {.data = buf, .dtype = DIST_FLOAT32, .ndim = 2, .shape = {r ? 3 : 2, 2}};
  dist_tensor to = {.data = buf + 16, .dtype = DIST_FLOAT32, .ndim = 2, .shape = {2, 2}};
  int64_t t0 = now_ms();
  int rc = dist_all_to_all_single(&to, &ti, out, in, NULL, NULL);
  const char *msg = dist_pg_errmsg(NULL);
  fprintf(stderr, "[rank %d] %s: %s\n", r, dist_status_name(rc), msg);
  CHECK(ctx, rc != DIST_OK && rc != DIST_E_TIMEOUT && now_ms() - t0 < 10000,
        "rank %d: %s after %lld ms", r, dist_status_name(rc), (long long)(now_ms() - t0));
  CHECK(ctx, strstr(msg, "rank 1"), "the message does not name rank 1: %s", msg);
  if (r == 1) {
    CHECK(ctx, rc == DIST_E_DESYNC, "rank 1: %s, want DIST_E_DESYNC", dist_status_name(rc));
    CHECK(ctx, strstr(msg, "from rank 1 (8 bytes)  <- split size differs") &&
                   strstr(msg, "to rank 1 (16 bytes)") &&
                   strstr(msg, "rank 1's split sizes disagree with themselves: its block to "
                               "itself is 4 elements in its input and 2 in its output"),
          "rank 1's report: %s", msg);
  }
  dist_test_finish();
  return 0;
}

Test(core_failures, all_to_all_single_own_block_that_differs_names_its_rank_tcp, .timeout = 90) {
  cr_assert_eq(dist_test_ranks(2, own_block_rank, "tcp", 60), 0, "%s", dist_test_report());
}

/* --- a rank killed mid all_reduce loop ----------------------------------- */

typedef struct kill_arg {
  const char *transport;
  int victim;
} kill_arg;

static int kill_rank(const dist_test_ctx *ctx) {
  const kill_arg *a = ctx->arg;
  setenv("DIST_TRANSPORT", a->transport, 1);
  setenv("DIST_TEST_TIMEOUT_MS", "20000", 1);
  CHECK_OK(ctx, dist_test_init_pg(ctx, NULL));
  float v[1024];
  dist_tensor t = dist_tensor_1d(v, DIST_FLOAT32, 1024);
  int64_t t_kill = 0;
  for (int i = 0;; i++) {
    for (int k = 0; k < 1024; k++)
      v[k] = (float)k;
    if (ctx->rank == a->victim && i == 200)
      raise(SIGKILL);
    if (i == 200)
      t_kill = now_ms();
    int rc = dist_all_reduce(&t, DIST_SUM, NULL, NULL);
    if (rc == DIST_OK)
      continue;
    const char *msg = dist_pg_errmsg(NULL);
    int64_t waited = t_kill ? now_ms() - t_kill : -1;
    fprintf(stderr, "[rank %d] after %lld ms: %s: %s\n", ctx->rank, (long long)waited,
            dist_status_name(rc), msg);
    CHECK(ctx, rc == DIST_E_PEER_LOST, "got %s, want DIST_E_PEER_LOST", dist_status_name(rc));
    char who[32];
    snprintf(who, sizeof who, "rank %d", a->victim);
    CHECK(ctx, strstr(msg, who), "the message does not name %s: %s", who, msg);
    CHECK(ctx, strstr(msg, "pid"), "the message does not give the pid: %s", msg);
    char host[256], at[400];
    gethostname(host, sizeof host);
    host[sizeof host - 1] = '\0';
    snprintf(at, sizeof at, "%s (host %s, pid", who, host);
    CHECK(ctx, strstr(msg, at), "the message does not give the host as '%s': %s", at, msg);
    CHECK(ctx, waited >= 0 && waited < 15000, "noticed after %lld ms", (long long)waited);
    CHECK(ctx, i >= 200, "failed at iteration %d, before the kill", i);
    break;
  }
  dist_test_finish();
  return 0;
}

static void run_kill(const char *transport, int world) {
  kill_arg a = {transport, world - 1};
  dist_test_result res;
  dist_test_opts o = {world, kill_rank, &a, 60, -1, 0};
  int bad = dist_test_run(&o, &res);
  cr_assert_eq(res.signal[a.victim], SIGKILL, "the victim did not die by SIGKILL");
  /* The victim's own status is the kill; every survivor must have passed. */
  cr_assert_eq(bad, 1, "%s", res.report);
  for (int r = 0; r < world; r++)
    if (r != a.victim)
      cr_assert_eq(res.exit_code[r], 0, "rank %d: %s", r, res.report);
}

Test(core_failures, killed_rank_is_named_by_every_survivor_shm, .timeout = 90) {
  run_kill("auto", 3);
}
Test(core_failures, killed_rank_is_named_by_every_survivor_tcp, .timeout = 90) {
  run_kill("tcp", 3);
}

/* --- a receive whose send never comes --------------------------------------- */

/* Rank 1 receives from rank 0, which never sends, on a group with a 1.5 s
 * timeout: dist_recv, and dist_irecv waited on with -1 ("as long as the
 * operation may take"), both fail with DIST_E_TIMEOUT naming rank 0 well
 * before the test's own deadline, instead of waiting forever. */
static int recv_timeout_rank(const dist_test_ctx *ctx) {
  CHECK_OK(ctx, dist_test_init_pg(ctx, NULL));
  dist_group_opts o = {.timeout_ms = 1500};
  dist_pg *g;
  CHECK_OK(ctx, dist_new_group((int[]){0, 1}, 2, &o, &g));
  dist_store *st = dist_get_default_store();
  if (ctx->rank == 1) {
    float v[4];
    dist_tensor t = dist_tensor_1d(v, DIST_FLOAT32, 4);
    int64_t t0 = now_ms();
    int rc = dist_recv(&t, 0, g, 7, NULL);
    int64_t took = now_ms() - t0;
    CHECK(ctx, rc == DIST_E_TIMEOUT, "recv: %s: %s", dist_status_name(rc), dist_pg_errmsg(g));
    CHECK(ctx, took >= 1400 && took < 15000, "recv failed after %lld ms", (long long)took);
    CHECK(ctx, strstr(dist_pg_errmsg(g), "rank 0"), "names the sender: %s", dist_pg_errmsg(g));
    dist_work *w = NULL;
    CHECK_OK(ctx, dist_irecv(&t, 0, g, 8, &w));
    rc = dist_work_wait(w, -1);
    CHECK(ctx, rc == DIST_E_TIMEOUT && strstr(dist_work_errmsg(w), "rank 0"), "irecv: %s: %s",
          dist_status_name(rc), dist_work_errmsg(w));
    dist_work_free(w);
    CHECK_OK(ctx, dist_store_set(st, "recv-timed-out", "1", 1));
  } else {
    const char *k = "recv-timed-out";
    CHECK_OK(ctx, dist_store_wait(st, &k, 1, 30000));
  }
  dist_test_finish();
  return 0;
}

Test(core_failures, a_receive_whose_send_never_comes_times_out, .timeout = 60) {
  cr_assert_eq(dist_test_ranks(2, recv_timeout_rank, NULL, 50), 0, "%s", dist_test_report());
}

/* --- a group destroyed with an operation never waited ---------------------- */

typedef struct nowait_arg {
  const char *transport;
  bool out; /* rank 1's half of the all_reduce has left before the destroy */
} nowait_arg;

/* The job's cause, as distrun reads it, names rank 1's destroy. */
static int cause_names_the_destroy(const dist_test_ctx *ctx) {
  void *v = NULL;
  size_t n = 0;
  CHECK_OK(ctx, dist_store_get(dist_get_default_store(), DIST_KEY_CAUSE, &v, &n));
  char text[2048];
  snprintf(text, sizeof text, "%.*s", (int)n, (const char *)v);
  dist_free(v);
  CHECK(ctx, strstr(text, "rank 1 destroyed group 1 (pair) with ALL_REDUCE #") &&
                 strstr(text, " pending (never waited)"),
        "the cause: %s", text);
  return 0;
}

/* Rank 1 starts an async all_reduce on a pair and destroys the pair without
 * waiting; rank 0 calls the all_reduce 1 s later. pg.h: the destroy fails
 * the pending operation with DIST_E_ABORTED, and it fails on rank 0 too.
 * It used to depend on timing: a destroy that found the operation already
 * taken off the queue by the progress thread waited for it to complete
 * (rank 0 came, both succeeded, the job exited 0); and when rank 1's half
 * had left before the abort (out), rank 0 found its data and completed,
 * over shared memory (the step was posted) and over TCP (the data came
 * before the ABORT). */
static int destroy_nowait_rank(const dist_test_ctx *ctx) {
  const nowait_arg *a = ctx->arg;
  setenv("DIST_TRANSPORT", a->transport, 1);
  setenv("DIST_TEST_TIMEOUT_MS", "15000", 1);
  CHECK_OK(ctx, dist_test_init_pg(ctx, NULL));
  dist_group_opts o = {.desc = "pair"};
  dist_pg *g;
  CHECK_OK(ctx, dist_new_group((int[]){0, 1}, 2, &o, &g));
  float v[32] = {1};
  dist_tensor t = dist_tensor_1d(v, DIST_FLOAT32, 32);
  if (a->out) /* connects the pair, so rank 1's data can reach rank 0 */
    CHECK_OK(ctx, dist_all_reduce(&t, DIST_SUM, g, NULL));
  if (ctx->rank == 1) {
    dist_work *w = NULL;
    CHECK_OK(ctx, dist_all_reduce(&t, DIST_SUM, g, &w));
    if (a->out)
      usleep(200 * 1000);
    CHECK_OK(ctx, dist_destroy_process_group(g));
    int rc = dist_work_status(w);
    CHECK(ctx, rc == DIST_E_ABORTED, "rank 1's never-waited all_reduce: %s: %s",
          dist_status_name(rc), dist_work_errmsg(w));
    dist_work_free(w);
    /* rank 0 arrives once the pair is destroyed */
    CHECK_OK(ctx, dist_store_set(dist_get_default_store(), "test/destroyed", "1", 1));
  } else {
    const char *keys[] = {"test/destroyed"};
    CHECK_OK(ctx, dist_store_wait(dist_get_default_store(), keys, 1, 10000));
    int rc = dist_all_reduce(&t, DIST_SUM, g, NULL);
    fprintf(stderr, "[rank 0] %s: %s\n", dist_status_name(rc), dist_pg_errmsg(g));
    CHECK(ctx, rc != DIST_OK && rc != DIST_E_TIMEOUT,
          "rank 0's all_reduce: %s, though rank 1 destroyed the pair with it pending",
          dist_status_name(rc));
    if (cause_names_the_destroy(ctx))
      return 1;
    dist_destroy_process_group(g);
  }
  dist_test_finish();
  return 0;
}

static void run_nowait(const char *transport) {
  for (int i = 0; i < 3; i++) {
    nowait_arg a = {transport, i == 2};
    cr_assert_eq(dist_test_ranks(2, destroy_nowait_rank, &a, 40), 0, "run %d (%s):\n%s", i + 1,
                 a.out ? "rank 1's half out" : "at once", dist_test_report());
  }
}

Test(core_failures, a_group_destroyed_with_its_all_reduce_never_waited_fails_it_on_both_shm,
     .timeout = 90) {
  run_nowait("auto");
}
Test(core_failures, a_group_destroyed_with_its_all_reduce_never_waited_fails_it_on_both_tcp,
     .timeout = 90) {
  run_nowait("tcp");
}

/* --- the group's last small broadcast, with a rank naming itself root ------ */

/* Every rank broadcasts 1 float32 on a group of all ranks, rank 1 naming
 * itself the root where the others name rank 0 (bad), or every rank
 * naming rank 0, then destroys the group. Over shared memory the roots
 * return from a small broadcast before comparing the others' calls, and
 * only the next operation compared them: as the group's last call the
 * disagreement went unreported and every rank's destroy succeeded. Now
 * each root compares at its destroy, which fails with DIST_E_DESYNC and
 * the report (the culprit marked when a majority tells), posted as the
 * job's cause; a reader (rank 2) read root 0's and has nothing to say. A
 * legal last broadcast leaves every destroy DIST_OK and quick. */
static int last_bcast_rank(const dist_test_ctx *ctx) {
  bool bad = ctx->arg != NULL;
  CHECK_OK(ctx, dist_test_init_pg(ctx, NULL));
  int all[8];
  for (int r = 0; r < ctx->world; r++)
    all[r] = r;
  dist_group_opts o = {.desc = "all"};
  dist_pg *g;
  CHECK_OK(ctx, dist_new_group(all, (size_t)ctx->world, &o, &g));
  float v = ctx->rank == 0 ? 0.5f : 0;
  dist_tensor t = dist_tensor_1d(&v, DIST_FLOAT32, 1);
  CHECK_OK(ctx, dist_broadcast(&t, bad && ctx->rank == 1 ? 1 : 0, g, NULL));
  int64_t t0 = now_ms();
  int rc = dist_destroy_process_group(g);
  int64_t took = now_ms() - t0;
  const char *msg = dist_last_errmsg();
  fprintf(stderr, "[rank %d] destroy: %s after %lld ms: %s\n", ctx->rank, dist_status_name(rc),
          (long long)took, rc ? msg : "");
  CHECK(ctx, took < 5000, "the destroy took %lld ms", (long long)took);
  if (!bad || ctx->rank > 1) {
    CHECK(ctx, rc == DIST_OK, "destroy: %s: %s", dist_status_name(rc), msg);
    CHECK(ctx, took < 1000, "a legal last broadcast cost its destroy %lld ms", (long long)took);
    dist_test_finish();
    return 0;
  }
  CHECK(ctx, rc == DIST_E_DESYNC, "destroy: %s, want DIST_E_DESYNC: %s", dist_status_name(rc),
        msg);
  CHECK(ctx, strstr(msg, "desync in group 1 (all, ") && strstr(msg, " at BROADCAST #1: ") &&
                 strstr(msg, ctx->rank ? "rank 0 (host " : "rank 1 (host "),
        "the report: %s", msg);
  if (ctx->world > 2) { /* rank 2 sides with rank 0: rank 1 is marked */
    CHECK(ctx, strstr(msg, "\n  rank 1: BROADCAST float32[1] root 1 (4 bytes)  <- root differs"),
          "rank 1 is not marked: %s", msg);
    void *c = NULL;
    size_t n = 0;
    CHECK_OK(ctx, dist_store_get(dist_get_default_store(), DIST_KEY_CAUSE, &c, &n));
    bool says = memmem(c, n, "root 1 (4 bytes)  <- root differs", 33) != NULL;
    dist_free(c);
    CHECK(ctx, says, "the job's cause does not mark rank 1");
  }
  dist_test_finish();
  return 0;
}

Test(core_failures, a_last_small_broadcast_with_a_rank_naming_itself_root_fails_the_destroy,
     .timeout = 90) {
  setenv("DIST_TRANSPORT", "shm", 1);
  for (int world = 2; world <= 3; world++) {
    cr_assert_eq(dist_test_ranks(world, last_bcast_rank, "bad", 40), 0, "%d ranks:\n%s", world,
                 dist_test_report());
    cr_assert_eq(dist_test_ranks(world, last_bcast_rank, NULL, 40), 0, "%d ranks, legal:\n%s",
                 world, dist_test_report());
  }
}
