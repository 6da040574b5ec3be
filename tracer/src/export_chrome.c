/* export_chrome.c - the Chrome trace event format (Perfetto,
 * chrome://tracing) from a trace store (SCHEMA.md "Exporters").
 *
 * pid = rank, tid = group id; one complete event ("X") per operation per
 * rank, ts/dur in microseconds from the job's first time; name, process
 * and thread metadata; and arrows across ranks (flows, binding to the
 * slice enclosing their ts, which is the slice's own start):
 *   - each collective seen on two or more ranks is one flow chain (s on
 *     the lowest rank, t on the middle ones, f on the last);
 *   - each send goes to its own receive. A send and a receive are paired
 *     the way the transport matches them (TR_P2P_PAIRS in reader_int.h,
 *     shared with the OTLP exporter's span links): by group, sender,
 *     receiver and tag, the n-th send from A to B with the n-th receive at
 *     B from A. Never by sequence number: ranks number their
 *     point-to-point calls among their other calls, so one (group, seq)
 *     may hold a SEND on one rank and an unrelated RECV or collective on
 *     another. */
#include "json_out.h"
#include "reader_int.h"

#include <stdio.h>
#include <string.h>

static void metadata(sqlite3 *db, jout *j, bool *first) {
  sqlite3_stmt *st;
  if (sqlite3_prepare_v2(db, "SELECT rank, host, pid FROM ranks ORDER BY rank", -1, &st,
                         NULL) == SQLITE_OK) {
    while (sqlite3_step(st) == SQLITE_ROW) {
      jo_printf(j, "%s\n{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,\"args\":{\"name\":",
                *first ? "" : ",", sqlite3_column_int(st, 0));
      char name[400];
      snprintf(name, sizeof name, "rank %d (%s pid %d)", sqlite3_column_int(st, 0),
               (const char *)sqlite3_column_text(st, 1), sqlite3_column_int(st, 2));
      jo_str(j, name);
      jo_printf(j, "}},{\"name\":\"process_sort_index\",\"ph\":\"M\",\"pid\":%d,"
                   "\"args\":{\"sort_index\":%d}}", sqlite3_column_int(st, 0),
                sqlite3_column_int(st, 0));
      *first = false;
    }
    sqlite3_finalize(st);
  }
  if (sqlite3_prepare_v2(db, "SELECT DISTINCT o.rank, o.group_id, g.description FROM"
                             " operations o LEFT JOIN groups g USING (group_id)", -1, &st,
                         NULL) == SQLITE_OK) {
    while (sqlite3_step(st) == SQLITE_ROW) {
      const char *desc = (const char *)sqlite3_column_text(st, 2);
      char name[300];
      snprintf(name, sizeof name, "group %d%s%s%s", sqlite3_column_int(st, 1),
               desc && *desc ? " (" : "", desc ? desc : "", desc && *desc ? ")" : "");
      jo_printf(j, "%s\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":%d,"
                   "\"args\":{\"name\":", *first ? "" : ",", sqlite3_column_int(st, 0),
                sqlite3_column_int(st, 1));
      jo_str(j, name);
      jo_puts(j, "}}");
      *first = false;
    }
    sqlite3_finalize(st);
  }
}

static double us(int64_t t, int64_t t0) { return (double)(t - t0) / 1000.0; }

/* Point-to-point flow ids: above every collective's group << 40 | seq
 * (groups below 4096), below 2^53 so JavaScript viewers keep them exact. */
#define P2P_FLOW_ID0 (1ll << 52)

/* Complete events, then flows, in one pass ordered by collective. */
static int events(sqlite3 *db, jout *j, bool *first, int64_t t0, int64_t t_end) {
  sqlite3_stmt *st;
  if (sqlite3_prepare_v2(db,
                         "SELECT rank, group_id, seq, op, state, bytes_in, dtype, status,"
                         " coalesce(t_started_ns, t_enqueued_ns), t_ended_ns, message,"
                         " count(*) OVER w, row_number() OVER (w ORDER BY rank), p2p, pair_seq,"
                         " root"
                         " FROM operations"
                         " WINDOW w AS (PARTITION BY group_id, seq, p2p)"
                         " ORDER BY group_id, seq, rank", -1, &st, NULL))
    return DIST_E_INVAL;
  while (sqlite3_step(st) == SQLITE_ROW) {
    int rank = sqlite3_column_int(st, 0), g = sqlite3_column_int(st, 1);
    int64_t seq = sqlite3_column_int64(st, 2);
    int64_t start = sqlite3_column_int64(st, 8);
    int64_t end = sqlite3_column_type(st, 9) == SQLITE_NULL ? t_end : sqlite3_column_int64(st, 9);
    const char *op = (const char *)sqlite3_column_text(st, 3);
    jo_printf(j, "%s\n{\"name\":\"%s #%lld\",\"cat\":\"dist\",\"ph\":\"X\",\"pid\":%d,"
                 "\"tid\":%d,\"ts\":%.3f,\"dur\":%.3f,\"args\":{\"group\":%d,\"seq\":%lld,"
                 "\"op\":\"%s\",\"bytes\":%lld,\"dtype\":",
              *first ? "" : ",", op, (long long)seq, rank, g, us(start, t0),
              end > start ? us(end, start) : 0.0, g, (long long)seq, op,
              (long long)sqlite3_column_int64(st, 5));
    *first = false;
    jo_str(j, (const char *)sqlite3_column_text(st, 6));
    jo_puts(j, ",\"state\":");
    jo_str(j, (const char *)sqlite3_column_text(st, 4));
    jo_printf(j, ",\"status\":%d", sqlite3_column_int(st, 7));
    if (sqlite3_column_type(st, 14) != SQLITE_NULL) /* "SEND #k to rank B" */
      jo_printf(j, ",\"pair_seq\":%lld,\"peer\":%d", (long long)sqlite3_column_int64(st, 14),
                sqlite3_column_int(st, 15));
    if (sqlite3_column_type(st, 10) != SQLITE_NULL) {
      jo_puts(j, ",\"message\":");
      jo_str(j, (const char *)sqlite3_column_text(st, 10));
    }
    jo_puts(j, "}}");
    int n = sqlite3_column_int(st, 11), k = sqlite3_column_int(st, 12);
    if (n < 2 || sqlite3_column_int(st, 13))  // point-to-point: p2p_flows pairs them
      continue;
    const char *ph = k == 1 ? "s" : k == n ? "f" : "t";
    /* inside the slice: flows bind to the slice enclosing their ts */
    jo_printf(j, ",\n{\"name\":\"%s #%lld\",\"cat\":\"dist.flow\",\"ph\":\"%s\",\"id\":%lld,"
                 "\"pid\":%d,\"tid\":%d,\"ts\":%.3f%s}",
              op, (long long)seq, ph, (long long)(((int64_t)g << 40) | seq), rank, g,
              us(start, t0), k == n ? ",\"bp\":\"e\"" : "");
  }
  sqlite3_finalize(st);
  return DIST_OK;
}

