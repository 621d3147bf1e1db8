"""Kernel ridge regression on a MEKA approximation: (G~ + lam I) alpha = y."""
from __future__ import annotations

import numpy as np

from .. import _linalg
from .._model import KernelRidgeModel, prepare_fit
from .._parameters import check_parameter, choices_of
from .._probabilities import calibrates_probabilities
from .._progress import Progress
from .._threads import budget_threads, budgeted
from .._validation import check_seed, check_solver
from ..hyperparameters import selects_hyperparameters
from ..kernels._api import _kernel_matvec_trusted
from ..solvers import block_pcg
from ._build import build, check_peak, check_sizes, checked_arguments
from ._links import LINK_RCOND
from .api import N_CLUSTERS_DEFAULT, RANK_DEFAULT, meka_peak_bytes

__all__ = ["SOLVERS", "MekaKRR", "fit_meka", "fit_meka_peak_bytes"]

SOLVERS = choices_of("solver", "fit_meka")
FORMER_SOLVERS = {"cg": "pcg"}


class MekaKRR(KernelRidgeModel):
    """KRR on G~ = W L W^T.  A new point x goes to its nearest centroid s and gets
    f(x) = w(x)^T beta_s = K(x, Z_s) gamma_s, where w(x) = K(x, Z_s) F^(s) are its Nystrom
    features, beta = L W^T alpha and gamma_s = F^(s) beta_s: O(m_s d) per point.

    Attributes
    ----------
    approximation_ : MekaApproximation
        The kernel approximation the model was fitted on.
    dual_coef_ : ndarray (n, k)
        alpha, in the training points' original order.
    coef_ : ndarray (M, k)
        gamma_s of every cluster, stacked in cluster order (M = sum m_s): one row per landmark,
        those of cluster s (``approximation_.landmarks(s)``, in that order) after those of the
        clusters before it.
    n_iter_ : ndarray (k,) of int, or None
        CG iterations per output (per class for a classifier) until its residual met ``tol``
        (0 for an all-zero column); None for the direct solver, which does not iterate.
    """

    def __init__(self, approximation, dual_coef, coef, n_iter, **kw):
        super().__init__(**kw)
        self.approximation_ = approximation
        self.dual_coef_ = dual_coef
        self.coef_ = coef
        self.n_iter_ = n_iter

    def _scores(self, X):       # inside the model's thread budget (KernelRidgeModel)
        n_threads = budget_threads()
        G = self.approximation_
        Xs, labels = G._prepare_new(X)
        out = np.zeros((X.shape[0], self.coef_.shape[1]))
        for s in range(G.n_clusters_):
            sel = np.flatnonzero(labels == s)
            if len(sel):
                rows = slice(G._z_starts[s], G._z_starts[s + 1])
                out[sel] = _kernel_matvec_trusted(self._kind, self._bandwidth,
                                                  np.ascontiguousarray(Xs[sel]), G._Z[rows],
                                                  self.coef_[rows], n_threads)
        return out

    @property
    def nbytes(self):
        """Bytes needed to predict: landmarks, gamma_s, centroids (not the training W)."""
        G = self.approximation_
        return int(G._Z.nbytes + G.centroids_.nbytes + self.coef_.nbytes)


def _holdout_rows(arguments, n, rows):
    """The arguments of a fit on the hold-out criterion's training part ``rows`` of the user's
    n rows (see :func:`hkern.hyperparameters.select.selects_hyperparameters`): ``r`` and
    ``n_clusters`` checked against n, with the message of a fit on all the data, and capped at
    ``len(rows)``, so that the values all the data allow are allowed with selection."""
    rank, n_clusters = check_sizes(arguments["r"], arguments["n_clusters"], n)
    m = len(rows)
    return dict(arguments, r=min(rank, m), n_clusters=min(n_clusters, m))


def _shifted_cholesky(Lp, lam):
    """Cholesky factor of L' + lam I, or a ValueError when G~ + lam I is not positive definite.

    The non-zero eigenvalues of G~ = Q L' Q^T are those of L' (Q orthonormal), so G~ + lam I is
    positive definite iff L' + lam I is.  Without this check an indefinite G~ (psd=False with
    sampled links) gives a solution that is silently wrong.
    """
    M = (Lp + Lp.T) / 2.0
    M.flat[::M.shape[0] + 1] += lam
    try:
        return _linalg.cholesky(M)
    except np.linalg.LinAlgError:
        raise ValueError(
            f"G~ + lam I is not positive definite: the MEKA approximation has an eigenvalue "
            f"below -lam = {-lam:g}; fit with psd=True (the default) or a larger lam") from None


