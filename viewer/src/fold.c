/* fold.c - the progress matrix's rows at 1,024 ranks: folding identical
 * ranks into one row, and finding the rows that differ.
 *
 * A healthy group's ranks look alike; what a user looks for is the one
 * rank that lags or diverges. So consecutive ranks whose cells are the
 * same over the columns the matrix shows, and which carry no tag, are
 * drawn as one row ("0-699 x700"); a tagged rank (LAG, DIFF, CYC, DEAD) or
 * the diagnosed rank always keeps a row of its own, and a rank whose cells
 * differ from its neighbours' starts a new row by itself. A row "differs"
 * when it is tagged or when one of its cells is unlike the majority of the
 * group at that column: the { } keys jump between such rows.
 *
 * Pure: it reads the page app.c fetched and the diagnosis, no SQL and no
 * curses, so the view and the tests share it. */
#include <stdlib.h>
#include <string.h>

#include "vw_ui.h"

static bool in_list(const int *l, int n, int v) {
  for (int i = 0; i < n; i++)
    if (l[i] == v)
      return true;
  return false;
}

const char *vw_rank_tag(const vw_model *m, const vw_diag *d, int gid, int rank) {
  if (d->group_id == gid && in_list(d->culprits, d->n_culprits, rank))
    return d->kind == VW_DIAG_DESYNC ? "DIFF" : "LAG";
  if (d->kind == VW_DIAG_DEADLOCK && in_list(d->cycle, d->n_cycle, rank))
    return "CYC";
  const vw_rank_info *ri = vw_model_rank(m, rank);
  if (ri && (!strcmp(ri->end_state, "crashed") || !strcmp(ri->end_state, "lost")))
    return "DEAD";
  return "";
}

/* A rank drawn on a row of its own whatever its neighbours: tagged, or the
 * diagnosed rank (its cell at the operation is marked). */
static bool singled(const vw_model *m, const vw_diag *d, int gid, int rank) {
  return vw_rank_tag(m, d, gid, rank)[0] || (d->group_id == gid && d->rank == rank);
}

/* The most common state of each column over all rows (ties: the lower
 * state, so the answer does not depend on the order of the ranks). */
static void majority(const vw_matrix_page *p, uint8_t *maj) {
  enum { NST = VW_ST_MASKED + 1 };
  for (int k = 0; k < p->nseq; k++) {
    int count[NST] = {0};
    for (int r = 0; r < p->nrank; r++)
      count[p->cells[r * p->nseq + k] % NST]++;
    int best = 0;
    for (int s = 1; s < NST; s++)
      if (count[s] > count[best])
        best = s;
    maj[k] = (uint8_t)best;
  }
}

static bool unlike(const vw_matrix_page *p, int r, const uint8_t *maj) {
  return memcmp(&p->cells[r * p->nseq], maj, (size_t)p->nseq) != 0;
}

static bool same_cells(const vw_matrix_page *p, int a, int b) {
  return memcmp(&p->cells[a * p->nseq], &p->cells[b * p->nseq], (size_t)p->nseq) == 0;
}

int vw_fold_rows(const vw_model *m, const vw_diag *d, const vw_matrix_page *p, bool fold,
                 vw_mx_row *out) {
  uint8_t *maj = malloc((size_t)p->nseq + 1);
  bool *one = malloc((size_t)p->nrank + 1);
  if (!maj || !one)
    abort();   // the viewer may abort on OOM (STYLE.md 4)
  majority(p, maj);
  for (int r = 0; r < p->nrank; r++)
    one[r] = singled(m, d, p->group_id, p->ranks[r]);
  int n = 0;
  for (int r = 0; r < p->nrank;) {
    int end = r + 1;
    while (fold && !one[r] && end < p->nrank && !one[end] && same_cells(p, r, end))
      end++;
    out[n++] = (vw_mx_row){.first = r, .n = end - r, .differs = one[r] || unlike(p, r, maj)};
    r = end;
  }
  free(one);
  free(maj);
  return n;
}

int vw_fold_next_diff(const vw_mx_row *rows, int n, int from, int dir) {
  for (int i = from + dir; i >= 0 && i < n; i += dir)
    if (rows[i].differs)
      return i;
  return -1;
}

int vw_fold_find(const vw_mx_row *rows, int n, int page_row) {
  for (int i = 0; i < n; i++)
    if (page_row >= rows[i].first && page_row < rows[i].first + rows[i].n)
      return i;
  return n > 0 ? n - 1 : 0;
}
