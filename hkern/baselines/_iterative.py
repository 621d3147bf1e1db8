"""What the iterative fits share (fit_exact(solver="pcg"), fit_nystrom(solver="pcg")): argument
checks for the stopping rule and the validation set, the validation error per iteration, the
progress lines and the record of an iterative solve on the model (:class:`SolverTrace`)."""
from __future__ import annotations

import time
import warnings
from dataclasses import dataclass

import numpy as np

from .._model import prepare_fit
from .._targets import encode_targets, on_target_grid, target_scale
from .._validation import check_array, check_int, check_positive, check_targets, scale_inputs
from ..kernels._api import _kernel_matvec_trusted
from ..solvers import ConvergenceWarning, block_pcg

__all__ = ["LosingCandidate", "SelectionProblem", "SolverTrace", "check_early_validation",
           "check_stopping", "check_validation", "traced_pcg", "validation_error"]


@dataclass
class SolverTrace:
    """How an iterative fit went, one entry per iteration (index 0: before the first).

    Attributes
    ----------
    residuals : ndarray (n_iter + 1, k)
        Relative residual of each output column: ||y_j - A alpha_j|| / ||y_j|| of the system
        CG solves (for fit_exact K + lam I; for fit_nystrom FALKON's preconditioned normal
        equations).
    seconds : ndarray (n_iter + 1,)
        Seconds since the solve started (after the preconditioner).
    validation_error : ndarray (n_iter + 1,) or None
        The validation set's RMSE (regression) or error rate (classification), if one was given.
    preconditioner : str
        How its columns (fit_exact) or the centres (fit_nystrom) were chosen.
    rank : int
        Columns of the Nystrom preconditioner (fit_exact) or Nystrom centres (fit_nystrom).
    preconditioner_seconds : float
    stored_kernel : bool
        Whether the kernel matrix was stored (else recomputed at every iteration).
    converged : bool
        Whether every column's true relative residual ``true_residual`` met tol.
    jitter : float
        Added to the diagonal of the centres' kernel matrix so that it factorises
        (fit_nystrom; 0 for fit_exact).
    true_residual : ndarray (k,)
        ||b_j - A x_j|| / ||b_j|| of the returned solution, recomputed at the end (``residuals``
        are the recursion's, which can drift from it).
    """

    residuals: np.ndarray
    seconds: np.ndarray
    validation_error: object
    preconditioner: str
    rank: int
    preconditioner_seconds: float
    stored_kernel: bool
    converged: bool
    jitter: float = 0.0
    true_residual: np.ndarray | None = None


def check_stopping(tol, max_iter):
    """(tol, max_iter) checked: 0 < tol < 1, max_iter >= 1."""
    tol = check_positive(tol, "tol", "the relative residual at which CG stops, e.g. 1e-3")
    if tol >= 1:
        raise ValueError(f"tol must be < 1, got {tol:g}: the relative residual at which CG stops "
                         "is 1 at the start (x = 0), so CG would stop before its first "
                         "iteration; e.g. 1e-3")
    return tol, check_int(max_iter, "max_iter", low=1)


def check_validation(validation, inputs, min_samples=1):
    """``validation`` checked against the prepared fit ``inputs``: None, or (X_val, Y_val) with
    X_val scaled as X was (ARD) and Y_val encoded as the targets (labels for classification).
    ``min_samples=0`` for one MPI rank's validation rows."""
    if validation is None:
        return None
    try:
        X_val, y_val = validation
    except (TypeError, ValueError):
        raise ValueError("validation must be a pair (X_val, y_val)") from None
    X_val = check_array(X_val, "validation X", min_samples=min_samples)
    if X_val.shape[1] != inputs.X.shape[1]:
        raise ValueError(f"validation X has {X_val.shape[1]} features but X has "
                         f"{inputs.X.shape[1]}")
    if inputs.lengthscales is not None:
        X_val = scale_inputs(X_val, inputs.lengthscales, "validation X")
    # Checked as training targets are (NaN, inf, missing labels, length), by their own name.
    classify = inputs.encoding.task == "classification"
    y_val = check_targets(y_val, X_val.shape[0], "validation y", numeric=not classify,
                          x_name="validation X")
    if not classify:
        y_val, _ = encode_targets(y_val, X_val.shape[0])
        if y_val.shape[1] != inputs.Y.shape[1]:
            raise ValueError(f"validation y has {y_val.shape[1]} outputs but y has "
                             f"{inputs.Y.shape[1]}")
    return X_val, y_val


