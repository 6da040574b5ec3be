/* ctest: labels=multiproc timeout=120 */
/* distrun merges the job's rank files at the end: an example program
 * linked with the bundled library (the tracer on by default) leaves
 * --trace-out FILE with every rank's operations, however each rank ended:
 * destroying its group, exit() after a failure (the tracer's atexit
 * flush), or SIGTERM from distrun (the ring dumped and imported). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "trace_util.h"
#include "tmpdir.h"

static void rm_dir(const char *dir);

Test(tracer_distrun, distrun_merges_into_trace_out, .timeout = 100) {
  char dir[] = "/tmp/dist-tracerun-XXXXXX";
  cr_assert(dist_test_mkdtemp(dir));
  char cmd[2048];
  snprintf(cmd, sizeof cmd,
           "cd %s && DIST_TRACE=%s/dt %s/distrun -n 2 --trace-out %s/out.db %s/allreduce_group"
           " >/dev/null 2>%s/err.txt",
           dir, dir, getenv("DIST_TEST_BIN"), dir, getenv("DIST_TEST_BIN"), dir);
  cr_assert_eq(system(cmd), 0, "%s", cmd);
  char path[256];
  snprintf(path, sizeof path, "%s/out.db", dir);
  sqlite3 *db;
  cr_assert_eq(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
  cr_assert_str_eq(tq_text(db, "SELECT value FROM meta WHERE key='kind'"), "merged");
  cr_assert_eq(tq_int(db, "SELECT count(*) FROM ranks WHERE end_state='finished'"), 2);
  /* allreduce_group: one all_reduce on a group of ranks 0 and 1 */
  cr_assert_eq(tq_int(db, "SELECT count(*) FROM operations WHERE op='ALL_REDUCE' AND"
                          " state='completed'"), 2);
  sqlite3_close(db);
  rm_dir(dir);
}

static void rm_dir(const char *dir) {
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  cr_assert_eq(system(cmd), 0);
}

/* Runs example_bugs --bug NAME under distrun (3 ranks) with extra
 * environment; returns distrun's exit status and opens dir/out.db. */
