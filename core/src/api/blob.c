/* blob.c - the byte-blob collectives (torch's object collectives without
 * pickling): a size exchange, then the data, each piece an ordinary
 * operation on the group's own slots. The user's call is one operation for
 * the observers (one sequence number); its pieces are not announced.
 * Variable sizes are padded to the largest where a collective needs equal
 * sizes, as torch does. */
#include <stdio.h>
#include <stdlib.h>

#include "api.h"

static dist_tensor bytes_tensor(void *p, size_t n) {
  return dist_tensor_1d(p, DIST_UINT8, (int64_t)n);
}

static dist_tensor i64_tensor(int64_t *p, size_t n) {
  return dist_tensor_1d(p, DIST_INT64, (int64_t)n);
}

static dist_coll piece(dist_op_kind k, const dist_coll *parent) {
  dist_coll c;
  memset(&c, 0, sizeof c);
  c.kind = k;
  c.flags = DIST_COLL_PIECE;
  c.part_of = parent->kind;
  c.root = parent->root;
  c.seq = parent->seq;
  c.ord = parent->ord; // a backend tracks the call by it (nccl)
  c.caller = parent->caller;
  return c;
}

/* Heap copy of n bytes plus a NUL (blobs are often strings). */
static void *alloc_blob(size_t n) {
  char *p = dist__malloc(n + 1);
  if (p)
    p[n] = '\0';
  return p;
}

typedef struct blob_call {
  dist_pg *g;
  dist_coll c;
} blob_call;

static int begin(blob_call *b, dist_pg *g, dist_op_kind k, int root_global, const char *fn,
                 const void *caller, bool *skip) {
  *skip = false;
  g = dist__pg_resolve_op(g, k, caller);
  if (!g)
    return DIST_E_INVAL;
  if (g == DIST_GROUP_NON_MEMBER) {
    *skip = true;
    return DIST_OK;
  }
  b->g = g;
  memset(&b->c, 0, sizeof b->c);
  b->c.kind = k;
  b->c.root = -1;
  b->c.caller = caller;
  if (root_global >= 0 || k != DIST_OP_ALL_GATHER_BYTES) {
    int r = root_global < DIST_GROUP_RANK_BASE ? dist__pg_group_rank_of(g, root_global)
            : root_global - DIST_GROUP_RANK_BASE < g->info.size
                ? root_global - DIST_GROUP_RANK_BASE /* DIST_GROUP_RANK(r) */
                : -1;
    if (r < 0 && !(k == DIST_OP_RECV_BYTES && root_global == DIST_ANY_SOURCE))
      return dist__err_set(&g->err, DIST_E_INVAL, "%s: rank %d is not in group %s", fn,
                           root_global, g->name);
    b->c.root = r;
  }
  dist__pg_begin(g, &b->c);
  return DIST_OK;
}

#define BEGIN(b, g, k, root, fn)                                   \
  do {                                                             \
    bool skip_;                                                    \
    int begin_rc_ = begin((b), (g), (k), (root), (fn),              \
                          __builtin_return_address(0), &skip_);    \
    if (begin_rc_ != DIST_OK || skip_)                             \
      return begin_rc_;                                            \
  } while (0)

static int run_bcast(dist_pg *g, const dist_coll *parent, void *p, size_t n) {
  dist_tensor t = bytes_tensor(p, n);
  dist_coll c = piece(DIST_OP_BROADCAST, parent);
  c.inputs = c.outputs = &t;
  c.n_inputs = c.n_outputs = 1;
  return dist__pg_sub(g, &c);
}

