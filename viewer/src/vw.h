/* vw.h - the viewer's internal umbrella header (distview, STYLE.md 11).
 *
 * The viewer is split so that everything but the terminal runs in tests:
 *   model.c, model_page.c  SQL over a trace store into plain structs, page by page
 *   diag.c                 the first divergence, hang or deadlock from the rows
 *   input.c                keys -> state changes through a key table (no SQL, no curses)
 *   fold.c                 the matrix's rows: alike ranks folded, rows that differ
 *   app.c                  glue: fetches what the state shows, then renders it
 *   view.c, view_panes.c   state + fetched pages -> a vw_canvas (no curses)
 *   term.c                 the only curses file: keys in, canvas out, the loop
 *   cmd_*.c                the scriptable subcommands
 * It links SQLite (and the tracer's reader library for job directories),
 * never the runtime. Tables are those of tracer/SCHEMA.md. */
#ifndef DIST_VW_H
#define DIST_VW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef struct sqlite3 sqlite3;

#define VW_SCHEMA_VERSION 2
#define VW_MAX_RANKS 4096

/* Exit statuses shared by every subcommand (distrun's for diagnose). */
enum {
  VW_EXIT_OK = 0,
  VW_EXIT_UNREADABLE = 1,
  VW_EXIT_USAGE = 2,
  VW_EXIT_DESYNC = 10,
  VW_EXIT_HANG = 11,
  VW_EXIT_DIED = 12,
};

/* --- canvas.c: a grid of glyphs with attributes ---------------------------- */

enum {
  VW_A_BOLD = 1, VW_A_REV = 2, VW_A_DIM = 4, VW_A_UL = 8,
  /* colour in the high nibble; term.c maps it, NO_COLOR drops it */
  VW_C_RED = 1 << 4, VW_C_GREEN = 2 << 4, VW_C_YELLOW = 3 << 4, VW_C_CYAN = 4 << 4,
  VW_C_MAGENTA = 5 << 4, VW_C_BLUE = 6 << 4,
};
#define VW_COLOR_OF(a) (((a) >> 4) & 0xf)

typedef struct vw_cell {
  char ch;
  uint8_t attr;
} vw_cell;

typedef struct vw_canvas {
  int rows, cols;
  vw_cell *cells;
} vw_canvas;

typedef struct vw_rect {
  int y, x, h, w;
} vw_rect;

int vw_canvas_init(vw_canvas *c, int rows, int cols);
void vw_canvas_free(vw_canvas *c);
void vw_canvas_clear(vw_canvas *c);
/* Writes s at (y, x) clipped to the rect; returns the columns written. */
int vw_put(vw_canvas *c, vw_rect r, int y, int x, uint8_t attr, const char *s);
int vw_putf(vw_canvas *c, vw_rect r, int y, int x, uint8_t attr, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));
void vw_fill(vw_canvas *c, vw_rect r, int y, int x, int n, char ch, uint8_t attr);
void vw_attr(vw_canvas *c, vw_rect r, int y, int x, int n, uint8_t attr);
/* Row y as text without trailing spaces, into buf (cols + 1 bytes). */
const char *vw_canvas_line(const vw_canvas *c, int y, char *buf, size_t len);
/* The whole canvas as lines (for tests and the README capture). */
void vw_canvas_dump(const vw_canvas *c, FILE *f);

/* --- model.c: the trace store --------------------------------------------- */

typedef struct vw_rank_info {
  int rank;
  char host[64];
  int pid;
  char end_state[16];
  int64_t dropped;
} vw_rank_info;

typedef struct vw_group {
  int id;
  char name[64];
  char desc[64];         /* groups.description: a mesh dimension ("dp"), the user's */
  char backend[16];
  int size;
  int *members;          /* global ranks in group-rank order (malloc) */
  int64_t max_seq;       /* highest collective seq of any rank */
  int64_t *last_seq;     /* per member: its highest seq here, 0 none (malloc) */
  int64_t *last_done;    /* per member: its highest completed seq, 0 none */
} vw_group;

typedef struct vw_job {
  char job_id[128];
  char kind[16];         /* meta.kind: rank | merged */
  char writer[64];
  int world_size;
  int64_t t0, t1;        /* job clock: first and last time in the trace */
  int64_t unix_minus_mono_ns;
  int nranks;
  vw_rank_info *ranks;
  int ngroups;
  vw_group *groups;
  int64_t n_events;
  char skipped[1024];    /* meta.skipped_files */
} vw_job;

typedef struct vw_model {
  sqlite3 *db;
  void *trace;           /* the reader's dist_trace when it opened a job directory */
  char path[1024];
  vw_job job;
  bool indexed;          /* op_by_coll exists (merged file) */
  bool has_gpu;          /* events holds rows of kind 'gpu' (CUDA operations) */
  bool summarised;       /* the merge's summaries exist (SCHEMA.md "Summaries"): diagnose
                          * and stats read them instead of every operation */
  char err[512];
} vw_model;

