/* init.c - dist_init_process_group and the default group's life.
 *
 * Init reads the debug level, rendezvouses (rendezvous.c: env://, tcp://,
 * file:// or an explicit store), loads backend plugins, creates the default
 * group (group id 0, every rank) and starts the observers with its info.
 * Destroying the default group ends everything, so init may run again.
 * The default group itself is pg.c's (dist__pg_default), the job's
 * identity job.c's (dist__job_join). */
#include <stdio.h>
#include <strings.h>

#include "api.h"

bool dist_is_initialized(void) { return dist__pg_default() != NULL; }

dist_init_opts dist_init_opts_default(void) {
  dist_init_opts o = {0};
  o.rank = -1;
  o.world_size = -1;
  return o;
}

static int make_default_group(const dist_init_opts *o, const char *backend) {
  int n = dist__job_world_size();
  int *ranks = dist__malloc(sizeof(int) * (size_t)n);
  if (!ranks)
    return dist__set_last_error(DIST_E_NOMEM, "out of memory");
  for (int i = 0; i < n; i++)
    ranks[i] = i;
  dist__pg_reset_ids();
  dist__pg_spec s = {
      .group_id = dist__pg_take_ids(1),
      .backend = backend, .global_ranks = ranks, .size = n, .rank = dist__job_rank(),
      .name = "0", .desc = o->group_desc ? o->group_desc : "default",
      .timeout_ms = o->timeout_ms > 0 ? o->timeout_ms : dist__default_timeout_ms(),
      .base_store = dist__job_base_store(),
      .device_id = o->device_id, .nccl_options = o->nccl_options,
  };
  dist_pg *g = NULL;
  int rc = dist__backend_pg_new(&s, &g);
  dist__free(ranks);
  if (rc == DIST_OK)
    dist__pg_set_default(g);
  return rc;
}

int dist_init_process_group(const dist_init_opts *opts) {
  dist__log_reread_debug_level();
  dist__clear_last_error();
  dist__nan_check_init();
  if (dist__pg_default())
    return dist__set_last_error(DIST_E_INVAL, "the default process group is already "
                                              "initialised; destroy it first");
  dist_init_opts o = opts ? *opts : dist_init_opts_default();
  DIST_TRY(dist__backend_load_plugins());
  /* No backend named: the tensors' devices decide, as torch's default. */
  if (!o.backend || !*o.backend)
    o.backend = dist__default_backend(o.device_id.type == DIST_DEVICE_CUDA);
  /* A name, or a device map: each device's backend must exist here. */
  dist__backend_map map;
  DIST_TRY(dist__backend_map_parse(o.backend, &map));
  const char *backend = map.canon;
  if (o.device_id.type != DIST_DEVICE_CPU &&
      (o.device_id.type != DIST_DEVICE_CUDA || o.device_id.index < 0))
    return dist__set_last_error(DIST_E_INVAL, "init: device_id %d:%d is not a device (cuda:N "
                                "with N >= 0, or cpu for none)", (int)o.device_id.type,
                                o.device_id.index);
#ifdef DIST_HAVE_MPI
  /* Under mpirun, with nothing else to rendezvous through, MPI says who is
   * who and rank 0 hosts the store (mpi_boot.c). */
  bool mpi_boot = !strcmp(backend, "mpi") && !o.store && !o.init_method &&
                  !dist__getenv("MASTER_ADDR");
  if (mpi_boot)
    DIST_TRY(dist__mpi_bootstrap(&o));
#endif
  int rc = dist__job_join(&o);
  if (rc == DIST_OK)
    rc = make_default_group(&o, backend);
  if (rc != DIST_OK) {
    char msg[DIST_ERRMSG_LEN];
    snprintf(msg, sizeof msg, "%s", dist_last_errmsg());
    dist__job_leave();
#ifdef DIST_HAVE_MPI
    dist__mpi_boot_release();
#endif
    return dist__set_last_error(rc, "%s", msg);
  }
  dist__obs_start(dist__pg_default());
  dist__cause_watch_exit();
  DIST_LOG(INFO, PG, "initialised: rank %d of %d, backend %s, job %s", dist__job_rank(),
           dist__job_world_size(), backend, dist_get_job_id());
  return DIST_OK;
}

static int destroy_all(const void *caller) {
  dist__cause_claim_first_exit(); /* before a peer can see this rank leave */
  int rc = dist__pg_destroy_all(caller); /* user groups, the default one included */
  dist__pg_set_default(NULL);
  dist__obs_stop();
  dist__job_leave();
#ifdef DIST_HAVE_MPI
  dist__mpi_boot_release();
#endif
  return rc;
}

int dist_destroy_process_group(dist_pg *g) {
  const void *caller = __builtin_return_address(0); /* GROUP_DESTROYED's caller */
  if (!g) {
    if (!dist__pg_default())
      return dist__set_last_error(DIST_E_INVAL, "no process group is initialised");
    return destroy_all(caller);
  }
  if (g == DIST_GROUP_NON_MEMBER)
    return DIST_OK;
  if (!dist__pg_handle_live(g))
    return dist__pg_stale("dist_destroy_process_group", g);
  if (g == dist__pg_default())
    return destroy_all(caller);
  return dist__pg_destroy_one(g, caller);
}

int dist_get_rank(dist_pg *g) {
  g = g && g != DIST_GROUP_NON_MEMBER && !dist__pg_handle_live(g) ? NULL : g ? g : dist__pg_default();
  return g && g != DIST_GROUP_NON_MEMBER ? g->info.rank : -1;
}

int dist_get_world_size(dist_pg *g) {
  g = g && g != DIST_GROUP_NON_MEMBER && !dist__pg_handle_live(g) ? NULL : g ? g : dist__pg_default();
  return g && g != DIST_GROUP_NON_MEMBER ? g->info.size : -1;
}

const char *dist_get_backend(dist_pg *g) {
  g = g && g != DIST_GROUP_NON_MEMBER && !dist__pg_handle_live(g) ? NULL : g ? g : dist__pg_default();
  return g && g != DIST_GROUP_NON_MEMBER ? g->backend : NULL;
}
