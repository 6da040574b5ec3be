/* ctest: labels=multiproc timeout=120 */
/* Crash safety with real ranks: a rank killed with SIGKILL mid-job leaves
 * a valid rank file holding everything committed (the test waits, reading
 * the file read-only, until operation N is there, then kills); ranks that
 * die of SIGSEGV, SIGABRT or SIGFPE dump their ring to a side file that the merge
 * imports (their last operation is in trace.db), a stack overflow too (the
 * handler runs on an alternate stack); a program's own SIGTERM handler
 * still runs after the dump. The dump's records name their call sites
 * (placed by the maps file dumped with it) even where the rank's writer
 * never committed them. */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "mp.h"
#include "trace_util.h"
#include "tmpdir.h"

#define N_OPS 20

static char dir[256];

static void setup_dir(void) {
  snprintf(dir, sizeof dir, "/tmp/dist-tracecrash-XXXXXX");
  cr_assert(dist_test_mkdtemp(dir));
}

static void trace_env(const char *job) {
  setenv("DIST_TRACE", dir, 1);
  setenv("DIST_JOB_ID", job, 1);
}

enum { DO_OPS_LINE = __LINE__ + 6 }; /* the all_reduce's line, below */

static int do_ops(const dist_test_ctx *ctx, dist_pg *g, int n) {
  float v[8] = {0};
  dist_tensor t = dist_tensor_1d(v, DIST_FLOAT32, 8);
  for (int i = 0; i < n; i++)
    CHECK_OK(ctx, dist_all_reduce(&t, DIST_SUM, g, NULL));
  return 0;
}

/* Reads rank 2's file read-only until N operations of group 0 are there;
 * returns its pid (from the ranks table), or -1 at the deadline. */
static pid_t wait_for_ops(const char *path, int n) {
  for (int tries = 0; tries < 3000; tries++) {
    sqlite3 *db;
    if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK) {
      int64_t have = tq_int(db, "SELECT count(*) FROM operations WHERE group_id=0"
                                " AND state='completed'");
      int64_t pid = tq_int(db, "SELECT pid FROM ranks");
      sqlite3_close(db);
      if (have >= n && pid > 0)
        return (pid_t)pid;
    } else {
      sqlite3_close(db);
    }
    nanosleep(&(struct timespec){0, 10000000}, NULL); /* polling a file, 30 s at most */
  }
  return -1;
}

static int sigkill_rank(const dist_test_ctx *ctx) {
  trace_env("killjob");
  CHECK_OK(ctx, dist_tracer_register());
  CHECK_OK(ctx, dist_test_init_pg(ctx, NULL));
  CHECK_OK(ctx, do_ops(ctx, NULL, N_OPS));
  int pair[2] = {0, 1};
  dist_pg *g01;
  CHECK_OK(ctx, dist_new_group(pair, 2, NULL, &g01));
  if (ctx->rank == 2) {
    for (;;)
      pause(); /* rank 0 kills it once its file shows N operations */
  }
  if (ctx->rank == 0) {
    char path[512];
    snprintf(path, sizeof path, "%s/killjob/rank-2.db", dir);
    pid_t pid = wait_for_ops(path, N_OPS);
    CHECK(ctx, pid > 0, "rank 2's file never showed %d operations", N_OPS);
    kill(pid, SIGKILL);
  }
  CHECK_OK(ctx, do_ops(ctx, g01, 5));
  CHECK_OK(ctx, dist_destroy_process_group(NULL));
  return 0;
}

