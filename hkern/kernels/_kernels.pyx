"""Compiled kernel evaluation: one definition per kernel, blocks by GEMM + an OpenMP map."""
from cython.parallel cimport prange
from libc.math cimport exp, sqrt, fabs
from libc.stdlib cimport malloc, calloc, free
from openmp cimport omp_get_thread_num

from hkern._linalg cimport Interrupt, gemm, interrupt_init, interrupted, reraise, syrk

import numpy as np

# Output tiles: small enough that the GEMM result is still in L2 when the map reads it back.
cdef enum:
    TILE_ROWS = 128
    TILE_COLS = 256

# A squared distance computed as ||x||^2 + ||y||^2 - 2 x.y loses its relative accuracy when it is
# small compared with the norms (cancellation).  Below this fraction of ||x||^2 + ||y||^2 it is
# recomputed exactly from the differences; that keeps sqrt-based kernels (Matern, IMQ) accurate
# for near-duplicate points and makes k(x, x) exactly 1.
cdef double REFINE_FRACTION = 1e-3


cdef extern from "_kernel_defs.h" nogil:
    double hk_gaussian(double s)
    double hk_laplace(double s)
    double hk_imq(double s)
    double hk_matern12(double s)
    double hk_matern32(double s)
    double hk_matern52(double s)
    void hk_map_gaussian(double* v, Py_ssize_t n)
    void hk_map_laplace(double* v, Py_ssize_t n)
    void hk_map_imq(double* v, Py_ssize_t n)
    void hk_map_matern12(double* v, Py_ssize_t n)
    void hk_map_matern32(double* v, Py_ssize_t n)
    void hk_map_matern52(double* v, Py_ssize_t n)
    Py_ssize_t hk_scale_distances(double* row, Py_ssize_t n, double xi, const double* ysq,
                                  double inv_s2, double refine)


cdef double kernel_from_scaled(int kind, double s) noexcept nogil:
    """The kernel as a function of the scaled distance s (formulas in _kernel_defs.h)."""
    if kind == GAUSSIAN:
        return hk_gaussian(s)
    if kind == LAPLACE:
        return hk_laplace(s)
    if kind == IMQ:
        return hk_imq(s)
    if kind == MATERN12:
        return hk_matern12(s)
    if kind == MATERN32:
        return hk_matern32(s)
    return hk_matern52(s)


cdef inline void map_scaled(int kind, double* v, Py_ssize_t n) noexcept nogil:
    """v[j] <- k(v[j]) in place, vectorised; bitwise equal to kernel_from_scaled."""
    if kind == GAUSSIAN:
        hk_map_gaussian(v, n)
    elif kind == LAPLACE:
        hk_map_laplace(v, n)
    elif kind == IMQ:
        hk_map_imq(v, n)
    elif kind == MATERN12:
        hk_map_matern12(v, n)
    elif kind == MATERN32:
        hk_map_matern32(v, n)
    else:
        hk_map_matern52(v, n)


cdef double scaled_distance(int kind, const double* x, const double* y, Py_ssize_t d,
                                   double sigma) noexcept nogil:
    """s for two points; any sigma > 0: sigma^2 may underflow to 0 (s = inf for distinct points,
    0 for equal ones) or overflow to inf (s = 0)."""
    cdef Py_ssize_t k
    cdef double acc = 0.0, diff
    if kind == LAPLACE:
        for k in range(d):
            acc += fabs(x[k] - y[k])
        return acc / sigma
    for k in range(d):
        diff = x[k] - y[k]
        acc += diff * diff
    if acc == 0.0:
        return 0.0      # not 0 / 0 when sigma^2 underflows
    return acc / (sigma * sigma)


cdef double kernel_pair(int kind, const double* x, const double* y, Py_ssize_t d,
                        double sigma) noexcept nogil:
    """k(x, y) for two points of dimension d."""
    return kernel_from_scaled(kind, scaled_distance(kind, x, y, d, sigma))


