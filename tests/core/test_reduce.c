/* ctest: labels=unit timeout=300 */
/* The reduction kernels (core/src/reduce/reduce*.c) against the independent
 * scalar reference of tests/support/ref.c: every dtype with every op that
 * makes sense, 1 to 5 sources, odd lengths, in place, the step form bit for
 * bit against the one-call form, half-precision rounding, NaN in MIN/MAX,
 * integer wraparound and the combinations that must be refused. Inputs are
 * seeded (DIST_TEST_SEED reproduces a run; the seed is printed). */
#include <criterion/criterion.h>

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "reduce/reduce.h"
#include "base/dist_int.h"
#include "mp.h"
#include "ref.h"

static const dist_dtype dtypes[] = {
    DIST_FLOAT16, DIST_BFLOAT16, DIST_FLOAT32, DIST_FLOAT64, DIST_INT8,      DIST_UINT8,
    DIST_INT16,   DIST_INT32,    DIST_INT64,   DIST_BOOL,    DIST_COMPLEX64, DIST_COMPLEX128,
};
#define N_DTYPES (sizeof dtypes / sizeof dtypes[0])

static dist_redop op_of(int kind) {
  /* A scalar that is not a power of two, so PREMUL_SUM rounds. */
  return kind == DIST_REDOP_PREMUL_SUM ? dist_premul_sum(0.3) : (dist_redop){.kind = kind};
}

static bool is_float(dist_dtype dt) {
  return dt == DIST_FLOAT16 || dt == DIST_BFLOAT16 || dt == DIST_FLOAT32 || dt == DIST_FLOAT64 ||
         dt == DIST_COMPLEX64 || dt == DIST_COMPLEX128;
}

/* One case: nsrc inputs of n elements from the seeded fill, reduced by the
 * one-call form (in place when aliased) and by the step form; both must
 * match the reference, and each other bit for bit. Returns 0, or 1 with
 * msg set. */
typedef struct rcase {
  dist_dtype dt;
  dist_redop op;
  int nsrc;
  size_t n;
  bool aliased;
  unsigned fill; /* DIST_TEST_FILL_* */
  int divisor;   /* AVG */
} rcase;

static int run_case(const rcase *c, uint64_t seed, char *msg, size_t msglen) {
  size_t es = dist_dtype_size(c->dt), bytes = c->n * es + 1;
  const void *srcs[5];
  void *bufs[5];
  void *want = malloc(bytes), *got = malloc(bytes), *out2 = malloc(bytes);
  void *acc = malloc(dist__reduce_acc_size(c->dt, c->n) + 1);
  int fail = 1;
  for (int j = 0; j < c->nsrc; j++) {
    bufs[j] = malloc(bytes);
    dist_test_fill(bufs[j], c->dt, c->n, seed, j, 0, c->fill);
    srcs[j] = bufs[j];
  }
  dist_test_ref_reduce(c->dt, c->op, want, srcs, c->nsrc, c->n, c->divisor);
  /* The step form first: the one-call form may overwrite srcs[0]. In
   * place too when the accumulator has the dtype (begin(acc, acc),
   * end(acc, acc)). */
  bool step_in_place = c->aliased && dist__reduce_acc_size(c->dt, c->n) == c->n * es;
  const void *x0 = srcs[0];
  if (step_in_place) {
    memcpy(acc, srcs[0], c->n * es);
    x0 = acc;
  }
  int rc = dist__reduce_begin(c->dt, c->op, acc, x0, c->n);
  for (int j = 1; j < c->nsrc && rc == DIST_OK; j++)
    rc = dist__reduce_step(c->dt, c->op, acc, srcs[j], c->n);
  if (rc == DIST_OK)
    rc = dist__reduce_end(c->dt, c->op, step_in_place ? acc : out2, acc, c->n, c->divisor);
  if (step_in_place)
    memcpy(out2, acc, c->n * es);
  if (rc != DIST_OK) {
    snprintf(msg, msglen, "step form: %s: %s", dist_status_name(rc), dist_last_errmsg());
    goto out;
  }
  void *dst = got;
  if (c->aliased)
    dst = bufs[0]; /* srcs[0] == dst */
  rc = dist__reduce_multi(c->dt, c->op, dst, srcs, c->nsrc, c->n, c->divisor);
  if (rc != DIST_OK) {
    snprintf(msg, msglen, "multi: %s: %s", dist_status_name(rc), dist_last_errmsg());
    goto out;
  }
  /* Bitwise, NaN included: reduce.h makes NaN results canonical. */
  if (dist_test_compare(c->dt, dst, want, c->n, 0, msg, msglen))
    goto out;
  if (c->n && memcmp(dst, out2, c->n * es) != 0) {
    char m2[512];
    dist_test_compare(c->dt, out2, dst, c->n, 0, m2, sizeof m2);
    snprintf(msg, msglen, "step form differs from multi: %s", m2);
    goto out;
  }
  fail = 0;
out:
  for (int j = 0; j < c->nsrc; j++)
    free(bufs[j]);
  free(want), free(got), free(out2), free(acc);
  return fail;
}

