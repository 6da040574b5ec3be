/* shm_seg.c - the shared-memory engine's segment: sizing, creation by
 * group rank 0, the exchange through the group store, mapping by the
 * others, and cleanup.
 *
 * The exchange is itself a small collective so that every rank reaches
 * the same verdict (the backend can fall back to TCP on all of them or on
 * none):
 *   1. rank 0 creates the segment (an anonymous memfd; see xchg below for
 *      the named fallback), sizes it with posix_fallocate (tmpfs pages are
 *      reserved now, so a full tmpfs is an error here rather than a SIGBUS
 *      later), writes the header and publishes where to find it
 *      ("shm/name<round>", or "!reason");
 *   2. every other rank opens, maps and checks it;
 *   3. every rank publishes "shm/ok<round>/<rank>" ("" or the reason it
 *      failed) and reads everyone's; any failure fails every rank (or
 *      sends every rank to the named round);
 *   4. rank 0 closes its descriptor (a named segment is unlinked): from
 *      then on the memory lives exactly as long as the mappings.
 * The mapping is MADV_DONTFORK: a child forked after init (workers,
 * system()) never sees it. The pidfds are close-on-exec. */
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "shm_int.h"

#define KIB ((size_t)1024)
#define PAGE ((size_t)4096)

static size_t round_up(size_t x, size_t a) { return (x + a - 1) / a * a; }

static int64_t env_or(const char *name, int64_t lo, int64_t hi, int64_t dflt) {
  int64_t v;
  if (dist__env_int(name, lo, hi, dflt, &v) != DIST_OK)
    return dflt; /* warned once (dist__env_warn) */
  return v;
}

/* Geometry and algorithm thresholds, chosen by rank 0 so every rank
 * chooses alike (environment, for tuning):
 *   DIST_SHM_SLOT_KB      staging per rank and parity (default 8 MiB / N,
 *                         64..512 KiB: 4 MiB for 2 ranks, 17 MiB for 64)
 *   DIST_SHM_SMALL_BYTES  all_reduce/reduce in one step up to this size
 *                         (64 KiB for 2 ranks, else 16 KiB)
 *   DIST_SHM_PIPE_STEPS, DIST_SHM_PIPE_MIN_KB  pipelining (shm_chunk:
 *                         about 2 steps of at least 128 KiB, at most a
 *                         slot; measured with 2 ranks, 2 against 4 and 8
 *                         steps: a 1 MiB broadcast, all_reduce and
 *                         reduce_scatter ran 1.5-2x faster, larger sizes
 *                         use whole slots either way)
 *   DIST_SHM_CMA_MIN_KB, DIST_SHM_CMA_MAX_KB   single-copy pieces
 *                         (16 KiB .. 12 MiB; 0 turns it off; shm_cma.c)
 *   DIST_SHM_BCAST_DIRECT_KB  broadcasts single-copy up to this (4 MiB).
 *                         Measured with 2 ranks, 10 launches each: the
 *                         staged pipeline moves every chunk from one
 *                         core's cache to the other's, which this VM does
 *                         fast in some minutes and 3-4x slower in others
 *                         (1 MiB: 55-88 us or 180-580 us); the reader's
 *                         single kernel copy stays at 80 us (Open MPI's
 *                         figure, by the same means), 2 MiB 160, 4 MiB 370
 *                         against staged 230-350 or 930. */
