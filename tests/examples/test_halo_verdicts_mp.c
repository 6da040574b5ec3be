/* ctest: labels=multiproc,verdicts timeout=300 cost=15 */
/* One verdict on a stencil job (halo_train on 8 ranks, a 2 x 4 dp x tp
 * mesh): hangs through dist_batch_isend_irecv, where a rank left a half
 * out of its batch or sent it astray and went on into a tp collective
 * that closes the cycle, and a tp all_reduce called on the dp group that
 * the dp partner's own all_reduce took silently (same shape), and a loss
 * broadcast whose root one rank names otherwise, and a rank that, for
 * once, receives (sends) its boundary first, as its dp partner does.
 * distrun's status and
 * distview's --json agree, and blame the planted rank alone, not the
 * neighbour blocked in its batch, the tp peers waiting, nor the root. */
#include "mesh_verdict.h"

static void halo(const char *debug, const char *bug, mesh_run *r) {
  job_run("halo_train", debug, bug, 2, r);
}

Test(examples_halo, a_receive_left_out_of_the_batch_names_the_rank_that_left_it_out,
     .timeout = 120) {
  static mesh_run r;
  halo("DIST_DEBUG=OFF", "omitrecv", &r);
  mesh_expect_verdict(&r, 11, "hang", 2);
  cr_expect(mesh_says(&r, "rank 3 waits in group 0 (default) BATCH_P2P #2") &&
                mesh_says(&r, "for the receive that matches its send #2 to rank 2, and rank 2 "
                              "issued only 1 receive from rank 3 there before it went on"),
            "%s", r.err);
  cr_expect(strstr(r.json, "\"group_name\":\"tp\"") && strstr(r.json, "\"op\":\"ALL_REDUCE\""),
            "not rank 2's tp all_reduce: %s", r.json);
}

Test(examples_halo, a_send_left_out_of_the_batch_names_the_rank_that_left_it_out,
     .timeout = 120) {
  static mesh_run r;
  halo("DIST_DEBUG=DETAIL", "omitsend", &r);
  mesh_expect_verdict(&r, 11, "hang", 2);
  cr_expect(mesh_says(&r, "for the send that matches its receive #2 from rank 2, and rank 2 "
                          "issued only 1 send to rank 3 there before it went on"),
            "%s", r.err);
}

Test(examples_halo, a_halo_sent_to_the_wrong_neighbour_names_the_sender, .timeout = 120) {
  static mesh_run r;
  halo("DIST_DEBUG=DETAIL", "wrongpeer", &r);
  mesh_expect_verdict(&r, 11, "hang", 2);
  cr_expect(mesh_says(&r, "it sends to rank 4, which does not take from it, while rank 3 "
                          "waits to receive from it (does it send to the wrong peer?)"),
            "%s", r.err);
  cr_expect(strstr(r.json, "\"op\":\"BATCH_P2P\""), "not rank 2's batch: %s", r.json);
}

Test(examples_halo, a_tp_all_reduce_called_on_the_dp_group_names_the_caller, .timeout = 120) {
  static mesh_run r;
  halo("DIST_DEBUG=DETAIL", "wrongdim", &r);
  mesh_expect_verdict(&r, 11, "hang", 2);
  cr_expect(mesh_says(&r, "the others wait for it in group 5 (tp) ALL_REDUCE #2, called from "
                          "main (halo_train.c:") &&
                mesh_says(&r, "while its last call from there went to group 3 (dp) ALL_REDUCE #2 "
                              "(did it call it on the wrong group?)"),
            "%s", r.err);
}

/* Rank 2 reads the loss from rank 1, the others from rank 0: the readers'
 * own check sees rank 0's descriptor and asks the ranks that posted the
 * step, who side with rank 0's root. */
