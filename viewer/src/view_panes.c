/* view_panes.c - the four panes: progress matrix, timeline, detail of one
 * operation across ranks (with each rank's GPU times when the trace has
 * them), events.
 *
 * Pure rendering of what app.c fetched. The matrix marks a rank that is
 * behind or diverged in its label (LAG, DIFF, DEAD) and in its cell at the
 * diagnosed operation, so it stands out before any key is pressed; at 1,024
 * ranks the alike ones fold into rows such as "0-699 x700" (fold.c), so
 * that rank is on the first screen too; the
 * detail pane compares every rank's fingerprint with the majority's and
 * flags each differing field with '*'. */
#include <stdlib.h>
#include <string.h>

#include "diag_int.h"
#include "vw_ui.h"

static void title(vw_canvas *c, vw_rect r, bool focus, const char *fmt_text) {
  vw_fill(c, r, 0, 0, r.w, ' ', focus ? VW_A_REV : VW_A_UL);
  vw_put(c, r, 0, 0, (uint8_t)((focus ? VW_A_REV : VW_A_UL) | VW_A_BOLD), fmt_text);
}

static bool in_list(const int *l, int n, int v) {
  for (int i = 0; i < n; i++)
    if (l[i] == v)
      return true;
  return false;
}

/* --- matrix ------------------------------------------------------------------ */

static const char glyph[] = {'.', '#', '>', 'X', 'T', ' '};

static uint8_t cell_attr(int s) {
  switch (s) {
  case VW_ST_DONE: return VW_C_GREEN;
  case VW_ST_RUN: return VW_C_YELLOW | VW_A_BOLD;
  case VW_ST_FAIL: return VW_C_RED | VW_A_BOLD;
  case VW_ST_TIMEOUT: return VW_C_MAGENTA | VW_A_BOLD;
  }
  return VW_A_DIM;
}

static void axis(vw_canvas *c, vw_rect r, int y, int x0, int64_t seq0, int nseq) {
  for (int k = 0; k < nseq; k++) {
    int64_t s = seq0 + k;
    if (s % 10 == 0 || k == 0) {
      char b[24];
      int n = snprintf(b, sizeof b, "%lld", (long long)s);
      if (k + n <= nseq && (k == 0 || s % 10 == 0))
        vw_put(c, r, y, x0 + k, VW_A_DIM, b), k += n - 1;
    }
  }
}

/* A row's label: a rank and its tag, or folded ranks as "0-699 x700"
 * (first and last rank of the run and how many; a group's members need
 * not be consecutive global ranks, hence the count). */
static void row_label(const vw_model *m, const vw_diag *d, const vw_matrix_page *mx,
                      const vw_mx_row *row, bool sel, vw_canvas *c, vw_rect r, int y) {
  int rank = mx->ranks[row->first];
  const char *tag = vw_rank_tag(m, d, mx->group_id, rank);
  char who[24], what[16];
  if (row->n > 1) {
    snprintf(who, sizeof who, "%d-%d", rank, mx->ranks[row->first + row->n - 1]);
    snprintf(what, sizeof what, "x%d", row->n);
  } else {
    snprintf(who, sizeof who, "%d", rank);
    snprintf(what, sizeof what, "%s", tag);
  }
  uint8_t la = tag[0] ? (uint8_t)(VW_A_BOLD | VW_C_RED) : row->differs ? VW_C_YELLOW : 0;
  vw_putf(c, r, y, 0, (uint8_t)(la | (sel ? VW_A_BOLD : 0)), "%c%9s %-5s ", sel ? '>' : ' ',
          who, what);
}

