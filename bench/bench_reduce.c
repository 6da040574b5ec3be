/* bench_reduce.c - speed of the CPU backend's reduction kernels.
 *
 * Prints CSV: system,op,dtype,nsrc,bytes,median_us,GBps
 *   system   libdist, or plain_c for the reference loop c[i] = a[i] + b[i]
 *            (-O3, AVX2 where available: the machine's "c = a + b" rate)
 *   op       SUM (dst apart from the sources), SUM_inplace (dst is
 *            srcs[0], as an all-reduce reducing into its own buffer),
 *            SUM_step (dist__reduce_begin/step/end, as an algorithm that
 *            receives inputs one by one: dst is the accumulator, except
 *            for bfloat16, which needs a float32 one)
 *   bytes    the size of one vector; GBps = bytes / median time, i.e.
 *            bytes of result per second (the figure BASELINES.md gives
 *            for "c = a + b").
 * Each row is the median over many samples; a sample repeats the call
 * enough times to last at least 50 us, so 4-byte calls are timed too.
 * Single-threaded; a few seconds in all. Never part of the test run. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "reduce/reduce.h"
#include "base/dist_int.h"

#define MAX_SRC 4

static const size_t default_sizes[] = {4, 1024, 65536, 1048576, 16777216};

typedef struct bench {
  dist_dtype dt;
  int nsrc;
  size_t n; /* elements */
  void *src[MAX_SRC], *dst, *acc;
  const void *srcs[MAX_SRC];
} bench;

typedef enum { V_SUM, V_INPLACE, V_STEP, V_PLAIN } variant;
static const char *const variant_names[] = {"SUM", "SUM_inplace", "SUM_step", "SUM"};

/* The reference loop, built like the baseline probe (-O3, an AVX2 clone
 * as the kernels have; none under TSan, whose runtime is not up when the
 * loader runs ifunc resolvers). */
#if defined(__x86_64__) && !defined(__clang__) && !defined(__SANITIZE_THREAD__)
#define PLAIN_CLONES target_clones("avx2", "default"),
#else
#define PLAIN_CLONES
#endif
__attribute__((optimize("O3"), PLAIN_CLONES noinline)) static void
plain_sum(float *restrict c, const float *restrict a, const float *restrict b, size_t n) {
  for (size_t i = 0; i < n; i++)
    c[i] = a[i] + b[i];
}