int dist_broadcast_bytes(dist_bytes *obj, int src, dist_pg *group) {
  blob_call b;
  BEGIN(&b, group, DIST_OP_BROADCAST_BYTES, src, "broadcast_bytes");
  dist_pg *g = b.g;
  bool root = b.c.root == g->info.rank;
  if (!obj || (root && !obj->data && obj->len))
    return dist__pg_end(g, &b.c, dist__err_set(&g->err, DIST_E_INVAL,
                                               "broadcast_bytes: NULL buffer"));
  if (root && obj->len >= INT64_MAX)
    return dist__pg_end(g, &b.c, dist__err_set(&g->err, DIST_E_INVAL,
                                               "broadcast_bytes: %zu bytes is too long", obj->len));
  int64_t len = root ? (int64_t)obj->len : 0;
  dist_tensor lt = i64_tensor(&len, 1);
  dist_coll c = piece(DIST_OP_BROADCAST, &b.c);
  c.inputs = c.outputs = &lt;
  c.n_inputs = c.n_outputs = 1;
  int rc = dist__pg_sub(g, &c);
  void *data = root ? obj->data : NULL;
  if (rc == DIST_OK && !root && (len < 0 || len == INT64_MAX || !(data = alloc_blob((size_t)len))))
    rc = dist__err_set(&g->err, len < 0 || len == INT64_MAX ? DIST_E_INVAL : DIST_E_NOMEM,
                       "broadcast_bytes: cannot hold %lld bytes from rank %d", (long long)len,
                       g->global_ranks[b.c.root]);
  if (rc == DIST_OK)
    rc = run_bcast(g, &b.c, data, (size_t)len);
  if (!root) {
    if (rc == DIST_OK) {
      obj->data = data;
      obj->len = (size_t)len;
    } else {
      dist__free(data);
    }
  }
  return dist__pg_end(g, &b.c, rc);
}

/* Every rank's length, through an all_gather of one int64 each. */
static int gather_lens(dist_pg *g, const dist_coll *parent, int64_t mine, int64_t *lens) {
  dist_tensor in = i64_tensor(&mine, 1);
  dist_tensor out = i64_tensor(lens, (size_t)g->info.size);
  dist_coll c = piece(DIST_OP_ALL_GATHER_INTO_TENSOR, parent);
  c.inputs = &in;
  c.n_inputs = 1;
  c.outputs = &out;
  c.n_outputs = 1;
  return dist__pg_sub(g, &c);
}

/* The padded slot width for lengths that came from peers: each must be
 * non-negative and n slots of the largest (plus a NUL) must fit in memory. */
static int slot_width(dist_pg *g, const int64_t *lens, int n, const char *fn, int64_t *width) {
  int64_t m = 0, total;
  for (int i = 0; i < n; i++) {
    if (lens[i] < 0)
      return dist__err_set(&g->err, DIST_E_INVAL, "%s: rank %d announced a blob of %lld bytes",
                           fn, g->global_ranks[i], (long long)lens[i]);
    m = lens[i] > m ? lens[i] : m;
  }
  if (__builtin_mul_overflow(m, (int64_t)n, &total) || total == INT64_MAX)
    return dist__err_set(&g->err, DIST_E_INVAL, "%s: %d blobs of %lld bytes overflow int64", fn,
                         n, (long long)m);
  *width = m;
  return DIST_OK;
}

/* Splits a padded buffer of n slots of width bytes into out[i]. */
static int unpack(dist_pg *g, const char *buf, const int64_t *lens, int64_t width,
                  dist_bytes *out) {
  int n = g->info.size;
  for (int i = 0; i < n; i++)
    out[i] = (dist_bytes){NULL, 0};
  for (int i = 0; i < n; i++) {
    out[i].data = alloc_blob((size_t)lens[i]);
    if (!out[i].data) {
      for (int j = 0; j < i; j++)
        dist__free(out[j].data);
      return dist__err_set(&g->err, DIST_E_NOMEM, "out of memory unpacking blobs");
    }
    memcpy(out[i].data, buf + (size_t)i * (size_t)width, (size_t)lens[i]);
    out[i].len = (size_t)lens[i];
  }
  return DIST_OK;
}

