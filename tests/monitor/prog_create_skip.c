/* prog_create_skip.c - the rank program of test_create_skip_mp.c (built as
 * build/bin/create_skip_testprog, linked with the bundled libdist, as a
 * user's program). 4 ranks under distrun; rank 2 skips one group creation
 * every other rank makes, then:
 *   split       ... dist_split_group of the default group into {0,1} {2,3}
 *               (split_world), then an all_reduce of the default group
 *   new         ... dist_new_group {1,2,3} (new_world), then an all_reduce
 *               of the default group
 *   local       ... dist_new_group {1,2,3} with use_local_synchronization
 *               (new_local), then an all_reduce of the default group
 *   subsplit    sub = new_group {1,2,3}; rank 2 skips dist_split_group of
 *               sub into {1,2} {3} (split_sub), then an all_reduce of sub,
 *               then one of the default group
 *   exit        ... the split of "split", then it destroys its groups and
 *               returns 0 while the others go on to an all_reduce
 *   splitfirst  ... the split of "split" with a 3 s timeout for the new
 *               groups (split_first): rank 3, the member left waiting,
 *               times out there before the others' all_reduce does
 *   extra       nobody skips: rank 3 alone makes dist_new_group {2,3}
 *               (new_pair), then every rank an all_reduce of the default
 *               group (the creator's call is the odd one)
 *   order       nobody skips: ranks make dist_new_group {0,1,2} (new_three)
 *               then {1,3} (new_odd); rank 2 makes them the other way round,
 *               then every rank an all_reduce of the default group
 *   meshorder   nobody skips: rank 2 makes dist_new_group of every rank
 *               (new_world) before its 2 x 2 device mesh (mesh_2x2), the
 *               others after it: the mesh's groups are created at the
 *               program's mesh call, so the report names that line
 *   stride      nobody skips: every rank makes dist_new_group {0,1} then
 *               {2,3} (new_pairs), but rank 2 passes {1,3} for the second
 *               (an off-by-one that leaves itself out: it is no member and
 *               goes on to the all_reduce while rank 3 waits for it)
 *   skipother   ranks make dist_new_group {0,1} (new_first), {2,3} and
 *               every rank (new_pairs_then_all); rank 2 skips {0,1}, a
 *               group it is not in, so its next creations pair with the
 *               others' earlier ones
 *   localshift  nobody skips: with use_local_synchronization every rank
 *               makes its pair {0,1} or {2,3}, then {0,2} or {1,3}
 *               (new_local_pairs), but rank 2 passes {1,2} for its pair (an
 *               off-by-one): it waits for rank 1, which waits in {1,3} for
 *               rank 3, which waits in {2,3} for rank 2
 * A rank whose call fails prints "rank R: <what> failed: <status>" on
 * stderr and exits 1. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <dist/dist.h>

static int rank;

static void check(const char *what, int rc) {
  if (rc == DIST_OK)
    return;
  fprintf(stderr, "rank %d: %s failed: %s\n", rank, what, dist_status_name(rc));
  exit(1);
}

__attribute__((noinline)) static void all_reduce(dist_pg *g) {
  float x[4] = {1, 2, 3, 4};
  dist_tensor t = dist_tensor_1d(x, DIST_FLOAT32, 4);
  check("all_reduce", dist_all_reduce(&t, DIST_SUM, g, NULL));
}

__attribute__((noinline)) static void split_world(void) {
  const int a[2] = {0, 1}, b[2] = {2, 3};
  const int *sr[2] = {a, b};
  const size_t sz[2] = {2, 2};
  dist_pg *g = NULL;
  check("split_group", dist_split_group(NULL, sr, sz, 2, NULL, &g));
}

__attribute__((noinline)) static void split_first(void) {
  const int a[2] = {0, 1}, b[2] = {2, 3};
  const int *sr[2] = {a, b};
  const size_t sz[2] = {2, 2};
  dist_pg *g = NULL;
  check("split_group", dist_split_group(NULL, sr, sz, 2, &(dist_group_opts){.timeout_ms = 3000},
                                        &g));
}

__attribute__((noinline)) static void new_world(void) {
  const int r[3] = {1, 2, 3};
  dist_pg *g = NULL;
  check("new_group", dist_new_group(r, 3, NULL, &g));
}

__attribute__((noinline)) static void new_pair(void) {
  const int r[2] = {2, 3};
  dist_pg *g = NULL;
  check("new_group", dist_new_group(r, 2, NULL, &g));
}

__attribute__((noinline)) static void new_three(void) {
  const int r[3] = {0, 1, 2};
  dist_pg *g = NULL;
  check("new_group", dist_new_group(r, 3, NULL, &g));
}

__attribute__((noinline)) static void new_odd(void) {
  const int r[2] = {1, 3};
  dist_pg *g = NULL;
  check("new_group", dist_new_group(r, 2, NULL, &g));
}

__attribute__((noinline)) static void new_pairs(void) {
  for (int k = 0; k < 2; k++) {
    int r[2] = {2 * k, 2 * k + 1};
    if (rank == 2 && k == 1)
      r[0] = 1; /* the planted off-by-one: {1,3} */
    dist_pg *g = NULL;
    check("new_group", dist_new_group(r, 2, NULL, &g));
  }
}

