"""The GRIEF basis: per-dimension grids, 1-D eigendecompositions, Algorithm 1, and Phi.

Nothing of size m = prod mbar_i is ever formed; the basis is held as d small (mbar_i x mbar_i)
matrices plus the (p, d) index set (doc/specs/grief.md, section 2).
"""
from __future__ import annotations

import numpy as np

from .. import _linalg
from ..kernels import kernel_matrix
from . import _core

__all__ = ["JITTER", "GriefBasis", "make_grids"]

# Added to the diagonal of every 1-D grid kernel matrix (the authors' code uses the same value)
# and the floor below which a 1-D eigenvalue is clipped before taking its log.
JITTER = 1e-12
# Rows of Phi computed at a time: bounds the memory of a pass over the data to BLOCK x p doubles.
BLOCK = 4096


def make_grids(X, grid_size):
    """Per-dimension grids: linspace of the training range with grid_size[i] points, or the
    sorted unique values when a dimension has no more than grid_size[i] of them."""
    grids = []
    for i in range(X.shape[1]):
        col = X[:, i]
        uniq = np.unique(col)
        if uniq.size <= grid_size[i]:
            grids.append(uniq.astype(np.float64))
        else:
            grids.append(np.linspace(col.min(), col.max(), int(grid_size[i])))
    return grids


def _eig_1d(grid, ls):
    """Eigenpairs of the jittered 1-D grid kernel matrix, eigenvalues descending and clipped."""
    K = kernel_matrix(grid.reshape(-1, 1), sigma=ls, n_jobs=1)
    K[np.diag_indices_from(K)] += JITTER
    lam, Q = np.linalg.eigh(K)
    lam, Q = lam[::-1].copy(), np.ascontiguousarray(Q[:, ::-1])
    return K, np.maximum(lam, JITTER), Q


def _eig_derivative(K, lam, Q, grid, ls):
    """d M / d log(ls) for M = Q diag(lam)^(-1/2), Gaussian kernel, from first-order perturbation.

    dK = K o S with S_ab = (u_a - u_b)^2 / ls^2 (the jitter is constant); dlam_a = q_a' dK q_a and
    dq_a = sum_{b != a} q_b (q_b' dK q_a) / (lam_a - lam_b).  Pairs of (numerically) equal
    eigenvalues are skipped: inside a degenerate eigenspace the eigenvectors are not
    differentiable, which is the caveat of doc/specs/grief.md (section 7, item 3).
    """
    Kbare = K - JITTER * np.eye(K.shape[0])
    S = (grid[:, None] - grid[None, :]) ** 2 / ls**2
    dK = Kbare * S
    B = Q.T @ dK @ Q
    gap = lam[None, :] - lam[:, None]              # gap[b, a] = lam_a - lam_b
    tol = 1e-10 * max(lam[0], 1.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        coef = np.where(np.abs(gap) > tol, B / gap, 0.0)
    np.fill_diagonal(coef, 0.0)
    dQ = Q @ coef
    dlam = np.diag(B).copy()
    dlam[lam <= JITTER] = 0.0                      # clipped eigenvalues are constants
    return dQ / np.sqrt(lam) - 0.5 * Q * (dlam / lam**1.5)


class GriefBasis:
    """p product eigenfunctions of a product kernel on a Cartesian grid.

    Parameters
    ----------
    grids : list of d 1-D arrays
        The grid of each dimension (lengths mbar_i >= 1).
    lengthscales : (d,) array
        Per-dimension Gaussian lengthscales (unit amplitude: k(x, x) = 1).
    p : int
        Number of basis functions wanted; min(p, prod mbar_i) are kept.
    idx : (p', d) intp array, optional
        Use this index set instead of running Algorithm 1 (used to differentiate at a fixed
        selection).
    """

    def __init__(self, grids, lengthscales, p, idx=None, kind=0):
        self.kind = kind
        self.grids = [np.asarray(g, dtype=np.float64) for g in grids]
        self.lengthscales = np.ascontiguousarray(lengthscales, dtype=np.float64)
        sizes = np.array([g.size for g in self.grids], dtype=np.intp)
        self.goff = np.concatenate([[0], np.cumsum(sizes)]).astype(np.intp)
        self.moff = np.concatenate([[0], np.cumsum(sizes**2)]).astype(np.intp)
        self.grid = np.concatenate(self.grids)
        self._K, self.lams, self.Qs = [], [], []
        for g, ls in zip(self.grids, self.lengthscales):
            K, lam, Q = _eig_1d(g, ls)
            self._K.append(K)
            self.lams.append(lam)
            self.Qs.append(Q)
        self.M = np.concatenate([(Q / np.sqrt(lam)).ravel() for Q, lam in zip(self.Qs, self.lams)])
        if idx is None:
            idx, log_values = _core.top_p([np.log(lam) for lam in self.lams], int(p))
        else:
            idx = np.ascontiguousarray(idx, dtype=np.intp)
            log_values = sum(np.log(self.lams[i])[idx[:, i]] for i in range(len(self.grids)))
        self.idx = idx
        self.log_eigenvalues = np.asarray(log_values)
        self.cols = np.ascontiguousarray(idx + self.goff[:-1][None, :], dtype=np.intp)

    @property
    def p(self):
        return self.idx.shape[0]

    def phi(self, X, n_threads=1):
        """Phi (n, p) for inputs X (n, d), C-contiguous float64."""
        out = np.empty((X.shape[0], self.p))
        _core.basis(self.kind, X, self.grid, self.goff, self.M, self.moff, self.lengthscales,
                    self.cols, out, n_threads)
        return out

    def phi_blocks(self, X, n_threads=1):
        """(start, Phi rows) for consecutive blocks of at most BLOCK rows of X."""
        for start in range(0, X.shape[0], BLOCK):
            yield start, self.phi(X[start:start + BLOCK], n_threads)

    def dM(self):
        """d M / d log(lengthscale_i) for every dimension, concatenated like M."""
        parts = [_eig_derivative(K, lam, Q, g, ls).ravel()
                 for K, lam, Q, g, ls in zip(self._K, self.lams, self.Qs, self.grids,
                                             self.lengthscales)]
        return np.concatenate(parts)

    def lengthscale_grad_rows(self, X, G, Phi, dM, n_threads=1):
        """Per-row parts of sum_k G[r, k] dPhi[r, k] / dlog(ls_i), shape (n, d)."""
        out = np.empty((X.shape[0], X.shape[1]))
        _core.lengthscale_grad(self.kind, X, self.grid, self.goff, self.M, dM, self.moff,
                               self.lengthscales, self.cols, G, Phi, out, n_threads)
        return out

    def gram(self, X, y, n_threads=1):
        """A = Phi' Phi (p, p) and r = Phi' y (p,), accumulated over row blocks (Phi is never
        whole)."""
        A = np.zeros((self.p, self.p))
        r = np.zeros(self.p)
        for start, Phi in self.phi_blocks(X, n_threads):
            A += _linalg.gram(Phi, trans=True, n_threads=n_threads)
            r += _linalg.matvec(Phi, y[start:start + Phi.shape[0]], trans=True)
        return A, r
