/* ctest: labels=multiproc timeout=300 */
/* OTLP export checked by a real OTLP implementation: a node receiver
 * (otlp_receiver.js) decodes every request with the protobuf types of
 * @opentelemetry/otlp-transformer 0.57, strictly (re-encoding must give
 * back what was sent). The package is installed with npm into the build
 * tree on first use; without npm the tests skip, saying so. Then the test
 * checks ids, unix-nanosecond timestamps, attributes, error status and the
 * parent span that ties one collective across ranks; on a point-to-point
 * ring, that SEND and RECV spans have no parent and each RECV has one span
 * link, to the SEND of its sender that it took; and a collector that
 * answers 500 makes `distview export` fail with the status. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <jansson.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "mp.h"
#include "trace_util.h"
#include "tmpdir.h"

static char dir[256];
static char node_modules[512];

/* npm install into the build tree (once); false with *why when it cannot. */
static bool have_otlp_types(char *why, size_t len) {
  snprintf(node_modules, sizeof node_modules, "%s/otlp-node/node_modules",
           getenv("DIST_TEST_BUILD"));
  char probe[700];
  snprintf(probe, sizeof probe, "%s/@opentelemetry/otlp-transformer/package.json",
           node_modules);
  if (access(probe, R_OK) == 0)
    return true;
  if (system("node --version >/dev/null 2>&1 && npm --version >/dev/null 2>&1") != 0) {
    snprintf(why, len, "node or npm is not installed");
    return false;
  }
  char cmd[1200];
  snprintf(cmd, sizeof cmd, "timeout 240 npm install --no-audit --no-fund --silent --prefix "
                            "%s/otlp-node @opentelemetry/otlp-transformer@0.57 >&2",
           getenv("DIST_TEST_BUILD"));
  if (system(cmd) != 0 || access(probe, R_OK) != 0) {
    snprintf(why, len, "npm could not install @opentelemetry/otlp-transformer@0.57");
    return false;
  }
  return true;
}

typedef struct receiver {
  pid_t pid;
  int port;
} receiver;

static void receiver_start_tls(receiver *r, const char *mode, const char *outdir,
                               const char *key, const char *cert) {
  int p[2];
  cr_assert_eq(pipe(p), 0);
  char script[600];
  snprintf(script, sizeof script, "%s/tests/tracer/otlp_receiver.js", getenv("DIST_TEST_SRC"));
  r->pid = fork();
  if (r->pid == 0) { /* no cr_assert here: the runner only hears the test */
    dup2(p[1], 1);
    close(p[0]);
    setenv("NODE_PATH", node_modules, 1);
    execlp("node", "node", script, mode, outdir, key, cert, (char *)NULL);
    _exit(127);
  }
  close(p[1]);
  cr_assert(r->pid > 0);
  struct pollfd pf = {.fd = p[0], .events = POLLIN};
  cr_assert_eq(poll(&pf, 1, 30000), 1, "the receiver did not start");
  char line[32] = "";
  cr_assert(read(p[0], line, sizeof line - 1) > 0);
  close(p[0]);
  r->port = atoi(line);
  cr_assert(r->port > 0, "receiver said '%s'", line);
}

static void receiver_start(receiver *r, const char *mode, const char *outdir) {
  receiver_start_tls(r, mode, outdir, NULL, NULL);
}

static void receiver_stop(receiver *r) {
  kill(r->pid, SIGTERM);
  waitpid(r->pid, NULL, 0);
}

/* 3 ranks: all_reduces (2, or 40 when exporting live), a broadcast on
 * {0,2}, and on {0,1}, aborted by rank 0, an all_reduce of rank 0's that
 * fails. */
static char live_endpoint[128]; /* set: the ranks export live there */

static int job_rank(const dist_test_ctx *ctx) {
  if (live_endpoint[0]) {
    if (!getenv("OTLP_TEST_USE_OTEL")) /* else the OTEL_* names the test set */
      setenv("DIST_OTLP_ENDPOINT", live_endpoint, 1);
    /* rank 2 exports everything in its last cycle, at the end of the job */
    setenv("DIST_OTLP_INTERVAL_MS", ctx->rank == 2 ? "600000" : "50", 1);
  }
  setenv("DIST_TRACE", dir, 1);
  setenv("DIST_JOB_ID", "otlpjob", 1);
  CHECK_OK(ctx, dist_tracer_register());
  CHECK_OK(ctx, dist_test_init_pg(ctx, NULL));
  float v[32] = {0};
  dist_tensor t = dist_tensor_1d(v, DIST_FLOAT32, 32);
  /* live: more than the exporter's first (probe) request takes */
  for (int i = 0; i < (live_endpoint[0] ? 40 : 2); i++)
    CHECK_OK(ctx, dist_all_reduce(&t, DIST_SUM, NULL, NULL));
  int p02[2] = {0, 2}, p01[2] = {0, 1};
  dist_pg *g02, *g01;
  CHECK_OK(ctx, dist_new_group(p02, 2, NULL, &g02));
  CHECK_OK(ctx, dist_new_group(p01, 2, NULL, &g01));
  if (ctx->rank != 1)
    CHECK_OK(ctx, dist_broadcast(&t, 0, g02, NULL));
  if (ctx->rank == 0) {
    CHECK_OK(ctx, dist_abort_group(g01, "aborted by the test"));
    CHECK(ctx, dist_all_reduce(&t, DIST_SUM, g01, NULL) == DIST_E_ABORTED, "no abort");
  }
  dist_test_finish();
  return 0;
}

