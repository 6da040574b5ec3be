/* view.c - the screen: layout, header, pane tabs, status line and help.
 *
 * Pure rendering into a vw_canvas (no curses, no SQL): it draws what
 * app.c fetched. The header always carries the verdict (the diagnosis or
 * desync report, or that nothing went wrong), so the first screen answers
 * "what happened and who is to blame" at any size. Wide terminals
 * (>= 160 x 40) show all four panes at once; smaller ones show the focused
 * pane with a tab line to switch. */
#include <string.h>

#include "vw_ui.h"

const char *vw_pane_name(int pane) {
  static const char *n[] = {"Matrix", "Timeline", "Detail", "Events"};
  return pane >= 0 && pane < VW_P_COUNT ? n[pane] : "?";
}

static bool wide(const vw_state *st) {
  return st->cols >= 160 && st->rows >= 40;
}

static int header_rows(const vw_state *st) {
  return st->rows >= 40 ? 5 : st->rows >= 16 ? 3 : 2;
}

void vw_layout_compute(const vw_state *st, vw_layout *l) {
  memset(l, 0, sizeof *l);
  int hh = header_rows(st);
  l->header = (vw_rect){0, 0, hh, st->cols};
  l->tabs = (vw_rect){hh, 0, 1, st->cols};
  l->status = (vw_rect){st->rows - 1, 0, 1, st->cols};
  int top = hh + 1, h = st->rows - top - 1;
  if (h < 1)
    h = 1;
  if (wide(st)) {
    int lw = st->cols * 11 / 20, rw = st->cols - lw - 1;
    int th = h * 3 / 5, bh = h - th;
    l->pane[VW_P_MATRIX] = (vw_rect){top, 0, th, lw};
    l->pane[VW_P_TIMELINE] = (vw_rect){top + th, 0, bh, lw};
    l->pane[VW_P_DETAIL] = (vw_rect){top, lw + 1, th, rw};
    l->pane[VW_P_EVENTS] = (vw_rect){top + th, lw + 1, bh, rw};
    for (int p = 0; p < VW_P_COUNT; p++)
      l->shown[p] = true;
  } else if (st->pane == VW_P_MATRIX && st->mx_want > 0 && h - st->mx_want >= 8) {
    /* a small matrix leaves room for the operation under the cursor */
    l->pane[VW_P_MATRIX] = (vw_rect){top, 0, st->mx_want, st->cols};
    l->pane[VW_P_DETAIL] = (vw_rect){top + st->mx_want, 0, h - st->mx_want, st->cols};
    l->shown[VW_P_MATRIX] = l->shown[VW_P_DETAIL] = true;
  } else {
    l->pane[st->pane] = (vw_rect){top, 0, h, st->cols};
    l->shown[st->pane] = true;
  }
}

void vw_matrix_geom(vw_rect r, int *nseq, int *nrows) {
  *nseq = r.w - VW_MX_LABEL > 0 ? r.w - VW_MX_LABEL : 0;
  *nrows = r.h - 3 > 0 ? r.h - 3 : 0;
}

void vw_timeline_geom(vw_rect r, int *width, int *nrows) {
  *width = r.w - VW_TL_LABEL > 0 ? r.w - VW_TL_LABEL : 0;
  *nrows = r.h - 3 > 0 ? r.h - 3 : 0;
  if (*nrows > VW_TL_ROWS)
    *nrows = VW_TL_ROWS;
}

void vw_events_geom(vw_rect r, int *nrows) {
  int msg = r.h >= 12 ? r.h / 3 : 0;
  *nrows = r.h - 1 - msg > 0 ? r.h - 1 - msg : 0;
  if (*nrows > VW_EV_CAP)
    *nrows = VW_EV_CAP;
}

void vw_detail_geom(vw_rect r, int *nrows) {
  *nrows = r.h - 5 > 0 ? r.h - 5 : 0;
}

