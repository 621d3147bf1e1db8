"""Compiled kernel evaluation: one definition per kernel, blocks by GEMM + an OpenMP map.

The engine is written once over ``floating`` (float or double).  Its double specialisation is
the float64 engine the rest of hkern cimports (the names in _kernels.pxd are thin double
entries to it), the float one the single-precision path.  In single precision the kernel
entries, their distances and the BLAS product of one tile or block are float, while every sum
that runs over more than SUM_CHUNK terms (K u over the columns, K^T t over the rows, K U over
the centres) adds float partial sums of at most SUM_CHUNK terms in double: its error then stays
near the float rounding of a few entries instead of growing with n.  Both precisions share the
tile grid and the order of every sum, so both give the same bits for any thread count.  The one
exception is the Gaussian K u with one right-hand side in float: a fused loop
(gaussian_times_fused, doc/design.md "Single precision") whose sums are also fixed per row.
"""
from cython cimport floating
from cython.parallel cimport prange
from libc.math cimport exp, sqrt, fabs
from libc.stdlib cimport malloc, calloc, free
from openmp cimport omp_get_thread_num

from hkern._linalg.interrupt cimport Interrupt, interrupt_init, interrupted, reraise
from hkern._linalg.shim cimport gemm, syrk

import numpy as np

# Output tiles: small enough that the GEMM result is still in L2 when the map reads it back.
cdef enum:
    TILE_ROWS = 128
    TILE_COLS = 256
    # In single precision no float sum runs over more than this many terms (module doc).
    SUM_CHUNK = 256

# A squared distance computed as ||x||^2 + ||y||^2 - 2 x.y loses its relative accuracy when it is
# small compared with the norms (cancellation).  Below this fraction of ||x||^2 + ||y||^2 it is
# recomputed exactly from the differences; that keeps sqrt-based kernels (Matern, IMQ) accurate
# for near-duplicate points and makes k(x, x) exactly 1.
cdef double REFINE_FRACTION = 1e-3
# The same in single precision.  There the formula's error is a few float roundings of the
# norms (u = 6e-8), so at a distance of f times the norms the scaled distance is off by about
# u / f relative, which Matern 1/2 (exp(-sqrt(s))) turns into an absolute error of about
# u sqrt(N) / (2 sqrt(f)), N the scaled norms.  f = 1e-2 keeps that near 5 u sqrt(N), the size
# of single precision's own rounding of the entry, and recomputes (in double, from the exact
# differences of the float inputs) only pairs closer than about a tenth of their norms.
cdef float REFINE_FRACTION_F32 = 1e-2


cdef extern from "_kernel_defs.h" nogil:
    double hk_kernel(int kind, double s)
    void hk_map(int kind, double* v, Py_ssize_t n)
    Py_ssize_t hk_scale_distances(double* row, Py_ssize_t n, double xi, const double* ysq,
                                  double inv_s2, double refine)
    void hk_map_f32(int kind, float* v, Py_ssize_t n)
    Py_ssize_t hk_scale_distances_f32(float* row, Py_ssize_t n, float xi, const float* ysq,
                                      float inv_s2, float refine)
    enum: HK_FUSED_COLS
    enum: HK_FUSED_FLUSH
    enum: HK_FUSED_LD
    void hk_gaussian_times_f32(int m, int d, const float* X, const float* xsq, const float* Zt,
                               const float* czsq, const float* u, float c, double inv_s2,
                               float refine, float* lanes, int flush, double* out)
    void hk_gaussian_block_f32(int m, int d, const float* X, const float* xsq, const float* Zt,
                               const float* czsq, int ncols, float c, double inv_s2,
                               float refine, float* out, Py_ssize_t ldo)


cdef double kernel_from_scaled(int kind, double s) noexcept nogil:
    """The kernel as a function of the scaled distance s (formulas in _kernel_defs.h)."""
    return hk_kernel(kind, s)


cdef inline void map_scaled(int kind, floating* v, Py_ssize_t n) noexcept nogil:
    """v[j] <- k(v[j]) in place, vectorised: in double bitwise equal to kernel_from_scaled, in
    float the same formulas instantiated in single precision (hk_map_f32)."""
    if floating is float:
        hk_map_f32(kind, v, n)
    else:
        hk_map(kind, v, n)


