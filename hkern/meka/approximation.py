"""The MEKA approximation G~ = P W L W^T P^T: its storage, products, spectrum, PSD fix and the
features of new points (built by :func:`hkern.meka`)."""
from __future__ import annotations

import math

import numpy as np

from .. import _linalg
from .._model import FittedModel, format_sigma, renamed
from .._threads import blas_threads, budget_threads, budgeted
from .._validation import check_array, check_int, check_seed
from ..kernels._api import _kernel_matrix_trusted
from . import _meka
from ._cluster import assign

__all__ = ["MekaApproximation"]

# to_dense() refuses larger n: the n x n matrix is a test/reference tool.
DENSE_LIMIT = 20_000
# Rows of the exact kernel formed at a time by rel_error().
ERROR_CHUNK = 256


class MekaApproximation(FittedModel):
    """A MEKA approximation G~ = P W L W^T P^T of the kernel matrix of the training points.

    W = blkdiag(W^(1), ..., W^(c)) holds one Nystrom basis per cluster (W^(s) is n_s x k_s),
    L (K x K, K = sum k_s) links the clusters, and P sorts the points by cluster.  Built by
    :func:`meka`; do not construct directly.

    Attributes
    ----------
    n_clusters_ : int
        Clusters kept (empty clusters after the assignment are dropped).
    ranks_ : ndarray (c,)
        k_s, the rank of each cluster's basis.
    sizes_ : ndarray (c,)
        n_s, the number of points per cluster.
    labels_ : ndarray (n,)
        Cluster of each training point (0..c-1).
    centroids_ : ndarray (c, d)
        k-means centroids (used to assign new points).
    L_ : ndarray (K, K)
        The link matrix (symmetric).
    zeroed_pairs_ : ndarray (q, 2)
        Cluster pairs (s < t) whose link block was set to zero by the threshold.
    timings_ : dict
        Seconds spent in clustering, bases and links (the paper's T_C, T_W, T_L).
    psd_ : bool
        Whether the PSD fix was applied (then the basis blocks have orthonormal columns).
    kernel : str
        Canonical kernel name.
    sigma : float or ndarray (d,)
        Kernel bandwidth, or per-feature lengthscales (then the stored points, centroids and
        landmarks are in the scaled coordinates ``X / sigma``, and new points are scaled the
        same way).
    n_features_in_ : int
        Number of input features of the training points.
    n_jobs : int or None
        The thread budget of the methods (see :class:`hkern._model.FittedModel`).
    """

    def __init__(self, *, X_sorted, perm, starts, centroids, Z, z_starts, F, f_off, k_starts,
                 W, w_off, L, zeroed_pairs, kernel, kind, sigma, lengthscales, shift, timings, psd,
                 n_jobs):
        super().__init__(n_features=X_sorted.shape[1], n_jobs=n_jobs, lengthscales=lengthscales)
        self._X = X_sorted
        self._perm = perm
        self._starts = starts
        self.centroids_ = centroids
        self._Z = Z
        self._z_starts = z_starts
        self._F = F
        self._f_off = f_off
        self._k_starts = k_starts
        self._W = W
        self._w_off = w_off
        self.L_ = L
        self.zeroed_pairs_ = zeroed_pairs
        self.kernel = kernel
        self._kind = kind
        # sigma as given; the engine's bandwidth on the (scaled) points is 1 for lengthscales.
        self.sigma = sigma if lengthscales is None else lengthscales
        self._bandwidth = sigma
        self._shift = shift
        self.timings_ = timings
        self.psd_ = psd

    psd = renamed("psd_")

    # -------------------------------------------------------------- structure
    @property
    def n_samples(self):
        return self._X.shape[0]

    @property
    def n_clusters_(self):
        return len(self._starts) - 1

    @property
    def sizes_(self):
        return np.diff(self._starts)

    @property
    def ranks_(self):
        return np.diff(self._k_starts)

    @property
    def labels_(self):
        labels = np.empty(self.n_samples, dtype=np.intp)
        labels[self._perm] = np.repeat(np.arange(self.n_clusters_), self.sizes_)
        return labels

    def basis(self, s):
        """W^(s) (n_s, k_s), rows in the order of ``np.flatnonzero(labels_ == s)``."""
        s = check_int(s, "s", low=0, high=self.n_clusters_ - 1)
        n_s, k_s = self.sizes_[s], self.ranks_[s]
        return self._W[self._w_off[s]:self._w_off[s] + n_s * k_s].reshape(n_s, k_s)

    def _feature_map(self, s):
        m_s = self._z_starts[s + 1] - self._z_starts[s]
        k_s = self.ranks_[s]
        return self._F[self._f_off[s]:self._f_off[s] + m_s * k_s].reshape(m_s, k_s)

    def landmarks(self, s):
        """Landmark points Z_s of cluster s (in the caller's coordinates)."""
        s = check_int(s, "s", low=0, high=self.n_clusters_ - 1)
        Z = self._Z[self._z_starts[s]:self._z_starts[s + 1]]
        return Z if self._shift is None else Z + self._shift

    @property
    def nbytes(self):
        """Bytes of the approximation: W, L, landmarks, feature maps, centroids, permutation.

        The training inputs kept for :meth:`rel_error` are not counted (they are the user's
        data, not part of the approximation).
        """
        return int(self._W.nbytes + self.L_.nbytes + self._Z.nbytes + self._F.nbytes
                   + self.centroids_.nbytes + self._perm.nbytes)

    @property
    def n_stored(self):
        """Numbers the paper counts as MEKA's memory: sum n_s k_s + the entries of the non-zero
        blocks of L (zeroed link blocks need not be stored)."""
        k = self.ranks_
        zeroed = sum(2 * k[s] * k[t] for s, t in self.zeroed_pairs_)
        return int(self._W.size + self.L_.size - zeroed)

    # -------------------------------------------------------------- products
    # The products, the spectrum and the PSD fix run inside a budgeted call (a public method
    # here, or meka / fit_meka), whose thread count budget_threads() gives.
    def _apply_sorted(self, V):
        out = np.zeros_like(V)
        with blas_threads(1):
            _meka.apply(self._W, self._w_off, self._starts, self._k_starts, self.L_, V, out,
                        budget_threads())
        return out

    def _Wt(self, V, basis=None):
        """W^T V for V (n, r) in sorted order; ``basis`` is another flat buffer in W's block
        layout (the orthonormal Q of :meth:`_orthonormal_basis`)."""
        out = np.zeros((self.L_.shape[0], V.shape[1]))
        with blas_threads(1):
            _meka.apply_basis(self._W if basis is None else basis, self._w_off, self._starts,
                              self._k_starts, V, out, True, budget_threads())
        return out

    def _W_times(self, U, basis=None):
        """W U (sorted order) for U (K, r); ``basis`` as in :meth:`_Wt`."""
        out = np.zeros((self.n_samples, U.shape[1]))
        with blas_threads(1):
            _meka.apply_basis(self._W if basis is None else basis, self._w_off, self._starts,
                              self._k_starts, np.ascontiguousarray(U), out, False,
                              budget_threads())
        return out

    def _check_vector(self, v, name="v"):
        arr = check_array(v, name, ensure_2d=False)
        if arr.ndim not in (1, 2) or arr.shape[0] != self.n_samples:
            raise ValueError(f"{name} must have shape ({self.n_samples},) or "
                             f"({self.n_samples}, r); got {arr.shape}")
        return arr

    @budgeted
    def matvec(self, v):
        """G~ v for v of shape (n,) or (n, r), in the training points' original order.

        Costs O(r (sum n_s k_s + K^2)), proportional to the storage.

        Examples
        --------
        >>> import numpy as np, hkern
        >>> X = np.random.default_rng(0).normal(size=(300, 2))
        >>> G = hkern.meka(X, r=10, n_clusters=3, seed=0)
        >>> v = np.ones(300)
        >>> bool(np.allclose(G.matvec(v), G.to_dense() @ v))
        True
        """
        v = self._check_vector(v)
        V = v.reshape(self.n_samples, -1)[self._perm]
        out = np.empty_like(V)
        out[self._perm] = self._apply_sorted(np.ascontiguousarray(V))
        return out.ravel() if v.ndim == 1 else out

    @budgeted
    def to_dense(self):
        """The n x n matrix G~ = P W L W^T P^T (small n only: n <= 20000).

        Examples
        --------
        >>> import numpy as np, hkern
        >>> X = np.random.default_rng(0).normal(size=(200, 2))
        >>> G = hkern.meka(X, r=8, n_clusters=2, seed=0).to_dense()
        >>> G.shape, bool(np.allclose(G, G.T))
        ((200, 200), True)
        """
        n = self.n_samples
        if n > DENSE_LIMIT:
            raise ValueError(f"to_dense() forms an n x n matrix; n={n} exceeds {DENSE_LIMIT}. "
                             "Use matvec() or rel_error() instead")
        WL = self._W_times(self.L_)                          # (W L) sorted, n x K
        Wfull = self._W_times(np.eye(self.L_.shape[0]))      # W sorted, n x K
        G = _linalg.matmul(WL, Wfull, trans_b=True, n_threads=budget_threads())
        out = np.empty_like(G)
        out[np.ix_(self._perm, self._perm)] = G
        return out

    def _rows_sorted(self, rows):
        """Rows of G~ (sorted order) for sorted row indices ``rows``: w_i L W^T."""
        labels = np.searchsorted(self._starts, rows, side="right") - 1
        K = self.L_.shape[0]
        R = np.zeros((len(rows), K))
        for s in np.unique(labels):
            sel = labels == s
            Ws = self.basis(s)
            ks = slice(self._k_starts[s], self._k_starts[s + 1])
            R[sel] = _linalg.matmul(Ws[rows[sel] - self._starts[s]], self.L_[ks])
        out = np.zeros((len(rows), self.n_samples))
        for t in range(self.n_clusters_):
            kt = slice(self._k_starts[t], self._k_starts[t + 1])
            nt = slice(self._starts[t], self._starts[t + 1])
            out[:, nt] = _linalg.matmul(np.ascontiguousarray(R[:, kt]), self.basis(t),
                                        trans_b=True)
        return out

    @budgeted
    def rel_error(self, n_rows=20000, seed=None):
        """Relative Frobenius error ||G - G~||_F / ||G||_F estimated on sampled rows.

        ``n_rows`` rows are drawn uniformly without replacement (all rows if n <= n_rows),
        as the paper measures (20000 rows on its large sets).  Exact kernel rows are formed
        256 at a time: O(n_rows n (d + k)) time, O(256 n) memory.

        Examples
        --------
        >>> import numpy as np, hkern
        >>> X = np.random.default_rng(0).normal(size=(400, 2))
        >>> G = hkern.meka(X, r=20, n_clusters=4, seed=0)
        >>> G.rel_error() < 0.05
        True
        """
        n = self.n_samples
        n_rows = check_int(n_rows, "n_rows", low=1)
        rng = check_seed(seed)
        if n_rows >= n:
            rows = np.arange(n)
        else:   # rows of the original order, located in the cluster-sorted storage
            position = np.empty(n, dtype=np.intp)
            position[self._perm] = np.arange(n)
            rows = np.sort(position[rng.choice(n, n_rows, replace=False)])
        num = den = 0.0
        threads = budget_threads()
        for start in range(0, len(rows), ERROR_CHUNK):
            chunk = rows[start:start + ERROR_CHUNK]
            G = _kernel_matrix_trusted(self._kind, self._bandwidth, self._X[chunk], self._X,
                                       threads)
            num += float(np.sum((G - self._rows_sorted(chunk)) ** 2))
            den += float(np.sum(G ** 2))
        return math.sqrt(num / den)

    # -------------------------------------------------------------- spectrum
    def _orthonormal_basis(self):
        """(Q, R, L'): G~ = Q L' Q^T with Q = blockdiag(Q_s) orthonormal, as a flat buffer in
        W's block layout, R the list of the triangular R_s (W^(s) = Q_s R_s) and L' = R L R^T.

        After the PSD fix W is already orthonormal: (W, None, L) without any work.
        """
        if self.psd_:
            return self._W, None, self.L_
        Qs, Rs, Lp = self._orthonormal_form()
        return np.concatenate([Q.ravel() for Q in Qs]), Rs, Lp

    def _orthonormal_form(self):
        """Blockwise thin QR W^(s) = Q_s R_s: returns (Q blocks, R blocks, L' = R L R^T)."""
        Qs, Rs = [], []
        for s in range(self.n_clusters_):
            Q, R = _linalg.qr(self.basis(s))
            Qs.append(Q)
            Rs.append(R)
        Lp = self.L_.copy()
        for s in range(self.n_clusters_):
            ks = slice(self._k_starts[s], self._k_starts[s + 1])
            Lp[ks, :] = _linalg.matmul(Rs[s], Lp[ks, :])
            Lp[:, ks] = _linalg.matmul(Lp[:, ks], Rs[s], trans_b=True)
        return Qs, Rs, 0.5 * (Lp + Lp.T)

    @budgeted
    def eigh(self, k=None):
        """Largest-k eigenpairs of G~, exactly (up to round-off), in O(n K^2 + K^3).

        With the blockwise QR W^(s) = Q_s R_s, G~ = Q L' Q^T with L' = R L R^T and Q
        orthonormal, so the non-zero spectrum of G~ is that of the K x K matrix L'.

        Parameters
        ----------
        k : int or None
            Number of eigenpairs (1 <= k <= K); None for all K.

        Returns
        -------
        w : ndarray (k,)
            Eigenvalues, descending.
        V : ndarray (n, k)
            Orthonormal eigenvectors (original order of the training points).

        Examples
        --------
        >>> import numpy as np, hkern
        >>> X = np.random.default_rng(0).normal(size=(200, 2))
        >>> G = hkern.meka(X, r=8, n_clusters=2, seed=0)
        >>> w, V = G.eigh(3)
        >>> bool(np.allclose(G.matvec(V), V * w))
        True
        """
        K = self.L_.shape[0]
        k = K if k is None else check_int(k, "k", low=1, high=K)
        Qs, _, Lp = self._orthonormal_form()
        w, U = _linalg.eigh(Lp, subset=(K - k, K - 1))
        w, U = w[::-1], np.ascontiguousarray(U[:, ::-1])
        V = np.zeros((self.n_samples, k))
        for s in range(self.n_clusters_):
            ks = slice(self._k_starts[s], self._k_starts[s + 1])
            V[self._starts[s]:self._starts[s + 1]] = _linalg.matmul(Qs[s], U[ks])
        out = np.empty_like(V)
        out[self._perm] = V
        return w, out

    def _psd_factors(self):
        """MEKA-PSD (doc/specs/meka.md, 3a): the factors (L, W, F) of the approximation with
        the negative eigenvalues of L' = R L R^T clipped, for a new MekaApproximation.

        W^(s) <- Q_s (orthonormal), F^(s) <- F^(s) R_s^{-1} (so that still
        W^(s) = K(X_s, Z_s) F^(s)) and L <- L'_+: G~ = Q L'_+ Q^T, the Frobenius-nearest PSD
        matrix within span(Q).  W and F are overwritten in place (they are the largest arrays:
        no copy), so this approximation is spent: only the new one may be used.
        """
        Qs, Rs, Lp = self._orthonormal_form()
        w, U = _linalg.eigh(Lp)
        w = np.maximum(w, 0.0)
        Lpsd = _linalg.matmul(U * w, U, trans_b=True)
        L = np.ascontiguousarray(0.5 * (Lpsd + Lpsd.T))
        for s in range(self.n_clusters_):
            n_s, k_s = self.sizes_[s], self.ranks_[s]
            self._W[self._w_off[s]:self._w_off[s] + n_s * k_s] = Qs[s].ravel()
            F = _linalg.solve_triangular(Rs[s], self._feature_map(s), lower=False, left=False)
            m_s = F.shape[0]
            self._F[self._f_off[s]:self._f_off[s] + m_s * k_s] = F.ravel()
        return L, self._W, self._F

    # -------------------------------------------------------------- new points
    def _prepare_new(self, X):
        X = np.ascontiguousarray(X if self._shift is None else X - self._shift)
        return X, assign(X, self.centroids_, budget_threads())

    @budgeted
    def features(self, X):
        """Nystrom features w(x) = K(x, Z_s) F^(s) of new points, with s their nearest centroid.

        Returns (labels, list of per-cluster feature arrays): for a training point w(x) is its
        row of W^(s).  X is checked like every other input (finite, 2-D with the training
        number of features; float32, Fortran-ordered and read-only arrays are converted).
        """
        X, labels = self._prepare_new(self._check_X(X))
        out = []
        for s in range(self.n_clusters_):
            sel = np.flatnonzero(labels == s)
            E = _kernel_matrix_trusted(self._kind, self._bandwidth, np.ascontiguousarray(X[sel]),
                                       self._Z[self._z_starts[s]:self._z_starts[s + 1]],
                                       budget_threads())
            out.append((sel, _linalg.matmul(E, self._feature_map(s))))
        return labels, out

    def _repr_fields(self):
        return {"n": str(self.n_samples), "n_clusters": str(self.n_clusters_),
                "K": str(self.L_.shape[0]), "kernel": repr(self.kernel),
                "sigma": format_sigma(self.sigma), "psd": str(self.psd_)}

