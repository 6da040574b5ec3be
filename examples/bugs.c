/* bugs.c - plants one classic distributed bug so you can see what libdist
 * reports (built as build/bin/example_bugs).
 *
 *     distrun -n 4 example_bugs --list
 *     DIST_DEBUG=DETAIL distrun -n 4 example_bugs --bug shape
 *
 * Every rank runs a few healthy steps (all_reduce of float32[1024]), then
 * the bug is planted on one rank (the last one, unless the bug says
 * otherwise) and that rank prints what it planted. With DIST_DEBUG=DETAIL
 * the checking layer stops the job before the bad operation runs and names
 * the rank, the field and the line; at OFF the backends' own checks catch
 * the size mismatches (shape, split) and the rest runs into the timeout
 * (--timeout, 20 s here) or computes garbage. Under distrun the job's exit
 * status says which: 10 desync, 11 hang or timeout, 12 a rank died.
 * The monitor's bugs (hang, kill, deadlock, straggler) are reported at
 * every debug level: a stall report naming the culprit before the timeout
 * and the diagnosis at it, the survivors' view of a killed rank, the
 * wait-for cycle across groups, and (at DETAIL) the straggler.
 *
 * To add a bug: write a function `static int bug_x(const ctx *c)` that runs
 * the planted step (returning the libdist status of the call that should
 * fail) and add a row to the table `bugs` below. */
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <dist/dist.h>

typedef struct ctx {
  int rank, world, culprit; /* culprit: the rank that plants the bug */
  float *buf;               /* float32[2048] scratch */
  const char *what;         /* the call being made (for the failure line) */
  dist_pg *group;           /* its group (NULL: default), for the message */
} ctx;

typedef struct bug {
  const char *name;
  int min_ranks;
  const char *planted; /* printed by the culprit: "rank R planted: ..." */
  int (*run)(ctx *c);
  void (*before_init)(void); /* environment a bug needs, or NULL */
} bug;

#define N 1024

/* A macro, not a function, so a report's call site is the bug's own line. */
#define all_reduce_n(c, n, dt, op, g)                                    \
  ((c)->what = "all_reduce", (c)->group = (g),                           \
   dist_all_reduce(&(dist_tensor){.data = (c)->buf, .dtype = (dt), .ndim = 1, \
                                  .shape = {(n)}},                       \
                   (op), (g), NULL))

static bool is_culprit(const ctx *c) { return c->rank == c->culprit; }

/* --- the bugs ----------------------------------------------------------- */

static int bug_shape(ctx *c) {
  return all_reduce_n(c, is_culprit(c) ? 2 * N : N, DIST_FLOAT32, DIST_SUM, NULL);
}

static int bug_dtype(ctx *c) {
  return all_reduce_n(c, N, is_culprit(c) ? DIST_INT32 : DIST_FLOAT32, DIST_SUM, NULL);
}

static int bug_op(ctx *c) {
  if (!is_culprit(c))
    return all_reduce_n(c, N, DIST_FLOAT32, DIST_SUM, NULL);
  c->what = "broadcast";
  dist_tensor t = dist_tensor_1d(c->buf, DIST_FLOAT32, N);
  return dist_broadcast(&t, 0, NULL, NULL);
}

static int bug_redop(ctx *c) {
  return all_reduce_n(c, N, DIST_FLOAT32, is_culprit(c) ? DIST_MAX : DIST_SUM, NULL);
}

static int bug_root(ctx *c) {
  c->what = "broadcast";
  dist_tensor t = dist_tensor_1d(c->buf, DIST_FLOAT32, N);
  return dist_broadcast(&t, is_culprit(c) ? 1 : 0, NULL, NULL);
}

/* all_to_all_single of world*4 rows: the culprit sends 5 rows to rank 0
 * and 3 to rank 1 while everyone else expects 4 from it. */
