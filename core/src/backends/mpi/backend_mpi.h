/* backend_mpi.h - the mpi backend as the levels above see it: its table
 * (backend_mpi.c) and the bootstrap under mpirun (mpi_boot.c). Built when
 * an MPI is found (DIST_HAVE_MPI). */
#ifndef DIST_BACKEND_MPI_H
#define DIST_BACKEND_MPI_H

#include "base/dist_int.h"

extern const dist_backend_ops dist__mpi_backend_ops;
/* Under mpirun with nothing else to rendezvous through: MPI says who is
 * who, rank 0 hosts the store, and o is filled to use it; what it holds
 * lives in mpi_boot.c until dist__mpi_boot_release. */
int dist__mpi_bootstrap(dist_init_opts *o);
void dist__mpi_boot_release(void);

#endif
