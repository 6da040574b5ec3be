/* ctest: labels=unit timeout=120 */
/* test_tmux.c - the real distview in a real terminal: tmux (a private
 * server per test) runs build/bin/distview on a fixture trace; the test
 * sends keys with send-keys and reads the screen with capture-pane. Each
 * step waits for the text it expects (polling, with a generous deadline),
 * never for a fixed time. Skipped when tmux is not installed. */
#include <criterion/criterion.h>

#include <stdarg.h>
#include <sys/wait.h>
#include <time.h>

#include "vw_test.h"

static char sock[64];

static int sh(const char *cmd, char *out, size_t len) {
  FILE *p = popen(cmd, "r");
  if (!p)
    return -1;
  size_t n = out ? fread(out, 1, len - 1, p) : 0;
  if (out)
    out[n] = '\0';
  else
    while (fgetc(p) != EOF)
      ;
  int st = pclose(p);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void tmux(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void tmux(const char *fmt, ...) {
  char args[1024], cmd[1200];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(args, sizeof args, fmt, ap);
  va_end(ap);
  snprintf(cmd, sizeof cmd, "tmux -L %s %s 2>&1", sock, args);
  char out[1024];
  int rc = sh(cmd, out, sizeof out);
  cr_assert_eq(rc, 0, "%s: %s", cmd, out);
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static char screen[1 << 16];

/* Waits until the pane shows every string of a NULL-terminated list. */
static void wait_for(const char *first, ...) {
  const char *want[8];
  int n = 0;
  va_list ap;
  va_start(ap, first);
  for (const char *s = first; s && n < 8; s = va_arg(ap, const char *))
    want[n++] = s;
  va_end(ap);
  char cmd[256];
  snprintf(cmd, sizeof cmd, "tmux -L %s capture-pane -p -t vw 2>&1", sock);
  double end = now_s() + 30;
  while (now_s() < end) {
    sh(cmd, screen, sizeof screen);
    int ok = 0;
    for (int i = 0; i < n; i++)
      ok += strstr(screen, want[i]) != NULL;
    if (ok == n)
      return;
    struct timespec pause = {0, 50 * 1000 * 1000};
    nanosleep(&pause, NULL);   // polling interval, not synchronisation
  }
  cr_assert_fail("pane never showed '%s' (and %d more); it shows:\n%s", want[0], n - 1, screen);
}

static void stop_server(void) {
  if (sock[0]) {
    char cmd[128];
    snprintf(cmd, sizeof cmd, "tmux -L %s kill-server >/dev/null 2>&1", sock);
    sh(cmd, NULL, 0);
  }
}

static void start(const char *trace, int cols, int rows) {
  if (sh("command -v tmux >/dev/null", NULL, 0) != 0)
    cr_skip_test("tmux is not installed (Debian package tmux)");
  snprintf(sock, sizeof sock, "distview-test-%d", (int)getpid());
  atexit(stop_server);   // also when a failed assertion ends the test early
  const char *bin = getenv("DIST_TEST_BIN") ? getenv("DIST_TEST_BIN") : "build/bin";
  /* a shell around distview shows its exit status and keeps the pane */
  tmux("-f /dev/null new-session -d -s vw -x %d -y %d 'env NO_COLOR=1 %s/distview %s; "
       "echo \"distview-exit=$?\"; read x'", cols, rows, bin, trace);
}

Test(viewer_tmux, keys_move_open_search_resize_and_quit, .timeout = 120, .fini = stop_server) {
  const char *trace = vwt_path("hang.db");
  fx_story_hang(trace);
  start(trace, 100, 30);
  wait_for(" distview  HANG (exit 11)  job job-hang", ">        1 LAG   ####################?",
           " rank 1 #21: never entered", NULL);
  tmux("send-keys -t vw j");
  wait_for(">        2       ####################>", " rank 2 #21: in flight", NULL);
  tmux("send-keys -t vw h");
  wait_for(" rank 2 #20: completed", " Detail: group 0 (default) #20 BROADCAST", NULL);
  tmux("send-keys -t vw l Enter");
  wait_for(" 3 Detail ", " Detail: group 0 (default) #21 ALL_REDUCE across ranks (3 of 4",
           " never entered by rank 1", NULL);
  tmux("send-keys -t vw Escape");
  wait_for(" rank 2 #21: in flight", NULL);
  tmux("send-keys -t vw Tab Tab Tab");
  wait_for(" Events: 2 ", NULL);
  tmux("send-keys -t vw / l o s t Enter");
  wait_for(">+60.0 ms   r0   peer_lost", "'lost': found #1", NULL);
  tmux("send-keys -t vw ?");
  wait_for("distview keys (any key closes)", NULL);
  tmux("send-keys -t vw x");
  tmux("send-keys -t vw 1 f r a n k = 3 Enter");
  wait_for(" filter: rank=3 ", ">        3       ####################>", NULL);
  /* a bigger terminal: all four panes at once */
  tmux("resize-window -t vw -x 200 -y 50");
  wait_for(" Timeline: ", " Events: ", " Detail: ", NULL);
  tmux("send-keys -t vw q");
  wait_for("distview-exit=", NULL);
  cr_assert(strstr(screen, "distview-exit=0"), "q ends distview with status 0:\n%s", screen);
}

/* 1,024 ranks in an 80x24 terminal: the lagging rank on the first screen
 * between two folded rows, z unfolding and } jumping back to it. */
Test(viewer_tmux, folded_1024_ranks_unfold_and_jump, .timeout = 120, .fini = stop_server) {
  const char *trace = vwt_path("lag1024.db");
  fx_story_lag(trace, 1024, 700, 5);
  start(trace, 80, 24);
  wait_for("     0-699 x700  ####>", ">      700 LAG   ####?", "  701-1023 x323  ####>", NULL);
  tmux("send-keys -t vw k");
  wait_for(" 700 ranks 0-699 #5: in flight", NULL);
  tmux("send-keys -t vw z");
  wait_for(">        0       ####>", "         1       ####>", NULL);
  tmux("send-keys -t vw -l '}'");
  wait_for(">      700 LAG   ####?", "       699       ####>", NULL);
  tmux("send-keys -t vw q");
  wait_for("distview-exit=0", NULL);
}

Test(viewer_tmux, a_bad_file_prints_why_and_exits_1, .timeout = 60, .fini = stop_server) {
  const char *bad = vwt_path("bad.db");
  FILE *f = fopen(bad, "w");
  fputs("not a trace\n", f);
  fclose(f);
  if (sh("command -v tmux >/dev/null", NULL, 0) != 0)
    cr_skip_test("tmux is not installed (Debian package tmux)");
  snprintf(sock, sizeof sock, "distview-test-%d", (int)getpid());
  atexit(stop_server);
  const char *bin = getenv("DIST_TEST_BIN") ? getenv("DIST_TEST_BIN") : "build/bin";
  /* a shell keeps the pane (and its output) after distview exits */
  tmux("-f /dev/null new-session -d -s vw -x 100 -y 24 "
       "'%s/distview %s; echo \"exit=$?\"; read x'", bin, bad);
  wait_for("not a SQLite database, so not a trace store", "exit=1", NULL);
}
