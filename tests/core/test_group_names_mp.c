/* ctest: labels=multiproc,san_address timeout=300 cost=15 */
/* Group names never repeat within a job: a job that creates and destroys
 * 10,000 groups (new_group, locally synchronised new_group, split_group,
 * new_subgroups) works, every group's name is new, and the count of
 * locally synchronised groups per member list holds past the 256 lists the
 * old fixed table could count, from several threads at once. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mp.h"
#include "api/api.h"


static int cmp_str(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Creates one group of kind i % 4 on both ranks; returns it in *g. */
static int make(int i, int rank, dist_pg **g) {
  static const int both[2] = {0, 1};
  switch (i % 4) {
  case 0:
    return dist_new_group(both, 2, NULL, g);
  case 1: {
    dist_group_opts o = {.use_local_synchronization = true};
    return dist_new_group(both, 2, &o, g);
  }
  case 2: {
    static const int r0[1] = {0}, r1[1] = {1};
    const int *const lists[2] = {r0, r1};
    size_t sizes[2] = {1, 1};
    return dist_split_group(NULL, lists, sizes, 2, NULL, g);
  }
  default: {
    (void)rank;
    return dist_new_subgroups(2, NULL, g, NULL, NULL);
  }
  }
}

static int churn(const dist_test_ctx *ctx) {
  const int CHURN = *(const int *)ctx->arg;
  CHECK_OK(ctx, dist_test_init_pg(ctx, NULL));
  char **names = calloc((size_t)CHURN, sizeof *names);
  CHECK(ctx, names, "out of memory");
  for (int i = 0; i < CHURN; i++) {
    dist_pg *g = NULL;
    CHECK_OK(ctx, make(i, ctx->rank, &g));
    CHECK(ctx, g && g != DIST_GROUP_NON_MEMBER, "group %d: not a member", i);
    names[i] = strdup(dist_pg_get_info(g)->name);
    if (i % 500 == 0) { /* the group works, and with the right members */
      int32_t v = 1;
      dist_tensor t = dist_tensor_1d(&v, DIST_INT32, 1);
      CHECK_OK(ctx, dist_all_reduce(&t, DIST_SUM, g, NULL));
      CHECK(ctx, v == dist_get_world_size(g), "group %d (%s) summed %d", i, names[i], v);
    }
    CHECK_OK(ctx, dist_destroy_process_group(g));
  }
  qsort(names, (size_t)CHURN, sizeof *names, cmp_str);
  for (int i = 1; i < CHURN; i++)
    CHECK(ctx, strcmp(names[i - 1], names[i]), "the name %s was used twice", names[i]);
  for (int i = 0; i < CHURN; i++)
    free(names[i]);
  free(names);
  dist_test_finish();
  return 0;
}

/* Over TCP (a shared segment per group costs ~2.5 ms; the shm variant
 * below churns fewer). */
Test(core_group_names, ten_thousand_groups_created_and_destroyed_all_work_with_new_names,
     .timeout = 240) {
  setenv("DIST_TRANSPORT", "tcp", 1);
  int n = 10000;
  cr_assert_eq(dist_test_ranks(2, churn, &n, 200), 0, "%s", dist_test_report());
}

Test(core_group_names, a_thousand_shared_memory_groups_created_and_destroyed_all_work,
     .timeout = 240) {
  setenv("DIST_TRANSPORT", "shm", 1);
  int n = 1000;
  cr_assert_eq(dist_test_ranks(2, churn, &n, 200), 0, "%s", dist_test_report());
}

/* 1,000 member lists (hashes), each counted from several threads: every
 * (list, count) pair comes out exactly once, so no two groups share a
 * name. The old table stopped counting after 256 lists and was unlocked. */
#define LISTS 1000
#define THREADS 4
static unsigned char seen[LISTS][THREADS * 2];
static pthread_mutex_t seen_mu = PTHREAD_MUTEX_INITIALIZER;
static _Atomic int bad;

static void *count_lists(void *arg) {
  (void)arg;
  for (int round = 0; round < 2; round++)
    for (uint32_t h = 0; h < LISTS; h++) {
      int k = -1;
      if (dist__pg_local_count(h * 2654435761u, &k) != DIST_OK || k < 0 || k >= THREADS * 2) {
        bad++;
        continue;
      }
      pthread_mutex_lock(&seen_mu);
      seen[h][k]++;
      pthread_mutex_unlock(&seen_mu);
    }
  return NULL;
}

Test(core_group_names, local_group_counts_hold_past_256_lists_and_across_threads, .timeout = 30) {
  dist__pg_reset_ids();
  pthread_t th[THREADS];
  for (int i = 0; i < THREADS; i++)
    cr_assert_eq(pthread_create(&th[i], NULL, count_lists, NULL), 0);
  for (int i = 0; i < THREADS; i++)
    pthread_join(th[i], NULL);
  cr_assert_eq(bad, 0);
  for (int h = 0; h < LISTS; h++)
    for (int k = 0; k < THREADS * 2; k++)
      cr_assert_eq(seen[h][k], 1, "list %d: count %d handed out %d times", h, k, seen[h][k]);
  dist__pg_reset_ids();
  int k = -1;
  cr_assert_eq(dist__pg_local_count(0, &k), DIST_OK);
  cr_assert_eq(k, 0, "the counts restart with a new default group");
}
