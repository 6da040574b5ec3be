/* ctest: labels=unit,san_address timeout=240 cost=20 */
/* The reader library and distview where the fault probe of issue 26 found
 * them wanting:
 *   - rank files in a read-only place (a read-only mount as root, a
 *     directory without write permission otherwise) merge and open; one
 *     whose rows are still in its -wal merges from a copy beside the output;
 *   - a merge onto a full disk (a small tmpfs; root) says "no space left"
 *     and leaves nothing behind; a rank file on a full disk whose rows are
 *     in its -wal (its rank ended there) merges from a copy;
 *   - distview interrupted while it merges (SIGINT, SIGTERM, SIGHUP) leaves
 *     neither `X.tmp` nor a file in $TMPDIR, and still ends by the signal.
 * Rank files are written here in the writer's layout (WAL, narrow ops). */
#include <criterion/criterion.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <dist/dist.h>

#include "proc.h"
#include "reader_int.h"
#include "trace_util.h"
#include "tmpdir.h"

static char dir[128];
static char mounted[2][256];

static void setup(void) {
  snprintf(dir, sizeof dir, "/tmp/dist-readeredge-XXXXXX");
  cr_assert(dist_test_mkdtemp(dir));
}

static void teardown(void) {
  for (int i = 0; i < 2; i++)
    if (mounted[i][0])
      umount2(mounted[i], MNT_DETACH);
  char rm[400];
  snprintf(rm, sizeof rm, "chmod -R u+w %s 2>/dev/null; rm -rf %s", dir, dir);
  (void)!system(rm);
}

static void exec(sqlite3 *db, const char *sql) {
  char err[256] = "";
  cr_assert_eq(tr_exec(db, sql, err, sizeof err), 0, "%s: %s", sql, err);
}

/* A rank file of job "edgejob" at path with n completed all_reduces, as
 * the writer makes it (WAL). Returned open: the caller closes it (then no
 * -wal is left) or copies it while open (its rows still in the -wal). */
static sqlite3 *rank_file(const char *path, int rank, int n) {
  sqlite3 *db;
  cr_assert_eq(sqlite3_open(path, &db), SQLITE_OK);
  exec(db, "PRAGMA journal_mode=WAL");
  cr_assert_eq(tr_schema_create_rank(db, rank, NULL, 0), 0);
  char sql[1024];
  snprintf(sql, sizeof sql,
           "INSERT INTO meta VALUES ('schema_version','" TR_SCHEMA_VERSION_STR "'),('kind','rank'),"
           "('job_id','edgejob'),('rank','%d');"
           "INSERT INTO job VALUES ('edgejob', 2, 0, 0, NULL);"
           "INSERT INTO ranks VALUES (%d,'h',1,'cpu',NULL,0,100,0,NULL,0,'finished',0);"
           "INSERT INTO groups VALUES (0,'default',NULL,'cpu',2,'[0,1]',600000,0,NULL);"
           "WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < %d)"
           " INSERT INTO ops (group_id, seq, code, numel_in, numel_out, t_enq, d_start, d_end)"
           " SELECT 0, i, %lld, 4, 4, 1000000 + i * 1000, 0, 50 FROM c;",
           rank, rank, n,
           (long long)(DIST_OP_ALL_REDUCE | 2 << 8 | DIST_FLOAT32 << 16 | 1ll << 32 | 1ll << 48));
  exec(db, sql);
  return db;
}

static void rank_files(const char *job, int nranks, int n) {
  cr_assert(mkdir(job, 0700) == 0 || errno == EEXIST, "%s: %s", job, strerror(errno));
  for (int r = 0; r < nranks; r++) {
    char path[512];
    snprintf(path, sizeof path, "%s/rank-%d.db", job, r);
    sqlite3_close(rank_file(path, r, n));
  }
}

static void copy(const char *from, const char *to) {
  char cmd[1200];
  snprintf(cmd, sizeof cmd, "cp '%s' '%s'", from, to);
  cr_assert_eq(system(cmd), 0, "%s", cmd);
}