Test(tracer_crash, sigkill_leaves_a_valid_file_and_the_merge_completes, .timeout = 100) {
  setup_dir();
  dist_test_result res;
  dist_test_opts o = {3, sigkill_rank, NULL, 90, -1, 0};
  dist_test_run(&o, &res);
  cr_assert_eq(res.signal[2], SIGKILL, "%s", res.report);
  cr_assert(res.exit_code[0] == 0 && res.exit_code[1] == 0, "%s", res.report);
  char path[512];
  snprintf(path, sizeof path, "%s/killjob/rank-2.db", dir);
  sqlite3 *r2;
  cr_assert_eq(sqlite3_open_v2(path, &r2, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
  cr_assert_str_eq(tq_text(r2, "PRAGMA quick_check"), "ok");
  cr_assert_eq(tq_int(r2, "SELECT count(*) FROM operations WHERE group_id=0 AND seq BETWEEN 1"
                          " AND %d AND state='completed'", N_OPS), N_OPS);
  sqlite3_close(r2);
  dist_trace_merge_report rep;
  sqlite3 *db = tq_merge(dir, "killjob", &rep);
  cr_assert(db);
  cr_assert_eq(rep.ranks_merged, 3, "%s", rep.skipped);
  cr_assert_eq(tq_int(db, "SELECT count(*) FROM operations WHERE rank=2"), N_OPS);
  cr_assert_str_eq(tq_text(db, "SELECT end_state FROM ranks WHERE rank=2"), "lost");
  for (int r = 0; r < 2; r++) {
    cr_assert_str_eq(tq_text(db, "SELECT end_state FROM ranks WHERE rank=%d", r), "finished");
    cr_assert_eq(tq_int(db, "SELECT count(*) FROM operations WHERE rank=%d AND"
                            " state='completed'", r), N_OPS + 5);
  }
  sqlite3_close(db);
}

/* --- fatal signals: the ring goes to a side file ------------------------- */

static void user_term(int sig) {
  (void)sig;
  _exit(42); /* the program's own SIGTERM handler: a checkpoint, then exit */
}

static bool overflow; /* run_fatal(SIGSEGV) by a stack overflow */

#if !defined(__SANITIZE_ADDRESS__)
/* Recursion that overflows the stack (the bound is never reached; it keeps
 * the compiler from calling it infinite). */
static int deeper(int n) {
  volatile char pad[1024];
  pad[0] = (char)n;
  return n > (1 << 30) ? 0 : deeper(n + 1) + pad[0];
}
#endif

static int fatal_rank(const dist_test_ctx *ctx) {
  int sig = *(const int *)ctx->arg;
  char job[32];
  snprintf(job, sizeof job, "sig%djob", sig);
  trace_env(job);
  if (sig == SIGTERM && ctx->rank == 1)
    signal(SIGTERM, user_term);
  CHECK_OK(ctx, dist_tracer_register());
  CHECK_OK(ctx, dist_test_init_pg(ctx, NULL));
  CHECK_OK(ctx, do_ops(ctx, NULL, N_OPS));
  if (ctx->rank == 1) {
#if !defined(__SANITIZE_ADDRESS__) /* UBSan stops a null store before it faults */
    if (sig == SIGSEGV && overflow)
      deeper(0);
    if (sig == SIGSEGV) {
      volatile int *volatile nowhere = NULL;
      *nowhere = 1; /* a real fault, not raise() */
    }
#endif
    raise(sig);
  }
  return 0; /* rank 0 exits without destroying: its peer is gone */
}

static void run_fatal(int sig) {
  setup_dir();
  dist_test_result res;
  dist_test_opts o = {2, fatal_rank, &sig, 50, -1, 0};
  dist_test_run(&o, &res);
  if (sig == SIGTERM)
    cr_assert_eq(res.exit_code[1], 42, "the program's SIGTERM handler did not run: %s",
                 res.report);
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  /* the sanitizer's own SIGSEGV and SIGFPE handlers (ours chain to them)
   * report and exit instead of dying of the signal */
  else if (sig == SIGSEGV || sig == SIGFPE)
    cr_assert(res.signal[1] == sig || res.exit_code[1] > 0, "rank 1 did not fail: %s",
              res.report);
#endif
  else
    cr_assert_eq(res.signal[1], sig, "rank 1 did not die of signal %d: %s", sig, res.report);
  char job[32], jd[512], ring[600], alone[600], cmd[3000];
  snprintf(job, sizeof job, "sig%djob", sig);
  snprintf(jd, sizeof jd, "%s/%s", dir, job);
  snprintf(ring, sizeof ring, "%s/rank-1.ring", jd);
  struct stat st;
  cr_assert_eq(stat(ring, &st), 0, "no ring dump at %s", ring);
  cr_assert_eq(st.st_mode & 0777, 0600);
  /* The dump alone (no rank file) gives rank 1's operations back. */
  snprintf(alone, sizeof alone, "%s/alone", dir);
  snprintf(cmd, sizeof cmd, "mkdir -p %s && cp %s %s/rank-1.maps %s/", alone, ring, jd, alone);
  cr_assert_eq(system(cmd), 0);
  char out[700], err[512];
  snprintf(out, sizeof out, "%s/alone.db", dir);
  dist_trace_merge_report rep;
  cr_assert_eq(dist_trace_merge(alone, out, &rep, err, sizeof err), DIST_OK, "%s", err);
  cr_assert_eq(rep.files_skipped, 0, "%s", rep.skipped);
  sqlite3 *db;
  cr_assert_eq(sqlite3_open_v2(out, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
  cr_assert_eq(tq_int(db, "SELECT count(*) FROM operations WHERE rank=1 AND group_id=0 AND"
                          " state='completed' AND seq BETWEEN 1 AND %d", N_OPS), N_OPS);
  /* every one at its line, though no rank file named a call site */
  cr_assert_eq(tq_int(db, "SELECT count(*) FROM operations o JOIN callsites c ON c.rank = o.rank"
                          " AND c.callsite_id = o.callsite_id WHERE o.rank=1 AND o.group_id=0"
                          " AND o.seq BETWEEN 1 AND %d AND c.file LIKE '%%/test_crash_mp.c' AND"
                          " c.line = %d", N_OPS, DO_OPS_LINE), N_OPS,
               "rank 1's all_reduces are not at test_crash_mp.c:%d: %s", DO_OPS_LINE,
               tq_text(db, "SELECT group_concat(coalesce(module, '?') || ' ' || coalesce(file, '?')"
                           " || ':' || coalesce(line, '?'), '; ') FROM callsites"));
  /* A fatal signal is a crash; SIGTERM ended the rank on request. */
  const char *kind = sig == SIGTERM ? "ended" : "crash";
  cr_assert_eq(tq_int(db, "SELECT status FROM events WHERE kind='%s' AND rank=1", kind), sig);
  /* distview summary's totals count the ring's rows */
  cr_assert_eq(tq_int(db, "SELECT sum(n) FROM op_totals"),
               tq_int(db, "SELECT count(*) FROM operations"));
  sqlite3_close(db);
  /* And the job's merge has the last operation, once, and the crash. */
  db = tq_merge(dir, job, &rep);
  cr_assert(db);
  cr_assert_eq(tq_int(db, "SELECT count(*) FROM operations WHERE rank=1 AND group_id=0 AND"
                          " seq=%d AND state='completed'", N_OPS), 1);
  cr_assert_eq(tq_int(db, "SELECT count(*) FROM operations WHERE rank=1"), N_OPS);
  cr_assert_str_eq(tq_text(db, "SELECT end_state FROM ranks WHERE rank=1"),
                   sig == SIGTERM ? "ended" : "crashed");
  sqlite3_close(db);
}

Test(tracer_crash, sigsegv_flushes_the_ring, .timeout = 60) { run_fatal(SIGSEGV); }
Test(tracer_crash, sigabrt_flushes_the_ring, .timeout = 60) { run_fatal(SIGABRT); }
Test(tracer_crash, sigfpe_flushes_the_ring, .timeout = 60) { run_fatal(SIGFPE); }
Test(tracer_crash, a_stack_overflow_flushes_the_ring, .timeout = 60) {
  overflow = true;
  run_fatal(SIGSEGV);
}
Test(tracer_crash, sigterm_dumps_then_runs_the_programs_handler, .timeout = 60) {
  run_fatal(SIGTERM);
}
