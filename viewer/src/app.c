/* app.c - the viewer without a terminal: a model, the UI state, and the
 * pages fetched for the visible panes.
 *
 * One key goes through input.c (pure), then app.c does what the key left
 * in st->req with the model (search, open, filter), clamps the cursors to
 * the trace, and before each render fetches exactly what the visible panes
 * show. term.c drives this with real keys; tests drive it with
 * vw_app_keys("jj/ALL<Enter>") and read the canvas. The cursor starts on
 * the diagnosis: its group, its operation, its culprit's row. */
#include <stdlib.h>
#include <string.h>

#include "diag_int.h"
#include "vw_ui.h"

static int rank_rows(vw_app *a, int *out, int cap) {
  const vw_model *m = a->m;
  const vw_group *g = a->st.group_idx >= 0 && a->st.group_idx < m->job.ngroups
                          ? &m->job.groups[a->st.group_idx] : NULL;
  int n = 0;
  int total = g && g->size ? g->size : m->job.nranks;
  for (int i = 0; i < total && n < cap; i++) {
    int rank = g && g->size ? g->members[i] : m->job.ranks[i].rank;
    if (a->st.filter.rank < 0 || a->st.filter.rank == rank)
      out[n++] = rank;
  }
  return n;
}

static int group_id(const vw_app *a) {
  const vw_job *j = &a->m->job;
  return a->st.group_idx >= 0 && a->st.group_idx < j->ngroups ? j->groups[a->st.group_idx].id : 0;
}

static int64_t group_max(const vw_app *a) {
  const vw_job *j = &a->m->job;
  return a->st.group_idx >= 0 && a->st.group_idx < j->ngroups ? j->groups[a->st.group_idx].max_seq
                                                              : 0;
}

static int64_t clamp64(int64_t v, int64_t lo, int64_t hi) {
  return v < lo ? lo : v > hi ? hi : v;
}

/* Keeps a cursor inside [0, n) and its window [top, top + rows) around it. */
static void scroll(int *sel, int *top, int n, int rows) {
  *sel = (int)clamp64(*sel, 0, n > 0 ? n - 1 : 0);
  if (rows < 1)
    rows = 1;
  if (*sel < *top)
    *top = *sel;
  if (*sel >= *top + rows)
    *top = *sel - rows + 1;
  *top = (int)clamp64(*top, 0, n > rows ? n - rows : 0);
}

static void clamp(vw_app *a, const vw_layout *l) {
  vw_state *st = &a->st;
  const vw_job *j = &a->m->job;
  st->group_idx = (int)clamp64(st->group_idx, 0, j->ngroups > 0 ? j->ngroups - 1 : 0);
  int64_t max = group_max(a);
  st->m_seq = clamp64(st->m_seq, 1, max > 0 ? max : 1);
  int nseq, nrows;
  vw_matrix_geom(l->pane[VW_P_MATRIX], &nseq, &nrows);
  if (nseq < 1)
    nseq = 1;
  if (st->m_seq < st->m_seq0)
    st->m_seq0 = st->m_seq;
  if (st->m_seq >= st->m_seq0 + nseq)
    st->m_seq0 = st->m_seq - nseq + 1;
  st->m_seq0 = clamp64(st->m_seq0, 1, max > nseq ? max - nseq + 1 : 1);
  (void)nrows;   // the matrix's rows are known after its fetch (refresh)
  /* timeline: cursor inside the job, window around the cursor */
  int64_t t0 = j->t0, t1 = j->t1 > j->t0 ? j->t1 : j->t0 + 1;
  st->t_span = clamp64(st->t_span, 1000, t1 - t0 > 1000 ? t1 - t0 : 1000);
  st->t_cursor = clamp64(st->t_cursor, t0, t1);
  if (st->t_cursor < st->t_start || st->t_cursor >= st->t_start + st->t_span)
    st->t_start = st->t_cursor - st->t_span / 2;
  st->t_start = clamp64(st->t_start, t0 - st->t_span / 2, t1);
  int tw, trows;
  vw_timeline_geom(l->pane[VW_P_TIMELINE], &tw, &trows);
  scroll(&st->t_row, &st->t_top, a->pages->nranks, trows);
  st->d_seq = clamp64(st->d_seq, 1, INT64_MAX / 4);
  int erows;
  vw_events_geom(l->pane[VW_P_EVENTS], &erows);
  if (st->e_total >= 0)   // unknown until the first fetch
    st->e_sel = clamp64(st->e_sel, 0, st->e_total > 0 ? st->e_total - 1 : 0);
  if (st->e_sel < st->e_top)
    st->e_top = st->e_sel;
  if (erows > 0 && st->e_sel >= st->e_top + erows)
    st->e_top = st->e_sel - erows + 1;
}

