/* ctest: labels=multiproc,san_thread timeout=600 cost=115 */
/* test_monitor_mp.c - the monitor on real processes: build/bin/
 * monitor_testprog (prog_monitor.c) run by distrun and by hand (env://,
 * rank 0 hosting the store). A rank that hangs, dies, exits, stops, crashes
 * or straggles; two and three groups in a cycle. Short group timeouts keep
 * each case to seconds; the assertions are on what a user reads (ranks,
 * operations, sequence numbers, call sites) and on the order of reports,
 * never on how long anything took. */
#include <criterion/criterion.h>

#include <sqlite3.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "proc.h"
#include "tmpdir.h"

#define MAXP 4

static void clean_env(void) {
  dist_test_clean_launch_env();
  setenv("DIST_TRACE", "0", 1);
}

static uint16_t free_port(void) {
  int s = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t len = sizeof a;
  cr_assert(bind(s, (struct sockaddr *)&a, sizeof a) == 0);
  cr_assert(getsockname(s, (struct sockaddr *)&a, &len) == 0);
  close(s);
  return ntohs(a.sin_port);
}

/* n ranks of monitor_testprog by hand (env://); extra: more "NAME=v". */
static void by_hand(dist_proc *ps, int n, const char *const *args, const char *const *extra,
                    unsigned linger, int timeout_ms) {
  static char vars[MAXP][4][64];
  uint16_t port = free_port();
  for (int r = 0; r < n; r++) {
    const char *env[16] = {0};
    int k = 0;
    snprintf(vars[r][0], 64, "MASTER_ADDR=127.0.0.1");
    snprintf(vars[r][1], 64, "MASTER_PORT=%u", (unsigned)port);
    snprintf(vars[r][2], 64, "RANK=%d", r);
    snprintf(vars[r][3], 64, "WORLD_SIZE=%d", n);
    for (int i = 0; i < 4; i++)
      env[k++] = vars[r][i];
    for (int i = 0; extra && extra[i] && k < 15; i++)
      env[k++] = extra[i];
    const char *argv[8] = {dist_test_bin("monitor_testprog")};
    for (int i = 0; args[i] && i < 6; i++)
      argv[i + 1] = args[i];
    dist_proc_start(&ps[r], argv, env);
  }
  dist_proc_finish_all(ps, n, linger, timeout_ms);
}

/* monitor_testprog under distrun -n n; returns distrun's status. */
static int under_distrun(dist_proc *p, int n, const char *const *args, const char *const *extra,
                         int timeout_ms) {
  char nn[8];
  snprintf(nn, sizeof nn, "%d", n);
  const char *argv[16] = {dist_test_bin("distrun"), "-n", nn, "--grace-period", "1",
                          dist_test_bin("monitor_testprog")};
  int k = 6;
  for (int i = 0; args[i] && k < 15; i++)
    argv[k++] = args[i];
  dist_proc_start(p, argv, extra);
  dist_proc_finish_all(p, 1, 0, timeout_ms);
  return p->status;
}

#define OUT(p) DIST_PROC_OUT(p)
#define ERR(p) DIST_PROC_ERR(p)

/* Position of needle in hay, or -1. */
static long at(const char *hay, const char *needle) {
  const char *s = strstr(hay, needle);
  return s ? s - hay : -1;
}

static void dump(const dist_proc *ps, int n) {
  for (int i = 0; i < n; i++)
    cr_log_info("process %d (status %d) stdout:\n%s\nstderr:\n%s", i, ps[i].status,
                ps[i].buf[0], ps[i].buf[1]);
}

/* --- 1. a rank that sleeps before its 10th all_reduce --------------------- */

static const char NAMES_RANK1[] = "rank 1 (host ";
static const char LAST9[] = "has not entered ALL_REDUCE #10: last completed ALL_REDUCE #9, "
                            "called from all_reduce_on (prog_monitor.c:";

