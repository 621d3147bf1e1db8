"""Stochastic low-rank kernel learning estimators (:func:`hkern.fit_slkl`)."""
from __future__ import annotations

import hkern

from ._base import HkernClassifier, HkernRegressor

__all__ = ["SlklRegressor", "SlklClassifier"]


class _SlklParameters:
    """The parameters of :func:`hkern.fit_slkl`."""

    _fit_function = staticmethod(hkern.fit_slkl)

    def __init__(self, r=256, *, kernel="gaussian", sigma=1.0, lam=1.0, random_state=None,
                 n_jobs=None, nu=1e-2, step="exact", tol=1e-4, max_iter=None, kkt_tol=None,
                 precompute_columns=True, refresh=1000, candidates=None, max_memory=None):
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
        self.max_memory = max_memory


class SlklRegressor(_SlklParameters, HkernRegressor):
    """Kernel ridge regression on a learned sparse combination of rank-1 Nystrom kernels
    (SLKL): :func:`hkern.fit_slkl` as a scikit-learn regressor.

    Parameters
    ----------
    r, kernel, sigma, lam, nu, step, tol, max_iter, kkt_tol, precompute_columns, refresh, \
candidates, max_memory
        As in :func:`hkern.fit_slkl` (same names and defaults): ``r`` candidate landmarks,
        ``lam=1`` as in the paper (only ``lam * nu`` matters: tune ``nu``).
    random_state : int, RandomState instance or None, default=None
        Candidates and coordinates.  An int is the function's ``seed``; None (numpy's global
        state) and a RandomState give a seed drawn from them.
    n_jobs : int or None, default=None
        Threads; None: the CPUs available (not one, as in scikit-learn).  Results are
        identical for any value.

    Attributes
    ----------
    model_ : hkern.slkl.SlklModel
        The fitted model, what :func:`hkern.fit_slkl` returns.
    n_iter_ : int or ndarray (n_outputs,)
        Coordinate steps taken (one per output for 2-D targets), from ``model_.n_iter_``.
    n_features_in_ : int
        Number of features seen in fit.
    feature_names_in_ : ndarray of str
        Column names seen in fit, when X had string column names.

    See Also
    --------
    SlklClassifier

    Examples
    --------
    >>> import numpy as np
    >>> from hkern.sklearn import SlklRegressor
    >>> rng = np.random.default_rng(0)
    >>> X = rng.uniform(-5, 5, size=(300, 2)); y = np.sinc(np.hypot(X[:, 0], X[:, 1]) / np.pi)
    >>> reg = SlklRegressor(r=60, nu=1e-3, random_state=0).fit(X, y)
    >>> bool(reg.score(X, y) > 0.9), reg.model_.m0_ <= 60
    (True, True)
    """


class SlklClassifier(_SlklParameters, HkernClassifier):
    """Classification (one-vs-rest, one SLKL problem per class) on learned sparse combinations
    of rank-1 Nystrom kernels: :func:`hkern.fit_slkl` as a scikit-learn classifier.

    Parameters
    ----------
    r, kernel, sigma, lam, nu, step, tol, max_iter, kkt_tol, precompute_columns, refresh, \
candidates, max_memory
        As in :func:`hkern.fit_slkl` (same names and defaults): ``r`` candidate landmarks,
        ``lam=1`` as in the paper (only ``lam * nu`` matters: tune ``nu``).
    random_state : int, RandomState instance or None, default=None
        Candidates and coordinates.  An int is the function's ``seed``; None (numpy's global
        state) and a RandomState give a seed drawn from them.
    n_jobs : int or None, default=None
        Threads; None: the CPUs available (not one, as in scikit-learn).  Results are
        identical for any value.

    Attributes
    ----------
    model_ : hkern.slkl.SlklModel
        The fitted model, what :func:`hkern.fit_slkl` returns.
    n_iter_ : ndarray (n_classes,)
        Coordinate steps taken, one per class, from ``model_.n_iter_``.
    classes_ : ndarray (n_classes,)
        The sorted class labels.
    n_features_in_ : int
        Number of features seen in fit.
    feature_names_in_ : ndarray of str
        Column names seen in fit, when X had string column names.

    See Also
    --------
    SlklRegressor

    Examples
    --------
    >>> import numpy as np
    >>> from hkern.sklearn import SlklClassifier
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(500, 2)); y = (np.hypot(X[:, 0], X[:, 1]) > 1).astype(int)
    >>> clf = SlklClassifier(r=60, nu=1e-2, random_state=0).fit(X, y)
    >>> clf.classes_.tolist(), bool(clf.score(X, y) > 0.9)
    ([0, 1], True)
    """
