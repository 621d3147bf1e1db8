"""Compiled core of SLKL: stochastic coordinate descent over the conical weights mu >= 0.

Objective (spec section 1), for one target vector y (n,) and candidate columns c_m, m in S:

    F(mu) = y^T (I + K~(mu) / lam)^{-1} y + nu sum_m mu_m,   K~(mu) = sum_m mu_m c_m c_m^T.

State (spec section 2, "State and shapes"), never an n x n matrix:

    Ct   cap x n   rows 0..m0-1 are the active columns c_{act[p]} (C^T, row-major)
    G    cap x cap G = (D^{-1} + C^T C / lam)^{-1}, m0 x m0 block used, kept symmetric
    q, w           q = C^T y, w = G q
    mu, pos        weights of all M candidates; pos[m] = row p of G, or -1 when mu_m = 0
    act            act[p] = candidate index in row p

One coordinate step on candidate m costs O(n m0 + m0^2): t = C^T c_m, u = G t,
a = y^T c_m / lam - w^T t / lam^2, b = ||c_m||^2 / lam - t^T u / lam^2, then one of the four
updates of G (Sherman-Morrison, deletion, block append) and F += -lam d a^2 / (1 + d b) + nu d
for the change d of mu_m (Sherman-Morrison at the n x n level, O(1)).

Rounding drift of the rank-1 updates is bounded by recomputing G from its definition by a
Cholesky factorisation every `refresh_every` updates, and whenever an update's pivot is not
positive in floating point (spec section 5 J).
"""
from libc.math cimport fabs, sqrt
from libc.string cimport memcpy

from hkern._linalg cimport dot, gemv, ger, potrf, potrs, syrk
from hkern.kernels._kernels cimport kernel_block

import numpy as np


