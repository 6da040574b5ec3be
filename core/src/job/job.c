/* job.c - the job this process joined: the rendezvous's outcome kept from
 * dist_init_process_group to the destruction of the default group.
 *
 * Groups keep their keys under pg/<name> of the job's store. A program
 * that inits again on one store (distrun's outlives every init) would find
 * the last incarnation's keys there under the same names, such as the
 * addresses of listeners closed since, and connect to them until its
 * timeout: from the second generation on, groups' keys live under
 * gen<g>/ of it. */
#include <stdio.h>

#include "job.h"

static dist__rdzv rdzv;
static bool have_rdzv;
static dist_store *gen_store;

const char *dist__job_token(void) { return have_rdzv ? rdzv.token : ""; }
const char *dist_get_job_id(void) { return have_rdzv ? rdzv.job_id : NULL; }
dist_store *dist_get_default_store(void) { return have_rdzv ? rdzv.store : NULL; }
int dist__job_rank(void) { return have_rdzv ? rdzv.rank : -1; }
int dist__job_world_size(void) { return have_rdzv ? rdzv.world_size : -1; }

dist_store *dist__job_base_store(void) {
  return !have_rdzv ? NULL : gen_store ? gen_store : rdzv.store;
}

static int open_gen_store(void) {
  if (rdzv.generation == 0)
    return DIST_OK;
  char prefix[32];
  snprintf(prefix, sizeof prefix, "gen%d", rdzv.generation);
  int rc = dist_store_prefix_create(prefix, rdzv.store, DIST_STORE_BORROW, &gen_store);
  if (rc != DIST_OK)
    return dist__set_last_error(rc, "init: cannot make the store of generation %d: %s",
                                rdzv.generation, dist_last_errmsg());
  return DIST_OK;
}

int dist__job_join(const dist_init_opts *opts) {
  int rc = dist__rendezvous(opts, &rdzv);
  have_rdzv = rc == DIST_OK;
  if (rc != DIST_OK)
    return rc;
  dist_log_set_rank(rdzv.rank);
  return open_gen_store();
}

void dist__job_leave(void) {
  if (!have_rdzv)
    return;
  dist_store_destroy(gen_store);
  gen_store = NULL;
  dist__rendezvous_release(&rdzv);
  have_rdzv = false;
}