static int run_once(bench *b, variant v) {
  switch (v) {
  case V_SUM: return dist__reduce_multi(b->dt, DIST_SUM, b->dst, b->srcs, b->nsrc, b->n, 1);
  case V_INPLACE: return dist__reduce_multi(b->dt, DIST_SUM, b->src[0], b->srcs, b->nsrc, b->n, 1);
  case V_STEP: { /* a float32 accumulator for bfloat16, else dst accumulates */
    void *acc = b->dt == DIST_BFLOAT16 ? b->acc : b->dst;
    int rc = dist__reduce_begin(b->dt, DIST_SUM, acc, b->srcs[0], b->n);
    for (int j = 1; j < b->nsrc && rc == DIST_OK; j++)
      rc = dist__reduce_step(b->dt, DIST_SUM, acc, b->srcs[j], b->n);
    return rc != DIST_OK ? rc : dist__reduce_end(b->dt, DIST_SUM, b->dst, acc, b->n, 1);
  }
  case V_PLAIN: plain_sum(b->dst, b->srcs[0], b->srcs[1], b->n); return DIST_OK;
  }
  return DIST_E_INVAL;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* Median microseconds per call. */
static double measure(bench *b, variant v, int samples) {
  long reps = 1;
  for (;;) { /* calibrate: one sample lasts >= 50 us */
    int64_t t0 = dist__now_ns();
    for (long r = 0; r < reps; r++)
      run_once(b, v);
    if (dist__now_ns() - t0 >= 50000 || reps >= (1l << 24))
      break;
    reps *= 2;
  }
  double *t = malloc(sizeof(double) * (size_t)samples);
  for (int s = 0; s < samples; s++) {
    int64_t t0 = dist__now_ns();
    for (long r = 0; r < reps; r++)
      run_once(b, v);
    t[s] = (double)(dist__now_ns() - t0) / 1e3 / (double)reps;
  }
  qsort(t, (size_t)samples, sizeof(double), cmp_double);
  double med = t[samples / 2];
  free(t);
  return med;
}

/* Inputs near 1 (no subnormals or overflow however often SUM_inplace adds). */
static void fill(void *p, dist_dtype dt, size_t n, int j) {
  for (size_t i = 0; i < n; i++) {
    if (dt == DIST_FLOAT32) {
      ((float *)p)[i] = 1.0f + (float)((i + (size_t)j) % 7) / 8;
    } else if (dt == DIST_BFLOAT16) {
      ((uint16_t *)p)[i] = (uint16_t)(0x3f80 + (i + (size_t)j) % 7);
    } else {
      ((int64_t *)p)[i] = (int64_t)(i * 3 + (size_t)j);
    }
  }
}

static void *xalloc(size_t n) {
  void *p = aligned_alloc(64, (n + 63) / 64 * 64);
  if (!p) {
    fprintf(stderr, "bench_reduce: out of memory\n");
    exit(1);
  }
  return p;
}

static void row(dist_dtype dt, int nsrc, size_t bytes, variant v, int samples) {
  bench b = {.dt = dt, .nsrc = nsrc, .n = bytes / dist_dtype_size(dt)};
  if (b.n == 0)
    b.n = 1;
  size_t len = b.n * dist_dtype_size(dt);
  for (int j = 0; j < nsrc; j++) {
    b.src[j] = xalloc(len);
    fill(b.src[j], dt, b.n, j);
    b.srcs[j] = b.src[j];
  }
  b.dst = xalloc(len);
  b.acc = xalloc(dist__reduce_acc_size(dt, b.n));
  memset(b.dst, 0, len);
  memset(b.acc, 0, dist__reduce_acc_size(dt, b.n));
  int rc = run_once(&b, v);
  if (rc != DIST_OK) {
    fprintf(stderr, "bench_reduce: %s: %s\n", dist_status_name(rc), dist_last_errmsg());
    exit(1);
  }
  double us = measure(&b, v, samples);
  printf("%s,%s,%s,%d,%zu,%.4f,%.3f\n", v == V_PLAIN ? "plain_c" : "libdist", variant_names[v],
         dist_dtype_name(dt), nsrc, len, us, (double)len / (us * 1e3));
  fflush(stdout);
  for (int j = 0; j < nsrc; j++)
    free(b.src[j]);
  free(b.dst);
  free(b.acc);
}

static void usage(FILE *f) {
  fprintf(f, "usage: bench_reduce [--sizes B,B,...] [--samples N]\n"
             "Times the reduction kernels of the CPU backend (SUM of float32,\n"
             "bfloat16 and int64 with 2 and 4 sources, out of place, in place\n"
             "and in the step form) and prints CSV:\n"
             "  system,op,dtype,nsrc,bytes,median_us,GBps\n"
             "default sizes: 4,1024,65536,1048576,16777216; default samples: 31\n");
}

int main(int argc, char **argv) {
  size_t sizes[16];
  size_t nsizes = sizeof default_sizes / sizeof default_sizes[0];
  int samples = 31;
  memcpy(sizes, default_sizes, sizeof default_sizes);
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      usage(stdout);
      return 0;
    } else if (!strcmp(argv[i], "--sizes") && i + 1 < argc) {
      nsizes = 0;
      for (char *tok = strtok(argv[++i], ","); tok && nsizes < 16; tok = strtok(NULL, ","))
        sizes[nsizes++] = strtoull(tok, NULL, 0);
    } else if (!strcmp(argv[i], "--samples") && i + 1 < argc) {
      samples = atoi(argv[++i]);
      if (samples < 1)
        samples = 1;
    } else {
      usage(stderr);
      return 2;
    }
  }
  static const dist_dtype dts[] = {DIST_FLOAT32, DIST_BFLOAT16, DIST_INT64};
  printf("system,op,dtype,nsrc,bytes,median_us,GBps\n");
  for (size_t s = 0; s < nsizes; s++) {
    row(DIST_FLOAT32, 2, sizes[s], V_PLAIN, samples);
    for (size_t d = 0; d < sizeof dts / sizeof dts[0]; d++) {
      for (int v = V_SUM; v <= V_STEP; v++)
        row(dts[d], 2, sizes[s], (variant)v, samples);
      row(dts[d], 4, sizes[s], V_SUM, samples);
      row(dts[d], 4, sizes[s], V_INPLACE, samples);
    }
  }
  return 0;
}
