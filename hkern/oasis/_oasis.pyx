"""Compiled core of oASIS column selection (spec: doc/specs/oasis.md).

State for a block of rows of the n x n PSD matrix G (all rows for the serial algorithm, one
rank's rows under MPI), in the pivoted-Cholesky form the spec recommends for stability
(doc/specs/oasis.md, section 8, item 6, and Corrections 1):

    F      rows x capacity   G~ = F F^T,  F[:, t] the t-th Cholesky column (selection order),
                             stored in panels of PANEL columns: F[j, t] = Fp[t // PANEL, j,
                             t % PANEL], so that for consecutive rows each panel is one
                             sequential stream (row-major F with a row stride of capacity
                             restarted the hardware prefetcher at every row: 2.6x the bound)
    delta  rows              Delta_j = G(j, j) - ||F[j, :k]||^2 = diag(G - G~)_j

Adding pivot i (score Delta_i, row g = F[i, :k]):

    f_j = (G(j, i) - F[j, :k] . g) / sqrt(Delta_i),   Delta_j -= f_j^2,   F[:, k] = f.

This is algebraically the update of doc/specs/oasis.md, section 3 (f_j^2 = Delta_i r_j^2 with
r = (c - C W^{-1} b) / Delta_i), but it never forms W^{-1}: the entries of F are bounded by
sqrt(max diag), so round-off does not grow with cond(W).  (Keeping W^{-1} by rank-1
block-inverse updates, as the paper does, lost accuracy like cond(W)^2 eps: on a plain Gaussian
kernel matrix the scores drifted by 1e-8 by k ~ 90 and round-off decided the selection.)
C = G(:, Lambda) and W^{-1} = (L L^T)^{-1}, with L = F[Lambda, :] lower triangular, are formed
once at the end.

One step is one pass over the rows: it reads k numbers per row and writes one, the l^2 n / 2
doubles of the memory-bandwidth bound.  Each dot product uses eight accumulators in a fixed
order (_oasis_defs.h), so every row is computed by the same operations whatever the thread
count, chunk or MPI rank, which is what lets MPI ranks reproduce the serial selection exactly.
"""
from cython.parallel cimport prange
from libc.math cimport INFINITY, sqrt


cdef extern from "_oasis_defs.h" nogil:
    double hk_dot8(const double* x, const double* y, Py_ssize_t k)
from hkern._linalg.interrupt cimport Interrupt, interrupt_init, interrupted, reraise
from hkern.kernels._kernels cimport kernel_pair

import numpy as np

# Rows per chunk of the pass and of the pivot reduction: fixed, so ties resolve identically for
# any thread count.
cdef int CHUNK = 4096
# Columns per panel of F (512 bytes of a row).
cdef enum:
    PANEL = 64


