/* reader_int.h - internals of the trace reader library (dist_trace_reader):
 * schema, the record sink shared by the writer thread and the merge, the
 * merge and the exporters. Nothing here touches the runtime. */
#ifndef DIST_TRACE_READER_INT_H
#define DIST_TRACE_READER_INT_H

#include <sqlite3.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <dist/trace_reader.h>

#include "trace_rec.h"

/* 2: operations.seq counts collectives and point-to-point operations
 * apart (p2p says which; pair_seq numbers a send or receive in its pair).
 * Version 1 files are still read (tr_compat_v1, SCHEMA.md Versioning). */
#define TR_SCHEMA_VERSION 2
#define TR_SCHEMA_VERSION_STR "2"
/* Reading a version 1 file: a view in the connection's temp schema
 * (searched before main) adds p2p and pair_seq (NULL) to operations, so
 * the queries of version 2 run on it; its seqs stay what they were. */
#define TR_COMPAT_V1                                                                 \
  "CREATE TEMP VIEW IF NOT EXISTS operations AS SELECT rowid AS rowid, *, " TR_P2P_EXPR \
  " AS p2p,"                                                                           \
  " NULL AS pair_seq FROM main.operations"
#define TR_P2P_OPS "('SEND','RECV','SEND_BYTES','RECV_BYTES','BATCH_P2P')"
/* The same test as an expression of op, for the generated column p2p and
 * the view above: an IN list there is built again for every row it is
 * computed on (1.2 us a row here, against 0.3 for this chain), and
 * every query that filters or sorts on p2p computes it for every row. */
#define TR_P2P_EXPR                                                            \
  "(op = 'SEND' OR op = 'RECV' OR op = 'SEND_BYTES' OR op = 'RECV_BYTES' OR " \
  "op = 'BATCH_P2P')"

/* --- schema.c ------------------------------------------------------------ */
int tr_exec(sqlite3 *db, const char *sql, char *err, size_t errlen);
/* The merged file's tables (indexes: also its indexes). */
int tr_schema_create(sqlite3 *db, bool indexes, char *err, size_t errlen);
/* A rank file's tables: operations stored narrow in ops (and shapes),
 * read through the view operations (SCHEMA.md "Rank files"). The record
 * sink writes this layout. */
int tr_schema_create_rank(sqlite3 *db, int rank, char *err, size_t errlen);
/* The merged file's indexes (not op_totals: the summary writes it). */
int tr_schema_indexes(sqlite3 *db, char *err, size_t errlen);
/* op_totals (again) from every operation, when the summary could not. */
int tr_op_totals_build(sqlite3 *db);
/* summary.c: the merged file's summaries (SCHEMA.md "Summaries"), written
 * inside the caller's transaction; -1 (nothing written) on failure. */
int tr_summary_build(sqlite3 *db, char *err, size_t errlen);
/* The verdict table (merged files; created by the merge and, for a file
 * merged before it existed, by dist_trace_set_verdict). */
int tr_schema_verdict(sqlite3 *db, char *err, size_t errlen);
int tr_meta_set(sqlite3 *db, const char *key, const char *value);
int tr_meta_get(sqlite3 *db, const char *key, char *out, size_t len);
/* The first collective, in rank's program order, that its peers wait for
 * it in (state "waited"): 1 and *out, else 0 (reader_awaited.c). */
int tr_first_awaited(sqlite3 *db, int rank, dist_trace_op *out);
/* Registers dist_kin(description, members), a group's kind (reader_kin.c). */
int tr_kin_register(sqlite3 *db);
const char *tr_op_name(unsigned op);
const char *tr_dtype_name(unsigned dtype);
int tr_dtype_size(unsigned dtype);
const char *tr_redop_name(unsigned redop);
const char *tr_event_name(unsigned kind, char *buf, size_t len);

/* --- point-to-point pairs (the exporters) ------------------------------- */

#define TR_SEND_OPS "('SEND','SEND_BYTES')"
/* Common table expressions ending in p2p_pair(s_rank, group_id, s_seq,
 * s_ts, r_rank, r_seq, r_ts): each send with the receive that took it
 * (ts: start, else enqueue), paired as the transport matches them: by
 * group, sender, receiver (root: a send's destination, a receive's source)
 * and tag, the n-th send from A to B with the n-th receive at B from A
 * (n: the pair number the rank gave it, operations.pair_seq, so a row
 * lost to a ring overflow shifts nothing; a version 1 file: the order of
 * enqueue). Never by sequence number: one (group, seq) may hold a SEND on
 * one rank and an unrelated RECV on another. A send or
 * receive whose other half is not in the trace has no row. Use as
 * "WITH " TR_P2P_PAIRS " SELECT ... FROM p2p_pair ...". */
