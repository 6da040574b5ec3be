/* prog_soak.c - the rank program of test_soak.c (build/bin/soak_testprog,
 * linked with the bundled libdist, so the checking layer, the tracer and
 * the monitor are in it as in a user's program).
 *
 *   soak_testprog SECONDS SEED FIFO
 *
 * Runs under distrun with 4 ranks: the default group, two halves ({0,1},
 * {2,3}) and the parities ({0,2}, {1,3}). Every step draws, from SEED and
 * the step number (the same on every rank), an operation (all_reduce,
 * reduce, broadcast, all_gather_into_tensor, reduce_scatter_tensor,
 * all_to_all_single, gather, scatter, barrier, a send/recv pair), a group,
 * a dtype, a reduce op and a size (1 to 64 Ki elements, now and then up
 * to 1 Mi), fills the inputs with tests/support/ref.c's values and checks
 * every output against its reference. Every 32 steps rank 0 broadcasts
 * whether to go on (SECONDS from its start), so all ranks stop together.
 *
 * At 15 % and at 90 % of the time rank 0 prints "soak sample early" /
 * "soak sample late" and waits for one byte on FIFO: the test samples
 * every process's RSS and descriptors meanwhile. At the end each rank
 * prints "soak rank R ops N steps S" (N: operations it called, the rows
 * it must have in trace.db). A failure prints "soak rank R FAILED: ..." on
 * stderr and exits 1. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <dist/dist.h>

#include "ref.h"

#define MAX_N (1 << 20)

static int rank, world;
static long ops;
static dist_pg *groups[3]; /* default, half, parity; this rank's */
static unsigned char *in, *out, *want, *tmp;

static int fail(const char *what, int rc) {
  fprintf(stderr, "soak rank %d FAILED: %s: %s: %s\n", rank, what, dist_status_name(rc),
          dist_errmsg(rc, NULL));
  exit(1);
}

#define TRY(what, call)            \
  do {                             \
    int rc_ = (call);              \
    ops++;                         \
    if (rc_ != DIST_OK)            \
      fail(what, rc_);             \
  } while (0)

