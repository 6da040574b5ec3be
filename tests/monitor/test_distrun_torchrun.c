/* ctest: labels=multiproc,san_address timeout=300 */
/* test_distrun_torchrun.c - distrun as torchrun's equal: torchrun's command
 * line (the spellings accepted, each refusal's sentence), the rank
 * variables in torchrun's names, --redirects/--tee/--local-ranks-filter,
 * and --max-restarts end to end (real ranks that fail in attempts 0 and 1:
 * every attempt's verdict printed, its trace kept and opened by distview,
 * the job's status the last attempt's). Rank programs: distrun_testprog
 * (prog_distrun.c) and distrun_restartprog (prog_restart.c). */
#include <criterion/criterion.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "proc.h"
#include "tmpdir.h"

#define OUT(p) DIST_PROC_OUT(p)
#define ERR(p) DIST_PROC_ERR(p)

static char *tmpdir(void) {
  static char dir[64];
  snprintf(dir, sizeof dir, "/tmp/dist-torchrun-XXXXXX");
  cr_assert_not_null(dist_test_mkdtemp(dir));
  return dir;
}

/* --- refusals ------------------------------------------------------------- */

typedef struct refusal {
  const char *args[6]; /* before the program */
  const char *says;    /* in the sentence on stderr */
} refusal;

static const refusal refusals[] = {
    {{"--nnodes", "1:2", "--master-addr", "127.0.0.1"}, "an elastic job needs --rdzv-backend c10d"},
    {{"--nnodes", "3:1"}, "needs N or MIN:MAX with 1 <= MIN <= MAX"},
    {{"--rdzv-conf", "keep_alive_max_attempt=0"},
     "--rdzv-conf keep_alive_max_attempt needs an integer in [1, 1000]"},
    {{"--rdzv-conf", "keep_alive_interval=0"}, "keep_alive_interval needs at least 0.01 s"},
    {{"--nproc-per-node", "xpu"}, "libdist has no XPU backend"},
    {{"--nproc_per_node", "many"}, "needs a number in [1, "},
    {{"--rdzv-backend", "etcd"}, "it does not use etcd"},
    {{"--rdzv_backend", "etcd-v2"}, "it does not use etcd"},
    {{"--rdzv-backend", "zk"}, "needs c10d or static"},
    {{"--rdzv-endpoint", "[::1"}, "an IPv6 address goes in brackets"},
    {{"--rdzv-endpoint", "host:port"}, "'port' is not a port number"},
    {{"--rdzv-id", "a b"}, "is not a job id"},
    {{"--rdzv-conf", "bogus=1"}, "unknown key 'bogus'"},
    {{"--rdzv_conf", "join_timeout"}, "is not key=value"},
    {{"--max-restarts", "-1"}, "--max-restarts needs an integer in [0, 1000]"},
    {{"--nnodes", "1:3", "--rdzv-backend", "c10d", "--node-rank", "1"},
     "nodes take their ranks in each round in the order they join"},
    {{"--monitor-interval", "soon"}, "--monitor-interval needs a number of seconds"},
    {{"--start-method", "thread"}, "needs spawn, fork or forkserver"},
    {{"--redirects", "4", "--log-dir", "/tmp"}, "needs 0 (none), 1 (stdout)"},
    {{"-r", "0:1,1:2", "--log-dir", "/tmp"}, "per-rank maps (local_rank:value) are torchrun's"},
    {{"--redirects", "3"}, "and none is given"},
    {{"--tee", "3"}, "without --log-dir the output is on the terminal already"},
    {{"-m", "--no-python"}, "give one of them"},
    {{"--local-ranks-filter", "0,x"}, "needs local ranks in [0, 63]"},
    {{"--logs-specs", "my.Specs"}, "it names a Python LogsSpecs class"},
    {{"--logs_specs", "my.Specs"}, "it names a Python LogsSpecs class"},
    {{"--event-log-handler", "console"}, "it names a Python event handler"},
    {{"--numa-binding", "node"}, "put numactl in front of the program"},
    {{"--signals-to-handle", "SIGUSR2"}, "always forwards SIGINT, SIGTERM and SIGHUP"},
    {{"--virtual-local-rank"}, "gives each rank its real LOCAL_RANK"},
};

