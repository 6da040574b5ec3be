/* ctest: labels=multihost timeout=400 */
/* test_elastic.c - the elastic rendezvous across hosts (issue 25,
 * acceptance 2, on the test bed of netbed.h): each node is a distrun in its own
 * namespace-host, the c10d rendezvous on host 0's store (10.213.0.1:29500).
 * The scenarios of tests/monitor/test_distrun_elastic.c, over the bridge:
 * --nnodes MIN:MAX waits for MIN nodes and numbers them by arrival; a node
 * that arrives during an attempt waits and is admitted at the next round
 * after a restart; a node whose distrun is killed is named by the others.
 * Every wait is on an output line or an exit, with a deadline; the bed
 * goes in .fini whatever failed. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "netbed.h"

#define OUT(i) DIST_PROC_OUT(&node[i])
#define ERR(i) DIST_PROC_ERR(&node[i])
#define MAX_OPTS 24

static netbed bed;
static dist_proc node[3];

static void fini(void) { netbed_down(&bed); }

static void bed_up(int hosts) {
  char why[256];
  if (!netbed_supported(why, sizeof why))
    cr_skip_test("%s", why);
  dist_test_clean_launch_env();
  cr_assert_eq(netbed_up(&bed, hosts, 0), 0, "%s", bed.err);
}

/* Node on host k: distrun with the rendezvous on host 0, its own trace,
 * then opts (NULL-terminated) and prog; env as netbed_node's. */
static void start(int k, const char *const *opts, const char *const *prog,
                  const char *const *env) {
  static char ep[3][48], trace[3][320];
  snprintf(ep[k], sizeof ep[k], "%s:%d", netbed_addr(0), NETBED_PORT);
  snprintf(trace[k], sizeof trace[k], "%s/node%d.db", bed.dir, k);
  static const char *argv[3][MAX_OPTS];
  const char *fixed[] = {"--rdzv-endpoint", ep[k], "--rdzv-id", "el", "--trace-out", trace[k]};
  int n = 0;
  for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++)
    argv[k][n++] = fixed[i];
  for (int i = 0; opts[i] && n < MAX_OPTS - 1; i++)
    argv[k][n++] = opts[i];
  cr_assert_lt(n, MAX_OPTS - 1);
  argv[k][n] = NULL;
  netbed_node_start(&bed, &node[k], &(netbed_node){k, argv[k], prog, env});
}

/* Everything every node printed, for a failure message. */
static const char *output(int nodes) {
  static char out[1 << 17];
  size_t at = 0;
  out[0] = '\0';
  for (int k = 0; k < nodes && at < sizeof out - 1; k++)
    at += (size_t)snprintf(out + at, sizeof out - at,
                           "--- node %d: status %d\n--- stdout:\n%.8000s\n--- stderr:\n%.20000s\n",
                           k, node[k].status, OUT(k), ERR(k));
  return out;
}

/* Whether hay holds before, a pid, then after (a line naming a process). */
static bool has_around_pid(const char *hay, const char *before, const char *after) {
  for (const char *p = hay; (p = strstr(p, before)); p++) {
    const char *q = p + strlen(before);
    while (*q >= '0' && *q <= '9')
      q++;
    if (q > p + strlen(before) && !strncmp(q, after, strlen(after)))
      return true;
  }
  return false;
}

