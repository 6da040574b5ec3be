/* ctest: labels=multiproc,verdicts timeout=300 cost=60 */
/* test_distrun_outside.c - a hang whose culprit is in no operation of a
 * group (build/bin/outside_testprog, prog_outside.c, 4 ranks under
 * distrun, rank 3 planted): the verdict says where that rank is, not only
 * "busy outside the library".
 *   - blocked in dist_store_get on a key no rank sets: the monitor's
 *     report names the store call, its key and its line, and the verdict's
 *     site is that line (core keeps the program's store waits,
 *     dist/internal/store.h; the record's "w" line);
 *   - stuck right after dist_new_group, before its first collective: busy
 *     outside the library since that call (the record's "l" line), not
 *     since its last heartbeat;
 *   - in its own code (an endless loop, a read() on a pipe): distrun
 *     captures its stack through ptrace before it ends the job and names
 *     the program's innermost frame, with the collective its peers wait
 *     for it in (distrun_outside.c); a helper thread's loop, not the main
 *     thread's pthread_join; and beside a rank blocked in the store on a
 *     key the computing rank would have set, the computing rank leads.
 * distview diagnose says the same rank, operation and site. */
#include "../examples/mesh_verdict.h"

#include <stdlib.h>

/* The line of prog_outside.c that holds marker. */
static int prog_line(const char *marker) {
  return example_line("../tests/monitor/prog_outside.c", marker);
}

static void run_mode(const char *debug, const char *mode, mesh_run *r) {
  const char *job[] = {dist_test_bin("outside_testprog"), mode, "3", NULL};
  job_run_argv(debug, "DIST_TIMEOUT=4", NULL, "4", job, r);
}

/* The seconds in "<what> for 3.9 s" after the first needle in the report. */
static double seconds_after(const mesh_run *r, const char *needle) {
  const char *at = r->report ? strstr(r->report, needle) : NULL;
  return at ? atof(at + strlen(needle)) : -1;
}

/* distrun could not capture the culprit's stack (its ptrace refused):
 * under a sanitizer that is the sanitizer's doing, not the verdict's. */
static void skip_without_stacks(const mesh_run *r) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  if (strstr(r->err, "is outside the library; where could not be told"))
    cr_skip_test("distrun could not capture the stack under this sanitizer");
#else
  (void)r;
#endif
}

Test(monitor_outside, a_rank_blocked_in_a_store_get_is_named_in_that_call_with_its_key,
     .timeout = 120) {
  const char *levels[] = {"DIST_DEBUG=OFF", "DIST_DEBUG=DETAIL"};
  char site[96], want[256];
  snprintf(site, sizeof site, "store_get (prog_outside.c:%d)", prog_line("/* the store get */"));
  for (int i = 0; i < 2; i++) {
    static mesh_run r;
    run_mode(levels[i], "store", &r);
    mesh_expect_verdict(&r, 11, "hang", 3);
    snprintf(want, sizeof want, "the waits end at rank 3, which is in no operation: it is "
             "blocked in the store's get of key 'ckpt/ready' (a key no rank has set) for ");
    cr_expect(mesh_says(&r, want), "%s: not in the store's get:\n%s", levels[i], r.err);
    snprintf(want, sizeof want, ", called from %s: ranks 0-2 wait for it in group 0 (default) "
             "ALL_REDUCE #3", site);
    cr_expect(mesh_says(&r, want), "%s: not its line %s:\n%s", levels[i], site, r.err);
    cr_expect(!mesh_says(&r, "busy outside the library"), "%s:\n%s", levels[i], r.report);
    /* the summary line says it too, and the verdict's site is the call's */
    cr_expect(mesh_says(&r, "; the culprit: rank 3 is blocked in the store's get of key "
                            "'ckpt/ready'"), "%s:\n%s", levels[i], r.report);
    snprintf(want, sizeof want, "\"site\":\"%s\"", site);
    cr_expect(strstr(r.json, want) && strstr(r.json, "\"where\":\"store wait\"") &&
                  strstr(r.json, "\"op\":\"ALL_REDUCE\"") && strstr(r.json, "\"seq\":3"),
              "%s: distview's verdict is not the store get at %s: %s", levels[i], site, r.json);
  }
}

/* Rank 3 blocks in read() right after dist_new_group: it has completed no
 * operation, and was said to be busy "for 0.8 s" (since its record's last
 * write) after 4 s. Its last call into the library is the creation. */
Test(monitor_outside, a_rank_stuck_after_new_group_is_outside_since_that_call, .timeout = 120) {
  static mesh_run r;
  run_mode("DIST_DEBUG=OFF", "read", &r);
  mesh_expect_verdict(&r, 11, "hang", 3);
  const char *said = "the waits end at rank 3, which is in no operation (busy outside the "
                     "library for ";
  double s = seconds_after(&r, said);
  /* the report is written near the 4 s timeout; records go out each second */
  cr_expect(s >= 2.5, "busy for %.1f s, since before the creation's end:\n%s", s, r.err);
}

