/* mon_int.h - the monitor's runtime, shared by its files:
 *   mon_observer.c  registration, the per-group progress table fed by
 *                   observer events (the only code on an operation's path)
 *   mon_watchdog.c  the watchdog thread: publication, stalls, timeouts
 *   mon_progress.c  progress records in the job's store (write, read)
 *   mon_record.c    the records' text format (shared with distrun)
 *   mon_diag.c      the diagnosis: lagging, dead and stopped ranks; its
 *                   parts mon_diag_{words,ends,pair,held,p2p}.c
 *   mon_cycle.c     the wait-for cycles, the rank they name, the deadlock proof
 *   mon_waits.c     who waits for whom: the wait-for graph's edges, indexed
 *   mon_parts.c     a send's, receive's or batch's halves against peers' counts
 *   mon_symbol.c    call sites and stacks as "func (file:line)" (libdwfl)
 *   mon_crash.c     backtraces of fatal signals
 *   mon_stats.c     DETAIL statistics and stragglers
 *   mon_gpu.c       where a stalled CUDA operation is on the GPU
 *
 * DESIGN. Events only store a few relaxed atomics into a fixed table (no
 * lock, no allocation, no store traffic). Everything else happens on the
 * watchdog thread, which owns its own connection to the job's store (a
 * clone of the default group's), so it never competes with the user's
 * threads for a store handle and may block there. */
#ifndef MON_INT_H
#define MON_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include <dist/dist.h>
#include <dist/observer.h>

#include <dist/internal/base.h>
#include <dist/internal/launch.h>
#include <dist/internal/pg.h>
#include <dist/internal/store.h>
#include "mon_record.h"

#define MON_MAX_GROUPS 256  /* group slots: at most this many live groups followed */
#define MON_DIRECT_IDS 192  /* ids below index their own slot; others (a group made
                               with use_local_synchronization: id >= 2^30) take a
                               free slot above, while one is free */
#define MON_RING 16         /* in-flight operations remembered per group */
#define MON_SITES 64        /* call sites remembered per group (a power of 2) */
#define MON_TRANS 256       /* point-to-point steps remembered per group (a power of 2) */
#define MON_PUBLISH_MS 1000 /* one progress write per rank per second */
#define MON_HB_STALE_MS 2500 /* no write for this long: not responding */
#define MON_HB_LIVE_STALE_MS 10000 /* the same for a live process seen on this host */
#define MON_PROBE_MS 500    /* a synchronous call blocked this long is probed for a deadlock */
#define MON_PROBE_MAX_MS 8000 /* probes that find no cycle back off up to this */

/* One operation of a group, by its issue ordinal (dist_coll.ord: both
 * kinds, dense per group; ring[ord % MON_RING]). Every sequence number the
 * monitor keeps (enq, started, done, failed_seq, stall_seq) is that
 * ordinal; every text it prints says the operation's own number (num:
 * dist_coll.seq, collectives and point-to-point counted apart), as the
 * trace and every other report do. */