Test(examples_halo, a_reader_naming_another_root_is_named_over_shared_memory, .timeout = 120) {
  static mesh_run r;
  halo("DIST_DEBUG=OFF", "root", &r);
  mesh_expect_verdict(&r, 10, "desync", 2);
  cr_expect(mesh_says(&r, "ranks disagree on the root") &&
                mesh_says(&r, "BROADCAST float32[2] root 1 (8 bytes)  <- root differs"),
            "%s", r.err);
}

/* Rank 0, the root, reads from rank 1 while the others read from it: over
 * TCP nobody sends, every member waits inside the broadcast, and the
 * monitor reads each one's root from its record. */
Test(examples_halo, a_root_that_reads_from_another_is_named_over_tcp, .timeout = 120) {
  static mesh_run r;
  job_run_env("halo_train", "DIST_DEBUG=OFF", "DIST_TRANSPORT=tcp", "root", 0, -1, &r);
  mesh_expect_verdict(&r, 11, "hang", 0);
  cr_expect(mesh_says(&r, "ranks disagree on the root of BROADCAST #2: ranks 1-7 wait with "
                          "root 0, rank 0 with another  <- root differs"),
            "%s", r.err);
}

/* Rank 2 broadcasts the loss as its own root: it sends and returns (a
 * small broadcast's root does not wait for its readers), the readers read
 * rank 0's. Its next broadcast, which it reads, settles the earlier one:
 * the others' descriptors side with rank 0's root. */
Test(examples_halo, a_rank_broadcasting_as_its_own_root_is_named_at_its_next_broadcast,
     .timeout = 120) {
  static mesh_run r;
  halo("DIST_DEBUG=OFF", "selfroot", &r);
  mesh_expect_verdict(&r, 10, "desync", 2);
  cr_expect(mesh_says(&r, "BROADCAST #3 not run: BROADCAST #2 (an earlier call)") &&
                mesh_says(&r, "BROADCAST float32[2] root 2 (8 bytes)  <- root differs"),
            "%s", r.err);
  /* The verdict names the broadcast it got wrong, with its line, not the
   * one that found it out. */
  cr_expect(strstr(r.json, "\"op\":\"BROADCAST\"") && strstr(r.json, "\"seq\":2,") &&
                strstr(r.json, "halo_train.c:"),
            "%s", r.json);
}

/* A send-send or receive-receive deadlock reads the same from both ranks'
 * records: the one named is the rank whose blocked call is the first it
 * made from that line on the group, while its partner calls as at every
 * earlier step. Rank 2 receives its boundary first (at OFF, over shared
 * memory); rank 6 sends first (at DETAIL, over TCP). */
Test(examples_halo, a_rank_that_receives_first_for_once_is_named_not_its_partner,
     .timeout = 120) {
  static mesh_run r;
  halo("DIST_DEBUG=OFF", "recvfirst", &r);
  mesh_expect_verdict(&r, 11, "hang", 2);
  cr_expect(mesh_says(&r, "rank 2, which is blocked in group 3 (dp) RECV #3 from rank 6, "
                          "called from main (halo_train.c:") &&
                mesh_says(&r, "it never called from there on group 3 before, while rank 6 "
                              "waits in group 3 (dp) RECV #3") &&
                mesh_says(&r, "(did it take a branch its earlier steps did not: receiving "
                              "first where they sent first?)"),
            "%s", r.err);
  cr_expect(strstr(r.json, "\"op\":\"RECV\"") && strstr(r.json, "\"group_name\":\"dp\""),
            "not rank 2's receive: %s", r.json);
}

Test(examples_halo, a_rank_that_sends_first_for_once_is_named_not_its_partner,
     .timeout = 120) {
  static mesh_run r;
  job_run_env("halo_train", "DIST_DEBUG=DETAIL", "DIST_TRANSPORT=tcp", "sendfirst", 6, -1, &r);
  mesh_expect_verdict(&r, 11, "hang", 6);
  cr_expect(mesh_says(&r, "it never called from there on group 3 before, while rank 2 "
                          "waits in group 3 (dp) SEND #3") &&
                mesh_says(&r, "sending first where they received first?"),
            "%s", r.err);
}