static void geometry(shm_seg *h, int n) {
  size_t dflt = (8192 * KIB) / (size_t)n;
  dflt = dflt > 512 * KIB ? 512 * KIB : dflt < 64 * KIB ? 64 * KIB : dflt;
  size_t slot = (size_t)env_or("DIST_SHM_SLOT_KB", 16, 1 << 20, (int64_t)(dflt / KIB)) * KIB;
  slot = round_up(slot, PAGE);
  /* A block of an all_reduce chunk (slot / n, plus alignment) or one
   * sub-slot of reduce_scatter (slot / (n - 1)). */
  size_t red = round_up(slot / (size_t)(n > 1 ? n - 1 : 1) + 256, PAGE);
  size_t cnt = round_up(2 * 3 * (size_t)n * sizeof(int64_t), SHM_LINE);
  size_t fixed = round_up(sizeof(shm_ctl), SHM_LINE) + SHM_DEPTH * sizeof(shm_hdr) +
                 sizeof(shm_info) + round_up(sizeof(shm_hist), SHM_LINE);
  h->cnt_off = fixed;
  h->data_off = round_up(fixed + cnt, PAGE);
  h->red_off = h->data_off + 2 * slot;
  h->region_bytes = h->red_off + 2 * red;
  h->slot_bytes = slot;
  h->red_bytes = red;
  h->nranks = (uint32_t)n;
  h->seg_bytes = round_up(sizeof(shm_seg), PAGE) + (uint64_t)n * h->region_bytes;
  /* Two ranks read as much across cores either way; the one-step path
   * saves a barrier. More ranks: each would read N - 1 vectors. */
  int64_t small = env_or("DIST_SHM_SMALL_BYTES", 0, (int64_t)slot, n == 2 ? 65536 : 16384);
  h->small_allreduce = (uint64_t)(small < (int64_t)slot ? small : (int64_t)slot);
  h->pipe_steps = (uint64_t)env_or("DIST_SHM_PIPE_STEPS", 1, 1024, 2);
  h->pipe_min = (uint64_t)env_or("DIST_SHM_PIPE_MIN_KB", 4, 1 << 20, 128) * KIB;
  h->cma_min = (uint64_t)env_or("DIST_SHM_CMA_MIN_KB", 0, 1 << 30, 16) * KIB;
  h->cma_max = (uint64_t)env_or("DIST_SHM_CMA_MAX_KB", 0, 1 << 30, 12288) * KIB;
  h->bcast_direct_max = (uint64_t)env_or("DIST_SHM_BCAST_DIRECT_KB", 0, 1 << 30, 4096) * KIB;
}

/* Fills s's per-rank pointers from the header. */
static void lay_out(dist__shm *s) {
  shm_seg *h = s->seg;
  uint8_t *base = (uint8_t *)h + round_up(sizeof(shm_seg), PAGE);
  for (int r = 0; r < s->size; r++) {
    uint8_t *reg = base + (size_t)r * h->region_bytes;
    shm_peer *p = &s->peer[r];
    p->ctl = (shm_ctl *)reg;
    p->info = (shm_info *)(reg + round_up(sizeof(shm_ctl), SHM_LINE) + SHM_DEPTH * sizeof(shm_hdr));
    p->hist = ((shm_hist *)(p->info + 1))->key;
    for (int k = 0; k < SHM_DEPTH; k++)
      p->hdr[k] = (shm_hdr *)(reg + round_up(sizeof(shm_ctl), SHM_LINE)) + k;
    for (int k = 0; k < 2; k++) {
      p->cnt[k] = (int64_t *)(reg + h->cnt_off) + (size_t)k * 3 * (size_t)s->size;
      p->data[k] = reg + h->data_off + (size_t)k * h->slot_bytes;
      p->red[k] = reg + h->red_off + (size_t)k * h->red_bytes;
    }
  }
  s->slot = h->slot_bytes;
  s->red = h->red_bytes;
  s->small_ar = h->small_allreduce;
  s->pipe_steps = h->pipe_steps;
  s->pipe_min = h->pipe_min;
}

static void sanitize(char *dst, size_t len, const char *src) {
  size_t i = 0;
  for (; src && src[i] && i + 1 < len; i++) {
    char ch = src[i];
    bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
              ch == '-' || ch == '_';
    dst[i] = ok ? ch : '_';
  }
  dst[i] = '\0';
}

static void make_name(const dist__cpu_group *g, char *out, size_t len) {
  char job[48], grp[96];
  sanitize(job, sizeof job, g->job_id[0] ? g->job_id : "nojob");
  sanitize(grp, sizeof grp, g->name);
  uint64_t rnd = 0;
  if (getrandom(&rnd, sizeof rnd, GRND_NONBLOCK) != (ssize_t)sizeof rnd)
    rnd = (uint64_t)dist__now_ns() ^ ((uint64_t)getpid() << 32);
  snprintf(out, len, "/dist.%s.%s.%d.%016" PRIx64, job, grp, (int)getpid(), rnd);
}

/* One round of the exchange. Round 0 shares an anonymous memfd, which the
 * others open through /proc/<pid>/fd/<fd> of rank 0: the segment never has
 * a name, so nothing can be left behind in /dev/shm whatever happens to
 * the processes. Round 1 runs only when some rank could not use round 0's
 * (no memfd, a /proc it may not look into, or DIST_SHM_MEMFD=0): a named
 * POSIX segment, unlinked as soon as every rank has mapped it (a crash
 * between its creation and that point can leave it behind). */