def validation_error(validation, inputs, centres, n_threads):
    """A function of the coefficients on ``centres`` (f(x) = k(x, centres) coef): the validation
    RMSE (regression) or error rate (classification); None without a validation set."""
    if validation is None:
        return None

    def error(coef):
        return error_from_sums(inputs, *validation_sums(validation, inputs, centres, coef,
                                                        n_threads))
    return error


def validation_sums(validation, inputs, centres, coef, n_threads):
    """(errors, count) of the model f(x) = k(x, centres) coef on the validation set: wrong
    labels and labels (classification), or squared residuals and entries (regression)."""
    X_val, Y_val = validation
    if X_val.shape[0] == 0:                     # an MPI rank without validation rows
        return 0.0, 0
    scores = _kernel_matvec_trusted(inputs.kind, inputs.bandwidth, X_val, centres, coef,
                                    n_threads)
    if inputs.encoding.task == "classification":
        return float(np.sum(inputs.encoding.decode(scores) != Y_val)), len(Y_val)
    return float(np.sum((scores - Y_val) ** 2)), Y_val.size


def error_from_sums(inputs, errors, count):
    """The validation error rate (classification) or RMSE (regression) from its sums."""
    value = errors / count if count else np.nan
    return float(value if inputs.encoding.task == "classification" else np.sqrt(value))


def traced_pcg(apply_a, B, *, apply_m, tol, max_iter, error, coef, label, verbose, started,
               fix, x0=None, **details):
    """:func:`hkern.solvers.block_pcg` with the progress of an iterative fit: the validation
    ``error`` of ``coef(iterate)`` after every iteration (if given), one printed line per
    iteration with ``verbose``, and a :class:`hkern.ConvergenceWarning` naming ``fix`` when
    ``max_iter`` stops it.  Returns (solution, :class:`SolverTrace` with ``details`` (its
    preconditioner fields), iterations of the slowest column)."""
    errors = []

    def report(iteration, X, residuals):
        if error is not None:
            errors.append(error(coef(X)))
        if verbose:
            line = f"[{label}] iteration {iteration:4d}  residual {residuals.max():.3e}"
            if error is not None:
                line += f"  validation {errors[-1]:.6g}"
            print(line + f"  ({time.perf_counter() - started:.1f} s)", flush=True)

    result = block_pcg(apply_a, B, apply_m=apply_m, tol=tol, max_iter=max_iter, callback=report,
                       **({} if x0 is None else {"x0": x0}))
    if not result.converged.all():
        why = _why_not_converged(result, max_iter)
        warnings.warn(f"{label} {why}: the true relative residual ||b - A x|| / ||b|| is "
                      f"{result.true_residual.max():.3g} > tol={tol:g}"
                      + (f"; {fix}" if why.startswith("stopped at max_iter") else ""),
                      ConvergenceWarning, stacklevel=4)
    trace = SolverTrace(residuals=np.array(result.residuals), seconds=np.array(result.seconds),
                        validation_error=np.array(errors) if error is not None else None,
                        converged=bool(result.converged.all()),
                        true_residual=result.true_residual, **details)
    return result.X, trace, int(result.n_iter.max()) if B.shape[1] else 0


def _why_not_converged(result, max_iter):
    """What stopped a solve short of tol, for its warning (:class:`hkern.solvers.CGResult`)."""
    failed = ~result.converged
    if result.reset[failed].any():
        return ("returns its start (zero or the warm start): its last iterate's residual was "
                "larger, which floating point allows at this conditioning (raise lam)")
    if (result.n_iter[failed] >= max_iter).any():
        return f"stopped at max_iter={max_iter}"
    return ("met tol in its recursion, but its residual recomputed from the solution did not, "
            "even after a restart: that is the accuracy attainable at this conditioning in "
            "floating point (raise lam, or accept a larger tol)")


def check_early_validation(arguments, X, encoding):
    """The fit's ``validation`` checked as the fit will check it, before a hyperparameter
    selection starts any work (``X`` checked, ``encoding`` the targets')."""
    a = arguments
    if a["validation"] is not None:
        check_validation(a["validation"], prepare_fit(
            X[:1], np.asarray(a["y"])[:1], kernel=a["kernel"], sigma=1.0, lam=1.0,
            task=a["task"], classes=encoding.classes))


# When a candidate of the iterative hyperparameter selection is clearly losing (see
# SelectionProblem.losing_stopper).  On kin40k a bandwidth 0.64x the best took 227 s to reach
# a hold-out error 2.1x the best's.
LOSING_FACTOR = 1.5
LOSING_MIN_ITER = 10
LOSING_WINDOW = 5
LOSING_PROGRESS = 0.05


