/* shm_wait.c - how a rank of the shared-memory engine waits for the
 * others, and how it fails when they do not come.
 *
 * DESIGN. The hot path (shm_int.h) is one acquire load per peer. When a
 * peer has not posted yet, the waiter goes through three phases:
 *   1. spin with a pause instruction (DIST_SHM_SPIN_US, default 50 us):
 *      a peer on its own core posts within a microsecond or so, and a
 *      blocking wake-up costs ~30 us on a virtual machine (a rank that
 *      finds its peer on its own CPU moves off it first: move_off);
 *   2. sched_yield (DIST_SHM_YIELD_US, default 200 us): lets a rank that
 *      shares our core run;
 *   3. sleep on the peer's futex word (FUTEX_WAIT on shared memory, not
 *      PRIVATE) in slices of 4 ms, growing to 32 ms in a long wait. A
 *      publisher bumps the word and calls FUTEX_WAKE only when the sleeper
 *      count says someone sleeps, so the hot path has no system call.
 * Phases 2 and 3 check, at least once per slice: this group's abort and
 * broken state, the failure words the peers publish, the deadline, and
 * (at most once per millisecond) the pidfds of the peers not yet arrived.
 * Sleeper protocol: the sleeper increments sleepers, reads the word, then
 * re-checks the counter before FUTEX_WAIT; the publisher stores the
 * counter, then reads sleepers (both seq_cst), so either the sleeper sees
 * the post or the publisher sees the sleeper and bumps the word. */
#include <inttypes.h>
#include <limits.h>
#include <linux/futex.h>
#include <linux/membarrier.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "shm_int.h"

#define SLEEP_SLICE_NS 4000000      /* 4 ms */
#define SLEEP_SLICE_MAX_NS 32000000 /* 32 ms */
#define POLL_EVERY_NS 1000000  /* pidfd poll at most every 1 ms */

static void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ __volatile__("yield");
#endif
}

static long futex(_Atomic uint32_t *addr, int op, uint32_t val, const struct timespec *ts) {
  return syscall(SYS_futex, (uint32_t *)addr, op, val, ts, NULL, 0);
}

void dist__shm_fence_init(dist__shm *s) {
#ifdef SYS_membarrier
  s->light_post = syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED, 0, 0) == 0;
#else
  s->light_post = false;
#endif
}

/* Orders every registered publisher's earlier counter store before its
 * later load of sleepers, as seen from here (membarrier(2)). False when
 * that is not possible: the caller then sleeps in shorter slices. */
static bool fence_publishers(void) {
#ifdef SYS_membarrier
  return syscall(SYS_membarrier, MEMBARRIER_CMD_GLOBAL_EXPEDITED, 0, 0) == 0;
#else
  return false;
#endif
}

void dist__shm_wake_rank(dist__shm *s, int r) {
  shm_ctl *c = s->peer[r].ctl;
  atomic_fetch_add_explicit(&c->wake, 1, memory_order_seq_cst);
  futex(&c->wake, FUTEX_WAKE, INT_MAX, NULL);
}

/* An aborted rank takes back every step it posted: it stores 0 (never
 * posted) into the counter of each of its polled lines. An abort (and a
 * destroy with operations pending) fails the operation on the peers too
 * (pg.h), but a peer that arrives after this rank posted the step and gave
 * up found the step posted on the hot path, which reads no failure word,
 * and completed the operation this rank failed: a never-waited all_reduce
 * passed on its peer or failed, by timing. A taken-back step sends the
 * waiter to the slow path, which reads the failure published before it.
 * A rank that had already passed the step completed before the abort. */
static void retract_posts(dist__shm *s) {
  for (int l = 0; l < SHM_DEPTH; l++)
    atomic_store_explicit(&s->peer[s->rank].hdr[l]->ctr, 0, memory_order_release);
}

/* Publishes this rank's failure once (the first status wins) and wakes
 * every sleeper, so the peers fail promptly. Any thread. */