/* Node k's trace verdict, "kind|exit_status|culprits" ("(none)"). */
static const char *verdict(int k, char *buf, size_t len) {
  char db[320];
  snprintf(db, sizeof db, "%s/node%d.db", bed.dir, k);
  sqlite3 *h = NULL;
  sqlite3_stmt *s = NULL;
  snprintf(buf, len, "(none)");
  if (sqlite3_open_v2(db, &h, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK &&
      sqlite3_prepare_v2(h, "SELECT kind || '|' || exit_status || '|' || culprits FROM verdict",
                         -1, &s, NULL) == SQLITE_OK &&
      sqlite3_step(s) == SQLITE_ROW)
    snprintf(buf, len, "%s", (const char *)sqlite3_column_text(s, 0));
  sqlite3_finalize(s);
  sqlite3_close(h);
  return buf;
}

/* --- --nnodes MIN:MAX ------------------------------------------------------ */

Test(multihost_elastic, min_nodes_are_waited_for_across_hosts_and_ranks_follow_arrival,
     .timeout = 150, .fini = fini) {
  bed_up(2);
  const char *prog[] = {dist_test_bin("multihost_rank"), "loop", "5", "1000", NULL};
  const char *env[] = {"DIST_TIMEOUT=30", NULL};
  const char *o0[] = {"--nnodes", "2:3", "--rdzv-backend", "c10d", "--rdzv-conf",
                      "is_host=true,last_call=1", NULL};
  const char *o1[] = {"--nnodes", "2:3", "--rdzv-backend", "c10d", "--rdzv-conf",
                      "is_host=false,last_call=1", NULL};
  start(0, o0, prog, env);
  cr_assert(dist_proc_wait_for(&node[0], 1, "distrun: attempt 0: waiting for at least 2 nodes "
                               "(--nnodes 2:3), then up to 1.0 s (last_call_timeout) for more\n",
                               1, 30000), "%s", output(1));
  /* Waiting: no rank of host 0 exists (the round is not closed). */
  cr_assert_lt(netbed_find(&bed, 0, "multihost_rank", NULL, 0), 0, "a rank started alone:\n%s",
               output(1));
  start(1, o1, prog, env);
  dist_proc_finish_all(node, 2, 0, 90000);
  for (int k = 0; k < 2; k++)
    cr_assert_eq(node[k].status, 0, "node %d:\n%s", k, output(2));
  cr_assert(strstr(ERR(0), "distrun: attempt 0: a round of 2 nodes (--nnodes 2:3)\n"), "%s",
            output(2));
  /* Arrival order: host 0's node first (rank 0), host 1's second; the
   * ranks' all_reduces crossed the bridge. */
  cr_assert(strstr(OUT(0), "[0] passed rank=0\n"), "%s", output(2));
  cr_assert(strstr(OUT(1), "[1] passed rank=1\n"), "%s", output(2));
}

/* --- a late node --------------------------------------------------------------- */

Test(multihost_elastic, a_late_node_on_another_host_is_admitted_at_the_next_round,
     .timeout = 200, .fini = fini) {
  bed_up(2);
  char gate[320], gatevar[340];
  snprintf(gate, sizeof gate, "%s/gate", bed.dir); /* the hosts share the file system */
  cr_assert_eq(mkfifo(gate, 0600), 0, "%s: %s", gate, strerror(errno));
  snprintf(gatevar, sizeof gatevar, "DIST_TEST_GATE=%s", gate);
  const char *prog[] = {dist_test_bin("distrun_restartprog"), "fail-until", "1", "3", NULL};
  const char *env[] = {gatevar, "DIST_TIMEOUT=30", NULL};
  const char *o0[] = {"--nnodes", "1:2", "-n", "2", "--max-restarts", "1", "--rdzv-backend",
                      "c10d", "--rdzv-conf", "is_host=true,last_call=3", NULL};
  const char *o1[] = {"--nnodes", "1:2", "-n", "2", "--max-restarts", "1", "--rdzv-backend",
                      "c10d", "--rdzv-conf", "is_host=false,last_call=3", NULL};
  start(0, o0, prog, env);
  cr_assert(dist_proc_wait_for(&node[0], 1, "distrun: attempt 0: a round of 1 node (--nnodes "
                               "1:2)\n", 1, 30000), "%s", output(1));
  start(1, o1, prog, env);
  cr_assert(dist_proc_wait_for(&node[1], 1, "distrun: attempt 0 started with 1 node before this "
                               "one arrived (number 2): waiting for the next round\n", 1, 30000),
            "%s", output(2));
  /* rank 1 fails attempt 0 now: one byte, the FIFO held open until the end */
  int fd = open(gate, O_RDWR | O_CLOEXEC);
  cr_assert_geq(fd, 0, "%s: %s", gate, strerror(errno));
  cr_assert_eq(write(fd, "x", 1), 1);
  dist_proc_finish_all(node, 2, 0, 150000);
  close(fd);
  for (int k = 0; k < 2; k++)
    cr_assert_eq(node[k].status, 0, "node %d:\n%s", k, output(2));
  cr_assert(has_around_pid(ERR(0), "distrun: attempt 0: exit status 12 (a rank died): rank 1 "
                           "(pid ", ", node 0) failed first: exited with code 3; "), "%s",
            output(2));
  cr_assert(strstr(ERR(0), "distrun: attempt 1: a round of 2 nodes (--nnodes 1:2)\n"), "%s",
            output(2));
  for (int r = 0; r < 4; r++) {
    char want[96];
    snprintf(want, sizeof want, "[%d] attempt 1 done (backend cpu, restart count 1, run el)\n", r);
    cr_assert(strstr(OUT(r / 2), want), "no '%s':\n%s", want, output(2));
  }
}

/* --- a node that leaves ------------------------------------------------------- */

Test(multihost_elastic, a_killed_node_on_another_host_is_named_by_the_others, .timeout = 150,
     .fini = fini) {
  bed_up(3);
  const char *prog[] = {dist_test_bin("multihost_rank"), "loop", "0", "1000", NULL};
  const char *env[] = {"DIST_TIMEOUT=30", NULL};
  static const char *opts[3][8];
  static const char ranks[3][2] = {"0", "1", "2"};
  for (int k = 0; k < 3; k++) {
    const char *o[] = {"--nnodes", "3", "--node-rank", ranks[k], "--rdzv-conf",
                       "keep_alive_interval=0.5,keep_alive_max_attempt=2", NULL};
    memcpy(opts[k], o, sizeof o);
    start(k, opts[k], prog, env);
  }
  for (int k = 0; k < 3; k++)
    cr_assert(dist_proc_wait_for(&node[k], 0, "ready pid=", 1, 60000), "node %d:\n%s", k,
              output(3));
  pid_t victim = netbed_find(&bed, 2, "distrun", NULL, 10000);
  cr_assert_gt(victim, 0, "no distrun in host 2");
  cr_assert_eq(kill(victim, SIGKILL), 0);
  dist_proc_finish_all(node, 3, 0, 90000);
  for (int k = 0; k < 2; k++) {
    cr_assert_eq(node[k].status, 12, "node %d:\n%s", k, output(3));
    /* The line may go on with rank 2's last operation, when its trace
     * had recorded one before the kill. */
    cr_assert(strstr(ERR(k), "distrun: exit status 12 (a rank died): node 2 left the job: nothing "
                             "heard from its distrun for 1.0 s (--rdzv-conf keep_alive_interval="
                             "0.5,keep_alive_max_attempt=2); its ranks 2-2 are gone"),
              "node %d:\n%s", k, output(3));
    char v[256];
    cr_expect_str_eq(verdict(k, v, sizeof v), "died|12|2", "node %d's trace", k);
  }
  /* Host 2's rank went with its distrun. */
  cr_expect_lt(netbed_find(&bed, 2, "multihost_rank", NULL, 0), 0, "a rank of host 2 is left");
}
