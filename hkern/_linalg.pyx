"""Row-major BLAS/LAPACK shim (see _linalg.pxd for the conventions).

The ``cdef ... nogil`` functions are the core used by every Cython module of hkern.  The ``def``
functions at the bottom are thin NumPy entry points over the same wrappers: they are what the
Python layer calls, they turn LAPACK's ``info`` into :class:`numpy.linalg.LinAlgError`, and the
tests compare each of them with NumPy/SciPy.
"""
from cython cimport floating
from libc.float cimport DBL_MAX
from libc.math cimport sqrt
from libc.stdlib cimport malloc, free
from libc.string cimport memcpy, memset
from cython.parallel cimport prange
from openmp cimport omp_get_thread_num, omp_get_wtime
from scipy.linalg cimport cython_blas as blas
from scipy.linalg cimport cython_lapack as lapack

import numpy as np

from hkern._threads import blas_threads

# What a routine returns for a matrix with NaN or inf entries (check_info raises LinAlgError).
cdef enum:
    NON_FINITE = -3000

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
    # Row block of the substitution-ordered triangular solve (trsm_left_rows): each step solves
    # one diagonal block and updates the remaining blocks of B, SOLVE_BLOCK rows per task.
    SOLVE_BLOCK = 256

    # Inner dimension of one BLAS call in gemm_tiled and syrk_tiled: a longer one is summed in
    # K_SPLIT pieces, in order, which keeps every call near 1e9 flops and interruptible (a
    # 512 x 512 tile of a Gram matrix over 36 000 rows was one 0.6 s call).
    K_SPLIT = 2048

# The same numbers for Python (tests place their shapes at tile and block boundaries).
TILE_SIZE = TILE
CHOLESKY_BLOCK_SIZE = CHOL_BLOCK
INVERSE_TILE_SIZE = INV_TILE
SOLVE_BLOCK_SIZE = SOLVE_BLOCK



# ----------------------------------------------------------------------------------------------
# Prompt interrupts (see _linalg.pxd).
# ----------------------------------------------------------------------------------------------

# Seconds between two polls of the signal handlers by the owner thread: each poll takes the GIL
# (microseconds when no other Python thread runs), and Ctrl-C waits at most this long plus one
# unit of work.
cdef double INTERRUPT_POLL = 0.02

cdef extern from *:
    """
    #include <pthread.h>
    /* The flag is written by the owner thread and read by every thread of the team. */
    static inline int hk_flag_load(const int* p) { return __atomic_load_n(p, __ATOMIC_RELAXED); }
    static inline void hk_flag_store(int* p, int v) { __atomic_store_n(p, v, __ATOMIC_RELAXED); }
    static inline unsigned long hk_thread_id(void) { return (unsigned long)pthread_self(); }
    """
    int hk_flag_load(const int* p) nogil
    void hk_flag_store(int* p, int v) nogil
    unsigned long hk_thread_id() nogil

cdef extern from "Python.h":
    # Declared without an exception value on purpose: the handler's exception stays set while the
    # loops wind down without the GIL, and the caller raises it with reraise().
    int _run_signal_handlers "PyErr_CheckSignals" () nogil


cdef void interrupt_init(Interrupt* it) noexcept nogil:
    """Make *it the interrupt state of a call made by the current thread (its owner)."""
    it.raised = 0
    it.next_poll = 0.0          # the first check polls at once: a signal that came before counts
    it.owner = hk_thread_id()


cdef bint interrupted(Interrupt* it) noexcept nogil:
    """True once a signal handler raised during the call (always false for NULL).

    Any thread may call it, as often as it likes: on the owner thread it runs the Python signal
    handlers every INTERRUPT_POLL seconds (taking the GIL), elsewhere it reads one flag.  The
    handlers do nothing outside the main thread, so a call from another Python thread is never
    interrupted.
    """
    cdef double now
    if it == NULL:
        return False
    if hk_flag_load(&it.raised):
        return True
    if hk_thread_id() != it.owner:
        return False
    now = omp_get_wtime()
    if now < it.next_poll:
        return False
    it.next_poll = now + INTERRUPT_POLL
    with gil:
        if _run_signal_handlers() != 0:
            hk_flag_store(&it.raised, 1)
    return hk_flag_load(&it.raised) != 0


cdef int reraise() except -1:
    """Raise the exception a signal handler left set in interrupted() (call it when it.raised)."""
    return -1



# ----------------------------------------------------------------------------------------------
# Level 1-3 BLAS.  Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T.
# ----------------------------------------------------------------------------------------------

cdef void gemm(bint trans_a, bint trans_b, int m, int n, int k, double alpha,
               const floating* A, int lda, const floating* B, int ldb,
               double beta, floating* C, int ldc) noexcept nogil:
    """C (m x n) = alpha * op(A) (m x k) @ op(B) (k x n) + beta * C, in A's precision (dgemm
    or sgemm).

    With one column (n = 1) this is gemv's product: BLAS's gemm is several times slower at
    that shape (the fused kernel products, CG with one right-hand side).
    """
    cdef char ta = b'T' if trans_a else b'N'
    cdef char tb = b'T' if trans_b else b'N'
    cdef floating a = <floating>alpha, b = <floating>beta
    if m == 0 or n == 0:
        return
    if n == 1 and k > 0:
        gemv(trans_a, k if trans_a else m, m if trans_a else k, alpha, A, lda, B,
             1 if trans_b else ldb, beta, C, ldc)
        return
    if floating is double:
        blas.dgemm(&tb, &ta, &n, &m, &k, &a, <double*>B, &ldb, <double*>A, &lda, &b, C, &ldc)
    else:
        blas.sgemm(&tb, &ta, &n, &m, &k, &a, <float*>B, &ldb, <float*>A, &lda, &b, C, &ldc)


cdef void gemv(bint trans, int m, int n, double alpha, const floating* A, int lda,
               const floating* x, int incx, double beta, floating* y, int incy) noexcept nogil:
    """y = alpha * op(A) @ x + beta * y for a row-major m x n matrix A."""
    # The column-major view of A is A^T (n x m), so the flag flips.
    cdef char t = b'N' if trans else b'T'
    cdef floating a = <floating>alpha, b = <floating>beta
    if m == 0 or n == 0:
        return
    if floating is double:
        blas.dgemv(&t, &n, &m, &a, <double*>A, &lda, <double*>x, &incx, &b, y, &incy)
    else:
        blas.sgemv(&t, &n, &m, &a, <float*>A, &lda, <float*>x, &incx, &b, y, &incy)


cdef void ger(int m, int n, double alpha, const double* x, int incx,
              const double* y, int incy, double* A, int lda) noexcept nogil:
    """A (m x n) += alpha * x y^T."""
    if m == 0 or n == 0:
        return
    blas.dger(&n, &m, &alpha, <double*>y, &incy, <double*>x, &incx, A, &lda)


cdef void syrk(bint lower, bint trans, int n, int k, double alpha, const floating* A, int lda,
               double beta, floating* C, int ldc) noexcept nogil:
    """C (n x n) = alpha * op(A) op(A)^T + beta * C on the `lower` (or upper) triangle only.

    trans=False: A is n x k and C = A A^T.  trans=True: A is k x n and C = A^T A.
    """
    cdef char uplo = b'U' if lower else b'L'
    cdef char t = b'N' if trans else b'T'
    cdef floating a = <floating>alpha, b = <floating>beta
    if n == 0:
        return
    if floating is double:
        blas.dsyrk(&uplo, &t, &n, &k, &a, <double*>A, &lda, &b, C, &ldc)
    else:
        blas.ssyrk(&uplo, &t, &n, &k, &a, <float*>A, &lda, &b, C, &ldc)


cdef inline void triangular(bint multiply, bint left, bint lower, bint trans, bint unit_diag,
                            int m, int n, double alpha, const floating* A, int lda, floating* B,
                            int ldb) noexcept nogil:
    """trsm (multiply False) or trmm (True): the two share their arguments and their flags."""
    # Transposing the equation swaps the side and the triangle; op and the dimensions follow.
    cdef char side = b'R' if left else b'L'
    cdef char uplo = b'U' if lower else b'L'
    cdef char t = b'T' if trans else b'N'
    cdef char diag = b'U' if unit_diag else b'N'
    cdef floating a = <floating>alpha
    if m == 0 or n == 0:
        return
    if floating is double:
        if multiply:
            blas.dtrmm(&side, &uplo, &t, &diag, &n, &m, &a, <double*>A, &lda, B, &ldb)
        else:
            blas.dtrsm(&side, &uplo, &t, &diag, &n, &m, &a, <double*>A, &lda, B, &ldb)
    elif multiply:
        blas.strmm(&side, &uplo, &t, &diag, &n, &m, &a, <float*>A, &lda, B, &ldb)
    else:
        blas.strsm(&side, &uplo, &t, &diag, &n, &m, &a, <float*>A, &lda, B, &ldb)


cdef void trsm(bint left, bint lower, bint trans, bint unit_diag, int m, int n, double alpha,
               const floating* A, int lda, floating* B, int ldb) noexcept nogil:
    """Solve op(A) X = alpha B (left) or X op(A) = alpha B (right); B (m x n) is overwritten by X."""
    triangular(False, left, lower, trans, unit_diag, m, n, alpha, A, lda, B, ldb)


cdef void trmm(bint left, bint lower, bint trans, bint unit_diag, int m, int n, double alpha,
               const floating* A, int lda, floating* B, int ldb) noexcept nogil:
    """B (m x n) <- alpha op(A) B (left) or alpha B op(A) (right), A triangular."""
    triangular(True, left, lower, trans, unit_diag, m, n, alpha, A, lda, B, ldb)


cdef double dot(int n, const double* x, int incx, const double* y, int incy) noexcept nogil:
    return blas.ddot(&n, <double*>x, &incx, <double*>y, &incy)


cdef void axpy(int n, double alpha, const double* x, int incx, double* y, int incy) noexcept nogil:
    blas.daxpy(&n, &alpha, <double*>x, &incx, y, &incy)


# ----------------------------------------------------------------------------------------------
# LAPACK.
# ----------------------------------------------------------------------------------------------

cdef int potrf(int n, floating* A, int lda) noexcept nogil:
    """Cholesky A = L L^T of a row-major SPD matrix; L overwrites the lower triangle.

    Only the lower triangle of A is read; the strict upper triangle is left untouched.
    """
    # Row-major lower == column-major upper, and column-major upper U gives A = U^T U, U^T = L.
    cdef char uplo = b'U'
    cdef int info = 0
    if n == 0:
        return 0
    if floating is double:
        lapack.dpotrf(&uplo, &n, A, &lda, &info)
    else:
        lapack.spotrf(&uplo, &n, A, &lda, &info)
    return info


cdef void potrs(int n, int nrhs, const double* L, int ldl, double* B, int ldb) noexcept nogil:
    """Solve (L L^T) X = B in place, L from potrf (row-major lower)."""
    # dpotrs wants the right-hand sides as contiguous columns; row-major B has them strided, so
    # the two triangular solves are issued directly.
    trsm(True, True, False, False, n, nrhs, 1.0, L, ldl, B, ldb)
    trsm(True, True, True, False, n, nrhs, 1.0, L, ldl, B, ldb)


cdef int getrf(int n, double* A, int lda, int* ipiv) noexcept nogil:
    """LU factorisation for getrs.  ipiv holds LAPACK's 1-based interchanges.

    The factors are those of A^T = P L U (the column-major view), so the row-major buffer holds
    U^T in its lower triangle and L^T (unit diagonal) in its strict upper triangle.
    det(A) = prod(diag) * (-1)^(number of i with ipiv[i] != i + 1).
    """
    cdef int info = 0
    if n == 0:
        return 0
    lapack.dgetrf(&n, &n, A, &lda, ipiv, &info)
    return info


cdef int getrf_blocked(int n, double* A, int lda, int* ipiv, Interrupt* it) noexcept nogil:
    """getrf (the same layout of the factors, the same pivots' meaning) by LAPACK's right-looking
    blocked algorithm, in calls short enough to check for an interrupt between them.

    dgetrf on 2048 x 2048 was one 0.2-0.4 s call (the HCK's I + Lambda Xi at r = 2048).  Here, in
    the column-major view C of the buffer (C = A^T, factored as getrf does), each CHOL_BLOCK-wide
    panel is factored by dgetrf, its interchanges applied to the columns on both sides (dlaswp),
    the block row of U solved (dtrsm) and the trailing matrix updated TILE columns at a time
    (dgemm).  Single-threaded and of fixed shapes: the same result for any thread count.
    Returns info as dgetrf (the first zero pivot, 1-based); when interrupted, 0 with A
    unfinished.
    """
    cdef int j = 0, jb, rows, rest, c0, cb, i, pinfo = 0, info = 0, one = 1, k1, k2
    cdef double minus_one = -1.0, plus_one = 1.0
    cdef char side = b'L', lower = b'L', no = b'N', unit = b'U'
    while j < n:
        if interrupted(it):
            return 0
        jb = min(<int>CHOL_BLOCK, n - j)
        rows = n - j
        # C[i, j] is A[i + j * lda]: the panel is C[j:, j:j + jb].
        lapack.dgetrf(&rows, &jb, A + j + <Py_ssize_t>j * lda, &lda, ipiv + j, &pinfo)
        if pinfo != 0 and info == 0:
            info = pinfo + j
        for i in range(j, j + jb):
            ipiv[i] += j                # panel-relative to global row numbers
        k1 = j + 1
        k2 = j + jb
        if j > 0:
            lapack.dlaswp(&j, A, &lda, &k1, &k2, ipiv, &one)
        rest = n - j - jb
        if rest > 0:
            lapack.dlaswp(&rest, A + <Py_ssize_t>(j + jb) * lda, &lda, &k1, &k2, ipiv, &one)
            blas.dtrsm(&side, &lower, &no, &unit, &jb, &rest, &plus_one,
                       A + j + <Py_ssize_t>j * lda, &lda, A + j + <Py_ssize_t>(j + jb) * lda, &lda)
            c0 = 0
            while c0 < rest:
                if interrupted(it):
                    return 0
                cb = min(<int>TILE, rest - c0)
                blas.dgemm(&no, &no, &rest, &cb, &jb, &minus_one,
                           A + j + jb + <Py_ssize_t>j * lda, &lda,
                           A + j + <Py_ssize_t>(j + jb + c0) * lda, &lda, &plus_one,
                           A + j + jb + <Py_ssize_t>(j + jb + c0) * lda, &lda)
                c0 = c0 + cb
        j = j + jb
    return info


