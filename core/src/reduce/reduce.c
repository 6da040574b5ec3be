/* reduce.c - the reduction entry points of the CPU backend (reduce.h).
 *
 * Each call checks its arguments, looks up the kernel entry for its
 * (dtype, op) once (reduce_kern.h) and runs it block by block:
 *   - same type: dst is the accumulator. A block gets bin(s0, s1) (or
 *     bin3(s0, s1, s2)), then acc2/acc for the remaining sources two at a
 *     time, then AVG's in-place finish, while the block is still in L1;
 *     when one kernel call does it all (two sources, nothing to finish:
 *     the c = a + b loop) the whole array is one block.
 *   - half types: a float32 scratch block on the stack accumulates, then
 *     one rounding pass writes dst. Because a block of srcs[0] is read
 *     before the same block of dst is written, dst may be srcs[0]. Two
 *     sources go straight to dst in one pass (binfin, or accfin in place).
 * The step form runs the same kernels in the same order on the caller's
 * accumulator, which is why the two forms agree bit for bit.
 *
 * Nothing here allocates or takes a lock: an all-reduce of 4 bytes pays a
 * table lookup, a few checks and one kernel call. */
#include <string.h>

#include "base/dist_int.h"
#include "reduce.h"
#include "reduce_kern.h"

/* Same-type block: with up to four inputs streaming through, 16 KiB of
 * accumulator stays in L1 (48 KiB here, 32 KiB on most x86). */
#define BLOCK_BYTES 16384
/* Half types: float32 scratch on the stack (8 KiB). */
#define HALF_BLOCK 2048

/* The entry for (dt, op), or DIST_E_INVAL with the reason. */
static int lookup(dist_dtype dt, dist_redop op, const dist__rk **out) {
  if ((unsigned)dt >= DIST_DTYPE_COUNT_)
    return dist__set_last_error(DIST_E_INVAL, "reduction of unknown dtype %d", (int)dt);
  if ((unsigned)op.kind >= DIST_REDOP_COUNT_)
    return dist__set_last_error(DIST_E_INVAL, "reduction with unknown reduce op %d", (int)op.kind);
  const dist__rk *k = (dt == DIST_FLOAT16 || dt == DIST_BFLOAT16)
                          ? &dist__reduce_half_table[dt == DIST_BFLOAT16][op.kind]
                          : &dist__reduce_same_table[dt][op.kind];
  if (!k->bin) {
    int rc = dist_redop_check(op, dt); /* gives the reason when it has one */
    return rc != DIST_OK ? rc
                         : dist__set_last_error(DIST_E_INVAL, "reduce op %s has no kernel for %s",
                                                dist_redop_name(op.kind), dist_dtype_name(dt));
  }
  *out = k;
  return DIST_OK;
}

/* Bytes per element of the inputs (no call into tensor.c on the hot path). */
static inline size_t elem_size(const dist__rk *k) {
  return k->half ? sizeof(uint16_t) : (size_t)k->usize * k->units;
}

static int check_avg(dist_dtype dt, dist_redop op, int avg_divisor) {
  if (op.kind == DIST_REDOP_AVG && avg_divisor < 1)
    return dist__set_last_error(DIST_E_INVAL, "AVG reduction of %s with divisor %d (must be >= 1)",
                                dist_dtype_name(dt), avg_divisor);
  return DIST_OK;
}

/* Bytes of n elements, or DIST_E_INVAL when that overflows. */
static int nbytes(dist_dtype dt, size_t n, size_t per, size_t *out) {
  if (n > SIZE_MAX / per)
    return dist__set_last_error(DIST_E_INVAL, "reduction of %zu %s elements overflows size_t", n,
                                dist_dtype_name(dt));
  *out = n * per;
  return DIST_OK;
}

/* Whether [a, a + alen) and [b, b + blen) share a byte. */
static bool overlap(const void *a, size_t alen, const void *b, size_t blen) {
  uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;
  return x < y + blen && y < x + alen;
}

static int check_bufs(dist_dtype dt, void *dst, const void *const *srcs, int nsrc, size_t len) {
  if (nsrc < 1 || !srcs)
    return dist__set_last_error(DIST_E_INVAL, "reduction of %s needs at least one source (got %d)",
                                dist_dtype_name(dt), srcs ? nsrc : 0);
  if (len == 0)
    return DIST_OK;
  if (!dst)
    return dist__set_last_error(DIST_E_INVAL, "reduction of %s: NULL destination",
                                dist_dtype_name(dt));
  for (int j = 0; j < nsrc; j++) {
    if (!srcs[j])
      return dist__set_last_error(DIST_E_INVAL, "reduction of %s: source %d is NULL",
                                  dist_dtype_name(dt), j);
    if ((j > 0 || srcs[j] != dst) && overlap(dst, len, srcs[j], len))
      return dist__set_last_error(DIST_E_INVAL, "reduction of %s: destination overlaps source %d%s",
                                  dist_dtype_name(dt), j, j ? "" : " without being it");
  }
  return DIST_OK;
}