cdef void sqnorms(Py_ssize_t n, Py_ssize_t d, const double* X, double* out) noexcept nogil:
    cdef Py_ssize_t i, k
    cdef double acc
    for i in range(n):
        acc = 0.0
        for k in range(d):
            acc += X[i * d + k] * X[i * d + k]
        out[i] = acc


cdef inline void finish_row(int kind, double sigma, double* row, Py_ssize_t n, const double* x,
                            double xi, const double* Y, const double* ysq,
                            int d) noexcept nogil:
    """Turn one row of -2 x.Y^T (Euclidean kernels) into k(x, Y[j]) for j < n in place; for the
    Laplace kernel the row's input is ignored and L1 distances are computed directly.

    Three passes so that the first and last vectorise: scaled distances (entries lost to
    cancellation marked -1), exact recomputation of the marked ones, the kernel map.  A zero
    squared distance is always marked (``<=``), so 1 / sigma^2 = inf (sigma below ~1e-154)
    never meets 0 * inf.
    """
    cdef Py_ssize_t j, n_marked = 0
    cdef double inv_s2 = 1.0 / (sigma * sigma)
    if kind == LAPLACE:
        for j in range(n):
            row[j] = scaled_distance(kind, x, Y + j * d, d, sigma)
    else:
        n_marked = hk_scale_distances(row, n, xi, ysq, inv_s2, REFINE_FRACTION)
        if n_marked:
            for j in range(n):
                if row[j] < 0.0:
                    row[j] = scaled_distance(kind, x, Y + j * d, d, sigma)
    map_scaled(kind, row, n)


cdef void kernel_block(int kind, double sigma, int m, int n, int d,
                       const double* X, const double* xsq, const double* Y, const double* ysq,
                       double* out, int ldo) noexcept nogil:
    """out[i, j] = k(X[i], Y[j]) for an m x n block, single-threaded (BLAS may not be).

    X (m x d) and Y (n x d) are C-contiguous; xsq, ysq are their squared row norms (unused for
    the Laplace kernel, may be NULL there); out has row stride ldo.
    """
    cdef Py_ssize_t i
    if m == 0 or n == 0:
        return
    if kind != LAPLACE:
        gemm(False, True, m, n, d, -2.0, X, d, Y, d, 0.0, out, ldo)
    for i in range(m):
        finish_row(kind, sigma, out + i * ldo, n, X + i * d, xsq[i] if xsq != NULL else 0.0,
                   Y, ysq, d)


cdef void kernel_block_lower(int kind, double sigma, int m, int d, const double* X,
                             const double* xsq, double* out, int ldo) noexcept nogil:
    """Lower triangle (diagonal included) of the symmetric block K(X, X), single-threaded.

    Half the kernel evaluations of kernel_block(X, X); the strict upper triangle is not
    written.  The squared distances come from one dsyrk instead of a dgemm.
    """
    cdef Py_ssize_t i
    if m == 0:
        return
    if kind != LAPLACE:
        syrk(True, False, m, d, -2.0, X, d, 0.0, out, ldo)
    for i in range(m):
        finish_row(kind, sigma, out + i * ldo, i + 1, X + i * d,
                   xsq[i] if xsq != NULL else 0.0, X, xsq, d)