def _solve_direct(G, Q, R, chol, Y, lam):
    """alpha = (G~ + lam I)^-1 y and beta with G~ alpha = W beta, in O(n k K + K^3).

    With G~ = Q L' Q^T (Q orthonormal) and c = Q^T y, t = (L' + lam I)^-1 c = Q^T alpha:
    alpha = Q t + (y - Q c) / lam, and beta = L R^T t (W = Q R).  The part of alpha in
    span(Q) is computed directly, never as a difference divided by lam: the earlier
    L^-1-free Woodbury form alpha = lam^-1 [y - W L (lam I + W^T W L)^-1 W^T y] subtracts two
    nearly equal vectors and divides by lam, so its error grew like cond(G~ + lam I)^2 eps;
    on keggundirected (sigma = 10.4, lam = 1e-4, cond ~ 5e8) its residual was 83% of ||y||.
    Here the error is of order cond(G~ + lam I) eps.
    """
    C = G._Wt(Y, basis=Q)
    T = _linalg.cho_solve(chol, C)
    alpha = (Y - G._W_times(C, basis=Q)) / lam + G._W_times(T, basis=Q)
    if R is not None:
        for s, Rs in enumerate(R):
            ks = slice(G._k_starts[s], G._k_starts[s + 1])
            T[ks] = _linalg.matmul(Rs, T[ks], trans_a=True)
    return alpha, _linalg.matmul(G.L_, T)


def _solve_cg(G, Y, lam, tol, max_iter):
    """Conjugate gradients on (G~ + lam I) alpha = y, one independent recursion per column
    (:func:`hkern.solvers.block_pcg`, unpreconditioned).

    Needs G~ + lam I positive definite (psd=True, or lam > |lambda_min(G~)|); a non-positive
    curvature p^T A p raises LinAlgError.  Returns (X, the iteration at which each column's
    residual met tol): a converged column takes no further step, so its count is its own.
    """
    try:
        result = block_pcg(lambda P: G._apply_sorted(P) + lam * P, Y, tol=tol,
                           max_iter=max_iter)
    except np.linalg.LinAlgError:
        raise np.linalg.LinAlgError(
            "CG met non-positive curvature: G~ + lam I is not positive definite; use psd=True "
            "or a larger lam") from None
    if not result.converged.all():
        raise np.linalg.LinAlgError(f"CG did not reach tol={tol} in max_iter={max_iter} "
                                    "iterations; raise max_iter or lam, or use solver='direct'")
    return result.X, result.n_iter


