/* bench_trace_writer.c - the tracer's writer path without a job: records
 * per second from a ring into a rank file, and the merge of rank files.
 *
 *     build/bin/bench_trace_writer [--ops N] [--ranks R] [--dir D] [--only WHAT]
 *
 * writer: N operations (an issued record of 2 slots and a completed one, as
 * a synchronous all_reduce leaves them) are put in a ring, then drained by
 * the writer's code (decode + record sink + SQLite, WAL, one transaction
 * per 64 Ki slots, as the writer thread's cycles do) into R rank files.
 * merge: those R files into one indexed trace.db (dist_trace_merge).
 * record: the hot path alone, what a synchronous operation costs its caller
 * with the tracer registered: two dist_clock_ns() reads and the two ring
 * records (issued, completed), one thread, no writer.
 * plain: the baselines, SQLite alone, the same pragmas and transaction
 * size, one prepared statement, nothing else: plain_wide inserts N rows of
 * the documented 24 columns (the layout the writer used before), and
 * plain_narrow N rows of the rank file's ops table as the writer fills it
 * (10 values) - what the writer is compared with.
 * --only runs one of record, writer, plain, merge (merge reads the rank
 * files a previous writer run left in D).
 * Prints CSV `what,ops,ranks,seconds,ops_per_s,cpu_seconds,ops_per_cpu_s`
 * (an operation = one row): wall time, and the process's CPU time, which
 * is what to compare on a loaded machine. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <dist/dist.h>
#include <dist/trace_reader.h>

#include "reader_int.h"
#include "ring.h"
#include "base/dist_int.h"
#include "tracer_int.h"

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double cpu_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int get(void *arg, uint64_t idx, void *slot) { return tr_ring_get(arg, idx, slot); }

/* The two records of one synchronous 4-byte all_reduce. */
static void put_op(tr_ring *r, uint64_t seq, int64_t t) {
  tr_head h = {.kind = DIST_EV_OP_ISSUED, .op = DIST_OP_ALL_REDUCE, .dtype = DIST_FLOAT32,
               .redop = 0, .nslots = 2, .ndim = 1, .flags = TR_F_SHAPE, .group_id = 0,
               .seq = seq, .t_ns = t, .root = -1, .caller = 0x401000};
  tr_shape sh = {.numel_in = 1, .numel_out = 1, .n_inputs = 1, .n_outputs = 1, .shape = {1}};
  uint64_t i = tr_ring_claim(r, 2);
  tr_ring_put(r, i, &h);
  tr_ring_put(r, i + 1, &sh);
  tr_head e = h;
  e.kind = DIST_EV_OP_COMPLETED;
  e.nslots = 1;
  e.flags = 0;
  e.t_ns = t + 150;
  tr_ring_put(r, tr_ring_claim(r, 1), &e);
}

/* rank >= 0: a rank file (rank layout); -1: the merged layout, no index. */
static sqlite3 *open_rank_file(const char *path, int rank) {
  sqlite3 *db;
  unlink(path);
  char wal[600];
  snprintf(wal, sizeof wal, "%s-wal", path);
  unlink(wal);
  sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX,
                  NULL); /* as the writer opens it */
  tr_exec(db, "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;", NULL, 0);
  if (rank < 0) {
    tr_schema_create(db, false, NULL, 0);
    return db;
  }
  tr_schema_create_rank(db, rank, NULL, 0);
  char sql[512];
  snprintf(sql, sizeof sql,
           "INSERT INTO meta VALUES ('schema_version','1'),('kind','rank'),('job_id','bench'),"
           "('rank','%d'); INSERT INTO job VALUES ('bench', 4, 0, 0, NULL);"
           "INSERT INTO ranks VALUES (%d,'bench',1,'cpu',NULL,0,0,0,NULL,0,'finished',0);",
           rank, rank);
  tr_exec(db, sql, NULL, 0);
  return db;
}

/* Writes n operations into one rank file; returns seconds spent draining
 * (*cpu: CPU seconds). */
