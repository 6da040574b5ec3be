/* dist/internal/pg.h - what the bundled parts and bench/ may ask of core's
 * groups beyond the public headers and the seams (not installed).
 *
 * Part of core's part interface (dist/internal/: base.h, launch.h, pg.h, store.h):
 * the parts above core (wrapper_pg, tracer, monitor) and bench/ include
 * these, never a header of core/src (tools/check_layers.sh checks). */
#ifndef DIST_INTERNAL_PG_H
#define DIST_INTERNAL_PG_H

#include <dist/backend.h>
#include <dist/pg.h>

/* The default group (NULL before init, or after its destruction). */
dist_pg *dist__pg_default(void);
/* How group (NULL: the default group) moves data, from the transport slot
 * (dist/backend.h, ABI 5) of the group it runs on, through wrappers: "shm"
 * or "tcp" for the cpu backend; NULL when its backend does not say. */
const char *dist__pg_transport(const dist_pg *group);

/* dist_abort_group without the cause it posts: the library's own aborts
 * (a timed-out group, a proven deadlock, a wrapper passing an abort on to
 * the groups under it), whose diagnosis is posted by whoever found it. */
int dist__abort_group(dist_pg *g, const char *reason);

/* A thread is about to block (entering) in dist_work_wait or
 * dist_work_synchronize for an asynchronous operation c of group pg, or
 * has stopped waiting (!entering). The monitor sets it, so that it counts
 * such an operation as one its thread waits inside the library for, as a
 * synchronous call (a deadlock through dist_batch_isend_irecv is proven
 * as one through dist_send is). One hook, set once; NULL: none. */
typedef void (*dist__work_wait_hook)(dist_pg *pg, const dist_coll *c, bool entering);
void dist__set_work_wait_hook(dist__work_wait_hook fn);

/* A user group creation (dist_new_group, dist_split_group), as core tells
 * the monitor: group_id of size members (ranks: their global ranks,
 * ascending), made by call from caller in the program. scope_gid is the
 * group every member of which makes this call, members of the new group
 * or not (the default group for new_group, the parent for split_group),
 * so the calls a rank made on it count the same on every rank; -1 when
 * only the members call (use_local_synchronization). member: this rank
 * is one, and waits in the creation for the others; a rank that is not
 * is told too (entering, then at once leaving), so it counts the call. */
typedef struct dist__group_create {
  int group_id, size;
  const int *ranks;
  int scope_gid;
  const char *call;          /* "dist_new_group" or "dist_split_group" */
  void *caller;
  bool member;
  int status;                /* leaving: the creation's result (DIST_OK, or
                                DIST_E_TIMEOUT when members never came) */
} dist__group_create;

/* A thread starts (entering) or stops creating user group c->group_id
 * (above). The monitor sets it, so that a rank blocked in a creation the
 * others never reach is named there, not "busy outside the library", and
 * a member that skipped the creation the others make is named as the one
 * they wait for. Not told of the checking layer's helper groups. One hook;
 * NULL: none. c lasts for the call. (Before: (group_id, size, caller,
 * entering), members only.) */
typedef void (*dist__group_create_hook)(const dist__group_create *c, bool entering);
void dist__set_group_create_hook(dist__group_create_hook fn);

/* The checking layer's look at a group creation this rank makes without
 * being a member: a dist_new_group that every rank calls (not one with
 * use_local_synchronization) whose list leaves this rank out. planned is
 * what the precreate hook (dist/backend.h) would get, with rank -1 and
 * global_rank this rank; its pointers live for the call. The rank made
 * the job's creation number k all the same, so its list is one of k's
 * views: one that leaves out a rank the members' lists hold is the
 * desync (the rank left itself out of its own group). A non-zero return
 * fails the call with that status. Caller thread. One hook; NULL: none. */
typedef int (*dist__group_outside_fn)(const dist_pg_info *planned);
void dist__set_group_outside_check(dist__group_outside_fn fn);

/* The program's call (its return address) of the user group creation this
 * thread is in (dist_new_group, dist_split_group, a mesh), for the hooks
 * above and the precreate hook to name; NULL outside one, and for the
 * default group. */
void *dist__pg_create_caller(void);

/* The operations this process called on a group it is not a member of
 * (DIST_GROUP_NON_MEMBER: each did nothing, as in torch): how many, and the
 * last one's kind and caller (its return address in the program; either
 * pointer may be NULL). The checking layer notes a new one in its next
 * record on each group, so that a desync on a group this rank is a member
 * of can name the call that most likely meant it (the wrong group passed). */
uint64_t dist__pg_non_member_calls(dist_op_kind *kind, const void **caller);

#endif