/* Opens a trace store read-only and reads the job header. On failure
 * returns nonzero with a message for the user in err (missing, empty, not
 * SQLite, not a trace, newer schema, truncated or corrupt). */
int vw_model_open(const char *path, vw_model **out, char *err, size_t errlen);
/* distview --attempt K: vw_model_open opens attempt K's file beside the
 * path it is given (tracer/SCHEMA.md, Attempts); -1: the path itself. */
extern int vw_attempt;
/* 1 with the attempt, its job's run id and --max-restarts when the trace
 * is one attempt of a restarted job; 0 otherwise. */
int vw_model_attempt(vw_model *m, int *attempt, int *max_restarts, char *run, size_t len);
void vw_model_close(vw_model *m);
/* Re-reads the job header (after the file grew: --follow). */
int vw_model_reload(vw_model *m);
/* --follow: re-reads the header; a job directory is merged again first. */
int vw_model_refresh(vw_model *m);
void vw_job_free(vw_job *j);
const vw_group *vw_model_group(const vw_model *m, int group_id);
int vw_model_group_index(const vw_model *m, int group_id);
const vw_rank_info *vw_model_rank(const vw_model *m, int rank);
/* What users call a group: its description (a mesh dimension such as "dp",
 * the user's own), else its name; "" for a group the trace lacks. */
const char *vw_group_name(const vw_model *m, int group_id);
/* "group 2 (dp)" as distrun's reports say it; "group 2" without a name. */
const char *vw_group_label(const vw_model *m, int group_id, char *buf, size_t len);

/* One operation of one rank (a row of `operations`). -1 for NULL numbers. */
typedef struct vw_op {
  int rank, group_id;
  int64_t seq;
  char op[28];
  char state[12];
  char dtype[12];
  char shape[48];
  char redop[12];
  int64_t numel_in, numel_out, bytes_in, bytes_out;
  int n_inputs, n_outputs;
  int root, tag;
  int is_async;
  int64_t t_enq, t_start, t_end;
  int status;
  char message[160];
  char callsite[96];     /* function+offset or module+offset, "" unknown */
  /* Its 'gpu' event (SCHEMA.md): when the GPU started it (job clock) and
   * how long it ran there; -1 none. Filled by vw_model_collective only. */
  int64_t gpu_start, gpu_ns;
} vw_op;

/* Cell states of the progress matrix. */
enum {
  VW_ST_NONE = 0,   /* never entered */
  VW_ST_DONE,       /* completed */
  VW_ST_RUN,        /* enqueued or started, no end */
  VW_ST_FAIL,       /* failed */
  VW_ST_TIMEOUT,    /* timed out */
  VW_ST_MASKED,     /* a row the filter hides */
};
int vw_state_code(const char *state);

/* A window of the progress matrix: nrank ranks x nseq collective sequence
 * numbers (a column is one collective on every rank; point-to-point
 * operations, numbered apart, are in the timeline). The TUI asks for every
 * rank of the group (up to VW_MAX_RANKS) so that it can fold identical
 * rows; the query reads the window's rows of every rank either way. */
typedef struct vw_matrix_page {
  int group_id;
  int64_t seq0;
  int nseq, nrank;
  int *ranks;            /* nrank (malloc) */
  uint8_t *cells;        /* nrank * nseq, VW_ST_* (malloc) */
  int64_t *last_seq;     /* per row: the rank's highest seq in the group (malloc) */
  int64_t *last_done;    /* per row: its highest completed seq (malloc) */
} vw_matrix_page;

typedef struct vw_filter {
  int group;             /* -1 any */
  int rank;              /* -1 any */
  char op[28];           /* "" any; prefix match, case-insensitive */
  char state[12];        /* "" any */
} vw_filter;

int vw_model_matrix(vw_model *m, int group_id, const int *ranks, int nrank, int64_t seq0,
                    int nseq, const vw_filter *f, vw_matrix_page *out);
void vw_matrix_page_free(vw_matrix_page *p);

/* Collective (group, seq) on every rank that ran it, by rank (up to cap),
 * with each rank's GPU times when the trace has them. */
int vw_model_collective(vw_model *m, int group_id, int64_t seq, vw_op *ops, int cap, int *n);
/* The same rank's last collective in o's group before o from o's call
 * site (*found false when none, or o has no call site). */
