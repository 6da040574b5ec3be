/* diag.c - what went wrong, from the trace alone.
 *
 * A job that dies mid-collective often never gets to say why: the checking
 * layer's desync report or the monitor's diagnosis is only there when the
 * job lived long enough to write it. So besides reading a stored report,
 * this file computes the finding from the operation rows:
 *   - a desync: the first (group, seq) whose fingerprint fields (op, dtype,
 *     shape and element count where they must agree, root, reduce op)
 *     differ across ranks; the ranks outside the largest agreeing set are
 *     the culprits;
 *   - a hang: ranks blocked in (group, seq) that a member never entered;
 *     following "waits for" from a blocked rank ends at the rank to blame,
 *     the lagging one (its last completed op is named);
 *   - a deadlock: a cycle in that wait-for graph across groups;
 *   - a rank that crashed or was lost, or an operation that failed, when
 *     nothing else explains the end.
 * The exit status follows distrun: 10 desync, 11 hang, 12 died or failed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "diag_int.h"
#include "vw_sql.h"

const char *vw_diag_kind_name(int kind) {
  static const char *names[] = {"none", "desync", "hang", "stuck", "deadlock", "died", "failed"};
  return kind >= 0 && kind <= VW_DIAG_FAILED ? names[kind] : "?";
}

void vw_diag_free(vw_diag *d) {
  if (d) {
    free(d->report);
    d->report = NULL;
  }
}

/* --- stored reports ----------------------------------------------------------- */

static int stored_report(vw_model *m, vw_diag *d) {
  /* the first desync (later ones follow from it); the last diagnosis or
   * stall report (it saw the most) */
  static const char *kinds[] = {"desync_report", "diagnosis", "stall_report"};
  for (size_t i = 0; i < sizeof kinds / sizeof *kinds; i++) {
    vw_event ev;
    bool found;
    if (vw_model_event_of(m, kinds[i], i == 0, &ev, &found) != 0)
      return -1;
    if (!found)
      continue;
    d->has_report = true;
    snprintf(d->report_kind, sizeof d->report_kind, "%s", ev.kind);
    d->report_rank = ev.rank;
    d->report_group = ev.group_id;
    d->report_seq = ev.seq;
    d->report = ev.message ? ev.message : strdup("");
    return 0;
  }
  return 0;
}

/* --- the finding -------------------------------------------------------------- */

/* The rank a stored report blames: on the line holding `mark` ("<-" in a
 * desync report, "has not entered" in a diagnosis), the number after
 * "rank ". -1 when the report does not say. */
static int report_culprit(const char *report, const char *mark) {
  const char *at = report ? strstr(report, mark) : NULL;
  if (!at)
    return -1;
  const char *line = at;
  while (line > report && line[-1] != '\n')
    line--;
  const char *r = strstr(line, "rank ");
  int rank = -1;
  if (r && r < at && sscanf(r, "rank %d", &rank) != 1)
    rank = -1;
  return rank;
}

/* Whether the stored report is about another operation than the rows'
 * finding (or the rows found nothing): the report wins then, because a
 * job killed right after reporting leaves rank files whose last rows
 * never reached the disk, and a finding on such rows is a guess. */
static bool report_wins(const vw_diag *d) {
  if (!d->has_report)
    return false;
  if (d->kind == VW_DIAG_NONE)
    return true;
  bool desync = strcmp(d->report_kind, "desync_report") == 0;
  if (desync != (d->kind == VW_DIAG_DESYNC))
    return desync;   // a desync report beats a hang read from the rows; not the reverse
  return d->report_seq > 0 && (d->report_group != d->group_id || d->report_seq != d->seq);
}

