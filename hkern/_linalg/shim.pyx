"""Row-major BLAS/LAPACK shim (see shim.pxd for the conventions).

Every function here is one BLAS or LAPACK call through ``scipy.linalg.cython_blas`` /
``cython_lapack`` (or a few in a fixed order), translated from hkern's row-major layout to the
libraries' column-major one.  The decompositions are LAPACK's own (dsyevd, dsyevr, dgelsd,
dgelqf/dorglq, dgetrf, dpotrf): nothing of LAPACK is written out again here.
"""
from cython cimport floating
from libc.math cimport isfinite
from libc.stdlib cimport malloc, free
from libc.string cimport memcpy, memset
from scipy.linalg cimport cython_blas as blas
from scipy.linalg cimport cython_lapack as lapack


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


cdef int _workspace_size(double query) noexcept nogil:
    """LAPACK's optimal workspace from a query's work[0] (a double), or -1 beyond a 32-bit
    LAPACK's reach."""
    if query > 2147483000.0:
        return -1
    return <int>(query + 0.5) + 1


# The symmetric eigensolvers read the row-major *upper* triangle, mirrored from the lower one the
# caller fills: that is LAPACK's column-major lower triangle, whose tridiagonal reduction runs
# faster in OpenBLAS than the upper one's (dsyevr at n = 3000: 2.0-2.2 s against 2.4-2.6 s on
# one thread, 0.9-1.1 s against 1.5 s on two; the mirror is O(n^2)).


cdef int syevd(int n, double* A, int lda, double* w) noexcept nogil:
    """All eigenpairs of a row-major symmetric matrix by LAPACK's dsyevd (divide and conquer):
    ascending eigenvalues in w, eigenvector j overwrites row j of A (A's lower triangle read).

    The lower triangle is first mirrored onto the upper one (the note above); dsyevd returns the
    eigenvectors as the columns of its column-major matrix, which are the rows of the row-major
    buffer.  Workspace: 1 + 6 n + 2 n^2 doubles and 3 + 5 n ints.
    """
    cdef char jobz = b'V', uplo = b'L'
    cdef int info = 0, lwork = -1, liwork = -1, iquery = 0
    cdef double query = 0.0
    cdef double* work
    cdef int* iwork
    if n == 0:
        return 0
    if not all_finite(n, n, A, lda, True):
        return NON_FINITE
    mirror_triangle(n, A, lda, True)
    lapack.dsyevd(&jobz, &uplo, &n, A, &lda, w, &query, &lwork, &iquery, &liwork, &info)
    if info != 0:
        return info
    lwork = _workspace_size(query)
    liwork = iquery
    work = <double*>malloc(<size_t>lwork * sizeof(double)) if lwork > 0 else NULL
    iwork = <int*>malloc(<size_t>liwork * sizeof(int))
    if work == NULL or iwork == NULL:
        info = OUT_OF_MEMORY
    else:
        lapack.dsyevd(&jobz, &uplo, &n, A, &lda, w, work, &lwork, iwork, &liwork, &info)
    free(work)
    free(iwork)
    return info


cdef int syevr(int n, double* A, int lda, int il, int iu, double* w, double* Z, int ldz,
               int* n_found) noexcept nogil:
    """Eigenpairs il..iu (0-based, inclusive, in ascending order) of a row-major symmetric matrix
    by LAPACK's dsyevr (tridiagonal reduction, then MRRR for the wanted pairs only): the
    eigenvalues in w, eigenvector j in row j of Z (ldz >= n; iu - il + 1 rows); A's lower
    triangle is read and destroyed.  n_found: the pairs returned.

    Z is dsyevr's column-major n x k output, whose columns are the rows of the row-major buffer;
    the lower triangle is mirrored first, as for syevd.
    """
    cdef char jobz = b'V', rng = b'I', uplo = b'L'
    cdef int info = 0, lwork = -1, liwork = -1, iquery = 0, lo = il + 1, hi = iu + 1
    cdef int k = iu - il + 1
    cdef double vl = 0.0, vu = 0.0, abstol = 0.0, query = 0.0
    cdef double* work
    cdef int* iwork
    cdef int* isuppz
    n_found[0] = 0
    if n == 0 or k <= 0:
        return 0
    if not all_finite(n, n, A, lda, True):
        return NON_FINITE
    mirror_triangle(n, A, lda, True)
    isuppz = <int*>malloc(2 * <size_t>k * sizeof(int))
    if isuppz == NULL:
        return OUT_OF_MEMORY
    lapack.dsyevr(&jobz, &rng, &uplo, &n, A, &lda, &vl, &vu, &lo, &hi, &abstol, n_found, w, Z,
                  &ldz, isuppz, &query, &lwork, &iquery, &liwork, &info)
    if info != 0:
        free(isuppz)
        return info
    lwork = _workspace_size(query)
    liwork = iquery
    work = <double*>malloc(<size_t>lwork * sizeof(double)) if lwork > 0 else NULL
    iwork = <int*>malloc(<size_t>liwork * sizeof(int))
    if work == NULL or iwork == NULL:
        info = OUT_OF_MEMORY
    else:
        lapack.dsyevr(&jobz, &rng, &uplo, &n, A, &lda, &vl, &vu, &lo, &hi, &abstol, n_found, w,
                      Z, &ldz, isuppz, work, &lwork, iwork, &liwork, &info)
    free(work)
    free(iwork)
    free(isuppz)
    return info


