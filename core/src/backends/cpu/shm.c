/* shm.c - the shared-memory collective engine: lifetime, dispatch, and
 * the descriptor check every collective starts with (shm.h, shm_int.h);
 * the checks deferred by small broadcasts and scatters are shm_settle.c's.
 *
 * Mismatches. The first step of every collective carries each rank's
 * descriptor. Every rank compares every other rank's descriptor with its
 * own (and, for all_to_all, the whole count matrix), so all ranks reach
 * the same verdict at the same step: when they disagree, every rank fails
 * the operation with DIST_E_DESYNC (ranks are out of sync; local argument
 * errors are DIST_E_INVAL) and a message naming a rank that differs and both
 * sizes, nothing has been copied into user buffers, and the step
 * counters are still in step. The group therefore stays usable: the next
 * collective on which the ranks agree runs normally. Only failures after
 * the first step (timeout, lost peer, abort, a kernel error) break the
 * group (dist__cpu_mark_broken), because ranks may then be at different
 * steps.
 *
 * The user's sequence number travels in the descriptor for messages only:
 * point-to-point calls count in it, so ranks that took no part in a send
 * legitimately disagree on it. */
#include <inttypes.h>
#include <stdio.h>
#if defined(__x86_64__) && defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "shm_int.h"
#include "base/report.h"

static int64_t tunable(const char *name, int64_t dflt) {
  int64_t v;
  if (dist__env_int(name, 0, 10000000, dflt, &v) != DIST_OK)
    return dflt; /* warned once (dist__env_warn) */
  return v;
}

int dist__shm_create(dist__cpu_group *g, dist_store *store, int64_t deadline_ms,
                     dist__shm **out, dist__errbuf *err) {
  *out = NULL;
  if (!g || !store || g->size < 1 || g->rank < 0 || g->rank >= g->size || !g->peers)
    return dist__err_set(err, DIST_E_INVAL, "shared memory: bad group description");
  if (!g->same_host)
    return dist__err_set(err, DIST_E_NOTSUP,
                         "shared memory: the members of group %s are not all on this host",
                         g->name);
  dist__shm *s = dist__calloc(1, sizeof *s);
  if (!s)
    return dist__err_set(err, DIST_E_NOMEM, "shared memory: out of memory");
  s->g = g;
  s->rank = g->rank;
  s->size = g->size;
  s->peer = dist__calloc((size_t)g->size, sizeof *s->peer);
  s->pidfd = dist__calloc((size_t)g->size, sizeof *s->pidfd);
  s->srcs = dist__calloc((size_t)g->size, sizeof *s->srcs);
  s->scratch = dist__calloc(5 * (size_t)g->size, sizeof *s->scratch);
  s->cnt_mirror = dist__calloc(6 * (size_t)g->size, sizeof *s->cnt_mirror);
  if (!s->peer || !s->pidfd || !s->srcs || !s->scratch || !s->cnt_mirror) {
    dist__shm_destroy(s);
    return dist__err_set(err, DIST_E_NOMEM, "shared memory: out of memory");
  }
  for (int r = 0; r < g->size; r++)
    s->pidfd[r] = -1;
  /* spin only when each rank on the host has a CPU (cpu_fit.c) */
  s->fits = dist__cpu_fits(g->size);
  s->spin_ns = tunable("DIST_SHM_SPIN_US", s->fits ? 50 : 0) * 1000;
  s->yield_ns = tunable("DIST_SHM_YIELD_US", 200) * 1000;
  s->stream_min = (size_t)tunable("DIST_SHM_STREAM_KB", 32768) * 1024; /* beyond L3 */
  dist__shm_fence_init(s);
  int rc = dist__shm_seg_create(s, store, deadline_ms, err);
  if (rc != DIST_OK) {
    dist__shm_destroy(s);
    return rc;
  }
  *out = s;
  return DIST_OK;
}

void dist__shm_destroy(dist__shm *s) {
  if (!s)
    return;
  dist__shm_seg_destroy(s);
  dist__free(s->peer);
  dist__free(s->pidfd);
  dist__free(s->srcs);
  dist__free(s->scratch);
  dist__free(s->cnt_mirror);
  dist__free(s);
}

