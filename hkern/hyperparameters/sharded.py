"""``sigma="auto"|"ard"`` and ``lam="auto"`` on data sharded over MPI ranks (``comm=...``).

The serial selection, run on every rank alike.  It reads the data in three places only
(:mod:`hkern.hyperparameters.rows`): the robust feature statistics and the exact GP's
subsample are the same global rows, drawn from the global index range and sent by the ranks
that own them (:class:`~hkern.hyperparameters.rows.ShardedRows`), so every rank holds the
serial start.  Each candidate is then the sharded fit itself:

* ``fit_hierarchical``: the likelihood criterion (its default).  The sharded fit's log
  marginal likelihood is the serial one's (log det bit for bit, the quadratic form a sum over
  ranks, about 1e-16 relative), so the search moves as the serial search does;
* ``fit_nystrom(solver="pcg")``: the hold-out criterion (its default).  The held-out tenth is
  drawn from the global index range; each candidate is the sharded FALKON on the rest of every
  shard (:class:`hkern.hyperparameters.sharded_nystrom_problem.ShardedNystromProblem`), with
  the serial fit's centres, iterates and warm starts; its hold-out error is a sum over ranks;
* ``fit_exact(solver="pcg")``: the hold-out criterion (its default), each candidate the sharded
  PCG solve on the rest of every shard
  (:class:`hkern.hyperparameters.sharded_exact_problem.ShardedExactPCGProblem`), bit for bit
  the serial candidate, its hold-out error computed on every rank from all the held-out rows.

So the choice is the serial choice for any rank count and shard sizes (up to a tie within
rounding of the sums over ranks; for fit_exact bit for bit).  The other criterion of each fit
is refused on shards with a message saying which one works.
"""
from __future__ import annotations

import numpy as np

from .._mpi import Agreed, RankState
from .._sharded import digest, prepare_sharded_fit
from .._threads import in_budget
from .._validation import check_bool
from .iterative import select_iterative
from .robust import ZeroTargets
from .rows import ShardedRows
from .select import (
    _fit_seed,
    _select,
    check_criterion,
    selection_modes,
    start_from_subsample,
    zero_target_arguments,
)
from .sharded_nystrom_problem import ShardedNystromProblem

__all__ = ["select_hierarchical_on_shards", "select_iterative_on_shards",
           "select_nystrom_on_shards"]

# Arguments that hold data, or are per rank by design.
_PER_RANK = ("X", "y", "validation", "comm", "max_memory", "n_jobs", "verbose")


def _fingerprint(value):
    """A value comparable across ranks: arrays by digest, generators by kind."""
    if isinstance(value, np.random.Generator):
        return "generator"
    if value is None or isinstance(value, (str, bool, int, float)):
        return value
    return digest(np.asarray(value))


def _prepare(state, arguments, default, label, refused):
    """Check the shards and the selection's arguments on every rank and agree: returns
    (ShardedFit, sigma_mode, lam_mode, criterion, seed), ``seed`` the int every candidate
    uses (rank 0's entropy for seed=None).  ``refused``: {criterion: message} for the
    criteria this fit cannot compare on shards."""
    a = arguments

    def local():
        modes = selection_modes(a["sigma"], a["lam"])
        # Both sharded fits have a likelihood serially; on shards each compares by one
        # criterion, its default, and refuses the other with its own message.
        criterion = check_criterion(a["criterion"], "likelihood", label)
        criterion = default if criterion == "auto" else criterion
        if criterion in refused:
            raise ValueError(refused[criterion])
        check_bool(a["verbose"], "verbose")
        return modes, criterion

    out = state.run(local)
    (sigma_mode, lam_mode), criterion = out if out is not None else (("given", "given"), None)
    # The shards are checked as the fit checks them, at placeholder numbers for what is
    # selected (the candidates check their own values).
    fit = prepare_sharded_fit(
        state, a["X"], a["y"], kernel=a["kernel"],
        sigma=1.0 if sigma_mode != "given" else a["sigma"],
        lam=1.0 if lam_mode != "given" else a["lam"], task=a["task"], n_jobs=a["n_jobs"],
        max_memory=a["max_memory"],
        arguments={name: _fingerprint(value) for name, value in a.items()
                   if name not in _PER_RANK})
    seed = state.run(_fit_seed, fit.entropy if a["seed"] is None else a["seed"])
    seeds = state.agree(seed)
    if len(set(seeds)) > 1:
        raise Agreed(ValueError(f"{label} drew different seeds on different ranks: pass seed as "
                                "an int (or None), the same on every rank"))
    return fit, sigma_mode, lam_mode, criterion, seed


