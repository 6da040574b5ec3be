/* distrun.h - internals of the distrun launcher, shared by its files:
 *   distrun_main.c    main, the supervision event loop, the final report
 *   distrun_args.c    command line, SLURM variables, --help
 *   distrun_proc.c    starting ranks (environment, fork/exec), signals
 *   distrun_output.c  per-rank output: line prefixes, log files, --tee
 *   distrun_store.c   the job's store: hosting or joining it, posting
 *                     deaths, the multi-node watcher thread
 *   distrun_supervise.c  a crashed rank's backtrace, the survivors'
 *                     moment to report
 *   distrun_status.c  SIGUSR1's status table
 *   distrun_stacks.c  the ranks' stacks through ptrace
 *   distrun_outside.c a hang's culprits in their own code: where they are
 *   distrun_cause.c   the cause a rank posted (dist_post_cause): exit
 *                     status 10/11 and the report printed last
 *   distrun_trace.c   merging the ranks' trace files at the end
 *   distrun_round.c   rounds of several nodes: restarts, elastic MIN:MAX
 *   distrun_alive.c   the keep-alive: node 0 names a node that left
 * The contract with the ranks (variables, store keys) is core's
 * dist/internal/launch.h. */
#ifndef DISTRUN_H
#define DISTRUN_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <dist/dist.h>

#include <dist/internal/base.h>
#include <dist/internal/launch.h> /* the keys and variables, job ids, tokens */

/* Exit statuses (DESIGN.md, Monitor): 10 and 11 come from the cause a rank
 * posted (distrun_cause.c); a usage error is 2, as for most Unix tools
 * (torchrun too). */
enum {
  DRUN_EXIT_OK = 0,
  DRUN_EXIT_OTHER = 1,
  DRUN_EXIT_USAGE = 2,
  DRUN_EXIT_DESYNC = 10,
  DRUN_EXIT_HANG = 11,
  DRUN_EXIT_RANK_DIED = 12,
  DRUN_EXIT_LAUNCH = 13,
};

#define DRUN_HOSTLEN 256
#define DRUN_MAX_WORLD (1 << 20)

/* --- configuration (distrun_args.c) -------------------------------------- */

typedef struct drun_cfg {
  int nproc;                /* ranks on this node */
  int nnodes, node_rank;    /* nnodes: MAX of --nnodes MIN:MAX until a round
                               settles the attempt's count (distrun_round.c) */
  int nnodes_min;           /* MIN (= nnodes_max: not elastic) */
  int nnodes_max;           /* MAX, as given */
  int64_t last_call_ms;     /* --rdzv-conf last_call_timeout: the join window
                               once MIN nodes are there */
  int64_t keep_alive_ms;    /* --rdzv-conf keep_alive_interval: a node's beat */
  int keep_alive_max;       /* ... keep_alive_max_attempt: beats missed before
                               node 0 declares the node gone */
  char master_addr[DRUN_HOSTLEN];
  uint16_t master_port;     /* 0: a free port (one node only) */
  bool standalone;
  const char *log_dir;
  bool prefix;
  int64_t grace_ms;         /* SIGTERM -> SIGKILL */
  int64_t join_timeout_ms;  /* reaching node 0's store, agreeing with it */
  char job_id[DIST_JOB_ID_MAX + 1]; /* "" : made by node 0 */
  char *const *prog_argv;   /* the program and its arguments */
  const char *slurm_note;   /* what came from SLURM, for the INFO line */
  const char *trace_out;    /* --trace-out; NULL: ./trace.db */
  bool local_rank_arg;      /* --local-rank-arg: argv gains --local-rank=N */
  /* torchrun's options (README, "distrun and torchrun") */
  int redirects;            /* streams to --log-dir files: 1 stdout, 2 stderr */
  int tee;                  /* streams also shown on the terminal (3: both) */
  uint64_t ranks_filter;    /* --local-ranks-filter: local ranks shown on the
                               terminal (bit r), 0: all */
  int max_restarts;         /* --max-restarts: attempts after the first */
  int64_t monitor_interval_ms;
  const char *role;         /* --role: ROLE_NAME (default "default") */
  const char *local_addr;   /* --local-addr: the address node 0 gives its ranks */
  bool c10d;                /* --rdzv-backend c10d (else static) */
  bool is_host;             /* --rdzv-conf is_host=true: this node hosts (node 0) */
  bool never_host;          /* node_rank_auto after a round it joined, or
                               --rdzv-conf is_host=false: never hosts */
  bool node_rank_auto;      /* c10d without --node-rank: the endpoint's node
                               hosts (node 0), the others take ranks in the
                               order they join (distrun_store.c) */
  char **prog_own;          /* "python3 -u [-m] ..." built here, or NULL */
  const char *trace_base;   /* --trace-out as given (attempts: beside it) */
} drun_cfg;

