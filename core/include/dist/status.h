/* status.h - status codes, and the one format every failure report has.
 *
 * Every libdist call returns an int: DIST_OK (0) or one of the codes below.
 * The codes are numbered in this order and never renumbered; new ones are
 * appended (curl's rule). The detailed message is kept on the object that
 * failed (dist_store_errmsg, dist_pg_errmsg, dist_work_errmsg) and mirrored
 * in a per-thread buffer (dist_last_errmsg); dist_errmsg(rc, group) finds it
 * wherever it was kept.
 *
 * FAILURE REPORTS. Every message libdist keeps for a failed operation on a
 * group, whatever the transport (shared memory, TCP) and whichever rank or
 * layer found it (a backend's own checks, the checking layer, the monitor,
 * the tracer's events), reads the same way:
 *
 *     <what> in group <id> (<desc>, <n> ranks) at <OP> #<seq>: <summary>
 *       <one line per rank involved, when ranks disagree>
 *       [seen by rank <r> (host <h>, pid <p>)]
 *
 *   what     the status in words: "desync" (DIST_E_DESYNC), "timeout",
 *            "peer lost", "aborted", "invalid argument", "not supported",
 *            "store error", "backend error", "system error", "out of
 *            memory", "closed", "internal error".
 *   group    the user-visible id (0 = the default group) and the
 *            description given at creation (dist_group_opts.desc; the
 *            default group's is "default", a group without one shows its
 *            name, e.g. "g1"), with its size.
 *   OP #seq  the operation's name as dist_op_name gives it and the group's
 *            sequence number: collectives count from 1, and point-to-point
 *            calls (dist_op_is_p2p) from 1 apart, so a collective has one
 *            number on every member (torch's Flight Recorder keeps
 *            collective and p2p sequence ids apart). An
 *            operation refused before it started shows "(not started)"
 *            instead of a number: it takes none.
 *   summary  one sentence; for a disagreement "ranks disagree on the
 *            <field>", field one of: operation, dtype, count, reduce op,
 *            root, split size (all_to_all), size (point-to-point), and
 *            of the list whose entries may differ in size (all_gather's
 *            output tensors, reduce_scatter's input tensors) "size of
 *            output tensors[1]", or "size of an output tensor" where the
 *            engines see only that one rank's entries differ in size and
 *            another's do not (they run the call in two forms).
 *   ranks    Global ranks, always. When the group rank differs it follows:
 *            "rank 5 (group rank 1)". Lines go in ascending rank order and
 *            do not depend on which rank writes them, so every rank, and a
 *            rank relaying another's report, say the same. A peer's host
 *            and pid are given where they help find the process (a lost
 *            peer, a rank that never came): "rank 2 (host n1, pid 4711)".
 *   values   In the vocabulary of dist_coll_describe (backend.h): the
 *            operation, dtype[count] of each rank's tensor (count = the
 *            tensor this rank passes: the input, or the output for
 *            scatter and reduce_scatter), "op=SUM" (PREMUL_SUM(0.5)),
 *            "root 1", "to rank 1" / "from rank 0" for point-to-point and
 *            the pairs of an all_to_all, then the bytes in parentheses;
 *            the list entry a field names follows the operation
 *            ("ALL_GATHER float32[64] x4, output tensors[1] float32[32]
 *            (256 bytes)"), or that the entries differ ("ALL_GATHER
 *            float32, output tensors of different sizes").
 *            The odd rank's line ends "<- <field> differs": the one the
 *            others disagree with, or of a send and its receive, the side
 *            that changed after the pair matched at one size twice or
 *            more in a row (both lines when neither is known); of two
 *            ranks with nothing to tell them apart, the later line.
 *   origin   Named once. A failure found on this rank has no "seen by"
 *            line; one relayed from another rank (its error frame, the
 *            store) carries a single "seen by" line naming where it was
 *            born, never a chain of "rank 0 failed: rank 2 failed: ...".
 *
 * For example, two ranks calling all_reduce, rank 0 with 4 floats and rank
 * 1 with 5, both read, over shared memory or TCP alike:
 *
 *     desync in group 0 (default, 2 ranks) at ALL_REDUCE #3: ranks disagree on the count
 *       rank 0: ALL_REDUCE float32[4] op=SUM (16 bytes)
 *       rank 1: ALL_REDUCE float32[5] op=SUM (20 bytes)  <- count differs
 *
 * and a group of global ranks 4 and 5 described "tp" whose two ranks both
 * believe they are the root of a 256 KiB broadcast:
 *
 *     desync in group 2 (tp, 2 ranks) at BROADCAST #1: ranks disagree on the root
 *       rank 4 (group rank 0): BROADCAST float32[65536] root 4 (262144 bytes)
 *       rank 5 (group rank 1): BROADCAST float32[65536] root 5 (262144 bytes)  <- root differs
 *
 * Known limit: the root of a small broadcast or scatter (one that fits a
 * shared-memory line, or TCP's eager size, 64 KiB) returns once its data is
 * out, without waiting for readers. Ranks that both believe they are its
 * root therefore both return DIST_OK, and their next collective fails with
 * DIST_E_DESYNC, naming the earlier call and both roots.
 *
 * A desync in the checking layer (wrapper_pg) groups ranks that agree
 * ("ranks 0,2-3: ALL_REDUCE float32[1024] op=SUM") and adds a "called from"
 * line; the rest of the format is the same. Failures outside a group
 * (init, stores, distrun) keep their one-line messages, which name the
 * variable, key, rank or file at fault.
 *
 * Logging. Each rank logs its failure once, at ERROR (ARCHITECTURE.md:
 * reports users must see are WARNING or ERROR), with the text it returns;
 * the engine that found it logs at DEBUG only, and a failure that merely
 * repeats an earlier one (a call on a group that one broke) is logged at
 * DEBUG. */