static void row_cells(const vw_state *st, const vw_diag *d, const vw_group *g,
                      const vw_matrix_page *mx, const vw_mx_row *row, bool sel, int nseq,
                      vw_canvas *c, vw_rect r, int y) {
  int rank = mx->ranks[row->first];
  for (int k = 0; k < mx->nseq && k < nseq; k++) {
    int s = mx->cells[row->first * mx->nseq + k];
    int64_t seq = mx->seq0 + k;
    if (g && seq > g->max_seq)
      break;   // past the group's last operation: nothing to show
    char ch = glyph[s];
    uint8_t a = cell_attr(s);
    if (d->group_id == mx->group_id && d->seq == seq &&
        (in_list(d->culprits, d->n_culprits, rank) || d->rank == rank)) {
      ch = d->kind == VW_DIAG_DESYNC ? '!' : s == VW_ST_NONE ? '?' : ch;
      a = VW_A_BOLD | VW_C_RED;
    }
    if (sel && seq == st->m_seq)
      a = VW_A_REV | VW_A_BOLD;
    vw_fill(c, r, y, VW_MX_LABEL + k, 1, ch, a);
  }
}

/* The selected cell in words; a folded row names the ranks it stands for. */
static void cell_words(const vw_state *st, const vw_pages *p, vw_canvas *c, vw_rect r) {
  static const char *words[] = {"never entered", "completed", "in flight", "failed",
                                "timed out", "hidden by the filter"};
  const vw_matrix_page *mx = &p->mx;
  if (st->m_row < 0 || st->m_row >= p->n_mx_rows || st->m_seq < mx->seq0 ||
      st->m_seq >= mx->seq0 + mx->nseq)
    return;
  const vw_mx_row *row = &p->mx_rows[st->m_row];
  int i = row->first, rank = mx->ranks[i];
  int s = mx->cells[i * mx->nseq + (st->m_seq - mx->seq0)];
  if (row->n == 1) {
    vw_putf(c, r, r.h - 1, 0, VW_A_BOLD, " rank %d #%lld: %s   (its last: #%lld, last completed: "
            "#%lld)   Enter: across ranks", rank, (long long)st->m_seq, words[s],
            (long long)mx->last_seq[i], (long long)mx->last_done[i]);
    return;
  }
  vw_putf(c, r, r.h - 1, 0, VW_A_BOLD, " %d ranks %d-%d #%lld: %s   (rank %d's last: #%lld, "
          "last completed: #%lld)   Enter: across ranks", row->n, rank,
          mx->ranks[i + row->n - 1], (long long)st->m_seq, words[s], rank,
          (long long)mx->last_seq[i], (long long)mx->last_done[i]);
}

void vw_render_matrix(const vw_state *st, const vw_model *m, const vw_diag *d,
                      const vw_pages *p, vw_canvas *c, vw_rect r, bool focus) {
  const vw_matrix_page *mx = &p->mx;
  const vw_group *g = vw_model_group(m, mx->group_id);
  char t[256], fold[48] = "";
  if (st->m_folded)
    snprintf(fold, sizeof fold, " in %d rows (z: unfold)", p->n_mx_rows);
  snprintf(t, sizeof t, " Progress: group %d '%s', %d ranks%s, #1..#%lld   "
           "# done  > in flight  . never entered  X failed  T timed out",
           mx->group_id, g ? vw_group_name(m, g->id) : "?", p->nranks, fold,
           (long long)(g ? g->max_seq : 0));
  title(c, r, focus, t);
  int nseq, nrows;
  vw_matrix_geom(r, &nseq, &nrows);
  vw_putf(c, r, 1, 0, VW_A_DIM, " %9s  seq:", "rank");
  axis(c, r, 1, VW_MX_LABEL, mx->seq0, mx->nseq < nseq ? mx->nseq : nseq);
  for (int i = 0; i < nrows && st->m_top + i < p->n_mx_rows; i++) {
    const vw_mx_row *row = &p->mx_rows[st->m_top + i];
    bool sel = st->m_top + i == st->m_row;
    row_label(m, d, mx, row, sel, c, r, 2 + i);
    row_cells(st, d, g, mx, row, sel, nseq, c, r, 2 + i);
  }
  cell_words(st, p, c, r);
}

/* --- timeline -------------------------------------------------------------------- */

static char op_glyph(const char *op) {
  static const struct { const char *op; char g; } map[] = {
      {"ALL_REDUCE", 'A'}, {"BROADCAST", 'B'}, {"BARRIER", '|'}, {"MONITORED_BARRIER", '|'},
      {"ALL_GATHER", 'G'}, {"REDUCE_SCATTER", 'S'}, {"REDUCE", 'R'}, {"ALL_TO_ALL", 'T'},
      {"SEND", '>'}, {"RECV", '<'}, {"GATHER", 'g'}, {"SCATTER", 's'}, {"BATCH_P2P", 'P'}};
  for (size_t i = 0; i < sizeof map / sizeof *map; i++)
    if (!strncmp(op, map[i].op, strlen(map[i].op)))
      return map[i].g;
  return '*';
}

