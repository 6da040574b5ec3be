/* dist/internal/launch.h - the contract between distrun and the ranks it
 * starts (not installed): the environment variables distrun sets, the
 * store keys both sides use, and the few functions of core that distrun
 * and the monitor share with the ranks (job ids, tokens, causes).
 *
 * Both sides include this file (core's rendezvous reads the variables,
 * monitor's distrun writes them), so a name changes in one place only.
 * Part of core's part interface (dist/internal/: base.h, launch.h, pg.h, store.h).
 *
 * Environment of every rank started by distrun (torchrun's names where
 * torch has one):
 *   RANK, WORLD_SIZE           global rank and number of ranks
 *   LOCAL_RANK, LOCAL_WORLD_SIZE  rank on this node and ranks on this node
 *   MASTER_ADDR, MASTER_PORT   the job's store: distrun's own TCP store on
 *                              node 0 (127.0.0.1 and a free port when the
 *                              job has one node)
 *   DIST_USE_AGENT_STORE=1     MASTER_ADDR:MASTER_PORT is the launcher's
 *                              store (torch's TORCHELASTIC_USE_AGENT_STORE):
 *                              every rank, rank 0 included, connects to it
 *                              as a client; nobody hosts one
 *   DIST_JOB_ID                the job's id (shared by every node)
 *   DIST_TOKEN                 the job's secret, for the store and the data
 *                              plane; in the environment only, never on a
 *                              command line (unset when the job runs with
 *                              DIST_ALLOW_NO_TOKEN=1 and no token, see below);
 *                              the library takes it out of the rank's
 *                              environment when it reads it at init
 *   DIST_NODE_RANK, DIST_NNODES  this node's index and the number of nodes
 *                              (torchrun's GROUP_RANK / GROUP_WORLD_SIZE)
 *   DIST_LAUNCHER=distrun, DIST_LAUNCHER_PID  who started the rank
 *
 * Without DIST_TOKEN in distrun's environment, a one-node job gets a fresh
 * token. A job of several nodes needs the same DIST_TOKEN exported on every
 * node, or DIST_ALLOW_NO_TOKEN=1: then the store runs without a token and
 * the ranks' rendezvous makes the data-plane token (rank 0 shares it
 * through the store, as without a launcher).
 *
 * Store keys (in the job's store, which outlives every rank). The "dist/"
 * namespace belongs to the library, "distrun/" to the launcher; user keys
 * never start with either. */
#ifndef DIST_INTERNAL_LAUNCH_H
#define DIST_INTERNAL_LAUNCH_H

#define DIST_ENV_RANK "RANK"
#define DIST_ENV_WORLD_SIZE "WORLD_SIZE"
#define DIST_ENV_LOCAL_RANK "LOCAL_RANK"
#define DIST_ENV_LOCAL_WORLD_SIZE "LOCAL_WORLD_SIZE"
#define DIST_ENV_MASTER_ADDR "MASTER_ADDR"
#define DIST_ENV_MASTER_PORT "MASTER_PORT"
#define DIST_ENV_USE_AGENT_STORE "DIST_USE_AGENT_STORE"
#define DIST_ENV_JOB_ID "DIST_JOB_ID"
#define DIST_ENV_TOKEN "DIST_TOKEN"
#define DIST_ENV_ALLOW_NO_TOKEN "DIST_ALLOW_NO_TOKEN"
#define DIST_ENV_NODE_RANK "DIST_NODE_RANK"
#define DIST_ENV_NNODES "DIST_NNODES"
#define DIST_ENV_LAUNCHER "DIST_LAUNCHER"
#define DIST_ENV_LAUNCHER_PID "DIST_LAUNCHER_PID"

/* Longest job id and token (without the NUL) the library accepts. A job id
 * is also a directory name ($DIST_TRACE/<job id>), so it is limited to
 * [A-Za-z0-9._-]. */
#define DIST_JOB_ID_MAX 63
#define DIST_TOKEN_MAX 128

