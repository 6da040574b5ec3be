/* ref.c - deterministic inputs, a scalar reference reduction and bitwise
 * comparison for tests (ref.h).
 *
 * The reference shares no code with the kernels (core/src/reduce/reduce*.c):
 * it walks one element at a time, keeps integers in 64-bit two's
 * complement and truncates at the end, rounds to the half types through
 * frexp/nearbyint in double, and forces every product into memory before
 * it is added (mul below), so no compiler flag can contract it into an FMA
 * and round differently from the kernels. */
#include "ref.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <dist/status.h>

/* --- random numbers ------------------------------------------------------ */

static uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

/* 64 random bits for (seed, rank, idx, salt). */
static uint64_t draw(uint64_t seed, int rank, size_t idx, uint64_t salt) {
  return mix(mix(mix(seed ^ (salt << 56)) + (uint64_t)(uint32_t)rank) + (uint64_t)idx);
}

static float u2f(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

/* A float with exp_bits exponent bits and mant_bits mantissa bits, as raw
 * bits: random sign and mantissa; the exponent mostly in [-3, 4], one in
 * 16 draws far out in [-far, far], one in 64 a subnormal. With `special`,
 * one in 32 draws each of NaN, inf, zero and the largest finite value. */
static uint64_t float_bits(uint64_t r, uint64_t r2, int exp_bits, int mant_bits, int far,
                           bool special) {
  uint64_t bias = (1ull << (exp_bits - 1)) - 1, emax = (1ull << exp_bits) - 1;
  uint64_t mant = r2 & ((1ull << mant_bits) - 1);
  uint64_t sign = (r >> 63) << (exp_bits + mant_bits);
  unsigned cat = (unsigned)(r & 63), spec = (unsigned)((r >> 6) & 31);
  int64_t e = (int64_t)((r >> 16) % 8) - 3;
  if (cat < 4)
    e = (int64_t)((r >> 16) % (uint64_t)(2 * far + 1)) - far;
  uint64_t ebits = (uint64_t)(e + (int64_t)bias);
  if (cat == 4)
    ebits = 0; /* subnormal (zero when mant is 0) */
  if (special) {
    if (spec == 0)
      return sign | (emax << mant_bits) | (1ull << (mant_bits - 1)) | (mant >> 1); /* NaN */
    if (spec == 1)
      return sign | (emax << mant_bits); /* inf */
    if (spec == 2)
      return sign; /* zero */
    if (spec == 3)
      return sign | ((emax - 1) << mant_bits) | ((1ull << mant_bits) - 1); /* max */
  }
  return sign | (ebits << mant_bits) | mant;
}

/* Stores the low `size` bytes' worth of v as an element of that size. */
static void put(void *out, uint64_t v, size_t size) {
  uint8_t b = (uint8_t)v;
  uint16_t h = (uint16_t)v;
  uint32_t w = (uint32_t)v;
  memcpy(out, size == 1 ? (void *)&b : size == 2 ? (void *)&h : size == 4 ? (void *)&w : &v, size);
}

void dist_test_value(dist_dtype dt, uint64_t seed, int rank, size_t idx, unsigned flags,
                     void *out) {
  uint64_t r = draw(seed, rank, idx, 1), r2 = draw(seed, rank, idx, 2);
  bool sp = flags & DIST_TEST_FILL_SPECIAL;
  char *o = out;
  switch (dt) {
  case DIST_FLOAT16: put(o, float_bits(r, r2, 5, 10, 14, sp), 2); break;
  case DIST_BFLOAT16: put(o, float_bits(r, r2, 8, 7, 40, sp), 2); break;
  case DIST_FLOAT32: put(o, float_bits(r, r2, 8, 23, 30, sp), 4); break;
  case DIST_FLOAT64: put(o, float_bits(r, r2, 11, 52, 60, sp), 8); break;
  case DIST_COMPLEX64:
  case DIST_COMPLEX128: {
    uint64_t r3 = draw(seed, rank, idx, 3), r4 = draw(seed, rank, idx, 4);
    bool c64 = dt == DIST_COMPLEX64;
    int eb = c64 ? 8 : 11, mb = c64 ? 23 : 52, far = c64 ? 30 : 60;
    size_t h = c64 ? 4 : 8;
    put(o, float_bits(r, r2, eb, mb, far, sp), h);
    put(o + h, float_bits(r3, r4, eb, mb, far, sp), h);
    break;
  }
  case DIST_UINT8: put(o, (r & 1) ? (r >> 8) % 11 : r2, 1); break;
  case DIST_BOOL: put(o, (r >> 8) & 1, 1); break;
  default: /* signed integers: half small values (-10..10), half any bits */
    put(o, (r & 1) ? (uint64_t)((int64_t)((r >> 8) % 21) - 10) : r2, dist_dtype_size(dt));
    break;
  }
}

void dist_test_fill(void *buf, dist_dtype dt, size_t n, uint64_t seed, int rank, size_t first,
                    unsigned flags) {
  size_t es = dist_dtype_size(dt);
  for (size_t i = 0; i < n; i++)
    dist_test_value(dt, seed, rank, first + i, flags, (char *)buf + i * es);
}

/* --- half precision, the slow independent way --------------------------- */

/* Rounds |f| (finite) to a float with mant_bits stored mantissa bits and
 * the exponent range [emin, emax] (unbiased, normal numbers), returning the
 * magnitude bits; 'inf' when it overflows. */
static uint32_t round_mag(double a, int mant_bits, int emin, int emax, uint32_t inf) {
  if (a < ldexp(1.0, emin)) /* subnormal: multiples of 2^(emin - mant_bits) */
    return (uint32_t)nearbyint(ldexp(a, mant_bits - emin)); /* may carry into the min normal */
  int e;
  frexp(a, &e);
  e -= 1;                                        /* a in [2^e, 2^(e+1)) */
  double q = nearbyint(ldexp(a, mant_bits - e)); /* in [2^m, 2^(m+1)] */
  if (q == ldexp(1.0, mant_bits + 1)) {
    q = ldexp(1.0, mant_bits);
    e++;
  }
  if (e > emax)
    return inf;
  return ((uint32_t)(e - emin + 1) << mant_bits) | ((uint32_t)q - (1u << mant_bits));
}

uint16_t dist_test_f32_to_f16(float f) {
  uint16_t sign = signbit(f) ? 0x8000 : 0;
  if (isnan(f))
    return sign | 0x7e00;
  if (isinf(f))
    return sign | 0x7c00;
  return sign | (uint16_t)round_mag(fabs((double)f), 10, -14, 15, 0x7c00);
}

uint16_t dist_test_f32_to_bf16(float f) {
  if (isnan(f))
    return 0x7fc0;
  uint16_t sign = signbit(f) ? 0x8000 : 0;
  if (isinf(f))
    return sign | 0x7f80;
  return sign | (uint16_t)round_mag(fabs((double)f), 7, -126, 127, 0x7f80);
}

float dist_test_f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h >> 15) << 31, e = (h >> 10) & 31, m = h & 1023;
  if (e == 31) /* inf or NaN; the payload moves to the top of the float's */
    return u2f(sign | 0x7f800000u | (m << 13));
  float mag = e ? (float)ldexp(1024.0 + m, (int)e - 25) : (float)ldexp(m, -24);
  return sign ? -mag : mag;
}