cdef void kernel_tiles(int kind, double sigma, int m, int n, int d,
                       const double* X, const double* xsq, const double* Y, const double* ysq,
                       double* out, int ldo, int n_threads, Interrupt* it) noexcept nogil:
    """Fill the m x n matrix out = K(X, Y) tile by tile, tiles spread over n_threads threads.

    The tile grid does not depend on n_threads, so every entry is computed by the same
    operations whatever the thread count: results are bitwise identical for any n_jobs
    (BLAS must be limited to one thread by the caller while this runs in parallel).  Checks
    for an interrupt before each tile (it may be NULL; see hkern/_linalg.pxd).
    """
    cdef int tiles_c = (n + TILE_COLS - 1) // TILE_COLS
    cdef int tiles_r = (m + TILE_ROWS - 1) // TILE_ROWS
    cdef int t, r0, c0, tm, tn
    if m == 0 or n == 0:
        return
    for t in prange(tiles_r * tiles_c, nogil=True, num_threads=n_threads, schedule="dynamic"):
        if interrupted(it):
            continue
        r0 = (t // tiles_c) * TILE_ROWS
        c0 = (t % tiles_c) * TILE_COLS
        tm = min(TILE_ROWS, m - r0)
        tn = min(TILE_COLS, n - c0)
        kernel_block(kind, sigma, tm, tn, d, X + <Py_ssize_t>r0 * d,
                     (xsq + r0) if xsq != NULL else NULL, Y + <Py_ssize_t>c0 * d,
                     (ysq + c0) if ysq != NULL else NULL,
                     out + <Py_ssize_t>r0 * ldo + c0, ldo)


cdef int kernel_times(int kind, double sigma, int m, int n, int d,
                      const double* X, const double* xsq, const double* Y, const double* ysq,
                      const double* V, int k, double* out, int n_threads,
                      Interrupt* it) noexcept nogil:
    """out (m x k) = K(X, Y) @ V (n x k) without storing K: each TILE_ROWS x TILE_COLS block is
    computed into a per-thread buffer that stays in cache and multiplied into its rows of out
    at once.

    Threads own row tiles, and each row tile adds its column tiles in order, so every entry of
    out is the same sum for any n_threads (BLAS limited to one thread by the caller).  Memory:
    one tile per thread.  Returns -1 if that could not be allocated, else 0.  Checks for an
    interrupt before each tile (it may be NULL).
    """
    cdef int tiles_r = (m + TILE_ROWS - 1) // TILE_ROWS
    cdef int t, r0, c0, tm, tn
    cdef double* buf
    cdef double* work
    if m == 0 or k == 0:
        return 0
    if n == 0:
        for t in range(m * k):
            out[t] = 0.0
        return 0
    work = <double*>malloc(<size_t>n_threads * TILE_ROWS * TILE_COLS * sizeof(double))
    if work == NULL:
        return -1
    for t in prange(tiles_r, nogil=True, num_threads=n_threads, schedule="dynamic"):
        buf = work + <Py_ssize_t>omp_get_thread_num() * TILE_ROWS * TILE_COLS
        r0 = t * TILE_ROWS
        tm = min(TILE_ROWS, m - r0)
        c0 = 0
        while c0 < n:
            if interrupted(it):
                break
            tn = min(TILE_COLS, n - c0)
            kernel_block(kind, sigma, tm, tn, d, X + <Py_ssize_t>r0 * d,
                         (xsq + r0) if xsq != NULL else NULL, Y + <Py_ssize_t>c0 * d,
                         (ysq + c0) if ysq != NULL else NULL, buf, TILE_COLS)
            gemm(False, False, tm, k, tn, 1.0, buf, TILE_COLS, V + <Py_ssize_t>c0 * k, k,
                 0.0 if c0 == 0 else 1.0, out + <Py_ssize_t>r0 * k, k)
            c0 = c0 + TILE_COLS
    free(work)
    return 0


# kernel_normal_times: rows of K(X, Z) per block, sized so that the block (rows x m) stays in the
# per-core L2 cache between its two uses, and the fixed number of row slabs whose partial sums
# are added in order (the same sums for any thread count).
cdef Py_ssize_t NORMAL_BLOCK_BYTES = 1 << 20
cdef enum:
    NORMAL_SLABS = 16


cdef int normal_rows(int m) noexcept nogil:
    """Rows of a kernel_normal_times block for m centres: a multiple of 8 in [8, TILE_ROWS]."""
    cdef Py_ssize_t r = NORMAL_BLOCK_BYTES // (8 * <Py_ssize_t>max(m, 1))
    return <int>min(max((r // 8) * 8, 8), TILE_ROWS)


cdef int kernel_normal_times(int kind, double sigma, int n, int m, int d,
                             const double* X, const double* xsq, const double* Z,
                             const double* zsq, const double* U, const double* V, int k,
                             double* out, int n_threads, Interrupt* it) noexcept nogil:
    """out (m x k) = K(X, Z)^T (K(X, Z) U + V) in one pass over K, never stored.

    U (m x k) or V (n x k) may be NULL (zero).  Each block of normal_rows(m) rows of K(X, Z) is
    computed once into a per-thread buffer that stays in cache, multiplied by U, and its
    transpose multiplied into the block's slab of partial sums.  The rows form NORMAL_SLABS
    slabs (fewer for small n) of consecutive blocks, each summed in order, and the slabs are
    added in order at the end: every entry of out is the same sum for any n_threads (BLAS
    limited to one thread by the caller).  Memory: one block and its k products per thread and
    one m x k partial sum per slab.  Returns -1 if that could not be allocated, else 0.
    """
    cdef int n_blocks = (n + normal_rows(m) - 1) // normal_rows(m)
    cdef int slabs = min(<int>NORMAL_SLABS, n_blocks)
    cdef Py_ssize_t mk = <Py_ssize_t>m * k
    cdef int s, status
    cdef Py_ssize_t i
    cdef double* sums
    if m == 0 or k == 0:
        return 0
    for i in range(mk):
        out[i] = 0.0
    if n == 0:
        return 0
    sums = <double*>calloc(<size_t>slabs * mk, sizeof(double))
    if sums == NULL:
        return -1
    status = normal_times_blocks(kind, sigma, n, m, d, 0, n_blocks, X, xsq, Z, zsq, U, V, k,
                                 sums, n_threads, it)
    if status == 0:
        for s in range(slabs):
            for i in range(mk):
                out[i] += sums[s * mk + i]
    free(sums)
    return status


cdef int normal_times_blocks(int kind, double sigma, Py_ssize_t n, int m, int d, int b_first,
                             int b_last, const double* X, const double* xsq, const double* Z,
                             const double* zsq, const double* U, const double* V, int k,
                             double* sums, int n_threads, Interrupt* it) noexcept nogil:
    """The blocks b_first <= b < b_last of kernel_normal_times on n rows in all, each block's
    product added into its slab's partial sum sums[slab] (m x k, as the caller left it).

    X, xsq and V start at row b_first * normal_rows(m) of the n rows and hold the rows of
    these blocks.  Run over every block from zeroed sums, this is kernel_normal_times; an MPI
    rank runs the blocks that start in its rows, continuing a slab another rank began from that
    rank's partial sum, and gets the serial sums bit for bit (hkern/baselines/nystrom_sharded).
    Checks for an interrupt before each block (it may be NULL).
    """
    cdef int rows = normal_rows(m)
    cdef int n_blocks = <int>((n + rows - 1) // rows)
    cdef int slabs = min(<int>NORMAL_SLABS, n_blocks)
    cdef Py_ssize_t per_thread = <Py_ssize_t>rows * (m + k)
    cdef Py_ssize_t mk = <Py_ssize_t>m * k
    cdef Py_ssize_t base = <Py_ssize_t>b_first * rows, r0
    cdef int s, b, rr
    cdef Py_ssize_t j
    cdef double* buf
    cdef double* t
    cdef double* acc
    cdef double* work
    if m == 0 or k == 0 or b_last <= b_first:
        return 0
    work = <double*>malloc(<size_t>n_threads * per_thread * sizeof(double))
    if work == NULL:
        return -1
    for s in prange(slabs, nogil=True, num_threads=n_threads, schedule="dynamic"):
        buf = work + <Py_ssize_t>omp_get_thread_num() * per_thread
        t = buf + <Py_ssize_t>rows * m
        acc = sums + s * mk
        for b in range(max(s * n_blocks // slabs, b_first),
                       min((s + 1) * n_blocks // slabs, b_last)):
            if interrupted(it):
                break
            r0 = <Py_ssize_t>b * rows - base
            rr = <int>min(<Py_ssize_t>rows, n - base - r0)
            kernel_block(kind, sigma, rr, m, d, X + r0 * d, (xsq + r0) if xsq != NULL else NULL,
                         Z, zsq, buf, m)
            if V != NULL:
                for j in range(<Py_ssize_t>rr * k):
                    t[j] = V[r0 * k + j]
            if U != NULL:
                gemm(False, False, rr, k, m, 1.0, buf, m, U, k, 1.0 if V != NULL else 0.0, t, k)
            gemm(True, False, m, k, rr, 1.0, buf, m, t, k, 1.0, acc, k)
    free(work)
    return 0


cdef _squared_norms(int kind, const double[:, ::1] A):
    """Squared row norms of A for the Euclidean kernels (at least one entry, so that a pointer
    to it exists; unused and unset for the Laplace kernel)."""
    out = np.empty(max(A.shape[0], 1))
    cdef double[::1] o = out
    if kind != LAPLACE and A.shape[0] > 0:
        with nogil:
            sqnorms(A.shape[0], A.shape[1], &A[0, 0], &o[0])
    return out


# Bytes of the per-thread tile of kernel_times (for memory estimates).
TILE_BYTES = TILE_ROWS * TILE_COLS * 8


def kernel_times_matrix(int kind, double sigma, const double[:, ::1] X, const double[:, ::1] Y,
                        const double[:, ::1] V, double[:, ::1] out, int n_threads):
    """out[:] = K(X, Y) @ V with the kernel never stored (kernel_times).  Trusts its inputs."""
    cdef int m = X.shape[0], n = Y.shape[0], d = X.shape[1], k = V.shape[1], status
    if m == 0 or k == 0:
        return
    cdef double[::1] xsq = _squared_norms(kind, X)
    cdef double[::1] ysq = _squared_norms(kind, Y)
    cdef Interrupt it
    interrupt_init(&it)
    with nogil:
        status = kernel_times(kind, sigma, m, n, d, &X[0, 0], &xsq[0],
                              &Y[0, 0] if n > 0 else NULL, &ysq[0],
                              &V[0, 0] if n > 0 else NULL, k, &out[0, 0], n_threads, &it)
    if it.raised:
        reraise()
    if status != 0:
        raise MemoryError("kernel_times: no memory for the per-thread tiles")


def kernel_normal_times_matrix(int kind, double sigma, const double[:, ::1] X,
                               const double[:, ::1] Z, U, V, double[:, ::1] out, int n_threads):
    """out[:] = K(X, Z)^T (K(X, Z) U + V), U (m x k) and V (n x k) C-contiguous or None (zero),
    the kernel never stored (kernel_normal_times).  Trusts its inputs."""
    cdef int n = X.shape[0], m = Z.shape[0], d = X.shape[1], k = out.shape[1], status
    cdef const double[:, ::1] u
    cdef const double[:, ::1] v
    cdef const double* up = NULL
    cdef const double* vp = NULL
    if m == 0 or k == 0:
        return
    if U is not None and n > 0:
        u = U
        up = &u[0, 0]
    if V is not None and n > 0:
        v = V
        vp = &v[0, 0]
    cdef double[::1] xsq = _squared_norms(kind, X)
    cdef double[::1] zsq = _squared_norms(kind, Z)
    cdef Interrupt it
    interrupt_init(&it)
    with nogil:
        status = kernel_normal_times(kind, sigma, n, m, d, &X[0, 0] if n > 0 else NULL,
                                     &xsq[0], &Z[0, 0], &zsq[0], up, vp, k, &out[0, 0],
                                     n_threads, &it)
    if it.raised:
        reraise()
    if status != 0:
        raise MemoryError("kernel_normal_times: no memory for the per-thread blocks")


def normal_times_layout(Py_ssize_t n, int m):
    """(rows per block, blocks, slabs) of kernel_normal_times on n rows and m centres: block b
    is rows b * rows .. (b + 1) * rows - 1, slab s the blocks s * blocks // slabs ..
    (s + 1) * blocks // slabs - 1."""
    cdef int rows = normal_rows(m)
    cdef Py_ssize_t blocks = (n + rows - 1) // rows
    return rows, int(blocks), int(min(<Py_ssize_t>NORMAL_SLABS, blocks))


def kernel_normal_times_blocks(int kind, double sigma, Py_ssize_t n, int b_first, int b_last,
                               const double[:, ::1] X, const double[:, ::1] Z, U, V,
                               double[:, :, ::1] sums, int n_threads):
    """Blocks b_first .. b_last - 1 of kernel_normal_times on n rows in all (normal_times_blocks):
    X (and V) hold their rows, from row b_first * rows; sums (slabs, m, k) the slabs' partial
    sums, added to in place.  U (m x k), V C-contiguous or None (zero).  Trusts its inputs."""
    cdef int m = Z.shape[0], d = Z.shape[1], k = sums.shape[2], status
    cdef const double[:, ::1] u
    cdef const double[:, ::1] v
    cdef const double* up = NULL
    cdef const double* vp = NULL
    if m == 0 or k == 0 or b_last <= b_first:
        return
    if U is not None:
        u = U
        up = &u[0, 0]
    if V is not None:
        v = V
        vp = &v[0, 0]
    cdef double[::1] xsq = _squared_norms(kind, X)
    cdef double[::1] zsq = _squared_norms(kind, Z)
    cdef Interrupt it
    interrupt_init(&it)
    with nogil:
        status = normal_times_blocks(kind, sigma, n, m, d, b_first, b_last, &X[0, 0], &xsq[0],
                                     &Z[0, 0], &zsq[0], up, vp, k, &sums[0, 0, 0], n_threads,
                                     &it)
    if it.raised:
        reraise()
    if status != 0:
        raise MemoryError("kernel_normal_times: no memory for the per-thread blocks")


def normal_times_bytes(int n, int m, int k, int n_threads):
    """Bytes kernel_normal_times allocates: a block and its products per thread, the slabs'
    partial sums."""
    cdef int rows = normal_rows(m)
    cdef int slabs = min(<int>NORMAL_SLABS, (n + rows - 1) // rows)
    return 8 * (n_threads * rows * (m + k) + slabs * m * k)


def fill_kernel_matrix(int kind, double sigma, const double[:, ::1] X, const double[:, ::1] Y,
                       double[:, ::1] out, int n_threads):
    """out[:] = K(X, Y).  Trusts its inputs: the Python face validates them."""
    cdef int m = X.shape[0], n = Y.shape[0], d = X.shape[1]
    if m == 0 or n == 0:
        return
    cdef double[::1] xsq = _squared_norms(kind, X)
    cdef double[::1] ysq = _squared_norms(kind, Y)
    cdef Interrupt it
    interrupt_init(&it)
    with nogil:
        kernel_tiles(kind, sigma, m, n, d, &X[0, 0], &xsq[0], &Y[0, 0], &ysq[0],
                     &out[0, 0], out.shape[1], n_threads, &it)
    if it.raised:
        reraise()


def kernel_values(int kind, const double[::1] s):
    """The kernel applied to an array of scaled distances (used by tests and diagnostics)."""
    out = np.empty(s.shape[0])
    cdef double[::1] o = out
    cdef Py_ssize_t i
    for i in range(s.shape[0]):
        o[i] = kernel_from_scaled(kind, s[i])
    return out

