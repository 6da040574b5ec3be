/* ctest: labels=unit timeout=60 */
/* Logging: torch's effective-level matrix from DIST_LOG_LEVEL / DIST_DEBUG
 * (and TORCH_CPP_LOG_LEVEL / TORCH_DISTRIBUTED_DEBUG when ours are unset),
 * the replaceable sink, subsystem filters, the line prefix, and a clear
 * warning for an unknown value. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "dist_int.h"

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
  cr_assert(mkdtemp(dir));
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
