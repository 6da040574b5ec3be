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

/* Opens a trace file (a rank file or a merged trace.db) as a read-only
 * SQLite handle (sqlite3 *; close it with sqlite3_close), wherever it
 * lies: in a read-only mount or another user's directory a rank file whose
 * rows are all in the main file is opened with SQLite's immutable=1. Does
 * not check that it is a trace store. DIST_E_SYS / DIST_E_INVAL. */
DIST_API int dist_trace_open_sqlite(const char *path, void **db, char *err, size_t errlen);

/* Deletes the temporary files of merges under way in this process (the
 * `<out>.tmp` of dist_trace_merge) and those of open job directories
 * (their merged copy in $TMPDIR). Async-signal-safe: a program that may
 * end on a signal while merging calls it from its handler. */
DIST_API void dist_trace_remove_temps(void);

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

/* Writes (or writes again) the summaries the merge adds to a merged trace
 * file (SCHEMA.md "Summaries": coll_mismatch, stat_latency, stat_skew,
 * stat_ranks, op_failed), for a file merged by an older libdist or written
 * by another tool; `distview diagnose` and `stats` then read them instead
 * of every operation. DIST_E_INVAL: not a merged file; DIST_E_SYS. */
DIST_API int dist_trace_summarise(const char *path, char *err, size_t errlen);

/* --- the job's verdict (SCHEMA.md "verdict") ---------------------------- */

/* The one verdict distrun decided for the job. kind is one of "success",
 * "desync", "hang", "crash" (a rank died of a fatal signal), "died" (a rank
 * exited non-zero or was killed, no cause posted), "early_exit" (a rank
 * exited while others still needed it), "interrupted" (distrun got SIGINT
 * or SIGTERM), "launch", "other". Strings may be NULL (stored as NULL;
 * culprits as ""). Borrowed for the call. */
typedef struct dist_trace_verdict {
  const char *kind;
  int exit_status;          /* distrun's */
  const int *culprits;      /* global ranks */
  size_t n_culprits;
  int group_id;             /* -1 none */
  const char *group_name;   /* the group's description ("dp", "tp") or name */
  const char *op;           /* "ALL_REDUCE" */
  int64_t seq;              /* 0 none */
  const char *field;        /* the fingerprint field that differs ("dtype") */
  const char *site;         /* the call site, "train.c:42 in step()" */
  int reported_by;          /* the rank whose report it is; -1 distrun's own */
  const char *text;         /* the report distrun printed last */
} dist_trace_verdict;

/* Writes v as the verdict of the merged trace at db_path, replacing one
 * written before (a file merged before the table existed gets it). The
 * dropped column is computed here: the records the ranks could not write,
 * summed over the ranks table. DIST_E_INVAL: v or its kind is invalid, or
 * db_path is not a merged trace; DIST_E_SYS: it cannot be written. */
DIST_API int dist_trace_set_verdict(const char *db_path, const dist_trace_verdict *v, char *err,
                                    size_t errlen);

/* Marks the merged trace at db_path as attempt `attempt` (0 the first) of
 * the job run_id, restarted at most max_restarts times (distrun
 * --max-restarts; tracer/SCHEMA.md, meta keys run_id, attempt,
 * max_restarts). DIST_E_INVAL: NULL run_id, attempt < 0 or db_path not a
 * merged trace; DIST_E_SYS: it cannot be written. */
DIST_API int dist_trace_set_attempt(const char *db_path, const char *run_id, int attempt,
                                    int max_restarts, char *err, size_t errlen);

#define DIST_TRACE_VERDICT_CULPRITS 256

/* The stored verdict, copied out (the strings are "" where NULL). */
typedef struct dist_trace_verdict_row {
  int present;              /* 0: no verdict (a job run without distrun, an older file) */
  char kind[16];
  int exit_status;
  int culprits[DIST_TRACE_VERDICT_CULPRITS];
  size_t n_culprits;        /* at most DIST_TRACE_VERDICT_CULPRITS kept */
  int group_id;             /* -1 none */
  char group_name[128];
  char op[32];
  int64_t seq;              /* 0 none */
  char field[64];
  char site[256];
  int reported_by;          /* -1 distrun's own */
  int64_t dropped;          /* records the ranks could not write */
  char *text;               /* malloc'd ("" when none); dist_trace_verdict_row_free */
} dist_trace_verdict_row;

