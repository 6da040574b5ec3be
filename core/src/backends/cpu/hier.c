/* hier.c - hierarchical collectives for groups that span hosts (hier.h):
 * the placement, the two sub-groups and their engines, and the schedules. */
#include <stdio.h>

#include "hier.h"
#include "reduce/reduce.h"
#include "shm.h"
#include "tcp.h"

struct dist__hier {
  dist__cpu_group *g;
  int nhosts, host, lrank, lsize, maxl;
  int *host_of;  /* group rank -> host index */
  int *lrank_of; /* group rank -> local rank */
  int *lsize_of; /* host index -> number of local ranks */
  dist__cpu_group local, leaders;
  dist_store *lstore, *xstore;
  dist__shm *shm; /* NULL when alone on the host */
  dist__tcp *tcp; /* NULL off the leaders, or with one host */
  uint8_t *scratch[2];
  size_t scratch_len[2];
};

/* --- placement --------------------------------------------------------------- */

static int place(dist__hier *h, dist__errbuf *err) {
  dist__cpu_group *g = h->g;
  int n = g->size;
  h->host_of = dist__calloc((size_t)n, sizeof(int));
  h->lrank_of = dist__calloc((size_t)n, sizeof(int));
  h->lsize_of = dist__calloc((size_t)n, sizeof(int));
  if (!h->host_of || !h->lrank_of || !h->lsize_of)
    return dist__err_set(err, DIST_E_NOMEM, "out of memory");
  for (int r = 0; r < n; r++) {
    int first = r;
    for (int q = 0; q < r; q++)
      if (!strcmp(g->peers[q].host_id, g->peers[r].host_id)) {
        first = q;
        break;
      }
    h->host_of[r] = first == r ? h->nhosts++ : h->host_of[first];
    h->lrank_of[r] = h->lsize_of[h->host_of[r]]++;
  }
  h->host = h->host_of[g->rank];
  h->lrank = h->lrank_of[g->rank];
  h->lsize = h->lsize_of[h->host];
  for (int k = 0; k < h->nhosts; k++)
    h->maxl = h->lsize_of[k] > h->maxl ? h->lsize_of[k] : h->maxl;
  return DIST_OK;
}

/* The group rank of local rank l of host k. */
static int member(const dist__hier *h, int k, int l) {
  for (int r = 0; r < h->g->size; r++)
    if (h->host_of[r] == k && h->lrank_of[r] == l)
      return r;
  return -1;
}

static void sub_lost(void *arg, int sub_rank, const char *why) {
  (void)sub_rank;
  dist__cpu_group *g = arg;
  /* The sub-group's member is named by the message; the parent learns of
   * the peer itself through its own TCP engine. */
  DIST_LOG(WARNING, PG, "group %s: a hierarchical stage lost a peer: %s", g->name, why);
}

/* A sub-group of g: members[0..size) are group ranks of g. */
static int sub_group(dist__hier *h, dist__cpu_group *s, const int *members, int size, int me,
                     const char *suffix, dist__errbuf *err) {
  dist__cpu_group *g = h->g;
  s->rank = me;
  s->size = size;
  s->global_rank = g->global_rank;
  s->group_id = g->group_id;
  s->timeout_ms = g->timeout_ms;
  s->transport = g->transport;
  snprintf(s->name, sizeof s->name, "%.100s/%s", g->name, suffix);
  snprintf(s->job_id, sizeof s->job_id, "%s", g->job_id);
  snprintf(s->token, sizeof s->token, "%s", g->token);
  s->global_ranks = dist__calloc((size_t)size, sizeof(int));
  s->peers = dist__calloc((size_t)size, sizeof *s->peers);
  if (!s->global_ranks || !s->peers)
    return dist__err_set(err, DIST_E_NOMEM, "out of memory");
  s->same_host = true;
  for (int i = 0; i < size; i++) {
    const dist__cpu_peer *p = &g->peers[members[i]];
    s->global_ranks[i] = g->global_ranks[members[i]];
    s->peers[i].global_rank = p->global_rank;
    s->peers[i].pid = p->pid;
    memcpy(s->peers[i].host, p->host, sizeof p->host);
    memcpy(s->peers[i].host_id, p->host_id, sizeof p->host_id);
    s->same_host &= !strcmp(p->host_id, g->peers[members[0]].host_id);
  }
  s->on_peer_lost = sub_lost;
  s->on_peer_lost_arg = g;
  s->on_connect = g->on_connect; /* the leaders' connections are the group's */
  s->on_connect_arg = g->on_connect_arg;
  return DIST_OK;
}