static const char *attr(json_t *attrs, const char *key, char *buf, size_t len) {
  size_t i;
  json_t *a;
  json_array_foreach(attrs, i, a) {
    if (strcmp(json_string_value(json_object_get(a, "key")), key))
      continue;
    json_t *v = json_object_get(a, "value");
    json_t *s = json_object_get(v, "stringValue"), *n = json_object_get(v, "intValue");
    snprintf(buf, len, "%s", s ? json_string_value(s) : n ? json_string_value(n) : "?");
    return buf;
  }
  return NULL;
}

static bool hex(const char *s, size_t digits) {
  if (!s || strlen(s) != digits)
    return false;
  for (size_t i = 0; i < digits; i++)
    if (!strchr("0123456789abcdef", s[i]))
      return false;
  return true;
}

/* Checks one span against the merged database. */
static void check_span(sqlite3 *db, json_t *sp, const char *trace, int64_t now) {
  char b[6][128];
  json_t *at = json_object_get(sp, "attributes");
  const char *tid = json_string_value(json_object_get(sp, "traceId"));
  cr_assert(hex(tid, 32) && !strcmp(tid, trace), "traceId %s", tid);
  cr_assert(hex(json_string_value(json_object_get(sp, "spanId")), 16));
  const char *st = json_string_value(json_object_get(sp, "startTimeUnixNano"));
  const char *en = json_string_value(json_object_get(sp, "endTimeUnixNano"));
  cr_assert(st && en, "times must be strings");
  long long s = atoll(st), e = atoll(en);
  cr_assert(s > now - 3600000000000ll && s <= now && e >= s, "times %s..%s", st, en);
  const char *group = attr(at, "dist.group", b[0], 128), *seq = attr(at, "dist.seq", b[1], 128);
  const char *op = attr(at, "dist.op", b[2], 128), *rank = attr(at, "dist.rank", b[3], 128);
  cr_assert(group && seq && op && attr(at, "dist.bytes", b[4], 128) &&
            attr(at, "dist.state", b[5], 128));
  if (!rank)
    return; /* a parent span: checked by the caller */
  bool p2p = strstr("SEND RECV SEND_BYTES RECV_BYTES BATCH_P2P", op) != NULL;
  json_t *parent = json_object_get(sp, "parentSpanId");
  if (p2p) /* point-to-point: no collective's parent */
    cr_assert_null(parent, "%s #%s of rank %s has a parent", op, seq, rank);
  else
    cr_assert(hex(json_string_value(parent), 16));
  json_t *links = json_object_get(sp, "links");
  cr_assert(!links || !strcmp(op, "RECV"), "only a RECV has a link (%s #%s)", op, seq);
  /* collectives and point-to-point operations are numbered apart */
  cr_assert_str_eq(op, tq_text(db, "SELECT op FROM operations WHERE rank=%s AND group_id=%s"
                                   " AND seq=%s AND p2p=%d", rank, group, seq, p2p));
  cr_assert_str_eq(b[5], tq_text(db, "SELECT state FROM operations WHERE rank=%s AND"
                                     " group_id=%s AND seq=%s AND p2p=%d", rank, group, seq,
                                 p2p));
  json_t *status = json_object_get(sp, "status");
  bool failed = !strcmp(b[5], "timed_out") || !strcmp(b[5], "failed");
  cr_assert_eq(status != NULL, failed, "status on %s %s #%s", b[5], op, seq);
  if (failed)
    cr_assert_eq(json_integer_value(json_object_get(status, "code")), 2);
}

/* Every span the receiver took (req-*.json in out) against the database:
 * one per operation per rank, each collective's tied to its collective's
 * parent span, point-to-point ones to none. Returns the spans (a new
 * array). */