#define CHECK_CASE(c, seed)                                                                        \
  do {                                                                                             \
    char m_[1024];                                                                                 \
    uint64_t s_ = (seed);                                                                          \
    if (run_case((c), s_, m_, sizeof m_))                                                          \
      cr_assert_fail("%s %s nsrc=%d n=%zu%s seed=%llu: %s", dist_dtype_name((c)->dt),              \
                     dist_redop_name((c)->op.kind), (c)->nsrc, (c)->n,                             \
                     (c)->aliased ? " in place" : "", (unsigned long long)s_, m_);                 \
  } while (0)

Test(core_reduce, every_dtype_and_op_matches_the_reference_for_1_to_5_sources, .timeout = 120) {
  uint64_t seed = dist_test_seed();
  static const size_t lens[] = {0, 1, 7, 33, 4097};
  int cases = 0;
  for (size_t d = 0; d < N_DTYPES; d++)
    for (int k = 0; k < DIST_REDOP_COUNT_; k++) {
      dist_redop op = op_of(k);
      if (dist_redop_check(op, dtypes[d]) != DIST_OK)
        continue;
      for (int nsrc = 1; nsrc <= 5; nsrc++)
        for (size_t l = 0; l < sizeof lens / sizeof lens[0]; l++)
          for (int alias = 0; alias < 2; alias++) {
            rcase c = {dtypes[d], op, nsrc, lens[l], alias, 0, nsrc + (int)l};
            CHECK_CASE(&c, seed + (uint64_t)cases++);
          }
    }
  cr_assert_gt(cases, 1500, "only %d cases ran", cases);
}

/* 1000003 elements: many kernel blocks, an odd tail, the vector loops'
 * epilogues. Each (dtype, op) gets one source count (rotating 1..5) and
 * alternates in place. Under ThreadSanitizer, which has no threads to
 * watch here and slows the reference loops about tenfold (the float cases
 * ran past their 120 s beside another test in CI's TSan stage), 100003:
 * still some 25 blocks of 16 KiB and an odd tail. */
#ifdef __SANITIZE_THREAD__
#define LONG_N 100003
#else
#define LONG_N 1000003
#endif
static void long_cases(bool floats) {
  uint64_t seed = dist_test_seed();
  int i = 0;
  for (size_t d = 0; d < N_DTYPES; d++) {
    if (is_float(dtypes[d]) != floats)
      continue;
    for (int k = 0; k < DIST_REDOP_COUNT_; k++, i++) {
      dist_redop op = op_of(k);
      if (dist_redop_check(op, dtypes[d]) != DIST_OK)
        continue;
      rcase c = {dtypes[d], op, 1 + i % 5, LONG_N, i % 2, 0, 3};
      CHECK_CASE(&c, seed + (uint64_t)i);
    }
  }
}

Test(core_reduce, long_odd_lengths_of_floating_types, .timeout = 120) { long_cases(true); }
Test(core_reduce, long_odd_lengths_of_integer_and_bool_types, .timeout = 120) { long_cases(false); }

Test(core_reduce, float32_sum_of_two_sources_matches_at_every_length_up_to_300, .timeout = 60) {
  uint64_t seed = dist_test_seed();
  for (size_t n = 0; n <= 300; n++)
    for (int alias = 0; alias < 2; alias++) {
      rcase c = {DIST_FLOAT32, DIST_SUM, 2, n, alias, 0, 1};
      CHECK_CASE(&c, seed + n);
    }
}

/* NaN, inf, zeros, subnormals and extremes in every floating dtype with
 * every op: bit for bit with the reference (canonical NaN from arithmetic,
 * the newest input NaN from MIN/MAX) and between the two forms. */
Test(core_reduce, special_values_agree_with_the_reference, .timeout = 60) {
  uint64_t seed = dist_test_seed();
  int i = 0;
  for (size_t d = 0; d < N_DTYPES; d++) {
    if (!is_float(dtypes[d]))
      continue;
    for (int k = 0; k < DIST_REDOP_COUNT_; k++)
      for (int nsrc = 1; nsrc <= 5; nsrc += 2) {
        dist_redop op = op_of(k);
        if (dist_redop_check(op, dtypes[d]) != DIST_OK)
          continue;
        rcase c = {dtypes[d], op, nsrc, 5003, nsrc == 3, DIST_TEST_FILL_SPECIAL, nsrc};
        CHECK_CASE(&c, seed + (uint64_t)i++);
      }
  }
}

/* --- NaN through MIN and MAX ---------------------------------------------- */

