/* mon_gpu.c - where a stalled CUDA operation is on the GPU, for the
 * watchdog's stall report.
 *
 * A rank blocked in a CUDA collective may be waiting for its peers (the
 * operation runs on the GPU) or for its own GPU (the group's stream, or
 * the caller's stream it waits for, is busy with work queued before it,
 * such as a kernel that never ends). From the host both look the same; the
 * operation's start and end events tell them apart (dist_pg_gpu_progress),
 * and the report says which. */
#include <stdio.h>

#include "mon_int.h"

static const char *secs(int64_t ns, char *buf, size_t len) {
  double s = (double)ns / 1e9;
  snprintf(buf, len, s < 10 ? "%.1f s" : "%.0f s", s < 0 ? 0.0 : s);
  return buf;
}

void dist__mon_gpu_say(char *buf, size_t len, int rank, int kind, uint64_t seq,
                       const dist_gpu_progress *p, int64_t now_ns) {
  char a[32], b[32];
  const char *op = dist_op_name((dist_op_kind)kind);
  unsigned long long n = (unsigned long long)seq;
  switch (p->state) {
  case DIST_GPU_ENQUEUED:
    snprintf(buf, len, "  rank %d's %s #%llu has not been launched on the GPU: it is still "
             "on the host (before the backend queued it)\n", rank, op, n);
    break;
  case DIST_GPU_LAUNCHED:
    snprintf(buf, len, "  rank %d's %s #%llu was launched %s ago and has not started on the "
             "GPU: the stream is busy with work queued before it (a kernel on the group's "
             "stream, or on the caller's stream it waits for)\n", rank, op, n,
             secs(now_ns - p->launched_ns, a, sizeof a));
    break;
  case DIST_GPU_RUNNING:
    snprintf(buf, len, "  rank %d's %s #%llu has been running on the GPU for %s (launched %s "
             "ago): NCCL waits for its peers or moves data\n", rank, op, n,
             secs(p->gpu_start_ns ? now_ns - p->gpu_start_ns : 0, a, sizeof a),
             secs(now_ns - p->launched_ns, b, sizeof b));
    break;
  case DIST_GPU_COMPLETED:
    snprintf(buf, len, "  rank %d's %s #%llu has completed on the GPU; the host has not "
             "collected it yet\n", rank, op, n);
    break;
  }
}

char *dist__mon_gpu_note(const mon_group *g, uint64_t seq, char *diag) {
  const mon_op *op = &g->ring[seq % MON_RING];
  if (!g->pg || !atomic_load(&op->cuda) || atomic_load(&op->seq) != seq)
    return diag;
  dist_gpu_progress p;
  if (dist_pg_gpu_progress(g->pg, seq, &p) != DIST_OK)
    return diag;
  char line[512];
  dist__mon_gpu_say(line, sizeof line, dist__mon.rank, atomic_load(&op->kind),
                    atomic_load(&op->num), &p,
                    dist_clock_ns());
  size_t n = strlen(diag) + strlen(line) + 2;
  char *out = dist__malloc(n);
  if (!out)
    return diag;
  snprintf(out, n, "%s\n%.*s", diag, (int)strlen(line) - 1, line); /* no trailing newline */
  dist__free(diag);
  return out;
}
