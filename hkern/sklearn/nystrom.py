"""Nystrom kernel ridge estimators (:func:`hkern.fit_nystrom`) and the Nystrom feature map."""
from __future__ import annotations

import numpy as np

import hkern

from .. import _linalg
from .._threads import thread_budget
from .._validation import check_seed
from ..nystrom.api import check_rcond, nystrom_feature_map
from ..oasis.landmarks import check_landmarks, landmark_rows
from ._base import HkernClassifier, HkernGPRegressor, HkernTransformer, seed_from_random_state
from ._docs import documented

__all__ = ["NystromRegressor", "NystromClassifier", "NystromTransformer"]


class _NystromParameters:
    """The parameters of :func:`hkern.fit_nystrom`."""

    _fit_function = staticmethod(hkern.fit_nystrom)
    _doc = {"model": "hkern.nystrom.NystromKRR", "draws": "Landmark sampling",
            "size": "``r`` landmarks",
            "attributes": "n_iter_ : int or None\n"
                          "    Conjugate-gradient iterations (``solver=\"pcg\"``; None for the\n"
                          "    direct solver), from ``model_.n_iter_``.\n"}

    def __init__(self, r=1024, *, kernel="gaussian", sigma="ard", lam="auto", random_state=None,
                 n_jobs=None, landmarks="uniform", rcond=1e-11, solver="direct", tol=1e-3,
                 max_iter=1000, validation=None, criterion="auto", verbose=False,
                 precision="auto", max_memory=None):
        self.r = r
        self.kernel = kernel
        self.sigma = sigma
        self.lam = lam
        self.random_state = random_state
        self.n_jobs = n_jobs
        self.landmarks = landmarks
        self.rcond = rcond
        self.solver = solver
        self.tol = tol
        self.max_iter = max_iter
        self.validation = validation
        self.criterion = criterion
        self.verbose = verbose
        self.precision = precision
        self.max_memory = max_memory


@documented
class NystromRegressor(_NystromParameters, HkernGPRegressor):
    """Nystrom kernel ridge regression: :func:`hkern.fit_nystrom` as a scikit-learn regressor.

    Examples
    --------
    >>> import numpy as np
    >>> from hkern.sklearn import NystromRegressor
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(500, 3)); y = np.sin(X[:, 0])
    >>> reg = NystromRegressor(r=100, lam=1e-3, random_state=0).fit(X, y)
    >>> reg.model_.landmarks_.shape, bool(reg.score(X, y) > 0.99)
    ((100, 3), True)
    """


@documented
class NystromClassifier(_NystromParameters, HkernClassifier):
    """Nystrom kernel ridge classification (one-vs-rest): :func:`hkern.fit_nystrom` as a
    scikit-learn classifier.

    Examples
    --------
    >>> import numpy as np
    >>> from hkern.sklearn import NystromClassifier
    >>> X = np.random.default_rng(0).normal(size=(500, 2))
    >>> y = np.where(np.hypot(X[:, 0], X[:, 1]) > 1, "outside", "inside")
    >>> clf = NystromClassifier(r=100, random_state=0).fit(X, y)
    >>> score = clf.decision_function(X[:4])       # two classes: > 0 for classes_[1]
    >>> bool(np.all(clf.classes_[(score > 0).astype(int)] == clf.predict(X[:4])))
    True
    """


@documented
class NystromTransformer(HkernTransformer):
    """The Nystrom feature map of :func:`hkern.fit_nystrom` as a scikit-learn transformer.

    ``fit`` chooses r landmarks Z from X as :func:`hkern.fit_nystrom` does (same
    ``landmarks`` methods, the same rows for the same seed) and M = L^{-T} (upper
    triangular) for the Cholesky factor L L^T = W + jitter I of W = K(Z, Z)
    (:func:`hkern.nystrom.api.nystrom_feature_map`, the jitter ``rcond`` times W's trace,
    or more where W needs it); ``transform`` gives Phi(X) = K(X, Z) M, so
    that Phi(X) Phi(Y)^T = K(X, Z) (W + jitter I)^{-1} K(Z, Y), the Nystrom approximation of
    the kernel.
    A linear ridge regression without intercept on these features with ``alpha=lam`` is
    :func:`hkern.fit_nystrom` with the same ``lam``.

    Attributes
    ----------
    landmarks_ : ndarray (r, n_features)
        The landmarks Z.
    landmark_indices_ : ndarray (r,)
        Their rows in the X of ``fit``, sorted.
    normalization_ : ndarray (r, r)
        M, upper triangular.
    jitter_ : float
        What was added to W's diagonal before its Cholesky factorisation (``rcond``).

    See Also
    --------
    NystromRegressor : the ridge regression on these features, in one fit.

    Examples
    --------
    >>> import numpy as np, hkern
    >>> from hkern.sklearn import NystromTransformer
    >>> X = np.random.default_rng(0).normal(size=(500, 3))
    >>> phi = NystromTransformer(r=100, sigma=2.0, random_state=0).fit(X)
    >>> F = phi.transform(X[:5])
    >>> F.shape
    (5, 100)
    >>> K = hkern.kernel_matrix(X[:5], sigma=2.0)
    >>> bool(np.abs(F @ F.T - K).max() < 1e-3)
    True
    """

    _doc = {"function": "fit_nystrom", "draws": "Landmark sampling",
            "size": "``r`` landmarks; ``max_memory`` bounds the landmark selection and the "
                    "r x r kernel matrix"}

    def __init__(self, r=1024, *, kernel="gaussian", sigma=1.0, random_state=None,
                 n_jobs=None, landmarks="uniform", rcond=1e-11, max_memory=None):
        self.r = r
        self.kernel = kernel
        self.sigma = sigma
        self.random_state = random_state
        self.n_jobs = n_jobs
        self.landmarks = landmarks
        self.rcond = rcond
        self.max_memory = max_memory

    def _fit(self, X):
        rcond = check_rcond(self.rcond)
        landmarks, r = check_landmarks(self.landmarks, self.r, X.shape[0])
        # random_state is read only when landmarks are drawn (None draws from numpy's state).
        rng = (check_seed(seed_from_random_state(self.random_state))
               if isinstance(landmarks, str) else None)
        indices = landmark_rows(landmarks, r, X.shape[0], rng)
        if indices is None:     # an adaptive selector, on the user's X and sigma (checked there)
            indices = np.sort(hkern.select_columns(
                X, r, method=landmarks, kernel=self.kernel, sigma=self.sigma, seed=rng,
                n_jobs=self.n_jobs, max_memory=self.max_memory).indices_)
        self.landmark_indices_ = indices
        self.landmarks_ = np.ascontiguousarray(X[self.landmark_indices_])
        # dtype=float64: the fits compute in double whatever the input's dtype (scikit-learn's
        # validation keeps float32 X, which kernel_matrix would otherwise evaluate in float32).
        W = hkern.kernel_matrix(self.landmarks_, kernel=self.kernel, sigma=self.sigma,
                                n_jobs=self.n_jobs, dtype=np.float64, max_memory=self.max_memory)
        with thread_budget(self.n_jobs) as n_threads:
            self.normalization_, self.jitter_ = nystrom_feature_map(W, rcond, n_threads)
        self._n_features_out = self.normalization_.shape[1]

    def _transform(self, X, n_threads):
        C = hkern.kernel_matrix(X, self.landmarks_, kernel=self.kernel, sigma=self.sigma,
                                n_jobs=n_threads, dtype=np.float64)
        return _linalg.matmul(C, self.normalization_, n_threads=n_threads)