/* Five sources of 5 elements: element e has a NaN in source e only. */
static void nan_minmax(dist_dtype dt, const void *nan_elem, const void *one, const void *two) {
  size_t es = dist_dtype_size(dt);
  unsigned char bufs[5][5 * 16], got[5 * 16];
  const void *srcs[5];
  for (int s = 0; s < 5; s++) {
    for (int e = 0; e < 5; e++)
      memcpy(bufs[s] + e * es, e == s ? nan_elem : (s % 2 ? one : two), es);
    srcs[s] = bufs[s];
  }
  for (int k = DIST_REDOP_MIN; k <= DIST_REDOP_MAX; k++) {
    for (int nsrc = 1; nsrc <= 5; nsrc++) {
      cr_assert_eq(dist__reduce_multi(dt, op_of(k), got, srcs, nsrc, 5, 1), DIST_OK);
      for (int e = 0; e < 5; e++) {
        float f;
        double dv;
        bool nan;
        if (dt == DIST_FLOAT64) {
          memcpy(&dv, got + e * es, 8);
          nan = isnan(dv);
        } else {
          uint16_t h;
          if (dt == DIST_FLOAT32)
            memcpy(&f, got + e * es, 4);
          else
            memcpy(&h, got + e * es, 2);
          if (dt == DIST_FLOAT16)
            f = dist_test_f16_to_f32(h);
          else if (dt == DIST_BFLOAT16)
            f = dist_test_bf16_to_f32(h);
          nan = isnan(f);
        }
        cr_assert_eq(nan, e < nsrc, "%s %s nsrc=%d: element %d %s NaN", dist_dtype_name(dt),
                     dist_redop_name(k), nsrc, e, nan ? "is" : "is not");
      }
    }
  }
}

Test(core_reduce, nan_in_any_source_propagates_through_min_and_max, .timeout = 10) {
  float fn = NAN, f1 = 1.0f, f2 = -2.0f;
  double dn = NAN, d1 = 1.0, d2 = -2.0;
  uint16_t hn = 0x7e00, h1 = 0x3c00, h2 = 0xc000; /* float16 NaN, 1, -2 */
  uint16_t bn = 0x7fc0, b1 = 0x3f80, b2 = 0xc000; /* bfloat16 NaN, 1, -2 */
  nan_minmax(DIST_FLOAT32, &fn, &f1, &f2);
  nan_minmax(DIST_FLOAT64, &dn, &d1, &d2);
  nan_minmax(DIST_FLOAT16, &hn, &h1, &h2);
  nan_minmax(DIST_BFLOAT16, &bn, &b1, &b2);
}

Test(core_reduce, min_and_max_keep_the_payload_of_the_newest_nan, .timeout = 10) {
  uint32_t a = 0x7fc00001u, b = 0xffc00002u, c = 0x3f800000u; /* NaN, -NaN, 1.0 */
  const void *srcs[3] = {&a, &c, &b};
  uint32_t got;
  cr_assert_eq(dist__reduce_multi(DIST_FLOAT32, DIST_MAX, &got, srcs, 3, 1, 1), DIST_OK);
  cr_assert_eq(got, b, "got 0x%08x", got);
  cr_assert_eq(dist__reduce_multi(DIST_FLOAT32, DIST_MIN, &got, srcs, 2, 1, 1), DIST_OK);
  cr_assert_eq(got, a, "got 0x%08x", got);
}

/* --- half precision -------------------------------------------------------- */

typedef struct conv_case {
  uint32_t in;  /* float32 bits */
  uint16_t out; /* expected half bits */
} conv_case;

static void check_conv(bool bf, const conv_case *cs, size_t n) {
  for (size_t i = 0; i < n; i++) {
    float f;
    uint16_t got;
    memcpy(&f, &cs[i].in, 4);
    if (bf)
      dist__f32_to_bf16(&got, &f, 1);
    else
      dist__f32_to_f16(&got, &f, 1);
    cr_assert_eq(got, cs[i].out, "%s(0x%08x = %.9g) = 0x%04x, want 0x%04x", bf ? "bf16" : "f16",
                 cs[i].in, f, got, cs[i].out);
    uint16_t ref = bf ? dist_test_f32_to_bf16(f) : dist_test_f32_to_f16(f);
    cr_assert_eq(ref, cs[i].out, "reference %s(0x%08x) = 0x%04x, want 0x%04x", bf ? "bf16" : "f16",
                 cs[i].in, ref, cs[i].out);
  }
}

Test(core_reduce, float16_rounding_ties_subnormals_overflow_and_nan, .timeout = 10) {
  static const conv_case cs[] = {
      {0x3f800000, 0x3c00},                       /* 1 */
      {0x3f801000, 0x3c00},                       /* 1 + 2^-11: tie, to even (down) */
      {0x3f803000, 0x3c02},                       /* 1 + 3*2^-11: tie, to even (up) */
      {0x3f801001, 0x3c01},                       /* just above the tie */
      {0x3f800fff, 0x3c00},                       /* just below the tie */
      {0x3fffffff, 0x4000},                       /* carry into the exponent */
      {0x477fe000, 0x7bff},                       /* 65504, the largest float16 */
      {0x477fefff, 0x7bff},                       /* just below 65520 */
      {0x477ff000, 0x7c00},                       /* 65520: the tie rounds to even, i.e. inf */
      {0x4f000000, 0x7c00},                       /* 2^31 */
      {0xc77ff000, 0xfc00},                       /* -65520 */
      {0x7f800000, 0x7c00},                       /* inf */
      {0xff800000, 0xfc00},                       /* -inf */
      {0x7fc00000, 0x7e00},                       /* NaN */
      {0x7f800001, 0x7e00},                       /* signalling NaN: quiet */
      {0xffc12345, 0xfe00},                       /* -NaN keeps its sign */
      {0x00000000, 0x0000}, {0x80000000, 0x8000}, /* +-0 */
      {0x38800000, 0x0400},                       /* 2^-14, the smallest normal */
      {0x387fc000, 0x03ff},                       /* the largest subnormal */
      {0x387fe000, 0x0400},                       /* rounds up into the normals */
      {0x33800000, 0x0001},                       /* 2^-24, the smallest subnormal */
      {0x33000000, 0x0000},                       /* 2^-25: tie, to even (zero) */
      {0x33000001, 0x0001},                       /* just above: rounds up */
      {0x33c00000, 0x0002},                       /* 1.5 * 2^-24: tie, to even (2) */
      {0x34200000, 0x0002},                       /* 2.5 * 2^-24: tie, to even (2) */
      {0xb3c00000, 0x8002},                       /* negative subnormal */
      {0x00000001, 0x0000},                       /* float32 subnormal */
      {0x0d000000, 0x0000},                       /* tiny */
  };
  check_conv(false, cs, sizeof cs / sizeof cs[0]);
}