static int sub_store(dist_store *store, const char *prefix, dist_store **out,
                     dist__errbuf *err) {
  int rc = dist_store_prefix_create(prefix, store, DIST_STORE_BORROW, out);
  return rc ? dist__err_set(err, rc, "cannot make the store of %s", prefix) : DIST_OK;
}

static int engines(dist__hier *h, dist_store *store, int64_t deadline, dist__errbuf *err) {
  int *m = dist__calloc((size_t)h->g->size, sizeof(int));
  if (!m)
    return dist__err_set(err, DIST_E_NOMEM, "out of memory");
  char sfx[32];
  for (int l = 0; l < h->lsize; l++)
    m[l] = member(h, h->host, l);
  snprintf(sfx, sizeof sfx, "host%d", h->host);
  int rc = sub_group(h, &h->local, m, h->lsize, h->lrank, sfx, err);
  if (rc == DIST_OK && h->lsize > 1)
    rc = sub_store(store, sfx, &h->lstore, err);
  if (rc == DIST_OK && h->lsize > 1)
    rc = dist__shm_create(&h->local, h->lstore, deadline, &h->shm, err);
  for (int k = 0; k < h->nhosts; k++)
    m[k] = member(h, k, 0);
  if (rc == DIST_OK && h->lrank == 0)
    rc = sub_group(h, &h->leaders, m, h->nhosts, h->host, "leaders", err);
  if (rc == DIST_OK && h->lrank == 0 && h->nhosts > 1)
    rc = sub_store(store, "leaders", &h->xstore, err);
  if (rc == DIST_OK && h->lrank == 0 && h->nhosts > 1)
    rc = dist__tcp_create(&h->leaders, h->xstore, deadline, &h->tcp, err);
  dist__free(m);
  return rc;
}

int dist__hier_create(dist__cpu_group *g, dist_store *store, int64_t deadline_ms,
                      dist__hier **out, dist__errbuf *err) {
  dist__hier *h = dist__calloc(1, sizeof *h);
  if (!h)
    return dist__err_set(err, DIST_E_NOMEM, "out of memory");
  h->g = g;
  int rc = place(h, err);
  if (rc == DIST_OK)
    rc = engines(h, store, deadline_ms, err);
  if (rc != DIST_OK) {
    dist__hier_destroy(h);
    return rc;
  }
  DIST_LOG(INFO, PG, "group %s: rank %d on host %d of %d (local rank %d of %d)%s", g->name,
           g->rank, h->host, h->nhosts, h->lrank, h->lsize, h->lrank ? "" : ", host leader");
  *out = h;
  return DIST_OK;
}

static void sub_free(dist__cpu_group *s) {
  dist__free(s->global_ranks);
  dist__free(s->peers);
}

void dist__hier_destroy(dist__hier *h) {
  if (!h)
    return;
  dist__shm_destroy(h->shm);
  dist__tcp_destroy(h->tcp);
  dist_store_destroy(h->lstore);
  dist_store_destroy(h->xstore);
  sub_free(&h->local);
  sub_free(&h->leaders);
  dist__free(h->host_of);
  dist__free(h->lrank_of);
  dist__free(h->lsize_of);
  dist__free(h->scratch[0]);
  dist__free(h->scratch[1]);
  dist__free(h);
}

static void sub_abort(dist__cpu_group *s, const char *reason) {
  if (atomic_load(&s->aborted))
    return;
  snprintf(s->abort_reason, sizeof s->abort_reason, "%s", reason);
  atomic_store(&s->aborted, 1);
}

void dist__hier_abort(dist__hier *h, const char *reason) {
  sub_abort(&h->local, reason);
  sub_abort(&h->leaders, reason);
  if (h->shm)
    dist__shm_wake_all(h->shm);
  if (h->tcp)
    dist__tcp_abort(h->tcp, reason);
}

int dist__hier_tcp_conns(const dist__hier *h) {
  return h->tcp ? dist__tcp_conns(h->tcp) : 0;
}

int dist__hier_nhosts(const dist__hier *h) { return h->nhosts; }

bool dist__hier_handles(dist_op_kind kind) {
  switch (kind) {
  case DIST_OP_ALL_REDUCE:
  case DIST_OP_REDUCE:
  case DIST_OP_REDUCE_SCATTER:
  case DIST_OP_REDUCE_SCATTER_TENSOR:
  case DIST_OP_BROADCAST:
  case DIST_OP_ALL_GATHER:
  case DIST_OP_ALL_GATHER_INTO_TENSOR:
  case DIST_OP_GATHER:
  case DIST_OP_SCATTER:
  case DIST_OP_BARRIER: return true;
  default: return false;
  }
}

