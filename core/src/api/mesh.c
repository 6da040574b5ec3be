/* mesh.c - the device mesh (torch's DeviceMesh): global ranks laid out in
 * an n-dimensional shape, row-major by default or as the caller lays them
 * (torch's DeviceMesh(device_type, mesh)), with one group per dimension for
 * each line of ranks that differ only in that coordinate; or a mesh over
 * groups that already exist (torch's DeviceMesh.from_group).
 *
 * Every rank creates every group of every dimension in the same order,
 * through dist_new_group (so the group interposer, the checking layer at
 * DETAIL, wraps them as any group), non-members getting
 * DIST_GROUP_NON_MEMBER at no cost; the mesh keeps the groups this rank
 * belongs to. A mesh over given groups borrows them. */
#include <stdarg.h>
#include <stdio.h>
#include <strings.h>

#include "api.h"

#define MESH_MAX_DIMS 8
#define NAME_LEN 32

struct dist_device_mesh {
  int ndim;
  int64_t shape[MESH_MAX_DIMS];
  char names[MESH_MAX_DIMS][NAME_LEN];
  char device_type[16];
  int coord[MESH_MAX_DIMS];
  dist_pg *groups[MESH_MAX_DIMS];
  bool owned; /* groups made by the mesh (else borrowed: from_group) */
  int *layout; /* global rank at each coordinate, row-major */
  int64_t nranks;
};