/* all_gather and gather of blobs: lengths first, then padded data. */
static int gather_common(blob_call *b, const dist_bytes *in, dist_bytes *out, bool all) {
  dist_pg *g = b->g;
  int n = g->info.size;
  bool dst = all || b->c.root == g->info.rank;
  if (!in || (!in->data && in->len) || (dst && !out))
    return dist__err_set(&g->err, DIST_E_INVAL, "%s: NULL buffer", dist_op_name(b->c.kind));
  int64_t *lens = dist__calloc((size_t)n, sizeof *lens);
  if (!lens)
    return dist__err_set(&g->err, DIST_E_NOMEM, "out of memory");
  int64_t width = 0;
  int rc = in->len > INT64_MAX ? dist__err_set(&g->err, DIST_E_INVAL, "%s: %zu bytes is too long",
                                               dist_op_name(b->c.kind), in->len)
                               : gather_lens(g, &b->c, (int64_t)in->len, lens);
  if (rc == DIST_OK)
    rc = slot_width(g, lens, n, dist_op_name(b->c.kind), &width);
  char *mine = NULL, *all_buf = NULL;
  if (rc == DIST_OK) {
    mine = dist__calloc(1, (size_t)width + 1);
    all_buf = dst ? dist__malloc((size_t)width * (size_t)n + 1) : NULL;
    if (!mine || (dst && !all_buf))
      rc = dist__err_set(&g->err, DIST_E_NOMEM, "out of memory for %d blobs of %lld bytes", n,
                         (long long)width);
  }
  if (rc == DIST_OK) {
    memcpy(mine, in->data, in->len);
    dist_tensor ti = bytes_tensor(mine, (size_t)width);
    dist_tensor to = bytes_tensor(all_buf, (size_t)(width * n));
    dist_tensor *list = NULL;
    dist_coll c = piece(all ? DIST_OP_ALL_GATHER_INTO_TENSOR : DIST_OP_GATHER, &b->c);
    c.inputs = &ti;
    c.n_inputs = 1;
    if (all) {
      c.outputs = &to;
      c.n_outputs = 1;
    } else if (dst) {
      list = dist__malloc(sizeof *list * (size_t)n);
      if (!list)
        rc = dist__err_set(&g->err, DIST_E_NOMEM, "out of memory");
      for (int i = 0; list && i < n; i++)
        list[i] = bytes_tensor(all_buf + (size_t)i * (size_t)width, (size_t)width);
      c.outputs = list;
      c.n_outputs = (size_t)n;
    }
    if (rc == DIST_OK)
      rc = dist__pg_sub(g, &c);
    dist__free(list);
  }
  if (rc == DIST_OK && dst)
    rc = unpack(g, all_buf, lens, width, out);
  dist__free(mine);
  dist__free(all_buf);
  dist__free(lens);
  return rc;
}

int dist_all_gather_bytes(const dist_bytes *in, dist_bytes *out, dist_pg *group) {
  blob_call b;
  BEGIN(&b, group, DIST_OP_ALL_GATHER_BYTES, -1, "all_gather_bytes");
  return dist__pg_end(b.g, &b.c, gather_common(&b, in, out, true));
}

int dist_gather_bytes(const dist_bytes *in, dist_bytes *out, int dst, dist_pg *group) {
  blob_call b;
  BEGIN(&b, group, DIST_OP_GATHER_BYTES, dst, "gather_bytes");
  return dist__pg_end(b.g, &b.c, gather_common(&b, in, out, false));
}

