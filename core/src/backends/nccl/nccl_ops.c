/* nccl_ops.c - each operation of the vtable as NCCL calls on the group's
 * stream (the mapping the fake-table tests check):
 *   SEND / RECV              ncclSend / ncclRecv (no receive from any source)
 *   BATCH_P2P                the sends and receives in one NCCL group
 *   BROADCAST, ALL_REDUCE, REDUCE, ALL_GATHER_INTO_TENSOR,
 *   REDUCE_SCATTER_TENSOR    their NCCL collective
 *   ALL_GATHER (list)        grouped ncclBroadcast from every rank
 *   REDUCE_SCATTER (list)    grouped ncclReduce to every rank
 *   GATHER, SCATTER,
 *   ALL_TO_ALL(_SINGLE)      grouped ncclSend/ncclRecv
 *   BARRIER                  a one-element ncclAllReduce
 * Tags mean nothing to NCCL (as in torch): matching is by order. */
#include <stdio.h>

#include "nccl_map.h"

static int nccl_failed(const dist__nccl_ctx *x, const dist_coll *c, ncclResult_t e,
                       const char *call, dist__errbuf *err) {
  char d[160];
  return dist__err_set(err, DIST_E_BACKEND, "%s on group %s: %s failed: %s",
                       dist_coll_describe(c, d, sizeof d), x->name, call,
                       x->api->GetErrorString(e));
}

