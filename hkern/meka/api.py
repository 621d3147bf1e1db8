"""The public face of MEKA's approximation: :func:`meka` builds G~ ~ W L W^T of the kernel
matrix, :func:`meka_peak_bytes` estimates the memory it needs.

The construction is split by step: ``_cluster`` (k-means), ``_bases`` (per-cluster Nystrom
bases), ``_links`` (which pairs are linked, on which rows), ``_build`` (the arguments checked and
the steps run) and ``approximation`` (the object built, :class:`MekaApproximation`).
"""
from __future__ import annotations

import math

from .._progress import Progress
from .._threads import budget_threads, budgeted
from .._validation import check_seed, document_sigma
from ._build import RANK_POLICIES, THRESHOLD_KINDS, build, check_peak, checked_arguments
from ._links import LINK_RCOND
from .approximation import MekaApproximation

# MekaApproximation is named here too: the API reference documents it as
# hkern.meka.api.MekaApproximation.
__all__ = ["LINK_RCOND", "N_CLUSTERS_DEFAULT", "RANK_DEFAULT", "RANK_POLICIES", "THRESHOLD_KINDS",
           "MekaApproximation", "meka", "meka_peak_bytes"]

# Defaults of r and n_clusters (meka, fit_meka and the estimators): the settings of the UCI
# runs on the MEKA results page, a total rank of about r * n_clusters = 640.
RANK_DEFAULT = 64
N_CLUSTERS_DEFAULT = 10


@budgeted
@document_sigma
def meka(X, r=RANK_DEFAULT, *, n_clusters=N_CLUSTERS_DEFAULT, kernel="gaussian", sigma=1.0,
         seed=None, n_jobs=None, oversample=2.0, landmarks_per_cluster=None,
         rank_policy="uniform", threshold=0.0, threshold_kind="fraction", psd=False,
         kmeans_sample=20000, kmeans_iter=10, link_rcond=LINK_RCOND, verbose=False,
         max_memory=None):
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
    r : int, default=64
        k, the rank of each cluster's basis (total rank about ``r * n_clusters``), as in
        the paper; see ``rank_policy``.  Above n it is reduced to n with a warning.
    n_clusters : int, default=10
        c, 1 <= c <= n (and c <= ``kmeans_sample``).  The defaults are the settings of the
        UCI runs in the MEKA results.
    kernel : str
        See :func:`hkern.kernel_matrix`.  The paper's Gaussian exp(-gamma ||x-y||^2) is
        ``sigma = 1 / sqrt(2 gamma)``.
    {sigma}
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
    verbose : bool, default=False
        Print one line per step (k-means, the landmark bases, the link blocks, the PSD
        projection) with the seconds since the call started.
    max_memory : int, float or None
        Largest peak memory (bytes) the call may use; None (default) is the memory available
        now.  The peak is estimated from n, d, r, n_clusters and kmeans_sample (see
        :func:`meka_peak_bytes`) before anything large is allocated.

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
    args = checked_arguments(X, r, n_clusters, kernel=kernel, sigma=sigma, oversample=oversample,
                             landmarks_per_cluster=landmarks_per_cluster,
                             rank_policy=rank_policy, threshold=threshold,
                             threshold_kind=threshold_kind, psd=psd, kmeans_sample=kmeans_sample,
                             kmeans_iter=kmeans_iter, link_rcond=link_rcond,
                             max_memory=max_memory)
    rng = check_seed(seed)
    progress = Progress("meka", verbose)
    check_peak(meka_peak_bytes(args, budget_threads()), max_memory, args, "meka")
    return build(rng=rng, n_jobs=n_jobs, progress=progress, **args)


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
