/* shm_settle.c - the waits and descriptor checks that small broadcasts
 * and scatters defer (shm_int.h, "Deferred waits" and "Deeper for the
 * smallest broadcasts").
 *
 * The root of a small broadcast or scatter returns without waiting; its
 * readers compare their descriptor with the root's and fail their
 * operation at once when it differs. The root compares theirs when it
 * settles the step, at the start of its next operation (of another kind;
 * a run of small broadcasts settles SHM_DEPTH - 1 steps behind), which
 * then fails with DIST_E_DESYNC and a message naming the earlier broadcast
 * ("BROADCAST #7 (an earlier call): rank 1 (...) expected 4 elements ...,
 * this rank sent 8 ..."). That operation has not started on the root
 * while the others may have run further, so the group is marked broken
 * (dist__shm_fail): every rank then fails its next wait on the root with
 * the root's message, rather than at its deadline. When the broadcast was
 * the group's last call, the destroy compares instead
 * (dist__shm_settle_final): the readers are given a bounded moment to
 * reach it, and a disagreement fails the destroy, naming the broadcast.
 *
 * s->known spares most of the waiting: a rank that must know "every rank
 * posted step t" first looks at how far each peer got, newest step first,
 * and remembers the lowest, so a run of small broadcasts looks once every
 * few calls. */
#include <inttypes.h>
#include <stdio.h>

#include "shm_int.h"

/* "8 elements (32 bytes) of float32" for key k. */
static const char *elems_text(const shm_key *k, char *buf, size_t len) {
  size_t es = dist_dtype_size((dist_dtype)k->dtype);
  snprintf(buf, len, "%" PRId64 " elements (%" PRId64 " bytes) of %s", k->count,
           k->count * (int64_t)es, dist_dtype_name((dist_dtype)k->dtype));
  return buf;
}

/* How rank j's descriptor x of the deferred step differs from this root's
 * own y (a broadcast or scatter), appended at *off. */
static void describe_late(const dist__shm *s, int j, const shm_key *x, const shm_key *y,
                          uint64_t xseq, char *buf, size_t len, size_t *off) {
  char who[160], a[96], b[96];
  dist__cpu_peer_name(s->g, j, who, sizeof who);
  /* a piece: its call (a list entry's, compared as that call; a blob's) */
  if (shm_call_kind(x) != shm_call_kind(y) || shm_listed(x))
    dist__appendf(buf, len, off, "%s called %s #%" PRIu64 " instead, while this rank sent %s",
                  who, shm_op_name(x), xseq, elems_text(y, b, sizeof b));
  else if (x->root != y->root)
    dist__appendf(buf, len, off, "%s used root rank %" PRId64 ", while this rank (root rank %"
                  PRId64 ") sent %s", who, shm_global_rank(s, x->root), shm_global_rank(s, y->root),
                  elems_text(y, b, sizeof b));
  else
    dist__appendf(buf, len, off, "%s expected %s, this rank sent %s", who,
                  elems_text(x, a, sizeof a), elems_text(y, b, sizeof b));
}

/* Every rank posted deferred step q: when most ranks' descriptors side
 * with rank j's against this root's, or with this root's against j's, the
 * house report (report.h) of the two marks the odd one (the verdict's
 * culprit: a rank that broadcast as the root while the others named
 * another). On a tie (a pair), the side its own history marks (a root
 * that changed since its last broadcast), else nothing. */
static void odd_side(const dist__shm *s, uint64_t q, int j, char *buf, size_t len, size_t *off) {
  int h = (int)SHM_H(q), with_me = 0, with_j = 0;
  const shm_key *mine = &s->key[h], *x = &s->peer[j].hist[h];
  for (int k = 0; k < s->size; k++) {
    const shm_key *y = k == s->rank ? mine : &s->peer[k].hist[h];
    with_me += shm_key_same(y, mine);
    with_j += shm_key_same(y, x);
  }
  int tie = with_me == with_j ? dist__shm_pair_odd(s, s->rank, mine, j, x, q) : -1;
  if (with_me == with_j && tie < 0)
    return;
  dist__appendf(buf, len, off, "\n");
  uint64_t seq = s->pend_seq[SHM_L(q)];
  if (with_j > with_me || tie == s->rank)
    dist__shm_describe_odd(s, j, x, s->rank, mine, seq, buf, len, off);
  else
    dist__shm_describe_odd(s, s->rank, mine, j, x, seq, buf, len, off);
}

/* The root's verdict on its deferred step q, once every rank posted it:
 * the first rank whose descriptor differs fails this operation. At the
 * group's destroy (s->at_destroy) no operation is running: the report is
 * of the earlier call itself, and nothing is published for the peers,
 * which are leaving too (each root reaches its own verdict). */
