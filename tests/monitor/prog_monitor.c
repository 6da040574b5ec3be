/* prog_monitor.c - the rank program of test_monitor_mp.c (built as
 * build/bin/monitor_testprog, linked with the bundled libdist, so the
 * monitor is in it as in a user's program). It initialises through env://
 * (distrun's variables, or the test's by hand) and runs one scenario:
 *   hang R      all_reduce in a loop; rank R sleeps forever before its 10th
 *   kill R      ... rank R SIGKILLs itself before its 10th
 *   exit R      ... rank R calls exit(0) before its 10th
 *   stop R      ... rank R SIGSTOPs itself before its 10th
 *   segv R      ... rank R writes through a NULL pointer before its 10th
 *   syscall R   ... rank R blocks in read() on a pipe before its 10th
 *   cross2      2 ranks, groups A and B; rank 0 all_reduces on A then B,
 *               rank 1 on B then A (a deadlock across groups)
 *   cross3      3 ranks, groups {0,1} {1,2} {2,0}; rank r calls its group
 *               with r+1 first (a cycle of three)
 *   recv2       4 ranks: ranks 0 and 1 each receive from the other before
 *               sending (a point-to-point deadlock), ranks 2 and 3 go on
 *               to an all_reduce of the default group
 *   tags2       4 ranks: rank 0 sends to rank 1 with tag 7, rank 1
 *               receives from rank 0 with tag 0 (they never match), ranks
 *               2 and 3 go on to an all_reduce of the default group
 *   tags3       4 ranks: rank 0 sends to rank 1 three times with tag 7;
 *               rank 1 receives the first two with tag 7, the third with
 *               tag 8 (both tags set: the pair numbers tell the side that
 *               changed), ranks 2 and 3 go on to an all_reduce
 *   anytag      4 ranks, groups {0,1} {2,3} made with
 *               use_local_synchronization: each pair's odd rank sends to
 *               its even rank with tag 3 three times, which receives from
 *               any rank, rank 2 the third time with tag 4; then an
 *               all_reduce of the default group
 *   anynone     4 ranks: rank 0 receives from any rank; nobody sends to
 *               it; the others all_reduce on the default group
 *   xgroup      4 ranks, group A {0,1}: rank 0 sends to rank 1 on A
 *               twice, the third time on the default group; rank 1
 *               receives on A (the two never meet); ranks 2 and 3 go on
 *               to an all_reduce of the default group
 *   exitcrash B 3 ranks: rank 1 calls exit(1) with its group live (the
 *               job's first exit) and takes a second to finish exiting
 *               (B 0), or dies of SIGSEGV inside exit() at once (B 1);
 *               rank 2, told of that exit, calls exit(1) too and dies of
 *               SIGSEGV inside exit() (an atexit handler; 30 ms later with
 *               B 1), as a library thread meeting what OpenSSL's atexit
 *               cleanup freed does; rank 0 waits in a receive
 *   subabsent   4 ranks: ranks 0-2 make a group, rank 2 never enters its
 *               barrier (sleeps), rank 3 goes on to an all_reduce
 *   cbcoll      4 ranks, dp {0,2} {1,3}, tp {0,1} {2,3}: rank 3 all_reduces
 *               on tp in the callback of an async dp all_reduce (a call
 *               that blocks the thread completing dp's operations); rank 2
 *               never calls it. Ranks 1 and 3 end in a dp barrier both
 *               entered, ranks 0 and 2 in an all_reduce of the default group
 *   straggler R N   N all_reduces; rank R sleeps 50 ms before each
 *   balanced N      N all_reduces; every rank sleeps 50 ms before each
 *   late R N        N all_reduces on a group "dp" of every rank; rank R
 *                   sleeps 30-50 ms before each (40 ms on average over
 *                   each 21); the group is destroyed, then a barrier
 *   soak N          N all_reduces of 4 floats as fast as they go
 *   mbarrier R MS T rank R sleeps MS ms, then every rank calls
 *                   dist_monitored_barrier on the default group with its
 *                   own timeout of T ms
 *   big MIB         all_reduces of MIB MiB of floats per rank (checked),
 *                   until some rank's monitor reported a stall in one that
 *                   every member entered (20 at most)
 * A rank whose collective fails prints "rank R: <OP> failed: <status>:
 * <message>" on stderr and exits 1. An observer of the program's own prints
 * every report event it receives (what the tracer stores) on stdout as
 * "EVENT <kind> rank=R group=G status=S" then the message, then "END". */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <dist/dist.h>
