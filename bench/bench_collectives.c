/* bench_collectives.c - collective latency and bandwidth, as CSV.
 *
 *     build/bin/distrun --no-prefix --nproc-per-node 2 build/bin/bench_collectives
 *       [--ops all_reduce,broadcast,...] [--sizes 4,1024,...] [--iters N]
 *       [--target-ms T] [--mode throughput|latency|both]
 *       [--latency-method osu|span] [--system NAME] [--no-observer] [--in-place]
 *       [--backend cpu|mpi]
 *   mpirun -np N bench_collectives --backend mpi [...]   (the mpi backend: libdist-mpi)
 *
 * Rank 0 prints
 * `system,transport,op,bytes,ranks,median_us,algbw_GBps,mode,out_bytes`:
 * bytes is each rank's input for every op (rounded up to a multiple of the
 * world size where the op splits its input: reduce_scatter, all_to_all),
 * out_bytes what the op writes on each rank (all_gather: bytes x ranks,
 * reduce_scatter: bytes / ranks, barrier: 0, the others: bytes), algbw =
 * bytes / median time. float32 for the reductions, SUM. MPI benchmarks
 * (OSU, shared/peers/mpi) count an allgather's gathered output: compare
 * their bytes with out_bytes there.
 *
 * Two methods, both the peers' (shared/peers/mpi/bench.c), so the figures
 * compare as ratios; a row's mode column names its method:
 *   throughput  after 20 ms of warm-up (WARM_MS: the job's start-up is
 *               over; the peers' bench warms up with 8 calls: Open
 *               MPI has no recorder or clock exchange to get past),
 *               calls run back to back in batches (at
 *               least 20 calls, 50 us to 2 ms), each sample is batch time
 *               / calls, the element-wise maximum over ranks is taken and
 *               the median over samples reported. A broadcast root that
 *               returns before its readers have the data (small broadcasts
 *               run up to 7 calls ahead) makes this a rate, not a wait.
 *   latency     OSU's way, as shared/peers' Open MPI bench: a barrier
 *               before every call, each call timed alone on every rank,
 *               the maximum over ranks per call (the time until the last
 *               rank is done: a reader's time runs until it has the data,
 *               so a root that returns early cannot flatter a broadcast),
 *               the median over calls. The root's deferred checks land in
 *               the barrier, untimed, as Open MPI's do.
 *   latency_span (--latency-method span) the time from the first rank
 *               entering the call to the last one leaving it (all ranks on
 *               one host read one clock): stricter still, it also counts
 *               how unevenly the ranks left the barrier before the call.
 * --iters sets the minimum number of samples; --mode both (the default)
 * prints a throughput row and a latency row for each op and size.
 *
 * Results are checked: the first call and the last timed call of every op,
 * size and mode run into a cleared output and every rank compares what it
 * got with what the inputs make (exactly: small integers). Inputs stay
 * constant: all_reduce works out of place, as MPI_Allreduce(send, recv)
 * does (each call copies the input into the output, then reduces there in
 * place; the copy is part of the timed call), so no value grows from call
 * to call; the other ops never write their input. --in-place times
 * all_reduce as torch's users call it, on its buffer as it is (op column
 * all_reduce_in_place): the input is put back before each latency call's
 * barrier and each throughput batch, untimed (within a batch the values
 * grow, to inf at worst, which adds as fast), and before the checked call.
 * Compare it with the shared/peers limit probe's zero-copy all_reduce,
 * which reduces vectors already in place (bench/limits_paired.sh).
 *
 * The system column says what else was on: "libdist-traced" with the
 * tracer recording (the default, as in the bundled library), "libdist"
 * with no observer registered at all (--no-observer, or DIST_TRACE=0 which
 * still registers it), "-detail" appended when DIST_DEBUG=DETAIL. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <dist/dist.h>
#include <dist/tracer.h>

#include <dist/internal/pg.h>

static const char *const all_ops[] = {"all_reduce", "broadcast", "all_gather",
                                      "reduce_scatter", "all_to_all", "barrier"};
#define N_ALL_OPS 6

enum { MODE_THROUGHPUT = 1, MODE_LATENCY = 2 };

typedef struct cfg {
  char ops[512];
  size_t sizes[32];
  int n_sizes;
  int min_samples;
  double target_ms;
  int modes; /* MODE_* bits */
  bool span; /* latency: first start to last end (one host) */
  char system[64];
  bool no_observer;
  bool in_place; /* --in-place: all_reduce on its buffer as it is (below) */
  const char *backend; /* --backend: NULL is the default (cpu) */
} cfg;

