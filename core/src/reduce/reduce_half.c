/* reduce_half.c - float16 and bfloat16: conversions and reduction kernels.
 *
 * The half types accumulate in float32 (reduce.h): a kernel converts each
 * input as it reads it, combines in float32 into an accumulation array, and
 * the final kernel rounds once; two sources skip the array and round as
 * they go (binfin/accfin). The conversions are written as branch-free
 * selects over 32-bit integers so GCC vectorises them with plain SSE2 (no
 * F16C needed), and so they do not depend on flush-to-zero or
 * denormals-are-zero modes (only on round-to-nearest, the default).
 *
 * float16 -> float32 is exact. float32 -> float16 rounds to nearest even:
 *   |x| >= 65520 (the tie above 65504 rounds to even, i.e. up) -> inf;
 *   normal results: re-bias the exponent, add half an ulp minus one plus
 *   the kept lsb, shift (a carry into the exponent is the correct result);
 *   |x| < 2^-14 (subnormal results): x + 0.5f puts the float16 subnormal
 *   ulp (2^-24) at the float32 ulp of 0.5, so the FPU's own rounding does
 *   the work and the low bits are the result;
 *   NaN -> sign|0x7e00 (what torch's c10::Half gives) for the conversion,
 *   0x7e00 for a reduction's result (reduce.h: NaN there is canonical).
 * bfloat16 is the top half of a float32: widen by shifting; narrow by adding
 * 0x7fff plus the kept lsb (NaN -> 0x7fc0, as torch's c10::BFloat16). */
#include <stdbool.h>
#include <string.h>

#include "reduce.h"
#include "reduce_kern.h"

