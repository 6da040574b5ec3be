/* wpg_int.h - inside the checking layer.
 *
 * wpg.c is the filter (vtable, interposer hook, lifetime); fingerprint.c
 * turns a dist_coll into the record ranks exchange and compares records;
 * exchange.c runs the exchange and decides; async.c does the same for
 * async calls on the group's checking thread; report.c writes the reports;
 * callsite.c resolves return addresses; absent.c names the members that did
 * not arrive or left; agree.c runs the init-time agreement; order.c compares the
 * members' views of a group before it connects. */
#ifndef DIST_WPG_INT_H
#define DIST_WPG_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include <dist/backend.h>
#include <dist/dist.h>
#include <dist/log.h>
#include <dist/observer.h>
#include <dist/wrapper_pg.h>
#include <dist/internal/pg.h>

#define WPG_FP_VERSION 2u
#define WPG_MSG_LEN 8192      /* a report; the group keeps what fits */
#define WPG_DETAIL_LEN 2048   /* one rank's part of a report */

#define WPG_LOG(lvl, ...)                                                \
  do {                                                                   \
    if (DIST_LOG_##lvl <= dist_log_get_level())                          \
      dist_log(DIST_LOG_##lvl, DIST_SUBSYS_WPG, __VA_ARGS__);            \
  } while (0)

/* The record every member contributes to the exchange (fixed size, so the
 * exchange is one all_gather). Fields up to `pair` are compared between
 * ranks; pair is summed (uneven all_to_all sizes must cancel out); the call
 * site travels for the report and is never compared. */
typedef struct wpg_fp {
  uint16_t version;
  uint16_t kind;
  uint8_t redop;
  uint8_t premul;     /* PREMUL_SUM with its scalar */
  uint16_t n_tensors; /* inputs << 8 | outputs, for the kinds that agree */
  int32_t root;       /* global rank, -1 none */
  int32_t tag;        /* 0 (room for point-to-point records) */
  uint64_t count;     /* the group's collective count (p2p: pair count) */
  uint64_t hist;      /* rolling hash of the collectives before this one */
  uint64_t dtype_h;
  uint64_t numel_h;   /* element counts */
  uint64_t shape_h;
  uint64_t dev_h;
  uint64_t pair;      /* sum over ranks is 0 when all_to_all sizes agree */
  uint64_t caller_off;/* call site: offset in its module ... */
  uint32_t module;    /* ... and the module (0: the main program) */
  uint32_t site_was;  /* wpg_site_was: this rank's record against its own last
                         call from the same site (carried, never compared) */
  uint64_t seq;       /* the group's sequence number, for the report */
  uint64_t scalar;    /* PREMUL_SUM: its scalar's bits (premul says only that
                         the op is one); 0 otherwise */
  /* The last operation this rank called on a group it is not a member of
   * (it did nothing) since its last call on this group, if any: its kind
   * + 1 (0: none) and call site (carried, never compared). */
  uint32_t nm_kind;
  uint32_t nm_module;
  uint64_t nm_off;
} wpg_fp;

/* wpg_fp.site_was: a tie between the two ranks of a pair goes against the
 * one whose call changed since its last call from the same site (the
 * argument a planted bug changed), when the other's did not. */
typedef enum wpg_site_was {
  WPG_SITE_NEW = 0,     /* its first call from this site in this group */
  WPG_SITE_SAME = 1,    /* the same record (but for its place) as last time */
  WPG_SITE_CHANGED = 2, /* another dtype, count, shape, root, reduce op... */
} wpg_site_was;

/* Fields a report can name, in the order they are checked. */
typedef enum wpg_field {
  WPG_F_NONE = 0,
  WPG_F_OP,
  WPG_F_SEQ,       /* the collective count */
  WPG_F_DTYPE,
  WPG_F_COUNT,     /* element count */
  WPG_F_SHAPE,
  WPG_F_DEVICE,
  WPG_F_REDOP,
  WPG_F_ROOT,
  WPG_F_TAG,
  WPG_F_SPLITS,
  WPG_F_HISTORY,
} wpg_field;

/* Who a member is (exchanged once when the helper group is made). */
typedef struct wpg_ident {
  char host[56];
  int32_t pid;
  int32_t global;
} wpg_ident;

typedef struct wpg_site_cache {
  const void *addr[16];
  uint64_t off[16];
  uint32_t module[16];
} wpg_site_cache;

/* What a member leaves in the job's store when it destroys a checking group
 * (or exits): a rank still waiting in an exchange names it. */
typedef struct wpg_left {
  uint64_t count;     /* collectives it issued on the group */
  uint64_t pending_from; /* the first of them its destroy failed pending
                            (never waited; pending_from..count), 0 none */
  wpg_fp last;        /* its last one that agreed */
  uint32_t have_last;
  uint32_t exited;    /* 1: its process exited with the group live (the exit
                         handler wrote this); 0: it destroyed the group */
} wpg_left;

struct wpg_pending;

/* The state of one checking group (the vtable's priv). */
typedef struct wpg {
  dist_pg *self;          /* the checking group (outer) */
  dist_pg *inner;
  dist_pg *helper;        /* internal cpu group; NULL until made */
  const dist_pg_info *info; /* inner's info: ids, ranks, timeout */
  int size, rank;
  uint64_t coll_count;    /* collectives checked and agreed */
  uint64_t list_ord;      /* the list call (dist_coll_list_call) whose
                             pieces run now, checked at its first (its ord) */
  uint64_t hist;
  wpg_fp *all;            /* size records of the last exchange */
  wpg_fp *prev;           /* the round before (for absent members) */
  bool have_prev;
  wpg_ident *ident;       /* size entries */
  wpg_site_cache sites;
  char last_desc[160];    /* this rank's last collective, described */
  /* Asynchronous checks (async.c): works whose exchange is posted, in issue
   * order, and the thread that finishes them. The issuing side owns
   * coll_count, hist and sites; the checking side owns all, prev and
   * have_prev while pending > 0. */
  pthread_mutex_t qlock;
  pthread_cond_t qcv;
  struct wpg_pending *head, *tail;
  _Atomic int pending;
  bool stop, have_thread, q_init;
  /* The program destroys the group (fini): a check not yet handed on is
   * of a work it never waited for, and fails there (backend.h: fini fails
   * what is pending), whatever its exchange found. Under qlock. */
  bool closing;
  pthread_t thread;
  /* A failed async check rewinds the issuing side's count and history to
   * before it (as a failed sync check never counts), so that the group
   * goes on for calls that agree. Set by the checking thread. */
  _Atomic bool rewind;
  uint64_t rewind_count, rewind_hist;
  /* fini: the first collective whose check the destroy failed pending
   * (never waited), 0 none; wpg_leave records it. */
  uint64_t pending_from;
  struct wpg *next_live;  /* wpg.c's list of live checking groups */
  /* Call sites of agreed collectives (module << 48 ^ offset), to tell in a
   * tied disagreement which side took a branch never seen before. Written
   * by whichever side holds all/prev (see above). */
  uint64_t sites_seen[32];
  int n_sites_seen;
  /* This rank's last record from each call site (its content: the fields
   * compared, not its place in the sequence), for wpg_fp.site_was. The
   * caller's thread only: sync and async checks both make their record at
   * issue. */
  struct { uint64_t site, content; } site_last[64];
  int n_site_last, site_last_next;
  /* dist__pg_non_member_calls as of this rank's last call on the group
   * (the caller's thread, at issue, as site_last). */
  uint64_t nm_seen;
  /* The check compares a digest (digest.c): after an agreed round only this
   * rank's record is known, with whether every member's call site and
   * sequence number were the same as its own (then theirs are known too). */
  wpg_fp last_mine;
  bool last_site_same, last_seq_same;
  /* While a disagreement is reported: every member's agreed call sites
   * (the union of their own lists), which suspect() consults. */
  const uint64_t *seen_all;
  int n_seen_all;
} wpg;

/* --- fingerprint.c --- */
/* Fills fp from c (group ranks translated to global through w). */
void wpg_fp_make(const wpg *w, const dist_coll *c, wpg_fp *fp);
/* The first field in which a differs from b (WPG_F_NONE when they agree). */
wpg_field wpg_fp_diff(const wpg_fp *a, const wpg_fp *b);
/* Sets fp->site_was from this rank's last call from fp's site (located
 * first) and remembers this one. */
void wpg_fp_site_history(wpg *w, wpg_fp *fp);
/* Notes in fp the last call this rank made on a group it is not a member
 * of, when it made one since its last call on w (located as a call site). */
void wpg_fp_non_member(wpg *w, wpg_fp *fp);
/* Whether all n records agree (and the all_to_all sums cancel). */
bool wpg_fp_agree(const wpg_fp *all, int n);
uint64_t wpg_fp_hash(const wpg_fp *fp);
const char *wpg_field_name(wpg_field f);

/* --- callsite.c --- */
/* The offset and module of addr (cached in sc). */
void wpg_site_locate(wpg_site_cache *sc, const void *addr, uint64_t *off, uint32_t *module);
/* "file.c:88 in fn()" (or "fn+0x1f in libx.so", or "?") for an address in
 * this process, or for (module, off) from another process of the job. */
void wpg_site_resolve(const void *addr, char *buf, size_t len);
void wpg_site_resolve_off(uint32_t module, uint64_t off, char *buf, size_t len);
/* This thread's stack from the public call at caller down, one frame a
 * line, indented. */
void wpg_site_stack(const void *caller, char *buf, size_t len);
bool wpg_show_stacks(void);

/* --- report.c --- */
typedef struct wpg_row {
  int global, grank;
  int cls;             /* rows with equal cls compare equal (fingerprint) */
  const char *text;    /* what the line shows */
  const char *site;    /* where the rank called from (a "called from" line), or NULL */
  const char *extra;   /* appended below the line (a stack), or NULL */
  int suspect;         /* breaks a tie against its class (report.c): 0 no,
                          1 weak, 2 strong (exchange.c suspect) */
} wpg_row;
/* The global ranks of the rows outside the majority's class (the ranks a
 * report marks "<- ... differs") into out (n entries); returns how many. */
int wpg_report_culprits(const wpg_row *rows, int n, int *out);
/* Writes the rows grouped by text, ranges compressed, the minority marked
 * "<- F differs" with the field F that field_of(cls, majority cls) names
 * (NULL: none), then one "called from" line grouping the ranks by site. */
void wpg_report_rows(char *buf, size_t len, size_t *off, const wpg_row *rows, int n,
                     const char *(*field_of)(void *arg, int cls, int major), void *arg);
/* The field the first row outside the majority differs in (NULL: none). */
const char *wpg_report_field(const wpg_row *rows, int n,
                             const char *(*field_of)(void *arg, int cls, int major), void *arg);
/* A group's description, or its name when it has none ("tp", "g2"). */
const char *wpg_group_label(const dist_pg_info *i);
/* "group 0 (default, 4 ranks)" (the name when there is no description). */
void wpg_group_name(const dist_pg_info *i, char *buf, size_t len);
void wpg_appendf(char *buf, size_t len, size_t *off, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Fails the call on every entering rank with rc and report: the message on
 * the group, the event, one log line (full on the lowest rank), the cause
 * posted to the job's store for distrun. */
int wpg_fail(wpg *w, int rc, const char *report, int lowest_global,
             const dist_cause_info *info);
/* Records a failure's message: on the group, or in the buffer wpg_capture
 * set on this thread (NULL: back to the group). Returns rc. */
int wpg_set_error(wpg *w, int rc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void wpg_capture(char *buf, size_t len);

/* --- digest.c --- */
/* The check's exchange is one all_reduce (MIN, int64) of a fixed-size
 * digest of the record: a hash of the compared fields, the call site and
 * the sequence number, each with its complement, so that the minimum of
 * both says whether every member had the same (min == ~min(~v)). Only when
 * the hashes differ (or for all_to_all, whose sizes must cancel out) do the
 * members exchange their whole records, through the job's store; so a
 * rank receives the same number of bytes per check whatever the group's
 * size, and a report is as precise as with every record gathered. */
#define WPG_DIGEST_N 6
void wpg_digest_make(const wpg_fp *fp, int64_t d[WPG_DIGEST_N]);
/* After the digest's all_reduce (red): agreed (DIST_OK, the round noted),
 * or the members' records exchanged and the disagreement reported. */
int wpg_decide(wpg *w, const dist_coll *c, const wpg_fp *me, const int64_t *red,
               bool caller_thread);
/* The record of member r in the last agreed round, as far as it is known
 * (its call site and number when every member's were the same); false
 * when there was none. */
bool wpg_last_of(const wpg *w, int r, wpg_fp *out);
/* Bytes the checks of this process received (digests, and records on a
 * disagreement): what the test of a check's cost counts. */
uint64_t dist__wpg_rx_bytes(void);
void wpg_rx_add(uint64_t n);

/* --- exchange.c --- */
int wpg_check_coll(wpg *w, const dist_coll *c);
/* The records of the members (all, n of them) disagree: the report, from
 * the details every member then publishes in the job's store (its call
 * described and its call site resolved in its own process; its stack too
 * when caller_thread, i.e. not on the checking thread of an async call). */
typedef struct wpg_detail wpg_detail;
int wpg_report_desync(wpg *w, const dist_coll *c, const wpg_fp *all, bool caller_thread);
uint64_t wpg_roll(uint64_t h, uint64_t v);

/* After an agreed exchange (records all): remembers their call sites. */
void wpg_sites_note(wpg *w, const wpg_fp *all);

/* --- async.c --- */
/* Starts the check of an asynchronous operation: posts the record on the
 * helper and returns; the comparison and the inner operation follow on the
 * group's checking thread, which completes wk. */
int wpg_check_async(wpg *w, const dist_coll *c, dist_work *wk);
/* Waits until every asynchronous operation issued on w has been checked
 * and handed to the inner group (a synchronous call must not overtake). */
void wpg_drain(wpg *w);
/* Applies a rewind the checking thread asked for (issuing side). */
void wpg_rewind(wpg *w);
/* The group is being destroyed: checks not yet handed on fail (fini).
 * Returns the collective count of the first of them, 0 none. */
uint64_t wpg_async_close(wpg *w);
/* Stops the checking thread (pending checks end first; abort the helper
 * before, to end them at once). */
void wpg_async_stop(wpg *w);
/* Makes w's helper group (a collective among its members) once; on failure
 * the reason is in why. */
int wpg_helper_ensure(wpg *w, char *why, size_t len);

/* --- absent.c --- */
/* How long the arrived ranks wait for each other's word after a failed
 * exchange; the exchange itself waits the group's timeout minus this, so
 * the whole check ends within the group's timeout. */
/* The operation a user called, which the checks compare and reports name:
 * a byte-blob collective's pieces (its size exchange, its data) are its
 * own call (BROADCAST_BYTES), not the BROADCAST they run as. A
 * point-to-point piece keeps its kind (the pair checks match SEND with
 * RECV). (A list entry's piece never reaches a check: its call does,
 * wpg.c.) */
static inline dist_op_kind wpg_kind(const dist_coll *c) {
  return (c->flags & DIST_COLL_PIECE) && !dist_op_is_p2p(c->part_of) ? c->part_of : c->kind;
}

static inline int64_t wpg_grace_ms(int64_t timeout_ms) {
  int64_t g = timeout_ms / 4;
  return g > 2000 ? 2000 : g < 1 ? 1 : g;
}
/* After a failed exchange (timeout, lost peer): names who did not arrive. */
/* count: the collective count the failed exchange was for. A member that
 * left the group (wpg_leave) is named as a desync: the counts parted. */
int wpg_absent(wpg *w, const dist_coll *c, uint64_t count, int rc, const char *why);
/* Leaves this rank's count and last operation in the job's store (group
 * destroyed, process exiting). Caller thread; best effort. */
void wpg_leave(wpg *w, bool exiting);

/* --- agree.c --- */
int wpg_agree_init(const dist_pg_info *def);
/* How many times this process has initialised (store keys carry it). */
int wpg_generation(void);

/* --- order.c --- */
/* The precreate hook: the members' views of a new group must agree. */
int wpg_order_check(void *arg, const dist_pg_info *planned);
/* Core's look at a creation this rank makes as no member of its list
 * (dist__group_outside_fn): its view is one of the creation's too. */
int wpg_order_outside(const dist_pg_info *planned);

#endif