/* --- keys written by distrun -------------------------------------------- */

/* "rank R died: cause" of the first rank that failed anywhere in the job
 * (written with compare_set, so the first failure stays). Causes read
 * "exited with code 3", "killed by signal 9 (SIGKILL)" or "could not start:
 * ..." . Ranks (and later the monitor) wait on or check this key to tell a
 * lost peer from a slow one. */
#define DIST_KEY_RANK_DIED "distrun/died"
/* One line per failed rank, appended in the order distrun saw them. */
#define DIST_KEY_DEATHS "distrun/deaths"
/* distrun/exit/<R>: how rank R ended ("exited with code 0", ...). */
#define DIST_KEY_EXIT_FMT "distrun/exit/%d"
/* distrun/crash/<R>: the backtrace of rank R's fatal signal (the monitor's
 * crash file), for the survivors' diagnoses. */
#define DIST_KEY_CRASH_FMT "distrun/crash/%d"

/* Multi-node coordination between the distrun processes of one job. */
#define DIST_KEY_JOB_ID "distrun/job_id"          /* node 0's job id */
#define DIST_KEY_NPROC "distrun/nproc_per_node"   /* node 0's -n, checked */
#define DIST_KEY_NODE_CLAIM_FMT "distrun/node/%d/host" /* one distrun per node */
#define DIST_KEY_NODE_NEXT "distrun/node/next"    /* c10d: node ranks by arrival */
/* Each node's event queue: "died <rank> <cause>" (a rank failed elsewhere),
 * "done <node> <status>" (to node 0: that node's ranks have all ended) and
 * "quit" (a node stops its own watcher). */
#define DIST_KEY_NODE_EVENTS_FMT "distrun/node/%d/events"

/* --- keys written by the ranks (any part, through dist_post_cause) ------ */

/* The job's cause: why it failed, as the rank that knows explains it.
 * Written with compare_set, so the first cause in the job stays, with one
 * exception: a diagnosis (the monitor's, made from every rank's progress)
 * replaces a cause of the same status posted without one (the checking
 * layer's "rank 0 did not arrive", which only knows who came). Value:
 *     "<status> <global rank> <diagnosis>\n<report>"
 * status is the DIST_E_* code as a decimal number (4 DIST_E_DESYNC, 3
 * DIST_E_TIMEOUT, ...), global rank the posting rank (-1 when unknown),
 * diagnosis 1 or 0 (a value without it reads as 0) and
 * report the multi-line text for the user (at most DIST_CAUSE_REPORT_MAX
 * bytes). Posted by core for DIST_E_DESYNC from the backends' own checks,
 * by the checking layer for its desync reports and by the monitor for its
 * hang diagnoses (DIST_E_TIMEOUT). distrun waits a bounded moment for it
 * when a rank fails, exits 10 for DIST_E_DESYNC and 11 for DIST_E_TIMEOUT,
 * and prints the report last. dist__cause_parse (below) reads it.
 * A cause posted with dist_post_cause_info has a second line of fields
 * between the first and the report:
 *     "@\tculprits=3,5\tgroup=4\tgname=tp\top=ALL_REDUCE\tseq=5\tfield=dtype\tsite=..."
 * (tab-separated name=value, any subset, unknown names ignored);
 * dist__cause_parse skips it, dist__cause_parse_info reads it. */
#define DIST_KEY_CAUSE "dist/cause"
#define DIST_CAUSE_REPORT_MAX 16384

/* A desync seen by one pair of ranks alone (the TCP engine's messages
 * carry their sender's descriptor, so a rank compares itself with each
 * peer it exchanges with, and without a history to go by it cannot tell
 * which of the two is odd), posted with dist_post_cause_info naming its
 * group and with a report of two lines of one rank each (status.h):
 * besides the cause above, the reporter keeps
 * its whole cause value under DIST_KEY_CAUSE_BY_FMT (its global rank) and
 * appends "<reporter> <marked> <a> <b> <op> <field>\n" to
 * DIST_KEY_CAUSE_PAIRS_FMT (the group): the two global ranks its report
 * compares, the one it marks (-1: both), the collective and what differs
 * ("root", "reduce_op": spaces as underscores; a collective's only). When the posted cause is such a pair's, distrun takes the
 * rank that every reported pair of that group includes, alone, for the
 * odd one (a rank whose root, count or split differs meets everyone it
 * exchanges with), and the report of a pair that marks it
 * (distrun_cause.c). */
