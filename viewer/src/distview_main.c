/* distview_main.c - `distview`: post-mortem of a libdist job over its
 * trace store (a merged trace.db, a rank file or a job directory). This
 * file dispatches subcommands from a table; each prints its own --help. */
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <dist/trace_reader.h>

#include "distview.h"

typedef struct vw_cmd {
  const char *name;
  int (*run)(int argc, char **argv);
  const char *summary;
} vw_cmd;

static const vw_cmd cmds[] = {
    {"summary", vw_cmd_summary, "job, ranks, groups, counts per op, outcome"},
    {"diagnose", vw_cmd_diagnose, "the first desync, hang or deadlock (exit 10, 11, 12)"},
    {"sql", vw_cmd_sql, "one read-only SQL statement over the trace"},
    {"stats", vw_cmd_stats, "latency percentiles per op, per-rank arrival skew"},
    {"render", vw_cmd_render, "the viewer's screen as text, after keys"},
    {"merge", vw_cmd_merge, "merge a job directory's rank files into one indexed trace.db"},
    {"export", vw_cmd_export, "export a trace as Chrome trace JSON or to an OTLP collector"},
};
#define N_CMDS (sizeof cmds / sizeof cmds[0])

static void usage(FILE *f) {
  fprintf(f, "usage: distview [--follow] TRACE  the terminal viewer (? there lists its keys)\n"
             "       distview COMMAND [ARGS]   (distview COMMAND --help for more)\n\n"
             "Looks into what a libdist job did: the trace each rank recorded\n"
             "($DIST_TRACE/<job id>/rank-R.db, merged by distrun into ./trace.db).\n\n");
  for (size_t i = 0; i < N_CMDS; i++)
    fprintf(f, "  %-9s %s\n", cmds[i].name, cmds[i].summary);
  fprintf(f, "\n  --attempt K    open attempt K of a job distrun restarted (trace.attempt-K.db)\n");
  fprintf(f, "\n  -h, --help     this text\n  -V, --version  libdist's version\n");
}

/* --attempt K, anywhere before the trace: taken out of argv (every
 * command then opens attempt K's file, vw_attempt). Returns false on a
 * bad value. */
static bool take_attempt(int *argc, char **argv) {
  for (int i = 1; i < *argc; i++) {
    const char *v = NULL;
    int drop = 0;
    if (!strcmp(argv[i], "--attempt") && i + 1 < *argc)
      v = argv[i + 1], drop = 2;
    else if (!strncmp(argv[i], "--attempt=", 10))
      v = argv[i] + 10, drop = 1;
    else if (!strcmp(argv[i], "--attempt"))
      v = "", drop = 1;
    if (!drop)
      continue;
    char *end;
    long k = strtol(v, &end, 10);
    if (!*v || *end || k < 0 || k > 1000000) {
      fprintf(stderr, "distview: --attempt needs an attempt number (0 the first), got '%s'\n", v);
      return false;
    }
    vw_attempt = (int)k;
    memmove(argv + i, argv + i + drop, sizeof *argv * (size_t)(*argc - i - drop + 1));
    *argc -= drop;
    return true;
  }
  return true;
}

/* A signal that ends distview while a job directory is merged (Ctrl-C,
 * kill, the terminal of --follow closing, a reader of its output going
 * away) must not leave the merge's temporary files behind: they are
 * removed, the terminal is given back, and the signal then ends the
 * process as it would have (the shell sees the signal). */
static void on_ending_signal(int sig) {
  dist_trace_remove_temps();
  vw_term_signal_restore();
  signal(sig, SIG_DFL);
  raise(sig); // delivered when the handler returns (sig is blocked in it)
}

static void catch_ending_signals(void) {
  static const int sigs[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE};
  for (size_t i = 0; i < sizeof sigs / sizeof *sigs; i++) {
    struct sigaction sa, old;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_ending_signal;
    sigemptyset(&sa.sa_mask);
    for (size_t k = 0; k < sizeof sigs / sizeof *sigs; k++)
      sigaddset(&sa.sa_mask, sigs[k]); // one cleanup at a time
    /* a signal the parent ignores (nohup, SIGPIPE in some shells) stays ignored */
    if (sigaction(sigs[i], NULL, &old) == 0 && old.sa_handler != SIG_IGN)
      sigaction(sigs[i], &sa, NULL);
  }
}

int main(int argc, char **argv) {
  catch_ending_signals();
  if (!take_attempt(&argc, argv))
    return VW_EXIT_USAGE;
  if (argc < 2) {
    usage(stderr);
    return VW_EXIT_USAGE;
  }
  if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
    usage(stdout);
    return VW_EXIT_OK;
  }
  if (!strcmp(argv[1], "-V") || !strcmp(argv[1], "--version")) {
    printf("distview (libdist) %s\n", DIST_VERSION_STRING);
    return VW_EXIT_OK;
  }
  for (size_t i = 0; i < N_CMDS; i++)
    if (!strcmp(argv[1], cmds[i].name))
      return cmds[i].run(argc - 1, argv + 1);
  if (argv[1][0] == '-' && strcmp(argv[1], "--follow")) {
    fprintf(stderr, "distview: unknown option '%s'\n", argv[1]);
    usage(stderr);
    return VW_EXIT_USAGE;
  }
  return vw_cmd_tui(argc, argv);   // distview TRACE: the terminal viewer
}
