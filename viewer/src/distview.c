/* distview.c - the distview command: dispatch to a subcommand, or open the
 * terminal viewer on a trace.
 *
 *   distview [--follow] TRACE        the terminal UI (cmd_tui.c)
 *   distview summary|diagnose|sql|stats|render ...
 *   distview merge|export ...        (the tracer's reader library)
 *
 * Exit statuses: 0 ok, 1 unreadable trace, 2 usage; diagnose 10/11/12. */
#include <stdio.h>
#include <string.h>

#include "vw.h"

typedef struct subcmd {
  const char *name;
  int (*fn)(int argc, char **argv);
  const char *help;
} subcmd;

#ifdef VW_HAVE_READER
int vw_cmd_merge(int argc, char **argv);
int vw_cmd_export(int argc, char **argv);
#endif

static const subcmd cmds[] = {
    {"summary", vw_cmd_summary, "job, ranks, groups, counts per op, outcome"},
    {"diagnose", vw_cmd_diagnose, "first desync / hang / deadlock (exit 10, 11, 12)"},
    {"sql", vw_cmd_sql, "one read-only SQL statement over the trace"},
    {"stats", vw_cmd_stats, "latency percentiles per op, per-rank arrival skew"},
    {"render", vw_cmd_render, "the viewer's screen as text, after keys"},
#ifdef VW_HAVE_READER
    {"merge", vw_cmd_merge, "merge a job directory's rank files into trace.db"},
    {"export", vw_cmd_export, "Chrome trace JSON or OTLP/HTTP spans"},
#endif
};

static void usage(FILE *f) {
  fputs("usage: distview [--follow] TRACE          open the viewer (? lists its keys)\n"
        "       distview SUBCOMMAND [--json] ...   (each takes --help)\n"
        "TRACE: a merged trace.db, a rank file, or a job directory.\nsubcommands:\n", f);
  for (size_t i = 0; i < sizeof cmds / sizeof *cmds; i++)
    fprintf(f, "  %-9s %s\n", cmds[i].name, cmds[i].help);
  fputs("exit: 0 ok, 1 unreadable trace, 2 usage; diagnose: 10 desync, 11 hang, 12 rank died\n",
        f);
}

int main(int argc, char **argv) {
  if (argc < 2) {
    usage(stderr);
    return VW_EXIT_USAGE;
  }
  if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
    usage(stdout);
    return 0;
  }
  for (size_t i = 0; i < sizeof cmds / sizeof *cmds; i++)
    if (!strcmp(argv[1], cmds[i].name))
      return cmds[i].fn(argc - 1, argv + 1);
  return vw_cmd_tui(argc, argv);
}
