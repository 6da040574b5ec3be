/* clock.c - the observers' clock: CLOCK_MONOTONIC nanoseconds read from the
 * TSC.
 *
 * Every operation stamps two or three events, so the clock is on the hot
 * path of a 4-byte all_reduce: clock_gettime costs ~22 ns here, rdtsc ~9.
 * When the CPU has an invariant TSC (cpuid 0x80000007 EDX bit 8) the clock
 * is ns = t0 + (tsc - c0) * mult >> 32, in CLOCK_MONOTONIC's epoch.
 *
 * DESIGN. The base pair (tsc, monotonic) is taken when the library loads;
 * mult is the slope from the base to the latest anchor, so it sharpens as
 * the process lives. The anchor (t0, c0, mult) moves at most once a second,
 * by whichever reader notices it is stale (one thread at a time, through a
 * flag), so the error against CLOCK_MONOTONIC stays within what the slope
 * drifts in a second (well under a microsecond). Readers take the anchor
 * under a sequence lock; no reader ever waits on a writer for long. Without
 * an invariant TSC (or off x86-64) it is plain clock_gettime. */
#include "dist_int.h"

#if defined(__x86_64__)
#include <cpuid.h>
#include <x86intrin.h>
#endif

static _Atomic uint32_t anchor_seq;        /* odd while the anchor moves */
static _Atomic int64_t anchor_t0;
static _Atomic uint64_t anchor_c0;
static _Atomic uint64_t anchor_mult;       /* ns per cycle << 32; 0 = no TSC */
static _Atomic uint64_t anchor_limit;      /* cycles after which it is stale */
static _Atomic int anchor_busy;
static int64_t base_t;
static uint64_t base_c;

#if defined(__x86_64__)
static bool tsc_invariant(void) {
  unsigned a, b, c, d;
  if (!__get_cpuid(0x80000000u, &a, &b, &c, &d) || a < 0x80000007u)
    return false;
  __get_cpuid(0x80000007u, &a, &b, &c, &d);
  return (d >> 8) & 1u;
}

/* A (tsc, monotonic) pair taken as close together as the clock allows:
 * the tightest of a few tries. A thread preempted between the reads (a
 * loaded machine, more ranks than cores) would take a pair milliseconds
 * apart, and every time read from that anchor, on this rank only, would
 * be off by half that: a balanced job's rank seen arriving last at every
 * collective. */
static void pair_now(int64_t *t, uint64_t *c) {
  uint64_t best = UINT64_MAX;
  for (int i = 0; i < 16 && best > 4096; i++) { /* 4096 cycles: ~1-2 us */
    uint64_t c1 = __rdtsc();
    int64_t tt = dist__now_ns();
    uint64_t c2 = __rdtsc();
    if (c2 - c1 < best) {
      best = c2 - c1;
      *t = tt;
      *c = c1 + (c2 - c1) / 2;
    }
  }
}

/* Moves the anchor to now with the slope measured from the base. */
static void reanchor(void) {
  int expected = 0;
  if (!atomic_compare_exchange_strong(&anchor_busy, &expected, 1))
    return;
  int64_t t;
  uint64_t c;
  pair_now(&t, &c);
  if (c > base_c && t > base_t) {
    uint64_t mult = (uint64_t)(((unsigned __int128)(uint64_t)(t - base_t) << 32) / (c - base_c));
    /* release stores, acquire loads: a sequence lock without fences */
    atomic_fetch_add_explicit(&anchor_seq, 1, memory_order_acq_rel);
    atomic_store_explicit(&anchor_t0, t, memory_order_release);
    atomic_store_explicit(&anchor_c0, c, memory_order_release);
    atomic_store_explicit(&anchor_mult, mult, memory_order_release);
    /* stale after about a second: 2^62 / mult cycles ~ 1.07 s */
    atomic_store_explicit(&anchor_limit, mult ? ((uint64_t)1 << 62) / mult : 0,
                          memory_order_release);
    atomic_fetch_add_explicit(&anchor_seq, 1, memory_order_release);
  }
  atomic_store(&anchor_busy, 0);
}

__attribute__((constructor)) static void clock_base(void) {
  if (tsc_invariant())
    pair_now(&base_t, &base_c);
}

void dist__clock_calibrate(void) {
  if (!base_c || atomic_load(&anchor_mult))
    return;
  /* The first slope needs a few milliseconds between base and anchor. */
  int64_t wait = base_t + 5000000 - dist__now_ns();
  if (wait > 0)
    nanosleep(&(struct timespec){0, (long)wait}, NULL);
  reanchor();
}

int64_t dist_clock_ns(void) {
  for (;;) {
    uint32_t s = atomic_load_explicit(&anchor_seq, memory_order_acquire);
    uint64_t mult = atomic_load_explicit(&anchor_mult, memory_order_acquire);
    if (!mult)
      return dist__now_ns();
    int64_t t0 = atomic_load_explicit(&anchor_t0, memory_order_acquire);
    uint64_t c0 = atomic_load_explicit(&anchor_c0, memory_order_acquire);
    uint64_t limit = atomic_load_explicit(&anchor_limit, memory_order_acquire);
    if ((s & 1u) || s != atomic_load_explicit(&anchor_seq, memory_order_relaxed))
      continue;
    uint64_t d = __rdtsc() - c0;
    if (__builtin_expect(d > limit, 0)) { /* stale, or the TSC went back */
      reanchor();
      return dist__now_ns();
    }
    return t0 + (int64_t)(((unsigned __int128)d * mult) >> 32);
  }
}
#else
void dist__clock_calibrate(void) {}
int64_t dist_clock_ns(void) { return dist__now_ns(); }
#endif
