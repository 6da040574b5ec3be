/* tensor.h - the memory a collective reads and writes.
 *
 * A dist_tensor describes contiguous memory: a data pointer, a dtype, a shape
 * of up to DIST_MAX_DIMS dimensions and a device. libdist never owns tensor
 * memory: buffers are borrowed by an operation until it completes. */
#ifndef DIST_TENSOR_H
#define DIST_TENSOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <dist/export.h>

DIST_EXTERN_C_BEGIN

#define DIST_MAX_DIMS 8

/* X(enum suffix, name, element size in bytes, class) ; append only. */
#define DIST_DTYPE_MAP(X)                     \
  X(FLOAT16, "float16", 2, FLOAT)             \
  X(BFLOAT16, "bfloat16", 2, FLOAT)           \
  X(FLOAT32, "float32", 4, FLOAT)             \
  X(FLOAT64, "float64", 8, FLOAT)             \
  X(INT8, "int8", 1, INT)                     \
  X(UINT8, "uint8", 1, INT)                   \
  X(INT16, "int16", 2, INT)                   \
  X(INT32, "int32", 4, INT)                   \
  X(INT64, "int64", 8, INT)                   \
  X(BOOL, "bool", 1, BOOL)                    \
  X(COMPLEX64, "complex64", 8, COMPLEX)       \
  X(COMPLEX128, "complex128", 16, COMPLEX)

typedef enum dist_dtype {
#define DIST_DTYPE_ENUM_(e, name, size, cls) DIST_##e,
  DIST_DTYPE_MAP(DIST_DTYPE_ENUM_)
#undef DIST_DTYPE_ENUM_
  DIST_DTYPE_COUNT_
} dist_dtype;

typedef enum dist_device_type {
  DIST_DEVICE_CPU = 0,
  DIST_DEVICE_CUDA = 1,
} dist_device_type;

typedef struct dist_device {
  dist_device_type type;
  int index; /* cuda:N; 0 for cpu */
} dist_device;

typedef struct dist_tensor {
  void *data;
  dist_dtype dtype;
  int32_t ndim;                  /* 0 = scalar (one element) */
  int64_t shape[DIST_MAX_DIMS];
  dist_device device;
} dist_tensor;

/* A one-dimensional CPU tensor of n elements. */
static inline dist_tensor dist_tensor_1d(void *data, dist_dtype dtype, int64_t n) {
  dist_tensor t = {0};
  t.data = data;
  t.dtype = dtype;
  t.ndim = 1;
  t.shape[0] = n;
  return t;
}

/* Number of elements (product of the shape; 1 for ndim 0), or -1 when a
 * dimension is negative or the count or its size in bytes overflows int64
 * (operations reject such tensors with DIST_E_INVAL). */
DIST_API int64_t dist_tensor_numel(const dist_tensor *t);
/* Size in bytes (numel * element size); 0 when numel is -1. */
DIST_API size_t dist_tensor_nbytes(const dist_tensor *t);
/* Element size of a dtype in bytes, 0 for an unknown dtype. */
DIST_API size_t dist_dtype_size(dist_dtype dtype);
/* "float32", ...; "unknown" for an unknown dtype. */
DIST_API const char *dist_dtype_name(dist_dtype dtype);
/* Formats "float32[4, 1024] cpu" into buf; returns buf. */
DIST_API char *dist_tensor_describe(const dist_tensor *t, char *buf, size_t len);

/* Reduce operations. PREMUL_SUM multiplies every input by scalar before the
 * sum. AVG and PREMUL_SUM need a floating or complex dtype; BAND, BOR, BXOR
 * an integer or bool dtype; MIN and MAX a non-complex dtype. Combinations
 * that make no sense are DIST_E_INVAL with a message. */
typedef enum dist_redop_kind {
  DIST_REDOP_SUM = 0,
  DIST_REDOP_PRODUCT,
  DIST_REDOP_MIN,
  DIST_REDOP_MAX,
  DIST_REDOP_BAND,
  DIST_REDOP_BOR,
  DIST_REDOP_BXOR,
  DIST_REDOP_AVG,
  DIST_REDOP_PREMUL_SUM,
  DIST_REDOP_COUNT_
} dist_redop_kind;

typedef struct dist_redop {
  dist_redop_kind kind;
  double scalar; /* PREMUL_SUM only */
} dist_redop;

#define DIST_SUM ((dist_redop){.kind = DIST_REDOP_SUM})
#define DIST_PRODUCT ((dist_redop){.kind = DIST_REDOP_PRODUCT})
#define DIST_MIN ((dist_redop){.kind = DIST_REDOP_MIN})
#define DIST_MAX ((dist_redop){.kind = DIST_REDOP_MAX})
#define DIST_BAND ((dist_redop){.kind = DIST_REDOP_BAND})
#define DIST_BOR ((dist_redop){.kind = DIST_REDOP_BOR})
#define DIST_BXOR ((dist_redop){.kind = DIST_REDOP_BXOR})
#define DIST_AVG ((dist_redop){.kind = DIST_REDOP_AVG})
static inline dist_redop dist_premul_sum(double scalar) {
  dist_redop op = {DIST_REDOP_PREMUL_SUM, scalar};
  return op;
}
/* "SUM", "PREMUL_SUM", ...; "UNKNOWN" otherwise. */
DIST_API const char *dist_redop_name(dist_redop_kind kind);
/* DIST_OK when op makes sense for dtype, else DIST_E_INVAL with a message
 * in dist_last_errmsg(). */
DIST_API int dist_redop_check(dist_redop op, dist_dtype dtype);

DIST_EXTERN_C_END

#endif
