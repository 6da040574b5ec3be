/* distrun_verdict.c - the job's one verdict, decided once when every rank
 * has ended, by rules rather than by which rank spoke first
 * (ARCHITECTURE.md, "One verdict"):
 *   - a rank's own death (a fatal signal, an exit code, a kill distrun did
 *     not send) or early end outranks what it caused: the survivors' lost
 *     peers, the "left the group" records of ranks distrun then ended;
 *   - otherwise a posted cause decides (a desync: the first operation
 *     whose fingerprints differ; a hang: the monitor's diagnosis, which
 *     names where the waits end, never a rank merely blocked);
 *   - an interrupt of distrun is "interrupted", not a crash.
 * The exit status was chosen by the supervisor (distrun_main.c) with the
 * same rules; this file names the kind and the culprits for it, prints the
 * verdict last and hands it to the trace (distrun_trace.c). */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "distrun.h"

static const char *kind_of(int status, const drun_first *first) {
  switch (status) {
  case DRUN_EXIT_OK: return "success";
  case DRUN_EXIT_DESYNC: return "desync";
  case DRUN_EXIT_HANG: return "hang";
  case DRUN_EXIT_LAUNCH: return "launch";
  case DRUN_EXIT_RANK_DIED:
    if (first->rank >= 0 && first->early)
      return "early_exit";
    return first->rank >= 0 && dist__run_is_crash(first->wstatus) ? "crash" : "died";
  case DRUN_EXIT_OTHER: return first->rank < 0 && !first->lost_store ? "interrupted" : "other";
  default: return "other";
  }
}

static bool names(const dist__cause_fields *f, int rank) {
  for (int i = 0; i < f->n_culprits; i++)
    if (f->culprits[i] == rank)
      return true;
  return false;
}

void dist__run_verdict_make(int status, const drun_first *first, const drun_posted *posted,
                            drun_verdict *v) {
  memset(v, 0, sizeof *v);
  v->status = status;
  v->kind = kind_of(status, first);
  v->reported_by = -1;
  v->f.group_id = -1;
  /* A rank that called on alone is the culprit whoever its report names
   * (the ranks that ended before it): the report says where it was. */
  bool by_report = posted->have && !first->odd &&
                   (status == DRUN_EXIT_DESYNC || status == DRUN_EXIT_HANG);
  if (by_report) {
    v->reported_by = posted->rank;
    v->f = posted->f;
    v->n_culprits = posted->f.n_culprits;
    memcpy(v->culprits, posted->f.culprits, sizeof(int) * (size_t)v->n_culprits);
    v->report = posted->text;
  } else if (status == DRUN_EXIT_DESYNC && first->odd) {
    v->culprits[v->n_culprits++] = first->rank;
    v->reported_by = posted->rank;
    v->f = posted->f;
    v->f.n_culprits = 1;
    v->f.culprits[0] = first->rank;
    v->f.site[0] = '\0'; /* the report's line is the one the leavers never reached: its
                            own is found from its record (dist__run_verdict_site) */
    v->report = posted->text;
  } else if (status != DRUN_EXIT_OK && first->rank >= 0) {
    v->culprits[v->n_culprits++] = first->rank;
    v->report = dist__run_crash_first(first->rank);
    /* Its own account (a NaN it refused, say), or a survivor's view that
     * blames the same rank; not a survivor's report about someone else. */
    if (!v->report && posted->have &&
        (posted->rank == first->rank || names(&posted->f, first->rank))) {
      v->report = posted->text;
      if (posted->rank == first->rank)
        v->f = posted->f; /* where it failed, in its own words */
    }
  }
}

void dist__run_verdict_print(const drun_verdict *v) {
  dist__run_say("%s%s", v->line, v->tail);
  if (!v->report)
    return;
  size_t n = strlen(v->report);
  /* One write, so the report is not interleaved with anything. */
  char *buf = dist__malloc(n + 2);
  if (!buf)
    return;
  memcpy(buf, v->report, n);
  size_t k = n;
  if (k == 0 || buf[k - 1] != '\n')
    buf[k++] = '\n';
  ssize_t w = write(2, buf, k);
  (void)w;
  dist__free(buf);
}

bool dist__run_verdict_one_death(const drun_verdict *v) {
  bool dead = !strcmp(v->kind, "crash") || !strcmp(v->kind, "died") ||
              !strcmp(v->kind, "early_exit");
  return dead && v->n_culprits == 1;
}

