"""fit_nystrom(..., solver="pcg", comm=comm): FALKON on data sharded over MPI ranks.

Each rank holds its rows of X and y.  The centres are drawn from the global index range (the
same draw as the serial fit of the concatenated data; or, for ``landmarks="oasis"``, selected
by oASIS-P on the shards, the serial selection) and their rows sent by their owners, so
every rank holds the m centres and the m x m preconditioner (both small).  Each CG iteration
runs the kernel engine's product C^T (C v) over the rank's rows and combines the ranks' partial
sums in the serial engine's order (:class:`hkern.kernels.sharded.ShardedNormalTimes`: a
point-to-point message where a slab of rows crosses a shard boundary, then one allgather of the
slabs' m x k sums).  Everything else runs identically on every rank.  So for a given seed the
centres, every CG iterate, the coefficients and the predictions are bit for bit those of the
serial fit of the concatenated shards, for any number of ranks and any shard sizes.  The model
predicts locally: each rank passes its own test points.
"""
from __future__ import annotations

import numpy as np

from .._gp import Evidence
from .._memory import check_memory
from .._mpi import Agreed
from .._parameters import check_parameter
from .._sharded import digest, gather_rows, prepare_sharded_fit, sum_over_ranks, total_of
from .._targets import exact_sums
from .._threads import in_budget
from .._validation import check_choice
from ..kernels._kernels import normal_times_layout
from ..kernels.sharded import ShardedNormalTimes
from ..oasis.landmarks import check_landmarks, landmark_rows
from ..solvers import falkon_bytes
from ..solvers.falkon import solve_falkon
from ..solvers.trace import check_stopping, check_validation, error_from_sums, validation_sums
from .checks import check_precision
from .model import NystromKRR
from .posterior import falkon_posterior, falkon_posterior_bytes

__all__ = ["fit_nystrom_sharded"]

SHARDED_LANDMARKS = ("uniform", "oasis")


def fit_nystrom_sharded(state, *, X, y, r, kernel, sigma, lam, task, seed, n_jobs, landmarks,
                        rcond, solver, tol, max_iter, validation, criterion="auto", verbose,
                        max_memory, comm, precision="auto", start=None):
    """The sharded fit_nystrom (module docstring); arguments as fit_nystrom's, X and y this
    rank's rows, ``validation`` this rank's validation rows (or None on every rank).
    ``start``: a :class:`~hkern.solvers.falkon.FalkonStart` on the same centres, the same on
    every rank (the hyperparameter selection's warm start: its beta, and the factors this fit
    reuses at the same lam)."""
    def check_arguments():
        check_parameter("solver", solver, "fit_nystrom")
        check_precision(precision, solver, sharded=True)
        if solver == "direct":
            raise ValueError("fit_nystrom on sharded data (comm=...) runs FALKON: pass "
                             "solver='pcg'")
        if isinstance(landmarks, str):
            check_choice(landmarks, "landmarks", SHARDED_LANDMARKS)
        return check_stopping(tol, max_iter), check_parameter("verbose", verbose)

    stopping = state.run(check_arguments)
    arguments = dict(r=r, kernel=kernel, sigma=np.asarray(sigma).tolist()
                     if not isinstance(sigma, str) else sigma, lam=lam, task=task,
                     seed=seed if seed is None or np.isscalar(seed) else "generator",
                     landmarks=landmarks if isinstance(landmarks, str) else
                     digest(np.asarray(landmarks)),
                     tol=tol, max_iter=max_iter, solver=solver,
                     validation=validation is not None)
    fit = prepare_sharded_fit(state, X, y, kernel=kernel, sigma=sigma, lam=lam, task=task,
                              n_jobs=n_jobs, max_memory=max_memory, arguments=arguments)
    (tol, max_iter), verbose = stopping
    with in_budget(n_jobs) as n_threads:
        return _fit(state, fit, r, landmarks, seed, tol, max_iter, validation, verbose,
                    max_memory, n_threads, NystromKRR, n_jobs, start)


def _centres(fit, r, landmarks, rng):
    """Sorted global row indices of the centres: given, r drawn uniformly without replacement
    from the n global rows exactly as the serial fit draws them, or None for "oasis" (chosen
    collectively by :func:`_oasis_centres`)."""
    landmarks, r = check_landmarks(landmarks, r, fit.n)
    return landmark_rows(landmarks, r, fit.n, rng)


