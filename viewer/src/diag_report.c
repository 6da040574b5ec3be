/* diag_report.c - the reports the job stored itself (events rows), and
 * which of them is a cause, when the trace has no verdict from distrun.
 *
 * A report says what its writer saw, which is not always the cause: a
 * monitor's diagnosis may be of a lost peer (a rank killed), not of a
 * hang; the checking layer's "rank 3 left the group before this
 * collective" follows from rank 3 dying (or from a group another rank
 * aborted, whose members then gave up: the abort, read from their failed
 * rows, takes the place of a report that came after it); and a rank that
 * crashed explains the hangs the others then report. So the report is
 * classified here (a desync, a hang, or a death: distrun's 10, 11 and
 * 12), and a crash outranks every finding except a desync that came
 * before it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "diag_int.h"
#include "vw_sql.h"

enum { ST_DESYNC = 4, ST_PEER_LOST = 5, ST_ABORTED = 7 }; /* dist_status numbers (status.h) */

/* What a member's operation on a group another rank aborted failed with
 * (core's abort message: "rank R called dist_abort_group on group ..."). */
#define ABORT_LIKE "%rank % called dist_abort_group on group %"
/* ... and on a group a rank destroyed with its operations pending */
#define DESTROYED_PENDING "the group was destroyed with operations pending"

/* N when the text just before at (inside text) reads "rank N", else -1:
 * "rank 3 left the group", "rank 4 is where it went wrong". */
static int rank_before(const char *text, const char *at) {
  const char *r = at;
  while (r && r > text && r[-1] != ' ' && r[-1] != '\n')
    r--;
  int rank = -1;
  if (!r || r - text < 5 || strncmp(r - 5, "rank ", 5) || sscanf(r, "%d", &rank) != 1)
    return -1;
  return rank;
}

/* A crash event's status is the signal. Only these are crashes: SIGTERM,
 * SIGINT or SIGHUP mean the rank was ended (by distrun after another
 * rank's failure, or by the user), which causes nothing. */
#define FATAL_SIGNALS "(4, 5, 6, 7, 8, 11, 31)" /* ILL TRAP ABRT BUS FPE SEGV SYS */

/* The operation a report's header names (status.h: "<what> in group <id>
 * (...) at <OP> #<seq>: ..."): its number is per kind (collectives and
 * point-to-point count apart), which the event's seq is not when the
 * event carries no operation (the monitor's reports). */
static void header_op(const char *msg, vw_diag *d) {
  const char *nl = msg ? strchr(msg, '\n') : NULL, *at = msg ? strstr(msg, ") at ") : NULL;
  char op[28];
  long long n;
  int g;
  /* a report on a group that does not exist yet (its creation) is stored
   * on the default group; its header names the group */
  if (msg && !strncmp(msg, "desync in group ", 16) && sscanf(msg + 16, "%d (", &g) == 1 &&
      strstr(msg, ") at creation: ") && (!nl || strstr(msg, ") at creation: ") < nl))
    d->report_group = g;
  if (at && (!nl || at < nl) && sscanf(at, ") at %27[A-Z0-9_] #%lld", op, &n) == 2 && n > 0) {
    snprintf(d->report_op, sizeof d->report_op, "%s", op);
    d->report_seq = n;
  }
}

/* Whether a desync report is the checking layer's "left the group": a
 * consequence when a hang's diagnosis came first (the ranks that failed
 * of the timeout exited, and their partners' next collective found them
 * gone). */
static int after_a_hang(vw_model *m, const vw_event *desync, bool *after) {
  *after = false;
  if (!desync->message || !strstr(desync->message, "left the group (destroyed it or exited)"))
    return 0;
  vw_event hang;
  bool found;
  if (vw_model_event_of(m, "diagnosis", true, ST_PEER_LOST, &hang, &found) != 0)
    return -1;
  *after = found && hang.t_ns < desync->t_ns;
  free(hang.message);
  return 0;
}

/* Whether every rank ran to its end: a stall report then was a warning
 * about a slow rank (one that arrived late within the timeout), no hang. */
static bool all_finished(const vw_model *m) {
  for (int i = 0; i < m->job.nranks; i++)
    if (strcmp(m->job.ranks[i].end_state, "finished"))
      return false;
  return m->job.nranks > 0;
}