static int run_kind(dist__shm *s, dist__cpu_op *op);

/* A broadcast that travels in the root's polled line alone (shm_copy.c):
 * it settles only what it must (shm_settle_deep). Except on a rank that
 * was the root of earlier ones and now reads: it settles them, so a rank
 * that broadcast as the root where the others named another learns it at
 * its next broadcast, not SHM_DEPTH broadcasts later (or never, when the
 * job ends first). A fixed root never reads, so its run stays deep. */
static bool shallow_broadcast(const dist__shm *s, const dist__cpu_op *op) {
  return op->c->kind == DIST_OP_BROADCAST && s->size > 1 &&
         dist_tensor_nbytes(&op->c->inputs[0]) <= SHM_INLINE &&
         !dist_coll_list_call(op->c); // a list entry's runs in full (shm_copy.c)
}

int dist__shm_run(dist__shm *s, dist__cpu_op *op) {
  dist__cpu_group *g = s->g;
  if (__builtin_expect(atomic_load_explicit(&g->aborted, memory_order_acquire) ||
                           atomic_load_explicit(&g->broken_rc, memory_order_acquire),
                       0))
    return dist__cpu_check_state(g, op->err);
  bool shallow = shallow_broadcast(s, op);
  if (shallow && __builtin_expect(s->pend_lo != 0, 0) && op->c->root != s->rank)
    DIST_TRY(dist__shm_settle_to(s, op, s->step - 1)); /* a root now reading */
  else if (shallow)
    DIST_TRY(shm_settle_deep(s, op, s->step));
  else if (__builtin_expect(s->lazy_g != 0, 0))
    DIST_TRY(shm_settle(s, op));
  int rc = run_kind(s, op);
  if (__builtin_expect(s->stream, 0))
    shm_stream_end(s);
  /* Its last step waited for every rank: all have posted every step. */
  if (__builtin_expect(rc == DIST_OK, 1) && s->lazy_g == 0)
    s->known = s->step;
  return rc;
}

static int run_kind(dist__shm *s, dist__cpu_op *op) {
  switch (op->c->kind) {
  case DIST_OP_ALL_REDUCE:
    return dist__shm_all_reduce(s, op);
  case DIST_OP_BROADCAST:
    return dist__shm_broadcast(s, op);
  case DIST_OP_REDUCE:
    return dist__shm_reduce(s, op);
  case DIST_OP_ALL_GATHER:
  case DIST_OP_ALL_GATHER_INTO_TENSOR:
    return dist__shm_all_gather(s, op);
  case DIST_OP_GATHER:
    return dist__shm_gather(s, op);
  case DIST_OP_SCATTER:
    return dist__shm_scatter(s, op);
  case DIST_OP_REDUCE_SCATTER:
  case DIST_OP_REDUCE_SCATTER_TENSOR:
    return dist__shm_reduce_scatter(s, op);
  case DIST_OP_ALL_TO_ALL:
  case DIST_OP_ALL_TO_ALL_SINGLE:
    return dist__shm_all_to_all(s, op);
  case DIST_OP_BARRIER:
    return dist__shm_barrier(s, op);
  default:
    return dist__err_set(op->err, DIST_E_NOTSUP, "shared memory engine: %s is not a collective",
                         dist_op_name(op->c->kind));
  }
}

/* --- copies out to user memory ----------------------------------------- */

