# Row-major (C-contiguous) BLAS/LAPACK shim over scipy.linalg.cython_blas / cython_lapack.
#
# Every matrix argument is row-major: element (i, j) of an m x n matrix A with leading dimension
# lda (>= n, the row stride in elements) lives at A[i * lda + j].  The column-major libraries are
# called through the transpose trick: a row-major matrix is the column-major storage of its
# transpose.  That translation (flipped sides, flipped triangles, swapped dimensions) is written
# here once and nowhere else.
#
# Conventions shared by all functions:
#   * `lower` names the triangle *in the row-major view* the caller sees.
#   * Functions returning int return LAPACK's `info` (0 = success), OUT_OF_MEMORY when their
#     workspace could not be allocated, NON_FINITE when an input holds NaN or inf (checked before
#     the LAPACK routines that could loop or return garbage on one); the nogil core never raises.
#     The Python layer turns a non-zero info into numpy.linalg.LinAlgError (api.check_info).
#   * Each is one BLAS or LAPACK call (or a few in a fixed order): it runs to its end once
#     started, and LAPACK's own threads are whatever the caller allowed BLAS (hkern._threads).
from cython cimport floating

cdef enum:
    OUT_OF_MEMORY = -1000
    NON_FINITE = -3000

# Level 1-3 BLAS in either precision (``floating``: double calls dgemm..., float sgemm...).
cdef void gemm(bint trans_a, bint trans_b, int m, int n, int k, double alpha,
               const floating* A, int lda, const floating* B, int ldb,
               double beta, floating* C, int ldc) noexcept nogil
cdef void gemv(bint trans, int m, int n, double alpha, const floating* A, int lda,
               const floating* x, int incx, double beta, floating* y, int incy) noexcept nogil
cdef void ger(int m, int n, double alpha, const double* x, int incx,
              const double* y, int incy, double* A, int lda) noexcept nogil
cdef void syrk(bint lower, bint trans, int n, int k, double alpha, const floating* A, int lda,
               double beta, floating* C, int ldc) noexcept nogil
cdef void trsm(bint left, bint lower, bint trans, bint unit_diag, int m, int n, double alpha,
               const floating* A, int lda, floating* B, int ldb) noexcept nogil
cdef void trmm(bint left, bint lower, bint trans, bint unit_diag, int m, int n, double alpha,
               const floating* A, int lda, floating* B, int ldb) noexcept nogil
cdef double dot(int n, const double* x, int incx, const double* y, int incy) noexcept nogil
cdef void axpy(int n, double alpha, const double* x, int incx, double* y, int incy) noexcept nogil

# LAPACK.
cdef int potrf(int n, floating* A, int lda) noexcept nogil
cdef void potrs(int n, int nrhs, const double* L, int ldl, double* B, int ldb) noexcept nogil
cdef int getrf(int n, double* A, int lda, int* ipiv) noexcept nogil
cdef void getrs(int n, int nrhs, const double* LU, int ldlu, const int* ipiv,
                double* B, int ldb) noexcept nogil
cdef int syevd(int n, double* A, int lda, double* w) noexcept nogil
cdef int syevr(int n, double* A, int lda, int il, int iu, double* w, double* Z, int ldz,
               int* n_found) noexcept nogil
cdef int gelsd(int m, int n, int nrhs, double* A, int lda, double* B, int ldb, double rcond,
               double* s, int* rank) noexcept nogil
cdef int lstsq_rows(int m, int n, int nrhs, const double* A, int lda, const double* B, int ldb,
                    double rcond, double* X, int ldx, int* rank) noexcept nogil
cdef int qr_thin(int m, int n, double* A, int lda, double* R, int ldr) noexcept nogil

cdef bint all_finite(int m, int n, const double* A, int lda, bint lower) noexcept nogil
cdef void mirror_triangle(int n, floating* A, int lda, bint from_lower) noexcept nogil
cdef void symmetrize_from_lower(int n, double* A, int lda) noexcept nogil