class LosingCandidate(Exception):
    """Raised inside CG when a selection's candidate is clearly losing; ``mse`` its hold-out
    error then (an upper bound of where it was heading, far above the best)."""

    def __init__(self, mse):
        super().__init__(mse)
        self.mse = mse


class SelectionProblem:
    """What the two iterative fits' views for the hyperparameter selection share
    (:class:`hkern.hyperparameters.iterative.IterativeProblem`): the checked data, the fit's
    inputs on some rows at candidate values, and the hold-out error of coefficients."""

    def __init__(self, arguments, X, encoding, tol, max_iter):
        self.a, self.X, self.tol, self.max_iter = arguments, X, tol, max_iter
        self.y = np.asarray(arguments["y"])
        self.classes = encoding.classes
        self.set_target_scale(target_scale(self.y) if self.classes is None else 1.0)

    def set_target_scale(self, scale):
        """The candidates fit y / ``scale`` on a grid (hkern._targets.on_target_grid: c * y
        then gives the same candidates, so the same choice); the final fit fits y, its warm
        start times ``scale``.  Classification: labels, scale 1."""
        self.y_scale = scale
        self.y_candidates = self.y if self.classes is not None else on_target_grid(self.y, scale)

    def to_user_units(self, value, criterion):
        """A candidate's criterion value (of the candidates' targets) for the user's y: minus a
        mean squared error times scale^2; a log likelihood of k outputs at n rows minus
        n k log(scale)."""
        if not np.isfinite(value) or self.y_scale == 1.0:
            return value
        if criterion == "holdout":
            return value * self.y_scale ** 2
        k = 1 if self.y.ndim == 1 else self.y.shape[1]
        return value - self.X.shape[0] * k * float(np.log(self.y_scale))

    def _inputs(self, rows, sigma, lam, final=False):
        """The fit's checked inputs on ``rows`` (None: all) at (sigma, lam): of the candidates'
        targets, or with ``final`` of the user's."""
        y = self.y if final else self.y_candidates
        X, y = (self.X, y) if rows is None else (self.X[rows], y[rows])
        return prepare_fit(X, y, kernel=self.a["kernel"], sigma=sigma, lam=lam,
                           task=self.a["task"], max_memory=self.a["max_memory"],
                           classes=self.classes)

    def final_start(self, x0):
        """A candidate's state as the final fit's warm start (in the user's units of y)."""
        return None if x0 is None else x0 * self.y_scale

    def losing_stopper(self, inputs, held, centres, best_mse, n_threads):
        """An ``error`` for :func:`traced_pcg` that raises :class:`LosingCandidate` once a
        candidate is clearly losing: after LOSING_MIN_ITER iterations, its hold-out error is
        above LOSING_FACTOR times the best candidate's and fell by less than LOSING_PROGRESS
        of itself over the last LOSING_WINDOW iterations (CG's iterates approach the
        solution monotonically in the A-norm, so such a candidate ends far behind).  Checked
        every LOSING_WINDOW iterations, at one product with the held-out rows each."""
        history = []

        def error(coef):
            history.append(None)
            it = len(history) - 1           # 0: the start
            if best_mse is None or it < LOSING_MIN_ITER or it % LOSING_WINDOW:
                return np.nan
            history[it] = self.held_out_mse(inputs, held, centres, coef, n_threads)
            before = history[it - LOSING_WINDOW]
            if history[it] > LOSING_FACTOR * best_mse and before is not None \
                    and before - history[it] < LOSING_PROGRESS * history[it]:
                raise LosingCandidate(history[it])
            return history[it]
        return error

    def held_out_mse(self, inputs, held, centres, coef, n_threads):
        """Mean squared error of the scores k(x, centres) coef on the rows ``held`` against
        their encoded targets (one-vs-rest +-1 for classification)."""
        total, count = self.held_out_sums(inputs, held, centres, coef, n_threads)
        return float(total / count)

    def held_out_sums(self, inputs, held, centres, coef, n_threads):
        """(sum of squared errors, entries) of :meth:`held_out_mse` (0, 0 without rows)."""
        if len(held) == 0:
            return 0.0, 0
        X_held = self.X[held]
        if inputs.lengthscales is not None:
            X_held = scale_inputs(X_held, inputs.lengthscales)
        scores = _kernel_matvec_trusted(inputs.kind, inputs.bandwidth, X_held, centres, coef,
                                        n_threads)
        target, _ = encode_targets(self.y_candidates[held], len(held), self.a["task"],
                                   self.classes)
        return float(np.sum((scores - target) ** 2)), scores.size
