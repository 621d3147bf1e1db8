"""The paper's baselines on the SLKL candidate set: uniform weights (Unif) and KRR on S (KRRM).

KRRn, KRR on all n points, is :func:`hkern.fit_exact` with the same kernel and lam.
"""
from __future__ import annotations

import numpy as np

from .._memory import check_memory
from .._model import prepare_fit
from .._parameters import check_parameter
from .._probabilities import calibrates_probabilities
from .._threads import blas_threads, budget_threads, budgeted
from .._validation import check_seed
from ..exact import ExactKRR, fit_exact
from ..hyperparameters import selects_hyperparameters
from ._candidates import draw_candidates, holdout_rows
from ._core import solve_fixed_weights
from .api import OutputFit, _candidate_scale, assemble_model, candidate_columns, target_scale

__all__ = ["CandidateKRR", "fit_slkl_krrm", "fit_slkl_unif"]


class CandidateKRR(ExactKRR):
    """Exact KRR trained on the M candidate rows only (the paper's KRRM baseline).

    Attributes
    ----------
    candidates_ : ndarray (M,)
        The rows of the training X the model was fitted on (``X_fit_`` is ``X[candidates_]``;
        ``log_marginal_likelihood()`` is that of the targets of these rows).
    """

    def __init__(self, X, alpha, candidates, **kw):
        super().__init__(X, alpha, **kw)
        self.candidates_ = candidates


def _unif_bytes(n, d, M, k):
    """Peak bytes of fit_slkl_unif beyond X and y."""
    return (8 * n * k                   # Y, the targets as an (n, k) matrix
            + 8 * n * M                 # the M candidate columns (M x n)
            + 8 * (n + M) * (d + 1)     # centred X, X[S] and squared norms (kernel evaluation)
            + 8 * M * M                 # D^-1 + C^T C / lam and its Cholesky factor (in place)
            + 8 * (4 * M + n) * k)      # q, x, beta, weights per output; the scaled target


@calibrates_probabilities(holdout_rows=holdout_rows)
@selects_hyperparameters("holdout", holdout_rows=holdout_rows)
@budgeted
def fit_slkl_unif(X, y, r=256, *, kernel="gaussian", sigma="ard", lam="auto", task="regression",
                  seed=None, n_jobs=None, mu=1.0, candidates=None, verbose=False,
                  max_memory=None):
    r"""The paper's "Unif" baseline: KRR with the kernel :math:`\bar\mu \sum_{m\in S} c_m c_m^T`.

    The same M rank-1 Nystrom kernels as :func:`hkern.fit_slkl` (the same seed gives the same
    S) with every weight equal to ``mu`` instead of learned; the paper does not give the value
    (doc/specs/slkl.md, section 5 H), the default is 1.

    Parameters
    ----------
    X, y, r, kernel, sigma, lam, task, seed, n_jobs, candidates, criterion, verbose
        As in :func:`hkern.fit_slkl` (hyperparameters selected by hold-out error).
    mu : float
        The common weight, > 0.
    max_memory : int or None
        Most bytes the fit may allocate; None (default): the memory available when the call
        starts.  The fit needs about 8 n M + 8 M^2 bytes (the M candidate columns and the
        M x M system).

    Returns
    -------
    hkern.slkl.SlklModel
        With all M candidates active, ``objective_`` one row (1, k) holding
        :math:`y^T (I + \tilde K/\lambda)^{-1} y` of each output, ``n_iter_`` zeros and
        ``converged_`` True.

    Raises
    ------
    ValueError
        For invalid input, or when :math:`D^{-1} + C^T C/\lambda` is not positive definite
        to working precision (mu too large for lam).
    hkern.MemoryLimitError
        A ValueError and MemoryError: the estimate exceeds ``max_memory`` (raised before
        anything large is allocated).

    Notes
    -----
    The coefficients solve :math:`(D^{-1} + C^T C/\lambda)\,x = C^T y`, :math:`\beta = x/\lambda`,
    by hkern's tiled Cholesky: the same result for any ``n_jobs``.

    Examples
    --------
    >>> import numpy as np, hkern
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(300, 2)); y = np.sin(X[:, 0])
    >>> model = hkern.fit_slkl_unif(X, y, r=50, seed=0)
    >>> model.m0_, float(np.mean((model.predict(X) - y) ** 2)) < 0.05
    (50, True)
    """
    # y is centred, as for every fit (a constant mean plus the model): the l1 penalty is
    # relative to the centred targets' mean square, their variance
    inputs = prepare_fit(X, y, kernel=kernel, sigma=sigma, lam=lam, task=task,
                         max_memory=max_memory)
    X, Y = inputs.X, inputs.Y
    mu = check_parameter("mu", mu)
    rng = check_seed(seed)
    (n, d), k = X.shape, Y.shape[1]
    S = draw_candidates(n, r, rng, candidates)
    M = len(S)
    check_memory(_unif_bytes(n, d, M, k) + inputs.scaled_bytes, max_memory,
                 what=f"fit_slkl_unif with n={n}, r={M}",
                 fix="choose a smaller r")
    weights = np.full(M, mu)
    fits = []
    n_threads = budget_threads()
    with blas_threads(1):
        cols = candidate_columns(X, S, inputs.kind, inputs.bandwidth, n_threads)
        for j in range(k):
            # y / s exactly (s a power of two): no overflow in ||y||^2 for |y| up to 1e150.
            s = target_scale(Y[:, j])
            y_s = np.ascontiguousarray(Y[:, j] / s)
            x, q, info = solve_fixed_weights(cols, weights, y_s, inputs.lam, n_threads)
            if info:
                raise ValueError(
                    f"fit_slkl_unif: D^-1 + C^T C / lam (M={M}) is not positive definite to "
                    f"working precision (LAPACK info={info}): mu={mu:g} is too large for "
                    f"lam={inputs.lam:g} with these nearly dependent columns; use a smaller mu "
                    "or a larger lam")
            # objective_ reports F with nu = 0: the data-fit term y^T (I + K~/lam)^{-1} y.
            F = (float(y_s @ y_s) - float(q @ x) / inputs.lam) * s * s
            beta = x / inputs.lam * _candidate_scale(S) * s
            fits.append(OutputFit(weights.copy(), np.arange(M), beta, np.array([F]), 0, True))
    return assemble_model(fits, inputs, S, 0.0, n_jobs)