static inline uint32_t f2u(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

static inline float u2f(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

/* Selects are written as masks: as ternaries GCC would branch around the
 * float operations (they may trap under -ftrapping-math) and give up on
 * vectorising. */
static inline uint32_t pick(uint32_t cond, uint32_t yes, uint32_t no) {
  uint32_t m = 0u - cond;
  return (yes & m) | (no & ~m);
}

static inline float f16_in(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t a = h & 0x7fffu;
  uint32_t normal = (a << 13) + 0x38000000u;        /* exponent 15 -> 127 */
  uint32_t special = (a << 13) | 0x7f800000u;       /* inf, NaN (payload kept) */
  uint32_t sub = f2u((float)(int32_t)a * 0x1p-24f); /* exact: a < 2^10 */
  uint32_t r = pick(a >= 0x0400u, normal, sub);
  r = pick(a >= 0x7c00u, special, r);
  return u2f(r | sign);
}

/* nan_sign: keep a NaN's sign (the conversion, as torch) or drop it (a
 * reduction's result: the sign of a NaN made by arithmetic depends on the
 * operand order, so results give the one canonical NaN). */
static inline uint16_t f16_round(float f, bool nan_sign) {
  uint32_t x = f2u(f);
  uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t a = x & 0x7fffffffu;
  uint32_t normal = (a - 0x38000000u + 0x0fffu + ((a >> 13) & 1u)) >> 13;
  uint32_t sub = f2u(u2f(a) + 0.5f) - 0x3f000000u;
  uint32_t r = pick(a >= 0x38800000u, normal, sub);
  r = pick(a >= 0x477ff000u, 0x7c00u, r);
  r = pick(a > 0x7f800000u, 0x7e00u, sign | r);
  return (uint16_t)(nan_sign ? r | sign : r);
}
static inline uint16_t f16_out(float f) { return f16_round(f, true); }
static inline uint16_t f16_rout(float f) { return f16_round(f, false); }

static inline float bf16_in(uint16_t h) { return u2f((uint32_t)h << 16); }

static inline uint16_t bf16_out(float f) {
  uint32_t x = f2u(f);
  uint32_t r = (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
  return (uint16_t)(f != f ? 0x7fc0u : r);
}

/* --- conversions --------------------------------------------------------- */

static inline void f16_to_f32_i(float *restrict d, const uint16_t *restrict s, size_t n) {
  DIST_RK_UNROLL for (size_t i = 0; i < n; i++) d[i] = f16_in(s[i]);
}
static inline void f32_to_f16_i(uint16_t *restrict d, const float *restrict s, size_t n) {
  DIST_RK_UNROLL for (size_t i = 0; i < n; i++) d[i] = f16_out(s[i]);
}
static inline void bf16_to_f32_i(float *restrict d, const uint16_t *restrict s, size_t n) {
  DIST_RK_UNROLL for (size_t i = 0; i < n; i++) d[i] = bf16_in(s[i]);
}
static inline void f32_to_bf16_i(uint16_t *restrict d, const float *restrict s, size_t n) {
  DIST_RK_UNROLL for (size_t i = 0; i < n; i++) d[i] = bf16_out(s[i]);
}

DIST_RK_CLONES void dist__f16_to_f32(float *dst, const uint16_t *src, size_t n) {
  f16_to_f32_i(dst, src, n);
}
DIST_RK_CLONES void dist__f32_to_f16(uint16_t *dst, const float *src, size_t n) {
  f32_to_f16_i(dst, src, n);
}
DIST_RK_CLONES void dist__bf16_to_f32(float *dst, const uint16_t *src, size_t n) {
  bf16_to_f32_i(dst, src, n);
}
DIST_RK_CLONES void dist__f32_to_bf16(uint16_t *dst, const float *src, size_t n) {
  f32_to_bf16_i(dst, src, n);
}

/* --- kernels ------------------------------------------------------------- */

/* Combining operations on float32 (acc first, new input second). NaN need
 * not be canonical here: the final rounding makes every NaN one value. */
#define H_SUM(a, b) ((a) + (b))
#define H_PROD(a, b) ((a) * (b))
#define H_MIN(a, b) (((b) < (a) || (b) != (b)) ? (b) : (a))
#define H_MAX(a, b) (((a) < (b) || (b) != (b)) ? (b) : (a))
/* Per-input transforms, applied to the converted value; s is PREMUL_SUM's
 * scalar as float32 (declared in every body, used by H_SCALE only). */
#define H_ID(x) (x)
#define H_SCALE(x) (s * (x))
#define S_DECL                                                                                     \
  const float s = (float)p->scalar;                                                                \
  (void)s;

typedef uint16_t hv; /* a float16 or bfloat16 value's bits */

/* name##_bin, _acc, _bin3 and _acc2 for one (half type, op): the float32
 * accumulator d, half inputs converted by IN as they are read. */
#define H_GEN_OP(name, IN, PRE, OP)                                                                \
  static inline void name##_bin_i(float *restrict d, const hv *restrict a, const hv *restrict b,   \
                                  size_t n, const dist__rk_param *p) {                             \
    S_DECL                                                                                         \
    DIST_RK_UNROLL for (size_t i = 0; i < n; i++) d[i] = OP(PRE(IN(a[i])), PRE(IN(b[i])));         \
  }                                                                                                \
  DIST_RK_CLONES static void name##_bin(void *d, const void *a, const void *b, size_t n,           \
                                        const dist__rk_param *p) {                                 \
    name##_bin_i(d, a, b, n, p);                                                                   \
  }                                                                                                \
  static inline void name##_acc_i(float *restrict d, const hv *restrict b, size_t n,               \
                                  const dist__rk_param *p) {                                       \
    S_DECL                                                                                         \
    DIST_RK_UNROLL for (size_t i = 0; i < n; i++) d[i] = OP(d[i], PRE(IN(b[i])));                  \
  }                                                                                                \
  DIST_RK_CLONES static void name##_acc(void *d, const void *b, size_t n,                          \
                                        const dist__rk_param *p) {                                 \
    name##_acc_i(d, b, n, p);                                                                      \
  }                                                                                                \
  static inline void name##_bin3_i(float *restrict d, const hv *restrict a, const hv *restrict b,  \
                                   const hv *restrict c, size_t n, const dist__rk_param *p) {      \
    S_DECL                                                                                         \
    DIST_RK_UNROLL for (size_t i = 0; i < n; i++) {                                                \
      float t = OP(PRE(IN(a[i])), PRE(IN(b[i])));                                                  \
      d[i] = OP(t, PRE(IN(c[i])));                                                                 \
    }                                                                                              \
  }                                                                                                \
  DIST_RK_CLONES static void name##_bin3(void *d, const void *a, const void *b, const void *c,     \
                                         size_t n, const dist__rk_param *p) {                      \
    name##_bin3_i(d, a, b, c, n, p);                                                               \
  }                                                                                                \
  static inline void name##_acc2_i(float *restrict d, const hv *restrict x, const hv *restrict y,  \
                                   size_t n, const dist__rk_param *p) {                            \
    S_DECL                                                                                         \
    DIST_RK_UNROLL for (size_t i = 0; i < n; i++) {                                                \
      float t = OP(d[i], PRE(IN(x[i])));                                                           \
      d[i] = OP(t, PRE(IN(y[i])));                                                                 \
    }                                                                                              \
  }                                                                                                \
  DIST_RK_CLONES static void name##_acc2(void *d, const void *x, const void *y, size_t n,          \
                                         const dist__rk_param *p) {                                \
    name##_acc2_i(d, x, y, n, p);                                                                  \
  }

