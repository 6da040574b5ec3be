/* prog_restart.c - the rank program of test_distrun_torchrun.c's restart
 * cases (built as build/bin/distrun_restartprog, linked with libdist so its
 * ranks record a trace): `fail-until N CODE`: init the default group (no
 * backend named), one all_reduce; then rank 1 exits with CODE while
 * DIST_RESTART_COUNT < N (a rank that ends while the others need it), and
 * otherwise every rank all_reduces again, prints "attempt K done" and
 * exits 0. With DIST_TEST_GATE=PATH rank 1 fails only once PATH exists (a
 * test holds the attempt open until a late node waits for the next round).
 * Ends by itself within 60 s (alarm). */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <dist/dist.h>

static int all_reduce(void) {
  float x[4] = {1, 2, 3, 4};
  dist_tensor t = dist_tensor_1d(x, DIST_FLOAT32, 4);
  return dist_all_reduce(&t, DIST_SUM, NULL, NULL);
}

int main(int argc, char **argv) {
  alarm(60);
  if (argc != 4 || strcmp(argv[1], "fail-until")) {
    fprintf(stderr, "usage: %s fail-until N CODE\n", argv[0]);
    return 2;
  }
  int until = atoi(argv[2]), code = atoi(argv[3]);
  const char *rc_env = getenv("DIST_RESTART_COUNT");
  int attempt = rc_env ? atoi(rc_env) : -1;
  int rc = dist_init_process_group(NULL);
  if (rc != DIST_OK) {
    fprintf(stderr, "init: %s: %s\n", dist_status_name(rc), dist_last_errmsg());
    return 1;
  }
  if ((rc = all_reduce()) != DIST_OK)
    return 1;
  if (dist_get_rank(NULL) == 1 && attempt < until) {
    /* The test's signal: a byte on the FIFO DIST_TEST_GATE (its writer
     * holds it open; alarm() bounds the wait). */
    const char *gate = getenv("DIST_TEST_GATE");
    int fd = gate && *gate ? open(gate, O_RDONLY | O_CLOEXEC) : -1;
    char byte;
    if (fd >= 0 && read(fd, &byte, 1) < 0)
      perror("gate");
    if (fd >= 0)
      close(fd);
    fprintf(stderr, "rank 1: failing attempt %d with exit code %d\n", attempt, code);
    exit(code);
  }
  if ((rc = all_reduce()) != DIST_OK)
    return 1;
  printf("attempt %d done (backend %s, restart count %s, run %s)\n", attempt,
         dist_get_backend(NULL), getenv("TORCHELASTIC_RESTART_COUNT"),
         getenv("TORCHELASTIC_RUN_ID"));
  dist_destroy_process_group(NULL);
  return 0;
}
