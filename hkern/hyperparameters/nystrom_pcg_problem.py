"""fit_nystrom(solver="pcg") as its iterative hyperparameter selection sees it
(:class:`NystromPCGProblem`, an :class:`hkern.hyperparameters.iterative.IterativeProblem`):
FALKON (:mod:`hkern.solvers.falkon`) on the centres of the final fit, on some rows for the
hold-out criterion or on all of them for the stochastic likelihood, and the final fit."""
from __future__ import annotations

import math
import warnings

import numpy as np

from .._gp import Evidence, profiled_gaussian_lml
from .._memory import check_memory
from .._parameters import check_parameter
from .._threads import budget_threads
from .._validation import check_seed, scale_inputs
from ..oasis.landmarks import draw_landmarks
from ..solvers import ConvergenceWarning, FalkonSystem, falkon_bytes
from ..solvers.falkon import FalkonStart, solve_falkon
from ..solvers.preconditioners import IdentityPreconditioner
from ..solvers.slq import stochastic_lml
from ..solvers.trace import check_validation
from .iterative_problem import LosingCandidate, SelectionProblem

__all__ = ["NystromPCGProblem"]


class NystromPCGProblem(SelectionProblem):
    """fit_nystrom(solver="pcg") as :func:`hkern.hyperparameters.iterative.select_iterative`
    asks for it.

    Every candidate uses the centres of the final fit (drawn once, by the seed, from all the
    rows; an adaptive selector chooses them again for each bandwidth), so a candidate's beta
    is a warm start for the next one and for the final fit.  A hold-out candidate fits the
    rows outside the held-out part on those centres (centres are locations, not targets).
    The final fit reuses the chosen candidate's factors (:meth:`FalkonSystem.on_rows`), and
    so does a candidate at the same bandwidth and lam.

    Built by the fit (``hkern.nystrom.api._selection_problem``) from its checked arguments,
    with ``model``, the model class of the final fit (:class:`hkern.nystrom.NystromKRR`, called
    as the fit calls it), and ``posterior(inputs, Z, jitter, n_threads)``, the fit's: the
    model's posterior arguments (serially a :class:`hkern.nystrom.posterior.DeferredPosterior`,
    made when the std is first asked for), which this package, below the fits, does not
    import."""

    label = "fit_nystrom(solver='pcg')"
    keeps_float32 = True

    def __init__(self, arguments, X, encoding, landmarks, r, tol, max_iter, *, model,
                 posterior):
        super().__init__(arguments, X, encoding, tol, max_iter)
        self.landmarks, self.r, self.model, self.posterior = landmarks, r, model, posterior
        self._centres_key, self._indices = None, None

    def _centres(self, sigma):
        """Rows of the centres: drawn once, or selected again for each bandwidth."""
        adaptive = isinstance(self.landmarks, str) and self.landmarks != "uniform"
        key = np.asarray(sigma, dtype=float).tobytes() if adaptive else None
        if self._indices is None or key != self._centres_key:
            inputs = self._inputs(None, sigma, 1.0)
            self._indices = draw_landmarks(
                inputs.X, self.r, self.landmarks, kind=inputs.kind, bandwidth=inputs.bandwidth,
                rng=check_seed(self.a["seed"]), n_jobs=budget_threads(),
                max_memory=self.a["max_memory"])
            self._centres_key = key
        return self._indices

    def _scaled_centres(self, inputs, sigma, k):
        """(rows, Z): the centres for ``sigma`` in the inputs' units, after checking that
        FALKON with k right-hand sides fits max_memory."""
        indices = self._centres(sigma)
        Z = scale_inputs(self.X[indices], inputs.lengthscales)     # float64, always
        n, d = inputs.X.shape
        check_memory(falkon_bytes(n, len(indices), d, k, budget_threads(), self.a["precision"],
                                  inputs.X.dtype) + inputs.scaled_bytes, self.a["max_memory"],
                     what=f"fit_nystrom with n={n}, r={len(indices)}", fix="choose a smaller r")
        return indices, np.ascontiguousarray(Z)

    def _solve(self, inputs, sigma, tol, x0, validation=None, verbose=False, best_mse=None,
               held=None):
        """FALKON from the state ``x0`` (or None): its beta, and its system when the lam is
        the same (its factors then precondition these rows too)."""
        indices, Z = self._scaled_centres(inputs, sigma, inputs.Y.shape[1])
        error = None if held is None else self.losing_stopper(inputs, held, Z, best_mse,
                                                              budget_threads())
        coef, trace, n_iter, quad, beta, system = solve_falkon(
            inputs, Z, landmarks=self.landmarks, tol=tol, max_iter=self.max_iter,
            validation=validation, verbose=verbose, n_threads=budget_threads(),
            x0=None if x0 is None else x0.beta,
            system=None if x0 is None else x0.system_on(inputs.X, inputs.lam),
            return_beta=True, error=error, precision=self.a["precision"])
        return indices, Z, coef, trace, n_iter, quad, FalkonStart.kept(
            beta, system, self.a["max_memory"])

    def holdout(self, rows, held, sigma, lam, x0, tol, best_mse):
        inputs = self._inputs(rows, sigma, lam)
        try:
            with warnings.catch_warnings():
                # A candidate stopped at max_iter is still ranked by its error; the final fit
                # warns.
                warnings.simplefilter("ignore", ConvergenceWarning)
                _, Z, coef, _, _, _, state = self._solve(inputs, sigma, tol, x0,
                                                      best_mse=best_mse, held=held)
        except LosingCandidate as losing:
            return losing.mse, None
        return self.held_out_mse(inputs, held, Z, coef, budget_threads()), state

    def extend(self, state, rows):
        """The same centres on all rows: the state carries over as it is."""
        return state

    def likelihood(self, sigma, lam, x0, tol, n_probes, seed):
        """The profiled log marginal likelihood of the Nystrom GP (kernel matrix C W^-1 C^T)
        of all rows, its log-determinant estimated by stochastic Lanczos quadrature on
        FALKON's own preconditioned system B^T H B (m x m, close to the identity, so that few
        CG steps and probes suffice; :meth:`hkern.solvers.FalkonSystem.logdet_factor`)."""
        inputs = self._inputs(None, sigma, lam)
        n_threads = budget_threads()
        n, k = inputs.X.shape[0], inputs.Y.shape[1]
        indices, Z = self._scaled_centres(inputs, sigma, k + n_probes)
        m = len(indices)
        system = (None if x0 is None else x0.system_on(inputs.X, inputs.lam)) or FalkonSystem(
            inputs.kind, inputs.bandwidth, inputs.X, Z, inputs.lam, n_threads)
        CtY = system._normal_times(None, inputs.Y)
        rhs = system._solve_a(system._solve_t(CtY, trans=True), trans=True)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            estimate = stochastic_lml(system, rhs, IdentityPreconditioner(m),
                                      n_probes=n_probes, rng=np.random.default_rng([seed, 2]),
                                      tol=tol, max_iter=self.max_iter,
                                      x0=None if x0 is None else x0.beta)
        alpha = system.coef(estimate.alpha)
        quad = (np.einsum("ij,ij->j", inputs.Y, inputs.Y)
                - np.einsum("ij,ij->j", CtY, alpha)) / inputs.lam
        logdet = (n - m) * math.log(inputs.lam) + estimate.logdet + 2 * system.logdet_factor()
        value = profiled_gaussian_lml(quad, logdet, n) if np.all(quad > 0) else -math.inf
        return (float(value), 0.5 * k * estimate.logdet_stderr,
                FalkonStart.kept(estimate.alpha, system, self.a["max_memory"]))

    def final(self, sigma, lam, x0):
        inputs = self._inputs(None, sigma, lam, final=True)
        validation = check_validation(self.a["validation"], inputs)
        if x0 is not None:
            x0 = FalkonStart(self.final_start(x0.beta), x0.system)
        indices, Z, coef, trace, n_iter, quad, _ = self._solve(
            inputs, sigma, self.tol, x0, validation=validation,
            verbose=check_parameter("verbose", self.a["verbose"]))
        posterior = self.posterior(inputs, Z, trace.jitter, budget_threads())
        return self.model(Z, indices, coef, Z.shape[0], n_iter=n_iter, solver_trace=trace,
                          jitter=trace.jitter, **posterior,
                          evidence=Evidence(quad, None, inputs.X.shape[0]),
                          **inputs.model_params(self.a["n_jobs"]))
