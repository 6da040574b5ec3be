/* export.h - symbol visibility for libdist's public API.
 *
 * The library is compiled with -fvisibility=hidden; only declarations marked
 * DIST_API are exported from the shared object (as NCCL_API / UV_EXTERN). */
#ifndef DIST_EXPORT_H
#define DIST_EXPORT_H

#if defined(__GNUC__)
#define DIST_API __attribute__((visibility("default")))
#else
#define DIST_API
#endif

#ifdef __cplusplus
#define DIST_EXTERN_C_BEGIN extern "C" {
#define DIST_EXTERN_C_END }
#else
#define DIST_EXTERN_C_BEGIN
#define DIST_EXTERN_C_END
#endif

#endif