/* Reads the verdict of an open trace store: db is its sqlite3 handle
 * (dist_trace_sqlite(t), or a read-only handle of the caller's own). A
 * store without the table or the row gives present = 0 and DIST_OK.
 * DIST_E_INVAL: the query failed; DIST_E_NOMEM. */
DIST_API int dist_trace_read_verdict(void *db, dist_trace_verdict_row *out, char *err,
                                     size_t errlen);
/* Frees what dist_trace_read_verdict allocated in row (not row itself). */
DIST_API void dist_trace_verdict_row_free(dist_trace_verdict_row *row);

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
/* Collective seq of group across ranks (by rank) into ops (point-to-point
 * operations are numbered apart: not these). */
DIST_API int dist_trace_collective(dist_trace *t, int group_id, int64_t seq,
                                   dist_trace_op *ops, size_t n, size_t *count);

/* A rank's latest operation against its own earlier steps: the call sites
 * of its operations since its previous call from the latest one's site
 * (one step of a loop), against those of the step before. */
typedef struct dist_trace_pattern {
  int differs;             /* 1: the steps' calls differ (a call skipped, added or
                              moved, or a site it never called from before);
                              0: the same; -1: too little history to tell */
  dist_trace_op cur;       /* the operation it is in: its oldest that did not
                              complete, else its latest (by enqueue time) */
  char site[160];          /* its call site, "function (file:line)"; "" unknown */
  char group_name[64];     /* its group's description, else its name; "" unknown */
} dist_trace_pattern;
DIST_API int dist_trace_rank_pattern(dist_trace *t, int rank, dist_trace_pattern *out);

/* The call site ("function (file:line)") of rank's operation op (a name as
 * the operations table has it) numbered seq in group_id into site; ""
 * when the trace does not hold it or cannot name its line. */
DIST_API int dist_trace_op_site(dist_trace *t, int rank, int group_id, int64_t seq,
                                const char *op, char *site, size_t len);

/* Rank's collective numbered seq in group_id (point-to-point operations are
 * numbered apart: not these): its operation ("ALL_GATHER") into op and its
 * call site into site; both "" when the trace does not hold it. */
DIST_API int dist_trace_collective_of(dist_trace *t, int rank, int group_id, int64_t seq,
                                      char *op, size_t op_len, char *site, size_t site_len);

/* Of a group's members, the one that made fewer calls of op (a name as
 * the operations table has it, "ALL_REDUCE") than the ranks of the groups
 * of the same description made (every "dp" group of a mesh), while rank,
 * a member too, made as many as they: the one that skipped a call, which
 * left rank calling on alone (reader_counts.c). rank -1 when not exactly
 * one member is short, rank is not at the usual count, or fewer than
 * three ranks made it. */
typedef struct dist_trace_short {
  int rank;                /* the member short of the usual count, -1 none */
  int64_t count, usual;    /* its count, and the one most ranks made */
  int ranks_at_usual;      /* how many ranks made the usual count */
} dist_trace_short;
DIST_API int dist_trace_short_member(dist_trace *t, int group_id, const char *op, int rank,
                                     dist_trace_short *out);

/* Whether each of ranks[0..n) departed from the calls of the ranks that
 * made the same calls before it, into out[0..n) (reader_depart.c; the trace
 * is read once): its call sites in issue order against
 * every other rank's; the ranks sharing its longest common start are its
 * peers. departs 0: its calls are a start of a peer's (it is behind or
 * stuck, not astray); 1: its peers (peers of them, one or more) went on
 * alike where it went another way (it skipped or added a call; with one
 * peer, as the twin stage of another pipeline, either of the two may
 * have: a caller takes it only where other evidence points the same way,
 * as distrun's tie between the ranks of a cycle does); -1: cannot tell (peers that
 * differ, a peer that stopped there, a rank with more calls than are
 * compared, or none alike). */
