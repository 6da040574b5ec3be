/* cuda.c - the device-independent half of dist/cuda.h: the calling
 * thread's current stream, GPU progress queries routed to the group that
 * runs CUDA operations, and GPU times announced on the user's group.
 *
 * Nothing here touches CUDA: a stream is an opaque pointer that the nccl
 * backend (core/src/backends/nccl/) hands to the CUDA runtime, so this builds and
 * answers in every configuration. */
#include "pg_int.h"

/* Per thread, as torch's current stream; NULL is the legacy default
 * stream (cudaStreamLegacy's behaviour for handle 0). */
static _Thread_local void *current_stream;

int dist_cuda_set_current_stream(void *stream) {
  current_stream = stream;
  return DIST_OK;
}

void *dist_cuda_current_stream(void) { return current_stream; }

const char *dist_gpu_state_name(dist_gpu_state s) {
  switch (s) {
  case DIST_GPU_ENQUEUED: return "enqueued on the host";
  case DIST_GPU_LAUNCHED: return "launched, not started on the GPU";
  case DIST_GPU_RUNNING: return "running on the GPU";
  case DIST_GPU_COMPLETED: return "completed on the GPU";
  }
  return "?";
}

int dist_pg_gpu_progress(dist_pg *group, uint64_t seq, dist_gpu_progress *out) {
  if (!out || !seq)
    return dist__set_last_error(DIST_E_INVAL, "dist_pg_gpu_progress: %s",
                                out ? "seq 0 names no operation" : "NULL out");
  group = group ? group : dist__pg_default();
  if (!group || group == DIST_GROUP_NON_MEMBER || !dist__pg_handle_live(group))
    return dist__set_last_error(DIST_E_INVAL, "dist_pg_gpu_progress: not a live group");
  memset(out, 0, sizeof *out);
  int rc = dist__pg_gpu_progress(group, seq, out);
  if (rc == DIST_E_NOTSUP)
    dist__set_last_error(rc, "group %s runs no CUDA operations", group->name);
  return rc;
}

/* The user group an operation of g belongs to: a device map's inner group
 * serves its map group, which may itself be wrapped. */
static dist_pg *user_group(dist_pg *g) {
  if (g->served)
    g = g->served;
  while (g->outer)
    g = g->outer;
  return g;
}

void dist_backend_gpu_times(dist_pg *self, const dist_coll *c, int64_t start_ns,
                            int64_t end_ns) {
  if (!self || self == DIST_GROUP_NON_MEMBER || !c || !c->seq || !dist__obs_on())
    return;
  dist_pg *g = user_group(self);
  if (g->internal)
    return;
  dist__obs_emit_gpu(g, c, start_ns, end_ns);
}