Test(monitor_distrun_torchrun, torchruns_options_that_differ_are_refused_with_the_difference,
     .timeout = 120) {
  dist_test_clean_launch_env();
  for (size_t i = 0; i < sizeof refusals / sizeof refusals[0]; i++) {
    const char *argv[12] = {dist_test_bin("distrun")};
    int n = 1;
    for (int k = 0; k < 6 && refusals[i].args[k]; k++)
      argv[n++] = refusals[i].args[k];
    argv[n++] = dist_test_bin("distrun_testprog");
    argv[n++] = "env";
    static dist_proc p;
    int st = dist_proc_run(&p, argv, NULL, 20000);
    cr_assert_eq(st, 2, "%s: exit %d\n%s", refusals[i].args[0], st, ERR(&p));
    cr_assert(strstr(ERR(&p), refusals[i].says), "%s %s: want '%s' in:\n%s",
              refusals[i].args[0], refusals[i].args[1] ? refusals[i].args[1] : "",
              refusals[i].says, ERR(&p));
    cr_assert(strstr(ERR(&p), "Try 'distrun --help'."), "%s", ERR(&p));
    cr_assert_eq(dist_test_count(OUT(&p), "env rank="), 0, "a refused line ran:\n%s", OUT(&p));
  }
}

/* --- accepted spellings ----------------------------------------------------- */

Test(monitor_distrun_torchrun, a_torchrun_command_line_runs_with_torchs_variables,
     .timeout = 60) {
  dist_test_clean_launch_env();
  static dist_proc p;
  const char *argv[] = {dist_test_bin("distrun"), "--nnodes", "1:1", "--nproc_per_node", "2",
                        "--rdzv_backend", "c10d", "--rdzv_id", "myrun", "--max_restarts", "0",
                        "--monitor_interval", "0.5", "--start_method", "spawn", "--role",
                        "trainer", "--no_python", "--run_path",
                        dist_test_bin("distrun_testprog"), "torchenv", NULL};
  int st = dist_proc_run(&p, argv, NULL, 45000);
  cr_assert_eq(st, 0, "exit %d\n%s", st, ERR(&p));
  for (int r = 0; r < 2; r++) {
    char want[512];
    snprintf(want, sizeof want, "[%d] torchenv rank=%d group_rank=0 role=trainer role_rank=%d "
             "role_world=2 restart=0 dist_restart=0 max_restarts=0 run_id=myrun job=myrun "
             "lws=2 addr=127.0.0.1 port=", r, r, r);
    cr_assert(strstr(OUT(&p), want), "want '%s' in:\n%s", want, OUT(&p));
  }
}

Test(monitor_distrun_torchrun, hyphens_and_underscores_spell_the_same_options, .timeout = 60) {
  dist_test_clean_launch_env();
  static dist_proc p;
  int st = dist_proc_runl(&p, NULL, 45000, dist_test_bin("distrun"), "--nproc-per-node", "1",
                          "--rdzv-backend", "static", "--rdzv-id", "other-run",
                          "--rdzv-conf", "join_timeout=30,read_timeout=60", "--start-method",
                          "fork", "--use_env", dist_test_bin("distrun_testprog"), "torchenv",
                          NULL);
  cr_assert_eq(st, 0, "exit %d\n%s", st, ERR(&p));
  cr_assert(strstr(OUT(&p), "[0] torchenv rank=0 group_rank=0 role=default role_rank=0 "
                            "role_world=1 restart=0 dist_restart=0 max_restarts=0 "
                            "run_id=other-run job=other-run lws=1"), "%s", OUT(&p));
}

