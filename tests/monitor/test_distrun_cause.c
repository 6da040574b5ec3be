/* ctest: labels=multiproc timeout=120 */
/* test_distrun_cause.c - the job's cause key end to end: real ranks under
 * build/bin/distrun (rank program distrun_causeprog, prog_cause.c). Two
 * ranks that disagree on an all_reduce count at DIST_DEBUG=OFF (the CPU
 * backend's own size check) make distrun exit 10 with the report last; a
 * cause posted with DIST_E_TIMEOUT makes it exit 11; any other status keeps
 * distrun's own classification (12) with the report still printed last. */
#include <criterion/criterion.h>

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <dist/status.h>

static const char *bin(const char *name) {
  static char paths[4][1024];
  static int next;
  const char *dir = getenv("DIST_TEST_BIN");
  char *p = paths[next++ % 4];
  snprintf(p, 1024, "%s/%s", dir ? dir : "build/bin", name);
  return p;
}

static void clean_env(void) {
  const char *vars[] = {"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR",
                        "MASTER_PORT", "DIST_TOKEN", "DIST_JOB_ID", "DIST_USE_AGENT_STORE",
                        "DIST_ALLOW_NO_TOKEN", "SLURM_JOB_ID", "DIST_DEBUG",
                        "TORCH_DISTRIBUTED_DEBUG", "DIST_TRANSPORT"};
  for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
    unsetenv(vars[i]);
}

static char *slurp(const char *path) {
  static char buf[2][1 << 16];
  static int next;
  char *b = buf[next++ % 2];
  int fd = open(path, O_RDONLY);
  ssize_t n = fd >= 0 ? read(fd, b, sizeof buf[0] - 1) : 0;
  b[n > 0 ? n : 0] = '\0';
  if (fd >= 0)
    close(fd);
  return b;
}

/* Runs argv with stdout and stderr in files; its exit status, or -1 when
 * it did not end within timeout_s (then it is killed). */
static int run(const char *const *argv, int timeout_s, char **out, char **err) {
  char dir[] = "/tmp/dist-cause-XXXXXX", po[64], pe[64];
  cr_assert(mkdtemp(dir));
  snprintf(po, sizeof po, "%s/out", dir);
  snprintf(pe, sizeof pe, "%s/err", dir);
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) { /* no cr_* here: --full-stats reports passing asserts */
    int o = open(po, O_WRONLY | O_CREAT | O_TRUNC, 0600), e = open(pe, O_WRONLY | O_CREAT, 0600);
    dup2(o, 1);
    dup2(e, 2);
    setpgid(0, 0);
    execv(argv[0], (char *const *)argv);
    _exit(127);
  }
  cr_assert_gt(pid, 0);
  int st = -1;
  for (int i = 0; i < timeout_s * 100; i++) {
    if (waitpid(pid, &st, WNOHANG) == pid)
      break;
    st = -1;
    usleep(10 * 1000);
  }
  if (st == -1) {
    kill(-pid, SIGKILL);
    waitpid(pid, NULL, 0);
  }
  *out = slurp(po);
  *err = slurp(pe);
  unlink(po);
  unlink(pe);
  rmdir(dir);
  return st == -1 ? -1 : WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* The text after the last line that starts with "distrun: exit status". */
static const char *after_status_line(const char *err) {
  const char *at = NULL;
  for (const char *p = strstr(err, "distrun: exit status"); p;
       p = strstr(p + 1, "distrun: exit status"))
    at = p;
  if (!at)
    return NULL;
  const char *nl = strchr(at, '\n');
  return nl ? nl + 1 : NULL;
}

static int count(const char *hay, const char *needle) {
  int n = 0;
  for (const char *p = strstr(hay, needle); p; p = strstr(p + 1, needle))
    n++;
  return n;
}

/* Ranks 0..n-1 all_reduce 8 float32 elements, rank 1 16, at OFF over
 * transport: the backend's own size check fails the call with
 * DIST_E_DESYNC, core posts it, distrun exits 10 and prints it last. */
