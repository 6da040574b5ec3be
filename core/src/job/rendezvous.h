/* rendezvous.h - how the ranks of a job find each other (internal to the
 * job level: job.c's dist__job_join calls it; distrun shares its helpers
 * through dist/internal/launch.h).
 *
 * Init methods, as torch.distributed:
 *   env:// (default)  MASTER_ADDR (host name, IPv4 or IPv6 address),
 *                     MASTER_PORT, RANK, WORLD_SIZE
 *   tcp://host:port   rank and world size from opts, else RANK/WORLD_SIZE
 *   file:///path      a file store at path; rank/world size likewise
 *   opts->store       an explicit store (borrowed); rank and world_size
 *                     required in opts
 * With env:// and tcp://, rank 0 hosts the TCP store and the others connect,
 * unless DIST_USE_AGENT_STORE=1 (distrun hosts it; every rank connects).
 *
 * Token: DIST_TOKEN when set (the store and the data plane use it; it is
 * taken out of the environment once read, dist__env_token). Without it
 * rank 0's store listens on loopback only and requires a local secret that
 * only this user's processes on this host can read (auth.h), unless
 * DIST_ALLOW_NO_TOKEN=1 opens it unauthenticated to the network; rank 0
 * then makes a data-plane token and shares it through the store. Job id: DIST_JOB_ID, else rank 0 makes
 * one and shares it.
 *
 * Local ranks: LOCAL_RANK / LOCAL_WORLD_SIZE when set; otherwise the job is
 * taken to run on one host: local_rank = rank, local_world_size =
 * world_size.
 *
 * The rendezvous ends with every rank having joined (a store-side barrier),
 * so a missing rank is named on the others when the timeout passes. */
#ifndef DIST_RENDEZVOUS_H
#define DIST_RENDEZVOUS_H

#include <stdbool.h>
#include <stddef.h>

#include <dist/internal/launch.h>

#include "base/dist_int.h"

typedef struct dist__rdzv {
  dist_store *store;      /* the job's store handle for this process */
  bool store_owned;       /* false when opts->store was given */
  int rank, world_size;
  int local_rank, local_world_size;
  char job_id[DIST_JOB_ID_MAX + 1];
  char token[DIST_TOKEN_MAX + 1]; /* data-plane token ("" never: one is
                                     made when DIST_TOKEN is unset) */
  int generation;         /* how many inits on this store came before */
} dist__rdzv;

/* Fills out, or fails with a message (dist_last_errmsg) naming the variable
 * or the rank at fault: DIST_E_INVAL for missing or malformed settings,
 * DIST_E_TIMEOUT when the other ranks or the store did not show up within
 * opts->timeout_ms (<= 0: dist__default_timeout_ms()), which bounds the
 * whole rendezvous. On success the store's timeout is the group timeout. */
int dist__rendezvous(const dist_init_opts *opts, dist__rdzv *out);
/* Reads the init method and the environment as dist__rendezvous does
 * (rank, world size and local ranks into out; no store is opened, nobody
 * is waited for): DIST_OK, or the same DIST_E_INVAL and message. For the
 * fuzz target of the parsers (tests/fuzz) and callers that fail fast. */
int dist__rendezvous_check(const dist_init_opts *opts, dist__rdzv *out);
/* Destroys the store if owned. Accepts NULL and a zeroed struct. */
void dist__rendezvous_release(dist__rdzv *r);

/* Job ids (dist__rendezvous_make_job_id, dist__rendezvous_job_id_ok):
 * dist/internal/launch.h, distrun makes them too. */

/* The job token: DIST_TOKEN, taken out of the environment the first time
 * it is seen (wiped in place and unset, so neither programs this process
 * starts nor its /proc/<pid>/environ show it) and remembered for later
 * inits; *out is NULL when there is none. DIST_E_INVAL when it is longer
 * than DIST_TOKEN_MAX. Any thread. */
int dist__env_token(const char **out);
/* Whether a job token was seen (for "DIST_TOKEN=(set, not shown)"). */
bool dist__env_token_known(void);

#endif
