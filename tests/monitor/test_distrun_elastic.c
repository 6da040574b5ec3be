/* ctest: labels=multiproc timeout=300 */
/* test_distrun_elastic.c - jobs of several real distrun nodes on loopback
 * (distinct --node-rank, or c10d arrival order): --max-restarts across
 * nodes (a failure on one node restarts every node's ranks in a new round,
 * both attempts' verdicts and traces kept), a node that leaves (SIGKILL to
 * its distrun) named by every other node, and elastic --nnodes MIN:MAX
 * (MIN waited for, a node beyond MAX waits for the next round and is
 * admitted there after a restart, or told the job ended). Every wait is on
 * an output line or an exit, with a deadline. */
#include <criterion/criterion.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "proc.h"
#include "tmpdir.h"

#define OUT(p) DIST_PROC_OUT(p)
#define ERR(p) DIST_PROC_ERR(p)
#define MAX_ARGS 32

static char *tmpdir(void) {
  static char dir[64];
  snprintf(dir, sizeof dir, "/tmp/dist-elastic-XXXXXX");
  cr_assert_not_null(dist_test_mkdtemp(dir)); /* removed at exit */
  return dir;
}

static int free_port(void) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t len = sizeof a;
  cr_assert_eq(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
  cr_assert_eq(getsockname(fd, (struct sockaddr *)&a, &len), 0);
  close(fd);
  return ntohs(a.sin_port);
}

/* One node: distrun with the endpoint and a trace of its own in dir, then
 * opts (NULL-terminated, before the program), then prog (NULL-terminated). */
typedef struct node_spec {
  const char *dir;
  int port, index;
  const char *const *opts;
  const char *const *prog;
  const char *gate; /* DIST_TEST_GATE, or NULL */
} node_spec;

static void start_node(dist_proc *p, const node_spec *s) {
  static char ep[8][32], out[8][160], trace[8][160], gate[8][200];
  int k = s->index;
  snprintf(ep[k], sizeof ep[k], "127.0.0.1:%d", s->port);
  snprintf(out[k], sizeof out[k], "%s/node%d.db", s->dir, k);
  snprintf(trace[k], sizeof trace[k], "DIST_TRACE=%s/trace", s->dir);
  snprintf(gate[k], sizeof gate[k], "DIST_TEST_GATE=%s", s->gate ? s->gate : "");
  const char *argv[MAX_ARGS];
  int n = 0;
  argv[n++] = dist_test_bin("distrun");
  const char *fixed[] = {"--rdzv-endpoint", ep[k], "--rdzv-id", "el", "--trace-out", out[k]};
  for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++)
    argv[n++] = fixed[i];
  for (int i = 0; s->opts[i]; i++)
    argv[n++] = s->opts[i];
  for (int i = 0; s->prog[i]; i++)
    argv[n++] = s->prog[i];
  argv[n] = NULL;
  cr_assert_lt(n, MAX_ARGS);
  const char *env[] = {"DIST_TOKEN=elastic-test-token", trace[k], s->gate ? gate[k] : NULL,
                       NULL};
  dist_proc_start(p, argv, env);
}

/* --- restarts across nodes ----------------------------------------------- */

Test(monitor_distrun_elastic, two_nodes_restart_together_and_keep_both_attempts,
     .timeout = 180) {
  dist_test_clean_launch_env();
  char *dir = tmpdir();
  int port = free_port();
  static dist_proc n[2];
  const char *prog[] = {dist_test_bin("distrun_restartprog"), "fail-until", "1", "3", NULL};
  const char *o0[] = {"--nnodes", "2", "--node-rank", "0", "--max-restarts", "1", NULL};
  const char *o1[] = {"--nnodes", "2", "--node-rank", "1", "--max-restarts", "1", NULL};
  start_node(&n[0], &(node_spec){dir, port, 0, o0, prog, NULL});
  start_node(&n[1], &(node_spec){dir, port, 1, o1, prog, NULL});
  dist_proc_finish_all(n, 2, 0, 150000);
  for (int i = 0; i < 2; i++)
    cr_assert_eq(n[i].status, 0, "node %d: exit %d\n%s\n%s", i, n[i].status, OUT(&n[i]),
                 ERR(&n[i]));
  /* Node 0 names rank 1 (node 1's), not its own rank that lost it. */
  cr_assert(strstr(ERR(&n[0]), "distrun: attempt 0: exit status 12 (a rank died): rank 1 died: "
                               "exited with code 3 (on another node)"), "%s", ERR(&n[0]));
  cr_assert(strstr(ERR(&n[0]), "distrun: attempt 1: every rank succeeded"), "%s", ERR(&n[0]));
  for (int i = 0; i < 2; i++) {
    char want[96];
    snprintf(want, sizeof want, "[%d] attempt 1 done (backend cpu, restart count 1, run el)", i);
    cr_assert(strstr(OUT(&n[i]), want), "node %d:\n%s", i, OUT(&n[i]));
  }
  char want[600];
  snprintf(want, sizeof want, "distrun: 2 attempts (--max-restarts 1); the job's exit status is "
           "the last attempt's, 0:\n  attempt 0: exit status 12 (died, rank 1), trace "
           "%s/node0.attempt-0.db\n  attempt 1: exit status 0 (success), trace "
           "%s/node0.attempt-1.db\n", dir, dir);
  cr_assert(strstr(ERR(&n[0]), want), "want:\n%s\nin:\n%s", want, ERR(&n[0]));
  for (int k = 0; k < 2; k++) {
    char file[160];
    struct stat st;
    snprintf(file, sizeof file, "%s/node0.attempt-%d.db", dir, k);
    cr_assert_eq(stat(file, &st), 0, "%s missing", file);
  }
}

