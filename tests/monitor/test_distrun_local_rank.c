/* ctest: labels=multiproc timeout=60 */
/* distrun --local-rank-arg: each rank's program gets --local-rank=N right
 * after its name, as torch.distributed.launch passes it without
 * --use-env; without the option argv is untouched. The program is
 * /bin/echo, so what it prints is exactly the argv it received. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

static const char *distrun(void) {
  static char p[1024];
  const char *dir = getenv("DIST_TEST_BIN");
  snprintf(p, sizeof p, "%s/distrun", dir ? dir : "build/bin");
  return p;
}

/* Runs cmd through the shell; its stdout into out, the exit status back. */
static int run(const char *cmd, char *out, size_t cap) {
  unsetenv("RANK");
  unsetenv("WORLD_SIZE");
  unsetenv("LOCAL_RANK");
  unsetenv("MASTER_ADDR");
  unsetenv("MASTER_PORT");
  unsetenv("DIST_TOKEN");
  FILE *f = popen(cmd, "r");
  cr_assert_not_null(f);
  size_t n = fread(out, 1, cap - 1, f);
  out[n] = '\0';
  int st = pclose(f);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

Test(monitor_distrun, local_rank_arg_passes_local_rank_after_the_program_name, .timeout = 50) {
  char cmd[1200], out[16384]; // --help is over 4 KiB
  snprintf(cmd, sizeof cmd, "%s --local-rank-arg -n 3 /bin/echo first 'sec ond'", distrun());
  int st = run(cmd, out, sizeof out);
  cr_assert_eq(st, 0, "exit %d:\n%s", st, out);
  for (int r = 0; r < 3; r++) {
    char line[128];
    snprintf(line, sizeof line, "[%d] --local-rank=%d first sec ond\n", r, r);
    cr_expect(strstr(out, line), "missing '%s' in:\n%s", line, out);
  }
  snprintf(cmd, sizeof cmd, "%s -n 2 /bin/echo first", distrun());
  st = run(cmd, out, sizeof out);
  cr_assert_eq(st, 0, "exit %d:\n%s", st, out);
  cr_expect(!strstr(out, "--local-rank"), "argv changed without the option:\n%s", out);
  cr_expect(strstr(out, "[0] first\n") && strstr(out, "[1] first\n"), "%s", out);
  snprintf(cmd, sizeof cmd, "%s --help", distrun());
  st = run(cmd, out, sizeof out);
  cr_expect(st == 0 && strstr(out, "--local-rank-arg"), "help lacks the option:\n%s", out);
}