void vw_render_timeline(const vw_state *st, const vw_model *m, const vw_pages *p, vw_canvas *c,
                        vw_rect r, bool focus) {
  char t[200], a[32], b[32];
  int64_t t0 = m->job.t0;
  snprintf(t, sizeof t, " Timeline: +%s .. +%s (%s wide, +/- zoom)   A all_reduce B broadcast "
           "G all_gather R reduce S reduce_scatter | barrier", vw_fmt_dur(st->t_start - t0, a, sizeof a),
           vw_fmt_dur(st->t_start + st->t_span - t0, b, sizeof b),
           vw_fmt_dur(st->t_span, (char[32]){0}, 32));
  title(c, r, focus, t);
  int width, nrows;
  vw_timeline_geom(r, &width, &nrows);
  if (width <= 0)
    return;
  int cur = (int)((double)(st->t_cursor - st->t_start) * width / (double)st->t_span);
  for (int k = 0; k < width; k += 20) {
    char lab[32];
    vw_fmt_dur(st->t_start + (int64_t)((double)st->t_span * k / width) - t0, lab, sizeof lab);
    vw_putf(c, r, 1, VW_TL_LABEL + k, VW_A_DIM, "|+%s", lab);
  }
  const vw_op *at = NULL;
  for (int row = 0; row < p->tl_nrows && row < nrows; row++) {
    bool sel = st->t_top + row == st->t_row;
    vw_putf(c, r, 2 + row, 0, sel ? VW_A_BOLD : 0, "%c%5d ", sel ? '>' : ' ', p->tl_rank[row]);
    for (int i = 0; i < p->tl_n[row]; i++) {
      const vw_op *o = &p->tl_ops[row][i];
      int64_t s = o->t_start >= 0 ? o->t_start : o->t_enq;
      int64_t e = o->t_end >= 0 ? o->t_end : m->job.t1;
      int c0 = (int)((double)(s - st->t_start) * width / (double)st->t_span);
      int c1 = (int)((double)(e - st->t_start) * width / (double)st->t_span);
      if (c0 < 0)
        c0 = 0;
      if (c1 >= width)
        c1 = width - 1;
      int sc = vw_state_code(o->state);
      uint8_t attr = sc == VW_ST_DONE ? VW_C_CYAN : cell_attr(sc);
      vw_fill(c, r, 2 + row, VW_TL_LABEL + c0, c1 - c0 + 1, op_glyph(o->op), attr);
      if (sel && st->t_cursor >= s && st->t_cursor <= e)
        at = o;
    }
    if (sel && cur >= 0 && cur < width)
      vw_attr(c, r, 2 + row, VW_TL_LABEL + cur, 1, VW_A_REV | VW_A_BOLD);
  }
  /* the cursor's column on the axis, unless a label is there */
  if (cur >= 0 && cur < width && VW_TL_LABEL + cur < r.w &&
      c->cells[(r.y + 1) * c->cols + r.x + VW_TL_LABEL + cur].ch == ' ')
    vw_fill(c, r, 1, VW_TL_LABEL + cur, 1, 'v', VW_A_BOLD);
  if (at) {
    char dur[32], gl[96];
    vw_putf(c, r, r.h - 1, 0, VW_A_BOLD, " rank %d: %s #%lld in %s, %s, %s   Enter: "
            "across ranks", at->rank, at->op, (long long)at->seq,
            vw_group_label(m, at->group_id, gl, sizeof gl), at->state,
            vw_fmt_dur(at->t_end >= 0 && at->t_start >= 0 ? at->t_end - at->t_start : -1, dur,
                       sizeof dur));
  } else {
    vw_put(c, r, r.h - 1, 0, VW_A_DIM, " (no operation under the cursor)");
  }
}