/* --- fetching --------------------------------------------------------------------- */

/* The page row (index into p->ranks) under the matrix cursor: m_row is a
 * row of the last fold, or a rank's index before the first one. */
static int cursor_rank(const vw_pages *p, int m_row) {
  if (p->n_mx_rows == 0)
    return (int)clamp64(m_row, 0, p->nranks > 0 ? p->nranks - 1 : 0);
  return p->mx_rows[clamp64(m_row, 0, p->n_mx_rows - 1)].first;
}

/* The matrix: every rank of the group over the visible columns (the query
 * reads those columns' rows of every rank whatever it keeps), then folded.
 * AUTO folds when the ranks overflow the pane at its full height. A fold,
 * an unfold or other columns move the rows: the cursor stays on its rank.
 * A hidden matrix has no columns and one row per rank (folded without
 * columns, ranks that differ would share a row and the cursor drift). */
static int fetch_matrix(vw_app *a, bool shown) {
  vw_state *st = &a->st;
  vw_pages *p = a->pages;
  vw_state full = *st;
  full.pane = VW_P_MATRIX;
  full.mx_want = 0;
  vw_layout l;
  vw_layout_compute(&full, &l);
  int nseq, nrows;
  vw_matrix_geom(l.pane[VW_P_MATRIX], &nseq, &nrows);
  int at = cursor_rank(p, st->m_row);
  vw_matrix_page_free(&p->mx);
  p->n_mx_rows = 0;
  if (vw_model_matrix(a->m, group_id(a), p->ranks, p->nranks, st->m_seq0, shown ? nseq : 0,
                      &st->filter, &p->mx) != 0)
    return -1;
  if (shown)
    st->m_folded = st->m_fold == VW_FOLD_ON || (st->m_fold == VW_FOLD_AUTO && p->nranks > nrows);
  p->n_mx_rows = vw_fold_rows(a->m, &a->diag, &p->mx, shown && st->m_folded, p->mx_rows);
  st->m_row = vw_fold_find(p->mx_rows, p->n_mx_rows, at);
  return 0;
}

/* Everything but the matrix, for the panes layout l shows. */
static int fetch(vw_app *a, const vw_layout *l) {
  if (a->st.pane == VW_P_MATRIX) {   // the detail follows the matrix cursor
    a->st.d_group = group_id(a);
    a->st.d_seq = a->st.m_seq;
    a->st.d_p2p = false;
  }
  vw_pages *p = a->pages;
  vw_state *st = &a->st;
  vw_model *m = a->m;
  vw_events_free(p->ev, p->nev);
  p->nev = p->ndetail = p->tl_nrows = 0;
  if (l->shown[VW_P_DETAIL] &&
      (st->d_p2p ? vw_model_p2p_pair(m, st->d_rank, st->d_group, st->d_seq, p->detail,
                                           VW_DETAIL_CAP, &p->ndetail)
                       : vw_model_collective(m, st->d_group, st->d_seq, p->detail,
                                             VW_DETAIL_CAP, &p->ndetail)) != 0)
    return -1;
  for (int i = 0; st->d_want_rank >= 0 && i < p->ndetail; i++)
    if (p->detail[i].rank == st->d_want_rank)
      st->d_row = i;
  if (l->shown[VW_P_DETAIL])
    st->d_want_rank = -1;
  int drows;
  vw_detail_geom(l->pane[VW_P_DETAIL], &drows);
  scroll(&st->d_row, &st->d_top, p->ndetail, drows);
  int tw, trows;
  vw_timeline_geom(l->pane[VW_P_TIMELINE], &tw, &trows);
  for (int i = 0; l->shown[VW_P_TIMELINE] && i < trows && st->t_top + i < p->nranks; i++) {
    p->tl_rank[i] = p->ranks[st->t_top + i];
    if (vw_model_rank_ops(m, p->tl_rank[i], st->t_start, st->t_start + st->t_span, tw,
                          p->tl_ops[i], VW_TL_CAP, &p->tl_n[i]) != 0)
      return -1;
    p->tl_nrows = i + 1;
  }
  int erows;
  vw_events_geom(l->pane[VW_P_EVENTS], &erows);
  vw_filter ef = {.group = st->filter.group, .rank = st->filter.rank};
  if (vw_model_events(m, &ef, st->e_top, p->ev, erows > 0 ? erows : 1, &p->nev, &st->e_total))
    return -1;
  return 0;
}

/* --- requests left by input.c -------------------------------------------------------- */

