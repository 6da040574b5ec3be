/* bench_merge_sim.c - the merge beyond one machine: N synthetic rank files
 * of K operations each, written as the tracer writes them (its rank-file
 * schema, WAL), merged by dist_trace_merge, timed and checked.
 *
 *   bench_merge_sim [--dir DIR] [--keep] RANKS OPS [RANKS OPS ...]
 *                   (default: 1024 10000; DIR default ./bench-data)
 *
 * Every rank file holds K all_reduce operations of the default group, so
 * the merged trace must hold RANKS rows in ranks and RANKS * K in
 * operations, with every file merged and none skipped (ok). The files and
 * the merged trace are removed after each row unless --keep.
 * CSV on stdout:
 *   ranks,ops_per_rank,write_s,merge_s,merge_cpu_s,merged_mb,ok
 * write_s and merge_s are wall time; merge_cpu_s is this process's CPU
 * time during the merge (the machine's cores are shared). */
#include <dirent.h>
#include <errno.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <dist/dist.h>
#include <dist/trace_reader.h>

#include "reader_int.h"

static double clock_s(clockid_t c) {
  struct timespec t;
  clock_gettime(c, &t);
  return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* One rank file as the tracer leaves it: meta, job, ranks, the default
 * group and ops operations (the compact ops table behind the operations
 * view), filled with one statement. */
static int rank_file(const char *path, int rank, int world, int ops) {
  sqlite3 *db;
  char err[256] = "";
  /* synchronous=OFF: the files only need to exist, not to survive a crash
   * of this machine (a rank's writer syncs; writing 10,000 files here
   * would time the disk's flushes) */
  if (sqlite3_open(path, &db) != SQLITE_OK ||
      tr_exec(db, "PRAGMA journal_mode=WAL; PRAGMA synchronous=OFF", err, sizeof err) ||
      tr_schema_create_rank(db, rank, err, sizeof err)) {
    fprintf(stderr, "bench_merge_sim: %s: %s\n", path, err[0] ? err : sqlite3_errmsg(db));
    sqlite3_close(db);
    return -1;
  }
  char *sql = sqlite3_mprintf(
      "BEGIN;"
      "INSERT INTO meta VALUES ('schema_version','" TR_SCHEMA_VERSION_STR "'),('kind','rank'),"
      "('job_id','simjob'),('rank','%d');"
      "INSERT INTO job VALUES ('simjob', %d, 0, 0, NULL);"
      "INSERT INTO ranks VALUES (%d,'node%d',%d,'cpu',NULL,0,100,0,NULL,0,'finished',0);"
      "INSERT INTO groups VALUES (0,'default',NULL,'cpu',%d,'[]',600000,0,NULL);"
      "WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < %d)"
      " INSERT INTO ops (group_id, seq, code, numel_in, numel_out, t_enq, d_start, d_end)"
      " SELECT 0, i, %lld, 1024, 1024, 1000000 + i * 1000, 10, 500 FROM c;"
      "COMMIT;",
      rank, world, rank, rank / 8, 1000 + rank, world, ops,
      (long long)(DIST_OP_ALL_REDUCE | 2 << 8 | DIST_FLOAT32 << 16 | 1ll << 32 | 1ll << 48));
  int rc = sql ? tr_exec(db, sql, err, sizeof err) : -1;
  if (rc)
    fprintf(stderr, "bench_merge_sim: %s: %s\n", path, err);
  sqlite3_free(sql);
  sqlite3_close(db);
  return rc;
}

static long long count(sqlite3 *db, const char *sql) {
  sqlite3_stmt *st;
  long long n = -1;
  if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
    n = sqlite3_column_int64(st, 0);
  sqlite3_finalize(st);
  return n;
}

/* Whether the merged trace at out holds every rank and every operation. */
static bool merged_ok(const char *out, int ranks, int ops) {
  sqlite3 *db;
  bool ok = sqlite3_open_v2(out, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK &&
            count(db, "SELECT count(*) FROM ranks") == ranks &&
            count(db, "SELECT count(*) FROM operations") == (long long)ranks * ops &&
            count(db, "SELECT count(DISTINCT rank) FROM operations") == (ops ? ranks : 0);
  sqlite3_close(db);
  return ok;
}

/* Removes the job directory's files (rank files and their WAL leftovers). */
static void clean(const char *dir) {
  DIR *d = opendir(dir);
  for (struct dirent *e; d && (e = readdir(d));) {
    char p[1200];
    snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
    if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
      unlink(p);
  }
  if (d)
    closedir(d);
  rmdir(dir);
}

static void run(const char *base, int ranks, int ops, bool keep) {
  char job[1024], out[1100];
  snprintf(job, sizeof job, "%s/job-%d-%d", base, ranks, ops);
  snprintf(out, sizeof out, "%s/trace-%d-%d.db", base, ranks, ops);
  clean(job);
  if (mkdir(job, 0700) != 0) {
    fprintf(stderr, "bench_merge_sim: %s: %s\n", job, strerror(errno));
    return;
  }
  double t = clock_s(CLOCK_MONOTONIC);
  bool ok = true;
  for (int r = 0; ok && r < ranks; r++) {
    char path[1200];
    snprintf(path, sizeof path, "%s/rank-%d.db", job, r);
    ok = rank_file(path, r, ranks, ops) == 0;
  }
  double write_s = clock_s(CLOCK_MONOTONIC) - t;
  dist_trace_merge_report rep;
  char err[512] = "";
  t = clock_s(CLOCK_MONOTONIC);
  double cpu = clock_s(CLOCK_PROCESS_CPUTIME_ID);
  int rc = ok ? dist_trace_merge(job, out, &rep, err, sizeof err) : DIST_E_INVAL;
  double merge_s = clock_s(CLOCK_MONOTONIC) - t, merge_cpu = clock_s(CLOCK_PROCESS_CPUTIME_ID) - cpu;
  struct stat st;
  double mb = stat(out, &st) == 0 ? (double)st.st_size / 1e6 : 0;
  ok = ok && rc == DIST_OK && rep.ranks_merged == ranks && rep.files_skipped == 0 &&
       merged_ok(out, ranks, ops);
  if (rc != DIST_OK)
    fprintf(stderr, "bench_merge_sim: merge: %s\n", err);
  else if (rep.files_skipped)
    fprintf(stderr, "bench_merge_sim: skipped:\n%.1000s", rep.skipped);
  printf("%d,%d,%.2f,%.2f,%.2f,%.1f,%s\n", ranks, ops, write_s, merge_s, merge_cpu, mb,
         ok ? "yes" : "no");
  fflush(stdout);
  if (!keep) {
    clean(job);
    unlink(out);
  }
}

int main(int argc, char **argv) {
  const char *dir = "bench-data";
  bool keep = false;
  int a = 1;
  for (; a < argc && argv[a][0] == '-'; a++) {
    if (!strcmp(argv[a], "--dir") && a + 1 < argc) {
      dir = argv[++a];
    } else if (!strcmp(argv[a], "--keep")) {
      keep = true;
    } else {
      printf("usage: %s [--dir DIR] [--keep] RANKS OPS [RANKS OPS ...]   (default 1024 10000)\n",
             argv[0]);
      return strcmp(argv[a], "--help") != 0;
    }
  }
  if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
    fprintf(stderr, "bench_merge_sim: %s: %s\n", dir, strerror(errno));
    return 1;
  }
  printf("ranks,ops_per_rank,write_s,merge_s,merge_cpu_s,merged_mb,ok\n");
  if (a >= argc)
    run(dir, 1024, 10000, keep);
  for (; a + 1 < argc; a += 2)
    run(dir, atoi(argv[a]), atoi(argv[a + 1]), keep);
  return 0;
}
