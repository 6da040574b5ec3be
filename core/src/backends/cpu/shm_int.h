/* shm_int.h - what the shared-memory engine's files share: the segment
 * layout, the engine state, and the hot-path helpers (post, wait).
 *
 * DESIGN. The segment holds a header and one region per rank:
 *
 *   ctl      sleeper count and futex word (wake-ups), the failure word
 *            and message (a rank that fails mid-operation says so here),
 *            the rank's pid
 *   hdr[D]   the polled lines, SHM_DEPTH of them, step g on line
 *            g % SHM_DEPTH: the step counter, the descriptor of the
 *            operation that starts at that step and up to SHM_INLINE
 *            bytes of payload (small collectives)
 *   info     per step (SHM_HIST = 2 x SHM_DEPTH of them), the user's
 *            sequence number (messages only)
 *   hist     per step, a copy of the descriptor, kept twice as long as
 *            the polled line keeps it (deferred checks, below)
 *   cnt[2]   per parity, 3 x N words: element counts this rank sends to
 *            and expects from each rank (all_to_all), then the addresses
 *            of its source buffers (single-copy transfers, shm_cma.c)
 *   data[2]  per parity, slot bytes of payload staging
 *   red[2]   per parity, red bytes: reduced blocks (all_reduce, reduce)
 *            or a staged own contribution (reduce_scatter, aliased)
 *
 * Steps. Every collective is a sequence of steps that every rank runs in
 * lock step: write this rank's outgoing data for the step into buffers
 * of the step's parity, post the step, wait until every rank posted it,
 * then read what the step delivered. A global step counter g (the same on
 * every rank, because every rank runs the same number of steps per
 * operation) names the parity p = g & 1 of the buffers and the polled
 * line g % SHM_DEPTH, and posting g stores g + 1 into that line's ctr (a
 * line is reused only after its parity was, so the rule below covers the
 * lines too). Why two parities are enough: a rank writes parity p at step
 * g only after the wait of step g - 1, which every rank posts after it has
 * finished reading step g - 2, the previous use of parity p. So no buffer
 * needs a second flag, across operations too.
 *
 * The first step of an operation carries the descriptor (the line's key, and
 * cnt[p] for all_to_all); after its wait every rank checks every other
 * rank's descriptor against its own, so all ranks reach the same verdict:
 * either every rank proceeds or every rank fails the operation at that
 * step (DIST_E_INVAL), and the step counters stay in step, so the group
 * stays usable after a mismatch. A failure after that point (timeout,
 * lost peer, abort) leaves ranks out of step: the group is marked broken
 * and the failure is published in ctl, so the other ranks fail promptly
 * instead of waiting for their deadline.
 *
 * Deferred waits. The rule above only needs "every rank posted step
 * g - 1" before a rank writes step g; waiting for it at the end of step
 * g - 1 is one way to get it, checking it at the start of the next
 * operation is another. A broadcast or scatter of one staged step (small;
 * shm_copy.c) takes the second way: the root stages, posts and returns at
 * once, and its readers wait for the root only. Such a rank records the
 * step whose full wait it skipped (lazy_g); dist__shm_run settles it
 * before the next operation writes anything: it waits for every rank to
 * post that step and, on the root, compares their descriptors with its
 * own. A reader that disagreed has already failed its operation; the
 * root's next operation then fails with DIST_E_DESYNC naming the earlier
 * one, and the group is marked broken (the readers' next operations fail
 * with the root's message instead of waiting): ranks that already ran
 * later operations cannot be brought back in step.
 * Deeper for the smallest broadcasts. A broadcast that fits the root's
 * polled line (SHM_INLINE bytes) touches no parity buffer, only line
 * g % SHM_DEPTH, so its root needs only "every rank posted step
 * g - SHM_DEPTH + 1" (the line's previous user has been read) and may run
 * SHM_DEPTH - 1 broadcasts ahead of its slowest reader (shm_settle_deep):
 * back to back, a queue instead of a two-deep pipeline (0.28 -> 0.12 us a
 * 4-byte broadcast here, against Open MPI's 0.10-0.12). Its descriptor
 * checks wait as long: before the root writes step q + SHM_DEPTH - 1 it
 * compares the readers' descriptors of its deferred step q. Those are
 * read from hist, not from the polled lines: a reader that became a root
 * itself may have reused its line of step q already, but reaching step
 * q + SHM_HIST takes it past the step before which the root compared.
 * The price: the root of a small broadcast hears of a reader that
 * disagreed, or died, at its next operation of another kind, or within
 * SHM_DEPTH - 1 more small broadcasts; its message names the earlier call.
 * Without a next operation the group's destroy compares what is still
 * owed (dist__shm_settle_final, waiting a bounded moment for the readers).
 * s->known (every rank posted every step below it) makes the common case
 * two compares: a completed operation that waited for everyone sets it,
 * and a settle that had to look learns how far each rank got.
 *
 * Files: shm.c (lifetime, dispatch, descriptor check, streaming copies),
 * shm_settle.c (deferred waits and checks),
 * shm_seg.c (segment and its parameters), shm_wait.c (waiting, futex,
 * pidfds, failures), shm_reduce.c, shm_copy.c, shm_a2a.c (the
 * collectives), shm_cma.c (single-copy transfers between processes). */
