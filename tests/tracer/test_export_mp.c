/* ctest: labels=multiproc timeout=120 */
/* Exporters over a real job's merged trace: the Chrome trace event JSON
 * parses (jansson) with one complete event per operation per rank and one
 * flow chain per collective across its ranks; `distview export` writes it
 * too, and fails with a message and exit status 1 (never hangs) when the
 * OTLP collector is down; live export to a collector that is down or never
 * answers lets the job end and counts every operation dropped. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "mp.h"
#include "trace_util.h"
#include "tmpdir.h"

static char dir[256];

static int job_rank(const dist_test_ctx *ctx) {
  setenv("DIST_TRACE", dir, 1);
  setenv("DIST_JOB_ID", "exportjob", 1);
  CHECK_OK(ctx, dist_tracer_register());
  CHECK_OK(ctx, dist_test_init_pg(ctx, NULL));
  float v[32] = {0};
  dist_tensor t = dist_tensor_1d(v, DIST_FLOAT32, 32);
  for (int i = 0; i < 3; i++)
    CHECK_OK(ctx, dist_all_reduce(&t, DIST_SUM, NULL, NULL));
  int pair[2] = {0, 2};
  dist_pg *g;
  CHECK_OK(ctx, dist_new_group(pair, 2, NULL, &g));
  if (ctx->rank != 1) {
    dist_work *w;
    CHECK_OK(ctx, dist_broadcast(&t, 2, g, &w));
    CHECK_OK(ctx, dist_work_wait(w, -1));
    dist_work_free(w);
  }
  dist_test_finish();
  return 0;
}

static void run_job(void) {
  snprintf(dir, sizeof dir, "/tmp/dist-traceexport-XXXXXX");
  cr_assert(dist_test_mkdtemp(dir));
  cr_assert_eq(dist_test_ranks(3, job_rank, NULL, 60), 0, "%s", dist_test_report());
  sqlite3 *db = tq_merge(dir, "exportjob", NULL);
  cr_assert(db);
  sqlite3_close(db);
}

/* Checks a Chrome trace file against the merged database. */
static void check_chrome(const char *path, sqlite3 *db) {
  json_error_t jerr;
  json_t *root = json_load_file(path, 0, &jerr);
  cr_assert(root, "%s: line %d: %s", path, jerr.line, jerr.text);
  json_t *evs = json_object_get(root, "traceEvents");
  cr_assert(json_is_array(evs));
  int n_ops = (int)tq_int(db, "SELECT count(*) FROM operations");
  int x = 0, s = 0, t = 0, f = 0;
  char seen[64][8][8] = {{{0}}}; /* [seq][group][rank] */
  size_t i;
  json_t *e;
  json_array_foreach(evs, i, e) {
    const char *ph = json_string_value(json_object_get(e, "ph"));
    cr_assert(ph);
    int pid = (int)json_integer_value(json_object_get(e, "pid"));
    int tid = (int)json_integer_value(json_object_get(e, "tid"));
    if (!strcmp(ph, "X")) {
      json_t *args = json_object_get(e, "args");
      int seq = (int)json_integer_value(json_object_get(args, "seq"));
      cr_assert(seq > 0 && seq < 64 && tid >= 0 && tid < 8 && pid >= 0 && pid < 8);
      cr_assert_eq(seen[seq][tid][pid]++, 0, "two events for rank %d group %d seq %d", pid,
                   tid, seq);
      cr_assert_str_eq(json_string_value(json_object_get(args, "op")),
                       tq_text(db, "SELECT op FROM operations WHERE rank=%d AND group_id=%d"
                                   " AND seq=%d", pid, tid, seq));
      cr_assert(json_real_value(json_object_get(e, "dur")) > 0 ||
                json_integer_value(json_object_get(e, "dur")) >= 0);
      x++;
    }
    s += !strcmp(ph, "s");
    t += !strcmp(ph, "t");
    f += !strcmp(ph, "f");
  }
  cr_assert_eq(x, n_ops, "%d complete events for %d operations", x, n_ops);
  int colls = (int)tq_int(db, "SELECT count(*) FROM (SELECT 1 FROM operations GROUP BY"
                              " group_id, seq HAVING count(*) > 1)");
  int middles = (int)tq_int(db, "SELECT sum(c - 2) FROM (SELECT count(*) c FROM operations"
                                " GROUP BY group_id, seq HAVING count(*) > 2)");
  cr_assert_eq(s, colls);
  cr_assert_eq(f, colls);
  cr_assert_eq(t, middles);
  json_decref(root);
}

