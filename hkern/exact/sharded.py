"""fit_exact(solver="pcg", comm=comm): exact kernel ridge regression on rows sharded over MPI
ranks, bit for bit the serial fit of the concatenated shards.

The serial fit already does its arithmetic on fixed segments of SEGMENT_ROWS global rows and
sums K V over fixed blocks of COLUMN_BLOCK columns (:mod:`hkern._row_span`,
:mod:`hkern.solvers.operators`), so a rank can do its part of it exactly:

* each rank takes the whole segments that start in its shard (the rows past its end, fewer
  than SEGMENT_ROWS, fetched once from the next ranks): its rows of X, of the preconditioner's
  factor F and of every product;
* a product K V: the ranks' columns of X pass, a block of COLUMN_BLOCK at a time, to every
  rank (one allgather each, so that no rank holds all of X), each rank computes its rows with
  the fused engine, and the rows are allgathered;
* the preconditioner: block RPCholesky draws its pivots from the residual diagonal of all n
  rows (allgathered, n numbers a block), and each rank updates its rows of F; F^T R and
  F^T F are summed over segments in global order, the running sum passed from rank to rank;
* CG's vectors (n x k) are whole on every rank, and every rank runs the same recursion.

So for a given seed the pivots, every iterate and the coefficients are those of the serial
fit, for any number of ranks and any shard sizes (empty shards too).  The model is the serial
one: every rank receives X (a block at a time) at the end, to predict on any rows.
"""
from __future__ import annotations

import numpy as np

from .._gp import Evidence, column_quads
from .._mpi import Agreed
from .._parameters import check_parameter
from .._sharded import prepare_sharded_fit
from .._threads import in_budget
from ..hyperparameters.sharded import select_iterative_on_shards
from ..hyperparameters.sharded_exact_problem import ShardedExactPCGProblem
from ..solvers.exact_pcg import default_rank, solve_pcg
from ..solvers.preconditioners import preconditioner_kind
from ..solvers.sharded_pcg import gathered_X, shard_rows, sharded_preconditioner
from ..solvers.trace import check_stopping
from .model import ExactKRR

__all__ = ["fit_exact_sharded", "select_exact_on_shards"]


def _check_on_shards(solver, preconditioner, precision, validation, tol, max_iter, verbose):
    """The sharded fit's own refusals, then (tol, max_iter) and verbose checked."""
    if solver not in ("pcg", "auto"):
        check_parameter("solver", solver, "fit_exact")
        raise ValueError("fit_exact on sharded data (comm=...) runs preconditioned CG: pass "
                         "solver='pcg'")
    if preconditioner != "block_rpcholesky":
        preconditioner_kind(preconditioner)
        raise ValueError("fit_exact on sharded data (comm=...) builds its preconditioner by "
                         "block RPCholesky on the shards: pass preconditioner='block_rpcholesky'")
    check_parameter("precision", precision, "fit_exact")
    if validation is not None:
        raise ValueError("fit_exact on sharded data (comm=...) takes no validation set: pass "
                         "validation=None and score the model afterwards")
    return check_stopping(tol, max_iter), check_parameter("verbose", verbose)


def _rank_of(state, r, n):
    """The preconditioner's rank at n global rows (checked on every rank)."""
    if n < 2:
        raise Agreed(ValueError("solver='pcg' needs at least 2 training points (its "
                                "preconditioner has rank < n)"))
    rank = default_rank(n) if r is None else state.run(check_parameter, "r", r, "fit_exact",
                                                       n=n)
    state.agree()
    return rank


def fit_exact_sharded(state, *, X, y, kernel, sigma, lam, task, seed, n_jobs, solver,
                      preconditioner, r, tol, max_iter, validation, verbose, precision,
                      max_memory, comm, criterion="auto"):
    """The sharded fit_exact (module docstring) at given sigma and lam; arguments as
    fit_exact's, X and y this rank's rows (``criterion`` concerns a selection:
    :func:`select_exact_on_shards`)."""
    stopping = state.run(_check_on_shards, solver, preconditioner, precision, validation, tol,
                         max_iter, verbose)
    arguments = dict(kernel=kernel, sigma=np.asarray(sigma).tolist(), lam=lam, task=task,
                     seed=seed if seed is None or np.isscalar(seed) else "generator",
                     r=r, tol=tol, max_iter=max_iter, precision=precision)
    fit = prepare_sharded_fit(state, X, y, kernel=kernel, sigma=sigma, lam=lam, task=task,
                              n_jobs=n_jobs, max_memory=max_memory, arguments=arguments)
    (tol, max_iter), verbose = stopping
    rank = _rank_of(state, r, fit.n)
    with in_budget(n_jobs) as n_threads:
        return _fit(state, fit, rank, r is None, seed, tol, max_iter, verbose, precision,
                    max_memory, n_threads, n_jobs)


def select_exact_on_shards(state, fit, sharded_fit, arguments):
    """fit_exact(solver="pcg", sigma="auto"|"ard" or lam="auto", comm=comm) on every rank: the
    serial selection's candidates and final fit, bit for bit, by the hold-out criterion
    (:class:`hkern.hyperparameters.sharded_exact_problem.ShardedExactPCGProblem`; regression)."""
    a = arguments

    def problem_of(shards, a):
        def check():
            if a["task"] == "classification":
                raise ValueError("fit_exact on sharded data (comm=...) selects sigma and lam "
                                 "for regression: pass numbers for them with "
                                 "task='classification'")
            return _check_on_shards(a["solver"], a["preconditioner"], a["precision"],
                                    a["validation"], a["tol"], a["max_iter"], a["verbose"])
        out = state.run(check)
        state.agree()
        (tol, max_iter), _ = out
        return ShardedExactPCGProblem(state, shards, a, _rank_of(state, a["r"], shards.n), tol,
                                      max_iter, model=ExactKRR,
                                      preconditioner=preconditioner_kind("block_rpcholesky"))
    return select_iterative_on_shards(state, fit, sharded_fit, a, problem_of)


def _fit(state, fit, rank, adaptive, seed, tol, max_iter, verbose, precision, max_memory,
         n_threads, n_jobs):
    local, rows = shard_rows(state, fit.offsets, fit.inputs)

    def build(precision):
        # A generator of its own for each build, as the serial fit's check_seed(seed) gives.
        return sharded_preconditioner(rows, local, rank, fit.rng(seed), n_threads, adaptive,
                                      precision)

    alpha, trace, n_iter = solve_pcg(
        local, preconditioner=preconditioner_kind("block_rpcholesky"), rank=rank, tol=tol,
        max_iter=max_iter, seed=seed, validation=None, verbose=verbose and state.rank == 0,
        max_memory=max_memory, n_threads=n_threads, adaptive=adaptive, precision=precision,
        rows=rows, build=build)
    evidence = Evidence(column_quads(local.Y, alpha), None, fit.n)
    return ExactKRR(gathered_X(rows), alpha, n_iter=n_iter, solver_trace=trace,
                    evidence=evidence, **fit.inputs.model_params(n_jobs))