Test(core_reduce, bfloat16_rounding_ties_subnormals_overflow_and_nan, .timeout = 10) {
  static const conv_case
      cs[] =
          {
              {0x3f800000, 0x3f80}, {0x3f808000, 0x3f80}, /* tie, to even (down) */
              {0x3f818000, 0x3f82},                       /* tie, to even (up) */
              {0x3f808001, 0x3f81}, {0x3f807fff, 0x3f80},
              {0x7f7f7fff, 0x7f7f}, /* just below the tie above the largest */
              {0x7f7f8000, 0x7f80}, /* the tie: to even, i.e. inf */
              {0x7f7fffff, 0x7f80}, {0xff7fffff, 0xff80},
              {0x7f800000, 0x7f80}, {0xff800000, 0xff80},
              {0x7fc00000, 0x7fc0}, {0xffc00000, 0x7fc0}, /* NaN: canonical, as torch */
              {0x7f800001, 0x7fc0},                       /* signalling NaN */
              {0x00000000, 0x0000}, {0x80000000, 0x8000},
              {0x00008000, 0x0000}, /* subnormal tie: to even (zero) */
              {0x00018000, 0x0002}, /* subnormal tie: to even (up) */
              {0x007fffff, 0x0080}, /* largest float32 subnormal rounds to the smallest normal */
          };
  check_conv(true, cs, sizeof cs / sizeof cs[0]);
}

Test(core_reduce, half_to_float32_is_exact_for_all_65536_values, .timeout = 10) {
  static uint16_t h[65536], back[65536], bback[65536];
  static float f[65536], bf[65536];
  for (uint32_t i = 0; i < 65536; i++)
    h[i] = (uint16_t)i;
  dist__f16_to_f32(f, h, 65536);
  dist__bf16_to_f32(bf, h, 65536);
  dist__f32_to_f16(back, f, 65536);
  dist__f32_to_bf16(bback, bf, 65536);
  /* Plain ifs, not cr_assert: --full-stats reports every assertion. */
  for (uint32_t i = 0; i < 65536; i++) {
    float r = dist_test_f16_to_f32(h[i]), rb = dist_test_bf16_to_f32(h[i]);
    if (memcmp(&r, &f[i], 4) != 0)
      cr_assert_fail("f16 0x%04x -> %.9g, reference %.9g", i, f[i], r);
    if (memcmp(&rb, &bf[i], 4) != 0)
      cr_assert_fail("bf16 0x%04x -> %.9g, reference %.9g", i, bf[i], rb);
    bool fnan = (i & 0x7fff) > 0x7c00, bnan = (i & 0x7fff) > 0x7f80;
    uint16_t want = fnan ? (uint16_t)((i & 0x8000) | 0x7e00) : (uint16_t)i;
    if (back[i] != want)
      cr_assert_fail("f16 0x%04x round trip gives 0x%04x, want 0x%04x", i, back[i], want);
    if (bback[i] != (bnan ? 0x7fc0 : i))
      cr_assert_fail("bf16 0x%04x round trip gives 0x%04x", i, bback[i]);
  }
}

/* Every float32 sign and exponent (and every kept mantissa), with the low
 * bits the half type drops set to the rounding boundaries (0, 1, just
 * below, at and just above half an ulp, all ones) and once to random bits:
 * the kernels against the reference. */
static void conv_sweep(bool bf, uint64_t seed) {
  int drop = bf ? 16 : 13;
  uint32_t nhi = 1u << (32 - drop), mask = (1u << drop) - 1, half = 1u << (drop - 1);
  const uint32_t lows[6] = {0, 1, half - 1, half, half + 1, mask};
  size_t n = (size_t)nhi * 7;
  uint32_t *in = malloc(n * sizeof(uint32_t));
  uint16_t *got = malloc(n * sizeof(uint16_t));
  cr_assert(in && got);
  for (size_t i = 0; i < n; i++) {
    size_t k = i / nhi;
    uint32_t lo = k < 6 ? lows[k] : (uint32_t)((seed + i) * 0x9e3779b97f4a7c15ull >> 40) & mask;
    in[i] = (uint32_t)(i % nhi) << drop | lo;
  }
  if (bf)
    dist__f32_to_bf16(got, (const float *)in, n);
  else
    dist__f32_to_f16(got, (const float *)in, n);
  for (size_t i = 0; i < n; i++) {
    float f;
    memcpy(&f, &in[i], 4);
    uint16_t want = bf ? dist_test_f32_to_bf16(f) : dist_test_f32_to_f16(f);
    if (got[i] != want)
      cr_assert_fail("%s(0x%08x = %.9g) = 0x%04x, reference 0x%04x (seed %llu)",
                     bf ? "bf16" : "f16", in[i], f, got[i], want, (unsigned long long)seed);
  }
  free(in);
  free(got);
}

