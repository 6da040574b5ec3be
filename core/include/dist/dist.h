/* dist.h - the whole public API of libdist's runtime in one include. */
#ifndef DIST_DIST_H
#define DIST_DIST_H

#ifndef __cplusplus
#include <stdatomic.h>
#endif

#include <dist/export.h>
#include <dist/status.h>
#include <dist/log.h>
#include <dist/tensor.h>
#include <dist/store.h>
#include <dist/pg.h>
#include <dist/backend.h>
#include <dist/observer.h>
#include <dist/cuda.h>

DIST_EXTERN_C_BEGIN

/* "0.1.0" */
DIST_API const char *dist_version(void);
/* The chosen rank stops for a debugger (it prints how to attach and waits
 * until the debugger clears dist_breakpoint_wait: `set var
 * dist_breakpoint_wait = 0`); every other rank waits on the job's store
 * until it continues. */
DIST_API int dist_breakpoint(int rank);
#ifndef __cplusplus
DIST_API extern _Atomic int dist_breakpoint_wait;
#endif

DIST_EXTERN_C_END

#endif
