"""The predictive moments of a fitted GRIEF model at basis values Phi (standardised units).

One class per inference (doc/specs/grief.md, sections 3 and 4); both hold the basis, so that a
model predicts as ``posterior.moments(Phi)`` over ``posterior.basis.phi_blocks(X)``.
"""
from __future__ import annotations

import numpy as np

from .. import _linalg

__all__ = ["Type1Posterior", "Type2Posterior"]


class Type2Posterior:
    """Type II: the GP with kernel s2 Phi Phi' + noise I at its fitted hyperparameters.

    Mean phi' beta and latent variance noise phi' P^-1 phi, P = (noise / s2) I + Phi'Phi.

    Attributes
    ----------
    basis : hkern.grief.GriefBasis
        The p eigenfunctions at the fitted lengthscales.
    L : ndarray (p, p)
        Lower Cholesky factor of P.
    beta : ndarray (p,)
        P^-1 Phi'y.
    noise : float
        Noise variance (standardised units).
    """

    def __init__(self, basis, L, beta, noise):
        self.basis = basis
        self.L = L
        self.beta = beta
        self.noise = noise

    def moments(self, Phi, return_var, n_threads):
        """(mean, latent variance or None) at the points whose basis values are Phi (m, p)."""
        mean = _linalg.matvec(Phi, self.beta)
        if not return_var:
            return mean, None
        T = _linalg.solve_triangular(self.L, Phi.T.copy(), lower=True)
        return mean, self.noise * np.einsum("ij,ij->j", T, T)


class Type1Posterior:
    """Type I: the average over the MCMC samples of per-basis weights w and noise, in the SVD
    basis U~ = Phi V / s of the training points.

    Mean: the sample average of U~ c_k (c_k the posterior-mean coefficients of sample k).
    Variance: the expected latent variance E[V] = (U~^2) E[w noise / (w + noise)] plus the
    spread of the sample means.

    Attributes
    ----------
    basis : hkern.grief.GriefBasis
        The p eigenfunctions at the initial lengthscales (fixed in type I).
    V : ndarray (p, p~)
        Right singular vectors of the (amplitude-scaled) training basis, scaled by sqrt(s2).
    s : ndarray (p~,)
        Its singular values above the SVD cutoff.
    coef_mean : ndarray (p~,)
        Mean over the samples of the coefficients uy w / (w + noise).
    coef_samples : ndarray (n_kept, p~)
        The coefficients of each kept sample.
    var_weights : ndarray (p~,)
        Mean over the samples of w noise / (w + noise).
    noise : float
        Posterior mean of the noise (standardised units).
    """

    def __init__(self, basis, V, s, coef_mean, coef_samples, var_weights, noise):
        self.basis = basis
        self.V = V
        self.s = s
        self.coef_mean = coef_mean
        self.coef_samples = coef_samples
        self.var_weights = var_weights
        self.noise = noise

    def moments(self, Phi, return_var, n_threads):
        """(mean, latent variance or None) at the points whose basis values are Phi (m, p)."""
        Pt = _linalg.matmul(Phi, self.V, n_threads=n_threads) / self.s
        mean = Pt @ self.coef_mean
        if not return_var:
            return mean, None
        e_var = (Pt**2) @ self.var_weights
        spread = _linalg.matmul(Pt, self.coef_samples, trans_b=True,
                                n_threads=n_threads) - mean[:, None]
        return mean, e_var + np.mean(spread**2, axis=1)