void dist__shm_copy_stream(void *dst, const void *src, size_t len) {
#if defined(__x86_64__) && defined(__SSE2__)
  uint8_t *d = dst;
  const uint8_t *p = src;
  size_t head = (16 - ((uintptr_t)d & 15)) & 15;
  if (len < 256 || head > len) {
    memcpy(d, p, len);
    return;
  }
  memcpy(d, p, head);
  d += head, p += head, len -= head;
  for (; len >= 64; len -= 64, d += 64, p += 64) {
    __m128i a = _mm_loadu_si128((const __m128i *)p), b = _mm_loadu_si128((const __m128i *)(p + 16));
    __m128i c = _mm_loadu_si128((const __m128i *)(p + 32)), e = _mm_loadu_si128((const __m128i *)(p + 48));
    _mm_stream_si128((__m128i *)d, a);
    _mm_stream_si128((__m128i *)(d + 16), b);
    _mm_stream_si128((__m128i *)(d + 32), c);
    _mm_stream_si128((__m128i *)(d + 48), e);
  }
  memcpy(d, p, len);
#else
  memcpy(dst, src, len);
#endif
}

void dist__shm_stream_done(void) {
#if defined(__x86_64__) && defined(__SSE2__)
  _mm_sfence(); /* streaming stores are weakly ordered: settle them before returning */
#endif
}

/* --- the descriptor check ------------------------------------------------ */

/* One rank's key as a report line (report.h); seq shown when it is not
 * this rank's. A list entry's piece reads as its call: against another
 * piece, with its entry (root) and size; against the call's one-piece
 * form, as a list whose entries differ in size (this rank's step holds
 * its first entry, not the one that differs). A blob's piece reads as its
 * call run as the piece ("BROADCAST_BYTES (run as BROADCAST int64[1]
 * root 3)"). */
static void key_side(const dist__shm *s, int r, const shm_key *k, const shm_key *other,
                     uint64_t seq, uint64_t my_seq, dist__rside *out) {
  bool a2a = k->kind == DIST_OP_ALL_TO_ALL || k->kind == DIST_OP_ALL_TO_ALL_SINGLE;
  bool list = shm_listed(k) != 0;
  dist__rval v = {.kind = shm_call_kind(k), .seq = seq != my_seq ? seq : 0, .dtype = k->dtype,
                  .count = a2a && k->count == 0 ? -1 : k->count, .redop = k->redop,
                  .root = (int)shm_global_rank(s, k->root), .peer = -1,
                  .list = list, .entry = shm_listed(other) ? k->root : -1,
                  .part = list ? 0 : k->part_of};
  if (k->kind == DIST_OP_BARRIER)
    v.dtype = -1;
  if (k->redop == DIST_REDOP_PREMUL_SUM)
    memcpy(&v.scalar, &k->scalar_bits, sizeof v.scalar);
  out->global_rank = (int)shm_global_rank(s, r);
  out->group_rank = r;
  out->self = r == s->rank;
  dist__report_value(&v, out->value, sizeof out->value);
}

/* The field in which key x (rank j) first differs from y (this rank), in
 * the order every engine names them (report.h); buf holds a list's field.
 * Of one list collective, a list entry's piece against the call's
 * one-piece form differs in the sizes of the list (the piece's rank
 * passed entries of different sizes, the other's are all alike); two
 * pieces in the size of their entry. */
static const char *diff_field(const shm_key *x, const shm_key *y, char *buf, size_t len) {
  if (shm_call_kind(x) != shm_call_kind(y))
    return "operation";
  if (x->dtype != y->dtype)
    return "dtype";
  if (x->redop != y->redop || (x->scalar_bits != y->scalar_bits &&
                               x->kind != DIST_OP_ALL_TO_ALL_SINGLE))
    return "reduce op";
  if (shm_listed(x) != shm_listed(y))
    return dist__report_list_field(shm_call_kind(x), -1, buf, len);
  if (x->root != y->root)
    return "root";
  if (shm_listed(x))
    return dist__report_list_field(shm_call_kind(x), x->root, buf, len);
  if (x->kind == DIST_OP_ALL_TO_ALL_SINGLE)
    return "split size"; /* the even form's input or output count */
  return "count";
}

/* Rank r's key for step g: this rank's private copy (its line may be
 * polled, shm_publish), a peer's polled line. */
static const shm_key *key_of(const dist__shm *s, int r, uint64_t g) {
  return r == s->rank ? &s->key[SHM_H(g)] : &s->peer[r].hdr[SHM_L(g)]->key;
}

