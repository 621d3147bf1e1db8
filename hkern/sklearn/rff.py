"""Random Fourier feature estimators (:func:`hkern.fit_rff`) and the random Fourier feature map."""
from __future__ import annotations

import numpy as np

import hkern

from .. import _linalg
from .._validation import check_bandwidth, check_int, check_seed
from ..kernels import kernel_kind, sample_spectral
from ._base import HkernClassifier, HkernRegressor, HkernTransformer, seed_from_random_state

__all__ = ["RFFRegressor", "RFFClassifier", "RFFTransformer"]


class _RFFParameters:
    """The parameters of :func:`hkern.fit_rff`."""

    _fit_function = staticmethod(hkern.fit_rff)

    def __init__(self, r=1024, *, kernel="gaussian", sigma=1.0, lam=1e-2, random_state=None,
                 n_jobs=None, max_memory=None):
        self.r = r
        self.kernel = kernel
        self.sigma = sigma
        self.lam = lam
        self.random_state = random_state
        self.n_jobs = n_jobs
        self.max_memory = max_memory


class RFFRegressor(_RFFParameters, HkernRegressor):
    """Ridge regression on random Fourier features: :func:`hkern.fit_rff` as a scikit-learn
    regressor.

    Parameters
    ----------
    r, kernel, sigma, lam, max_memory
        As in :func:`hkern.fit_rff` (same names and defaults): ``r`` features.
    random_state : int, RandomState instance or None, default=None
        The frequencies and offsets.  An int is the function's ``seed``; None (numpy's global
        state) and a RandomState give a seed drawn from them.
    n_jobs : int or None, default=None
        Threads; None: the CPUs available (not one, as in scikit-learn).  Results are
        identical for any value.

    Attributes
    ----------
    model_ : hkern.baselines.RFFKRR
        The fitted model, what :func:`hkern.fit_rff` returns.
    n_features_in_ : int
        Number of features seen in fit.
    feature_names_in_ : ndarray of str
        Column names seen in fit, when X had string column names.

    See Also
    --------
    RFFClassifier, RFFTransformer

    Examples
    --------
    >>> import numpy as np
    >>> from hkern.sklearn import RFFRegressor
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(500, 2)); y = np.sin(X[:, 0])
    >>> reg = RFFRegressor(r=300, lam=1e-3, random_state=0).fit(X, y)
    >>> bool(reg.score(X, y) > 0.98)
    True
    """


class RFFClassifier(_RFFParameters, HkernClassifier):
    """Ridge classification (one-vs-rest) on random Fourier features: :func:`hkern.fit_rff` as
    a scikit-learn classifier.

    Parameters
    ----------
    r, kernel, sigma, lam, max_memory
        As in :func:`hkern.fit_rff` (same names and defaults): ``r`` features.
    random_state : int, RandomState instance or None, default=None
        The frequencies and offsets.  An int is the function's ``seed``; None (numpy's global
        state) and a RandomState give a seed drawn from them.
    n_jobs : int or None, default=None
        Threads; None: the CPUs available (not one, as in scikit-learn).  Results are
        identical for any value.

    Attributes
    ----------
    model_ : hkern.baselines.RFFKRR
        The fitted model, what :func:`hkern.fit_rff` returns.
    classes_ : ndarray (n_classes,)
        The sorted class labels.
    n_features_in_ : int
        Number of features seen in fit.
    feature_names_in_ : ndarray of str
        Column names seen in fit, when X had string column names.

    See Also
    --------
    RFFRegressor, RFFTransformer

    Examples
    --------
    >>> import numpy as np
    >>> from hkern.sklearn import RFFClassifier
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(500, 2)); y = (np.hypot(X[:, 0], X[:, 1]) > 1).astype(int)
    >>> clf = RFFClassifier(r=200, random_state=0).fit(X, y)
    >>> clf.classes_.tolist(), bool(clf.score(X, y) > 0.9)
    ([0, 1], True)
    """


class RFFTransformer(HkernTransformer):
    """The random Fourier feature map of :func:`hkern.fit_rff` as a scikit-learn transformer.

    ``fit`` draws r frequencies Omega from the kernel's spectral density
    (:func:`hkern.kernels.sample_spectral`) and offsets b uniform on [0, 2 pi), as
    :func:`hkern.fit_rff` does (the same draws for the same seed); ``transform`` gives
    z(x) = sqrt(2 / r) cos(Omega x + b), whose inner products approximate the kernel.
    A linear ridge regression without intercept on these features with ``alpha=lam`` is
    :func:`hkern.fit_rff` with the same ``lam``.

    Parameters
    ----------
    r, kernel, sigma
        As in :func:`hkern.fit_rff` (same names and defaults): ``r`` features; kernels with a
        spectral sampler: "gaussian", "laplace" and the Matern kernels.
    random_state : int, RandomState instance or None, default=None
        The frequencies and offsets.  An int is :func:`hkern.fit_rff`'s ``seed``; None
        (numpy's global state) and a RandomState give a seed drawn from them.
    n_jobs : int or None, default=None
        Threads; None: the CPUs available (not one, as in scikit-learn).  Results are
        identical for any value.

    Attributes
    ----------
    frequencies_ : ndarray (r, n_features)
        Omega.
    offsets_ : ndarray (r,)
        b.
    n_features_in_ : int
        Number of features seen in fit.
    feature_names_in_ : ndarray of str
        Column names seen in fit, when X had string column names.

    See Also
    --------
    RFFRegressor : the ridge regression on these features, in one fit.

    Examples
    --------
    >>> import numpy as np, hkern
    >>> from hkern.sklearn import RFFTransformer
    >>> X = np.random.default_rng(0).normal(size=(200, 3))
    >>> z = RFFTransformer(r=20000, sigma=2.0, random_state=0).fit(X)
    >>> F = z.transform(X[:5])
    >>> F.shape
    (5, 20000)
    >>> K = hkern.kernel_matrix(X[:5], sigma=2.0)
    >>> bool(np.abs(F @ F.T - K).max() < 0.05)
    True
    """

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
        sigma = check_bandwidth(self.sigma, X)
        rng = check_seed(seed_from_random_state(self.random_state))
        with np.errstate(over="ignore"):       # infinite frequencies are refused in transform
            self.frequencies_ = sample_spectral(name, X.shape[1], r, sigma, rng)
        self.offsets_ = rng.uniform(0.0, 2.0 * np.pi, size=r)
        self._n_features_out = r

    def _transform(self, X, n_threads):
        with np.errstate(over="ignore", invalid="ignore"):
            Z = _linalg.matmul(X, self.frequencies_, trans_b=True, n_threads=n_threads)
            Z += self.offsets_
            np.cos(Z, out=Z)
        if not np.isfinite(Z).all():
            raise ValueError("sigma is too small next to X for random Fourier features: the "
                             "phases Omega x overflow double precision; increase sigma or "
                             "divide X (and sigma) by a common factor")
        Z *= np.sqrt(2.0 / self._n_features_out)
        return Z