int vw_model_prev_at_site(vw_model *m, const vw_op *o, vw_op *prev, bool *found);
/* o's call site in its group's story. */
typedef struct vw_site_story {
  bool known;      /* o has a call site: the rest is filled */
  char module[128]; /* its module (build id when known) and offset: equal */
  int64_t offset;   /* across ranks for one site */
  bool seen;       /* a rank called from it in the group's last 64 collectives before o */
  bool repeats;    /* it is the site of o's rank's previous collective there */
} vw_site_story;
int vw_model_site_story(vw_model *m, const vw_op *o, vw_site_story *out);
/* Point-to-point operation #seq of rank in group and, when the trace has
 * it, the other half of its pair (the receive that took a send, the send
 * a receive took: same pair_seq, tag and peers), by rank. */
int vw_model_p2p_pair(vw_model *m, int rank, int group_id, int64_t seq, vw_op *ops, int cap,
                      int *n);
/* One rank's operations overlapping [t0, t1), by time (up to cap), for a
 * timeline `width` columns wide: when the window holds more calls than
 * twice the columns, one per column (the first starting in it). Only the
 * rank, group, seq, op, state and times are filled. */
int vw_model_rank_ops(vw_model *m, int rank, int64_t t0, int64_t t1, int width, vw_op *ops,
                      int cap, int *n);
/* Operation (group, seq) of one rank, or found = false; p2p says which
 * numbering seq is in (collectives and point-to-point count apart). */
int vw_model_op(vw_model *m, int rank, int group_id, bool p2p, int64_t seq, vw_op *op,
                bool *found);
/* What each of ranks[0..n) is blocked in: its newest operation among its
 * last 64 (op_by_rank) that never ended or timed out, or found[i] false.
 * One statement for all (a 1,024-rank job asks 1,024 times). */
int vw_model_blocked_ops(vw_model *m, const int *ranks, int n, vw_op *ops, bool *found);
/* The last operation of rank in group (latest enqueued), or found = false. */
int vw_model_last_op(vw_model *m, int rank, int group_id, bool completed_only, vw_op *op,
                     bool *found);

typedef struct vw_event {
  int64_t id;            /* rowid */
  int rank, group_id;    /* -1 for NULL */
  int64_t seq;
  char kind[24];
  int64_t t_ns;
  int status, peer;
  char *message;         /* malloc, may be NULL */
} vw_event;

/* Events ordered by time from offset `first` (filtered), up to cap. */
int vw_model_events(vw_model *m, const vw_filter *f, int64_t first, vw_event *ev, int cap,
                    int *n, int64_t *total);
void vw_events_free(vw_event *ev, int n);
/* The earliest or the newest event of a kind (ev_by_kind), leaving out those
 * whose status is skip_status (>= 0), or found = false; ev->message is
 * malloc'd. */
int vw_model_event_of(vw_model *m, const char *kind, bool earliest, int skip_status,
                      vw_event *ev, bool *found);
/* The operation that failed first (by its end) with status, whose message
 * matches an SQL LIKE pattern (NULL: any), as an event of the given kind
 * whose message is the row's report. A desync the transport found (a send
 * and a receive of other sizes, a collective's fields at DIST_DEBUG=OFF)
 * and a group's abort are stored on the failed rows alone, not as events
 * rows. */
int vw_model_failed_like(vw_model *m, int status, const char *pattern, const char *kind,
                         vw_event *ev, bool *found);
/* The earliest event of a kind with a member's line "rank R (host ..." that
 * says `said` (a monitor's report: " exited with code "), or found = false;
 * what another member's line says does not count; ev->message is malloc'd. */
int vw_model_event_rank_says(vw_model *m, const char *kind, int rank, const char *said,
                             vw_event *ev, bool *found);

/* Search: the next (dir > 0) or previous operation of group after seq whose
 * op or state matches text; a text "#N" is sequence number N. */
int vw_model_search_op(vw_model *m, int group_id, int64_t seq, int dir, const char *text,
                       int64_t *found_seq);
/* Index (in filtered time order) of the next/previous event matching text. */
int vw_model_search_event(vw_model *m, const vw_filter *f, int64_t from, int dir,
                          const char *text, int64_t *found);

void vw_op_fingerprint(const vw_op *o, char *buf, size_t len);

/* --- diag.c: what went wrong ------------------------------------------------ */

enum {
  VW_DIAG_NONE = 0,
  VW_DIAG_DESYNC,     /* fingerprints differ at one (group, seq) */
  VW_DIAG_HANG,       /* ranks blocked in an op a member never entered */
  VW_DIAG_STUCK,      /* every member entered it, some never left */
  VW_DIAG_DEADLOCK,   /* a wait-for cycle across groups */
  VW_DIAG_DIED,       /* a rank crashed or was lost, nothing else found */
  VW_DIAG_FAILED,     /* an operation failed with no other cause */
};
const char *vw_diag_kind_name(int kind);

#define VW_DIAG_LIST 64

