/* mon_diag_int.h - what the diagnosis of a stalled operation (mon_diag.c
 * and its parts, mon_diag_*.c) shares between its files and with the
 * wait-for cycles (mon_cycle.c) and the skipped creations (mon_create.c):
 * the words reports use, the facts about one rank's record they read, and
 * the pieces of a report each part says. */
#ifndef DIST_MON_DIAG_INT_H
#define DIST_MON_DIAG_INT_H

#include "mon_int.h"

/* qsort's order of ints. */
static inline int dist__mon_cmp_int(const void *a, const void *b) {
  return *(const int *)a - *(const int *)b;
}

/* --- the words reports use (mon_diag_words.c) ---------------------------- */

/* The operation's name ("ALL_REDUCE") for a dist_op_kind. */
const char *dist__mon_op_name(int kind);
/* "1.5 s" for ms milliseconds, into buf; returns buf. */
const char *dist__mon_sec_word(int64_t ms, char *buf, size_t len);
/* When rank r's last call into the library returned, as its record says
 * (wall ms): its "l" line or its groups' last completions, whichever is
 * later; its heartbeat when the record tells neither. */
int64_t dist__mon_lib_ms(const mon_rec *r);
/* "blocked in the store's get of key 'k' (a key no rank has set) for
 * 10.0 s, called from ...", for r's "w" line (mon_record.h). */
const char *dist__mon_store_words(const mon_rec *r, int64_t now_ms, char *buf, size_t len);
/* What rank who, in no operation of a group, does ("blocked in
 * dist_new_group for ..., creating group G ...", "blocked in the store's
 * get of key ...", else "busy outside the library for ..." since its last
 * call into the library, idle_ms or later), into buf; returns buf. */
const char *dist__mon_outside_words(const mon_rec *recs, int who, int64_t idle_ms,
                                    int64_t now_ms, char *buf, size_t len);
/* The number (per kind) reports print for the operation a blocked record
 * is in (mon_record.h; an older record: the ordinal). */
unsigned long long dist__mon_rec_num(const mon_rec_group *b);
/* " from rank Q" / " to rank Q" for a point-to-point operation. */
const char *dist__mon_peer_words(int kind, int peer, char *buf, size_t len);
/* Why rank r cannot be heard from, or NULL when it is alive and
 * publishing. */
const char *dist__mon_gone_how(const mon_rec *r, int64_t now_ms, char *buf, size_t len);
/* Appends "last completed OP #n, called from ..." of rg (NULL or none:
 * that its record shows none in this group). */
void dist__mon_say_last(char *buf, size_t len, size_t *off, const mon_rec_group *rg);
/* Appends the line (with its stack) for member who of g that has not
 * entered #seq (of kind): how it went, or where it is instead. */
void dist__mon_say_absent(char *buf, size_t len, size_t *off, const mon_rec *recs, int who,
                          const mon_group *g, uint64_t seq, int kind, int64_t now_ms);
/* ": ranks 0-1 wait for it in group 1 (g1) BARRIER #1; rank 3 in ...";
 * one clause per operation the waiters are blocked in. */
void dist__mon_say_waiters(const mon_rec *recs, int r, char *buf, size_t len, size_t *off);

/* --- where the waits end (mon_diag_ends.c) ------------------------------- */

/* Where the waits through rank q end: q itself when it is in no operation
 * or gone, else where its own waits end; how many ranks, into out. */
int dist__mon_waits_end_at(const mon_rec *recs, int q, int *out, int cap);
/* Appends "the waits end at rank r, which ..." (gone: how it went, else in
 * no operation), with the ranks blocked on it. */
void dist__mon_say_end(const mon_rec *recs, int r, const char *gone, int64_t now_ms, char *buf,
                       size_t len, size_t *off);
/* Appends the line of each of ranks[0..n) where the waits end, and makes
 * them the verdict's culprits at this rank's own operation. */
