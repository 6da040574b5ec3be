/* breakpoint.c - dist_breakpoint: one rank stops for a debugger while the
 * others wait for it (torch's distributed breakpoint, for C).
 *
 * The chosen rank prints how to attach and spins on a flag the debugger
 * clears; the other ranks wait on a store key (not a collective, whose
 * timeout a debugging session would outlast) until it is released. */
#include <inttypes.h>
#include <stdio.h>
#include <unistd.h>

#include "pg/pg_int.h"

/* Cleared from the debugger: (gdb) set var dist_breakpoint_wait = 0 */
_Atomic int dist_breakpoint_wait;

int dist_breakpoint(int rank) {
  dist_pg *g = dist__pg_default();
  dist_store *st = dist_get_default_store();
  if (!g || !st)
    return dist__set_last_error(DIST_E_INVAL, "dist_breakpoint: not initialised");
  if (rank < 0 || rank >= g->info.size)
    return dist__set_last_error(DIST_E_INVAL, "dist_breakpoint: rank %d is not in the job",
                                rank);
  static uint64_t count;
  char key[64];
  snprintf(key, sizeof key, "breakpoint/%" PRIu64, ++count);
  if (g->info.global_rank == rank) {
    atomic_store(&dist_breakpoint_wait, 1);
    fprintf(stderr,
            "rank %d (pid %d) stopped for a debugger. Attach with: gdb -p %d\n"
            "then: set var dist_breakpoint_wait = 0, and continue.\n",
            rank, (int)getpid(), (int)getpid());
    while (atomic_load(&dist_breakpoint_wait))
      dist__sleep_ms(50);
    return dist_store_set(st, key, "1", 1);
  }
  const char *keys[1] = {key};
  int rc;
  do /* an hour at a time: a debugging session may take a while */
    rc = dist_store_wait(st, keys, 1, 3600 * 1000);
  while (rc == DIST_E_TIMEOUT);
  return rc;
}
