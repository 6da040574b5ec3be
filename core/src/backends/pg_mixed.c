/* pg_mixed.c - device maps: a group whose operations run on the backend of
 * their tensors' device ("cpu:cpu,cuda:nccl", torch's "cpu:gloo,cuda:nccl").
 *
 * DESIGN. The group holds one inner group per device type of its map, an
 * internal group of that device's backend over the same members, built
 * from the group's own init args (store under the device's prefix). An
 * inner group is made at the first operation on its device, or during
 * the group's init for cuda when the group is bound to a device
 * (device_id): so a program that never touches a device pays nothing for
 * it, and a machine without GPUs runs the cpu side of the map. Every slot
 * finds the one device of the call's tensors and forwards the call
 * unchanged (dist_pg_forward: the work, its events and its report stay
 * the outer group's). A call that mixes devices fails with DIST_E_INVAL,
 * one on a device the map lacks with DIST_E_NOTSUP, both naming the
 * device, before any backend sees it. A barrier (no tensors) runs on the
 * bound device, else on cpu when mapped, as torch's.
 * Everything that rides the store or a helper group (monitored_barrier,
 * the checking layer's exchange, byte blobs over cpu tensors) sees one
 * group as on a single backend. A plain "nccl" is the map "cuda:nccl", so
 * its communicator too is made at the first CUDA operation. */
#include <ctype.h>
#include <stdio.h>
#include <strings.h>

#include "backends.h"
#ifdef DIST_HAVE_NCCL
#include "nccl/backend_nccl.h"
#endif

static const char *const dev_name[2] = {"cpu", "cuda"};

/* --- the map ------------------------------------------------------------- */

static int parse_entry(const char *spec, const char *e, dist__backend_map *m) {
  const char *colon = strchr(e, ':');
  if (!colon || colon == e || !colon[1])
    return dist__set_last_error(DIST_E_INVAL, "backend '%s': '%s' is not device:backend",
                                spec, e);
  size_t dl = (size_t)(colon - e);
  int d = dl == 3 && !strncasecmp(e, "cpu", 3) ? DIST_DEVICE_CPU
          : dl == 4 && !strncasecmp(e, "cuda", 4) ? DIST_DEVICE_CUDA : -1;
  if (d < 0)
    return dist__set_last_error(DIST_E_INVAL, "backend '%s': unknown device '%.*s' (cpu, cuda)",
                                spec, (int)dl, e);
  if (m->ops[d])
    return dist__set_last_error(DIST_E_INVAL, "backend '%s': device %s is mapped twice", spec,
                                dev_name[d]);
  const dist_backend_ops *ops = dist__backend_find(colon + 1);
  if (!ops)
    return dist__set_last_error(DIST_E_NOTSUP,
                                "backend '%s': '%s' is not available in this build (known: %s)",
                                spec, colon + 1, dist__backend_names());
  if (!(ops->caps & (d == DIST_DEVICE_CUDA ? DIST_CAP_CUDA : DIST_CAP_CPU)))
    return dist__set_last_error(DIST_E_NOTSUP, "backend '%s': %s cannot reach %s tensors",
                                spec, colon + 1, dev_name[d]);
  m->ops[d] = ops;
  snprintf(m->name[d], sizeof m->name[d], "%s", dist__backend_canonical(colon + 1));
  return DIST_OK;
}

int dist__backend_map_parse(const char *spec, dist__backend_map *m) {
  memset(m, 0, sizeof *m);
  if (!spec || !*spec)
    spec = "cpu";
  if (strlen(spec) >= sizeof m->canon)
    return dist__set_last_error(DIST_E_INVAL, "backend '%.40s...' is too long", spec);
  if (!strchr(spec, ':')) {
    const dist_backend_ops *ops = dist__backend_find(spec);
    if (!ops)
      return dist__set_last_error(DIST_E_NOTSUP,
                                  "backend '%s' is not available in this build (known: %s)",
                                  spec, dist__backend_names());
    snprintf(m->canon, sizeof m->canon, "%s", dist__backend_canonical(spec));
    int d = ops->caps & DIST_CAP_CPU ? DIST_DEVICE_CPU : DIST_DEVICE_CUDA;
    m->ops[d] = ops;
    snprintf(m->name[d], sizeof m->name[d], "%.31s", m->canon);
    m->dispatch = d == DIST_DEVICE_CUDA; /* "nccl" is "cuda:nccl" */
    return DIST_OK;
  }
  char buf[64];
  snprintf(buf, sizeof buf, "%s", spec);
  for (char *save = NULL, *e = strtok_r(buf, ",", &save); e; e = strtok_r(NULL, ",", &save))
    DIST_TRY(parse_entry(spec, e, m));
  size_t off = 0;
  for (int d = 0; d < 2; d++)
    if (m->ops[d])
      dist__appendf(m->canon, sizeof m->canon, &off, "%s%s:%s", off ? "," : "", dev_name[d],
                    m->name[d]);
  m->dispatch = true;
  return DIST_OK;
}

