"""The GP-GRIEF Gaussian-process regressor (:func:`hkern.fit_grief`)."""
from __future__ import annotations

import hkern

from ..grief.api import RESTARTS_DEFAULT
from ._base import HkernGPRegressor
from ._docs import documented

__all__ = ["GriefRegressor"]


@documented
class GriefRegressor(HkernGPRegressor):
    """Gaussian-process regression with grid-structured eigenfunctions (GP-GRIEF):
    :func:`hkern.fit_grief` as a scikit-learn regressor.

    The SE-ARD lengthscales, signal variance and noise are learned in ``fit`` (type II, or
    integrated over by MCMC with ``inference="type1"``), so there is no ``sigma`` or ``lam``
    to tune; ``predict(X, return_std=True)`` also returns the posterior standard deviation.
    Targets are one-dimensional.

    Examples
    --------
    >>> import numpy as np
    >>> from hkern.sklearn import GriefRegressor
    >>> rng = np.random.default_rng(0)
    >>> X = rng.uniform(-2, 2, (300, 2)); y = np.sin(X[:, 0]) * np.cos(X[:, 1])
    >>> gp = GriefRegressor(r=50, grid_size=8, random_state=0)
    >>> gp = gp.fit(X, y + 0.05 * rng.normal(size=300))
    >>> mean, std = gp.predict(X[:5], return_std=True)
    >>> mean.shape, bool(np.all(std > 0)), bool(gp.score(X, y) > 0.95)
    ((5,), True, True)
    """

    _fit_function = staticmethod(hkern.fit_grief)
    _fixed_arguments = {}       # fit_grief is a regression: it has no task argument
    _multi_output = False
    _doc = {"model": "hkern.grief.api.GriefGP",
            "draws": "Initialisation subset, restarts and MCMC", "size": "``r`` basis functions",
            "attributes": "n_iter_ : int or None\n"
                          "    L-BFGS-B iterations of the search kept (``max_iter`` bounds\n"
                          "    each search), from ``model_.n_iter_``; None for type I.\n"}

    def __init__(self, r=1000, *, kernel="gaussian", random_state=None, n_jobs=None,
                 grid_size=10, inference="type2", lengthscales=None, signal_variance=None,
                 noise=None, optimize=True, max_iter=200, optimize_subset=None,
                 init_subset=1000, n_restarts=RESTARTS_DEFAULT, n_iter=10_000, burn_in=1000,
                 thin=50, w_prior="kernel", grid_inputs=None, verbose=False,
                 max_memory=None):
        self.r = r
        self.kernel = kernel
        self.random_state = random_state
        self.n_jobs = n_jobs
        self.grid_size = grid_size
        self.inference = inference
        self.lengthscales = lengthscales
        self.signal_variance = signal_variance
        self.noise = noise
        self.optimize = optimize
        self.max_iter = max_iter
        self.optimize_subset = optimize_subset
        self.init_subset = init_subset
        self.n_restarts = n_restarts
        self.n_iter = n_iter
        self.burn_in = burn_in
        self.thin = thin
        self.w_prior = w_prior
        self.grid_inputs = grid_inputs
        self.verbose = verbose
        self.max_memory = max_memory