/* rank >= 0: that rank's point-to-point operation #seq (and its pair) */
/* at: the rank whose row the detail's cursor starts on (-1: the first) */
static void open_detail(vw_app *a, int group, int64_t seq, int rank, int at) {
  a->st.d_group = group;
  a->st.d_seq = seq;
  a->st.d_p2p = rank >= 0;
  a->st.d_rank = rank;
  a->st.d_row = a->st.d_top = 0;
  a->st.d_want_rank = at;
  if (a->st.pane != VW_P_DETAIL)
    a->st.back_pane = a->st.pane;
  a->st.pane = VW_P_DETAIL;
}

static void req_open(vw_app *a) {
  vw_state *st = &a->st;
  vw_pages *p = a->pages;
  if (st->pane == VW_P_MATRIX) {
    /* on the cursor's rank: a folded row's first */
    int at = p->nranks > 0 ? p->ranks[cursor_rank(p, st->m_row)] : -1;
    open_detail(a, group_id(a), st->m_seq, -1, at);
  } else if (st->pane == VW_P_TIMELINE) {
    int row = st->t_row - st->t_top;
    for (int i = 0; row >= 0 && row < p->tl_nrows && i < p->tl_n[row]; i++) {
      const vw_op *o = &p->tl_ops[row][i];
      int64_t s = o->t_start >= 0 ? o->t_start : o->t_enq, e = o->t_end >= 0 ? o->t_end : a->m->job.t1;
      if (st->t_cursor >= s && st->t_cursor <= e) {
        open_detail(a, o->group_id, o->seq, vw_op_is_p2p(o->op) ? o->rank : -1, o->rank);
        return;
      }
    }
    snprintf(st->msg, sizeof st->msg, "no operation under the cursor");
  } else if (st->pane == VW_P_EVENTS) {
    int i = (int)(st->e_sel - st->e_top);
    if (i >= 0 && i < p->nev && p->ev[i].group_id >= 0 && p->ev[i].seq > 0)
      open_detail(a, p->ev[i].group_id, p->ev[i].seq, -1, p->ev[i].rank);
    else
      snprintf(st->msg, sizeof st->msg, "this event names no operation");
  }
}

static int refresh(vw_app *a);

/* { }: the next or previous row that differs, in the matrix as its pane
 * shows it now (the key may just have focused it). */
static void req_jump(vw_app *a) {
  vw_state *st = &a->st;
  a->fetched = false;
  if (refresh(a) != 0)
    return;
  const vw_pages *p = a->pages;
  int to = vw_fold_next_diff(p->mx_rows, p->n_mx_rows, st->m_row, st->jump_dir);
  if (to >= 0) {
    st->m_row = to;
    return;
  }
  int64_t last = p->mx.seq0 + p->mx.nseq - 1, max = group_max(a);
  snprintf(st->msg, sizeof st->msg, "no rank %s differs from the others at #%lld..#%lld "
           "(h/l, PgUp/PgDn: other operations)", st->jump_dir > 0 ? "further down" : "further up",
           (long long)p->mx.seq0, (long long)(last < max ? last : max));
}

static void req_search(vw_app *a) {
  vw_state *st = &a->st;
  int64_t found = -1;
  int rc;
  if (st->pane == VW_P_EVENTS) {
    vw_filter ef = {.group = st->filter.group, .rank = st->filter.rank};
    rc = vw_model_search_event(a->m, &ef, st->e_sel, st->search_dir, st->search, &found);
    if (rc == 0 && found >= 0)
      st->e_sel = found;
  } else {
    bool det = st->pane == VW_P_DETAIL;
    int g = det ? st->d_group : group_id(a);
    rc = vw_model_search_op(a->m, g, det ? st->d_seq : st->m_seq, st->search_dir, st->search,
                            &found);
    if (rc == 0 && found >= 0) {
      if (det) {
        st->d_seq = found;
        st->d_p2p = false; /* the search walks collectives */
      } else
        st->m_seq = found;
      if (st->pane == VW_P_TIMELINE)
        st->pane = VW_P_MATRIX;
    }
  }
  if (rc != 0)
    snprintf(st->msg, sizeof st->msg, "search failed: %.140s", a->m->err);
  else if (found < 0)
    snprintf(st->msg, sizeof st->msg, "'%s': no %s match", st->search,
             st->search_dir > 0 ? "further" : "earlier");
  else
    snprintf(st->msg, sizeof st->msg, "'%s': found #%lld", st->search, (long long)found);
}

