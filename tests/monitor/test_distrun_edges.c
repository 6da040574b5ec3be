/* ctest: labels=unit timeout=120 */
/* distrun at its edges: watcher events that a read splits across two
 * chunks arrive whole, and under SLURM two steps of one job that share
 * node 0 get different store ports (the formula --help states). */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../monitor/src/distrun_lines.c"

/* --- lines ------------------------------------------------------------------ */

static char got[64][128];
static int n_got;

static void collect(void *arg, char *line) {
  (void)arg;
  if (n_got < 64)
    snprintf(got[n_got++], sizeof got[0], "%s", line);
}

Test(monitor_distrun_edges, events_split_across_reads_arrive_whole, .timeout = 10) {
  const char *stream = "lost store gone\ndone 1 0\ndone 2 12\n";
  size_t total = strlen(stream);
  /* Every way of cutting the stream into two reads gives the same events. */
  for (size_t cut = 1; cut < total; cut++) {
    char buf[64];
    size_t len = 0;
    n_got = 0;
    memcpy(buf, stream, cut);
    len = cut;
    dist__run_take_lines(buf, &len, sizeof buf, collect, NULL);
    memcpy(buf + len, stream + cut, total - cut);
    len += total - cut;
    dist__run_take_lines(buf, &len, sizeof buf, collect, NULL);
    cr_assert_eq(n_got, 3, "cut at %zu: %d events", cut, n_got);
    cr_assert_str_eq(got[0], "lost store gone", "cut at %zu", cut);
    cr_assert_str_eq(got[1], "done 1 0", "cut at %zu", cut);
    cr_assert_str_eq(got[2], "done 2 12", "cut at %zu", cut);
    cr_assert_eq(len, 0);
  }
}

Test(monitor_distrun_edges, a_line_longer_than_the_buffer_is_passed_not_lost, .timeout = 10) {
  char buf[8];
  size_t len = 7;
  memcpy(buf, "abcdefg", 7);
  n_got = 0;
  dist__run_take_lines(buf, &len, sizeof buf, collect, NULL);
  cr_assert_eq(n_got, 1);
  cr_assert_str_eq(got[0], "abcdefg");
  cr_assert_eq(len, 0);
}

/* --- SLURM ports ------------------------------------------------------------- */

static const char *bin(const char *name) {
  static char paths[2][1024];
  static int next;
  char *p = paths[next++ % 2];
  snprintf(p, sizeof paths[0], "%s/%s", getenv("DIST_TEST_BIN"), name);
  return p;
}

/* Starts node 0 of a two-node SLURM job (step `step`) running the env
 * program; returns its pid, its stdout in *out. */
static pid_t start_step(long job, int step, FILE **out) {
  int o[2];
  cr_assert_eq(pipe(o), 0);
  pid_t p = fork();
  if (p == 0) {
    char id[32], st[16];
    snprintf(id, sizeof id, "%ld", job);
    snprintf(st, sizeof st, "%d", step);
    setenv("SLURM_JOB_ID", id, 1);
    setenv("SLURM_STEP_ID", st, 1);
    setenv("SLURM_NNODES", "2", 1);
    setenv("SLURM_NODEID", "0", 1);
    setenv("SLURM_NTASKS_PER_NODE", "1", 1);
    setenv("SLURM_JOB_NODELIST", "localhost,othernode", 1);
    setenv("DIST_TOKEN", "secret", 1);
    unsetenv("MASTER_PORT");
    unsetenv("MASTER_ADDR");
    dup2(o[1], 1);
    close(o[0]);
    close(o[1]);
    execl(bin("distrun"), "distrun", bin("distrun_testprog"), "env", (char *)NULL);
    _exit(127);
  }
  close(o[1]);
  *out = fdopen(o[0], "r");
  return p;
}

/* The port= field of the rank's env line. */
static int read_port(FILE *f) {
  char line[1024];
  while (fgets(line, sizeof line, f)) {
    const char *p = strstr(line, " port=");
    if (p)
      return atoi(p + 6);
  }
  return -1;
}

Test(monitor_distrun_edges, two_steps_of_one_slurm_job_on_one_node_get_different_ports,
     .timeout = 60) {
  long job = 100000 + getpid() % 100000;
  FILE *f0, *f1;
  pid_t p0 = start_step(job, 0, &f0);
  pid_t p1 = start_step(job, 1, &f1);
  int port0 = read_port(f0), port1 = read_port(f1);
  /* The rank has exited; node 0 would wait for node 1 to end. */
  kill(p0, SIGKILL);
  kill(p1, SIGKILL);
  waitpid(p0, NULL, 0);
  waitpid(p1, NULL, 0);
  fclose(f0);
  fclose(f1);
  cr_assert_eq(port0, 20000 + (int)(((job % 10000) * 131 + 0) % 10000), "step 0 on %d", port0);
  cr_assert_eq(port1, 20000 + (int)(((job % 10000) * 131 + 1) % 10000), "step 1 on %d", port1);
}

Test(monitor_distrun_edges, help_states_the_slurm_port, .timeout = 10) {
  char cmd[1200];
  snprintf(cmd, sizeof cmd, "%s --help", bin("distrun"));
  FILE *f = popen(cmd, "r");
  cr_assert(f);
  char text[16384];
  size_t n = fread(text, 1, sizeof text - 1, f);
  text[n] = '\0';
  pclose(f);
  cr_assert(strstr(text, "20000 + (SLURM_JOB_ID x 131 + SLURM_STEP_ID) mod 10000"), "%s", text);
}
