/* logcap.h - a process's log lines captured for a test to read. */
#ifndef DIST_TEST_LOGCAP_H
#define DIST_TEST_LOGCAP_H

#include <dist/dist.h>

/* From now on, this process's log lines at level or above go into a
 * 64 KiB buffer (dist_log_set_sink), one per line. */
void dist_test_log_capture(dist_log_level level);
/* A copy of what was captured so far (static storage, overwritten by the
 * next call). */
const char *dist_test_log_text(void);
/* Stops capturing (the sink is given back). */
void dist_test_log_release(void);

#endif
