/* prog_outside.c - the rank program of test_distrun_outside.c (built as
 * build/bin/outside_testprog, linked with the bundled libdist, as a user's
 * program). 4 ranks under distrun; rank R is stuck outside any operation
 * of a group while the others wait for it in a collective:
 *   store R   all_reduces of the default group; before its 3rd, rank R
 *             waits in dist_store_get for key "ckpt/ready", which no rank
 *             sets (store_get: the default store's timeout raised to 10
 *             minutes first, so it is still there when distrun ends it)
 *   read R    dist_new_group "dp" {1, R}, then rank R blocks in read() on
 *             a pipe nobody writes (block_in_read) before its first
 *             collective; the others all_reduce on dp (its members), then
 *             on the default group
 *   spin R    all_reduces of the default group; before its 3rd, rank R
 *             computes for ever (spin_forever)
 *   setter R  as spin, and rank 1 waits in dist_store_get for key
 *             "data/ready", which rank R would have set after its
 *             computation: rank 1 is blocked in the store because of R
 *   thread R  as spin, but rank R computes for ever in a thread of its
 *             own (helper_spin) while its main thread waits in
 *             pthread_join for it
 * A rank whose call fails prints "rank R: <what> failed: <status>" on
 * stderr and exits 1. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <dist/dist.h>

static int rank;
static volatile double sink;

static void check(const char *what, int rc) {
  if (rc == DIST_OK)
    return;
  fprintf(stderr, "rank %d: %s failed: %s\n", rank, what, dist_status_name(rc));
  exit(1);
}

__attribute__((noinline)) static void all_reduce(dist_pg *g) {
  float x[4] = {1, 2, 3, 4};
  dist_tensor t = dist_tensor_1d(x, DIST_FLOAT32, 4);
  check("all_reduce", dist_all_reduce(&t, DIST_SUM, g, NULL)); /* the all_reduce */
}

__attribute__((noinline)) static void store_get(const char *key) {
  dist_store *s = dist_get_default_store();
  check("set_timeout", dist_store_set_timeout(s, 600000));
  void *v = NULL;
  size_t len = 0;
  check("store get", dist_store_get(s, key, &v, &len)); /* the store get */
  free(v);
}

__attribute__((noinline)) static void block_in_read(void) {
  int fds[2];
  char c;
  if (pipe(fds) == 0 && read(fds[0], &c, 1) > 0) /* the read */
    sink = c;
}

/* One line, so wherever the loop is stopped its line is the same. */
__attribute__((noinline)) static void spin_forever(void) {
  for (double x = 1;; x = x * 1.0000001 + 1e-9) sink = x; /* the spin */
}

__attribute__((noinline)) static void *helper_spin(void *arg) {
  for (double x = 1;; x = x * 1.0000001 + 1e-9) sink = x; /* the helper's spin */
  return arg;
}

static void spin_in_thread(void) {
  pthread_t t;
  if (pthread_create(&t, NULL, helper_spin, NULL) == 0)
    pthread_join(t, NULL); /* the join */
}

static void steps(const char *mode, int culprit) {
  for (int step = 0; step < 4; step++) {
    if (rank == culprit && step == 2 && strcmp(mode, "store") == 0)
      store_get("ckpt/ready");
    else if (rank == culprit && step == 2 && strcmp(mode, "thread") == 0)
      spin_in_thread();
    else if (rank == culprit && step == 2)
      spin_forever(); /* a setter would set "data/ready" after it */
    else if (rank == 1 && step == 2 && strcmp(mode, "setter") == 0)
      store_get("data/ready");
    all_reduce(NULL);
  }
}

static void after_new_group(int culprit) {
  int m[2] = {1, culprit};
  dist_group_opts o = {.desc = "dp"};
  dist_pg *dp = NULL;
  check("new_group", dist_new_group(m, 2, &o, &dp));
  if (rank == culprit)
    block_in_read();
  if (dp != DIST_GROUP_NON_MEMBER)
    all_reduce(dp);
  all_reduce(NULL);
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: %s store|read|spin|setter|thread R\n", argv[0]);
    return 2;
  }
  check("init", dist_init_process_group(NULL));
  rank = dist_get_rank(NULL);
  int culprit = atoi(argv[2]);
  if (strcmp(argv[1], "read") == 0)
    after_new_group(culprit);
  else
    steps(argv[1], culprit);
  dist_destroy_process_group(NULL);
  return 0;
}
