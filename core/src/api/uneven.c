/* uneven.c - all_gather whose outputs differ in size per rank (torch
 * allows it; Gloo calls it allgatherv), and reduce_scatter whose inputs do
 * (torch's reduce_scatter_v: inputs[i] sized like rank i's output). Rank i's contribution travels as a
 * broadcast from i into outputs[i] on every rank, one per rank in rank
 * order, as pieces of one ALL_GATHER call (one sequence number, one pair
 * of observer events). A rank whose input is not the size the others
 * expect from it fails their broadcast with DIST_E_DESYNC naming it, so a
 * mistake is still caught, only later than the local check of the even
 * case. reduce_scatter is the mirror: one reduce to each rank i of the
 * blocks inputs[i], in rank order, as pieces of one REDUCE_SCATTER call.
 * Synchronous: with a work handle either returns a completed one.
 *
 * Whether a call takes this path is each rank's own reading of its list,
 * so one rank whose list entry differs (outputs[1] of 32 elements where
 * the others pass 64) runs broadcasts where the others run one
 * all_gather. Each piece therefore carries the call (dist_coll.parent,
 * its index in root): the checking layer compares that call, once, as it
 * compares the others' even one, and the transports name the call and
 * the list entry, so no report says BROADCAST, nor another dtype, for the
 * program's all_gather. */
#include <stdio.h>
#include <string.h>

#include "api.h"

bool dist__all_gather_is_uneven(const dist_tensor *outputs, size_t n,
                                const dist_tensor *input) {
  if (!outputs || !input || n < 2)
    return false;
  for (size_t i = 0; i < n; i++)
    if (dist_tensor_numel(&outputs[i]) != dist_tensor_numel(input))
      return true;
  return false;
}

static int check(dist_pg *g, const dist_tensor *outputs, size_t n, const dist_tensor *input) {
  int me = g->info.rank;
  if ((int)n != g->info.size)
    return dist__err_set(&g->err, DIST_E_INVAL, "all_gather: expected %d output tensors (the "
                         "group size), got %zu", g->info.size, n);
  for (size_t i = 0; i < n; i++)
    if (outputs[i].dtype != input->dtype)
      return dist__err_set(&g->err, DIST_E_INVAL, "all_gather: output tensors[%zu] is %s but "
                           "the input is %s", i, dist_dtype_name(outputs[i].dtype),
                           dist_dtype_name(input->dtype));
  if (dist_tensor_numel(&outputs[me]) != dist_tensor_numel(input))
    return dist__err_set(&g->err, DIST_E_INVAL, "all_gather: outputs of different sizes are "
                         "allowed, but this rank's own, output tensors[%d], has %lld elements "
                         "and the input %lld", me, (long long)dist_tensor_numel(&outputs[me]),
                         (long long)dist_tensor_numel(input));
  return DIST_OK;
}

/* A piece's message past its engine's "ALL_GATHER #4: " (the engines label
 * a piece as the user's call, which the message about that call says
 * already). */
static const char *past_label(const char *m, const dist_coll *parent) {
  char label[64];
  int n = snprintf(label, sizeof label, "%s #%llu: ", dist_op_name(parent->kind),
                   (unsigned long long)parent->seq);
  return n > 0 && !strncmp(m, label, (size_t)n) ? m + n : m;
}

/* A piece failed: a desync's report already names the program's call and
 * the entry (the checking layer's, a transport's); any other failure is
 * prefixed with the part it happened in. */
static int piece_failed(dist_pg *g, const dist_coll *parent, int rc, const char *part, int i) {
  if (rc == DIST_E_DESYNC)
    return rc;
  char m[DIST_ERRMSG_LEN];
  snprintf(m, sizeof m, "%s", g->err.msg);
  dist__err_clear(&g->err); /* the first message wins: make room for the fuller one */
  return dist__err_set(&g->err, rc, "%s %d: %s", part, i, past_label(m, parent));
}

