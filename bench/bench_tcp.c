/* bench_tcp.c - the TCP engine's collectives between forked ranks over
 * loopback, calling the engine directly (no process group, no shared
 * memory), printing CSV:
 *
 *     system,transport,op,bytes,ranks,median_us,algbw_GBps
 *
 * Method (shared/peers/BASELINES.md, so rows compare with the peers'):
 * float32 SUM for reductions; bytes as nccl-tests count them (the whole
 * per-rank vector for all_reduce, broadcast and all_to_all, the gathered
 * output for all_gather, the whole input for reduce_scatter); after 3
 * warm-up calls each rank times 5, the ranks agree on the slowest, and
 * every rank then takes samples of B back-to-back calls (a sample lasts
 * about 20 calls, at least 50 us, at most 2 ms; about 350 ms per case);
 * the element-wise maximum over ranks of the sample vectors is taken and
 * its median printed. algbw = bytes / median. */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "backends/cpu/tcp.h"

#define MAX_RANKS 16
#define MAX_SAMPLES 4000

static const char *const all_ops[] = {"all_reduce", "broadcast", "all_gather",
                                      "reduce_scatter", "all_to_all", "barrier"};
#define NOPS 6

typedef struct bench_cfg {
  int ranks;
  char ops[256];
  char sizes[256];
  int iters; /* samples per case; 0: derived from the time budget */
} bench_cfg;

typedef struct bench_rank {
  dist__cpu_group g;
  int granks[MAX_RANKS];
  dist__cpu_peer peers[MAX_RANKS];
  dist_store *store;
  dist__tcp *t;
  dist__errbuf err;
} bench_rank;

static void usage(FILE *f) {
  fprintf(f,
          "usage: bench_tcp [--ranks N] [--ops LIST] [--sizes LIST] [--iters N]\n"
          "Times the TCP engine's collectives between N forked ranks on loopback\n"
          "(default 2) and prints CSV: system,transport,op,bytes,ranks,median_us,"
          "algbw_GBps.\n"
          "  --ops    comma list of all_reduce,broadcast,all_gather,reduce_scatter,\n"
          "           all_to_all,barrier (default all)\n"
          "  --sizes  comma list of byte counts (default 4,1024,65536,1048576,16777216,\n"
          "           67108864); bytes as nccl-tests count them\n"
          "  --iters  samples per case (default: about 350 ms worth)\n"
          "Tunables of the engine (DIST_TCP_SPIN_US, DIST_TCP_EAGER_BYTES,\n"
          "DIST_TCP_DIRECT_BYTES) are read from the environment.\n");
}

static bool listed(const char *list, const char *name) {
  size_t n = strlen(name);
  for (const char *p = list; *p;) {
    size_t l = strcspn(p, ",");
    if (l == n && strncmp(p, name, n) == 0)
      return true;
    p += l + (p[l] == ',');
  }
  return false;
}

/* --- one rank -------------------------------------------------------------------- */

static int setup(bench_rank *b, int rank, int n, int port_pipe[2]) {
  dist_store_tcp_opts so = {0};
  so.host = "127.0.0.1";
  so.world_size = n;
  so.timeout_ms = 60000;
  so.is_server = rank == 0;
  uint16_t port = 0;
  if (rank != 0 && read(port_pipe[0], &port, sizeof port) != sizeof port)
    return DIST_E_SYS;
  so.port = port;
  int rc = dist_store_tcp_create(&so, &b->store);
  if (rc != DIST_OK)
    return rc;
  if (rank == 0) {
    port = dist_store_tcp_port(b->store);
    for (int i = 1; i < n; i++)
      if (write(port_pipe[1], &port, sizeof port) != sizeof port)
        return DIST_E_SYS;
  }
  dist__cpu_group *g = &b->g;
  g->rank = rank;
  g->size = n;
  g->global_rank = rank;
  g->global_ranks = b->granks;
  g->peers = b->peers;
  g->timeout_ms = 120000;
  g->transport = DIST_CPU_TRANSPORT_TCP;
  snprintf(g->name, sizeof g->name, "bench-tcp");
  for (int i = 0; i < n; i++) {
    b->granks[i] = i;
    b->peers[i].global_rank = i;
    snprintf(b->peers[i].host, sizeof b->peers[i].host, "localhost");
  }
  return dist__tcp_create(g, b->store, dist__now_ms() + 60000, &b->t, &b->err);
}

typedef struct bench_case {
  dist_coll c;
  dist_tensor in[MAX_RANKS], out[MAX_RANKS];
  void *ibuf, *obuf;
} bench_case;

