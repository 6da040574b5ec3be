/* cmd_summary.c - `distview summary [--json] TRACE`: the job, its ranks and
 * groups, operation counts per op, GPU time per op kind for each group
 * that has 'gpu' events (only when the trace has them), event counts per
 * kind, the stragglers the monitor named (events of kind 'straggler'), and
 * the outcome (the quick diagnosis). Exit 0 whatever the outcome; 1
 * unreadable. */
#include <string.h>

#include "vw.h"
#include "vw_sql.h"

static const char usage[] = "usage: distview summary [--json] TRACE\n"
                            "Job, ranks, groups, counts per operation, GPU time per op\n"
                            "(CUDA traces), outcome.\n";

static void json_job(vw_model *m, FILE *f) {
  const vw_job *j = &m->job;
  fputs("{\"job_id\":", f);
  vw_json_str(f, j->job_id);
  fputs(",\"kind\":", f);
  vw_json_str(f, j->kind);
  fprintf(f, ",\"world_size\":%d,\"t0_ns\":%lld,\"t1_ns\":%lld,\"span_ns\":%lld,\"ranks\":[",
          j->world_size, (long long)j->t0, (long long)j->t1, (long long)(j->t1 - j->t0));
  for (int i = 0; i < j->nranks; i++) {
    const vw_rank_info *r = &j->ranks[i];
    fprintf(f, "%s{\"rank\":%d,\"host\":", i ? "," : "", r->rank);
    vw_json_str(f, r->host);
    fprintf(f, ",\"pid\":%d,\"end_state\":", r->pid);
    vw_json_str(f, r->end_state);
    fprintf(f, ",\"dropped_records\":%lld}", (long long)r->dropped);
  }
  fputs("],\"groups\":[", f);
  for (int i = 0; i < j->ngroups; i++) {
    const vw_group *g = &j->groups[i];
    fprintf(f, "%s{\"id\":%d,\"name\":", i ? "," : "", g->id);
    vw_json_str(f, g->name);
    fputs(",\"description\":", f);
    vw_json_str(f, g->desc);
    fputs(",\"backend\":", f);
    vw_json_str(f, g->backend);
    fprintf(f, ",\"size\":%d,\"max_seq\":%lld,\"members\":[", g->size, (long long)g->max_seq);
    for (int k = 0; k < g->size; k++)
      fprintf(f, "%s%d", k ? "," : "", g->members[k]);
    fputs("]}", f);
  }
  fputs("]", f);
}

static void text_job(vw_model *m, FILE *f) {
  const vw_job *j = &m->job;
  char span[32];
  fprintf(f, "job %s (%s file%s%s)\n", j->job_id, j->kind[0] ? j->kind : "?",
          j->writer[0] ? ", " : "", j->writer);
  int k, mx;
  char run[128];
  if (vw_model_attempt(m, &k, &mx, run, sizeof run))
    fprintf(f, "attempt %d of job %s (restart %d; at most %d restarts; distview --attempt N "
            "opens another)\n", k, run, k, mx);
  fprintf(f, "world size %d, %d rank%s in the trace, %d group%s, span %s\n", j->world_size,
          j->nranks, j->nranks == 1 ? "" : "s", j->ngroups, j->ngroups == 1 ? "" : "s",
          vw_fmt_dur(j->t1 - j->t0, span, sizeof span));
  fprintf(f, "\nranks:\n");
  for (int i = 0; i < j->nranks; i++)
    fprintf(f, "  rank %-4d host %-16s pid %-8d %s%s\n", j->ranks[i].rank, j->ranks[i].host,
            j->ranks[i].pid, j->ranks[i].end_state, j->ranks[i].dropped > 0 ? " (records dropped)" : "");
  fprintf(f, "\ngroups:\n");
  for (int i = 0; i < j->ngroups; i++) {
    const vw_group *g = &j->groups[i];
    char mem[256];
    fprintf(f, "  group %-3d %-20s %-6s %3d ranks [%s], operations #1..#%lld\n", g->id,
            vw_group_name(m, g->id),
            g->backend, g->size, vw_fmt_ranks(g->members, g->size, mem, sizeof mem),
            (long long)g->max_seq);
  }
  if (j->skipped[0])
    fprintf(f, "\nskipped at merge:\n%s\n", j->skipped);
}

