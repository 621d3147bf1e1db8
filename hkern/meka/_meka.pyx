"""Compiled core of MEKA (spec: doc/specs/meka.md, sections 2-4).

Layout shared by every routine (the Python face builds it and trusts nothing else):

* the training points are sorted by cluster: cluster s owns rows starts[s] .. starts[s+1]-1 of
  X (n x d, C-contiguous);
* the basis W = blkdiag(W^(1), ..., W^(c)) is stored block by block in one flat array: W^(s)
  (n_s x k_s, row-major) starts at W[w_off[s]];
* block column s of W and block row s of L cover columns k_starts[s] .. k_starts[s+1]-1 of
  the K x K link matrix L (dense, row-major, K = sum k_s);
* the landmarks of cluster s are rows z_starts[s] .. z_starts[s+1]-1 of Z, and its Nystrom map
  F^(s) (m_s x k_s, row-major) starts at F[f_off[s]]: W^(s) = K(X_s, Z_s) F^(s).

Each loop over clusters or cluster pairs writes disjoint parts of its output and calls
single-threaded BLAS (the caller holds blas_threads(1)), so results are bitwise identical for
any thread count.  The routines return 0, a LAPACK info, or -1000 when malloc fails.
"""
from cython.parallel cimport prange
from libc.math cimport INFINITY
from libc.stdlib cimport malloc, free
from libc.string cimport memcpy

from hkern._linalg.interrupt cimport Interrupt, interrupt_init, interrupted, reraise
from hkern._linalg.shim cimport gemm, lstsq_rows
from hkern._linalg.tiled cimport gemm_tiled
from hkern.kernels._kernels cimport kernel_block, sqnorms

import numpy as np

# Rows of K(X_s, Z_s) formed at a time when building a basis: bounds the scratch to
# ROW_CHUNK * m_s doubles per thread whatever the cluster size.
cdef enum:
    ROW_CHUNK = 256


def assign_nearest(const double[:, ::1] X, const double[:, ::1] C, Py_ssize_t[::1] labels,
                   int n_threads, double scale=1.0):
    """labels[i] = argmin_s ||scale (X[i] - C[s])||^2 (smallest s on ties), O(n d c).

    ``scale`` is a power of two chosen by the caller so that the squared distances neither
    overflow nor underflow (multiplying by a power of two is exact: the argmin is that of the
    unscaled distances whenever those are representable).  A row whose distances are all
    infinite or NaN still gets label 0, never an unset one.
    """
    cdef Py_ssize_t n = X.shape[0], c = C.shape[0], d = X.shape[1], i, s, j, best
    cdef double dist, best_dist, diff
    with nogil:
        for i in prange(n, num_threads=n_threads, schedule="static"):
            best = 0
            best_dist = INFINITY
            for s in range(c):
                dist = 0.0
                for j in range(d):
                    diff = (X[i, j] - C[s, j]) * scale
                    dist = dist + diff * diff
                if dist < best_dist:
                    best_dist = dist
                    best = s
            labels[i] = best


cdef int _basis(int kind, double sigma, int d, const double* Xs, int n_s, const double* Zs,
                int m_s, const double* Fs, int k_s, double* Ws, Interrupt* it) noexcept nogil:
    """W^(s) = K(X_s, Z_s) F^(s), ROW_CHUNK rows of the kernel block at a time (a unit of work
    between interrupt checks: 2 ROW_CHUNK m_s k_s flops, 0.03 s at m_s = 1024, k_s = 512)."""
    cdef int r0 = 0, rows
    cdef double* E
    cdef double* xsq
    cdef double* zsq
    if n_s == 0 or k_s == 0:
        return 0
    E = <double*>malloc(<Py_ssize_t>ROW_CHUNK * m_s * sizeof(double))
    xsq = <double*>malloc(ROW_CHUNK * sizeof(double))
    zsq = <double*>malloc(m_s * sizeof(double))
    if E == NULL or xsq == NULL or zsq == NULL:
        free(E)
        free(xsq)
        free(zsq)
        return -1000
    sqnorms(m_s, d, Zs, zsq)
    while r0 < n_s:
        if interrupted(it):
            break                   # W^(s) unfinished; the caller raises
        rows = min(<int>ROW_CHUNK, n_s - r0)
        sqnorms(rows, d, Xs + <Py_ssize_t>r0 * d, xsq)
        kernel_block(kind, sigma, rows, m_s, d, Xs + <Py_ssize_t>r0 * d, xsq, Zs, zsq, E, m_s)
        gemm(False, False, rows, k_s, m_s, 1.0, E, m_s, Fs, k_s, 0.0,
             Ws + <Py_ssize_t>r0 * k_s, k_s)
        r0 += rows
    free(E)
    free(xsq)
    free(zsq)
    return 0