static void take(vw_diag *d, vw_event *ev) {
  d->has_report = true;
  snprintf(d->report_kind, sizeof d->report_kind, "%s", ev->kind);
  d->report_rank = ev->rank;
  d->report_group = ev->group_id;
  d->report_seq = ev->seq;
  d->report_op[0] = '\0';
  header_op(ev->message, d);
  d->report_status = ev->status;
  d->report_t = ev->t_ns;
  d->report = ev->message ? ev->message : strdup("");
}

/* The first desync the job stored: the checking layer's report (an events
 * row) or an operation that failed with one (the transport's, which has
 * no events row), whichever came first. */
static int first_desync(vw_model *m, vw_event *ev, bool *found) {
  vw_event row;
  bool have_row;
  if (vw_model_event_of(m, "desync_report", true, -1, ev, found) != 0)
    return -1;
  if (vw_model_failed_like(m, ST_DESYNC, NULL, "desync_report", &row, &have_row) != 0) {
    free(ev->message);
    return -1;
  }
  /* a report marks the ranks it blames ("  <- size differs"); a row's
   * bare message names none */
  bool marks = have_row && row.message && strstr(row.message, "  <- ") &&
               strstr(row.message, "differs");
  if (marks && (!*found || row.t_ns < ev->t_ns)) {
    free(ev->message);
    *ev = row;
    *found = true;
  } else {
    free(row.message);
  }
  return 0;
}

/* Rewrites report rep as rank's end (kind "ended") when rank's own trace
 * says it ended (ranks.end_state 'finished' or 'exited') with no
 * operation of its failed or timed out (an end after a failure has its
 * cause elsewhere) and none called after the report (a rank that
 * destroyed the group and went on: the report stands). */
static int as_an_end(vw_model *m, vw_event *rep, int rank) {
  const vw_rank_info *ri = vw_model_rank(m, rank);
  if (!ri || (strcmp(ri->end_state, "finished") && strcmp(ri->end_state, "exited")))
    return 0;
  int64_t args[2] = {rank, rep->t_ns};
  if (vw_sql_scalar(m, "SELECT count(*) FROM operations WHERE rank = ?1 AND state IN ('failed', "
                    "'timed_out')",
                    1, args) != 0)
    return 0;
  if (vw_sql_scalar(m, "SELECT count(*) FROM operations WHERE rank = ?1 AND t_enqueued_ns > ?2",
                    2, args) != 0)
    return 0;
  const char *nl = strchr(rep->message, '\n');
  char *msg = NULL;
  if (asprintf(&msg, "rank %d ended (its trace ends '%s') while its peers still needed it; "
               "they report: %.*s", rank, ri->end_state,
               nl ? (int)(nl - rep->message) : 300, rep->message) < 0)
    return -1;
  free(rep->message);
  rep->message = msg;
  snprintf(rep->kind, sizeof rep->kind, "ended");
  rep->rank = rank; /* the culprit (report_culprits) */
  return 0;
}

/* Whether rank's own operations failed (or timed out) after t: its exit,
 * which a later report saw, then followed from what failed them. */
static bool failed_after(vw_model *m, int rank, int64_t t) {
  int64_t args[2] = {rank, t};
  return vw_sql_scalar(m, "SELECT count(*) FROM operations WHERE rank = ?1 AND state IN "
                          "('failed', 'timed_out') AND t_ended_ns > ?2", 2, args) > 0;
}

/* A "rank R left the group" desync whose leaver a monitor saw exit (with
 * status 0: it ended early while the others still needed it, distrun's
 * early exit; or with an error of its own, not one of the failures that
 * came after the report: the partner that reported it exits, and R's next
 * collective fails on that): the desync follows from that,
 * and the diagnosis that says so replaces it (a lost peer: a death). With
 * no such diagnosis (the peers' desync came first), R's own trace says it
 * ended (ranks.end_state 'finished' or 'exited') with no operation of its
 * failed and none called after the report: then that end, kind "ended",
 * replaces it. The first desync comes before any other failure
 * (a hang's diagnosis before it makes it a consequence of the hang:
 * after_a_hang). */
static int after_an_early_exit(vw_model *m, vw_event *desync) {
  static const char left[] = " left the group (destroyed it or exited)";
  const char *at = desync->message ? strstr(desync->message, left) : NULL;
  int rank = at ? rank_before(desync->message, at) : -1;
  if (rank < 0)
    return 0;
  vw_event ev;
  bool found;
  if (vw_model_event_rank_says(m, "diagnosis", rank, " exited with code ", &ev, &found) != 0)
    return -1;
  if (found && ev.status == ST_PEER_LOST && !failed_after(m, rank, desync->t_ns)) {
    free(desync->message);
    *desync = ev;
    return 0;
  }
  free(ev.message);
  return as_an_end(m, desync, rank);
}