static int counts(vw_model *m, FILE *f, bool json) {
  /* A merged file carries the totals (op_totals, written by the merge):
   * a few rows, where the query below reads every operation. */
  bool totals = vw_sql_scalar(m, "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND "
                                 "name = 'op_totals'", 0, NULL) > 0;
  sqlite3_stmt *st = vw_sql_prepare(
      m, totals ? "SELECT op, n, completed, failed, timed_out, in_flight, bytes_in FROM "
                  "op_totals ORDER BY n DESC, op"
                : "SELECT op, count(*), sum(state = 'completed'), sum(state = 'failed'), "
                  "sum(state = 'timed_out'), sum(state IN ('enqueued', 'started')), "
                  "sum(bytes_in) FROM operations GROUP BY op ORDER BY count(*) DESC, op");
  if (!st)
    return -1;
  fputs(json ? ",\"ops\":[" : "\noperations per op (rows over all ranks):\n", f);
  if (!json)
    fprintf(f, "  %-24s %10s %10s %8s %9s %10s %14s\n", "op", "count", "completed", "failed",
            "timed_out", "in_flight", "bytes_in");
  int rc, n = 0;
  while ((rc = vw_sql_step(m, st)) == SQLITE_ROW) {
    char op[32];
    vw_sql_text(st, 0, op, sizeof op);
    long long v[6];
    for (int i = 0; i < 6; i++)
      v[i] = (long long)vw_sql_i64(st, i + 1);
    if (json) {
      fprintf(f, "%s{\"op\":", n ? "," : "");
      vw_json_str(f, op);
      fprintf(f, ",\"count\":%lld,\"completed\":%lld,\"failed\":%lld,\"timed_out\":%lld,"
              "\"in_flight\":%lld,\"bytes_in\":%lld}", v[0], v[1], v[2], v[3], v[4], v[5]);
    } else {
      fprintf(f, "  %-24s %10lld %10lld %8lld %9lld %10lld %14lld\n", op, v[0], v[1], v[2], v[3],
              v[4], v[5]);
    }
    n++;
  }
  sqlite3_finalize(st);
  if (json)
    fputs("]", f);
  return rc < 0 ? -1 : 0;
}

/* Per group with 'gpu' events, one line: count, mean and max time on the
 * GPU per op kind (rows over all ranks). Nothing without them, so the
 * summary of a CPU trace reads as it always did. */
static int gpu_times(vw_model *m, FILE *f, bool json) {
  if (!m->has_gpu)
    return 0;
  sqlite3_stmt *st = vw_sql_prepare(
      m, "SELECT e.group_id, coalesce(o.op, '?'), count(*), avg(g), max(g) FROM (SELECT rank, "
         "group_id, seq, " VW_SQL_GPU_NS " AS g FROM events WHERE kind = 'gpu' AND message "
         "LIKE 'gpu_ns=%') e LEFT JOIN operations o ON o.group_id = e.group_id AND "
         "o.seq = e.seq AND o.rank = e.rank GROUP BY e.group_id, 2 "
         "ORDER BY e.group_id, count(*) DESC, 2");
  if (!st)
    return -1;
  int rc, n = 0, last = -1;
  while ((rc = vw_sql_step(m, st)) == SQLITE_ROW) {
    int gid = (int)vw_sql_i64(st, 0);
    char op[32], gl[96], mean[32], max[32];
    vw_sql_text(st, 1, op, sizeof op);
    long long count = (long long)vw_sql_i64(st, 2), mx = (long long)vw_sql_i64(st, 4);
    double avg = sqlite3_column_double(st, 3);
    if (json) {
      fprintf(f, "%s{\"group\":%d,\"op\":", n ? "," : ",\"gpu\":[", gid);
      vw_json_str(f, op);
      fprintf(f, ",\"count\":%lld,\"mean_ns\":%.0f,\"max_ns\":%lld}", count, avg, mx);
    } else {
      if (gid != last)
        fprintf(f, "%s  %s:", n ? "\n" : "\nGPU time per op (events of kind 'gpu'):\n",
                vw_group_label(m, gid, gl, sizeof gl));
      fprintf(f, "%s %s %lld, mean %s, max %s", gid == last ? ";" : "", op, count,
              vw_fmt_dur((int64_t)(avg + 0.5), mean, sizeof mean),
              vw_fmt_dur(mx, max, sizeof max));
    }
    last = gid;
    n++;
  }
  sqlite3_finalize(st);
  fputs(json ? (n ? "]" : "") : (n ? "\n" : ""), f);
  return rc < 0 ? -1 : 0;
}