void dist__run_verdict_place(const drun_cfg *c, drun_job *job, drun_verdict *v, char *clause,
                             size_t len) {
  clause[0] = '\0';
  drun_position p;
  if (!dist__run_verdict_one_death(v))
    return;
  if (v->f.group_id >= 0) /* its own account named the operation (a NaN it refused) */
    return;
  if (!dist__run_rank_position(c, job, v->culprits[0], &p))
    return;
  v->f.group_id = p.gid;
  v->by_record = true;
  snprintf(v->f.group_name, sizeof v->f.group_name, "%s", p.desc);
  snprintf(v->f.op, sizeof v->f.op, "%s",
           p.kind >= 0 && p.kind < DIST_OP_COUNT_ ? dist_op_name((dist_op_kind)p.kind) : "");
  v->f.seq = p.seq;
  snprintf(v->f.site, sizeof v->f.site, "%s", p.site);
  if (p.refused) { /* published at its exit, or before: no call came after it */
    v->refused = true;
    if (p.gid < 0) { /* a handle of no group it knew (never created) */
      v->f.group_id = -1;
      v->f.group_name[0] = '\0';
      v->f.seq = 0;
      snprintf(clause, len, "; its last call was refused: %s, called from %s: %s", v->f.op,
               p.site, p.why);
    } else {
      snprintf(clause, len, "; its last call was refused: group %d (%s) %s #%llu, called from "
               "%s: %s", p.gid, p.desc, v->f.op, p.seq, p.site, p.why);
    }
    return;
  }
  /* As of its last heartbeat (once a second): it may have gone further. */
  snprintf(clause, len, "; as of its last record it %s group %d (%s) %s #%llu, called from %s",
           p.in_op ? "was in" : "had last completed", p.gid, p.desc, v->f.op, p.seq, p.site);
}

/* A verdict that names one rank's operation but not its line (a desync
 * the transport found, at OFF, which records no call site; the report of
 * a member that left, whose culprit is the rank that called on alone):
 * the line from that rank's own record, when the record is at that very
 * operation (group, kind and number). */
void dist__run_verdict_site(const drun_cfg *c, drun_job *job, drun_verdict *v) {
  drun_position p;
  if (v->f.site[0] || v->n_culprits != 1 || v->f.group_id < 0 || !v->f.seq || !v->f.op[0])
    return;
  if (!dist__run_rank_position(c, job, v->culprits[0], &p) || !p.site[0])
    return;
  const char *op = p.kind >= 0 && p.kind < DIST_OP_COUNT_ ? dist_op_name((dist_op_kind)p.kind) : "";
  if (p.gid == v->f.group_id && p.seq == v->f.seq && !strcmp(op, v->f.op))
    snprintf(v->f.site, sizeof v->f.site, "%s", p.site);
}

/* The report of a member that left the group, and called on elsewhere,
 * names the collective it never called, at its peers' line: the verdict
 * names its own call, the destroy (where the bug is, on every transport
 * alike: the monitor's report over shared memory names it already). */
void dist__run_verdict_left(const drun_cfg *c, drun_job *job, drun_verdict *v, char *clause,
                            size_t len) {
  clause[0] = '\0';
  drun_left d;
  if (strcmp(v->kind, "desync") || v->n_culprits != 1 || v->f.group_id < 0 ||
      strcmp(v->f.field, "collective count") || !v->report ||
      !strstr(v->report, " left the group (destroyed it or exited) before this collective") ||
      !dist__run_rank_destroyed(c, job, v->culprits[0], v->f.group_id, &d) || !d.site[0])
    return;
  snprintf(v->f.site, sizeof v->f.site, "%s", d.site);
  size_t off = 0;
  dist__appendf(clause, len, &off, "; rank %d destroyed group %d (%s), called from %s",
                v->culprits[0], v->f.group_id, d.desc, d.site);
  if (d.has_counts)
    dist__appendf(clause, len, &off, ", after %llu collective%s there", d.colls,
                  d.colls == 1 ? "" : "s");
  if (d.has_counts && d.last_kind >= 0 && d.last_kind < DIST_OP_COUNT_)
    dist__appendf(clause, len, &off, " (the last %s #%llu, called from %s)",
                  dist_op_name((dist_op_kind)d.last_kind), d.last_num,
                  d.last_site[0] ? d.last_site : "?");
  dist__appendf(clause, len, &off, ", and called on without it");
}

