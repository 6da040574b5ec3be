/* shm_cma.c - single-copy transfers for the shared-memory engine: a rank
 * reads a peer's user buffer directly with process_vm_readv (Linux
 * cross-memory attach), instead of the peer copying it into the segment
 * and this rank copying it out again.
 *
 * all_gather, gather and all_to_all use it for pieces of the segment's
 * cma_min .. cma_max bytes (DIST_SHM_CMA_MIN_KB / _MAX_KB, default
 * 16 KiB .. 12 MiB), broadcast up to DIST_SHM_BCAST_DIRECT_KB (4 MiB): there each
 * rank's own core does the only copy, where staging costs two. Small
 * pieces stay in the segment (the system call and page pinning cost more
 * than a copy), and so do very large ones and broadcasts past 4 MiB, where
 * a pipelined copy-in/copy-out through cache-resident slots keeps both
 * cores busy. Up to 4 MiB a broadcast goes single-copy: the staged
 * pipeline's cross-core copies run 3-4x slower in some minutes on this VM
 * while the reader's one kernel copy does not (shm_seg.c has the figures,
 * measured with 2 ranks against Open MPI's vader, which uses CMA
 * throughout). The
 * kernel's copy runs at about half a user copy here (it pins and copies
 * 4 KiB at a time, with ordinary stores), so a direct piece costs its
 * reader about what the staged writer and reader spend together; the
 * crossover, measured with both ranks alternating the two on the same
 * calls, lies between 12 MiB pieces (direct 4-10% faster for all_gather
 * and all_to_all) and 16 MiB (staged 12-18% faster).
 *
 * A direct operation is two steps: the first publishes the source
 * addresses (cnt[p][2N ..]) with the descriptor; after its check every
 * reader pulls what it needs; the second step keeps every writer's buffer
 * alive until all readers are done.
 *
 * Whether CMA works (same user, no ptrace restriction, peers in this pid
 * namespace, no seccomp filter) is probed at creation: each rank reads a
 * known word from every peer, and the ranks agree through the engine's
 * first step, so either every rank uses it or none does. */
#include <stdio.h>
#include <sys/uio.h>
#include <unistd.h>

#include "shm_int.h"

#define PROBE_MAGIC 0x70726f6265636d61ull /* "probecma" */

static bool probe_peer(const dist__shm *s, int j) {
  const shm_ctl *c = s->peer[j].ctl;
  if (c->pid != (int32_t)s->g->peers[j].pid || !c->probe_addr)
    return false;
  uint64_t v = 0;
  struct iovec local = {&v, sizeof v}, remote = {(void *)(uintptr_t)c->probe_addr, sizeof v};
  ssize_t n = process_vm_readv(c->pid, &local, 1, &remote, 1, 0);
  return n == (ssize_t)sizeof v && v == (PROBE_MAGIC ^ (uint64_t)j);
}

void dist__shm_cma_prepare(dist__shm *s) {
  shm_ctl *c = s->peer[s->rank].ctl;
  c->probe = PROBE_MAGIC ^ (uint64_t)s->rank;
  c->probe_addr = (uint64_t)(uintptr_t)&c->probe;
}

int dist__shm_cma_agree(dist__shm *s, int64_t deadline_ms, dist__errbuf *err) {
  bool ok = s->seg->cma_min > 0 && s->size > 1;
  for (int j = 0; j < s->size && ok; j++)
    ok = j == s->rank || probe_peer(s, j);
  /* The engine's first step: every rank's verdict in its polled line. */
  dist_coll c = {.kind = DIST_OP_BARRIER, .root = -1, .timeout_ms = s->g->timeout_ms};
  dist__cpu_op op = {&c, deadline_ms, err, -1};
  uint64_t g = shm_begin(s);
  s->peer[s->rank].hdr[SHM_L(g)]->inl[0] = ok;
  int rc = shm_step(s, &op, g, false);
  s->step = g + 1;
  if (rc != DIST_OK)
    return rc;
  for (int j = 0; j < s->size; j++)
    ok = ok && s->peer[j].hdr[SHM_L(g)]->inl[0];
  s->cma = ok;
  s->cma_min = s->seg->cma_min;
  s->cma_max = s->seg->cma_max;
  s->bcast_direct_max = s->seg->bcast_direct_max;
  DIST_LOG(DEBUG, SHM, "group %s: single-copy transfers %s", s->g->name, ok ? "on" : "off");
  return DIST_OK;
}

int dist__shm_cma_read(dist__shm *s, dist__cpu_op *op, int j, void *dst, uint64_t src,
                       size_t len) {
  uint8_t *d = dst;
  while (len) {
    struct iovec local = {d, len}, remote = {(void *)(uintptr_t)src, len};
    ssize_t n = process_vm_readv(s->g->peers[j].pid, &local, 1, &remote, 1, 0);
    if (n > 0) {
      d += n, src += (uint64_t)n, len -= (size_t)n;
      continue;
    }
    if (n < 0 && errno == EINTR)
      continue;
    int e = n < 0 ? errno : EIO;
    /* A peer that failed first (and may have left, or reused its buffer)
     * explains this better. */
    DIST_TRY(dist__shm_peer_failed(s, op));
    char who[160], label[96];
    dist__cpu_peer_name(s->g, j, who, sizeof who);
    dist__cpu_op_label(op->c, label, sizeof label);
    if (e == ESRCH) {
      int rc = dist__shm_fail(s, op, DIST_E_PEER_LOST, "%s: %s exited during the transfer",
                              label, who);
      dist__cpu_peer_lost(s->g, j, op->err->msg);
      return rc;
    }
    return dist__shm_fail(s, op, DIST_E_BACKEND, "%s: reading %zu bytes from %s failed: %s",
                          label, len, who, strerror(e));
  }
  return DIST_OK;
}
