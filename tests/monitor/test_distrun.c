/* ctest: labels=multiproc,san_address timeout=300 cost=25 */
/* test_distrun.c - build/bin/distrun on real programs: store_demo with 4
 * ranks, a rank killed with SIGKILL, a rank exiting with a code, a missing
 * program, output prefixes and log files, SIGTERM forwarding, the rank
 * environment (the token only there), SLURM variables, and two "nodes" on
 * this machine. The rank program is distrun_testprog (prog_distrun.c). */
#include <criterion/criterion.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "proc.h"
#include "tmpdir.h"

#define OUT(p) DIST_PROC_OUT(p)
#define ERR(p) DIST_PROC_ERR(p)

static void clean_env(void) { dist_test_clean_launch_env(); }

/* --- the acceptance test -------------------------------------------------- */

Test(monitor_distrun, store_demo_every_rank_reads_all_others, .timeout = 60) {
  clean_env();
  static dist_proc p;
  const char *argv[] = {dist_test_bin("distrun"), "--nproc-per-node", "4",
                        dist_test_bin("store_demo"), NULL};
  int st = dist_proc_run(&p, argv, NULL, 45000);
  cr_assert_eq(st, 0, "exit %d\nstdout:\n%s\nstderr:\n%s", st, OUT(&p), ERR(&p));
  for (int r = 0; r < 4; r++) {
    char line[128];
    snprintf(line, sizeof line, "[%d] rank %d of 4 read all 4 keys\n", r, r);
    cr_expect(strstr(OUT(&p), line), "missing '%s' in:\n%s", line, OUT(&p));
    for (int peer = 0; peer < 4; peer++) {
      snprintf(line, sizeof line, "[%d] rank %d read demo/rank/%d = hello from rank %d", r,
               r, peer, peer);
      cr_expect(strstr(OUT(&p), line), "missing '%s' in:\n%s", line, OUT(&p));
    }
  }
}

Test(monitor_distrun, store_demo_runs_without_distrun_too, .timeout = 60) {
  clean_env();
  static dist_proc p[3];
  char port[16];
  snprintf(port, sizeof port, "%d", 20000 + getpid() % 10000);
  setenv("MASTER_ADDR", "127.0.0.1", 1);
  setenv("MASTER_PORT", port, 1);
  setenv("WORLD_SIZE", "3", 1);
  const char *argv[] = {dist_test_bin("store_demo"), NULL};
  for (int r = 0; r < 3; r++) {
    char v[8];
    snprintf(v, sizeof v, "%d", r);
    setenv("RANK", v, 1);
    dist_proc_start(&p[r], argv, NULL);
  }
  for (int r = 0; r < 3; r++) {
    int st = dist_proc_finish(&p[r], 40000);
    char want[64];
    snprintf(want, sizeof want, "rank %d of 3 read all 3 keys\n", r);
    cr_expect_eq(st, 0, "rank %d: exit %d\n%s", r, st, ERR(&p[r]));
    cr_expect(strstr(OUT(&p[r]), want), "%s", OUT(&p[r]));
  }
}

/* --- failures ------------------------------------------------------------- */

Test(monitor_distrun, a_rank_killed_with_sigkill_exits_12_naming_it, .timeout = 60) {
  clean_env();
  static dist_proc p;
  const char *argv[] = {dist_test_bin("distrun"),          "-n",    "4",
                        dist_test_bin("distrun_testprog"), "block", NULL};
  dist_proc_start(&p, argv, NULL);
  cr_assert(dist_proc_wait_for(&p, 0, "ready pid=", 4, 30000), "ranks not ready:\n%s\n%s", OUT(&p),
            ERR(&p));
  const char *at = strstr(OUT(&p), "[2] ready pid=");
  cr_assert(at, "%s", OUT(&p));
  pid_t victim = (pid_t)atoi(at + strlen("[2] ready pid="));
  cr_assert_gt(victim, 1);
  int64_t t0 = dist_test_now_ms();
  cr_assert_eq(kill(victim, SIGKILL), 0);
  int st = dist_proc_finish(&p, 20000);
  int64_t took = p.exited_ms - t0;
  cr_log_info("distrun exited %lld ms after the SIGKILL", (long long)took);
  cr_expect_eq(st, 12, "exit %d\n%s", st, ERR(&p));
  cr_expect_lt(took, 3000, "distrun took %lld ms to end the job", (long long)took);
  cr_expect(strstr(ERR(&p), "rank 2 (pid ") &&
                strstr(ERR(&p), "failed first: killed by signal 9 (SIGKILL)"),
            "%s", ERR(&p));
  cr_expect(strstr(ERR(&p), "exit status 12 (a rank died)"), "%s", ERR(&p));
}

