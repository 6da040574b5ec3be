/* groups.c - new_group, split_group, new_subgroups and rank translation.
 *
 * Every rank of the default group calls new_group for every group in the
 * same order (torch's rule), so every rank takes the same group id for the
 * same group, members or not; non-members get DIST_GROUP_NON_MEMBER. Group
 * names are what the members agree on for their store keys: "g<id>" for
 * globally synchronised groups; with use_local_synchronization only the
 * members call, so the name derives from the member list and a count of
 * such groups with that list ("l<hash>.<n>"), and so does the id (above
 * 2^30, see DIST__LOCAL_GROUP_ID_BASE); a split of a group that is not
 * every rank is named and numbered the same way from its parent
 * ("s<hash>.<n>.<split>"), since only the parent's members call; internal
 * helper groups are named the same way ("i<hash>.<n>") and take no id. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include "api.h"

/* Ids of use_local_synchronization groups: this bit plus a hash of the
 * member list and the count of such groups with that list, so every member
 * agrees and global ids stay dense. */
#define DIST__LOCAL_GROUP_ID_BASE 0x40000000

static int next_id;

int dist__pg_take_ids(int n) {
  int id = next_id;
  next_id += n;
  return id;
}

/* Local-synchronisation groups counted per member list (the same count on
 * every member), in a table that grows with the job and is reset with the
 * ids: a full table once let names repeat and groups read stale keys. The
 * lock covers groups created from several threads. */
static struct list_count {
  uint32_t h;
  int n;
} *counts;
static size_t n_counts, cap_counts;
static pthread_mutex_t counts_lock = PTHREAD_MUTEX_INITIALIZER;

void dist__pg_reset_ids(void) {
  next_id = 0;
  pthread_mutex_lock(&counts_lock);
  dist__free(counts);
  counts = NULL;
  n_counts = cap_counts = 0;
  pthread_mutex_unlock(&counts_lock);
}

/* *k: how many groups with the member-list hash h this process made before. */
int dist__pg_local_count(uint32_t h, int *k) {
  int rc = DIST_OK;
  pthread_mutex_lock(&counts_lock);
  size_t i = 0;
  while (i < n_counts && counts[i].h != h)
    i++;
  if (i == n_counts && n_counts == cap_counts) {
    size_t cap = cap_counts ? cap_counts * 2 : 64;
    struct list_count *c = dist__realloc(counts, cap * sizeof *c);
    if (c) {
      counts = c;
      cap_counts = cap;
    } else {
      rc = dist__set_last_error(DIST_E_NOMEM, "new_group: out of memory counting groups");
    }
  }
  if (rc == DIST_OK && i == n_counts)
    counts[n_counts++] = (struct list_count){h, 0};
  if (rc == DIST_OK)
    *k = counts[i].n++;
  pthread_mutex_unlock(&counts_lock);
  return rc;
}

static int cmp_int(const void *a, const void *b) {
  int x = *(const int *)a, y = *(const int *)b;
  return (x > y) - (x < y);
}

/* Sorted copy of ranks (NULL/0: every rank), checked against the world. */
static int member_list(const int *ranks, size_t n, int world, int **out, int *size) {
  size_t k = ranks && n ? n : (size_t)world;
  int *r = dist__malloc(sizeof(int) * (k ? k : 1));
  if (!r)
    return dist__set_last_error(DIST_E_NOMEM, "out of memory");
  for (size_t i = 0; i < k; i++)
    r[i] = ranks && n ? ranks[i] : (int)i;
  qsort(r, k, sizeof(int), cmp_int);
  for (size_t i = 0; i < k; i++) {
    if (r[i] < 0 || r[i] >= world || (i && r[i] == r[i - 1])) {
      int bad = r[i];
      dist__free(r);
      return dist__set_last_error(DIST_E_INVAL,
                                  "new_group: rank %d is %s (world size %d)", bad,
                                  bad < 0 || bad >= world ? "not a rank of the job"
                                                          : "listed twice",
                                  world);
    }
  }
  *out = r;
  *size = (int)k;
  return DIST_OK;
}

static uint32_t hash_name(const char *s) {
  uint32_t h = 2166136261u; /* FNV-1a */
  for (; s && *s; s++) {
    h ^= (uint32_t)(unsigned char)*s;
    h *= 16777619u;
  }
  return h;
}