typedef struct bufs {
  char *in, *out;
  size_t bytes; /* per-rank input */
  int world, rank;
  bool in_place; /* all_reduce: no copy of the input in the call */
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

/* --- inputs and expected results ---------------------------------------- */

/* Rank r's input: small integers, so every sum is exact in float32. */
static float in_f(int r, size_t i) { return (float)((r + 1) * (int)(i % 13 + 1)); }
static unsigned char in_b(int r, size_t i) { return (unsigned char)(r * 31 + i * 7 + 1); }

static bool is_float_op(const char *op) {
  return !strcmp(op, "all_reduce") || !strcmp(op, "reduce_scatter");
}

/* This rank's input for op (a broadcast overwrites it on the others). */
static void fill_input(const char *op, bufs *b) {
  if (is_float_op(op))
    for (size_t i = 0; i < b->bytes / 4; i++)
      ((float *)b->in)[i] = in_f(b->rank, i);
  else
    for (size_t i = 0; i < b->bytes; i++)
      ((unsigned char *)b->in)[i] = in_b(b->rank, i);
}

/* Output bytes op writes on this rank. */
static size_t out_bytes(const char *op, const bufs *b) {
  if (!strcmp(op, "all_gather"))
    return b->bytes * (size_t)b->world;
  if (!strcmp(op, "reduce_scatter"))
    return b->bytes / (size_t)b->world;
  return !strcmp(op, "barrier") ? 0 : b->bytes;
}

/* The buffer op leaves its result in. */
static char *result_buf(const char *op, bufs *b) {
  return !strcmp(op, "broadcast") ? b->in : b->out;
}

/* Clears op's output so a call that writes nothing shows; a broadcast's
 * root keeps its data. */
static void clear_out(const char *op, bufs *b) {
  if (!strcmp(op, "broadcast") && b->rank == 0)
    return;
  memset(result_buf(op, b), 0xee, out_bytes(op, b));
}

/* Element i of op's result on this rank. */
static bool expected_at(const char *op, const bufs *b, size_t i) {
  const unsigned char *ob = (const unsigned char *)result_buf(op, (bufs *)b);
  const float *of = (const float *)b->out;
  int w = b->world, r = b->rank;
  float tri = (float)(w * (w + 1) / 2);
  if (!strcmp(op, "all_reduce"))
    return of[i] == tri * (float)(i % 13 + 1);
  if (!strcmp(op, "reduce_scatter")) {
    size_t blk = b->bytes / 4 / (size_t)w;
    return of[i] == tri * (float)((r * blk + i) % 13 + 1);
  }
  if (!strcmp(op, "broadcast"))
    return ob[i] == in_b(0, i);
  if (!strcmp(op, "all_gather"))
    return ob[i] == in_b((int)(i / b->bytes), i % b->bytes);
  size_t chunk = b->bytes / (size_t)w; /* all_to_all: piece r of rank i / chunk */
  return ob[i] == in_b((int)(i / chunk), (size_t)r * chunk + i % chunk);
}

/* Exits when this rank's result of op is wrong. */
static void verify(const char *op, const bufs *b, const char *which, const char *mode) {
  size_t n = out_bytes(op, b) / (is_float_op(op) ? 4 : 1);
  for (size_t i = 0; i < n; i++)
    if (!expected_at(op, b, i)) {
      fprintf(stderr, "bench_collectives: rank %d: %s of %zu bytes (%s, %s call): wrong result "
              "at element %zu\n", b->rank, op, b->bytes, mode, which, i);
      exit(1);
    }
}

/* --- the calls ------------------------------------------------------------ */

/* --in-place: puts all_reduce's input back into its buffer, outside the
 * timed call (other ops never write their input). */
static void restore_input(const char *op, bufs *b) {
  if (b->in_place && !strcmp(op, "all_reduce"))
    memcpy(b->out, b->in, b->bytes);
}

/* One call of op on b. all_reduce is out of place: the copy of the input
 * into the output is part of the call, as inside MPI_Allreduce; with
 * --in-place it reduces its buffer as it is, as a torch user calls it. */
static void run_op(const char *op, bufs *b) {
  size_t nf = b->bytes / 4;
  if (!strcmp(op, "all_reduce")) {
    if (!b->in_place)
      memcpy(b->out, b->in, b->bytes);
    dist_tensor t = dist_tensor_1d(b->out, DIST_FLOAT32, (int64_t)nf);
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

/* The first call of a measurement, into a cleared output, checked. */
static void first_call(const char *op, bufs *b, const char *mode) {
  clear_out(op, b);
  restore_input(op, b);
  run_op(op, b);
  verify(op, b, "first", mode);
}

/* Median of the samples after the element-wise maximum over ranks. */
static double median_of_max(double *t, int n) {
  dist_tensor tt = dist_tensor_1d(t, DIST_FLOAT64, n);
  TRY("gather times", dist_all_reduce(&tt, DIST_MAX, NULL, NULL));
  qsort(t, (size_t)n, sizeof *t, cmp_d);
  return n % 2 ? t[n / 2] : (t[n / 2 - 1] + t[n / 2]) / 2;
}

/* The slowest rank's estimate of one call (every rank derives the same
 * plan from it); with_barrier: as the latency mode calls it. */
static double estimate(const char *op, bufs *b, bool with_barrier) {
  double t0 = now_us();
  for (int i = 0; i < 5; i++) {
    if (with_barrier)
      TRY("barrier", dist_barrier(NULL, NULL));
    run_op(op, b);
  }
  double est = (now_us() - t0) / 5;
  dist_tensor te = dist_tensor_1d(&est, DIST_FLOAT64, 1);
  TRY("plan", dist_all_reduce(&te, DIST_MAX, NULL, NULL));
  return est;
}

/* Calls back to back until every rank has spent WARM_MS in them. A job's
 * first milliseconds carry its start-up (the recorder's first commits,
 * the clock exchange with rank 0, the monitor's first publication), and a
 * 5-call estimate that lands there plans a run of small calls too short to
 * leave it: 2 ranks' 4-byte broadcasts then measured 15-25 us a call in
 * one run of three instead of 0.3. */
#define WARM_MS 20
static void warm_up(const char *op, bufs *b) {
  double spent = 0;
  while (spent < WARM_MS * 1000) {
    double t0 = now_us();
    for (int i = 0; i < 20; i++)
      run_op(op, b);
    double dt = now_us() - t0;
    dist_tensor td = dist_tensor_1d(&dt, DIST_FLOAT64, 1);
    TRY("warm-up", dist_all_reduce(&td, DIST_MAX, NULL, NULL));
    spent += dt;
  }
}

/* Back to back, in batches: a rate. */
static double time_throughput(const char *op, bufs *b, const cfg *c) {
  first_call(op, b, "throughput");
  warm_up(op, b);
  double est = estimate(op, b, false);
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
    restore_input(op, b); /* in between, in-place values grow (to inf: as fast) */
    double t1 = now_us();
    for (int k = 0; k < calls; k++) {
      if (s == samples - 1 && k == calls - 1) {
        clear_out(op, b); /* one call of thousands: the last, checked below */
        restore_input(op, b);
      }
      run_op(op, b);
    }
    t[s] = (now_us() - t1) / calls;
  }
  verify(op, b, "last", "throughput");
  double med = median_of_max(t, samples);
  free(t);
  return med;
}

/* Per call: the slowest rank's own time (OSU), or with span (every rank
 * reading the same clock) the first start to the last end. */
static void latency_samples(double *start, double *end, int n, bool span, double *t) {
  for (int s = 0; s < n; s++)
    t[s] = end[s] - start[s];
  dist_tensor tt = dist_tensor_1d(t, DIST_FLOAT64, n);
  TRY("gather times", dist_all_reduce(&tt, DIST_MAX, NULL, NULL));
  if (!span)
    return;
  dist_tensor ts = dist_tensor_1d(start, DIST_FLOAT64, n);
  dist_tensor te = dist_tensor_1d(end, DIST_FLOAT64, n);
  TRY("gather starts", dist_all_reduce(&ts, DIST_MIN, NULL, NULL));
  TRY("gather ends", dist_all_reduce(&te, DIST_MAX, NULL, NULL));
  for (int s = 0; s < n; s++)
    t[s] = end[s] - start[s];
}

/* Every rank on this host (distrun's LOCAL_WORLD_SIZE): one clock. */
static bool one_host(int world) {
  const char *l = getenv("LOCAL_WORLD_SIZE");
  return l && atoi(l) == world;
}

/* A barrier, then one call timed alone (see the file comment). */
static double time_latency(const char *op, bufs *b, const cfg *c) {
  first_call(op, b, "latency");
  for (int i = 0; i < 2; i++)
    run_op(op, b);
  double est = estimate(op, b, true);
  est = est < 0.05 ? 0.05 : est;
  int samples = (int)(c->target_ms * 1000 / est);
  samples = samples < c->min_samples ? c->min_samples : samples > 8000 ? 8000 : samples;
  double *t = calloc((size_t)samples * 3, sizeof *t), *start = t + samples, *end = start + samples;
  for (int s = 0; s < samples; s++) {
    if (s == samples - 1)
      clear_out(op, b); /* before the barrier: untimed */
    restore_input(op, b);
    TRY("barrier", dist_barrier(NULL, NULL));
    start[s] = now_us();
    run_op(op, b);
    end[s] = now_us();
  }
  verify(op, b, "last", "latency");
  latency_samples(start, end, samples, c->span, t);
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
  printf("usage: distrun --no-prefix --nproc-per-node N bench_collectives [--ops a,b]\n"
         "         [--sizes 4,1024] [--iters MIN_SAMPLES] [--target-ms T]\n"
         "         [--mode throughput|latency|both] [--latency-method osu|span]\n"
         "         [--system NAME] [--no-observer] [--in-place] [--backend cpu|mpi]\n"
         "   or: mpirun -np N bench_collectives --backend mpi ... (system libdist-mpi)\n"
         "ops: all_reduce, broadcast, all_gather, reduce_scatter, all_to_all, barrier\n"
         "Rank 0 prints CSV: system,transport,op,bytes,ranks,median_us,algbw_GBps,mode,"
         "out_bytes\n"
         "(bytes: each rank's input; out_bytes: what the op writes on each rank)\n");
}

static void parse(int argc, char **argv, cfg *c) {
  size_t dflt[] = {4, 1024, 65536, 1048576, 16777216, 67108864};
  memcpy(c->sizes, dflt, sizeof dflt);
  c->n_sizes = 6;
  c->min_samples = 15;
  c->target_ms = 300;
  c->modes = MODE_THROUGHPUT | MODE_LATENCY;
  const char *tr = getenv("DIST_TRACE");
  bool traced = !(tr && !strcmp(tr, "0"));
  for (int i = 1; i < argc; i++)
    if (!strcmp(argv[i], "--no-observer"))
      c->no_observer = true, traced = false;
  snprintf(c->system, sizeof c->system, "libdist%s%s", traced ? "-traced" : "",
           dist_get_debug_level() == DIST_DEBUG_DETAIL ? "-detail" : "");
  bool system_given = false;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : "";
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      usage();
      exit(0);
    } else if (!strcmp(a, "--no-observer")) {
      continue;
    } else if (!strcmp(a, "--in-place")) {
      c->in_place = true;
      continue;
    } else if (!strcmp(a, "--ops")) {
      snprintf(c->ops, sizeof c->ops, "%s", v);
    } else if (!strcmp(a, "--iters")) {
      c->min_samples = atoi(v) > 0 ? atoi(v) : 1;
    } else if (!strcmp(a, "--target-ms")) {
      c->target_ms = atof(v);
    } else if (!strcmp(a, "--mode")) {
      c->modes = !strcmp(v, "throughput") ? MODE_THROUGHPUT
                 : !strcmp(v, "latency")  ? MODE_LATENCY
                 : !strcmp(v, "both")     ? MODE_THROUGHPUT | MODE_LATENCY
                                          : 0;
      if (!c->modes) {
        fprintf(stderr, "bench_collectives: --mode is throughput, latency or both, not '%s'\n",
                v);
        exit(2);
      }
    } else if (!strcmp(a, "--latency-method")) {
      c->span = !strcmp(v, "span");
      if (!c->span && strcmp(v, "osu")) {
        fprintf(stderr, "bench_collectives: --latency-method is osu or span, not '%s'\n", v);
        exit(2);
      }
    } else if (!strcmp(a, "--system")) {
      snprintf(c->system, sizeof c->system, "%s", v);
      system_given = true;
    } else if (!strcmp(a, "--backend")) {
      c->backend = v;
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
  if (c->backend && !system_given) /* "libdist-mpi": the backend's rows, as the peers name theirs */
    snprintf(c->system, sizeof c->system, "libdist-%s", c->backend);
}

int main(int argc, char **argv) {
  cfg c = {0};
  dist_set_debug_level_from_env();
  parse(argc, argv, &c);
  if (!c.no_observer)
    TRY("tracer", dist_tracer_register());
  dist_init_opts init = dist_init_opts_default();
  init.backend = c.backend;
  TRY("init", dist_init_process_group(&init));
  int rank = dist_get_rank(NULL), world = dist_get_world_size(NULL);
  if (c.span && !one_host(world)) {
    fprintf(stderr, "bench_collectives: --latency-method span needs every rank on one host "
            "(one clock); LOCAL_WORLD_SIZE is not the world size\n");
    return 2;
  }
  /* cpu: "shm" or "tcp" (of the inner group of a checking group); other
   * backends say their name. */
  const char *transport = dist__pg_transport(NULL);
  if (!transport)
    transport = dist_get_backend(NULL);
  size_t max = 4;
  for (int i = 0; i < c.n_sizes; i++)
    max = c.sizes[i] > max ? c.sizes[i] : max;
  bufs b = {0};
  b.world = world;
  b.rank = rank;
  b.in_place = c.in_place;
  size_t alloc = (max + 64 * (size_t)world) * (size_t)world;
  b.in = calloc(1, alloc);
  b.out = calloc(1, alloc);
  if (rank == 0) {
    printf("system,transport,op,bytes,ranks,median_us,algbw_GBps,mode,out_bytes\n");
    fflush(stdout);
  }
  for (int s = 0; s < c.n_sizes; s++)
    for (int o = 0; o < N_ALL_OPS; o++) {
      const char *op = all_ops[o];
      if (!wanted(&c, op) || (!strcmp(op, "barrier") && s > 0))
        continue;
      b.bytes = op_bytes(op, c.sizes[s], world);
      for (int m = MODE_THROUGHPUT; m <= MODE_LATENCY; m <<= 1) {
        if (!(c.modes & m))
          continue;
        fill_input(op, &b);
        double us = m == MODE_LATENCY ? time_latency(op, &b, &c) : time_throughput(op, &b, &c);
        if (rank == 0) {
          bool ip = b.in_place && !strcmp(op, "all_reduce");
          printf("%s,%s,%s%s,%zu,%d,%.3f,%.6f,%s,%zu\n", c.system, transport, op,
                 ip ? "_in_place" : "", b.bytes, world,
                 us, us > 0 ? (double)b.bytes / us / 1e3 : 0.0,
                 m == MODE_THROUGHPUT ? "throughput" : c.span ? "latency_span" : "latency",
                 out_bytes(op, &b));
          fflush(stdout);
        }
      }
    }
  free(b.in);
  free(b.out);
  TRY("destroy", dist_destroy_process_group(NULL));
  return 0;
}
