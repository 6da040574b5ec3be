/* input.c - keys to state changes, through one key table (htop's
 * Action_setBindings).
 *
 * Pure: no SQL, no curses. A key moves cursors in vw_state and returns
 * what the loop must do (VW_H_REDRAW, VW_H_RELOAD, VW_H_QUIT). What needs
 * the trace (a search, opening the operation under the cursor, applying a
 * filter) is left in st->req for app.c, which also clamps the cursors to
 * what the trace holds. The bindings are the ones people know from htop,
 * less and k9s; the help screen is generated from the same table. */
#include <ctype.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "vw_ui.h"

#define FAR_SEQ (INT64_MAX / 4)   // "the last one": app.c clamps it

static int page(const vw_state *st) {
  return st->rows > 12 ? st->rows - 10 : 2;
}

static void move(vw_state *st, int dy, int64_t dx) {
  switch (st->pane) {
  case VW_P_MATRIX:
    st->m_row += dy;
    st->m_seq += dx;
    break;
  case VW_P_TIMELINE:
    st->t_row += dy;
    st->t_cursor += dx * (st->t_span / 16 > 0 ? st->t_span / 16 : 1);
    break;
  case VW_P_DETAIL:
    st->d_row += dy;
    st->d_seq += dx;
    break;
  case VW_P_EVENTS:
    st->e_sel += dy;
    break;
  }
}

static void up(vw_state *st, int *f) { move(st, -1, 0); (void)f; }
static void down(vw_state *st, int *f) { move(st, 1, 0); (void)f; }
static void left(vw_state *st, int *f) { move(st, 0, -1); (void)f; }
static void right(vw_state *st, int *f) { move(st, 0, 1); (void)f; }

static void page_up(vw_state *st, int *f) {
  (void)f;
  if (st->pane == VW_P_MATRIX)
    st->m_seq -= st->cols > 30 ? st->cols - 20 : 10;
  else if (st->pane == VW_P_TIMELINE)
    st->t_cursor -= st->t_span;
  else
    move(st, -page(st), 0);
}

static void page_down(vw_state *st, int *f) {
  (void)f;
  if (st->pane == VW_P_MATRIX)
    st->m_seq += st->cols > 30 ? st->cols - 20 : 10;
  else if (st->pane == VW_P_TIMELINE)
    st->t_cursor += st->t_span;
  else
    move(st, page(st), 0);
}

static void first(vw_state *st, int *f) {
  (void)f;
  switch (st->pane) {
  case VW_P_MATRIX: st->m_seq = 1; break;
  case VW_P_TIMELINE: st->t_cursor = INT64_MIN / 4; break;
  case VW_P_DETAIL: st->d_row = 0; break;
  case VW_P_EVENTS: st->e_sel = 0; break;
  }
}

static void last(vw_state *st, int *f) {
  (void)f;
  switch (st->pane) {
  case VW_P_MATRIX: st->m_seq = FAR_SEQ; break;
  case VW_P_TIMELINE: st->t_cursor = FAR_SEQ; break;
  case VW_P_DETAIL: st->d_row = 1 << 20; break;
  case VW_P_EVENTS: st->e_sel = FAR_SEQ; break;
  }
}

static void next_pane(vw_state *st, int *f) {
  (void)f;
  st->pane = (st->pane + 1) % VW_P_COUNT;
}

static void prev_pane(vw_state *st, int *f) {
  (void)f;
  st->pane = (st->pane + VW_P_COUNT - 1) % VW_P_COUNT;
}

static void open(vw_state *st, int *f) {
  if (st->pane == VW_P_DETAIL)
    return;
  st->req = VW_REQ_OPEN;
  *f |= VW_H_RELOAD;
}

static void back(vw_state *st, int *f) {
  (void)f;
  st->msg[0] = '\0';
  if (st->pane == VW_P_DETAIL)
    st->pane = st->back_pane;
}

static void start_prompt(vw_state *st, int mode) {
  st->mode = mode;
  st->prompt[0] = '\0';
}

