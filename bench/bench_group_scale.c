/* bench_group_scale.c - what creating groups costs a rank at scale (issue
 * 23): connections per rank, group-creation time and rendezvous time, as
 * one CSV line from rank 0. The rank program of bench/netbed_scale.sh (one
 * distrun per namespace host); runs under any launcher:
 *
 *     distrun -n 8 build/bin/bench_group_scale [--colls N]
 *
 * Phases, each timed on every rank (the slowest rank is reported):
 *   init    dist_init_process_group: the rendezvous through the job's store
 *           and the default group's creation (its engines: the TCP mesh,
 *           shared memory, the host leaders' mesh)
 *   rdzv    from the start of init to the rendezvous' own INFO line
 *           ("rendezvous: rank R of N ...", job/rendezvous.c), caught by a
 *           log sink: connecting to the store and waiting for every rank to
 *           arrive (so it holds the spread of the ranks' start times;
 *           rdzv_min is the last rank's, which waits least)
 *   default the rest of init: the default group's creation
 *   group   dist_new_group over every rank: a second world-sized group,
 *           creation alone (the same members and engines, no rendezvous)
 *   mesh    dist_init_device_mesh "dp" x "tp" (tp the largest divisor of
 *           the world <= sqrt(world)): each rank's two subgroups
 * The log sink needs INFO lines: DIST_LOG_LEVEL is set to INFO unless the
 * environment sets it; the sink prints warnings and errors as the default
 * sink would and drops the INFO lines.
 * Connections are read twice: right after the groups exist, before any
 * collective (what creation made: eager connections), and after --colls
 * collectives cycling over the default group's all_reduce and broadcast,
 * the second world group's all_reduce, tp's and dp's (what use needs:
 * lazy connections made on first use show here). Two counts each:
 *   conns     TCP connections the cpu backend holds (its own count, the
 *             group's "connections: N tcp" summary: point-to-point mesh
 *             plus host leaders' mesh), default group alone and summed over
 *             the four groups
 *   sockets   file descriptors of this process that are sockets
 *             (/proc/self/fd: every group's, the store client's and the
 *             runtime's own; what a file limit counts)
 * Min, mean and max over ranks. The statistics are gathered with
 * collectives after the second reading, so they do not make connections
 * before it.
 *
 * Rank 0 prints the header and the line:
 *   ranks,hosts,init_ms,rdzv_ms,rdzv_min_ms,default_ms,group_ms,mesh_ms,
 *   conns_default_created_{min,mean,max},conns_groups_created_{min,mean,max},
 *   sockets_created_{min,mean,max},conns_default_used_{min,mean,max},
 *   conns_groups_used_{min,mean,max},sockets_used_{min,mean,max},per_coll_us
 * (hosts: the host leaders' count as the default group sees it, 1 when flat
 * or on one host; -1 where a count cannot be read). */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <dist/dist.h>

#include <dist/internal/pg.h>

/* pg_int.h (core/src/pg): the cpu backend's connection summary, "connections:
 * N tcp (point-to-point P, between host leaders L); hosts H; transport T".
 * Benches link dist_core statically. */
bool dist__pg_conn_summary(const dist_pg *g, char *buf, size_t len);

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static void fail(const char *what, int rc) {
  fprintf(stderr, "bench_group_scale: %s: %s\n", what, dist_errmsg(rc, NULL));
  exit(1);
}

#define TRY(what, call)  \
  do {                   \
    int rc_ = (call);    \
    if (rc_ != DIST_OK)  \
      fail((what), rc_); \
  } while (0)

/* Total TCP connections of g's backend; hosts from the same summary. */
static double conns(const dist_pg *g, double *hosts) {
  char buf[256];
  int total = -1, p2p, lead, h = -1;
  if (g && dist__pg_conn_summary(g, buf, sizeof buf) &&
      sscanf(buf, "connections: %d tcp (point-to-point %d, between host leaders %d); hosts %d",
             &total, &p2p, &lead, &h) < 1)
    total = -1;
  if (hosts)
    *hosts = h;
  return total;
}

static double sockets(void) {
  DIR *d = opendir("/proc/self/fd");
  if (!d)
    return -1;
  int n = 0;
  char path[300], link[64];
  for (struct dirent *e; (e = readdir(d));) {
    snprintf(path, sizeof path, "/proc/self/fd/%s", e->d_name);
    ssize_t l = readlink(path, link, sizeof link - 1);
    if (l > 0 && (link[l] = 0, !strncmp(link, "socket:", 7)))
      n++;
  }
  closedir(d);
  return n;
}

/* The rendezvous' INFO line, timed by a log sink (see the header). */
static double t_rdzv = -1;

static void sink(void *arg, dist_log_level level, dist_subsys subsys, const char *line) {
  (void)arg;
  if (subsys == DIST_SUBSYS_STORE && t_rdzv < 0 && strstr(line, "] STORE INFO rendezvous: rank "))
    t_rdzv = now_ms();
  if (level <= DIST_LOG_WARNING)
    fprintf(stderr, "%s\n", line);
}

enum { INIT, RDZV, RDZV_MIN, DEFAULT, GROUP, MESH, C_DEF0, C_ALL0, S0, C_DEF1, C_ALL1, S1, PER, NM };