typedef struct xchg {
  int round;
  char name[256]; /* "memfd:<pid>:<fd>" or the shm_open name */
  int fd;
} xchg;

/* Rank 0: creates, sizes and initialises the segment. */
static int create_seg(dist__shm *s, xchg *x, dist__errbuf *err) {
  shm_seg h = {0};
  geometry(&h, s->size);
  if (x->round == 0) {
    if (env_or("DIST_SHM_MEMFD", 0, 1, 1) == 0)
      return dist__err_set(err, DIST_E_NOTSUP, "memfd segments are off (DIST_SHM_MEMFD=0)");
    x->fd = memfd_create("dist-shm", MFD_CLOEXEC);
    if (x->fd < 0)
      return dist__err_sys(err, errno, "memfd_create");
    snprintf(x->name, sizeof x->name, "memfd:%d:%d", (int)getpid(), x->fd);
  } else {
    make_name(s->g, x->name, sizeof x->name);
    x->fd = shm_open(x->name, O_CREAT | O_EXCL | O_RDWR, 0600);
    if (x->fd < 0)
      return dist__err_sys(err, errno, "shm_open(%s)", x->name);
  }
  int e = ftruncate(x->fd, (off_t)h.seg_bytes) != 0 ? errno : 0;
  if (!e) /* reserve the pages now: a full tmpfs is an error here, not a SIGBUS later */
    e = posix_fallocate(x->fd, 0, (off_t)h.seg_bytes);
  if (e)
    return dist__err_sys(err, e, "reserving %" PRIu64 " bytes of shared memory", h.seg_bytes);
  void *m = mmap(NULL, h.seg_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, x->fd, 0);
  if (m == MAP_FAILED)
    return dist__err_sys(err, errno, "mmap of %" PRIu64 " bytes of shared memory", h.seg_bytes);
  s->seg = m;
  s->bytes = h.seg_bytes;
  h.magic = SHM_MAGIC;
  h.version = SHM_VERSION;
  memcpy(s->seg, &h, sizeof h); /* fresh pages are zero: counters, flags */
  return DIST_OK;
}

static bool header_ok(const dist__shm *s) {
  shm_seg want = {0};
  geometry(&want, s->size); /* only the layout rules; sizes come from rank 0 */
  const shm_seg *h = s->seg;
  return h->magic == SHM_MAGIC && h->version == SHM_VERSION && h->nranks == (uint32_t)s->size &&
         h->seg_bytes == s->bytes && h->slot_bytes % PAGE == 0 && h->slot_bytes >= 16 * KIB &&
         h->red_bytes >= h->slot_bytes / (uint64_t)(s->size > 1 ? s->size - 1 : 1) &&
         h->cnt_off == want.cnt_off && h->data_off >= want.data_off &&
         h->red_off >= h->data_off + 2 * h->slot_bytes &&
         h->region_bytes >= h->red_off + 2 * h->red_bytes &&
         round_up(sizeof(shm_seg), PAGE) + (uint64_t)s->size * h->region_bytes <= s->bytes &&
         h->small_allreduce <= h->slot_bytes && h->pipe_steps >= 1 && h->pipe_min >= 4 * KIB;
}

/* Ranks > 0: opens, maps and checks the segment rank 0 made. */
static int open_seg(dist__shm *s, xchg *x, dist__errbuf *err) {
  int pid, fd;
  char path[64];
  if (sscanf(x->name, "memfd:%d:%d", &pid, &fd) == 2) {
    snprintf(path, sizeof path, "/proc/%d/fd/%d", pid, fd);
    x->fd = open(path, O_RDWR | O_CLOEXEC);
  } else {
    x->fd = shm_open(x->name, O_RDWR, 0600);
  }
  if (x->fd < 0)
    return dist__err_sys(err, errno, "opening rank 0's shared segment %s", x->name);
  struct stat st;
  if (fstat(x->fd, &st) != 0)
    return dist__err_sys(err, errno, "fstat of %s", x->name);
  if ((size_t)st.st_size < sizeof(shm_seg))
    return dist__err_set(err, DIST_E_BACKEND, "shared segment %s is too small (%lld bytes)",
                         x->name, (long long)st.st_size);
  void *m = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, x->fd, 0);
  if (m == MAP_FAILED)
    return dist__err_sys(err, errno, "mmap of %s", x->name);
  s->seg = m;
  s->bytes = (size_t)st.st_size;
  const shm_seg *h = s->seg;
  if (!header_ok(s))
    return dist__err_set(err, DIST_E_BACKEND,
                         "shared segment %s does not match this build or group (magic %#" PRIx64
                         ", version %u, %u ranks, %zu bytes; this rank expects version %u, %d "
                         "ranks)",
                         x->name, h->magic, h->version, h->nranks, s->bytes, SHM_VERSION, s->size);
  return DIST_OK;
}

