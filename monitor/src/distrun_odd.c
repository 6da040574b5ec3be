/* distrun_odd.c - a desync between the two members of a group, settled by
 * the groups of the same description in the merged trace.
 *
 * Where a pair's two calls differ, the rank that found it marks one of
 * them by a rule of thumb (core's majority_rank at any level, the checking
 * layer's suspect() at DETAIL: the call that changed from its own last
 * one, else the later rank). A loop over layers of different sizes
 * changes every call, so the rule can mark the innocent member. The trace
 * holds what every other "dp" group made at that collective
 * (reader_odd.c): when one member made that call and the other did not,
 * the other is the culprit, and the report's mark moves to it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <dist/trace_reader.h>

#include "distrun.h"

#define MARK "  <- "

/* A report line that compares a rank: "  rank 5 (group rank 1): ..." (or
 * "  rank 5: ..." in the default group), not a line of other words about
 * it ("  rank 5 (host h, pid 7): left ...", "  rank 5 is blocked ..."). */
static bool rank_line(const char *l, int *rank) {
  int at = 0;
  if (sscanf(l, "  rank %d%n", rank, &at) != 1 || at == 0)
    return false;
  return l[at] == ':' || !strncmp(l + at, " (group rank ", 13);
}

/* The two ranks the report compares, the marked one first; false unless
 * it compares exactly two and marks one. */
bool dist__run_compared_pair(const char *report, int *marked, int *other) {
  int n = 0, m = 0, ranks[2] = {-1, -1}, marks[2] = {0, 0};
  for (const char *l = report; l && *l;) {
    const char *end = strchr(l, '\n');
    size_t len = end ? (size_t)(end - l) : strlen(l);
    int r;
    if (rank_line(l, &r)) {
      if (n == 2)
        return false;
      ranks[n] = r;
      marks[n] = memmem(l, len, MARK, strlen(MARK)) != NULL;
      m += marks[n++];
    }
    l = end ? end + 1 : l + len;
  }
  if (n != 2 || m != 1)
    return false;
  *marked = marks[0] ? ranks[0] : ranks[1];
  *other = marks[0] ? ranks[1] : ranks[0];
  return true;
}

void dist__run_move_mark(const char *report, int from, int to, char *out, size_t cap) {
  char mark[160] = "";
  size_t o = 0;
  for (const char *l = report; *l;) {
    const char *end = strchr(l, '\n');
    size_t len = end ? (size_t)(end - l) : strlen(l);
    int r;
    const char *m = memmem(l, len, MARK, strlen(MARK));
    if (m && rank_line(l, &r) && r == from)
      snprintf(mark, sizeof mark, "%.*s", (int)(len - (size_t)(m - l)), m);
    l = end ? end + 1 : l + len;
  }
  for (const char *l = report; *l;) {
    const char *end = strchr(l, '\n');
    size_t len = end ? (size_t)(end - l) : strlen(l);
    int r;
    bool is_rank = rank_line(l, &r);
    const char *m = memmem(l, len, MARK, strlen(MARK));
    size_t keep = is_rank && r == from && m ? (size_t)(m - l) : len;
    dist__appendf(out, cap, &o, "%.*s%s%s", (int)keep, l, is_rank && r == to ? mark : "",
                  end ? "\n" : "");
    l = end ? end + 1 : l + len;
  }
}

/* Rank r's call site in a report line "called from A (rank 1 (group rank
 * 0)), B (rank 5 (group rank 1))", into site; "" when the line names one
 * site for both. */
static void site_of(const char *report, int r, char *site, size_t cap) {
  site[0] = '\0';
  const char *l = strstr(report, "\n  called from ");
  char who[48];
  snprintf(who, sizeof who, " (rank %d (group rank", r);
  const char *at = l ? strstr(l, who) : NULL;
  const char *eol = l ? strchr(l + 1, '\n') : NULL;
  if (!at || (eol && at > eol))
    return;
  const char *start = l + strlen("\n  called from ");
  for (const char *c = start; c < at; c++)
    if (c[0] == ',' && c[1] == ' ')
      start = c + 2; /* the sites are listed ", "-separated */
  snprintf(site, cap, "%.*s", (int)(at - start), start);
}

const char *dist__run_kin_words(const char *group_name, char *buf, size_t len) {
  bool unnamed = group_name[0] == 'g' && group_name[1] &&
                 strspn(group_name + 1, "0123456789") == strlen(group_name + 1);
  if (unnamed)
    snprintf(buf, len, "of its shape (as many ranks, as far apart)");
  else
    snprintf(buf, len, "described as %s", group_name);
  return buf;
}

void dist__run_trace_odd_pair(const char *out, drun_verdict *v) {
  static char report[8192];
  int marked, other;
  if (strcmp(v->kind, "desync") || v->n_culprits != 1 || v->f.group_id < 0 || !v->f.seq ||
      !v->report || !dist__run_compared_pair(v->report, &marked, &other) || marked != v->culprits[0])
    return;
  dist_trace *t = NULL;
  if (dist_trace_open(out, &t, NULL, 0) != DIST_OK)
    return;
  dist_trace_odd odd;
  int rc = dist_trace_odd_member(t, v->f.group_id, (int64_t)v->f.seq, marked, other, &odd);
  dist_trace_close(t);
  if (rc != DIST_OK || odd.rank != other)
    return;
  dist__run_move_mark(v->report, marked, other, report, sizeof report);
  size_t o = strlen(report);
  char kin[96];
  dist__appendf(report, sizeof report, &o,
                "%s  the %d ranks of the other groups %s made rank %d's call at this "
                "collective, not rank %d's: rank %d is the one that differs\n",
                o && report[o - 1] != '\n' ? "\n" : "", odd.ranks_alike,
                dist__run_kin_words(v->f.group_name, kin, sizeof kin), marked, other, other);
  char site[192];
  site_of(v->report, other, site, sizeof site);
  if (site[0])
    snprintf(v->f.site, sizeof v->f.site, "%s", site);
  if (odd.op[0])
    snprintf(v->f.op, sizeof v->f.op, "%s", odd.op); /* its call, not the marked one's */
  v->report = report;
  v->culprits[0] = other;
  v->f.culprits[0] = other;
  v->f.n_culprits = 1;
}