static void count_mismatch(const char *transport, const char *nproc) {
  clean_env();
  setenv("DIST_DEBUG", "OFF", 1);
  setenv("DIST_TRANSPORT", transport, 1);
  const char *argv[] = {bin("distrun"), "-n", nproc, bin("distrun_causeprog"), "desync", "1",
                        "16", NULL};
  char *out, *err;
  int st = run(argv, 60, &out, &err);
  cr_assert_eq(st, 10, "exit %d\nstdout:\n%s\nstderr:\n%s", st, out, err);
  cr_expect(strstr(err, "exit status 10 (desync): desync reported by rank "), "%s", err);
  const char *rep = after_status_line(err);
  cr_assert(rep && *rep, "nothing after the status line:\n%s", err);
  /* The report, and nothing else, follows: it names the rank that posted
   * it and the peer it disagrees with, and both sizes. */
  cr_expect(strncmp(rep, "desync in group 0 (", 19) == 0, "report:\n%s", rep);
  cr_expect(strstr(rep, "at ALL_REDUCE #1: "), "report:\n%s", rep);
  const char *me = strstr(rep, "\n  reported by rank ");
  cr_assert(me, "the report does not say who 'this rank' is:\n%s", rep);
  int by = atoi(me + strlen("\n  reported by rank "));
  cr_expect(by >= 0 && by < atoi(nproc), "report:\n%s", rep);
  /* Both sides in status.h's vocabulary: rank 1's 16 against the others' 8. */
  cr_expect(strstr(rep, "\n  rank 1: ALL_REDUCE float32[16] op=SUM (64 bytes)") &&
            strstr(rep, " ALL_REDUCE float32[8] op=SUM (32 bytes)"), "report:\n%s", rep);
  cr_expect(strstr(rep, "16") && strstr(rep, "(64 bytes)") && strstr(rep, "(32 bytes)"),
            "report:\n%s", rep);
  cr_expect(!strstr(rep, "distrun:") && !strstr(rep, "\n["), "not last:\n%s", rep);
  /* Once by distrun (the ranks' own lines carry their "[R] " prefix). */
  cr_expect_eq(count(err, "\ndesync in group 0 ("), 1, "printed more than once:\n%s", err);
}

Test(monitor_distrun_cause, a_count_mismatch_at_OFF_exits_10_with_the_report_last,
     .timeout = 90) {
  count_mismatch("auto", "2"); /* shared memory */
}

Test(monitor_distrun_cause, a_count_mismatch_over_tcp_exits_10_with_the_report_last,
     .timeout = 90) {
  count_mismatch("tcp", "3");
}

Test(monitor_distrun_cause, a_posted_timeout_exits_11_with_the_report_last, .timeout = 90) {
  clean_env();
  const char *argv[] = {bin("distrun"), "-n", "3", bin("distrun_causeprog"), "post", "2", "3",
                        NULL}; /* 3: DIST_E_TIMEOUT */
  cr_assert_eq(DIST_E_TIMEOUT, 3);
  char *out, *err;
  int st = run(argv, 60, &out, &err);
  cr_assert_eq(st, 11, "exit %d\nstdout:\n%s\nstderr:\n%s", st, out, err);
  cr_expect(strstr(err, "exit status 11 (hang): hang reported by rank 2; rank 2 (pid "), "%s",
            err);
  const char *rep = after_status_line(err);
  cr_assert(rep, "%s", err);
  cr_expect_str_eq(rep, "test diagnosis: rank 2 posted status 3\n  second line\n");
}

Test(monitor_distrun_cause, another_posted_status_keeps_12_and_prints_the_report,
     .timeout = 90) {
  clean_env();
  const char *argv[] = {bin("distrun"), "-n", "2", bin("distrun_causeprog"), "post", "0", "5",
                        NULL}; /* 5: DIST_E_PEER_LOST */
  cr_assert_eq(DIST_E_PEER_LOST, 5);
  char *out, *err;
  int st = run(argv, 60, &out, &err);
  cr_assert_eq(st, 12, "exit %d\nstdout:\n%s\nstderr:\n%s", st, out, err);
  cr_expect(strstr(err, "exit status 12 (a rank died): rank 0 (pid "), "%s", err);
  const char *rep = after_status_line(err);
  cr_assert(rep, "%s", err);
  cr_expect_str_eq(rep, "test diagnosis: rank 0 posted status 5\n  second line\n");
}

Test(monitor_distrun_cause, a_job_that_succeeds_exits_0_with_no_report, .timeout = 90) {
  clean_env();
  const char *argv[] = {bin("distrun"), "-n", "2", bin("distrun_causeprog"), "ok", NULL};
  char *out, *err;
  int st = run(argv, 60, &out, &err);
  cr_assert_eq(st, 0, "exit %d\nstdout:\n%s\nstderr:\n%s", st, out, err);
  cr_expect(!strstr(err, "exit status"), "%s", err);
}

Test(monitor_distrun_cause, help_lists_every_exit_status, .timeout = 30) {
  clean_env();
  const char *argv[] = {bin("distrun"), "--help", NULL};
  char *out, *err;
  cr_assert_eq(run(argv, 20, &out, &err), 0, "%s", err);
  const char *rows[] = {"   0  every rank", "   1  anything else", "   2  usage error",
                        "  10  desync", "  11  hang or timeout", "  12  a rank died",
                        "  13  launch failure"};
  for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
    cr_expect(strstr(out, rows[i]), "no '%s' in:\n%s", rows[i], out);
}
