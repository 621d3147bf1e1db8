"""MEKA estimators (:func:`hkern.fit_meka`) and the MEKA feature map (:func:`hkern.meka`)."""
from __future__ import annotations

import numpy as np

import hkern

from .. import _linalg
from ..meka.api import LINK_RCOND
from ._base import HkernClassifier, HkernRegressor, HkernTransformer

__all__ = ["MekaRegressor", "MekaClassifier", "MekaTransformer"]

# fit_meka and meka require r and n_clusters; an estimator needs defaults.  These are the
# settings of doc/results_meka.md's UCI runs (total rank about r * n_clusters = 640).
RANK = 64
N_CLUSTERS = 10


class _MekaParameters:
    """The parameters of :func:`hkern.fit_meka`."""

    _fit_function = staticmethod(hkern.fit_meka)

    def __init__(self, r=RANK, *, n_clusters=N_CLUSTERS, kernel="gaussian", sigma=1.0, lam=1e-2,
                 random_state=None, n_jobs=None, solver="direct", tol=1e-10, max_iter=1000,
                 psd=True, oversample=2.0, landmarks_per_cluster=None, rank_policy="uniform",
                 threshold=0.0, threshold_kind="fraction", kmeans_sample=20000, kmeans_iter=10,
                 link_rcond=LINK_RCOND, max_memory=None):
        self.r = r
        self.n_clusters = n_clusters
        self.kernel = kernel
        self.sigma = sigma
        self.lam = lam
        self.random_state = random_state
        self.n_jobs = n_jobs
        self.solver = solver
        self.tol = tol
        self.max_iter = max_iter
        self.psd = psd
        self.oversample = oversample
        self.landmarks_per_cluster = landmarks_per_cluster
        self.rank_policy = rank_policy
        self.threshold = threshold
        self.threshold_kind = threshold_kind
        self.kmeans_sample = kmeans_sample
        self.kmeans_iter = kmeans_iter
        self.link_rcond = link_rcond
        self.max_memory = max_memory

    def _expected_failed_checks(self):
        if self.solver == "direct":
            return {"check_non_transformer_estimators_n_iter":
                    "the direct solver does not iterate (n_iter_ is None, as for scikit-learn's "
                    "Ridge with a direct solver); max_iter bounds solver='cg' only"}
        return {}


class MekaRegressor(_MekaParameters, HkernRegressor):
    """Kernel ridge regression on the MEKA approximation: :func:`hkern.fit_meka` as a
    scikit-learn regressor.

    Parameters
    ----------
    r : int, default=64
        Rank of each cluster's basis (total rank about ``r * n_clusters``).
    n_clusters : int, default=10
        Number of clusters.  :func:`hkern.fit_meka` has no defaults for ``r`` and
        ``n_clusters``; these are the settings of the UCI runs in the MEKA results.
    kernel, sigma, lam, solver, tol, max_iter, psd, oversample, landmarks_per_cluster, \
rank_policy, threshold, threshold_kind, kmeans_sample, kmeans_iter, link_rcond, max_memory
        As in :func:`hkern.fit_meka` (same names and defaults).
    random_state : int, RandomState instance or None, default=None
        k-means, landmarks and link samples.  An int is the function's ``seed``; None
        (numpy's global state) and a RandomState give a seed drawn from them.
    n_jobs : int or None, default=None
        Threads; None: the CPUs available (not one, as in scikit-learn).  Results are
        identical for any value.

    Attributes
    ----------
    model_ : hkern.meka.krr.MekaKRR
        The fitted model, what :func:`hkern.fit_meka` returns.
    n_features_in_ : int
        Number of features seen in fit.
    feature_names_in_ : ndarray of str
        Column names seen in fit, when X had string column names.

    See Also
    --------
    MekaClassifier, MekaTransformer

    Examples
    --------
    >>> import numpy as np
    >>> from hkern.sklearn import MekaRegressor
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(2000, 3)); y = np.sin(X[:, 0])
    >>> reg = MekaRegressor(r=30, n_clusters=5, lam=1e-3, random_state=0).fit(X, y)
    >>> bool(reg.score(X, y) > 0.99)
    True
    """


class MekaClassifier(_MekaParameters, HkernClassifier):
    """Kernel ridge classification (one-vs-rest) on the MEKA approximation:
    :func:`hkern.fit_meka` as a scikit-learn classifier.

    Parameters
    ----------
    r : int, default=64
        Rank of each cluster's basis (total rank about ``r * n_clusters``).
    n_clusters : int, default=10
        Number of clusters.  :func:`hkern.fit_meka` has no defaults for ``r`` and
        ``n_clusters``; these are the settings of the UCI runs in the MEKA results.
    kernel, sigma, lam, solver, tol, max_iter, psd, oversample, landmarks_per_cluster, \
rank_policy, threshold, threshold_kind, kmeans_sample, kmeans_iter, link_rcond, max_memory
        As in :func:`hkern.fit_meka` (same names and defaults).
    random_state : int, RandomState instance or None, default=None
        k-means, landmarks and link samples.  An int is the function's ``seed``; None
        (numpy's global state) and a RandomState give a seed drawn from them.
    n_jobs : int or None, default=None
        Threads; None: the CPUs available (not one, as in scikit-learn).  Results are
        identical for any value.

    Attributes
    ----------
    model_ : hkern.meka.krr.MekaKRR
        The fitted model, what :func:`hkern.fit_meka` returns.
    classes_ : ndarray (n_classes,)
        The sorted class labels.
    n_features_in_ : int
        Number of features seen in fit.
    feature_names_in_ : ndarray of str
        Column names seen in fit, when X had string column names.

    See Also
    --------
    MekaRegressor, MekaTransformer

    Examples
    --------
    >>> import numpy as np
    >>> from hkern.sklearn import MekaClassifier
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(1000, 2)); y = (np.hypot(X[:, 0], X[:, 1]) > 1).astype(int)
    >>> clf = MekaClassifier(r=20, n_clusters=4, random_state=0).fit(X, y)
    >>> clf.classes_.tolist(), bool(clf.score(X, y) > 0.9)
    ([0, 1], True)
    """


