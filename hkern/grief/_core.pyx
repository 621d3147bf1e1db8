"""Compiled GRIEF algebra (spec: doc/specs/grief.md, section 2).

A GRIEF basis function is a product of 1-D Nystrom eigenfunctions, one per dimension:

    phi_k(x) = prod_i F_i(x_i)[idx[k, i]],   F_i(t)[a] = sum_b k_i(t, u_i[b]) M_i[b, a],

with M_i = Q_i diag(lambda_i)^(-1/2) from the eigendecomposition of the 1-D grid kernel matrix
K_i = Q_i diag(lambda_i) Q_i^T.  Everything here works on that form, so neither K_UU nor K_XU is
ever formed: a row of Phi costs O(d mbar^2 + d p).

Storage conventions (all C-contiguous, prepared once in Python):
    grid  (sum mbar_i,)    the 1-D grids one after the other; dimension i is grid[goff[i]:goff[i+1]]
    M     (sum mbar_i^2,)  M_i row-major (mbar_i x mbar_i) at M[moff[i]:]
    cols  (p, d) intp      goff[i] + idx[k, i]: the entry of the concatenated 1-D features used by
                           basis function k in dimension i
The products are taken in log space (sum of log|F| plus a sign product) so that d = 100 with
factors of size 1e-4 neither underflows nor overflows before the final exp.
"""
from cython.parallel cimport parallel, prange
from libc.math cimport exp, fabs, log
from libc.stdlib cimport free, malloc

from hkern.kernels._kernels cimport kernel_pair, scaled_distance

import numpy as np

# Below this magnitude Phi[r, k] is treated as underflowed: the gradient then takes the exact
# log route instead of Phi / F (which would lose the product of the other factors).
cdef double TINY = 1e-280