Test(monitor_distrun_torchrun, nproc_per_node_cpu_is_the_cpu_count_and_gpu_needs_a_device,
     .timeout = 60) {
  dist_test_clean_launch_env();
  static dist_proc p;
  int st = dist_proc_runl(&p, NULL, 45000, dist_test_bin("distrun"), "--nproc-per-node", "cpu",
                          dist_test_bin("distrun_testprog"), "torchenv", NULL);
  cr_assert_eq(st, 0, "exit %d\n%s", st, ERR(&p));
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  char want[64];
  snprintf(want, sizeof want, " lws=%ld ", cpus);
  cr_assert_eq(dist_test_count(OUT(&p), want), (int)cpus, "%ld ranks with%s:\n%s", cpus, want,
               OUT(&p));
  /* No CUDA device in the test's environment (CUDA_VISIBLE_DEVICES empty
   * hides any GPU of the machine). */
  const char *env[] = {"CUDA_VISIBLE_DEVICES=", NULL};
  const char *argv[] = {dist_test_bin("distrun"), "--nproc-per-node", "gpu",
                        dist_test_bin("distrun_testprog"), "env", NULL};
  st = dist_proc_run(&p, argv, env, 20000);
  cr_assert_eq(st, 2, "exit %d\n%s", st, ERR(&p));
  cr_assert(strstr(ERR(&p), "--nproc-per-node gpu counts the visible CUDA devices, and there "
                            "are none"), "%s", ERR(&p));
  const char *argv_auto[] = {dist_test_bin("distrun"), "--nproc-per-node", "auto",
                             dist_test_bin("distrun_testprog"), "torchenv", NULL};
  st = dist_proc_run(&p, argv_auto, env, 45000);
  cr_assert_eq(st, 0, "exit %d\n%s", st, ERR(&p));
  cr_assert_eq(dist_test_count(OUT(&p), want), (int)cpus, "auto without a GPU: %s", OUT(&p));
}

Test(monitor_distrun_torchrun, module_and_py_scripts_run_under_python3_as_torchrun_does,
     .timeout = 60) {
  dist_test_clean_launch_env();
  char *dir = tmpdir();
  char script[128];
  snprintf(script, sizeof script, "%s/hello.py", dir);
  FILE *f = fopen(script, "w");
  cr_assert_not_null(f);
  fputs("import os, sys\nprint('py rank', os.environ['RANK'], sys.flags.dont_write_bytecode >= 0)\n", f);
  fclose(f); /* not executable: torchrun runs it with python, and so does distrun */
  static dist_proc p;
  int st = dist_proc_runl(&p, NULL, 45000, dist_test_bin("distrun"), "-n", "2", script, NULL);
  cr_assert_eq(st, 0, "exit %d\n%s", st, ERR(&p));
  cr_assert(strstr(OUT(&p), "[0] py rank 0 True") && strstr(OUT(&p), "[1] py rank 1 True"),
            "%s", OUT(&p));
  /* -m: python3 -u -m json.tool reads stdin (/dev/null here): an error
   * naming the module, so the module ran. */
  st = dist_proc_runl(&p, NULL, 45000, dist_test_bin("distrun"), "-m", "calendar", "2026", "1",
                      NULL);
  cr_assert_eq(st, 0, "exit %d\n%s", st, ERR(&p));
  cr_assert(strstr(OUT(&p), "[0]     January 2026"), "%s", OUT(&p));
  /* --no-python: the script itself is exec'd (not executable: a launch failure) */
  st = dist_proc_runl(&p, NULL, 45000, dist_test_bin("distrun"), "--no-python", script, NULL);
  cr_assert_eq(st, 13, "exit %d\n%s", st, ERR(&p));
  cr_assert(strstr(ERR(&p), "Permission denied"), "%s", ERR(&p));
}

/* --- output ------------------------------------------------------------------ */