cdef void getrs(int n, int nrhs, const double* LU, int ldlu, const int* ipiv,
                double* B, int ldb) noexcept nogil:
    """Solve A X = B in place with the factors of getrf.

    A = (P L U)^T = U^T L^T P^T, so X = P L^{-T} U^{-T} B.
    """
    cdef int i, p, one = 1
    trsm(True, True, False, False, n, nrhs, 1.0, LU, ldlu, B, ldb)   # U^T: row-major lower
    trsm(True, False, False, True, n, nrhs, 1.0, LU, ldlu, B, ldb)   # L^T: row-major unit upper
    # P = P_0 P_1 ... P_{n-1}; applying P means swapping rows from the last interchange back.
    for i in range(n - 1, -1, -1):
        p = ipiv[i] - 1
        if p != i:
            blas.dswap(&nrhs, B + <Py_ssize_t>i * ldb, &one, B + <Py_ssize_t>p * ldb, &one)


# Column blocks of the panel reduction (the last ones reduced unblocked) and of the
# back-transformation: LAPACK's dsytrd defaults (ilaenv: 32 and 128).
cdef enum:
    EIG_BLOCK = 32
    EIG_UNBLOCKED = 128
    EIG_BACK_COLUMNS = 128


cdef inline void _gemv_cm(bint trans, int rows, int cols, double alpha, const double* M,
                          int ld, const double* x, int incx, double beta, double* y) noexcept nogil:
    """y = alpha op(M) x + beta y for a column-major rows x cols M (leading dimension ld):
    gemv on its row-major view M^T, the flag flipped."""
    gemv(not trans, cols, rows, alpha, M, ld, x, incx, beta, y, 1)


cdef int _latrd_upper(int n, int nb, double* A, int lda, double* e, double* tau, double* W,
                      int ldw, Interrupt* it) noexcept nogil:
    """LAPACK's dlatrd, UPLO='U' (column-major, 0-based below): reduces the last nb columns of
    the leading n x n upper triangle of A to tridiagonal form by an orthogonal similarity and
    returns the n x nb matrix W of the update A - V W^T - W V^T.  Each column is one symmetric
    matrix-vector product over the leading part (memory-bound: 50 ms at n = 8192 here), and
    the signal handlers are polled between columns.  Returns -2000 once interrupted."""
    cdef int i, iw, rest, one = 1
    cdef double done = 1.0, dzero = 0.0, alpha
    cdef char up = b'U'
    cdef double* a_i         # A(0:i, i), the column being reduced
    cdef double* w_iw        # W(0:i, iw), its column of W
    cdef double* a_next      # A(0:, i+1:), the columns reduced before it in this panel
    cdef double* w_next      # W(0:, iw+1:), their columns of W
    for i in range(n - 1, n - nb - 1, -1):
        if interrupted(it):
            return -2000
        iw = i - n + nb
        rest = n - 1 - i
        a_i, w_iw = A + <Py_ssize_t>i * lda, W + <Py_ssize_t>iw * ldw
        a_next, w_next = A + <Py_ssize_t>(i + 1) * lda, W + <Py_ssize_t>(iw + 1) * ldw
        if rest > 0:
            # A(0:i, i) -= A(0:i, i+1:n) W(i, iw+1:)^T + W(0:i, iw+1:) A(i, i+1:n)^T
            _gemv_cm(False, i + 1, rest, -1.0, a_next, lda, w_next + i, ldw, 1.0, a_i)
            _gemv_cm(False, i + 1, rest, -1.0, w_next, ldw, a_next + i, lda, 1.0, a_i)
        if i == 0:
            continue
        # The reflector H(i) that annihilates A(0:i-1, i).
        lapack.dlarfg(&i, a_i + (i - 1), a_i, &one, tau + (i - 1))
        e[i - 1] = a_i[i - 1]
        a_i[i - 1] = 1.0
        # W(0:i, iw) = tau (A v - the panel's earlier updates applied to v), corrected along v.
        blas.dsymv(&up, &i, &done, A, &lda, a_i, &one, &dzero, w_iw, &one)
        if rest > 0:
            _gemv_cm(True, i, rest, 1.0, w_next, ldw, a_i, 1, 0.0, w_iw + i + 1)
            _gemv_cm(False, i, rest, -1.0, a_next, lda, w_iw + i + 1, 1, 1.0, w_iw)
            _gemv_cm(True, i, rest, 1.0, a_next, lda, a_i, 1, 0.0, w_iw + i + 1)
            _gemv_cm(False, i, rest, -1.0, w_next, ldw, w_iw + i + 1, 1, 1.0, w_iw)
        blas.dscal(&i, tau + (i - 1), w_iw, &one)
        alpha = -0.5 * tau[i - 1] * dot(i, w_iw, 1, a_i, 1)
        axpy(i, alpha, a_i, 1, w_iw, 1)
    return 0


