/* summary_map.c - hash tables for the merge's summaries (summary_map.h).
 * Linear probing with power-of-two capacities, at most half full. */
#include "summary_map.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

static uint64_t mix(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ULL;
  return x ^ (x >> 33);
}

static uint64_t coll_hash(int32_t group, int64_t seq) {
  return mix((uint64_t)seq * 0x9e3779b97f4a7c15ULL ^ (uint32_t)group);
}

static int coll_grow(sm_colls *t) {
  size_t cap = t->cap ? t->cap * 2 : 1024;
  sm_coll *s = calloc(cap, sizeof *s);
  if (!s)
    return -1;
  for (size_t i = 0; i < t->cap; i++) {
    if (!t->slot[i].used)
      continue;
    size_t j = coll_hash(t->slot[i].group, t->slot[i].seq) & (cap - 1);
    while (s[j].used)
      j = (j + 1) & (cap - 1);
    s[j] = t->slot[i];
  }
  free(t->slot);
  t->slot = s;
  t->cap = cap;
  return 0;
}

const sm_coll *sm_coll_find(const sm_colls *t, int32_t group, int64_t seq) {
  if (!t->cap)
    return NULL;
  for (size_t j = coll_hash(group, seq) & (t->cap - 1); t->slot[j].used;
       j = (j + 1) & (t->cap - 1))
    if (t->slot[j].seq == seq && t->slot[j].group == group)
      return &t->slot[j];
  return NULL;
}

sm_coll *sm_coll_get(sm_colls *t, int32_t group, int64_t seq, int *is_new) {
  *is_new = 0;
  sm_coll *c = (sm_coll *)sm_coll_find(t, group, seq);
  if (c)
    return c;
  if ((t->n + 1) * 2 > t->cap && coll_grow(t) != 0)
    return NULL;
  size_t j = coll_hash(group, seq) & (t->cap - 1);
  while (t->slot[j].used)
    j = (j + 1) & (t->cap - 1);
  c = &t->slot[j];
  memset(c, 0, sizeof *c);
  c->used = 1;
  c->group = group;
  c->seq = seq;
  t->n++;
  *is_new = 1;
  return c;
}

void sm_colls_free(sm_colls *t) {
  free(t->slot);
  memset(t, 0, sizeof *t);
}

static uint64_t key_hash(int64_t a, int64_t b, int64_t c) {
  return mix((uint64_t)a * 0x9e3779b97f4a7c15ULL ^ (uint64_t)b * 0xc2b2ae3d27d4eb4fULL ^
             (uint64_t)c);
}

static int bucket_grow(sm_buckets *t) {
  size_t cap = t->cap ? t->cap * 2 : 256;
  int32_t *s = calloc(cap, sizeof *s);
  if (!s)
    return -1;
  for (size_t i = 0; i < t->n; i++) {
    const int64_t *k = t->b[i].k;
    size_t j = key_hash(k[0], k[1], k[2]) & (cap - 1);
    while (s[j])
      j = (j + 1) & (cap - 1);
    s[j] = (int32_t)i + 1;
  }
  free(t->slot);
  t->slot = s;
  t->cap = cap;
  return 0;
}

static bool same(const sm_bucket *e, int64_t a, int64_t b, int64_t c) {
  return e->k[0] == a && e->k[1] == b && e->k[2] == c;
}

sm_bucket *sm_bucket_get(sm_buckets *t, int64_t a, int64_t b, int64_t c) {
  size_t j = 0;
  if (t->last < t->n && same(&t->b[t->last], a, b, c))
    return &t->b[t->last];
  if (t->cap) {
    for (j = key_hash(a, b, c) & (t->cap - 1); t->slot[j]; j = (j + 1) & (t->cap - 1)) {
      if (same(&t->b[t->slot[j] - 1], a, b, c))
        return &t->b[t->last = (size_t)t->slot[j] - 1];
    }
  }
  if (t->n + 1 >= t->bcap) {
    size_t bcap = t->bcap ? t->bcap * 2 : 256;
    sm_bucket *nb = bcap < INT32_MAX ? realloc(t->b, bcap * sizeof *nb) : NULL;
    if (!nb)
      return NULL;
    t->b = nb;
    t->bcap = bcap;
  }
  if ((t->n + 1) * 2 > t->cap && bucket_grow(t) != 0)
    return NULL;
  for (j = key_hash(a, b, c) & (t->cap - 1); t->slot[j]; j = (j + 1) & (t->cap - 1))
    ;
  sm_bucket *e = &t->b[t->n];
  memset(e, 0, sizeof *e);
  e->k[0] = a;
  e->k[1] = b;
  e->k[2] = c;
  e->min = INT64_MAX;
  t->slot[j] = (int32_t)++t->n;
  t->last = t->n - 1;
  return e;
}

void sm_buckets_free(sm_buckets *t) {
  free(t->slot);
  free(t->b);
  memset(t, 0, sizeof *t);
}

static uint64_t str_hash(const char *s) {
  uint64_t h = 1469598103934665603ULL;
  for (; *s; s++)
    h = (h ^ (unsigned char)*s) * 1099511628211ULL;
  return h;
}

static int str_grow(sm_strings *t) {
  size_t cap = t->cap ? t->cap * 2 : 64;
  int32_t *s = calloc(cap, sizeof *s);
  if (!s)
    return -1;
  for (size_t i = 0; i < t->n; i++) {
    size_t j = str_hash(t->s[i]) & (cap - 1);
    while (s[j])
      j = (j + 1) & (cap - 1);
    s[j] = (int32_t)i + 1;
  }
  free(t->slot);
  t->slot = s;
  t->cap = cap;
  return 0;
}

int32_t sm_intern(sm_strings *t, const char *s) {
  size_t j;
  if (t->cap)
    for (j = str_hash(s) & (t->cap - 1); t->slot[j]; j = (j + 1) & (t->cap - 1))
      if (!strcmp(t->s[t->slot[j] - 1], s))
        return t->slot[j] - 1;
  if (t->n + 1 >= t->scap) {
    size_t scap = t->scap ? t->scap * 2 : 64;
    char **ns = realloc(t->s, scap * sizeof *ns);
    if (!ns)
      return -1;
    t->s = ns;
    t->scap = scap;
  }
  if ((t->n + 1) * 2 > t->cap && str_grow(t) != 0)
    return -1;
  char *copy = strdup(s);
  if (!copy || t->n >= INT32_MAX - 1) {
    free(copy);
    return -1;
  }
  for (j = str_hash(s) & (t->cap - 1); t->slot[j]; j = (j + 1) & (t->cap - 1))
    ;
  t->s[t->n] = copy;
  t->slot[j] = (int32_t)++t->n;
  return (int32_t)t->n - 1;
}

void sm_strings_free(sm_strings *t) {
  for (size_t i = 0; i < t->n; i++)
    free(t->s[i]);
  free(t->s);
  free(t->slot);
  memset(t, 0, sizeof *t);
}
