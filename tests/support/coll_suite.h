/* coll_suite.h - the collective suite of the cpu backend, shared by every
 * backend's tests: every operation with every dtype once, every reduce op
 * once per dtype, a seeded random mix of sizes, roots, synchronous and
 * asynchronous calls, twelve asynchronous operations in flight at once, and
 * (3 ranks or more) a subgroup of every other rank from the top, so group
 * ranks differ from global ranks. Each result is compared bit for bit with
 * values computed on one rank in ascending rank order (coll_check.h).
 * Plain C: it runs inside ranks (forked by mp.c or started by mpirun). */
#ifndef DIST_TEST_COLL_SUITE_H
#define DIST_TEST_COLL_SUITE_H

#include <stdint.h>

#include "coll_check.h"
#include "mp.h"

/* Runs the suite on the default group (already initialised; every rank
 * passes the same seed). Returns 0, or 1 after printing the failing case
 * with FAIL. */
int coll_suite_run(const dist_test_ctx *ctx, uint64_t seed);

#endif
