"""``sigma="auto"``, ``sigma="ard"`` and ``lam="auto"`` for every kernel ridge fit.

The pipeline (doc/hyperparameters.md has the measurements behind each choice):

1. **Start on a subsample**: type-II maximum likelihood of an exact GP on a few hundred to a
   thousand random training points (:mod:`hkern.hyperparameters.exact_gp`, L-BFGS on analytic
   gradients) gives lengthscales (one per feature for ``"ard"``, one for ``"auto"``) and
   lam = noise / s2.  For ``"ard"`` the search runs on 500 points from two starts, then once on
   1000 from that optimum (a warm start) when the data have 1000 rows per parameter of the GP,
   or at most 1000 rows (the stage is then the exact GP of all the data, searched from the
   default starts as well as the warm one and polished, so that it does not depend on the seed).
   With sigma given and ``lam="auto"`` only s2 and the noise are learnt, under the fit's own
   kernel.
2. **Refine on all the data with the method itself**: a parabolic line search in a global log
   scale g of sigma, then in log lam (:func:`hkern.hyperparameters.search.coordinate_search`,
   whose moves grow while the optimum lies beyond the bracket: 5 to 10 fits), maximising the
   method's criterion.  The bandwidth comes first: the subsample's estimate of it is biased long
   (few points see less detail than all of them: on protein 1.9 against about 0.4 for HCK),
   while its noise level, lam, is not.  Nystrom and random features search g alone: each fit
   chooses the lam of the largest likelihood for its bandwidth from the eigendecomposition of
   its Gram matrix (:class:`hkern._gp.ProfiledRidge`), so a sigma given with ``lam="auto"``
   costs them one fit and no subsample.  The criteria:

   * ``"likelihood"`` (exact KRR, HCK, the independent kernel, Nystrom, random features): the
     Gaussian log-likelihood of the training targets under the method's own kernel matrix A
     (K_hier for HCK, C W^+ C^T for Nystrom, Phi Phi^T for random features) plus lam I, with the
     signal variance profiled out (:meth:`hkern._gp.Evidence.profiled_lml`).  Every fit already
     has it (its solve with A and log det A), so an evaluation costs one fit and the best
     evaluation *is* the returned model;
   * ``"holdout"`` (MEKA, whose approximation need not be positive definite, and SLKL): the mean
     squared error of the scores on a random fifth of the data, the model fitted on the rest;
     the chosen values are fitted again on all the data.  Arguments that count or index rows
     are checked against all n rows, as the fit alone checks them, and the fits on the rest
     get sizes capped at its rows and row indices renumbered (the fit's ``holdout_rows``, see
     :func:`selects_hyperparameters`): so any ``r`` valid for the data is valid with
     selection, the hold-out fits using min(r, its rows).

   Every evaluation uses the same seed, so tree, landmarks, random features and subsamples are
   the same draw for every candidate (random-projection splits and uniform landmarks do not
   change with a global scale of X): the criterion is a smooth function of (g, lam).

The user's ``criterion`` ("auto", "likelihood" or "holdout") picks the criterion; "auto" is
the method's own (above).  The iterative solvers (``fit_exact(solver="pcg")``,
``fit_nystrom(solver="pcg")``) compute no log-determinant and cost many kernel passes per fit:
their selection is staged differently (:mod:`hkern.hyperparameters.iterative`).
"""
from __future__ import annotations

import functools
import inspect
import math
import time

import numpy as np

from .._arguments import call_arguments
from .._gp import ProfiledRidge
from .._model import format_sigma, recording_selection
from .._parameters import check_parameter
from .._progress import Progress
from .._targets import on_target_grid
from .._threads import budgeted
from .._validation import check_bool, check_seed, check_sigma, warn_user
from ..kernels import kernel_kind
from .edges import warn_at_edges
from .iterative import select_iterative
from .leave_one_out import per_feature_check
from .record import Candidate, HyperparameterSelection
from .robust import (
    ZERO_TARGET_VALUES,
    ZeroTargets,
    clip_lengthscales,
    holdout_arguments,
    register_holdout_rows,
    repeated_candidate,
)
from .rows import LocalRows
from .search import best_of_origins, coordinate_search
from .subsample import isotropic_origin, start_from_subsample