/* A hang's report (the monitor's diagnosis or stall report) that finds a
 * member gone ("  rank R (host H, pid P) exited with code C; it has not
 * entered ...", or where the waits end: "the waits end at rank R, which
 * exited with code C"): the rank ended while its peers still needed it,
 * which distrun names as the cause (an early exit, or a death), when R's
 * own trace says it ended on its own (as_an_end). */
static int after_an_exit_in_a_hang(vw_model *m, vw_event *hang) {
  static const char said[] = ") exited with code ", ends[] = "\n  the waits end at rank ";
  const char *msg = hang->message;
  for (const char *p = msg; p && (p = strstr(p, "\n  rank ")); p++) {
    const char *end = strchr(p + 1, '\n'), *at = strstr(p, said);
    int rank = -1;
    if (at && (!end || at < end) && strstr(at, "; it has not entered") &&
        sscanf(p, "\n  rank %d (host ", &rank) == 1)
      return as_an_end(m, hang, rank);
  }
  for (const char *p = msg; p && (p = strstr(p, ends)); p++) {
    int rank = -1, n = 0;
    if (sscanf(p + strlen(ends), "%d, which exited with code %n", &rank, &n) == 1 && n > 0)
      return as_an_end(m, hang, rank);
  }
  return 0;
}

/* The rank that aborted a group, from a member's failed row: the one its
 * message names as calling dist_abort_group, or for a group destroyed with
 * operations pending the one that saw it ("seen by rank R"; the
 * destroyer's own row says nothing more). -1 for neither. */
static int aborter(const vw_event *row) {
  const char *msg = row->message;
  const char *by = msg ? strstr(msg, " called dist_abort_group on group ") : NULL;
  if (by)
    return rank_before(msg, by);
  if (!msg || !strstr(msg, DESTROYED_PENDING))
    return -1;
  const char *seen = strstr(msg, "\n  seen by rank ");
  int r = -1;
  if (!seen)
    return row->rank;
  return sscanf(seen, "\n  seen by rank %d", &r) == 1 ? r : -1;
}

/* Whether desync report msg names rank among those that left its group
 * ("\n  rank R (host H, pid P): left after N collectives", absent.c). */
static bool names_leaver(const char *msg, int rank) {
  for (const char *p = msg; p && (p = strstr(p, "\n  rank ")); p++) {
    const char *end = strchr(p + 1, '\n'), *left = strstr(p, "): left after ");
    int r = -1;
    if (left && (!end || left < end) && sscanf(p, "\n  rank %d (", &r) == 1 && r == rank)
      return true;
  }
  return false;
}

/* A group that one rank aborted (dist_abort_group) or destroyed with
 * operations pending: its members' operations fail with that rank's
 * reason, and what they do then (exit on the error, leaving their other
 * groups) is what the later reports see. The earliest such row, when it
 * came before the report that was found, takes its place; a destruction
 * not when the desync report names the destroyer as a rank that left
 * (the checking layer's "left the group" is the destroyer's own call,
 * which distrun names as the desync). Other ranks that left, after the
 * destroy, are its fallout: its members exited on the error. */
static int before_an_abort(vw_model *m, vw_event *ev, bool *found) {
  static const char *const like[] = {ABORT_LIKE, "%" DESTROYED_PENDING "%"};
  bool desync = *found && !strcmp(ev->kind, "desync_report");
  for (size_t i = 0; i < 2; i++) {
    vw_event ab;
    bool have;
    if (vw_model_failed_like(m, ST_ABORTED, like[i], "abort", &ab, &have) != 0)
      return -1;
    int r = have ? aborter(&ab) : -1;
    bool own_leave = i == 1 && desync && names_leaver(ev->message, r);
    if (r >= 0 && !own_leave && (!*found || ab.t_ns < ev->t_ns)) {
      ab.rank = r; /* the culprit (report_culprits) */
      if (*found)
        free(ev->message);
      *ev = ab;
      *found = true;
      desync = false;
    } else {
      free(ab.message);
    }
  }
  return 0;
}

