/* pg_log.c - what the log says about groups and their operations, by
 * debug level (torch's TORCH_DISTRIBUTED_DEBUG with TORCH_CPP_LOG_LEVEL):
 *
 *   DIST_DEBUG=INFO or DETAIL: when a user group is created, one INFO block
 *   with its configuration (backend, ranks, timeout, transport chosen,
 *   whether the checking layer wraps it, debug level, and the DIST_ and
 *   TORCH_ variables that are set), as torch's "ProcessGroupNCCL
 *   initialization options" / "Initialized with" lines. Like them it shows
 *   with DIST_LOG_LEVEL=INFO.
 *   DIST_DEBUG=DETAIL: one TRACE line per operation as it is issued
 *   (group, operation, sequence number, tensors, reduce op, root). The
 *   trace level is on only at DETAIL with DIST_LOG_LEVEL=INFO; otherwise
 *   the line costs the one level check of DIST_LOG.
 *
 * Secrets stay out of logs: DIST_TOKEN is shown as set, never its value. */
#include <inttypes.h>
#include <stdio.h>

#include "job/rendezvous.h"
#include "pg_int.h"

extern char **environ;

static const char *debug_name(dist_debug_level d) {
  return d == DIST_DEBUG_DETAIL ? "DETAIL" : d == DIST_DEBUG_INFO ? "INFO" : "OFF";
}

static void append_env(char *buf, size_t len, size_t *off) {
  size_t start = *off;
  for (char **e = environ; e && *e; e++) {
    if (strncmp(*e, "DIST_", 5) && strncmp(*e, "TORCH_", 6))
      continue;
    const char *eq = strchr(*e, '=');
    if (!eq)
      continue;
    if (!strncmp(*e, "DIST_TOKEN=", 11))
      continue; /* said below, never shown */
    dist__appendf(buf, len, off, "%s%.*s=%s", *off == start ? "" : " ", (int)(eq - *e), *e,
                  eq + 1);
  }
  if (dist__env_token_known()) /* read and taken out of the environment at init */
    dist__appendf(buf, len, off, "%sDIST_TOKEN=(set, not shown)", *off == start ? "" : " ");
  if (*off == start)
    dist__appendf(buf, len, off, "(none)");
}

bool dist__pg_conn_summary(const dist_pg *g, char *buf, size_t len) {
  while (g->inner)
    g = g->inner;
  const dist_backend_ops *o = g->ops;
  return g->priv && o->abi_version >= 7 && o->connections && o->connections(g->priv, buf, len);
}

void dist__pg_log_created(const dist_pg *g) {
  if (dist_get_debug_level() < DIST_DEBUG_INFO || !dist__log_on(DIST_LOG_INFO, DIST_SUBSYS_PG))
    return;
  const dist_pg_info *in = &g->info;
  char ranks[256], block[3072];
  dist__format_ranks(in->global_ranks, (size_t)in->size, ranks, sizeof ranks);
  size_t off = 0;
  dist__appendf(block, sizeof block, &off,
                "group %d (%s) initialized with:\n"
                "  backend: %s, transport: %s, checking layer: %s\n"
                "  ranks: %d (global %s), this rank: %d (global %d)\n"
                "  timeout: %.3f s, debug level: %s, NaN check: %s\n"
                "  environment: ",
                in->group_id, in->desc && in->desc[0] ? in->desc : in->name, in->backend,
                dist__pg_transport(g) ? dist__pg_transport(g) : "n/a", g->inner ? "on" : "off", in->size, ranks, in->rank,
                in->global_rank, (double)in->timeout_ms / 1000,
                debug_name(dist_get_debug_level()),
                atomic_load_explicit(&dist__nan_check_on, memory_order_relaxed) ? "on" : "off");
  append_env(block, sizeof block, &off);
  DIST_LOG(INFO, PG, "%s", block);
}

void dist__pg_log_op(const dist_pg *g, const dist_coll *c) {
  char what[256];
  dist_coll_describe(c, what, sizeof what);
  DIST_LOG(TRACE, COLL, "group %d (%s) #%" PRIu64 ": %s%s", g->info.group_id,
           g->desc[0] ? g->desc : g->name, c->seq, what,
           c->flags & DIST_COLL_ASYNC ? " (async)" : "");
}