typedef struct mon_op {
  _Atomic uint64_t seq;      /* the ordinal */
  _Atomic uint64_t num;      /* its number (per kind) */
  _Atomic int kind;
  _Atomic uintptr_t caller;
  _Atomic int64_t t_enq_ns;  /* CLOCK_MONOTONIC */
  _Atomic int64_t t_start_ns;
  _Atomic int64_t timeout_ms; /* its deadline: the call's own (a monitored
                                 barrier's), else the group's */
  _Atomic int64_t bytes;
  _Atomic int peer;          /* point to point: the peer's global rank (MON_PEER_*) */
  _Atomic int peer2;         /* a batch: its other peer (mon_record.h) */
  _Atomic int cuda;          /* on CUDA tensors: the GPU's progress is asked for */
  _Atomic uint64_t coll;     /* its collective ordinal in the group, 0: point to point */
  _Atomic int ended;        /* completed, failed or timed out (the watermark, mon_observer.c) */
  _Atomic int failed;       /* it ended failed or timed out: not proof its peers took part */
  _Atomic int tag;          /* point to point: the tag asked for */
  _Atomic int sync;          /* a synchronous call: its thread waits inside the library */
  _Atomic uint64_t pair;     /* a send or receive: its number on the pair (dist_coll.pair_seq) */
  _Atomic int peer_before;   /* a send or receive: its peer was one before (mon_record.h) */
  /* Point to point: its halves (mon_record.h's parts), one per direction
   * and peer, packed by mon_part_pack (n_parts past MON_PARTS_MAX: cut). */
  _Atomic int n_parts;
  _Atomic uint64_t parts[MON_PARTS_MAX];
  _Atomic int part_tags[MON_PARTS_MAX]; /* each half's tag */
  _Atomic int root;          /* a collective's root (group rank), -1 none */
  _Atomic int fresh;         /* the group's first operation from its call site: 1,
                                 else 0; -1 unknown (mon_record.h) */
  _Atomic int novel;         /* a send or receive that never followed the call
                                before it, which others followed: 1, else 0; -1
                                unknown (mon_record.h) */
} mon_op;

/* A part in one word: the count (32 bits), the peer's group rank (31), send. */
static inline uint64_t mon_part_pack(int peer, bool send, uint32_t n) {
  return (uint64_t)n << 32 | (uint64_t)(uint32_t)peer << 1 | (send ? 1u : 0u);
}
static inline mon_rec_part mon_part_unpack(uint64_t w) {
  return (mon_rec_part){(int)((uint32_t)w >> 1), (w & 1u) != 0, (uint32_t)(w >> 32), false, 0};
}

typedef struct mon_stats mon_stats; /* mon_stats.c */

#define MON_CULPRITS_MAX 64
/* What a diagnosis blames (mon_diag.c), posted with it as the job's cause. */
typedef struct mon_verdict {
  int culprits[MON_CULPRITS_MAX]; /* where the waits end, or the
                                            ranks every cycle goes through */
  int n;
  int gid;                  /* the operation waiting for the first culprit */
  char gname[96];
  int kind;
  uint64_t seq;
  char site[MON_SITE_LEN];  /* the first culprit's (last) call site */
  char field[32];           /* what site is when not the operation's call
                               ("store wait": the culprit's store call,
                               where it is blocked); of a desync, what
                               differs ("collective count"); "" none */
  bool desync;              /* culprits left the group before this
                               collective (mon_diag_left.c): a desync */
} mon_verdict;

/* A wait-for cycle as one snapshot of the records shows it (mon_cycle.c):
 * its ranks, each one's heartbeat, and a hash of the operations they are
 * blocked in; two snapshots prove a deadlock when ranks and hash agree and
 * every heartbeat moved on. */
#define MON_CYCLE_MAX 64
typedef struct mon_cycle_seen {
  int n;
  int ranks[MON_CYCLE_MAX];  /* ascending */
  int64_t hb_ms[MON_CYCLE_MAX];
  uint64_t ops;              /* hash of (gid, seq, kind, since) per rank */
} mon_cycle_seen;


