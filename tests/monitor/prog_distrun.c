/* prog_distrun.c - the rank program test_distrun.c runs under distrun
 * (built as build/bin/distrun_testprog). The first argument picks what a
 * rank does:
 *   env              print what distrun told this rank (one line), exit 0
 *   torchenv         the same in torchrun's names (GROUP_RANK, ROLE_*,
 *                    TORCHELASTIC_*), one line, exit 0
 *   wait             print "ready pid=P", wait; SIGTERM prints "got SIGTERM"
 *                    and exits 0
 *   block            rendezvous (env://), print "ready pid=P", then block in
 *                    a store get that nobody answers (a rank busy in the
 *                    library); SIGTERM kills it
 *   exit R CODE      rank R exits with CODE once the others are ready (waiting
 *                    for SIGTERM); the others wait
 *   stubborn R CODE  rank R exits with CODE once the others are ready; the
 *                    others ignore SIGTERM and wait (distrun must SIGKILL them)
 *   watch R CODE     rendezvous; rank R exits with CODE; the others ignore
 *                    SIGTERM, wait for distrun's death notice in the store,
 *                    print "saw: <notice>" and exit 0
 *   demo             rendezvous; every rank sets a key and reads all others
 *   lines            two lines on stdout, one on stderr, then an unfinished
 *                    line, exit 0
 *   leave R          init the default group, barrier; rank R returns 0 at
 *                    once, the others all_reduce with it and exit 2 when
 *                    that fails (a rank that ends while others need it)
 *   leave-linger R CODE  as leave, but rank R exits with CODE and its last
 *                    exit handler (registered before init, so it runs after
 *                    the library's) closes every descriptor, so the others
 *                    see it gone over TCP at once, then lingers 1.5 s (a
 *                    slow teardown): its exit is reported long after theirs
 *   react R          rank R touches 512 MiB, then SIGKILLs itself; the others
 *                    hold a connection to it and exit 2 the moment it closes
 *                    (a peer-lost error), which is before its exit is
 *                    reported: the killed process closes its sockets first
 * Every mode ends by itself within 60 s (alarm), so nothing is left behind. */
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "job/rendezvous.h"

static int rank_env(void) {
  const char *r = getenv("RANK");
  return r ? atoi(r) : -1;
}

static const char *env_or(const char *name) {
  const char *v = getenv(name);
  return v ? v : "(unset)";
}

static int mode_env(void) {
  const char *tok = getenv("DIST_TOKEN");
  printf("env rank=%s world=%s local=%s lws=%s addr=%s port=%s job=%s agent=%s node=%s "
         "nnodes=%s launcher=%s token_len=%zu pid=%d\n",
         env_or("RANK"), env_or("WORLD_SIZE"), env_or("LOCAL_RANK"),
         env_or("LOCAL_WORLD_SIZE"), env_or("MASTER_ADDR"), env_or("MASTER_PORT"),
         env_or("DIST_JOB_ID"), env_or("DIST_USE_AGENT_STORE"), env_or("DIST_NODE_RANK"),
         env_or("DIST_NNODES"), env_or("DIST_LAUNCHER"), tok ? strlen(tok) : 0,
         (int)getpid());
  return 0;
}

/* torchrun's names for the rank's place (test_distrun_torchrun.c). */
static int mode_torchenv(void) {
  printf("torchenv rank=%s group_rank=%s role=%s role_rank=%s role_world=%s restart=%s "
         "dist_restart=%s max_restarts=%s run_id=%s job=%s lws=%s addr=%s port=%s\n",
         env_or("RANK"), env_or("GROUP_RANK"), env_or("ROLE_NAME"), env_or("ROLE_RANK"),
         env_or("ROLE_WORLD_SIZE"), env_or("TORCHELASTIC_RESTART_COUNT"),
         env_or("DIST_RESTART_COUNT"), env_or("TORCHELASTIC_MAX_RESTARTS"),
         env_or("TORCHELASTIC_RUN_ID"), env_or("DIST_JOB_ID"), env_or("LOCAL_WORLD_SIZE"),
         env_or("MASTER_ADDR"), env_or("MASTER_PORT"));
  return 0;
}

static void on_term(int sig) {
  (void)sig;
  static const char msg[] = "got SIGTERM\n";
  ssize_t w = write(1, msg, sizeof msg - 1);
  (void)w;
  _exit(0);
}

static _Noreturn void wait_forever(void) {
  printf("ready pid=%d\n", (int)getpid());
  fflush(stdout);
  for (;;)
    pause();
}