static void search(vw_state *st, int *f) { (void)f; start_prompt(st, VW_M_SEARCH); }
static void filter(vw_state *st, int *f) { (void)f; start_prompt(st, VW_M_FILTER); }
static void help(vw_state *st, int *f) { (void)f; st->mode = VW_M_HELP; }
static void quit(vw_state *st, int *f) { (void)st; *f |= VW_H_QUIT; }

static void search_again(vw_state *st, int *f, int dir) {
  if (!st->search[0]) {
    snprintf(st->msg, sizeof st->msg, "no search yet: / to search");
    return;
  }
  st->search_dir = dir;
  st->req = VW_REQ_SEARCH;
  *f |= VW_H_RELOAD;
}

static void search_next(vw_state *st, int *f) { search_again(st, f, 1); }
static void search_prev(vw_state *st, int *f) { search_again(st, f, -1); }

static void zoom_in(vw_state *st, int *f) {
  (void)f;
  if (st->t_span > 1000)
    st->t_span /= 2;
}

static void zoom_out(vw_state *st, int *f) {
  (void)f;
  if (st->t_span < INT64_MAX / 4)
    st->t_span *= 2;
}

/* z: folding of identical matrix rows, on or off whatever AUTO chose. */
static void fold(vw_state *st, int *f) {
  (void)f;
  st->m_fold = st->m_folded ? VW_FOLD_OFF : VW_FOLD_ON;
  snprintf(st->msg, sizeof st->msg, "%s", st->m_folded ? "one row per rank (z folds alike ranks)"
                                                       : "alike ranks folded into one row "
                                                         "(z: one row per rank)");
  st->pane = VW_P_MATRIX;
}

/* { }: the rows that differ are known to app.c, which has the page. */
static void jump(vw_state *st, int *f, int dir) {
  st->pane = VW_P_MATRIX;
  st->jump_dir = dir;
  st->req = VW_REQ_JUMP;
  *f |= VW_H_RELOAD;
}

static void jump_next(vw_state *st, int *f) { jump(st, f, 1); }
static void jump_prev(vw_state *st, int *f) { jump(st, f, -1); }

static void group_next(vw_state *st, int *f) { (void)f; st->group_idx++; st->filter.group = -1; }
static void group_prev(vw_state *st, int *f) { (void)f; st->group_idx--; st->filter.group = -1; }
static void pane_matrix(vw_state *st, int *f) { (void)f; st->pane = VW_P_MATRIX; }
static void pane_timeline(vw_state *st, int *f) { (void)f; st->pane = VW_P_TIMELINE; }
static void pane_detail(vw_state *st, int *f) { (void)f; st->pane = VW_P_DETAIL; }
static void pane_events(vw_state *st, int *f) { (void)f; st->pane = VW_P_EVENTS; }

static const vw_binding table[] = {
    {VW_K_UP, "Up k", "previous rank / row", up},
    {'k', NULL, NULL, up},
    {VW_K_DOWN, "Down j", "next rank / row", down},
    {'j', NULL, NULL, down},
    {VW_K_LEFT, "Left h", "previous operation (timeline: earlier)", left},
    {'h', NULL, NULL, left},
    {VW_K_RIGHT, "Right l", "next operation (timeline: later)", right},
    {'l', NULL, NULL, right},
    {VW_K_PGUP, "PgUp", "page back", page_up},
    {VW_K_PGDN, "PgDn", "page forward", page_down},
    {VW_K_HOME, "Home g", "first", first},
    {'g', NULL, NULL, first},
    {VW_K_END, "End G", "last", last},
    {'G', NULL, NULL, last},
    {VW_K_TAB, "Tab", "next pane", next_pane},
    {VW_K_BTAB, "S-Tab", "previous pane", prev_pane},
    {'1', "1 2 3 4", "matrix, timeline, detail, events", pane_matrix},
    {'2', NULL, NULL, pane_timeline},
    {'3', NULL, NULL, pane_detail},
    {'4', NULL, NULL, pane_events},
    {VW_K_ENTER, "Enter", "open the operation across ranks", open},
    {VW_K_ESC, "Esc", "back", back},
    {'/', "/", "search (op, state, dtype, text; #N = seq N)", search},
    {'n', "n N", "next / previous match", search_next},
    {'N', NULL, NULL, search_prev},
    {'f', "f", "filter: group=G rank=R op=OP state=S (empty clears)", filter},
    {'z', "z", "matrix: fold alike ranks into one row / one row per rank", fold},
    {'{', "{ }", "matrix: previous / next rank that differs", jump_prev},
    {'}', NULL, NULL, jump_next},
    {'[', "[ ]", "previous / next group", group_prev},
    {']', NULL, NULL, group_next},
    {'+', "+ -", "timeline zoom in / out", zoom_in},
    {'-', NULL, NULL, zoom_out},
    {'?', "?", "this help", help},
    {'q', "q", "quit", quit},
};

