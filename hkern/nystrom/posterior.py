"""The posterior of the Nystrom Gaussian process that a Nystrom model predicts with: the
features phi(x) = L^{-1} k(Z, x), L L^T = K(Z, Z) + jitter I, and the factor R of
Phi^T Phi + lam I (:class:`hkern._gp.FeatureGaussianProcess`).

The direct solver has both from its solve; FALKON solves without forming Phi^T Phi, so
:func:`falkon_posterior` accumulates it in one pass over the training rows: 2 n r^2 flops (the
triangular solve and the Gram matrix of every row block of C = K(X, Z)) and 2 r^2 numbers.
That is far more than FALKON's fit (its preconditioner is O(r^3), each iteration O(n r): on
kin40k with 8192 centres the pass took 120 of a 156 s fit, the solve about 4 s), so a serial
FALKON model makes it when its std is first asked for (:class:`DeferredPosterior`).
"""
from __future__ import annotations

import numpy as np

from .. import _linalg
from .._ridge import feature_gram, ridge_factor
from ..kernels._api import _kernel_matrix_trusted

__all__ = ["DeferredPosterior", "falkon_posterior", "falkon_posterior_bytes",
           "nystrom_features"]


def nystrom_features(kind, bandwidth, Z, L, n_threads):
    """``features(rows)``: Phi = K(rows, Z) L^{-T} for a block of rows (float64, or float32
    rows widened), solved in C = K(rows, Z)'s memory (rows r^2 flops: half a product with an
    explicit L^{-T})."""
    def features(rows):
        rows = np.asarray(rows, dtype=np.float64)
        C = _kernel_matrix_trusted(kind, bandwidth, rows, Z, n_threads)
        return _linalg.solve_triangular(L, C, lower=True, trans=True, left=False,
                                        n_threads=n_threads, overwrite_b=True)
    return features


# The rows of a block of the pass over X: the features' block and, for a float32 X, its rows
# widened to float64 take at most this many bytes (a float32 X is not copied whole).
_BLOCK_BYTES = 32 * 2**20


def _block_rows(n, r, d, widened):
    """Rows per block of :func:`falkon_posterior`'s pass: a block's C (rows r) and, for a
    float32 X, its widened rows (rows d) within _BLOCK_BYTES, or a sixteenth of X's float64
    size for a float32 X (as FALKON's own passes widen it)."""
    budget = min(_BLOCK_BYTES, n * d) if widened else _BLOCK_BYTES
    return int(max(256, min(n, budget // (8 * (r + (d if widened else 0))))))


def falkon_posterior_bytes(n, r, d, x_dtype=np.float64):
    """Peak bytes of :func:`falkon_posterior`: L and the Gram matrix (8 r^2 each), K(Z, Z)'s
    copy while L is formed, and one block of rows."""
    widened = np.dtype(x_dtype) == np.float32
    rows = min(n, _block_rows(n, r, d, widened))
    return 16 * r * r + 8 * rows * (r + (d if widened else 0))


def falkon_posterior(inputs, Z, jitter, n_threads, sum_over_ranks=None):
    """(L, R) for FALKON's model on ``inputs`` with centres Z: L L^T = K(Z, Z) + jitter I (the
    jitter FALKON's factors used, ``solver_trace_.jitter``) and R R^T = Phi^T Phi + lam I.
    ``sum_over_ranks``: on one MPI rank's shard, the sum of every rank's Gram matrix (added
    in rank order).  Its memory: :func:`falkon_posterior_bytes`, after FALKON's factors are
    freed."""
    return _factors(inputs.X, inputs.kind, inputs.bandwidth, inputs.lam, Z, jitter, n_threads,
                    sum_over_ranks)


def _factors(X, kind, bandwidth, lam, Z, jitter, n_threads, sum_over_ranks=None):
    r = Z.shape[0]
    n, d = X.shape
    W = _kernel_matrix_trusted(kind, bandwidth, Z, Z, n_threads)
    W.flat[:: r + 1] += jitter
    L = _linalg.cholesky(W, overwrite=True, n_threads=n_threads)
    gram, _ = feature_gram(nystrom_features(kind, bandwidth, Z, L, n_threads), X, r, r,
                           n_threads, rows=_block_rows(n, r, d, X.dtype == np.float32))
    if sum_over_ranks is not None:
        gram = np.ascontiguousarray(sum_over_ranks(gram))
    return L, ridge_factor(gram, lam, n_threads)


class DeferredPosterior:
    """FALKON's (L, R) (:func:`falkon_posterior`), made when first asked for: until then it
    holds the fit's training rows (a reference, or the fit's scaled copy for per-feature
    lengthscales), which it drops once the factors exist.

    Parameters
    ----------
    inputs : hkern._model.FitInputs
    Z : ndarray (r, d)
    jitter : float
    """

    def __init__(self, inputs, Z, jitter):
        self._X = inputs.X
        self._kind, self._bandwidth, self._lam = inputs.kind, inputs.bandwidth, inputs.lam
        self._Z, self._jitter = Z, jitter
        self._made = None

    def nbytes(self):
        """Bytes the model must allow for :meth:`factors`: 0 once they exist."""
        if self._made is not None:
            return 0
        n, d = self._X.shape
        return falkon_posterior_bytes(n, self._Z.shape[0], d, self._X.dtype)

    def factors(self, n_threads):
        """(L, R): made on the first call (one pass over the training rows)."""
        if self._made is None:
            self._made = _factors(self._X, self._kind, self._bandwidth, self._lam, self._Z,
                                  self._jitter, n_threads)
            self._X = None
        return self._made
