"""Ridge regression on explicit features, accumulated block by block.

Feature methods (Nystrom, random Fourier features) produce Phi (n, p) in row blocks; only the
p x p Gram matrix and p x k right-hand sides are kept, so fitting needs O(p^2 + block * p) memory
instead of O(n p).
"""
from __future__ import annotations

import numpy as np

from . import _linalg
from ._gp import Evidence, ProfiledRidge, best_ridge, column_quads

__all__ = ["block_rows", "feature_gram", "ridge_dual", "ridge_factor", "ridge_on_features",
           "row_blocks"]

_BLOCK_BYTES = 32 * 2**20


def block_rows(n_samples, width):
    """Rows per block so that a block of ``width`` float64 columns takes about 32 MiB."""
    return int(max(256, min(n_samples, _BLOCK_BYTES // (8 * max(width, 1)))))


def row_blocks(n_rows, width):
    """(start, stop) of consecutive row blocks of about 32 MiB at ``width`` columns."""
    step = block_rows(n_rows, width)
    for start in range(0, n_rows, step):
        yield start, min(n_rows, start + step)


def ridge_on_features(features, X, Y, lam, n_components, block_width, n_threads):
    """Solve (Phi^T Phi + lam I) W = Phi^T Y for Phi = features(X), one row block at a time.

    Parameters
    ----------
    features : callable
        ``features(X_block)`` -> the (rows, p) block of Phi for a block of rows of X.
    X : ndarray (n, d)
    Y : ndarray (n, k)
    lam : float > 0 or hkern._gp.ProfiledRidge
        The ridge, or the interval in which to choose the one of the largest profiled
        likelihood (:func:`hkern._gp.best_ridge` on the eigendecomposition of Phi^T Phi).
    n_components : int
        p, the number of feature columns.
    block_width : int
        Columns of the widest array a block's features need: blocks are about 32 MiB at that
        width (:func:`row_blocks`).
    n_threads : int
        Threads (results are identical for any value).

    Returns
    -------
    W : ndarray (p, k)
    evidence : hkern._gp.Evidence
        y_j^T A^{-1} y_j and log det A for the model's target covariance A = Phi Phi^T + lam I
        (through Woodbury: log det A = (n - p) log lam + log det(Phi^T Phi + lam I) and
        A^{-1} y = (y - Phi W) / lam, so y^T A^{-1} y = (y^T y - (Phi^T y)^T W) / lam).  The
        difference loses digits when lam is below about 1e-12 relative to the targets' energy,
        far below any useful ridge.
    lam : float
        The ridge used.
    factor : ndarray (p, p)
        The lower Cholesky factor of Phi^T Phi + lam I: the posterior of the weights (the
        models' predictive variance, :class:`hkern._gp.FeatureGaussianProcess`).
    """
    gram, rhs = feature_gram(features, X, n_components, block_width, n_threads, Y)
    n = X.shape[0]
    if isinstance(lam, ProfiledRidge):
        lam = _ridge_from_gram(gram, rhs, Y, lam, primal=True, n_threads=n_threads)
    factor = ridge_factor(gram, lam, n_threads)
    W = _linalg.cho_solve(factor, rhs, n_threads=n_threads)
    logdet = (n - n_components) * np.log(lam) + _linalg.cholesky_logdet(factor)
    quad = (np.einsum("ij,ij->j", Y, Y) - column_quads(rhs, W)) / lam
    return W, Evidence(quad, float(logdet), n), lam, factor


def feature_gram(features, X, n_components, block_width, n_threads, Y=None, rows=None):
    """(Phi^T Phi, Phi^T Y) for Phi = features(X), accumulated over row blocks of about
    32 MiB at ``block_width`` columns (Phi^T Y None without Y).  ``rows``: blocks of that
    many rows instead, each block's Gram matrix added in place (no p x p temporary)."""
    gram = np.zeros((n_components, n_components))
    rhs = None if Y is None else np.zeros((n_components, Y.shape[1]))
    n = X.shape[0]
    blocks = row_blocks(n, block_width) if rows is None else \
        ((start, min(n, start + rows)) for start in range(0, n, rows))
    for start, stop in blocks:
        phi = features(X[start:stop])
        if rows is None:
            gram += _linalg.gram(phi, trans=True, n_threads=n_threads)
        else:
            _linalg.gram(phi, trans=True, n_threads=n_threads, out=gram)
        if Y is not None:
            rhs += _linalg.matmul(phi, Y[start:stop], trans_a=True, n_threads=n_threads)
        del phi         # before the next block's features: one block in memory, not two
    return gram, rhs


def ridge_factor(gram, lam, n_threads):
    """The lower Cholesky factor of gram + lam I, in gram's memory.  The Gram matrix is SPD by
    construction (lam > 0): Cholesky, never an explicit inverse."""
    gram.flat[:: gram.shape[0] + 1] += lam
    return _linalg.cholesky(gram, overwrite=True, n_threads=n_threads)


def ridge_dual(phi, Y, lam, n_threads):
    """The same ridge solution through the n x n dual system, for p > n features.

    W = Phi^T (Phi Phi^T + lam I)^{-1} Y, which equals (Phi^T Phi + lam I)^{-1} Phi^T Y
    (push-through identity) at O(n^2 p) instead of O(n p^2) cost and O(n^2) memory.  Returns
    W and the :class:`hkern._gp.Evidence` of A = Phi Phi^T + lam I, as
    :func:`ridge_on_features`, the ridge used (``lam`` may be a
    :class:`hkern._gp.ProfiledRidge` there too) and the factor of Phi^T Phi + lam I (p x p,
    O(n p^2 + p^3): the weights' posterior, which the predictive variance reads).
    """
    gram = _linalg.gram(phi, n_threads=n_threads)
    if isinstance(lam, ProfiledRidge):
        lam = _ridge_from_gram(gram, Y, Y, lam, primal=False, n_threads=n_threads)
    gram.flat[:: gram.shape[0] + 1] += lam
    factor = _linalg.cholesky(gram, overwrite=True, n_threads=n_threads)
    alpha = _linalg.cho_solve(factor, Y, n_threads=n_threads)
    evidence = Evidence(column_quads(Y, alpha), _linalg.cholesky_logdet(factor), Y.shape[0])
    del factor, gram
    primal = ridge_factor(_linalg.gram(phi, trans=True, n_threads=n_threads), lam, n_threads)
    return _linalg.matmul(phi, alpha, trans_a=True, n_threads=n_threads), evidence, lam, primal


def _ridge_from_gram(gram, B, Y, request, *, primal, n_threads):
    """The ridge in ``request`` (a ProfiledRidge) of the largest profiled likelihood of Y under
    A = Phi Phi^T + lam I, from the Gram matrix before any ridge was added: Phi^T Phi with
    B = Phi^T Y (``primal``), or Phi Phi^T itself with B = Y.

    Phi Phi^T has the nonzero eigenvalues s_i of Phi^T Phi = U S U^T, with eigenvectors
    Phi u_i / sqrt(s_i): the projection of y on one is (u_i^T Phi^T y) / sqrt(s_i).  Eigenvalues
    within round-off of zero (a Gram matrix is semi-definite) count as zero.
    """
    s, U = _linalg.eigh(gram)
    kept = s > max(s.max(initial=0.0) * len(s) * np.finfo(float).eps, np.finfo(float).tiny)
    squared = _linalg.matmul(U[:, kept], B, trans_a=True, n_threads=n_threads) ** 2
    if primal:
        squared /= s[kept, None]
    return best_ridge(s[kept], squared, np.einsum("ij,ij->j", Y, Y), Y.shape[0], request.low,
                      request.high)
