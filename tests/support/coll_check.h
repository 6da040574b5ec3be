/* coll_check.h - runs one collective on a group with deterministic inputs
 * and checks every rank's result against values computed on one rank
 * (tests/support/ref.h), bit for bit. Plain C: it runs inside forked ranks.
 *
 * Inputs are a pure function of (seed, group rank, element index), so each
 * rank computes what every other rank contributed, and the expected value
 * of every reduction follows ascending group-rank order: equal to the
 * expected value means bitwise identical on every rank. */
#ifndef DIST_TEST_COLL_CHECK_H
#define DIST_TEST_COLL_CHECK_H

#include <stdbool.h>
#include <stdint.h>

#include <dist/dist.h>

typedef struct coll_case {
  dist_op_kind op;   /* a collective kind, SEND (a ring of send/recv) or
                        BATCH_P2P (the same ring as one batch) */
  dist_dtype dtype;
  dist_redop redop;
  int64_t n;         /* elements per rank (per block where ops split) */
  int root;          /* group rank (where the op has one) */
  bool async;
  bool uneven;       /* ALL_TO_ALL_SINGLE: uneven split sizes */
  uint64_t seed;
} coll_case;

/* Runs c on g (NULL = default) and checks the result. Returns 0, or 1 with
 * a message (naming the case) in msg. */
int coll_check(dist_pg *g, const coll_case *c, char *msg, size_t len);
/* "ALL_REDUCE float32 SUM n=7 root=0 async" */
char *coll_case_name(const coll_case *c, char *buf, size_t len);

/* Ranks placed on several hosts (DIST_HOST_ID): host_of_global[r] names
 * global rank r's host (n entries, borrowed for the process's life). The
 * expected value of a reduction over a group that spans hosts then follows
 * the hierarchical order (hier.h): each host's ranks in ascending group
 * rank, then the hosts in ascending order of their lowest group rank.
 * NULL: every rank on one host. */
void coll_check_set_hosts(const int *host_of_global, int n);

/* Async variant: starts k cases back to back, then waits for all of them
 * in order and checks each (completion in issue order). */
int coll_check_many_async(dist_pg *g, const coll_case *cases, int k, char *msg, size_t len);

/* Called after each case's outputs passed the check (NULL: nothing is
 * called): one output buffer a rank holds. Only operations whose outputs
 * every member must hold byte for byte (all_reduce, broadcast, all_gather,
 * all_gather_into_tensor) are passed, so a caller can assert bitwise
 * identity across ranks on its own, whatever order the reference reduces
 * in (tests/multihost exchanges digests of them). */
typedef void (*coll_check_result_fn)(void *arg, dist_pg *g, const coll_case *c,
                                     const void *bytes, size_t len);
void coll_check_set_result_hook(coll_check_result_fn fn, void *arg);

#endif