cdef int _tridiagonal_upper(int n, double* A, int lda, double* d, double* e, double* tau,
                            Interrupt* it) noexcept nogil:
    """LAPACK's dsytrd, UPLO='U' (column-major), with its panels reduced by _latrd_upper:
    Q^T A Q = T with diagonal d and off-diagonal e, Q's reflectors left in A for dormtr.
    Returns LAPACK's info, -1000 out of memory, -2000 once interrupted."""
    cdef int nb = EIG_BLOCK, kk = n, i, j, k, info = 0
    cdef int ldw = n
    cdef double dmone = -1.0, done = 1.0
    cdef char up = b'U', nt = b'N'
    cdef double* W
    if n > EIG_UNBLOCKED:
        W = <double*>malloc(<size_t>ldw * nb * sizeof(double))
        if W == NULL:
            return -1000
        kk = n - ((n - EIG_UNBLOCKED + nb - 1) // nb) * nb
        i = n - nb          # 0-based first column of the panel
        while i >= kk:
            info = _latrd_upper(i + nb, nb, A, lda, e, tau, W, ldw, it)
            if info != 0:
                free(W)
                return info
            k = i
            blas.dsyr2k(&up, &nt, &k, &nb, &dmone, A + <Py_ssize_t>i * lda, &lda, W, &ldw, &done,
                        A, &lda)
            for j in range(i, i + nb):
                A[(j - 1) + <Py_ssize_t>j * lda] = e[j - 1]
                d[j] = A[j + <Py_ssize_t>j * lda]
            i -= nb
        free(W)
    if interrupted(it):
        return -2000
    lapack.dsytd2(&up, &kk, A, &lda, d, e, tau, &info)
    return info


cdef int syevd(int n, double* A, int lda, int il, int iu, double* w, double* Z, int ldz,
               int* n_found, Interrupt* it) noexcept nogil:
    """Eigenpairs il..iu (0-based, inclusive, ascending order) of a symmetric row-major A.

    Only the lower triangle of A is read; A is destroyed.  Eigenvalues go to w[0:iu-il+1];
    eigenvector j is *row* j of Z (row-major, row stride ldz >= n).  il < 0 requests all pairs.

    LAPACK's dsyevd steps (with dsyevr's scaling), the signal handlers polled between units
    of work of well under 0.2 s (``it``; NULL never interrupts): A scaled into a safe range,
    reduced to tridiagonal form (_tridiagonal_upper, checked between columns), the
    tridiagonal eigenpairs by divide and conquer (_tridiagonal_eigh, polled between the
    steps of its merges) and Q applied to them a block of EIG_BACK_COLUMNS at a time
    (dormtr).  Beside A and Z it allocates 4 n + n^2 doubles (and n^2 more for a subset).
    Returns LAPACK's info (> 0: no convergence), -1000 out of memory, -2000 once interrupted,
    NON_FINITE for a NaN or inf in A's lower triangle.
    """
    cdef int info
    cdef double* d
    cdef double* e
    cdef double* tau
    n_found[0] = 0
    if n == 0:
        return 0
    d = <double*>malloc(n * sizeof(double))
    e = <double*>malloc(n * sizeof(double))
    tau = <double*>malloc(n * sizeof(double))
    if d == NULL or e == NULL or tau == NULL:
        info = -1000
    else:
        info = _syevd_steps(n, A, lda, il, iu, w, Z, ldz, n_found, it, d, e, tau)
    free(d)
    free(e)
    free(tau)
    return info


cdef int _syevd_steps(int n, double* A, int lda, int il, int iu, double* w, double* Z, int ldz,
                      int* n_found, Interrupt* it, double* d, double* e,
                      double* tau) noexcept nogil:
    """syevd's work, given its buffers of n."""
    cdef char sfmin = b'S', epsc = b'P'
    cdef double anrm = 0.0, scale = 1.0, rmin, rmax, safmin, eps, a
    cdef int lwork, info = 0, m = 0
    cdef int i, j
    cdef size_t nwork
    cdef double* work
    cdef int* iwork
    # dsyevr's scaling: the upper triangle (column-major) into [rmin, rmax].
    for j in range(n):
        for i in range(j + 1):
            a = abs(A[i + <Py_ssize_t>j * lda])
            if not a <= DBL_MAX:    # NaN or inf: LAPACK would return NaN pairs (or hang)
                return NON_FINITE
            anrm = max(anrm, a)
    safmin = lapack.dlamch(&sfmin)
    eps = lapack.dlamch(&epsc)
    rmin = sqrt(safmin / eps)
    rmax = min(sqrt(eps / safmin), 1.0 / sqrt(sqrt(safmin)))
    if 0.0 < anrm < rmin:
        scale = rmin / anrm
    elif anrm > rmax:
        scale = rmax / anrm
    if scale != 1.0:
        for j in range(n):
            for i in range(j + 1):
                A[i + <Py_ssize_t>j * lda] *= scale
    info = _tridiagonal_upper(n, A, lda, d, e, tau, it)
    if info != 0:
        return info
    if interrupted(it):
        return -2000
    # Room for dormtr's blocks of EIG_BACK_COLUMNS columns and divide and conquer's workspace
    # (4 n + n^2, beyond what LAPACK is told, and 3 + 5 n).
    lwork = <int>EIG_BACK_COLUMNS * n
    nwork = max(<size_t>lwork, 4 * <size_t>n + <size_t>n * n)
    work = <double*>malloc(nwork * sizeof(double))
    iwork = <int*>malloc((5 * n + 3) * sizeof(int))
    if work == NULL or iwork == NULL:
        info = -1000
    else:
        info = _eigenvectors(n, A, lda, 0 if il < 0 else il, n - 1 if il < 0 else iu, w, Z,
                             ldz, &m, it, d, e, tau, work, lwork, iwork)
    free(work)
    free(iwork)
    if info == 0:
        if scale != 1.0:
            for j in range(m):
                w[j] /= scale
        n_found[0] = m
    return info


cdef int _eigenvectors(int n, double* A, int lda, int il, int iu, double* w, double* Z,
                       int ldz, int* m, Interrupt* it, double* d, double* e, double* tau,
                       double* work, int lwork, int* iwork) noexcept nogil:
    """Eigenpairs il..iu (0-based) of the tridiagonal (d, e) by divide and conquer
    (_tridiagonal_eigh, polled throughout), then Q applied to them by column blocks (dormtr),
    polled between blocks.  A subset is taken from all pairs, computed in a temporary n x n:
    MRRR (dstemr) computes only the pairs wanted but in one call that cannot be polled, and
    its time varies with the spectrum (16 pairs at the clustered small end of a kernel
    matrix's spectrum took 1.28 s at n = 8192, 16 at the top 0.09 s)."""
    cdef char up = b'U', left = b'L', nt = b'N'
    cdef int info = 0, c0, cols, i, k = iu - il + 1
    cdef double* Zall = Z
    if k < n:
        Zall = <double*>malloc(<size_t>n * n * sizeof(double))
        if Zall == NULL:
            return -1000
    info = _tridiagonal_eigh(n, d, e, Zall, n if k < n else ldz, work, iwork, it)
    if info == 0 and k < n:
        for i in range(k):
            memcpy(Z + <Py_ssize_t>i * ldz, Zall + <Py_ssize_t>(il + i) * n, n * sizeof(double))
    if k < n:
        free(Zall)
    if info != 0:
        return info
    memcpy(w, d + il, k * sizeof(double))
    m[0] = k
    c0 = 0
    while c0 < k:
        if interrupted(it):
            return -2000
        cols = min(<int>EIG_BACK_COLUMNS, k - c0)
        lapack.dormtr(&left, &up, &nt, &n, &cols, A, &lda, tau, Z + <Py_ssize_t>c0 * ldz, &ldz,
                      work, &lwork, &info)
        if info != 0:
            return info
        c0 += cols
    return 0


# ----------------------------------------------------------------------------------------------
# Symmetric tridiagonal eigenproblem by divide and conquer (LAPACK's dstedc, COMPZ='I'), its
# merge steps transcribed so that the signal handlers are polled between units of work.
# LAPACK's own routines do the O(n^2) parts that need no polling (dlaed2's deflation, dlaed4's
# root of one secular equation, dsteqr on the leaves); the O(n^2) loops of dlaed3 and its two
# eigenvector products (gemm_tiled), O(n^3) in all, are here.  Column-major, 1-based index
# arrays as LAPACK's.
# ----------------------------------------------------------------------------------------------

cdef enum:
    # dlaed0's SMLSIZ (ilaenv's ispec 9): the leaves of the tree, solved by implicit QL/QR.
    DC_LEAF = 25
    # Secular equations (or eigenvector columns) between two polls in dlaed3's loops: each is
    # O(k), under 0.1 ms at k = 8192.
    DC_POLL_COLUMNS = 64

cdef int _product_column_major(int m, int n, int k, const double* A, int lda,
                               const double* B, int ldb, double* C, int ldc,
                               Interrupt* it) noexcept nogil:
    """C = A B for column-major A (m x k), B (k x n) and C (m x n): gemm_tiled on the row-major
    views, C^T = B^T A^T (its tiles and inner pieces polled; one thread, as eigh runs).  An
    empty inner dimension sets C to zero, as dlaed3's dlaset.  Returns -2000 once
    interrupted."""
    cdef char full = b'A'
    cdef double dzero = 0.0
    if k == 0:
        lapack.dlaset(&full, &m, &n, &dzero, &dzero, C, &ldc)
        return 0
    gemm_tiled(False, False, n, m, k, 1.0, B, ldb, A, lda, 0.0, C, ldc, 1, it)
    return -2000 if interrupted(it) else 0


cdef int _merge_vectors(int k, int n, int n1, double* d, double* Q, int ldq, double rho,
                        const double* dlamda, const double* q2, const int* indx,
                        const int* ctot, double* w, double* s, Interrupt* it) noexcept nogil:
    """LAPACK's dlaed3: the k roots of the secular equation of a merge (dlaed4), the updated
    z by Loewner's formula (Gu and Eisenstat), the eigenvectors of the rank-one modified
    diagonal, and their product with the two halves' eigenvectors (q2, as packed by dlaed2).
    dlaed3's first loop, DLAMDA(I) = 2 DLAMDA(I) - DLAMDA(I), is left out: it is the identity
    on binary machines with a guard digit."""
    cdef int i, j, jj, info = 0, n2 = n - n1, n12, n23, one = 1
    cdef char full = b'A'
    cdef double temp
    cdef double* col
    if k == 0:
        return 0
    for j in range(k):
        if j % DC_POLL_COLUMNS == 0 and interrupted(it):
            return -2000
        jj = j + 1
        lapack.dlaed4(&k, &jj, <double*>dlamda, w, Q + <Py_ssize_t>j * ldq, &rho, d + j, &info)
        if info != 0:
            return info
    if k == 2:
        for j in range(2):
            col = Q + <Py_ssize_t>j * ldq
            w[0] = col[0]
            w[1] = col[1]
            col[0] = w[indx[0] - 1]
            col[1] = w[indx[1] - 1]
    elif k > 2:
        memcpy(s, w, k * sizeof(double))
        for i in range(k):
            w[i] = Q[i + <Py_ssize_t>i * ldq]
        for j in range(k):
            if j % DC_POLL_COLUMNS == 0 and interrupted(it):
                return -2000
            col = Q + <Py_ssize_t>j * ldq
            for i in range(j):
                w[i] = w[i] * (col[i] / (dlamda[i] - dlamda[j]))
            for i in range(j + 1, k):
                w[i] = w[i] * (col[i] / (dlamda[i] - dlamda[j]))
        for i in range(k):
            w[i] = sqrt(-w[i]) if s[i] >= 0.0 else -sqrt(-w[i])
        for j in range(k):
            if j % DC_POLL_COLUMNS == 0 and interrupted(it):
                return -2000
            col = Q + <Py_ssize_t>j * ldq
            for i in range(k):
                s[i] = w[i] / col[i]
            temp = blas.dnrm2(&k, s, &one)
            for i in range(k):
                col[i] = s[indx[i] - 1] / temp
    n12 = ctot[0] + ctot[1]
    n23 = ctot[1] + ctot[2]
    lapack.dlacpy(&full, &n23, &k, Q + ctot[0], &ldq, s, &n23)
    if _product_column_major(n2, k, n23, q2 + <Py_ssize_t>n1 * n12, n2, s, n23, Q + n1, ldq,
                             it) != 0:
        return -2000
    lapack.dlacpy(&full, &n12, &k, Q, &ldq, s, &n12)
    if _product_column_major(n1, k, n12, q2, n1, s, n12, Q, ldq, it) != 0:
        return -2000
    return 0


cdef int _merge(int n, double* d, double* Q, int ldq, int* indxq, double rho, int cutpnt,
                double* work, int* iwork, Interrupt* it) noexcept nogil:
    """LAPACK's dlaed1: merges the eigensystems of the two halves (sizes cutpnt and
    n - cutpnt) of a tridiagonal cut by the rank-one rho z z^T, through dlaed2 (deflation)
    and _merge_vectors (dlaed3).  work holds 4 n + n^2 doubles, iwork 4 n ints."""
    cdef int i, k = 0, info = 0, rest = n - cutpnt, one = 1, minus_one = -1, n1, n2, q_end
    cdef double* z = work
    cdef double* dlamda = work + n
    cdef double* w = work + 2 * n
    cdef double* q2 = work + 3 * n
    cdef int* indx = iwork
    cdef int* indxc = iwork + n
    cdef int* coltyp = iwork + 2 * n
    cdef int* indxp = iwork + 3 * n
    # z: the last row of the first half's eigenvectors and the first row of the second's.
    blas.dcopy(&cutpnt, Q + (cutpnt - 1), &ldq, z, &one)
    blas.dcopy(&rest, Q + cutpnt + <Py_ssize_t>cutpnt * ldq, &ldq, z + cutpnt, &one)
    lapack.dlaed2(&k, &n, &cutpnt, d, Q, &ldq, indxq, &rho, z, dlamda, w, q2, indx, indxc,
                  indxp, coltyp, &info)
    if info != 0:
        return info
    if interrupted(it):
        return -2000
    if k == 0:
        for i in range(n):
            indxq[i] = i + 1
        return 0
    # dlaed2 leaves the column counts of each type in coltyp[0:4] and packs the non-deflated
    # vectors at the start of q2; the product's scratch follows them.
    q_end = (coltyp[0] + coltyp[1]) * cutpnt + (coltyp[1] + coltyp[2]) * rest
    info = _merge_vectors(k, n, cutpnt, d, Q, ldq, rho, dlamda, q2, indxc, coltyp, w,
                          q2 + q_end, it)
    if info != 0:
        return info
    n1, n2 = k, n - k
    lapack.dlamrg(&n1, &n2, d, &one, &minus_one, indxq)
    return 0


cdef int _divide_and_conquer(int n, double* d, double* e, double* Q, int ldq, double* work,
                             int* iwork, Interrupt* it) noexcept nogil:
    """LAPACK's dlaed0 with ICOMPQ = 2: the eigenpairs of an unreduced n x n tridiagonal
    (d, e), n > DC_LEAF, into the n x n block Q (ldq).  The matrix is cut into leaves of at
    most DC_LEAF + 1 rows by rank-one modifications, the leaves solved by dsteqr, and
    neighbours merged level by level (_merge), polled between leaves and merges.  work holds
    4 n + n^2 doubles, iwork 3 + 5 n ints (the first ones the leaves' boundaries, from
    iwork + 4 n + 3 on the merge order indxq).  Returns LAPACK's info, -2000 once
    interrupted."""
    cdef int subpbs = 1, i, j, submat, matsiz, msd2, info = 0, one = 1
    cdef char ident = b'I'
    cdef int* indxq = iwork + 4 * n + 3     # indxq[j - 1] is LAPACK's IWORK(INDXQ + J)
    # The leaves' sizes by repeated halving, then their cumulative ends (1-based).
    iwork[0] = n
    while iwork[subpbs - 1] > DC_LEAF:
        for j in range(subpbs, 0, -1):
            iwork[2 * j - 1] = (iwork[j - 1] + 1) // 2
            iwork[2 * j - 2] = iwork[j - 1] // 2
        subpbs *= 2
    for j in range(1, subpbs):
        iwork[j] += iwork[j - 1]
    # The rank-one cuts between leaves.
    for i in range(1, subpbs):
        submat = iwork[i - 1]             # 0-based first row of leaf i
        d[submat - 1] -= abs(e[submat - 1])
        d[submat] -= abs(e[submat - 1])
    for i in range(subpbs):
        if interrupted(it):
            return -2000
        submat = 0 if i == 0 else iwork[i - 1]
        matsiz = iwork[i] - submat
        lapack.dsteqr(&ident, &matsiz, d + submat, e + submat,
                      Q + submat + <Py_ssize_t>submat * ldq, &ldq, work, &info)
        if info != 0:
            return info
        for j in range(matsiz):
            indxq[submat + j] = j + 1
    while subpbs > 1:
        for i in range(0, subpbs - 1, 2):
            if i == 0:
                submat, matsiz, msd2 = 0, iwork[1], iwork[0]
            else:
                submat = iwork[i - 1]
                matsiz = iwork[i + 1] - iwork[i - 1]
                msd2 = matsiz // 2
            info = _merge(matsiz, d + submat, Q + submat + <Py_ssize_t>submat * ldq, ldq,
                          indxq + submat, e[submat + msd2 - 1], msd2, work,
                          iwork + subpbs, it)
            if info != 0:
                return info
            iwork[i // 2] = iwork[i + 1]
        subpbs //= 2
    # The last merge left its deflated pairs unsorted: put them in order.
    for i in range(n):
        if i % DC_POLL_COLUMNS == 0 and interrupted(it):
            return -2000
        j = indxq[i] - 1
        work[i] = d[j]
        blas.dcopy(&n, Q + <Py_ssize_t>j * ldq, &one, work + <Py_ssize_t>n * (i + 1), &one)
    blas.dcopy(&n, work, &one, d, &one)
    for i in range(n):
        if i % DC_POLL_COLUMNS == 0 and interrupted(it):
            return -2000
        memcpy(Q + <Py_ssize_t>i * ldq, work + <Py_ssize_t>n * (i + 1), n * sizeof(double))
    return 0


cdef int _zero_polled(double* a, size_t count, Interrupt* it) noexcept nogil:
    """a[0:count] = 0, polled between pieces of 2^20 doubles: the first write to fresh pages
    runs at about 0.5 GB/s here, so one memset of an n x n workspace at n = 8192 took 1 s.
    Returns -2000 once interrupted."""
    cdef size_t start = 0, piece = 1 << 20
    while start < count:
        if interrupted(it):
            return -2000
        memset(a + start, 0, min(piece, count - start) * sizeof(double))
        start += piece
    return 0


cdef int _tridiagonal_eigh(int n, double* d, double* e, double* Z, int ldz, double* work,
                           int* iwork, Interrupt* it) noexcept nogil:
    """LAPACK's dstedc with COMPZ = 'I': all eigenpairs of the symmetric tridiagonal (d, e),
    eigenvalues ascending into d, eigenvectors into the columns of the column-major n x n Z.
    The matrix is split where an off-diagonal entry is negligible; each block of more than
    DC_LEAF rows is scaled and solved by _divide_and_conquer, the others by dsteqr.  work holds
    4 n + n^2 doubles, iwork 3 + 5 n ints.  Returns LAPACK's info, -2000 once interrupted,
    NON_FINITE for a NaN or inf in d or e."""
    cdef char ident = b'I', maxabs = b'M', general = b'G', epsc = b'E'
    cdef double done = 1.0, orgnrm, eps, p
    cdef int start, finish, m, m1, info = 0, izero = 0, one = 1, i, j, kmin
    # Z = I and the workspace written once, both polled (their pages are usually fresh).
    for j in range(n):
        if j % DC_POLL_COLUMNS == 0 and interrupted(it):
            return -2000
        memset(Z + <Py_ssize_t>j * ldz, 0, n * sizeof(double))
        Z[j + <Py_ssize_t>j * ldz] = 1.0
    if _zero_polled(work, 4 * <size_t>n + <size_t>n * n, it) != 0:
        return -2000
    orgnrm = lapack.dlanst(&maxabs, &n, d, e)
    if not orgnrm <= DBL_MAX:       # dlanst returns NaN or inf for such an entry
        return NON_FINITE
    if n <= DC_LEAF:
        lapack.dsteqr(&ident, &n, d, e, Z, &ldz, work, &info)
        return info
    if orgnrm == 0.0:
        return 0
    eps = lapack.dlamch(&epsc)
    start = 0
    while start < n:
        finish = start
        while finish < n - 1 and abs(e[finish]) > eps * sqrt(abs(d[finish])) * sqrt(
                abs(d[finish + 1])):
            finish += 1
        m = finish - start + 1
        if m > DC_LEAF:
            m1 = m - 1
            orgnrm = lapack.dlanst(&maxabs, &m, d + start, e + start)
            lapack.dlascl(&general, &izero, &izero, &orgnrm, &done, &m, &one, d + start, &m,
                          &info)
            lapack.dlascl(&general, &izero, &izero, &orgnrm, &done, &m1, &one, e + start, &m1,
                          &info)
            info = _divide_and_conquer(m, d + start, e + start,
                                       Z + start + <Py_ssize_t>start * ldz, ldz, work, iwork,
                                       it)
            if info != 0:
                return info
            lapack.dlascl(&general, &izero, &izero, &done, &orgnrm, &m, &one, d + start, &m,
                          &info)
        elif m > 1:
            lapack.dsteqr(&ident, &m, d + start, e + start,
                          Z + start + <Py_ssize_t>start * ldz, &ldz, work, &info)
            if info != 0:
                return info
        start = finish + 1
    # The blocks' eigenvalues into one ascending order (selection sort: fewest swaps).
    for i in range(n - 1):
        if i % DC_POLL_COLUMNS == 0 and interrupted(it):
            return -2000
        kmin, p = i, d[i]
        for j in range(i + 1, n):
            if d[j] < p:
                kmin, p = j, d[j]
        if kmin != i:
            d[kmin] = d[i]
            d[i] = p
            blas.dswap(&n, Z + <Py_ssize_t>i * ldz, &one, Z + <Py_ssize_t>kmin * ldz, &one)
    return 0


cdef int gesdd(int m, int n, double* A, int lda, double* s, double* U, int ldu,
               double* VT, int ldvt) noexcept nogil:
    """Thin SVD A = U diag(s) VT of a row-major m x n matrix; k = min(m, n), s descending.

    U is m x k (ldu >= k), VT is k x n (ldvt >= n), both row-major.  A is destroyed.
    """
    # The column-major view of A is A^T = VT^T diag(s) U^T, so LAPACK's "U" is our VT and its
    # "VT" is our U, each already in the row-major layout we want: no copies.
    cdef char jobz = b'S'
    cdef int k = min(m, n), lwork = -1, info = 0
    cdef double wq = 0.0
    cdef double* work
    cdef int* iwork
    if k == 0:
        return 0
    iwork = <int*>malloc(8 * k * sizeof(int))
    if iwork == NULL:
        return -1000
    lapack.dgesdd(&jobz, &n, &m, A, &lda, s, VT, &ldvt, U, &ldu, &wq, &lwork, iwork, &info)
    lwork = <int>wq + 1
    work = <double*>malloc(lwork * sizeof(double))
    if work == NULL:
        info = -1000
    else:
        lapack.dgesdd(&jobz, &n, &m, A, &lda, s, VT, &ldvt, U, &ldu, work, &lwork, iwork, &info)
    free(work)
    free(iwork)
    return info


cdef int _lq_polled(int m, int n, double* A, int lda, double* tau, double* work,
                    Interrupt* it) noexcept nogil:
    """LAPACK's dgelqf (column-major m x n A = L Q, m <= n here) with its panel loop written
    out and polled between panels: dgelq2 on 32 rows, then their block reflector applied to
    the rows below by dlarfb (2.6e9 flops at m = 512, n = 40 000).  Blocked to the last panel
    (dgelqf leaves its last 128 rows to dgelq2, 2.6e9 flops of matrix-vector products at that
    size).  work holds m * 32 doubles.  Returns -2000 once interrupted."""
    cdef int k = min(m, n), i = 0, ib, rows, cols, info = 0, nb = EIG_BLOCK
    cdef char right = b'R', nt = b'N', fwd = b'F', rowwise = b'R'
    while i < k:
        if interrupted(it):
            return -2000
        ib = min(k - i, nb)
        cols = n - i
        lapack.dgelq2(&ib, &cols, A + i + <Py_ssize_t>i * lda, &lda, tau + i, work, &info)
        if i + ib < m:
            lapack.dlarft(&fwd, &rowwise, &cols, &ib, A + i + <Py_ssize_t>i * lda, &lda,
                          tau + i, work, &m)
            rows = m - i - ib
            lapack.dlarfb(&right, &nt, &fwd, &rowwise, &rows, &cols, &ib,
                          A + i + <Py_ssize_t>i * lda, &lda, work, &m,
                          A + i + ib + <Py_ssize_t>i * lda, &lda, work + ib, &m)
        i += nb
    return info


cdef int _orglq_polled(int m, int n, double* A, int lda, const double* tau, double* work,
                       Interrupt* it) noexcept nogil:
    """LAPACK's dorglq for k = m reflectors (the m x n Q with orthonormal rows from
    _lq_polled's output, in place), its block loop written out and polled between blocks of 32
    rows, blocked to the first one.  work holds m * 32 doubles.  Returns -2000 once
    interrupted."""
    cdef int nb = EIG_BLOCK, i, j, r, ib, rows, cols, info = 0
    cdef char right = b'R', trans = b'T', fwd = b'F', rowwise = b'R'
    i = ((m - 1) // nb) * nb          # 0-based first row of the last block
    while i >= 0:
        if interrupted(it):
            return -2000
        ib = min(nb, m - i)
        cols = n - i
        if i + ib < m:
            # H^T of this block applied to the rows below it, from the right.
            lapack.dlarft(&fwd, &rowwise, &cols, &ib, A + i + <Py_ssize_t>i * lda, &lda,
                          <double*>tau + i, work, &m)
            rows = m - i - ib
            lapack.dlarfb(&right, &trans, &fwd, &rowwise, &rows, &cols, &ib,
                          A + i + <Py_ssize_t>i * lda, &lda, work, &m,
                          A + i + ib + <Py_ssize_t>i * lda, &lda, work + ib, &m)
        lapack.dorgl2(&ib, &cols, &ib, A + i + <Py_ssize_t>i * lda, &lda, <double*>tau + i,
                      work, &info)
        for j in range(i):
            for r in range(i, i + ib):
                A[r + <Py_ssize_t>j * lda] = 0.0
        i -= nb
    return info


cdef int lstsq_svd(int m, int n, int nrhs, const double* A, int lda, const double* B, int ldb,
                   double rcond, double* X, int ldx, int* rank, Interrupt* it) noexcept nogil:
    """Minimum-norm least squares X = argmin ||A X - B||_F through the SVD of A, polled for
    Ctrl-C throughout (``it``; NULL never interrupts).

    Singular values at or below rcond * s_max are treated as zero (a relative tolerance, as the
    methods' least-squares steps require).  A and B are not modified.  X is n x nrhs.

    A = U S V^T from the symmetric eigenpairs of [[0, M], [M^T, 0]] (syevd, polled), whose
    largest min(p, q) eigenvalues are the singular values of the p x q M, with eigenvectors
    [u; v] / sqrt(2).  M = A when m < n; otherwise M = R of A = Q R
    (Householder, _lq_polled), which has A's singular values and right vectors, and A's left
    vectors are A V S^-1.  X = V S^+ U^T B, as polled tiled products: every step is a polled
    one (dgesdd was one call, 0.9 s for a 3072 x 1024 A).
    Returns LAPACK's info, -1000 out of memory, -2000 once interrupted.
    """
    cdef int k = min(m, n), p, q, o, i, j, t, info = 0, found = 0
    cdef bint tall = m >= n
    cdef Py_ssize_t o_sz
    cdef double* buf = NULL
    cdef double* Ac = NULL
    cdef double* tau = NULL
    cdef double* work = NULL
    cdef double* J
    cdef double* Z
    cdef double* w
    cdef double* Y
    cdef double* P
    cdef const double* M = A
    cdef int ldm = lda
    cdef double cut, inv, sv
    rank[0] = 0
    if n == 0 or nrhs == 0:
        return 0
    if k == 0:
        for i in range(n):
            for j in range(nrhs):
                X[<Py_ssize_t>i * ldx + j] = 0.0
        return 0
    p, q = (n, n) if tall else (m, n)
    o = p + q
    o_sz = <Py_ssize_t>o * o
    if tall:
        Ac = <double*>malloc(<size_t>m * n * sizeof(double))
        tau = <double*>malloc(n * sizeof(double))
        work = <double*>malloc(<size_t>n * EIG_BLOCK * sizeof(double))
        if Ac == NULL or tau == NULL or work == NULL:
            info = -1000
        else:
            for i in range(m):
                memcpy(Ac + <Py_ssize_t>i * n, A + <Py_ssize_t>i * lda, n * sizeof(double))
            # The column-major view of Ac is A^T = L Q' (n x m), so A = Q'^T L^T: R = L^T is
            # the upper triangle of Ac's first n rows.
            info = _lq_polled(n, m, Ac, n, tau, work, it)
        free(work)
        free(tau)
        M, ldm = Ac, n
    if info == 0:
        buf = <double*>malloc((2 * o_sz + o + <Py_ssize_t>k * nrhs
                               + (<Py_ssize_t>m * k if tall else 0)) * sizeof(double))
        if buf == NULL:
            info = -1000
    if info == 0:
        J, Z = buf, buf + o_sz
        w = Z + o_sz
        Y = w + o
        P = Y + <Py_ssize_t>k * nrhs
        # The lower triangle of [[0, M], [M^T, 0]]; M = R keeps only its upper triangle.
        memset(J, 0, o_sz * sizeof(double))
        for j in range(q):
            for i in range(min(p, j + 1) if tall else p):
                J[<Py_ssize_t>(p + j) * o + i] = M[<Py_ssize_t>i * ldm + j]
        info = syevd(o, J, o, -1, -1, w, Z, o, &found, it)
    if info == 0:
        # Rows o - k .. o - 1 of Z: the eigenvectors of the k largest eigenvalues (ascending),
        # [u; v] / sqrt(2) each; Zu and Zv below are those halves, without the sqrt(2).
        if tall:
            # U^T B = S^-1 V^T A^T B = S^-1 (A Zv^T)^T B sqrt(2), with P = A Zv^T (m x k).
            gemm_tiled(False, True, m, k, n, 1.0, A, lda, Z + <Py_ssize_t>(o - k) * o + p, o,
                       0.0, P, k, 1, it)
            gemm_tiled(True, False, k, nrhs, m, 1.0, P, k, B, ldb, 0.0, Y, nrhs, 1, it)
        else:
            # U^T B = Zu B sqrt(2).
            gemm_tiled(False, False, k, nrhs, p, 1.0, Z + <Py_ssize_t>(o - k) * o, o, B, ldb,
                       0.0, Y, nrhs, 1, it)
        # X = V S^+ (U^T B) = Zv^T Y times 2 / s (2 / s^2 for the tall form).
        cut = rcond * w[o - 1]
        for t in range(k):
            sv = w[o - k + t]
            if sv > cut and sv > 0.0:
                inv = 2.0 / (sv * sv) if tall else 2.0 / sv
                rank[0] += 1
            else:
                inv = 0.0
            for j in range(nrhs):
                Y[<Py_ssize_t>t * nrhs + j] *= inv
        gemm_tiled(True, False, q, nrhs, k, 1.0, Z + <Py_ssize_t>(o - k) * o + p, o, Y, nrhs,
                   0.0, X, ldx, 1, it)
        if interrupted(it):
            info = -2000
    free(buf)
    free(Ac)
    return info


cdef int qr_thin(int m, int n, double* A, int lda, double* R, int ldr,
                 Interrupt* it) noexcept nogil:
    """Thin QR A = Q R of a row-major m x n matrix with m >= n (Householder: dgelqf's and
    dorglq's block loops, polled between blocks of 32 reflectors; ``it`` NULL never
    interrupts).

    Q (m x n, orthonormal columns) overwrites A; R (n x n, upper triangular, row stride ldr) is
    written with zeros below the diagonal.  Returns LAPACK's info, -1000 out of memory, -2000
    once interrupted.
    """
    # The column-major view of A is A^T (n x m).  Its LQ factorisation A^T = L Q' gives
    # A = Q'^T L^T: R = L^T sits in the upper triangle of A's first n rows (row-major view), and
    # dorglq turns the reflectors into Q', whose column-major storage is Q row-major: no copies.
    cdef int info = 0, i, j
    cdef double* tau
    cdef double* work
    if n == 0 or m == 0:
        return 0
    tau = <double*>malloc(n * sizeof(double))
    work = <double*>malloc(<size_t>n * EIG_BLOCK * sizeof(double))
    if tau == NULL or work == NULL:
        info = -1000
    else:
        info = _lq_polled(n, m, A, lda, tau, work, it)
        if info == 0:
            for j in range(n):
                for i in range(n):
                    R[<Py_ssize_t>j * ldr + i] = A[<Py_ssize_t>j * lda + i] if i >= j else 0.0
            info = _orglq_polled(n, m, A, lda, tau, work, it)
    free(work)
    free(tau)
    return info


cdef void mirror_triangle(int n, floating* A, int lda, bint from_lower) noexcept nogil:
    """Copy one strict triangle of a row-major square matrix onto the other, transposed, in
    64 x 64 blocks.  Writes run along rows of the destination triangle and reads across rows of
    the source (strided stores are several times slower than strided loads here); blocks keep
    both in cache.  The diagonal is untouched."""
    cdef Py_ssize_t r0, c0, r, c
    for r0 in range(0, n, 64):
        # Destination blocks: right of the diagonal block for the upper triangle, left for
        # the lower one.
        for c0 in range(r0 if from_lower else 0, n if from_lower else r0 + 1, 64):
            for r in range(r0, min(r0 + 64, n)):
                for c in range(max(c0, r + 1) if from_lower else c0,
                               min(c0 + 64, n) if from_lower else min(c0 + 64, r)):
                    A[r * lda + c] = A[c * lda + r]


cdef void symmetrize_from_lower(int n, double* A, int lda) noexcept nogil:
    """Copy the lower triangle of a row-major square matrix onto its upper triangle."""
    mirror_triangle(n, A, lda, True)


# ----------------------------------------------------------------------------------------------
# Deterministic parallel level 3 (see _linalg.pxd).  Why not threaded OpenBLAS: its results change
# with the thread count (different splits and, for dpotrf, a different algorithm), and threaded
# dsyrk has crashed with SIGSEGV (dsyrk_thread_UT, scipy-openblas 0.3.x, n ~ 16000 on this
# project's 2-core AMD EPYC machines), which is what made plain dpotrf fail near n = 18000.
# Single-threaded calls on bounded tiles have neither problem.
# ----------------------------------------------------------------------------------------------

cdef inline int _n_tiles(int n) noexcept nogil:
    return (n + TILE - 1) // TILE


cdef inline int _lower_tile_row(int t) noexcept nogil:
    """Row bi of lower tile number t, the tiles (bi, bj), bj <= bi, numbered row by row:
    t = bi (bi + 1) / 2 + bj."""
    cdef int bi = <int>((sqrt(8.0 * t + 1.0) - 1.0) / 2.0)
    if (bi + 1) * (bi + 2) // 2 <= t:      # guard the float estimate at exact boundaries
        bi = bi + 1
    elif bi * (bi + 1) // 2 > t:
        bi = bi - 1
    return bi


cdef inline int _lower_tile_col(int t) noexcept nogil:
    """Column bj of lower tile number t (see _lower_tile_row)."""
    cdef int bi = _lower_tile_row(t)
    return t - bi * (bi + 1) // 2


cdef bint gemm_split(bint trans_a, bint trans_b, int m, int n, int k, double alpha,
                     const floating* A, int lda, const floating* B, int ldb,
                     double beta, floating* C, int ldc, Interrupt* it) noexcept nogil:
    """gemm with the inner dimension summed in K_SPLIT pieces, in order, checking for an
    interrupt between pieces; returns true when interrupted (C is then unfinished).

    One column (gemv, cheap whatever k) is never split.
    """
    cdef int k0 = 0, kb
    if k <= K_SPLIT or n == 1:
        gemm(trans_a, trans_b, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc)
        return False
    while k0 < k:
        if interrupted(it):
            return True
        kb = min(<int>K_SPLIT, k - k0)
        # Columns k0.. of op(A) are rows of A when transposed; rows k0.. of op(B) likewise.
        gemm(trans_a, trans_b, m, n, kb, alpha,
             (A + <Py_ssize_t>k0 * lda) if trans_a else (A + k0), lda,
             (B + k0) if trans_b else (B + <Py_ssize_t>k0 * ldb), ldb,
             beta if k0 == 0 else 1.0, C, ldc)
        k0 += kb
    return False


cdef void gemm_tiled(bint trans_a, bint trans_b, int m, int n, int k, double alpha,
                     const floating* A, int lda, const floating* B, int ldb,
                     double beta, floating* C, int ldc, int n_threads, Interrupt* it) noexcept nogil:
    """gemm with the m x n output cut into TILE x TILE tiles computed in parallel."""
    cdef int tn = _n_tiles(n), t, r0, c0
    cdef const floating* Ablk
    cdef const floating* Bblk
    if m == 0 or n == 0:
        return
    for t in prange(_n_tiles(m) * tn, nogil=True, num_threads=n_threads, schedule="dynamic"):
        if interrupted(it):
            continue
        r0 = (t // tn) * TILE
        c0 = (t % tn) * TILE
        # Rows r0.. of op(A): rows of A, or columns of A when transposed; likewise for op(B).
        Ablk = (A + r0) if trans_a else (A + <Py_ssize_t>r0 * lda)
        Bblk = (B + <Py_ssize_t>c0 * ldb) if trans_b else (B + c0)
        gemm_split(trans_a, trans_b, min(TILE, m - r0), min(TILE, n - c0), k, alpha, Ablk, lda,
                   Bblk, ldb, beta, C + <Py_ssize_t>r0 * ldc + c0, ldc, it)


cdef void syrk_tiled(bint trans, int n, int k, double alpha, const floating* A, int lda,
                     double beta, floating* C, int ldc, int n_threads, Interrupt* it) noexcept nogil:
    """Lower triangle of C = alpha op(A) op(A)^T + beta C: dsyrk on diagonal tiles, dgemm below.

    trans=False: A is n x k.  trans=True: A is k x n.  A long inner dimension is summed in
    K_SPLIT pieces (as gemm_split).
    """
    cdef int nt = _n_tiles(n), t, r0, c0, k0, kb
    if n == 0:
        return
    for t in prange(nt * (nt + 1) // 2, nogil=True, num_threads=n_threads, schedule="dynamic"):
        if interrupted(it):
            continue
        r0 = _lower_tile_row(t) * TILE
        c0 = _lower_tile_col(t) * TILE
        if r0 == c0:
            k0 = 0
            while True:
                kb = min(<int>K_SPLIT, k - k0) if k > K_SPLIT else k
                syrk(True, trans, min(TILE, n - r0), kb, alpha,
                     (A + <Py_ssize_t>k0 * lda + r0) if trans else (A + <Py_ssize_t>r0 * lda + k0),
                     lda, beta if k0 == 0 else 1.0, C + <Py_ssize_t>r0 * ldc + r0, ldc)
                k0 = k0 + kb
                if k0 >= k or interrupted(it):
                    break
        else:
            gemm_split(trans, not trans, min(TILE, n - r0), TILE, k, alpha,
                       (A + r0) if trans else (A + <Py_ssize_t>r0 * lda), lda,
                       (A + c0) if trans else (A + <Py_ssize_t>c0 * lda), lda, beta,
                       C + <Py_ssize_t>r0 * ldc + c0, ldc, it)


cdef void trsm_tiled(bint left, bint lower, bint trans, bint unit_diag, int m, int n,
                     double alpha, const floating* A, int lda, floating* B, int ldb,
                     int n_threads, Interrupt* it) noexcept nogil:
    """trsm with B (m x n) cut into independent panels: column panels for a left solve (each
    column of X depends only on the same column of B), row panels for a right solve.

    A panel costs about (side of A)^2 x (panel width) flops; panels are narrowed below TILE for
    a large A so that each stays near 5e8 flops (a unit of work between interrupt checks; a
    row of X depends only on the same row of B, so the width changes no result), and a left
    solve with a large A and many columns goes by blocked substitution (trsm_left_rows).
    """
    cdef int t, p0, w
    if m == 0 or n == 0:
        return
    if left and (n <= TILE or m > 4 * TILE):
        # n <= TILE: one column panel would leave every thread but one idle (a CG step solves
        # one to a few right-hand sides): parallel over row blocks instead.  m > 4 TILE: a
        # column panel would be one long call.  The choice depends on the shape only, so the
        # result is the same for any thread count.
        trsm_left_rows(lower, trans, unit_diag, m, n, alpha, A, lda, B, ldb, n_threads, it)
    elif left:
        for t in prange(_n_tiles(n), nogil=True, num_threads=n_threads, schedule="dynamic"):
            if interrupted(it):
                continue
            p0 = t * TILE
            trsm(True, lower, trans, unit_diag, m, min(TILE, n - p0), alpha, A, lda, B + p0, ldb)
    else:
        w = _panel_rows(n)
        for t in prange((m + w - 1) // w, nogil=True, num_threads=n_threads, schedule="dynamic"):
            if interrupted(it):
                continue
            p0 = t * w
            trsm(False, lower, trans, unit_diag, min(w, m - p0), n, alpha, A, lda,
                 B + <Py_ssize_t>p0 * ldb, ldb)


cdef inline int _panel_rows(int n) noexcept nogil:
    """Rows of a right-solve panel against an n x n triangle: TILE up to n = 2 TILE, then
    fewer (a multiple of 8) so that a panel stays near TILE (2 TILE)^2 = 5e8 flops."""
    cdef Py_ssize_t big = 2 * TILE
    if n <= big:
        return TILE
    return <int>max(8, ((<Py_ssize_t>TILE * big * big) // (<Py_ssize_t>n * n)) // 8 * 8)


cdef void trsm_left_rows(bint lower, bint trans, bint unit_diag, int m, int n, double alpha,
                         const floating* A, int lda, floating* B, int ldb,
                         int n_threads, Interrupt* it) noexcept nogil:
    """Left solve op(A) X = alpha B by blocked substitution, parallel over row blocks of B.

    Step by step in substitution order, the next SOLVE_BLOCK rows of X are solved against
    their diagonal block (one small dtrsm), then every remaining row block of B subtracts its
    product with them (one dgemm, or dgemv for one column, per block, spread over the threads).
    Each row block sees its updates in the same order for any thread count, and the matrix is
    read once, as by dtrsv: a memory-bound solve then uses the bandwidth of every core.
    """
    cdef bint forward = lower != trans        # op(A) lower triangular: rows first to last
    cdef int n_blocks = (m + SOLVE_BLOCK - 1) // SOLVE_BLOCK
    cdef int step, i, i0, ilen, t, j, j0, jlen, rest
    cdef Py_ssize_t r, c
    if alpha != 1.0:
        for r in range(m):
            for c in range(n):
                B[r * ldb + c] *= <floating>alpha
    for step in range(n_blocks):
        if interrupted(it):
            return
        i = step if forward else n_blocks - 1 - step
        i0 = i * SOLVE_BLOCK
        ilen = min(<int>SOLVE_BLOCK, m - i0)
        trsm(True, lower, trans, unit_diag, ilen, n, 1.0, A + <Py_ssize_t>i0 * lda + i0, lda,
             B + <Py_ssize_t>i0 * ldb, ldb)
        rest = n_blocks - 1 - i if forward else i
        for t in prange(rest, nogil=True, num_threads=n_threads, schedule="static"):
            if interrupted(it):
                continue
            j = i + 1 + t if forward else t
            j0 = j * SOLVE_BLOCK
            jlen = min(<int>SOLVE_BLOCK, m - j0)
            # B_j -= op(A)_ji X_i, where op(A)_ji is A_ij^T when transposed.
            if trans:
                gemm(True, False, jlen, n, ilen, -1.0, A + <Py_ssize_t>i0 * lda + j0, lda,
                     B + <Py_ssize_t>i0 * ldb, ldb, 1.0, B + <Py_ssize_t>j0 * ldb, ldb)
            else:
                gemm(False, False, jlen, n, ilen, -1.0, A + <Py_ssize_t>j0 * lda + i0, lda,
                     B + <Py_ssize_t>i0 * ldb, ldb, 1.0, B + <Py_ssize_t>j0 * ldb, ldb)


cdef extern from "_mixed_defs.h" nogil:
    double hk_dot_mixed(const float* a, const double* x, Py_ssize_t incx, Py_ssize_t n)
    void hk_axpy_mixed(const float* a, double x, double* y, Py_ssize_t incy, Py_ssize_t n)


cdef inline void _mixed_block_solve(bint lower, bint trans, int m, int n, const float* A,
                                    int lda, const double* diag, double* B, int ldb) noexcept nogil:
    """op(A) X = B for one m x m diagonal block of a float32 triangle, in double arithmetic,
    its diagonal taken from ``diag`` (double) instead of A's; along A's rows only, as
    trsm_left_rows_mixed (a dot product per row, or an axpy per solved row when transposed)."""
    cdef bint forward = lower != trans
    cdef int step, r, c, lo, width
    for step in range(m):
        r = step if forward else m - 1 - step
        if not trans:
            lo = 0 if forward else r + 1
            width = r if forward else m - 1 - r
            for c in range(n):
                B[<Py_ssize_t>r * ldb + c] = (B[<Py_ssize_t>r * ldb + c] - hk_dot_mixed(
                    A + <Py_ssize_t>r * lda + lo, B + <Py_ssize_t>lo * ldb + c, ldb, width)) \
                    / diag[r]
        else:
            # Row r of A holds column r of op(A): x_r is final, subtract it from the rest.
            lo = r + 1 if forward else 0
            width = m - 1 - r if forward else r
            for c in range(n):
                B[<Py_ssize_t>r * ldb + c] /= diag[r]
                hk_axpy_mixed(A + <Py_ssize_t>r * lda + lo, B[<Py_ssize_t>r * ldb + c],
                              B + <Py_ssize_t>lo * ldb + c, ldb, width)


cdef void trsm_left_rows_mixed(bint lower, bint trans, int m, int n, const float* A, int lda,
                               const double* diag, double* B, int ldb, int n_threads,
                               Interrupt* it) noexcept nogil:
    """op(A) X = B for a float32 triangle A and double B (m x n), in double arithmetic, A's
    diagonal taken from ``diag`` (_mixed_defs.h widens each float as it is read).  A
    mixed-precision solver's preconditioner is then one fixed linear operator, the exact
    inverse (to double rounding) of the float32 factor it stores, read at 4 bytes an entry.

    Blocked substitution, SOLVE_BLOCK rows a step, reading A along its rows only, in long
    contiguous runs (blocks of 256 floats a row, 32 KiB apart, left the prefetchers idle: half
    the speed of dtrsv).  Without transpose each row of the step first subtracts its dot
    product with every solved entry (parallel over the rows); transposed, each solved row of
    the step is subtracted from the rest of B (parallel over column pieces of it, every entry
    updated in the same order for any thread count)."""
    cdef bint forward = lower != trans
    cdef int n_blocks = (m + SOLVE_BLOCK - 1) // SOLVE_BLOCK
    cdef int step, i, i0, i1, ilen, r, q, c, t, p0, plen, lo, width, piece, pieces
    for step in range(n_blocks):
        if interrupted(it):
            return
        i = step if forward else n_blocks - 1 - step
        i0 = i * SOLVE_BLOCK
        ilen = min(<int>SOLVE_BLOCK, m - i0)
        i1 = i0 + ilen
        # The solved entries: rows [0, i0) going forward, [i1, m) going backward.
        lo = 0 if forward else i1
        width = i0 if forward else m - i1
        if not trans and width > 0:
            for r in prange(i0, i1, nogil=True, num_threads=n_threads, schedule="static"):
                for c in range(n):
                    B[<Py_ssize_t>r * ldb + c] -= hk_dot_mixed(
                        A + <Py_ssize_t>r * lda + lo, B + <Py_ssize_t>lo * ldb + c, ldb, width)
        _mixed_block_solve(lower, trans, ilen, n, A + <Py_ssize_t>i0 * lda + i0, lda, diag + i0,
                           B + <Py_ssize_t>i0 * ldb, ldb)
        # Transposed: B_j -= A[q, j] X_q for the unsolved j (after i1 going forward).
        lo = i1 if forward else 0
        width = m - i1 if forward else i0
        if trans and width > 0:
            # One contiguous piece of each row per thread (a multiple of 16 entries).
            piece = max(512, (width + 16 * n_threads - 1) // (16 * n_threads) * 16)
            pieces = (width + piece - 1) // piece
            for t in prange(pieces, nogil=True, num_threads=n_threads, schedule="static"):
                p0 = lo + t * piece
                plen = min(piece, lo + width - p0)
                for q in range(i0, i1):
                    for c in range(n):
                        hk_axpy_mixed(A + <Py_ssize_t>q * lda + p0, B[<Py_ssize_t>q * ldb + c],
                                      B + <Py_ssize_t>p0 * ldb + c, ldb, plen)


cdef int potrf_tiled(int n, floating* A, int lda, int n_threads, Interrupt* it) noexcept nogil:
    """Right-looking blocked Cholesky (lower, row-major) built from the tiled routines.

    Each step factors a CHOL_BLOCK diagonal block with dpotrf, solves the panel below it and
    updates the trailing matrix; no BLAS/LAPACK call sees more than max(TILE, CHOL_BLOCK) rows
    of output.  Returns info as dpotrf would (the order of the failing leading minor); when
    interrupted (it.raised), 0 with A unfinished.
    """
    cdef int k0, b, rest, info
    cdef floating* A11
    cdef floating* A21
    k0 = 0
    while k0 < n:
        if interrupted(it):
            return 0
        b = min(<int>CHOL_BLOCK, n - k0)
        A11 = A + <Py_ssize_t>k0 * lda + k0
        info = potrf(b, A11, lda)
        if info != 0:
            return info + k0
        rest = n - k0 - b
        if rest > 0:
            A21 = A + <Py_ssize_t>(k0 + b) * lda + k0
            trsm_tiled(False, True, True, False, rest, b, 1.0, A11, lda, A21, lda, n_threads, it)
            syrk_tiled(False, rest, b, -1.0, A21, lda, 1.0, A21 + b, lda, n_threads, it)
        k0 += b
    return 0


cdef void potri_tiled(int n, const double* L, int ldl, double* Z, int ldz, double* O, int ldo,
                      int n_threads, Interrupt* it) noexcept nogil:
    """O = (L L^T)^{-1} (full, row-major) from the lower factor L, with Z (n x n) as scratch.

    Two parallel passes over INV_TILE-wide panels: Z = L^{-1}, each column panel j a triangular
    solve of the trailing system L[j0:, j0:] Z[j0:, j] = I[j0:, j] (Z is lower triangular, so
    rows above j0 are neither written nor read); then each lower tile (I, J) of
    O = Z^T Z is Z[i0:, I]^T Z[i0:, J] (rows above i0 of Z's panel I are zero).  2 n^3 / 3 flops,
    as LAPACK's dpotri, but in single-threaded BLAS calls of fixed shapes: bitwise the same for
    any n_threads.  O may be L's memory (L is not read after the first pass); Z may not.
    """
    cdef int nt = (n + INV_TILE - 1) // INV_TILE, t, j0, w, i0, r, c
    if n == 0:
        return
    # Largest panels first (dynamic schedule): panel t costs about (n - t INV_TILE)^2 INV_TILE.
    for t in prange(nt, nogil=True, num_threads=n_threads, schedule="dynamic"):
        if interrupted(it):
            continue
        j0 = t * INV_TILE
        w = min(<int>INV_TILE, n - j0)
        for r in range(j0, n):
            for c in range(j0, j0 + w):
                Z[<Py_ssize_t>r * ldz + c] = 1.0 if r == c else 0.0
        trsm(True, True, False, False, n - j0, w, 1.0, L + <Py_ssize_t>j0 * ldl + j0, ldl,
             Z + <Py_ssize_t>j0 * ldz + j0, ldz)
    if interrupted(it):
        return
    # Lower tiles (bi, bj), bj <= bi, numbered row by row (_lower_tile_row).
    for t in prange(nt * (nt + 1) // 2, nogil=True, num_threads=n_threads, schedule="dynamic"):
        if interrupted(it):
            continue
        i0 = _lower_tile_row(t) * INV_TILE
        j0 = _lower_tile_col(t) * INV_TILE
        gemm_split(True, False, min(<int>INV_TILE, n - i0), min(<int>INV_TILE, n - j0), n - i0,
                   1.0, Z + <Py_ssize_t>i0 * ldz + i0, ldz, Z + <Py_ssize_t>i0 * ldz + j0, ldz,
                   0.0, O + <Py_ssize_t>i0 * ldo + j0, ldo, it)
    symmetrize_from_lower(n, O, ldo)


cdef int lauum_upper_to_lower(int n, floating* A, int lda, double alpha, floating* diag,
                              int n_threads, Interrupt* it) noexcept nogil:
    """alpha T T^T for the upper triangle T of A (diagonal included), T left unchanged: its strict
    lower triangle overwrites A's, its diagonal goes to diag.  Returns -1 if the per-thread
    scratch could not be allocated, else 0.

    LAPACK's dlauum forms U U^T in U's own triangle; this writes it into the other one, so that
    T and a factor of the product share one n x n array (FALKON's preconditioner).  Lower tile
    (I, J) is sum_{K >= I} T[I, K] T[J, K]^T: the K = I term by dtrmm with T's diagonal tile
    (only its upper part is read), the rest by one dgemm over the columns right of tile I.
    T's tiles are all read from the upper triangle and the products written to the strict
    lower one (the diagonal to diag), so tiles run in parallel; n^3 / 3 flops in single-threaded
    BLAS calls of fixed shapes: bitwise the same for any n_threads.
    """
    cdef int nt = (n + INV_TILE - 1) // INV_TILE, t, i0, j0, wi, wj, p, q, rest
    cdef floating* work
    cdef floating* X
    if n == 0:
        return 0
    work = <floating*>malloc(<size_t>n_threads * INV_TILE * INV_TILE * sizeof(floating))
    if work == NULL:
        return -1
    # Lower tiles (bi, bj), bj <= bi, row by row (_lower_tile_row): the costliest first.
    for t in prange(nt * (nt + 1) // 2, nogil=True, num_threads=n_threads, schedule="dynamic"):
        if interrupted(it):
            continue
        X = work + <Py_ssize_t>omp_get_thread_num() * INV_TILE * INV_TILE
        i0 = _lower_tile_row(t) * INV_TILE
        j0 = _lower_tile_col(t) * INV_TILE
        wi = min(<int>INV_TILE, n - i0)
        wj = min(<int>INV_TILE, n - j0)
        # X = T[J, I]^T (wi x wj); on the diagonal only T's upper part (X lower triangular).
        for p in range(wi):
            for q in range(wj):
                X[p * wj + q] = A[<Py_ssize_t>(j0 + q) * lda + i0 + p] \
                    if (i0 != j0 or q <= p) else 0.0
        trmm(True, False, False, False, wi, wj, 1.0, A + <Py_ssize_t>i0 * lda + i0, lda, X, wj)
        rest = n - i0 - wi
        if rest > 0:
            gemm(False, True, wi, wj, rest, 1.0, A + <Py_ssize_t>i0 * lda + i0 + wi, lda,
                 A + <Py_ssize_t>j0 * lda + i0 + wi, lda, 1.0, X, wj)
        for p in range(wi):
            for q in range(wj):
                if i0 != j0 or q < p:
                    A[<Py_ssize_t>(i0 + p) * lda + j0 + q] = <floating>(alpha * X[p * wj + q])
                elif q == p:
                    diag[i0 + p] = <floating>(alpha * X[p * wj + q])
    free(work)
    return 0


# ----------------------------------------------------------------------------------------------
# NumPy entry points.  Inputs are converted to C-contiguous float64 (copies where the routine
# overwrites its input), so callers never see their arrays modified.
# ----------------------------------------------------------------------------------------------

def check_info(int info, str routine):
    """Raise :class:`numpy.linalg.LinAlgError` (or MemoryError) for a non-zero LAPACK info."""
    if info == 0:
        return
    if info == -1000:
        raise MemoryError(f"{routine}: could not allocate LAPACK workspace")
    if info == NON_FINITE:
        raise np.linalg.LinAlgError(f"{routine}: the matrix has non-finite entries (NaN or "
                                    "inf)")
    if info < 0:
        raise np.linalg.LinAlgError(f"{routine}: argument {-info} had an illegal value "
                                    "(an hkern bug: please report it)")
    if routine in ("potrf", "cholesky"):
        raise np.linalg.LinAlgError(
            f"{routine}: the leading minor of order {info} is not positive definite; the matrix "
            "is not SPD to working precision (increase the regularisation or jitter)")
    if routine in ("getrf", "lu_factor"):
        raise np.linalg.LinAlgError(f"{routine}: the matrix is exactly singular "
                                    f"(U[{info - 1}, {info - 1}] == 0)")
    raise np.linalg.LinAlgError(f"{routine}: the algorithm failed to converge (info={info})")


cdef inline object _c64(A, copy=False):
    """A as a 2-D C-contiguous float64 array: a copy when copy=True (the routine overwrites
    it), else a view when possible, possibly read-only (bound to ``const`` memoryviews)."""
    return _c2d(A, np.float64, copy)


cdef inline object _c2d(A, dtype, copy=False):
    """A as a 2-D C-contiguous array of ``dtype`` (see _c64)."""
    arr = np.array(A, dtype=dtype, order="C", copy=True) if copy else \
        np.ascontiguousarray(A, dtype=dtype)
    if arr.ndim != 2:
        raise ValueError(f"expected a 2-D array, got shape {arr.shape}")
    return arr


def precision(*arrays):
    """float32 when every array is a float32 ndarray (the routines below then compute in
    single precision and return float32), else float64."""
    single = all(isinstance(a, np.ndarray) and a.dtype == np.float32 for a in arrays)
    return np.dtype(np.float32) if single else np.dtype(np.float64)


def _as_matrix_rhs(B, dtype=np.float64):
    B = np.array(B, dtype=dtype, order="C", copy=True)
    vector = B.ndim == 1
    return (B[:, None] if vector else B), vector


def _strided_rows(A, dtype):
    """True when A is a 2-D ``dtype`` array whose rows are contiguous (C order, or a block of
    columns of such a matrix, F[:, :k]): BLAS reads it in place with its row stride."""
    itemsize = np.dtype(dtype).itemsize
    return (isinstance(A, np.ndarray) and A.dtype == dtype and A.ndim == 2
            and A.strides[1] == itemsize and A.strides[0] % itemsize == 0
            and A.strides[0] >= A.shape[1] * itemsize)


def in_place(A, dtype):
    """A itself when the shim's products read it without a copy (its rows or its columns
    contiguous: :func:`matmul`, :func:`gram`), else a C-contiguous ``dtype`` copy."""
    if _strided_rows(A, dtype) or (_strided_rows(A.T, dtype) if isinstance(A, np.ndarray)
                                   else False):
        return A
    return _c2d(A, dtype)


def _operand(A, dtype, bint trans):
    """(A', row stride, trans'): for op(A) through gemm or syrk.  An A whose columns are
    contiguous (Fortran order, or a block of rows of such a matrix: a Nystrom factor stored
    transposed) is read in place as A^T with the flag flipped; otherwise :func:`_rows`."""
    if isinstance(A, np.ndarray) and A.ndim == 2 and A.shape[1] > 1 \
            and not _strided_rows(A, dtype) and _strided_rows(A.T, dtype):
        A, trans = A.T, not trans
    A, lda = _rows(A, dtype)
    return A, lda, trans


def _rows(A, dtype):
    """(A as a 2-D array of ``dtype`` whose rows are contiguous, its row stride in elements): a
    view of a row-strided A (a block of columns of a larger matrix, F[:, :k]) is used as it
    is, anything else converted to a C-contiguous copy."""
    itemsize = np.dtype(dtype).itemsize
    if not _strided_rows(A, dtype):
        A = _c2d(A, dtype)
    return A, max(1, A.strides[0] // itemsize, A.shape[1])


cdef int _matmul_into(bint trans_a, bint trans_b, double alpha, size_t a, int lda, size_t b,
                      int ldb, floating[:, ::1] c, int k, int n_threads) except -1:
    """c = alpha op(A) op(B) for A and B at addresses a and b (row strides lda, ldb) of c's
    precision."""
    cdef int m = c.shape[0], n = c.shape[1]
    cdef Interrupt it
    interrupt_init(&it)
    with blas_threads(1):
        with nogil:
            gemm_tiled(trans_a, trans_b, m, n, k, alpha, <const floating*>a, lda,
                       <const floating*>b, ldb, 0.0, &c[0, 0], n, n_threads, &it)
        if it.raised:
            reraise()
    return 0


def matmul(A, B, bint trans_a=False, bint trans_b=False, double alpha=1.0, int n_threads=1, out=None):
    """alpha * op(A) @ op(B) through gemm on a fixed tile grid (bitwise equal for any n_threads);
    in single precision (sgemm, float32 result) when A and B are both float32.

    A and B may be views with contiguous rows (a block of columns ``F[:, :k]``) or columns
    (Fortran order): they are read in place, not copied.  ``out``, if given, must be a C-contiguous array of the
    result's shape and dtype.
    """
    dtype = precision(A, B)
    A, lda, trans_a = _operand(A, dtype, trans_a)
    B, ldb, trans_b = _operand(B, dtype, trans_b)
    cdef int m = A.shape[1] if trans_a else A.shape[0]
    cdef int k = A.shape[0] if trans_a else A.shape[1]
    cdef int kb = B.shape[1] if trans_b else B.shape[0]
    cdef int n = B.shape[0] if trans_b else B.shape[1]
    if k != kb:
        raise ValueError(f"matmul: inner dimensions differ ({k} != {kb})")
    if out is None:
        out = np.zeros((m, n), dtype=dtype)
    elif out.shape != (m, n) or out.dtype != dtype or not out.flags.c_contiguous:
        raise ValueError(f"matmul: out must be a C-contiguous {dtype} array of shape {(m, n)}")
    if m == 0 or n == 0:
        return out
    if k == 0:
        out[...] = 0.0
        return out
    if dtype == np.float32:
        _matmul_into[float](trans_a, trans_b, alpha, A.ctypes.data, lda, B.ctypes.data, ldb,
                            out, k, n_threads)
    else:
        _matmul_into[double](trans_a, trans_b, alpha, A.ctypes.data, lda, B.ctypes.data, ldb,
                             out, k, n_threads)
    return out


def matvec(A, x, bint trans=False, double alpha=1.0):
    """alpha * op(A) @ x through dgemv."""
    cdef const double[:, ::1] a = _c64(A)
    cdef const double[::1] xv = np.ascontiguousarray(x, dtype=np.float64).ravel()
    cdef int m = a.shape[0], n = a.shape[1]
    if xv.shape[0] != (m if trans else n):
        raise ValueError("matvec: x has the wrong length")
    out = np.zeros(n if trans else m)
    cdef double[::1] y = out
    if m > 0 and n > 0:
        gemv(trans, m, n, alpha, &a[0, 0], n, &xv[0], 1, 0.0, &y[0], 1)
    return out


def rank1_update(A, x, y, double alpha=1.0):
    """A + alpha * x y^T through dger (A is not modified)."""
    cdef double[:, ::1] a = _c64(A, copy=True)
    cdef double[::1] xv = np.ascontiguousarray(x, dtype=np.float64).ravel()
    cdef double[::1] yv = np.ascontiguousarray(y, dtype=np.float64).ravel()
    if xv.shape[0] != a.shape[0] or yv.shape[0] != a.shape[1]:
        raise ValueError("rank1_update: x and y must match A's shape")
    if a.shape[0] > 0 and a.shape[1] > 0:
        ger(a.shape[0], a.shape[1], alpha, &xv[0], 1, &yv[0], 1, &a[0, 0], a.shape[1])
    return np.asarray(a)


cdef int _gram_into(bint trans, double alpha, size_t a, int lda, int k, floating[:, ::1] c,
                    int n_threads, double beta=0.0) except -1:
    """c = alpha op(A) op(A)^T + beta c for A at address a (row stride lda) of c's precision."""
    cdef int n = c.shape[0]
    cdef Interrupt it
    interrupt_init(&it)
    with blas_threads(1):
        with nogil:
            syrk_tiled(trans, n, k, alpha, <const floating*>a, lda, beta, &c[0, 0], n, n_threads,
                       &it)
        if it.raised:
            reraise()
        with nogil:
            mirror_triangle(n, &c[0, 0], n, True)
    return 0


def gram(A, bint trans=False, double alpha=1.0, int n_threads=1, out=None):
    """alpha * op(A) op(A)^T through tiled syrk/gemm, returned as a full symmetric matrix (in
    single precision when A is float32).  A may be a view with contiguous rows (a block of
    columns ``F[:, :k]``) or columns (Fortran order), read in place.

    ``out``: a symmetric C-contiguous array of the result's shape and A's dtype, to which the
    product is added (a Gram matrix summed over blocks of rows without a temporary).
    """
    dtype = precision(A)
    A, lda, trans = _operand(A, dtype, trans)
    cdef int n = A.shape[1] if trans else A.shape[0]
    cdef int k = A.shape[0] if trans else A.shape[1]
    cdef double beta = 1.0
    if out is None:
        out = np.zeros((n, n), dtype=dtype)
        beta = 0.0
    elif out.shape != (n, n) or out.dtype != dtype or not out.flags.c_contiguous:
        raise ValueError(f"gram: out must be a C-contiguous {dtype} array of shape {(n, n)}")
    if n > 0 and k > 0:
        if dtype == np.float32:
            _gram_into[float](trans, alpha, A.ctypes.data, lda, k, out, n_threads, beta)
        else:
            _gram_into[double](trans, alpha, A.ctypes.data, lda, k, out, n_threads, beta)
    return out


cdef int _solve_into(bint left, bint lower, bint trans, bint unit_diagonal,
                     const floating[:, ::1] t, floating[:, ::1] b, int n_threads) except -1:
    cdef Interrupt it
    interrupt_init(&it)
    with blas_threads(1):
        with nogil:
            trsm_tiled(left, lower, trans, unit_diagonal, b.shape[0], b.shape[1], 1.0,
                       &t[0, 0], t.shape[0], &b[0, 0], b.shape[1], n_threads, &it)
        if it.raised:
            reraise()
    return 0


def solve_triangular(T, B, bint lower=True, bint trans=False, bint unit_diagonal=False,
                     bint left=True,
                     int n_threads=1, bint overwrite_b=False):
    """Solve op(T) X = B (left) or X op(T) = B (right) through trsm (tiled over B); in single
    precision when T and B are both float32.  ``overwrite_b``: X is written over B when B is
    a C-contiguous 2-D array of the computation's dtype (no copy), else into a copy."""
    dtype = precision(T, B)
    T = _c2d(T, dtype)
    if overwrite_b and isinstance(B, np.ndarray) and B.ndim == 2 and B.dtype == dtype \
            and B.flags.c_contiguous and B.flags.writeable:
        vector = False
    else:
        B, vector = _as_matrix_rhs(B, dtype)
    if not left and vector:
        B = B.T.copy()
    cdef int nt = T.shape[0]
    if T.shape[1] != nt or (B.shape[0] if left else B.shape[1]) != nt:
        raise ValueError("solve_triangular: shapes do not match")
    if B.shape[0] > 0 and B.shape[1] > 0:
        if dtype == np.float32:
            _solve_into[float](left, lower, trans, unit_diagonal, T, B, n_threads)
        else:
            _solve_into[double](left, lower, trans, unit_diagonal, T, B, n_threads)
    return B.ravel() if vector else B


def solve_triangular_mixed(T, B, diag, bint lower=True, bint trans=False, int n_threads=1):
    """Solve op(T) X = B in double arithmetic for a float32 triangle T (C-contiguous, n x n,
    its diagonal replaced by the float64 ``diag``) and float64 B (n or n x k); returns X
    (float64, a new array).  The mixed-precision FALKON's preconditioner: a fixed operator,
    the exact inverse of the float32 factor it stores, read at 4 bytes an entry."""
    if not (isinstance(T, np.ndarray) and T.dtype == np.float32 and T.ndim == 2
            and T.flags.c_contiguous):
        raise ValueError("solve_triangular_mixed: T must be a C-contiguous float32 matrix")
    cdef int nt = T.shape[0]
    cdef const float[:, ::1] t = T
    cdef const double[::1] d = np.ascontiguousarray(diag, dtype=np.float64)
    X, vector = _as_matrix_rhs(B, np.float64)
    X = np.ascontiguousarray(X)        # a fresh copy already; (n, 1) views are contiguous
    if T.shape[1] != nt or X.shape[0] != nt or d.shape[0] != nt:
        raise ValueError("solve_triangular_mixed: shapes do not match")
    cdef double[:, ::1] x = X
    cdef Interrupt it
    interrupt_init(&it)
    if nt > 0 and X.shape[1] > 0:
        with nogil:
            trsm_left_rows_mixed(lower, trans, nt, x.shape[1], &t[0, 0], nt, &d[0], &x[0, 0],
                                 x.shape[1], n_threads, &it)
        if it.raised:
            reraise()
    return X.ravel() if vector else X


def triangular_multiply(T, B, bint lower=True, bint trans=False, bint unit_diagonal=False,
                        bint left=True):
    """op(T) @ B (left) or B @ op(T) (right) through dtrmm."""
    cdef const double[:, ::1] t = _c64(T)
    cdef double[:, ::1] b = _c64(B, copy=True)
    cdef int nt = t.shape[0]
    if t.shape[1] != nt or (b.shape[0] if left else b.shape[1]) != nt:
        raise ValueError("triangular_multiply: shapes do not match")
    if b.shape[0] > 0 and b.shape[1] > 0:
        with blas_threads(1), nogil:
            trmm(left, lower, trans, unit_diagonal, b.shape[0], b.shape[1], 1.0, &t[0, 0], nt,
                 &b[0, 0], b.shape[1])
    return np.asarray(b)


cdef int _potrf_tiled(floating[:, ::1] a, int n_threads) except -2:
    """potrf_tiled on a square C-contiguous array with the interrupt set up: LAPACK's info."""
    cdef int info
    cdef Interrupt it
    interrupt_init(&it)
    with blas_threads(1):
        with nogil:
            info = potrf_tiled(a.shape[0], &a[0, 0], a.shape[0], n_threads, &it)
        if it.raised:
            reraise()
    return info


def cholesky(A, overwrite=False, int n_threads=1):
    """Lower Cholesky factor of an SPD matrix (lower triangle read), tiled (see potrf_tiled);
    in single precision (spotrf, float32 factor) when A is float32.

    With ``overwrite=True`` and a C-contiguous writeable ``A`` of the working precision, the
    factor is computed in A's memory (no copy: the way to factorise a matrix that fills most
    of the memory).

    Raises
    ------
    numpy.linalg.LinAlgError
        If the matrix is not positive definite to working precision.
    """
    dtype = precision(A)
    in_place = overwrite and isinstance(A, np.ndarray) and A.dtype == dtype \
        and A.flags.c_contiguous and A.flags.writeable
    a = A if in_place else _c2d(A, dtype, copy=True)
    cdef int n = a.shape[0], info
    if a.shape[1] != n:
        raise ValueError("cholesky: the matrix must be square")
    if n == 0:
        return a
    info = _potrf_tiled[float](a, n_threads) if dtype == np.float32 else \
        _potrf_tiled[double](a, n_threads)
    check_info(info, "cholesky")
    if dtype == np.float32:
        _zero_upper[float](a)
    else:
        _zero_upper[double](a)
    return a


cdef int _zero_upper(floating[:, ::1] a) except -1:
    cdef Py_ssize_t i, j, n = a.shape[0]
    with nogil:
        for i in range(n):
            for j in range(i + 1, n):
                a[i, j] = 0.0
    return 0


cdef int _mirror(floating[:, ::1] a, bint from_lower) except -1:
    if a.shape[0] > 0:
        with nogil:
            mirror_triangle(a.shape[0], &a[0, 0], a.shape[0], from_lower)
    return 0


def symmetrize(A, bint from_lower=True):
    """Copy A's strict lower triangle onto its upper one (or the upper onto the lower), in place
    (C-contiguous float64 or float32 square A)."""
    if A.ndim != 2 or A.shape[0] != A.shape[1]:
        raise ValueError("symmetrize: the matrix must be square")
    if A.dtype == np.float32:
        _mirror[float](A, from_lower)
    else:
        _mirror[double](A, from_lower)
    return A


cdef int _lauum(floating[:, ::1] a, double scale, floating[::1] diag, int n_threads) except -1:
    cdef int info
    cdef Interrupt it
    interrupt_init(&it)
    with blas_threads(1):
        with nogil:
            info = lauum_upper_to_lower(a.shape[0], &a[0, 0], a.shape[0], scale, &diag[0],
                                        n_threads, &it)
        if it.raised:
            reraise()
    if info != 0:
        raise MemoryError("cholesky_pair: no memory for the per-thread tiles")
    return 0


def cholesky_pair(A, double scale, double lam, int n_threads=1, screen=None):
    """FALKON's two Cholesky factors of W in W's own memory (one n x n array for both).

    On entry A (C-contiguous float64, or float32 for single precision; overwritten) holds W,
    symmetric positive definite (lower triangle read).  On exit, with T the upper factor
    T^T T = W and B the lower factor B B^T = scale T T^T + lam I: A's strict upper triangle
    holds T's, A's lower triangle (diagonal included) holds B.  Returns T's diagonal (A's
    dtype), or None (A's upper triangle then still holds W's: the caller may restore the lower
    one and retry with a jitter) when W is not positive definite to working precision.  n^3
    flops in all (three n^3 / 3 steps: potrf, the triangular product T T^T
    (lauum_upper_to_lower, not a general GEMM), potrf).  ``screen``: a callable given T's
    diagonal after the first step; if it returns False the pair is not finished and False is
    returned (A then holds T, no longer W).
    """
    cdef int n = A.shape[0], info
    if A.ndim != 2 or A.shape[1] != n:
        raise ValueError("cholesky_pair: the matrix must be square")
    if A.dtype not in (np.float32, np.float64) or not A.flags.c_contiguous:
        raise ValueError("cholesky_pair: A must be a C-contiguous float64 or float32 array")
    single = A.dtype == np.float32
    if n == 0:
        return np.empty(0, dtype=A.dtype)
    info = _potrf_tiled[float](A, n_threads) if single else _potrf_tiled[double](A, n_threads)
    if info != 0:
        return None
    symmetrize(A, from_lower=True)         # T = L^T into the strict upper triangle
    t_diag = A.diagonal().copy()
    if screen is not None and not screen(t_diag):
        return False
    diag = np.empty(n, dtype=A.dtype)
    if single:
        _lauum[float](A, scale, diag, n_threads)
    else:
        _lauum[double](A, scale, diag, n_threads)
    A.flat[:: n + 1] = diag + lam
    info = _potrf_tiled[float](A, n_threads) if single else _potrf_tiled[double](A, n_threads)
    check_info(info, "cholesky_pair (scale T T^T + lam I)")
    return t_diag


def cho_solve(L, B, int n_threads=1):
    """Solve (L L^T) X = B given the lower Cholesky factor L (in single precision when L and B
    are both float32)."""
    dtype = precision(L, B)
    L = _c2d(L, dtype)
    B, vector = _as_matrix_rhs(B, dtype)
    cdef int n = L.shape[0]
    if L.shape[0] != L.shape[1] or B.shape[0] != n:
        raise ValueError("cho_solve: shapes do not match")
    if B.shape[0] > 0 and B.shape[1] > 0:
        if dtype == np.float32:
            _solve_into[float](True, True, False, False, L, B, n_threads)
            _solve_into[float](True, True, True, False, L, B, n_threads)
        else:
            _solve_into[double](True, True, False, False, L, B, n_threads)
            _solve_into[double](True, True, True, False, L, B, n_threads)
    return B.ravel() if vector else B


def cholesky_logdet(L):
    """log det(L L^T) = 2 sum(log diag L) from a lower Cholesky factor L."""
    return 2.0 * float(np.sum(np.log(np.diagonal(L))))


def cho_inverse(L, overwrite=False, int n_threads=1, work=None):
    """(L L^T)^{-1} from the lower Cholesky factor L (tiled, see potri_tiled: bitwise the same
    for any n_threads).

    Costs 2 n^3 / 3 flops, a third of solving against the identity, which is what a gradient
    of a Gaussian log-likelihood that needs the whole inverse should use.  With
    ``overwrite=True`` and a C-contiguous float64 writeable ``L``, the inverse replaces L in
    its memory; ``work``, an (n, n) C-contiguous float64 array, is the scratch matrix (a fresh
    one by default).
    """
    in_place = overwrite and isinstance(L, np.ndarray) and L.dtype == np.float64 \
        and L.flags.c_contiguous and L.flags.writeable
    cdef double[:, ::1] a = L if in_place else _c64(L, copy=True)
    cdef int n = a.shape[0]
    if a.shape[1] != n:
        raise ValueError("cho_inverse: the factor must be square")
    if work is None:
        work = np.empty((n, n))
    elif work.shape != (n, n) or work.dtype != np.float64 or not work.flags.c_contiguous \
            or np.shares_memory(work, a):
        raise ValueError(f"cho_inverse: work must be a C-contiguous float64 array of shape "
                         f"{(n, n)} apart from L")
    cdef double[:, ::1] z = work
    if n == 0:
        return np.asarray(a)
    singular = np.flatnonzero(np.diagonal(np.asarray(a)) == 0.0)
    if singular.size:
        check_info(int(singular[0]) + 1, "cho_inverse")     # as dpotri reports it
    cdef Interrupt it
    interrupt_init(&it)
    with blas_threads(1):
        with nogil:
            potri_tiled(n, &a[0, 0], n, &z[0, 0], n, &a[0, 0], n, n_threads, &it)
        if it.raised:
            reraise()
    return np.asarray(a)


def lu_factor(A):
    """LU factors (in hkern's row-major layout, see getrf) and 1-based pivots."""
    cdef double[:, ::1] a = _c64(A, copy=True)
    cdef int n = a.shape[0], info
    if a.shape[1] != n:
        raise ValueError("lu_factor: the matrix must be square")
    piv = np.zeros(n, dtype=np.intc)
    cdef int[::1] p = piv
    if n > 0:
        with blas_threads(1):   # deterministic whatever the caller's BLAS threads
            with nogil:
                info = getrf(n, &a[0, 0], n, &p[0])
        check_info(info, "lu_factor")
    return np.asarray(a), piv


def lu_solve(LU, piv, B):
    """Solve A X = B from the output of :func:`lu_factor`."""
    cdef const double[:, ::1] lu = _c64(LU)
    cdef const int[::1] p = np.ascontiguousarray(piv, dtype=np.intc)
    B, vector = _as_matrix_rhs(B)
    cdef double[:, ::1] b = B
    if lu.shape[0] != lu.shape[1] or b.shape[0] != lu.shape[0] or p.shape[0] != lu.shape[0]:
        raise ValueError("lu_solve: shapes do not match")
    if b.shape[0] > 0 and b.shape[1] > 0:
        with blas_threads(1), nogil:
            getrs(lu.shape[0], b.shape[1], &lu[0, 0], lu.shape[0], &p[0], &b[0, 0], b.shape[1])
    out = np.asarray(b)
    return out.ravel() if vector else out


def eigh(A, subset=None, overwrite_a=False):
    """Eigenpairs of a symmetric matrix (lower triangle read), ascending, by dsyevd's method
    (tridiagonal reduction, divide and conquer, back-transformation), interruptible by Ctrl-C
    (``syevd``).

    Parameters
    ----------
    A : (n, n) array
    subset : (lo, hi) or None
        0-based inclusive index range of the eigenvalues wanted; None for all.
    overwrite_a : bool
        Work in A itself (its contents are destroyed) when it is a writeable C-contiguous
        float64 array, instead of a copy of n^2 doubles.

    Returns
    -------
    w : (k,) eigenvalues, ascending.
    V : (n, k) eigenvectors as columns, like :func:`numpy.linalg.eigh` (Fortran-ordered).
    """
    in_place = (overwrite_a and isinstance(A, np.ndarray) and A.dtype == np.float64
                and A.ndim == 2 and A.flags.c_contiguous and A.flags.writeable)
    cdef double[:, ::1] a = A if in_place else _c64(A, copy=True)
    cdef int n = a.shape[0], il = -1, iu = -1, found = 0, info
    if a.shape[1] != n:
        raise ValueError("eigh: the matrix must be square")
    if subset is not None:
        il, iu = int(subset[0]), int(subset[1])
        if not 0 <= il <= iu < n:
            raise ValueError(f"eigh: subset must satisfy 0 <= lo <= hi < n={n}, got {subset}")
    k = n if il < 0 else iu - il + 1
    w = np.zeros(max(n, 1))
    Z = np.zeros((max(k, 1), max(n, 1)))
    cdef double[::1] wv = w
    cdef double[:, ::1] z = Z
    cdef Interrupt it
    interrupt_init(&it)
    if n > 0:
        with blas_threads(1):
            with nogil:
                info = syevd(n, &a[0, 0], n, il, iu, &wv[0], &z[0, 0], z.shape[1], &found, &it)
            if it.raised:
                reraise()
        check_info(info, "eigh")
    # The transposed view, not a copy: eigenvector j is row j of Z, so V is Fortran-ordered.
    # A C-ordered copy of V would cost another n^2 and a numpy loop that Ctrl-C cannot cut
    # (1.6 s at n = 8192, on fresh pages).
    return w[:found].copy(), Z[:found, :n].T


def eigh_tridiagonal(d, e):
    """All eigenpairs of the symmetric tridiagonal matrix with diagonal d and off-diagonal e,
    by divide and conquer (LAPACK's dstedc, its merges polled for Ctrl-C).

    Parameters
    ----------
    d : (n,) array
    e : (n - 1,) array

    Returns
    -------
    w : (n,) eigenvalues, ascending.
    V : (n, n) eigenvectors as columns (Fortran-ordered).
    """
    dd = np.array(d, dtype=np.float64, copy=True).ravel()
    cdef int n = dd.shape[0], info = 0
    if np.shape(e) != (max(n - 1, 0),):
        raise ValueError(f"eigh_tridiagonal: e must have n - 1 = {max(n - 1, 0)} entries, "
                         f"got shape {np.shape(e)}")
    ee = np.zeros(max(n, 1))
    ee[:max(n - 1, 0)] = e
    Q = np.empty((max(n, 1), max(n, 1)))
    work = np.empty(4 * n + n * n + 1)
    iwork = np.empty(5 * n + 3, dtype=np.intc)
    cdef double[::1] dv = dd if n > 0 else np.zeros(1)
    cdef double[::1] ev = ee
    cdef double[:, ::1] q = Q
    cdef double[::1] wv = work
    cdef int[::1] iv = iwork
    cdef Interrupt it
    interrupt_init(&it)
    if n > 0:
        with blas_threads(1):
            with nogil:
                info = _tridiagonal_eigh(n, &dv[0], &ev[0], &q[0, 0], n, &wv[0], &iv[0], &it)
            if it.raised:
                reraise()
        check_info(info, "eigh_tridiagonal")
    # Q holds the column-major eigenvectors: its row j is eigenvector j (V Fortran-ordered).
    return dd, Q[:n, :n].T


def svd(A):
    """Thin SVD through dgesdd: U (m, k), s (k,) descending, VT (k, n)."""
    cdef double[:, ::1] a = _c64(A, copy=True)
    cdef int m = a.shape[0], n = a.shape[1], k = min(a.shape[0], a.shape[1]), info
    U = np.zeros((m, k))
    s = np.zeros(k)
    VT = np.zeros((k, n))
    cdef double[:, ::1] u = U
    cdef double[::1] sv = s
    cdef double[:, ::1] vt = VT
    if k > 0:
        with blas_threads(1), nogil:
            info = gesdd(m, n, &a[0, 0], n, &sv[0], &u[0, 0], k, &vt[0, 0], n)
        check_info(info, "svd")
    return U, s, VT


def lstsq(A, B, double rcond=1e-12):
    """Minimum-norm least squares with relative singular-value cutoff; returns (X, rank)."""
    cdef const double[:, ::1] a = _c64(A)
    B, vector = _as_matrix_rhs(B)
    cdef double[:, ::1] b = B
    cdef int m = a.shape[0], n = a.shape[1], nrhs = b.shape[1], rank = 0, info = 0
    if b.shape[0] != m:
        raise ValueError("lstsq: A and B must have the same number of rows")
    X = np.zeros((n, nrhs))
    cdef double[:, ::1] x = X
    cdef Interrupt it
    interrupt_init(&it)
    if n > 0 and nrhs > 0 and m > 0:
        with blas_threads(1):
            with nogil:
                info = lstsq_svd(m, n, nrhs, &a[0, 0], n, &b[0, 0], nrhs, rcond, &x[0, 0],
                                 nrhs, &rank, &it)
            if it.raised:
                reraise()
        check_info(info, "lstsq")
    return (X.ravel() if vector else X), rank


def qr(A):
    """Thin QR A = Q R (m >= n) by Householder reflectors (dgelqf's and dorglq's block loops,
    interruptible by Ctrl-C): Q (m, n) orthonormal, R (n, n) upper."""
    cdef double[:, ::1] a = _c64(A, copy=True)
    cdef int m = a.shape[0], n = a.shape[1], info = 0
    if m < n:
        raise ValueError(f"qr: need rows >= columns, got shape {(m, n)}")
    R = np.zeros((n, n))
    cdef double[:, ::1] r = R
    cdef Interrupt it
    interrupt_init(&it)
    if n > 0:
        with blas_threads(1):
            with nogil:
                info = qr_thin(m, n, &a[0, 0], n, &r[0, 0], n, &it)
            if it.raised:
                reraise()
        check_info(info, "qr")
    return np.asarray(a), R