int main(int argc, char **argv) {
  int colls = 40;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--colls") && i + 1 < argc) {
      colls = atoi(argv[++i]);
    } else {
      fprintf(stderr, "usage: %s [--colls N]\n", argv[0]);
      return 2;
    }
  }
  double m[NM], hosts = -1;
  setenv("DIST_LOG_LEVEL", "INFO", 0);
  dist_set_debug_level_from_env();
  dist_log_set_sink(sink, NULL);
  double t = now_ms();
  TRY("init", dist_init_process_group(NULL));
  double t_end = now_ms();
  m[INIT] = t_end - t;
  m[RDZV] = m[RDZV_MIN] = t_rdzv < 0 ? -1 : t_rdzv - t;
  m[DEFAULT] = t_rdzv < 0 ? -1 : t_end - t_rdzv;
  int rank = dist_get_rank(NULL), world = dist_get_world_size(NULL);
  int *all = malloc(sizeof(int) * (size_t)world);
  for (int i = 0; i < world; i++)
    all[i] = i;
  dist_pg *g_world = NULL;
  t = now_ms();
  TRY("new_group", dist_new_group(all, (size_t)world, NULL, &g_world));
  m[GROUP] = now_ms() - t;
  int cols = 1;
  for (int c = 1; c * c <= world; c++)
    if (world % c == 0)
      cols = c;
  int64_t dims[2] = {world / cols, cols};
  const char *names[2] = {"dp", "tp"};
  dist_device_mesh *mesh = NULL;
  dist_pg *g_tp = NULL, *g_dp = NULL;
  t = now_ms();
  TRY("mesh", dist_init_device_mesh("cpu", dims, 2, names, &mesh));
  m[MESH] = now_ms() - t;
  TRY("tp group", dist_mesh_get_group_by_name(mesh, "tp", &g_tp));
  TRY("dp group", dist_mesh_get_group_by_name(mesh, "dp", &g_dp));
  dist_pg *def = dist__pg_default();
  dist_pg *groups[4] = {def, g_world, g_tp, g_dp};

  for (int phase = 0; phase < 2; phase++) {
    if (phase == 1) { /* the collectives, then the second reading */
      float v[16];
      dist_tensor x = dist_tensor_1d(v, DIST_FLOAT32, 16);
      t = now_ms();
      for (int k = 0; k < colls; k++) {
        for (int i = 0; i < 16; i++)
          v[i] = 1.0f;
        switch (k % 5) {
        case 0: TRY("all_reduce", dist_all_reduce(&x, DIST_SUM, NULL, NULL)); break;
        case 1: TRY("broadcast", dist_broadcast(&x, 0, NULL, NULL)); break;
        case 2: TRY("group all_reduce", dist_all_reduce(&x, DIST_SUM, g_world, NULL)); break;
        case 3: TRY("tp all_reduce", dist_all_reduce(&x, DIST_SUM, g_tp, NULL)); break;
        default: TRY("dp all_reduce", dist_all_reduce(&x, DIST_SUM, g_dp, NULL)); break;
        }
      }
      m[PER] = colls > 0 ? (now_ms() - t) * 1000 / colls : 0;
    }
    double sum = 0;
    for (int i = 0; i < 4; i++) {
      double c = conns(groups[i], i == 0 && phase == 0 ? &hosts : NULL);
      sum = c < 0 || sum < 0 ? -1 : sum + c;
    }
    m[phase ? C_DEF1 : C_DEF0] = conns(def, NULL);
    m[phase ? C_ALL1 : C_ALL0] = sum;
    m[phase ? S1 : S0] = sockets();
  }

  double mn[NM], mx[NM], sm[NM];
  memcpy(mn, m, sizeof m);
  memcpy(mx, m, sizeof m);
  memcpy(sm, m, sizeof m);
  dist_tensor tn = dist_tensor_1d(mn, DIST_FLOAT64, NM), tx = dist_tensor_1d(mx, DIST_FLOAT64, NM),
              ts = dist_tensor_1d(sm, DIST_FLOAT64, NM);
  TRY("min", dist_all_reduce(&tn, DIST_MIN, NULL, NULL));
  TRY("max", dist_all_reduce(&tx, DIST_MAX, NULL, NULL));
  TRY("sum", dist_all_reduce(&ts, DIST_SUM, NULL, NULL));
  if (rank == 0) {
    printf("ranks,hosts,init_ms,rdzv_ms,rdzv_min_ms,default_ms,group_ms,mesh_ms,"
           "conns_default_created_min,conns_default_created_mean,conns_default_created_max,"
           "conns_groups_created_min,conns_groups_created_mean,conns_groups_created_max,"
           "sockets_created_min,sockets_created_mean,sockets_created_max,"
           "conns_default_used_min,conns_default_used_mean,conns_default_used_max,"
           "conns_groups_used_min,conns_groups_used_mean,conns_groups_used_max,"
           "sockets_used_min,sockets_used_mean,sockets_used_max,per_coll_us\n");
    printf("%d,%.0f,%.1f,%.1f,%.1f,%.1f,%.1f,%.1f", world, hosts, mx[INIT], mx[RDZV], mn[RDZV_MIN],
           mx[DEFAULT], mx[GROUP], mx[MESH]);
    for (int i = C_DEF0; i <= S1; i++)
      printf(",%.0f,%.1f,%.0f", mn[i], sm[i] / world, mx[i]);
    printf(",%.1f\n", mx[PER]);
    fflush(stdout);
  }
  dist_device_mesh_destroy(mesh);
  dist_destroy_process_group(g_world);
  free(all);
  TRY("destroy", dist_destroy_process_group(NULL));
  return 0;
}