float dist_test_bf16_to_f32(uint16_t h) { return u2f((uint32_t)h << 16); }

/* --- the reference reduction --------------------------------------------- */

/* A NaN from arithmetic becomes the canonical quiet NaN (reduce.h). */
static float canf(float x) { return isnan(x) ? u2f(0x7fc00000u) : x; }
static double cand(double x) {
  if (!isnan(x))
    return x;
  uint64_t b = 0x7ff8000000000000ull;
  memcpy(&x, &b, 8);
  return x;
}

/* Products go through memory, so they are rounded before any addition. */
static float mulf(float a, float b) {
  volatile float r = a * b;
  return r;
}
static double muld(double a, double b) {
  volatile double r = a * b;
  return r;
}

typedef struct racc {
  float f, fi;  /* float16, bfloat16, float32, complex64 (fi: imaginary) */
  double d, di; /* float64, complex128 */
  int64_t i;    /* integers (two's complement, truncated at the end), bool */
} racc;

static int64_t load_int(dist_dtype dt, const void *x) {
  int8_t i8;
  uint8_t u8;
  int16_t i16;
  int32_t i32;
  int64_t i64;
  switch (dt) {
  case DIST_INT8: memcpy(&i8, x, 1); return i8;
  case DIST_UINT8: memcpy(&u8, x, 1); return u8;
  case DIST_INT16: memcpy(&i16, x, 2); return i16;
  case DIST_INT32: memcpy(&i32, x, 4); return i32;
  case DIST_INT64: memcpy(&i64, x, 8); return i64;
  default: memcpy(&u8, x, 1); return u8 != 0; /* bool */
  }
}

