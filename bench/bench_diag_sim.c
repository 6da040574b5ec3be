/* bench_diag_sim.c - the monitor's diagnosis beyond one machine: synthetic
 * progress records (the text every rank publishes, parsed by the one
 * parser, mon_record.c) of N ranks, diagnosed by the monitor's own code
 * (mon_diag.c), timed and checked.
 *
 *   bench_diag_sim [--show] [ranks...]   (default: 1024 10000)
 *
 * Two cases per size, as rank 0 sees them:
 *   hang      rank N-1 is busy outside the library; every other rank is
 *             blocked in ALL_REDUCE #100 of the default group: the
 *             diagnosis must say the waits end at rank N-1;
 *   deadlock  as above, but ranks 0 and 1 each receive from the other: the
 *             deadlock probe must see the cycle {0,1} and prove it from a
 *             second snapshot with newer heartbeats.
 * --show prints each diagnosis to stderr (to compare reports across
 * versions of the diagnosis).
 * CSV on stdout (CPU ms of this process):
 *   ranks,case,parse_ms,diagnose_ms,probe_ms,record_bytes,ok */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mon_int.h"

/* CPU time of this process: the machine's cores are shared, so wall time
 * says as much about the neighbours as about the diagnosis. */
static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

/* Rank r's record text at heartbeat hb (wall ms), blocked since since.
 * The tail after the description is every optional field of mon_record.h:
 * peer, colls enq, colls done, coll in flight, last seq, tag, num, last
 * num, sync (the probe only proves a cycle of synchronous calls). */
static int record(char *buf, size_t len, int r, int n, bool cycle, int64_t hb, int64_t since) {
  if (r == n - 1) /* busy: nothing in flight, 99 done */
    return snprintf(buf, len,
                    "v1\t%d\t%d\tnode%d\t%lld\trun\t-\n"
                    "g\t0\t%d\t99\t99\t99\t-1\t0\t%d\t%lld\tmain (train.c:40)\tmain (train.c:40)\t"
                    "default\t-1\t99\t99\t0\t99\t0\t0\t99\t0\n",
                    r, 1000 + r, r / 8, (long long)hb, n, DIST_OP_ALL_REDUCE,
                    (long long)since);
  if (cycle && r <= 1)
    return snprintf(buf, len,
                    "v1\t%d\t%d\tnode%d\t%lld\trun\t-\n"
                    "g\t0\t%d\t100\t100\t99\t%d\t%lld\t%d\t%lld\tmain (train.c:52)\t"
                    "main (train.c:40)\tdefault\t%d\t99\t99\t0\t99\t0\t1\t99\t1\n",
                    r, 1000 + r, r / 8, (long long)hb, n, DIST_OP_RECV, (long long)since,
                    DIST_OP_ALL_REDUCE, (long long)since, 1 - r);
  return snprintf(buf, len,
                  "v1\t%d\t%d\tnode%d\t%lld\trun\t-\n"
                  "g\t0\t%d\t100\t100\t99\t%d\t%lld\t%d\t%lld\tmain (train.c:40)\t"
                  "main (train.c:40)\tdefault\t-1\t100\t99\t100\t99\t0\t100\t99\t1\n",
                  r, 1000 + r, r / 8, (long long)hb, n, DIST_OP_ALL_REDUCE, (long long)since,
                  DIST_OP_ALL_REDUCE, (long long)since);
}

static mon_rec *make_recs(int n, bool cycle, int64_t hb, int64_t since, double *parse_ms,
                          size_t *bytes) {
  mon_rec *recs = calloc((size_t)n, sizeof *recs);
  char buf[1024];
  *bytes = 0;
  double t = now_ms();
  for (int r = 0; recs && r < n; r++) {
    int k = record(buf, sizeof buf, r, n, cycle, hb, since);
    *bytes += (size_t)k;
    if (!dist__mon_rec_parse(buf, &recs[r]))
      fprintf(stderr, "bench_diag_sim: record %d does not parse\n", r);
  }
  *parse_ms = now_ms() - t;
  return recs;
}

static void free_recs(mon_rec *recs, int n) {
  for (int r = 0; r < n; r++)
    dist__mon_rec_free(&recs[r]);
  free(recs);
}

static bool show; /* --show */

