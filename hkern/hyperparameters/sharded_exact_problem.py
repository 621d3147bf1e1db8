"""The sharded fit_exact(solver="pcg", comm=comm) as its hyperparameter selection sees it
(:class:`ShardedExactPCGProblem`): the serial view
(:class:`hkern.hyperparameters.exact_pcg_problem.ExactPCGProblem`) on the concatenated shards,
run collectively on every rank, bit for bit.

A hold-out candidate is the sharded solve on every rank's rows outside the held-out tenth
(which, in rank order, are the serial candidate's rows): those rows' own segments
(:func:`hkern.solvers.sharded_pcg.shard_rows`), the serial preconditioner and CG.  The held-out
rows are few (a tenth), so every rank holds all of them and computes their scores as the serial
candidate does (:func:`hkern.solvers.operators.kernel_cross`), the candidate's X passing a block
of columns at a time.  The final fit reuses the chosen candidate's factor as the serial fit
does: rebuilt from its pivots, or extended to the held-out rows, whose rows of the factor every
rank computes (and their F^T F, as the serial extension sums it).
"""
from __future__ import annotations

import warnings

import numpy as np

from .._gp import Evidence, column_quads
from .._model import prepare_fit
from .._mpi import RankState, offsets_of
from .._sharded import collective_step, gather_rows, total_of
from .._targets import exact_sums
from .._threads import budget_threads
from .._validation import check_seed, scale_inputs
from ..kernels.sharded import fetch_rows
from ..solvers import ConvergenceWarning
from ..solvers.exact_pcg import _EXTEND_ROWS, _nystrom_rows, solve_pcg
from ..solvers.operators import kernel_cross
from ..solvers.preconditioners import NystromPreconditioner, float64_gram
from ..solvers.sharded_pcg import (
    gathered_X,
    shard_rows,
    sharded_preconditioner,
)
from .exact_pcg_problem import ExactPCGProblem, _CandidateFit
from .iterative_problem import LosingCandidate, as_columns, stop_when_losing

__all__ = ["ShardedExactPCGProblem"]