static double write_rank(const char *path, int rank, uint64_t n, double *cpu) {
  sqlite3 *db = open_rank_file(path, rank);
  tr_sink *sink;
  tr_sink_opts so = {.rank = rank, .symbolise = true};
  if (tr_sink_open(db, &so, &sink) != 0) {
    fprintf(stderr, "sink: %s\n", tr_sink_error(sink));
    exit(1);
  }
  tr_ring ring;
  tr_ring_init(&ring, 65536);
  uint64_t tail = 0, done = 0, lost = 0;
  double spent = 0;
  *cpu = 0;
  int64_t t = 1000000;
  while (done < n) {
    uint64_t batch = n - done < 21000 ? n - done : 21000; /* ~63 Ki slots */
    for (uint64_t k = 0; k < batch; k++)
      put_op(&ring, ++done, t += 300);
    double t0 = now_s(), c0 = cpu_s();
    tr_exec(db, "BEGIN", NULL, 0);
    uint64_t head = atomic_load(&ring.head);
    tr_decode_range(sink, get, &ring, tail, head, &lost);
    tail = head;
    tr_sink_flush(sink);
    tr_exec(db, "COMMIT", NULL, 0);
    spent += now_s() - t0;
    *cpu += cpu_s() - c0;
  }
  if (lost)
    fprintf(stderr, "lost %llu records\n", (unsigned long long)lost);
  tr_sink_close(sink);
  tr_ring_fini(&ring);
  sqlite3_close(db);
  return spent;
}

/* The baselines, SQLite alone: n rows of the documented 24 columns
 * (wide: the merged file's operations table, what the writer stored before
 * the rank layout), or of the rank layout's ops table with the values the
 * writer binds for a synchronous all_reduce (narrow). */
static void bind_wide(sqlite3_stmt *st, int rank, uint64_t seq, int64_t t) {
  static const char *const text[25] = {[4] = "ALL_REDUCE", [6] = "completed", [7] = "float32",
                                       [8] = "[1]", [17] = "SUM"};
  /* rank, group, seq, -, is_async, -, -, -, n_in, n_out, numel_in, numel_out, bytes_in,
   * bytes_out, root, tag, -, timeout, t_enq, t_start, t_end, status, message, callsite */
  int64_t v[25] = {0, rank, 0, (int64_t)seq, 0, 0, 0, 0, 0, 1, 1, 1, 1, 4, 4, -1, -1, 0, -1,
                   t, t, t + 150, 0, -1, 0};
  for (int c = 1; c <= 24; c++)
    if (text[c])
      sqlite3_bind_text(st, c, text[c], -1, SQLITE_STATIC);
    else if (v[c] < 0)
      sqlite3_bind_null(st, c);
    else
      sqlite3_bind_int64(st, c, v[c]);
}

static void bind_narrow(sqlite3_stmt *st, uint64_t seq, int64_t t) {
  sqlite3_bind_int(st, 1, 0);
  sqlite3_bind_int64(st, 2, (int64_t)seq);
  sqlite3_bind_int64(st, 3, 0x0001000100000000ll | DIST_OP_ALL_REDUCE | 2 << 8 |
                                DIST_FLOAT32 << 16);
  sqlite3_bind_int(st, 4, 1);
  sqlite3_bind_int(st, 5, 1);
  sqlite3_bind_int(st, 6, 1);
  sqlite3_bind_int64(st, 7, t);
  sqlite3_bind_int(st, 8, 0);
  sqlite3_bind_int(st, 9, 150);
  sqlite3_bind_int(st, 10, 0);
}

static double plain_rank(const char *path, int rank, uint64_t n, bool narrow, double *cpu) {
  sqlite3 *db = open_rank_file(path, narrow ? rank : -1);
  sqlite3_stmt *st;
  const char *sql = narrow ? "INSERT INTO ops (group_id, seq, code, shape_id, numel_in,"
                             " numel_out, t_enq, d_start, d_end, callsite_id) VALUES"
                             " (?1,?2,?3,?4,?5,?6,?7,?8,?9,?10)"
                           : "INSERT INTO operations VALUES (?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,"
                             "?12,?13,?14,?15,?16,?17,?18,?19,?20,?21,?22,?23,?24)";
  if (sqlite3_prepare_v3(db, sql, -1, SQLITE_PREPARE_PERSISTENT, &st, NULL) != SQLITE_OK) {
    fprintf(stderr, "plain: %s\n", sqlite3_errmsg(db));
    exit(1);
  }
  double t0 = now_s(), c0 = cpu_s();
  int64_t t = 1000000;
  for (uint64_t done = 0; done < n;) {
    uint64_t batch = n - done < 21000 ? n - done : 21000;
    tr_exec(db, "BEGIN", NULL, 0);
    for (uint64_t k = 0; k < batch; k++) {
      t += 300;
      narrow ? bind_narrow(st, ++done, t) : bind_wide(st, rank, ++done, t);
      sqlite3_step(st);
      sqlite3_reset(st);
    }
    tr_exec(db, "COMMIT", NULL, 0);
  }
  double s = now_s() - t0;
  *cpu = cpu_s() - c0;
  sqlite3_finalize(st);
  sqlite3_close(db);
  return s;
}

