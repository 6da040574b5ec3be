/* backend_registry.c - backends by name: the built-in cpu backend ("gloo"
 * is its alias), mpi and nccl when built (DIST_HAVE_MPI, DIST_HAVE_NCCL), those registered with dist_register_backend, and plugins
 * named in DIST_BACKEND_PLUGINS (a comma or colon separated list of shared
 * objects, each exporting `int dist_backend_plugin_init(void)`). */
#include <dlfcn.h>
#include <pthread.h>
#include <ctype.h>
#include <stdio.h>
#include <strings.h>

#include "backends.h"
#include "cpu/backend_cpu.h"
#ifdef DIST_HAVE_MPI
#include "mpi/backend_mpi.h"
#endif
#ifdef DIST_HAVE_NCCL
#include "nccl/backend_nccl.h"
#endif

#define MAX_BACKENDS 16

static struct {
  char name[32];
  const dist_backend_ops *ops;
} table[MAX_BACKENDS];
static int n_table;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static char names[MAX_BACKENDS * 34];

static const dist_backend_ops *find_locked(const char *name) {
  for (int i = 0; i < n_table; i++)
    if (!strcasecmp(table[i].name, name)) /* "GLOO" is "gloo", as torch's Backend */
      return table[i].ops;
  return NULL;
}

static int add_locked(const char *name, const dist_backend_ops *ops) {
  for (int i = 0; i < n_table; i++)
    if (!strcasecmp(table[i].name, name)) {
      table[i].ops = ops; /* re-registering replaces, as torch does */
      return DIST_OK;
    }
  if (n_table == MAX_BACKENDS)
    return dist__set_last_error(DIST_E_INVAL, "too many backends (%d)", MAX_BACKENDS);
  snprintf(table[n_table].name, sizeof table[n_table].name, "%s", name);
  for (char *c = table[n_table].name; *c; c++) /* torch registers names lower case */
    *c = (char)tolower((unsigned char)*c);
  table[n_table++].ops = ops;
  return DIST_OK;
}

void dist__backend_register_builtin(void) {
  pthread_mutex_lock(&lock);
  if (!find_locked("cpu")) {
    add_locked("cpu", &dist__cpu_backend_ops);
    add_locked("gloo", &dist__cpu_backend_ops);
#ifdef DIST_HAVE_MPI
    add_locked("mpi", &dist__mpi_backend_ops);
#endif
#ifdef DIST_HAVE_NCCL
    add_locked("nccl", &dist__nccl_backend_ops);
#endif
  }
  pthread_mutex_unlock(&lock);
}

int dist_register_backend(const char *name, const dist_backend_ops *ops) {
  if (!name || !*name || strlen(name) >= 32 || !ops || !ops->init)
    return dist__set_last_error(DIST_E_INVAL,
                                "dist_register_backend needs a name (< 32 chars) and ops with init");
  if (ops->abi_version == 0 || ops->abi_version > DIST_BACKEND_ABI_VERSION)
    return dist__set_last_error(DIST_E_INVAL,
                                "backend %s was built for vtable ABI %u; this library has %u",
                                name, ops->abi_version, DIST_BACKEND_ABI_VERSION);
  dist__backend_register_builtin();
  pthread_mutex_lock(&lock);
  int rc = add_locked(name, ops);
  pthread_mutex_unlock(&lock);
  return rc;
}

const dist_backend_ops *dist__backend_find(const char *name) {
  dist__backend_register_builtin();
  pthread_mutex_lock(&lock);
  const dist_backend_ops *ops = find_locked(name);
  pthread_mutex_unlock(&lock);
  return ops;
}

const char *dist__backend_names(void) {
  pthread_mutex_lock(&lock);
  size_t off = 0;
  names[0] = '\0';
  for (int i = 0; i < n_table; i++)
    dist__appendf(names, sizeof names, &off, "%s%s", i ? ", " : "", table[i].name);
  pthread_mutex_unlock(&lock);
  return names;
}

static int load_one(const char *path) {
  void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!h)
    return dist__set_last_error(DIST_E_INVAL, "DIST_BACKEND_PLUGINS: cannot load %s: %s",
                                path, dlerror());
  int (*init)(void) = (int (*)(void))dlsym(h, "dist_backend_plugin_init");
  if (!init) {
    dlclose(h);
    return dist__set_last_error(DIST_E_INVAL,
                                "DIST_BACKEND_PLUGINS: %s has no dist_backend_plugin_init", path);
  }
  int rc = init();
  if (rc != DIST_OK)
    return dist__set_last_error(rc, "DIST_BACKEND_PLUGINS: %s failed to register: %s", path,
                                dist_last_errmsg());
  DIST_LOG(INFO, CORE, "loaded backend plugin %s", path);
  return DIST_OK; /* the handle stays open for the process's life */
}

int dist__backend_load_plugins(void) {
  const char *v = dist__getenv("DIST_BACKEND_PLUGINS");
  if (!v)
    return DIST_OK;
  char buf[2048];
  snprintf(buf, sizeof buf, "%s", v);
  for (char *save = NULL, *p = strtok_r(buf, ",:", &save); p; p = strtok_r(NULL, ",:", &save))
    DIST_TRY(load_one(p));
  return DIST_OK;
}

