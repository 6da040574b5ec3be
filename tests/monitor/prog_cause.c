/* prog_cause.c - the rank program test_distrun_cause.c runs under distrun
 * (built as build/bin/distrun_causeprog). The first argument picks what a
 * rank does after dist_init_process_group (env://):
 *   desync R N     every rank all_reduces 8 float32 elements, rank R
 *                  N; a rank whose call fails prints "rank K: STATUS: msg"
 *                  on stderr and exits 1
 *   post R STATUS  rank R posts a cause with STATUS (a DIST_E_* number)
 *                  and exits 1; the others wait for SIGTERM and exit 0
 *   leftterm R Q   rank Q posts the checking layer's "rank Q left the
 *                  group" desync (field "collective count"), then tells
 *                  rank R, which raises SIGTERM (its own, not distrun's)
 *                  and dies of it; the others wait for distrun's SIGTERM
 *   leftfail F L   rank F exits with code 3 (a program's own check failed);
 *                  once its process has ended (a zombie, /proc), rank L
 *                  posts the checking layer's "rank L left the group"
 *                  desync, its line saying its process exited with the
 *                  group live, and exits with code 3 too: ranks whose own
 *                  checks fail one after another; the others wait for
 *                  distrun's SIGTERM
 *   pairs O F      as a broadcast whose root rank O alone got wrong, seen
 *                  by the TCP engine's pairs: every rank r but O posts
 *                  the desync of pair {r, O}, marking the later of the two
 *                  (what a pair without a history marks), and O the pair
 *                  {O, F}; rank F first, the others after a barrier; then
 *                  every rank exits 1
 *   pairslate O F  as pairs, but only rank F's report is of BROADCAST #3 (the
 *                  one posted first, marking F); the others are of a later
 *                  BROADCAST #5 that failed behind it (each rank keeps its
 *                  latest report), each marking O
 *   asyncexit R    4 ranks, pairs {0, 2} and {1, 3}: each step an async
 *                  all_reduce on the rank's pair, a barrier on the default
 *                  group, then the wait; rank R returns 0 at the start of
 *                  step 2 (the all_reduce and the barrier of step 1 end
 *                  in either order)
 *   asynckill R    as asyncexit, but rank R raises SIGKILL right after its
 *                  async all_reduce of step 1 (the job under a second old:
 *                  the others' records still show where they were before)
 *   nowait R       4 ranks, pairs {0, 1} and {2, 3}: each rank all_reduces
 *                  asynchronously on its pair and waits; rank R never
 *                  waits, destroys its groups (dist_destroy_process_group
 *                  of the default group) and returns 0, and its partner
 *                  calls the all_reduce only once R's process has ended
 *                  (a zombie, /proc): the destroy fails it there
 *   nowaitexit R   as nowait, but rank R returns 0 without a destroy (its
 *                  process exits with the groups live)
 *   crashinit R    rank R dereferences NULL before dist_init_process_group
 *                  (the launcher's RANK says it is R); the others wait in
 *                  init for it
 *   aglist R       every rank all_gathers 64 float32 elements into a list
 *                  of one 64-element output tensor per rank, but rank R's
 *                  entry (R + 1) % world has 32 (its own is right): a rank
 *                  whose call fails prints as in desync and exits 1
 *   rslist R       the same with reduce_scatter's input tensors
 *   leftgroup R    every rank all_reduces twice on a group "grads" of all
 *                  ranks; rank R then destroys it and calls the barrier,
 *                  the others a third all_reduce on it: exits as desync
 *   ok             init, one all_reduce, exit 0
 * Every mode ends by itself within 60 s (alarm). */
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <dist/backend.h>
#include <dist/dist.h>

static int fail(const char *what, int rc) {
  fprintf(stderr, "rank %d: %s: %s: %s\n", dist_get_rank(NULL), what, dist_status_name(rc),
          dist_pg_errmsg(NULL));
  return 1;
}

static int all_reduce(int n) {
  float *x = calloc((size_t)n, sizeof *x);
  dist_tensor t = dist_tensor_1d(x, DIST_FLOAT32, n);
  int rc = dist_all_reduce(&t, DIST_SUM, NULL, NULL);
  free(x);
  return rc;
}

/* aglist / rslist: rank odd's list entry (odd + 1) % world has 32
 * elements where every other entry of every rank has 64. */
