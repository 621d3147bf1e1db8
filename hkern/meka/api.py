"""Python face of MEKA: build the block low-rank approximation G ~ W L W^T."""
from __future__ import annotations

import math
import time
import warnings

import numpy as np

from .. import _linalg
from .._memory import check_memory
from .._threads import blas_threads, budgeted, resolve_n_jobs, thread_budget
from .._validation import (
    check_array,
    check_bandwidth,
    check_bool,
    check_choice,
    check_int,
    check_n_features,
    check_nonnegative,
    check_positive,
    check_seed,
)
from ..kernels._api import _centred_for_accuracy, _kernel_matrix_trusted, kernel_kind
from . import _meka

__all__ = ["RANK_POLICIES", "THRESHOLD_KINDS", "MekaApproximation", "meka", "meka_peak_bytes"]

RANK_POLICIES = ("uniform", "proportional", "spectral")
THRESHOLD_KINDS = ("fraction", "absolute")
# Eigenvalues of a landmark block K(Z_s, Z_s) at or below this fraction of its largest are
# dropped before Lambda^{-1/2} (doc/specs/meka.md, section 7, item 3): below it the basis
# columns are round-off amplified by up to 1e5.
EIG_RCOND = 1e-10
# Default relative singular-value cutoff of the link least squares.  doc/specs/meka.md (section
# 7, item 4) suggested 1e-10 (Corrections 1 there); measured on standardised UCI sets
# (doc/results/meka.md) that lets the sampled rows A = W^(s)[v_s] amplify noise through
# singular values ~1e-6 s_max (a basis column concentrated on points the sample missed):
# relative errors of 10^2..10^5 on protein, pol and elevators at sigma = 1.  1e-2 kept every
# set stable (the authors' pinv(A^T A, 1e-6) is an absolute cutoff of ~1e-3 on A's singular
# values, of the same order).
LINK_RCOND = 1e-2
# to_dense() refuses larger n: the n x n matrix is a test/reference tool.
DENSE_LIMIT = 20_000
# Rows of the exact kernel formed at a time by rel_error().
ERROR_CHUNK = 256


def _check_status(status, what):
    if status == -1000:
        raise MemoryError(f"MEKA {what}: could not allocate scratch memory")
    _linalg.check_info(status, f"MEKA {what}")


