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
 * DIST_E_TIMEOUT; a member that destroyed the group or exited after fewer
 * collectives than the others left its count and last operation in the
 * job's store and is named as a desync (DIST_E_DESYNC). At OFF and INFO
 * nothing is wrapped.
 *
 * Asynchronous operations (a dist_work ** argument) are checked
 * asynchronously: the call posts its fingerprint on the helper without
 * waiting and returns its work at once; the group's checking thread
 * compares when every member's fingerprint is in and then issues the
 * operation on the inner group, or completes the work with DIST_E_DESYNC
 * and the report (dist_work_wait/status/errmsg; the report is also the
 * DIST_EV_DESYNC_REPORT event and the job's cause), no buffer touched.
 * This departs from "a failed check returns the error at once, with no
 * work": a check that waited for the peers inside the call would deadlock
 * two groups whose async operations the ranks start in opposite orders, a
 * legal program. Operations on one group still run in issue order: a
 * synchronous (or point-to-point) call first waits until the async checks
 * issued before it are done; a synchronous check stays one exchange on the
 * caller's thread.
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
