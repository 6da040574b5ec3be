/* ctest: labels=multiproc timeout=120 */
/* distrun merges the job's rank files at the end: an example program
 * linked with the bundled library (the tracer on by default) leaves
 * --trace-out FILE with every rank's operations. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>

#include "trace_util.h"

Test(tracer_distrun, distrun_merges_into_trace_out, .timeout = 100) {
  char dir[] = "/tmp/dist-tracerun-XXXXXX";
  cr_assert(mkdtemp(dir));
  char cmd[2048];
  snprintf(cmd, sizeof cmd,
           "cd %s && DIST_TRACE=%s/dt %s/distrun -n 2 --trace-out %s/out.db %s/allreduce_group"
           " >/dev/null 2>%s/err.txt",
           dir, dir, getenv("DIST_TEST_BIN"), dir, getenv("DIST_TEST_BIN"), dir);
  cr_assert_eq(system(cmd), 0, "%s", cmd);
  char path[256];
  snprintf(path, sizeof path, "%s/out.db", dir);
  sqlite3 *db;
  cr_assert_eq(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
  cr_assert_str_eq(tq_text(db, "SELECT value FROM meta WHERE key='kind'"), "merged");
  cr_assert_eq(tq_int(db, "SELECT count(*) FROM ranks WHERE end_state='finished'"), 2);
  /* allreduce_group: one all_reduce on a group of ranks 0 and 1 */
  cr_assert_eq(tq_int(db, "SELECT count(*) FROM operations WHERE op='ALL_REDUCE' AND"
                          " state='completed'"), 2);
  sqlite3_close(db);
}
