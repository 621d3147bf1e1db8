"""The independent (block-diagonal) kernel on the leaves of an HCK tree: the paper's baseline.

K_ind = blockdiag(K(X_leaf, X_leaf)): kernel ridge regression decouples into one dense solve per
leaf, and a test point sees only the training points of the leaf it is routed to.  So does the GP
posterior variance: k(x, x) - k(x, X_i) (K_ii + lam I)^{-1} k(X_i, x) for x in leaf i.
"""
from cython.parallel cimport prange
from libc.math cimport log
from libc.stdlib cimport malloc, free
from libc.stdint cimport int64_t

from hkern._linalg.shim cimport gemm, potrf, potrs, trsm
from hkern.kernels._kernels cimport kernel_block, kernel_from_scaled, sqnorms

import numpy as np

# Test points evaluated at a time per leaf in predict_blocks and variance_blocks: bounds each
# thread's kernel block to PREDICT_CHUNK x leaf size, whatever the number of test points routed
# to one leaf.
cdef int PREDICT_CHUNK = 1024
CHUNK_SIZE = PREDICT_CHUNK        # for the memory estimate of the Python layer


def fit_blocks(const double[:, ::1] X, const int64_t[::1] start, const int64_t[::1] count,
               int depth, int kind, double sigma, double lam, double[:, ::1] Y, int n_threads):
    """Y (tree order, n x k) <- blockdiag(K_leaf + lam I)^{-1} Y.  Returns log det, or raises."""
    cdef int first = (1 << depth) - 1, n_leaves = 1 << depth, d = X.shape[1], k = Y.shape[1]
    cdef Py_ssize_t leaf, i, a, s0
    cdef int m, no_memory = 0, not_pd = 0
    cdef double* Kb
    xsq_arr = np.empty(max(X.shape[0], 1))
    logdets_arr = np.zeros(n_leaves)
    cdef double[::1] xsq = xsq_arr, logdets = logdets_arr
    with nogil:
        sqnorms(X.shape[0], d, &X[0, 0], &xsq[0])
        for leaf in prange(n_leaves, num_threads=n_threads, schedule="dynamic"):
            i = first + leaf
            s0 = start[i]
            m = <int>count[i]
            Kb = <double*>malloc(max(<Py_ssize_t>m * m, 1) * sizeof(double))
            if Kb == NULL:
                no_memory += 1
            else:
                kernel_block(kind, sigma, m, m, d, &X[s0, 0], &xsq[s0], &X[s0, 0], &xsq[s0], Kb, m)
                for a in range(m):
                    Kb[a * m + a] += lam
                if potrf(m, Kb, m) != 0:
                    not_pd += 1
                else:
                    for a in range(m):
                        logdets[leaf] += 2.0 * log(Kb[a * m + a])
                    potrs(m, k, Kb, m, &Y[s0, 0], k)
                free(Kb)
    if no_memory:
        raise MemoryError("independent kernel: could not allocate a leaf block")
    if not_pd:
        # K is positive semi-definite, so K + lam I >= lam I; failing means lam is below the
        # rounding of the kernel values (e.g. a rank-one K, from duplicate points or a huge sigma).
        raise ValueError(f"independent kernel: a leaf block K + lam I is singular to working "
                         f"precision (lam={lam:g} is below the rounding error of the kernel "
                         f"values); increase lam")
    return float(logdets_arr.sum())


cdef int _leaf_points(const double* Xi, const double* xsqi, int m, int d, int kind, double sigma,
                      double lam, const double* Xq, const double* qsq, Py_ssize_t mq_total,
                      const double* alpha_i, int k, double* F, double kxx,
                      double* var) noexcept nogil:
    """The test points routed to one leaf (X_i, m points): their scores K(Xq, X_i) alpha_i into
    F, or, with alpha_i NULL, their posterior variance k(x, x) - |L_i^{-1} k(X_i, x)|^2
    (L_i L_i^T = K_ii + lam I, factorised again as in fit_blocks) into var.  PREDICT_CHUNK
    points at a time.  Returns 0, 1 (no memory) or 2 (K_ii + lam I not positive definite)."""
    cdef Py_ssize_t c0 = 0, a, b, block = 0 if alpha_i != NULL else <Py_ssize_t>m * m
    cdef int mq
    cdef double acc
    cdef double* Kb = <double*>malloc(max(block + <Py_ssize_t>PREDICT_CHUNK * m, 1)
                                      * sizeof(double))
    cdef double* Kq = Kb + block
    if Kb == NULL:
        return 1
    if alpha_i == NULL:
        kernel_block(kind, sigma, m, m, d, Xi, xsqi, Xi, xsqi, Kb, m)
        for a in range(m):
            Kb[a * m + a] += lam
        if potrf(m, Kb, m) != 0:
            free(Kb)
            return 2
    while c0 < mq_total:
        mq = <int>min(<Py_ssize_t>PREDICT_CHUNK, mq_total - c0)
        kernel_block(kind, sigma, mq, m, d, Xq + c0 * d, qsq + c0, Xi, xsqi, Kq, m)
        if alpha_i != NULL:
            gemm(False, False, mq, k, m, 1.0, Kq, m, alpha_i, k, 0.0, F + c0 * k, k)
        else:
            trsm(False, True, True, False, mq, m, 1.0, Kb, m, Kq, m)   # rows k(x, X_i) L_i^{-T}
            for a in range(mq):
                acc = 0.0
                for b in range(m):
                    acc = acc + Kq[a * m + b] * Kq[a * m + b]
                var[c0 + a] = kxx - acc
        c0 = c0 + mq
    free(Kb)
    return 0