static int bug_split(ctx *c) {
  int64_t in[64], out[64];
  for (int i = 0; i < c->world; i++)
    in[i] = out[i] = 4;
  if (is_culprit(c))
    in[0] = 5, in[1] = 3;
  dist_tensor i = dist_tensor_1d(c->buf, DIST_FLOAT32, 4 * c->world);
  dist_tensor o = dist_tensor_1d(c->buf + 1024, DIST_FLOAT32, 4 * c->world);
  c->what = "all_to_all_single";
  return dist_all_to_all_single(&o, &i, out, in, NULL, NULL);
}

/* The culprit skips one all_reduce of three, then leaves. */
static int bug_skip(ctx *c) {
  for (int step = 0; step < 3; step++) {
    if (is_culprit(c) && step == 1)
      continue;
    int rc = all_reduce_n(c, N, DIST_FLOAT32, DIST_SUM, NULL);
    if (rc != DIST_OK)
      return rc;
  }
  return DIST_OK;
}

/* Two groups, created in a different order on the culprit. */
static int bug_group_order(ctx *c) {
  int pair[2] = {0, 1}, all[64];
  for (int i = 0; i < c->world; i++)
    all[i] = i;
  dist_group_opts a = {.desc = "pair 0-1"}, b = {.desc = "everyone"};
  dist_pg *ga = NULL, *gb = NULL;
  c->what = "new_group";
  c->group = NULL;
  int rc = is_culprit(c) ? dist_new_group(all, (size_t)c->world, &b, &gb)
                         : dist_new_group(pair, 2, &a, &ga);
  if (rc == DIST_OK)
    rc = is_culprit(c) ? dist_new_group(pair, 2, &a, &ga)
                       : dist_new_group(all, (size_t)c->world, &b, &gb);
  if (rc == DIST_OK)
    rc = all_reduce_n(c, N, DIST_FLOAT32, DIST_SUM, gb);
  return rc;
}

/* A barrier on the group of ranks 1.., which the culprit never enters. */
static int bug_barrier(ctx *c) {
  int ranks[64];
  for (int i = 1; i < c->world; i++)
    ranks[i - 1] = i;
  dist_group_opts o = {.desc = "ranks 1.."};
  dist_pg *g;
  c->what = "new_group";
  int rc = dist_new_group(ranks, (size_t)c->world - 1, &o, &g);
  if (rc != DIST_OK || g == DIST_GROUP_NON_MEMBER)
    return rc == DIST_OK ? all_reduce_n(c, N, DIST_FLOAT32, DIST_SUM, NULL) : rc;
  if (!is_culprit(c)) {
    c->what = "barrier";
    c->group = g;
    rc = dist_barrier(g, NULL);
  }
  return rc == DIST_OK ? all_reduce_n(c, N, DIST_FLOAT32, DIST_SUM, NULL) : rc;
}

static void nan_env(void) { setenv("DIST_NAN_CHECK", "1", 0); }

static int bug_nan(ctx *c) {
  if (is_culprit(c))
    c->buf[3] = NAN;
  return all_reduce_n(c, N, DIST_FLOAT32, DIST_SUM, NULL);
}

/* The culprit never arrives at the next all_reduce (it sleeps forever, as a
 * rank stuck in its own code would): the monitor's stall report names it
 * before the timeout, the diagnosis at the timeout. */
static int bug_hang(ctx *c) {
  if (is_culprit(c))
    for (;;)
      pause();
  return all_reduce_n(c, N, DIST_FLOAT32, DIST_SUM, NULL);
}

/* The culprit is killed (SIGKILL) where it should run the all_reduce. */
static int bug_kill(ctx *c) {
  if (is_culprit(c)) {
    fflush(stdout);
    raise(SIGKILL);
  }
  return all_reduce_n(c, N, DIST_FLOAT32, DIST_SUM, NULL);
}

/* Two groups of every rank, used in opposite orders: the culprit waits in
 * 'second' for the others, who wait in 'first' for it (a wait-for cycle). */
