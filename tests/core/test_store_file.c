/* ctest: labels=unit,multiproc timeout=180 */
/* The file store: the whole operation set, several processes on one file,
 * writers that die mid-write, and the last handle removing the file. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "mp.h"
#include "proc.h"
#include "store_cases.h"
#include "tmpdir.h"

static char dir[64], path[128];

static dist_store *make(void) {
  snprintf(dir, sizeof dir, "/tmp/dist-fs-XXXXXX");
  cr_assert_not_null(dist_test_mkdtemp(dir));
  snprintf(path, sizeof path, "%s/store", dir);
  dist_store *s;
  OK(dist_store_file_create(path, 1, &s));
  return s;
}

static void unmake(void) {
  unlink(path);
  rmdir(dir);
}

STORE_CASES(store_file, make, unmake)

static off_t file_size(const char *p) {
  struct stat st;
  return stat(p, &st) == 0 ? st.st_size : -1;
}

/* Appends raw bytes, as a writer that died after a partial write would
 * leave them (it held the lock, which died with it). */
static void append_raw(const void *b, size_t n) {
  int fd = open(path, O_WRONLY | O_APPEND);
  cr_assert(fd >= 0);
  cr_assert_eq(write(fd, b, n), (ssize_t)n);
  close(fd);
}

Test(store_file, a_torn_tail_is_ignored_by_readers_and_cut_by_the_next_writer,
     .timeout = 20) {
  dist_store *s = make();
  OK(dist_store_set(s, "before", "1", 1));
  off_t good = file_size(path);
  /* A record header promising 100 bytes of key, followed by only 10. */
  uint8_t torn[26] = {'D', 'C', 'E', 'R', 1, 0, 0, 0, 100, 0, 0, 0, 1, 0, 0, 0};
  append_raw(torn, sizeof torn);
  dist_store *other;
  OK(dist_store_file_create(path, -1, &other));
  expect_value(other, "before", "1", 1); /* the reader skips the tail */
  cr_assert_eq(file_size(path), good + (off_t)sizeof torn, "readers never truncate");
  OK(dist_store_set(other, "after", "2", 1)); /* a writer cuts it */
  expect_value(s, "after", "2", 1);
  expect_value(s, "before", "1", 1);
  dist_store_destroy(other);
  dist_store_destroy(s);
  unmake();
}

Test(store_file, a_corrupt_record_tail_is_cut_by_the_next_writer, .timeout = 20) {
  dist_store *s = make();
  OK(dist_store_add(s, "n", 1, NULL));
  off_t good = file_size(path);
  uint8_t junk[64];
  for (size_t i = 0; i < sizeof junk; i++)
    junk[i] = (uint8_t)(i * 37 + 11);
  append_raw(junk, sizeof junk);
  int64_t r;
  OK(dist_store_add(s, "n", 1, &r));
  cr_assert_eq(r, 2);
  cr_assert(file_size(path) < good + (off_t)sizeof junk, "junk was cut");
  dist_store_destroy(s);
  unmake();
}

Test(store_file, a_file_that_is_not_a_store_is_DIST_E_STORE, .timeout = 10) {
  dist_store_destroy(make()); /* world_size 1: removes the file again */
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  cr_assert_eq(write(fd, "hello, this is not a store", 26), 26);
  close(fd);
  dist_store *s = NULL;
  cr_assert_eq(dist_store_file_create(path, -1, &s), DIST_E_STORE);
  cr_assert_null(s);
  cr_assert(strstr(dist_last_errmsg(), "not a libdist file store"), "%s",
            dist_last_errmsg());
  unmake();
}

Test(store_file, a_missing_directory_is_DIST_E_SYS_naming_the_path, .timeout = 10) {
  dist_store *s = NULL;
  cr_assert_eq(dist_store_file_create("/nonexistent-dir/x/store", -1, &s), DIST_E_SYS);
  cr_assert(strstr(dist_last_errmsg(), "/nonexistent-dir/x/store"));
  cr_assert_eq(dist_store_file_create("/tmp/x", 0, &s), DIST_E_INVAL);
}

Test(store_file, the_last_of_world_size_handles_removes_the_file, .timeout = 10) {
  dist_store *a = make(), *b, *c;
  dist_store_destroy(a); /* world_size 1: gone */
  cr_assert_eq(file_size(path), -1);
  OK(dist_store_file_create(path, 2, &a));
  OK(dist_store_file_create(path, 2, &b));
  OK(dist_store_clone(a, &c)); /* clones do not count */
  dist_store_destroy(c);
  dist_store_destroy(a);
  cr_assert(file_size(path) > 0, "one of two finished: the file stays");
  dist_store_destroy(b);
  cr_assert_eq(file_size(path), -1, "both finished: removed");
  unmake();
}