static int inval(const char *fn, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int inval(const char *fn, const char *fmt, ...) {
  char msg[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return dist__set_last_error(DIST_E_INVAL, "%s: %s", fn, msg);
}

/* --- checks ---------------------------------------------------------------------- */

static int check_shape(const char *fn, const int64_t *shape, size_t ndim, int64_t *prod) {
  if (!shape || ndim == 0 || ndim > MESH_MAX_DIMS)
    return inval(fn, "1 to %d dimensions (got %zu)", MESH_MAX_DIMS, ndim);
  *prod = 1;
  for (size_t i = 0; i < ndim; i++) {
    if (shape[i] <= 0 || shape[i] > DIST_GROUP_RANK_BASE)
      return inval(fn, "dimension %zu has size %lld", i, (long long)shape[i]);
    *prod *= shape[i];
    if (*prod > DIST_GROUP_RANK_BASE)
      return inval(fn, "the shape holds more than %d ranks", DIST_GROUP_RANK_BASE);
  }
  return DIST_OK;
}

/* Names, when given, are non-empty, short, and distinct. */
static int check_names(const char *fn, const char *const *names, size_t ndim) {
  for (size_t i = 0; names && i < ndim; i++) {
    if (!names[i] || !names[i][0] || strlen(names[i]) >= NAME_LEN)
      return inval(fn, "dimension %zu needs a name of 1 to %d characters", i,
                   NAME_LEN - 1);
    for (size_t j = 0; j < i; j++)
      if (!strcmp(names[i], names[j]))
        return inval(fn, "dimension name '%s' is given twice (dimensions %zu and %zu)",
                     names[i], j, i);
  }
  return DIST_OK;
}

/* The layout names distinct global ranks below world; with full, every one. */
static int check_layout(const char *fn, const int *layout, int64_t n, int world, bool full) {
  if (!layout)
    return inval(fn, "the layout is NULL");
  if (full && n != world)
    return inval(fn, "the mesh holds %lld ranks but the world size is %d", (long long)n, world);
  bool *seen = dist__calloc((size_t)world, sizeof *seen);
  if (!seen)
    return dist__set_last_error(DIST_E_NOMEM, "%s: out of memory", fn);
  int rc = DIST_OK;
  for (int64_t i = 0; i < n && rc == DIST_OK; i++) {
    int r = layout[i];
    if (r < 0 || r >= world)
      rc = inval(fn, "the layout's entry %lld is rank %d, not a rank of the world (0..%d)",
                 (long long)i, r, world - 1);
    else if (seen[r])
      rc = inval(fn, "the layout names rank %d twice (again at entry %lld), so it is not a "
                 "permutation of the world's ranks", r, (long long)i);
    else
      seen[r] = true;
  }
  dist__free(seen);
  return rc;
}

/* The default group, made from the environment when none exists (torch's
 * init_device_mesh), with the backend for device_type. */
static int ensure_default(const char *fn, const char *device_type, dist_pg **def) {
  if (!dist_is_initialized()) {
    dist_init_opts o = dist_init_opts_default();
    if (dist_get_default_backend_for_device(device_type, &o.backend) != DIST_OK)
      return dist__set_last_error(DIST_E_INVAL, "%s: device type '%s' has no default "
                                  "backend", fn, device_type);
    int rc = dist_init_process_group(&o);
    if (rc != DIST_OK) {
      char why[DIST_ERRMSG_LEN - 96];
      snprintf(why, sizeof why, "%s", dist_last_errmsg());
      return dist__set_last_error(rc, "%s: initialising the default group: %s", fn, why);
    }
  }
  *def = dist__pg_default();
  return *def ? DIST_OK : dist__set_last_error(DIST_E_INVAL, "%s: no default group", fn);
}

/* --- building -------------------------------------------------------------------- */

static int64_t stride_of(const dist_device_mesh *m, int dim) {
  int64_t stride = 1;
  for (int d = m->ndim - 1; d > dim; d--)
    stride *= m->shape[d];
  return stride;
}

/* Global ranks of the line along dim through flat index base. */
static void line_ranks(const dist_device_mesh *m, int dim, int64_t base, int *out) {
  int64_t stride = stride_of(m, dim);
  for (int64_t i = 0; i < m->shape[dim]; i++)
    out[i] = m->layout[base + i * stride];
}

static int make_dim_groups(dist_device_mesh *m, int dim, const dist_group_opts *o,
                           void *caller) {
  int *ranks = dist__malloc(sizeof(int) * (size_t)m->shape[dim]);
  if (!ranks)
    return dist__set_last_error(DIST_E_NOMEM, "out of memory");
  int64_t stride = stride_of(m, dim);
  int rc = DIST_OK;
  m->groups[dim] = DIST_GROUP_NON_MEMBER;
  for (int64_t base = 0; base < m->nranks && rc == DIST_OK; base++) {
    if ((base / stride) % m->shape[dim] != 0)
      continue; /* not the first index of its line */
    line_ranks(m, dim, base, ranks);
    dist_pg *g;
    rc = dist__new_group_from(ranks, (size_t)m->shape[dim], o, &g, caller);
    if (rc == DIST_OK && g != DIST_GROUP_NON_MEMBER)
      m->groups[dim] = g;
  }
  dist__free(ranks);
  return rc;
}

/* A mesh of shape and layout (copied) with this rank's coordinate. */
static int new_mesh(const char *fn, const char *device_type, const int64_t *shape, size_t ndim,
                    const int *layout, int64_t n, const char *const *names, int me,
                    dist_device_mesh **out) {
  dist_device_mesh *m = dist__calloc(1, sizeof *m);
  int *lay = dist__malloc(sizeof(int) * (size_t)n);
  if (!m || !lay) {
    dist__free(m);
    dist__free(lay);
    return dist__set_last_error(DIST_E_NOMEM, "%s: out of memory", fn);
  }
  memcpy(lay, layout, sizeof(int) * (size_t)n);
  m->layout = lay;
  m->nranks = n;
  m->ndim = (int)ndim;
  snprintf(m->device_type, sizeof m->device_type, "%s", device_type);
  int64_t at = -1;
  for (int64_t i = 0; i < n; i++)
    if (lay[i] == me)
      at = i;
  for (int d = (int)ndim - 1; d >= 0; d--) {
    m->shape[d] = shape[d];
    m->coord[d] = at < 0 ? -1 : (int)(at % shape[d]);
    at = at < 0 ? at : at / shape[d];
    snprintf(m->names[d], sizeof m->names[d], "%s", names ? names[d] : "");
  }
  *out = m;
  return DIST_OK;
}

/* dist_device_mesh_create for the program's call caller (the groups it
 * makes are created at that line). */
static int mesh_create(const char *device_type, const int *layout, const int64_t *shape,
                       size_t ndim, const char *const *dim_names, dist_device_mesh **out,
                       void *caller) {
  static const char fn[] = "device_mesh_create";
  if (!out)
    return dist__set_last_error(DIST_E_INVAL, "%s: out is NULL", fn);
  *out = NULL;
  int64_t n;
  DIST_TRY(check_shape(fn, shape, ndim, &n));
  DIST_TRY(check_names(fn, dim_names, ndim));
  const char *dev = device_type ? device_type : "cpu";
  dist_pg *def;
  DIST_TRY(ensure_default(fn, dev, &def));
  DIST_TRY(check_layout(fn, layout, n, def->info.size, true));
  dist_device_mesh *m;
  DIST_TRY(new_mesh(fn, dev, shape, ndim, layout, n, dim_names, def->info.global_rank, &m));
  m->owned = true;
  dist_group_opts o = {0};
  for (int d = 0; d < m->ndim; d++) {
    o.desc = m->names[d][0] ? m->names[d] : "mesh";
    int rc = make_dim_groups(m, d, &o, caller);
    if (rc != DIST_OK) {
      dist_device_mesh_destroy(m);
      return rc;
    }
  }
  *out = m;
  return DIST_OK;
}

int dist_device_mesh_create(const char *device_type, const int *layout, const int64_t *shape,
                            size_t ndim, const char *const *dim_names, dist_device_mesh **out) {
  return mesh_create(device_type, layout, shape, ndim, dim_names, out,
                     __builtin_return_address(0));
}

int dist_init_device_mesh(const char *device_type, const int64_t *shape, size_t ndim,
                          const char *const *names, dist_device_mesh **out) {
  static const char fn[] = "init_device_mesh";
  int64_t n;
  if (!out)
    return dist__set_last_error(DIST_E_INVAL, "%s: out is NULL", fn);
  *out = NULL;
  DIST_TRY(check_shape(fn, shape, ndim, &n));
  int *rowmajor = dist__malloc(sizeof(int) * (size_t)n);
  if (!rowmajor)
    return dist__set_last_error(DIST_E_NOMEM, "%s: out of memory", fn);
  for (int64_t i = 0; i < n; i++)
    rowmajor[i] = (int)i;
  int rc = mesh_create(device_type, rowmajor, shape, ndim, names, out,
                       __builtin_return_address(0));
  dist__free(rowmajor);
  return rc;
}

/* --- from existing groups ---------------------------------------------------------- */

/* group holds exactly the ranks of m's line along dim through this rank. */
static int check_group(const char *fn, dist_device_mesh *m, int dim, dist_pg *g) {
  int *line = dist__malloc(sizeof(int) * (size_t)m->shape[dim]);
  int64_t base = 0;
  for (int d = 0; d < m->ndim; d++)
    base += (d == dim ? 0 : m->coord[d]) * stride_of(m, d);
  int size = dist_get_world_size(g);
  int rc = line ? DIST_OK : dist__set_last_error(DIST_E_NOMEM, "%s: out of memory", fn);
  if (rc == DIST_OK) {
    line_ranks(m, dim, base, line);
    if (size != m->shape[dim])
      rc = inval(fn, "the group of dimension %d has %d ranks, not the %lld of the mesh's line",
                 dim, size, (long long)m->shape[dim]);
    for (int64_t i = 0; i < m->shape[dim] && rc == DIST_OK; i++) {
      int gr;
      if (dist_get_group_rank(g, line[i], &gr) != DIST_OK)
        rc = inval(fn, "the group of dimension %d lacks rank %d of the mesh's line",
                   dim, line[i]);
    }
  }
  dist__free(line);
  return rc;
}

/* The layout of a 1-D mesh over g: its ranks in group-rank order. */
static int group_layout(const char *fn, dist_pg *g, int **layout, int64_t *n) {
  int size = dist_get_world_size(g);
  if (size <= 0)
    return inval(fn, "this rank is not a member of the group");
  *layout = dist__malloc(sizeof(int) * (size_t)size);
  if (!*layout)
    return dist__set_last_error(DIST_E_NOMEM, "%s: out of memory", fn);
  size_t got = 0;
  dist_get_process_group_ranks(g, *layout, (size_t)size, &got);
  *n = size;
  return DIST_OK;
}

int dist_device_mesh_from_group(const char *device_type, dist_pg *const *groups,
                                size_t ngroups, const int *layout, const int64_t *shape,
                                const char *const *dim_names, dist_device_mesh **out) {
  static const char fn[] = "device_mesh_from_group";
  if (!out || !groups || ngroups == 0 || ngroups > MESH_MAX_DIMS)
    return inval(fn, "out, and 1 to %d groups, are required (got %zu)", MESH_MAX_DIMS,
                 ngroups);
  *out = NULL;
  dist_pg *def = dist__pg_default();
  if (!def)
    return inval(fn, "the default group is not initialised");
  for (size_t d = 0; d < ngroups; d++)
    if (groups[d] == DIST_GROUP_NON_MEMBER || (groups[d] && !dist__pg_is_live(groups[d])))
      return inval(fn, "group %zu is not a live group this rank belongs to", d);
  DIST_TRY(check_names(fn, dim_names, ngroups));
  int64_t n = 0, one;
  int *own = NULL;
  if (ngroups == 1 && !layout) {
    DIST_TRY(group_layout(fn, groups[0] ? groups[0] : def, &own, &n));
    layout = own;
    one = n;
    shape = &one;
  } else if (!layout || !shape) {
    return inval(fn, "a mesh of %zu groups needs its layout and shape", ngroups);
  }
  int rc = check_shape(fn, shape, ngroups, &n);
  if (rc == DIST_OK)
    rc = check_layout(fn, layout, n, def->info.size, false);
  dist_device_mesh *m = NULL;
  if (rc == DIST_OK)
    rc = new_mesh(fn, device_type ? device_type : "cpu", shape, ngroups, layout, n, dim_names,
                  def->info.global_rank, &m);
  dist__free(own);
  if (rc == DIST_OK && m->coord[0] < 0)
    rc = inval(fn, "this rank (%d) is not in the layout", def->info.global_rank);
  for (int d = 0; rc == DIST_OK && d < m->ndim; d++) {
    m->groups[d] = groups[d] ? groups[d] : def;
    rc = check_group(fn, m, d, m->groups[d]);
  }
  if (rc != DIST_OK) {
    dist_device_mesh_destroy(m);
    return rc;
  }
  *out = m;
  return DIST_OK;
}

/* --- queries ------------------------------------------------------------------------ */

void dist_device_mesh_destroy(dist_device_mesh *m) {
  if (!m)
    return;
  for (int d = 0; m->owned && d < m->ndim; d++)
    if (m->groups[d] && m->groups[d] != DIST_GROUP_NON_MEMBER && dist__pg_is_live(m->groups[d]))
      dist__pg_destroy_one(m->groups[d], /* the program's destroy of each */
                           __builtin_return_address(0));
  dist__free(m->layout);
  dist__free(m);
}

int dist_mesh_ndim(const dist_device_mesh *m) { return m ? m->ndim : -1; }

int64_t dist_mesh_size(const dist_device_mesh *m, int dim) {
  return m && dim >= 0 && dim < m->ndim ? m->shape[dim] : -1;
}

const char *dist_mesh_get_dim_name(const dist_device_mesh *m, int dim) {
  return m && dim >= 0 && dim < m->ndim && m->names[dim][0] ? m->names[dim] : NULL;
}

static int dim_of(const char *fn, const dist_device_mesh *m, const char *name, int *dim) {
  if (!m || !name)
    return dist__set_last_error(DIST_E_INVAL, "%s: %s is NULL", fn, m ? "name" : "mesh");
  for (int d = 0; d < m->ndim; d++)
    if (!strcmp(m->names[d], name)) {
      *dim = d;
      return DIST_OK;
    }
  return dist__set_last_error(DIST_E_INVAL, "%s: the mesh has no dimension named '%s'", fn,
                              name);
}

int dist_mesh_get_group(dist_device_mesh *m, int dim, dist_pg **out) {
  if (!m || !out || dim < 0 || dim >= m->ndim)
    return dist__set_last_error(DIST_E_INVAL, "mesh_get_group: %s", !m || !out ? "NULL argument"
                                : "the dimension is not in the mesh");
  *out = m->groups[dim];
  return DIST_OK;
}

int dist_mesh_get_group_by_name(dist_device_mesh *m, const char *name, dist_pg **out) {
  int d = -1;
  DIST_TRY(dim_of("mesh_get_group_by_name", m, name, &d));
  return dist_mesh_get_group(m, d, out);
}

int dist_mesh_get_all_groups(dist_device_mesh *m, dist_pg **groups, size_t cap, size_t *n) {
  if (!m || !n || (cap && !groups))
    return dist__set_last_error(DIST_E_INVAL, "mesh_get_all_groups: NULL argument");
  *n = (size_t)m->ndim;
  for (size_t d = 0; d < cap && d < *n; d++)
    groups[d] = m->groups[d];
  return DIST_OK;
}

int dist_mesh_get_coordinate(const dist_device_mesh *m, int *coord) {
  if (!m || !coord)
    return dist__set_last_error(DIST_E_INVAL, "mesh_get_coordinate: NULL argument");
  memcpy(coord, m->coord, sizeof(int) * (size_t)m->ndim);
  return DIST_OK;
}

int dist_mesh_get_local_rank(const dist_device_mesh *m, int dim, int *out) {
  if (!m || !out || dim < 0 || dim >= m->ndim)
    return dist__set_last_error(DIST_E_INVAL, "mesh_get_local_rank: %s", !m || !out
                                ? "NULL argument" : "the dimension is not in the mesh");
  *out = dist_get_rank(m->groups[dim]);
  return DIST_OK;
}

int dist_mesh_get_local_rank_by_name(const dist_device_mesh *m, const char *name, int *out) {
  int d = -1;
  DIST_TRY(dim_of("mesh_get_local_rank_by_name", m, name, &d));
  return dist_mesh_get_local_rank(m, d, out);
}

int dist_mesh_get_rank_at(const dist_device_mesh *m, const int *coord, int *rank) {
  if (!m || !coord || !rank)
    return dist__set_last_error(DIST_E_INVAL, "mesh_get_rank_at: NULL argument");
  int64_t at = 0;
  for (int d = 0; d < m->ndim; d++) {
    if (coord[d] < 0 || coord[d] >= m->shape[d])
      return inval("mesh_get_rank_at", "coordinate %d is outside dimension %d (size %lld)",
                   coord[d], d, (long long)m->shape[d]);
    at += coord[d] * stride_of(m, d);
  }
  *rank = m->layout[at];
  return DIST_OK;
}
