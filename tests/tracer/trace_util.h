/* trace_util.h - helpers of the tracer's tests: SQL over a trace store. */
#ifndef DIST_TRACE_TEST_UTIL_H
#define DIST_TRACE_TEST_UTIL_H

#include <sqlite3.h>
#include <stdint.h>

#include <dist/trace_reader.h>
#include <dist/tracer.h>

/* The first column of the first row of a formatted query, or INT64_MIN
 * (no row, NULL or an error, printed to stderr). */
int64_t tq_int(sqlite3 *db, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Same for text, into a static buffer ("" when none). */
const char *tq_text(sqlite3 *db, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Merges dir/job into dir/trace.db and opens it; NULL on failure
 * (printed). rep may be NULL. */
sqlite3 *tq_merge(const char *dir, const char *job, dist_trace_merge_report *rep);

#endif
