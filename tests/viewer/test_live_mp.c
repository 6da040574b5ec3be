/* ctest: labels=multiproc timeout=180 */
/* test_live_mp.c - `distview diagnose --json` names the same rank and
 * operation as the live report did: the checking layer's desync report
 * (DIST_DEBUG=DETAIL, rank 3 passes another shape to ALL_REDUCE #6) and
 * the monitor's hang diagnosis (rank 1 never enters ALL_REDUCE #6). The
 * live report is read from distrun's output; a test skips itself when the
 * build has no checking layer or monitor to write one. */
#include <criterion/criterion.h>

#include <sys/wait.h>

#include "proc.h"
#include "vw_test.h"

static dist_proc P; /* the last command run: its output */
static const char *const out = P.buf[0], *const err = P.buf[1];

/* Runs the command (argv as a NULL-terminated list) with env_add set in it. */
#define run(env_add, ...) \
  dist_proc_runl(&P, (const char *const *)(env_add), 150000, __VA_ARGS__)

/* Runs the job, returns the merged trace's path; the job's output in err. */
static const char *job(const char *mode, const char *debug) {
  static char trace_env[300], dbg[64], db[300];
  snprintf(trace_env, sizeof trace_env, "DIST_TRACE=%s", vwt_path(mode));
  snprintf(dbg, sizeof dbg, "DIST_DEBUG=%s", debug);
  snprintf(db, sizeof db, "%s.db", vwt_path(mode));
  char *env[] = {trace_env, dbg, "DIST_TIMEOUT=3", NULL};
  int rc = run(env, dist_test_bin("distrun"), "-n", "4", "--trace-out", db,
               dist_test_bin("viewer_prog"), mode, NULL);
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
  int rc = run(NULL, dist_test_bin("distview"), "diagnose", "--json", db, NULL);
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
  int rc = run(NULL, dist_test_bin("distview"), "diagnose", "--json", db, NULL);
  cr_assert_eq(rc, 11, "hang: %d\n%s%s", rc, out, err);
  char want[160];
  snprintf(want, sizeof want, "\"seq\":%d,\"op\":\"%s\",\"rank\":%d,", live_seq, live_op,
           live_rank);
  cr_assert(strstr(out, want), "same rank and operation as the monitor (%s):\n%s", want, out);
}
