/* ctest: labels=unit timeout=60 */
/* test_model.c - the model over a trace store: the header (job, ranks,
 * groups, progress per member), the pages the panes fetch, events and
 * search; and every bad file a user may hand it (missing, empty, not
 * SQLite, not a trace, newer schema, truncated, corrupt) refused with a
 * sentence that says which, never a crash. */
#include <criterion/criterion.h>

#include <fcntl.h>
#include <sqlite3.h>
#include <sys/stat.h>

#include "vw_test.h"

static void write_file(const char *path, const void *data, size_t n) {
  FILE *f = fopen(path, "wb");
  cr_assert_not_null(f, "create %s", path);
  if (n)
    cr_assert_eq(fwrite(data, 1, n, f), n, "write");
  fclose(f);
}

static void expect_refused(const char *path, const char *words) {
  vw_model *m = (vw_model *)1;
  char err[512] = "";
  cr_assert_neq(vw_model_open(path, &m, err, sizeof err), 0, "%s opened", path);
  cr_assert_null(m, "no model on failure");
  cr_assert(strstr(err, words), "message for %s: '%s' lacks '%s'", path, err, words);
  cr_assert(strstr(err, path) || !*path, "message names the file: %s", err);
}

Test(viewer_model, missing_file_is_refused_by_name, .timeout = 10) {
  expect_refused(vwt_path("nope.db"), "No such file or directory");
}

Test(viewer_model, empty_file_is_refused, .timeout = 10) {
  const char *p = vwt_path("empty.db");
  write_file(p, "", 0);
  expect_refused(p, "empty file (0 bytes), not a trace store");
}

Test(viewer_model, non_sqlite_file_is_refused, .timeout = 10) {
  const char *p = vwt_path("notes.txt");
  const char text[] = "these are my notes, not a database\n";
  write_file(p, text, sizeof text - 1);
  expect_refused(p, "not a SQLite database, so not a trace store");
}

Test(viewer_model, sqlite_without_trace_tables_is_refused, .timeout = 10) {
  const char *p = vwt_path("other.db");
  sqlite3 *db;
  cr_assert_eq(sqlite3_open(p, &db), SQLITE_OK, "open");
  sqlite3_exec(db, "CREATE TABLE t (x); INSERT INTO t VALUES (1)", NULL, NULL, NULL);
  sqlite3_close(db);
  expect_refused(p, "not a libdist trace store (no meta table)");
}

Test(viewer_model, newer_schema_version_is_refused_naming_both, .timeout = 10) {
  const char *p = vwt_path("v3.db");
  sqlite3 *db = fx_create(p, "job-v3", 2, 3);
  fx_finish(db, 0, 1);
  expect_refused(p, "written with trace schema version 3; this distview reads version 2");
}

Test(viewer_model, truncated_trace_is_refused, .timeout = 10) {
  const char *p = vwt_path("cut.db");
  fx_story_hang(p);
  struct stat st;
  cr_assert_eq(stat(p, &st), 0, "stat");
  cr_assert_eq(truncate(p, st.st_size / 2), 0, "truncate");
  expect_refused(p, "truncated (");
  cr_assert_eq(truncate(p, 50), 0, "truncate to less than a header");
  expect_refused(p, "shorter than a SQLite header");
}

Test(viewer_model, corrupt_pages_give_an_error_not_a_crash, .timeout = 10) {
  const char *p = vwt_path("corrupt.db");
  fx_story_hang(p);
  /* garbage over every page but the first: the header still looks fine */
  int fd = open(p, O_WRONLY);
  cr_assert(fd >= 0, "open");
  struct stat st;
  fstat(fd, &st);
  char junk[4096];
  memset(junk, 0xA5, sizeof junk);
  for (off_t off = 4096; off < st.st_size; off += (off_t)sizeof junk)
    cr_assert_eq(pwrite(fd, junk, sizeof junk, off), (ssize_t)sizeof junk, "pwrite");
  close(fd);
  vw_model *m = NULL;
  char err[512] = "";
  int rc = vw_model_open(p, &m, err, sizeof err);
  if (rc == 0) {   // SQLite may only notice on a later page
    vw_diag d;
    rc = vw_diagnose(m, true, &d);
    snprintf(err, sizeof err, "%s", m->err);
    if (rc == 0)
      vw_diag_free(&d);
    vw_model_close(m);
  }
  cr_assert_neq(rc, 0, "a corrupt trace is an error");
  cr_assert(strstr(err, "corrupt") || strstr(err, "malformed") || strstr(err, "not a"),
            "message: %s", err);
}

