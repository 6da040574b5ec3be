/* prog_multihost.c - one rank of the multi-host tests (built as
 * build/bin/multihost_rank), started by distrun inside a namespace of the
 * test bed (netbed.h). Plain C: prints what failed with its rank and exits
 * non-zero.
 *
 *   multihost_rank suite SEED
 *       The CPU collective suite (tests/support/coll_suite.h: every op and
 *       dtype, sync and async, a subgroup of every other rank), then groups
 *       chosen by host: one per host (never spans), the hosts' first ranks
 *       (spans every host), and one rank of the first and the last host,
 *       each with a seeded sample of cases. Every output that all members
 *       must hold (all_reduce, broadcast, all_gather) is folded into a
 *       digest per group, and the digests are compared through the job's
 *       store: "digests agree" means bitwise-identical results on every
 *       rank, whatever order the reference reduces in. Prints its host
 *       identity ("host <boot id>/<netns inode>") for the test to compare.
 *   multihost_rank loop ITERS N
 *       ITERS all_reduce SUMs of float32[N], each checked exactly; prints
 *       "ready pid=P" after the first and "passed" at the end. ITERS 0:
 *       until the job is ended (fault tests end it).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <dist/tracer.h>

#include "coll_suite.h"

#define MAX_DIGESTS 16

typedef struct digest {
  uint64_t members; /* bit r: global rank r is a member */
  uint64_t hash;    /* FNV-1a over every replicated output, in call order */
  long outputs;
} digest;

static digest digests[MAX_DIGESTS];
static int n_digests;

static uint64_t members_of(dist_pg *g, int world) {
  uint64_t m = 0;
  for (int r = 0; r < world && r < 64; r++) {
    int gr = -1;
    if (dist_get_group_rank(g, r, &gr) == DIST_OK && gr >= 0)
      m |= 1ull << r;
  }
  return m;
}

static void on_result(void *arg, dist_pg *g, const coll_case *c, const void *bytes, size_t len) {
  (void)c;
  uint64_t m = members_of(g, *(int *)arg);
  digest *d = NULL;
  for (int i = 0; i < n_digests && !d; i++)
    if (digests[i].members == m)
      d = &digests[i];
  if (!d && n_digests < MAX_DIGESTS) {
    d = &digests[n_digests++];
    *d = (digest){m, 1469598103934665603ull, 0};
  }
  if (!d)
    return;
  const unsigned char *p = bytes;
  for (size_t i = 0; i < len; i++)
    d->hash = (d->hash ^ p[i]) * 1099511628211ull;
  d->outputs++;
}

/* Every member publishes its digest of each group; each rank then reads
 * every other member's and compares. */
static int compare_digests(const dist_test_ctx *ctx) {
  dist_store *st = dist_get_default_store();
  char key[96], val[96];
  for (int i = 0; i < n_digests; i++) {
    snprintf(key, sizeof key, "mh/digest/%" PRIx64 "/%d", digests[i].members, ctx->rank);
    int n = snprintf(val, sizeof val, "%016" PRIx64 " %ld", digests[i].hash, digests[i].outputs);
    CHECK_OK(ctx, dist_store_set(st, key, val, (size_t)n));
  }
  int compared = 0;
  for (int i = 0; i < n_digests; i++)
    for (int r = 0; r < ctx->world; r++) {
      if (!(digests[i].members >> r & 1) || r == ctx->rank)
        continue;
      snprintf(key, sizeof key, "mh/digest/%" PRIx64 "/%d", digests[i].members, r);
      void *v = NULL;
      size_t len = 0;
      CHECK_OK(ctx, dist_store_get(st, key, &v, &len));
      char mine[96];
      snprintf(mine, sizeof mine, "%016" PRIx64 " %ld", digests[i].hash, digests[i].outputs);
      bool same = len == strlen(mine) && !memcmp(v, mine, len);
      char theirs[96];
      snprintf(theirs, sizeof theirs, "%.*s", (int)(len < 95 ? len : 95), (char *)v);
      dist_free(v);
      CHECK(ctx, same, "group %#" PRIx64 ": rank %d's results differ from rank %d's (%s vs %s)",
            digests[i].members, r, ctx->rank, theirs, mine);
      compared++;
    }
  printf("digests agree: %d groups, %d comparisons\n", n_digests, compared);
  return 0;
}

static uint64_t rng(uint64_t *s) {
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return *s;
}

