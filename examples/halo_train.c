/* halo_train.c - a stencil step on a 2 x 4 device mesh with one planted
 * bug at a time (built as build/bin/halo_train).
 *
 *     DIST_DEBUG=DETAIL distrun -n 8 build/bin/halo_train --bug omitrecv
 *
 * 8 ranks on a mesh "dp" x "tp" = 2 x 4 (dist_init_device_mesh). Each
 * step: a halo exchange with the left and right neighbours on the world's
 * ring in one dist_batch_isend_irecv (receive from the left with tag 2 and
 * from the right with tag 1, send left with tag 1 and right with tag 2),
 * then a tp all_reduce and a dp all_reduce of the same shape (float32[4]),
 * a boundary exchange of 1 MiB between the two ranks of each dp group with
 * blocking dist_send and dist_recv (the lower rank sends first, the upper
 * receives first: messages this large wait for their receive), and a world
 * broadcast of the loss from rank 0.
 * Values are checked after every step, so a run without a bug says "ok".
 *
 * Bugs (planted on rank --rank, default 2, in step --step, default 1):
 *   omitrecv  the rank leaves its receive from the right out of its batch:
 *             its right neighbour's send to it is never taken
 *   omitsend  the rank leaves its send to the right out of its batch: its
 *             right neighbour's receive waits for ever
 *   wrongpeer the rank sends its right halo to r + 2 instead of r + 1
 *   wrongdim  the rank calls its tp all_reduce on its dp group (same
 *             shape: the dp partner's own dp all_reduce takes it)
 *   root      the rank broadcasts the loss from root 1 instead of 0 (on
 *             rank 0: the root itself waits to read from rank 1)
 *   selfroot  the rank broadcasts the loss as its root (it sends)
 *   recvfirst the rank (a lower one) receives its boundary before it sends
 *   sendfirst the rank (an upper one, --rank 4 and up) sends its boundary
 *             before it receives */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <dist/dist.h>

#define HALO 8
#define EDGE (1 << 18) /* float32: 1 MiB */

typedef struct job {
  int rank, world;
  dist_pg *g_dp, *g_tp;
  const char *bug;
  int culprit, bug_step, steps;
} job;

static bool planted(const job *j, int step, const char *bug) {
  return j->rank == j->culprit && step == j->bug_step && !strcmp(j->bug, bug);
}

#define TRY(what, call)                                                    \
  do {                                                                     \
    int rc_ = (call);                                                      \
    if (rc_ != DIST_OK) {                                                  \
      fprintf(stderr, "%s failed: %s\n", what, dist_errmsg(rc_, NULL));    \
      exit(1);                                                             \
    }                                                                      \
  } while (0)

static void expect(const job *j, int step, const char *what, float got, float want) {
  if (got != want && !planted(j, step, j->bug)) {
    fprintf(stderr, "rank %d step %d: %s is %g, expected %g\n", j->rank, step, what, got, want);
    exit(3);
  }
}

/* The step's halo: this rank's value i towards its left and right. */
static float halo_value(int rank, int step, bool right, int i) {
  return (float)(rank * 1000 + (right ? 200 : 100) + step + i);
}

static void halo(const job *j, int step) {
  int left = (j->rank + j->world - 1) % j->world, right = (j->rank + 1) % j->world;
  float to_l[HALO], to_r[HALO], from_l[HALO], from_r[HALO];
  for (int i = 0; i < HALO; i++) {
    to_l[i] = halo_value(j->rank, step, false, i);
    to_r[i] = halo_value(j->rank, step, true, i);
    from_l[i] = from_r[i] = -1;
  }
  dist_tensor tl = dist_tensor_1d(to_l, DIST_FLOAT32, HALO);
  dist_tensor tr = dist_tensor_1d(to_r, DIST_FLOAT32, HALO);
  dist_tensor fl = dist_tensor_1d(from_l, DIST_FLOAT32, HALO);
  dist_tensor fr = dist_tensor_1d(from_r, DIST_FLOAT32, HALO);
  int to = planted(j, step, "wrongpeer") ? (j->rank + 2) % j->world : right;
  dist_p2p_op ops[4];
  size_t n = 0;
  ops[n++] = (dist_p2p_op){.is_send = false, .tensor = &fl, .peer = left, .tag = 2};
  if (!planted(j, step, "omitrecv"))
    ops[n++] = (dist_p2p_op){.is_send = false, .tensor = &fr, .peer = right, .tag = 1};
  ops[n++] = (dist_p2p_op){.is_send = true, .tensor = &tl, .peer = left, .tag = 1};
  if (!planted(j, step, "omitsend"))
    ops[n++] = (dist_p2p_op){.is_send = true, .tensor = &tr, .peer = to, .tag = 2};
  dist_work *w;
  TRY("halo batch_isend_irecv", dist_batch_isend_irecv(ops, n, &w));
  TRY("halo wait", dist_work_wait(w, -1));
  dist_work_free(w);
  expect(j, step, "halo from the left", from_l[0], halo_value(left, step, true, 0));
  expect(j, step, "halo from the right", from_r[HALO - 1],
         halo_value(right, step, false, HALO - 1));
}