/* Two inputs straight to the half result, with no float32 array between:
 * name##_binfin is d = OUT(POST(pre(a) op pre(b))), name##_accfin the same
 * in place (d is a). For the common two-source call. */
#define H_DIV(x) ((x) / div)
#define H_GEN_BINFIN(name, IN, PRE, OP, OUT, POST)                                                 \
  static inline void name##_binfin_i(hv *restrict d, const hv *restrict a, const hv *restrict b,   \
                                     size_t n, const dist__rk_param *p) {                          \
    S_DECL                                                                                         \
    const float div = (float)p->divisor;                                                           \
    (void)div;                                                                                     \
    DIST_RK_UNROLL for (size_t i = 0; i < n; i++) d[i] =                                           \
        OUT(POST(OP(PRE(IN(a[i])), PRE(IN(b[i])))));                                               \
  }                                                                                                \
  DIST_RK_CLONES static void name##_binfin(void *d, const void *a, const void *b, size_t n,        \
                                           const dist__rk_param *p) {                              \
    name##_binfin_i(d, a, b, n, p);                                                                \
  }                                                                                                \
  static inline void name##_accfin_i(hv *restrict d, const hv *restrict b, size_t n,               \
                                     const dist__rk_param *p) {                                    \
    S_DECL                                                                                         \
    const float div = (float)p->divisor;                                                           \
    (void)div;                                                                                     \
    DIST_RK_UNROLL for (size_t i = 0; i < n; i++) d[i] =                                           \
        OUT(POST(OP(PRE(IN(d[i])), PRE(IN(b[i])))));                                               \
  }                                                                                                \
  DIST_RK_CLONES static void name##_accfin(void *d, const void *b, size_t n,                       \
                                           const dist__rk_param *p) {                              \
    name##_accfin_i(d, b, n, p);                                                                   \
  }

/* bfloat16 two elements at a time: a 32-bit word holds element 2i in its
 * low half and 2i + 1 in its high half, and each is a float32 once shifted
 * up or masked, so the loop needs none of the shuffles that widening and
 * narrowing 16-bit lanes cost (they all queue on one port); the rounded
 * results merge back the same way. Bit for bit the H_GEN_BINFIN result.
 * Little-endian only. */
