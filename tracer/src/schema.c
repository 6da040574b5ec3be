/* schema.c - the trace store's tables (tracer/SCHEMA.md), created by the
 * writer in each rank file and by the merge in trace.db, and the names the
 * rows use for the runtime's enums (the reader library links nothing of
 * the runtime, so it carries its own copies of the names).
 *
 * A rank file stores its operations narrow (table ops: enums as integer
 * codes packed into one column, times as deltas, shapes in a side table),
 * because the writer's speed is SQLite's cost per bound column; a view
 * named operations gives them back with the documented columns, so every
 * reader (the merge, the live exporter, sqlite3) reads rank files and
 * merged files alike. */
#include "reader_int.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <dist/backend.h>
#include <dist/observer.h>

static const char tables_sql[] =
    "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);"
    "CREATE TABLE IF NOT EXISTS job (job_id TEXT NOT NULL, world_size INTEGER NOT NULL,"
    " unix_minus_mono_ns INTEGER NOT NULL, started_ns INTEGER, ended_ns INTEGER);"
    "CREATE TABLE IF NOT EXISTS ranks (rank INTEGER PRIMARY KEY, host TEXT NOT NULL,"
    " pid INTEGER NOT NULL, device TEXT NOT NULL, local_rank INTEGER,"
    " clock_offset_ns INTEGER NOT NULL, clock_rtt_ns INTEGER,"
    " unix_minus_mono_ns INTEGER NOT NULL, exe TEXT, init_ns INTEGER NOT NULL,"
    " end_state TEXT NOT NULL, dropped_records INTEGER NOT NULL DEFAULT 0);"
    "CREATE TABLE IF NOT EXISTS groups (group_id INTEGER PRIMARY KEY, name TEXT NOT NULL,"
    " description TEXT, backend TEXT NOT NULL, size INTEGER NOT NULL, members TEXT NOT NULL,"
    " timeout_ms INTEGER, created_ns INTEGER, destroyed_ns INTEGER);"
    "CREATE TABLE IF NOT EXISTS callsites (rank INTEGER NOT NULL, callsite_id INTEGER NOT NULL,"
    " address INTEGER NOT NULL, module TEXT, build_id TEXT, offset INTEGER, function TEXT,"
    " file TEXT, line INTEGER, PRIMARY KEY (rank, callsite_id));"
    "CREATE TABLE IF NOT EXISTS events (rank INTEGER NOT NULL, group_id INTEGER, seq INTEGER,"
    " kind TEXT NOT NULL, t_ns INTEGER NOT NULL, status INTEGER NOT NULL DEFAULT 0,"
    " peer INTEGER, message TEXT);"
    "CREATE TABLE IF NOT EXISTS stats (rank INTEGER NOT NULL, group_id INTEGER NOT NULL,"
    " t_ns INTEGER NOT NULL, op TEXT NOT NULL, count INTEGER NOT NULL, bytes INTEGER NOT NULL,"
    " p50_ns INTEGER, p99_ns INTEGER, straggler_rank INTEGER, lateness_ns INTEGER);"
    "CREATE TABLE IF NOT EXISTS drops (rank INTEGER NOT NULL, group_id INTEGER NOT NULL,"
    " seq_first INTEGER NOT NULL, seq_last INTEGER NOT NULL, records INTEGER NOT NULL,"
    " t_ns INTEGER NOT NULL, p2p INTEGER NOT NULL DEFAULT 0);"
    "CREATE TABLE IF NOT EXISTS clocks (rank INTEGER NOT NULL, t_ns INTEGER NOT NULL,"
    " offset_ns INTEGER NOT NULL, rtt_ns INTEGER NOT NULL);";