static int settle_check(dist__shm *s, dist__cpu_op *op, uint64_t q) {
  int h = (int)SHM_H(q);
  const shm_key *mine = &s->key[h];
  for (int j = 0; j < s->size; j++) {
    const shm_key *x = &s->peer[j].hist[h];
    if (j == s->rank || shm_key_same(x, mine))
      continue;
    char msg[1024], label[96];
    size_t off = 0;
    const char *earlier = shm_op_name(mine); /* a piece: the user's call (BROADCAST_BYTES) */
    if (s->at_destroy)
      dist__appendf(msg, sizeof msg, &off, "%s #%" PRIu64 ": ", earlier, s->pend_seq[SHM_L(q)]);
    else
      dist__appendf(msg, sizeof msg, &off, "%s not run: %s #%" PRIu64 " (an earlier call): ",
                    dist__cpu_op_label(op->c, label, sizeof label), earlier,
                    s->pend_seq[SHM_L(q)]);
    describe_late(s, j, x, mine, s->peer[j].info->seq[h], msg, sizeof msg, &off);
    dist__appendf(msg, sizeof msg, &off, s->at_destroy
                  ? "; this rank had returned without waiting, and its destroy of the group "
                    "compared the other ranks' calls"
                  : "; that rank failed it, this rank had returned without waiting, and the "
                    "group is now unusable");
    odd_side(s, q, j, msg, sizeof msg, &off);
    if (s->at_destroy)
      return dist__err_set(op->err, DIST_E_DESYNC, "%s", msg);
    return dist__shm_fail(s, op, DIST_E_DESYNC, "%s", msg);
  }
  return DIST_OK;
}

/* The newest step in [t, s->step) that rank j has posted, newest first
 * (when the peers keep up, the first load answers), or t - 1. */
static uint64_t peer_progress(const dist__shm *s, int j, uint64_t t) {
  for (uint64_t q = s->step; q > t; q--)
    if (shm_reached(s, j, q - 1))
      return q - 1;
  return t - 1;
}

/* Raises s->known to at least t + 1, waiting for the ranks that have not
 * posted step t, and learning how far the others got on the way. */
static int learn_known(dist__shm *s, dist__cpu_op *op, uint64_t t) {
  uint64_t lo = UINT64_MAX;
  for (int j = 0; j < s->size; j++) {
    if (j == s->rank)
      continue;
    uint64_t q = peer_progress(s, j, t);
    if (q + 1 == t) { /* not there yet: the full wait, with its failure handling */
      /* First for the oldest step not known to be posted, so that a rank
       * that never comes is reported at the first call it missed. */
      uint64_t first = s->known < t ? s->known : t;
      s->settle_g = first + 1;
      int rc = dist__shm_wait_slow(s, op, first, j);
      if (rc == DIST_OK && first < t) {
        s->settle_g = t + 1;
        rc = dist__shm_wait_slow(s, op, t, j);
      }
      s->settle_g = 0;
      if (rc != DIST_OK)
        return rc;
      q = t;
    }
    lo = q < lo ? q : lo;
  }
  if (lo != UINT64_MAX && lo + 1 > s->known)
    s->known = lo + 1;
  return DIST_OK;
}

int dist__shm_settle_to(dist__shm *s, dist__cpu_op *op, uint64_t t) {
  if (s->known <= t)
    DIST_TRY(learn_known(s, op, t));
  if (!s->pend_lo)
    return DIST_OK;
  uint64_t lo = 0;
  for (int l = 0; l < SHM_DEPTH; l++) {
    uint64_t q1 = s->pend[l];
    if (!q1)
      continue;
    if (q1 - 1 < s->known) {
      s->pend[l] = 0;
      DIST_TRY(settle_check(s, op, q1 - 1));
    } else if (!lo || q1 < lo) {
      lo = q1;
    }
  }
  s->pend_lo = lo;
  return DIST_OK;
}

/* The oldest deferred root step still to be compared, plus one, and its
 * line in *line (0: none); *newest: the newest, plus one. */
static uint64_t pending_steps(const dist__shm *s, int *line, uint64_t *newest) {
  uint64_t lo = 0;
  *newest = 0;
  for (int l = 0; l < SHM_DEPTH; l++) {
    uint64_t q1 = s->pend[l];
    *newest = q1 > *newest ? q1 : *newest;
    if (q1 && (!lo || q1 < lo)) {
      lo = q1;
      *line = l;
    }
  }
  return lo;
}

int dist__shm_settle_final(dist__shm *s, dist__cpu_op *op, int *kind, uint64_t *seq) {
  if (__builtin_expect(s->pend_lo == 0, 1))
    return DIST_OK;
  int l = 0;
  uint64_t t1;
  pending_steps(s, &l, &t1);
  /* The ranks post in order: one that posted the newest step posted the
   * others. Without all of them, what they called stays unknown. */
  if (!t1 || !dist__shm_await_posted(s, t1 - 1, op->deadline_ms)) {
    DIST_LOG(DEBUG, SHM, "group %s: destroyed before every rank reached step %" PRIu64 ": the "
             "descriptors of its deferred broadcasts were not compared", s->g->name, t1 - 1);
    return DIST_OK;
  }
  /* Oldest first, so the report names the first call that differs. */
  s->at_destroy = true;
  int rc = DIST_OK;
  for (uint64_t q1; rc == DIST_OK && (q1 = pending_steps(s, &l, &t1)) != 0;) {
    s->pend[l] = 0;
    const shm_key *k = &s->key[SHM_H(q1 - 1)];
    *kind = dist__cpu_part_call(k->part_of, k->kind); /* a piece: the user's call */
    *seq = s->pend_seq[l];
    rc = settle_check(s, op, q1 - 1);
  }
  s->at_destroy = false;
  memset(s->pend, 0, sizeof s->pend);
  s->pend_lo = 0;
  return rc;
}