#include <dist/internal/launch.h> /* DIST_KEY_FIRST_EXIT */
#include <dist/observer.h>

static int rank, world;
/* this rank's monitor reported a stall in an operation every member entered */
static _Atomic int stall_reported;

static void on_event(void *ctx, const dist_event *ev) {
  (void)ctx;
  if (ev->kind == DIST_EV_STALL_REPORT && ev->message &&
      strstr(ev->message, "every member has entered it"))
    stall_reported = 1;
  char head[160];
  int n = snprintf(head, sizeof head, "EVENT %s rank=%d group=%d status=%d", dist_event_name(ev->kind),
                   ev->rank, ev->group_id, ev->status);
  if (ev->kind == DIST_EV_STRAGGLER)
    n += snprintf(head + n, sizeof head - (size_t)n, " peer=%d seq=%llu", ev->peer,
                  (unsigned long long)ev->seq);
  if (ev->kind == DIST_EV_STATS)
    for (size_t i = 0; i < ev->n_stats && n < (int)sizeof head - 40; i++)
      n += snprintf(head + n, sizeof head - (size_t)n, " straggler=%d",
                    ev->stats[i].straggler_rank);
  printf("%s\n%s\nEND\n", head, ev->message ? ev->message : "");
  fflush(stdout);
}

static const dist_observer printer = {
    .abi_version = DIST_OBSERVER_ABI_VERSION,
    .name = "test-printer",
    .event_mask = DIST_EV_BIT(DIST_EV_STALL_REPORT) | DIST_EV_BIT(DIST_EV_DIAGNOSIS) |
                  DIST_EV_BIT(DIST_EV_STATS) | DIST_EV_BIT(DIST_EV_STRAGGLER),
    .on_event = on_event,
};

static int failed(const char *what, int rc, dist_pg *g) {
  fprintf(stderr, "rank %d: %s failed: %s: %s\n", rank, what, dist_strerror(rc),
          dist_pg_errmsg(g));
  fflush(stderr);
  exit(1);
}

__attribute__((noinline)) static int all_reduce_on(dist_pg *g) {
  float x[4] = {1, 2, 3, 4};
  dist_tensor t = dist_tensor_1d(x, DIST_FLOAT32, 4);
  int rc = dist_all_reduce(&t, DIST_SUM, g, NULL);
  if (rc != DIST_OK)
    failed("ALL_REDUCE", rc, g);
  return rc;
}

/* --- what a lagging rank does instead of its 10th all_reduce --------------- */

__attribute__((noinline)) static void sleep_forever(void) {
  for (;;)
    pause();
}

static int *volatile null_ptr; /* volatile: the compiler cannot drop the store */

__attribute__((noinline)) static void crash_here(void) {
  *null_ptr = 42;
}

__attribute__((noinline)) static void block_in_read(void) {
  int fds[2];
  char c;
  if (pipe(fds) == 0)
    while (read(fds[0], &c, 1) != 0) {
    }
}

__attribute__((noinline)) static void misbehave(const char *mode) {
  if (strcmp(mode, "hang") == 0)
    sleep_forever();
  else if (strcmp(mode, "kill") == 0)
    raise(SIGKILL);
  else if (strcmp(mode, "exit") == 0)
    exit(0);
  else if (strcmp(mode, "stop") == 0)
    raise(SIGSTOP);
  else if (strcmp(mode, "segv") == 0)
    crash_here();
  else if (strcmp(mode, "syscall") == 0)
    block_in_read();
}