static json_t *check_received(sqlite3 *db, const char *out) {
  struct timespec now_ts;
  clock_gettime(CLOCK_REALTIME, &now_ts);
  int64_t now = (int64_t)now_ts.tv_sec * 1000000000 + now_ts.tv_nsec;
  char trace[33];
  snprintf(trace, sizeof trace, "%s", "");
  int n_rank = 0, n_parent = 0, n_p2p = 0, children = 0;
  json_t *parents = json_object(); /* "group/seq" -> parent spanId */
  json_t *childs = json_array();
  json_t *all = json_array();
  DIR *d = opendir(out);
  struct dirent *de;
  while ((de = readdir(d))) {
    cr_assert(strncmp(de->d_name, "bad-", 4) != 0, "the receiver refused %s", de->d_name);
    if (strncmp(de->d_name, "req-", 4))
      continue;
    char path[600];
    snprintf(path, sizeof path, "%s/%s", out, de->d_name);
    json_error_t je;
    json_t *req = json_load_file(path, 0, &je);
    cr_assert(req, "%s: %s", path, je.text);
    size_t i, k;
    json_t *rs, *sp;
    json_array_foreach(json_object_get(req, "resourceSpans"), i, rs) {
      char b[128];
      json_t *ra = json_object_get(json_object_get(rs, "resource"), "attributes");
      cr_assert_str_eq(attr(ra, "service.name", b, sizeof b), "libdist");
      cr_assert(attr(ra, "host.name", b, sizeof b) && b[0]);
      cr_assert_str_eq(attr(ra, "dist.job_id", b, sizeof b), "otlpjob");
      json_t *spans = json_object_get(json_array_get(json_object_get(rs, "scopeSpans"), 0),
                                      "spans");
      json_array_foreach(spans, k, sp) {
        if (!trace[0])
          snprintf(trace, sizeof trace, "%s", json_string_value(json_object_get(sp, "traceId")));
        check_span(db, sp, trace, now);
        json_array_append(all, sp);
        json_t *at = json_object_get(sp, "attributes");
        char g[32], s[32], key[80], rk[32];
        snprintf(key, sizeof key, "%s/%s", attr(at, "dist.group", g, 32),
                 attr(at, "dist.seq", s, 32));
        if (attr(at, "dist.rank", rk, 32) && !json_object_get(sp, "parentSpanId")) {
          n_rank++;
          n_p2p++;
        } else if (json_object_get(sp, "parentSpanId")) {
          n_rank++;
          json_array_append_new(childs, json_pack("{s:s,s:O}", "key", key, "parent",
                                                  json_object_get(sp, "parentSpanId")));
        } else {
          n_parent++;
          char nr[32];
          json_object_set(parents, key, json_object_get(sp, "spanId"));
          if (attr(at, "dist.ranks", nr, 32)) /* not in live export */
            cr_assert_eq(atoi(nr), tq_int(db, "SELECT count(*) FROM operations WHERE"
                                              " group_id=%s AND seq=%s AND NOT p2p", g, s));
        }
      }
    }
    json_decref(req);
  }
  closedir(d);
  cr_assert_eq(n_rank, tq_int(db, "SELECT count(*) FROM operations"));
  cr_assert_eq(n_p2p, tq_int(db, "SELECT count(*) FROM operations WHERE op IN"
                                 " ('SEND','RECV','SEND_BYTES','RECV_BYTES','BATCH_P2P')"));
  cr_assert_eq(n_parent, tq_int(db, "SELECT count(*) FROM (SELECT DISTINCT group_id, seq"
                                    " FROM operations WHERE op NOT IN ('SEND','RECV',"
                                    "'SEND_BYTES','RECV_BYTES','BATCH_P2P'))"));
  size_t i;
  json_t *c;
  json_array_foreach(childs, i, c) {
    json_t *p = json_object_get(parents, json_string_value(json_object_get(c, "key")));
    cr_assert(p && json_equal(p, json_object_get(c, "parent")), "span of %s has no parent",
              json_string_value(json_object_get(c, "key")));
    children++;
  }
  cr_assert_eq(children, n_rank - n_p2p);
  json_decref(parents);
  json_decref(childs);
  return all;
}

Test(tracer_otlp, a_real_otlp_decoder_accepts_our_spans, .timeout = 290) {
  char why[256];
  if (!have_otlp_types(why, sizeof why))
    cr_skip_test("OTLP receiver unavailable: %s", why);
  snprintf(dir, sizeof dir, "/tmp/dist-traceotlp-XXXXXX");
  cr_assert(dist_test_mkdtemp(dir));
  cr_assert_eq(dist_test_ranks(3, job_rank, NULL, 60), 0, "%s", dist_test_report());
  sqlite3 *db = tq_merge(dir, "otlpjob", NULL);
  cr_assert(db);
  cr_assert_str_eq(tq_text(db, "SELECT state FROM operations WHERE rank=0 AND group_id=2"),
                   "failed");
  char out[300], cmd[1200];
  snprintf(out, sizeof out, "%s/received", dir);
  snprintf(cmd, sizeof cmd, "mkdir -p %s", out);
  cr_assert_eq(system(cmd), 0);
  receiver r;
  receiver_start(&r, "ok", out);
  snprintf(cmd, sizeof cmd, "%s/distview export --otlp http://127.0.0.1:%d %s/trace.db",
           getenv("DIST_TEST_BIN"), r.port, dir);
  int rc = system(cmd);
  receiver_stop(&r);
  cr_assert_eq(rc, 0, "distview export failed (see bad-*.txt in %s)", out);
  json_decref(check_received(db, out));
  sqlite3_close(db);
}

Test(tracer_otlp, live_export_reaches_a_real_collector, .timeout = 290) {
  char why[256];
  if (!have_otlp_types(why, sizeof why))
    cr_skip_test("OTLP receiver unavailable: %s", why);
  snprintf(dir, sizeof dir, "/tmp/dist-traceotlp-XXXXXX");
  cr_assert(dist_test_mkdtemp(dir));
  char out[300], cmd[600];
  snprintf(out, sizeof out, "%s/received", dir);
  snprintf(cmd, sizeof cmd, "mkdir -p %s", out);
  cr_assert_eq(system(cmd), 0);
  receiver r;
  receiver_start(&r, "ok", out);
  snprintf(live_endpoint, sizeof live_endpoint, "http://127.0.0.1:%d", r.port);
  int rc = dist_test_ranks(3, job_rank, NULL, 60);
  receiver_stop(&r);
  cr_assert_eq(rc, 0, "%s", dist_test_report());
  sqlite3 *db = tq_merge(dir, "otlpjob", NULL);
  cr_assert(db);
  cr_assert_eq(tq_int(db, "SELECT count(*) FROM events WHERE kind='otlp_export' AND"
                          " status = 0 AND message LIKE '%% 0 dropped;%%'"), 3);
  cr_assert_eq(tq_int(db, "SELECT count(*) FROM events WHERE kind='otlp_export_failed'"), 0);
  json_decref(check_received(db, out));
  sqlite3_close(db);
}