typedef struct mon_group {
  _Atomic int live;
  int gid;
  dist_pg *pg;               /* the user group, to act on (ABI 3) */
  char name[96], desc[96];
  int size, rank;            /* group size, this rank in it */
  int *granks;               /* group rank -> global rank */
  /* group rank -> sends to it, receives from it, issued so far (a batch's
   * each); the record's counts (mon_record.h), and a send's or receive's
   * peer-before (its count past 1). NULL when out of memory. */
  _Atomic uint32_t *p2p_sent, *p2p_received;
  _Atomic int p2p_any;       /* a receive from any source: received unknown */
  int64_t timeout_ms;
  /* enq: the last operation enqueued; done: the watermark below which every
   * operation has ended (they end out of order: an isend pending while a
   * later irecv completed is still in flight); last_seq: the last to end. */
  _Atomic uint64_t enq, started, done;
  _Atomic uint64_t last_seq;
  /* Collectives alone (record format, mon_record.h): enqueued (the issuing
   * thread's count) and completed. */
  _Atomic uint64_t colls_enq, colls_done;
  _Atomic int last_kind;     /* the last completed operation */
  _Atomic uint64_t last_num; /* its number (per kind) */
  _Atomic uintptr_t last_caller;
  _Atomic int64_t last_done_ns;
  _Atomic int tid;           /* the thread that enqueued last */
  /* Group creations called with this group as their scope (every member
   * calls: new_group on the default group, split_group on the parent),
   * members of the new group or not: the same count on every rank that
   * made the same calls (record format, mon_record.h). */
  /* The call sites (return addresses) this rank issued operations from
   * on the group, an open-addressed set (mon_observer.c note_site): an
   * operation's fresh flag. */
  _Atomic uintptr_t sites[MON_SITES];
  /* The steps this rank took on the group into a send or receive: hashes of
   * (the call before, the send or receive), and of the calls that a send
   * or receive followed (mon_observer.c note_step): an operation's novel
   * flag. last_sig: the last operation's signature (its site, kind, peer
   * and tag). */
  _Atomic uint64_t steps[MON_TRANS], step_from[MON_TRANS];
  _Atomic uint64_t last_sig;
  _Atomic uint64_t creations;
  /* The calls this rank made on groups it is not a member of
   * (dist__pg_non_member_calls: each did nothing, as in torch): their
   * count as of its last operation on this group, and the last one made
   * since its operation before, noted with the collective it came just
   * before (nm_num: that collective's number, 0 none): the record's "m"
   * line, by which a desync this rank caused here names the call that
   * most likely meant this group, at DIST_DEBUG=OFF too. */
  _Atomic uint64_t nm_seen, nm_num;
  _Atomic int nm_kind;
  _Atomic uintptr_t nm_caller;
  _Atomic int timed_out;     /* an operation timed out: the watchdog acts */
  _Atomic int64_t destroyed_ms; /* wall ms this rank destroyed it (live 0), 0 not */
  _Atomic uintptr_t destroy_caller; /* the program's destroy call, 0 unknown */
  _Atomic int failed_rc;     /* an operation failed (peer lost) */
  _Atomic uint64_t failed_seq;
  mon_op ring[MON_RING];
  /* The watchdog's own (under mon.mu). */
  uint64_t stall_seq;        /* the operation reported as stalled */
  int64_t next_report_ns;
  int64_t next_read_ns;      /* the stall's next read of every record */
  int reports;
  bool handled_timeout;
  char *diag;                /* the latest diagnosis of this group's stall */
  mon_verdict verdict;       /* what it blames (with diag, under diag_mu) */
  /* The deadlock probe (mon_watchdog.c), the watchdog's own. */
  uint64_t probe_seq;        /* the operation probed */
  int64_t probe_next_ns;
  int probe_misses;          /* probes without a cycle: the next waits longer */
  mon_cycle_seen probe_seen; /* the cycle the last probe saw (n 0: none) */
  mon_stats *stats;          /* DETAIL only */
} mon_group;

typedef struct mon_refused {
  bool on;
  int gid, kind;
  uint64_t num;              /* the number it would have taken */
  uintptr_t caller;
  int64_t t_ns;              /* dist_clock_ns() of the refusal */
  char msg[200];
} mon_refused;

