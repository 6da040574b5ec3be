/* coll_check.c - one collective with deterministic inputs, checked against
 * values computed on one rank (see coll_check.h). Each kind has a prepare
 * step (inputs, expected outputs, tensor descriptors), a start step (the
 * public call, sync or async) and a shared verify step (bitwise compare of
 * every output buffer with its expected twin). */
#include "coll_check.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ref.h"

#define MAX_BUFS 70

typedef struct prep {
  const coll_case *c;
  int rank, size;
  size_t esz;
  dist_tensor in[MAX_BUFS], out[MAX_BUFS]; /* descriptors */
  size_t n_in, n_out;
  void *bufs[2 * MAX_BUFS + 2]; /* everything to free */
  int n_bufs;
  void *got[MAX_BUFS], *want[MAX_BUFS]; /* pairs to compare */
  size_t cmp_n[MAX_BUFS];
  int n_cmp;
  int64_t in_splits[MAX_BUFS], out_splits[MAX_BUFS];
  int src_seen; /* RECV: the source a recv reported */
  int host[MAX_BUFS]; /* group rank -> host index (coll_check_set_hosts) */
  int nhosts;
} prep;

/* Global rank -> fake host (coll_check_set_hosts); NULL: one host. */
static const int *g_host_of;
static int g_host_n;

void coll_check_set_hosts(const int *host_of_global, int n) {
  g_host_of = host_of_global;
  g_host_n = n;
}

static void *zalloc(prep *p, size_t bytes) {
  void *b = calloc(1, bytes ? bytes : 1);
  p->bufs[p->n_bufs++] = b;
  return b;
}

static dist_tensor tensor(void *data, dist_dtype dt, int64_t n) {
  return dist_tensor_1d(data, dt, n);
}

/* A buffer holding rank r's input (elements first .. first+n). */
static void *input_of(prep *p, int r, size_t first, size_t n, uint64_t seed) {
  void *b = zalloc(p, n * p->esz);
  dist_test_fill(b, p->c->dtype, n, seed, r, first, 0);
  return b;
}

static void expect(prep *p, void *got, void *want, size_t n) {
  p->got[p->n_cmp] = got;
  p->want[p->n_cmp] = want;
  p->cmp_n[p->n_cmp++] = n;
}

/* want = the reduction of every group rank's input (elements first ..
 * first+n) in the order the backend uses: ascending group rank on one
 * host; over several hosts, each host's ranks in ascending order, then the
 * host partials in ascending host order (AVG: SUMs, one division at the
 * end; PREMUL_SUM: scaled in the hosts, summed between them), hier.h. */
static void expected(prep *p, void *want, size_t first, size_t n) {
  const coll_case *c = p->c;
  if (p->nhosts <= 1) {
    dist_test_expected(c->dtype, c->redop, want, n, c->seed, p->size, first, 0, p->size);
    return;
  }
  dist_redop local = c->redop, between = c->redop;
  if (c->redop.kind == DIST_REDOP_AVG)
    local = DIST_SUM;
  if (c->redop.kind == DIST_REDOP_AVG || c->redop.kind == DIST_REDOP_PREMUL_SUM)
    between = DIST_SUM;
  const void *srcs[MAX_BUFS], *parts[MAX_BUFS];
  for (int k = 0; k < p->nhosts; k++) {
    int m = 0;
    for (int r = 0; r < p->size; r++)
      if (p->host[r] == k)
        srcs[m++] = input_of(p, r, first, n, c->seed);
    void *part = zalloc(p, n * p->esz);
    dist_test_ref_reduce(c->dtype, local, part, srcs, m, n, 1);
    parts[k] = part;
  }
  dist_test_ref_reduce(c->dtype, between, want, parts, p->nhosts, n, 1);
  if (c->redop.kind == DIST_REDOP_AVG) {
    const void *one = want;
    dist_test_ref_reduce(c->dtype, c->redop, want, &one, 1, n, p->size);
  }
}

static void prep_reduce(prep *p, bool all) {
  const coll_case *c = p->c;
  size_t n = (size_t)c->n;
  void *buf = input_of(p, p->rank, 0, n, c->seed);
  p->in[0] = tensor(buf, c->dtype, c->n);
  p->n_in = 1;
  if (all || p->rank == c->root) {
    void *want = zalloc(p, n * p->esz);
    expected(p, want, 0, n);
    expect(p, buf, want, n);
  }
}

