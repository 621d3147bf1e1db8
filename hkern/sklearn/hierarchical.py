"""Estimators of the hierarchically compositional kernel (:func:`hkern.fit_hierarchical`) and
of its block-diagonal baseline, the independent kernel (:func:`hkern.fit_independent`)."""
from __future__ import annotations

import hkern

from ._base import HkernClassifier, HkernGPRegressor
from ._docs import documented

__all__ = ["HierarchicalRegressor", "HierarchicalClassifier", "IndependentRegressor",
           "IndependentClassifier"]


class _HierarchicalParameters:
    """The parameters of :func:`hkern.fit_hierarchical`."""

    _fit_function = staticmethod(hkern.fit_hierarchical)
    _doc = {"model": "hkern.hierarchical.HierarchicalKRR",
            "draws": "Split directions and landmarks",
            "size": "``r`` landmarks per tree node, 1 <= r < n"}

    def __init__(self, r=256, *, kernel="gaussian", sigma="ard", lam="auto", random_state=None,
                 n_jobs=None, jitter=None, partition="random", leaf_size=None,
                 criterion="auto", verbose=False, max_memory=None):
        self.r = r
        self.kernel = kernel
        self.sigma = sigma
        self.lam = lam
        self.random_state = random_state
        self.n_jobs = n_jobs
        self.jitter = jitter
        self.partition = partition
        self.leaf_size = leaf_size
        self.criterion = criterion
        self.verbose = verbose
        self.max_memory = max_memory


@documented
class HierarchicalRegressor(_HierarchicalParameters, HkernGPRegressor):
    """Kernel ridge regression with the hierarchically compositional kernel (HCK):
    :func:`hkern.fit_hierarchical` as a scikit-learn regressor.

    Examples
    --------
    Choosing ``sigma`` and ``lam`` by cross-validation on 3 000 points of the bundled kin40k
    set:

    >>> from sklearn.model_selection import GridSearchCV
    >>> from hkern.datasets import load_uci, standardize
    >>> from hkern.sklearn import HierarchicalRegressor
    >>> X_train, y_train, X_test, y_test, _ = standardize(*load_uci("kin40k", split=0))
    >>> search = GridSearchCV(HierarchicalRegressor(r=64, random_state=0),
    ...                       {"sigma": [1.0, 1.5, 2.0], "lam": [1e-2, 1e-1]}, cv=3)
    >>> search = search.fit(X_train[:3000], y_train[:3000])
    >>> search.best_params_
    {'lam': 0.01, 'sigma': 1.5}
    >>> print(f"{search.score(X_test, y_test):.2f}")       # R^2 on the 4 000 test points
    0.77
    """


@documented
class HierarchicalClassifier(_HierarchicalParameters, HkernClassifier):
    """Kernel ridge classification (one-vs-rest) with the hierarchically compositional kernel:
    :func:`hkern.fit_hierarchical` as a scikit-learn classifier.

    Examples
    --------
    In a pipeline, after scaling columns of very different spread:

    >>> import numpy as np
    >>> from sklearn.pipeline import make_pipeline
    >>> from sklearn.preprocessing import StandardScaler
    >>> from hkern.sklearn import HierarchicalClassifier
    >>> X = np.random.default_rng(0).normal(size=(1000, 2)) * [1.0, 100.0]
    >>> y = (np.hypot(X[:, 0], X[:, 1] / 100) > 1).astype(int)
    >>> clf = make_pipeline(StandardScaler(), HierarchicalClassifier(r=32, random_state=0))
    >>> bool(clf.fit(X, y).score(X, y) > 0.9)
    True
    """


class _IndependentParameters:
    """The parameters of :func:`hkern.fit_independent`."""

    _fit_function = staticmethod(hkern.fit_independent)
    _doc = {"model": "hkern.hierarchical.IndependentKRR", "draws": "Split directions",
            "size": "``r`` sets the leaf size as for :func:`hkern.fit_hierarchical`, 1 <= r < n"}

    def __init__(self, r=256, *, kernel="gaussian", sigma="ard", lam="auto", random_state=None,
                 n_jobs=None, partition="random", leaf_size=None, criterion="auto",
                 verbose=False, max_memory=None):
        self.r = r
        self.kernel = kernel
        self.sigma = sigma
        self.lam = lam
        self.random_state = random_state
        self.n_jobs = n_jobs
        self.partition = partition
        self.leaf_size = leaf_size
        self.criterion = criterion
        self.verbose = verbose
        self.max_memory = max_memory


@documented
class IndependentRegressor(_IndependentParameters, HkernGPRegressor):
    """Kernel ridge regression with the independent (block-diagonal) kernel on an HCK tree:
    :func:`hkern.fit_independent` as a scikit-learn regressor.

    Examples
    --------
    >>> import numpy as np
    >>> from hkern.sklearn import IndependentRegressor
    >>> rng = np.random.default_rng(0)
    >>> X = rng.uniform(-1, 1, size=(2000, 3)); y = np.sin(3 * X[:, 0])
    >>> reg = IndependentRegressor(r=64, sigma=0.5, lam=1e-3, random_state=0).fit(X, y)
    >>> bool(reg.score(X, y) > 0.99)
    True
    """


@documented
class IndependentClassifier(_IndependentParameters, HkernClassifier):
    """Kernel ridge classification (one-vs-rest) with the independent (block-diagonal) kernel:
    :func:`hkern.fit_independent` as a scikit-learn classifier.

    Examples
    --------
    >>> import numpy as np
    >>> from hkern.sklearn import IndependentClassifier
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(1000, 2)); y = np.where(X[:, 0] > 0, "right", "left")
    >>> clf = IndependentClassifier(r=32, random_state=0).fit(X, y)
    >>> clf.classes_.tolist(), bool(clf.score(X, y) > 0.9)
    (['left', 'right'], True)
    """