/* The rows of trace.db's events of a kind, messages joined. */
static int trace_events(const char *db, const char *kind, char *out, size_t len) {
  sqlite3 *h = NULL;
  sqlite3_stmt *q = NULL;
  int n = 0;
  size_t off = 0;
  out[0] = '\0';
  if (sqlite3_open_v2(db, &h, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK &&
      sqlite3_prepare_v2(h, "SELECT rank, message FROM events WHERE kind = ?1 ORDER BY t_ns", -1,
                         &q, NULL) == SQLITE_OK) {
    sqlite3_bind_text(q, 1, kind, -1, SQLITE_STATIC);
    while (sqlite3_step(q) == SQLITE_ROW && off < len) {
      n++;
      off += (size_t)snprintf(out + off, len - off, "[rank %d] %s\n", sqlite3_column_int(q, 0),
                              (const char *)sqlite3_column_text(q, 1));
    }
  }
  sqlite3_finalize(q);
  sqlite3_close(h);
  return n;
}

Test(monitor_mp, hang_under_distrun_stall_report_then_diagnosis_exit_11, .timeout = 120) {
  clean_env();
  static dist_proc p;
  char dir[] = "/tmp/dist-mon-test-XXXXXX", trace_env[96], db[96];
  cr_assert(dist_test_mkdtemp(dir));
  snprintf(trace_env, sizeof trace_env, "DIST_TRACE=%s/ranks", dir);
  snprintf(db, sizeof db, "%s/trace.db", dir);
  const char *env[] = {"DIST_TIMEOUT=8", trace_env, NULL};
  const char *argv[] = {dist_test_bin("distrun"), "-n", "3", "--grace-period", "1", "--trace-out",
                        db, dist_test_bin("monitor_testprog"), "hang", "1", NULL};
  dist_proc_start(&p, argv, env);
  dist_proc_finish_all(&p, 1, 0, 90000);
  int st = p.status;
  const char *e = ERR(&p);
  long stall = at(e, "MON WARN stall in group 0 (default) at ALL_REDUCE #10");
  long hang = at(e, "hang in group 0 (default) at ALL_REDUCE #10");
  if (st != 11 || stall < 0 || hang < 0)
    dump(&p, 1);
  cr_assert_eq(st, 11, "distrun exit %d", st);
  cr_assert(stall >= 0 && hang > stall, "the stall report comes before the diagnosis");
  cr_assert(at(e + stall, NAMES_RANK1) >= 0 && at(e + stall, LAST9) >= 0);
  /* Every other rank fails with the diagnosis as its message. */
  cr_assert(at(e, "[0] rank 0: ALL_REDUCE failed: timed out: hang in group 0") >= 0);
  cr_assert(at(e, "[2] rank 2: ALL_REDUCE failed: timed out: hang in group 0") >= 0);
  cr_assert(at(e, "ranks 0,2 are blocked in ALL_REDUCE #10, called from all_reduce_on") >= 0);
  cr_assert(at(e, "deadlock") < 0, "a sleeping rank is not a cycle");
  /* The report events reach observers (the tracer's table): a stall
   * report, then the diagnosis. */
  long ev_stall = at(OUT(&p), "EVENT stall_report rank=0 group=0");
  long ev_diag = at(OUT(&p), "EVENT diagnosis rank=");
  cr_assert(ev_stall >= 0 && ev_diag > ev_stall);
  /* distrun prints the diagnosis last. */
  const char *last = strstr(e, "distrun: exit status 11");
  cr_assert(last && strstr(last, LAST9), "the diagnosis closes distrun's output:\n%s", e);
  /* trace.db holds the stall reports and the diagnoses. */
  static char rows[1 << 16];
  cr_assert(trace_events(db, "stall_report", rows, sizeof rows) >= 1 && strstr(rows, LAST9),
            "stall reports in %s:\n%s", db, rows);
  cr_assert(trace_events(db, "diagnosis", rows, sizeof rows) >= 1 &&
            strstr(rows, "hang in group 0 (default) at ALL_REDUCE #10") && strstr(rows, LAST9),
            "diagnoses in %s:\n%s", db, rows);
  char cmd[160];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  cr_assert_eq(system(cmd), 0);
}

Test(monitor_mp, hang_by_hand_the_others_fail_naming_the_rank, .timeout = 60) {
  clean_env();
  static dist_proc ps[3];
  /* The stall threshold well past the 1 s progress period: "only the lowest
   * waiting rank reports" needs each rank to have seen the others' records
   * from after they entered the operation (at a 1 s threshold, rank 2 could
   * still read rank 0's record from just before it entered, and report). */
  const char *env[] = {"DIST_TIMEOUT=8", "DIST_STALL_S=3", NULL};
  by_hand(ps, 3, (const char *[]){"hang", "1", NULL}, env, 1u << 1, 40000);
  for (int r = 0; r < 3; r += 2) {
    const char *e = ps[r].buf[1];
    char head[80];
    snprintf(head, sizeof head, "rank %d: ALL_REDUCE failed: timed out: hang in group 0", r);
    if (ps[r].status != 1 || at(e, head) < 0 || at(e, LAST9) < 0)
      dump(ps, 3);
    cr_assert_eq(ps[r].status, 1);
    cr_assert(at(e, head) >= 0 && at(e, NAMES_RANK1) >= 0 && at(e, LAST9) >= 0);
  }
  long stall = at(ps[0].buf[1], "MON WARN stall in group 0");
  cr_assert(stall >= 0 && stall < at(ps[0].buf[1], "ALL_REDUCE failed"),
            "rank 0, the lowest waiting rank, reports the stall before the timeout");
  cr_assert(at(ps[2].buf[1], "MON WARN stall") < 0, "only the lowest waiting rank reports");
}

/* --- 2. cycles across groups ----------------------------------------------- */

Test(monitor_mp, two_groups_crossed_are_a_cycle_before_the_timeout, .timeout = 60) {
  clean_env();
  static dist_proc ps[2];
  /* the stall reports before the timeout: the early end would cut them */
  const char *env[] = {"DIST_TIMEOUT=4", "DIST_EARLY_VERDICT=0", NULL};
  by_hand(ps, 2, (const char *[]){"cross2", NULL}, env, 0, 40000);
  const char *e = ps[0].buf[1];
  long stall = at(e, "MON WARN stall in group 1 (A) at ALL_REDUCE #1");
  long cyc = at(e, "deadlock: a wait-for cycle of 2 ranks across groups:\n"
                   "    rank 0 waits in group 1 (A) ALL_REDUCE #1 (called from all_reduce_on "
                   "(prog_monitor.c:");
  long edge2 = at(e, "    rank 1 waits in group 2 (B) ALL_REDUCE #1 (called from all_reduce_on "
                     "(prog_monitor.c:");
  long failed = at(e, "ALL_REDUCE failed");
  if (stall < 0 || cyc < 0 || edge2 < 0)
    dump(ps, 2);
  cr_assert(stall >= 0 && cyc > stall && edge2 > cyc && failed > edge2,
            "the cycle is reported, edge by edge, in a stall report before the timeout");
  cr_assert(at(e + edge2, "for rank 0\n") >= 0);
}

Test(monitor_mp, three_groups_in_a_ring_are_a_cycle_of_three, .timeout = 60) {
  clean_env();
  static dist_proc ps[3];
  /* the stall reports before the timeout: the early end would cut them */
  const char *env[] = {"DIST_TIMEOUT=4", "DIST_EARLY_VERDICT=0", NULL};
  by_hand(ps, 3, (const char *[]){"cross3", NULL}, env, 0, 40000);
  const char *e = ps[0].buf[1];
  long cyc = at(e, "deadlock: a wait-for cycle of 3 ranks across groups:");
  if (cyc < 0)
    dump(ps, 3);
  cr_assert(cyc >= 0 && cyc < at(e, "ALL_REDUCE failed"));
  const char *edges[] = {"rank 0 waits in group 1 (G01) ALL_REDUCE #1", "for rank 1\n",
                         "rank 1 waits in group 2 (G12) ALL_REDUCE #1", "for rank 2\n",
                         "rank 2 waits in group 3 (G20) ALL_REDUCE #1", "for rank 0\n"};
  long pos = cyc;
  for (size_t i = 0; i < 6; i++) {
    long k = at(e + pos, edges[i]);
    cr_assert(k >= 0, "edge text '%s' after the cycle's head:\n%s", edges[i], e + cyc);
    pos += k;
  }
}

/* Ranks 0 and 1 each receive first: their RECV #1 is a cycle of two; ranks
 * 2 and 3, in ALL_REDUCE #1, are not "with" ranks whose #1 is a receive. */
Test(monitor_mp, two_receives_first_are_a_point_to_point_cycle, .timeout = 60) {
  clean_env();
  static dist_proc ps[4];
  /* the stall reports before the timeout: the early end would cut them */
  const char *env[] = {"DIST_TIMEOUT=4", "DIST_EARLY_VERDICT=0", NULL};
  by_hand(ps, 4, (const char *[]){"recv2", NULL}, env, 0, 40000);
  const char *e0 = ps[0].buf[1], *e2 = ps[2].buf[1];
  long p2p = at(e0, "MON WARN stall in group 0 (default) at RECV #1:");
  long mine = at(e0, "  rank 0 is blocked in RECV #1 from rank 1, called from ");
  long peer = at(e0, ") is blocked in RECV #1 from rank 0 too, called from ");
  long cyc = at(e0, "deadlock: a wait-for cycle of 2 ranks:\n"
                    "    rank 0 waits in group 0 (default) RECV #1 from rank 1 (called from ");
  if (p2p < 0 || mine < p2p || peer < mine || cyc < peer)
    dump(ps, 4);
  cr_assert(p2p >= 0 && mine > p2p && peer > mine && cyc > peer,
            "rank 0 reports the receive, its peer's and the cycle, in that order");
  long coll = at(e2, "MON WARN stall in group 0 (default) at ALL_REDUCE #1:");
  long instead = at(e2, "has not entered ALL_REDUCE #1: its last record shows no completed "
                        "operation in this group; it is blocked in RECV #1 from rank 1 of this "
                        "group instead");
  cr_assert(coll >= 0 && instead > coll, "rank 2 sees rank 0 in a receive, not in its "
            "all_reduce:\n%s", e2);
  cr_assert(at(e2, "every member has entered it") < 0, "%s", e2);
}

/* A proven deadlock does not wait for the timeout (DIST_EARLY_VERDICT, on
 * by default): with a 600 s timeout the job still ends with the hang's
 * verdict, the cycle named edge by edge, long before it (the test's own
 * bound is the only clock). */
Test(monitor_mp, a_receive_cycle_ends_the_job_with_its_verdict_long_before_the_timeout,
     .timeout = 120) {
  clean_env();
  static dist_proc p;
  const char *env[] = {"DIST_TIMEOUT=600", NULL};
  int st = under_distrun(&p, 4, (const char *[]){"recv2", NULL}, env, 100000);
  const char *e = ERR(&p);
  long verdict = at(e, "distrun: exit status 11 (hang)");
  if (st != 11 || verdict < 0)
    dump(&p, 1);
  cr_assert_eq(st, 11);
  cr_assert(at(e + verdict, "hang in group 0 (default) at RECV #1: waited ") >= 0, "%s", e);
  cr_assert(at(e + verdict, "deadlock: a wait-for cycle of 2 ranks:\n"
                            "    rank 0 waits in group 0 (default) RECV #1 from rank 1") >= 0,
            "%s", e + verdict);
  cr_assert(at(e + verdict, "of its 600.0 s timeout") >= 0);
}

/* A send and the receive meant for it whose tags differ never match, and
 * neither rank can call anything else: as final as a cycle. */
Test(monitor_mp, a_send_and_receive_whose_tags_differ_end_the_job_long_before_the_timeout,
     .timeout = 120) {
  clean_env();
  static dist_proc p;
  const char *env[] = {"DIST_TIMEOUT=600", NULL};
  int st = under_distrun(&p, 4, (const char *[]){"tags2", NULL}, env, 100000);
  const char *e = ERR(&p);
  long verdict = at(e, "distrun: exit status 11 (hang)");
  if (st != 11 || verdict < 0)
    dump(&p, 1);
  cr_assert_eq(st, 11);
  cr_assert(at(e + verdict, "of its 600.0 s timeout") >= 0, "%s", e + verdict);
  cr_assert(at(e + verdict, "the two never matched (their tags differ)") >= 0 ||
                at(e + verdict, "their tags differ") >= 0,
            "%s", e + verdict);
  cr_assert(at(e + verdict, "SEND #1 to rank 1 with tag 7") >= 0, "%s", e + verdict);
}

Test(monitor_mp, groups_crossed_end_the_job_with_their_cycle_long_before_the_timeout,
     .timeout = 120) {
  clean_env();
  static dist_proc p;
  const char *env[] = {"DIST_TIMEOUT=600", NULL};
  int st = under_distrun(&p, 2, (const char *[]){"cross2", NULL}, env, 100000);
  const char *e = ERR(&p);
  long verdict = at(e, "distrun: exit status 11 (hang)");
  if (st != 11 || verdict < 0)
    dump(&p, 1);
  cr_assert_eq(st, 11);
  cr_assert(at(e + verdict, "deadlock: a wait-for cycle of 2 ranks across groups:") >= 0,
            "%s", e + verdict);
}

/* A rank computing outside the library is never part of a proof: with
 * the early end on, its waiters still get the whole (short) timeout and
 * the verdict names it as busy, not a cycle. */
Test(monitor_mp, a_busy_rank_still_gets_the_whole_timeout, .timeout = 60) {
  clean_env();
  static dist_proc p;
  const char *env[] = {"DIST_TIMEOUT=4", NULL};
  int st = under_distrun(&p, 3, (const char *[]){"hang", "1", NULL}, env, 40000);
  const char *e = ERR(&p);
  if (st != 11)
    dump(&p, 1);
  cr_assert_eq(st, 11);
  cr_assert(at(e, "waited 3.") >= 0 || at(e, "waited 4.") >= 0,
            "the hang is reported at the timeout:\n%s", e);
  cr_assert(at(e, "deadlock") < 0, "a sleeping rank is not a cycle");
}

/* Rank 2 never enters the barrier of {0,1,2}; rank 3, alone in the default
 * group's all_reduce, is told where the waits end. */
Test(monitor_mp, a_wait_through_a_sub_group_names_the_rank_it_ends_at, .timeout = 60) {
  clean_env();
  static dist_proc ps[4];
  const char *env[] = {"DIST_TIMEOUT=4", NULL};
  by_hand(ps, 4, (const char *[]){"subabsent", NULL}, env, 1u << 2, 40000);
  const char *e3 = ps[3].buf[1];
  long stall = at(e3, "MON WARN stall in group 0 (default) at ALL_REDUCE #1:");
  long end = at(e3, "  the waits end at rank 2, which is in no operation (busy outside the "
                    "library for ");
  long who = at(e3, "): ranks 0-1 wait for it in group 1 (trio) BARRIER #1; rank 3 waits for "
                    "it in group 0 (default) ALL_REDUCE #1\n");
  if (stall < 0 || end < stall || who < end)
    dump(ps, 4);
  cr_assert(stall >= 0 && end > stall && who > end, "rank 3's stall report ends at rank 2");
}

/* --- 3. dead, exited, stopped and crashed ranks ---------------------------- */

Test(monitor_mp, sigkill_under_distrun_exit_12_survivors_say_died, .timeout = 60) {
  clean_env();
  static dist_proc p;
  const char *env[] = {"DIST_TIMEOUT=8", NULL};
  int st = under_distrun(&p, 3, (const char *[]){"kill", "1", NULL}, env, 40000);
  const char *e = ERR(&p);
  if (st != 12 || at(e, "died: killed by signal 9 (SIGKILL)") < 0)
    dump(&p, 1);
  cr_assert_eq(st, 12);
  cr_assert(at(e, "lost peer in group 0 (default) at ALL_REDUCE #10") >= 0);
  cr_assert(at(e, "rank 1 (host ") >= 0 && at(e, "died: killed by signal 9 (SIGKILL)") >= 0);
  cr_assert(at(e, "timed out") < 0, "never a bare timeout");
}

/* Rank 1 calls exit(1) first and takes a second to finish (or dies of
 * SIGSEGV inside exit() at once); rank 2 exits after it and dies of
 * SIGSEGV inside exit() (prog_monitor's exitcrash: as a library thread
 * that meets what OpenSSL's atexit cleanup freed), reaped first (or within
 * the moment distrun gives a signal death to show up). Its signal struck a
 * rank that was already leaving: rank 1, which left first, is named, not
 * rank 2 as a crash. */
Test(monitor_mp, a_signal_inside_exit_is_not_the_first_failure, .timeout = 120) {
  for (int i = 0; i < 2 * DIST_TEST_REPEAT(2); i++) {
    clean_env();
    static dist_proc p;
    const char *env[] = {"DIST_TIMEOUT=8", NULL};
    const char *both = i % 2 ? "1" : "0";
    int st = under_distrun(&p, 3, (const char *[]){"exitcrash", both, NULL}, env, 60000);
    const char *e = ERR(&p);
    if (st != 12 || at(e, "exit status 12 (a rank died): rank 1 (pid ") < 0)
      dump(&p, 1);
    cr_assert_eq(st, 12);
    cr_assert(at(e, "exit status 12 (a rank died): rank 1 (pid ") >= 0, "run %d:\n%s", i + 1, e);
  }
}

Test(monitor_mp, sigkill_by_hand_survivor_says_dead, .timeout = 60) {
  clean_env();
  static dist_proc ps[3];
  const char *env[] = {"DIST_TIMEOUT=8", NULL};
  by_hand(ps, 3, (const char *[]){"kill", "1", NULL}, env, 0, 40000);
  /* rank 0 hosts the store; its own monitor can always read it. */
  const char *e = ps[0].buf[1];
  if (at(e, "rank 1 (host ") < 0 || at(e, "is dead: its process is gone") < 0)
    dump(ps, 3);
  cr_assert_eq(ps[1].status, 128 + SIGKILL);
  cr_assert(at(e, "lost peer in group 0 (default) at ALL_REDUCE #10") >= 0);
  cr_assert(at(e, "rank 1 (host ") >= 0 && at(e, "is dead: its process is gone") >= 0);
}

Test(monitor_mp, early_exit_under_distrun_exit_12_and_by_hand, .timeout = 90) {
  clean_env();
  static dist_proc p;
  const char *env[] = {"DIST_TIMEOUT=8", NULL};
  int st = under_distrun(&p, 3, (const char *[]){"exit", "1", NULL}, env, 40000);
  if (st != 12 || at(ERR(&p), "rank 1 (host ") < 0 || at(ERR(&p), "exited with code 0") < 0)
    dump(&p, 1);
  cr_assert_eq(st, 12);
  cr_assert(at(ERR(&p), "lost peer in group 0") >= 0 && at(ERR(&p), "exited with code 0") >= 0);
  static dist_proc ps[3];
  by_hand(ps, 3, (const char *[]){"exit", "1", NULL}, env, 0, 40000);
  const char *e = ps[0].buf[1];
  if (at(e, "exited (called exit() with its process group live)") < 0)
    dump(ps, 3);
  cr_assert_eq(ps[1].status, 0);
  cr_assert(at(e, "rank 1 (host ") >= 0 &&
            at(e, "exited (called exit() with its process group live)") >= 0);
}

Test(monitor_mp, sigstop_is_not_responding_under_distrun_and_by_hand, .timeout = 90) {
  clean_env();
  static dist_proc p;
  const char *env[] = {"DIST_TIMEOUT=4", NULL};
  int st = under_distrun(&p, 3, (const char *[]){"stop", "1", NULL}, env, 40000);
  const char *not_resp = "is not responding: its process is stopped";
  if (st != 11 || at(ERR(&p), not_resp) < 0)
    dump(&p, 1);
  cr_assert_eq(st, 11);
  cr_assert(at(ERR(&p), "rank 1 (host ") >= 0 && at(ERR(&p), not_resp) >= 0);
  static dist_proc ps[3];
  by_hand(ps, 3, (const char *[]){"stop", "1", NULL}, env, 1u << 1, 40000);
  if (at(ps[0].buf[1], not_resp) < 0 || at(ps[2].buf[1], not_resp) < 0)
    dump(ps, 3);
  for (int r = 0; r < 3; r += 2)
    cr_assert(at(ps[r].buf[1], "rank 1 (host ") >= 0 && at(ps[r].buf[1], not_resp) >= 0 &&
              at(ps[r].buf[1], "ALL_REDUCE failed: timed out: hang in group 0") >= 0);
}

Test(monitor_mp, sigsegv_backtrace_in_distruns_summary_and_the_trace, .timeout = 60) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  cr_skip_test("the sanitizer catches SIGSEGV itself (its report is the backtrace)");
#endif
  clean_env();
  static dist_proc p;
  char dir[] = "/tmp/dist-mon-test-XXXXXX", trace_env[96], db[96];
  cr_assert(dist_test_mkdtemp(dir));
  snprintf(trace_env, sizeof trace_env, "DIST_TRACE=%s/ranks", dir);
  snprintf(db, sizeof db, "%s/trace.db", dir);
  const char *env[] = {"DIST_TIMEOUT=8", trace_env, NULL};
  const char *argv[] = {dist_test_bin("distrun"), "-n", "3", "--grace-period", "1", "--trace-out",
                        db, dist_test_bin("monitor_testprog"), "segv", "1", NULL};
  dist_proc_start(&p, argv, env);
  dist_proc_finish_all(&p, 1, 0, 40000);
  const char *e = ERR(&p);
  /* The verdict, last: the crashed rank named, its backtrace as the report. */
  long summary = at(e, "distrun: exit status 12 (a rank died): rank 1 (pid ");
  if (p.status != 12 || summary < 0)
    dump(&p, 1);
  cr_assert_eq(p.status, 12);
  cr_assert(summary >= 0 && at(e + summary, "failed first: killed by signal 11 (SIGSEGV)") >= 0 &&
            at(e + summary, "; the report follows\nlibdist: rank 1 (pid ") >= 0 &&
            at(e + summary, "caught SIGSEGV") >= 0);
  long f1 = at(e + summary, "crash_here (prog_monitor.c:");
  long f2 = at(e + summary, "run_loop (prog_monitor.c:");
  cr_assert(f1 >= 0 && f2 > f1, "the frames, innermost first, with the program's names");
  /* The survivors' diagnosis carries it too, and so does the trace. */
  cr_assert(at(e, "died: killed by signal 11 (SIGSEGV)") >= 0);
  static char rows[1 << 16];
  cr_assert(trace_events(db, "diagnosis", rows, sizeof rows) >= 1 &&
            strstr(rows, "rank 1 (host ") && strstr(rows, "crash_here (prog_monitor.c:"),
            "diagnoses in %s:\n%s", db, rows);
  char cmd[160];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  cr_assert_eq(system(cmd), 0);
}