/* The merged file's operations table (a rank file has the view). */
static const char ops_sql[] =
    "CREATE TABLE IF NOT EXISTS operations (rank INTEGER NOT NULL, group_id INTEGER NOT NULL,"
    " seq INTEGER NOT NULL, op TEXT NOT NULL, is_async INTEGER NOT NULL, state TEXT NOT NULL,"
    " dtype TEXT, shape TEXT, n_inputs INTEGER NOT NULL, n_outputs INTEGER NOT NULL,"
    " numel_in INTEGER NOT NULL, numel_out INTEGER NOT NULL, bytes_in INTEGER NOT NULL,"
    " bytes_out INTEGER NOT NULL, root INTEGER, tag INTEGER, redop TEXT, timeout_ms INTEGER,"
    " t_enqueued_ns INTEGER NOT NULL, t_started_ns INTEGER, t_ended_ns INTEGER,"
    " status INTEGER NOT NULL DEFAULT 0, message TEXT, callsite_id INTEGER,"
    " pair_seq INTEGER, p2p INTEGER GENERATED ALWAYS AS " TR_P2P_EXPR " VIRTUAL);";

/* A rank file's narrow table. code packs the enums: bits 0-7 op, 8-11
 * state (0 enqueued, 1 started, 2 completed, 3 failed, 4 timed_out), 12
 * async, 16-23 dtype (255 none), 24-31 redop (255 none), 32-47 n_inputs,
 * 48-63 n_outputs. d_start and d_end are from t_enq. */
static const char rank_ops_sql[] =
    "CREATE TABLE IF NOT EXISTS ops (group_id INTEGER NOT NULL, seq INTEGER NOT NULL,"
    " code INTEGER NOT NULL, shape_id INTEGER, numel_in INTEGER NOT NULL,"
    " numel_out INTEGER NOT NULL, t_enq INTEGER NOT NULL, d_start INTEGER, d_end INTEGER,"
    " callsite_id INTEGER, root INTEGER, tag INTEGER, status INTEGER NOT NULL DEFAULT 0,"
    " message TEXT, pair INTEGER);"
    "CREATE TABLE IF NOT EXISTS shapes (shape_id INTEGER PRIMARY KEY, shape TEXT NOT NULL);";

/* The job's one verdict (merged file only; distrun writes it after the
 * merge through dist_trace_set_verdict, verdict.c). Older trace.db files
 * lack the table: readers treat that as "no verdict". */
static const char verdict_sql[] =
    "CREATE TABLE IF NOT EXISTS verdict (kind TEXT NOT NULL, exit_status INTEGER NOT NULL,"
    " culprits TEXT NOT NULL DEFAULT '', group_id INTEGER, group_name TEXT, op TEXT,"
    " seq INTEGER, field TEXT, site TEXT, reported_by INTEGER NOT NULL DEFAULT -1,"
    " dropped INTEGER NOT NULL DEFAULT 0, text TEXT);";

#define OP_TOTALS_SELECT                                                                  \
  "SELECT op, count(*) AS n, sum(state = 'completed') AS completed, "                       \
  "sum(state = 'failed') AS failed, sum(state = 'timed_out') AS timed_out, "                \
  "sum(state IN ('enqueued', 'started')) AS in_flight, sum(bytes_in) AS bytes_in "          \
  "FROM operations GROUP BY op"

/* The summary's first pass counts them as it reads every row anyway
 * (summary.c); this is the way without it. */
int tr_op_totals_build(sqlite3 *db) {
  return tr_exec(db, "DROP TABLE IF EXISTS op_totals; CREATE TABLE op_totals AS "
                 OP_TOTALS_SELECT ";", NULL, 0);
}

static const char index_sql[] =
    "CREATE UNIQUE INDEX IF NOT EXISTS op_by_coll ON operations(group_id, p2p, seq, rank);"
    "CREATE INDEX IF NOT EXISTS op_by_rank ON operations(rank, t_enqueued_ns);"
    "CREATE INDEX IF NOT EXISTS ev_by_rank ON events(rank, t_ns);"
    "CREATE INDEX IF NOT EXISTS ev_by_kind ON events(kind, t_ns);"
    "CREATE INDEX IF NOT EXISTS stats_by_group ON stats(group_id, t_ns);";
/* Written once, so `distview summary` reads a few rows instead of every
 * operation (SCHEMA.md, op_totals); the merge has the summary write it. */
static const char totals_sql[] = "CREATE TABLE IF NOT EXISTS op_totals AS " OP_TOTALS_SELECT ";";