#ifndef DIST_CPU_SHM_INT_H
#define DIST_CPU_SHM_INT_H

#include <stdatomic.h>

#include "shm.h"

#define SHM_MAGIC 0x3130736d74736964ull /* "distsm01" */
#define SHM_VERSION 1u
#define SHM_LINE 128 /* two cache lines: no false sharing through the adjacent-line prefetcher */
#define SHM_FAILMSG 512
#define SHM_INLINE 32 /* payload bytes that travel in the step's own cache line */
#define SHM_DEPTH 8   /* polled lines per rank: how far a small broadcast's root may run ahead */
#define SHM_L(g) ((g) & (SHM_DEPTH - 1)) /* the polled line of step g */
#define SHM_HIST (2 * SHM_DEPTH) /* steps whose descriptors stay readable (hist) */
#define SHM_H(g) ((g) & (SHM_HIST - 1))

/* Fields that must agree between ranks (zero where a kind has none), so
 * the common case is one memcmp per peer (shm_key_same). */
typedef struct shm_key {
  uint8_t kind;
  uint8_t dtype;
  uint8_t redop;
  uint8_t part_of;      /* a piece: its call's kind + 1 (dist__cpu_part_of),
                           else 0. A list entry's piece (root its entry) is
                           compared as that call; a blob's piece compares
                           as its own kind, the byte only names its call */
  int32_t root;
  int64_t count;        /* elements (per rank; 0 for the all_to_all kinds) */
  uint64_t scalar_bits; /* PREMUL_SUM scalar, bit for bit */
} shm_key;

/* shm_key.part_of for c. */
static inline uint8_t shm_part_of(const dist_coll *c) {
  return dist__cpu_part_of(c);
}

/* The part of k's part_of that is compared: a list entry's piece's call,
 * 0 for a blob's piece or a call of its own. */
static inline uint8_t shm_listed(const shm_key *k) {
  return dist__cpu_part_listed(k->part_of) ? k->part_of : 0;
}

/* Whether two ranks' keys agree: every byte, but a blob's piece's call
 * (a piece runs and compares as its own kind, backend.h). The common
 * case, equal keys, is one memcmp. */
static inline bool shm_key_same(const shm_key *a, const shm_key *b) {
  if (__builtin_expect(memcmp(a, b, sizeof *a) == 0, 1))
    return true;
  if (a->part_of == b->part_of || shm_listed(a) || shm_listed(b))
    return false;
  shm_key x = *a;
  x.part_of = b->part_of;
  return memcmp(&x, b, sizeof x) == 0;
}

/* The kind a key is compared as: a list entry's piece, its call's. */
static inline int shm_call_kind(const shm_key *k) {
  return shm_listed(k) ? k->part_of - 1 : k->kind;
}

