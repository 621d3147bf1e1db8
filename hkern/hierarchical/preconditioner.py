"""The HCK preconditioner of exact kernel ridge regression: M = K_hier + lam I.

K_hier (fit_hierarchical's kernel) keeps the exact kernel on the diagonal leaf blocks of a
partition tree and couples the blocks through Nystrom approximations on r landmarks per node;
M is symmetric positive definite and its solve is exact for it and costs O(n r) per column
(doc/specs/hck.md), so it can precondition CG on the exact system (K + lam I) a = y
(``fit_exact(solver="pcg", preconditioner="hck")``).  Where a Nystrom preconditioner of rank r
captures K's r leading directions, this one is exact at short range and low-rank at long range.
"""
from __future__ import annotations

import numpy as np

from .._threads import blas_threads
from .._validation import check_seed
from ..solvers.preconditioners import PreconditionerKind, register_preconditioner
from .factor import factorize_hck
from .plan import default_jitter, hck_fit_bytes, tree_depth

__all__ = ["HCK_PRECONDITIONER", "HCKPreconditioner", "hck_preconditioner_bytes"]


def hck_preconditioner_bytes(n, d, k, r, n_threads, itemsize=8):
    """Peak bytes of building an HCKPreconditioner of X (n x d) and applying it to k columns
    (always in float64: ``itemsize`` does not apply)."""
    return hck_fit_bytes(n, d, k, r, tree_depth(n, r), n_threads)


class HCKPreconditioner:
    """R -> (K_hier + lam I)^{-1} R in the training order (module docstring).

    Parameters
    ----------
    X : ndarray (n, d)
        Training inputs, C-contiguous float64, already divided by any lengthscales.
    r : int
        Landmarks per non-leaf node, 1 <= r < n (leaves of r to 2r points).
    kind : int
        The kernel engine's code.
    bandwidth : float
    lam : float
        The ridge, > 0.
    seed : None, int or numpy.random.Generator
        The tree's split directions and the landmarks.
    n_threads : int
        Threads (the result is the same for any value).

    Examples
    --------
    >>> import numpy as np
    >>> from hkern.hierarchical.preconditioner import HCKPreconditioner
    >>> X = np.random.default_rng(0).normal(size=(300, 2))
    >>> M = HCKPreconditioner(X, 32, kind=0, bandwidth=1.0, lam=0.1, seed=0)
    >>> M(np.ones((300, 1))).shape
    (300, 1)
    """

    def __init__(self, X, r, *, kind, bandwidth, lam, seed, n_threads=1):
        self.n_threads = n_threads
        self.r = r
        self._op, tree = factorize_hck(X, r, None, "random", check_seed(seed), kind, bandwidth,
                                       lam, default_jitter(lam), n_threads)
        self._perm = tree["perm"]

    @property
    def rank(self):
        """Landmarks per non-leaf node."""
        return self.r

    def __call__(self, R):
        """M^{-1} R for R of shape (n, j)."""
        R_tree = np.ascontiguousarray(R[self._perm])
        with blas_threads(1):
            out_tree = self._op.solve(R_tree, self.n_threads)
        out = np.empty_like(out_tree)
        out[self._perm] = out_tree
        return out


def _build(inputs, rank, *, seed, n_threads, max_memory=None, adaptive=False, dtype=np.float64):
    """An HCKPreconditioner of the prepared inputs (the Nystrom kinds' ``adaptive`` and
    ``dtype`` do not apply: the HCK preconditioner is float64)."""
    return HCKPreconditioner(inputs.X, rank, kind=inputs.kind, bandwidth=inputs.bandwidth,
                             lam=inputs.lam, seed=seed, n_threads=n_threads)


# fit_exact(solver="pcg", preconditioner="hck"): registered by its name when this module is
# imported (hkern/__init__ imports the hierarchical package), so that the fit, below this
# package, finds it without importing it.
HCK_PRECONDITIONER = register_preconditioner(
    PreconditionerKind("hck", _build, hck_preconditioner_bytes))
