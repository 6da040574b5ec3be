/* ctest: labels=unit timeout=60 */
/* Logging: torch's effective-level matrix from DIST_LOG_LEVEL / DIST_DEBUG
 * (and TORCH_CPP_LOG_LEVEL / TORCH_DISTRIBUTED_DEBUG when ours are unset),
 * the replaceable sink, subsystem filters, the line prefix, and a clear
 * warning for an unknown value. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "base/dist_int.h"
#include "tmpdir.h"

#define MAX_LINES 32
static char lines[MAX_LINES][512];
static int n_lines;

static void capture(void *arg, dist_log_level lvl, dist_subsys sub, const char *line) {
  (void)arg;
  (void)lvl;
  (void)sub;
  if (n_lines < MAX_LINES)
    snprintf(lines[n_lines++], sizeof lines[0], "%s", line);
}

static void clear_env(void) {
  unsetenv("DIST_LOG_LEVEL");
  unsetenv("DIST_DEBUG");
  unsetenv("TORCH_CPP_LOG_LEVEL");
  unsetenv("TORCH_DISTRIBUTED_DEBUG");
  unsetenv("DIST_LOG_SUBSYS");
  unsetenv("DIST_LOG_FILE");
}

static dist_log_level level_for(const char *log_level, const char *debug) {
  clear_env();
  if (log_level)
    setenv("DIST_LOG_LEVEL", log_level, 1);
  if (debug)
    setenv("DIST_DEBUG", debug, 1);
  dist_set_debug_level_from_env();
  return dist_log_get_level();
}

Test(core_log, effective_level_follows_torchs_matrix, .timeout = 10) {
  cr_assert_eq(level_for(NULL, NULL), DIST_LOG_WARNING);
  cr_assert_eq(level_for("ERROR", NULL), DIST_LOG_ERROR);
  cr_assert_eq(level_for("WARNING", NULL), DIST_LOG_WARNING);
  cr_assert_eq(level_for("INFO", NULL), DIST_LOG_INFO);
  cr_assert_eq(level_for("INFO", "INFO"), DIST_LOG_DEBUG);
  cr_assert_eq(level_for("INFO", "DETAIL"), DIST_LOG_TRACE);
  /* The debug level alone does not raise the log level (torch neither). */
  cr_assert_eq(level_for("WARNING", "DETAIL"), DIST_LOG_WARNING);
  cr_assert_eq(dist_get_debug_level(), DIST_DEBUG_DETAIL);
  cr_assert_eq(level_for("ERROR", "DETAIL"), DIST_LOG_ERROR);
}

Test(core_log, torch_variables_are_read_when_ours_are_unset, .timeout = 10) {
  clear_env();
  setenv("TORCH_CPP_LOG_LEVEL", "INFO", 1);
  setenv("TORCH_DISTRIBUTED_DEBUG", "DETAIL", 1);
  dist_set_debug_level_from_env();
  cr_assert_eq(dist_log_get_level(), DIST_LOG_TRACE);
  cr_assert_eq(dist_get_debug_level(), DIST_DEBUG_DETAIL);
  setenv("DIST_DEBUG", "OFF", 1); /* ours wins */
  dist_set_debug_level_from_env();
  cr_assert_eq(dist_get_debug_level(), DIST_DEBUG_OFF);
  cr_assert_eq(dist_log_get_level(), DIST_LOG_INFO);
}

Test(core_log, unknown_debug_value_warns_naming_the_accepted_ones, .timeout = 10) {
  clear_env();
  n_lines = 0;
  dist_log_set_sink(capture, NULL);
  setenv("DIST_DEBUG", "VERBOSE", 1);
  cr_assert_eq(dist_set_debug_level_from_env(), DIST_E_INVAL);
  dist_log_set_sink(NULL, NULL);
  cr_assert_eq(n_lines, 1, "%d lines", n_lines);
  cr_assert(strstr(lines[0], "DIST_DEBUG='VERBOSE'") && strstr(lines[0], "OFF, INFO, DETAIL"),
            "%s", lines[0]);
  cr_assert(strstr(lines[0], " WARN "), "not a warning: %s", lines[0]);
  cr_assert_eq(dist_get_debug_level(), DIST_DEBUG_OFF);
  cr_assert(strstr(dist_last_errmsg(), "VERBOSE"));
}

