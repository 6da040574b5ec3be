/* cmd_tui.c - `distview TRACE` (the terminal UI) and `distview render`
 * (the same screens as text, without a terminal: for scripts, bug
 * reports and the README's capture). */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "vw_ui.h"

int vw_term_run(vw_app *a, bool follow);

static const char tui_usage[] =
    "usage: distview [--follow] TRACE\n"
    "  TRACE: a merged trace.db, a rank file, or a job directory of rank files.\n"
    "  --follow  re-read the trace every second (a running job's files)\n"
    "Keys: ? in the viewer lists them. Subcommands: distview --help\n";

int vw_cmd_tui(int argc, char **argv) {
  bool follow = false;
  static const struct option opts[] = {{"follow", no_argument, NULL, 'f'},
                                        {"help", no_argument, NULL, 'h'}, {0}};
  int c;
  optind = 1;
  while ((c = getopt_long(argc, argv, "+fh", opts, NULL)) != -1) {
    if (c == 'h') {
      fputs(tui_usage, stdout);
      return 0;
    }
    if (c != 'f') {
      fputs(tui_usage, stderr);
      return VW_EXIT_USAGE;
    }
    follow = true;
  }
  if (optind != argc - 1) {
    fputs(tui_usage, stderr);
    return VW_EXIT_USAGE;
  }
  vw_app a;
  char err[1024];
  if (vw_app_open(&a, argv[optind], 24, 80, err, sizeof err) != 0) {
    fprintf(stderr, "distview: %s\n", err);
    return VW_EXIT_UNREADABLE;
  }
  if (!isatty(STDIN_FILENO) || !isatty(STDOUT_FILENO)) {
    fprintf(stderr, "distview: the viewer needs a terminal; for text use distview summary, "
                    "diagnose or render\n");
    vw_app_close(&a);
    return VW_EXIT_USAGE;
  }
  int rc = vw_term_run(&a, follow);
  vw_app_close(&a);
  return rc;
}

static const char render_usage[] =
    "usage: distview render [--size COLSxROWS] [--keys KEYS] TRACE\n"
    "Prints the viewer's screen as text after the keys (default size 80x24).\n"
    "KEYS: characters as typed, and <Up> <Down> <Left> <Right> <PgUp> <PgDn>\n"
    "<Home> <End> <Tab> <BTab> <Enter> <Esc> <BS>; e.g. --keys 'j<Enter>'\n";

int vw_cmd_render(int argc, char **argv) {
  int cols = 80, rows = 24;
  const char *keys = "";
  static const struct option opts[] = {{"size", required_argument, NULL, 's'},
                                        {"keys", required_argument, NULL, 'k'},
                                        {"help", no_argument, NULL, 'h'}, {0}};
  int c;
  optind = 1;
  while ((c = getopt_long(argc, argv, "+s:k:h", opts, NULL)) != -1) {
    if (c == 'h') {
      fputs(render_usage, stdout);
      return 0;
    }
    if (c == 's' && sscanf(optarg, "%dx%d", &cols, &rows) == 2 && cols >= 20 && rows >= 8 &&
        cols <= 1000 && rows <= 1000)
      continue;
    if (c == 'k') {
      keys = optarg;
      continue;
    }
    fprintf(stderr, "%s", c == 's' ? "distview render: --size wants COLSxROWS, at least 20x8\n"
                                   : render_usage);
    return VW_EXIT_USAGE;
  }
  if (optind != argc - 1) {
    fputs(render_usage, stderr);
    return VW_EXIT_USAGE;
  }
  vw_app a;
  char err[1024];
  if (vw_app_open(&a, argv[optind], rows, cols, err, sizeof err) != 0) {
    fprintf(stderr, "distview render: %s\n", err);
    return VW_EXIT_UNREADABLE;
  }
  vw_app_keys(&a, keys);
  vw_canvas_dump(&a.canvas, stdout);
  vw_app_close(&a);
  return 0;
}
