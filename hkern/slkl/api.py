"""Python face of SLKL: validation, the descent driver and the fitted model."""
from __future__ import annotations

import numpy as np

from .._threads import blas_threads, resolve_n_jobs
from .._validation import check_choice, check_int, check_positive, check_seed
from ..baselines._model import KernelRidgeModel, prepare_fit
from ..kernels._api import (
    _centred_for_accuracy,
    _kernel_matrix_trusted,
    _kernel_matvec_trusted,
)
from ._candidates import draw_candidates
from ._core import SlklCore

__all__ = ["STEPS", "SlklModel", "fit_slkl"]

STEPS = {"exact": 0, "newton": 1, "paper": 2}
_RUN_DONE, _RUN_STOPPED, _RUN_GROW, _RUN_FAILED = 0, 1, 2, 3
# Coordinates are drawn this many at a time (numpy Generator), then stepped through in nogil.
_DRAW_BATCH = 4096
# Initial room for active columns; doubled when full (memory O(n m0 + m0^2), not O(n M)).
_INITIAL_CAPACITY = 64


class SlklModel(KernelRidgeModel):
    """KRR on a learned conical combination of rank-1 Nystrom kernels (SLKL).

    f(x) = sum over active landmarks m of beta_m k(x_m, x): prediction evaluates the kernel at
    the active landmarks only.

    Attributes
    ----------
    candidates_ : ndarray (M,)
        Rows of the training X forming the candidate set S (sorted).
    weights_ : ndarray (M,) or (M, k)
        mu, one weight per candidate (one column per output / one-vs-rest class).
    active_ : ndarray (m0,)
        Rows of the training X with a positive weight for some output (sorted).
    landmarks_ : ndarray (m0, d)
        ``X[active_]``.
    coef_ : ndarray (m0, k)
        beta.
    objective_ : ndarray (n_iter + 1,) or list of them
        F after each iteration, F[0] = ||y||^2 (one array per output for k > 1).
    n_iter_ : int or list of int
        Coordinate steps taken.
    converged_ : bool or list of bool
        Whether the stopping rule (and the KKT test when requested) ended the descent, rather
        than max_iter.
    nu : float
        The l1 penalty.

    Examples
    --------
    Returned by :func:`fit_slkl`; only the active landmarks enter a prediction:

    >>> import numpy as np
    >>> import hkern
    >>> rng = np.random.default_rng(0)
    >>> X = rng.uniform(-5, 5, size=(300, 2))
    >>> y = np.sinc(np.linalg.norm(X, axis=1) / np.pi)
    >>> model = hkern.fit_slkl(X, y, n_candidates=60, nu=1e-3, sigma=1.0, seed=0)
    >>> K = hkern.kernel_matrix(X[:5], model.landmarks_, sigma=1.0)
    >>> bool(np.allclose(model.predict(X[:5]), K @ model.coef_[:, 0]))
    True
    """

    def __init__(self, candidates, weights, active, landmarks, coef, objective, n_iter,
                 converged, nu, **kw):
        super().__init__(**kw)
        self.candidates_ = candidates
        self.weights_ = weights
        self.active_ = active
        self.landmarks_ = landmarks
        self.coef_ = coef
        self.objective_ = objective
        self.n_iter_ = n_iter
        self.converged_ = converged
        self.nu = nu

    @property
    def m0_(self):
        """Number of active landmarks (union over outputs)."""
        return len(self.active_)

    def _scores(self, X):
        if self.m0_ == 0:
            return np.zeros((X.shape[0], self.coef_.shape[1]))
        return _kernel_matvec_trusted(self._kind, self.sigma, X, self.landmarks_, self.coef_,
                                      self._threads())


def _candidate_scale(S):
    """1 / sqrt(k(x_m, x_m)); every hkern kernel has k(x, x) = 1 (kernels/_kernels.pxd)."""
    return np.ones(len(S))


def make_cores(X, Y, S, kind, sigma, lam, nu, step_rule, precompute, refresh, n_threads):
    """One SlklCore per column of Y, sharing the candidate columns when precomputed."""
    scale = _candidate_scale(S)
    if precompute:
        cols = _kernel_matrix_trusted(kind, sigma, X[S], X, n_threads)
        cols *= scale[:, None]
        extra = {"cols": cols}
    else:
        Xc = np.ascontiguousarray(_centred_for_accuracy(kind, X, X)[0])
        extra = {"X": Xc, "xsq": np.einsum("ij,ij->i", Xc, Xc), "kind": kind, "sigma": sigma}
    return [SlklCore(np.ascontiguousarray(Y[:, j]), lam, nu, step_rule, scale, S,
                     capacity=_INITIAL_CAPACITY, refresh_every=refresh, **extra)
            for j in range(Y.shape[1])]