static void publish_failure(dist__shm *s, int rc, const char *msg) {
  shm_ctl *c = s->peer[s->rank].ctl;
  int32_t zero = 0;
  if (atomic_compare_exchange_strong(&c->fail_code, &zero, -1)) {
    size_t n = shm_min(strlen(msg), sizeof c->fail_msg - 1);
    memcpy(c->fail_msg, msg, n);
    c->fail_msg[n] = '\0';
    atomic_store_explicit(&c->fail_code, rc, memory_order_release);
  }
  /* After the failure word: a peer that reads a taken-back counter reads
   * the failure too. Again from the waiter that fails for the abort (the
   * thread that posts), so a post racing the aborting thread's is taken
   * back as well. */
  if (rc == DIST_E_ABORTED)
    retract_posts(s);
  for (int r = 0; r < s->size; r++)
    dist__shm_wake_rank(s, r);
}

void dist__shm_wake_all(dist__shm *s) {
  if (!s || !s->seg)
    return;
  /* An aborted group leaves its peers waiting for this rank: tell them. */
  if (atomic_load_explicit(&s->g->aborted, memory_order_acquire)) {
    char msg[SHM_FAILMSG];
    snprintf(msg, sizeof msg, "group %s was aborted: %s", s->g->name, s->g->abort_reason);
    publish_failure(s, DIST_E_ABORTED, msg);
    return;
  }
  for (int r = 0; r < s->size; r++)
    dist__shm_wake_rank(s, r);
}

/* "rank 1 (host h, pid 42)" or "ranks 1 (...), 3 (...)" for the ranks
 * in [j, end) that have not posted step g. */
static void missing_names(dist__shm *s, uint64_t g, int j, int end, char *buf, size_t len,
                          int *count) {
  size_t off = 0;
  int n = 0;
  buf[0] = '\0';
  for (int k = j; k < end; k++) {
    if (k == s->rank || shm_reached(s, k, g))
      continue;
    char who[160];
    dist__cpu_peer_name(s->g, k, who, sizeof who);
    dist__appendf(buf, len, &off, "%s%s", n ? ", " : "", n ? who + 5 : who);
    n++;
  }
  if (n > 1) { /* "rank 1 (..), 3 (..)" -> "ranks 1 (..), 3 (..)" */
    memmove(buf + 5, buf + 4, strlen(buf + 4) + 1);
    buf[4] = 's';
  }
  *count = n;
}

/* While settling a deferred step (shm_int.h), the missing ranks have not
 * reached an earlier operation, which this rank completed without them:
 * " at BROADCAST #7 (an earlier call ...)", else "". */
static const char *earlier_op(const dist__shm *s, char *buf, size_t len) {
  buf[0] = '\0';
  if (s->settle_g) {
    /* Every step from s->known on is a deferred one-step operation, so
     * s->key and info->seq hold what this rank published for it. */
    int h = (int)SHM_H(s->settle_g - 1);
    snprintf(buf, len, " at %s #%" PRIu64 " (an earlier call, which this rank completed "
             "without waiting for it)",
             shm_op_name(&s->key[h]), s->peer[s->rank].info->seq[h]); /* a piece: its call */
  }
  return buf;
}

static int timed_out(dist__shm *s, dist__cpu_op *op, uint64_t g, int j, int end) {
  char who[1024], label[96], early[160];
  int n;
  missing_names(s, g, j, end, who, sizeof who, &n);
  dist__cpu_op_label(op->c, label, sizeof label);
  if (s->settle_g)
    return dist__shm_fail(s, op, DIST_E_TIMEOUT, "%s timed out after %" PRId64 " ms: %s %s not "
                          "arrived%s", label, op->c->timeout_ms, who, n > 1 ? "have" : "has",
                          earlier_op(s, early, sizeof early));
  if (g == s->op_base)
    return dist__shm_fail(s, op, DIST_E_TIMEOUT, "%s timed out after %" PRId64 " ms: %s %s not "
                          "arrived", label, op->c->timeout_ms, who, n > 1 ? "have" : "has");
  return dist__shm_fail(s, op, DIST_E_TIMEOUT, "%s timed out after %" PRId64 " ms: %s arrived "
                        "but stopped before step %" PRIu64 " of the operation", label,
                        op->c->timeout_ms, who, g - s->op_base + 1);
}

/* A peer published a failure: this rank fails too, with its status. */
static bool gone(dist__shm *s, int k) {
  if (s->pidfd[k] >= 0) {
    struct pollfd p = {.fd = s->pidfd[k], .events = POLLIN};
    return poll(&p, 1, 0) > 0 && (p.revents & (POLLIN | POLLHUP | POLLERR));
  }
  return false;
}

