/* bench_collectives.c - collective latency and bandwidth, as CSV.
 *
 *     build/bin/distrun --nproc-per-node 2 build/bin/bench_collectives
 *       [--ops all_reduce,broadcast,...] [--sizes 4,1024,...] [--iters N]
 *       [--target-ms T] [--system NAME]
 *
 * Rank 0 prints `system,transport,op,bytes,ranks,median_us,algbw_GBps`:
 * bytes is each rank's input (rounded up to a multiple of the world size
 * where the op splits its input: reduce_scatter, all_to_all), algbw = bytes
 * / median time. float32 for the reductions, SUM.
 *
 * Timing follows the peers' benchmark (shared/peers/mpi/bench.c) so the
 * figures compare as ratios: after a warm-up, calls run back to back in
 * batches (at least 20 calls, 50 us to 2 ms), each sample is batch time /
 * calls, the element-wise maximum over ranks is taken and the median over
 * samples reported. --iters sets the minimum number of samples.
 *
 * The system column says what else was on: "libdist", or "libdist-detail"
 * when DIST_DEBUG=DETAIL (later: -traced, -mpi). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <dist/dist.h>

#include "pg_int.h"

static const char *const all_ops[] = {"all_reduce", "broadcast", "all_gather",
                                      "reduce_scatter", "all_to_all", "barrier"};
#define N_ALL_OPS 6

typedef struct cfg {
  char ops[512];
  size_t sizes[32];
  int n_sizes;
  int min_samples;
  double target_ms;
  char system[64];
} cfg;

typedef struct bufs {
  char *in, *out;
  size_t bytes; /* per-rank input */
  int world;
} bufs;

static double now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec * 1e-3;
}

static void die(const char *what, int rc) {
  fprintf(stderr, "bench_collectives: %s: %s: %s\n", what, dist_status_name(rc),
          dist_pg_errmsg(NULL)[0] ? dist_pg_errmsg(NULL) : dist_last_errmsg());
  exit(1);
}

#define TRY(what, call)      \
  do {                       \
    int rc_ = (call);        \
    if (rc_ != DIST_OK)      \
      die(what, rc_);        \
  } while (0)

