"""Products over the rows of a tall matrix a fixed segment of rows at a time, threads over the
segments (hkern._row_span: a row's bits then depend on its segment only, so MPI ranks holding
runs of whole segments compute the serial fit's bits).

Each segment is one single-threaded BLAS call (and one triangular solve), the segments shared
among OpenMP threads: the same numbers for any thread count.  The tall matrix is float64 or
float32 (a mixed-precision factor: its products in single precision, their results float64).
The caller limits BLAS to one thread (hkern._threads.blas_threads).
"""
from cython cimport floating
from cython.parallel cimport prange
from libc.math cimport fabs, frexp, ldexp
from libc.stdlib cimport free, malloc
from openmp cimport omp_get_thread_num

from hkern._linalg.shim cimport gemm, trsm

import numpy as np


cdef inline int _segments(Py_ssize_t m, int segment) noexcept nogil:
    return <int>((m + segment - 1) // segment)


cdef double _power_of_two_scale(const double* V, Py_ssize_t count) noexcept nogil:
    """The power of two that brings max |V| into [0.5, 1) (1 for zeros): V / scale is used at
    float32's relative precision whatever its magnitude (hkern.kernels._api._single_operand)."""
    cdef double largest = 0.0
    cdef Py_ssize_t i
    cdef int exponent
    for i in range(count):
        if fabs(V[i]) > largest:
            largest = fabs(V[i])
    if largest == 0.0:
        return 1.0
    frexp(largest, &exponent)
    return ldexp(1.0, exponent)


cdef int _update(const floating* Ft, int ldf, int k, const floating* Fk, double* G, int m,
                 int b, const double* L, int segment, int n_threads) except -1:
    cdef int n_seg = _segments(m, segment), s, r0, rows
    cdef Py_ssize_t i
    cdef floating* work = NULL
    cdef floating* buf
    if floating is float:
        work = <floating*>malloc(<size_t>n_threads * segment * b * sizeof(float))
        if work == NULL:
            raise MemoryError("update_factor_rows: no memory for the float32 products")
    with nogil:
        for s in prange(n_seg, num_threads=n_threads, schedule="static"):
            r0 = s * segment
            rows = min(segment, m - r0)
            if k > 0:
                if floating is double:
                    gemm(True, False, rows, b, k, -1.0, Ft + r0, ldf, Fk, b, 1.0,
                         G + <Py_ssize_t>r0 * b, b)
                else:
                    buf = work + <Py_ssize_t>omp_get_thread_num() * segment * b
                    gemm(True, False, rows, b, k, 1.0, Ft + r0, ldf, Fk, b, 0.0, buf, b)
                    for i in range(<Py_ssize_t>rows * b):
                        G[<Py_ssize_t>r0 * b + i] -= buf[i]
            trsm(False, True, True, False, rows, b, 1.0, L, b, G + <Py_ssize_t>r0 * b, b)
    free(work)
    return 0


def update_factor_rows(Ft, Fk, G, L, int segment, int n_threads=1):
    """G <- (G - Ft^T Fk) L^{-T} in place, a segment of G's rows at a time: block RPCholesky's
    new factor columns (hkern.oasis.block_rpcholesky).

    Ft (k, m): the factor so far, stored transposed, its rows contiguous (a row stride of at
    least m); Fk (k, b) C-contiguous, of Ft's dtype: the factor at the new pivots; G (m, b)
    C-contiguous float64: the kernel columns at them; L (b, b) C-contiguous float64: the lower
    Cholesky factor of the pivots' residual block.
    """
    cdef int k = Ft.shape[0], m = G.shape[0], b = G.shape[1]
    if m == 0 or b == 0:
        return G
    cdef double[:, ::1] g = G
    cdef const double[:, ::1] l = L
    cdef int ldf = max(1, Ft.strides[0] // Ft.itemsize) if k else 1
    if Ft.dtype == np.float32:
        _update[float](<const float*><size_t>Ft.ctypes.data, ldf, k,
                       <const float*><size_t>Fk.ctypes.data, &g[0, 0], m, b, &l[0, 0],
                       segment, n_threads)
    else:
        _update[double](<const double*><size_t>Ft.ctypes.data, ldf, k,
                        <const double*><size_t>Fk.ctypes.data, &g[0, 0], m, b, &l[0, 0],
                        segment, n_threads)
    return G


cdef int _transposed(const floating* F, int ldf, bint by_columns, int m, int r,
                     const double* R, int j, double* out, int segment,
                     int n_threads) except -1:
    """out[s] = F[seg s]^T R[seg s] for every segment (r x j each, float64)."""
    cdef int n_seg = _segments(m, segment), s, r0, rows
    cdef Py_ssize_t i, per = <Py_ssize_t>segment * j + <Py_ssize_t>r * j
    cdef float* work = NULL
    cdef float* rbuf
    cdef float* pbuf
    cdef double scale
    cdef const floating* A
    if floating is float:
        work = <float*>malloc(<size_t>n_threads * per * sizeof(float))
        if work == NULL:
            raise MemoryError("transposed_products: no memory for the float32 operands")
    with nogil:
        for s in prange(n_seg, num_threads=n_threads, schedule="static"):
            r0 = s * segment
            rows = min(segment, m - r0)
            # F's segment as op(A): rows r0.. of F, or columns r0.. of F^T stored by rows.
            A = (F + r0) if by_columns else (F + <Py_ssize_t>r0 * ldf)
            if floating is double:
                gemm(not by_columns, False, r, j, rows, 1.0, A, ldf, R + <Py_ssize_t>r0 * j, j,
                     0.0, out + <Py_ssize_t>s * r * j, j)
            else:
                rbuf = work + <Py_ssize_t>omp_get_thread_num() * per
                pbuf = rbuf + <Py_ssize_t>segment * j
                scale = _power_of_two_scale(R + <Py_ssize_t>r0 * j, <Py_ssize_t>rows * j)
                for i in range(<Py_ssize_t>rows * j):
                    rbuf[i] = <float>(R[<Py_ssize_t>r0 * j + i] / scale)
                gemm(not by_columns, False, r, j, rows, 1.0, A, ldf, rbuf, j, 0.0, pbuf, j)
                for i in range(<Py_ssize_t>r * j):
                    out[<Py_ssize_t>s * r * j + i] = <double>pbuf[i] * scale
    free(work)
    return 0


cdef int _rows_times(const floating* F, int ldf, bint by_columns, int m, int r,
                     const double* T, int j, double alpha, double* out, int segment,
                     int n_threads) except -1:
    """out[seg s] = alpha F[seg s] T for every segment (float64 out)."""
    cdef int n_seg = _segments(m, segment), s, r0, rows
    cdef Py_ssize_t i
    cdef float* T32 = NULL
    cdef float* work = NULL
    cdef float* pbuf
    cdef double scale = 1.0
    cdef const floating* A
    if floating is float:
        T32 = <float*>malloc(<size_t>(<Py_ssize_t>r * j + <Py_ssize_t>n_threads * segment * j)
                             * sizeof(float))
        if T32 == NULL:
            raise MemoryError("rows_times: no memory for the float32 operands")
        work = T32 + <Py_ssize_t>r * j
        scale = _power_of_two_scale(T, <Py_ssize_t>r * j)
        for i in range(<Py_ssize_t>r * j):
            T32[i] = <float>(T[i] / scale)
    with nogil:
        for s in prange(n_seg, num_threads=n_threads, schedule="static"):
            r0 = s * segment
            rows = min(segment, m - r0)
            A = (F + r0) if by_columns else (F + <Py_ssize_t>r0 * ldf)
            if floating is double:
                gemm(by_columns, False, rows, j, r, alpha, A, ldf, T, j, 0.0,
                     out + <Py_ssize_t>r0 * j, j)
            else:
                pbuf = work + <Py_ssize_t>omp_get_thread_num() * segment * j
                gemm(by_columns, False, rows, j, r, 1.0, A, ldf, T32, j, 0.0, pbuf, j)
                for i in range(<Py_ssize_t>rows * j):
                    out[<Py_ssize_t>r0 * j + i] = <double>pbuf[i] * (alpha * scale)
    free(T32)
    return 0


def _layout(F):
    """(by_columns, leading dimension) of a tall F (m, r) whose rows or columns are
    contiguous, as the shim reads it in place."""
    item = F.itemsize
    if F.shape[1] <= 1 or F.strides[1] == item:
        return False, max(1, F.strides[0] // item, F.shape[1])
    if F.strides[0] == item:
        return True, max(1, F.strides[1] // item, F.shape[0])
    raise ValueError("segments: F needs contiguous rows or columns")


def transposed_products(F, R, int segment, int n_threads=1):
    """(n_segments, r, j) float64: F[seg]^T R[seg] for each segment of F's m rows (F float64 or
    float32 with contiguous rows or columns; R (m, j) C-contiguous float64; float32: R's
    segment scaled by a power of two and rounded, the product in single precision)."""
    cdef int m = F.shape[0], r = F.shape[1], j = R.shape[1]
    out = np.empty((_segments(m, segment), r, j))
    if m == 0 or r == 0 or j == 0:
        return out
    by_columns, ldf = _layout(F)
    cdef const double[:, ::1] rv = R
    cdef double[:, :, ::1] o = out
    if F.dtype == np.float32:
        _transposed[float](<const float*><size_t>F.ctypes.data, ldf, by_columns, m, r,
                           &rv[0, 0], j, &o[0, 0, 0], segment, n_threads)
    else:
        _transposed[double](<const double*><size_t>F.ctypes.data, ldf, by_columns, m, r,
                            &rv[0, 0], j, &o[0, 0, 0], segment, n_threads)
    return out


def rows_times(F, T, double alpha, int segment, int n_threads=1):
    """(m, j) float64: alpha F T a segment of F's rows at a time (F as for
    :func:`transposed_products`; T (r, j) C-contiguous float64; float32: T scaled by a power of
    two and rounded, the product in single precision)."""
    cdef int m = F.shape[0], r = F.shape[1], j = T.shape[1]
    out = np.zeros((m, j))
    if m == 0 or r == 0 or j == 0:
        return out
    by_columns, ldf = _layout(F)
    cdef const double[:, ::1] t = T
    cdef double[:, ::1] o = out
    if F.dtype == np.float32:
        _rows_times[float](<const float*><size_t>F.ctypes.data, ldf, by_columns, m, r,
                           &t[0, 0], j, alpha, &o[0, 0], segment, n_threads)
    else:
        _rows_times[double](<const double*><size_t>F.ctypes.data, ldf, by_columns, m, r,
                            &t[0, 0], j, alpha, &o[0, 0], segment, n_threads)
    return out