/* --- stages -------------------------------------------------------------------- */

static uint8_t *scratch(dist__hier *h, int i, size_t bytes, dist__errbuf *err) {
  if (h->scratch_len[i] < bytes || !h->scratch[i]) {
    dist__free(h->scratch[i]);
    h->scratch_len[i] = 0;
    if (!(h->scratch[i] = dist__malloc(bytes ? bytes : 1))) {
      dist__err_set(err, DIST_E_NOMEM, "out of memory for %zu bytes of scratch", bytes);
      return NULL;
    }
    h->scratch_len[i] = bytes;
  }
  return h->scratch[i];
}

/* One stage: kind on one tensor t (inputs and outputs alike), or on the
 * given lists. */
typedef struct stage {
  dist_op_kind kind;
  dist_redop redop;
  int root;
  const dist_tensor *in;
  size_t n_in;
  const dist_tensor *out;
  size_t n_out;
} stage;

static dist_coll stage_coll(const dist_coll *c, const stage *s) {
  dist_coll x = *c;
  x.kind = s->kind;
  x.redop = s->redop;
  x.root = s->root;
  x.inputs = s->in;
  x.n_inputs = s->n_in;
  x.outputs = s->out;
  x.n_outputs = s->n_out;
  x.in_splits = x.out_splits = NULL;
  x.n_splits = 0;
  return x;
}

static int local_stage(dist__hier *h, dist__cpu_op *op, const stage *s) {
  if (!h->shm)
    return DIST_OK;
  dist_coll x = stage_coll(op->c, s);
  dist__cpu_op o = {&x, DIST_CPU_DEADLINE_LAZY, op->err, -1};
  return dist__shm_run(h->shm, &o);
}

static int leaders_stage(dist__hier *h, dist__cpu_op *op, const stage *s) {
  if (!h->tcp)
    return DIST_OK;
  dist_coll x = stage_coll(op->c, s);
  dist__cpu_op o = {&x, op->deadline_ms, op->err, -1};
  return dist__tcp_run(h->tcp, &o);
}

static stage one(dist_op_kind kind, dist_redop redop, int root, const dist_tensor *t) {
  return (stage){kind, redop, root, t, 1, t, 1};
}

/* t = op(t) for one source: PREMUL_SUM's scaling or AVG's division. */
static int apply(const dist_tensor *t, dist_redop r, size_t n, int divisor, dist__errbuf *err) {
  const void *src = t->data;
  int rc = dist__reduce_multi(t->dtype, r, t->data, &src, 1, n, divisor);
  return rc ? dist__err_set(err, rc, "%s", dist_last_errmsg()) : DIST_OK;
}

/* Reduces t (in place) onto every rank of the group: local reduce to the
 * leader, leaders' all_reduce, local broadcast. */
static int all_reduce_tensor(dist__hier *h, dist__cpu_op *op, const dist_tensor *t) {
  dist_redop r = op->c->redop, local = r, between = r;
  if (r.kind == DIST_REDOP_AVG || r.kind == DIST_REDOP_PREMUL_SUM)
    between = DIST_SUM;
  if (r.kind == DIST_REDOP_AVG)
    local = DIST_SUM;
  size_t n = (size_t)dist_tensor_numel(t);
  stage s = one(DIST_OP_REDUCE, local, 0, t);
  DIST_TRY(local_stage(h, op, &s));
  if (!h->shm && r.kind == DIST_REDOP_PREMUL_SUM) /* alone: scale as the stage would */
    DIST_TRY(apply(t, r, n, 1, op->err));
  if (h->lrank == 0) {
    s = one(DIST_OP_ALL_REDUCE, between, -1, t);
    DIST_TRY(leaders_stage(h, op, &s));
    if (r.kind == DIST_REDOP_AVG)
      DIST_TRY(apply(t, r, n, h->g->size, op->err));
  }
  stage b = one(DIST_OP_BROADCAST, DIST_SUM, 0, t);
  return local_stage(h, op, &b);
}