/* A group of a backend's name or a device map: the table that runs it
 * (this file's for a map) with the map as its init arg. */
int dist__backend_pg_new(const dist__pg_spec *spec, dist_pg **out) {
  dist__backend_map map;
  DIST_TRY(dist__backend_map_parse(spec->backend, &map));
  dist__pg_spec s = *spec;
  s.backend = map.canon;
  s.ops = map.dispatch ? &dist__mixed_backend_ops : map.ops[DIST_DEVICE_CPU];
  s.arg = map.dispatch ? &map : NULL;
  return dist__pg_new(&s, out);
}

/* --- the group ----------------------------------------------------------- */

typedef struct mixed {
  dist_pg *self;
  dist__backend_map map;
  dist_backend_init_args args; /* for the inner groups (pointers live with self) */
  char names[2][160];
  pthread_mutex_t mu;          /* inner[] and the abort state: abort reads them */
  dist_pg *inner[2];
  dist_store *store[2];
  bool aborted;
  char reason[256];
} mixed;

/* Builds the inner group of device d (a collective among the members). */
static int make_inner(mixed *m, int d, dist_pg *parent) {
  dist_store *st = NULL;
  int rc = dist_store_prefix_create(dev_name[d], m->args.store, DIST_STORE_BORROW, &st);
  if (rc != DIST_OK)
    return dist_backend_set_error(m->self, rc, "group %s: cannot make the %s store: %s",
                                  m->args.group_name, dev_name[d], dist_last_errmsg());
  dist_backend_init_args a = m->args;
  snprintf(m->names[d], sizeof m->names[d], "%s.%s", m->args.group_name, dev_name[d]);
  a.group_name = m->names[d];
  a.store = st;
  a.internal = true;
  a.arg = NULL;
  a.parent = parent;
  dist_pg *g = NULL;
  rc = dist_pg_create(m->map.ops[d], &a, &g);
  if (rc != DIST_OK) {
    dist_store_destroy(st);
    return dist_backend_set_error(m->self, rc, "%s", dist_last_errmsg());
  }
  g->served = m->self; /* its GPU times are the map group's operations */
  pthread_mutex_lock(&m->mu);
  m->inner[d] = g;
  m->store[d] = st;
  bool aborted = m->aborted;
  pthread_mutex_unlock(&m->mu);
  if (aborted) /* an abort came while it connected */
    dist__abort_group(g, m->reason);
  return DIST_OK;
}

static int mixed_init(void *priv, const dist_backend_init_args *a, dist_pg *self) {
  mixed *m = priv;
  m->self = self;
  m->map = *(const dist__backend_map *)a->arg;
  m->args = *a;
  m->args.parent = NULL; /* only an eager inner group splits from it */
  pthread_mutex_init(&m->mu, NULL);
  if (!a->store) {
    pthread_mutex_destroy(&m->mu);
    return dist_backend_set_error(self, DIST_E_INVAL, "group %s: a device map needs a store",
                                  a->group_name);
  }
  if (a->device_id.type == DIST_DEVICE_CUDA && m->map.ops[DIST_DEVICE_CUDA]) {
    int rc = make_inner(m, DIST_DEVICE_CUDA, a->parent); /* bound: at once */
    if (rc != DIST_OK) {
      pthread_mutex_destroy(&m->mu);
      return rc;
    }
  }
  return DIST_OK;
}

static void mixed_fini(void *priv) {
  mixed *m = priv;
  for (int d = 0; d < 2; d++) {
    pthread_mutex_lock(&m->mu); /* gpu_progress (any thread) reads inner[] */
    dist_pg *g = m->inner[d];
    m->inner[d] = NULL;
    pthread_mutex_unlock(&m->mu);
    if (g)
      dist__pg_free(g);
    dist_store_destroy(m->store[d]);
  }
  pthread_mutex_destroy(&m->mu);
}

static void mixed_abort(void *priv, const char *reason) {
  mixed *m = priv;
  dist_pg *in[2];
  pthread_mutex_lock(&m->mu);
  if (!m->aborted)
    snprintf(m->reason, sizeof m->reason, "%s", reason ? reason : "aborted");
  m->aborted = true;
  in[0] = m->inner[0];
  in[1] = m->inner[1];
  pthread_mutex_unlock(&m->mu);
  for (int d = 0; d < 2; d++)
    if (in[d])
      dist__abort_group(in[d], reason);
}

static int mixed_async_error(void *priv) {
  mixed *m = priv;
  int rc = DIST_OK;
  pthread_mutex_lock(&m->mu);
  for (int d = 0; d < 2 && rc == DIST_OK; d++)
    if (m->inner[d])
      rc = dist_pg_async_error(m->inner[d]);
  if (rc == DIST_OK && m->aborted)
    rc = DIST_E_ABORTED;
  pthread_mutex_unlock(&m->mu);
  return rc;
}