static void prep_broadcast(prep *p) {
  const coll_case *c = p->c;
  size_t n = (size_t)c->n;
  void *buf = p->rank == c->root ? input_of(p, c->root, 0, n, c->seed) : zalloc(p, n * p->esz);
  p->in[0] = tensor(buf, c->dtype, c->n);
  p->n_in = 1;
  expect(p, buf, input_of(p, c->root, 0, n, c->seed), n);
}

/* all_gather, all_gather_into_tensor, gather */
static void prep_gather(prep *p) {
  const coll_case *c = p->c;
  size_t n = (size_t)c->n;
  p->in[0] = tensor(input_of(p, p->rank, 0, n, c->seed), c->dtype, c->n);
  p->n_in = 1;
  bool receives = c->op != DIST_OP_GATHER || p->rank == c->root;
  if (!receives)
    return;
  if (c->op == DIST_OP_ALL_GATHER_INTO_TENSOR) {
    char *big = zalloc(p, n * p->esz * (size_t)p->size);
    p->out[0] = tensor(big, c->dtype, c->n * p->size);
    p->n_out = 1;
    for (int r = 0; r < p->size; r++)
      expect(p, big + (size_t)r * n * p->esz, input_of(p, r, 0, n, c->seed), n);
    return;
  }
  for (int r = 0; r < p->size; r++) {
    void *o = zalloc(p, n * p->esz);
    p->out[r] = tensor(o, c->dtype, c->n);
    expect(p, o, input_of(p, r, 0, n, c->seed), n);
  }
  p->n_out = (size_t)p->size;
}

static void prep_scatter(prep *p) {
  const coll_case *c = p->c;
  size_t n = (size_t)c->n;
  if (p->rank == c->root) {
    for (int r = 0; r < p->size; r++)
      p->in[r] = tensor(input_of(p, r, 0, n, c->seed), c->dtype, c->n);
    p->n_in = (size_t)p->size;
  }
  void *o = zalloc(p, n * p->esz);
  p->out[0] = tensor(o, c->dtype, c->n);
  p->n_out = 1;
  expect(p, o, input_of(p, p->rank, 0, n, c->seed), n);
}

/* Rank r's block j holds elements j*n .. (j+1)*n of its input. */
static void prep_reduce_scatter(prep *p) {
  const coll_case *c = p->c;
  size_t n = (size_t)c->n;
  if (c->op == DIST_OP_REDUCE_SCATTER_TENSOR) {
    p->in[0] = tensor(input_of(p, p->rank, 0, n * (size_t)p->size, c->seed), c->dtype,
                      c->n * p->size);
    p->n_in = 1;
  } else {
    for (int j = 0; j < p->size; j++)
      p->in[j] = tensor(input_of(p, p->rank, (size_t)j * n, n, c->seed), c->dtype, c->n);
    p->n_in = (size_t)p->size;
  }
  void *o = zalloc(p, n * p->esz);
  p->out[0] = tensor(o, c->dtype, c->n);
  p->n_out = 1;
  void *want = zalloc(p, n * p->esz);
  expected(p, want, (size_t)p->rank * n, n);
  expect(p, o, want, n);
}

/* What rank r sends rank j in all_to_all: fill(seed + j, r). */
static void prep_all_to_all(prep *p) {
  const coll_case *c = p->c;
  size_t n = (size_t)c->n;
  for (int j = 0; j < p->size; j++) {
    p->in[j] = tensor(input_of(p, p->rank, 0, n, c->seed + (uint64_t)j), c->dtype, c->n);
    void *o = zalloc(p, n * p->esz);
    p->out[j] = tensor(o, c->dtype, c->n);
    expect(p, o, input_of(p, j, 0, n, c->seed + (uint64_t)p->rank), n);
  }
  p->n_in = p->n_out = (size_t)p->size;
}

/* Rows rank r sends rank j (uneven: 0 to 3 rows, a function of both). */
static int64_t rows(const coll_case *c, int r, int j) {
  return c->uneven ? (int64_t)((uint64_t)(r * 7 + j * 3) + c->seed) % 4 : c->n;
}

