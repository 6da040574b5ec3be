/* ctest: labels=soak timeout=600 */
/* A soak (issue 26): distrun runs 4 ranks of prog_soak.c at
 * DIST_DEBUG=DETAIL with tracing on, for DIST_SOAK_S seconds (20 by
 * default; CI's soak stage asks for 90): mixed operations on the default
 * group, two halves and two parities, random sizes and dtypes, every
 * result checked against tests/support/ref.c. The test samples the
 * resident memory and open descriptors of every rank and of distrun from
 * /proc early (15 % of the time) and late (90 %) and asserts they stayed
 * flat; then every operation a rank called is a row of trace.db, the trace
 * files are 0600 and the job directory 0700. The figures are printed
 * ("soak: ...") for the record. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <inttypes.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "proc.h"
#include "tmpdir.h"

#define NPROC 5 /* distrun and its 4 ranks */

typedef struct sample {
  pid_t pid[NPROC];
  long rss_kib[NPROC];
  int fds[NPROC];
} sample;

static long rss_kib(pid_t pid) {
  char path[64], line[256];
  snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
  FILE *f = fopen(path, "r");
  long v = -1;
  while (f && fgets(line, sizeof line, f))
    if (sscanf(line, "VmRSS: %ld kB", &v) == 1)
      break;
  if (f)
    fclose(f);
  return v;
}

static int fd_count(pid_t pid) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/fd", (int)pid);
  DIR *d = opendir(path);
  if (!d)
    return -1;
  int n = 0;
  for (struct dirent *de; (de = readdir(d));)
    n += de->d_name[0] != '.';
  closedir(d);
  return n;
}

/* distrun and its children (the ranks), in the order the kernel lists them. */
static void take(pid_t distrun, sample *s) {
  char path[96];
  snprintf(path, sizeof path, "/proc/%d/task/%d/children", (int)distrun, (int)distrun);
  FILE *f = fopen(path, "r");
  cr_assert_not_null(f);
  s->pid[0] = distrun;
  int n = 1, p;
  while (n < NPROC && fscanf(f, "%d", &p) == 1)
    s->pid[n++] = p;
  fclose(f);
  cr_assert_eq(n, NPROC, "distrun has %d children", n - 1);
  for (int i = 0; i < NPROC; i++) {
    s->rss_kib[i] = rss_kib(s->pid[i]);
    s->fds[i] = fd_count(s->pid[i]);
    cr_assert(s->rss_kib[i] > 0 && s->fds[i] > 0, "pid %d gone", (int)s->pid[i]);
  }
}

static void answer(const char *fifo) {
  FILE *f = fopen(fifo, "w");
  cr_assert_not_null(f);
  fputc('x', f);
  fclose(f);
}

static long long scalar(sqlite3 *db, const char *sql) {
  sqlite3_stmt *q = NULL;
  long long v = -1;
  cr_assert_eq(sqlite3_prepare_v2(db, sql, -1, &q, NULL), SQLITE_OK, "%s: %s", sql,
               sqlite3_errmsg(db));
  if (sqlite3_step(q) == SQLITE_ROW)
    v = sqlite3_column_int64(q, 0);
  sqlite3_finalize(q);
  return v;
}

static void private_files(const char *dir) {
  struct stat st;
  cr_assert_eq(stat(dir, &st), 0, "%s", dir);
  cr_assert_eq(st.st_mode & 0777, 0700, "%s is %03o", dir, st.st_mode & 0777);
  DIR *d = opendir(dir);
  cr_assert_not_null(d);
  int files = 0;
  for (struct dirent *de; (de = readdir(d));) {
    if (de->d_name[0] == '.')
      continue;
    char p[1200];
    snprintf(p, sizeof p, "%s/%s", dir, de->d_name);
    cr_assert_eq(stat(p, &st), 0, "%s", p);
    cr_assert_eq(st.st_mode & 0777, S_ISDIR(st.st_mode) ? 0700 : 0600, "%s is %03o", p,
                 st.st_mode & 0777);
    files++;
  }
  closedir(d);
  cr_assert_gt(files, 0, "%s is empty", dir);
}