/* Builds the descriptor of op at bytes (nccl-tests sizes). */
static int make_case(bench_case *k, const char *op, size_t bytes, int n, int rank) {
  memset(k, 0, sizeof *k);
  size_t elems = bytes / 4 ? bytes / 4 : 1;
  size_t per = (elems + (size_t)n - 1) / (size_t)n; /* per-rank block */
  k->ibuf = calloc(elems + per * (size_t)n + 16, 4);
  k->obuf = calloc(elems + per * (size_t)n + 16, 4);
  if (!k->ibuf || !k->obuf)
    return -1;
  dist_coll *c = &k->c;
  c->root = -1;
  c->timeout_ms = 120000;
  c->redop = DIST_SUM;
  c->inputs = k->in;
  c->outputs = k->out;
  c->n_inputs = c->n_outputs = 1;
  k->in[0] = dist_tensor_1d(k->ibuf, DIST_FLOAT32, (int64_t)elems);
  k->out[0] = k->in[0];
  if (!strcmp(op, "all_reduce")) {
    c->kind = DIST_OP_ALL_REDUCE;
  } else if (!strcmp(op, "broadcast")) {
    c->kind = DIST_OP_BROADCAST;
    c->root = 0;
  } else if (!strcmp(op, "all_gather")) {
    c->kind = DIST_OP_ALL_GATHER_INTO_TENSOR;
    k->in[0] = dist_tensor_1d(k->ibuf, DIST_FLOAT32, (int64_t)per);
    k->out[0] = dist_tensor_1d(k->obuf, DIST_FLOAT32, (int64_t)(per * (size_t)n));
  } else if (!strcmp(op, "reduce_scatter")) {
    c->kind = DIST_OP_REDUCE_SCATTER_TENSOR;
    k->in[0] = dist_tensor_1d(k->ibuf, DIST_FLOAT32, (int64_t)(per * (size_t)n));
    k->out[0] = dist_tensor_1d(k->obuf, DIST_FLOAT32, (int64_t)per);
  } else if (!strcmp(op, "all_to_all")) {
    c->kind = DIST_OP_ALL_TO_ALL_SINGLE;
    k->in[0] = dist_tensor_1d(k->ibuf, DIST_FLOAT32, (int64_t)(per * (size_t)n));
    k->out[0] = dist_tensor_1d(k->obuf, DIST_FLOAT32, (int64_t)(per * (size_t)n));
  } else {
    c->kind = DIST_OP_BARRIER;
    c->n_inputs = c->n_outputs = 0;
  }
  (void)rank;
  return 0;
}

static int run_n(bench_rank *b, dist_coll *c, int calls, uint64_t *seq) {
  for (int i = 0; i < calls; i++) {
    c->seq = ++*seq;
    dist__cpu_op op = {c, dist__now_ms() + c->timeout_ms, &b->err, -1};
    dist__err_clear(&b->err);
    int rc = dist__tcp_run(b->t, &op);
    if (rc != DIST_OK) {
      fprintf(stderr, "rank %d: %s failed: %s\n", b->g.rank, dist_op_name(c->kind), b->err.msg);
      return rc;
    }
  }
  return DIST_OK;
}

