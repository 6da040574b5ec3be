/* ctest: labels=multiproc timeout=60 */
/* The merge over bad input: a corrupt, truncated or foreign rank file (or
 * ring dump) is reported by name and skipped, and nothing of the good
 * files is lost. Also: the reader opens a job directory directly. */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "mp.h"
#include "trace_util.h"
#include "tmpdir.h"

static char dir[256];

static int two_ops(const dist_test_ctx *ctx) {
  setenv("DIST_TRACE", dir, 1);
  setenv("DIST_JOB_ID", "goodjob", 1);
  CHECK_OK(ctx, dist_tracer_register());
  CHECK_OK(ctx, dist_test_init_pg(ctx, NULL));
  float v[4] = {0};
  dist_tensor t = dist_tensor_1d(v, DIST_FLOAT32, 4);
  CHECK_OK(ctx, dist_all_reduce(&t, DIST_SUM, NULL, NULL));
  CHECK_OK(ctx, dist_broadcast(&t, 1, NULL, NULL));
  dist_test_finish();
  return 0;
}

static void write_file(const char *path, const void *data, size_t len) {
  int fd = open(path, O_CREAT | O_WRONLY | O_TRUNC, 0600);
  cr_assert(fd >= 0);
  cr_assert_eq(write(fd, data, len), (ssize_t)len);
  close(fd);
}

static void copy_prefix(const char *from, const char *to, long bytes) {
  FILE *f = fopen(from, "rb");
  cr_assert(f);
  fseek(f, 0, SEEK_END);
  long size = ftell(f);
  rewind(f);
  long n = bytes < 0 ? size : bytes;
  char *buf = malloc((size_t)size);
  cr_assert_eq(fread(buf, 1, (size_t)size, f), (size_t)size);
  fclose(f);
  write_file(to, buf, (size_t)(n < size ? n : size));
  free(buf);
}

