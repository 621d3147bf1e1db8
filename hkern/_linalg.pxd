# Row-major (C-contiguous) BLAS/LAPACK shim over scipy.linalg.cython_blas / cython_lapack.
#
# Every matrix argument is row-major: element (i, j) of an m x n matrix A with leading dimension
# lda (>= n, the row stride in elements) lives at A[i * lda + j].  The column-major libraries are
# called through the transpose trick: a row-major matrix is the column-major storage of its
# transpose.  That translation (flipped sides, flipped triangles, swapped dimensions) is written in
# _linalg.pyx once and nowhere else.
#
# Conventions shared by all functions:
#   * `lower` names the triangle *in the row-major view* the caller sees.
#   * Functions returning int return LAPACK's `info` (0 = success); the nogil core never raises.
#     The Python layer turns a non-zero info into numpy.linalg.LinAlgError (see check_info).
#   * Functions that need LAPACK workspace allocate it with malloc and return -1000 when
#     allocation fails.

from cython cimport floating

# Prompt interrupts (Ctrl-C).  A long nogil routine takes an Interrupt* (NULL: never
# interrupted) and every thread calls interrupted() between units of work that take well under
# 0.1 s; once it returns true the thread skips the rest of its work, so the parallel loops end at
# once and no OpenMP thread keeps running.  Only the thread that set up the Interrupt (the Python
# thread of the call) runs the signal handlers, at most every INTERRUPT_POLL seconds, with the
# GIL; a handler's exception (KeyboardInterrupt) is left set and the caller raises it with
# reraise() right after its nogil block, before looking at any result (they are unfinished).
#
#     cdef Interrupt it
#     interrupt_init(&it)
#     with nogil:
#         status = some_routine(..., &it)
#     if it.raised:
#         reraise()
cdef struct Interrupt:
    int raised              # set once a signal handler raised; read by every thread
    double next_poll        # omp_get_wtime() from which the owner polls the handlers again
    unsigned long owner     # pthread_self() of the thread that polls

cdef void interrupt_init(Interrupt* it) noexcept nogil
cdef bint interrupted(Interrupt* it) noexcept nogil
cdef int reraise() except -1

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

cdef int potrf(int n, floating* A, int lda) noexcept nogil
cdef void potrs(int n, int nrhs, const double* L, int ldl, double* B, int ldb) noexcept nogil
cdef int getrf(int n, double* A, int lda, int* ipiv) noexcept nogil
cdef int getrf_blocked(int n, double* A, int lda, int* ipiv, Interrupt* it) noexcept nogil
cdef void getrs(int n, int nrhs, const double* LU, int ldlu, const int* ipiv,
                double* B, int ldb) noexcept nogil
cdef int syevd(int n, double* A, int lda, int il, int iu, double* w, double* Z, int ldz,
               int* n_found, Interrupt* it) noexcept nogil
cdef int gesdd(int m, int n, double* A, int lda, double* s, double* U, int ldu,
               double* VT, int ldvt) noexcept nogil
cdef int lstsq_svd(int m, int n, int nrhs, const double* A, int lda, const double* B, int ldb,
                   double rcond, double* X, int ldx, int* rank, Interrupt* it) noexcept nogil

cdef int qr_thin(int m, int n, double* A, int lda, double* R, int ldr,
                 Interrupt* it) noexcept nogil

cdef void symmetrize_from_lower(int n, double* A, int lda) noexcept nogil

# Deterministic parallel level 3.  The output is cut into a fixed grid of tiles that does not
# depend on the thread count; an OpenMP loop hands the tiles to n_threads threads and each tile is
# one single-threaded BLAS call.  Every entry is therefore computed by the same operations for any
# n_threads: results are bitwise identical for n_jobs = 1, 2, ...  The caller must limit BLAS to
# one thread (hkern._threads.blas_threads(1)) around these calls.
cdef void gemm_tiled(bint trans_a, bint trans_b, int m, int n, int k, double alpha,
                     const floating* A, int lda, const floating* B, int ldb,
                     double beta, floating* C, int ldc, int n_threads, Interrupt* it) noexcept nogil
cdef void syrk_tiled(bint trans, int n, int k, double alpha, const floating* A, int lda,
                     double beta, floating* C, int ldc, int n_threads, Interrupt* it) noexcept nogil
cdef int potrf_tiled(int n, floating* A, int lda, int n_threads, Interrupt* it) noexcept nogil
cdef void potri_tiled(int n, const double* L, int ldl, double* Z, int ldz, double* O, int ldo,
                      int n_threads, Interrupt* it) noexcept nogil
cdef void trsm_tiled(bint left, bint lower, bint trans, bint unit_diag, int m, int n,
                     double alpha, const floating* A, int lda, floating* B, int ldb,
                     int n_threads, Interrupt* it) noexcept nogil
# op(A) X = B for a float32 triangle and double B, in double arithmetic, A's diagonal from diag.
cdef void trsm_left_rows_mixed(bint lower, bint trans, int m, int n, const float* A, int lda,
                               const double* diag, double* B, int ldb, int n_threads,
                               Interrupt* it) noexcept nogil