/* Rank 3 computes for ever (DETAIL), or blocks in read() right after a
 * group creation (OFF): distrun's verdict names its line and the
 * collective its peers wait in; distview's site is that line. */
Test(monitor_outside, a_rank_in_its_own_code_is_named_at_its_line, .timeout = 200) {
  struct {
    const char *debug, *mode, *frame, *marker, *awaited;
  } cases[] = {
      {"DIST_DEBUG=DETAIL", "spin", "spin_forever", "/* the spin */",
       "; its peers wait for it in group 0 (default) ALL_REDUCE #3, called from all_reduce "
       "(prog_outside.c:"},
      {"DIST_DEBUG=OFF", "read", "block_in_read", "/* the read */",
       "; its peers wait for it in group 1 (dp) ALL_REDUCE #1, called from all_reduce "
       "(prog_outside.c:"},
  };
  for (int i = 0; i < 2; i++) {
    static mesh_run r;
    run_mode(cases[i].debug, cases[i].mode, &r);
    mesh_expect_verdict(&r, 11, "hang", 3);
    skip_without_stacks(&r);
    char at[128], want[256];
    snprintf(at, sizeof at, "%s (prog_outside.c:%d)", cases[i].frame,
             prog_line(cases[i].marker));
    snprintf(want, sizeof want, "; the culprit: rank 3 is outside the library (in its own "
             "code) for ");
    cr_expect(mesh_says(&r, want), "%s: no culprit outside:\n%s", cases[i].mode, r.report);
    snprintf(want, sizeof want, " s, at %s%s", at, cases[i].awaited);
    cr_expect(mesh_says(&r, want), "%s: not at %s:\n%s", cases[i].mode, at, r.report);
    snprintf(want, sizeof want, "\"site\":\"%s\"", at);
    cr_expect(strstr(r.json, want) && strstr(r.json, "\"where\":\"own code\"") &&
                  strstr(r.json, "\"op\":\"ALL_REDUCE\""),
              "%s: distview's verdict is not at %s: %s", cases[i].mode, at, r.json);
    cr_expect(strstr(r.json, "\"agrees\":true"), "distview's own analysis disagrees: %s",
              r.json);
  }
}

/* Rank 1 waits in the store for a key rank 3 would set after a
 * computation that never ends: both are where the waits end, but rank 1
 * waits (for the key) and rank 3 waits for nothing. The culprit is rank
 * 3 at its loop; rank 1 is said to wait in the store, not blamed. */
Test(monitor_outside, a_rank_waiting_in_the_store_for_a_computing_rank_is_not_the_culprit,
     .timeout = 120) {
  static mesh_run r;
  run_mode("DIST_DEBUG=DETAIL", "setter", &r);
  mesh_expect_verdict(&r, 11, "hang", 3);
  skip_without_stacks(&r);
  char at[128], want[256];
  snprintf(at, sizeof at, "spin_forever (prog_outside.c:%d)", prog_line("/* the spin */"));
  snprintf(want, sizeof want, "; the culprit: rank 3 is outside the library (in its own code) "
           "for ");
  cr_expect(mesh_says(&r, want) && mesh_says(&r, at), "not rank 3 at %s:\n%s", at, r.report);
  cr_expect(mesh_says(&r, "; rank 1, which its peers wait for too, is blocked in the store's "
                          "get of key 'data/ready'") &&
                mesh_says(&r, ": a wait, where rank 3 waits for nothing"),
            "rank 1's store wait is not said:\n%s", r.report);
  snprintf(want, sizeof want, "\"site\":\"%s\"", at);
  cr_expect(strstr(r.json, "\"culprits\":[3]") && strstr(r.json, want) &&
                strstr(r.json, "\"where\":\"own code\""),
            "distview's verdict is not rank 3 alone at %s: %s", at, r.json);
}

/* Rank 3's helper thread computes for ever while its main thread waits
 * in pthread_join: the verdict names the helper's loop (the thread that
 * runs), not the join (the main thread, asleep). */
Test(monitor_outside, a_helper_thread_in_its_own_code_is_named_not_the_join, .timeout = 120) {
  static mesh_run r;
  run_mode("DIST_DEBUG=OFF", "thread", &r);
  mesh_expect_verdict(&r, 11, "hang", 3);
  skip_without_stacks(&r);
  char at[128];
  snprintf(at, sizeof at, "helper_spin (prog_outside.c:%d)", prog_line("/* the helper's spin */"));
  cr_expect(mesh_says(&r, at), "not at %s:\n%s", at, r.report);
  cr_expect(!mesh_says(&r, "spin_in_thread (prog_outside.c:"), "the join named:\n%s", r.report);
}
