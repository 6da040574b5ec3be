/* export_otlp.c - a trace store's operations to an OpenTelemetry collector
 * over OTLP/HTTP JSON (SCHEMA.md "Exporters"): one trace per job, one span
 * per operation per rank (a resource per rank: its host and rank), a
 * parent span per collective (in a resource of its own) that ties the
 * ranks' spans together, and for point-to-point no parent but a span link
 * from each RECV to the SEND it took. Sent in requests of at most BATCH spans; the
 * first failing request ends the export with its error. */
#include "otlp_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BATCH 2000

typedef struct batch {
  jout j;
  int spans;      /* in the request */
  int rank;       /* resource open for this rank; INT32_MIN none */
  bool span_first;
  const tr_otlp_conf *conf;
  int64_t timeout_ms;
  char *err;
  size_t errlen;
  int rc;
} batch;

static void request_open(batch *b) {
  b->j.len = 0;
  b->spans = 0;
  b->rank = INT32_MIN;
  jo_puts(&b->j, "{\"resourceSpans\":[");
}

static int request_send(batch *b) {
  if (b->rank != INT32_MIN)
    tr_otlp_resource_close(&b->j);
  jo_puts(&b->j, "]}");
  if (b->j.oom) {
    snprintf(b->err, b->errlen, "out of memory building an OTLP request");
    return DIST_E_NOMEM;
  }
  int rc = b->spans ? tr_otlp_post(b->conf, b->j.buf, b->j.len, b->timeout_ms, NULL, b->err,
                                   b->errlen)
                    : DIST_OK;
  request_open(b);
  return rc;
}

/* Adds a span for rank (-2: the parent resource) with host. */
static int add(batch *b, const char *job, const char *host, int rank, const tr_otlp_op *o) {
  if (b->spans == BATCH) {
    int rc = request_send(b);
    if (rc != DIST_OK)
      return rc;
  }
  if (b->rank != rank) {
    if (b->rank != INT32_MIN) {
      tr_otlp_resource_close(&b->j);
      jo_puts(&b->j, ",");
    }
    tr_otlp_resource_open(&b->j, job, host, rank < 0 ? -1 : rank);
    b->rank = rank;
    b->span_first = true;
  }
  tr_otlp_span(&b->j, b->span_first, job, o);
  b->span_first = false;
  b->spans++;
  return DIST_OK;
}

/* Every operation of every rank; a RECV carries the SEND it took
 * (TR_P2P_PAIRS, as the Chrome export's arrows) for its span link. */
static int rank_spans(sqlite3 *db, batch *b, const char *job, int64_t umm, int64_t t_end) {
  sqlite3_stmt *st;
  if (sqlite3_prepare_v2(db,
                         "WITH " TR_P2P_PAIRS " SELECT o.rank, o.group_id, o.seq, o.op, o.dtype,"
                         " o.state, o.bytes_in, coalesce(o.t_started_ns, o.t_enqueued_ns),"
                         " o.t_ended_ns, o.status, o.message, r.host, pp.s_rank, pp.s_seq,"
                         " o.root, coalesce(o.tag, 0), o.pair_seq"
                         " FROM operations o LEFT JOIN ranks r USING (rank)"
                         " LEFT JOIN p2p_pair pp ON pp.r_rank = o.rank"
                         " AND pp.group_id = o.group_id AND pp.r_seq = o.seq AND o.p2p"
                         " ORDER BY o.rank, o.group_id, o.seq", -1, &st, NULL))
    return DIST_E_INVAL;
  int rc = DIST_OK;
  while (rc == DIST_OK && sqlite3_step(st) == SQLITE_ROW) {
    int64_t start = sqlite3_column_int64(st, 7);
    int64_t end = sqlite3_column_type(st, 8) == SQLITE_NULL ? t_end : sqlite3_column_int64(st, 8);
    tr_otlp_op o = {
        .rank = sqlite3_column_int(st, 0), .group = sqlite3_column_int(st, 1),
        .seq = sqlite3_column_int64(st, 2), .op = (const char *)sqlite3_column_text(st, 3),
        .dtype = (const char *)sqlite3_column_text(st, 4),
        .state = (const char *)sqlite3_column_text(st, 5),
        .bytes = sqlite3_column_int64(st, 6), .start_unix_ns = start + umm,
        .end_unix_ns = (end > start ? end : start) + umm,
        .failed = sqlite3_column_int(st, 9) != 0,
        .message = (const char *)sqlite3_column_text(st, 10),
        .has_link = sqlite3_column_type(st, 12) != SQLITE_NULL,
        .link_rank = sqlite3_column_int(st, 12), .link_seq = sqlite3_column_int64(st, 13),
        .peer = sqlite3_column_type(st, 14) == SQLITE_NULL ? -1 : sqlite3_column_int(st, 14),
        .tag = sqlite3_column_int(st, 15), .pair_seq = sqlite3_column_int64(st, 16),
    };
    rc = add(b, job, (const char *)sqlite3_column_text(st, 11), o.rank, &o);
  }
  sqlite3_finalize(st);
  return rc;
}

