/* ctest: labels=unit timeout=120 */
/* test_cli.c - build/bin/distview as scripts use it: summary, diagnose,
 * sql, stats and render with and without --json, their exit statuses
 * (diagnose 10/11/0 as distrun; 1 unreadable; 2 usage), and bad files
 * given to every subcommand: a message on stderr naming the file and a
 * non-zero exit, never a crash. */
#include <criterion/criterion.h>

#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <dist/trace_reader.h>

#include "proc.h"
#include "vw_test.h"

static dist_proc R; /* the last run: R.status, R.buf[0] (stdout), R.buf[1] (stderr) */

/* Runs distview with args (NULL-terminated), capturing both streams. */
#define distview(...) dist_proc_runl(&R, NULL, 60000, dist_test_bin("distview"), __VA_ARGS__)

static const char *story(const char *which) {
  const char *p = vwt_path(which);
  if (!strcmp(which, "desync.db"))
    fx_story_desync(p, true);
  else if (!strcmp(which, "hang.db"))
    fx_story_hang(p);
  else if (!strcmp(which, "deadlock.db"))
    fx_story_deadlock(p);
  else if (!strcmp(which, "gpu.db"))
    fx_story_gpu(p);
  else
    fx_story_ok(p);
  return p;
}

Test(viewer_cli, diagnose_json_exit_status_follows_distrun, .timeout = 60) {
  distview("diagnose", "--json", story("desync.db"), NULL);
  cr_assert_eq(R.status, 10, "desync: exit 10, got %d: %s", R.status, R.buf[1]);
  cr_assert(strstr(R.buf[0], "\"kind\":\"desync\",\"exit_code\":10,\"group\":0,\"seq\":13,"
                          "\"op\":\"ALL_REDUCE\",\"rank\":2,\"culprits\":[2]"), "%s", R.buf[0]);
  cr_assert(strstr(R.buf[0], "\"fields\":\"shape\""), "%s", R.buf[0]);
  cr_assert(strstr(R.buf[0], "\"report\":{\"kind\":\"desync_report\",\"rank\":0,\"group\":0,"
                          "\"seq\":13"), "the live report, same op: %s", R.buf[0]);
  distview("diagnose", "--json", story("hang.db"), NULL);
  cr_assert_eq(R.status, 11, "hang: exit 11: %s", R.buf[1]);
  cr_assert(strstr(R.buf[0], "\"kind\":\"hang\",\"exit_code\":11,\"group\":0,\"seq\":21,"
                          "\"op\":\"ALL_REDUCE\",\"rank\":1,\"culprits\":[1],"
                          "\"blocked\":[0,2,3],\"last_completed\":{\"seq\":20,"
                          "\"op\":\"BROADCAST\"}"), "%s", R.buf[0]);
  distview("diagnose", "--json", story("deadlock.db"), NULL);
  cr_assert_eq(R.status, 11, "deadlock: exit 11");
  cr_assert(strstr(R.buf[0], "\"cycle\":[{\"rank\":0,\"group\":1,\"seq\":5},{\"rank\":1,"
                          "\"group\":2,\"seq\":5}]"), "%s", R.buf[0]);
  distview("diagnose", story("ok.db"), NULL);
  cr_assert_eq(R.status, 0, "healthy: exit 0");
  cr_assert_str_eq(R.buf[0], "no desync, hang or failure in this trace\n", "text");
}

Test(viewer_cli, diagnose_text_shows_computed_and_stored_reports, .timeout = 30) {
  distview("diagnose", story("desync.db"), NULL);
  cr_assert_eq(R.status, 10, "exit");
  cr_assert(strstr(R.buf[0], "rank 2: ALL_REDUCE float32 [4,512] SUM  <- differs in shape"),
            "%s", R.buf[0]);
  cr_assert(strstr(R.buf[0], "the job's own desync_report (rank 0):"), "%s", R.buf[0]);
}