/* The ranks that lose their peer exit (2) before the killed rank's own
 * exit is reported; distrun still names the killed one. */
Test(monitor_distrun, a_killed_rank_is_named_before_the_ranks_it_took_down, .timeout = 120) {
  clean_env();
  for (int round = 0; round < 5; round++) {
    static dist_proc p;
    const char *argv[] = {
        dist_test_bin("distrun"), "-n", "4", dist_test_bin("distrun_testprog"), "react", "1", NULL};
    dist_proc_start(&p, argv, NULL);
    int st = dist_proc_finish(&p, 30000);
    cr_expect_eq(st, 12, "round %d: exit %d\n%s", round, st, ERR(&p));
    cr_expect(strstr(ERR(&p), "rank 1 (pid ") &&
                  strstr(ERR(&p), "failed first: killed by signal 9 (SIGKILL)"),
              "round %d:\n%s", round, ERR(&p));
  }
}

Test(monitor_distrun, a_rank_exit_code_is_reported, .timeout = 60) {
  clean_env();
  static dist_proc p;
  const char *argv[] = {dist_test_bin("distrun"), "-n", "3", "--grace-period", "2",
                        dist_test_bin("distrun_testprog"), "exit", "1", "3", NULL};
  int st = dist_proc_run(&p, argv, NULL, 30000);
  cr_expect_eq(st, 12, "exit %d\n%s", st, ERR(&p));
  cr_expect(strstr(ERR(&p), "rank 1 (pid ") && strstr(ERR(&p), "exited with code 3"), "%s",
            ERR(&p));
  cr_expect(!strstr(ERR(&p), "rank 0 (pid"), "only rank 1 failed:\n%s", ERR(&p));
}

Test(monitor_distrun, ranks_that_ignore_sigterm_get_sigkill_after_the_grace, .timeout = 60) {
  clean_env();
  static dist_proc p;
  const char *argv[] = {dist_test_bin("distrun"), "-n", "3", "--grace-period", "0.5",
                        dist_test_bin("distrun_testprog"), "stubborn", "0", "4", NULL};
  dist_proc_start(&p, argv, NULL);
  cr_assert(dist_proc_wait_for(&p, 0, "ready pid=", 2, 30000), "%s\n%s", OUT(&p), ERR(&p));
  int64_t t0 = dist_test_now_ms();
  int st = dist_proc_finish(&p, 20000);
  int64_t took = p.exited_ms - t0;
  cr_expect_eq(st, 12, "exit %d\n%s", st, ERR(&p));
  cr_expect(took >= 300 && took < 3000, "ended after %lld ms with a grace of 500",
            (long long)took);
  cr_expect(strstr(ERR(&p), "2 ranks still running after the grace period: SIGKILL"), "%s",
            ERR(&p));
  cr_expect(strstr(ERR(&p), "rank 0 (pid ") && strstr(ERR(&p), "exited with code 4"), "%s",
            ERR(&p));
}

Test(monitor_distrun, the_death_is_posted_in_the_store, .timeout = 60) {
  clean_env();
  static dist_proc p;
  const char *argv[] = {dist_test_bin("distrun"), "-n", "3", dist_test_bin("distrun_testprog"),
                        "watch", "1", "7", NULL};
  int st = dist_proc_run(&p, argv, NULL, 40000);
  cr_expect_eq(st, 12, "exit %d\n%s\n%s", st, OUT(&p), ERR(&p));
  cr_expect(strstr(OUT(&p), "[0] saw: rank 1 died: exited with code 7"), "%s", OUT(&p));
  cr_expect(strstr(OUT(&p), "[2] saw: rank 1 died: exited with code 7"), "%s", OUT(&p));
}

