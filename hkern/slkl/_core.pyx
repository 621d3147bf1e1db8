"""Compiled core of SLKL: stochastic coordinate descent over the conical weights mu >= 0.

Objective (doc/specs/slkl.md, section 1), for one target vector y (n,) and candidates c_m:

    F(mu) = y^T (I + K~(mu) / lam)^{-1} y + nu sum_m mu_m,   K~(mu) = sum_m mu_m c_m c_m^T.

State (doc/specs/slkl.md, section 2, "State and shapes"), never an n x n matrix:

    Ct   cap x n   rows 0..m0-1 are the active columns c_{act[p]} (C^T, row-major)
    G    cap x cap G = (D^{-1} + C^T C / lam)^{-1}, m0 x m0 block used, kept symmetric
    q, w           q = C^T y, w = G q
    mu, pos        weights of all M candidates; pos[m] = row p of G, or -1 when mu_m = 0
    act            act[p] = candidate index in row p

One coordinate step on an inactive candidate m costs O(n m0 + m0^2): t = C^T c_m, u = G t,
a = y^T c_m / lam - w^T t / lam^2, b = ||c_m||^2 / lam - t^T u / lam^2, then one of the four
updates of G (Sherman-Morrison, deletion, block append) and F += -lam d a^2 / (1 + d b) + nu d
for the change d of mu_m (Sherman-Morrison at the n x n level, O(1)).  For an active candidate
(row p) a = w_p / (lam mu_m) and b = (1 - G_pp / mu_m) / mu_m, the same quantities without the
cancellation of the general forms at large weights (see _ab), in O(m0^2).

Rounding drift of the rank-1 updates is bounded by recomputing G from its definition by a
Cholesky factorisation every `refresh_every` updates, and whenever an update's pivot is not
positive in floating point (doc/specs/slkl.md, section 5 J).

The predictor's coefficients are beta = G q / lam (times 1 / sqrt(k(x_m, x_m))), computed at the
end from a fresh Cholesky factorisation of G^{-1} (:meth:`SlklCore.coefficients`), never from
the tracked G nor from mu * C^T (y / lam - C w / lam^2): that form subtracts two nearly equal
n-vectors and multiplies the difference by mu, which loses every digit once the weights are
large (targets in ordinary units).

Invariants the nogil code keeps whatever the values (NaN or inf included): pos[m] >= 0 exactly
for the m0 active candidates, m0 <= cap <= M, and no step writes a row of Ct or G at or beyond
cap.  A non-finite a, b, weight or F, a failed Cholesky factorisation, a full active set or a
candidate index outside [0, M) ends the step with a negative code, before any state changes
except for a failed refresh; the core then refuses further steps (last_error).

Thread count: every result is bitwise identical for any n_threads.  The O(n m0) products
t = C^T c_m are gemv calls on a fixed grid of row blocks, the refresh uses the shim's tiled
syrk/potrf/trsm, kernel columns the kernel engine's fixed tiles.  The caller must limit BLAS to
one thread (hkern._threads.blas_threads(1)) around every method, as for the shim's tiled
routines.
"""
from libc.math cimport INFINITY, fabs, isfinite, sqrt
from libc.string cimport memcpy
from cython.parallel cimport prange

from hkern._linalg.interrupt cimport Interrupt, interrupt_init, interrupted, reraise
from hkern._linalg.shim cimport dot, gemv, ger
from hkern._linalg.tiled cimport potrf_tiled, syrk_tiled, trsm_tiled
from hkern.kernels._kernels cimport kernel_tiles

import numpy as np

cdef enum:
    # Rows of C^T per gemv call in t = C^T c (a fixed grid: the same calls for any thread count).
    ROW_TILE = 32
    # A kernel value costs about this many gemv entries (exp and the distance): columns
    # computed on the fly use n_threads when COLUMN_WORK * n reaches parallel_work.
    COLUMN_WORK = 128
    N_KERNELS = 6

# n * rows from which the row blocks of rows_times / row_sqnorms are spread over threads.  A step
# streams C (8 n m0 bytes) once; measured on this project's 2-core machines with m0 = 100, one vs
# two threads: 21 vs 14 us at n = 2000, 526 vs 361 us at n = 32000, 3.1 vs 2.5 ms at n = 128000,
# but with the cores oversubscribed (other jobs running) two threads were up to 4x slower, the
# OpenMP fork/join of every step waiting for a descheduled thread.  From 1M entries (about
# 0.1 ms a step) that risk is worth taking.  Results are the same either way; tests lower the
# threshold to run the parallel branch.
cdef Py_ssize_t parallel_work = 1 << 20


def _set_parallel_work(Py_ssize_t value):
    """Set the threshold above (returns the previous one); for tests of the parallel branch."""
    global parallel_work
    old, parallel_work = parallel_work, value
    return old