/* The verdict word: distrun's when it stored one, else the rows'. */
static const char *outcome(const vw_diag *d, uint8_t *attr, char *buf, size_t len) {
  bool ok = d->kind == VW_DIAG_NONE && d->exit_code == 0;
  *attr = (uint8_t)(VW_A_BOLD | (ok ? VW_C_GREEN : VW_C_RED));
  return vw_diag_headline(d, buf, len);
}

/* Writes text over rows of r from row y, wrapping at the width; returns
 * the rows used. */
static int wrap(vw_canvas *c, vw_rect r, int y, int x, uint8_t attr, const char *text, int max) {
  int used = 0, w = r.w - x;
  const char *p = text;
  while (*p && used < max && w > 0) {
    const char *nl = strchr(p, '\n');
    int len = nl ? (int)(nl - p) : (int)strlen(p);
    int take = len > w ? w : len;
    if (len > w)
      for (int k = take; k > w / 2; k--)
        if (p[k] == ' ') {
          take = k;
          break;
        }
    char line[512];
    snprintf(line, sizeof line, "%.*s", take < 511 ? take : 511, p);
    vw_put(c, r, y + used++, x, attr, line);
    p += take;
    while (*p == ' ')
      p++;
    if (*p == '\n')
      p++;
  }
  return used;
}

static void header(const vw_state *st, const vw_model *m, const vw_diag *d, vw_canvas *c,
                   vw_rect r) {
  const vw_job *j = &m->job;
  char span[32], word[48];
  uint8_t oa;
  const char *out = outcome(d, &oa, word, sizeof word);
  vw_fill(c, r, 0, 0, r.w, ' ', VW_A_REV);
  /* the verdict first: it must survive the narrowest terminal */
  int x = vw_put(c, r, 0, 0, VW_A_REV | VW_A_BOLD, " distview  ");
  x += vw_put(c, r, 0, x, VW_A_REV | VW_A_BOLD, out);
  vw_putf(c, r, 0, x, VW_A_REV, "  job %s | %d ranks | %d group%s | %s",
          j->job_id[0] ? j->job_id : "?", j->world_size, j->ngroups, j->ngroups == 1 ? "" : "s",
          vw_fmt_dur(j->t1 - j->t0, span, sizeof span));
  bool said = d->kind != VW_DIAG_NONE || d->has_verdict;
  const char *text = said ? d->text : "no desync, hang or failure in this trace";
  uint8_t ta = d->kind != VW_DIAG_NONE ? (uint8_t)(VW_A_BOLD | VW_C_RED) : VW_C_GREEN;
  int used = wrap(c, r, 1, 1, ta, text, r.h - 1);
  if (d->has_report && used < r.h - 1)
    vw_putf(c, r, 1 + used++, 1, VW_C_YELLOW, "(the job's own %s from rank %d is in Events)",
            d->report_kind, d->report_rank);
  if (j->skipped[0] && used < r.h - 1) {
    int n = 1;
    for (const char *p = j->skipped; (p = strchr(p, '\n')) && p[1]; p++)
      n++;
    vw_putf(c, r, 1 + used, 1, VW_C_YELLOW | VW_A_BOLD,
            "the merge skipped %d rank file%s (distview summary lists why)", n, n > 1 ? "s" : "");
  }
  (void)st;
}

static void tabs(const vw_state *st, const vw_model *m, vw_canvas *c, vw_rect r) {
  int x = 0;
  for (int p = 0; p < VW_P_COUNT; p++) {
    uint8_t a = p == st->pane ? (uint8_t)(VW_A_REV | VW_A_BOLD) : 0;
    x += vw_putf(c, r, 0, x, a, " %d %s ", p + 1, vw_pane_name(p));
  }
  const vw_filter *f = &st->filter;
  if (f->rank >= 0 || f->op[0] || f->state[0] || f->group >= 0) {
    char fb[128] = "";
    size_t off = 0;
    if (f->group >= 0)
      off += (size_t)snprintf(fb + off, sizeof fb - off, " group=%d", f->group);
    if (f->rank >= 0)
      off += (size_t)snprintf(fb + off, sizeof fb - off, " rank=%d", f->rank);
    if (f->op[0])
      off += (size_t)snprintf(fb + off, sizeof fb - off, " op=%s", f->op);
    if (f->state[0])
      snprintf(fb + off, sizeof fb - off, " state=%s", f->state);
    x += vw_putf(c, r, 0, x, VW_C_YELLOW | VW_A_BOLD, " filter:%s ", fb);
  }
  const vw_group *g = st->group_idx >= 0 && st->group_idx < m->job.ngroups
                          ? &m->job.groups[st->group_idx] : NULL;
  if (g)
    vw_putf(c, r, 0, x + 1, VW_A_DIM, "group %d '%s' [ ]", g->id, vw_group_name(m, g->id));
}