static int reduce(dist__hier *h, dist__cpu_op *op) {
  const dist_coll *c = op->c;
  const dist_tensor *in = &c->inputs[0];
  size_t bytes = dist_tensor_nbytes(in), n = (size_t)dist_tensor_numel(in);
  int rh = h->host_of[c->root];
  dist_redop r = c->redop, local = r, between = r;
  if (r.kind == DIST_REDOP_AVG || r.kind == DIST_REDOP_PREMUL_SUM)
    between = DIST_SUM;
  if (r.kind == DIST_REDOP_AVG)
    local = DIST_SUM;
  uint8_t *buf = scratch(h, 0, bytes, op->err);
  if (!buf)
    return DIST_E_NOMEM;
  memcpy(buf, in->data, bytes); /* only the root's tensor is written */
  dist_tensor t = *in;
  t.data = buf;
  stage s = one(DIST_OP_REDUCE, local, 0, &t);
  DIST_TRY(local_stage(h, op, &s));
  if (!h->shm && r.kind == DIST_REDOP_PREMUL_SUM)
    DIST_TRY(apply(&t, r, n, 1, op->err));
  if (h->lrank == 0) {
    s = one(DIST_OP_REDUCE, between, rh, &t);
    DIST_TRY(leaders_stage(h, op, &s));
    if (r.kind == DIST_REDOP_AVG && h->host == rh)
      DIST_TRY(apply(&t, r, n, h->g->size, op->err));
  }
  if (h->host == rh && h->lrank_of[c->root] != 0) {
    s = one(DIST_OP_BROADCAST, DIST_SUM, 0, &t);
    DIST_TRY(local_stage(h, op, &s));
  }
  if (h->g->rank == c->root)
    memcpy(in->data, buf, bytes);
  return DIST_OK;
}

static int reduce_scatter(dist__hier *h, dist__cpu_op *op) {
  const dist_coll *c = op->c;
  const dist_tensor *o = &c->outputs[0];
  size_t m = dist_tensor_nbytes(o), n = (size_t)h->g->size;
  uint8_t *buf = scratch(h, 0, m * n, op->err);
  if (!buf)
    return DIST_E_NOMEM;
  for (size_t j = 0; j < n; j++)
    memcpy(buf + j * m, c->kind == DIST_OP_REDUCE_SCATTER ? c->inputs[j].data
                            : (uint8_t *)c->inputs[0].data + j * m, m);
  dist_tensor t = dist_tensor_1d(buf, o->dtype, dist_tensor_numel(o) * (int64_t)n);
  DIST_TRY(all_reduce_tensor(h, op, &t));
  memcpy(o->data, buf + (size_t)h->g->rank * m, m);
  return DIST_OK;
}

static int broadcast(dist__hier *h, dist__cpu_op *op) {
  const dist_coll *c = op->c;
  const dist_tensor *t = &c->inputs[0];
  int rh = h->host_of[c->root];
  stage s = one(DIST_OP_BROADCAST, DIST_SUM, h->lrank_of[c->root], t);
  if (h->host == rh)
    DIST_TRY(local_stage(h, op, &s));
  if (h->lrank == 0) {
    s = one(DIST_OP_BROADCAST, DIST_SUM, rh, t);
    DIST_TRY(leaders_stage(h, op, &s));
  }
  s = one(DIST_OP_BROADCAST, DIST_SUM, 0, t);
  return h->host == rh ? DIST_OK : local_stage(h, op, &s);
}

/* Local gather of this host's inputs into blk (the leader's), in local
 * rank order. */
static int gather_host(dist__hier *h, dist__cpu_op *op, const dist_tensor *in, uint8_t *blk,
                       size_t b) {
  dist_tensor mine = dist_tensor_1d(in->data, DIST_UINT8, (int64_t)b);
  if (!h->shm) {
    memcpy(blk, in->data, b);
    return DIST_OK;
  }
  dist_tensor *outs = NULL;
  if (h->lrank == 0 && !(outs = dist__calloc((size_t)h->lsize, sizeof *outs)))
    return dist__err_set(op->err, DIST_E_NOMEM, "out of memory");
  for (int l = 0; outs && l < h->lsize; l++)
    outs[l] = dist_tensor_1d(blk + (size_t)l * b, DIST_UINT8, (int64_t)b);
  stage s = {DIST_OP_GATHER, DIST_SUM, 0, &mine, 1, outs, outs ? (size_t)h->lsize : 0};
  int rc = local_stage(h, op, &s);
  dist__free(outs);
  return rc;
}