/* The torch-style variables each rank gets besides distrun's own (names
 * and values, distrun_proc.c): GROUP_RANK, ROLE_*, TORCHELASTIC_*,
 * DIST_RESTART_COUNT. */
#define DRUN_MAX_LOCAL_FILTER 64

/* Parses argv (and SLURM_* / MASTER_* / DIST_JOB_ID) into c. Returns -1 to
 * go on, or an exit status (0 after --help/--version, 2 on a usage error,
 * with the message printed). */
int dist__run_parse_args(int argc, char **argv, drun_cfg *c);
/* Whether this node can hold c->nproc ranks (processes, memory,
 * descriptors; distrun_limits.c): 0, or DRUN_EXIT_LAUNCH with a sentence
 * naming the limit in why. May raise distrun's soft RLIMIT_NOFILE to its
 * hard limit when that is what the ranks need. */
int dist__run_check_capacity(const drun_cfg *c, char *why, size_t len);
/* The first host of a SLURM node list ("node[01-04,07],gpu" -> "node01"). */
int dist__run_slurm_first_host(const char *list, char *out, size_t len);
/* Node 0's store port for a SLURM job's step (distrun_args.c). */
uint16_t dist__run_slurm_port(int64_t job, int64_t step);
/* Lines of a pipe read in pieces (distrun_lines.c): calls fn for each
 * newline-terminated line in buf[0, *len) (without the newline, empty lines
 * skipped) and moves the unfinished tail to the front, *len becoming its
 * length. buf has room for cap bytes; a tail that cannot grow (cap - 1
 * bytes) is passed as a line. */
void dist__run_take_lines(char *buf, size_t *len, size_t cap, void (*fn)(void *, char *),
                          void *arg);

/* --- output (distrun_output.c) ------------------------------------------- */

typedef struct drun_stream {
  int fd;                   /* read end of the rank's pipe; -1 once closed */
  int term_fd;              /* 1 or 2; -1 when not shown on the terminal */
  int log_fd;               /* rank-R.out / .err, or -1 */
  char *buf;                /* the unfinished line */
  size_t len;
} drun_stream;

int dist__run_output_open(const drun_cfg *c, int rank, drun_stream *out,
                          drun_stream *err);
/* Reads what is there; returns true while the stream stays open. */
bool dist__run_output_pump(const drun_cfg *c, int rank, drun_stream *s);
/* Flushes an unfinished line and closes everything. */
void dist__run_output_close(const drun_cfg *c, int rank, drun_stream *s);

/* --- ranks (distrun_proc.c) ---------------------------------------------- */

typedef struct drun_rank {
  int local, global;
  pid_t pid;                /* 0: not started */
  bool running;
  bool signalled_by_us;     /* we sent it SIGTERM/SIGKILL/a forwarded signal */
  bool failed_to_start;     /* exec failed (a launch failure, not a death) */
  int wstatus;
  drun_stream out, err;
} drun_rank;

