/* backend_cpu.h - the cpu backend as the levels above see it: one table
 * (backend_cpu.c; "cpu", alias "gloo"). Everything else of the backend is
 * cpu.h's, for its own files. */
#ifndef DIST_BACKEND_CPU_H
#define DIST_BACKEND_CPU_H

#include "base/dist_int.h"

extern const dist_backend_ops dist__cpu_backend_ops;
/* TCP sockets a cpu group holds (priv: its backend state): its
 * point-to-point mesh, and between host leaders (a group that spans
 * hosts); the number of hosts. The connections slot says the same. */
void dist__cpu_backend_conns(const void *priv, int *p2p, int *leaders, int *hosts);

#endif