Test(core_reduce, float32_to_half_matches_the_reference_around_every_boundary, .timeout = 60) {
  uint64_t seed = dist_test_seed();
  conv_sweep(false, seed);
  conv_sweep(true, seed);
}

Test(core_reduce, half_sums_accumulate_in_float32_and_round_once, .timeout = 10) {
  /* 2048 + 1 + 1 in float16 step by step would stay 2048 (ulp 2); in
   * float32 it is 2050, exactly representable. */
  uint16_t a = 0x6800, one = 0x3c00, got;
  const void *srcs[3] = {&a, &one, &one};
  cr_assert_eq(dist__reduce_multi(DIST_FLOAT16, DIST_SUM, &got, srcs, 3, 1, 1), DIST_OK);
  cr_assert_eq(got, 0x6801, "got 0x%04x", got);
  /* bfloat16: 256 + 1 + 1 = 258 (0x4381). */
  uint16_t ba = 0x4380, bone = 0x3f80;
  const void *bs[3] = {&ba, &bone, &bone};
  cr_assert_eq(dist__reduce_multi(DIST_BFLOAT16, DIST_SUM, &got, bs, 3, 1, 1), DIST_OK);
  cr_assert_eq(got, 0x4381, "got 0x%04x", got);
  /* Overflow only at the final rounding: 60000 + 60000 - 60000. */
  uint16_t big = 0x7b53, nbig = 0xfb53; /* 60064, -60064 */
  const void *os[3] = {&big, &big, &nbig};
  cr_assert_eq(dist__reduce_multi(DIST_FLOAT16, DIST_SUM, &got, os, 3, 1, 1), DIST_OK);
  cr_assert_eq(got, big, "got 0x%04x", got);
  cr_assert_eq(dist__reduce_multi(DIST_FLOAT16, DIST_SUM, &got, os, 2, 1, 1), DIST_OK);
  cr_assert_eq(got, 0x7c00, "got 0x%04x", got);
}

/* --- integers and bool ----------------------------------------------------- */

#define ONE_CASE(dt, T, opv, x, y, want)                                                           \
  do {                                                                                             \
    T a_ = (T)(x), b_ = (T)(y), got_;                                                              \
    const void *s_[2] = {&a_, &b_};                                                                \
    cr_assert_eq(dist__reduce_multi(dt, opv, &got_, s_, 2, 1, 1), DIST_OK);                        \
    cr_assert_eq(got_, (T)(want), "%s %s(%lld, %lld) = %lld, want %lld", #dt, #opv, (long long)a_, \
                 (long long)b_, (long long)got_, (long long)(T)(want));                            \
  } while (0)

Test(core_reduce, integers_wrap_around, .timeout = 10) {
  ONE_CASE(DIST_INT8, int8_t, DIST_SUM, 127, 1, -128);
  ONE_CASE(DIST_INT8, int8_t, DIST_PRODUCT, -128, -1, -128);
  ONE_CASE(DIST_INT8, int8_t, DIST_PRODUCT, 16, 16, 0);
  ONE_CASE(DIST_UINT8, uint8_t, DIST_SUM, 255, 1, 0);
  ONE_CASE(DIST_UINT8, uint8_t, DIST_PRODUCT, 200, 2, 144);
  ONE_CASE(DIST_UINT8, uint8_t, DIST_MAX, 200, 100, 200); /* unsigned order */
  ONE_CASE(DIST_INT16, int16_t, DIST_PRODUCT, 300, 300, 24464);
  ONE_CASE(DIST_INT16, int16_t, DIST_PRODUCT, -32768, -32768, 0);
  ONE_CASE(DIST_INT16, int16_t, DIST_SUM, 32767, 32767, -2);
  ONE_CASE(DIST_INT32, int32_t, DIST_SUM, INT32_MAX, 1, INT32_MIN);
  ONE_CASE(DIST_INT32, int32_t, DIST_PRODUCT, 65536, 65536, 0);
  ONE_CASE(DIST_INT32, int32_t, DIST_PRODUCT, INT32_MIN, -1, INT32_MIN);
  ONE_CASE(DIST_INT32, int32_t, DIST_MIN, INT32_MIN, INT32_MAX, INT32_MIN);
  ONE_CASE(DIST_INT64, int64_t, DIST_SUM, INT64_MAX, 1, INT64_MIN);
  ONE_CASE(DIST_INT64, int64_t, DIST_PRODUCT, INT64_MIN, -1, INT64_MIN);
  ONE_CASE(DIST_INT64, int64_t, DIST_PRODUCT, 1ll << 62, 4, 0);
  ONE_CASE(DIST_INT64, int64_t, DIST_PRODUCT, 3037000500ll, 3037000500ll, -9223372036709301616ll);
  ONE_CASE(DIST_INT64, int64_t, DIST_BXOR, -1, 0x0f0f, ~0x0f0fll);
  ONE_CASE(DIST_INT64, int64_t, DIST_MAX, -5, -7, -5);
}

