/* ring.h - the flight recorder: a fixed ring of 64-byte slots (trace_rec.h)
 * that any thread appends to and one writer thread drains.
 *
 * Overflow policy: the newest records win. A producer never waits and never
 * reads the consumer's position: it claims slots with one fetch_add and
 * overwrites whatever was there. A consumer that falls behind finds slots
 * whose stamp is ahead of the index it wanted; it counts them as dropped
 * (tracer_write.c records the sequence ranges lost). So at a crash the ring
 * holds the last records, which is what a post-mortem needs. */
#ifndef DIST_TRACER_RING_H
#define DIST_TRACER_RING_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "trace_rec.h"

typedef struct tr_ring {
  _Atomic uint64_t head;        /* next index to claim */
  char pad_[56];                /* keep head off the slots' line */
  uint64_t mask;                /* slots - 1 */
  _Atomic uint64_t (*words)[TR_WORDS]; /* slots */
} tr_ring;

/* slots is rounded up to a power of two (at least 64). Allocates once. */
int tr_ring_init(tr_ring *r, uint64_t slots);
void tr_ring_fini(tr_ring *r);

/* Claims n consecutive slots; returns the first index. */
static inline uint64_t tr_ring_claim(tr_ring *r, unsigned n) {
  return atomic_fetch_add_explicit(&r->head, n, memory_order_relaxed);
}

/* Publishes one slot's contents (64 bytes, its stamp word ignored) at
 * index idx: marks it busy, copies, stamps idx + 1 (a sequence lock).
 * Word-wise atomics, so the consumer's concurrent copy is a checked race;
 * release stores instead of fences (the same plain moves on x86, and
 * ThreadSanitizer understands them). */
static inline void tr_ring_put(tr_ring *r, uint64_t idx, const void *slot) {
  _Atomic uint64_t *w = r->words[idx & r->mask];
  const uint64_t *src = slot;
  atomic_store_explicit(&w[0], 0, memory_order_relaxed);
  for (int i = 1; i < TR_WORDS; i++) /* release: each after the busy mark */
    atomic_store_explicit(&w[i], src[i], memory_order_release);
  atomic_store_explicit(&w[0], idx + 1, memory_order_release);
}

/* Copies slot idx into out when it holds index idx complete: 1; when a
 * producer has claimed it but not finished: 0; when it was overwritten
 * by a newer index (the reader fell behind): -1. */
int tr_ring_get(const tr_ring *r, uint64_t idx, void *out);

/* Copies the slot at position pos (of mask + 1) whatever index it holds,
 * its stamp 0 (busy) when a producer was writing it meanwhile: the crash
 * dump's copy, made while other threads may still record. Atomic loads
 * only, so a signal handler may call it. */
void tr_ring_copy_slot(const tr_ring *r, uint64_t pos, uint64_t out[TR_WORDS]);

#endif
