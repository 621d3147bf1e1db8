"""The fitted HCK and independent-kernel models (fit_hierarchical and fit_independent build
them): predictions, the Gaussian-process methods and kernel PCA."""
from __future__ import annotations

import numpy as np
import scipy.linalg

from .. import _linalg
from .._gp import Evidence, GaussianProcessKRR, column_quads
from .._memory import check_memory, resolve_max_memory
from .._model import KernelRidgeModel, renamed
from .._threads import blas_threads, budget_threads, budgeted
from .._validation import check_int, check_seed, check_targets
from . import _blocks, _posterior, _tree
from .factor import refined_solve

__all__ = ["HierarchicalKRR", "IndependentKRR"]

# kernel_pca's eigensolver: Lanczos below this fraction of n components, dense from it on.
# Measured with the dense pairs from LAPACK's dsyevr (2026-11-29, idle, n_jobs=2; kin40k,
# r = 64): n = 3000, Lanczos 0.70 / 2.48 / 8.02 s at k = 200 / 375 / 600 against dense 2.39 /
# 2.75 / 3.42 s; n = 6000, 7.52 / 29.9 s at k = 400 / 750 against 21.6 / 25.6 s.  The
# crossover is near n / 8.  Lanczos is ARPACK's (scipy.sparse.linalg.eigsh): written here in its
# place, a block subspace iteration applied the operator to 22-24 times as many columns
# (n = 3000, k = 30: 2520 against 112; k = 100: 7200 against 304) and a block Krylov method
# with thick restarts to 2-3 times as many (220; 800-896), and neither beat its time.
PCA_DENSE_FRACTION = 0.125
# Lanczos applies the operator to one vector at a time: O(n r) work, which at n r = 2e5 is
# well under a millisecond, so an OpenMP fork and join per product dominates once another
# process holds a core (n = 3000, k = 300: 32 s on 2 threads against 2.7 s on 1).  Its
# products use one thread per this many multiply-adds (n r) and at least one.
PCA_WORK_PER_THREAD = 1 << 22
# Columns of the identity per matvec when the dense kernel PCA forms C K_hier C.
PCA_BLOCK = 256
# The posterior variance from the dense matrices (HierarchicalKRR._dense_variance), where the
# structured form loses positive definiteness: up to this many training rows (n^3 / 3 flops,
# about 10 s at 10 000 on two cores), test points this many at a time.
DENSE_VARIANCE_ROWS = 10000
DENSE_VARIANCE_BLOCK = 1024


def _identity_blocks(n):
    """(lo, hi, columns lo..hi-1 of the n x n identity) in blocks of PCA_BLOCK columns: the
    dense matrices of kernel PCA and of the variance's fallback, a block of products at a time."""
    for lo in range(0, n, PCA_BLOCK):
        hi = min(lo + PCA_BLOCK, n)
        E = np.zeros((n, hi - lo))
        E[np.arange(lo, hi), np.arange(hi - lo)] = 1.0
        yield lo, hi, E

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

    def _grouped(self, X, n_threads):
        """Centred test points sorted by leaf, the sorting order and the leaf offsets."""
        Xc = X - self.centre_
        leaf = _tree.route(np.ascontiguousarray(Xc), self.directions_, self.thresholds_,
                           self.depth_, n_threads)
        order = np.argsort(leaf, kind="stable")
        leaf_start = np.zeros(self.n_leaves_ + 1, dtype=np.int64)
        np.cumsum(np.bincount(leaf, minlength=self.n_leaves_), out=leaf_start[1:])
        return np.ascontiguousarray(Xc[order]), order, leaf_start

    def _by_leaf(self, X, n_threads, evaluate):
        """``evaluate(Xg, leaf_start)`` on the test points grouped by leaf (BLAS on one thread:
        the cores parallelise over leaves), its rows put back in X's order."""
        Xg, order, leaf_start = self._grouped(X, n_threads)
        with blas_threads(1):
            out_g = evaluate(Xg, leaf_start)
        out = np.empty_like(out_g)
        out[order] = out_g
        return out

    def _to_tree(self, B):
        """A checked (n,) or (n, k) B as a C-contiguous (n, k) array in tree order."""
        n = len(self.perm_)
        return np.ascontiguousarray(B.reshape(n, -1)[self.perm_]), B.ndim == 1

    def _from_tree(self, Bt, vector):
        out = np.empty_like(Bt)
        out[self.perm_] = Bt
        return out[:, 0] if vector else out

    @property
    def dual_coef_(self):
        """The weights (n, k) in training order: the tree-ordered weights the model holds,
        permuted back (a new array on each access; not stored twice)."""
        return self._from_tree(self._weights_tree, False)


