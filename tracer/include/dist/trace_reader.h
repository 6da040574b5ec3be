/* trace_reader.h - the trace store's reader library (dist_trace_reader):
 * open a rank file, a merged trace.db or a job directory, merge rank files
 * into an indexed trace.db, query it, export it. This is the only part of
 * libdist the viewer links; it never touches the runtime. The tables are
 * documented in tracer/SCHEMA.md.
 *
 * Errors: functions return DIST_OK or a DIST_E_* code (dist/status.h) and
 * write a message into err (errlen bytes, may be NULL). Threads: one
 * dist_trace handle per thread. */
#ifndef DIST_TRACE_READER_H
#define DIST_TRACE_READER_H

#include <stddef.h>
#include <stdint.h>

#include <dist/export.h>
#include <dist/status.h>

DIST_EXTERN_C_BEGIN

#define DIST_TRACE_SCHEMA_VERSION 1

typedef struct dist_trace dist_trace;

/* Opens path read-only: a rank file, a merged trace.db, or a job directory
 * (merged into a temporary database first, deleted at close).
 * DIST_E_INVAL: not a trace store (foreign, corrupt, newer schema). */
DIST_API int dist_trace_open(const char *path, dist_trace **out, char *err, size_t errlen);
DIST_API void dist_trace_close(dist_trace *t);
/* The SQLite handle (sqlite3 *), for the viewer's own queries. Borrowed. */
DIST_API void *dist_trace_sqlite(dist_trace *t);

typedef struct dist_trace_merge_report {
  int ranks_merged;
  int files_skipped;
  char skipped[2048];   /* one "path: reason" per line */
  int64_t operations;   /* rows in the merged operations table */
} dist_trace_merge_report;

/* Merges every rank-*.db (and rank-*.ring crash dump) of job_dir into a
 * new indexed database at out_path (replaced if it exists). Bad files are
 * reported in rep and skipped; DIST_OK as long as out_path was written
 * (even with no rank merged). DIST_E_SYS / DIST_E_INVAL otherwise. */
DIST_API int dist_trace_merge(const char *job_dir, const char *out_path,
                              dist_trace_merge_report *rep, char *err, size_t errlen);

/* --- queries ----------------------------------------------------------- */

typedef struct dist_trace_op {
  int rank, group_id;
  int64_t seq;
  char op[32], state[16];
  int64_t bytes_in;
  int64_t t_enqueued_ns, t_started_ns, t_ended_ns; /* -1 when NULL */
  int status;
} dist_trace_op;

/* The last n operations of rank (newest first) into ops; *count gets how
 * many. */
DIST_API int dist_trace_last_ops(dist_trace *t, int rank, dist_trace_op *ops, size_t n,
                                 size_t *count);
/* Operation seq of group across ranks (by rank) into ops. */
DIST_API int dist_trace_collective(dist_trace *t, int group_id, int64_t seq,
                                   dist_trace_op *ops, size_t n, size_t *count);

/* --- exporters --------------------------------------------------------- */

/* Chrome trace event JSON (Perfetto): complete events + flows (SCHEMA.md). */
DIST_API int dist_trace_export_chrome(dist_trace *t, const char *out_path, char *err,
                                      size_t errlen);
/* OTLP/HTTP JSON to <endpoint>/v1/traces (SCHEMA.md), in batches; each
 * request waits at most timeout_ms. DIST_E_BACKEND when the collector
 * answers non-2xx, DIST_E_SYS when it cannot be reached. */
DIST_API int dist_trace_export_otlp(dist_trace *t, const char *endpoint, int64_t timeout_ms,
                                    char *err, size_t errlen);

DIST_EXTERN_C_END

#endif
