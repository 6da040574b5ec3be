/* mon_diag_int.h - what the diagnosis of a stalled operation (mon_diag.c)
 * shares with the wait-for cycles (mon_cycle.c): the words reports use and
 * the facts about one rank's record both read. */
#ifndef DIST_MON_DIAG_INT_H
#define DIST_MON_DIAG_INT_H

#include "mon_int.h"

/* The operation's name ("ALL_REDUCE") for a dist_op_kind. */
const char *dist__mon_op_name(int kind);
/* The number (per kind) reports print for the operation a blocked record
 * is in (mon_record.h; an older record: the ordinal). */
unsigned long long dist__mon_rec_num(const mon_rec_group *b);
/* " from rank Q" / " to rank Q" for a point-to-point operation. */
const char *dist__mon_peer_words(int kind, int peer, char *buf, size_t len);
/* The peer a rank blocked in a send or receive should have matched and did
 * not (both blocked in the two halves); -1 otherwise. */
int dist__mon_unmatched_peer(const mon_rec *recs, int r);
/* Why rank r cannot be heard from, or NULL when it is alive and
 * publishing. */
const char *dist__mon_gone_how(const mon_rec *r, int64_t now_ms, char *buf, size_t len);
/* ": ranks 0-1 wait for it in group 1 (g1) BARRIER #1; rank 3 in ...";
 * one clause per operation the waiters are blocked in. */
void dist__mon_say_waiters(const mon_rec *recs, int r, char *buf, size_t len, size_t *off);
/* The verdict names the operation b (of a waiter, or the culprit's own)
 * and the culprit's call site. */
void dist__mon_verdict_at(mon_verdict *v, const mon_rec_group *b, const char *site);
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
/* The rank blocked creating a group that rank r skipped (r is one of its
 * dist__mon_create_skippers), or -1. */
int dist__mon_skipped_for(const mon_rec *recs, int r);
/* "did not create group G (...) that rank c is creating (...): ranks
 * ... made that call and rank r did not; it is blocked in ...". */
void dist__mon_say_skipped(const mon_rec *recs, int r, int c, int64_t now_ms, char *buf,
                           size_t len, size_t *off);
/* qsort's order of ints. */
static inline int dist__mon_cmp_int(const void *a, const void *b) {
  return *(const int *)a - *(const int *)b;
}

#endif
