/* ref.h - reference values for tests of reductions and collectives.
 *
 * Plain C, no Criterion: these run inside forked ranks as well as in test
 * bodies. Three pieces:
 *   - deterministic inputs: element i of rank r under a seed is a pure
 *     function of (seed, rank, i, dtype), so any rank can compute any other
 *     rank's input without communication;
 *   - the expected reduction of N ranks' inputs in ascending rank order,
 *     computed by an independent scalar implementation of reduce.h's rules
 *     (its own half-precision rounding, its own per-element loop), so a test
 *     catches kernel bugs instead of repeating them;
 *   - bitwise comparison with a message that names the first differing
 *     index and shows both values in the dtype's own terms.
 *
 * Float inputs are drawn so that sums and products are not all exact
 * (random mantissas, a spread of exponents with occasional far ones, now
 * and then a subnormal), which makes a wrong reduction order visible in
 * float32, float64 and complex results (float16/bfloat16 accumulate in
 * float32, far finer than their final rounding, so there the order almost
 * never shows); no NaN or inf unless DIST_TEST_FILL_SPECIAL is asked for.
 * Integers are half small values (-10..10), half arbitrary bit patterns;
 * bool is 0 or 1.
 *
 * Typical use in group rank r of a collective test over g ranks:
 *     dist_test_fill(buf, dt, n, seed, r, 0, 0);
 *     ... dist_all_reduce(buf, op) ...
 *     dist_test_expected(dt, op, want, n, seed, g, 0, 0, g);
 *     if (dist_test_compare(dt, buf, want, n, 0, msg, sizeof msg))
 *       return FAIL(ctx, "all_reduce %s: %s", dist_dtype_name(dt), msg);
 * (reduce_scatter of g * n elements: rank r's n results are the expected
 * elements from first = r * n.) */
#ifndef DIST_TEST_REF_H
#define DIST_TEST_REF_H

#include <stddef.h>
#include <stdint.h>

#include <dist/tensor.h>

/* Fill flags. */
#define DIST_TEST_FILL_SPECIAL 1u /* floats: sprinkle NaN, +-inf, +-0, subnormals, extremes */

/* Element idx of rank's input under seed, written to out (one element of
 * dt). */
void dist_test_value(dist_dtype dt, uint64_t seed, int rank, size_t idx, unsigned flags, void *out);
/* buf[i] = value(seed, rank, first + i) for i < n. */
void dist_test_fill(void *buf, dist_dtype dt, size_t n, uint64_t seed, int rank, size_t first,
                    unsigned flags);

/* out[i] = bufs[0][i] op ... op bufs[nranks-1][i] by the scalar reference,
 * with core/src/reduce/reduce.h's rules (float32 accumulation for the half
 * types, AVG divides by avg_divisor, PREMUL_SUM scales each input, NaN
 * from arithmetic is canonical), so results compare bit for bit, NaN
 * included. out may be bufs[0]. Returns 0, or -1 for an op the dtype does
 * not support. */
int dist_test_ref_reduce(dist_dtype dt, dist_redop op, void *out, const void *const *bufs,
                         int nranks, size_t n, int avg_divisor);
/* The expected result of reducing ranks 0..nranks-1's dist_test_fill
 * inputs (seed, flags), elements first .. first + n - 1, without holding
 * nranks buffers. Returns 0 or -1 as dist_test_ref_reduce. */
int dist_test_expected(dist_dtype dt, dist_redop op, void *out, size_t n, uint64_t seed, int nranks,
                       size_t first, unsigned flags, int avg_divisor);

/* Compare flags. */
#define DIST_TEST_CMP_ANY_NAN 1u /* two NaNs match whatever their payload */

/* 0 when got and want hold the same n elements bit for bit (NaN payloads
 * aside with DIST_TEST_CMP_ANY_NAN). Otherwise 1, with msg set to e.g.
 *   "float32[1000003]: 17 of 1000003 elements differ; first at 4242:
 *    got 1.50000012 (0x3fc00001), want 1.5 (0x3fc00000)"
 * msg may be NULL. */
int dist_test_compare(dist_dtype dt, const void *got, const void *want, size_t n, unsigned flags,
                      char *msg, size_t msglen);
/* Formats one element of dt ("-2.5 (0xc020)", "(1.5, -2) (0x...)", "-7",
 * "true") into buf; returns buf. */
char *dist_test_format(dist_dtype dt, const void *elem, char *buf, size_t len);

/* The reference's own half conversions (independent of the kernels'). */
uint16_t dist_test_f32_to_f16(float f);
float dist_test_f16_to_f32(uint16_t h);
uint16_t dist_test_f32_to_bf16(float f);
float dist_test_bf16_to_f32(uint16_t h);

#endif