/* --- 4. stragglers ----------------------------------------------------------- */

Test(monitor_mp, a_rank_late_to_every_op_is_the_straggler_a_balanced_run_has_none,
     .timeout = 90) {
  clean_env();
  static dist_proc ps[3];
  const char *env[] = {"DIST_DEBUG=DETAIL", "DIST_STATS_EVERY=20", "DIST_TIMEOUT=30", NULL};
  by_hand(ps, 3, (const char *[]){"straggler", "1", "30", NULL}, env, 0, 60000);
  const char *e = ps[0].buf[1];
  if (at(e, "straggler in group 0 (default, 3 ranks): rank 1 arrived last in") < 0)
    dump(ps, 3);
  for (int r = 0; r < 3; r++)
    cr_assert_eq(ps[r].status, 0);
  cr_assert(at(e, "straggler in group 0 (default, 3 ranks): rank 1 arrived last in") >= 0);
  cr_assert(at(ps[0].buf[0], "EVENT stats rank=0 group=0 status=0 straggler=1") >= 0,
            "the stats event (the trace's stats table) names it:\n%s", ps[0].buf[0]);
  /* Under distrun, the statistics land in trace.db. */
  static dist_proc p;
  char dir[] = "/tmp/dist-mon-test-XXXXXX", trace_env[96], db[96];
  cr_assert(dist_test_mkdtemp(dir));
  snprintf(trace_env, sizeof trace_env, "DIST_TRACE=%s/ranks", dir);
  snprintf(db, sizeof db, "%s/trace.db", dir);
  const char *denv[] = {"DIST_DEBUG=DETAIL", "DIST_STATS_EVERY=20", trace_env, NULL};
  const char *argv[] = {dist_test_bin("distrun"),          "-n",        "3", "--trace-out", db,
                        dist_test_bin("monitor_testprog"), "straggler", "1", "30",          NULL};
  dist_proc_start(&p, argv, denv);
  dist_proc_finish_all(&p, 1, 0, 60000);
  cr_assert_eq(p.status, 0, "%s", ERR(&p));
  static char rows[1 << 16];
  cr_assert(trace_events(db, "stats", rows, sizeof rows) >= 3 &&
            strstr(rows, "[rank 0] stats of group 0 (default), operations #1-#20") &&
            strstr(rows, "last to arrive most often: rank 1 ("), "stats in %s:\n%s", db, rows);
  char cmd[160];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  cr_assert_eq(system(cmd), 0);
  static dist_proc bs[3];
  by_hand(bs, 3, (const char *[]){"balanced", "30", NULL}, env, 0, 60000);
  for (int r = 0; r < 3; r++) {
    cr_assert_eq(bs[r].status, 0);
    cr_assert(at(bs[r].buf[1], "straggler in") < 0, "%s", bs[r].buf[1]);
  }
  if (at(bs[0].buf[0], "EVENT stats rank=0 group=0 status=0 straggler=-1") < 0)
    dump(bs, 3);
  cr_assert(at(bs[0].buf[0], "EVENT stats rank=0 group=0 status=0 straggler=-1") >= 0);
}

