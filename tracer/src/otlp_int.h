/* otlp_int.h - building OTLP/JSON span batches and sending them
 * (otlp_json.c, otlp_http.c); used by export_otlp.c and the runtime's live
 * exporter. */
#ifndef DIST_TRACE_OTLP_INT_H
#define DIST_TRACE_OTLP_INT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "json_out.h"
#include "reader_int.h"

#define DIST_TRACE_VERSION "1"

typedef struct tr_otlp_op {
  int rank;             /* -1: the collective's parent span */
  int group;
  int64_t seq;
  const char *op, *dtype, *state, *message;
  int64_t bytes;
  int64_t start_unix_ns, end_unix_ns;
  bool failed;
  int n_ranks;          /* parent spans */
  bool has_link;        /* a RECV: a span link to the SEND it took */
  int link_rank;        /*   that SEND's rank and seq (without pair_seq) */
  int64_t link_seq;
  /* Point to point (version 2 traces): */
  int peer;             /* root: a send's destination, a receive's source
                           (global rank); -1 unknown */
  int tag;
  int64_t pair_seq;     /* operations.pair_seq, 0 none */
} tr_otlp_op;

/* Point-to-point operations (SEND, RECV, their byte forms, BATCH_P2P) get
 * no collective parent: their (group, seq) names no collective across
 * ranks. A RECV is tied to its SEND by a span link instead. The span id of
 * a send or receive with a pair number is a function of its pair (job,
 * group, sender, receiver, tag, pair number, side), so a receiving rank
 * names the SEND it took without reading the sender's file: the live
 * exporter links too. Others (a batch, a receive from any source, a
 * version 1 trace) take (job, rank, group, seq, "p2p"). */
bool tr_otlp_is_p2p(const char *op);

void tr_otlp_trace_id(const char *job, char out[33]);
void tr_otlp_span_id(const char *job, int rank, int group, int64_t seq, char out[17]);
void tr_otlp_parent_id(const char *job, int group, int64_t seq, char out[17]);
/* The span id of o (a rank's span, a parent, a send or receive by its
 * pair) and of the SEND a receive o links to. */
void tr_otlp_op_span_id(const char *job, const tr_otlp_op *o, char out[17]);
void tr_otlp_link_id(const char *job, const tr_otlp_op *o, char out[17]);
/* {"resource":...,"scopeSpans":[{"scope":...,"spans":[  (rank -1: none) */
void tr_otlp_resource_open(jout *j, const char *job, const char *host, int rank);
void tr_otlp_resource_close(jout *j);
void tr_otlp_span(jout *j, bool first, const char *job, const tr_otlp_op *o);

/* POSTs body to <endpoint>/v1/traces. DIST_OK on 2xx; DIST_E_BACKEND with
 * the status and the start of the answer; DIST_E_SYS when unreachable,
 * past timeout_ms, or cancelled: *cancel_at (NULL: none), a CLOCK_MONOTONIC
 * time in ns that another thread may set (0: none), ends it then. */
int tr_otlp_post(const char *endpoint, const char *body, size_t len, int64_t timeout_ms,
                 _Atomic int64_t *cancel_at, char *err, size_t errlen);

#endif
