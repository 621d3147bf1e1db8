"""The paper's baselines on the SLKL candidate set: uniform weights (Unif) and KRR on S (KRRM).

KRRn, KRR on all n points, is :func:`hkern.fit_exact` with the same kernel and lam.
"""
from __future__ import annotations

import numpy as np
from numpy.linalg import LinAlgError

from .._threads import blas_threads, resolve_n_jobs
from .._validation import check_positive, check_seed
from ..baselines._model import prepare_fit
from ..baselines.exact import fit_exact
from ._candidates import draw_candidates
from .api import assemble_model, make_cores

__all__ = ["fit_slkl_krrm", "fit_slkl_unif"]


def fit_slkl_unif(X, y, n_candidates=256, mu=1.0, lam=1.0, kernel="gaussian", sigma=1.0,
                  candidates=None, task="regression", seed=None, n_jobs=None):
    r"""The paper's "Unif" baseline: KRR with the kernel :math:`\bar\mu \sum_{m\in S} c_m c_m^T`.

    The same M rank-1 Nystrom kernels as :func:`hkern.fit_slkl` (the same seed gives the same
    S) with every weight equal to ``mu`` instead of learned; the paper does not give the value
    (spec section 5 H), the default is 1.

    Parameters
    ----------
    X, y, n_candidates, lam, kernel, sigma, candidates, task, seed, n_jobs
        As in :func:`hkern.fit_slkl`.
    mu : float
        The common weight, > 0.

    Returns
    -------
    hkern.slkl.SlklModel
        With all M candidates active and ``objective_`` the single value F(mu).

    Examples
    --------
    >>> import numpy as np, hkern
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(300, 2)); y = np.sin(X[:, 0])
    >>> model = hkern.fit_slkl_unif(X, y, n_candidates=50, seed=0)
    >>> model.m0_, float(np.mean((model.predict(X) - y) ** 2)) < 0.05
    (50, True)
    """
    X, Y, encoding, name, kind, sigma, lam = prepare_fit(X, y, kernel, sigma, lam, task)
    mu = check_positive(mu, "mu", "the uniform weight must be positive")
    rng = check_seed(seed)
    S = draw_candidates(X.shape[0], n_candidates, rng, candidates)
    n_threads = resolve_n_jobs(n_jobs)
    cores = make_cores(X, Y, S, kind, sigma, lam, 1.0, 0, True, 0, n_threads)
    with blas_threads(n_threads):
        for core in cores:
            info = core.set_all(np.full(len(S), mu))
            if info:
                raise LinAlgError(f"fit_slkl_unif: Cholesky of D^-1 + C^T C / lam failed "
                                  f"(info={info})")
    # objective_ reports F with nu = 0: the data-fit term y^T (I + K~/lam)^{-1} y.
    histories = [np.array([core.F - core.nu * mu * len(S)]) for core in cores]
    k = len(cores)
    return assemble_model(cores, X, S, histories, [0] * k, [True] * k, encoding, name, kind,
                          sigma, lam, 0.0, n_jobs)


def fit_slkl_krrm(X, y, n_candidates=256, lam=1.0, kernel="gaussian", sigma=1.0,
                  candidates=None, task="regression", seed=None, n_jobs=None):
    """The paper's "KRRM" baseline: exact KRR trained on the M candidate points only.

    Parameters
    ----------
    X, y, n_candidates, lam, kernel, sigma, candidates, task, seed, n_jobs
        As in :func:`hkern.fit_slkl` (the same seed gives the same S).

    Returns
    -------
    hkern.baselines.exact.ExactKRR
        With an extra attribute ``candidates_`` (the rows of X used).

    Examples
    --------
    >>> import numpy as np, hkern
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(300, 2)); y = np.sin(X[:, 0])
    >>> model = hkern.fit_slkl_krrm(X, y, n_candidates=100, lam=1e-2, seed=0)
    >>> model.X_fit_.shape, float(np.mean((model.predict(X) - y) ** 2)) < 0.01
    ((100, 2), True)
    """
    X, _, _, name, _, sigma, lam = prepare_fit(X, y, kernel, sigma, lam, task)
    rng = check_seed(seed)
    S = draw_candidates(X.shape[0], n_candidates, rng, candidates)
    y_arr = np.asarray(y)
    model = fit_exact(X[S], y_arr[S], kernel=name, sigma=sigma, lam=lam, task=task,
                      n_jobs=n_jobs)
    model.candidates_ = S
    return model
