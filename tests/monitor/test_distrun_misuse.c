/* ctest: labels=multiproc,verdicts timeout=600 cost=90 */
/* test_distrun_misuse.c - a misused call is the verdict, at its own line,
 * not a call before it or one after it (build/bin/misuse_testprog,
 * prog_misuse.c, under distrun; distrun's final report and `distview
 * diagnose --json` agree):
 *  - a collective on a group the rank destroyed (the dead handle is
 *    refused, the rank exits on the error): "its last call was refused",
 *    that call and its line, not the last call that completed before it;
 *  - at DIST_DEBUG=OFF, a collective on a group the rank is not a member
 *    of (a no-op, as in torch) before the desync it causes: that call and
 *    its line (the wrong group passed), as the checking layer says at
 *    DETAIL, not the next call, which only meets the partner's;
 *  - at OFF, broadcast_bytes with another src on one rank: the user's
 *    BROADCAST_BYTES at its line, in the report's words too, not the
 *    size exchange it runs as (a BROADCAST of an int64) nor the next call
 *    its deferred check failed. */
#include "../examples/mesh_verdict.h"

/* The line of tests/monitor/prog_misuse.c that holds marker. */
static int prog_line(const char *marker) {
  int n = dist_test_source_line("tests/monitor/prog_misuse.c", marker);
  cr_assert(n > 0, "no '%s' in prog_misuse.c", marker);
  return n;
}

/* Runs `misuse_testprog mode culprit` on ranks ranks at debug. */
static void run_mode(const char *debug, const char *transport, const char *ranks,
                     const char *mode, const char *culprit, mesh_run *r) {
  const char *job[] = {dist_test_bin("misuse_testprog"), mode, culprit, NULL};
  job_run_argv(debug, "DIST_TIMEOUT=6", transport, ranks, job, r);
}

/* distrun's summary line (the last "distrun: exit status" line). */
static const char *summary_line(const mesh_run *r, char *buf, size_t len) {
  const char *at = r->report ? r->report : "";
  snprintf(buf, len, "%.*s", (int)strcspn(at, "\n"), at);
  return buf;
}

/* The value of the verdict's "site" in distview's JSON. */
static void json_site(const char *json, char *out, size_t cap) {
  const char *at = strstr(json, "\"site\":\"");
  out[0] = '\0';
  if (!at)
    return;
  at += strlen("\"site\":\"");
  size_t n = strcspn(at, "\"");
  snprintf(out, cap, "%.*s", (int)(n < cap ? n : cap - 1), at);
}

/* distview's verdict names op #seq (seq 0: any) at prog_misuse.c:line
 * ("fn (prog_misuse.c:42)", or the checking layer's "prog_misuse.c:42 in
 * fn()"). */
static void expect_json_call(const mesh_run *r, const char *op, int seq, int line) {
  char want_op[64], want_seq[32], want_site[64], site[256];
  snprintf(want_op, sizeof want_op, "\"op\":\"%s\"", op);
  snprintf(want_seq, sizeof want_seq, "\"seq\":%d,", seq);
  snprintf(want_site, sizeof want_site, "prog_misuse.c:%d", line);
  json_site(r->json, site, sizeof site);
  const char *at = strstr(site, want_site);
  char after = at ? at[strlen(want_site)] : 'x';
  cr_expect(strstr(r->json, want_op) && (!seq || strstr(r->json, want_seq)) && at &&
                (after == ')' || after == ' '),
            "distview's verdict is not %s #%d at %s (site '%s'): %s", op, seq, want_site, site,
            r->json);
}

static void expect_destroyed_named(const char *debug) {
  static mesh_run r;
  run_mode(debug, NULL, "2", "destroyed", "1", &r);
  mesh_expect_verdict(&r, 12, "died", 1);
  int line = prog_line("the planted call on a dead handle");
  char want[200], sum[2048];
  snprintf(want, sizeof want, " (prog_misuse.c:%d): all_reduce: group 1 (g1) is not a live "
           "process group: it was destroyed already", line);
  summary_line(&r, sum, sizeof sum);
  cr_expect(strstr(sum, "; its last call was refused: group 1 (g1) ALL_REDUCE #2, called from ") &&
                strstr(sum, want),
            "%s: not the refused call at line %d:\n%s", debug, line, r.err);
  cr_expect(!strstr(sum, "last completed") && !strstr(sum, "last operation in the trace"),
            "%s: an earlier call named:\n%s", debug, sum);
  expect_json_call(&r, "ALL_REDUCE", 2, line);
}