cdef void rows_times(int m, int n, const double* A, int lda, const double* x, double* out,
                     int n_threads) noexcept nogil:
    """out = A x for a row-major m x n matrix A: one gemv per block of ROW_TILE rows.

    The blocks do not depend on n_threads, so every entry comes from the same BLAS call
    whichever thread runs it (BLAS limited to one thread by the caller).
    """
    cdef int nb = (m + ROW_TILE - 1) // ROW_TILE, blk, r0
    if m == 0 or n == 0:
        return
    if n_threads > 1 and nb > 1 and <Py_ssize_t>m * n >= parallel_work:
        for blk in prange(nb, nogil=True, num_threads=n_threads, schedule="static"):
            r0 = blk * ROW_TILE
            gemv(False, min(<int>ROW_TILE, m - r0), n, 1.0, A + <Py_ssize_t>r0 * lda, lda, x, 1,
                 0.0, out + r0, 1)
    else:
        for blk in range(nb):
            r0 = blk * ROW_TILE
            gemv(False, min(<int>ROW_TILE, m - r0), n, 1.0, A + <Py_ssize_t>r0 * lda, lda, x, 1,
                 0.0, out + r0, 1)


cdef void row_sqnorms(int m, int n, const double* A, int lda, double* out,
                      int n_threads) noexcept nogil:
    """out[i] = ||A[i, :]||^2, one ddot per row (the same call for any thread count)."""
    cdef int i
    if n_threads > 1 and <Py_ssize_t>m * n >= parallel_work:
        for i in prange(m, nogil=True, num_threads=n_threads, schedule="static"):
            out[i] = dot(n, A + <Py_ssize_t>i * lda, 1, A + <Py_ssize_t>i * lda, 1)
    else:
        for i in range(m):
            out[i] = dot(n, A + <Py_ssize_t>i * lda, 1, A + <Py_ssize_t>i * lda, 1)


cdef int solve_normal(int m, int n, const double* C, int ldc, const double* dinv, double lam,
                      double* work, int ldw, int nrhs, double* B, int ldb,
                      int n_threads, Interrupt* it) noexcept nogil:
    """B <- (diag(dinv) + C C^T / lam)^{-1} B by Cholesky; C holds m rows of length n.

    work (m x m, leading dimension ldw) receives the factor.  Returns potrf's info (0: solved;
    > 0: not positive definite to working precision, B untouched).  When interrupted (it.raised)
    work and B are unfinished.
    """
    cdef int i, info
    syrk_tiled(False, m, n, 1.0 / lam, C, ldc, 0.0, work, ldw, n_threads, it)
    for i in range(m):
        work[<Py_ssize_t>i * ldw + i] += dinv[i]
    info = potrf_tiled(m, work, ldw, n_threads, it)
    if info != 0:
        return info
    trsm_tiled(True, True, False, False, m, nrhs, 1.0, work, ldw, B, ldb, n_threads, it)
    trsm_tiled(True, True, True, False, m, nrhs, 1.0, work, ldw, B, ldb, n_threads, it)
    return 0


def solve_fixed_weights(const double[:, ::1] cols, const double[::1] mu, const double[::1] y,
                        double lam, int n_threads=1):
    """Coefficients of KRR with the kernel sum_m mu_m c_m c_m^T for fixed weights mu > 0.

    cols (M, n) holds the columns c_m as rows.  Returns (x, q, info): q = C^T y and
    x = G q with G = (D^{-1} + C^T C / lam)^{-1}, so beta = x / lam and
    y^T (I + K~/lam)^{-1} y = ||y||^2 - q^T x / lam; info > 0 when G^{-1} is not positive
    definite to working precision (x is then meaningless).  BLAS limited to one thread by the
    caller; bitwise identical for any n_threads.
    """
    cdef int M = cols.shape[0], n = cols.shape[1], i
    if y.shape[0] != n or mu.shape[0] != M:
        raise ValueError(f"solve_fixed_weights: cols is {M} x {n}, y has {y.shape[0]} and mu "
                         f"{mu.shape[0]} entries")
    if M == 0:
        return np.zeros(0), np.zeros(0), 0
    mu_arr = np.asarray(mu)
    if not (np.all(np.isfinite(mu_arr)) and np.all(mu_arr > 0)):
        raise ValueError("solve_fixed_weights: every weight must be finite and > 0")
    dinv_arr = 1.0 / mu_arr
    if not np.all(np.isfinite(dinv_arr)):
        raise ValueError("solve_fixed_weights: a weight is too small (1 / mu overflows)")
    cdef double[::1] dinv = dinv_arr
    cdef double[::1] q = np.empty(M)
    cdef double[:, ::1] work = np.empty((M, M))
    cdef int info
    with nogil:
        rows_times(M, n, &cols[0, 0], n, &y[0], &q[0], n_threads)
    x_arr = np.array(q, copy=True)
    cdef double[::1] x = x_arr
    cdef Interrupt it
    interrupt_init(&it)
    with nogil:
        info = solve_normal(M, n, &cols[0, 0], n, &dinv[0], lam, &work[0, 0], M, 1, &x[0], 1,
                            n_threads, &it)
    if it.raised:
        reraise()
    return x_arr, np.asarray(q), info