int vw_diag_stored_report(vw_model *m, vw_diag *d) {
  /* the first desync (later ones follow from it), unless it follows from
   * a hang; the first diagnosis of a hang, written by the first rank whose
   * wait ran out, before the first of a lost peer (the ranks distrun ended
   * after a hang's verdict are lost peers to the others): a later one sees
   * the fallout (ranks that left on their own timeout or error: a member
   * blocked creating a group another rank skipped, a stage whose partner
   * left, read as the rank the waits end at); the last stall report,
   * unless every rank finished */
  static const struct { const char *kind; bool earliest; int skip; } order[] = {
      {"desync_report", true, -1}, {"diagnosis", true, ST_PEER_LOST},
      {"diagnosis", true, -1}, {"stall_report", false, -1}};
  for (size_t i = 0; i < sizeof order / sizeof *order; i++) {
    vw_event ev;
    bool found, after = false;
    if ((i == 0 ? first_desync(m, &ev, &found)
                : vw_model_event_of(m, order[i].kind, order[i].earliest, order[i].skip, &ev,
                                    &found)) != 0)
      return -1;
    if (found && i == 0 && after_a_hang(m, &ev, &after) != 0) {
      free(ev.message);
      return -1;
    }
    if (found && i == 0 && !after && after_an_early_exit(m, &ev) != 0) {
      free(ev.message);
      return -1;
    }
    if (found && !strcmp(order[i].kind, "stall_report") && all_finished(m))
      after = true; /* the slow rank caught up */
    if (found && !after && i > 0 && ev.status != ST_PEER_LOST &&
        after_an_exit_in_a_hang(m, &ev) != 0) {
      free(ev.message);
      return -1;
    }
    if (!found || after) {
      free(ev.message);
      continue;
    }
    if (before_an_abort(m, &ev, &found) != 0) {
      free(ev.message);
      return -1;
    }
    take(d, &ev);
    return 0;
  }
  vw_event ab; /* no report: an abort alone is the cause */
  bool found = false;
  if (before_an_abort(m, &ab, &found) != 0)
    return -1;
  if (found)
    take(d, &ab);
  return 0;
}

/* The number after "rank " on a line (from its start), or -1. */
static int line_rank(const char *line, const char *end) {
  const char *r = strstr(line, "rank ");
  int rank = -1;
  if (!r || r >= end || sscanf(r, "rank %d", &rank) != 1)
    return -1;
  return rank;
}

static bool listed(const vw_diag *d, int rank) {
  for (int i = 0; i < d->n_culprits; i++)
    if (d->culprits[i] == rank)
      return true;
  return false;
}

static void add_culprit(vw_diag *d, int r) {
  if (r >= 0 && d->n_culprits < VW_DIAG_LIST && !listed(d, r))
    d->culprits[d->n_culprits++] = r;
}

/* The monitor's conclusions in a hang diagnosis, which name where the
 * waits end (mon_diag_ends.c): "the waits end at rank 3, which ...", "the
 * waits end at ranks 4 and 0: ...", "the waits start at rank 0, ...",
 * "(every) wait-for cycle goes through rank 0, ...", "rank 4 is where it
 * went wrong". Each rank once, into d's culprits. */
static void conclusion_culprits(vw_diag *d) {
  static const char *const said[] = {"the waits end at rank", "the waits start at rank",
                                     "wait-for cycle goes through rank"};
  for (size_t k = 0; k < sizeof said / sizeof *said; k++)
    for (const char *p = d->report; p && (p = strstr(p, said[k])); p++) {
      const char *at = p + strlen(said[k]);
      int a = -1, b = -1;
      if (sscanf(at, "s %d and %d", &a, &b) == 2) {
        add_culprit(d, a);
        add_culprit(d, b);
      } else if (*at == ' ' && sscanf(at, "%d", &a) == 1) {
        add_culprit(d, a);
      }
    }
  for (const char *p = d->report; p && (p = strstr(p, " is where it went wrong")); p++) {
    int a = rank_before(d->report, p);
    if (a >= 0) {
      d->n_culprits = 0; // the trace's tie break names that rank alone
      add_culprit(d, a);
      return;
    }
  }
}

/* Culprits of a stored report: every rank on a line marked "<- ... differs"
 * (a desync), once (an all_to_all's split lines name a sender once per
 * peer); for a hang diagnosis the ranks where the monitor says the waits
 * end, else those on its "has not entered" lines. */
