/* wrapper_pg.h - the checking process group (torch's ProcessGroupWrapper).
 *
 * At DIST_DEBUG=DETAIL (or after dist_set_debug_level(DIST_DEBUG_DETAIL)
 * before a group is made) every group that init, new_group, split_group,
 * new_subgroups or a device mesh creates comes back as a checking group
 * around the real one. Before each collective the members exchange a
 * fingerprint (group, collective count, op, every tensor's dtype, shape and
 * device, reduce op, root as a global rank, split sizes, a rolling hash of
 * the group's history) over a helper internal CPU group; ranks that disagree
 * do not run the operation: every member that entered fails with
 * DIST_E_DESYNC and the same report, and no buffer is touched.
 * Point-to-point calls are compared pairwise where the messages match: at
 * DETAIL the CPU backend's matched-send check covers dtype and shape as
 * well as size, and a mismatch fails both sides before data reaches the
 * receive's buffer. The
 * exchange is monitored: a member that does not arrive within the group's
 * timeout is named (host, pid, last operation) and the others fail with
 * DIST_E_TIMEOUT. At OFF and INFO nothing is wrapped.
 *
 * The bundled libdist registers the layer when it loads; programs linking
 * the static parts call dist_wpg_install() before init. At every level the
 * default group's creation compares, over the job's store, what must agree
 * for the checks to work (library version, debug level, default timeout):
 * a mismatch fails init on every rank naming who has what.
 *
 * Environment: DIST_SHOW_STACKTRACES=1 adds each rank's call stack to a
 * report. */
#ifndef DIST_WRAPPER_PG_H
#define DIST_WRAPPER_PG_H

#include <dist/export.h>
#include <dist/pg.h>

DIST_EXTERN_C_BEGIN

/* Registers the checking layer in core's group interposer (idempotent).
 * Caller thread, before dist_init_process_group. */
DIST_API void dist_wpg_install(void);

DIST_EXTERN_C_END

#endif
