/* ctest: labels=multiproc timeout=180 */
/* User-written stores (torch's Store subclasses) through the public header
 * only. "dir" is a socket-free store over a shared directory, written here
 * as a user would: one file per key, written whole and renamed into place,
 * read-modify-write under an flock, blocking reads that poll the directory
 * up to their timeout (as torch's FileStore polls its file). It fills only
 * the required slots and num_keys. Three real forked ranks initialise the
 * default group over it (rendezvous), run collectives on it and on a new
 * group (whose prefix store sits over it) and a monitored barrier (wait,
 * delete_key). A second user store delegates every slot to a hash store:
 * it has the extended API, the dir store has not (its extended calls fail
 * with DIST_E_NOTSUP and a message). Failures of a slot keep its message;
 * a slot without one, or with a bogus code, still gets a DIST_E_* and a
 * message; a store missing a required slot is refused. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "mp.h"
#include "tmpdir.h"

/* --- the dir store ------------------------------------------------------------- */

typedef struct dir_store {
  char dir[400];
} dir_store;

static const char *dir_of(dist_store *self) {
  return ((dir_store *)dist_store_user_data(self))->dir;
}

/* Keys may hold '/', so a file's name is the key in hex. */
static void key_path(dist_store *self, const char *key, char *out, size_t len) {
  int off = snprintf(out, len, "%s/k", dir_of(self));
  for (const unsigned char *p = (const unsigned char *)key; *p && off + 3 < (int)len; p++)
    off += snprintf(out + off, len - (size_t)off, "%02x", *p);
}

static int lock_dir(dist_store *self) {
  char p[512];
  snprintf(p, sizeof p, "%s/.lock", dir_of(self));
  int fd = open(p, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0 || flock(fd, LOCK_EX) != 0) {
    if (fd >= 0)
      close(fd);
    return -1;
  }
  return fd;
}

static void unlock_dir(int fd) {
  flock(fd, LOCK_UN);
  close(fd);
}

/* The value of key, malloc'd: 1 read, 0 absent, -1 error. */
static int read_key(dist_store *self, const char *key, void **val, size_t *len) {
  char p[512];
  key_path(self, key, p, sizeof p);
  FILE *f = fopen(p, "rb");
  if (!f)
    return errno == ENOENT ? 0 : -1;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  rewind(f);
  char *b = malloc((size_t)n + 1);
  size_t got = b ? fread(b, 1, (size_t)n, f) : 0;
  fclose(f);
  if (!b || got != (size_t)n) {
    free(b);
    return -1;
  }
  b[got] = '\0'; /* for add's strtoll */
  *val = b;
  *len = got;
  return 1;
}

/* Writes the whole value to a temporary file, then renames it into place,
 * so a reader never sees half a value. */
static int write_key(dist_store *self, const char *key, const void *val, size_t len) {
  static unsigned seq;
  char p[512], tmp[512];
  key_path(self, key, p, sizeof p);
  snprintf(tmp, sizeof tmp, "%s/.tmp.%d.%u", dir_of(self), (int)getpid(), seq++);
  FILE *f = fopen(tmp, "wb");
  if (!f)
    return -1;
  bool ok = fwrite(val, 1, len, f) == len;
  ok = fclose(f) == 0 && ok;
  return ok && rename(tmp, p) == 0 ? 0 : -1;
}

static int fs_error(dist_store *self, const char *what, const char *key) {
  return dist_store_fail(self, DIST_E_SYS, "dir store %s: %s '%s': %s", dir_of(self), what,
                         key, strerror(errno));
}

static int d_set(dist_store *self, const char *key, const void *val, size_t len) {
  int l = lock_dir(self);
  int rc = l >= 0 && write_key(self, key, val, len) == 0 ? DIST_OK : fs_error(self, "set", key);
  if (l >= 0)
    unlock_dir(l);
  return rc;
}

static int64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void pause_1ms(void) {
  struct timespec ts = {0, 1000000};
  nanosleep(&ts, NULL);
}

