/* dist_lib.c - anchor of the bundled shared library.
 *
 * The shared object is made of the parts' static archives linked whole; a
 * target needs at least one source of its own, and this is it. It wires
 * the parts into core's seams when the library loads: the tracer is an
 * observer, on by default (DIST_TRACE=0 keeps it off disk). */
#include <dist/dist.h>
#include <dist/tracer.h>

__attribute__((constructor)) static void wire_parts(void) { dist_tracer_register(); }

/* Exported so `nm -D libdist.so` shows which build a process loaded. */
DIST_API const char *dist_build_info(void);
const char *dist_build_info(void) { return "libdist " DIST_BUILD_INFO_SUFFIX; }