#define TR_P2P_PAIRS                                                                        \
  "p2p_end AS (SELECT rank, group_id, seq, pair_seq,"                                        \
  "  coalesce(t_started_ns, t_enqueued_ns) AS ts,"                                          \
  "  t_enqueued_ns, coalesce(tag, 0) AS tag, op IN " TR_SEND_OPS " AS is_send,"             \
  "  CASE WHEN op IN " TR_SEND_OPS " THEN rank ELSE root END AS src,"                       \
  "  CASE WHEN op IN " TR_SEND_OPS " THEN root ELSE rank END AS dst"                        \
  "  FROM operations WHERE op IN ('SEND','RECV','SEND_BYTES','RECV_BYTES')"                 \
  "  AND root IS NOT NULL),"                                                                \
  " p2p_n AS (SELECT *, coalesce(pair_seq, row_number() OVER (PARTITION BY group_id, src,"  \
  "  dst, tag, is_send ORDER BY t_enqueued_ns, seq)) AS k FROM p2p_end),"                     \
  " p2p_pair AS (SELECT s.rank AS s_rank, s.group_id AS group_id, s.seq AS s_seq,"          \
  "  s.ts AS s_ts, r.rank AS r_rank, r.seq AS r_seq, r.ts AS r_ts FROM p2p_n s JOIN p2p_n r" \
  "  ON s.is_send AND NOT r.is_send AND r.group_id = s.group_id AND r.src = s.src"          \
  "  AND r.dst = s.dst AND r.tag = s.tag AND r.k = s.k)"

/* --- trace_sink.c: records -> rows of one rank --------------------------- */

/* Turns ring records into rows of the schema's tables for one rank: an
 * operation's records (issued/enqueued, started, ended) become one row,
 * inserted once it ends or at tr_sink_flush while it still runs (then
 * updated). Not thread-safe: one thread feeds it. Statements run inside
 * the caller's transaction. */
typedef struct tr_sink tr_sink;

typedef struct tr_sink_opts {
  int rank;
  bool symbolise;     /* dladdr the call sites (only in the recording process) */
  bool upsert;        /* rows may already exist: newest state wins (ring import) */
} tr_sink_opts;

int tr_sink_open(sqlite3 *db, const tr_sink_opts *o, tr_sink **out);
/* One record: head, its shape slot (or NULL) and its text (or NULL). */
int tr_sink_record(tr_sink *s, const tr_head *h, const tr_shape *shape, const char *text);
/* The reader lost `records` records before this point (ring overflow):
 * the next record of each group closes a drops range. */
void tr_sink_gap(tr_sink *s, uint64_t records, int64_t t_ns);
/* records drained but never written (their transaction failed): counted
 * in memory; with note, the count goes to ranks.dropped_records and an
 * events row of kind 'trace_write_failed' (status = records dropped so
 * far, message why). Returns -1 when the file cannot take it either. */
int tr_sink_lost(tr_sink *s, uint64_t records, bool note, int64_t t_ns, const char *why);
/* Writes operations still running (insert, or update a row written before). */
int tr_sink_flush(tr_sink *s);
uint64_t tr_sink_rows(const tr_sink *s);     /* operation rows written */
uint64_t tr_sink_dropped(const tr_sink *s);  /* records reported lost */
const char *tr_sink_error(const tr_sink *s);
void tr_sink_close(tr_sink *s);

/* Assembles records from a slot array: get(idx) fills a slot and returns 1
 * when it holds index idx. Feeds complete records in [from, to) to the
 * sink; a record cut by the range start or by a torn slot is skipped and
 * counted as lost. Returns the number of records fed. */
typedef int (*tr_slot_get_fn)(void *arg, uint64_t idx, void *slot);
uint64_t tr_decode_range(tr_sink *s, tr_slot_get_fn get, void *arg, uint64_t from,
                         uint64_t to, uint64_t *lost);

/* --- build_id.c: hex GNU build id of the module holding addr ----------- */
bool tr_build_id(uintptr_t addr, char *out, size_t len);

/* --- callsite_sym.c: callsites' function, file and line from module +
 * offset (libdwfl), in the merged file; best effort, -1 only when the
 * table cannot be read. */
int tr_callsites_symbolise(sqlite3 *db);

/* --- reader_files.c: stores read-only wherever they lie, temporary files --- */

/* Opens path read-only; in a read-only place (no -shm can be made) a file
 * whose rows are all in the main file is opened with immutable=1
 * (*immutable, may be NULL, says so: ATTACH it as tr_uri(path, true)).
 * DIST_E_SYS / DIST_E_INVAL with "path: why" in err. */
int tr_open_ro(const char *path, sqlite3 **db, bool *immutable, char *err, size_t errlen);
/* "file:<path escaped>?mode=ro" or "...?immutable=1" (sqlite3_free); the
 * connection that ATTACHes it must have been opened with SQLITE_OPEN_URI. */