/* The operation a key was to the user (labels, reports): a piece's call,
 * a list entry's or a blob's, else the key's kind. */
static inline const char *shm_op_name(const shm_key *k) {
  return dist_op_name((dist_op_kind)dist__cpu_part_call(k->part_of, k->kind));
}

/* The line a waiter spins on. Everything a small collective needs is in
 * it: the counter, the descriptor and up to SHM_INLINE payload bytes, so
 * a 4-byte all_reduce moves one cache line each way. The descriptor is
 * rewritten only when it changes: each store into a line that a peer is
 * polling can cost a transfer of the line. */
typedef struct shm_hdr {
  _Atomic uint64_t ctr; /* last step posted on this parity, plus one */
  shm_key key;
  uint8_t inl[SHM_INLINE];
  char pad[SHM_LINE - 8 - sizeof(shm_key) - SHM_INLINE];
} shm_hdr;

/* Per parity, what only messages read (kept off the polled line). */
typedef struct shm_info {
  uint64_t seq[SHM_HIST]; /* the user's sequence number of the operation, by step */
} shm_info;

/* Per step, the descriptor this rank published (a copy of the polled
 * line's, kept twice as long: a deferred root compares its readers'
 * after they may have reused the line; see shm_settle_deep). */
typedef struct shm_hist {
  shm_key key[SHM_HIST];
} shm_hist;

typedef struct shm_ctl {
  _Atomic uint32_t wake;     /* futex word: bumped when sleepers may wait */
  _Atomic uint32_t sleepers; /* ranks sleeping on wake */
  _Atomic int32_t fail_code; /* 0, -1 while the message is written, or a status */
  int32_t pid;
  uint64_t probe;            /* a known word, read by peers to test CMA */
  uint64_t probe_addr;       /* its address in this rank's process */
  _Atomic int32_t cpu;       /* the CPU this rank last waited on, plus one (0: unknown) */
  char pad[SHM_LINE - 36];
  char fail_msg[SHM_FAILMSG];
} shm_ctl;

/* The segment header (offset 0): written by rank 0 before it publishes
 * the name, read and checked by everyone else. Every parameter that
 * chooses an algorithm lives here, so all ranks choose alike. */
typedef struct shm_seg {
  uint64_t magic;
  uint32_t version;
  uint32_t nranks;
  uint64_t seg_bytes;
  uint64_t region_bytes; /* stride between rank regions */
  uint64_t slot_bytes;   /* data[p] */
  uint64_t red_bytes;    /* red[p] */
  uint64_t cnt_off, data_off, red_off; /* offsets inside a region */
  uint64_t small_allreduce; /* largest all_reduce/reduce done in one step */
  uint64_t pipe_steps, pipe_min; /* shm_chunk */
  uint64_t cma_min, cma_max;     /* piece sizes that go single-copy (0: never) */
  uint64_t bcast_direct_max;     /* broadcasts single-copy up to this (shm_cma.c) */
  _Atomic uint32_t mapped;
} shm_seg;

_Static_assert(sizeof(shm_hdr) == SHM_LINE, "shm_hdr is one polled block");
_Static_assert(sizeof(shm_key) == 24, "shm_key is packed");
_Static_assert(sizeof(shm_info) % SHM_LINE == 0, "shm_info is whole blocks");
_Static_assert((SHM_DEPTH & (SHM_DEPTH - 1)) == 0, "SHM_DEPTH is a power of two");

/* One rank's region as this process sees it. */
typedef struct shm_peer {
  shm_ctl *ctl;
  shm_hdr *hdr[SHM_DEPTH];
  shm_info *info;
  shm_key *hist;
  int64_t *cnt[2];
  uint8_t *data[2];
  uint8_t *red[2];
} shm_peer;

