"""Public face of the hierarchically compositional kernel (HCK) and its independent baseline."""
from __future__ import annotations

import math

import numpy as np

from .._threads import blas_threads, resolve_n_jobs
from .._validation import check_choice, check_int, check_nonnegative, check_seed
from ..baselines._model import KernelRidgeModel, prepare_fit
from . import _blocks, _tree
from ._hck import HCKOperator

__all__ = ["fit_hierarchical", "fit_independent", "HierarchicalKRR", "IndependentKRR",
           "tree_depth"]

PCA_ITERATIONS = 20


def tree_depth(n, r, leaf_size=None):
    """Depth J of the complete binary tree for n points.

    Default (``leaf_size=None``): J = floor(log2(n / r)), so leaves hold between r and 2r points
    and every non-leaf node has at least 2r points to draw its r landmarks from (spec section 3
    ties leaf size and rank; leaves of about 2r points also minimise the stored factors,
    roughly n r + 4 n r^2 / n0 + n n0 numbers for leaf size n0).  With ``leaf_size``: the
    smallest J whose leaves hold at most ``leaf_size`` points.
    """
    if leaf_size is None:
        return max(0, int(math.floor(math.log2(n / r))))
    depth = 0
    while -(-n // (1 << depth)) > leaf_size:
        depth += 1
    return depth


class _TreeModel(KernelRidgeModel):
    """What the HCK and independent models share: the tree, the centring, routing by leaf."""

    def __init__(self, *, centre, perm, depth, directions, thresholds, start, count, **kw):
        super().__init__(**kw)
        self.centre_ = centre
        self.perm_ = perm
        self.depth_ = depth
        self.directions_ = directions
        self.thresholds_ = thresholds
        self._start = start
        self._count = count

    @property
    def n_leaves_(self):
        return 1 << self.depth_

    def _grouped(self, X):
        """Centred test points sorted by leaf, the sorting order and the leaf offsets."""
        Xc = X - self.centre_
        leaf = _tree.route(np.ascontiguousarray(Xc), self.directions_, self.thresholds_,
                           self.depth_, self._threads())
        order = np.argsort(leaf, kind="stable")
        leaf_start = np.zeros(self.n_leaves_ + 1, dtype=np.int64)
        np.cumsum(np.bincount(leaf, minlength=self.n_leaves_), out=leaf_start[1:])
        return np.ascontiguousarray(Xc[order]), order, leaf_start

    def _to_tree(self, B, name="B"):
        B = np.asarray(B, dtype=np.float64)
        n = len(self.perm_)
        if B.ndim not in (1, 2) or B.shape[0] != n:
            raise ValueError(f"{name} must have shape ({n},) or ({n}, k) (one row per training "
                             f"sample); got {B.shape}")
        if not np.isfinite(B).all():
            raise ValueError(f"{name} contains NaN or infinity")
        return np.ascontiguousarray(B.reshape(n, -1)[self.perm_]), B.ndim == 1

    def _from_tree(self, Bt, vector):
        out = np.empty_like(Bt)
        out[self.perm_] = Bt
        return out[:, 0] if vector else out


class HierarchicalKRR(_TreeModel):
    """Kernel ridge regression / classification with the hierarchically compositional kernel.

    The model holds the factors of A = K_hier + lam I (K_hier built from the jittered kernel,
    see :func:`fit_hierarchical`) in tree order, and offers the operations of that matrix in the
    training samples' original order.

    Attributes
    ----------
    r : int
        Landmarks per non-leaf node.
    jitter : float
        lam', added to the base kernel on identical training points.
    depth_ : int
        Depth J of the tree (2^J leaves).
    perm_ : ndarray (n,)
        Training row of each tree position.
    dual_coef_ : ndarray (n, k)
        A^{-1} Y in tree order.

    Examples
    --------
    Returned by :func:`fit_hierarchical`; ``solve`` inverts ``matvec`` exactly:

    >>> import numpy as np
    >>> import hkern
    >>> rng = np.random.default_rng(0)
    >>> X, y = rng.normal(size=(500, 3)), rng.normal(size=500)
    >>> model = hkern.fit_hierarchical(X, y, r=32, sigma=1.0, lam=1e-2, seed=0)
    >>> bool(np.allclose(model.matvec(model.solve(y)), y))
    True
    """

    def __init__(self, *, operator, weights, pred_vectors, pred_offsets, r, jitter, **kw):
        super().__init__(**kw)
        self._op = operator
        self.dual_coef_ = weights
        self._pred_vectors = pred_vectors
        self._pred_offsets = pred_offsets
        self.r = r
        self.jitter = jitter

    def _scores(self, X):
        Xg, order, leaf_start = self._grouped(X)
        with blas_threads(1):
            Fg = self._op.predict(Xg, leaf_start, self.dual_coef_, self._pred_vectors,
                                  self._pred_offsets, self._threads())
        F = np.empty_like(Fg)
        F[order] = Fg
        return F

    def matvec(self, B):
        """(K_hier + lam I) @ B for B of shape (n,) or (n, k), training order."""
        Bt, vector = self._to_tree(B)
        with blas_threads(1):
            return self._from_tree(self._op.matvec(Bt, self._threads()), vector)

    def solve(self, B):
        """(K_hier + lam I)^{-1} @ B for B of shape (n,) or (n, k), training order."""
        Bt, vector = self._to_tree(B)
        with blas_threads(1):
            return self._from_tree(self._op.solve(Bt, self._threads()), vector)

    def logdet(self):
        """log det(K_hier + lam I)."""
        return float(self._op.logdet_value)

    def log_marginal_likelihood(self, y):
        """GP log marginal likelihood of targets y with covariance K_hier + lam I.

        -1/2 y^T (K_hier + lam I)^{-1} y - 1/2 log det(K_hier + lam I) - n/2 log(2 pi), summed
        over the columns of a 2-D y.
        """
        yt, _ = self._to_tree(y, "y")
        with blas_threads(1):
            alpha = self._op.solve(yt, self._threads())
        n, k = yt.shape
        return float(-0.5 * np.sum(yt * alpha) - 0.5 * k * self.logdet()
                     - 0.5 * k * n * math.log(2.0 * math.pi))

    def kernel_pca(self, n_components=2, seed=0):
        """Top eigenpairs of the centred kernel matrix C K_hier C, C = I - 11^T/n.

        Lanczos (``scipy.sparse.linalg.eigsh``) over the fast matvec: O(n r) per iteration.

        Returns
        -------
        eigenvalues : ndarray (n_components,), descending
        eigenvectors : ndarray (n, n_components), training order, unit norm
        """
        from scipy.sparse.linalg import LinearOperator, eigsh

        n = len(self.perm_)
        n_components = check_int(n_components, "n_components", low=1, high=n - 1)
        rng = check_seed(seed)

        def centred_kernel(v):
            v = np.asarray(v, dtype=np.float64).reshape(n, -1)
            v = v - v.mean(axis=0)
            Kv = self.matvec(v) - self.lam * v
            return Kv - Kv.mean(axis=0)

        op = LinearOperator((n, n), matvec=centred_kernel, matmat=centred_kernel,
                            dtype=np.float64)
        values, vectors = eigsh(op, k=n_components, which="LA", v0=rng.standard_normal(n))
        order = np.argsort(values)[::-1]
        return values[order], vectors[:, order]

    @property
    def nbytes(self):
        """Bytes held: the factors, the tree-ordered data, the weights, the tree."""
        extra = sum(a.nbytes for a in (self.dual_coef_, self._pred_vectors, self._pred_offsets,
                                       self.perm_, self.directions_, self.thresholds_,
                                       self.centre_, self._start, self._count))
        return int(self._op.nbytes + extra)


class IndependentKRR(_TreeModel):
    """KRR with the independent kernel: exact kernel within a leaf, zero across leaves.

    Examples
    --------
    Returned by :func:`fit_independent`:

    >>> import numpy as np
    >>> import hkern
    >>> rng = np.random.default_rng(0)
    >>> X, y = rng.normal(size=(500, 3)), rng.normal(size=500)
    >>> model = hkern.fit_independent(X, y, r=32, sigma=1.0, lam=1e-2, seed=0)
    >>> model.predict(X[:4]).shape
    (4,)
    """

    def __init__(self, *, X_tree, alpha, logdet, **kw):
        super().__init__(**kw)
        self._X_tree = X_tree
        self.dual_coef_ = alpha
        self._logdet = logdet

    def _scores(self, X):
        Xg, order, leaf_start = self._grouped(X)
        with blas_threads(1):
            Fg = _blocks.predict_blocks(self._X_tree, self._start, self._count, self.depth_,
                                        self._kind, self.sigma, self.dual_coef_, Xg, leaf_start,
                                        self._threads())
        F = np.empty_like(Fg)
        F[order] = Fg
        return F

    def logdet(self):
        """log det(K_ind + lam I)."""
        return self._logdet


def _build_tree(X, r, leaf_size, partition, rng, n_threads):
    """Centre X, build the tree and permute X into tree order (shared by both fits)."""
    n, d = X.shape
    depth = tree_depth(n, r, leaf_size)
    centre = X.mean(axis=0)
    Xc = np.ascontiguousarray(X - centre)   # kernels depend on x - y: centring only helps rounding
    start, count = _tree.node_ranges(n, depth)
    n_nonleaf = (1 << depth) - 1
    start_vectors = np.ascontiguousarray(rng.standard_normal((n_nonleaf, d)))
    perm, directions, thresholds = _tree.build_tree(Xc, depth, start_vectors,
                                                    _tree.PARTITIONS[partition], PCA_ITERATIONS,
                                                    n_threads)
    X_tree = np.ascontiguousarray(Xc[perm])
    tree = dict(centre=centre, perm=perm, depth=depth, directions=directions,
                thresholds=thresholds, start=start, count=count)
    return X_tree, tree


def _check_tree_args(n, r, leaf_size, partition):
    r = check_int(r, "r", low=1)
    if r >= n:
        raise ValueError(f"r={r} must be smaller than the number of training samples n={n}; "
                         "with r >= n use fit_exact")
    if leaf_size is not None:
        leaf_size = check_int(leaf_size, "leaf_size", low=1)
    check_choice(partition, "partition", tuple(_tree.PARTITIONS))
    return r, leaf_size


def fit_hierarchical(X, y, r=256, kernel="gaussian", sigma=1.0, lam=1e-2, jitter=None,
                     partition="random", leaf_size=None, task="regression", seed=None,
                     n_jobs=None):
    """Kernel ridge regression with a hierarchically compositional kernel (HCK).

    HCK (Chen, Avron and Sindhwani) replaces the kernel matrix by K_hier: exact kernel blocks on
    the leaves of a binary partition tree, coupled across the tree by Nystrom approximations on
    r landmarks per node.  K_hier is positive definite, costs O(n r) memory and O(n r^2) time
    to factorise, and its matvec, solve and log-determinant are exact for it.

    Parameters
    ----------
    X : array_like (n, d)
    y : array_like (n,) or (n, k)
        Targets, or class labels for ``task="classification"`` (one-vs-rest, one solve).
    r : int
        Landmarks per non-leaf node (1 <= r < n); also sets the leaf size (below).
    kernel : str
        See :func:`hkern.kernel_matrix`.
    sigma : float
        Kernel bandwidth, > 0.
    lam : float
        Ridge regularisation (GP noise variance), > 0.
    jitter : float or None
        lam' of the paper (spec 2.5): the base kernel becomes k + lam' on identical training
        points, which keeps the landmark matrices well conditioned; 0 <= jitter < lam.  Default
        ``min(1e-3 * lam, 1e-8)``.  The leaf diagonal blocks are K + lam I whatever its value.
    partition : {"random", "pca"}
        Split direction at each node: a random Gaussian direction (the paper's recommendation)
        or the principal axis of the node's points (20 power iterations).  Splits are at the
        median, so the tree is balanced.
    leaf_size : int or None
        Largest number of points in a leaf.  Default: leaves of r to 2r points
        (depth floor(log2(n / r))).
    task : {"regression", "classification"}
    seed : None, int or numpy.random.Generator
        Split directions and landmarks.
    n_jobs : int or None
        Threads; None uses every core.  Results are bitwise identical for any value.

    Returns
    -------
    HierarchicalKRR
        With ``predict``, ``decision_function``, ``matvec``, ``solve``, ``logdet``,
        ``log_marginal_likelihood``, ``kernel_pca`` and ``nbytes``.

    Notes
    -----
    Memory about 5 n r numbers (factors of A and of its inverse); time O(n r^2) to fit,
    O(r^2 log(n/r) + r d) per test point.  The inverse is kept in the factored form of the
    upward pass of the paper's Algorithm 2 (see ``hkern/hierarchical/_hck.pyx``).

    Examples
    --------
    >>> import numpy as np, hkern
    >>> rng = np.random.default_rng(0)
    >>> X = rng.uniform(-1, 1, size=(2000, 3)); y = np.sin(3 * X[:, 0]) + X[:, 1] ** 2
    >>> model = hkern.fit_hierarchical(X, y, r=64, sigma=0.5, lam=1e-3, seed=0)
    >>> float(np.sqrt(np.mean((model.predict(X) - y) ** 2))) < 0.05
    True
    """
    X, Y, encoding, name, kind, sigma, lam = prepare_fit(X, y, kernel, sigma, lam, task)
    n = X.shape[0]
    r, leaf_size = _check_tree_args(n, r, leaf_size, partition)
    if jitter is None:
        jitter = min(1e-3 * lam, 1e-8)
    jitter = check_nonnegative(jitter, "jitter")
    if jitter >= lam:
        raise ValueError(f"jitter must be smaller than lam={lam:g}, got {jitter:g}; the leaf "
                         "blocks are K + lam I and the jitter is part of lam")
    rng = check_seed(seed)
    n_threads = resolve_n_jobs(n_jobs)

    X_tree, tree = _build_tree(X, r, leaf_size, partition, rng, n_threads)
    depth = tree["depth"]
    n_nonleaf = (1 << depth) - 1
    uniforms = np.ascontiguousarray(rng.random((n_nonleaf, r)))
    lm_off, lm = _tree.select_landmarks(tree["start"], tree["count"], depth, r, uniforms,
                                        n_threads)
    with blas_threads(1):
        op = HCKOperator(X_tree, depth, tree["start"], tree["count"], lm_off, lm, kind, sigma,
                         lam, jitter, n_threads)
        weights = op.solve(np.ascontiguousarray(Y[tree["perm"]]), n_threads)
        pred_vectors, pred_offsets = op.prediction_vectors(weights, n_threads)
    return HierarchicalKRR(operator=op, weights=weights, pred_vectors=pred_vectors,
                           pred_offsets=pred_offsets, r=r, jitter=jitter, kernel=name,
                           kind=kind, sigma=sigma, lam=lam, n_features=X.shape[1],
                           encoding=encoding, n_jobs=n_jobs, **tree)


def fit_independent(X, y, r=256, kernel="gaussian", sigma=1.0, lam=1e-2, partition="random",
                    leaf_size=None, task="regression", seed=None, n_jobs=None):
    """Kernel ridge regression with the independent (block-diagonal) kernel on an HCK tree.

    The baseline of the HCK paper: the same partition as :func:`fit_hierarchical` with the same
    ``r``, ``leaf_size``, ``partition`` and ``seed`` (so the same leaves), the exact kernel
    inside each leaf and nothing across leaves.  Parameters as for
    :func:`fit_hierarchical`; ``r`` only sets the leaf size.

    Returns
    -------
    IndependentKRR

    Examples
    --------
    >>> import numpy as np, hkern
    >>> rng = np.random.default_rng(0)
    >>> X = rng.uniform(-1, 1, size=(2000, 3)); y = np.sin(3 * X[:, 0])
    >>> model = hkern.fit_independent(X, y, r=64, sigma=0.5, lam=1e-3, seed=0)
    >>> model.predict(X[:3]).shape
    (3,)
    """
    X, Y, encoding, name, kind, sigma, lam = prepare_fit(X, y, kernel, sigma, lam, task)
    n = X.shape[0]
    r, leaf_size = _check_tree_args(n, r, leaf_size, partition)
    rng = check_seed(seed)
    n_threads = resolve_n_jobs(n_jobs)
    X_tree, tree = _build_tree(X, r, leaf_size, partition, rng, n_threads)
    alpha = np.ascontiguousarray(Y[tree["perm"]])
    with blas_threads(1):
        logdet = _blocks.fit_blocks(X_tree, tree["start"], tree["count"], tree["depth"], kind,
                                    sigma, lam, alpha, n_threads)
    return IndependentKRR(X_tree=X_tree, alpha=alpha, logdet=logdet, kernel=name, kind=kind,
                          sigma=sigma, lam=lam, n_features=X.shape[1], encoding=encoding,
                          n_jobs=n_jobs, **tree)