cdef int gelsd(int m, int n, int nrhs, double* A, int lda, double* B, int ldb, double rcond,
               double* s, int* rank) noexcept nogil:
    """Minimum-norm least squares min ||A X - B|| by LAPACK's dgelsd (SVD by divide and conquer),
    in LAPACK's own column-major layout: A (m x n, lda >= m) is destroyed, B (ldb >= max(m, n)
    rows, nrhs columns) holds X in its first n rows on exit, s the singular values (min(m, n)).
    Singular values at or below rcond * s_max count as zero; rank: the others."""
    cdef int info = 0, lwork = -1, iquery = 0
    cdef double query = 0.0
    cdef double* work
    cdef int* iwork
    rank[0] = 0
    if m == 0 or n == 0 or nrhs == 0:
        return 0
    lapack.dgelsd(&m, &n, &nrhs, A, &lda, B, &ldb, s, &rcond, rank, &query, &lwork, &iquery,
                  &info)
    if info != 0:
        return info
    lwork = _workspace_size(query)
    work = <double*>malloc(<size_t>lwork * sizeof(double)) if lwork > 0 else NULL
    iwork = <int*>malloc(<size_t>max(iquery, 1) * sizeof(int))
    if work == NULL or iwork == NULL:
        info = OUT_OF_MEMORY
    else:
        lapack.dgelsd(&m, &n, &nrhs, A, &lda, B, &ldb, s, &rcond, rank, work, &lwork, iwork,
                      &info)
    free(work)
    free(iwork)
    return info


