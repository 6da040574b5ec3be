/* mon_record.h - a rank's progress record as it travels through the job's
 * store: the text format (mon_record.c holds the one parser) and its
 * decoded form. The monitor writes and reads records (mon_progress.c);
 * distrun's SIGUSR1 status table reads them too, with this same parser, so
 * the two never disagree about the format.
 *
 * One key per rank, dist/mon/<job>/<init>/p/<R>; text, one line for the
 * process and one per live group, fields separated by tabs (call sites
 * contain spaces):
 *   v1 <rank> <pid> <host> <wall ms> <state> <note>
 *   g <gid> <size> <enq> <started> <done> <kind> <since ms> <last kind>
 *     <last ms> <call site> <last call site> <description> [<peer>
 *     [<colls enq> <colls done> <coll in flight> [<last seq> <tag> [<num>
 *     <last num> [<sync> [<peer2> [<pair> [<last ns> [<creations>
 *     [<peer before> [<parts> <counts> [<fresh> [<novel>]]]]]]]]]]]]]
 *   c <gid> <size> <since ms> <call site> [<call> <scope> <k> <members>
 *     [<hash>]] (optional, once)
 *   x <scope> <k> <member> <hash> <call site> <members>   (optional, the
 *     MON_MADE_MAX latest, oldest first)
 *   r <gid> <kind> <num> <latest> <call site> <message>   (optional, once)
 *   d <gid> <wall ms> <description> [<colls enq> <last kind> <last num>
 *     <last call site> <destroy call site>]   (optional, one per user
 *     group the process destroyed while it runs on: it takes part in it
 *     no more; the collectives it had issued there, its last completed
 *     operation (kind -1: none) and where it called it, and where the
 *     program destroyed the group ("-": unknown))
 *   l <wall ms>   (optional, once: the process's last call into the
 *     library that returned, as far as the monitor hears of calls outside
 *     a group's operations: init, a group's creation or destruction, a
 *     blocking store call of the program's; and the issue of each group's
 *     latest operation)
 *   w <tid> <since ms> <call> <keys> <timeout ms> <call site> <key>
 *     (optional, once: the oldest blocking store call the program itself
 *     made that has not returned, dist/internal/store.h: the thread in it,
 *     since when, "get", "wait", "multi_get" or "queue_pop", how many keys
 *     it waits for, its timeout, where the program called it, and the
 *     first key, last since it may hold spaces)
 *   m <gid> <num> <kind> <call site>   (optional, one per live group: the
 *     last call this process made on a group it is not a member of, a
 *     no-op as in torch, between its collectives num - 1 and num on gid)
 * A "c" line says the process is creating user group gid (size members)
 * in dist_new_group or dist_split_group (call), which waits for the other
 * members (readers that know no "c" line skip it); members lists their
 * global ranks as ranges ("0-1,3"; a list too long for MON_MEMBERS_LEN ends
 * in "+", and the ranks cut off are unknown), scope is the group every
 * member of which makes this call (the default group for new_group, the
 * parent for split_group; -1: only the members call, as with
 * use_local_synchronization) and k the call's number among the creations
 * on the scope (1 first). creations, on a group's line, is how many
 * creations this rank has called with that group as their scope, members
 * of the new group or not: a rank whose count is below a creator's k has
 * not made that call (it skipped it, mon_create.c). A record without the
 * fields reads as knowing nothing of them (scope -1, creations unknown).
 * hash is a hash of the whole member list (a cut list compares by it:
 * 0 unknown). An "x" line is one of the latest creations this rank called
 * on a scope, members or not (member 1 when its own rank is in the list
 * it passed), the one in flight included: the list each rank passed as
 * its call k on the scope, which the ranks waiting in a creation compare
 * with their own (mon_create.c: a rank that left itself out of a list the
 * others put it in, or made its creations in another order); members are
 * ranges cut to MON_MADE_LEN ("+" at the end).
 * A rank in no operation of a group is "busy outside the library" since
 * the latest of its "l" line and its groups' last completions; when it has
 * a "w" line it is blocked in that store call instead (a key nobody set:
 * the call returns as soon as the key is there). Readers that know
 * neither line skip them.
 * An "r" line is the last call the library refused before it started (a
 * root outside the group, a NULL tensor, a call on the handle of a group
 * this rank destroyed, whose "d" line names it; gid -1: a handle of no
 * group: DIST_EV_OP_REJECTED): num is the
 * number it would have taken, latest 1 while no call was issued after it,
 * message the reason ("-" none; readers that know no "r" line skip it).
 * kind is the op of the oldest operation in flight (-1: none), peer the
 * global rank a point-to-point one waits on (MON_PEER_*; a record without
 * the field reads as MON_PEER_NONE). A batch (BATCH_P2P) waits on the one
 * peer its receives come from (peer) and may wait on the one its sends
 * go to when that is another (peer2: a send not taken yet); several
 * peers either way read MON_PEER_MANY. enq/started count every
 * operation of the group (its sequence numbers, point-to-point included),
 * done is the watermark below which every operation has ended (the one in
 * flight is done + 1, even when later ones ended first), last seq the
 * operation that ended last (the one "last completed" names) and tag the
 * in-flight point-to-point operation's tag;
 * colls enq and done count its collectives alone and coll in flight is the
 * collective ordinal of the operation in flight (0: none, or point to
 * point), so ranks whose point-to-point counts differ (pipeline stages)
 * still compare their collectives. enq/started/done are the group's issue
 * ordinals (dist_coll.ord); num and last num are the numbers of the
 * operation in flight and of the last completed (dist_coll.seq:
 * collectives and point-to-point counted apart), which reports print
 * (0: none; a record without them prints ordinals); sync is 1 when the
 * operation in flight is a synchronous call (its thread waits inside the
 * library: what the deadlock probe needs to call a cycle proven); pair is
 * the in-flight send's or receive's number on its pair (dist_coll.pair_seq:
 * 1 for the first from this rank to that peer with that tag, or at this
 * rank from it; 0 unknown); peer before is 1 when this rank sent to (for
 * a receive: received from) that peer before in the group with any tag,
 * 0 when never, -1 unknown (a pipeline that tags each step anew starts a
 * pair every step); last ns is the last completion's time on the writer's own
 * monotonic clock, in ns (compared only within one record); parts are
 * the in-flight send's, receive's or batch's halves, one per direction and
 * peer: "s<global rank>:<n>t<tag>" (a send to it, this rank's n-th to
 * that peer in the group, with that tag; "t<tag>" may be absent) or
 * "r<rank>:<n>t<tag>" (a receive from it), comma-separated, a
 * trailing "+" when some were left out, "-" none; for a collective with a
 * root in flight, "o<global rank>", its root; counts are this rank's
 * sends to and receives from each peer it exchanged with in the group so
 * far, issued (not completed): "<rank>:<sent>:<received>" comma-separated,
 * a trailing "+" when peers were left out (their counts unknown), "-"
 * none, "?" unknown (a receive from any source took one from some peer).
 * A part that its peer's counts do not reach is a half that peer never
 * issued (mon_parts.c). fresh is 1 when the operation in flight is the
 * first this rank issued on the group from its call site (a branch its
 * earlier steps did not take), 0 when it called from there before, -1
 * unknown (no operation in flight, or too many sites to remember). novel
 * is 1 when the send or receive in flight is a step this rank never took
 * on the group: from the call before it (site, kind, peer, tag) to this
 * one (site, kind, peer, tag), although a send or receive followed that
 * call at an earlier step; 0 when it took that step before, -1 unknown (a
 * collective, no precedent, or too many steps to remember). Call sites
 * are symbolised by the writer, since an address means nothing in another
 * process. */