static int run(dist_pg *g, const dist_coll *parent, const dist_tensor *outputs,
               const dist_tensor *input) {
  int me = g->info.rank;
  size_t bytes = dist_tensor_nbytes(input);
  if (bytes && outputs[me].data != input->data) {
    if (!outputs[me].data || !input->data)
      return dist__err_set(&g->err, DIST_E_INVAL, "all_gather: NULL data pointer");
    memmove(outputs[me].data, input->data, bytes);
  }
  for (int i = 0; i < g->info.size; i++) {
    dist_tensor t = outputs[i];
    dist_coll c;
    memset(&c, 0, sizeof c);
    c.kind = DIST_OP_BROADCAST;
    c.flags = DIST_COLL_PIECE; /* the checks and their reports name the user's call */
    c.part_of = parent->kind;
    c.root = i;
    c.seq = parent->seq;
    c.ord = parent->ord; // a backend tracks the call by it (nccl)
    c.caller = parent->caller;
    c.parent = parent;
    c.inputs = c.outputs = &t;
    c.n_inputs = c.n_outputs = 1;
    int rc = dist__pg_sub(g, &c);
    if (rc != DIST_OK)
      return piece_failed(g, parent, rc, "all_gather of uneven sizes, the part from group rank",
                          i);
  }
  return DIST_OK;
}

int dist__all_gather_uneven(dist_tensor *outputs, size_t n, const dist_tensor *input,
                            dist_pg *group, dist_work **w, const void *caller) {
  dist_pg *g = dist__pg_resolve_op(group, DIST_OP_ALL_GATHER, caller);
  if (!g)
    return DIST_E_INVAL;
  if (w)
    *w = NULL;
  if (g == DIST_GROUP_NON_MEMBER)
    return w ? dist__work_new_done(g, DIST_OK, w) : DIST_OK;
  dist__err_clear(&g->err);
  DIST_TRY(check(g, outputs, n, input));
  dist_coll c;
  memset(&c, 0, sizeof c);
  c.kind = DIST_OP_ALL_GATHER;
  c.root = -1;
  c.caller = caller;
  c.inputs = input;
  c.n_inputs = 1;
  c.outputs = outputs;
  c.n_outputs = n;
  dist__pg_begin(g, &c);
  int rc = dist__pg_end(g, &c, run(g, &c, outputs, input));
  if (rc == DIST_OK && w)
    rc = dist__work_new_done(g, DIST_OK, w);
  return rc;
}

/* --- reduce_scatter ------------------------------------------------------- */

bool dist__reduce_scatter_is_uneven(const dist_tensor *output, const dist_tensor *inputs,
                                    size_t n) {
  if (!output || !inputs || n < 2)
    return false;
  for (size_t i = 0; i < n; i++)
    if (dist_tensor_numel(&inputs[i]) != dist_tensor_numel(output))
      return true;
  return false;
}

static int rs_check(dist_pg *g, const dist_tensor *output, const dist_tensor *inputs, size_t n) {
  int me = g->info.rank;
  if ((int)n != g->info.size)
    return dist__err_set(&g->err, DIST_E_INVAL, "reduce_scatter: expected %d input tensors (the "
                         "group size), got %zu", g->info.size, n);
  for (size_t i = 0; i < n; i++) {
    if (inputs[i].dtype != output->dtype)
      return dist__err_set(&g->err, DIST_E_INVAL, "reduce_scatter: input tensors[%zu] is %s "
                           "but the output is %s", i, dist_dtype_name(inputs[i].dtype),
                           dist_dtype_name(output->dtype));
    if (inputs[i].device.type != DIST_DEVICE_CPU)
      return dist__err_set(&g->err, DIST_E_NOTSUP, "reduce_scatter: input tensors of "
                           "different sizes are supported on cpu tensors only");
  }
  if (output->device.type != DIST_DEVICE_CPU)
    return dist__err_set(&g->err, DIST_E_NOTSUP, "reduce_scatter: input tensors of different "
                         "sizes are supported on cpu tensors only");
  if (dist_tensor_numel(&inputs[me]) != dist_tensor_numel(output))
    return dist__err_set(&g->err, DIST_E_INVAL, "reduce_scatter: inputs of different sizes are "
                         "allowed, but this rank's own, input tensors[%d], has %lld elements "
                         "and the output %lld", me, (long long)dist_tensor_numel(&inputs[me]),
                         (long long)dist_tensor_numel(output));
  return DIST_OK;
}

