/* coll_api.c - the public operations: each builds a dist_coll (recording its
 * caller's return address, one instruction), translates global ranks to
 * group ranks, and hands it to dist__pg_call. Nothing here allocates on the
 * synchronous path. */
#include <stdatomic.h>
#include <stdio.h>

#include "api.h"

#define CALLER() __builtin_return_address(0)

/* The calls this process made on a group it is not a member of: how many,
 * and the last one's kind and caller (dist__pg_non_member_calls). */
static _Atomic uint64_t nm_calls;
static _Atomic int nm_kind;
static _Atomic(const void *) nm_caller;

uint64_t dist__pg_non_member_calls(dist_op_kind *kind, const void **caller) {
  uint64_t n = atomic_load(&nm_calls);
  if (kind)
    *kind = (dist_op_kind)atomic_load(&nm_kind);
  if (caller)
    *caller = atomic_load(&nm_caller);
  return n;
}

/* Resolves the group; DIST_OK with *done set for a non-member (torch warns
 * and returns), a completed work handle when one was asked for. k and
 * caller: the call, noted for the checking layer when it does nothing. */
static int enter(dist_pg **g, dist_work **w, bool *done, dist_op_kind k, const void *caller) {
  *done = false;
  dist_pg *r = dist__pg_resolve_op(*g, k, caller); /* a dead handle: refused, and heard */
  if (!r)
    return DIST_E_INVAL;
  if (r == DIST_GROUP_NON_MEMBER) {
    *done = true;
    atomic_store(&nm_kind, (int)k);
    atomic_store(&nm_caller, caller);
    atomic_fetch_add(&nm_calls, 1);
    /* Legal, and a no-op as in torch, but most often a rank that picked
     * the wrong group: said once (as torch's warning is), then at DEBUG. */
    static atomic_bool said;
    if (!atomic_exchange(&said, true))
      DIST_LOG(WARNING, PG, "an operation (%s) on a group this rank is not a member of did "
               "nothing (as in torch); if this rank should take part, it passed the wrong group "
               "(further such calls are logged at DEBUG)", dist_op_name(k));
    else
      DIST_LOG(DEBUG, PG, "operation (%s) on a group this rank is not a member of: nothing to do",
               dist_op_name(k));
    if (w)
      return dist__work_new_done(r, DIST_OK, w);
    return DIST_OK;
  }
  *g = r;
  dist__err_clear(&r->err); /* a new call: the last call's message goes */
  if (w)
    *w = NULL;
  return DIST_OK;
}

/* "g1 (dp, size 4)": the group's name, with the description the user gave
 * it (a mesh dimension's name) when it has one. */
static const char *group_words(const dist_pg *g, char *buf, size_t len) {
  const char *d = g->info.desc;
  if (d && d[0] && strcmp(d, g->name))
    snprintf(buf, len, "%s (%s, size %d)", g->name, d, g->info.size);
  else
    snprintf(buf, len, "%s (size %d)", g->name, g->info.size);
  return buf;
}

/* A rank at or above DIST_GROUP_RANK_BASE is DIST_GROUP_RANK(r): r is
 * already a group rank (torch 2.6's group_dst/group_src/group_peer). */
static int group_rank(dist_pg *g, int global, const char *fn, const char *what, int *out) {
  char gw[192];
  if (global >= DIST_GROUP_RANK_BASE) {
    int64_t gr = (int64_t)global - DIST_GROUP_RANK_BASE;
    if (gr >= g->info.size)
      return dist__err_set(&g->err, DIST_E_INVAL, "%s: %s group rank %lld is not in group %s",
                           fn, what, (long long)gr, group_words(g, gw, sizeof gw));
    *out = (int)gr;
    return DIST_OK;
  }
  int r = dist__pg_group_rank_of(g, global);
  if (r < 0)
    return dist__err_set(&g->err, DIST_E_INVAL, "%s: %s rank %d is not in group %s", fn, what,
                         global, group_words(g, gw, sizeof gw));
  *out = r;
  return DIST_OK;
}

/* A root or peer outside the group refuses the call as validate.c's
 * checks do (pg.c: logged, and observers hear of it). */
#define REFUSE_UNLESS(g, c, call)               \
  do {                                          \
    int refuse_rc_ = (call);                    \
    if (refuse_rc_ != DIST_OK)                  \
      return dist__pg_reject((g), (c), refuse_rc_); \
  } while (0)

#define ENTER(g, w, k, caller)                            \
  do {                                                    \
    bool done_;                                           \
    int enter_rc_ = enter(&(g), (w), &done_, (k), (caller)); \
    if (enter_rc_ != DIST_OK || done_)               \
      return enter_rc_;                              \
  } while (0)

static dist_coll coll_of(dist_op_kind k, const void *caller) {
  dist_coll c;
  memset(&c, 0, sizeof c);
  c.kind = k;
  c.root = -1;
  c.caller = caller;
  return c;
}

/* --- point to point ------------------------------------------------------ */