/* What every rank's environment shares (distrun_store.c fills it). */
typedef struct drun_job {
  char job_id[DIST_JOB_ID_MAX + 1]; /* this attempt's (the ranks' DIST_JOB_ID) */
  char run_id[DIST_JOB_ID_MAX + 1]; /* the job's, whatever the attempt */
  int attempt;                      /* 0, then 1.. after each restart */
  bool hosted;                      /* this node hosted the store */
  uint64_t lost_nodes;              /* node 0: nodes (bit K) that left this
                                       attempt (no keep-alive); not waited for */
  char token[DIST_TOKEN_MAX + 1]; /* "": the ranks run without one */
  char store_addr[DRUN_HOSTLEN];  /* MASTER_ADDR for the ranks */
  uint16_t store_port;
  dist_store *store;
  /* multi-node watcher */
  pthread_t watcher;
  bool watching;
  dist_store *watch_store;
  int notify_rd, notify_wr; /* watcher -> event loop, one line per event */
} drun_job;

/* Finds prog the way execvp would (PATH when it has no '/'); 0 or errno. */
int dist__run_resolve(const char *prog, char *path, size_t len);
/* Starts one rank: pipes, environment, fork, exec. On failure *why says
 * what went wrong and the return value is DRUN_EXIT_LAUNCH. */
int dist__run_spawn(const drun_cfg *c, const drun_job *job, const char *path,
                    drun_rank *r, char *why, size_t why_len);
/* Sends sig to the rank's process group (it is the group's leader). */
void dist__run_signal(drun_rank *r, int sig);
/* "exited with code 3", "killed by signal 9 (SIGKILL)". */
void dist__run_describe_status(int wstatus, char *out, size_t len);
/* Blocks the signals the event loop reads through its signalfd. */
int dist__run_signals_block(void);
/* A signalfd for SIGCHLD, SIGINT, SIGTERM, SIGHUP (CLOEXEC, nonblocking). */
int dist__run_signalfd(void);

/* --- traces (distrun_trace.c) -------------------------------------------- */

/* Merges $DIST_TRACE/<job id>/ into c->trace_out (./trace.db), however the
 * job ended; says what it did. Nothing when DIST_TRACE=0 or no rank wrote
 * a trace. */
struct drun_verdict;
/* ... and stores the verdict in it (completing where a dead rank was from
 * its last operation in the trace when its monitor had not said). */
void dist__run_trace_merge(const drun_cfg *c, const char *job_id, struct drun_verdict *v);

/* A desync between a pair whose other groups of the same description, in
 * the merged trace out, made the unmarked member's call: the mark moves to
 * the one that differs (distrun_odd.c). */
void dist__run_trace_odd_pair(const char *out, struct drun_verdict *v);
/* The two ranks a report in the house format compares ("  rank 5 (group
 * rank 1): ..."), the marked one ("  <- ... differs") first; false unless
 * it compares exactly two and marks one. */
bool dist__run_compared_pair(const char *report, int *marked, int *other);
/* report with its mark (and what it says) moved from rank from's line to
 * rank to's, into out. */
void dist__run_move_mark(const char *report, int from, int to, char *out, size_t cap);
/* "described as dp", or for a group made without a description (its name
 * "g<id>") "of its shape" (the trace readers' kin: size and member steps). */
const char *dist__run_kin_words(const char *group_name, char *buf, size_t len);

/* --max-restarts (tracer/SCHEMA.md, Attempts): attempt k's merged file,
 * "<stem>.attempt-<k>.db" beside the trace output. */
void dist__run_trace_attempt_path(const drun_cfg *c, int k, char *out, size_t len);
/* Marks c->trace_out (attempt job->attempt's file) with the meta keys. */
void dist__run_trace_mark_attempt(const drun_cfg *c, const drun_job *job);
/* The trace output becomes a hard link to attempt last's file. */
void dist__run_trace_link_last(const drun_cfg *c, int last);

/* --- rounds: restarts and elastic jobs of several nodes (distrun_round.c) */

#define DRUN_WAIT_ROUND 100 /* not admitted; node 0 restarts: join its next round */

/* Whether the job's attempts are rounds node 0 coordinates (several nodes
 * with --max-restarts or an elastic --nnodes MIN:MAX). */
