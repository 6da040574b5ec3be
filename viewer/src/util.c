/* util.c - formatting shared by the screens and the subcommands: durations,
 * rank lists, JSON strings, and opening a trace with a user-facing error. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vw.h"

const char *vw_fmt_dur(int64_t ns, char *buf, size_t len) {
  if (ns < 0)
    snprintf(buf, len, "-");
  else if (ns >= 10000000000LL)
    snprintf(buf, len, "%.1f s", (double)ns / 1e9);
  else if (ns >= 1000000000LL)
    snprintf(buf, len, "%.3f s", (double)ns / 1e9);
  else if (ns >= 1000000LL)
    snprintf(buf, len, "%.1f ms", (double)ns / 1e6);
  else if (ns >= 1000LL)
    snprintf(buf, len, "%.1f us", (double)ns / 1e3);
  else
    snprintf(buf, len, "%lld ns", (long long)ns);
  return buf;
}

static int cmp_int(const void *a, const void *b) {
  int x = *(const int *)a, y = *(const int *)b;
  return (x > y) - (x < y);
}

const char *vw_fmt_ranks(const int *r, int n, char *buf, size_t len) {
  int *s = malloc((size_t)(n > 0 ? n : 1) * sizeof *s);
  size_t off = 0;
  buf[0] = '\0';
  if (!s || n <= 0) {
    free(s);
    snprintf(buf, len, "-");
    return buf;
  }
  memcpy(s, r, (size_t)n * sizeof *s);
  qsort(s, (size_t)n, sizeof *s, cmp_int);
  for (int i = 0; i < n && off < len;) {
    int j = i;
    while (j + 1 < n && s[j + 1] == s[j] + 1)
      j++;
    off += (size_t)(j - i >= 2 ? snprintf(buf + off, len - off, "%s%d-%d", off ? "," : "", s[i], s[j])
                    : j == i  ? snprintf(buf + off, len - off, "%s%d", off ? "," : "", s[i])
                              : snprintf(buf + off, len - off, "%s%d,%d", off ? "," : "", s[i], s[j]));
    i = j + 1;
  }
  free(s);
  return buf;
}

void vw_json_str(FILE *f, const char *s) {
  if (!s) {
    fputs("null", f);
    return;
  }
  fputc('"', f);
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    if (*p == '"' || *p == '\\')
      fprintf(f, "\\%c", *p);
    else if (*p == '\n')
      fputs("\\n", f);
    else if (*p == '\t')
      fputs("\\t", f);
    else if (*p < 0x20)
      fprintf(f, "\\u%04x", *p);
    else
      fputc(*p, f);
  }
  fputc('"', f);
}

int vw_open_or_report(const char *prog, const char *path, vw_model **m) {
  char err[1024];
  if (vw_model_open(path, m, err, sizeof err) != 0) {
    fprintf(stderr, "%s: %s\n", prog, err);
    return VW_EXIT_UNREADABLE;
  }
  int k, mx;
  char run[128];
  if (vw_model_attempt(*m, &k, &mx, run, sizeof run))
    fprintf(stderr, "%s: showing attempt %d of job %s (%s; distrun --max-restarts %d)\n", prog, k,
            run, (*m)->path, mx);
  return 0;
}

/* Parses [--json] [--help] TRACE; returns -1 to exit with *rc. */
int vw_parse_common(int argc, char **argv, const char *usage_text, bool *json, int extra,
                    int *rc) {
  static const struct option opts[] = {{"json", no_argument, NULL, 'j'},
                                        {"help", no_argument, NULL, 'h'}, {0}};
  int c;
  optind = 1;
  *json = false;
  while ((c = getopt_long(argc, argv, "+jh", opts, NULL)) != -1) {
    if (c == 'h') {
      fputs(usage_text, stdout);
      *rc = 0;
      return -1;
    }
    if (c != 'j') {
      fputs(usage_text, stderr);
      *rc = VW_EXIT_USAGE;
      return -1;
    }
    *json = true;
  }
  if (argc - optind != 1 + extra) {
    fputs(usage_text, stderr);
    *rc = VW_EXIT_USAGE;
    return -1;
  }
  return optind;
}