cdef class SlklCore:
    """SLKL state for one target vector; see the module docstring.

    Parameters
    ----------
    y : (n,) float64
    lam, nu : float
        Ridge and l1 parameters, > 0 (validated by the caller).
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
    """

    def __init__(self, const double[::1] y, double lam, double nu, int step_rule,
                 const double[::1] scale, const Py_ssize_t[::1] cand, cols=None, X=None, xsq=None,
                 int kind=0, double sigma=1.0, Py_ssize_t capacity=256, int refresh_every=1000,
                 double mu_floor=1e-12):
        self.n = y.shape[0]
        self.M = cand.shape[0]
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
        self.yy = dot(<int>self.n, &y[0], 1, &y[0], 1)
        self.F = self.yy
        self.precomputed = cols is not None
        if self.precomputed:
            self.cols = cols
            self.yc_all = np.asarray(cols) @ np.asarray(y)
            self.cc_all = np.einsum("ij,ij->i", cols, cols)
            self.col = np.empty(1)
        else:
            self.X = X
            self.xsq = xsq
            self.d = X.shape[1]
            self.col = np.empty(self.n)
        self.mu = np.zeros(self.M)
        self.pos = np.full(self.M, -1, dtype=np.intp)
        self.m0 = 0
        self.cap = 0
        self.grow(max(1, min(capacity, self.M)))

    def grow(self, Py_ssize_t new_cap):
        """Room for new_cap active columns; the state is copied (O(n m0 + m0^2))."""
        new_cap = min(max(new_cap, self.m0), self.M)
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
            kernel_block(self.kind, self.sigma, 1, <int>n, self.d, &self.X[r, 0], &self.xsq[r],
                         &self.X[0, 0], &self.xsq[0], &self.col[0], <int>n)
            if self.scale[m] != 1.0:
                for i in range(n):
                    self.col[i] *= self.scale[m]
            c = &self.col[0]
            yc[0] = dot(<int>n, c, 1, &self.y[0], 1)
        cc[0] = dot(<int>n, c, 1, c, 1)
        return c

    cdef void _ab(self, const double* c, double yc, double cc, double* a, double* b) noexcept nogil:
        """a = y^T K^{-1} c, b = c^T K^{-1} c (K = lam I + K~(mu)); leaves t = C^T c, u = G t."""
        cdef int m0 = <int>self.m0, n = <int>self.n, cap = <int>self.cap
        cdef double il = 1.0 / self.lam
        if m0 == 0:
            a[0] = yc * il
            b[0] = cc * il
            return
        gemv(False, m0, n, 1.0, &self.Ct[0, 0], n, c, 1, 0.0, &self.t[0], 1)
        gemv(False, m0, m0, 1.0, &self.G[0, 0], cap, &self.t[0], 1, 0.0, &self.u[0], 1)
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
        return mu_new

    cdef void _update_w(self) noexcept nogil:
        cdef int m0 = <int>self.m0
        gemv(False, m0, m0, 1.0, &self.G[0, 0], <int>self.cap, &self.q[0], 1, 0.0, &self.w[0], 1)

    cdef int _set(self, Py_ssize_t m, const double* c, double yc, double a, double b,
                  double mu_new) noexcept nogil:
        """Set mu_m = mu_new and update G, C, q, w, F.  Requires a, b, t, u from _ab for c_m.

        Returns the case of spec section 2 (1 to 4), or -1 if a refresh failed.
        """
        cdef Py_ssize_t p, last, j, m0 = self.m0, cap = self.cap, n = self.n
        cdef double mu_old = self.mu[m], delta, D, den, gpp, s
        cdef int case, trouble = 0
        if mu_new == mu_old:
            return 1 if mu_old == 0.0 else 2
        delta = mu_new - mu_old
        # Sherman-Morrison on lam I + K~: y^T K^{-1} y drops by d a^2 / (1 + d b).
        self.F += -self.lam * delta * a * a / (1.0 + delta * b) + self.nu * delta
        if mu_old > 0.0:
            p = self.pos[m]
            memcpy(&self.g[0], &self.G[p, 0], m0 * sizeof(double))   # row p == column p
            gpp = self.g[p]
        if mu_old > 0.0 and mu_new > 0.0:
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
        elif mu_old > 0.0:
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
            p = m0
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
            self.last_info = self._refresh()
            if self.last_info != 0:
                return -1
        else:
            self._update_w()
        return case

    cdef int _step(self, Py_ssize_t m) noexcept nogil:
        """One coordinate step on candidate m with the configured rule; returns _set's code."""
        cdef double yc, cc, a, b
        cdef const double* c = self._column(m, &yc, &cc)
        self._ab(c, yc, cc, &a, &b)
        if b <= 0.0:
            # b = c^T K^{-1} c > 0 in exact arithmetic: G has drifted; rebuild, skip the step.
            self.last_info = self._refresh()
            return -1 if self.last_info != 0 else 1
        return self._set(m, c, yc, a, b, self._new_weight(self.mu[m], a, b))

    cdef int _refresh(self) noexcept nogil:
        """G = (D^{-1} + C^T C / lam)^{-1} by Cholesky; w and F recomputed from definitions."""
        cdef int m0 = <int>self.m0, cap = <int>self.cap, info
        cdef Py_ssize_t i, j
        cdef double v, l1 = 0.0
        for i in range(self.M):
            l1 += self.mu[i]
        self.n_refreshes += 1
        if m0 == 0:
            self.F = self.yy + self.nu * l1
            return 0
        syrk(True, False, m0, <int>self.n, 1.0 / self.lam, &self.Ct[0, 0], <int>self.n, 0.0,
             &self.work[0, 0], cap)
        for i in range(m0):
            self.work[i, i] += 1.0 / self.mu[self.act[i]]
        info = potrf(m0, &self.work[0, 0], cap)
        if info != 0:
            return info
        for i in range(m0):
            for j in range(m0):
                self.G[i, j] = 1.0 if i == j else 0.0
        potrs(m0, m0, &self.work[0, 0], cap, &self.G[0, 0], cap)
        for i in range(m0):
            for j in range(i):
                v = 0.5 * (self.G[i, j] + self.G[j, i])
                self.G[i, j] = v
                self.G[j, i] = v
        self._update_w()
        self.F = self.yy - dot(m0, &self.q[0], 1, &self.w[0], 1) / self.lam + self.nu * l1
        return 0

    cdef double _kkt(self) noexcept nogil:
        """max over S of |lam a^2 - nu| (active) or max(0, lam a^2 - nu) (inactive)."""
        cdef Py_ssize_t m
        cdef double yc, cc, a, b, v, worst = 0.0
        cdef const double* c
        for m in range(self.M):
            c = self._column(m, &yc, &cc)
            self._ab(c, yc, cc, &a, &b)
            v = self.lam * a * a - self.nu
            if self.mu[m] > 0.0:
                v = fabs(v)
            worst = max(worst, v)
        return worst

    # ------------------------------------------------------------------------------------------
    # Python entry points
    # ------------------------------------------------------------------------------------------

    def run(self, const Py_ssize_t[::1] draws, double[::1] hist, Py_ssize_t k0, int rule,
            double tol, Py_ssize_t window, Py_ssize_t min_stop_k):
        """Steps on the candidates in `draws`; hist[k0 + i + 1] = F after step i.

        rule 0: no stopping test; 1: stop when hist[k - window] - hist[k] < tol hist[k - window]
        (k > window, k >= min_stop_k); 2: stop at the first k > window, k >= min_stop_k (the
        caller then applies its own test).  Returns (steps done, RUN_* status).
        """
        cdef Py_ssize_t i = 0, k, nd = draws.shape[0]
        cdef int status = RUN_DONE, rc
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
        return i, status

    def step(self, Py_ssize_t m):
        """One coordinate step on candidate m (the configured rule); returns the case 1..4."""
        if self.m0 == self.cap:
            self.grow(2 * self.cap)
        with nogil:
            rc = self._step(m)
        return rc

    def set_weight(self, Py_ssize_t m, double mu_new):
        """Set mu_m = mu_new (>= 0) through the rank-1 updates; returns the case 1..4."""
        cdef double yc, cc, a, b
        cdef const double* c
        if self.m0 == self.cap:
            self.grow(2 * self.cap)
        with nogil:
            c = self._column(m, &yc, &cc)
            self._ab(c, yc, cc, &a, &b)
            rc = self._set(m, c, yc, a, b, mu_new)
        return rc

    def set_all(self, const double[::1] mu):
        """Activate every mu_m > 0 at once and build G from its definition (for fixed weights)."""
        cdef Py_ssize_t m, p
        cdef double yc, cc
        cdef const double* c
        if self.m0 != 0:
            raise RuntimeError("set_all needs an empty active set")
        self.grow(max(1, int(np.count_nonzero(mu))))
        for m in range(self.M):
            if mu[m] > 0.0:
                p = self.m0
                c = self._column(m, &yc, &cc)
                memcpy(&self.Ct[p, 0], c, self.n * sizeof(double))
                self.q[p] = yc
                self.act[p] = m
                self.pos[m] = p
                self.mu[m] = mu[m]
                self.m0 = p + 1
        with nogil:
            info = self._refresh()
        return info

    def refresh(self):
        """Recompute G, w and F from their definitions; returns LAPACK info (0 = success)."""
        with nogil:
            info = self._refresh()
        return info

    def ab(self, Py_ssize_t m):
        """(a_m, b_m) at the current weights."""
        cdef double yc, cc, a, b
        cdef const double* c
        with nogil:
            c = self._column(m, &yc, &cc)
            self._ab(c, yc, cc, &a, &b)
        return a, b

    def kkt_violation(self):
        """max_m |lam a_m^2 - nu| on active, max(0, lam a_m^2 - nu) on inactive candidates."""
        with nogil:
            v = self._kkt()
        return v

    def objective_direct(self):
        """F = ||y||^2 - q^T w / lam + nu ||mu||_1 from the cached q and w (O(m0))."""
        cdef int m0 = <int>self.m0
        l1 = float(np.sum(self.mu))
        if m0 == 0:
            return self.yy + self.nu * l1
        return self.yy - dot(m0, &self.q[0], 1, &self.w[0], 1) / self.lam + self.nu * l1

    def coefficients(self):
        """(active candidate indices, beta): f(x) = sum_p beta_p k(x_{cand[act[p]]}, x).

        z = y / lam - C w / lam^2 = K~_{lam,mu}^{-1} y; beta_p = mu_m (c_m^T z) scale_m.
        """
        cdef Py_ssize_t m0 = self.m0
        act = np.asarray(self.act)[:m0].copy()
        if m0 == 0:
            return act, np.zeros(0)
        Ct = np.asarray(self.Ct)[:m0]
        z = np.asarray(self.y) / self.lam - (Ct.T @ np.asarray(self.w)[:m0]) / self.lam ** 2
        beta = np.asarray(self.mu)[act] * (Ct @ z) * np.asarray(self.scale)[act]
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
