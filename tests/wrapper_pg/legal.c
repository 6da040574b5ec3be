/* legal.c - the legal programs of legal.h: each one a pattern that is
 * correct by torch.distributed's rules and that a checking layer is
 * tempted to flag (sizes that differ per rank by design, operations the
 * ranks issue in different orders, ranks that call nothing) or to hang on
 * (a check that waits inside an async call, a group made after another was
 * destroyed). Values come from tests/support/ref.c: inputs are a function
 * of (seed, rank, index), reductions are compared bit for bit with the
 * reference's ascending-rank order, so every rank holds the same bits. */
#include "legal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ref.h"

#define MAXR 64

int legal_fail(const legal_env *e, const char *file, int line, const char *fmt, ...) {
  char msg[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  const char *base = strrchr(file, '/');
  fprintf(stderr, "[rank %d] %s:%d: %s\n", e->rank, base ? base + 1 : file, line, msg);
  return 1;
}

#define FAILX(...) legal_fail(e, __FILE__, __LINE__, __VA_ARGS__)
#define LCHECK(cond, ...)        \
  do {                           \
    if (!(cond))                 \
      return FAILX(__VA_ARGS__); \
  } while (0)
/* call must return DIST_OK; g is the group whose message explains it. */
#define LOK(call, g)                                                            \
  do {                                                                          \
    int lok_rc_ = (call);                                                       \
    if (lok_rc_ != DIST_OK)                                                     \
      return FAILX("%s -> %s: %s", #call, dist_status_name(lok_rc_),           \
                   dist_errmsg(lok_rc_, (g) == DIST_GROUP_NON_MEMBER ? NULL : (g))); \
  } while (0)
#define LWAIT(w, g)                       \
  do {                                    \
    LCHECK((w), "no work handle");        \
    LOK(dist_work_wait((w), -1), g);      \
    dist_work_free(w);                    \
    (w) = NULL;                           \
  } while (0)

/* got must hold want's n elements of dt bit for bit. */
static int same(const legal_env *e, int line, const char *what, dist_dtype dt, const void *got,
                const void *want, size_t n) {
  char msg[512];
  if (dist_test_compare(dt, got, want, n, 0, msg, sizeof msg))
    return legal_fail(e, __FILE__, line, "%s: %s", what, msg);
  return 0;
}
#define SAME(what, dt, got, want, n)                                 \
  do {                                                               \
    if (same(e, __LINE__, (what), (dt), (got), (want), (size_t)(n))) \
      return 1;                                                      \
  } while (0)

/* Sum of the global ranks r < n for which in(r) holds, as all_reduce
 * of each member's rank gives it. */
static int64_t int_sum(const legal_env *e, dist_pg *g, int64_t mine) {
  int64_t v = mine;
  dist_tensor t = dist_tensor_1d(&v, DIST_INT64, 1);
  int rc = dist_all_reduce(&t, DIST_SUM, g, NULL);
  if (rc != DIST_OK) {
    FAILX("all_reduce -> %s: %s", dist_status_name(rc), dist_errmsg(rc, g));
    return INT64_MIN;
  }
  return v;
}
#define SUM_IS(g, mine, want)                                                   \
  do {                                                                          \
    int64_t sum_ = int_sum(e, (g), (mine)), want_ = (want);                     \
    if (sum_ == INT64_MIN)                                                      \
      return 1;                                                                 \
    LCHECK(sum_ == want_, "all_reduce of %s: %lld, want %lld", #mine,          \
           (long long)sum_, (long long)want_);                                  \
  } while (0)

/* --- uneven sizes ---------------------------------------------------------- */

/* Rank i's all_gather input and reduce_scatter output: sizes that differ
 * per rank, and not in rank order. */
static size_t ag_len(int i) { return (size_t)(2 * i + 1); }
static size_t rs_len(int i) { return (size_t)((i * 5) % 7 + 1); }
/* Rows rank a sends rank b in all_to_all_single. */
static int64_t a2a_rows(int a, int b) { return (a + 2 * b) % 3 + 1; }

static int uneven_all_gather(const legal_env *e) {
  int n = e->world, r = e->rank;
  size_t off[MAXR + 1] = {0};
  for (int i = 0; i < n; i++)
    off[i + 1] = off[i] + ag_len(i);
  float *out = calloc(off[n], sizeof *out), *want = calloc(off[n], sizeof *want);
  float *mine = calloc(ag_len(r), sizeof *mine);
  LCHECK(out && want && mine, "out of memory");
  dist_tensor outs[MAXR];
  for (int i = 0; i < n; i++) {
    outs[i] = dist_tensor_1d(out + off[i], DIST_FLOAT32, (int64_t)ag_len(i));
    dist_test_fill(want + off[i], DIST_FLOAT32, ag_len(i), e->seed, i, 0, 0);
  }
  dist_test_fill(mine, DIST_FLOAT32, ag_len(r), e->seed, r, 0, 0);
  dist_tensor in = dist_tensor_1d(mine, DIST_FLOAT32, (int64_t)ag_len(r));
  for (int round = 0; round < 2; round++) { /* sync, then with a work handle */
    memset(out, 0, off[n] * sizeof *out);
    dist_work *w = NULL;
    LOK(dist_all_gather(outs, (size_t)n, &in, NULL, round ? &w : NULL), NULL);
    if (round)
      LWAIT(w, NULL);
    SAME("uneven all_gather", DIST_FLOAT32, out, want, off[n]);
  }
  free(out), free(want), free(mine);
  return 0;
}

/* inputs[i] holds rank i's block (its own size); rank r's output is the
 * sum over ranks of block r, elements off[r].. of the reference. */
static int uneven_reduce_scatter(const legal_env *e) {
  int n = e->world, r = e->rank;
  size_t off[MAXR + 1] = {0};
  for (int i = 0; i < n; i++)
    off[i + 1] = off[i] + rs_len(i);
  float *in = calloc(off[n], sizeof *in), out[8], want[8];
  LCHECK(in, "out of memory");
  dist_tensor ins[MAXR];
  for (int i = 0; i < n; i++)
    ins[i] = dist_tensor_1d(in + off[i], DIST_FLOAT32, (int64_t)rs_len(i));
  dist_tensor o = dist_tensor_1d(out, DIST_FLOAT32, (int64_t)rs_len(r));
  dist_test_expected(DIST_FLOAT32, DIST_SUM, want, rs_len(r), e->seed, n, off[r], 0, n);
  for (int round = 0; round < 2; round++) {
    dist_test_fill(in, DIST_FLOAT32, off[n], e->seed, r, 0, 0);
    memset(out, 0, sizeof out);
    dist_work *w = NULL;
    LOK(dist_reduce_scatter(&o, ins, (size_t)n, DIST_SUM, NULL, round ? &w : NULL), NULL);
    if (round)
      LWAIT(w, NULL);
    SAME("uneven reduce_scatter", DIST_FLOAT32, out, want, rs_len(r));
  }
  free(in);
  return 0;
}

static int uneven_all_to_all(const legal_env *e) {
  int n = e->world, r = e->rank;
  int64_t in_splits[MAXR], out_splits[MAXR], nin = 0, nout = 0;
  for (int p = 0; p < n; p++) {
    nin += in_splits[p] = a2a_rows(r, p);
    nout += out_splits[p] = a2a_rows(p, r);
  }
  int32_t in[3 * MAXR], out[3 * MAXR], want[3 * MAXR];
  for (int p = 0, k = 0; p < n; p++)
    for (int j = 0; j < in_splits[p]; j++, k++)
      in[k] = r * 10000 + p * 100 + j;
  for (int q = 0, k = 0; q < n; q++)
    for (int j = 0; j < out_splits[q]; j++, k++)
      want[k] = q * 10000 + r * 100 + j;
  dist_tensor ti = dist_tensor_1d(in, DIST_INT32, nin), to = dist_tensor_1d(out, DIST_INT32, nout);
  memset(out, 0xff, sizeof out);
  LOK(dist_all_to_all_single(&to, &ti, out_splits, in_splits, NULL, NULL), NULL);
  SAME("uneven all_to_all_single", DIST_INT32, out, want, nout);
  return 0;
}

/* The even split spelled out on rank 0 ({2, 2, ...}) and left NULL on the
 * others: the same call (torch), which the shared-memory engine refused
 * as a split size disagreement. */
static int spelled_even_all_to_all(const legal_env *e) {
  int n = e->world, r = e->rank;
  int64_t splits[MAXR];
  int32_t in[2 * MAXR], out[2 * MAXR], want[2 * MAXR];
  for (int p = 0; p < n; p++) {
    splits[p] = 2;
    for (int j = 0; j < 2; j++) {
      in[2 * p + j] = r * 10000 + p * 100 + j;
      want[2 * p + j] = p * 10000 + r * 100 + j;
    }
  }
  dist_tensor ti = dist_tensor_1d(in, DIST_INT32, 2 * n), to = dist_tensor_1d(out, DIST_INT32, 2 * n);
  memset(out, 0xff, sizeof out);
  const int64_t *sp = r == 0 ? splits : NULL;
  LOK(dist_all_to_all_single(&to, &ti, sp, sp, NULL, NULL), NULL);
  SAME("all_to_all_single with the even split spelled out on rank 0", DIST_INT32, out, want,
       2 * n);
  return 0;
}

int legal_uneven(const legal_env *e) {
  return uneven_all_gather(e) || uneven_reduce_scatter(e) || uneven_all_to_all(e) ||
         spelled_even_all_to_all(e);
}

/* --- barriers ------------------------------------------------------------- */

/* barrier (sync and async) and monitored_barrier with and without
 * wait_all_ranks, on the default group and on a group of every rank, all
 * ranks calling: the sequence numbers stay in step (the all_reduce after
 * them agrees). */
int legal_barriers(const legal_env *e) {
  int n = e->world, r = e->rank;
  dist_pg *all = NULL;
  dist_group_opts o = {.desc = "barriers"};
  LOK(dist_new_group(NULL, 0, &o, &all), NULL);
  for (int round = 0; round < 2; round++) {
    dist_pg *g = round ? all : NULL;
    dist_work *w = NULL;
    LOK(dist_barrier(g, NULL), g);
    LOK(dist_barrier(g, &w), g);
    LWAIT(w, g);
    LOK(dist_monitored_barrier(g, 20000, true), g);
    LOK(dist_monitored_barrier(g, 20000, false), g);
    SUM_IS(g, r + 1, (int64_t)n * (n + 1) / 2);
    LOK(dist_monitored_barrier(g, 0, true), g); // the group's own timeout
  }
  LOK(dist_destroy_process_group(all), NULL);
  return 0;
}

/* --- batched point-to-point --------------------------------------------- */

/* A ring both ways in one batch (tags keep the directions apart; the sizes
 * differ so a wrong match would show), with the batch's operations listed
 * in a different order on odd ranks, then plain isend/irecv issued
 * receive-first on some ranks and send-first on others. */
int legal_batch_p2p(const legal_env *e) {
  int n = e->world, r = e->rank;
  if (n < 2)
    return 0;
  int next = (r + 1) % n, prev = (r + n - 1) % n;
  float s1[3], s2[5], r1[3], r2[5], w1[3], w2[5];
  dist_test_fill(s1, DIST_FLOAT32, 3, e->seed, r, 0, 0);
  dist_test_fill(s2, DIST_FLOAT32, 5, e->seed, r, 100, 0);
  dist_test_fill(w1, DIST_FLOAT32, 3, e->seed, prev, 0, 0);
  dist_test_fill(w2, DIST_FLOAT32, 5, e->seed, next, 100, 0);
  dist_tensor ts1 = dist_tensor_1d(s1, DIST_FLOAT32, 3), ts2 = dist_tensor_1d(s2, DIST_FLOAT32, 5);
  dist_tensor tr1 = dist_tensor_1d(r1, DIST_FLOAT32, 3), tr2 = dist_tensor_1d(r2, DIST_FLOAT32, 5);
  for (int round = 0; round < 2; round++) {
    memset(r1, 0, sizeof r1), memset(r2, 0, sizeof r2);
    dist_p2p_op ops[4] = {{true, &ts1, next, 1, NULL},
                          {false, &tr1, prev, 1, NULL},
                          {true, &ts2, prev, 2, NULL},
                          {false, &tr2, next, 2, NULL}};
    if ((r + round) % 2) { /* the same operations, receives first */
      dist_p2p_op t[4] = {ops[3], ops[1], ops[2], ops[0]};
      memcpy(ops, t, sizeof ops);
    }
    dist_work *w = NULL;
    LOK(dist_batch_isend_irecv(ops, 4, &w), NULL);
    LWAIT(w, NULL);
    SAME("batch ring forward", DIST_FLOAT32, r1, w1, 3);
    SAME("batch ring backward", DIST_FLOAT32, r2, w2, 5);
  }
  memset(r1, 0, sizeof r1);
  dist_work *ws = NULL, *wr = NULL;
  if (r % 2) {
    LOK(dist_irecv(&tr1, prev, NULL, 7, &wr), NULL);
    LOK(dist_isend(&ts1, next, NULL, 7, &ws), NULL);
  } else {
    LOK(dist_isend(&ts1, next, NULL, 7, &ws), NULL);
    LOK(dist_irecv(&tr1, prev, NULL, 7, &wr), NULL);
  }
  LWAIT(wr, NULL);
  LWAIT(ws, NULL);
  SAME("isend/irecv ring", DIST_FLOAT32, r1, w1, 3);
  SUM_IS(NULL, 1, n); /* collectives after point-to-point agree */
  return 0;
}

/* --- async on two groups, different orders ---------------------------- */

/* Groups a and b over every rank; each round a rank issues a's and b's
 * operations interleaved, starting with a or b by the parity of rank +
 * round, and waits for them in the reverse order. */
int legal_async_two_groups(const legal_env *e) {
  int n = e->world, r = e->rank;
  dist_pg *a = NULL, *b = NULL;
  dist_group_opts oa = {.desc = "a"}, ob = {.desc = "b"};
  LOK(dist_new_group(NULL, 0, &oa, &a), NULL);
  LOK(dist_new_group(NULL, 0, &ob, &b), NULL);
  float va[16], wa[16];
  int64_t x, mine, gb[MAXR], mx;
  dist_tensor ta = dist_tensor_1d(va, DIST_FLOAT32, 16), tx = dist_tensor_1d(&x, DIST_INT64, 1);
  dist_tensor tm = dist_tensor_1d(&mine, DIST_INT64, 1), tg = dist_tensor_1d(gb, DIST_INT64, n);
  dist_tensor tmx = dist_tensor_1d(&mx, DIST_INT64, 1);
  for (int round = 0; round < 3; round++) {
    uint64_t seed = e->seed + (uint64_t)round;
    dist_test_fill(va, DIST_FLOAT32, 16, seed, r, 0, 0);
    dist_test_expected(DIST_FLOAT32, DIST_SUM, wa, 16, seed, n, 0, 0, n);
    x = r == n - 1 ? 1000 + round : -1;
    mine = 7 * r + round;
    mx = r;
    dist_work *w[4] = {NULL};
    bool a_first = (r + round) % 2 == 0;
    for (int k = 0; k < 4; k++) {
      bool on_a = (k % 2 == 0) == a_first;
      int step = k / 2;
      if (on_a && step == 0)
        LOK(dist_all_reduce(&ta, DIST_SUM, a, &w[k]), a);
      else if (on_a)
        LOK(dist_broadcast(&tx, n - 1, a, &w[k]), a);
      else if (step == 0)
        LOK(dist_all_gather_into_tensor(&tg, &tm, b, &w[k]), b);
      else
        LOK(dist_all_reduce(&tmx, DIST_MAX, b, &w[k]), b);
    }
    for (int k = 3; k >= 0; k--)
      LWAIT(w[k], NULL);
    SAME("all_reduce on a", DIST_FLOAT32, va, wa, 16);
    LCHECK(x == 1000 + round, "broadcast on a: %lld", (long long)x);
    for (int i = 0; i < n; i++)
      LCHECK(gb[i] == 7 * i + round, "all_gather on b [%d] = %lld", i, (long long)gb[i]);
    LCHECK(mx == n - 1, "max on b: %lld", (long long)mx);
  }
  LOK(dist_destroy_process_group(b), NULL);
  LOK(dist_destroy_process_group(a), NULL);
  SUM_IS(NULL, r, (int64_t)n * (n - 1) / 2);
  return 0;
}

/* --- ranks outside a group call nothing ---------------------------------- */

/* The odd ranks' group: every rank creates it, only members use it (several
 * collectives, sync and async); the others call nothing on it. Then a group
 * with local synchronisation that only ranks >= 1 create and use. The
 * world meets in between. */
int legal_outsiders(const legal_env *e) {
  int n = e->world, r = e->rank;
  int odd[MAXR], n_odd = 0, hi[MAXR], n_hi = 0;
  int64_t odd_sum = 0, hi_sum = 0;
  for (int i = 0; i < n; i++) {
    if (i % 2)
      odd[n_odd++] = i, odd_sum += i;
    if (i >= 1)
      hi[n_hi++] = i, hi_sum += i;
  }
  dist_pg *g = NULL;
  dist_group_opts o = {.desc = "odd"};
  LOK(dist_new_group(odd, (size_t)n_odd, &o, &g), NULL);
  LCHECK((r % 2 == 1) == (g != DIST_GROUP_NON_MEMBER), "membership of the odd group");
  if (r % 2) {
    for (int k = 0; k < 3; k++)
      SUM_IS(g, r, odd_sum);
    int64_t v = r == odd[n_odd - 1] ? 42 : 0;
    dist_tensor t = dist_tensor_1d(&v, DIST_INT64, 1);
    dist_work *w = NULL;
    LOK(dist_broadcast(&t, odd[n_odd - 1], g, &w), g);
    LWAIT(w, g);
    LCHECK(v == 42, "broadcast in the odd group: %lld", (long long)v);
    LOK(dist_barrier(g, NULL), g);
  }
  SUM_IS(NULL, r, (int64_t)n * (n - 1) / 2);
  if (r >= 1) {
    dist_pg *h = NULL;
    dist_group_opts lo = {.desc = "local", .use_local_synchronization = true};
    LOK(dist_new_group(hi, (size_t)n_hi, &lo, &h), NULL);
    SUM_IS(h, r, hi_sum);
    LOK(dist_barrier(h, NULL), h);
    SUM_IS(h, 1, n_hi);
    LOK(dist_destroy_process_group(h), NULL);
  }
  SUM_IS(NULL, 1, n);
  if (r % 2) {
    SUM_IS(g, 1, n_odd);
    LOK(dist_destroy_process_group(g), NULL);
  }
  SUM_IS(NULL, r + 1, (int64_t)n * (n + 1) / 2);
  return 0;
}

/* --- split groups and subgroups ------------------------------------------ */

/* Global ranks of group g, gathered through g itself, must be want. */
static int ranks_are(const legal_env *e, dist_pg *g, const int *want, int n) {
  int64_t got[MAXR], mine = e->rank;
  dist_tensor to = dist_tensor_1d(got, DIST_INT64, n), ti = dist_tensor_1d(&mine, DIST_INT64, 1);
  LOK(dist_all_gather_into_tensor(&to, &ti, g, NULL), g);
  for (int i = 0; i < n; i++)
    LCHECK(got[i] == want[i], "group rank %d is global rank %lld, want %d", i,
           (long long)got[i], want[i]);
  LCHECK(dist_get_world_size(g) == n, "group size %d, want %d", dist_get_world_size(g), n);
  return 0;
}

/* Splits the default group into evens and odds, splits the evens again
 * leaving some ranks out, then equal subgroups (the smallest divisor of
 * the world size; singletons when it is prime) and an enumeration of
 * halves of different sizes. */
int legal_split_subgroups(const legal_env *e) {
  int n = e->world, r = e->rank;
  int ev[MAXR], od[MAXR], n_ev = 0, n_od = 0;
  for (int i = 0; i < n; i++) {
    if (i % 2)
      od[n_od++] = i;
    else
      ev[n_ev++] = i;
  }
  const int *splits[2] = {ev, od};
  size_t sizes[2] = {(size_t)n_ev, (size_t)n_od};
  dist_pg *half = NULL, *first = NULL;
  LOK(dist_split_group(NULL, splits, sizes, n_od ? 2 : 1, NULL, &half), NULL);
  if (ranks_are(e, half, r % 2 ? od : ev, r % 2 ? n_od : n_ev))
    return 1;
  if (r % 2 == 0) { /* the evens' group ranks 0 and 1 only */
    const int g01[2] = {0, 1};
    const int *sp[1] = {g01};
    size_t sz[1] = {n_ev >= 2 ? 2u : 1u};
    LOK(dist_split_group(half, sp, sz, 1, NULL, &first), half);
    LCHECK((r <= 2) == (first != DIST_GROUP_NON_MEMBER), "membership of the split of a split");
    if (r <= 2 && ranks_are(e, first, ev, (int)sz[0]))
      return 1;
  }
  SUM_IS(NULL, 1, n);

  int size = 1;
  for (int d = 2; d <= n; d++)
    if (n % d == 0 && d < n) {
      size = d;
      break;
    }
  dist_pg *cur = NULL, **all = NULL;
  size_t n_all = 0;
  LOK(dist_new_subgroups(size, NULL, &cur, &all, &n_all), NULL);
  LCHECK(n_all == (size_t)(n / size) && cur == all[r / size], "new_subgroups(%d): %zu groups",
         size, n_all);
  dist_free(all);
  int mine[MAXR];
  for (int i = 0; i < size; i++)
    mine[i] = r / size * size + i;
  if (ranks_are(e, cur, mine, size))
    return 1;
  SUM_IS(cur, r, (int64_t)size * (mine[0] + mine[size - 1]) / 2);

  int lo[MAXR], hi[MAXR], k = (n + 1) / 2;
  for (int i = 0; i < n; i++)
    (i < k ? lo : hi)[i < k ? i : i - k] = i;
  const int *en[2] = {lo, hi};
  size_t en_sz[2] = {(size_t)k, (size_t)(n - k)};
  LOK(dist_new_subgroups_by_enumeration(en, en_sz, n - k ? 2 : 1, NULL, &cur, NULL, NULL),
      NULL);
  if (ranks_are(e, cur, r < k ? lo : hi, r < k ? k : n - k))
    return 1;
  SUM_IS(NULL, 1, n);
  return 0;
}

/* --- byte blobs ------------------------------------------------------------ */

/* Rank i's blob: i * 5 bytes (rank 0's is empty), a pattern of i. */
static size_t blob(int i, int salt, char *buf) {
  size_t len = (size_t)(i * 5);
  for (size_t k = 0; k < len; k++)
    buf[k] = (char)('a' + (i * 7 + salt + (int)k) % 26);
  return len;
}

static int same_blob(const legal_env *e, int line, const char *what, const dist_bytes *got,
                     int i, int salt) {
  char want[5 * MAXR];
  size_t len = blob(i, salt, want);
  if (got->len != len || (len && memcmp(got->data, want, len)))
    return legal_fail(e, __FILE__, line, "%s: the blob of rank %d has %zu bytes, want %zu%s",
                      what, i, got->len, len, got->len == len ? " (content differs)" : "");
  return 0;
}
#define SAME_BLOB(what, got, i, salt)                         \
  do {                                                        \
    if (same_blob(e, __LINE__, (what), (got), (i), (salt)))   \
      return 1;                                               \
  } while (0)

int legal_objects(const legal_env *e) {
  int n = e->world, r = e->rank;
  char mine[5 * MAXR], parts[MAXR][5 * MAXR];
  dist_bytes in = {mine, blob(r, 0, mine)}, b = {NULL, 0}, out[MAXR], got;
  if (r == n - 1)
    b = in;
  LOK(dist_broadcast_bytes(&b, n - 1, NULL), NULL);
  SAME_BLOB("broadcast_bytes", &b, n - 1, 0);
  if (r != n - 1)
    dist_free(b.data);
  LOK(dist_all_gather_bytes(&in, out, NULL), NULL);
  for (int i = 0; i < n; i++) {
    SAME_BLOB("all_gather_bytes", &out[i], i, 0);
    dist_free(out[i].data);
  }
  int dst = n / 2;
  LOK(dist_gather_bytes(&in, r == dst ? out : NULL, dst, NULL), NULL);
  for (int i = 0; r == dst && i < n; i++) {
    SAME_BLOB("gather_bytes", &out[i], i, 0);
    dist_free(out[i].data);
  }
  dist_bytes list[MAXR];
  for (int i = 0; i < n; i++)
    list[i] = (dist_bytes){parts[i], blob(i, 3, parts[i])};
  LOK(dist_scatter_bytes(&got, r == 0 ? list : NULL, 0, NULL), NULL);
  SAME_BLOB("scatter_bytes", &got, r, 3);
  dist_free(got.data);
  if (n > 1) { /* a ring of blocking sends: rank 0 sends first, the others receive first */
    int next = (r + 1) % n, prev = (r + n - 1) % n, src = -1;
    if (r == 0)
      LOK(dist_send_bytes(&in, next, NULL), NULL);
    LOK(dist_recv_bytes(&got, prev, NULL, &src), NULL);
    LCHECK(src == prev, "recv_bytes from %d, want %d", src, prev);
    SAME_BLOB("recv_bytes", &got, prev, 0);
    dist_free(got.data);
    if (r != 0)
      LOK(dist_send_bytes(&in, next, NULL), NULL);
  }
  SUM_IS(NULL, 1, n);
  return 0;
}

/* --- a group made and destroyed in a loop ------------------------------- */

/* Twenty rounds: a group of every rank, a group of some ranks (every rank
 * creates it), a group with local synchronisation (only its members create
 * it); each used, then destroyed. */
int legal_group_loop(const legal_env *e) {
  int n = e->world, r = e->rank;
  for (int i = 0; i < 20; i++) {
    int members[MAXR], m = 0;
    int64_t sum = 0;
    for (int k = 0; k < n; k++)
      if (i % 3 == 0 || (k + i) % 2 == 0 || n == 1)
        members[m++] = k, sum += k;
    bool in = false;
    for (int k = 0; k < m; k++)
      in |= members[k] == r;
    dist_group_opts o = {.desc = "loop", .use_local_synchronization = i % 3 == 2};
    if (!in && o.use_local_synchronization)
      continue;
    dist_pg *g = NULL;
    LOK(dist_new_group(members, (size_t)m, &o, &g), NULL);
    LCHECK(in == (g != DIST_GROUP_NON_MEMBER), "round %d: membership", i);
    if (!in)
      continue;
    SUM_IS(g, r, sum);
    LOK(dist_destroy_process_group(g), NULL);
  }
  SUM_IS(NULL, r, (int64_t)n * (n - 1) / 2);
  return 0;
}

/* --- init, destroy, init again ------------------------------------------ */

int legal_reinit(const legal_env *e) {
  int n = e->world, r = e->rank;
  for (int round = 0; round < 2; round++) {
    dist_pg *g = NULL;
    LOK(dist_new_group(NULL, 0, NULL, &g), NULL);
    SUM_IS(NULL, r + round, (int64_t)n * (n - 1) / 2 + n * round);
    SUM_IS(g, 1, n);
    LOK(dist_destroy_process_group(NULL), NULL); // every group, the default one too
    LCHECK(!dist_is_initialized(), "still initialised after destroy");
    LOK(e->reinit(e->arg), NULL);
    LCHECK(dist_get_rank(NULL) == r && dist_get_world_size(NULL) == n,
           "rank %d of %d after init again", dist_get_rank(NULL), dist_get_world_size(NULL));
    SUM_IS(NULL, r, (int64_t)n * (n - 1) / 2);
  }
  return 0;
}

const legal_pattern legal_patterns[] = {
    {"uneven all_gather, reduce_scatter and all_to_all_single", legal_uneven},
    {"barrier and monitored_barrier", legal_barriers},
    {"batched point-to-point", legal_batch_p2p},
    {"async on two groups in different orders", legal_async_two_groups},
    {"ranks outside a group call nothing", legal_outsiders},
    {"split groups and subgroups", legal_split_subgroups},
    {"byte-blob collectives", legal_objects},
    {"a group created and destroyed in a loop", legal_group_loop},
    {"init, destroy and init again", legal_reinit},
    {NULL, NULL},
};