/* A rank that hears of a lost peer from another rank names the dead ones
 * to its own observers too (rare path: a pidfd poll per peer). */
static void report_dead_peers(dist__shm *s) {
  for (int k = 0; k < s->size; k++)
    if (k != s->rank && gone(s, k))
      dist__cpu_peer_lost(s->g, k, "the process exited");
}

int dist__shm_peer_failed(dist__shm *s, dist__cpu_op *op) {
  for (int k = 0; k < s->size; k++) {
    if (k == s->rank)
      continue;
    int code = atomic_load_explicit(&s->peer[k].ctl->fail_code, memory_order_acquire);
    if (code <= 0)
      continue;
    char who[160], label[96], msg[SHM_FAILMSG];
    memcpy(msg, s->peer[k].ctl->fail_msg, sizeof msg);
    msg[sizeof msg - 1] = '\0';
    /* The origin is named once (status.h): the peer's report with one
     * "seen by" line, never "rank 0 failed: rank 2 failed: ...". */
    dist__cpu_op_label(op->c, label, sizeof label);
    size_t n = strlen(label);
    const char *body = !strncmp(msg, label, n) && !strncmp(msg + n, ": ", 2) ? msg + n + 2 : msg;
    int rc = strstr(body, "\n  seen by ")
                 ? dist__shm_fail(s, op, code, "%s: %s", label, body)
                 : dist__shm_fail(s, op, code, "%s: %s\n  seen by %s", label, body,
                                  dist__cpu_peer_name(s->g, k, who, sizeof who));
    if (code == DIST_E_PEER_LOST)
      report_dead_peers(s);
    return rc;
  }
  return DIST_OK;
}

/* Dead peers among ranks [j, end) that have not posted step g. */
static int peer_lost(dist__shm *s, dist__cpu_op *op, uint64_t g, int j, int end) {
  for (int k = j; k < end; k++) {
    if (k == s->rank || shm_reached(s, k, g) || !gone(s, k))
      continue;
    if (shm_reached(s, k, g)) /* it posted, then exited */
      continue;
    char who[160], label[96], early[160];
    int rc = dist__shm_fail(s, op, DIST_E_PEER_LOST, "%s: %s exited while this rank waited for "
                            "it%s", dist__cpu_op_label(op->c, label, sizeof label),
                            dist__cpu_peer_name(s->g, k, who, sizeof who),
                            earlier_op(s, early, sizeof early));
    dist__cpu_peer_lost(s->g, k, op->err->msg);
    return rc;
  }
  return DIST_OK;
}

/* Everything a slow waiter for ranks [j, end) checks besides the counter. */
static int checks(dist__shm *s, dist__cpu_op *op, uint64_t g, int j, int end, int64_t now) {
  dist__cpu_group *grp = s->g;
  if (atomic_load_explicit(&grp->aborted, memory_order_acquire) ||
      atomic_load_explicit(&grp->broken_rc, memory_order_acquire) != DIST_OK) {
    char label[96];
    dist__errbuf tmp;
    dist__err_clear(&tmp);
    int rc = dist__cpu_check_state(grp, &tmp);
    return dist__shm_fail(s, op, rc, "%s: %s", dist__cpu_op_label(op->c, label, sizeof label),
                          tmp.msg);
  }
  DIST_TRY(dist__shm_peer_failed(s, op));
  if (now - s->last_poll_ns >= POLL_EVERY_NS) {
    s->last_poll_ns = now;
    DIST_TRY(peer_lost(s, op, g, j, end));
  }
  if (now / 1000000 >= op->deadline_ms)
    return timed_out(s, op, g, j, end);
  return DIST_OK;
}

/* Phase 3 begins: this rank counts itself among j's sleepers for the whole
 * phase, and a barrier on every CPU makes sure a publisher that posts
 * without a fence sees it (see shm_post). True when the barrier was made;
 * without it a missed wake-up costs at most a short slice, so the slices
 * stay short. One barrier per wait, not per slice: membarrier interrupts
 * every CPU, and 256 ranks waiting out a hang in 4 ms slices made 64,000
 * of them a second. */
static bool sleep_begin(dist__shm *s, int j) {
  atomic_fetch_add_explicit(&s->peer[j].ctl->sleepers, 1, memory_order_seq_cst);
  return fence_publishers();
}

