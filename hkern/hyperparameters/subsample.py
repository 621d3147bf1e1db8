"""The start of every hyperparameter selection: the exact Gaussian process's type-II maximum
likelihood on a random subsample (:func:`start_from_subsample`), and with ``sigma="ard"`` the
isotropic start the per-feature search is compared with (:func:`isotropic_origin`)."""
from __future__ import annotations

import functools
import time

import numpy as np

from .._memory import check_memory
from .._model import format_sigma
from .._targets import on_grid, on_target_grid, target_scale
from .._threads import budget_threads
from .exact_gp import fit_exact_gp, n_lengthscales

__all__ = ["isotropic_origin", "start_from_subsample"]

# Subsample sizes of the exact GP: "ard" searches d + 2 parameters from two starts at 500 points
# and refines once at 1000 (kin40k, HCK r = 512, after the search on all the data: test RMSE
# 0.1339 from 500 + 1000 points, 0.1342 from 1000, 0.1333 from 1000 + 2000, whose exact GP costs
# 6.3 s instead of 1.7 s); one lengthscale or none need fewer points, since the search on all
# the data sets the scale.
_SUBSAMPLES = {"ard": (500, 1000), "auto": (1000,), "given": (1000,)}
# The iterative solvers (hkern.hyperparameters.iterative) refine only a global scale and lam on
# all the data, so the shape comes from larger subsamples: on kin40k the lengthscales of 4000
# points give exact PCG a test RMSE of 0.070, those of 2000 points 0.079.  A stage of m points
# costs about 15 evaluations of m^3 / 3 flops (24 s at m = 4000 on this project's 2 cores),
# against one PCG fit of a few hundred products with the n x n kernel; it runs only on data
# with at least _ITERATIVE_ROWS_PER_POINT rows per subsample point.
_SUBSAMPLES_ITERATIVE = {"ard": (500, 1000, 2000, 4000), "auto": (1000, 2000, 4000),
                         "given": (1000, 2000, 4000)}
_ITERATIVE_ROWS_PER_POINT = 8
# A stage after the first (a warm start on more points) runs only on data with at least this
# many rows per parameter of the exact GP.  Its cost, about (d + 2) evaluations at m^3 each,
# against one fit's, about n r^2, stays bounded so: on elevators (d = 18, n = 14 939) and pol
# (d = 26, n = 13 500) the 1000-point stage cost 3 to 6 Nystrom fits (r = 512) and moved the
# test RMSE by at most 2.6%; kin40k, protein and keggundirected keep it.
_ROWS_PER_PARAMETER = 1000
# It also runs when it takes every row (n <= m, the direct solvers): the stage is then the exact
# GP of the data itself, at most 1000 points.  On concrete (n = 927, d = 8) the 500-point
# optimum, refined in scale and lam, stood 17 to 20 nats below the likelihood of the whole
# data's optimum (splits 1, 7 and 9); over ten splits fit_exact's test NLL was 3.009 against
# scikit-learn's GP's 2.985, and 2.980 with this stage.  That stage alone, warm from the 500
# points, still followed their draw: concrete split 3 with seeds 0-5 ended at LML -2947.1 to
# -2964.0 (test RMSE 4.28 to 5.40) and energy splits 1-4 spread 2 to 6 nats.  Searched also from
# the default starts and polished at scipy's tolerance, every seed ends within 0.7 nats of the
# others (concrete at the best, -2944.6; fit_exact 1.5 s -> 3.1 s on concrete, 1.9 s -> 4.7 s
# on energy); both without the polish still spread 5 nats on energy.  The ten splits' test NLL
# on concrete is then 2.98491, scikit-learn's GP's to 1e-6 (the same optimum; 2.980 came from
# the seed's draw).
# L-BFGS-B's relative tolerance on the subsample's LML: the lengthscales and lam it gives are a
# start, refined on all the data.  scipy's default (2.2e-9) spends about half of the evaluations
# on digits the refinement does not use; 1e-4 halves them again against 1e-6 (pol, 500 points:
# 136 evaluations against 294) with the same selected model to 0.5% of test RMSE.
_SUBSAMPLE_FTOL = 1e-4