/* A tp all_reduce and a dp all_reduce of one shape: each rank's tp group
 * holds ranks base..base+3, its dp group rank % 4 and rank % 4 + 4. */
static void reduce(const job *j, int step) {
  float t[4] = {1, (float)j->rank, 0, 0}, d[4] = {1, (float)j->rank, 0, 0};
  dist_tensor tt = dist_tensor_1d(t, DIST_FLOAT32, 4), td = dist_tensor_1d(d, DIST_FLOAT32, 4);
  dist_pg *g = planted(j, step, "wrongdim") ? j->g_dp : j->g_tp;
  TRY("tp all_reduce", dist_all_reduce(&tt, DIST_SUM, g, NULL));
  TRY("dp all_reduce", dist_all_reduce(&td, DIST_SUM, j->g_dp, NULL));
  int base = j->rank / 4 * 4;
  expect(j, step, "tp all_reduce", t[1], (float)(4 * base + 6));
  expect(j, step, "dp all_reduce", d[1], (float)(2 * (j->rank % 4) + 4));
}

/* The boundary with the dp partner (rank +- 4), 1 MiB each way: the lower
 * rank sends, then receives; the upper the other way round. */
static void edge(const job *j, int step) {
  static float out[EDGE], in[EDGE];
  int partner = (j->rank + 4) % 8;
  for (int i = 0; i < EDGE; i += EDGE / 4)
    out[i] = (float)(j->rank * 100 + step);
  in[EDGE / 2] = -1;
  dist_tensor to = dist_tensor_1d(out, DIST_FLOAT32, EDGE);
  dist_tensor from = dist_tensor_1d(in, DIST_FLOAT32, EDGE);
  bool send_first = j->rank < 4;
  if (planted(j, step, "recvfirst") || planted(j, step, "sendfirst"))
    send_first = !send_first;
  if (send_first) {
    TRY("edge send", dist_send(&to, partner, j->g_dp, 3));
    TRY("edge recv", dist_recv(&from, partner, j->g_dp, 3, NULL));
  } else {
    TRY("edge recv", dist_recv(&from, partner, j->g_dp, 3, NULL));
    TRY("edge send", dist_send(&to, partner, j->g_dp, 3));
  }
  expect(j, step, "edge", in[EDGE / 2], (float)(partner * 100 + step));
}

/* The loss, from rank 0 to everybody. */
static void loss(const job *j, int step) {
  float l[2] = {0, 0};
  if (j->rank == 0)
    l[0] = l[1] = (float)(step + 0.5);
  int root = planted(j, step, "root") ? 1 : planted(j, step, "selfroot") ? j->rank : 0;
  dist_tensor t = dist_tensor_1d(l, DIST_FLOAT32, 2);
  TRY("loss broadcast", dist_broadcast(&t, root, NULL, NULL));
  expect(j, step, "loss", l[1], (float)(step + 0.5));
}

int main(int argc, char **argv) {
  job j = {.bug = "none", .culprit = 2, .bug_step = 1, .steps = 4};
  for (int i = 1; i < argc; i++) {
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(argv[i], "--help")) {
      printf("usage: distrun -n 8 %s [--bug NAME] [--rank R] [--step S]\n"
             "bugs: omitrecv omitsend wrongpeer wrongdim root selfroot recvfirst "
             "sendfirst\n", argv[0]);
      return 0;
    } else if (!strcmp(argv[i], "--bug") && v) {
      j.bug = argv[++i];
    } else if (!strcmp(argv[i], "--rank") && v) {
      j.culprit = atoi(argv[++i]);
    } else if (!strcmp(argv[i], "--step") && v) {
      j.bug_step = atoi(argv[++i]);
    } else {
      fprintf(stderr, "halo_train: bad argument %s\n", argv[i]);
      return 2;
    }
  }
  TRY("init", dist_init_process_group(NULL));
  j.rank = dist_get_rank(NULL);
  j.world = dist_get_world_size(NULL);
  if (j.world != 8) {
    fprintf(stderr, "halo_train needs 8 ranks\n");
    return 2;
  }
  int64_t shape[2] = {2, 4};
  const char *names[2] = {"dp", "tp"};
  dist_device_mesh *mesh;
  TRY("device mesh", dist_init_device_mesh("cpu", shape, 2, names, &mesh));
  TRY("dp group", dist_mesh_get_group_by_name(mesh, "dp", &j.g_dp));
  TRY("tp group", dist_mesh_get_group_by_name(mesh, "tp", &j.g_tp));
  for (int s = 0; s < j.steps; s++) {
    halo(&j, s);
    reduce(&j, s);
    edge(&j, s);
    loss(&j, s);
  }
  dist_device_mesh_destroy(mesh);
  TRY("destroy", dist_destroy_process_group(NULL));
  printf("rank %d: ok\n", j.rank);
  return 0;
}