static bool file_has(const char *path, const char *needle) {
  char buf[4096] = "";
  FILE *f = fopen(path, "r");
  if (!f)
    return false;
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  buf[n] = '\0';
  fclose(f);
  return strstr(buf, needle) != NULL;
}

Test(monitor_distrun_torchrun, redirects_and_tee_choose_the_streams_per_torchrun,
     .timeout = 60) {
  dist_test_clean_launch_env();
  char *dir = tmpdir();
  char out[160], err[160];
  snprintf(out, sizeof out, "%s/rank-0.out", dir);
  snprintf(err, sizeof err, "%s/rank-0.err", dir);
  static dist_proc p;
  /* --redirects 1: stdout to the file, stderr on the terminal */
  int st = dist_proc_runl(&p, NULL, 45000, dist_test_bin("distrun"), "--log-dir", dir,
                          "--redirects", "1", dist_test_bin("distrun_testprog"), "lines", NULL);
  cr_assert_eq(st, 0, "exit %d\n%s", st, ERR(&p));
  cr_assert(file_has(out, "out line 1\nout line 2\npartial"));
  cr_assert_eq(access(err, F_OK), -1, "stderr went to a file");
  cr_assert(strstr(ERR(&p), "[0] err line 1"), "%s", ERR(&p));
  cr_assert_null(strstr(OUT(&p), "out line 1"), "%s", OUT(&p));
  /* -t 2 (torchrun's spelling with a value): stderr to both, stdout on the terminal */
  unlink(out);
  st = dist_proc_runl(&p, NULL, 45000, dist_test_bin("distrun"), "--log-dir", dir,
                      "--redirects", "0", "-t", "2", dist_test_bin("distrun_testprog"), "lines",
                      NULL);
  cr_assert_eq(st, 0, "exit %d\n%s", st, ERR(&p));
  cr_assert(file_has(err, "err line 1"));
  cr_assert_eq(access(out, F_OK), -1, "stdout went to a file");
  cr_assert(strstr(ERR(&p), "[0] err line 1"), "%s", ERR(&p));
  cr_assert(strstr(OUT(&p), "[0] out line 1"), "%s", OUT(&p));
}

Test(monitor_distrun_torchrun, local_ranks_filter_shows_only_those_ranks, .timeout = 60) {
  dist_test_clean_launch_env();
  static dist_proc p;
  int st = dist_proc_runl(&p, NULL, 45000, dist_test_bin("distrun"), "-n", "3",
                          "--local_ranks_filter", "0,2", dist_test_bin("distrun_testprog"),
                          "env", NULL);
  cr_assert_eq(st, 0, "exit %d\n%s", st, ERR(&p));
  cr_assert(strstr(OUT(&p), "[0] env rank=0"), "%s", OUT(&p));
  cr_assert(strstr(OUT(&p), "[2] env rank=2"), "%s", OUT(&p));
  cr_assert_null(strstr(OUT(&p), "[1] env"), "%s", OUT(&p));
}

Test(monitor_distrun_torchrun, help_lists_torchruns_options, .timeout = 20) {
  static dist_proc p;
  int st = dist_proc_runl(&p, NULL, 10000, dist_test_bin("distrun"), "--help", NULL);
  cr_assert_eq(st, 0);
  const char *opts[] = {"--max-restarts", "--rdzv-backend", "--rdzv-endpoint", "--rdzv-id",
                        "--rdzv-conf", "--monitor-interval", "--redirects", "--role",
                        "--no-python", "--run-path", "--local-addr", "--local-ranks-filter",
                        "--start-method", "auto|cpu|gpu", "-m, --module"};
  for (size_t i = 0; i < sizeof opts / sizeof opts[0]; i++)
    cr_assert(strstr(OUT(&p), opts[i]), "--help lacks %s", opts[i]);
}

/* --- restarts ----------------------------------------------------------------- */

