"""The posterior variance of the PCG fit without an n x n matrix: the variance of f(x) given the
training targets nearest x and global summaries of all of them.

The exact posterior variance k(x, x) - k^T (K + lam I)^{-1} k needs (K + lam I)^{-1} to a
relative accuracy of about the variance over k(x, x) (1e-2 on kin40k): no low-rank or sparse
approximation of the inverse reaches it where the kernel has thousands of eigenvalues above
lam (doc/design.md, "The posterior variance of the PCG fit").  A variance given *part* of the
data is a variance all the same, never negative, and never below the exact one.  So
:func:`conditional_variance` conditions f(x) on

* the targets y_N of the ``NEIGHBOURS`` training rows of largest kernel value to a group of
  about ``GROUP`` nearby test points (their near field), and
* ``SUMMARIES`` global statistics Q^T y, Q an orthonormal basis of the kernel columns at
  block-RPCholesky pivots of the training rows (the far field),

which is exact Gaussian conditioning on (y_N, Q^T y):
var(x) = k(x, x) - b^T S^{-1} b with S = [E_N Q]^T (K + lam I) [E_N Q] and b = [E_N Q]^T k.
It is the exact variance when the neighbours are every training row.  Cost: (K + lam I) Q once
(2 n^2 p flops by the fused kernel engine) and a Cholesky factor of size s + p per group;
memory 8 (2 n p + (s + p)^2) bytes, no n x n matrix.
"""
from __future__ import annotations

import numpy as np

from .. import _linalg
from .._memory import check_memory
from ..kernels import kernel_kind
from ..kernels._api import _kernel_matrix_trusted, _kernel_matvec_trusted
from ..oasis.api import nystrom_factor
from ..oasis.block_rpcholesky import BLOCK

__all__ = ["GROUP", "NEIGHBOURS", "SUMMARIES", "conditional_variance", "conditional_flops",
           "variance_bytes"]

# Measured at 10 000 rows of kin40k (its selected ARD kernel, lam 7.1e-3) against the Cholesky
# variance (doc/design.md): the latent std's median / largest relative error was 5.3% / 16% for
# the 2048 nearest rows of each test point alone, 2.6% / 8.9% for 4096 rows per group of 20,
# and with these values 1.25% / 4.2% at its 4 000 test points (elevators 0.015% / 0.09%, pol
# 0.022% / 1.5%; results/pcg_std.json).
NEIGHBOURS = 4096
SUMMARIES = 1024
GROUP = 50


def variance_bytes(n, m):
    """Peak bytes of :func:`conditional_variance` for n training rows and m test points."""
    s, p = _sizes(n)
    g = min(GROUP, max(m, 1))
    # Q and (K + lam I) Q (RPCholesky's factor and Q before), one group's S and its kernel
    # rows, RPCholesky's blocks.
    return 8 * (2 * n * p + (s + p) ** 2 + 3 * g * (n + s + p) + m + 3 * n * BLOCK + p * p)


