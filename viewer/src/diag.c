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
 * Then the job's own stored report may take over (diag_report.c: it wins
 * over rows cut short), and a crash outranks what it caused. The exit
 * status follows distrun: 10 desync, 11 hang, 12 died or failed. Last,
 * when distrun stored the job's verdict, it goes first and all of the
 * above becomes distview's own analysis that follows it (diag_verdict.c). */
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

static void finish(vw_model *m, vw_diag *d) {
  switch (d->kind) {
  case VW_DIAG_DESYNC: d->exit_code = VW_EXIT_DESYNC; break;
  case VW_DIAG_HANG: case VW_DIAG_STUCK: case VW_DIAG_DEADLOCK: d->exit_code = VW_EXIT_HANG; break;
  case VW_DIAG_DIED: case VW_DIAG_FAILED: d->exit_code = VW_EXIT_DIED; break;
  default: d->exit_code = VW_EXIT_OK;
  }
  snprintf(d->kind_name, sizeof d->kind_name, "%s", vw_diag_kind_name(d->kind));
  if (d->kind != VW_DIAG_NONE && d->group_id >= 0)
    snprintf(d->group_name, sizeof d->group_name, "%s", vw_group_name(m, d->group_id));
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
   * one the failed rows, through the merge's partial index op_failed when
   * the file has it (else every row). */
  sqlite3_stmt *st = vw_sql_prepare(
      m, deep ? "SELECT rank, group_id, seq, op, status, message FROM operations WHERE "
                "state = 'failed' ORDER BY t_enqueued_ns, rank, group_id, seq LIMIT 1"
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
    char msg[200], gl[96];
    vw_sql_text(st, 5, msg, sizeof msg);
    snprintf(d->summary, sizeof d->summary, "rank %d: %s #%lld in %s failed (status %d)%s%s",
             d->rank, d->op, (long long)d->seq, vw_group_label(m, d->group_id, gl, sizeof gl),
             sqlite3_column_int(st, 4),
             msg[0] ? ": " : "", msg);
    snprintf(d->text, sizeof d->text, "%s\n", d->summary);
  }
  sqlite3_finalize(st);
  return rc < 0 ? -1 : 0;
}

static int diagnose(vw_model *m, bool deep, vw_diag *d) {
  d->rank = d->report_rank = -1;
  d->group_id = d->report_group = -1;
  m->err[0] = '\0';
  d->t_ns = d->report_t = -1;
  if (vw_diag_stored_report(m, d) != 0)
    return -1;
  if (vw_diag_desync(m, deep, d) != 0)
    return -1;
  if (d->kind == VW_DIAG_NONE && vw_diag_hang(m, d) != 0)
    return -1;
  if (d->kind == VW_DIAG_NONE && !d->has_report && died_or_failed(m, deep, d) != 0)
    return -1;
  if (vw_diag_report_wins(d))
    vw_diag_use_report(m, d);
  if (vw_diag_deaths(m, d) != 0)
    return -1;
  if (vw_diag_left_pending(m, d) != 0)
    return -1;
  if (vw_diag_early_exit(m, d) != 0)
    return -1;
  vw_diag_odd_one_out(m, d);
  finish(m, d);
  return vw_diag_verdict(m, d);
}

int vw_diagnose(vw_model *m, bool deep, vw_diag *d) {
  memset(d, 0, sizeof *d);
  int rc = diagnose(m, deep, d);
  if (rc != 0)
    vw_diag_free(d); // a query failed (a damaged file) after the stored report was read
  return rc;
}