def _candidate(state, sharded_fit):
    """The sharded fit as the selection calls it: ``call(arguments)``.  An error every rank
    agreed on is raised as itself, on every rank at the same candidate, so the selection
    treats it as the serial selection does (a failed later candidate is skipped)."""
    def call(arguments):
        try:
            return sharded_fit(RankState(state.comm, state.label), **arguments)
        except Agreed as agreed:
            raise agreed.error from agreed.cause
    return call


def _agreed(run):
    """``run()``; an error raised by the selection itself is raised on every rank alike (its
    every step is the same arithmetic on every rank, or an error the ranks agreed on)."""
    try:
        return run()
    except (ValueError, np.linalg.LinAlgError) as exc:
        raise Agreed(exc) from None


def _selected(state, label, sharded_fit, arguments, sigma_mode, lam_mode, run):
    """:func:`_agreed` of the selection ``run``; for targets of zeros on every rank (the check
    is a sum over ranks, so every rank sees it) the sharded fit at the serial fallback values,
    as the serial fit does (:func:`~hkern.hyperparameters.select.zero_target_arguments`)."""
    try:
        return _agreed(run)
    except Agreed as agreed:
        if not isinstance(agreed.error, ZeroTargets):
            raise
    return sharded_fit(RankState(state.comm, state.label),
                       **zero_target_arguments(label, arguments, sigma_mode, lam_mode))


def select_hierarchical_on_shards(state, fit, sharded_fit, arguments):
    """fit_hierarchical(..., sigma="auto"|"ard" or lam="auto", comm=comm) on every rank
    (module docstring); ``fit`` is the serial fit (its name and defaults), ``arguments`` the
    bound arguments of this rank."""
    label = fit.__name__
    shards, sigma_mode, lam_mode, criterion, seed = _prepare(
        state, arguments, "likelihood", label, {"holdout": (
            f"{label} on sharded data (comm=...) compares the candidates of its hyperparameter "
            "selection by their likelihood: pass criterion='auto' or 'likelihood'")})
    inputs = shards.inputs
    rows = ShardedRows(state, shards.offsets, inputs.X, inputs.Y)
    verbose = arguments["verbose"] and state.rank == 0
    with in_budget(arguments["n_jobs"]):
        return _selected(state, label, sharded_fit, arguments, sigma_mode, lam_mode,
                         lambda: _select(fit, arguments, sigma_mode, lam_mode, criterion,
                                         False, verbose, data=rows, seed=seed,
                                         call=_candidate(state, sharded_fit)))


def select_nystrom_on_shards(state, fit, sharded_fit, arguments):
    """fit_nystrom(..., solver="pcg", sigma="auto"|"ard" or lam="auto", comm=comm) on every
    rank (module docstring): the candidates of a
    :class:`~hkern.hyperparameters.sharded_nystrom_problem.ShardedNystromProblem`, whose final
    fit is ``sharded_fit`` (this package imports nothing from the fits)."""
    return select_iterative_on_shards(
        state, fit, sharded_fit, arguments,
        lambda shards, a: ShardedNystromProblem(state, shards, a, sharded_fit))


def select_iterative_on_shards(state, fit, sharded_fit, arguments, problem_of):
    """The iterative selection (:func:`hkern.hyperparameters.iterative.select_iterative`, by
    the hold-out criterion) on every rank, of the problem ``problem_of(shards, arguments)``
    (the call's arguments with the selection's int seed): a sharded fit_nystrom's or
    fit_exact's view of the concatenated shards (this package imports nothing from the fits,
    which build their problem)."""
    label = fit.__name__
    shards, sigma_mode, lam_mode, criterion, seed = _prepare(
        state, arguments, "holdout", label, {"likelihood": (
            f"{label} on sharded data (comm=...) compares the candidates of its hyperparameter "
            "selection on held-out rows: pass criterion='auto' or 'holdout'")})
    a = dict(arguments, seed=seed)
    problem = problem_of(shards, a)
    inputs = shards.inputs
    rows = ShardedRows(state, shards.offsets, inputs.X, inputs.Y)
    if problem.classes is None:         # the serial problem's scale: of all the targets
        problem.set_target_scale(rows.target_scale())
    verbose = arguments["verbose"] and state.rank == 0
    with in_budget(arguments["n_jobs"]):
        return _selected(state, label, sharded_fit, arguments, sigma_mode, lam_mode,
                         lambda: select_iterative(problem, a, sigma_mode, lam_mode, criterion,
                                                  seed, start_from_subsample, verbose,
                                                  data=rows))