__attribute__((noinline)) static int run_loop(const char *mode, int bad) {
  for (int i = 1; i <= 20; i++) {
    if (i == 10 && rank == bad)
      misbehave(mode);
    all_reduce_on(NULL);
  }
  return 0;
}

/* --- deadlocks across groups ------------------------------------------------ */

static dist_pg *group_of(const int *ranks, int n, const char *desc) {
  dist_group_opts o = {0};
  o.desc = desc;
  dist_pg *g = NULL;
  int rc = dist_new_group(ranks, (size_t)n, &o, &g);
  if (rc != DIST_OK)
    failed("new_group", rc, NULL);
  return g;
}

static int run_cross2(void) {
  dist_pg *a = group_of((int[]){0, 1}, 2, "A");
  dist_pg *b = group_of((int[]){0, 1}, 2, "B");
  all_reduce_on(rank == 0 ? a : b);
  all_reduce_on(rank == 0 ? b : a);
  return 0;
}

static int run_cross3(void) {
  dist_pg *g[3];
  char desc[3][8];
  for (int i = 0; i < 3; i++) {
    snprintf(desc[i], sizeof desc[i], "G%d%d", i, (i + 1) % 3);
    g[i] = group_of((int[]){i, (i + 1) % 3}, 2, desc[i]);
  }
  /* rank r is in g[r] (with r+1) and g[r-1] (with r-1): each calls the one
   * with its successor first, so each waits for the next. */
  all_reduce_on(g[rank]);
  all_reduce_on(g[(rank + 2) % 3]);
  return 0;
}

/* --- waits that go through other ranks ------------------------------------- */

static int run_recv2(void) {
  float x[4] = {0};
  dist_tensor t = dist_tensor_1d(x, DIST_FLOAT32, 4);
  if (rank < 2) {
    int rc = dist_recv(&t, 1 - rank, NULL, 0, NULL);
    if (rc != DIST_OK)
      failed("RECV", rc, NULL);
    dist_send(&t, 1 - rank, NULL, 0);
  }
  return all_reduce_on(NULL);
}

static int run_tags2(void) {
  float x[4] = {0};
  dist_tensor t = dist_tensor_1d(x, DIST_FLOAT32, 4);
  if (rank < 2) {
    int rc = rank == 0 ? dist_send(&t, 1, NULL, 7) : dist_recv(&t, 0, NULL, 0, NULL);
    if (rc != DIST_OK)
      failed(rank == 0 ? "SEND" : "RECV", rc, NULL);
  }
  return all_reduce_on(NULL);
}

static int run_tags3(void) {
  float x[4] = {0};
  dist_tensor t = dist_tensor_1d(x, DIST_FLOAT32, 4);
  for (int i = 0; i < 3 && rank < 2; i++) {
    int tag = rank == 1 && i == 2 ? 8 : 7; /* the receiver's tag changes */
    int rc = rank == 0 ? dist_send(&t, 1, NULL, 7) : dist_recv(&t, 0, NULL, tag, NULL);
    if (rc != DIST_OK)
      failed(rank == 0 ? "SEND" : "RECV", rc, NULL);
  }
  return all_reduce_on(NULL);
}

static int run_anytag(void) {
  dist_group_opts o = {.desc = rank < 2 ? "pairA" : "pairB", .use_local_synchronization = true};
  dist_pg *mine = NULL;
  int rc = dist_new_group((int[]){rank & ~1, rank | 1}, 2, &o, &mine);
  if (rc != DIST_OK)
    failed("new_group", rc, NULL);
  float x[4] = {0};
  dist_tensor t = dist_tensor_1d(x, DIST_FLOAT32, 4);
  for (int i = 0; i < 3; i++) {
    int tag = rank == 2 && i == 2 ? 4 : 3; /* the receiver's tag changes */
    rc = rank & 1 ? dist_send(&t, rank - 1, mine, 3)
                  : dist_recv(&t, DIST_ANY_SOURCE, mine, tag, NULL);
    if (rc != DIST_OK)
      failed(rank & 1 ? "SEND" : "RECV", rc, mine);
  }
  return all_reduce_on(NULL);
}

