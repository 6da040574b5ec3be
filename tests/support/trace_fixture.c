/* trace_fixture.c - trace stores built with SQL (see trace_fixture.h). The
 * schema text follows tracer/SCHEMA.md column for column; a fixture that
 * drifted from it would make the viewer's tests prove nothing, so the
 * viewer's tests also open files the tracer itself wrote when it exists. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "trace_fixture.h"

static const char schema[] =
    "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);"
    "CREATE TABLE job (job_id TEXT NOT NULL, world_size INTEGER NOT NULL,"
    " unix_minus_mono_ns INTEGER NOT NULL, started_ns INTEGER, ended_ns INTEGER);"
    "CREATE TABLE ranks (rank INTEGER PRIMARY KEY, host TEXT NOT NULL, pid INTEGER NOT NULL,"
    " device TEXT NOT NULL, local_rank INTEGER, clock_offset_ns INTEGER NOT NULL,"
    " clock_rtt_ns INTEGER, unix_minus_mono_ns INTEGER NOT NULL, exe TEXT,"
    " init_ns INTEGER NOT NULL, end_state TEXT NOT NULL,"
    " dropped_records INTEGER NOT NULL DEFAULT 0);"
    "CREATE TABLE groups (group_id INTEGER PRIMARY KEY, name TEXT NOT NULL, description TEXT,"
    " backend TEXT NOT NULL, size INTEGER NOT NULL, members TEXT NOT NULL, timeout_ms INTEGER,"
    " created_ns INTEGER, destroyed_ns INTEGER);"
    "CREATE TABLE operations (rank INTEGER NOT NULL, group_id INTEGER NOT NULL,"
    " seq INTEGER NOT NULL, op TEXT NOT NULL, is_async INTEGER NOT NULL, state TEXT NOT NULL,"
    " dtype TEXT, shape TEXT, n_inputs INTEGER NOT NULL, n_outputs INTEGER NOT NULL,"
    " numel_in INTEGER NOT NULL, numel_out INTEGER NOT NULL, bytes_in INTEGER NOT NULL,"
    " bytes_out INTEGER NOT NULL, root INTEGER, tag INTEGER, redop TEXT, timeout_ms INTEGER,"
    " t_enqueued_ns INTEGER NOT NULL, t_started_ns INTEGER, t_ended_ns INTEGER,"
    " status INTEGER NOT NULL DEFAULT 0, message TEXT, callsite_id INTEGER);"
    "CREATE TABLE callsites (rank INTEGER NOT NULL, callsite_id INTEGER NOT NULL,"
    " address INTEGER NOT NULL, module TEXT, build_id TEXT, offset INTEGER, function TEXT,"
    " PRIMARY KEY (rank, callsite_id));"
    "CREATE TABLE events (rank INTEGER NOT NULL, group_id INTEGER, seq INTEGER,"
    " kind TEXT NOT NULL, t_ns INTEGER NOT NULL, status INTEGER NOT NULL DEFAULT 0,"
    " peer INTEGER, message TEXT);"
    "CREATE TABLE stats (rank INTEGER NOT NULL, group_id INTEGER NOT NULL, t_ns INTEGER NOT NULL,"
    " op TEXT NOT NULL, count INTEGER NOT NULL, bytes INTEGER NOT NULL, p50_ns INTEGER,"
    " p99_ns INTEGER, straggler_rank INTEGER, lateness_ns INTEGER);"
    "CREATE TABLE drops (rank INTEGER NOT NULL, group_id INTEGER NOT NULL,"
    " seq_first INTEGER NOT NULL, seq_last INTEGER NOT NULL, records INTEGER NOT NULL,"
    " t_ns INTEGER NOT NULL);";

static const char indexes[] =
    "CREATE UNIQUE INDEX op_by_coll ON operations(group_id, seq, rank);"
    "CREATE INDEX op_by_rank ON operations(rank, t_enqueued_ns);"
    "CREATE INDEX ev_by_rank ON events(rank, t_ns);"
    "CREATE INDEX ev_by_kind ON events(kind, t_ns);"
    "CREATE INDEX stats_by_group ON stats(group_id, t_ns);"
    /* as the merge writes it (tracer/src/schema.c) */
    "CREATE TABLE op_totals AS SELECT op, count(*) AS n, "
    "sum(state = 'completed') AS completed, sum(state = 'failed') AS failed, "
    "sum(state = 'timed_out') AS timed_out, sum(state IN ('enqueued', 'started')) AS in_flight, "
    "sum(bytes_in) AS bytes_in FROM operations GROUP BY op;";

static void exec(sqlite3 *db, const char *sql) {
  char *err = NULL;
  if (sqlite3_exec(db, sql, NULL, NULL, &err) != SQLITE_OK) {
    fprintf(stderr, "fixture: %s\n  in: %.200s\n", err, sql);
    abort();
  }
}