cdef class OasisCore:
    """oASIS state for a block of rows; see the module docstring.

    Parameters
    ----------
    n_rows : int
    capacity : int
        Largest number of columns (l).
    X : (n_rows, d) float64 or None
        The block's points, for an implicit kernel matrix (with kind, sigma).
    G_rows : (n_rows, n) float64 or None
        The block's rows of an explicit PSD matrix (serial only; n_rows == n).
    diag : (n_rows,) float64
        G(j, j) for the block's rows.
    """
    cdef readonly Py_ssize_t n, capacity, k
    cdef readonly int kind, d, explicit
    # Set when Ctrl-C cut a pass short: F and Delta are then partly updated, so the core
    # refuses further steps (the selection it served has ended with KeyboardInterrupt).
    cdef readonly bint cut_short
    cdef readonly double sigma
    # Read-only inputs (const: memory-mapped or otherwise read-only arrays are accepted).
    cdef const double[:, ::1] X
    cdef const double[:, ::1] G
    cdef double[:, :, ::1] F
    cdef double[::1] delta
    cdef const double[::1] diag
    cdef unsigned char[::1] selected
    cdef double[::1] g
    cdef double[::1] chunk_best
    cdef Py_ssize_t[::1] chunk_arg
    cdef double[::1] chunk_sum
    cdef double[::1] chunk_min

    def __init__(self, Py_ssize_t capacity, diag, X=None, G_rows=None, int kind=0,
                 double sigma=1.0):
        self.diag = np.ascontiguousarray(diag, dtype=np.float64)
        self.n = self.diag.shape[0]
        self.capacity = capacity
        self.k = 0
        self.explicit = G_rows is not None
        if self.explicit:
            self.G = G_rows
            self.d = 0
        else:
            self.X = X
            self.d = X.shape[1]
        self.kind = kind
        self.sigma = sigma
        self.F = np.zeros(((max(capacity, 1) + PANEL - 1) // PANEL, max(self.n, 1), PANEL))
        self.delta = np.array(self.diag, copy=True)
        self.selected = np.zeros(self.n, dtype=np.uint8)
        self.g = np.zeros(max(capacity, 1))
        n_chunks = max(1, (self.n + CHUNK - 1) // CHUNK)
        self.chunk_best = np.empty(n_chunks)
        self.chunk_arg = np.empty(n_chunks, dtype=np.intp)
        self.chunk_sum = np.empty(n_chunks)
        self.chunk_min = np.empty(n_chunks)

    cdef inline double _entry(self, Py_ssize_t j, const double* z, Py_ssize_t gi) noexcept nogil:
        """G(j, pivot): from the kernel and the pivot's point z, or row gi of explicit G."""
        if self.explicit:
            return self.G[gi, j]
        return kernel_pair(self.kind, &self.X[j, 0], z, self.d, self.sigma)

    cdef void _pass(self, const double* z, Py_ssize_t gi, double delta_i, Py_ssize_t local_i,
                    int n_threads, Interrupt* it) noexcept nogil:
        """The fused update of one step (self.g holds the pivot's row F[i, :k]), plus the chunk
        summaries: best unselected Delta and its row, sum and minimum of unselected Delta.
        delta_i = 0 only refreshes the summaries.  Checks for Ctrl-C before each chunk of
        CHUNK rows (a pass at n = 10^6, k = 2000 reads 16 GB)."""
        cdef Py_ssize_t k = self.k, n_chunks = self.chunk_best.shape[0], ch, j, j0, j1
        cdef double inv_root = 1.0 / sqrt(delta_i) if delta_i > 0.0 else 0.0
        cdef double u, c, f, best, total, low, dj
        cdef Py_ssize_t arg, kp = k // PANEL, kr = k % PANEL, p
        for ch in prange(n_chunks, nogil=True, num_threads=n_threads, schedule="static"):
            if interrupted(it):
                continue
            j0 = ch * CHUNK
            j1 = min(j0 + CHUNK, self.n)
            best = -INFINITY
            arg = -1
            total = 0.0
            low = INFINITY
            for j in range(j0, j1):
                if j == local_i:
                    self.selected[j] = 1
                if self.selected[j]:
                    # G~ reproduces selected rows exactly: f_j and Delta_j are 0 in exact
                    # arithmetic, and are kept exactly 0 (F[j, k] = 0 keeps F[Lambda] triangular).
                    if delta_i > 0.0:
                        self.F[kp, j, kr] = sqrt(delta_i) if j == local_i else 0.0
                    self.delta[j] = 0.0
                    continue
                if delta_i > 0.0:
                    c = self._entry(j, z, gi)
                    u = 0.0
                    for p in range(kp):
                        u = u + hk_dot8(&self.F[p, j, 0], &self.g[p * PANEL], PANEL)
                    if kr > 0:
                        u = u + hk_dot8(&self.F[kp, j, 0], &self.g[kp * PANEL], kr)
                    f = (c - u) * inv_root
                    self.F[kp, j, kr] = f
                    self.delta[j] = self.delta[j] - f * f
                dj = self.delta[j]
                if dj < low:
                    low = dj
                total = total + dj
                if dj > best:
                    best = dj
                    arg = j
            self.chunk_best[ch] = best
            self.chunk_arg[ch] = arg
            self.chunk_sum[ch] = total
            self.chunk_min[ch] = low

    def pivot(self):
        """(Delta, local row) of the largest unselected Delta (ties: smallest row), and the sum
        and minimum of Delta over the block's unselected rows; (-inf, -1, 0, inf) if none."""
        cdef Py_ssize_t ch, arg = -1
        cdef double best = -INFINITY, total = 0.0, low = INFINITY
        for ch in range(self.chunk_best.shape[0]):
            if self.chunk_best[ch] > best:
                best = self.chunk_best[ch]
                arg = self.chunk_arg[ch]
            total += self.chunk_sum[ch]
            low = min(low, self.chunk_min[ch])
        return best, arg, total, low

    def sample(self, double target):
        """The unselected row where the running sum of Delta (clipped at 0) first exceeds
        target (random pivoting in proportion to Delta); -1 if none."""
        cdef Py_ssize_t j, last = -1
        cdef double acc = 0.0
        for j in range(self.n):
            if not self.selected[j] and self.delta[j] > 0.0:
                acc += self.delta[j]
                last = j
                if acc > target:
                    return j
        return last

    def initialize(self, const Py_ssize_t[::1] local_rows, const double[:, ::1] init_F,
                   int n_threads=1):
        """Start from k0 columns: init_F (rows x k0) = G(rows, Lambda0) L0^{-T} for this block,
        with W0 = G(Lambda0, Lambda0) = L0 L0^T, and local_rows the rows of Lambda0 it owns."""
        cdef Py_ssize_t j, t, k0 = init_F.shape[1]
        for j in range(self.n):
            for t in range(k0):
                self.F[t // PANEL, j, t % PANEL] = init_F[j, t]
        self.k = k0
        for t in range(local_rows.shape[0]):
            self.selected[local_rows[t]] = 1
        with nogil:
            self._recompute_delta(n_threads, NULL)

    cdef void _recompute_delta(self, int n_threads, Interrupt* it) noexcept nogil:
        """Delta_j = d_j - ||F[j, :k]||^2 for every row (O(rows k)), then the summaries."""
        cdef Py_ssize_t j, p, k = self.k, kp = k // PANEL, kr = k % PANEL
        cdef double acc
        for j in prange(self.n, nogil=True, num_threads=n_threads, schedule="static"):
            if interrupted(it):
                continue
            if self.selected[j]:
                self.delta[j] = 0.0
            else:
                acc = 0.0
                for p in range(kp):
                    acc = acc + hk_dot8(&self.F[p, j, 0], &self.F[p, j, 0], PANEL)
                if kr > 0:
                    acc = acc + hk_dot8(&self.F[kp, j, 0], &self.F[kp, j, 0], kr)
                self.delta[j] = self.diag[j] - acc
        self._pass(NULL, -1, 0.0, -1, n_threads, it)

    def recompute_delta(self, int n_threads=1):
        """Recompute Delta from F (the periodic refresh; O(rows k))."""
        self._check_whole()
        cdef Interrupt it
        interrupt_init(&it)
        with nogil:
            self._recompute_delta(n_threads, &it)
        self._after_pass(it)

    def _check_whole(self):
        if self.cut_short:
            raise RuntimeError("OasisCore: a pass was interrupted (Ctrl-C) and left the state "
                               "partly updated; start a new selection")

    cdef int _after_pass(self, Interrupt it) except -1:
        """Raise the KeyboardInterrupt of a pass cut short, marking the core unusable."""
        if it.raised:
            self.cut_short = True
            reraise()
        return 0

    def row(self, Py_ssize_t j):
        """F[j, :k]: what the pivot's owner hands to every block (O(k) numbers)."""
        return self.F_array_rows(j, j + 1)[0]

    def step(self, const double[::1] g, double delta_i, const double[::1] z=None,
             Py_ssize_t global_i=-1, Py_ssize_t local_i=-1, int n_threads=1):
        """Add the pivot with row g = F[i, :k], score delta_i > 0, point z (data mode) or global
        index global_i (explicit mode); local_i is its row in this block or -1."""
        cdef Py_ssize_t k = self.k, a
        cdef const double* zp = NULL
        self._check_whole()
        if k >= self.capacity:
            raise ValueError("OasisCore: capacity reached")
        if not delta_i > 0.0:
            raise ValueError("OasisCore: the pivot's score must be positive")
        if not self.explicit:
            zp = &z[0]
        for a in range(k):
            self.g[a] = g[a]
        cdef Interrupt it
        interrupt_init(&it)
        with nogil:
            self._pass(zp, global_i, delta_i, local_i, n_threads, &it)
        self._after_pass(it)
        self.k = k + 1

    def F_array_rows(self, Py_ssize_t lo, Py_ssize_t hi):
        """F[lo:hi, :k] as a plain (hi - lo) x k array (hi == lo allowed: an MPI rank may own
        no rows).  Filled panel by panel: one copy of the result, no panel-wide temporary."""
        panels = np.asarray(self.F)
        out = np.empty((hi - lo, self.k))
        for p in range((self.k + PANEL - 1) // PANEL):
            width = min(PANEL, self.k - p * PANEL)
            out[:, p * PANEL: p * PANEL + width] = panels[p, lo:hi, :width]
        return out

    @property
    def F_array(self):
        """F (rows x k), a copy: G~ restricted to this block's rows is F F^T."""
        return self.F_array_rows(0, self.n)

    @property
    def delta_array(self):
        return np.asarray(self.delta)

    @property
    def selected_array(self):
        return np.asarray(self.selected).astype(bool)