static int run_anynone(void) {
  float x[4] = {0};
  dist_tensor t = dist_tensor_1d(x, DIST_FLOAT32, 4);
  int rc = rank == 0 ? dist_recv(&t, DIST_ANY_SOURCE, NULL, 0, NULL) : DIST_OK;
  if (rc != DIST_OK)
    failed("RECV", rc, NULL);
  return all_reduce_on(NULL);
}

static int run_xgroup(void) {
  dist_pg *a = group_of((int[]){0, 1}, 2, "A");
  float x[4] = {0};
  dist_tensor t = dist_tensor_1d(x, DIST_FLOAT32, 4);
  for (int i = 0; i < 3 && rank < 2; i++) {
    dist_pg *g = rank == 0 && i == 2 ? NULL : a; /* the sender's group changes */
    int rc = rank == 0 ? dist_send(&t, 1, g, 0) : dist_recv(&t, 0, a, 0, NULL);
    if (rc != DIST_OK)
      failed(rank == 0 ? "SEND" : "RECV", rc, g);
  }
  return all_reduce_on(NULL);
}

/* exitcrash: registered before init, so these run after the library's
 * own atexit handlers (the first-exit claim, the monitor's last record). */
static void slow_exit(void) { sleep(1); }
static void crash_in_exit(void) { raise(SIGSEGV); }
static void late_crash_in_exit(void) {
  usleep(30000);
  raise(SIGSEGV);
}

static void exitcrash_setup(bool both) {
  const char *r = getenv("RANK");
  int me = r ? atoi(r) : -1;
  if (me == 1)
    atexit(both ? crash_in_exit : slow_exit);
  else if (me == 2)
    atexit(both ? late_crash_in_exit : crash_in_exit);
}

static int run_exitcrash(void) {
  if (rank == 1)
    exit(1);
  if (rank == 2) {
    const char *key = DIST_KEY_FIRST_EXIT;
    int rc = dist_store_wait(dist_get_default_store(), &key, 1, 30000);
    if (rc != DIST_OK)
      failed("store_wait", rc, NULL);
    exit(1);
  }
  float x = 0;
  dist_tensor t = dist_tensor_1d(&x, DIST_FLOAT32, 1);
  return dist_recv(&t, 1, NULL, 0, NULL);
}

static int run_subabsent(void) {
  dist_pg *g = group_of((int[]){0, 1, 2}, 3, "trio");
  if (rank == 2)
    sleep_forever();
  if (rank < 2) {
    int rc = dist_barrier(g, NULL);
    if (rc != DIST_OK)
      failed("BARRIER", rc, g);
  }
  return all_reduce_on(NULL);
}

/* --- a collective in a work's callback -------------------------------------- */

static dist_pg *cb_tp;

__attribute__((noinline)) static void tp_in_callback(dist_work *w, void *arg) {
  (void)w, (void)arg;
  float x[4] = {0};
  dist_tensor t = dist_tensor_1d(x, DIST_FLOAT32, 4);
  int rc = dist_all_reduce(&t, DIST_SUM, cb_tp, NULL); /* planted: blocks dp's thread */
  if (rc != DIST_OK)
    failed("ALL_REDUCE", rc, cb_tp);
}

/* Rank 3 queues its dp barrier behind the async all_reduce, then sends to
 * rank 1, which joins the all_reduce only once it has received: the
 * callback runs (and blocks dp on rank 3) after the barrier is queued. */
