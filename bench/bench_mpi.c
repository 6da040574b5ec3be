/* bench_mpi.c - the mpi backend's collectives, for comparison with Open
 * MPI's own (shared/peers/mpi) and the cpu backend (bench_collectives).
 *
 *   mpirun -np 2 build/bin/bench_mpi [--raw] [--sizes 65536,1048576] [--ops allreduce]
 *
 * Rank 0 prints CSV rows without a header, in the peers' format:
 *   libdist-mpi,mpi,op,bytes,ranks,median_us,algbw_GBps,throughput
 * Sizes and the meaning of bytes follow the peer benchmark (nccl-tests):
 * the per-rank vector for allreduce and broadcast, the gathered output for
 * allgather, the full input for reduce_scatter and alltoall; float32 SUM
 * for reductions, bytes otherwise. Timing is the peer's throughput mode:
 * calls back to back in batches of about 20 calls (50 us to 2 ms), about
 * 300 ms of samples, the per-sample maximum over ranks, the median over
 * samples. Separate from bench_collectives so the two evolve apart.
 *
 * With --raw (built with MPI) each measurement alternates with the same
 * call made directly on MPI_COMM_WORLD (system "openmpi-raw"), three times
 * each, and the median of the three medians is printed for both: on a
 * loaded machine the two then see the same load, which separate runs of
 * the peers' benchmark do not. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <dist/dist.h>
#ifdef DIST_BENCH_MPI_RAW
#include <mpi.h>
#endif

typedef struct bench {
  const char *op;
  bool raw; /* call MPI directly instead */
  dist_tensor in, out;
  dist_tensor *list; /* allgather: outputs */
  int world, rank;
} bench;

static double now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec * 1e-3;
}

static void die(const char *what, int rc) {
  fprintf(stderr, "bench_mpi: %s: %s: %s\n", what, dist_status_name(rc), dist_pg_errmsg(NULL));
  exit(1);
}

#ifdef DIST_BENCH_MPI_RAW
/* The same operation as MPI's own call on MPI_COMM_WORLD (the peers'
 * benchmark's calls; the all_reduce in place, as dist_all_reduce). */
