/* dist_lib.c - anchor of the bundled shared library.
 *
 * The shared object is made of the parts' static archives linked whole; a
 * target needs at least one source of its own, and this is it. */
#include <dist/dist.h>

/* Exported so `nm -D libdist.so` shows which build a process loaded. */
DIST_API const char *dist_build_info(void);
const char *dist_build_info(void) { return "libdist " DIST_BUILD_INFO_SUFFIX; }
