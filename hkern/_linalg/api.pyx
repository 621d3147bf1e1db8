"""NumPy entry points of hkern's linear algebra: the functions the Python layer calls.

Each converts its inputs (C-contiguous, of the working precision; copies where the routine
overwrites its input, so callers never see their arrays modified), calls the nogil core
(shim.pyx: one BLAS/LAPACK call; tiled.pyx and mixed.pyx: hkern's deterministic, polled
routines), raises a Ctrl-C that came during it, and turns LAPACK's ``info`` into
:class:`numpy.linalg.LinAlgError`.  The tests compare each with NumPy/SciPy.
"""
from cython cimport floating

from hkern._linalg.interrupt cimport Interrupt, interrupt_init, reraise, signal_after_call
from hkern._linalg.mixed cimport trsm_left_rows_mixed
from hkern._linalg.shim cimport (NON_FINITE, OUT_OF_MEMORY, gelsd, gemv, lstsq_rows,
                                 mirror_triangle, qr_thin, syevd, syevr, trmm)
from hkern._linalg.tiled cimport (gemm_tiled, lauum_upper_to_lower, potrf_tiled, potri_tiled,
                                  syrk_tiled, trsm_tiled)

import numpy as np

from hkern._threads import blas_threads


def check_info(int info, str routine):
    """Raise :class:`numpy.linalg.LinAlgError` (or MemoryError) for a non-zero LAPACK info."""
    if info == 0:
        return
    if info == OUT_OF_MEMORY:
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
    if routine == "getrf":
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


cdef int _gram_into(bint trans, double alpha, size_t a, int lda, int k, floating[:, ::1] c,
                    int n_threads, double beta=0.0, bint mirror=True) except -1:
    """c = alpha op(A) op(A)^T + beta c for A at address a (row stride lda) of c's precision
    (its lower triangle only without ``mirror``)."""
    cdef int n = c.shape[0]
    cdef Interrupt it
    interrupt_init(&it)
    with blas_threads(1):
        with nogil:
            syrk_tiled(trans, n, k, alpha, <const floating*>a, lda, beta, &c[0, 0], n, n_threads,
                       &it)
        if it.raised:
            reraise()
        if mirror:
            with nogil:
                mirror_triangle(n, &c[0, 0], n, True)
    return 0