/* --- detail --------------------------------------------------------------------- */


/* The value of one fingerprint field, as the detail table prints it. */
static const char *field_value(const vw_op *o, const char *field, char *buf, size_t len) {
  if (!strcmp(field, "op"))
    snprintf(buf, len, "%s", o->op);
  else if (!strcmp(field, "dtype"))
    snprintf(buf, len, "%s", o->dtype[0] ? o->dtype : "-");
  else if (!strcmp(field, "shape"))
    snprintf(buf, len, "%s", o->shape[0] ? o->shape : "-");
  else if (!strcmp(field, "numel"))
    snprintf(buf, len, "%lld elements", (long long)o->numel_in);
  else if (!strcmp(field, "root"))
    snprintf(buf, len, "root %d", o->root);
  else
    snprintf(buf, len, "%s", o->redop[0] ? o->redop : "-");
  return buf;
}

static void detail_summary(const vw_pages *p, int maj, vw_canvas *c, vw_rect r) {
  const vw_op *o = p->detail;
  int n = p->ndetail, ndiff = 0, same[VW_DETAIL_CAP], nsame = 0;
  char line[256] = "", f[64], va[64], vb[64], rl[128];
  for (int i = 0; i < n; i++)
    if (vw_op_is_p2p(o[i].op) || !vw_fp_diff(&o[maj], &o[i], f, sizeof f))
      same[nsame++] = o[i].rank;
  for (int i = 0; i < n; i++)
    if (!vw_op_is_p2p(o[i].op) && vw_fp_diff(&o[maj], &o[i], f, sizeof f) && !ndiff++) {
      f[strcspn(f, ",")] = '\0';   // the first differing field, with both values
      snprintf(line, sizeof line, " fingerprint DIFFERS in %s: rank %d has %s, rank%s %s %s %s",
               f, o[i].rank, field_value(&o[i], f, va, sizeof va), nsame > 1 ? "s" : "",
               vw_fmt_ranks(same, nsame, rl, sizeof rl), nsame > 1 ? "have" : "has",
               field_value(&o[maj], f, vb, sizeof vb));
    }
  if (ndiff)
    vw_put(c, r, 1, 0, VW_A_BOLD | VW_C_RED, line);
  else
    vw_put(c, r, 1, 0, VW_C_GREEN, " fingerprint: every rank that entered it agrees");
  int64_t lo = INT64_MAX, hi = -1;
  int first = -1, lastr = -1;
  for (int i = 0; i < n; i++) {
    int64_t s = o[i].t_start >= 0 ? o[i].t_start : o[i].t_enq;
    if (s < lo)
      lo = s, first = o[i].rank;
    if (s > hi)
      hi = s, lastr = o[i].rank;
  }
  char sk[32];
  if (n > 1)
    vw_putf(c, r, 2, 0, 0, " arrival skew %s (first rank %d, last rank %d)",
            vw_fmt_dur(hi - lo, sk, sizeof sk), first, lastr);
}

/* The GPU columns' text: when the GPU started it after its enqueue, and
 * how long it ran there ("-" without a gpu event). */
static void gpu_text(const vw_op *o, char *start, char *ran, size_t len) {
  int64_t after = o->gpu_start - o->t_enq;
  vw_fmt_dur(o->gpu_ns >= 0 ? (after > 0 ? after : 0) : -1, start, len);
  vw_fmt_dur(o->gpu_ns, ran, len);
}