typedef struct mon_state {
  bool on;
  int rank, world;
  pid_t pid;
  char host[64];
  dist_store *store;         /* the watchdog's clone of the job store */
  char prefix[160];          /* "dist/mon/<job>/<gen>/" */
  int64_t stall_ms;          /* DIST_STALL_S; 0: a quarter of the timeout */
  int64_t tick_ms;
  int64_t wall_off_ns;       /* realtime - monotonic, at init */
  bool abort_on_timeout, stacks, detail;
  bool early;                /* DIST_EARLY_VERDICT: a proven deadlock ends the job at once */
  int stats_every;
  int64_t straggler_s;       /* DIST_STRAGGLER_S: judge long jobs this often (0: at the end) */
  pthread_t thread;
  bool thread_started;
  pthread_mutex_t mu;        /* group slots: creation, destruction, sweeps */
  pthread_cond_t cv;         /* wakes the watchdog (mon_watchdog.c) */
  bool stop;
  _Atomic int kick;          /* an event wants the watchdog now */
  int main_tid;
  /* The last call into the library outside a group's operations that
   * returned (init, a creation, a group made or destroyed), monotonic ns:
   * with the store's (dist/internal/store.h), the record's "l" line. */
  _Atomic int64_t lib_ns;
  _Atomic long writes;       /* progress records written (figures) */
  int64_t t_init_ns;
  mon_group groups[MON_MAX_GROUPS];
  /* A group this process is creating (dist_new_group blocks until its
   * members meet): published as the record's "c" line (mon_record.h). */
  _Atomic int creating;      /* threads in a creation */
  /* A creation of this rank's timed out: the watchdog says who skipped it
   * (dist__mon_creation_diagnose), then counts that thread out of
   * creating, so the record shows the creation until then. */
  _Atomic int create_timed_out;
  _Atomic int create_gid, create_size;
  _Atomic int64_t create_since_ms;
  _Atomic uintptr_t create_caller;
  _Atomic int create_scope;  /* dist__group_create.scope_gid */
  _Atomic uint64_t create_k; /* the call's number among the scope's (1 first) */
  pthread_mutex_t create_mu; /* the two strings below */
  char create_call[24];      /* "dist_new_group", "dist_split_group" */
  char create_members[MON_MEMBERS_LEN]; /* "0-1,3" */
  _Atomic uint32_t create_hash; /* of the whole list (mon_record.h) */
  /* The latest creations called on a scope, members or not: the record's
   * "x" lines, a ring of MON_MADE_MAX under create_mu (n_made counts
   * them all). */
  struct mon_made {
    int scope;
    uint64_t k;
    bool member;
    uint32_t hash;
    uintptr_t caller;
    char members[MON_MADE_LEN];
  } made[MON_MADE_MAX];
  uint64_t n_made;
  /* The watchdog's own: the creation (id, number) whose desync it said
   * (k 0: none), and when it next reads the records for one. */
  int create_said_gid;
  uint64_t create_said_k;
  int64_t create_next_read_ns;
  /* A group's last statistics did not all come at its end: later groups
   * do not wait for theirs (mon_stats.c). */
  bool stats_end_late;
  /* The last call refused before it started (DIST_EV_OP_REJECTED), under
   * dist__mon_refused_mu: published as the record's "r" line
   * (mon_progress.c). */
  mon_refused refused;
} mon_state;

extern mon_state dist__mon;
/* Guards each group's diag, which a timed-out operation's thread copies. */
extern pthread_mutex_t dist__mon_diag_mu;
/* Guards dist__mon.refused (the caller's thread writes, the publisher reads). */
extern pthread_mutex_t dist__mon_refused_mu;
/* Guards each group's granks, p2p_sent and p2p_received against their
 * free while the publisher reads them (taken after mu when both are). */
extern pthread_mutex_t dist__mon_peers_mu;

static inline bool dist__mon_is_p2p(int kind) {
  return kind >= 0 && dist_op_is_p2p((dist_op_kind)kind);
}

/* The number (per kind) of g's operation with ordinal ord, when the ring
 * still holds it; else ord. */
static inline uint64_t dist__mon_num(const mon_group *g, uint64_t ord) {
  const mon_op *op = &g->ring[ord % MON_RING];
  return ord && atomic_load_explicit(&op->seq, memory_order_acquire) == ord
             ? atomic_load_explicit(&op->num, memory_order_relaxed) : ord;
}

/* The timeout operation ord of g runs against: its call's own (a monitored
 * barrier's), else the group's. */