Test(core_log, unknown_log_level_warns_too, .timeout = 10) {
  clear_env();
  n_lines = 0;
  dist_log_set_sink(capture, NULL);
  setenv("DIST_LOG_LEVEL", "LOUD", 1);
  cr_assert_eq(dist_set_debug_level_from_env(), DIST_E_INVAL);
  dist_log_set_sink(NULL, NULL);
  cr_assert_eq(n_lines, 1);
  cr_assert(strstr(lines[0], "ERROR, WARNING, INFO"), "%s", lines[0]);
}

Test(core_log, sink_receives_prefixed_lines_that_pass_the_filters, .timeout = 10) {
  level_for("INFO", NULL);
  n_lines = 0;
  dist_log_set_sink(capture, NULL);
  dist_log_set_rank(3);
  DIST_LOG(INFO, STORE, "hello %d", 42);
  DIST_LOG(DEBUG, STORE, "filtered out");
  DIST_LOG(TRACE, PG, "filtered out");
  dist_log(DIST_LOG_WARNING, DIST_SUBSYS_PG, "from an application");
  dist_log_set_sink(NULL, NULL);
  dist_log_set_rank(-1);
  cr_assert_eq(n_lines, 2, "%d lines", n_lines);
  char want[128];
  snprintf(want, sizeof want, "%s:%d:", dist__hostname(), (int)getpid());
  cr_assert(!strncmp(lines[0], want, strlen(want)), "prefix of: %s", lines[0]);
  cr_assert(strstr(lines[0], " [3] STORE INFO hello 42"), "%s", lines[0]);
  cr_assert(strstr(lines[1], " [3] PG WARN from an application"), "%s", lines[1]);
}

Test(core_log, subsystem_mask_shows_only_what_is_asked, .timeout = 10) {
  level_for("INFO", NULL);
  setenv("DIST_LOG_SUBSYS", "^STORE", 1);
  dist_set_debug_level_from_env();
  n_lines = 0;
  dist_log_set_sink(capture, NULL);
  DIST_LOG(INFO, STORE, "hidden");
  DIST_LOG(INFO, TCP, "shown");
  setenv("DIST_LOG_SUBSYS", "STORE", 1);
  dist_set_debug_level_from_env();
  DIST_LOG(INFO, STORE, "shown too");
  DIST_LOG(INFO, TCP, "hidden");
  dist_log_set_sink(NULL, NULL);
  cr_assert_eq(n_lines, 2, "%d lines", n_lines);
  cr_assert(strstr(lines[0], "shown") && strstr(lines[1], "shown too"));
}

Test(core_log, log_file_pattern_expands_host_pid_and_rank, .timeout = 10) {
  char dir[] = "/tmp/dist-log-XXXXXX";
  cr_assert(dist_test_mkdtemp(dir));
  char pat[128];
  snprintf(pat, sizeof pat, "%s/%%h-%%p-%%r.log", dir);
  clear_env();
  setenv("DIST_LOG_FILE", pat, 1);
  setenv("RANK", "5", 1);
  dist_set_debug_level_from_env();
  DIST_LOG(WARNING, CORE, "to the file");
  char path[256];
  snprintf(path, sizeof path, "%s/%s-%d-5.log", dir, dist__hostname(), (int)getpid());
  FILE *f = fopen(path, "r");
  cr_assert(f, "no log file at %s", path);
  char buf[512] = "";
  cr_assert(fgets(buf, sizeof buf, f));
  fclose(f);
  cr_assert(strstr(buf, "CORE WARN to the file"), "%s", buf);
  unsetenv("DIST_LOG_FILE");
  unsetenv("RANK");
}

/* Issue #9, defect 3: every DIST_ variable with a bad value gets one
 * warning per process naming it, the value, what is accepted and what is
 * used; DIST_TIMEOUT takes the forms a user types. */
Test(core_log, a_bad_variable_warns_once_per_process, .timeout = 10) {
  clear_env();
  setenv("DIST_DEBUG", "BOGUS", 1);
  dist_log_set_sink(capture, NULL);
  n_lines = 0;
  dist_set_debug_level_from_env();
  dist_set_debug_level_from_env(); /* distrun reads it again: still one line */
  setenv("DIST_TIMEOUT", "abc", 1);
  cr_assert_eq(dist__default_timeout_ms(), DIST_DEFAULT_TIMEOUT_MS);
  cr_assert_eq(dist__default_timeout_ms(), DIST_DEFAULT_TIMEOUT_MS);
  dist_log_set_sink(NULL, NULL);
  unsetenv("DIST_DEBUG");
  unsetenv("DIST_TIMEOUT");
  cr_assert_eq(n_lines, 2, "%d lines, want one per variable: %s | %s", n_lines, lines[0],
               lines[1]);
  cr_assert(strstr(lines[0], "DIST_DEBUG='BOGUS' is not valid: accepted: OFF, INFO, DETAIL; "
                             "using OFF"), "%s", lines[0]);
  cr_assert(strstr(lines[1], "DIST_TIMEOUT='abc' is not valid: accepted: seconds") &&
                strstr(lines[1], "30s, 2m") && strstr(lines[1], "using 600 s"),
            "%s", lines[1]);
}