/* Creates (rank 0) or opens (the others) the round's segment; the outcome
 * goes to the exchange. */
static int map_seg(dist__shm *s, dist_store *store, int64_t deadline_ms, xchg *x,
                   dist__errbuf *err) {
  char key[32];
  snprintf(key, sizeof key, "shm/name%d", x->round);
  if (s->rank == 0) {
    int rc = create_seg(s, x, err);
    char bad[DIST_ERRMSG_LEN + 2];
    snprintf(bad, sizeof bad, "!%s", err->msg);
    const char *val = rc == DIST_OK ? x->name : bad;
    int src = dist_store_set(store, key, val, strlen(val));
    if (src != DIST_OK && rc == DIST_OK)
      rc = dist__err_set(err, src, "publishing the shared segment's name: %s",
                         dist_store_errmsg(store));
    return rc;
  }
  const char *k = key;
  int rc = dist_store_wait(store, &k, 1, dist__remaining_ms(deadline_ms));
  void *val = NULL;
  size_t len = 0;
  if (rc == DIST_OK)
    rc = dist_store_get(store, key, &val, &len);
  if (rc != DIST_OK)
    return dist__err_set(err, rc, "waiting for rank 0's shared segment name: %s",
                         dist_store_errmsg(store));
  if (len == 0 || ((char *)val)[0] == '!') {
    rc = dist__err_set(err, DIST_E_BACKEND, "rank 0 could not create the shared segment: %s",
                       len ? (char *)val + 1 : "(no reason given)");
  } else {
    snprintf(x->name, sizeof x->name, "%s", (char *)val);
    rc = open_seg(s, x, err);
  }
  dist_free(val);
  return rc;
}

/* Every rank publishes its verdict ("" or why it failed) and reads all of
 * them, so every rank decides alike; *retry: some rank failed to set up
 * the segment (not the store), worth a round 1. */
static int exchange(dist__shm *s, dist_store *store, int64_t deadline_ms, xchg *x, int my_rc,
                    bool *retry, dist__errbuf *err) {
  char key[64];
  snprintf(key, sizeof key, "shm/ok%d/%d", x->round, s->rank);
  const char *mine = my_rc == DIST_OK ? "" : err->msg[0] ? err->msg : "failed";
  int rc = dist_store_set(store, key, mine, strlen(mine));
  if (rc != DIST_OK)
    return dist__err_set(err, rc, "publishing this rank's shared-memory status: %s",
                         dist_store_errmsg(store));
  size_t n = (size_t)s->size;
  char (*keys)[32] = dist__calloc(n, sizeof *keys);
  const char **kp = dist__calloc(n, sizeof *kp);
  void **vals = dist__calloc(n, sizeof *vals);
  size_t *lens = dist__calloc(n, sizeof *lens);
  if (!keys || !kp || !vals || !lens) {
    dist__free(keys), dist__free(kp), dist__free(vals), dist__free(lens);
    *retry = false;
    return dist__err_set(err, DIST_E_NOMEM, "out of memory");
  }
  for (size_t r = 0; r < n; r++) {
    snprintf(keys[r], sizeof keys[r], "shm/ok%d/%zu", x->round, r);
    kp[r] = keys[r];
  }
  char who[160];
  int missing = -1;
  int src = dist__cpu_store_get_all(store, kp, n, dist__remaining_ms(deadline_ms), vals, lens,
                                    &missing);
  rc = my_rc;
  if (src != DIST_OK) {
    *retry = false;
    rc = missing >= 0 ? dist__err_set(err, src, "waiting for %s to map the shared segment",
                                      dist__cpu_peer_name(s->g, missing, who, sizeof who))
                      : dist__err_set(err, src, "waiting for the members to map the shared "
                                      "segment: %s", dist_store_errmsg(store));
  }
  for (size_t r = 0; src == DIST_OK && r < n; r++)
    if (lens[r]) {
      *retry = true;
      if (rc == DIST_OK)
        rc = dist__err_set(err, DIST_E_BACKEND, "%s could not use the shared segment: %s",
                           dist__cpu_peer_name(s->g, (int)r, who, sizeof who), (char *)vals[r]);
    }
  for (size_t r = 0; r < n; r++)
    dist_free(vals[r]);
  dist__free(keys), dist__free(kp), dist__free(vals), dist__free(lens);
  return rc;
}

