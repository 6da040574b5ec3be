/* legal.h - legal programs the checking layer must pass without a report.
 *
 * Each pattern is a program that other tools' debug modes have wrongly
 * flagged as a desync or hung on: uneven all_gather and reduce_scatter,
 * an all_to_all_single whose even split one rank spells out, barriers, batched point-to-point, async calls on two groups started in
 * different orders, ranks that call nothing on a group they are not in,
 * split groups and subgroups, the byte-blob collectives, a group made and
 * destroyed in a loop, and init, destroy and init again. Each runs on the
 * default group of an initialised job of any size (1 to 64 ranks), checks
 * every value against a reference (tests/support/ref.c: the same bits on
 * every rank), and returns 0, or 1 after printing what differed.
 *
 * Public API only, no test framework: test_legal_mp.c runs each pattern in
 * forked ranks, prog_legal.c runs them all in one job under distrun. */
#ifndef WPG_LEGAL_H
#define WPG_LEGAL_H

#include <stdint.h>

#include <dist/dist.h>

typedef struct legal_env {
  int rank;
  int world;
  uint64_t seed;
  /* Init the default group again after it was destroyed (the harness's
   * rendezvous: a fresh store in tests, the environment under distrun). */
  int (*reinit)(void *arg);
  void *arg;
} legal_env;

typedef int (*legal_fn)(const legal_env *e);

int legal_uneven(const legal_env *e);
int legal_barriers(const legal_env *e);
int legal_batch_p2p(const legal_env *e);
int legal_async_two_groups(const legal_env *e);
int legal_outsiders(const legal_env *e);
int legal_split_subgroups(const legal_env *e);
int legal_objects(const legal_env *e);
int legal_group_loop(const legal_env *e);
int legal_reinit(const legal_env *e);

/* Every pattern in order, NULL-terminated, with its name. */
typedef struct legal_pattern {
  const char *name;
  legal_fn fn;
} legal_pattern;
extern const legal_pattern legal_patterns[];

/* Prints "[rank R] file:line: message" to stderr and returns 1. */
int legal_fail(const legal_env *e, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#endif
