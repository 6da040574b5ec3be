/* fuzz_trace.c - libFuzzer target: the trace reader distview uses, on
 * files after bad nights. byte 0 (mod 4) picks what the rest is:
 *   0  a whole merged trace.db (damaged pages, cut files, foreign files);
 *   1  the rank file of rank 0 in a job directory (next to an intact rank
 *      1): the merge reads it;
 *   2  SQL run on an intact merged trace.db before it is read: schemas
 *      from the future (new columns, tables gone, views instead of
 *      tables, other types, meta rows), rows no writer makes;
 *   3  SQL run on rank 0's intact rank file before the job is merged.
 * Then everything distview does with a trace runs on it: the reader
 * library (open, queries, verdict, the Chrome export), the viewer's model,
 * the diagnosis (quick and deep), the screens after keys, and the summary,
 * diagnose and stats subcommands (bits 2 and 3 of byte 0 add those two:
 * they cost tens of milliseconds). Anything may be refused with a
 * message; nothing may crash, hang or leak. The SQL runs with ATTACH, VACUUM and
 * page-count changes denied and a bounded number of steps. */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include <dist/trace_reader.h>

#include "reader_int.h"
#include "trace_fixture.h"
#include "vw.h"
#include "vw_ui.h"

static char dir[256], merged[300], job[300], rank0[320], rank1[320], out[320];
static uint8_t *base_merged, *base_rank0;
static size_t base_merged_len, base_rank0_len;

static void die(const char *what, const char *why) {
  fprintf(stderr, "fuzz_trace: %s: %s\n", what, why);
  abort();
}

static uint8_t *slurp(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f)
    die(path, "cannot read");
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  uint8_t *p = malloc((size_t)n);
  if (!p || fread(p, 1, (size_t)n, f) != (size_t)n)
    die(path, "cannot read");
  fclose(f);
  *len = (size_t)n;
  return p;
}

static void spit(const char *path, const uint8_t *p, size_t n) {
  char side[400];
  snprintf(side, sizeof side, "%s-wal", path); // a WAL left by an earlier input
  unlink(side);
  snprintf(side, sizeof side, "%s-shm", path);
  unlink(side);
  FILE *f = fopen(path, "wb");
  if (!f || fwrite(p, 1, n, f) != n || fclose(f) != 0)
    die(path, "cannot write");
}

static void exec_or_die(sqlite3 *db, const char *sql) {
  char *e = NULL;
  if (sqlite3_exec(db, sql, NULL, NULL, &e) != SQLITE_OK)
    die(sql, e ? e : "?");
}

/* A rank file in the writer's layout: groups, a few operations of which
 * the last failed, a desync report, a clock sample, a call site. */
static void make_rank_file(const char *path, int rank) {
  unlink(path);
  sqlite3 *db;
  if (sqlite3_open(path, &db) != SQLITE_OK || tr_schema_create_rank(db, rank, NULL, 0) != 0)
    die(path, "rank schema");
  char sql[2048];
  snprintf(sql, sizeof sql,
           "INSERT INTO meta VALUES ('schema_version','" TR_SCHEMA_VERSION_STR "'),('kind','rank'),"
           "('job_id','fz'),"
           "('rank','%d');"
           "INSERT INTO job VALUES ('fz', 2, 0, 0, NULL);"
           "INSERT INTO ranks VALUES (%d,'h',%d,'cpu',%d,5,100,0,'/bin/x',0,'crashed',0);"
           "INSERT INTO groups VALUES (0,'default',NULL,'cpu',2,'[0,1]',600000,0,NULL),"
           " (1,'tp','tensor','cpu',2,'[0,1]',1000,10,90);"
           "INSERT INTO shapes VALUES (1,'[4,%d]');"
           "INSERT INTO callsites VALUES (%d,1,4096,'/bin/x',NULL,16,'main',NULL,NULL);"
           "INSERT INTO clocks VALUES (%d, 100, 5, 50), (%d, 900, 500, 50);"
           "INSERT INTO events VALUES (%d,0,3,'desync_report',700,4,NULL,"
           " 'desync in group 0 at #3\nrank 1 differs in shape <- shape differs');"
           "WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < 3)"
           " INSERT INTO ops SELECT 0, i, %lld, 1, 16, 16, 100 * i, 10, CASE WHEN i < 3"
           " THEN 50 END, 1, NULL, NULL, CASE WHEN i = 3 THEN 4 ELSE 0 END, NULL, NULL FROM c;",
           rank, rank, 1000 + rank, rank, 512 * (rank + 1), rank, rank, rank, rank,
           (long long)(3 | 2 << 8 | 2 << 16 | 1ll << 32 | 1ll << 48));
  exec_or_die(db, sql);
  sqlite3_close(db);
}

/* The scratch directory goes when libFuzzer ends (-max_total_time, -runs);
 * a crash leaves it for the post-mortem. */
static void remove_dir(void) {
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd) != 0)
    fprintf(stderr, "fuzz_trace: could not remove %s\n", dir);
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  const char *tmp = getenv("TMPDIR");
  snprintf(dir, sizeof dir, "%s/dist-fuzz-trace-XXXXXX", tmp && *tmp ? tmp : "/tmp");
  if (!mkdtemp(dir))
    die(dir, "mkdtemp");
  snprintf(merged, sizeof merged, "%s/trace.db", dir);
  snprintf(job, sizeof job, "%s/fz", dir);
  snprintf(rank0, sizeof rank0, "%s/rank-0.db", job);
  snprintf(rank1, sizeof rank1, "%s/rank-1.db", job);
  snprintf(out, sizeof out, "%s/merged.db", dir);
  mkdir(job, 0700);
  atexit(remove_dir);
  fx_story_desync(merged, true);
  base_merged = slurp(merged, &base_merged_len);
  make_rank_file(rank0, 0);
  make_rank_file(rank1, 1);
  base_rank0 = slurp(rank0, &base_rank0_len);
  int null = open("/dev/null", O_WRONLY);
  if (null < 0 || dup2(null, STDOUT_FILENO) < 0) // the subcommands print
    die("/dev/null", "stdout");
  close(null);
  sqlite3_hard_heap_limit64(512 << 20);
  return 0;
}

