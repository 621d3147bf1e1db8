"""GP posterior variance under the hierarchical kernel, from the factors of an HCKOperator.

The model is the GP whose prior covariance is K_hier' (the hierarchical kernel of the jittered
base kernel, see _hck.pyx) and whose training targets have covariance A = K_hier' + (lam - lam') I.
For a new point x routed to leaf i (parent p), the latent posterior variance is

    var(x) = k(x, x) - k_x^T A^{-1} k_x,       k_x = k_hier'(X, x),

and k_x has the structure of a row of leaf i: k(X_i, x) on the leaf's own rows and H_R u on every
other row R, where u = Sigma_p^{-1} k(Z_p, x) is the test point's U row (no jitter between x and
any training point) and H_R is the far-field basis with A_{R,i} = H_R U_i^T.  Eliminating R
(Schur complement):

    var(x) = k(x, x) - u^T Phi_i u - w^T C_i^{-1} w,   w = k(X_i, x) - U_i Phi_i u,
    Phi_i  = H_R^T A_RR^{-1} H_R   (r_p x r_p),       C_i = A_ii - U_i Phi_i U_i^T,

C_i^{-1} being the leaf's diagonal block of A^{-1}, so C_i is positive definite (>= (lam - lam') I
in exact arithmetic).  Phi comes down the tree.  For a child c of node q with sibling s, with
Psi_q = W_q Phi_q W_q^T (Psi_root = 0) and Delta_q = Sigma_q - Psi_q,

    Phi_c = Psi_q + Delta_q N_s Delta_q,     N_s = (I + theta_s Delta_q)^{-1} theta_s,

where theta_s = U_s^T B_s^{-1} U_s is the quantity the factorisation's upward pass passes to the
parent (leaf: U^T B^{-1} U; non-leaf: W^T Xi W~ with Xi the sum of the children's theta).  The
derivation: R_c = R_q + subtree(s); eliminating R_q leaves subtree s with the block
A_ss - U_s Psi_q U_s^T = B_s + U_s Delta_q U_s^T, and U_s^T (B_s + U_s Delta U_s^T)^{-1} U_s =
(I + theta_s Delta)^{-1} theta_s (Woodbury); I + theta_s Delta is invertible because that block
and B_s are both positive definite (matrix determinant lemma).  No rank condition on U is
needed.  At depth 0 the root is the only leaf: C = A and the u terms vanish.

Cost: theta and Phi are O(r^3) per node, C_i is a kernel block, one product and one Cholesky
factor per leaf: O(n r^2) in all, about one factorisation of the fit.  Each test point then
costs O(n_i^2 + n_i r_p + r_p^2 + r_p d), about as much as its mean prediction.

Parallelism as in _hck.pyx: nodes of one level (or leaves) in an OpenMP prange, each node's
arithmetic single-threaded BLAS on its own blocks, so results are bitwise identical for any
n_jobs.
"""
from cython.parallel cimport prange
from libc.stdlib cimport malloc, free
from libc.string cimport memcpy

from hkern._linalg.shim cimport gemm, getrf, getrs, potrf, symmetrize_from_lower, syrk, trsm
from hkern.kernels._kernels cimport (kernel_block, kernel_block_lower, kernel_from_scaled,
                                     sqnorms)
from hkern.hierarchical._hck cimport HCKOperator, parent_of

import numpy as np

# Test points evaluated at a time per leaf (bounds the per-thread buffers, as in _hck.pyx).
cdef int CHUNK = 1024
CHUNK_SIZE = CHUNK        # for the memory estimate of the Python layer

cdef enum:
    FAIL_MEMORY = -1
    FAIL_LU = 3           # I + theta Delta singular to working precision
    FAIL_POSTERIOR = 4    # C_i not positive definite to working precision