struct dist__shm {
  dist__cpu_group *g;
  int rank, size;
  shm_seg *seg;
  size_t bytes;
  shm_peer *peer;      /* size entries */
  uint64_t step;       /* next global step */
  uint64_t op_base;    /* first step of the operation in progress */
  shm_key key[SHM_HIST];  /* what this rank published for step g, at SHM_H(g) */
  shm_key lkey[SHM_DEPTH]; /* what each of its polled lines holds as key */
  size_t slot, red;    /* bytes of data[p] and red[p] */
  size_t small_ar;     /* bytes */
  size_t pipe_steps;   /* a transfer is cut into about this many steps ... */
  size_t pipe_min;     /* ... of at least this many bytes */
  int *pidfd;          /* size entries, -1 where none */
  const void **srcs;   /* scratch: reduction sources */
  int64_t *scratch;    /* scratch: 5 x size words (all_to_all) */
  int64_t *cnt_mirror; /* 2 x 3 x size: what this rank last published in cnt[p] */
  int64_t spin_ns, yield_ns;
  bool fits;           /* each rank on the host has a CPU (cpu_fit.c) */
  int64_t moved_ns;    /* when this rank last moved off a peer's CPU (shm_wait.c) */
  bool light_post;     /* membarrier registered: posts need no fence */
  bool cma;            /* every rank can read every peer (shm_cma.c) */
  size_t cma_min, cma_max;
  size_t bcast_direct_max;
  bool stream;         /* this operation copies out with streaming stores */
  size_t stream_min;   /* from this many output bytes on (DIST_SHM_STREAM_KB) */
  int64_t last_poll_ns; /* last pidfd poll */
  /* Deferred waits (see DESIGN above). lazy_g: the last skipped step
   * plus one (0: none). known: every rank has posted every step below it.
   * pend[l]: a deferred root step on line l whose readers' descriptors
   * are still to be compared, plus one (0: none); pend_seq[l] its user
   * sequence number; pend_lo the oldest of them plus one (0: none).
   * settle_g: the step dist__shm_settle_to waits for, plus one, while it
   * waits (its messages name that operation). */
  uint64_t lazy_g;
  uint64_t known;
  uint64_t pend[SHM_DEPTH];
  uint64_t pend_seq[SHM_DEPTH];
  uint64_t pend_lo;
  uint64_t settle_g;
  bool at_destroy; /* dist__shm_settle_final runs: its reports name no later call */
};

/* --- steps (hot path) ---------------------------------------------------- */

/* Bumps rank r's futex word and wakes whoever sleeps on it (any thread). */
void dist__shm_wake_rank(dist__shm *s, int r);

/* Posts step g: stores g + 1 and wakes sleepers only when there are any.
 * The sleeper protocol needs the store ordered before the load of
 * sleepers (StoreLoad). With membarrier registered (s->light_post) the
 * sleeper pays for that ordering with MEMBARRIER_CMD_GLOBAL_EXPEDITED
 * before it sleeps, so the hot path is a plain store and a plain load: a
 * seq_cst store would stall here until the line's invalidation reaches
 * the peer, serialising two cache-line transfers per step. */
static inline void shm_post(dist__shm *s, uint64_t g) {
  shm_peer *me = &s->peer[s->rank];
  if (__builtin_expect(s->light_post, 1)) {
    atomic_store_explicit(&me->hdr[SHM_L(g)]->ctr, g + 1, memory_order_release);
    atomic_signal_fence(memory_order_seq_cst);
  } else {
    atomic_store_explicit(&me->hdr[SHM_L(g)]->ctr, g + 1, memory_order_seq_cst);
  }
  if (__builtin_expect(atomic_load_explicit(&me->ctl->sleepers, memory_order_relaxed) != 0, 0))
    dist__shm_wake_rank(s, s->rank);
}

static inline bool shm_reached(const dist__shm *s, int j, uint64_t g) {
  return atomic_load_explicit(&s->peer[j].hdr[SHM_L(g)]->ctr, memory_order_acquire) > g;
}

/* The slow part of a wait: spin, yield, sleep; deadline, abort, failures
 * and dead peers. Waits for every rank from j_first on. */
int dist__shm_wait_slow(dist__shm *s, dist__cpu_op *op, uint64_t g, int j_first);

