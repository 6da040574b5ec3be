/* fingerprint.c - what one rank's call looks like to the others.
 *
 * A call becomes a fixed-size record of hashes: the fields every member
 * must agree on (op, collective count, dtypes, element counts, shapes,
 * devices, reduce op,
 * root as a global rank, the history of the group's collectives) and, for
 * all_to_all, a sum that cancels out over the group when every rank sends
 * what its peer expects (the sizes legitimately differ per rank, so they
 * cannot be compared equal). Hashing only the tensors that must agree per
 * kind keeps legitimate differences (a gather's root has outputs, the
 * others none) out of the comparison. */
#include <string.h>

#include "wpg_int.h"

static inline uint64_t mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  h *= 0xff51afd7ed558ccdull;
  return h ^ (h >> 33);
}

typedef struct acc {
  uint64_t dtype, numel, shape, dev;
} acc;

/* A tensor's dtype and device. */
static void add_kind(acc *a, const dist_tensor *t) {
  a->dtype = mix(a->dtype, (uint64_t)t->dtype);
  a->dev = mix(a->dev, (uint64_t)t->device.type << 16 | (uint64_t)t->device.index);
}

/* skip_dims: leading dimensions left out (all_to_all_single's rows). */
static void add_size(acc *a, const dist_tensor *t, int skip_dims) {
  int64_t n = 1;
  for (int d = skip_dims; d < t->ndim; d++)
    n *= t->shape[d];
  a->numel = mix(a->numel, (uint64_t)n);
  a->shape = mix(a->shape, (uint64_t)t->ndim);
  for (int d = skip_dims; d < t->ndim; d++)
    a->shape = mix(a->shape, (uint64_t)t->shape[d]);
}

static void add_tensor(acc *a, const dist_tensor *t, int skip_dims) {
  add_kind(a, t);
  add_size(a, t, skip_dims);
}

static void add_all(acc *a, const dist_tensor *t, size_t n) {
  for (size_t i = 0; i < n; i++)
    add_tensor(a, &t[i], 0);
}

/* The list forms whose entries may differ in size (api/uneven.c): what
 * must agree is the list, entry by entry; the one tensor (all_gather's
 * input, reduce_scatter's output) is this rank's own entry, checked
 * against it before, and differs per rank where the entries do. Its size
 * counts only where every entry is its size (the even form, as before),
 * so ranks whose lists agree agree, whichever form they run, and a rank
 * whose list differs differs in the element counts, not the dtype. */
static void add_list(acc *a, const dist_tensor *one, const dist_tensor *list, size_t n,
                     bool one_first) {
  bool even = true;
  for (size_t i = 0; i < n; i++)
    even &= dist_tensor_numel(&list[i]) == dist_tensor_numel(one);
  if (!one_first)
    add_all(a, list, n);
  add_kind(a, one);
  if (even)
    add_size(a, one, 0);
  if (one_first)
    add_all(a, list, n);
}

static bool has_redop(dist_op_kind k) {
  return k == DIST_OP_ALL_REDUCE || k == DIST_OP_REDUCE || k == DIST_OP_REDUCE_SCATTER ||
         k == DIST_OP_REDUCE_SCATTER_TENSOR;
}

static bool has_root(dist_op_kind k) {
  return k == DIST_OP_BROADCAST || k == DIST_OP_REDUCE || k == DIST_OP_GATHER ||
         k == DIST_OP_SCATTER;
}

/* One directed transfer's share of the all_to_all sum. */
static uint64_t edge(int src, int dst, int64_t amount) {
  return mix(mix(mix(0x5bd1e995u, (uint64_t)src), (uint64_t)dst), (uint64_t)amount);
}

static int64_t rows_of(const int64_t *splits, const dist_tensor *t, int j, int n) {
  if (splits)
    return splits[j];
  return t->ndim ? t->shape[0] / n : 1;
}