static int all_gather(dist__hier *h, dist__cpu_op *op) {
  const dist_coll *c = op->c;
  size_t b = dist_tensor_nbytes(&c->inputs[0]), blk_len = (size_t)h->maxl * b;
  uint8_t *blk = scratch(h, 0, blk_len, op->err);
  uint8_t *all = blk ? scratch(h, 1, blk_len * (size_t)h->nhosts, op->err) : NULL;
  if (!all)
    return DIST_E_NOMEM;
  DIST_TRY(gather_host(h, op, &c->inputs[0], blk, b));
  dist_tensor tb = dist_tensor_1d(blk, DIST_UINT8, (int64_t)blk_len);
  dist_tensor ta = dist_tensor_1d(all, DIST_UINT8, (int64_t)(blk_len * (size_t)h->nhosts));
  if (h->lrank == 0) {
    stage s = {DIST_OP_ALL_GATHER_INTO_TENSOR, DIST_SUM, -1, &tb, 1, &ta, 1};
    DIST_TRY(leaders_stage(h, op, &s));
  }
  stage s = one(DIST_OP_BROADCAST, DIST_SUM, 0, &ta);
  DIST_TRY(local_stage(h, op, &s));
  for (int r = 0; r < h->g->size; r++) {
    uint8_t *dst = c->kind == DIST_OP_ALL_GATHER ? c->outputs[r].data
                                                 : (uint8_t *)c->outputs[0].data + (size_t)r * b;
    memcpy(dst, all + (size_t)h->host_of[r] * blk_len + (size_t)h->lrank_of[r] * b, b);
  }
  return DIST_OK;
}

/* n uint8 tensors of b bytes at base, base + stride, ... (heap; NULL on
 * failure, with the message in err). */
static dist_tensor *views(uint8_t *base, int n, size_t b, size_t stride, dist__errbuf *err) {
  dist_tensor *v = dist__calloc((size_t)(n > 0 ? n : 1), sizeof *v);
  if (!v) {
    dist__err_set(err, DIST_E_NOMEM, "out of memory");
    return NULL;
  }
  for (int i = 0; i < n; i++)
    v[i] = dist_tensor_1d(base + (size_t)i * stride, DIST_UINT8, (int64_t)b);
  return v;
}

/* Where group rank r's piece lies in the packed layout (hosts' blocks of
 * maxl pieces, in host order). */
static size_t packed_at(const dist__hier *h, int r, size_t b) {
  return ((size_t)h->host_of[r] * (size_t)h->maxl + (size_t)h->lrank_of[r]) * b;
}

/* gather: local gathers to the leaders, leaders' gather to the root's host,
 * whose leader hands the packed result to the root (a local broadcast
 * when the root is not the leader). */
static int gather(dist__hier *h, dist__cpu_op *op) {
  const dist_coll *c = op->c;
  size_t b = dist_tensor_nbytes(&c->inputs[0]), blk_len = (size_t)h->maxl * b;
  int rh = h->host_of[c->root];
  uint8_t *blk = scratch(h, 0, blk_len, op->err);
  uint8_t *all = blk ? scratch(h, 1, blk_len * (size_t)h->nhosts, op->err) : NULL;
  if (!all)
    return DIST_E_NOMEM;
  DIST_TRY(gather_host(h, op, &c->inputs[0], blk, b));
  dist_tensor tb = dist_tensor_1d(blk, DIST_UINT8, (int64_t)blk_len);
  if (h->lrank == 0) {
    dist_tensor *outs = h->host == rh ? views(all, h->nhosts, blk_len, blk_len, op->err) : NULL;
    if (h->host == rh && !outs)
      return DIST_E_NOMEM;
    stage s = {DIST_OP_GATHER, DIST_SUM, rh, &tb, 1, outs, outs ? (size_t)h->nhosts : 0};
    int rc = leaders_stage(h, op, &s);
    dist__free(outs);
    DIST_TRY(rc);
  }
  if (h->host == rh && h->lrank_of[c->root] != 0) {
    dist_tensor ta = dist_tensor_1d(all, DIST_UINT8, (int64_t)(blk_len * (size_t)h->nhosts));
    stage s = one(DIST_OP_BROADCAST, DIST_SUM, 0, &ta);
    DIST_TRY(local_stage(h, op, &s));
  }
  for (int r = 0; h->g->rank == c->root && r < h->g->size; r++)
    memcpy(c->outputs[r].data, all + packed_at(h, r, b), b);
  return DIST_OK;
}

/* scatter: the root's pieces reach its host's leader (packed by the root
 * when it leads, else broadcast from the root over its host), the leaders'
 * scatter gives each leader its host's block, and a local scatter each
 * rank its piece (ranks of the root's host read theirs from the packed
 * copy they already hold). */