static uint64_t mix(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ULL;
  return x ^ (x >> 33);
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void check(const char *what, dist_dtype dt, const void *got, const void *exp, size_t n,
                  long step) {
  char msg[512];
  if (dist_test_compare(dt, got, exp, n, DIST_TEST_CMP_ANY_NAN, msg, sizeof msg)) {
    fprintf(stderr, "soak rank %d FAILED: step %ld %s: %s\n", rank, step, what, msg);
    exit(1);
  }
}

static const dist_dtype dtypes[] = {DIST_FLOAT32, DIST_FLOAT64, DIST_INT32, DIST_INT64,
                                    DIST_BFLOAT16, DIST_UINT8};
static const dist_redop_kind redops[] = {DIST_REDOP_SUM, DIST_REDOP_MAX, DIST_REDOP_MIN,
                                         DIST_REDOP_PRODUCT};

/* The global rank of group rank g in group kind k, for this rank's group. */
static int global_of(int k, int g) {
  if (k == 0)
    return g;
  if (k == 1)
    return (rank / 2) * 2 + g;
  return (rank % 2) + 2 * g;
}

static void step_once(long step, uint64_t seed) {
  uint64_t r = mix(seed ^ (uint64_t)step * 0x9e3779b97f4a7c15ULL);
  int kind = (int)(r % 10), gk = (int)((r >> 8) % 3);
  dist_dtype dt = dtypes[(r >> 16) % (sizeof dtypes / sizeof *dtypes)];
  dist_redop op = {.kind = redops[(r >> 24) % 4]};
  if (dist_redop_check(op, dt) != DIST_OK ||
      (op.kind == DIST_REDOP_PRODUCT && dt != DIST_FLOAT64))
    op.kind = DIST_REDOP_SUM; /* products of many values overflow the narrow types */
  size_t n = 1 + (size_t)((r >> 32) % 65536);
  if (((r >> 56) & 15) == 0)
    n = 1 + (size_t)((r >> 32) % MAX_N);
  dist_pg *g = groups[gk];
  int gs = dist_get_world_size(g), gr = dist_get_rank(g);
  int root = (int)((r >> 48) % (uint64_t)gs); /* a group rank; the API takes global ones */
  int groot = global_of(gk, root);
  size_t es = dist_dtype_size(dt);
  uint64_t s = seed + (uint64_t)step;
  if (kind == 5 || kind == 4 || kind == 6 || kind == 7)
    n = (n + (size_t)gs - 1) / (size_t)gs * (size_t)gs; /* divisible into gs chunks */
  if (n * (size_t)gs > MAX_N)
    n = MAX_N / (size_t)gs / (size_t)gs * (size_t)gs;
  dist_test_fill(in, dt, n, s, gr, 0, 0);
  dist_tensor ti = dist_tensor_1d(in, dt, (int64_t)n), to;
  switch (kind) {
  case 0: /* all_reduce */
    TRY("all_reduce", dist_all_reduce(&ti, op, g, NULL));
    dist_test_expected(dt, op, want, n, s, gs, 0, 0, gs);
    check("all_reduce", dt, in, want, n, step);
    break;
  case 1: /* reduce */
    TRY("reduce", dist_reduce(&ti, groot, op, g, NULL));
    if (gr == root) {
      dist_test_expected(dt, op, want, n, s, gs, 0, 0, gs);
      check("reduce", dt, in, want, n, step);
    }
    break;
  case 2: /* broadcast */
    TRY("broadcast", dist_broadcast(&ti, groot, g, NULL));
    dist_test_fill(want, dt, n, s, root, 0, 0);
    check("broadcast", dt, in, want, n, step);
    break;
  case 3: /* all_gather_into_tensor */
    to = dist_tensor_1d(out, dt, (int64_t)(n * (size_t)gs));
    TRY("all_gather", dist_all_gather_into_tensor(&to, &ti, g, NULL));
    for (int i = 0; i < gs; i++)
      dist_test_fill(want + (size_t)i * n * es, dt, n, s, i, 0, 0);
    check("all_gather", dt, out, want, n * (size_t)gs, step);
    break;
  case 4: { /* reduce_scatter_tensor: n elements in, n / gs out */
    size_t c = n / (size_t)gs;
    to = dist_tensor_1d(out, dt, (int64_t)c);
    TRY("reduce_scatter", dist_reduce_scatter_tensor(&to, &ti, op, g, NULL));
    dist_test_expected(dt, op, want, c, s, gs, (size_t)gr * c, 0, gs);
    check("reduce_scatter", dt, out, want, c, step);
    break;
  }
  case 5: { /* all_to_all_single, even splits */
    size_t c = n / (size_t)gs;
    to = dist_tensor_1d(out, dt, (int64_t)n);
    TRY("all_to_all", dist_all_to_all_single(&to, &ti, NULL, NULL, g, NULL));
    for (int i = 0; i < gs; i++) /* chunk gr of rank i's input */
      dist_test_fill(want + (size_t)i * c * es, dt, c, s, i, (size_t)gr * c, 0);
    check("all_to_all", dt, out, want, n, step);
    break;
  }
  case 6: { /* gather */
    dist_tensor list[4];
    for (int i = 0; i < gs; i++)
      list[i] = dist_tensor_1d(out + (size_t)i * n * es, dt, (int64_t)n);
    TRY("gather", dist_gather(&ti, gr == root ? list : NULL, gr == root ? (size_t)gs : 0, groot,
                              g, NULL));
    if (gr == root) {
      for (int i = 0; i < gs; i++)
        dist_test_fill(want + (size_t)i * n * es, dt, n, s, i, 0, 0);
      check("gather", dt, out, want, n * (size_t)gs, step);
    }
    break;
  }
  case 7: { /* scatter: root's input is gs chunks of n / gs */
    size_t c = n / (size_t)gs;
    dist_tensor list[4];
    for (int i = 0; i < gs; i++)
      list[i] = dist_tensor_1d(in + (size_t)i * c * es, dt, (int64_t)c);
    to = dist_tensor_1d(out, dt, (int64_t)c);
    TRY("scatter", dist_scatter(&to, gr == root ? list : NULL, gr == root ? (size_t)gs : 0,
                                groot, g, NULL));
    dist_test_fill(want, dt, c, s, root, (size_t)gr * c, 0);
    check("scatter", dt, out, want, c, step);
    break;
  }
  case 8:
    TRY("barrier", dist_barrier(g, NULL));
    break;
  default: { /* a send/recv pair: group rank root sends to root + 1 */
    int dst = (root + 1) % gs;
    if (gs < 2 || (gr != root && gr != dst))
      break;
    if (gr == root) {
      TRY("send", dist_send(&ti, global_of(gk, dst), g, (int)(step & 0xffff)));
    } else {
      to = dist_tensor_1d(out, dt, (int64_t)n);
      TRY("recv", dist_recv(&to, global_of(gk, root), g, (int)(step & 0xffff), NULL));
      dist_test_fill(want, dt, n, s, root, 0, 0);
      check("recv", dt, out, want, n, step);
    }
  }
  }
}

/* Rank 0 says "soak sample <when>" and waits for the test's byte. */
static void sample_point(const char *when, const char *fifo) {
  if (rank != 0)
    return;
  printf("soak sample %s\n", when);
  fflush(stdout);
  int fd = open(fifo, O_RDONLY | O_CLOEXEC);
  char c;
  if (fd < 0 || read(fd, &c, 1) != 1) {
    fprintf(stderr, "soak rank 0 FAILED: no answer on %s\n", fifo);
    exit(1);
  }
  close(fd);
}

int main(int argc, char **argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: soak_testprog SECONDS SEED FIFO\n");
    return 2;
  }
  double secs = atof(argv[1]);
  uint64_t seed = strtoull(argv[2], NULL, 10);
  dist_init_opts o = dist_init_opts_default();
  int rc = dist_init_process_group(&o);
  if (rc != DIST_OK)
    fail("init", rc);
  rank = dist_get_rank(NULL);
  world = dist_get_world_size(NULL);
  if (world != 4)
    fail("needs 4 ranks", DIST_E_INVAL);
  int halves[2][2] = {{0, 1}, {2, 3}}, parities[2][2] = {{0, 2}, {1, 3}};
  dist_pg *h[2], *p[2];
  groups[0] = NULL;
  for (int i = 0; i < 2; i++)
    if ((rc = dist_new_group(halves[i], 2, NULL, &h[i])) != DIST_OK)
      fail("new_group", rc);
  for (int i = 0; i < 2; i++)
    if ((rc = dist_new_group(parities[i], 2, NULL, &p[i])) != DIST_OK)
      fail("new_group", rc);
  groups[1] = h[rank / 2];
  groups[2] = p[rank % 2];
  in = malloc(MAX_N * 8), out = malloc(MAX_N * 8), want = malloc(MAX_N * 8);
  tmp = malloc(8);
  if (!in || !out || !want || !tmp)
    fail("malloc", DIST_E_NOMEM);
  /* Touched now (not zeros: malloc + memset 0 becomes calloc), so the early sample already counts the largest sizes'
   * pages and growth between the samples is the library's alone. */
  memset(in, 0x5a, MAX_N * 8), memset(out, 0x5a, MAX_N * 8), memset(want, 0x5a, MAX_N * 8);
  double t0 = now_s();
  bool early = false, late = false;
  long step = 0;
  for (int go = 1; go; step++) {
    step_once(step, seed);
    if (step % 32 == 31) {
      double el = now_s() - t0;
      int32_t flag[3] = {el < secs, !early && el >= 0.15 * secs, !late && el >= 0.9 * secs};
      dist_tensor f = dist_tensor_1d(flag, DIST_INT32, 3);
      TRY("broadcast of go", dist_broadcast(&f, 0, NULL, NULL));
      if (flag[1])
        sample_point("early", argv[3]), early = true;
      if (flag[2])
        sample_point("late", argv[3]), late = true;
      go = flag[0];
    }
  }
  printf("soak rank %d ops %ld steps %ld seconds %.1f\n", rank, ops, step, now_s() - t0);
  fflush(stdout);
  free(in), free(out), free(want), free(tmp);
  dist_destroy_process_group(NULL);
  return 0;
}