/* Readiness without sleeps: a waiting rank creates its marker file once its
 * signal disposition is set; the exiting rank waits for every marker (they
 * go with it). Named after the job, so concurrent tests never meet. */
static void marker(char *buf, size_t len, int rank) {
  snprintf(buf, len, "/tmp/distrun-ready-%s-%d", env_or("DIST_JOB_ID"), rank);
}

static void mark_ready(void) {
  char p[256];
  marker(p, sizeof p, rank_env());
  FILE *f = fopen(p, "w");
  if (f)
    fclose(f);
}

static void wait_others_ready(void) {
  int world = atoi(env_or("WORLD_SIZE")), me = rank_env();
  for (int r = 0; r < world; r++) {
    char p[256];
    marker(p, sizeof p, r);
    while (r != me && access(p, F_OK) != 0)
      usleep(2000); /* polls a condition; alarm() bounds the wait */
  }
  for (int r = 0; r < world; r++) {
    char p[256];
    marker(p, sizeof p, r);
    unlink(p);
  }
}

/* Waits for SIGTERM synchronously (blocked, then sigwait) rather than in a
 * handler: under ThreadSanitizer a handler runs only at the thread's next
 * intercepted call, which a rank parked in pause() may never make, so the
 * rank's "got SIGTERM" was lost and distrun SIGKILLed it. */
static _Noreturn void wait_for_sigterm(bool ready_marker) {
  sigset_t term;
  sigemptyset(&term);
  sigaddset(&term, SIGTERM);
  sigprocmask(SIG_BLOCK, &term, NULL);
  if (ready_marker)
    mark_ready();
  printf("ready pid=%d\n", (int)getpid());
  fflush(stdout);
  int sig = 0;
  while (sigwait(&term, &sig) != 0 || sig != SIGTERM) {
  }
  on_term(sig);
  _exit(0); /* not reached: on_term exits */
}

static int mode_wait(void) { wait_for_sigterm(false); }

static int rendezvous(dist__rdzv *r) {
  dist_init_opts o = {.rank = -1, .world_size = -1, .timeout_ms = 30000};
  int rc = dist__rendezvous(&o, r);
  if (rc != DIST_OK)
    fprintf(stderr, "rendezvous failed: %s: %s\n", dist_status_name(rc), dist_last_errmsg());
  return rc;
}

static int mode_block(void) {
  dist__rdzv r;
  if (rendezvous(&r) != DIST_OK)
    return 1;
  printf("ready pid=%d\n", (int)getpid());
  fflush(stdout);
  void *v = NULL;
  size_t n;
  dist_store_set_timeout(r.store, 50000);
  dist_store_get(r.store, "test/never", &v, &n);
  return 1;
}

static int mode_exit(int who, int code) {
  if (rank_env() != who)
    wait_for_sigterm(true);
  wait_others_ready(); /* they wait for SIGTERM */
  printf("exiting with %d\n", code);
  return code;
}

static int mode_stubborn(int who, int code) {
  if (rank_env() == who) {
    wait_others_ready();
    return code;
  }
  signal(SIGTERM, SIG_IGN);
  mark_ready();
  wait_forever();
}

static int mode_watch(int who, int code) {
  /* Before the rendezvous: rank `who` may die (and distrun send SIGTERM)
   * as soon as the rendezvous ends. */
  if (rank_env() != who)
    signal(SIGTERM, SIG_IGN);
  dist__rdzv r;
  if (rendezvous(&r) != DIST_OK)
    return 1;
  if (r.rank == who)
    _exit(code); /* no goodbye: as if it crashed */
  void *v = NULL;
  size_t n = 0;
  dist_store_set_timeout(r.store, 20000);
  int rc = dist_store_get(r.store, DIST_KEY_RANK_DIED, &v, &n);
  if (rc == DIST_OK)
    printf("saw: %s\n", (char *)v);
  dist_free(v);
  dist__rendezvous_release(&r);
  return rc == DIST_OK ? 0 : 1;
}

static int mode_react(int who) {
  struct sockaddr_un a = {.sun_family = AF_UNIX};
  snprintf(a.sun_path, sizeof a.sun_path, "/tmp/distrun-react-%s", env_or("DIST_JOB_ID"));
  int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  if (rank_env() == who) {
    unlink(a.sun_path);
    if (bind(fd, (struct sockaddr *)&a, sizeof a) || listen(fd, 64))
      return 1;
    int world = atoi(env_or("WORLD_SIZE"));
    for (int i = 1; i < world; i++)
      if (accept(fd, NULL, NULL) < 0)
        return 1;
    unlink(a.sun_path);
    size_t big = (size_t)512 << 20; /* a slow teardown */
    char *m = malloc(big);
    for (size_t i = 0; m && i < big; i += 4096)
      m[i] = 1;
    raise(SIGKILL);
  }
  while (connect(fd, (struct sockaddr *)&a, sizeof a) != 0)
    usleep(2000);
  char c;
  while (read(fd, &c, 1) > 0) {
  }
  return 2;
}