typedef struct group_req {
  const int *ranks; /* sorted global ranks */
  int size;
  int id;
  const char *name;
  const dist_group_opts *opts;
  dist_pg *parent;  /* every rank of it takes part (else NULL) */
  void *caller;     /* the program's call (dist_new_group's return address) */
  int scope_gid;    /* the group every member of which calls (-1: members alone) */
  const char *call; /* the API function, for the monitor */
} group_req;

static _Atomic(dist__group_create_hook) create_hook;

void dist__set_group_create_hook(dist__group_create_hook fn) { atomic_store(&create_hook, fn); }

/* The hook for a creation of spec s, or NULL (none set, or a helper
 * group: part of a call, not one of the program's). */
static dist__group_create_hook hook_for(const dist__pg_spec *s) {
  dist__group_create_hook fn = atomic_load_explicit(&create_hook, memory_order_acquire);
  return s->flags & DIST_GROUP_INTERNAL ? NULL : fn;
}

static _Atomic(dist__group_outside_fn) outside_fn;

void dist__set_group_outside_check(dist__group_outside_fn fn) { atomic_store(&outside_fn, fn); }

static _Thread_local void *creating_caller;

void *dist__pg_create_caller(void) { return creating_caller; }

/* Tells the hook of a call this rank makes as no member of the group, so
 * the monitor counts the calls made on the scope alike on every rank (and
 * keeps the list this rank passed: one that leaves out a rank the
 * members' lists hold is that rank's mistake). */
static void told_nonmember(const dist__pg_spec *s, const group_req *q) {
  dist__group_create_hook fn = hook_for(s);
  dist__group_create c = {q->id, q->size, q->ranks, q->scope_gid, q->call, q->caller, false,
                          DIST_OK};
  if (fn && q->scope_gid >= 0) {
    fn(&c, true);
    fn(&c, false);
  }
}

/* Shows the checking layer a new_group every rank calls whose list leaves
 * this rank out (dist__group_outside_fn). */
static int check_outside(const dist__pg_spec *s, const group_req *q, int global_rank) {
  dist__group_outside_fn fn = atomic_load_explicit(&outside_fn, memory_order_acquire);
  if (!fn || (s->flags & DIST_GROUP_INTERNAL) || q->scope_gid < 0 || !q->ranks)
    return DIST_OK;
  dist_pg_info planned = {
      .group_id = q->id, .name = q->name, .desc = s->desc ? s->desc : "",
      .backend = s->backend, .rank = -1, .size = q->size, .global_ranks = q->ranks,
      .global_rank = global_rank, .timeout_ms = s->timeout_ms, .internal = false,
  };
  dist__clear_last_error();
  int rc = fn(&planned);
  if (rc != DIST_OK && !dist_last_errmsg()[0])
    dist__set_last_error(rc, "new_group %s: refused", q->name);
  return rc;
}

/* Builds the member's group, telling the hook while it waits for the
 * other members (a user group: the helpers are part of a call). */
static int build_told(const dist__pg_spec *s, const group_req *q, dist_pg **out) {
  dist__group_create_hook fn = hook_for(s);
  dist__group_create c = {q->id, q->size, q->ranks, q->scope_gid, q->call, q->caller, true,
                          DIST_OK};
  if (fn)
    fn(&c, true);
  int rc = dist__backend_pg_new(s, out);
  c.status = rc;
  if (fn)
    fn(&c, false);
  return rc;
}