static inline uint32_t ld2(const hv *p) {
  uint32_t w;
  memcpy(&w, p, sizeof w);
  return w;
}
static inline void st2(hv *p, uint32_t w) { memcpy(p, &w, sizeof w); }
/* bf16_out, left in the top half of the word. */
static inline uint32_t bf16_out_hi(float f) {
  uint32_t x = f2u(f);
  uint32_t r = (x + 0x7fffu + ((x >> 16) & 1u)) & 0xffff0000u;
  return f != f ? 0x7fc00000u : r; /* a float compare and a blend, not integer ops */
}
#define BF_LO(w) u2f((w) << 16)
#define BF_HI(w) u2f((w)&0xffff0000u)
#define H_GEN_BF_PAIRS(name, IN, PRE, OP, OUT, POST)                                               \
  static inline uint32_t name##_pair(uint32_t x, uint32_t y, float s, float div) {                 \
    (void)s, (void)div;                                                                            \
    float lo = POST(OP(PRE(BF_LO(x)), PRE(BF_LO(y))));                                             \
    float hi = POST(OP(PRE(BF_HI(x)), PRE(BF_HI(y))));                                             \
    return bf16_out_hi(lo) >> 16 | bf16_out_hi(hi);                                                \
  }                                                                                                \
  static inline void name##_binfin_i(hv *restrict d, const hv *restrict a, const hv *restrict b,  \
                                     size_t n, const dist__rk_param *p) {                          \
    S_DECL                                                                                         \
    const float div = (float)p->divisor;                                                           \
    DIST_RK_UNROLL for (size_t i = 0; i < n / 2; i++)                                              \
        st2(d + 2 * i, name##_pair(ld2(a + 2 * i), ld2(b + 2 * i), s, div));                       \
    if (n & 1)                                                                                     \
      d[n - 1] = OUT(POST(OP(PRE(IN(a[n - 1])), PRE(IN(b[n - 1])))));                              \
  }                                                                                                \
  DIST_RK_CLONES static void name##_binfin(void *d, const void *a, const void *b, size_t n,        \
                                           const dist__rk_param *p) {                              \
    name##_binfin_i(d, a, b, n, p);                                                                \
  }                                                                                                \
  static inline void name##_accfin_i(hv *restrict d, const hv *restrict b, size_t n,               \
                                     const dist__rk_param *p) {                                    \
    S_DECL                                                                                         \
    const float div = (float)p->divisor;                                                           \
    DIST_RK_UNROLL for (size_t i = 0; i < n / 2; i++)                                              \
        st2(d + 2 * i, name##_pair(ld2(d + 2 * i), ld2(b + 2 * i), s, div));                       \
    if (n & 1)                                                                                     \
      d[n - 1] = OUT(POST(OP(PRE(IN(d[n - 1])), PRE(IN(b[n - 1])))));                              \
  }                                                                                                \
  DIST_RK_CLONES static void name##_accfin(void *d, const void *b, size_t n,                       \
                                           const dist__rk_param *p) {                              \
    name##_accfin_i(d, b, n, p);                                                                   \
  }

/* first (acc = pre(x0)), its PREMUL_SUM form, fin (round) and AVG's fin
 * (divide, round) for one half type. */
