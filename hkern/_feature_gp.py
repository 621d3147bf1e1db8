"""The Gaussian process of a model that is ridge regression on explicit features: Nystrom and
random features (:class:`FeatureGaussianProcess`)."""
from __future__ import annotations

import numpy as np

from . import _linalg
from ._gp import GaussianProcessKRR, MarginalLikelihood
from ._memory import check_memory
from ._ridge import block_rows, row_blocks

__all__ = ["FeatureGaussianProcess"]


class FeatureGaussianProcess(GaussianProcessKRR):
    """Mixin: the predictive distribution of a model that is ridge regression on features
    phi(x) (p of them) with weights' posterior factor R, R R^T = Phi^T Phi + lam I (put it
    before :class:`hkern._model.KernelRidgeModel` in the bases).

    With unit prior weights the latent f(x) = phi(x)^T w has prior covariance phi(x)^T phi(x')
    and posterior variance lam |R^{-1} phi(x)|^2: the Bayesian linear model that the fit is,
    whose amplitude the profiled likelihood estimates (for Nystrom features the
    subset-of-regressors form; why not the DTC form: :class:`hkern.NystromKRR`).

    Subclasses are constructed with ``posterior_factor`` (R) and implement
    ``_features(X, n_threads)``.  They keep only the weights, not the training inputs: the
    likelihood of other targets is not available.
    """

    # The likelihood's fixes and refusal of other targets are the feature models' own
    # (MarginalLikelihood's), not those of the models that keep their training inputs.
    _NO_EVIDENCE_FIX = MarginalLikelihood._NO_EVIDENCE_FIX
    _LABELS_FIX = MarginalLikelihood._LABELS_FIX
    _evidence_at = MarginalLikelihood._evidence_at

    def _n_train(self):
        # Refused in _evidence_at whatever the targets' length.
        return self._evidence.n if self._evidence is not None else 0

    def _posterior_blocks(self, X, n_threads, max_memory, what):
        """(start, stop, V) over blocks of X: V = R^{-1} Phi^T for the block's features Phi,
        in blocks of about 32 MiB (p columns)."""
        p = self._posterior_factor.shape[0]
        m = X.shape[0]
        check_memory(24 * min(m, block_rows(m, p)) * p + 8 * m, max_memory,
                     what=f"{what} at {m} points with {p} features", fix="pass fewer points")
        for start, stop in row_blocks(m, p):
            Phi = self._features(X[start:stop], n_threads)
            V = _linalg.solve_triangular(self._posterior_factor, Phi.T, lower=True,
                                         n_threads=n_threads)
            yield start, stop, V

    def _latent_variance(self, X, n_threads, max_memory):
        var = np.empty(X.shape[0])
        for start, stop, V in self._posterior_blocks(X, n_threads, max_memory,
                                                          "the posterior variance"):
            var[start:stop] = self.lam * np.einsum("ij,ij->j", V, V)
        return var

    def _latent_covariance(self, X, n_threads, max_memory):
        m, p = X.shape[0], self._posterior_factor.shape[0]
        check_memory(8 * m * m + 24 * m * p, max_memory,
                     what=f"the posterior covariance at {m} points", fix="pass fewer points")
        Phi = self._features(X, n_threads)
        V = _linalg.solve_triangular(self._posterior_factor, Phi.T, lower=True,
                                     n_threads=n_threads)
        return self.lam * _linalg.matmul(V, V, trans_a=True, n_threads=n_threads)
