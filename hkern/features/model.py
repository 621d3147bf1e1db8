"""The random-features kernel ridge model: :class:`RFFKRR`, which :func:`hkern.fit_rff`
returns, ridge regression on the random Fourier features of :mod:`hkern.features.rff`."""
from __future__ import annotations

import numpy as np

from .. import _linalg
from .._feature_gp import FeatureGaussianProcess
from .._model import KernelRidgeModel
from .._ridge import row_blocks
from .._threads import budget_threads
from .rff import check_phases, rff_features

__all__ = ["RFFKRR"]


class RFFKRR(FeatureGaussianProcess, KernelRidgeModel):
    """Ridge regression on z(x) = sqrt(2/r) cos(Omega x + b).

    Also the posterior mean of the Bayesian linear model f(x) = z(x)^T w, w ~ N(0, s2 I),
    observed with noise variance s2 lam: ``predict(X, return_std=True)`` gives its standard
    deviation, ``sqrt(s2 lam |R^{-1} z(x)|^2)``, ``R R^T = Z^T Z + lam I`` (Z the training
    features).
    Its prior is the random-feature kernel z(x)^T z(x'), which approximates the kernel.

    Attributes
    ----------
    frequencies_ : ndarray (r, d)
        Omega, drawn from the kernel's spectral density.
    offsets_ : ndarray (r,)
        b, uniform on [0, 2 pi).
    coef_ : ndarray (r, k)
        Ridge coefficients of the features.

    Examples
    --------
    Returned by :func:`fit_rff`:

    >>> import numpy as np
    >>> import hkern
    >>> rng = np.random.default_rng(0)
    >>> X, y = rng.normal(size=(500, 3)), rng.normal(size=500)
    >>> model = hkern.fit_rff(X, y, r=64, sigma=1.0, lam=1e-2, seed=0)
    >>> model.frequencies_.shape, model.coef_.shape
    ((64, 3), (64, 1))
    """

    def __init__(self, frequencies, offsets, coef, posterior_factor=None, **kw):
        super().__init__(**kw)
        self._posterior_factor = posterior_factor       # R, R R^T = Z^T Z + lam I
        self.frequencies_ = frequencies
        self.offsets_ = offsets
        self.coef_ = coef

    def _scores(self, X):
        check_phases(X, self.frequencies_)
        n_threads = budget_threads()
        out = np.empty((X.shape[0], self.coef_.shape[1]))
        for start, stop in row_blocks(X.shape[0], self.frequencies_.shape[0]):
            features = rff_features(X[start:stop], self.frequencies_, self.offsets_, n_threads)
            _linalg.matmul(features, self.coef_, n_threads=n_threads, out=out[start:stop])
            del features    # before the next block's: one block in memory, not two
        return out

    def _features(self, X, n_threads):
        check_phases(X, self.frequencies_)
        return rff_features(X, self.frequencies_, self.offsets_, n_threads)