Test(tracer_export, chrome_trace_has_one_event_per_operation_per_rank_and_flows,
     .timeout = 100) {
  run_job();
  char db_path[300], out[300], err[256];
  snprintf(db_path, sizeof db_path, "%s/trace.db", dir);
  snprintf(out, sizeof out, "%s/chrome.json", dir);
  dist_trace *tr;
  cr_assert_eq(dist_trace_open(db_path, &tr, err, sizeof err), DIST_OK, "%s", err);
  cr_assert_eq(dist_trace_export_chrome(tr, out, err, sizeof err), DIST_OK, "%s", err);
  sqlite3 *db = dist_trace_sqlite(tr);
  /* 3 ranks x (3 all_reduce + finish barrier) + 2 broadcasts */
  cr_assert_eq(tq_int(db, "SELECT count(*) FROM operations"), 14);
  check_chrome(out, db);
  /* distview writes the same from the job directory */
  char cmd[1024], out2[300];
  snprintf(out2, sizeof out2, "%s/chrome2.json", dir);
  snprintf(cmd, sizeof cmd, "%s/distview export --chrome %s %s/exportjob",
           getenv("DIST_TEST_BIN"), out2, dir);
  cr_assert_eq(system(cmd), 0, "%s", cmd);
  check_chrome(out2, db);
  dist_trace_close(tr);
}

Test(tracer_export, otlp_to_a_dead_collector_fails_with_a_message, .timeout = 60) {
  run_job();
  char cmd[1024];
  /* port 1 on loopback: nothing listens, the connection is refused */
  snprintf(cmd, sizeof cmd, "%s/distview export --otlp http://127.0.0.1:1 --timeout-ms 2000"
                            " %s/trace.db 2>%s/err.txt", getenv("DIST_TEST_BIN"), dir, dir);
  int st = system(cmd);
  cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 1, "status %d", st);
  char path[300], msg[512] = "";
  snprintf(path, sizeof path, "%s/err.txt", dir);
  FILE *fp = fopen(path, "r");
  cr_assert(fp);
  size_t n = fread(msg, 1, sizeof msg - 1, fp);
  msg[n] = '\0';
  fclose(fp);
  cr_assert(strstr(msg, "127.0.0.1:1/v1/traces") && strstr(msg, "connect"), "%s", msg);
}

/* Every rank's otlp_export event: nothing sent, and every one of its
 * operations counted as dropped (events.status and the message); and an
 * otlp_export_failed event naming the collector. */
static void check_all_dropped(sqlite3 *db, int ranks) {
  for (int r = 0; r < ranks; r++) {
    int64_t ops = tq_int(db, "SELECT count(*) FROM operations WHERE rank=%d", r);
    const char *m = tq_text(db, "SELECT message FROM events WHERE rank=%d AND"
                                " kind='otlp_export'", r);
    char want[64];
    snprintf(want, sizeof want, ", %lld dropped", (long long)ops);
    cr_assert(strstr(m, ": 0 operations sent") && strstr(m, want), "rank %d (%lld ops): '%s'",
              r, (long long)ops, m);
    cr_assert_eq(tq_int(db, "SELECT status FROM events WHERE rank=%d AND kind='otlp_export'", r),
                 ops);
    /* the first failure is in the file when it happens (a killed rank keeps it) */
    m = tq_text(db, "SELECT message FROM events WHERE rank=%d AND kind='otlp_export_failed'"
                    " ORDER BY t_ns LIMIT 1", r);
    cr_assert(strstr(m, "live OTLP export: OTLP collector http://127.0.0.1:") &&
              strstr(m, "/v1/traces"), "rank %d: '%s'", r, m);
  }
}

