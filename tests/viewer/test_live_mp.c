/* ctest: labels=multiproc timeout=180 */
/* test_live_mp.c - `distview diagnose --json` names the same rank and
 * operation as the live report did: the checking layer's desync report
 * (DIST_DEBUG=DETAIL, rank 3 passes another shape to ALL_REDUCE #6) and
 * the monitor's hang diagnosis (rank 1 never enters ALL_REDUCE #6). The
 * live report is read from distrun's output; a test skips itself when the
 * build has no checking layer or monitor to write one (each part lives on
 * its own branch until they are merged). */
#include <criterion/criterion.h>

#include <poll.h>
#include <stdarg.h>
#include <sys/wait.h>

#include "vw_test.h"

static char out[1 << 17], err[1 << 17];

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
  for (int open_fds = 2; open_fds > 0 && poll(p, 2, 150000) > 0;) {
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

/* Runs the job, returns the merged trace's path; the job's output in err. */
static const char *job(const char *mode, const char *debug) {
  static char trace_env[300], dbg[64], db[300];
  snprintf(trace_env, sizeof trace_env, "DIST_TRACE=%s", vwt_path(mode));
  snprintf(dbg, sizeof dbg, "DIST_DEBUG=%s", debug);
  snprintf(db, sizeof db, "%s.db", vwt_path(mode));
  char *env[] = {trace_env, dbg, "DIST_TIMEOUT=3", NULL};
  int rc = run(env, bin("distrun"), "-n", "4", "--trace-out", db, bin("viewer_prog"), mode,
               NULL);
  cr_assert_neq(rc, 0, "the job fails: %d", rc);
  return db;
}

Test(viewer_live, diagnose_agrees_with_the_checking_layers_desync_report, .timeout = 180) {
  const char *db = job("shape", "DETAIL");
  /* the report's culprit line: "  rank 3:    ALL_REDUCE float32[2] ...  <- count differs" */
  const char *hdr = strstr(err, "desync in group 0");
  if (!hdr)
    cr_skip_test("no checking layer in this build (no desync report in the job's output)");
  cr_assert(strstr(hdr, "at ALL_REDUCE #6"), "live report: %s", hdr);
  const char *arrow = strstr(hdr, "<- ");
  cr_assert_not_null(arrow, "the report marks the differing rank:\n%s", hdr);
  const char *line = arrow;
  while (line > hdr && line[-1] != '\n')
    line--;
  int live_rank = -1;
  cr_assert_eq(sscanf(strstr(line, "rank "), "rank %d", &live_rank), 1, "%s", line);
  int rc = run(NULL, bin("distview"), "diagnose", "--json", db, NULL);
  cr_assert_eq(rc, 10, "desync: %d\n%s%s", rc, out, err);
  char want[128];
  snprintf(want, sizeof want, "\"group\":0,\"seq\":6,\"op\":\"ALL_REDUCE\",\"rank\":%d,",
           live_rank);
  cr_assert(strstr(out, want), "same rank (%d) and operation as the live report:\n%s",
            live_rank, out);
}

Test(viewer_live, diagnose_agrees_with_the_monitors_hang_diagnosis, .timeout = 180) {
  const char *db = job("hang", "INFO");
  /* "  rank 1 (host vm, pid 123) has not entered ALL_REDUCE #6: ..." */
  const char *mon = strstr(err, "MON ");
  const char *line = mon ? strstr(mon, "has not entered ") : NULL;
  if (!line)
    cr_skip_test("no monitor in this build (no hang diagnosis in the job's output)");
  while (line > err && line[-1] != '\n')
    line--;
  int live_rank = -1, live_seq = -1;
  char live_op[32] = "";
  const char *r = strstr(line, "rank ");
  cr_assert(r && sscanf(r, "rank %d", &live_rank) == 1, "%s", line);
  const char *e = strstr(line, "has not entered ");
  cr_assert(e && sscanf(e, "has not entered %31s #%d", live_op, &live_seq) == 2, "%s", line);
  int rc = run(NULL, bin("distview"), "diagnose", "--json", db, NULL);
  cr_assert_eq(rc, 11, "hang: %d\n%s%s", rc, out, err);
  char want[160];
  snprintf(want, sizeof want, "\"seq\":%d,\"op\":\"%s\",\"rank\":%d,", live_seq, live_op,
           live_rank);
  cr_assert(strstr(out, want), "same rank and operation as the monitor (%s):\n%s", want, out);
}