static const dist_op_kind sample_ops[] = {
    DIST_OP_ALL_REDUCE, DIST_OP_REDUCE,  DIST_OP_BROADCAST, DIST_OP_ALL_GATHER,
    DIST_OP_ALL_GATHER_INTO_TENSOR, DIST_OP_GATHER, DIST_OP_SCATTER,
    DIST_OP_REDUCE_SCATTER_TENSOR, DIST_OP_ALL_TO_ALL_SINGLE, DIST_OP_BARRIER, DIST_OP_SEND,
};
#define N_SAMPLE (int)(sizeof sample_ops / sizeof sample_ops[0])

/* A seeded sample on g: every op once, sync and async alternating, float
 * sums over sizes that cross the engines' chunking. */
static int sample(const dist_test_ctx *ctx, dist_pg *g, const char *what, uint64_t s) {
  if (g == DIST_GROUP_NON_MEMBER)
    return 0;
  int size = dist_get_world_size(g);
  static const int64_t sizes[] = {1, 7, 300, 4099, 70000};
  for (int i = 0; i < 2 * N_SAMPLE; i++) {
    coll_case c = {0};
    c.op = sample_ops[i % N_SAMPLE];
    c.dtype = i % 3 == 0 ? DIST_FLOAT64 : i % 3 == 1 ? DIST_FLOAT32 : DIST_INT32;
    c.redop = i % 2 ? DIST_SUM : DIST_MAX;
    c.n = sizes[rng(&s) % 5];
    c.root = (int)(rng(&s) % (uint64_t)size);
    c.async = i & 1;
    c.seed = rng(&s) % 100000;
    char msg[1024];
    if (coll_check(g, &c, msg, sizeof msg))
      return FAIL(ctx, "group %s: %s", what, msg);
  }
  return 0;
}

static int host_groups(const dist_test_ctx *ctx, uint64_t seed) {
  int nnodes = atoi(getenv("DIST_NNODES") ? getenv("DIST_NNODES") : "1");
  int nproc = ctx->world / nnodes, me = ctx->rank / nproc;
  dist_pg *mine = NULL, *leaders = NULL, *ends = NULL;
  for (int k = 0; k < nnodes; k++) { /* every rank creates every group, in order */
    int members[64], n = 0;
    for (int r = k * nproc; r < (k + 1) * nproc; r++)
      members[n++] = r;
    dist_group_opts o = {.desc = "host"};
    dist_pg *g = NULL;
    CHECK_OK(ctx, dist_new_group(members, (size_t)n, &o, &g));
    if (k == me)
      mine = g;
  }
  int lead[64], ends_m[2] = {nproc > 1 ? 1 : 0, ctx->world - nproc};
  for (int k = 0; k < nnodes; k++)
    lead[k] = k * nproc;
  dist_group_opts lo = {.desc = "leaders"}, eo = {.desc = "ends"};
  CHECK_OK(ctx, dist_new_group(lead, (size_t)nnodes, &lo, &leaders));
  CHECK_OK(ctx, dist_new_group(ends_m, 2, &eo, &ends));
  if (sample(ctx, mine, "host", seed + 1) || sample(ctx, leaders, "leaders", seed + 2) ||
      sample(ctx, ends, "ends", seed + 3))
    return 1;
  return 0;
}

static void print_host(const dist_test_ctx *ctx) {
  char boot[64] = "?";
  FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
  if (f) {
    if (!fgets(boot, sizeof boot, f))
      boot[0] = '\0';
    fclose(f);
  }
  boot[strcspn(boot, "\n")] = '\0';
  struct stat st = {0};
  stat("/proc/self/ns/net", &st);
  printf("rank %d host %s/%llu\n", ctx->rank, boot, (unsigned long long)st.st_ino);
}

static int init(dist_test_ctx *ctx) {
  CHECK_OK(ctx, dist_init_process_group(NULL));
  ctx->rank = dist_get_rank(NULL);
  ctx->world = dist_get_world_size(NULL);
  return 0;
}

/* Ranks of node k are k * LOCAL_WORLD_SIZE onwards (distrun's multi-node
 * numbering), and a node is a host of the bed: the reference reduces in
 * the hierarchical order of groups that span hosts (coll_check.h). */
static int host_of[64];

static void place_hosts(int world) {
  const char *lws = getenv("LOCAL_WORLD_SIZE");
  int per = lws ? atoi(lws) : 0;
  for (int r = 0; r < world && r < 64; r++)
    host_of[r] = per > 0 ? r / per : 0;
  coll_check_set_hosts(host_of, world < 64 ? world : 64);
}