static int64_t row_offset(const coll_case *c, int r, int j) {
  int64_t off = 0;
  for (int k = 0; k < j; k++)
    off += rows(c, r, k);
  return off;
}

static void prep_a2a_single(prep *p) {
  const coll_case *c = p->c;
  const int64_t row = 3; /* elements per row: tensors are [rows, 3] */
  int64_t in_rows = 0, out_rows = 0;
  for (int j = 0; j < p->size; j++) {
    p->in_splits[j] = rows(c, p->rank, j);
    p->out_splits[j] = rows(c, j, p->rank);
    in_rows += p->in_splits[j];
    out_rows += p->out_splits[j];
  }
  void *in = input_of(p, p->rank, 0, (size_t)(in_rows * row), c->seed);
  char *out = zalloc(p, (size_t)(out_rows * row) * p->esz);
  p->in[0] = (dist_tensor){.data = in, .dtype = c->dtype, .ndim = 2, .shape = {in_rows, row}};
  p->out[0] = (dist_tensor){.data = out, .dtype = c->dtype, .ndim = 2, .shape = {out_rows, row}};
  p->n_in = p->n_out = 1;
  int64_t at = 0;
  for (int i = 0; i < p->size; i++) {
    size_t k = (size_t)(rows(c, i, p->rank) * row);
    size_t first = (size_t)(row_offset(c, i, p->rank) * row);
    expect(p, out + (size_t)at * p->esz, input_of(p, i, first, k, c->seed), k);
    at += (int64_t)k;
  }
}

/* A ring: rank r sends fill(r) to r+1 and receives from r-1. */
static void prep_ring(prep *p) {
  const coll_case *c = p->c;
  size_t n = (size_t)c->n;
  int from = (p->rank + p->size - 1) % p->size;
  p->in[0] = tensor(input_of(p, p->rank, 0, n, c->seed), c->dtype, c->n);
  void *o = zalloc(p, n * p->esz);
  p->out[0] = tensor(o, c->dtype, c->n);
  p->n_in = p->n_out = 1;
  expect(p, o, input_of(p, from, 0, n, c->seed), n);
}

static int global_of(dist_pg *g, int group_rank);

/* Hosts numbered by their lowest group rank, as the backend does. */
static void place(prep *p, dist_pg *g) {
  int ids[MAX_BUFS];
  p->nhosts = 0;
  for (int r = 0; g_host_of && r < p->size && r < MAX_BUFS; r++) {
    int gr = global_of(g, r);
    int id = gr >= 0 && gr < g_host_n ? g_host_of[gr] : -1;
    int k = 0;
    while (k < p->nhosts && ids[k] != id)
      k++;
    if (k == p->nhosts)
      ids[p->nhosts++] = id;
    p->host[r] = k;
  }
}

static void prepare(prep *p, dist_pg *g, const coll_case *c) {
  memset(p, 0, sizeof *p);
  p->c = c;
  p->rank = dist_get_rank(g);
  p->size = dist_get_world_size(g);
  place(p, g);
  p->esz = dist_dtype_size(c->dtype);
  p->src_seen = -2;
  switch (c->op) {
  case DIST_OP_ALL_REDUCE: prep_reduce(p, true); break;
  case DIST_OP_REDUCE: prep_reduce(p, false); break;
  case DIST_OP_BROADCAST: prep_broadcast(p); break;
  case DIST_OP_ALL_GATHER:
  case DIST_OP_ALL_GATHER_INTO_TENSOR:
  case DIST_OP_GATHER: prep_gather(p); break;
  case DIST_OP_SCATTER: prep_scatter(p); break;
  case DIST_OP_REDUCE_SCATTER:
  case DIST_OP_REDUCE_SCATTER_TENSOR: prep_reduce_scatter(p); break;
  case DIST_OP_ALL_TO_ALL: prep_all_to_all(p); break;
  case DIST_OP_ALL_TO_ALL_SINGLE: prep_a2a_single(p); break;
  case DIST_OP_SEND:
  case DIST_OP_BATCH_P2P: prep_ring(p); break;
  default: break;
  }
}