/* One value of trace.db (an integer; -1 when the query gives no row). */
static long long trace_int(const char *db, const char *sql) {
  sqlite3 *h = NULL;
  sqlite3_stmt *q = NULL;
  long long v = -1;
  if (sqlite3_open_v2(db, &h, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK &&
      sqlite3_prepare_v2(h, sql, -1, &q, NULL) == SQLITE_OK && sqlite3_step(q) == SQLITE_ROW)
    v = sqlite3_column_int64(q, 0);
  sqlite3_finalize(q);
  sqlite3_close(h);
  return v;
}

/* Rank 2 is 30-50 ms late (39.5 ms on average over 40) at each of 40
 * all_reduces on a group "dp" of 3 ranks; the verdict comes when the group
 * is destroyed, long before DIST_STATS_EVERY (1000) operations. */
/* 18 collectives, statistics every 20: the block is only complete when the
 * group ends (destroyed), after its handle is gone. Every rank's block
 * still reaches the observers (the trace's stats table), rank 0's naming
 * the straggler, as it does when a later operation closes the block (on a
 * loaded machine the watchdog may not get there before the end either). */
Test(monitor_mp, the_statistics_a_groups_end_completes_reach_the_observers, .timeout = 90) {
  clean_env();
  static dist_proc ps[3];
  const char *env[] = {"DIST_DEBUG=DETAIL", "DIST_STATS_EVERY=20", "DIST_TIMEOUT=30", NULL};
  by_hand(ps, 3, (const char *[]){"straggler", "1", "18", NULL}, env, 0, 60000);
  for (int r = 0; r < 3; r++)
    cr_assert_eq(ps[r].status, 0);
  if (at(ps[0].buf[0], "EVENT stats rank=0 group=0 status=0 straggler=1") < 0)
    dump(ps, 3);
  cr_assert(at(ps[0].buf[0], "EVENT stats rank=0 group=0 status=0 straggler=1") >= 0,
            "rank 0's block, with the straggler, as an event");
  cr_assert(at(ps[1].buf[0], "EVENT stats rank=1 group=0 status=0 straggler=-1") >= 0 &&
                at(ps[2].buf[0], "EVENT stats rank=2 group=0 status=0 straggler=-1") >= 0,
            "the other ranks' own blocks as events");
}

Test(monitor_mp, a_rank_30_to_50_ms_late_is_named_with_its_mean_lateness, .timeout = 90) {
  clean_env();
  static dist_proc p;
  char dir[] = "/tmp/dist-mon-test-XXXXXX", trace_env[96], db[96];
  cr_assert(dist_test_mkdtemp(dir));
  snprintf(trace_env, sizeof trace_env, "DIST_TRACE=%s/ranks", dir);
  snprintf(db, sizeof db, "%s/trace.db", dir);
  const char *env[] = {"DIST_DEBUG=DETAIL", trace_env, NULL};
  const char *argv[] = {dist_test_bin("distrun"),          "-n",   "3", "--trace-out", db,
                        dist_test_bin("monitor_testprog"), "late", "2", "40",          NULL};
  dist_proc_start(&p, argv, env);
  dist_proc_finish_all(&p, 1, 0, 60000);
  cr_assert_eq(p.status, 0, "%s", ERR(&p));
  const char *w = strstr(ERR(&p), "MON WARN straggler in group 1 (dp, 3 ranks): rank 2 arrived "
                                  "last in ");
  cr_assert(w, "%s", ERR(&p));
  int last = 0, of = 0;
  double ms = 0;
  cr_assert_eq(sscanf(strstr(w, "last in ") + 8, "%d of %d collectives, on average %lf ms", &last,
                      &of, &ms), 3, "%s", w);
  cr_log_info("named: rank 2 last in %d of %d, %.1f ms (planted: 40 of 40, 39.5 ms)", last, of, ms);
  cr_assert(of == 40 && last >= 36, "%s", w);
  cr_assert(ms >= 35.5 && ms <= 45.5, "planted 39.5 ms on average: %s", w);
  cr_assert_eq(dist_test_count(ERR(&p), "straggler in"), 1, "named once:\n%s", ERR(&p));
  /* The events row, and distview summary shows it. */
  cr_assert_eq(trace_int(db, "SELECT count(*) FROM events WHERE kind = 'straggler' AND rank = 0"
                             " AND group_id = 1 AND peer = 2 AND seq = 40"), 1);
  cr_assert_eq(trace_int(db, "SELECT count(*) FROM events WHERE kind = 'straggler'"), 1);
  static dist_proc v;
  cr_assert_eq(dist_proc_runl(&v, NULL, 30000, dist_test_bin("distview"), "summary", db, NULL), 0,
               "%s", v.buf[1]);
  cr_assert(strstr(v.buf[0], "\nstragglers:\n  straggler in group 1 (dp, 3 ranks): rank 2 "
                             "arrived last in "), "%s", v.buf[0]);
  char cmd[160];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  cr_assert_eq(system(cmd), 0);
}

/* 200,000 all_reduces of 4 floats at DETAIL on 2 ranks (about 3 s here):
 * every statistics block compares the ranks by sequence number, and
 * nobody is named, neither in a block nor at the end. Under a sanitizer
 * (ten times slower) a tenth of it. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SOAK_OPS 20000
#else
#define SOAK_OPS 200000
#endif
Test(monitor_mp, a_balanced_job_of_200000_all_reduces_names_nobody, .timeout = 180) {
  clean_env();
  static dist_proc p;
  char dir[] = "/tmp/dist-mon-test-XXXXXX", trace_env[96], db[96];
  cr_assert(dist_test_mkdtemp(dir));
  snprintf(trace_env, sizeof trace_env, "DIST_TRACE=%s/ranks", dir);
  snprintf(db, sizeof db, "%s/trace.db", dir);
  const char *env[] = {"DIST_DEBUG=DETAIL", trace_env, NULL};
  char ops[16];
  snprintf(ops, sizeof ops, "%d", SOAK_OPS);
  const char *argv[] = {dist_test_bin("distrun"),          "-n",   "2", "--trace-out", db,
                        dist_test_bin("monitor_testprog"), "soak", ops, NULL};
  int64_t t0 = dist_test_now_ms();
  dist_proc_start(&p, argv, env);
  dist_proc_finish_all(&p, 1, 0, 150000);
  int64_t took = dist_test_now_ms() - t0;
  cr_assert_eq(p.status, 0, "%s", ERR(&p));
  int warnings = dist_test_count(ERR(&p), "straggler");
  long long blocks = trace_int(db, "SELECT count(*) FROM events WHERE kind = 'stats' AND rank = 0");
  long long counted = trace_int(db, "SELECT sum(count) FROM stats WHERE rank = 0");
  cr_log_info("%d all_reduces at DETAIL on 2 ranks: %lld ms, %d straggler warnings, %lld "
              "blocks of rank 0 in the trace (%lld operations)", SOAK_OPS, (long long)took,
              warnings, blocks, counted);
  cr_assert_eq(warnings, 0, "%s", ERR(&p));
  cr_assert(!strstr(OUT(&p), "EVENT straggler"), "%s", OUT(&p));
  cr_assert_eq(trace_int(db, "SELECT count(*) FROM events WHERE kind = 'straggler'"), 0);
  cr_assert_eq(trace_int(db, "SELECT count(*) FROM stats WHERE straggler_rank >= 0"), 0);
  /* Blocks were compared: not all of them, since at a few hundred thousand
   * operations a second the watchdog falls behind and skips (counted, so
   * nothing shifts); how many varies with the machine's load (a fresh
   * clone's README stage once counted 4,574 of 200,000 in 5 blocks). */
  cr_assert(blocks >= 2 && counted >= SOAK_OPS / 100, "%lld blocks, %lld operations", blocks,
            counted);
  cr_assert(trace_int(db, "SELECT count(*) FROM events WHERE kind = 'stats' AND rank = 0 AND "
                          "message LIKE '%last to arrive most often: rank%'") >= 2);
  char cmd[160];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  cr_assert_eq(system(cmd), 0);
}