static void run(int n, bool cycle) {
  mon_state *m = &dist__mon;
  m->world = n;
  m->rank = 0;
  m->wall_off_ns = 0;
  snprintf(m->host, sizeof m->host, "simhost"); /* no /proc lookups */
  mon_group *g = &m->groups[0];
  memset(g, 0, sizeof *g);
  g->gid = 0;
  g->size = n;
  g->rank = 0;
  g->timeout_ms = 600000;
  snprintf(g->name, sizeof g->name, "default");
  g->granks = malloc(sizeof(int) * (size_t)n);
  for (int i = 0; i < n; i++)
    g->granks[i] = i;
  uint64_t seq = 100;
  mon_op *op = &g->ring[seq % MON_RING];
  atomic_store(&op->seq, seq);
  atomic_store(&op->kind, cycle ? DIST_OP_RECV : DIST_OP_ALL_REDUCE);
  atomic_store(&op->coll, cycle ? 0 : 100);
  atomic_store(&op->peer, cycle ? 1 : MON_PEER_NONE);
  atomic_store(&op->num, cycle ? 1 : 100); /* what reports print: RECV #1, ALL_REDUCE #100 */
  int64_t now = dist__now_ns();
  atomic_store(&op->t_enq_ns, now - 5000000000LL);
  int64_t hb = now / 1000000;
  double parse_ms, diag_ms, probe_ms = 0;
  size_t bytes;
  mon_rec *recs = make_recs(n, cycle, hb - 1000, hb - 5000, &parse_ms, &bytes);
  bool lowest = false, ok;
  int cycles = 0;
  mon_verdict v;
  double t = now_ms();
  char *d = dist__mon_diagnose(g, seq, recs, "hang", &lowest, &cycles, &v);
  diag_ms = now_ms() - t;
  if (!cycle) {
    char want[64];
    snprintf(want, sizeof want, "the waits end at rank %d", n - 1);
    ok = d && strstr(d, want) && v.n == 1 && v.culprits[0] == n - 1;
  } else {
    mon_cycle_seen a, b;
    free_recs(recs, n); /* a fresh first snapshot: diagnosing took a while */
    recs = make_recs(n, cycle, dist__now_ns() / 1000000 - 1, hb - 5000, &parse_ms, &bytes);
    t = now_ms();
    bool first = dist__mon_deadlock_seen(recs, n, 0, &a);
    probe_ms = now_ms() - t;
    /* every member published again since (heartbeats on the wall clock,
     * which the probe also reads to tell a live rank from a silent one) */
    int64_t hb2 = dist__now_ns() / 1000000;
    mon_rec *later = make_recs(n, cycle, hb2, hb - 5000, &parse_ms, &bytes);
    t = now_ms();
    bool second = dist__mon_deadlock_seen(later, n, 0, &b);
    probe_ms = (probe_ms + now_ms() - t) / 2; /* per probe, parsing apart */
    ok = first && second && a.n == 2 && b.n == 2 && a.ops == b.ops && b.hb_ms[0] > a.hb_ms[0] &&
         d && strstr(d, "deadlock: a wait-for cycle of 2 ranks");
    free_recs(later, n);
  }
  if (show)
    fprintf(stderr, "--- %d ranks, %s:\n%s\n", n, cycle ? "deadlock" : "hang", d ? d : "(none)");
  if (!ok)
    fprintf(stderr, "bench_diag_sim: %d ranks, %s: unexpected diagnosis:\n%.2000s\n", n,
            cycle ? "deadlock" : "hang", d ? d : "(none)");
  printf("%d,%s,%.1f,%.1f,%.1f,%zu,%s\n", n, cycle ? "deadlock" : "hang", parse_ms, diag_ms,
         probe_ms, bytes / (size_t)n, ok ? "yes" : "no");
  fflush(stdout);
  dist__free(d);
  free_recs(recs, n);
  free(g->granks);
  g->granks = NULL;
}

int main(int argc, char **argv) {
  if (argc > 1 && !strcmp(argv[1], "--help")) {
    printf("usage: %s [--show] [ranks...]   (default 1024 10000)\n", argv[0]);
    return 0;
  }
  show = argc > 1 && !strcmp(argv[1], "--show");
  int first = show ? 2 : 1;
  printf("ranks,case,parse_ms,diagnose_ms,probe_ms,record_bytes,ok\n");
  int sizes[16] = {1024, 10000}, k = 2;
  if (argc > first)
    for (k = 0; k + first < argc && k < 16; k++)
      sizes[k] = atoi(argv[k + first]);
  for (int i = 0; i < k; i++) {
    run(sizes[i], false);
    run(sizes[i], true);
  }
  return 0;
}
