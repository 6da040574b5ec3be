/* ring.c - the flight recorder's slots: allocation and the consumer's
 * checked copy (ring.h has the policy). */
#include "ring.h"

#include <stdlib.h>
#include <string.h>

#include <dist/status.h>

int tr_ring_init(tr_ring *r, uint64_t slots) {
  uint64_t n = 64;
  while (n < slots && n < ((uint64_t)1 << 40))
    n <<= 1;
  void *mem = NULL;
  if (posix_memalign(&mem, TR_SLOT, n * TR_SLOT) != 0)
    return DIST_E_NOMEM;
  memset(mem, 0, n * TR_SLOT);
  r->words = mem;
  r->mask = n - 1;
  atomic_store(&r->head, 0);
  return DIST_OK;
}

void tr_ring_fini(tr_ring *r) {
  free((void *)r->words);
  r->words = NULL;
}

int tr_ring_get(const tr_ring *r, uint64_t idx, void *out) {
  _Atomic uint64_t *w = r->words[idx & r->mask];
  uint64_t *dst = out;
  uint64_t s1 = atomic_load_explicit(&w[0], memory_order_acquire);
  if (s1 != idx + 1)
    return s1 > idx + 1 ? -1 : 0;
  for (int i = 1; i < TR_WORDS; i++) /* acquire: each before the stamp re-read */
    dst[i] = atomic_load_explicit(&w[i], memory_order_acquire);
  uint64_t s2 = atomic_load_explicit(&w[0], memory_order_relaxed);
  if (s2 != s1)
    return s2 > idx + 1 || s2 == 0 ? -1 : 0; /* overwritten while we copied */
  dst[0] = s1;
  return 1;
}

void tr_ring_copy_slot(const tr_ring *r, uint64_t pos, uint64_t out[TR_WORDS]) {
  _Atomic uint64_t *w = r->words[pos & r->mask];
  uint64_t s1 = atomic_load_explicit(&w[0], memory_order_acquire);
  for (int i = 1; i < TR_WORDS; i++)
    out[i] = atomic_load_explicit(&w[i], memory_order_acquire);
  uint64_t s2 = atomic_load_explicit(&w[0], memory_order_relaxed);
  out[0] = s2 == s1 ? s1 : 0; /* rewritten while copied: busy */
}