cdef double scaled_distance(int kind, const double* x, const double* y, Py_ssize_t d,
                                   double sigma) noexcept nogil:
    """s for two points; any sigma > 0: sigma^2 may underflow to 0 (s = inf for distinct points,
    0 for equal ones) or overflow to inf (s = 0)."""
    return scaled_distance_t(kind, x, y, d, sigma)


cdef inline double scaled_distance_t(int kind, const floating* x, const floating* y,
                                     Py_ssize_t d, double sigma) noexcept nogil:
    """scaled_distance for points of either precision, always summed in double from the
    differences (for float inputs those differences are exact: the float engine's exact
    recomputation)."""
    cdef Py_ssize_t k
    cdef double acc = 0.0, diff
    if kind == LAPLACE:
        for k in range(d):
            acc += fabs(<double>x[k] - y[k])
        return acc / sigma
    for k in range(d):
        diff = <double>x[k] - y[k]
        acc += diff * diff
    if acc == 0.0:
        return 0.0      # not 0 / 0 when sigma^2 underflows
    return acc / (sigma * sigma)


cdef double kernel_pair(int kind, const double* x, const double* y, Py_ssize_t d,
                        double sigma) noexcept nogil:
    """k(x, y) for two points of dimension d."""
    return kernel_from_scaled(kind, scaled_distance(kind, x, y, d, sigma))


cdef void sqnorms(Py_ssize_t n, Py_ssize_t d, const double* X, double* out) noexcept nogil:
    sqnorms_t(n, d, X, out)


cdef void sqnorms_t(Py_ssize_t n, Py_ssize_t d, const floating* X, floating* out) noexcept nogil:
    """Squared row norms, summed in double (rounded once to float in single precision)."""
    cdef Py_ssize_t i, k
    cdef double acc
    for i in range(n):
        acc = 0.0
        for k in range(d):
            acc += <double>X[i * d + k] * X[i * d + k]
        out[i] = <floating>acc


cdef inline void finish_row(int kind, double sigma, floating* row, Py_ssize_t n,
                            const floating* x, floating xi, const floating* Y,
                            const floating* ysq, int d) noexcept nogil:
    """Turn one row of -2 x.Y^T (Euclidean kernels) into k(x, Y[j]) for j < n in place; for the
    Laplace kernel the row's input is ignored and L1 distances are computed directly.

    Three passes so that the first and last vectorise: scaled distances (entries lost to
    cancellation marked -1), exact recomputation of the marked ones, the kernel map.  A zero
    squared distance is always marked (``<=``), so 1 / sigma^2 = inf (sigma below ~1e-154
    in double) never meets 0 * inf.
    """
    cdef Py_ssize_t j, n_marked = 0
    cdef double inv_s2 = 1.0 / (sigma * sigma)
    if kind == LAPLACE:
        for j in range(n):
            row[j] = <floating>scaled_distance_t(kind, x, Y + j * d, d, sigma)
    else:
        if floating is float:
            n_marked = hk_scale_distances_f32(row, n, xi, ysq, <float>inv_s2,
                                              REFINE_FRACTION_F32)
        else:
            n_marked = hk_scale_distances(row, n, xi, ysq, inv_s2, REFINE_FRACTION)
        if n_marked:
            for j in range(n):
                if row[j] < 0.0:
                    row[j] = <floating>scaled_distance_t(kind, x, Y + j * d, d, sigma)
    map_scaled(kind, row, n)


cdef void kernel_block(int kind, double sigma, int m, int n, int d,
                       const double* X, const double* xsq, const double* Y, const double* ysq,
                       double* out, int ldo) noexcept nogil:
    """out[i, j] = k(X[i], Y[j]) for an m x n block, single-threaded (BLAS may not be).

    X (m x d) and Y (n x d) are C-contiguous; xsq, ysq are their squared row norms (unused for
    the Laplace kernel, may be NULL there); out has row stride ldo.
    """
    kernel_block_t(kind, sigma, m, n, d, X, xsq, Y, ysq, out, ldo)


cdef void kernel_block_t(int kind, double sigma, int m, int n, int d,
                         const floating* X, const floating* xsq, const floating* Y,
                         const floating* ysq, floating* out, int ldo) noexcept nogil:
    """kernel_block in either precision (the distances' GEMM is sgemm in float)."""
    cdef Py_ssize_t i
    if m == 0 or n == 0:
        return
    if kind != LAPLACE:
        gemm(False, True, m, n, d, -2.0, X, d, Y, d, 0.0, out, ldo)
    for i in range(m):
        finish_row(kind, sigma, out + i * ldo, n, X + i * d,
                   xsq[i] if xsq != NULL else <floating>0.0, Y, ysq, d)


