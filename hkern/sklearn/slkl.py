"""Stochastic low-rank kernel learning estimators (:func:`hkern.fit_slkl`)."""
from __future__ import annotations

import hkern

from ._base import HkernClassifier, HkernRegressor
from ._docs import documented

__all__ = ["SlklRegressor", "SlklClassifier"]


class _SlklParameters:
    """The parameters of :func:`hkern.fit_slkl`."""

    _fit_function = staticmethod(hkern.fit_slkl)
    _doc = {"model": "hkern.slkl.SlklModel", "draws": "Candidates and coordinates",
            "size": "``r`` candidate landmarks; ``lam=1`` as in the paper (only ``lam * nu`` "
                    "matters: tune ``nu``)",
            "attributes": "n_iter_ : ndarray of int (n_outputs,)\n"
                          "    Coordinate steps taken, one per output or class (also for one\n"
                          "    output), from ``model_.n_iter_``.\n"}

    def __init__(self, r=256, *, kernel="gaussian", sigma="ard", lam="auto", random_state=None,
                 n_jobs=None, nu=1e-2, step="exact", tol=1e-4, max_iter=None, kkt_tol=None,
                 precompute_columns=True, refresh=1000, candidates=None, criterion="auto",
                 verbose=False, max_memory=None):
        self.r = r
        self.kernel = kernel
        self.sigma = sigma
        self.lam = lam
        self.random_state = random_state
        self.n_jobs = n_jobs
        self.nu = nu
        self.step = step
        self.tol = tol
        self.max_iter = max_iter
        self.kkt_tol = kkt_tol
        self.precompute_columns = precompute_columns
        self.refresh = refresh
        self.candidates = candidates
        self.criterion = criterion
        self.verbose = verbose
        self.max_memory = max_memory


@documented
class SlklRegressor(_SlklParameters, HkernRegressor):
    """Kernel ridge regression on a learned sparse combination of rank-1 Nystrom kernels
    (SLKL): :func:`hkern.fit_slkl` as a scikit-learn regressor.

    Examples
    --------
    >>> import numpy as np
    >>> from hkern.sklearn import SlklRegressor
    >>> rng = np.random.default_rng(0)
    >>> X = rng.uniform(-5, 5, size=(300, 2)); y = np.sinc(np.hypot(X[:, 0], X[:, 1]) / np.pi)
    >>> reg = SlklRegressor(r=60, nu=1e-3, random_state=0).fit(X, y)
    >>> bool(reg.score(X, y) > 0.9), reg.model_.m0_ <= 60, reg.n_iter_.shape
    (True, True, (1,))
    """


@documented
class SlklClassifier(_SlklParameters, HkernClassifier):
    """Classification (one-vs-rest, one SLKL problem per class) on learned sparse combinations
    of rank-1 Nystrom kernels: :func:`hkern.fit_slkl` as a scikit-learn classifier.

    Examples
    --------
    One SLKL problem per class:

    >>> import numpy as np
    >>> from hkern.sklearn import SlklClassifier
    >>> X = np.random.default_rng(0).normal(size=(500, 2))
    >>> y = np.where(X[:, 0] > 0.5, "right", "rest")
    >>> clf = SlklClassifier(r=60, nu=1e-2, random_state=0).fit(X, y)
    >>> clf.n_iter_.shape, bool(clf.score(X, y) > 0.9)
    ((2,), True)
    """