/* A hang whose one culprit had its call to the collective others wait in
 * refused (a NULL tensor, a root outside the group) and went on without
 * it: the report's line for that rank says so (mon_diag_words.c matched
 * group, operation and number), and the verdict names that call, where the
 * bug is, not the later one the rank waits in. */
void dist__run_verdict_refused(const drun_cfg *c, drun_job *job, drun_verdict *v) {
  if (strcmp(v->kind, "hang") != 0 || v->n_culprits != 1 || !v->report)
    return;
  char who[48];
  snprintf(who, sizeof who, "  rank %d (host ", v->culprits[0]);
  const char *line = strstr(v->report, who);
  const char *end = line ? strchr(line, '\n') : NULL;
  const char *said = line ? strstr(line, "; its call was refused, called from ") : NULL;
  drun_position p;
  if (!said || (end && said > end) || !dist__run_rank_refused(c, job, v->culprits[0], &p) ||
      p.kind < 0 || p.kind >= DIST_OP_COUNT_)
    return;
  v->f.group_id = p.gid;
  v->f.seq = p.seq;
  snprintf(v->f.op, sizeof v->f.op, "%s", dist_op_name((dist_op_kind)p.kind));
  snprintf(v->f.group_name, sizeof v->f.group_name, "%s", p.desc);
  snprintf(v->f.site, sizeof v->f.site, "%s", p.site);
}

/* The operation of the report's first line about a rank other than
 * culprit that is not marked ("  rank 0: ALL_REDUCE float32[4] ...", "
 * ranks 0-2 (group ranks 0-2): ..."): what the others called. */
static bool others_op(const char *report, int culprit, char *op, size_t len) {
  for (const char *l = report; *l;) {
    const char *end = strchr(l, '\n');
    size_t ll = end ? (size_t)(end - l) : strlen(l);
    int r = -1, at = 0;
    bool one = sscanf(l, "  rank %d%n", &r, &at) == 1 && at > 0;
    bool many = !one && !strncmp(l, "  ranks ", 8);
    const char *colon = memchr(l, ':', ll);
    char name[32];
    if ((one || many) && colon && !memmem(l, ll, "  <- ", 5) && !(one && r == culprit) &&
        sscanf(colon, ": %31[A-Z0-9_]", name) == 1) {
      snprintf(op, len, "%s", name);
      return true;
    }
    l += ll + (end != NULL);
  }
  return false;
}

/* Below DETAIL the transport sees only the calls that ran: a rank that
 * passed a group it is not a member of (a no-op, as in torch) meets its
 * partners' operation with its next call, and the report names that
 * one. Its monitor's record keeps the no-op call made just before its
 * call there ("m" line): when that call was the others' operation, it is
 * the one the rank meant for this group, and the verdict names it at its
 * line, as the checking layer does at DETAIL (wrapper_pg exchange.c). */
void dist__run_verdict_non_member(const drun_cfg *c, drun_job *job, drun_verdict *v) {
  static char report[8192];
  if (strcmp(v->kind, "desync") || v->n_culprits != 1 || v->f.group_id < 0 || !v->f.seq ||
      strcmp(v->f.field, "operation") || !v->report ||
      strstr(v->report, "on a group it is not a member of"))
    return;
  int kind;
  char site[192], others[32];
  if (!dist__run_rank_non_member(c, job, v->culprits[0], v->f.group_id, v->f.seq, &kind, site,
                                 sizeof site) ||
      !others_op(v->report, v->culprits[0], others, sizeof others))
    return;
  const char *op = dist_op_name((dist_op_kind)kind);
  if (strcmp(op, others) != 0)
    return; /* it meant something else there */
  /* before the line naming its reporter, as the checking layer's report
   * reads (status.h: "reported by" ends a report) */
  const char *by = strstr(v->report, "\n  reported by rank ");
  int head = by ? (int)(by - v->report) : (int)strlen(v->report);
  while (head > 0 && v->report[head - 1] == '\n')
    head--;
  snprintf(report, sizeof report, "%.*s\n  rank %d called %s on a group it is not a member of "
           "just before (it did nothing, as in torch)%s%s: the wrong group passed?%s",
           head, v->report, v->culprits[0], op,
           site[0] && strcmp(site, "?") ? ", called from " : "",
           site[0] && strcmp(site, "?") ? site : "", by ? by : "\n");
  v->report = report;
  snprintf(v->f.op, sizeof v->f.op, "%s", op);
  snprintf(v->f.site, sizeof v->f.site, "%s", strcmp(site, "?") ? site : "");
}