static void bench_record(uint64_t n, uint64_t slots) {
  dist__clock_calibrate(); /* as at init: the TSC clock, not clock_gettime */
  tracer t;
  memset(&t, 0, sizeof t);
  tr_ring_init(&t.ring, slots);
  float v = 1;
  dist_tensor tensor = dist_tensor_1d(&v, DIST_FLOAT32, 1);
  int members[2] = {0, 1};
  dist_pg_info info = {.group_id = 0, .name = "0", .size = 2, .global_ranks = members};
  dist_coll c = {.kind = DIST_OP_ALL_REDUCE, .inputs = &tensor, .n_inputs = 1,
                 .outputs = &tensor, .n_outputs = 1, .root = -1, .caller = (void *)bench_record};
  dist_event ev = {.coll = &c, .group = &info, .peer = -1, .caller = c.caller};
  double t0 = now_s(), c0 = cpu_s();
  for (uint64_t i = 1; i <= n; i++) {
    c.seq = ev.seq = i;
    ev.kind = DIST_EV_OP_ISSUED;
    ev.t_ns = dist_clock_ns();
    tr_record_event(&t, &ev);
    ev.kind = DIST_EV_OP_COMPLETED;
    ev.t_ns = dist_clock_ns();
    tr_record_event(&t, &ev);
  }
  double s = now_s() - t0, cs = cpu_s() - c0;
  printf("record,%llu,1,%.3f,%.0f,%.3f,%.0f\n", (unsigned long long)n, s, (double)n / s, cs,
         (double)n / cs);
  printf("# record: %.1f ns (CPU) per operation (2 clock reads + 2 records), ring of %llu"
         " slots\n", cs * 1e9 / (double)n, (unsigned long long)slots);
  tr_ring_fini(&t.ring);
}

int main(int argc, char **argv) {
  uint64_t n = 1000000;
  int ranks = 4;
  const char *dir = "/tmp/dist-bench-trace", *only = NULL;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--ops"))
      n = strtoull(argv[i + 1], NULL, 10);
    else if (!strcmp(argv[i], "--ranks"))
      ranks = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--dir"))
      dir = argv[i + 1];
    else if (!strcmp(argv[i], "--only"))
      only = argv[i + 1];
  }
  if (argc > 1 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
    printf("usage: bench_trace_writer [--ops N] [--ranks R] [--dir D]"
           " [--only record|writer|plain|merge]\n");
    return 0;
  }
  mkdir(dir, 0700);
  printf("what,ops,ranks,seconds,ops_per_s,cpu_seconds,ops_per_cpu_s\n");
#define RUN(what) (!only || !strcmp(only, what))
  if (RUN("record")) {
    bench_record(20000000, 65536);
    bench_record(20000000, 4096);
  }
  for (int r = 0; r < 2 * ranks && RUN("plain"); r++) {
    char path[512];
    snprintf(path, sizeof path, "%s/plain-%d.db", dir, r);
    double c, s = plain_rank(path, r / 2, n, r % 2, &c);
    printf("%s,%llu,1,%.3f,%.0f,%.3f,%.0f\n", r % 2 ? "plain_narrow" : "plain_wide",
           (unsigned long long)n, s, (double)n / s, c, (double)n / c);
    fflush(stdout);
  }
  for (int r = 0; r < ranks && RUN("writer"); r++) {
    char path[512];
    snprintf(path, sizeof path, "%s/rank-%d.db", dir, r);
    double c, s = write_rank(path, r, n, &c);
    printf("writer,%llu,1,%.3f,%.0f,%.3f,%.0f\n", (unsigned long long)n, s, (double)n / s, c,
           (double)n / c);
    fflush(stdout);
  }
  if (!RUN("merge"))
    return 0;
  char out[512], err[256];
  snprintf(out, sizeof out, "%s.trace.db", dir);
  dist_trace_merge_report rep;
  double t0 = now_s(), c0 = cpu_s();
  if (dist_trace_merge(dir, out, &rep, err, sizeof err) != DIST_OK) {
    fprintf(stderr, "merge: %s\n", err);
    return 1;
  }
  double m = now_s() - t0, mc = cpu_s() - c0;
  printf("merge,%lld,%d,%.3f,%.0f,%.3f,%.0f\n", (long long)rep.operations, rep.ranks_merged, m,
         (double)rep.operations / m, mc, (double)rep.operations / mc);
  return 0;
}