sqlite3 *fx_create(const char *path, const char *job_id, int world, int version) {
  unlink(path);
  sqlite3 *db;
  if (sqlite3_open(path, &db) != SQLITE_OK)
    abort();
  exec(db, "PRAGMA journal_mode = OFF; PRAGMA synchronous = OFF");
  exec(db, schema);
  exec(db, "BEGIN");
  char sql[512];
  snprintf(sql, sizeof sql,
           "INSERT INTO meta VALUES ('schema_version', '%d'), ('kind', 'merged'),"
           " ('job_id', '%s'), ('created_ns', '0'), ('writer', 'fixture'),"
           " ('merged_ranks', ''), ('skipped_files', '');"
           "INSERT INTO job VALUES ('%s', %d, 1700000000000000000, NULL, NULL)",
           version, job_id, job_id, world);
  exec(db, sql);
  return db;
}

void fx_rank(sqlite3 *db, int rank, const char *end_state) {
  char sql[512];
  snprintf(sql, sizeof sql,
           "INSERT INTO ranks VALUES (%d, 'node%d', %d, 'cpu', %d, 0, 1000, 1700000000000000000,"
           " '/bin/train', 1000000, '%s', 0)", rank, rank / 8, 4000 + rank, rank % 8, end_state);
  exec(db, sql);
}

void fx_group(sqlite3 *db, int id, const char *name, const int *members, int n) {
  static char mem[32768];   // VW_MAX_RANKS members ("[0,1,...,4095]")
  mem[0] = '[';
  size_t off = 1;
  for (int i = 0; i < n && off < sizeof mem - 16; i++)
    off += (size_t)snprintf(mem + off, sizeof mem - off, "%s%d", i ? "," : "", members[i]);
  snprintf(mem + off, sizeof mem - off, "]");
  sqlite3_stmt *st;
  sqlite3_prepare_v2(db, "INSERT INTO groups VALUES (?, ?, NULL, 'cpu', ?, ?, 30000, 1000000, "
                         "NULL)", -1, &st, NULL);
  sqlite3_bind_int(st, 1, id);
  sqlite3_bind_text(st, 2, name, -1, SQLITE_STATIC);
  sqlite3_bind_int(st, 3, n);
  sqlite3_bind_text(st, 4, mem, -1, SQLITE_TRANSIENT);
  if (sqlite3_step(st) != SQLITE_DONE)
    abort();
  sqlite3_finalize(st);
}

static sqlite3_stmt *op_st;
static sqlite3 *op_db;

static void bind_i64(sqlite3_stmt *st, int i, int64_t v) {
  if (v < 0)
    sqlite3_bind_null(st, i);
  else
    sqlite3_bind_int64(st, i, v);
}

void fx_op_add(sqlite3 *db, const fx_op *o) {
  if (op_db != db) {
    fx_op_end();
    sqlite3_prepare_v2(db, "INSERT INTO operations VALUES (?1, ?2, ?3, ?4, 0, ?5, ?6, ?7, 1, 1,"
                           " ?8, ?8, ?9, ?9, ?10, NULL, ?11, 30000, ?12, ?13, ?14, ?15, ?16, NULL)",
                       -1, &op_st, NULL);
    op_db = db;
  }
  sqlite3_stmt *st = op_st;
  sqlite3_reset(st);
  sqlite3_bind_int(st, 1, o->rank);
  sqlite3_bind_int(st, 2, o->group_id);
  sqlite3_bind_int64(st, 3, o->seq);
  sqlite3_bind_text(st, 4, o->op, -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 5, o->state ? o->state : "completed", -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 6, o->dtype, -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 7, o->shape, -1, SQLITE_STATIC);
  sqlite3_bind_int64(st, 8, o->numel);
  sqlite3_bind_int64(st, 9, o->bytes);
  if (o->root < 0)
    sqlite3_bind_null(st, 10);
  else
    sqlite3_bind_int(st, 10, o->root);
  sqlite3_bind_text(st, 11, o->redop, -1, SQLITE_STATIC);
  sqlite3_bind_int64(st, 12, o->t_enq);
  bind_i64(st, 13, o->t_start);
  bind_i64(st, 14, o->t_end);
  sqlite3_bind_int(st, 15, o->status);
  sqlite3_bind_text(st, 16, o->message, -1, SQLITE_STATIC);
  if (sqlite3_step(st) != SQLITE_DONE) {
    fprintf(stderr, "fixture: %s\n", sqlite3_errmsg(db));
    abort();
  }
}

void fx_op_end(void) {
  sqlite3_finalize(op_st);
  op_st = NULL;
  op_db = NULL;
}

