/* criterion/criterion.h (critlite) - the subset of Criterion's API our
 * suites use, for the ThreadSanitizer build only.
 *
 * Why: Criterion cannot start under ThreadSanitizer (upstream issue
 * Snaipe/Criterion#274: its BoxFort arena maps shared memory at random
 * fixed addresses, which collide with TSan's shadow regions, and every
 * suite dies with "Could not initialize inheritable arena"). The TSan build
 * compiles the very same test files against this header and runner.c, which
 * keep Criterion's model: every test in its own forked process with its
 * timeout, assertions that end the test, expectations that mark it failed,
 * suite init/fini, skips. Every other build uses the real Criterion. */
#ifndef CRITLITE_CRITERION_H
#define CRITLITE_CRITERION_H

#include <stdbool.h>
#include <stddef.h>
#include <string.h>

struct critlite_suite {
  const char *name;
  void (*init)(void);
  void (*fini)(void);
  double timeout;
  const char *description;
  bool disabled;
};

struct critlite_test {
  const char *suite;
  const char *name;
  void (*fn)(void);
  void (*init)(void);
  void (*fini)(void);
  double timeout;
  int exit_code;
  int signal;
  const char *description;
  bool disabled;
};

/* The running test's timeout in seconds (0: none), as Criterion's
 * criterion_current_test->data->timeout; the rank harness stays below it. */
extern double critlite_current_timeout;

void critlite_register_test(struct critlite_test *t);
void critlite_register_suite(struct critlite_suite *s);
/* fatal: ends the test now; else marks it failed and goes on. */
/* No format attribute: an absent message is the empty format "", which
 * -Wformat-zero-length rejects; the real Criterion builds check formats. */
void critlite_check(bool ok, bool fatal, const char *file, int line, const char *expr,
                    const char *fmt, ...);
void critlite_skip(const char *fmt, ...);
void critlite_log(const char *level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define Test(S, N, ...)                                                                  \
  static void S##_##N##_impl(void);                                                      \
  static struct critlite_test S##_##N##_desc = {                                         \
      .suite = #S, .name = #N, .fn = S##_##N##_impl, __VA_ARGS__};                       \
  __attribute__((constructor)) static void S##_##N##_reg(void) {                         \
    critlite_register_test(&S##_##N##_desc);                                             \
  }                                                                                      \
  static void S##_##N##_impl(void)

#define TestSuite(S, ...)                                                                \
  static struct critlite_suite S##_suite_desc = {.name = #S, __VA_ARGS__};               \
  __attribute__((constructor)) static void S##_suite_reg(void) {                         \
    critlite_register_suite(&S##_suite_desc);                                            \
  }

/* The message is optional, as in Criterion: "" __VA_ARGS__ turns an absent
 * one into "" and a present format literal into itself. */
#define CRITLITE_CHECK(ok, fatal, expr, ...) \
  critlite_check((ok), (fatal), __FILE__, __LINE__, expr, "" __VA_ARGS__)

#define cr_assert(cond, ...) CRITLITE_CHECK(!!(cond), true, #cond, __VA_ARGS__)
#define cr_expect(cond, ...) CRITLITE_CHECK(!!(cond), false, #cond, __VA_ARGS__)
#define cr_assert_fail(...) CRITLITE_CHECK(false, true, "fail", __VA_ARGS__)
#define cr_assert_eq(a, b, ...) CRITLITE_CHECK((a) == (b), true, #a " == " #b, __VA_ARGS__)
#define cr_expect_eq(a, b, ...) CRITLITE_CHECK((a) == (b), false, #a " == " #b, __VA_ARGS__)
#define cr_assert_neq(a, b, ...) CRITLITE_CHECK((a) != (b), true, #a " != " #b, __VA_ARGS__)
#define cr_expect_neq(a, b, ...) CRITLITE_CHECK((a) != (b), false, #a " != " #b, __VA_ARGS__)
#define cr_assert_gt(a, b, ...) CRITLITE_CHECK((a) > (b), true, #a " > " #b, __VA_ARGS__)
#define cr_assert_lt(a, b, ...) CRITLITE_CHECK((a) < (b), true, #a " < " #b, __VA_ARGS__)
#define cr_assert_geq(a, b, ...) CRITLITE_CHECK((a) >= (b), true, #a " >= " #b, __VA_ARGS__)
#define cr_assert_leq(a, b, ...) CRITLITE_CHECK((a) <= (b), true, #a " <= " #b, __VA_ARGS__)
#define cr_expect_geq(a, b, ...) CRITLITE_CHECK((a) >= (b), false, #a " >= " #b, __VA_ARGS__)
#define cr_expect_leq(a, b, ...) CRITLITE_CHECK((a) <= (b), false, #a " <= " #b, __VA_ARGS__)
#define cr_expect_gt(a, b, ...) CRITLITE_CHECK((a) > (b), false, #a " > " #b, __VA_ARGS__)
#define cr_expect_lt(a, b, ...) CRITLITE_CHECK((a) < (b), false, #a " < " #b, __VA_ARGS__)
#define cr_assert_null(p, ...) CRITLITE_CHECK((p) == NULL, true, #p " == NULL", __VA_ARGS__)
#define cr_assert_not_null(p, ...) CRITLITE_CHECK((p) != NULL, true, #p " != NULL", __VA_ARGS__)
#define cr_assert_str_eq(a, b, ...) \
  CRITLITE_CHECK(strcmp((a), (b)) == 0, true, #a " == " #b, __VA_ARGS__)
#define cr_expect_str_eq(a, b, ...) \
  CRITLITE_CHECK(strcmp((a), (b)) == 0, false, #a " == " #b, __VA_ARGS__)
#define cr_assert_str_empty(a, ...) CRITLITE_CHECK(!*(a), true, #a " is empty", __VA_ARGS__)
#define cr_assert_str_neq(a, b, ...) \
  CRITLITE_CHECK(strcmp((a), (b)) != 0, true, #a " != " #b, __VA_ARGS__)
#define cr_skip_test(...) critlite_skip("" __VA_ARGS__)
#define cr_log_info(...) critlite_log("INFO", __VA_ARGS__)
#define cr_log_warn(...) critlite_log("WARN", __VA_ARGS__)
#define cr_log_error(...) critlite_log("ERROR", __VA_ARGS__)

#endif
