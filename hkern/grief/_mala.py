"""GP-GRIEF-I: Metropolis-adjusted Langevin sampling of the weights w and the noise
(doc/specs/grief.md, section 4).

The state is z = [log w_1..p~, log noise]; the target is the O(p~) SVD-basis LML plus log-normal
priors, which are normal densities in z (so no extra Jacobian term: the log-normal density of w
already includes it, and sampling z from a normal prior is the same model).
"""
from __future__ import annotations

import numpy as np

from ._lml import svd_lml

__all__ = ["TARGET_ACCEPT", "lognormal_params", "mala"]

# Optimal MALA acceptance rate (Roberts & Rosenthal 1998), as doc/specs/grief.md (7.7) recommends.
TARGET_ACCEPT = 0.574


def lognormal_params(mode, variance):
    """(mu, s2) of the log-normal with the given mode and variance of the variable itself.

    With t = exp(s2): mode = exp(mu - s2) and variance = (t - 1) t exp(2 mu + s2) give
    mode^2 t^3 (t - 1) = variance, solved for t > 1 by bisection (the left side increases).
    """
    lo, hi = 1.0, 2.0
    while mode**2 * hi**3 * (hi - 1.0) < variance:
        hi *= 2.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if mode**2 * mid**3 * (mid - 1.0) < variance:
            lo = mid
        else:
            hi = mid
    s2 = float(np.log(0.5 * (lo + hi)))
    return float(np.log(mode)) + s2, s2


def _log_target(z, yy, rho, n, mu, s2):
    """(log density, gradient) at z, or (-inf, None) where they do not fit a double.

    A proposal can land far in the tail (a large gradient times the step): there exp(z)
    overflows or underflows and the LML is infinite or NaN.  The log-normal priors put the
    density there below exp(-1000) relative to the bulk, so such a proposal has acceptance
    probability 0 to double precision and is rejected; the chain itself stays where both are
    finite.
    """
    with np.errstate(over="ignore", under="ignore", invalid="ignore", divide="ignore"):
        w, noise = np.exp(z[:-1]), np.exp(z[-1])
        lml, dw, dnoise = svd_lml(yy, rho, n, w, noise)
        logp = lml - 0.5 * np.sum((z - mu) ** 2 / s2)
        grad = np.concatenate([dw * w, [dnoise * noise]]) - (z - mu) / s2
    if not (np.isfinite(logp) and np.all(np.isfinite(grad))):
        return -np.inf, None
    return logp, grad


def mala(yy, rho, n, mu, s2, rng, n_iter=10_000, burn_in=1000, thin=50, step=None):
    """Sample z = [log w, log noise] by MALA; the step adapts during burn-in only.

    Parameters
    ----------
    mu, s2 : (p~ + 1,) arrays
        Prior means and variances of z (normal in z).
    Returns
    -------
    samples : (n_kept, p~ + 1) array of z after burn-in, every ``thin``-th iteration
    acceptance : float, acceptance rate after burn-in
    step : float, the final step size
    """
    z = mu - s2            # the prior mode in w-space: exp(mu - s2) is the log-normal mode
    logp, grad = _log_target(z, yy, rho, n, mu, s2)
    if grad is None:
        raise ValueError("GRIEF type-I sampling: the log density is not finite at the prior "
                         "mode (noise or weights beyond double precision); pass noise and "
                         "signal_variance within a few orders of magnitude of var(y)")
    eps = step if step is not None else 0.1 / np.sqrt(z.size) ** (1 / 3)
    log_eps = np.log(eps)
    samples, accepted, counted = [], 0, 0
    for it in range(n_iter):
        eps = np.exp(log_eps)
        mean_fwd = z + 0.5 * eps**2 * grad
        z_new = mean_fwd + eps * rng.standard_normal(z.size)
        logp_new, grad_new = _log_target(z_new, yy, rho, n, mu, s2)
        if grad_new is None:
            log_ratio = -np.inf         # outside the representable region: rejected
        else:
            mean_bwd = z_new + 0.5 * eps**2 * grad_new
            log_q_fwd = -np.sum((z_new - mean_fwd) ** 2) / (2 * eps**2)
            log_q_bwd = -np.sum((z - mean_bwd) ** 2) / (2 * eps**2)
            log_ratio = logp_new - logp + log_q_bwd - log_q_fwd
        accept = np.isfinite(log_ratio) and np.log(rng.uniform()) < log_ratio
        if accept:
            z, logp, grad = z_new, logp_new, grad_new
        if it < burn_in:
            # Robbins-Monro on log(step) towards the target acceptance rate.
            # min(1, exp(r)) as exp(min(r, 0)): the same value, without overflowing for r > 709
            rate = float(np.exp(min(log_ratio, 0.0))) if np.isfinite(log_ratio) else 0.0
            log_eps += (rate - TARGET_ACCEPT) / np.sqrt(it + 1.0)
        else:
            accepted += bool(accept)
            counted += 1
            if (it - burn_in) % thin == thin - 1:
                samples.append(z.copy())
    return np.array(samples), accepted / max(counted, 1), float(np.exp(log_eps))
