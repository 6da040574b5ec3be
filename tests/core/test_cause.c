/* ctest: labels=unit timeout=30 */
/* The job's cause key (cause.c): dist_post_cause writes "<status> <rank>
 * <diagnosis>\n<report>" under DIST_KEY_CAUSE with compare_set so the first
 * cause stays (a monitor's diagnosis replaces a plain cause of its status,
 * nothing else), refuses what is not a DIST_E_* code, and is a no-op
 * without a job store.
 * The end-to-end path (a backend's desync posted, distrun's exit 10) is in
 * tests/monitor/test_distrun_cause.c. */
#include <criterion/criterion.h>
#include <stdlib.h>

#include <stdlib.h>
#include <string.h>

#include <dist/backend.h>

#include "base/dist_int.h"
#include "job/launch_env.h"
#include "pg/pg_int.h"

static dist_store *init_one(void) {
  dist_store *s;
  cr_assert_eq(dist_store_hash_create(&s), DIST_OK);
  dist_init_opts o = dist_init_opts_default();
  o.store = s;
  o.rank = 0;
  o.world_size = 1;
  cr_assert_eq(dist_init_process_group(&o), DIST_OK, "%s", dist_last_errmsg());
  return s;
}

static char *cause_of(dist_store *s) {
  void *v = NULL;
  size_t n = 0;
  dist_store_set_timeout(s, 1000);
  cr_assert_eq(dist_store_get(s, DIST_KEY_CAUSE, &v, &n), DIST_OK, "%s", dist_store_errmsg(s));
  return v;
}

Test(core_cause, without_a_job_store_posting_is_a_no_op, .timeout = 10) {
  cr_assert_null(dist_get_default_store());
  cr_assert_eq(dist_post_cause(DIST_E_DESYNC, "nobody listens"), DIST_OK);
}

Test(core_cause, only_DIST_E_codes_and_a_report_are_accepted, .timeout = 10) {
  cr_assert_eq(dist_post_cause(DIST_OK, "x"), DIST_E_INVAL);
  cr_assert_eq(dist_post_cause(DIST_E_INTERNAL + 1, "x"), DIST_E_INVAL);
  cr_assert_eq(dist_post_cause(-3, "x"), DIST_E_INVAL);
  cr_assert_eq(dist_post_cause(DIST_E_DESYNC, NULL), DIST_E_INVAL);
  cr_assert(strstr(dist_last_errmsg(), "dist_post_cause"), "%s", dist_last_errmsg());
}

Test(core_cause, the_first_cause_stays_with_status_and_rank, .timeout = 10) {
  dist_store *s = init_one();
  cr_assert_eq(dist_post_cause(DIST_E_DESYNC, "first report\n  line two"), DIST_OK);
  cr_assert_eq(dist_post_cause(DIST_E_TIMEOUT, "second report"), DIST_OK);
  char *v = cause_of(s);
  cr_expect_str_eq(v, "4 0 0\nfirst report\n  line two");
  int st = 0, rank = -2;
  const char *rep = NULL;
  cr_assert_eq(dist__cause_parse(v, strlen(v), &st, &rank, &rep), DIST_OK);
  cr_expect_eq(st, DIST_E_DESYNC);
  cr_expect_eq(rank, 0);
  cr_expect_str_eq(rep, "first report\n  line two");
  dist_free(v);
  dist_destroy_process_group(NULL);
  cr_assert_eq(dist_post_cause(DIST_E_DESYNC, "after destroy"), DIST_OK);
  dist_store_destroy(s);
}

Test(core_cause, a_diagnosis_replaces_a_plain_cause_of_its_status_only, .timeout = 10) {
  dist_store *s = init_one();
  /* The checking layer's "did not arrive", then the monitor's diagnosis. */
  cr_assert_eq(dist_post_cause(DIST_E_TIMEOUT, "timeout: rank 1 did not arrive"), DIST_OK);
  cr_assert_eq(dist__cause_post_diagnosis(DIST_E_TIMEOUT, NULL, "hang: rank 1 waits for 0"), DIST_OK);
  char *v = cause_of(s);
  cr_expect_str_eq(v, "3 0 1\nhang: rank 1 waits for 0");
  dist_free(v);
  /* A second diagnosis, or a plain cause, does not replace a diagnosis. */
  cr_assert_eq(dist__cause_post_diagnosis(DIST_E_TIMEOUT, NULL, "hang: later"), DIST_OK);
  cr_assert_eq(dist_post_cause(DIST_E_TIMEOUT, "timeout: later"), DIST_OK);
  v = cause_of(s);
  cr_expect_str_eq(v, "3 0 1\nhang: rank 1 waits for 0");
  dist_free(v);
  dist_destroy_process_group(NULL);
  dist_store_destroy(s);
  /* Nor does a diagnosis replace a cause of another status (a desync). */
  s = init_one();
  cr_assert_eq(dist_post_cause(DIST_E_DESYNC, "desync: shapes"), DIST_OK);
  cr_assert_eq(dist__cause_post_diagnosis(DIST_E_TIMEOUT, NULL, "hang: after it"), DIST_OK);
  v = cause_of(s);
  cr_expect_str_eq(v, "4 0 0\ndesync: shapes");
  dist_free(v);
  dist_destroy_process_group(NULL);
  dist_store_destroy(s);
}