/* Files in d (not . and ..), or -1. */
static int entries(const char *d) {
  DIR *h = opendir(d);
  if (!h)
    return -1;
  int n = 0;
  for (struct dirent *e; (e = readdir(h));)
    n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
  closedir(h);
  return n;
}

/* The names in d, for a message: what was left behind. */
static const char *names(const char *d) {
  static char out[1024];
  out[0] = '\0';
  DIR *h = opendir(d);
  if (!h)
    return strerror(errno);
  size_t k = 0;
  for (struct dirent *e; (e = readdir(h)) && k < sizeof out - 1;)
    if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
      k += (size_t)snprintf(out + k, sizeof out - k, " %s", e->d_name);
  closedir(h);
  return out;
}

/* --- defect 4: read-only places ------------------------------------------------- */

/* Makes d read-only for this process: a read-only tmpfs remount as root
 * (root ignores permissions), else no write permission. fill() puts the
 * files in first. */
static void read_only_place(const char *d, int slot, void (*fill)(const char *)) {
  cr_assert_eq(mkdir(d, 0700), 0);
  bool root = geteuid() == 0;
  if (root) {
    cr_assert_eq(mount("tmpfs", d, "tmpfs", 0, "size=16m"), 0, "mount: %s", strerror(errno));
    snprintf(mounted[slot], sizeof mounted[slot], "%s", d);
  }
  fill(d);
  if (root)
    cr_assert_eq(mount(NULL, d, NULL, MS_REMOUNT | MS_RDONLY, NULL), 0,
                 "remount read-only: %s", strerror(errno));
  else
    cr_assert_eq(chmod(d, 0555), 0);
  char probe[512];
  snprintf(probe, sizeof probe, "%s/probe", d);
  int fd = open(probe, O_CREAT | O_WRONLY, 0600);
  cr_assert_lt(fd, 0, "%s is still writable", d);
}

static void fill_job(const char *job) {
  rank_files(job, 2, 500);
  /* rank 2 was killed: its rows are still in its -wal, and the -shm a
   * reader would need is not there (as after a copy without it) */
  char scratch[512], path[512];
  snprintf(scratch, sizeof scratch, "%s/scratch-rank-2.db", dir);
  sqlite3 *db = rank_file(scratch, 2, 500);
  snprintf(path, sizeof path, "%s/rank-2.db", job);
  copy(scratch, path);
  snprintf(path, sizeof path, "%s/rank-2.db-wal", job);
  char wal[600];
  snprintf(wal, sizeof wal, "%s-wal", scratch);
  copy(wal, path);
  sqlite3_close(db);
}

