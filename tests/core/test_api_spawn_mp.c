/* ctest: labels=multiproc timeout=120 */
/* dist_spawn (torch.multiprocessing.spawn): real forked ranks that join a
 * default group through the store the parent hosts; the first rank to fail
 * is named with its exit code or signal and the others are ended;
 * join=false returns a handle whose join times out while ranks run;
 * dist_is_launched tells a spawned rank from a plain process. */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <dist/dist.h>

static int train(int rank, int world, void *arg) {
  (void)arg;
  if (!dist_is_launched() || strcmp(dist_launcher(), "spawn") != 0)
    return 10;
  if (dist_init_process_group(NULL) != DIST_OK)
    return 11;
  if (dist_get_rank(NULL) != rank || dist_get_world_size(NULL) != world)
    return 12;
  int32_t v = rank + 1;
  dist_tensor t = dist_tensor_1d(&v, DIST_INT32, 1);
  if (dist_all_reduce(&t, DIST_SUM, NULL, NULL) != DIST_OK || v != world * (world + 1) / 2)
    return 13;
  /* Every rank sees the one job id the parent made. */
  const char *job = dist_get_job_id();
  dist_bytes mine = {(void *)job, strlen(job) + 1}, all[8];
  if (world > 8 || dist_all_gather_bytes(&mine, all, NULL) != DIST_OK)
    return 14;
  int bad = 0;
  for (int i = 0; i < world; i++) {
    bad |= strcmp(all[i].data, job) != 0;
    dist_free(all[i].data);
  }
  dist_destroy_process_group(NULL);
  return bad ? 15 : 0;
}

Test(core_api, spawn_runs_ranks_that_form_a_group, .timeout = 60) {
  unsetenv("DIST_LAUNCHER");
  cr_assert(!(dist_is_launched()));
  cr_assert_null(dist_launcher());
  dist_spawn_ctx *ctx = NULL;
  int rc = dist_spawn(train, NULL, 3, true, &ctx);
  cr_assert_eq(rc, DIST_OK, "%s: %s", dist_status_name(rc), dist_last_errmsg());
  cr_assert_not_null(ctx);
  cr_assert_eq(dist_spawn_failure(ctx, NULL, NULL, NULL), DIST_E_INVAL, "no rank failed");
  cr_assert_eq(strlen(dist_spawn_job_id(ctx)) > 0, 1);
  for (int r = 0; r < 3; r++)
    cr_assert_eq(dist_spawn_pid(ctx, r), 0, "rank %d not reaped", r);
  dist_spawn_free(ctx);
  cr_assert_eq(dist_spawn(train, NULL, 2, true, NULL), DIST_OK, "%s", dist_last_errmsg());
}

static int one_fails(int rank, int world, void *arg) {
  (void)world;
  (void)arg;
  if (rank == 1)
    return 3;
  for (;;)
    pause(); /* ended by the parent */
}

Test(core_api, spawn_names_the_rank_that_exited_and_ends_the_others, .timeout = 60) {
  dist_spawn_ctx *ctx = NULL;
  int rc = dist_spawn(one_fails, NULL, 3, true, &ctx);
  cr_assert_eq(rc, DIST_E_PEER_LOST, "%s", dist_status_name(rc));
  cr_assert(strstr(dist_last_errmsg(), "spawn: rank 1 exited with code 3"), "%s",
            dist_last_errmsg());
  int rank = -1, code = 0, sig = -1;
  cr_assert_eq(dist_spawn_failure(ctx, &rank, &code, &sig), DIST_OK);
  cr_assert(rank == 1 && code == 3 && sig == 0, "rank %d code %d signal %d", rank, code, sig);
  for (int r = 0; r < 3; r++)
    cr_assert_eq(dist_spawn_pid(ctx, r), 0, "rank %d left running", r);
  dist_spawn_free(ctx);
}

static int go_pipe[2];

static int killed_on_cue(int rank, int world, void *arg) {
  (void)world;
  (void)arg;
  if (rank == 2) {
    char c;
    if (read(go_pipe[0], &c, 1) == 1)
      raise(SIGKILL);
    return 20;
  }
  for (;;)
    pause();
}

Test(core_api, spawn_without_join_times_out_then_reports_a_signal, .timeout = 60) {
  cr_assert_eq(pipe(go_pipe), 0);
  dist_spawn_ctx *ctx = NULL;
  cr_assert_eq(dist_spawn(killed_on_cue, NULL, 3, false, &ctx), DIST_OK, "%s",
               dist_last_errmsg());
  cr_assert_eq(dist_spawn_join(ctx, 50), DIST_E_TIMEOUT, "ranks that wait ended");
  cr_assert(strstr(dist_last_errmsg(), "3 of 3 ranks still running"), "%s", dist_last_errmsg());
  cr_assert_gt(dist_spawn_pid(ctx, 2), 0);
  cr_assert_eq(write(go_pipe[1], "x", 1), 1);
  int rc = dist_spawn_join(ctx, -1);
  cr_assert_eq(rc, DIST_E_PEER_LOST, "%s", dist_status_name(rc));
  cr_assert(strstr(dist_last_errmsg(), "rank 2 was killed by signal 9 (SIGKILL)"), "%s",
            dist_last_errmsg());
  int rank = -1, code = 0, sig = 0;
  cr_assert_eq(dist_spawn_failure(ctx, &rank, &code, &sig), DIST_OK);
  cr_assert(rank == 2 && code == -1 && sig == SIGKILL, "rank %d code %d sig %d", rank, code,
            sig);
  dist_spawn_free(ctx);
}

Test(core_api, spawn_refuses_bad_arguments, .timeout = 30) {
  dist_spawn_ctx *ctx = (dist_spawn_ctx *)0x1;
  cr_assert_eq(dist_spawn(NULL, NULL, 2, true, NULL), DIST_E_INVAL);
  cr_assert_eq(dist_spawn(train, NULL, 0, true, &ctx), DIST_E_INVAL);
  cr_assert_null(ctx);
  cr_assert_eq(dist_spawn(train, NULL, 2, false, NULL), DIST_E_INVAL, "no handle to return");
  cr_assert_eq(dist_spawn_join(NULL, 0), DIST_E_INVAL);
  cr_assert_eq(dist_spawn_pid(NULL, 0), -1);
  dist_spawn_free(NULL);
}