static int d_get(dist_store *self, const char *key, int64_t timeout_ms, void **val,
                 size_t *len) {
  int64_t end = now_ms() + timeout_ms;
  for (;;) {
    int r = read_key(self, key, val, len);
    if (r > 0)
      return DIST_OK;
    if (r < 0)
      return fs_error(self, "get", key);
    if (now_ms() >= end)
      return dist_store_fail(self, DIST_E_TIMEOUT, "dir store: no key '%s' after %" PRId64
                             " ms", key, timeout_ms);
    pause_1ms(); /* the store's own polling, bounded by timeout_ms */
  }
}

static int d_add(dist_store *self, const char *key, int64_t delta, int64_t *result) {
  int l = lock_dir(self);
  if (l < 0)
    return fs_error(self, "add", key);
  void *v = NULL;
  size_t n = 0;
  int r = read_key(self, key, &v, &n);
  int rc = DIST_OK;
  char *end = NULL;
  int64_t cur = r > 0 ? strtoll((char *)v, &end, 10) : 0;
  if (r < 0)
    rc = fs_error(self, "add", key);
  else if (r > 0 && (n == 0 || *end))
    rc = dist_store_fail(self, DIST_E_INVAL, "dir store: add on '%s', which is not a number",
                         key);
  char buf[32];
  if (rc == DIST_OK) {
    *result = cur + delta;
    snprintf(buf, sizeof buf, "%" PRId64, *result);
    if (write_key(self, key, buf, strlen(buf)) != 0)
      rc = fs_error(self, "add", key);
  }
  free(v);
  unlock_dir(l);
  return rc;
}

static int d_compare_set(dist_store *self, const char *key, const void *exp, size_t elen,
                         const void *des, size_t dlen, void **res, size_t *rlen) {
  int l = lock_dir(self);
  if (l < 0)
    return fs_error(self, "compare_set", key);
  void *cur = NULL;
  size_t clen = 0;
  int r = read_key(self, key, &cur, &clen);
  int rc = DIST_OK;
  bool swap = (r == 0 && elen == 0) || (r > 0 && clen == elen && !memcmp(cur, exp, elen));
  const void *out = swap ? des : r > 0 ? cur : exp;
  size_t olen = swap ? dlen : r > 0 ? clen : elen;
  if (r < 0 || (swap && write_key(self, key, des, dlen) != 0))
    rc = fs_error(self, "compare_set", key);
  if (rc == DIST_OK && !(*res = malloc(olen + 1)))
    rc = dist_store_fail(self, DIST_E_NOMEM, "dir store: out of memory");
  if (rc == DIST_OK) {
    memcpy(*res, out, olen);
    *rlen = olen;
  }
  free(cur);
  unlock_dir(l);
  return rc;
}

static int d_check(dist_store *self, const char *const *keys, size_t n, bool *all) {
  *all = true;
  for (size_t i = 0; i < n; i++) {
    char p[512];
    key_path(self, keys[i], p, sizeof p);
    *all = *all && access(p, F_OK) == 0;
  }
  return DIST_OK;
}

static int d_wait(dist_store *self, const char *const *keys, size_t n, int64_t timeout_ms) {
  int64_t end = now_ms() + timeout_ms;
  bool all = false;
  while (d_check(self, keys, n, &all) == DIST_OK && !all) {
    if (now_ms() >= end)
      return DIST_E_TIMEOUT; /* no message: the library must give one */
    pause_1ms();
  }
  return DIST_OK;
}

static int d_delete_key(dist_store *self, const char *key, bool *deleted) {
  char p[512];
  key_path(self, key, p, sizeof p);
  int l = lock_dir(self);
  *deleted = l >= 0 && unlink(p) == 0;
  int rc = l < 0 || (!*deleted && errno != ENOENT) ? fs_error(self, "delete", key) : DIST_OK;
  if (l >= 0)
    unlock_dir(l);
  return rc;
}

static void d_destroy(void *user) { free(user); }

static const dist_store_user_ops dir_ops = {
    .kind = "dir",
    .set = d_set,
    .get = d_get,
    .add = d_add,
    .compare_set = d_compare_set,
    .wait = d_wait,
    .check = d_check,
    .delete_key = d_delete_key,
    .destroy = d_destroy,
};