/* Rank r's key for step g as a report shows it. An uneven
 * all_to_all_single's key carries no size (ranks may legally send
 * different totals), so its line lost the rank's shape; but such a rank
 * published what it sends to each rank in cnt[g & 1] before it posted g
 * (shm_a2a.c), and nobody rewrites that parity before every rank posted
 * g + 1: the sum is its input's size. */
static shm_key shown_key(const dist__shm *s, int r, uint64_t g) {
  shm_key k = *key_of(s, r, g);
  if (k.kind == DIST_OP_ALL_TO_ALL_SINGLE && k.count == 0)
    for (int j = 0; j < s->size; j++)
      k.count += s->peer[r].cnt[g & 1][j];
  return k;
}

/* The report body for the first difference between the keys of ranks i and
 * j, appended at *off; j is the odd one when odd (else neither is known). */
static void describe_diff(const dist__shm *s, int i, int j, uint64_t g, bool odd, char *buf,
                          size_t len, size_t *off) {
  const shm_key *x = key_of(s, i, g), *y = key_of(s, j, g);
  shm_key xs = shown_key(s, i, g), ys = shown_key(s, j, g);
  uint64_t xseq = s->peer[i].info->seq[SHM_H(g)], yseq = s->peer[j].info->seq[SHM_H(g)];
  uint64_t myseq = s->peer[s->rank].info->seq[SHM_H(g)];
  dist__rside a, b;
  char f[64];
  key_side(s, i, &xs, &ys, xseq, myseq, &a);
  key_side(s, j, &ys, &xs, yseq, myseq, &b);
  if (odd)
    dist__report_disagree_odd(buf, len, off, diff_field(x, y, f, sizeof f), &a, &b);
  else
    dist__report_disagree(buf, len, off, diff_field(x, y, f, sizeof f), &a, &b);
}

/* Rank r's key of its last operation before the one at step g whose
 * descriptor is still kept, of kind `kind` (any kind when kind < 0); NULL
 * when there is none. The keys are hist and info, written together at an
 * operation's first step (the later steps of a long operation keep older
 * ones, which the sequence numbers tell apart); a peer may already have
 * published step g + 1 over g + 1 - SHM_HIST's, so the look goes back
 * SHM_HIST - 2 steps. */
static const shm_key *last_key(const dist__shm *s, int r, uint64_t g, int kind) {
  const shm_key *last = NULL;
  uint64_t seq = s->peer[r].info->seq[SHM_H(g)], best = 0;
  for (uint64_t d = 1; d <= SHM_HIST - 2 && d <= g; d++) {
    uint64_t q = s->peer[r].info->seq[SHM_H(g - d)];
    const shm_key *h = r == s->rank ? &s->key[SHM_H(g - d)] : &s->peer[r].hist[SHM_H(g - d)];
    if (q < seq && q > best && (kind < 0 || h->kind == kind)) {
      best = q;
      last = h;
    }
  }
  return last;
}

/* Signs in rank r's kept history (before step g) that its key k there,
 * against rank o's key ko, is the odd one of a pair, where no majority
 * tells: k differs from every key of its kind the history holds (MAX
 * where the all_reduces were SUM); or k repeats the kind of r's
 * previous operation while ko is of another, and r never made two of that
 * kind in a row before (it called the same operation again and skipped
 * the one between, a loop whose calls alternate, as the checking layer's
 * tie break reads a repeated call site; a loop of one kind repeats it at
 * every step: no sign there); or k is of a kind r's history never made
 * while ko's is one o made before (r left its loop: a call past a skipped
 * one, the final barrier reached early). */

/* Whether rank r's kept history holds an operation of kind, whether it
 * holds two of that kind in a row (*twice), and whether one of them had
 * key k (*seen; k NULL: not asked). */