/* One parent per collective; point-to-point operations have none. */
static int parent_spans(sqlite3 *db, batch *b, const char *job, int64_t umm, int64_t t_end) {
  sqlite3_stmt *st;
  if (sqlite3_prepare_v2(db,
                         "SELECT group_id, seq, min(op), min(dtype), max(bytes_in),"
                         " min(coalesce(t_started_ns, t_enqueued_ns)),"
                         " max(coalesce(t_ended_ns, ?1)), count(*), max(status != 0),"
                         " CASE WHEN sum(state = 'completed') = count(*) THEN 'completed'"
                         " ELSE 'incomplete' END FROM operations"
                         " WHERE op NOT IN " TR_P2P_OPS " GROUP BY group_id, seq"
                         " ORDER BY group_id, seq", -1, &st, NULL))
    return DIST_E_INVAL;
  sqlite3_bind_int64(st, 1, t_end);
  int rc = DIST_OK;
  while (rc == DIST_OK && sqlite3_step(st) == SQLITE_ROW) {
    int64_t start = sqlite3_column_int64(st, 5), end = sqlite3_column_int64(st, 6);
    tr_otlp_op o = {
        .rank = -1, .group = sqlite3_column_int(st, 0), .seq = sqlite3_column_int64(st, 1),
        .op = (const char *)sqlite3_column_text(st, 2),
        .dtype = (const char *)sqlite3_column_text(st, 3), .bytes = sqlite3_column_int64(st, 4),
        .start_unix_ns = start + umm, .end_unix_ns = (end > start ? end : start) + umm,
        .n_ranks = sqlite3_column_int(st, 7), .failed = sqlite3_column_int(st, 8) != 0,
        .state = (const char *)sqlite3_column_text(st, 9),
    };
    rc = add(b, job, NULL, -2, &o);
  }
  sqlite3_finalize(st);
  return rc;
}

int dist_trace_export_otlp(dist_trace *t, const char *endpoint, int64_t timeout_ms, char *err,
                           size_t errlen) {
  char dummy[8];
  if (!err) {
    err = dummy;
    errlen = sizeof dummy;
  }
  sqlite3 *db = dist_trace_sqlite(t);
  if (!db || (endpoint && !*endpoint)) {
    snprintf(err, errlen, "export_otlp: a trace is needed, and an endpoint that is not empty");
    return DIST_E_INVAL;
  }
  tr_otlp_conf conf;
  int crc = tr_otlp_conf_env(&conf, endpoint, timeout_ms, 10000, err, errlen);
  if (crc != DIST_OK)
    return crc;
  if (!conf.url[0]) {
    snprintf(err, errlen, "no OTLP endpoint: give one, or set OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, "
             "OTEL_EXPORTER_OTLP_ENDPOINT or DIST_OTLP_ENDPOINT");
    return DIST_E_INVAL;
  }
  if (tr_otlp_sdk_disabled()) {
    snprintf(err, errlen, "OTEL_SDK_DISABLED=true: no spans are sent to %s", conf.url);
    return DIST_E_NOTSUP;
  }
  char job[128] = "";
  tr_meta_get(db, "job_id", job, sizeof job);
  int64_t umm = 0, t_end = 0;
  sqlite3_stmt *st;
  if (sqlite3_prepare_v2(db, "SELECT unix_minus_mono_ns, coalesce(ended_ns, 0) FROM job", -1,
                         &st, NULL) == SQLITE_OK) {
    if (sqlite3_step(st) == SQLITE_ROW) {
      umm = sqlite3_column_int64(st, 0);
      t_end = sqlite3_column_int64(st, 1);
    }
    sqlite3_finalize(st);
  }
  batch b = {.conf = &conf, .timeout_ms = conf.timeout_ms, .err = err, .errlen = errlen};
  request_open(&b);
  int rc = rank_spans(db, &b, job, umm, t_end);
  if (rc == DIST_OK)
    rc = parent_spans(db, &b, job, umm, t_end);
  if (rc == DIST_OK)
    rc = request_send(&b);
  else if (rc == DIST_E_INVAL)
    snprintf(err, errlen, "query failed: %s", sqlite3_errmsg(db));
  free(b.j.buf);
  return rc;
}
