"""Deterministic parallel level 3 and Cholesky on a fixed tile grid (see tiled.pxd).

Why not threaded OpenBLAS here: its results change with the thread count (different splits
and, for dpotrf, a different algorithm), and threaded dsyrk has crashed with SIGSEGV
(dsyrk_thread_UT, scipy-openblas 0.3.x, n ~ 16000 on this project's 2-core AMD EPYC machines),
which is what made plain dpotrf fail near n = 18000.  Single-threaded calls on bounded tiles
have neither problem, and the loops between them check for Ctrl-C.
"""
from cython cimport floating
from cython.parallel cimport prange
from libc.math cimport sqrt
from libc.stdlib cimport malloc, free
from openmp cimport omp_get_thread_num

from hkern._linalg.interrupt cimport Interrupt, interrupted
from hkern._linalg.shim cimport gemm, potrf, symmetrize_from_lower, syrk, trmm, trsm

# The tile and block sizes for Python (tests place their shapes at tile and block boundaries).
TILE_SIZE = TILE
CHOLESKY_BLOCK_SIZE = CHOL_BLOCK
INVERSE_TILE_SIZE = INV_TILE
SOLVE_BLOCK_SIZE = SOLVE_BLOCK



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


