/* ctest: labels=unit timeout=30 */
/* test_fuzz_found.c - what the fuzz targets of tests/fuzz (issue 26) found
 * in core, each kept here so the normal suites (and their sanitizers) hold
 * the line without a fuzz build:
 *   - fuzz_frame: a member's collective frame claiming 2^61 elements made
 *     rank 0's desync report multiply the count by the element size in
 *     64-bit signed arithmetic (undefined behaviour; UBSan aborts);
 *   - fuzz_init_env (found writing it): an init_method query longer than
 *     its 512-byte buffer was cut short, so "rank=12345" at the boundary
 *     read as "rank=12", silently. */
#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <dist/dist.h>

#include "job/rendezvous.h"
#include "base/report.h"

Test(core_fuzz_found, a_peers_count_too_large_for_bytes_is_reported_without_overflow,
     .timeout = 10) {
  dist__rval v = {.kind = DIST_OP_ALL_REDUCE, .seq = 1, .dtype = DIST_FLOAT32,
                  .count = (1ll << 61) + 4, .redop = DIST_REDOP_SUM, .root = -1};
  char buf[200];
  dist__report_value(&v, buf, sizeof buf);
  cr_assert(strstr(buf, "ALL_REDUCE #1 float32[2305843009213693956] op=SUM"), "%s", buf);
  cr_assert(strstr(buf, "(more bytes than 64 bits count)"), "%s", buf);
  v.count = 4;
  dist__report_value(&v, buf, sizeof buf);
  cr_assert(strstr(buf, "float32[4] op=SUM (16 bytes)"), "an ordinary count still: %s", buf);
  v.dtype = DIST_COMPLEX128;
  v.count = INT64_MAX / 16 + 1; // the first count whose bytes overflow
  dist__report_value(&v, buf, sizeof buf);
  cr_assert(strstr(buf, "(more bytes than 64 bits count)"), "%s", buf);
}

Test(core_fuzz_found, an_init_method_query_too_long_is_refused_not_cut_short, .timeout = 10) {
  static const char *const vars[] = {"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE",
                                     "DIST_TOKEN", "DIST_JOB_ID"};
  for (size_t i = 0; i < sizeof vars / sizeof *vars; i++)
    unsetenv(vars[i]);
  /* "&rank=12345" starts at byte 503 of the query: cut at 511, it read 12 */
  char q[600], url[700];
  int n = 0;
  for (int i = 0; i < 60; i++)
    n += snprintf(q + n, sizeof q - (size_t)n, "rank=0&");
  n += snprintf(q + n, sizeof q - (size_t)n, "world_size=");
  while (n < 503 - 6)
    q[n++] = '0'; // leading zeros: still 100000
  n += snprintf(q + n, sizeof q - (size_t)n, "100000");
  cr_assert_eq(n, 503);
  snprintf(q + n, sizeof q - (size_t)n, "&rank=12345");
  snprintf(url, sizeof url, "tcp://127.0.0.1:1?%s", q);
  dist_init_opts o = {.init_method = url, .rank = -1, .world_size = -1};
  dist__rdzv r;
  int rc = dist__rendezvous_check(&o, &r);
  cr_assert_eq(rc, DIST_E_INVAL, "%s: %s (rank %d)", dist_status_name(rc), dist_last_errmsg(),
               r.rank);
  cr_assert(strstr(dist_last_errmsg(), "query is too long"), "%s", dist_last_errmsg());
  /* the same settings in a short query are read */
  o.init_method = "tcp://127.0.0.1:1?world_size=100000&rank=12345";
  cr_assert_eq(dist__rendezvous_check(&o, &r), DIST_OK, "%s", dist_last_errmsg());
  cr_assert_eq(r.rank, 12345);
  cr_assert_eq(r.world_size, 100000);
}