static int run_cbcoll(void) {
  dist_pg *dp[2] = {group_of((int[]){0, 2}, 2, "dp0"), group_of((int[]){1, 3}, 2, "dp1")};
  dist_pg *tp[2] = {group_of((int[]){0, 1}, 2, "tp0"), group_of((int[]){2, 3}, 2, "tp1")};
  cb_tp = tp[rank / 2];
  float x[4] = {0};
  dist_tensor t = dist_tensor_1d(x, DIST_FLOAT32, 4);
  int rc = DIST_OK;
  if (rank == 3) {
    dist_work *ar = NULL, *bar = NULL;
    if ((rc = dist_all_reduce(&t, DIST_SUM, dp[1], &ar)) != DIST_OK ||
        (rc = dist_work_set_callback(ar, tp_in_callback, NULL)) != DIST_OK ||
        (rc = dist_barrier(dp[1], &bar)) != DIST_OK)
      failed("async dp", rc, dp[1]);
    float y[4] = {0}; /* not x: the all_reduce may still be writing it */
    dist_tensor ty = dist_tensor_1d(y, DIST_FLOAT32, 4);
    if ((rc = dist_send(&ty, 1, NULL, 0)) != DIST_OK)
      failed("SEND", rc, NULL);
    if ((rc = dist_work_wait(bar, -1)) != DIST_OK)
      failed("BARRIER", rc, dp[1]);
  } else if (rank == 1) {
    if ((rc = dist_recv(&t, 3, NULL, 0, NULL)) != DIST_OK)
      failed("RECV", rc, NULL);
    all_reduce_on(dp[1]);
    if ((rc = dist_barrier(dp[1], NULL)) != DIST_OK)
      failed("BARRIER", rc, dp[1]);
  }
  return all_reduce_on(NULL);
}

/* --- stragglers ------------------------------------------------------------- */

static int run_paced(int late_rank, int n) {
  for (int i = 0; i < n; i++) {
    if (late_rank < 0 || rank == late_rank)
      usleep(50000);
    all_reduce_on(NULL);
  }
  return 0;
}

/* Lateness 30 + (i % 21) ms: 30-50 ms, 40 ms on average over each 21. */
static int run_late(int late_rank, int n) {
  dist_group_opts o = {.desc = "dp"};
  dist_pg *dp = NULL;
  int rc = dist_new_group(NULL, 0, &o, &dp);
  if (rc != DIST_OK)
    return failed("NEW_GROUP", rc, NULL);
  for (int i = 0; i < n && rc == DIST_OK; i++) {
    if (rank == late_rank)
      usleep((useconds_t)(30000 + (i % 21) * 1000));
    rc = all_reduce_on(dp);
  }
  dist_destroy_process_group(dp);
  return rc;
}

static int run_mbarrier(int late_rank, int ms, int64_t timeout_ms) {
  if (rank == late_rank)
    usleep((useconds_t)ms * 1000);
  int rc = dist_monitored_barrier(NULL, timeout_ms, true);
  if (rc != DIST_OK)
    failed("MONITORED_BARRIER", rc, NULL);
  return rc;
}

/* One all_reduce of n floats, checked. */
static int big_once(float *x, size_t n) {
  for (size_t i = 0; i < n; i++)
    x[i] = (float)(i % 7);
  dist_tensor t = dist_tensor_1d(x, DIST_FLOAT32, (int64_t)n);
  int rc = dist_all_reduce(&t, DIST_SUM, NULL, NULL);
  if (rc != DIST_OK)
    failed("ALL_REDUCE", rc, NULL);
  for (size_t i = 0; i < n; i += 4093)
    if (x[i] != (float)(i % 7) * (float)world) {
      fprintf(stderr, "rank %d: WRONG VALUE at %zu: %g\n", rank, i, (double)x[i]);
      return 3;
    }
  return DIST_OK;
}

/* How long a transfer takes varies with the machine: the ranks repeat it
 * until one of them saw its monitor report the stall (they agree on when
 * to stop through a small all_reduce). */
