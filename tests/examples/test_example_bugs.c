/* ctest: labels=multiproc timeout=300 */
/* example_bugs (examples/bugs.c) as a user runs it: --list and --help, and
 * `distrun -n 4 example_bugs --bug shape` at DIST_DEBUG=OFF, where the CPU
 * backend's own count check catches the planted bug: distrun exits 10 and
 * prints the report naming the culprit last. (The DETAIL cases belong to
 * the checking layer's suite.) */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

typedef struct run {
  int status;
  char out[65536]; /* stdout and stderr */
} run;

static void run_cmd(const char *env, const char *args, run *r) {
  const char *bin = getenv("DIST_TEST_BIN");
  cr_assert(bin, "DIST_TEST_BIN is not set (run through ctest)");
  char cmd[1024];
  snprintf(cmd, sizeof cmd, "env -u DIST_DEBUG -u TORCH_DISTRIBUTED_DEBUG %s timeout 120 %s 2>&1",
           env, args);
  char full[2048];
  /* every "@" in args is the bin directory */
  size_t o = 0;
  for (const char *p = cmd; *p && o + 1024 < sizeof full; p++)
    o += *p == '@' ? (size_t)snprintf(full + o, sizeof full - o, "%s/", bin)
                   : (size_t)snprintf(full + o, sizeof full - o, "%c", *p);
  FILE *f = popen(full, "r");
  cr_assert(f, "cannot run %s", full);
  size_t len = fread(r->out, 1, sizeof r->out - 1, f);
  r->out[len] = '\0';
  int st = pclose(f);
  r->status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  cr_log_info("%s\n%s", full, r->out);
}

Test(examples_bugs, list_names_every_bug, .timeout = 30) {
  static run r;
  run_cmd("", "@example_bugs --list", &r);
  cr_assert_eq(r.status, 0, "%s", r.out);
  const char *names[] = {"shape ", "dtype ", "op ", "redop ", "root ", "split ", "skip ",
                         "group-order ", "barrier ", "nan "};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    char line[32];
    snprintf(line, sizeof line, "\n%s", names[i]);
    cr_expect(strncmp(r.out, names[i], strlen(names[i])) == 0 || strstr(r.out, line),
              "no line for %s in:\n%s", names[i], r.out);
  }
}

Test(examples_bugs, help_and_bad_arguments, .timeout = 30) {
  static run r;
  run_cmd("", "@example_bugs --help", &r);
  cr_expect_eq(r.status, 0, "%s", r.out);
  cr_expect(strstr(r.out, "usage: distrun -n N") && strstr(r.out, "--bug NAME"), "%s", r.out);
  run_cmd("", "@example_bugs --bug no-such-bug", &r);
  cr_expect_eq(r.status, 2, "%s", r.out);
  cr_expect(strstr(r.out, "no such bug"), "%s", r.out);
  run_cmd("", "@example_bugs", &r);
  cr_expect_eq(r.status, 2, "%s", r.out);
}

Test(examples_bugs, shape_at_OFF_exits_10_with_the_report_last, .timeout = 150) {
  static run r;
  run_cmd("DIST_DEBUG=OFF", "@distrun -n 4 @example_bugs --bug shape", &r);
  cr_assert_eq(r.status, 10, "distrun exited %d:\n%s", r.status, r.out);
  cr_expect(strstr(r.out, "[3] rank 3 planted bug 'shape': all_reduce of float32[2048]"), "%s",
            r.out);
  const char *last = strstr(r.out, "distrun: exit status 10 (desync)");
  cr_assert(last, "%s", r.out);
  const char *rep = strstr(last, "\ndesync in group 0 (default, 4 ranks) at ALL_REDUCE #4: ");
  cr_assert(rep, "no report after the status line:\n%s", r.out);
  cr_expect(strstr(rep, "rank 3: ALL_REDUCE float32[2048] op=SUM (8192 bytes)  <- count differs") &&
            strstr(rep, " ALL_REDUCE float32[1024] op=SUM (4096 bytes)"), "%s", rep);
  cr_expect(strstr(rep, "\n  reported by rank "), "%s", rep);
  cr_expect(!strstr(rep, "\n["), "rank output after the report:\n%s", rep);
}

