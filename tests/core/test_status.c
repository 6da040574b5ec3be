/* ctest: labels=unit timeout=30 */
/* Status codes: numbering, names, descriptions and the per-thread message. */
#include <criterion/criterion.h>

#include <pthread.h>

#include "base/dist_int.h"

Test(core_status, codes_keep_their_documented_numbers, .timeout = 5) {
  cr_assert_eq(DIST_OK, 0);
  cr_assert_eq(DIST_E_INVAL, 1);
  cr_assert_eq(DIST_E_NOMEM, 2);
  cr_assert_eq(DIST_E_TIMEOUT, 3);
  cr_assert_eq(DIST_E_DESYNC, 4);
  cr_assert_eq(DIST_E_PEER_LOST, 5);
  cr_assert_eq(DIST_E_CLOSED, 6);
  cr_assert_eq(DIST_E_ABORTED, 7);
  cr_assert_eq(DIST_E_NOTSUP, 8);
  cr_assert_eq(DIST_E_STORE, 9);
  cr_assert_eq(DIST_E_BACKEND, 10);
  cr_assert_eq(DIST_E_SYS, 11);
  cr_assert_eq(DIST_E_INTERNAL, 12);
}

Test(core_status, every_code_has_a_short_name_and_description, .timeout = 5) {
  cr_assert_str_eq(dist_status_name(DIST_E_TIMEOUT), "DIST_E_TIMEOUT");
  cr_assert_str_eq(dist_status_name(DIST_OK), "DIST_OK");
  cr_assert_str_eq(dist_strerror(DIST_E_PEER_LOST), "peer lost");
  for (int c = 0; c < DIST_STATUS_COUNT_; c++) {
    cr_assert_str_neq(dist_status_name(c), "DIST_E_UNKNOWN", "code %d", c);
    cr_assert(strlen(dist_strerror(c)) > 0);
  }
  cr_assert_str_eq(dist_status_name(999), "DIST_E_UNKNOWN");
  cr_assert_str_eq(dist_strerror(-5), "unknown status");
}

Test(core_status, object_message_keeps_the_first_failure, .timeout = 5) {
  dist__errbuf e;
  dist__err_clear(&e);
  cr_assert_eq(dist__err_set(&e, DIST_E_INVAL, "first %d", 1), DIST_E_INVAL);
  dist__err_set(&e, DIST_E_TIMEOUT, "second");
  cr_assert_str_eq(e.msg, "first 1");
  cr_assert_str_eq(dist_last_errmsg(), "second");
  dist__err_clear(&e);
  cr_assert_str_eq(e.msg, "");
}

Test(core_status, sys_errors_carry_errno_and_its_text, .timeout = 5) {
  dist__errbuf e;
  dist__err_clear(&e);
  cr_assert_eq(dist__err_sys(&e, ENOENT, "open %s", "/nope"), DIST_E_SYS);
  cr_assert_eq(e.sys_errno, ENOENT);
  cr_assert(strstr(e.msg, "open /nope: No such file") != NULL, "%s", e.msg);
}

static void *thread_sets(void *arg) {
  (void)arg;
  dist__set_last_error(DIST_E_INVAL, "from the other thread");
  return NULL;
}

Test(core_status, last_error_is_per_thread, .timeout = 5) {
  dist__set_last_error(DIST_E_TIMEOUT, "mine");
  pthread_t t;
  pthread_create(&t, NULL, thread_sets, NULL);
  pthread_join(t, NULL);
  cr_assert_str_eq(dist_last_errmsg(), "mine");
}

Test(core_status, rank_lists_are_compressed_into_ranges, .timeout = 5) {
  char buf[64];
  int r[] = {0, 2, 3, 4, 7};
  cr_assert_str_eq(dist__format_ranks(r, 5, buf, sizeof buf), "0,2-4,7");
  cr_assert_str_eq(dist__format_ranks(r, 0, buf, sizeof buf), "");
}
