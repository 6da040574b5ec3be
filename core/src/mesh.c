/* mesh.c - the device mesh (torch's init_device_mesh): ranks laid out
 * row-major in an n-dimensional shape, one group per dimension for each
 * line of ranks that differ only in that coordinate.
 *
 * Every rank creates every group of every dimension in the same order
 * (non-members get DIST_GROUP_NON_MEMBER at no cost), so group ids agree on
 * all ranks; the mesh keeps the groups this rank belongs to. */
#include <stdio.h>
#include <strings.h>

#include "pg_int.h"

#define MESH_MAX_DIMS 8

struct dist_device_mesh {
  int ndim;
  int64_t shape[MESH_MAX_DIMS];
  char names[MESH_MAX_DIMS][32];
  char device_type[16];
  int coord[MESH_MAX_DIMS];
  dist_pg *groups[MESH_MAX_DIMS];
};

/* Ranks of the line along dim through the point whose other coordinates
 * are those of `base` (a rank with coordinate 0 along dim). */
static void line_ranks(const dist_device_mesh *m, int dim, int base, int *out) {
  int64_t stride = 1;
  for (int d = m->ndim - 1; d > dim; d--)
    stride *= m->shape[d];
  for (int64_t i = 0; i < m->shape[dim]; i++)
    out[i] = base + (int)(i * stride);
}

static int make_dim_groups(dist_device_mesh *m, int dim, int world, const dist_group_opts *o) {
  int *ranks = dist__malloc(sizeof(int) * (size_t)m->shape[dim]);
  if (!ranks)
    return dist__set_last_error(DIST_E_NOMEM, "out of memory");
  int64_t stride = 1;
  for (int d = m->ndim - 1; d > dim; d--)
    stride *= m->shape[d];
  int rc = DIST_OK;
  m->groups[dim] = DIST_GROUP_NON_MEMBER;
  for (int base = 0; base < world && rc == DIST_OK; base++) {
    if ((base / stride) % m->shape[dim] != 0)
      continue; /* not the first rank of its line */
    line_ranks(m, dim, base, ranks);
    dist_pg *g;
    rc = dist_new_group(ranks, (size_t)m->shape[dim], o, &g);
    if (rc == DIST_OK && g != DIST_GROUP_NON_MEMBER)
      m->groups[dim] = g;
  }
  dist__free(ranks);
  return rc;
}

static int check_shape(const int64_t *shape, size_t ndim, int world) {
  if (!shape || ndim == 0 || ndim > MESH_MAX_DIMS)
    return dist__set_last_error(DIST_E_INVAL, "init_device_mesh: 1 to %d dimensions",
                                MESH_MAX_DIMS);
  int64_t prod = 1;
  for (size_t i = 0; i < ndim; i++) {
    if (shape[i] <= 0)
      return dist__set_last_error(DIST_E_INVAL, "init_device_mesh: dimension %zu has size %lld",
                                  i, (long long)shape[i]);
    prod *= shape[i];
  }
  if (prod != world)
    return dist__set_last_error(DIST_E_INVAL,
                                "init_device_mesh: the mesh holds %lld ranks but the world "
                                "size is %d", (long long)prod, world);
  return DIST_OK;
}

int dist_init_device_mesh(const char *device_type, const int64_t *shape, size_t ndim,
                          const char *const *names, dist_device_mesh **out) {
  dist_pg *def = dist__pg_default();
  if (!def || !out)
    return dist__set_last_error(DIST_E_INVAL, "init_device_mesh: %s",
                                def ? "out is NULL" : "the default group is not initialised");
  DIST_TRY(check_shape(shape, ndim, def->info.size));
  dist_device_mesh *m = dist__calloc(1, sizeof *m);
  if (!m)
    return dist__set_last_error(DIST_E_NOMEM, "out of memory");
  m->ndim = (int)ndim;
  snprintf(m->device_type, sizeof m->device_type, "%s", device_type ? device_type : "cpu");
  int rest = def->info.global_rank;
  for (int d = (int)ndim - 1; d >= 0; d--) {
    m->shape[d] = shape[d];
    m->coord[d] = (int)(rest % shape[d]);
    rest /= (int)shape[d];
    snprintf(m->names[d], sizeof m->names[d], "%s", names && names[d] ? names[d] : "");
  }
  dist_group_opts o = {0};
  for (int d = 0; d < m->ndim; d++) {
    o.desc = m->names[d][0] ? m->names[d] : "mesh";
    int rc = make_dim_groups(m, d, def->info.size, &o);
    if (rc != DIST_OK) {
      dist_device_mesh_destroy(m);
      return rc;
    }
  }
  *out = m;
  return DIST_OK;
}

void dist_device_mesh_destroy(dist_device_mesh *m) {
  if (!m)
    return;
  for (int d = 0; d < m->ndim; d++)
    if (m->groups[d] && m->groups[d] != DIST_GROUP_NON_MEMBER && dist__pg_is_live(m->groups[d]))
      dist__pg_free(m->groups[d]);
  dist__free(m);
}

int dist_mesh_ndim(const dist_device_mesh *m) { return m ? m->ndim : -1; }

int dist_mesh_get_group(dist_device_mesh *m, int dim, dist_pg **out) {
  if (!m || !out || dim < 0 || dim >= m->ndim)
    return dist__set_last_error(DIST_E_INVAL, "mesh_get_group: dimension %d is not in the mesh",
                                dim);
  *out = m->groups[dim];
  return DIST_OK;
}

int dist_mesh_get_group_by_name(dist_device_mesh *m, const char *name, dist_pg **out) {
  if (!m || !name)
    return dist__set_last_error(DIST_E_INVAL, "mesh_get_group_by_name: NULL argument");
  for (int d = 0; d < m->ndim; d++)
    if (!strcmp(m->names[d], name))
      return dist_mesh_get_group(m, d, out);
  return dist__set_last_error(DIST_E_INVAL, "the mesh has no dimension named '%s'", name);
}

int dist_mesh_get_coordinate(const dist_device_mesh *m, int *coord) {
  if (!m || !coord)
    return dist__set_last_error(DIST_E_INVAL, "mesh_get_coordinate: NULL argument");
  memcpy(coord, m->coord, sizeof(int) * (size_t)m->ndim);
  return DIST_OK;
}

int dist_mesh_get_local_rank(const dist_device_mesh *m, int dim, int *out) {
  if (!m || !out || dim < 0 || dim >= m->ndim)
    return dist__set_last_error(DIST_E_INVAL, "mesh_get_local_rank: dimension %d is not in the "
                                "mesh", dim);
  *out = m->coord[dim];
  return DIST_OK;
}