static bool history_of(const dist__shm *s, int r, uint64_t g, int kind, bool *twice,
                       const shm_key *k, bool *seen) {
  bool found = false;
  *twice = false;
  if (seen)
    *seen = false;
  uint64_t seq = s->peer[r].info->seq[SHM_H(g)];
  int prev_kind = -1;
  uint64_t prev_seq = 0;
  for (uint64_t d = SHM_HIST - 2; d >= 1; d--) { /* oldest first */
    if (d > g)
      continue;
    uint64_t q = s->peer[r].info->seq[SHM_H(g - d)];
    const shm_key *h = r == s->rank ? &s->key[SHM_H(g - d)] : &s->peer[r].hist[SHM_H(g - d)];
    if (q >= seq || q <= prev_seq)
      continue; /* a later step of the same operation, or not kept */
    found |= h->kind == kind;
    *twice |= h->kind == kind && prev_kind == kind && q == prev_seq + 1;
    if (k && shm_key_same(h, k))
      *seen = true;
    prev_kind = h->kind;
    prev_seq = q;
  }
  return found;
}

static bool history_marks(const dist__shm *s, int r, const shm_key *k, int o, const shm_key *ko,
                          uint64_t g) {
  if (o >= 0 && shm_listed(k) != shm_listed(ko) && shm_call_kind(k) == shm_call_kind(ko))
    return shm_listed(k) != 0; /* one list call in two forms (a pair): the side whose
                               entries differ in size, as a wrong entry makes them */
  const shm_key *last = last_key(s, r, g, -1);
  bool twice, seen, made = history_of(s, r, g, k->kind, &twice, k, &seen);
  if (made && !seen)
    return true; /* a key of that kind it never had (a blob's size and payload
                    alternate: a key seen before is no change) */
  if (o < 0 || ko->kind == k->kind || !last)
    return false;
  if (last->kind == k->kind) /* repeated its last kind, never twice in a row before */
    return !twice;
  bool o_made = history_of(s, o, g, ko->kind, &twice, NULL, NULL);
  return !made && o_made; /* a kind new to it */
}

int dist__shm_pair_odd(const dist__shm *s, int a, const shm_key *ka, int b, const shm_key *kb,
                       uint64_t g) {
  bool ma = history_marks(s, a, ka, b, kb, g), mb = history_marks(s, b, kb, a, ka, g);
  return ma == mb ? -1 : ma ? a : b;
}

/* The lowest rank whose key most ranks share. A tie (the two ranks of a
 * pair, at DIST_DEBUG=OFF, where no checking layer keeps call history)
 * goes against the key whose ranks' histories mark it (history_marks, on
 * both sides' history), else keeps the lowest. */
static int majority_rank(const dist__shm *s, uint64_t g) {
  int best = 0, best_n = 0, best_sus = 0;
  for (int i = 0; i < s->size; i++) {
    int n = 0, sus = 0, other = -1;
    for (int j = 0; j < s->size && other < 0; j++)
      if (!shm_key_same(key_of(s, i, g), key_of(s, j, g)))
        other = j;
    for (int j = 0; j < s->size; j++)
      if (shm_key_same(key_of(s, i, g), key_of(s, j, g))) {
        n++;
        sus += history_marks(s, j, key_of(s, j, g), other,
                             other >= 0 ? key_of(s, other, g) : key_of(s, j, g), g);
      }
    if (n > best_n || (n == best_n && sus < best_sus)) {
      best_n = n;
      best_sus = sus;
      best = i;
    }
  }
  return best;
}

static int check_forms(dist__shm *s, dist__cpu_op *op, uint64_t g);

/* Whether the keys of step g differ only in the form of an
 * all_to_all_single: some ranks' even form, which carries the sizes,
 * against others' uneven form, which carries none. The uneven ones
 * published their rows of the count matrix with the step, the even ones'
 * follow from their keys, and the matrix check (check_forms) names the
 * pair whose sizes differ, as between uneven calls, where the keys alone
 * could only say that the forms differ. */
static bool a2a_forms_differ(const dist__shm *s, uint64_t g) {
  const shm_key *k0 = key_of(s, 0, g);
  bool uneven = false;
  for (int j = 0; j < s->size; j++) {
    const shm_key *k = key_of(s, j, g);
    if (k->kind != DIST_OP_ALL_TO_ALL_SINGLE || k->dtype != k0->dtype)
      return false;
    uneven |= k->count == 0 && k->scalar_bits == 0;
  }
  return uneven;
}