__all__ = ["CRITERIA", "SIGMA_CHOICES", "selects_hyperparameters", "selection_modes"]

SIGMA_CHOICES = ("auto", "ard")
CRITERIA = {"likelihood": "profiled log marginal likelihood",
            "holdout": "hold-out negative mean squared error"}

# Line-search steps in log lam and log g.  lam's criterion is flat over factors of 2-4 near its
# optimum; g moves the kernel's scale, to which it is far more sensitive.  Kernels other than the
# Gaussian start from the Gaussian's lengthscale, so their scale may be further away.
_LAM_STEP = math.log(4.0)
_SCALE_STEP = {True: math.log(1.25), False: math.log(2.0)}
# The scale search tries the shorter bandwidth first: the subsample's bandwidth is biased long
# (fewer points show less detail).  Measured over the five sets of doc/hyperparameters.md with
# r = 512, the chosen scale g of the subsample's bandwidth had log g <= 0 for HCK in 10 of 10
# selections ("auto" and "ard"; median -0.35) and for Nystrom in 5 of 10 (its rank favours
# longer bandwidths); a wrong guess costs no fit.
_SCALE_FIRST = -1
# The interval in which the fits that profile the ridge choose it (lam is relative to the
# kernel's unit diagonal; the targets' scale is profiled out).
_PROFILED_RIDGE = (1e-8, 1e2)
# The fraction of the data held out by the "holdout" criterion.
_HOLDOUT_FRACTION = 0.2
# A fit that is not continuous in its targets' last bits nor in sigma and lam (SLKL: its descent
# moved F by 1e-6 within 18 to 47 steps from a change of 1e-8 of its target, n = 700, r = 80)
# selects on grids (``selects_hyperparameters(discontinuous=True)``), so that y + b, whose
# rounding changes y by 1e-8 of its scale at b = 1e8 std(y), sees the same candidates as y:
# * the start, the subsample's optimum, in log lengthscale and log lam on a grid of 2^-6 (1.6%,
#   below what a subsample resolves; the search on all the data refines the scale and lam).
#   y + b moved it by 1e-10 in one bandwidth, and by 6e-5 in a long ARD lengthscale and in lam
#   (n = 700, d = 3); a change D leaves a grid point with probability 2 D / 2^-6, 0.8% here.
# * each vertex of the line searches, as a move from its bracket's best point, on a grid of
#   2^-10 (0.1% of lam or sigma, which no criterion here resolves): from the same candidates'
#   values, 1e-8 apart, a vertex 1e-7 apart in log lam gave predictions 2.5e-3 apart.
# (The fits themselves keep their targets on a grid: hkern.slkl.api.DESCENT_GRID.)  With all
# three, SLKL's selection for y and y + b predicts within 5e-9 of the predictions' scale,
# against 0.6% without.
_START_GRID = 2.0 ** -6
_VERTEX_GRID = 2.0 ** -10


def selection_modes(sigma, lam):
    """("auto" | "ard" | "given", "auto" | "given") for the user's sigma and lam; an unknown
    string is refused (numbers and arrays are checked later by the fit)."""
    sigma_mode = lam_mode = "given"
    if isinstance(sigma, str):
        if sigma not in SIGMA_CHOICES:
            raise ValueError(f"sigma must be a number > 0, an array of one lengthscale per "
                             f"feature, 'auto' (one bandwidth, selected) or 'ard' (one "
                             f"lengthscale per feature, selected); got the string {sigma!r}")
        sigma_mode = sigma
    if isinstance(lam, str):
        lam_mode = check_parameter("lam", lam)
    return sigma_mode, lam_mode