/* Element-wise maximum over the ranks of v (n doubles), in place. */
static int max_over_ranks(bench_rank *b, double *v, size_t n, uint64_t *seq) {
  dist_tensor t = dist_tensor_1d(v, DIST_FLOAT64, (int64_t)n);
  dist_coll c = {0};
  c.kind = DIST_OP_ALL_REDUCE;
  c.inputs = c.outputs = &t;
  c.n_inputs = c.n_outputs = 1;
  c.redop = DIST_MAX;
  c.root = -1;
  c.timeout_ms = 60000;
  return run_n(b, &c, 1, seq);
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static int bench_one(bench_rank *b, const bench_cfg *cfg, const char *op, size_t bytes,
                     uint64_t *seq) {
  bench_case k;
  int n = b->g.size;
  if (make_case(&k, op, bytes, n, b->g.rank) != 0)
    return DIST_E_NOMEM;
  static double samples[MAX_SAMPLES];
  int rc = run_n(b, &k.c, 3, seq);
  int64_t t0 = dist__now_ns();
  if (rc == DIST_OK)
    rc = run_n(b, &k.c, 5, seq);
  double est[1] = {(double)(dist__now_ns() - t0) / 5e3}; /* us per call */
  if (rc == DIST_OK)
    rc = max_over_ranks(b, est, 1, seq);
  double per = est[0] > 0.01 ? est[0] : 0.01;
  double target = fmin(fmax(20 * per, 50.0), 2000.0);
  int batch = (int)fmax(1.0, round(target / per));
  int nsamp = cfg->iters > 0 ? cfg->iters
                             : (int)fmin(400.0, fmax(15.0, round(350000.0 / (batch * per))));
  if (nsamp > MAX_SAMPLES)
    nsamp = MAX_SAMPLES;
  for (int s = 0; s < nsamp && rc == DIST_OK; s++) {
    int64_t a = dist__now_ns();
    rc = run_n(b, &k.c, batch, seq);
    samples[s] = (double)(dist__now_ns() - a) / 1e3 / batch;
  }
  if (rc == DIST_OK)
    rc = max_over_ranks(b, samples, (size_t)nsamp, seq);
  if (rc == DIST_OK && b->g.rank == 0) {
    qsort(samples, (size_t)nsamp, sizeof *samples, cmp_double);
    double med = nsamp % 2 ? samples[nsamp / 2]
                           : (samples[nsamp / 2 - 1] + samples[nsamp / 2]) / 2;
    size_t shown = strcmp(op, "barrier") ? bytes : 0;
    printf("libdist,tcp,%s,%zu,%d,%.3f,%.6f\n", op, shown, n, med,
           med > 0 ? (double)shown / med / 1e3 : 0.0);
    fflush(stdout);
  }
  free(k.ibuf);
  free(k.obuf);
  return rc;
}

static int rank_main(const bench_cfg *cfg, int rank, int port_pipe[2]) {
  bench_rank b;
  memset(&b, 0, sizeof b);
  int rc = setup(&b, rank, cfg->ranks, port_pipe);
  if (rc != DIST_OK) {
    fprintf(stderr, "rank %d: setup: %s %s\n", rank, b.err.msg, dist_last_errmsg());
    return 1;
  }
  uint64_t seq = 0;
  for (int o = 0; o < NOPS && rc == DIST_OK; o++) {
    if (!listed(cfg->ops, all_ops[o]))
      continue;
    for (const char *p = cfg->sizes; *p && rc == DIST_OK;) {
      size_t bytes = strtoull(p, NULL, 10);
      if (!strcmp(all_ops[o], "barrier")) {
        rc = bench_one(&b, cfg, all_ops[o], 0, &seq);
        break;
      }
      rc = bench_one(&b, cfg, all_ops[o], bytes, &seq);
      p += strcspn(p, ",");
      p += *p == ',';
    }
  }
  dist__tcp_destroy(b.t);
  if (rank == 0)
    usleep(200 * 1000); /* the store's host leaves last */
  dist_store_destroy(b.store);
  return rc == DIST_OK ? 0 : 1;
}

int main(int argc, char **argv) {
  bench_cfg cfg = {2, "all_reduce,broadcast,all_gather,reduce_scatter,all_to_all,barrier",
                   "4,1024,65536,1048576,16777216,67108864", 0};
  static const struct option lo[] = {{"ranks", 1, 0, 'n'}, {"ops", 1, 0, 'o'},
                                     {"sizes", 1, 0, 's'}, {"iters", 1, 0, 'i'},
                                     {"help", 0, 0, 'h'},  {0, 0, 0, 0}};
  int ch;
  while ((ch = getopt_long(argc, argv, "n:o:s:i:h", lo, NULL)) != -1) {
    switch (ch) {
    case 'n': cfg.ranks = atoi(optarg); break;
    case 'o': snprintf(cfg.ops, sizeof cfg.ops, "%s", optarg); break;
    case 's': snprintf(cfg.sizes, sizeof cfg.sizes, "%s", optarg); break;
    case 'i': cfg.iters = atoi(optarg); break;
    case 'h': usage(stdout); return 0;
    default: usage(stderr); return 2;
    }
  }
  if (cfg.ranks < 1 || cfg.ranks > MAX_RANKS) {
    fprintf(stderr, "bench_tcp: --ranks must be 1..%d\n", MAX_RANKS);
    return 2;
  }
  int pp[2];
  if (pipe(pp) != 0)
    return 1;
  printf("system,transport,op,bytes,ranks,median_us,algbw_GBps\n");
  fflush(stdout);
  pid_t pids[MAX_RANKS];
  for (int r = 0; r < cfg.ranks; r++) {
    pids[r] = fork();
    if (pids[r] == 0)
      _exit(rank_main(&cfg, r, pp));
  }
  int bad = 0;
  for (int r = 0; r < cfg.ranks; r++) {
    int st;
    waitpid(pids[r], &st, 0);
    bad |= !WIFEXITED(st) || WEXITSTATUS(st) != 0;
  }
  return bad;
}