int dist__shm_check(dist__shm *s, dist__cpu_op *op, uint64_t g) {
  /* Every rank sees every key, so every rank names the same pair: a rank
   * of the majority and the first rank that differs from it (the odd one,
   * marked), and the report reads the same on every rank (status.h). */
  const shm_key *k0 = key_of(s, 0, g);
  for (int j = 1; j < s->size; j++) {
    if (shm_key_same(key_of(s, j, g), k0))
      continue;
    int rc = a2a_forms_differ(s, g) ? check_forms(s, op, g) : DIST_OK;
    if (rc != DIST_OK)
      return rc;
    int m = majority_rank(s, g);
    int odd = 0;
    while (shm_key_same(key_of(s, odd, g), key_of(s, m, g)))
      odd++;
    char msg[1024], label[96];
    size_t off = 0;
    dist__appendf(msg, sizeof msg, &off, "%s: ", dist__cpu_op_label(op->c, label, sizeof label));
    describe_diff(s, m, odd, g, true, msg, sizeof msg, &off);
    DIST_LOG(DEBUG, SHM, "group %s: %s", s->g->name, msg); // pg.c logs the report
    return dist__err_set(op->err, DIST_E_DESYNC, "%s", msg);
  }
  return DIST_OK;
}

void dist__shm_describe_odd(const dist__shm *s, int i, const shm_key *x, int j,
                            const shm_key *y, uint64_t seq, char *buf, size_t len, size_t *off) {
  dist__rside a, b;
  char f[64];
  key_side(s, i, x, y, seq, seq, &a);
  key_side(s, j, y, x, seq, seq, &b);
  dist__report_disagree_odd(buf, len, off, diff_field(x, y, f, sizeof f), &a, &b);
}

#define SHM_VOTE_WAIT_NS (200 * 1000000LL) /* check_one's wait for the others' keys */

int dist__shm_check_one(dist__shm *s, dist__cpu_op *op, uint64_t g, int j) {
  /* Against the private copy: this rank's line may be polled (shm_publish). */
  const shm_key *x = &s->peer[j].hdr[SHM_L(g)]->key;
  if (shm_key_same(x, &s->key[SHM_H(g)]))
    return DIST_OK;
  char msg[1024], label[96];
  size_t off = 0;
  dist__appendf(msg, sizeof msg, &off, "%s: ", dist__cpu_op_label(op->c, label, sizeof label));
  /* The other ranks' keys say which of the two is odd (a reader whose
   * root is not the root's own choice: the others side with the reader).
   * They are asked once all posted the step, or after a bounded moment (a
   * failure path: it may wait); a tie, or nobody else there, names
   * neither. */
  int with_me = 0, with_j = 0;
  for (int64_t until = dist__now_ns() + SHM_VOTE_WAIT_NS;; dist__sleep_ms(1)) {
    int posted = 0;
    with_me = with_j = 0;
    for (int k = 0; k < s->size; k++)
      if (k != s->rank && k != j && shm_reached(s, k, g)) {
        posted++;
        with_me += shm_key_same(key_of(s, k, g), &s->key[SHM_H(g)]);
        with_j += shm_key_same(key_of(s, k, g), x);
      }
    if (posted >= s->size - 2 || dist__now_ns() > until)
      break;
  }
  if (with_me != with_j)
    describe_diff(s, with_me > with_j ? s->rank : j, with_me > with_j ? j : s->rank, g, true,
                  msg, sizeof msg, &off);
  else
    describe_diff(s, j, s->rank, g, false, msg, sizeof msg, &off);
  DIST_LOG(DEBUG, SHM, "group %s: %s", s->g->name, msg); // pg.c logs the report
  return dist__err_set(op->err, DIST_E_DESYNC, "%s", msg);
}

