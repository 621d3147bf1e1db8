"""Random Fourier feature estimators (:func:`hkern.fit_rff`) and the random Fourier feature map."""
from __future__ import annotations

import numpy as np

import hkern

from .._validation import check_int, check_seed, check_sigma, check_underflow
from ..features.rff import check_phases, rff_features
from ..kernels import kernel_kind, sample_spectral
from ._base import HkernClassifier, HkernGPRegressor, HkernTransformer, seed_from_random_state
from ._docs import documented

__all__ = ["RFFRegressor", "RFFClassifier", "RFFTransformer"]


class _RFFParameters:
    """The parameters of :func:`hkern.fit_rff`."""

    _fit_function = staticmethod(hkern.fit_rff)
    _doc = {"model": "hkern.features.RFFKRR", "draws": "The frequencies and offsets",
            "size": "``r`` features"}

    def __init__(self, r=1024, *, kernel="gaussian", sigma="ard", lam="auto", random_state=None,
                 n_jobs=None, criterion="auto", verbose=False, max_memory=None):
        self.r = r
        self.kernel = kernel
        self.sigma = sigma
        self.lam = lam
        self.random_state = random_state
        self.n_jobs = n_jobs
        self.criterion = criterion
        self.verbose = verbose
        self.max_memory = max_memory


@documented
class RFFRegressor(_RFFParameters, HkernGPRegressor):
    """Ridge regression on random Fourier features: :func:`hkern.fit_rff` as a scikit-learn
    regressor.

    Examples
    --------
    Two outputs, one solve:

    >>> import numpy as np
    >>> from hkern.sklearn import RFFRegressor
    >>> X = np.random.default_rng(0).normal(size=(500, 2))
    >>> Y = np.column_stack([np.sin(X[:, 0]), np.cos(X[:, 1])])
    >>> reg = RFFRegressor(r=300, lam=1e-3, random_state=0).fit(X, Y)
    >>> reg.predict(X[:3]).shape, bool(reg.score(X, Y) > 0.98)
    ((3, 2), True)
    """


@documented
class RFFClassifier(_RFFParameters, HkernClassifier):
    """Ridge classification (one-vs-rest) on random Fourier features: :func:`hkern.fit_rff` as
    a scikit-learn classifier.

    Examples
    --------
    Three classes, one score each:

    >>> import numpy as np
    >>> from hkern.sklearn import RFFClassifier
    >>> X = np.random.default_rng(0).normal(size=(600, 2))
    >>> y = np.digitize(np.arctan2(X[:, 1], X[:, 0]), [-1.0, 1.0])      # three sectors
    >>> clf = RFFClassifier(r=300, random_state=0).fit(X, y)
    >>> clf.classes_.tolist(), clf.decision_function(X[:5]).shape, bool(clf.score(X, y) > 0.9)
    ([0, 1, 2], (5, 3), True)
    """


@documented
class RFFTransformer(HkernTransformer):
    """The random Fourier feature map of :func:`hkern.fit_rff` as a scikit-learn transformer.

    ``fit`` draws r frequencies Omega from the kernel's spectral density
    (:func:`hkern.kernels.sample_spectral`) and offsets b uniform on [0, 2 pi), as
    :func:`hkern.fit_rff` does (the same draws for the same seed); ``transform`` gives
    z(x) = sqrt(2 / r) cos(Omega x + b), whose inner products approximate the kernel.
    A linear ridge regression without intercept on these features with ``alpha=lam`` is
    :func:`hkern.fit_rff` with the same ``lam``.

    Attributes
    ----------
    frequencies_ : ndarray (r, n_features)
        Omega.
    offsets_ : ndarray (r,)
        b.

    See Also
    --------
    RFFRegressor : the ridge regression on these features, in one fit.

    Examples
    --------
    The features of a Laplace kernel feeding a linear classifier:

    >>> import numpy as np
    >>> from sklearn.linear_model import RidgeClassifier
    >>> from sklearn.pipeline import make_pipeline
    >>> from hkern.sklearn import RFFTransformer
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(500, 2)); y = np.hypot(X[:, 0], X[:, 1]) > 1
    >>> clf = make_pipeline(RFFTransformer(r=300, kernel="laplace", random_state=0),
    ...                     RidgeClassifier(alpha=1e-2)).fit(X, y)
    >>> bool(clf.score(X, y) > 0.9)
    True
    """

    _doc = {"function": "fit_rff", "draws": "The frequencies and offsets",
            "size": "``r`` features; kernels with a spectral sampler: gaussian, laplace and "
                    "the Matern kernels"}

    def __init__(self, r=1024, *, kernel="gaussian", sigma=1.0, random_state=None,
                 n_jobs=None):
        self.r = r
        self.kernel = kernel
        self.sigma = sigma
        self.random_state = random_state
        self.n_jobs = n_jobs

    def _fit(self, X):
        r = check_int(self.r, "r", low=1)
        name, _ = kernel_kind(self.kernel)
        sigma, lengthscales = check_sigma(self.sigma, X.shape[1])
        check_underflow(sigma, X)
        rng = check_seed(seed_from_random_state(self.random_state))
        with np.errstate(over="ignore"):       # infinite frequencies are refused in transform
            self.frequencies_ = sample_spectral(name, X.shape[1], r, sigma, rng)
            if lengthscales is not None:
                # w . (x / l) = (w / l) . x: the features of X / l at bandwidth 1, applied to X.
                self.frequencies_ /= lengthscales
        self.offsets_ = rng.uniform(0.0, 2.0 * np.pi, size=r)
        self._n_features_out = r

    def _transform(self, X, n_threads):
        check_phases(X, self.frequencies_)        # as fit_rff and its model's predict refuse
        return rff_features(X, self.frequencies_, self.offsets_, n_threads)
