/* shm_copy.c - the copying collectives of the shared-memory engine:
 * broadcast, barrier, all_gather (both forms), gather, scatter.
 *
 * Each is a loop of steps over slot-sized chunks (shm_int.h): the writer
 * stages chunk i in a slot of the step's parity, every rank posts and
 * waits, the readers copy chunk i out. With two parities a writer stages
 * chunk i + 1 while the readers still copy chunk i, so the two copies of a
 * two-rank broadcast run on both cores at once.
 *   broadcast   the root stages in its own slot; the others read it
 *   all_gather  everyone stages its input; everyone reads everyone
 *   gather      the others stage; the root reads
 *   scatter     the root stages piece j in rank j's slot; j reads it
 * A rank's own piece is copied straight from input to output. Broadcasts
 * up to 4 MiB and mid-size all_gather and gather go single-copy instead
 * (shm_cma.c).
 *
 * A broadcast or scatter that fits one staged step runs with a deferred
 * wait (shm_int.h): the root stages, posts and returns, the readers wait
 * for the root alone. Back to back, the root's return and next call then
 * overlap its readers' copies instead of waiting for them; the wait it
 * skipped happens at the start of its next operation, which by then
 * usually finds every reader long arrived. One that fits the polled line
 * settles only SHM_DEPTH - 1 steps back (shm_settle_deep). */
#include "shm_int.h"

static shm_key copy_key(const dist_coll *c, dist_dtype dt, int64_t count, bool rooted) {
  shm_key k = {0};
  k.kind = (uint8_t)c->kind;
  k.dtype = (uint8_t)dt;
  k.part_of = shm_part_of(c);
  k.root = rooted ? c->root : 0;
  k.count = count;
  return k;
}

int dist__shm_barrier(dist__shm *s, dist__cpu_op *op) {
  shm_key k = {0};
  k.kind = DIST_OP_BARRIER;
  uint64_t g = shm_begin(s);
  shm_publish(s, op, g, &k);
  int rc = shm_step(s, op, g, true);
  s->step = g + 1;
  return rc;
}

/* Publishes one source address for every reader (on parity p). */
static void publish_addr(dist__shm *s, int p, const void *addr) {
  uint64_t *mine = shm_addrs(s, s->rank, p), v = (uint64_t)(uintptr_t)addr;
  if (mine[0] != v)
    mine[0] = v;
}

/* Single copy: the readers pull from the root's buffer. */
static int broadcast_direct(dist__shm *s, dist__cpu_op *op, const shm_key *k, uint8_t *buf,
                            size_t nb) {
  uint64_t g0 = shm_begin(s);
  int p = (int)(g0 & 1), root = op->c->root;
  publish_addr(s, p, buf);
  shm_publish(s, op, g0, k);
  int rc = shm_step(s, op, g0, true);
  s->step = g0 + 1;
  if (rc != DIST_OK)
    return rc;
  if (root != s->rank)
    DIST_TRY(dist__shm_cma_read(s, op, root, buf, shm_addrs(s, root, p)[0], nb));
  rc = shm_step(s, op, g0 + 1, false);
  s->step = g0 + 2;
  return rc;
}

/* The one step of a rooted copy with a deferred wait (shm_int.h), once
 * the root has staged its data: the root posts and returns, a reader
 * posts, waits for the root alone and checks the root's descriptor
 * against its own. DIST_OK: a reader may read. Ranks that agree on the
 * descriptor all take this path (the choice depends on it alone). */
static int lazy_step(dist__shm *s, dist__cpu_op *op, uint64_t g, const shm_key *k) {
  int root = op->c->root;
  s->step = g + 1;
  shm_publish(s, op, g, k);
  shm_post(s, g);
  if (root == s->rank) {
    shm_defer(s, op, g, true);
    return DIST_OK;
  }
  if (s->size > 2) /* the other readers are not waited for either */
    shm_defer(s, op, g, false);
  int rc = dist__shm_wait_one(s, op, g, root);
  return rc == DIST_OK ? dist__shm_check_one(s, op, g, root) : rc;
}

static int broadcast_lazy(dist__shm *s, dist__cpu_op *op, const shm_key *k, uint8_t *buf,
                          size_t nb) {
  uint64_t g = shm_begin(s);
  int root = op->c->root;
  if (root == s->rank)
    shm_copy(shm_buf(s, s->rank, g, nb), buf, nb);
  int rc = lazy_step(s, op, g, k);
  if (rc == DIST_OK && root != s->rank) {
    shm_stream_begin(s, nb);
    shm_copy_out(s, buf, shm_buf(s, root, g, nb), nb);
  }
  return rc;
}