/* The count matrix, as rows: m[k] is rank k's, [0, n) the elements k
 * sends to each rank, [n, 2n) the elements k expects from each rank
 * (cnt[p] as published, or derived from a key: a2a_forms_differ). */
typedef const int64_t *const *cnt_rows;

/* How far the size rank i sends to rank j (send; else the size j expects
 * from i) stands out among the sizes around it: those i sends to the
 * others and the others send to j (send), or j expects from the others and
 * the others expect from i, unlike it (as the checking layer reads the
 * same matrix at DETAIL, wrapper_pg's exchange.c). */
static int odd_count(int n, cnt_rows m, int i, int j, bool send) {
  int unlike = 0;
  int64_t v = send ? m[i][j] : m[j][n + i];
  for (int k = 0; k < n; k++) {
    if (k != j)
      unlike += (send ? m[i][k] : m[j][n + k]) != v;
    if (k != i)
      unlike += (send ? m[k][j] : m[k][n + i]) != v;
  }
  return unlike;
}

/* How far rank i's total (send: of what it sends; else of what it
 * expects) stands out among the other ranks' totals of that side. */
static int odd_total(int n, cnt_rows m, int i, bool send) {
  int unlike = 0;
  int64_t mine = 0;
  for (int k = 0; k < n; k++)
    mine += m[i][send ? k : n + k];
  for (int r = 0; r < n; r++) {
    int64_t t = 0;
    for (int k = 0; k < n; k++)
      t += m[r][send ? k : n + k];
    unlike += r != i && t != mine;
  }
  return unlike;
}

/* Every rank checks the whole matrix so all fail together; a rank not
 * involved names the pair that disagrees, marking the side whose size
 * stands out more among the sizes around it (odd_count), else whose total
 * does (odd_total), or both when neither does (uneven splits, legal, leave
 * no usual size: which side is wrong is then not known, and naming one
 * would guess). */
/* The rank every pair whose sizes disagree involves, when several pairs
 * do and one rank is in all of them (one wrong split vector disagrees with
 * several peers, each of them with it alone, as the checking layer reads
 * it); -1 otherwise, or without memory. */
static int in_every_pair(int n, cnt_rows m) {
  int pairs = 0, hub = -1;
  int *in = dist__calloc((size_t)n, sizeof *in);
  for (int i = 0; in && i < n; i++)
    for (int j = 0; j < n; j++)
      if (m[i][j] != m[j][n + i]) {
        pairs++;
        in[i]++;
        in[j] += j != i;
      }
  for (int r = 0; in && pairs > 1 && r < n; r++)
    if (in[r] == pairs)
      hub = hub < 0 ? r : -2; /* two such ranks (a pair twice): neither */
  dist__free(in);
  return hub >= 0 ? hub : -1;
}

/* The report of the pair i -> j (dtype dt), whose sizes disagree:
 * the hub when there is one, else the side whose size stands out more
 * among the sizes around it (odd_count), else whose total does
 * (odd_total), else both (uneven splits, legal, leave no usual size). */
static void pair_report(const dist__shm *s, const dist__cpu_op *op, int dt, cnt_rows m, int i,
                        int j, int hub, char *msg, size_t len, size_t *off) {
  int n = s->size;
  int64_t sent = m[i][j], want = m[j][n + i];
  dist__rside a = {(int)shm_global_rank(s, i), i, i == s->rank, ""};
  dist__rside b = {(int)shm_global_rank(s, j), j, j == s->rank, ""};
  dist__rval va = {.kind = op->c->kind, .dtype = dt, .count = sent, .redop = -1,
                   .root = -1, .dir = "to", .peer = b.global_rank, .part = shm_part_of(op->c)};
  dist__rval vb = va;
  vb.count = want, vb.dir = "from", vb.peer = a.global_rank;
  dist__report_value(&va, a.value, sizeof a.value);
  dist__report_value(&vb, b.value, sizeof b.value);
  /* Two ranks: the sizes around are their sends to themselves alone, too
   * few to tell (and what the TCP engine, which sees one pair, says). */
  int os = hub == i ? 1 : n > 2 && hub < 0 ? odd_count(n, m, i, j, true) : 0;
  int orr = hub == j ? 1 : n > 2 && hub < 0 ? odd_count(n, m, i, j, false) : 0;
  if (os == orr && n > 2 && hub < 0) { /* the sizes around do not tell: the totals may */
    os = odd_total(n, m, i, true);
    orr = odd_total(n, m, j, false);
  }
  if (i == j) /* a rank's send to itself: one rank, marked once */
    os = 1, orr = 0;
  if (os == orr)
    dist__report_disagree_both(msg, len, off, "split size", &a, &b);
  else
    dist__report_disagree_odd(msg, len, off, "split size", os > orr ? &b : &a,
                              os > orr ? &a : &b);
}

