"""Ridge regression on explicit features, accumulated block by block.

Feature methods (Nystrom, random Fourier features) produce Phi (n, p) in row blocks; only the
p x p Gram matrix and p x k right-hand sides are kept, so fitting needs O(p^2 + block * p) memory
instead of O(n p).
"""
from __future__ import annotations

import numpy as np

from .. import _linalg
from .._threads import blas_threads

__all__ = ["block_rows", "ridge_on_feature_blocks"]

_BLOCK_BYTES = 32 * 2**20


def block_rows(n_samples, width):
    """Rows per block so that a block of ``width`` float64 columns takes about 32 MiB."""
    return int(max(256, min(n_samples, _BLOCK_BYTES // (8 * max(width, 1)))))


def ridge_on_feature_blocks(feature_blocks, Y, lam, n_components, n_threads):
    """Solve (Phi^T Phi + lam I) W = Phi^T Y with Phi given as (start, stop, Phi_block) blocks.

    Parameters
    ----------
    feature_blocks : iterable of (int, int, ndarray)
        Consecutive row blocks of Phi covering rows 0..n-1.
    Y : ndarray (n, k)
    lam : float > 0
    n_components : int
        p, the number of feature columns.
    n_threads : int
        BLAS threads for the block products.

    Returns
    -------
    W : ndarray (p, k)
    """
    gram = np.zeros((n_components, n_components))
    rhs = np.zeros((n_components, Y.shape[1]))
    with blas_threads(n_threads):
        for start, stop, phi in feature_blocks:
            gram += phi.T @ phi          # NumPy dispatches A.T @ A to dsyrk
            rhs += phi.T @ Y[start:stop]
    gram.flat[:: n_components + 1] += lam
    # The Gram matrix is SPD by construction (lam > 0): Cholesky, never an explicit inverse.
    with blas_threads(n_threads):
        factor = _linalg.cholesky(gram)
        return _linalg.cho_solve(factor, rhs)