Test(monitor_distrun, a_missing_program_is_a_launch_failure, .timeout = 30) {
  clean_env();
  static dist_proc p;
  const char *a1[] = {dist_test_bin("distrun"), "-n", "2", "/nonexistent/prog", NULL};
  int st = dist_proc_run(&p, a1, NULL, 20000);
  cr_expect_eq(st, 13, "exit %d\n%s", st, ERR(&p));
  cr_expect(strstr(ERR(&p), "cannot run '/nonexistent/prog': No such file or directory"),
            "%s", ERR(&p));
  const char *a2[] = {dist_test_bin("distrun"), "-n", "2", "no-such-program-xyz", NULL};
  st = dist_proc_run(&p, a2, NULL, 20000);
  cr_expect_eq(st, 13, "exit %d\n%s", st, ERR(&p));
  cr_expect(strstr(ERR(&p), "(searched PATH)"), "%s", ERR(&p));
  const char *a3[] = {dist_test_bin("distrun"), "-n", "1", "/etc/hostname", NULL};
  st = dist_proc_run(&p, a3, NULL, 20000);
  cr_expect_eq(st, 13, "a file that is not executable: exit %d\n%s", st, ERR(&p));
}

Test(monitor_distrun, usage_errors_exit_2_and_help_exits_0, .timeout = 30) {
  clean_env();
  static dist_proc p;
  const char *a1[] = {dist_test_bin("distrun"), "--bogus", "x", NULL};
  cr_expect_eq(dist_proc_run(&p, a1, NULL, 10000), 2, "%s", ERR(&p));
  cr_expect(strstr(ERR(&p), "bogus") && strstr(ERR(&p), "--help"), "%s", ERR(&p));
  const char *a2[] = {dist_test_bin("distrun"), "-n", "two", "x", NULL};
  cr_expect_eq(dist_proc_run(&p, a2, NULL, 10000), 2, "%s", ERR(&p));
  cr_expect(strstr(ERR(&p), "--nproc-per-node needs a number in [1, 1048576], auto, cpu or gpu, "
                            "got 'two'"), "%s", ERR(&p));
  const char *a3[] = {dist_test_bin("distrun"), "-n", "2", NULL};
  cr_expect_eq(dist_proc_run(&p, a3, NULL, 10000), 2, "%s", ERR(&p));
  cr_expect(strstr(ERR(&p), "no program to run"), "%s", ERR(&p));
  const char *a4[] = {dist_test_bin("distrun"), "--nnodes", "2", "x", NULL};
  cr_expect_eq(dist_proc_run(&p, a4, NULL, 10000), 2, "%s", ERR(&p));
  cr_expect(strstr(ERR(&p), "--master-addr"), "%s", ERR(&p));
  const char *a5[] = {dist_test_bin("distrun"), "--help", NULL};
  cr_expect_eq(dist_proc_run(&p, a5, NULL, 10000), 0);
  cr_expect(strstr(OUT(&p), "usage: distrun") && strstr(OUT(&p), "Exit status"), "%s",
            OUT(&p));
}

/* --- output --------------------------------------------------------------- */

Test(monitor_distrun, output_lines_carry_the_rank_prefix, .timeout = 30) {
  clean_env();
  static dist_proc p;
  const char *argv[] = {dist_test_bin("distrun"),          "-n",    "2",
                        dist_test_bin("distrun_testprog"), "lines", NULL};
  cr_assert_eq(dist_proc_run(&p, argv, NULL, 20000), 0, "%s", ERR(&p));
  for (int r = 0; r < 2; r++) {
    char want[64];
    snprintf(want, sizeof want, "[%d] out line 1\n[%d] out line 2\n", r, r);
    cr_expect(strstr(OUT(&p), want), "no '%s' in:\n%s", want, OUT(&p));
    snprintf(want, sizeof want, "[%d] partial\n", r);
    cr_expect(strstr(OUT(&p), want), "no '%s' in:\n%s", want, OUT(&p));
    snprintf(want, sizeof want, "[%d] err line 1\n", r);
    cr_expect(strstr(ERR(&p), want), "no '%s' in:\n%s", want, ERR(&p));
  }
  const char *np[] = {dist_test_bin("distrun"),          "-n",    "2", "--no-prefix",
                      dist_test_bin("distrun_testprog"), "lines", NULL};
  cr_assert_eq(dist_proc_run(&p, np, NULL, 20000), 0, "%s", ERR(&p));
  cr_expect_eq(dist_test_count(OUT(&p), "out line 1\n"), 2, "%s", OUT(&p));
  cr_expect(!strchr(OUT(&p), '['), "--no-prefix still prefixes:\n%s", OUT(&p));
}

static void read_file(const char *path, char *out, size_t cap) {
  out[0] = '\0';
  FILE *f = fopen(path, "r");
  cr_assert(f, "cannot open %s", path);
  size_t n = fread(out, 1, cap - 1, f);
  out[n] = '\0';
  fclose(f);
}

