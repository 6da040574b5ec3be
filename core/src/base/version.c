/* version.c - the library's version string. */
#include "dist_int.h"

#ifndef DIST_VERSION_STRING
#error "DIST_VERSION_STRING comes from CMake (project version)"
#endif

const char *dist_version(void) { return DIST_VERSION_STRING; }
