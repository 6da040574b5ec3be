/* reduce_kern.h - the kernel tables behind reduce.h (reduce*.c only).
 *
 * A reduction is dispatched once per call to a dist__rk entry for its
 * (dtype, op); the entry's kernels are tight loops over plain arrays that
 * GCC vectorises (reduce*.c are built with -O3). The drivers in reduce.c
 * run them block by block, so no loop ever switches on the dtype or op.
 *
 * Two shapes of entry:
 *   - same type (every dtype but the half types): the accumulator has the
 *     inputs' type, so dst itself accumulates. Complex SUM, AVG and
 *     PREMUL_SUM run the real kernels over 2n components (units = 2).
 *   - half (float16, bfloat16): the accumulator is a float32 array; first
 *     and bin convert from the half type, fin rounds back. */
#ifndef DIST_CPU_REDUCE_KERN_H
#define DIST_CPU_REDUCE_KERN_H

#include <stddef.h>
#include <stdint.h>

#include <dist/tensor.h>

/* On x86-64 every kernel is built twice, for AVX2 and for the baseline,
 * and the loader picks one per process (GCC target_clones, an ifunc): in
 * cache AVX2 moves about 2-3x the baseline's bytes. Both clones run the
 * same IEEE operations (no FMA: -ffp-contract=off), so ranks on different
 * CPUs still agree bit for bit. */
/* Not under ThreadSanitizer: the loader runs ifunc resolvers before the
 * TSan runtime is up, and an instrumented resolver crashes the process. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && defined(__ELF__) &&         \
    !defined(DIST_RK_NO_CLONES) && !defined(__SANITIZE_THREAD__)
#define DIST_RK_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define DIST_RK_CLONES
#endif

/* Floating arithmetic results go through dist__rk_canon: a NaN becomes the
 * canonical quiet NaN, so the payload and sign x86 picks from the operand
 * order (which the compiler chooses per loop) never reach the output. */
static inline float dist__rk_canon_f(float x) { return x != x ? __builtin_nanf("") : x; }
static inline double dist__rk_canon_d(double x) { return x != x ? __builtin_nan("") : x; }
#define DIST_RK_CANON(x) _Generic((x), float : dist__rk_canon_f, double : dist__rk_canon_d)(x)

/* Kernel loops are unrolled: the vector loop body is only a few
 * instructions, and in L1 the loop overhead would otherwise cost a third. */
#define DIST_RK_UNROLL _Pragma("GCC unroll 4")

typedef struct dist__rk_param {
  double scalar; /* PREMUL_SUM */
  int divisor;   /* AVG, >= 1 */
} dist__rk_param;

/* In every kernel pre(x) is the per-input transform (s*x for PREMUL_SUM,
 * x != 0 for bool, else x) and op the combining operation. Pointers given
 * to one kernel never overlap. n counts units (see dist__rk.usize). */
typedef void (*dist__rk_bin_fn)(void *acc, const void *a, const void *b, size_t n,
                                const dist__rk_param *p); /* acc = pre(a) op pre(b) */
typedef void (*dist__rk_acc_fn)(void *acc, const void *x, size_t n,
                                const dist__rk_param *p); /* acc = acc op pre(x) */
/* Three inputs in one pass, so dst crosses the cache once per two inputs:
 * bin3 is acc = (pre(a) op pre(b)) op pre(c), acc2 is
 * acc = (acc op pre(x)) op pre(y). Bit for bit the same as bin/acc twice. */
typedef void (*dist__rk_bin3_fn)(void *acc, const void *a, const void *b, const void *c, size_t n,
                                 const dist__rk_param *p);
typedef void (*dist__rk_acc2_fn)(void *acc, const void *x, const void *y, size_t n,
                                 const dist__rk_param *p);
typedef void (*dist__rk_map_fn)(void *dst, const void *src, size_t n,
                                const dist__rk_param *p); /* see dist__rk */
typedef void (*dist__rk_self_fn)(void *acc, size_t n,
                                 const dist__rk_param *p); /* in place, see dist__rk */

typedef struct dist__rk {
  dist__rk_bin_fn bin;
  dist__rk_acc_fn acc;
  dist__rk_bin3_fn bin3;
  dist__rk_acc2_fn acc2;
  dist__rk_map_fn first;       /* acc = pre(x0); NULL: a plain copy (same type only) */
  dist__rk_self_fn first_self; /* acc = pre(acc); NULL: nothing to do (same type only) */
  dist__rk_self_fn fin_self;   /* same type: acc = post(acc) (AVG); NULL: nothing */
  dist__rk_map_fn fin;         /* half: out = round(post(acc)); NULL for same type */
  dist__rk_bin_fn binfin;      /* half: out = round(post(pre(a) op pre(b))), out apart */
  dist__rk_acc_fn accfin;      /* half: out = round(post(pre(out) op pre(b))), in place */
  uint8_t half;                /* accumulates in float32 */
  uint8_t units;               /* kernel units per element (2: complex as reals) */
  uint8_t usize;               /* bytes per unit of the inputs */
} dist__rk;

/* The entries, indexed by dtype (float16, bfloat16 for the half table)
 * and op; an entry without bin is a pair that has no kernel. */
extern const dist__rk dist__reduce_same_table[DIST_DTYPE_COUNT_][DIST_REDOP_COUNT_];
extern const dist__rk dist__reduce_half_table[2][DIST_REDOP_COUNT_];

#endif