int tr_exec(sqlite3 *db, const char *sql, char *err, size_t errlen) {
  char *msg = NULL;
  if (sqlite3_exec(db, sql, NULL, NULL, &msg) == SQLITE_OK)
    return 0;
  if (err)
    snprintf(err, errlen, "%s", msg ? msg : sqlite3_errmsg(db));
  sqlite3_free(msg);
  return -1;
}

int tr_schema_create(sqlite3 *db, bool indexes, char *err, size_t errlen) {
  if (tr_exec(db, tables_sql, err, errlen) != 0 || tr_exec(db, ops_sql, err, errlen) != 0 ||
      tr_exec(db, verdict_sql, err, errlen) != 0)
    return -1;
  return indexes && (tr_exec(db, index_sql, err, errlen) || tr_exec(db, totals_sql, err, errlen))
             ? -1
             : 0;
}

int tr_schema_verdict(sqlite3 *db, char *err, size_t errlen) {
  return tr_exec(db, verdict_sql, err, errlen);
}

int tr_meta_set(sqlite3 *db, const char *key, const char *value) {
  sqlite3_stmt *st;
  if (sqlite3_prepare_v2(db, "INSERT OR REPLACE INTO meta VALUES (?, ?)", -1, &st, NULL))
    return -1;
  sqlite3_bind_text(st, 1, key, -1, SQLITE_TRANSIENT);
  sqlite3_bind_text(st, 2, value, -1, SQLITE_TRANSIENT);
  int rc = sqlite3_step(st) == SQLITE_DONE ? 0 : -1;
  sqlite3_finalize(st);
  return rc;
}

int tr_meta_get(sqlite3 *db, const char *key, char *out, size_t len) {
  sqlite3_stmt *st;
  out[0] = '\0';
  if (sqlite3_prepare_v2(db, "SELECT value FROM meta WHERE key = ?", -1, &st, NULL))
    return -1;
  sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
  int rc = -1;
  if (sqlite3_step(st) == SQLITE_ROW) {
    snprintf(out, len, "%s", (const char *)sqlite3_column_text(st, 0));
    rc = 0;
  }
  sqlite3_finalize(st);
  return rc;
}

/* --- names --------------------------------------------------------------- */

static const char *const op_names[] = {
#define X(e, name) name,
    DIST_OP_MAP(X)
#undef X
};
static const char *const dtype_names[] = {
#define X(e, name, size, cls) name,
    DIST_DTYPE_MAP(X)
#undef X
};
static const int dtype_sizes[] = {
#define X(e, name, size, cls) size,
    DIST_DTYPE_MAP(X)
#undef X
};
static const char *const event_names[] = {
#define X(e, name) name,
    DIST_EVENT_MAP(X)
#undef X
};
static const char *const redop_names[] = {"SUM", "PRODUCT", "MIN", "MAX", "BAND",
                                          "BOR", "BXOR", "AVG", "PREMUL_SUM"};

#define N_OF(a) (sizeof(a) / sizeof((a)[0]))
static const size_t n_op_names = N_OF(op_names), n_dtype_names = N_OF(dtype_names),
                    n_redop_names = N_OF(redop_names);

const char *tr_op_name(unsigned op) { return op < N_OF(op_names) ? op_names[op] : "UNKNOWN"; }
const char *tr_dtype_name(unsigned d) { return d < N_OF(dtype_names) ? dtype_names[d] : NULL; }
int tr_dtype_size(unsigned d) { return d < N_OF(dtype_sizes) ? dtype_sizes[d] : 0; }
const char *tr_redop_name(unsigned r) { return r < N_OF(redop_names) ? redop_names[r] : NULL; }

const char *tr_event_name(unsigned kind, char *buf, size_t len) {
  if (kind < N_OF(event_names))
    return event_names[kind];
  if (kind == TR_KIND_CLOCK)
    return "clock_offset";
  if (kind == TR_KIND_CRASH)
    return "crash";
  if (kind == TR_KIND_OTLP_FAILED)
    return "otlp_export_failed";
  snprintf(buf, len, "event_%u", kind); /* a kind newer than this reader */
  return buf;
}