static int create(dist_pg *def, const group_req *q, dist_pg **out) {
  int me = -1;
  for (int i = 0; i < q->size; i++)
    if (q->ranks[i] == def->info.global_rank)
      me = i;
  const dist_group_opts *o = q->opts;
  const dist_pg *base = def;
  while (base->inner) /* a wrapper's own name is not a backend to build on */
    base = base->inner;
  /* torch: a new group inherits the default group's device binding and
   * backend options unless it names its own. */
  if (o && o->device_id.type == DIST_DEVICE_CUDA && o->device_id.index < 0)
    return dist__set_last_error(DIST_E_INVAL, "new_group: device_id cuda:%d is not a device",
                                o->device_id.index);
  dist__pg_spec s = {
      .backend = o && o->backend ? o->backend : base->backend,
      .global_ranks = q->ranks, .size = q->size, .rank = me, .name = q->name,
      .desc = o && o->desc ? o->desc : "",
      .timeout_ms = o && o->timeout_ms > 0 ? o->timeout_ms : def->timeout_ms,
      .flags = o ? o->flags : 0, .group_id = q->id,
      .base_store = dist__job_base_store(),
      .device_id = o && o->device_id.type == DIST_DEVICE_CUDA ? o->device_id : base->device_id,
      .nccl_options = o && o->nccl_options ? o->nccl_options : &base->nccl_opts,
      .parent = q->parent,
  };
  void *was = creating_caller; /* a helper group made inside this creation keeps it */
  if (!(s.flags & DIST_GROUP_INTERNAL))
    creating_caller = q->caller;
  int rc;
  if (me < 0) {
    *out = DIST_GROUP_NON_MEMBER;
    told_nonmember(&s, q);
    rc = check_outside(&s, q, def->info.global_rank);
    if (rc == DIST_OK && q->parent)
      rc = dist__pg_nonmember_joins(q->parent, s.backend, s.device_id, s.nccl_options);
  } else {
    rc = build_told(&s, q, out);
  }
  creating_caller = was;
  return rc;
}

static dist_pg *need_default(const char *fn) {
  dist_pg *def = dist__pg_default();
  if (!def)
    dist__set_last_error(DIST_E_INVAL, "%s: the default process group is not initialised", fn);
  return def;
}

int dist_new_group(const int *ranks, size_t n, const dist_group_opts *opts, dist_pg **out) {
  return dist__new_group_from(ranks, n, opts, out, __builtin_return_address(0));
}

int dist__new_group_from(const int *ranks, size_t n, const dist_group_opts *opts, dist_pg **out,
                         void *caller) {
  dist_pg *def = need_default("new_group");
  if (!def)
    return DIST_E_INVAL;
  if (!out)
    return dist__set_last_error(DIST_E_INVAL, "new_group: out is NULL");
  int *r = NULL, size = 0;
  DIST_TRY(member_list(ranks, n, def->info.size, &r, &size));
  char name[96];
  group_req q = {r, size, -1, name, opts, NULL, caller, -1, "dist_new_group"};
  bool internal = opts && (opts->flags & DIST_GROUP_INTERNAL);
  if (internal || (opts && opts->use_local_synchronization)) {
    /* Only members call: the name comes from the member list, and so does
     * the id of a local group (taking one from the counter would put the
     * members' counters out of step with everyone else's). */
    uint32_t h = dist__pg_hash_ranks(r, size);
    int k = 0, rc = dist__pg_local_count(h ^ (internal ? 0x9e3779b9u : 0), &k);
    if (rc != DIST_OK) {
      dist__free(r);
      return rc;
    }
    snprintf(name, sizeof name, "%c%08x.%d", internal ? 'i' : 'l', h, k);
    if (!internal)
      q.id = DIST__LOCAL_GROUP_ID_BASE | (int)((h * 31u + (uint32_t)k) & 0x3fffffffu);
  } else {
    q.id = dist__pg_take_ids(1);
    snprintf(name, sizeof name, "g%d", q.id);
    q.parent = def; /* every rank calls: the new group may split def's engines */
    q.scope_gid = def->info.group_id;
  }
  int rc = create(def, &q, out);
  dist__free(r);
  return rc;
}

/* --- split_group --------------------------------------------------------- */

static int check_splits(const dist_pg *parent, const int *const *split, const size_t *sizes,
                        size_t n, int *which) {
  int psize = parent->info.size;
  char *seen = dist__calloc((size_t)psize, 1);
  if (!seen)
    return dist__set_last_error(DIST_E_NOMEM, "out of memory");
  *which = -1;
  for (size_t i = 0; i < n; i++)
    for (size_t j = 0; j < sizes[i]; j++) {
      int r = split[i][j];
      if (r < 0 || r >= psize || seen[r]) {
        dist__free(seen);
        return dist__set_last_error(DIST_E_INVAL,
                                    "split_group: parent rank %d is %s (parent size %d)", r,
                                    r < 0 || r >= psize ? "out of range" : "in two splits",
                                    psize);
      }
      seen[r] = 1;
      if (r == parent->info.rank)
        *which = (int)i;
    }
  dist__free(seen);
  return DIST_OK;
}