#ifndef MON_RECORD_H
#define MON_RECORD_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#define MON_SITE_LEN 160    /* "func (file.c:42)" */
#define MON_PEER_NONE (-1)  /* a collective, or a receive from any source */
#define MON_PEER_MANY (-2)  /* a batch with several peers */
#define MON_MEMBERS_LEN 1024 /* a "c" line's member ranges */
#define MON_PARTS_MAX 8     /* an operation's parts a record carries */
#define MON_COUNTS_MAX 32   /* the peers whose counts a group's line carries */
#define MON_MADE_MAX 16     /* "x" lines: the latest creations a record carries */
#define MON_MADE_LEN 128    /* an "x" line's member ranges */

/* One half of a point-to-point operation in flight (the "parts" field). */
typedef struct mon_rec_part {
  int peer;                  /* global rank */
  bool send;
  uint32_t n;                /* this rank's n-th send to (receive from) the peer */
  bool tagged;               /* the record gave the half's tag ("t<tag>") */
  int tag;
} mon_rec_part;

/* Sends to and receives from one peer, issued so far (the "counts" field). */
typedef struct mon_rec_count {
  int peer;                  /* global rank */
  uint32_t sent, received;
} mon_rec_count;

/* A group line's two point-to-point fields, when it carried them. */
typedef struct mon_rec_p2p {
  int n_parts;
  bool parts_cut;            /* parts were left out */
  mon_rec_part parts[MON_PARTS_MAX];
  int root;                  /* a collective's root ("o"), -1 none */
  bool counts_known;         /* false: "?" */
  int n_counts;
  bool counts_cut;           /* peers were left out: their counts unknown */
  mon_rec_count counts[MON_COUNTS_MAX];
} mon_rec_p2p;