Test(viewer_cli, summary_text_and_json, .timeout = 30) {
  const char *p = story("hang.db");
  distview("summary", p, NULL);
  cr_assert_eq(R.status, 0, "exit 0 whatever the outcome");
  cr_assert(strstr(R.buf[0], "job job-hang (merged file, fixture)"), "%s", R.buf[0]);
  cr_assert(strstr(R.buf[0], "  rank 1    host node0            pid 4001     lost"), "%s",
            R.buf[0]);
  cr_assert(strstr(R.buf[0], "  group 1   pairs                cpu      2 ranks [0,1], "
                          "operations #1..#5"), "%s", R.buf[0]);
  cr_assert(strstr(R.buf[0], "  ALL_REDUCE                       79         76        0         0"
                          "          3"), "%s", R.buf[0]);
  cr_assert(strstr(R.buf[0], "outcome: hang in group 0 (default) at #21 ALL_REDUCE: rank 1 is behind"),
            "%s", R.buf[0]);
  distview("summary", "--json", p, NULL);
  cr_assert_eq(R.status, 0, "exit");
  cr_assert(strstr(R.buf[0], "{\"job_id\":\"job-hang\",\"kind\":\"merged\",\"world_size\":4,"),
            "%s", R.buf[0]);
  cr_assert(strstr(R.buf[0], "{\"op\":\"BROADCAST\",\"count\":4,\"completed\":4,"), "%s", R.buf[0]);
  cr_assert(strstr(R.buf[0], "\"events\":{\"log\":1,\"peer_lost\":1}"), "%s", R.buf[0]);
  cr_assert(strstr(R.buf[0], "\"outcome\":{\"kind\":\"hang\",\"exit_code\":11,"), "%s", R.buf[0]);
}

/* One line per group with 'gpu' events: count, mean and max GPU time per
 * op kind (rows over all ranks); a trace without them has no such part. */
Test(viewer_cli, summary_gives_gpu_time_per_op_for_each_group_with_gpu_rows, .timeout = 30) {
  distview("summary", story("gpu.db"), NULL);
  cr_assert_eq(R.status, 0, "exit: %s", R.buf[1]);
  cr_assert(strstr(R.buf[0], "\nGPU time per op (events of kind 'gpu'):\n"
                          "  group 0 (default): ALL_REDUCE 7, mean 118.6 us, max 200.0 us;"
                          " BROADCAST 2, mean 255.0 us, max 260.0 us\n"
                          "  group 1 (tp): ALL_GATHER 4, mean 31.0 us, max 32.0 us\n\n"
                          "events: gpu 13\n"), "%s", R.buf[0]);
  cr_assert(!strstr(R.buf[0], "group 2 (cpu):"), "group 2 ran no GPU work: %s", R.buf[0]);
  distview("summary", "--json", story("gpu.db"), NULL);
  cr_assert(strstr(R.buf[0], ",\"gpu\":[{\"group\":0,\"op\":\"ALL_REDUCE\",\"count\":7,"
                          "\"mean_ns\":118571,\"max_ns\":200000},{\"group\":0,\"op\":"
                          "\"BROADCAST\",\"count\":2,\"mean_ns\":255000,\"max_ns\":260000},"
                          "{\"group\":1,\"op\":\"ALL_GATHER\",\"count\":4,\"mean_ns\":31000,"
                          "\"max_ns\":32000}],\"events\":"), "%s", R.buf[0]);
  distview("summary", story("ok.db"), NULL);
  cr_assert(!strstr(R.buf[0], "GPU"), "%s", R.buf[0]);
  distview("summary", "--json", story("ok.db"), NULL);
  cr_assert(!strstr(R.buf[0], "\"gpu\""), "%s", R.buf[0]);
}

Test(viewer_cli, sql_reads_and_refuses_to_write, .timeout = 30) {
  const char *p = story("hang.db");
  distview("sql", p, "SELECT rank, state FROM operations WHERE seq = 21 ORDER BY rank", NULL);
  cr_assert_eq(R.status, 0, "exit: %s", R.buf[1]);
  cr_assert_str_eq(R.buf[0], "rank\tstate\n0\tstarted\n2\tstarted\n3\tstarted\n", "rows");
  distview("sql", "--json", p, "SELECT rank, t_ended_ns, host FROM ranks JOIN operations "
           "USING (rank) WHERE seq = 21 AND rank = 2", NULL);
  cr_assert_str_eq(R.buf[0], "[{\"rank\":2,\"t_ended_ns\":null,\"host\":\"node0\"}]\n", "json");
  distview("sql", p, "DELETE FROM ranks", NULL);
  cr_assert_eq(R.status, 2, "a write is a usage error");
  cr_assert(strstr(R.buf[1], "only read-only statements"), "%s", R.buf[1]);
  distview("sql", p, "SELECT 1; DROP TABLE job", NULL);
  cr_assert_eq(R.status, 2, "one statement");
  distview("sql", p, "SELEC nonsense", NULL);
  cr_assert_eq(R.status, 2, "syntax error");
  cr_assert(strstr(R.buf[1], "syntax error"), "%s", R.buf[1]);
  distview("sql", p, "SELECT count(*) FROM operations", NULL);
  cr_assert_str_eq(R.buf[0], "count(*)\n93\n", "the trace was not touched");
}