static int global_of(dist_pg *g, int group_rank) {
  int r = -1;
  dist_get_global_rank(g, group_rank, &r);
  return r;
}

/* The ring's p2p: sync orders sends and receives by parity (a synchronous
 * send returns when matched), async and batch post both at once. */
static int start_ring(prep *p, dist_pg *g, dist_work **w) {
  int to = global_of(g, (p->rank + 1) % p->size);
  int from = global_of(g, (p->rank + p->size - 1) % p->size);
  int tag = (int)(p->c->seed % 1000);
  if (p->size == 1)
    return DIST_OK; /* no peer: nothing to exchange (checked in verify) */
  if (p->c->op == DIST_OP_BATCH_P2P) {
    dist_p2p_op ops[2] = {{true, &p->in[0], to, tag, g}, {false, &p->out[0], from, tag, g}};
    return dist_batch_isend_irecv(ops, 2, w);
  }
  if (w) {
    dist_work *s;
    int rc = dist_isend(&p->in[0], to, g, tag, &s);
    if (rc == DIST_OK)
      rc = dist_irecv(&p->out[0], DIST_ANY_SOURCE, g, tag, w);
    if (rc == DIST_OK)
      rc = dist_work_wait(s, -1);
    dist_work_free(s);
    return rc;
  }
  int rc;
  if (p->rank % 2 == 0) {
    rc = dist_send(&p->in[0], to, g, tag);
    if (rc == DIST_OK)
      rc = dist_recv(&p->out[0], from, g, tag, &p->src_seen);
  } else {
    rc = dist_recv(&p->out[0], DIST_ANY_SOURCE, g, tag, &p->src_seen);
    if (rc == DIST_OK)
      rc = dist_send(&p->in[0], to, g, tag);
  }
  return rc;
}

static int start(prep *p, dist_pg *g, dist_work **w) {
  const coll_case *c = p->c;
  int root = global_of(g, c->root);
  switch (c->op) {
  case DIST_OP_ALL_REDUCE: return dist_all_reduce(&p->in[0], c->redop, g, w);
  case DIST_OP_REDUCE: return dist_reduce(&p->in[0], root, c->redop, g, w);
  case DIST_OP_BROADCAST: return dist_broadcast(&p->in[0], root, g, w);
  case DIST_OP_ALL_GATHER: return dist_all_gather(p->out, p->n_out, &p->in[0], g, w);
  case DIST_OP_ALL_GATHER_INTO_TENSOR: return dist_all_gather_into_tensor(&p->out[0], &p->in[0], g, w);
  case DIST_OP_GATHER:
    return dist_gather(&p->in[0], p->n_out ? p->out : NULL, p->n_out, root, g, w);
  case DIST_OP_SCATTER:
    return dist_scatter(&p->out[0], p->n_in ? p->in : NULL, p->n_in, root, g, w);
  case DIST_OP_REDUCE_SCATTER:
    return dist_reduce_scatter(&p->out[0], p->in, p->n_in, c->redop, g, w);
  case DIST_OP_REDUCE_SCATTER_TENSOR:
    return dist_reduce_scatter_tensor(&p->out[0], &p->in[0], c->redop, g, w);
  case DIST_OP_ALL_TO_ALL: return dist_all_to_all(p->out, p->n_out, p->in, p->n_in, g, w);
  case DIST_OP_ALL_TO_ALL_SINGLE:
    return dist_all_to_all_single(&p->out[0], &p->in[0], c->uneven ? p->out_splits : NULL,
                                  c->uneven ? p->in_splits : NULL, g, w);
  case DIST_OP_BARRIER: return dist_barrier(g, w);
  case DIST_OP_SEND:
  case DIST_OP_BATCH_P2P: return start_ring(p, g, w);
  default: return DIST_E_INVAL;
  }
}

static coll_check_result_fn result_hook;
static void *result_arg;

void coll_check_set_result_hook(coll_check_result_fn fn, void *arg) {
  result_hook = fn;
  result_arg = arg;
}

static bool replicated(dist_op_kind k) {
  return k == DIST_OP_ALL_REDUCE || k == DIST_OP_BROADCAST || k == DIST_OP_ALL_GATHER ||
         k == DIST_OP_ALL_GATHER_INTO_TENSOR;
}

