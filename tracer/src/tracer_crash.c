/* tracer_crash.c - at a fatal signal, the ring goes raw to a side file.
 *
 * SQLite is not async-signal-safe, so on SIGTERM, SIGINT, SIGABRT, SIGSEGV,
 * SIGBUS, SIGFPE and SIGILL (every fatal signal the monitor's backtrace
 * handles: a division by zero left a trace a step or more behind) the
 * handler write(2)s a header and the ring's slots to
 * `rank-<R>.ring` (trace_rec.h's tr_ring_file), which the merge imports,
 * and copies /proc/self/maps to `rank-<R>.maps`, so the merge can place the
 * records' return addresses in their modules (ring_callsites.c): records
 * the writer had not committed name their call sites too;
 * then it chains to what the program had installed (a user's
 * checkpoint-on-SIGTERM keeps working), or restores the default action and
 * raises the signal again so the process dies as it would have. Only
 * async-signal-safe calls (open, read, write, close, sigaction, raise). The
 * handler runs on an alternate stack: a rank whose stack overflowed has
 * none left to run it on, and would die with its last records unwritten. */
#define _GNU_SOURCE
#include "tracer_int.h"

#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static const int sigs[] = {SIGTERM, SIGINT, SIGABRT, SIGSEGV, SIGBUS, SIGFPE, SIGILL};
#define N_SIGS (sizeof sigs / sizeof sigs[0])
static struct sigaction old_act[N_SIGS];
static tracer *_Atomic crash_tracer;
static _Atomic int dumping;
static pid_t owner; /* a forked child that crashes must not overwrite the rank's dump */

static void write_all(int fd, const void *buf, size_t len) {
  const char *p = buf;
  while (len) {
    ssize_t n = write(fd, p, len);
    if (n <= 0)
      return;
    p += n;
    len -= (size_t)n;
  }
}

/* The ring's slots, each copied as a sequence-lock reader copies it
 * (tr_ring_copy_slot) into a static buffer (one dump at a time, `dumping`;
 * the program's alternate stack may be small): producers on other threads
 * may still be recording while the handler runs, and write(2) straight
 * from the ring would be a plain read racing their stores. A slot caught
 * mid-write is dumped busy, which the merge's import skips. */
static void write_ring(int fd, const tr_ring *r, uint64_t slots) {
  static uint64_t buf[64][TR_WORDS];
  for (uint64_t s = 0; s < slots;) {
    uint64_t n = slots - s < 64 ? slots - s : 64;
    for (uint64_t i = 0; i < n; i++)
      tr_ring_copy_slot(r, s + i, buf[i]);
    write_all(fd, buf, (size_t)n * TR_SLOT);
    s += n;
  }
}

/* The process's mappings as the kernel lists them (read and written in
 * pieces: no allocation in a handler). */
static void copy_maps(const char *path) {
  int in = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
  int out = in < 0 ? -1 : open(path, O_CREAT | O_WRONLY | O_TRUNC | O_CLOEXEC, 0600);
  char buf[4096];
  ssize_t n;
  while (out >= 0 && (n = read(in, buf, sizeof buf)) > 0)
    write_all(out, buf, (size_t)n);
  if (out >= 0)
    close(out);
  if (in >= 0)
    close(in);
}

static void dump(tracer *t, int sig) {
  int fd = open(t->ring_path, O_CREAT | O_WRONLY | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0)
    return;
  tr_ring_file hdr;
  memset(&hdr, 0, sizeof hdr);
  memcpy(hdr.magic, TR_RING_MAGIC, 8);
  hdr.version = 1;
  hdr.slot_size = TR_SLOT;
  hdr.slots = t->ring.mask + 1;
  hdr.head = atomic_load(&t->ring.head);
  hdr.rank = t->rank;
  hdr.signal = sig;
  hdr.t_ns = dist_clock_ns() + tr_skew(t);
  memcpy(hdr.job_id, t->job_id, sizeof hdr.job_id - 1);
  write_all(fd, &hdr, sizeof hdr);
  write_ring(fd, &t->ring, hdr.slots);
  close(fd);
  copy_maps(t->maps_path);
}

static int index_of(int sig) {
  for (size_t i = 0; i < N_SIGS; i++)
    if (sigs[i] == sig)
      return (int)i;
  return -1;
}

static void on_signal(int sig, siginfo_t *info, void *uctx) {
  tracer *t = atomic_load(&crash_tracer);
  int expected = 0;
  if (t && getpid() == owner && atomic_compare_exchange_strong(&dumping, &expected, 1)) {
    dump(t, sig);
    atomic_store(&dumping, 0);
  }
  int i = index_of(sig);
  struct sigaction *old = i >= 0 ? &old_act[i] : NULL;
  if (old && (old->sa_flags & SA_SIGINFO) && old->sa_sigaction) {
    old->sa_sigaction(sig, info, uctx);
    return;
  }
  if (old && old->sa_handler == SIG_IGN)
    return;
  if (old && old->sa_handler != SIG_DFL) {
    old->sa_handler(sig);
    return;
  }
  /* The default action: die of the same signal (a fault re-faults on
   * return, the others are raised again once unblocked). */
  struct sigaction dfl;
  memset(&dfl, 0, sizeof dfl);
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  sigaction(sig, &dfl, NULL);
  if (sig != SIGSEGV && sig != SIGBUS) {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, sig);
    sigprocmask(SIG_UNBLOCK, &set, NULL);
    raise(sig);
  }
}

/* An alternate signal stack for the calling thread (the one that made the
 * default group: the program's), unless it has one (the program's, the
 * monitor's). */
static void alt_stack(void) {
  stack_t cur;
  if (sigaltstack(NULL, &cur) != 0 || !(cur.ss_flags & SS_DISABLE))
    return;
  size_t len = 256 * 1024; /* the monitor symbolises its backtrace on it too */
  void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED)
    return;
  stack_t ss = {.ss_sp = p, .ss_size = len, .ss_flags = 0};
  if (sigaltstack(&ss, NULL) != 0)
    munmap(p, len);
}

void tr_crash_install(tracer *t) {
  alt_stack();
  owner = getpid();
  atomic_store(&crash_tracer, t);
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = on_signal;
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
  sigemptyset(&sa.sa_mask);
  for (size_t i = 0; i < N_SIGS; i++)
    sigaction(sigs[i], &sa, &old_act[i]);
}

void tr_crash_remove(void) {
  if (!atomic_load(&crash_tracer))
    return;
  for (size_t i = 0; i < N_SIGS; i++) {
    struct sigaction cur;
    /* Restore only where ours is still in place (the program may have
     * installed its own handler since). */
    if (sigaction(sigs[i], NULL, &cur) == 0 && (cur.sa_flags & SA_SIGINFO) &&
        cur.sa_sigaction == on_signal)
      sigaction(sigs[i], &old_act[i], NULL);
  }
  atomic_store(&crash_tracer, NULL);
}
