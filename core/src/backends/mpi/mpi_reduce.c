/* mpi_reduce.c - dtypes and reduce ops as MPI sees them, and the rule that
 * decides when MPI's own reduction may run (see mpi_int.h: results must be
 * bitwise those of the cpu backend, which combines in ascending rank order).
 *
 * MPI's reductions may combine in any order and grouping. That cannot show
 * in the integers (wrapping arithmetic and the bit operations are
 * associative and commutative) nor in a two-rank float SUM or PRODUCT (one
 * IEEE operation, commutative). Everything else takes the ordered path:
 * MIN/MAX of floats (MPI's do not propagate NaN as torch does), AVG and
 * PREMUL_SUM, the half types (MPI has none; they accumulate in float32),
 * bool and complex products. */
#include "mpi_int.h"

MPI_Datatype dist__mpi_dtype(dist_dtype dt) {
  switch (dt) {
  case DIST_FLOAT16:
  case DIST_BFLOAT16:
    return MPI_UINT16_T;
  case DIST_FLOAT32: return MPI_FLOAT;
  case DIST_FLOAT64: return MPI_DOUBLE;
  case DIST_INT8: return MPI_INT8_T;
  case DIST_UINT8: return MPI_UINT8_T;
  case DIST_INT16: return MPI_INT16_T;
  case DIST_INT32: return MPI_INT32_T;
  case DIST_INT64: return MPI_INT64_T;
  case DIST_BOOL: return MPI_UINT8_T;
  case DIST_COMPLEX64: return MPI_C_FLOAT_COMPLEX;
  case DIST_COMPLEX128: return MPI_C_DOUBLE_COMPLEX;
  default: return MPI_DATATYPE_NULL;
  }
}

static bool is_int(dist_dtype dt) {
  return dt == DIST_INT8 || dt == DIST_UINT8 || dt == DIST_INT16 || dt == DIST_INT32 ||
         dt == DIST_INT64;
}

static MPI_Op int_op(dist_redop_kind k) {
  switch (k) {
  case DIST_REDOP_SUM: return MPI_SUM;
  case DIST_REDOP_PRODUCT: return MPI_PROD;
  case DIST_REDOP_MIN: return MPI_MIN;
  case DIST_REDOP_MAX: return MPI_MAX;
  case DIST_REDOP_BAND: return MPI_BAND;
  case DIST_REDOP_BOR: return MPI_BOR;
  case DIST_REDOP_BXOR: return MPI_BXOR;
  default: return MPI_OP_NULL;
  }
}

MPI_Op dist__mpi_native_op(dist_dtype dt, dist_redop op, int size) {
  /* Open MPI 4.1's vectorised 8- and 16-bit SUM saturates instead of
   * wrapping (int16 32767 + 1 gave 32767 here): those take the ordered
   * path. */
  bool narrow = dt == DIST_INT8 || dt == DIST_UINT8 || dt == DIST_INT16;
  if (narrow && (op.kind == DIST_REDOP_SUM || op.kind == DIST_REDOP_PRODUCT))
    return MPI_OP_NULL;
  if (is_int(dt))
    return int_op(op.kind);
  if (size > 2)
    return MPI_OP_NULL;
  bool real = dt == DIST_FLOAT32 || dt == DIST_FLOAT64;
  bool cplx = dt == DIST_COMPLEX64 || dt == DIST_COMPLEX128;
  if ((real || cplx) && op.kind == DIST_REDOP_SUM)
    return MPI_SUM;
  if (real && op.kind == DIST_REDOP_PRODUCT)
    return MPI_PROD;
  return MPI_OP_NULL;
}