typedef struct mon_rec_group {
  int gid, size;
  uint64_t enq, started, done;
  int kind;                  /* in flight (oldest), or -1 */
  int64_t since_ms;          /* wall ms the in-flight op was enqueued */
  int last_kind;             /* last completed, or -1 */
  int64_t last_ms;
  char site[MON_SITE_LEN];   /* of the in-flight operation */
  char last_site[MON_SITE_LEN];
  char desc[96];             /* the group's description (or name) */
  int peer;                  /* of the in-flight operation (MON_PEER_*) */
  uint64_t colls_enq, colls_done; /* collectives issued, completed (no point to point) */
  uint64_t coll;             /* the in-flight operation's collective ordinal, 0 none */
  bool has_colls;            /* the record carried the two above */
  uint64_t last_seq;         /* the last to end (a record without it: done) */
  int tag;                   /* of the in-flight point-to-point operation */
  uint64_t num, last_num;    /* numbers (per kind) of the in-flight and of
                                the last ended operation, 0 none */
  bool has_num;              /* the record carried the two above */
  bool sync;                 /* the in-flight operation is a synchronous call */
  int peer2;                 /* a batch's other peer (MON_PEER_*) */
  uint64_t pair;             /* a send's or receive's number on its pair, 0 unknown */
  int64_t last_ns;           /* the last completion on the writer's monotonic
                                clock: orders its groups' last completions
                                (last_ms cannot, within a millisecond); 0 unknown */
  int64_t creations;         /* creations called on it as their scope, -1 unknown */
  int peer_before;           /* the in-flight send (receive) has a peer this rank sent
                                to (received from) before in the group, with any tag:
                                1, 0, -1 unknown (pair counts one tag alone, and a
                                pipeline may tag each step anew) */
  int fresh;                 /* the in-flight operation is the group's first from its
                                call site: 1, 0, -1 unknown */
  int novel;                 /* the in-flight send or receive is a step this rank
                                never took from the call before it: 1, 0, -1 */
  bool p2p_known;            /* the line carried parts and counts */
  mon_rec_p2p *p2p;          /* them; NULL when it had neither (no operation
                                in flight, no exchange so far) or is unknown */
} mon_rec_group;

/* The group a process is creating (the record's "c" line). */
typedef struct mon_rec_create {
  bool on;
  int gid, size;
  int64_t since_ms;          /* wall ms the creation began */
  char site[MON_SITE_LEN];
  char call[24];             /* "dist_new_group", "dist_split_group"; "" unknown */
  int scope;                 /* the scope's group id, -1 none or unknown */
  uint64_t k;                /* the call's number on the scope, 0 unknown */
  char members[MON_MEMBERS_LEN]; /* "" unknown */
  uint32_t hash;             /* of the whole list, 0 unknown */
} mon_rec_create;

