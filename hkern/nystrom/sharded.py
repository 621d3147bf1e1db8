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

import warnings

import numpy as np

from .._memory import check_memory
from .._model import prepare_fit
from .._mpi import Agreed, RankState, offsets_of
from .._parameters import check_parameter
from .._sharded import digest, gather_rows, prepare_sharded_fit, sum_over_ranks
from .._threads import budget_threads, in_budget
from .._validation import check_choice, check_seed, scale_inputs
from ..hyperparameters.iterative_problem import LosingCandidate, SelectionProblem
from ..kernels._kernels import normal_times_layout
from ..kernels.sharded import ShardedNormalTimes
from ..oasis.landmarks import check_landmarks, landmark_rows
from ..solvers import ConvergenceWarning, falkon_bytes
from ..solvers.falkon import FalkonStart, solve_falkon
from ..solvers.trace import check_stopping, check_validation, error_from_sums, validation_sums
from .model import NystromKRR, check_precision

__all__ = ["ShardedNystromProblem", "fit_nystrom_sharded"]

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
        check_memory(falkon_bytes(n_local, m, d, inputs.Y.shape[1], n_threads) + 8 * m * d
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
    coef, trace, n_iter = solve_falkon(
        inputs, Z, landmarks=landmarks, tol=tol, max_iter=max_iter, validation=None,
        verbose=verbose and state.rank == 0, n_threads=n_threads,
        x0=None if start is None else start.beta,
        error=_validation_error(state, checked, inputs, Z, n_threads),
        n_total=fit.n, normal_times=normal_times,
        system=None if start is None else start.system_on(inputs.X, inputs.lam, normal_times))
    return model_class(Z, indices, coef, Z.shape[0], n_iter=n_iter, solver_trace=trace,
                       evidence=None, **inputs.model_params(n_jobs))


def _validation_error(state, validation, inputs, centres, n_threads):
    """The validation RMSE or error rate over every rank's validation rows (a collective: every
    rank calls it at every iteration), or None without a validation set."""
    if validation is None:
        return None

    def error(coef):
        return error_from_sums(inputs, *sum_over_ranks(state, lambda: np.array(
            validation_sums(validation, inputs, centres, coef, n_threads), dtype=float)))
    return error


class ShardedNystromProblem(SelectionProblem):
    """The sharded fit_nystrom(solver="pcg") as the hyperparameter selection asks for it
    (:class:`hkern.hyperparameters.iterative.IterativeProblem`; the hold-out criterion only).

    The serial :class:`hkern.nystrom.api.NystromPCGProblem` on the concatenated shards,
    collectively: the centres are drawn once from the global index range, a hold-out candidate
    is the sharded FALKON on every rank's rows outside the held-out part (which, in rank order,
    are the serial candidate's rows), and its hold-out error sums every rank's held-out rows.

    Parameters
    ----------
    state : hkern._mpi.RankState
    shards : hkern._sharded.ShardedFit
        The checked shards.
    arguments : dict
        The call's arguments, ``seed`` the selection's int.
    sharded_fit : callable
        :func:`fit_nystrom_sharded`, for the final fit.

    The candidates' target scale is this shard's until the caller sets the global one
    (``set_target_scale``; :func:`hkern.hyperparameters.sharded.select_nystrom_on_shards`).
    """

    label = "fit_nystrom(solver='pcg')"

    def __init__(self, state, shards, arguments, sharded_fit):
        a = arguments
        inputs = shards.inputs
        super().__init__(a, inputs.X, inputs.encoding, None, None)
        self.state, self.shards, self.sharded_fit = state, shards, sharded_fit

        def check():
            check_parameter("solver", a["solver"], "fit_nystrom")
            if a["solver"] != "pcg":
                raise ValueError("fit_nystrom on sharded data (comm=...) runs FALKON: pass "
                                 "solver='pcg'")
            if isinstance(a["landmarks"], str) and a["landmarks"] != "uniform":
                raise ValueError("fit_nystrom on sharded data (comm=...) selects sigma and lam "
                                 "with centres drawn uniformly: pass landmarks='uniform' or "
                                 "row indices")
            return check_stopping(a["tol"], a["max_iter"]), _centres(
                shards, a["r"], a["landmarks"], check_seed(a["seed"]))

        out = state.run(check)
        state.agree()
        (self.tol, self.max_iter), self.indices = out
        self.landmarks = a["landmarks"]
        self.centres = gather_rows(state, shards.offsets, inputs.X, self.indices)

    def _local(self, rows):
        """This rank's rows among the sorted global ``rows``, as indices into its shard."""
        lo, hi = self.shards.lo, self.shards.hi
        return rows[(rows >= lo) & (rows < hi)] - lo

    def holdout(self, rows, held, sigma, lam, x0, tol, best_mse):
        try:
            return self._holdout(rows, held, sigma, lam, x0, tol, best_mse)
        except Agreed as agreed:    # on every rank: the selection skips the candidate alike
            raise agreed.error from agreed.cause

    def _holdout(self, rows, held, sigma, lam, x0, tol, best_mse):
        state = RankState(self.state.comm, self.state.label)
        train, mine = self._local(rows), self._local(held)
        n_threads = budget_threads()

        def local():
            X = self.X[train]
            scaled = X if np.ndim(sigma) == 0 else X / np.asarray(sigma)
            largest = float(np.abs(scaled).max()) if scaled.size else 0.0
            return X, largest

        out = state.run(local)
        reports = state.agree(None if out is None else (len(train), out[1]))
        counts, largest = zip(*reports)
        inputs = state.run(prepare_fit, out[0], self.y_candidates[train], kernel=self.a["kernel"],
                           sigma=sigma, lam=lam, task=self.a["task"],
                           max_memory=self.a["max_memory"], classes=self.classes, min_samples=0,
                           largest=max(largest))
        Z = self.centres if inputs is None or inputs.lengthscales is None else \
            np.ascontiguousarray(scale_inputs(self.centres, inputs.lengthscales))
        state.run(lambda: check_memory(
            falkon_bytes(len(train), len(Z), Z.shape[1], inputs.Y.shape[1], n_threads)
            + 16 * len(train) * Z.shape[1] + inputs.scaled_bytes, self.a["max_memory"],
            what=f"fit_nystrom on rank {state.rank} of {state.size} with {len(train)} rows, "
                 f"r={len(Z)}", fix="choose a smaller r or use more ranks"))
        state.agree()
        offsets = offsets_of(counts)
        try:
            with warnings.catch_warnings():
                # A candidate stopped at max_iter is still ranked by its error; the final fit
                # warns.
                warnings.simplefilter("ignore", ConvergenceWarning)
                normal_times = ShardedNormalTimes(state, offsets, inputs.X, Z, inputs.kind,
                                                  inputs.bandwidth, n_threads)
                coef, _, _, beta, system = solve_falkon(
                    inputs, Z, landmarks=self.landmarks, tol=tol, max_iter=self.max_iter,
                    validation=None, verbose=False, n_threads=n_threads,
                    x0=None if x0 is None else x0.beta,
                    system=None if x0 is None else x0.system_on(inputs.X, inputs.lam,
                                                                normal_times),
                    return_beta=True, error=self.losing_stopper(inputs, mine, Z, best_mse,
                                                                n_threads),
                    n_total=int(offsets[-1]), normal_times=normal_times)
        except LosingCandidate as losing:
            return losing.mse, None
        return (self.held_out_mse(inputs, mine, Z, coef, n_threads),
                FalkonStart.kept(beta, system, self.a["max_memory"]))

    def held_out_mse(self, inputs, held, centres, coef, n_threads):
        """The mean squared error over every rank's held-out rows (``held``: this rank's, as
        indices into its shard); a collective."""
        total = sum_over_ranks(RankState(self.state.comm, self.state.label), lambda: np.array(
            self.held_out_sums(inputs, held, centres, coef, n_threads), dtype=float))
        return float(total[0] / total[1])

    def extend(self, start, rows):
        """The same centres on all rows: the start carries over as it is."""
        return start

    def likelihood(self, sigma, lam, x0, tol, n_probes, seed):
        raise ValueError("fit_nystrom on sharded data selects by hold-out error only")

    def final(self, sigma, lam, x0):
        return self.sharded_fit(RankState(self.state.comm, self.state.label),
                                **dict(self.a, sigma=sigma, lam=lam),
                                start=None if x0 is None else FalkonStart(
                                    self.final_start(x0.beta), x0.system))