static int p2p(dist_op_kind k, dist_tensor *t, int peer, dist_pg *g, int tag, dist_work **w,
               bool blocking, const void *caller) {
  ENTER(g, w, k, caller);
  dist_coll c = coll_of(k, caller);
  c.tag = tag;
  if (k == DIST_OP_SEND) {
    c.inputs = t;
    c.n_inputs = 1;
  } else {
    c.outputs = t;
    c.n_outputs = 1;
  }
  if (peer != DIST_ANY_SOURCE || k == DIST_OP_SEND)
    REFUSE_UNLESS(g, &c, group_rank(g, peer, dist_op_name(k), "peer", &c.root));
  if (blocking && c.root == g->info.rank) /* it would wait for itself */
    return dist__pg_reject(g, &c, dist__err_set(&g->err, DIST_E_INVAL, "%s: the peer is this "
                           "rank itself (isend and irecv may address it)", dist_op_name(k)));
  if (w)
    c.flags |= DIST_COLL_ASYNC | (blocking ? DIST_COLL_WAITED : 0);
  return dist__pg_call(g, &c, w);
}

int dist_send(const dist_tensor *t, int dst, dist_pg *g, int tag) {
  return p2p(DIST_OP_SEND, (dist_tensor *)t, dst, g, tag, NULL, true, CALLER());
}

int dist_isend(const dist_tensor *t, int dst, dist_pg *g, int tag, dist_work **w) {
  if (!w)
    return dist__set_last_error(DIST_E_INVAL, "isend: work is NULL");
  return p2p(DIST_OP_SEND, (dist_tensor *)t, dst, g, tag, w, false, CALLER());
}

int dist_irecv(dist_tensor *t, int src, dist_pg *g, int tag, dist_work **w) {
  if (!w)
    return dist__set_last_error(DIST_E_INVAL, "irecv: work is NULL");
  return p2p(DIST_OP_RECV, t, src, g, tag, w, false, CALLER());
}

int dist_recv(dist_tensor *t, int src, dist_pg *g, int tag, int *src_out) {
  /* A synchronous recv goes through a work handle so the sender's rank
   * comes back with it. */
  dist_work *w = NULL;
  int rc = p2p(DIST_OP_RECV, t, src, g, tag, &w, true, CALLER());
  if (rc != DIST_OK)
    return rc;
  rc = dist_work_synchronize(w, -1); /* synchronous: the host waits, on a GPU too */
  if (rc == DIST_OK && src_out)
    rc = dist_work_source_rank(w, src_out);
  if (rc != DIST_OK) {
    dist_pg *r = dist__pg_resolve(g);
    if (r && r != DIST_GROUP_NON_MEMBER)
      dist__err_set(&r->err, rc, "%s", dist_work_errmsg(w));
  }
  dist_work_free(w);
  return rc;
}

int dist_batch_isend_irecv(const dist_p2p_op *ops, size_t n, dist_work **w) {
  if (!ops || !n)
    return dist__set_last_error(DIST_E_INVAL, "batch_isend_irecv: no operations");
  dist_pg *g = ops[0].group;
  for (size_t i = 1; i < n; i++)
    if (ops[i].group != g)
      return dist__set_last_error(DIST_E_INVAL,
                                  "batch_isend_irecv: op %zu uses another group than op 0", i);
  ENTER(g, w, DIST_OP_BATCH_P2P, CALLER());
  dist_coll_p2p *list = dist__calloc(n, sizeof *list);
  if (!list)
    return dist__err_set(&g->err, DIST_E_NOMEM, "out of memory");
  int rc = DIST_OK;
  for (size_t i = 0; i < n && rc == DIST_OK; i++) {
    if (!ops[i].tensor) {
      rc = dist__err_set(&g->err, DIST_E_INVAL, "batch_isend_irecv: op %zu has no tensor", i);
      break;
    }
    list[i] = (dist_coll_p2p){ops[i].is_send, *ops[i].tensor, -1, ops[i].tag};
    rc = group_rank(g, ops[i].peer, "batch_isend_irecv", "peer", &list[i].peer);
  }
  dist_coll c = coll_of(DIST_OP_BATCH_P2P, CALLER());
  c.p2p = list;
  c.n_p2p = n;
  c.flags = w ? DIST_COLL_ASYNC : 0;
  rc = rc == DIST_OK ? dist__pg_call(g, &c, w) : dist__pg_reject(g, &c, rc);
  dist__free(list);
  return rc;
}

/* --- collectives --------------------------------------------------------- */

static int in_place(dist_op_kind k, dist_tensor *t, int root_global, dist_redop op, dist_pg *g,
                    dist_work **w, const void *caller) {
  ENTER(g, w, k, caller);
  dist_coll c = coll_of(k, caller);
  c.inputs = c.outputs = t;
  c.n_inputs = c.n_outputs = 1;
  c.redop = op;
  if (k != DIST_OP_ALL_REDUCE)
    REFUSE_UNLESS(g, &c, group_rank(g, root_global, dist_op_name(k), "root", &c.root));
  if (w)
    c.flags |= DIST_COLL_ASYNC;
  return dist__pg_call(g, &c, w);
}