def fill_bases(int kind, double sigma, const double[:, ::1] X, const Py_ssize_t[::1] starts,
               const double[:, ::1] Z, const Py_ssize_t[::1] z_starts, const double[::1] F,
               const Py_ssize_t[::1] f_off, const Py_ssize_t[::1] k_starts, double[::1] W,
               const Py_ssize_t[::1] w_off, int n_threads):
    """Every basis block W^(s) = K(X_s, Z_s) F^(s), one cluster per OpenMP iteration."""
    cdef Py_ssize_t c = starts.shape[0] - 1, s
    cdef int d = X.shape[1]
    status_arr = np.zeros(max(c, 1), dtype=np.intc)
    cdef int[::1] status = status_arr
    cdef Interrupt it
    interrupt_init(&it)
    with nogil:
        for s in prange(c, num_threads=n_threads, schedule="dynamic"):
            status[s] = _basis(kind, sigma, d, &X[0, 0] + starts[s] * d,
                        <int>(starts[s + 1] - starts[s]), &Z[0, 0] + z_starts[s] * d,
                        <int>(z_starts[s + 1] - z_starts[s]), &F[0] + f_off[s],
                        <int>(k_starts[s + 1] - k_starts[s]), &W[0] + w_off[s], &it)
    if it.raised:
        reraise()
    return int(status_arr[np.flatnonzero(status_arr)[0]]) if status_arr.any() else 0


cdef int _link(int kind, double sigma, int d, const double* X, const Py_ssize_t* rows_s, int a,
               const Py_ssize_t* rows_t, int b, const double* Ws, Py_ssize_t start_s, int ks,
               const double* Wt, Py_ssize_t start_t, int kt, double rcond, double* L, int ldl,
               Py_ssize_t Ks, Py_ssize_t Kt, int* rank, Interrupt* it) noexcept nogil:
    """L^(s,t) = A^+ G^ (B^+)^T on the sampled rows (rows_s of cluster s, rows_t of cluster t).

    Checks for an interrupt before the kernel block and between the two least-squares solves
    (each one LAPACK dgelsd call on at most a few hundred rows).  When interrupted, L is
    unfinished.

    G^ = K(X[rows_s], X[rows_t]) (a x b), A = W^(s)[rows_s] (a x ks), B = W^(t)[rows_t]
    (b x kt); the pseudo-inverses drop singular values at or below rcond * s_max.  Written to
    L[Ks:Ks+ks, Kt:Kt+kt] and, transposed, to L[Kt:Kt+kt, Ks:Ks+ks].
    """
    cdef Py_ssize_t i, j
    cdef int info, r1 = 0, r2 = 0
    cdef Py_ssize_t sz = (<Py_ssize_t>a + b) * d + a + b + <Py_ssize_t>a * b \
        + <Py_ssize_t>a * ks + <Py_ssize_t>b * kt + 2 * <Py_ssize_t>ks * b + <Py_ssize_t>kt * ks
    cdef double* buf
    rank[0] = 0
    if interrupted(it):
        return 0
    buf = <double*>malloc(sz * sizeof(double))
    cdef double* Xa
    cdef double* Xb
    cdef double* xsq
    cdef double* ysq
    cdef double* G
    cdef double* A
    cdef double* B
    cdef double* T
    cdef double* Tt
    cdef double* Lt
    if buf == NULL:
        return -1000
    Xa = buf
    Xb = Xa + <Py_ssize_t>a * d
    xsq = Xb + <Py_ssize_t>b * d
    ysq = xsq + a
    G = ysq + b
    A = G + <Py_ssize_t>a * b
    B = A + <Py_ssize_t>a * ks
    T = B + <Py_ssize_t>b * kt
    Tt = T + <Py_ssize_t>ks * b
    Lt = Tt + <Py_ssize_t>ks * b
    for i in range(a):
        memcpy(Xa + i * d, X + rows_s[i] * d, d * sizeof(double))
        memcpy(A + i * ks, Ws + (rows_s[i] - start_s) * ks, ks * sizeof(double))
    for i in range(b):
        memcpy(Xb + i * d, X + rows_t[i] * d, d * sizeof(double))
        memcpy(B + i * kt, Wt + (rows_t[i] - start_t) * kt, kt * sizeof(double))
    sqnorms(a, d, Xa, xsq)
    sqnorms(b, d, Xb, ysq)
    kernel_block(kind, sigma, a, b, d, Xa, xsq, Xb, ysq, G, b)
    # T = A^+ G (ks x b), then L^T = B^+ T^T (kt x ks): two relative-tolerance least squares.
    if interrupted(it):
        free(buf)
        return 0
    info = lstsq_rows(a, ks, b, A, ks, G, b, rcond, T, b, &r1)
    if interrupted(it):
        free(buf)
        return 0
    if info == 0:
        for i in range(ks):
            for j in range(b):
                Tt[j * ks + i] = T[i * b + j]
        info = lstsq_rows(b, kt, ks, B, kt, Tt, ks, rcond, Lt, ks, &r2)
        if interrupted(it):
            free(buf)
            return 0
    if info == 0:
        for j in range(kt):
            for i in range(ks):
                L[(Ks + i) * ldl + Kt + j] = Lt[j * ks + i]
                L[(Kt + j) * ldl + Ks + i] = Lt[j * ks + i]
    rank[0] = min(r1, r2)
    free(buf)
    return info


