/* term.c - the only file that includes curses: terminal keys in, the
 * canvas out, and the loop (key with timeout, dispatch, re-render).
 *
 * Colour is used when the terminal has it and NO_COLOR is unset or empty
 * (no-color.org); the attributes alone (bold, reverse, underline) carry
 * every distinction, so the monochrome screen loses nothing. A resize
 * re-sizes the canvas and re-fetches the pages for the new geometry. With
 * --follow the loop wakes every second and re-reads the trace, so a
 * running job's rank file can be watched. */
#include <curses.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <term.h>
#include <termios.h>
#include <unistd.h>

#include "vw_ui.h"

/* What a signal handler needs to give the terminal back without curses
 * (whose calls are not async-signal-safe): the modes before the screen
 * started, and the terminal's own strings that leave it. */
static struct termios saved_modes;
static bool have_modes;
static char leave_seq[256];
static size_t leave_len;
static volatile sig_atomic_t screen_up;

static void add_cap(const char *name) {
  char *s = tigetstr(name);
  if (!s || s == (char *)-1)
    return;
  size_t n = strlen(s);
  if (leave_len + n < sizeof leave_seq) {
    memcpy(leave_seq + leave_len, s, n);
    leave_len += n;
  }
}

void vw_term_signal_restore(void); // distview.h (whose exit codes clash with vw.h's)
void vw_term_signal_restore(void) {
  if (!screen_up)
    return;
  screen_up = 0;
  if (leave_len && write(STDOUT_FILENO, leave_seq, leave_len) < 0) {
  }
  if (have_modes)
    tcsetattr(STDIN_FILENO, TCSANOW, &saved_modes);
}

static int map_key(int ch) {
  switch (ch) {
  case KEY_UP: return VW_K_UP;
  case KEY_DOWN: return VW_K_DOWN;
  case KEY_LEFT: return VW_K_LEFT;
  case KEY_RIGHT: return VW_K_RIGHT;
  case KEY_PPAGE: return VW_K_PGUP;
  case KEY_NPAGE: return VW_K_PGDN;
  case KEY_HOME: return VW_K_HOME;
  case KEY_END: return VW_K_END;
  case '\t': return VW_K_TAB;
  case KEY_BTAB: return VW_K_BTAB;
  case '\n': case '\r': case KEY_ENTER: return VW_K_ENTER;
  case 27: return VW_K_ESC;
  case KEY_BACKSPACE: case 127: case 8: return VW_K_BKSP;
  case KEY_RESIZE: return VW_K_RESIZE;
  case ERR: return VW_K_TICK;
  }
  return ch >= 32 && ch < 127 ? ch : VW_K_NONE;
}

static bool use_color(void) {
  const char *nc = getenv("NO_COLOR");
  return !(nc && *nc) && has_colors();
}

static void init_colors(void) {
  start_color();
  use_default_colors();
  static const short fg[] = {0, COLOR_RED, COLOR_GREEN, COLOR_YELLOW, COLOR_CYAN, COLOR_MAGENTA,
                             COLOR_BLUE};
  for (short i = 1; i < (short)(sizeof fg / sizeof *fg); i++)
    init_pair(i, fg[i], -1);
}

static void blit(const vw_canvas *c, bool color) {
  for (int y = 0; y < c->rows && y < LINES; y++) {
    move(y, 0);
    for (int x = 0; x < c->cols && x < COLS; x++) {
      vw_cell cell = c->cells[y * c->cols + x];
      chtype a = 0;
      if (cell.attr & VW_A_BOLD)
        a |= A_BOLD;
      if (cell.attr & VW_A_REV)
        a |= A_REVERSE;
      if (cell.attr & VW_A_DIM)
        a |= A_DIM;
      if (cell.attr & VW_A_UL)
        a |= A_UNDERLINE;
      if (color && VW_COLOR_OF(cell.attr))
        a |= COLOR_PAIR(VW_COLOR_OF(cell.attr));
      /* the bottom-right cell scrolls some terminals: leave it */
      if (y == LINES - 1 && x == COLS - 1)
        break;
      addch((chtype)(unsigned char)cell.ch | a);
    }
  }
  refresh();
}

int vw_term_run(vw_app *a, bool follow);
int vw_term_run(vw_app *a, bool follow) {
  have_modes = tcgetattr(STDIN_FILENO, &saved_modes) == 0;
  SCREEN *scr = newterm(NULL, stdout, stdin);
  if (!scr) {
    fprintf(stderr, "distview: cannot use this terminal (TERM=%s); try distview summary\n",
            getenv("TERM") ? getenv("TERM") : "");
    return VW_EXIT_USAGE;
  }
  cbreak();
  noecho();
  keypad(stdscr, TRUE);
  curs_set(0);
  set_escdelay(25);
  bool color = use_color();
  if (color)
    init_colors();
  a->st.color = color;
  timeout(follow ? 1000 : -1);
  leave_len = 0;
  add_cap("sgr0");
  add_cap("cnorm");
  add_cap("rmcup");
  screen_up = 1;
  int rc = 0;
  if (vw_app_resize(a, LINES, COLS) != 0)
    rc = 1;
  while (rc == 0) {
    vw_app_render(a);
    erase();
    blit(&a->canvas, color);
    int key = map_key(getch());
    if (key == VW_K_RESIZE && vw_app_resize(a, LINES, COLS) != 0)
      break;
    if (key == VW_K_TICK && !follow)
      continue;
    if (vw_app_key(a, key) & VW_H_QUIT)
      break;
  }
  screen_up = 0;
  endwin();
  delscreen(scr);
  return rc;
}