class MekaTransformer(HkernTransformer):
    """The feature map of a MEKA approximation (:func:`hkern.meka`) as a scikit-learn
    transformer.

    ``fit`` builds G~ = W L W^T with the PSD fix (``psd=True`` always: only a positive
    semi-definite G~ has real features) and keeps S with S S^T = L (its eigenpairs, numerically
    zero ones dropped); ``transform`` gives Phi(x) = w(x) S, where w(x) holds the cluster
    basis features of x (:meth:`hkern.meka.api.MekaApproximation.features`, in the columns of
    the nearest centroid's cluster).  On the training points Phi Phi^T = G~.

    Parameters
    ----------
    r : int, default=64
        Rank of each cluster's basis (total rank about ``r * n_clusters``).
    n_clusters : int, default=10
        Number of clusters.  :func:`hkern.meka` has no defaults for ``r`` and
        ``n_clusters``; these are the settings of the UCI runs in the MEKA results.
    kernel, sigma, oversample, landmarks_per_cluster, rank_policy, threshold, \
threshold_kind, kmeans_sample, kmeans_iter, link_rcond, max_memory
        As in :func:`hkern.meka` (same names and defaults).
    random_state : int, RandomState instance or None, default=None
        k-means, landmarks and link samples.  An int is :func:`hkern.meka`'s ``seed``; None
        (numpy's global state) and a RandomState give a seed drawn from them.
    n_jobs : int or None, default=None
        Threads; None: the CPUs available (not one, as in scikit-learn).  Results are
        identical for any value.

    Attributes
    ----------
    approximation_ : hkern.meka.api.MekaApproximation
        G~, what ``hkern.meka(X, r, n_clusters=..., psd=True, ...)`` returns.
    normalization_ : ndarray (K, n_components)
        S, for K = sum of the cluster ranks.
    n_features_in_ : int
        Number of features seen in fit.
    feature_names_in_ : ndarray of str
        Column names seen in fit, when X had string column names.

    See Also
    --------
    MekaRegressor : kernel ridge regression on G~, in one fit.

    Examples
    --------
    >>> import numpy as np
    >>> from hkern.sklearn import MekaTransformer
    >>> X = np.random.default_rng(0).normal(size=(1000, 3))
    >>> phi = MekaTransformer(r=40, n_clusters=5, random_state=0).fit(X)
    >>> F = phi.transform(X)
    >>> bool(np.allclose(F @ F.T, phi.approximation_.to_dense()))
    True
    """

    _fit_function = staticmethod(hkern.meka)
    _fixed_arguments = {"psd": True}

    def __init__(self, r=RANK, *, n_clusters=N_CLUSTERS, kernel="gaussian", sigma=1.0,
                 random_state=None, n_jobs=None, oversample=2.0, landmarks_per_cluster=None,
                 rank_policy="uniform", threshold=0.0, threshold_kind="fraction",
                 kmeans_sample=20000, kmeans_iter=10, link_rcond=LINK_RCOND, max_memory=None):
        self.r = r
        self.n_clusters = n_clusters
        self.kernel = kernel
        self.sigma = sigma
        self.random_state = random_state
        self.n_jobs = n_jobs
        self.oversample = oversample
        self.landmarks_per_cluster = landmarks_per_cluster
        self.rank_policy = rank_policy
        self.threshold = threshold
        self.threshold_kind = threshold_kind
        self.kmeans_sample = kmeans_sample
        self.kmeans_iter = kmeans_iter
        self.link_rcond = link_rcond
        self.max_memory = max_memory

    def _fit(self, X):
        self.approximation_ = self._call_fit_function(X)
        L = self.approximation_.L_
        w, U = _linalg.eigh(L)
        # The PSD fix leaves L positive semi-definite up to round-off: eigenvalues below the
        # usual numerical-rank tolerance are zeros (and round-off negatives) and carry nothing.
        keep = w > L.shape[0] * np.finfo(float).eps * max(w[-1], 0.0)
        self.normalization_ = U[:, keep] * np.sqrt(w[keep])
        self._n_features_out = self.normalization_.shape[1]

    def _transform(self, X, n_threads):
        G = self.approximation_
        _, blocks = G.features(X)
        starts = np.concatenate(([0], np.cumsum(G.ranks_)))
        W = np.zeros((X.shape[0], starts[-1]))
        for s, (rows, features) in enumerate(blocks):
            W[rows, starts[s]:starts[s + 1]] = features
        return _linalg.matmul(W, self.normalization_, n_threads=n_threads)