Test(viewer_model, job_directory_without_readable_rank_files_is_refused, .timeout = 10) {
  const char *dir = vwt_path("job-empty");
  cr_assert_eq(mkdir(dir, 0700), 0, "mkdir");
  expect_refused(dir, "no rank file could be read (no rank-*.db in it)");
  char bad[300];
  snprintf(bad, sizeof bad, "%s/rank-0.db", dir);
  write_file(bad, "junk", 4);
  expect_refused(dir, "rank-0.db: not a trace database");
}

/* --- a good trace ------------------------------------------------------------------- */

static vw_model *open_hang(void) {
  const char *p = vwt_path("hang.db");
  fx_story_hang(p);
  vw_model *m;
  char err[512];
  cr_assert_eq(vw_model_open(p, &m, err, sizeof err), 0, "%s", err);
  return m;
}

Test(viewer_model, header_reads_job_ranks_groups_and_progress, .timeout = 10) {
  vw_model *m = open_hang();
  cr_assert_str_eq(m->job.job_id, "job-hang", "job id");
  cr_assert_str_eq(m->job.kind, "merged", "kind");
  cr_assert_eq(m->job.world_size, 4, "world");
  cr_assert_eq(m->job.nranks, 4, "ranks");
  cr_assert_str_eq(m->job.ranks[1].end_state, "lost", "rank 1 lost");
  cr_assert(m->indexed, "merged file has op_by_coll");
  cr_assert_eq(m->job.ngroups, 2, "groups");
  const vw_group *g = vw_model_group(m, 0);
  cr_assert_eq(g->size, 4, "group 0 size");
  cr_assert_eq(g->max_seq, 21, "max seq");
  int64_t want_last[] = {21, 20, 21, 21}, want_done[] = {20, 20, 20, 20};
  for (int k = 0; k < 4; k++) {
    cr_assert_eq(g->members[k], k, "member");
    cr_assert_eq(g->last_seq[k], want_last[k], "last seq of rank %d", k);
    cr_assert_eq(g->last_done[k], want_done[k], "last done of rank %d", k);
  }
  const vw_group *p = vw_model_group(m, 1);
  cr_assert_str_eq(p->name, "pairs", "name");
  cr_assert_eq(p->size, 2, "pairs size");
  cr_assert_eq(m->job.t1 - m->job.t0, fx_t(80, 0) - fx_t(0, 0), "span");
  cr_assert_eq(m->job.n_events, 2, "events");
  vw_model_close(m);
}

Test(viewer_model, matrix_page_holds_each_cell_state, .timeout = 10) {
  vw_model *m = open_hang();
  int ranks[] = {0, 1, 2, 3};
  vw_matrix_page pg;
  cr_assert_eq(vw_model_matrix(m, 0, ranks, 4, 19, 5, NULL, &pg), 0, "page");
  /* seqs 19..23: done, done, then in flight or never entered, then nothing */
  uint8_t want[4][5] = {{VW_ST_DONE, VW_ST_DONE, VW_ST_RUN, VW_ST_NONE, VW_ST_NONE},
                        {VW_ST_DONE, VW_ST_DONE, VW_ST_NONE, VW_ST_NONE, VW_ST_NONE},
                        {VW_ST_DONE, VW_ST_DONE, VW_ST_RUN, VW_ST_NONE, VW_ST_NONE},
                        {VW_ST_DONE, VW_ST_DONE, VW_ST_RUN, VW_ST_NONE, VW_ST_NONE}};
  for (int r = 0; r < 4; r++)
    for (int k = 0; k < 5; k++)
      cr_assert_eq(pg.cells[r * 5 + k], want[r][k], "rank %d seq %d", r, 19 + k);
  cr_assert_eq(pg.last_seq[1], 20, "rank 1 last");
  vw_matrix_page_free(&pg);
  vw_filter f = {.group = -1, .rank = -1, .op = "broad"};
  cr_assert_eq(vw_model_matrix(m, 0, ranks, 4, 19, 2, &f, &pg), 0, "filtered page");
  cr_assert_eq(pg.cells[0], VW_ST_MASKED, "#19 ALL_REDUCE hidden by op=broad");
  cr_assert_eq(pg.cells[1], VW_ST_DONE, "#20 BROADCAST shown");
  vw_matrix_page_free(&pg);
  vw_model_close(m);
}