#define NCALL(x, c, err, call, ...)                                   \
  do {                                                                \
    ncclResult_t e_ = (x)->api->call(__VA_ARGS__);                    \
    if (e_ != ncclSuccess && e_ != ncclInProgress)                    \
      return nccl_failed((x), (c), e_, "nccl" #call, (err));          \
  } while (0)

static int send_t(const dist__nccl_ctx *x, const dist_coll *c, const void *p, const dist_tensor *t,
                  size_t n_of, int peer, dist__errbuf *err) {
  ncclDataType_t ty;
  size_t n;
  dist__nccl_move_type(t, &ty, &n);
  if (n_of != (size_t)-1)
    n = n_of;
  NCALL(x, c, err, Send, p, n, ty, peer, x->comm, x->stream);
  return DIST_OK;
}

static int recv_t(const dist__nccl_ctx *x, const dist_coll *c, void *p, const dist_tensor *t,
                  size_t n_of, int peer, dist__errbuf *err) {
  ncclDataType_t ty;
  size_t n;
  dist__nccl_move_type(t, &ty, &n);
  if (n_of != (size_t)-1)
    n = n_of;
  NCALL(x, c, err, Recv, p, n, ty, peer, x->comm, x->stream);
  return DIST_OK;
}

#define WHOLE ((size_t)-1)

static int reduction(const dist__nccl_ctx *x, const dist_coll *c, dist__errbuf *err) {
  const dist_tensor *t = c->kind == DIST_OP_REDUCE_SCATTER || c->kind == DIST_OP_REDUCE_SCATTER_TENSOR
                             ? &c->outputs[0] : &c->inputs[0];
  dist__nccl_redop r;
  DIST_TRY(dist__nccl_reduce_type(t, c->redop, &r, err));
  ncclRedOp_t op;
  bool created;
  DIST_TRY(dist__nccl_make_op(x->api, x->comm, &r, &op, &created, err));
  ncclResult_t e = ncclSuccess;
  const char *call = "";
  switch (c->kind) {
  case DIST_OP_ALL_REDUCE:
    call = "ncclAllReduce";
    e = x->api->AllReduce(c->inputs[0].data, c->outputs[0].data, r.count, r.type, op, x->comm,
                          x->stream);
    break;
  case DIST_OP_REDUCE:
    call = "ncclReduce";
    e = x->api->Reduce(c->inputs[0].data, c->outputs[0].data, r.count, r.type, op, c->root,
                       x->comm, x->stream);
    break;
  case DIST_OP_REDUCE_SCATTER_TENSOR:
    call = "ncclReduceScatter";
    e = x->api->ReduceScatter(c->inputs[0].data, c->outputs[0].data, r.count, r.type, op, x->comm,
                              x->stream);
    break;
  default: /* REDUCE_SCATTER of a list: rank k's block reduced to rank k */
    call = "ncclReduce";
    x->api->GroupStart();
    for (int k = 0; k < x->size && (e == ncclSuccess || e == ncclInProgress); k++)
      e = x->api->Reduce(c->inputs[k].data, c->outputs[0].data, r.count, r.type, op, k, x->comm,
                         x->stream);
    ncclResult_t g = x->api->GroupEnd();
    if (e == ncclSuccess || e == ncclInProgress) {
      e = g;
      call = "ncclGroupEnd";
    }
  }
  if (created)
    x->api->RedOpDestroy(op, x->comm);
  if (e != ncclSuccess && e != ncclInProgress)
    return nccl_failed(x, c, e, call, err);
  return DIST_OK;
}

/* Everything between ncclGroupStart and ncclGroupEnd. */
static int grouped_body(const dist__nccl_ctx *x, const dist_coll *c, dist__errbuf *err) {
  int me = x->rank;
  switch (c->kind) {
  case DIST_OP_BATCH_P2P:
    for (size_t i = 0; i < c->n_p2p; i++) {
      const dist_coll_p2p *p = &c->p2p[i];
      DIST_TRY(p->is_send ? send_t(x, c, p->tensor.data, &p->tensor, WHOLE, p->peer, err)
                          : recv_t(x, c, p->tensor.data, &p->tensor, WHOLE, p->peer, err));
    }
    return DIST_OK;
  case DIST_OP_ALL_GATHER:
    for (int k = 0; k < x->size; k++) {
      ncclDataType_t ty;
      size_t n;
      dist__nccl_move_type(&c->outputs[k], &ty, &n);
      NCALL(x, c, err, Broadcast, k == me ? c->inputs[0].data : c->outputs[k].data,
            c->outputs[k].data, n, ty, k, x->comm, x->stream);
    }
    return DIST_OK;
  case DIST_OP_GATHER:
    if (me == c->root)
      for (int k = 0; k < x->size; k++)
        DIST_TRY(recv_t(x, c, c->outputs[k].data, &c->outputs[k], WHOLE, k, err));
    return send_t(x, c, c->inputs[0].data, &c->inputs[0], WHOLE, c->root, err);
  case DIST_OP_SCATTER:
    if (me == c->root)
      for (int k = 0; k < x->size; k++)
        DIST_TRY(send_t(x, c, c->inputs[k].data, &c->inputs[k], WHOLE, k, err));
    return recv_t(x, c, c->outputs[0].data, &c->outputs[0], WHOLE, c->root, err);
  case DIST_OP_ALL_TO_ALL:
    for (int k = 0; k < x->size; k++) {
      DIST_TRY(send_t(x, c, c->inputs[k].data, &c->inputs[k], WHOLE, k, err));
      DIST_TRY(recv_t(x, c, c->outputs[k].data, &c->outputs[k], WHOLE, k, err));
    }
    return DIST_OK;
  default: { /* ALL_TO_ALL_SINGLE: rows along dim 0, moved as bytes */
    const dist_tensor *in = &c->inputs[0], *out = &c->outputs[0];
    int64_t in_rows = in->ndim ? in->shape[0] : 1, out_rows = out->ndim ? out->shape[0] : 1;
    size_t in_row = in_rows ? dist_tensor_nbytes(in) / (size_t)in_rows : 0;
    size_t out_row = out_rows ? dist_tensor_nbytes(out) / (size_t)out_rows : 0;
    size_t ioff = 0, ooff = 0;
    dist_tensor bytes = *in;
    bytes.dtype = DIST_UINT8;
    for (int k = 0; k < x->size; k++) {
      size_t ni = (size_t)(c->in_splits ? c->in_splits[k] : in_rows / x->size) * in_row;
      size_t no = (size_t)(c->out_splits ? c->out_splits[k] : out_rows / x->size) * out_row;
      DIST_TRY(send_t(x, c, (char *)in->data + ioff, &bytes, ni, k, err));
      DIST_TRY(recv_t(x, c, (char *)out->data + ooff, &bytes, no, k, err));
      ioff += ni;
      ooff += no;
    }
    return DIST_OK;
  }
  }
}

int dist__nccl_enqueue(const dist__nccl_ctx *x, const dist_coll *c, dist__errbuf *err) {
  ncclDataType_t ty;
  size_t n;
  switch (c->kind) {
  case DIST_OP_SEND:
    return send_t(x, c, c->inputs[0].data, &c->inputs[0], WHOLE, c->root, err);
  case DIST_OP_RECV:
    if (c->root == DIST_ANY_SOURCE)
      return dist__err_set(err, DIST_E_NOTSUP, "group %s: NCCL cannot receive from any source",
                           x->name);
    return recv_t(x, c, c->outputs[0].data, &c->outputs[0], WHOLE, c->root, err);
  case DIST_OP_BROADCAST:
    dist__nccl_move_type(&c->outputs[0], &ty, &n);
    NCALL(x, c, err, Broadcast, c->inputs[0].data, c->outputs[0].data, n, ty, c->root, x->comm,
          x->stream);
    return DIST_OK;
  case DIST_OP_ALL_GATHER_INTO_TENSOR:
    dist__nccl_move_type(&c->inputs[0], &ty, &n);
    NCALL(x, c, err, AllGather, c->inputs[0].data, c->outputs[0].data, n, ty, x->comm, x->stream);
    return DIST_OK;
  case DIST_OP_ALL_REDUCE:
  case DIST_OP_REDUCE:
  case DIST_OP_REDUCE_SCATTER:
  case DIST_OP_REDUCE_SCATTER_TENSOR:
    return reduction(x, c, err);
  case DIST_OP_BARRIER:
    NCALL(x, c, err, AllReduce, x->barrier_buf, x->barrier_buf, 1, ncclFloat32, ncclSum, x->comm,
          x->stream);
    return DIST_OK;
  case DIST_OP_BATCH_P2P:
  case DIST_OP_ALL_GATHER:
  case DIST_OP_GATHER:
  case DIST_OP_SCATTER:
  case DIST_OP_ALL_TO_ALL:
  case DIST_OP_ALL_TO_ALL_SINGLE: {
    NCALL(x, c, err, GroupStart);
    int rc = grouped_body(x, c, err);
    ncclResult_t e = x->api->GroupEnd();
    if (rc != DIST_OK)
      return rc;
    if (e != ncclSuccess && e != ncclInProgress)
      return nccl_failed(x, c, e, "ncclGroupEnd", err);
    return DIST_OK;
  }
  default:
    return dist__err_set(err, DIST_E_NOTSUP, "group %s: the nccl backend has no %s", x->name,
                         dist_op_name(c->kind));
  }
}