static void req_filter(vw_app *a) {
  vw_state *st = &a->st;
  vw_filter f;
  char why[160];
  if (vw_parse_filter(st->prompt, &f, why, sizeof why) != 0) {
    snprintf(st->msg, sizeof st->msg, "%s", why);
    return;
  }
  if (f.group >= 0) {
    int gi = vw_model_group_index(a->m, f.group);
    if (gi < 0) {
      snprintf(st->msg, sizeof st->msg, "filter: no group %d in this trace", f.group);
      return;
    }
    st->group_idx = gi;
  }
  st->filter = f;
  st->m_row = st->t_row = 0;
  st->e_sel = st->e_top = 0;
  snprintf(st->msg, sizeof st->msg, "%s", st->prompt[0] ? "filter applied" : "filter cleared");
}

int vw_app_key(vw_app *a, int key) {
  int gi = a->st.group_idx;
  bool typing = a->st.mode == VW_M_SEARCH || a->st.mode == VW_M_FILTER;
  a->dirty = true;
  if (a->st.mode == VW_M_NORMAL && key != VW_K_TICK)
    a->st.msg[0] = '\0';   // a message lasts until the next key
  int flags = vw_handle_key(&a->st, key);
  switch (a->st.req) {
  case VW_REQ_OPEN: req_open(a); break;
  case VW_REQ_SEARCH: req_search(a); break;
  case VW_REQ_FILTER: req_filter(a); break;
  case VW_REQ_JUMP: req_jump(a); break;
  }
  a->st.req = VW_REQ_NONE;
  if (a->st.group_idx != gi) {
    a->st.m_row = a->st.m_top = 0;
    a->st.m_seq0 = 1;
    a->st.m_seq = INT64_MAX / 4;
  }
  /* a character typed into a prompt changes the status line only */
  bool still = a->st.mode == VW_M_SEARCH || a->st.mode == VW_M_FILTER;
  if (!(typing && still))
    a->fetched = false;
  if ((flags & VW_H_RELOAD) && key == VW_K_TICK && vw_model_refresh(a->m) == 0) {
    vw_diag_free(&a->diag);
    vw_diagnose(a->m, false, &a->diag);   // --follow: the job may have said more
  }
  return flags;
}

/* --- lifetime, rendering, scripted keys ------------------------------------------------ */

static void start_on_diagnosis(vw_app *a) {
  vw_state *st = &a->st;
  const vw_diag *d = &a->diag;
  const vw_job *j = &a->m->job;
  st->filter = (vw_filter){.group = -1, .rank = -1};
  st->d_want_rank = -1;
  int gi = d->group_id >= 0 ? vw_model_group_index(a->m, d->group_id) : -1;
  st->group_idx = gi >= 0 ? gi : 0;
  st->m_seq = d->seq > 0 ? d->seq : group_max(a);
  st->m_seq0 = 1;
  st->d_group = gi >= 0 ? d->group_id : group_id(a);
  st->d_seq = st->m_seq;
  st->d_p2p = false;
  a->pages->nranks = rank_rows(a, a->pages->ranks, VW_MAX_RANKS);
  for (int i = 0; i < a->pages->nranks; i++)
    if (a->pages->ranks[i] == d->rank)
      st->m_row = st->t_row = i;
  st->t_span = j->t1 > j->t0 ? j->t1 - j->t0 : 1000000;
  st->t_start = j->t0;
  st->t_cursor = j->t0;
  vw_op o;
  bool found = false;
  bool p2p = vw_op_is_p2p(d->op); /* numbered apart from the collectives */
  if (d->rank >= 0 && d->group_id >= 0 && d->seq > 0)
    vw_model_op(a->m, d->rank, d->group_id, p2p, d->seq, &o, &found);
  if (!found && d->n_blocked)
    vw_model_op(a->m, d->blocked[0], d->group_id, p2p, d->seq, &o, &found);
  if (found)
    st->t_cursor = o.t_start >= 0 ? o.t_start : o.t_enq;
  st->e_sel = 0;
  st->e_total = -1;
  if (d->has_report) {
    vw_filter none = {.group = -1, .rank = -1};
    int64_t at = -1;
    if (vw_model_search_event(a->m, &none, -1, 1, d->report_kind, &at) == 0 && at >= 0)
      st->e_sel = at;
  }
}

