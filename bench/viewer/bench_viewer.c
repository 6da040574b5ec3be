/* bench_viewer.c - how fast the viewer is on a big trace (gen_trace's):
 * the first screen (open, header, quick diagnosis, fetch, render) at
 * 200x60 and 80x24, then each navigation key (fetch and render of the
 * next screen), repeated, as median and max; the subcommands that read
 * the whole trace unless the merge's summaries are there (distview
 * diagnose, diagnose --json, stats, stats --json, run in this process with
 * their output thrown away: wall and CPU time each); and the process's
 * peak RSS, which must stay flat in the trace's size because the panes
 * fetch page by page. CSV on stdout: what,value,unit.
 *
 *   bench_viewer trace.db [repeats] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "vw_ui.h"

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static long rss_kb(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_maxrss;
}

static int cmp_d(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double first_screen(const char *path, int rows, int cols) {
  vw_app a;
  char err[512];
  double t = now_ms();
  if (vw_app_open(&a, path, rows, cols, err, sizeof err) != 0) {
    fprintf(stderr, "bench_viewer: %s\n", err);
    exit(1);
  }
  vw_app_render(&a);
  t = now_ms() - t;
  vw_app_close(&a);
  return t;
}

/* Each key of the list, from the same starting screen, `repeats` times. */
static void keys(const char *path, int repeats) {
  static const struct { const char *name, *keys, *setup; } k[] = {
      {"key_j_next_rank", "j", ""},
      {"key_l_next_op", "l", ""},
      {"key_PgDn_matrix_page", "<PgDn>", ""},
      {"key_g_first_op", "g", ""},
      {"key_G_last_op", "G", "g"},
      {"key_bracket_next_group", "]", ""},
      {"key_Tab_to_timeline", "<Tab>", ""},
      {"key_timeline_zoom_in", "+", "2"},
      {"key_timeline_pan", "l", "2"},
      {"key_Enter_open_detail", "<Enter>", ""},
      {"key_detail_next_op", "l", "3"},
      {"key_Tab_to_events", "<Tab>", "3"},
      {"key_events_down", "j", "4"},
      {"key_search_next_op", "n", "/BROADCAST<Enter>"},
      {"key_filter_rank_Enter", "<Enter>", "frank=40"},
      {"key_filter_typing", "r", "f"},
  };
  vw_app a;
  char err[512];
  if (vw_app_open(&a, path, 60, 200, err, sizeof err) != 0)
    exit(1);
  vw_app_render(&a);
  vw_state start = a.st;
  double *ms = malloc((size_t)repeats * sizeof *ms);
  for (size_t i = 0; i < sizeof k / sizeof *k; i++) {
    for (int r = 0; r < repeats; r++) {
      a.st = start;
      vw_app_keys(&a, k[i].setup);
      /* a key press: input, then fetch + render of the new screen */
      double t = now_ms();
      vw_app_keys(&a, k[i].keys);
      ms[r] = now_ms() - t;
    }
    qsort(ms, (size_t)repeats, sizeof *ms, cmp_d);
    printf("%s_median,%.2f,ms\n%s_max,%.2f,ms\n", k[i].name, ms[repeats / 2], k[i].name,
           ms[repeats - 1]);
  }
  free(ms);
  vw_app_close(&a);
}

static double cpu_ms(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e3 +
         (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e3;
}

/* One subcommand as distview runs it, stdout to /dev/null. */
static void command(const char *name, int (*fn)(int, char **), const char *json, const char *path) {
  char *argv[] = {(char *)name, (char *)(json ? json : path), (char *)path, NULL};
  int argc = json ? 3 : 2;
  fflush(stdout);
  int saved = dup(1), null = open("/dev/null", O_WRONLY);
  dup2(null, 1);
  close(null);
  double t = now_ms(), c = cpu_ms();
  fn(argc, argv);
  fflush(stdout);
  t = now_ms() - t;
  c = cpu_ms() - c;
  dup2(saved, 1);
  close(saved);
  printf("cmd_%s%s,%.0f,ms\ncmd_%s%s_cpu,%.0f,ms\n", name, json ? "_json" : "", t, name,
         json ? "_json" : "", c);
}

static void commands(const char *path) {
  command("diagnose", vw_cmd_diagnose, NULL, path);
  command("diagnose", vw_cmd_diagnose, "--json", path);
  command("stats", vw_cmd_stats, NULL, path);
  command("stats", vw_cmd_stats, "--json", path);
}

static void scans(const char *path) {
  vw_model *m;
  char err[512];
  if (vw_model_open(path, &m, err, sizeof err) != 0)
    exit(1);
  printf("summarised,%d,bool\n", m->summarised);
  vw_diag d;
  double t = now_ms();
  vw_diagnose(m, true, &d);
  printf("diagnose_deep,%.0f,ms\n", now_ms() - t);
  printf("diagnosis,\"%s\",text\n", d.summary);
  vw_diag_free(&d);
  vw_model_close(m);
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: bench_viewer trace.db [repeats]\n");
    return 2;
  }
  int repeats = argc > 2 ? atoi(argv[2]) : 9;
  if (repeats < 1)
    repeats = 1;
  printf("what,value,unit\n");
  double cold = first_screen(argv[1], 60, 200);
  printf("first_screen_200x60_cold,%.1f,ms\n", cold);
  double w[5];
  for (int i = 0; i < 5; i++)
    w[i] = first_screen(argv[1], 60, 200);
  qsort(w, 5, sizeof *w, cmp_d);
  printf("first_screen_200x60_warm_median,%.1f,ms\n", w[2]);
  printf("first_screen_80x24,%.1f,ms\n", first_screen(argv[1], 24, 80));
  keys(argv[1], repeats);
  printf("peak_rss_tui,%ld,KiB\n", rss_kb());
  fflush(stdout);
  scans(argv[1]);
  commands(argv[1]);
  printf("peak_rss_after_deep_scan,%ld,KiB\n", rss_kb());
  return 0;
}