const vw_binding *vw_bindings(int *n) {
  *n = (int)(sizeof table / sizeof *table);
  return table;
}

/* Text entry for the search and filter prompts. */
static int prompt_key(vw_state *st, int key) {
  size_t len = strlen(st->prompt);
  if (key == VW_K_ESC) {
    st->mode = VW_M_NORMAL;
  } else if (key == VW_K_BKSP) {
    if (len)
      st->prompt[len - 1] = '\0';
  } else if (key == VW_K_ENTER) {
    if (st->mode == VW_M_SEARCH) {
      if (st->prompt[0]) {
        snprintf(st->search, sizeof st->search, "%s", st->prompt);
        st->search_dir = 1;
        st->req = VW_REQ_SEARCH;
      }
    } else {
      st->req = VW_REQ_FILTER;
    }
    st->mode = VW_M_NORMAL;
    return VW_H_REDRAW | VW_H_RELOAD;
  } else if (key >= 32 && key < 127 && len + 1 < sizeof st->prompt) {
    st->prompt[len] = (char)key;
    st->prompt[len + 1] = '\0';
  }
  return VW_H_REDRAW;
}

int vw_handle_key(vw_state *st, int key) {
  if (key == VW_K_RESIZE || key == VW_K_TICK)
    return VW_H_REDRAW | (key == VW_K_TICK ? VW_H_RELOAD : 0);
  if (st->mode == VW_M_SEARCH || st->mode == VW_M_FILTER)
    return prompt_key(st, key);
  if (st->mode == VW_M_HELP) {
    st->mode = VW_M_NORMAL;   // any key closes the help; q too, it does not quit here
    return VW_H_REDRAW;
  }
  int flags = VW_H_REDRAW;
  for (size_t i = 0; i < sizeof table / sizeof *table; i++)
    if (table[i].key == key) {
      table[i].fn(st, &flags);
      return flags;
    }
  if (key >= 32 && key < 127)
    snprintf(st->msg, sizeof st->msg, "key '%c' does nothing here: ? for help", key);
  return flags;
}

int vw_parse_filter(const char *s, vw_filter *f, char *why, size_t len) {
  vw_filter n = {.group = -1, .rank = -1};
  char buf[128];
  snprintf(buf, sizeof buf, "%s", s);
  for (char *save = NULL, *w = strtok_r(buf, " ,", &save); w; w = strtok_r(NULL, " ,", &save)) {
    char *eq = strchr(w, '=');
    if (!eq || eq == w || !eq[1]) {
      snprintf(why, len, "filter: '%s' is not key=value (group, rank, op, state)", w);
      return -1;
    }
    *eq = '\0';
    const char *v = eq + 1;
    char *end;
    if (!strcmp(w, "group") || !strcmp(w, "g") || !strcmp(w, "rank") || !strcmp(w, "r")) {
      long x = strtol(v, &end, 10);
      if (*end || x < 0 || x > 1 << 30) {
        snprintf(why, len, "filter: %s=%s is not a number", w, v);
        return -1;
      }
      *(w[0] == 'g' ? &n.group : &n.rank) = (int)x;
    } else if (!strcmp(w, "op") || !strcmp(w, "o")) {
      snprintf(n.op, sizeof n.op, "%s", v);
    } else if (!strcmp(w, "state") || !strcmp(w, "s")) {
      snprintf(n.state, sizeof n.state, "%s", v);
    } else {
      snprintf(why, len, "filter: unknown key '%s' (group, rank, op, state)", w);
      return -1;
    }
  }
  *f = n;
  return 0;
}
