/* ctest: labels=multiproc timeout=180 */
/* test_real_mp.c - the viewer on a trace the real tracer wrote: four ranks
 * of prog_viewer under distrun, rank 1 stopping before ALL_REDUCE #6 (the
 * others time out in it); distrun merges the rank files into trace.db, and
 * `distview diagnose --json` must name rank 1, ALL_REDUCE #6 and its last
 * completed #5, as the live timeout message did; `distview render` marks
 * rank 1 in the matrix; the job directory opens directly too. This checks
 * the viewer against the writer's rows, not only against SQL fixtures. */
#include <criterion/criterion.h>

#include <poll.h>
#include <stdarg.h>
#include <sys/wait.h>

#include "vw_test.h"

static char out[1 << 16], err[1 << 16];

/* Runs argv (NULL-terminated) with extra environment, capturing output. */
static int run(char *const *env_add, const char *a0, ...) {
  const char *argv[16];
  int n = 0;
  va_list ap;
  va_start(ap, a0);
  for (const char *a = a0; a && n < 15; a = va_arg(ap, const char *))
    argv[n++] = a;
  va_end(ap);
  argv[n] = NULL;
  int po[2], pe[2];
  cr_assert(pipe(po) == 0 && pipe(pe) == 0, "pipe");
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {   // no cr_* in the child
    for (int i = 0; env_add && env_add[i]; i++)
      putenv(env_add[i]);
    dup2(po[1], 1);
    dup2(pe[1], 2);
    close(po[0]);
    close(pe[0]);
    execv(argv[0], (char *const *)argv);
    _exit(127);
  }
  cr_assert_gt(pid, 0, "fork");
  close(po[1]);
  close(pe[1]);
  size_t lo = 0, le = 0;
  struct pollfd p[2] = {{po[0], POLLIN, 0}, {pe[0], POLLIN, 0}};
  for (int open_fds = 2; open_fds > 0 && poll(p, 2, 120000) > 0;) {
    for (int i = 0; i < 2; i++) {
      if (p[i].fd < 0 || !(p[i].revents & (POLLIN | POLLHUP)))
        continue;
      char *buf = i ? err : out;
      size_t *len = i ? &le : &lo, cap = i ? sizeof err : sizeof out;
      ssize_t k = read(p[i].fd, buf + *len, cap - 1 - *len);
      if (k <= 0) {
        close(p[i].fd);
        p[i].fd = -1;
        open_fds--;
      } else {
        *len += (size_t)k;
      }
    }
  }
  out[lo] = err[le] = '\0';
  int st;
  cr_assert_eq(waitpid(pid, &st, 0), pid, "wait");
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static const char *bin(const char *name) {
  static char p[4][512];
  static int next;
  char *s = p[next++ % 4];
  snprintf(s, 512, "%s/%s", getenv("DIST_TEST_BIN") ? getenv("DIST_TEST_BIN") : "build/bin",
           name);
  return s;
}

Test(viewer_real, diagnose_on_the_tracers_trace_names_the_lagging_rank, .timeout = 180) {
  char trace_env[300], db[300];
  const char *dir = vwt_path("dist-trace");
  snprintf(trace_env, sizeof trace_env, "DIST_TRACE=%s", dir);
  snprintf(db, sizeof db, "%s", vwt_path("trace.db"));
  char *env[] = {trace_env, "DIST_TIMEOUT=3", "DIST_DEBUG=OFF", NULL};
  int rc = run(env, bin("distrun"), "-n", "4", "--trace-out", db, bin("viewer_prog"), "hang",
               NULL);
  cr_assert_neq(rc, 0, "the job fails (a timeout): %d", rc);
  cr_assert(strstr(err, "rank 1") && strstr(err, "ALL_REDUCE #6"),
            "the live message names rank 1 and ALL_REDUCE #6:\n%s", err);
  cr_assert(access(db, R_OK) == 0, "distrun merged %s\n%s", db, err);

  rc = run(NULL, bin("distview"), "diagnose", "--json", db, NULL);
  cr_assert_eq(rc, 11, "a hang: %d\n%s%s", rc, out, err);
  cr_assert(strstr(out, "\"kind\":\"hang\",\"exit_code\":11,\"group\":0,\"seq\":6,"
                        "\"op\":\"ALL_REDUCE\",\"rank\":1,\"culprits\":[1]"), "%s", out);
  cr_assert(strstr(out, "\"blocked\":[0,2,3],\"last_completed\":{\"seq\":5,"
                        "\"op\":\"ALL_REDUCE\"}"), "%s", out);

  rc = run(NULL, bin("distview"), "render", "--size", "100x30", db, NULL);
  cr_assert_eq(rc, 0, "render: %s", err);
  cr_assert(strstr(out, " distview  HANG (exit 11)"), "%s", out);
  cr_assert(strstr(out, ">    1 LAG  #####?"), "rank 1 marked at #6:\n%s", out);

  rc = run(NULL, bin("distview"), "summary", "--json", db, NULL);
  cr_assert_eq(rc, 0, "summary: %s", err);
  cr_assert(strstr(out, "\"world_size\":4"), "%s", out);

  /* the job directory itself, merged on the fly by the reader library */
  char job[400] = "";
  rc = run(NULL, "/bin/sh", "-c", "ls -d \"$0\"/*/ | head -1", dir, NULL);
  snprintf(job, sizeof job, "%.*s", (int)strcspn(out, "\n"), out);
  cr_assert(job[0], "a job directory under %s", dir);
  rc = run(NULL, bin("distview"), "diagnose", job, NULL);
  cr_assert_eq(rc, 11, "diagnose on the directory: %d\n%s%s", rc, out, err);
  cr_assert(strstr(out, "rank 1 is behind (last completed ALL_REDUCE #5)"), "%s", out);
}