/* --- the rank file's view -------------------------------------------------- */

typedef struct sbuf {
  char *p;
  size_t len, cap;
  bool oom;
} sbuf;

static void put(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(sbuf *b, const char *fmt, ...) {
  for (;;) {
    va_list ap;
    va_start(ap, fmt);
    /* the first call measures (no buffer yet: NULL + 0 is undefined) */
    int n = b->oom ? 0 : vsnprintf(b->p ? b->p + b->len : NULL, b->cap - b->len, fmt, ap);
    va_end(ap);
    if (b->oom || b->len + (size_t)n < b->cap) {
      b->len += (size_t)n;
      return;
    }
    size_t cap = (b->cap + (size_t)n) * 2;
    char *p = realloc(b->p, cap);
    if (!p) {
      b->oom = true;
      return;
    }
    b->p = p;
    b->cap = cap;
  }
}

/* CASE expr WHEN i THEN 'names[i]' ... ELSE other END */
static void put_case(sbuf *b, const char *expr, const char *const *names, size_t n,
                     const char *other) {
  put(b, "CASE %s", expr);
  for (size_t i = 0; i < n; i++)
    put(b, " WHEN %zu THEN '%s'", i, names[i]);
  put(b, " ELSE %s END", other);
}

static void put_sizes(sbuf *b, const int *sizes, size_t n) {
  put(b, "CASE (code >> 16) & 255");
  for (size_t i = 0; i < n; i++)
    put(b, " WHEN %zu THEN %d", i, sizes[i]);
  put(b, " ELSE 0 END");
}

int tr_schema_create_rank(sqlite3 *db, int rank, char *err, size_t errlen) {
  static const char *const states[] = {"enqueued", "started", "completed", "failed",
                                       "timed_out"};
  sbuf b = {0};
  put(&b, "CREATE VIEW IF NOT EXISTS operations AS SELECT %d AS rank, group_id, seq, ", rank);
  put_case(&b, "code & 255", op_names, n_op_names, "'UNKNOWN'");
  put(&b, " AS op, (code >> 12) & 1 AS is_async, ");
  put_case(&b, "(code >> 8) & 15", states, 5, "'failed'");
  put(&b, " AS state, ");
  put_case(&b, "(code >> 16) & 255", dtype_names, n_dtype_names, "NULL");
  put(&b, " AS dtype, (SELECT shape FROM shapes s WHERE s.shape_id = o.shape_id) AS shape,"
          " (code >> 32) & 65535 AS n_inputs, (code >> 48) & 65535 AS n_outputs, numel_in,"
          " numel_out, numel_in * (");
  put_sizes(&b, dtype_sizes, n_dtype_names);
  put(&b, ") AS bytes_in, numel_out * (");
  put_sizes(&b, dtype_sizes, n_dtype_names);
  put(&b, ") AS bytes_out, root, tag, ");
  put_case(&b, "(code >> 24) & 255", redop_names, n_redop_names, "NULL");
  put(&b, " AS redop, (SELECT timeout_ms FROM groups g WHERE g.group_id = o.group_id) AS"
          " timeout_ms, t_enq AS t_enqueued_ns, t_enq + d_start AS t_started_ns,"
          " t_enq + d_end AS t_ended_ns, status, message, callsite_id, pair AS pair_seq,"
          " (code & 255) IN (%d, %d, %d, %d, %d) AS p2p, o.rowid AS rowid FROM ops o;",
      DIST_OP_SEND, DIST_OP_RECV, DIST_OP_SEND_BYTES, DIST_OP_RECV_BYTES, DIST_OP_BATCH_P2P);
  int rc = -1;
  if (b.oom)
    snprintf(err ? err : (char[1]){0}, err ? errlen : 1, "out of memory");
  else if (tr_exec(db, tables_sql, err, errlen) == 0 &&
           tr_exec(db, rank_ops_sql, err, errlen) == 0)
    rc = tr_exec(db, b.p, err, errlen);
  free(b.p);
  return rc;
}

int tr_schema_indexes(sqlite3 *db, char *err, size_t errlen) {
  return tr_exec(db, index_sql, err, errlen);
}