Test(viewer_model, collective_and_rank_window, .timeout = 10) {
  vw_model *m = open_hang();
  vw_op ops[8];
  int n;
  cr_assert_eq(vw_model_collective(m, 0, 21, ops, 8, &n), 0, "collective");
  cr_assert_eq(n, 3, "three ranks entered #21");
  cr_assert_eq(ops[0].rank, 0, "by rank");
  cr_assert_eq(ops[1].rank, 2, "by rank");
  cr_assert_str_eq(ops[1].state, "started", "state");
  cr_assert_eq(ops[1].t_end, -1, "no end");
  cr_assert_str_eq(ops[1].shape, "[4,1024]", "shape");
  /* rank 0 in [#10, #12): #10 and #11 of group 0 (#9 ended before the window) */
  cr_assert_eq(vw_model_rank_ops(m, 0, fx_t(10, 0), fx_t(12, 0), 100, ops, 8, &n), 0, "window");
  cr_assert_eq(n, 2, "ops in the window: %d", n);
  cr_assert_eq(ops[0].seq, 10, "first");
  cr_assert_eq(ops[1].seq, 11, "second");
  /* a window that starts inside #21 (still running) finds it */
  cr_assert_eq(vw_model_rank_ops(m, 0, fx_t(50, 0), fx_t(51, 0), 100, ops, 8, &n), 0, "window");
  cr_assert_eq(n, 1, "the blocked call overlaps every later window");
  cr_assert_eq(ops[0].seq, 21, "#21");
  /* a window denser than the screen: one call per column, spread over it */
  cr_assert_eq(vw_model_rank_ops(m, 2, fx_t(1, 0), fx_t(21, 0), 4, ops, 8, &n), 0, "sampled");
  cr_assert_eq(n, 4, "one per column: %d", n);
  cr_assert_eq(ops[0].seq, 1, "column 0 starts at #1");
  cr_assert_eq(ops[1].seq, 6, "column 1 at #6 (%lld)", (long long)ops[1].seq);
  cr_assert_eq(ops[3].seq, 16, "column 3 at #16 (%lld)", (long long)ops[3].seq);
  vw_model_close(m);
}

Test(viewer_model, events_page_and_search, .timeout = 10) {
  vw_model *m = open_hang();
  vw_event ev[4];
  int n;
  int64_t total;
  cr_assert_eq(vw_model_events(m, NULL, 0, ev, 4, &n, &total), 0, "events");
  cr_assert_eq(total, 2, "total");
  cr_assert_str_eq(ev[0].kind, "log", "by time");
  cr_assert_str_eq(ev[1].kind, "peer_lost", "by time");
  cr_assert_eq(ev[1].seq, 21, "seq");
  vw_events_free(ev, n);
  vw_filter f = {.group = -1, .rank = 2};
  cr_assert_eq(vw_model_events(m, &f, 0, ev, 4, &n, &total), 0, "filtered");
  cr_assert_eq(total, 1, "rank 2's events");
  vw_events_free(ev, n);
  int64_t at;
  cr_assert_eq(vw_model_search_event(m, NULL, -1, 1, "lost", &at), 0, "search");
  cr_assert_eq(at, 1, "peer_lost is the second event");
  int64_t seq;
  cr_assert_eq(vw_model_search_op(m, 0, 0, 1, "BROADCAST", &seq), 0, "op search");
  cr_assert_eq(seq, 20, "#20 is the broadcast");
  cr_assert_eq(vw_model_search_op(m, 0, 21, -1, "started", &seq), 0, "back");
  cr_assert_eq(seq, -1, "nothing started before #21");
  vw_model_close(m);
}

