"""fit_exact(solver="pcg") as its iterative hyperparameter selection sees it
(:class:`ExactPCGProblem`, an :class:`hkern.hyperparameters.iterative.IterativeProblem`): exact
KRR by preconditioned CG (:mod:`hkern.solvers.exact_pcg`) on some rows for the hold-out
criterion or on all of them for the stochastic likelihood, and the final fit, each candidate
keeping what the next one and the final fit reuse (:class:`_CandidateFit`)."""
from __future__ import annotations

import time
import warnings
from dataclasses import dataclass, replace

import numpy as np

from .._gp import Evidence, column_quads
from .._memory import resolve_max_memory
from .._parameters import check_parameter
from .._threads import budget_threads
from ..solvers import ConvergenceWarning, KernelSystem
from ..solvers.exact_pcg import (
    auto_precision,
    extended_preconditioner,
    kernel_storage,
    preconditioner_for,
    preconditioner_from_pivots,
    solve_pcg,
)
from ..solvers.operators import SerialRows, kernel_cross
from ..solvers.slq import stochastic_lml
from ..solvers.trace import check_validation
from .iterative_problem import LosingCandidate, SelectionProblem

__all__ = ["ExactPCGProblem"]


@dataclass
class _CandidateFit:
    """A selection candidate's solution as
    :func:`~hkern.hyperparameters.iterative.select_iterative` keeps it (its ``state``):
    the coefficients, and the preconditioner they were solved with (None when keeping it
    would not fit, or when a search over bandwidths kept its pivots), built on
    ``preconditioner_rows`` (None: all rows).  The next candidate at the same bandwidth starts
    from both, the final fit from both extended to all rows.  No two candidates of a search
    over bandwidths share a factor, and a kept float64 one doubled the selection's peak
    memory (kin40k in double: 2.05 GiB against 1.0 for a fit): such a candidate keeps its
    factor's ``pivots`` (rows of X), ``pivot_factor`` T (F at them, k x k) and ``gram``
    (F^T F) instead, from which the final fit rebuilds F on all rows
    (:func:`hkern.solvers.exact_pcg.preconditioner_from_pivots`).
    """

    alpha: np.ndarray
    preconditioner: object
    preconditioner_rows: np.ndarray | None
    pivots: np.ndarray | None = None
    pivot_factor: np.ndarray | None = None
    gram: np.ndarray | None = None