Test(viewer_cli, stats_percentiles_and_skew, .timeout = 30) {
  distview("stats", "--json", story("ok.db"), NULL);
  cr_assert_eq(R.status, 0, "exit: %s", R.buf[1]);
  /* every fixture op lasts 499 us; rank r starts r * 10 us after rank 0 */
  cr_assert(strstr(R.buf[0], "{\"group\":0,\"op\":\"ALL_REDUCE\",\"count\":120,\"p50_ns\":499000,"
                             "\"p90_ns\":499000,\"p99_ns\":499000,\"max_ns\":499000}"),
            "%s", R.buf[0]);
  cr_assert(strstr(R.buf[0], "{\"rank\":3,\"collectives\":31,\"mean_ns\":30000,\"p50_ns\":30000,"
                             "\"p99_ns\":30000,\"max_ns\":30000,\"last_arrivals\":31}"),
            "%s", R.buf[0]);
  distview("stats", story("ok.db"), NULL);
  cr_assert(strstr(R.buf[0], "  0     ALL_REDUCE                    120   499.0 us"), "%s",
            R.buf[0]);
}

Test(viewer_cli, render_prints_the_screen_after_keys, .timeout = 30) {
  distview("render", "--size", "100x30", "--keys", "j<Enter>", story("desync.db"), NULL);
  cr_assert_eq(R.status, 0, "exit: %s", R.buf[1]);
  cr_assert(strstr(R.buf[0], " distview  DESYNC (exit 10)  job job-desync"), "%s", R.buf[0]);
  /* the matrix cursor starts on the culprit, rank 2; j moves it to rank 3 */
  cr_assert(strstr(R.buf[0], ">   3 failed"), "detail opened on rank 3: %s", R.buf[0]);
  int lines = 0;
  for (const char *c = R.buf[0]; *c; c++)
    lines += *c == '\n';
  cr_assert_eq(lines, 30, "30 rows");
  distview("render", "--size", "5x5", story("ok.db"), NULL);
  cr_assert_eq(R.status, 2, "too small is a usage error");
}

Test(viewer_cli, usage_errors_exit_2_and_help_exits_0, .timeout = 30) {
  distview(NULL);
  cr_assert_eq(R.status, 2, "no arguments");
  distview("--bogus", NULL);
  cr_assert_eq(R.status, 2, "unknown option");
  const char *sub[] = {"summary", "diagnose", "sql", "stats", "render"};
  for (size_t i = 0; i < sizeof sub / sizeof *sub; i++) {
    distview(sub[i], "--help", NULL);
    cr_assert_eq(R.status, 0, "%s --help", sub[i]);
    cr_assert(strstr(R.buf[0], "usage: distview"), "%s --help: %s", sub[i], R.buf[0]);
    distview(sub[i], NULL);
    cr_assert_eq(R.status, 2, "%s without a trace", sub[i]);
    distview(sub[i], "--nope", "x.db", NULL);
    cr_assert_eq(R.status, 2, "%s with a bad option", sub[i]);
  }
  distview("--help", NULL);
  cr_assert_eq(R.status, 0, "--help");
  cr_assert(strstr(R.buf[0], "diagnose"), "lists subcommands");
}