Test(core_log, dist_timeout_takes_the_forms_a_user_types, .timeout = 10) {
  clear_env();
  const char *in[] = {"1.5", "30s", "2m", "500ms", "1h", "45"};
  const int64_t want[] = {1500, 30000, 120000, 500, 3600000, 45000};
  for (size_t i = 0; i < sizeof in / sizeof in[0]; i++) {
    setenv("DIST_TIMEOUT", in[i], 1);
    cr_expect_eq(dist__default_timeout_ms(), want[i], "DIST_TIMEOUT=%s", in[i]);
  }
  const char *bad[] = {"2s5", "-3", "0", "1.5x", "m"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    setenv("DIST_TIMEOUT", bad[i], 1);
    cr_expect_eq(dist__default_timeout_ms(), DIST_DEFAULT_TIMEOUT_MS, "DIST_TIMEOUT=%s", bad[i]);
  }
  unsetenv("DIST_TIMEOUT");
}

/* Issue #9, defect 9: DIST_LOG_FILE in a missing directory is said once,
 * and the lines go to stderr instead of nowhere. */
Test(core_log, a_log_file_that_cannot_be_opened_is_said_and_stderr_used, .timeout = 10) {
  char tmp[] = "/tmp/dist-stderr-XXXXXX";
  int fd = mkstemp(tmp);
  cr_assert(fd >= 0);
  int saved = dup(STDERR_FILENO);
  dup2(fd, STDERR_FILENO);
  clear_env();
  setenv("DIST_LOG_FILE", "/nonexistent-dist-dir/run-%r.log", 1);
  dist_set_debug_level_from_env();
  DIST_LOG(WARNING, CORE, "first line");
  DIST_LOG(WARNING, CORE, "second line");
  dup2(saved, STDERR_FILENO);
  close(saved);
  unsetenv("DIST_LOG_FILE");
  char buf[4096] = "";
  ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
  close(fd);
  unlink(tmp);
  cr_assert(n > 0, "nothing on stderr");
  buf[n] = '\0';
  const char *w = strstr(buf, "DIST_LOG_FILE='/nonexistent-dist-dir/run-%r.log': cannot open");
  cr_assert(w && strstr(w, "logging to stderr"), "%s", buf);
  cr_assert(!strstr(strstr(w, "cannot open") + 1, "cannot open"), "said twice: %s", buf);
  cr_assert(strstr(buf, "first line") && strstr(buf, "second line"), "%s", buf);
}

/* Integer variables read through dist__env_int (the monitor's
 * DIST_SHOW_STACKTRACES) take torch's name when ours is unset, and a bad
 * value is warned about under the name that was read. */
Test(core_log, integer_variables_take_torchs_name_when_ours_is_unset, .timeout = 10) {
  int64_t v = -1;
  unsetenv("DIST_SHOW_STACKTRACES");
  setenv("TORCH_SHOW_CPP_STACKTRACES", "1", 1);
  cr_assert_eq(dist__env_int("DIST_SHOW_STACKTRACES", 0, 1, 0, &v), DIST_OK);
  cr_assert_eq(v, 1);
  setenv("DIST_SHOW_STACKTRACES", "0", 1); /* ours wins */
  cr_assert_eq(dist__env_int("DIST_SHOW_STACKTRACES", 0, 1, 0, &v), DIST_OK);
  cr_assert_eq(v, 0);
  unsetenv("DIST_SHOW_STACKTRACES");
  setenv("TORCH_SHOW_CPP_STACKTRACES", "7", 1);
  dist_log_set_sink(capture, NULL);
  n_lines = 0;
  cr_assert_eq(dist__env_int("DIST_SHOW_STACKTRACES", 0, 1, 0, &v), DIST_E_INVAL);
  dist_log_set_sink(NULL, NULL);
  unsetenv("TORCH_SHOW_CPP_STACKTRACES");
  cr_assert_eq(v, 0);
  cr_assert_eq(n_lines, 1);
  cr_assert(strstr(lines[0], "TORCH_SHOW_CPP_STACKTRACES='7' is not valid"), "%s", lines[0]);
}
