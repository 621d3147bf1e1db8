"""Compiled core of the hierarchically compositional kernel (HCK), spec: doc/specs/hck.md.

The tree is complete and binary, in heap order: node 0 is the root, the children of i are 2i+1
and 2i+2, the 2^J leaves are nodes first_leaf = 2^J - 1 .. 2^(J+1) - 2.  Data are in tree order,
so node i owns the rows start[i] .. start[i] + count[i] - 1.  Non-leaf node i has rank[i]
landmarks (row positions lm[lm_off[i]:lm_off[i+1]], sorted).

The matrix represented is A = K_hier' + (lam - lam') I, where K_hier' is the hierarchical kernel
of the jittered base kernel k'(x_a, x_b) = k(x_a, x_b) + lam' [a == b] (identity of training
rows, doc/specs/hck.md, section 2.5).  Stored factors (section 2 there, with Sigma kept only
as its Cholesky factor):

    L_p      Cholesky factor of Sigma_p = K'(Z_p, Z_p)                 non-leaf p    r_p x r_p
    U_i      K'(X_i, Z_p) Sigma_p^{-1}                                 leaf i        n_i x r_p
    W_i      K'(Z_i, Z_p) Sigma_p^{-1}                                 non-root i    r_i x r_p
    LB_i     Cholesky factor of B_i = K(X_i, X_i) + lam I - U_i Sigma_p U_i^T      n_i x n_i
    St_i     Sigma~_i = -(I + Lambda_i Xi_i)^{-1} Lambda_i             non-leaf i    r_i x r_i
    Wt_i     W~_i = (I + Sigma~_i Xi_i) W_i                            non-root i    r_i x r_p

Inverse (doc/specs/hck.md, Algorithm 2, upward pass only: Corrections 1).  With
D_i = blockdiag(B_j, j child of i), the Woodbury identity gives
B_i^{-1} = D_i^{-1} + (D_i^{-1} U_i) Sigma~_i (D_i^{-1} U_i)^T, so

    A^{-1} = blockdiag(B_leaf^{-1}) + sum over non-leaf i of  Q_i Sigma~_i Q_i^T,

where Q_i stacks, over the children j of i, B_j^{-1} U_j (leaf j) or Q_j W~_j (non-leaf j).
Applying A^{-1} through this sum (every node's own term included, "self-inclusive") needs only
the upward-pass factors: Algorithm 2's downward corrections, the explicit leaf inverses and the
U~ = B^{-1} U blocks are never formed.  The leaf blocks are kept as Cholesky factors.

log det A = sum over leaves of log det B_leaf + sum over non-leaves of log det(I + Lambda Xi)
(doc/specs/hck.md, section 2.6).

Parallelism: every routine runs the nodes of one level, or whole subtrees, in an OpenMP prange,
each node's arithmetic being single-threaded BLAS on its own blocks; every node is computed by
the same operations whatever the thread count, so results are bitwise identical for any n_jobs.
"""
from cython.parallel cimport prange
from openmp cimport omp_get_wtime
from libc.math cimport log, fabs
from libc.stdlib cimport malloc, free, calloc
from libc.string cimport memcpy, memset

from hkern._linalg.interrupt cimport Interrupt, interrupt_init, interrupted, reraise
from hkern._linalg.shim cimport gemm, getrf, getrs, potrs, symmetrize_from_lower, trmm, trsm
from hkern._linalg.tiled cimport gemm_tiled, potrf_tiled, syrk_tiled, trsm_tiled
from hkern.kernels._kernels cimport kernel_block, kernel_block_lower, sqnorms

import numpy as np

# Levels processed as whole subtrees by one thread each (2^SPLIT_LEVEL subtrees at most); the
# levels above are processed node by node.  Scheduling only: results do not depend on it.
cdef int SPLIT_LEVEL = 3
# Test points evaluated at a time per leaf in predict (bounds the per-thread buffers).
cdef int PREDICT_CHUNK = 1024
# Right-hand sides per getrs call in _nonleaf_up: with r = 2048 a call on all r of them was
# 1.7e10 flops, too long between two interrupt checks; 64 columns make it 5e8.
cdef int GETRS_PANEL = 64


cdef inline double* _mutable(const double* p) noexcept nogil:
    # The factor buffers are const memoryviews (read-only arrays of an unpickled model are
    # accepted); the construction, which owns freshly allocated buffers, writes them through this.
    return <double*>p


cdef void add_jitter_rows(double* out, int ldo, Py_ssize_t row0, int m, const Py_ssize_t* cols,
                          int nc, double jitter) noexcept nogil:
    """out[a, b] += jitter where training row row0 + a is landmark cols[b]."""
    cdef int b
    cdef Py_ssize_t a
    for b in range(nc):
        a = cols[b] - row0
        if 0 <= a < m:
            out[a * ldo + b] += jitter


cdef void add_jitter_lists(double* out, int ldo, const Py_ssize_t* rows, int nr,
                           const Py_ssize_t* cols, int nc, double jitter) noexcept nogil:
    """out[a, b] += jitter where rows[a] == cols[b]; both lists sorted ascending."""
    cdef int a = 0, b = 0
    while a < nr and b < nc:
        if rows[a] == cols[b]:
            out[a * ldo + b] += jitter
            a += 1
            b += 1
        elif rows[a] < cols[b]:
            a += 1
        else:
            b += 1


cdef void symmetrize(int n, double* A, int lda) noexcept nogil:
    cdef int a, b
    cdef double v
    for a in range(n):
        for b in range(a + 1, n):
            v = 0.5 * (A[a * lda + b] + A[b * lda + a])
            A[a * lda + b] = v
            A[b * lda + a] = v


cdef Work* work_alloc(int r, int d, int leaf_max, int levels) noexcept nogil:
    cdef Work* w = <Work*>calloc(1, sizeof(Work))
    cdef Py_ssize_t r2 = <Py_ssize_t>r * r
    cdef Py_ssize_t total = 2 * (<Py_ssize_t>r * d + r) + 3 * r2 \
        + <Py_ssize_t>leaf_max * r + 2 * levels * r2
    cdef double* buf
    if w == NULL:
        return NULL
    buf = <double*>malloc(max(total, 1) * sizeof(double))
    w.ipiv = <int*>malloc(max(r, 1) * sizeof(int))
    if buf == NULL or w.ipiv == NULL:
        free(buf)
        free(w.ipiv)
        free(w)
        return NULL
    w.Z1 = buf
    w.z1sq = w.Z1 + <Py_ssize_t>r * d
    w.Z2 = w.z1sq + r
    w.z2sq = w.Z2 + <Py_ssize_t>r * d
    w.S = w.z2sq + r
    w.M = w.S + r2
    w.T = w.M + r2
    w.V = w.T + r2
    w.stack = w.V + <Py_ssize_t>leaf_max * r
    return w


cdef void work_free(Work* w) noexcept nogil:
    if w != NULL:
        free(w.Z1)
        free(w.ipiv)
        free(w)


# Failure codes returned by the nogil routines (the Python layer turns them into errors).
cdef enum:
    FAIL_MEMORY = -1
    FAIL_SIGMA = 1        # Sigma_p not positive definite
    FAIL_LEAF = 2         # B_leaf not positive definite
    FAIL_LU = 3           # I + Lambda Xi singular
    FAIL_INTERRUPT = 4    # a signal handler raised (the caller raises its exception)


cdef void free_tree_vectors(TreeVectors* v) noexcept nogil:
    """Free what _new_tree_vectors allocated (g_off goes with c_off: one block)."""
    free(v.c)
    free(v.second)
    free(v.sv)
    free(v.tmp)
    free(v.c_off)
    v.c = v.second = v.sv = v.tmp = NULL
    v.c_off = v.g_off = NULL


