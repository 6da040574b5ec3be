/* ctest: labels=multiproc timeout=120 */
/* The Chrome export's arrows on a point-to-point ring (4 ranks; each round
 * every rank sends to the next and receives from the previous, even ranks
 * sending first, then an all_reduce): every point-to-point flow starts on
 * a SEND slice and ends on the RECV slice of the rank it sent to, which
 * received from the sender; one flow per send; no flow chains a SEND with
 * a RECV because they share a sequence number; and each collective's flow
 * ties that collective only. Asserted on the parsed JSON (jansson). */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mp.h"
#include "trace_util.h"
#include "tmpdir.h"

#define RANKS 4
#define ROUNDS 3

static char dir[256];

static int ring_rank(const dist_test_ctx *ctx) {
  setenv("DIST_TRACE", dir, 1);
  setenv("DIST_JOB_ID", "ringjob", 1);
  CHECK_OK(ctx, dist_tracer_register());
  CHECK_OK(ctx, dist_test_init_pg(ctx, NULL));
  int next = (ctx->rank + 1) % RANKS, prev = (ctx->rank + RANKS - 1) % RANKS;
  float out[8] = {0}, in[8];
  dist_tensor o = dist_tensor_1d(out, DIST_FLOAT32, 8), i = dist_tensor_1d(in, DIST_FLOAT32, 8);
  for (int r = 0; r < ROUNDS; r++) {
    if (ctx->rank % 2 == 0) {  // even ranks send first: no cycle of blocked sends
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

/* The X slice of (pid, tid) that starts at ts: where a flow binds. */
static json_t *slice_at(json_t *evs, int pid, int tid, double ts) {
  size_t i;
  json_t *e;
  json_array_foreach(evs, i, e) {
    const char *ph = json_string_value(json_object_get(e, "ph"));
    if (ph && !strcmp(ph, "X") && json_integer_value(json_object_get(e, "pid")) == pid &&
        json_integer_value(json_object_get(e, "tid")) == tid &&
        json_number_value(json_object_get(e, "ts")) == ts)
      return e;
  }
  return NULL;
}

typedef struct end {
  int pid, seq;
  const char *op;
  int pair_seq, peer;  /* point to point; 0 and -1 otherwise */
} end;

/* A flow event's slice: its rank, seq and op. */
static end bound(json_t *evs, json_t *fl) {
  int pid = (int)json_integer_value(json_object_get(fl, "pid"));
  int tid = (int)json_integer_value(json_object_get(fl, "tid"));
  json_t *x = slice_at(evs, pid, tid, json_number_value(json_object_get(fl, "ts")));
  cr_assert_not_null(x, "a flow on rank %d at %.3f binds to no slice", pid,
                     json_number_value(json_object_get(fl, "ts")));
  json_t *args = json_object_get(x, "args");
  json_t *peer = json_object_get(args, "peer");
  return (end){pid, (int)json_integer_value(json_object_get(args, "seq")),
               json_string_value(json_object_get(args, "op")),
               (int)json_integer_value(json_object_get(args, "pair_seq")),
               peer ? (int)json_integer_value(peer) : -1};
}

Test(tracer_chrome_p2p, every_flow_goes_from_a_send_to_its_receive, .timeout = 100) {
  snprintf(dir, sizeof dir, "/tmp/dist-tracering-XXXXXX");
  cr_assert(dist_test_mkdtemp(dir));
  cr_assert_eq(dist_test_ranks(RANKS, ring_rank, NULL, 60), 0, "%s", dist_test_report());
  sqlite3 *db = tq_merge(dir, "ringjob", NULL);
  cr_assert(db);
  char db_path[300], out[300], err[256];
  snprintf(db_path, sizeof db_path, "%s/trace.db", dir);
  snprintf(out, sizeof out, "%s/chrome.json", dir);
  dist_trace *tr;
  cr_assert_eq(dist_trace_open(db_path, &tr, err, sizeof err), DIST_OK, "%s", err);
  cr_assert_eq(dist_trace_export_chrome(tr, out, err, sizeof err), DIST_OK, "%s", err);
  dist_trace_close(tr);
  /* the premise: one (group, seq) holds a SEND on some ranks and a RECV on
   * others, which is what chaining by sequence number got wrong */
  cr_assert(tq_int(db, "SELECT count(*) FROM (SELECT 1 FROM operations WHERE op IN"
                       " ('SEND','RECV') GROUP BY group_id, seq HAVING count(DISTINCT op) > 1)") > 0);
  json_error_t jerr;
  json_t *root = json_load_file(out, 0, &jerr);
  cr_assert(root, "%s: line %d: %s", out, jerr.line, jerr.text);
  json_t *evs = json_object_get(root, "traceEvents");
  /* flows by id: [id] -> start and finish */
  json_t *starts = json_object(), *finishes = json_object();
  size_t i;
  json_t *e;
  json_array_foreach(evs, i, e) {
    const char *ph = json_string_value(json_object_get(e, "ph"));
    if (!ph || !strchr("stf", ph[0]) || ph[1])
      continue;
    char id[32];
    snprintf(id, sizeof id, "%lld", (long long)json_integer_value(json_object_get(e, "id")));
    if (ph[0] == 't') {  // a chain's middle: only collectives have them
      end m = bound(evs, e);
      cr_assert(strcmp(m.op, "SEND") && strcmp(m.op, "RECV"), "a %s #%d of rank %d is in a"
                " chain", m.op, m.seq, m.pid);
      continue;
    }
    json_t *set = ph[0] == 's' ? starts : finishes;
    cr_assert_null(json_object_get(set, id), "flow %s has two %s events", id, ph);
    json_object_set(set, id, e);
  }
  int sends = 0, colls = 0;
  const char *id;
  json_t *s;
  json_object_foreach(starts, id, s) {
    json_t *f = json_object_get(finishes, id);
    cr_assert_not_null(f, "flow %s never ends", id);
    end a = bound(evs, s), b = bound(evs, f);
    if (strcmp(a.op, "SEND") && strcmp(b.op, "RECV")) {
      cr_assert_str_eq(a.op, b.op, "a collective's flow ties one operation");
      cr_assert_eq(a.seq, b.seq);
      colls++;
      continue;
    }
    cr_assert_str_eq(a.op, "SEND", "flow %s starts on rank %d's %s #%d", id, a.pid, a.op, a.seq);
    cr_assert_str_eq(b.op, "RECV", "flow %s ends on rank %d's %s #%d", id, b.pid, b.op, b.seq);
    /* collectives and point-to-point operations are numbered apart */
    cr_assert_eq(tq_int(db, "SELECT root FROM operations WHERE rank = %d AND group_id = 0 AND"
                            " p2p AND seq = %d", a.pid, a.seq), b.pid, "the send went to rank %d",
                 b.pid);
    cr_assert_eq(tq_int(db, "SELECT root FROM operations WHERE rank = %d AND group_id = 0 AND"
                            " p2p AND seq = %d", b.pid, b.seq), a.pid, "the receive was from rank %d",
                 a.pid);
    cr_assert_eq(b.pid, (a.pid + 1) % RANKS, "the ring's next rank");
    /* the n-th send from A to B is the n-th receive at B from A */
    cr_assert(a.pair_seq >= 1 && a.pair_seq <= ROUNDS, "pair #%d", a.pair_seq);
    cr_assert_eq(a.pair_seq, b.pair_seq, "SEND #%d to rank %d ends on RECV #%d from rank %d",
                 a.pair_seq, b.pid, b.pair_seq, a.pid);
    cr_assert_eq(a.peer, b.pid);
    cr_assert_eq(b.peer, a.pid);
    cr_assert_eq(a.seq, 2 * a.pair_seq - (a.pid % 2 == 0), "rank %d's SEND #%d", a.pid, a.seq);
    sends++;
  }
  cr_assert_eq(json_object_size(finishes), json_object_size(starts), "every end has a start");
  cr_assert_eq(sends, RANKS * ROUNDS, "one flow per send");
  cr_assert_eq(colls, tq_int(db, "SELECT count(DISTINCT seq) FROM operations WHERE NOT p2p"), "one flow per collective (the all_reduces"
               " and dist_test_finish's barrier)");
  json_decref(starts);
  json_decref(finishes);
  json_decref(root);
  sqlite3_close(db);
}