static int bug_deadlock(ctx *c) {
  int all[64];
  for (int i = 0; i < c->world; i++)
    all[i] = i;
  dist_group_opts a = {.desc = "first"}, b = {.desc = "second"};
  dist_pg *ga = NULL, *gb = NULL;
  c->what = "new_group";
  int rc = dist_new_group(all, (size_t)c->world, &a, &ga);
  if (rc == DIST_OK)
    rc = dist_new_group(all, (size_t)c->world, &b, &gb);
  if (rc == DIST_OK)
    rc = all_reduce_n(c, N, DIST_FLOAT32, DIST_SUM, is_culprit(c) ? gb : ga);
  if (rc == DIST_OK)
    rc = all_reduce_n(c, N, DIST_FLOAT32, DIST_SUM, is_culprit(c) ? ga : gb);
  return rc;
}

static void straggler_env(void) {
  setenv("DIST_DEBUG", "DETAIL", 0);
  setenv("DIST_STATS_EVERY", "20", 0);
  dist_set_debug_level_from_env(); /* the library read it when it loaded */
}

/* The culprit is 50 ms late to each of 60 all_reduces: nothing fails, but
 * the statistics at DETAIL name it as the straggler. */
static int bug_straggler(ctx *c) {
  for (int i = 0; i < 60; i++) {
    if (is_culprit(c))
      usleep(50000);
    int rc = all_reduce_n(c, N, DIST_FLOAT32, DIST_SUM, NULL);
    if (rc != DIST_OK)
      return rc;
  }
  return DIST_OK;
}

static const bug bugs[] = {
    {"shape", 2, "all_reduce of float32[2048] where the others use float32[1024]", bug_shape, NULL},
    {"dtype", 2, "all_reduce of int32[1024] where the others use float32[1024]", bug_dtype, NULL},
    {"op", 2, "broadcast where the others call all_reduce", bug_op, NULL},
    {"redop", 2, "all_reduce with MAX where the others use SUM", bug_redop, NULL},
    {"root", 2, "broadcast from rank 1 where the others broadcast from rank 0", bug_root, NULL},
    {"split", 2, "all_to_all_single sending 5 and 3 rows to ranks 0 and 1 where they expect 4",
     bug_split, NULL},
    {"skip", 2, "skips the second of three all_reduces", bug_skip, NULL},
    {"group-order", 3, "creates group 'everyone' before 'pair 0-1'; the others the other way",
     bug_group_order, NULL},
    {"barrier", 3, "never enters the barrier of group 'ranks 1..'", bug_barrier, NULL},
    {"nan", 2, "a NaN at index 3 of its all_reduce input (DIST_NAN_CHECK=1 is set unless set)",
     bug_nan, nan_env},
    {"hang", 2, "sleeps forever instead of entering the next all_reduce", bug_hang, NULL},
    {"kill", 2, "is killed (SIGKILL) where it should enter the next all_reduce", bug_kill, NULL},
    {"deadlock", 2, "all_reduces on group 'second' then 'first'; the others the other way",
     bug_deadlock, NULL},
    {"straggler", 2, "arrives 50 ms late to each of 60 all_reduces (DIST_DEBUG=DETAIL and "
     "DIST_STATS_EVERY=20 are set unless set)", bug_straggler, straggler_env},
};
#define NBUGS (sizeof bugs / sizeof bugs[0])

/* --- the program -------------------------------------------------------- */

static void usage(FILE *f, const char *prog) {
  fprintf(f,
          "usage: distrun -n N %s --bug NAME [--timeout S]\n"
          "       %s --list | --help\n\n"
          "Plants one distributed bug on one rank so you can see what libdist reports.\n"
          "Run with DIST_DEBUG=DETAIL to have the checking layer stop the job before\n"
          "the bad operation; at OFF the backends catch size mismatches only.\n"
          "--timeout S sets the groups' timeout (default 20 s). --list prints the bugs.\n",
          prog, prog);
}

