/* prog_legal.c - every legal pattern of legal.c in one job: the rank
 * program test_legal_mp.c runs under distrun at DIST_DEBUG=DETAIL. It
 * inits from the environment (env://), runs the patterns in order on the
 * default group (one of them destroys and inits it again), and exits 0
 * when every pattern passed; rank 0 prints one line per pattern and a
 * total. DIST_TEST_SEED picks the inputs (default 1). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <dist/dist.h>

#include "legal.h"

static int init_again(void *arg) {
  (void)arg;
  return dist_init_process_group(NULL);
}

int main(int argc, char **argv) {
  if (argc > 1 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
    printf("usage: distrun -n N %s\n"
           "Runs every legal pattern of tests/wrapper_pg/legal.c on N ranks and exits 0\n"
           "when all pass (DIST_TEST_SEED picks the inputs).\n", argv[0]);
    return 0;
  }
  if (dist_init_process_group(NULL) != DIST_OK) {
    fprintf(stderr, "init: %s\n", dist_last_errmsg());
    return 1;
  }
  const char *s = getenv("DIST_TEST_SEED");
  legal_env e = {dist_get_rank(NULL), dist_get_world_size(NULL),
                 s ? strtoull(s, NULL, 0) : 1, init_again, NULL};
  int passed = 0, total = 0;
  for (const legal_pattern *p = legal_patterns; p->fn; p++, total++) {
    if (p->fn(&e)) {
      fprintf(stderr, "[rank %d] legal: %s failed\n", e.rank, p->name);
      return 2; // the others' next call fails or hangs: distrun says which
    }
    passed++;
    if (e.rank == 0)
      printf("legal: %s: ok\n", p->name);
  }
  if (e.rank == 0)
    printf("legal: %d of %d patterns passed on %d ranks\n", passed, total, e.world);
  fflush(stdout);
  return dist_destroy_process_group(NULL) == DIST_OK ? 0 : 3;
}
