/* example_util.h - what every tutorial program shares: --help, init from the
 * environment distrun sets, and failing loudly with libdist's message.
 * Header-only so each example stays one program. */
#ifndef DIST_EXAMPLE_UTIL_H
#define DIST_EXAMPLE_UTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <dist/dist.h>

/* Exits with libdist's message when a call fails. */
#define TRY(call)                                                                       \
  do {                                                                                  \
    int try_rc_ = (call);                                                               \
    if (try_rc_ != DIST_OK) {                                                           \
      fprintf(stderr, "%s failed: %s\n", #call, dist_errmsg(try_rc_, NULL));            \
      exit(1);                                                                          \
    }                                                                                   \
  } while (0)

/* Prints usage for --help / -h and exits; otherwise joins the job (env://). */
static inline void example_init(int argc, char **argv, const char *what, int min_ranks) {
  if (argc > 1 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
    printf("%s\n\nusage: distrun --nproc-per-node N %s\n"
           "Needs at least %d ranks; joins the job through env:// (MASTER_ADDR,\n"
           "MASTER_PORT, RANK, WORLD_SIZE, which distrun sets).\n",
           what, argv[0], min_ranks);
    exit(0);
  }
  TRY(dist_init_process_group(NULL));
  if (dist_get_world_size(NULL) < min_ranks) {
    fprintf(stderr, "%s needs at least %d ranks\n", argv[0], min_ranks);
    exit(2);
  }
}

#endif