static int pidfd_open_(pid_t pid) {
#ifdef SYS_pidfd_open
  return (int)syscall(SYS_pidfd_open, pid, 0);
#else
  (void)pid;
  errno = ENOSYS;
  return -1;
#endif
}

/* pidfds of the peers, for death detection while waiting. A peer whose pid
 * this process cannot see (another pid namespace) gets none: its death then
 * shows as a timeout. */
static int open_pidfds(dist__shm *s, dist__errbuf *err) {
  for (int r = 0; r < s->size; r++) {
    s->pidfd[r] = -1;
    if (r == s->rank)
      continue;
    pid_t pid = s->g->peers[r].pid;
    if (pid <= 0 || s->peer[r].ctl->pid != pid) {
      DIST_LOG(INFO, SHM, "group %s: rank %d's pid %d differs from the one it sees (%d): "
               "no death detection for it", s->g->name, r, (int)pid, (int)s->peer[r].ctl->pid);
      continue;
    }
    s->pidfd[r] = pidfd_open_(pid);
    if (s->pidfd[r] < 0 && errno == ESRCH) {
      char who[160];
      return dist__err_set(err, DIST_E_PEER_LOST, "%s exited while the shared segment was set up",
                           dist__cpu_peer_name(s->g, r, who, sizeof who));
    }
  }
  return DIST_OK;
}

/* One round: map, exchange, clean up the name and descriptor. */
static int seg_round(dist__shm *s, dist_store *store, int64_t deadline_ms, xchg *x, bool *retry,
                     dist__errbuf *err) {
  int rc = map_seg(s, store, deadline_ms, x, err);
  if (rc == DIST_OK) {
    lay_out(s);
    s->peer[s->rank].ctl->pid = (int32_t)getpid();
    dist__shm_cma_prepare(s);
    atomic_fetch_add(&s->seg->mapped, 1);
  }
  rc = exchange(s, store, deadline_ms, x, rc, retry, err);
  /* Every rank has mapped it (or given up): the name can go. Rank 0's
   * memfd descriptor stays open until here, for the others to open. */
  if (x->round == 1 && x->name[0] && (rc == DIST_OK || s->rank == 0))
    shm_unlink(x->name); /* the first rank wins; ENOENT for the others */
  if (x->fd >= 0)
    close(x->fd);
  x->fd = -1;
  if (rc != DIST_OK && s->seg) {
    munmap(s->seg, s->bytes);
    s->seg = NULL;
  }
  return rc;
}

int dist__shm_seg_create(dist__shm *s, dist_store *store, int64_t deadline_ms,
                         dist__errbuf *err) {
  xchg x = {0, "", -1};
  bool retry = false;
  int rc = seg_round(s, store, deadline_ms, &x, &retry, err);
  /* A named segment is the cure for a memfd this kernel refuses, not for
   * this process running out of memory. */
  if (rc != DIST_OK && retry && rc != DIST_E_NOMEM) {
    DIST_LOG(INFO, SHM, "group %s: %s; trying a named segment", s->g->name, err->msg);
    dist__err_clear(err);
    x = (xchg){1, "", -1};
    rc = seg_round(s, store, deadline_ms, &x, &retry, err);
  }
  if (rc == DIST_OK && madvise(s->seg, s->bytes, MADV_DONTFORK) != 0)
    DIST_LOG(INFO, SHM, "madvise(MADV_DONTFORK) failed: %s", strerror(errno));
  if (rc == DIST_OK)
    rc = open_pidfds(s, err);
  if (rc == DIST_OK)
    rc = dist__shm_cma_agree(s, deadline_ms, err);
  if (rc == DIST_OK)
    DIST_LOG(DEBUG, SHM, "group %s: shared segment %s, %zu bytes, slot %zu, red %zu, small %zu",
             s->g->name, x.name, s->bytes, s->slot, s->red, s->small_ar);
  return rc;
}

void dist__shm_seg_destroy(dist__shm *s) {
  for (int r = 0; s->pidfd && r < s->size; r++)
    if (s->pidfd[r] >= 0)
      close(s->pidfd[r]);
  if (s->seg)
    munmap(s->seg, s->bytes);
  s->seg = NULL;
}