def descend(core, rng, max_iter, tol, kkt_tol):
    """Stochastic coordinate descent until the stopping rule (spec section 5 D) or max_iter.

    Stops at the first k > M with F(k - M) - F(k) < tol F(k - M); with kkt_tol, also requires
    the KKT violation (``SlklCore.kkt_violation``) <= kkt_tol, tested at most once every M
    steps.  tol=None with kkt_tol stops on the KKT test alone.  Returns (F history, steps,
    converged).
    """
    from numpy.linalg import LinAlgError

    M = core.M
    hist = np.empty(max_iter + 1)
    hist[0] = core.F
    rule = 1 if tol is not None else (2 if kkt_tol is not None else 0)
    tol_value = 0.0 if tol is None else tol
    k, min_stop, converged = 0, 0, False
    while k < max_iter and not converged:
        draws = rng.integers(0, M, size=min(_DRAW_BATCH, max_iter - k)).astype(np.intp)
        i = 0
        while i < len(draws):
            done, status = core.run(draws[i:], hist, k, rule, tol_value, M, min_stop)
            i += done
            k += done
            if status == _RUN_GROW:
                core.grow(2 * core.cap)
            elif status == _RUN_FAILED:
                raise LinAlgError(f"SLKL: the Cholesky refresh of G failed (info="
                                  f"{core.last_info}) with m0={core.m0} active columns")
            elif status == _RUN_STOPPED:
                if kkt_tol is None or core.kkt_violation() <= kkt_tol:
                    converged = True
                    break
                min_stop = k + M
            else:
                break
    return hist[:k + 1].copy(), k, converged


def assemble_model(cores, X, S, histories, n_iters, converged, encoding, name, kind, sigma, lam,
                   nu, n_jobs):
    """The fitted model from the final cores: union of active landmarks, beta per output."""
    k = len(cores)
    weights = np.column_stack([c.weights for c in cores])
    used = [c.coefficients() for c in cores]
    active_cand = np.unique(np.concatenate([a for a, _ in used])).astype(np.intp)
    coef = np.zeros((len(active_cand), k))
    for j, (act, beta) in enumerate(used):
        coef[np.searchsorted(active_cand, act), j] = beta
    active = S[active_cand]
    single = encoding.squeeze
    return SlklModel(
        S, weights[:, 0] if single else weights, active, np.ascontiguousarray(X[active]), coef,
        histories[0] if single else histories, n_iters[0] if single else n_iters,
        converged[0] if single else converged, nu,
        kernel=name, kind=kind, sigma=sigma, lam=lam, n_features=X.shape[1], encoding=encoding,
        n_jobs=n_jobs)


