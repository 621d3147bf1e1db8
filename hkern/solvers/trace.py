"""What the iterative fits share (fit_exact(solver="pcg"), fit_nystrom(solver="pcg")): argument
checks for the stopping rule and the validation set, the validation error per iteration, the
progress lines and the record of an iterative solve on the model (:class:`SolverTrace`)."""
from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass

import numpy as np

from .._model import prepare_fit
from .._parameters import check_parameter, choices_of
from .._progress import listening, report
from .._targets import encode_targets
from .._validation import (
    check_array,
    check_targets,
    scale_inputs,
    warn_user,
)
from ..kernels._api import _kernel_matvec_trusted
from .cg import ConvergenceWarning, block_pcg

__all__ = ["PRECISIONS", "SolverTrace", "check_early_validation", "check_stopping",
           "check_validation", "error_from_sums", "traced_pcg", "validation_error",
           "validation_sums"]


# The arithmetic of an iterative fit (``precision=``): float64 throughout, or the kernel's
# products (and the preconditioner's factors) in float32 with float64 vectors and sums.
PRECISIONS = choices_of("precision", "fit_exact")


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
        Whether every column's true relative residual ``true_residual`` met tol, in the system
        CG solved: K + lam I for fit_exact (in float64 whatever the precision); for FALKON the
        preconditioned normal equations, whose regulariser in mixed precision is the float32
        factors' (``float64_model_residual`` is the same answer's residual in the float64
        model, and can exceed tol while this is True).
    jitter : float
        Added to the diagonal of the centres' kernel matrix so that it factorises
        (fit_nystrom; 0 for fit_exact).
    true_residual : ndarray (k,)
        ||b_j - A x_j|| / ||b_j|| of the returned solution, recomputed at the end (``residuals``
        are the recursion's, which can drift from it).
    precision : str
        "double"; "mixed": the products were computed in single precision and
        ``true_residual`` against the float64 system; "mixed, then double": the mixed solve
        could not meet tol and double precision went on from it (``precision="auto"``);
        "mixed (stalled), then double": the mixed recursion stopped approaching tol
        (:class:`MixedPrecisionStall`) and double precision went on from its iterate (the
        record and the iteration count are the double solve's).
    float64_model_residual : float or None
        FALKON in mixed precision: the answer's relative residual in the float64 model, whose
        regulariser is lam W where the float32 factors' is lam (W + jitter I + float32's
        rounding of W) (:meth:`hkern.solvers.FalkonSystem.float64_model_residual`); None
        otherwise.
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
    precision: str = "double"
    float64_model_residual: float | None = None


def check_stopping(tol, max_iter):
    """(tol, max_iter) checked: 0 < tol < 1, max_iter >= 1."""
    return check_parameter("tol", tol), check_parameter("max_iter", max_iter)


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
        outputs = 1 if y_val.ndim == 1 else y_val.shape[1]
        if outputs != inputs.Y.shape[1]:
            raise ValueError(f"validation y has {outputs} outputs but y has "
                             f"{inputs.Y.shape[1]}")
        # Centred by the training mean: compared with the scores of the centred fit.
        y_val, _ = encode_targets(y_val, X_val.shape[0], offset=inputs.encoding.offset)
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


# A mixed-precision solve has stalled when its best residual fell by less than a tenth over
# this many iterations, or half of those so far (a weak preconditioner's slow plateaus are
# not stalls): the float32 products' rounding then holds the recursion above tol
# (keggundirected at sigma 8.3, lam 0.1: the residual stopped at 1.6e-3 after 13
# iterations of 4 s, then rose, and would have gone on to max_iter).
MIXED_STALL_WINDOW = 10
# ... at a residual of at most this: float32's rounding holds a recursion far below 1 where
# "auto" runs mixed (MIXED_MAX_REACH), and a plateau higher up is CG's own with a weak
# preconditioner (n = 300, rank 20: 0.65 to 0.52 over iterations 15 to 25, then on to tol).
MIXED_STALL_BELOW = 1e-2
# ... or, at any residual, when the median residual of that window is above this many times
# the best: the recursion has left its best and does not come back, float32's rounding having
# broken CG's orthogonality.  Exact PCG on 3000 kin40k rows, sigma 5, lam 1e-4: best 0.039 at
# iteration 6, the window's median 4.4 times that at iteration 16 and 7-13 times it up to
# max_iter = 1000 (true residual 0.87).  FALKON on kin40k, 2048 centres, sigma 20, lam 1e-6:
# best 0.025 at iteration 11, medians 1.6-2.5 times the best to max_iter (double: tol in 9
# iterations).  A slow plateau that still falls by a tenth per window has its median within
# about 1.1 of its best.
MIXED_DIVERGED = 1.5


class MixedPrecisionStall(np.linalg.LinAlgError):
    """A single-precision recursion that stopped approaching tol; ``X`` is its iterate after
    ``iterations``."""

    def __init__(self, message, X, iterations):
        super().__init__(message)
        self.X, self.iterations = X, iterations


def traced_pcg(apply_a, B, *, apply_m, tol, max_iter, error, coef, label, verbose, started,
               fix, x0=None, exact_a=None, precision="double", recheck=True, replace_below=None,
               **details):
    """:func:`hkern.solvers.block_pcg` with the progress of an iterative fit: the validation
    ``error`` of ``coef(iterate)`` after every iteration (if given), one printed line per
    iteration with ``verbose``, and a :class:`hkern.ConvergenceWarning` naming ``fix`` when
    ``max_iter`` stops it.  Returns (solution, :class:`SolverTrace` with ``details`` (its
    preconditioner fields), iterations of the slowest column).  ``exact_a``: the float64
    operator when ``apply_a`` computes in single precision (``precision="mixed"``;
    :func:`hkern.solvers.block_pcg`; a mixed recursion whose best residual, at most
    MIXED_STALL_BELOW, does not fall by a tenth in MIXED_STALL_WINDOW iterations, or half of
    those so far, raises :class:`MixedPrecisionStall`, as does one whose median residual over
    that window is above MIXED_DIVERGED times its best).
    ``recheck``: block_pcg's (False only where the solution is judged otherwise, as a
    selection's candidates are)."""
    errors, best, history, times = [], [], [], []

    def on_iteration(iteration, X, residuals):
        history.append(float(residuals.max()))
        best.append(min(history[-1], best[-1] if best else np.inf))
        window = max(MIXED_STALL_WINDOW, iteration // 2)    # slow but steady is not stalled
        if precision == "mixed" and iteration > window and tol < best[-1] \
                and best[-1] > 0.9 * best[-1 - window]:
            if best[-1] <= MIXED_STALL_BELOW:
                raise MixedPrecisionStall(
                    f"{label}: single-precision CG stalled at relative residual "
                    f"{best[-1]:.3g} > tol={tol:g} (float32's rounding of the kernel outweighs "
                    "lam here); use precision='double' (or 'auto', which goes on in it)",
                    X.copy(), iteration)
            typical = float(np.median(history[-window:]))
            if typical > MIXED_DIVERGED * best[-1]:
                raise MixedPrecisionStall(
                    f"{label}: single-precision CG stopped converging: its relative residual "
                    f"reached {best[-1]:.3g} and has stayed above it since (median "
                    f"{typical:.3g} over the last {window} iterations), float32's rounding of "
                    "the kernel outweighing lam here; use precision='double' (or 'auto', which "
                    "goes on in it)", X.copy(), iteration)
        if error is not None:
            errors.append(error(coef(X)))
        times.append(time.perf_counter())
        if listening(verbose):
            line = f"[{label}] iteration {iteration:4d}  residual {residuals.max():.3e}"
            if error is not None and np.isfinite(errors[-1]):   # (nan: not measured now)
                line += f"  validation {errors[-1]:.6g}"
            left = seconds_left(history, times, tol, max_iter - iteration)
            report(line + f"  ({times[-1] - started:.1f} s{left})", verbose)

    result = block_pcg(apply_a, B, apply_m=apply_m, tol=tol, max_iter=max_iter,
                       callback=on_iteration,
                       exact_a=exact_a, recheck=recheck, replace_below=replace_below,
                       **({} if x0 is None else {"x0": x0}))
    if not result.converged.all():
        why = _why_not_converged(result, max_iter)
        if precision == "mixed" and not why.startswith("stopped at max_iter"):
            why += "; or precision='double', whose products are exact to float64"
        elif precision == "mixed":
            fix += ("; in single precision, float32's rounding of the products can slow CG "
                    "where lam is small: precision='double' may need far fewer iterations")
        warn_user(f"{label} {why}: the true relative residual ||b - A x|| / ||b|| is "
                  f"{result.true_residual.max():.3g} > tol={tol:g}"
                  + (f"; {fix}" if why.startswith("stopped at max_iter") else ""),
                  ConvergenceWarning)
    trace = SolverTrace(residuals=np.array(result.residuals), seconds=np.array(result.seconds),
                        validation_error=np.array(errors) if error is not None else None,
                        converged=bool(result.converged.all()),
                        true_residual=result.true_residual, precision=precision, **details)
    return result.X, trace, int(result.n_iter.max()) if B.shape[1] else 0


# The estimate of time left reads the residual's rate of decrease over the last iterations.
_RATE_WINDOW = 10


def seconds_left(residuals, times, tol, iterations_left):
    """``", about N s left"``: the time until the largest residual reaches tol at the rate it
    fell over the last _RATE_WINDOW iterations (at most ``iterations_left`` more), or ``""``
    before there is a rate to read (fewer than two iterations, or no decrease)."""
    w = min(_RATE_WINDOW, len(residuals) - 1)
    if w < 1 or residuals[-1] <= tol or residuals[-1 - w] <= residuals[-1] \
            or residuals[-1] <= 0:
        return ""
    rate = (np.log(residuals[-1 - w]) - np.log(residuals[-1])) / w
    iterations = min(np.log(residuals[-1] / tol) / rate, max(iterations_left, 0))
    return f", about {iterations * (times[-1] - times[-1 - w]) / w:.0f} s left"


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


def joined_trace(first, then, precision="mixed, then double"):
    """One SolverTrace for a mixed-precision solve continued in double precision: the
    residuals, times and validation errors in sequence, the preconditioners' seconds added."""
    def join(a, b, offset=0.0):
        return None if a is None else np.concatenate([a, b[1:] + offset])
    return dataclasses.replace(
        then, residuals=np.concatenate([first.residuals, then.residuals[1:]]),
        seconds=join(first.seconds, then.seconds, first.seconds[-1]),
        validation_error=join(first.validation_error, then.validation_error),
        preconditioner_seconds=first.preconditioner_seconds + then.preconditioner_seconds,
        stored_kernel=first.stored_kernel, precision=precision)