static int list_call(bool rs, int odd) {
  int n = dist_get_world_size(NULL), me = dist_get_rank(NULL);
  float *x = calloc((size_t)(n + 1) * 64, sizeof *x);
  dist_tensor *l = calloc((size_t)n, sizeof *l);
  if (!x || !l)
    return DIST_E_NOMEM;
  dist_tensor one = dist_tensor_1d(x + (size_t)n * 64, DIST_FLOAT32, 64);
  for (int i = 0; i < n; i++)
    l[i] = dist_tensor_1d(x + (size_t)i * 64, DIST_FLOAT32,
                          me == odd && i == (odd + 1) % n ? 32 : 64);
  int rc; /* test_distrun_cause.c finds the calls' lines by their comments */
  if (rs)
    rc = dist_reduce_scatter(&one, l, (size_t)n, DIST_SUM, NULL, NULL); /* the reduce_scatter */
  else
    rc = dist_all_gather(l, (size_t)n, &one, NULL, NULL); /* the all_gather */
  free(x);
  free(l);
  return rc;
}

static void on_term(int sig) {
  (void)sig;
  _exit(0);
}

static int mode_post(int who, int status) {
  if (dist_get_rank(NULL) != who) {
    for (;;)
      pause();
  }
  char rep[256];
  snprintf(rep, sizeof rep, "test diagnosis: rank %d posted status %d\n  second line", who,
           status);
  int rc = dist_post_cause(status, rep);
  if (rc != DIST_OK)
    return fail("dist_post_cause", rc);
  return 1;
}

/* Posts the checking layer's "rank L left the group" desync on the
 * default group (field "collective count"), with the report rep. */
static int post_left(int leaver, const char *rep) {
  dist_cause_info info = dist_cause_info_none();
  info.culprits = &leaver;
  info.n_culprits = 1;
  info.group_id = 0;
  info.group_name = "default";
  info.field = "collective count";
  return dist_post_cause_info(DIST_E_DESYNC, &info, rep);
}

/* The order of pring's SIGTERM (probe8): a rank's partner fails when the
 * rank's connections close and leaves, a third rank posts that leaving as
 * a desync, and only then is the dead rank reaped. */
static int mode_leftterm(int dying, int leaver) {
  int me = dist_get_rank(NULL), rc = DIST_OK;
  float x = 0;
  dist_tensor t = dist_tensor_1d(&x, DIST_FLOAT32, 1);
  if (me == leaver) {
    char rep[160];
    snprintf(rep, sizeof rep, "desync in group 0 (default) at ALL_REDUCE #2: rank %d left the "
             "group (destroyed it or exited) before this collective", leaver);
    rc = post_left(leaver, rep);
    if (rc == DIST_OK)
      rc = dist_send(&t, dying, NULL, 0);
  } else if (me == dying) {
    rc = dist_recv(&t, leaver, NULL, 0, NULL);
    signal(SIGTERM, SIG_DFL);
    raise(SIGTERM);
  }
  if (rc != DIST_OK)
    return fail("leftterm", rc);
  for (;;)
    pause();
}

/* Whether process pid has ended (a zombie, or gone). */
static bool ended(pid_t pid) {
  char path[64], st[256];
  snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
  FILE *f = fopen(path, "re");
  if (!f)
    return true;
  bool z = fgets(st, sizeof st, f) && strstr(st, ") Z ");
  fclose(f);
  return z;
}

static int mode_leftfail(int first, int leaver) {
  int me = dist_get_rank(NULL);
  dist_store *s = dist_get_default_store();
  const char *key = "test/first_pid";
  if (me == first) {
    char pid[16];
    int n = snprintf(pid, sizeof pid, "%d", (int)getpid());
    int rc = dist_store_set(s, key, pid, (size_t)n);
    if (rc != DIST_OK)
      return fail("set", rc);
    exit(3);
  }
  if (me != leaver)
    for (;;)
      pause();
  void *v = NULL;
  size_t n = 0;
  int rc = dist_store_wait(s, &key, 1, 30000);
  if (rc == DIST_OK)
    rc = dist_store_get(s, key, &v, &n);
  if (rc != DIST_OK)
    return fail("wait", rc);
  char buf[16] = {0};
  memcpy(buf, v, n < sizeof buf - 1 ? n : sizeof buf - 1);
  dist_free(v);
  while (!ended((pid_t)atoi(buf)))
    sched_yield(); /* its exit, not a time: bounded by the alarm */
  char rep[400];
  snprintf(rep, sizeof rep, "desync in group 0 (default) at ALL_REDUCE #2: rank %d left the "
           "group (destroyed it or exited) before this collective; the collective counts "
           "differ\n  rank %d (host h, pid %d): left after 1 collective; its process exited "
           "with the group live  <- collective count differs", leaver, leaver, (int)getpid());
  rc = post_left(leaver, rep);
  if (rc != DIST_OK)
    return fail("post", rc);
  exit(3);
}