static int dir_store_create(const char *dir, dist_store **out) {
  if (mkdir(dir, 0700) != 0 && errno != EEXIST)
    return DIST_E_SYS;
  dir_store *d = calloc(1, sizeof *d);
  if (!d)
    return DIST_E_NOMEM;
  snprintf(d->dir, sizeof d->dir, "%s", dir);
  return dist_store_user_create(&dir_ops, d, out);
}

/* --- real ranks over the dir store --------------------------------------------- */

static int dir_rank(const dist_test_ctx *ctx) {
  char dir[512];
  snprintf(dir, sizeof dir, "%s/kv", ctx->tmpdir);
  dist_store *st;
  CHECK_OK(ctx, dir_store_create(dir, &st));
  CHECK(ctx, !strcmp(dist_store_kind(st), "dir") && !dist_store_has_extended_api(st),
        "kind %s", dist_store_kind(st));
  dist_init_opts o = dist_init_opts_default();
  o.store = st;
  o.rank = ctx->rank;
  o.world_size = ctx->world;
  o.timeout_ms = 20000;
  CHECK_OK(ctx, dist_init_process_group(&o));
  CHECK(ctx, dist_get_default_store() == st, "the default group's store is not ours");
  int32_t v = ctx->rank + 1;
  dist_tensor t = dist_tensor_1d(&v, DIST_INT32, 1);
  CHECK_OK(ctx, dist_all_reduce(&t, DIST_SUM, NULL, NULL));
  CHECK(ctx, v == 6, "all_reduce over the dir store's group gave %d", v);
  const int pair[2] = {0, 2};
  dist_pg *g;
  CHECK_OK(ctx, dist_new_group(pair, 2, NULL, &g));
  if (g != DIST_GROUP_NON_MEMBER) {
    v = ctx->rank;
    CHECK_OK(ctx, dist_all_reduce(&t, DIST_SUM, g, NULL));
    CHECK(ctx, v == 2, "all_reduce on {0,2} gave %d", v);
  }
  CHECK_OK(ctx, dist_monitored_barrier(NULL, 20000, true));
  /* The rendezvous and the groups kept their keys as files there. */
  int files = 0;
  DIR *d = opendir(dir);
  CHECK(ctx, d, "cannot list %s", dir);
  for (struct dirent *e; (e = readdir(d));)
    files += e->d_name[0] == 'k';
  closedir(d);
  CHECK(ctx, files >= 2 * ctx->world, "only %d keys in the directory", files);
  int64_t keys = 0;
  CHECK(ctx, dist_store_num_keys(st, &keys) == DIST_E_NOTSUP, "num_keys is not implemented");
  CHECK_OK(ctx, dist_barrier(NULL, NULL));
  dist_destroy_process_group(NULL);
  dist_store_destroy(st);
  return 0;
}

Test(core_api, user_store_over_a_shared_directory_runs_a_job, .timeout = 100) {
  cr_assert_eq(dist_test_ranks(3, dir_rank, NULL, 80), 0, "%s", dist_test_report());
}

/* --- extended API, messages, bad input ------------------------------------------ */

static int expect(int rc, int want, const char *msg, const char *has) {
  cr_expect_eq(rc, want, "%s, want %s: %s", dist_status_name(rc), dist_status_name(want), msg);
  cr_expect(strstr(msg, has) != NULL, "message '%s' lacks '%s'", msg, has);
  return rc;
}

