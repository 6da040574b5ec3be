/* distview.h - internals of the distview command, shared by its files:
 *   distview_main.c   main: the subcommand table, --help, exit statuses,
 *                     and the signals that end it (temporary files removed)
 *   distview_cmds.c   merge and export
 * The viewer's own subcommands and the terminal UI live in dist_viewer
 * (vw.h); main reaches them through the declarations below. */
#ifndef DISTVIEW_H
#define DISTVIEW_H

/* Exit statuses: 0 done, 1 the work failed, 2 a usage error. */
enum { VW_EXIT_OK = 0, VW_EXIT_FAIL = 1, VW_EXIT_USAGE = 2 };

int vw_cmd_merge(int argc, char **argv);
int vw_cmd_export(int argc, char **argv);
/* dist_viewer (vw.h): summary, diagnose, sql, stats, render, the TUI */
int vw_cmd_summary(int argc, char **argv);
int vw_cmd_diagnose(int argc, char **argv);
int vw_cmd_sql(int argc, char **argv);
int vw_cmd_stats(int argc, char **argv);
int vw_cmd_render(int argc, char **argv);
int vw_cmd_tui(int argc, char **argv);
/* --attempt K (vw.h): the attempt of a restarted job every command opens */
extern int vw_attempt;
/* term.c: gives the terminal back (async-signal-safe; nothing when the
 * viewer's screen is not up), for a signal that ends distview. */
void vw_term_signal_restore(void);

#endif