/* Loads x into a (converting the half types, scaling for PREMUL_SUM). */
static void load(dist_dtype dt, dist_redop op, racc *a, const void *x) {
  uint16_t h;
  float s = (float)op.scalar;
  double sd = op.scalar;
  bool pm = op.kind == DIST_REDOP_PREMUL_SUM;
  memset(a, 0, sizeof *a);
  switch (dt) {
  case DIST_FLOAT16:
    memcpy(&h, x, 2);
    a->f = dist_test_f16_to_f32(h);
    break;
  case DIST_BFLOAT16:
    memcpy(&h, x, 2);
    a->f = dist_test_bf16_to_f32(h);
    break;
  case DIST_FLOAT32: memcpy(&a->f, x, 4); break;
  case DIST_COMPLEX64:
    memcpy(&a->f, x, 4);
    memcpy(&a->fi, (const char *)x + 4, 4);
    break;
  case DIST_FLOAT64: memcpy(&a->d, x, 8); break;
  case DIST_COMPLEX128:
    memcpy(&a->d, x, 8);
    memcpy(&a->di, (const char *)x + 8, 8);
    break;
  default: a->i = load_int(dt, x); return;
  }
  if (pm) {
    a->f = canf(mulf(s, a->f));
    a->fi = canf(mulf(s, a->fi));
    a->d = cand(muld(sd, a->d));
    a->di = cand(muld(sd, a->di));
  }
}

/* NaN-propagating min/max: the newest NaN wins, then the older one. */
static float fpick(float acc, float x, bool max) {
  if (isnan(x))
    return x;
  if (isnan(acc))
    return acc;
  return (max ? acc < x : x < acc) ? x : acc;
}
static double dpick(double acc, double x, bool max) {
  if (isnan(x))
    return x;
  if (isnan(acc))
    return acc;
  return (max ? acc < x : x < acc) ? x : acc;
}

static void step_float(dist_redop_kind k, racc *a, const racc *x, bool cplx) {
  switch (k) {
  case DIST_REDOP_PRODUCT:
    if (cplx) {
      float re = mulf(a->f, x->f) - mulf(a->fi, x->fi);
      float im = mulf(a->f, x->fi) + mulf(a->fi, x->f);
      double dre = muld(a->d, x->d) - muld(a->di, x->di);
      double dim = muld(a->d, x->di) + muld(a->di, x->d);
      a->f = canf(re), a->fi = canf(im), a->d = cand(dre), a->di = cand(dim);
    } else {
      a->f = canf(mulf(a->f, x->f));
      a->d = cand(muld(a->d, x->d));
    }
    break;
  case DIST_REDOP_MIN:
  case DIST_REDOP_MAX:
    a->f = fpick(a->f, x->f, k == DIST_REDOP_MAX);
    a->d = dpick(a->d, x->d, k == DIST_REDOP_MAX);
    break;
  default: /* SUM, AVG, PREMUL_SUM */
    a->f = canf(a->f + x->f), a->fi = canf(a->fi + x->fi);
    a->d = cand(a->d + x->d), a->di = cand(a->di + x->di);
    break;
  }
}