Test(tracer_otlp, a_collector_answering_500_fails_the_export, .timeout = 290) {
  char why[256];
  if (!have_otlp_types(why, sizeof why))
    cr_skip_test("OTLP receiver unavailable: %s", why);
  snprintf(dir, sizeof dir, "/tmp/dist-traceotlp-XXXXXX");
  cr_assert(dist_test_mkdtemp(dir));
  cr_assert_eq(dist_test_ranks(3, job_rank, NULL, 60), 0, "%s", dist_test_report());
  sqlite3 *db = tq_merge(dir, "otlpjob", NULL);
  cr_assert(db);
  sqlite3_close(db);
  receiver r;
  receiver_start(&r, "fail500", dir);
  char cmd[1200];
  snprintf(cmd, sizeof cmd, "%s/distview export --otlp http://127.0.0.1:%d %s/trace.db"
                            " 2>%s/err.txt", getenv("DIST_TEST_BIN"), r.port, dir, dir);
  int st = system(cmd);
  receiver_stop(&r);
  cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 1, "status %d", st);
  char path[300], msg[512] = "";
  snprintf(path, sizeof path, "%s/err.txt", dir);
  FILE *f = fopen(path, "r");
  cr_assert(f);
  size_t n = fread(msg, 1, sizeof msg - 1, f);
  msg[n] = '\0';
  fclose(f);
  cr_assert(strstr(msg, "HTTP 500") && strstr(msg, "broken on purpose"), "%s", msg);
}

/* A point-to-point ring (4 ranks; each round every rank sends to the next
 * and receives from the previous, even ranks sending first, then an
 * all_reduce), so that one (group, seq) holds a SEND on some ranks and an
 * unrelated RECV on others. */
#define RING 4

static int ring_rank(const dist_test_ctx *ctx) {
  if (live_endpoint[0]) {
    setenv("DIST_OTLP_ENDPOINT", live_endpoint, 1);
    setenv("DIST_OTLP_INTERVAL_MS", "50", 1);
  }
  setenv("DIST_TRACE", dir, 1);
  setenv("DIST_JOB_ID", "otlpjob", 1);
  CHECK_OK(ctx, dist_tracer_register());
  CHECK_OK(ctx, dist_test_init_pg(ctx, NULL));
  int next = (ctx->rank + 1) % RING, prev = (ctx->rank + RING - 1) % RING;
  float out[8] = {0}, in[8];
  dist_tensor o = dist_tensor_1d(out, DIST_FLOAT32, 8), i = dist_tensor_1d(in, DIST_FLOAT32, 8);
  for (int r = 0; r < 3; r++) {
    if (ctx->rank % 2 == 0) {
      CHECK_OK(ctx, dist_send(&o, next, NULL, 0));
      CHECK_OK(ctx, dist_recv(&i, prev, NULL, 0, NULL));
    } else {
      CHECK_OK(ctx, dist_recv(&i, prev, NULL, 0, NULL));
      CHECK_OK(ctx, dist_send(&o, next, NULL, 0));
    }
    CHECK_OK(ctx, dist_all_reduce(&o, DIST_SUM, NULL, NULL));
  }
  dist_test_finish();
  return 0;
}

static int attr_int_of(json_t *sp, const char *key) {
  char b[64];
  const char *v = attr(json_object_get(sp, "attributes"), key, b, sizeof b);
  cr_assert_not_null(v, "a span without %s", key);
  return atoi(v);
}

/* Every RECV span of all links to exactly one SEND span of all (one
 * each), the SEND its pair names: from the RECV's source, to its rank,
 * with the same pair number. Returns how many RECVs were checked. */