class ShardedExactPCGProblem(ExactPCGProblem):
    """The sharded fit_exact(solver="pcg") as the hyperparameter selection asks for it (the
    hold-out criterion; regression).

    Parameters
    ----------
    state : hkern._mpi.RankState
    shards : hkern._sharded.ShardedFit
        The checked shards.
    arguments : dict
        The call's arguments, ``seed`` the selection's int.
    rank, tol, max_iter
        The PCG arguments, checked.
    model, preconditioner
        As :class:`~hkern.hyperparameters.exact_pcg_problem.ExactPCGProblem`'s.
    """

    def __init__(self, state, shards, arguments, rank, tol, max_iter, *, model, preconditioner):
        inputs = shards.inputs
        super().__init__(arguments, inputs.X, inputs.encoding, rank, tol, max_iter, model=model,
                         preconditioner=preconditioner)
        self.state, self.shards = state, shards

    def _sharded_inputs(self, rows, sigma, lam, final=False):
        """(inputs of this rank's segments, their kernel rows, the inputs of its shard) for the
        fit on the global ``rows`` (None: all) at (sigma, lam): the serial _inputs on every
        rank's part of them, with the mean of all of them."""
        state = RankState(self.state.comm, self.state.label)
        take = slice(None) if rows is None else self.shards.local_indices(rows)
        y = (self.y if final else self.y_candidates)[take]
        X = self.X[take]

        def local():
            scaled = X if np.ndim(sigma) == 0 else X / np.asarray(sigma)
            largest = float(np.abs(scaled).max()) if scaled.size else 0.0
            return largest, exact_sums(as_columns(y))

        out = state.run(local)
        reports = state.agree(None if out is None else (*out, len(y)))
        largest, sums, counts = zip(*reports)
        inputs = state.run(prepare_fit, X, y, kernel=self.a["kernel"], sigma=sigma, lam=lam,
                           task=self.a["task"], max_memory=self.a["max_memory"],
                           classes=self.classes, min_samples=0, largest=max(largest),
                           offset=total_of(sums).mean())
        state.agree()
        offsets = offsets_of(counts)
        local_inputs, kernel_rows = shard_rows(state, offsets, inputs)
        return local_inputs, kernel_rows, offsets

    def _build(self, kernel_rows, inputs, n_threads):
        """The preconditioner builder of solve_pcg, as the serial fit's (the call's seed)."""
        def build(precision):
            return sharded_preconditioner(kernel_rows, inputs, self.rank,
                                          check_seed(self.a["seed"]), n_threads,
                                          self.a["r"] is None, precision)
        return build

    def _held(self, held, lengthscales):
        """Every held-out row's scaled X and candidates' targets, on every rank."""
        X = gather_rows(self.state, self.shards.offsets, self.X, held)
        y = gather_rows(self.state, self.shards.offsets, as_columns(self.y_candidates), held)
        return scale_inputs(X, lengthscales), y.reshape((len(held),) + self.y.shape[1:])

    def holdout(self, rows, held, sigma, lam, x0, tol, best_mse):
        return collective_step(self.state, self.label, self._holdout_on_shards, rows, held,
                               sigma, lam, x0, tol, best_mse)

    def _holdout_on_shards(self, rows, held, sigma, lam, x0, tol, best_mse):
        inputs, kernel_rows, _ = self._sharded_inputs(rows, sigma, lam)
        n_threads = budget_threads()
        X_held, y_held = self._held(held, inputs.lengthscales)

        def mse(coef):
            scores = kernel_cross(inputs.kind, inputs.bandwidth, X_held, kernel_rows, coef,
                                  n_threads)
            total, count = self.squared_errors(inputs, y_held, scores)
            return float(total / count)

        precision = self.holdout_precision(inputs, tol, n_threads, kernel_rows)
        build = self._build(kernel_rows, inputs, n_threads)
        for attempt in (precision, "double"):
            try:
                apply_m = x0.preconditioner.with_lam(inputs.lam) \
                    if x0 is not None and x0.preconditioner is not None else build(attempt)
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", ConvergenceWarning)
                    alpha, _, _ = solve_pcg(
                        inputs, preconditioner=self.preconditioner, rank=self.rank, tol=tol,
                        max_iter=self.max_iter, seed=self.a["seed"], validation=None,
                        verbose=False, max_memory=self.a["max_memory"], n_threads=n_threads,
                        x0=None if x0 is None else x0.alpha, apply_m=apply_m,
                        precision=attempt, error=stop_when_losing(mse, best_mse), recheck=False,
                        rows=kernel_rows, build=build)
                break
            except LosingCandidate as losing:
                return losing.mse, None
            except np.linalg.LinAlgError:
                # As serially: float32's rounding made the system indefinite, so this
                # candidate in double (from zero).
                if attempt != "mixed" or self.a["precision"] == "mixed":
                    raise
                x0 = None
        return mse(alpha), self._state(alpha, apply_m, rows)

    def extend(self, state, rows):
        full = np.zeros((self.shards.n, state.alpha.shape[1]))
        full[rows] = state.alpha
        return _CandidateFit(full, state.preconditioner, state.preconditioner_rows,
                             state.pivots, state.pivot_factor, state.gram)

    def likelihood(self, sigma, lam, x0, tol, n_probes, seed):
        raise ValueError("fit_exact on sharded data selects by hold-out error only")

    def final(self, sigma, lam, x0):
        return collective_step(self.state, self.label, self._final_on_shards, sigma, lam, x0)

    def _final_on_shards(self, sigma, lam, x0):
        inputs, kernel_rows, _ = self._sharded_inputs(None, sigma, lam, final=True)
        n_threads = budget_threads()
        apply_m, start = self._final_start_on_shards(inputs, kernel_rows, x0, n_threads)
        alpha, trace, n_iter = solve_pcg(
            inputs, preconditioner=self.preconditioner, rank=self.rank, tol=self.tol,
            max_iter=self.max_iter, seed=self.a["seed"], validation=None,
            verbose=bool(self.a["verbose"]) and self.state.rank == 0,
            max_memory=self.a["max_memory"], n_threads=n_threads, x0=start, apply_m=apply_m,
            adaptive=self.a["r"] is None, precision=self.a["precision"], rows=kernel_rows,
            build=self._build(kernel_rows, inputs, n_threads))
        del apply_m
        evidence = Evidence(column_quads(inputs.Y, alpha), None, self.shards.n)
        return self.model(gathered_X(kernel_rows), alpha, n_iter=n_iter, solver_trace=trace,
                          evidence=evidence, **inputs.model_params(self.a["n_jobs"]))

    def _final_start_on_shards(self, inputs, kernel_rows, x0, n_threads):
        """The serial _final_start on shards: the chosen candidate's factor rebuilt from its
        pivots or extended to the held-out rows (each rank its rows of it), or none."""
        if x0 is None:
            return None, None
        kept, rows = x0.preconditioner, x0.preconditioner_rows
        x0.preconditioner = None
        start = self.final_start(x0.alpha)
        span = kernel_rows.span
        if x0.pivots is not None:
            if self.a["r"] is None and x0.pivots.size < self.rank:
                return None, None
            return self._from_pivots(inputs, kernel_rows, x0.pivots, x0.pivot_factor, x0.gram,
                                     rows, n_threads), start
        if kept is None:
            return None, start
        if rows is None:
            return kept.with_lam(inputs.lam), start
        if self.a["r"] is None and kept.rank < self.rank:
            return None, None
        # extended_preconditioner: the candidate's rows of F moved to this layout's segments,
        # the held-out rows' computed from the pivots (on every rank, with their F^T F).
        held = np.setdiff1d(np.arange(span.n), rows, assume_unique=True)
        T = np.tril(kept.span.rows_at(kept.F, kept.pivots).astype(np.float64))
        Z = kernel_rows.rows_at(rows[kept.pivots])
        F_held, gram = self._held_factor(
            inputs, kernel_rows, held, Z, T, kept.F.dtype, kept.gram.copy(), n_threads,
            [held[i:i + _EXTEND_ROWS] for i in range(0, len(held), _EXTEND_ROWS)])
        cand_bounds = kept.span.bounds
        wanted = [(int(np.searchsorted(rows, a)), int(np.searchsorted(rows, b)))
                  for a, b in span.bounds]
        moved = fetch_rows(self.state, np.array([a for a, _ in cand_bounds] + [len(rows)]),
                           kept.F, wanted).astype(kept.F.dtype)
        F = np.empty((span.hi - span.lo, kept.rank), dtype=kept.F.dtype)
        mine = np.arange(span.lo, span.hi)
        is_held = np.isin(mine, held)
        F[~is_held] = moved
        F[is_held] = F_held[np.searchsorted(held, mine[is_held])]
        return NystromPreconditioner(F, inputs.lam, n_threads, pivots=rows[kept.pivots],
                                     gram=gram, span=span), start

    def _from_pivots(self, inputs, kernel_rows, pivots, T, gram, rows, n_threads):
        """preconditioner_from_pivots on shards: F = K(X, Z) T^{-T} on this rank's rows, and
        F^T F from the candidate's plus the held-out rows' (computed on every rank, summed as
        the serial function sums them: by blocks of _EXTEND_ROWS of all rows)."""
        span = kernel_rows.span
        Z = kernel_rows.rows_at(pivots)
        k = T.shape[0]
        m = span.hi - span.lo
        F = np.empty((m, k))
        # (no F^T F of these rows: the candidate's gram holds its rows', the held rows' below)
        _nystrom_rows(F, np.arange(m), inputs.X, Z, T, inputs.kind, inputs.bandwidth,
                      n_threads, None, np.zeros(m, dtype=bool))
        if rows is None:
            gram = gram.copy()
        else:
            held = np.setdiff1d(np.arange(span.n), rows, assume_unique=True)
            blocks = [held[(held >= a) & (held < a + _EXTEND_ROWS)]
                      for a in range(0, span.n, _EXTEND_ROWS)]
            _, gram = self._held_factor(inputs, kernel_rows, held, Z, T, np.float64,
                                        gram.copy(), n_threads, blocks)
        return NystromPreconditioner(F, inputs.lam, n_threads, pivots=np.asarray(pivots),
                                     gram=gram, span=span)

    def _held_factor(self, inputs, kernel_rows, held, Z, T, dtype, gram, n_threads, blocks):
        """F at the held-out rows (every rank all of them), K(X_held, Z) T^{-T} by blocks of
        _EXTEND_ROWS, and ``gram`` plus their F^T F added by ``blocks`` (lists of held rows, in
        the serial function's order)."""
        X_held = kernel_rows.rows_at(held)
        F_held = np.empty((len(held), T.shape[0]), dtype=dtype)
        _nystrom_rows(F_held, np.arange(len(held)), X_held, Z, T, inputs.kind, inputs.bandwidth,
                      n_threads, None, np.zeros(len(held), dtype=bool))
        for block in blocks:
            if len(block):
                gram += float64_gram(F_held[np.searchsorted(held, block)], n_threads)
        return F_held, gram