Test(core_api, user_store_without_extended_slots_says_so, .timeout = 30) {
  char tmpl[] = "/tmp/dist_userstore_XXXXXX";
  cr_assert_not_null(dist_test_mkdtemp(tmpl));
  dist_store *st, *pre;
  cr_assert_eq(dir_store_create(tmpl, &st), DIST_OK, "%s", dist_last_errmsg());
  cr_assert_eq(dist_store_prefix_create("p", st, DIST_STORE_BORROW, &pre), DIST_OK);
  cr_expect(!dist_store_has_extended_api(st));
  cr_expect(!dist_store_has_extended_api(pre), "a prefix answers for its store");
  const char *k[1] = {"a"};
  const void *vals[1] = {"x"};
  size_t lens[1] = {1};
  void *got[1];
  void *val = NULL;
  size_t n = 0;
  int64_t len = 0;
  expect(dist_store_append(st, "a", "x", 1), DIST_E_NOTSUP, dist_store_errmsg(st),
         "dir store does not implement append (no extended API)");
  expect(dist_store_multi_get(st, k, 1, got, lens), DIST_E_NOTSUP, dist_store_errmsg(st),
         "multi_get");
  expect(dist_store_multi_set(pre, k, vals, lens, 1), DIST_E_NOTSUP, dist_store_errmsg(pre),
         "multi_set");
  expect(dist_store_queue_push(st, "q", "x", 1), DIST_E_NOTSUP, dist_store_errmsg(st),
         "queue_push");
  expect(dist_store_queue_pop(st, "q", false, &val, &n), DIST_E_NOTSUP, dist_store_errmsg(st),
         "queue_pop");
  expect(dist_store_queue_len(st, "q", &len), DIST_E_NOTSUP, dist_store_errmsg(st),
         "queue_len");
  /* The basic slots work, through a prefix store too. */
  cr_assert_eq(dist_store_set(pre, "a", "hello", 5), DIST_OK, "%s", dist_store_errmsg(pre));
  cr_assert_eq(dist_store_get(st, "p/a", &val, &n), DIST_OK, "%s", dist_store_errmsg(st));
  cr_expect(n == 5 && !strcmp(val, "hello"), "got %zu bytes", n);
  dist_free(val);
  int64_t r = 0;
  cr_expect_eq(dist_store_add(pre, "n", 5, &r), DIST_OK);
  cr_expect_eq(dist_store_add(pre, "n", -2, &r), DIST_OK);
  cr_expect_eq(r, 3);
  /* A slot's own message is kept; one without a message gets one. */
  cr_assert_eq(dist_store_set_timeout(st, 30), DIST_OK);
  expect(dist_store_get(st, "absent", &val, &n), DIST_E_TIMEOUT, dist_store_errmsg(st),
         "dir store: no key 'absent' after 30 ms");
  cr_expect((val) == NULL);
  expect(dist_store_add(st, "p/a", 1, &r), DIST_E_INVAL, dist_store_errmsg(st),
         "not a number");
  const char *pa[1] = {"p/a"};
  expect(dist_store_wait(st, pa, 1, 0), DIST_OK, "", "");
  const char *missing[1] = {"nope"};
  expect(dist_store_wait(st, missing, 1, 20), DIST_E_TIMEOUT, dist_store_errmsg(st),
         "dir store: wait failed (DIST_E_TIMEOUT)");
  /* compare_set: torch's rule. */
  void *res = NULL;
  size_t rl = 0;
  cr_assert_eq(dist_store_compare_set(st, "c", "", 0, "one", 3, &res, &rl), DIST_OK);
  cr_expect(rl == 3 && !memcmp(res, "one", 3));
  dist_free(res);
  cr_assert_eq(dist_store_compare_set(st, "c", "zzz", 3, "two", 3, &res, &rl), DIST_OK);
  cr_expect(rl == 3 && !memcmp(res, "one", 3), "a wrong expected changes nothing");
  dist_free(res);
  /* A clone without a clone slot shares the user data. */
  dist_store *cl;
  cr_assert_eq(dist_store_clone(st, &cl), DIST_OK, "%s", dist_store_errmsg(st));
  cr_expect_eq(dist_store_user_data(cl), dist_store_user_data(st));
  bool all = false;
  const char *ck[2] = {"c", "p/a"};
  cr_expect_eq(dist_store_check(cl, ck, 2, &all), DIST_OK);
  cr_expect(all);
  dist_store_destroy(pre);
  dist_store_destroy(st);
  cr_expect_eq(dist_store_get(cl, "c", &val, &n), DIST_OK, "the clone outlives the original");
  dist_free(val);
  dist_store_destroy(cl);
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpl);
  cr_expect_eq(system(cmd), 0);
}