cdef int lstsq_rows(int m, int n, int nrhs, const double* A, int lda, const double* B, int ldb,
                    double rcond, double* X, int ldx, int* rank) noexcept nogil:
    """X (n x nrhs, row stride ldx) = A^+ B for row-major A (m x n) and B (m x nrhs), singular
    values of A at or below rcond * s_max counting as zero (rank: the others); A and B unchanged.

    The SVD is LAPACK's dgesdd, of the column-major view of A, which is A^T = U' S V'^T (no
    transposed copy: A = V' S U'^T, so A^+ B = U' S^+ V'^T B), and the two products are BLAS
    calls.  MEKA's links solve with as many right-hand sides as rows (a 1024 x 512 A against
    1024 columns: 0.16 s on one thread, against 0.50 s for dgelsd, whose applications of its
    transformations to B dominate there).  Workspace: A's copy, U' and V'^T (3 m n doubles at
    most), k nrhs for V'^T B and dgesdd's own.
    """
    cdef int k = min(m, n), info = 0, lwork = -1, i, j, r = 0
    cdef char jobz = b'S'
    cdef double query = 0.0
    cdef double* Ac
    cdef double* Ut
    cdef double* Vt
    cdef double* T
    cdef double* s
    cdef double* work = NULL
    cdef int* iwork
    rank[0] = 0
    if n == 0 or nrhs == 0:
        return 0
    if m == 0:
        for i in range(n):
            memset(X + <Py_ssize_t>i * ldx, 0, nrhs * sizeof(double))
        return 0
    if not all_finite(m, n, A, lda, False) or not all_finite(m, nrhs, B, ldb, False):
        return NON_FINITE
    Ac = <double*>malloc((<size_t>m * n + <size_t>n * k + <size_t>k * m + <size_t>k * nrhs
                          + k) * sizeof(double))
    iwork = <int*>malloc(8 * <size_t>k * sizeof(int))
    if Ac == NULL or iwork == NULL:
        free(Ac)
        free(iwork)
        return OUT_OF_MEMORY
    Ut = Ac + <Py_ssize_t>m * n            # U' (n x k column-major): U'^T row-major, stride n
    Vt = Ut + <Py_ssize_t>n * k            # V'^T (k x m column-major): V' row-major, stride k
    T = Vt + <Py_ssize_t>k * m             # V'^T B, then S^+ V'^T B (k x nrhs row-major)
    s = T + <Py_ssize_t>k * nrhs
    for i in range(m):                     # the column-major view of A: A^T, n x m, ld n
        memcpy(Ac + <Py_ssize_t>i * n, A + <Py_ssize_t>i * lda, n * sizeof(double))
    lapack.dgesdd(&jobz, &n, &m, Ac, &n, s, Ut, &n, Vt, &k, &query, &lwork, iwork, &info)
    if info == 0:
        lwork = _workspace_size(query)
        work = <double*>malloc(<size_t>lwork * sizeof(double)) if lwork > 0 else NULL
        if work == NULL:
            info = OUT_OF_MEMORY
        else:
            lapack.dgesdd(&jobz, &n, &m, Ac, &n, s, Ut, &n, Vt, &k, work, &lwork, iwork, &info)
    if info == 0:
        while r < k and s[r] > rcond * s[0]:
            r = r + 1
        rank[0] = r
        if r == 0:
            for i in range(n):
                memset(X + <Py_ssize_t>i * ldx, 0, nrhs * sizeof(double))
        else:
            # T = V'^T B (r x nrhs), its row i scaled by 1 / s_i, then X = U' T.
            gemm(True, False, r, nrhs, m, 1.0, Vt, k, B, ldb, 0.0, T, nrhs)
            for i in range(r):
                for j in range(nrhs):
                    T[<Py_ssize_t>i * nrhs + j] /= s[i]
            gemm(True, False, n, nrhs, r, 1.0, Ut, n, T, nrhs, 0.0, X, ldx)
    free(work)
    free(iwork)
    free(Ac)
    return info


cdef int qr_thin(int m, int n, double* A, int lda, double* R, int ldr) noexcept nogil:
    """Thin QR A = Q R of a row-major m x n matrix with m >= n by LAPACK's dgelqf and dorglq:
    Q (m x n, orthonormal columns) overwrites A; R (n x n, upper triangular, row stride ldr) is
    written with zeros below the diagonal.

    The column-major view of A is A^T (n x m).  Its LQ factorisation A^T = L Q' gives
    A = Q'^T L^T: R = L^T sits in the upper triangle of A's first n rows (row-major view), and
    dorglq turns the reflectors into Q', whose column-major storage is Q row-major: no copies.
    """
    cdef int info = 0, lwork = -1, i, j
    cdef double query = 0.0, query_q = 0.0
    cdef double* tau
    cdef double* work
    if n == 0 or m == 0:
        return 0
    if not all_finite(m, n, A, lda, False):
        return NON_FINITE
    tau = <double*>malloc(<size_t>n * sizeof(double))
    if tau == NULL:
        return OUT_OF_MEMORY
    lapack.dgelqf(&n, &m, A, &lda, tau, &query, &lwork, &info)
    if info == 0:
        lapack.dorglq(&n, &m, &n, A, &lda, tau, &query_q, &lwork, &info)
    if info != 0:
        free(tau)
        return info
    lwork = _workspace_size(max(query, query_q))
    work = <double*>malloc(<size_t>lwork * sizeof(double)) if lwork > 0 else NULL
    if work == NULL:
        free(tau)
        return OUT_OF_MEMORY
    lapack.dgelqf(&n, &m, A, &lda, tau, work, &lwork, &info)
    if info == 0:
        for j in range(n):
            for i in range(n):
                R[<Py_ssize_t>j * ldr + i] = A[<Py_ssize_t>j * lda + i] if i >= j else 0.0
        lapack.dorglq(&n, &m, &n, A, &lda, tau, work, &lwork, &info)
    free(work)
    free(tau)
    return info


cdef bint all_finite(int m, int n, const double* A, int lda, bint lower) noexcept nogil:
    """No NaN or inf in the row-major m x n matrix A (only its lower triangle when ``lower``)."""
    cdef Py_ssize_t i, j
    cdef int ok = 1
    for i in range(m):
        for j in range(min(i + 1, n) if lower else n):
            ok &= isfinite(A[i * lda + j])
        if not ok:
            return False
    return True


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


