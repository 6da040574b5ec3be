/* bench_shm.c - micro benchmark of the shared-memory collective engine
 * alone (core/src/backends/cpu/shm.h): forks N ranks on this host, builds the
 * engine over a file store and calls dist__shm_run directly, so the
 * figures show the engine without the process-group layer above it.
 *
 * Prints CSV from rank 0 (header first):
 *   system,transport,op,bytes,ranks,median_us,algbw_GBps
 * bytes follows the peers' MPI benchmark (shared/peers/mpi/bench.c, itself
 * nccl-tests): the full per-rank vector for all_reduce, broadcast and
 * all_to_all, the gathered output for all_gather, the full input for
 * reduce_scatter; float32 elements for the reductions, bytes otherwise.
 * Timing follows it too: batches of back-to-back calls (>= 20 calls,
 * >= 50 us, <= 2 ms), per-call time of a batch, the maximum over ranks,
 * the median over batches (time_it below).
 *
 * usage: bench_shm [--ranks N] [--ops a,b] [--sizes a,b] [--target-ms T]
 *                  [--no-pin] [--help] */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "backends/cpu/shm.h"

typedef struct bench {
  int rank, n;
  dist__shm *shm;
  dist__cpu_group *g;
  uint64_t seq;
  char ops[256];
  size_t sizes[32];
  int nsizes;
  double target_ms;
  bool pin;
  const char *dir;
} bench;

static double now_us(void) { return (double)dist__now_ns() / 1e3; }

static int run(bench *b, dist_coll *c) {
  dist__errbuf err;
  dist__err_clear(&err);
  c->seq = ++b->seq;
  c->timeout_ms = 60000;
  dist__cpu_op op = {c, dist__now_ms() + 60000, &err, -1};
  int rc = dist__shm_run(b->shm, &op);
  if (rc != DIST_OK) {
    fprintf(stderr, "rank %d: %s failed: %s\n", b->rank, dist_op_name(c->kind), err.msg);
    exit(1);
  }
  return rc;
}

/* Element-wise maximum over ranks, through the engine itself. */
static void max_over_ranks(bench *b, double *v, size_t n) {
  dist_tensor t = dist_tensor_1d(v, DIST_FLOAT64, (int64_t)n);
  dist_coll c = {.kind = DIST_OP_ALL_REDUCE, .inputs = &t, .n_inputs = 1, .outputs = &t,
                 .n_outputs = 1, .redop = DIST_MAX, .root = -1};
  run(b, &c);
}

static int cmp_d(const void *x, const void *y) {
  double a = *(const double *)x, c = *(const double *)y;
  return (a > c) - (a < c);
}

static double time_it(bench *b, dist_coll *c) {
  for (int i = 0; i < 3; i++)
    run(b, c);
  double t0 = now_us();
  for (int i = 0; i < 5; i++)
    run(b, c);
  double est = (now_us() - t0) / 5;
  max_over_ranks(b, &est, 1);
  est = est < 0.01 ? 0.01 : est;
  double batch = 20 * est < 50 ? 50 : 20 * est > 2000 ? 2000 : 20 * est;
  int B = (int)(batch / est + 0.999), S = (int)(b->target_ms * 1000 / (est * B));
  B = B < 1 ? 1 : B > 10000 ? 10000 : B;
  S = S < 15 ? 15 : S > 400 ? 400 : S;
  for (int i = 0; i < 2 * B; i++)
    run(b, c);
  double *t = malloc(sizeof(double) * (size_t)S);
  for (int s = 0; s < S; s++) {
    double t1 = now_us();
    for (int i = 0; i < B; i++)
      run(b, c);
    t[s] = (now_us() - t1) / B;
  }
  max_over_ranks(b, t, (size_t)S);
  qsort(t, (size_t)S, sizeof *t, cmp_d);
  double med = S & 1 ? t[S / 2] : 0.5 * (t[S / 2 - 1] + t[S / 2]);
  free(t);
  return med;
}

static void report(const bench *b, const char *op, size_t bytes, double us) {
  if (b->rank == 0)
    printf("libdist,shm,%s,%zu,%d,%.3f,%.6f\n", op, bytes, b->n, us,
           us > 0 ? (double)bytes / (us * 1e-6) / 1e9 : 0.0);
  fflush(stdout);
}

