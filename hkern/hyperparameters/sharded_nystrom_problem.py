"""The sharded fit_nystrom(solver="pcg", comm=comm) as its hyperparameter selection sees it
(:class:`ShardedNystromProblem`): the serial FALKON view on the concatenated shards, run
collectively on every rank (:mod:`hkern.hyperparameters.sharded`)."""
from __future__ import annotations

import warnings

import numpy as np

from .._memory import check_memory
from .._model import prepare_fit
from .._mpi import RankState, offsets_of
from .._parameters import check_parameter
from .._sharded import collective_step, gather_rows, sum_over_ranks, total_of
from .._targets import exact_sums
from .._threads import budget_threads
from .._validation import check_seed, scale_inputs
from ..kernels.sharded import ShardedNormalTimes
from ..oasis.landmarks import check_landmarks, landmark_rows
from ..solvers import ConvergenceWarning, falkon_bytes
from ..solvers.falkon import FalkonStart, solve_falkon
from ..solvers.trace import check_stopping
from .iterative_problem import LosingCandidate, SelectionProblem

__all__ = ["ShardedNystromProblem"]


class ShardedNystromProblem(SelectionProblem):
    """The sharded fit_nystrom(solver="pcg") as the hyperparameter selection asks for it
    (:class:`hkern.hyperparameters.iterative.IterativeProblem`; the hold-out criterion only).

    The serial :class:`hkern.hyperparameters.nystrom_pcg_problem.NystromPCGProblem` on the
    concatenated shards,
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
        :func:`hkern.nystrom.sharded.fit_nystrom_sharded`, for the final fit (given by the fit,
        which this package, below the fits, does not import).

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
            landmarks, r = check_landmarks(a["landmarks"], a["r"], shards.n)
            # The sharded fit's centres: the given rows, or drawn uniformly from all n.
            return check_stopping(a["tol"], a["max_iter"]), landmark_rows(
                landmarks, r, shards.n, check_seed(a["seed"]))

        out = state.run(check)
        state.agree()
        (self.tol, self.max_iter), self.indices = out
        self.landmarks = a["landmarks"]
        self.centres = gather_rows(state, shards.offsets, inputs.X, self.indices)

    def holdout(self, rows, held, sigma, lam, x0, tol, best_mse):
        # An error every rank agreed on is skipped alike; one on this rank alone ends them all.
        return collective_step(self.state, self.label, self._holdout, rows, held, sigma, lam,
                               x0, tol, best_mse)

    def _holdout(self, rows, held, sigma, lam, x0, tol, best_mse):
        state = RankState(self.state.comm, self.state.label)
        train, mine = self.shards.local_indices(rows), self.shards.local_indices(held)
        n_threads = budget_threads()

        y = self.y_candidates[train]

        def local():
            X = self.X[train]
            scaled = X if np.ndim(sigma) == 0 else X / np.asarray(sigma)
            largest = float(np.abs(scaled).max()) if scaled.size else 0.0
            # The candidate's mean: of every rank's training rows, as the serial candidate's.
            sums = None if self.classes is not None else exact_sums(
                y.reshape(len(train), 1 if y.ndim == 1 else y.shape[1]))
            return X, largest, sums

        out = state.run(local)
        reports = state.agree(None if out is None else (len(train), *out[1:]))
        counts, largest, sums = zip(*reports)
        inputs = state.run(prepare_fit, out[0], y, kernel=self.a["kernel"],
                           sigma=sigma, lam=lam, task=self.a["task"],
                           max_memory=self.a["max_memory"], classes=self.classes, min_samples=0,
                           largest=max(largest),
                           offset=None if self.classes is not None else total_of(sums).mean())
        Z = self.centres if inputs is None or inputs.lengthscales is None else \
            np.ascontiguousarray(scale_inputs(self.centres, inputs.lengthscales))
        state.run(lambda: check_memory(
            falkon_bytes(len(train), len(Z), Z.shape[1], inputs.Y.shape[1], n_threads)
            + 16 * len(train) * Z.shape[1] + inputs.scaled_bytes, self.a["max_memory"],
            what=f"fit_nystrom on rank {state.rank} of {state.size} with {len(train)} rows, "
                 f"r={len(Z)}", fix="choose a smaller r or use more ranks"))
        state.agree()
        offsets = offsets_of(counts)
        # every rank's y^T y: FALKON scales the targets by its root as the serial fit does
        energy = total_of(state.agree(state.run(
            lambda: exact_sums(inputs.Y * inputs.Y)))).sum()
        try:
            with warnings.catch_warnings():
                # A candidate stopped at max_iter is still ranked by its error; the final fit
                # warns.
                warnings.simplefilter("ignore", ConvergenceWarning)
                normal_times = ShardedNormalTimes(state, offsets, inputs.X, Z, inputs.kind,
                                                  inputs.bandwidth, n_threads)
                coef, _, _, _, beta, system = solve_falkon(
                    inputs, Z, landmarks=self.landmarks, tol=tol, max_iter=self.max_iter,
                    validation=None, verbose=False, n_threads=n_threads,
                    x0=None if x0 is None else x0.beta,
                    system=None if x0 is None else x0.system_on(inputs.X, inputs.lam,
                                                                normal_times),
                    return_beta=True, error=self.losing_stopper(inputs, mine, Z, best_mse,
                                                                n_threads),
                    n_total=int(offsets[-1]), normal_times=normal_times, energy=energy)
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