#ifndef DIST_STATUS_H
#define DIST_STATUS_H

#include <dist/export.h>

DIST_EXTERN_C_BEGIN

/* X(name, number, short description) */
#define DIST_STATUS_MAP(X)                                              \
  X(OK, 0, "success")                                                   \
  X(E_INVAL, 1, "invalid argument")                                     \
  X(E_NOMEM, 2, "out of memory")                                        \
  X(E_TIMEOUT, 3, "timed out")                                          \
  X(E_DESYNC, 4, "ranks are out of sync")                               \
  X(E_PEER_LOST, 5, "peer lost")                                        \
  X(E_CLOSED, 6, "closed")                                              \
  X(E_ABORTED, 7, "aborted")                                            \
  X(E_NOTSUP, 8, "not supported")                                       \
  X(E_STORE, 9, "store error")                                          \
  X(E_BACKEND, 10, "backend error")                                     \
  X(E_SYS, 11, "system error")                                          \
  X(E_INTERNAL, 12, "internal error")

typedef enum dist_status {
#define DIST_STATUS_ENUM_(name, num, desc) DIST_##name = num,
  DIST_STATUS_MAP(DIST_STATUS_ENUM_)
#undef DIST_STATUS_ENUM_
  DIST_STATUS_COUNT_
} dist_status;

/* The short name of a code ("DIST_E_TIMEOUT"); "DIST_E_UNKNOWN" otherwise. */
DIST_API const char *dist_status_name(int code);
/* A short human description of a code ("timed out"). Never NULL. */
DIST_API const char *dist_strerror(int code);
/* The message of the calling thread's latest failure, whatever object
 * kept it (a group, a store, a work, or none: init and create functions).
 * Valid until the thread's next failing libdist call. Never NULL (empty
 * when none). */
DIST_API const char *dist_last_errmsg(void);

typedef struct dist_pg dist_pg;
/* The message for status rc, wherever it was kept: the calling thread's
 * latest failure when it ended with rc (a collective, dist_work_wait, a
 * store call, init), else the message kept on group (NULL: the default
 * group), else dist_strerror(rc). "" for DIST_OK. Never NULL; valid until
 * the thread's next libdist call. The one call a program needs:
 *     if (rc != DIST_OK) fprintf(stderr, "%s\n", dist_errmsg(rc, NULL)); */
DIST_API const char *dist_errmsg(int rc, dist_pg *group);

DIST_EXTERN_C_END

#endif