static int suite(dist_test_ctx *ctx, uint64_t seed) {
  if (init(ctx))
    return 1;
  print_host(ctx);
  int world = ctx->world;
  place_hosts(world);
  coll_check_set_result_hook(on_result, &world);
  if (coll_suite_run(ctx, seed) || host_groups(ctx, seed) || compare_digests(ctx))
    return 1;
  CHECK_OK(ctx, dist_destroy_process_group(NULL));
  printf("suite passed on rank %d of %d\n", ctx->rank, ctx->world);
  return 0;
}

static int loop(dist_test_ctx *ctx, long iters, int64_t n) {
  if (init(ctx))
    return 1;
  float *v = malloc((size_t)n * sizeof *v);
  CHECK(ctx, v, "out of memory");
  float want_base = (float)(ctx->world * (ctx->world - 1) / 2);
  for (long it = 0; iters == 0 || it < iters; it++) {
    for (int64_t i = 0; i < n; i++)
      v[i] = (float)ctx->rank + (float)(i % 64);
    dist_tensor t = dist_tensor_1d(v, DIST_FLOAT32, n);
    int rc = dist_all_reduce(&t, DIST_SUM, NULL, NULL);
    if (rc != DIST_OK) {
      fprintf(stderr, "rank %d: all_reduce %ld failed: %s\n", ctx->rank, it,
              dist_errmsg(rc, NULL));
      free(v);
      return 3;
    }
    for (int64_t i = 0; i < n; i++)
      CHECK(ctx, v[i] == want_base + (float)ctx->world * (float)(i % 64),
            "iteration %ld element %lld: %g", it, (long long)i, v[i]);
    if (it == 0) {
      printf("ready pid=%d rank=%d\n", (int)getpid(), ctx->rank);
      fflush(stdout);
    }
  }
  free(v);
  CHECK_OK(ctx, dist_destroy_process_group(NULL));
  printf("passed rank=%d\n", ctx->rank);
  return 0;
}

/* One all_reduce, then a ring of point-to-point messages (each rank sends
 * to the next and receives from the previous): the connections a rank
 * needs are its host leaders' schedule and its two ring neighbours
 * (test_conns.c reads them from the trace). */
static int ring(dist_test_ctx *ctx) {
  if (init(ctx))
    return 1;
  int32_t x = ctx->rank;
  dist_tensor t = dist_tensor_1d(&x, DIST_INT32, 1);
  CHECK_OK(ctx, dist_all_reduce(&t, DIST_SUM, NULL, NULL));
  CHECK(ctx, x == ctx->world * (ctx->world - 1) / 2, "all_reduce %d", x);
  int to = (ctx->rank + 1) % ctx->world, from = (ctx->rank + ctx->world - 1) % ctx->world;
  int32_t out = ctx->rank, in = -1;
  dist_tensor to_t = dist_tensor_1d(&out, DIST_INT32, 1);
  dist_tensor from_t = dist_tensor_1d(&in, DIST_INT32, 1);
  dist_work *ws, *wr;
  CHECK_OK(ctx, dist_irecv(&from_t, from, NULL, 7, &wr));
  CHECK_OK(ctx, dist_isend(&to_t, to, NULL, 7, &ws));
  CHECK_OK(ctx, dist_work_wait(ws, -1));
  CHECK_OK(ctx, dist_work_wait(wr, -1));
  dist_work_free(ws);
  dist_work_free(wr);
  CHECK(ctx, in == from, "received %d from rank %d", in, from);
  CHECK_OK(ctx, dist_all_reduce(&t, DIST_SUM, NULL, NULL)); /* nobody leaves early */
  CHECK_OK(ctx, dist_destroy_process_group(NULL));
  printf("passed rank=%d\n", ctx->rank);
  return 0;
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  dist_tracer_register(); /* as libdist's constructor does */
  dist_test_ctx ctx = {0};
  if (argc == 3 && !strcmp(argv[1], "suite"))
    return suite(&ctx, strtoull(argv[2], NULL, 0));
  if (argc == 4 && !strcmp(argv[1], "loop"))
    return loop(&ctx, atol(argv[2]), atoll(argv[3]));
  if (argc == 2 && !strcmp(argv[1], "ring"))
    return ring(&ctx);
  fprintf(stderr, "usage: multihost_rank suite SEED | loop ITERS N | ring\n");
  return 2;
}