cdef void kernel_block_lower(int kind, double sigma, int m, int d, const double* X,
                             const double* xsq, double* out, int ldo) noexcept nogil:
    """Lower triangle (diagonal included) of the symmetric block K(X, X), single-threaded.

    Half the kernel evaluations of kernel_block(X, X); the strict upper triangle is not
    written.  The squared distances come from one dsyrk instead of a dgemm.
    """
    kernel_block_lower_t(kind, sigma, m, d, X, xsq, out, ldo)


cdef void kernel_block_lower_t(int kind, double sigma, int m, int d, const floating* X,
                               const floating* xsq, floating* out, int ldo) noexcept nogil:
    """kernel_block_lower in either precision (ssyrk in float)."""
    cdef Py_ssize_t i
    if m == 0:
        return
    if kind != LAPLACE:
        syrk(True, False, m, d, -2.0, X, d, 0.0, out, ldo)
    for i in range(m):
        finish_row(kind, sigma, out + i * ldo, i + 1, X + i * d,
                   xsq[i] if xsq != NULL else <floating>0.0, X, xsq, d)


cdef void kernel_tiles(int kind, double sigma, int m, int n, int d,
                       const double* X, const double* xsq, const double* Y, const double* ysq,
                       double* out, int ldo, int n_threads, Interrupt* it) noexcept nogil:
    """Fill the m x n matrix out = K(X, Y) tile by tile, tiles spread over n_threads threads.

    The tile grid does not depend on n_threads, so every entry is computed by the same
    operations whatever the thread count: results are bitwise identical for any n_jobs
    (BLAS must be limited to one thread by the caller while this runs in parallel).  Checks
    for an interrupt before each tile (it may be NULL; see hkern/_linalg/interrupt.pxd).
    """
    kernel_tiles_t(kind, sigma, m, n, d, X, xsq, Y, ysq, out, ldo, n_threads, it)