/* distrun --max-restarts R on prog_restart's fail-until 2 in dir. */
static int run_restarts(dist_proc *p, const char *dir, const char *restarts) {
  char trace[128], out[128], env_trace[160];
  snprintf(trace, sizeof trace, "%s/dist-trace", dir);
  snprintf(out, sizeof out, "%s/trace.db", dir);
  snprintf(env_trace, sizeof env_trace, "DIST_TRACE=%s", trace);
  const char *env[] = {env_trace, NULL};
  const char *argv[] = {dist_test_bin("distrun"), "-n", "2", "--max-restarts", restarts,
                        "--trace-out", out, "--rdzv-id", "rs",
                        dist_test_bin("distrun_restartprog"), "fail-until", "2", "3", NULL};
  return dist_proc_run(p, argv, env, 120000);
}

/* distview's output (stdout, then stderr); it exits with the status of
 * the job it shows (diagnose: 12 for a rank that died). */
static char *distview(int want_st, const char *a, const char *b, const char *c, const char *d) {
  static dist_proc v;
  int st = dist_proc_runl(&v, NULL, 30000, dist_test_bin("distview"), a, b, c, d, NULL);
  cr_assert_eq(st, want_st, "distview %s %s %s: exit %d\n%s", a, b, c, st, ERR(&v));
  static char both[2 * DIST_PROC_CAP + 2];
  snprintf(both, sizeof both, "%s\n%s", OUT(&v), ERR(&v));
  return both;
}

Test(monitor_distrun_torchrun, two_failed_attempts_then_success_keep_three_traces_status_0,
     .timeout = 180) {
  dist_test_clean_launch_env();
  char *dir = tmpdir();
  static dist_proc p;
  int st = run_restarts(&p, dir, "2");
  cr_assert_eq(st, 0, "exit %d\n%s", st, ERR(&p));
  for (int k = 0; k < 2; k++) {
    char line[160];
    snprintf(line, sizeof line, "distrun: attempt %d: exit status 12 (a rank died): rank 1 ", k);
    cr_assert(strstr(ERR(&p), line), "missing '%s' in:\n%s", line, ERR(&p));
  }
  cr_assert(strstr(ERR(&p), "distrun: attempt 2: every rank succeeded"), "%s", ERR(&p));
  cr_assert(strstr(OUT(&p), "[0] attempt 2 done (backend cpu, restart count 2, run rs)"),
            "%s", OUT(&p));
  /* The summary, last: every attempt's verdict and trace. */
  const char *sum = strstr(ERR(&p), "distrun: 3 attempts (--max-restarts 2); the job's exit "
                                    "status is the last attempt's, 0:\n");
  cr_assert_not_null(sum, "%s", ERR(&p));
  char want[600];
  snprintf(want, sizeof want, "  attempt 0: exit status 12 (died, rank 1), trace %s/trace."
           "attempt-0.db\n  attempt 1: exit status 12 (died, rank 1), trace %s/trace.attempt-1."
           "db\n  attempt 2: exit status 0 (success), trace %s/trace.attempt-2.db\n", dir, dir,
           dir);
  cr_assert(strstr(sum, want), "want:\n%s\nin:\n%s", want, sum);
  cr_assert_eq(strlen(strstr(sum, want)), strlen(want), "the summary is not last:\n%s", sum);
  /* Three traces, each opened by distview and saying which it is; trace.db
   * is the last attempt's. */
  char out[128], file[128];
  snprintf(out, sizeof out, "%s/trace.db", dir);
  for (int k = 0; k < 3; k++) {
    char kk[8];
    snprintf(kk, sizeof kk, "%d", k);
    snprintf(file, sizeof file, "%s/trace.attempt-%d.db", dir, k);
    struct stat s1;
    cr_assert_eq(stat(file, &s1), 0, "%s missing", file);
    char *text = distview(0, "summary", "--attempt", kk, out);
    snprintf(want, sizeof want, "attempt %d of job rs (restart %d; at most 2 restarts;", k, k);
    cr_assert(strstr(text, want), "want '%s' in:\n%s", want, text);
    snprintf(want, sizeof want, "job rs.attempt-%d (merged file)", k);
    cr_assert(strstr(text, want), "want '%s' in:\n%s", want, text);
    text = distview(k < 2 ? 12 : 0, "diagnose", "--attempt", kk, out);
    cr_assert(strstr(text, k < 2 ? "exit 12" : "success (exit 0)"), "attempt %d:\n%s", k, text);
  }
  struct stat a, b;
  snprintf(file, sizeof file, "%s/trace.attempt-2.db", dir);
  cr_assert_eq(stat(out, &a), 0);
  cr_assert_eq(stat(file, &b), 0);
  cr_assert_eq(a.st_ino, b.st_ino, "trace.db is not the last attempt's file");
  /* An attempt that was not kept is named with those that were. */
  static dist_proc v;
  st = dist_proc_runl(&v, NULL, 30000, dist_test_bin("distview"), "summary", "--attempt", "3",
                      out, NULL);
  cr_assert_eq(st, 1, "exit %d", st);
  cr_assert(strstr(ERR(&v), "trace.attempt-3.db does not exist (the job kept attempts 0 to 2)"),
            "%s", ERR(&v));
}