static void finish(vw_model *m, vw_diag *d) {
  if (report_wins(d)) {
    bool desync = strcmp(d->report_kind, "desync_report") == 0;
    char rows[320] = "";
    if (d->kind != VW_DIAG_NONE)
      snprintf(rows, sizeof rows, "%s", d->summary);
    d->kind = desync ? VW_DIAG_DESYNC : VW_DIAG_HANG;
    d->group_id = d->report_group;
    d->seq = d->report_seq;
    d->op[0] = '\0';
    vw_op ops[1];
    int n = 0;
    if (d->seq > 0 && vw_model_collective(m, d->group_id, d->seq, ops, 1, &n) == 0 && n)
      snprintf(d->op, sizeof d->op, "%s", ops[0].op);
    d->rank = report_culprit(d->report, desync ? "<-" : "has not entered");
    d->n_culprits = d->rank >= 0;
    d->culprits[0] = d->rank;
    d->n_blocked = d->n_cycle = 0;
    d->field[0] = '\0';
    const char *nl = d->report ? strchr(d->report, '\n') : NULL;
    snprintf(d->summary, sizeof d->summary, "%s (reported by rank %d): %.*s",
             desync ? "desync" : "hang", d->report_rank,
             nl ? (int)(nl - d->report) : 200, d->report ? d->report : "");
    snprintf(d->text, sizeof d->text, "%.3000s%s%.300s%s", d->report ? d->report : "",
             rows[0] ? "\n(the rows alone, which may have lost their last records, say: " : "",
             rows, rows[0] ? ")" : "");
  }
  switch (d->kind) {
  case VW_DIAG_DESYNC: d->exit_code = VW_EXIT_DESYNC; break;
  case VW_DIAG_HANG: case VW_DIAG_STUCK: case VW_DIAG_DEADLOCK: d->exit_code = VW_EXIT_HANG; break;
  case VW_DIAG_DIED: case VW_DIAG_FAILED: d->exit_code = VW_EXIT_DIED; break;
  default: d->exit_code = VW_EXIT_OK;
  }
}

/* A rank that crashed or was lost, or a failed operation, when nothing
 * above explained the end. */
static int died_or_failed(vw_model *m, bool deep, vw_diag *d) {
  for (int i = 0; i < m->job.nranks; i++) {
    const vw_rank_info *r = &m->job.ranks[i];
    if (strcmp(r->end_state, "crashed") && strcmp(r->end_state, "lost"))
      continue;
    d->kind = VW_DIAG_DIED;
    d->rank = r->rank;
    d->culprits[d->n_culprits++] = r->rank;
    snprintf(d->summary, sizeof d->summary, "rank %d %s (host %s, pid %d) with no other cause",
             r->rank, r->end_state, r->host, r->pid);
    snprintf(d->text, sizeof d->text, "%s\n", d->summary);
    return 0;
  }
  /* The quick look reads each rank's last 64 rows (op_by_rank); the deep
   * one every row. */
  sqlite3_stmt *st = vw_sql_prepare(
      m, deep ? "SELECT rank, group_id, seq, op, status, message FROM operations WHERE "
                "state = 'failed' ORDER BY t_enqueued_ns LIMIT 1"
              : "SELECT rank, group_id, seq, op, status, message FROM (SELECT * FROM "
                "operations WHERE rank = ?1 ORDER BY t_enqueued_ns DESC LIMIT 64) WHERE "
                "state = 'failed' ORDER BY t_enqueued_ns LIMIT 1");
  if (!st)
    return -1;
  int rc = SQLITE_DONE;
  for (int i = 0; i < (deep ? 1 : m->job.nranks) && rc == SQLITE_DONE; i++) {
    if (!deep) {
      sqlite3_reset(st);
      sqlite3_bind_int(st, 1, m->job.ranks[i].rank);
    }
    rc = vw_sql_step(m, st);
  }
  if (rc == SQLITE_ROW) {
    d->kind = VW_DIAG_FAILED;
    d->rank = sqlite3_column_int(st, 0);
    d->culprits[d->n_culprits++] = d->rank;
    d->group_id = sqlite3_column_int(st, 1);
    d->seq = sqlite3_column_int64(st, 2);
    vw_sql_text(st, 3, d->op, sizeof d->op);
    char msg[200];
    vw_sql_text(st, 5, msg, sizeof msg);
    snprintf(d->summary, sizeof d->summary, "rank %d: %s #%lld in group %d failed (status %d)%s%s",
             d->rank, d->op, (long long)d->seq, d->group_id, sqlite3_column_int(st, 4),
             msg[0] ? ": " : "", msg);
    snprintf(d->text, sizeof d->text, "%s\n", d->summary);
  }
  sqlite3_finalize(st);
  return rc < 0 ? -1 : 0;
}

int vw_diagnose(vw_model *m, bool deep, vw_diag *d) {
  memset(d, 0, sizeof *d);
  d->rank = d->report_rank = -1;
  d->group_id = d->report_group = -1;
  m->err[0] = '\0';
  if (stored_report(m, d) != 0)
    return -1;
  if (vw_diag_desync(m, deep, d) != 0)
    return -1;
  if (d->kind == VW_DIAG_NONE && vw_diag_hang(m, d) != 0)
    return -1;
  if (d->kind == VW_DIAG_NONE && !d->has_report && died_or_failed(m, deep, d) != 0)
    return -1;
  finish(m, d);
  return 0;
}
