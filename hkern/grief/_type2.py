"""GP-GRIEF-II: the LML of the eq. 3 kernel s2 Phi Phi' + noise I as a function of
theta = [log ls_1..d, log s2, log noise], with its exact gradient at a fixed index set.

Lengthscale gradients are analytic: dLML = sum_rk G[r, k] dPhi[r, k] with
G = alpha beta' - Phi P^-1 (alpha = C^-1 y, beta = P^-1 Phi'y), and dPhi / dlog(ls_i) follows from
the first-order perturbation of the 1-D eigenproblem of dimension i with the selected index set
held fixed (the LML is only piecewise smooth in theta because Algorithm 1's selection is
discrete).  Cost per evaluation: O(n p^2) (the Gram matrix and Phi P^-1), in row blocks.
"""
from __future__ import annotations

import numpy as np

from .. import _linalg
from ._basis import GriefBasis
from ._lml import plain_lml

__all__ = ["type2_lml"]


def type2_lml(theta, X, y, grids, p, idx=None, grad=True, n_threads=1):
    """(lml, grad (d + 2,) or None, basis, L, beta) for the type-II GRIEF model.

    X (n, d) and y (n,) are the data as the model sees them (standardised); ``idx`` fixes the
    index set (None: Algorithm 1 at this theta).
    """
    n, d = X.shape
    ls, s2, noise = np.exp(theta[:d]), float(np.exp(theta[d])), float(np.exp(theta[d + 1]))
    basis = GriefBasis(grids, ls, p, idx=idx)
    A, r = basis.gram(X, y, n_threads)
    w = np.full(basis.p, s2)
    lml, dw, dnoise, L, beta = plain_lml(float(y @ y), r, A, n, w, noise, grad=grad)
    if not grad:
        return lml, None, basis, L, beta
    g = np.empty(d + 2)
    g[d] = s2 * dw.sum()
    g[d + 1] = noise * dnoise
    dM = basis.dM()
    acc = np.zeros(d)
    for start, Phi in basis.phi_blocks(X, n_threads):
        yb = y[start:start + Phi.shape[0]]
        alpha = (yb - _linalg.matvec(Phi, beta)) / noise
        T = _linalg.solve_triangular(L, Phi.copy(), lower=True, trans=True, left=False,
                                     n_threads=n_threads)
        PhiPinv = _linalg.solve_triangular(L, T, lower=True, left=False, n_threads=n_threads)
        G = np.outer(alpha, beta)
        G -= PhiPinv
        acc += basis.lengthscale_grad_rows(X[start:start + Phi.shape[0]], G, Phi, dM,
                                           n_threads).sum(axis=0)
        # Free this block's n x p temporaries before the next block of Phi is formed (the
        # peak is then four blocks, not six).
        del T, PhiPinv, G
    g[:d] = acc
    return lml, g, basis, L, beta
