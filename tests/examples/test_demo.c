/* ctest: labels=multiproc timeout=240 */
/* examples/demo.sh, the README's first command after the build, run as a
 * user runs it from a fresh directory: it must exit 0 because the story
 * happened (distrun exited 10 naming rank 3, the field and the line;
 * trace.db was left, distview read it and found the same desync) and end
 * by telling the user to open distview. Then trace.db is checked with SQL
 * through `distview sql`: every rank's rows are there, and the report. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tmpdir.h"

typedef struct run {
  int status;
  char out[1 << 17]; /* stdout and stderr */
} run;

static void sh(const char *cmd, run *r) {
  FILE *f = popen(cmd, "r");
  cr_assert(f, "cannot run %s", cmd);
  size_t len = fread(r->out, 1, sizeof r->out - 1, f);
  r->out[len] = '\0';
  int st = pclose(f);
  r->status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  cr_log_info("%s\n%s", cmd, r->out);
}

Test(examples_demo, the_readme_story_finds_the_planted_bug_and_leaves_a_trace, .timeout = 200) {
  const char *bin = getenv("DIST_TEST_BIN"), *src = getenv("DIST_TEST_SRC");
  cr_assert(bin && src, "DIST_TEST_BIN / DIST_TEST_SRC are not set (run through ctest)");
  char dir[] = "/tmp/dist-demo-XXXXXX";
  cr_assert(dist_test_mkdtemp(dir), "mkdtemp");
  char cmd[4096];
  snprintf(cmd, sizeof cmd,
           "cd %s && env -u DIST_DEBUG -u TORCH_DISTRIBUTED_DEBUG -u DIST_TRACE "
           "DIST_DEMO_BIN=%s timeout 150 sh %s/examples/demo.sh 2>&1",
           dir, bin, src);
  static run r;
  sh(cmd, &r);
  cr_assert_eq(r.status, 0, "demo.sh exited %d:\n%s", r.status, r.out);
  const char *last = strstr(r.out, "distrun: exit status 10 (desync)");
  cr_assert(last, "no exit status 10 line:\n%s", r.out);
  const char *rep = strstr(last, "\ndesync in group 0 (default, 4 ranks) at ALL_REDUCE #4: ");
  cr_assert(rep, "no report after distrun's status line:\n%s", r.out);
  cr_expect(strstr(rep, "rank 3:    ALL_REDUCE float32[2048] op=SUM (8192 bytes)  <- count differs"),
            "%s", rep);
  cr_expect(strstr(rep, "ranks 0-2: ALL_REDUCE float32[1024] op=SUM (4096 bytes)"), "%s", rep);
  cr_expect(strstr(rep, "called from bugs.c:") && strstr(rep, "in bug_shape()"), "%s", rep);
  cr_expect(strstr(r.out, "$ distview summary trace.db\njob "), "%s", r.out);
  cr_expect(strstr(r.out, "distview trace.db\n"), "no pointer to the viewer:\n%s", r.out);

  char db[256];
  snprintf(db, sizeof db, "%s/trace.db", dir);
  struct stat st;
  cr_assert(stat(db, &st) == 0 && st.st_size > 0, "no trace.db in %s", dir);
  snprintf(cmd, sizeof cmd,
           "%s/distview sql %s \"SELECT count(DISTINCT rank) FROM operations WHERE seq = 3 AND "
           "state = 'completed'\" 2>&1", bin, db);
  sh(cmd, &r);
  cr_expect(r.status == 0 && strstr(r.out, "4"), "every rank completed #3: %s", r.out);
  snprintf(cmd, sizeof cmd,
           "%s/distview sql %s \"SELECT count(*) FROM events WHERE kind = 'desync_report'\" 2>&1",
           bin, db);
  sh(cmd, &r);
  cr_expect(r.status == 0 && !strstr(r.out, "\n0\n") && strpbrk(r.out, "123456789"),
            "the desync report is in trace.db: %s", r.out);
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  cr_expect_eq(system(cmd), 0);
}
