/* reduce.h - the reduction kernels of the CPU backend.
 *
 * Every reduction of the CPU backend (shared memory and TCP, every
 * algorithm) goes through these functions, so that the rules below hold
 * everywhere and every rank gets bitwise identical results.
 *
 * Order. Inputs are combined in the order given, which callers make
 * ascending group-rank order: acc = x0; acc = acc op x1; ...;
 * acc = acc op x(N-1). Nothing is reassociated.
 *
 * Accumulation type. float16 and bfloat16 accumulate in float32 and round
 * once at the end (round to nearest even; overflow gives inf). Every other
 * dtype accumulates in itself.
 * NaN. A NaN made or passed on by arithmetic (SUM, PRODUCT, AVG,
 * PREMUL_SUM, and every float16/bfloat16 result) is the canonical quiet NaN
 * (float32 0x7fc00000, float64 0x7ff8000000000000, float16 0x7e00,
 * bfloat16 0x7fc0): which operand's payload and sign the CPU keeps depends
 * on the operand order the compiler picks per loop, so results would
 * otherwise differ between kernels. Only a plain copy (SUM, PRODUCT, MIN or
 * MAX of one source) and MIN/MAX of float32/float64 (which pick an input)
 * keep a payload.
 *   SUM, PRODUCT   a + b, a * b. Integers wrap (two's complement, computed
 *                  in unsigned arithmetic). Complex PRODUCT is
 *                  (ar*br - ai*bi, ar*bi + ai*br), no inf/NaN recovery.
 *   MIN, MAX       NaN propagates, as in torch: acc = (x < acc || x != x)
 *                  ? x : acc for MIN (acc < x for MAX), so a NaN in any
 *                  input gives NaN (the newest NaN input's).
 *   BAND/BOR/BXOR  integers and bool only.
 *   AVG            SUM, then divide by avg_divisor (normally the group size)
 *                  in the accumulation type; floating and complex only.
 *   PREMUL_SUM(s)  acc = s*x0; acc = acc + s*x1; ... with s converted to the
 *                  accumulation type (float32 for the half types, the real
 *                  part type for complex); floating and complex only.
 *   bool           inputs are read as x != 0 and outputs are 0 or 1:
 *                  SUM = MAX = BOR = or, PRODUCT = MIN = BAND = and, BXOR xor.
 * Float arithmetic is plain IEEE (no FMA contraction: reduce*.c are built
 * with -ffp-contract=off), so the two forms below, every rank and every
 * CPU agree bit for bit, NaN included.
 *
 * Errors. A dtype/op combination that dist_redop_check rejects, an unknown
 * dtype or op, AVG with avg_divisor < 1, nsrc < 1, NULL buffers with n > 0
 * or a dst that overlaps a source other than exactly srcs[0]: DIST_E_INVAL
 * with a message in dist_last_errmsg(). Nothing here allocates, blocks or
 * logs on success; any thread may call them concurrently. */
#ifndef DIST_CPU_REDUCE_H
#define DIST_CPU_REDUCE_H

#include <stddef.h>
#include <stdint.h>

#include <dist/tensor.h>

/* dst[i] = srcs[0][i] op srcs[1][i] op ... op srcs[nsrc-1][i] for i < n
 * elements, in that order, then the AVG / PREMUL_SUM rules above. dst may be
 * srcs[0] (in place); it may not overlap any other source. avg_divisor is
 * read for AVG only. */
int dist__reduce_multi(dist_dtype dt, dist_redop op, void *dst, const void *const *srcs, int nsrc,
                       size_t n, int avg_divisor);

/* The two-step form, for algorithms that receive inputs one at a time in
 * rank order:
 *     dist__reduce_begin(acc, x0); dist__reduce_step(acc, x1); ...;
 *     dist__reduce_end(out, acc);
 * gives bitwise the result dist__reduce_multi gives for x0, x1, ...
 * acc holds dist__reduce_acc_size(dt, n) bytes (float32 elements for the
 * half types, else dt's own elements) and is the caller's; between begin
 * and end its content is the running accumulation in that type. acc may be
 * x0 in begin when the accumulation type is dt itself; out may be acc in
 * end when it is; acc never overlaps xi in step. */
size_t dist__reduce_acc_size(dist_dtype dt, size_t n);
int dist__reduce_begin(dist_dtype dt, dist_redop op, void *acc, const void *x0, size_t n);
int dist__reduce_step(dist_dtype dt, dist_redop op, void *acc, const void *xi, size_t n);
int dist__reduce_end(dist_dtype dt, dist_redop op, void *out, const void *acc, size_t n,
                     int avg_divisor);

/* Half-precision conversions (vectorised; dst and src never overlap).
 * To float32 they are exact (NaN payloads kept). From float32 they round
 * to nearest even, overflow to inf, and turn NaN into sign|0x7e00
 * (float16) or 0x7fc0 (bfloat16), as torch's c10::Half and c10::BFloat16.
 * They do not depend on the flush-to-zero / denormals-are-zero modes. */
void dist__f16_to_f32(float *dst, const uint16_t *src, size_t n);
void dist__f32_to_f16(uint16_t *dst, const float *src, size_t n);
void dist__bf16_to_f32(float *dst, const uint16_t *src, size_t n);
void dist__f32_to_bf16(uint16_t *dst, const float *src, size_t n);

#endif