static void all_to_all_pairs(const wpg *w, const dist_coll *c, acc *a, wpg_fp *fp) {
  const int *g = w->info->global_ranks;
  int me = g[w->rank], n = w->size;
  uint64_t sum = 0;
  if (c->kind == DIST_OP_ALL_TO_ALL_SINGLE) {
    add_tensor(a, &c->inputs[0], 1);
    add_tensor(a, &c->outputs[0], 1);
    for (int j = 0; j < n; j++) {
      sum += edge(me, g[j], rows_of(c->in_splits, &c->inputs[0], j, n));
      sum -= edge(g[j], me, rows_of(c->out_splits, &c->outputs[0], j, n));
    }
  } else {
    for (size_t j = 0; j < c->n_inputs && j < (size_t)n; j++) {
      a->dtype = mix(a->dtype, (uint64_t)c->inputs[j].dtype);
      a->dtype = mix(a->dtype, (uint64_t)c->outputs[j].dtype);
      sum += edge(me, g[j], dist_tensor_numel(&c->inputs[j]));
      sum -= edge(g[j], me, dist_tensor_numel(&c->outputs[j]));
    }
  }
  fp->pair = sum;
}

static void hash_tensors(const wpg *w, const dist_coll *c, wpg_fp *fp) {
  acc a = {1, 2, 3, 4};
  switch (c->kind) {
  case DIST_OP_GATHER:
    add_all(&a, c->inputs, c->n_inputs);
    break;
  case DIST_OP_SCATTER:
    add_all(&a, c->outputs, c->n_outputs);
    break;
  case DIST_OP_BROADCAST:
  case DIST_OP_ALL_REDUCE:
  case DIST_OP_REDUCE:
    add_all(&a, c->inputs, c->n_inputs ? 1 : 0);
    break;
  case DIST_OP_ALL_TO_ALL:
  case DIST_OP_ALL_TO_ALL_SINGLE:
    all_to_all_pairs(w, c, &a, fp);
    break;
  case DIST_OP_ALL_GATHER:
    if (c->n_inputs == 1)
      add_list(&a, c->inputs, c->outputs, c->n_outputs, true);
    fp->n_tensors = (uint16_t)((c->n_inputs & 0xff) << 8 | (c->n_outputs & 0xff));
    break;
  case DIST_OP_REDUCE_SCATTER:
    if (c->n_outputs == 1)
      add_list(&a, c->outputs, c->inputs, c->n_inputs, false);
    fp->n_tensors = (uint16_t)((c->n_inputs & 0xff) << 8 | (c->n_outputs & 0xff));
    break;
  default:
    add_all(&a, c->inputs, c->n_inputs);
    add_all(&a, c->outputs, c->n_outputs);
    fp->n_tensors = (uint16_t)((c->n_inputs & 0xff) << 8 | (c->n_outputs & 0xff));
  }
  fp->dtype_h = a.dtype;
  fp->numel_h = a.numel;
  fp->shape_h = a.shape;
  fp->dev_h = a.dev;
}

void wpg_fp_make(const wpg *w, const dist_coll *c, wpg_fp *fp) {
  memset(fp, 0, sizeof *fp);
  fp->version = WPG_FP_VERSION;
  fp->kind = (uint16_t)wpg_kind(c);
  if (has_redop(c->kind)) {
    fp->redop = (uint8_t)c->redop.kind;
    fp->premul = c->redop.kind == DIST_REDOP_PREMUL_SUM;
    if (fp->premul) /* a scale that differs is a reduce op that differs */
      memcpy(&fp->scalar, &c->redop.scalar, sizeof fp->scalar);
  }
  fp->root = has_root(c->kind) && c->root >= 0 && c->root < w->size
                 ? w->info->global_ranks[c->root]
                 : -1;
  fp->tag = 0;
  fp->count = w->coll_count + 1;
  fp->seq = c->seq;
  fp->hist = w->hist;
  hash_tensors(w, c, fp);
}