bool dist_is_cpu_available(void) { return true; }

/* Truthful: built, the libraries load and a device is visible (torch's
 * is_nccl_available only says "built"; a program asks to pick a backend). */
bool dist_is_nccl_available(void) {
#ifdef DIST_HAVE_NCCL
  char why[512];
  if (dist__nccl_usable(why, sizeof why))
    return true;
#else
  const char *why = "libdist was built without NCCL (DIST_WITH_NCCL, no CUDA toolkit with NCCL)";
#endif
  dist__set_last_error(DIST_E_NOTSUP, "NCCL is not available: %s", why);
  DIST_LOG(INFO, NCCL, "NCCL is not available: %s", why);
  return false;
}

#ifndef DIST_HAVE_NCCL /* with NCCL: nccl/nccl_api.c */
int dist__cuda_device_count(int *n) {
  *n = 0;
  return dist__set_last_error(DIST_E_NOTSUP, "libdist was built without CUDA and NCCL");
}
#endif

const char *dist__default_backend(bool device_is_cuda) {
  int n = 0;
  if (!dist__backend_find("nccl"))
    return "cpu";
  if (device_is_cuda)
    return "cpu:cpu,cuda:nccl";
  if (dist__cuda_device_count(&n) != DIST_OK || n < 1) {
    dist__clear_last_error();
    return "cpu";
  }
  return "cpu:cpu,cuda:nccl";
}

bool dist_is_mpi_available(void) { return dist__backend_find("mpi") != NULL; }

/* The registered spelling of name (lower case), or name itself when no
 * backend has it. Table entries are never removed, so the pointer lasts. */
const char *dist__backend_canonical(const char *name) {
  dist__backend_register_builtin();
  const char *out = name;
  pthread_mutex_lock(&lock);
  for (int i = 0; i < n_table; i++)
    if (!strcasecmp(table[i].name, name))
      out = table[i].name;
  pthread_mutex_unlock(&lock);
  return out;
}

size_t dist_list_backends(const char **out, size_t cap) {
  dist__backend_register_builtin();
  pthread_mutex_lock(&lock);
  size_t n = (size_t)n_table;
  for (size_t i = 0; out && i < n && i < cap; i++)
    out[i] = table[i].name;
  pthread_mutex_unlock(&lock);
  return n;
}

int dist_get_default_backend_for_device(const char *device, const char **out) {
  if (!device || !out)
    return dist__set_last_error(DIST_E_INVAL, "get_default_backend_for_device: NULL argument");
  size_t l = strcspn(device, ":"); /* "cuda:1" is a cuda device */
  if (l == 3 && !strncasecmp(device, "cpu", 3))
    *out = "cpu";
  else if (l == 4 && !strncasecmp(device, "cuda", 4)) {
    if (!dist_is_nccl_available()) { /* the reason is the last error */
      char why[DIST_ERRMSG_LEN];
      snprintf(why, sizeof why, "%s", dist_last_errmsg());
      return dist__set_last_error(DIST_E_NOTSUP, "get_default_backend_for_device('%s'): no "
                                  "backend for cuda here: %s", device, why);
    }
    *out = "nccl";
  } else
    return dist__set_last_error(DIST_E_INVAL,
                                "get_default_backend_for_device: unknown device type '%s' "
                                "(cpu, cuda)", device);
  return DIST_OK;
}

/* --- groups of a table ---------------------------------------------------- */

/* A group of a table (backend.h): wrappers' inner and outer groups, a
 * device map's inner groups. It shows the table's name as registered. */
int dist_pg_create(const dist_backend_ops *ops, const dist_backend_init_args *a,
                   dist_pg **out) {
  if (!ops || !a || !out || !a->global_ranks || a->size <= 0 || a->rank < 0 ||
      a->rank >= a->size)
    return dist__set_last_error(DIST_E_INVAL, "dist_pg_create: invalid arguments");
  if (ops->abi_version == 0 || ops->abi_version > DIST_BACKEND_ABI_VERSION || !ops->init)
    return dist__set_last_error(DIST_E_INVAL,
                                "backend '%s' was built for vtable ABI %u; this is %u",
                                ops->name ? ops->name : "?", ops->abi_version,
                                DIST_BACKEND_ABI_VERSION);
  dist__pg_spec s = {
      .backend = dist__backend_canonical(ops->name), .global_ranks = a->global_ranks,
      .size = a->size, .rank = a->rank, .name = a->group_name ? a->group_name : "wrapped",
      .timeout_ms = a->timeout_ms > 0 ? a->timeout_ms : dist__default_timeout_ms(),
      .flags = (a->internal ? DIST_GROUP_INTERNAL : 0u) |
               (a->colls_only ? DIST_GROUP_COLLECTIVES_ONLY : 0u),
      .base_store = NULL,
      .device_id = a->device_id, .nccl_options = a->nccl_options, .parent = a->parent,
  };
  dist_pg *g;
  /* The caller's store (borrowed, as backend.h says) reaches the backend. */
  DIST_TRY(dist__pg_build(ops, &s, a->arg, a->store, &g));
  g->store = NULL;
  g->info.group_id = a->group_id;
  *out = g;
  return DIST_OK;
}
