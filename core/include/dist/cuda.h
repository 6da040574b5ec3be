/* cuda.h - CUDA streams, waits and GPU progress for operations on CUDA
 * tensors (the "nccl" backend and the cuda side of a device map such as
 * "cpu:cpu,cuda:nccl"). Every declaration exists in every build; without
 * NCCL the stream calls only store and return what they are given.
 *
 * STREAM SEMANTICS (torch's ProcessGroupNCCL). Each group runs its CUDA
 * operations on a stream of its own. An operation on CUDA tensors first
 * records an event on the calling thread's current stream and makes the
 * group's stream wait for it, so a kernel the caller launched just before
 * the call (on its current stream) has finished writing the input before
 * the collective reads it. The current stream is per thread and defaults
 * to the legacy default stream (stream 0): code that launches on another
 * stream says so with dist_cuda_set_current_stream first, as a torch user
 * does with torch.cuda.stream(s).
 *
 * WAITING ON A CUDA WORK.
 *   dist_work_wait(w, timeout)   does not block the host once the operation
 *       is launched: it makes the calling thread's current stream wait for
 *       the work's end event and returns DIST_OK (torch's Work.wait()).
 *       Kernels launched afterwards on that stream see the result; the
 *       host does not (read it after a stream or device synchronize, or
 *       use dist_work_synchronize). It returns the work's error when the
 *       work has already failed, and waits on the host only while the
 *       operation is not launched yet (the checking layer at DETAIL may
 *       hold an asynchronous call until its ranks agree). A work on cpu
 *       tensors waits on the host as always.
 *   dist_work_synchronize(w, timeout)  blocks the host until the operation
 *       has completed on the GPU (or failed, or timeout_ms passed: then
 *       DIST_E_TIMEOUT and the operation keeps running), for every work.
 *   dist_work_is_completed(w)   never blocks: true once the GPU has
 *       finished the operation (the group's progress thread saw its end
 *       event) or it failed.
 * The synchronous form of a collective on CUDA tensors (work == NULL)
 * blocks the host until the operation has completed on the GPU and returns
 * its status, so its failures surface where it was called.
 *
 * BUFFERS. Input and output tensors are in use by the group's stream from
 * the call until the work's end event: until then the caller must not
 * free them (cudaFree, or return them to a caching allocator that may hand
 * them to a kernel on another stream), nor write the inputs or read or
 * write the outputs from any stream that has not waited for the work
 * (dist_work_wait on that stream, or dist_work_synchronize). This is what
 * torch asks of tensors used on another stream (Tensor.record_stream):
 * libdist does not track allocators. Writing them from the current
 * stream before the call is fine: the collective waits for it.
 *
 * GPU PROGRESS. Each CUDA operation records an event on the group's stream
 * just before its NCCL calls and one just after, so an operation is in one
 * of four states (dist_gpu_state); the monitor's stall reports name it and
 * the tracer stores each operation's GPU start and end (trace.db, events
 * of kind "gpu", on the job clock). */
#ifndef DIST_CUDA_H
#define DIST_CUDA_H

#include <stdint.h>

#include <dist/export.h>
#include <dist/pg.h>

DIST_EXTERN_C_BEGIN

/* Makes stream (a cudaStream_t; NULL: the legacy default stream) the
 * current stream of the calling thread for libdist's CUDA operations. The
 * stream must belong to the device the group uses and outlive every
 * operation issued while it is current. Never fails (DIST_OK). */
DIST_API int dist_cuda_set_current_stream(void *stream);
/* The calling thread's current stream (NULL: the legacy default stream). */
DIST_API void *dist_cuda_current_stream(void);

/* Blocks the host until work has completed (on the GPU for a CUDA work) or
 * timeout_ms passed (< 0: as long as the operation may take; 0 polls).
 * Returns the operation's status, or DIST_E_TIMEOUT when this wait ran out
 * first. See WAITING ON A CUDA WORK above. */
DIST_API int dist_work_synchronize(dist_work *work, int64_t timeout_ms);

/* Where one CUDA operation is (the watchdog's four states). */
typedef enum dist_gpu_state {
  DIST_GPU_ENQUEUED = 0, /* called, not yet launched on the group's stream */
  DIST_GPU_LAUNCHED = 1, /* launched; the GPU has not reached it: the
                            stream (or the caller's stream it waits for)
                            is busy with work queued before it */
  DIST_GPU_RUNNING = 2,  /* started on the GPU, not finished (waiting for
                            peers, or moving data) */
  DIST_GPU_COMPLETED = 3 /* finished on the GPU */
} dist_gpu_state;

DIST_API const char *dist_gpu_state_name(dist_gpu_state s);

typedef struct dist_gpu_progress {
  dist_gpu_state state;
  int64_t launched_ns;   /* dist_clock_ns() at launch; 0 while ENQUEUED */
  int64_t gpu_start_ns;  /* GPU start on dist_clock_ns()'s clock; 0: not yet
                            or unknown */
  int64_t gpu_end_ns;    /* GPU end; 0: not yet or unknown */
} dist_gpu_progress;

/* The GPU progress of group's operation seq (its issue ordinal,
 * dist_coll.ord of an observer event's coll; NULL group: the default group) on CUDA tensors. Any
 * thread; never blocks (queries events). A seq the backend has not
 * launched yet reads ENQUEUED (so ask only about operations on CUDA
 * tensors: a cpu operation of a device map reads so too); one that
 * completed long ago reads COMPLETED without times. DIST_E_NOTSUP when the
 * group has no CUDA backend; DIST_E_INVAL for seq 0, a NULL out or a
 * group that does not exist. */
DIST_API int dist_pg_gpu_progress(dist_pg *group, uint64_t seq, dist_gpu_progress *out);

DIST_EXTERN_C_END

#endif