bool dist__run_rounds(const drun_cfg *c);
/* The run id and attempt node 0 publishes with the job id (rounds only). */
#define DRUN_KEY_RUN "distrun/run_id"
#define DRUN_KEY_ATTEMPT "distrun/attempt"
/* Node 0 of an elastic job: the round's node count into c->nnodes. */
int dist__run_round_host(drun_cfg *c, drun_job *job);
/* Another node of an elastic job: its node rank and the count, or
 * DRUN_WAIT_ROUND / an exit status when the round had no room for it. */
int dist__run_round_join(drun_cfg *c, drun_job *job);
/* After an attempt (before the store closes): node 0 posts its decision
 * (restart, as its caller decided, or end with status) and waits, bounded,
 * for every node to read it; the others read and return it. Without
 * rounds: restart as given. */
bool dist__run_round_decide(const drun_cfg *c, drun_job *job, int status, bool restart);

/* --- keep-alive: nodes that leave (distrun_alive.c) ----------------------- */

/* Every node but 0 beats ("beat K" on node 0's queue) each keep_alive_ms
 * while its ranks run; node 0 declares a node gone when it has heard
 * nothing from it for keep_alive_ms * keep_alive_max (torchrun's
 * keep_alive_interval and keep_alive_max_attempt). A node's distrun killed
 * by SIGKILL says nothing: its silence is the only sign. */
typedef struct drun_alive {
  int nnodes;
  int64_t limit_ms;         /* silence after which a node is gone */
  int64_t next_beat;        /* node K > 0: its next beat */
  int64_t *heard;           /* node 0: when each node was last heard from */
  bool *ended;              /* node 0: done, or declared gone */
} drun_alive;

/* Returns 0, or DRUN_EXIT_LAUNCH when out of memory. */
int dist__run_alive_init(drun_alive *a, const drun_cfg *c);
void dist__run_alive_free(drun_alive *a);
/* Node 0: an event from node (ended: its "done"). True when this call
 * ended it (a "done" counted once, never after the node was declared
 * gone). */
bool dist__run_alive_heard(drun_alive *a, int node, bool ended);
/* The event loop's keep-alive timer. Node K > 0 beats when due; node 0
 * sets *gone to a node silent past the limit (and marks it ended), else
 * -1. Returns the next deadline (ms, dist__now_ms's clock), -1 for none.
 * May block on the store for POST_TIMEOUT_MS (a beat). */
int64_t dist__run_alive_tick(drun_alive *a, const drun_cfg *c, drun_job *job, int64_t now,
                             int *gone);

/* --- the job's store (distrun_store.c) ----------------------------------- */

/* Node 0 hosts the store (loopback for one node, every address otherwise);
 * other nodes join it. With c->node_rank_auto it settles c->node_rank
 * first: a node whose address the endpoint names and that can bind its
 * port hosts; the others join and number themselves 1, 2, ... in the
 * order they arrive. Fills job. Returns 0, or DRUN_EXIT_LAUNCH /
 * DRUN_EXIT_USAGE with the message printed. */
int dist__run_store_setup(drun_cfg *c, drun_job *job);
/* "rank R died: cause" for the others (first failure wins) and on every
 * other node's queue. Returns DIST_OK, or the store's status when the post
 * failed (a node that cannot reach node 0's store: node 0 or the network
 * between them is gone, which explains its ranks' failures). */
int dist__run_store_post_death(const drun_cfg *c, drun_job *job, int rank, const char *cause);
/* Tells the other nodes to end their ranks (this node was interrupted). */
void dist__run_store_post_stop(const drun_cfg *c, drun_job *job, const char *reason);
/* distrun/exit/<R>: how rank R ended. */
void dist__run_store_post_exit(drun_job *job, int rank, const char *how);
/* Node K > 0: "beat K" on node 0's queue (distrun_alive.c). */
void dist__run_store_post_beat(const drun_cfg *c, drun_job *job);
/* Node 0: "left <node> <why>" to every other node still there. */
void dist__run_store_post_left(const drun_cfg *c, drun_job *job, int node, const char *why);
/* Multi-node: tells node 0 that this node's ranks have ended. */
void dist__run_store_post_done(const drun_cfg *c, drun_job *job, int status);
/* Starts the watcher thread (multi-node only): it pops this node's event
 * queue and writes each event as a line to job->notify_wr. */