static int verify(prep *p, dist_pg *g, char *msg, size_t len) {
  char name[160], why[512];
  coll_case_name(p->c, name, sizeof name);
  if ((p->c->op == DIST_OP_SEND || p->c->op == DIST_OP_BATCH_P2P) && p->size == 1)
    return 0;
  for (int i = 0; i < p->n_cmp; i++) {
    if (dist_test_compare(p->c->dtype, p->got[i], p->want[i], p->cmp_n[i], 0, why, sizeof why)) {
      snprintf(msg, len, "%s, output %d: %s", name, i, why);
      return 1;
    }
  }
  int from = global_of(g, (p->rank + p->size - 1) % p->size);
  if (p->src_seen != -2 && p->src_seen != from) {
    snprintf(msg, len, "%s: recv reported source %d, expected %d", name, p->src_seen, from);
    return 1;
  }
  for (int i = 0; result_hook && replicated(p->c->op) && i < p->n_cmp; i++)
    result_hook(result_arg, g, p->c, p->got[i], p->cmp_n[i] * p->esz);
  return 0;
}

static void release(prep *p) {
  for (int i = 0; i < p->n_bufs; i++)
    free(p->bufs[i]);
}

char *coll_case_name(const coll_case *c, char *buf, size_t len) {
  snprintf(buf, len, "%s %s %s n=%lld root=%d%s%s seed=%llu", dist_op_name(c->op),
           dist_dtype_name(c->dtype), dist_redop_name(c->redop.kind), (long long)c->n, c->root,
           c->async ? " async" : "", c->uneven ? " uneven" : "", (unsigned long long)c->seed);
  return buf;
}

static int fail_call(const coll_case *c, int rc, dist_pg *g, char *msg, size_t len) {
  char name[160];
  snprintf(msg, len, "%s: %s: %s", coll_case_name(c, name, sizeof name), dist_status_name(rc),
           dist_pg_errmsg(g)[0] ? dist_pg_errmsg(g) : dist_last_errmsg());
  return 1;
}

int coll_check(dist_pg *g, const coll_case *c, char *msg, size_t len) {
  prep *p = calloc(1, sizeof *p);
  prepare(p, g, c);
  dist_work *w = NULL;
  int rc = start(p, g, c->async ? &w : NULL);
  if (rc == DIST_OK && w)
    rc = dist_work_wait(w, -1);
  if (rc == DIST_OK && w && c->op == DIST_OP_SEND && p->size > 1)
    rc = dist_work_source_rank(w, &p->src_seen);
  int bad = rc != DIST_OK ? fail_call(c, rc, g, msg, len) : verify(p, g, msg, len);
  if (bad && rc == DIST_OK && w)
    snprintf(msg + strlen(msg), len - strlen(msg), " (work status %s)",
             dist_status_name(dist_work_status(w)));
  dist_work_free(w);
  release(p);
  free(p);
  return bad;
}

int coll_check_many_async(dist_pg *g, const coll_case *cases, int k, char *msg, size_t len) {
  prep *p = calloc((size_t)k, sizeof *p);
  dist_work **w = calloc((size_t)k, sizeof *w);
  int bad = 0;
  int started = 0;
  for (; started < k; started++) {
    prepare(&p[started], g, &cases[started]);
    int rc = start(&p[started], g, &w[started]);
    if (rc != DIST_OK) {
      bad = fail_call(&cases[started], rc, g, msg, len);
      break;
    }
  }
  for (int i = 0; i < started; i++) {
    int rc = dist_work_wait(w[i], -1);
    /* Issue order: once i is done, every earlier one must be too. */
    for (int j = 0; j < i && !bad; j++)
      if (!dist_work_is_completed(w[j]))
        bad = fail_call(&cases[j], DIST_E_INTERNAL, g, msg, len);
    if (!bad && rc != DIST_OK)
      bad = fail_call(&cases[i], rc, g, msg, len);
    if (!bad)
      bad = verify(&p[i], g, msg, len);
  }
  for (int i = 0; i < started; i++) {
    dist_work_free(w[i]);
    release(&p[i]);
  }
  free(w);
  free(p);
  return bad;
}
