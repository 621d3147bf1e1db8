"""GP-GRIEF-I: the type-I fit, MALA over per-basis weights and the noise in the SVD basis of the
training points, at fixed lengthscales (doc/specs/grief.md, section 4)."""
from __future__ import annotations

import numpy as np

from ._basis import GriefBasis
from ._lml import svd_lml, svd_transform
from ._mala import lognormal_params, mala
from ._posterior import Type1Posterior

__all__ = ["fit_type1"]


def fit_type1(theta0, X, y, grids, p, rng, n_iter, burn_in, thin, w_prior, n_threads):
    """MALA over [log w, log noise] in the SVD basis at fixed lengthscales theta0[:d].

    Returns (posterior, lml, record): the :class:`Type1Posterior`, the LML at the posterior-mean
    weights and noise, and the sampler's record as keyword arguments of
    :class:`hkern.grief.GriefGP` (standardised units).
    """
    n, d = X.shape
    basis = GriefBasis(grids, np.exp(theta0[:d]), p)
    A, r = basis.gram(X, y, n_threads)
    s, V, uy = svd_transform(np.exp(theta0[d]) * A, np.sqrt(np.exp(theta0[d])) * r)
    # The amplitude s2 is folded into Phi (fixed, doc/specs/grief.md, 7.2); the SVD basis
    # absorbs it anyway.
    V = V * np.sqrt(np.exp(theta0[d]))
    rho = uy**2
    noise0 = float(np.exp(theta0[d + 1]))
    mu_w, s2_w = lognormal_params(1.0, 100.0)
    mu_n, s2_n = lognormal_params(noise0, 0.04)
    pt = s.size
    # "kernel": mode s_i^2 with the paper's log-spread; the log-normal with mode M has
    # mu = log M + s2 for a fixed log-variance s2 (doc/specs/grief.md, section 4).
    mu_ws = np.full(pt, mu_w) if w_prior == "unit" else 2.0 * np.log(s) + s2_w
    mu = np.concatenate([mu_ws, [mu_n]])
    s2 = np.concatenate([np.full(pt, s2_w), [s2_n]])
    yy = float(y @ y)
    samples, acc, step = mala(yy, rho, n, mu, s2, rng, n_iter, burn_in, thin)
    w, noise = np.exp(samples[:, :-1]), np.exp(samples[:, -1])
    coef = uy * w / (w + noise[:, None])                      # per-sample mean coefficients
    w_mean, noise_mean = w.mean(axis=0), float(noise.mean())
    lml = svd_lml(yy, rho, n, w_mean, noise_mean, grad=False)[0]
    posterior = Type1Posterior(
        basis, V, s, coef_mean=coef.mean(axis=0), coef_samples=coef,
        var_weights=np.mean(w * noise[:, None] / (w + noise[:, None]), axis=0), noise=noise_mean)
    return posterior, float(lml), dict(samples=samples, acceptance_rate=float(acc),
                                       mala_step=step)
