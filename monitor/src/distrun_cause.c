/* distrun_cause.c - the cause a rank posted in the job's store, read when
 * the job fails.
 *
 * A rank that can explain a failure posts it with dist_post_cause under
 * DIST_KEY_CAUSE (launch_env.h: "<status> <rank> <diagnosis>\n<report>",
 * first cause wins, but a monitor's diagnosis replaces a plain cause of
 * the same status: distrun reads the key again before it prints). When a rank fails, distrun waits a bounded moment for that key
 * before it classifies the failure: the rank that meets a desync posts
 * before its call returns, so the key is normally there before its exit
 * is; a peer that stopped at the same moment may still be posting. The
 * posted status picks the exit status (DIST_E_DESYNC 10, DIST_E_TIMEOUT
 * 11; any other keeps the launcher's own classification) and the report is
 * printed once, as the last thing distrun writes. */
#include <stdio.h>
#include <string.h>

#include "distrun.h"
#include "pg/pg_int.h" /* dist__cause_parse */

/* Reads the key (present) into p; false when it cannot be read. */
static bool read_cause(drun_job *job, drun_posted *p) {
  void *val = NULL;
  size_t len = 0;
  if (dist_store_get(job->store, DIST_KEY_CAUSE, &val, &len) != DIST_OK)
    return false;
  const char *report;
  drun_posted q = {0};
  if (dist__cause_parse(val, len, &q.status, &q.rank, &report) != DIST_OK) {
    dist__run_say("ignoring a malformed cause in the job's store (%zu bytes)", len);
    dist_free(val);
    return false;
  }
  dist__cause_parse_info(val, len, &q.f);
  q.text = dist__strdup(report);
  dist_free(val);
  if (!q.text)
    return false;
  dist__free(p->text);
  *p = q;
  p->have = true;
  return true;
}

bool dist__run_cause_fetch(drun_job *job, int64_t wait_ms, drun_posted *p) {
  if (p->have || !job->store)
    return p->have;
  const char *key = DIST_KEY_CAUSE;
  if (dist_store_wait(job->store, &key, 1, wait_ms > 0 ? wait_ms : 1) != DIST_OK)
    return false; /* nothing posted (or the store is gone): distrun's own view stands */
  return read_cause(job, p);
}

void dist__run_cause_refresh(drun_job *job, drun_posted *p) {
  if (!p->have || !job->store)
    return;
  drun_posted q = {0};
  if (!read_cause(job, &q))
    return;
  if (q.status == p->status && strcmp(q.text, p->text) != 0) { /* a diagnosis came */
    dist__run_cause_free(p);
    *p = q;
  } else {
    dist__run_cause_free(&q);
  }
}

int dist__run_cause_exit(const drun_posted *p, int fallback) {
  if (!p->have)
    return fallback;
  switch (p->status) {
  case DIST_E_DESYNC: return DRUN_EXIT_DESYNC;
  case DIST_E_TIMEOUT: return DRUN_EXIT_HANG;
  default: return fallback;
  }
}

void dist__run_cause_free(drun_posted *p) {
  dist__free(p->text);
  *p = (drun_posted){0};
}
