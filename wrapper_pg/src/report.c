/* report.c - the reports of the checking layer, in the house format:
 *
 *     desync in group 0 (default, 4 ranks) at ALL_REDUCE #42: ranks disagree on the count
 *       ranks 0-2: ALL_REDUCE float32[1024] op=SUM (4096 bytes)
 *       rank 3:    ALL_REDUCE float32[2048] op=SUM (8192 bytes)  <- count differs
 *       called from train.c:88 in step() (ranks 0-3)
 *
 * (core/include/dist/status.h, FAILURE REPORTS). Ranks are global, with
 * group ranks beside them when they differ, grouped by what their line
 * shows, ranges compressed; the lines whose fingerprint is not the
 * majority's are marked with the field that differs. Unlike a backend's
 * two-rank report no line says "(this rank)": every
 * entering rank builds the same text from the same exchanged records, so
 * they all return the same report; wpg_fail spreads it (group message,
 * observers, log, the job's store). */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "wpg_int.h"

void wpg_appendf(char *buf, size_t len, size_t *off, const char *fmt, ...) {
  if (*off >= len)
    return;
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(buf + *off, len - *off, fmt, ap);
  va_end(ap);
  if (n > 0)
    *off = *off + (size_t)n < len ? *off + (size_t)n : len - 1;
}

const char *wpg_group_label(const dist_pg_info *i) {
  return i->desc && i->desc[0] ? i->desc : i->name;
}

void wpg_group_name(const dist_pg_info *i, char *buf, size_t len) {
  snprintf(buf, len, "group %d (%s, %d rank%s)", i->group_id, wpg_group_label(i), i->size,
           i->size == 1 ? "" : "s");
}

/* "0-2,5" from ascending values. */
static void ranges(const int *v, int n, char *buf, size_t len) {
  size_t off = 0;
  buf[0] = '\0';
  for (int i = 0; i < n;) {
    int j = i;
    while (j + 1 < n && v[j + 1] == v[j] + 1)
      j++;
    if (j > i)
      wpg_appendf(buf, len, &off, "%s%d-%d", i ? "," : "", v[i], v[j]);
    else
      wpg_appendf(buf, len, &off, "%s%d", i ? "," : "", v[i]);
    i = j + 1;
  }
}

typedef struct line {
  int first;      /* row index of the first rank on the line */
  int n;
  char label[160];
} line;

static bool same_line(const wpg_row *a, const wpg_row *b) {
  return a->cls == b->cls && !strcmp(a->text, b->text) &&
         !strcmp(a->extra ? a->extra : "", b->extra ? b->extra : "");
}

typedef bool (*same_fn)(const wpg_row *a, const wpg_row *b);

static void label_of(const wpg_row *rows, int n, int first, same_fn same, line *l) {
  int *g = calloc((size_t)n, sizeof(int)), *gr = calloc((size_t)n, sizeof(int));
  l->n = 0;
  bool differ = false;
  for (int i = first; g && gr && i < n; i++)
    if (same(&rows[i], &rows[first])) {
      g[l->n] = rows[i].global;
      gr[l->n++] = rows[i].grank;
      differ |= rows[i].global != rows[i].grank;
    }
  char a[96] = "?", b[96];
  if (g && gr)
    ranges(g, l->n, a, sizeof a);
  size_t off = 0;
  wpg_appendf(l->label, sizeof l->label, &off, "%s %s", l->n > 1 ? "ranks" : "rank", a);
  if (differ && g && gr) {
    ranges(gr, l->n, b, sizeof b);
    wpg_appendf(l->label, sizeof l->label, &off, " (group %s %s)", l->n > 1 ? "ranks" : "rank",
                b);
  }
  free(g);
  free(gr);
}

static bool same_site(const wpg_row *a, const wpg_row *b) {
  return !strcmp(a->site ? a->site : "", b->site ? b->site : "");
}

/* "  called from a.c:3 in f() (ranks 0,2), a.c:5 in f() (rank 1)". */
static void sites(char *buf, size_t len, size_t *off, const wpg_row *rows, int n, line *tmp) {
  if (!n || !rows[0].site)
    return;
  wpg_appendf(buf, len, off, "  called from ");
  int k = 0;
  for (int i = 0; i < n; i++) {
    bool seen = false;
    for (int j = 0; j < i && !seen; j++)
      seen = same_site(&rows[j], &rows[i]);
    if (seen)
      continue;
    label_of(rows, n, i, same_site, &tmp[0]);
    wpg_appendf(buf, len, off, "%s%s (%s)", k++ ? ", " : "", rows[i].site, tmp[0].label);
  }
  wpg_appendf(buf, len, off, "\n");
}

/* The class most ranks share. A tie (two ranks of a pair disagreeing, the
 * common case on a 2-wide tensor-parallel group) goes against the class
 * with more suspect rows (exchange.c: a call site never seen in this
 * group's agreed calls, or a call that changed since the rank's last one
 * from its site); else the lowest rank's class. */