cdef _over_leaves(const double[:, ::1] X, const int64_t[::1] start, const int64_t[::1] count,
                  int depth, int kind, double sigma, double lam, const double* alpha, int k,
                  const double[:, ::1] Xq, const int64_t[::1] leaf_start, double* F, double* var,
                  int n_threads):
    """_leaf_points for every leaf that has test points (rows leaf_start[l]:leaf_start[l+1] of
    Xq go to leaf l), the leaves in an OpenMP prange."""
    cdef int first = (1 << depth) - 1, n_leaves = 1 << depth, d = X.shape[1]
    cdef Py_ssize_t leaf, i, q0, q1
    cdef int status, no_memory = 0, not_pd = 0
    cdef double kxx = kernel_from_scaled(kind, 0.0)
    xsq_arr = np.empty(max(X.shape[0], 1))
    qsq_arr = np.empty(max(Xq.shape[0], 1))
    cdef double[::1] xsq = xsq_arr, qsq = qsq_arr
    with nogil:
        sqnorms(X.shape[0], d, &X[0, 0], &xsq[0])
        sqnorms(Xq.shape[0], d, &Xq[0, 0], &qsq[0])
        for leaf in prange(n_leaves, num_threads=n_threads, schedule="dynamic"):
            i = first + leaf
            q0 = leaf_start[leaf]
            q1 = leaf_start[leaf + 1]
            if q1 > q0:
                status = _leaf_points(&X[start[i], 0], &xsq[start[i]], <int>count[i], d, kind,
                                      sigma, lam, &Xq[q0, 0], &qsq[q0], q1 - q0,
                                      NULL if alpha == NULL else alpha + start[i] * k, k,
                                      NULL if F == NULL else F + q0 * k, kxx,
                                      NULL if var == NULL else var + q0)
                if status == 1:
                    no_memory += 1
                elif status == 2:
                    not_pd += 1
    if no_memory:
        raise MemoryError("independent kernel: could not allocate a leaf block or prediction "
                          "buffers")
    if not_pd:
        raise ValueError(f"independent kernel: a leaf block K + lam I is singular to working "
                         f"precision (lam={lam:g} is below the rounding error of the kernel "
                         f"values); increase lam")


def predict_blocks(const double[:, ::1] X, const int64_t[::1] start, const int64_t[::1] count,
                   int depth, int kind, double sigma, const double[:, ::1] alpha,
                   const double[:, ::1] Xq, const int64_t[::1] leaf_start, int n_threads):
    """Scores for test points grouped by leaf: rows leaf_start[l]:leaf_start[l+1] use leaf l."""
    cdef int k = alpha.shape[1]
    out = np.zeros((Xq.shape[0], k))
    cdef double[:, ::1] F = out
    if Xq.shape[0] > 0 and k > 0:
        _over_leaves(X, start, count, depth, kind, sigma, 0.0, &alpha[0, 0], k, Xq, leaf_start,
                     &F[0, 0], NULL, n_threads)
    return out


def variance_blocks(const double[:, ::1] X, const int64_t[::1] start, const int64_t[::1] count,
                    int depth, int kind, double sigma, double lam, const double[:, ::1] Xq,
                    const int64_t[::1] leaf_start, int n_threads):
    """Posterior variance k(x, x) - |L_i^{-1} k(X_i, x)|^2 (L_i L_i^T = K_ii + lam I) for test
    points grouped by leaf as in predict_blocks; each leaf that has test points is factorised
    again, as in fit_blocks.  Unclipped."""
    out = np.empty(Xq.shape[0])
    cdef double[::1] var = out
    if Xq.shape[0] > 0:
        _over_leaves(X, start, count, depth, kind, sigma, lam, NULL, 1, Xq, leaf_start, NULL,
                     &var[0], n_threads)
    return out