/* --- 5. stacks --------------------------------------------------------------- */

Test(monitor_mp, stacks_of_a_rank_asleep_and_of_one_in_a_system_call, .timeout = 90) {
#if defined(__SANITIZE_THREAD__)
  cr_skip_test("ThreadSanitizer holds signals to a thread blocked in a system call");
#endif
  clean_env();
  /* The stack is asked for at the first stall report (a quarter of the
   * timeout) and must be back before the timeout's diagnosis: 8 s leaves
   * the lagging rank's watchdog 6 s to answer on a loaded machine (4 s
   * once missed it under ASan with the suite running two at a time). */
  const char *env[] = {"DIST_TIMEOUT=8", "DIST_SHOW_STACKTRACES=1", NULL};
  const char *modes[2][2] = {{"hang", "sleep_forever (prog_monitor.c:"},
                             {"syscall", "block_in_read (prog_monitor.c:"}};
  for (int m = 0; m < 2; m++) {
    static dist_proc ps[2];
    by_hand(ps, 2, (const char *[]){modes[m][0], "1", NULL}, env, 1u << 1, 40000);
    const char *e = ps[0].buf[1];
    long diag = at(e, "ALL_REDUCE failed: timed out: hang in group 0");
    long stack = diag < 0 ? -1 : at(e + diag, "its stack:");
    if (stack < 0 || at(e + diag + stack, modes[m][1]) < 0)
      dump(ps, 2);
    cr_assert(stack >= 0 && at(e + diag + stack, modes[m][1]) >= 0 &&
              at(e + diag + stack, "run_loop (prog_monitor.c:") >= 0);
  }
}