wpg_field wpg_fp_diff(const wpg_fp *a, const wpg_fp *b) {
  if (a->kind != b->kind || a->version != b->version)
    return WPG_F_OP;
  if (a->count != b->count)
    return WPG_F_SEQ;
  if (a->dtype_h != b->dtype_h)
    return WPG_F_DTYPE;
  if (a->numel_h != b->numel_h || a->n_tensors != b->n_tensors)
    return WPG_F_COUNT;
  if (a->shape_h != b->shape_h)
    return WPG_F_SHAPE;
  if (a->dev_h != b->dev_h)
    return WPG_F_DEVICE;
  if (a->redop != b->redop || a->premul != b->premul || a->scalar != b->scalar)
    return WPG_F_REDOP;
  if (a->root != b->root)
    return WPG_F_ROOT;
  if (a->tag != b->tag)
    return WPG_F_TAG;
  if (a->hist != b->hist)
    return WPG_F_HISTORY;
  return WPG_F_NONE;
}

/* The fields a check compares, but not the call's place (count, history,
 * seq) nor its site: what stays the same from one call at a site to the
 * next in a loop that goes right. */
static uint64_t content_of(const wpg_fp *fp) {
  uint64_t h = mix(fp->kind, fp->dtype_h);
  h = mix(h, fp->numel_h);
  h = mix(h, fp->shape_h);
  h = mix(h, fp->dev_h);
  h = mix(h, (uint64_t)fp->redop << 8 | fp->premul);
  h = mix(h, fp->scalar);
  h = mix(h, (uint64_t)fp->n_tensors << 32 | (uint32_t)fp->root);
  return mix(h, fp->pair);
}

void wpg_fp_site_history(wpg *w, wpg_fp *fp) {
  uint64_t site = (uint64_t)fp->module << 48 ^ fp->caller_off, v = content_of(fp);
  int cap = (int)(sizeof w->site_last / sizeof w->site_last[0]);
  fp->site_was = WPG_SITE_NEW;
  if (!fp->caller_off)
    return; /* no site known: nothing to compare with */
  for (int i = 0; i < w->n_site_last; i++)
    if (w->site_last[i].site == site) {
      fp->site_was = w->site_last[i].content == v ? WPG_SITE_SAME : WPG_SITE_CHANGED;
      w->site_last[i].content = v;
      return;
    }
  int slot = w->n_site_last < cap ? w->n_site_last++ : w->site_last_next++ % cap;
  w->site_last[slot].site = site; /* the oldest gives way */
  w->site_last[slot].content = v;
}

void wpg_fp_non_member(wpg *w, wpg_fp *fp) {
  dist_op_kind k = DIST_OP_BARRIER;
  const void *caller = NULL;
  uint64_t n = dist__pg_non_member_calls(&k, &caller);
  if (n == w->nm_seen)
    return;
  w->nm_seen = n;
  fp->nm_kind = (uint32_t)k + 1;
  if (caller)
    wpg_site_locate(&w->sites, caller, &fp->nm_off, &fp->nm_module);
}

bool wpg_fp_agree(const wpg_fp *all, int n) {
  uint64_t sum = all[0].pair;
  for (int i = 1; i < n; i++) {
    if (wpg_fp_diff(&all[i], &all[0]) != WPG_F_NONE)
      return false;
    sum += all[i].pair;
  }
  return sum == 0;
}

uint64_t wpg_fp_hash(const wpg_fp *fp) {
  uint64_t h = mix(fp->kind, fp->count);
  h = mix(h, fp->dtype_h);
  h = mix(h, fp->numel_h);
  h = mix(h, fp->shape_h);
  h = mix(h, fp->dev_h);
  h = mix(h, (uint64_t)fp->redop << 8 | fp->premul);
  h = mix(h, fp->scalar);
  return mix(h, (uint64_t)(uint32_t)fp->root);
}

const char *wpg_field_name(wpg_field f) {
  static const char *const names[] = {
      [WPG_F_NONE] = "nothing",      [WPG_F_OP] = "operation",
      [WPG_F_SEQ] = "collective count", [WPG_F_DTYPE] = "dtype",
      [WPG_F_COUNT] = "count",
      [WPG_F_SHAPE] = "shape",       [WPG_F_DEVICE] = "device",
      [WPG_F_REDOP] = "reduce op",   [WPG_F_ROOT] = "root",
      [WPG_F_TAG] = "tag",           [WPG_F_SPLITS] = "split size",
      [WPG_F_HISTORY] = "history",
  };
  return names[f];
}