/* A creation this rank called on a scope (the record's "x" lines). */
typedef struct mon_rec_made {
  int scope;
  uint64_t k;                /* its number on the scope (1 first) */
  bool member;               /* this rank is in the list it passed */
  uint32_t hash;             /* of the whole list */
  char site[MON_SITE_LEN];
  char members[MON_MADE_LEN]; /* ranges, "+" at the end when cut */
} mon_rec_made;

#define MON_DESTROYED_MAX 16 /* "d" lines read */
#define MON_NM_MAX 16        /* "m" lines read */

/* A user group the process destroyed (the record's "d" lines). */
typedef struct mon_rec_destroyed {
  int gid;
  int64_t ms;                /* wall ms of the destruction */
  char desc[96];
  bool has_counts;           /* the fields below were in the line */
  uint64_t colls;            /* collectives it had issued on the group */
  int last_kind;             /* its last completed operation, -1 none */
  uint64_t last_num;
  char last_site[MON_SITE_LEN]; /* "" unknown */
  char site[MON_SITE_LEN];   /* the program's destroy call, "" unknown */
} mon_rec_destroyed;

/* A call on a group the process is not a member of, just before its
 * collective num on group gid (the record's "m" lines): what such a call
 * most likely meant is gid (the wrong group passed), and a desync there
 * names it (distrun_verdict.c). */
typedef struct mon_rec_nonmember {
  int gid;
  uint64_t num;              /* the collective of gid it came before */
  int kind;                  /* dist_op_kind of the no-op call */
  char site[MON_SITE_LEN];
} mon_rec_nonmember;

/* The last refused call (the record's "r" line). */
typedef struct mon_rec_refused {
  bool on;
  int gid, kind;
  uint64_t num;
  bool latest;               /* no call was issued after it */
  char site[MON_SITE_LEN];
  char msg[200];
} mon_rec_refused;

/* A blocking store call the program is in (the record's "w" line). */
typedef struct mon_rec_store {
  bool on;
  int tid;                   /* the thread in it */
  int64_t since_ms;          /* wall ms the call began */
  char call[16];             /* "get", "wait", "multi_get", "queue_pop" */
  int n_keys;
  int64_t timeout_ms;
  char site[MON_SITE_LEN];   /* where the program called it */
  char key[128];             /* the first key it waits for */
} mon_rec_store;

typedef struct mon_rec {
  bool present;              /* a record was read */
  int rank;
  pid_t pid;
  char host[64];
  int64_t hb_ms;             /* wall ms of the write */
  char state[16];            /* "run", "exit", "done" */
  char note[160];            /* exit: how (atexit) */
  int n;
  mon_rec_group *g;          /* n entries */
  mon_rec_create creating;
  mon_rec_refused refused;
  int n_destroyed;
  mon_rec_destroyed destroyed[MON_DESTROYED_MAX];
  int64_t lib_ms;            /* the "l" line: the last library call outside a
                                group's operations returned; 0 unknown */
  mon_rec_store store;       /* the "w" line */
  int n_nm;
  mon_rec_nonmember nm[MON_NM_MAX];
  int n_made;
  mon_rec_made made[MON_MADE_MAX]; /* oldest first */
  /* Filled by the monitor's reader, not published: */
  char died[200];            /* distrun's line for it, or "" */
  char proc_state;           /* same host: /proc state, 0 unknown, 'X' gone */
  char stack[2048];          /* on request (DIST_SHOW_STACKTRACES) */
  char crash[2048];          /* distrun's copy of its crash backtrace */
} mon_rec;

/* Parses record text (modified in place) into r, which the caller zeroed;
 * r->g is allocated (free with dist__mon_rec_free). False when the text is
 * not a record (r->present stays false) or memory ran out. */
bool dist__mon_rec_parse(char *text, mon_rec *r);
void dist__mon_rec_free(mon_rec *r);

#endif
