/* otlp_json.c - operations as OTLP/JSON spans (SCHEMA.md "Exporters"),
 * shared by the exporter over a trace store and the live exporter.
 *
 * OTLP/JSON differs from protobuf's JSON mapping in two ways that matter
 * here: trace and span ids are hex (32 and 16 digits), and 64-bit integers
 * (times, intValue) are strings. Ids are pure functions of the job, group,
 * sequence number and rank (a send or receive: of its pair, otlp_int.h),
 * so spans sent by different processes (live) tie together without
 * coordination. Collective spans are children of their collective's
 * parent; point-to-point spans have no parent, and a RECV links to its
 * SEND (its pair's send side: live too). */
#include "otlp_int.h"

#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void hex_id(const char *text, size_t bytes, char *out) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  EVP_Digest(text, strlen(text), md, &n, EVP_sha256(), NULL);
  for (size_t i = 0; i < bytes; i++)
    snprintf(out + 2 * i, 3, "%02x", md[i]);
}

void tr_otlp_trace_id(const char *job, char out[33]) { hex_id(job, 16, out); }

void tr_otlp_span_id(const char *job, int rank, int group, int64_t seq, char out[17]) {
  char key[256];
  snprintf(key, sizeof key, "%s/%d/%d/%lld", job, rank, group, (long long)seq);
  hex_id(key, 8, out);
}

void tr_otlp_parent_id(const char *job, int group, int64_t seq, char out[17]) {
  char key[256];
  snprintf(key, sizeof key, "%s/%d/%lld/coll", job, group, (long long)seq);
  hex_id(key, 8, out);
}

static bool paired_kind(const char *op) {
  return op && (!strcmp(op, "SEND") || !strcmp(op, "RECV") || !strcmp(op, "SEND_BYTES") ||
                !strcmp(op, "RECV_BYTES"));
}
static bool is_send(const char *op) {
  return !strcmp(op, "SEND") || !strcmp(op, "SEND_BYTES");
}

/* A send's or receive's id by its pair: both ranks compute it alike. */
static void pair_id(const char *job, int group, int src, int dst, int tag, int64_t k, bool send,
                    char out[17]) {
  char key[256];
  snprintf(key, sizeof key, "%s/p2p/%d/%d>%d/%d/%lld/%s", job, group, src, dst, tag,
           (long long)k, send ? "send" : "recv");
  hex_id(key, 8, out);
}

/* A point-to-point operation without a pair number. */
static void p2p_seq_id(const char *job, int rank, int group, int64_t seq, char out[17]) {
  char key[256];
  snprintf(key, sizeof key, "%s/%d/%d/%lld/p2p", job, rank, group, (long long)seq);
  hex_id(key, 8, out);
}

void tr_otlp_op_span_id(const char *job, const tr_otlp_op *o, char out[17]) {
  if (o->rank < 0)
    tr_otlp_parent_id(job, o->group, o->seq, out);
  else if (!tr_otlp_is_p2p(o->op)) /* collectives and p2p are numbered apart */
    tr_otlp_span_id(job, o->rank, o->group, o->seq, out);
  else if (paired_kind(o->op) && o->pair_seq > 0 && o->peer >= 0)
    pair_id(job, o->group, is_send(o->op) ? o->rank : o->peer,
            is_send(o->op) ? o->peer : o->rank, o->tag, o->pair_seq, is_send(o->op), out);
  else
    p2p_seq_id(job, o->rank, o->group, o->seq, out);
}

void tr_otlp_link_id(const char *job, const tr_otlp_op *o, char out[17]) {
  if (o->pair_seq > 0 && o->peer >= 0)
    pair_id(job, o->group, o->peer, o->rank, o->tag, o->pair_seq, true, out);
  else
    p2p_seq_id(job, o->link_rank, o->group, o->link_seq, out);
}

static void attr_str(jout *j, bool *first, const char *key, const char *v) {
  if (!v)
    return;
  jo_printf(j, "%s{\"key\":\"%s\",\"value\":{\"stringValue\":", *first ? "" : ",", key);
  jo_str(j, v);
  jo_puts(j, "}}");
  *first = false;
}

/* A key that is not ours: escaped as any string. */
static void attr_str_key(jout *j, bool *first, const char *key, const char *v) {
  jo_puts(j, *first ? "{\"key\":" : ",{\"key\":");
  jo_str(j, key);
  jo_puts(j, ",\"value\":{\"stringValue\":");
  jo_str(j, v);
  jo_puts(j, "}}");
  *first = false;
}

static void attr_int(jout *j, bool *first, const char *key, int64_t v) {
  jo_printf(j, "%s{\"key\":\"%s\",\"value\":{\"intValue\":\"%lld\"}}", *first ? "" : ",", key,
            (long long)v);
  *first = false;
}

