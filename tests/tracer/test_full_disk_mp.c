/* ctest: labels=multiproc timeout=120 */
/* A trace directory on a full disk (a 1 MiB tmpfs): the job goes on and
 * succeeds, each rank says once that it cannot write, counts what it
 * could not write, and the merged trace.db (written elsewhere) says
 * "success" with the drops, every rank 'finished' (not 'lost'), and
 * distview's own analysis of the rows finds nothing wrong. Needs
 * mount(2) (root in CI); skipped with the reason otherwise. The tmpfs is
 * unmounted before anything is asserted, and again by .fini. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "trace_util.h"
#include "tmpdir.h"

static char full[128];

static void unmount_full(void) {
  if (full[0])
    umount2(full, MNT_DETACH);
}

static int count(const char *hay, const char *needle) {
  int n = 0;
  for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle))
    n++;
  return n;
}

/* The file's first 64 KiB, malloc'd (never freed: each test process
 * reads two). */
static char *slurp(const char *path) {
  FILE *f = fopen(path, "r");
  char *buf = calloc(1, 1 << 16);
  size_t n = f && buf ? fread(buf, 1, (1 << 16) - 1, f) : 0;
  if (buf)
    buf[n] = '\0';
  if (f)
    fclose(f);
  return buf ? buf : "";
}

Test(tracer_full_disk, a_full_trace_disk_is_counted_said_once_and_the_job_succeeds,
     .timeout = 110, .fini = unmount_full) {
  char dir[] = "/tmp/dist-tracefull-XXXXXX";
  cr_assert(dist_test_mkdtemp(dir));
  snprintf(full, sizeof full, "%s/full", dir);
  cr_assert_eq(mkdir(full, 0700), 0);
  if (mount("tmpfs", full, "tmpfs", 0, "size=1m") != 0) {
    char why[160];
    snprintf(why, sizeof why, "cannot mount a 1 MiB tmpfs (mount -t tmpfs needs root or "
             "CAP_SYS_ADMIN): %s", strerror(errno));
    full[0] = '\0';
    char rm[200];
    snprintf(rm, sizeof rm, "rm -rf %s", dir);
    (void)!system(rm);
    cr_skip_test("%s", why);
  }
  const char *bin = getenv("DIST_TEST_BIN");
  char cmd[2048];
  snprintf(cmd, sizeof cmd,
           "cd %s && DIST_TRACE=%s %s/distrun -n 2 --trace-out %s/trace.db "
           "%s/monitor_testprog soak 50000 >%s/out.txt 2>%s/err.txt",
           dir, full, bin, dir, bin, dir, dir);
  int st = system(cmd);
  umount2(full, 0); /* before any assertion */
  full[0] = '\0';
  char path[256];
  snprintf(path, sizeof path, "%s/err.txt", dir);
  char *err = slurp(path);
  cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "distrun: %d\n%s", st, err);
  /* Said once per rank (not once per 10 ms commit). */
  cr_assert_eq(count(err, "cannot write"), 2, "%s", err);
  snprintf(cmd, sizeof cmd, "%s/distview diagnose --json %s/trace.db >%s/diag.json 2>&1", bin,
           dir, dir);
  st = system(cmd);
  snprintf(path, sizeof path, "%s/diag.json", dir);
  char *diag = slurp(path);
  cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "distview diagnose: %d\n%s", st, diag);
  cr_assert(!strncmp(diag, "{\"kind\":\"success\",\"exit_code\":0,", 32), "%s", diag);
  const char *d = strstr(diag, "\"dropped\":");
  cr_assert(d && atoll(d + 10) > 0, "%s", diag);
  /* Rows that lost records are no hang or desync of distview's own */
  cr_assert(strstr(diag, "\"own\":{\"kind\":\"none\""), "%s", diag);
  snprintf(path, sizeof path, "%s/trace.db", dir);
  sqlite3 *db;
  cr_assert_eq(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
  cr_assert_eq(tq_int(db, "SELECT count(*) FROM ranks WHERE end_state = 'finished'"), 2,
               "end states: %s; skipped files: %s\n%s",
               strdup(tq_text(db, "SELECT group_concat(rank || ':' || end_state, ' ') FROM ranks")),
               tq_text(db, "SELECT value FROM meta WHERE key = 'skipped_files'"), err);
  cr_assert_eq(tq_int(db, "SELECT count(*) FROM ranks WHERE dropped_records > 0"), 2);
  /* A rank whose disk freed a little and filled again says so again: its
   * last note counts what ranks.dropped_records says. */
  cr_assert_eq(tq_int(db, "SELECT count(*) FROM ranks r WHERE dropped_records = (SELECT "
                          "max(status) FROM events e WHERE e.rank = r.rank AND "
                          "e.kind = 'trace_write_failed')"), 2,
               "%s", tq_text(db, "SELECT group_concat(rank || ':' || status, ' ') FROM events "
                                 "WHERE kind = 'trace_write_failed'"));
  cr_assert_eq(tq_int(db, "SELECT dropped FROM verdict"),
               tq_int(db, "SELECT sum(dropped_records) FROM ranks"));
  cr_log_info("dropped %lld records; %lld operations rows written",
              (long long)tq_int(db, "SELECT sum(dropped_records) FROM ranks"),
              (long long)tq_int(db, "SELECT count(*) FROM operations"));
  sqlite3_close(db);
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  cr_assert_eq(system(cmd), 0);
}