/* The report of pair {a, b} over broadcast #seq, as status.h words it. */
static void pair_report(int a, int b, int odd, int seq, char *rep, size_t len) {
  int lo = a < b ? a : b, hi = a < b ? b : a;
  snprintf(rep, len, "desync in group 0 (default, %d ranks) at BROADCAST #%d: ranks disagree "
           "on the root\n  rank %d: BROADCAST float32[4] root %d (16 bytes)\n  rank %d: "
           "BROADCAST float32[4] root %d (16 bytes)  <- root differs\n  reported by rank %d",
           dist_get_world_size(NULL), seq, lo, lo == odd ? odd : 1, hi, hi == odd ? odd : 1,
           dist_get_rank(NULL));
}

static int mode_pairs(int odd, int first, bool late) {
  int me = dist_get_rank(NULL), peer = me == odd ? first : odd;
  int marked = me > peer ? me : peer, seq = late && me != first ? 5 : 3;
  if (late) /* rank F marks itself; the later reports mark O */
    marked = me == first ? first : odd;
  char rep[512];
  pair_report(me, peer, odd, seq, rep, sizeof rep);
  dist_cause_info info = dist_cause_info_none();
  info.culprits = &marked;
  info.n_culprits = 1;
  info.group_id = 0;
  info.group_name = "default";
  info.op = DIST_OP_BROADCAST;
  info.seq = (uint64_t)seq;
  info.field = "root";
  int rc = me == first ? dist_post_cause_info(DIST_E_DESYNC, &info, rep) : DIST_OK;
  if (rc == DIST_OK)
    rc = dist_barrier(NULL, NULL);
  if (rc == DIST_OK && me != first)
    rc = dist_post_cause_info(DIST_E_DESYNC, &info, rep);
  if (rc == DIST_OK)
    rc = dist_barrier(NULL, NULL); /* every pair is kept before any rank fails */
  return rc == DIST_OK ? 1 : fail("pairs", rc);
}

static int mode_asyncexit(int leaver, bool kill) {
  int me = dist_get_rank(NULL);
  dist_pg *pair = NULL, *g = NULL;
  for (int first = 0; first < 2; first++) { /* every rank makes both */
    int members[2] = {first, first + 2};
    int rc = dist_new_group(members, 2, NULL, &g);
    if (rc != DIST_OK)
      return fail("new_group", rc);
    if (g != DIST_GROUP_NON_MEMBER)
      pair = g;
  }
  float x[4] = {0};
  dist_tensor t = dist_tensor_1d(x, DIST_FLOAT32, 4);
  for (int step = 0; step < 4; step++) {
    if (!kill && me == leaver && step == 2)
      return 0; /* ends early, without a word */
    dist_work *w = NULL;
    int rc = dist_all_reduce(&t, DIST_SUM, pair, &w);
    if (kill && me == leaver && step == 1)
      raise(SIGKILL); /* as the OOM killer would */
    if (rc == DIST_OK)
      rc = dist_barrier(NULL, NULL);
    if (rc == DIST_OK)
      rc = dist_work_wait(w, -1);
    dist_work_free(w);
    if (rc != DIST_OK)
      return fail("asyncexit", rc);
  }
  dist_destroy_process_group(NULL);
  return 0;
}

/* The planted bug of nowait and nowaitexit: rank `culprit` issues its
 * pair's all_reduce and never waits for it. */
static int mode_nowait(int culprit, bool destroy) {
  int me = dist_get_rank(NULL), partner = culprit ^ 1;
  dist_store *s = dist_get_default_store();
  const char *key = "test/culprit_pid";
  dist_pg *pair = NULL, *g = NULL;
  for (int first = 0; first < 4; first += 2) { /* every rank makes both */
    int members[2] = {first, first + 1};
    int rc = dist_new_group(members, 2, NULL, &g);
    if (rc != DIST_OK)
      return fail("new_group", rc);
    if (g != DIST_GROUP_NON_MEMBER)
      pair = g;
  }
  if (me == partner) { /* it comes once the culprit's process has ended */
    void *v = NULL;
    size_t n = 0;
    int rc = dist_store_wait(s, &key, 1, 30000);
    if (rc == DIST_OK)
      rc = dist_store_get(s, key, &v, &n);
    if (rc != DIST_OK)
      return fail("wait", rc);
    char buf[16] = {0};
    memcpy(buf, v, n < sizeof buf - 1 ? n : sizeof buf - 1);
    dist_free(v);
    while (!ended((pid_t)atoi(buf)))
      sched_yield(); /* its exit, not a time: bounded by the alarm */
  }
  float x[8] = {0};
  dist_tensor t = dist_tensor_1d(x, DIST_FLOAT32, 8);
  dist_work *w = NULL;
  int rc = dist_all_reduce(&t, DIST_SUM, pair, &w);
  if (rc != DIST_OK)
    return fail("all_reduce", rc);
  if (me == culprit) {
    char pid[16];
    int n = snprintf(pid, sizeof pid, "%d", (int)getpid());
    rc = dist_store_set(s, key, pid, (size_t)n);
    if (rc != DIST_OK)
      return fail("set", rc);
    if (destroy) {
      dist_destroy_process_group(NULL);
      dist_work_free(w); /* never waited; freed, so LeakSanitizer has nothing to say */
    }
    return 0; /* never waited */
  }
  rc = dist_work_wait(w, -1);
  dist_work_free(w);
  if (rc != DIST_OK)
    return fail("wait", rc);
  dist_destroy_process_group(NULL);
  return 0;
}

