/* store_cases.h - the store operation set, as Criterion tests that run
 * against any store kind (torch's semantics as store.h documents them).
 *
 * A test file defines a maker (`static dist_store *mk(void)`) and a cleanup
 * (`static void unmk(void)`), then writes STORE_CASES(suite, mk, unmk) to
 * get one test per behaviour for that kind. Blocking cases use a clone of
 * the store from a second thread, as a user would. */
#ifndef DIST_TEST_STORE_CASES_H
#define DIST_TEST_STORE_CASES_H

#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <dist/dist.h>

#define OK(call)                                                                    \
  do {                                                                              \
    int ok_rc_ = (call);                                                            \
    cr_assert_eq(ok_rc_, DIST_OK, "%s -> %s: %s", #call, dist_status_name(ok_rc_),  \
                 dist_last_errmsg());                                               \
  } while (0)

/* Reads key and checks its bytes. */
static inline void expect_value(dist_store *s, const char *key, const void *want, size_t n) {
  void *v = NULL;
  size_t l = 0;
  OK(dist_store_get(s, key, &v, &l));
  cr_assert_eq(l, n, "key %s: %zu bytes, want %zu", key, l, n);
  cr_assert(memcmp(v, want, n) == 0, "key %s: wrong bytes", key);
  cr_assert_eq(((char *)v)[n], '\0', "value is NUL-terminated");
  dist_free(v);
}

typedef struct later_op {
  dist_store *clone;
  int delay_ms;
  const char *key;
  bool queue;
} later_op;

/* From another thread: after a delay, set key (or push onto it). */
static inline void *do_later(void *arg) {
  later_op *op = arg;
  usleep((useconds_t)op->delay_ms * 1000);
  if (op->queue)
    dist_store_queue_push(op->clone, op->key, "late", 4);
  else
    dist_store_set(op->clone, op->key, "late", 4);
  /* A round trip, so a fire-and-forget set has landed before we close. */
  int64_t n;
  dist_store_num_keys(op->clone, &n);
  return NULL;
}

static inline pthread_t start_later(dist_store *s, later_op *op) {
  OK(dist_store_clone(s, &op->clone));
  pthread_t t;
  pthread_create(&t, NULL, do_later, op);
  return t;
}

static inline void end_later(pthread_t t, later_op *op) {
  pthread_join(t, NULL);
  dist_store_destroy(op->clone);
}