Test(monitor_distrun_misuse, a_call_on_a_destroyed_group_is_named_as_refused_at_its_line,
     .timeout = 150) {
  expect_destroyed_named("DIST_DEBUG=OFF");
  expect_destroyed_named("DIST_DEBUG=DETAIL");
}

/* Rank 1 passes the group of ranks 2 and 3 to its all_reduce (a no-op:
 * it is not a member), then broadcasts on its own group, where rank 0
 * all_reduces: at OFF the engine sees only the broadcast, and the
 * verdict still names the all_reduce at its line, the wrong group passed,
 * over either transport; at DETAIL as the checking layer always did. */
static void expect_non_member_named(const char *debug, const char *transport) {
  static mesh_run r;
  run_mode(debug, transport, "4", "nonmember", "1", &r);
  mesh_expect_verdict(&r, 10, "desync", 1);
  int line = prog_line("the planted wrong group");
  char want[96];
  snprintf(want, sizeof want, "prog_misuse.c:%d", line);
  cr_expect(mesh_says(&r, "\n  rank 1 called ALL_REDUCE on a group it is not a member of just "
                          "before (it did nothing, as in torch), called from ") &&
                mesh_says(&r, want),
            "%s %s: the report does not name the call at %s:\n%s", debug,
            transport ? transport : "shm", want, r.report);
  expect_json_call(&r, "ALL_REDUCE", 1, line);
}

Test(monitor_distrun_misuse, a_collective_on_a_group_the_rank_is_not_in_is_named_at_OFF,
     .timeout = 200) {
  expect_non_member_named("DIST_DEBUG=OFF", NULL);
  expect_non_member_named("DIST_DEBUG=OFF", "DIST_TRANSPORT=tcp");
  expect_non_member_named("DIST_DEBUG=DETAIL", NULL);
}

/* Rank 2 names itself the src of a broadcast_bytes from rank 0, at OFF:
 * the shared-memory engine's deferred check fails the next call (the
 * all_reduce) and names the earlier one; both are the user's calls, and
 * the verdict is the BROADCAST_BYTES at its line, in distrun's summary
 * line and in distview. Over TCP the report's words are the user's call
 * too. */
Test(monitor_distrun_misuse, a_broadcast_bytes_with_another_src_is_that_call_at_OFF,
     .timeout = 150) {
  static mesh_run r;
  run_mode("DIST_DEBUG=OFF", NULL, "4", "bytesrc", "2", &r);
  mesh_expect_verdict(&r, 10, "desync", 2);
  int line = prog_line("the planted src");
  char want[160], sum[2048];
  snprintf(want, sizeof want, "; the culprit: rank 2 in group 0 (default) at BROADCAST_BYTES #1: "
           "root differs, called from ");
  summary_line(&r, sum, sizeof sum);
  char at[64];
  snprintf(at, sizeof at, "(prog_misuse.c:%d)", line);
  cr_expect(strstr(sum, want) && strstr(sum, at), "no '%s...%s' in:\n%s", want, at, r.err);
  cr_expect(mesh_says(&r, " not run: BROADCAST_BYTES #1 (an earlier call): ") &&
                mesh_says(&r, "\n  rank 2: BROADCAST_BYTES (run as BROADCAST int64[1] root 2) "
                              "(8 bytes)  <- root differs"),
            "the report does not name the user's call:\n%s", r.report);
  cr_expect(!mesh_says(&r, ": BROADCAST int64[1]") && !mesh_says(&r, "BROADCAST #1"),
            "the report names the size exchange:\n%s", r.report);
  expect_json_call(&r, "BROADCAST_BYTES", 1, line);
  mesh_expect_agreement(&r);

  static mesh_run t;
  run_mode("DIST_DEBUG=OFF", "DIST_TRANSPORT=tcp", "4", "bytesrc", "2", &t);
  cr_expect_eq(t.status, 10, "over tcp: distrun exited %d:\n%s", t.status, t.err);
  cr_expect(mesh_says(&t, "BROADCAST_BYTES #1: ranks disagree on the root") &&
                mesh_says(&t, ": BROADCAST_BYTES (run as BROADCAST uint8[16] root 2)") &&
                !mesh_says(&t, "BROADCAST #1"),
            "over tcp the report does not name the user's call:\n%s", t.report);
  cr_expect(strstr(t.json, "\"op\":\"BROADCAST_BYTES\"") && strstr(t.json, "\"seq\":1,"),
            "over tcp distview's verdict is not BROADCAST_BYTES #1: %s", t.json);
}