static void report_culprits(vw_diag *d, bool desync) {
  d->n_culprits = 0;
  if (!strcmp(d->report_kind, "abort") || !strcmp(d->report_kind, "ended")) {
    add_culprit(d, d->report_rank); /* the rank that aborted, or that ended */
    d->rank = d->report_rank;
    return;
  }
  if (!desync)
    conclusion_culprits(d);
  bool concluded = d->n_culprits > 0;
  for (const char *line = d->report; !concluded && line && *line;) {
    const char *end = strchr(line, '\n');
    end = end ? end : line + strlen(line);
    const char *mark = desync ? strstr(line, "<- ") : strstr(line, "has not entered");
    bool hit = mark && mark < end && (!desync || strstr(mark, "differs"));
    add_culprit(d, hit ? line_rank(line, mark) : -1);
    line = *end ? end + 1 : end;
  }
  d->rank = d->n_culprits ? d->culprits[0] : -1;
}

/* The class of the stored report: a diagnosis of a lost peer is a death
 * (distrun's 12), not a hang. */
static int report_class(const vw_diag *d) {
  if (!strcmp(d->report_kind, "desync_report"))
    return VW_DIAG_DESYNC;
  if (!strcmp(d->report_kind, "abort") || !strcmp(d->report_kind, "ended"))
    return VW_DIAG_DIED;
  if (!strcmp(d->report_kind, "diagnosis") && d->report_status == ST_PEER_LOST)
    return VW_DIAG_DIED;
  return VW_DIAG_HANG;
}

/* Whether the stored report is about another operation than the rows'
 * finding (or the rows found nothing): the report wins then, because a
 * job killed right after reporting leaves rank files whose last rows
 * never reached the disk, and a finding on such rows is a guess. */
/* Whether the stored diagnosis names a rank the rows do not, at the end
 * of the waits, because it skipped a group creation the others made
 * (monitor/src/mon_create.c): the rows show no creation, so they can only
 * name the member blocked in it, which never entered their call. */
static bool report_names_skipped_creation(const vw_diag *d) {
  static const char said[] = "the waits end at rank ";
  for (const char *p = d->report; p && (p = strstr(p, said)); p++) {
    int r = -1, n = 0;
    if (sscanf(p + strlen(said), "%d, which did not create group %n", &r, &n) == 1 && n > 0 &&
        !listed(d, r))
      return true;
  }
  return false;
}

bool vw_diag_report_wins(const vw_diag *d) {
  if (!d->has_report)
    return false;
  if (d->kind == VW_DIAG_NONE || !strcmp(d->report_kind, "abort") ||
      !strcmp(d->report_kind, "ended"))
    return true; /* what an abort or an early end left in the rows follows from it */
  if (d->kind == VW_DIAG_HANG && report_class(d) == VW_DIAG_HANG &&
      report_names_skipped_creation(d))
    return true;
  /* A hang in a send or receive: the rows number each rank's transfers
   * apart (a send's number is not its receive's), so they cannot tell which
   * side is behind; the monitor's diagnosis saw both ends live. */
  bool rows_hang = d->kind == VW_DIAG_HANG || d->kind == VW_DIAG_STUCK ||
                   d->kind == VW_DIAG_DEADLOCK;
  if (rows_hang && report_class(d) == VW_DIAG_HANG &&
      ((d->op[0] && vw_op_is_p2p(d->op)) || (d->report_op[0] && vw_op_is_p2p(d->report_op))))
    return true;
  bool desync = report_class(d) == VW_DIAG_DESYNC;
  if (desync != (d->kind == VW_DIAG_DESYNC))
    return desync;   // a desync report beats a hang read from the rows; not the reverse
  bool other_kind = d->report_op[0] && d->op[0] &&
                    vw_op_is_p2p(d->report_op) != vw_op_is_p2p(d->op);
  return d->report_seq > 0 &&
         (d->report_group != d->group_id || d->report_seq != d->seq || other_kind);
}