def _oasis_centres(state, fit, r, rng, max_memory):
    """The centres oASIS selects, by oASIS-P on the shards: the serial selection (the same
    columns for the same generator), sorted as the serial fit sorts them."""
    from ..oasis.sharded import oasis_mpi
    inputs = fit.inputs
    try:
        selection = oasis_mpi(inputs.X, r, kernel=inputs.kernel, sigma=inputs.bandwidth,
                              seed=rng, n_jobs=fit.n_threads, comm=state.comm, gather=False,
                              max_memory=max_memory)
    except Exception as exc:        # oasis_mpi raises its errors on every rank alike
        raise Agreed(exc) from None
    return np.sort(selection.indices_)


def _fit(state, fit, r, landmarks, seed, tol, max_iter, validation, verbose, max_memory,
         n_threads, model_class, n_jobs, start=None):
    inputs = fit.inputs
    rng = fit.rng(seed)

    def local():
        indices = _centres(fit, r, landmarks, rng)
        m = len(indices) if indices is not None else min(r, fit.n)
        n_local, d = inputs.X.shape
        # Beside the serial FALKON's memory for its rows and the centres: the rows of its
        # kernel blocks (its own and a block's worth from the next rank), kept with their
        # shift by the centres' mean when the data are far from the origin (two copies).
        block_rows = n_local + normal_times_layout(fit.n, m)[0]
        check_memory(max(falkon_bytes(n_local, m, d, inputs.Y.shape[1], n_threads),
                         falkon_posterior_bytes(n_local, m, d)) + 8 * m * d
                     + 16 * block_rows * d + inputs.scaled_bytes, max_memory,
                     what=f"fit_nystrom on rank {state.rank} of {state.size} with {n_local} "
                          f"of n={fit.n} rows, r={m}",
                     fix="choose a smaller r or use more ranks")
        checked = check_validation(validation, inputs, min_samples=0)
        return indices, checked

    out = state.run(local)
    reports = state.agree(None if out is None or out[0] is None else digest(out[0]))
    if len(set(reports)) > 1:
        raise Agreed(ValueError("fit_nystrom drew different centres on different ranks: pass "
                                "seed as an int (or None), the same on every rank"))
    indices, checked = out
    if indices is None:
        indices = _oasis_centres(state, fit, r, rng, max_memory)
    Z = gather_rows(state, fit.offsets, inputs.X, indices)
    normal_times = ShardedNormalTimes(state, fit.offsets, inputs.X, Z, inputs.kind,
                                      inputs.bandwidth, n_threads)
    energy = total_of(state.agree(state.run(lambda: exact_sums(inputs.Y * inputs.Y)))).sum()
    coef, trace, n_iter, quad = solve_falkon(
        inputs, Z, landmarks=landmarks, tol=tol, max_iter=max_iter, validation=None,
        verbose=verbose and state.rank == 0, n_threads=n_threads,
        x0=None if start is None else start.beta,
        error=_validation_error(state, checked, inputs, Z, n_threads),
        n_total=fit.n, normal_times=normal_times, energy=energy,
        system=None if start is None else start.system_on(inputs.X, inputs.lam, normal_times))
    L, R = falkon_posterior(inputs, Z, trace.jitter, n_threads,
                            lambda gram: sum_over_ranks(state, lambda: gram))
    return model_class(Z, indices, coef, Z.shape[0], n_iter=n_iter, solver_trace=trace,
                       jitter=trace.jitter, landmark_factor=L, posterior_factor=R,
                       evidence=Evidence(quad, None, fit.n), **inputs.model_params(n_jobs))


def _validation_error(state, validation, inputs, centres, n_threads):
    """The validation RMSE or error rate over every rank's validation rows (a collective: every
    rank calls it at every iteration), or None without a validation set."""
    if validation is None:
        return None

    def error(coef):
        return error_from_sums(inputs, *sum_over_ranks(state, lambda: np.array(
            validation_sums(validation, inputs, centres, coef, n_threads), dtype=float)))
    return error