static int event_counts(vw_model *m, FILE *f, bool json) {
  sqlite3_stmt *st = vw_sql_prepare(m, "SELECT kind, count(*) FROM events GROUP BY kind "
                                       "ORDER BY kind");
  if (!st)
    return -1;
  fputs(json ? ",\"events\":{" : "\nevents:", f);
  int rc, n = 0;
  while ((rc = vw_sql_step(m, st)) == SQLITE_ROW) {
    char kind[32];
    vw_sql_text(st, 0, kind, sizeof kind);
    if (json) {
      fputs(n ? "," : "", f);
      vw_json_str(f, kind);
      fprintf(f, ":%lld", (long long)sqlite3_column_int64(st, 1));
    } else {
      fprintf(f, " %s %lld", kind, (long long)sqlite3_column_int64(st, 1));
    }
    n++;
  }
  sqlite3_finalize(st);
  fputs(json ? "}" : n ? "\n" : " none\n", f);
  return rc < 0 ? -1 : 0;
}

/* Every straggler the monitor named: its warning, verbatim. */
static int stragglers(vw_model *m, FILE *f, bool json) {
  sqlite3_stmt *st = vw_sql_prepare(m, "SELECT group_id, peer, seq, message FROM events "
                                       "WHERE kind = 'straggler' ORDER BY t_ns, rank");
  if (!st)
    return -1;
  int rc, n = 0;
  while ((rc = vw_sql_step(m, st)) == SQLITE_ROW) {
    char msg[512];
    vw_sql_text(st, 3, msg, sizeof msg);
    if (json) {
      fprintf(f, "%s{\"group\":%lld,\"rank\":%lld,\"seq\":%lld,\"message\":",
              n ? "," : ",\"stragglers\":[", (long long)vw_sql_i64(st, 0),
              (long long)vw_sql_i64(st, 1), (long long)vw_sql_i64(st, 2));
      vw_json_str(f, msg);
      fputs("}", f);
    } else {
      fprintf(f, "%s  %s\n", n ? "" : "\nstragglers:\n", msg);
    }
    n++;
  }
  sqlite3_finalize(st);
  if (json)
    fputs(n ? "]" : ",\"stragglers\":[]", f);
  return rc < 0 ? -1 : 0;
}

/* The outcome: the verdict distrun stored (then distview's own analysis),
 * or the quick diagnosis of the rows. */
static const char *outcome_line(const vw_diag *d) {
  return d->kind || d->has_verdict ? d->summary : "no desync, hang or failure in this trace";
}

static void text_outcome(const vw_diag *d, FILE *f) {
  fprintf(f, "\noutcome: %s\n", outcome_line(d));
  if (d->has_verdict)
    fprintf(f, "  %s\n", d->own_line);
}

static void json_outcome(const vw_diag *d, FILE *f) {
  fputs(",\"outcome\":{\"kind\":", f);
  vw_json_str(f, d->kind_name);
  fprintf(f, ",\"exit_code\":%d,\"summary\":", d->exit_code);
  vw_json_str(f, outcome_line(d));
  fprintf(f, ",\"source\":\"%s\",\"group\":%d,\"group_name\":",
          d->has_verdict ? "distrun" : "distview", d->group_id);
  vw_json_str(f, d->group_name);
  fputs(",\"culprits\":[", f);
  for (int i = 0; i < d->n_culprits; i++)
    fprintf(f, "%s%d", i ? "," : "", d->culprits[i]);
  fputs("]", f);
  if (d->has_verdict) {
    fputs(",\"own\":", f);
    vw_json_str(f, d->own_line);
  }
  fputs("}}\n", f);
}

int vw_cmd_summary(int argc, char **argv) {
  bool json;
  int rc = 0;
  int i = vw_parse_common(argc, argv, usage, &json, 0, &rc);
  if (i < 0)
    return rc;
  vw_model *m;
  if ((rc = vw_open_or_report("distview summary", argv[i], &m)) != 0)
    return rc;
  vw_diag d;
  FILE *f = stdout;
  if (json)
    json_job(m, f);
  else
    text_job(m, f);
  if (counts(m, f, json) != 0 || gpu_times(m, f, json) != 0 || event_counts(m, f, json) != 0 ||
      stragglers(m, f, json) != 0 ||
      vw_diagnose(m, false, &d) != 0) {
    fprintf(stderr, "distview summary: %s\n", m->err);
    vw_model_close(m);
    return VW_EXIT_UNREADABLE;
  }
  if (json)
    json_outcome(&d, f);
  else
    text_outcome(&d, f);
  vw_diag_free(&d);
  vw_model_close(m);
  return 0;
}