/* --- a node that leaves ------------------------------------------------------ */

Test(monitor_distrun_elastic, a_node_killed_is_named_by_every_other_node, .timeout = 120) {
  dist_test_clean_launch_env();
  char *dir = tmpdir();
  int port = free_port();
  static dist_proc n[3];
  const char *prog[] = {dist_test_bin("distrun_testprog"), "wait", NULL};
  static const char *opts[3][10];
  static const char ranks[3][2] = {"0", "1", "2"};
  for (int i = 0; i < 3; i++) {
    const char *o[] = {"--nnodes", "3", "--node-rank", ranks[i], "--rdzv-conf",
                       "keep_alive_interval=0.5,keep_alive_max_attempt=2", NULL};
    memcpy(opts[i], o, sizeof o);
    start_node(&n[i], &(node_spec){dir, port, i, opts[i], prog, NULL});
  }
  for (int i = 0; i < 3; i++)
    cr_assert(dist_proc_wait_for(&n[i], 0, "ready pid=", 1, 60000), "node %d:\n%s", i,
              ERR(&n[i]));
  cr_assert_eq(kill(n[2].pid, SIGKILL), 0);
  dist_proc_finish_all(n, 3, 0, 60000);
  for (int i = 0; i < 2; i++) {
    cr_assert_eq(n[i].status, 12, "node %d: exit %d\n%s", i, n[i].status, ERR(&n[i]));
    cr_assert(strstr(ERR(&n[i]), "exit status 12 (a rank died): node 2 left the job: nothing "
                                 "heard from its distrun for 1.0 s"), "node %d:\n%s", i,
              ERR(&n[i]));
    cr_assert(strstr(ERR(&n[i]), "its ranks 2-2 are gone"), "node %d:\n%s", i, ERR(&n[i]));
  }
}

/* --- elastic --nnodes MIN:MAX ------------------------------------------------- */

Test(monitor_distrun_elastic, min_nodes_are_waited_for_and_ranks_follow_arrival,
     .timeout = 120) {
  dist_test_clean_launch_env();
  char *dir = tmpdir();
  int port = free_port();
  static dist_proc n[2];
  const char *prog[] = {dist_test_bin("distrun_testprog"), "env", NULL};
  const char *o0[] = {"--nnodes", "2:3", "--rdzv-backend", "c10d", "--rdzv-conf",
                      "is_host=true,last_call=1", NULL};
  const char *o1[] = {"--nnodes", "2:3", "--rdzv-backend", "c10d", "--rdzv-conf",
                      "is_host=false,last_call=1", NULL};
  start_node(&n[0], &(node_spec){dir, port, 0, o0, prog, NULL});
  cr_assert(dist_proc_wait_for(&n[0], 1, "attempt 0: waiting for at least 2 nodes", 1, 30000),
            "%s", ERR(&n[0]));
  cr_assert_eq(dist_test_count(OUT(&n[0]), "env rank="), 0, "started alone:\n%s", OUT(&n[0]));
  start_node(&n[1], &(node_spec){dir, port, 1, o1, prog, NULL});
  dist_proc_finish_all(n, 2, 0, 60000);
  for (int i = 0; i < 2; i++)
    cr_assert_eq(n[i].status, 0, "node %d: exit %d\n%s", i, n[i].status, ERR(&n[i]));
  cr_assert(strstr(ERR(&n[0]), "attempt 0: a round of 2 nodes (--nnodes 2:3)"), "%s",
            ERR(&n[0]));
  cr_assert(strstr(OUT(&n[0]), "env rank=0 world=2 "), "%s", OUT(&n[0]));
  cr_assert(strstr(OUT(&n[1]), "env rank=1 world=2 "), "%s", OUT(&n[1]));
}