cdef class HCKOperator:
    """The HCK factors of A = K_hier' + (lam - lam') I and the algorithms that use them.

    Parameters
    ----------
    X : (n, d) float64, C-contiguous, rows in tree order (ideally centred)
    depth : int
        J; the tree has 2^J leaves.
    start, count : (2^(J+1) - 1,) intp
        Row ranges of the nodes (heap order).
    lm_off, lm : intp
        CSR landmark lists of the 2^J - 1 non-leaf nodes (row positions, sorted).
    kind : int
        Kernel kind (hkern.kernels._kernels.KernelKind).
    sigma, lam, jitter : float
        Bandwidth, ridge lam and jitter lam' (0 <= lam' <= lam).
    n_threads : int
        OpenMP threads (BLAS must be limited to one thread by the caller).
    part : dict or None
        One MPI rank's part of the tree (hkern/hierarchical/sharded.py): ``row0``, ``levels``,
        ``subtrees`` (the range of level-``levels`` subtrees held), ``Ztop`` and ``ztop_off``
        (the landmark points of the top nodes, by node) and ``exchange``, called as
        ``exchange(theta, error)`` between the factorisation below the top levels and above
        them to fill in the other parts' Theta blocks of the level-``levels`` nodes.  X, lm
        and lm_off then hold this part only (positions global).  None: the whole tree.
    """

    def __init__(self, const double[:, ::1] X, int depth, const Py_ssize_t[::1] start,
                 const Py_ssize_t[::1] count, const Py_ssize_t[::1] lm_off,
                 const Py_ssize_t[::1] lm, int kind, double sigma, double lam, double jitter,
                 int n_threads, part=None):
        cdef Py_ssize_t i, p
        self._set_part(depth, part, X.shape[1])
        self.n = X.shape[0]
        self.d = X.shape[1]
        self.depth = depth
        self.first_leaf = (1 << depth) - 1
        self.n_nodes = (1 << (depth + 1)) - 1
        self.kind = kind
        self.sigma = sigma
        self.lam = lam
        self.jitter = jitter
        self.X = X
        xsq = np.empty(max(self.n, 1))
        cdef double[::1] xsq_view = xsq
        if self.n > 0:
            sqnorms(self.n, self.d, &X[0, 0], &xsq_view[0])
        self.xsq = xsq
        self.start = start
        self.count = count
        self.lm_off = lm_off
        self.lm = lm

        rank = np.zeros(self.n_nodes, dtype=np.intp)
        rank[: self.first_leaf] = np.diff(np.asarray(lm_off))
        self.rank = rank
        self.r_max = int(rank.max()) if self.first_leaf > 0 else 0
        counts = np.asarray(count)
        held = np.zeros(self.n_nodes, dtype=bool)
        held[np.asarray(self.level_nodes)] = True
        self.leaf_max = int(max(counts[self.first_leaf:][held[self.first_leaf:]].max(
            initial=0), 1))

        # Offsets of the flat factor buffers (heap order); nodes of other parts take no space.
        ids = np.arange(self.n_nodes)
        parent_rank = np.zeros(self.n_nodes, dtype=np.intp)
        parent_rank[1:] = rank[(ids[1:] - 1) // 2]
        is_leaf = ids >= self.first_leaf
        sq_sizes = np.where(is_leaf | ~held, 0, rank * rank)
        w_sizes = np.where(is_leaf | (ids == 0) | ~held, 0, rank * parent_rank)
        u_sizes = np.where(is_leaf & held, counts * parent_rank, 0)
        b_sizes = np.where(is_leaf & held, counts * counts, 0)

        def offsets(sizes):
            off = np.zeros(self.n_nodes + 1, dtype=np.intp)
            np.cumsum(sizes, out=off[1:])
            return off

        self.sq_off = offsets(sq_sizes)
        self.w_off = offsets(w_sizes)
        self.u_off = offsets(u_sizes)
        self.b_off = offsets(b_sizes)
        # np.empty, not np.zeros: every entry is written by the factorisation, and on this
        # project's VMs first-touching calloc'ed memory ran 6x slower (1.8 vs 11.2 GB/s) -- at
        # n = 10^6 that was seconds of the fit.
        self.L = np.empty(max(int(self.sq_off[self.n_nodes]), 1))
        self.St = np.empty(max(int(self.sq_off[self.n_nodes]), 1))
        self.W = np.empty(max(int(self.w_off[self.n_nodes]), 1))
        self.Wt = np.empty(max(int(self.w_off[self.n_nodes]), 1))
        self.U = np.empty(max(int(self.u_off[self.n_nodes]), 1))
        self.LB = np.empty(max(int(self.b_off[self.n_nodes]), 1))
        self.logdet_parts = np.zeros(self.n_nodes)

        cdef int status, node = -1
        cdef int split = min(depth, max(SPLIT_LEVEL, self.levels))
        cdef Py_ssize_t r2 = <Py_ssize_t>self.r_max * self.r_max
        theta = np.empty(max(((2 << split) - 1) * r2, 1))
        cdef double[::1] th = theta
        cdef Interrupt it
        interrupt_init(&it)
        with nogil:
            status = self._factorize_below(n_threads, &node, &th[0], split, &it)
        if it.raised:
            reraise()
        if self.levels > 0:
            # The other parts' Theta blocks of the level-L nodes; a failure on any part is
            # raised on every part there.
            part["exchange"](theta.reshape(-1, max(r2, 1))[:(2 << self.levels) - 1]
                             if r2 else theta[:0].reshape(0, 1),
                             _error_for(status, node, self))
            with nogil:
                status = self._factorize_above(n_threads, &node, &th[0], &it)
            if it.raised:
                reraise()
        _raise_for(status, node, self)
        self.logdet_value = float(np.sum(np.asarray(self.logdet_parts)))

    def _set_part(self, int depth, part, int d):
        """The nodes held (level_off, level_nodes), row0, levels and the top landmark store."""
        cdef Py_ssize_t n_nodes = (1 << (depth + 1)) - 1
        levels = 0 if part is None else int(part["levels"])
        self.levels = levels
        self.n_top = (1 << levels) - 1
        self.row0 = 0 if part is None else int(part["row0"])
        nodes = [np.arange((1 << t) - 1, (2 << t) - 1) for t in range(depth + 1)]
        if part is not None:
            subtrees = part["subtrees"]
            for t in range(levels, depth + 1):
                per = 1 << (t - levels)             # nodes of level t in each subtree
                first = (1 << t) - 1
                nodes[t] = np.arange(first + subtrees.start * per, first + subtrees.stop * per)
        self.level_off = np.concatenate([[0], np.cumsum([len(a) for a in nodes])]).astype(
            np.intp)
        self.level_nodes = np.concatenate(nodes).astype(np.intp)
        if part is not None and levels > 0:
            Ztop = np.ascontiguousarray(part["Ztop"], dtype=np.float64)
            self.Ztop = Ztop
            self.ztop_off = np.asarray(part["ztop_off"], dtype=np.intp)
        else:
            Ztop = np.empty((1, d))
            self.Ztop = Ztop
            self.ztop_off = np.zeros(1, dtype=np.intp)
        zsq = np.empty(max(Ztop.shape[0], 1))
        cdef double[::1] zsq_view = zsq
        cdef const double[:, ::1] Zv = Ztop
        if Ztop.shape[0] > 0 and part is not None and levels > 0:
            sqnorms(Ztop.shape[0], d, &Zv[0, 0], &zsq_view[0])
        self.ztop_sq = zsq

    # ------------------------------------------------------------------------------------------
    # Construction and inversion (upward pass)
    # ------------------------------------------------------------------------------------------

    cdef void _gather(self, Py_ssize_t i, double* Z, double* zsq) noexcept nogil:
        """Landmark rows of non-leaf node i into Z (r_i x d) and their squared norms."""
        cdef Py_ssize_t a, off = self.lm_off[i], z0
        cdef int ri = <int>self.rank[i]
        if i < self.n_top:          # a top node of a part: its points are kept aside
            z0 = self.ztop_off[i]
            memcpy(Z, &self.Ztop[z0, 0], <Py_ssize_t>ri * self.d * sizeof(double))
            memcpy(zsq, &self.ztop_sq[z0], ri * sizeof(double))
            return
        for a in range(ri):
            memcpy(Z + a * self.d, &self.X[self.lm[off + a] - self.row0, 0],
                   self.d * sizeof(double))
            zsq[a] = self.xsq[self.lm[off + a] - self.row0]

    cdef void _instantiate(self, Py_ssize_t i, Work* w) noexcept nogil:
        """Kernel blocks of node i into its factor buffers (jitter of doc/specs/hck.md, 2.5).

        Non-leaf i: Sigma_i = K'(Z_i, Z_i) (lower triangle) into L_i and into Sigma~_i's buffer,
        where _nonleaf_up reads it before overwriting it; W_i <- K'(Z_i, Z_p).  Leaf i:
        LB_i <- K(X_i, X_i) + lam I (lower triangle); U_i <- K'(X_i, Z_p).  This is the
        paper's "instantiating A"; every later step is arithmetic on these buffers.
        """
        cdef Py_ssize_t p, s0
        cdef int ri, rp, m, a
        cdef double* Li
        if i < self.first_leaf:
            ri = <int>self.rank[i]
            Li = _mutable(&self.L[self.sq_off[i]])
            self._gather(i, w.Z1, w.z1sq)
            kernel_block_lower(self.kind, self.sigma, ri, self.d, w.Z1, w.z1sq, Li, ri)
            for a in range(ri):
                Li[a * ri + a] += self.jitter
            memcpy(_mutable(&self.St[self.sq_off[i]]), Li, <Py_ssize_t>ri * ri * sizeof(double))
            if i != 0:
                p = parent_of(i)
                rp = <int>self.rank[p]
                self._gather(p, w.Z2, w.z2sq)
                kernel_block(self.kind, self.sigma, ri, rp, self.d, w.Z1, w.z1sq, w.Z2, w.z2sq,
                             _mutable(&self.W[self.w_off[i]]), rp)
                add_jitter_lists(_mutable(&self.W[self.w_off[i]]), rp, &self.lm[self.lm_off[i]], ri,
                                 &self.lm[self.lm_off[p]], rp, self.jitter)
                # W~_i is computed from W_i later; touching its memory now keeps all first-touch
                # page faults of the factor memory (the kernel zeroes each new page) in this phase.
                memset(_mutable(&self.Wt[self.w_off[i]]), 0, <Py_ssize_t>ri * rp * sizeof(double))
        else:
            s0 = self.start[i]
            m = <int>self.count[i]
            kernel_block_lower(self.kind, self.sigma, m, self.d, &self.X[s0 - self.row0, 0],
                               &self.xsq[s0 - self.row0], _mutable(&self.LB[self.b_off[i]]), m)
            for a in range(m):
                _mutable(&self.LB[0])[self.b_off[i] + <Py_ssize_t>a * m + a] += self.lam
            if i != 0:
                p = parent_of(i)
                rp = <int>self.rank[p]
                self._gather(p, w.Z1, w.z1sq)
                kernel_block(self.kind, self.sigma, m, rp, self.d, &self.X[s0 - self.row0, 0],
                             &self.xsq[s0 - self.row0], w.Z1, w.z1sq,
                             _mutable(&self.U[self.u_off[i]]), rp)
                add_jitter_rows(_mutable(&self.U[self.u_off[i]]), rp, s0, m,
                                &self.lm[self.lm_off[p]], rp, self.jitter)

    cdef int _sigma_factor(self, Py_ssize_t i, Interrupt* it) noexcept nogil:
        """L_i = chol(Sigma_i) in place (Sigma_i instantiated in L_i)."""
        cdef int ri = <int>self.rank[i], a, b
        cdef double* Li = _mutable(&self.L[self.sq_off[i]])
        # The node's arithmetic runs on this thread: the tiled routines with one thread cut it
        # into calls short enough to check for an interrupt between them (the same calls for
        # any n_jobs).
        if potrf_tiled(ri, Li, ri, 1, it) != 0:
            return FAIL_SIGMA
        if interrupted(it):
            return FAIL_INTERRUPT
        for a in range(ri):
            for b in range(a + 1, ri):
                Li[a * ri + b] = 0.0
        return 0

    cdef int _leaf_up(self, Py_ssize_t i, double* theta, Work* w, Interrupt* it) noexcept nogil:
        """Factors of leaf i; theta (r_p x r_p) <- U_i^T B_i^{-1} U_i."""
        cdef Py_ssize_t p
        cdef int m = <int>self.count[i], rp, a, b
        cdef double* Bm = _mutable(&self.LB[self.b_off[i]])
        cdef double* Ui
        cdef const double* Lp
        cdef double acc = 0.0
        if i != 0:
            p = parent_of(i)
            rp = <int>self.rank[p]
            Ui = _mutable(&self.U[self.u_off[i]])
            Lp = &self.L[self.sq_off[p]]
            # U_i holds K'(X_i, Z_p) and LB_i holds K(X_i, X_i) + lam I (from _instantiate).
            # V^T = K'(X_i, Z_p) L_p^{-T};  B = K + lam I - V^T V  (= A_ii - U Sigma U^T, stably)
            trsm_tiled(False, True, True, False, m, rp, 1.0, Lp, rp, Ui, rp, 1, it)
            syrk_tiled(False, m, rp, -1.0, Ui, rp, 1.0, Bm, m, 1, it)
            # U = V^T L_p^{-1} = K'(X_i, Z_p) Sigma_p^{-1}
            trsm_tiled(False, True, False, False, m, rp, 1.0, Lp, rp, Ui, rp, 1, it)
            if interrupted(it):
                return FAIL_INTERRUPT
        if potrf_tiled(m, Bm, m, 1, it) != 0:
            return FAIL_LEAF
        if interrupted(it):
            return FAIL_INTERRUPT
        for a in range(m):
            acc += log(Bm[a * m + a])
            for b in range(a + 1, m):
                Bm[a * m + b] = 0.0
        _mutable(&self.logdet_parts[0])[i] = 2.0 * acc
        if i != 0:
            # theta = U^T B^{-1} U = V^T V with V = LB^{-1} U
            memcpy(w.V, Ui, <Py_ssize_t>m * rp * sizeof(double))
            trsm_tiled(True, True, False, False, m, rp, 1.0, Bm, m, w.V, rp, 1, it)
            syrk_tiled(True, rp, m, 1.0, w.V, rp, 0.0, theta, rp, 1, it)
            if interrupted(it):
                return FAIL_INTERRUPT
            symmetrize_from_lower(rp, theta, rp)
        return 0

    cdef int _nonleaf_up(self, Py_ssize_t i, double* xi, double* theta, Work* w,
                         Interrupt* it) noexcept nogil:
        """Factors of non-leaf i from Xi_i; theta (r_p x r_p) <- W_i^T Xi_i W~_i (non-root)."""
        cdef int ri = <int>self.rank[i], rp = 0, a
        cdef Py_ssize_t p = 0
        cdef double* Sti = _mutable(&self.St[self.sq_off[i]])
        cdef double* Wi = NULL
        cdef double* Wti = NULL
        cdef const double* Lp
        cdef double acc = 0.0
        cdef int c0
        # Lambda_i = Sigma_i - W_i Sigma_p W_i^T in w.S (Lambda_root = Sigma_root); Sigma_i's lower
        # triangle was left in Sigma~_i's buffer by _instantiate.
        memcpy(w.S, Sti, <Py_ssize_t>ri * ri * sizeof(double))
        if i != 0:
            p = parent_of(i)
            rp = <int>self.rank[p]
            Lp = &self.L[self.sq_off[p]]
            Wi = _mutable(&self.W[self.w_off[i]])
            Wti = _mutable(&self.Wt[self.w_off[i]])
            # W_i holds K'(Z_i, Z_p) (from _instantiate).
            trsm_tiled(False, True, True, False, ri, rp, 1.0, Lp, rp, Wi, rp, 1, it)  # Y^T = K' L_p^-T
            syrk_tiled(False, ri, rp, -1.0, Wi, rp, 1.0, w.S, ri, 1, it)  # Lambda (lower)
            trsm_tiled(False, True, False, False, ri, rp, 1.0, Lp, rp, Wi, rp, 1, it)  # W = Y^T L_p^-1
        symmetrize_from_lower(ri, w.S, ri)
        # M = I + Lambda Xi (LU: Lambda is singular whenever landmark sets overlap)
        gemm_tiled(False, False, ri, ri, ri, 1.0, w.S, ri, xi, ri, 0.0, w.M, ri, 1, it)
        if interrupted(it):
            return FAIL_INTERRUPT
        for a in range(ri):
            w.M[a * ri + a] += 1.0
        if getrf(ri, w.M, ri, w.ipiv) != 0:
            return FAIL_LU
        if interrupted(it):
            return FAIL_INTERRUPT
        for a in range(ri):
            acc += log(fabs(w.M[a * ri + a]))
        _mutable(&self.logdet_parts[0])[i] = acc
        # Sigma~ = -M^{-1} Lambda, symmetrised (asymmetry is round-off, ~1e-15)
        memcpy(Sti, w.S, <Py_ssize_t>ri * ri * sizeof(double))
        c0 = 0
        while c0 < ri:      # column panels: each column of the solution is its own solve
            if interrupted(it):
                return FAIL_INTERRUPT
            getrs(ri, min(GETRS_PANEL, ri - c0), w.M, ri, w.ipiv, Sti + c0, ri)
            c0 = c0 + GETRS_PANEL
        for a in range(ri * ri):
            Sti[a] = -Sti[a]
        symmetrize(ri, Sti, ri)
        if i != 0:
            # T = Xi W;  W~ = W + Sigma~ T;  theta = W^T Xi W~ = T^T W~ (Xi is symmetric)
            gemm_tiled(False, False, ri, rp, ri, 1.0, xi, ri, Wi, rp, 0.0, w.T, rp, 1, it)
            memcpy(Wti, Wi, <Py_ssize_t>ri * rp * sizeof(double))
            gemm_tiled(False, False, ri, rp, ri, 1.0, Sti, ri, w.T, rp, 1.0, Wti, rp, 1, it)
            gemm_tiled(True, False, rp, rp, ri, 1.0, w.T, rp, Wti, rp, 0.0, theta, rp, 1, it)
            if interrupted(it):
                return FAIL_INTERRUPT
            symmetrize(rp, theta, rp)
        return 0

    cdef int _up_subtree(self, Py_ssize_t i, double* theta, Work* w, int level,
                         Interrupt* it) noexcept nogil:
        """Depth-first upward pass over the subtree of i (one thread)."""
        cdef int ri, status
        cdef Py_ssize_t a, r2
        cdef double* xi
        cdef double* th
        if interrupted(it):
            return FAIL_INTERRUPT
        if i >= self.first_leaf:
            return self._leaf_up(i, theta, w, it)
        ri = <int>self.rank[i]
        r2 = <Py_ssize_t>self.r_max * self.r_max
        xi = w.stack + 2 * level * r2
        th = xi + r2
        status = self._up_subtree(2 * i + 1, th, w, level + 1, it)
        if status != 0:
            return status
        memcpy(xi, th, <Py_ssize_t>ri * ri * sizeof(double))
        status = self._up_subtree(2 * i + 2, th, w, level + 1, it)
        if status != 0:
            return status
        for a in range(<Py_ssize_t>ri * ri):
            xi[a] += th[a]
        return self._nonleaf_up(i, xi, theta, w, it)

    cdef int _factorize_below(self, int n_threads, int* failed_node, double* theta,
                              int split, Interrupt* it) noexcept nogil:
        """Every held node's kernel blocks and Sigma factor, then the upward pass over the
        held nodes of levels J .. L (L = self.levels; the whole tree for L = 0): subtrees
        rooted at level ``split`` (>= L) one thread each, depth first, the levels above them
        node by node.  theta holds r_max^2 numbers per node of levels <= split (slot i): the
        Theta block a node hands to its parent.  Every phase checks for an interrupt (it), node
        by node and inside each node's arithmetic; FAIL_INTERRUPT once one came."""
        cdef int J = self.depth, status = 0, t, ri
        cdef Py_ssize_t i, a, b, r2 = <Py_ssize_t>self.r_max * self.r_max
        cdef Work* w
        cdef int* node_status = <int*>calloc(self.n_nodes, sizeof(int))
        cdef double t0, t1
        if node_status == NULL:
            return FAIL_MEMORY
        # Instantiation: every kernel block into its factor buffer (first touch of the factor
        # memory happens here too).  Timed apart from the arithmetic that follows, which is the
        # paper's inversion phase (Algorithm 2 and the factors it needs).
        t0 = omp_get_wtime()
        for a in prange(<Py_ssize_t>self.level_off[J + 1], nogil=True, num_threads=n_threads,
                        schedule="dynamic"):
            i = self.level_nodes[a]
            if interrupted(it):
                continue
            w = work_alloc(self.r_max, self.d, 0, 0)
            if w == NULL:
                node_status[i] = FAIL_MEMORY
            else:
                self._instantiate(i, w)
                work_free(w)
        status = _first_failure(node_status, self.n_nodes, failed_node)
        if interrupted(it):
            status = FAIL_INTERRUPT
        t1 = omp_get_wtime()
        # Phase 0: Cholesky factors of every Sigma_p (children need their parent's).
        if status == 0:
            for a in prange(<Py_ssize_t>self.level_off[J], nogil=True, num_threads=n_threads,
                            schedule="dynamic"):
                i = self.level_nodes[a]
                node_status[i] = FAIL_INTERRUPT if interrupted(it) else self._sigma_factor(i, it)
            status = _first_failure(node_status, self.n_nodes, failed_node)
        # Phase 1: subtrees rooted at level `split`, one thread each, depth first.
        if status == 0:
            for a in prange(<Py_ssize_t>self.level_off[split], <Py_ssize_t>self.level_off[split + 1], nogil=True,
                            num_threads=n_threads, schedule="dynamic"):
                i = self.level_nodes[a]
                w = work_alloc(self.r_max, self.d, self.leaf_max, J - split + 1)
                if w == NULL:
                    node_status[i] = FAIL_MEMORY
                else:
                    node_status[i] = self._up_subtree(i, theta + i * r2 if i > 0 else NULL,
                                                      w, 0, it)
                    work_free(w)
            status = _first_failure(node_status, self.n_nodes, failed_node)
        # Phase 2: the levels above, node by node, down to level L.
        t = split - 1
        while status == 0 and t >= self.levels:
            status = self._nonleaf_level(t, n_threads, theta, node_status, failed_node, it)
            t = t - 1
        self.phase_seconds[0] = t1 - t0
        self.phase_seconds[1] = omp_get_wtime() - t1
        free(node_status)
        return status

    cdef int _factorize_above(self, int n_threads, int* failed_node, double* theta,
                              Interrupt* it) noexcept nogil:
        """The upward pass over the top levels L - 1 .. 0, node by node, from the Theta blocks
        of level L (every part's, filled in by the exchange)."""
        cdef int status = 0, t = self.levels - 1
        cdef int* node_status = <int*>calloc(self.n_nodes, sizeof(int))
        cdef double t1 = omp_get_wtime()
        if node_status == NULL:
            return FAIL_MEMORY
        while status == 0 and t >= 0:
            status = self._nonleaf_level(t, n_threads, theta, node_status, failed_node, it)
            t = t - 1
        self.phase_seconds[1] += omp_get_wtime() - t1
        free(node_status)
        return status

    cdef int _nonleaf_level(self, int t, int n_threads, double* theta, int* node_status,
                            int* failed_node, Interrupt* it) noexcept nogil:
        """_nonleaf_up of the held nodes of level t from their children's Theta blocks."""
        cdef Py_ssize_t i, a, b, r2 = <Py_ssize_t>self.r_max * self.r_max
        cdef int ri
        cdef Work* w
        for a in prange(<Py_ssize_t>self.level_off[t], <Py_ssize_t>self.level_off[t + 1], nogil=True,
                        num_threads=n_threads, schedule="dynamic"):
            i = self.level_nodes[a]
            w = work_alloc(self.r_max, self.d, 0, 1)
            if w == NULL:
                node_status[i] = FAIL_MEMORY
            else:
                ri = <int>self.rank[i]
                for b in range(<Py_ssize_t>ri * ri):
                    w.stack[b] = theta[(2 * i + 1) * r2 + b] + theta[(2 * i + 2) * r2 + b]
                node_status[i] = self._nonleaf_up(i, w.stack, theta + i * r2 if i > 0 else NULL,
                                                  w, it)
                work_free(w)
        return _first_failure(node_status, self.n_nodes, failed_node)

    # ------------------------------------------------------------------------------------------
    # A^{-1} B (self-inclusive traversal of the upward-pass factors)
    # ------------------------------------------------------------------------------------------

    cdef int solve_into(self, const double* B, double* Y, int k, int n_threads) noexcept nogil:
        """Y (n x k) <- A^{-1} B (n x k), tree order.  Returns 0 or FAIL_MEMORY."""
        cdef TreeVectors v
        cdef int status = self._new_tree_vectors(k, True, &v)
        if status == 0:
            self._solve_up(B, Y, v.c, v.second, v.sv, v.c_off, v.g_off, k, self.depth, 0,
                           n_threads)
            self._solve_down(Y, v.second, v.tmp, v.g_off, k, 1, self.depth, n_threads)
        free_tree_vectors(&v)
        return status

    cdef void _solve_up(self, const double* B, double* Y, double* c, double* g, double* sv,
                        const Py_ssize_t* c_off, const Py_ssize_t* g_off, int k, int t_from,
                        int t_to, int n_threads) noexcept nogil:
        """Upward pass of A^{-1} B over the held nodes of levels t_from down to t_to: t_i =
        B_i^{-1} b_i, c_i = U_i^T t_i (leaves); s_i = sum of the children's c, g_i = St_i s_i,
        c_i = Wt_i^T s_i (non-leaves)."""
        cdef int t = t_from, m, rp, ri
        cdef Py_ssize_t i, a, b, s0
        cdef double* Yi
        while t >= t_to:
            for b in prange(<Py_ssize_t>self.level_off[t], <Py_ssize_t>self.level_off[t + 1], nogil=True,
                            num_threads=n_threads, schedule="dynamic"):
                i = self.level_nodes[b]
                if i >= self.first_leaf:
                    s0 = self.start[i] - self.row0
                    m = <int>self.count[i]
                    Yi = Y + s0 * k
                    memcpy(Yi, B + s0 * k, <Py_ssize_t>m * k * sizeof(double))
                    potrs(m, k, &self.LB[self.b_off[i]], m, Yi, k)
                    if i != 0:
                        rp = <int>self.rank[parent_of(i)]
                        gemm(True, False, rp, k, m, 1.0, &self.U[self.u_off[i]], rp, Yi, k, 0.0,
                             c + c_off[i], k)
                else:
                    ri = <int>self.rank[i]
                    for a in range(<Py_ssize_t>ri * k):
                        sv[g_off[i] + a] = c[c_off[2 * i + 1] + a] + c[c_off[2 * i + 2] + a]
                    gemm(False, False, ri, k, ri, 1.0, &self.St[self.sq_off[i]], ri,
                         sv + g_off[i], k, 0.0, g + g_off[i], k)
                    if i != 0:
                        rp = <int>self.rank[parent_of(i)]
                        gemm(True, False, rp, k, ri, 1.0, &self.Wt[self.w_off[i]], rp,
                             sv + g_off[i], k, 0.0, c + c_off[i], k)
            t = t - 1

    cdef void _solve_down(self, double* Y, double* g, double* tmp, const Py_ssize_t* g_off,
                          int k, int t_from, int t_to, int n_threads) noexcept nogil:
        """Downward pass of A^{-1} B over the held nodes of levels t_from .. t_to: G_i = g_i +
        Wt_i G_p; leaves: y_i = t_i + B_i^{-1} U_i G_p (tmp: n x k scratch)."""
        cdef int t = t_from, m, rp, ri
        cdef Py_ssize_t i, p, a, b, s0
        while t <= t_to:
            for b in prange(<Py_ssize_t>self.level_off[t], <Py_ssize_t>self.level_off[t + 1], nogil=True,
                            num_threads=n_threads, schedule="dynamic"):
                i = self.level_nodes[b]
                p = parent_of(i)
                rp = <int>self.rank[p]
                if i >= self.first_leaf:
                    s0 = self.start[i] - self.row0
                    m = <int>self.count[i]
                    gemm(False, False, m, k, rp, 1.0, &self.U[self.u_off[i]], rp, g + g_off[p],
                         k, 0.0, tmp + s0 * k, k)
                    potrs(m, k, &self.LB[self.b_off[i]], m, tmp + s0 * k, k)
                    for a in range(<Py_ssize_t>m * k):
                        Y[s0 * k + a] += tmp[s0 * k + a]
                else:
                    ri = <int>self.rank[i]
                    gemm(False, False, ri, k, rp, 1.0, &self.Wt[self.w_off[i]], rp, g + g_off[p],
                         k, 1.0, g + g_off[i], k)
            t = t + 1

    cdef void _vector_offsets(self, int k, Py_ssize_t* c_off, Py_ssize_t* g_off) noexcept nogil:
        """c: r_parent(i) x k per non-root node; g: r_i x k per non-leaf node."""
        cdef Py_ssize_t i
        c_off[0] = 0
        g_off[0] = 0
        for i in range(self.n_nodes):
            c_off[i + 1] = c_off[i] + (self.rank[parent_of(i)] * k if i > 0 else 0)
            g_off[i + 1] = g_off[i] + self.rank[i] * k

    cdef int _new_tree_vectors(self, int k, bint solve, TreeVectors* v) noexcept nogil:
        """Allocate the vectors of one pass (TreeVectors), all up front: no allocation, and no
        way to fail, inside the parallel loops.  Returns 0, or FAIL_MEMORY with everything
        freed; free_tree_vectors releases them."""
        cdef Py_ssize_t c_size, g_size
        v.c = v.second = v.sv = v.tmp = NULL
        v.c_off = <Py_ssize_t*>malloc(2 * (self.n_nodes + 1) * sizeof(Py_ssize_t))
        if v.c_off == NULL:
            return FAIL_MEMORY
        v.g_off = v.c_off + self.n_nodes + 1
        self._vector_offsets(k, v.c_off, v.g_off)
        c_size = max(v.c_off[self.n_nodes], 1)
        g_size = max(v.g_off[self.n_nodes], 1)
        v.c = <double*>calloc(c_size, sizeof(double))
        v.second = <double*>calloc(g_size if solve else c_size, sizeof(double))
        v.sv = <double*>calloc(g_size, sizeof(double))
        if solve:
            v.tmp = <double*>malloc(max(<Py_ssize_t>self.n * k, 1) * sizeof(double))
        if v.c == NULL or v.second == NULL or v.sv == NULL or (solve and v.tmp == NULL):
            free_tree_vectors(v)
            return FAIL_MEMORY
        return 0

    # ------------------------------------------------------------------------------------------
    # A B (doc/specs/hck.md, Algorithm 1) and the Algorithm 3 precomputation
    # ------------------------------------------------------------------------------------------

    cdef int _up_exchange(self, const double* B, double* c, double* dv, double* sv,
                          const Py_ssize_t* c_off, const Py_ssize_t* g_off, int k,
                          int n_threads) noexcept nogil:
        """c_i = U_i^T b_i (leaf) or W_i^T (c_left + c_right); then the sibling exchange
        d_left = Sigma_p c_right, d_right = Sigma_p c_left (Sigma_p = L_p L_p^T).  sv is
        scratch of the size of the g vectors."""
        self._up_levels(B, c, sv, c_off, g_off, k, self.depth, 1, n_threads)
        self._siblings(c, dv, c_off, k, n_threads)
        return 0

    cdef void _up_levels(self, const double* B, double* c, double* sv, const Py_ssize_t* c_off,
                         const Py_ssize_t* g_off, int k, int t_from, int t_to,
                         int n_threads) noexcept nogil:
        """c_i of the held nodes of levels t_from down to t_to (>= 1)."""
        cdef int t = t_from, m, rp, ri
        cdef Py_ssize_t i, a, b
        while t >= t_to:
            for b in prange(<Py_ssize_t>self.level_off[t], <Py_ssize_t>self.level_off[t + 1], nogil=True,
                            num_threads=n_threads, schedule="dynamic"):
                i = self.level_nodes[b]
                rp = <int>self.rank[parent_of(i)]
                if i >= self.first_leaf:
                    m = <int>self.count[i]
                    gemm(True, False, rp, k, m, 1.0, &self.U[self.u_off[i]], rp,
                         B + (self.start[i] - self.row0) * k, k, 0.0, c + c_off[i], k)
                else:
                    ri = <int>self.rank[i]
                    for a in range(<Py_ssize_t>ri * k):
                        sv[g_off[i] + a] = c[c_off[2 * i + 1] + a] + c[c_off[2 * i + 2] + a]
                    gemm(True, False, rp, k, ri, 1.0, &self.W[self.w_off[i]], rp, sv + g_off[i], k,
                         0.0, c + c_off[i], k)
            t = t - 1

    cdef void _siblings(self, const double* c, double* dv, const Py_ssize_t* c_off, int k,
                        int n_threads) noexcept nogil:
        """The sibling exchange at every held non-leaf node (its children's c known)."""
        cdef int ri
        cdef Py_ssize_t i, b, l, rgt
        cdef const double* Lp
        for b in prange(<Py_ssize_t>self.level_off[self.depth], nogil=True, num_threads=n_threads,
                        schedule="dynamic"):
            i = self.level_nodes[b]
            ri = <int>self.rank[i]
            Lp = &self.L[self.sq_off[i]]
            l = 2 * i + 1
            rgt = 2 * i + 2
            memcpy(dv + c_off[l], c + c_off[rgt], <Py_ssize_t>ri * k * sizeof(double))
            memcpy(dv + c_off[rgt], c + c_off[l], <Py_ssize_t>ri * k * sizeof(double))
            trmm(True, True, True, False, ri, k, 1.0, Lp, ri, dv + c_off[l], k)
            trmm(True, True, False, False, ri, k, 1.0, Lp, ri, dv + c_off[l], k)
            trmm(True, True, True, False, ri, k, 1.0, Lp, ri, dv + c_off[rgt], k)
            trmm(True, True, False, False, ri, k, 1.0, Lp, ri, dv + c_off[rgt], k)

    cdef int matvec_into(self, const double* B, double* Y, int k, int n_threads) noexcept nogil:
        """Y (n x k) <- A B, tree order (Algorithm 1; leaf blocks recomputed from the kernel)."""
        cdef TreeVectors v
        cdef int status = self._new_tree_vectors(k, False, &v)
        if status == 0:
            self._up_exchange(B, v.c, v.second, v.sv, v.c_off, v.g_off, k, n_threads)
            status = self._matvec_down(B, Y, v.second, v.c_off, k, n_threads)
        free_tree_vectors(&v)
        return status

    cdef int _matvec_down(self, const double* B, double* Y, double* dv, const Py_ssize_t* c_off,
                          int k, int n_threads) noexcept nogil:
        """After the sibling exchange: d_j += W_p d_p for non-root parents p, level by level,
        then the held leaves y_i = (K(X_i, X_i) + lam I) b_i + U_i d_i."""
        cdef int J = self.depth, t, m, rp, failures = 0
        cdef Py_ssize_t i, p, a, b, s0
        cdef double* Aii
        t = 2
        while t <= J:
            for b in prange(<Py_ssize_t>self.level_off[t], <Py_ssize_t>self.level_off[t + 1], nogil=True,
                            num_threads=n_threads, schedule="dynamic"):
                i = self.level_nodes[b]
                p = parent_of(i)
                rp = <int>self.rank[parent_of(p)]
                gemm(False, False, <int>self.rank[p], k, rp, 1.0, &self.W[self.w_off[p]], rp,
                     dv + c_off[p], k, 1.0, dv + c_off[i], k)
            t = t + 1
        for b in prange(<Py_ssize_t>self.level_off[J], <Py_ssize_t>self.level_off[J + 1], nogil=True,
                        num_threads=n_threads, schedule="dynamic"):
            i = self.level_nodes[b]
            s0 = self.start[i] - self.row0
            m = <int>self.count[i]
            Aii = <double*>malloc(<Py_ssize_t>m * m * sizeof(double))
            if Aii == NULL:
                failures += 1
            else:
                kernel_block_lower(self.kind, self.sigma, m, self.d, &self.X[s0, 0],
                                   &self.xsq[s0], Aii, m)
                symmetrize_from_lower(m, Aii, m)
                for a in range(m):
                    Aii[a * m + a] += self.lam
                gemm(False, False, m, k, m, 1.0, Aii, m, B + s0 * k, k, 0.0, Y + s0 * k, k)
                if i != 0:
                    rp = <int>self.rank[parent_of(i)]
                    gemm(False, False, m, k, rp, 1.0, &self.U[self.u_off[i]], rp,
                         dv + c_off[i], k, 1.0, Y + s0 * k, k)
                free(Aii)
        return FAIL_MEMORY if failures else 0

    # ------------------------------------------------------------------------------------------
    # Python entry points (tree order; the Python layer permutes)
    # ------------------------------------------------------------------------------------------

    def solve(self, const double[:, ::1] B, int n_threads=1):
        """A^{-1} B for B (n, k) in tree order."""
        return self._apply(B, True, n_threads)

    def matvec(self, const double[:, ::1] B, int n_threads=1):
        """A B for B (n, k) in tree order."""
        return self._apply(B, False, n_threads)

    def _apply(self, const double[:, ::1] B, bint inverse, int n_threads):
        out = np.empty((self.n, B.shape[1]))
        cdef double[:, ::1] Y = out
        cdef int status, k = B.shape[1]
        if k > 0:
            with nogil:
                if inverse:
                    status = self.solve_into(&B[0, 0], &Y[0, 0], k, n_threads)
                else:
                    status = self.matvec_into(&B[0, 0], &Y[0, 0], k, n_threads)
            _raise_for(status, -1, self)
        return out

    # The passes level by level, for an MPI rank's part of the tree (hkern/hierarchical/
    # sharded.py), which exchanges the vectors of the level-L nodes between them.  B, Y and the
    # flat per-node vectors (vector_offsets) are C-contiguous float64; BLAS on one thread.

    def held_nodes(self):
        """The nodes this operator holds, level by level (every node of a whole tree)."""
        return np.asarray(self.level_nodes)

    def level_offsets(self):
        """held_nodes()[level_offsets()[t]:level_offsets()[t + 1]] are the nodes of level t."""
        return np.asarray(self.level_off)

    def vector_offsets(self, int k):
        """(c_off, g_off): the per-node vectors c (r_parent x k per non-root node) and g
        (r_i x k per non-leaf node) in flat arrays."""
        c_off = np.zeros(self.n_nodes + 1, dtype=np.intp)
        g_off = np.zeros(self.n_nodes + 1, dtype=np.intp)
        cdef Py_ssize_t[::1] co = c_off, go = g_off
        self._vector_offsets(k, &co[0], &go[0])
        return c_off, g_off

    def solve_levels_up(self, const double[:, ::1] B, double[:, ::1] Y, double[::1] c,
                        double[::1] g, double[::1] sv, const Py_ssize_t[::1] c_off,
                        const Py_ssize_t[::1] g_off, int t_from, int t_to, int n_threads=1):
        """The upward pass of A^{-1} B over the held nodes of levels t_from .. t_to."""
        cdef int k = B.shape[1]
        with nogil:
            self._solve_up(&B[0, 0] if B.shape[0] else NULL, &Y[0, 0] if Y.shape[0] else NULL,
                           &c[0], &g[0], &sv[0], &c_off[0], &g_off[0], k, t_from, t_to,
                           n_threads)

    def solve_levels_down(self, double[:, ::1] Y, double[::1] g, const Py_ssize_t[::1] g_off,
                          int t_from, int t_to, int n_threads=1):
        """The downward pass of A^{-1} B over the held nodes of levels t_from .. t_to."""
        cdef int k = Y.shape[1]
        tmp = np.empty(max(Y.shape[0] * k, 1))
        cdef double[::1] tv = tmp
        with nogil:
            self._solve_down(&Y[0, 0] if Y.shape[0] else NULL, &g[0], &tv[0], &g_off[0], k,
                             t_from, t_to, n_threads)

    def up_levels(self, const double[:, ::1] B, double[::1] c, double[::1] sv,
                  const Py_ssize_t[::1] c_off, const Py_ssize_t[::1] g_off, int t_from, int t_to,
                  int n_threads=1):
        """c_i = U_i^T b_i or W_i^T (c_left + c_right) of the held nodes of levels t_from ..
        t_to (>= 1): the upward pass of A B and of the prediction vectors."""
        cdef int k = B.shape[1]
        with nogil:
            self._up_levels(&B[0, 0] if B.shape[0] else NULL, &c[0], &sv[0], &c_off[0],
                            &g_off[0], k, t_from, t_to, n_threads)

    def siblings(self, const double[::1] c, double[::1] dv, const Py_ssize_t[::1] c_off,
                 int k, int n_threads=1):
        """The sibling exchange d_left = Sigma_p c_right, d_right = Sigma_p c_left at every held
        non-leaf node."""
        with nogil:
            self._siblings(&c[0], &dv[0], &c_off[0], k, n_threads)

    def matvec_down(self, const double[:, ::1] B, double[:, ::1] Y, double[::1] dv,
                    const Py_ssize_t[::1] c_off, int n_threads=1):
        """After the sibling exchange: the downward pass of A B and the held leaves' rows."""
        cdef int k = B.shape[1], status
        with nogil:
            status = self._matvec_down(&B[0, 0] if B.shape[0] else NULL,
                                       &Y[0, 0] if Y.shape[0] else NULL, &dv[0], &c_off[0], k,
                                       n_threads)
        _raise_for(status, -1, self)

    def prediction_vectors(self, const double[:, ::1] Wts, int n_threads=1):
        """Algorithm 3 precomputation for weights (n, k): the per-node vectors c (flat)."""
        cdef int k = Wts.shape[1]
        c_off = np.zeros(self.n_nodes + 1, dtype=np.intp)
        g_off = np.zeros(self.n_nodes + 1, dtype=np.intp)
        cdef Py_ssize_t[::1] co = c_off, go = g_off
        self._vector_offsets(k, &co[0], &go[0])
        c = np.zeros(max(int(c_off[self.n_nodes]), 1))
        dv = np.zeros(max(int(c_off[self.n_nodes]), 1))
        scratch = np.zeros(max(int(g_off[self.n_nodes]), 1))
        cdef double[::1] cv = c, dvv = dv, sv = scratch
        if k > 0:
            with nogil:
                self._up_exchange(&Wts[0, 0], &cv[0], &dvv[0], &sv[0], &co[0], &go[0], k,
                                  n_threads)
        return dv, c_off

    def predict(self, const double[:, ::1] Xq, const Py_ssize_t[::1] leaf_start,
                const double[:, ::1] Wts, const double[::1] dv, const Py_ssize_t[::1] c_off,
                int n_threads=1):
        """Algorithm 3 for test points grouped by leaf (rows leaf_start[l]:leaf_start[l+1] go to
        leaf l), tree-ordered weights (n, k) and the vectors of prediction_vectors."""
        cdef int k = Wts.shape[1], mq = Xq.shape[0], n_leaves = 1 << self.depth
        out = np.zeros((mq, k))
        cdef double[:, ::1] F = out
        qsq_arr = np.empty(max(mq, 1))
        cdef double[::1] qsq = qsq_arr
        cdef Py_ssize_t leaf
        cdef int failures = 0
        if mq == 0 or k == 0:
            return out
        with nogil:
            sqnorms(mq, self.d, &Xq[0, 0], &qsq[0])
            for leaf in prange(n_leaves, num_threads=n_threads, schedule="dynamic"):
                failures += self._predict_leaf(leaf, Xq, qsq, leaf_start, Wts, dv, c_off, F, k)
        _raise_for(FAIL_MEMORY if failures else 0, -1, self)
        return out

    cdef int _predict_leaf(self, Py_ssize_t leaf, const double[:, ::1] Xq, const double[::1] qsq,
                           const Py_ssize_t[::1] leaf_start, const double[:, ::1] Wts,
                           const double[::1] dv, const Py_ssize_t[::1] c_off, double[:, ::1] F,
                           int k) noexcept nogil:
        cdef Py_ssize_t i = self.first_leaf + leaf, p, q, q0, s0 = self.start[i] - self.row0
        cdef int m = <int>self.count[i], rp, chunk, rnext
        cdef double* Kq
        cdef double* D1
        cdef double* D2
        cdef double* swap
        cdef Work* w
        cdef Py_ssize_t lo = leaf_start[leaf], hi = leaf_start[leaf + 1]
        if hi <= lo:
            return 0
        Kq = <double*>malloc(<Py_ssize_t>PREDICT_CHUNK * max(m, 2 * self.r_max) * sizeof(double))
        w = work_alloc(max(self.r_max, 1), self.d, 0, 0)
        if Kq == NULL or w == NULL:
            free(Kq)
            work_free(w)
            return 1
        D1 = Kq
        D2 = Kq + <Py_ssize_t>PREDICT_CHUNK * self.r_max
        if i != 0:
            self._gather(parent_of(i), w.Z1, w.z1sq)
        q0 = lo
        while q0 < hi:
            chunk = <int>min(<Py_ssize_t>PREDICT_CHUNK, hi - q0)
            # z = K(Xq, X_i) w_i
            kernel_block(self.kind, self.sigma, chunk, m, self.d, &Xq[q0, 0], &qsq[q0],
                         &self.X[s0, 0], &self.xsq[s0], Kq, m)
            gemm(False, False, chunk, k, m, 1.0, Kq, m, &Wts[s0, 0], k, 0.0, &F[q0, 0], k)
            if i != 0:
                p = parent_of(i)
                rp = <int>self.rank[p]
                # D = K(Xq, Z_p) Sigma_p^{-1};  z += D c_i;  then up the path D <- D W_q.
                kernel_block(self.kind, self.sigma, chunk, rp, self.d, &Xq[q0, 0], &qsq[q0],
                             w.Z1, w.z1sq, D1, rp)
                trsm(False, True, True, False, chunk, rp, 1.0, &self.L[self.sq_off[p]], rp, D1, rp)
                trsm(False, True, False, False, chunk, rp, 1.0, &self.L[self.sq_off[p]], rp, D1,
                     rp)
                gemm(False, False, chunk, k, rp, 1.0, D1, rp, &dv[c_off[i]], k, 1.0, &F[q0, 0], k)
                q = p
                while q != 0:
                    rnext = <int>self.rank[parent_of(q)]
                    gemm(False, False, chunk, rnext, rp, 1.0, D1, rp, &self.W[self.w_off[q]],
                         rnext, 0.0, D2, rnext)
                    gemm(False, False, chunk, k, rnext, 1.0, D2, rnext, &dv[c_off[q]], k, 1.0,
                         &F[q0, 0], k)
                    swap = D1
                    D1 = D2
                    D2 = swap
                    rp = rnext
                    q = parent_of(q)
            q0 += chunk
        free(Kq)
        work_free(w)
        return 0

    def __reduce__(self):
        # Pickle the factors themselves: unpickling does not refactorise.
        state = {name: getattr(self, name) for name in _SCALARS}
        state.update(self.factors())
        state.update(X=np.asarray(self.X), xsq=np.asarray(self.xsq),
                     start=np.asarray(self.start), count=np.asarray(self.count),
                     lm_off=np.asarray(self.lm_off), lm=np.asarray(self.lm),
                     level_off=np.asarray(self.level_off),
                     level_nodes=np.asarray(self.level_nodes), Ztop=np.asarray(self.Ztop),
                     ztop_sq=np.asarray(self.ztop_sq), ztop_off=np.asarray(self.ztop_off))
        return (_restore_operator, (state,))

    @property
    def construction_seconds(self):
        """Wall seconds of the two construction phases of this operator.

        ``"instantiate"``: kernel blocks into the factor buffers (where the factor memory is first
        touched); ``"invert"``: the BLAS/LAPACK arithmetic on them (Cholesky factors, Woodbury
        factors, log-determinant), whose flops :meth:`construction_flops` counts.  Zero for an
        operator restored from a pickle.
        """
        return {"instantiate": float(self.phase_seconds[0]),
                "invert": float(self.phase_seconds[1])}

    def construction_flops(self):
        """BLAS/LAPACK flops of the construction (factors of A and A^{-1}), node by node as
        written in _sigma_factor, _leaf_up and _nonleaf_up; kernel evaluations count zero."""
        rank = np.asarray(self.rank).astype(np.float64)
        count = np.asarray(self.count).astype(np.float64)
        total = 0.0
        for i in range(self.n_nodes):
            rp = rank[(i - 1) // 2] if i > 0 else 0.0
            if i < self.first_leaf:
                r = rank[i]
                total += r**3 / 3                                # Sigma Cholesky
                total += 2 * r**3 + 2 * r**3 / 3 + 2 * r**3      # I + Lambda Xi, getrf, getrs
                if i > 0:
                    total += 2 * r * rp**2 + r * r * rp          # two trsm, syrk (Lambda, W)
                    total += 4 * r * r * rp + 2 * r * rp * rp    # W~ and Theta (three gemm)
            else:
                m = count[i]
                total += m**3 / 3                                # leaf Cholesky
                total += 2 * m * rp**2 + m * m * rp              # two trsm, syrk (B, U)
                total += m * m * rp + rp * rp * m                # LB^{-1} U, Theta = V^T V
        return total

    @property
    def nbytes(self):
        """Bytes held by the factors and the tree-ordered data."""
        arrays = [self.X, self.xsq, self.L, self.St, self.W, self.Wt, self.U, self.LB, self.rank,
                  self.sq_off, self.w_off, self.u_off, self.b_off, self.logdet_parts]
        total = 0
        for a in arrays:
            total += np.asarray(a).nbytes
        return int(total)

    def factors(self):
        """The factor buffers and their offsets, as NumPy views (tests and diagnostics)."""
        return {"L": np.asarray(self.L), "St": np.asarray(self.St), "W": np.asarray(self.W),
                "Wt": np.asarray(self.Wt), "U": np.asarray(self.U), "LB": np.asarray(self.LB),
                "rank": np.asarray(self.rank), "sq_off": np.asarray(self.sq_off),
                "w_off": np.asarray(self.w_off), "u_off": np.asarray(self.u_off),
                "b_off": np.asarray(self.b_off), "logdet_parts": np.asarray(self.logdet_parts)}


cdef int _first_failure(int* status, Py_ssize_t n, int* node) noexcept nogil:
    cdef Py_ssize_t i
    for i in range(n):
        if status[i] != 0:
            node[0] = <int>i
            return status[i]
    return 0


def _raise_for(int status, int node, HCKOperator op):
    """Raise the error of a failure code of the nogil core (_error_for), if any."""
    error = _error_for(status, node, op)
    if error is not None:
        raise error


def _error_for(int status, int node, HCKOperator op):
    """Turn a failure code of the nogil core into a clear error (None for success).

    Numerical failures are ValueErrors (a combination of arguments the data cannot support),
    not LinAlgErrors from deep inside: they say which argument to change.  In exact arithmetic
    none can happen for jitter > 0 (Sigma_p >= jitter I, B_leaf >= (lam - jitter) I and
    I + Lambda Xi is invertible, hck.md 2), so each one means the rounding of the kernel values
    swamps the jitter or lam.
    """
    if status == 0:
        return None
    if status == FAIL_MEMORY:
        return MemoryError("HCK: could not allocate working memory")
    jitter_fix = (f"pass a larger jitter (now {op.jitter:g}; it must stay below lam={op.lam:g}, "
                  "so raise lam too if needed)")
    if status == FAIL_SIGMA:
        return ValueError(
            f"HCK: the kernel matrix of the {op.rank[node]} landmarks of tree node {node} is "
            f"singular to working precision with jitter={op.jitter:g}: the kernel is numerically "
            "rank-deficient on these points (repeated points, or a bandwidth "
            f"sigma={op.sigma:g} (on X / sigma when sigma holds lengthscales) much larger than "
            "the distances between the points, which makes every kernel value about equal); "
            f"{jitter_fix}, e.g. the default jitter=min(1e-3 * lam, 1e-8), or use a smaller "
            "sigma")
    if status == FAIL_LEAF:
        return ValueError(
            f"HCK: the leaf block of tree node {node} (K + lam I minus its low-rank part) is not "
            f"positive definite to working precision; increase lam (now {op.lam:g}) or "
            f"{jitter_fix}")
    return ValueError(
        f"HCK: I + Lambda Xi is singular to working precision at tree node {node}; increase lam "
        f"(now {op.lam:g}) or {jitter_fix}")


_SCALARS = ("n", "d", "depth", "first_leaf", "n_nodes", "kind", "sigma", "lam", "jitter",
            "r_max", "leaf_max", "logdet_value", "row0", "levels", "n_top")


def _restore_operator(dict state):
    """Rebuild an HCKOperator from HCKOperator.__reduce__'s state (no refactorisation)."""
    cdef HCKOperator op = HCKOperator.__new__(HCKOperator)
    op.n, op.d, op.depth = state["n"], state["d"], state["depth"]
    op.first_leaf, op.n_nodes, op.kind = state["first_leaf"], state["n_nodes"], state["kind"]
    op.sigma, op.lam, op.jitter = state["sigma"], state["lam"], state["jitter"]
    op.r_max, op.leaf_max, op.logdet_value = state["r_max"], state["leaf_max"], \
        state["logdet_value"]
    op.X, op.xsq = state["X"], state["xsq"]
    op.start, op.count, op.rank = state["start"], state["count"], state["rank"]
    op.lm_off, op.lm = state["lm_off"], state["lm"]
    op.sq_off, op.w_off, op.u_off, op.b_off = (state["sq_off"], state["w_off"], state["u_off"],
                                               state["b_off"])
    op.L, op.St, op.W, op.Wt = state["L"], state["St"], state["W"], state["Wt"]
    op.U, op.LB, op.logdet_parts = state["U"], state["LB"], state["logdet_parts"]
    op.row0, op.levels, op.n_top = state["row0"], state["levels"], state["n_top"]
    op.level_off, op.level_nodes = state["level_off"], state["level_nodes"]
    op.Ztop, op.ztop_sq, op.ztop_off = state["Ztop"], state["ztop_sq"], state["ztop_off"]
    return op
