/* trace_fixture.h - trace stores built with SQL for the viewer's tests and
 * the trace generator in bench/: the tables of tracer/SCHEMA.md, rows put
 * in one by one, and three failure stories (a desync, a hang, a
 * deadlock) plus a healthy job. Only SQLite: no runtime, no tracer. */
#ifndef DIST_TRACE_FIXTURE_H
#define DIST_TRACE_FIXTURE_H

#include <sqlite3.h>
#include <stdbool.h>
#include <stdint.h>

typedef struct fx_op {
  int rank, group_id;
  int64_t seq;
  const char *op, *state, *dtype, *shape, *redop, *message;
  int64_t numel, bytes;
  int root;                   /* -1: NULL */
  int64_t t_enq, t_start, t_end;  /* -1: NULL */
  int status;
} fx_op;

/* Creates path (replacing it) with the schema, meta (kind merged, schema
 * version `version`) and the job row. */
sqlite3 *fx_create(const char *path, const char *job_id, int world, int version);
void fx_rank(sqlite3 *db, int rank, const char *end_state);
void fx_group(sqlite3 *db, int id, const char *name, const int *members, int n);
/* Prepared once per db: call fx_op_end before closing. */
void fx_op_add(sqlite3 *db, const fx_op *o);
void fx_op_end(void);
void fx_event(sqlite3 *db, int rank, int group, int64_t seq, const char *kind, int64_t t,
              int status, const char *msg);
/* Sets the job's span, builds the merged file's indexes, closes db. */
void fx_finish(sqlite3 *db, int64_t t0, int64_t t1);

/* A completed collective on the given ranks at (group, seq) with the
 * fixtures' clock: enqueued at 1 s + seq ms + rank * 10 us, 0.5 ms long. */
void fx_coll(sqlite3 *db, int group, int64_t seq, const char *op, const int *ranks, int n);
int64_t fx_t(int64_t seq, int rank);

/* The stories. Each writes a merged trace.db at path. */
/* 4 ranks, group 0: #1..#12 ALL_REDUCE; at #13 rank 2 passes shape [4,512]
 * where ranks 0,1,3 pass [4,1024]; every rank fails with DIST_E_DESYNC;
 * with_report adds the checking layer's desync_report from rank 0. */
void fx_story_desync(const char *path, bool with_report);
/* 4 ranks, group 0 (0-3) and group 1 'pairs' (0,1): #1..#20 complete on
 * all; ranks 0,2,3 are blocked in #21 ALL_REDUCE, which rank 1 never
 * entered (its last completed is #20 BROADCAST). No report stored. */
void fx_story_hang(const char *path);
/* nranks ranks (1,024 in the viewer's tests), group 0 'default' of all:
 * #1..#ncoll-1 ALL_REDUCE complete on every rank; every rank but `lag` is
 * blocked in #ncoll ALL_REDUCE, which `lag` never entered (its trace ends
 * running: busy elsewhere). */
void fx_story_lag(const char *path, int nranks, int lag, int ncoll);
/* 2 ranks, groups 1 'a' and 2 'b' (both 0,1): rank 0 blocked in a #5
 * waiting for rank 1, rank 1 blocked in b #5 waiting for rank 0. */
void fx_story_deadlock(const char *path);
/* 4 ranks, 30 ALL_REDUCEs and a BARRIER, all completed. */
void fx_story_ok(const char *path);
/* 2 ranks on CUDA, all completed, with the nccl backend's 'gpu' events
 * (SCHEMA.md): group 0 #1..#4 ALL_REDUCE and #5 BROADCAST, rank r's GPU
 * start 20 us + r * 5 us after its enqueue, running 50 us * seq + r * 10
 * us, except that rank 1 has none for #4; #6 BARRIER has none. Group 1
 * 'tp': #1..#2 ALL_GATHER, 30 us + r * 2 us each; group 2 'cpu': #1..#2
 * BARRIER without GPU rows. */
void fx_story_gpu(const char *path);

#endif