def node_offsets(HCKOperator op):
    """Offsets of the per-node r_parent x r_parent blocks (theta, Phi) of every non-root node,
    heap order; the leaves, the last 2^J nodes, come last and contiguous."""
    rank = np.asarray(op.rank)
    sizes = np.zeros(op.n_nodes, dtype=np.intp)
    ids = np.arange(1, op.n_nodes)
    sizes[1:] = rank[(ids - 1) // 2] ** 2
    off = np.zeros(op.n_nodes + 1, dtype=np.intp)
    np.cumsum(sizes, out=off[1:])
    return off


cdef int _theta(HCKOperator op, Py_ssize_t i, double* theta,
                const Py_ssize_t* t_off) noexcept nogil:
    """theta_i (r_p x r_p) of non-root node i, from its children's theta (non-leaf) or from its
    leaf factors."""
    cdef Py_ssize_t p = parent_of(i), a
    cdef int rp = <int>op.rank[p], ri, m
    cdef double* work
    cdef double* out = theta + t_off[i]
    if i >= op.first_leaf:
        # V = LB^{-1} U;  theta = V^T V
        m = <int>op.count[i]
        work = <double*>malloc(max(<Py_ssize_t>m * rp, 1) * sizeof(double))
        if work == NULL:
            return FAIL_MEMORY
        memcpy(work, &op.U[op.u_off[i]], <Py_ssize_t>m * rp * sizeof(double))
        trsm(True, True, False, False, m, rp, 1.0, &op.LB[op.b_off[i]], m, work, rp)
        syrk(True, True, rp, m, 1.0, work, rp, 0.0, out, rp)
    else:
        # Xi = theta_left + theta_right;  theta = (Xi W)^T W~
        ri = <int>op.rank[i]
        work = <double*>malloc(max(<Py_ssize_t>ri * ri + <Py_ssize_t>ri * rp, 1) * sizeof(double))
        if work == NULL:
            return FAIL_MEMORY
        for a in range(<Py_ssize_t>ri * ri):
            work[a] = theta[t_off[2 * i + 1] + a] + theta[t_off[2 * i + 2] + a]
        gemm(False, False, ri, rp, ri, 1.0, work, ri, &op.W[op.w_off[i]], rp, 0.0,
             work + <Py_ssize_t>ri * ri, rp)
        gemm(True, False, rp, rp, ri, 1.0, work + <Py_ssize_t>ri * ri, rp, &op.Wt[op.w_off[i]], rp,
             0.0, out, rp)
    symmetrize_from_lower(rp, out, rp)
    free(work)
    return 0


cdef int _phi_children(HCKOperator op, Py_ssize_t q, const double* theta, double* phi,
                       const Py_ssize_t* t_off) noexcept nogil:
    """Phi of both children of non-leaf q, from Phi_q (q non-root) and the siblings' theta."""
    cdef int rq = <int>op.rank[q], rpp, status = 0, side
    cdef Py_ssize_t r2 = <Py_ssize_t>rq * rq, a, c, s
    cdef double* D
    cdef double* Psi
    cdef double* M
    cdef double* N
    cdef double* T
    cdef int* ipiv
    cdef double* work = <double*>malloc(max(4 * r2 + <Py_ssize_t>rq * op.r_max, 1) * sizeof(double))
    ipiv = <int*>malloc(max(rq, 1) * sizeof(int))
    if work == NULL or ipiv == NULL:
        free(work)
        free(ipiv)
        return FAIL_MEMORY
    D = work
    Psi = D + r2
    M = Psi + r2
    N = M + r2
    T = N + r2                       # rq x max(rq, r_parent(q))
    # Delta = Sigma_q - Psi_q with Sigma_q = L_q L_q^T
    syrk(True, False, rq, rq, 1.0, &op.L[op.sq_off[q]], rq, 0.0, D, rq)
    symmetrize_from_lower(rq, D, rq)
    if q == 0:
        for a in range(r2):
            Psi[a] = 0.0
    else:
        rpp = <int>op.rank[parent_of(q)]
        gemm(False, False, rq, rpp, rpp, 1.0, &op.W[op.w_off[q]], rpp, phi + t_off[q], rpp, 0.0,
             T, rpp)
        gemm(False, True, rq, rq, rpp, 1.0, T, rpp, &op.W[op.w_off[q]], rpp, 0.0, Psi, rq)
        symmetrize_from_lower(rq, Psi, rq)
        for a in range(r2):
            D[a] -= Psi[a]
    for side in range(2):
        c = 2 * q + 1 + side
        s = 2 * q + 2 - side
        # N = (I + theta_s Delta)^{-1} theta_s;  Phi_c = Psi + Delta N Delta
        gemm(False, False, rq, rq, rq, 1.0, theta + t_off[s], rq, D, rq, 0.0, M, rq)
        for a in range(rq):
            M[a * rq + a] += 1.0
        if getrf(rq, M, rq, ipiv) != 0:
            status = FAIL_LU
            break
        memcpy(N, theta + t_off[s], r2 * sizeof(double))
        getrs(rq, rq, M, rq, ipiv, N, rq)
        gemm(False, False, rq, rq, rq, 1.0, N, rq, D, rq, 0.0, T, rq)
        memcpy(phi + t_off[c], Psi, r2 * sizeof(double))
        gemm(False, False, rq, rq, rq, 1.0, D, rq, T, rq, 1.0, phi + t_off[c], rq)
        symmetrize_from_lower(rq, phi + t_off[c], rq)
    free(work)
    free(ipiv)
    return status


cdef int _leaf_factor(HCKOperator op, Py_ssize_t i, const double* phi, const Py_ssize_t* t_off,
                      double* LC) noexcept nogil:
    """Cholesky factor of C_i = K(X_i, X_i) + lam I - U_i Phi_i U_i^T into LC's lower triangle
    (its strict upper triangle is left unspecified: only trsm with lower=True reads LC)."""
    cdef int m = <int>op.count[i], rp = <int>op.rank[parent_of(i)], a
    cdef Py_ssize_t s0 = op.start[i] - op.row0
    cdef double* T = <double*>malloc(max(<Py_ssize_t>m * rp, 1) * sizeof(double))
    if T == NULL:
        return FAIL_MEMORY
    kernel_block_lower(op.kind, op.sigma, m, op.d, &op.X[s0, 0], &op.xsq[s0], LC, m)
    for a in range(m):
        LC[a * m + a] += op.lam
    gemm(False, False, m, rp, rp, 1.0, &op.U[op.u_off[i]], rp, phi + t_off[i], rp, 0.0, T, rp)
    gemm(False, True, m, m, rp, -1.0, T, rp, &op.U[op.u_off[i]], rp, 1.0, LC, m)
    free(T)
    if potrf(m, LC, m) != 0:
        return FAIL_POSTERIOR
    return 0


def posterior_factors(HCKOperator op, int n_threads=1, exchange=None):
    """Per-leaf factors of the posterior variance: (LC, Phi, t_off).

    LC holds the Cholesky factor of every leaf's C_i in the layout of the leaf factors LB
    (op.factors()["b_off"]); at depth 0 it is LB itself (C = A).  Phi holds Phi_i of every
    non-root node at t_off[i] (r_parent x r_parent).  BLAS must be limited to one thread by the
    caller.  For an operator that holds a part of the tree (op.levels > 0, hkern/hierarchical/
    sharded.py), ``exchange(theta, t_off, error)`` fills in the other parts' theta blocks of
    the level-L nodes between the upward pass below the top levels and above them.
    """
    cdef int J = op.depth, L = op.levels, t, status = 0
    cdef Py_ssize_t i, b, n_theta
    off = node_offsets(op)
    cdef Py_ssize_t[::1] t_off = off
    n_theta = off[op.n_nodes]
    phi_arr = np.empty(max(n_theta, 1))
    if J == 0:
        return np.asarray(op.LB), phi_arr, off
    LC_arr = np.empty(max(int(np.asarray(op.b_off)[op.n_nodes]), 1))
    theta_arr = np.empty(max(n_theta, 1))
    cdef double[::1] phi = phi_arr, LC = LC_arr, theta = theta_arr
    cdef int* node_status = <int*>malloc(op.n_nodes * sizeof(int))
    if node_status == NULL:
        raise MemoryError("HCK posterior variance: could not allocate working memory")
    with nogil:
        for i in range(op.n_nodes):
            node_status[i] = 0
        # theta, upward (children before parents), below the top levels
        t = J
        while t >= max(L, 1):
            _theta_level(op, t, &theta[0], &t_off[0], node_status, n_threads)
            t = t - 1
        status = _first_failure(node_status, op.n_nodes)
    if L > 0:
        exchange(theta_arr, off, _error_for(status, op))
        with nogil:
            t = L - 1
            while t >= 1:
                _theta_level(op, t, &theta[0], &t_off[0], node_status, n_threads)
                t = t - 1
            status = _first_failure(node_status, op.n_nodes)
    with nogil:
        # Phi, downward (parents before children)
        t = 0
        while status == 0 and t < J:
            for b in prange(<Py_ssize_t>op.level_off[t], <Py_ssize_t>op.level_off[t + 1],
                            num_threads=n_threads, schedule="dynamic"):
                i = op.level_nodes[b]
                node_status[i] = _phi_children(op, i, &theta[0], &phi[0], &t_off[0])
            status = _first_failure(node_status, op.n_nodes)
            t = t + 1
        # C_i of every leaf held
        if status == 0:
            for b in prange(<Py_ssize_t>op.level_off[J], <Py_ssize_t>op.level_off[J + 1],
                            num_threads=n_threads, schedule="dynamic"):
                i = op.level_nodes[b]
                node_status[i] = _leaf_factor(op, i, &phi[0], &t_off[0],
                                              &LC[op.b_off[i]])
            status = _first_failure(node_status, op.n_nodes)
    free(node_status)
    _raise_for(status, op)
    return LC_arr, phi_arr, off


cdef void _theta_level(HCKOperator op, int t, double* theta, const Py_ssize_t* t_off,
                       int* node_status, int n_threads) noexcept nogil:
    """theta of the held nodes of level t (>= 1)."""
    cdef Py_ssize_t i, b
    for b in prange(<Py_ssize_t>op.level_off[t], <Py_ssize_t>op.level_off[t + 1],
                    num_threads=n_threads, schedule="dynamic"):
        i = op.level_nodes[b]
        node_status[i] = _theta(op, i, theta, t_off)


cdef int _first_failure(const int* status, Py_ssize_t n) noexcept nogil:
    cdef Py_ssize_t i
    for i in range(n):
        if status[i] != 0:
            return status[i]
    return 0


def _raise_for(int status, HCKOperator op):
    error = _error_for(status, op)
    if error is not None:
        raise error


def _error_for(int status, HCKOperator op):
    if status == 0:
        return None
    if status == FAIL_MEMORY:
        return MemoryError("HCK posterior variance: could not allocate working memory")
    # In exact arithmetic neither can fail (see the module notes): the rounding of the kernel
    # values swamps lam - jitter.
    return ValueError(
        "HCK posterior variance: a matrix that is positive definite in exact arithmetic is "
        f"{'singular' if status == FAIL_LU else 'not positive definite'} to working precision "
        f"(the rounding of the kernel values swamps lam={op.lam:g}); refit with a larger lam")


cdef int _variance_leaf(HCKOperator op, Py_ssize_t leaf, const double[:, ::1] Xq,
                        const double[::1] qsq, const Py_ssize_t[::1] leaf_start,
                        const double* LC, const double* phi, const Py_ssize_t* t_off,
                        double kxx, double* var) noexcept nogil:
    """var(x) of the test points routed to ``leaf`` (rows leaf_start[leaf]:leaf_start[leaf+1])."""
    cdef Py_ssize_t i = op.first_leaf + leaf, p = parent_of(i), s0 = op.start[i] - op.row0
    cdef Py_ssize_t lo = leaf_start[leaf], hi = leaf_start[leaf + 1], q0, a
    cdef int m = <int>op.count[i], rp = 0, chunk, b
    cdef double* Kq
    cdef double* G
    cdef double* Uq
    cdef double* Z = NULL
    cdef double* zsq = NULL
    cdef double acc
    if hi <= lo:
        return 0
    if i != 0:
        rp = <int>op.rank[p]
    Kq = <double*>malloc(max(<Py_ssize_t>CHUNK * (m + 2 * rp) + <Py_ssize_t>rp * (op.d + 1), 1)
                         * sizeof(double))
    if Kq == NULL:
        return 1
    Uq = Kq + <Py_ssize_t>CHUNK * m
    G = Uq + <Py_ssize_t>CHUNK * rp
    Z = G + <Py_ssize_t>CHUNK * rp
    zsq = Z + <Py_ssize_t>rp * op.d
    if i != 0:
        op._gather(p, Z, zsq)
    q0 = lo
    while q0 < hi:
        chunk = <int>min(<Py_ssize_t>CHUNK, hi - q0)
        kernel_block(op.kind, op.sigma, chunk, m, op.d, &Xq[q0, 0], &qsq[q0], &op.X[s0, 0],
                     &op.xsq[s0], Kq, m)
        for a in range(chunk):
            var[q0 + a] = kxx
        if i != 0:
            # u = K(Xq, Z_p) Sigma_p^{-1} (as the mean prediction forms it);  G = u Phi_i;
            # w = k - U_i G^T (rows);  var -= u . G
            kernel_block(op.kind, op.sigma, chunk, rp, op.d, &Xq[q0, 0], &qsq[q0], Z, zsq, Uq, rp)
            trsm(False, True, True, False, chunk, rp, 1.0, &op.L[op.sq_off[p]], rp, Uq, rp)
            trsm(False, True, False, False, chunk, rp, 1.0, &op.L[op.sq_off[p]], rp, Uq, rp)
            gemm(False, False, chunk, rp, rp, 1.0, Uq, rp, phi + t_off[i], rp, 0.0, G, rp)
            gemm(False, True, chunk, m, rp, -1.0, G, rp, &op.U[op.u_off[i]], rp, 1.0, Kq, m)
            for a in range(chunk):
                acc = 0.0
                for b in range(rp):
                    acc = acc + Uq[a * rp + b] * G[a * rp + b]
                var[q0 + a] -= acc
        # var -= |L_C^{-1} w|^2
        trsm(False, True, True, False, chunk, m, 1.0, LC, m, Kq, m)
        for a in range(chunk):
            acc = 0.0
            for b in range(m):
                acc = acc + Kq[a * m + b] * Kq[a * m + b]
            var[q0 + a] -= acc
        q0 += chunk
    free(Kq)
    return 0


def posterior_variance(HCKOperator op, const double[:, ::1] Xq, const Py_ssize_t[::1] leaf_start,
                       const double[::1] LC, const double[::1] phi, const Py_ssize_t[::1] t_off,
                       int n_threads=1):
    """Latent posterior variance at test points grouped by leaf (as HCKOperator.predict), from
    the factors of :func:`posterior_factors`.  Not clipped: rounding can leave values a few ulps
    of k(x, x) below zero."""
    cdef int mq = Xq.shape[0], n_leaves = 1 << op.depth, failures = 0
    cdef Py_ssize_t leaf
    cdef double kxx = kernel_from_scaled(op.kind, 0.0)
    out = np.empty(mq)
    cdef double[::1] var = out
    qsq_arr = np.empty(max(mq, 1))
    cdef double[::1] qsq = qsq_arr
    if mq == 0:
        return out
    with nogil:
        sqnorms(mq, op.d, &Xq[0, 0], &qsq[0])
        for leaf in prange(n_leaves, num_threads=n_threads, schedule="dynamic"):
            failures += _variance_leaf(op, leaf, Xq, qsq, leaf_start,
                                       &LC[op.b_off[op.first_leaf + leaf]], &phi[0], &t_off[0],
                                       kxx, &var[0])
    if failures:
        raise MemoryError("HCK posterior variance: could not allocate prediction buffers")
    return out