Test(viewer_cli, bad_files_exit_1_with_a_message_from_every_subcommand, .timeout = 60) {
  const char *empty = vwt_path("empty.db"), *text = vwt_path("text.db"),
             *cut = vwt_path("cut.db"), *newer = vwt_path("newer.db");
  FILE *f = fopen(empty, "w");
  fclose(f);
  f = fopen(text, "w");
  fputs("hello\n", f);
  fclose(f);
  fx_story_hang(cut);
  cr_assert_eq(truncate(cut, 20000), 0, "truncate");
  sqlite3 *db = fx_create(newer, "job-v9", 2, 9);
  fx_finish(db, 0, 1);
  struct { const char *path, *words; } bad[] = {
      {"/nonexistent/trace.db", "No such file or directory"},
      {empty, "empty file"},
      {text, "not a SQLite database"},
      {cut, "truncated"},
      {newer, "schema version 9; this distview reads version 2"},
  };
  const char *sub[] = {"summary", "diagnose", "stats", "render", "sql"};
  for (size_t b = 0; b < sizeof bad / sizeof *bad; b++)
    for (size_t i = 0; i < sizeof sub / sizeof *sub; i++) {
      if (!strcmp(sub[i], "sql"))
        distview("sql", bad[b].path, "SELECT 1", NULL);
      else
        distview(sub[i], bad[b].path, NULL);
      cr_assert_eq(R.status, 1, "%s %s: exit %d", sub[i], bad[b].path, R.status);
      cr_assert(strstr(R.buf[1], bad[b].words), "%s %s: '%s'", sub[i], bad[b].path, R.buf[1]);
      cr_assert(strstr(R.buf[1], bad[b].path), "names the file: %s", R.buf[1]);
    }
  distview(text, NULL);   // the viewer itself, before it needs a terminal
  cr_assert_eq(R.status, 1, "viewer on a bad file");
  cr_assert(strstr(R.buf[1], "not a SQLite database"), "%s", R.buf[1]);
}

/* issue 26, defect 7: export went through the reader library, which took
 * schema_version 'abc', a file without its job or ranks table, and an
 * empty directory (an empty JSON, exit 0). Every subcommand refuses them
 * now, export included, and writes nothing. */
Test(viewer_cli, export_refuses_what_every_other_subcommand_refuses, .timeout = 60) {
  char abc[256], nojob[256], noranks[256], empty[256], json[256]; // vwt_path keeps four
  snprintf(abc, sizeof abc, "%s", vwt_path("abc.db"));
  snprintf(nojob, sizeof nojob, "%s", vwt_path("nojob.db"));
  snprintf(noranks, sizeof noranks, "%s", vwt_path("noranks.db"));
  snprintf(empty, sizeof empty, "%s", vwt_path("emptydir"));
  snprintf(json, sizeof json, "%s", vwt_path("out.json"));
  struct { const char *path, *sql, *words; } bad[] = {
      {abc, "UPDATE meta SET value = 'abc' WHERE key = 'schema_version'",
       "unreadable schema_version 'abc'"},
      {nojob, "DROP TABLE job", "job"},
      {noranks, "DROP TABLE ranks", "ranks"},
  };
  for (size_t b = 0; b < sizeof bad / sizeof *bad; b++) {
    fx_story_ok(bad[b].path);
    sqlite3 *db;
    cr_assert_eq(sqlite3_open(bad[b].path, &db), SQLITE_OK);
    cr_assert_eq(sqlite3_exec(db, bad[b].sql, NULL, NULL, NULL), SQLITE_OK, "%s", bad[b].sql);
    sqlite3_close(db);
  }
  cr_assert_eq(mkdir(empty, 0700), 0);
  const char *paths[] = {abc, nojob, noranks, empty};
  const char *words[] = {bad[0].words, bad[1].words, bad[2].words,
                         "no rank file could be read (no rank-*.db in it)"};
  for (size_t b = 0; b < 4; b++) {
    distview("summary", paths[b], NULL);
    cr_assert_eq(R.status, 1, "summary %s: exit %d", paths[b], R.status);
    cr_assert(strstr(R.buf[1], words[b]), "summary %s: %s", paths[b], R.buf[1]);
    unlink(json);
    distview("export", "--chrome", json, paths[b], NULL);
    cr_assert_eq(R.status, 1, "export %s: exit %d: %s", paths[b], R.status, R.buf[1]);
    cr_assert(strstr(R.buf[1], words[b]) && strstr(R.buf[1], paths[b]), "export %s: %s",
              paths[b], R.buf[1]);
    cr_assert_eq(access(json, F_OK), -1, "export %s wrote %s", paths[b], json);
    dist_trace *t = NULL;
    char err[1024];
    cr_assert_eq(dist_trace_open(paths[b], &t, err, sizeof err), DIST_E_INVAL, "%s", err);
    cr_assert_null(t);
    cr_assert(strstr(err, words[b]), "the library says it too: %s", err);
  }
}