/* Block i reduced to rank i: there into output (after copying this rank's
 * block in), elsewhere from a scratch copy, since a reduce may use its
 * tensor as working space and the inputs are the caller's, read-only. The
 * piece's tensor is flat on every rank: a transport compares sizes (the
 * checking layer compares the call itself, through parent, as it
 * compares the even form). */
static int rs_run(dist_pg *g, const dist_coll *parent, dist_tensor *output,
                  const dist_tensor *inputs) {
  int me = g->info.rank;
  size_t es = dist_dtype_size(output->dtype), most = 0;
  for (int i = 0; i < g->info.size; i++)
    if (i != me && dist_tensor_nbytes(&inputs[i]) > most)
      most = dist_tensor_nbytes(&inputs[i]);
  void *scratch = most ? dist__malloc(most) : NULL;
  if (most && !scratch)
    return dist__err_set(&g->err, DIST_E_NOMEM, "reduce_scatter: out of memory");
  int rc = DIST_OK;
  for (int i = 0; i < g->info.size && rc == DIST_OK; i++) {
    size_t bytes = dist_tensor_nbytes(&inputs[i]);
    void *buf = i == me ? output->data : scratch;
    if (bytes && (!buf || !inputs[i].data)) {
      rc = dist__err_set(&g->err, DIST_E_INVAL, "reduce_scatter: NULL data pointer");
      break;
    }
    if (bytes && buf != inputs[i].data)
      memmove(buf, inputs[i].data, bytes);
    dist_tensor t = dist_tensor_1d(buf, output->dtype, (int64_t)(bytes / es));
    dist_coll c;
    memset(&c, 0, sizeof c);
    c.kind = DIST_OP_REDUCE;
    c.flags = DIST_COLL_PIECE;
    c.part_of = parent->kind;
    c.root = i;
    c.redop = parent->redop;
    c.seq = parent->seq;
    c.ord = parent->ord; // a backend tracks the call by it (nccl)
    c.caller = parent->caller;
    c.parent = parent;
    c.inputs = c.outputs = &t;
    c.n_inputs = c.n_outputs = 1;
    rc = dist__pg_sub(g, &c);
    if (rc != DIST_OK)
      piece_failed(g, parent, rc, "reduce_scatter of uneven sizes, the part to group rank", i);
  }
  dist__free(scratch);
  return rc;
}

int dist__reduce_scatter_uneven(dist_tensor *output, const dist_tensor *inputs, size_t n,
                                dist_redop op, dist_pg *group, dist_work **w,
                                const void *caller) {
  dist_pg *g = dist__pg_resolve_op(group, DIST_OP_REDUCE_SCATTER, caller);
  if (!g)
    return DIST_E_INVAL;
  if (w)
    *w = NULL;
  if (g == DIST_GROUP_NON_MEMBER)
    return w ? dist__work_new_done(g, DIST_OK, w) : DIST_OK;
  dist__err_clear(&g->err);
  DIST_TRY(rs_check(g, output, inputs, n));
  dist_coll c;
  memset(&c, 0, sizeof c);
  c.kind = DIST_OP_REDUCE_SCATTER;
  c.root = -1;
  c.redop = op;
  c.caller = caller;
  c.inputs = inputs;
  c.n_inputs = n;
  c.outputs = output;
  c.n_outputs = 1;
  dist__pg_begin(g, &c);
  int rc = dist__pg_end(g, &c, rs_run(g, &c, output, inputs));
  if (rc == DIST_OK && w)
    rc = dist__work_new_done(g, DIST_OK, w);
  return rc;
}
