/* bench_store.c - TCP store throughput and latency, the peer of torch's
 * TCPStore benchmark (shared/peers/torch/store_bench.py), measured the same
 * way: each of C client processes runs N operations on its own keys; the
 * rate is C*N over the slowest client's wall time; p50/p99 are over every
 * single operation of every client.
 *
 * Processes: the server runs in a forked process of its own (as torch's
 * runs in the benchmark's parent, off the clients' cores' books), and every
 * client is a forked process; the parent only forks, collects and prints,
 * and never creates a library thread, so forking stays safe.
 *
 * Output, CSV on stdout: system,op,clients,ops_per_s,p50_us,p99_us. */
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <dist/dist.h>

#define MAX_CLIENTS 64
#define GET_KEYS 200

static const char *usage =
    "usage: bench_store [--ops set,get,add,wait] [--clients 1,8] [--n N] [--help]\n"
    "TCP store operations per second and latency, as CSV:\n"
    "  system,op,clients,ops_per_s,p50_us,p99_us\n"
    "Each client process runs N operations (default 5000) on its own keys;\n"
    "the server runs in its own forked process. get and wait read 200 keys\n"
    "the client set beforehand; set does not wait for a reply (as torch).\n";

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void die(const char *what, int rc, dist_store *s) {
  fprintf(stderr, "bench_store: %s: %s: %s\n", what, dist_status_name(rc),
          s ? dist_store_errmsg(s) : dist_last_errmsg());
  _exit(1);
}

/* The server process: serves until the parent closes stop_fd. */
static void server(int port_fd, int stop_fd) {
  dist_store_tcp_opts o = {0};
  o.is_server = true;
  o.timeout_ms = 60000;
  o.token = getenv("DIST_TOKEN");
  dist_store *s;
  int rc = dist_store_tcp_create(&o, &s);
  if (rc != DIST_OK)
    die("server", rc, NULL);
  uint16_t port = dist_store_tcp_port(s);
  if (write(port_fd, &port, sizeof port) != sizeof port)
    _exit(1);
  char b;
  while (read(stop_fd, &b, 1) > 0) {
  }
  dist_store_destroy(s);
  _exit(0);
}

static int one_op(dist_store *s, const char *op, int cid, int i, char *key, size_t klen) {
  static const char val[] = "vvvvvvvvvvvvvvvv";
  if (op[0] == 's') {
    snprintf(key, klen, "k%d_%d", cid, i);
    return dist_store_set(s, key, val, 16);
  }
  if (op[0] == 'a') {
    snprintf(key, klen, "c%d", cid);
    return dist_store_add(s, key, 1, NULL);
  }
  snprintf(key, klen, "k%d_%d", cid, i % GET_KEYS);
  if (op[0] == 'w')
    return dist_store_wait(s, (const char *const *)&key, 1, DIST_STORE_DEFAULT_TIMEOUT);
  void *v;
  int rc = dist_store_get(s, key, &v, NULL);
  dist_free(v);
  return rc;
}

/* A client process: waits for all clients, runs n ops, reports the wall
 * time and every latency (in seconds) through out_fd. */
static void client(uint16_t port, const char *op, int cid, int nclients, int n, int out_fd) {
  dist_store_tcp_opts o = {0};
  o.host = "127.0.0.1";
  o.port = port;
  o.timeout_ms = 60000;
  o.token = getenv("DIST_TOKEN");
  dist_store *s;
  int rc = dist_store_tcp_create(&o, &s);
  if (rc != DIST_OK)
    die("client", rc, NULL);
  char key[64];
  for (int i = 0; op[0] != 's' && op[0] != 'a' && i < GET_KEYS; i++) {
    snprintf(key, sizeof key, "k%d_%d", cid, i);
    if ((rc = dist_store_set(s, key, "vvvvvvvvvvvvvvvv", 16)) != DIST_OK)
      die("setup", rc, s);
  }
  int64_t arrived;
  if ((rc = dist_store_add(s, "arrived", 1, &arrived)) != DIST_OK)
    die("barrier", rc, s);
  if (arrived == nclients)
    dist_store_set(s, "go", "1", 1);
  const char *go = "go";
  if ((rc = dist_store_wait(s, &go, 1, 60000)) != DIST_OK)
    die("barrier", rc, s);
  double *lat = malloc(sizeof *lat * (size_t)n);
  double t0 = now_s();
  for (int i = 0; i < n; i++) {
    double a = now_s();
    if ((rc = one_op(s, op, cid, i, key, sizeof key)) != DIST_OK)
      die(op, rc, s);
    lat[i] = now_s() - a;
  }
  /* Sets are not acknowledged one by one: end with a round trip, so the
   * wall time covers the server having applied every one. */
  int64_t nk;
  if ((rc = dist_store_num_keys(s, &nk)) != DIST_OK)
    die("final round trip", rc, s);
  double wall = now_s() - t0;
  if (write(out_fd, &wall, sizeof wall) != sizeof wall ||
      write(out_fd, lat, sizeof *lat * (size_t)n) != (ssize_t)(sizeof *lat * (size_t)n))
    _exit(1);
  dist_store_destroy(s);
  _exit(0);
}

