/* prog_departed.c - the rank program of test_distrun_departed.c (built as
 * build/bin/departed_testprog, linked with the bundled libdist, as a
 * user's program): ranks that return from main without destroying the
 * default group (legal, as in torch) while others still work. Every rank
 * first makes one ring exchange (dist_irecv from the previous rank,
 * dist_isend to the next, both waited), so each is connected to both
 * neighbours. Rank 0 then waits until the processes of the ranks named
 * below have ended (their pids come through the job's store; a pidfd
 * becomes readable only after the kernel closed the process's sockets),
 * so its next message to rank 1 always comes after those ends reached
 * rank 1:
 *   ring      rank 0 posts its dist_isend of the ring only after ranks
 *             2 .. n-1 ended (the exchange is still pending on ranks 0
 *             and 1): legal, must end with exit 0 and no warning
 *   blocking  after the ring, rank 0 waits for ranks 2 .. n-1 to end,
 *             then sends rank 1 one more message (dist_send, dist_recv):
 *             legal, the same
 *   late      after the ring, rank 2 ends; rank 0 waits for it and sends
 *             rank 1 one more message, which rank 1 receives, then rank 1
 *             sends to rank 2 (the bug: nobody receives it): that send
 *             fails with DIST_E_PEER_LOST naming rank 2, and rank 1
 *             prints "rank 1: send to rank 2 failed: <message>"
 * With "destroy" as a second argument every rank destroys the default
 * group before it returns. A failed call prints "rank R: <what> failed:
 * <message>" and exits 1. Every mode ends by itself within 60 s (alarm). */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <dist/dist.h>

static int me;

static void ok(const char *what, int rc) {
  if (rc != DIST_OK) {
    fprintf(stderr, "rank %d: %s failed: %s\n", me, what, dist_errmsg(rc, NULL));
    exit(1);
  }
}

static void publish_pid(void) {
  char key[64], val[32];
  snprintf(key, sizeof key, "departed/pid/%d", me);
  int n = snprintf(val, sizeof val, "%d", (int)getpid());
  ok("store set", dist_store_set(dist_get_default_store(), key, val, (size_t)n));
}

/* Returns once rank r's process has ended (its sockets closed). */
static void wait_ended(int r) {
  char key[64];
  snprintf(key, sizeof key, "departed/pid/%d", r);
  void *val = NULL;
  size_t len = 0;
  ok("store get", dist_store_get(dist_get_default_store(), key, &val, &len));
  pid_t pid = (pid_t)atoi(val);
  dist_free(val);
  int fd = (int)syscall(SYS_pidfd_open, pid, 0);
  if (fd < 0) {
    if (errno == ESRCH)
      return; /* gone already */
    fprintf(stderr, "rank %d: pidfd_open(%d): %s\n", me, (int)pid, strerror(errno));
    exit(1);
  }
  struct pollfd p = {.fd = fd, .events = POLLIN};
  while (poll(&p, 1, -1) < 0 && errno == EINTR) {
  }
  close(fd);
}

static void wait_others_ended(int world) {
  for (int r = 2; r < world; r++)
    wait_ended(r);
}

int main(int argc, char **argv) {
  alarm(60);
  const char *mode = argc > 1 ? argv[1] : "ring";
  bool destroy = argc > 2 && !strcmp(argv[2], "destroy");
  if (strcmp(mode, "ring") && strcmp(mode, "blocking") && strcmp(mode, "late")) {
    fprintf(stderr, "usage: %s ring | blocking | late [destroy]\n", argv[0]);
    return 2;
  }
  ok("init", dist_init_process_group(NULL));
  me = dist_get_rank(NULL);
  int world = dist_get_world_size(NULL);
  if (world < 4) {
    fprintf(stderr, "rank %d: needs 4 ranks or more\n", me);
    return 2;
  }
  publish_pid();
  float a[32] = {0}, b[32];
  dist_tensor ta = dist_tensor_1d(a, DIST_FLOAT32, 32), tb = dist_tensor_1d(b, DIST_FLOAT32, 32);
  dist_work *ws, *wr;
  ok("irecv", dist_irecv(&tb, (me + world - 1) % world, NULL, 0, &wr));
  if (me == 0 && !strcmp(mode, "ring"))
    wait_others_ended(world);
  ok("isend", dist_isend(&ta, (me + 1) % world, NULL, 0, &ws));
  ok("wait isend", dist_work_wait(ws, -1));
  ok("wait irecv", dist_work_wait(wr, -1));
  dist_work_free(ws);
  dist_work_free(wr);
  if (!strcmp(mode, "blocking") || !strcmp(mode, "late")) {
    bool late = !strcmp(mode, "late");
    if (me == 0) {
      if (late)
        wait_ended(2);
      else
        wait_others_ended(world);
      ok("send to rank 1", dist_send(&ta, 1, NULL, 1));
    } else if (me == 1) {
      ok("recv from rank 0", dist_recv(&tb, 0, NULL, 1, NULL));
      if (late)
        ok("send to rank 2", dist_send(&ta, 2, NULL, 2));
    }
  }
  if (destroy)
    ok("destroy", dist_destroy_process_group(NULL));
  return 0;
}
