"""GP-GRIEF-II: the type-II fit, L-BFGS-B searches of the log marginal likelihood over
[log lengthscales, log s2, log noise] from the initial point and restarts, the best kept."""
from __future__ import annotations

import numpy as np
from scipy.optimize import minimize

from ..hyperparameters.exact_gp import BOUNDS
from ._basis import GriefBasis
from ._lml import plain_lml
from ._posterior import Type2Posterior
from ._type2 import type2_lml

__all__ = ["bounds_of", "fit_type2", "optimise", "refit_amplitudes", "screened_start"]


def fit_type2(theta0, Xs, ys, grids, p, rng, optimize, maxiter, optimize_subset, n_restarts,
              n_threads):
    """Type-II fit: the searches (see fit_grief, n_restarts), the best kept, the final model.

    Returns (posterior, lml, record): the :class:`Type2Posterior` at the kept hyperparameters,
    its LML on all points and the searches' record as keyword arguments of
    :class:`hkern.grief.GriefGP` (standardised units).
    """
    n, d = Xs.shape
    search = None
    if optimize_subset is not None and optimize_subset < n:
        search = np.sort(rng.choice(n, size=optimize_subset, replace=False))
    Xq, yq = (Xs, ys) if search is None else (Xs[search], ys[search])
    searching = optimize and maxiter > 0
    starts = [theta0]
    screened = screened_start(theta0, grids) if searching else None
    if screened is not None:
        starts.append(screened)
    # Drawn after the subsets so that n_restarts=0 reproduces the single-search stream.
    starts += [np.concatenate([theta0[:d] + rng.standard_normal(d), theta0[d:]])
               for _ in range(n_restarts if searching else 0)]
    thetas, lmls, n_iters = [], [], []
    for start in starts:
        theta, lml, n_iter = optimise(start, Xq, yq, grids, p, optimize, maxiter, n_threads)
        if search is not None:
            lml = np.nan
        if len(starts) > 1 and not np.isfinite(lml):
            # Compare the candidates on all training points, not on the search subset.
            lml = type2_lml(theta, Xs, ys, grids, p, grad=False, n_threads=n_threads)[0]
        thetas.append(theta)
        lmls.append(float(lml))
        n_iters.append(n_iter)
    best = int(np.nanargmax(lmls)) if len(starts) > 1 else 0
    theta = thetas[best]
    lml, _, basis, L, beta = type2_lml(theta, Xs, ys, grids, p, grad=False, n_threads=n_threads)
    posterior = Type2Posterior(basis, L, beta, float(np.exp(theta[d + 1])))
    record = dict(theta=theta, restart_lmls=np.array(lmls), restart_thetas=np.array(thetas),
                  restart=best, screened=screened is not None, n_iter=n_iters[best],
                  restart_n_iter=np.array(n_iters, dtype=np.intp))
    return posterior, float(lml), record


def bounds_of(d):
    return [BOUNDS["log_ls"]] * d + [BOUNDS["log_s2"], BOUNDS["log_noise"]]


def screened_start(theta0, grids):
    """theta0 with the inputs its grid does not resolve switched off (lengthscale at its upper
    bound), or None when every input is resolved.

    An input whose lengthscale is below the smallest gap of its grid has a flat 1-D grid
    spectrum (K^(i) ~ I), so nearly every one of its mbar_i eigenfunctions ties with the first
    and Algorithm 1 spends the p slots on their products.  The exact-GP initialisation on a
    subset can leave such lengthscales where the subset barely sees an input: on
    keggundirected split 0 three sparse inputs (99.5% of the values equal, the rest up to 52
    standard deviations away; 4 to 5 off-mode values in the 1000 points) kept lengthscale ~1
    against grid gaps of 5.8 and 10.7.  The LML on all points was -63 000 after the amplitude
    re-fit and the search from there could not leave it (test RMSE 0.62); with the three
    inputs off it is +38 500 before any search (RMSE 0.117, the paper 0.118).  The switched-off
    start is an extra search, not a replacement: a switched-off input stays off (the LML is
    flat there), and on breastcancer the search from the plain start ends higher on 4 of 10
    folds.
    """
    d = len(grids)
    gaps = np.array([np.min(np.diff(g)) for g in grids])
    unresolved = np.exp(theta0[:d]) < gaps
    if not unresolved.any():
        return None
    off = theta0.copy()
    off[:d][unresolved] = BOUNDS["log_ls"][1]
    return off


def optimise(theta0, X, y, grids, p, optimize, maxiter, n_threads):
    """L-BFGS-B on -LML / n (scaled so the tolerances do not depend on n), from theta0 clipped
    to the bounds, with s2 and the noise re-fitted first.

    Returns (theta, lml, n_iter): the best point evaluated, its LML on (X, y) (nan when no search
    ran) and the iterations L-BFGS-B made (0 without a search).
    """
    if not optimize or maxiter == 0:
        return theta0, np.nan, 0
    n, d = X.shape
    bounds = bounds_of(d)
    theta0 = np.clip(theta0, [b[0] for b in bounds], [b[1] for b in bounds])
    theta0 = refit_amplitudes(theta0, X, y, grids, p, bounds[d:], n_threads)
    best = {"f": np.inf, "x": theta0}

    def neg(theta):
        lml, g, *_ = type2_lml(theta, X, y, grids, p, n_threads=n_threads)
        if -lml < best["f"]:
            best.update(f=-lml, x=theta.copy())
        return -lml / n, -g / n

    result = minimize(neg, theta0, jac=True, method="L-BFGS-B", bounds=bounds,
                      options={"maxiter": maxiter})
    # The LML is piecewise smooth (the index set is discrete): keep the best point seen.
    return best["x"], -best["f"], int(result.nit)


def refit_amplitudes(theta, X, y, grids, p, bounds, n_threads):
    """Re-fit s2 and the noise at the initial lengthscales before the full search.

    The exact-GP initial noise is often far too small for the rank-p kernel (the residual the
    basis cannot represent must be explained as noise); starting the full search there let it
    slide into the "everything is noise" optimum on yacht.  With the lengthscales fixed, Phi is
    fixed, so this 2-parameter search costs O(p^3) per step after one O(n p^2) Gram matrix.
    """
    n, d = X.shape
    basis = GriefBasis(grids, np.exp(theta[:d]), p)
    A, r = basis.gram(X, y, n_threads)
    yy = float(y @ y)

    def neg(t):
        s2, noise = np.exp(t)
        lml, dw, dnoise, _, _ = plain_lml(yy, r, A, n, np.full(basis.p, s2), noise)
        return -lml / n, -np.array([s2 * dw.sum(), noise * dnoise]) / n

    res = minimize(neg, theta[d:], jac=True, method="L-BFGS-B", bounds=bounds)
    return np.concatenate([theta[:d], res.x])
