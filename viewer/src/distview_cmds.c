/* distview_cmds.c - `distview merge` and `distview export`, thin shells
 * over the reader library (trace_reader.h). */
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <dist/trace_reader.h>

#include "distview.h"

static const char merge_help[] =
    "usage: distview merge JOB_DIR [-o FILE]\n\n"
    "Merges the rank files of one job (JOB_DIR = $DIST_TRACE/<job id>, with\n"
    "rank-R.db files and the rank-R.ring dumps of ranks that died of a signal)\n"
    "into one indexed database (default ./trace.db). Bad files are named and\n"
    "skipped; the exit status is 0 when the output was written.\n\n"
    "  -o, --output FILE   where to write (replaced if it exists)\n"
    "  -h, --help          this text\n";

int vw_cmd_merge(int argc, char **argv) {
  static const struct option opts[] = {
      {"output", required_argument, NULL, 'o'}, {"help", no_argument, NULL, 'h'}, {0, 0, 0, 0}};
  const char *out = "trace.db";
  int ch;
  optind = 1;
  while ((ch = getopt_long(argc, argv, "o:h", opts, NULL)) != -1) {
    if (ch == 'o')
      out = optarg;
    else if (ch == 'h')
      return fputs(merge_help, stdout), VW_EXIT_OK;
    else
      return fputs(merge_help, stderr), VW_EXIT_USAGE;
  }
  if (optind != argc - 1) {
    fprintf(stderr, "distview merge: one job directory is needed\n%s", merge_help);
    return VW_EXIT_USAGE;
  }
  dist_trace_merge_report rep;
  char err[512];
  if (dist_trace_merge(argv[optind], out, &rep, err, sizeof err) != DIST_OK) {
    fprintf(stderr, "distview merge: %s\n", err);
    return VW_EXIT_FAIL;
  }
  if (rep.files_skipped)
    fprintf(stderr, "distview merge: skipped %d file(s):\n%s", rep.files_skipped, rep.skipped);
  printf("%d rank(s), %lld operations merged into %s\n", rep.ranks_merged,
         (long long)rep.operations, out);
  return VW_EXIT_OK;
}

static const char export_help[] =
    "usage: distview export (--chrome FILE | --otlp URL | --otlp-env) [--timeout-ms N] TRACE\n\n"
    "TRACE is a merged trace.db, a rank file or a job directory.\n\n"
    "  --chrome FILE     Chrome trace event JSON (open it in Perfetto or\n"
    "                    chrome://tracing); - writes to stdout\n"
    "  --otlp URL        send spans to an OpenTelemetry collector over OTLP/HTTP\n"
    "                    (POST URL/v1/traces), e.g. http://collector:4318\n"
    "  --otlp-env        the same, to the endpoint the environment names:\n"
    "                    OTEL_EXPORTER_OTLP_TRACES_ENDPOINT (the whole URL),\n"
    "                    OTEL_EXPORTER_OTLP_ENDPOINT or DIST_OTLP_ENDPOINT\n"
    "  --timeout-ms N    longest wait for the collector per request\n"
    "                    (OTEL_EXPORTER_OTLP_TIMEOUT, else 10000)\n"
    "  -h, --help        this text\n\n"
    "OpenTelemetry's variables choose how: OTEL_EXPORTER_OTLP_PROTOCOL (http/json,\n"
    "the default here, or http/protobuf), _COMPRESSION=gzip, _HEADERS (k=v,...),\n"
    "_CERTIFICATE (a CA file for https), _CLIENT_CERTIFICATE/_CLIENT_KEY, each\n"
    "also as OTEL_EXPORTER_OTLP_TRACES_*; OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES;\n"
    "OTEL_SDK_DISABLED=true sends nothing (exit status 1, saying so).\n\n"
    "Exit status 1 when the collector cannot be reached or refuses the spans.\n";

int vw_cmd_export(int argc, char **argv) {
  static const struct option opts[] = {{"chrome", required_argument, NULL, 'c'},
                                       {"otlp", required_argument, NULL, 'o'},
                                       {"otlp-env", no_argument, NULL, 'e'},
                                       {"timeout-ms", required_argument, NULL, 't'},
                                       {"help", no_argument, NULL, 'h'},
                                       {0, 0, 0, 0}};
  const char *chrome = NULL, *otlp = NULL;
  bool otlp_env = false;
  long long timeout = 0; /* 0: the variables', else 10000 */
  int ch;
  optind = 1;
  while ((ch = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
    char *end;
    switch (ch) {
    case 'c': chrome = optarg; break;
    case 'o': otlp = optarg; break;
    case 'e': otlp_env = true; break;
    case 't':
      timeout = strtoll(optarg, &end, 10);
      if (*end || timeout <= 0) {
        fprintf(stderr, "distview export: --timeout-ms %s: a positive integer is needed\n",
                optarg);
        return VW_EXIT_USAGE;
      }
      break;
    case 'h': return fputs(export_help, stdout), VW_EXIT_OK;
    default: return fputs(export_help, stderr), VW_EXIT_USAGE;
    }
  }
  if ((chrome != NULL) + (otlp != NULL) + otlp_env != 1 || optind != argc - 1) {
    fprintf(stderr, "distview export: one of --chrome, --otlp or --otlp-env, and one trace\n%s",
            export_help);
    return VW_EXIT_USAGE;
  }
  dist_trace *t;
  char err[1024];
  if (dist_trace_open(argv[optind], &t, err, sizeof err) != DIST_OK) {
    fprintf(stderr, "distview export: %s\n", err);
    return VW_EXIT_FAIL;
  }
  int rc = chrome ? dist_trace_export_chrome(t, chrome, err, sizeof err)
                  : dist_trace_export_otlp(t, otlp_env ? NULL : otlp, timeout, err, sizeof err);
  dist_trace_close(t);
  if (rc != DIST_OK) {
    fprintf(stderr, "distview export: %s\n", err);
    return VW_EXIT_FAIL;
  }
  return VW_EXIT_OK;
}