@calibrates_probabilities(holdout_rows=holdout_rows)
@selects_hyperparameters("holdout", holdout_rows=holdout_rows)
def fit_slkl_krrm(X, y, r=256, *, kernel="gaussian", sigma="ard", lam="auto", task="regression",
                  seed=None, n_jobs=None, candidates=None, verbose=False, max_memory=None):
    """The paper's "KRRM" baseline: exact KRR trained on the M candidate points only.

    Parameters
    ----------
    X, y, r, kernel, sigma, lam, task, seed, n_jobs, candidates, criterion, verbose
        As in :func:`hkern.fit_slkl` (the same seed gives the same S; hyperparameters selected
        by hold-out error).
    max_memory : int or None
        Most bytes the fit may allocate; None (default): the memory available when the call
        starts.  The fit needs about 8 M^2 bytes (the M x M kernel matrix).

    Returns
    -------
    CandidateKRR
        An :class:`~hkern.ExactKRR` on the candidate rows, with ``candidates_`` (the rows of X
        used).

    Raises
    ------
    ValueError
        For invalid input.
    hkern.MemoryLimitError
        A ValueError and MemoryError: the estimate exceeds ``max_memory`` (raised before
        anything large is allocated).

    Examples
    --------
    >>> import numpy as np, hkern
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(300, 2)); y = np.sin(X[:, 0])
    >>> model = hkern.fit_slkl_krrm(X, y, r=100, lam=1e-2, seed=0)
    >>> model.X_fit_.shape, float(np.mean((model.predict(X) - y) ** 2)) < 0.01
    ((100, 2), True)
    """
    inputs = prepare_fit(X, y, kernel=kernel, sigma=sigma, lam=lam, task=task,
                         max_memory=max_memory)
    X, Y = inputs.X, inputs.Y
    rng = check_seed(seed)
    (n, d), k = X.shape, Y.shape[1]
    S = draw_candidates(n, r, rng, candidates)
    M = len(S)
    # X[S] and y[S] (8 M (d + k)), then fit_exact's kernel matrix, factorised in place, and
    # its dual coefficients (8 M^2 + 16 M k).
    check_memory(8 * M * (d + k) + 8 * M * M + 16 * M * k + inputs.scaled_bytes, max_memory,
                 what=f"fit_slkl_krrm with r={M} (the M x M kernel matrix)",
                 fix="choose a smaller r")
    y_rows = np.asarray(y)[S]
    # fit_exact does the work, in the thread budget of n_jobs.
    model = fit_exact(X[S], y_rows, kernel=inputs.kernel, sigma=inputs.bandwidth, lam=inputs.lam,
                      task=task, n_jobs=n_jobs, max_memory=max_memory)
    # Regression: fit_exact's model of y[S], its mean and the GP of y[S] minus it.  (A
    # classifier keeps the labels of all of y: the candidates may miss a class.)
    encoding = model.encoding_ if inputs.encoding.task == "regression" else inputs.encoding
    return CandidateKRR(model.X_fit_, model.dual_coef_, S, evidence=model._evidence,
                        **dict(inputs.model_params(n_jobs), encoding=encoding))