/* --- drivers ------------------------------------------------------------- */

/* acc = pre(x) for m units; acc may be x. */
static void run_first(const dist__rk *k, void *acc, const void *x, size_t m,
                      const dist__rk_param *p) {
  if (acc == x) {
    if (k->first_self)
      k->first_self(acc, m, p);
  } else if (k->first) {
    k->first(acc, x, m, p);
  } else {
    memcpy(acc, x, m * k->usize);
  }
}

/* acc = acc op pre(srcs[j]) op ... op pre(srcs[nsrc-1]) over the m units
 * at byte offset bo: two inputs per pass while they last. */
static void run_rest(const dist__rk *k, void *acc, const void *const *srcs, int j, int nsrc,
                     size_t bo, size_t m, const dist__rk_param *p) {
  if (k->acc2)
    for (; j + 1 < nsrc; j += 2)
      k->acc2(acc, (const char *)srcs[j] + bo, (const char *)srcs[j + 1] + bo, m, p);
  for (; j < nsrc; j++)
    k->acc(acc, (const char *)srcs[j] + bo, m, p);
}

/* acc = pre(srcs[0]) op ... for the m units at byte offset bo, with acc
 * apart from every source; returns how many sources that took. */
static int run_start(const dist__rk *k, void *acc, const void *const *srcs, int nsrc, size_t bo,
                     size_t m, const dist__rk_param *p) {
  const char *s0 = (const char *)srcs[0] + bo;
  if (nsrc == 1) {
    run_first(k, acc, s0, m, p);
    return 1;
  }
  if (nsrc >= 3 && k->bin3) {
    k->bin3(acc, s0, (const char *)srcs[1] + bo, (const char *)srcs[2] + bo, m, p);
    return 3;
  }
  k->bin(acc, s0, (const char *)srcs[1] + bo, m, p);
  return 2;
}

static void run_same(const dist__rk *k, char *dst, const void *const *srcs, int nsrc, size_t units,
                     const dist__rk_param *p) {
  size_t us = k->usize;
  bool in_place = dst == (const char *)srcs[0];
  /* One kernel call per block needs no blocking: c = a + b runs whole. */
  bool one_pass = !k->fin_self &&
                  (in_place ? nsrc <= 2 && !k->first_self : nsrc <= 2 || (nsrc == 3 && k->bin3));
  size_t blk = one_pass ? units : BLOCK_BYTES / us;
  for (size_t off = 0; off < units; off += blk) {
    size_t m = units - off < blk ? units - off : blk;
    size_t bo = off * us;
    char *d = dst + bo;
    int j;
    if (in_place) {
      if (k->first_self)
        k->first_self(d, m, p);
      j = 1;
    } else {
      j = run_start(k, d, srcs, nsrc, bo, m, p);
    }
    run_rest(k, d, srcs, j, nsrc, bo, m, p);
    if (k->fin_self)
      k->fin_self(d, m, p);
  }
}

static void run_half(const dist__rk *k, uint16_t *dst, const void *const *srcs, int nsrc, size_t n,
                     const dist__rk_param *p) {
  if (nsrc == 2) { /* straight to the result, no float32 array between */
    if (dst == (const uint16_t *)srcs[0])
      k->accfin(dst, srcs[1], n, p);
    else
      k->binfin(dst, srcs[0], srcs[1], n, p);
    return;
  }
  float tmp[HALF_BLOCK];
  for (size_t off = 0; off < n; off += HALF_BLOCK) {
    size_t m = n - off < HALF_BLOCK ? n - off : HALF_BLOCK;
    size_t bo = off * sizeof(uint16_t);
    int j = run_start(k, tmp, srcs, nsrc, bo, m, p);
    run_rest(k, tmp, srcs, j, nsrc, bo, m, p);
    k->fin(dst + off, tmp, m, p);
  }
}

static dist__rk_param params(dist_redop op, int avg_divisor) {
  dist__rk_param p = {0.0, 1};
  if (op.kind == DIST_REDOP_PREMUL_SUM)
    p.scalar = op.scalar;
  if (op.kind == DIST_REDOP_AVG)
    p.divisor = avg_divisor;
  return p;
}

