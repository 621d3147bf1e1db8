"""``sigma="auto"|"ard"`` and ``lam="auto"`` for the iterative solvers, at full n.

Exact KRR by preconditioned CG (``fit_exact(solver="pcg")``) and FALKON
(``fit_nystrom(solver="pcg")``) compute no log-determinant, and one of their fits costs
many passes over the n x n (or n x m) kernel matrix, so the selection of the direct solvers
(:mod:`hkern.hyperparameters.select`: five to ten whole fits) would cost five to ten times a
fit.  The search here is staged instead:

1. **The shape on a subsample.**  The exact GP's type-II maximum likelihood on random
   subsamples of growing size (up to ``_SUBSAMPLES_ITERATIVE``; each stage warm-started from
   the one before) gives the lengthscales (one per feature for ``"ard"``) and lam.  Its
   bandwidth is biased long (fewer points show less detail): on kin40k the lengthscales
   shrink by 15% from 1000 to 4000 points, and the test RMSE of exact PCG at them falls from
   0.079 to 0.070 (doc/hyperparameters.md).
2. **The scale at full n**, by the solver itself: a parabolic line search in a global log
   scale g of the lengthscales (:func:`coordinate_search`, its bracket moved at most once:
   FULL_MAX_MOVES; in log lam instead when sigma is given), maximising the criterion:

   * ``"holdout"``: minus the mean squared error on a random tenth of the rows held out of
     the fit.  Each candidate's CG stops at a looser tolerance than the final fit, and early
     when it is clearly losing (its hold-out error, checked every few iterations, far above
     the best candidate's and no longer falling fast).  A candidate at the best candidate's
     bandwidth starts from its coefficients and reuses the preconditioner's Nystrom factor
     (across bandwidths exact KRR's dual coefficients are no closer than zero);
   * ``"likelihood"``: the profiled log marginal likelihood at all rows, estimated by
     stochastic Lanczos quadrature from probe vectors solved in the same block CG as y
     (:mod:`hkern.solvers.slq`).

3. **The fit** at the chosen values with the user's tolerance, warm-started from the
   selection's solution.

The candidate fits are the method's own (``problem``, built by the fit: see
:class:`IterativeProblem`), so this module knows no solver.
"""
from __future__ import annotations

import math
import time

import numpy as np

from .._model import format_sigma, recording_selection
from .._progress import Progress
from .._validation import check_sigma
from ..kernels import kernel_kind
from .edges import warn_at_edges
from .leave_one_out import per_feature_check
from .record import Candidate, HyperparameterSelection
from .robust import clip_lengthscales, repeated_candidate
from .rows import LocalRows
from .search import best_of_origins, coordinate_search
from .subsample import isotropic_origin

__all__ = ["IterativeProblem", "select_iterative", "HOLDOUT_FRACTION_ITERATIVE"]

# A tenth of the rows is held out: the fit on the rest is then close to the one on all rows
# (the bandwidth's optimum depends on n), and a tenth of kin40k (3600 rows) measures the error
# of each candidate to about 1% (paired between candidates, so their differences far better).
HOLDOUT_FRACTION_ITERATIVE = 0.1
# Relative residual of each candidate's CG: the ranking of the candidates settles well before
# the final fit's tolerance (kin40k: doc/hyperparameters.md).
SELECTION_TOL = 1e-2
# The line search evaluates the vertex of its last parabola only where the parabola promises a
# hold-out error at least this fraction below the best candidate's: each candidate costs a good
# part of a fit, and the hold-out tenth measures differences of a few tenths of a percent at
# best.  On protein and keggundirected (2026-11-27) the vertices promised 0.21% and 0.07% (and
# gained 0.10% and 0.37%) for 16 and 12 s, a sixth of each selection; elevators' promised 0.52%
# and gained 1.7%.
VERTEX_MIN_GAIN = 0.003
# Nor a vertex within this fraction of a step (log 1.25) of the best candidate: 4.5% of the
# bandwidth, less than the hold-out tenth resolves, and where a parabola through a bracket as
# lopsided as kin40k's (hold-out errors 1.3 and 2.9 times the best's on either side) promises
# more than it holds.  There (2026-11-27) the vertex at 0.107 of a step promised 0.48%, came
# out 1.4% worse and cost 17 s of a 104 s selection; at 0.099 of a step it had been skipped.
VERTEX_MIN_MOVE = 0.2
# Probe vectors of the stochastic log-determinant.
N_PROBES = 8
# The search at full n moves its bracket at most once (coordinate_search's max_moves): from
# the start it then reaches at most three steps (log 1.25 each, 0.51 of the start's
# bandwidth).  On the five shared sets (2026-11-28) the choices lay within that reach
# (kin40k, protein: one step; pol: none; keggundirected: three; elevators: three, and four
# by the parabola's vertex), while a second move, to seven steps, was the costliest
# candidate wherever it ran and was never chosen (keggundirected 11.4 s of a 41.2 s
# selection, elevators 3.9-4.2 s of 7.7 s: the preconditioner's factor grows to its full rank
# at a quarter of the bandwidth).
FULL_MAX_MOVES = 1