def fit_slkl(X, y, n_candidates=256, nu=1e-2, lam=1.0, kernel="gaussian", sigma=1.0,
             step="exact", tol=1e-4, max_iter=None, kkt_tol=None, precompute_columns=True,
             refresh=1000, candidates=None, task="regression", seed=None, n_jobs=None):
    r"""Stochastic low-rank kernel learning (Machart et al.): KRR on a learned sparse kernel.

    The kernel is the conical combination :math:`\tilde K(\mu) = \sum_{m \in S} \mu_m c_m
    c_m^T` of rank-1 Nystrom kernels of M candidate landmarks S (uniform without replacement),
    :math:`c_m = K(:, m) / \sqrt{k(x_m, x_m)}`.  The weights solve

    .. math:: \min_{\mu \ge 0} F(\mu) = y^T (I + \tilde K(\mu)/\lambda)^{-1} y + \nu \|\mu\|_1

    by stochastic coordinate descent (coordinates uniform with replacement), from
    :math:`\mu = 0`, in O(n m0 + m0^2) per step with m0 the number of non-zero weights; the
    l1 penalty makes most weights zero, and prediction uses the m0 active landmarks only.

    Parameters
    ----------
    X : array_like (n, d)
    y : array_like (n,) or (n, k)
        Targets, or class labels for ``task="classification"`` (one-vs-rest: one SLKL problem
        per class on the same candidates, prediction by argmax).
    n_candidates : int
        M, the number of candidate landmarks, 1 <= M <= n (ignored when ``candidates`` is
        given).
    nu : float
        l1 penalty, > 0; larger gives fewer active landmarks.  Only lam * nu matters
        (spec section 3): keep lam = 1 and tune nu.
    lam : float
        Ridge parameter, > 0 (the paper uses 1).
    kernel : str
        See :func:`hkern.kernel_matrix`.
    sigma : float
        Bandwidth, > 0.  The paper's Gaussian width sigma^2 is hkern's sigma^2 with
        :math:`k = \exp(-\|x - x'\|^2 / (2\sigma^2))` (spec section 5 C).
    step : {"exact", "newton", "paper"}
        Coordinate update.  "exact" minimises F along the coordinate in closed form
        (:math:`\mu_m \leftarrow \max(0, \mu_m + (|a_m|\sqrt{\lambda/\nu} - 1)/b_m)`) and never
        increases F; "newton" is the projected Newton step with
        :math:`\partial^2_m F = 2\lambda a_m^2 b_m`; "paper" is Algorithm 2 as printed
        (:math:`h = \lambda a^2 b`, twice the Newton step), for reproduction.
    tol : float or None
        Stop at the first k > M with :math:`F(\mu^{k-M}) - F(\mu^k) < tol\,F(\mu^{k-M})`
        (the paper's rule with its sign corrected).  None: no such rule.
    max_iter : int or None
        Most coordinate steps; default 200 M.
    kkt_tol : float or None
        Also require :math:`\max_m |\lambda a_m^2 - \nu|` over active and
        :math:`\max(0, \lambda a_m^2 - \nu)` over inactive candidates to be <= kkt_tol
        (checked at most every M steps, cost of M steps each).  With ``tol=None`` the KKT test
        alone stops the descent.
    precompute_columns : bool
        True: compute the M columns once (8 n M bytes).  False: compute a column when it is
        drawn and keep only the m0 active ones (8 n m0 bytes, one kernel row per step).
    refresh : int
        Rebuild G = (D^{-1} + C^T C / lam)^{-1} by Cholesky every this many weight changes,
        bounding the drift of the rank-1 updates (0: only when an update's pivot fails).
    candidates : array of int, optional
        Rows of X to use as S instead of a random draw.
    task : {"regression", "classification"}
    seed : None, int or numpy.random.Generator
        Draws S and the coordinates; the same seed gives the same model.
    n_jobs : int or None
        BLAS threads; None uses every core.

    Returns
    -------
    SlklModel

    Raises
    ------
    ValueError
        For nu <= 0, lam <= 0, M > n, an unknown step, and the other invalid inputs.

    Notes
    -----
    Spec: ``shared/spec/slkl.md``.  The m0 x m0 matrix :math:`G = (D^{-1} + C^TC/\lambda)^{-1}`
    is updated by Sherman-Morrison (weight change), rank-1 downdate and swap-delete (weight to
    zero) and block inversion (new weight); F is tracked in O(1) per step.

    References
    ----------
    P. Machart, T. Peel, S. Anthoine, L. Ralaivola, H. Glotin, "Stochastic Low-Rank Kernel
    Learning for Regression", ICML 2011.

    Examples
    --------
    >>> import numpy as np, hkern
    >>> rng = np.random.default_rng(0)
    >>> X = rng.uniform(-5, 5, size=(400, 2)); r = np.linalg.norm(X, axis=1)
    >>> y = np.sin(r) / r
    >>> model = hkern.fit_slkl(X, y, n_candidates=100, nu=1e-3, sigma=1.0, seed=0)
    >>> bool(np.all(np.diff(model.objective_) <= 1e-12))       # the exact step is monotone
    True
    >>> model.m0_ < 100 and float(np.mean((model.predict(X) - y) ** 2)) < 1e-3
    True
    """
    X, Y, encoding, name, kind, sigma, lam = prepare_fit(X, y, kernel, sigma, lam, task)
    nu = check_positive(nu, "nu", "the l1 penalty on the weights must be positive (try 1e-4 "
                        "to 1; larger gives fewer landmarks)")
    check_choice(step, "step", tuple(STEPS))
    if tol is not None:
        tol = check_positive(tol, "tol", "use tol=None to stop on max_iter or kkt_tol only")
    if kkt_tol is not None:
        kkt_tol = check_positive(kkt_tol, "kkt_tol")
    refresh = check_int(refresh, "refresh", low=0)
    precompute_columns = bool(precompute_columns)
    rng = check_seed(seed)
    n = X.shape[0]
    S = draw_candidates(n, n_candidates, rng, candidates)
    max_iter = 200 * len(S) if max_iter is None else check_int(max_iter, "max_iter", low=1)
    n_threads = resolve_n_jobs(n_jobs)

    cores = make_cores(X, Y, S, kind, sigma, lam, nu, STEPS[step], precompute_columns, refresh,
                       n_threads)
    histories, n_iters, converged = [], [], []
    with blas_threads(n_threads):
        for core in cores:
            h, it, ok = descend(core, rng, max_iter, tol, kkt_tol)
            histories.append(h)
            n_iters.append(it)
            converged.append(ok)
    return assemble_model(cores, X, S, histories, n_iters, converged, encoding, name, kind,
                          sigma, lam, nu, n_jobs)