static const bug *find_bug(const char *name) {
  for (size_t i = 0; i < NBUGS; i++)
    if (!strcmp(bugs[i].name, name))
      return &bugs[i];
  return NULL;
}

/* Parses the command line; returns the bug, or NULL after printing (then
 * *exit_code says how to end). */
static const bug *parse(int argc, char **argv, double *timeout_s, int *exit_code) {
  const char *name = NULL;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      usage(stdout, argv[0]);
      return *exit_code = 0, NULL;
    } else if (!strcmp(argv[i], "--list")) {
      for (size_t k = 0; k < NBUGS; k++)
        printf("%-12s %s (at least %d ranks)\n", bugs[k].name, bugs[k].planted,
               bugs[k].min_ranks);
      return *exit_code = 0, NULL;
    } else if (!strcmp(argv[i], "--bug") && i + 1 < argc) {
      name = argv[++i];
    } else if (!strcmp(argv[i], "--timeout") && i + 1 < argc) {
      *timeout_s = strtod(argv[++i], NULL);
    } else {
      fprintf(stderr, "%s: unexpected argument '%s'\n", argv[0], argv[i]);
      usage(stderr, argv[0]);
      return *exit_code = 2, NULL;
    }
  }
  const bug *b = name ? find_bug(name) : NULL;
  if (!b) {
    fprintf(stderr, "%s: %s (--list prints the names)\n", argv[0],
            name ? "no such bug" : "--bug NAME is required");
    *exit_code = 2;
  }
  if (*timeout_s <= 0) {
    fprintf(stderr, "%s: --timeout needs a positive number of seconds\n", argv[0]);
    *exit_code = 2;
    return NULL;
  }
  return b;
}

static int healthy_steps(ctx *c) {
  for (int step = 0; step < 3; step++) {
    for (int i = 0; i < N; i++)
      c->buf[i] = (float)(c->rank + i);
    int rc = all_reduce_n(c, N, DIST_FLOAT32, DIST_SUM, NULL);
    if (rc != DIST_OK)
      return rc;
  }
  return DIST_OK;
}

int main(int argc, char **argv) {
  double timeout_s = 20;
  int code = 2;
  const bug *b = parse(argc, argv, &timeout_s, &code);
  if (!b)
    return code;
  if (b->before_init)
    b->before_init();
  dist_init_opts o = dist_init_opts_default();
  o.timeout_ms = (int64_t)(timeout_s * 1000);
  int rc = dist_init_process_group(&o);
  if (rc != DIST_OK) {
    fprintf(stderr, "init failed: %s: %s\n", dist_status_name(rc), dist_last_errmsg());
    return 1;
  }
  static float buf[4096];
  ctx c = {.rank = dist_get_rank(NULL), .world = dist_get_world_size(NULL), .buf = buf};
  c.culprit = c.world - 1;
  if (c.world < b->min_ranks || c.world > 64) {
    fprintf(stderr, "--bug %s needs %d to 64 ranks (this job has %d)\n", b->name,
            b->min_ranks, c.world);
    dist_destroy_process_group(NULL);
    return 2;
  }
  rc = healthy_steps(&c);
  if (rc == DIST_OK) {
    if (is_culprit(&c))
      printf("rank %d planted bug '%s': %s\n", c.rank, b->name, b->planted);
    fflush(stdout);
    rc = b->run(&c);
  }
  if (rc != DIST_OK) {
    const char *msg = dist_pg_errmsg(c.group);
    fprintf(stderr, "rank %d: %s failed: %s: %s\n", c.rank, c.what, dist_status_name(rc),
            msg && *msg ? msg : dist_last_errmsg());
    return 1; /* no destroy: the group is out of step, and exiting is what a job does */
  }
  printf("rank %d: no error reported for bug '%s' at this debug level\n", c.rank, b->name);
  dist_destroy_process_group(NULL);
  return 0;
}