/* The planted bug of leftgroup: rank `leaver` leaves group "grads" one
 * collective early and goes on to the default group's barrier. */
static int mode_leftgroup(int leaver) {
  dist_group_opts o = {.desc = "grads"};
  dist_pg *g = NULL;
  int rc = dist_new_group(NULL, 0, &o, &g);
  if (rc != DIST_OK)
    return fail("new_group", rc);
  float x[8] = {0};
  dist_tensor t = dist_tensor_1d(x, DIST_FLOAT32, 8);
  for (int i = 0; i < 2 && rc == DIST_OK; i++)
    rc = dist_all_reduce(&t, DIST_SUM, g, NULL);
  if (rc != DIST_OK)
    return fail("all_reduce", rc);
  if (dist_get_rank(NULL) == leaver) /* test_distrun_cause.c finds its line by the comment */
    rc = dist_destroy_process_group(g); /* the leaver's destroy */
  else
    rc = dist_all_reduce(&t, DIST_SUM, g, NULL);
  if (rc == DIST_OK)
    rc = dist_barrier(NULL, NULL);
  if (rc != DIST_OK)
    return fail("leftgroup", rc);
  dist_destroy_process_group(NULL);
  return 0;
}

int main(int argc, char **argv) {
  alarm(60);
  signal(SIGTERM, on_term);
  const char *m = argc > 1 ? argv[1] : "";
  int a = argc > 2 ? atoi(argv[2]) : 0, b = argc > 3 ? atoi(argv[3]) : 0;
  if (strcmp(m, "desync") && strcmp(m, "post") && strcmp(m, "leftterm") && strcmp(m, "pairs") &&
      strcmp(m, "pairslate") && strcmp(m, "leftfail") && strcmp(m, "asyncexit") &&
      strcmp(m, "asynckill") && strcmp(m, "nowait") && strcmp(m, "nowaitexit") &&
      strcmp(m, "crashinit") && strcmp(m, "aglist") && strcmp(m, "rslist") &&
      strcmp(m, "leftgroup") && strcmp(m, "ok")) {
    fprintf(stderr, "usage: %s desync R N | post R STATUS | leftterm R Q | leftfail F L | "
            "pairs O F | pairslate O F | asyncexit R | asynckill R | nowait R | nowaitexit R | "
            "crashinit R | aglist R | rslist R | leftgroup R | ok\n", argv[0]);
    return 2;
  }
  const char *env_rank = getenv("RANK");
  if (!strcmp(m, "crashinit") && env_rank && atoi(env_rank) == a) {
    volatile int *nowhere = NULL;
    *nowhere = 1; /* the planted crash, before init */
  }
  int rc = dist_init_process_group(NULL);
  if (rc != DIST_OK) {
    fprintf(stderr, "init: %s: %s\n", dist_status_name(rc), dist_last_errmsg());
    return 1;
  }
  if (!strcmp(m, "post"))
    return mode_post(a, b);
  if (!strcmp(m, "leftterm"))
    return mode_leftterm(a, b);
  if (!strcmp(m, "leftfail"))
    return mode_leftfail(a, b);
  if (!strcmp(m, "asyncexit") || !strcmp(m, "asynckill"))
    return mode_asyncexit(a, !strcmp(m, "asynckill"));
  if (!strcmp(m, "nowait") || !strcmp(m, "nowaitexit"))
    return mode_nowait(a, !strcmp(m, "nowait"));
  if (!strcmp(m, "pairs") || !strcmp(m, "pairslate"))
    return mode_pairs(a, b, !strcmp(m, "pairslate"));
  if (!strcmp(m, "leftgroup"))
    return mode_leftgroup(a);
  if (!strcmp(m, "aglist") || !strcmp(m, "rslist")) {
    rc = list_call(!strcmp(m, "rslist"), a);
    if (rc != DIST_OK)
      return fail(m, rc);
    dist_destroy_process_group(NULL);
    return 0;
  }
  rc = all_reduce(!strcmp(m, "desync") && dist_get_rank(NULL) == a ? b : 8);
  if (rc != DIST_OK)
    return fail("all_reduce", rc);
  dist_destroy_process_group(NULL);
  return 0;
}