def _fit_seed(seed):
    """One int seed for every fit of the selection (the same draw for every candidate): the
    user's int, or a draw from the user's Generator or from fresh entropy."""
    if isinstance(seed, (int, np.integer)) and not isinstance(seed, bool) and seed >= 0:
        return int(seed)
    return int(check_seed(seed).integers(2**63 - 1))


class _Holdout:
    """The hold-out criterion: fit on the training part, -mean squared error of the scores on
    the held-out part (for classification, of the one-vs-rest scores against +-1)."""

    def __init__(self, X, y, task, rng):
        n = X.shape[0]
        n_out = max(1, int(round(_HOLDOUT_FRACTION * n)))
        order = rng.permutation(n)
        self.train, held = np.sort(order[n_out:]), np.sort(order[:n_out])
        self.X_held, self.y_held, self.task = X[held], y[held], task

    def __call__(self, model):
        scores = model._checked_scores(self.X_held)
        if self.task == "classification":
            target = np.where(self.y_held[:, None] == model.classes_[None, :], 1.0, -1.0)
        else:
            # The scores are of the candidate's centred targets.
            target = model.encoding_.centre(self.y_held.reshape(len(self.y_held), -1))
        return -float(np.mean((scores - target) ** 2))


def _select(fit, arguments, sigma_mode, lam_mode, criterion, profiles_ridge, verbose, *,
            data=None, call=None, seed=None, discontinuous=False):
    """Run the selection for one call of ``fit``; returns the fitted model with ``selection_``.

    ``discontinuous``: select on grids (_START_GRID, _VERTEX_GRID).

    On shards (:mod:`hkern.hyperparameters.sharded`): ``data``, the
    :class:`~hkern.hyperparameters.rows.ShardedRows` of the checked rows; ``call(arguments)``,
    the sharded fit; ``seed``, the int every rank uses.  The likelihood criterion only.
    """
    say = Progress(fit.__name__, verbose)
    a = dict(arguments)
    if data is None:
        data = LocalRows.of(a)
    n, d = data.n, data.d
    data.check_targets(a["task"])
    name, kind = kernel_kind(a["kernel"])
    seed = _fit_seed(a.get("seed")) if seed is None else seed
    if call is None:
        def call(arguments):
            return fit(**arguments)
    rng = np.random.default_rng([seed, 1])       # the subsample and hold-out draws
    record = HyperparameterSelection(sigma_mode=sigma_mode, lam_mode=lam_mode,
                                     criterion=CRITERIA[criterion])

    given_sigma = None if sigma_mode != "given" else check_sigma(a["sigma"], d)
    if lam_mode == "given":
        check_parameter("lam", a["lam"])
    sigma0, lam0 = a["sigma"], a["lam"]
    # Every selected lengthscale stays within what the data resolve (robust.py).
    scales = data.scales() if sigma_mode != "given" else None
    bounds = None if scales is None else scales.bounds(sigma_mode)
    start_grid = _START_GRID if discontinuous else None
    if sigma_mode != "given" or (lam_mode != "given" and not profiles_ridge):
        sigma0, lam0 = start_from_subsample(record, say, data, sigma0, lam0, given_sigma, kind,
                                            rng, a["max_memory"], scales, grid=start_grid)
    # Where the searches start: (sigma, lam, bounds), and with "ard" the best isotropic
    # bandwidth's too, so that the per-feature lengthscales are kept only where they beat it.
    origins = [(sigma0, lam0, bounds)]
    if sigma_mode == "ard" and d > 1:
        origins.append(isotropic_origin(record, say, data, a["lam"], lam_mode, kind, rng,
                                        a["max_memory"], scales, grid=start_grid))

    # The candidates fit y / rms(y) on a grid (hkern._targets.on_target_grid), so that c * y
    # compares the same numbers and makes the same choice; the chosen values are then fitted
    # to y.  Class labels are fitted as they are.
    regression = a["task"] != "classification"
    y_scale = data.target_scale() if regression else 1.0
    y_all = np.asarray(a["y"])
    if regression:
        y_all = on_target_grid(data.Y, y_scale).reshape(np.shape(y_all))
    holdout = None
    if criterion == "holdout":
        holdout = _Holdout(data.X, y_all, a["task"], rng)

    def fit_at(sigma, lam, rows=None, final=False):
        """The fit at numbers sigma and lam, with the selection's seed, on all rows or some:
        of the candidates' targets, or with ``final`` of the user's."""
        arguments = dict(a, sigma=sigma, lam=lam, verbose=False)
        if "seed" in arguments:
            arguments["seed"] = seed
        if not final:
            arguments["y"] = y_all
        if rows is not None:
            arguments.update(X=data.X[rows], y=y_all[rows])
            arguments = holdout_arguments(fit, arguments, n, rows)
        with recording_selection(record):
            return call(arguments)

    def in_user_units(value):
        """A candidate's criterion for the user's y: minus a mean squared error times scale^2;
        a log likelihood of k outputs at n rows minus n k log(scale)."""
        if not math.isfinite(value) or y_scale == 1.0:
            return value
        if criterion == "holdout":
            return value * y_scale ** 2
        return value - n * data.Y.shape[1] * math.log(y_scale)

    # With a fit that chooses its own ridge (profiles_ridge), lam="auto" costs nothing more
    # per bandwidth: the search is over g alone, and each candidate records the lam it chose.
    profiled = profiles_ridge and lam_mode == "auto"
    record.lam_profiled = profiled
    kept = {}                   # the best model so far, by point (likelihood criterion only)
    index = {}                  # each point's position in record.candidates
    values = []                 # each candidate's criterion, of the candidates' targets

    def evaluate(point):
        # point: (origin, log scale of its sigma, log lam)
        sigma0, lam0, bounds = origins[int(point[0])]
        log_g = point[1]
        sigma = sigma0 if log_g == 0 else clip_lengthscales(sigma0 * math.exp(log_g), bounds)
        if profiled:
            lam, request = math.nan, ProfiledRidge(*_PROFILED_RIDGE)
        else:
            # a given lam exactly
            lam = lam0 if point[2] == math.log(lam0) else math.exp(point[2])
            request = lam
        earlier = repeated_candidate(record.candidates, sigma, None if profiled else lam)
        if earlier is not None:     # the bounds moved this point onto one already fitted
            index[point] = earlier
            return values[earlier]
        t0 = time.perf_counter()
        try:
            model = fit_at(sigma, request, None if holdout is None else holdout.train)
        except (np.linalg.LinAlgError, ValueError) as exc:
            # The first fit reports bad arguments as it would alone.  A solver that fails at
            # one candidate (MEKA's CG short of its tol at the subsample's small lam, HCK's
            # solve at a lam its landmark blocks cannot resolve) only loses it: the chosen
            # values are refitted, and fail there again with the solver's message if every
            # candidate failed.
            if not record.candidates and not isinstance(exc, np.linalg.LinAlgError):
                raise
            value, model = -math.inf, None
        else:
            if holdout is None and model._evidence is None:
                raise ValueError(f"{say.label} computes no log-determinant with these "
                                 "arguments (an iterative solver), and the likelihood criterion "
                                 "of sigma='auto', 'ard' and lam='auto' needs it; pass the direct "
                                 "solver (solver='direct'), or numbers for sigma and lam")
            value = holdout(model) if holdout is not None else model._evidence.profiled_lml()
            lam = model.lam
        seconds = time.perf_counter() - t0
        if holdout is None and model is not None and value > kept.get("value", -math.inf):
            kept.update(value=value, point=point, model=model)   # the previous best is freed
        index[point] = len(record.candidates)
        values.append(value)
        shown = in_user_units(value)
        record.candidates.append(Candidate(sigma=sigma, lam=lam, value=shown, seconds=seconds))
        say(f"sigma={format_sigma(sigma)} lam={lam:.3g} {criterion}={shown:.6g} ({seconds:.2f} s)")
        return value

    plan = []                   # the bandwidth first (module docstring)
    if sigma_mode != "given":
        plan.append((1, _SCALE_STEP[name == "gaussian"], _SCALE_FIRST))
    if lam_mode == "auto" and not profiled:
        plan.append((2, _LAM_STEP))
    best, open_ends = best_of_origins(
        record, origins, values, index, lambda o, lam0: coordinate_search(
            evaluate, (o, 0.0) if profiled else (o, 0.0, math.log(lam0)), plan,
            vertex_grid=_VERTEX_GRID if discontinuous else None),
        # The check answers the likelihood's overfitting; a hold-out criterion already scores
        # each end on rows it did not fit (and SLKL's lam is not the kernel ridge's).
        per_feature_check(record, say, data, name, seed, a["max_memory"])
        if criterion == "likelihood" else None)
    record.best = index[best]
    chosen = record.candidates[record.best]
    warn_at_edges(say.label, open_ends, chosen, criterion,
                  _PROFILED_RIDGE if profiled else None)
    if holdout is None and index[kept["point"]] == record.best and not regression:
        model = kept["model"]       # the best evaluation is the model
    else:   # a fit to all of the user's y (or an exact tie the search broke the other way)
        kept.clear()                # its memory first
        t0 = time.perf_counter()
        model = fit_at(chosen.sigma, chosen.lam, final=True)
        record.refit_seconds = time.perf_counter() - t0
    record.seconds = say.elapsed()
    say(f"chose sigma={format_sigma(model.sigma)} lam={model.lam:.3g}")
    return model


