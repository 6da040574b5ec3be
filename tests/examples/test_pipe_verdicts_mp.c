/* ctest: labels=multiproc,verdicts timeout=300 */
/* One verdict on a pipeline job: pipe_train on 8 ranks (examples/
 * pipe_train.c: two 1F1B pipelines of 4 stages over isend/irecv pairs and
 * batch_isend_irecv, an all_reduce on each stage's dp group). The bugs a
 * pipeline holds: a receive whose size differs from the send, a send to
 * the wrong stage (a deadlock through three ranks, of which one made the
 * odd call), a stage that returns before its last backward. Each blames
 * rank 5 in distrun's status, its report and distview's --json alike, at
 * the call's line. */
#include "mesh_verdict.h"

static void pipe_job(const char *bug, mesh_run *r) {
  job_run("pipe_train", "DIST_DEBUG=DETAIL", bug, 5, r);
}

/* "exchange (pipe_train.c:N)" for the line holding marker. */
static void site_at(const char *marker, char *site, size_t len) {
  snprintf(site, len, "\"site\":\"exchange (pipe_train.c:%d)\"",
           example_line("pipe_train.c", marker));
}

/* Rank 5 receives its forward into 8 elements, rank 4 sends 16. Either
 * side may find it first; the verdict is rank 5's receive (the sends and
 * receives of the steps before matched at 16), at its batch's line. */
Test(examples_pipe, a_receive_of_another_size_names_the_receiver_at_its_line,
     .timeout = 120) {
  static mesh_run r;
  pipe_job("recvcount", &r);
  mesh_expect_verdict(&r, 10, "desync", 5);
  cr_expect(mesh_says(&r, "ranks disagree on the size") &&
                mesh_says(&r, "float32[8] from rank 4 (32 bytes)  <- size differs"),
            "%s", r.err);
  char site[96];
  site_at("the batched exchange", site, sizeof site);
  cr_expect(strstr(r.json, "\"group_name\":\"pp\"") &&
                strstr(r.json, "\"op\":\"BATCH_P2P\"") && strstr(r.json, site),
            "distview's verdict is not rank 5's batch at %s: %s", site, r.json);
  /* the transport's report is on the failed rows alone (no events row):
   * distview's own analysis reads it there, not a later lost peer */
  cr_expect(strstr(r.json, "\"agrees\":true"), "distview's own analysis disagrees: %s", r.json);
}

/* Rank 5 sends its forward to rank 7 (two stages on): rank 6 waits for
 * that forward, rank 7 waits to send its backward to rank 6, rank 5 waits
 * for rank 7 to take a message it never expects: a cycle of 5 -> 7 -> 6
 * -> 5. The odd call is rank 5's, a first send to rank 7 in a pipeline
 * whose other pairs have all matched before: the verdict names rank 5
 * alone, not the cycle. */
Test(examples_pipe, a_send_to_the_wrong_stage_names_the_sender_not_the_cycle,
     .timeout = 120) {
  static mesh_run r;
  pipe_job("wrongpeer", &r);
  mesh_expect_verdict(&r, 11, "hang", 5);
  /* rank 7 is in its send to rank 6 or, that taken, in its next receive
   * from it: the report describes what it found */
  cr_expect(mesh_says(&r, "it sends to rank 7 for the first time, which sends to rank 6 as "
                          "before (does it send to the wrong peer?)") ||
                mesh_says(&r, "it sends to rank 7 for the first time, which receives from rank 6 "
                              "as before (does it send to the wrong peer?)"),
            "%s", r.err);
  char site[96];
  site_at("dist_isend(&ts", site, sizeof site);
  cr_expect(strstr(r.json, "\"group_name\":\"pp\"") && strstr(r.json, "\"op\":\"SEND\"") &&
                strstr(r.json, site),
            "distview's verdict is not rank 5's send at %s: %s", site, r.json);
  cr_expect(strstr(r.json, "\"agrees\":true"), "distview's own analysis disagrees: %s", r.json);
}

/* Rank 5 returns in the cool-down, before its last backward: an early
 * exit naming it, not rank 4 or 6, which wait for it, nor rank 1, whose
 * dp all_reduce then finds it gone. */
Test(examples_pipe, a_stage_that_returns_before_its_last_backward_is_an_early_exit,
     .timeout = 120) {
  static mesh_run r;
  pipe_job("exitcool", &r);
  mesh_expect_verdict(&r, 12, "early_exit", 5);
  cr_expect(mesh_says(&r, "rank 5 (pid ") &&
                mesh_says(&r, "ended first, with exit code 0, while other ranks still needed it"),
            "%s", r.err);
  cr_expect(strstr(r.json, "\"group_name\":\"pp\""), "not in the pp group: %s", r.json);
  /* rank 1's "rank 5 left the group" desync follows from the exit, which
   * the monitors saw (exit code 0): distview's own analysis says a death */
  cr_expect(strstr(r.json, "\"agrees\":true"), "distview's own analysis disagrees: %s", r.json);
}

/* The same at DIST_DEBUG=OFF, where the monitor alone sees it: its first
 * diagnosis of a lost peer names rank 5, which left with exit code 0; the
 * later ones name the ranks that failed after it (distview's own analysis
 * takes the first). */
Test(examples_pipe, at_OFF_the_early_return_is_named_by_distview_too, .timeout = 120) {
  static mesh_run r;
  job_run("pipe_train", "DIST_DEBUG=OFF", "exitcool", 5, &r);
  mesh_expect_verdict(&r, 12, "early_exit", 5);
  cr_expect(strstr(r.json, "\"agrees\":true"), "distview's own analysis disagrees: %s", r.json);
}