void vw_diag_use_report(vw_model *m, vw_diag *d) {
  int cls = report_class(d);
  char rows[320] = "";
  if (d->kind != VW_DIAG_NONE)
    snprintf(rows, sizeof rows, "%s", d->summary);
  d->kind = cls;
  d->group_id = d->report_group;
  d->seq = d->report_seq;
  d->t_ns = d->report_t;
  snprintf(d->op, sizeof d->op, "%s", d->report_op);
  vw_op ops[1];
  int n = 0;
  if (!d->op[0] && d->seq > 0 && vw_model_collective(m, d->group_id, d->seq, ops, 1, &n) == 0 &&
      n)
    snprintf(d->op, sizeof d->op, "%s", ops[0].op);
  report_culprits(d, cls == VW_DIAG_DESYNC);
  d->n_blocked = d->n_cycle = 0;
  d->field[0] = '\0';
  const char *nl = d->report ? strchr(d->report, '\n') : NULL;
  /* an abort or an end read from the rows names its rank in its text */
  bool read = !strcmp(d->report_kind, "abort") || !strcmp(d->report_kind, "ended");
  char by[40] = "";
  if (!read)
    snprintf(by, sizeof by, " (reported by rank %d)", d->report_rank);
  snprintf(d->summary, sizeof d->summary, "%s%s: %.*s",
           cls == VW_DIAG_DESYNC ? "desync"
           : read                ? (!strcmp(d->report_kind, "abort") ? "aborted" : "ended")
           : cls == VW_DIAG_DIED ? "lost peer"
                                 : "hang",
           by, nl ? (int)(nl - d->report) : 200, d->report ? d->report : "");
  snprintf(d->text, sizeof d->text, "%.3000s%s%.300s%s", d->report ? d->report : "",
           rows[0] ? "\n(the rows alone, which may have lost their last records, say: " : "",
           rows, rows[0] ? ")" : "");
}

/* --- deaths ---------------------------------------------------------------------- */

typedef struct death {
  int rank;
  int64_t t;            /* INT64_MAX: unknown (no crash event) */
  char how[24];         /* "crashed", "was lost" */
  char *msg;            /* the crash event's message (malloc) */
} death;

/* The first rank that crashed (a crash event, else end_state 'crashed'),
 * or with lost = true also a rank that was lost (killed). */
static bool first_death(vw_model *m, bool lost, death *out) {
  memset(out, 0, sizeof *out);
  out->t = INT64_MAX;
  sqlite3_stmt *st = vw_sql_prepare(m, "SELECT rank, t_ns, message FROM events WHERE "
                                       "kind = 'crash' AND status IN " FATAL_SIGNALS
                                       " ORDER BY t_ns LIMIT 1");
  if (st && vw_sql_step(m, st) == SQLITE_ROW) {
    out->rank = (int)vw_sql_i64(st, 0);
    out->t = vw_sql_i64(st, 1);
    const char *msg = (const char *)sqlite3_column_text(st, 2);
    out->msg = msg ? strdup(msg) : NULL;
    snprintf(out->how, sizeof out->how, "crashed");
    sqlite3_finalize(st);
    return true;
  }
  sqlite3_finalize(st);
  m->err[0] = '\0';  /* a trace without events is no error here */
  /* 'crashed' without an event of a fatal signal: a rank ended by SIGTERM
   * is marked crashed too (its ring was dumped); it is not a crash */
  int64_t r = vw_sql_scalar(m, "SELECT min(rank) FROM ranks WHERE end_state = 'crashed' AND "
                               "NOT EXISTS (SELECT 1 FROM events e WHERE e.rank = ranks.rank "
                               "AND e.kind = 'crash' AND e.status NOT IN " FATAL_SIGNALS ")",
                            0, NULL);
  if (r < 0 && lost)
    r = vw_sql_scalar(m, "SELECT min(rank) FROM ranks WHERE end_state = 'lost'", 0, NULL);
  m->err[0] = '\0';
  if (r < 0)
    return false;
  out->rank = (int)r;
  snprintf(out->how, sizeof out->how, "%s", vw_model_rank(m, out->rank) &&
           !strcmp(vw_model_rank(m, out->rank)->end_state, "lost") ? "was lost" : "crashed");
  return true;
}

static const vw_rank_info *rank_info(vw_model *m, int rank) {
  const vw_rank_info *r = vw_model_rank(m, rank);
  static const vw_rank_info none = {.host = "?", .pid = -1, .end_state = "?"};
  return r ? r : &none;
}

static void say_death(vw_model *m, const death *x, vw_diag *d) {
  char before[320] = "";
  if (d->kind != VW_DIAG_NONE && d->kind != VW_DIAG_DIED)
    snprintf(before, sizeof before, "%s", d->summary);
  const vw_rank_info *ri = rank_info(m, x->rank);
  d->kind = VW_DIAG_DIED;
  d->rank = x->rank;
  d->n_culprits = 1;
  d->culprits[0] = x->rank;
  d->t_ns = x->t == INT64_MAX ? -1 : x->t;
  snprintf(d->summary, sizeof d->summary, "rank %d %s (host %s, pid %d)%s", x->rank, x->how,
           ri->host, ri->pid, before[0] ? "; what the others then reported follows from it" : "");
  snprintf(d->text, sizeof d->text, "%s\n%s%s%s%.300s%s", d->summary,
           x->msg ? x->msg : "", x->msg ? "\n" : "",
           before[0] ? "  (then: " : "", before, before[0] ? ")\n" : "");
}

