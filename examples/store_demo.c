/* store_demo.c - the smallest libdist job: every rank joins the job through
 * env:// and uses the job's key-value store to say hello to every other
 * rank.
 *
 *     build/bin/distrun --nproc-per-node 4 build/bin/store_demo
 *
 * Each rank writes demo/rank/<R>, reads the key of every rank (a get waits
 * until the key exists, so no rank needs to go first), prints what it read,
 * and waits at a store-side barrier so no rank leaves while another still
 * reads. Without distrun, set MASTER_ADDR, MASTER_PORT, RANK and WORLD_SIZE
 * yourself; rank 0 then hosts the store. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <dist/dist.h>

static int fail(const char *what, int rc, const char *msg) {
  fprintf(stderr, "store_demo: %s: %s: %s\n", what, dist_status_name(rc), msg);
  return 1;
}

/* Each of n ranks adds 1 to counter; the last to arrive sets flag; with
 * waits, the caller then waits for the flag. */
static int arrive(dist_store *s, const char *counter, const char *flag, int n, bool waits) {
  int64_t k = 0;
  int rc = dist_store_add(s, counter, 1, &k);
  if (rc == DIST_OK && k == n)
    rc = dist_store_set(s, flag, "1", 1);
  const char *keys[] = {flag};
  return rc != DIST_OK || !waits ? rc : dist_store_wait(s, keys, 1, DIST_STORE_DEFAULT_TIMEOUT);
}

/* Nobody leaves before everybody has read. Without distrun rank 0 hosts the
 * store, so it leaves last: the others tell it they are done with it. */
static int store_barrier(dist_store *s, int rank, int world) {
  int rc = arrive(s, "demo/arrived", "demo/all_here", world, true);
  if (rc != DIST_OK || world == 1)
    return rc;
  if (rank != 0)
    return arrive(s, "demo/left", "demo/all_left", world - 1, false);
  const char *keys[] = {"demo/all_left"};
  return dist_store_wait(s, keys, 1, DIST_STORE_DEFAULT_TIMEOUT);
}

static int say_hello(dist_store *s, int rank, int world) {
  char key[64], hello[160], host[64] = "";
  gethostname(host, sizeof host - 1);
  snprintf(key, sizeof key, "demo/rank/%d", rank);
  snprintf(hello, sizeof hello, "hello from rank %d (pid %d on %s)", rank, (int)getpid(),
           host);
  int rc = dist_store_set(s, key, hello, strlen(hello));
  if (rc != DIST_OK)
    return fail("set", rc, dist_errmsg(rc, NULL));
  for (int peer = 0; peer < world; peer++) {
    void *val = NULL;
    size_t len = 0;
    snprintf(key, sizeof key, "demo/rank/%d", peer);
    rc = dist_store_get(s, key, &val, &len);
    if (rc != DIST_OK)
      return fail("get", rc, dist_errmsg(rc, NULL));
    printf("rank %d read %s = %s\n", rank, key, (const char *)val);
    dist_free(val);
  }
  printf("rank %d of %d read all %d keys\n", rank, world, world);
  fflush(stdout);
  return 0;
}

int main(int argc, char **argv) {
  if (argc > 1 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
    printf("usage: distrun --nproc-per-node N %s\n"
           "Every rank sets demo/rank/<R> in the job's store and reads every other\n"
           "rank's key. Runs under distrun, or with MASTER_ADDR, MASTER_PORT, RANK\n"
           "and WORLD_SIZE set by hand (env:// rendezvous).\n",
           argv[0]);
    return 0;
  }
  int rc = dist_init_process_group(NULL);
  if (rc != DIST_OK)
    return fail("dist_init_process_group", rc, dist_errmsg(rc, NULL));
  int rank = dist_get_rank(NULL), world = dist_get_world_size(NULL);
  dist_store *s = dist_get_default_store();
  if (rank == 0)
    printf("job %s: %d ranks\n", dist_get_job_id(), world);
  int bad = say_hello(s, rank, world);
  if (!bad && (rc = store_barrier(s, rank, world)) != DIST_OK)
    bad = fail("barrier", rc, dist_errmsg(rc, NULL));
  dist_destroy_process_group(NULL);
  return bad;
}