FIT_SIGMA_DOC = """sigma : float, array_like of shape (d,), "auto" or "ard", default="ard"
        Kernel bandwidth (lengthscale), > 0; or one lengthscale per feature (ARD), all finite
        and > 0: the kernel is then the isotropic one with bandwidth 1 on ``X / sigma``.
        ``"auto"`` selects one bandwidth, ``"ard"`` one lengthscale per feature, kept only
        where they beat the best single bandwidth by the selection's own criterion and, where
        that is the likelihood, by the leave-one-out error of exact kernel ridge on up to 2000
        rows (else ``sigma_`` is that
        bandwidth; see ``verbose``); the values used are the model's ``sigma_``.  The
        default selects, since a fixed bandwidth is rarely the right one for a user's data
        (doc/hyperparameters.md: ``"ard"`` beat a tuned isotropic grid on four of the five
        shared sets); pass numbers for sigma and lam to fit once, without a selection."""

VERBOSE_DOC = """verbose : bool, default=False
        Print one line per step of a hyperparameter selection (``sigma="auto"`` or ``"ard"``,
        ``lam="auto"``): the exact GP on a subsample that gives the starting point, then each
        candidate's criterion and seconds.  {criterion}  The model's ``selection_`` records
        every step (:class:`hkern.HyperparameterSelection`)."""