void fx_event(sqlite3 *db, int rank, int group, int64_t seq, const char *kind, int64_t t,
              int status, const char *msg) {
  sqlite3_stmt *st;
  sqlite3_prepare_v2(db, "INSERT INTO events VALUES (?, ?, ?, ?, ?, ?, NULL, ?)", -1, &st, NULL);
  sqlite3_bind_int(st, 1, rank);
  if (group < 0)
    sqlite3_bind_null(st, 2);
  else
    sqlite3_bind_int(st, 2, group);
  bind_i64(st, 3, seq);
  sqlite3_bind_text(st, 4, kind, -1, SQLITE_STATIC);
  sqlite3_bind_int64(st, 5, t);
  sqlite3_bind_int(st, 6, status);
  sqlite3_bind_text(st, 7, msg, -1, SQLITE_STATIC);
  if (sqlite3_step(st) != SQLITE_DONE)
    abort();
  sqlite3_finalize(st);
}

void fx_finish(sqlite3 *db, int64_t t0, int64_t t1) {
  fx_op_end();
  char sql[256];
  snprintf(sql, sizeof sql, "UPDATE job SET started_ns = %lld, ended_ns = %lld", (long long)t0,
           (long long)t1);
  exec(db, sql);
  exec(db, indexes);
  exec(db, "COMMIT");
  sqlite3_close(db);
}

int64_t fx_t(int64_t seq, int rank) {
  return 1000000000LL + seq * 1000000LL + rank * 10000LL;
}

void fx_coll(sqlite3 *db, int group, int64_t seq, const char *op, const int *ranks, int n) {
  for (int i = 0; i < n; i++) {
    int64_t t = fx_t(seq, ranks[i]);
    fx_op o = {ranks[i], group, seq, op, "completed", "float32", "[4,1024]", "SUM", NULL,
               4096, 16384, -1, t, t + 1000, t + 500000, 0};
    if (op[0] == 'B') {   // BROADCAST / BARRIER
      o.redop = NULL;
      o.root = op[1] == 'R' ? 0 : -1;
      if (op[1] == 'A')
        o.dtype = o.shape = NULL, o.numel = o.bytes = 0;
    }
    fx_op_add(db, &o);
  }
}

/* --- the stories ------------------------------------------------------------------ */

static const int four[] = {0, 1, 2, 3};

void fx_story_desync(const char *path, bool with_report) {
  sqlite3 *db = fx_create(path, "job-desync", 4, 1);
  for (int r = 0; r < 4; r++)
    fx_rank(db, r, "finished");
  fx_group(db, 0, "default", four, 4);
  for (int s = 1; s <= 12; s++)
    fx_coll(db, 0, s, "ALL_REDUCE", four, 4);
  for (int r = 0; r < 4; r++) {
    int64_t t = fx_t(13, r);
    fx_op o = {r, 0, 13, "ALL_REDUCE", "failed", "float32", r == 2 ? "[4,512]" : "[4,1024]",
               "SUM", "ranks are out of sync: rank 2 differs in shape",
               r == 2 ? 2048 : 4096, r == 2 ? 8192 : 16384, -1, t, t + 1000, t + 200000, 4};
    fx_op_add(db, &o);
  }
  if (with_report)
    fx_event(db, 0, 0, 13, "desync_report", fx_t(13, 3) + 300000, 4,
             "desync in group 0 (default) at ALL_REDUCE #13: rank 2 differs in shape\n"
             "  ranks 0,1,3: ALL_REDUCE float32 [4,1024] SUM\n"
             "  rank 2:      ALL_REDUCE float32 [4,512] SUM  <- shape differs");
  fx_event(db, 1, -1, -1, "log", fx_t(5, 1), 0, "epoch 0 done");
  fx_finish(db, fx_t(0, 0), fx_t(14, 0));
}

void fx_story_hang(const char *path) {
  sqlite3 *db = fx_create(path, "job-hang", 4, 1);
  for (int r = 0; r < 4; r++)
    fx_rank(db, r, r == 1 ? "lost" : "running");
  fx_group(db, 0, "default", four, 4);
  fx_group(db, 1, "pairs", four, 2);
  for (int s = 1; s <= 20; s++)
    fx_coll(db, 0, s, s == 20 ? "BROADCAST" : "ALL_REDUCE", four, 4);
  for (int s = 1; s <= 5; s++)
    fx_coll(db, 1, s, "ALL_GATHER", four, 2);
  for (int i = 0; i < 3; i++) {
    int r = (int[]){0, 2, 3}[i];
    int64_t t = fx_t(21, r);
    fx_op o = {r, 0, 21, "ALL_REDUCE", "started", "float32", "[4,1024]", "SUM", NULL, 4096,
               16384, -1, t, t + 1000, -1, 0};
    fx_op_add(db, &o);
  }
  fx_event(db, 2, -1, -1, "log", fx_t(3, 2), 0, "loss 0.25");
  fx_event(db, 0, 0, 21, "peer_lost", fx_t(60, 0), 5, "rank 1 lost");
  fx_finish(db, fx_t(0, 0), fx_t(80, 0));
}

