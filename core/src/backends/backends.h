/* backends.h - the backends level: backends by name and groups of a table
 * (backend_registry.c), device maps and groups of a name (pg_mixed.c).
 *
 * Below it, each backend folder (cpu/, mpi/, nccl/) fills one
 * dist_backend_ops table and knows no other backend; the pg level runs
 * whatever table it is given. This level is where a name such as "gloo"
 * or "cpu:cpu,cuda:nccl" becomes a table. */
#ifndef DIST_BACKENDS_H
#define DIST_BACKENDS_H

#include "pg/pg_int.h"

/* --- the registry (backend_registry.c) ----------------------------------- */

const dist_backend_ops *dist__backend_find(const char *name);
void dist__backend_register_builtin(void);
int dist__backend_load_plugins(void);
const char *dist__backend_names(void);
/* The registered spelling of name (lower case), or name itself when no
 * backend has it. */
const char *dist__backend_canonical(const char *name);

/* --- device maps (pg_mixed.c) ------------------------------------------ */

/* A backend spec read: one backend per device type. A plain name of a
 * backend that reaches host memory ("cpu", "mpi") runs the group itself;
 * a map ("cpu:cpu,cuda:nccl") or a name that reaches only CUDA memory
 * ("nccl", as "cuda:nccl") makes a dispatching group (dispatch true). */
typedef struct dist__backend_map {
  const dist_backend_ops *ops[2]; /* by dist_device_type; NULL: none */
  char name[2][32];               /* their registered names */
  char canon[64];                 /* the spec as dist_get_backend says it */
  bool dispatch;
} dist__backend_map;
/* Reads spec (NULL or "": "cpu"); DIST_E_INVAL / DIST_E_NOTSUP with a
 * message (last error) for unknown devices or backends, a device named
 * twice, or a backend that cannot reach its device. */
int dist__backend_map_parse(const char *spec, dist__backend_map *out);
/* As dist__pg_new, for spec->backend a name or a device map: resolves it
 * (dist__backend_map_parse) into the table and init arg that run it. */
int dist__backend_pg_new(const dist__pg_spec *spec, dist_pg **out);
/* The dispatching group's table; its init takes the map as args->arg. */
extern const dist_backend_ops dist__mixed_backend_ops;
/* A rank outside a group being created from parent (every rank of parent
 * taking part) joins what the members do collectively on parent's
 * engines: ncclCommSplit with no colour when they split parent's NCCL
 * communicator. spec: the group's backend; device: its binding. */
int dist__pg_nonmember_joins(dist_pg *parent, const char *spec, dist_device device,
                             const dist_nccl_options *o);

/* The backend a program that names none gets, as torch's:
 * "cpu:cpu,cuda:nccl" when NCCL is usable and a CUDA device is visible or
 * device_is_cuda (init named one), else "cpu" (api/init.c). */
const char *dist__default_backend(bool device_is_cuda);

#endif