Test(core_reduce, bool_reads_any_nonzero_byte_as_true_and_writes_0_or_1, .timeout = 10) {
  ONE_CASE(DIST_BOOL, uint8_t, DIST_SUM, 2, 0, 1);
  ONE_CASE(DIST_BOOL, uint8_t, DIST_SUM, 0, 0, 0);
  ONE_CASE(DIST_BOOL, uint8_t, DIST_MAX, 0, 0x80, 1);
  ONE_CASE(DIST_BOOL, uint8_t, DIST_PRODUCT, 2, 0xff, 1);
  ONE_CASE(DIST_BOOL, uint8_t, DIST_MIN, 2, 0, 0);
  ONE_CASE(DIST_BOOL, uint8_t, DIST_BAND, 2, 1, 1); /* bitwise 2 & 1 would be 0 */
  ONE_CASE(DIST_BOOL, uint8_t, DIST_BOR, 4, 0, 1);
  ONE_CASE(DIST_BOOL, uint8_t, DIST_BXOR, 2, 1, 0); /* both true */
  ONE_CASE(DIST_BOOL, uint8_t, DIST_BXOR, 0, 7, 1);
  /* One source, in place: normalised too. */
  uint8_t v[3] = {0, 5, 0xff};
  const void *s[1] = {v};
  cr_assert_eq(dist__reduce_multi(DIST_BOOL, DIST_SUM, v, s, 1, 3, 1), DIST_OK);
  cr_assert(v[0] == 0 && v[1] == 1 && v[2] == 1);
}

/* --- floating-point semantics ---------------------------------------------- */

Test(core_reduce, avg_divides_the_sum_and_premul_scales_each_input, .timeout = 10) {
  float a[2] = {1.0f, 3.0f}, b[2] = {2.0f, 4.0f}, got[2];
  const void *s[2] = {a, b};
  cr_assert_eq(dist__reduce_multi(DIST_FLOAT32, DIST_AVG, got, s, 2, 2, 2), DIST_OK);
  cr_assert(got[0] == 1.5f && got[1] == 3.5f);
  cr_assert_eq(dist__reduce_multi(DIST_FLOAT32, DIST_AVG, got, s, 2, 2, 4), DIST_OK);
  cr_assert(got[0] == 0.75f && got[1] == 1.75f);
  cr_assert_eq(dist__reduce_multi(DIST_FLOAT32, dist_premul_sum(0.5), got, s, 2, 2, 1), DIST_OK);
  cr_assert(got[0] == 1.5f && got[1] == 3.5f);
  /* s * x0 + s * x1 with s rounded to float first: 0.1f*3 + 0.1f*4. */
  float s01 = 0.1f, want = s01 * 3.0f;
  want = want + s01 * 4.0f;
  cr_assert_eq(dist__reduce_multi(DIST_FLOAT32, dist_premul_sum(0.1), got, s, 2, 2, 1), DIST_OK);
  cr_assert(got[1] == want, "got %.9g want %.9g", got[1], want);
  /* AVG of one source still divides, in place too. */
  double x[1] = {3.0};
  const void *xs[1] = {x};
  cr_assert_eq(dist__reduce_multi(DIST_FLOAT64, DIST_AVG, x, xs, 1, 1, 4), DIST_OK);
  cr_assert(x[0] == 0.75, "got %g", x[0]);
}

Test(core_reduce, complex_product_and_avg, .timeout = 10) {
  float a[2] = {1, 2}, b[2] = {3, 4}, got[2]; /* (1+2i)(3+4i) = -5+10i */
  const void *s[2] = {a, b};
  cr_assert_eq(dist__reduce_multi(DIST_COMPLEX64, DIST_PRODUCT, got, s, 2, 1, 1), DIST_OK);
  cr_assert(got[0] == -5 && got[1] == 10, "(%g, %g)", got[0], got[1]);
  double da[2] = {1, 2}, db[2] = {3, 4}, dg[2];
  const void *ds[2] = {da, db};
  cr_assert_eq(dist__reduce_multi(DIST_COMPLEX128, DIST_AVG, dg, ds, 2, 1, 2), DIST_OK);
  cr_assert(dg[0] == 2 && dg[1] == 3);
  cr_assert_eq(dist__reduce_multi(DIST_COMPLEX128, dist_premul_sum(2), dg, ds, 2, 1, 1), DIST_OK);
  cr_assert(dg[0] == 8 && dg[1] == 12);
}

/* --- refusals ---------------------------------------------------------------- */

static void expect_inval(int rc, const char *what) {
  cr_assert_eq(rc, DIST_E_INVAL, "%s: got %s", what, dist_status_name(rc));
  cr_assert(strlen(dist_last_errmsg()) > 0, "%s: no message", what);
}

