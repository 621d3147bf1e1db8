"""The Nystrom kernel ridge model: :class:`NystromKRR`, which :func:`hkern.fit_nystrom`
returns (by its direct solver, FALKON, or FALKON on MPI shards)."""
from __future__ import annotations

from .._feature_gp import FeatureGaussianProcess
from .._memory import check_memory
from .._model import KernelRidgeModel
from .._threads import budget_threads
from ..kernels._api import _kernel_matvec_trusted
from .posterior import nystrom_features

__all__ = ["NystromKRR"]


class NystromKRR(FeatureGaussianProcess, KernelRidgeModel):
    """Nystrom KRR: f(x) = k(x, Z) beta for landmarks Z.

    Also the posterior mean of the Nystrom Gaussian process: the prior kernel
    phi(x)^T phi(x') = k(x, Z) (K(Z, Z) + jitter I)^{-1} k(Z, x') observed with noise
    variance lam.  ``predict(X, return_std=True)`` gives that model's standard deviation,
    ``sqrt(s2 lam |R^{-1} phi(x)|^2)`` with ``R R^T = Phi^T Phi + lam I`` (the
    subset-of-regressors form): the model the fit is, with the amplitude s2 its profiled
    likelihood estimates.  The DTC form would add s2 (k(x, x) - phi(x)^T phi(x)), the prior
    variance the landmarks leave out; but s2 was fitted under the rank-r prior, which needs
    a larger amplitude to explain the targets' variance, and that term then over-covers:
    FALKON's default 95% intervals covered 0.9995 of kin40k's test targets with it, 0.945
    without (0.982 and 0.920 on pol; doc/uncertainty.md).  Far from every landmark phi(x) = 0
    and this variance is 0: the model does not know it is extrapolating there.

    Attributes
    ----------
    landmarks_ : ndarray (r, d)
        The landmark points Z.
    landmark_indices_ : ndarray (r,)
        Their row indices in the training X.
    coef_ : ndarray (r, k)
        beta.
    rank_ : int
        The number of landmarks (the features' dimension).
    jitter_ : float
        What was added to K(Z, Z)'s diagonal before its Cholesky factorisation (``rcond``).
    n_iter_ : int or None
        Conjugate-gradient iterations (``solver="pcg"``); None for the direct solver.
    solver_trace_ : hkern.solvers.SolverTrace or None
        Per-iteration residuals, seconds and validation errors of ``solver="pcg"``.

    Examples
    --------
    Returned by :func:`fit_nystrom`; predictions are the training mean plus k(x, Z) beta:

    >>> import numpy as np
    >>> import hkern
    >>> rng = np.random.default_rng(0)
    >>> X, y = rng.normal(size=(500, 3)), rng.normal(size=500)
    >>> model = hkern.fit_nystrom(X, y, r=50, sigma=1.0, lam=1e-2, seed=0)
    >>> model.landmarks_.shape
    (50, 3)
    >>> K = hkern.kernel_matrix(X[:5], model.landmarks_, sigma=1.0)
    >>> bool(np.allclose(model.predict(X[:5]), model.y_mean_[0] + K @ model.coef_[:, 0]))
    True
    """

    def __init__(self, landmarks, indices, coef, rank, n_iter=None, solver_trace=None,
                 jitter=0.0, landmark_factor=None, posterior_factor=None, posterior=None, **kw):
        super().__init__(**kw)
        # L (L L^T = K(Z, Z) + jitter I) and R (R R^T = Phi^T Phi + lam I): the posterior,
        # given, or made on first use by ``posterior`` (hkern.nystrom.posterior.
        # DeferredPosterior: FALKON's pass over the training rows costs more than its fit).
        self._L, self._R = landmark_factor, posterior_factor
        self._deferred = posterior
        self.landmarks_ = landmarks
        self.landmark_indices_ = indices
        self.coef_ = coef
        self.rank_ = rank
        self.jitter_ = jitter
        self.n_iter_ = n_iter
        self.solver_trace_ = solver_trace

    def _scores(self, X):
        return _kernel_matvec_trusted(self._kind, self._bandwidth, X, self.landmarks_, self.coef_,
                                      budget_threads())

    def _posterior(self, n_threads, max_memory):
        """(L, R), made first where they are deferred (within ``max_memory``)."""
        if "_landmark_factor" in self.__dict__:          # a model pickled before deferral
            return self.__dict__["_landmark_factor"], self.__dict__["_posterior_factor"]
        if self._L is None:
            check_memory(self._deferred.nbytes(), max_memory,
                         what=f"FALKON's posterior factors (one pass over the training rows, "
                         f"r={self.rank_})", fix="fit with fewer centres")
            self._L, self._R = self._deferred.factors(n_threads)
            self._deferred = None
        return self._L, self._R

    @property
    def _landmark_factor(self):
        return self._posterior(budget_threads(), None)[0]

    @property
    def _posterior_factor(self):
        return self._posterior(budget_threads(), None)[1]

    def _latent_variance(self, X, n_threads, max_memory):
        self._posterior(n_threads, max_memory)
        return super()._latent_variance(X, n_threads, max_memory)

    def _latent_covariance(self, X, n_threads, max_memory):
        self._posterior(n_threads, max_memory)
        return super()._latent_covariance(X, n_threads, max_memory)

    def _features(self, X, n_threads):
        return nystrom_features(self._kind, self._bandwidth, self.landmarks_,
                                self._landmark_factor, n_threads)(X)
