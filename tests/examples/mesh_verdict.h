/* mesh_verdict.h - runs build/bin/mesh_train (examples/mesh_train.c: 8
 * ranks on a dp x tp mesh, async tp all_gather, pipeline send/recv, a world
 * broadcast) under distrun at DIST_DEBUG=DETAIL with one planted bug, then
 * `distview diagnose --json` on the trace it left: what a user, and the
 * judges of a planted bug, look at. Shared by the suites that check the
 * verdicts (test_mesh_verdicts_mp.c, test_mesh_hangs_mp.c, test_moe_verdicts_mp.c,
 * which runs examples/moe_train.c the same way, test_zero_verdicts_mp.c,
 * examples/zero_train.c, test_pipe_verdicts_mp.c, examples/pipe_train.c,
 * and tests/monitor/test_create_skip_mp.c, a rank
 * that skips a group creation). */
#ifndef DIST_TEST_MESH_VERDICT_H
#define DIST_TEST_MESH_VERDICT_H

#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <unistd.h>

#include "proc.h"
#include "tmpdir.h"

typedef struct mesh_run {
  int status;              /* distrun's exit status */
  const char *err;         /* distrun's stderr (the ranks' too) */
  const char *report;      /* what follows distrun's last status line */
  int diag_status;         /* distview diagnose's exit status */
  char json[DIST_PROC_CAP];  /* its --json */
} mesh_run;

/* What follows the last "distrun: exit status" line of err. */
static inline const char *mesh_after_status(const char *err) {
  const char *at = NULL;
  for (const char *p = strstr(err, "distrun: exit status"); p; p = strstr(p + 1, "distrun: exit"))
    at = p;
  return at;
}

/* Runs `distrun -n ranks --trace-out DIR/trace.db job...` (job: the
 * program and its arguments, NULL-terminated, 12 at most) with debug
 * ("DIST_DEBUG=DETAIL"), timeout ("DIST_TIMEOUT=6") and extra (one more
 * variable, or NULL) set, then `distview diagnose --json` on the trace it
 * left; the directory is removed after. */
static inline void job_run_argv(const char *debug, const char *timeout, const char *extra,
                                const char *ranks, const char *const *job, mesh_run *r) {
  static dist_proc run, diag;
  dist_test_clean_launch_env();
  char dir[] = "/tmp/dist-mesh-XXXXXX", trace[96], db[96];
  cr_assert(dist_test_mkdtemp(dir));
  snprintf(trace, sizeof trace, "DIST_TRACE=%s/ranks", dir);
  snprintf(db, sizeof db, "%s/trace.db", dir);
  const char *env[] = {debug, timeout, trace, extra, NULL};
  const char *argv[20] = {dist_test_bin("distrun"), "-n", ranks, "--trace-out", db};
  char said[256] = "";
  int n = 5;
  for (int i = 0; job[i] && n < 19; i++) {
    argv[n++] = job[i];
    snprintf(said + strlen(said), sizeof said - strlen(said), " %s", i ? job[i] : "job");
  }
  r->status = dist_proc_run(&run, argv, env, 120000);
  r->err = DIST_PROC_ERR(&run);
  r->report = mesh_after_status(r->err);
  r->diag_status = dist_proc_runl(&diag, NULL, 60000, dist_test_bin("distview"), "diagnose",
                                  "--json", db, NULL);
  snprintf(r->json, sizeof r->json, "%s", DIST_PROC_OUT(&diag));
  cr_log_info("%s: exit %d\n%s\ndiagnose: %d %s", said, r->status,
              r->report ? r->report : r->err, r->diag_status, r->json);
  char rm[160];
  snprintf(rm, sizeof rm, "rm -rf %s", dir);
  cr_assert_eq(system(rm), 0);
}

/* Runs the 8-rank job prog with --bug bug planted on rank in step step
 * (-1: the program's default), at debug level debug ("DIST_DEBUG=DETAIL"),
 * extra (NULL, or one more variable: "DIST_TRANSPORT=tcp") set. */
static inline void job_run_env(const char *prog, const char *debug, const char *extra,
                               const char *bug, int rank, int step, mesh_run *r) {
  char rk[16], st[16];
  snprintf(rk, sizeof rk, "%d", rank);
  snprintf(st, sizeof st, "%d", step);
  const char *job[] = {dist_test_bin(prog), "--bug", bug, "--rank", rk,
                       step < 0 ? NULL : "--step", st, NULL};
  job_run_argv(debug, "DIST_TIMEOUT=6", extra, "8", job, r);
}

static inline void job_run_step(const char *prog, const char *debug, const char *bug, int rank,
                                int step, mesh_run *r) {
  job_run_env(prog, debug, NULL, bug, rank, step, r);
}

static inline void job_run(const char *prog, const char *debug, const char *bug, int rank,
                           mesh_run *r) {
  job_run_step(prog, debug, bug, rank, -1, r);
}

static inline void mesh_run_at(const char *debug, const char *bug, int rank, mesh_run *r) {
  job_run("mesh_train", debug, bug, rank, r);
}

static inline void mesh_run_bug(const char *bug, int rank, mesh_run *r) {
  mesh_run_at("DIST_DEBUG=DETAIL", bug, rank, r);
}

/* distrun and distview agree: the exit status, the kind and the culprit. */
static inline void mesh_expect_verdict(const mesh_run *r, int status, const char *kind,
                                       int culprit) {
  cr_expect_eq(r->status, status, "distrun exited %d:\n%s", r->status, r->err);
  cr_expect(r->report, "no final status line:\n%s", r->err);
  cr_expect_eq(r->diag_status, status, "distview diagnose exited %d: %s", r->diag_status,
               r->json);
  char k[64], c[64];
  snprintf(k, sizeof k, "\"kind\":\"%s\"", kind);
  snprintf(c, sizeof c, "\"culprits\":[%d]", culprit);
  cr_expect(strstr(r->json, k) && strstr(r->json, c) && strstr(r->json, "\"source\":\"distrun\""),
            "distview's verdict is not %s of rank %d: %s", kind, culprit, r->json);
}

/* distview's own analysis of the trace agrees with distrun's verdict (not
 * asserted for every run: with no report stored before distrun ended the
 * job, the rows alone may name a rank a step behind). */
static inline void mesh_expect_agreement(const mesh_run *r) {
  cr_expect(strstr(r->json, "\"agrees\":true"), "distview's own analysis disagrees: %s",
            r->json);
}

/* The line of examples/<file> that holds marker (the tests name lines by
 * a marker in the example, so they follow its edits). */
static inline int example_line(const char *file, const char *marker) {
  char path[1024];
  snprintf(path, sizeof path, "examples/%s", file);
  int n = dist_test_source_line(path, marker);
  cr_assert(n > 0, "no '%s' in %s/%s", marker, getenv("DIST_TEST_SRC"), path);
  return n;
}

/* Whether the report after the status line holds needle. */
static inline bool mesh_says(const mesh_run *r, const char *needle) {
  return r->report && strstr(r->report, needle);
}

#endif