/* scatter: the source broadcasts every length, then scatters padded. */
static int scatter_blobs(blob_call *b, dist_bytes *out, const dist_bytes *in) {
  dist_pg *g = b->g;
  int n = g->info.size;
  bool src = b->c.root == g->info.rank;
  if (!out || (src && !in))
    return dist__err_set(&g->err, DIST_E_INVAL, "scatter_bytes: NULL buffer");
  int64_t *lens = dist__calloc((size_t)n, sizeof *lens);
  if (!lens)
    return dist__err_set(&g->err, DIST_E_NOMEM, "out of memory");
  for (int i = 0; src && i < n; i++)
    lens[i] = (int64_t)in[i].len;
  dist_tensor lt = i64_tensor(lens, (size_t)n);
  dist_coll c = piece(DIST_OP_BROADCAST, &b->c);
  c.inputs = c.outputs = &lt;
  c.n_inputs = c.n_outputs = 1;
  int rc = dist__pg_sub(g, &c);
  int64_t width = 0;
  if (rc == DIST_OK)
    rc = slot_width(g, lens, n, "scatter_bytes", &width);
  char *pad = NULL, *mine = NULL;
  dist_tensor *list = NULL;
  if (rc == DIST_OK) {
    mine = alloc_blob((size_t)width);
    pad = src ? dist__calloc((size_t)n, (size_t)width + 1) : NULL;
    list = src ? dist__malloc(sizeof *list * (size_t)n) : NULL;
    if (!mine || (src && (!pad || !list)))
      rc = dist__err_set(&g->err, DIST_E_NOMEM, "out of memory");
  }
  if (rc == DIST_OK) {
    for (int i = 0; src && i < n; i++) {
      memcpy(pad + (size_t)i * (size_t)width, in[i].data, in[i].len);
      list[i] = bytes_tensor(pad + (size_t)i * (size_t)width, (size_t)width);
    }
    dist_tensor to = bytes_tensor(mine, (size_t)width);
    dist_coll s = piece(DIST_OP_SCATTER, &b->c);
    s.inputs = list;
    s.n_inputs = src ? (size_t)n : 0;
    s.outputs = &to;
    s.n_outputs = 1;
    rc = dist__pg_sub(g, &s);
  }
  if (rc == DIST_OK) {
    out->data = mine;
    out->len = (size_t)lens[g->info.rank];
    ((char *)mine)[out->len] = '\0';
    mine = NULL;
  }
  dist__free(mine);
  dist__free(pad);
  dist__free(list);
  dist__free(lens);
  return rc;
}

int dist_scatter_bytes(dist_bytes *out, const dist_bytes *in, int src, dist_pg *group) {
  blob_call b;
  BEGIN(&b, group, DIST_OP_SCATTER_BYTES, src, "scatter_bytes");
  return dist__pg_end(b.g, &b.c, scatter_blobs(&b, out, in));
}

int dist_send_bytes(const dist_bytes *in, int dst, dist_pg *group) {
  blob_call b;
  BEGIN(&b, group, DIST_OP_SEND_BYTES, dst, "send_bytes");
  dist_pg *g = b.g;
  if (!in || (!in->data && in->len))
    return dist__pg_end(g, &b.c, dist__err_set(&g->err, DIST_E_INVAL, "send_bytes: NULL buffer"));
  int64_t len = (int64_t)in->len;
  dist_tensor lt = i64_tensor(&len, 1), dt = bytes_tensor(in->data, in->len);
  dist_coll c = piece(DIST_OP_SEND, &b.c);
  c.inputs = &lt;
  c.n_inputs = 1;
  int rc = dist__pg_sub(g, &c);
  if (rc == DIST_OK) {
    c.inputs = &dt;
    rc = dist__pg_sub(g, &c);
  }
  return dist__pg_end(g, &b.c, rc);
}

int dist_recv_bytes(dist_bytes *out, int src, dist_pg *group, int *src_out) {
  blob_call b;
  BEGIN(&b, group, DIST_OP_RECV_BYTES, src, "recv_bytes");
  dist_pg *g = b.g;
  if (!out)
    return dist__pg_end(g, &b.c, dist__err_set(&g->err, DIST_E_INVAL, "recv_bytes: NULL out"));
  int64_t len = 0;
  dist_tensor lt = i64_tensor(&len, 1);
  dist_coll c = piece(DIST_OP_RECV, &b.c);
  c.outputs = &lt;
  c.n_outputs = 1;
  int from = -1;
  int rc = dist__pg_sub_recv(g, &c, &from);
  void *data = NULL;
  if (rc == DIST_OK && (len < 0 || !(data = alloc_blob((size_t)len))))
    rc = dist__err_set(&g->err, len < 0 ? DIST_E_INVAL : DIST_E_NOMEM,
                       "recv_bytes: cannot hold %lld bytes", (long long)len);
  if (rc == DIST_OK) {
    dist_tensor dt = bytes_tensor(data, (size_t)len);
    c.outputs = &dt;
    c.root = from; /* the data comes from whoever sent the length */
    rc = dist__pg_sub(g, &c);
  }
  if (rc == DIST_OK) {
    out->data = data;
    out->len = (size_t)len;
    if (src_out)
      *src_out = g->global_ranks[from];
  } else {
    dist__free(data);
  }
  return dist__pg_end(g, &b.c, rc);
}