static bool want(const bench *b, const char *op) {
  if (!b->ops[0])
    return true;
  char buf[256];
  snprintf(buf, sizeof buf, "%s", b->ops);
  for (char *save, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save))
    if (!strcmp(t, op))
      return true;
  return false;
}

/* One size: every op of the list that is wanted. in/out hold >= size
 * bytes plus room for the per-rank tensors. */
static void one_size(bench *b, size_t bytes, uint8_t *in, uint8_t *out) {
  int n = b->n;
  size_t nf = bytes / 4 ? bytes / 4 : 1, per = bytes / (size_t)n ? bytes / (size_t)n : 1;
  dist_tensor ti = dist_tensor_1d(in, DIST_FLOAT32, (int64_t)nf), to;
  dist_coll c = {.root = 0, .redop = DIST_SUM, .inputs = &ti, .n_inputs = 1, .outputs = &ti,
                 .n_outputs = 1};
  if (want(b, "all_reduce")) {
    c.kind = DIST_OP_ALL_REDUCE;
    report(b, "all_reduce", nf * 4, time_it(b, &c));
  }
  if (want(b, "reduce_scatter")) {
    size_t pf = nf / (size_t)n ? nf / (size_t)n : 1;
    ti = dist_tensor_1d(in, DIST_FLOAT32, (int64_t)(pf * (size_t)n));
    to = dist_tensor_1d(out, DIST_FLOAT32, (int64_t)pf);
    c.kind = DIST_OP_REDUCE_SCATTER_TENSOR;
    c.outputs = &to;
    report(b, "reduce_scatter", pf * (size_t)n * 4, time_it(b, &c));
  }
  if (want(b, "broadcast")) {
    ti = dist_tensor_1d(in, DIST_UINT8, (int64_t)bytes);
    c.kind = DIST_OP_BROADCAST;
    c.outputs = &ti;
    report(b, "broadcast", bytes, time_it(b, &c));
  }
  if (want(b, "all_gather")) {
    ti = dist_tensor_1d(in, DIST_UINT8, (int64_t)per);
    to = dist_tensor_1d(out, DIST_UINT8, (int64_t)(per * (size_t)n));
    c.kind = DIST_OP_ALL_GATHER_INTO_TENSOR;
    c.outputs = &to;
    report(b, "all_gather", per * (size_t)n, time_it(b, &c));
  }
  if (want(b, "all_to_all")) {
    ti = dist_tensor_1d(in, DIST_UINT8, (int64_t)(per * (size_t)n));
    to = dist_tensor_1d(out, DIST_UINT8, (int64_t)(per * (size_t)n));
    c.kind = DIST_OP_ALL_TO_ALL_SINGLE;
    c.outputs = &to;
    report(b, "all_to_all", per * (size_t)n, time_it(b, &c));
  }
}

static int setup(bench *b, dist_store **store) {
  char path[512], key[32], host[64];
  snprintf(path, sizeof path, "%s/store", b->dir);
  if (dist_store_file_create(path, b->n, store) != DIST_OK)
    return 1;
  dist__cpu_group *g = calloc(1, sizeof *g);
  g->peers = calloc((size_t)b->n, sizeof *g->peers);
  g->global_ranks = calloc((size_t)b->n, sizeof(int));
  g->rank = g->global_rank = b->rank;
  g->size = b->n;
  g->same_host = true;
  g->timeout_ms = 60000;
  snprintf(g->name, sizeof g->name, "bench");
  snprintf(g->job_id, sizeof g->job_id, "bench%d", (int)getppid());
  snprintf(key, sizeof key, "pid/%d", b->rank);
  int pid = (int)getpid();
  dist_store_set(*store, key, &pid, sizeof pid);
  for (int r = 0; r < b->n; r++) {
    void *v;
    size_t len;
    snprintf(key, sizeof key, "pid/%d", r);
    if (dist_store_get(*store, key, &v, &len) != DIST_OK)
      return 1;
    memcpy(&g->peers[r].pid, v, sizeof(int));
    dist_free(v);
    g->peers[r].global_rank = g->global_ranks[r] = r;
    gethostname(host, sizeof host);
    snprintf(g->peers[r].host, sizeof g->peers[r].host, "%s", host);
  }
  b->g = g;
  dist__errbuf err;
  dist__err_clear(&err);
  if (dist__shm_create(g, *store, dist__now_ms() + 30000, &b->shm, &err) != DIST_OK) {
    fprintf(stderr, "rank %d: %s\n", b->rank, err.msg);
    return 1;
  }
  return 0;
}