static void sleep_end(dist__shm *s, int j) {
  atomic_fetch_sub_explicit(&s->peer[j].ctl->sleepers, 1, memory_order_seq_cst);
}

/* One slice of sleep on rank j's word, asleep_ns into the phase. A post,
 * a failure or an abort wakes it; the slice bounds how late the deadline
 * and a dead peer are noticed, so it grows with the wait (4 ms, then an
 * eighth of the time asleep, at most 32 ms): a long wait for a stalled
 * peer then costs a few wake-ups a second instead of 250. */
static void sleep_on(dist__shm *s, dist__cpu_op *op, uint64_t g, int j, int64_t now,
                     int64_t asleep_ns, bool fenced) {
  shm_ctl *c = s->peer[j].ctl;
  int64_t slice = asleep_ns / 8 > SLEEP_SLICE_NS ? asleep_ns / 8 : SLEEP_SLICE_NS;
  slice = slice > SLEEP_SLICE_MAX_NS ? SLEEP_SLICE_MAX_NS : slice;
  if (!fenced)
    slice = SLEEP_SLICE_NS / 8;
  int64_t left_ms = op->deadline_ms - now / 1000000; /* in ms: "never" must not overflow */
  int64_t ns = left_ms >= slice / 1000000 ? slice : left_ms > 0 ? left_ms * 1000000 : 0;
  struct timespec ts = {ns / 1000000000, ns % 1000000000};
  uint32_t w = atomic_load_explicit(&c->wake, memory_order_seq_cst);
  if (!shm_reached(s, j, g) && !atomic_load_explicit(&s->g->aborted, memory_order_seq_cst))
    futex(&c->wake, FUTEX_WAIT, w, &ts);
}

/* Waits for rank j; the slow checks cover ranks [j, end) (for names).
 * now: the clock when the wait began, so that a rank with no spin phase
 * (spin_end == now) yields at once: starting from 0 it spun 64 pauses
 * per peer first, about 3 us on this machine's cores, which a descheduled
 * peer cannot use. */
static int wait_one(dist__shm *s, dist__cpu_op *op, uint64_t g, int j, int end, int64_t now,
                    int64_t spin_end, int64_t yield_end) {
  unsigned it = 0;
  int64_t asleep_at = 0;
  bool asleep = false, fenced = false;
  int rc = DIST_OK;
  while (rc == DIST_OK && !shm_reached(s, j, g)) {
    if (now < spin_end) {
      cpu_relax();
      if ((++it & 63) == 0)
        now = dist__now_ns();
      continue;
    }
    now = dist__now_ns();
    rc = checks(s, op, g, j, end, now);
    if (rc != DIST_OK)
      break;
    if (now < yield_end) {
      sched_yield();
      continue;
    }
    if (!asleep) {
      asleep = true;
      asleep_at = now;
      fenced = sleep_begin(s, j);
    }
    sleep_on(s, op, g, j, now, now - asleep_at, fenced);
  }
  if (asleep)
    sleep_end(s, j);
  return rc;
}

/* Ranks that each have a CPU still find themselves on one now and then: a
 * helper thread or another process took the other CPU for a moment, and a
 * wake-up put the woken rank beside its waker. The kernel moves one back
 * only when a load balance finds the task no longer cache-hot, 5-30 ms
 * later on this machine (its two virtual CPUs share no cache the kernel
 * knows of, so a wake-up does not look for the idle one either). Until
 * then the two spin out each other's time slices and hand over by
 * sched_yield, which keeps both on the one CPU: back-to-back broadcasts
 * took 15-40 us a call instead of 0.3. So each spinning rank publishes the
 * CPU it waits on (sched_getcpu reads the rseq area: a load), and a rank
 * that finds the peer it waits for on its own CPU moves itself to the
 * others it may run on (its affinity without this CPU, then its affinity
 * as it was: the thread stays where it was moved). At most once a
 * millisecond per rank, so a stale CPU number costs little. */
#define MOVE_EVERY_NS 1000000

static int publish_cpu(dist__shm *s) {
  int cpu = sched_getcpu();
  int me = cpu >= 0 ? cpu + 1 : 0;
  _Atomic int32_t *mine = &s->peer[s->rank].ctl->cpu;
  if (atomic_load_explicit(mine, memory_order_relaxed) != me)
    atomic_store_explicit(mine, me, memory_order_relaxed);
  return me;
}