/* A rank that was lost (killed: no end, no dump) and recorded nothing
 * after t_ns: the first one, in *out. A rank that left a group because
 * its own operations failed on a lost peer is not the cause; the lost
 * rank is. */
static bool lost_before(vw_model *m, int64_t t_ns, death *out) {
  if (t_ns < 0 || !first_death(m, true, out) || strcmp(out->how, "was lost"))
    return false;
  int64_t arg[1] = {out->rank};
  int64_t last = vw_sql_scalar(m, "SELECT max(t_enqueued_ns) FROM operations WHERE rank = ?",
                               1, arg);
  m->err[0] = '\0';
  return last >= 0 && last < t_ns;
}

/* A death the rows or reports did not name as the cause, but should: a
 * crash outranks what it caused (hangs, lost peers, "left the group"
 * desyncs); a desync of fingerprints from before the crash stands. A lost
 * peer's diagnosis, or a "left the group" report about a rank that
 * crashed or was lost, names that rank; one about a rank that exited
 * after another was lost names the lost one (lost_before). */
int vw_diag_deaths(vw_model *m, vw_diag *d) {
  bool left = d->has_report && d->kind == VW_DIAG_DESYNC && d->report &&
              strstr(d->report, "left the group");
  bool fp_desync = d->kind == VW_DIAG_DESYNC && !left;
  death x;
  if (first_death(m, false, &x) && !(fp_desync && d->t_ns >= 0 && d->t_ns < x.t)) {
    say_death(m, &x, d);
  } else if (d->kind == VW_DIAG_DIED && d->has_report && first_death(m, true, &x)) {
    say_death(m, &x, d);   // a lost peer's diagnosis: the rank that was lost
  } else if (left && d->rank >= 0) {
    const vw_rank_info *ri = vw_model_rank(m, d->rank);
    int64_t arg[1] = {d->rank};
    bool ended = vw_sql_scalar(m, "SELECT 1 FROM events WHERE rank = ? AND kind = 'crash' AND "
                                  "status NOT IN " FATAL_SIGNALS, 1, arg) == 1;
    m->err[0] = '\0';
    if (ri && !ended && (!strcmp(ri->end_state, "crashed") || !strcmp(ri->end_state, "lost"))) {
      death y = {.rank = d->rank, .t = INT64_MAX};
      snprintf(y.how, sizeof y.how, "%s", ri->end_state[0] == 'c' ? "crashed" : "was lost");
      say_death(m, &y, d);
    } else if (ri && !strcmp(ri->end_state, "exited") && lost_before(m, d->t_ns, &x)) {
      say_death(m, &x, d); // it left because its own operations failed on the lost rank
    }
  }
  free(x.msg);
  return 0;
}

/* A rank whose trace ends 'exited' (its process ended, its default group
 * live) with an async operation still pending (issued, never waited:
 * enqueued or started, not ended), in which a peer then failed: it left
 * that operation to its peers, and what they report of it (a lost peer,
 * the counts parted, a wait that never ends) follows (distrun's early
 * exit, rule 1). Not after a crash or a loss, nor over a desync of
 * fingerprints or a group a rank aborted. */