class HierarchicalKRR(GaussianProcessKRR, _TreeModel):
    """Kernel ridge regression / classification with the hierarchically compositional kernel.

    The model holds the factors of A = K_hier' + (lam - lam') I in tree order (K_hier' is the
    hierarchical kernel of the base kernel jittered by lam' = ``jitter`` on identical training
    points, so the leaf diagonal blocks of A are K + lam I; see :func:`fit_hierarchical`), and
    offers the operations of that matrix in the training samples' original order.

    It is also a Gaussian process: the prior f ~ GP(0, k_hier') with the training targets'
    covariance A, whose posterior mean is the prediction.  ``predict(X, return_std=True)`` adds
    the posterior standard deviation of f (for a new point x, k_hier'(x, x) = k(x, x) and
    k_hier'(x, X) is the row the prediction uses); ``log_marginal_likelihood()`` is
    log N(y | 0, A) of the training targets.

    Attributes
    ----------
    r_ : int
        Landmarks per non-leaf node (the fit's ``r``, at most n - 1).
    jitter_ : float
        lam', added to the base kernel on identical training points.
    depth_ : int
        Depth J of the tree (2^J leaves).
    perm_ : ndarray (n,)
        Training row of each tree position.
    dual_coef_ : ndarray (n, k)
        A^{-1} Y in training order (row i belongs to training sample i).

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

    The posterior standard deviation, and the evidence of the training targets:

    >>> mean, std = model.predict(X[:3], return_std=True)
    >>> std.shape, bool(np.all(std > 0))
    ((3,), True)
    >>> model.log_marginal_likelihood() == model.log_marginal_likelihood(y)
    True
    """

    _NO_COVARIANCE = ("the covariance between two new points runs through the tree's "
                      "coupling of their leaves, which is not implemented")

    def __init__(self, *, operator, weights, pred_vectors, pred_offsets, r, jitter, **kw):
        super().__init__(**kw)
        self._op = operator
        # Held in tree order, which the predictions read; dual_coef_ gives them in training order.
        self._weights_tree = weights
        self._pred_vectors = pred_vectors
        self._pred_offsets = pred_offsets
        self.r_ = r
        self.jitter_ = jitter

    r = renamed("r_")
    jitter = renamed("jitter_")

    def _scores(self, X):
        n_threads = budget_threads()
        return self._by_leaf(X, n_threads, lambda Xg, leaf_start: self._op.predict(
            Xg, leaf_start, self._weights_tree, self._pred_vectors, self._pred_offsets,
            n_threads))

    def _apply(self, B, inverse, n_threads):
        """A B or A^{-1} B for a checked B in training order (no memory check)."""
        Bt, vector = self._to_tree(B)
        if inverse:     # refined as the fit's own solve (hkern.hierarchical.factor)
            out = refined_solve(self._op, Bt, self.lam, n_threads, label="solve")
        else:
            with blas_threads(1):
                out = self._op.matvec(Bt, n_threads)
        return self._from_tree(out, vector)

    def _operator_bytes(self, k, inverse):
        """Peak bytes of solve (inverse) or matvec of a float64 B with k columns (8-byte
        numbers): its tree-ordered copy, the core's output and its per-node vectors c, g / d
        and scratch (5 k sum r_p at most), solve's n k leaf scratch or matvec's leaf block per
        thread; then the output in training order beside the first two (solve: and its
        refinement's residual, iterate and best iterate)."""
        n = len(self.perm_)
        ranks = int(np.sum(np.asarray(self._op.factors()["rank"])))
        if inverse:
            core = 6 * n * k + 4 * k * ranks
        else:
            core = 2 * n * k + 5 * k * ranks + budget_threads() * self._op.leaf_max ** 2
        return 8 * max(core, 3 * n * k)

    def _checked(self, B, inverse, max_memory, name="B"):
        """B as a float64 (n,) or (n, k) array in training order, after checking it and that
        its solve (inverse) or matvec fits in max_memory (inside the caller's thread budget).

        Complex values are refused (the operator is real: solve or multiply the real and
        imaginary parts separately), as are NaN, infinity and |values| > 1e150; float32,
        integer, Fortran-ordered, strided and read-only arrays are converted.  The memory check
        comes first, from B's shape: the conversion is itself a copy of B.
        """
        n = len(self.perm_)
        shape = np.shape(B)
        if len(shape) not in (1, 2) or shape[0] != n:
            raise ValueError(f"{name} must have shape ({n},) or ({n}, k) (one row per training "
                             f"sample); got {shape}")
        if np.iscomplexobj(B):
            raise ValueError(f"{name} is complex; the kernel matrix is real, so pass the real "
                             f"and imaginary parts separately (e.g. f({name}.real) + 1j * "
                             f"f({name}.imag)) instead of losing the imaginary part")
        k = shape[1] if len(shape) == 2 else 1
        is_float64 = (isinstance(B, np.ndarray) and B.dtype == np.float64
                      and B.flags.c_contiguous)
        what = "solve" if inverse else "matvec"
        check_memory(self._operator_bytes(k, inverse) + (0 if is_float64 else 8 * n * k),
                     max_memory, what=f"{what} with n={n} and {k} right-hand side(s) in {name}",
                     fix=f"pass {name} in blocks of fewer columns")
        return check_targets(B, n, name)

    @budgeted
    def matvec(self, B, max_memory=None):
        """(K_hier + lam I) @ B for B of shape (n,) or (n, k), training order.

        Parameters
        ----------
        B : array_like (n,) or (n, k)
            Real values (complex B is refused: apply the method to its real and imaginary parts).
        max_memory : int or None
            Most bytes the call may allocate (about 8 (3 n k + 5 k r n / leaf size) plus a leaf
            block per thread); None: the memory available when the call starts.
        """
        B = self._checked(B, False, max_memory)
        return self._apply(B, False, budget_threads())

    @budgeted
    def solve(self, B, max_memory=None):
        """(K_hier + lam I)^{-1} @ B for B of shape (n,) or (n, k), training order.

        Parameters
        ----------
        B : array_like (n,) or (n, k)
            Real values (complex B is refused: solve for its real and imaginary parts).
        max_memory : int or None
            Most bytes the call may allocate (about 8 (3 n k + 4 k r n / leaf size)); None: the
            memory available when the call starts.
        """
        B = self._checked(B, True, max_memory)
        return self._apply(B, True, budget_threads())

    def logdet(self):
        """log det(K_hier + lam I)."""
        return float(self._op.logdet_value)

    def _checked_targets(self, y, max_memory):
        # as solve checks its right-hand side (complex values refused with their own fix)
        return self._checked(y, True, max_memory, name="y")

    def _evidence_at(self, Y, max_memory):
        # log_marginal_likelihood(y): one solve; max_memory as for solve.
        yt, _ = self._to_tree(self._checked(Y, True, max_memory, name="y"))
        with blas_threads(1):
            alpha = self._op.solve(yt, budget_threads())
        return Evidence(column_quads(yt, alpha), self.logdet(), yt.shape[0])

    def _posterior_bytes(self, m, n_threads):
        """Peak bytes of the posterior variance at m test points (8-byte numbers): theta and
        Phi of every non-root node (2 T, T = sum of r_parent^2) and the leaves' C factors (b,
        none at depth 0, where C is the fit's leaf factor) beside one thread's workspace (the
        larger of leaf_max r_max and 5 r_max^2) per thread; then theta freed and the test
        points' buffers (at most CHUNK_SIZE x (leaf_max + 2 r_max) per thread); and the grouped
        test points and their outputs (m (d + 4))."""
        op = self._op
        T = int(_posterior.node_offsets(op)[-1])
        b = int(op.factors()["b_off"][-1]) if op.depth > 0 else 0
        threads = min(n_threads, 1 << op.depth)
        rm, lm = op.r_max, op.leaf_max
        factors = 2 * T + b + threads * max(lm * rm, 5 * rm * rm)
        chunk = min(m, _posterior.CHUNK_SIZE)
        points = T + b + threads * (chunk * (lm + 2 * rm) + rm * (op.d + 1))
        return 8 * (max(factors, points) + m * (op.d + 4))

    def _latent_variance(self, X, n_threads, max_memory):
        """Posterior variance of f at X under K_hier' (hkern/hierarchical/_posterior.pyx)."""
        n = len(self.perm_)
        check_memory(self._posterior_bytes(X.shape[0], n_threads), max_memory,
                     what=f"the HCK posterior variance with n={n}, r={self.r_} at "
                     f"{X.shape[0]} points", fix="fit with a smaller r or pass fewer points")

        def evaluate(Xg, leaf_start):
            try:
                LC, phi, t_off = _posterior.posterior_factors(self._op, n_threads)
            except ValueError as exc:
                return self._dense_variance(Xg, leaf_start, n_threads, max_memory, exc)
            return _posterior.posterior_variance(self._op, Xg, leaf_start, LC, phi, t_off,
                                                 n_threads)
        return self._by_leaf(X, n_threads, evaluate)

    def _dense_variance_bytes(self, m):
        """Peak bytes of :meth:`_dense_variance` at m test points: A and its Cholesky factor,
        a block of identity columns through matvec or the prediction vectors, and a block of
        DENSE_VARIANCE_BLOCK test points' cross-kernel rows with their solves."""
        n = len(self.perm_)
        block = min(PCA_BLOCK, n)
        chunk = min(m, DENSE_VARIANCE_BLOCK)
        return 8 * (2 * n * n + 3 * n * chunk) + self._operator_bytes(block, False) \
            + 8 * 4 * n * block

    def _dense_variance(self, Xg, leaf_start, n_threads, max_memory, failure):
        """The latent variance from the dense matrices, where the structured form of
        hkern/hierarchical/_posterior.pyx lost positive definiteness (``failure``): on smooth
        kernels at lam near the rounding of the kernel values (energy's default fit: sigma 7.8
        on standardised inputs, lam 1.2e-7), the Schur complements C_i it forms by subtraction
        are indefinite to working precision, while A = K_hier' + (lam - lam') I itself is
        positive definite.  A's columns come from the fit's matvec, k_hier(x, X) from its
        predictions with identity weights, var = k(x, x) - k_x^T A^{-1} k_x by LAPACK's
        Cholesky with one step of refinement.  O(n^2 r + n^3 / 3): only for n up to
        DENSE_VARIANCE_ROWS, within ``max_memory``; else ``failure`` is raised, saying so."""
        op, n, m = self._op, len(self.perm_), Xg.shape[0]
        need = self._dense_variance_bytes(m)
        if n > DENSE_VARIANCE_ROWS or need > resolve_max_memory(max_memory):
            raise ValueError(f"{failure}; the dense computation that would replace it at "
                             f"n={n} is limited to n <= {DENSE_VARIANCE_ROWS} and "
                             f"{need / 2**30:.3g} GiB within max_memory") from None
        A = np.empty((n, n))
        for lo, hi, E in _identity_blocks(n):      # A's columns, in tree order
            A[:, lo:hi] = op.matvec(E, n_threads)
        A = 0.5 * (A + A.T)
        factor = scipy.linalg.cho_factor(A, lower=True)
        variance = np.empty(m)
        kxx = 1.0                                  # k(x, x) of every hkern kernel
        for lo in range(0, m, DENSE_VARIANCE_BLOCK):
            hi = min(lo + DENSE_VARIANCE_BLOCK, m)
            starts = np.clip(leaf_start - lo, 0, hi - lo)
            Kq = np.empty((hi - lo, n))            # k_hier(x, X), columns in tree order
            for c_lo, c_hi, W in _identity_blocks(n):
                dv, c_off = op.prediction_vectors(W, n_threads)
                Kq[:, c_lo:c_hi] = op.predict(np.ascontiguousarray(Xg[lo:hi]), starts,
                                              W, dv, c_off, n_threads)
            V = scipy.linalg.cho_solve(factor, Kq.T)
            V += scipy.linalg.cho_solve(factor, Kq.T - A @ V)      # one refinement step
            variance[lo:hi] = kxx - np.einsum("ij,ji->i", Kq, V)
        return variance

    @budgeted
    def kernel_pca(self, n_components=2, seed=0):
        """Top eigenpairs of the centred kernel matrix C K_hier C, C = I - 11^T/n.

        Lanczos (``scipy.sparse.linalg.eigsh``) over the fast matvec, O(n r) per iteration,
        while n_components is below ``PCA_DENSE_FRACTION`` n = n / 8 (or the n x n matrix does
        not fit in the memory available); from there the eigensolver is dense: C K_hier C is
        formed by applying the same operator to blocks of the identity (n^2 r) and its top
        eigenpairs come from LAPACK's dsyevr (``hkern._linalg.eigh`` with a subset),
        O(n^3) for the tridiagonal reduction whatever n_components.  Lanczos' cost
        grows like n n_components^2 (n = 3000 on one thread: 2.7 s for 300 components, 53 s
        for 1000, against 15 s dense).  Both give the eigenpairs of the same matrix, to
        rounding.

        Parameters
        ----------
        n_components : int
            1 <= n_components <= n - 1.
        seed : None, int or numpy.random.Generator
            Lanczos' start vector (the dense eigensolver draws nothing).

        Returns
        -------
        eigenvalues : ndarray (n_components,), descending
        eigenvectors : ndarray (n, n_components), training order, unit norm
        """
        n = len(self.perm_)
        n_components = check_int(n_components, "n_components", low=1, high=n - 1)
        rng = check_seed(seed)
        n_threads = budget_threads()
        if n_components >= PCA_DENSE_FRACTION * n and self._dense_pca_fits(n_components):
            return self._pca_dense(n_components, n_threads)
        # The same bits for any thread count, so fewer threads change only the time.
        return self._pca_lanczos(n_components, rng,
                                 min(n_threads, max(1, n * self.r_ // PCA_WORK_PER_THREAD)))

    def _pca_lanczos(self, n_components, rng, n_threads):
        """Top eigenpairs of C K_hier C by ARPACK's Lanczos over the matvec."""
        from scipy.sparse.linalg import LinearOperator, eigsh

        n = len(self.perm_)

        def centred_kernel(v):
            v = np.asarray(v, dtype=np.float64).reshape(n, -1)
            v = v - v.mean(axis=0)
            Kv = self._apply(v, False, n_threads) - self.lam * v
            return Kv - Kv.mean(axis=0)

        centred = LinearOperator((n, n), matvec=centred_kernel, matmat=centred_kernel,
                                 dtype=np.float64)
        with blas_threads(1):
            # ARPACK's own BLAS calls run single-threaded too: the eigenpairs are then the same
            # bits for any n_jobs (its vector operations are O(n) against O(n r) per matvec).
            values, vectors = eigsh(centred, k=n_components, which="LA",
                                    v0=rng.standard_normal(n))
        order = np.argsort(values)[::-1]
        return values[order], vectors[:, order]

    def _dense_pca_bytes(self, n_components):
        """Peak bytes of the dense kernel PCA: the n x n matrix, a block of PCA_BLOCK columns of
        the identity through matvec beside it, then dsyevr's eigenvectors wanted (n x
        n_components) and its workspace (26 n doubles, 10 n ints), their copy in descending
        order, and the n eigenvalues."""
        n = len(self.perm_)
        block = min(PCA_BLOCK, n)
        return 8 * n * n + max(self._operator_bytes(block, False) + 8 * n * block,
                               8 * (2 * n * n_components + 40 * n))

    def _dense_pca_fits(self, n_components):
        """Whether the dense kernel PCA fits in the memory available now (else Lanczos)."""
        return self._dense_pca_bytes(n_components) <= resolve_max_memory(None)

    def _pca_dense(self, n_components, n_threads):
        """Top eigenpairs of C K_hier C from the dense matrix (see kernel_pca)."""
        n = len(self.perm_)
        K = np.empty((n, n))
        for lo, hi, E in _identity_blocks(n):
            K[:, lo:hi] = self._apply(E, False, n_threads)
        K.flat[::n + 1] -= self.lam               # A - lam I = K_hier
        K -= K.mean(axis=0)                       # C K ...
        K -= K.mean(axis=1)[:, None]              # ... C
        # LAPACK's dsyevr for the wanted pairs only, on one thread as Lanczos: the same bits
        # for any n_jobs.  One call, which runs to its end (doc/design.md, Ctrl-C).  K is
        # symmetric to rounding and its lower triangle is read, in place.
        values, vectors = _linalg.eigh(K, subset=(n - n_components, n - 1), overwrite_a=True)
        return values[::-1].copy(), np.ascontiguousarray(vectors[:, ::-1])

    @property
    def nbytes(self):
        """Bytes held: the factors, the tree-ordered data, the weights, the tree."""
        extra = sum(a.nbytes for a in (self._weights_tree, self._pred_vectors,
                                       self._pred_offsets, self.perm_, self.directions_,
                                       self.thresholds_, self.centre_, self._start, self._count))
        return int(self._op.nbytes + extra)


class IndependentKRR(GaussianProcessKRR, _TreeModel):
    """KRR with the independent kernel: exact kernel within a leaf, zero across leaves.

    A Gaussian process too, with the block-diagonal prior covariance K_ind = blockdiag(K_leaf)
    and noise variance lam: ``predict(X, return_std=True)`` and ``log_marginal_likelihood()`` as
    for :class:`HierarchicalKRR` (a test point's posterior involves only its own leaf).

    Attributes
    ----------
    depth_ : int
        Depth J of the tree (2^J leaves).
    perm_ : ndarray (n,)
        Training row of each tree position.
    dual_coef_ : ndarray (n, k)
        (K_ind + lam I)^{-1} Y in training order (row i belongs to training sample i).

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
    >>> mean, std = model.predict(X[:4], return_std=True)
    >>> bool(np.all((std > 0) & (std < 1)))
    True
    """

    _NO_COVARIANCE = "the covariance between new points is not implemented for it"

    def __init__(self, *, X_tree, alpha, logdet, **kw):
        super().__init__(**kw)
        self._X_tree = X_tree
        # Held in tree order, which the predictions read; dual_coef_ gives them in training order.
        self._weights_tree = alpha
        self._logdet = logdet

    def _scores(self, X):
        n_threads = budget_threads()
        return self._by_leaf(X, n_threads, lambda Xg, leaf_start: _blocks.predict_blocks(
            self._X_tree, self._start, self._count, self.depth_, self._kind, self._bandwidth,
            self._weights_tree, Xg, leaf_start, n_threads))

    def logdet(self):
        """log det(K_ind + lam I)."""
        return self._logdet

    def _blocks_bytes(self, columns, points, n_threads):
        """Peak bytes of factorising the leaves again on n_threads threads (8-byte numbers):
        per thread one leaf block and, for ``points`` test points, one block of them (at most
        CHUNK_SIZE x leaf size), beside ``columns`` numbers per training point."""
        n = len(self.perm_)
        leaf_max = int(self._count[self.n_leaves_ - 1:].max())
        threads = min(n_threads, self.n_leaves_)
        chunk = min(points, _blocks.CHUNK_SIZE)
        return 8 * (threads * leaf_max * (leaf_max + chunk) + columns * n)

    def _evidence_at(self, Y, max_memory):
        # log_marginal_likelihood(y): every leaf factorised again, as in the fit.
        n, k = Y.shape
        n_threads = budget_threads()
        check_memory(self._blocks_bytes(4 * k, 0, n_threads), max_memory,
                     what=f"log_marginal_likelihood with n={n} and {k} column(s) in y",
                     fix="pass y in blocks of fewer columns")
        yt = np.ascontiguousarray(Y[self.perm_])
        alpha = yt.copy()                                # solved in place below
        with blas_threads(1):
            logdet = _blocks.fit_blocks(self._X_tree, self._start, self._count, self.depth_,
                                        self._kind, self._bandwidth, self.lam, alpha, n_threads)
        return Evidence(column_quads(yt, alpha), logdet, yt.shape[0])

    def _latent_variance(self, X, n_threads, max_memory):
        """Posterior variance of f at X: each leaf with test points factorised again."""
        m = X.shape[0]
        check_memory(self._blocks_bytes(0, m, n_threads) + 8 * m * (X.shape[1] + 4), max_memory,
                     what=f"the posterior variance of the independent kernel at {m} points",
                     fix="fit with a smaller r or leaf_size, or pass fewer points")
        return self._by_leaf(X, n_threads, lambda Xg, leaf_start: _blocks.variance_blocks(
            self._X_tree, self._start, self._count, self.depth_, self._kind, self._bandwidth,
            self.lam, Xg, leaf_start, n_threads))