def conditional_flops(n, m):
    """Floating-point operations of :func:`conditional_variance` (the summaries' kernel product
    and a Cholesky factor per group), to set against the n x n factor's."""
    s, p = _sizes(n)
    groups = -(-m // GROUP)
    return 2.0 * n * n * p + groups * ((s + p) ** 3 / 3.0 + (s + p) ** 2 * GROUP)


def _sizes(n):
    """(neighbours, summaries) for n training rows: every row and no summary when they fit."""
    s = min(NEIGHBOURS, n)
    return s, (0 if s == n else min(SUMMARIES, n - s))


def conditional_variance(kernel, bandwidth, X, lam, X_test, prior, *, n_threads, max_memory):
    """The posterior variance of f at ``X_test`` given the nearest training targets and
    global summaries of them all (module docstring): at least the exact variance, equal to it
    when n <= ``NEIGHBOURS``.

    Parameters
    ----------
    kernel, bandwidth : the model's kernel name and bandwidth (scalar or per feature).
    X : ndarray (n, d)
        Training inputs.
    lam : float
        The ridge (noise variance over the signal variance).
    X_test : ndarray (m, d)
        Checked test inputs, X's dtype.
    prior : ndarray (m,)
        k(x, x) at X_test, overwritten with the variance.
    n_threads : int
    max_memory : int, float or None

    Returns
    -------
    ndarray (m,)
        ``prior``, now the variances in the kernel's units (the model scales them by its
        signal variance).
    """
    n, m = X.shape[0], X_test.shape[0]
    check_memory(variance_bytes(n, m), max_memory,
                 what=f"the posterior variance at {m} points of a PCG fit on {n} rows "
                      f"({min(NEIGHBOURS, n)} neighbours and {_sizes(n)[1]} summaries)",
                 fix="fit on a subsample (the need hardly depends on the number of test "
                     "points)")
    s, p = _sizes(n)
    var = prior
    if m == 0:
        return var
    summaries = _Summaries(kernel, bandwidth, X, lam, p, n_threads) if p else None
    kind = kernel_kind(kernel)[1]
    scale = np.asarray(bandwidth, dtype=np.float64)
    for group in _groups(np.asarray(X_test, dtype=np.float64) / scale, GROUP):
        K_tx = np.asarray(_kernel_matrix_trusted(kind, bandwidth, X_test[group], X, n_threads),
                          dtype=np.float64)
        near = _nearest(K_tx, s)
        var[group] -= _explained(kind, bandwidth, X, lam, near, K_tx, summaries, n_threads)
    return var


class _Summaries:
    """Q (n, q) with orthonormal columns (q <= p) spanning the kernel columns at p pivots of
    block RPCholesky (the PCG fit's preconditioner's selection, at a fixed seed: the variance
    is a function of the model alone), and (K + lam I) Q, Q^T (K + lam I) Q."""

    # Gram eigenvalues below this fraction of the largest are dropped: their directions are
    # rounding, and conditioning on fewer statistics is still exact conditioning, on less.
    RELATIVE_FLOOR = 1e-10
    SEED = 0

    def __init__(self, kernel, bandwidth, X, lam, p, n_threads):
        Xq = X if X.dtype == np.float64 else np.asarray(X, dtype=np.float64)
        # F F^T ~ K with F spanning K(X, pivots); the pivots follow the kernel's residual, so
        # they cover where the data are (farthest points chase outliers: on elevators their
        # std erred by 11% at the median against 1.2% on kin40k).
        F = nystrom_factor(Xq, p, method="block_rpcholesky", kernel=kernel, sigma=bandwidth,
                           seed=self.SEED, n_jobs=n_threads, max_memory=None)
        # An orthonormal basis keeps Q^T A Q's eigenvalues at lam and above.  From F^T F's
        # eigenpairs, Q = F V w^{-1/2}: tiled GEMMs and one p x p eigh on one thread (the same
        # bits for any n_jobs), where LAPACK's Householder QR took 11 s at n = 36 000, p = 1024.
        w, V = _linalg.eigh(_linalg.gram(F, trans=True, n_threads=n_threads), n_threads=1)
        keep = w > self.RELATIVE_FLOOR * max(float(w[-1]), np.finfo(float).tiny)
        V = np.ascontiguousarray(V[:, keep] / np.sqrt(w[keep]))
        self.Q = _linalg.matmul(F, V, n_threads=n_threads)
        del F
        self.AQ = _kernel_matvec_trusted(kernel_kind(kernel)[1], bandwidth, Xq, Xq, self.Q,
                                         n_threads)
        self.AQ += lam * self.Q
        self.G = _linalg.matmul(self.Q, self.AQ, trans_a=True, n_threads=n_threads)
        self.G = 0.5 * (self.G + self.G.T)


def _explained(kind, bandwidth, X, lam, near, K_tx, summaries, n_threads):
    """|L^{-1} b|^2 for each test row of K_tx: the variance the conditioning explains."""
    A_nn = np.asarray(_kernel_matrix_trusted(kind, bandwidth, X[near], X[near], n_threads),
                      dtype=np.float64)
    A_nn.flat[:: len(near) + 1] += lam
    B = K_tx[:, near]
    if summaries is not None:
        s, p = len(near), summaries.G.shape[0]
        S = np.empty((s + p, s + p))
        S[:s, :s] = A_nn
        S[s:, :s] = summaries.AQ[near].T
        S[s:, s:] = summaries.G
        B = np.hstack([B, _linalg.matmul(K_tx, summaries.Q, n_threads=n_threads)])
        try:
            factor = _linalg.cholesky(S, overwrite=True, n_threads=n_threads)
        except np.linalg.LinAlgError:
            # Summaries nearly inside the neighbours' span (rounding makes S indefinite):
            # the neighbours alone, a variance given less, still at least the exact one.
            factor, B = None, B[:, :s]
    if summaries is None or factor is None:
        factor = _linalg.cholesky(A_nn, overwrite=True, n_threads=n_threads)
    V = _linalg.solve_triangular(factor, np.ascontiguousarray(B.T), lower=True,
                                 n_threads=n_threads)
    return np.einsum("ij,ij->j", V, V)


def _nearest(K_tx, s):
    """The s training rows of largest kernel value to any of the group's test points, in
    training order (ties broken by position: the same rows for any thread count)."""
    relevance = K_tx.max(axis=0)
    if s >= relevance.size:
        return np.arange(relevance.size)
    order = np.argsort(-relevance, kind="stable")
    return np.sort(order[:s])


def _groups(scaled, size):
    """ceil(m / size) index arrays of at most ``size`` test points each, by recursive splits
    along the widest scaled coordinate (a k-d tree's leaves), each cut at a multiple of the
    leaves below it so that every group but one is full: nearby points share their neighbours,
    and the number of factors is the least."""
    pending, groups = [np.arange(scaled.shape[0])], []
    while pending:
        rows = pending.pop()
        leaves = -(-rows.size // size)
        if leaves <= 1:
            groups.append(rows)
            continue
        part = scaled[rows]
        axis = int(np.argmax(np.ptp(part, axis=0)))
        order = rows[np.argsort(part[:, axis], kind="stable")]
        cut = (leaves // 2) * size
        pending += [order[cut:], order[:cut]]
    return groups