/* --- dispatch ------------------------------------------------------------ */

/* The device of c's tensors (every one on it, pg.c checked). */
static int device_of(mixed *m, const dist_coll *c, int *dev) {
  int d = -1;
  DIST_TRY(dist__coll_device(m->self, c, &d));
  if (d < 0) /* a barrier: the bound device, else cpu when mapped */
    d = m->args.device_id.type == DIST_DEVICE_CUDA && m->map.ops[DIST_DEVICE_CUDA]
            ? DIST_DEVICE_CUDA
        : m->map.ops[DIST_DEVICE_CPU] ? DIST_DEVICE_CPU : DIST_DEVICE_CUDA;
  if (!m->map.ops[d])
    return dist_backend_set_error(m->self, DIST_E_NOTSUP,
                                  "%s on %s tensors: group %s (backend '%s') maps no backend "
                                  "for %s tensors", dist_op_name(c->kind), dev_name[d],
                                  m->args.group_name, m->map.canon, dev_name[d]);
  *dev = d;
  return DIST_OK;
}

static int mixed_op(void *priv, const dist_coll *c, dist_work *w) {
  mixed *m = priv;
  int d = DIST_DEVICE_CPU;
  DIST_TRY(device_of(m, c, &d));
  pthread_mutex_lock(&m->mu);
  dist_pg *g = m->inner[d];
  bool aborted = m->aborted;
  pthread_mutex_unlock(&m->mu);
  if (aborted && !g)
    return dist_backend_set_error(m->self, DIST_E_ABORTED, "group %s was aborted: %s",
                                  m->args.group_name, m->reason);
  if (!g) {
    DIST_TRY(make_inner(m, d, NULL)); /* first use of the device: members all arrive */
    g = m->inner[d];
  }
  int rc = dist_pg_forward(g, c, w);
  if (rc != DIST_OK)
    dist_backend_set_error(m->self, rc, "%s", dist_pg_errmsg(g));
  return rc;
}

/* The inner group of device t (pg.c's dist__pg_device_group asks, for a
 * group split from this one). */
static dist_pg *mixed_device_group(void *priv, dist_device_type t) {
  mixed *m = priv;
  pthread_mutex_lock(&m->mu);
  dist_pg *in = m->inner[t];
  pthread_mutex_unlock(&m->mu);
  return in;
}

/* The cuda inner group answers; before it is made (at the first CUDA
 * operation) nothing can have launched. */
static int mixed_gpu_progress(void *priv, uint64_t seq, dist_gpu_progress *out) {
  mixed *m = priv;
  if (!m->map.ops[DIST_DEVICE_CUDA])
    return DIST_E_NOTSUP;
  pthread_mutex_lock(&m->mu);
  dist_pg *g = m->inner[DIST_DEVICE_CUDA];
  pthread_mutex_unlock(&m->mu);
  if (!g) {
    memset(out, 0, sizeof *out);
    out->state = DIST_GPU_ENQUEUED;
    return DIST_OK;
  }
  return dist__pg_gpu_progress(g, seq, out);
}

const dist_backend_ops dist__mixed_backend_ops = {
    .abi_version = DIST_BACKEND_ABI_VERSION,
    .name = "map",
    .caps = DIST_CAP_CPU | DIST_CAP_CUDA,
    .priv_size = sizeof(mixed),
    .init = mixed_init,
    .fini = mixed_fini,
    .abort = mixed_abort,
    .send = mixed_op,
    .recv = mixed_op,
    .batch_p2p = mixed_op,
    .broadcast = mixed_op,
    .all_reduce = mixed_op,
    .reduce = mixed_op,
    .all_gather = mixed_op,
    .gather = mixed_op,
    .scatter = mixed_op,
    .reduce_scatter = mixed_op,
    .all_to_all = mixed_op,
    .barrier = mixed_op,
    .async_error = mixed_async_error,
    .gpu_progress = mixed_gpu_progress,
    .device_group = mixed_device_group,
};

/* --- for groups made from this one -------------------------------------- */

int dist__pg_nonmember_joins(dist_pg *parent, const char *spec, dist_device device,
                             const dist_nccl_options *o) {
#ifdef DIST_HAVE_NCCL
  dist__backend_map map;
  if (device.type != DIST_DEVICE_CUDA || dist__backend_map_parse(spec, &map) != DIST_OK ||
      map.ops[DIST_DEVICE_CUDA] != &dist__nccl_backend_ops)
    return DIST_OK; /* the members connect eagerly only when bound */
  dist_pg *p = dist__pg_device_group(parent, DIST_DEVICE_CUDA);
  return p && p->ops == &dist__nccl_backend_ops ? dist__nccl_nonmember_split(p, o) : DIST_OK;
#else
  (void)parent, (void)spec, (void)device, (void)o;
  return DIST_OK;
#endif
}
