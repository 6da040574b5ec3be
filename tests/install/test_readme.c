/* ctest: labels=install timeout=300 */
/* The README's program, as written, against an install made with the
 * README's own commands, run under distrun (issue #9, acceptance 3): the
 * first ```c block under "## Using it" becomes train.c, the ```sh block
 * after it runs as a script in a fresh directory whose `build` is this
 * build tree, with no LD_LIBRARY_PATH or PKG_CONFIG_PATH from outside.
 * A README whose snippet does not compile, whose commands do not install
 * or link, or whose program does not run fails here. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tmpdir.h"

static char *read_all(const char *path) {
  FILE *f = fopen(path, "r");
  cr_assert(f, "cannot open %s", path);
  static char buf[1 << 16];
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  buf[n] = '\0';
  fclose(f);
  return buf;
}

/* The body of the first fenced block opening with `fence` after `from`;
 * *next: just past it. */
static char *block(const char *from, const char *fence, const char **next) {
  const char *a = strstr(from, fence);
  cr_assert(a, "no %s block in the README", fence);
  a = strchr(a, '\n') + 1;
  const char *b = strstr(a, "\n```");
  cr_assert(b, "unterminated %s block", fence);
  *next = b + 4;
  return strndup(a, (size_t)(b - a + 1));
}

static void write_file(const char *dir, const char *name, const char *text) {
  char path[512];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "w");
  cr_assert(f, "cannot write %s", path);
  fputs(text, f);
  fclose(f);
}

Test(install, the_readme_program_builds_and_runs_as_the_readme_says, .timeout = 280) {
  char readme[512];
  snprintf(readme, sizeof readme, "%s/README.md", getenv("DIST_TEST_SRC"));
  const char *text = read_all(readme), *next;
  const char *using = strstr(text, "## Using it");
  cr_assert(using, "the README has no '## Using it' section");
  char *program = block(using, "```c", &next);
  char *commands = block(next, "```sh", &next);

  char work[] = "/tmp/dist-readme-XXXXXX";
  cr_assert(dist_test_mkdtemp(work));
  char link[600];
  snprintf(link, sizeof link, "%s/build", work);
  cr_assert_eq(symlink(getenv("DIST_TEST_BUILD"), link), 0);
  write_file(work, "train.c", program);
  write_file(work, "readme.sh", commands);

  char cmd[1400];
  snprintf(cmd, sizeof cmd, "cd '%s' && env -u LD_LIBRARY_PATH -u PKG_CONFIG_PATH sh -e "
           "readme.sh 2>&1", work);
  FILE *p = popen(cmd, "r");
  cr_assert(p);
  static char out[1 << 16];
  size_t n = fread(out, 1, sizeof out - 1, p);
  out[n] = '\0';
  int st = pclose(p);
  cr_assert_eq(st, 0, "the README's commands failed (%d):\n%s\n--- commands:\n%s", st, out,
               commands);
  /* Both ranks ran the program and agree on the average of 0 and 1. */
  cr_expect(strstr(out, "rank 0 of 2: average 0.5"), "%s", out);
  cr_expect(strstr(out, "rank 1 of 2: average 0.5"), "%s", out);
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", work);
  cr_expect_eq(system(cmd), 0);
  free(program);
  free(commands);
}