_CRITERION_DOC = {
    "likelihood": "Candidates are compared by the profiled log marginal likelihood of this "
                  "method's own kernel matrix; the candidates fit y / rms(y), so that c * y "
                  "makes the same choice, and the chosen values are then fitted to y "
                  "(classification: the best candidate is the returned model).",
    "holdout": "Candidates are compared by the mean squared error on a random fifth of the "
               "data held out of their fit; the chosen values are then fitted on all of it.  "
               "A size that counts rows (``r``) is checked against all the data, and the fits "
               "without the held-out fifth use at most as many as they have rows.",
}


CRITERION_DOC = """criterion : {{"auto", "likelihood", "holdout"}}, default="auto"
        How a hyperparameter selection (``sigma="auto"`` or ``"ard"``, ``lam="auto"``) compares
        candidates: ``"likelihood"``, the profiled log marginal likelihood of the training
        targets under the method's own kernel{likelihood_note}; ``"holdout"``, the mean squared
        error on a random part of the rows held out of the fit.  ``"auto"``: {auto}.  Ignored
        when sigma and lam are numbers."""


def _criterion_doc(default, iterative):
    if default == "holdout":
        auto = "``\"holdout\"`` (this method's approximation has no likelihood)"
        note = " (not available for this method)"
    else:
        auto = "``\"likelihood\"``"
        if iterative:
            auto += (" with the direct solvers, ``\"" + ITERATIVE_DEFAULT_CRITERION + "\"`` with "
                     "the iterative ones (measured: doc/hyperparameters.md)")
        note = (" (estimated by stochastic Lanczos quadrature for the iterative solvers)"
                if iterative else "")
    return CRITERION_DOC.format(likelihood_note=note, auto=auto)