class IterativeProblem:
    """What :func:`select_iterative` asks of an iterative fit (implemented beside it, in
    :mod:`.exact_pcg_problem`, :mod:`.nystrom_pcg_problem` and :mod:`.sharded_nystrom_problem`,
    and built by the fit).

    Attributes
    ----------
    label : str
        The fit's name for messages, e.g. ``"fit_exact(solver='pcg')"``.

    Methods
    -------
    holdout(rows, held, sigma, lam, x0, tol, best_mse) -> (mse, state)
        Fit on ``rows`` at (sigma, lam) to relative residual ``tol`` from the warm start ``x0``
        (a previous ``state`` on the same rows, or None); the mean squared error of its scores
        on the rows ``held`` against the encoded targets; ``state`` what a warm start needs
        (the coefficients, and what else the fit keeps: exact PCG its preconditioner; None
        when the candidate stopped early, clearly losing against ``best_mse``).
    likelihood(sigma, lam, x0, tol, n_probes, seed) -> (value, standard_error, state)
        The profiled log marginal likelihood of all rows, estimated.
    final(sigma, lam, x0) -> model
        The fit on all rows at the user's tolerance, from ``x0`` (a state on all rows).
        The candidates fit y / rms(y) on a grid (:func:`hkern._targets.on_target_grid`), so
        that c * y makes the same choice; the final fit fits y.
    to_user_units(value, criterion) -> float
        A candidate's criterion value in the units of the user's y, for the record.
    extend(state, rows) -> state
        A state on ``rows`` as a warm start on all rows.
    """


