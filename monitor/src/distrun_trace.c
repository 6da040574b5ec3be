/* distrun_trace.c - at the end of the job, however it ended, the ranks'
 * trace files ($DIST_TRACE/<job id>/rank-R.db, and the ring dumps of ranks
 * that died of a signal) are merged into one indexed trace.db (or
 * --trace-out FILE), through the tracer's reader library. A bad rank file
 * is named and skipped; the merge never changes the job's exit status, and
 * says what it did at INFO only, so the job's report stays the last thing
 * distrun prints. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <dist/trace_reader.h>

#include "distrun.h"

/* The verdict's row in the merged trace.db, so distview says what distrun
 * said (tracer/SCHEMA.md, verdict). */
static void store_verdict(const char *out, const drun_verdict *v) {
  char op[32] = "";
  if (v->f.op[0])
    snprintf(op, sizeof op, "%s", v->f.op);
  char *text = NULL;
  size_t n = strlen(v->line) + (v->report ? strlen(v->report) : 0) + 2;
  text = dist__malloc(n);
  if (!text)
    return;
  snprintf(text, n, "%s%s%s", v->line, v->report ? "\n" : "", v->report ? v->report : "");
  dist_trace_verdict tv = {
      .kind = v->kind, .exit_status = v->status, .culprits = v->culprits,
      .n_culprits = (size_t)v->n_culprits, .group_id = v->f.group_id,
      .group_name = v->f.group_name[0] ? v->f.group_name : NULL, .op = op[0] ? op : NULL,
      .seq = (int64_t)v->f.seq, .field = v->f.field[0] ? v->f.field : NULL,
      .site = v->f.site[0] ? v->f.site : NULL, .reported_by = v->reported_by,
      .text = v->status == DRUN_EXIT_OK ? "success" : text,
  };
  char err[512];
  if (dist_trace_set_verdict(out, &tv, err, sizeof err) != DIST_OK)
    dist__run_say("could not store the verdict in %s: %s", out, err);
  dist__free(text);
}

void dist__run_trace_merge(const drun_cfg *c, const char *job_id, const drun_verdict *v) {
  const char *base = getenv("DIST_TRACE");
  if (base && !strcmp(base, "0"))
    return;
  char dir[4096];
  snprintf(dir, sizeof dir, "%s/%s", base && *base ? base : "dist-trace", job_id);
  struct stat st;
  if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
    DIST_LOG(INFO, RUN, "no trace in %s (the program does not record one)", dir);
    return;
  }
  const char *out = c->trace_out ? c->trace_out : "trace.db";
  dist_trace_merge_report rep;
  char err[512];
  if (dist_trace_merge(dir, out, &rep, err, sizeof err) != DIST_OK) {
    dist__run_say("trace merge failed: %s", err);
    return;
  }
  if (rep.files_skipped)
    DIST_LOG(WARNING, RUN, "trace: skipped %d file(s):\n%s", rep.files_skipped, rep.skipped);
  DIST_LOG(INFO, RUN, "trace: %d rank(s), %lld operations merged into %s", rep.ranks_merged,
           (long long)rep.operations, out);
  store_verdict(out, v);
}
