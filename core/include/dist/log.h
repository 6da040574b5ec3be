/* log.h - logging levels, subsystems, the replaceable sink and debug levels.
 *
 * The effective level follows torch's matrix (ARCHITECTURE.md, Logging):
 *   DIST_LOG_LEVEL=ERROR -> error; WARNING (default) -> warning;
 *   INFO -> info; INFO with DIST_DEBUG=INFO -> debug;
 *   INFO with DIST_DEBUG=DETAIL -> trace.
 * TORCH_CPP_LOG_LEVEL and TORCH_DISTRIBUTED_DEBUG are read when ours are
 * unset. Lines look like "host:pid:tid [rank] SUBSYS LEVEL message". */
#ifndef DIST_LOG_H
#define DIST_LOG_H

#include <stdint.h>

#include <dist/export.h>

DIST_EXTERN_C_BEGIN

typedef enum dist_log_level {
  DIST_LOG_ERROR = 0,
  DIST_LOG_WARNING = 1,
  DIST_LOG_INFO = 2,
  DIST_LOG_DEBUG = 3,
  DIST_LOG_TRACE = 4,
} dist_log_level;

/* Subsystem bits (DIST_LOG_SUBSYS names them in upper case). */
#define DIST_SUBSYS_MAP(X)                                                    \
  X(CORE, 0) X(STORE, 1) X(PG, 2) X(COLL, 3) X(TCP, 4) X(SHM, 5) X(NCCL, 6) \
  X(WPG, 7) X(TRACER, 8) X(MON, 9) X(MPI, 10) X(RUN, 11)

typedef enum dist_subsys {
#define DIST_SUBSYS_ENUM_(name, bit) DIST_SUBSYS_##name = bit,
  DIST_SUBSYS_MAP(DIST_SUBSYS_ENUM_)
#undef DIST_SUBSYS_ENUM_
  DIST_SUBSYS_COUNT_
} dist_subsys;

typedef enum dist_debug_level {
  DIST_DEBUG_OFF = 0,
  DIST_DEBUG_INFO = 1,
  DIST_DEBUG_DETAIL = 2,
} dist_debug_level;

/* A log sink receives each formatted line (no trailing newline) that passes
 * the level and subsystem filters. It may be called from any library thread,
 * concurrently; it must not call back into libdist. NULL restores the
 * default sink (stderr, or DIST_LOG_FILE). */
typedef void (*dist_log_sink_fn)(void *arg, dist_log_level level,
                                 dist_subsys subsys, const char *line);
DIST_API void dist_log_set_sink(dist_log_sink_fn fn, void *arg);

/* The effective level and subsystem mask, as computed from the environment
 * (or set explicitly below). */
DIST_API dist_log_level dist_log_get_level(void);
DIST_API void dist_log_set_level(dist_log_level level);
DIST_API void dist_log_set_subsys_mask(uint32_t mask);
/* Logs one line through the filters and the sink (for other parts and for
 * applications that want their lines in the same stream). */
DIST_API void dist_log(dist_log_level level, dist_subsys subsys,
                       const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Debug levels (torch's TORCH_DISTRIBUTED_DEBUG). DIST_DEBUG is read when
 * the library loads and again by dist_init_process_group (as torch reads it
 * at init), unless dist_set_debug_level was called: an explicit level wins.
 * Setting the level also recomputes the effective log level from
 * DIST_LOG_LEVEL. */
DIST_API void dist_set_debug_level(dist_debug_level level);
DIST_API dist_debug_level dist_get_debug_level(void);
/* Re-reads DIST_DEBUG / TORCH_DISTRIBUTED_DEBUG, DIST_LOG_LEVEL /
 * TORCH_CPP_LOG_LEVEL, DIST_LOG_SUBSYS and DIST_LOG_FILE. An unknown value
 * logs a warning naming the accepted ones and returns DIST_E_INVAL (the
 * level then stays at its default). */
DIST_API int dist_set_debug_level_from_env(void);

/* The rank shown in log lines ("[-]" until set; init sets it). */
DIST_API void dist_log_set_rank(int rank);

DIST_EXTERN_C_END

#endif