void dist__mon_say_ends(const mon_rec *recs, mon_verdict *v, const mon_group *g, int kind,
                        uint64_t num, const char *site, const int *ranks, int n, char *buf,
                        size_t len, size_t *off);
/* Appends where this rank's waits end, one line each, and makes them the
 * verdict's culprits (v may be NULL); nothing when the waits only go
 * round. */
void dist__mon_say_roots(const mon_rec *recs, mon_verdict *v, char *buf, size_t len,
                         size_t *off);

/* --- a member that left the group before the collective (mon_diag_left.c) */

/* Whether member r left group gid before its collective o: its record
 * says it destroyed the group (and lists it no more), after fewer
 * collectives than o's ordinal when the record says how many, and it is
 * alive. */
bool dist__mon_left_before(const mon_rec *recs, int r, int gid, mon_at_op o, int64_t now_ms);
/* The collective the leavers left before: its group (id, description,
 * size) and the operation (kind, number). */
typedef struct mon_left_at {
  int gid;
  const char *desc;
  int size, kind;
  unsigned long long num;
} mon_left_at;
/* Appends the header "<what> in group G (desc, N ranks) at OP #num: rank
 * R left the group (destroyed it or exited) before this collective; the
 * collective counts differ" for the leavers left[0..n). */
void dist__mon_say_left_head(const char *what, const mon_left_at *at, const int *left, int n,
                             char *buf, size_t len, size_t *off);
/* Appends the line of leaver r of group gid: after how many collectives
 * it left, its last operation there, where it destroyed the group and
 * where it is now, marked "<- collective count differs". */
void dist__mon_say_left(const mon_rec *recs, int r, int gid, int64_t now_ms, char *buf,
                        size_t len, size_t *off);
/* The verdict names the leavers left[0..n) at collective at, at the first
 * one's destroy call (else its last call there): a desync of the
 * collective count. */
void dist__mon_verdict_left(mon_verdict *v, const mon_rec *recs, const mon_left_at *at,
                            const int *left, int n);
/* Where this rank's waits end (it waits in another operation, maybe of
 * another group): when at a rank that left the group of a collective
 * another rank waits in for it, that waiter's record of the collective
 * (*b) and every member that left before it, into left; how many (0:
 * none). */
int dist__mon_left_ends(const mon_rec *recs, const mon_rec_group **b, int *left, int cap);
/* The report of dist__mon_left_ends's find: the header (what: "stall" or
 * "desync"), the leavers' lines, the ranks blocked in the collective, and
 * where this rank waits; and the verdict. */
void dist__mon_say_left_elsewhere(const mon_rec *recs, const char *what, const mon_rec_group *b,
                                  const int *left, int n, mon_verdict *v, char *buf, size_t len,
                                  size_t *off);

/* --- a send and a receive that never matched (mon_diag_pair.c) ----------- */

/* The peer a rank blocked in a send or receive should have matched and did
 * not (both blocked in the two halves); -1 otherwise. */
int dist__mon_unmatched_peer(const mon_rec *recs, int r);
/* Whether rank r, of the unmatched pair (r, q), is the one to name first. */
bool dist__mon_blame_first(const mon_rec *recs, int r, int q);
/* The rank of an unmatched pair (r, q) whose blocked call is a step it
 * never took while its partner's is one it took before, or -1. */
int dist__mon_novel_side(const mon_rec *recs, int r, int q);
/* The one rank of an unmatched pair (r, q) to blame alone, or -1. */
int dist__mon_pair_alone(const mon_rec *recs, int r, int q);
/* Removes rank r from v's culprits. */
void dist__mon_drop_culprit(mon_verdict *v, int r);
/* Appends "the waits end at ranks r and q: ...; the two never matched". */
void dist__mon_say_unmatched(const mon_rec *recs, int r, int q, char *buf, size_t len,
                             size_t *off);

/* --- waits that stop with no end (mon_diag_held.c) ----------------------- */

