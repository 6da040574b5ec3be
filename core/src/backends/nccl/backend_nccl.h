/* backend_nccl.h - the nccl backend as the levels above see it: its table
 * (backend_nccl.c), whether NCCL is usable here (nccl_api.c), and the
 * split a non-member joins. Built with the CUDA toolkit and NCCL
 * (DIST_HAVE_NCCL). */
#ifndef DIST_BACKEND_NCCL_H
#define DIST_BACKEND_NCCL_H

#include "base/dist_int.h"

extern const dist_backend_ops dist__nccl_backend_ops;
/* Whether NCCL and a device are usable (why says what is missing or how
 * many devices). */
bool dist__nccl_usable(char *why, size_t len);
/* As a member does, but with no colour: when the members of a group being
 * created will split parent_cuda's communicator (nccl group of parent). */
int dist__nccl_nonmember_split(dist_pg *parent_cuda, const dist_nccl_options *child);

#endif