static int scatter(dist__hier *h, dist__cpu_op *op) {
  const dist_coll *c = op->c;
  size_t b = dist_tensor_nbytes(&c->outputs[0]), blk_len = (size_t)h->maxl * b;
  int rh = h->host_of[c->root];
  bool root_leads = h->lrank_of[c->root] == 0, bcast = h->host == rh && !root_leads;
  uint8_t *blk = scratch(h, 0, blk_len, op->err);
  uint8_t *all = blk ? scratch(h, 1, blk_len * (size_t)h->nhosts, op->err) : NULL;
  if (!all)
    return DIST_E_NOMEM;
  for (int r = 0; h->g->rank == c->root && r < h->g->size; r++)
    memcpy(all + packed_at(h, r, b), c->inputs[r].data, b);
  if (bcast) {
    dist_tensor ta = dist_tensor_1d(all, DIST_UINT8, (int64_t)(blk_len * (size_t)h->nhosts));
    stage s = one(DIST_OP_BROADCAST, DIST_SUM, h->lrank_of[c->root], &ta);
    DIST_TRY(local_stage(h, op, &s));
  }
  dist_tensor tb = dist_tensor_1d(blk, DIST_UINT8, (int64_t)blk_len);
  if (h->lrank == 0) {
    dist_tensor *ins = h->host == rh ? views(all, h->nhosts, blk_len, blk_len, op->err) : NULL;
    if (h->host == rh && !ins)
      return DIST_E_NOMEM;
    stage s = {DIST_OP_SCATTER, DIST_SUM, rh, ins, ins ? (size_t)h->nhosts : 0, &tb, 1};
    int rc = leaders_stage(h, op, &s);
    dist__free(ins);
    DIST_TRY(rc);
  }
  if (bcast) {
    memcpy(c->outputs[0].data, all + packed_at(h, h->g->rank, b), b);
    return DIST_OK;
  }
  if (!h->shm) {
    memcpy(c->outputs[0].data, blk, b);
    return DIST_OK;
  }
  dist_tensor *ins = h->lrank == 0 ? views(blk, h->lsize, b, b, op->err) : NULL;
  if (h->lrank == 0 && !ins)
    return DIST_E_NOMEM;
  dist_tensor mine = dist_tensor_1d(c->outputs[0].data, DIST_UINT8, (int64_t)b);
  stage s = {DIST_OP_SCATTER, DIST_SUM, 0, ins, ins ? (size_t)h->lsize : 0, &mine, 1};
  int rc = local_stage(h, op, &s);
  dist__free(ins);
  return rc;
}

static int barrier(dist__hier *h, dist__cpu_op *op) {
  stage s = {DIST_OP_BARRIER, DIST_SUM, -1, NULL, 0, NULL, 0};
  DIST_TRY(local_stage(h, op, &s));
  if (h->lrank == 0)
    DIST_TRY(leaders_stage(h, op, &s));
  return local_stage(h, op, &s);
}

static int dispatch(dist__hier *h, dist__cpu_op *op) {
  switch (op->c->kind) {
  case DIST_OP_ALL_REDUCE: return all_reduce_tensor(h, op, &op->c->inputs[0]);
  case DIST_OP_REDUCE: return reduce(h, op);
  case DIST_OP_REDUCE_SCATTER:
  case DIST_OP_REDUCE_SCATTER_TENSOR: return reduce_scatter(h, op);
  case DIST_OP_BROADCAST: return broadcast(h, op);
  case DIST_OP_ALL_GATHER:
  case DIST_OP_ALL_GATHER_INTO_TENSOR: return all_gather(h, op);
  case DIST_OP_GATHER: return gather(h, op);
  case DIST_OP_SCATTER: return scatter(h, op);
  case DIST_OP_BARRIER: return barrier(h, op);
  default:
    return dist__err_set(op->err, DIST_E_INTERNAL, "%s is not hierarchical",
                         dist_op_name(op->c->kind));
  }
}

int dist__hier_run(dist__hier *h, dist__cpu_op *op) {
  int rc = dist__cpu_check_state(h->g, op->err);
  if (rc == DIST_OK)
    rc = dispatch(h, op);
  if (rc != DIST_OK && rc != DIST_E_ABORTED) {
    /* The hosts are out of step now: release the other leaders at once,
     * and fail every later operation on this group with this message. */
    if (h->tcp)
      dist__tcp_abort(h->tcp, op->err->msg);
    dist__cpu_mark_broken(h->g, rc, op->err->msg);
  }
  return rc;
}
