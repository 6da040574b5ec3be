/* gen_trace.c - writes a big merged trace.db for the viewer's benchmark:
 * N operation rows (default 10 M) over R ranks (default 64) in 1 + R/8 +
 * R/8 groups: the default group (every rank), tensor-parallel groups of 8
 * consecutive ranks and pipeline groups of 8 strided ranks. Each step every
 * rank runs an ALL_REDUCE in the default group, an ALL_GATHER in its
 * tensor group and, every fourth step, a BROADCAST in its pipeline group;
 * times advance ~1 ms a step with per-rank jitter. The last step plants a
 * hang: rank 17 never enters the default group's last ALL_REDUCE, which
 * every other rank is blocked in. Rows go in (group, seq) order as a merge
 * writes them, then the merged file's indexes and summaries are built
 * (the summaries by the merge's own code, dist_trace_summarise; --no-summaries
 * leaves them out, as in a file merged by an older libdist).
 *
 *   gen_trace -o trace.db [--rows N] [--ranks R] [--no-summaries]
 * Prints one CSV line: rows, ranks, groups, seconds to write, bytes. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <dist/trace_reader.h>

#include "trace_fixture.h"

static uint64_t mix(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ULL;
  return x ^ (x >> 33);
}

typedef struct gen {
  sqlite3 *db;
  int ranks, ngroups;
  int64_t rows, want, *seq;   // seq per group
  int lag_rank;
} gen;

static void op(gen *g, int rank, int group, int64_t seq, const char *name, int64_t t, bool hang) {
  uint64_t h = mix((uint64_t)rank * 1000003u + (uint64_t)seq * 7919u + (uint64_t)group);
  int64_t start = t + (int64_t)(h % 20000);            // up to 20 us of arrival skew
  int64_t dur = 20000 + (int64_t)((h >> 20) % 200000);  // 20..220 us
  if (rank == 5)
    start += 15000;                                     // a mild straggler
  fx_op o = {rank, group, seq, name, hang ? "started" : "completed", "bfloat16", "[1024,1024]",
             name[0] == 'B' ? NULL : "SUM", NULL, 1048576, 2097152, name[0] == 'B' ? 0 : -1,
             start - 2000, start, hang ? -1 : start + dur, 0};
  if (name[4] == 'G')
    o.redop = NULL;   // ALL_GATHER
  fx_op_add(g->db, &o);
  g->rows++;
}

/* One collective of group gid (members m[0..n)) at time t. */
static void coll(gen *g, int gid, const int *m, int n, const char *name, int64_t t, bool last) {
  int64_t s = ++g->seq[gid];
  for (int i = 0; i < n; i++) {
    if (last && m[i] == g->lag_rank)
      continue;   // the planted hang: rank 17 never arrives
    op(g, m[i], gid, s, name, t, last);
  }
}

static void groups(gen *g) {
  int *all = malloc((size_t)g->ranks * sizeof *all), m[8];
  for (int r = 0; r < g->ranks; r++)
    all[r] = r;
  fx_group(g->db, 0, "default", all, g->ranks);
  int tp = g->ranks / 8;
  for (int k = 0; k < tp; k++) {
    char name[32];
    for (int i = 0; i < 8; i++)
      m[i] = k * 8 + i;
    snprintf(name, sizeof name, "tp%d", k);
    fx_group(g->db, 1 + k, name, m, 8);
    for (int i = 0; i < 8; i++)
      m[i] = i * tp + k;
    snprintf(name, sizeof name, "pp%d", k);
    fx_group(g->db, 1 + tp + k, name, m, 8);
  }
  g->ngroups = 1 + 2 * tp;
  free(all);
}

static void steps(gen *g) {
  int tp = g->ranks / 8, m[8];
  int *all = malloc((size_t)g->ranks * sizeof *all);
  for (int r = 0; r < g->ranks; r++)
    all[r] = r;
  int64_t per_step = g->ranks * 2 + g->ranks / 4;
  int64_t nsteps = g->want / per_step;
  if (nsteps < 2)
    nsteps = 2;
  for (int64_t k = 0; k < nsteps; k++) {
    int64_t t = 1000000000LL + k * 1000000LL;
    bool last = k == nsteps - 1;
    for (int j = 0; j < tp && !last; j++) {
      for (int i = 0; i < 8; i++)
        m[i] = j * 8 + i;
      coll(g, 1 + j, m, 8, "ALL_GATHER", t, false);
      if (k % 4 == 0) {
        for (int i = 0; i < 8; i++)
          m[i] = i * tp + j;
        coll(g, 1 + tp + j, m, 8, "BROADCAST", t + 300000, false);
      }
    }
    coll(g, 0, all, g->ranks, "ALL_REDUCE", t + 600000, last);
  }
  free(all);
}

int main(int argc, char **argv) {
  gen g = {.ranks = 64, .want = 10000000, .lag_rank = 17};
  const char *out = NULL;
  bool summaries = true;
  static const struct option opts[] = {{"rows", required_argument, NULL, 'n'},
                                        {"ranks", required_argument, NULL, 'r'},
                                        {"no-summaries", no_argument, NULL, 's'},
                                        {"help", no_argument, NULL, 'h'}, {0}};
  int c;
  while ((c = getopt_long(argc, argv, "o:n:r:h", opts, NULL)) != -1) {
    if (c == 'o')
      out = optarg;
    else if (c == 'n')
      g.want = atoll(optarg);
    else if (c == 'r')
      g.ranks = atoi(optarg);
    else if (c == 's')
      summaries = false;
    else
      return fprintf(c == 'h' ? stdout : stderr,
                     "usage: gen_trace -o trace.db [--rows N] [--ranks R (multiple of 8)] "
                     "[--no-summaries]\n"),
             c == 'h' ? 0 : 2;
  }
  if (!out || g.ranks < 24 || g.ranks % 8 || g.want < 1) {
    fprintf(stderr, "gen_trace: -o FILE needed; ranks a multiple of 8, at least 24\n");
    return 2;
  }
  struct timespec a, b;
  clock_gettime(CLOCK_MONOTONIC, &a);
  g.seq = calloc((size_t)(1 + g.ranks / 4), sizeof *g.seq);
  g.db = fx_create(out, "bench-job", g.ranks, 1);
  for (int r = 0; r < g.ranks; r++)
    fx_rank(g.db, r, r == g.lag_rank ? "lost" : "running");
  groups(&g);
  steps(&g);
  fx_event(g.db, 0, 0, g.seq[0], "stall_report", 1000000000LL + 5000000000LL, 3,
           "stall in group 0 (default): rank 17 has not entered ALL_REDUCE");
  fx_finish(g.db, 1000000000LL - 2000, 1000000000LL + (g.want / (g.ranks * 2 + g.ranks / 4) + 5) *
                                                          1000000LL);
  char err[512];
  if (summaries && dist_trace_summarise(out, err, sizeof err) != DIST_OK) {
    fprintf(stderr, "gen_trace: %s\n", err);
    return 1;
  }
  clock_gettime(CLOCK_MONOTONIC, &b);
  struct stat st;
  stat(out, &st);
  printf("rows,ranks,groups,write_s,bytes\n%lld,%d,%d,%.1f,%lld\n", (long long)g.rows, g.ranks,
         g.ngroups, (double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) / 1e9,
         (long long)st.st_size);
  free(g.seq);
  return 0;
}
