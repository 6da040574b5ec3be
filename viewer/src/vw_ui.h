/* vw_ui.h - the interactive viewer's state, keys, layout and app loop
 * pieces (input.c, view.c, view_panes.c, app.c). None of it includes curses:
 * term.c translates terminal keys into vw_key and copies the canvas out. */
#ifndef DIST_VW_UI_H
#define DIST_VW_UI_H

#include "vw.h"

/* Our own keys: printable ASCII is itself; the rest start at 256. */
enum vw_key {
  VW_K_NONE = 0,
  VW_K_UP = 256, VW_K_DOWN, VW_K_LEFT, VW_K_RIGHT,
  VW_K_PGUP, VW_K_PGDN, VW_K_HOME, VW_K_END,
  VW_K_TAB, VW_K_BTAB, VW_K_ENTER, VW_K_ESC, VW_K_BKSP,
  VW_K_RESIZE, VW_K_TICK,
};

/* What a key asks of the loop (htop's HandlerResult). */
enum { VW_H_REDRAW = 1, VW_H_RELOAD = 2, VW_H_QUIT = 4 };

enum { VW_P_MATRIX, VW_P_TIMELINE, VW_P_DETAIL, VW_P_EVENTS, VW_P_COUNT };
enum { VW_M_NORMAL, VW_M_SEARCH, VW_M_FILTER, VW_M_HELP };

/* Work input.c leaves for app.c, which holds the model (input stays pure). */
enum {
  VW_REQ_NONE, VW_REQ_SEARCH, VW_REQ_FILTER, VW_REQ_OPEN, VW_REQ_JUMP,
};

/* Folding of the matrix's identical rows (fold.c): automatic folds when the
 * group has more ranks than the pane has rows; z picks on or off. */
enum { VW_FOLD_AUTO = 0, VW_FOLD_ON, VW_FOLD_OFF };

typedef struct vw_state {
  int rows, cols;
  int pane, back_pane;     /* focused pane; where Esc returns from detail */
  int mode;
  char prompt[128];
  int search_dir;          /* +1 '/' and n, -1 N */
  char search[128];
  vw_filter filter;
  int req;
  bool color;
  char msg[160];           /* status line */
  /* matrix */
  int group_idx;           /* index into job.groups */
  int m_row, m_top;        /* selected and first visible row (a rank, or folded ranks) */
  int64_t m_seq, m_seq0;   /* selected and first visible seq */
  int m_fold;              /* VW_FOLD_* */
  bool m_folded;           /* whether the matrix is folded now (app.c decides AUTO) */
  int jump_dir;            /* { -1, } +1: VW_REQ_JUMP to the row that differs */
  /* timeline */
  int t_row, t_top;
  int64_t t_start, t_span, t_cursor;
  /* detail: one collective, or (d_p2p) rank d_rank's point-to-point
   * operation #d_seq and the one its pair matched it with */
  int d_group;
  int64_t d_seq;
  bool d_p2p;
  int d_rank;
  int d_row, d_top;
  int d_want_rank;         /* the rank d_row goes to once the detail is fetched (-1: none) */
  /* events */
  int64_t e_sel, e_top, e_total;
  int mx_want;             /* rows the matrix needs (app.c): the rest may show detail */
} vw_state;

/* Pure key handling: changes st, returns VW_H_* flags. */
int vw_handle_key(vw_state *st, int key);
/* The key table's help lines (for the help screen and the README). */
typedef struct vw_binding {
  int key;
  const char *keys;       /* how the help screen names it */
  const char *help;
  void (*fn)(vw_state *st, int *flags);
} vw_binding;
const vw_binding *vw_bindings(int *n);

/* Parses "group=1 rank=3 op=all state=failed" (g=, r=, o=, s= too; empty
 * clears) into f; -1 with a message in why. */
int vw_parse_filter(const char *s, vw_filter *f, char *why, size_t len);

/* --- layout and rendering (view.c, view_panes.c) -------------------------------- */

typedef struct vw_layout {
  vw_rect header, tabs, status;
  vw_rect pane[VW_P_COUNT];
  bool shown[VW_P_COUNT];
} vw_layout;

void vw_layout_compute(const vw_state *st, vw_layout *l);
/* Matrix geometry inside its rect: label width, visible seqs and ranks. */
#define VW_MX_LABEL 17   // cursor, "701-1023" right-aligned, a tag or "x323"
#define VW_TL_LABEL 7
void vw_matrix_geom(vw_rect r, int *nseq, int *nrows);
void vw_timeline_geom(vw_rect r, int *width, int *nrows);
void vw_events_geom(vw_rect r, int *nrows);
void vw_detail_geom(vw_rect r, int *nrows);