def gram(A, bint trans=False, double alpha=1.0, int n_threads=1, out=None, bint mirror=True):
    """alpha * op(A) op(A)^T through tiled syrk/gemm, returned as a full symmetric matrix (in
    single precision when A is float32).  A may be a view with contiguous rows (a block of
    columns ``F[:, :k]``) or columns (Fortran order), read in place.

    ``out``: a symmetric C-contiguous array of the result's shape and A's dtype, to which the
    product is added (a Gram matrix summed over blocks of rows without a temporary).
    ``mirror=False``: only the lower triangle is computed and added (a sum over many blocks
    mirrors once at its end, :func:`symmetrize`).
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
            _gram_into[float](trans, alpha, A.ctypes.data, lda, k, out, n_threads, beta, mirror)
        else:
            _gram_into[double](trans, alpha, A.ctypes.data, lda, k, out, n_threads, beta, mirror)
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


def _square_in_place(A, overwrite, str routine):
    """A as a C-contiguous float64 square matrix: A itself when ``overwrite`` allows it (a
    writeable C-contiguous float64 array), else a copy."""
    in_place = (overwrite and isinstance(A, np.ndarray) and A.dtype == np.float64
                and A.ndim == 2 and A.flags.c_contiguous and A.flags.writeable)
    a = A if in_place else _c64(A, copy=True)
    if a.shape[1] != a.shape[0]:
        raise ValueError(f"{routine}: the matrix must be square, got shape {a.shape}")
    return a


def eigh(A, subset=None, overwrite_a=False, int n_threads=1):
    """Eigenpairs of a symmetric matrix (lower triangle read), ascending: all of them by
    LAPACK's dsyevd (divide and conquer), a subset by dsyevr (MRRR: only the pairs wanted).

    One LAPACK call: it runs to its end, and a Ctrl-C that came during it is raised when it
    returns (n = 4000: about 5 s on one thread here; doc/design.md).

    Parameters
    ----------
    A : (n, n) array
    subset : (lo, hi) or None
        0-based inclusive index range of the eigenvalues wanted; None for all.
    overwrite_a : bool
        Work in A itself (its contents are destroyed) when it is a writeable C-contiguous
        float64 array, instead of a copy of n^2 doubles.
    n_threads : int
        LAPACK's threads.  Its results change with their number: a fit whose answer must not
        depend on ``n_jobs`` passes 1.

    Returns
    -------
    w : (k,) eigenvalues, ascending.
    V : (n, k) eigenvectors as columns, like :func:`numpy.linalg.eigh` (Fortran-ordered: a view
        of LAPACK's output, no copy).
    """
    cdef double[:, ::1] a = _square_in_place(A, overwrite_a, "eigh")
    cdef int n = a.shape[0], il = 0, iu = n - 1, found = 0, info = 0
    if subset is not None:
        il, iu = int(subset[0]), int(subset[1])
        if not 0 <= il <= iu < n:
            raise ValueError(f"eigh: subset must satisfy 0 <= lo <= hi < n={n}, got {subset}")
    cdef int k = iu - il + 1 if n > 0 else 0
    w = np.empty(max(n, 1))
    cdef double[::1] wv = w
    cdef double[:, ::1] z
    if n == 0:
        return np.empty(0), np.empty((0, 0), order="F")
    with blas_threads(n_threads):
        if subset is None:
            with nogil:
                info = syevd(n, &a[0, 0], n, &wv[0])
            found = n
            Z = np.asarray(a)
        else:
            # Z's row j is eigenvector j (dsyevr's column-major n x k output).
            Z = np.empty((k, n))
            z = Z
            with nogil:
                info = syevr(n, &a[0, 0], n, il, iu, &wv[0], &z[0, 0], n, &found)
        # Inside the block: a KeyboardInterrupt raised here still restores BLAS's threads.
        signal_after_call()
    check_info(info, "eigh")
    return w[:found].copy(), Z[:found].T


def lstsq(A, B, double rcond=1e-12, int n_threads=1, str driver="gelsd"):
    """Minimum-norm least squares min ||A X - B||, singular values of A at or below ``rcond``
    times the largest counting as zero; returns (X, rank).

    ``driver``: ``"gelsd"`` (LAPACK's dgelsd: the SVD by divide and conquer applied to B, A and
    B copied into LAPACK's column-major layout), or ``"gesdd"`` (dgesdd's thin SVD of A's
    row-major buffer, then two products: MEKA's links, ``shim.lstsq_rows``), which is faster
    with many right-hand sides (1024 x 512 with 1024 of them: 0.16 s against 0.50 s on one
    thread) and slower with few (6000 x 2000 with 50: 5.1 s against 2.4 s on two), and holds
    A's singular vectors (2 m n doubles more).  Both give the same X to rounding.

    LAPACK calls (``n_threads`` of LAPACK's threads) run to their end: a Ctrl-C that came
    during them is raised when they return.
    """
    if driver not in ("gelsd", "gesdd"):
        raise ValueError(f"lstsq: driver must be 'gelsd' or 'gesdd', got {driver!r}")
    Ac = np.array(A, dtype=np.float64, order="F" if driver == "gelsd" else "C", copy=True)
    if Ac.ndim != 2:
        raise ValueError(f"lstsq: A must be a 2-D array, got shape {Ac.shape}")
    Bm = np.asarray(B, dtype=np.float64)
    vector = Bm.ndim == 1
    if vector:
        Bm = Bm[:, None]
    cdef int m = Ac.shape[0], n = Ac.shape[1], nrhs = Bm.shape[1], rank = 0, info = 0
    if Bm.ndim != 2 or Bm.shape[0] != m:
        raise ValueError(f"lstsq: A and B must have the same number of rows, got A {Ac.shape} "
                         f"and B {np.shape(B)}")
    if not (np.isfinite(Ac).all() and np.isfinite(Bm).all()):
        check_info(NON_FINITE, "lstsq")
    if driver == "gesdd":
        X = np.zeros((n, nrhs))
        if m > 0 and n > 0 and nrhs > 0:
            Bm = np.ascontiguousarray(Bm)
            info, rank = _lstsq_rows(Ac, Bm, rcond, X, n_threads)
            check_info(info, "lstsq")
        return (X.ravel() if vector else X), rank
    # dgelsd writes X over the first n rows of B, which needs max(m, n) of them.
    Bc = np.zeros((max(m, n, 1), nrhs), order="F")
    Bc[:m] = Bm
    s = np.empty(max(min(m, n), 1))
    cdef double[::1, :] a = Ac if m > 0 and n > 0 else np.zeros((1, 1), order="F")
    cdef double[::1, :] b = Bc if nrhs > 0 else np.zeros((1, 1), order="F")
    cdef double[::1] sv = s
    if m > 0 and n > 0 and nrhs > 0:
        with blas_threads(n_threads):
            with nogil:
                info = gelsd(m, n, nrhs, &a[0, 0], m, &b[0, 0], b.shape[0], rcond, &sv[0], &rank)
            signal_after_call()
        check_info(info, "lstsq")
    X = np.ascontiguousarray(Bc[:n])
    return (X.ravel() if vector else X), rank


cdef tuple _lstsq_rows(const double[:, ::1] a, const double[:, ::1] b, double rcond,
                       double[:, ::1] x, int n_threads):
    """(info, rank) of shim.lstsq_rows on C-contiguous operands, X written into x."""
    cdef int info, rank = 0
    with blas_threads(n_threads):
        with nogil:
            info = lstsq_rows(a.shape[0], a.shape[1], b.shape[1], &a[0, 0], a.shape[1],
                              &b[0, 0], b.shape[1], rcond, &x[0, 0], x.shape[1], &rank)
        signal_after_call()
    return info, rank


def qr(A, int n_threads=1):
    """Thin QR A = Q R (m >= n) by LAPACK's dgelqf and dorglq on A's transpose (no copy beyond
    A's): Q (m, n) orthonormal columns, R (n, n) upper triangular.

    Two LAPACK calls (``n_threads`` of LAPACK's threads): a Ctrl-C that came during them is
    raised when they return.
    """
    cdef double[:, ::1] a = _c64(A, copy=True)
    cdef int m = a.shape[0], n = a.shape[1], info = 0
    if m < n:
        raise ValueError(f"qr: need rows >= columns, got shape {(m, n)}")
    R = np.zeros((n, n))
    cdef double[:, ::1] r = R
    if n > 0:
        with blas_threads(n_threads):
            with nogil:
                info = qr_thin(m, n, &a[0, 0], n, &r[0, 0], n)
            signal_after_call()
        check_info(info, "qr")
    return np.asarray(a), R