Test(monitor_distrun_elastic, a_node_beyond_max_waits_and_hears_the_job_ended,
     .timeout = 120) {
  dist_test_clean_launch_env();
  char *dir = tmpdir();
  int port = free_port();
  static dist_proc n[3];
  const char *prog[] = {dist_test_bin("distrun_testprog"), "wait", NULL};
  const char *o0[] = {"--nnodes", "1:2", "--rdzv-backend", "c10d", "--rdzv-conf",
                      "is_host=true,last_call=30", NULL};
  const char *o1[] = {"--nnodes", "1:2", "--rdzv-backend", "c10d", "--rdzv-conf",
                      "is_host=false,last_call=30", NULL};
  start_node(&n[0], &(node_spec){dir, port, 0, o0, prog, NULL});
  start_node(&n[1], &(node_spec){dir, port, 1, o1, prog, NULL});
  for (int i = 0; i < 2; i++)
    cr_assert(dist_proc_wait_for(&n[i], 0, "ready pid=", 1, 60000), "node %d:\n%s", i,
              ERR(&n[i]));
  start_node(&n[2], &(node_spec){dir, port, 2, o1, prog, NULL});
  cr_assert(dist_proc_wait_for(&n[2], 1, "waiting for the next round", 1, 30000), "%s",
            ERR(&n[2]));
  cr_assert_eq(dist_test_count(OUT(&n[2]), "ready pid="), 0, "%s", OUT(&n[2]));
  kill(n[0].pid, SIGTERM); /* an interrupt: no restart */
  dist_proc_finish_all(n, 3, 0, 60000);
  cr_assert_eq(n[0].status, 1, "%s", ERR(&n[0]));
  cr_assert_eq(n[2].status, 13, "%s", ERR(&n[2]));
  cr_assert(strstr(ERR(&n[2]), "attempt 0 started with 2 nodes before this one arrived "
                               "(number 3): waiting for the next round"), "%s", ERR(&n[2]));
  cr_assert(strstr(ERR(&n[2]), "the job ended with status 1 before a new round admitted this "
                               "node"), "%s", ERR(&n[2]));
}

Test(monitor_distrun_elastic, a_late_node_is_admitted_at_the_next_round_after_a_restart,
     .timeout = 180) {
  dist_test_clean_launch_env();
  char *dir = tmpdir();
  int port = free_port();
  char gate[128];
  snprintf(gate, sizeof gate, "%s/gate", dir);
  cr_assert_eq(mkfifo(gate, 0600), 0, "%s: %s", gate, strerror(errno));
  static dist_proc n[2];
  const char *prog[] = {dist_test_bin("distrun_restartprog"), "fail-until", "1", "3", NULL};
  const char *o0[] = {"--nnodes", "1:2", "-n", "2", "--max-restarts", "1", "--rdzv-backend",
                      "c10d", "--rdzv-conf", "is_host=true,last_call=3", NULL};
  const char *o1[] = {"--nnodes", "1:2", "-n", "2", "--max-restarts", "1", "--rdzv-backend",
                      "c10d", "--rdzv-conf", "is_host=false,last_call=3", NULL};
  start_node(&n[0], &(node_spec){dir, port, 0, o0, prog, gate});
  cr_assert(dist_proc_wait_for(&n[0], 1, "attempt 0: a round of 1 node", 1, 30000), "%s",
            ERR(&n[0]));
  start_node(&n[1], &(node_spec){dir, port, 1, o1, prog, gate});
  cr_assert(dist_proc_wait_for(&n[1], 1, "waiting for the next round", 1, 30000), "%s",
            ERR(&n[1]));
  /* rank 1 fails attempt 0 now: one byte, the FIFO held open until the end */
  int fd = open(gate, O_RDWR | O_CLOEXEC);
  cr_assert_geq(fd, 0, "%s: %s", gate, strerror(errno));
  cr_assert_eq(write(fd, "x", 1), 1);
  dist_proc_finish_all(n, 2, 0, 120000);
  close(fd);
  for (int i = 0; i < 2; i++)
    cr_assert_eq(n[i].status, 0, "node %d: exit %d\n%s\n%s", i, n[i].status, OUT(&n[i]),
                 ERR(&n[i]));
  cr_assert(strstr(ERR(&n[0]), "attempt 1: a round of 2 nodes (--nnodes 1:2)"), "%s",
            ERR(&n[0]));
  cr_assert(strstr(OUT(&n[1]), "[2] attempt 1 done (backend cpu, restart count 1, run el)"),
            "%s", OUT(&n[1]));
  cr_assert(strstr(OUT(&n[1]), "[3] attempt 1 done"), "%s", OUT(&n[1]));
  cr_assert(strstr(ERR(&n[0]), "attempt 0: exit status 12 (a rank died): rank 1 "), "%s",
            ERR(&n[0]));
}
