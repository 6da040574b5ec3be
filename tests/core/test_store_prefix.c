/* ctest: labels=unit timeout=120 */
/* The prefix store: the whole operation set over a TCP store and over a
 * file store, key isolation, num_keys as torch, and inner ownership. */
#include <stdlib.h>

#include "store_cases.h"
#include "tmpdir.h"

static char dir[64], path[128];

static dist_store *make_tcp_inner(void) {
  dist_store_tcp_opts o = {0};
  o.is_server = true;
  o.timeout_ms = 10000;
  o.token = "prefix-test-token";
  dist_store *s;
  OK(dist_store_tcp_create(&o, &s));
  return s;
}

static dist_store *make_file_inner(void) {
  snprintf(dir, sizeof dir, "/tmp/dist-px-XXXXXX");
  cr_assert_not_null(dist_test_mkdtemp(dir));
  snprintf(path, sizeof path, "%s/store", dir);
  dist_store *s;
  OK(dist_store_file_create(path, 1, &s));
  return s;
}

static dist_store *over_tcp(void) {
  dist_store *s;
  OK(dist_store_prefix_create("group0", make_tcp_inner(), 0, &s));
  return s;
}

static dist_store *over_file(void) {
  dist_store *s;
  OK(dist_store_prefix_create("group0", make_file_inner(), 0, &s));
  return s;
}

static void nothing(void) {}

static void remove_file(void) {
  unlink(path);
  rmdir(dir);
}

STORE_CASES(store_prefix, over_tcp, nothing)
STORE_CASES(store_prefix_over_file, over_file, remove_file)

Test(store_prefix, keys_land_in_the_inner_store_under_the_prefix, .timeout = 20) {
  dist_store *in = make_tcp_inner(), *a, *b;
  OK(dist_store_prefix_create("a", in, DIST_STORE_BORROW, &a));
  OK(dist_store_prefix_create("b", in, DIST_STORE_BORROW, &b));
  OK(dist_store_set(a, "k", "from a", 6));
  OK(dist_store_set(b, "k", "from b", 6));
  expect_value(a, "k", "from a", 6);
  expect_value(b, "k", "from b", 6);
  expect_value(in, "a/k", "from a", 6);
  int64_t n;
  OK(dist_store_num_keys(a, &n)); /* torch: the inner store's count */
  cr_assert_eq(n, 2);
  OK(dist_store_set_timeout(a, 100));
  int rc = dist_store_get(a, "nope", &(void *){NULL}, NULL);
  cr_assert_eq(rc, DIST_E_TIMEOUT);
  cr_assert(strstr(dist_store_errmsg(a), "a/nope"), "%s", dist_store_errmsg(a));
  cr_assert_eq(dist_store_tcp_port(a), dist_store_tcp_port(in));
  dist_store_destroy(a);
  dist_store_destroy(b);
  expect_value(in, "b/k", "from b", 6); /* borrowed: still alive */
  dist_store_destroy(in);
}

Test(store_prefix, prefixes_nest, .timeout = 20) {
  dist_store *h, *p1, *p2;
  OK(dist_store_hash_create(&h));
  OK(dist_store_prefix_create("outer", h, DIST_STORE_BORROW, &p1));
  OK(dist_store_prefix_create("inner", p1, 0, &p2)); /* owns p1 */
  OK(dist_store_set(p2, "k", "v", 1));
  expect_value(h, "outer/inner/k", "v", 1);
  dist_store_destroy(p2);
  dist_store_destroy(h);
}

Test(store_prefix, a_prefixed_key_over_the_limit_is_DIST_E_INVAL, .timeout = 20) {
  dist_store *h, *p;
  OK(dist_store_hash_create(&h));
  static char pre[DIST_STORE_MAX_KEY - 2];
  memset(pre, 'p', sizeof pre - 1);
  OK(dist_store_prefix_create(pre, h, 0, &p));
  cr_assert_eq(dist_store_set(p, "long-key", "v", 1), DIST_E_INVAL);
  cr_assert(strstr(dist_store_errmsg(p), "longer than"), "%s", dist_store_errmsg(p));
  dist_store *q = NULL;
  cr_assert_eq(dist_store_prefix_create(NULL, h, 0, &q), DIST_E_INVAL);
  cr_assert_null(q);
  dist_store_destroy(p);
}