char *tr_uri(const char *path, bool immutable);
/* DIST_E_INVAL with "path: why" unless db is a trace store this reader
 * reads: meta.schema_version an integer in [1, TR_SCHEMA_VERSION], and the
 * job, ranks, groups, operations and events tables (or views). */
int tr_check_store(sqlite3 *db, const char *path, char *err, size_t errlen);
/* $TMPDIR, or /tmp. */
const char *tr_tmpdir(void);
/* Arms path for dist_trace_remove_temps (a signal); returns its slot for
 * tr_temp_release, or -1 when the table is full (then it is not armed). */
int tr_temp_hold(const char *path);
void tr_temp_release(int slot);
/* Creates an empty file $TMPDIR/<prefix>-<random> (0600) into path, armed
 * (*slot) before it exists, so no signal leaves it behind. 0, or -1 with
 * errno. */
int tr_temp_create(const char *prefix, char *path, size_t len, int *slot);

/* --- rank_check.c -------------------------------------------------------- */
/* A rank file's check before the merge copies it: rc 0, -1 (not a good
 * rank file of that rank: why says so) or TR_CHECK_CANNOT_OPEN (SQLite
 * cannot read it where it lies); immutable: it lies in a read-only place
 * (ATTACH it as tr_uri(path, true)); job: its job id. */
#define TR_CHECK_CANNOT_OPEN (-2)
typedef struct tr_check_result {
  int rc;
  bool immutable;
  char job[128];
  char why[1200];
} tr_check_result;
int tr_check_rank_file(const char *path, int rank, int busy_ms, tr_check_result *res);
/* Checks dir's rank-<ranks[i]>.db in order on a thread, a few files ahead
 * of the merge; NULL when out of memory. */
typedef struct tr_checker tr_checker;
tr_checker *tr_checker_start(const char *dir, const int *ranks, int n, int busy_ms);
/* File i's result, waiting for it; i goes up from 0 by one each call. */
void tr_checker_take(tr_checker *c, int i, tr_check_result *res);
void tr_checker_stop(tr_checker *c); /* NULL: nothing */

/* --- rank_aside.c: a rank file read from a copy beside the merge's output,
 * when it cannot be read where it lies (rows in its -wal, and no -shm can
 * be made there: a full disk, a read-only place) ------------------------- */
#define TR_ASIDE_FILES 3 /* the copy, its -wal, its -shm */
typedef struct tr_aside {
  char path[1400]; /* the copy: "<near>.rank-copy-<pid>" */
  int slot[TR_ASIDE_FILES]; /* tr_temp_hold's, so a signal leaves no copy */
} tr_aside;
/* Copies path and its -wal to a->path; DIST_OK, or DIST_E_* with why in
 * err (the copies made so far removed). */
int tr_aside_copy(const char *path, const char *near, tr_aside *a, char *err, size_t errlen);
/* Removes the copy, its -wal and -shm, and disarms them; a->path becomes
 * "" (again, or with none made: nothing). */
void tr_aside_remove(tr_aside *a);

/* --- end_note.c: the end of a rank whose trace file could not take it,
 * written over the first bytes of its rank-<R>.reserve ------------------- */
typedef struct tr_end_note {
  char end_state[16]; /* 'finished', 'exited' or 'crashed' */
  uint64_t dropped;   /* records the rank could not write, all told */
  int64_t t_ns;       /* when, on the rank's clock */
  char why[256];      /* the write's failure */
} tr_end_note;
/* 0, or -1 (the reserve cannot be opened or written). */
int tr_end_note_write(const char *reserve, const tr_end_note *n);
/* 0, or -1 when reserve holds no note. */
int tr_end_note_read(const char *reserve, tr_end_note *n);
/* The note of rank's reserve in job_dir, if any, applied to db's main
 * ranks row (end_state where it says 'running', dropped_records) with a
 * 'trace_write_failed' events row; 0, or -1 with why in err. */
int tr_end_note_apply(sqlite3 *db, const char *job_dir, int rank, char *err, size_t errlen);

/* --- merge.c --------------------------------------------------------------- */
/* Imports a `.ring` side file into db for its rank (offset applied by the
 * caller's SQL). */
int tr_ring_import(sqlite3 *db, const char *path, int rank, char *err, size_t errlen);
/* ring_callsites.c: fills temp.ring_cs (old, new): each call site of the
 * attached scratch database rs as an id of main.callsites for rank, adding
 * the ones main lacks, placed in their modules by the dumped maps file.
 * Inside the caller's transaction; 0, or -1 with the database's error. */
int tr_ring_callsites(sqlite3 *db, int rank, const char *maps_path);

#endif
