/* cmd_diagnose.c - `distview diagnose [--json] TRACE`: the job's verdict
 * when distrun stored one (and exits with its status), then distview's own
 * analysis: the first divergence or hang across ranks, computed from the
 * trace (every collective is checked for fingerprint differences), with the
 * job's own report if it stored one. Without a verdict it exits as distrun
 * would have: 0 nothing found, 10 desync, 11 hang or deadlock, 12 a rank
 * died or an operation failed; 1 for an unreadable trace, 2 for a usage
 * error. */
#include <stdio.h>
#include <string.h>

#include "vw.h"

static const char usage[] =
    "usage: distview diagnose [--json] TRACE\n"
    "The job's verdict when distrun stored one, then the first desync, hang or\n"
    "deadlock across ranks from the operation rows (and the job's own report).\n"
    "Exit: the verdict's exit status; without one 0 none found, 10 desync,\n"
    "      11 hang/deadlock, 12 rank died or op failed; 1 unreadable trace, 2 usage.\n";

static void json_list(FILE *f, const char *name, const int *v, int n) {
  fprintf(f, ",\"%s\":[", name);
  for (int i = 0; i < n; i++)
    fprintf(f, "%s%d", i ? "," : "", v[i]);
  fputs("]", f);
}

/* Keys added with the verdict: who decided, the group's name, the call
 * site, and with a verdict distview's own analysis. */
static void print_json_more(const vw_diag *d, FILE *f) {
  fputs(",\"group_name\":", f);
  vw_json_str(f, d->group_name);
  fputs(",\"site\":", f);
  vw_json_str(f, d->site);
  fprintf(f, ",\"source\":\"%s\"", d->has_verdict ? "distrun" : "distview");
  if (!d->has_verdict)
    return;
  fprintf(f, ",\"reported_by\":%d,\"dropped\":%lld,\"own\":{\"kind\":", d->reported_by,
          (long long)d->dropped);
  vw_json_str(f, vw_diag_kind_name(d->own_kind));
  fprintf(f, ",\"exit_code\":%d", d->own_exit_code);
  json_list(f, "culprits", d->own_culprits, d->own_n_culprits);
  fprintf(f, ",\"agrees\":%s,\"summary\":", d->own_agrees ? "true" : "false");
  vw_json_str(f, d->own_summary);
  fputs("}", f);
}

static void print_json(const vw_diag *d, FILE *f) {
  fputs("{\"kind\":", f);
  vw_json_str(f, d->kind_name);
  fprintf(f, ",\"exit_code\":%d", d->exit_code);
  if (d->kind != VW_DIAG_NONE || d->has_verdict) {
    fprintf(f, ",\"group\":%d,\"seq\":%lld,\"op\":", d->group_id, (long long)d->seq);
    vw_json_str(f, d->op);
    fprintf(f, ",\"rank\":%d", d->rank);
    json_list(f, "culprits", d->culprits, d->n_culprits);
    json_list(f, "blocked", d->blocked, d->n_blocked);
    if (d->kind == VW_DIAG_HANG) {
      fprintf(f, ",\"last_completed\":{\"seq\":%lld,\"op\":", (long long)d->last_done_seq);
      vw_json_str(f, d->last_done_op);
      fputs("}", f);
    }
    if (d->kind == VW_DIAG_DESYNC) {
      fputs(",\"fields\":", f);
      vw_json_str(f, d->field);
    }
    if (d->kind == VW_DIAG_HANG && d->field[0]) { /* what "site" is: "own code", "store wait" */
      fputs(",\"where\":", f);
      vw_json_str(f, d->field);
    }
    if (d->kind == VW_DIAG_DEADLOCK) {
      fputs(",\"cycle\":[", f);
      for (int i = 0; i < d->n_cycle; i++)
        fprintf(f, "%s{\"rank\":%d,\"group\":%d,\"seq\":%lld}", i ? "," : "", d->cycle[i],
                d->cycle_group[i], (long long)d->cycle_seq[i]);
      fputs("]", f);
    }
  }
  print_json_more(d, f);
  fputs(",\"summary\":", f);
  vw_json_str(f, d->kind ? d->summary : "no desync, hang or failure in this trace");
  fputs(",\"text\":", f);
  vw_json_str(f, d->text);
  fputs(",\"report\":", f);
  if (d->has_report) {
    fputs("{\"kind\":", f);
    vw_json_str(f, d->report_kind);
    fprintf(f, ",\"rank\":%d,\"group\":%d,\"seq\":%lld,\"message\":", d->report_rank,
            d->report_group, (long long)d->report_seq);
    vw_json_str(f, d->report);
    fputs("}", f);
  } else {
    fputs("null", f);
  }
  fputs("}\n", f);
}

int vw_cmd_diagnose(int argc, char **argv) {
  bool json;
  int rc = 0;
  int i = vw_parse_common(argc, argv, usage, &json, 0, &rc);
  if (i < 0)
    return rc;
  vw_model *m;
  if ((rc = vw_open_or_report("distview diagnose", argv[i], &m)) != 0)
    return rc;
  vw_diag d;
  if (vw_diagnose(m, true, &d) != 0) {
    fprintf(stderr, "distview diagnose: %s\n", m->err);
    vw_model_close(m);
    return VW_EXIT_UNREADABLE;
  }
  if (json) {
    print_json(&d, stdout);
  } else if (d.has_verdict) {
    printf("%s", d.text);   // the verdict, then distview's own analysis
  } else if (d.kind == VW_DIAG_NONE) {
    printf("no desync, hang or failure in this trace\n");
  } else {
    printf("%s", d.text);
    if (d.has_report && strcmp(d.text, d.report) != 0)
      printf("\nthe job's own %s (rank %d):\n%s\n", d.report_kind, d.report_rank, d.report);
  }
  rc = d.exit_code;
  vw_diag_free(&d);
  vw_model_close(m);
  return rc;
}