static void run_raw(bench *b) {
  int n = (int)dist_tensor_numel(&b->in), m = (int)dist_tensor_numel(&b->out);
  if (!strcmp(b->op, "allreduce"))
    MPI_Allreduce(MPI_IN_PLACE, b->in.data, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  else if (!strcmp(b->op, "broadcast"))
    MPI_Bcast(b->in.data, n, MPI_BYTE, 0, MPI_COMM_WORLD);
  else if (!strcmp(b->op, "allgather"))
    MPI_Allgather(b->in.data, n, MPI_BYTE, b->out.data, n, MPI_BYTE, MPI_COMM_WORLD);
  else if (!strcmp(b->op, "reduce_scatter"))
    MPI_Reduce_scatter_block(b->in.data, b->out.data, m, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  else
    MPI_Alltoall(b->in.data, n / b->world, MPI_BYTE, b->out.data, n / b->world, MPI_BYTE,
                 MPI_COMM_WORLD);
}
#endif

static void run_op(bench *b) {
#ifdef DIST_BENCH_MPI_RAW
  if (b->raw) {
    run_raw(b);
    return;
  }
#endif
  int rc;
  if (!strcmp(b->op, "allreduce"))
    rc = dist_all_reduce(&b->in, DIST_SUM, NULL, NULL);
  else if (!strcmp(b->op, "broadcast"))
    rc = dist_broadcast(&b->in, 0, NULL, NULL);
  else if (!strcmp(b->op, "allgather"))
    rc = dist_all_gather_into_tensor(&b->out, &b->in, NULL, NULL);
  else if (!strcmp(b->op, "reduce_scatter"))
    rc = dist_reduce_scatter_tensor(&b->out, &b->in, DIST_SUM, NULL, NULL);
  else
    rc = dist_all_to_all_single(&b->out, &b->in, NULL, NULL, NULL, NULL);
  if (rc != DIST_OK)
    die(b->op, rc);
}

static int cmp_d(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double max_over_ranks(double *v, int n) {
  dist_tensor t = dist_tensor_1d(v, DIST_FLOAT64, n);
  int rc = dist_all_reduce(&t, DIST_MAX, NULL, NULL);
  if (rc != DIST_OK)
    die("max over ranks", rc);
  return v[0];
}

static double time_it(bench *b) {
  for (int i = 0; i < 3; i++)
    run_op(b);
  double t0 = now_us();
  for (int i = 0; i < 5; i++)
    run_op(b);
  double est = (now_us() - t0) / 5.0;
  est = max_over_ranks(&est, 1);
  double batch_us = 20.0 * est < 50.0 ? 50.0 : 20.0 * est > 2000.0 ? 2000.0 : 20.0 * est;
  int B = (int)(batch_us / est + 0.999), S = (int)(300000.0 / (est * B));
  B = B < 1 ? 1 : B;
  S = S < 15 ? 15 : S > 400 ? 400 : S;
  for (int i = 0; i < 2 * B; i++)
    run_op(b);
  double *t = malloc(sizeof(double) * (size_t)S);
  dist_barrier(NULL, NULL);
  for (int s = 0; s < S; s++) {
    double t1 = now_us();
    for (int k = 0; k < B; k++)
      run_op(b);
    t[s] = (now_us() - t1) / B;
  }
  max_over_ranks(t, S);
  qsort(t, (size_t)S, sizeof(double), cmp_d);
  double med = (S & 1) ? t[S / 2] : 0.5 * (t[S / 2 - 1] + t[S / 2]);
  free(t);
  return med;
}

static double median3(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp_d);
  return v[n / 2];
}

static void report(const char *sys, const char *op, size_t bytes, int world, double us) {
  printf("%s,mpi,%s,%zu,%d,%.3f,%.6f,throughput\n", sys, op, bytes, world, us,
         us > 0 ? (double)bytes / (us * 1e-6) / 1e9 : 0.0);
  fflush(stdout);
}

/* Sets up b for op over `bytes` (the peer's meaning); returns the bytes
 * reported. */
static size_t setup(bench *b, const char *op, size_t bytes, char *in, char *out) {
  size_t nf = bytes / 4 ? bytes / 4 : 1, W = (size_t)b->world;
  b->op = op;
  if (!strcmp(op, "allreduce")) {
    b->in = dist_tensor_1d(in, DIST_FLOAT32, (int64_t)nf);
    return nf * 4;
  }
  if (!strcmp(op, "reduce_scatter")) {
    size_t per = nf / W ? nf / W : 1;
    b->in = dist_tensor_1d(in, DIST_FLOAT32, (int64_t)(per * W));
    b->out = dist_tensor_1d(out, DIST_FLOAT32, (int64_t)per);
    return per * W * 4;
  }
  if (!strcmp(op, "broadcast")) {
    b->in = dist_tensor_1d(in, DIST_UINT8, (int64_t)bytes);
    return bytes;
  }
  size_t per = bytes / W ? bytes / W : 1;
  if (!strcmp(op, "allgather")) {
    b->in = dist_tensor_1d(in, DIST_UINT8, (int64_t)per);
    b->out = dist_tensor_1d(out, DIST_UINT8, (int64_t)(per * W));
  } else { /* alltoall: per bytes to each rank */
    b->in = dist_tensor_1d(in, DIST_UINT8, (int64_t)(per * W));
    b->out = dist_tensor_1d(out, DIST_UINT8, (int64_t)(per * W));
  }
  return per * W;
}

int main(int argc, char **argv) {
  size_t sizes[32] = {64 << 10, 256 << 10, 1 << 20, 4 << 20, 16 << 20};
  int nsizes = 5;
  const char *ops = "allreduce,reduce_scatter,broadcast,allgather,alltoall";
  bool raw = false;
  for (int i = 1; i < argc; i++)
    if (!strcmp(argv[i], "--raw")) {
#ifdef DIST_BENCH_MPI_RAW
      raw = true;
#else
      fprintf(stderr, "bench_mpi: --raw needs a build with MPI\n");
      return 1;
#endif
    }
  for (int i = 1; i + 1 < argc; i++) {
    if (!strcmp(argv[i], "--ops")) {
      ops = argv[++i];
    } else if (!strcmp(argv[i], "--sizes")) {
      nsizes = 0;
      char buf[512];
      snprintf(buf, sizeof buf, "%s", argv[++i]);
      for (char *s = NULL, *t = strtok_r(buf, ",", &s); t && nsizes < 32; t = strtok_r(NULL, ",", &s))
        sizes[nsizes++] = strtoull(t, NULL, 0);
    }
  }
  dist_init_opts o = dist_init_opts_default();
  o.backend = "mpi";
  int rc = dist_init_process_group(&o);
  if (rc != DIST_OK) {
    fprintf(stderr, "bench_mpi: init: %s: %s\n", dist_status_name(rc), dist_last_errmsg());
    return 1;
  }
  bench b = {.world = dist_get_world_size(NULL), .rank = dist_get_rank(NULL)};
  size_t maxb = 0;
  for (int i = 0; i < nsizes; i++)
    maxb = sizes[i] > maxb ? sizes[i] : maxb;
  size_t alloc = maxb + 64 * (size_t)b.world;
  char *in = malloc(alloc), *out = malloc(alloc);
  for (size_t i = 0; i < alloc / 4; i++)
    ((float *)in)[i] = 1.0f;
  memset(out, 0, alloc);
  static const char *all[] = {"allreduce", "reduce_scatter", "broadcast", "allgather", "alltoall"};
  for (int si = 0; si < nsizes; si++)
    for (int k = 0; k < 5; k++) {
      if (!strstr(ops, all[k]))
        continue;
      size_t bytes = setup(&b, all[k], sizes[si], in, out);
      double us[2][3];
      int rounds = raw ? 3 : 1;
      for (int r = 0; r < rounds; r++)
        for (int which = raw ? 1 : 0; which >= 0; which--) {
          b.raw = which == 1;
          us[which][r] = time_it(&b);
        }
      b.raw = false;
      for (int which = raw ? 1 : 0; which >= 0 && b.rank == 0; which--)
        report(which ? "openmpi-raw" : "libdist-mpi", all[k], bytes, b.world,
               median3(us[which], rounds));
    }
  free(in);
  free(out);
  dist_destroy_process_group(NULL);
  return 0;
}