int dist__shm_broadcast(dist__shm *s, dist__cpu_op *op) {
  const dist_tensor *t = &op->c->inputs[0];
  uint8_t *buf = t->data;
  int64_t n = dist_tensor_numel(t);
  size_t nb = (size_t)n * dist_dtype_size(t->dtype);
  bool root = op->c->root == s->rank;
  shm_key k = copy_key(op->c, t->dtype, n, true);
  /* A list entry's piece waits for every rank: where one rank's list
   * differs the others run the call in another form, and its root, had
   * it returned, would learn that at some later call, not at this one. */
  bool lazy = s->size > 1 && !shm_listed(&k);
  /* The common small case, decided without the divisions below: a line's
   * worth is always one staged step (chunks are at least 4 KiB) and never
   * single-copy (from 1 KiB on). */
  if (nb <= SHM_INLINE && lazy)
    return broadcast_lazy(s, op, &k, buf, nb);
  /* Single copy up to DIST_SHM_BCAST_DIRECT_KB (4 MiB): the readers' one
   * kernel copy holds its speed where the staged pipeline's cross-core
   * copies on this VM slow down 3-4x in some minutes (shm_seg.c). Past it
   * the pipeline's copy-in and copy-out on two cores at once win. */
  if (shm_direct(s, nb) && nb <= s->bcast_direct_max)
    return broadcast_direct(s, op, &k, buf, nb);
  size_t chunk = shm_chunk(s, nb, s->slot);
  size_t steps = nb ? shm_ceil_div(nb, chunk) : 1;
  size_t stage = steps == 1 ? nb : chunk; /* what shm_buf picks by */
  if (steps == 1 && lazy)
    return broadcast_lazy(s, op, &k, buf, nb);
  uint64_t g0 = shm_begin(s);
  shm_stream_begin(s, root ? 0 : nb);
  for (size_t i = 0; i < steps; i++) {
    uint64_t g = g0 + i;
    size_t off = i * chunk, len = nb ? shm_min(chunk, nb - off) : 0;
    if (root)
      shm_copy(shm_buf(s, s->rank, g, stage), buf + off, len);
    if (i == 0)
      shm_publish(s, op, g, &k);
    int rc = shm_step(s, op, g, i == 0);
    if (rc != DIST_OK) {
      if (i == 0)
        s->step = g0 + 1;
      return rc;
    }
    if (!root)
      shm_copy_out(s, buf + off, shm_buf(s, op->c->root, g, stage), len);
  }
  s->step = g0 + steps;
  return DIST_OK;
}

/* all_gather and gather share the loop; readers are everyone (all_gather)
 * or the root (gather), writers everyone else. */
typedef struct gather_args {
  const uint8_t *in;
  const dist_tensor *list; /* outputs[0..n) (list form), or NULL */
  uint8_t *flat;           /* all_gather_into_tensor output */
  size_t m;                /* bytes per rank */
  bool read, write;
} gather_args;

static uint8_t *gather_out(const gather_args *a, int j) {
  return a->list ? (uint8_t *)a->list[j].data : a->flat + (size_t)j * a->m;
}

/* Single copy (shm_cma.c): readers pull every piece from the writers'
 * input buffers; the second step keeps those alive until all are done. */
static int gather_direct(dist__shm *s, dist__cpu_op *op, const gather_args *a, const shm_key *k) {
  uint64_t g0 = shm_begin(s);
  int p = (int)(g0 & 1);
  publish_addr(s, p, a->in);
  shm_publish(s, op, g0, k);
  int rc = shm_step(s, op, g0, true);
  s->step = g0 + 1;
  if (rc != DIST_OK)
    return rc;
  for (int j = 0; a->read && j < s->size; j++)
    if (j != s->rank)
      DIST_TRY(dist__shm_cma_read(s, op, j, gather_out(a, j), shm_addrs(s, j, p)[0], a->m));
  if (a->read)
    shm_copy_own(s, gather_out(a, s->rank), a->in, a->m);
  rc = shm_step(s, op, g0 + 1, false);
  s->step = g0 + 2;
  return rc;
}

static int gather_loop(dist__shm *s, dist__cpu_op *op, const gather_args *a, const shm_key *k) {
  if (shm_direct(s, a->m))
    return gather_direct(s, op, a, k);
  uint64_t g0 = shm_begin(s);
  size_t chunk = shm_chunk(s, a->m, s->slot);
  size_t steps = a->m ? shm_ceil_div(a->m, chunk) : 1;
  size_t stage = steps == 1 ? a->m : chunk;
  shm_stream_begin(s, a->read ? a->m * (size_t)s->size : 0);
  for (size_t i = 0; i < steps; i++) {
    uint64_t g = g0 + i;
    size_t off = i * chunk, len = a->m ? shm_min(chunk, a->m - off) : 0;
    if (a->write)
      shm_copy(shm_buf(s, s->rank, g, stage), a->in + off, len);
    if (i == 0)
      shm_publish(s, op, g, k);
    int rc = shm_step(s, op, g, i == 0);
    if (rc != DIST_OK) {
      if (i == 0)
        s->step = g0 + 1;
      return rc;
    }
    for (int j = 0; a->read && j < s->size; j++)
      if (j != s->rank)
        shm_copy_out(s, gather_out(a, j) + off, shm_buf(s, j, g, stage), len);
    if (a->read) /* this rank's own chunk, while it is still in cache */
      shm_copy_own(s, gather_out(a, s->rank) + off, a->in + off, len);
  }
  s->step = g0 + steps;
  return DIST_OK;
}