static int majority(const wpg_row *rows, int n) {
  int best = rows[0].cls, best_n = 0, best_sus = 0;
  for (int i = 0; i < n; i++) {
    int k = 0, sus = 0;
    for (int j = 0; j < n; j++)
      if (rows[j].cls == rows[i].cls) {
        k++;
        sus += rows[j].suspect;
      }
    if (k > best_n || (k == best_n && sus < best_sus)) {
      best_n = k;
      best_sus = sus;
      best = rows[i].cls;
    }
  }
  return best;
}

int wpg_report_culprits(const wpg_row *rows, int n, int *out) {
  int major = majority(rows, n), k = 0;
  for (int i = 0; i < n; i++)
    if (rows[i].cls != major)
      out[k++] = rows[i].global;
  return k;
}

void wpg_report_rows(char *buf, size_t len, size_t *off, const wpg_row *rows, int n,
                     const char *(*field_of)(void *arg, int cls, int major), void *arg) {
  line *lines = calloc((size_t)n, sizeof *lines);
  if (!lines)
    return;
  int n_lines = 0, width = 0;
  for (int i = 0; i < n; i++) {
    bool seen = false;
    for (int k = 0; k < n_lines && !seen; k++)
      seen = same_line(&rows[lines[k].first], &rows[i]);
    if (seen)
      continue;
    lines[n_lines].first = i;
    label_of(rows, n, i, same_line, &lines[n_lines]);
    wpg_appendf(lines[n_lines].label, sizeof lines[n_lines].label,
                &(size_t){strlen(lines[n_lines].label)}, ":");
    int wl = (int)strlen(lines[n_lines].label);
    width = wl > width ? wl : width;
    n_lines++;
  }
  int major = majority(rows, n);
  for (int k = 0; k < n_lines; k++) {
    const wpg_row *r = &rows[lines[k].first];
    wpg_appendf(buf, len, off, "  %-*s %s", width, lines[k].label, r->text);
    const char *f = r->cls == major || !field_of ? NULL : field_of(arg, r->cls, major);
    if (f)
      wpg_appendf(buf, len, off, "  <- %s differs", f);
    wpg_appendf(buf, len, off, "\n");
    if (r->extra && r->extra[0])
      wpg_appendf(buf, len, off, "%s", r->extra);
  }
  sites(buf, len, off, rows, n, lines);
  free(lines);
}

const char *wpg_report_field(const wpg_row *rows, int n,
                             const char *(*field_of)(void *arg, int cls, int major), void *arg) {
  int major = majority(rows, n);
  for (int i = 0; i < n; i++)
    if (rows[i].cls != major)
      return field_of(arg, rows[i].cls, major);
  return NULL;
}

/* The report becomes the job's cause (core's dist_post_cause, first one in
 * the job wins), so distrun prints it once, last, and exits 10 for a
 * desync, 11 for a timeout. Only the rank that logs the report posts it:
 * the others would only lose the race. */
static void post_cause(int rc, const char *report, const dist_cause_info *info) {
  if (rc == DIST_E_DESYNC || rc == DIST_E_TIMEOUT)
    dist_post_cause_info(rc, info, report);
}

/* Where a failure's message goes: the group (a synchronous call, on the
 * caller thread) or, on the thread that checks asynchronous operations,
 * the buffer that becomes the work's message (the group's error slot
 * belongs to the caller thread). */
static _Thread_local char *capture;
static _Thread_local size_t capture_len;

void wpg_capture(char *buf, size_t len) {
  capture = buf;
  capture_len = len;
  if (buf && len)
    buf[0] = '\0';
}

int wpg_set_error(wpg *w, int rc, const char *fmt, ...) {
  char msg[WPG_MSG_LEN];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (capture) {
    if (!capture[0]) /* the first message of a call wins */
      snprintf(capture, capture_len, "%s", msg);
    return rc;
  }
  return dist_backend_set_error(w->self, rc, "%s", msg);
}

int wpg_fail(wpg *w, int rc, const char *report, int lowest_global,
             const dist_cause_info *info) {
  wpg_set_error(w, rc, "%s", report);
  if (rc == DIST_E_DESYNC)
    dist_observer_emit_report(w->self, DIST_EV_DESYNC_REPORT, rc, report);
  int me = w->info->global_rank;
  if (me == lowest_global) {
    dist_log(DIST_LOG_ERROR, DIST_SUBSYS_WPG, "%s", report);
    post_cause(rc, report, info);
  } else {
    const char *nl = strchr(report, '\n');
    int n = nl ? (int)(nl - report) : (int)strlen(report);
    if (n && report[n - 1] == ':')
      n--;
    dist_log(DIST_LOG_ERROR, DIST_SUBSYS_WPG, "%.*s (rank %d logged the report)", n, report,
             lowest_global);
  }
  return rc;
}