/* At DETAIL the checking layer stops each bug before it runs (it is merged
 * with this suite's branch): distrun's status, and the report last naming
 * the field that differs, the culprit (rank 3) and the bug's own line. */
static void detail_case(const char *bug, int want_status, const char *field) {
  static run r;
  char args[256];
  snprintf(args, sizeof args, "@distrun -n 4 @example_bugs --bug %s --timeout 4", bug);
  run_cmd("DIST_DEBUG=DETAIL", args, &r);
  cr_assert_eq(r.status, want_status, "%s: distrun exited %d:\n%s", bug, r.status, r.out);
  const char *last = strstr(r.out, "distrun: exit status ");
  cr_assert(last, "%s", r.out);
  const char *rep = strchr(last, '\n');
  cr_assert(rep, "%s", r.out);
  cr_expect(strstr(rep, field), "%s: no '%s' in the report:\n%s", bug, field, rep);
  cr_expect(!strstr(rep, "\n["), "rank output after the report:\n%s", rep);
}

Test(examples_bugs, detail_names_the_differing_shape, .timeout = 120) {
  detail_case("shape", 10, "rank 3:    ALL_REDUCE float32[2048] op=SUM (8192 bytes)  <- count differs");
}

Test(examples_bugs, detail_names_the_differing_root, .timeout = 120) {
  detail_case("root", 10, "<- root differs");
}

Test(examples_bugs, detail_names_the_differing_splits, .timeout = 120) {
  detail_case("split", 10, "rank 3 sends 5 rows to rank 0, which expects 4");
}

/* The culprit runs two all_reduces of three (after the program's three
 * setup collectives), then destroys its group and exits 0: the verdict is
 * that rank's early end (its exit code, distrun's 12: a rank's own end
 * outranks the desync it caused), and the report the others' view of it,
 * with its count and last call. */
Test(examples_bugs, detail_names_the_rank_that_skipped_and_left, .timeout = 120) {
  detail_case("skip", 12, "left after 5 collectives; its last operation was ALL_REDUCE #5, "
                          "called from bugs.c:");
}

Test(examples_bugs, detail_names_groups_created_in_another_order, .timeout = 120) {
  /* rank 3's line; its label's padding depends on which others are listed */
  detail_case("group-order", 10, "group 1 \"everyone\" of ranks 0,1,2,3  <- member list differs");
}

Test(examples_bugs, detail_names_the_ranks_stuck_in_a_barrier, .timeout = 120) {
  /* Whichever side posts first: the default group's ranks 1,2 "waiting in
   * BARRIER #1 of group 1", or group 1's rank 3 absent from BARRIER #1. */
  detail_case("barrier", 11, "BARRIER #1");
}

/* DIST_NAN_CHECK (set by the nan bug itself) at OFF: the culprit's call
 * fails before it runs; its report is the job's cause, printed last. */
Test(examples_bugs, nan_at_OFF_names_the_rank_and_index_last, .timeout = 120) {
  static run r;
  run_cmd("DIST_DEBUG=OFF", "@distrun -n 4 @example_bugs --bug nan", &r);
  cr_assert_eq(r.status, 12, "distrun exited %d:\n%s", r.status, r.out);
  const char *rep = strstr(r.out, "; the report follows\nNaN check (DIST_NAN_CHECK=1): rank 3 ");
  cr_assert(rep, "%s", r.out);
  cr_expect(strstr(rep, "ALL_REDUCE #4 of group 0 (default): input 0 float32[1024] holds NaN "
                        "at index 3"), "%s", rep);
}
