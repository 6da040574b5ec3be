/* prog_threads.c - the rank program of test_monitor_threads_mp.c: two
 * ranks, each with two threads, each thread driving its own group (ga,
 * gb: both over ranks 0 and 1), as a program with a communication thread
 * beside its training loop does. Public API only, linked with libdist.
 *
 *   prog_threads crossed   rank 0's first thread all_reduces on ga at once
 *                          and its second on gb after 3 s of compute; rank
 *                          1 the other way round. For those 3 s each rank
 *                          has a thread blocked in a group the other has
 *                          not entered (a wait-for cycle in the records),
 *                          yet the computing threads come: exits 0.
 *   prog_threads asleep    the same, the second threads sleeping the 3 s
 *                          (usleep: a data loader's back-off) instead of
 *                          computing, after an all_reduce of their own on
 *                          gc (a thread that called the library before
 *                          may call it again when it wakes): exits 0.
 *   prog_threads stuck     rank 0 all_reduces on ga, rank 1 on gb, while
 *                          their second threads idle (a logger waiting on
 *                          a condition variable): a deadlock to prove
 *                          before the timeout, as with one thread. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <dist/dist.h>

static int rank;
static dist_pg *groups[3]; /* ga gb gc */
static const char *mode;
static pthread_mutex_t idle_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t idle_cv = PTHREAD_COND_INITIALIZER;
static bool idle_done;

static void check(const char *what, int rc) {
  if (rc != DIST_OK) {
    fprintf(stderr, "rank %d: %s failed: %s\n", rank, what, dist_errmsg(rc, NULL));
    exit(1);
  }
}

/* A compute loop the optimiser keeps, for s seconds. */
static void compute(double s) {
  struct timespec t0, t;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  volatile uint64_t x = 1;
  do {
    for (int i = 0; i < 100000; i++)
      x = x * 6364136223846793005ULL + 1;
    clock_gettime(CLOCK_MONOTONIC, &t);
  } while ((double)(t.tv_sec - t0.tv_sec) + (double)(t.tv_nsec - t0.tv_nsec) / 1e9 < s);
}

static void all_reduce(int g) {
  float x = 1;
  dist_tensor t = dist_tensor_1d(&x, DIST_FLOAT32, 1);
  check("all_reduce", dist_all_reduce(&t, DIST_SUM, groups[g], NULL));
}

/* The second thread: crossed computes (asleep sleeps), then calls the
 * group its rank's first thread does not; stuck idles until the end. */
static void *second(void *arg) {
  (void)arg;
  if (!strcmp(mode, "crossed") || !strcmp(mode, "asleep")) {
    if (!strcmp(mode, "asleep")) {
      all_reduce(2);
      usleep(3000000);
    }
    else
      compute(3.0);
    all_reduce(rank == 0 ? 1 : 0);
    return NULL;
  }
  pthread_mutex_lock(&idle_mu);
  while (!idle_done)
    pthread_cond_wait(&idle_cv, &idle_mu);
  pthread_mutex_unlock(&idle_mu);
  return NULL;
}

int main(int argc, char **argv) {
  mode = argc > 1 ? argv[1] : "crossed";
  check("init", dist_init_process_group(NULL));
  rank = dist_get_rank(NULL);
  const char *names[3] = {"ga", "gb", "gc"};
  for (int i = 0; i < 3; i++)
    check("new_group", dist_new_group(NULL, 0, &(dist_group_opts){.desc = names[i]}, &groups[i]));
  pthread_t th;
  if (pthread_create(&th, NULL, second, NULL) != 0)
    return 2;
  all_reduce(rank == 0 ? 0 : 1);
  pthread_mutex_lock(&idle_mu);
  idle_done = true;
  pthread_cond_signal(&idle_cv);
  pthread_mutex_unlock(&idle_mu);
  pthread_join(th, NULL);
  check("barrier", dist_barrier(NULL, NULL));
  dist_destroy_process_group(NULL);
  return 0;
}
