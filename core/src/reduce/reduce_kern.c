/* reduce_kern.c - the same-type reduction kernels and their table.
 *
 * Every dtype but float16/bfloat16 accumulates in its own type (reduce.h),
 * so these kernels write straight into the destination: bin is
 * d = pre(a) op pre(b), acc is d = d op pre(b), bin3 and acc2 take one
 * more input per pass. Each (type, op) pair gets its own loops, generated
 * by macros, that GCC vectorises at -O3 (once for AVX2, once for the
 * baseline: DIST_RK_CLONES); restrict lives on the typed inline bodies and
 * survives inlining into the void * entry points the table holds.
 *
 * Integers compute in unsigned arithmetic at least 32 bits wide (wt), so
 * overflow wraps instead of being undefined, and small types never meet
 * int promotion overflow (uint16 * uint16 would overflow int). Floating
 * arithmetic canonicalises NaN (DIST_RK_CANON) and MIN/MAX propagate NaN;
 * complex numbers reuse the real kernels over their 2n components except
 * PRODUCT. */
#include "reduce_kern.h"
#include "reduce.h"

/* Combining operations: acc first, new input second. vt is the element
 * type and wt the arithmetic type inside each generated function. */
#define O_ADD(a, b) DIST_RK_CANON((a) + (b))
#define O_MUL(a, b) DIST_RK_CANON((a) * (b))
#define O_FMIN(a, b) (((b) < (a) || (b) != (b)) ? (b) : (a))
#define O_FMAX(a, b) (((a) < (b) || (b) != (b)) ? (b) : (a))
#define O_IADD(a, b) ((vt)((wt)(a) + (wt)(b)))
#define O_IMUL(a, b) ((vt)((wt)(a) * (wt)(b)))
#define O_IMIN(a, b) ((b) < (a) ? (b) : (a))
#define O_IMAX(a, b) ((a) < (b) ? (b) : (a))
#define O_AND(a, b) ((vt)((a) & (b)))
#define O_OR(a, b) ((vt)((a) | (b)))
#define O_XOR(a, b) ((vt)((a) ^ (b)))

/* Per-input transforms; D_SCALE declares PREMUL_SUM's scalar s. */
#define D_NONE (void)p;
#define D_SCALE const vt s = (vt)p->scalar;
#define P_ID(x) (x)
#define P_SCALE(x) (s * (x))
#define P_BOOL(x) ((vt)((x) != 0))

/* The declarations every generated body opens with. */
#define S_TYPES(T, W, DECL)                                                                        \
  typedef T vt;                                                                                    \
  typedef W wt;                                                                                    \
  (void)sizeof(vt);                                                                                \
  (void)sizeof(wt);                                                                                \
  DECL

/* name##_bin, _acc, _bin3 and _acc2 for element type T, arithmetic W. */
#define S_GEN_OP(name, T, W, PRE, OP, DECL)                                                        \
  static inline void name##_bin_i(T *restrict d, const T *restrict a, const T *restrict b,         \
                                  size_t n, const dist__rk_param *p) {                             \
    S_TYPES(T, W, DECL)                                                                            \
    DIST_RK_UNROLL for (size_t i = 0; i < n; i++) d[i] = OP(PRE(a[i]), PRE(b[i]));                 \
  }                                                                                                \
  DIST_RK_CLONES static void name##_bin(void *d, const void *a, const void *b, size_t n,           \
                                        const dist__rk_param *p) {                                 \
    name##_bin_i(d, a, b, n, p);                                                                   \
  }                                                                                                \
  static inline void name##_acc_i(T *restrict d, const T *restrict b, size_t n,                    \
                                  const dist__rk_param *p) {                                       \
    S_TYPES(T, W, DECL)                                                                            \
    DIST_RK_UNROLL for (size_t i = 0; i < n; i++) d[i] = OP(d[i], PRE(b[i]));                      \
  }                                                                                                \
  DIST_RK_CLONES static void name##_acc(void *d, const void *b, size_t n,                          \
                                        const dist__rk_param *p) {                                 \
    name##_acc_i(d, b, n, p);                                                                      \
  }                                                                                                \
  static inline void name##_bin3_i(T *restrict d, const T *restrict a, const T *restrict b,        \
                                   const T *restrict c, size_t n, const dist__rk_param *p) {       \
    S_TYPES(T, W, DECL)                                                                            \
    DIST_RK_UNROLL for (size_t i = 0; i < n; i++) {                                                \
      vt t = OP(PRE(a[i]), PRE(b[i]));                                                             \
      d[i] = OP(t, PRE(c[i]));                                                                     \
    }                                                                                              \
  }                                                                                                \
  DIST_RK_CLONES static void name##_bin3(void *d, const void *a, const void *b, const void *c,     \
                                         size_t n, const dist__rk_param *p) {                      \
    name##_bin3_i(d, a, b, c, n, p);                                                               \
  }                                                                                                \
  static inline void name##_acc2_i(T *restrict d, const T *restrict x, const T *restrict y,        \
                                   size_t n, const dist__rk_param *p) {                            \
    S_TYPES(T, W, DECL)                                                                            \
    DIST_RK_UNROLL for (size_t i = 0; i < n; i++) {                                                \
      vt t = OP(d[i], PRE(x[i]));                                                                  \
      d[i] = OP(t, PRE(y[i]));                                                                     \
    }                                                                                              \
  }                                                                                                \
  DIST_RK_CLONES static void name##_acc2(void *d, const void *x, const void *y, size_t n,          \
                                         const dist__rk_param *p) {                                \
    name##_acc2_i(d, x, y, n, p);                                                                  \
  }

