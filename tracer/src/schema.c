/* schema.c - the trace store's tables (tracer/SCHEMA.md), created by the
 * writer in each rank file and by the merge in trace.db, and the names the
 * rows use for the runtime's enums (the reader library links nothing of
 * the runtime, so it carries its own copies of the names). */
#include "reader_int.h"

#include <stdio.h>
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
    "CREATE TABLE IF NOT EXISTS operations (rank INTEGER NOT NULL, group_id INTEGER NOT NULL,"
    " seq INTEGER NOT NULL, op TEXT NOT NULL, is_async INTEGER NOT NULL, state TEXT NOT NULL,"
    " dtype TEXT, shape TEXT, n_inputs INTEGER NOT NULL, n_outputs INTEGER NOT NULL,"
    " numel_in INTEGER NOT NULL, numel_out INTEGER NOT NULL, bytes_in INTEGER NOT NULL,"
    " bytes_out INTEGER NOT NULL, root INTEGER, tag INTEGER, redop TEXT, timeout_ms INTEGER,"
    " t_enqueued_ns INTEGER NOT NULL, t_started_ns INTEGER, t_ended_ns INTEGER,"
    " status INTEGER NOT NULL DEFAULT 0, message TEXT, callsite_id INTEGER);"
    "CREATE TABLE IF NOT EXISTS callsites (rank INTEGER NOT NULL, callsite_id INTEGER NOT NULL,"
    " address INTEGER NOT NULL, module TEXT, build_id TEXT, offset INTEGER, function TEXT,"
    " PRIMARY KEY (rank, callsite_id));"
    "CREATE TABLE IF NOT EXISTS events (rank INTEGER NOT NULL, group_id INTEGER, seq INTEGER,"
    " kind TEXT NOT NULL, t_ns INTEGER NOT NULL, status INTEGER NOT NULL DEFAULT 0,"
    " peer INTEGER, message TEXT);"
    "CREATE TABLE IF NOT EXISTS stats (rank INTEGER NOT NULL, group_id INTEGER NOT NULL,"
    " t_ns INTEGER NOT NULL, op TEXT NOT NULL, count INTEGER NOT NULL, bytes INTEGER NOT NULL,"
    " p50_ns INTEGER, p99_ns INTEGER, straggler_rank INTEGER, lateness_ns INTEGER);"
    "CREATE TABLE IF NOT EXISTS drops (rank INTEGER NOT NULL, group_id INTEGER NOT NULL,"
    " seq_first INTEGER NOT NULL, seq_last INTEGER NOT NULL, records INTEGER NOT NULL,"
    " t_ns INTEGER NOT NULL);";

static const char index_sql[] =
    "CREATE UNIQUE INDEX IF NOT EXISTS op_by_coll ON operations(group_id, seq, rank);"
    "CREATE INDEX IF NOT EXISTS op_by_rank ON operations(rank, t_enqueued_ns);"
    "CREATE INDEX IF NOT EXISTS ev_by_rank ON events(rank, t_ns);"
    "CREATE INDEX IF NOT EXISTS ev_by_kind ON events(kind, t_ns);"
    "CREATE INDEX IF NOT EXISTS stats_by_group ON stats(group_id, t_ns);";

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
  if (tr_exec(db, tables_sql, err, errlen) != 0)
    return -1;
  return indexes ? tr_exec(db, index_sql, err, errlen) : 0;
}

int tr_schema_indexes(sqlite3 *db, char *err, size_t errlen) {
  return tr_exec(db, index_sql, err, errlen);
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
  snprintf(buf, len, "event_%u", kind); /* a kind newer than this reader */
  return buf;
}