static int cmp_d(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static int read_full(int fd, void *buf, size_t len) {
  for (size_t done = 0; done < len;) {
    ssize_t r = read(fd, (char *)buf + done, len - done);
    if (r <= 0)
      return -1;
    done += (size_t)r;
  }
  return 0;
}

static int run(const char *op, int nclients, int n) {
  int pp[2], sp[2];
  if (pipe(pp) || pipe(sp))
    return 1;
  fflush(stdout);
  pid_t srv = fork();
  if (srv == 0) {
    close(sp[1]);
    server(pp[1], sp[0]);
  }
  close(sp[0]);
  uint16_t port;
  if (read_full(pp[0], &port, sizeof port) != 0)
    return 1;
  int rp[MAX_CLIENTS][2];
  pid_t kids[MAX_CLIENTS];
  for (int c = 0; c < nclients; c++) {
    if (pipe(rp[c]))
      return 1;
    kids[c] = fork();
    if (kids[c] == 0)
      client(port, op, c, nclients, n, rp[c][1]);
    close(rp[c][1]);
  }
  double wall = 0, *lat = malloc(sizeof *lat * (size_t)n * (size_t)nclients);
  int bad = 0;
  for (int c = 0; c < nclients; c++) {
    double w;
    if (read_full(rp[c][0], &w, sizeof w) ||
        read_full(rp[c][0], lat + (size_t)c * (size_t)n, sizeof *lat * (size_t)n))
      bad = 1;
    wall = w > wall ? w : wall;
    close(rp[c][0]);
    waitpid(kids[c], NULL, 0);
  }
  close(sp[1]); /* stops the server */
  waitpid(srv, NULL, 0);
  if (bad) {
    free(lat);
    return 1;
  }
  size_t total = (size_t)n * (size_t)nclients;
  qsort(lat, total, sizeof *lat, cmp_d);
  printf("libdist,%s,%d,%.0f,%.1f,%.1f\n", op, nclients, (double)total / wall,
         lat[total / 2] * 1e6, lat[(size_t)((double)total * 0.99)] * 1e6);
  fflush(stdout);
  free(lat);
  return 0;
}

int main(int argc, char **argv) {
  const char *ops = "set,get,add,wait", *clients = "1,8";
  int n = 5000;
  static const struct option lo[] = {{"ops", 1, 0, 'o'}, {"clients", 1, 0, 'c'},
                                     {"n", 1, 0, 'n'},   {"help", 0, 0, 'h'},
                                     {0, 0, 0, 0}};
  for (int c; (c = getopt_long(argc, argv, "o:c:n:h", lo, NULL)) != -1;) {
    switch (c) {
    case 'o': ops = optarg; break;
    case 'c': clients = optarg; break;
    case 'n': n = atoi(optarg); break;
    case 'h': fputs(usage, stdout); return 0;
    default: fputs(usage, stderr); return 2;
    }
  }
  if (n <= 0) {
    fputs(usage, stderr);
    return 2;
  }
  printf("system,op,clients,ops_per_s,p50_us,p99_us\n");
  char obuf[256];
  snprintf(obuf, sizeof obuf, "%s", ops);
  for (char *op = strtok(obuf, ","); op; op = strtok(NULL, ",")) {
    if (strcmp(op, "set") && strcmp(op, "get") && strcmp(op, "add") && strcmp(op, "wait")) {
      fprintf(stderr, "bench_store: unknown op '%s'\n%s", op, usage);
      return 2;
    }
    for (const char *c = clients; *c;) {
      int nc = atoi(c);
      if (nc < 1 || nc > MAX_CLIENTS) {
        fprintf(stderr, "bench_store: clients must be 1..%d\n", MAX_CLIENTS);
        return 2;
      }
      if (run(op, nc, n) != 0) {
        fprintf(stderr, "bench_store: %s with %d clients failed\n", op, nc);
        return 1;
      }
      c += strcspn(c, ",");
      c += *c == ',';
    }
  }
  return 0;
}
