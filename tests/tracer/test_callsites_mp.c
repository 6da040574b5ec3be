/* ctest: labels=multiproc timeout=120 */
/* Call sites in trace.db as function, file and line: a 2-rank job calls
 * dist_all_reduce from a known line of this file; after the merge plain
 * SQL over callsites names this file, that line (the call's, not the line
 * after it, where the return address points) and this function. A module
 * that cannot be read at merge leaves file and line NULL and the merge
 * still succeeds. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mp.h"
#include "trace_util.h"
#include "tmpdir.h"

static char dir[256];

static int job_rank(const dist_test_ctx *ctx) {
  setenv("DIST_TRACE", dir, 1);
  setenv("DIST_JOB_ID", "sitejob", 1);
  CHECK_OK(ctx, dist_tracer_register());
  CHECK_OK(ctx, dist_test_init_pg(ctx, NULL));
  float v[4] = {0};
  dist_tensor t = dist_tensor_1d(v, DIST_FLOAT32, 4);
  for (int i = 0; i < 2; i++)
    CHECK_OK(ctx, dist_all_reduce(&t, DIST_SUM, NULL, NULL)); /* THE CALL */
  dist_test_finish();
  return 0;
}

static sqlite3 *run_job(void) {
  snprintf(dir, sizeof dir, "/tmp/dist-tracesite-XXXXXX");
  cr_assert(dist_test_mkdtemp(dir));
  cr_assert_eq(dist_test_ranks(2, job_rank, NULL, 60), 0, "%s", dist_test_report());
  sqlite3 *db = tq_merge(dir, "sitejob", NULL);
  cr_assert(db);
  return db;
}

#define SITE_OF_ALL_REDUCE(col)                                                             \
  "SELECT " col " FROM operations o JOIN callsites c USING (rank, callsite_id) WHERE"       \
  " o.op = 'ALL_REDUCE' AND o.rank = %d LIMIT 1"

Test(tracer_callsites, the_merge_names_the_file_line_and_function_of_each_call,
     .timeout = 100) {
  sqlite3 *db = run_job();
  /* the line marked as the call in job_rank (this file, read back) */
  int want = 0;
  FILE *f = fopen(__FILE__, "r");
  char buf[512];
  for (int n = 1; f && fgets(buf, sizeof buf, f); n++)
    if (strstr(buf, "/* THE" " CALL */"))
      want = n;
  if (f)
    fclose(f);
  cr_assert(want > 0, "found the call in %s", __FILE__);
  for (int r = 0; r < 2; r++) {
    const char *file = tq_text(db, SITE_OF_ALL_REDUCE("c.file"), r);
    cr_assert(strstr(file, "test_callsites_mp.c"), "rank %d: file '%s'", r, file);
    cr_assert_eq(tq_int(db, SITE_OF_ALL_REDUCE("c.line"), r), want,
                 "rank %d: the call's line, not the return address's", r);
    cr_assert_str_eq(tq_text(db, SITE_OF_ALL_REDUCE("c.function"), r), "job_rank");
  }
  sqlite3_close(db);
}

Test(tracer_callsites, an_unreadable_module_leaves_the_line_null, .timeout = 100) {
  sqlite3 *db = run_job();
  sqlite3_close(db);
  /* the rank files now name a module that is gone */
  for (int r = 0; r < 2; r++) {
    char path[400];
    snprintf(path, sizeof path, "%s/sitejob/rank-%d.db", dir, r);
    sqlite3 *rf;
    cr_assert_eq(sqlite3_open(path, &rf), SQLITE_OK);
    cr_assert_eq(sqlite3_exec(rf, "UPDATE callsites SET module = '/nonexistent/prog'", NULL, NULL,
                              NULL), SQLITE_OK);
    sqlite3_close(rf);
  }
  db = tq_merge(dir, "sitejob", NULL);
  cr_assert(db, "the merge succeeds");
  cr_assert_eq(tq_int(db, "SELECT count(*) FROM callsites WHERE module = '/nonexistent/prog'"
                          " AND file IS NULL AND line IS NULL"),
               tq_int(db, "SELECT count(*) FROM callsites"));
  cr_assert(tq_int(db, "SELECT count(*) FROM callsites") > 0);
  sqlite3_close(db);
}