static int run_bug(char *dir, const char *env, const char *bug, sqlite3 **db) {
  cr_assert(dist_test_mkdtemp(dir));
  char cmd[2048];
  snprintf(cmd, sizeof cmd,
           "cd %s && %s DIST_TRACE=%s/dt %s/distrun -n 3 --grace-period 1 --trace-out %s/out.db"
           " %s/example_bugs --bug %s --timeout 4 >/dev/null 2>%s/err.txt",
           dir, env, dir, getenv("DIST_TEST_BIN"), dir, getenv("DIST_TEST_BIN"), bug, dir);
  int st = system(cmd);
  char path[256];
  snprintf(path, sizeof path, "%s/out.db", dir);
  cr_assert_eq(sqlite3_open_v2(path, db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK, "%s", path);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* Every rank exits(1) after DIST_E_DESYNC with its group live: each one's
 * trace still holds its three completed all_reduces, the failed fourth
 * with the report as its message, and the desync_report event. */
Test(tracer_distrun, ranks_exiting_after_a_desync_keep_their_last_rows, .timeout = 100) {
  char dir[] = "/tmp/dist-tracerun-XXXXXX";
  sqlite3 *db;
  int st = run_bug(dir, "DIST_DEBUG=DETAIL", "shape", &db);
  cr_assert_eq(st, 10, "distrun exit %d (10: desync)", st);
  cr_assert_eq(tq_int(db, "SELECT count(*) FROM ranks WHERE end_state='exited'"), 3);
  for (int r = 0; r < 3; r++) {
    cr_assert_eq(tq_int(db, "SELECT count(*) FROM operations WHERE rank=%d AND op='ALL_REDUCE'"
                            " AND state='completed' AND seq IN (1,2,3)", r), 3, "rank %d", r);
    cr_assert_str_eq(tq_text(db, "SELECT state FROM operations WHERE rank=%d AND seq=4", r),
                     "failed", "rank %d's failing ALL_REDUCE #4", r);
    cr_assert(strstr(tq_text(db, "SELECT message FROM operations WHERE rank=%d AND seq=4", r),
                     "desync in group 0 (default, 3 ranks) at ALL_REDUCE #4"), "rank %d", r);
    cr_assert_eq(tq_int(db, "SELECT max(seq) FROM operations WHERE rank=%d", r), 4);
    cr_assert_eq(tq_int(db, "SELECT count(*) FROM events WHERE rank=%d AND"
                            " kind='desync_report'", r), 1, "rank %d's desync_report", r);
  }
  cr_assert(strstr(tq_text(db, "SELECT message FROM events WHERE kind='desync_report' AND"
                               " rank=0"), "ranks disagree on the count"));
  sqlite3_close(db);
  rm_dir(dir);
}

/* Rank 2 sleeps instead of entering ALL_REDUCE #4; the others time out and
 * exit(1); distrun ends rank 2 with SIGTERM. Its trace (the ring its
 * handler dumped) holds ALL_REDUCE #1-#3; the others hold the diagnosis. */
Test(tracer_distrun, a_rank_ended_by_distrun_keeps_its_operations, .timeout = 100) {
  char dir[] = "/tmp/dist-tracerun-XXXXXX";
  sqlite3 *db;
  int st = run_bug(dir, "", "hang", &db);
  cr_assert_eq(st, 11, "distrun exit %d (11: hang)", st);
  cr_assert_str_eq(tq_text(db, "SELECT end_state FROM ranks WHERE rank=2"), "ended");
  cr_assert_eq(tq_int(db, "SELECT status FROM events WHERE rank=2 AND kind='ended'"), 15,
               "SIGTERM named");
  cr_assert_eq(tq_int(db, "SELECT count(*) FROM operations WHERE rank=2 AND op='ALL_REDUCE' AND"
                          " state='completed' AND seq IN (1,2,3)"), 3);
  cr_assert_eq(tq_int(db, "SELECT count(*) FROM operations WHERE rank=2 AND seq>3"), 0);
  for (int r = 0; r < 2; r++) {
    cr_assert_str_eq(tq_text(db, "SELECT end_state FROM ranks WHERE rank=%d", r), "exited");
    cr_assert_str_eq(tq_text(db, "SELECT state FROM operations WHERE rank=%d AND seq=4", r),
                     "timed_out");
    cr_assert(strstr(tq_text(db, "SELECT message FROM events WHERE rank=%d AND"
                                 " kind='diagnosis'", r),
                     "rank 2 (host "), "rank %d's diagnosis names rank 2", r);
  }
  sqlite3_close(db);
  rm_dir(dir);
}

/* DIST_TRACE_KEEP=3: after the merge distrun keeps the current job and the
 * two newest old job directories (by mtime), removes the two oldest, and
 * leaves alone what it does not recognise as a finished job directory: a
 * directory with another file, one whose rank file was written a moment
 * ago (a job that may still run), and a link. */
Test(tracer_distrun, old_job_directories_beyond_DIST_TRACE_KEEP_are_removed, .timeout = 100) {
  char dir[] = "/tmp/dist-tracerun-XXXXXX";
  cr_assert(dist_test_mkdtemp(dir));
  char cmd[4096];
  snprintf(cmd, sizeof cmd,
           "set -e; cd %s; mkdir -p dt/old1 dt/old2 dt/old3 dt/old4 dt/notes dt/recent elsewhere;"
           " for j in old1 old2 old3 old4; do echo x > dt/$j/rank-0.db; done;"
           " echo x > dt/old2/rank-1.ring; echo x > dt/old3/rank-0.db-wal;"
           " echo x > dt/notes/rank-0.db; echo x > dt/notes/notes.txt;"
           " echo x > elsewhere/rank-0.db; ln -s ../elsewhere dt/link;"
           " touch -d '5 hours ago' dt/old1/* dt/old1 dt/notes/* dt/notes elsewhere/* elsewhere;"
           " touch -d '4 hours ago' dt/old2/* dt/old2; touch -d '3 hours ago' dt/old3/* dt/old3;"
           " touch -d '2 hours ago' dt/old4/* dt/old4;"
           " echo x > dt/recent/rank-0.db; touch -d '6 hours ago' dt/recent",
           dir);
  cr_assert_eq(system(cmd), 0, "%s", cmd);
  snprintf(cmd, sizeof cmd,
           "cd %s && DIST_TRACE_KEEP=3 DIST_LOG_LEVEL=INFO DIST_TRACE=%s/dt %s/distrun -n 2"
           " --trace-out %s/out.db %s/allreduce_group >/dev/null 2>%s/err.txt",
           dir, dir, getenv("DIST_TEST_BIN"), dir, getenv("DIST_TEST_BIN"), dir);
  cr_assert_eq(system(cmd), 0, "%s", cmd);
  char path[256], err[1 << 15];
  snprintf(path, sizeof path, "%s/err.txt", dir);
  FILE *f = fopen(path, "r");
  cr_assert(f);
  err[fread(err, 1, sizeof err - 1, f)] = '\0';
  fclose(f);
  char said[512];
  snprintf(said, sizeof said, "trace: removed 2 old job directories from %s/dt "
           "(DIST_TRACE_KEEP=3): old1, old2", dir);
  cr_assert(strstr(err, said), "%s", err);
  const char *gone[] = {"old1", "old2"};
  const char *kept[] = {"old3", "old4", "notes", "notes/notes.txt", "recent", "link",
                        "../elsewhere/rank-0.db"};
  struct stat st;
  for (size_t i = 0; i < 2; i++) {
    snprintf(path, sizeof path, "%s/dt/%s", dir, gone[i]);
    cr_assert(lstat(path, &st) != 0, "%s is still there", path);
  }
  for (size_t i = 0; i < sizeof kept / sizeof kept[0]; i++) {
    snprintf(path, sizeof path, "%s/dt/%s", dir, kept[i]);
    cr_assert(lstat(path, &st) == 0, "%s was removed", path);
  }
  /* The current job's directory stays: 3 job directories and the others. */
  snprintf(cmd, sizeof cmd, "test $(ls %s/dt | wc -l) -eq 6", dir);
  cr_assert_eq(system(cmd), 0, "%s", cmd);
  rm_dir(dir);
}
