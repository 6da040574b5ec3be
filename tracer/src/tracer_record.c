/* tracer_record.c - observer events become ring records (trace_rec.h).
 *
 * This is the hot path of every operation: no lock, no allocation, no
 * system call. An operation's first record (issued or enqueued) takes two
 * slots (head + counts and shape); its later states one slot; records with
 * a message (failures, reports, log lines, a group's description) take
 * text slots after the head. */
#include "tracer_int.h"

#include <stdio.h>
#include <string.h>

static int32_t global_of(const dist_event *ev, int root) {
  const dist_pg_info *g = ev->group;
  if (root < 0 || !g || root >= g->size || !g->global_ranks)
    return -1;
  return g->global_ranks[root];
}

static void fill_head(tracer *t, tr_head *h, const dist_event *ev, unsigned nslots) {
  memset(h, 0, sizeof *h);
  h->kind = (uint8_t)ev->kind;
  h->op = 0xff;
  h->dtype = 0xff;
  h->redop = 0xff;
  h->nslots = (uint8_t)nslots;
  h->group_id = ev->group_id;
  h->status = ev->status;
  h->seq = ev->seq;
  h->t_ns = ev->t_ns + tr_skew(t);
  h->root = -1;
}

static int64_t numel_of(const dist_tensor *ts, size_t n) {
  int64_t sum = 0;
  for (size_t i = 0; i < n; i++)
    sum += dist_tensor_numel(&ts[i]);
  return sum;
}

/* Writes the text of a record into its slots after `first`. */
static void put_text(tracer *t, uint64_t idx, unsigned nslots, const char *text, size_t len) {
  tr_text slot;
  for (unsigned k = 0; k < nslots; k++) {
    size_t off = (size_t)k * TR_TEXT_PER_SLOT;
    size_t n = len > off ? len - off : 0;
    n = n > TR_TEXT_PER_SLOT ? TR_TEXT_PER_SLOT : n;
    memset(slot.text, 0, sizeof slot.text);
    memcpy(slot.text, text + off, n);
    tr_ring_put(&t->ring, idx + k, &slot);
  }
}

static unsigned text_slots(size_t len) {
  size_t n = (len + TR_TEXT_PER_SLOT) / TR_TEXT_PER_SLOT; /* room for the NUL */
  return n > TR_MAX_SLOTS - 2 ? TR_MAX_SLOTS - 2 : (unsigned)n;
}

static void op_first(tracer *t, const dist_event *ev) {
  const dist_coll *c = ev->coll;
  tr_head h;
  tr_shape sh;
  fill_head(t, &h, ev, 2);
  h.op = (uint8_t)c->kind;
  h.aux = (int64_t)c->pair_seq; /* ops.pair: a send's or receive's number in its pair */
  h.flags = TR_F_SHAPE | ((c->flags & DIST_COLL_ASYNC) ? TR_F_ASYNC : 0);
  h.root = global_of(ev, c->root);
  h.tag = c->tag;
  h.caller = (uint64_t)(uintptr_t)ev->caller;
  const dist_tensor *first = c->n_inputs ? &c->inputs[0]
                             : c->n_outputs ? &c->outputs[0]
                             : c->n_p2p ? &c->p2p[0].tensor : NULL;
  bool reduces = c->kind == DIST_OP_ALL_REDUCE || c->kind == DIST_OP_REDUCE ||
                 c->kind == DIST_OP_REDUCE_SCATTER || c->kind == DIST_OP_REDUCE_SCATTER_TENSOR;
  h.redop = reduces ? (uint8_t)c->redop.kind : 0xff;
  sh.stamp = 0;
  sh.numel_in = numel_of(c->inputs, c->n_inputs);
  sh.numel_out = numel_of(c->outputs, c->n_outputs);
  for (size_t i = 0; i < c->n_p2p; i++)
    (c->p2p[i].is_send ? &sh.numel_in : &sh.numel_out)[0] += dist_tensor_numel(&c->p2p[i].tensor);
  sh.n_inputs = (uint16_t)c->n_inputs;
  sh.n_outputs = (uint16_t)c->n_outputs;
  sh.pad = 0;
  memset(sh.shape, 0, sizeof sh.shape);
  if (first) {
    h.dtype = (uint8_t)first->dtype;
    h.ndim = (uint8_t)first->ndim;
    for (int i = 0; i < first->ndim && i < TR_MAX_DIMS; i++)
      sh.shape[i] = first->shape[i];
  }
  uint64_t idx = tr_ring_claim(&t->ring, 2);
  tr_ring_put(&t->ring, idx, &h);
  tr_ring_put(&t->ring, idx + 1, &sh);
}

static void with_text(tracer *t, const dist_event *ev, const tr_head *base, const char *text) {
  size_t len = strlen(text);
  unsigned ns = text_slots(len);
  tr_head h = *base;
  h.nslots = (uint8_t)(1 + ns);
  uint64_t idx = tr_ring_claim(&t->ring, 1 + ns);
  tr_ring_put(&t->ring, idx, &h);
  put_text(t, idx + 1, ns, text, len);
  (void)ev;
}