static void step_int(dist_dtype dt, dist_redop_kind k, racc *a, int64_t x) {
  uint64_t u = (uint64_t)a->i, v = (uint64_t)x;
  if (dt == DIST_BOOL) {
    bool p = a->i != 0, q = x != 0;
    if (k == DIST_REDOP_BXOR)
      a->i = p != q;
    else if (k == DIST_REDOP_PRODUCT || k == DIST_REDOP_MIN || k == DIST_REDOP_BAND)
      a->i = p && q;
    else /* SUM, MAX, BOR */
      a->i = p || q;
    return;
  }
  switch (k) {
  case DIST_REDOP_SUM: a->i = (int64_t)(u + v); break;
  case DIST_REDOP_PRODUCT: a->i = (int64_t)(u * v); break;
  case DIST_REDOP_MIN: a->i = x < a->i ? x : a->i; break;
  case DIST_REDOP_MAX: a->i = x > a->i ? x : a->i; break;
  case DIST_REDOP_BAND: a->i = (int64_t)(u & v); break;
  case DIST_REDOP_BOR: a->i = (int64_t)(u | v); break;
  default: a->i = (int64_t)(u ^ v); break;
  }
}

static bool is_int(dist_dtype dt) { return dt >= DIST_INT8 && dt <= DIST_BOOL; }

static void step(dist_dtype dt, dist_redop op, racc *a, const void *x) {
  racc v;
  load(dt, op, &v, x);
  if (is_int(dt))
    step_int(dt, op.kind, a, v.i);
  else
    step_float(op.kind, a, &v, dt == DIST_COMPLEX64 || dt == DIST_COMPLEX128);
}

static void store(dist_dtype dt, dist_redop op, void *out, racc *a, int div) {
  if (op.kind == DIST_REDOP_AVG) {
    a->f = canf(a->f / (float)div), a->fi = canf(a->fi / (float)div);
    a->d = cand(a->d / (double)div), a->di = cand(a->di / (double)div);
  }
  switch (dt) {
  case DIST_FLOAT16: /* a reduction's NaN is canonical, sign dropped */
    put(out, isnan(a->f) ? 0x7e00 : dist_test_f32_to_f16(a->f), 2);
    break;
  case DIST_BFLOAT16: put(out, dist_test_f32_to_bf16(a->f), 2); break;
  case DIST_FLOAT32: memcpy(out, &a->f, 4); break;
  case DIST_FLOAT64: memcpy(out, &a->d, 8); break;
  case DIST_COMPLEX64:
    memcpy(out, &a->f, 4);
    memcpy((char *)out + 4, &a->fi, 4);
    break;
  case DIST_COMPLEX128:
    memcpy(out, &a->d, 8);
    memcpy((char *)out + 8, &a->di, 8);
    break;
  default: put(out, (uint64_t)a->i, dist_dtype_size(dt)); break; /* integers, bool */
  }
}

static bool supported(dist_dtype dt, dist_redop op) {
  return (unsigned)dt < DIST_DTYPE_COUNT_ && dist_redop_check(op, dt) == DIST_OK;
}

int dist_test_ref_reduce(dist_dtype dt, dist_redop op, void *out, const void *const *bufs,
                         int nranks, size_t n, int avg_divisor) {
  if (!supported(dt, op) || nranks < 1)
    return -1;
  size_t es = dist_dtype_size(dt);
  for (size_t i = 0; i < n; i++) {
    racc a;
    load(dt, op, &a, (const char *)bufs[0] + i * es);
    for (int r = 1; r < nranks; r++)
      step(dt, op, &a, (const char *)bufs[r] + i * es);
    store(dt, op, (char *)out + i * es, &a, avg_divisor);
  }
  return 0;
}

int dist_test_expected(dist_dtype dt, dist_redop op, void *out, size_t n, uint64_t seed, int nranks,
                       size_t first, unsigned flags, int avg_divisor) {
  if (!supported(dt, op) || nranks < 1)
    return -1;
  size_t es = dist_dtype_size(dt);
  unsigned char x[16];
  for (size_t i = 0; i < n; i++) {
    racc a;
    dist_test_value(dt, seed, 0, first + i, flags, x);
    load(dt, op, &a, x);
    for (int r = 1; r < nranks; r++) {
      dist_test_value(dt, seed, r, first + i, flags, x);
      step(dt, op, &a, x);
    }
    store(dt, op, (char *)out + i * es, &a, avg_divisor);
  }
  return 0;
}

/* --- comparison ---------------------------------------------------------- */