void fx_story_lag(const char *path, int nranks, int lag, int ncoll) {
  sqlite3 *db = fx_create(path, "job-lag", nranks, 1);
  int *all = calloc((size_t)nranks + 1, sizeof *all);
  if (!all)
    abort();
  for (int r = 0; r < nranks; r++) {
    all[r] = r;
    fx_rank(db, r, "running");
  }
  fx_group(db, 0, "default", all, nranks);
  for (int s = 1; s < ncoll; s++)
    fx_coll(db, 0, s, "ALL_REDUCE", all, nranks);
  for (int r = 0; r < nranks; r++) {
    int64_t t = fx_t(ncoll, r);
    fx_op o = {r, 0, ncoll, "ALL_REDUCE", "started", "float32", "[4,1024]", "SUM", NULL, 4096,
               16384, -1, t, t + 1000, -1, 0};
    if (r != lag)
      fx_op_add(db, &o);
  }
  free(all);
  fx_finish(db, fx_t(0, 0), fx_t(ncoll + 20, 0));
}

void fx_story_deadlock(const char *path) {
  sqlite3 *db = fx_create(path, "job-deadlock", 2, 1);
  fx_rank(db, 0, "running");
  fx_rank(db, 1, "running");
  int two[] = {0, 1};
  fx_group(db, 0, "default", two, 2);
  fx_group(db, 1, "a", two, 2);
  fx_group(db, 2, "b", two, 2);
  for (int s = 1; s <= 3; s++)
    fx_coll(db, 0, s, "BARRIER", two, 2);
  for (int s = 1; s <= 4; s++) {
    fx_coll(db, 1, s, "ALL_REDUCE", two, 2);
    fx_coll(db, 2, s, "BROADCAST", two, 2);
  }
  int64_t t = fx_t(10, 0);
  fx_op a = {0, 1, 5, "ALL_REDUCE", "started", "float32", "[4,1024]", "SUM", NULL, 4096, 16384,
             -1, t, t + 1000, -1, 0};
  fx_op b = {1, 2, 5, "BROADCAST", "started", "float32", "[4,1024]", NULL, NULL, 4096, 16384,
             0, t + 5000, t + 6000, -1, 0};
  fx_op_add(db, &a);
  fx_op_add(db, &b);
  fx_finish(db, fx_t(0, 0), fx_t(40, 0));
}

void fx_story_ok(const char *path) {
  sqlite3 *db = fx_create(path, "job-ok", 4, 1);
  for (int r = 0; r < 4; r++)
    fx_rank(db, r, "finished");
  fx_group(db, 0, "default", four, 4);
  for (int s = 1; s <= 30; s++)
    fx_coll(db, 0, s, "ALL_REDUCE", four, 4);
  fx_coll(db, 0, 31, "BARRIER", four, 4);
  fx_finish(db, fx_t(0, 0), fx_t(32, 0));
}

/* A 'gpu' event of rank's operation (group, seq) as the tracer writes it. */
static void gpu_event(sqlite3 *db, int group, int64_t seq, int rank, int64_t after_enq,
                      int64_t gpu_ns) {
  char msg[48];
  snprintf(msg, sizeof msg, "gpu_ns=%lld", (long long)gpu_ns);
  fx_event(db, rank, group, seq, "gpu", fx_t(seq, rank) + after_enq, 0, msg);
}

void fx_story_gpu(const char *path) {
  sqlite3 *db = fx_create(path, "job-gpu", 2, 1);
  const int two[] = {0, 1};
  for (int r = 0; r < 2; r++)
    fx_rank(db, r, "finished");
  fx_group(db, 0, "default", two, 2);
  fx_group(db, 1, "tp", two, 2);
  fx_group(db, 2, "cpu", two, 2);
  for (int s = 1; s <= 6; s++)
    fx_coll(db, 0, s, s <= 4 ? "ALL_REDUCE" : s == 5 ? "BROADCAST" : "BARRIER", two, 2);
  for (int s = 1; s <= 2; s++) {
    fx_coll(db, 1, s, "ALL_GATHER", two, 2);
    fx_coll(db, 2, s, "BARRIER", two, 2);
  }
  for (int s = 1; s <= 5; s++)
    for (int r = 0; r < 2; r++)
      if (!(s == 4 && r == 1))
        gpu_event(db, 0, s, r, 20000 + r * 5000, 50000 * s + r * 10000);
  for (int s = 1; s <= 2; s++)
    for (int r = 0; r < 2; r++)
      gpu_event(db, 1, s, r, 20000, 30000 + r * 2000);
  fx_finish(db, fx_t(0, 0), fx_t(7, 0));
}