#define VW_DETAIL_CAP VW_MAX_RANKS /* every rank: "N of M entered it" must hold */
#define VW_TL_ROWS 128
#define VW_TL_CAP 512
#define VW_EV_CAP 128

/* --- fold.c: the matrix's rows -------------------------------------------------- */

/* One row of the matrix as drawn: page rows first .. first + n - 1 (n > 1:
 * identical ranks folded into one row). */
typedef struct vw_mx_row {
  int first, n;
  bool differs;    /* tagged, or a cell unlike the group's majority at its column */
} vw_mx_row;

/* The tag of a rank's label: "LAG" or "DIFF" (the diagnosis' culprits),
 * "CYC" (a deadlock's cycle), "DEAD" (crashed or lost), else "". */
const char *vw_rank_tag(const vw_model *m, const vw_diag *d, int group_id, int rank);
/* The rows of page p into out (p->nrank entries at most); fold = false:
 * one row per rank. Returns the number of rows. */
int vw_fold_rows(const vw_model *m, const vw_diag *d, const vw_matrix_page *p, bool fold,
                 vw_mx_row *out);
/* The first row after `from` (dir +1) or before it (dir -1) that differs;
 * -1 when none. */
int vw_fold_next_diff(const vw_mx_row *rows, int n, int from, int dir);
/* The row holding page row page_row (the last row when past the end). */
int vw_fold_find(const vw_mx_row *rows, int n, int page_row);

/* What app.c fetched for the visible panes. */
typedef struct vw_pages {
  vw_matrix_page mx;          /* every rank of the group over the visible columns */
  vw_mx_row mx_rows[VW_MAX_RANKS];
  int n_mx_rows;              /* rows of the matrix (0 before the first fetch) */
  int nranks;                 /* ranks of the matrix's group (after the filter) */
  int ranks[VW_MAX_RANKS];
  vw_op detail[VW_DETAIL_CAP];
  int ndetail;
  int tl_nrows;
  int tl_rank[VW_TL_ROWS];
  vw_op *tl_ops[VW_TL_ROWS];  /* each VW_TL_CAP (malloc) */
  int tl_n[VW_TL_ROWS];
  vw_event ev[VW_EV_CAP];
  int nev;
} vw_pages;

void vw_render(const vw_state *st, const vw_model *m, const vw_diag *d, const vw_pages *p,
               vw_canvas *c);
void vw_render_matrix(const vw_state *st, const vw_model *m, const vw_diag *d,
                      const vw_pages *p, vw_canvas *c, vw_rect r, bool focus);
void vw_render_timeline(const vw_state *st, const vw_model *m, const vw_pages *p, vw_canvas *c,
                        vw_rect r, bool focus);
void vw_render_detail(const vw_state *st, const vw_model *m, const vw_pages *p, vw_canvas *c,
                      vw_rect r, bool focus);
void vw_render_events(const vw_state *st, const vw_model *m, const vw_pages *p, vw_canvas *c,
                      vw_rect r, bool focus);
const char *vw_pane_name(int pane);

/* --- app.c: model + state + pages ----------------------------------------------- */

typedef struct vw_app {
  vw_model *m;
  vw_diag diag;
  vw_state st;
  vw_pages *pages;
  vw_canvas canvas;
  bool dirty;            /* a key changed the state since the last render */
  bool fetched;          /* the pages match the state (prompt typing keeps them) */
} vw_app;

/* Opens path and places the cursor on the diagnosis. */
int vw_app_open(vw_app *a, const char *path, int rows, int cols, char *err, size_t errlen);
void vw_app_close(vw_app *a);
/* One key: input, then whatever the key asked of the model. VW_H_* flags. */
int vw_app_key(vw_app *a, int key);
/* Applies a sequence of keys given as text: plain characters, and <Up>,
 * <Down>, <Left>, <Right>, <PgUp>, <PgDn>, <Home>, <End>, <Tab>, <BTab>,
 * <Enter>, <Esc>, <BS>. Returns the flags of the last key. */
int vw_app_keys(vw_app *a, const char *keys);
/* Fetches the visible pages and renders into a->canvas. */
int vw_app_render(vw_app *a);
int vw_app_resize(vw_app *a, int rows, int cols);
/* The canvas row y as text (tests). */
const char *vw_app_line(vw_app *a, int y, char *buf, size_t len);
/* Whether any canvas line contains s. */
bool vw_app_screen_has(vw_app *a, const char *s);

#endif