Test(viewer_model, reads_a_file_the_job_is_still_writing, .timeout = 10) {
  /* a rank file mid-run: no indexes, no job span yet, WAL mode */
  const char *p = vwt_path("rank-0.db");
  fx_story_ok(p);
  sqlite3 *db;
  cr_assert_eq(sqlite3_open(p, &db), SQLITE_OK, "open");
  sqlite3_exec(db, "PRAGMA journal_mode = WAL; DROP INDEX op_by_coll; DROP INDEX op_by_rank;"
               "UPDATE job SET started_ns = NULL, ended_ns = NULL;"
               "UPDATE meta SET value = 'rank' WHERE key = 'kind'", NULL, NULL, NULL);
  vw_model *m;
  char err[512];
  cr_assert_eq(vw_model_open(p, &m, err, sizeof err), 0, "%s", err);
  cr_assert(!m->indexed, "no index");
  cr_assert_str_eq(m->job.kind, "rank", "kind");
  cr_assert_eq(m->job.t0, fx_t(1, 0), "span from the rows");
  cr_assert_eq(m->job.t1, fx_t(31, 3) + 500000, "to the last end");
  /* the writer commits more while we read */
  sqlite3_exec(db, "INSERT INTO events VALUES (0, NULL, NULL, 'log', 5, 0, NULL, 'late')", NULL,
               NULL, NULL);
  cr_assert_eq(vw_model_reload(m), 0, "reload: %s", m->err);
  cr_assert_eq(m->job.n_events, 1, "the new event is seen");
  vw_model_close(m);
  sqlite3_close(db);
}

Test(viewer_model, collective_carries_each_ranks_gpu_event_when_the_trace_has_them, .timeout = 10) {
  const char *p = vwt_path("gpu.db");
  fx_story_gpu(p);
  char err[512];
  vw_model *m;
  cr_assert_eq(vw_model_open(p, &m, err, sizeof err), 0, "%s", err);
  cr_assert(m->has_gpu, "the trace has gpu rows");
  vw_op ops[4];
  int n;
  cr_assert_eq(vw_model_collective(m, 0, 4, ops, 4, &n), 0, "%s", m->err);
  cr_assert_eq(n, 2);
  cr_assert_eq(ops[0].gpu_start - ops[0].t_enq, 20000, "GPU start on the job clock");
  cr_assert_eq(ops[0].gpu_ns, 200000);
  cr_assert_eq(ops[1].gpu_start, -1, "rank 1 has no gpu event for #4");
  cr_assert_eq(ops[1].gpu_ns, -1);
  /* the same seq in another group is another operation */
  cr_assert_eq(vw_model_collective(m, 1, 2, ops, 4, &n), 0, "%s", m->err);
  cr_assert_eq(ops[1].gpu_ns, 32000, "group 1 #2 of rank 1");
  cr_assert_eq(vw_model_collective(m, 2, 1, ops, 4, &n), 0, "%s", m->err);
  cr_assert_eq(ops[0].gpu_ns, -1, "a CPU barrier");
  vw_model_close(m);
  /* a trace without gpu rows: none, and no lookup */
  p = vwt_path("ok.db");
  fx_story_ok(p);
  cr_assert_eq(vw_model_open(p, &m, err, sizeof err), 0, "%s", err);
  cr_assert(!m->has_gpu);
  cr_assert_eq(vw_model_collective(m, 0, 1, ops, 4, &n), 0, "%s", m->err);
  cr_assert(n == 4 && ops[0].gpu_ns == -1 && ops[3].gpu_start == -1);
  vw_model_close(m);
}