def _verbose_criterion_doc(default, iterative):
    """What ``verbose`` says candidates are compared by: the criterion ``"auto"`` means, for
    the direct solver and, where the method has them, the iterative ones."""
    if iterative is None or default == ITERATIVE_DEFAULT_CRITERION:
        return _CRITERION_DOC[default]
    return ("With ``criterion=\"auto\"`` and the direct solver: "
            + _CRITERION_DOC[default][0].lower() + _CRITERION_DOC[default][1:]
            + "  With the iterative solvers: "
            + _CRITERION_DOC[ITERATIVE_DEFAULT_CRITERION][0].lower()
            + _CRITERION_DOC[ITERATIVE_DEFAULT_CRITERION][1:])


# The default criterion of the iterative solvers (hkern.hyperparameters.iterative), measured on
# kin40k (doc/hyperparameters.md): both chose the same values (test RMSE 0.0624), the hold-out
# candidates in 295 s, the likelihood's in 455 s (its probes widen every CG product, and it
# solves on all rows).
ITERATIVE_DEFAULT_CRITERION = "holdout"


def check_criterion(criterion, default, label):
    """The user's ``criterion`` checked against the method's ``default`` ("auto" stays "auto":
    it depends on the solver, see _run_in_budget)."""
    check_parameter("criterion", criterion)
    if criterion == "likelihood" and default == "holdout":
        raise ValueError(f"{label} has no likelihood to select hyperparameters with (its "
                         "approximation need not be positive definite): pass "
                         "criterion='holdout' or 'auto'")
    return criterion