def fill_links(int kind, double sigma, const double[:, ::1] X, const Py_ssize_t[::1] starts,
               const double[::1] W, const Py_ssize_t[::1] w_off,
               const Py_ssize_t[::1] k_starts, const Py_ssize_t[:, ::1] pairs,
               const Py_ssize_t[::1] samples, const Py_ssize_t[:, ::1] sample_off,
               double rcond, double[:, ::1] L, int[::1] ranks, int n_threads):
    """Every off-diagonal link block of the pairs (s, t), s < t, one pair per OpenMP iteration.

    Pair p uses the sampled rows samples[o : o + a] of cluster s and samples[o + a : o + a + b]
    of cluster t, with (o, a, b) = sample_off[p] (indices into the sorted X).
    """
    cdef Py_ssize_t n_pairs = pairs.shape[0], p, s, t, o
    cdef int d = X.shape[1], a, b
    if n_pairs == 0:
        return 0
    status_arr = np.zeros(n_pairs, dtype=np.intc)
    cdef int[::1] status = status_arr
    cdef Interrupt it
    interrupt_init(&it)
    with nogil:
        for p in prange(n_pairs, num_threads=n_threads, schedule="dynamic"):
            s = pairs[p, 0]
            t = pairs[p, 1]
            o = sample_off[p, 0]
            a = <int>sample_off[p, 1]
            b = <int>sample_off[p, 2]
            status[p] = _link(kind, sigma, d, &X[0, 0], &samples[0] + o, a, &samples[0] + o + a, b,
                       &W[0] + w_off[s], starts[s], <int>(k_starts[s + 1] - k_starts[s]),
                       &W[0] + w_off[t], starts[t], <int>(k_starts[t + 1] - k_starts[t]),
                       rcond, &L[0, 0], L.shape[1], k_starts[s], k_starts[t], &ranks[p], &it)
    if it.raised:
        reraise()
    return int(status_arr[np.flatnonzero(status_arr)[0]]) if status_arr.any() else 0


def apply_basis(const double[::1] W, const Py_ssize_t[::1] w_off, const Py_ssize_t[::1] starts,
                const Py_ssize_t[::1] k_starts, const double[:, ::1] V, double[:, ::1] out,
                bint trans, int n_threads):
    """Block-diagonal W (n x K, rows in sorted order) times V, one GEMM per cluster.

    trans=False: out (n x r) = W V for V (K x r), out[rows of s] = W^(s) V[block s].
    trans=True:  out (K x r) = W^T V for V (n x r), out[block s] = W^(s)^T V[rows of s].
    """
    cdef Py_ssize_t c = starts.shape[0] - 1, s, in_off, out_off
    cdef int r = V.shape[1], ns, ks
    if r == 0:
        return
    with nogil:
        for s in prange(c, num_threads=n_threads, schedule="dynamic"):
            ns = <int>(starts[s + 1] - starts[s])
            ks = <int>(k_starts[s + 1] - k_starts[s])
            in_off = (starts[s] if trans else k_starts[s]) * r
            out_off = (k_starts[s] if trans else starts[s]) * r
            gemm(trans, False, ks if trans else ns, r, ns if trans else ks, 1.0,
                 &W[0] + w_off[s], ks, &V[0, 0] + in_off, r, 0.0, &out[0, 0] + out_off, r)


def apply(const double[::1] W, const Py_ssize_t[::1] w_off, const Py_ssize_t[::1] starts,
          const Py_ssize_t[::1] k_starts, const double[:, ::1] L, const double[:, ::1] V,
          double[:, ::1] out, int n_threads):
    """out = W L W^T V (n x r, sorted order) in O(r (n k + K^2)): the MEKA matvec."""
    cdef int K = L.shape[0], r = V.shape[1]
    U = np.zeros((K, r))
    Y = np.zeros((K, r))
    cdef double[:, ::1] u = U, y = Y
    if r == 0 or K == 0:
        return
    apply_basis(W, w_off, starts, k_starts, V, u, True, n_threads)
    cdef Interrupt it
    interrupt_init(&it)
    with nogil:
        gemm_tiled(False, False, K, r, K, 1.0, &L[0, 0], K, &u[0, 0], r, 0.0, &y[0, 0], r,
                   n_threads, &it)
    if it.raised:
        reraise()
    apply_basis(W, w_off, starts, k_starts, y, out, False, n_threads)