Test(tracer_reader_edges, rank_files_in_a_read_only_place_merge_and_open, .init = setup,
     .fini = teardown, .timeout = 60) {
  char job[256], out[256], rank0[300], err[1024];
  snprintf(job, sizeof job, "%s/edgejob", dir);
  read_only_place(job, 0, fill_job);
  snprintf(out, sizeof out, "%s/trace.db", dir);
  dist_trace_merge_report rep;
  cr_assert_eq(dist_trace_merge(job, out, &rep, err, sizeof err), DIST_OK, "%s", err);
  cr_assert_eq(rep.ranks_merged, 3, "rank 2 (rows in its -wal) read from a copy; skipped: %s",
               rep.skipped);
  cr_assert_eq(rep.files_skipped, 0, "%s", rep.skipped);
  sqlite3 *db;
  cr_assert_eq(sqlite3_open_v2(out, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
  cr_assert_eq(tq_int(db, "SELECT count(*) FROM operations"), 1500, "every row of ranks 0-2");
  cr_assert_eq(tq_int(db, "SELECT count(*) FROM operations WHERE rank = 2"), 500);
  sqlite3_close(db);
  char copies[600];
  snprintf(copies, sizeof copies, "ls %s | grep -q rank-copy", dir);
  cr_assert_neq(system(copies), 0, "the copy of rank 2's file was removed");

  snprintf(rank0, sizeof rank0, "%s/rank-0.db", job);
  dist_trace *t;
  cr_assert_eq(dist_trace_open(rank0, &t, err, sizeof err), DIST_OK, "rank file: %s", err);
  dist_trace_op ops[4];
  size_t n = 0;
  cr_assert_eq(dist_trace_last_ops(t, 0, ops, 4, &n), DIST_OK);
  cr_assert_eq(n, 4, "rows read through immutable=1");
  cr_assert_eq(ops[0].seq, 500, "the newest first");
  dist_trace_close(t);
  cr_assert_eq(dist_trace_open(job, &t, err, sizeof err), DIST_OK, "job directory: %s", err);
  dist_trace_close(t);

  dist_proc p;
  int rc = dist_proc_runl(&p, NULL, 60000, dist_test_bin("distview"), "summary", rank0, NULL);
  cr_assert_eq(rc, 0, "distview summary of the rank file: %s", DIST_PROC_ERR(&p));
  cr_assert(strstr(DIST_PROC_OUT(&p), "job edgejob (rank file"), "%s", DIST_PROC_OUT(&p));
  rc = dist_proc_runl(&p, NULL, 60000, dist_test_bin("distview"), "summary", job, NULL);
  cr_assert_eq(rc, 0, "distview summary of the job directory: %s", DIST_PROC_ERR(&p));
  cr_assert(strstr(DIST_PROC_OUT(&p), "3 ranks in the trace"), "%s", DIST_PROC_OUT(&p));
}

/* --- defect 6: a full disk -------------------------------------------------------- */

static void mount_small(const char *d, int slot, const char *size) {
  cr_assert_eq(mkdir(d, 0700), 0);
  if (geteuid() != 0 || mount("tmpfs", d, "tmpfs", 0, size) != 0)
    cr_skip_test("a full disk needs a small tmpfs (mount needs root): %s", strerror(errno));
  snprintf(mounted[slot], sizeof mounted[slot], "%s", d);
}

Test(tracer_reader_edges, a_merge_onto_a_full_disk_says_no_space_left_and_leaves_nothing,
     .init = setup, .fini = teardown, .timeout = 120) {
  char job[256], full[256], out[300], err[1024];
  snprintf(job, sizeof job, "%s/edgejob", dir);
  rank_files(job, 2, 20000); /* about 3 MB merged */
  snprintf(full, sizeof full, "%s/full", dir);
  mount_small(full, 0, "size=512k");
  snprintf(out, sizeof out, "%s/trace.db", full);
  dist_trace_merge_report rep;
  int rc = dist_trace_merge(job, out, &rep, err, sizeof err);
  cr_assert_eq(rc, DIST_E_SYS, "%s: %s", dist_status_name(rc), err);
  cr_assert(strstr(err, "no space left on the device of") && strstr(err, "trace.db.tmp"),
            "says the disk is full, naming the file: %s", err);
  cr_assert_null(strstr(err, "malformed"), "%s", err);
  cr_assert_eq(entries(full), 0, "neither trace.db nor trace.db.tmp is left");

  dist_proc p;
  rc = dist_proc_runl(&p, NULL, 60000, dist_test_bin("distview"), "merge", job, "-o", out, NULL);
  cr_assert_eq(rc, 1, "distview merge: exit %d", rc);
  cr_assert(strstr(DIST_PROC_ERR(&p), "no space left"), "%s", DIST_PROC_ERR(&p));
  cr_assert_eq(entries(full), 0, "nothing left by distview merge");
  /* a job directory opened directly merges into $TMPDIR */
  char tmpdir[300];
  snprintf(tmpdir, sizeof tmpdir, "TMPDIR=%s", full);
  const char *env[] = {tmpdir, NULL};
  rc = dist_proc_runl(&p, env, 60000, dist_test_bin("distview"), "summary", job, NULL);
  cr_assert_eq(rc, 1, "distview summary: exit %d", rc);
  cr_assert(strstr(DIST_PROC_ERR(&p), "no space left") && strstr(DIST_PROC_ERR(&p), "TMPDIR"),
            "%s", DIST_PROC_ERR(&p));
  cr_assert_eq(entries(full), 0, "nothing left in $TMPDIR");
}

/* A rank that ended on a full disk leaves rows in its -wal, and SQLite
 * cannot make the -shm it needs to read them there ("disk I/O error"). */
Test(tracer_reader_edges, a_rank_file_on_a_full_disk_merges_from_a_copy, .init = setup,
     .fini = teardown, .timeout = 60) {
  char job[256], out[300], err[1024], scratch[300], path[300], wal[320];
  snprintf(job, sizeof job, "%s/fulljob", dir);
  mount_small(job, 0, "size=256k");
  snprintf(scratch, sizeof scratch, "%s/scratch-rank-0.db", dir);
  sqlite3 *db = rank_file(scratch, 0, 300);
  snprintf(path, sizeof path, "%s/rank-0.db", job);
  copy(scratch, path);
  snprintf(wal, sizeof wal, "%s-wal", scratch);
  snprintf(path, sizeof path, "%s/rank-0.db-wal", job);
  copy(wal, path);
  sqlite3_close(db);
  char fill[800];
  snprintf(fill, sizeof fill, "dd if=/dev/zero of=%s/fill bs=4k 2>/dev/null; true", job);
  cr_assert_eq(system(fill), 0);
  snprintf(out, sizeof out, "%s/trace.db", dir);
  dist_trace_merge_report rep;
  cr_assert_eq(dist_trace_merge(job, out, &rep, err, sizeof err), DIST_OK, "%s", err);
  cr_assert_eq(rep.ranks_merged, 1, "skipped: %s", rep.skipped);
  cr_assert_eq(sqlite3_open_v2(out, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
  cr_assert_eq(tq_int(db, "SELECT count(*) FROM operations WHERE rank = 0"), 300, "every row");
  sqlite3_close(db);
  snprintf(fill, sizeof fill, "ls %s %s | grep -q rank-copy", dir, job);
  cr_assert_neq(system(fill), 0, "no copy left behind");
}

/* meta.merged_ranks names every merged rank, however many (it stopped at
 * about 900 in a 4 KiB buffer), runs folded. */
Test(tracer_reader_edges, merged_ranks_names_every_rank_of_a_thousand, .init = setup,
     .fini = teardown, .timeout = 120) {
  char job[256], out[300], err[1024], gone[320];
  snprintf(job, sizeof job, "%s/edgejob", dir);
  rank_files(job, 1100, 1);
  snprintf(gone, sizeof gone, "%s/rank-5.db", job);
  cr_assert_eq(unlink(gone), 0);
  snprintf(out, sizeof out, "%s/trace.db", dir);
  dist_trace_merge_report rep;
  cr_assert_eq(dist_trace_merge(job, out, &rep, err, sizeof err), DIST_OK, "%s", err);
  cr_assert_eq(rep.ranks_merged, 1099, "%s", rep.skipped);
  sqlite3 *db;
  cr_assert_eq(sqlite3_open_v2(out, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
  cr_assert_str_eq(tq_text(db, "SELECT value FROM meta WHERE key = 'merged_ranks'"),
                   "0-4,6-1099");
  sqlite3_close(db);
}

/* --- defect 5: interrupted merges ------------------------------------------------- */

/* True when d holds a `<name>.tmp`: a merge is writing into it. */
static bool merging(const char *d) {
  DIR *h = opendir(d);
  if (!h)
    return false;
  bool found = false;
  for (struct dirent *e; !found && (e = readdir(h));) {
    size_t n = strlen(e->d_name);
    found = n > 4 && !strcmp(e->d_name + n - 4, ".tmp");
  }
  closedir(h);
  return found;
}

/* Removes what a run left in d (a try that came too late). */
static void empty(const char *d) {
  DIR *h = opendir(d);
  cr_assert_not_null(h, "%s: %s", d, strerror(errno));
  for (struct dirent *e; (e = readdir(h));) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", d, e->d_name);
    if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
      unlink(path);
  }
  closedir(h);
}

/* Starts distview with args and freezes it (SIGSTOP) while its merge
 * writes a `.tmp` in the empty directory `watch`; sends sig to the frozen
 * process and wakes it. So the signal lands mid-merge however loaded the
 * machine: one sent on sight of the file can arrive after the merge (the
 * output then rightly stays) or, under TSan, which defers a signal to its
 * next interception, during exit, where it is lost. A try frozen after
 * the merge is resumed, cleared and made again. Then checks that distview
 * ended by the signal and left `watch` empty. */
static void interrupt(const char *const *argv, const char *watch, const char *tmpdir, int sig) {
  char env_tmp[300];
  snprintf(env_tmp, sizeof env_tmp, "TMPDIR=%s", tmpdir);
  const char *env[] = {env_tmp, NULL};
  cr_assert_eq(entries(watch), 0, "%s is not empty:%s", watch, names(watch));
  /* distview rightly keeps a signal its parent ignores (nohup, a shell's
   * background job): this test stands for a user at a terminal, so its
   * children start with the signal's default action, however ctest was
   * launched. */
  cr_assert_neq(signal(sig, SIG_DFL), SIG_ERR);
  for (int attempt = 0; attempt < 5; attempt++) {
    dist_proc p;
    dist_proc_start(&p, argv, env);
    int64_t deadline = dist_test_now_ms() + 60000;
    while (!merging(watch) && !dist_proc_reap(&p) && dist_test_now_ms() < deadline)
      dist_proc_pump(&p, 1, 1);
    bool frozen = kill(p.pid, SIGSTOP) == 0 && dist_test_wait_stopped(p.pid, 20000);
    if (!frozen || !merging(watch)) { /* the merge ended before the freeze */
      kill(p.pid, SIGCONT);
      int status = dist_proc_finish(&p, 60000);
      cr_assert_eq(status, 0, "%s: status %d: %s", argv[1], status, DIST_PROC_ERR(&p));
      empty(watch);
      continue;
    }
    cr_assert_eq(kill(p.pid, sig), 0);
    cr_assert_eq(kill(p.pid, SIGCONT), 0);
    int status = dist_proc_finish(&p, 60000);
    cr_assert_eq(status, 128 + sig, "%s ended by signal %d: status %d: %s", argv[1], sig, status,
                 DIST_PROC_ERR(&p));
    cr_assert_eq(entries(watch), 0, "%s left a file in %s after signal %d:%s", argv[1], watch,
                 sig, names(watch));
    return;
  }
  cr_assert_fail("%s: in 5 tries the merge ended before it could be frozen", argv[1]);
}

Test(tracer_reader_edges, an_interrupted_merge_leaves_no_temporary_file, .init = setup,
     .fini = teardown, .timeout = 200) {
  char job[256], tmp[256], outdir[256], out[300];
  snprintf(job, sizeof job, "%s/edgejob", dir);
  rank_files(job, 2, 300000); /* a merge of a few seconds */
  snprintf(tmp, sizeof tmp, "%s/tmp", dir);
  snprintf(outdir, sizeof outdir, "%s/out", dir);
  cr_assert_eq(mkdir(tmp, 0700), 0);
  cr_assert_eq(mkdir(outdir, 0700), 0);
  snprintf(out, sizeof out, "%s/trace.db", outdir);
  const char *bin = dist_test_bin("distview");
  const char *merge[] = {bin, "merge", job, "-o", out, NULL};
  interrupt(merge, outdir, tmp, SIGINT);
  cr_assert_eq(entries(outdir), 0, "no trace.db.tmp and no trace.db");
  const char *summary[] = {bin, "summary", job, NULL};
  interrupt(summary, tmp, tmp, SIGTERM);
  interrupt(summary, tmp, tmp, SIGHUP); // the terminal of --follow closing
  cr_assert_eq(entries(tmp), 0, "nothing left in $TMPDIR");
}