static inline int64_t dist__mon_timeout_ms(const mon_group *g, uint64_t ord) {
  const mon_op *op = &g->ring[ord % MON_RING];
  int64_t t = atomic_load_explicit(&op->timeout_ms, memory_order_relaxed);
  return ord && atomic_load_explicit(&op->seq, memory_order_acquire) == ord && t > 0
             ? t : g->timeout_ms;
}

static inline int64_t dist__mon_wall_ms(int64_t mono_ns) {
  return (mono_ns + dist__mon.wall_off_ns) / 1000000;
}

/* --- watchdog (mon_watchdog.c) ------------------------------------------ */
int dist__mon_watchdog_start(void);
void dist__mon_watchdog_stop(void);
void dist__mon_watchdog_kick(void);

/* --- progress records (mon_progress.c) --------------------------------- */


/* Publishes this rank's record (state "run" / "exit" / "done"). */
int dist__mon_publish(dist_store *s, const char *state, const char *note);
/* Reads every rank's record into recs[world] (absent ones not present). */
int dist__mon_read_all(dist_store *s, mon_rec *recs);
/* Same host: what /proc says of r's process ('X' gone, 'Z' a zombie not
 * reaped yet, 'T' stopped, 'R'/'S'/'D' alive); 0 when unknown. */
char dist__mon_proc_state(const mon_rec *r);
void dist__mon_recs_free(mon_rec *recs, int n);
const mon_rec_group *dist__mon_rec_group(const mon_rec *r, int gid);
/* The group gid when r's record says the rank destroyed it ("d"), or NULL. */
const mon_rec_destroyed *dist__mon_rec_destroyed(const mon_rec *r, int gid);
/* The key of rank r's record (and other per-rank keys: kind "p", "s"...). */
void dist__mon_key(char *buf, size_t len, const char *kind, int rank);

/* --- the GPU (mon_gpu.c) ------------------------------------------------ */

/* One line saying where rank's operation kind #seq is on the GPU ("rank 2's
 * ALL_REDUCE #9 was launched 12 s ago and has not started on the GPU: ..."),
 * from p at now_ns. */
void dist__mon_gpu_say(char *buf, size_t len, int rank, int kind, uint64_t seq,
                       const dist_gpu_progress *p, int64_t now_ns);
/* diag (heap) with that line appended when g's operation seq is on CUDA
 * tensors and its group answers; returns the string to keep (diag, or a
 * new one and diag freed). */
char *dist__mon_gpu_note(const mon_group *g, uint64_t seq, char *diag);

/* --- diagnosis (mon_diag.c) --------------------------------------------- */

/* The diagnosis of g stalled at seq, from every rank's record, headed
 * "<what> in group ..." ("stall", "hang", "lost peer"; a member that left
 * the group before this collective makes a hang's "desync", as asked for
 * with "desync", and v->desync: mon_diag_left.c). Returns a heap
 * string (dist__free) and sets *lowest when this rank is the
 * lowest-numbered rank blocked in that operation. */
/* ... and fills *v with what the diagnosis blames (n 0: nobody). */
/* This rank's creation (its record's "c" line) timed out: when members
 * skipped the call, the hang's report naming them (mon_diag.c) and its
 * verdict; NULL when none did (or no memory). */
char *dist__mon_diagnose_creation(const mon_rec *recs, mon_verdict *v);
/* The desync report of this rank's creation in flight when a member of it
 * left itself out of the list it passed as that call (mon_create.c), with
 * the verdict; NULL when none did. */
char *dist__mon_diagnose_creation_desync(const mon_rec *recs, mon_verdict *v);
char *dist__mon_diagnose(const mon_group *g, uint64_t seq, mon_rec *recs, const char *what,
                         bool *lowest, int *n_cycles, mon_verdict *v);
/* Whether every live member has published since since_ms (wall), so its
 * record says what it did after this rank entered the operation. */