/* Live export to a collector that is down (connections refused): the job
 * runs to its end and each rank's file counts every operation dropped. */
static int dead_live_rank(const dist_test_ctx *ctx) {
  setenv("DIST_OTLP_ENDPOINT", "http://127.0.0.1:1", 1);
  setenv("DIST_OTLP_INTERVAL_MS", "20", 1);
  return job_rank(ctx);
}

Test(tracer_export, live_export_to_a_dead_collector_counts_drops, .timeout = 60) {
  snprintf(dir, sizeof dir, "/tmp/dist-traceexport-XXXXXX");
  cr_assert(dist_test_mkdtemp(dir));
  cr_assert_eq(dist_test_ranks(3, dead_live_rank, NULL, 50), 0, "%s", dist_test_report());
  sqlite3 *db = tq_merge(dir, "exportjob", NULL);
  cr_assert(db);
  cr_assert_eq(tq_int(db, "SELECT count(*) FROM operations"), 14);
  check_all_dropped(db, 3);
  sqlite3_close(db);
}

/* A collector that accepts connections and never answers, and a request
 * timeout of 10 minutes: rank 0 holds the listening socket and accepts
 * one connection per rank (each rank's exporter then waits for an answer
 * that never comes) before the job ends; the ranks end anyway (the
 * request in flight is cancelled, what is left dropped unread), well
 * within the test's timeout, with every operation counted dropped. */
static int hole_fd = -1;

static int hole_rank(const dist_test_ctx *ctx) {
  struct sockaddr_in a;
  socklen_t al = sizeof a;
  getsockname(hole_fd, (struct sockaddr *)&a, &al);
  char ep[64];
  snprintf(ep, sizeof ep, "http://127.0.0.1:%d", ntohs(a.sin_port));
  setenv("DIST_OTLP_ENDPOINT", ep, 1);
  setenv("DIST_OTLP_INTERVAL_MS", "20", 1);
  setenv("DIST_OTLP_TIMEOUT_MS", "600000", 1);
  setenv("DIST_TRACE", dir, 1);
  setenv("DIST_JOB_ID", "holejob", 1);
  CHECK_OK(ctx, dist_tracer_register());
  CHECK_OK(ctx, dist_test_init_pg(ctx, NULL));
  float v[8] = {0};
  dist_tensor t = dist_tensor_1d(v, DIST_FLOAT32, 8);
  for (int i = 0; i < 3; i++)
    CHECK_OK(ctx, dist_all_reduce(&t, DIST_SUM, NULL, NULL));
  if (ctx->rank == 0) { /* every rank's exporter has a request in flight */
    int got = 0;
    for (int waited = 0; got < ctx->world && waited < 30000; waited += 100) {
      struct pollfd p = {.fd = hole_fd, .events = POLLIN};
      if (poll(&p, 1, 100) == 1 && accept(hole_fd, NULL, NULL) >= 0)
        got++; /* kept open, never read: the request waits for its answer */
    }
    CHECK(ctx, got == ctx->world, "%d of %d exporters connected", got, ctx->world);
  }
  CHECK_OK(ctx, dist_barrier(NULL, NULL));
  dist_test_finish();
  return 0;
}

Test(tracer_export, live_export_to_a_collector_that_never_answers_ends_with_the_job,
     .timeout = 60) {
  snprintf(dir, sizeof dir, "/tmp/dist-traceexport-XXXXXX");
  cr_assert(dist_test_mkdtemp(dir));
  hole_fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  cr_assert(hole_fd >= 0 && bind(hole_fd, (struct sockaddr *)&a, sizeof a) == 0 &&
            listen(hole_fd, 64) == 0);
  cr_assert_eq(dist_test_ranks(3, hole_rank, NULL, 50), 0, "%s", dist_test_report());
  close(hole_fd);
  sqlite3 *db = tq_merge(dir, "holejob", NULL);
  cr_assert(db);
  cr_assert_eq(tq_int(db, "SELECT count(*) FROM operations WHERE op='ALL_REDUCE'"), 9);
  check_all_dropped(db, 3);
  sqlite3_close(db);
}
