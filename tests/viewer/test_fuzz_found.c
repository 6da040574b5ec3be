/* ctest: labels=unit timeout=30 */
/* test_fuzz_found.c - what fuzz_trace (tests/fuzz, issue 26) found in the
 * viewer, kept in the normal suites: `distview stats` of a trace without a
 * collective sorted its (empty, NULL) rank table with qsort, whose
 * pointer must not be NULL (undefined behaviour; UBSan aborts). */
#include <criterion/criterion.h>

#include "vw_test.h"

Test(viewer_fuzz_found, stats_of_a_trace_without_collectives, .timeout = 10) {
  const char *p = vwt_path("no-collectives.db");
  sqlite3 *db = fx_create(p, "job-empty", 2, 1);
  fx_rank(db, 0, "finished");
  fx_rank(db, 1, "finished");
  int members[] = {0, 1};
  fx_group(db, 0, "default", members, 2);
  fx_finish(db, 0, 1000);
  char *argv[] = {(char *)"stats", (char *)"--json", (char *)p, NULL};
  cr_assert_eq(vw_cmd_stats(3, argv), 0);
  char *text[] = {(char *)"stats", (char *)p, NULL};
  cr_assert_eq(vw_cmd_stats(2, text), 0);
}