Test(soak, mixed_operations_stay_flat_and_every_one_is_traced, .timeout = 590) {
  dist_test_clean_launch_env();
  const char *secs = getenv("DIST_SOAK_S") ? getenv("DIST_SOAK_S") : "20";
  char dir[] = "/tmp/dist-soak-XXXXXX";
  cr_assert_not_null(dist_test_mkdtemp(dir));
  char fifo[128], trace[128], db[128], seed[32], e_trace[160];
  snprintf(fifo, sizeof fifo, "%s/fifo", dir);
  snprintf(trace, sizeof trace, "%s/trace", dir);
  snprintf(db, sizeof db, "%s/trace.db", dir);
  snprintf(seed, sizeof seed, "%llu", (unsigned long long)time(NULL));
  snprintf(e_trace, sizeof e_trace, "DIST_TRACE=%s", trace);
  cr_assert_eq(mkfifo(fifo, 0600), 0);
  fprintf(stderr, "soak: %s s, seed %s (DIST_SOAK_S, the seed to replay with)\n", secs, seed);
  const char *env[] = {"DIST_DEBUG=DETAIL", e_trace, "DIST_TRACE_KEEP=0", NULL};
  const char *argv[] = {dist_test_bin("distrun"), "-n", "4", "--trace-out", db,
                        dist_test_bin("soak_testprog"), secs, seed, fifo, NULL};
  static dist_proc p;
  int64_t t0 = dist_test_now_ms();
  dist_proc_start(&p, argv, env);
  int budget = (atoi(secs) + 120) * 1000;
  sample early, late;
  cr_assert(dist_proc_wait_for(&p, 0, "soak sample early", 1, budget), "%s\n%s",
            DIST_PROC_OUT(&p), DIST_PROC_ERR(&p));
  take(p.pid, &early);
  answer(fifo);
  int64_t t_early = dist_test_now_ms();
  cr_assert(dist_proc_wait_for(&p, 0, "soak sample late", 1, budget), "%s\n%s",
            DIST_PROC_OUT(&p), DIST_PROC_ERR(&p));
  take(p.pid, &late);
  answer(fifo);
  int64_t t_late = dist_test_now_ms();
  int st = dist_proc_finish(&p, budget);
  int64_t took = dist_test_now_ms() - t0;
  cr_assert_eq(st, 0, "distrun exited %d\n%s\n%s", st, DIST_PROC_OUT(&p), DIST_PROC_ERR(&p));
  cr_assert_null(strstr(DIST_PROC_ERR(&p), "FAILED"), "%s", DIST_PROC_ERR(&p));

  /* Operations each rank called (its line), the rows it must have. */
  long ops[4] = {-1, -1, -1, -1}, steps = 0, total = 0;
  for (int r = 0; r < 4; r++) {
    char needle[32];
    snprintf(needle, sizeof needle, "soak rank %d ops ", r);
    const char *l = strstr(DIST_PROC_OUT(&p), needle);
    cr_assert_not_null(l, "no summary of rank %d:\n%s", r, DIST_PROC_OUT(&p));
    cr_assert_eq(sscanf(l + strlen(needle), "%ld steps %ld", &ops[r], &steps), 2);
    total += ops[r];
  }
  fprintf(stderr, "soak: %ld steps, %ld operations over 4 ranks in %.1f s (distrun's whole "
          "run); samples %.1f s apart\n", steps, total, took / 1000.0,
          (t_late - t_early) / 1000.0);
  for (int i = 0; i < NPROC; i++) {
    fprintf(stderr, "soak: %-8s pid %d: RSS %ld -> %ld KiB, fds %d -> %d\n",
            i ? "rank" : "distrun", (int)early.pid[i], early.rss_kib[i], late.rss_kib[i],
            early.fds[i], late.fds[i]);
  }
  for (int i = 0; i < NPROC; i++) {
    cr_assert_eq(late.pid[i], early.pid[i], "the same processes");
    /* Flat: the flight recorder, SQLite's page cache and the buffers are
     * all bounded; what grows with the operations count is a leak. */
    long limit = early.rss_kib[i] / 4 > 16384 ? early.rss_kib[i] / 4 : 16384;
    cr_assert_leq(late.rss_kib[i] - early.rss_kib[i], limit,
                  "pid %d grew from %ld to %ld KiB", (int)early.pid[i], early.rss_kib[i],
                  late.rss_kib[i]);
    cr_assert_leq(late.fds[i], early.fds[i] + 2, "pid %d went from %d to %d descriptors",
                  (int)early.pid[i], early.fds[i], late.fds[i]);
  }

  /* Nothing missing from the trace. */
  struct stat sb;
  cr_assert_eq(stat(db, &sb), 0, "%s", db);
  cr_assert_eq(sb.st_mode & 0777, 0600, "trace.db is %03o", sb.st_mode & 0777);
  sqlite3 *h = NULL;
  cr_assert_eq(sqlite3_open_v2(db, &h, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
  long long rows = scalar(h, "SELECT count(*) FROM operations");
  fprintf(stderr, "soak: trace.db holds %lld operation rows (%ld expected)\n", rows, total);
  for (int r = 0; r < 4; r++) {
    char sql[160];
    snprintf(sql, sizeof sql, "SELECT count(*) FROM operations WHERE rank = %d", r);
    cr_assert_eq(scalar(h, sql), ops[r], "rank %d: %lld rows for %ld operations", r,
                 scalar(h, sql), ops[r]);
  }
  cr_assert_eq(scalar(h, "SELECT count(*) FROM operations WHERE state != 'completed'"), 0);
  sqlite3_close(h);
  /* The job directory and its rank files: private. */
  DIR *d = opendir(trace);
  cr_assert_not_null(d, "%s", trace);
  struct stat ts;
  cr_assert_eq(stat(trace, &ts), 0);
  int jobs = 0;
  for (struct dirent *de; (de = readdir(d));) {
    if (de->d_name[0] == '.')
      continue;
    char jd[600];
    snprintf(jd, sizeof jd, "%s/%s", trace, de->d_name);
    private_files(jd);
    jobs++;
  }
  closedir(d);
  cr_assert_eq(jobs, 1);
  char rm[200];
  snprintf(rm, sizeof rm, "rm -rf '%s'", dir);
  cr_assert_eq(system(rm), 0);
}