#define DIST_KEY_CAUSE_BY_FMT "dist/cause/by/%d"
#define DIST_KEY_CAUSE_PAIRS_FMT "dist/cause/pairs/%d"

/* The first rank of the job that called exit() (or returned from main)
 * with its default group live, or began destroying its default group:
 * "<global rank>", written by core's exit handler and by
 * dist_destroy_process_group with compare_set, so the first stays. It is written before
 * the process closes its connections, so before any peer can notice that
 * it left: distrun reads it when a rank fails, to tell the rank that left
 * first from the survivor it took down, whichever exit it reaps first. */
#define DIST_KEY_FIRST_EXIT "dist/first_exit"

/* --- keys written by the ranks' rendezvous (core/src/job/rendezvous.c) ------ */

/* Join counter: every rank adds 1, so init number g of the job (a program
 * may init, destroy and init again on one store) owns the keys below under
 * dist/rdzv/<g>/. */
#define DIST_KEY_RDZV_JOINED "dist/rdzv/joined"
#define DIST_KEY_RDZV_PREFIX "dist/rdzv"
/* The world size the first rank to arrive believed ("<size> <rank> <host>
 * pid <pid>"), and the first disagreement found with it: a rank that
 * believes otherwise fails at once and posts why, so the others stop
 * waiting too. Kept for the store's life: every init on one store must use
 * one world size. */
#define DIST_KEY_RDZV_WORLD "dist/rdzv/world"
#define DIST_KEY_RDZV_WORLD_ERROR "dist/rdzv/world_error"

/* --- what distrun and the monitor share with the ranks ------------------ */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <dist/dist.h>

/* A fresh job id: the UTC time, then 8 random hex digits, such as
 * "20261123-154102-9f3a0c7e" (job/rendezvous.c). */
int dist__rendezvous_make_job_id(char *out, size_t len);
/* Whether s is usable as a job id (1..DIST_JOB_ID_MAX of [A-Za-z0-9._-]). */
bool dist__rendezvous_job_id_ok(const char *s);
/* A fresh token: 64 hex characters plus NUL into out (len >= 65)
 * (net/auth.c). */
int dist__auth_make_token(char *out, size_t len);

/* Reads a DIST_KEY_CAUSE value: status, posting rank and the report
 * (pointing into val). DIST_E_INVAL when malformed (job/cause.c). */
int dist__cause_parse(const char *val, size_t len, int *status, int *rank,
                      const char **report);
/* The monitor's diagnosis of a failure as the job's cause (cause.c): as
 * dist_post_cause, but it replaces a cause of the same status that was
 * posted without a diagnosis (DIST_KEY_CAUSE above). */
int dist__cause_post_diagnosis(int status, const dist_cause_info *info, const char *report);
/* The fields line of a cause value (above), or f with nothing set
 * (group_id -1) when the value has none. */
#define DIST_CAUSE_CULPRITS_MAX 64
typedef struct dist__cause_fields {
  int culprits[DIST_CAUSE_CULPRITS_MAX];
  int n_culprits;
  int group_id;
  uint64_t seq;
  char group_name[96], op[32], field[32], site[192];
} dist__cause_fields;
void dist__cause_parse_info(const char *val, size_t len, dist__cause_fields *f);

/* CUDA devices this process sees, through the NCCL backend's CUDA runtime
 * (backends/backend_registry.c; distrun's `-n gpu`): DIST_E_NOTSUP with the
 * reason when libdist was built without NCCL or the runtime does not load. */
int dist__cuda_device_count(int *n);


#endif
