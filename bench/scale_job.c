/* scale_job.c - the rank program of bench/scale.sh and
 * bench/verdict_time.sh: one job as people run it at scale, with at most
 * one planted fault, timed from inside.
 *
 *     distrun -n 64 build/bin/scale_job --colls 300 --fault desync
 *
 * Linked with the bundled libdist, as a user's program (traces, monitor,
 * checking layer at DIST_DEBUG=DETAIL). Init (env://), a 2-D mesh "dp" x
 * "tp" (world = dp x tp, tp the largest divisor <= sqrt(world)), then
 * --colls collectives cycling over the tp all_reduce, the dp all_reduce,
 * a world all_reduce and a world broadcast.
 * Rank 0 prints one CSV line on stdout:
 *     world,init_ms,first_ms,colls,per_coll_us
 * (init: from start to a ready default group and mesh; first: the first
 * world all_reduce; per_coll_us: the mean of the rest).
 *
 * Faults, planted on --rank R (default world - 1) at collective --at K
 * (default colls / 2, rounded down to a tp all_reduce); the planting rank prints "FAULT_AT_MS <epoch ms>"
 * on stdout first, so a script can time the fault to distrun's verdict:
 *   desync     R passes float64 instead of float32 to its tp all_reduce
 *   hang       R computes for ever (a busy rank: the others get the timeout)
 *   recvrecv   ranks 0 and 1 each receive from the other first (a
 *              point-to-point deadlock); the others wait in a world all_reduce
 *   cross      R calls the world all_reduce before its tp all_reduce (a
 *              wait-for cycle across groups)
 *   exit       R returns 0 from main (an early exit others wait for)
 *   kill       R SIGKILLs itself */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <dist/dist.h>

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static long long epoch_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_REALTIME, &t);
  return (long long)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

static void fail(const char *what, int rc) {
  fprintf(stderr, "%s failed: %s\n", what, dist_errmsg(rc, NULL));
  exit(1);
}

#define TRY(what, call)   \
  do {                    \
    int rc_ = (call);     \
    if (rc_ != DIST_OK)   \
      fail((what), rc_);  \
  } while (0)

static void planted(const char *fault) {
  printf("FAULT_AT_MS %lld %s\n", epoch_ms(), fault);
  fflush(stdout);
}

int main(int argc, char **argv) {
  int colls = 300, at = -1, culprit = -1;
  const char *fault = "none";
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--help")) {
      printf("usage: %s [--colls N] [--fault none|desync|hang|recvrecv|cross|exit|kill] "
             "[--rank R] [--at K]\n", argv[0]);
      return 0;
    } else if (!strcmp(argv[i], "--colls") && i + 1 < argc) {
      colls = atoi(argv[++i]);
    } else if (!strcmp(argv[i], "--fault") && i + 1 < argc) {
      fault = argv[++i];
    } else if (!strcmp(argv[i], "--rank") && i + 1 < argc) {
      culprit = atoi(argv[++i]);
    } else if (!strcmp(argv[i], "--at") && i + 1 < argc) {
      at = atoi(argv[++i]);
    } else {
      fprintf(stderr, "%s: unknown argument '%s' (--help)\n", argv[0], argv[i]);
      return 2;
    }
  }
  double t0 = now_ms();
  TRY("init", dist_init_process_group(NULL));
  int rank = dist_get_rank(NULL), world = dist_get_world_size(NULL);
  int cols = 1;
  for (int c = 1; c * c <= world; c++)
    if (world % c == 0)
      cols = c;
  int64_t dims[2] = {world / cols, cols};
  const char *names[2] = {"dp", "tp"};
  dist_device_mesh *mesh = NULL;
  dist_pg *g_tp = NULL, *g_dp = NULL;
  TRY("mesh", dist_init_device_mesh("cpu", dims, 2, names, &mesh));
  TRY("tp group", dist_mesh_get_group_by_name(mesh, "tp", &g_tp));
  TRY("dp group", dist_mesh_get_group_by_name(mesh, "dp", &g_dp));
  double t_init = now_ms() - t0;
  if (culprit < 0)
    culprit = world - 1;
  if (at < 0)
    at = colls / 2;
  at -= at % 4; /* a tp all_reduce: desync and cross plant there */
  if (at < 4)
    at = 4;
  float v[16];
  double f64[16];
  for (int i = 0; i < 16; i++)
    v[i] = 1.0f, f64[i] = 1.0;
  dist_tensor t = dist_tensor_1d(v, DIST_FLOAT32, 16);
  double t1 = now_ms();
  TRY("first all_reduce", dist_all_reduce(&t, DIST_SUM, NULL, NULL));
  double t_first = now_ms() - t1, t2 = now_ms();
  for (int k = 1; k < colls; k++) {
    bool mine = rank == culprit && k == at;
    if (k == at && !strcmp(fault, "recvrecv") && rank <= 1 && world > 1) {
      if (rank == 0)
        planted(fault);
      TRY("recv", dist_recv(&t, 1 - rank, NULL, 0, NULL));
      TRY("send", dist_send(&t, 1 - rank, NULL, 0));
    }
    if (mine && !strcmp(fault, "hang")) {
      planted(fault);
      for (volatile unsigned long x = 0;; x++) {
      }
    }
    if (mine && !strcmp(fault, "exit")) {
      planted(fault);
      return 0;
    }
    if (mine && !strcmp(fault, "kill")) {
      planted(fault);
      raise(SIGKILL);
    }
    switch (k % 4) {
    case 0:
      if (mine && !strcmp(fault, "desync")) {
        planted(fault);
        dist_tensor d = dist_tensor_1d(f64, DIST_FLOAT64, 16);
        TRY("tp all_reduce", dist_all_reduce(&d, DIST_SUM, g_tp, NULL));
      } else if (mine && !strcmp(fault, "cross")) {
        planted(fault);
        TRY("world all_reduce", dist_all_reduce(&t, DIST_SUM, NULL, NULL));
        TRY("tp all_reduce", dist_all_reduce(&t, DIST_SUM, g_tp, NULL));
        k++;
      } else {
        TRY("tp all_reduce", dist_all_reduce(&t, DIST_SUM, g_tp, NULL));
      }
      break;
    case 1: TRY("dp all_reduce", dist_all_reduce(&t, DIST_SUM, g_dp, NULL)); break;
    case 2: TRY("world all_reduce", dist_all_reduce(&t, DIST_SUM, NULL, NULL)); break;
    default: TRY("world broadcast", dist_broadcast(&t, 0, NULL, NULL)); break;
    }
    for (int i = 0; i < 16; i++) /* keep the values small and finite */
      v[i] = 1.0f;
  }
  double per = colls > 1 ? (now_ms() - t2) * 1000 / (colls - 1) : 0;
  if (rank == 0) {
    printf("%d,%.1f,%.1f,%d,%.1f\n", world, t_init, t_first, colls, per);
    fflush(stdout);
  }
  dist_device_mesh_destroy(mesh);
  TRY("destroy", dist_destroy_process_group(NULL));
  return 0;
}