/* Of the ranks the waits from start[0..n) reach, the lowest held in
 * another group's operation: said, and made v's culprit (v may be NULL);
 * whether there was one. */
bool dist__mon_say_held(const mon_rec *recs, const int *start, int n, mon_verdict *v, char *buf,
                        size_t len, size_t *off);
/* Whether members in[0..n) of a rooted collective name different roots:
 * then said, and the odd ones made v's culprits unless v has some. */
bool dist__mon_say_root_split(const mon_rec *recs, int gid, int kind, unsigned long long num,
                              const int *in, int n, mon_verdict *v, char *buf, size_t len,
                              size_t *off);
/* Whether some of members in[0..n) are blocked in another group's
 * operation issued before this one: then said, one line each (the
 * first 4). */
bool dist__mon_say_before(const mon_rec *recs, const mon_group *g, const int *in, int n,
                          char *buf, size_t len, size_t *off);

/* --- a stalled send or receive (mon_diag_p2p.c) -------------------------- */

/* Appends what peer, the one rank a send or receive waits on, is doing;
 * *lowest: whether this rank writes the report. */
void dist__mon_diagnose_p2p(const mon_group *g, uint64_t seq, int kind, int peer,
                            const char *site, const mon_rec *recs, char *buf, size_t len,
                            size_t *off, bool *lowest);

/* --- the verdict (mon_diag.c) -------------------------------------------- */

/* The verdict names ranks[0..n) at this rank's own operation (num of kind
 * in group g, called from site). */
void dist__mon_verdict_here(mon_verdict *v, const mon_group *g, int kind, uint64_t num,
                            const char *site, const int *ranks, int n);
/* The verdict names the operation b (of a waiter, or the culprit's own)
 * and the culprit's call site. */
void dist__mon_verdict_at(mon_verdict *v, const mon_rec_group *b, const char *site);

/* --- a creation a member skipped (mon_create.c) -------------------------- */

/* A creation a member skipped (mon_create.c). The members of the group
 * rank c is blocked creating that never made that call, while at least as
 * many of the ranks that should have made it did (else c's call is the
 * odd one: none), into out, ascending; how many. */
int dist__mon_create_skippers(const mon_rec *recs, int c, int *out, int cap);
/* Whether rank m is blocked creating, as its call number k on a scope,
 * another group than most of the ranks creating their call k there: it
 * made its creations in another order (a member creating an earlier call
 * is followed to that one's end, so a rank that waits for such a rank is
 * led to it). */
bool dist__mon_create_order_odd(const mon_rec *recs, int m);
/* Rank m's call number cr->k on cr's scope ("x" line), when m is in the
 * list cr (a rank's creation in flight) names but the list m passed as
 * that call leaves it out, and no other rank made that list under another
 * number (m's calls are not merely shifted): m left itself out of its
 * list, a desync on the member list. NULL otherwise, or unknown. */
const mon_rec_made *dist__mon_create_list_odd(const mon_rec *recs, int m,
                                              const mon_rec_create *cr);
/* Whether the creation cr's list holds rank r. */
bool dist__mon_create_lists(const mon_rec_create *cr, int r);
/* Whether rank r is blocked creating, with use_local_synchronization (only
 * the members call), a group no other rank creates, while each member it
 * waits for is blocked creating another group and more ranks wait for r
 * (in groups that list it, which it does not create) than for any of
 * them: r passed a list of its own (an off-by-one), and the waits end at
 * it, not at the member it waits for. */
bool dist__mon_create_local_odd(const mon_rec *recs, int r);
/* The rank blocked creating a group that rank r skipped (r is one of its
 * dist__mon_create_skippers), or -1. */
int dist__mon_skipped_for(const mon_rec *recs, int r);
/* "did not create group G (...) that rank c is creating (...): ranks
 * ... made that call and rank r did not; it is blocked in ...". */
void dist__mon_say_skipped(const mon_rec *recs, int r, int c, int64_t now_ms, char *buf,
                           size_t len, size_t *off);

#endif
