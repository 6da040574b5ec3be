/* api.h - the api level: the public calls (init, groups, collectives,
 * byte blobs, mesh, monitored_barrier, spawn, breakpoint) over everything
 * below, and what its files share.
 *
 * Nothing below includes this: a lower level that needs something of the
 * api is given it (an argument, a registered hook) instead. */
#ifndef DIST_API_H
#define DIST_API_H

#include "backends/backends.h"
#include "job/job.h"
#include "pg/pg_int.h"
#ifdef DIST_HAVE_MPI
#include "backends/mpi/backend_mpi.h"
#endif

/* --- uneven.c ------------------------------------------------------------ */

/* all_gather with outputs of different sizes. */
/* dist_new_group with the program's call it was made for (caller: the
 * return address of the public function the program called, a device
 * mesh's or new_subgroups' own), so records and reports name the
 * program's line, not the library's. */
int dist__new_group_from(const int *ranks, size_t n, const dist_group_opts *opts, dist_pg **out,
                         void *caller);
bool dist__all_gather_is_uneven(const dist_tensor *outputs, size_t n,
                                const dist_tensor *input);
int dist__all_gather_uneven(dist_tensor *outputs, size_t n, const dist_tensor *input,
                            dist_pg *group, dist_work **w, const void *caller);
/* reduce_scatter with inputs of different sizes (inputs[i] sized like rank
 * i's output). */
bool dist__reduce_scatter_is_uneven(const dist_tensor *output, const dist_tensor *inputs,
                                    size_t n);
int dist__reduce_scatter_uneven(dist_tensor *output, const dist_tensor *inputs, size_t n,
                                dist_redop op, dist_pg *group, dist_work **w,
                                const void *caller);

#endif