def select_iterative(problem, arguments, sigma_mode, lam_mode, criterion, seed, subsample_start,
                     verbose, data=None):
    """The staged selection (module docstring) for one call of an iterative fit; returns the
    fitted model with ``selection_`` set.

    ``subsample_start`` is the exact GP stage that records itself
    (:func:`hkern.hyperparameters.select.start_from_subsample`).  ``data``: the
    :class:`~hkern.hyperparameters.rows.SelectionRows` of the checked rows (on shards); None
    reads X and y of ``arguments``."""
    say = Progress(problem.label, verbose)
    a = arguments
    if data is None:
        data = LocalRows.of(a)
    n, d = data.n, data.d
    data.check_targets(a["task"])
    name, kind = kernel_kind(a["kernel"])
    rng = np.random.default_rng([seed, 1])
    record = HyperparameterSelection(sigma_mode=sigma_mode, lam_mode=lam_mode,
                                     criterion=CRITERION_NAMES[criterion])

    given_sigma = None if sigma_mode != "given" else check_sigma(a["sigma"], d)
    sigma0, lam0 = a["sigma"], a["lam"]
    scales = data.scales()
    bounds = scales.bounds(sigma_mode) if sigma_mode != "given" else None
    sigma0, lam0 = subsample_start(record, say, data, sigma0, lam0, given_sigma, kind, rng,
                                   a["max_memory"], scales, iterative=True)
    # With "ard", the best isotropic bandwidth's search too (select.best_of_origins).
    origins = [(sigma0, lam0, bounds)]
    if sigma_mode == "ard" and d > 1:
        origins.append(isotropic_origin(record, say, data, a["lam"], lam_mode, kind, rng,
                                        a["max_memory"], scales, iterative=True))

    if criterion == "holdout":
        order = rng.permutation(n)
        n_held = max(1, int(round(HOLDOUT_FRACTION_ITERATIVE * n)))
        rows, held = np.sort(order[n_held:]), np.sort(order[:n_held])
    best = {"value": -math.inf, "state": None, "index": None, "sigma": None}
    index = {}
    # The criterion of each candidate, of the candidates' targets (the search compares these;
    # the record holds them in the user's units: IterativeProblem.to_user_units).
    values = []

    def evaluate(point):
        # point: (origin, log scale of its sigma, log lam)
        origin, log_g, log_lam = point
        sigma0, lam0, bounds = origins[int(origin)]
        sigma = sigma0 if log_g == 0 else clip_lengthscales(sigma0 * math.exp(log_g), bounds)
        lam = lam0 if log_lam == math.log(lam0) else math.exp(log_lam)
        earlier = repeated_candidate(record.candidates, sigma, lam)
        if earlier is not None:     # the bounds moved this point onto one already fitted
            index[point] = earlier
            return values[earlier]
        t0 = time.perf_counter()
        note = ""
        try:
            # A warm start only from the same bandwidth: across bandwidths exact KRR's dual
            # coefficients are no closer than zero (kin40k: 46 iterations from the solution
            # at 1.25x the bandwidth, 25 from zero).
            x0 = best["state"] if best["sigma"] is not None and np.array_equal(
                best["sigma"], sigma) else None
            if criterion == "holdout":
                best_mse = -best["value"] if math.isfinite(best["value"]) else None
                mse, state = problem.holdout(rows, held, sigma, lam, x0, SELECTION_TOL,
                                             best_mse)
                value = -mse
            else:
                value, error, state = problem.likelihood(sigma, lam, x0, SELECTION_TOL,
                                                         N_PROBES, seed)
                note = f" +- {error:.3g}"
        except (np.linalg.LinAlgError, ValueError):
            if not record.candidates:
                raise               # the first fit reports bad arguments as it would alone
            value, state = -math.inf, None
        seconds = time.perf_counter() - t0
        if value > best["value"]:
            best.update(value=value, state=state, index=len(record.candidates), sigma=sigma)
        index[point] = len(record.candidates)
        values.append(value)
        shown = problem.to_user_units(value, criterion)
        record.candidates.append(Candidate(sigma=sigma, lam=lam, value=shown, seconds=seconds))
        say(f"sigma={format_sigma(sigma)} lam={lam:.3g} {criterion}={shown:.6g}{note} "
            f"({seconds:.2f} s)")
        return value

    # Each candidate costs a good part of a fit, so the search at full n moves the scale
    # alone when it selects one: lam is the subsample's (the noise level does not depend on
    # n as the bandwidth does; kin40k: 0.0027 from 4000 points, 0.0021 from HCK's search on
    # all 36 000).  A given sigma leaves lam to the search at full n.
    plan = []
    if sigma_mode != "given":
        plan.append((1, _SCALE_STEP[name == "gaussian"], -1))
    elif lam_mode == "auto":
        plan.append((2, _LAM_STEP))
    chosen_point, open_ends = best_of_origins(
        record, origins, values, index, lambda o, lam0: coordinate_search(
            evaluate, (o, 0.0, math.log(lam0)), plan, max_moves=FULL_MAX_MOVES,
            min_gain=VERTEX_MIN_GAIN if criterion == "holdout" else 0.0,
            min_vertex_move=VERTEX_MIN_MOVE),
        per_feature_check(record, say, data, name, seed, a["max_memory"])
        if criterion == "likelihood" else None)        # (as in select.py)
    record.best = index[chosen_point]
    chosen = record.candidates[record.best]
    if not math.isfinite(chosen.value):
        raise ValueError(f"{problem.label}: no candidate of the hyperparameter selection could be "
                         "fitted; pass numbers for sigma and lam")
    warn_at_edges(problem.label, open_ends, chosen, criterion)
    state = best["state"] if best["index"] == record.best else None
    if state is not None and criterion == "holdout":
        state = problem.extend(state, rows)
    t0 = time.perf_counter()
    with recording_selection(record):
        model = problem.final(chosen.sigma, chosen.lam, state)
    record.refit_seconds = time.perf_counter() - t0
    record.seconds = say.elapsed()
    say(f"chose sigma={format_sigma(model.sigma)} lam={model.lam:.3g} (final fit "
        f"{record.refit_seconds:.1f} s)")
    return model


CRITERION_NAMES = {"likelihood": "profiled log marginal likelihood (stochastic estimate)",
                   "holdout": "hold-out negative mean squared error"}
# Line-search steps, as in the direct solvers' search (hkern.hyperparameters.select).
_LAM_STEP = math.log(4.0)
_SCALE_STEP = {True: math.log(1.25), False: math.log(2.0)}