/* Of ranks a and b, whose keys ka and kb at step g differ and which no
 * majority tells apart, the one its own kept history marks as the odd one
 * (shm.c history_marks: a key changed since its last operation of that
 * kind, a kind repeated that it never made twice in a row, a kind new to
 * it); -1 when both or neither. */
int dist__shm_pair_odd(const dist__shm *s, int a, const shm_key *ka, int b, const shm_key *kb,
                       uint64_t g);

/* The house report of a disagreement on one step between rank i's key x
 * and rank j's y, j the odd one (report.h), appended at *off; seq is the
 * step's operation number, which both sides share. */
void dist__shm_describe_odd(const dist__shm *s, int i, const shm_key *x, int j,
                            const shm_key *y, uint64_t seq, char *buf, size_t len, size_t *off);

/* Waits for rank j alone (the readers of a deferred step). */
int dist__shm_wait_one(dist__shm *s, dist__cpu_op *op, uint64_t g, int j);

/* Whether every rank posted step g by deadline_ms, waiting without failing
 * anything (no failure published, nothing marked): false at the deadline,
 * when a rank that has not posted is gone, or when the group failed. */
bool dist__shm_await_posted(dist__shm *s, uint64_t g, int64_t deadline_ms);

/* Waits until every other rank posted step g. */
static inline int shm_wait_all(dist__shm *s, dist__cpu_op *op, uint64_t g) {
  for (int j = 0; j < s->size; j++)
    if (j != s->rank && !shm_reached(s, j, g))
      return dist__shm_wait_slow(s, op, g, j);
  return DIST_OK;
}

/* DIST_OK, or the status a peer published when it failed (this rank
 * then fails the same way, naming it). */
int dist__shm_peer_failed(dist__shm *s, dist__cpu_op *op);

/* A failure that leaves the ranks out of step: marks the group broken,
 * publishes the failure for the peers, wakes them. Returns rc. */