int dist_split_group(dist_pg *parent, const int *const *split_ranks, const size_t *split_sizes,
                     size_t n_splits, const dist_group_opts *opts, dist_pg **out) {
  parent = dist__pg_resolve(parent);
  if (!parent || !out || (!split_ranks && n_splits) || (!split_sizes && n_splits))
    return dist__set_last_error(DIST_E_INVAL, "split_group: invalid arguments");
  if (parent == DIST_GROUP_NON_MEMBER)
    return dist__set_last_error(DIST_E_INVAL, "split_group: this rank is not in the parent");
  int mine = -1;
  DIST_TRY(check_splits(parent, split_ranks, split_sizes, n_splits, &mine));
  /* Only the parent's members call. When that is not every rank, the
   * splits' ids and names derive from the parent and a count of its splits
   * (as a local group's from its members): taking ids from the counter
   * would put the members' counters out of step with the other ranks', and
   * the next group every rank creates would get different ids. */
  const dist_pg *def0 = dist__pg_default();
  bool everyone = def0 && parent->info.size == def0->info.size;
  const dist_pg *pbase = parent;
  while (pbase->inner)
    pbase = pbase->inner;
  uint32_t h = 0;
  int first = 0, k_split = 0;
  if (everyone) {
    first = dist__pg_take_ids((int)n_splits);
  } else {
    h = hash_name(pbase->name);
    DIST_TRY(dist__pg_local_count(h ^ 0x5bd1e995u, &k_split));
  }
  if (mine < 0) {
    *out = DIST_GROUP_NON_MEMBER;
    dist__pg_spec ns = {.flags = opts ? opts->flags : 0};
    group_req nq = {NULL, 0, -1, "", opts, parent, __builtin_return_address(0),
                    parent->info.group_id, "dist_split_group"};
    told_nonmember(&ns, &nq);
    const dist_pg *base = parent;
    while (base->inner)
      base = base->inner;
    const dist_pg *def = dist__pg_default();
    while (def && def->inner)
      def = def->inner;
    dist_device dev = opts && opts->device_id.type == DIST_DEVICE_CUDA ? opts->device_id
                      : def ? def->device_id : (dist_device){DIST_DEVICE_CPU, 0};
    return dist__pg_nonmember_joins(parent, opts && opts->backend ? opts->backend
                                    : def ? def->backend : base->backend, dev,
                                    opts && opts->nccl_options ? opts->nccl_options
                                    : def ? &def->nccl_opts : NULL);
  }
  size_t k = split_sizes[mine];
  int *g = dist__malloc(sizeof(int) * (k ? k : 1));
  if (!g)
    return dist__set_last_error(DIST_E_NOMEM, "out of memory");
  for (size_t j = 0; j < k; j++)
    g[j] = parent->global_ranks[split_ranks[mine][j]];
  qsort(g, k, sizeof(int), cmp_int);
  char name[96];
  int id = first + mine;
  if (everyone) {
    snprintf(name, sizeof name, "g%d", id);
  } else {
    snprintf(name, sizeof name, "s%08x.%d.%d", h, k_split, mine);
    id = DIST__LOCAL_GROUP_ID_BASE |
         (int)(((h * 31u + (uint32_t)k_split) * 31u + (uint32_t)mine) & 0x3fffffffu);
  }
  group_req q = {g, (int)k, id, name, opts, parent, __builtin_return_address(0),
                 parent->info.group_id, "dist_split_group"};
  group_req *qp = &q;
  dist_group_opts o2;
  if (!opts || !opts->timeout_ms) { /* torch: a split inherits the parent's timeout */
    o2 = opts ? *opts : (dist_group_opts){0};
    o2.timeout_ms = parent->timeout_ms;
    q.opts = &o2;
  }
  int rc = create(dist__pg_default(), qp, out);
  dist__free(g);
  return rc;
}

/* --- subgroups ----------------------------------------------------------- */

static int subgroups(const int *const *ranks, const size_t *sizes, size_t n,
                     const dist_group_opts *opts, dist_pg **cur, dist_pg ***all,
                     size_t *n_all, void *caller) {
  dist_pg **list = dist__calloc(n ? n : 1, sizeof *list);
  if (!list)
    return dist__set_last_error(DIST_E_NOMEM, "out of memory");
  dist_pg *mine = DIST_GROUP_NON_MEMBER;
  int rc = DIST_OK;
  for (size_t i = 0; i < n && rc == DIST_OK; i++) {
    rc = dist__new_group_from(ranks[i], sizes[i], opts, &list[i], caller);
    if (rc == DIST_OK && list[i] != DIST_GROUP_NON_MEMBER)
      mine = list[i];
  }
  if (rc != DIST_OK) {
    for (size_t i = 0; i < n; i++)
      if (list[i] && list[i] != DIST_GROUP_NON_MEMBER)
        dist__pg_free(list[i]);
    dist__free(list);
    return rc;
  }
  if (cur)
    *cur = mine;
  if (all) {
    *all = list;
    if (n_all)
      *n_all = n;
  } else {
    dist__free(list); /* the groups live on; destroy-all reaches them */
  }
  return DIST_OK;
}

