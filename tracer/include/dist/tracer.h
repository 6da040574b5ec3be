/* tracer.h - the flight recorder and trace store, as an observer.
 *
 * Always on in the bundled library (libdist registers it when it loads):
 * every operation of every user group is a record in a fixed in-memory
 * ring, which a writer thread drains into `$DIST_TRACE/<job id>/rank-<R>.db`
 * (tracer/SCHEMA.md). DIST_TRACE=0 records nothing on disk. Programs that
 * link the static parts call dist_tracer_register() themselves.
 *
 * Environment (read at init, when the default group is created):
 *   DIST_TRACE            directory (default ./dist-trace) or 0
 *   DIST_TRACE_BUFFER     ring slots (64 bytes each; default 65536)
 *   DIST_TRACE_COMMIT_MS  the writer's cycle: it drains the ring and commits
 *                         this often (default 10 ms)
 *   DIST_TRACE_CLOCK_S    clock offset re-measurement period, seconds (default
 *                         60; 0: at init only)
 *   DIST_OTLP_ENDPOINT    live span export (OTLP/HTTP JSON), optional:
 *   DIST_OTLP_INTERVAL_MS   how often spans are sent (default 1000)
 *   DIST_OTLP_TIMEOUT_MS    longest wait per request (default 1000)
 *   DIST_OTLP_QUEUE         operations waiting at most; older ones are
 *                           dropped and counted (default 4096); after a
 *                           failed request the exporter backs off (1 s
 *                           doubling to 30 s), dropping what waits
 *   DIST_OTLP_SERVICE       service.name (default libdist) */
#ifndef DIST_TRACER_H
#define DIST_TRACER_H

#include <stdint.h>

#include <dist/export.h>

DIST_EXTERN_C_BEGIN

/* Registers / unregisters the tracer observer (dist_observer_register). */
DIST_API int dist_tracer_register(void);
DIST_API int dist_tracer_unregister(void);

/* Waits until every record taken before the call is committed to the rank
 * file (the monitor calls it before a diagnosis). DIST_E_TIMEOUT after
 * timeout_ms; DIST_E_INVAL when the tracer is not recording. */
DIST_API int dist_tracer_flush(int64_t timeout_ms);

/* The rank file being written, or NULL (not recording). */
DIST_API const char *dist_tracer_path(void);

DIST_EXTERN_C_END

#endif