typedef struct vw_diag {
  int kind;
  int exit_code;              /* 0, 10, 11 or 12 as distrun */
  int group_id;
  int64_t seq;
  char op[28];
  int rank;                   /* the culprit: lagging or diverging rank, -1 none */
  int n_culprits, culprits[VW_DIAG_LIST];
  int n_blocked, blocked[VW_DIAG_LIST];  /* ranks waiting in (group, seq) */
  int64_t last_done_seq;      /* the culprit's last completed seq in the group */
  char last_done_op[28];
  char field[64];             /* desync: the fingerprint fields that differ */
  int n_cycle, cycle[VW_DIAG_LIST];      /* deadlock: ranks in cycle order */
  int cycle_group[VW_DIAG_LIST];
  int64_t cycle_seq[VW_DIAG_LIST];
  char summary[320];          /* one line */
  char text[4096];            /* the full explanation */
  /* a report the job stored itself (events: desync_report, diagnosis, stall_report) */
  bool has_report;
  char report_kind[24];
  int report_rank, report_group;
  int64_t report_seq;         /* the operation its header names ("at OP #N"),
                                 else the event's seq */
  char report_op[28];         /* that OP, "" when the header names none */
  int report_status;          /* the event's status (diagnosis: timeout or peer lost) */
  int64_t report_t;
  char *report;               /* malloc, verbatim */
  int64_t t_ns;               /* when the finding happened (job clock), -1 unknown */
  /* What users call the group (vw_group_name), and the call site when known. */
  char group_name[128];
  char site[256];
  /* The job's verdict (trace.db's verdict row, decided by distrun). When
   * there is one, every field above is the verdict's, kind_name is its
   * kind ("crash", "interrupted", ...), and own_* keep distview's own
   * analysis of the rows, which follows it. */
  bool has_verdict;
  char kind_name[24];         /* the verdict's kind, or vw_diag_kind_name(kind) */
  int reported_by;            /* the verdict's reporting rank, -1 distrun */
  int64_t dropped;            /* records the ranks could not write */
  int own_kind, own_exit_code;
  int own_n_culprits, own_culprits[VW_DIAG_LIST];
  bool own_agrees;            /* same class of failure and a shared culprit */
  char own_summary[320];
  char own_line[400];         /* "distview's own analysis agrees: ..." */
} vw_diag;

/* Computes the diagnosis: a stored report if any, and the finding from the
 * operation rows. deep = scan every collective for fingerprint differences
 * (diagnose); otherwise only the ranks' last few sequence numbers (the TUI's
 * first screen must stay fast on 10 M rows). Returns 0, or -1 with the
 * reason in m->err and nothing in d to free. */
int vw_diagnose(vw_model *m, bool deep, vw_diag *d);
/* The headline's verdict word: "DESYNC", "HANG", "CRASH", "INTERRUPTED"... */
const char *vw_diag_headline(const vw_diag *d, char *buf, size_t len);
void vw_diag_free(vw_diag *d);

/* --- hist.c: percentiles without sorting ------------------------------------ */
typedef struct vw_hist {
  int64_t n, max;
  int64_t *b;      /* counts per bucket */
  double *sum;     /* sum of the values per bucket */
} vw_hist;
int vw_hist_init(vw_hist *h);
void vw_hist_free(vw_hist *h);
void vw_hist_add(vw_hist *h, int64_t v);
/* The q-quantile (0..1), within 1/64 of the true value; -1 when empty.
 * The merge computes the same for `distview stats` (tracer/src/summary_write.c):
 * change both together. */
int64_t vw_hist_quantile(const vw_hist *h, double q);

/* --- json.c ------------------------------------------------------------------ */
void vw_json_str(FILE *f, const char *s);

/* --- subcommands ------------------------------------------------------------- */
int vw_cmd_summary(int argc, char **argv);
int vw_cmd_diagnose(int argc, char **argv);
int vw_cmd_sql(int argc, char **argv);
int vw_cmd_stats(int argc, char **argv);
int vw_cmd_tui(int argc, char **argv);
int vw_cmd_render(int argc, char **argv);

/* Shared by the subcommands: parses [--json] [--help] TRACE plus `extra`
 * positional arguments; returns the index of TRACE, or -1 to exit with *rc
 * (0 after --help, 2 for a usage error). */
int vw_parse_common(int argc, char **argv, const char *usage_text, bool *json, int extra,
                    int *rc);
/* Shared by the subcommands: open or print why not (exit 1). */
int vw_open_or_report(const char *prog, const char *path, vw_model **m);
/* "1.234 s", "15.2 ms", "830 us", "120 ns" */
const char *vw_fmt_dur(int64_t ns, char *buf, size_t len);
/* "0,1,3" (compresses runs: "0-3,7") */
const char *vw_fmt_ranks(const int *r, int n, char *buf, size_t len);

#endif
