"""Mixed-precision triangular solve (see mixed.pxd): the inner loops in _mixed_defs.h."""
from cython.parallel cimport prange

from hkern._linalg.interrupt cimport Interrupt, interrupted
from hkern._linalg.tiled cimport SOLVE_BLOCK


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