/* --- several processes ------------------------------------------------------ */

static int adders(const dist_test_ctx *ctx) {
  dist_store *s;
  CHECK_OK(ctx, dist_test_file_store(ctx, &s));
  for (int i = 0; i < 100; i++)
    CHECK_OK(ctx, dist_store_add(s, "count", 1, NULL));
  char key[32];
  snprintf(key, sizeof key, "done%d", ctx->rank);
  CHECK_OK(ctx, dist_store_set(s, key, "1", 1));
  const char *all[] = {"done0", "done1", "done2", "done3"};
  CHECK_OK(ctx, dist_store_wait(s, all, 4, 20000));
  void *v;
  CHECK_OK(ctx, dist_store_get(s, "count", &v, NULL));
  CHECK(ctx, strcmp(v, "400") == 0, "count is %s", (char *)v);
  dist_free(v);
  dist_store_destroy(s);
  return 0;
}

Test(store_file, four_processes_share_counters_and_keys, .timeout = 60) {
  cr_assert_eq(dist_test_ranks(4, adders, NULL, 50), 0, "%s", dist_test_report());
}

/* Rank 1 writes 1 MiB values in a loop and publishes its pid; rank 0
 * SIGKILLs it once three writes have completed (the loop spends nearly all
 * its time inside a set, so the kill lands mid-write), waits until it is
 * gone, then uses the store and finds every completed write intact. The
 * kill follows the writes, not the clock: a slow machine (a sanitizer
 * build beside other tests) may take longer than any fixed delay to
 * finish its first write. */
static int writer_killed(const dist_test_ctx *ctx) {
  dist_store *s;
  CHECK_OK(ctx, dist_store_file_create(ctx->arg, -1, &s));
  if (ctx->rank == 1) {
    char pid[16];
    snprintf(pid, sizeof pid, "%d", (int)getpid());
    CHECK_OK(ctx, dist_store_set(s, "writer_pid", pid, strlen(pid) + 1));
    static char big[1 << 20];
    for (int i = 0;; i++) {
      memset(big, 'a' + i % 26, sizeof big);
      char key[32];
      snprintf(key, sizeof key, "big%d", i % 8);
      CHECK_OK(ctx, dist_store_set(s, key, big, sizeof big));
      CHECK_OK(ctx, dist_store_add(s, "writes", 1, NULL));
      if (i == 2)
        CHECK_OK(ctx, dist_store_set(s, "three_written", "1", 1));
    }
  }
  const char *k = "three_written";
  CHECK_OK(ctx, dist_store_wait(s, &k, 1, 30000));
  void *pid;
  CHECK_OK(ctx, dist_store_get(s, "writer_pid", &pid, NULL));
  pid_t writer = (pid_t)atoi(pid);
  dist_free(pid);
  CHECK(ctx, kill(writer, SIGKILL) == 0, "kill %d: %s", (int)writer, strerror(errno));
  CHECK(ctx, dist_test_wait_gone(writer, 10000), "the writer %d still runs", (int)writer);
  CHECK_OK(ctx, dist_store_set(s, "survivor", "yes", 3));
  int64_t w;
  CHECK_OK(ctx, dist_store_add(s, "writes", 0, &w));
  CHECK(ctx, w > 0, "writes=%lld", (long long)w);
  for (int i = 0; i < 8 && i < w; i++) {
    char key[32];
    snprintf(key, sizeof key, "big%d", i);
    void *v;
    size_t l;
    CHECK_OK(ctx, dist_store_get(s, key, &v, &l));
    CHECK(ctx, l == 1u << 20, "big%d has %zu bytes", i, l);
    for (size_t j = 1; j < l; j++)
      CHECK(ctx, ((char *)v)[j] == ((char *)v)[0], "big%d is torn at %zu", i, j);
    dist_free(v);
  }
  dist_store_destroy(s);
  return 0;
}

Test(store_file, a_writer_killed_mid_write_leaves_a_usable_store, .timeout = 60) {
  char d[] = "/tmp/dist-fs-XXXXXX", p[128];
  cr_assert_not_null(dist_test_mkdtemp(d));
  snprintf(p, sizeof p, "%s/store", d);
  dist_test_opts o = {2, writer_killed, p, 50, -1, 0};
  dist_test_result r;
  dist_test_run(&o, &r); /* reports rank 1's SIGKILL, which rank 0 sent */
  cr_assert_eq(r.exit_code[0], 0, "%s", r.report);
  cr_assert_eq(r.signal[1], SIGKILL, "the writer was killed: %s", r.report);
  /* And a fresh process can still open and read it. */
  dist_store *s;
  OK(dist_store_file_create(p, -1, &s));
  expect_value(s, "survivor", "yes", 3);
  dist_store_destroy(s);
  unlink(p);
  rmdir(d);
}