void tr_otlp_resource_open(jout *j, const char *job, const char *host, int rank) {
  char h[256] = "";
  if (!host || !*host) {
    gethostname(h, sizeof h - 1);
    host = h;
  }
  /* OTEL_RESOURCE_ATTRIBUTES (checked by tr_otlp_conf_env before any
   * request is built): its keys join ours; ours win where they meet */
  static const char *const ours[] = {"service.name", "host.name", "dist.job_id", "dist.rank"};
  tr_otlp_kv ra[TR_OTLP_MAX_KV];
  int n_ra = 0;
  char e[8];
  const char *ra_text = getenv("OTEL_RESOURCE_ATTRIBUTES");
  if (!ra_text || tr_otlp_list_parse("", ra_text, ra, TR_OTLP_MAX_KV, &n_ra, e, 0) != DIST_OK)
    n_ra = 0;
  /* service.name: DIST_OTLP_SERVICE, OTEL_SERVICE_NAME, the resource's, libdist */
  const char *svc = getenv("DIST_OTLP_SERVICE");
  if (!svc || !*svc)
    svc = getenv("OTEL_SERVICE_NAME");
  for (int i = 0; (!svc || !*svc) && i < n_ra; i++)
    if (!strcmp(ra[i].key, "service.name"))
      svc = ra[i].value;
  bool first = true;
  jo_puts(j, "{\"resource\":{\"attributes\":[");
  attr_str(j, &first, "service.name", svc && *svc ? svc : "libdist");
  attr_str(j, &first, "host.name", host);
  attr_str(j, &first, "dist.job_id", job);
  if (rank >= 0)
    attr_int(j, &first, "dist.rank", rank);
  for (int i = 0; i < n_ra; i++) {
    bool mine = false;
    for (size_t k = 0; k < sizeof ours / sizeof *ours; k++)
      mine |= !strcmp(ra[i].key, ours[k]);
    if (!mine)
      attr_str_key(j, &first, ra[i].key, ra[i].value);
  }
  jo_puts(j, "]},\"scopeSpans\":[{\"scope\":{\"name\":\"libdist.tracer\",\"version\":\""
             DIST_TRACE_VERSION "\"},\"spans\":[");
}

void tr_otlp_resource_close(jout *j) { jo_puts(j, "]}]}"); }

bool tr_otlp_is_p2p(const char *op) {
  static const char *const p2p[] = {"SEND", "RECV", "SEND_BYTES", "RECV_BYTES", "BATCH_P2P"};
  for (size_t i = 0; op && i < sizeof p2p / sizeof *p2p; i++)
    if (!strcmp(op, p2p[i]))
      return true;
  return false;
}

void tr_otlp_span(jout *j, bool first, const char *job, const tr_otlp_op *o) {
  char trace[33], span[17], parent[17];
  tr_otlp_trace_id(job, trace);
  tr_otlp_parent_id(job, o->group, o->seq, parent);
  tr_otlp_op_span_id(job, o, span);
  jo_printf(j, "%s{\"traceId\":\"%s\",\"spanId\":\"%s\",", first ? "" : ",", trace, span);
  if (o->rank >= 0 && !tr_otlp_is_p2p(o->op))
    jo_printf(j, "\"parentSpanId\":\"%s\",", parent);
  jo_printf(j, "\"name\":\"%s #%lld\",\"kind\":1,\"startTimeUnixNano\":\"%lld\","
               "\"endTimeUnixNano\":\"%lld\",\"attributes\":[",
            o->op, (long long)o->seq, (long long)o->start_unix_ns, (long long)o->end_unix_ns);
  bool af = true;
  if (o->rank >= 0)
    attr_int(j, &af, "dist.rank", o->rank);
  attr_int(j, &af, "dist.group", o->group);
  attr_int(j, &af, "dist.seq", o->seq);
  if (o->pair_seq > 0) /* "SEND #k to rank B" */
    attr_int(j, &af, "dist.pair_seq", o->pair_seq);
  if (o->rank >= 0 && o->peer >= 0 && tr_otlp_is_p2p(o->op))
    attr_int(j, &af, "dist.peer", o->peer);
  attr_str(j, &af, "dist.op", o->op);
  attr_int(j, &af, "dist.bytes", o->bytes);
  attr_str(j, &af, "dist.dtype", o->dtype);
  attr_str(j, &af, "dist.state", o->state);
  if (o->rank < 0 && o->n_ranks > 0) /* unknown in live export */
    attr_int(j, &af, "dist.ranks", o->n_ranks);
  jo_puts(j, "]");
  if (o->has_link) { /* the proto's field order: attributes, links, status */
    char send[17];
    tr_otlp_link_id(job, o, send);
    jo_printf(j, ",\"links\":[{\"traceId\":\"%s\",\"spanId\":\"%s\"}]", trace, send);
  }
  if (o->failed) {
    jo_puts(j, ",\"status\":{\"message\":"); /* the proto's field order */
    jo_str(j, o->message ? o->message : o->state);
    jo_puts(j, ",\"code\":2}");
  }
  jo_puts(j, "}");
}
