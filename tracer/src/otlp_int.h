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

/* --- where and how requests go (otlp_conf.c) --- */

#define TR_OTLP_MAX_KV 32

typedef struct tr_otlp_kv {
  char key[128];
  char value[512];
} tr_otlp_kv;

typedef struct tr_otlp_conf {
  char url[2048];           /* the traces URL; "" when no endpoint is set */
  char from[64];            /* what named it: a variable or "the command line" */
  int64_t timeout_ms;       /* per request */
  bool protobuf;            /* http/protobuf (else http/json, our default) */
  bool gzip;                /* Content-Encoding: gzip */
  char ca[1024], cert[1024], key[1024]; /* https: CA bundle, client pair */
  tr_otlp_kv headers[TR_OTLP_MAX_KV];
  int n_headers;
} tr_otlp_conf;

/* Reads the OTLP exporter variables (the file comment of otlp_conf.c):
 * base is the endpoint a caller names (distview --otlp URL), NULL to take
 * it from the variables; timeout_ms > 0 is the caller's explicit timeout,
 * else the variables', else dflt_ms. c->url stays "" when no endpoint is
 * set anywhere. DIST_E_INVAL with err naming the variable and what it
 * takes. OTEL_SDK_DISABLED is the caller's to check. */
int tr_otlp_conf_env(tr_otlp_conf *c, const char *base, int64_t timeout_ms, int64_t dflt_ms,
                     char *err, size_t len);
/* OTEL_SDK_DISABLED=true (case-insensitive, as the spec says). */
bool tr_otlp_sdk_disabled(void);
/* A "k=v,k2=v2" list with %XX escapes (OTEL_*_HEADERS,
 * OTEL_RESOURCE_ATTRIBUTES) into out[0, *n). DIST_E_INVAL naming name. */
int tr_otlp_list_parse(const char *name, const char *text, tr_otlp_kv *out, int cap, int *n,
                       char *err, size_t len);

/* POSTs an OTLP/JSON body to c->url: as it is, or transcoded to protobuf
 * (otlp_pb.c), gzip-compressed when c says so, with c's headers and TLS
 * files. DIST_OK on 2xx; DIST_E_BACKEND with the status and the start of
 * the answer; DIST_E_SYS when unreachable, past timeout_ms, or cancelled:
 * *cancel_at (NULL: none), a CLOCK_MONOTONIC time in ns that another
 * thread may set (0: none), ends it then. */
int tr_otlp_post(const tr_otlp_conf *c, const char *body, size_t len, int64_t timeout_ms,
                 _Atomic int64_t *cancel_at, char *err, size_t errlen);

/* --- OTLP/JSON to protobuf (otlp_pb.c) --- */

/* Transcodes an ExportTraceServiceRequest in OTLP/JSON (as otlp_json.c
 * writes it: hex ids, 64-bit integers as strings) into protobuf's wire
 * format; *out is malloc'd. DIST_E_INVAL with the place for JSON outside
 * that schema; DIST_E_NOMEM. */
int tr_otlp_json_to_pb(const char *json, size_t len, unsigned char **out, size_t *out_len,
                       char *err, size_t errlen);

#endif