typedef struct dist_trace_depart {
  int departs;
  int peers;               /* with departs 1: how many went on alike */
  int at;                  /* the calls it shares with them */
} dist_trace_depart;
DIST_API int dist_trace_ranks_depart(dist_trace *t, const int *ranks, size_t n,
                                     dist_trace_depart *out);

/* Of two members a and b of a group that disagree at its collective seq,
 * the one whose call (operation, dtype, element counts, reduce op, root
 * as a group rank) differs from the one every rank of the other groups of
 * the same description (every other "dp" group of a mesh) made at that
 * collective, while the other member's is that call (reader_odd.c).
 * rank -1 when fewer than two such ranks are in the trace, they differ
 * among themselves, or the two members both or neither make their call. */
typedef struct dist_trace_odd {
  int rank;                /* the member whose call is unlike the others', -1 none */
  int ranks_alike;         /* how many ranks of the other groups made the usual call */
  char op[32];             /* the odd member's operation ("ALL_REDUCE") */
} dist_trace_odd;
DIST_API int dist_trace_odd_member(dist_trace *t, int group_id, int64_t seq, int a, int b,
                                   dist_trace_odd *out);

/* Where a rank's peers last saw it, when that is further than its own
 * trace goes. A rank killed by a signal it cannot catch (SIGKILL: the OOM
 * killer) leaves only its writer's last commit, which can be a step or
 * more behind; the survivors' traces show what it took part in since: a
 * collective of its groups they completed (one that needs every member:
 * not a broadcast, scatter, reduce or gather, unless it completed it too)
 * or a receive from it in the world group, that its own trace does not
 * show completed. Then op is the latest collective of its groups that
 * completed with it (ordered by each one's first completion: the last can
 * lag behind with one slow peer), or the one after it in the same group
 * when a peer waits for it there and nobody completed it. */
typedef struct dist_trace_seen {
  int ahead;               /* 1: its peers saw it further than its own trace
                              goes (the fields below); 0: they did not */
  dist_trace_op op;        /* group_id, seq, op; state "completed" (it took
                              part) or "waited" (its peers wait for it there) */
  char site[160];          /* the call site, "function (file:line)": its own
                              when its trace has the operation, else the
                              lowest peer's; "" unknown */
  char group_name[64];     /* the group's description, else its name */
} dist_trace_seen;
DIST_API int dist_trace_peers_view(dist_trace *t, int rank, dist_trace_seen *out);
/* The first collective, in rank's program order, that its peers wait for
 * it in (reader_awaited.c): out->ahead 1 and the fields (state "waited"),
 * else ahead 0. */
DIST_API int dist_trace_awaited(dist_trace *t, int rank, dist_trace_seen *out);

/* --- exporters --------------------------------------------------------- */

/* Chrome trace event JSON (Perfetto): complete events + flows (SCHEMA.md). */
DIST_API int dist_trace_export_chrome(dist_trace *t, const char *out_path, char *err,
                                      size_t errlen);
/* OTLP/HTTP to <endpoint>/v1/traces (SCHEMA.md), in batches. endpoint
 * NULL: OTEL_EXPORTER_OTLP_TRACES_ENDPOINT (the whole URL),
 * OTEL_EXPORTER_OTLP_ENDPOINT or DIST_OTLP_ENDPOINT; timeout_ms <= 0:
 * OTEL_EXPORTER_OTLP_(TRACES_)TIMEOUT, else 10 s per request. The other
 * OTEL_EXPORTER_OTLP_* variables apply (protocol http/json or
 * http/protobuf, gzip, headers, certificates; README, "Spans in your
 * tracing backend"). DIST_E_BACKEND when the collector answers non-2xx,
 * DIST_E_SYS when it cannot be reached, DIST_E_INVAL for a variable that
 * cannot be used (named in err), DIST_E_NOTSUP when OTEL_SDK_DISABLED=true. */
DIST_API int dist_trace_export_otlp(dist_trace *t, const char *endpoint, int64_t timeout_ms,
                                    char *err, size_t errlen);

DIST_EXTERN_C_END

#endif