static bool beside(dist__shm *s, int j, int me) {
  return me > 0 && atomic_load_explicit(&s->peer[j].ctl->cpu, memory_order_relaxed) == me;
}

/* Returns the CPU this rank is on afterwards (plus one), so a wait for the
 * next peer compares with where it is, not where it was. */
static int move_off(dist__shm *s, int j, int me, int64_t now) {
  if (now - s->moved_ns < MOVE_EVERY_NS || me > CPU_SETSIZE)
    return me;
  s->moved_ns = now;
  cpu_set_t was, off;
  if (sched_getaffinity(0, sizeof was, &was) != 0)
    return me;
  off = was;
  CPU_CLR(me - 1, &off);
  if (CPU_COUNT(&off) == 0 || sched_setaffinity(0, sizeof off, &off) != 0)
    return me;
  sched_setaffinity(0, sizeof was, &was);
  int now_on = publish_cpu(s);
  DIST_LOG(DEBUG, SHM, "group %s: moved off CPU %d, where rank %d (waited for) last waited, "
           "to CPU %d", s->g->name, me - 1, j, now_on - 1);
  return now_on;
}

/* Waits for every rank in [j, end) but this one. */
static int wait_range(dist__shm *s, dist__cpu_op *op, uint64_t g, int j, int end) {
  /* A peer in step with us posts within a few hundred ns: spin that long
   * before even reading the clock (35 ns a read here), unless the ranks
   * outnumber the CPUs (spin_ns 0: the peer needs our CPU to post). */
  for (int i = 0; s->spin_ns && i < 256 && !shm_reached(s, j, g); i++)
    cpu_relax();
  int64_t t0 = dist__now_ns();
  if (op->deadline_ms == DIST_CPU_DEADLINE_LAZY) /* the op's first real wait */
    op->deadline_ms = t0 / 1000000 + op->c->timeout_ms;
  int64_t spin_end = t0 + s->spin_ns, yield_end = spin_end + s->yield_ns;
  /* Ranks that outnumber the CPUs share them by design: they yield. */
  int me = s->fits && s->spin_ns ? publish_cpu(s) : 0;
  for (; j < end; j++) {
    if (j == s->rank || shm_reached(s, j, g))
      continue;
    if (beside(s, j, me))
      me = move_off(s, j, me, t0);
    DIST_TRY(wait_one(s, op, g, j, end, t0, spin_end, yield_end));
  }
  return DIST_OK;
}

int dist__shm_wait_slow(dist__shm *s, dist__cpu_op *op, uint64_t g, int j) {
  return wait_range(s, op, g, j, s->size);
}

int dist__shm_wait_one(dist__shm *s, dist__cpu_op *op, uint64_t g, int j) {
  return shm_reached(s, j, g) ? DIST_OK : wait_range(s, op, g, j, j + 1);
}

/* Whether await_posted stops waiting for rank j. */
static bool give_up(dist__shm *s, int j, int64_t deadline_ms) {
  return atomic_load_explicit(&s->g->aborted, memory_order_acquire) ||
         atomic_load_explicit(&s->g->broken_rc, memory_order_acquire) != DIST_OK ||
         atomic_load_explicit(&s->peer[j].ctl->fail_code, memory_order_acquire) > 0 ||
         gone(s, j) || dist__now_ms() >= deadline_ms;
}

bool dist__shm_await_posted(dist__shm *s, uint64_t g, int64_t deadline_ms) {
  for (int j = 0; j < s->size; j++)
    while (j != s->rank && !shm_reached(s, j, g)) {
      if (give_up(s, j, deadline_ms))
        return false;
      dist__sleep_ms(1); // a failure path or a late reader: no hurry
    }
  return true;
}

int dist__shm_fail(dist__shm *s, dist__cpu_op *op, int rc, const char *fmt, ...) {
  char msg[DIST_ERRMSG_LEN];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  dist__err_set(op->err, rc, "%s", msg);
  dist__cpu_mark_broken(s->g, rc, msg);
  publish_failure(s, rc, msg); /* the peers fail with this status instead of waiting */
  DIST_LOG(DEBUG, SHM, "group %s: %s", s->g->name, msg); // pg.c logs the report
  return rc;
}