class MekaApproximation:
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
    psd : bool
        Whether the PSD fix was applied (then the basis blocks have orthonormal columns).
    """

    def __init__(self, *, X_sorted, perm, starts, centroids, Z, z_starts, F, f_off, k_starts,
                 W, w_off, L, zeroed_pairs, kernel, kind, sigma, shift, timings, psd, n_jobs):
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
        self.sigma = sigma
        self._shift = shift
        self.timings_ = timings
        self.psd = psd
        self.n_jobs = n_jobs

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

    def _threads(self):
        return resolve_n_jobs(self.n_jobs)

    # -------------------------------------------------------------- products
    def _apply_sorted(self, V):
        out = np.zeros_like(V)
        with blas_threads(1):
            _meka.apply(self._W, self._w_off, self._starts, self._k_starts, self.L_, V, out,
                        self._threads())
        return out

    def _Wt(self, V, basis=None):
        """W^T V for V (n, r) in sorted order; ``basis`` is another flat buffer in W's block
        layout (the orthonormal Q of :meth:`_orthonormal_basis`)."""
        out = np.zeros((self.L_.shape[0], V.shape[1]))
        with blas_threads(1):
            _meka.apply_basis(self._W if basis is None else basis, self._w_off, self._starts,
                              self._k_starts, V, out, True, self._threads())
        return out

    def _W_times(self, U, basis=None):
        """W U (sorted order) for U (K, r); ``basis`` as in :meth:`_Wt`."""
        out = np.zeros((self.n_samples, U.shape[1]))
        with blas_threads(1):
            _meka.apply_basis(self._W if basis is None else basis, self._w_off, self._starts,
                              self._k_starts, np.ascontiguousarray(U), out, False,
                              self._threads())
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
        G = _linalg.matmul(WL, Wfull, trans_b=True, n_threads=self._threads())
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
        threads = self._threads()
        for start in range(0, len(rows), ERROR_CHUNK):
            chunk = rows[start:start + ERROR_CHUNK]
            G = _kernel_matrix_trusted(self._kind, self.sigma, self._X[chunk], self._X, threads)
            num += float(np.sum((G - self._rows_sorted(chunk)) ** 2))
            den += float(np.sum(G ** 2))
        return math.sqrt(num / den)

    # -------------------------------------------------------------- spectrum
    def _orthonormal_basis(self):
        """(Q, R, L'): G~ = Q L' Q^T with Q = blockdiag(Q_s) orthonormal, as a flat buffer in
        W's block layout, R the list of the triangular R_s (W^(s) = Q_s R_s) and L' = R L R^T.

        After the PSD fix W is already orthonormal: (W, None, L) without any work.
        """
        if self.psd:
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

    def _make_psd(self):
        """MEKA-PSD (doc/specs/meka.md, 3a): clip the negative eigenvalues of L' = R L R^T.

        Afterwards W^(s) <- Q_s (orthonormal), F^(s) <- F^(s) R_s^{-1} (so that still
        W^(s) = K(X_s, Z_s) F^(s)) and L <- L'_+: G~ = Q L'_+ Q^T, the Frobenius-nearest PSD
        matrix within span(Q).
        """
        Qs, Rs, Lp = self._orthonormal_form()
        w, U = _linalg.eigh(Lp)
        w = np.maximum(w, 0.0)
        Lpsd = _linalg.matmul(U * w, U, trans_b=True)
        self.L_ = np.ascontiguousarray(0.5 * (Lpsd + Lpsd.T))
        for s in range(self.n_clusters_):
            n_s, k_s = self.sizes_[s], self.ranks_[s]
            self._W[self._w_off[s]:self._w_off[s] + n_s * k_s] = Qs[s].ravel()
            F = _linalg.solve_triangular(Rs[s], self._feature_map(s), lower=False, left=False)
            m_s = F.shape[0]
            self._F[self._f_off[s]:self._f_off[s] + m_s * k_s] = F.ravel()
        self.psd = True

    # -------------------------------------------------------------- new points
    def _prepare_new(self, X):
        X = np.ascontiguousarray(X if self._shift is None else X - self._shift)
        return X, _assign(X, self.centroids_, self._threads())

    @budgeted
    def features(self, X):
        """Nystrom features w(x) = K(x, Z_s) F^(s) of new points, with s their nearest centroid.

        Returns (labels, list of per-cluster feature arrays): for a training point w(x) is its
        row of W^(s).  X is checked like every other input (finite, 2-D with the training
        number of features; float32, Fortran-ordered and read-only arrays are converted).
        """
        X, labels = self._prepare_new(check_n_features(X, self._X.shape[1]))
        out = []
        for s in range(self.n_clusters_):
            sel = np.flatnonzero(labels == s)
            E = _kernel_matrix_trusted(self._kind, self.sigma, np.ascontiguousarray(X[sel]),
                                       self._Z[self._z_starts[s]:self._z_starts[s + 1]],
                                       self._threads())
            out.append((sel, _linalg.matmul(E, self._feature_map(s))))
        return labels, out

    def __repr__(self):
        return (f"MekaApproximation(n={self.n_samples}, n_clusters={self.n_clusters_}, "
                f"K={self.L_.shape[0]}, kernel={self.kernel!r}, sigma={self.sigma:g}, "
                f"psd={self.psd})")


# ------------------------------------------------------------------ construction steps


def _drop_empty(centroids, labels):
    """Remove the clusters no point was assigned to and renumber the labels 0..c'-1."""
    counts = np.bincount(labels, minlength=centroids.shape[0])
    keep = np.flatnonzero(counts > 0)                  # doc/specs/meka.md, section 7, item 7
    remap = np.full(centroids.shape[0], -1, dtype=np.intp)
    remap[keep] = np.arange(len(keep))
    return np.ascontiguousarray(centroids[keep]), remap[labels]


# Data whose largest magnitude lies outside this range are clustered after an exact rescaling
# (see _distance_exponent); inside it, squared distances of n <= 2^40 points in d <= 2^40
# dimensions can neither overflow nor lose their leading digits to underflow.
DISTANCE_SAFE_RANGE = (2.0**-100, 2.0**100)


def _distance_exponent(*arrays):
    """k such that 2^k brings the largest magnitude of ``arrays`` into [0.5, 1), or 0 when it is
    already inside DISTANCE_SAFE_RANGE.

    k-means and nearest-centroid assignment depend only on the order of squared distances.
    Near the input bound (1e150) those overflow: scipy's kmeans2 then divides inf by inf in
    k-means++ and its vq step leaves labels unset when every distance is infinite, which made
    ``update_cluster_means`` write out of bounds (the segfault of issue 16, defect 3).  Below
    ~1e-154 they underflow to 0 and every point looks like every other.  Multiplying by a power
    of two is exact, so the clustering of 2^k X is that of X, bit for bit, with finite
    distances.  Normal data (k = 0) are not touched.
    """
    top = 0.0
    for A in arrays:
        if A.size:
            top = max(top, float(A.max()), -float(A.min()))   # no |A| temporary
    if top == 0.0 or DISTANCE_SAFE_RANGE[0] <= top <= DISTANCE_SAFE_RANGE[1]:
        return 0
    return max(-1022, min(1023, -math.frexp(top)[1]))      # 2^k must itself be finite


def _assign(X, centroids, n_threads):
    """Nearest-centroid labels of the rows of X, with distances computed at a safe scale."""
    labels = np.empty(X.shape[0], dtype=np.intp)
    scale = math.ldexp(1.0, _distance_exponent(X, centroids))
    _meka.assign_nearest(X, centroids, labels, n_threads, scale)
    return labels


def _cluster(X, n_clusters, kmeans_sample, kmeans_iter, rng, n_threads):
    """k-means++ / Lloyd (scipy kmeans2) on a uniform subsample, then nearest-centroid labels.

    k-means runs on the sample times 2^k (see _distance_exponent), so that its squared
    distances are finite and not underflowed for every accepted input.  Fewer distinct sample
    points than clusters would leave k-means++ without candidates: the number of clusters is
    then reduced to the number of distinct (scaled) points.
    """
    from scipy.cluster.vq import kmeans2

    n = X.shape[0]
    sample = X if n <= kmeans_sample else X[np.sort(rng.choice(n, kmeans_sample, replace=False))]
    k = _distance_exponent(sample)
    if k:
        sample = np.ldexp(sample, k)
    if n_clusters > 1:
        n_clusters = min(n_clusters, len(np.unique(sample, axis=0)))
    with warnings.catch_warnings(), np.errstate(invalid="ignore", divide="ignore"):
        # An empty k-means cluster only warns in kmeans2; it is dropped below.  Distinct points
        # whose squared distances underflow to 0 make k-means++ divide 0 by 0: it then picks
        # the first point again, which is harmless (an empty cluster).
        warnings.simplefilter("ignore", UserWarning)
        centroids, _ = kmeans2(sample, n_clusters, iter=kmeans_iter, minit="++", seed=rng)
    centroids = np.ascontiguousarray(centroids, dtype=np.float64)
    if k:
        centroids = np.ldexp(centroids, -k)
    return _drop_empty(centroids, _assign(X, centroids, n_threads))


def _target_ranks(rank, sizes, policy):
    """k_s before the landmark step (uniform, proportional); spectral is decided later."""
    c, n = len(sizes), int(sizes.sum())
    if policy == "uniform" or policy == "spectral":
        return np.minimum(rank, sizes)
    # proportional: the total c * rank split as ceil(total n_s / n), surplus taken from the
    # largest clusters so that the total is kept (the authors' code takes it from the last).
    total = rank * c
    k = np.minimum(np.ceil(total * sizes / n).astype(np.intp), sizes)
    k = np.maximum(k, 1)
    surplus = int(k.sum()) - total
    for s in np.argsort(-sizes, kind="stable"):
        if surplus <= 0:
            break
        take = min(surplus, int(k[s]) - 1)
        k[s] -= take
        surplus -= take
    return k


def _landmark_bases(kind, sigma, Xs, starts, rank, policy, landmarks_per_cluster, rng, n_threads):
    """Landmarks Z_s, eigenpairs of K(Z_s, Z_s) and the maps F^(s) = U_s Lambda_s^{-1/2}."""
    sizes = np.diff(starts)
    c = len(sizes)
    target = _target_ranks(rank, sizes, policy)
    Z, eig = [], []
    for s in range(c):
        m = landmarks_per_cluster if landmarks_per_cluster is not None else 2 * (
            rank if policy == "spectral" else int(target[s]))
        m_s = int(min(m, sizes[s]))
        idx = np.sort(rng.choice(sizes[s], m_s, replace=False)) + starts[s]
        Zs = np.ascontiguousarray(Xs[idx])
        w, U = _linalg.eigh(_kernel_matrix_trusted(kind, sigma, Zs, Zs, n_threads))
        w, U = w[::-1], U[:, ::-1]
        keep = int(np.sum(w > EIG_RCOND * w[0]))
        Z.append(Zs)
        eig.append((w[:keep], U[:, :keep]))
    if policy == "spectral":
        # Pool every cluster's eigenvalues and keep the global top c * rank (doc/specs/meka.md,
        # section 2, strategy 3); each cluster keeps at least one pair so that every point has
        # a basis.
        pooled = np.concatenate([w for w, _ in eig])
        owner = np.concatenate([np.full(len(w), s) for s, (w, _) in enumerate(eig)])
        top = np.argsort(-pooled, kind="stable")[:rank * c]
        target = np.maximum(np.bincount(owner[top], minlength=c), 1)
    F, ranks = [], []
    for s in range(c):
        w, U = eig[s]
        k_s = int(min(target[s], len(w)))
        F.append(np.ascontiguousarray(U[:, :k_s] / np.sqrt(w[:k_s])))
        ranks.append(k_s)
    return Z, F, np.asarray(ranks, dtype=np.intp)


def _zeroed_pairs(kind, sigma, centroids, pairs, threshold, threshold_kind, n_threads):
    """Boolean mask of the pairs whose link block the threshold sets to zero."""
    if len(pairs) == 0 or threshold == 0.0:
        return np.zeros(len(pairs), dtype=bool)
    D = _kernel_matrix_trusted(kind, sigma, centroids, centroids, n_threads)
    values = D[pairs[:, 0], pairs[:, 1]]
    if threshold_kind == "absolute":
        return values <= threshold                     # the paper's K(mu_s, mu_t) <= eps
    n_zero = math.ceil(threshold * len(pairs) - 1e-12)
    mask = np.zeros(len(pairs), dtype=bool)
    mask[np.argsort(values, kind="stable")[:n_zero]] = True
    return mask


def _link_samples(starts, ranks, pairs, oversample, rng):
    """Sampled rows of each pair: (1 + rho) k_s of cluster s and (1 + rho) k_t of cluster t."""
    sizes = np.diff(starts)
    want = np.minimum(np.ceil((1.0 + oversample) * ranks - 1e-9).astype(np.intp), sizes)
    chunks, offsets, pos = [], np.zeros((len(pairs), 3), dtype=np.intp), 0
    for p, (s, t) in enumerate(pairs):
        a, b = int(want[s]), int(want[t])
        rows_s = np.arange(starts[s], starts[s + 1]) if a == sizes[s] else \
            np.sort(rng.choice(sizes[s], a, replace=False)) + starts[s]
        rows_t = np.arange(starts[t], starts[t + 1]) if b == sizes[t] else \
            np.sort(rng.choice(sizes[t], b, replace=False)) + starts[t]
        chunks += [rows_s, rows_t]
        offsets[p] = (pos, a, b)
        pos += a + b
    samples = np.concatenate(chunks).astype(np.intp) if chunks else np.zeros(1, dtype=np.intp)
    return np.ascontiguousarray(samples), offsets


def meka(X, r, *, n_clusters, kernel="gaussian", sigma=1.0, seed=None, n_jobs=None,
         oversample=2.0, landmarks_per_cluster=None, rank_policy="uniform", threshold=0.0,
         threshold_kind="fraction", psd=False, kmeans_sample=20000, kmeans_iter=10,
         link_rcond=LINK_RCOND, max_memory=None):
    """MEKA approximation G~ = W L W^T of the kernel matrix of X (Si, Hsieh & Dhillon 2017).

    1. k-means (k-means++ start, ``kmeans_iter`` Lloyd iterations, scipy ``kmeans2``) on a
       uniform subsample of ``kmeans_sample`` points; every point goes to its nearest
       centroid; empty clusters are dropped.
    2. Per cluster s: m_s landmarks Z_s drawn uniformly from the cluster, the top-k_s
       eigenpairs (U_s, Lambda_s) of K(Z_s, Z_s) (eigenvalues <= 1e-10 lambda_max dropped)
       and the basis W^(s) = K(X_s, Z_s) U_s Lambda_s^{-1/2}; L^(s,s) = I.
    3. Per pair s < t: (1 + rho) k_s rows of cluster s and (1 + rho) k_t rows of cluster t
       drawn uniformly; L^(s,t) = A^+ G^ (B^+)^T with G^ the sampled kernel block and A, B
       the sampled rows of W^(s), W^(t) (pseudo-inverses with relative cutoff
       ``link_rcond``);
       L^(t,s) = L^(s,t)^T.  Pairs removed by ``threshold`` get L^(s,t) = 0.
    4. Optionally (``psd=True``) the PSD fix of doc/specs/meka.md (section 3a).

    Parameters
    ----------
    X : array_like (n, d)
    r : int
        k, the rank of each cluster's basis (total rank about ``r * n_clusters``), as in
        the paper; see ``rank_policy``.
    n_clusters : int
        c, 1 <= c <= n (and c <= ``kmeans_sample``).
    kernel : str
        See :func:`hkern.kernel_matrix`.  The paper's Gaussian exp(-gamma ||x-y||^2) is
        ``sigma = 1 / sqrt(2 gamma)``.
    sigma : float
        Kernel bandwidth, > 0.
    oversample : float
        rho >= 0: each link block is fitted on (1 + rho) k_s x (1 + rho) k_t sampled entries
        (capped at the cluster sizes; a large rho uses whole blocks, i.e. the exact least
        squares).  The paper and the authors' code use 2.
    landmarks_per_cluster : int or None
        m_s; default 2 k_s (2 ``r`` for ``rank_policy="spectral"``), capped at n_s.  k_s is
        capped at m_s.
    rank_policy : {"uniform", "proportional", "spectral"}
        ``"uniform"``: k_s = min(r, n_s) (the paper's experiments).  ``"proportional"``:
        the total ``r * c`` split in proportion to n_s (what the authors' code does with
        its total rank).  ``"spectral"``: the global top ``r * c`` eigenvalues of all
        clusters' landmark blocks decide each k_s (at least 1 per cluster).
    threshold : float
        Drop weak links.  With ``threshold_kind="fraction"`` (the authors' code, eta in
        [0, 1]): the ceil(eta P) of the P = c(c-1)/2 pairs with the smallest centroid kernel
        value K(mu_s, mu_t) get L^(s,t) = 0.  With ``"absolute"`` (the paper, eps >= 0): pairs
        with K(mu_s, mu_t) <= eps.  0 (default) keeps every link.
    threshold_kind : {"fraction", "absolute"}
    psd : bool
        Apply MEKA-PSD: with the blockwise QR W^(s) = Q_s R_s, clip the negative eigenvalues
        of R L R^T, so that G~ is positive semi-definite (needed for CG or a small ``lam``).
    kmeans_sample : int
        Points used by k-means (the paper: 20000).
    kmeans_iter : int
        Lloyd iterations.
    link_rcond : float
        Relative singular-value cutoff of the pseudo-inverses A^+ and B^+ in the link least
        squares, in (0, 1).  The default 1e-2 is larger than the 1e-10 of doc/specs/meka.md
        (section 7, item 4) because smaller cutoffs let the sampled rows amplify noise (see its
        Corrections 1 and doc/meka.md).
    seed : None, int or numpy.random.Generator
        All random steps (subsample, k-means++, landmarks, link samples).
    n_jobs : int or None
        Threads (OpenMP over clusters and cluster pairs, and BLAS); results are bitwise
        identical for any value.  None: the CPUs available, bounded by OMP_NUM_THREADS and an
        enclosing threadpoolctl limit.
    max_memory : int, float or None
        Largest peak memory (bytes) the call may use; None (default) is the memory available
        now.  The peak is estimated from n, d, r, n_clusters and kmeans_sample (see
        :func:`hkern.meka.api.meka_peak_bytes`) before anything large is allocated.

    Returns
    -------
    MekaApproximation
        ``matvec``, ``to_dense``, ``rel_error``, ``eigh``, ``nbytes``, ``n_stored``.

    Raises
    ------
    ValueError
        For invalid arguments, e.g. ``n_clusters > n`` or ``r < 1``.
    hkern.MemoryLimitError
        (a ValueError and a MemoryError) when the estimated peak exceeds ``max_memory``.

    Notes
    -----
    Memory O(sum n_s k_s + K^2) (the paper's O(nk + (ck)^2)); time
    O(n m (k + d) + c m^3 + c^2 k^3 + k-means).  Empty clusters after the assignment of all
    points are dropped (``n_clusters_`` tells how many remain).

    Examples
    --------
    >>> import numpy as np, hkern
    >>> X = np.random.default_rng(0).normal(size=(1000, 3))
    >>> G = hkern.meka(X, r=40, n_clusters=5, sigma=1.0, seed=0)
    >>> G.n_clusters_, G.L_.shape
    (5, (200, 200))
    >>> K = hkern.kernel_matrix(X, sigma=1.0)
    >>> bool(np.linalg.norm(K - G.to_dense()) / np.linalg.norm(K) < 0.05)
    True
    """
    args = _meka_arguments(X, r, n_clusters, kernel=kernel, sigma=sigma, oversample=oversample,
                           landmarks_per_cluster=landmarks_per_cluster, rank_policy=rank_policy,
                           threshold=threshold, threshold_kind=threshold_kind, psd=psd,
                           kmeans_sample=kmeans_sample, kmeans_iter=kmeans_iter,
                           link_rcond=link_rcond)
    rng = check_seed(seed)
    n_threads = resolve_n_jobs(n_jobs)
    check_memory(meka_peak_bytes(args, n_threads), max_memory, what=_describe(args, "meka"),
                 fix="choose a smaller r or fewer clusters")
    with thread_budget(n_jobs) as n_threads:
        return _build(rng=rng, n_jobs=n_jobs, n_threads=n_threads, **args)


def meka_peak_bytes(args, n_threads):
    """Estimated peak bytes :func:`meka` allocates beyond X, for its checked arguments.

    The phases, each counting what is alive at its peak (doubles):

    * clustering: the centred copy of X (n d; also the temporary while its centre is found)
      beside the k-means sample (ns d, ns = min(n, kmeans_sample)), its sorted copy in
      np.unique (2 ns d) and the k-means++ distances (c ns);
    * bases: the cluster-sorted X (n d), W (sum n_s k_s ~ n k) and the eigenvectors of the
      landmark blocks (sum m_s^2 <= min(c m^2, n m), m = 2 k by default);
    * links: sorted X, W, L (K^2, K = min(n, c k)) and each thread's pair workspace (sampled
      rows, the (1+rho) k x (1+rho) k kernel block, the least-squares factors: ~ 8 a^2);
    * PSD fix: sorted X, W, its orthonormal copy Q (n k) and six K x K matrices (L, L', the
      eigendecomposition's copy and vectors, the clipped product and its symmetrisation).
    """
    X = args["X"]
    n, d = X.shape
    c, k = args["n_clusters"], args["rank"]
    m = min(n, args["landmarks_per_cluster"] or 2 * k)
    k = min(k, m)
    K = min(n, c * k)
    ns = min(n, args["kmeans_sample"])
    a = min(n, math.ceil((1.0 + args["oversample"]) * k))
    # The centred copy of X (the temporary that finds the centre, kept when the shift is
    # used) lives through k-means.
    cluster = n * d + 3 * ns * d + c * ns
    bases = n * d + n * k + min(c * m * m, n * m)
    links = n * d + n * k + K * K + (n_threads * (8 * a * a + 2 * a * d) if c > 1 else 0)
    psd = n * d + 2 * n * k + 6 * K * K if args["psd"] else 0
    return 8 * max(cluster, bases, links, psd)


def _describe(args, function):
    n, d = args["X"].shape
    return (f"{function} with n={n}, d={d}, r={args['rank']}, "
            f"n_clusters={args['n_clusters']}")


def _meka_arguments(X, rank, n_clusters, kernel="gaussian", sigma=1.0, oversample=2.0,
                    landmarks_per_cluster=None, rank_policy="uniform", threshold=0.0,
                    threshold_kind="fraction", psd=False, kmeans_sample=20000, kmeans_iter=10,
                    link_rcond=LINK_RCOND):
    """The arguments of :func:`meka` checked and normalised, as keyword arguments of _build."""
    X = check_array(X, "X")
    n = X.shape[0]
    name, kind = kernel_kind(kernel)
    sigma = check_bandwidth(sigma, X)
    rank = check_int(rank, "r", low=1, high=n,
                     hint="r is the per-cluster rank k, at least 1 and at most n")
    n_clusters = check_int(n_clusters, "n_clusters", low=1, high=n,
                           hint=f"the number of clusters cannot exceed the n={n} points")
    kmeans_sample = check_int(kmeans_sample, "kmeans_sample", low=1)
    if n_clusters > min(n, kmeans_sample):
        raise ValueError(f"n_clusters={n_clusters} exceeds kmeans_sample={kmeans_sample}, the "
                         "number of points k-means runs on; raise kmeans_sample")
    kmeans_iter = check_int(kmeans_iter, "kmeans_iter", low=1)
    oversample = check_nonnegative(oversample, "oversample", "rho = 2 is the paper's choice")
    if landmarks_per_cluster is not None:
        landmarks_per_cluster = check_int(landmarks_per_cluster, "landmarks_per_cluster", low=1)
    rank_policy = check_choice(rank_policy, "rank_policy", RANK_POLICIES)
    threshold_kind = check_choice(threshold_kind, "threshold_kind", THRESHOLD_KINDS)
    threshold = check_nonnegative(threshold, "threshold")
    if threshold_kind == "fraction" and threshold > 1.0:
        raise ValueError(f"threshold={threshold} is a fraction of the cluster pairs and must be "
                         "in [0, 1]; use threshold_kind='absolute' for a kernel-value cutoff")
    link_rcond = check_positive(link_rcond, "link_rcond", "a relative cutoff such as 1e-2")
    if link_rcond >= 1.0:
        raise ValueError(f"link_rcond={link_rcond} must be < 1 (a fraction of the largest "
                         "singular value)")
    psd = check_bool(psd, "psd")
    return dict(X=X, name=name, kind=kind, sigma=sigma, rank=rank, n_clusters=n_clusters,
                oversample=oversample, landmarks_per_cluster=landmarks_per_cluster,
                rank_policy=rank_policy, threshold=threshold, threshold_kind=threshold_kind,
                psd=bool(psd), kmeans_sample=kmeans_sample, kmeans_iter=kmeans_iter,
                link_rcond=link_rcond)


def _build(*, X, name, kind, sigma, rank, n_clusters, oversample, landmarks_per_cluster,
           rank_policy, threshold, threshold_kind, psd, kmeans_sample, kmeans_iter, link_rcond,
           rng, n_jobs, n_threads):
    """The steps of :func:`meka` on validated arguments (inside the caller's thread budget)."""
    timings = {}
    start = time.perf_counter()
    Xc, _ = _centred_for_accuracy(kind, X, X)
    shift = None if Xc is X else X[0] - Xc[0]
    centroids, labels = _cluster(Xc, n_clusters, kmeans_sample, kmeans_iter, rng, n_threads)
    c = centroids.shape[0]
    perm = np.argsort(labels, kind="stable")
    Xs = np.ascontiguousarray(Xc[perm])
    del Xc      # the centred copy (if one was made) is not needed beside the sorted one
    starts = np.zeros(c + 1, dtype=np.intp)
    starts[1:] = np.cumsum(np.bincount(labels, minlength=c))
    timings["cluster"] = time.perf_counter() - start

    start = time.perf_counter()
    Zl, Fl, ranks = _landmark_bases(kind, sigma, Xs, starts, rank, rank_policy,
                                    landmarks_per_cluster, rng, n_threads)
    sizes = np.diff(starts)
    k_starts = np.zeros(c + 1, dtype=np.intp)
    k_starts[1:] = np.cumsum(ranks)
    z_starts = np.zeros(c + 1, dtype=np.intp)
    z_starts[1:] = np.cumsum([z.shape[0] for z in Zl])
    f_off = np.zeros(c + 1, dtype=np.intp)
    f_off[1:] = np.cumsum([f.size for f in Fl])
    w_off = np.zeros(c + 1, dtype=np.intp)
    w_off[1:] = np.cumsum(sizes * ranks)
    Z = np.ascontiguousarray(np.concatenate(Zl))
    F = np.ascontiguousarray(np.concatenate([f.ravel() for f in Fl]))
    W = np.zeros(int(w_off[-1]))
    with blas_threads(1):
        status = _meka.fill_bases(kind, sigma, Xs, starts, Z, z_starts, F, f_off, k_starts, W,
                                  w_off, n_threads)
    _check_status(status, "bases")
    timings["bases"] = time.perf_counter() - start

    start = time.perf_counter()
    K = int(k_starts[-1])
    L = np.eye(K)
    pairs = np.array([(s, t) for s in range(c) for t in range(s + 1, c)],
                     dtype=np.intp).reshape(-1, 2)
    zero = _zeroed_pairs(kind, sigma, centroids, pairs, threshold, threshold_kind, n_threads)
    fitted = np.ascontiguousarray(pairs[~zero])
    samples, offsets = _link_samples(starts, ranks, fitted, oversample, rng)
    link_ranks = np.zeros(max(len(fitted), 1), dtype=np.intc)
    with blas_threads(1):
        status = _meka.fill_links(kind, sigma, Xs, starts, W, w_off, k_starts, fitted, samples,
                                  offsets, link_rcond, L, link_ranks, n_threads)
    _check_status(status, "link blocks")
    timings["links"] = time.perf_counter() - start

    approx = MekaApproximation(
        X_sorted=Xs, perm=perm, starts=starts, centroids=centroids, Z=Z, z_starts=z_starts, F=F,
        f_off=f_off, k_starts=k_starts, W=W, w_off=w_off, L=L,
        zeroed_pairs=np.ascontiguousarray(pairs[zero]), kernel=name, kind=kind, sigma=sigma,
        shift=shift, timings=timings, psd=False, n_jobs=n_jobs)
    if psd:
        start = time.perf_counter()
        approx._make_psd()
        timings["psd"] = time.perf_counter() - start
    return approx