int vw_diag_left_pending(vw_model *m, vw_diag *d) {
  bool left = d->kind == VW_DIAG_DESYNC && d->report && strstr(d->report, "left the group");
  if ((d->kind == VW_DIAG_DESYNC && !left) ||
      (d->has_report && !strcmp(d->report_kind, "abort")))
    return 0;
  sqlite3_stmt *st = vw_sql_prepare(
      m, "SELECT o.rank, o.group_id, o.seq, o.op, f.rank, f.message FROM operations o "
         "JOIN ranks r ON r.rank = o.rank AND r.end_state = 'exited' "
         "JOIN operations f ON f.group_id = o.group_id AND f.p2p = o.p2p AND f.seq = o.seq "
         "AND f.rank <> o.rank AND f.state = 'failed' "
         "WHERE o.is_async = 1 AND o.state IN ('enqueued', 'started') AND NOT EXISTS "
         "(SELECT 1 FROM ranks x WHERE x.end_state IN ('crashed', 'lost')) "
         "ORDER BY f.t_ended_ns LIMIT 1");
  if (!st)
    return -1;
  int rc = vw_sql_step(m, st);
  if (rc == SQLITE_ROW) {
    char was[320], msg[200];
    snprintf(was, sizeof was, "%s", d->kind != VW_DIAG_NONE ? d->summary : "");
    d->kind = VW_DIAG_DIED;
    d->rank = (int)vw_sql_i64(st, 0);
    d->n_culprits = 1;
    d->culprits[0] = d->rank;
    d->n_blocked = d->n_cycle = 0;
    d->field[0] = '\0';
    d->group_id = (int)vw_sql_i64(st, 1);
    d->seq = vw_sql_i64(st, 2);
    vw_sql_text(st, 3, d->op, sizeof d->op);
    vw_sql_text(st, 5, msg, sizeof msg);
    snprintf(d->summary, sizeof d->summary, "rank %d exited with %s #%lld of group %d pending "
             "(never waited) while its peers still needed it: rank %d failed in it", d->rank,
             d->op, (long long)d->seq, d->group_id, (int)vw_sql_i64(st, 4));
    snprintf(d->text, sizeof d->text, "%s\n  %s\n%s%.300s%s", d->summary, msg,
             was[0] ? "  (then: " : "", was, was[0] ? ")\n" : "");
  }
  sqlite3_finalize(st);
  return rc == SQLITE_ROW || rc == SQLITE_DONE ? 0 : -1;
}

/* A hang whose one culprit a monitor saw exit with status 0 while the
 * others still waited for it: distrun's early exit (rule 1: a rank's own
 * end outranks what it caused). Only status 0: a rank that gave up in a
 * hang exits non-zero too, and the hang stays the finding then. */
int vw_diag_early_exit(vw_model *m, vw_diag *d) {
  bool hang = d->kind == VW_DIAG_HANG || d->kind == VW_DIAG_STUCK || d->kind == VW_DIAG_DEADLOCK;
  if (!hang || d->n_culprits != 1)
    return 0;
  vw_event ev;
  bool found;
  if (vw_model_event_rank_says(m, "diagnosis", d->culprits[0], " exited with code 0", &ev,
                               &found) != 0)
    return -1;
  free(ev.message);
  if (!found)
    return 0;
  char was[320];
  snprintf(was, sizeof was, "%s", d->summary);
  d->kind = VW_DIAG_DIED;
  d->n_blocked = d->n_cycle = 0;
  snprintf(d->summary, sizeof d->summary, "rank %d ended early (exited with code 0) while the "
           "others still needed it (%.200s)", d->culprits[0], was);
  return 0;
}

/* distrun's odd one out (ARCHITECTURE.md, rule 1): three ranks or more,
 * every one but r ran to its end (finished) and r did not: r called on
 * alone (one more collective, a receive nobody sends), and what the
 * others' absence made it report, or the rows show of it, follows from
 * that. A desync when r reported it, else r's failure. Not when another
 * rank aborted r's group, or destroyed it with the operation r failed in
 * pending (the abort read from the rows): that rank took part in it, so
 * r did not call on alone, and the abort is the cause. */
void vw_diag_odd_one_out(vw_model *m, vw_diag *d) {
  int odd = -1, n = m->job.nranks;
  for (int i = 0; i < n; i++) {
    if (!strcmp(m->job.ranks[i].end_state, "finished"))
      continue;
    if (odd >= 0 || strcmp(m->job.ranks[i].end_state, "exited"))
      return; /* two of them, or one that crashed or was lost */
    odd = m->job.ranks[i].rank;
  }
  if (n < 3 || odd < 0 || d->kind == VW_DIAG_NONE)
    return;
  if (d->has_report && !strcmp(d->report_kind, "abort") && d->report_rank != odd &&
      d->n_culprits == 1 && d->culprits[0] == d->report_rank)
    return;
  d->kind = d->has_report && d->report_rank == odd ? VW_DIAG_DESYNC : VW_DIAG_DIED;
  d->rank = odd;
  d->culprits[0] = odd;
  d->n_culprits = 1;
  d->n_blocked = d->n_cycle = 0;
  snprintf(d->field, sizeof d->field, "collective count");
  char was[320];
  snprintf(was, sizeof was, "%s", d->summary);
  snprintf(d->summary, sizeof d->summary, "rank %d called on alone: every other rank ran to its "
           "end, so the ranks' calls differ in number (%.200s)", odd, was);
}