class ExactPCGProblem(SelectionProblem):
    """fit_exact(solver="pcg") as :func:`hkern.hyperparameters.iterative.select_iterative`
    asks for it: candidate fits on some rows, the stochastic likelihood, the final fit.

    Built by the fit (``hkern.exact.api._selection_problem``) from its checked arguments, with
    what this package, below the fits, does not import: ``model``, the model class of the final
    fit (:class:`hkern.exact.ExactKRR`, called as the fit calls it), and ``preconditioner``,
    the :class:`~hkern.solvers.preconditioners.PreconditionerKind` of the call.

    A candidate's state (:class:`_CandidateFit`) keeps its preconditioner, so that a candidate
    at the best one's bandwidth (differing in lam) builds no new Nystrom factor, and the final
    fit extends the chosen hold-out candidate's factor to the held-out rows instead of
    building one (kin40k: 0.4 s against 5.6 s).  A search over bandwidths keeps the factor's
    pivots instead, and the final fit rebuilds the factor from them."""

    label = "fit_exact(solver='pcg')"

    def __init__(self, arguments, X, encoding, rank, tol, max_iter, *, model, preconditioner):
        super().__init__(arguments, X, encoding, tol, max_iter)
        self.rank = rank
        self.model, self.preconditioner = model, preconditioner
        # sigma "auto" or "ard": the search moves the bandwidth, and no two candidates share
        # a factor (_CandidateFit).
        self.moves_bandwidth = isinstance(arguments["sigma"], str)
        # The likelihood's candidates run mixed only when asked to; "auto" decides for the
        # final fit (float32_reach).
        self._candidate_precision = "mixed" if arguments["precision"] == "mixed" else "double"

    def _preconditioner(self, inputs, x0, precision):
        """M^{-1} for these inputs: the warm start's at the new lam, or a new one."""
        if x0 is not None and x0.preconditioner is not None:
            return x0.preconditioner.with_lam(inputs.lam)
        return preconditioner_for(inputs, self.preconditioner, self.rank, seed=self.a["seed"],
                                  n_threads=budget_threads(), max_memory=self.a["max_memory"],
                                  adaptive=self.a["r"] is None, precision=precision)

    def _state(self, alpha, apply_m, rows):
        """The candidate's state: where the search moves the bandwidth, its float64 factor's
        pivots, T and F^T F (_CandidateFit); else its preconditioner, when three factors of
        its size fit max_memory (the kept one, the next candidate's and the final fit's
        extension)."""
        F = getattr(apply_m, "F", None)
        pivots = getattr(apply_m, "pivots", None)
        # Only a float64 factor: T rounded to float32 made the factor rebuilt from it on all
        # rows a poor preconditioner (pol, mixed: a selection of 39.6 s against 13.3 s, test
        # RMSE 0.1107 against 0.1077), and a float32 factor kept costs half the memory.
        # (F's rows on all n, which on MPI ranks spread over them: apply_m.span)
        if self.moves_bandwidth and pivots is not None and F.dtype == np.float64:
            return _CandidateFit(alpha, None, rows,
                                 pivots=pivots if rows is None else rows[pivots],
                                 pivot_factor=np.tril(apply_m.span.rows_at(F, pivots)),
                                 gram=apply_m.gram)
        keep = F is not None and 3 * F.itemsize * apply_m.span.n * F.shape[1] \
            <= resolve_max_memory(self.a["max_memory"])
        return _CandidateFit(alpha, apply_m if keep else None, rows)

    def holdout(self, rows, held, sigma, lam, x0, tol, best_mse):
        inputs = self._inputs(rows, sigma, lam)
        n_threads = budget_threads()
        # A hold-out candidate runs in the precision the final fit would choose at its
        # values: its loose tol is where float32 is safest (pol: candidates in double took
        # longer than the mixed final fit).
        precision = self.holdout_precision(inputs, tol, n_threads)
        try:
            return self._holdout(inputs, held, x0, tol, best_mse, n_threads, rows, precision)
        except np.linalg.LinAlgError:
            if precision != "mixed" or self.a["precision"] == "mixed":
                raise
            # float32's rounding made the system indefinite here: this candidate in double.
            return self._holdout(inputs, held, None, tol, best_mse, n_threads, rows, "double")

    def holdout_precision(self, inputs, tol, n_threads, rows=None):
        """The precision of a hold-out candidate: the call's, or for "auto" the one the
        final fit would choose at its values (``rows``: where its rows live, solve_pcg)."""
        return self.a["precision"] if self.a["precision"] != "auto" else \
            auto_precision(inputs, tol, n_threads, rows)

    def _holdout(self, inputs, held, x0, tol, best_mse, n_threads, rows, precision):
        apply_m = self._preconditioner(inputs, x0, precision)
        try:
            with warnings.catch_warnings():
                # A candidate stopped at max_iter is still ranked by its error; the final fit
                # warns.
                warnings.simplefilter("ignore", ConvergenceWarning)
                alpha, _, _ = solve_pcg(
                    inputs, preconditioner=self.preconditioner, rank=self.rank, tol=tol,
                    max_iter=self.max_iter, seed=self.a["seed"], validation=None,
                    verbose=False, max_memory=self.a["max_memory"], n_threads=n_threads,
                    x0=None if x0 is None else x0.alpha, apply_m=apply_m, precision=precision,
                    error=self.losing_stopper(inputs, held, inputs.X, best_mse, n_threads),
                    recheck=False)
        except LosingCandidate as losing:
            return losing.mse, None
        return (self.held_out_mse(inputs, held, inputs.X, alpha, n_threads),
                self._state(alpha, apply_m, rows))

    def scores(self, inputs, X_held, centres, coef, n_threads):
        """k(X_held, X) coef summed as the candidate's kernel system sums its products
        (:func:`hkern.solvers.operators.kernel_cross`: the numbers a sharded candidate
        computes too)."""
        return kernel_cross(inputs.kind, inputs.bandwidth, X_held, SerialRows(centres), coef,
                            n_threads)

    def extend(self, state, rows):
        """A state on ``rows`` as a warm start on all rows: the coefficients zero on the
        others (the preconditioner is extended by the final fit)."""
        full = np.zeros((self.X.shape[0], state.alpha.shape[1]))
        full[rows] = state.alpha
        return replace(state, alpha=full)

    def likelihood(self, sigma, lam, x0, tol, n_probes, seed):
        """The profiled log marginal likelihood of all rows by stochastic Lanczos quadrature
        (:func:`hkern.solvers.slq.stochastic_lml`): y and ``n_probes`` probes in one block CG,
        the probes the same draw for every candidate (a smooth criterion)."""
        inputs = self._inputs(None, sigma, lam)
        n_threads = budget_threads()
        stored = kernel_storage(inputs, inputs.Y.shape[1] + n_probes, self.rank,
                                self.preconditioner, self.a["max_memory"], n_threads)
        apply_m = self._preconditioner(inputs, x0, self._candidate_precision)
        apply_a = KernelSystem(inputs.kind, inputs.bandwidth, inputs.X, inputs.lam,
                               stored=stored, n_threads=n_threads)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            estimate = stochastic_lml(apply_a, inputs.Y, apply_m, n_probes=n_probes,
                                      rng=np.random.default_rng([seed, 2]), tol=tol,
                                      max_iter=self.max_iter,
                                      x0=None if x0 is None else x0.alpha)
        return (estimate.profiled_lml, estimate.lml_stderr,
                self._state(estimate.alpha, apply_m, None))

    def _final_start(self, inputs, x0):
        """The final fit's M^{-1} and warm start from the chosen candidate ``x0``: its factor
        rebuilt on all rows from its pivots (a search over bandwidths), or kept as it is when
        built on all rows, or extended to them when built on the hold-out candidates' rows
        (in its own precision: the operator's is the solver's choice, the factor only
        preconditions), and its coefficients.  None for the factor when the candidate kept
        none (the solver builds one).  The candidate's factor is released first."""
        if x0 is None:
            return None, None
        kept, rows = x0.preconditioner, x0.preconditioner_rows
        x0.preconditioner = None
        start = self.final_start(x0.alpha)
        if x0.pivots is not None:
            if self.a["r"] is None and x0.pivots.size < self.rank:
                return None, None       # as below: a new factor from zero
            return preconditioner_from_pivots(
                x0.pivots, x0.pivot_factor, inputs.X, inputs.kind, inputs.bandwidth,
                inputs.lam, budget_threads(), gram=x0.gram, rows=rows), start
        if kept is None:
            return None, start
        if rows is None:
            return kept.with_lam(inputs.lam), start
        if self.a["r"] is None and kept.rank < self.rank:
            # The residual rule stopped the candidate's factor early: it was cheap, and CG
            # needs few iterations.  A new factor meets the rule on all rows (the extension
            # leaves the held-out rows' residual unchecked), and from zero CG skips the
            # product a warm start costs; keggundirected: 1 iteration of 3.0 s, against 3
            # and the start's product with the extended factor and the candidate's solution.
            return None, None
        return extended_preconditioner(kept, inputs.X, rows, inputs.kind, inputs.bandwidth,
                                       inputs.lam, budget_threads(),
                                       self.a["max_memory"]), start

    def final(self, sigma, lam, x0):
        inputs = self._inputs(None, sigma, lam, final=True)
        validation = check_validation(self.a["validation"], inputs)
        t0 = time.perf_counter()
        apply_m, start = self._final_start(inputs, x0)
        alpha, trace, n_iter = solve_pcg(
            inputs, preconditioner=self.preconditioner, rank=self.rank, tol=self.tol,
            max_iter=self.max_iter, seed=self.a["seed"], validation=validation,
            verbose=check_parameter("verbose", self.a["verbose"]), max_memory=self.a["max_memory"],
            n_threads=budget_threads(), x0=start, apply_m=apply_m,
            preconditioner_seconds=time.perf_counter() - t0,
            adaptive=self.a["r"] is None, precision=self.a["precision"])
        del apply_m
        evidence = Evidence(column_quads(inputs.Y, alpha), None, inputs.X.shape[0])
        return self.model(inputs.X, alpha, n_iter=n_iter, solver_trace=trace, evidence=evidence,
                          **inputs.model_params(self.a["n_jobs"]))
