/* ctest: labels=unit timeout=120 */
/* The hash store: the whole operation set, and many threads at once. */
#include "store_cases.h"

static dist_store *make(void) {
  dist_store *s;
  OK(dist_store_hash_create(&s));
  return s;
}

static void unmake(void) {}

STORE_CASES(store_hash, make, unmake)

typedef struct hammer_arg {
  dist_store *s;
  int id;
} hammer_arg;

static void *hammer(void *arg) {
  hammer_arg *a = arg;
  char key[32];
  for (int i = 0; i < 500; i++) {
    snprintf(key, sizeof key, "t%d_%d", a->id, i);
    if (dist_store_set(a->s, key, key, strlen(key)) != DIST_OK ||
        dist_store_add(a->s, "total", 1, NULL) != DIST_OK)
      return (void *)1;
  }
  /* Everyone waits for everyone: exercises wake-ups across threads. */
  snprintf(key, sizeof key, "t%d_499", (a->id + 1) % 8);
  void *v;
  if (dist_store_get(a->s, key, &v, NULL) != DIST_OK)
    return (void *)1;
  dist_free(v);
  return NULL;
}

Test(store_hash, eight_threads_with_clones_keep_every_update, .timeout = 30) {
  dist_store *s = make();
  pthread_t t[8];
  hammer_arg a[8];
  for (int i = 0; i < 8; i++) {
    a[i].id = i;
    OK(dist_store_clone(s, &a[i].s));
    pthread_create(&t[i], NULL, hammer, &a[i]);
  }
  for (int i = 0; i < 8; i++) {
    void *r;
    pthread_join(t[i], &r);
    cr_assert_null(r, "thread %d failed: %s", i, dist_store_errmsg(a[i].s));
    dist_store_destroy(a[i].s);
  }
  expect_value(s, "total", "4000", 4);
  int64_t n;
  OK(dist_store_num_keys(s, &n));
  cr_assert_eq(n, 8 * 500 + 1);
  dist_store_destroy(s);
}

Test(store_hash, many_waiters_on_one_key_all_wake, .timeout = 20) {
  dist_store *s = make();
  later_op op = {NULL, 100, "go", false};
  pthread_t t = start_later(s, &op);
  const char *k = "go";
  OK(dist_store_wait(s, &k, 1, 5000));
  end_later(t, &op);
  dist_store_destroy(s);
}
