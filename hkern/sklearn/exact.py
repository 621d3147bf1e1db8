"""Exact kernel ridge regression and classification (:func:`hkern.fit_exact`)."""
from __future__ import annotations

import hkern

from ._base import HkernClassifier, HkernRegressor

__all__ = ["ExactRegressor", "ExactClassifier"]


class _ExactParameters:
    """The parameters of :func:`hkern.fit_exact` (it draws nothing: no random_state)."""

    _fit_function = staticmethod(hkern.fit_exact)

    def __init__(self, *, kernel="gaussian", sigma=1.0, lam=1e-2, n_jobs=None,
                 max_memory=None):
        self.kernel = kernel
        self.sigma = sigma
        self.lam = lam
        self.n_jobs = n_jobs
        self.max_memory = max_memory


class ExactRegressor(_ExactParameters, HkernRegressor):
    """Exact kernel ridge regression: :func:`hkern.fit_exact` as a scikit-learn regressor.

    The reference every approximation is measured against: O(n^2) memory, O(n^3) time.

    Parameters
    ----------
    kernel, sigma, lam, max_memory
        As in :func:`hkern.fit_exact` (same names and defaults).
    n_jobs : int or None, default=None
        Threads; None: the CPUs available (not one, as in scikit-learn).  Results are
        identical for any value.

    Attributes
    ----------
    model_ : hkern.baselines.ExactKRR
        The fitted model, what :func:`hkern.fit_exact` returns.
    n_features_in_ : int
        Number of features seen in fit.
    feature_names_in_ : ndarray of str
        Column names seen in fit, when X had string column names.

    See Also
    --------
    ExactClassifier : the same fit for class labels.

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


class ExactClassifier(_ExactParameters, HkernClassifier):
    """Exact kernel ridge classification (one-vs-rest): :func:`hkern.fit_exact` as a
    scikit-learn classifier.

    Parameters
    ----------
    kernel, sigma, lam, max_memory
        As in :func:`hkern.fit_exact` (same names and defaults).
    n_jobs : int or None, default=None
        Threads; None: the CPUs available (not one, as in scikit-learn).  Results are
        identical for any value.

    Attributes
    ----------
    model_ : hkern.baselines.ExactKRR
        The fitted model, what :func:`hkern.fit_exact` returns.
    classes_ : ndarray (n_classes,)
        The sorted class labels.
    n_features_in_ : int
        Number of features seen in fit.
    feature_names_in_ : ndarray of str
        Column names seen in fit, when X had string column names.

    See Also
    --------
    ExactRegressor : the same fit for real targets.

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
