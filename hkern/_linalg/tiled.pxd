# Deterministic parallel level 3 and Cholesky, polled for Ctrl-C.
#
# The output is cut into a fixed grid of tiles that does not depend on the thread count; an
# OpenMP loop hands the tiles to n_threads threads and each tile is one single-threaded BLAS or
# LAPACK call on a bounded shape.  Every entry is therefore computed by the same operations for
# any n_threads: results are bitwise identical for n_jobs = 1, 2, ...; and each call is short
# enough (about 1e9 flops at most) for the loops to check for an interrupt between calls
# (interrupt.pxd).  The caller must limit BLAS to one thread (hkern._threads.blas_threads(1))
# around these calls.
from cython cimport floating

from hkern._linalg.interrupt cimport Interrupt

cdef enum:
    # Tile grid of the deterministic parallel routines: large enough for single-threaded BLAS to
    # run near its peak, small enough to balance two or more threads.
    TILE = 512
    # Block size of the tiled Cholesky (the k dimension of its trailing updates).
    CHOL_BLOCK = 256
    # Panel width of the tiled inverse from a Cholesky factor and of the tiled triangular product
    # (lauum_upper_to_lower): their work is uneven across panels (the first panel costs most), so
    # panels are narrower than TILE for two threads to share a 500 x 500 inverse.
    INV_TILE = 128
    # Row block of the substitution-ordered triangular solves (trsm_left_rows and the mixed
    # one): each step solves one diagonal block and updates the remaining blocks of B.
    SOLVE_BLOCK = 256
    # Inner dimension of one BLAS call in gemm_tiled and syrk_tiled: a longer one is summed in
    # K_SPLIT pieces, in order, which keeps every call near 1e9 flops and interruptible (a
    # 512 x 512 tile of a Gram matrix over 36 000 rows was one 0.6 s call).
    K_SPLIT = 2048

cdef void gemm_tiled(bint trans_a, bint trans_b, int m, int n, int k, double alpha,
                     const floating* A, int lda, const floating* B, int ldb,
                     double beta, floating* C, int ldc, int n_threads, Interrupt* it) noexcept nogil
cdef void syrk_tiled(bint trans, int n, int k, double alpha, const floating* A, int lda,
                     double beta, floating* C, int ldc, int n_threads, Interrupt* it) noexcept nogil
cdef void trsm_tiled(bint left, bint lower, bint trans, bint unit_diag, int m, int n,
                     double alpha, const floating* A, int lda, floating* B, int ldb,
                     int n_threads, Interrupt* it) noexcept nogil
cdef int potrf_tiled(int n, floating* A, int lda, int n_threads, Interrupt* it) noexcept nogil
cdef void potri_tiled(int n, const double* L, int ldl, double* Z, int ldz, double* O, int ldo,
                      int n_threads, Interrupt* it) noexcept nogil
cdef int lauum_upper_to_lower(int n, floating* A, int lda, double alpha, floating* diag,
                              int n_threads, Interrupt* it) noexcept nogil
