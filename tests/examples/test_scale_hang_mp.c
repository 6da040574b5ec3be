/* ctest: labels=multiproc,verdicts timeout=300 cost=25 */
/* The scale job's planted hang at 16 ranks (bench/scale_job.c on a 4 x 4
 * mesh, issue 24): the last rank computes for ever before a tp all_reduce.
 * Its tp group and its dp group are the same size and both wait for it;
 * the verdict names the call it did not reach first (the tp all_reduce its
 * tp partners entered before the dp ranks reached the dp one), whichever
 * rank reports. */
#include "mesh_verdict.h"

static void run_scale_hang(mesh_run *r) {
  const char *job[] = {dist_test_bin("scale_job"), "--colls", "40", "--fault", "hang", NULL};
  job_run_argv("DIST_DEBUG=DETAIL", "DIST_TIMEOUT=8", NULL, "16", job, r);
}

Test(examples_scale_hang, the_first_call_a_busy_rank_missed_is_named, .timeout = 240) {
  for (int i = 0; i < DIST_TEST_REPEAT(2); i++) {
    static mesh_run r;
    run_scale_hang(&r);
    mesh_expect_verdict(&r, 11, "hang", 15);
    cr_expect(strstr(r.json, "\"group_name\":\"tp\"") && strstr(r.json, "\"op\":\"ALL_REDUCE\""),
              "run %d: not the tp all_reduce: %s", i + 1, r.json);
    cr_expect(mesh_says(&r, "the waits end at rank 15, which is in no operation (busy outside "
                            "the library for "),
              "run %d: %s", i + 1, r.report ? r.report : r.err);
  }
}
