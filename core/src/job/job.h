/* job.h - the job level: what the levels above know of the job.
 *
 * The job is what every process of a run shares before any group exists:
 * the rendezvous (rendezvous.h: the store, this process's rank, the job's
 * id and data-plane token), the store keys and variables of the launch
 * contract (dist/internal/launch.h) and the job's cause (cause.c). It
 * knows nothing of groups: who posts a cause says what failed. */
#ifndef DIST_JOB_H
#define DIST_JOB_H

#include <dist/internal/launch.h>

#include "base/dist_int.h"
#include "rendezvous.h"

/* --- the job this process joined (job.c) --------------------------------- */

/* Rendezvous (rendezvous.c) with opts: on success the job's identity lasts
 * until dist__job_leave, the log names this process's rank, and groups
 * keep their keys under dist__job_base_store. A failure after the
 * rendezvous passed leaves the job joined: the caller leaves it. */
int dist__job_join(const dist_init_opts *opts);
/* Releases what dist__job_join made (the store when owned); nothing when
 * not joined. */
void dist__job_leave(void);
/* This process's rank and the job's size (-1 when not joined). */
int dist__job_rank(void);
int dist__job_world_size(void);
/* The job's data-plane token ("" when not joined). */
const char *dist__job_token(void);
/* The store groups put their keys under: the job's store, or from the
 * second init on one store a prefix of it per generation; NULL when not
 * joined. dist_get_default_store and dist_get_job_id (public) answer the
 * job's store and id. */
dist_store *dist__job_base_store(void);

/* --- the job's cause (cause.c) ------------------------------------------- */

/* The bound on posting a cause or a first exit: connection and I/O of the
 * fresh store handle it goes through, whatever the store's own timeout. */
#define DIST_CAUSE_TIMEOUT_MS 2000
/* dist_post_cause, dist_post_cause_info (public) and the parsers and
 * dist__cause_post_diagnosis of dist/internal/launch.h. The cause names
 * this process by dist__job_rank. */

#endif