Test(tracer_merge, bad_files_are_named_and_skipped, .timeout = 50) {
  snprintf(dir, sizeof dir, "/tmp/dist-tracemerge-XXXXXX");
  cr_assert(dist_test_mkdtemp(dir));
  cr_assert_eq(dist_test_ranks(2, two_ops, NULL, 40), 0, "%s", dist_test_report());
  char jd[300], p[400], q[400];
  snprintf(jd, sizeof jd, "%s/goodjob", dir);
  /* corrupt: not a database at all */
  snprintf(p, sizeof p, "%s/rank-2.db", jd);
  write_file(p, "this is not a database, just some bytes\n", 41);
  /* truncated: the first half of rank 0's file */
  snprintf(q, sizeof q, "%s/rank-0.db", jd);
  struct stat st;
  cr_assert_eq(stat(q, &st), 0);
  snprintf(p, sizeof p, "%s/rank-3.db", jd);
  copy_prefix(q, p, (long)st.st_size / 2);
  /* foreign: a valid SQLite database of something else */
  snprintf(p, sizeof p, "%s/rank-4.db", jd);
  sqlite3 *f;
  cr_assert_eq(sqlite3_open(p, &f), SQLITE_OK);
  cr_assert_eq(sqlite3_exec(f, "CREATE TABLE t(x); INSERT INTO t VALUES (1)", 0, 0, 0),
               SQLITE_OK);
  sqlite3_close(f);
  /* another rank's file under the wrong name */
  snprintf(p, sizeof p, "%s/rank-5.db", jd);
  copy_prefix(q, p, -1);
  /* a truncated ring dump */
  snprintf(p, sizeof p, "%s/rank-6.ring", jd);
  write_file(p, "DISTRNG1\1\0\0\0", 12);
  /* rank 7 of another job */
  snprintf(p, sizeof p, "%s/rank-7.db", jd);
  copy_prefix(q, p, -1);
  cr_assert_eq(sqlite3_open(p, &f), SQLITE_OK);
  cr_assert_eq(sqlite3_exec(f, "UPDATE meta SET value = '7' WHERE key = 'rank';"
                               "UPDATE meta SET value = 'other-job' WHERE key = 'job_id'",
                            0, 0, 0),
               SQLITE_OK);
  sqlite3_close(f);

  char out[400], err[512];
  snprintf(out, sizeof out, "%s/trace.db", dir);
  dist_trace_merge_report rep;
  cr_assert_eq(dist_trace_merge(jd, out, &rep, err, sizeof err), DIST_OK, "%s", err);
  cr_assert_eq(rep.ranks_merged, 2, "%s", rep.skipped);
  cr_assert_eq(rep.files_skipped, 6, "%s", rep.skipped);
  const char *names[] = {"rank-2.db: ", "rank-3.db: ", "rank-4.db: ", "rank-5.db: ",
                         "rank-6.ring: ", "rank-7.db: belongs to job other-job, not "};
  for (int i = 0; i < 6; i++)
    cr_assert(strstr(rep.skipped, names[i]), "%s not named in:\n%s", names[i], rep.skipped);
  cr_assert(strstr(rep.skipped, "rank-4.db: not a libdist trace file"), "%s", rep.skipped);
  cr_assert(strstr(rep.skipped, "rank-5.db: not the rank file of rank 5"), "%s", rep.skipped);
  sqlite3 *db;
  cr_assert_eq(sqlite3_open_v2(out, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
  /* 2 ops + the finish barrier, on each good rank; nothing else */
  cr_assert_eq(tq_int(db, "SELECT count(*) FROM operations"), 6);
  cr_assert_eq(tq_int(db, "SELECT count(*) FROM operations WHERE rank IN (0,1)"), 6);
  cr_assert_str_eq(tq_text(db, "SELECT value FROM meta WHERE key='merged_ranks'"), "0,1");
  cr_assert(strstr(tq_text(db, "SELECT value FROM meta WHERE key='skipped_files'"),
                   "rank-2.db"));
  sqlite3_close(db);

  /* The reader opens the job directory itself (merging into a temporary). */
  dist_trace *t;
  cr_assert_eq(dist_trace_open(jd, &t, err, sizeof err), DIST_OK, "%s", err);
  dist_trace_op ops[4];
  size_t n;
  cr_assert_eq(dist_trace_collective(t, 0, 2, ops, 4, &n), DIST_OK);
  cr_assert_eq(n, 2);
  cr_assert_str_eq(ops[0].op, "BROADCAST");
  cr_assert_eq(ops[1].rank, 1);
  cr_assert_eq(dist_trace_last_ops(t, 1, ops, 4, &n), DIST_OK);
  cr_assert_eq(n, 3);
  cr_assert_eq(ops[0].seq, 3);
  dist_trace_close(t);
  /* distview merge does the same from the command line, naming what it
   * skipped; without a directory it is a usage error */
  char cmd[1200];
  snprintf(cmd, sizeof cmd, "%s/distview merge %s -o %s/cli.db >/dev/null 2>%s/cli.err",
           getenv("DIST_TEST_BIN"), jd, dir, dir);
  cr_assert_eq(system(cmd), 0, "%s", cmd);
  snprintf(p, sizeof p, "%s/cli.db", dir);
  cr_assert_eq(sqlite3_open_v2(p, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
  cr_assert_eq(tq_int(db, "SELECT count(*) FROM operations"), 6);
  sqlite3_close(db);
  snprintf(cmd, sizeof cmd, "grep -q 'rank-4.db: not a libdist trace file' %s/cli.err", dir);
  cr_assert_eq(system(cmd), 0, "distview merge did not name the foreign file");
  snprintf(cmd, sizeof cmd, "%s/distview merge 2>/dev/null", getenv("DIST_TEST_BIN"));
  int status = system(cmd);
  cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 2, "usage error status %d", status);
  /* and refuses what is not a trace */
  snprintf(p, sizeof p, "%s/rank-4.db", jd);
  cr_assert_eq(dist_trace_open(p, &t, err, sizeof err), DIST_E_INVAL);
  cr_assert(strstr(err, "rank-4.db"), "%s", err);
}