static void flow(jout *j, const char *name, const char *ph, int64_t id, int rank, int g,
                 double ts) {
  jo_puts(j, ",\n{\"name\":");
  jo_str(j, name);
  jo_printf(j, ",\"cat\":\"dist.flow\",\"ph\":\"%s\",\"id\":%lld,\"pid\":%d,\"tid\":%d,"
               "\"ts\":%.3f%s}", ph, (long long)id, rank, g, ts, ph[0] == 'f' ? ",\"bp\":\"e\"" : "");
}

/* One flow per send, to the receive the transport matched it with (see
 * the top of the file); a send or receive without its other half (the
 * peer's file is missing, the job ended first) has no arrow. */
static int p2p_flows(sqlite3 *db, jout *j, int64_t t0) {
  sqlite3_stmt *st;
  if (sqlite3_prepare_v2(db, "WITH " TR_P2P_PAIRS " SELECT s_rank, group_id, s_seq, s_ts,"
                             " r_rank, r_seq, r_ts FROM p2p_pair ORDER BY s_ts, s_rank",
                         -1, &st, NULL))
    return DIST_E_INVAL;
  int64_t id = P2P_FLOW_ID0;
  while (sqlite3_step(st) == SQLITE_ROW) {
    int g = sqlite3_column_int(st, 1);
    char name[96];
    snprintf(name, sizeof name, "SEND #%lld -> RECV #%lld", (long long)sqlite3_column_int64(st, 2),
             (long long)sqlite3_column_int64(st, 5));
    flow(j, name, "s", id, sqlite3_column_int(st, 0), g, us(sqlite3_column_int64(st, 3), t0));
    flow(j, name, "f", id++, sqlite3_column_int(st, 4), g, us(sqlite3_column_int64(st, 6), t0));
  }
  sqlite3_finalize(st);
  return DIST_OK;
}

int dist_trace_export_chrome(dist_trace *t, const char *out_path, char *err, size_t errlen) {
  sqlite3 *db = dist_trace_sqlite(t);
  if (!db || !out_path) {
    if (err)
      snprintf(err, errlen, "export_chrome: no trace or no output path");
    return DIST_E_INVAL;
  }
  FILE *f = strcmp(out_path, "-") ? fopen(out_path, "w") : stdout;
  if (!f) {
    if (err)
      snprintf(err, errlen, "cannot write %s", out_path);
    return DIST_E_SYS;
  }
  int64_t t0 = 0, t_end = 0;
  sqlite3_stmt *st;
  if (sqlite3_prepare_v2(db, "SELECT min(t_enqueued_ns), max(coalesce(t_ended_ns,"
                             " t_started_ns, t_enqueued_ns)) FROM operations", -1, &st,
                         NULL) == SQLITE_OK) {
    if (sqlite3_step(st) == SQLITE_ROW) {
      t0 = sqlite3_column_int64(st, 0);
      t_end = sqlite3_column_int64(st, 1);
    }
    sqlite3_finalize(st);
  }
  jout j = {.f = f};
  bool first = true;
  jo_puts(&j, "{\"displayTimeUnit\":\"ns\",\"traceEvents\":[");
  metadata(db, &j, &first);
  int rc = events(db, &j, &first, t0, t_end);
  if (rc == DIST_OK)
    rc = p2p_flows(db, &j, t0);
  jo_puts(&j, "\n]}\n");
  bool bad = ferror(f);
  if (f != stdout)
    bad |= fclose(f) != 0;
  else
    fflush(f);
  if (rc == DIST_OK && bad) {
    if (err)
      snprintf(err, errlen, "writing %s failed", out_path);
    return DIST_E_SYS;
  }
  if (rc != DIST_OK && err)
    snprintf(err, errlen, "query failed: %s", sqlite3_errmsg(db));
  return rc;
}
