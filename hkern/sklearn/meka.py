"""MEKA estimators (:func:`hkern.fit_meka`) and the MEKA feature map (:func:`hkern.meka`)."""
from __future__ import annotations

import numpy as np

import hkern

from .. import _linalg
from ..meka.api import LINK_RCOND, N_CLUSTERS_DEFAULT, RANK_DEFAULT
from ._base import HkernClassifier, HkernRegressor, HkernTransformer
from ._docs import documented

__all__ = ["MekaRegressor", "MekaClassifier", "MekaTransformer"]

SIZE_NOTE = ("``r`` is the rank of each cluster's basis (total rank about r * n_clusters); 64 "
             "and 10 by default, as for the functions: the settings of the UCI runs in the MEKA "
             "results")


class _MekaParameters:
    """The parameters of :func:`hkern.fit_meka`."""

    _fit_function = staticmethod(hkern.fit_meka)
    _doc = {"model": "hkern.meka.krr.MekaKRR", "draws": "k-means, landmarks and link samples",
            "size": SIZE_NOTE,
            "attributes": "n_iter_ : ndarray (n_outputs,) of int, or None\n"
                          "    CG iterations per output (per class for a classifier; None for\n"
                          "    the direct solver), from ``model_.n_iter_``.\n"}

    def __init__(self, r=RANK_DEFAULT, *, n_clusters=N_CLUSTERS_DEFAULT, kernel="gaussian",
                 sigma="ard", lam="auto", random_state=None, n_jobs=None, solver="direct",
                 tol=1e-3, max_iter=1000, psd=True, oversample=2.0, landmarks_per_cluster=None,
                 rank_policy="uniform", threshold=0.0, threshold_kind="fraction",
                 kmeans_sample=20000, kmeans_iter=10, link_rcond=LINK_RCOND, criterion="auto",
                 verbose=False, max_memory=None):
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
        self.criterion = criterion
        self.verbose = verbose
        self.max_memory = max_memory


@documented
class MekaRegressor(_MekaParameters, HkernRegressor):
    """Kernel ridge regression on the MEKA approximation: :func:`hkern.fit_meka` as a
    scikit-learn regressor.

    Examples
    --------
    With the conjugate-gradient solver, whose iterations are ``n_iter_``:

    >>> import numpy as np
    >>> from hkern.sklearn import MekaRegressor
    >>> X = np.random.default_rng(0).normal(size=(2000, 3)); y = np.sin(X[:, 0])
    >>> reg = MekaRegressor(r=30, n_clusters=5, lam=1e-3, solver="pcg", random_state=0)
    >>> reg = reg.fit(X, y)
    >>> reg.n_iter_.shape, bool(reg.n_iter_[0] > 0), bool(reg.score(X, y) > 0.99)
    ((1,), True, True)
    """


@documented
class MekaClassifier(_MekaParameters, HkernClassifier):
    """Kernel ridge classification (one-vs-rest) on the MEKA approximation:
    :func:`hkern.fit_meka` as a scikit-learn classifier.

    Examples
    --------
    Cross-validated accuracy:

    >>> import numpy as np
    >>> from sklearn.model_selection import cross_val_score
    >>> from hkern.sklearn import MekaClassifier
    >>> X = np.random.default_rng(0).normal(size=(1000, 2)); y = X[:, 0] * X[:, 1] > 0
    >>> clf = MekaClassifier(r=20, n_clusters=4, random_state=0)
    >>> bool(cross_val_score(clf, X, y, cv=3).mean() > 0.9)
    True
    """


@documented
class MekaTransformer(HkernTransformer):
    """The feature map of a MEKA approximation (:func:`hkern.meka`) as a scikit-learn
    transformer.

    ``fit`` builds G~ = W L W^T with the PSD fix (``psd=True`` always: only a positive
    semi-definite G~ has real features) and keeps S with S S^T = L (its eigenpairs, numerically
    zero ones dropped); ``transform`` gives Phi(x) = w(x) S, where w(x) holds the cluster
    basis features of x (:meth:`hkern.meka.api.MekaApproximation.features`, in the columns of
    the nearest centroid's cluster).  On the training points Phi Phi^T = G~.

    Attributes
    ----------
    approximation_ : hkern.meka.api.MekaApproximation
        G~, what ``hkern.meka(X, r, n_clusters=..., psd=True, ...)`` returns.
    normalization_ : ndarray (K, n_components)
        S, for K = sum of the cluster ranks.

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
    _doc = {"draws": "k-means, landmarks and link samples", "size": SIZE_NOTE}

    def __init__(self, r=RANK_DEFAULT, *, n_clusters=N_CLUSTERS_DEFAULT, kernel="gaussian",
                 sigma=1.0, random_state=None, n_jobs=None, oversample=2.0,
                 landmarks_per_cluster=None, rank_policy="uniform", threshold=0.0,
                 threshold_kind="fraction", kmeans_sample=20000, kmeans_iter=10,
                 link_rcond=LINK_RCOND, verbose=False, max_memory=None):
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
        self.verbose = verbose
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