Test(core_cause, a_long_report_is_cut_at_the_documented_bound, .timeout = 10) {
  dist_store *s = init_one();
  size_t n = DIST_CAUSE_REPORT_MAX * 2;
  char *big = malloc(n + 1);
  memset(big, 'r', n);
  big[n] = '\0';
  cr_assert_eq(dist_post_cause(DIST_E_TIMEOUT, big), DIST_OK);
  char *v = cause_of(s);
  cr_expect_eq(strlen(v), strlen("3 0 0\n") + DIST_CAUSE_REPORT_MAX);
  dist_free(v);
  free(big);
  dist_destroy_process_group(NULL);
  dist_store_destroy(s);
}

Test(core_cause, malformed_values_are_refused_by_the_reader, .timeout = 10) {
  int st, rank;
  const char *rep;
  const char *bad[] = {"", "4 0", "x 0\nr", "0 1\nr", "13 1\nr", "4\nr"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    cr_expect_eq(dist__cause_parse(bad[i], strlen(bad[i]), &st, &rank, &rep), DIST_E_INVAL,
                 "accepted '%s'", bad[i]);
  cr_expect_eq(dist__cause_parse("3 -1\n", 5, &st, &rank, &rep), DIST_OK);
  cr_expect_eq(rank, -1);
  cr_expect_str_eq(rep, "");
  cr_expect_eq(dist__cause_parse("3 2 1\nr", 7, &st, &rank, &rep), DIST_OK);
  cr_expect(st == DIST_E_TIMEOUT && rank == 2 && !strcmp(rep, "r"), "with the diagnosis flag");
}

Test(core_cause, a_cause_with_fields_carries_them_and_its_report_reads_as_before,
     .timeout = 10) {
  dist_store *s = init_one();
  const int culprits[] = {3, 5};
  dist_cause_info in = dist_cause_info_none();
  in.culprits = culprits;
  in.n_culprits = 2;
  in.group_id = 4;
  in.group_name = "tp\tdim"; /* a tab is not a separator of ours */
  in.op = DIST_OP_ALL_REDUCE;
  in.seq = 5;
  in.field = "dtype";
  in.site = "train.c:88 in step()";
  cr_assert_eq(dist_post_cause_info(DIST_E_DESYNC, &in, "desync in group 4\n  rank 3"), DIST_OK);
  char *v = cause_of(s);
  int st = 0, rank = -2;
  const char *rep = NULL;
  cr_assert_eq(dist__cause_parse(v, strlen(v), &st, &rank, &rep), DIST_OK);
  cr_expect_eq(st, DIST_E_DESYNC);
  cr_expect_str_eq(rep, "desync in group 4\n  rank 3");
  dist__cause_fields f;
  dist__cause_parse_info(v, strlen(v), &f);
  cr_expect_eq(f.n_culprits, 2);
  cr_expect(f.culprits[0] == 3 && f.culprits[1] == 5);
  cr_expect_eq(f.group_id, 4);
  cr_expect_str_eq(f.group_name, "tp dim");
  cr_expect_str_eq(f.op, "ALL_REDUCE");
  cr_expect_eq(f.seq, 5);
  cr_expect_str_eq(f.field, "dtype");
  cr_expect_str_eq(f.site, "train.c:88 in step()");
  dist_free(v);
  /* A value of the older form has no fields. */
  const char *old = "3 1 1\nhang: rank 1 waits for 0";
  dist__cause_parse_info(old, strlen(old), &f);
  cr_expect(f.n_culprits == 0 && f.group_id == -1 && !f.op[0]);
  dist_destroy_process_group(NULL);
  dist_store_destroy(s);
}