/* The first pair of m whose sizes disagree, reported; DIST_OK when none. */
static int counts_report(dist__shm *s, dist__cpu_op *op, uint64_t g, cnt_rows m) {
  int n = s->size, hub = in_every_pair(n, m);
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++) {
      if (m[i][j] == m[j][n + i] || (hub >= 0 && i != hub && j != hub))
        continue;
      char msg[1024], label[96];
      size_t off = 0;
      dist__appendf(msg, sizeof msg, &off, "%s: ", dist__cpu_op_label(op->c, label, sizeof label));
      pair_report(s, op, s->key[SHM_H(g)].dtype, m, i, j, hub, msg, sizeof msg, &off);
      DIST_LOG(DEBUG, SHM, "group %s: %s", s->g->name, msg); // pg.c logs the report
      return dist__err_set(op->err, DIST_E_DESYNC, "%s", msg);
    }
  return DIST_OK;
}

/* The matrix's rows for step g (n pointers and, when derive, 2 n words a
 * rank, released together with dist__free), or NULL without memory. A
 * rank whose key is of the even form has its row derived from the key,
 * numel / N elements to and from every rank: the one-step even path
 * publishes no counts (shm_a2a.c). */
static const int64_t **rows_of(const dist__shm *s, uint64_t g, bool derive) {
  size_t n = (size_t)s->size, words = derive ? 2 * n * n : 0;
  const int64_t **m = dist__malloc(n * sizeof *m + words * sizeof(int64_t));
  if (!m)
    return NULL;
  int64_t *own = (int64_t *)(m + n);
  for (size_t r = 0; r < n; r++) {
    const shm_key *k = key_of(s, (int)r, g);
    m[r] = s->peer[r].cnt[g & 1];
    if (!derive || (k->count == 0 && k->scalar_bits == 0))
      continue;
    for (size_t j = 0; j < n; j++) {
      own[2 * n * r + j] = k->count / (int64_t)n;
      own[2 * n * r + n + j] = (int64_t)(k->scalar_bits / n);
    }
    m[r] = own + 2 * n * r;
  }
  return m;
}

/* The matrix check after its keys differ in form alone (a2a_forms_differ):
 * names the pair whose sizes differ, as between uneven calls. */
static int check_forms(dist__shm *s, dist__cpu_op *op, uint64_t g) {
  const int64_t **m = rows_of(s, g, true);
  int rc = m ? counts_report(s, op, g, m) : DIST_OK; // else the keys' report
  dist__free(m);
  return rc;
}

int dist__shm_check_counts(dist__shm *s, dist__cpu_op *op, uint64_t g) {
  int n = s->size, p = (int)(g & 1);
  bool agree = true; /* the common case, without an allocation */
  for (int i = 0; i < n && agree; i++)
    for (int j = 0; j < n && agree; j++)
      agree = s->peer[i].cnt[p][j] == s->peer[j].cnt[p][n + i];
  if (agree)
    return DIST_OK;
  const int64_t **m = rows_of(s, g, false);
  char label[96];
  int rc = m ? counts_report(s, op, g, m)
             : dist__err_set(op->err, DIST_E_DESYNC, "%s: ranks disagree on the split size "
                             "(no memory to name them)",
                             dist__cpu_op_label(op->c, label, sizeof label));
  dist__free(m);
  return rc;
}