int dist_broadcast(dist_tensor *t, int src, dist_pg *g, dist_work **w) {
  return in_place(DIST_OP_BROADCAST, t, src, DIST_SUM, g, w, CALLER());
}

int dist_all_reduce(dist_tensor *t, dist_redop op, dist_pg *g, dist_work **w) {
  return in_place(DIST_OP_ALL_REDUCE, t, -1, op, g, w, CALLER());
}

int dist_reduce(dist_tensor *t, int dst, dist_redop op, dist_pg *g, dist_work **w) {
  return in_place(DIST_OP_REDUCE, t, dst, op, g, w, CALLER());
}

/* Everything but the in-place kinds and point to point. */
typedef struct io {
  const dist_tensor *in;
  size_t n_in;
  const dist_tensor *out;
  size_t n_out;
  int root_global; /* -1: none */
  dist_redop op;
  const int64_t *in_splits, *out_splits;
} io;

static int general(dist_op_kind k, const io *a, dist_pg *g, dist_work **w,
                   const void *caller) {
  ENTER(g, w, k, caller);
  dist_coll c = coll_of(k, caller);
  c.inputs = a->in;
  c.n_inputs = a->n_in;
  c.outputs = a->out;
  c.n_outputs = a->n_out;
  c.redop = a->op;
  if (a->root_global >= 0 || k == DIST_OP_GATHER || k == DIST_OP_SCATTER)
    REFUSE_UNLESS(g, &c, group_rank(g, a->root_global, dist_op_name(k), "root", &c.root));
  if (a->in_splits || a->out_splits) {
    c.in_splits = a->in_splits;
    c.out_splits = a->out_splits;
    c.n_splits = (size_t)g->info.size;
  }
  if (w)
    c.flags |= DIST_COLL_ASYNC;
  return dist__pg_call(g, &c, w);
}

int dist_all_gather(dist_tensor *outputs, size_t n, const dist_tensor *input, dist_pg *g,
                    dist_work **w) {
  if (dist__all_gather_is_uneven(outputs, n, input)) /* uneven.c */
    return dist__all_gather_uneven(outputs, n, input, g, w, CALLER());
  io a = {input, 1, outputs, n, -1, DIST_SUM, NULL, NULL};
  return general(DIST_OP_ALL_GATHER, &a, g, w, CALLER());
}

int dist_all_gather_into_tensor(dist_tensor *output, const dist_tensor *input, dist_pg *g,
                                dist_work **w) {
  io a = {input, 1, output, 1, -1, DIST_SUM, NULL, NULL};
  return general(DIST_OP_ALL_GATHER_INTO_TENSOR, &a, g, w, CALLER());
}

int dist_gather(const dist_tensor *input, dist_tensor *list, size_t n, int dst, dist_pg *g,
                dist_work **w) {
  io a = {input, 1, list, n, dst, DIST_SUM, NULL, NULL};
  return general(DIST_OP_GATHER, &a, g, w, CALLER());
}

int dist_scatter(dist_tensor *output, const dist_tensor *list, size_t n, int src, dist_pg *g,
                 dist_work **w) {
  io a = {list, n, output, 1, src, DIST_SUM, NULL, NULL};
  return general(DIST_OP_SCATTER, &a, g, w, CALLER());
}

int dist_reduce_scatter(dist_tensor *output, const dist_tensor *inputs, size_t n, dist_redop op,
                        dist_pg *g, dist_work **w) {
  if (dist__reduce_scatter_is_uneven(output, inputs, n)) /* uneven.c */
    return dist__reduce_scatter_uneven(output, inputs, n, op, g, w, CALLER());
  io a = {inputs, n, output, 1, -1, op, NULL, NULL};
  return general(DIST_OP_REDUCE_SCATTER, &a, g, w, CALLER());
}

int dist_reduce_scatter_tensor(dist_tensor *output, const dist_tensor *input, dist_redop op,
                               dist_pg *g, dist_work **w) {
  io a = {input, 1, output, 1, -1, op, NULL, NULL};
  return general(DIST_OP_REDUCE_SCATTER_TENSOR, &a, g, w, CALLER());
}

int dist_all_to_all(dist_tensor *outputs, size_t n_out, const dist_tensor *inputs, size_t n_in,
                    dist_pg *g, dist_work **w) {
  io a = {inputs, n_in, outputs, n_out, -1, DIST_SUM, NULL, NULL};
  return general(DIST_OP_ALL_TO_ALL, &a, g, w, CALLER());
}

int dist_all_to_all_single(dist_tensor *output, const dist_tensor *input,
                           const int64_t *output_splits, const int64_t *input_splits,
                           dist_pg *g, dist_work **w) {
  io a = {input, 1, output, 1, -1, DIST_SUM, input_splits, output_splits};
  return general(DIST_OP_ALL_TO_ALL_SINGLE, &a, g, w, CALLER());
}

int dist_barrier(dist_pg *g, dist_work **w) {
  io a = {NULL, 0, NULL, 0, -1, DIST_SUM, NULL, NULL};
  return general(DIST_OP_BARRIER, &a, g, w, CALLER());
}