int dist__run_watch_start(const drun_cfg *c, drun_job *job);
/* Stops the watcher and closes the store (the server stops with it). */
void dist__run_store_close(const drun_cfg *c, drun_job *job);

/* --- supervision (distrun_supervise.c) ---------------------------------- */

#define DRUN_REPORT_MS 2000 /* survivors' moment to report a death */

/* Whether a wait status is a death by a fatal signal (SIGSEGV, SIGBUS,
 * SIGFPE, SIGILL, SIGABRT): a crash, with a backtrace to read. */
bool dist__run_is_crash(int wstatus);
/* A rank that died of SIGSEGV/SIGBUS/SIGFPE/SIGILL/SIGABRT: shows its
 * backtrace (the monitor's crash file) and posts it (distrun/crash/<R>). */
void dist__run_crash_collect(drun_job *job, const drun_rank *r, int wstatus);
/* The first crash's backtrace when it is rank's (the verdict's report),
 * else NULL; valid until dist__run_crash_free. */
const char *dist__run_crash_first(int rank);
void dist__run_crash_free(void);
/* When the survivors of a death get SIGTERM: now, or DRUN_REPORT_MS later
 * when they run the monitor (said on stderr). */
int64_t dist__run_report_deadline(drun_job *job, int running, int64_t now_ms);

/* --- stacks (distrun_stacks.c) ------------------------------------------ */

/* DIST_SHOW_STACKTRACES=1: every thread's stack of each running rank,
 * captured with ptrace (libdwfl) and printed. */
void dist__run_dump_stacks(const drun_rank *ranks, int n);
/* Thread tid of process pid: its scheduler state from /proc ('R'
 * running, 'S' asleep, 'T' stopped...), 0 unknown (distrun_stacks.c). */
char dist__run_thread_state(pid_t pid, int tid);
/* The innermost frame of process pid that lies in its executable ("func
 * (file.c:42)": libc's, libdist's and the loader's frames skipped), of its
 * main thread, else of another thread of the program's (not one of the
 * library's "dist-" threads), captured through ptrace while its threads
 * are stopped for the walk. False, with the reason in why, when it cannot
 * attach or no frame is the program's. */
bool dist__run_program_frame(pid_t pid, char *out, size_t len, char *why, size_t wlen);

/* --- status (distrun_status.c) ------------------------------------------ */

/* SIGUSR1: a table of every rank's state from the monitors' records. */
void dist__run_status_table(const drun_cfg *c, drun_job *job, const drun_rank *ranks);

/* Where rank was as of its monitor's last record: the operation it was in,
 * else the last it completed. False when it published none. */
typedef struct drun_position {
  bool in_op;
  bool refused;             /* a call the library refused it (why) */
  int gid, kind;
  unsigned long long seq;   /* refused: the number it would have taken */
  char desc[96];
  char site[160];
  char why[200];
} drun_position;
bool dist__run_rank_position(const drun_cfg *c, drun_job *job, int rank, drun_position *out);
/* Whether rank's last record shows it running outside the library, in
 * its own code: in no operation of a group, no creation and no store call
 * of the program's (mon_record.h); *since_ms: when its last call into the
 * library returned (wall ms). */
bool dist__run_rank_outside(const drun_cfg *c, drun_job *job, int rank, int64_t *since_ms);
/* The last call the library refused rank (its record's "r" line, whatever
 * came after it): false when none. */
