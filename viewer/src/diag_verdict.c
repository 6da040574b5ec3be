/* diag_verdict.c - the job's verdict first, distview's own analysis after.
 *
 * distrun decides one verdict per job from every rank's evidence and
 * stores it in trace.db (the verdict row, tracer/SCHEMA.md). When it is
 * there, distview must not contradict it with a second opinion in the
 * headline: the verdict fills the diagnosis (kind, exit status, culprits,
 * group, operation, field, call site), and the analysis computed from the
 * rows moves to own_*, said after it as agreeing or as adding something.
 * Without the row (a job run without distrun, a job directory, an older
 * trace) the rows' analysis stands alone, as before. */
#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include <dist/trace_reader.h>

#include "diag_int.h"

/* The class of a verdict kind, as distview's own findings are classed. */
static int class_of(const char *kind) {
  if (!strcmp(kind, "desync"))
    return VW_DIAG_DESYNC;
  if (!strcmp(kind, "hang"))
    return VW_DIAG_HANG;
  if (!strcmp(kind, "crash") || !strcmp(kind, "died") || !strcmp(kind, "early_exit"))
    return VW_DIAG_DIED;
  if (!strcmp(kind, "success"))
    return VW_DIAG_NONE;
  return VW_DIAG_FAILED;  // interrupted, launch, other
}

static bool same_class(int verdict, int own) {
  if (verdict == VW_DIAG_HANG)
    return own == VW_DIAG_HANG || own == VW_DIAG_STUCK || own == VW_DIAG_DEADLOCK;
  if (verdict == VW_DIAG_DIED)
    return own == VW_DIAG_DIED || own == VW_DIAG_FAILED;
  return verdict == own;
}

static bool shares_culprit(const dist_trace_verdict_row *v, const vw_diag *d) {
  if (!v->n_culprits)
    return true;
  for (size_t i = 0; i < v->n_culprits; i++)
    for (int k = 0; k < d->own_n_culprits; k++)
      if (v->culprits[i] == d->own_culprits[k])
        return true;
  return false;
}

/* Keeps the rows' analysis in own_* and words the comparison. */
static void keep_own(const dist_trace_verdict_row *v, vw_diag *d) {
  d->own_kind = d->kind;
  d->own_exit_code = d->exit_code;
  d->own_n_culprits = d->n_culprits;
  memcpy(d->own_culprits, d->culprits, sizeof d->culprits);
  snprintf(d->own_summary, sizeof d->own_summary, "%s", d->kind ? d->summary : "");
  int cls = class_of(v->kind);
  d->own_agrees = same_class(cls, d->kind) && (d->kind == VW_DIAG_NONE || shares_culprit(v, d));
  if (d->kind == VW_DIAG_NONE)
    snprintf(d->own_line, sizeof d->own_line, "distview's own analysis %s",
             cls == VW_DIAG_NONE ? "agrees: no desync, hang or failure in the rows"
                                 : "of the rows finds no desync, hang or failure");
  else
    snprintf(d->own_line, sizeof d->own_line, "distview's own analysis %s: %.300s",
             d->own_agrees ? "agrees" : "also finds", d->summary);
}

/* "desync (exit 10): rank 3 in group 2 (dp) at ALL_REDUCE #14: dtype
 * differs, called from train.c:42" */