bool dist__mon_recs_fresh(const mon_group *g, const mon_rec *recs, int64_t since_ms);
/* Under distrun: whether distrun has said how every gone member ended. */
bool dist__mon_recs_settled(const mon_group *g, const mon_rec *recs);
/* The wait-for cycles among recs: the shortest appended to buf in full,
 * the others folded into one line; returns how many. When v (may be NULL)
 * blames nobody yet, it blames the ranks every cycle goes through. */
int dist__mon_cycles(const mon_rec *recs, int world, char *buf, size_t len, size_t *off,
                     mon_verdict *v);
/* Of the k ranks every cycle goes through (ranks, kept in place), those
 * whose order of two collectives no other rank shares while some ran them
 * the other way (mon_order.c), when they are some but not all; returns
 * how many ranks are left in ranks. */
int dist__mon_prefer_out_of_order(const mon_rec *recs, int world, int *ranks, int k);
/* A collective rank x called on the wrong group (mon_order.c): the group
 * of x's whose last call came from the site where the members of another
 * group of x's wait for it in a collective it never issued (that wait in
 * *wanted); NULL none. prefer_wrong_group keeps of ranks (k, in place)
 * those, when some but not all are; returns how many are left. */
const mon_rec_group *dist__mon_wrong_group(const mon_rec *recs, int world, int x,
                                           const mon_rec_group **wanted);
int dist__mon_prefer_wrong_group(const mon_rec *recs, int world, int *ranks, int k);
/* A rank that took a branch its earlier steps did not (mon_order.c):
 * fresh_call says whether rank x waits in the first call it made on that
 * group from that call site (1, 0, -1 unknown). prefer_fresh keeps of
 * ranks (k, in place) those that do when the others are known to call
 * from sites they used before, all blocked in the same kind of
 * point-to-point call on one group; returns how many are left. A
 * send-send or receive-receive deadlock is symmetric in the records: the
 * rank whose order changed is the one calling from a new line. */
int dist__mon_fresh_call(const mon_rec *recs, int x);
int dist__mon_prefer_fresh(const mon_rec *recs, int *ranks, int k);
/* The same for a step never taken (mon_record.h's novel): prefer_novel
 * keeps of ranks those whose blocked send or receive never followed the
 * call before it, when every other is known to be where its earlier
 * steps went, all blocked in point-to-point calls on one group (of any
 * kinds: a stage that skipped a microbatch receives where its partner
 * receives too; one that changed a tag sends where its partner receives). */
int dist__mon_prefer_novel(const mon_rec *recs, int *ranks, int k);
/* ": its earlier steps never went from the call before it ... to this
 * one ..." for rank r (mon_cycle.c). */
void dist__mon_say_novel(const mon_rec *recs, int r, char *buf, size_t len, size_t *off);

/* The odd ends of point-to-point waits (mon_peers.c). odd_sender: rank s
 * is blocked in its first send to a rank that receives from another peer
 * it received from before, or receives nothing. wrong_source: the rank
 * sending to r with the tag r receives with, while r receives from a peer
 * that does not send to it (-1: none, or that send is the odd one).
 * stranded_receiver: r receives from a peer that is not sending to it.
 * wrong_destination: the rank waiting to receive from r while r's batch
 * sends to a peer that does not take from it (-1: none). */
bool dist__mon_odd_sender(const mon_rec *recs, int world, int s);
int dist__mon_wrong_source(const mon_rec *recs, int world, int r);
bool dist__mon_stranded_receiver(const mon_rec *recs, int world, int r);
int dist__mon_wrong_destination(const mon_rec *recs, int world, int r);
/* A point-to-point operation's halves against its peers' counts
 * (mon_parts.c). parts_known: b's record names every half. has_part_with:
 * one of them is with rank q. unissued: b's half (of rank r) with q that q
 * never issued (NULL: none; *unknown set when some count is unknown).
 * parts_wait: whether b waits for q by its halves, 1 or 0, -1 when they do
 * not tell. sure_wait: rank r's wait for q is sure (not a batch's half
 * that may be done). sends_astray: the peer r's blocked batch sends to
 * that never exchanged with r in the group (-1: none). left_out: a rank
 * blocked in a batch waiting for a half that x never issued, while x is
 * elsewhere (elsewhere false: wherever x is; its part in *part; -1: none). A send or receive alone is
 * mon_peers.c's to judge, as before the halves were known. prefer_unissued: of ranks (k, kept in place), the
 * senders astray, else the ranks that left a half out, when some but not
 * all are; returns how many are left. */