bool dist__run_rank_refused(const drun_cfg *c, drun_job *job, int rank, drun_position *out);
/* Whether leaver's last record, written as it exited, shows an async
 * operation still in flight (issued, never waited) that other's record
 * shows other at too (in it, or the last it ended there): leaver left
 * that operation pending, and other's failure there follows from it.
 * That operation in *out. */
bool dist__run_rank_left_pending(const drun_cfg *c, drun_job *job, int leaver, int other,
                                 drun_position *out);
/* The call rank made on a group it is not a member of just before its
 * collective num on group gid (its record's "m" line): its kind and site;
 * false when none. */
bool dist__run_rank_non_member(const drun_cfg *c, drun_job *job, int rank, int gid,
                               uint64_t num, int *kind, char *site, size_t len);
/* A user group a rank destroyed and went on without (its record's "d"
 * line, mon_record.h). */
typedef struct drun_left {
  bool has_counts;          /* the fields below are known */
  unsigned long long colls; /* the collectives it had issued there */
  int last_kind;            /* its last operation there, -1 none */
  unsigned long long last_num;
  char desc[96];
  char last_site[160];
  char site[160];           /* the program's destroy call, "" unknown */
} drun_left;
/* Whether rank's last record says it destroyed group gid and went on
 * (lists the group no more); what it says of that in *out. */
bool dist__run_rank_destroyed(const drun_cfg *c, drun_job *job, int rank, int gid,
                              drun_left *out);
/* Whether rank's last record says it was inside exit() (its monitor's
 * atexit handler published "exit"): a signal that then ends it struck
 * while it was exiting. */
bool dist__run_rank_exiting(const drun_cfg *c, drun_job *job, int rank);

/* --- the posted cause (distrun_cause.c) --------------------------------- */

typedef struct drun_posted {
  bool have;
  int status;               /* DIST_E_* the rank posted */
  int rank;                 /* global rank that posted it, -1 unknown */
  char *text;               /* the report */
  dist__cause_fields f;     /* what it names (culprits...), when it says */
  int pairs;                /* > 0: taken from that many reported pairs, which
                               all include f.culprits[0] (distrun_cause.c) */
} drun_posted;

/* Waits up to wait_ms for the job's cause key and reads it into p (once:
 * true at once when p already holds it). False when nothing was posted. */
bool dist__run_cause_fetch(drun_job *job, int64_t wait_ms, drun_posted *p);
/* Reads the key again: a diagnosis that replaced the cause p holds (same
 * status, dist/internal/launch.h) takes its place; so does, for a desync
 * one pair of ranks saw, the report of the pair that marks the rank every
 * reported pair includes (p->pairs). */
void dist__run_cause_refresh(drun_job *job, drun_posted *p);
/* 10 for a posted DIST_E_DESYNC, 11 for DIST_E_TIMEOUT, else fallback. */
int dist__run_cause_exit(const drun_posted *p, int fallback);
void dist__run_cause_free(drun_posted *p);

/* --- the verdict (distrun_verdict.c) ---------------------------------- */

/* The job's one verdict, decided once when every rank has ended: its kind,
 * distrun's exit status, the ranks it blames and where. Printed last and
 * stored in trace.db (tracer/SCHEMA.md, verdict). */
typedef struct drun_verdict {
  int status;               /* distrun's exit status */
  const char *kind;         /* "success", "desync", "hang", "crash", "died",
                               "early_exit", "interrupted", "launch", "other" */
  int culprits[DIST_CAUSE_CULPRITS_MAX];
  int n_culprits;
  int reported_by;          /* the rank whose report it is; -1 distrun's own */
  dist__cause_fields f;     /* group, operation, field, site (posted) */
  bool by_record;           /* f's place is its monitor's last record's (once
                               a second), which its peers' traces may pass */
  bool placed_outside;      /* the line says where the culprit is outside the
                               library (distrun_outside.c) */
  bool refused;             /* ... a call the library refused, its last: no
                               operation in the trace or of its peers is it */
  char line[2048];          /* distrun's summary line ("exit status 10 ...") */
  char tail[256];           /* ... and its end ("; the report follows") */
  const char *report;       /* printed after it: the posted report, the
                               crashed rank's backtrace, or NULL (borrowed) */
} drun_verdict;