@calibrates_probabilities(holdout_rows=_holdout_rows)
@selects_hyperparameters("holdout", holdout_rows=_holdout_rows)
@budgeted
def fit_meka(X, y, r=RANK_DEFAULT, *, n_clusters=N_CLUSTERS_DEFAULT, kernel="gaussian",
             sigma="ard", lam="auto", task="regression", seed=None, n_jobs=None, solver="direct",
             tol=1e-3, max_iter=1000, psd=True, oversample=2.0, landmarks_per_cluster=None,
             rank_policy="uniform", threshold=0.0, threshold_kind="fraction",
             kmeans_sample=20000, kmeans_iter=10, link_rcond=LINK_RCOND, verbose=False,
             max_memory=None):
    """Kernel ridge regression on the MEKA approximation: (G~ + lam I) alpha = y.

    Parameters
    ----------
    X : array_like (n, d)
    y : array_like (n,) or (n, k)
        Targets, or class labels for ``task="classification"`` (one-vs-rest, one solve).
    r : int, default=64
        Per-cluster rank k (see :func:`hkern.meka`).
    n_clusters : int, default=10
        Number of clusters c.
    lam : float or "auto", default="auto"
        Ridge regularisation, > 0 (or selected).  G~ + lam I must be positive definite; it is
        checked (the K x K Cholesky the direct solver uses anyway) and a ValueError says so
        otherwise.
    kernel : see :func:`hkern.kernel_matrix`.
    {sigma}
    solver : {"direct", "pcg"}
        ``"direct"``: with the blockwise orthonormal form G~ = Q L' Q^T (Q = W after the PSD
        fix), alpha = Q (L' + lam I)^-1 Q^T y + (y - Q Q^T y) / lam: one K x K Cholesky,
        O(n k K + K^3), accurate to about cond(G~ + lam I) eps.
        ``"pcg"``: conjugate gradients with the O(nk + K^2) matvec, unpreconditioned (as the
        paper; its former name ``"cg"`` still works, with a FutureWarning).
    tol, max_iter : float, int
        CG relative residual tolerance and iteration limit.
    task : {"regression", "classification"}
    seed : None, int or numpy.random.Generator
    n_jobs : int or None
        Threads (OpenMP and BLAS); results are bitwise identical for any value.  None: the
        CPUs available, bounded by OMP_NUM_THREADS and an enclosing threadpoolctl limit.
    {verbose}
    max_memory : int, float or None
        Largest peak memory (bytes) the fit may use; None (default) is the memory available
        now.  Estimated before anything large is allocated: the MEKA approximation (see
        :func:`hkern.meka`) plus the K x K factorisations and a few n x k_out vectors.
    psd : bool, default=True
        The PSD fix of :func:`hkern.meka`, on by default here (:func:`hkern.meka` defaults to
        False): with sampled links G~ is in general indefinite, and KRR on an indefinite
        G~ + lam I is meaningless.
    oversample, landmarks_per_cluster, rank_policy, threshold, threshold_kind
        The construction of G~, as in :func:`hkern.meka`.
    kmeans_sample, kmeans_iter, link_rcond
        The construction of G~, as in :func:`hkern.meka`.

    Returns
    -------
    MekaKRR

    Raises
    ------
    ValueError
        For invalid arguments, or when G~ + lam I is not positive definite.
    hkern.MemoryLimitError
        (a ValueError and a MemoryError) when the estimated peak exceeds ``max_memory``.

    Notes
    -----
    Prediction assigns each new point to its nearest centroid s and evaluates
    f(x) = K(x, Z_s) gamma_s: O(m (d + k)) per point; on training points it equals
    (G~ alpha)_i.

    Examples
    --------
    >>> import numpy as np, hkern
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(2000, 3)); y = np.sin(X[:, 0])
    >>> model = hkern.fit_meka(X, y, r=30, n_clusters=5, lam=1e-3, seed=0)
    >>> float(np.sqrt(np.mean((model.predict(X) - y) ** 2))) < 0.05
    True
    """
    inputs = prepare_fit(X, y, kernel=kernel, sigma=sigma, lam=lam, task=task,
                         max_memory=max_memory)
    X, Y = inputs.X, inputs.Y
    solver = check_solver(solver, "fit_meka", FORMER_SOLVERS)
    tol, max_iter = check_parameter("tol", tol), check_parameter("max_iter", max_iter)
    args = checked_arguments(X, r, n_clusters, kernel=inputs.kernel, sigma=inputs.bandwidth,
                             oversample=oversample, landmarks_per_cluster=landmarks_per_cluster,
                             rank_policy=rank_policy, threshold=threshold,
                             threshold_kind=threshold_kind, psd=psd, kmeans_sample=kmeans_sample,
                             kmeans_iter=kmeans_iter, link_rcond=link_rcond)
    # X is already divided by the lengthscales; the approximation scales new points as the
    # model does, so that approximation_.features(X) takes the user's coordinates too.
    args["lengthscales"] = inputs.lengthscales
    rng = check_seed(seed)
    check_peak(fit_meka_peak_bytes(args, Y.shape[1], budget_threads()), max_memory, args,
               "fit_meka")
    G = build(rng=rng, n_jobs=n_jobs, progress=Progress("fit_meka", verbose), **args)
    alpha, beta, n_iter = _solve(G, Y, inputs.lam, solver, tol, max_iter)
    coef = np.empty((G._z_starts[-1], Y.shape[1]))
    for s in range(G.n_clusters_):
        coef[G._z_starts[s]:G._z_starts[s + 1]] = _linalg.matmul(
            G._feature_map(s), beta[G._k_starts[s]:G._k_starts[s + 1]])
    dual = np.empty_like(alpha)
    dual[G._perm] = alpha
    return MekaKRR(G, dual, coef, n_iter, **inputs.model_params(n_jobs))


def fit_meka_peak_bytes(args, n_outputs, n_threads):
    """Estimated peak bytes of :func:`fit_meka` beyond X and y, for its checked arguments.

    The larger of the MEKA construction (:func:`hkern.meka.api.meka_peak_bytes`) and the solve:
    what the approximation keeps (sorted X n d, W ~ n k, L K^2), three more K x K matrices
    (L' symmetrised, its shifted copy, the Cholesky factor), the orthonormal copy of W and L'
    when the PSD fix is off (n k + K^2), and a handful of n x k_out vectors (sorted targets,
    residuals, the two halves of alpha; CG: iterate, residual, direction and product).
    """
    n, d = args["X"].shape
    k = min(args["rank"], n, args["landmarks_per_cluster"] or 2 * args["rank"])
    K = min(n, args["n_clusters"] * k)
    kept = n * d + n * k + K * K
    solve = 3 * K * K + (0 if args["psd"] else n * k + K * K) + 6 * n * n_outputs
    return max(meka_peak_bytes(args, n_threads), 8 * (kept + solve))


def _solve(G, Y, lam, solver, tol, max_iter):
    """(alpha sorted by cluster, beta = L W^T alpha, CG iterations per column or None) for the
    targets Y."""
    Q, R, Lp = G._orthonormal_basis()
    chol = _shifted_cholesky(Lp, lam)
    Ys = np.ascontiguousarray(Y[G._perm])
    if solver == "direct":
        alpha, beta = _solve_direct(G, Q, R, chol, Ys, lam)
        n_iter = None
    else:
        del Q       # CG needs only products with G~; the check above needed the factor
        alpha, n_iter = _solve_cg(G, Ys, lam, tol, max_iter)
        beta = _linalg.matmul(G.L_, G._Wt(np.ascontiguousarray(alpha)))
    return alpha, beta, n_iter
