"""Exact kernel ridge regression and classification (:func:`hkern.fit_exact`)."""
from __future__ import annotations

import hkern

from ._base import HkernClassifier, HkernGPRegressor
from ._docs import documented

__all__ = ["ExactRegressor", "ExactClassifier"]


class _ExactParameters:
    """The parameters of :func:`hkern.fit_exact` (random_state draws the subsample of a
    hyperparameter selection; the fit itself draws nothing)."""

    _fit_function = staticmethod(hkern.fit_exact)
    _doc = {"model": "hkern.exact.ExactKRR",
            "draws": "The subsample of a hyperparameter selection and the columns of the PCG "
                     "preconditioner (the Cholesky fit itself draws nothing)",
            "attributes": "n_iter_ : int or None\n"
                          "    Conjugate-gradient iterations (``solver=\"pcg\"``; None for the\n"
                          "    Cholesky solver), from ``model_.n_iter_``.\n"}

    def __init__(self, *, kernel="gaussian", sigma="ard", lam="auto", random_state=None,
                 n_jobs=None, solver="auto", preconditioner="block_rpcholesky", r=None,
                 tol=1e-3, max_iter=1000, validation=None, criterion="auto", verbose=False,
                 precision="auto", max_memory=None):
        self.kernel = kernel
        self.sigma = sigma
        self.lam = lam
        self.random_state = random_state
        self.n_jobs = n_jobs
        self.solver = solver
        self.preconditioner = preconditioner
        self.r = r
        self.tol = tol
        self.max_iter = max_iter
        self.validation = validation
        self.criterion = criterion
        self.verbose = verbose
        self.precision = precision
        self.max_memory = max_memory


@documented
class ExactRegressor(_ExactParameters, HkernGPRegressor):
    """Exact kernel ridge regression: :func:`hkern.fit_exact` as a scikit-learn regressor.

    The reference every approximation is measured against: O(n^2) memory, O(n^3) time.

    Examples
    --------
    >>> import numpy as np
    >>> from hkern.sklearn import ExactRegressor
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(300, 3)); y = np.sin(X[:, 0])
    >>> reg = ExactRegressor(sigma=1.0, lam=1e-3).fit(X, y)
    >>> bool(reg.score(X, y) > 0.99)
    True
    """


@documented
class ExactClassifier(_ExactParameters, HkernClassifier):
    """Exact kernel ridge classification (one-vs-rest): :func:`hkern.fit_exact` as a
    scikit-learn classifier.

    Examples
    --------
    >>> import numpy as np
    >>> from hkern.sklearn import ExactClassifier
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(300, 2)); y = np.where(X[:, 0] * X[:, 1] > 0, "same", "other")
    >>> clf = ExactClassifier(sigma=1.0, lam=1e-2).fit(X, y)
    >>> clf.classes_.tolist(), bool(clf.score(X, y) > 0.9)
    (['other', 'same'], True)
    """
