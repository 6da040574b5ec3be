/* runner.c (critlite) - main() for test executables of the ThreadSanitizer
 * build (see criterion/criterion.h for why Criterion cannot be used there).
 *
 * Runs every registered test in its own forked process, one at a time,
 * with the test's timeout (SIGKILL past it), and reports Criterion-style
 * lines. Accepts Criterion's flags that our CTest registration passes
 * (--jobs, --full-stats, --verbose) and --filter 'suite/name' globs (also
 * from CRITERION_TEST_PATTERN, with extended globs such as 'suite/!(name)',
 * as Criterion). Exits non-zero when any test failed. */
#include <fnmatch.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "criterion/criterion.h"

#define MAX_TESTS 1024
#define MAX_SUITES 128
#define SKIP_CODE 77

static struct critlite_test *tests[MAX_TESTS];
static int n_tests;
static struct critlite_suite *suites[MAX_SUITES];
static int n_suites;
static bool expectation_failed;
double critlite_current_timeout;

void critlite_register_test(struct critlite_test *t) {
  if (n_tests < MAX_TESTS)
    tests[n_tests++] = t;
}

void critlite_register_suite(struct critlite_suite *s) {
  if (n_suites < MAX_SUITES)
    suites[n_suites++] = s;
}

void critlite_check(bool ok, bool fatal, const char *file, int line, const char *expr,
                    const char *fmt, ...) {
  if (ok)
    return;
  char msg[4096];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  fprintf(stderr, "[----] %s:%d: %s\n[----]   %s\n", file, line,
          fatal ? "Assertion Failed" : "Expectation Failed", msg[0] ? msg : expr);
  expectation_failed = true;
  if (fatal) {
    fflush(stderr);
    _exit(1);
  }
}

void critlite_skip(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "[SKIP] ");
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, "\n");
  va_end(ap);
  fflush(stderr);
  _exit(SKIP_CODE);
}

void critlite_log(const char *level, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "[%s] ", level);
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, "\n");
  va_end(ap);
}

static const struct critlite_suite *suite_of(const struct critlite_test *t) {
  for (int i = 0; i < n_suites; i++)
    if (!strcmp(suites[i]->name, t->suite))
      return suites[i];
  return NULL;
}

static void run_child(const struct critlite_test *t) {
  const struct critlite_suite *s = suite_of(t);
  critlite_current_timeout = t->timeout > 0 ? t->timeout : s && s->timeout > 0 ? s->timeout : 0;
  if (s && s->init)
    s->init();
  if (t->init)
    t->init();
  t->fn();
  if (t->fini)
    t->fini();
  if (s && s->fini)
    s->fini();
  fflush(stdout);
  fflush(stderr);
  _exit(expectation_failed ? 1 : 0);
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* 0 passed, 1 failed, 2 skipped. */
static int run_one(const struct critlite_test *t) {
  const struct critlite_suite *s = suite_of(t);
  double timeout = t->timeout > 0 ? t->timeout : s && s->timeout > 0 ? s->timeout : 0;
  fflush(stdout);
  fflush(stderr);
  double t0 = now_s();
  pid_t pid = fork();
  if (pid == 0)
    run_child(t);
  int status = 0;
  bool timed_out = false;
  while (waitpid(pid, &status, WNOHANG) == 0) {
    if (timeout > 0 && now_s() - t0 > timeout) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      timed_out = true;
      break;
    }
    usleep(1000);
  }
  int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  int sig = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
  if (!timed_out && code == SKIP_CODE) {
    printf("[SKIP] %s::%s\n", t->suite, t->name);
    return 2;
  }
  bool ok = !timed_out && (t->signal ? sig == t->signal : code == t->exit_code && !sig);
  printf("[%s] %s::%s: (%.2fs)%s\n", ok ? "PASS" : "FAIL", t->suite, t->name, now_s() - t0,
         timed_out ? " timed out" : sig && !t->signal ? " crashed" : "");
  return ok ? 0 : 1;
}

static bool selected(const struct critlite_test *t, const char *filter) {
  if (!filter)
    return true;
  char full[512];
  snprintf(full, sizeof full, "%s/%s", t->suite, t->name);
  return fnmatch(filter, full, FNM_EXTMATCH) == 0;
}

/* Weak: a program that links the test support library for its helpers but
 * has its own main (an MPI rank program) keeps its own. */
__attribute__((weak)) int main(int argc, char **argv) {
  const char *filter = getenv("CRITERION_TEST_PATTERN");
  for (int i = 1; i < argc; i++)
    if (!strcmp(argv[i], "--filter") && i + 1 < argc)
      filter = argv[++i];
    else if (!strncmp(argv[i], "--filter=", 9))
      filter = argv[i] + 9;
  int passed = 0, failed = 0, skipped = 0;
  for (int i = 0; i < n_tests; i++) {
    const struct critlite_suite *s = suite_of(tests[i]);
    if (tests[i]->disabled || (s && s->disabled) || !selected(tests[i], filter))
      continue;
    int r = run_one(tests[i]);
    passed += r == 0;
    failed += r == 1;
    skipped += r == 2;
  }
  printf("[====] Synthesis: Tested: %d | Passing: %d | Failing: %d | Skipped: %d\n",
         passed + failed, passed, failed, skipped);
  return failed ? 1 : 0;
}
