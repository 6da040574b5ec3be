/* prog_swap.c - the rank program of test_steps_mp.c's swapped-groups case
 * (built as build/bin/swap_testprog): 4 ranks, groups A = {0, 1, 2} and
 * B = {1, 2, 3}. Each step all_reduces on its first group, then on its
 * second, from one line each (first = A, second = B). With "swap", rank 2
 * takes them the other way round in step 2: it waits in B from the line
 * the program calls A from, rank 1 waits in A for it, and rank 3 waits
 * in B from B's own line. With "none" the job succeeds. Every mode ends
 * by itself within 60 s (alarm). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <dist/dist.h>

static int me;

static void ok(const char *what, int rc) {
  if (rc != DIST_OK) {
    fprintf(stderr, "rank %d: %s: %s\n", me, what, dist_errmsg(rc, NULL));
    exit(1);
  }
}

int main(int argc, char **argv) {
  alarm(60);
  const char *bug = argc > 1 ? argv[1] : "none";
  if (strcmp(bug, "swap") && strcmp(bug, "none")) {
    fprintf(stderr, "usage: %s swap | none\n", argv[0]);
    return 2;
  }
  ok("init", dist_init_process_group(NULL));
  me = dist_get_rank(NULL);
  const int ra[3] = {0, 1, 2}, rb[3] = {1, 2, 3};
  dist_group_opts oa = {.desc = "A"}, ob = {.desc = "B"};
  dist_pg *a = NULL, *b = NULL;
  ok("new A", dist_new_group(ra, 3, &oa, &a));
  ok("new B", dist_new_group(rb, 3, &ob, &b));
  float x[64] = {0};
  dist_tensor t = dist_tensor_1d(x, DIST_FLOAT32, 64);
  for (int step = 0; step < 4; step++) {
    dist_pg *first = a, *second = b;
    if (!strcmp(bug, "swap") && me == 2 && step == 2)
      first = b, second = a;
    if (first != DIST_GROUP_NON_MEMBER)
      ok("first all_reduce", dist_all_reduce(&t, DIST_SUM, first, NULL));
    if (second != DIST_GROUP_NON_MEMBER)
      ok("second all_reduce", dist_all_reduce(&t, DIST_SUM, second, NULL));
  }
  ok("barrier", dist_barrier(NULL, NULL));
  dist_destroy_process_group(NULL);
  return 0;
}
