/* hist.c - a log-linear histogram for latency percentiles over traces too
 * big to sort in memory: values below 128 ns are exact, larger ones fall in
 * 64 sub-buckets per power of two (relative error under 1/64), and a
 * quantile reports its bucket's mean (exact when the bucket holds one
 * value), so 10 M durations cost 60 KB per histogram instead of 80 MB. */
#include <stdlib.h>

#include "vw.h"

#define SUB 64
#define NB (128 + 57 * SUB)

int vw_hist_init(vw_hist *h) {
  h->n = 0;
  h->max = 0;
  h->b = calloc(NB, sizeof *h->b);
  h->sum = calloc(NB, sizeof *h->sum);
  return h->b && h->sum ? 0 : -1;
}

void vw_hist_free(vw_hist *h) {
  free(h->b);
  free(h->sum);
  h->b = NULL;
  h->sum = NULL;
}

static int bucket(int64_t v) {
  if (v < 128)
    return (int)v;
  int e = 63 - __builtin_clzll((unsigned long long)v);   // 7..62
  return 128 + (e - 7) * SUB + (int)((v >> (e - 6)) & (SUB - 1));
}

/* The mean of the values in bucket i: exact when they are all equal. */
static int64_t value(const vw_hist *h, int i) {
  return (int64_t)(h->sum[i] / (double)h->b[i] + 0.5);
}

void vw_hist_add(vw_hist *h, int64_t v) {
  if (v < 0)
    v = 0;
  int i = bucket(v);
  h->b[i]++;
  h->sum[i] += (double)v;
  h->n++;
  if (v > h->max)
    h->max = v;
}

int64_t vw_hist_quantile(const vw_hist *h, double q) {
  if (h->n == 0)
    return -1;
  int64_t want = (int64_t)(q * (double)h->n + 0.999999);
  if (want < 1)
    want = 1;
  int64_t seen = 0;
  for (int i = 0; i < NB; i++) {
    seen += h->b[i];
    if (seen >= want) {
      int64_t v = value(h, i);
      return v > h->max ? h->max : v;
    }
  }
  return h->max;
}