def _subsample_start(data, sigma_mode, given_sigma, kind, rng, n_threads, max_memory,
                     scales=None, *, iterative=False, grid=None):
    """(sigma0, lam0, lml, size): the exact GP's optimum on a random subsample, in X's units,
    its lengthscales within what the data resolve (:mod:`hkern.hyperparameters.robust`).

    ``data``: the :class:`~hkern.hyperparameters.rows.SelectionRows` of X and the encoded y.
    ``scales``: X's :class:`~hkern.hyperparameters.robust.FeatureScales` (computed if None).
    ``iterative``: the larger stages of the iterative solvers (_SUBSAMPLES_ITERATIVE).
    ``grid``: the log lengthscales and log lam are rounded to multiples of it (None: not).
    """
    n, d = data.n, data.d
    mode = {"ard": "ard", "auto": "iso", "given": "fixed"}[sigma_mode]
    stages = (_SUBSAMPLES_ITERATIVE if iterative else _SUBSAMPLES)[sigma_mode]
    parameters = n_lengthscales(mode, d) + 2
    stages = stages[:1] + tuple(
        m for m in stages[1:] if (n >= _ROWS_PER_PARAMETER * parameters or n <= m)
        and (not iterative or n >= _ITERATIVE_ROWS_PER_POINT * m))
    sizes = list(dict.fromkeys(min(n, m) for m in stages))
    check_memory(6 * 8 * sizes[-1] ** 2, max_memory,
                 what=f"the exact GP on {sizes[-1]} points that starts the selection",
                 fix="pass numbers for sigma and lam")
    order = rng.permutation(n)
    # Standardise (the kernels are shift-invariant; the bounds of the search are relative):
    # per feature for "ard", one common scale otherwise (an isotropic kernel sees X's own
    # geometry).  Robustly and from all the data: one outlying row must not set the scale,
    # nor a column the subsample sees as constant (robust.py).
    if scales is None:
        scales = data.scales()
    centre = scales.centre
    spread = scales.spread if mode == "ard" else np.full(d, scales.common)
    # The rows of the largest stage, read once: each stage's are its first m.
    X, Y = data.rows(order[:sizes[-1]])
    Y = on_target_grid(Y, target_scale(Y))    # the same bits for c * y (_targets.py)
    fixed = None
    if mode == "fixed":
        bandwidth, lengthscales = given_sigma
        fixed = (np.full(d, bandwidth) if lengthscales is None else lengthscales) / spread
    theta = None
    # One lengthscale or none: one start, at the typical distance of standardised inputs
    # (the search on all the data sets the scale); "ard" needs both starts of fit_exact_gp.
    starts = None if mode == "ard" else (0.5 * np.log(d),)
    for m in sizes:
        Xm = np.ascontiguousarray((X[:m] - centre) / spread)
        Ym = Y[:m] - Y[:m].mean(axis=0)        # the model's constant mean, on this subsample
        search = functools.partial(fit_exact_gp, Xm, Ym, mode=mode,
                                   kind=kind if mode == "fixed" else 0, lengthscales=fixed,
                                   n_threads=n_threads)
        warm = theta is not None
        theta, lml, _ = search(theta0=theta, starts=starts, ftol=_SUBSAMPLE_FTOL)
        if m == n and mode == "ard":
            # The exact GP of all the rows gives the selection its shape: searched from the
            # default starts too, not only from the subsample's optimum (which depends on the
            # seed), and the best searched again to scipy's tolerance (see _ROWS_PER_PARAMETER).
            if warm:
                cold, cold_lml, _ = search(ftol=_SUBSAMPLE_FTOL)
                if cold_lml > lml:
                    theta, lml = cold, cold_lml
            theta, lml, _ = search(theta0=theta)
    q = n_lengthscales(mode, d)

    def in_units(log_value, scale=1.0):
        # exp(log_value) * scale, its log on the grid when there is one
        if grid is None:
            return np.exp(log_value) * scale
        return np.exp(on_grid(log_value + np.log(scale), grid))

    lam0 = float(in_units(theta[q + 1] - theta[q]))
    if mode == "ard":
        sigma0 = scales.bounds("ard").clip(in_units(theta[:d], spread))
    elif mode == "iso":
        sigma0 = scales.bounds("auto").clip(float(in_units(theta[0], spread[0])))
    else:
        sigma0 = None
    return sigma0, lam0, lml, sizes[-1]


def isotropic_origin(record, say, data, lam, lam_mode, kind, rng, max_memory, scales, *,
                     iterative=False, grid=None):
    """(sigma, lam, bounds) where a selection with ``sigma="ard"`` starts its isotropic search:
    the exact GP's optimum with one bandwidth on a subsample (the given lam kept), and the
    bounds of one bandwidth."""
    t0 = time.perf_counter()
    sigma, start_lam, lml, size = _subsample_start(data, "auto", None, kind, rng,
                                                   budget_threads(), max_memory, scales,
                                                   iterative=iterative, grid=grid)
    if lam_mode != "given":
        lam = start_lam
    record.subsample_seconds += time.perf_counter() - t0
    say(f"exact GP on {size} points, one bandwidth: sigma={format_sigma(sigma)} "
        f"lam={lam:.3g} lml={lml:.6g}")
    return sigma, lam, scales.bounds("auto")


def start_from_subsample(record, say, data, sigma, lam, given_sigma, kind, rng, max_memory,
                         scales, *, iterative=False, grid=None):
    """(sigma0, lam0): the exact GP's start (:func:`_subsample_start`) on ``data`` (a
    :class:`~hkern.hyperparameters.rows.SelectionRows`) for what the record's modes select,
    the given sigma or lam kept; the start and its seconds go on the record.  ``grid``: see
    :func:`_subsample_start`."""
    t0 = time.perf_counter()
    start_sigma, start_lam, lml, size = _subsample_start(
        data, record.sigma_mode, given_sigma, kind, rng, budget_threads(), max_memory, scales,
        iterative=iterative, grid=grid)
    if record.sigma_mode != "given":
        sigma = start_sigma
    if record.lam_mode != "given":
        lam = start_lam
    record.subsample_size, record.subsample_lml = size, lml
    record.subsample_sigma, record.subsample_lam = sigma, lam
    record.subsample_seconds = time.perf_counter() - t0
    say(f"exact GP on {size} points: sigma={format_sigma(sigma)} lam={lam:.3g} lml={lml:.6g}")
    return sigma, lam