int dist__shm_all_gather(dist__shm *s, dist__cpu_op *op) {
  const dist_coll *c = op->c;
  const dist_tensor *in = &c->inputs[0];
  gather_args a = {in->data, NULL, NULL, dist_tensor_nbytes(in), true, true};
  if (c->kind == DIST_OP_ALL_GATHER)
    a.list = c->outputs;
  else
    a.flat = c->outputs[0].data;
  shm_key k = copy_key(c, in->dtype, dist_tensor_numel(in), false);
  return gather_loop(s, op, &a, &k);
}

int dist__shm_gather(dist__shm *s, dist__cpu_op *op) {
  const dist_coll *c = op->c;
  const dist_tensor *in = &c->inputs[0];
  bool root = c->root == s->rank;
  gather_args a = {in->data, root ? c->outputs : NULL, NULL, dist_tensor_nbytes(in), root, !root};
  shm_key k = copy_key(c, in->dtype, dist_tensor_numel(in), true);
  return gather_loop(s, op, &a, &k);
}

/* Where the root stages rank j's piece: a sub-slot of its own polled
 * line (small), else rank j's slot. */
static uint8_t *scatter_slot(const dist__shm *s, int root, bool inl, int j, uint64_t g,
                             size_t m) {
  if (inl)
    return s->peer[root].hdr[SHM_L(g)]->inl + (size_t)shm_sub(root, j, s->size) * m;
  return s->peer[j].data[g & 1];
}

/* One staged step with a deferred wait, as a small broadcast: the root
 * stages every piece and returns, each reader waits for the root alone. */
static int scatter_lazy(dist__shm *s, dist__cpu_op *op, const shm_key *k, bool inl, size_t m) {
  const dist_coll *c = op->c;
  uint64_t g = s->op_base;
  for (int j = 0; c->root == s->rank && j < s->size; j++)
    if (j != s->rank)
      shm_copy(scatter_slot(s, c->root, inl, j, g, m), c->inputs[j].data, m);
  int rc = lazy_step(s, op, g, k);
  if (rc != DIST_OK)
    return rc;
  if (c->root != s->rank)
    shm_copy_out(s, c->outputs[0].data, scatter_slot(s, c->root, inl, s->rank, g, m), m);
  else
    shm_copy_own(s, c->outputs[0].data, c->inputs[s->rank].data, m);
  return DIST_OK;
}

int dist__shm_scatter(dist__shm *s, dist__cpu_op *op) {
  const dist_coll *c = op->c;
  const dist_tensor *o = &c->outputs[0];
  uint8_t *out = o->data;
  size_t m = dist_tensor_nbytes(o);
  bool root = c->root == s->rank;
  shm_key k = copy_key(c, o->dtype, dist_tensor_numel(o), true);
  uint64_t g0 = shm_begin(s);
  size_t chunk = shm_chunk(s, m, s->slot);
  size_t steps = m ? shm_ceil_div(m, chunk) : 1;
  /* Small: every piece in the root's own polled line, in sub-slots. */
  bool inl = steps == 1 && (size_t)(s->size - 1) * m <= SHM_INLINE;
  shm_stream_begin(s, m); /* every rank writes m bytes of output */
  if (steps == 1 && s->size > 1)
    return scatter_lazy(s, op, &k, inl, m);
  for (size_t i = 0; i < steps; i++) {
    uint64_t g = g0 + i;
    size_t off = i * chunk, len = m ? shm_min(chunk, m - off) : 0;
    for (int j = 0; root && j < s->size; j++)
      if (j != s->rank)
        shm_copy(scatter_slot(s, c->root, inl, j, g, m), (const uint8_t *)c->inputs[j].data + off, len);
    if (i == 0)
      shm_publish(s, op, g, &k);
    int rc = shm_step(s, op, g, i == 0);
    if (rc != DIST_OK) {
      if (i == 0)
        s->step = g0 + 1;
      return rc;
    }
    if (!root)
      shm_copy_out(s, out + off, scatter_slot(s, c->root, inl, s->rank, g, m), len);
    else
      shm_copy_own(s, out + off, (const uint8_t *)c->inputs[s->rank].data + off, len);
  }
  s->step = g0 + steps;
  return DIST_OK;
}