Test(monitor_distrun, log_dir_keeps_per_rank_files, .timeout = 30) {
  clean_env();
  static dist_proc p;
  char dir[] = "/tmp/distrun-logs-XXXXXX";
  cr_assert(dist_test_mkdtemp(dir));
  char sub[128], path[256], text[1024];
  snprintf(sub, sizeof sub, "%s/logs", dir);
  const char *argv[] = {dist_test_bin("distrun"),          "-n",    "2", "--log-dir", sub,
                        dist_test_bin("distrun_testprog"), "lines", NULL};
  cr_assert_eq(dist_proc_run(&p, argv, NULL, 20000), 0, "%s", ERR(&p));
  cr_expect(!strstr(OUT(&p), "out line"), "without --tee the terminal stays quiet:\n%s",
            OUT(&p));
  for (int r = 0; r < 2; r++) {
    snprintf(path, sizeof path, "%s/rank-%d.out", sub, r);
    read_file(path, text, sizeof text);
    cr_expect_str_eq(text, "out line 1\nout line 2\npartial");
    snprintf(path, sizeof path, "%s/rank-%d.err", sub, r);
    read_file(path, text, sizeof text);
    cr_expect_str_eq(text, "err line 1\n");
  }
  const char *tee[] = {dist_test_bin("distrun"), "-n", "2", "--log-dir", sub, "--tee",
                       dist_test_bin("distrun_testprog"), "lines", NULL};
  cr_assert_eq(dist_proc_run(&p, tee, NULL, 20000), 0, "%s", ERR(&p));
  cr_expect(strstr(OUT(&p), "[1] out line 2\n"), "--tee shows the output:\n%s", OUT(&p));
  snprintf(path, sizeof path, "%s/rank-1.out", sub);
  read_file(path, text, sizeof text);
  cr_expect_str_eq(text, "out line 1\nout line 2\npartial");
  snprintf(text, sizeof text, "rm -rf '%s'", dir);
  cr_expect_eq(system(text), 0);
}

/* --- signals and environment ---------------------------------------------- */

Test(monitor_distrun, sigterm_to_distrun_is_forwarded, .timeout = 60) {
  clean_env();
  static dist_proc p;
  const char *argv[] = {dist_test_bin("distrun"),          "-n",   "3",
                        dist_test_bin("distrun_testprog"), "wait", NULL};
  dist_proc_start(&p, argv, NULL);
  cr_assert(dist_proc_wait_for(&p, 0, "ready pid=", 3, 30000), "%s\n%s", OUT(&p), ERR(&p));
  cr_assert_eq(kill(p.pid, SIGTERM), 0);
  int st = dist_proc_finish(&p, 20000);
  cr_expect_eq(st, 1, "exit %d\n%s", st, ERR(&p));
  for (int r = 0; r < 3; r++) {
    char want[32];
    snprintf(want, sizeof want, "[%d] got SIGTERM\n", r);
    cr_expect(strstr(OUT(&p), want), "no '%s':\n%s", want, OUT(&p));
  }
  cr_expect(strstr(ERR(&p), "got SIGTERM: forwarding it to the ranks"), "%s", ERR(&p));
}

static bool file_has(const char *path, const char *needle, size_t nlen) {
  static char buf[1 << 16];
  int fd = open(path, O_RDONLY);
  if (fd < 0)
    return false;
  ssize_t n = read(fd, buf, sizeof buf);
  close(fd);
  for (ssize_t i = 0; n > 0 && i + (ssize_t)nlen <= n; i++)
    if (memcmp(buf + i, needle, nlen) == 0)
      return true;
  return false;
}

static void check_rank_env(pid_t pid, int rank) {
  char path[64], want[64];
  snprintf(path, sizeof path, "/proc/%d/environ", (int)pid);
  const char *fixed[] = {"WORLD_SIZE=2", "LOCAL_WORLD_SIZE=2", "MASTER_ADDR=127.0.0.1",
                         "DIST_USE_AGENT_STORE=1", "DIST_LAUNCHER=distrun", "MASTER_PORT=",
                         "DIST_JOB_ID="};
  for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++)
    cr_expect(file_has(path, fixed[i], strlen(fixed[i]) + (fixed[i][strlen(fixed[i]) - 1] != '=')),
              "rank %d lacks %s", rank, fixed[i]);
  snprintf(want, sizeof want, "RANK=%d", rank);
  cr_expect(file_has(path, want, strlen(want) + 1), "rank %d lacks %s", rank, want);
  snprintf(want, sizeof want, "LOCAL_RANK=%d", rank);
  cr_expect(file_has(path, want, strlen(want) + 1), "rank %d lacks %s", rank, want);
}