cdef class SlklCore:
    """SLKL state for one target vector; see the module docstring.

    Parameters
    ----------
    y : (n,) float64
    lam, nu : float
        Ridge and l1 parameters, finite and > 0.
    step_rule : int
        STEP_EXACT, STEP_NEWTON or STEP_PAPER.
    scale : (M,) float64
        1 / sqrt(k(x_m, x_m)) for each candidate.
    cand : (M,) intp
        Candidate rows of X.
    cols : (M, n) float64 or None
        Precomputed columns c_m (rows).  When None the columns are computed when drawn from
        X (n, d), its squared row norms xsq, kind and sigma.
    capacity : int
        Initial room for active columns (grown on request up to M).
    refresh_every : int
        Recompute G from scratch every this many updates (0: only when needed).
    mu_floor : float
        A new weight with mu_new * b below this is set to 0 (its rank-1 term changes
        K~_{lam,mu}^{-1} by less than a relative mu_floor).
    n_threads : int
        Threads of the O(n m0) products, the refresh and on-the-fly kernel columns; results
        do not depend on it.

    Raises
    ------
    ValueError
        For inconsistent shapes, candidate rows outside X, or non-finite or non-positive
        parameters (the nogil code trusts them).
    """

    def __init__(self, const double[::1] y, double lam, double nu, int step_rule,
                 const double[::1] scale, const Py_ssize_t[::1] cand, cols=None, X=None, xsq=None,
                 int kind=0, double sigma=1.0, Py_ssize_t capacity=256, int refresh_every=1000,
                 double mu_floor=1e-12, int n_threads=1):
        cdef Py_ssize_t n = y.shape[0], M = cand.shape[0]
        if n < 1 or M < 1:
            raise ValueError(f"SlklCore needs n >= 1 and M >= 1, got n={n}, M={M}")
        if scale.shape[0] != M:
            raise ValueError(f"scale has {scale.shape[0]} entries for M={M} candidates")
        for name, value in (("lam", lam), ("nu", nu)):
            if not (np.isfinite(value) and value > 0):
                raise ValueError(f"{name} must be finite and > 0, got {value}")
        if not (np.isfinite(mu_floor) and mu_floor >= 0):
            raise ValueError(f"mu_floor must be finite and >= 0, got {mu_floor}")
        if step_rule not in (STEP_EXACT, STEP_NEWTON, STEP_PAPER):
            raise ValueError(f"step_rule must be 0, 1 or 2, got {step_rule}")
        if capacity < 1 or refresh_every < 0 or n_threads < 1:
            raise ValueError(f"capacity >= 1, refresh_every >= 0 and n_threads >= 1 are needed, "
                             f"got {capacity}, {refresh_every}, {n_threads}")
        if not np.all(np.isfinite(np.asarray(scale))):
            raise ValueError("scale must be finite")
        self.n = n
        self.M = M
        self.y = y
        self.lam = lam
        self.nu = nu
        self.step_rule = step_rule
        self.scale = scale
        self.cand = cand
        self.kind = kind
        self.sigma = sigma
        self.refresh_every = refresh_every
        self.mu_floor = mu_floor
        self.n_threads = n_threads
        self.precomputed = cols is not None
        self.yc_all = np.empty(M)
        self.cc_all = np.empty(M)
        if self.precomputed:
            self.cols = cols
            if self.cols.shape[0] != M or self.cols.shape[1] != n:
                raise ValueError(f"cols must have shape (M, n) = ({M}, {n}), got "
                                 f"({self.cols.shape[0]}, {self.cols.shape[1]})")
            with nogil:
                rows_times(<int>M, <int>n, &self.cols[0, 0], <int>n, &y[0], &self.yc_all[0],
                           n_threads)
                row_sqnorms(<int>M, <int>n, &self.cols[0, 0], <int>n, &self.cc_all[0],
                            n_threads)
            self.col = np.empty(1)
        else:
            if X is None or xsq is None:
                raise ValueError("SlklCore needs cols, or X and xsq")
            self.X = X
            self.xsq = xsq
            if self.X.shape[0] != n or self.xsq.shape[0] != n or self.X.shape[1] < 1:
                raise ValueError(f"X must have shape (n, d) = ({n}, d >= 1) and xsq n entries, "
                                 f"got ({self.X.shape[0]}, {self.X.shape[1]}) and "
                                 f"{self.xsq.shape[0]}")
            if not (0 <= kind < N_KERNELS) or not (np.isfinite(sigma) and sigma > 0):
                raise ValueError(f"kind must be in [0, {N_KERNELS}) and sigma finite > 0, got "
                                 f"{kind}, {sigma}")
            cand_arr = np.asarray(cand)
            if cand_arr.min() < 0 or cand_arr.max() >= n:
                raise ValueError(f"cand must index rows of X in [0, {n})")
            self.d = self.X.shape[1]
            self.col = np.empty(n)
        self.yy = dot(<int>n, &y[0], 1, &y[0], 1)
        self.F = self.yy
        self.mu = np.zeros(M)
        self.pos = np.full(M, -1, dtype=np.intp)
        self.m0 = 0
        self.cap = 0
        self.grow(max(1, min(capacity, M)))

    def grow(self, Py_ssize_t new_cap):
        """Room for new_cap active columns (clipped to [m0, M]); the state is copied
        (O(n m0 + m0^2))."""
        new_cap = min(max(new_cap, self.m0, 1), self.M)
        if new_cap == self.cap:
            return
        cdef Py_ssize_t m0 = self.m0
        Ct = np.empty((new_cap, self.n))
        G = np.zeros((new_cap, new_cap))
        act = np.full(new_cap, -1, dtype=np.intp)
        q = np.zeros(new_cap)
        if m0:
            Ct[:m0] = np.asarray(self.Ct)[:m0]
            G[:m0, :m0] = np.asarray(self.G)[:m0, :m0]
            act[:m0] = np.asarray(self.act)[:m0]
            q[:m0] = np.asarray(self.q)[:m0]
        self.Ct, self.G, self.act, self.q = Ct, G, act, q
        self.work = np.zeros((new_cap, new_cap))
        self.w = np.zeros(new_cap)
        self.t = np.zeros(new_cap)
        self.u = np.zeros(new_cap)
        self.g = np.zeros(new_cap)
        self.cap = new_cap
        with nogil:
            self._update_w()

    # ------------------------------------------------------------------------------------------
    # nogil core
    # ------------------------------------------------------------------------------------------

    cdef void _watch(self) noexcept:
        """Arm the core's Interrupt for the entry point about to run a nogil block."""
        interrupt_init(&self.interrupt)
        self.it = &self.interrupt

    cdef int _unwatch(self) except -1:
        """Disarm it after the nogil block, raising KeyboardInterrupt if a handler raised."""
        self.it = NULL
        if self.interrupt.raised:
            reraise()
        return 0

    cdef const double* _column(self, Py_ssize_t m, double* yc, double* cc) noexcept nogil:
        """c_m with y^T c_m and ||c_m||^2: precomputed, the active copy, or computed now."""
        cdef Py_ssize_t p = self.pos[m], r, i, n = self.n
        cdef const double* c
        if self.precomputed:
            yc[0] = self.yc_all[m]
            cc[0] = self.cc_all[m]
            return &self.cols[m, 0]
        if p >= 0:
            c = &self.Ct[p, 0]
            yc[0] = self.q[p]
        else:
            r = self.cand[m]
            kernel_tiles(self.kind, self.sigma, 1, <int>n, self.d, &self.X[r, 0], &self.xsq[r],
                         &self.X[0, 0], &self.xsq[0], &self.col[0], <int>n,
                         self.n_threads if COLUMN_WORK * n >= parallel_work else 1, self.it)
            if self.scale[m] != 1.0:
                for i in range(n):
                    self.col[i] *= self.scale[m]
            c = &self.col[0]
            yc[0] = dot(<int>n, c, 1, &self.y[0], 1)
        cc[0] = dot(<int>n, c, 1, c, 1)
        return c

    cdef void _ab(self, Py_ssize_t m, const double* c, double yc, double cc, double* a,
                  double* b) noexcept nogil:
        """a = y^T K^{-1} c, b = c^T K^{-1} c (K = lam I + K~(mu)) for candidate m's column c;
        leaves t = C^T c, u = G t when m is inactive (case 4 needs them).

        For an inactive candidate from t and u (doc/specs/slkl.md, section 2).  For an active
        one (row p of G) the same quantities are a = w_p / (lam mu) and b = (1 - G_pp / mu) / mu
        (from t = lam (G^{-1} - D^{-1}) e_p): the general forms subtract nearly equal numbers once
        mu ||c||^2 >> lam (q_p - (q_p - w_p / mu), 1 / lam - G_pp / lam^2), losing every digit
        for large weights, where these forms lose none.  b keeps the general form while
        G_pp / mu > 1/2 (small weights), where it is the accurate one.
        """
        cdef int m0 = <int>self.m0, n = <int>self.n, cap = <int>self.cap
        cdef Py_ssize_t p = self.pos[m]
        cdef double il = 1.0 / self.lam, mu = 0.0, r = 1.0
        if m0 == 0:
            a[0] = yc * il
            b[0] = cc * il
            return
        if p >= 0:
            mu = self.mu[m]
            r = self.G[p, p] / mu
            a[0] = self.w[p] * il / mu
            if r < 0.5:
                b[0] = (1.0 - r) / mu          # O(1): t and u are not needed (cases 2 and 3)
                return
        rows_times(m0, n, &self.Ct[0, 0], n, c, &self.t[0], self.n_threads)
        gemv(False, m0, m0, 1.0, &self.G[0, 0], cap, &self.t[0], 1, 0.0, &self.u[0], 1)
        if p < 0:
            a[0] = yc * il - dot(m0, &self.w[0], 1, &self.t[0], 1) * il * il
        b[0] = cc * il - dot(m0, &self.t[0], 1, &self.u[0], 1) * il * il

    cdef double _new_weight(self, double mu_old, double a, double b) noexcept nogil:
        cdef double h, mu_new
        if self.step_rule == STEP_EXACT:
            # argmin over t of -lam a^2 t / (1 + t b) + nu t: (1 + t b)^2 = lam a^2 / nu.
            mu_new = mu_old + (fabs(a) * sqrt(self.lam / self.nu) - 1.0) / b
        else:
            h = self.lam * a * a * b
            if self.step_rule == STEP_NEWTON:
                h *= 2.0
            if h <= 0.0:
                return 0.0
            mu_new = mu_old + (self.lam * a * a - self.nu) / h
        if mu_new * b <= self.mu_floor:
            return 0.0
        return mu_new       # NaN or inf stay as they are: _set refuses them

    cdef void _update_w(self) noexcept nogil:
        cdef int m0 = <int>self.m0
        gemv(False, m0, m0, 1.0, &self.G[0, 0], <int>self.cap, &self.q[0], 1, 0.0, &self.w[0], 1)

    cdef int _fail(self, int code) noexcept nogil:
        """Record a failure (the core then refuses further steps) and return its code."""
        self.last_error = code
        return code

    cdef int _set(self, Py_ssize_t m, const double* c, double yc, double a, double b,
                  double mu_new) noexcept nogil:
        """Set mu_m = mu_new and update G, C, q, w, F.  Requires a, b, t, u from _ab for c_m.

        Returns the case of doc/specs/slkl.md, section 2 (1 to 4), or a negative StepError
        code.  Every check comes before the first change of state.
        """
        cdef Py_ssize_t p = self.pos[m], last, j, m0 = self.m0, cap = self.cap, n = self.n
        cdef double mu_old = self.mu[m], delta, dF, D, den, gpp, s
        cdef int case, trouble = 0, info
        if not (isfinite(mu_new) and mu_new >= 0.0 and isfinite(a) and isfinite(b)):
            return self._fail(ERR_NONFINITE)
        if mu_new > 0.0 and not isfinite(1.0 / mu_new):
            return self._fail(ERR_NONFINITE)
        if mu_new == mu_old:
            return 1 if p < 0 else 2
        if p < 0 and m0 >= cap:
            return self._fail(ERR_CAPACITY)
        delta = mu_new - mu_old
        # Sherman-Morrison on lam I + K~: y^T K^{-1} y drops by d a^2 / (1 + d b).
        dF = -self.lam * delta * a * a / (1.0 + delta * b) + self.nu * delta
        if not isfinite(dF):
            return self._fail(ERR_NONFINITE)
        self.F += dF
        if p >= 0:
            memcpy(&self.g[0], &self.G[p, 0], m0 * sizeof(double))   # row p == column p
            gpp = self.g[p]
        if p >= 0 and mu_new > 0.0:
            # Case 2: D^{-1} changes by D at (p, p); Sherman-Morrison on G^{-1}.
            case = 2
            D = 1.0 / mu_new - 1.0 / mu_old
            den = 1.0 + D * gpp
            if den > 0.0:
                ger(<int>m0, <int>m0, -D / den, &self.g[0], 1, &self.g[0], 1, &self.G[0, 0],
                    <int>cap)
            else:
                trouble = 1
            self.mu[m] = mu_new
        elif p >= 0:
            # Case 3: the limit D -> infinity, then swap-delete row/column p.
            case = 3
            if gpp > 0.0:
                ger(<int>m0, <int>m0, -1.0 / gpp, &self.g[0], 1, &self.g[0], 1, &self.G[0, 0],
                    <int>cap)
            else:
                trouble = 1
            last = m0 - 1
            if p != last:
                for j in range(last):
                    if j != p:
                        self.G[p, j] = self.G[last, j]
                        self.G[j, p] = self.G[j, last]
                self.G[p, p] = self.G[last, last]
                memcpy(&self.Ct[p, 0], &self.Ct[last, 0], n * sizeof(double))
                self.q[p] = self.q[last]
                self.act[p] = self.act[last]
                self.pos[self.act[p]] = p
            self.pos[m] = -1
            self.act[last] = -1
            self.m0 = last
            self.mu[m] = 0.0
        else:
            # Case 4: block inversion with the new column appended; G t = u from _ab.
            case = 4
            p = m0                       # < cap, checked above
            s = 1.0 / (1.0 / mu_new + b)
            if s > 0.0 and b > 0.0:
                for j in range(m0):
                    self.g[j] = -(s / self.lam) * self.u[j]
                ger(<int>m0, <int>m0, 1.0 / s, &self.g[0], 1, &self.g[0], 1, &self.G[0, 0],
                    <int>cap)
                for j in range(m0):
                    self.G[p, j] = self.g[j]
                    self.G[j, p] = self.g[j]
                self.G[p, p] = s
            else:
                trouble = 1
            memcpy(&self.Ct[p, 0], c, n * sizeof(double))
            self.q[p] = yc
            self.act[p] = m
            self.pos[m] = p
            self.m0 = m0 + 1
            self.mu[m] = mu_new
        self.n_updates += 1
        if trouble or (self.refresh_every > 0 and self.n_updates % self.refresh_every == 0):
            info = self._refresh()
            if info != 0:
                return info
        else:
            self._update_w()
        return case

    cdef int _step(self, Py_ssize_t m) noexcept nogil:
        """One coordinate step on candidate m with the configured rule; returns _set's code."""
        cdef double yc, cc, a, b
        cdef const double* c
        cdef int rc
        if m < 0 or m >= self.M:
            return self._fail(ERR_INDEX)
        # Before the column and after it (unfinished when interrupted): no state has changed.
        if interrupted(self.it):
            return ERR_INTERRUPTED
        c = self._column(m, &yc, &cc)
        if interrupted(self.it):
            return ERR_INTERRUPTED
        self._ab(m, c, yc, cc, &a, &b)
        if not (isfinite(a) and isfinite(b)):
            return self._fail(ERR_NONFINITE)
        if b <= 0.0:
            # b = c^T K^{-1} c > 0 in exact arithmetic: G has drifted; rebuild, skip the step.
            rc = self._refresh()
            return rc if rc != 0 else 1
        return self._set(m, c, yc, a, b, self._new_weight(self.mu[m], a, b))

    cdef int _refresh(self) noexcept nogil:
        """G = (D^{-1} + C^T C / lam)^{-1} by Cholesky; w and F recomputed from definitions.

        Returns 0, or ERR_CHOLESKY (info in last_info), ERR_NONFINITE or ERR_INTERRUPTED (G
        unfinished); each fails the core.
        """
        cdef int m0 = <int>self.m0, cap = <int>self.cap, info
        cdef Py_ssize_t i, j
        cdef double v, l1 = 0.0
        for i in range(self.M):
            l1 += self.mu[i]
        self.n_refreshes += 1
        if m0 == 0:
            self.F = self.yy + self.nu * l1
            return 0 if isfinite(self.F) else self._fail(ERR_NONFINITE)
        for i in range(m0):
            self.g[i] = 1.0 / self.mu[self.act[i]]
            for j in range(m0):
                self.G[i, j] = 1.0 if i == j else 0.0
        info = solve_normal(m0, <int>self.n, &self.Ct[0, 0], <int>self.n, &self.g[0], self.lam,
                            &self.work[0, 0], cap, m0, &self.G[0, 0], cap, self.n_threads,
                            self.it)
        if interrupted(self.it):
            return self._fail(ERR_INTERRUPTED)
        if info != 0:
            self.last_info = info
            return self._fail(ERR_CHOLESKY)
        for i in range(m0):
            for j in range(i):
                v = 0.5 * (self.G[i, j] + self.G[j, i])
                self.G[i, j] = v
                self.G[j, i] = v
        self._update_w()
        self.F = self.yy - dot(m0, &self.q[0], 1, &self.w[0], 1) / self.lam + self.nu * l1
        if not isfinite(self.F):
            return self._fail(ERR_NONFINITE)
        return 0

    cdef double _kkt(self) noexcept nogil:
        """max over S of |lam a^2 - nu| (active) or max(0, lam a^2 - nu) (inactive)."""
        cdef Py_ssize_t m
        cdef double yc, cc, a, b, v, worst = 0.0
        cdef const double* c
        for m in range(self.M):
            if interrupted(self.it):
                return INFINITY         # the caller raises the signal handler's exception
            c = self._column(m, &yc, &cc)
            self._ab(m, c, yc, cc, &a, &b)
            v = self.lam * a * a - self.nu
            if self.mu[m] > 0.0:
                v = fabs(v)
            if not isfinite(v):
                return INFINITY         # NaN or inf: no KKT test can pass
            worst = max(worst, v)
        return worst

    # ------------------------------------------------------------------------------------------
    # Python entry points
    # ------------------------------------------------------------------------------------------

    def failure_message(self):
        """Why the core stopped (after a negative code or RUN_FAILED), or None."""
        code = self.last_error
        if code == 0:
            return None
        if code == ERR_CHOLESKY:
            return (f"the Cholesky factorisation of G^-1 = D^-1 + C^T C / lam failed (LAPACK "
                    f"info={self.last_info}) with m0={self.m0} active columns: the matrix is not "
                    f"positive definite to working precision")
        if code == ERR_NONFINITE:
            return (f"a coordinate step produced a non-finite value (a, b, the new weight, F or "
                    f"G) with m0={self.m0} active columns")
        if code == ERR_CAPACITY:
            return f"no room for a new active column (m0={self.m0}, capacity {self.cap})"
        if code == ERR_INDEX:
            return f"a candidate index outside [0, {self.M})"
        if code == ERR_INTERRUPTED:
            return "interrupted while G was recomputed (its state is unfinished)"
        return f"failure code {code}"

    def _raise_failure(self):
        message = self.failure_message() or "unknown failure"
        if self.last_error == ERR_CHOLESKY:
            raise np.linalg.LinAlgError("SLKL: " + message)
        raise ValueError("SLKL: " + message)

    def _check_usable(self):
        if self.last_error != 0:
            raise ValueError("SLKL: this core failed earlier and cannot continue ("
                             + self.failure_message() + ")")

    def _check_index(self, Py_ssize_t m):
        if not 0 <= m < self.M:
            raise IndexError(f"candidate index {m} outside [0, {self.M})")

    def run(self, const Py_ssize_t[::1] draws, double[::1] hist, Py_ssize_t k0, int rule,
            double tol, Py_ssize_t window, Py_ssize_t min_stop_k):
        """Steps on the candidates in `draws`; hist[k0 + i + 1] = F after step i.

        rule 0: no stopping test; 1: stop when hist[k - window] - hist[k] < tol hist[k - window]
        (k > window, k >= min_stop_k); 2: stop at the first k > window, k >= min_stop_k (the
        caller then applies its own test).  Returns (steps done, RUN_* status); after
        RUN_FAILED, :meth:`failure_message` says why.
        """
        cdef Py_ssize_t i = 0, k, nd = draws.shape[0]
        cdef int status = RUN_DONE, rc
        if k0 < 0 or window < 1 or hist.shape[0] < k0 + nd + 1:
            raise ValueError(f"run: hist needs k0 + len(draws) + 1 = {k0 + nd + 1} entries "
                             f"(has {hist.shape[0]}), k0 >= 0 and window >= 1")
        if self.last_error != 0:
            return 0, RUN_FAILED
        self._watch()
        with nogil:
            while i < nd:
                if self.m0 == self.cap and self.cap < self.M:
                    status = RUN_GROW
                    break
                rc = self._step(draws[i])
                if rc < 0:
                    status = RUN_FAILED
                    break
                i += 1
                k = k0 + i
                hist[k] = self.F
                if rule != 0 and k > window and k >= min_stop_k:
                    if rule == 2 or hist[k - window] - hist[k] < tol * hist[k - window]:
                        status = RUN_STOPPED
                        break
        self._unwatch()
        return i, status

    def step(self, Py_ssize_t m):
        """One coordinate step on candidate m (the configured rule); returns the case 1..4."""
        cdef int rc
        self._check_index(m)
        self._check_usable()
        if self.m0 == self.cap:
            self.grow(2 * self.cap)
        self._watch()
        with nogil:
            rc = self._step(m)
        self._unwatch()
        if rc < 0:
            self._raise_failure()
        return rc

    def set_weight(self, Py_ssize_t m, double mu_new):
        """Set mu_m = mu_new (>= 0) through the rank-1 updates; returns the case 1..4."""
        cdef double yc, cc, a, b
        cdef const double* c
        cdef int rc
        self._check_index(m)
        if not (np.isfinite(mu_new) and mu_new >= 0):
            raise ValueError(f"mu_new must be finite and >= 0, got {mu_new}")
        self._check_usable()
        if self.m0 == self.cap:
            self.grow(2 * self.cap)
        self._watch()
        with nogil:
            c = self._column(m, &yc, &cc)
            if interrupted(self.it):
                rc = ERR_INTERRUPTED            # the column is unfinished: no state changed
            else:
                self._ab(m, c, yc, cc, &a, &b)
                rc = self._set(m, c, yc, a, b, mu_new)
        self._unwatch()
        if rc < 0:
            self._raise_failure()
        return rc

    def set_all(self, const double[::1] mu):
        """Activate every mu_m > 0 at once and build G from its definition (for fixed weights).

        Returns 0, or the LAPACK info of a failed Cholesky factorisation.
        """
        cdef Py_ssize_t m, p
        cdef double yc, cc
        cdef const double* c
        cdef int rc = 0
        if self.m0 != 0:
            raise RuntimeError("set_all needs an empty active set")
        if mu.shape[0] != self.M or not np.all(np.isfinite(np.asarray(mu))) or \
                np.any(np.asarray(mu) < 0):
            raise ValueError(f"mu must hold M={self.M} finite weights >= 0")
        self._check_usable()
        self.grow(max(1, int(np.count_nonzero(mu))))
        self._watch()
        for m in range(self.M):
            if mu[m] > 0.0:
                p = self.m0
                c = self._column(m, &yc, &cc)
                if interrupted(self.it):
                    break
                memcpy(&self.Ct[p, 0], c, self.n * sizeof(double))
                self.q[p] = yc
                self.act[p] = m
                self.pos[m] = p
                self.mu[m] = mu[m]
                self.m0 = p + 1
        if not self.interrupt.raised:
            with nogil:
                rc = self._refresh()
        if self.interrupt.raised:
            self._fail(ERR_INTERRUPTED)         # the active set is incomplete
        self._unwatch()
        if rc == ERR_NONFINITE:
            self._raise_failure()
        return self.last_info if rc == ERR_CHOLESKY else 0

    def refresh(self):
        """Recompute G, w and F from their definitions; returns LAPACK info (0 = success)."""
        cdef int rc
        self._watch()
        with nogil:
            rc = self._refresh()
        self._unwatch()
        if rc == ERR_NONFINITE:
            self._raise_failure()
        return self.last_info if rc == ERR_CHOLESKY else 0

    def ab(self, Py_ssize_t m):
        """(a_m, b_m) at the current weights."""
        cdef double yc, cc, a, b
        cdef const double* c
        self._check_index(m)
        self._watch()
        with nogil:
            c = self._column(m, &yc, &cc)
            self._ab(m, c, yc, cc, &a, &b)
        self._unwatch()
        return a, b

    def kkt_violation(self):
        """max_m |lam a_m^2 - nu| on active, max(0, lam a_m^2 - nu) on inactive candidates."""
        cdef double v
        self._watch()
        with nogil:
            v = self._kkt()
        self._unwatch()
        return v

    def objective_direct(self):
        """F = ||y||^2 - q^T w / lam + nu ||mu||_1 from the cached q and w (O(m0))."""
        cdef int m0 = <int>self.m0
        l1 = float(np.sum(self.mu))
        if m0 == 0:
            return self.yy + self.nu * l1
        return self.yy - dot(m0, &self.q[0], 1, &self.w[0], 1) / self.lam + self.nu * l1

    def coefficients(self, y=None):
        """(active candidate indices, beta): f(x) = sum_p beta_p k(x_{cand[act[p]]}, x).

        beta = D C^T K~_{lam,mu}^{-1} y scaled by 1 / sqrt(k(x_m, x_m)), which equals
        G q / lam (push-through identity).  G q is solved here from a fresh Cholesky
        factorisation of D^{-1} + C^T C / lam at the current weights, so neither the drift of
        the rank-1 updates of G nor cancellation enters the result.  ``y`` (n,): the predictor
        of this target at the current weights (q = C^T y) instead of the descent's.

        Raises
        ------
        numpy.linalg.LinAlgError
            If D^{-1} + C^T C / lam is not positive definite to working precision.
        ValueError
            If the result is not finite.
        """
        cdef int m0 = <int>self.m0, info
        cdef Py_ssize_t i
        act = np.asarray(self.act)[:m0].copy()
        if m0 == 0:
            return act, np.zeros(0)
        x_arr = np.asarray(self.q)[:m0].copy()
        cdef double[::1] x = x_arr
        cdef const double[::1] target
        self._watch()
        if y is not None:
            target = np.ascontiguousarray(y, dtype=np.float64)
            if target.shape[0] != self.n:
                raise ValueError(f"y has {target.shape[0]} entries; the core has n={self.n}")
            with nogil:
                rows_times(m0, <int>self.n, &self.Ct[0, 0], <int>self.n, &target[0], &x[0],
                           self.n_threads)
        with nogil:
            for i in range(m0):
                self.g[i] = 1.0 / self.mu[self.act[i]]
            info = solve_normal(m0, <int>self.n, &self.Ct[0, 0], <int>self.n, &self.g[0],
                                self.lam, &self.work[0, 0], <int>self.cap, 1, &x[0], 1,
                                self.n_threads, self.it)
        self._unwatch()
        if info != 0:
            self.last_info = info
            raise np.linalg.LinAlgError(
                f"SLKL: the Cholesky factorisation of D^-1 + C^T C / lam failed (LAPACK "
                f"info={info}) with m0={m0} active columns")
        beta = x_arr / self.lam * np.asarray(self.scale)[act]
        if not np.all(np.isfinite(beta)):
            raise ValueError("SLKL: the coefficients are not finite")
        return act, beta

    @property
    def weights(self):
        return np.asarray(self.mu).copy()

    @property
    def active(self):
        """Candidate indices of the rows of G, in G's order."""
        return np.asarray(self.act)[:self.m0].copy()

    @property
    def G_matrix(self):
        return np.asarray(self.G)[:self.m0, :self.m0].copy()

    @property
    def C_matrix(self):
        """C (n, m0): the active columns in G's order."""
        return np.asarray(self.Ct)[:self.m0].T.copy()