static int cmp_d(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* One call of op on b. */
static void run_op(const char *op, bufs *b) {
  size_t nf = b->bytes / 4;
  if (!strcmp(op, "all_reduce")) {
    dist_tensor t = dist_tensor_1d(b->in, DIST_FLOAT32, (int64_t)nf);
    TRY(op, dist_all_reduce(&t, DIST_SUM, NULL, NULL));
  } else if (!strcmp(op, "broadcast")) {
    dist_tensor t = dist_tensor_1d(b->in, DIST_UINT8, (int64_t)b->bytes);
    TRY(op, dist_broadcast(&t, 0, NULL, NULL));
  } else if (!strcmp(op, "all_gather")) {
    dist_tensor in = dist_tensor_1d(b->in, DIST_UINT8, (int64_t)b->bytes);
    dist_tensor out = dist_tensor_1d(b->out, DIST_UINT8, (int64_t)b->bytes * b->world);
    TRY(op, dist_all_gather_into_tensor(&out, &in, NULL, NULL));
  } else if (!strcmp(op, "reduce_scatter")) {
    dist_tensor in = dist_tensor_1d(b->in, DIST_FLOAT32, (int64_t)nf);
    dist_tensor out = dist_tensor_1d(b->out, DIST_FLOAT32, (int64_t)nf / b->world);
    TRY(op, dist_reduce_scatter_tensor(&out, &in, DIST_SUM, NULL, NULL));
  } else if (!strcmp(op, "all_to_all")) {
    dist_tensor in = dist_tensor_1d(b->in, DIST_UINT8, (int64_t)b->bytes);
    dist_tensor out = dist_tensor_1d(b->out, DIST_UINT8, (int64_t)b->bytes);
    TRY(op, dist_all_to_all_single(&out, &in, NULL, NULL, NULL, NULL));
  } else {
    TRY(op, dist_barrier(NULL, NULL));
  }
}

/* Every rank derives the same plan from the slowest rank's estimate. */
static double time_op(const char *op, bufs *b, const cfg *c) {
  for (int i = 0; i < 3; i++)
    run_op(op, b);
  double t0 = now_us();
  for (int i = 0; i < 5; i++)
    run_op(op, b);
  double est = (now_us() - t0) / 5;
  dist_tensor te = dist_tensor_1d(&est, DIST_FLOAT64, 1);
  TRY("plan", dist_all_reduce(&te, DIST_MAX, NULL, NULL));
  est = est < 0.01 ? 0.01 : est;
  double batch_us = 20 * est < 50 ? 50 : 20 * est > 2000 ? 2000 : 20 * est;
  int calls = (int)(batch_us / est + 0.999);
  calls = calls < 1 ? 1 : calls > 10000 ? 10000 : calls;
  int samples = (int)(c->target_ms * 1000 / (est * calls));
  samples = samples < c->min_samples ? c->min_samples : samples > 400 ? 400 : samples;
  for (int i = 0; i < 2 * calls; i++)
    run_op(op, b);
  double *t = calloc((size_t)samples, sizeof *t);
  TRY("barrier", dist_barrier(NULL, NULL));
  for (int s = 0; s < samples; s++) {
    double t1 = now_us();
    for (int k = 0; k < calls; k++)
      run_op(op, b);
    t[s] = (now_us() - t1) / calls;
  }
  dist_tensor tt = dist_tensor_1d(t, DIST_FLOAT64, samples);
  TRY("gather times", dist_all_reduce(&tt, DIST_MAX, NULL, NULL));
  qsort(t, (size_t)samples, sizeof *t, cmp_d);
  double med = samples % 2 ? t[samples / 2] : (t[samples / 2 - 1] + t[samples / 2]) / 2;
  free(t);
  return med;
}

static bool wanted(const cfg *c, const char *op) {
  if (!c->ops[0])
    return true;
  char buf[512];
  snprintf(buf, sizeof buf, "%s", c->ops);
  for (char *s = NULL, *t = strtok_r(buf, ",", &s); t; t = strtok_r(NULL, ",", &s))
    if (!strcmp(t, op))
      return true;
  return false;
}

/* Input bytes of op at nominal size: whole floats, split evenly by the
 * world where the op splits its input. */
static size_t op_bytes(const char *op, size_t nominal, int world) {
  if (!strcmp(op, "barrier"))
    return 0;
  size_t unit = !strcmp(op, "all_reduce") || !strcmp(op, "reduce_scatter") ? 4 : 1;
  if (!strcmp(op, "reduce_scatter") || !strcmp(op, "all_to_all"))
    unit *= (size_t)world;
  return (nominal + unit - 1) / unit * unit;
}

static void usage(void) {
  printf("usage: distrun --nproc-per-node N bench_collectives [--ops a,b] [--sizes 4,1024]\n"
         "         [--iters MIN_SAMPLES] [--target-ms T] [--system NAME]\n"
         "ops: all_reduce, broadcast, all_gather, reduce_scatter, all_to_all, barrier\n"
         "Rank 0 prints CSV: system,transport,op,bytes,ranks,median_us,algbw_GBps\n");
}

static void parse(int argc, char **argv, cfg *c) {
  size_t dflt[] = {4, 1024, 65536, 1048576, 16777216, 67108864};
  memcpy(c->sizes, dflt, sizeof dflt);
  c->n_sizes = 6;
  c->min_samples = 15;
  c->target_ms = 300;
  snprintf(c->system, sizeof c->system, "%s",
           dist_get_debug_level() == DIST_DEBUG_DETAIL ? "libdist-detail" : "libdist");
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : "";
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      usage();
      exit(0);
    } else if (!strcmp(a, "--ops")) {
      snprintf(c->ops, sizeof c->ops, "%s", v);
    } else if (!strcmp(a, "--iters")) {
      c->min_samples = atoi(v) > 0 ? atoi(v) : 1;
    } else if (!strcmp(a, "--target-ms")) {
      c->target_ms = atof(v);
    } else if (!strcmp(a, "--system")) {
      snprintf(c->system, sizeof c->system, "%s", v);
    } else if (!strcmp(a, "--sizes")) {
      char buf[512];
      snprintf(buf, sizeof buf, "%s", v);
      c->n_sizes = 0;
      for (char *s = NULL, *t = strtok_r(buf, ",", &s); t && c->n_sizes < 32;
           t = strtok_r(NULL, ",", &s))
        c->sizes[c->n_sizes++] = strtoull(t, NULL, 0);
    } else {
      fprintf(stderr, "bench_collectives: unknown option %s\n", a);
      usage();
      exit(2);
    }
    i++;
  }
}

int main(int argc, char **argv) {
  cfg c = {0};
  dist_set_debug_level_from_env();
  parse(argc, argv, &c);
  TRY("init", dist_init_process_group(NULL));
  int rank = dist_get_rank(NULL), world = dist_get_world_size(NULL);
  dist_pg *def = dist__pg_default();
  while (def->inner) /* a checking group: the transport is its inner group's */
    def = def->inner;
  const char *transport =
      def->ops == &dist__cpu_backend_ops ? dist__cpu_backend_transport(def->priv) : def->backend;
  size_t max = 4;
  for (int i = 0; i < c.n_sizes; i++)
    max = c.sizes[i] > max ? c.sizes[i] : max;
  bufs b = {0};
  b.world = world;
  size_t alloc = (max + 64 * (size_t)world) * (size_t)world;
  b.in = calloc(1, alloc);
  b.out = calloc(1, alloc);
  for (size_t i = 0; i < alloc / 4; i++)
    ((float *)b.in)[i] = 1.0f;
  if (rank == 0) {
    printf("system,transport,op,bytes,ranks,median_us,algbw_GBps\n");
    fflush(stdout);
  }
  for (int s = 0; s < c.n_sizes; s++)
    for (int o = 0; o < N_ALL_OPS; o++) {
      const char *op = all_ops[o];
      if (!wanted(&c, op) || (!strcmp(op, "barrier") && s > 0))
        continue;
      b.bytes = op_bytes(op, c.sizes[s], world);
      double us = time_op(op, &b, &c);
      if (rank == 0) {
        printf("%s,%s,%s,%zu,%d,%.3f,%.6f\n", c.system, transport, op, b.bytes, world, us,
               us > 0 ? (double)b.bytes / us / 1e3 : 0.0);
        fflush(stdout);
      }
    }
  free(b.in);
  free(b.out);
  TRY("destroy", dist_destroy_process_group(NULL));
  return 0;
}