static void detail_row(const vw_op *o, const vw_op *maj, int64_t t_first, bool sel, bool gpu,
                       vw_canvas *c, vw_rect r, int y) {
  char f[64], dur[32], skew[32], gs[32] = "", gt[32] = "";
  vw_fp_diff(maj, o, f, sizeof f);
  bool p2p = vw_op_is_p2p(o->op);
#define DIFF(name) (!p2p && strstr(f, name) != NULL)
  uint8_t base = sel ? VW_A_REV : 0;
  int sc = vw_state_code(o->state);
  int64_t s = o->t_start >= 0 ? o->t_start : o->t_enq;
  vw_putf(c, r, y, 0, base, "%c%4d %-10s", sel ? '>' : ' ', o->rank, o->state);
  if (sc != VW_ST_DONE)
    vw_attr(c, r, y, 6, 10, (uint8_t)(base | cell_attr(sc)));
  struct { int x, w; const char *name; char text[48]; } col[] = {
      {17, 15, "op", ""}, {32, 9, "dtype", ""}, {41, 13, "shape", ""}, {54, 5, "root", ""},
      {59, 6, "redop", ""}};
  snprintf(col[0].text, sizeof col[0].text, "%s", o->op);
  snprintf(col[1].text, sizeof col[1].text, "%s", o->dtype[0] ? o->dtype : "-");
  snprintf(col[2].text, sizeof col[2].text, "%s", o->shape[0] ? o->shape : "-");
  snprintf(col[3].text, sizeof col[3].text, "%d", o->root);
  snprintf(col[4].text, sizeof col[4].text, "%s", o->redop[0] ? o->redop : "-");
  for (size_t i = 0; i < sizeof col / sizeof *col; i++) {
    bool d = DIFF(col[i].name) || (i == 2 && DIFF("numel"));
    char cell[64];
    snprintf(cell, sizeof cell, "%s%.40s", d ? "*" : "", col[i].text);
    if ((int)strlen(cell) >= col[i].w)
      cell[col[i].w - 1] = '\0';
    vw_put(c, r, y, col[i].x, (uint8_t)(base | (d ? VW_A_BOLD | VW_C_RED : 0)), cell);
  }
#undef DIFF
  vw_fmt_dur(o->t_end >= 0 && o->t_start >= 0 ? o->t_end - o->t_start : -1, dur, sizeof dur);
  vw_fmt_dur(s - t_first, skew, sizeof skew);
  const char *site = o->callsite[0] ? o->callsite : "-";
  if (!gpu) {
    vw_putf(c, r, y, 65, base, "%-10s %-10s %-4d %s", dur, skew, o->status, site);
    return;
  }
  gpu_text(o, gs, gt, sizeof gs);
  vw_putf(c, r, y, 65, base, "%-10s %-10s %-10s %-10s %-4d %s", dur, gs, gt, skew, o->status,
          site);
}

/* The bottom line for the selected rank's GPU times, in words. */
static void gpu_words(const vw_op *o, vw_canvas *c, vw_rect r) {
  char gs[32], gt[32], dur[32];
  if (o->gpu_ns < 0)
    return;
  gpu_text(o, gs, gt, sizeof gs);
  vw_fmt_dur(o->t_end >= 0 && o->t_start >= 0 ? o->t_end - o->t_start : -1, dur, sizeof dur);
  vw_putf(c, r, r.h - 1, 0, VW_A_BOLD, " rank %d GPU: started %s after enqueue, ran %s "
          "(call: %s)", o->rank, gs, gt, dur);
}