/* A one-pointer or two-pointer map kernel: name(d, [a,] n, p) runs BODY
 * for each i with the typed d (and a) in scope. */
#define S_GEN_MAP(name, T, BODY)                                                                   \
  static inline void name##_i(T *restrict d, const T *restrict a, size_t n,                        \
                              const dist__rk_param *p) {                                           \
    typedef T vt;                                                                                  \
    (void)sizeof(vt);                                                                              \
    (void)p;                                                                                       \
    DIST_RK_UNROLL for (size_t i = 0; i < n; i++) BODY;                                            \
  }                                                                                                \
  DIST_RK_CLONES static void name(void *d, const void *a, size_t n, const dist__rk_param *p) {     \
    name##_i(d, a, n, p);                                                                          \
  }
#define S_GEN_SELF(name, T, BODY)                                                                  \
  static inline void name##_i(T *restrict d, size_t n, const dist__rk_param *p) {                  \
    typedef T vt;                                                                                  \
    (void)sizeof(vt);                                                                              \
    (void)p;                                                                                       \
    DIST_RK_UNROLL for (size_t i = 0; i < n; i++) BODY;                                            \
  }                                                                                                \
  DIST_RK_CLONES static void name(void *d, size_t n, const dist__rk_param *p) { name##_i(d, n, p); }

/* Floating types: the five combining ops, PREMUL_SUM's first and in-place
 * first (scale), and AVG's in-place finish (divide). The scalar and the
 * divisor convert once per call, outside the loops. */
#define S_GEN_FLOAT(t, T)                                                                          \
  S_GEN_OP(t##_sum, T, T, P_ID, O_ADD, D_NONE)                                                     \
  S_GEN_OP(t##_prod, T, T, P_ID, O_MUL, D_NONE)                                                    \
  S_GEN_OP(t##_min, T, T, P_ID, O_FMIN, D_NONE)                                                    \
  S_GEN_OP(t##_max, T, T, P_ID, O_FMAX, D_NONE)                                                    \
  S_GEN_OP(t##_pms, T, T, P_SCALE, O_ADD, D_SCALE)                                                 \
  S_GEN_MAP(t##_scale, T, d[i] = DIST_RK_CANON((vt)p->scalar * a[i]))                              \
  S_GEN_SELF(t##_scale_self, T, d[i] = DIST_RK_CANON((vt)p->scalar * d[i]))                        \
  S_GEN_SELF(t##_div_self, T, d[i] = DIST_RK_CANON(d[i] / (vt)p->divisor))

#define S_GEN_INT(t, T, W)                                                                         \
  S_GEN_OP(t##_sum, T, W, P_ID, O_IADD, D_NONE)                                                    \
  S_GEN_OP(t##_prod, T, W, P_ID, O_IMUL, D_NONE)                                                   \
  S_GEN_OP(t##_min, T, W, P_ID, O_IMIN, D_NONE)                                                    \
  S_GEN_OP(t##_max, T, W, P_ID, O_IMAX, D_NONE)                                                    \
  S_GEN_OP(t##_band, T, W, P_ID, O_AND, D_NONE)                                                    \
  S_GEN_OP(t##_bor, T, W, P_ID, O_OR, D_NONE)                                                      \
  S_GEN_OP(t##_bxor, T, W, P_ID, O_XOR, D_NONE)

S_GEN_FLOAT(f32, float)
S_GEN_FLOAT(f64, double)
S_GEN_INT(i8, int8_t, uint32_t)
S_GEN_INT(u8, uint8_t, uint32_t)
S_GEN_INT(i16, int16_t, uint32_t)
S_GEN_INT(i32, int32_t, uint32_t)
S_GEN_INT(i64, int64_t, uint64_t)
/* bool: inputs read as 0/1; first and in-place first normalise. */
S_GEN_OP(b8_or, uint8_t, uint32_t, P_BOOL, O_OR, D_NONE)
S_GEN_OP(b8_and, uint8_t, uint32_t, P_BOOL, O_AND, D_NONE)
S_GEN_OP(b8_xor, uint8_t, uint32_t, P_BOOL, O_XOR, D_NONE)
S_GEN_MAP(b8_first, uint8_t, d[i] = a[i] != 0)
S_GEN_SELF(b8_first_self, uint8_t, d[i] = d[i] != 0)

/* Complex PRODUCT over interleaved (re, im) pairs; n counts elements. The
 * plain formula, as torch's c10::complex (no C99 Annex G inf recovery).
 * GCC 12's vectoriser turns this very pattern into vfmaddsub when FMA is
 * available (-march=native), whatever -ffp-contract says, which would round
 * differently from a build without FMA; an empty asm makes each product
 * opaque, which keeps the loop scalar. PRODUCT of complex numbers is rare
 * enough for that, and for doing without bin3/acc2. */
#if defined(__x86_64__) || defined(__i386__)
#define C_OPAQUE(x) __asm__("" : "+x"(x))
#else
#define C_OPAQUE(x) __asm__("" : "+m"(x))
#endif
#define C_MUL(d, ar, ai, br, bi)                                                                   \
  do {                                                                                             \
    __typeof__(ar) rr = ar * br, ii = ai * bi, ri = ar * bi, ir = ai * br;                         \
    C_OPAQUE(rr);                                                                                  \
    C_OPAQUE(ii);                                                                                  \
    C_OPAQUE(ri);                                                                                  \
    C_OPAQUE(ir);                                                                                  \
    d[2 * i] = DIST_RK_CANON(rr - ii);                                                             \
    d[2 * i + 1] = DIST_RK_CANON(ri + ir);                                                         \
  } while (0)
#define C_GEN_PROD(t, R)                                                                           \
  static inline void t##_bin_i(R *restrict d, const R *restrict a, const R *restrict b,            \
                               size_t n) {                                                         \
    DIST_RK_UNROLL for (size_t i = 0; i < n; i++) {                                                \
      R ar = a[2 * i], ai = a[2 * i + 1], br = b[2 * i], bi = b[2 * i + 1];                        \
      C_MUL(d, ar, ai, br, bi);                                                                    \
    }                                                                                              \
  }                                                                                                \
  DIST_RK_CLONES static void t##_bin(void *d, const void *a, const void *b, size_t n,              \
                                     const dist__rk_param *p) {                                    \
    (void)p;                                                                                       \
    t##_bin_i(d, a, b, n);                                                                         \
  }                                                                                                \
  static inline void t##_acc_i(R *restrict d, const R *restrict b, size_t n) {                     \
    DIST_RK_UNROLL for (size_t i = 0; i < n; i++) {                                                \
      R ar = d[2 * i], ai = d[2 * i + 1], br = b[2 * i], bi = b[2 * i + 1];                        \
      C_MUL(d, ar, ai, br, bi);                                                                    \
    }                                                                                              \
  }                                                                                                \
  DIST_RK_CLONES static void t##_acc(void *d, const void *b, size_t n, const dist__rk_param *p) {  \
    (void)p;                                                                                       \
    t##_acc_i(d, b, n);                                                                            \
  }

C_GEN_PROD(c64_prod, float)
C_GEN_PROD(c128_prod, double)

/* Table entries. */
#define E_OPS(t, op)                                                                               \
  .bin = t##_##op##_bin, .acc = t##_##op##_acc, .bin3 = t##_##op##_bin3, .acc2 = t##_##op##_acc2
#define E_PLAIN(t, op, u, us)                                                                      \
  { E_OPS(t, op), .units = u, .usize = us }
#define E_AVG(t, u, us)                                                                            \
  { E_OPS(t, sum), .fin_self = t##_div_self, .units = u, .usize = us }
#define E_PMS(t, u, us)                                                                            \
  { E_OPS(t, pms), .first = t##_scale, .first_self = t##_scale_self, .units = u, .usize = us }
#define E_BOOL(op)                                                                                 \
  { E_OPS(b8, op), .first = b8_first, .first_self = b8_first_self, .units = 1, .usize = 1 }

#define T_FLOAT(t, u, us)                                                                          \
  {                                                                                                \
    [DIST_REDOP_SUM] = E_PLAIN(t, sum, u, us),                                                     \
    [DIST_REDOP_PRODUCT] = E_PLAIN(t, prod, u, us),                                                \
    [DIST_REDOP_MIN] = E_PLAIN(t, min, u, us),                                                     \
    [DIST_REDOP_MAX] = E_PLAIN(t, max, u, us),                                                     \
    [DIST_REDOP_AVG] = E_AVG(t, u, us),                                                            \
    [DIST_REDOP_PREMUL_SUM] = E_PMS(t, u, us),                                                     \
  }
#define T_INT(t, us)                                                                               \
  {                                                                                                \
    [DIST_REDOP_SUM] = E_PLAIN(t, sum, 1, us),                                                     \
    [DIST_REDOP_PRODUCT] = E_PLAIN(t, prod, 1, us),                                                \
    [DIST_REDOP_MIN] = E_PLAIN(t, min, 1, us),                                                     \
    [DIST_REDOP_MAX] = E_PLAIN(t, max, 1, us),                                                     \
    [DIST_REDOP_BAND] = E_PLAIN(t, band, 1, us),                                                   \
    [DIST_REDOP_BOR] = E_PLAIN(t, bor, 1, us),                                                     \
    [DIST_REDOP_BXOR] = E_PLAIN(t, bxor, 1, us),                                                   \
  }
/* Complex: SUM, AVG and PREMUL_SUM componentwise over 2n reals of rs
 * bytes; PRODUCT over n pairs; no order, so no MIN/MAX. */
#define T_COMPLEX(t, r, rs)                                                                        \
  {                                                                                                \
    [DIST_REDOP_SUM] = E_PLAIN(r, sum, 2, rs),                                                     \
    [DIST_REDOP_PRODUCT] = {.bin = t##_prod_bin, .acc = t##_prod_acc, .units = 1,                  \
                            .usize = 2 * (rs)},                                                    \
    [DIST_REDOP_AVG] = E_AVG(r, 2, rs),                                                            \
    [DIST_REDOP_PREMUL_SUM] = E_PMS(r, 2, rs),                                                     \
  }

const dist__rk dist__reduce_same_table[DIST_DTYPE_COUNT_][DIST_REDOP_COUNT_] = {
    [DIST_FLOAT32] = T_FLOAT(f32, 1, 4),
    [DIST_FLOAT64] = T_FLOAT(f64, 1, 8),
    [DIST_INT8] = T_INT(i8, 1),
    [DIST_UINT8] = T_INT(u8, 1),
    [DIST_INT16] = T_INT(i16, 2),
    [DIST_INT32] = T_INT(i32, 4),
    [DIST_INT64] = T_INT(i64, 8),
    [DIST_BOOL] =
        {
            [DIST_REDOP_SUM] = E_BOOL(or),
            [DIST_REDOP_PRODUCT] = E_BOOL(and),
            [DIST_REDOP_MIN] = E_BOOL(and),
            [DIST_REDOP_MAX] = E_BOOL(or),
            [DIST_REDOP_BAND] = E_BOOL(and),
            [DIST_REDOP_BOR] = E_BOOL(or),
            [DIST_REDOP_BXOR] = E_BOOL(xor),
        },
    [DIST_COMPLEX64] = T_COMPLEX(c64, f32, 4),
    [DIST_COMPLEX128] = T_COMPLEX(c128, f64, 8),
};
