/* export_chrome.c - the Chrome trace event format (Perfetto,
 * chrome://tracing) from a trace store (SCHEMA.md "Exporters").
 *
 * pid = rank, tid = group id; one complete event ("X") per operation per
 * rank, ts/dur in microseconds from the job's first time; name, process
 * and thread metadata; and for each collective seen on two or more ranks a
 * flow chain (s on the lowest rank, t on the middle ones, f on the last,
 * binding to the enclosing slice) so Perfetto draws arrows across ranks. */
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
      snprintf(name, sizeof name, "group %d%s%s", sqlite3_column_int(st, 1),
               desc && *desc ? " " : "", desc ? desc : "");
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

/* Complete events, then flows, in one pass ordered by collective. */
static int events(sqlite3 *db, jout *j, bool *first, int64_t t0, int64_t t_end) {
  sqlite3_stmt *st;
  if (sqlite3_prepare_v2(db,
                         "SELECT rank, group_id, seq, op, state, bytes_in, dtype, status,"
                         " coalesce(t_started_ns, t_enqueued_ns), t_ended_ns, message,"
                         " count(*) OVER (PARTITION BY group_id, seq),"
                         " row_number() OVER (PARTITION BY group_id, seq ORDER BY rank)"
                         " FROM operations ORDER BY group_id, seq, rank", -1, &st, NULL))
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
    if (sqlite3_column_type(st, 10) != SQLITE_NULL) {
      jo_puts(j, ",\"message\":");
      jo_str(j, (const char *)sqlite3_column_text(st, 10));
    }
    jo_puts(j, "}}");
    int n = sqlite3_column_int(st, 11), k = sqlite3_column_int(st, 12);
    if (n < 2)
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