static int check_links(sqlite3 *db, json_t *all) {
  json_t *by_id = json_object(), *linked = json_object();
  size_t i;
  json_t *sp;
  json_array_foreach(all, i, sp) { /* one id per span: p2p and collectives number apart */
    const char *id = json_string_value(json_object_get(sp, "spanId"));
    cr_assert_null(json_object_get(by_id, id), "two spans have id %s", id);
    json_object_set(by_id, id, sp);
  }
  int recvs = 0;
  json_array_foreach(all, i, sp) {
    char op[32];
    if (strcmp(attr(json_object_get(sp, "attributes"), "dist.op", op, sizeof op), "RECV"))
      continue;
    int rank = attr_int_of(sp, "dist.rank"), seq = attr_int_of(sp, "dist.seq");
    int g = attr_int_of(sp, "dist.group");
    json_t *links = json_object_get(sp, "links");
    cr_assert_eq(json_array_size(links), 1, "RECV #%d of rank %d: %zu links", seq, rank,
                 json_array_size(links));
    json_t *l = json_array_get(links, 0);
    cr_assert(json_equal(json_object_get(l, "traceId"), json_object_get(sp, "traceId")));
    const char *to = json_string_value(json_object_get(l, "spanId"));
    json_t *send = json_object_get(by_id, to);
    cr_assert_not_null(send, "RECV #%d of rank %d links to no span we sent", seq, rank);
    char sop[32];
    cr_assert_str_eq(attr(json_object_get(send, "attributes"), "dist.op", sop, sizeof sop),
                     "SEND", "RECV #%d of rank %d links to a %s", seq, rank, sop);
    int src = tq_int(db, "SELECT root FROM operations WHERE rank=%d AND group_id=%d AND seq=%d"
                         " AND p2p", rank, g, seq);
    int srank = attr_int_of(send, "dist.rank"), sseq = attr_int_of(send, "dist.seq");
    cr_assert_eq(srank, src, "RECV #%d of rank %d (from %d) links to rank %d's SEND", seq, rank,
                 src, srank);
    cr_assert_eq(attr_int_of(send, "dist.group"), g);
    cr_assert_eq(tq_int(db, "SELECT root FROM operations WHERE rank=%d AND group_id=%d AND"
                            " seq=%d AND p2p", srank, g, sseq), rank, "that SEND went to rank %d",
                 rank);
    /* the n-th send from A to B is the n-th receive at B from A */
    int k = attr_int_of(sp, "dist.pair_seq");
    cr_assert_eq(attr_int_of(send, "dist.pair_seq"), k, "RECV #%d of rank %d (pair #%d)", seq,
                 rank, k);
    cr_assert_eq(attr_int_of(sp, "dist.peer"), srank);
    cr_assert_eq(attr_int_of(send, "dist.peer"), rank);
    cr_assert_null(json_object_get(linked, to), "two RECVs link to one SEND");
    json_object_set_new(linked, to, json_true());
    recvs++;
  }
  json_decref(by_id);
  json_decref(linked);
  return recvs;
}

Test(tracer_otlp, p2p_spans_have_no_parent_and_each_recv_links_its_send, .timeout = 290) {
  char why[256];
  if (!have_otlp_types(why, sizeof why))
    cr_skip_test("OTLP receiver unavailable: %s", why);
  snprintf(dir, sizeof dir, "/tmp/dist-traceotlp-XXXXXX");
  cr_assert(dist_test_mkdtemp(dir));
  cr_assert_eq(dist_test_ranks(RING, ring_rank, NULL, 60), 0, "%s", dist_test_report());
  sqlite3 *db = tq_merge(dir, "otlpjob", NULL);
  cr_assert(db);
  /* the premise: sharing (group, seq) says nothing about who talks to whom */
  cr_assert(tq_int(db, "SELECT count(*) FROM (SELECT 1 FROM operations WHERE op IN"
                       " ('SEND','RECV') GROUP BY group_id, seq HAVING count(DISTINCT op) > 1)") > 0);
  char out[300], cmd[1200];
  snprintf(out, sizeof out, "%s/received", dir);
  snprintf(cmd, sizeof cmd, "mkdir -p %s", out);
  cr_assert_eq(system(cmd), 0);
  receiver r;
  receiver_start(&r, "ok", out);
  snprintf(cmd, sizeof cmd, "%s/distview export --otlp http://127.0.0.1:%d %s/trace.db",
           getenv("DIST_TEST_BIN"), r.port, dir);
  int rc = system(cmd);
  receiver_stop(&r);
  cr_assert_eq(rc, 0, "distview export failed (see bad-*.txt in %s)", out);
  /* ids, times, parents of the collectives, none for p2p (check_span) */
  json_t *all = check_received(db, out);
  cr_assert_eq(check_links(db, all), RING * 3, "every RECV span was checked");
  json_decref(all);
  sqlite3_close(db);
}

/* Live export: each rank sends its own spans as it runs, and a RECV links
 * to its SEND without reading the sender's file (span ids by pair). */
Test(tracer_otlp, live_recv_spans_link_their_send, .timeout = 290) {
  char why[256];
  if (!have_otlp_types(why, sizeof why))
    cr_skip_test("OTLP receiver unavailable: %s", why);
  snprintf(dir, sizeof dir, "/tmp/dist-traceotlp-XXXXXX");
  cr_assert(dist_test_mkdtemp(dir));
  char out[300], cmd[600];
  snprintf(out, sizeof out, "%s/received", dir);
  snprintf(cmd, sizeof cmd, "mkdir -p %s", out);
  cr_assert_eq(system(cmd), 0);
  receiver r;
  receiver_start(&r, "ok", out);
  snprintf(live_endpoint, sizeof live_endpoint, "http://127.0.0.1:%d", r.port);
  int rc = dist_test_ranks(RING, ring_rank, NULL, 60);
  receiver_stop(&r);
  cr_assert_eq(rc, 0, "%s", dist_test_report());
  sqlite3 *db = tq_merge(dir, "otlpjob", NULL);
  cr_assert(db);
  cr_assert_eq(tq_int(db, "SELECT count(*) FROM events WHERE kind='otlp_export' AND"
                          " status = 0 AND message LIKE '%% 0 dropped;%%'"), RING);
  json_t *all = check_received(db, out);
  cr_assert_eq(check_links(db, all), RING * 3, "every live RECV span was checked");
  json_decref(all);
  sqlite3_close(db);
}