def selects_hyperparameters(criterion, *, profiles_ridge=False, iterative=None,
                            holdout_rows=None, discontinuous=False):
    """Decorator for a ``fit_<method>``: accept ``sigma="auto"|"ard"``, ``lam="auto"`` and a
    ``criterion`` keyword (added to the signature before ``verbose``).

    The decorated function must take ``X, y, kernel, sigma, lam, task, n_jobs, max_memory``
    and ``verbose`` (and ``seed`` if it draws anything).  With numbers for both sigma and lam
    it is called as it is; otherwise the selection (module docstring) calls it with numbers,
    ``criterion`` ("likelihood" or "holdout", the method's default for ``criterion="auto"``)
    deciding how candidates are compared.
    ``profiles_ridge``: the fit accepts a :class:`hkern._gp.ProfiledRidge` for ``lam`` and
    chooses the ridge of the largest likelihood itself (one fit per bandwidth).
    ``iterative``: ``iterative(arguments)`` -> an
    :class:`hkern.hyperparameters.iterative.IterativeProblem` when the call runs an iterative
    solver (the staged selection at full n of :mod:`hkern.hyperparameters.iterative`), None
    otherwise; it checks the solver's arguments, so that a bad one is refused before any work.
    ``holdout_rows``: for the "holdout" criterion, ``holdout_rows(arguments, n, rows)`` gives
    the arguments of a fit on the rows ``rows`` of the user's n (its X and y already those
    rows): what counts rows checked against n with the fit's own message, then capped at
    ``len(rows)``; row indices renumbered.  None: the fit has no such arguments.
    ``discontinuous``: the fit is not continuous in its targets' last bits nor in sigma and
    lam, so the selection rounds its start and its line searches' vertices to grids (see
    _START_GRID).
    """
    if criterion not in CRITERIA:
        raise ValueError(f"criterion must be one of {sorted(CRITERIA)}; got {criterion!r}")

    def decorate(fit):
        signature = inspect.signature(fit)
        missing = {"X", "y", "kernel", "sigma", "lam", "task", "n_jobs", "verbose",
                   "max_memory"} - set(signature.parameters)
        if missing:
            raise TypeError(f"{fit.__name__} lacks the parameters {sorted(missing)} that "
                            "selects_hyperparameters needs")

        register_holdout_rows(fit, holdout_rows)
        if fit.__doc__:
            fit.__doc__ = fit.__doc__.replace("{sigma}", FIT_SIGMA_DOC).replace(
                "{verbose}", _criterion_doc(criterion, iterative is not None) + "\n    "
                + VERBOSE_DOC.replace("{criterion}", _verbose_criterion_doc(criterion,
                                                                           iterative)))
        parameters = list(signature.parameters.values())
        at = [p.name for p in parameters].index("verbose")
        public = signature.replace(parameters=parameters[:at] + [inspect.Parameter(
            "criterion", inspect.Parameter.KEYWORD_ONLY, default="auto")] + parameters[at:])

        @functools.wraps(fit)
        def fit_with_selection(*args, **kwargs):
            arguments = dict(call_arguments(public, args, kwargs))
            chosen = arguments.pop("criterion")
            verbose = check_bool(arguments["verbose"], "verbose")
            sigma_mode, lam_mode = selection_modes(arguments["sigma"], arguments["lam"])
            chosen = check_criterion(chosen, criterion, fit.__name__)
            if sigma_mode == "given" and lam_mode == "given":
                return fit(**arguments)
            try:
                return _run_in_budget(fit, arguments, sigma_mode, lam_mode, chosen, criterion,
                                      profiles_ridge, verbose, iterative, discontinuous,
                                      n_jobs=arguments["n_jobs"])
            except ZeroTargets:
                return fit(**zero_target_arguments(fit.__name__, arguments, sigma_mode,
                                                   lam_mode))
        fit_with_selection.__signature__ = public
        return fit_with_selection
    return decorate


def zero_target_arguments(label, arguments, sigma_mode, lam_mode):
    """The fit's arguments at :data:`ZERO_TARGET_VALUES` for what was to be selected, with a
    warning: constant targets give no criterion to select by, and every value predicts the
    constant.  (The serial fit and, on every rank alike, the sharded ones.)"""
    sigma, lam = ZERO_TARGET_VALUES
    arguments = dict(arguments, sigma=sigma if sigma_mode != "given" else arguments["sigma"],
                     lam=lam if lam_mode != "given" else arguments["lam"])
    warn_user(f"y is constant, so there is nothing to select sigma and lam by (every value "
              f"explains a constant equally well): {label} fits at "
              f"sigma={format_sigma(arguments['sigma'])}, lam={arguments['lam']:.3g}, and "
              "predicts the constant", UserWarning)
    return arguments


@budgeted
def _run_in_budget(fit, arguments, sigma_mode, lam_mode, criterion, default, profiles_ridge,
                   verbose, iterative, discontinuous, *, n_jobs):
    # The subsample's exact GP runs in the fit's thread budget; each fit sets its own.
    problem = None if iterative is None else iterative(arguments)
    if problem is not None:
        if criterion == "auto":
            criterion = ITERATIVE_DEFAULT_CRITERION
        return select_iterative(problem, arguments, sigma_mode, lam_mode, criterion,
                                _fit_seed(arguments.get("seed")), start_from_subsample, verbose)
    if criterion == "auto":
        criterion = default
    return _select(fit, arguments, sigma_mode, lam_mode, criterion, profiles_ridge and
                   criterion == "likelihood", verbose, discontinuous=discontinuous)