void vw_render_detail(const vw_state *st, const vw_model *m, const vw_pages *p, vw_canvas *c,
                      vw_rect r, bool focus) {
  const vw_group *g = vw_model_group(m, st->d_group);
  char t[300], gl[96];
  if (st->d_p2p) /* a send or receive and the other half of its pair */
    snprintf(t, sizeof t, " Detail: %s rank %d's point-to-point #%lld and its pair (%d of 2 "
             "found)   h/l: previous/next #", vw_group_label(m, st->d_group, gl, sizeof gl),
             st->d_rank, (long long)st->d_seq, p->ndetail);
  else
    snprintf(t, sizeof t, " Detail: %s #%lld %s across ranks (%d of %d ranks entered it)   "
             "h/l: previous/next #", vw_group_label(m, st->d_group, gl, sizeof gl),
             (long long)st->d_seq, p->ndetail ? p->detail[0].op : "", p->ndetail,
             g ? g->size : m->job.world_size);
  title(c, r, focus, t);
  if (!p->ndetail) {
    vw_put(c, r, 1, 0, 0, " no rank entered this operation");
    return;
  }
  int maj = vw_fp_majority(p->detail, p->ndetail, NULL);
  detail_summary(p, maj, c, r);
  bool gpu = false;   // GPU columns only when a rank of it has a gpu event
  int64_t t_first = INT64_MAX;
  for (int i = 0; i < p->ndetail; i++) {
    int64_t s = p->detail[i].t_start >= 0 ? p->detail[i].t_start : p->detail[i].t_enq;
    if (s < t_first)
      t_first = s;
    gpu |= p->detail[i].gpu_ns >= 0;
  }
  vw_put(c, r, 3, 0, VW_A_UL, gpu ? "  rank state      op             dtype    shape        root "
                                    "redop duration   gpu start  gpu time   arrival    st   "
                                    "callsite"
                                  : "  rank state      op             dtype    shape        root "
                                    "redop duration   arrival    st   callsite");
  int nrows, y = 4;
  vw_detail_geom(r, &nrows);
  for (int i = st->d_top; i < p->ndetail && y < 4 + nrows; i++, y++)
    detail_row(&p->detail[i], &p->detail[maj], t_first, i == st->d_row, gpu, c, r, y);
  /* members that never entered it */
  char miss[256] = "";
  size_t off = 0;
  for (int k = 0; g && k < g->size && off < sizeof miss; k++) {
    bool seen = false;
    for (int i = 0; i < p->ndetail; i++)
      seen |= p->detail[i].rank == g->members[k];
    if (!seen)
      off += (size_t)snprintf(miss + off, sizeof miss - off, "%s%d", off ? "," : "",
                              g->members[k]);
  }
  if (miss[0])
    vw_putf(c, r, r.h - 1, 0, VW_A_BOLD | VW_C_RED, " never entered by rank%s %s",
            strchr(miss, ',') ? "s" : "", miss);
  else if (gpu && st->d_row >= 0 && st->d_row < p->ndetail)
    gpu_words(&p->detail[st->d_row], c, r);
}

/* --- events ----------------------------------------------------------------------- */

void vw_render_events(const vw_state *st, const vw_model *m, const vw_pages *p, vw_canvas *c,
                      vw_rect r, bool focus) {
  char t[160];
  snprintf(t, sizeof t, " Events: %lld   Enter: jump to the operation", (long long)st->e_total);
  title(c, r, focus, t);
  int nrows;
  vw_events_geom(r, &nrows);
  const vw_event *sel = NULL;
  for (int i = 0; i < p->nev && i < nrows; i++) {
    const vw_event *e = &p->ev[i];
    bool s = st->e_top + i == st->e_sel;
    char when[32], where[32] = "", first[200] = "";
    vw_fmt_dur(e->t_ns - m->job.t0, when, sizeof when);
    const char *gn = e->group_id >= 0 ? vw_group_name(m, e->group_id) : "";
    if (e->group_id >= 0 && gn[0] && strncmp(gn, "group ", 6))
      snprintf(where, sizeof where, "%.20s #%lld", gn, (long long)e->seq);
    else if (e->group_id >= 0)
      snprintf(where, sizeof where, "g%d #%lld", e->group_id, (long long)e->seq);
    if (e->message)
      snprintf(first, sizeof first, "%.*s", (int)strcspn(e->message, "\n"), e->message);
    bool hot = strstr(e->kind, "desync") || strstr(e->kind, "diagnosis") ||
               strstr(e->kind, "stall") || strstr(e->kind, "peer_lost") || strstr(e->kind, "crash");
    uint8_t a = s ? VW_A_REV : hot ? (uint8_t)(VW_C_RED | VW_A_BOLD) : 0;
    if (s)
      vw_fill(c, r, 1 + i, 0, r.w, ' ', VW_A_REV);
    vw_putf(c, r, 1 + i, 0, a, "%c+%-9s r%-3d %-14s %-9s %s", s ? '>' : ' ', when, e->rank,
            e->kind, where, first);
    if (s)
      sel = e;
  }
  int top = 1 + nrows;
  if (sel && sel->message && top < r.h) {
    vw_fill(c, r, top, 0, r.w, '-', VW_A_DIM);
    int y = top + 1;
    const char *q = sel->message;
    while (*q && y < r.h) {
      int len = (int)strcspn(q, "\n");
      vw_putf(c, r, y++, 1, 0, "%.*s", len, q);
      q += len + (q[len] == '\n');
    }
  }
}