static void group_event(tracer *t, const dist_event *ev) {
  tr_head h;
  fill_head(t, &h, ev, 1);
  if (ev->kind == DIST_EV_GROUP_DESTROYED || !ev->group) {
    tr_ring_put(&t->ring, tr_ring_claim(&t->ring, 1), &h);
    return;
  }
  const dist_pg_info *g = ev->group;
  char text[TR_TEXT_PER_SLOT * (TR_MAX_SLOTS - 2)];
  int n = snprintf(text, sizeof text, "%s\x1f%s\x1f%s\x1f[", g->name ? g->name : "",
                   g->desc ? g->desc : "", g->backend ? g->backend : "");
  for (int i = 0; i < g->size && n > 0 && (size_t)n < sizeof text - 32; i++)
    n += snprintf(text + n, sizeof text - (size_t)n, "%s%d", i ? "," : "", g->global_ranks[i]);
  if (n > 0 && (size_t)n < sizeof text)
    snprintf(text + n, sizeof text - (size_t)n, "]\x1f%lld", (long long)g->timeout_ms);
  with_text(t, ev, &h, text);
}

#if DIST_OBSERVER_ABI_VERSION >= 3
/* A statistics block: the event (with its printed message) as any other,
 * then one record per row for the stats table. */
static void stats_rows(tracer *t, const dist_event *ev) {
  for (size_t i = 0; i < ev->n_stats; i++) {
    const dist_stats_row *r = &ev->stats[i];
    tr_head h;
    tr_stats st;
    fill_head(t, &h, ev, 2);
    h.kind = TR_KIND_STATS;
    h.flags = TR_F_SHAPE; /* the second slot is binary, not text */
    h.op = (uint8_t)r->op;
    h.seq = r->count;
    h.caller = r->bytes;
    h.aux = r->p50_ns;
    h.root = r->straggler_rank;
    memset(&st, 0, sizeof st);
    st.p99_ns = r->p99_ns;
    st.lateness_ns = r->lateness_ns;
    uint64_t idx = tr_ring_claim(&t->ring, 2);
    tr_ring_put(&t->ring, idx, &h);
    tr_ring_put(&t->ring, idx + 1, &st);
  }
}
#endif

#if DIST_OBSERVER_ABI_VERSION >= 4
/* An operation's GPU times: an events row of kind 'gpu' at the GPU start
 * (so the merge moves it onto the job clock with the rank's offset, as
 * every t_ns), its duration in the message (tracer/SCHEMA.md). */
static void gpu_times(tracer *t, const dist_event *ev) {
  tr_head h;
  fill_head(t, &h, ev, 1);
  if (ev->coll)
    h.op = (uint8_t)ev->coll->kind;
  h.t_ns = ev->gpu_start_ns + tr_skew(t);
  char text[64];
  snprintf(text, sizeof text, "gpu_ns=%lld", (long long)(ev->gpu_end_ns - ev->gpu_start_ns));
  with_text(t, ev, &h, text);
}
#endif

void tr_record_event(tracer *t, const dist_event *ev) {
  switch (ev->kind) {
#if DIST_OBSERVER_ABI_VERSION >= 4
  case DIST_EV_OP_GPU:
    gpu_times(t, ev);
    return;
#endif
  case DIST_EV_OP_ISSUED:
  case DIST_EV_OP_ENQUEUED:
    op_first(t, ev);
    return;
  case DIST_EV_GROUP_CREATED:
  case DIST_EV_GROUP_DESTROYED:
    group_event(t, ev);
    return;
  default:
    break;
  }
  tr_head h;
  fill_head(t, &h, ev, 1);
  if (ev->coll) {
    h.op = (uint8_t)ev->coll->kind;
    h.aux = (int64_t)ev->coll->pair_seq;
  }
  if (ev->kind == DIST_EV_PEER_LOST)
    h.root = ev->peer;
#if DIST_OBSERVER_ABI_VERSION >= 5
  if (ev->kind == DIST_EV_STRAGGLER)
    h.root = ev->peer; /* events.peer: the straggler */
#endif
  if (ev->message && ev->message[0])
    with_text(t, ev, &h, ev->message);
  else
    tr_ring_put(&t->ring, tr_ring_claim(&t->ring, 1), &h);
#if DIST_OBSERVER_ABI_VERSION >= 3
  if (ev->kind == DIST_EV_STATS && ev->stats)
    stats_rows(t, ev);
#endif
}

void tr_record_clock(tracer *t, int64_t offset_ns, int64_t rtt_ns) {
  tr_head h;
  memset(&h, 0, sizeof h);
  h.kind = TR_KIND_CLOCK;
  h.op = h.dtype = h.redop = 0xff;
  h.nslots = 1;
  h.group_id = -1;
  h.seq = (uint64_t)rtt_ns;
  h.t_ns = dist_clock_ns() + tr_skew(t);
  h.root = -1;
  h.aux = offset_ns;
  tr_ring_put(&t->ring, tr_ring_claim(&t->ring, 1), &h);
}

void tr_record_note(tracer *t, unsigned kind, int32_t status, const char *text) {
  tr_head h;
  memset(&h, 0, sizeof h);
  h.kind = (uint8_t)kind;
  h.op = h.dtype = h.redop = 0xff;
  h.nslots = 1;
  h.group_id = -1;
  h.status = status;
  h.t_ns = dist_clock_ns() + tr_skew(t);
  h.root = -1;
  with_text(t, NULL, &h, text);
}