Test(monitor_distrun_torchrun, one_restart_ends_with_the_second_failures_status,
     .timeout = 180) {
  dist_test_clean_launch_env();
  char *dir = tmpdir();
  static dist_proc p;
  int st = run_restarts(&p, dir, "1");
  cr_assert_eq(st, 12, "exit %d\n%s", st, ERR(&p));
  cr_assert(strstr(ERR(&p), "distrun: attempt 1: exit status 12 (a rank died): rank 1 "), "%s",
            ERR(&p));
  cr_assert(strstr(ERR(&p), "distrun: 2 attempts (--max-restarts 1); the job's exit status is "
                            "the last attempt's, 12:\n"), "%s", ERR(&p));
  cr_assert_eq(dist_test_count(ERR(&p), "restarting every rank"), 1, "%s", ERR(&p));
  char file[128];
  snprintf(file, sizeof file, "%s/trace.attempt-2.db", dir);
  cr_assert_eq(access(file, F_OK), -1, "a third attempt ran");
}

/* --- c10d rendezvous by endpoint (loopback, distinct node ranks) ------------- */

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>

static int free_port(void) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t len = sizeof a;
  cr_assert_eq(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
  cr_assert_eq(getsockname(fd, (struct sockaddr *)&a, &len), 0);
  close(fd);
  return ntohs(a.sin_port);
}

/* A distrun node of a c10d job at 127.0.0.1:port with no --node-rank. */
static void start_c10d_node(dist_proc *p, int port, const char *mode) {
  static char ep[2][32];
  static int k;
  char *e = ep[k++ % 2];
  snprintf(e, sizeof ep[0], "127.0.0.1:%d", port);
  const char *argv[] = {dist_test_bin("distrun"), "--nnodes", "2:2", "--nproc-per-node", "2",
                        "--rdzv-backend", "c10d", "--rdzv-endpoint", e, "--rdzv-id", "c10djob",
                        dist_test_bin("distrun_testprog"), mode, NULL};
  const char *env[] = {"DIST_TOKEN=c10d-test-token", NULL};
  dist_proc_start(p, argv, env);
}