cdef void kernel_tiles_t(int kind, double sigma, int m, int n, int d,
                         const floating* X, const floating* xsq, const floating* Y,
                         const floating* ysq, floating* out, int ldo, int n_threads,
                         Interrupt* it) noexcept nogil:
    """kernel_tiles in either precision."""
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
        kernel_block_t(kind, sigma, tm, tn, d, X + <Py_ssize_t>r0 * d,
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
    return kernel_times_t(kind, sigma, m, n, d, X, xsq, Y, ysq, V, k, out, n_threads, it)


cdef int kernel_times_t(int kind, double sigma, int m, int n, int d,
                        const floating* X, const floating* xsq, const floating* Y,
                        const floating* ysq, const floating* V, int k, double* out,
                        int n_threads, Interrupt* it) noexcept nogil:
    """kernel_times in either precision; out is double in both.  In float each tile's product
    (a sum over TILE_COLS = SUM_CHUNK columns) is an sgemm into a per-thread tm x k buffer,
    added to out in double.  Memory: a tile and that buffer per thread."""
    cdef int tiles_r = (m + TILE_ROWS - 1) // TILE_ROWS
    cdef int t, r0, c0, tm, tn, status
    cdef Py_ssize_t per_thread = <Py_ssize_t>TILE_ROWS * TILE_COLS, j
    cdef floating* buf
    cdef floating* prod
    cdef floating* work
    if m == 0 or k == 0:
        return 0
    if n == 0:
        for t in range(m * k):
            out[t] = 0.0
        return 0
    if floating is float:
        if kind == GAUSSIAN and k == 1:
            status = gaussian_times_fused(sigma, m, n, d, X, xsq, Y, ysq, V, out, n_threads, it)
            if status != 1:
                return status
    if floating is float:
        per_thread = per_thread + <Py_ssize_t>TILE_ROWS * k
    work = <floating*>malloc(<size_t>n_threads * per_thread * sizeof(floating))
    if work == NULL:
        return -1
    for t in prange(tiles_r, nogil=True, num_threads=n_threads, schedule="dynamic"):
        buf = work + <Py_ssize_t>omp_get_thread_num() * per_thread
        prod = NULL
        if floating is float:
            prod = buf + <Py_ssize_t>TILE_ROWS * TILE_COLS
        r0 = t * TILE_ROWS
        tm = min(TILE_ROWS, m - r0)
        c0 = 0
        while c0 < n:
            if interrupted(it):
                break
            tn = min(TILE_COLS, n - c0)
            kernel_block_t(kind, sigma, tm, tn, d, X + <Py_ssize_t>r0 * d,
                           (xsq + r0) if xsq != NULL else NULL, Y + <Py_ssize_t>c0 * d,
                           (ysq + c0) if ysq != NULL else NULL, buf, TILE_COLS)
            if floating is float:
                gemm(False, False, tm, k, tn, 1.0, buf, TILE_COLS, V + <Py_ssize_t>c0 * k, k,
                      0.0, prod, k)
                if c0 == 0:
                    for j in range(<Py_ssize_t>tm * k):
                        out[<Py_ssize_t>r0 * k + j] = prod[j]
                else:
                    for j in range(<Py_ssize_t>tm * k):
                        out[<Py_ssize_t>r0 * k + j] += prod[j]
            else:
                gemm(False, False, tm, k, tn, 1.0, buf, TILE_COLS, V + <Py_ssize_t>c0 * k, k,
                     0.0 if c0 == 0 else 1.0, out + <Py_ssize_t>r0 * k, k)
            c0 = c0 + TILE_COLS
    free(work)
    return 0


cdef bint fused_in_range(double c, int m, const float* xsq, int n,
                         const float* ysq) noexcept nogil:
    """Whether the fused float loops' exponent terms (-2c x.y, c ||x||^2, c ||y||^2) stay
    within float's range for these rows (else the unfused path runs)."""
    cdef double bx = 0.0, by = 0.0
    cdef Py_ssize_t i
    for i in range(m):
        bx = max(bx, <double>xsq[i])
    for i in range(n):
        by = max(by, <double>ysq[i])
    return <float>c < 0.0 and 4.0 * (-c) * (bx + by) < 1e37


cdef float* fused_tiles(float cf, int n, int d, const float* Y, const float* ysq,
                        const float* u, Py_ssize_t extra, void** block) noexcept nogil:
    """Y's column tiles for the fused float loops, HK_FUSED_COLS columns a tile transposed
    (d rows of coordinates, then c ||y||^2, then u, 0 where u is NULL; HK_FUSED_LD apart;
    padding columns c ||y||^2 = -1e30, u = 0), and ``extra`` floats after them, in one
    allocation on a 64-byte boundary (every vector load of the fused loops then stays within
    one cache line: malloc's 16-byte alignment made K u a quarter slower on some calls).
    *block is what to free; returns NULL if there was no memory."""
    cdef int tiles_c = (n + HK_FUSED_COLS - 1) // HK_FUSED_COLS
    cdef Py_ssize_t tile_items = <Py_ssize_t>(d + 2) * HK_FUSED_LD, col
    cdef int t, q, kk
    cdef float* tiles
    block[0] = malloc(<size_t>(tiles_c * tile_items + extra) * sizeof(float) + 64)
    if block[0] == NULL:
        return NULL
    tiles = <float*>((<size_t>block[0] + 63) & ~(<size_t>63))
    for t in range(tiles_c):
        for q in range(HK_FUSED_COLS):
            col = <Py_ssize_t>t * HK_FUSED_COLS + q
            for kk in range(d):
                tiles[t * tile_items + <Py_ssize_t>kk * HK_FUSED_LD + q] = \
                    Y[col * d + kk] if col < n else 0.0
            if col < n:
                tiles[t * tile_items + <Py_ssize_t>d * HK_FUSED_LD + q] = cf * ysq[col]
                tiles[t * tile_items + <Py_ssize_t>(d + 1) * HK_FUSED_LD + q] = \
                    u[col] if u != NULL else 0.0
            else:
                tiles[t * tile_items + <Py_ssize_t>d * HK_FUSED_LD + q] = -1e30
                tiles[t * tile_items + <Py_ssize_t>(d + 1) * HK_FUSED_LD + q] = 0.0
    return tiles


cdef int gaussian_times_fused(double sigma, int m, int n, int d, const float* X,
                              const float* xsq, const float* Y, const float* ysq,
                              const float* u, double* out, int n_threads,
                              Interrupt* it) noexcept nogil:
    """out (m) = K(X, Y) u for the Gaussian kernel in single precision by the fused tile loop
    (hk_gaussian_times_f32 in _kernel_defs.h): Y's column tiles transposed, with c ||y||^2 and
    u beside them, once per call; then threads own row tiles of TILE_ROWS rows, each adding its
    column tiles in order, so every entry of out is the same sum for any n_threads.

    Returns 1 (nothing done: the caller's unfused path) when -2c x.y or c ||x||^2 could leave
    float's range, -1 if the tiles could not be allocated, else 0.
    """
    cdef double c = -0.5 / (sigma * sigma)
    cdef float cf = <float>c
    cdef int tiles_c = (n + HK_FUSED_COLS - 1) // HK_FUSED_COLS
    cdef int tiles_r = (m + TILE_ROWS - 1) // TILE_ROWS
    cdef Py_ssize_t tile_items = <Py_ssize_t>(d + 2) * HK_FUSED_LD
    cdef int t
    cdef float* tiles
    cdef float* lanes
    cdef void* block
    if not fused_in_range(c, m, xsq, n, ysq):
        return 1
    # The running sums of each thread's row tile, 16 lanes a row, after the tiles.
    tiles = fused_tiles(cf, n, d, Y, ysq, u, 16 * TILE_ROWS * n_threads, &block)
    if tiles == NULL:
        return -1
    lanes = tiles + tiles_c * tile_items      # a multiple of 16 floats: still aligned
    for t in prange(tiles_r, nogil=True, num_threads=n_threads, schedule="dynamic"):
        _fused_row_tile(cf, 1.0 / (sigma * sigma), t * TILE_ROWS, min(<int>TILE_ROWS, m - t * TILE_ROWS), tiles_c,
                        d, X, xsq, tiles, tile_items, out,
                        lanes + <Py_ssize_t>omp_get_thread_num() * 16 * TILE_ROWS, it)
    free(block)
    return 0


cdef void _fused_row_tile(float c, double inv_s2, int r0, int tm, int tiles_c, int d,
                          const float* X, const float* xsq, const float* tiles,
                          Py_ssize_t tile_items, double* out,
                          float* lanes, Interrupt* it) noexcept nogil:
    """One row tile of gaussian_times_fused: its column tiles in order, the float running sums
    (lanes, 16 a row) added to out in double after every HK_FUSED_FLUSH tiles and the last."""
    cdef const float* tile
    cdef int t, flush
    cdef Py_ssize_t i
    for i in range(tm):
        out[r0 + i] = 0.0
    for i in range(16 * tm):
        lanes[i] = 0.0
    for t in range(tiles_c):
        if interrupted(it):
            return
        tile = tiles + t * tile_items
        flush = (t + 1) % HK_FUSED_FLUSH == 0 or t == tiles_c - 1
        hk_gaussian_times_f32(tm, d, X + <Py_ssize_t>r0 * d, xsq + r0, tile,
                              tile + <Py_ssize_t>d * HK_FUSED_LD,
                              tile + <Py_ssize_t>(d + 1) * HK_FUSED_LD, c, inv_s2,
                              REFINE_FRACTION_F32, lanes, flush, out + r0)


# kernel_normal_times: rows of K(X, Z) per block, sized so that the block (rows x m) stays in the
# per-core L2 cache between its two uses, and the fixed number of row slabs whose partial sums
# are added in order (the same sums for any thread count).  Single precision uses the same
# layout (its block takes half the bytes), so both share normal_times_layout.
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
    return kernel_normal_times_t(kind, sigma, n, m, d, X, xsq, Z, zsq, U, V, k, out, n_threads,
                                 it)


cdef int kernel_normal_times_t(int kind, double sigma, int n, int m, int d,
                               const floating* X, const floating* xsq, const floating* Z,
                               const floating* zsq, const floating* U, const double* V, int k,
                               double* out, int n_threads, Interrupt* it) noexcept nogil:
    """kernel_normal_times in either precision: U as X, V and the result double in both."""
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
                             int b_last, const floating* X, const floating* xsq,
                             const floating* Z, const floating* zsq, const floating* U,
                             const double* V, int k, double* sums, int n_threads,
                             Interrupt* it) noexcept nogil:
    """The blocks b_first <= b < b_last of kernel_normal_times on n rows in all, each block's
    product added into its slab's partial sum sums[slab] (m x k, as the caller left it).

    X, xsq and V start at row b_first * normal_rows(m) of the n rows and hold the rows of
    these blocks.  Run over every block from zeroed sums, this is kernel_normal_times; an MPI
    rank runs the blocks that start in its rows, continuing a slab another rank began from that
    rank's partial sum, and gets the serial sums bit for bit (hkern/nystrom/sharded.py).
    Checks for an interrupt before each block (it may be NULL).

    In single precision t = K_b U + V is summed in double over SUM_CHUNK-column float products
    and rounded to float once, and K_b^T t (a float sum over the block's rows, at most
    TILE_ROWS = 128) is added to the slab's double sum: per thread a float block, t, a chunk
    product and an m x k product, and t in double.
    """
    cdef int rows = normal_rows(m)
    cdef int n_blocks = <int>((n + rows - 1) // rows)
    cdef int slabs = min(<int>NORMAL_SLABS, n_blocks)
    cdef Py_ssize_t per_thread = <Py_ssize_t>rows * (m + k)
    cdef Py_ssize_t per_thread_d = 0
    cdef Py_ssize_t mk = <Py_ssize_t>m * k
    cdef Py_ssize_t base = <Py_ssize_t>b_first * rows, r0
    cdef int s, b, rr, c0, cn
    cdef Py_ssize_t j
    cdef floating* buf
    cdef floating* t
    cdef floating* chunk
    cdef floating* prod
    cdef floating* work
    cdef double* acc
    cdef double* tacc
    cdef double* work_d = NULL
    cdef double c = -0.5 / (sigma * sigma)
    cdef float* tiles = NULL
    cdef void* tiles_block = NULL
    cdef Py_ssize_t tile_items = <Py_ssize_t>(d + 2) * HK_FUSED_LD
    if m == 0 or k == 0 or b_last <= b_first:
        return 0
    if floating is float:
        per_thread = per_thread + <Py_ssize_t>rows * k + mk
        per_thread_d = <Py_ssize_t>rows * k
        work_d = <double*>malloc(<size_t>n_threads * per_thread_d * sizeof(double))
        if work_d == NULL:
            return -1
        # The Gaussian blocks by the fused loop (hk_gaussian_block_f32), from Z's transposed
        # tiles made once here, where its exponents stay in float's range.
        if kind == GAUSSIAN and fused_in_range(
                c, <int>min(n - base, <Py_ssize_t>(b_last - b_first) * rows), xsq, m, zsq):
            tiles = fused_tiles(<float>c, m, d, Z, zsq, NULL, 0, &tiles_block)
            if tiles == NULL:
                free(work_d)
                return -1
    work = <floating*>malloc(<size_t>n_threads * per_thread * sizeof(floating))
    if work == NULL:
        free(work_d)
        free(tiles_block)
        return -1
    for s in prange(slabs, nogil=True, num_threads=n_threads, schedule="dynamic"):
        buf = work + <Py_ssize_t>omp_get_thread_num() * per_thread
        t = buf + <Py_ssize_t>rows * m
        chunk = NULL
        prod = NULL
        tacc = NULL
        if floating is float:
            chunk = t + <Py_ssize_t>rows * k
            prod = chunk + <Py_ssize_t>rows * k
            tacc = work_d + <Py_ssize_t>omp_get_thread_num() * per_thread_d
        acc = sums + s * mk
        for b in range(max(s * n_blocks // slabs, b_first),
                       min((s + 1) * n_blocks // slabs, b_last)):
            if interrupted(it):
                break
            r0 = <Py_ssize_t>b * rows - base
            rr = <int>min(<Py_ssize_t>rows, n - base - r0)
            if floating is float:
                if tiles != NULL:
                    c0 = 0
                    while c0 < m:
                        hk_gaussian_block_f32(rr, d, X + r0 * d, xsq + r0,
                                              tiles + (c0 // HK_FUSED_COLS) * tile_items,
                                              tiles + (c0 // HK_FUSED_COLS) * tile_items
                                              + <Py_ssize_t>d * HK_FUSED_LD,
                                              min(<int>HK_FUSED_COLS, m - c0), <float>c,
                                              1.0 / (sigma * sigma), REFINE_FRACTION_F32,
                                              buf + c0, m)
                        c0 = c0 + HK_FUSED_COLS
                else:
                    kernel_block_t(kind, sigma, rr, m, d, X + r0 * d,
                                   (xsq + r0) if xsq != NULL else NULL, Z, zsq, buf, m)
            else:
                kernel_block_t(kind, sigma, rr, m, d, X + r0 * d,
                               (xsq + r0) if xsq != NULL else NULL, Z, zsq, buf, m)
            if floating is float:
                for j in range(<Py_ssize_t>rr * k):
                    tacc[j] = V[r0 * k + j] if V != NULL else 0.0
                if U != NULL:
                    c0 = 0
                    while c0 < m:
                        cn = min(<int>SUM_CHUNK, m - c0)
                        gemm(False, False, rr, k, cn, 1.0, buf + c0, m,
                              U + <Py_ssize_t>c0 * k, k, 0.0, chunk, k)
                        for j in range(<Py_ssize_t>rr * k):
                            tacc[j] += chunk[j]
                        c0 = c0 + SUM_CHUNK
                for j in range(<Py_ssize_t>rr * k):
                    t[j] = <float>tacc[j]
                gemm(True, False, m, k, rr, 1.0, buf, m, t, k, 0.0, prod, k)
                for j in range(mk):
                    acc[j] += prod[j]
            else:
                if V != NULL:
                    for j in range(<Py_ssize_t>rr * k):
                        t[j] = V[r0 * k + j]
                if U != NULL:
                    gemm(False, False, rr, k, m, 1.0, buf, m, U, k, 1.0 if V != NULL else 0.0,
                         t, k)
                gemm(True, False, m, k, rr, 1.0, buf, m, t, k, 1.0, acc, k)
    free(work)
    free(work_d)
    free(tiles_block)
    return 0


cdef _squared_norms(int kind, const floating[:, ::1] A):
    """Squared row norms of A for the Euclidean kernels, in A's precision (at least one entry,
    so that a pointer to it exists; unused and unset for the Laplace kernel)."""
    if floating is float:
        out = np.empty(max(A.shape[0], 1), dtype=np.float32)
    else:
        out = np.empty(max(A.shape[0], 1))
    cdef floating[::1] o = out
    if kind != LAPLACE and A.shape[0] > 0:
        with nogil:
            sqnorms_t(A.shape[0], A.shape[1], &A[0, 0], &o[0])
    return out


# Bytes of the per-thread tile of kernel_times (for memory estimates), in double; single
# precision takes half of it plus a TILE_ROWS x k product (kernel_times_bytes).
TILE_BYTES = TILE_ROWS * TILE_COLS * 8


def kernel_times_bytes(int k, int n_threads, int itemsize=8):
    """Bytes kernel_times allocates: a tile per thread, in single precision (itemsize 4) also
    its TILE_ROWS x k product."""
    per_thread = TILE_ROWS * TILE_COLS + (TILE_ROWS * k if itemsize == 4 else 0)
    return itemsize * per_thread * n_threads


def kernel_times_matrix(int kind, double sigma, const floating[:, ::1] X,
                        const floating[:, ::1] Y, const floating[:, ::1] V, double[:, ::1] out,
                        int n_threads):
    """out[:] = K(X, Y) @ V with the kernel never stored (kernel_times): X, Y and V all float64
    or all float32 (single precision), out float64.  Trusts its inputs."""
    cdef int m = X.shape[0], n = Y.shape[0], d = X.shape[1], k = V.shape[1], status
    if m == 0 or k == 0:
        return
    cdef floating[::1] xsq = _squared_norms(kind, X)
    cdef floating[::1] ysq = _squared_norms(kind, Y)
    cdef Interrupt it
    interrupt_init(&it)
    with nogil:
        status = kernel_times_t(kind, sigma, m, n, d, &X[0, 0], &xsq[0],
                                &Y[0, 0] if n > 0 else NULL, &ysq[0],
                                &V[0, 0] if n > 0 else NULL, k, &out[0, 0], n_threads, &it)
    if it.raised:
        reraise()
    if status != 0:
        raise MemoryError("kernel_times: no memory for the per-thread tiles")


def kernel_normal_times_matrix(int kind, double sigma, const floating[:, ::1] X,
                               const floating[:, ::1] Z, U, V, double[:, ::1] out,
                               int n_threads):
    """out[:] = K(X, Z)^T (K(X, Z) U + V), U (m x k, X's dtype) and V (n x k, float64)
    C-contiguous or None (zero), the kernel never stored (kernel_normal_times); X and Z both
    float64 or both float32 (single precision).  Trusts its inputs."""
    cdef int n = X.shape[0], m = Z.shape[0], d = X.shape[1], k = out.shape[1], status
    cdef const floating[:, ::1] u
    cdef const double[:, ::1] v
    cdef const floating* up = NULL
    cdef const double* vp = NULL
    if m == 0 or k == 0:
        return
    if U is not None and n > 0:
        u = U
        up = &u[0, 0]
    if V is not None and n > 0:
        v = V
        vp = &v[0, 0]
    cdef floating[::1] xsq = _squared_norms(kind, X)
    cdef floating[::1] zsq = _squared_norms(kind, Z)
    cdef Interrupt it
    interrupt_init(&it)
    with nogil:
        status = kernel_normal_times_t(kind, sigma, n, m, d, &X[0, 0] if n > 0 else NULL,
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
                               const floating[:, ::1] X, const floating[:, ::1] Z, U, V,
                               double[:, :, ::1] sums, int n_threads):
    """Blocks b_first .. b_last - 1 of kernel_normal_times on n rows in all (normal_times_blocks):
    X (and V) hold their rows, from row b_first * rows; sums (slabs, m, k) the slabs' partial
    sums, added to in place.  U (m x k, X's dtype), V (float64) C-contiguous or None (zero).
    Trusts its inputs."""
    cdef int m = Z.shape[0], d = Z.shape[1], k = sums.shape[2], status
    cdef const floating[:, ::1] u
    cdef const double[:, ::1] v
    cdef const floating* up = NULL
    cdef const double* vp = NULL
    if m == 0 or k == 0 or b_last <= b_first:
        return
    if U is not None:
        u = U
        up = &u[0, 0]
    if V is not None:
        v = V
        vp = &v[0, 0]
    cdef floating[::1] xsq = _squared_norms(kind, X)
    cdef floating[::1] zsq = _squared_norms(kind, Z)
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


def normal_times_bytes(int n, int m, int k, int n_threads, int itemsize=8):
    """Bytes kernel_normal_times allocates: a block and its products per thread, the slabs'
    partial sums (double); in single precision (itemsize 4) per thread also a chunk product,
    an m x k product and t in double."""
    cdef int rows = normal_rows(m)
    cdef int slabs = min(<int>NORMAL_SLABS, (n + rows - 1) // rows)
    if itemsize == 4:
        return (4 * n_threads * (rows * (m + 2 * k) + m * k) + 8 * n_threads * rows * k
                + 8 * slabs * m * k)
    return 8 * (n_threads * rows * (m + k) + slabs * m * k)


def fill_kernel_matrix(int kind, double sigma, const floating[:, ::1] X,
                       const floating[:, ::1] Y, floating[:, ::1] out, int n_threads):
    """out[:] = K(X, Y), all float64 or all float32 (single precision).  Trusts its inputs: the
    Python face validates them."""
    cdef int m = X.shape[0], n = Y.shape[0], d = X.shape[1]
    if m == 0 or n == 0:
        return
    cdef floating[::1] xsq = _squared_norms(kind, X)
    cdef floating[::1] ysq = _squared_norms(kind, Y)
    cdef Interrupt it
    interrupt_init(&it)
    with nogil:
        kernel_tiles_t(kind, sigma, m, n, d, &X[0, 0], &xsq[0], &Y[0, 0], &ysq[0],
                       &out[0, 0], out.shape[1], n_threads, &it)
    if it.raised:
        reraise()


def kernel_lower_block(int kind, double sigma, const floating[:, ::1] X):
    """The lower triangle of K(X, X) by kernel_block_lower (the strict upper triangle zero), in
    X's precision, single-threaded: the cores' symmetric blocks, for tests."""
    cdef int m = X.shape[0], d = X.shape[1]
    out = np.zeros((m, m), dtype=np.float32 if floating is float else np.float64)
    if m == 0:
        return out
    cdef floating[:, ::1] o = out
    cdef floating[::1] xsq = _squared_norms(kind, X)
    with nogil:
        kernel_block_lower_t(kind, sigma, m, d, &X[0, 0], &xsq[0], &o[0, 0], m)
    return out


def kernel_values(int kind, const double[::1] s):
    """The kernel applied to an array of scaled distances (used by tests and diagnostics)."""
    out = np.empty(s.shape[0])
    cdef double[::1] o = out
    cdef Py_ssize_t i
    for i in range(s.shape[0]):
        o[i] = kernel_from_scaled(kind, s[i])
    return out


def map_values(int kind, floating[::1] s, bint inplace=False):
    """The vectorised map of the engine applied to scaled distances, in their precision (float32:
    the single-precision exponential and formulas; float64: bitwise kernel_values).  A new
    array, or ``s`` itself overwritten with ``inplace`` (experiments/kernel_engine_speed.py
    times the map on an array in cache)."""
    cdef floating[::1] o = s if inplace else s.copy()
    if o.shape[0] > 0:
        with nogil:
            map_scaled(kind, &o[0], o.shape[0])
    return np.asarray(o)