__attribute__((noinline)) static void new_first(void) {
  const int r[2] = {0, 1};
  dist_pg *g = NULL;
  check("new_group", dist_new_group(r, 2, NULL, &g));
}

__attribute__((noinline)) static void new_pairs_then_all(void) {
  const int r[2] = {2, 3};
  dist_pg *g = NULL, *all = NULL;
  check("new_group", dist_new_group(r, 2, NULL, &g));
  check("new_group", dist_new_group(NULL, 0, NULL, &all));
}

__attribute__((noinline)) static void new_local_pairs(void) {
  dist_group_opts o = {.use_local_synchronization = true};
  int pair[2] = {rank / 2 * 2, rank / 2 * 2 + 1}, across[2] = {rank % 2, rank % 2 + 2};
  if (rank == 2)
    pair[1] = 1; /* the planted off-by-one: {2,1}, that is {1,2} */
  dist_pg *g = NULL;
  check("new_group", dist_new_group(pair, 2, &o, &g));
  check("new_group", dist_new_group(across, 2, &o, &g));
}

__attribute__((noinline)) static void new_local(void) {
  const int r[3] = {1, 2, 3};
  dist_pg *g = NULL;
  if (rank != 0)
    check("new_group", dist_new_group(r, 3, &(dist_group_opts){.use_local_synchronization = true},
                                      &g));
}

__attribute__((noinline)) static void split_sub(dist_pg *sub) {
  const int a[2] = {0, 1}, b[1] = {2}; /* group ranks of sub {1,2,3} */
  const int *sr[2] = {a, b};
  const size_t sz[2] = {2, 1};
  dist_pg *g = NULL;
  check("split_group", dist_split_group(sub, sr, sz, 2, NULL, &g));
}

__attribute__((noinline)) static void mesh_2x2(void) {
  const int64_t shape[2] = {2, 2};
  const char *names[2] = {"dp", "tp"};
  dist_device_mesh *m = NULL;
  check("init_device_mesh", dist_init_device_mesh("cpu", shape, 2, names, &m));
}

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "split";
  check("init", dist_init_process_group(NULL));
  rank = dist_get_rank(NULL);
  bool skip = rank == 2;
  if (!strcmp(mode, "split") || !strcmp(mode, "exit")) {
    if (!skip)
      split_world();
    if (skip && !strcmp(mode, "exit")) {
      dist_destroy_process_group(NULL);
      return 0;
    }
  } else if (!strcmp(mode, "splitfirst")) {
    if (!skip)
      split_first();
  } else if (!strcmp(mode, "new")) {
    if (!skip)
      new_world();
  } else if (!strcmp(mode, "extra")) {
    if (rank == 3)
      new_pair();
  } else if (!strcmp(mode, "order")) {
    if (skip)
      new_odd();
    new_three();
    if (!skip)
      new_odd();
  } else if (!strcmp(mode, "meshorder")) {
    if (skip)
      new_world();
    mesh_2x2();
    if (!skip)
      new_world();
  } else if (!strcmp(mode, "stride")) {
    new_pairs();
  } else if (!strcmp(mode, "skipother")) {
    if (!skip)
      new_first();
    new_pairs_then_all();
  } else if (!strcmp(mode, "localshift")) {
    new_local_pairs();
  } else if (!strcmp(mode, "local")) {
    if (!skip)
      new_local();
  } else if (!strcmp(mode, "subsplit")) {
    const int r[3] = {1, 2, 3};
    dist_pg *sub = NULL;
    check("new_group", dist_new_group(r, 3, NULL, &sub));
    if (rank != 0 && !skip)
      split_sub(sub);
    if (rank != 0)
      all_reduce(sub);
  } else {
    fprintf(stderr, "unknown mode %s\n", mode);
    return 2;
  }
  all_reduce(NULL);
  dist_destroy_process_group(NULL);
  return 0;
}