/* --- the SQL of modes 2 and 3 ----------------------------------------------------- */

static int deny(void *arg, int action, const char *a, const char *b, const char *c,
                const char *d) {
  (void)arg;
  (void)b;
  (void)c;
  (void)d;
  if (action == SQLITE_ATTACH || action == SQLITE_DETACH)
    return SQLITE_DENY;
  if (action == SQLITE_PRAGMA && a &&
      (!strcasecmp(a, "max_page_count") || !strcasecmp(a, "temp_store_directory") ||
       !strcasecmp(a, "data_store_directory")))
    return SQLITE_DENY;
  return SQLITE_OK;
}

static int steps_left;
static int progress(void *arg) {
  (void)arg;
  return --steps_left < 0; // non-zero interrupts
}

static void run_sql(const char *path, const uint8_t *p, size_t n) {
  char *sql = malloc(n + 1);
  if (!sql)
    return;
  memcpy(sql, p, n);
  sql[n] = '\0';
  if (strcasestr(sql, "vacuum")) { // VACUUM INTO writes files anywhere
    free(sql);
    return;
  }
  sqlite3 *db;
  if (sqlite3_open(path, &db) == SQLITE_OK) {
    sqlite3_limit(db, SQLITE_LIMIT_ATTACHED, 0);
    sqlite3_exec(db, "PRAGMA max_page_count = 4096", NULL, NULL, NULL);
    sqlite3_set_authorizer(db, deny, NULL);
    steps_left = 20000; // the progress handler runs every 100 steps
    sqlite3_progress_handler(db, 100, progress, NULL);
    sqlite3_exec(db, sql, NULL, NULL, NULL); // fails part way: what ran, stays
  }
  sqlite3_close(db);
  free(sql);
}

/* --- what distview does ------------------------------------------------------------ */

static void run_cmd(int (*cmd)(int, char **), const char *a1, const char *a2, const char *path) {
  char *argv[5];
  int argc = 0;
  argv[argc++] = (char *)"cmd";
  if (a1)
    argv[argc++] = (char *)a1;
  if (a2)
    argv[argc++] = (char *)a2;
  argv[argc++] = (char *)path;
  argv[argc] = NULL;
  (void)cmd(argc, argv);
}

static void reader(const char *path) {
  dist_trace *t = NULL;
  char err[2048] = "";
  if (dist_trace_open(path, &t, err, sizeof err) != DIST_OK) {
    if (!err[0])
      die(path, "dist_trace_open refused it without a message");
    return;
  }
  dist_trace_op ops[8];
  size_t n = 0;
  (void)dist_trace_last_ops(t, 0, ops, 8, &n);
  (void)dist_trace_collective(t, 0, 3, ops, 8, &n);
  dist_trace_verdict_row v;
  if (dist_trace_read_verdict(dist_trace_sqlite(t), &v, err, sizeof err) == DIST_OK)
    dist_trace_verdict_row_free(&v);
  (void)dist_trace_export_chrome(t, "-", err, sizeof err);
  dist_trace_close(t);
}

/* extra (byte 0, bits 2-3): the screens after keys, the subcommands; both
 * cost tens of milliseconds, so the fuzzer picks them for some inputs */
static void viewer(const char *path, int extra) {
  vw_model *m;
  char err[2048] = "";
  if (vw_model_open(path, &m, err, sizeof err) != 0) {
    if (!err[0])
      die(path, "vw_model_open refused it without a message");
    return;
  }
  for (int deep = 0; deep < 2; deep++) {
    vw_diag d;
    if (vw_diagnose(m, deep, &d) == 0)
      vw_diag_free(&d);
  }
  vw_model_close(m);
  vw_app a;
  if ((extra & 1) && vw_app_open(&a, path, 24, 80, err, sizeof err) == 0) {
    vw_app_keys(&a, "j<Enter><Tab>/ALL<Enter>");
    vw_app_close(&a);
  }
  if (extra & 2) {
    run_cmd(vw_cmd_summary, "--json", NULL, path);
    run_cmd(vw_cmd_diagnose, NULL, NULL, path);
    run_cmd(vw_cmd_stats, NULL, NULL, path);
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1)
    return 0;
  const uint8_t *p = data + 1;
  size_t n = size - 1;
  int mode = data[0] & 3, extra = data[0] >> 2 & 3;
  if (mode == 0 || mode == 2) {
    spit(merged, mode == 0 ? p : base_merged, mode == 0 ? n : base_merged_len);
    if (mode == 2)
      run_sql(merged, p, n);
    reader(merged);
    viewer(merged, extra);
    return 0;
  }
  spit(rank0, mode == 1 ? p : base_rank0, mode == 1 ? n : base_rank0_len);
  if (mode == 3)
    run_sql(rank0, p, n);
  /* one merge (tens of ms under ASan): dist_trace_open of the directory
   * runs the same one, into $TMPDIR */
  dist_trace_merge_report rep;
  char err[2048] = "";
  if (dist_trace_merge(job, out, &rep, err, sizeof err) != DIST_OK) {
    if (!err[0])
      die(job, "the merge failed without a message");
    return 0;
  }
  reader(out);
  viewer(out, extra);
  return 0;
}