def top_p(list log_lams, Py_ssize_t p):
    """Algorithm 1: the p largest products of per-dimension eigenvalues, exactly.

    Parameters
    ----------
    log_lams : list of d float64 arrays
        log of the (positive) eigenvalues of each dimension, any order.
    p : int >= 1

    Returns
    -------
    idx : (p', d) intp, p' = min(p, prod mbar_i)
        idx[k, i] is the position in log_lams[i] of basis function k's factor.
    log_values : (p',) float64, descending
        log of the product eigenvalues.

    Truncating to the top p after each dimension is exact because every eigenvalue is positive
    (doc/specs/grief.md, section 2).  Sorting is stable, so ties resolve by position.
    """
    cdef double[::1] lam0 = np.ascontiguousarray(log_lams[0], dtype=np.float64)
    order = np.argsort(-np.asarray(lam0), kind="stable")[:p]
    Lp = np.asarray(lam0)[order].copy()
    idx = order.reshape(-1, 1).astype(np.intp)
    cdef double[::1] lp, lam
    cdef double[::1] cand_v
    cdef Py_ssize_t a, b, na, mb
    for li in log_lams[1:]:
        lam = np.ascontiguousarray(li, dtype=np.float64)
        lp = Lp
        na, mb = lp.shape[0], lam.shape[0]
        cand = np.empty(na * mb)
        cand_v = cand
        for a in range(na):
            for b in range(mb):
                cand_v[a * mb + b] = lp[a] + lam[b]
        order = np.argsort(-cand, kind="stable")[:p]
        Lp = cand[order]
        idx = np.concatenate([idx[order // mb], (order % mb).reshape(-1, 1)], axis=1)
    return np.ascontiguousarray(idx, dtype=np.intp), np.ascontiguousarray(Lp)


cdef void _features(int kind, const double* x, int d, const double* grid, const Py_ssize_t* goff,
                    const double* M, const Py_ssize_t* moff, const double* ls,
                    double* kx, double* f) noexcept nogil:
    """f[goff[i] + a] = sum_b k_i(x_i, u_i[b]) M_i[b, a] for every dimension i (one row)."""
    cdef int i
    cdef Py_ssize_t a, b, m
    cdef const double* Mi
    for i in range(d):
        m = goff[i + 1] - goff[i]
        Mi = M + moff[i]
        for b in range(m):
            kx[b] = kernel_pair(kind, x + i, grid + goff[i] + b, 1, ls[i])
        for a in range(m):
            f[goff[i] + a] = 0.0
        for b in range(m):
            for a in range(m):
                f[goff[i] + a] += kx[b] * Mi[b * m + a]


cdef void _dfeatures(int kind, const double* x, int d, const double* grid, const Py_ssize_t* goff,
                     const double* M, const double* dM, const Py_ssize_t* moff, const double* ls,
                     double* kx, double* dkx, double* df) noexcept nogil:
    """df[goff[i] + a] = d F_i(x_i)[a] / d log(ls_i)  (Gaussian kernel).

    For k = exp(-s/2) with s = (t - u)^2 / ls^2, dk/dlog(ls) = k * s; dM_i comes from the
    eigen-derivatives of K_i computed in Python.
    """
    cdef int i
    cdef Py_ssize_t a, b, m
    cdef double s
    for i in range(d):
        m = goff[i + 1] - goff[i]
        for b in range(m):
            s = scaled_distance(kind, x + i, grid + goff[i] + b, 1, ls[i])
            kx[b] = kernel_pair(kind, x + i, grid + goff[i] + b, 1, ls[i])
            dkx[b] = kx[b] * s
        for a in range(m):
            df[goff[i] + a] = 0.0
        for b in range(m):
            for a in range(m):
                df[goff[i] + a] += dkx[b] * M[moff[i] + b * m + a] + kx[b] * dM[moff[i] + b * m + a]


cdef void _logs(Py_ssize_t total, const double* f, double* logf, signed char* sgn) noexcept nogil:
    cdef Py_ssize_t j
    for j in range(total):
        if f[j] > 0:
            sgn[j] = 1
            logf[j] = log(f[j])
        elif f[j] < 0:
            sgn[j] = -1
            logf[j] = log(-f[j])
        else:
            sgn[j] = 0
            logf[j] = 0.0


def basis(int kind, const double[:, ::1] X, const double[::1] grid, const Py_ssize_t[::1] goff,
          const double[::1] M, const Py_ssize_t[::1] moff, const double[::1] ls,
          const Py_ssize_t[:, ::1] cols, double[:, ::1] out, int n_threads):
    """Phi[r, k] = prod_i F_i(X[r, i])[idx[k, i]] for every row of X, into out (n, p).

    One row per OpenMP iteration; each thread owns scratch for the row's 1-D features.
    """
    cdef Py_ssize_t n = X.shape[0], p = cols.shape[0], total = grid.shape[0], r, k, mmax = 1
    cdef int d = X.shape[1], i
    cdef int s
    cdef double acc
    cdef double* buf
    cdef double* f
    cdef double* logf
    cdef double* kx
    cdef signed char* sgn
    cdef int[::1] failed = np.zeros(1, dtype=np.intc)     # shared flag (array, not a private)
    for i in range(d):
        mmax = max(mmax, goff[i + 1] - goff[i])
    if n == 0:
        return
    with nogil, parallel(num_threads=n_threads):
        buf = <double*> malloc((2 * total + mmax) * sizeof(double))
        sgn = <signed char*> malloc(total * sizeof(signed char))
        if buf == NULL or sgn == NULL:
            failed[0] = 1
        f = buf
        logf = buf + total
        kx = buf + 2 * total
        for r in prange(n, schedule="static"):
            if buf == NULL or sgn == NULL:
                continue
            _features(kind, &X[r, 0], d, &grid[0], &goff[0], &M[0], &moff[0], &ls[0], kx, f)
            _logs(total, f, logf, sgn)
            for k in range(p):
                acc = 0.0
                s = 1
                for i in range(d):
                    s = s * sgn[cols[k, i]]
                    acc = acc + logf[cols[k, i]]
                out[r, k] = s * exp(acc) if s != 0 else 0.0
        free(buf)
        free(sgn)
    if failed[0]:
        raise MemoryError("GRIEF basis: could not allocate per-thread scratch")


def lengthscale_grad(int kind, const double[:, ::1] X, const double[::1] grid,
                     const Py_ssize_t[::1] goff, const double[::1] M, const double[::1] dM,
                     const Py_ssize_t[::1] moff, const double[::1] ls,
                     const Py_ssize_t[:, ::1] cols, const double[:, ::1] G,
                     const double[:, ::1] Phi, double[:, ::1] out, int n_threads):
    """out[r, i] = sum_k G[r, k] dPhi[r, k] / dlog(ls_i), the row-wise parts of a gradient.

    dPhi[r, k]/dlog(ls_i) = (prod_{j != i} F_j) dF_i = Phi[r, k] dF_i / F_i.  The ratio form is
    used when F_i != 0 and Phi is not underflowed; otherwise the product of the other factors is
    taken in log space.  Rows are summed by the caller in a fixed order (deterministic for any
    thread count).
    """
    cdef Py_ssize_t n = X.shape[0], p = cols.shape[0], total = grid.shape[0], r, k, mmax = 1
    cdef int d = X.shape[1], i, j
    cdef int s
    cdef double acc, g
    cdef double* buf
    cdef double* f
    cdef double* df
    cdef double* logf
    cdef double* kx
    cdef double* dkx
    cdef signed char* sgn
    cdef int[::1] failed = np.zeros(1, dtype=np.intc)
    for i in range(d):
        mmax = max(mmax, goff[i + 1] - goff[i])
    if n == 0:
        return
    with nogil, parallel(num_threads=n_threads):
        buf = <double*> malloc((3 * total + 2 * mmax) * sizeof(double))
        sgn = <signed char*> malloc(total * sizeof(signed char))
        if buf == NULL or sgn == NULL:
            failed[0] = 1
        f = buf
        df = buf + total
        logf = buf + 2 * total
        kx = buf + 3 * total
        dkx = kx + mmax
        for r in prange(n, schedule="static"):
            if buf == NULL or sgn == NULL:
                continue
            _features(kind, &X[r, 0], d, &grid[0], &goff[0], &M[0], &moff[0], &ls[0], kx, f)
            _dfeatures(kind, &X[r, 0], d, &grid[0], &goff[0], &M[0], &dM[0], &moff[0], &ls[0],
                       kx, dkx, df)
            _logs(total, f, logf, sgn)
            for i in range(d):
                out[r, i] = 0.0
            for k in range(p):
                g = G[r, k]
                if g == 0.0:
                    continue
                if fabs(Phi[r, k]) > TINY:
                    for i in range(d):
                        out[r, i] += g * Phi[r, k] * (df[cols[k, i]] / f[cols[k, i]])
                else:
                    for i in range(d):
                        acc = 0.0
                        s = 1
                        for j in range(d):
                            if j != i:
                                s = s * sgn[cols[k, j]]
                                acc = acc + logf[cols[k, j]]
                        if s != 0:
                            out[r, i] += g * s * exp(acc) * df[cols[k, i]]
        free(buf)
        free(sgn)
    if failed[0]:
        raise MemoryError("GRIEF gradient: could not allocate per-thread scratch")