static void status(const vw_state *st, vw_canvas *c, vw_rect r) {
  if (st->mode == VW_M_SEARCH || st->mode == VW_M_FILTER) {
    int x = vw_put(c, r, 0, 0, VW_A_BOLD, st->mode == VW_M_SEARCH ? "/" : "filter: ");
    x += vw_put(c, r, 0, x, 0, st->prompt);
    vw_fill(c, r, 0, x, 1, ' ', VW_A_REV);   // the cursor
    return;
  }
  if (st->msg[0]) {
    vw_put(c, r, 0, 0, VW_C_YELLOW | VW_A_BOLD, st->msg);
    return;
  }
  vw_put(c, r, 0, 0, VW_A_DIM, "? help  q quit  Tab pane  Enter open  Esc back  z fold  "
                               "{ } differing rank  / search  n/N next  f filter  [ ] group  "
                               "+/- zoom");
}

static void help(vw_canvas *c, const vw_state *st) {
  int n;
  const vw_binding *b = vw_bindings(&n);
  int lines = 2;
  for (int i = 0; i < n; i++)
    lines += b[i].keys != NULL;
  int h = lines + 2 < st->rows ? lines + 2 : st->rows, w = st->cols < 72 ? st->cols : 72;
  vw_rect r = {(st->rows - h) / 2, (st->cols - w) / 2, h, w};
  for (int y = 0; y < h; y++)
    vw_fill(c, r, y, 0, w, ' ', VW_A_REV);
  vw_put(c, r, 0, 2, VW_A_REV | VW_A_BOLD, "distview keys (any key closes)");
  int y = 2;
  for (int i = 0; i < n && y < h; i++)
    if (b[i].keys) {
      vw_put(c, r, y, 2, VW_A_REV | VW_A_BOLD, b[i].keys);
      vw_put(c, r, y++, 14, VW_A_REV, b[i].help);
    }
}

void vw_render(const vw_state *st, const vw_model *m, const vw_diag *d, const vw_pages *p,
               vw_canvas *c) {
  vw_canvas_clear(c);
  vw_layout l;
  vw_layout_compute(st, &l);
  header(st, m, d, c, l.header);
  tabs(st, m, c, l.tabs);
  if (l.shown[VW_P_MATRIX])
    vw_render_matrix(st, m, d, p, c, l.pane[VW_P_MATRIX], st->pane == VW_P_MATRIX);
  if (l.shown[VW_P_TIMELINE])
    vw_render_timeline(st, m, p, c, l.pane[VW_P_TIMELINE], st->pane == VW_P_TIMELINE);
  if (l.shown[VW_P_DETAIL])
    vw_render_detail(st, m, p, c, l.pane[VW_P_DETAIL], st->pane == VW_P_DETAIL);
  if (l.shown[VW_P_EVENTS])
    vw_render_events(st, m, p, c, l.pane[VW_P_EVENTS], st->pane == VW_P_EVENTS);
  if (wide(st)) {
    vw_rect all = {0, 0, st->rows, st->cols};
    int x = l.pane[VW_P_DETAIL].x - 1;
    for (int y = l.pane[VW_P_MATRIX].y; y < st->rows - 1; y++)
      vw_fill(c, all, y, x, 1, '|', VW_A_DIM);
  }
  status(st, c, l.status);
  if (st->mode == VW_M_HELP)
    help(c, st);
}