int vw_app_open(vw_app *a, const char *path, int rows, int cols, char *err, size_t errlen) {
  memset(a, 0, sizeof *a);
  if (vw_model_open(path, &a->m, err, errlen) != 0)
    return -1;
  a->pages = calloc(1, sizeof *a->pages);
  for (int i = 0; a->pages && i < VW_TL_ROWS; i++)
    if (!(a->pages->tl_ops[i] = calloc(VW_TL_CAP, sizeof(vw_op))))
      break;
  if (!a->pages || !a->pages->tl_ops[VW_TL_ROWS - 1] || vw_diagnose(a->m, false, &a->diag) != 0) {
    snprintf(err, errlen, "%s", a->m->err[0] ? a->m->err : "out of memory");
    vw_app_close(a);
    return -1;
  }
  a->st.color = true;
  start_on_diagnosis(a);
  if (vw_app_resize(a, rows, cols) != 0) {
    snprintf(err, errlen, "bad screen size %dx%d", cols, rows);
    vw_app_close(a);
    return -1;
  }
  return 0;
}

void vw_app_close(vw_app *a) {
  if (a->pages) {
    vw_matrix_page_free(&a->pages->mx);
    vw_events_free(a->pages->ev, a->pages->nev);
    for (int i = 0; i < VW_TL_ROWS; i++)
      free(a->pages->tl_ops[i]);
    free(a->pages);
  }
  vw_diag_free(&a->diag);
  vw_canvas_free(&a->canvas);
  vw_model_close(a->m);
  memset(a, 0, sizeof *a);
}

int vw_app_resize(vw_app *a, int rows, int cols) {
  vw_canvas_free(&a->canvas);
  if (vw_canvas_init(&a->canvas, rows, cols) != 0)
    return -1;
  a->st.rows = rows;
  a->st.cols = cols;
  a->dirty = true;
  a->fetched = false;
  return 0;
}

/* Fetches what the state shows unless the pages already match it. The
 * matrix comes first: its rows decide how much of the screen it takes
 * (mx_want), and so whether the detail fits under it. */
static int refresh(vw_app *a) {
  if (a->fetched)
    return 0;
  vw_state *st = &a->st;
  a->pages->nranks = rank_rows(a, a->pages->ranks, VW_MAX_RANKS);
  st->mx_want = 0;
  vw_layout l;
  vw_layout_compute(st, &l);
  clamp(a, &l);
  int rc = fetch_matrix(a, l.shown[VW_P_MATRIX]);
  st->mx_want = a->pages->n_mx_rows + 3;
  vw_layout_compute(st, &l);
  int nseq, nrows;
  vw_matrix_geom(l.pane[VW_P_MATRIX], &nseq, &nrows);
  scroll(&st->m_row, &st->m_top, a->pages->n_mx_rows, nrows);
  clamp(a, &l);
  if (rc == 0)
    rc = fetch(a, &l);
  if (rc != 0)
    snprintf(st->msg, sizeof st->msg, "%.159s", a->m->err);
  clamp(a, &l);
  a->fetched = rc == 0;
  return rc;
}

int vw_app_render(vw_app *a) {
  int rc = refresh(a);
  vw_render(&a->st, a->m, &a->diag, a->pages, &a->canvas);
  a->dirty = false;
  return rc;
}

static const struct { const char *name; int key; } names[] = {
    {"Up", VW_K_UP}, {"Down", VW_K_DOWN}, {"Left", VW_K_LEFT}, {"Right", VW_K_RIGHT},
    {"PgUp", VW_K_PGUP}, {"PgDn", VW_K_PGDN}, {"Home", VW_K_HOME}, {"End", VW_K_END},
    {"Tab", VW_K_TAB}, {"BTab", VW_K_BTAB}, {"Enter", VW_K_ENTER}, {"Esc", VW_K_ESC},
    {"BS", VW_K_BKSP}, {"lt", '<'},
};

int vw_app_keys(vw_app *a, const char *keys) {
  int flags = 0;
  for (const char *p = keys; *p;) {
    int key = (unsigned char)*p++;
    if (key == '<') {
      const char *e = strchr(p, '>');
      for (size_t i = 0; e && i < sizeof names / sizeof *names; i++)
        if ((size_t)(e - p) == strlen(names[i].name) && !strncmp(p, names[i].name, (size_t)(e - p))) {
          key = names[i].key;
          p = e + 1;
          break;
        }
    }
    /* Each key sees the screen the previous one left (its page sizes). */
    if (a->dirty)
      vw_app_render(a);
    flags = vw_app_key(a, key);
    if (flags & VW_H_QUIT)
      break;
  }
  vw_app_render(a);
  return flags;
}

const char *vw_app_line(vw_app *a, int y, char *buf, size_t len) {
  return vw_canvas_line(&a->canvas, y, buf, len);
}

bool vw_app_screen_has(vw_app *a, const char *s) {
  char buf[4200];
  for (int y = 0; y < a->canvas.rows; y++)
    if (strstr(vw_canvas_line(&a->canvas, y, buf, sizeof buf), s))
      return true;
  return false;
}