bool dist__mon_parts_known(const mon_rec_group *b);
bool dist__mon_has_part_with(const mon_rec_group *b, int q);
const mon_rec_part *dist__mon_unissued(const mon_rec *recs, int r, const mon_rec_group *b,
                                       int q, bool *unknown);
int dist__mon_parts_wait(const mon_rec *recs, int r, const mon_rec_group *b, int q);
bool dist__mon_sure_wait(const mon_rec *recs, int r, int q);
int dist__mon_sends_astray(const mon_rec *recs, int world, int r);
int dist__mon_left_out(const mon_rec *recs, int world, int x, bool elsewhere,
                       const mon_rec_part **part);
int dist__mon_prefer_unissued(const mon_rec *recs, int world, int *ranks, int k);
/* part_with: b's half with rank q in that direction (NULL: none known).
 * tags_differ: a half of a (rank ra) and the half of b (rank rb) it
 * meets, with known tags that differ (*pa, *pb). say_parts: "sends to
 * rank 1 with tag 1 and receives from rank 1 with tag 0" (b's halves). */
const mon_rec_part *dist__mon_part_with(const mon_rec_group *b, int q, bool send);
bool dist__mon_tags_differ(const mon_rec_group *a, int ra, const mon_rec_group *b, int rb,
                           const mon_rec_part **pa, const mon_rec_part **pb);
void dist__mon_say_parts(const mon_rec_group *b, char *buf, size_t len, size_t *off);
/* Whether send or receive b is the first between its two ranks in its
 * direction, with any tag (mon_record.h: pair, peer before). */
bool dist__mon_first_with_peer(const mon_rec_group *b);
/* new_tag_side: of a send r and a receive q (either way round) stuck on
 * each other, the one whose pair is new while the other's has matched
 * before (-1: the pair numbers do not tell). */
int dist__mon_new_tag_side(const mon_rec *recs, int r, int q);
/* Of the k ranks every cycle goes through (ranks, kept in place), the
 * receivers from the wrong peer when there are any, else the senders to
 * the wrong peer, else, in a cycle of receives, those receiving from their
 * peer for the first time; returns how many are left. */
int dist__mon_prefer_odd_p2p(const mon_rec *recs, int world, int *ranks, int k);

/* Whether recs show a wait-for cycle through rank me whose every member is
 * alive, blocked in a synchronous call and has no other operation in
 * flight (nothing pending could break it), or failing one, such an
 * unmatched pair of me and its peer (a send and its receive whose tags
 * differ); fills *seen with the shortest cycle, or the pair. */
bool dist__mon_deadlock_seen(const mon_rec *recs, int world, int me, mon_cycle_seen *seen);

/* --- who waits for whom (mon_waits.c) ---------------------------------- */

/* The operation a rank waits in, as members compare it: its sequence
 * number, and for a collective its ordinal among the group's collectives
 * (coll, 0 for point to point), which is what members share when their
 * point-to-point counts differ (pipeline stages send and receive
 * different numbers of times on one group). */
typedef struct mon_at_op {
  uint64_t seq, coll;
  int kind;
} mon_at_op;

/* Whether a member whose record for the group is rg (NULL: none) is in
 * operation o: it has reached it, and it is not another operation there. */