int dist__shm_fail(dist__shm *s, dist__cpu_op *op, int rc, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* --- descriptors --------------------------------------------------------- */

/* Starts an operation: its first global step. */
static inline uint64_t shm_begin(dist__shm *s) {
  s->op_base = s->step;
  return s->step;
}

/* Publishes this rank's descriptor for the operation starting at step g
 * (before that step's post). */
static inline void shm_publish(dist__shm *s, const dist__cpu_op *op, uint64_t g,
                               const shm_key *k) {
  shm_peer *me = &s->peer[s->rank];
  /* Compared with a private copy: even reading the polled line here, while
   * a peer spins on it, costs a transfer (measured: +0.1 us a step). */
  if (memcmp(&s->lkey[SHM_L(g)], k, sizeof *k) != 0) {
    s->lkey[SHM_L(g)] = *k;
    me->hdr[SHM_L(g)]->key = *k;
  }
  if (memcmp(&s->key[SHM_H(g)], k, sizeof *k) != 0) {
    s->key[SHM_H(g)] = *k;
    me->hist[SHM_H(g)] = *k;
  }
  me->info->seq[SHM_H(g)] = op->c->seq;
}

/* Where rank j stages step g's `bytes`: the step's polled line itself
 * when it fits, else the slot of the step's parity. Writer and readers
 * pass the same (agreed) byte count. */
static inline uint8_t *shm_buf(const dist__shm *s, int j, uint64_t g, size_t bytes) {
  return bytes <= SHM_INLINE ? s->peer[j].hdr[SHM_L(g)]->inl : s->peer[j].data[g & 1];
}
/* After the wait of the first step: DIST_OK when every rank agrees, else
 * DIST_E_DESYNC with a message naming a differing rank. */
int dist__shm_check(dist__shm *s, dist__cpu_op *op, uint64_t g);
/* The same against rank j alone (a reader of a deferred step, j its root). */
int dist__shm_check_one(dist__shm *s, dist__cpu_op *op, uint64_t g, int j);
/* The all_to_all count matrix check (cnt[p] of every rank). */
int dist__shm_check_counts(dist__shm *s, dist__cpu_op *op, uint64_t g);

static inline int shm_first_check(dist__shm *s, dist__cpu_op *op, uint64_t g) {
  const shm_key *mine = &s->key[SHM_H(g)];
  for (int j = 0; j < s->size; j++)
    if (j != s->rank && !shm_key_same(&s->peer[j].hdr[SHM_L(g)]->key, mine))
      return dist__shm_check(s, op, g);
  return DIST_OK;
}

/* Post, wait and (first step) check: the common step. */
static inline int shm_step(dist__shm *s, dist__cpu_op *op, uint64_t g, bool first) {
  shm_post(s, g);
  int rc = shm_wait_all(s, op, g);
  if (__builtin_expect(rc != DIST_OK, 0))
    return rc;
  return first ? shm_first_check(s, op, g) : DIST_OK;
}

/* --- deferred waits -------------------------------------------------------- */

/* Records that this rank skipped the full wait of step g (root: the
 * others' descriptors of that step are still to be compared). */
static inline void shm_defer(dist__shm *s, const dist__cpu_op *op, uint64_t g, bool root) {
  s->lazy_g = g + 1;
  if (root) {
    s->pend[SHM_L(g)] = g + 1;
    s->pend_seq[SHM_L(g)] = op->c->seq;
    if (!s->pend_lo)
      s->pend_lo = g + 1;
  }
}

/* The slow part of the settles below (shm_settle.c): waits until every rank
 * posted step t, then compares the descriptors of every deferred root
 * step they have all posted. */
int dist__shm_settle_to(dist__shm *s, dist__cpu_op *op, uint64_t t);

/* Before an operation writes anything: every skipped wait. The common
 * case (nothing skipped) is one compare. */
static inline int shm_settle(dist__shm *s, dist__cpu_op *op) {
  if (__builtin_expect(s->lazy_g == 0, 1))
    return DIST_OK;
  int rc = dist__shm_settle_to(s, op, s->lazy_g - 1);
  if (rc == DIST_OK)
    s->lazy_g = 0;
  return rc;
}

/* Before a deferred step g that stages in its polled line alone (a small
 * broadcast): line g's previous use, step g - SHM_DEPTH, must be read by
 * every rank (they have posted step g - SHM_DEPTH + 1), and a deferred
 * root step that old must be compared before its readers reuse its line.
 * Back to back, this is two compares on all but one call in SHM_DEPTH - 2. */
static inline int shm_settle_deep(dist__shm *s, dist__cpu_op *op, uint64_t g) {
  if (g + 1 < SHM_DEPTH)
    return DIST_OK;
  uint64_t t = g + 1 - SHM_DEPTH;
  if (__builtin_expect(s->known > t && (s->pend_lo == 0 || s->pend_lo - 1 > t), 1))
    return DIST_OK;
  return dist__shm_settle_to(s, op, t);
}

/* --- helpers --------------------------------------------------------------- */

/* Rank r's global rank, for messages (r itself when out of range). */
static inline int64_t shm_global_rank(const dist__shm *s, int r) {
  return r >= 0 && r < s->size ? s->g->peers[r].global_rank : r;
}

static inline size_t shm_min(size_t a, size_t b) { return a < b ? a : b; }
/* Bytes per step for a transfer of `bytes` from one writer, at most cap:
 * mid-size transfers still take a few steps so that the writer's copy in
 * and the readers' copy out overlap (a one-step transfer runs them one
 * after the other), large ones use the whole slot. Ranks that agree on
 * the size agree on the chunk. */
static inline size_t shm_chunk(const dist__shm *s, size_t bytes, size_t cap) {
  size_t c = (bytes / s->pipe_steps + 4095) & ~(size_t)4095;
  c = c < s->pipe_min ? s->pipe_min : c;
  return c < cap ? c : cap;
}

/* memcpy that tolerates the NULL buffers of empty tensors. */
static inline void shm_copy(void *dst, const void *src, size_t len) {
  if (len)
    memcpy(dst, src, len);
}
static inline size_t shm_ceil_div(size_t a, size_t b) { return (a + b - 1) / b; }
/* Index of rank j's sub-slot in rank k's data (all_to_all, reduce_scatter):
 * the N - 1 other ranks in order after k. */
static inline int shm_sub(int k, int j, int n) { return (j - k - 1 + n) % n; }

/* Copies into user memory with streaming (non-temporal) stores when
 * s->stream is set for the operation: large outputs are not read back
 * soon, and skipping the read-for-ownership of every destination line
 * saves a third of the memory traffic (x86-64; memcpy elsewhere). Call
 * dist__shm_stream_done before the operation returns. */
void dist__shm_copy_stream(void *dst, const void *src, size_t len);
void dist__shm_stream_done(void);

static inline void shm_copy_out(const dist__shm *s, void *dst, const void *src, size_t len) {
  if (len >= 4096 && s->stream)
    dist__shm_copy_stream(dst, src, len);
  else if (len)
    memcpy(dst, src, len);
}

/* A rank's own piece, input to output: they may be the same buffer (in
 * place) or, by the user's choice, overlap. */
static inline void shm_copy_own(const dist__shm *s, void *out, const void *in, size_t len) {
  uintptr_t o = (uintptr_t)out, i = (uintptr_t)in;
  if (!len || out == in)
    return;
  if (o < i + len && i < o + len)
    memmove(out, in, len);
  else
    shm_copy_out(s, out, in, len);
}

/* Starts using streaming copies for an operation that writes `bytes` of
 * user memory on this rank, when that is large (s->stream_min bytes). */
static inline void shm_stream_begin(dist__shm *s, size_t bytes) {
  s->stream = bytes >= s->stream_min;
}

static inline void shm_stream_end(dist__shm *s) {
  if (s->stream)
    dist__shm_stream_done();
  s->stream = false;
}

/* The collectives (one file per family). */
int dist__shm_all_reduce(dist__shm *s, dist__cpu_op *op);
int dist__shm_reduce(dist__shm *s, dist__cpu_op *op);
int dist__shm_reduce_scatter(dist__shm *s, dist__cpu_op *op);
int dist__shm_broadcast(dist__shm *s, dist__cpu_op *op);
int dist__shm_barrier(dist__shm *s, dist__cpu_op *op);
int dist__shm_all_gather(dist__shm *s, dist__cpu_op *op);
int dist__shm_gather(dist__shm *s, dist__cpu_op *op);
int dist__shm_scatter(dist__shm *s, dist__cpu_op *op);
int dist__shm_all_to_all(dist__shm *s, dist__cpu_op *op);

/* Single-copy transfers (shm_cma.c). prepare fills this rank's probe
 * before the segment exchange; agree (a collective: the engine's first
 * step) sets s->cma on every rank alike; read pulls len bytes at peer j's
 * address src (a failure fails the operation and breaks the group). */
void dist__shm_cma_prepare(dist__shm *s);
int dist__shm_cma_agree(dist__shm *s, int64_t deadline_ms, dist__errbuf *err);
int dist__shm_cma_read(dist__shm *s, dist__cpu_op *op, int j, void *dst, uint64_t src,
                       size_t len);
/* Whether a transfer of pieces of `bytes` goes single-copy. */
static inline bool shm_direct(const dist__shm *s, size_t bytes) {
  return s->cma && bytes >= s->cma_min && bytes <= s->cma_max;
}
/* This rank's published source addresses on parity p (N words). */
static inline uint64_t *shm_addrs(const dist__shm *s, int j, int p) {
  return (uint64_t *)(s->peer[j].cnt[p] + 2 * (size_t)s->size);
}

/* Registers this process for membarrier (sets s->light_post). */
void dist__shm_fence_init(dist__shm *s);

/* Segment setup (shm_seg.c). */
int dist__shm_seg_create(dist__shm *s, dist_store *store, int64_t deadline_ms,
                         dist__errbuf *err);
void dist__shm_seg_destroy(dist__shm *s);

#endif