static void headline(const dist_trace_verdict_row *v, vw_diag *d) {
  char cr[160] = "", where[200] = "", at[64] = "", field[96] = "", site[360] = "", drop[64] = "";
  if (v->n_culprits)
    snprintf(cr, sizeof cr, " rank%s %s", v->n_culprits > 1 ? "s" : "",
             vw_fmt_ranks(d->culprits, d->n_culprits, (char[128]){0}, 128));
  if (d->group_id >= 0)
    snprintf(where, sizeof where, " in group %d%s%s%s", d->group_id, d->group_name[0] ? " (" : "",
             d->group_name, d->group_name[0] ? ")" : "");
  if (d->op[0])
    snprintf(at, sizeof at, d->seq > 0 ? " at %s #%lld" : " at %s", d->op, (long long)d->seq);
  /* A hang's field says where its site is when that is not the call the
   * peers wait in: the culprit's own code ("own code", from its stack) or
   * a store call of the program's ("store wait"); the operation stays the
   * one they wait for it in (monitor/src/distrun_outside.c). */
  bool own = !strcmp(v->kind, "hang") && !strcmp(d->field, "own code");
  bool store = !strcmp(v->kind, "hang") && !strcmp(d->field, "store wait");
  if (!strcmp(d->field, "destroyed")) /* a group destroyed with it pending (pg_cause.c) */
    snprintf(field, sizeof field, ": destroyed with it pending (never waited)");
  else if (d->field[0] && !own && !store)
    snprintf(field, sizeof field, ": %s differs", d->field);
  if (d->site[0])
    snprintf(site, sizeof site, own     ? ", where its peers wait for it; it is outside the "
                                          "library, in its own code at %s"
                                : store ? ", where its peers wait for it; it is blocked in a "
                                          "store call, called from %s"
                                        : ", called from %s",
             d->site);
  if (d->dropped > 0)
    snprintf(drop, sizeof drop, "; %lld records dropped", (long long)d->dropped);
  snprintf(d->summary, sizeof d->summary, "%s (exit %d)%s%s%s%s%s%s%s", v->kind, v->exit_status,
           cr[0] || where[0] || at[0] ? ":" : "", cr, where, at, field, site, drop);
  snprintf(d->text, sizeof d->text, "%s\n%.3000s%s%s\n", d->summary, v->text,
           v->text[0] && v->text[strlen(v->text) - 1] != '\n' ? "\n" : "", d->own_line);
}

static void take(vw_model *m, const dist_trace_verdict_row *v, vw_diag *d) {
  d->has_verdict = true;
  d->kind = class_of(v->kind);
  snprintf(d->kind_name, sizeof d->kind_name, "%s", v->kind);
  d->exit_code = v->exit_status;
  d->group_id = v->group_id;
  snprintf(d->group_name, sizeof d->group_name, "%s",
           v->group_name[0] ? v->group_name : v->group_id >= 0 ? vw_group_name(m, v->group_id) : "");
  snprintf(d->op, sizeof d->op, "%.27s", v->op);
  d->seq = v->seq;
  snprintf(d->field, sizeof d->field, "%.63s", v->field);
  snprintf(d->site, sizeof d->site, "%.255s", v->site);
  d->reported_by = v->reported_by;
  d->dropped = v->dropped;
  d->n_culprits = 0;
  for (size_t i = 0; i < v->n_culprits && d->n_culprits < VW_DIAG_LIST; i++)
    d->culprits[d->n_culprits++] = v->culprits[i];
  d->rank = d->n_culprits ? d->culprits[0] : -1;
  if (!d->own_agrees) {  // the rows' details belong to another finding
    d->n_blocked = d->n_cycle = 0;
    d->last_done_seq = 0;
    d->last_done_op[0] = '\0';
  }
  headline(v, d);
}

int vw_diag_verdict(vw_model *m, vw_diag *d) {
  d->reported_by = -1;
  dist_trace_verdict_row v;
  char err[256] = "";
  if (dist_trace_read_verdict(m->db, &v, err, sizeof err) != DIST_OK) {
    snprintf(m->err, sizeof m->err, "%s", err);
    return -1;
  }
  if (v.present) {
    keep_own(&v, d);
    take(m, &v, d);
  }
  dist_trace_verdict_row_free(&v);
  return 0;
}

const char *vw_diag_headline(const vw_diag *d, char *buf, size_t len) {
  if (!d->has_verdict) {
    static const char *own[] = {"OK", "DESYNC", "HANG", "HANG", "DEADLOCK", "RANK DIED", "FAILED"};
    const char *w = d->kind >= 0 && d->kind <= VW_DIAG_FAILED ? own[d->kind] : "?";
    snprintf(buf, len, d->kind ? "%s (exit %d)" : "%s", w, d->exit_code);
    return buf;
  }
  char w[24];
  size_t i = 0;
  for (; d->kind_name[i] && i < sizeof w - 1; i++)
    w[i] = d->kind_name[i] == '_' ? ' ' : (char)toupper((unsigned char)d->kind_name[i]);
  w[i] = '\0';
  if (d->kind == VW_DIAG_NONE && d->exit_code == 0)
    snprintf(buf, len, "%s", d->dropped > 0 ? "OK, RECORDS DROPPED" : "OK");
  else
    snprintf(buf, len, "%s (exit %d)", w, d->exit_code);
  return buf;
}