/* The token from a rank's environment (64 hex digits). */
static void rank_token(pid_t pid, char *tok) {
  char path[64];
  static char env[1 << 16];
  snprintf(path, sizeof path, "/proc/%d/environ", (int)pid);
  int fd = open(path, O_RDONLY);
  cr_assert(fd >= 0);
  ssize_t n = read(fd, env, sizeof env - 1);
  close(fd);
  cr_assert(n > 0);
  tok[0] = '\0';
  for (ssize_t i = 0; i < n; i += (ssize_t)strlen(env + i) + 1)
    if (strncmp(env + i, "DIST_TOKEN=", 11) == 0)
      snprintf(tok, 129, "%s", env + i + 11);
}

Test(monitor_distrun, ranks_get_their_environment_and_the_token_only_there, .timeout = 60) {
  clean_env();
  static dist_proc p;
  const char *argv[] = {dist_test_bin("distrun"),          "-n",   "2",
                        dist_test_bin("distrun_testprog"), "wait", NULL};
  dist_proc_start(&p, argv, NULL);
  cr_assert(dist_proc_wait_for(&p, 0, "ready pid=", 2, 30000), "%s\n%s", OUT(&p), ERR(&p));
  char tok[2][129];
  for (int r = 0; r < 2; r++) {
    char tag[32];
    snprintf(tag, sizeof tag, "[%d] ready pid=", r);
    const char *at = strstr(OUT(&p), tag);
    cr_assert(at);
    pid_t pid = (pid_t)atoi(at + strlen(tag));
    check_rank_env(pid, r);
    rank_token(pid, tok[r]);
    cr_expect_eq(strlen(tok[r]), 64, "rank %d token '%s'", r, tok[r]);
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/cmdline", (int)pid);
    cr_expect(!file_has(path, tok[r], strlen(tok[r])), "the token is on rank %d's command line",
              r);
  }
  cr_expect_str_eq(tok[0], tok[1]);
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/cmdline", (int)p.pid);
  cr_expect(!file_has(path, tok[0], strlen(tok[0])), "the token is on distrun's command line");
  kill(p.pid, SIGTERM);
  cr_expect_eq(dist_proc_finish(&p, 20000), 1);
  /* A second job gets a fresh token and job id. */
  const char *env[] = {dist_test_bin("distrun"),          "-n",  "1",
                       dist_test_bin("distrun_testprog"), "env", NULL};
  cr_assert_eq(dist_proc_run(&p, env, NULL, 20000), 0, "%s", ERR(&p));
  cr_expect(strstr(OUT(&p), "[0] env rank=0 world=1 local=0 lws=1 addr=127.0.0.1 port="),
            "%s", OUT(&p));
  cr_expect(strstr(OUT(&p), "agent=1 node=0 nnodes=1 launcher=distrun token_len=64"), "%s",
            OUT(&p));
}

/* --- SLURM and several nodes ---------------------------------------------- */

Test(monitor_distrun, slurm_variables_fill_in_the_job, .timeout = 30) {
  clean_env();
  setenv("SLURM_JOB_ID", "4242", 1);
  setenv("SLURM_STEP_ID", "3", 1);
  setenv("SLURM_NNODES", "1", 1);
  setenv("SLURM_NODEID", "0", 1);
  setenv("SLURM_NTASKS_PER_NODE", "3(x1)", 1);
  setenv("SLURM_JOB_NODELIST", "localhost", 1);
  static dist_proc p;
  const char *argv[] = {dist_test_bin("distrun"), dist_test_bin("distrun_testprog"), "env", NULL};
  cr_assert_eq(dist_proc_run(&p, argv, NULL, 20000), 0, "%s", ERR(&p));
  cr_expect_eq(dist_test_count(OUT(&p), "env rank="), 3, "%s", OUT(&p));
  cr_expect(strstr(OUT(&p), "[2] env rank=2 world=3 local=2 lws=3"), "%s", OUT(&p));
  cr_expect_eq(dist_test_count(OUT(&p), "job=slurm-4242.3 "), 3, "%s", OUT(&p));
  /* The command line wins over SLURM. */
  const char *two[] = {dist_test_bin("distrun"),          "-n",  "2",
                       dist_test_bin("distrun_testprog"), "env", NULL};
  cr_assert_eq(dist_proc_run(&p, two, NULL, 20000), 0, "%s", ERR(&p));
  cr_expect_eq(dist_test_count(OUT(&p), "env rank="), 2, "%s", OUT(&p));
}