/* --- a user store with every slot: it delegates to a hash store ------------------ */

static dist_store *inner(dist_store *self) { return dist_store_user_data(self); }

/* Copies the inner store's failure onto self. */
static int pass(dist_store *self, int rc) {
  return rc == DIST_OK ? rc : dist_store_fail(self, rc, "inner: %s", dist_store_errmsg(inner(self)));
}

static int f_set(dist_store *s, const char *k, const void *v, size_t n) {
  return pass(s, dist_store_set(inner(s), k, v, n));
}
static int f_get(dist_store *s, const char *k, int64_t t, void **v, size_t *n) {
  dist_store_set_timeout(inner(s), t > 0 ? t : 1);
  return pass(s, dist_store_get(inner(s), k, v, n));
}
static int f_add(dist_store *s, const char *k, int64_t d, int64_t *r) {
  return pass(s, dist_store_add(inner(s), k, d, r));
}
static int f_cas(dist_store *s, const char *k, const void *e, size_t el, const void *d,
                 size_t dl, void **r, size_t *rl) {
  return pass(s, dist_store_compare_set(inner(s), k, e, el, d, dl, r, rl));
}
static int f_wait(dist_store *s, const char *const *k, size_t n, int64_t t) {
  return pass(s, dist_store_wait(inner(s), k, n, t));
}
static int f_check(dist_store *s, const char *const *k, size_t n, bool *a) {
  return pass(s, dist_store_check(inner(s), k, n, a));
}
static int f_del(dist_store *s, const char *k, bool *d) {
  return pass(s, dist_store_delete_key(inner(s), k, d));
}
static int f_num(dist_store *s, int64_t *n) { return pass(s, dist_store_num_keys(inner(s), n)); }
static int f_append(dist_store *s, const char *k, const void *v, size_t n) {
  return pass(s, dist_store_append(inner(s), k, v, n));
}
static int f_mget(dist_store *s, const char *const *k, size_t n, int64_t t, void **v,
                  size_t *l) {
  dist_store_set_timeout(inner(s), t > 0 ? t : 1);
  return pass(s, dist_store_multi_get(inner(s), k, n, v, l));
}
static int f_mset(dist_store *s, const char *const *k, const void *const *v, const size_t *l,
                  size_t n) {
  return pass(s, dist_store_multi_set(inner(s), k, v, l, n));
}
static int f_push(dist_store *s, const char *k, const void *v, size_t n) {
  return pass(s, dist_store_queue_push(inner(s), k, v, n));
}
static int f_pop(dist_store *s, const char *k, bool b, int64_t t, void **v, size_t *n) {
  dist_store_set_timeout(inner(s), t > 0 ? t : 1);
  return pass(s, dist_store_queue_pop(inner(s), k, b, v, n));
}
static int f_qlen(dist_store *s, const char *k, int64_t *n) {
  return pass(s, dist_store_queue_len(inner(s), k, n));
}
static int f_clone(dist_store *s, void **out) {
  dist_store *c;
  int rc = pass(s, dist_store_clone(inner(s), &c));
  *out = rc == DIST_OK ? c : NULL;
  return rc;
}
static int destroyed;
static void f_destroy(void *u) {
  destroyed++;
  dist_store_destroy(u);
}
static int f_bogus(dist_store *s, const char *k, bool *d) {
  (void)s, (void)k, (void)d;
  return 999;
}

static const dist_store_user_ops full_ops = {
    "hashwrap", f_set,    f_get,  f_add,  f_cas, f_wait, f_check, f_del,   f_num,
    f_append,   f_mget,   f_mset, f_push, f_pop, f_qlen, f_clone, f_destroy,
};