/* --- OpenTelemetry's variables (OTEL_EXPORTER_OTLP_*, OTEL_SERVICE_NAME,
 * OTEL_RESOURCE_ATTRIBUTES, OTEL_SDK_DISABLED) ----------------------------- */

/* The merged trace of job_rank's 3 ranks in a fresh dir. */
static void make_trace(void) {
  snprintf(dir, sizeof dir, "/tmp/dist-traceotlp-XXXXXX");
  cr_assert(dist_test_mkdtemp(dir));
  cr_assert_eq(dist_test_ranks(3, job_rank, NULL, 60), 0, "%s", dist_test_report());
  sqlite3 *db = tq_merge(dir, "otlpjob", NULL);
  cr_assert(db);
  sqlite3_close(db);
}

static void fresh_dir(char *out, size_t len, const char *name) {
  snprintf(out, len, "%s/%s", dir, name);
  char cmd[700];
  snprintf(cmd, sizeof cmd, "rm -rf %s && mkdir -p %s", out, out);
  cr_assert_eq(system(cmd), 0);
}

/* Runs `distview export ARGS dir/trace.db`, its stderr into *err_out
 * (static); returns its exit status. */
static int export_with(const char *args, const char **err_out) {
  static char msg[2048];
  char cmd[2048], path[400];
  snprintf(path, sizeof path, "%s/export-err.txt", dir);
  snprintf(cmd, sizeof cmd, "%s/distview export %s %s/trace.db 2>%s", getenv("DIST_TEST_BIN"),
           args, dir, path);
  int st = system(cmd);
  msg[0] = '\0';
  FILE *f = fopen(path, "r");
  if (f) {
    msg[fread(msg, 1, sizeof msg - 1, f)] = '\0';
    fclose(f);
  }
  *err_out = msg;
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static json_t *load_json(const char *dirpath, const char *prefix, int k) {
  char path[600];
  snprintf(path, sizeof path, "%s/%s-%d.json", dirpath, prefix, k);
  json_error_t je;
  json_t *j = json_load_file(path, 0, &je);
  cr_assert(j, "%s: %s", path, je.text);
  return j;
}

static int count_prefix(const char *dirpath, const char *prefix) {
  int n = 0;
  DIR *d = opendir(dirpath);
  struct dirent *de;
  while (d && (de = readdir(d)))
    n += !strncmp(de->d_name, prefix, strlen(prefix));
  if (d)
    closedir(d);
  return n;
}

static const char *resource_attr(json_t *req, const char *key, char *buf, size_t len) {
  json_t *rs = json_array_get(json_object_get(req, "resourceSpans"), 0);
  return attr(json_object_get(json_object_get(rs, "resource"), "attributes"), key, buf, len);
}

static int64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void clear_otel_env(void) {
  const char *vars[] = {"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
                        "OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
                        "OTEL_EXPORTER_OTLP_COMPRESSION", "OTEL_EXPORTER_OTLP_HEADERS",
                        "OTEL_EXPORTER_OTLP_TRACES_HEADERS", "OTEL_EXPORTER_OTLP_TIMEOUT",
                        "OTEL_EXPORTER_OTLP_CERTIFICATE", "OTEL_SERVICE_NAME",
                        "OTEL_RESOURCE_ATTRIBUTES", "OTEL_SDK_DISABLED", "DIST_OTLP_ENDPOINT",
                        "DIST_OTLP_SERVICE", "DIST_OTLP_TIMEOUT_MS"};
  for (size_t i = 0; i < sizeof vars / sizeof *vars; i++)
    unsetenv(vars[i]);
}

Test(tracer_otlp, protobuf_gzip_and_headers_carry_what_the_json_form_does, .timeout = 290) {
  char why[256];
  if (!have_otlp_types(why, sizeof why))
    cr_skip_test("OTLP receiver unavailable: %s", why);
  clear_otel_env();
  make_trace();
  /* the same resource for both forms */
  setenv("OTEL_SERVICE_NAME", "trainer", 1);
  setenv("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment=test,team=ml%2Cops,"
         "service.name=ignored", 1);
  char json_dir[400], pb_dir[400], url[128];
  const char *msg;
  fresh_dir(json_dir, sizeof json_dir, "json");
  receiver r;
  receiver_start(&r, "ok", json_dir);
  snprintf(url, sizeof url, "--otlp http://127.0.0.1:%d", r.port);
  int st = export_with(url, &msg);
  receiver_stop(&r);
  cr_assert_eq(st, 0, "json export: %s", msg);
  /* protobuf, gzip, headers; the endpoint from the traces variable (a
   * whole URL), --otlp-env */
  fresh_dir(pb_dir, sizeof pb_dir, "pb");
  receiver_start(&r, "ok", pb_dir);
  snprintf(url, sizeof url, "http://127.0.0.1:%d/v1/traces", r.port);
  setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", url, 1);
  setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1", 1); /* the traces one wins */
  setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf", 1);
  setenv("OTEL_EXPORTER_OTLP_COMPRESSION", "gzip", 1);
  setenv("OTEL_EXPORTER_OTLP_HEADERS", "authorization=Bearer%20s3cret , x-scope-orgid=tenant-1", 1);
  st = export_with("--otlp-env", &msg);
  receiver_stop(&r);
  cr_assert_eq(st, 0, "protobuf export: %s", msg);
  int n = count_prefix(json_dir, "req-");
  cr_assert(n >= 1);
  cr_assert_eq(count_prefix(pb_dir, "req-"), n, "as many requests in both forms");
  cr_assert_eq(count_prefix(pb_dir, "bad-"), 0, "the receiver refused a protobuf body");
  for (int k = 0; k < n; k++) {
    json_t *mj = load_json(json_dir, "meta", k), *mp = load_json(pb_dir, "meta", k);
    cr_assert_str_eq(json_string_value(json_object_get(mj, "type")), "application/json");
    cr_assert_str_eq(json_string_value(json_object_get(mj, "encoding")), "");
    cr_assert_str_eq(json_string_value(json_object_get(mp, "type")), "application/x-protobuf");
    cr_assert_str_eq(json_string_value(json_object_get(mp, "encoding")), "gzip");
    json_t *h = json_object_get(mp, "headers");
    cr_assert_str_eq(json_string_value(json_object_get(h, "authorization")), "Bearer s3cret");
    cr_assert_str_eq(json_string_value(json_object_get(h, "x-scope-orgid")), "tenant-1");
    cr_assert_null(json_object_get(json_object_get(mj, "headers"), "authorization"));
    /* decoded by protobufjs with the OTLP types: the same request */
    json_t *a = load_json(json_dir, "req", k), *b = load_json(pb_dir, "req", k);
    char *ta = json_dumps(a, JSON_SORT_KEYS), *tb = json_dumps(b, JSON_SORT_KEYS);
    cr_assert(json_equal(a, b), "request %d differs:\njson: %.600s\nprotobuf: %.600s", k, ta, tb);
    char v[128];
    cr_assert_str_eq(resource_attr(b, "service.name", v, sizeof v), "trainer");
    cr_assert_str_eq(resource_attr(b, "team", v, sizeof v), "ml,ops");
    cr_assert_str_eq(resource_attr(b, "deployment.environment", v, sizeof v), "test");
    cr_assert_str_eq(resource_attr(b, "dist.job_id", v, sizeof v), "otlpjob");
    free(ta);
    free(tb);
    json_decref(a);
    json_decref(b);
    json_decref(mj);
    json_decref(mp);
  }
}

Test(tracer_otlp, https_with_a_test_certificate_and_refused_without_it, .timeout = 290) {
  char why[256];
  if (!have_otlp_types(why, sizeof why))
    cr_skip_test("OTLP receiver unavailable: %s", why);
  clear_otel_env();
  make_trace();
  char key[400], cert[400], cmd[1400], out[400], url[128];
  snprintf(key, sizeof key, "%s/key.pem", dir);
  snprintf(cert, sizeof cert, "%s/cert.pem", dir);
  snprintf(cmd, sizeof cmd, "openssl req -x509 -newkey rsa:2048 -nodes -keyout %s -out %s "
           "-days 1 -subj /CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1 2>/dev/null",
           key, cert);
  cr_assert_eq(system(cmd), 0, "openssl could not make a test certificate");
  fresh_dir(out, sizeof out, "tls");
  receiver r;
  receiver_start_tls(&r, "https", out, key, cert);
  snprintf(url, sizeof url, "--otlp https://127.0.0.1:%d", r.port);
  const char *msg;
  int st = export_with(url, &msg); /* the system's CAs do not know it */
  cr_assert_eq(st, 1, "an unknown certificate was accepted: %s", msg);
  cr_assert(strstr(msg, "SSL") || strstr(msg, "certificate"), "%s", msg);
  cr_assert_eq(count_prefix(out, "req-"), 0);
  setenv("OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE", cert, 1);
  setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf", 1);
  st = export_with(url, &msg);
  receiver_stop(&r);
  cr_assert_eq(st, 0, "https export: %s", msg);
  cr_assert(count_prefix(out, "req-") >= 1);
  cr_assert_eq(count_prefix(out, "bad-"), 0);
}

Test(tracer_otlp, live_export_follows_the_otel_variables, .timeout = 290) {
  char why[256];
  if (!have_otlp_types(why, sizeof why))
    cr_skip_test("OTLP receiver unavailable: %s", why);
  clear_otel_env();
  snprintf(dir, sizeof dir, "/tmp/dist-traceotlp-XXXXXX");
  cr_assert(dist_test_mkdtemp(dir));
  char out[300];
  fresh_dir(out, sizeof out, "received");
  receiver r;
  receiver_start(&r, "ok", out);
  char ep[128];
  snprintf(ep, sizeof ep, "http://127.0.0.1:%d", r.port);
  /* job_rank exports live when live_endpoint is set: through the OTEL
   * names here, DIST_OTLP_ENDPOINT left unset */
  snprintf(live_endpoint, sizeof live_endpoint, "%s", ep);
  setenv("OTLP_TEST_USE_OTEL", "1", 1);
  setenv("OTEL_EXPORTER_OTLP_ENDPOINT", ep, 1);
  setenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/protobuf", 1);
  setenv("OTEL_EXPORTER_OTLP_COMPRESSION", "gzip", 1);
  setenv("OTEL_EXPORTER_OTLP_TRACES_HEADERS", "x-api-key=k1", 1);
  int rc = dist_test_ranks(3, job_rank, NULL, 60);
  receiver_stop(&r);
  cr_assert_eq(rc, 0, "%s", dist_test_report());
  sqlite3 *db = tq_merge(dir, "otlpjob", NULL);
  cr_assert(db);
  cr_assert_eq(tq_int(db, "SELECT count(*) FROM events WHERE kind='otlp_export' AND"
                          " status = 0 AND message LIKE '%% 0 dropped;%%'"), 3);
  int n = count_prefix(out, "meta-");
  cr_assert(n >= 3, "%d requests", n);
  for (int k = 0; k < n; k++) {
    json_t *m = load_json(out, "meta", k);
    cr_assert_str_eq(json_string_value(json_object_get(m, "type")), "application/x-protobuf");
    cr_assert_str_eq(json_string_value(json_object_get(m, "encoding")), "gzip");
    cr_assert_str_eq(json_string_value(json_object_get(json_object_get(m, "headers"),
                                                       "x-api-key")), "k1");
    json_decref(m);
  }
  json_decref(check_received(db, out));
  sqlite3_close(db);
}

Test(tracer_otlp, otel_sdk_disabled_timeouts_and_bad_values_are_said, .timeout = 290) {
  char why[256];
  if (!have_otlp_types(why, sizeof why))
    cr_skip_test("OTLP receiver unavailable: %s", why);
  clear_otel_env();
  make_trace();
  char out[400], url[128];
  fresh_dir(out, sizeof out, "stall");
  receiver r;
  receiver_start(&r, "hang", out);
  snprintf(url, sizeof url, "--otlp http://127.0.0.1:%d", r.port);
  const char *msg;
  /* OTEL_SDK_DISABLED: nothing sent, and said */
  setenv("OTEL_SDK_DISABLED", "TRUE", 1);
  int st = export_with(url, &msg);
  cr_assert_eq(st, 1, "%s", msg);
  cr_assert(strstr(msg, "OTEL_SDK_DISABLED=true: no spans are sent to http://127.0.0.1:"), "%s",
            msg);
  cr_assert_eq(count_prefix(out, "meta-"), 0, "a request went out");
  unsetenv("OTEL_SDK_DISABLED");
  /* OTEL_EXPORTER_OTLP_TIMEOUT (ms) bounds a collector that never answers */
  setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "300", 1);
  int64_t t0 = now_ms();
  st = export_with(url, &msg);
  int64_t took = now_ms() - t0;
  receiver_stop(&r);
  cr_assert_eq(st, 1, "%s", msg);
  cr_assert(strstr(msg, "Timeout") || strstr(msg, "timed out"), "%s", msg);
  cr_assert(took < 5000, "the 300 ms timeout took %lld ms", (long long)took);
  cr_assert_eq(count_prefix(out, "meta-"), 1, "the request reached the collector");
  /* values that cannot be used: named, with what is accepted */
  static const struct {
    const char *var, *value, *says;
  } bads[] = {
      {"OTEL_EXPORTER_OTLP_PROTOCOL", "grpc", "OTEL_EXPORTER_OTLP_PROTOCOL=grpc: libdist sends "
                                              "OTLP over HTTP only"},
      {"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/xml", "'http/xml': http/protobuf or http/json"},
      {"OTEL_EXPORTER_OTLP_COMPRESSION", "zstd", "OTEL_EXPORTER_OTLP_COMPRESSION='zstd': gzip or none"},
      {"OTEL_EXPORTER_OTLP_HEADERS", "novalue", "'novalue' is not key=value"},
      {"OTEL_EXPORTER_OTLP_HEADERS", "a=%zz", "a broken %XX escape"},
      {"OTEL_EXPORTER_OTLP_TIMEOUT", "soon", "OTEL_EXPORTER_OTLP_TIMEOUT='soon': a number of "
                                             "milliseconds"},
      {"OTEL_RESOURCE_ATTRIBUTES", "k", "OTEL_RESOURCE_ATTRIBUTES='k': 'k' is not key=value"},
  };
  for (size_t i = 0; i < sizeof bads / sizeof *bads; i++) {
    clear_otel_env();
    setenv(bads[i].var, bads[i].value, 1);
    st = export_with("--otlp http://127.0.0.1:9", &msg);
    cr_assert_eq(st, 1, "%s=%s: exit %d %s", bads[i].var, bads[i].value, st, msg);
    cr_assert(strstr(msg, bads[i].says), "%s=%s: want '%s' in: %s", bads[i].var, bads[i].value,
              bads[i].says, msg);
  }
  clear_otel_env();
  st = export_with("--otlp-env", &msg);
  cr_assert_eq(st, 1, "%s", msg);
  cr_assert(strstr(msg, "no OTLP endpoint: give one, or set OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"),
            "%s", msg);
}