bool dist__mon_is_in(const mon_rec_group *rg, mon_at_op o);
/* The operation a blocked record b is in. */
mon_at_op dist__mon_at_blocked(const mon_rec_group *b);
/* The oldest operation rank r is blocked in, across its groups, or NULL. */
const mon_rec_group *dist__mon_blocked_in(const mon_rec *r);
/* Whether a and b are the two halves of one transfer between ranks ra, rb. */
bool dist__mon_halves(const mon_rec_group *a, int ra, const mon_rec_group *b, int rb);
/* Whether rank r, blocked in b, waits for rank q (mon_waits.c's header). */
bool dist__mon_waits_for(const mon_rec *recs, int r, const mon_rec_group *b, int q);
/* The members of g that have not entered its collective o and left the
 * group before it (mon_diag_left.c: each destroyed the group after fewer
 * collectives and is alive), ascending, into out; how many. */
int dist__mon_leavers(const mon_group *g, mon_at_op o, const mon_rec *recs, int *out, int cap);

/* Every rank's out-edges in recs[world], found once per operation. recs
 * and this rank's group table must not change while it lives. NULL when
 * memory ran out. Free with dist__mon_waits_free (accepts NULL). */
typedef struct mon_waits mon_waits;
mon_waits *dist__mon_waits_new(const mon_rec *recs, int world);
/* The ranks r waits for, ascending, into *to (valid while w lives); how
 * many. For a collective the list may hold r itself: skip it. */
int dist__mon_waits_out(mon_waits *w, int r, const int **to);
/* dist__mon_blocked_in(&recs[r]), remembered. */
const mon_rec_group *dist__mon_waits_blocked(const mon_waits *w, int r);
void dist__mon_waits_free(mon_waits *w);

/* --- call sites (mon_symbol.c) ------------------------------------------ */
/* "func (file.c:42)" or "func+0x1f (libx.so)" or "0x..." for addr. */
void dist__mon_symbolize(uintptr_t addr, char *out, size_t len);
/* Frames of this thread or of thread tid (async, via a signal), one per
 * line, "  #i func (file:line)"; returns chars written. */
size_t dist__mon_stack_of(int tid, char *out, size_t len);
void dist__mon_stack_init(void);

/* --- crashes (mon_crash.c) ---------------------------------------------- */
void dist__mon_crash_install(void);

/* --- statistics (mon_stats.c) ------------------------------------------- */
int dist__mon_stats_alloc(mon_group *g);
/* The completion path: operation seq of g ended (completed). */
void dist__mon_stats_op(mon_group *g, uint64_t seq, int kind, int64_t bytes, int64_t t_start_ns,
                        int64_t t_end_ns);
/* The watchdog, under mon.mu. */
void dist__mon_stats_tick(mon_group *g);
/* g ends (under mon.mu, g->pg already NULL): the rest is published and, on
 * the group's rank 0, the group's life judged (waits for the members' last
 * chunks, at most a few seconds). info: the group's, for the straggler
 * event; NULL: none. */
void dist__mon_stats_end(mon_group *g, const dist_pg_info *info);
/* Who arrived last over n compared collectives, per group rank j (the
 * straggler's evidence): last[j] how often j did, late_ns[j] its summed
 * lateness behind the first then, material[j] how many by >= 1 ms,
 * alone[j] how many with a gap behind the second latest of at least half
 * that lateness, gap[j] a histogram of those gaps (a third of an octave a
 * bin). */
#define MON_GAP_BINS 64
typedef struct mon_lasts {
  int64_t n;
  int64_t *last, *late_ns, *material, *alone;
  int64_t (*gap)[MON_GAP_BINS];
} mon_lasts;
bool dist__mon_lasts_alloc(mon_lasts *t, int size);
void dist__mon_lasts_free(mon_lasts *t);
void dist__mon_lasts_reset(mon_lasts *t, int size);
/* One compared collective: rank last arrived skew ns after the first and
 * gap ns after the second latest. */
void dist__mon_lasts_add(mon_lasts *t, int last, int64_t skew, int64_t gap);
/* The group rank among size that is the straggler by t, or -1. */
int dist__mon_stats_judge(const mon_lasts *t, int size);
void dist__mon_stats_free(mon_group *g);

#endif