static int mode_leave(int who) {
  if (dist_init_process_group(NULL) != DIST_OK || dist_barrier(NULL, NULL) != DIST_OK)
    return 1;
  if (dist_get_rank(NULL) == who)
    return 0; /* ends early, without a word */
  float v[4] = {1, 2, 3, 4};
  dist_tensor t = dist_tensor_1d(v, DIST_FLOAT32, 4);
  int rc = dist_all_reduce(&t, DIST_SUM, NULL, NULL);
  if (rc != DIST_OK)
    fprintf(stderr, "%s\n", dist_errmsg(rc, NULL));
  return rc == DIST_OK ? 0 : 2;
}

static void close_and_linger(void) {
  for (int fd = 3; fd < 4096; fd++)
    close(fd);
  usleep(1500 * 1000); /* the planted slow teardown */
}

static int mode_leave_linger(int who, int code) {
  const char *r = getenv("RANK");
  if (r && atoi(r) == who)
    atexit(close_and_linger); /* before init: runs after the library's handlers */
  if (dist_init_process_group(NULL) != DIST_OK || dist_barrier(NULL, NULL) != DIST_OK)
    return 1;
  if (dist_get_rank(NULL) == who)
    return code; /* ends early, without a word */
  float v[4] = {1, 2, 3, 4};
  dist_tensor t = dist_tensor_1d(v, DIST_FLOAT32, 4);
  int rc = dist_all_reduce(&t, DIST_SUM, NULL, NULL);
  if (rc != DIST_OK)
    fprintf(stderr, "%s\n", dist_errmsg(rc, NULL));
  return rc == DIST_OK ? 0 : 2;
}

static int mode_demo(void) {
  dist__rdzv r;
  if (rendezvous(&r) != DIST_OK)
    return 1;
  char key[64], val[64];
  snprintf(key, sizeof key, "test/demo/%d", r.rank);
  snprintf(val, sizeof val, "value of rank %d", r.rank);
  int rc = dist_store_set(r.store, key, val, strlen(val));
  for (int i = 0; rc == DIST_OK && i < r.world_size; i++) {
    void *v = NULL;
    size_t n;
    snprintf(key, sizeof key, "test/demo/%d", i);
    rc = dist_store_get(r.store, key, &v, &n);
    if (rc == DIST_OK)
      printf("rank %d of %d (local %d of %d, job %s) read %s = %s\n", r.rank, r.world_size,
             r.local_rank, r.local_world_size, r.job_id, key, (char *)v);
    dist_free(v);
  }
  if (rc != DIST_OK)
    fprintf(stderr, "store: %s\n", dist_store_errmsg(r.store));
  dist__rendezvous_release(&r);
  return rc == DIST_OK ? 0 : 1;
}

static int mode_lines(void) {
  printf("out line 1\nout line 2\n");
  fflush(stdout);
  fprintf(stderr, "err line 1\n");
  printf("partial");
  fflush(stdout);
  return 0;
}

int main(int argc, char **argv) {
  alarm(60);
  const char *m = argc > 1 ? argv[1] : "";
  int a = argc > 2 ? atoi(argv[2]) : 0, b = argc > 3 ? atoi(argv[3]) : 0;
  if (!strcmp(m, "env"))
    return mode_env();
  if (!strcmp(m, "torchenv"))
    return mode_torchenv();
  if (!strcmp(m, "wait"))
    return mode_wait();
  if (!strcmp(m, "block"))
    return mode_block();
  if (!strcmp(m, "exit"))
    return mode_exit(a, b);
  if (!strcmp(m, "stubborn"))
    return mode_stubborn(a, b);
  if (!strcmp(m, "watch"))
    return mode_watch(a, b);
  if (!strcmp(m, "demo"))
    return mode_demo();
  if (!strcmp(m, "lines"))
    return mode_lines();
  if (!strcmp(m, "react"))
    return mode_react(a);
  if (!strcmp(m, "leave"))
    return mode_leave(a);
  if (!strcmp(m, "leave-linger"))
    return mode_leave_linger(a, b);
  fprintf(stderr, "usage: %s env|wait|block|exit R CODE|stubborn R CODE|watch R CODE|demo|lines\n", argv[0]);
  return !(argc > 1 && !strcmp(m, "--help")) ? 2 : 0;
}