/* How the first failing rank ended, as the supervisor saw it. */
typedef struct drun_first {
  int rank;                 /* -1: no rank failed (success, an interrupt...) */
  int wstatus;
  bool early;               /* it ended (any status) while others needed it */
  bool odd;                 /* it called on after every other rank ended cleanly */
  bool lost_store;          /* rank -1: this node lost node 0's store */
} drun_first;

/* Fills v from the exit status, the first failure and the posted cause. */
void dist__run_verdict_make(int status, const drun_first *first, const drun_posted *posted,
                            drun_verdict *v);
/* Whether v blames one rank's death or early end (crash, died, early_exit). */
bool dist__run_verdict_one_death(const drun_verdict *v);
/* For a rank's death or early end: where the culprit was (its monitor's
 * last record) into v's fields, and a clause for the summary line (""
 * when unknown). */
void dist__run_verdict_place(const drun_cfg *c, drun_job *job, drun_verdict *v, char *clause,
                             size_t len);
/* Fills the verdict's empty call site from its one culprit's record when
 * the record is at the operation the verdict names. */
void dist__run_verdict_site(const drun_cfg *c, drun_job *job, drun_verdict *v);
/* A desync of one member that left the group before a collective (field
 * "collective count": the checking layer's, the TCP engine's or the
 * monitor's "left the group") when its record says it destroyed that
 * group: the verdict names its destroy call, and a clause for the summary
 * line says so ("" otherwise). */
void dist__run_verdict_left(const drun_cfg *c, drun_job *job, drun_verdict *v, char *clause,
                            size_t len);
/* A hang's one culprit whose call to the collective others wait in was
 * refused (the report's line for it says so): the verdict names that call. */
void dist__run_verdict_refused(const drun_cfg *c, drun_job *job, drun_verdict *v);
/* A desync whose one culprit called the others' operation on a group it
 * is not a member of just before its own call there: that call, at its
 * line, and a line in the report saying so. */
void dist__run_verdict_non_member(const drun_cfg *c, drun_job *job, drun_verdict *v);
/* Prints the summary line and the report, the last thing distrun writes. */
void dist__run_verdict_print(const drun_verdict *v);

/* --- a hang's culprits outside the library (distrun_outside.c) --------- */

#define DRUN_OUTSIDE_MAX 4 /* culprits whose stacks a hang's end captures */

/* A culprit of a hang that ran its own code when distrun ended the job. */
typedef struct drun_outside {
  int rank;                 /* global */
  int64_t for_ms;           /* since its last call into the library returned */
  char at[160];             /* its innermost frame in the program */
} drun_outside;

typedef struct drun_outsiders {
  bool done;                /* captured (once per job) */
  int n;
  drun_outside o[DRUN_OUTSIDE_MAX];
} drun_outsiders;

/* Before distrun ends a hung job's ranks: of the posted hang's culprits
 * that run on this node, the first DRUN_OUTSIDE_MAX whose last records show
 * them outside the library (dist__run_rank_outside) get their program's
 * innermost frame captured (dist__run_program_frame) into out. Once. */
void dist__run_outside_capture(const drun_cfg *c, drun_job *job, const drun_rank *ranks,
                               int n, const drun_posted *posted, drun_outsiders *out);
/* A hang whose first culprit ran its own code (captured) or waited in a
 * store call of the program's (the posted field "store wait"): the
 * verdict's site becomes where the rank is, its field says which, its
 * operation stays the one its peers wait for it in, and the summary line
 * says both ("; the culprit: rank 5 is outside the library (in its own
 * code) for 10.0 s, at step (train.c:43); its peers wait for it in group
 * 4 (dp) ALL_REDUCE #4, called from main (train.c:148)"). */
void dist__run_verdict_outside(const drun_outsiders *o, drun_verdict *v);

/* Prints "distrun: ..." on stderr (one write). */
void dist__run_say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