Test(monitor_distrun_torchrun, c10d_nodes_without_node_ranks_number_themselves_by_arrival,
     .timeout = 90) {
  dist_test_clean_launch_env();
  int port = free_port();
  static dist_proc n[2];
  start_c10d_node(&n[0], port, "demo");
  start_c10d_node(&n[1], port, "demo");
  dist_proc_finish_all(n, 2, 0, 60000);
  for (int i = 0; i < 2; i++)
    cr_assert_eq(n[i].status, 0, "node %d: exit %d\n%s\n%s", i, n[i].status, OUT(&n[i]),
                 ERR(&n[i]));
  /* every global rank ran once, and read every other's key: one job of 4 */
  char all[2 * DIST_PROC_CAP + 2];
  snprintf(all, sizeof all, "%s%s", OUT(&n[0]), OUT(&n[1]));
  for (int r = 0; r < 4; r++) {
    char want[128];
    snprintf(want, sizeof want, "rank %d of 4 (local %d of 2, job c10djob)", r, r % 2);
    cr_assert_eq(dist_test_count(all, want), 4, "'%s' x4 in:\n%s", want, all);
  }
  /* node 0 is whichever hosts the endpoint; the other is node 1 */
  bool n0_hosts = strstr(OUT(&n[0]), "[0] rank 0 of 4") != NULL;
  cr_assert(strstr(OUT(&n[n0_hosts ? 1 : 0]), "[2] rank 2 of 4"), "%s", all);
}

Test(monitor_distrun_torchrun, a_c10d_node_beyond_nnodes_is_told_the_job_is_full,
     .timeout = 90) {
  dist_test_clean_launch_env();
  int port = free_port();
  static dist_proc n[3];
  start_c10d_node(&n[0], port, "wait");
  start_c10d_node(&n[1], port, "wait");
  cr_assert(dist_proc_wait_for(&n[0], 0, "ready pid=", 2, 30000), "%s", ERR(&n[0]));
  cr_assert(dist_proc_wait_for(&n[1], 0, "ready pid=", 2, 30000), "%s", ERR(&n[1]));
  start_c10d_node(&n[2], port, "wait");
  int st = dist_proc_finish(&n[2], 30000);
  cr_assert_eq(st, 13, "a third node: exit %d\n%s", st, ERR(&n[2]));
  cr_assert(strstr(ERR(&n[2]), "has its 2 nodes (--nnodes) already; this node arrived as "
                               "number 3"), "%s", ERR(&n[2]));
  cr_assert_eq(dist_test_count(OUT(&n[2]), "ready pid="), 0, "%s", OUT(&n[2]));
  kill(n[0].pid, SIGTERM); /* ends the job on both nodes */
  dist_proc_finish_all(n, 2, 0, 30000);
  cr_assert_eq(n[0].status, 1, "%s", ERR(&n[0]));
  cr_assert(n[1].status == 1 || n[1].status == 12, "node 1: %d\n%s", n[1].status, ERR(&n[1]));
}

/* DIST_TRACE=1 turns the recorder on in its default place, as a user who
 * writes it means: ./dist-trace, merged into ./trace.db; no directory "1". */
Test(monitor_distrun_torchrun, DIST_TRACE_1_records_in_the_default_directory, .timeout = 120) {
  dist_test_clean_launch_env();
  char *dir = tmpdir();
  cr_assert_eq(chdir(dir), 0, "chdir %s: %s", dir, strerror(errno));
  static dist_proc p;
  const char *env[] = {"DIST_TRACE=1", NULL};
  const char *argv[] = {dist_test_bin("distrun"), "-n", "2", "--rdzv-id", "one",
                        dist_test_bin("distrun_restartprog"), "fail-until", "0", "3", NULL};
  int st = dist_proc_run(&p, argv, env, 60000);
  cr_assert_eq(st, 0, "exit %d\n%s", st, ERR(&p));
  struct stat s;
  cr_assert_eq(stat("dist-trace/one", &s), 0, "no dist-trace/one in %s:\n%s", dir, ERR(&p));
  cr_assert_eq(stat("trace.db", &s), 0, "no trace.db in %s:\n%s", dir, ERR(&p));
  cr_assert_neq(stat("1", &s), 0, "DIST_TRACE=1 made a directory \"1\" in %s", dir);
  char *text = distview(0, "summary", "trace.db", NULL, NULL);
  cr_assert(strstr(text, "job one"), "%s", text);
}