#define STORE_CASES(suite, mk, unmk)                                                             \
  Test(suite, set_then_get_returns_the_bytes, .timeout = 20) {                         \
    dist_store *s = mk();                                                            \
    const char bin[] = {'a', 0, 'b', (char)0xff};                                      \
    OK(dist_store_set(s, "k", bin, sizeof bin));                                       \
    expect_value(s, "k", bin, sizeof bin);                                             \
    OK(dist_store_set(s, "k", "second", 6));                                           \
    expect_value(s, "k", "second", 6);                                                 \
    OK(dist_store_set(s, "empty", NULL, 0));                                           \
    expect_value(s, "empty", "", 0);                                                   \
    dist_store_destroy(s);                                                             \
    unmk();                                                                          \
  }                                                                                    \
  Test(suite, get_waits_until_another_thread_sets_the_key, .timeout = 20) {            \
    dist_store *s = mk();                                                            \
    later_op op = {NULL, 150, "late_key", false};                                      \
    pthread_t t = start_later(s, &op);                                                 \
    expect_value(s, "late_key", "late", 4);                                            \
    end_later(t, &op);                                                                 \
    dist_store_destroy(s);                                                             \
    unmk();                                                                          \
  }                                                                                    \
  Test(suite, get_times_out_with_DIST_E_TIMEOUT_naming_the_key, .timeout = 20) {       \
    dist_store *s = mk();                                                            \
    OK(dist_store_set_timeout(s, 200));                                                \
    void *v = (void *)1;                                                               \
    int rc = dist_store_get(s, "absent_key", &v, NULL);                                \
    cr_assert_eq(rc, DIST_E_TIMEOUT, "%s", dist_status_name(rc));                      \
    cr_assert_null(v);                                                                 \
    cr_assert(strstr(dist_store_errmsg(s), "absent_key"), "%s", dist_store_errmsg(s));   \
    OK(dist_store_set(s, "x", "1", 1));                                                \
    cr_assert_str_eq(dist_store_errmsg(s), "", "the next call clears the message");    \
    dist_store_destroy(s);                                                             \
    unmk();                                                                          \
  }                                                                                    \
  Test(suite, add_counts_and_reads_back_as_decimal_text, .timeout = 20) {              \
    dist_store *s = mk();                                                            \
    int64_t r = 0;                                                                     \
    OK(dist_store_add(s, "ctr", 5, &r));                                               \
    cr_assert_eq(r, 5);                                                                \
    OK(dist_store_add(s, "ctr", -7, &r));                                              \
    cr_assert_eq(r, -2);                                                               \
    OK(dist_store_add(s, "ctr", 0, NULL));                                             \
    expect_value(s, "ctr", "-2", 2);                                                   \
    dist_store_destroy(s);                                                             \
    unmk();                                                                          \
  }                                                                                    \
  Test(suite, add_on_a_key_written_by_set_is_DIST_E_INVAL, .timeout = 20) {            \
    dist_store *s = mk();                                                            \
    OK(dist_store_set(s, "blob", "7", 1));                                             \
    int rc = dist_store_add(s, "blob", 1, NULL);                                       \
    cr_assert_eq(rc, DIST_E_INVAL, "%s", dist_status_name(rc));                        \
    cr_assert(strstr(dist_store_errmsg(s), "blob"), "%s", dist_store_errmsg(s));       \
    expect_value(s, "blob", "7", 1);                                                   \
    dist_store_destroy(s);                                                             \
    unmk();                                                                          \
  }                                                                                    \
  Test(suite, append_creates_then_extends_the_value, .timeout = 20) {                  \
    dist_store *s = mk();                                                            \
    OK(dist_store_append(s, "log", "ab", 2));                                          \
    OK(dist_store_append(s, "log", "cd", 2));                                          \
    expect_value(s, "log", "abcd", 4);                                                 \
    dist_store_destroy(s);                                                             \
    unmk();                                                                          \
  }                                                                                    \
  Test(suite, check_reports_whether_every_key_exists_without_waiting, .timeout = 20) { \
    dist_store *s = mk();                                                            \
    const char *keys[] = {"c1", "c2"};                                                 \
    bool all = true;                                                                   \
    OK(dist_store_check(s, keys, 2, &all));                                            \
    cr_assert(!all);                                                                   \
    OK(dist_store_set(s, "c1", "x", 1));                                               \
    OK(dist_store_check(s, keys, 2, &all));                                            \
    cr_assert(!all);                                                                   \
    OK(dist_store_set(s, "c2", "y", 1));                                               \
    OK(dist_store_check(s, keys, 2, &all));                                            \
    cr_assert(all);                                                                    \
    dist_store_destroy(s);                                                             \
    unmk();                                                                          \
  }                                                                                    \
  Test(suite, compare_set_follows_torch_rules, .timeout = 20) {                        \
    dist_store *s = mk();                                                            \
    void *r;                                                                           \
    size_t n;                                                                          \
    /* absent, expected non-empty: returns expected, stays absent */                   \
    OK(dist_store_compare_set(s, "cas", "old", 3, "new", 3, &r, &n));                  \
    cr_assert(n == 3 && memcmp(r, "old", 3) == 0);                                     \
    dist_free(r);                                                                      \
    bool all;                                                                          \
    const char *k = "cas";                                                             \
    OK(dist_store_check(s, &k, 1, &all));                                              \
    cr_assert(!all);                                                                   \
    /* absent, expected empty: becomes desired */                                      \
    OK(dist_store_compare_set(s, "cas", "", 0, "v1", 2, &r, &n));                      \
    cr_assert(n == 2 && memcmp(r, "v1", 2) == 0);                                      \
    dist_free(r);                                                                      \
    /* mismatch: returns the current value, no change */                               \
    OK(dist_store_compare_set(s, "cas", "zz", 2, "v2", 2, &r, &n));                    \
    cr_assert(n == 2 && memcmp(r, "v1", 2) == 0);                                      \
    dist_free(r);                                                                      \
    /* match: becomes desired */                                                       \
    OK(dist_store_compare_set(s, "cas", "v1", 2, "v2", 2, &r, &n));                    \
    cr_assert(n == 2 && memcmp(r, "v2", 2) == 0);                                      \
    dist_free(r);                                                                      \
    expect_value(s, "cas", "v2", 2);                                                   \
    dist_store_destroy(s);                                                             \
    unmk();                                                                          \
  }                                                                                    \
  Test(suite, delete_key_says_whether_the_key_existed, .timeout = 20) {                \
    dist_store *s = mk();                                                            \
    bool d = true;                                                                     \
    OK(dist_store_delete_key(s, "dk", &d));                                            \
    cr_assert(!d);                                                                     \
    OK(dist_store_set(s, "dk", "x", 1));                                               \
    OK(dist_store_delete_key(s, "dk", &d));                                            \
    cr_assert(d);                                                                      \
    bool all;                                                                          \
    const char *k = "dk";                                                              \
    OK(dist_store_check(s, &k, 1, &all));                                              \
    cr_assert(!all);                                                                   \
    dist_store_destroy(s);                                                             \
    unmk();                                                                          \
  }                                                                                    \
  Test(suite, multi_set_then_multi_get_round_trips, .timeout = 20) {                   \
    dist_store *s = mk();                                                            \
    const char *keys[] = {"m1", "m2", "m3"};                                           \
    const void *vals[] = {"one", "", "three"};                                         \
    size_t lens[] = {3, 0, 5};                                                         \
    OK(dist_store_multi_set(s, keys, vals, lens, 3));                                  \
    void *got[3];                                                                      \
    size_t gl[3];                                                                      \
    OK(dist_store_multi_get(s, keys, 3, got, gl));                                     \
    for (int i = 0; i < 3; i++) {                                                      \
      cr_assert_eq(gl[i], lens[i]);                                                    \
      cr_assert(memcmp(got[i], vals[i], lens[i]) == 0);                                \
      dist_free(got[i]);                                                               \
    }                                                                                  \
    OK(dist_store_set_timeout(s, 150));                                                \
    const char *some[] = {"m1", "m_absent"};                                           \
    int rc = dist_store_multi_get(s, some, 2, got, gl);                                \
    cr_assert_eq(rc, DIST_E_TIMEOUT);                                                  \
    cr_assert(got[0] == NULL && got[1] == NULL, "no value on failure");                \
    cr_assert(strstr(dist_store_errmsg(s), "m_absent"));                               \
    dist_store_destroy(s);                                                             \
    unmk();                                                                          \
  }                                                                                    \
  Test(suite, num_keys_counts_values_but_not_queues, .timeout = 20) {                  \
    dist_store *s = mk();                                                            \
    int64_t n0, n;                                                                     \
    OK(dist_store_num_keys(s, &n0));                                                   \
    OK(dist_store_set(s, "n1", "a", 1));                                               \
    OK(dist_store_add(s, "n2", 1, NULL));                                              \
    OK(dist_store_queue_push(s, "nq", "a", 1));                                        \
    OK(dist_store_num_keys(s, &n));                                                    \
    cr_assert_eq(n, n0 + 2, "%lld vs %lld", (long long)n, (long long)n0);              \
    dist_store_destroy(s);                                                             \
    unmk();                                                                          \
  }                                                                                    \
  Test(suite, wait_times_out_with_DIST_E_TIMEOUT_naming_only_missing_keys,             \
       .timeout = 20) {                                                                \
    dist_store *s = mk();                                                            \
    OK(dist_store_set(s, "here", "x", 1));                                             \
    const char *keys[] = {"here", "missing_one", "missing_two"};                       \
    int rc = dist_store_wait(s, keys, 3, 150);                                         \
    cr_assert_eq(rc, DIST_E_TIMEOUT, "%s", dist_status_name(rc));                      \
    const char *m = dist_store_errmsg(s);                                              \
    cr_assert(strstr(m, "missing_one") && strstr(m, "missing_two"), "%s", m);          \
    cr_assert(!strstr(m, "'here'"), "names only the missing keys: %s", m);             \
    OK(dist_store_wait(s, keys, 1, DIST_STORE_DEFAULT_TIMEOUT));                       \
    dist_store_destroy(s);                                                             \
    unmk();                                                                          \
  }                                                                                    \
  Test(suite, wait_returns_when_another_thread_sets_the_last_key, .timeout = 20) {     \
    dist_store *s = mk();                                                            \
    OK(dist_store_set(s, "w1", "x", 1));                                               \
    later_op op = {NULL, 100, "w2", false};                                            \
    pthread_t t = start_later(s, &op);                                                 \
    const char *keys[] = {"w1", "w2"};                                                 \
    OK(dist_store_wait(s, keys, 2, 10000));                                            \
    end_later(t, &op);                                                                 \
    dist_store_destroy(s);                                                             \
    unmk();                                                                          \
  }                                                                                    \
  Test(suite, queue_is_fifo_and_reports_its_length, .timeout = 20) {                   \
    dist_store *s = mk();                                                            \
    int64_t n;                                                                         \
    OK(dist_store_queue_len(s, "q", &n));                                              \
    cr_assert_eq(n, 0);                                                                \
    OK(dist_store_queue_push(s, "q", "first", 5));                                     \
    OK(dist_store_queue_push(s, "q", "second", 6));                                    \
    OK(dist_store_queue_len(s, "q", &n));                                              \
    cr_assert_eq(n, 2);                                                                \
    void *v;                                                                           \
    size_t l;                                                                          \
    OK(dist_store_queue_pop(s, "q", false, &v, &l));                                   \
    cr_assert(l == 5 && memcmp(v, "first", 5) == 0);                                   \
    dist_free(v);                                                                      \
    OK(dist_store_queue_pop(s, "q", true, &v, &l));                                    \
    cr_assert(l == 6 && memcmp(v, "second", 6) == 0);                                  \
    dist_free(v);                                                                      \
    int rc = dist_store_queue_pop(s, "q", false, &v, &l);                              \
    cr_assert_eq(rc, DIST_E_TIMEOUT, "a non-blocking pop of an empty queue");          \
    dist_store_destroy(s);                                                             \
    unmk();                                                                          \
  }                                                                                    \
  Test(suite, blocking_queue_pop_waits_for_a_push_or_times_out, .timeout = 20) {       \
    dist_store *s = mk();                                                            \
    later_op op = {NULL, 100, "bq", true};                                             \
    pthread_t t = start_later(s, &op);                                                 \
    void *v;                                                                           \
    size_t l;                                                                          \
    OK(dist_store_queue_pop(s, "bq", true, &v, &l));                                   \
    cr_assert(l == 4 && memcmp(v, "late", 4) == 0);                                    \
    dist_free(v);                                                                      \
    end_later(t, &op);                                                                 \
    OK(dist_store_set_timeout(s, 150));                                                \
    int rc = dist_store_queue_pop(s, "bq", true, &v, &l);                              \
    cr_assert_eq(rc, DIST_E_TIMEOUT);                                                  \
    cr_assert(strstr(dist_store_errmsg(s), "bq"), "%s", dist_store_errmsg(s));         \
    dist_store_destroy(s);                                                             \
    unmk();                                                                          \
  }                                                                                    \
  Test(suite, set_timeout_is_read_back_by_get_timeout, .timeout = 20) {                \
    dist_store *s = mk();                                                            \
    OK(dist_store_set_timeout(s, 1234));                                               \
    cr_assert_eq(dist_store_get_timeout(s), 1234);                                     \
    OK(dist_store_set_timeout(s, DIST_STORE_DEFAULT_TIMEOUT));                         \
    cr_assert_eq(dist_store_get_timeout(s), DIST_STORE_DEFAULT_TIMEOUT_MS);            \
    cr_assert_eq(dist_store_set_timeout(s, 0), DIST_E_INVAL);                          \
    dist_store_destroy(s);                                                             \
    unmk();                                                                          \
  }                                                                                    \
  Test(suite, clone_sees_the_same_keys, .timeout = 20) {                               \
    dist_store *s = mk();                                                            \
    OK(dist_store_set_timeout(s, 4321));                                               \
    dist_store *c;                                                                     \
    OK(dist_store_clone(s, &c));                                                       \
    cr_assert_eq(dist_store_get_timeout(c), 4321);                                     \
    OK(dist_store_add(c, "shared", 2, NULL));                                          \
    expect_value(s, "shared", "2", 1);                                                 \
    dist_store_destroy(c);                                                             \
    expect_value(s, "shared", "2", 1);                                                 \
    dist_store_destroy(s);                                                             \
    unmk();                                                                          \
  }                                                                                    \
  Test(suite, bad_arguments_are_DIST_E_INVAL_with_a_message, .timeout = 20) {          \
    dist_store *s = mk();                                                            \
    cr_assert_eq(dist_store_set(NULL, "k", "v", 1), DIST_E_INVAL);                     \
    cr_assert_eq(dist_store_set(s, NULL, "v", 1), DIST_E_INVAL);                       \
    cr_assert(strlen(dist_store_errmsg(s)) > 0);                                       \
    cr_assert_eq(dist_store_set(s, "k", NULL, 3), DIST_E_INVAL);                       \
    static char longkey[DIST_STORE_MAX_KEY + 2];                                       \
    memset(longkey, 'k', sizeof longkey - 1);                                          \
    cr_assert_eq(dist_store_set(s, longkey, "v", 1), DIST_E_INVAL);                    \
    cr_assert(strstr(dist_store_errmsg(s), "longer"), "%s", dist_store_errmsg(s));     \
    cr_assert_eq(dist_store_set(s, "k", "v", (size_t)DIST_STORE_MAX_VALUE + 1),        \
                 DIST_E_INVAL);                                                        \
    cr_assert_eq(dist_store_get(s, "k", NULL, NULL), DIST_E_INVAL);                    \
    cr_assert_eq(dist_store_wait(s, (const char *const[]){"k"}, 1, -5), DIST_E_INVAL); \
    cr_assert_eq(dist_store_check(s, NULL, 1, NULL), DIST_E_INVAL);                    \
    dist_store_destroy(NULL);                                                          \
    dist_store_destroy(s);                                                             \
    unmk();                                                                          \
  }

#endif
