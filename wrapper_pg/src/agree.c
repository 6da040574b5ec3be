/* agree.c - what the ranks must agree on for the checks to work, compared
 * once when the default group is created, at every debug level.
 *
 * Each rank posts its library version, debug level and default timeout to
 * the job's store and reads everyone's (three store round trips at init,
 * nothing later). A rank alone at DETAIL would otherwise make a helper
 * group nobody else joins and wait out the timeout; instead init fails on
 * every rank with a report naming who has what. Keys carry a generation so
 * a job that destroys and re-initialises never reads stale values. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "wpg_int.h"

typedef struct cfg {
  char version[32];
  int level;
  int64_t timeout_ms;
} cfg;

static const char *level_name(int l) {
  return l == DIST_DEBUG_DETAIL ? "DETAIL" : l == DIST_DEBUG_INFO ? "INFO" : "OFF";
}

/* The field in which a differs from b, NULL when they agree. */
static const char *cfg_diff(const cfg *a, const cfg *b) {
  if (strcmp(a->version, b->version))
    return "version";
  if (a->level != b->level)
    return "debug level";
  return a->timeout_ms != b->timeout_ms ? "timeout" : NULL;
}

typedef struct ctx {
  const cfg *all;
} ctx;

static const char *field_of(void *arg, int cls, int major) {
  const ctx *c = arg;
  return cfg_diff(&c->all[cls], &c->all[major]);
}

static int report(const dist_pg_info *def, const cfg *all) {
  int n = def->size;
  wpg_row *rows = calloc((size_t)n, sizeof *rows);
  char (*text)[160] = calloc((size_t)n, sizeof *text);
  char *msg = malloc(WPG_MSG_LEN);
  if (!rows || !text || !msg) {
    free(rows), free(text), free(msg);
    return dist_backend_set_error(NULL, DIST_E_DESYNC, "ranks disagree on their configuration");
  }
  for (int r = 0; r < n; r++) {
    int cls = r;
    for (int k = 0; k < r && cls == r; k++)
      if (!cfg_diff(&all[r], &all[k]))
        cls = k;
    snprintf(text[r], sizeof text[r], "libdist %s, debug %s, timeout %" PRId64 " ms",
             all[r].version, level_name(all[r].level), all[r].timeout_ms);
    rows[r] = (wpg_row){.global = r, .grank = r, .cls = cls, .text = text[r]};
  }
  size_t off = 0;
  wpg_appendf(msg, WPG_MSG_LEN, &off, "configuration differs between the ranks of group 0 "
              "(%d ranks) at init (the checking layer needs one version, one debug level "
              "and one default timeout):\n", n);
  ctx c = {all};
  wpg_report_rows(msg, WPG_MSG_LEN, &off, rows, n, field_of, &c);
  if (off && msg[off - 1] == '\n')
    msg[--off] = '\0';
  dist_log(DIST_LOG_ERROR, DIST_SUBSYS_WPG, "%s", msg);
  if (def->rank == 0) { /* distrun prints it last */
    int culprits[64];
    dist_cause_info in = dist_cause_info_none();
    in.culprits = culprits;
    in.n_culprits = (size_t)wpg_report_culprits(rows, n < 64 ? n : 64, culprits);
    in.group_id = 0;
    in.group_name = "default";
    in.field = "configuration";
    dist_post_cause_info(DIST_E_DESYNC, &in, msg);
  }
  int rc = dist_backend_set_error(NULL, DIST_E_DESYNC, "%s", msg);
  free(rows), free(text), free(msg);
  return rc;
}

static int fetch(dist_store *st, const dist_pg_info *def, int gen, cfg *all) {
  int n = def->size;
  char (*keys)[64] = calloc((size_t)n, sizeof *keys);
  const char **kp = calloc((size_t)n, sizeof *kp);
  void **vals = calloc((size_t)n, sizeof *vals);
  size_t *lens = calloc((size_t)n, sizeof *lens);
  int rc = keys && kp && vals && lens ? DIST_OK : DIST_E_NOMEM;
  for (int r = 0; rc == DIST_OK && r < n; r++) {
    snprintf(keys[r], sizeof keys[r], "wpg/cfg/%d/%d", gen, r);
    kp[r] = keys[r];
  }
  if (rc == DIST_OK)
    rc = dist_store_wait(st, kp, (size_t)n, def->timeout_ms);
  if (rc == DIST_OK)
    rc = dist_store_multi_get(st, kp, (size_t)n, vals, lens);
  for (int r = 0; rc == DIST_OK && r < n; r++)
    if (lens[r] == sizeof(cfg))
      memcpy(&all[r], vals[r], sizeof(cfg));
  for (int r = 0; vals && r < n; r++)
    dist_free(vals[r]);
  free(keys), free(kp), free(vals), free(lens);
  if (rc != DIST_OK)
    return dist_backend_set_error(NULL, rc, "init: the ranks' configurations (checking "
                                  "layer) did not all arrive within %" PRId64 " ms: %s",
                                  def->timeout_ms, dist_store_errmsg(st));
  return DIST_OK;
}

static int generation = -1;

int wpg_generation(void) {
  return generation;
}

int wpg_agree_init(const dist_pg_info *def) {
  dist_store *st = dist_get_default_store();
  int gen = ++generation; /* every rank inits alike: the same number */
  if (!st || def->size < 2)
    return DIST_OK;
  cfg me = {.level = (int)dist_get_debug_level(), .timeout_ms = def->timeout_ms};
  snprintf(me.version, sizeof me.version, "%s", dist_version());
  char k[64];
  snprintf(k, sizeof k, "wpg/cfg/%d/%d", gen, def->rank);
  if (dist_store_set(st, k, &me, sizeof me) != DIST_OK)
    return dist_backend_set_error(NULL, DIST_E_STORE, "init: cannot post the configuration: "
                                  "%s", dist_store_errmsg(st));
  cfg *all = calloc((size_t)def->size, sizeof *all);
  if (!all)
    return dist_backend_set_error(NULL, DIST_E_NOMEM, "out of memory");
  int rc = fetch(st, def, gen, all);
  bool same = true;
  for (int r = 1; rc == DIST_OK && r < def->size; r++)
    same &= !cfg_diff(&all[r], &all[0]);
  if (rc == DIST_OK && !same)
    rc = report(def, all);
  free(all);
  return rc;
}