Test(core_api, user_store_with_every_slot_has_the_extended_api, .timeout = 30) {
  dist_store *h, *st, *cl;
  cr_assert_eq(dist_store_hash_create(&h), DIST_OK);
  destroyed = 0;
  cr_assert_eq(dist_store_user_create(&full_ops, h, &st), DIST_OK, "%s", dist_last_errmsg());
  cr_expect(dist_store_has_extended_api(st));
  cr_expect_str_eq(dist_store_kind(st), "hashwrap");
  const char *k[2] = {"a", "b"};
  const void *v[2] = {"1", "22"};
  size_t l[2] = {1, 2};
  cr_assert_eq(dist_store_multi_set(st, k, v, l, 2), DIST_OK, "%s", dist_store_errmsg(st));
  void *got[2];
  size_t gl[2];
  cr_assert_eq(dist_store_multi_get(st, k, 2, got, gl), DIST_OK, "%s", dist_store_errmsg(st));
  cr_expect(gl[0] == 1 && gl[1] == 2 && !strcmp(got[1], "22"));
  dist_free(got[0]);
  dist_free(got[1]);
  cr_assert_eq(dist_store_append(st, "a", "x", 1), DIST_OK);
  cr_assert_eq(dist_store_queue_push(st, "q", "m", 1), DIST_OK);
  int64_t n = 0;
  cr_assert_eq(dist_store_queue_len(st, "q", &n), DIST_OK);
  cr_expect_eq(n, 1);
  void *val;
  size_t vl;
  cr_assert_eq(dist_store_queue_pop(st, "q", true, &val, &vl), DIST_OK);
  cr_expect(vl == 1 && !strcmp(val, "m"));
  dist_free(val);
  cr_assert_eq(dist_store_num_keys(st, &n), DIST_OK);
  cr_expect(n >= 2);
  /* The clone slot gives the clone its own user data. */
  cr_assert_eq(dist_store_clone(st, &cl), DIST_OK, "%s", dist_store_errmsg(st));
  cr_expect_neq(dist_store_user_data(cl), dist_store_user_data(st));
  cr_assert_eq(dist_store_get(cl, "a", &val, &vl), DIST_OK);
  cr_expect(vl == 2 && !strcmp(val, "1x"), "the clone sees the same data");
  dist_free(val);
  /* The inner store's message reaches the caller through the slot's. */
  cr_assert_eq(dist_store_set_timeout(st, 20), DIST_OK);
  expect(dist_store_get(st, "absent", &val, &vl), DIST_E_TIMEOUT, dist_store_errmsg(st),
         "inner: get timed out after");
  dist_store_destroy(cl);
  dist_store_destroy(st);
  cr_expect_eq(destroyed, 2, "destroy ran for each user data");
  /* A bogus status from a slot becomes DIST_E_STORE with a message. */
  dist_store_user_ops bogus = full_ops;
  bogus.delete_key = f_bogus;
  cr_assert_eq(dist_store_hash_create(&h), DIST_OK);
  cr_assert_eq(dist_store_user_create(&bogus, h, &st), DIST_OK);
  expect(dist_store_delete_key(st, "a", NULL), DIST_E_STORE, dist_store_errmsg(st),
         "hashwrap store: delete_key returned 999, not a DIST_E_* code");
  dist_store_destroy(st);
}

Test(core_api, user_store_missing_a_required_slot_is_refused, .timeout = 30) {
  dist_store_user_ops ops = full_ops;
  ops.compare_set = NULL;
  dist_store *h, *st = (dist_store *)1;
  cr_assert_eq(dist_store_hash_create(&h), DIST_OK);
  destroyed = 0;
  expect(dist_store_user_create(&ops, h, &st), DIST_E_INVAL, dist_last_errmsg(),
         "the hashwrap store leaves the required slot compare_set NULL");
  cr_expect((st) == NULL);
  cr_expect_eq(destroyed, 1, "the user data is released on failure");
  expect(dist_store_user_create(NULL, NULL, &st), DIST_E_INVAL, dist_last_errmsg(),
         "ops is NULL");
  cr_expect((dist_store_user_data(NULL)) == NULL);
  cr_expect_eq(dist_store_fail(NULL, DIST_E_STORE, "x"), DIST_E_STORE);
  cr_expect(!dist_store_has_extended_api(NULL));
  cr_expect((dist_store_kind(NULL)) == NULL);
}