static int run_big(int mib) {
  size_t n = (size_t)mib * 1048576 / sizeof(float);
  float *x = malloc(n * sizeof *x);
  if (!x)
    return 1;
  int rc = DIST_OK;
  for (int it = 0; it < 20 && rc == DIST_OK; it++) {
    rc = big_once(x, n);
    int32_t seen = stall_reported;
    dist_tensor t = dist_tensor_1d(&seen, DIST_INT32, 1);
    if (rc == DIST_OK && (rc = dist_all_reduce(&t, DIST_MAX, NULL, NULL)) != DIST_OK)
      failed("ALL_REDUCE", rc, NULL);
    if (seen)
      break;
  }
  free(x);
  return rc;
}

static int run_soak(int n) {
  int rc = DIST_OK;
  for (int i = 0; i < n && rc == DIST_OK; i++)
    rc = all_reduce_on(NULL);
  return rc;
}

int main(int argc, char **argv) {
  if (argc < 2 || strcmp(argv[1], "--help") == 0) {
    fprintf(stderr, "usage: %s hang|kill|exit|stop|segv|syscall R | cross2 | cross3 | recv2 | tags2 | tags3 | anytag | anynone | "
            "xgroup | exitcrash B | "
            "subabsent | "
            "cbcoll | "
            "straggler R N | balanced N | late R N | soak N | mbarrier R MS T | big MIB\n",
            argv[0]);
    return 2;
  }
  alarm(120); /* nothing outlives a broken test */
  if (strcmp(argv[1], "exitcrash") == 0)
    exitcrash_setup(argc > 2 && atoi(argv[2]) == 1);
  dist_set_debug_level_from_env();
  dist_observer_register(&printer);
  dist_init_opts o = dist_init_opts_default();
  int rc = dist_init_process_group(&o);
  if (rc != DIST_OK) {
    fprintf(stderr, "init failed: %s\n", dist_last_errmsg());
    return 1;
  }
  rank = dist_get_rank(NULL);
  world = dist_get_world_size(NULL);
  const char *m = argv[1];
  int arg = argc > 2 ? atoi(argv[2]) : 0;
  if (strcmp(m, "cross2") == 0)
    rc = run_cross2();
  else if (strcmp(m, "cross3") == 0)
    rc = run_cross3();
  else if (strcmp(m, "recv2") == 0)
    rc = run_recv2();
  else if (strcmp(m, "tags2") == 0)
    rc = run_tags2();
  else if (strcmp(m, "tags3") == 0)
    rc = run_tags3();
  else if (strcmp(m, "anytag") == 0)
    rc = run_anytag();
  else if (strcmp(m, "anynone") == 0)
    rc = run_anynone();
  else if (strcmp(m, "xgroup") == 0)
    rc = run_xgroup();
  else if (strcmp(m, "exitcrash") == 0)
    rc = run_exitcrash();
  else if (strcmp(m, "subabsent") == 0)
    rc = run_subabsent();
  else if (strcmp(m, "cbcoll") == 0)
    rc = run_cbcoll();
  else if (strcmp(m, "straggler") == 0)
    rc = run_paced(arg, argc > 3 ? atoi(argv[3]) : 40);
  else if (strcmp(m, "late") == 0)
    rc = run_late(arg, argc > 3 ? atoi(argv[3]) : 40);
  else if (strcmp(m, "soak") == 0)
    rc = run_soak(arg);
  else if (strcmp(m, "mbarrier") == 0)
    rc = run_mbarrier(arg, argc > 3 ? atoi(argv[3]) : 0, argc > 4 ? atoll(argv[4]) : 0);
  else if (strcmp(m, "big") == 0)
    rc = run_big(arg);
  else if (strcmp(m, "balanced") == 0)
    rc = run_paced(-1, arg ? arg : 40);
  else
    rc = run_loop(m, arg);
  dist_barrier(NULL, NULL);
  dist_destroy_process_group(NULL);
  printf("rank %d done\n", rank);
  return rc;
}
