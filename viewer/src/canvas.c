/* canvas.c - the text canvas the viewer renders into.
 *
 * A canvas is rows x cols cells of one ASCII glyph and an attribute byte
 * (bold, reverse, dim, underline, and a colour in the high nibble). view.c
 * draws into it, term.c copies it to curses, and tests read it back as
 * lines. Every write is clipped to a rectangle, so a pane can never draw
 * over its neighbour however long its text is. */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "vw.h"

int vw_canvas_init(vw_canvas *c, int rows, int cols) {
  if (rows < 1 || cols < 1 || rows > 4096 || cols > 4096)
    return -1;
  c->cells = calloc((size_t)rows * (size_t)cols, sizeof *c->cells);
  if (!c->cells)
    return -1;
  c->rows = rows;
  c->cols = cols;
  vw_canvas_clear(c);
  return 0;
}

void vw_canvas_free(vw_canvas *c) {
  if (!c)
    return;
  free(c->cells);
  c->cells = NULL;
  c->rows = c->cols = 0;
}

void vw_canvas_clear(vw_canvas *c) {
  for (int i = 0; i < c->rows * c->cols; i++)
    c->cells[i] = (vw_cell){' ', 0};
}

/* The cell at rect-relative (y, x), or NULL when outside the rect or canvas. */
static vw_cell *cell(vw_canvas *c, vw_rect r, int y, int x) {
  if (y < 0 || x < 0 || y >= r.h || x >= r.w)
    return NULL;
  int ay = r.y + y, ax = r.x + x;
  if (ay < 0 || ax < 0 || ay >= c->rows || ax >= c->cols)
    return NULL;
  return &c->cells[ay * c->cols + ax];
}

int vw_put(vw_canvas *c, vw_rect r, int y, int x, uint8_t attr, const char *s) {
  int n = 0;
  for (; s && *s; s++, x++) {
    vw_cell *p = cell(c, r, y, x);
    if (!p) {
      if (x >= r.w)
        break;
      continue;
    }
    /* Only printable ASCII reaches the terminal: a trace is user data. */
    unsigned char ch = (unsigned char)*s;
    p->ch = ch >= 32 && ch < 127 ? (char)ch : ch == '\t' ? ' ' : '?';
    p->attr = attr;
    n++;
  }
  return n;
}

int vw_putf(vw_canvas *c, vw_rect r, int y, int x, uint8_t attr, const char *fmt, ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  return vw_put(c, r, y, x, attr, buf);
}

void vw_fill(vw_canvas *c, vw_rect r, int y, int x, int n, char ch, uint8_t attr) {
  for (int i = 0; i < n; i++) {
    vw_cell *p = cell(c, r, y, x + i);
    if (p)
      *p = (vw_cell){ch, attr};
  }
}

void vw_attr(vw_canvas *c, vw_rect r, int y, int x, int n, uint8_t attr) {
  for (int i = 0; i < n; i++) {
    vw_cell *p = cell(c, r, y, x + i);
    if (p)
      p->attr = attr;
  }
}

const char *vw_canvas_line(const vw_canvas *c, int y, char *buf, size_t len) {
  size_t n = 0;
  if (len == 0)
    return "";
  if (y >= 0 && y < c->rows)
    for (int x = 0; x < c->cols && n + 1 < len; x++)
      buf[n++] = c->cells[y * c->cols + x].ch;
  while (n > 0 && buf[n - 1] == ' ')
    n--;
  buf[n] = '\0';
  return buf;
}

void vw_canvas_dump(const vw_canvas *c, FILE *f) {
  char *buf = malloc((size_t)c->cols + 1);
  if (!buf)
    return;
  for (int y = 0; y < c->rows; y++)
    fprintf(f, "%s\n", vw_canvas_line(c, y, buf, (size_t)c->cols + 1));
  free(buf);
}
