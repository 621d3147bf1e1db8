"""The independent (block-diagonal) kernel on the leaves of an HCK tree: the paper's baseline.

K_ind = blockdiag(K(X_leaf, X_leaf)): kernel ridge regression decouples into one dense solve per
leaf, and a test point sees only the training points of the leaf it is routed to.  So does the GP
posterior variance: k(x, x) - k(x, X_i) (K_ii + lam I)^{-1} k(X_i, x) for x in leaf i.
"""
from cython.parallel cimport prange
from libc.math cimport log
from libc.stdlib cimport malloc, free
from libc.stdint cimport int64_t

from hkern._linalg cimport gemm, potrf, potrs, trsm
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


def predict_blocks(const double[:, ::1] X, const int64_t[::1] start, const int64_t[::1] count,
                   int depth, int kind, double sigma, const double[:, ::1] alpha,
                   const double[:, ::1] Xq, const int64_t[::1] leaf_start, int n_threads):
    """Scores for test points grouped by leaf: rows leaf_start[l]:leaf_start[l+1] use leaf l."""
    cdef int first = (1 << depth) - 1, n_leaves = 1 << depth, d = X.shape[1], k = alpha.shape[1]
    cdef Py_ssize_t leaf, i, s0, q0, q1, c0
    cdef int m, mq, failures = 0
    cdef double* Kq
    out = np.zeros((Xq.shape[0], k))
    xsq_arr = np.empty(max(X.shape[0], 1))
    qsq_arr = np.empty(max(Xq.shape[0], 1))
    cdef double[:, ::1] F = out
    cdef double[::1] xsq = xsq_arr, qsq = qsq_arr
    if Xq.shape[0] == 0 or k == 0:
        return out
    with nogil:
        sqnorms(X.shape[0], d, &X[0, 0], &xsq[0])
        sqnorms(Xq.shape[0], d, &Xq[0, 0], &qsq[0])
        for leaf in prange(n_leaves, num_threads=n_threads, schedule="dynamic"):
            i = first + leaf
            q0 = leaf_start[leaf]
            q1 = leaf_start[leaf + 1]
            if q1 > q0:
                s0 = start[i]
                m = <int>count[i]
                Kq = <double*>malloc(max(<Py_ssize_t>PREDICT_CHUNK * m, 1) * sizeof(double))
                if Kq == NULL:
                    failures += 1
                else:
                    c0 = q0
                    while c0 < q1:
                        mq = <int>min(<Py_ssize_t>PREDICT_CHUNK, q1 - c0)
                        kernel_block(kind, sigma, mq, m, d, &Xq[c0, 0], &qsq[c0], &X[s0, 0],
                                     &xsq[s0], Kq, m)
                        gemm(False, False, mq, k, m, 1.0, Kq, m, &alpha[s0, 0], k, 0.0,
                             &F[c0, 0], k)
                        c0 = c0 + mq
                    free(Kq)
    if failures:
        raise MemoryError("independent kernel: could not allocate prediction buffers")
    return out


def variance_blocks(const double[:, ::1] X, const int64_t[::1] start, const int64_t[::1] count,
                    int depth, int kind, double sigma, double lam, const double[:, ::1] Xq,
                    const int64_t[::1] leaf_start, int n_threads):
    """Posterior variance k(x, x) - |L_i^{-1} k(X_i, x)|^2 (L_i L_i^T = K_ii + lam I) for test
    points grouped by leaf (rows leaf_start[l]:leaf_start[l+1] use leaf l); each leaf that has
    test points is factorised again, as in fit_blocks.  Unclipped."""
    cdef int first = (1 << depth) - 1, n_leaves = 1 << depth, d = X.shape[1]
    cdef Py_ssize_t leaf, i, a, b, s0, q0, q1, c0
    cdef int m, mq, no_memory = 0, not_pd = 0
    cdef double* Kb
    cdef double* Kq
    cdef double acc, kxx = kernel_from_scaled(kind, 0.0)
    out = np.empty(Xq.shape[0])
    xsq_arr = np.empty(max(X.shape[0], 1))
    qsq_arr = np.empty(max(Xq.shape[0], 1))
    cdef double[::1] var = out, xsq = xsq_arr, qsq = qsq_arr
    if Xq.shape[0] == 0:
        return out
    with nogil:
        sqnorms(X.shape[0], d, &X[0, 0], &xsq[0])
        sqnorms(Xq.shape[0], d, &Xq[0, 0], &qsq[0])
        for leaf in prange(n_leaves, num_threads=n_threads, schedule="dynamic"):
            i = first + leaf
            q0 = leaf_start[leaf]
            q1 = leaf_start[leaf + 1]
            if q1 > q0:
                s0 = start[i]
                m = <int>count[i]
                Kb = <double*>malloc(max(<Py_ssize_t>m * (m + PREDICT_CHUNK), 1)
                                     * sizeof(double))
                if Kb == NULL:
                    no_memory += 1
                else:
                    Kq = Kb + <Py_ssize_t>m * m
                    kernel_block(kind, sigma, m, m, d, &X[s0, 0], &xsq[s0], &X[s0, 0], &xsq[s0],
                                 Kb, m)
                    for a in range(m):
                        Kb[a * m + a] += lam
                    if potrf(m, Kb, m) != 0:
                        not_pd += 1
                    else:
                        c0 = q0
                        while c0 < q1:
                            mq = <int>min(<Py_ssize_t>PREDICT_CHUNK, q1 - c0)
                            kernel_block(kind, sigma, mq, m, d, &Xq[c0, 0], &qsq[c0], &X[s0, 0],
                                         &xsq[s0], Kq, m)
                            # rows k(x, X_i) L_i^{-T}
                            trsm(False, True, True, False, mq, m, 1.0, Kb, m, Kq, m)
                            for a in range(mq):
                                acc = 0.0
                                for b in range(m):
                                    acc = acc + Kq[a * m + b] * Kq[a * m + b]
                                var[c0 + a] = kxx - acc
                            c0 = c0 + mq
                    free(Kb)
    if no_memory:
        raise MemoryError("independent kernel: could not allocate a leaf block")
    if not_pd:
        raise ValueError(f"independent kernel: a leaf block K + lam I is singular to working "
                         f"precision (lam={lam:g} is below the rounding error of the kernel "
                         f"values); increase lam")
    return out