int dist_new_subgroups_by_enumeration(const int *const *ranks, const size_t *sizes, size_t n,
                                      const dist_group_opts *opts, dist_pg **cur,
                                      dist_pg ***all, size_t *n_all) {
  if (!ranks || !sizes || !n)
    return dist__set_last_error(DIST_E_INVAL, "new_subgroups_by_enumeration: no rank lists");
  return subgroups(ranks, sizes, n, opts, cur, all, n_all, __builtin_return_address(0));
}

int dist_new_subgroups(int group_size, const dist_group_opts *opts, dist_pg **cur,
                       dist_pg ***all, size_t *n_all) {
  dist_pg *def = need_default("new_subgroups");
  if (!def)
    return DIST_E_INVAL;
  int world = def->info.size;
  if (group_size <= 0) {
    int64_t lws;
    DIST_TRY(dist__env_int("LOCAL_WORLD_SIZE", 1, world, world, &lws));
    group_size = (int)lws;
  }
  if (group_size > world || world % group_size)
    return dist__set_last_error(DIST_E_INVAL,
                                "new_subgroups: the world size %d is not a multiple of "
                                "group size %d", world, group_size);
  size_t n = (size_t)(world / group_size);
  int *r = dist__malloc(sizeof(int) * (size_t)world);
  const int **lists = dist__malloc(sizeof(int *) * n);
  size_t *sizes = dist__malloc(sizeof(size_t) * n);
  int rc = DIST_E_NOMEM;
  if (r && lists && sizes) {
    for (int i = 0; i < world; i++)
      r[i] = i;
    for (size_t i = 0; i < n; i++) {
      lists[i] = r + i * (size_t)group_size;
      sizes[i] = (size_t)group_size;
    }
    rc = subgroups(lists, sizes, n, opts, cur, all, n_all, __builtin_return_address(0));
  } else {
    dist__set_last_error(rc, "out of memory");
  }
  dist__free(r);
  dist__free(lists);
  dist__free(sizes);
  return rc;
}

/* --- rank translation ---------------------------------------------------- */

static dist_pg *member_group(dist_pg *g, const char *fn) {
  g = dist__pg_resolve(g);
  if (g == DIST_GROUP_NON_MEMBER) {
    dist__set_last_error(DIST_E_INVAL, "%s: this rank is not a member of the group", fn);
    return NULL;
  }
  return g;
}

int dist_get_group_rank(dist_pg *g, int global_rank, int *group_rank) {
  g = member_group(g, "get_group_rank");
  if (!g || !group_rank)
    return DIST_E_INVAL;
  int r = dist__pg_group_rank_of(g, global_rank);
  if (r < 0)
    return dist__set_last_error(DIST_E_INVAL, "global rank %d is not part of group %s",
                                global_rank, g->name);
  *group_rank = r;
  return DIST_OK;
}

int dist_get_global_rank(dist_pg *g, int group_rank, int *global_rank) {
  g = member_group(g, "get_global_rank");
  if (!g || !global_rank)
    return DIST_E_INVAL;
  if (group_rank < 0 || group_rank >= g->info.size)
    return dist__set_last_error(DIST_E_INVAL, "group rank %d is not in group %s (size %d)",
                                group_rank, g->name, g->info.size);
  *global_rank = g->global_ranks[group_rank];
  return DIST_OK;
}

int dist_get_process_group_ranks(dist_pg *g, int *ranks, size_t cap, size_t *n) {
  g = member_group(g, "get_process_group_ranks");
  if (!g || (!ranks && cap))
    return DIST_E_INVAL;
  size_t k = (size_t)g->info.size;
  for (size_t i = 0; i < k && i < cap; i++)
    ranks[i] = g->global_ranks[i];
  if (n)
    *n = k;
  return DIST_OK;
}