static bool nan_bits(dist_dtype dt, const unsigned char *p) {
  uint16_t h;
  uint32_t f;
  uint64_t d;
  switch (dt) {
  case DIST_FLOAT16: memcpy(&h, p, 2); return (h & 0x7fff) > 0x7c00;
  case DIST_BFLOAT16: memcpy(&h, p, 2); return (h & 0x7fff) > 0x7f80;
  case DIST_FLOAT32: memcpy(&f, p, 4); return (f & 0x7fffffffu) > 0x7f800000u;
  case DIST_FLOAT64: memcpy(&d, p, 8); return (d & ~(1ull << 63)) > 0x7ff0000000000000ull;
  default: return false;
  }
}

/* Whether element a equals element b under flags. */
static bool same(dist_dtype dt, const unsigned char *a, const unsigned char *b, unsigned flags) {
  size_t es = dist_dtype_size(dt);
  if (memcmp(a, b, es) == 0)
    return true;
  if (!(flags & DIST_TEST_CMP_ANY_NAN))
    return false;
  if (dt == DIST_COMPLEX64 || dt == DIST_COMPLEX128) {
    dist_dtype r = dt == DIST_COMPLEX64 ? DIST_FLOAT32 : DIST_FLOAT64;
    size_t h = es / 2;
    return same(r, a, b, flags) && same(r, a + h, b + h, flags);
  }
  return nan_bits(dt, a) && nan_bits(dt, b);
}

char *dist_test_format(dist_dtype dt, const void *elem, char *buf, size_t len) {
  union {
    uint8_t u8;
    int8_t i8;
    int16_t i16;
    uint16_t u16;
    int32_t i32;
    uint32_t u32;
    int64_t i64;
    uint64_t u64;
    float f[2];
    double d[2];
    unsigned char raw[16];
  } v;
  memcpy(v.raw, elem, dist_dtype_size(dt));
  switch (dt) {
  case DIST_FLOAT16: snprintf(buf, len, "%.6g (0x%04x)", dist_test_f16_to_f32(v.u16), v.u16); break;
  case DIST_BFLOAT16:
    snprintf(buf, len, "%.6g (0x%04x)", dist_test_bf16_to_f32(v.u16), v.u16);
    break;
  case DIST_FLOAT32: snprintf(buf, len, "%.9g (0x%08" PRIx32 ")", v.f[0], v.u32); break;
  case DIST_FLOAT64: snprintf(buf, len, "%.17g (0x%016" PRIx64 ")", v.d[0], v.u64); break;
  case DIST_INT8: snprintf(buf, len, "%d", v.i8); break;
  case DIST_UINT8: snprintf(buf, len, "%u", v.u8); break;
  case DIST_INT16: snprintf(buf, len, "%d", v.i16); break;
  case DIST_INT32: snprintf(buf, len, "%" PRId32, v.i32); break;
  case DIST_INT64: snprintf(buf, len, "%" PRId64, v.i64); break;
  case DIST_BOOL: snprintf(buf, len, "%s (0x%02x)", v.u8 ? "true" : "false", v.u8); break;
  case DIST_COMPLEX64: snprintf(buf, len, "(%.9g, %.9g)", v.f[0], v.f[1]); break;
  case DIST_COMPLEX128: snprintf(buf, len, "(%.17g, %.17g)", v.d[0], v.d[1]); break;
  default: snprintf(buf, len, "?"); break;
  }
  return buf;
}

int dist_test_compare(dist_dtype dt, const void *got, const void *want, size_t n, unsigned flags,
                      char *msg, size_t msglen) {
  size_t es = dist_dtype_size(dt), first = 0, ndiff = 0;
  const unsigned char *g = got, *w = want;
  if (es == 0) {
    if (msg)
      snprintf(msg, msglen, "unknown dtype %d", (int)dt);
    return 1;
  }
  for (size_t i = 0; i < n; i++)
    if (!same(dt, g + i * es, w + i * es, flags) && ndiff++ == 0)
      first = i;
  if (ndiff == 0) {
    if (msg && msglen)
      msg[0] = '\0';
    return 0;
  }
  if (msg) {
    char a[96], b[96];
    snprintf(msg, msglen, "%s[%zu]: %zu of %zu elements differ; first at %zu: got %s, want %s",
             dist_dtype_name(dt), n, ndiff, n, first,
             dist_test_format(dt, g + first * es, a, sizeof a),
             dist_test_format(dt, w + first * es, b, sizeof b));
  }
  return 1;
}