Test(core_reduce, combinations_that_make_no_sense_return_DIST_E_INVAL, .timeout = 10) {
  unsigned char a[64] = {0}, b[64] = {0}, d[64];
  const void *s[2] = {a, b};
  static const struct {
    dist_dtype dt;
    int kind;
  } bad[] = {
      {DIST_FLOAT32, DIST_REDOP_BXOR},
      {DIST_FLOAT16, DIST_REDOP_BAND},
      {DIST_BFLOAT16, DIST_REDOP_BOR},
      {DIST_FLOAT64, DIST_REDOP_BAND},
      {DIST_COMPLEX64, DIST_REDOP_MIN},
      {DIST_COMPLEX128, DIST_REDOP_MAX},
      {DIST_COMPLEX64, DIST_REDOP_BXOR},
      {DIST_INT32, DIST_REDOP_AVG},
      {DIST_INT8, DIST_REDOP_PREMUL_SUM},
      {DIST_BOOL, DIST_REDOP_AVG},
      {DIST_UINT8, DIST_REDOP_AVG},
      {(dist_dtype)99, DIST_REDOP_SUM},
      {(dist_dtype)-1, DIST_REDOP_SUM},
      {DIST_FLOAT32, 99},
      {DIST_INT64, -3},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    dist_redop op = {.kind = (dist_redop_kind)bad[i].kind, .scalar = 1};
    char what[96];
    snprintf(what, sizeof what, "%s %s", dist_dtype_name(bad[i].dt), dist_redop_name(op.kind));
    expect_inval(dist__reduce_multi(bad[i].dt, op, d, s, 2, 4, 2), what);
    expect_inval(dist__reduce_multi(bad[i].dt, op, d, s, 2, 0, 2), what);
    expect_inval(dist__reduce_begin(bad[i].dt, op, d, a, 4), what);
    expect_inval(dist__reduce_step(bad[i].dt, op, d, a, 4), what);
    expect_inval(dist__reduce_end(bad[i].dt, op, d, a, 4, 2), what);
  }
}

Test(core_reduce, bad_buffers_and_counts_return_DIST_E_INVAL, .timeout = 10) {
  float a[16] = {0}, b[16] = {0}, d[16];
  const void *s[2] = {a, b};
  const void *sn[2] = {a, NULL};
  expect_inval(dist__reduce_multi(DIST_FLOAT32, DIST_SUM, d, s, 0, 4, 1), "nsrc 0");
  expect_inval(dist__reduce_multi(DIST_FLOAT32, DIST_SUM, d, s, -1, 4, 1), "nsrc -1");
  expect_inval(dist__reduce_multi(DIST_FLOAT32, DIST_SUM, d, NULL, 2, 4, 1), "srcs NULL");
  expect_inval(dist__reduce_multi(DIST_FLOAT32, DIST_SUM, NULL, s, 2, 4, 1), "dst NULL");
  expect_inval(dist__reduce_multi(DIST_FLOAT32, DIST_SUM, d, sn, 2, 4, 1), "source NULL");
  expect_inval(dist__reduce_multi(DIST_FLOAT32, DIST_AVG, d, s, 2, 4, 0), "AVG divisor 0");
  expect_inval(dist__reduce_multi(DIST_FLOAT16, DIST_AVG, d, s, 2, 4, -2), "AVG divisor -2");
  expect_inval(dist__reduce_multi(DIST_FLOAT32, DIST_SUM, b, s, 2, 4, 1), "dst is srcs[1]");
  expect_inval(dist__reduce_multi(DIST_FLOAT32, DIST_SUM, a + 1, s, 2, 4, 1),
               "dst overlaps srcs[0]");
  expect_inval(dist__reduce_multi(DIST_FLOAT32, DIST_SUM, d, s, 2, SIZE_MAX / 2, 1),
               "size overflow");
  expect_inval(dist__reduce_step(DIST_FLOAT32, DIST_SUM, a, a, 4), "step acc is the input");
  expect_inval(dist__reduce_begin(DIST_FLOAT16, DIST_SUM, a, a, 4), "half acc is the input");
  expect_inval(dist__reduce_end(DIST_BFLOAT16, DIST_SUM, a, a, 4, 1), "half out is the acc");
  expect_inval(dist__reduce_end(DIST_FLOAT32, DIST_AVG, d, a, 4, 0), "end AVG divisor 0");
  expect_inval(dist__reduce_begin(DIST_FLOAT32, DIST_SUM, NULL, a, 4), "begin acc NULL");
  /* Zero elements: nothing to touch, so NULL buffers are fine. */
  cr_assert_eq(dist__reduce_multi(DIST_FLOAT32, DIST_SUM, NULL, sn, 2, 0, 1), DIST_OK);
  cr_assert_eq(dist__reduce_begin(DIST_FLOAT32, DIST_SUM, NULL, NULL, 0), DIST_OK);
  cr_assert_eq(dist__reduce_acc_size(DIST_FLOAT16, 10), 40);
  cr_assert_eq(dist__reduce_acc_size(DIST_COMPLEX128, 10), 160);
  cr_assert_eq(dist__reduce_acc_size((dist_dtype)99, 10), 0);
}

/* --- the reference helpers themselves (tests/support/ref.h) ----------------- */