/* --- the one-call form --------------------------------------------------- */

int dist__reduce_multi(dist_dtype dt, dist_redop op, void *dst, const void *const *srcs, int nsrc,
                       size_t n, int avg_divisor) {
  const dist__rk *k = NULL;
  size_t len = 0;
  DIST_TRY(lookup(dt, op, &k));
  DIST_TRY(check_avg(dt, op, avg_divisor));
  DIST_TRY(nbytes(dt, n, elem_size(k), &len));
  DIST_TRY(check_bufs(dt, dst, srcs, nsrc, len));
  if (n == 0)
    return DIST_OK;
  dist__rk_param p = params(op, avg_divisor);
  if (k->half)
    run_half(k, dst, srcs, nsrc, n, &p);
  else
    run_same(k, dst, srcs, nsrc, n * k->units, &p);
  return DIST_OK;
}

/* --- the step form ------------------------------------------------------- */

size_t dist__reduce_acc_size(dist_dtype dt, size_t n) {
  size_t per = (dt == DIST_FLOAT16 || dt == DIST_BFLOAT16) ? sizeof(float) : dist_dtype_size(dt);
  return per && n <= SIZE_MAX / per ? n * per : 0;
}

/* Shared checks of the step functions: the entry, and the accumulator's
 * byte length in *acc_len. */
static int step_prep(dist_dtype dt, dist_redop op, const void *acc, const void *x, size_t n,
                     const dist__rk **k, size_t *acc_len) {
  DIST_TRY(lookup(dt, op, k));
  DIST_TRY(nbytes(dt, n, (*k)->half ? sizeof(float) : elem_size(*k), acc_len));
  if (n > 0 && (!acc || !x))
    return dist__set_last_error(DIST_E_INVAL, "reduction of %s: NULL buffer", dist_dtype_name(dt));
  return DIST_OK;
}

int dist__reduce_begin(dist_dtype dt, dist_redop op, void *acc, const void *x0, size_t n) {
  const dist__rk *k = NULL;
  size_t len = 0;
  DIST_TRY(step_prep(dt, op, acc, x0, n, &k, &len));
  if (n == 0)
    return DIST_OK;
  /* Only a same-type accumulator may be the input itself. */
  if ((k->half || acc != x0) && overlap(acc, len, x0, n * elem_size(k)))
    return dist__set_last_error(DIST_E_INVAL, "reduction of %s: accumulator overlaps input",
                                dist_dtype_name(dt));
  dist__rk_param p = params(op, 1);
  if (k->half)
    k->first(acc, x0, n, &p);
  else
    run_first(k, acc, x0, n * k->units, &p);
  return DIST_OK;
}

int dist__reduce_step(dist_dtype dt, dist_redop op, void *acc, const void *xi, size_t n) {
  const dist__rk *k = NULL;
  size_t len = 0;
  DIST_TRY(step_prep(dt, op, acc, xi, n, &k, &len));
  if (n == 0)
    return DIST_OK;
  if (overlap(acc, len, xi, n * elem_size(k)))
    return dist__set_last_error(DIST_E_INVAL, "reduction of %s: accumulator overlaps input",
                                dist_dtype_name(dt));
  dist__rk_param p = params(op, 1);
  k->acc(acc, xi, k->half ? n : n * k->units, &p);
  return DIST_OK;
}

int dist__reduce_end(dist_dtype dt, dist_redop op, void *out, const void *acc, size_t n,
                     int avg_divisor) {
  const dist__rk *k = NULL;
  size_t len = 0;
  DIST_TRY(step_prep(dt, op, out, acc, n, &k, &len));
  DIST_TRY(check_avg(dt, op, avg_divisor));
  if (n == 0)
    return DIST_OK;
  if ((k->half || out != acc) && overlap(out, n * elem_size(k), acc, len))
    return dist__set_last_error(DIST_E_INVAL, "reduction of %s: output overlaps accumulator",
                                dist_dtype_name(dt));
  dist__rk_param p = params(op, avg_divisor);
  if (k->half) {
    k->fin(out, acc, n, &p);
    return DIST_OK;
  }
  if ((const void *)out == acc && !k->fin_self)
    return DIST_OK;
  size_t units = n * k->units, us = k->usize, blk = BLOCK_BYTES / us;
  for (size_t off = 0; off < units; off += blk) {
    size_t m = units - off < blk ? units - off : blk;
    char *o = (char *)out + off * us;
    if ((const void *)out != acc)
      memcpy(o, (const char *)acc + off * us, m * us);
    if (k->fin_self)
      k->fin_self(o, m, &p);
  }
  return DIST_OK;
}