static bool port_free(uint16_t port) {
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  bool ok = fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0;
  if (fd >= 0)
    close(fd);
  return ok;
}

/* Two distruns on this machine, as nodes 0 and 1 of SLURM job `job`. */
static void start_slurm_nodes(dist_proc *n0, dist_proc *n1, long job, const char *mode,
                              const char *a, const char *b) {
  char id[32];
  snprintf(id, sizeof id, "%ld", job);
  setenv("SLURM_JOB_ID", id, 1);
  setenv("SLURM_NNODES", "2", 1);
  setenv("SLURM_NTASKS_PER_NODE", "2", 1);
  setenv("SLURM_JOB_NODELIST", "localhost,othernode", 1);
  setenv("DIST_TOKEN", "shared-secret-of-both-nodes", 1);
  setenv("DIST_TIMEOUT", "20", 1);
  const char *argv[] = {
      dist_test_bin("distrun"), dist_test_bin("distrun_testprog"), mode, a, b, NULL};
  setenv("SLURM_NODEID", "0", 1);
  dist_proc_start(n0, argv, NULL);
  setenv("SLURM_NODEID", "1", 1);
  dist_proc_start(n1, argv, NULL);
}

static long free_slurm_job(void) {
  srand((unsigned)getpid());
  for (;;) {
    long job = 100000 + rand() % 100000;
    if (port_free((uint16_t)(20000 + (job % 10000) * 131 % 10000)))
      return job;
  }
}

Test(monitor_distrun, two_slurm_nodes_run_one_job, .timeout = 60) {
  clean_env();
  static dist_proc n0, n1;
  long job = free_slurm_job();
  start_slurm_nodes(&n0, &n1, job, "demo", NULL, NULL);
  int s1 = dist_proc_finish(&n1, 40000), s0 = dist_proc_finish(&n0, 40000);
  cr_expect_eq(s0, 0, "node 0: %d\n%s\n%s", s0, OUT(&n0), ERR(&n0));
  cr_expect_eq(s1, 0, "node 1: %d\n%s\n%s", s1, OUT(&n1), ERR(&n1));
  char want[160];
  for (int r = 0; r < 4; r++) {
    dist_proc *p = r < 2 ? &n0 : &n1;
    for (int k = 0; k < 4; k++) {
      snprintf(want, sizeof want,
               "[%d] rank %d of 4 (local %d of 2, job slurm-%ld) read test/demo/%d = value "
               "of rank %d\n",
               r, r, r % 2, job, k, k);
      cr_expect(strstr(OUT(p), want), "no '%s' in:\n%s", want, OUT(p));
    }
  }
}

Test(monitor_distrun, a_death_on_one_node_ends_the_other, .timeout = 60) {
  clean_env();
  static dist_proc n0, n1;
  start_slurm_nodes(&n0, &n1, free_slurm_job(), "exit", "3", "5");
  cr_assert(dist_proc_wait_for(&n0, 0, "ready pid=", 2, 30000), "%s\n%s", OUT(&n0), ERR(&n0));
  int s1 = dist_proc_finish(&n1, 30000), s0 = dist_proc_finish(&n0, 30000);
  cr_expect_eq(s1, 12, "node 1: %d\n%s", s1, ERR(&n1));
  cr_expect_eq(s0, 12, "node 0: %d\n%s", s0, ERR(&n0));
  cr_expect(strstr(ERR(&n1), "rank 3 (pid ") && strstr(ERR(&n1), "exited with code 5"), "%s",
            ERR(&n1));
  cr_expect(strstr(ERR(&n0), "rank 3 died: exited with code 5 (on another node)"), "%s",
            ERR(&n0));
  cr_expect(strstr(OUT(&n0), "[0] got SIGTERM") && strstr(OUT(&n0), "[1] got SIGTERM"), "%s",
            OUT(&n0));
}

Test(monitor_distrun, several_nodes_need_a_shared_token, .timeout = 30) {
  clean_env();
  static dist_proc p;
  const char *argv[] = {dist_test_bin("distrun"), "--nnodes", "2", "--node-rank", "0",
                        "--master-addr", "127.0.0.1", "--master-port", "1",
                        dist_test_bin("distrun_testprog"), "env", NULL};
  cr_expect_eq(dist_proc_run(&p, argv, NULL, 10000), 2, "%s", ERR(&p));
  cr_expect(strstr(ERR(&p), "DIST_TOKEN"), "%s", ERR(&p));
}