/* --- distrun's status table --------------------------------------------------- */

static bool wait_for_err(dist_proc *p, const char *needle, int timeout_ms) {
  int64_t deadline = dist_test_now_ms() + timeout_ms;
  while (at(ERR(p), needle) < 0 && dist_test_now_ms() < deadline)
    dist_proc_pump(p, 1, 50);
  return at(ERR(p), needle) >= 0;
}

Test(monitor_mp, sigusr1_to_distrun_prints_every_ranks_state_without_stopping, .timeout = 90) {
  clean_env();
  static dist_proc p;
  const char *argv[] = {
      dist_test_bin("distrun"),          "-n",   "3", "--timeout", "6", "--grace-period", "1",
      dist_test_bin("monitor_testprog"), "hang", "1", NULL};
  dist_proc_start(&p, argv, NULL);
  /* The stall report says every rank is where the table should show it. */
  cr_assert(wait_for_err(&p, "MON WARN stall in group 0", 60000), "%s", ERR(&p));
  kill(p.pid, SIGUSR1);
  cr_assert(wait_for_err(&p, "status of job", 20000), "%s", ERR(&p));
  dist_proc_finish_all(&p, 1, 0, 60000);
  const char *t = strstr(ERR(&p), "status of job");
  cr_assert(t);
  const char *rows[] = {"\n  0 ", "in op      0     ALL_REDUCE             #10",
                        "\n  1 ", "outside    0     ALL_REDUCE             #9",
                        "\n  2 ", "in op      0     ALL_REDUCE             #10"};
  for (size_t i = 0; i < 6; i++) {
    long k = at(t, rows[i]);
    cr_assert(k >= 0, "'%s' in the table:\n%s", rows[i], t);
    t += k;
  }
  cr_assert_eq(p.status, 11, "the job went on to its timeout: %s", ERR(&p));
}

Test(monitor_mp, distrun_captures_the_stacks_of_a_stopped_rank_through_ptrace, .timeout = 60) {
  clean_env();
  static dist_proc p;
  const char *env[] = {"DIST_TIMEOUT=4", "DIST_SHOW_STACKTRACES=1", NULL};
  under_distrun(&p, 2, (const char *[]){"stop", "1", NULL}, env, 40000);
  const char *e = ERR(&p);
  long s = at(e, "distrun: stacks of rank 1 (pid ");
  if (s < 0 || at(e + s, "run_loop (prog_monitor.c:") < 0)
    dump(&p, 1);
  cr_assert(s >= 0 && at(e + s, "captured by distrun:\n    thread ") >= 0);
  /* Its main thread, stopped in raise(SIGSTOP) by the program's loop, and
   * the library's threads (the monitor's watchdog at least). */
  cr_assert(at(e + s, "run_loop (prog_monitor.c:") >= 0 && at(e + s, "main (prog_monitor.c:") >= 0);
  long t1 = at(e + s, "\n    thread ");
  cr_assert(t1 >= 0 && at(e + s + t1 + 1, "\n    thread ") >= 0, "one thread only:\n%s", e + s);
}