Test(core_reduce, ref_expected_equals_reducing_filled_buffers, .timeout = 30) {
  uint64_t seed = dist_test_seed();
  enum { N = 999, FIRST = 17, RANKS = 3 };
  static unsigned char bufs[RANKS][N * 16], a[N * 16], b[N * 16];
  const void *srcs[RANKS];
  for (size_t d = 0; d < N_DTYPES; d++)
    for (int k = 0; k < DIST_REDOP_COUNT_; k++) {
      dist_redop op = op_of(k);
      if (dist_redop_check(op, dtypes[d]) != DIST_OK)
        continue;
      for (int r = 0; r < RANKS; r++) {
        dist_test_fill(bufs[r], dtypes[d], N, seed, r, FIRST, 0);
        srcs[r] = bufs[r];
      }
      cr_assert_eq(dist_test_ref_reduce(dtypes[d], op, a, srcs, RANKS, N, RANKS), 0);
      cr_assert_eq(dist_test_expected(dtypes[d], op, b, N, seed, RANKS, FIRST, 0, RANKS), 0);
      char msg[512];
      cr_assert_eq(dist_test_compare(dtypes[d], b, a, N, 0, msg, sizeof msg), 0, "%s %s: %s",
                   dist_dtype_name(dtypes[d]), dist_redop_name(k), msg);
    }
  cr_assert_eq(dist_test_expected(DIST_INT32, DIST_AVG, b, 1, seed, 2, 0, 0, 2), -1);
}

/* The fill must make order visible: summing 5 ranks backwards changes some
 * results (else a test could not catch a wrong order). Not for the half
 * types: their float32 accumulation is far finer than the final rounding,
 * which hides the order almost always. */
Test(core_reduce, ref_fill_makes_the_reduction_order_matter, .timeout = 30) {
  uint64_t seed = dist_test_seed();
  enum { N = 4096, RANKS = 5 };
  static unsigned char bufs[RANKS][N * 16], fwd[N * 16], bwd[N * 16];
  const dist_dtype fl[] = {DIST_FLOAT32, DIST_FLOAT64, DIST_COMPLEX64, DIST_COMPLEX128};
  for (size_t d = 0; d < sizeof fl / sizeof fl[0]; d++)
    for (int k = DIST_REDOP_SUM; k <= DIST_REDOP_PRODUCT; k++) {
      const void *up[RANKS], *down[RANKS];
      for (int r = 0; r < RANKS; r++) {
        dist_test_fill(bufs[r], fl[d], N, seed, r, 0, 0);
        up[r] = bufs[r];
        down[RANKS - 1 - r] = bufs[r];
      }
      dist_test_ref_reduce(fl[d], op_of(k), fwd, up, RANKS, N, 1);
      dist_test_ref_reduce(fl[d], op_of(k), bwd, down, RANKS, N, 1);
      cr_assert_neq(dist_test_compare(fl[d], fwd, bwd, N, 0, NULL, 0), 0,
                    "%s %s: the order changes nothing", dist_dtype_name(fl[d]), dist_redop_name(k));
    }
}

Test(core_reduce, ref_compare_names_the_first_difference_and_both_values, .timeout = 10) {
  float a[8] = {0, 1, 2, 3, 4, 5, 6, 7}, b[8];
  char msg[256];
  memcpy(b, a, sizeof a);
  cr_assert_eq(dist_test_compare(DIST_FLOAT32, a, b, 8, 0, msg, sizeof msg), 0);
  b[5] = 5.5f;
  b[7] = -1.0f;
  cr_assert_eq(dist_test_compare(DIST_FLOAT32, a, b, 8, 0, msg, sizeof msg), 1);
  cr_assert(strstr(msg, "2 of 8 elements differ") && strstr(msg, "first at 5") &&
                strstr(msg, "got 5 (0x40a00000)") && strstr(msg, "want 5.5 (0x40b00000)"),
            "%s", msg);
  /* Two NaNs with different payloads match only when asked. */
  uint32_t n1 = 0x7fc00000u, n2 = 0xffc00001u;
  cr_assert_eq(dist_test_compare(DIST_FLOAT32, &n1, &n2, 1, 0, NULL, 0), 1);
  cr_assert_eq(dist_test_compare(DIST_FLOAT32, &n1, &n2, 1, DIST_TEST_CMP_ANY_NAN, NULL, 0), 0);
  int64_t x = -7, y = 7;
  cr_assert_eq(dist_test_compare(DIST_INT64, &x, &y, 1, 0, msg, sizeof msg), 1);
  cr_assert(strstr(msg, "got -7, want 7"), "%s", msg);
}

Test(core_reduce, ref_special_fill_holds_nan_inf_and_zero, .timeout = 10) {
  enum { N = 4096 };
  static float v[N];
  int nan = 0, inf = 0, zero = 0;
  dist_test_fill(v, DIST_FLOAT32, N, 42, 1, 0, DIST_TEST_FILL_SPECIAL);
  for (int i = 0; i < N; i++)
    nan += isnan(v[i]), inf += isinf(v[i]), zero += v[i] == 0;
  cr_assert(nan > 0 && inf > 0 && zero > 0, "nan %d inf %d zero %d", nan, inf, zero);
  dist_test_fill(v, DIST_FLOAT32, N, 42, 1, 0, 0);
  for (int i = 0; i < N; i++)
    if (!isfinite(v[i]))
      cr_assert_fail("plain fill gave %g at %d", v[i], i);
}
