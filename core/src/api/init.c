/* init.c - dist_init_process_group and the default group's life.
 *
 * Init reads the debug level, rendezvouses (rendezvous.c: env://, tcp://,
 * file:// or an explicit store), loads backend plugins, creates the default
 * group (group id 0, every rank) and starts the observers with its info.
 * Destroying the default group ends everything, so init may run again. */
#include <stdio.h>
#include <strings.h>

#include "pg/pg_int.h"
#include "job/rendezvous.h"

static dist_pg *default_pg;
static dist__rdzv rdzv;
static bool have_rdzv;

dist_pg *dist__pg_default(void) { return default_pg; }

/* The message for a handle that is not a live group. */
static int stale(const char *fn, const dist_pg *g) {
  return dist__set_last_error(DIST_E_INVAL,
                              "%s: %p is not a live process group: it was destroyed already "
                              "(a handle dies with dist_destroy_process_group) or never created",
                              fn, (const void *)g);
}

dist_pg *dist__pg_resolve(dist_pg *g) {
  if (g && g != DIST_GROUP_NON_MEMBER && !dist__pg_handle_live(g)) {
    stale("libdist", g);
    return NULL;
  }
  if (g)
    return g;
  if (!default_pg)
    dist__set_last_error(DIST_E_INVAL,
                         "the default process group is not initialised "
                         "(call dist_init_process_group first)");
  return default_pg;
}

const char *dist__job_token(void) { return have_rdzv ? rdzv.token : ""; }
const char *dist_get_job_id(void) { return have_rdzv ? rdzv.job_id : NULL; }
dist_store *dist_get_default_store(void) { return have_rdzv ? rdzv.store : NULL; }

/* Groups keep their keys under pg/<name> of the job's store. A program
 * that inits again on one store (distrun's outlives every init) would find
 * the last incarnation's keys there under the same names, such as the
 * addresses of listeners closed since, and connect to them until its
 * timeout: from the second generation on, groups' keys live under
 * gen<g>/ of it. */
static dist_store *gen_store;

dist_store *dist__pg_base_store(void) {
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

static void release_rdzv(void) {
  dist_store_destroy(gen_store);
  gen_store = NULL;
  dist__rendezvous_release(&rdzv);
  have_rdzv = false;
}
bool dist_is_initialized(void) { return default_pg != NULL; }

dist_init_opts dist_init_opts_default(void) {
  dist_init_opts o = {0};
  o.rank = -1;
  o.world_size = -1;
  return o;
}

static int make_default_group(const dist_init_opts *o, const char *backend) {
  int n = rdzv.world_size;
  int *ranks = dist__malloc(sizeof(int) * (size_t)n);
  if (!ranks)
    return dist__set_last_error(DIST_E_NOMEM, "out of memory");
  for (int i = 0; i < n; i++)
    ranks[i] = i;
  dist__pg_reset_ids();
  dist__pg_spec s = {
      .group_id = dist__pg_take_ids(1),
      .backend = backend, .global_ranks = ranks, .size = n, .rank = rdzv.rank,
      .name = "0", .desc = o->group_desc ? o->group_desc : "default",
      .timeout_ms = o->timeout_ms > 0 ? o->timeout_ms : dist__default_timeout_ms(),
      .base_store = dist__pg_base_store(),
      .device_id = o->device_id, .nccl_options = o->nccl_options,
  };
  int rc = dist__pg_new(&s, &default_pg);
  dist__free(ranks);
  return rc;
}

int dist_init_process_group(const dist_init_opts *opts) {
  dist__log_reread_debug_level();
  dist__clear_last_error();
  dist__nan_check_init();
  if (default_pg)
    return dist__set_last_error(DIST_E_INVAL, "the default process group is already "
                                              "initialised; destroy it first");
  dist_init_opts o = opts ? *opts : dist_init_opts_default();
  DIST_TRY(dist__backend_load_plugins());
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
  int rc = dist__rendezvous(&o, &rdzv);
  have_rdzv = rc == DIST_OK;
  if (rc == DIST_OK) {
    dist_log_set_rank(rdzv.rank);
    rc = open_gen_store();
    if (rc == DIST_OK)
      rc = make_default_group(&o, backend);
  }
  if (rc != DIST_OK) {
    char msg[DIST_ERRMSG_LEN];
    snprintf(msg, sizeof msg, "%s", dist_last_errmsg());
    if (have_rdzv)
      release_rdzv();
#ifdef DIST_HAVE_MPI
    dist__mpi_boot_release();
#endif
    return dist__set_last_error(rc, "%s", msg);
  }
  dist__obs_start(default_pg);
  dist__cause_watch_exit();
  DIST_LOG(INFO, PG, "initialised: rank %d of %d, backend %s, job %s", rdzv.rank,
           rdzv.world_size, backend, rdzv.job_id);
  return DIST_OK;
}

static void destroy_all(void) {
  dist_pg *def = default_pg;
  dist__pg_destroy_all(); /* user groups, the default one included */
  (void)def;
  default_pg = NULL;
  dist__obs_stop();
  if (have_rdzv)
    release_rdzv();
#ifdef DIST_HAVE_MPI
  dist__mpi_boot_release();
#endif
}

int dist_destroy_process_group(dist_pg *g) {
  if (!g) {
    if (!default_pg)
      return dist__set_last_error(DIST_E_INVAL, "no process group is initialised");
    destroy_all();
    return DIST_OK;
  }
  if (g == DIST_GROUP_NON_MEMBER)
    return DIST_OK;
  if (!dist__pg_handle_live(g))
    return stale("dist_destroy_process_group", g);
  if (g == default_pg) {
    destroy_all();
    return DIST_OK;
  }
  dist__pg_free(g);
  return DIST_OK;
}

int dist_get_rank(dist_pg *g) {
  g = g && g != DIST_GROUP_NON_MEMBER && !dist__pg_handle_live(g) ? NULL : g ? g : default_pg;
  return g && g != DIST_GROUP_NON_MEMBER ? g->info.rank : -1;
}

int dist_get_world_size(dist_pg *g) {
  g = g && g != DIST_GROUP_NON_MEMBER && !dist__pg_handle_live(g) ? NULL : g ? g : default_pg;
  return g && g != DIST_GROUP_NON_MEMBER ? g->info.size : -1;
}

const char *dist_get_backend(dist_pg *g) {
  g = g && g != DIST_GROUP_NON_MEMBER && !dist__pg_handle_live(g) ? NULL : g ? g : default_pg;
  return g && g != DIST_GROUP_NON_MEMBER ? g->backend : NULL;
}
