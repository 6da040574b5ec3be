/* ctest: labels=multiproc timeout=120 */
/* A desync found by the checking layer reaches distrun: real ranks at
 * DIST_DEBUG=DETAIL under build/bin/distrun (rank program wpg_prog_desync,
 * prog_desync.c). A count that differs makes distrun exit 10 and print the
 * layer's report once, last, naming the program's own line; a rank that
 * never arrives makes it exit 11 with the absent rank named (here at its
 * first collective, before the group's helper exists, so without its host
 * and pid). */
#include <criterion/criterion.h>

#include <stdlib.h>
#include <string.h>

#include "proc.h"

/* Runs distrun -n 2 prog mode; its exit status (-1 past the deadline) and
 * stderr (valid until the next run). */
static int run(const char *mode, char **err) {
  static dist_proc p;
  const char *argv[] = {dist_test_bin("distrun"), "-n", "2", dist_test_bin("wpg_prog_desync"),
                        mode, NULL};
  int st = dist_proc_run(&p, argv, NULL, 60000);
  *err = DIST_PROC_ERR(&p);
  return st;
}

/* What follows distrun's last status line. */
static const char *tail_after_status(const char *err) {
  const char *at = NULL;
  for (const char *p = strstr(err, "distrun: exit status"); p; p = strstr(p + 1, "distrun: exit"))
    at = p;
  const char *nl = at ? strchr(at, '\n') : NULL;
  return nl ? nl + 1 : NULL;
}

static void setup(void) {
  const char *vars[] = {"RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "DIST_TOKEN",
                        "DIST_JOB_ID", "DIST_TRANSPORT", "TORCH_DISTRIBUTED_DEBUG"};
  for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
    unsetenv(vars[i]);
  setenv("DIST_DEBUG", "DETAIL", 1);
  setenv("DIST_TIMEOUT", "3", 1);
}

Test(wrapper_pg_distrun, a_desync_at_detail_exits_10_with_the_report_last, .timeout = 90) {
  setup();
  char *err;
  int st = run("shape", &err);
  cr_assert_eq(st, 10, "exit %d\nstderr:\n%s", st, err);
  const char *rep = tail_after_status(err);
  cr_assert(rep, "no status line:\n%s", err);
  const char *want =
      "desync in group 0 (default, 2 ranks) at ALL_REDUCE #1: ranks disagree on the count\n"
      "  rank 0: ALL_REDUCE float32[4] op=SUM (16 bytes)\n"
      "  rank 1: ALL_REDUCE float32[8] op=SUM (32 bytes)  <- count differs\n"
      "  called from prog_desync.c:23 in main() (ranks 0-1)";
  cr_assert(!strncmp(rep, want, strlen(want)), "report after the status line:\n%s\nwant:\n%s",
            rep, want);
  cr_assert(!strstr(rep + strlen(want), "distrun:"), "the report is not last:\n%s", err);
}

Test(wrapper_pg_distrun, an_absent_rank_at_detail_exits_11_naming_it, .timeout = 90) {
  setup();
  char *err;
  int st = run("absent", &err);
  cr_assert_eq(st, 11, "exit %d\nstderr:\n%s", st, err);
  const char *rep = tail_after_status(err);
  cr_assert(rep && strstr(rep, "timeout in group 0 (default, 2 ranks) at ALL_REDUCE #1: rank 1 "
                               "did not arrive within 3 s\n  rank 1 (never joined the check): "
                               "it has run no collective on this group"),
            "report after the status line:\n%s", err);
}