#define H_GEN_TYPE(t, IN, OUT)                                                                     \
  static inline void t##_first_i(float *restrict d, const hv *restrict a, size_t n,                \
                                 const dist__rk_param *p) {                                        \
    S_DECL                                                                                         \
    DIST_RK_UNROLL for (size_t i = 0; i < n; i++) d[i] = IN(a[i]);                                 \
  }                                                                                                \
  DIST_RK_CLONES static void t##_first(void *d, const void *a, size_t n,                           \
                                       const dist__rk_param *p) {                                  \
    t##_first_i(d, a, n, p);                                                                       \
  }                                                                                                \
  static inline void t##_sfirst_i(float *restrict d, const hv *restrict a, size_t n,               \
                                  const dist__rk_param *p) {                                       \
    S_DECL                                                                                         \
    DIST_RK_UNROLL for (size_t i = 0; i < n; i++) d[i] = s * IN(a[i]);                             \
  }                                                                                                \
  DIST_RK_CLONES static void t##_sfirst(void *d, const void *a, size_t n,                          \
                                        const dist__rk_param *p) {                                 \
    t##_sfirst_i(d, a, n, p);                                                                      \
  }                                                                                                \
  static inline void t##_fin_i(hv *restrict d, const float *restrict a, size_t n) {                \
    DIST_RK_UNROLL for (size_t i = 0; i < n; i++) d[i] = OUT(a[i]);                                \
  }                                                                                                \
  DIST_RK_CLONES static void t##_fin(void *d, const void *a, size_t n, const dist__rk_param *p) {  \
    (void)p;                                                                                       \
    t##_fin_i(d, a, n);                                                                            \
  }                                                                                                \
  static inline void t##_avgfin_i(hv *restrict d, const float *restrict a, size_t n, float div) {  \
    DIST_RK_UNROLL for (size_t i = 0; i < n; i++) d[i] = OUT(a[i] / div);                          \
  }                                                                                                \
  DIST_RK_CLONES static void t##_avgfin(void *d, const void *a, size_t n,                          \
                                        const dist__rk_param *p) {                                 \
    t##_avgfin_i(d, a, n, (float)p->divisor);                                                      \
  }                                                                                                \
  H_GEN_OP(t##_sum, IN, H_ID, H_SUM)                                                               \
  H_GEN_OP(t##_prod, IN, H_ID, H_PROD)                                                             \
  H_GEN_OP(t##_min, IN, H_ID, H_MIN)                                                               \
  H_GEN_OP(t##_max, IN, H_ID, H_MAX)                                                               \
  H_GEN_OP(t##_pms, IN, H_SCALE, H_SUM)

/* The binfin/accfin pairs of one type: GEN is H_GEN_BINFIN or
 * H_GEN_BF_PAIRS. */
#define H_GEN_FINS(GEN, t, IN, OUT)                                                                \
  GEN(t##_sum, IN, H_ID, H_SUM, OUT, H_ID)                                                         \
  GEN(t##_prod, IN, H_ID, H_PROD, OUT, H_ID)                                                       \
  GEN(t##_min, IN, H_ID, H_MIN, OUT, H_ID)                                                         \
  GEN(t##_max, IN, H_ID, H_MAX, OUT, H_ID)                                                         \
  GEN(t##_avg, IN, H_ID, H_SUM, OUT, H_DIV)                                                        \
  GEN(t##_pms, IN, H_SCALE, H_SUM, OUT, H_ID)

H_GEN_TYPE(f16, f16_in, f16_rout)
H_GEN_TYPE(bf16, bf16_in, bf16_out)
H_GEN_FINS(H_GEN_BINFIN, f16, f16_in, f16_rout)
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
H_GEN_FINS(H_GEN_BF_PAIRS, bf16, bf16_in, bf16_out)
#else
H_GEN_FINS(H_GEN_BINFIN, bf16, bf16_in, bf16_out)
#endif

/* ff names the binfin/accfin pair (AVG's divides). */
#define H_ENTRY(t, op, first_, fin_, ff)                                                           \
  {                                                                                                \
    .bin = t##_##op##_bin, .acc = t##_##op##_acc, .bin3 = t##_##op##_bin3,                         \
    .acc2 = t##_##op##_acc2, .first = t##_##first_, .fin = t##_##fin_,                             \
    .binfin = t##_##ff##_binfin, .accfin = t##_##ff##_accfin, .half = 1, .units = 1, .usize = 2    \
  }
/* Bitwise ops have no entry. */
#define H_TABLE(t)                                                                                 \
  {                                                                                                \
    [DIST_REDOP_SUM] = H_ENTRY(t, sum, first, fin, sum),                                           \
    [DIST_REDOP_PRODUCT] = H_ENTRY(t, prod, first, fin, prod),                                     \
    [DIST_REDOP_MIN] = H_ENTRY(t, min, first, fin, min),                                           \
    [DIST_REDOP_MAX] = H_ENTRY(t, max, first, fin, max),                                           \
    [DIST_REDOP_AVG] = H_ENTRY(t, sum, first, avgfin, avg),                                        \
    [DIST_REDOP_PREMUL_SUM] = H_ENTRY(t, pms, sfirst, fin, pms),                                   \
  }

const dist__rk dist__reduce_half_table[2][DIST_REDOP_COUNT_] = {H_TABLE(f16), H_TABLE(bf16)};
