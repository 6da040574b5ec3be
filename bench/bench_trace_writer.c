/* bench_trace_writer.c - the tracer's writer path without a job: records
 * per second from a ring into a rank file, and the merge of rank files.
 *
 *     build/bin/bench_trace_writer [--ops N] [--ranks R] [--dir D]
 *
 * writer: N operations (an issued record of 2 slots and a completed one, as
 * a synchronous all_reduce leaves them) are put in a ring, then drained by
 * the writer's code (decode + record sink + SQLite, WAL, one transaction
 * per 64 Ki slots, as the writer thread's cycles do) into R rank files.
 * merge: those R files into one indexed trace.db (dist_trace_merge).
 * record: the hot path alone, what a synchronous operation costs its caller
 * with the tracer registered: two dist_clock_ns() reads and the two ring
 * records (issued, completed), one thread, no writer.
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
#include "dist_int.h"
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

static sqlite3 *open_rank_file(const char *path, int rank) {
  sqlite3 *db;
  unlink(path);
  char wal[600];
  snprintf(wal, sizeof wal, "%s-wal", path);
  unlink(wal);
  sqlite3_open(path, &db);
  tr_exec(db, "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;", NULL, 0);
  tr_schema_create(db, false, NULL, 0);
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
  const char *dir = "/tmp/dist-bench-trace";
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--ops"))
      n = strtoull(argv[i + 1], NULL, 10);
    else if (!strcmp(argv[i], "--ranks"))
      ranks = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--dir"))
      dir = argv[i + 1];
  }
  if (argc > 1 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
    printf("usage: bench_trace_writer [--ops N] [--ranks R] [--dir D]\n");
    return 0;
  }
  mkdir(dir, 0700);
  printf("what,ops,ranks,seconds,ops_per_s,cpu_seconds,ops_per_cpu_s\n");
  bench_record(20000000, 65536);
  bench_record(20000000, 4096);
  for (int r = 0; r < ranks; r++) {
    char path[512];
    snprintf(path, sizeof path, "%s/rank-%d.db", dir, r);
    double c, s = write_rank(path, r, n, &c);
    printf("writer,%llu,1,%.3f,%.0f,%.3f,%.0f\n", (unsigned long long)n, s, (double)n / s, c,
           (double)n / c);
    fflush(stdout);
  }
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