static int rank_main(bench *b) {
  if (b->pin) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(b->rank % (int)sysconf(_SC_NPROCESSORS_ONLN), &set);
    sched_setaffinity(0, sizeof set, &set);
  }
  dist_store *store;
  if (setup(b, &store))
    return 1;
  size_t maxb = 0;
  for (int i = 0; i < b->nsizes; i++)
    maxb = b->sizes[i] > maxb ? b->sizes[i] : maxb;
  size_t alloc = maxb + 64 * (size_t)b->n;
  uint8_t *in = aligned_alloc(4096, (alloc + 4095) / 4096 * 4096);
  uint8_t *out = aligned_alloc(4096, (alloc + 4095) / 4096 * 4096);
  for (size_t i = 0; i < alloc / 4; i++)
    ((float *)in)[i] = 1.0f;
  memset(out, 0, alloc);
  if (b->rank == 0)
    printf("system,transport,op,bytes,ranks,median_us,algbw_GBps\n");
  for (int i = 0; i < b->nsizes; i++)
    one_size(b, b->sizes[i], in, out);
  if (want(b, "barrier")) {
    dist_coll c = {.kind = DIST_OP_BARRIER, .root = -1};
    report(b, "barrier", 0, time_it(b, &c));
  }
  dist__shm_destroy(b->shm);
  dist_store_destroy(store);
  free(in);
  free(out);
  return 0;
}

static void usage(void) {
  printf("usage: bench_shm [--ranks N] [--ops a,b] [--sizes a,b] [--target-ms T] [--no-pin]\n"
         "ops: all_reduce,reduce_scatter,broadcast,all_gather,all_to_all,barrier\n");
}

int main(int argc, char **argv) {
  bench b = {.n = 2, .target_ms = 300, .pin = true,
             .sizes = {4, 1024, 65536, 1 << 20, 16 << 20, 64 << 20}, .nsizes = 6};
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : "";
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      usage();
      return 0;
    } else if (!strcmp(a, "--no-pin")) {
      b.pin = false;
    } else if (!strcmp(a, "--ranks")) {
      b.n = atoi(v), i++;
    } else if (!strcmp(a, "--ops")) {
      snprintf(b.ops, sizeof b.ops, "%s", v), i++;
    } else if (!strcmp(a, "--target-ms")) {
      b.target_ms = atof(v), i++;
    } else if (!strcmp(a, "--sizes")) {
      char buf[512];
      snprintf(buf, sizeof buf, "%s", v);
      b.nsizes = 0;
      for (char *save, *t = strtok_r(buf, ",", &save); t && b.nsizes < 32;
           t = strtok_r(NULL, ",", &save))
        b.sizes[b.nsizes++] = strtoull(t, NULL, 0);
      i++;
    } else {
      fprintf(stderr, "bench_shm: unknown option %s\n", a);
      usage();
      return 2;
    }
  }
  if (b.n < 1 || b.n > 64) {
    fprintf(stderr, "bench_shm: --ranks must be 1..64\n");
    return 2;
  }
  char tmpl[] = "/tmp/bench-shm-XXXXXX";
  b.dir = mkdtemp(tmpl);
  if (!b.dir)
    return 1;
  fflush(stdout);
  for (int r = 0; r < b.n; r++)
    if (fork() == 0) {
      b.rank = r;
      _exit(rank_main(&b));
    }
  int bad = 0, st;
  while (wait(&st) > 0)
    bad |= !WIFEXITED(st) || WEXITSTATUS(st) != 0;
  char path[600];
  snprintf(path, sizeof path, "%s/store", b.dir);
  unlink(path);
  rmdir(b.dir);
  return bad;
}
